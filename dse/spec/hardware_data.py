"""A chip's merged data validated as a HardwareSpec: what each memory level's generation
implies written in, the clock that per-cycle quantities need, and the checks that span
memory levels and the as-built counts, each reported at the file and line that set it."""

from __future__ import annotations

from typing import Any

from dse.errors import Issue, SpecError
from dse.spec import catalogue, hardware, hardware_checks
from dse.spec.messages import issue_at, locate, validate
from dse.spec.positions import LDict, LList, without
from dse.spec.types import CLOCK_CONTEXT_KEY, CLOCK_INVALID_KEY
from dse.units import FREQUENCY, UnitError, to_kind


def _clock_context(data: LDict) -> dict[str, Any]:
    compute = data.get("compute")
    clock = compute.get("clock") if isinstance(compute, dict) else None
    try:
        return {CLOCK_CONTEXT_KEY: to_kind(clock, FREQUENCY)} if clock is not None else {}
    except UnitError:
        return {CLOCK_INVALID_KEY: True}  # the clock field itself reports the problem


def _with_generations(data: LDict) -> LDict:
    """`data` with what each level's `generation:` implies written in where the file does
    not state it (docs: guide/hardware.md, Memory generations): the interface, and capacity and
    bandwidth as units x the catalogue's figures per unit (units: `stacks` or `channels`; one link
    for CXL). A file's own numbers win. Unknown generations and a stated interface that
    contradicts the generation are reported at their keys. Returns a new mapping where
    anything is written (`data` is unchanged)."""
    levels = data.get("memory")
    if not isinstance(levels, list) or not any(
            isinstance(m, dict) and "generation" in m for m in levels):
        return data
    cat = catalogue.catalogue()
    issues: list[Issue] = []
    out_levels = LList(levels.pos if isinstance(levels, LList) else data.pos)
    for i, level in enumerate(levels):
        pos = levels.item_pos[i] if isinstance(levels, LList) and i < len(levels.item_pos) \
            else data.pos
        name = level.get("generation") if isinstance(level, LDict) else None
        if name is None or not isinstance(level, LDict) or level.get("kind") != "dram":
            # (the schema says a generation is for dram levels)
            out_levels.add(level, pos)
            continue
        if not isinstance(name, str) or name not in cat.generations:
            issues.append(issue_at(data, ("memory", i, "generation"), cat.unknown(name)))
            out_levels.add(level, pos)
            continue
        gen = cat.generations[name]
        iface = level.get("interface")
        if iface is not None and iface != gen.interface:
            issues.append(issue_at(data, ("memory", i, "interface"),
                                   f"interface {iface} contradicts generation {name} "
                                   f"({gen.interface}); give one or make them agree"))
        count = level.get("stacks" if gen.unit == "stack" else "channels", 1)
        count = count if isinstance(count, int) and not isinstance(count, bool) \
            and count > 0 else 1
        new = without(level, ())
        at = (level.key_pos["generation"], level.val_pos["generation"])
        if iface is None:
            new.put("interface", gen.interface, *at)
        if "capacity" not in level:
            new.put("capacity", f"{count * gen.capacity / 2**30:.12g} GiB", *at)
        if "bandwidth" not in level:
            new.put("bandwidth", f"{count * gen.bandwidth / 1e9:.12g} GB/s", *at)
        out_levels.add(new, pos)
    if issues:
        raise SpecError(issues)
    out = without(data, ())
    out.copy_entry(data, "memory", out_levels)
    return out


def hardware_from_data(data: LDict) -> hardware.HardwareSpec:
    """Validate merged hardware data, including the checks that span memory levels."""
    base_spares = getattr(data, "base_spares", None)  # kept by the loader on the mapping
    data = _with_generations(data)  # a new mapping: the attribute stays on the old one
    spec = validate(hardware.HardwareSpec, data, _clock_context(data))
    assert isinstance(spec, hardware.HardwareSpec)
    spec._base_spares = base_spares
    issues = [issue_at(data, loc, msg) for loc, msg in hardware_checks.hierarchy_issues(spec)]
    for built_loc, enabled_loc, msg in hardware_checks.as_built_issues(spec):
        # Report at the value the top-level file sets (its own line), the as-built one first.
        at = built_loc
        if locate(data, built_loc)[0].file != data.pos.file \
                and locate(data, enabled_loc)[0].file == data.pos.file:
            at = enabled_loc
        issues.append(issue_at(data, at, msg))
    if issues:
        raise SpecError(issues)
    return spec
