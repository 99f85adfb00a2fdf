"""Fuzzing the bounds: generated heavy inputs run as `python -m dse` in a subprocess under a
1 GiB address-space limit (RLIMIT_AS) and a 20 s timeout (fuzzing.dse_subprocess), so that a
regression in the readers' or the sweeps' limits fails the test instead of exhausting the
machine. Inputs: alias bombs, deep nesting, files near and above the size limit, long base
chains, named pipes and devices where a file is expected, sweeps near and above the 10,000
point and 256 scenario limits, huge and long measurement CSVs (up to H4's 100,000 rows, and
past the 200,000-row limit); and the large-but-legal numbers of the third round (issue 23,
item 7): 10^9 and 2^53 layers with --pp (H1), a table group of 10^7 tables (H2), DLRM on
1,024 to 2^20 chips (T1, H2b), --suggest over 2^53 chips (H3), --workers 2^40 (M1), validate
rows that differ in length (H5); standard output on a full disk (T6: one line, exit 2) and
cut short by its reader (U2: exit 141). Property: the promise (fuzzing.assert_promise).
Kinds marked with a finding id fail until that finding's fix (another branch) is merged.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fuzzing import ROOT, assert_eval_doc, assert_promise, dse_subprocess, examples
from hypothesis import given
from hypothesis import strategies as st

HEAVY = ["bomb", "nesting", "size", "keys", "chain", "fifo", "device", "sweep", "grid",
         "batches", "scenarios", "csv_rows", "csv_line",
         "layers", "tables", "chips", "workers", "lengths", "full", "cut"]  # round 3


def _bomb(levels: int, width: int) -> str:
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "base: h100-sxm\nsource: bomb\nx:\n" + "".join(f"  {line}\n" for line in lines)


def _write(folder: Path, kind: str, size: int) -> tuple[list[str], bool]:
    """The command for one heavy input of `kind` (`size` scales it); whether exit 3 is an
    answer."""
    spec = folder / "spec.yaml"
    if kind == "bomb":
        spec.write_text(_bomb(3 + size % 7, 5 + size % 6))
        return ["check", str(spec)], False
    if kind == "nesting":
        depth = [40, 65, 500, 5000, 50000][size % 5]
        spec.write_text("base: h100-sxm\nsource: deep\nx: " + "[" * depth + "]" * depth + "\n")
        return ["eval", str(spec), "gpt2"], True
    if kind == "size":  # around the 256 KiB limit of a spec file
        extra = (256 << 10) - 64 + [-4096, 0, 64, 4096, 1 << 20][size % 5]
        spec.write_text("base: h100-sxm\nsource: big\n# " + "x" * max(extra, 0) + "\n")
        return ["check", str(spec)], False
    if kind == "keys":  # many keys within the size limit
        n = [1000, 10000, 20000][size % 3]
        spec.write_text("base: h100-sxm\nsource: wide\nx:\n" +
                        "".join(f"  k{i}: {i}\n" for i in range(n)))
        return ["check", str(spec)], False
    if kind == "chain":
        links = 10 + size % 15
        spec.write_text("base: ./b0.yaml\nsource: chain\n")
        for i in range(links):
            nxt = f"./b{i + 1}.yaml" if i + 1 < links else "h100-sxm"
            (folder / f"b{i}.yaml").write_text(f"base: {nxt}\nsource: link {i}\n")
        return ["eval", str(spec), "gpt2", "--format", "json"], True
    if kind == "fifo":
        os.mkfifo(folder / "pipe.yaml")
        if size % 2:
            spec.write_text("base: ./pipe.yaml\nsource: pipe\n")
            return ["check", str(spec)], False
        return ["check", str(folder / "pipe.yaml")], False
    if kind == "device":
        device = ["/dev/zero", "/dev/urandom", "/dev/null"][size % 3]
        if size % 2:
            return ["validate", "--measurements", device], False
        spec.write_text(f"base: {device}\nsource: device\n")
        return ["check", str(spec)], False
    if kind == "sweep":  # zipped lists at and above the limit
        n = [100, 5000, 10000, 10001, 15000][size % 5]  # 15,000: 105 KB, one argument
        values = ",".join(f"{1 + i % 512}MiB" for i in range(n))
        return ["eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--set",
                f"memory.L2.capacity={values}", "--format", "csv"], True
    if kind == "batches":  # a batch sweep (one evaluation) at and above the point limit
        n = [2, 5000, 10000, 10001][size % 4]
        return ["eval", "h100-sxm", "llama2-7b", "--phase", ["decode", "serve"][size % 2],
                "--batch", ",".join(str(1 + i) for i in range(n)), "--format", "csv"], True
    if kind == "scenarios":  # a sweep of lengths, an evaluation each: around 256 of them
        n = [100, 256, 257, 1000][size % 4]
        return ["eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--seq-in",
                ",".join(str(1 + i) for i in range(n)), "--format", "csv"], True
    if kind == "grid":  # a grid whose product passes the limit
        n = [50, 101, 1000][size % 3]
        lst = ",".join(str(1 + i) for i in range(n))
        return ["workload", "llama2-7b", "--batch", lst, "--seq-in", lst, "--format", "csv"], \
            False
    if kind in ROUND3:
        return ROUND3[kind](folder, size)
    header = "id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric," \
             "value,confidence,source\n"
    row = "M{},h100-sxm,1,1,1,gemm:1024x1024x1024,gemm,bf16,1,,,achieved_flop_per_s,5e14,high,x\n"
    csv = folder / "m.csv"
    if kind == "csv_rows":  # a few rows, H4's 100,000 (one group: ~6 s as JSON), and past
        # the 200,000-row limit (refused)
        rows = [100, 100_000, 200_001][size % 3]
        with csv.open("w") as f:
            f.write(header)
            f.writelines(row.format(i) for i in range(rows))
    else:  # csv_line: a line around the 1 MiB limit
        csv.write_text(header + row.format(0).replace(",x\n", "," + "x" * (
            (1 << 20) + [-1000, 1000][size % 2]) + "\n"))
    return ["validate", "--measurements", str(csv), "--format", "json"], False


# --- round 3: large-but-legal numbers, and standard output that fails ----------------------

def _layers(folder: Path, size: int) -> tuple[list[str], bool]:
    """H1: a GPT-2 of 10^6 to 2^53 layers trained with --pp 2 (the planner's schedules)."""
    spec = folder / "layers.yaml"
    layers = [10**6, 10**9, 2**53][size % 3]
    spec.write_text(f"base: gpt2\nsource: fuzz - {layers} layers\nlayers: {layers}\n")
    command = ["eval", "h100-sxm", str(spec), "--phase", "training"] if size % 2 else \
        ["memory", "h100-sxm", str(spec)]
    return [*command, "--chips", "2", "--pp", "2", "--format", "json"], True


def _tables(folder: Path, size: int) -> tuple[list[str], bool]:
    """H2: DLRM with one group of 1,000 to 2^53 identical tables, on 1 to 64 chips."""
    spec = folder / "tables.yaml"
    count = [1000, 10**7, 2**53][size % 3]
    spec.write_text(f"base: dlrm-dcnv2\nsource: fuzz - {count} tables\ntables:\n"
                    f"  - {{name: t, count: {count}, rows: 10, dim: 4, lookups: 1}}\n")
    return ["eval", "h100-sxm", str(spec), "--chips", ["1", "2", "64"][size // 3 % 3],
            "--format", "json"], True


CHIPS = [
    ["eval", "h100-sxm", "dlrm-dcnv2", "--chips", "1024"],  # T1
    ["eval", "h100-sxm", "dlrm-dcnv2", "--chips", "1024", "--phase", "training"],  # T1
    ["eval", "h100-sxm", "dlrm-dcnv2", "--chips", "65536"],  # H2b
    ["eval", "h100-sxm", "dlrm-dcnv2", "--chips", str(2**20)],  # H2b
    ["memory", "h100-sxm", "llama2-7b", "--chips", str(10**8), "--suggest"],  # H3
    ["memory", "h100-sxm", "llama2-7b", "--chips", str(2**53), "--suggest"],  # H3
    ["eval", "h100-sxm", "llama2-7b", "--phase", "decode", "--chips", str(2**53)],
]


def _chips(folder: Path, size: int) -> tuple[list[str], bool]:
    """T1, H2b, H3: recommenders and --suggest on 1,024 to 2^53 chips."""
    return [*CHIPS[size % len(CHIPS)], "--format", "json"], True


def _workers(folder: Path, size: int) -> tuple[list[str], bool]:
    """M1: a study with --workers from 10^9 to 2^53 (under the 1 GiB cap)."""
    workers = [2**40, 10**9, 2**53][size % 3]  # each far beyond memory: no fork storm
    return ["study", "flops-vs-bandwidth", "--trials", "2", "--batch", "2", "--workers",
            str(workers), "-q", "--out", str(folder / "out")], False


def _lengths(folder: Path, size: int) -> tuple[list[str], bool]:
    """H5: validate rows that differ in their lengths (an evaluation each): at, just past and
    far past the limit of distinct scenarios (dse.validate.MAX_SCENARIOS)."""
    from dse.validate import MAX_SCENARIOS

    rows = [MAX_SCENARIOS, MAX_SCENARIOS + 1, 100_000][size % 3]
    head = (ROOT / "validation" / "measurements.csv").read_text().split("\n")[0]
    row = "S{},a100-sxm-80gb,1,1,1,llama2-7b,decode,bf16,1,{},{},decode_tokens_per_s,104.9," \
          "high,x\n"
    csv = folder / "lengths.csv"
    with csv.open("w") as f:
        f.write(head + "\n")
        f.writelines(row.format(i, 1 + i % 4000, 1 + i // 4000) for i in range(rows))
    return ["validate", "--measurements", str(csv), "--format", "json"], False


ROUND3 = {"layers": _layers, "tables": _tables, "chips": _chips, "workers": _workers,
          "lengths": _lengths}

# Commands whose output goes to a full disk (T6) or a pipe cut short (U2: each writes well
# over a pipe's 64 KiB, so the cut comes while it writes).
FULL = [["list"], ["list", "workload"], ["--help"], ["--version"], ["eval", "--help"],
        ["show", "h100-sxm", "--paths", "--format", "json"], ["workload", "gpt2"],
        ["eval", "h100-sxm", "llama2-7b", "--format", "json"], ["validate", "--format", "json"],
        ["check", str(ROOT / "studies" / "hbm-grid.yaml")]]
_UNITS = ",".join(str(60 + i % 90) for i in range(2000))
CUT = [["eval", "h100-sxm", "llama2-7b", "--set", f"compute.units={_UNITS}", "--format", "csv"],
       ["eval", "h100-sxm", "llama2-7b", "--set", f"compute.units={_UNITS}", "--format", "csv",
        "--area-budget", "1 mm2"],  # every design infeasible: exit 3 had it not been cut
       ["workload", "llama2-7b", "--seq-in", ",".join(map(str, range(1, 2001))), "--format",
        "csv"],
       ["eval", "h100-sxm", "llama2-7b", "--batch", ",".join(map(str, range(1, 201))), "--ops",
        "--format", "json"]]


def _output_fails(kind: str, size: int) -> None:
    """T6: every command on a full disk is one line and exit 2; U2: output cut short by its
    reader is exit 141, nothing on stderr."""
    commands = FULL if kind == "full" else CUT
    ran = dse_subprocess(*commands[size % len(commands)], stdout=kind)
    assert ran.code != 124 and "Traceback" not in ran.stderr, ran
    if kind == "full":
        assert (ran.code, ran.stderr) == (
            2, "dse: cannot write output: No space left on device\n"), ran
    else:
        assert (ran.code, ran.stderr) == (141, ""), ran


@examples(fast=3, long=20)
@given(kind=st.sampled_from(HEAVY), size=st.integers(0, 100))
def test_heavy_inputs_within_bounds(kind: str, size: int) -> None:
    if kind in ("full", "cut"):
        _output_fails(kind, size)
        return
    with tempfile.TemporaryDirectory() as folder:
        args, infeasible = _write(Path(folder), kind, size)
        ran = dse_subprocess(*args)
        json_out = "json" in args
        doc = assert_promise(ran, infeasible=infeasible, json_out=json_out)
        if doc is not None and args[0] == "eval":
            assert_eval_doc(ran, doc)
