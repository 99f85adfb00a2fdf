"""Sweeps: several design points (scenario fields and hardware overrides, each a list of
values) evaluated together, one row per point.

Lists combine as a zip (the default: lists of equal length, a one-value list broadcast) or
as a grid (every combination, the last list varying fastest). Points that share their
scenario fields are one `dse.evaluate` call whose hardware values are override arrays, so a
sweep of N designs on one scenario is one vectorized pass. No I/O and no rendering.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dse import phases
from dse.errors import DseError
from dse.model.evaluate import evaluate
from dse.model.results import Evaluation
from dse.spec import scenario_fields
from dse.spec.hardware import HardwareSpec
from dse.spec.technology import TechSpec
from dse.spec.vocabulary import column_name
from dse.spec.workload import WorkloadSpec
from dse.workloads import resolve_scenario

if TYPE_CHECKING:
    import pandas as pd

# Scenario fields a sweep may set; every other key is a hardware path of the design
# vocabulary (`memory.L2.capacity`, `compute.units`, ...).
SCENARIO_FIELDS = scenario_fields.SIMPLE
MODES = ("zip", "grid")
# Most design points one sweep (`dse eval`, `dse workload`, `sweep()`) may have: docs,
# guide/commands.md, Input limits. At the limit, measured on one core: 10,000 hardware designs
# (--set lists) take 4-6 s and 190-310 MB as CSV or JSON (40 s and 390 MB with --ops); 10,000
# scenario points (--batch, --seq-in, --seq-out) take ~17 ms each in `dse eval` (~3 min) and ~1.6 ms
# each in `dse workload` (16 s, 340 MB). A 200 x 200 x 200 grid took 116 s and 5.8 GB before
# it ran out of memory. Larger explorations are studies (`dse study`), or several sweeps.
MAX_POINTS = 10_000
# Most scenarios one `dse eval` sweep (`sweep()`) may evaluate: points that differ in a
# scenario field other than a whole-number batch (--seq-in, --seq-out, --phase, --precision,
# a batch in training or max/best) are each an evaluation of their own, 15-40 ms on one core
# (the lowering depends on the lengths), so 256 take 4-10 s. Batches and hardware values
# within a scenario are vectorized and count only toward MAX_POINTS.
MAX_SCENARIOS = 256


def option_name(key: str) -> str:
    """The command-line option that sets `key` (`--seq-in`, `--set memory.L2.capacity`)."""
    return f"--{key.replace('_', '-')}" if key in SCENARIO_FIELDS else f"--set {key}"


def check_points(lengths: dict[str, int], mode: str = "grid") -> int:
    """The number of design points lists of these lengths (key -> length) make as a zip
    (the longest) or a grid (the product); DseError naming the options when it exceeds
    MAX_POINTS (before any point is built)."""
    grid = mode == "grid"
    count = math.prod(lengths.values()) if grid else max(lengths.values(), default=1)
    if count > MAX_POINTS:
        many = {k: n for k, n in lengths.items() if n > 1}
        options = (" x " if grid else ", ").join(option_name(k) for k in many)
        how = f"{count:,}" if len(many) == 1 else (
            " x ".join(f"{n:,}" for n in many.values()) + f" = {count:,}" if grid
            else f"{count:,} zipped")
        raise DseError(f"{options}: {how} points, above the limit of {MAX_POINTS:,} a sweep "
                       "may have; narrow the lists or split the sweep (docs: guide/commands.md, "
                       "Input limits)")
    return count


def expand(values: dict[str, Any], mode: str = "zip") -> list[dict[str, Any]]:
    """The design points of `values` (key -> list of values, or one value) combined as a zip
    or a grid; at least one point, at most MAX_POINTS."""
    if mode not in MODES:
        raise DseError(f"sweep mode: expected one of: {', '.join(MODES)}, found '{mode}'")
    lists = {k: (list(v) if isinstance(v, list | tuple) else [v]) for k, v in values.items()}
    for key, items in lists.items():
        if not items:
            raise DseError(f"{option_name(key)}: expected at least one value")
    check_points({k: len(v) for k, v in lists.items()}, mode)
    if mode == "grid":
        return [dict(zip(lists, combo, strict=True))
                for combo in itertools.product(*lists.values())]
    lengths = {k: len(v) for k, v in lists.items() if len(v) > 1}
    if len(set(lengths.values())) > 1:
        given = ", ".join(f"{option_name(k)} has {n}" for k, n in lengths.items())
        raise DseError(f"--zip: lists of values differ in length ({given}); zipped lists need "
                       "the same length (or one value); --grid combines every value")
    n = max(lengths.values(), default=1)
    return [{k: v[i] if len(v) > 1 else v[0] for k, v in lists.items()} for i in range(n)]


@dataclass
class Sweep:
    """Results of a sweep: `frame` has one row per design point (in the order of the
    points); row r is design `rows[r][1]` of `evaluations[rows[r][0]]`."""

    points: list[dict[str, Any]]
    evaluations: list[Evaluation]
    rows: list[tuple[int, int]]
    frame: pd.DataFrame
    varied: tuple[str, ...]  # keys given more than one distinct value, in the given order
    mode: str

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def feasible(self) -> bool:
        """Whether every design point is feasible."""
        return bool(self.frame["feasible"].all())

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every evaluation's warnings, each once, in order."""
        return tuple(dict.fromkeys(w for ev in self.evaluations for w in ev.warnings))

    def varied_columns(self) -> list[str]:
        """Frame columns of the varied keys (hardware paths with their unit suffix)."""
        return [column_of(k) for k in self.varied]

    def op_frame(self) -> pd.DataFrame:
        """The operators in long form: one row per design point x operator (longest first
        within a design), with the point's varied values, count, time (total over the
        count), share of the step, bound, FLOPs and bytes per level (per chip)."""
        import pandas as pd

        keep = ["design", *self.varied_columns()]
        records = []
        for r, (e, i) in enumerate(self.rows):
            ev = self.evaluations[e]
            head = {c: self.frame.iloc[r][c] for c in keep if c != "design"}
            for op in ev.op_records(i):
                records.append({"design": r, **head, "operator": op["name"],
                                "count": op["count"], "time_s": op["time_s"],
                                "share": op["share"], "bound": op["bound"],
                                "flops": op["flops"],
                                **{f"bytes_{lv}": v for lv, v in op["bytes"].items()}})
        return pd.DataFrame.from_records(records)


