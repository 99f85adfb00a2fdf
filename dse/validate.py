"""Model against measurement: run every row of a measurements CSV (the format of
shared/validation/README.md) and report predicted vs measured per row and summarised.

rel_error = (predicted - measured) / measured. Rows whose phase or workload the model does
not cover yet are listed as skipped with the reason. Rows whose measurement is dominated
by a software effect outside the hardware keep their error, with a note saying so.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dse.errors import DseError
from dse.model import evaluate
from dse.spec.load import library_dir, library_names, load_design, load_workload
from dse.spec.workload import is_gemm_name

COLUMNS = ("id", "hardware", "chips", "tp", "pp", "workload", "phase", "precision", "batch",
           "seq_in", "seq_out", "metric", "value")
MODELLED = ("gemm", "prefill", "decode", "serve", "inference")
PHASES = (*MODELLED, "training")
METRIC_OF_PHASE = {
    "gemm": ("achieved_flop_per_s",), "prefill": ("ttft_s",),
    "decode": ("decode_tokens_per_s", "output_tokens_per_s"),
    "serve": ("output_tokens_per_s",), "inference": ("samples_per_s",),
    "training": ("model_flop_per_s_per_chip", "hardware_flop_per_s_per_chip", "mfu",
                 "samples_per_s"),
}
# Known effects outside the hardware, by (workload prefix, phase): reported beside the row.
# (MLPerf BERT's padding skipping is modelled now: its scenarios give SQuAD's lengths.)
NOTES: dict[tuple[str, str], str] = {}


# The shipped copies of shared/validation: published measurements of whole workloads, and
# the GEMM rows that calibrate (and check) each chip's achievable rate.
MEASUREMENT_FILES = ("measurements.csv", "gemm-calibration.csv")


def default_measurements() -> tuple[Path, ...]:
    """The project's copies of shared/validation's measurement files, validated by default."""
    return tuple(library_dir("validation") / name for name in MEASUREMENT_FILES)


@dataclass
class Row:
    id: str
    phase: str
    metric: str
    measured: float
    hardware: str
    workload: str
    predicted: float | None = None
    rel_error: float | None = None
    skipped: str | None = None
    note: str | None = None
    bound: str | None = None

    def record(self) -> dict:
        out = {"id": self.id, "phase": self.phase, "metric": self.metric,
               "hardware": self.hardware, "workload": self.workload,
               "measured": self.measured, "predicted": self.predicted,
               "rel_error": self.rel_error, "bound": self.bound}
        if self.skipped:
            out["skipped"] = self.skipped
        if self.note:
            out["note"] = self.note
        return out


def read_measurements(path: Path) -> list[dict]:
    """Rows of a measurements CSV; a malformed file raises DseError naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DseError(f"{path}: cannot read ({e.strerror})") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DseError(f"{path}:1: missing column(s) {', '.join(missing)}; expected the "
                       f"columns {', '.join(COLUMNS)}")
    rows = []
    for line, raw in enumerate(reader, start=2):
        where = f"{path}:{line}"

        def number(col: str, whole: bool = False, optional: bool = False,
                   raw: dict = raw, where: str = where) -> float | None:
            v = (raw.get(col) or "").strip()
            if not v and optional:
                return None
            try:
                x = float(v)
            except ValueError:
                raise DseError(f"{where}: {col}: expected a number, found '{v}'") from None
            if not math.isfinite(x) or x <= 0 or (whole and x != int(x)):
                raise DseError(f"{where}: {col}: expected a positive "
                               f"{'whole number' if whole else 'number'}, found '{v}'")
            return x

        phase = (raw["phase"] or "").strip()
        if phase not in PHASES:
            raise DseError(f"{where}: phase: expected one of {', '.join(PHASES)}, found "
                           f"'{phase}'")
        metric = (raw["metric"] or "").strip()
        if metric not in METRIC_OF_PHASE[phase]:
            raise DseError(f"{where}: metric: expected one of "
                           f"{', '.join(METRIC_OF_PHASE[phase])} for phase {phase}, found "
                           f"'{metric}'")
        batch = (raw["batch"] or "").strip()
        if batch != "max":
            batch = int(number("batch", whole=True))  # type: ignore[arg-type]
        rows.append({
            "id": (raw["id"] or "").strip() or f"line {line}", "line": line,
            "hardware": (raw["hardware"] or "").strip(),
            "workload": (raw["workload"] or "").strip(),
            "chips": int(number("chips", whole=True)),  # type: ignore[arg-type]
            "tp": int(number("tp", whole=True)),  # type: ignore[arg-type]
            "pp": int(number("pp", whole=True)),  # type: ignore[arg-type]
            "phase": phase, "precision": (raw["precision"] or "").strip(), "batch": batch,
            "seq_in": number("seq_in", whole=True, optional=True),
            "seq_out": number("seq_out", whole=True, optional=True),
            "metric": metric, "value": number("value"),
        })
    return rows


