"""What every plot shares: the output file (format from its extension, checked before any
work), SI tick labels, colours by bound, and label placement that keeps labels apart.

Pure helpers (no matplotlib at import); the drawing modules import matplotlib lazily with
the Agg backend through `pyplot()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dse import units
from dse.errors import DseError

IMAGE_FORMATS = ("png", "svg", "pdf")
DPI = 150  # raster resolution of PNG output (dots per inch)

# Colours of the resources that bound an operator: compute, overhead and interconnect are
# fixed; memory levels take LEVEL_COLOURS in order, innermost first (matplotlib's tab10).
BOUND_COLOURS = {"compute": "#d62728", "overhead": "#7f7f7f", "interconnect": "#8c564b"}
LEVEL_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#bcbd22", "#e377c2")


def image_format(path: Path, option: str = "--out") -> str:
    """The image format named by `path`'s extension (png, svg or pdf); anything else, or a
    folder that does not exist, is a one-line DseError naming `option`."""
    ext = path.suffix.lower().lstrip(".")
    if ext not in IMAGE_FORMATS:
        found = f"'.{ext}'" if ext else "no extension"
        raise DseError(f"{option} {path}: expected a .png, .svg or .pdf file, found {found}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise DseError(f"{option} {path}: folder '{parent}' does not exist")
    return ext


def default_out(kind: str, *names: str | None) -> Path:
    """`<kind>-<name>[-<name>...].png` in the current folder; characters that do not belong
    in a file name (`gemm:4096x4096x4096`, a path's folders) become '-'."""
    parts = [kind] + [re.sub(r"[^A-Za-z0-9._]+", "-", Path(n).stem if n.endswith(
        (".yaml", ".yml")) else n).strip("-") for n in names if n]
    return Path("-".join(p for p in parts if p) + ".png")


def bound_colours(levels: Sequence[str]) -> dict[str, str]:
    """Colour of every bound a chip with memory `levels` (innermost first) can report."""
    out = dict(BOUND_COLOURS)
    for k, name in enumerate(levels):
        out[name] = LEVEL_COLOURS[k % len(LEVEL_COLOURS)]
    return out


def si_label(value: float, kind: units.Kind | str) -> str:
    """A tick label in SI units: 1e14 FLOP/s -> '100 TFLOP/s'; a plain unit string is
    appended to the number ('3 tokens/s')."""
    if isinstance(kind, str):
        return f"{value:g} {kind}".strip()
    return units.format_quantity(value, kind, digits=3)


def spread(values: Sequence[float], gap: float) -> list[float]:
    """Positions near `values` (one axis, e.g. log10 of y) at least `gap` apart, in the same
    order, each moved as little as the others allow (a 1-D repel for stacked labels): runs
    of labels that would collide are spaced by `gap` around the mean of what they want."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    clusters: list[list[float]] = []  # wanted positions of each run, in order

    def bottom(run: list[float]) -> float:
        return sum(v - k * gap for k, v in enumerate(run)) / len(run)

    for i in order:
        run = [float(values[i])]
        while clusters and bottom(clusters[-1]) + len(clusters[-1]) * gap > bottom(run):
            run = clusters.pop() + run
        clusters.append(run)
    placed = [bottom(run) + k * gap for run in clusters for k in range(len(run))]
    out = [0.0] * len(placed)
    for k, i in enumerate(order):
        out[i] = placed[k]
    return out


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels

# Offsets (in label heights) tried in turn around an anchor: right, left, above, below,
# the diagonals, then the same further out.
_CANDIDATES = tuple((dx * r, dy * r) for r in (0.6, 1.5, 2.8, 4.5)
                    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1),
                                   (1, -1), (-1, -1)))


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(anchors: Sequence[tuple[float, float]], sizes: Sequence[tuple[float, float]],
                 occupied: Sequence[Box] = (), frame: Box | None = None
                 ) -> list[tuple[float, float] | None]:
    """Greedy label placement (pixels): for each anchor in order (most important first) the
    first candidate offset whose box (`sizes`: width, height) overlaps no placed or
    `occupied` box and stays inside `frame`; None where no candidate fits. Returns the
    lower-left corner of each label box."""
    taken = list(occupied)
    out: list[tuple[float, float] | None] = []
    for (ax, ay), (w, h) in zip(anchors, sizes, strict=True):
        placed = None
        for dx, dy in _CANDIDATES:
            # right of the anchor: box starts there; left: box ends there; centred in y
            x0 = ax + dx * h if dx > 0 else ax + dx * h - w if dx < 0 else ax - w / 2
            y0 = ay + dy * h - h / 2 + (h / 2 if dy > 0 else -h / 2 if dy < 0 else 0.0)
            box = (x0, y0, x0 + w, y0 + h)
            if frame is not None and not (frame[0] <= box[0] and box[2] <= frame[2]
                                          and frame[1] <= box[1] and box[3] <= frame[3]):
                continue
            if any(_overlaps(box, t) for t in taken):
                continue
            placed = (x0, y0)
            taken.append(box)
            break
        out.append(placed)
    return out


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def log_axis(axis: Any, label: Callable[[float], str]) -> None:
    """Decade ticks labelled by `label`, no minor labels, on a log axis."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: label(v)))
    axis.set_minor_formatter(plt.NullFormatter())


def save(fig: Any, path: Path, option: str = "--out") -> Path:
    """Write `fig` in the format of `path`'s extension and close it; returns the path."""
    fmt = image_format(path, option)
    try:
        fig.savefig(path, format=fmt, dpi=DPI, bbox_inches="tight")
    except OSError as e:
        raise DseError(f"{option} {path}: cannot write: {e.strerror or e}") from None
    finally:
        pyplot().close(fig)
    return path
