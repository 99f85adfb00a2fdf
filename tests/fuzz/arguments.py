"""Hypothesis strategies for command-line arguments and API overrides (issue 15, item 5).

Arguments are drawn from what the commands accept (shipped chips and models, their
scenarios, phases, precisions, the design paths `dse show --paths` lists, values with the
path's own unit) and from what they must refuse (unknown names and paths, wrong units,
negative, zero, huge, non-finite and malformed numbers, empty and odd strings, comma lists
long enough to pass the sweep limit). Option values Typer itself parses (--chips, --tp, --pp
of `dse eval`, --format) stay in their types here; `usage_errors` breaks Typer's own rules
(unknown commands and options, missing arguments and values, bad choices and integers).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from dse import phases
from dse.spec import vocabulary
from dse.spec.catalogue import catalogue
from dse.spec.load import library_names, load_hardware, load_workload

HARDWARE = library_names("hardware")
WORKLOADS = library_names("workload")
RECOMMENDERS = ["dlrm-dcnv2", "rm1", "rm2"]
PHASES = list(phases.names())
PRECISIONS = ["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "w8a16", "w4a16",
              "mixed", "fp64"]
ODD_TEXTS = ["", " ", "0", "-1", "nan", "inf", "1e3", "1.5", "0x10", "max", "best", "none",
             "MAX", ",", "1,", ",1", "1,,2", "1 2", "\t", "é", "a\nb", "\x00", "x" * 300,
             "9007199254740993", "1" + "0" * 320, "-0", "+3", "1_000", "True"]
WHOLE = [0, 1, 2, 3, 4, 7, 8, 16, 64, 128, 1000, 4096, 2**20, 2**31, 2**53, 2**53 + 1, 10**20]


@functools.cache
def scenarios(workload: str) -> list[str]:
    """The scenario names of a shipped workload (none for gemm: names)."""
    return list(load_workload(workload).scenarios) if workload in WORKLOADS else []


@dataclass(frozen=True)
class Term:
    path: str
    unit: str | None  # internal unit of a quantity, None for a plain number
    whole: bool
    fraction: bool  # a number in (0, 1]
    current: float | None  # the chip's value (SI), None where the spec leaves it out


@functools.cache
def design_paths(hardware: str) -> list[Term]:
    """Every path a design of the chip can vary (dse show --paths), with its rule and value."""
    spec = load_hardware(hardware)
    out = []
    for path in vocabulary.variable_paths(spec):
        try:
            canonical, term = vocabulary.canonical(spec, path)
            current = vocabulary.current(spec, canonical)
        except Exception:  # a path the spec cannot take (a level it lacks): still a path
            out.append(Term(path, None, False, False, None))
            continue
        out.append(Term(path, term.kind.unit if term.kind else None, term.integer,
                         term.le == 1, current))
    return out


def numbers_text() -> st.SearchStrategy[str]:
    """A number as text: in the window (mostly), at its edges, or malformed."""
    in_window = st.builds(lambda m, e: f"{m}e{e}", st.sampled_from([1, 1.5, 2.5, 9.99]),
                          st.integers(-30, 30))
    return st.one_of(in_window, in_window, st.sampled_from(
        ["0", "1", "-1", "0.5", "1e-31", "1e31", "1e308", "1e-320", "nan", "inf", "-inf",
         "1e400", "9007199254740992", "9007199254740993", "1" + "0" * 320, "abc", ""]))


@st.composite
def set_option(draw: st.DrawFn, hardware: str, points: int = 1) -> str:
    """`path=value[,value...]` for --set: a real path with one value or `points` values in
    its unit (or a wrong one), or an unknown, malformed path."""
    term = draw(st.sampled_from(design_paths(hardware)))
    path, unit, whole = term.path, term.unit, term.whole
    if draw(st.integers(0, 9)) == 9:
        path = draw(st.sampled_from(
            ["compute.unit", "memory.NOPE.capacity", "memory[9].capacity", "memory[-1].capacity",
             "memory..capacity", "", ".", "compute", "memory", "memory.L2", "name", "base",
             "compute.matrix.peak_per_unit.fp99", "memory[0].capacity.x", "=", "a=b"]))

    def value() -> str:
        if path.endswith(".generation"):  # a memory-catalogue name (or a wrong one)
            return mostly(draw, list(catalogue().names), ["hbm9", "3", "", "HBM3", "1e31"])
        if whole:
            return mostly(draw, _si(term, near=True).map(str), [*EXTREME_COUNTS, "-1"])
        number = mostly(draw, _si(term, near=True).map(lambda v: f"{v:.6g}"),
                        [draw(numbers_text())])
        wrong = draw(st.integers(0, 15)) == 15
        shown = draw(st.sampled_from(["B", "GB/s", "W", "s", "mm2", "FLOP/cycle", "TB^30", "%",
                                      "GHz", "kB"])) if wrong else (unit or "")
        return f"{number} {shown}".strip()

    count = 1 if path.startswith("technology.as_built") else points  # one for all designs
    values = [value() for _ in range(mostly(draw, st.sampled_from([1, count]), [2, 3, 4]))]
    return f"{path}={','.join(values)}"


def mostly(draw: st.DrawFn, valid: st.SearchStrategy[str] | list[str],
           odd: list[str]) -> str:
    """A valid value seven times in eight (shrinking toward valid), else an odd one."""
    if draw(st.integers(0, 7)) == 7:
        return draw(st.sampled_from(odd))
    return draw(valid if isinstance(valid, st.SearchStrategy) else st.sampled_from(valid))


COUNTS = ["1", "2", "4", "8", "16", "64", "128", "512", "1024", "2048"]
EXTREME_COUNTS = [str(n) for n in (0, 3, 7, 1000, 2**20, 2**31, 2**53, 2**53 + 1, 10**20)]


def whole_list(points: int) -> st.SearchStrategy[str]:
    """A count, or a comma list of `points` counts (a sweep)."""
    one = st.sampled_from(COUNTS)
    lists = st.lists(one, min_size=points, max_size=points).map(",".join)
    return one if points == 1 else one | lists | lists


def gemm_names() -> st.SearchStrategy[str]:
    """gemm:MxNxK and gemm:BxMxNxK names: mostly well formed, some with sizes of 0, beyond
    2^53 or malformed."""
    dim = st.sampled_from([1, 64, 1000, 1024, 4096, 12288])
    odd = st.sampled_from([0, 3, 2**20, 2**31, 2**53, 2**53 + 1, 10**20])
    good = st.lists(dim, min_size=3, max_size=4).map(lambda ds: "gemm:" + "x".join(map(str, ds)))
    return st.one_of(good, good, good, st.lists(dim | odd, min_size=3, max_size=4).map(
        lambda ds: "gemm:" + "x".join(map(str, ds))), st.sampled_from(
        ["gemm:", "gemm:1x2", "gemm:axbxc", "gemm:1x2x3x4x5", "gemm:-1x2x3", "gemm:1.5x2x3",
         "GEMM:1x2x3", "gemm:1X2X3", "gemm: 1x2x3"]))


@st.composite
def scenario_options(draw: st.DrawFn, workload: str, *, points: int = 1,
                     seq_out: bool = True) -> list[str]:
    """--scenario/--phase/--batch/--seq-in/--seq-out/--precision, each maybe; --batch,
    --seq-in and --seq-out take one value or lists of `points` values."""
    args: list[str] = []
    named = scenarios(workload)
    if named and draw(st.integers(0, 3)) == 0:
        args += ["--scenario", mostly(draw, named, ["nope", "", named[0].upper()])]
    if draw(st.booleans()):
        phases = ["gemm"] if workload.startswith("gemm:") else \
            ["inference", "training"] if workload in RECOMMENDERS else PHASES[1:]
        args += ["--phase", mostly(draw, phases, [*PHASES, "bogus", "", "Decode"])]
    for flag in ("--batch", "--seq-in", "--seq-out")[:3 if seq_out else 2]:
        if draw(st.integers(0, 2)) == 0:
            counts = whole_list(points)
            if flag == "--batch":
                counts = counts | st.sampled_from(["max", "best"])
            args += [flag, mostly(draw, counts, EXTREME_COUNTS + ODD_TEXTS)]
    if draw(st.integers(0, 3)) == 0:
        args += ["--precision", mostly(draw, PRECISIONS, ["bogus", "", "BF16"])]
    return args


@st.composite
def eval_arguments(draw: st.DrawFn) -> list[str]:
    hardware = draw(st.sampled_from(HARDWARE))
    workload = draw(st.sampled_from(WORKLOADS) if draw(st.integers(0, 4)) else gemm_names())
    points = mostly(draw, st.sampled_from([1, 1, 1, 2, 3]), [1, 4])  # designs of a sweep
    args = ["eval", hardware, workload, *draw(scenario_options(workload, points=points))]
    if draw(st.integers(0, 2)) == 0:  # Typer parses these as int: no words here
        tp, pp = (int(mostly(draw, ["1", "2", "4", "8"], ["0", "-1", "3"])) for _ in "tp")
        chips = tp * pp * int(mostly(draw, ["1", "2", "4"], ["0", "3", str(2**53),
                                                             str(2**53 + 1), "1024"]))  # T1
        args += ["--chips", str(chips), "--tp", str(tp), "--pp", str(pp)]
    for _ in range(draw(st.integers(0, 3))):
        args += ["--set", draw(set_option(hardware, points=points))]
    if draw(st.integers(0, 4)) == 0:
        args.append(draw(st.sampled_from(["--grid", "--zip"])))
    if draw(st.integers(0, 5)) == 0:
        args.append("--no-reticle")
    if draw(st.integers(0, 5)) == 0:
        unit = mostly(draw, ["mm2"], ["mm^2", "cm2", "W", ""])
        args += ["--area-budget", f"{draw(numbers_text())} {unit}".strip()]
    if draw(st.integers(0, 7)) == 0:
        args.append("--ops")
    return [*args, "--format", "json"]


@st.composite
def memory_arguments(draw: st.DrawFn) -> list[str]:
    hardware = draw(st.sampled_from(HARDWARE))
    workload = mostly(draw, [w for w in WORKLOADS if w not in RECOMMENDERS], RECOMMENDERS)
    args = ["memory", hardware, workload, "--phase", mostly(draw, ["training"], PHASES)]
    if draw(st.integers(0, 2)) == 0:
        args += ["--batch", mostly(draw, COUNTS, ["max", "best", *EXTREME_COUNTS, *ODD_TEXTS])]
    if draw(st.integers(0, 2)) == 0:
        args += ["--seq-in", mostly(draw, COUNTS, [*EXTREME_COUNTS, *ODD_TEXTS])]
    if draw(st.integers(0, 3)) == 0:
        args += ["--precision", mostly(draw, ["bf16", "fp16", "fp8", "fp32"], PRECISIONS)]
    if draw(st.integers(0, 2)) == 0:
        tp, pp, dp = (mostly(draw, ["1", "2", "4", "8"], [*EXTREME_COUNTS, *ODD_TEXTS])
                      for _ in "tpd")
        chips = str(int(tp) * int(pp) * int(dp)) if all(
            x.isdigit() for x in (tp, pp, dp)) else dp
        args += ["--chips", chips, "--tp", tp, "--pp", pp]
    if draw(st.integers(0, 2)) == 0:
        args += ["--micro-batch", mostly(draw, ["1", "2", "4"], [*EXTREME_COUNTS, *ODD_TEXTS])]
    if draw(st.integers(0, 2)) == 0:
        args += ["--zero", mostly(draw, ["0", "1", "2", "3"], ["4", "-1", "x", ""])]
    if draw(st.integers(0, 2)) == 0:
        args += ["--recompute", mostly(draw, ["none", "selective", "full"], ["all", ""])]
    if draw(st.integers(0, 3)) == 0:
        args.append(draw(st.sampled_from(["--sequence-parallel", "--no-sequence-parallel"])))
    if draw(st.integers(0, 3)) == 0:
        levels = [lv.name for lv in load_hardware(hardware).memory]
        args += ["--offload", mostly(draw, levels[-2:], ["host", "nope", ""])]
        if draw(st.booleans()):
            args.append("--offload-params")
    if draw(st.integers(0, 4)) == 0:
        args += ["--optimizer", mostly(draw, ["adam", "sgd"], ["adafactor", "x", ""])]
    if draw(st.integers(0, 4)) == 0:
        schedule = mostly(draw, ["1f1b", "interleaved"], ["gpipe", "x"])
        args += ["--schedule", schedule]
        if schedule == "interleaved":
            args += ["--virtual-stages", mostly(draw, ["1", "2", "4"], ["0", "3", "x"])]
    if draw(st.integers(0, 3)) == 0:
        args += ["--set", draw(set_option(hardware))]
    if draw(st.integers(0, 5)) == 0:
        args.append("--suggest")
    return [*args, "--format", "json"]


@st.composite
def workload_arguments(draw: st.DrawFn) -> list[str]:
    workload = draw(st.sampled_from(WORKLOADS) | gemm_names())
    points = draw(st.sampled_from([1, 1, 2, 3, 8]))
    args = ["workload", workload, *draw(scenario_options(workload, points=points))]
    if draw(st.integers(0, 4)) == 0:
        args += ["--convention", draw(st.sampled_from(["default", "paper", "x"]))]
    return [*args, "--format", draw(st.sampled_from(["json", "json", "csv", "table"]))]


# --- the API -----------------------------------------------------------------------------

ODD_OVERRIDES = [None, True, False, "", "abc", "1 GB/s", "1e400", [], {}, [1, "x"], {"a": 1},
                 float("nan"), float("inf"), -float("inf"), -1, 0, 1e-320, 10**400, 2**53 + 1,
                 b"1", (1, 2), 1 + 2j]


@st.composite
def api_overrides(draw: st.DrawFn, hardware: str) -> dict[object, object]:
    """An `overrides=` dict for dse.evaluate: real paths with numbers (SI), unit strings,
    lists or arrays of them, and wrong keys and values."""
    import numpy as np

    out: dict[object, object] = {}
    n = draw(st.integers(1, 3))  # designs, shared by every array value
    for _ in range(draw(st.integers(1, 3))):
        term = draw(st.sampled_from(design_paths(hardware)))
        key: object = term.path
        if draw(st.integers(0, 9)) == 9:
            key = draw(st.sampled_from([1, None, ("a",), "nope.path", "", "memory.X.capacity",
                                        b"compute.units"]))
        how = draw(st.sampled_from(["near", "near", "near_array", "window", "text", "odd"]))
        if how == "odd":
            out[key] = draw(st.sampled_from(ODD_OVERRIDES))
        elif how == "text":
            out[key] = f"{draw(numbers_text())} {term.unit or ''}".strip()
        else:
            values = [draw(_si(term, near=how != "window")) for _ in range(n)]
            out[key] = values[0] if how == "near" else np.array(values)
    return out


def _si(term: Term, *, near: bool) -> st.SearchStrategy[float | int]:
    """A value for `term` in SI units: its chip's value scaled by up to 1e6 either way
    (`near`), else anywhere in the window; whole numbers and fractions stay what they are."""
    if term.whole:
        if near and term.current:
            return st.integers(-10, 10).map(lambda k: max(1, round(term.current * 2.0 ** k)))
        return st.sampled_from(WHOLE)
    if term.fraction:
        return st.builds(lambda m, e: m * 10.0 ** -e, st.sampled_from([1.0, 0.5, 0.9]),
                         st.integers(0, 30 if not near else 3))
    if near and term.current:
        return st.integers(-6, 6).map(lambda k: term.current * 10.0 ** k)
    return st.builds(lambda m, e: m * 10.0 ** e, st.sampled_from([1.0, 2.5, 9.99]),
                     st.integers(-30, 30))


# --- Typer's own usage errors --------------------------------------------------------------

USAGE_ERRORS = [
    ["evaluate", "h100-sxm"], ["eval"], ["eval", "h100-sxm"], ["show"], ["memory", "h100-sxm"],
    ["eval", "h100-sxm", "llama2-7b", "--chips", "abc"],
    ["eval", "h100-sxm", "llama2-7b", "--tp", "1.5"], ["eval", "h100-sxm", "llama2-7b", "--top"],
    ["eval", "h100-sxm", "llama2-7b", "--format", "xml"], ["show", "h100-sxm", "-f", "csv"],
    ["eval", "h100-sxm", "llama2-7b", "--bogus"], ["eval", "h100-sxm", "llama2-7b", "-x"],
    ["eval", "h100-sxm", "llama2-7b", "--batch"], ["eval", "h100-sxm", "llama2-7b", "--set"],
    ["show", "h100-sxm", "extra"], ["plot", "nope"], ["check"], ["--bogus"],
    ["list", "nope"], ["area"], ["validate", "--format", "csv"], ["workload"],
    ["study"], ["study", "studies/hbm-grid.yaml", "--trials", "x"],
    ["memory", "h100-sxm", "llama2-7b", "--seq-out", "1"], ["dashboard"],
    ["eval", "h100-sxm", "llama2-7b", "--chips", "1" + "0" * 400, "--tp", "-0x10"],
]


@st.composite
def usage_errors(draw: st.DrawFn) -> list[str]:
    """A command line Typer itself refuses, maybe with a line break or control character
    in the offending value."""
    args = list(draw(st.sampled_from(USAGE_ERRORS)))
    if draw(st.integers(0, 3)) == 0:
        args[-1] += draw(st.sampled_from(["\n", "\r\nx", "\x1b[31m", "\u2028", "\t"]))
    return args


# --- round 3 (issue 23, item 7): studies, the dashboard, plot axes, the API's keywords --------
# Inputs of the third fuzzing round's findings (../shared/repro/round3). A case marked with a
# finding id (T3: ...) fails until the fix of that finding is merged where another branch
# fixes it: T2 (dashboard), T3, T5, M1 (study), T4 (plot), H1, H2, H3, T1, S1-S4, U1 (model).

ROOT = Path(__file__).resolve().parents[2]
STUDY_NAMES = ["flops-vs-bandwidth", "hbm-grid"]  # the quick shipped studies (1-4 trials)
SAMPLERS = ["nsga2", "tpe", "random", "grid"]


@st.composite
def study_arguments(draw: st.DrawFn, out: str = "{out}") -> list[str]:
    """`dse study` command lines writing to `out` (by default a placeholder, {out}): a
    shipped study (by name or path) with a few --trials, --batch (1 included: T3 with
    NSGA-II), --sampler, --workers (few: M1's 2^40 runs in test_fuzz_limits under a memory
    cap), --seed and --storage in every form:
    a journal file, sqlite:///file, in-memory sqlite:// (T5), and unreachable, unknown or
    malformed URLs."""
    name = draw(st.sampled_from(STUDY_NAMES))
    study = mostly(draw, [name, str(ROOT / "studies" / f"{name}.yaml")],
                   ["nope", str(ROOT / "studies"), str(ROOT / "README.md"), ""])
    args = ["study", study, "--trials", mostly(draw, ["1", "2", "3"], ["0", "-1", "x", "1.5"]),
            "-q", "--out", out]
    if draw(st.booleans()):
        args += ["--batch", mostly(draw, ["1", "1", "2", "3"], ["0", "-1", "x",  # 1: T3
                                                                str(2**53)])]
    if draw(st.integers(0, 2)) == 0:
        args += ["--sampler", mostly(draw, SAMPLERS, ["gp", "bogus", "NSGA2", ""])]
    if draw(st.integers(0, 3)) == 0:
        args += ["--workers", mostly(draw, ["1"], ["0", "-1", "x", "2"])]
    if draw(st.integers(0, 2)) == 0:
        args += ["--storage", mostly(
            draw, [f"{out}.journal", f"sqlite:///{out}.db", "sqlite://"],  # sqlite://: T5
            ["sqlite:///:memory:",  # in memory too: T5 (study branch)
             f"sqlite:///{out}/no/such/folder.db", "nope://x", "",
             "postgresql://dse@127.0.0.1:1/db", "mysql://x/y", "/dev/null"])]
    if draw(st.integers(0, 3)) == 0:
        args += ["--seed", mostly(draw, ["0", "7"], ["-1", "x", str(2**64)])]
    if draw(st.integers(0, 5)) == 0:  # a grid's Dask scheduler: malformed (refused at once)
        args += ["--scheduler", draw(st.sampled_from(["", "x", "tcp://127.0.0.1",
                                                      "tcp://127.0.0.1:0", "http://h:1"]))]
    return args


# Targets `dse dashboard` must refuse before it serves (T2): the files of a study's output
# folder other than its journal (trials.csv first), other files, folders without a journal,
# devices, and database URLs it cannot open. {study}: a study's output folder; {scratch}: a
# folder holding not-a-journal.csv (the reproducer's), binary.journal and empty-folder/
# (dashboard_scratch writes them).
DASHBOARD_TARGETS = [
    *(f"{{study}}/{name}" for name in ("trials.csv", "pareto.csv", "references.csv",
                                       "summary.md", "run.json", "study.resolved.yaml",
                                       "pareto.png", "trials.parquet")),
    "{scratch}/not-a-journal.csv", "{scratch}/binary.journal", "{scratch}/empty-folder",
    "{scratch}/nope.journal", str(ROOT / "README.md"), str(ROOT / "studies" / "hbm-grid.yaml"),
    "/dev/null", "/bin/ls", "", "sqlite:///{scratch}/no/such/folder.db", "sqlite://",
    "postgresql://dse@127.0.0.1:1/db", "nope://x", "x" * 300]


def dashboard_scratch(folder: Path) -> None:
    """The files DASHBOARD_TARGETS names in {scratch}."""
    (folder / "empty-folder").mkdir(exist_ok=True)
    (folder / "not-a-journal.csv").write_text("a,b\n1,2\n")
    (folder / "binary.journal").write_bytes(b"\x00\x01\x02")


@st.composite
def dashboard_arguments(draw: st.DrawFn) -> list[str]:
    """`dse dashboard TARGET --port P` for a target it must refuse (DASHBOARD_TARGETS, with
    {study} and {scratch} to fill in), any port (the refusal comes first), maybe a host."""
    args = ["dashboard", draw(st.sampled_from(DASHBOARD_TARGETS)), "--port",
            mostly(draw, ["0"], ["-1", "65536", "x", str(2**64)])]
    if draw(st.integers(0, 3)) == 0:
        args += ["--host", mostly(draw, ["127.0.0.1"], ["", "999.1.1.1", "nope.invalid"])]
    return args


@st.composite
def pareto_axes(draw: st.DrawFn, columns: list[str], objectives: list[str]) -> list[str]:
    """--x / --y of `dse plot pareto`: any column of trials.csv, text ones (reason, state:
    T4) included, an objective's name, with :max, :min or a malformed direction, or a name
    that is neither."""
    args = []
    for flag in ("--x", "--y"):
        if draw(st.integers(0, 3)) == 0:
            continue
        name = mostly(draw, st.sampled_from([*columns, *objectives, "reason", "state"]),
                      ["nope", "", ":", "objective.", "area_per_chip_mm2:"])
        way = mostly(draw, ["", "", ":max", ":min"], [":sideways", ":", ":MAX"])
        args += [flag, name + way]
    return args


# The keywords of dse.evaluate with values of their type and of others (T7: every wrong type
# is a one-line DseError naming the keyword, never another exception).
API_KEYWORDS: dict[str, list[object]] = {
    "execution": ["chips=2", 2, {"chips": 2}, ("Execution", 2, 2)],
    "tech": [object(), "n4", 1],
    "area_budget": [600, 600.0, "600 mm2", "0.0006 m2", "600", "1 GB", "x", -1, 0,
                    float("nan"), float("inf"), 1e308, [600], True, b"600"],
    "reticle": [True, False, "no", None, 1, 0.0],
    "batch": [1, 8, "max", "best", [1, 2], (3,), 1.5, True, b"1", {"b": 1}, "8", [], [0],
              [[1, 2]], 2**53 + 1],
    "seq_in": [128, "128", 1.5, -1, 0, True, 2**53, [128]],
    "seq_out": [16, "16", -1, None, 2.5],
    "chips": [1, 2, "2", 2.0, 0, -1, 2**53 + 1, None, True],
    "tp": [1, 2, "1", 0, 1.0],
    "pp": [1, 2, None, 3],
    "precision": ["bf16", "fp8", "w4a16", 3, b"bf16", "BF16", ""],
    "kv_precision": ["fp8", "int4", 3, "nope"],
    "stack": ["vllm-rocm", "trtllm-triton", "nope", "", 3, "/no/such.yaml", None],
    "latency_target": ["50 ms", 0.05, "50", -1, 0, True, float("nan"), 10**400, [1]],
    "phase": ["decode", "training", 3, "Decode", ""],
    "scenario": ["nope", 3, ""],
    "fusion": ["flash", "none", None, 3, "x"],
    "overrides": [{}, [1], "compute.units=2", {"compute.units": 2}, {1: 2}],
}


@st.composite
def api_keywords(draw: st.DrawFn) -> dict[str, object]:
    """A few keywords of dse.evaluate, each with a value of its type or another. A tuple
    ("Execution", chips, tp) stands for dse.Execution(chips=chips, tp=tp), built by the
    test (an Execution is a valid value: its own checks refuse bad numbers)."""
    keys = draw(st.lists(st.sampled_from(sorted(API_KEYWORDS)), min_size=1, max_size=3,
                         unique=True))
    return {k: draw(st.sampled_from(API_KEYWORDS[k])) for k in keys}