def run(paths: Path | Sequence[Path] | None = None) -> list[Row]:
    """Predict every row of the measurement files (the shipped ones by default), in order;
    an id given twice across them is an error."""
    if paths is None:
        paths = default_measurements()
    elif isinstance(paths, Path | str):
        paths = (Path(paths),)
    out: list[Row] = []
    seen: dict[str, str] = {}
    for path in paths:
        for row in _run_file(Path(path)):
            if row.id in seen:
                raise DseError(f"{path}: id {row.id} is also in {seen[row.id]}; ids must be "
                               "unique across the files validated together")
            seen[row.id] = str(path)
            out.append(row)
    return out


def _run_file(path: Path) -> list[Row]:
    """Predict every row of one measurement file."""
    hw_known = set(library_names("hardware"))
    wl_known = set(library_names("workload"))
    out = []
    for r in read_measurements(path):
        row = Row(id=r["id"], phase=r["phase"], metric=r["metric"], measured=r["value"],
                  hardware=r["hardware"], workload=r["workload"])
        out.append(row)
        if r["phase"] not in MODELLED and not (
                r["phase"] == "training" and r["workload"] in wl_known
                and load_workload(r["workload"]).kind == "recommender"):
            row.skipped = f"phase {r['phase']} is not modelled yet" + (
                " for Transformers" if r["phase"] == "training" else "")
            continue
        if r["hardware"] not in hw_known:
            row.skipped = f"hardware '{r['hardware']}' is not in the library"
            continue
        if r["workload"] not in wl_known and not is_gemm_name(r["workload"]):
            row.skipped = f"workload '{r['workload']}' is not in the library"
            continue
        try:
            spec, tech, _ = load_design(r["hardware"])
            res = evaluate(
                spec, load_workload(r["workload"]), tech=tech,
                phase=r["phase"], batch=r["batch"], precision=r["precision"] or None,
                seq_in=int(r["seq_in"]) if r["seq_in"] else None,
                seq_out=int(r["seq_out"]) if r["seq_out"] else None,
                chips=r["chips"], tp=r["tp"], pp=r["pp"])
        except DseError as e:
            raise DseError(f"{path}:{r['line']}: {e}") from None
        if not res.feasible[0]:
            row.skipped = f"infeasible on the model: {res.reason[0]}"
            continue
        row.predicted = float(res.metrics[r["metric"]][0])
        row.rel_error = (row.predicted - row.measured) / row.measured
        recs = res.op_records(0)
        row.bound = recs[0]["bound"] if recs else None
        for (prefix, phase), note in NOTES.items():
            if r["workload"].startswith(prefix) and r["phase"] == phase:
                row.note = note
    return out


def summary(rows: list[Row]) -> dict:
    """Median, 90th percentile and maximum of |rel_error| per phase and overall."""
    def stats(errs: list[float]) -> dict:
        a = np.abs(np.asarray(errs))
        return {"n": len(a), "median": float(np.median(a)),
                "p90": float(np.percentile(a, 90)), "max": float(a.max())}
    done = [r for r in rows if r.rel_error is not None]
    out = {p: stats([r.rel_error for r in done if r.phase == p])  # type: ignore[misc]
           for p in PHASES if any(r.phase == p for r in done)}
    if done:
        out["overall"] = stats([r.rel_error for r in done])  # type: ignore[misc]
    out["skipped"] = sum(r.skipped is not None for r in rows)
    return out
