"""Checks of a hardware spec that span several fields: the hierarchy's order and names,
per-unit peaks that overflow, what the area model needs, and as-built counts. Each returns
key paths and messages; the loader turns them into positioned issues. No I/O."""

from __future__ import annotations

from dse.spec.hardware import HardwareSpec
from dse.spec.hardware_terms import CHANNEL_INTERFACES, HBM_INTERFACES, LEVEL_RANK


def hierarchy_issues(spec: HardwareSpec) -> list[tuple[tuple[str | int, ...], str]]:
    """Checks that span several levels: unique names, innermost-first order by kind.
    Returns (key path, message) pairs; empty when the hierarchy is possible."""
    issues: list[tuple[tuple[str | int, ...], str]] = []
    seen: dict[str, int] = {}
    for i, level in enumerate(spec.memory):
        if level.name in seen:
            first = seen[level.name]
            issues.append((("memory", i, "name"),
                           f"duplicate level name '{level.name}' (also memory[{first}])"))
        seen.setdefault(level.name, i)
    for i in range(1, len(spec.memory)):
        inner, outer = spec.memory[i - 1], spec.memory[i]
        if LEVEL_RANK[outer.kind] < LEVEL_RANK[inner.kind]:
            issues.append((("memory", i, "kind"),
                           f"a {outer.kind} level cannot sit outside a {inner.kind} level "
                           f"(memory[{i - 1}] '{inner.name}'); list levels innermost first"))
    hbm = [lv for lv in spec.memory if lv.stacks is not None]
    for i, level in enumerate(spec.memory):
        if level.slices_per == "stack" and len(hbm) != 1:
            issues.append((("memory", i, "slices_per"),
                           "slices_per: stack needs exactly one HBM level with stacks: N "
                           f"(found {len(hbm)})"))
    if spec.technology is not None and spec.compute.style is not None:
        issues.extend(_area_needs(spec))
    pk = spec.technology.package if spec.technology else None
    if pk is not None and pk.in_plane is not None and spec.technology is not None \
            and pk.in_plane > spec.technology.dies:
        issues.append((("technology", "package", "in_plane"),
                       f"{pk.in_plane} dies in plane exceed the package's "
                       f"{spec.technology.dies} (technology.dies); expected at most that"))
    for what in ("matrix", "vector"):
        engine = getattr(spec.compute, what)
        for p, v in (engine.peak_per_unit.items() if engine else ()):
            if not v * spec.compute.units * (spec.compute.clock or 0.0) < float("inf"):
                issues.append((("compute", what, "peak_per_unit", p),
                               "units x clock x this peak is beyond the range of a float"))
    return issues


Loc = tuple[str | int, ...]


def _area_needs(spec: HardwareSpec) -> list[tuple[Loc, str]]:
    """What the area and power models need of a spec that names a node and a style, checked
    at load so that a file `dse check` passes also evaluates."""
    out: list[tuple[Loc, str]] = []
    for i, level in enumerate(spec.memory):
        if level.kind != "dram":
            continue
        if level.interface is None:
            out.append((("memory", i), "the area model needs this DRAM level's interface "
                                       "(hbm3, lpddr5x, ddr5, gddr6, cxl ...)"))
        elif level.interface in HBM_INTERFACES and level.stacks is None:
            out.append((("memory", i), f"the area model needs the number of {level.interface} "
                                       "stacks of this level (stacks: N)"))
        elif level.interface in CHANNEL_INTERFACES and level.channels is None:
            out.append((("memory", i), f"the area model needs the number of {level.interface} "
                                       "channels of this level (channels: N, at the "
                                       "standard's width)"))
    return out
_FIX = ("raise technology.as_built, or, if this is a new die rather than the base's silicon, "
        "drop technology.same_die")


def as_built_issues(spec: HardwareSpec) -> list[tuple[Loc, Loc, str]]:
    """As-built counts name real levels and are at least what the product enables. Returns
    (as-built key path, enabled key path, message): the loader reports each at whichever of
    the two the user's own file sets (an inherited as_built is wrong because of a value the
    derived file changed)."""
    built = spec.technology.as_built if spec.technology else None
    if built is None:
        return []
    out: list[tuple[Loc, Loc, str]] = []
    at = ("technology", "as_built")
    if built.units is not None and built.units < spec.compute.units:
        out.append(((*at, "units"), ("compute", "units"),
                    f"{spec.compute.units} units exceed the {built.units} the die carries "
                    f"(technology.as_built.units); {_FIX}"))
    ic = spec.interconnect
    if built.links is not None and built.links < (ic.links if ic else 0):
        out.append(((*at, "links"), ("interconnect", "links"),
                    f"{ic.links if ic else 0} links exceed the {built.links} the die carries "
                    f"(technology.as_built.links); {_FIX}"))
    levels = {lv.name: (i, lv) for i, lv in enumerate(spec.memory)}
    for name, lb in built.memory.items():
        where = (*at, "memory", name)
        if name not in levels:
            out.append((where, where, f"no memory level named '{name}'; expected one of: "
                                      f"{', '.join(levels)}"))
            continue
        i, level = levels[name]
        for field_ in ("capacity", "stacks", "channels"):
            value, enabled = getattr(lb, field_), getattr(level, field_)
            if value is None:
                continue
            if enabled is None:
                out.append(((*where, field_), (*where, field_),
                            f"memory level '{name}' gives no {field_} to build beyond"))
            elif value < enabled:
                out.append(((*where, field_), ("memory", i, field_),
                            f"the enabled {field_} of '{name}' exceeds what the die carries "
                            f"(technology.as_built.memory.{name}.{field_}); {_FIX}"))
    return out


