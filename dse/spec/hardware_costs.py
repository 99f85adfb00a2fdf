"""What a hardware spec is charged beyond its own figures: the fixed cost at a path (its own
value, else the documented default of dse.spec.fixed_costs) and the spare silicon it pays
for. Above dse.spec.hardware (they read a HardwareSpec), while the tables they read sit
below it."""

from __future__ import annotations

from dse.spec.fixed_costs import Spares, fixed_cost_default
from dse.spec.hardware import HardwareSpec


def fixed_cost(spec: HardwareSpec, path: str) -> float:
    """The fixed cost at `path` (a FIXED_COST_DEFAULTS key) of `spec`, seconds: its own
    value, else (no interconnect block) the documented default for its compute style."""
    section, key = path.split(".")
    own = getattr(getattr(spec, section), key) if getattr(spec, section) is not None else None
    return own if own is not None else fixed_cost_default(path, spec.compute.style).seconds


def _ratio(built: float | None, enabled: float | None) -> float:
    return built / enabled if built and enabled else 1.0


def spares(spec: HardwareSpec) -> Spares:
    """The spares `spec` pays for. Its own `technology.as_built` (a shipped die, or a derived
    design that states its own or says `same_die: true`), as ratios to its enabled counts;
    else the ratios of the design it derives from (`base:` in YAML, kept by the loader), so
    a derived design keeps its base's spare fraction whatever it changes: 160 SMs derived
    from an H100 (144 built for 132 enabled) pay for 160 x 144 / 132, by `base:` as by
    `--set compute.units=160` or a study, which price the base spec's designs the same way.
    None at all, or `technology.spares: none` (a study's "no spares" assumption): no
    spares."""
    if spec.technology is not None and spec.technology.spares == "none":
        return Spares()
    built = spec.technology.as_built if spec.technology else None
    if built is None:
        return spec._base_spares or Spares()
    levels = {lv.name: lv for lv in spec.memory}
    per_level = {
        name: {f: _ratio(getattr(b, f), getattr(levels[name], f))
               for f in ("capacity", "stacks", "channels")}
        for name, b in built.memory.items() if name in levels}
    ic = spec.interconnect
    return Spares(units=_ratio(built.units, spec.compute.units), levels=per_level,
                  links=_ratio(built.links, ic.links if ic else None),
                  idle_links=float(built.links or 0))
