"""`dse plot roofline`: the chip's roofline over its whole memory hierarchy, and where the
operators of an evaluated scenario sit under it.

Roofs are the model's own rates (`DesignBatch`, the arrays `dse.evaluate` reads), so a point
never sits above the roof that bounds it:
- a bandwidth roof per memory level: FLOP/s = intensity x (peak bandwidth x the level's
  achieved fraction), the rate `dse show` lists times its `achieved` column;
- a compute roof per matrix precision: peak x achievable fraction (precisions with the same
  rate share one roof);
- ridge points at the achieved rates: compute roof / bandwidth roof (FLOP per byte). `dse
  show`'s ridge table divides the datasheet peaks instead (fractions of 1).

Where an operator goes (the choice this plot makes): x is its FLOPs over the bytes it moves
at its *bounding* level (the level whose traffic / bandwidth is its longest memory term;
for an operator bound by compute or by the fixed per-kernel overhead, the level with the
longest memory term all the same, so its distance to that level's roof shows its slack);
y is FLOPs / the operator's modelled time (overhead, waves and the overlap of on-die work
with off-chip traffic included), so memory-bound points sit on or just under their level's
roof. Collectives and operators with no FLOPs or no traffic have no place on these axes;
they are listed in `omitted`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dse import units
from dse.model import Evaluation
from dse.model.batch import DesignBatch
from dse.model.kernel import executed_precision
from dse.report.figure import bound_colours
from dse.spec.hardware import PRECISIONS
from dse.workloads.common import PRECISIONS as DTYPES

RATE_TOLERANCE = 0.005  # precisions whose roofs differ by less than this share one line
TOP_LABELLED = 8  # operator groups (by time) that get a label on the plot
OP_MARKER_PX = 7.0  # pixels (at 100 dpi) across an operator's marker: closer ones overlap


@dataclass(frozen=True)
class MemoryRoof:
    """One memory level's bandwidth roof: FLOP/s = intensity x `bandwidth`."""

    level: str
    kind: str
    peak: float  # B/s, datasheet, chip total
    fraction: float  # achieved share of the peak
    bandwidth: float  # B/s achieved (peak x fraction)

    @property
    def label(self) -> str:
        """'HBM3 2.9 TB/s (0.867 x 3.35 TB/s)': achieved bandwidth (and the peak it comes
        from when the fraction is not 1)."""
        bw = units.format_quantity(self.bandwidth, units.BANDWIDTH, 3)
        if self.fraction == 1.0:
            return f"{self.level} {bw}"
        peak = units.format_quantity(self.peak, units.BANDWIDTH, 3)
        return f"{self.level} {bw} ({self.fraction:.3g} x {peak})"


@dataclass(frozen=True)
class ComputeRoof:
    """One compute roof (matrix engine, or vector units on a chip without one)."""

    precisions: tuple[str, ...]
    engine: str  # "matrix" or "vector"
    peak: float  # FLOP/s, datasheet
    fraction: float  # achievable share of the peak
    rate: float  # FLOP/s (peak x fraction)

    @property
    def label(self) -> str:
        """'bf16/fp16 856 TFLOP/s (0.865 x 989 TFLOP/s)': achieved rate and its peak."""
        def rate(v: float) -> str:
            text = units.format_quantity(v, units.FLOP_RATE, 3)
            return text.replace("FLOP/s", "OP/s") if all(
                p.startswith("int") for p in self.precisions) else text

        engine = "" if self.engine == "matrix" else " (vector)"
        peak = "" if self.fraction == 1.0 else f" ({self.fraction:.3g} x {rate(self.peak)})"
        return f"{'/'.join(self.precisions)}{engine} {rate(self.rate)}{peak}"


@dataclass(frozen=True)
class OpPoint:
    """One operator of the evaluated scenario, per chip and per instance unless stated."""

    name: str
    count: float  # instances per step
    flops: float  # FLOPs per instance
    level: str  # the level whose traffic gives the intensity
    bytes: float  # bytes per instance at `level`
    intensity: float  # FLOP/byte = flops / bytes
    achieved: float  # FLOP/s = flops / time per instance
    time_s: float  # s, total over the count
    share: float  # of the step's time (operators and collectives)
    bound: str  # compute, a level name or overhead


