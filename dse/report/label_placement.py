"""Placing text labels on a plot without overlap: each label beside its marker at the nearest
free spot (a ring of gaps and angles around it), clear of the other labels, markers and
lines, with a leader line when it had to move away; and the boxes of what is drawn, in
display pixels, that labels must avoid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels


# Gaps between a marker's edge and its label's box, in label heights, tried in turn
# (nearest first); a label further out than LEADER_GAP gets a leader line to its marker.
_GAPS = (0.15, 0.5, 1.1, 1.8, 2.6, 3.6, 5.0, 7.0, 9.5, 13.0, 17.0)


LEADER_GAP = 0.3


# Directions around an anchor, in the order tried: right, left, above, below, the
# diagonals, then the eight between them (degrees).
_ANGLES = (0, 180, 90, 270, 45, 135, 315, 225, 22.5, 157.5, 337.5, 202.5, 67.5, 112.5,
           292.5, 247.5)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def box_distance(box: Box, x: float, y: float) -> float:
    """Pixels from the point (x, y) to the nearest point of `box` (0 inside it)."""
    dx = max(box[0] - x, 0.0, x - box[2])
    dy = max(box[1] - y, 0.0, y - box[3])
    return float(np.hypot(dx, dy))


def nearest_point(box: Box, x: float, y: float) -> tuple[float, float]:
    """The point of `box` nearest to (x, y): where a leader line from there meets it."""
    return min(max(x, box[0]), box[2]), min(max(y, box[1]), box[3])


def _candidate(ax: float, ay: float, w: float, h: float, gap: float, angle: float) -> Box:
    """The box of size w x h whose near side lies `gap` pixels from the anchor in the
    direction `angle`, sliding around a rectangle (so diagonals touch by a corner)."""
    c, s = np.cos(np.radians(angle)), np.sin(np.radians(angle))
    m = max(abs(c), abs(s))
    c, s = (0.0 if abs(c) < 1e-9 else c / m), (0.0 if abs(s) < 1e-9 else s / m)
    cx, cy = ax + c * (gap + w / 2), ay + s * (gap + h / 2)
    return (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)


def _segment_hits(p: tuple[float, float], q: tuple[float, float], boxes: np.ndarray) -> bool:
    """Whether the segment p-q passes through any of `boxes` ([B, 4]), by sampling it."""
    if not len(boxes):
        return False
    t = np.linspace(0.05, 0.95, 12)[:, None]
    xs, ys = p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])
    inside = ((xs > boxes[:, 0]) & (xs < boxes[:, 2]) & (ys > boxes[:, 1])
              & (ys < boxes[:, 3]))
    return bool(inside.any())


@dataclass(frozen=True)
class Placement:
    """Where a label went: its box (pixels) and whether it needs a leader line."""

    box: Box
    leader: bool


def place(anchors: Sequence[tuple[float, float]], sizes: Sequence[tuple[float, float]],
          occupied: Sequence[Box] = (), frame: Box | None = None,
          markers: Sequence[tuple[float, float]] | None = None, reach: float = 0.0
          ) -> list[Placement | None]:
    """Greedy, deterministic label placement (pixels). For each anchor in order (most
    important first), the nearest candidate box (`sizes`: width, height) around it that
    overlaps no `occupied` box, no label placed before and no leader line drawn before,
    stays inside `frame`, and lies nearer its own anchor than any other of `markers`
    (default: the anchors; markers that overlap the anchor's, within 2 x `reach`, share its
    spot). A label further
    than LEADER_GAP heights from its marker's edge (`reach` pixels from the anchor) gets a
    leader line (which crosses no label placed before); when no candidate is nearest its
    own anchor, the free one that comes closest (the largest margin of the nearest other
    marker's distance over its own) is taken, with a leader line; when every leader line
    out would cross a label (a ring of labels round one marker), the first free box with
    one. None where nothing fits."""
    marks = np.asarray(markers if markers is not None else anchors, float).reshape(-1, 2)
    fixed = np.asarray(list(occupied), float).reshape(-1, 4)
    labels: list[Box] = []
    leaders: list[tuple[tuple[float, float], tuple[float, float]]] = []
    out: list[Placement | None] = []

    def free(box: Box) -> bool:
        if frame is not None and not (frame[0] <= box[0] and box[2] <= frame[2]
                                      and frame[1] <= box[1] and box[3] <= frame[3]):
            return False
        if len(fixed) and bool(((box[0] < fixed[:, 2]) & (fixed[:, 0] < box[2])
                                & (box[1] < fixed[:, 3]) & (fixed[:, 1] < box[3])).any()):
            return False
        if any(_overlaps(box, b) for b in labels):
            return False
        return not any(_segment_hits(p, q, np.array([box])) for p, q in leaders)

    for (ax, ay), (w, h) in zip(anchors, sizes, strict=True):
        others = marks[np.hypot(marks[:, 0] - ax, marks[:, 1] - ay) > max(1.0, 2 * reach)]
        fallback: Placement | None = None
        crossing: Placement | None = None
        best = -np.inf  # the fallback's margin: nearest other marker minus own distance
        chosen: Placement | None = None
        for gap in _GAPS:
            for angle in _ANGLES:
                box = _candidate(ax, ay, w, h, reach + gap * h, angle)
                if not free(box):
                    continue
                leader = gap > LEADER_GAP
                if leader and _segment_hits((ax, ay), nearest_point(box, ax, ay),
                                            np.array(labels).reshape(-1, 4)):
                    if crossing is None:  # the last resort: a leader across a label
                        crossing = Placement(box, True)
                    continue
                own = box_distance(box, ax, ay)
                margin = min((box_distance(box, mx, my) for mx, my in others),
                             default=np.inf) - own
                if margin > 1.0:
                    chosen = Placement(box, leader)
                    break
                if margin > best:  # the least mistakable of the others, by a leader
                    fallback, best = Placement(box, True), margin
            if chosen is not None:
                break
        chosen = chosen or fallback or crossing
        if chosen is not None:
            labels.append(chosen.box)
            if chosen.leader:
                leaders.append(((ax, ay), nearest_point(chosen.box, ax, ay)))
        out.append(chosen)
    return out


def place_labels(anchors: Sequence[tuple[float, float]], sizes: Sequence[tuple[float, float]],
                 occupied: Sequence[Box] = (), frame: Box | None = None,
                 markers: Sequence[tuple[float, float]] | None = None
                 ) -> list[tuple[float, float] | None]:
    """`place`, as the lower-left corner of each label box (None where nothing fits)."""
    return [None if p is None else (p.box[0], p.box[1])
            for p in place(anchors, sizes, occupied, frame, markers)]


def freeze_layout(fig: Any) -> Any:
    """Lay `fig` out once and keep it so (pixel positions computed now stay true when it is
    saved); returns its renderer."""
    fig.canvas.draw()
    fig.set_layout_engine("none")
    return fig.canvas.get_renderer()


def boxes_of(artists: Sequence[Any], renderer: Any, pad: float = 2.0) -> list[Box]:
    """The pixel boxes of drawn artists (a legend, texts), padded."""
    out = []
    for a in artists:
        if a is None or not a.get_visible():
            continue
        b = a.get_window_extent(renderer)
        out.append((b.x0 - pad, b.y0 - pad, b.x1 + pad, b.y1 + pad))
    return out


def line_boxes(ax: Any, xs: Sequence[float] | np.ndarray, ys: Sequence[float] | np.ndarray,
               samples: int = 150,
               half: float = 2.0) -> list[Box]:
    """A drawn line (data coordinates, straight between points on the axes' scales) as a
    row of small pixel boxes, for labels to keep off it."""
    pts = ax.transData.transform(np.column_stack([np.asarray(xs, float),
                                                  np.asarray(ys, float)]))
    pts = pts[np.isfinite(pts).all(axis=1)]
    if len(pts) < 2:
        return [(x - half, y - half, x + half, y + half) for x, y in pts]
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    along = np.concatenate([[0.0], np.cumsum(seg)])
    t = np.linspace(0.0, along[-1], max(samples, 2))
    px, py = np.interp(t, along, pts[:, 0]), np.interp(t, along, pts[:, 1])
    return [(x - half, y - half, x + half, y + half) for x, y in zip(px, py, strict=True)]


def label_markers(fig: Any, ax: Any, items: Sequence[tuple[str, float, float]],
                  renderer: Any, occupied: Sequence[Box] = (),
                  markers: Sequence[tuple[float, float]] | None = None,
                  fontsize: float = 8.0, colours: Sequence[str] | None = None,
                  marker_px: float = 4.0, background: bool = False) -> list[Any | None]:
    """Name each marker (text, x, y in data coordinates) with an annotation that overlaps
    no other label, no `occupied` box and no marker, lies nearest its own marker (of
    `markers`, pixels; default the items'), and has a thin leader line to it where it had to
    move away. The annotation's `xy` is its marker. Returns the annotations (None where no
    place was found). Call after the layout is frozen (`freeze_layout`)."""
    if not items:
        return []
    anchors = ax.transData.transform([(x, y) for _, x, y in items])
    pad = 2.0 if background else 1.0
    sizes = []
    for text, _, _ in items:
        t = ax.text(0, 0, text, fontsize=fontsize)
        b = t.get_window_extent(renderer)
        t.remove()
        sizes.append((b.width + 2 * pad, b.height + 2 * pad))
    own = [(x - marker_px, y - marker_px, x + marker_px, y + marker_px) for x, y in anchors]
    spots = place([tuple(a) for a in anchors], sizes, [*occupied, *own],
                  _frame(ax, renderer), markers if markers is not None
                  else [tuple(a) for a in anchors], reach=marker_px)
    to_points = 72.0 / fig.dpi
    out: list[Any] = []
    for k, ((text, x, y), spot, (px, py)) in enumerate(zip(items, spots, anchors,
                                                           strict=True)):
        if spot is None:
            out.append(None)
            continue
        cx, cy = (spot.box[0] + spot.box[2]) / 2, (spot.box[1] + spot.box[3]) / 2
        colour = colours[k] if colours is not None else "black"
        arrow = dict(arrowstyle="-", color="0.45", lw=0.6, shrinkA=0,
                     shrinkB=marker_px * to_points) if spot.leader else None
        # the box also clips the leader line at the label's edge (without one matplotlib
        # draws it from the text's centre, through the text)
        box = dict(boxstyle=f"square,pad={pad * to_points / fontsize:.3f}",
                   fc="white" if background else "none", ec="none",
                   alpha=0.85 if background else None)
        out.append(ax.annotate(text, (x, y), xytext=((cx - px) * to_points,
                                                     (cy - py) * to_points),
                               textcoords="offset points", ha="center", va="center",
                               fontsize=fontsize, color=colour, arrowprops=arrow, bbox=box,
                               zorder=8, annotation_clip=False))
    return out


def _frame(ax: Any, renderer: Any) -> Box:
    b = ax.get_window_extent(renderer)
    return (b.x0 + 1, b.y0 + 1, b.x1 - 1, b.y1 - 1)