def column_of(key: str) -> str:
    """The frame column of a sweep key: scenario fields as they are, hardware paths with
    their SI unit suffix."""
    return key if key in SCENARIO_FIELDS else column_name(key)


def sweep(hw: HardwareSpec, wl: WorkloadSpec, scenario: str | None = None, *,
          values: dict[str, Any] | None = None, mode: str = "zip", chips: int = 1,
          tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1, tech: TechSpec | None = None,
          reticle: bool = True, area_budget: float | None = None) -> Sweep:
    """Evaluate every design point of `values` (scenario fields and hardware paths, each a
    list of values or one value) combined by `mode` (zip or grid) on `scenario` of `wl`.
    Points with the same scenario fields are one `evaluate` call with their hardware values
    as override arrays. Bad values raise DseError naming the option."""
    import pandas as pd

    values = dict(values or {})
    points = expand(values, mode)
    per_design = _batch_per_design(wl, scenario, values)
    groups: dict[tuple, list[int]] = {}
    for p, point in enumerate(points):
        key = tuple((k, point[k]) for k in SCENARIO_FIELDS
                    if k in point and not (per_design and k == "batch"))
        groups.setdefault(key, []).append(p)
    paths = [k for k in values if k not in SCENARIO_FIELDS]
    if len(groups) > MAX_SCENARIOS:
        many = [option_name(k) for k in SCENARIO_FIELDS
                if len({repr(point.get(k)) for point in points}) > 1
                and not (per_design and k == "batch")]
        joined = (" x " if mode == "grid" else ", ").join(many)
        raise DseError(f"{joined}: {len(groups):,} scenarios, above the limit of "
                       f"{MAX_SCENARIOS:,} a sweep evaluates one by one; narrow these lists "
                       "(whole-number batches and --set lists are evaluated together, up to "
                       f"{MAX_POINTS:,} points; docs: guide/commands.md, Input limits)")

    evaluations: list[Evaluation] = []
    rows: dict[int, tuple[int, int]] = {}
    parts = []
    for key, members in groups.items():
        overrides = {path: [points[p][path] for p in members] for path in paths}
        fields = dict(key)
        if per_design:
            batches = [points[p]["batch"] for p in members]
            fields["batch"] = batches if len(batches) > 1 else batches[0]
        ev = evaluate(hw, wl, scenario, chips=chips, tp=tp, pp=pp, cp=cp, ep=ep, tech=tech,
                      reticle=reticle, area_budget=area_budget,
                      overrides=overrides or None, **fields)
        designs = list(range(len(members))) if ev.n > 1 else [0] * len(members)
        rows.update({p: (len(evaluations), i) for p, i in zip(members, designs, strict=True)})
        parts.append(_design_frame(ev).iloc[designs].set_axis(members))
        evaluations.append(ev)
    frame = pd.concat(parts).sort_index().reset_index(drop=True)
    varied = tuple(k for k in values
                   if len({repr(point[k]) for point in points}) > 1)
    return Sweep(points=points, evaluations=evaluations, rows=[rows[p] for p in range(len(points))],
                 frame=frame, varied=varied, mode=mode)


