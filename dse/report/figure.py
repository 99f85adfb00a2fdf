"""What every plot shares: the output file (format from its extension, checked before any
work), SI tick labels, colours by bound, axis scales and column words; label placement that keeps
labels apart is dse.report.label_placement's.

Pure helpers (no matplotlib at import); the drawing modules import matplotlib lazily with
the Agg backend through `pyplot()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dse import phases, units
from dse.errors import DseError
from dse.report.label_placement import box_distance as box_distance  # re-exported: tests
from dse.report.label_placement import place as place  # re-exported: tests
from dse.report.label_placement import place_labels as place_labels  # re-exported: tests
from dse.search import atomic

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


# ---- axis units and words -----------------------------------------------------------------

_DECIMAL = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
_SMALL = (*_DECIMAL, ("m", 1e-3), ("\u00b5", 1e-6), ("n", 1e-9), ("p", 1e-12))
_BINARY = (("Pi", 2.0**50), ("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20),
           ("Ki", 2.0**10), ("", 1.0))
FRACTION = "fraction"  # a unit text: a share, shown in percent


def pretty_unit(unit: str) -> str:
    """A unit as printed on a figure: mm2 -> mm², x base -> ×."""
    return re.sub(r"(?<=[A-Za-z])2\b", "\u00b2", unit)


@dataclass(frozen=True)
class Scale:
    """How an axis shows a quantity: the unit its tick numbers are in and the factor that
    turns a stored (SI or mm²) value into that unit (divide by it)."""

    unit: str
    factor: float = 1.0

    def label(self, words: str) -> str:
        return f"{words} ({self.unit})" if self.unit else words


def axis_scale(kind: units.Kind | str, values: Any) -> Scale:
    """The unit an axis of `values` shows: a kind gets the prefix that puts the largest
    magnitude between 1 and 1000 (binary prefixes for a capacity: 16 MiB - 1 GiB in MiB);
    a unit text is shown as it is ('tokens/s'); a fraction in percent."""
    if isinstance(kind, str):
        return Scale("%", 0.01) if kind == FRACTION else Scale(pretty_unit(kind))
    v = np.abs(np.asarray(values, float)).ravel()
    v = v[np.isfinite(v) & (v > 0)]
    if kind.prefixes == "none" or not len(v):
        return Scale(pretty_unit(kind.unit))
    table = (_BINARY if kind.prefixes == "binary" else _SMALL if kind.prefixes == "small"
             else _DECIMAL)
    top = float(v.max())
    prefix, factor = next(((p, f) for p, f in table if top >= f * 0.9995), table[-1])
    return Scale(pretty_unit(prefix + kind.unit), factor)


def plain_number(v: float) -> str:
    """A tick number for people: 1,024, 0.0156, 1.36, 10,106 (never 1e+04)."""
    if not np.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) >= 1000 or float(v).is_integer():
        return f"{v:,.0f}"
    digits = max(0, 2 - int(np.floor(np.log10(abs(v)))))
    text = f"{v:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True)
class Column:
    """What a column of a study's tables holds, for an axis: words, a unit (a kind, whose
    prefix the data picks, or a unit text) and the budget it is held to (`area`, `power`:
    the study's constraint on it), if any."""

    words: str
    unit: units.Kind | str
    budget: str | None = None

    def scale(self, values: Any) -> Scale:
        return axis_scale(self.unit, values)

    def label(self, values: Any) -> str:
        return self.scale(values).label(self.words)


# Metrics of a study's tables (`<workload>.<metric>`, or the design's own): words, unit.
METRIC_WORDS: dict[str, tuple[str, units.Kind | str]] = {
    "output_tokens_per_s": ("output", "tokens/s"),
    "samples_per_s": ("throughput", "samples/s"),
    "tokens_per_s": ("training throughput", "tokens/s"),
    "tokens_per_s_per_chip": ("throughput per chip", "tokens/s"),
    "decode_tokens_per_s": ("decode rate per sequence", "tokens/s"),
    "achieved_flop_per_s": ("achieved compute", units.FLOP_RATE),
    "model_flop_per_s_per_chip": ("model compute per chip", units.FLOP_RATE),
    "hardware_flop_per_s_per_chip": ("hardware compute per chip", units.FLOP_RATE),
    "mfu": ("MFU", FRACTION),
    "power_per_chip_w": ("power per chip", units.POWER),
    "clock_hz": ("clock", units.FREQUENCY),
    "energy_per_token_j": ("energy per token (system)", units.ENERGY),
    "energy_per_sample_j": ("energy per sample (system)", units.ENERGY),
    "energy_per_step_j": ("energy per step (system)", units.ENERGY),
    "ttft_s": ("time to first token", units.TIME),
    "tpot_s": ("time per output token", units.TIME),
    "latency_s": ("latency per request", units.TIME),
    "step_time_s": ("step time", units.TIME),
    "sequences": ("sequences per replica", ""),
    "area_per_chip_mm2": ("area per chip", units.AREA),
    "die_mm2": ("area per die", units.AREA),
    "cost_per_chip_usd": ("cost to make per chip", units.COST),
    "micro_batch": ("micro-batch", ""),
    "microbatches": ("micro-batches per step", ""),
    "virtual_stages": ("virtual pipeline stages", ""),
    "zero": ("ZeRO stage", ""),
}
# constraint.<name> columns: how far a design is past each limit (<= 0: within it).
CONSTRAINT_WORDS: dict[str, tuple[str, units.Kind | str]] = {
    "area_mm2": ("area over the budget", units.AREA),
    "reticle_mm2": ("die over the reticle", units.AREA),
    "shoreline_mm2": ("padding for the die edge", units.AREA),
    "unfit_workloads": ("workloads that do not run", ""),
    "power_w": ("power over the cap", units.POWER),
    "cost_usd": ("cost over the budget", units.COST),
}
# An objective's unit text (`Goal.unit`) that is a kind with prefixes.
_UNIT_KINDS: dict[str, units.Kind] = {"FLOP/s": units.FLOP_RATE, "J": units.ENERGY,
                                      "s": units.TIME, "W": units.POWER, "mm2": units.AREA,
                                      "USD": units.COST}
# The budget a quantity is held to, by its unit.
_BUDGET_OF_KIND = {units.AREA.suffix: "area", units.POWER.suffix: "power"}


def _hardware_column(column: str) -> tuple[str, units.Kind | None] | None:
    """(path, kind) of a hardware parameter's column (`memory.L2.capacity_bytes`)."""
    from dse.spec.vocabulary import column_name, terms

    if "." not in column:
        return None
    for kind in sorted((k for k in units.KINDS if k.suffix), key=lambda k: -len(k.suffix)):
        if column.endswith("_" + kind.suffix):
            path = column[:-len(kind.suffix) - 1]
            if column_name(path) == column:
                return path, kind
    if column_name(column) == column and any(
            p.split(".")[0] == column.split(".")[0] for p in terms()):
        return column, None
    return None


def hardware_words(path: str) -> str:
    """A design parameter in words: memory.L2.capacity -> 'L2 capacity'."""
    return path.removeprefix("memory.").replace(".", " ").replace("_", " ")


def describe_column(column: str, unit: str | None = None, base: str | None = None
                    ) -> Column:
    """Words and unit of a column of a study's tables: objectives (`unit` from the study;
    'x base' names the `base` design), metrics per workload (`llama2-70b-decode.
    output_tokens_per_s` -> 'llama2-70b-decode output', tokens/s), the design's area,
    constraint margins and hardware parameters (`memory.L2.capacity_bytes` -> 'L2
    capacity', a capacity)."""
    if column.startswith("objective."):
        words = column.removeprefix("objective.").replace("_", " ")
        text = unit or ""
        if text == "x base":
            return Column(words, f"\u00d7 {base}" if base else "\u00d7 base")
        kind = _UNIT_KINDS.get(text)
        budget = _BUDGET_OF_KIND.get(kind.suffix) if kind is not None else None
        return Column(words, kind if kind is not None else text, budget)
    if column.startswith("constraint."):
        name = column.removeprefix("constraint.")
        words, u = CONSTRAINT_WORDS.get(name, (name.replace("_", " "), ""))
        return Column(words, u)
    if column == "number":
        return Column("trial", "")
    hardware = _hardware_column(column)
    if hardware is not None:
        path, kind = hardware
        return Column(hardware_words(path), kind or "")
    job, dot, metric = column.rpartition(".")
    name = metric if dot else column
    if name in METRIC_WORDS:
        words, u = METRIC_WORDS[name]
    else:
        m = re.fullmatch(r"memory_(\w+)_bytes", name)
        if m:
            words, u = f"{m.group(1).replace('_', ' ')} memory per chip", units.BYTES
        else:
            kind = next((k for k in sorted(units.KINDS, key=lambda k: -len(k.suffix))
                         if k.suffix and name.endswith("_" + k.suffix)), None)
            stem = name[:-len(kind.suffix) - 1] if kind is not None else name
            words, u = stem.replace("_", " "), kind if kind is not None else ""
    budget = _BUDGET_OF_KIND.get(u.suffix) if isinstance(u, units.Kind) else None
    if name == "die_mm2":
        budget = None  # the area budget holds a chip's dies together, not one
    return Column(f"{job} {words}" if dot else words, u, budget)


def scenario_words(doc: dict[str, Any]) -> str:
    """What ran, in words, for a plot's title (from `eval_view.eval_document`):
    'llama2-70b, decode: batch 1, 5 prompt tokens, 200 output tokens, w8a16 (scenario
    chat-decode-int8) on h100-sxm, 1 chip; changed: compute units 96'."""
    from dse.report.eval_view import hardware_value
    from dse.sweep import SCENARIO_FIELDS

    sc = doc["scenario"]
    prompt = "prompt tokens" if phases.get(sc["phase"]).generates else "tokens per sequence"
    text = re.sub(r"\bseq_in (\d+)", rf"\1 {prompt}", sc["description"])
    text = re.sub(r"\bseq_out (\d+)", r"\1 output tokens", text)
    text = text.replace("engine default", "the default serving engine")
    text = re.sub(r"\b(\w+)=(\S+)", lambda m: f"{m.group(1).replace('_', ' ')} "
                  f"{m.group(2)}", text)
    phase, _, rest = text.partition(", ")
    chips = sc["chips"]
    parallel = f"{chips} chips" + (f" (tensor-parallel {sc['tp']}, pipeline-parallel "
                                  f"{sc['pp']})" if sc["tp"] > 1 or sc["pp"] > 1 else "")
    out = (f"{doc['workload']}, {phase}" + (f": {rest}" if rest else "")
           + f" (scenario {sc['name']}) on {doc['hardware']}, "
           + ("1 chip" if chips == 1 else parallel))
    changed = [f"{hardware_words(k)} {hardware_value(k, v)}"
               for k, v in doc["overrides"].items() if k not in SCENARIO_FIELDS]
    return out + (f"; changed: {', '.join(changed)}" if changed else "")


def wrap_title(first: str, what: str, width: int = 110) -> str:
    """A title's first line and `what` wrapped at `width` characters (never inside a
    hyphenated name)."""
    import textwrap

    return "\n".join([first, *textwrap.wrap(what, width, break_on_hyphens=False)])


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
        with atomic.replacing(path) as tmp:  # whole or not at all
            fig.savefig(tmp, format=fmt, dpi=DPI, bbox_inches="tight")
    except OSError as e:
        raise DseError(f"{option} {path}: cannot write: {e.strerror or e}") from None
    finally:
        pyplot().close(fig)
    return path


def save_all(fig: Any, paths: Sequence[Path]) -> None:
    """Write `fig` to every path in the format of its extension (each whole or not at all),
    then close it: a study's plots in PNG, SVG and PDF from one drawing."""
    try:
        for p in paths:
            with atomic.replacing(p) as tmp:
                fig.savefig(tmp, format=image_format(p), dpi=DPI)
    finally:
        pyplot().close(fig)
