"""DesignBatch: N hardware designs as arrays, built from one spec plus overrides.

A design is the base spec with some fields replaced, given as dotted paths
(`compute.units`, `memory.L2.capacity`, `memory[2].bandwidth`,
`compute.matrix.peak_per_unit.bf16`, `interconnect.link_bandwidth` ...), each holding one
value or an array of N values. The batch holds every quantity the performance model reads as
an array over designs ([N], or [N, L] for memory levels), in SI units. No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from dse import units
from dse.errors import DseError
from dse.spec.hardware import CHANNEL_INTERFACES, HBM_INTERFACES, PRECISIONS, HardwareSpec

# Scalar fields that can be overridden, with the unit kind used to read string values.
_SCALARS = {
    "compute.units": None,
    "compute.clock": units.FREQUENCY,
    "compute.op_overhead": units.TIME,
    "compute.matrix.achievable.fraction": None,
    "interconnect.links": None,
    "interconnect.link_bandwidth": units.BANDWIDTH,
    "interconnect.latency": units.TIME,
    "interconnect.collective_overhead": units.TIME,
    "interconnect.achievable.fraction": None,
    "interconnect.scale_out_bandwidth": units.BANDWIDTH,
    "interconnect.scale_out_latency": units.TIME,
}
_ENGINE = re.compile(r"^compute\.(matrix|vector)\.(peak|peak_per_unit)\.([a-z0-9]+)$")
_FRACTION = re.compile(r"^compute\.matrix\.achievable\.per_precision\.([a-z0-9]+)$")
_LEVEL = re.compile(
    r"^memory(?:\.([^.\[\]]+)|\[(\d+)\])\."
    r"(capacity|bandwidth|achievable\.fraction|stacks|channels)$")
_LEVEL_KIND = {"capacity": units.BYTES, "bandwidth": units.BANDWIDTH,
               "achievable.fraction": None, "stacks": None, "channels": None}
_INTEGER = ("compute.units", "interconnect.links")
_INTEGER_SUFFIX = (".stacks", ".channels")


@dataclass(frozen=True)
class DesignBatch:
    """N designs that share a base spec. Rates are chip totals; [N] or [N, L] arrays."""

    spec: HardwareSpec
    n: int
    units: np.ndarray  # [N]
    clock: np.ndarray  # [N] Hz (0 when the spec gives none)
    matrix_peak: dict[str, np.ndarray]  # precision -> [N] FLOP/s
    vector_peak: dict[str, np.ndarray]  # precision -> [N] FLOP/s
    matrix_fraction: dict[str, np.ndarray]  # precision -> [N] achievable fraction
    tile: tuple[int, int, int] | None  # native tile m, n, k of the matrix engine
    register_file: float | None  # bytes per unit holding GEMM accumulators
    op_overhead: np.ndarray  # [N] s per operator
    level_names: tuple[str, ...]
    level_kinds: tuple[str, ...]
    resident: np.ndarray  # [L] bool: may hold weights / KV cache across steps
    per_unit: np.ndarray  # [L] bool: one instance per compute unit
    stacks: np.ndarray  # [N, L] HBM stacks of each level (0: none or not an HBM level)
    channels: np.ndarray  # [N, L] DRAM channels of each level (0: none given)
    peak_bandwidth: np.ndarray  # [N, L] B/s datasheet peak, chip total
    capacity: np.ndarray  # [N, L] bytes, chip total
    unit_capacity: np.ndarray  # [N, L] bytes per instance (per unit or the whole level)
    bandwidth: np.ndarray  # [N, L] B/s achieved (peak x achievable fraction), chip total
    link_bandwidth: np.ndarray  # [N] B/s per link per direction
    links: np.ndarray  # [N]
    link_latency: np.ndarray  # [N] s per collective step
    link_fraction: np.ndarray  # [N] achieved share of the link bandwidth in collectives
    collective_overhead: np.ndarray  # [N] s per collective call
    scale_out_bandwidth: np.ndarray  # [N] B/s per chip per direction
    scale_out_latency: np.ndarray  # [N] s
    topology: str | None
    chips_per_node: int
    overrides: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def levels(self) -> int:
        return len(self.level_names)

    @property
    def resident_capacity(self) -> np.ndarray:
        """[N, L] bytes each level can hold across steps (0 for caches and scratch)."""
        return np.where(self.resident[None, :], self.capacity, 0.0)


def _value(path: str, value: object, kind: units.Kind | None, clock: float | None) -> np.ndarray:
    """An override value as a float array: numbers are SI, strings carry units."""
    items = value if isinstance(value, list | tuple | np.ndarray) else [value]
    out = []
    for item in np.asarray(items, dtype=object).ravel():
        if isinstance(item, str):
            if kind is None:
                try:
                    item = float(item)
                except ValueError:
                    raise DseError(f"--set {path}: expected a plain number, found "
                                   f"'{item}'") from None
            else:
                try:
                    item = units.to_kind(item, kind, clock_hz=clock)
                except ValueError as e:
                    raise DseError(f"--set {path}: {e}") from None
        try:
            out.append(float(item))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise DseError(f"--set {path}: expected a number, found {item!r}") from None
    arr = np.asarray(out, dtype=float)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise DseError(f"--set {path}: expected finite non-negative values")
    if (path in _INTEGER or path.endswith(_INTEGER_SUFFIX)) and np.any(arr != np.round(arr)):
        raise DseError(f"--set {path}: expected whole numbers")
    if (path == "compute.units" or path.endswith((".capacity", ".bandwidth", ".clock"))
            or "peak" in path) and np.any(arr <= 0):
        raise DseError(f"--set {path}: expected positive values")
    if "fraction" in path and np.any((arr <= 0) | (arr > 1)):
        raise DseError(f"--set {path}: expected a fraction in (0, 1]")
    return arr.reshape(np.shape(value)) if isinstance(value, np.ndarray) else arr


def _level_of(spec: HardwareSpec, name: str | None, index: str | None, path: str) -> int:
    names = [lv.name for lv in spec.memory]
    if index is not None:
        if int(index) >= len(names):
            raise DseError(f"--set {path}: {spec.name} has {len(names)} memory levels "
                           f"(memory[0] .. memory[{len(names) - 1}])")
        return int(index)
    if name not in names:
        raise DseError(f"--set {path}: {spec.name} has no memory level '{name}'; expected "
                       f"one of: {', '.join(names)}")
    return names.index(name)


def column_name(path: str) -> str:
    """Table column of an override path: the path with its SI unit as a suffix
    (`memory.L2.capacity_bytes`, `compute.clock_hz`); plain numbers keep the bare path."""
    kind = _SCALARS.get(path, "unknown")
    if kind == "unknown":
        m = _LEVEL.match(path)
        if m:
            kind = _LEVEL_KIND[m.group(3)]
        elif _ENGINE.match(path):
            kind = units.OPS_PER_CYCLE if ".peak_per_unit." in path else units.FLOP_RATE
        else:
            kind = None
    return f"{path}_{kind.suffix}" if kind is not None and kind.suffix else path


SUPPORTED_PATHS = (
    "compute.units, compute.clock, compute.op_overhead, compute.matrix.peak.<precision>, "
    "compute.matrix.peak_per_unit.<precision>, compute.vector.peak[_per_unit].<precision>, "
    "compute.matrix.achievable.fraction, compute.matrix.achievable.per_precision.<precision>, "
    "memory.<level>.capacity|bandwidth|achievable.fraction|stacks|channels (or memory[i].…), "
    "interconnect.links|link_bandwidth|latency|collective_overhead|achievable.fraction|"
    "scale_out_bandwidth|scale_out_latency")


def design_batch(spec: HardwareSpec, overrides: dict[str, object] | None = None) -> DesignBatch:
    """The designs `spec` with each override applied. All override arrays must have the same
    length N (scalars broadcast); no overrides gives one design."""
    overrides = dict(overrides or {})
    c = spec.compute
    clock0 = c.clock
    parsed: dict[str, np.ndarray] = {}
    for path, value in overrides.items():
        kind = _SCALARS.get(path, "unknown")
        if kind == "unknown":
            m = _LEVEL.match(path)
            if m:
                kind = _LEVEL_KIND[m.group(3)]
            elif _ENGINE.match(path):
                kind = units.OPS_PER_CYCLE if path.split(".")[2] == "peak_per_unit" \
                    else units.FLOP_RATE
                if _ENGINE.match(path).group(3) not in PRECISIONS:  # type: ignore[union-attr]
                    raise DseError(f"--set {path}: unknown precision; expected one of: "
                                   f"{', '.join(PRECISIONS)}")
            elif _FRACTION.match(path):
                kind = None
            else:
                raise DseError(f"--set {path}: not a field that can be varied; supported: "
                               f"{SUPPORTED_PATHS}")
        parsed[path] = _value(path, value, kind, clock0)
    sizes = {a.size for a in parsed.values() if a.size != 1}
    if len(sizes) > 1:
        raise DseError("overrides have different lengths "
                       f"({', '.join(str(s) for s in sorted(sizes))}); give one value or N "
                       "values for every path")
    n = sizes.pop() if sizes else 1

    def get(path: str, default: float | None) -> np.ndarray:
        if path in parsed:
            return np.broadcast_to(parsed[path].ravel(), (n,)).astype(float)
        return np.full(n, np.nan if default is None else float(default))

    units_ = get("compute.units", c.units)
    clock = get("compute.clock", clock0 or 0.0)

    def engine(name: str) -> dict[str, np.ndarray]:
        eng = getattr(c, name)
        out: dict[str, np.ndarray] = {}
        for p in PRECISIONS:
            per_unit = eng.peak_per_unit.get(p) if eng else None
            fixed = eng.peak.get(p) if eng else None
            pu_path = f"compute.{name}.peak_per_unit.{p}"
            fx_path = f"compute.{name}.peak.{p}"
            if pu_path in parsed or (per_unit is not None and fx_path not in parsed):
                if clock0 is None and pu_path in parsed and "compute.clock" not in parsed:
                    raise DseError(f"--set {pu_path}: a per-cycle peak needs compute.clock")
                out[p] = get(pu_path, per_unit) * units_ * clock
            elif fx_path in parsed or fixed is not None:
                out[p] = get(fx_path, fixed)
        return out

    matrix_peak, vector_peak = engine("matrix"), engine("vector")
    ach = c.matrix.achievable
    base_frac = get("compute.matrix.achievable.fraction", ach.fraction if ach else 1.0)
    matrix_fraction = {
        p: get(f"compute.matrix.achievable.per_precision.{p}",
               ach.per_precision.get(p) if ach and p in ach.per_precision else None)  # type: ignore[operator]
        for p in PRECISIONS}
    matrix_fraction = {p: np.where(np.isnan(v), base_frac, v) for p, v in matrix_fraction.items()}

    cap_unit, bw_unit, frac, stacks, channels = [], [], [], [], []
    for i, lv in enumerate(spec.memory):
        def lget(field_: str, default: float, i: int = i, lv=lv) -> np.ndarray:
            for key in (f"memory.{lv.name}.{field_}", f"memory[{i}].{field_}"):
                if key in parsed:
                    return get(key, None)
            return np.full(n, float(default))
        cap_unit.append(lget("capacity", lv.capacity))
        bw_unit.append(lget("bandwidth", lv.bandwidth))
        frac.append(lget("achievable.fraction", lv.achievable.fraction if lv.achievable else 1.0))
        stacks.append(lget("stacks", lv.stacks or 0))
        channels.append(lget("channels", lv.channels or 0))
    for path in parsed:
        m = _LEVEL.match(path)
        if m:
            level = spec.memory[_level_of(spec, m.group(1), m.group(2), path)]
            if m.group(3) == "stacks" and level.interface not in HBM_INTERFACES:
                raise DseError(f"--set {path}: level '{level.name}' is not an HBM level")
            if m.group(3) == "channels" and level.interface not in CHANNEL_INTERFACES:
                raise DseError(f"--set {path}: level '{level.name}' has no DDR, LPDDR or "
                               "GDDR interface")
    per_unit = np.array([lv.scope == "per_unit" for lv in spec.memory])
    mult = np.where(per_unit[None, :], units_[:, None], 1.0)
    cap_u = np.stack(cap_unit, axis=1)
    peak_bandwidth = np.stack(bw_unit, axis=1) * mult
    bandwidth = peak_bandwidth * np.stack(frac, axis=1)

    ic = spec.interconnect
    links = get("interconnect.links", ic.links if ic else 0)
    return DesignBatch(
        spec=spec, n=n, units=units_, clock=clock,
        matrix_peak=matrix_peak, vector_peak=vector_peak, matrix_fraction=matrix_fraction,
        tile=(c.matrix.tile.m, c.matrix.tile.n, c.matrix.tile.k) if c.matrix.tile else None,
        register_file=c.matrix.register_file,
        op_overhead=get("compute.op_overhead", c.op_overhead or 0.0),
        level_names=tuple(lv.name for lv in spec.memory),
        level_kinds=tuple(lv.kind for lv in spec.memory),
        resident=np.array([lv.holds_resident for lv in spec.memory]),
        per_unit=per_unit, stacks=np.stack(stacks, axis=1), channels=np.stack(channels, axis=1),
        peak_bandwidth=peak_bandwidth,
        capacity=cap_u * mult, unit_capacity=cap_u, bandwidth=bandwidth,
        link_bandwidth=get("interconnect.link_bandwidth",
                           (ic.link_bandwidth or 0.0) if ic else 0.0),
        links=links,
        link_latency=get("interconnect.latency", (ic.latency or 0.0) if ic else 0.0),
        link_fraction=get("interconnect.achievable.fraction",
                          ic.achievable.fraction if ic and ic.achievable else 1.0),
        collective_overhead=get("interconnect.collective_overhead",
                                (ic.collective_overhead or 0.0) if ic else 0.0),
        scale_out_bandwidth=get("interconnect.scale_out_bandwidth",
                                (ic.scale_out_bandwidth or 0.0) if ic else 0.0),
        scale_out_latency=get("interconnect.scale_out_latency",
                              (ic.scale_out_latency or 0.0) if ic else 0.0),
        topology=ic.topology if ic else None,
        chips_per_node=ic.chips_per_node if ic else 1,
        overrides={k: np.broadcast_to(v.ravel(), (n,)) for k, v in parsed.items()},
    )
