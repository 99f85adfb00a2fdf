"""How a hardware spec is shown to people (`dse show`): data first, then rich tables."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from dse import units
from dse.spec.fixed_costs import fixed_cost_default
from dse.spec.hardware import PRECISIONS, HardwareSpec, derived_figures


def hardware_document(spec: HardwareSpec) -> dict[str, Any]:
    """The resolved spec in SI units plus derived figures, for JSON/YAML output; `estimated`
    names the fixed costs the spec omits, with the documented default it is charged (s)."""
    return {"spec": spec.model_dump(mode="json", exclude_none=True),
            "derived": derived_figures(spec),
            "estimated": {path: fixed_cost_default(path, spec.compute.style)._asdict()
                          for path in sorted(spec.estimated)}}


def _fixed(spec: HardwareSpec, path: str, value: float | None) -> str:
    """A fixed cost for display, marked when it is the documented default, not the spec's."""
    return _q(value, units.TIME) + (" (estimate)" if path in spec.estimated else "")


def _talks(spec: HardwareSpec) -> bool:
    """Whether the chip can take part in a collective (links, a scale-out network or a host
    link through which grouped cards talk)."""
    ic = spec.interconnect
    return ic is not None and bool(ic.links or ic.scale_out_bandwidth or ic.host_link)


def fixed_costs_text(spec: HardwareSpec) -> Text:
    """The chip's fixed costs per operator and per collective, with the source of every one
    that is a documented default rather than the spec's own figure."""
    c, ic = spec.compute, spec.interconnect
    lines = [f"per operator (kernel): {_fixed(spec, 'compute.op_overhead', c.op_overhead)}"]
    if ic is not None and _talks(spec):
        lines.append("per collective call: "
                     f"{_fixed(spec, 'interconnect.collective_overhead', ic.collective_overhead)}"
                     f", plus {_fixed(spec, 'interconnect.latency', ic.latency)} per step")
        if ic.scale_out_bandwidth:
            lines.append("per step across the scale-out network: "
                         + _fixed(spec, "interconnect.scale_out_latency",
                                  ic.scale_out_latency))
    shown = ("compute.op_overhead",) + (
        ("interconnect.collective_overhead", "interconnect.latency") if _talks(spec) else ()
    ) + (("interconnect.scale_out_latency",) if ic and ic.scale_out_bandwidth else ())
    for path in shown:
        if path in spec.estimated:
            lines.append(f"  {path}: {fixed_cost_default(path, c.style).source}")
    return Text("Fixed costs\n", style="italic").append("\n".join(lines))


def _q(value: float | None, kind: units.Kind) -> str:
    return "-" if value is None else units.format_quantity(value, kind)


def _rate(value: float | None, precision: str) -> str:
    if value is None:
        return "-"
    text = units.format_quantity(value, units.FLOP_RATE)
    return text.replace("FLOP/s", "OP/s") if precision.startswith("int") else text


def hardware_tables(spec: HardwareSpec) -> Group:
    """Everything `dse show` prints in table form."""
    d = derived_figures(spec)
    head = Text()
    head.append(spec.name, style="bold")
    if spec.vendor:
        head.append(f"  ({spec.vendor})")
    if spec.base:
        head.append(f"  derived from {spec.base}")
    if spec.description:
        head.append(f"\n{spec.description}")
    head.append(f"\nsource: {spec.source}", style="dim")
    ridge = Table(title="Ridge points (FLOP per byte at which compute and the level balance)",
                  title_justify="left")
    ridge.add_column("level")
    precisions = list(d["peak_flop_per_s"])
    for p in precisions:
        ridge.add_column(p, justify="right")
    for dl in d["levels"]:
        ridge.add_row(dl["name"], *(f"{dl['ridge_flop_per_byte'][p]:.3g}" for p in precisions))
    parts: list[Any] = [head, _compute_table(spec, d), _memory_table(spec, d), ridge]
    if spec.interconnect is not None:
        parts.append(Text("Interconnect\n", style="italic").append(
            "\n".join(_interconnect_lines(spec)) or "none"))
    parts.append(fixed_costs_text(spec))
    facts = []
    if spec.technology:
        t = spec.technology
        facts.append(f"node {t.node}")
        if t.die_area:
            facts.append(f"die area {_q(t.die_area, units.AREA)}"
                         + (f" over {t.dies} dies" if t.dies > 1 else ""))
        if t.transistors:
            facts.append(f"{t.transistors / 1e9:.4g}e9 transistors")
    if spec.tdp:
        facts.append(f"TDP {_q(spec.tdp, units.POWER)}")
    if facts:
        parts.append(Text("Technology\n", style="italic").append(", ".join(facts)))
    return Group(*parts)


def _compute_table(spec: HardwareSpec, d: dict[str, Any]) -> Table:
    """The compute table of `dse show`: dense peaks per precision, with the units, clock,
    matrix tile, registers and per-operator overhead as its caption."""
    c = spec.compute
    compute = Table(title="Compute (dense peaks)", title_justify="left")
    compute.add_column("precision")
    compute.add_column("matrix", justify="right")
    compute.add_column("vector", justify="right")
    compute.add_column("achievable", justify="right")
    ach = c.matrix.achievable
    for p in PRECISIONS:
        m, v = d["matrix_peak_flop_per_s"].get(p), d["vector_peak_flop_per_s"].get(p)
        if m is None and v is None:
            continue
        compute.add_row(p, _rate(m, p), _rate(v, p),
                        f"{ach.at(p):.3f}" if (ach and m is not None) else "-")
    clock = f" at {_q(c.clock, units.FREQUENCY)}" if c.clock else ""
    tile = f"; matrix tile {c.matrix.tile.m}x{c.matrix.tile.n}x{c.matrix.tile.k}" \
        if c.matrix.tile else ""
    regs = f"; {_q(c.matrix.register_file, units.BYTES)} registers per {c.unit_name}" \
        if c.matrix.register_file else ""
    overhead = f"; {_fixed(spec, 'compute.op_overhead', c.op_overhead)} per operator"
    compute.caption = (f"{c.units} {c.unit_name}{'s' if c.units != 1 else ''}{clock}{tile}"
                       f"{regs}{overhead}")
    compute.caption_justify = "left"
    return compute


