"""`dse plot trends`: the memory wall over time, from the data of "AI and Memory Wall"
(Gholami et al., IEEE Micro 2024; `dse/data/memory_wall/`, digitized from the paper's
figures).

- Figure 1 of the paper (`hardware_trends`): peak hardware FLOPS, DRAM bandwidth and
  interconnect bandwidth by year, each normalized to its first device, each with a
  least-squares exponential fit (a straight line through log10(value) against the year);
  the growth per two years is 10^(2 x slope). The paper states 3.0x, 1.6x and 1.4x.
- `--models` (`model_trends`): parameters of Transformer, CV and RecSys models against
  accelerator memory over time. The paper plots memory as GB / 6 (the parameters that fit at
  about 6 bytes each, our reading of its numbers); the left axis here is parameters and the
  right axis the same line in GB of memory. Fits: Transformers (paper: 410x / 2 years) and
  memory (paper: 2x / 2 years).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from dse import units
from dse.errors import DseError

DATA = ("dse", "data/memory_wall")  # package and folder of the shipped CSV files
SOURCE = ("Gholami et al., \"AI and Memory Wall\", IEEE Micro 2024; "
          "github.com/amirgholami/ai_and_memory_wall @ a1f1d67")
BYTES_PER_PARAM = 6.0  # the paper's memory line is GB / 6 (see the module docstring)


@dataclass(frozen=True)
class Fit:
    """log10(value) = intercept + slope x year, by least squares."""

    slope: float  # decades per year
    intercept: float

    @property
    def per_two_years(self) -> float:
        """Growth factor per two years: 10^(2 x slope)."""
        return float(10 ** (2 * self.slope))

    def at(self, year: np.ndarray | float) -> np.ndarray:
        return 10 ** (self.intercept + self.slope * np.asarray(year, dtype=float))


@dataclass(frozen=True)
class Series:
    key: str  # the series name in the CSV
    label: str
    colour: str
    year: np.ndarray  # decimal years
    value: np.ndarray  # normalized (hardware) or parameters (models)
    names: tuple[str, ...]  # the label printed next to each point in the paper ('' if none)
    fit: Fit | None = None
    stated: float | None = None  # the paper's growth per two years


@dataclass(frozen=True)
class TrendsData:
    title: str
    ylabel: str
    series: tuple[Series, ...]

    def by_key(self, key: str) -> Series:
        return next(s for s in self.series if s.key == key)


def fit_growth(year: np.ndarray, value: np.ndarray) -> Fit:
    """Least-squares exponential fit of `value` (> 0) against `year`: a line in log10."""
    year, value = np.asarray(year, dtype=float), np.asarray(value, dtype=float)
    if len(year) < 2 or np.any(value <= 0):
        raise DseError("a growth fit needs at least two positive values")
    slope, intercept = np.polyfit(year, np.log10(value), 1)
    return Fit(float(slope), float(intercept))


def _read(name: str) -> pd.DataFrame:
    with resources.files(DATA[0]).joinpath(DATA[1], name).open(encoding="utf-8") as f:
        return pd.read_csv(f, keep_default_na=False)


def stated_rates() -> dict[str, float]:
    """The paper's printed growth per two years, by quantity ('DRAM bandwidth': 1.6)."""
    out = {}
    for row in _read("scaling_rates_stated.csv").itertuples():
        m = re.match(r"\s*([\d.]+)x\s*/\s*2\s*yrs", row.stated_rate)
        if m:
            out[row.quantity] = float(m.group(1))
    return out


# series key -> label, colour (the paper's), the quantity in scaling_rates_stated.csv
HARDWARE = {
    "hw_peak_flops": ("Peak hardware FLOPS", "black", "peak server hardware FLOPS"),
    "dram_bandwidth": ("DRAM bandwidth", "#2ca02c", "DRAM bandwidth"),
    "interconnect_bandwidth": ("Interconnect bandwidth", "#1f77b4", "interconnect bandwidth"),
}
MODELS = {
    "transformer_model_params": ("Transformer models", "#d62728",
                                 "transformer model size (params)"),
    "cv_model_params": ("CV models", "#1f77b4", None),
    "recsys_model_params": ("RecSys model", "black", None),
    "ai_hw_memory_series": ("AI accelerator memory", "#2ca02c", "AI hardware memory capacity"),
}
FITTED = ("hw_peak_flops", "dram_bandwidth", "interconnect_bandwidth",
          "transformer_model_params", "ai_hw_memory_series")


def _series(frame: pd.DataFrame, column: str, table: dict, scale: float = 1.0
            ) -> tuple[Series, ...]:
    stated = stated_rates()
    out = []
    for key, (label, colour, quantity) in table.items():
        rows = frame[frame["series"] == key].sort_values("year_decimal")
        year = rows["year_decimal"].to_numpy(float)
        value = rows[column].to_numpy(float) * scale
        out.append(Series(key=key, label=label, colour=colour, year=year, value=value,
                          names=tuple(str(n) for n in rows["label_in_figure"]),
                          fit=fit_growth(year, value) if key in FITTED else None,
                          stated=stated.get(quantity) if quantity else None))
    return tuple(out)