@dataclass(frozen=True)
class RooflineData:
    hardware: str
    title: str
    memory: tuple[MemoryRoof, ...]
    compute: tuple[ComputeRoof, ...]
    precision: str  # the precision whose roof the ridge points use
    ridges: dict[str, float]  # level -> FLOP/byte at `precision`
    ops: tuple[OpPoint, ...] = ()
    omitted: tuple[str, ...] = ()  # operators with no place on the axes (collectives ...)
    colours: dict[str, str] = field(default_factory=dict)  # bound -> colour

    def roof(self, precision: str | None = None) -> ComputeRoof:
        p = precision or self.precision
        return next(c for c in self.compute if p in c.precisions)

    def attainable(self, intensity: float, precision: str | None = None) -> float:
        """FLOP/s the roofline allows at `intensity` (FLOP/byte), over every level."""
        return min([self.roof(precision).rate]
                   + [intensity * m.bandwidth for m in self.memory])


def memory_roofs(db: DesignBatch, i: int = 0) -> tuple[MemoryRoof, ...]:
    """Bandwidth roofs of design i, innermost level first."""
    return tuple(MemoryRoof(level=name, kind=kind, peak=float(db.peak_bandwidth[i, k]),
                            fraction=float(db.bandwidth[i, k] / db.peak_bandwidth[i, k]),
                            bandwidth=float(db.bandwidth[i, k]))
                 for k, (name, kind) in enumerate(zip(db.level_names, db.level_kinds,
                                                      strict=True)))


def compute_roofs(db: DesignBatch, i: int = 0) -> tuple[ComputeRoof, ...]:
    """Compute roofs of design i, highest first: every matrix precision at peak x achievable
    fraction (the vector peaks on a chip with no matrix engine), equal rates merged."""
    engine = "matrix" if db.matrix_peak else "vector"
    peaks = db.matrix_peak or db.vector_peak
    rows = []
    for p in PRECISIONS:
        if p not in peaks:
            continue
        frac = float(db.matrix_fraction[p][i]) if engine == "matrix" else 1.0
        rows.append((p, float(peaks[p][i]), frac))
    roofs: list[ComputeRoof] = []
    for p, peak, frac in rows:
        rate = peak * frac
        same = next((r for r in roofs if abs(r.rate - rate) <= RATE_TOLERANCE * rate), None)
        if same is not None:
            roofs[roofs.index(same)] = ComputeRoof((*same.precisions, p), engine, same.peak,
                                                   same.fraction, same.rate)
        else:
            roofs.append(ComputeRoof((p,), engine, peak, frac, rate))
    return tuple(sorted(roofs, key=lambda r: -r.rate))


def ridge_points(memory: tuple[MemoryRoof, ...], roof: ComputeRoof) -> dict[str, float]:
    """FLOP/byte at which `roof` meets each level's bandwidth roof."""
    return {m.level: roof.rate / m.bandwidth for m in memory}


def ridge_precision(compute: tuple[ComputeRoof, ...], scenario_precision: str | None) -> str:
    """The precision the ridge points use: the one the scenario's matrix work runs at (w8a16
    computes in fp16; fp8 on a chip without fp8 runs as fp16), else bf16 (or what it runs as),
    else the fastest."""
    have = {p: np.zeros(1) for r in compute for p in r.precisions}
    wanted = "bf16" if scenario_precision is None else \
        DTYPES.get(scenario_precision, (scenario_precision,) * 4)[3]
    for dtype in (wanted, "bf16"):
        p = executed_precision(have, dtype)  # bf16 -> fp16 -> fp32 where a chip lacks it
        if p in have:
            return p
    return compute[0].precisions[0]


def op_points(ev: Evaluation, i: int = 0) -> tuple[tuple[OpPoint, ...], tuple[str, ...]]:
    """The operators of design i as roofline points (see the module docstring), longest
    total time first, and the names of those with no place on the axes."""
    db = ev.batch
    bw = db.bandwidth[i]
    bound = ev.ops_bound[i]
    total = float(np.sum(ev.ops_spent[i]))
    n_ops = ev.op_traffic.shape[1]
    points, omitted = [], []
    for j, name in enumerate(ev.ops_name):
        flops = float(ev.ops_flops[i, j])
        traffic = ev.op_traffic[i, j] if j < n_ops else np.zeros(len(bw))
        if flops <= 0 or not np.any(traffic > 0):
            omitted.append(str(name))
            continue
        b = str(bound[j])
        level = db.level_names.index(b) if b in db.level_names \
            else int(np.argmax(traffic / bw))
        t = float(ev.ops_time[i, j])
        count = float(ev.ops_count[i, j])
        points.append(OpPoint(name=str(name), count=count, flops=flops,
                              level=db.level_names[level], bytes=float(traffic[level]),
                              intensity=flops / float(traffic[level]), achieved=flops / t,
                              time_s=count * t, share=count * t / total if total > 0 else 0.0,
                              bound=b))
    return tuple(sorted(points, key=lambda p: -p.time_s)), tuple(omitted)


