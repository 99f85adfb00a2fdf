"""Package geometry of N designs: the shape of each die, which of its edges hold HBM stacks
and how many fit, the die-to-die interface a split needs, and the interposer's area against
its packaging technology's limit. Pure numpy, no I/O.

The rule (docs: model/area-power-cost.md, Package geometry), read from shipped floorplans (GH100,
GA100: three stacks on each long edge, NVLink and PCIe on the short edges; B200: two dies joined
along a short edge by NV-HBI, two stacks on each die's long edges; MI300X: stacks on the outer
edges of its I/O dies):

    die       = long x short, long / short = aspect_ratio (default 1.27, the 26 x 33 mm
                field's shape, which reticle-class dies such as GH100 and GA100 fill)
    layout    = dies in one row (1 or 2 dies) or two rows, joined along their short edges
                within a row and their long edges between rows; each joint carries a
                die-to-die PHY on both dies
    HBM edges = the free long edges first, then free short edges, at most `hbm_edges`
    per edge  = floor((edge + 2 overhang) / stack width): a row of stacks may reach
                `hbm_overhang` past each end of the die edge it faces
    interposer= bounding box of dies and stack rows with `gap` keep-outs, plus `margin`

The area compared is the modelled die (spares and edge padding included), not a published
figure: the model reads ~7% below published dies (docs: model/area-power-cost.md), so the rule's
overhang is set for the modelled GH100 to hold the three stacks per long edge it has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.spec.technology import PackageRules


@dataclass(frozen=True)
class Geometry:
    """Package geometry of N designs (all [N] arrays)."""

    long_mm: np.ndarray  # long edge of one die
    short_mm: np.ndarray  # short edge of one die
    hbm_edges: np.ndarray  # edges of one die that hold HBM (after die-to-die joints)
    per_edge_needed: np.ndarray  # stacks each HBM edge must hold (the most loaded die)
    per_long_edge: np.ndarray  # stacks a long edge holds
    per_short_edge: np.ndarray  # stacks a short edge holds
    capacity: np.ndarray  # stacks one die's HBM edges hold
    d2d_joints: np.ndarray  # die-to-die joints in the package
    d2d_mm2: np.ndarray  # die-to-die PHY silicon, all dies
    d2d_edge_mm: np.ndarray  # die edge one die's die-to-die PHY takes (per joint)
    interposer_mm2: np.ndarray
    interposer_limit_mm2: np.ndarray
    packaging: np.ndarray  # str, the packaging technology
    edges_fit: np.ndarray  # bool: the HBM stacks fit the die edges the rules give them
    edge_reason: np.ndarray  # str ("" when they fit)
    interposer_fits: np.ndarray  # bool: within the packaging technology (and HBM allowed)
    interposer_reason: np.ndarray  # str ("" when it fits)

    @property
    def feasible(self) -> np.ndarray:
        """[N] bool: both checks pass."""
        return self.edges_fit & self.interposer_fits

    @property
    def reason(self) -> np.ndarray:
        """[N] str: the failed checks' reasons ("" when feasible)."""
        out = np.full(len(self.edges_fit), "", dtype=object)
        for i in np.flatnonzero(~self.feasible):
            out[i] = "; ".join(w for w in (self.edge_reason[i], self.interposer_reason[i]) if w)
        return out


def die_edges(die_mm2: np.ndarray, aspect: float) -> tuple[np.ndarray, np.ndarray]:
    """(long, short) edges of a die of `die_mm2` mm^2 with long / short = `aspect`, mm."""
    die = np.asarray(die_mm2, dtype=float)
    return np.sqrt(die * aspect), np.sqrt(die / aspect)


def stacks_per_edge(edge_mm: np.ndarray, width_mm: float | np.ndarray, overhang_mm: float
                    ) -> np.ndarray:
    """Stacks of width `width_mm` a die edge of `edge_mm` faces, a row of stacks reaching
    `overhang_mm` past each end of the edge."""
    return np.floor((np.asarray(edge_mm, dtype=float) + 2.0 * overhang_mm) / width_mm + 1e-9)