def _memory_table(spec: HardwareSpec, d: dict[str, Any]) -> Table:
    """The memory table of `dse show`: each level's chip totals, innermost first."""
    c = spec.compute
    memory = Table(title="Memory hierarchy (innermost first, chip totals)", title_justify="left")
    for col in ("level", "kind", "capacity", "bandwidth", "achieved", "latency", "detail"):
        memory.add_column(col, justify="right" if col in ("capacity", "bandwidth", "achieved",
                                                          "latency") else "left")
    for level, dl in zip(spec.memory, d["levels"], strict=True):
        detail = []
        if level.scope == "per_unit":
            detail.append(f"{_q(level.capacity, units.BYTES)} per {c.unit_name}")
        if level.generation:
            detail.append(level.generation)
        elif level.interface:
            detail.append(level.interface)
        if level.stacks:
            detail.append(f"{level.stacks} stacks")
        if level.channels:
            detail.append(f"{level.channels} channels")
        if level.holds_resident:
            detail.append("holds weights/KV")
        memory.add_row(level.name, level.kind, _q(dl["capacity_bytes"], units.BYTES),
                       _q(dl["bandwidth_bytes_per_s"], units.BANDWIDTH),
                       f"{level.achievable.fraction:.3f}" if level.achievable else "-",
                       _q(level.latency, units.TIME), ", ".join(detail))
    return memory


def _interconnect_lines(spec: HardwareSpec) -> list[str]:
    """The interconnect of `dse show` in words: the chip-to-chip links, the scale-out
    network and the host link, one line each."""
    ic = spec.interconnect
    assert ic is not None
    lines = []
    if ic.links:
        lines.append(f"{ic.name or 'chip-to-chip'}: {ic.links} links x "
                     f"{_q(ic.link_bandwidth, units.BANDWIDTH)} = "
                     f"{_q(ic.chip_bandwidth, units.BANDWIDTH)} per direction, "
                     f"{ic.topology}, {ic.chips_per_node} chips per node"
                     + f", latency {_fixed(spec, 'interconnect.latency', ic.latency)}"
                     " per hop, "
                     + _fixed(spec, "interconnect.collective_overhead",
                              ic.collective_overhead) + " per collective"
                     + (f", achieved fraction {ic.achievable.fraction:.2f}"
                        if ic.achievable else ""))
    if ic.scale_out_bandwidth:
        lines.append(f"scale-out: {_q(ic.scale_out_bandwidth, units.BANDWIDTH)} per chip "
                     "per direction"
                     + (f" over {ic.scale_out_nics} NIC{'s' if ic.scale_out_nics > 1 else ''}"
                        if ic.scale_out_nics else "")
                     + (f", {ic.fabric.replace('_', '-')} fabric" if ic.fabric else "")
                     + (f", achieved fraction {ic.scale_out_achievable.fraction:.2f}"
                        if ic.scale_out_achievable else ""))
    if ic.host_link:
        lines.append(f"host link: {ic.host_link.name or ''} "
                     f"{_q(ic.host_link.bandwidth, units.BANDWIDTH)} per direction".strip())
    return lines


def vocabulary_rows(spec: HardwareSpec, every: bool = False) -> list[dict[str, Any]]:
    """The paths a design of `spec` can vary (dse.spec.vocabulary) with the spec's value
    (SI), its unit and the rule a value must meet, and whether the models read it per design
    (`varies`). Without `every`, only the fields the spec gives a value."""
    from dse.errors import DseError
    from dse.model.batch import design_batch
    from dse.model.overrides import UNREAD
    from dse.spec import assumptions
    from dse.spec.vocabulary import canonical, current, generation_names, variable_paths

    rows = []
    for path in variable_paths(spec):
        key, term = canonical(spec, path)
        value = current(spec, key)
        if value is None and not every:
            continue
        try:
            design_batch(spec, {key: value if value is not None else 1.0})
            # a package field is the spec's: one value (set: or --set), never varied
            note = "one value for all designs" if assumptions.is_assumption(key) else ""
        except DseError as e:
            note = "no model reads it" if e.rule == UNREAD else e.message
        rows.append({"path": key, "value": value,
                     "unit": term.kind.unit if term.kind else "",
                     "shown": "-" if value is None else (
                         units.format_quantity(value, term.kind) if term.kind
                         else generation_names([value])[0] if term.categorical
                         else f"{value:g}"),
                     "rule": term.short(), "varies": not note, "note": note})
    return rows


def vocabulary_table(spec: HardwareSpec, rows: list[dict[str, Any]]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from dse.spec.hardware import PRECISIONS

    t = Table(title=f"{spec.name}: paths a design can vary (--set, overrides=, studies)",
              title_justify="left")
    for col in ("path", "value", "rule", "note"):
        t.add_column(col, justify="right" if col == "value" else "left",
                     no_wrap=col == "path")
    for r in rows:
        t.add_row(r["path"], r["shown"], r["rule"], r["note"])
    foot = Text(f"A <precision> segment takes any of {', '.join(PRECISIONS)}; fields the "
                "spec leaves out can be set too (dse show NAME --paths --format json lists "
                "every path). memory[i].field names a level by position.")
    return Group(t, foot)