def _batch_per_design(wl: WorkloadSpec, scenario: str | None, values: dict[str, Any]) -> bool:
    """Whether the sweep's batches can run as one batch per design (whole numbers, more
    than one, in a phase that takes them): points that differ only in batch and hardware
    are then one evaluation, as a hardware sweep is."""
    given = values.get("batch")
    batches = list(given) if isinstance(given, list | tuple) else []
    if len(batches) < 2 or not all(isinstance(b, int) and not isinstance(b, bool)
                                   for b in batches):
        return False
    phase = values.get("phase")
    named = list(phase) if isinstance(phase, list | tuple) else [phase]
    try:  # a training step takes one global batch, not one per design
        return not any(phases.get(resolve_scenario(wl, scenario, phase=ph,
                                                   batch=batches[0])[1].phase).trains
                       for ph in named)
    except DseError:
        return False  # each point reports its own problem as it is evaluated


def _design_frame(ev: Evaluation) -> pd.DataFrame:
    """`ev.columns()` as a frame, with the scenario's fields in front and unit-suffixed override
    columns."""
    import pandas as pd

    frame = pd.DataFrame(ev.columns()).rename(
        columns={p: column_name(p) for p in ev.batch.overrides})
    sc = ev.scenario
    batch = (ev.batch_values.astype(int).tolist() if ev.batch_values is not None
             else [sc.batch] * ev.n)
    # Every simple scenario field (what a sweep can vary, SCENARIO_FIELDS) gets its column,
    # so a heading or table that names a sweep key always finds it.
    scenario: dict[str, Any] = {"scenario": ev.scenario_name}
    scenario.update({name: getattr(sc, name) for name in SCENARIO_FIELDS})
    scenario.update(batch=batch, chips=ev.chips, tp=ev.tp, pp=ev.pp)
    hw_cols = [column_name(p) for p in ev.batch.overrides]
    rest = [c for c in frame.columns if c not in hw_cols]
    out = frame[hw_cols].copy()
    for col, value in scenario.items():
        out[col] = value if col == "batch" else [value] * ev.n
    return pd.concat([out, frame[rest]], axis=1)