def roofline_data(db: DesignBatch, ev: Evaluation | None = None, i: int = 0,
                  title: str | None = None) -> RooflineData:
    """Everything the roofline plot draws for design i of `db` (with `ev`, its operators)."""
    memory, compute = memory_roofs(db, i), compute_roofs(db, i)
    precision = ridge_precision(compute, ev.scenario.precision if ev is not None else None)
    roof = next(c for c in compute if precision in c.precisions)
    ops, omitted = op_points(ev, i) if ev is not None else ((), ())
    return RooflineData(hardware=db.spec.name, title=title or db.spec.name, memory=memory,
                        compute=compute, precision=precision,
                        ridges=ridge_points(memory, roof), ops=ops, omitted=omitted,
                        colours=bound_colours(db.level_names))


def label_groups(ops: tuple[OpPoint, ...], top: int = TOP_LABELLED,
                 same: Callable[[OpPoint, OpPoint], bool] | None = None
                 ) -> list[tuple[OpPoint, str]]:
    """The `top` longest groups of operators that sit at the same point (within 1% on both
    axes, e.g. gate_proj, up_proj, down_proj; or as `same` says, e.g. markers that overlap
    on the figure), each as (first point, label with the group's share of the step)."""
    def close(a: OpPoint, b: OpPoint) -> bool:
        return (abs(np.log(a.intensity / b.intensity)) < 0.01
                and abs(np.log(a.achieved / b.achieved)) < 0.01)

    same = same or close
    groups: list[list[OpPoint]] = []
    for p in ops:
        home = next((g for g in groups if same(g[0], p)), None)
        if home is None:
            groups.append([p])
        else:
            home.append(p)
    groups.sort(key=lambda g: -sum(p.time_s for p in g))
    out = []
    for g in groups[:top]:
        names = ", ".join(p.name for p in g[:5]) + (f" and {len(g) - 5} more" if len(g) > 5
                                                     else "")
        share = sum(p.share for p in g)
        out.append((g[0], f"{names} ({'<1%' if share < 0.005 else f'{share:.0%}'})"))
    return out


def _number(v: float) -> str:
    """A FLOP/byte figure for people: 0.01, 27.7, 2,290, 100,000."""
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"


def _axis_range(data: RooflineData) -> tuple[float, float, float, float]:
    """x (FLOP/byte) and y (FLOP/s) limits: every ridge and point with a margin."""
    top = data.compute[0].rate
    xs = [top / m.bandwidth for m in data.memory] + [p.intensity for p in data.ops]
    xs += [c.rate / data.memory[-1].bandwidth for c in data.compute]
    x_lo = 10 ** np.floor(np.log10(min(xs) / 8))
    x_hi = 10 ** np.ceil(np.log10(max(xs) * 8))
    ys = [x_lo * m.bandwidth for m in data.memory] + [p.achieved for p in data.ops]
    y_lo = 10 ** np.floor(np.log10(max(min(ys), top * 1e-6)))
    return x_lo, x_hi, y_lo, top * 4