def layout(dies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the dies: one row up to two dies, else two rows."""
    dies = np.asarray(dies, dtype=float)
    rows = np.where(dies > 2, 2.0, 1.0)
    return rows, np.ceil(dies / rows)


def d2d_joints(dies: np.ndarray) -> np.ndarray:
    """Die-to-die joints of the layout: neighbours within a row and across the two rows."""
    rows, cols = layout(dies)
    return rows * (cols - 1) + (rows - 1) * cols


def _free_edges(dies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(long, short) edges of the most constrained die left free by die-to-die joints."""
    dies = np.asarray(dies, dtype=float)
    rows, cols = layout(dies)
    free_long = np.where(rows > 1, 1.0, 2.0)
    free_short = np.where(dies <= 1, 2.0, np.where(cols > 2, 0.0, 1.0))
    return free_long, free_short


def interposer_area_mm2(die_mm2: np.ndarray, dies: np.ndarray, stacks: np.ndarray,
                        rules: PackageRules, *, aspect: float | None = None,
                        hbm_edges: int | None = None, width_mm: float | np.ndarray = 11.0,
                        depth_mm: float | np.ndarray = 11.0) -> np.ndarray:
    """[N] interposer (or substrate) area, mm^2: the bounding box of `dies` dies of
    `die_mm2` each (laid out by `layout`) and `stacks` HBM stacks of `width_mm` x `depth_mm`
    in rows along the free long edges (then short edges, up to `hbm_edges`), with the
    rules' keep-out `gap` between neighbours and `margin` around. No stacks: the dies and
    the margin alone."""
    aspect = rules.aspect_ratio if aspect is None else aspect
    k = rules.hbm_edges if hbm_edges is None else hbm_edges
    overhang = rules.hbm_overhang or 0.0
    dies = np.asarray(dies, dtype=float)
    stacks = np.asarray(stacks, dtype=float)
    long, short = die_edges(die_mm2, aspect)
    rows, cols = layout(dies)
    gap, margin = rules.gap, rules.margin
    width = cols * long + (cols - 1) * gap
    height = rows * short + (rows - 1) * gap
    free_long, free_short = _free_edges(dies)
    long_sides = np.minimum(k, 2.0)  # outer long sides of the package that hold stacks
    per_die = np.ceil(stacks / np.maximum(dies, 1.0))
    long_edges = np.minimum(k, free_long)
    short_allowed = np.minimum(k, free_long + free_short) > long_edges
    cap_long = stacks_per_edge(long, width_mm, overhang)
    # Stacks go on the long edges; past what they hold, on the short edges where the rules
    # allow them, else the rows run on (a design the edge check refuses anyway).
    on_long = np.where(short_allowed, np.minimum(per_die, long_edges * cap_long), per_die)
    per_long = np.ceil(on_long / np.maximum(long_edges, 1.0))
    row_len = cols * (per_long * width_mm + np.maximum(per_long - 1, 0) * gap) \
        + (cols - 1) * gap
    has = stacks > 0
    width = np.maximum(width, np.where(has, row_len, 0.0))
    height = height + np.where(has, long_sides * (gap + depth_mm), 0.0)
    overflow = (per_die - on_long) > 0  # stacks on the short edges (hbm_edges > 2)
    width = width + np.where(overflow, np.minimum(free_short, 2.0) * (gap + depth_mm), 0.0)
    return (width + 2 * margin) * (height + 2 * margin)


def _outline(interface: str | np.ndarray | None, rules: PackageRules, n: int
             ) -> tuple[float | np.ndarray, float | np.ndarray, np.ndarray, str | None]:
    """The HBM stacks' width and depth (mm: one, or one per design where a study varies the
    generation; 11 mm for an outline the rules do not list), their names for messages, and
    one interface name (the first design's) for the packaging default."""
    w: float | np.ndarray
    d: float | np.ndarray
    if isinstance(interface, np.ndarray):  # per design (a study varying the generation)
        outline = [rules.footprint.get(f) for f in interface]
        w = np.array([f.width if f is not None else 11.0 for f in outline])
        d = np.array([f.depth if f is not None else 11.0 for f in outline])
        names = np.array([(str(f) or "HBM").upper() for f in interface], dtype=object)
        return w, d, names, str(interface[0]) or None
    names = np.full(n, (interface or "HBM").upper(), dtype=object)
    fp = rules.footprint.get(interface) if interface else None  # type: ignore[call-overload]
    w, d = (fp.width, fp.depth) if fp is not None else (11.0, 11.0)
    return w, d, names, interface


def geometry(die_mm2: np.ndarray, dies: np.ndarray, stacks: np.ndarray, rules: PackageRules,
             *, interface: str | np.ndarray | None, aspect: float | None = None,
             hbm_edges: int | None = None, packaging: str | None = None,
             d2d_bandwidth: float | None = None) -> Geometry:
    """Geometry of N designs: `die_mm2` [N] one die as modelled, `dies` [N], `stacks` [N]
    HBM sites as built (all dies), `interface` the HBM generation (None: no HBM)."""
    n = len(np.atleast_1d(die_mm2))
    die_mm2 = np.broadcast_to(np.asarray(die_mm2, dtype=float), (n,))
    dies = np.broadcast_to(np.asarray(dies, dtype=float), (n,))
    stacks = np.broadcast_to(np.asarray(stacks, dtype=float), (n,))
    aspect = rules.aspect_ratio if aspect is None else aspect
    k = rules.hbm_edges if hbm_edges is None else hbm_edges
    overhang = rules.hbm_overhang or 0.0
    w, d, names, interface = _outline(interface, rules, n)
    w_n = np.broadcast_to(np.asarray(w, dtype=float), (n,))
    long, short = die_edges(die_mm2, aspect)
    free_long, free_short = _free_edges(dies)
    use = np.minimum(float(k), free_long + free_short)
    use_long = np.minimum(use, free_long)
    use_short = use - use_long
    cap_long = stacks_per_edge(long, w, overhang)
    cap_short = stacks_per_edge(short, w, overhang)
    capacity = use_long * cap_long + use_short * cap_short
    per_die = np.ceil(stacks / np.maximum(dies, 1.0))
    per_edge = np.ceil(per_die / np.maximum(use, 1.0))
    joints = d2d_joints(dies)
    dd = rules.d2d
    bw = dd.bandwidth if d2d_bandwidth is None else d2d_bandwidth
    modules = np.ceil(bw / dd.rate - 1e-9)
    d2d_mm2 = 2.0 * joints * modules * dd.area
    d2d_edge = np.where(joints > 0, modules * dd.edge, 0.0)
    interposer = interposer_area_mm2(die_mm2, dies, stacks, rules, aspect=aspect,
                                     hbm_edges=k, width_mm=w, depth_mm=d)
    kind = packaging or ("cowos-s" if interface else "organic")
    tech = rules.packaging.get(kind)  # type: ignore[call-overload]
    limit = np.full(n, tech.limit if tech is not None else np.inf)
    edge_reason = np.full(n, "", dtype=object)
    interposer_reason = np.full(n, "", dtype=object)
    short_of = per_die > capacity
    over = (interposer > limit) & (stacks > 0)
    no_hbm = (stacks > 0) & (tech is not None and not tech.hbm)
    for i in np.flatnonzero(short_of):
        on = f"{dies[i]:.0f} dies" if dies[i] > 1 else "1 die"
        if use_short[i] == 0:
            holds = (f"a {long[i]:.1f} mm long edge holds {cap_long[i]:.0f} stacks of "
                     f"{w_n[i]:.2f} mm")
            edge = "long edge"
        else:
            holds = (f"its {use_long[i]:.0f} long ({long[i]:.1f} mm) and {use_short[i]:.0f} "
                     f"short ({short[i]:.1f} mm) HBM edges hold {capacity[i]:.0f} stacks of "
                     f"{w_n[i]:.2f} mm")
            edge = "HBM edge"
        edge_reason[i] = (f"{stacks[i]:.0f} {names[i]} stacks as built (with the base's spare "
                          f"sites) on {on} need {per_edge[i]:.0f} per {edge} "
                          f"({use[i]:.0f} HBM edges per die); {holds} (reaching "
                          f"{overhang:.1f} mm past each end; modelled die {die_mm2[i]:.0f} "
                          f"mm2, aspect {aspect:.2f})")
    for i in np.flatnonzero(no_hbm | over):
        interposer_reason[i] = (
            f"{kind} packaging carries no HBM (stacks need an interposer or silicon bridges)"
            if no_hbm[i] else
            f"an interposer of {interposer[i]:.0f} mm2 (dies as modelled, {stacks[i]:.0f} "
            f"stacks and keep-outs) exceeds the {limit[i]:.0f} mm2 limit of {kind}")
    return Geometry(long_mm=long, short_mm=short, hbm_edges=use, per_edge_needed=per_edge,
                    per_long_edge=cap_long, per_short_edge=cap_short, capacity=capacity,
                    d2d_joints=joints, d2d_mm2=d2d_mm2, d2d_edge_mm=d2d_edge,
                    interposer_mm2=interposer, interposer_limit_mm2=limit,
                    packaging=np.full(n, kind, dtype=object), edges_fit=~short_of,
                    edge_reason=edge_reason, interposer_fits=~(over | no_hbm),
                    interposer_reason=interposer_reason)
