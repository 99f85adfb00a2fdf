"""Fuzzing the bounds: generated heavy inputs run as `python -m dse` in a subprocess under a
1 GiB address-space limit (RLIMIT_AS) and a 20 s timeout (fuzzing.dse_subprocess), so that a
regression in the readers' or the sweeps' limits fails the test instead of exhausting the
machine. Inputs: alias bombs, deep nesting, files near and above the size limit, long base
chains, named pipes and devices where a file is expected, sweeps near and above the 10,000
point and 256 scenario limits, huge and long measurement CSVs (up to H4's 100,000 rows, and
past the 200,000-row limit). Property: the promise (fuzzing.assert_promise).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fuzzing import assert_eval_doc, assert_promise, dse_subprocess, examples
from hypothesis import given
from hypothesis import strategies as st

HEAVY = ["bomb", "nesting", "size", "keys", "chain", "fifo", "device", "sweep", "grid",
         "batches", "scenarios", "csv_rows", "csv_line"]


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


@examples(fast=3, long=15)
@given(kind=st.sampled_from(HEAVY), size=st.integers(0, 100))
def test_heavy_inputs_within_bounds(kind: str, size: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        args, infeasible = _write(Path(folder), kind, size)
        ran = dse_subprocess(*args)
        json_out = "json" in args
        doc = assert_promise(ran, infeasible=infeasible, json_out=json_out)
        if doc is not None and args[0] == "eval":
            assert_eval_doc(ran, doc)