def draw(data: RooflineData, path: Path) -> Path:
    """Log-log roofline: bandwidth roofs (coloured by level), compute roofs (black, one per
    precision group), ridge points at `data.precision`, operators coloured by their bound
    with the longest labelled; written to `path` (PNG, SVG or PDF by extension)."""
    from dse.report.figure import image_format, log_axis, pyplot, save
    from dse.report.label_placement import boxes_of, label_markers, line_boxes

    image_format(path)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 6.5))
    x_lo, x_hi, y_lo, y_hi = _axis_range(data)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    top = data.compute[0].rate
    colours = data.colours
    # bandwidth roofs: from the left edge to the highest compute roof
    for m in data.memory:
        x_end = top / m.bandwidth
        ax.plot([x_lo, x_end], [x_lo * m.bandwidth, top], color=colours[m.level], lw=1.6,
                zorder=2)
    # compute roofs: from the innermost (fastest) level's roof to the right edge
    fastest = max(m.bandwidth for m in data.memory)
    for k, c in enumerate(data.compute):
        ax.plot([c.rate / fastest, x_hi], [c.rate] * 2, color="black",
                lw=1.6 if k == 0 else 1.0, ls="-" if c is data.roof() else "--", zorder=2)
    ridge_roof = data.roof()
    ax.scatter([ridge_roof.rate / m.bandwidth for m in data.memory],
               [ridge_roof.rate] * len(data.memory), marker="D", s=22, facecolor="white",
               edgecolor="black", zorder=4,
               label=f"ridge points at {data.precision}: "
                     + ", ".join(f"{lv} {_number(r)}" for lv, r in data.ridges.items())
                     + " FLOP/B")
    # operators, coloured by their bound
    bounds = list(dict.fromkeys(p.bound for p in data.ops))
    for b in bounds:
        pts = [p for p in data.ops if p.bound == b]
        ax.scatter([p.intensity for p in pts], [p.achieved for p in pts], s=36,
                   color=colours.get(b, "black"), edgecolor="white", linewidth=0.6,
                   zorder=5, label=f"operators bound by {b}")
    log_axis(ax.yaxis, lambda v: units.format_quantity(v, units.FLOP_RATE, 3))
    log_axis(ax.xaxis, _number)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(data.title, fontsize=10)
    ax.grid(True, which="major", color="0.92", lw=0.6, zorder=0)
    fig.tight_layout()

    texts = _roof_labels(ax, data, x_lo, y_lo, y_hi)
    # operator labels: nearest their own point, away from the other points, the roofs,
    # the roof labels and each other, with a leader line where one had to move away
    # one label for the operators whose markers overlap on the figure (one visible dot)
    def overlap(a: OpPoint, b: OpPoint) -> bool:
        pa, pb = ax.transData.transform([(a.intensity, a.achieved), (b.intensity, b.achieved)])
        return bool(np.hypot(*(pa - pb)) < OP_MARKER_PX)

    groups = label_groups(data.ops, same=overlap)
    if groups:
        renderer = fig.canvas.get_renderer()
        occupied = boxes_of(texts, renderer)
        for line in ax.get_lines():  # the roofs, as rows of small boxes
            occupied += line_boxes(ax, *line.get_data())
        points = ax.transData.transform([(p.intensity, p.achieved) for p in data.ops])
        occupied += [(x - 4, y - 4, x + 4, y + 4) for x, y in points]
        label_markers(fig, ax, [(text, p.intensity, p.achieved) for p, text in groups],
                      renderer, occupied, markers=[tuple(a) for a in points], fontsize=7,
                      marker_px=OP_MARKER_PX / 2)
    note = ("operators: x = FLOPs / bytes at the bounding level (compute- or overhead-bound: "
            "at the level with the longest memory time), y = FLOPs / modelled time"
            if data.ops else None)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=8,
              frameon=False, title=note, title_fontsize=7.5)
    return save(fig, path)


def _roof_labels(ax: Any, data: RooflineData, x_lo: float, y_lo: float, y_hi: float
                 ) -> list[Any]:
    """The roofs' labels, kept apart: compute roofs outside the right edge at their height
    (1-D repel in log10 of y), bandwidth roofs along their line near where it enters the
    axes (staggered along x where lines are close). Returns the text artists."""
    from dse.report.figure import spread

    colours = data.colours
    frame = ax.get_window_extent()
    gap = np.log10(y_hi / y_lo) * 13.0 / frame.height  # one 8-pt line in log10 units of y
    ys = spread([np.log10(c.rate) for c in data.compute], gap)
    texts = [ax.text(1.01, 10 ** y, c.label, transform=ax.get_yaxis_transform(),
                     ha="left", va="center", fontsize=8, clip_on=False)
             for c, y in zip(data.compute, ys, strict=True)]
    to_px = ax.transData.transform
    along = 1.0
    last = None
    for m in sorted(data.memory, key=lambda m: -m.bandwidth):
        x0 = max(x_lo, y_lo / m.bandwidth) * 1.4
        if last is not None and last / m.bandwidth < 2.0:  # lines close: stagger along x
            along *= 4.0
        else:
            along = 1.0
        last = m.bandwidth
        x0 *= along
        (ax_, ay_), (bx, by) = to_px([(x0, x0 * m.bandwidth), (x0 * 10, x0 * 10 * m.bandwidth)])
        angle = float(np.degrees(np.arctan2(by - ay_, bx - ax_)))
        texts.append(ax.text(x0, x0 * m.bandwidth * 1.12, m.label, rotation=angle,
                             rotation_mode="anchor", ha="left", va="bottom", fontsize=8,
                             color=colours[m.level], zorder=6))
    return texts
