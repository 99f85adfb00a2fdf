"""What a validation run gives: a row per measured case, the chips it was modelled on (area
and cost), and the |error| summaries (per phase, per file, per software stack). No I/O but
the specs `hardware_facts` loads."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.model import design_batch
from dse.spec.load import load_design


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
    loaded_as: str | None = None  # the hardware as loaded (a path resolved), not recorded
    file: str = ""  # the measurements file's name
    software: str = ""  # the stack it was measured on (the CSV's software column)
    stack: str = ""  # the stack profile it ran on (dse.spec.stack: the software's, else the
    # vendor's default)
    pending: bool = False  # from a pending file: a row that cannot run is reported, not raised

    def record(self) -> dict:
        out = {"id": self.id, "phase": self.phase, "metric": self.metric,
               "hardware": self.hardware, "workload": self.workload,
               "measured": self.measured, "predicted": self.predicted,
               "rel_error": self.rel_error, "bound": self.bound, "file": self.file}
        if self.software:
            out["software"] = self.software
        if self.stack:
            out["stack"] = self.stack
        if self.skipped:
            out["skipped"] = self.skipped
        if self.note:
            out["note"] = self.note
        return out



def hardware_facts(rows: Sequence[Row]) -> list[dict]:
    """Each chip the rows were modelled on, as the area and cost models give it (the
    silicon the predictions stand on): modelled area (spares and edge padding included)
    beside the published die, and the cost to make one chip where its node has a cost
    model (None, with a note, where a figure cannot be had)."""
    from dse.model.area import area
    from dse.model.cost import cost

    out: list[dict] = []
    seen: set[str] = set()
    for r in rows:
        if r.loaded_as is None or r.loaded_as in seen:
            continue
        seen.add(r.loaded_as)
        rec: dict = {"hardware": r.hardware, "node": None, "area_mm2": None,
                     "published_mm2": None, "cost_per_chip_usd": None, "note": ""}
        out.append(rec)
        try:
            spec, tech, why = load_design(r.loaded_as)
            if tech is None:
                rec["note"] = f"no area or cost model: {why}"
                continue
            db = design_batch(spec)
            die = area(db, tech)
            mm2 = float(die.total_mm2[0])
            rec.update(node=tech.node, area_mm2=mm2 if math.isfinite(mm2) else None,
                       published_mm2=die.published_mm2)
            if tech.wafer is None or tech.market is None:
                rec["note"] = f"no cost model for node {tech.node}"
                continue
            c = cost(db, tech, die)
            usd = float(c.total_usd[0])
            if math.isfinite(usd):
                rec["cost_per_chip_usd"] = usd
            else:  # a die no wafer yields (JSON holds finite numbers only)
                rec["note"] = str(c.reason[0]) or "no cost: no good die from a wafer"
        except DseError as e:  # the rows of this chip already say why they failed
            rec["note"] = str(e)
    return out


def _stats(errs: list[float]) -> dict[str, float]:
    """Rows, median, 90th percentile and maximum of |errs|."""
    a = np.abs(np.asarray(errs))
    return {"n": len(a), "median": float(np.median(a)), "p90": float(np.percentile(a, 90)),
            "max": float(a.max())}


def summary(rows: list[Row]) -> dict[str, Any]:
    """Median, 90th percentile and maximum of |rel_error| per phase and overall."""
    done = [r for r in rows if r.rel_error is not None]
    out: dict[str, Any] = {p: _stats([r.rel_error for r in done if r.phase == p])  # type: ignore[misc]
                           for p in phases.names() if any(r.phase == p for r in done)}
    if done:
        out["overall"] = _stats([r.rel_error for r in done])  # type: ignore[misc]
    out["skipped"] = sum(r.skipped is not None for r in rows)
    return out


def summary_by(rows: list[Row], key: str) -> dict[str, dict[str, float]]:
    """Median, 90th percentile and maximum of |rel_error| per value of a row's `key` (file or
    stack), in the order of first appearance; rows without one under "-"."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r.rel_error is not None:
            groups.setdefault(getattr(r, key) or "-", []).append(r.rel_error)
    return {k: _stats(v) for k, v in groups.items()}