def hardware_trends() -> TrendsData:
    """The paper's Figure 1: each series normalized to its first point, with its fit."""
    frame = _read("fig_hw_scaling_digitized.csv")
    return TrendsData(title="Scaling of peak hardware FLOPS and memory / interconnect "
                            "bandwidth (AI and Memory Wall, Fig. 1)",
                      ylabel="normalized to the first device (x)",
                      series=_series(frame, "normalized_value", HARDWARE))


def model_trends() -> TrendsData:
    """Model parameters and accelerator memory (as parameters at 6 bytes each) by year."""
    frame = _read("fig_model_size_scaling_digitized.csv")
    return TrendsData(title="Model size against accelerator memory (AI and Memory Wall)",
                      ylabel="parameters",
                      series=_series(frame, "value_billion_params", MODELS, 1e9))


def _count(v: float) -> str:
    """A parameter count for a tick: 10 M, 1 B, 100 B, 10 T."""
    for word, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:g} {word}"
    return f"{v:g}"


def rate_text(rate: float) -> str:
    """A growth factor as the paper prints it: 3.0x, 1.6x, 410x."""
    return f"{rate:.1f}x" if rate < 10 else f"{rate:.0f}x"


def _legend(s: Series) -> str:
    if s.fit is None:
        return s.label
    paper = "" if s.stated is None else f"; paper {rate_text(s.stated)}"
    return f"{s.label}: {s.fit.per_two_years:.3g}x / 2 years (fit{paper})"


def draw(data: TrendsData, path: Path, models: bool = False) -> Path:
    """Points and fitted lines on a log y axis against the year, the paper's labels next to
    their points (kept apart); `models`: parameters on the left axis and memory in GB on
    the right. Written to `path` (PNG, SVG or PDF by extension)."""
    from dse.report.figure import image_format, log_axis, pyplot, save
    from dse.report.label_placement import boxes_of, label_markers, line_boxes

    image_format(path)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 6))
    ax.set_yscale("log")
    for s in data.series:
        marker = "s" if s.key == "ai_hw_memory_series" else "o"
        ax.scatter(s.year, s.value, s=28, color=s.colour, marker=marker, zorder=3,
                   label=_legend(s), edgecolor="white", linewidth=0.5)
        if s.fit is not None:
            years = np.linspace(s.year.min(), s.year.max(), 50)
            ax.plot(years, s.fit.at(years), color=s.colour, lw=1.2, ls="--", zorder=2)
    if models:
        log_axis(ax.yaxis, _count)
        right = ax.secondary_yaxis("right", functions=(
            lambda p: p * BYTES_PER_PARAM / 1e9, lambda gb: gb * 1e9 / BYTES_PER_PARAM))
        log_axis(right.yaxis, lambda gb: units.format_quantity(gb * 1e9, units.TRAFFIC, 3))
        right.set_ylabel(f"accelerator memory (bytes = parameters x {BYTES_PER_PARAM:g})")
    else:
        log_axis(ax.yaxis, lambda v: f"{v:,.0f}x" if v >= 1 else f"{v:g}x")
    ax.set_xlabel("year")
    ax.set_ylabel(data.ylabel)
    ax.set_title(data.title, fontsize=10)
    ax.grid(True, color="0.92", lw=0.6, zorder=0)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.95)
    fig.text(0.99, 0.005, f"data: {SOURCE}", ha="right", va="bottom", fontsize=6.5,
             color="0.4")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    # the paper's point labels, nearest their own point and overlapping nothing, with a
    # leader line where one had to move away
    renderer = fig.canvas.get_renderer()
    occupied = boxes_of([ax.get_legend()], renderer)
    pts = [(s, y, v, n) for s in data.series
           for y, v, n in zip(s.year, s.value, s.names, strict=True)]
    px = ax.transData.transform([(y, v) for _, y, v, _ in pts])
    occupied += [(x - 4, y - 4, x + 4, y + 4) for x, y in px]
    for s in data.series:  # the fitted lines, as rows of small boxes
        if s.fit is not None:
            years = np.linspace(s.year.min(), s.year.max(), 120)
            occupied += line_boxes(ax, years, s.fit.at(years), samples=120)
    named = [p for p in pts if p[3]]
    label_markers(fig, ax, [(n, year, value) for _, year, value, n in named], renderer,
                  occupied, markers=[tuple(a) for a in px], fontsize=7,
                  colours=[s.colour for s, *_ in named], marker_px=4.0)
    return save(fig, path)
