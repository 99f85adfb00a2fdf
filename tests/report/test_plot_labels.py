"""Every plot kind rendered with matplotlib's Agg backend and read back: the name labels
(annotations) overlap no other label or text, each lies nearest its own marker or has a
leader line that ends on it, and names the marker it points at; axes name their units (and
tick numbers are in that unit); titles are words, not command-line options; the study's
budget is drawn on the axis it holds; the parallel plot's colours agree with its colour bar.
Issue 23, Deliver 6, and fuzz finding T4 (`dse plot pareto DIR --x reason`)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text
from typer.testing import CliRunner

from dse import units
from dse.cli import app
from dse.report import figure, label_placement
from dse.report.figure import axis_scale, describe_column, place, plain_number

runner = CliRunner()
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "\u00b5s": 1e-6, "ns": 1e-9}
OVERLAP_PX = 8.0  # markers closer than this (pixels at 100 dpi) are one spot on the figure


# ---- rendering and reading back -------------------------------------------------------------

@pytest.fixture
def drawn(monkeypatch):
    """The figures every plot command saves, in order (each once), for reading back."""
    figs: list[Figure] = []
    save = Figure.savefig

    def record(self, *args, **kwargs):
        if not any(f is self for f in figs):
            figs.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    return figs


def dse(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def renderer(fig: Figure):
    """A fresh Agg canvas on a saved (closed) figure, drawn."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def labels(fig: Figure) -> list[tuple[object, Annotation]]:
    return [(ax, t) for ax in fig.axes for t in ax.texts if isinstance(t, Annotation)]


def box_distance(b, x: float, y: float) -> float:
    return float(np.hypot(max(b.x0 - x, 0, x - b.x1), max(b.y0 - y, 0, y - b.y1)))


def check_labels(fig: Figure) -> list[Annotation]:
    """No two texts of the figure overlap where one is a name label; each label without a
    leader line is nearer its own marker than any other labelled marker that does not sit
    on it; each leader line runs from the label's box to its own marker. Returns the
    labels."""
    ren = renderer(fig)
    found = labels(fig)
    assert found, "no name labels drawn"
    # the text's own box (an annotation's extent also spans its leader line)
    boxes = [Text.get_window_extent(t, ren) for _, t in found]
    for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2):
        assert not a.overlaps(b), (found[i][1].get_text(), found[j][1].get_text())
    for (_, t), box in zip(found, boxes, strict=True):  # no leader line crosses a label
        for (_, other), line in ((o, o[1].arrow_patch) for o in found):
            if line is None or other is t:
                continue
            ends = line.get_path().vertices[[0, -1]]
            along = ends[0] + np.linspace(0.05, 0.95, 40)[:, None] * (ends[1] - ends[0])
            inside = ((along[:, 0] > box.x0 + 1) & (along[:, 0] < box.x1 - 1)
                      & (along[:, 1] > box.y0 + 1) & (along[:, 1] < box.y1 - 1))
            assert not inside.any(), (other.get_text(), t.get_text())
    others = [t for ax in fig.axes for t in ax.texts
              if not isinstance(t, Annotation) and t.get_visible() and t.get_text().strip()]
    for (_, t), box in zip(found, boxes, strict=True):
        for o in others:
            assert not box.overlaps(o.get_window_extent(ren)), (t.get_text(), o.get_text())
    anchors = [np.asarray(ax.transData.transform(t.xy)) for ax, t in found]
    for k, ((_, t), box, own) in enumerate(zip(found, boxes, anchors, strict=True)):
        if t.arrow_patch is not None:  # a leader line: from the label's box to its marker
            ends = t.arrow_patch.get_path().vertices[[0, -1]]
            assert box_distance(box.padded(4), *ends[0]) == 0, t.get_text()
            assert np.hypot(*(ends[-1] - own)) <= 8.0, t.get_text()
            continue
        mine = box_distance(box, *own)
        for j, other in enumerate(anchors):
            if j != k and np.hypot(*(other - own)) > OVERLAP_PX:
                assert box_distance(box, *other) > mine, (t.get_text(), found[j][1].get_text())
    return [t for _, t in found]


def check_units(label: str) -> str:
    """The unit in an axis label's parentheses ('area per chip (mm²)' -> 'mm²')."""
    m = re.search(r"\(([^()]+)\)(?:\s|$|,)", label)
    assert m, f"no unit in {label!r}"
    return m.group(1)


def no_options(fig: Figure) -> None:
    titles = [ax.get_title() for ax in fig.axes] + [fig._suptitle.get_text()
                                                      if fig._suptitle else ""]
    for title in titles:
        assert "--" not in title and "seq_in" not in title and "=" not in title, title


# ---- studies -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def study_dirs(tmp_path_factory) -> dict[str, Path]:
    """Two small real studies: flops-vs-bandwidth (throughput x area, budget 814 mm²) and
    middle-ground (references h100-sxm and gpu-like a few pixels apart)."""
    root = tmp_path_factory.mktemp("studies")
    out = {"fvb": root / "fvb", "mg": root / "mg"}
    dse("study", "flops-vs-bandwidth", "--trials", 8, "--batch", 4, "-q", "--out", out["fvb"])
    dse("study", Path(__file__).parents[2] / "studies" / "middle-ground.yaml", "--trials", 16,
        "--batch", 16, "--no-alternatives", "-q", "--out", out["mg"])
    return out


def reference_points(folder: Path, x: str, y: str) -> dict[str, tuple]:
    """Each reference chip's (x, y) in the axis units the figure shows."""
    refs = pd.read_csv(folder / "references.csv")
    units_of = {o["column"]: o["unit"] for o in objectives(folder)}
    fx = describe_column(x, units_of.get(x)).scale(refs[x]).factor
    fy = describe_column(y, units_of.get(y)).scale(refs[y]).factor
    return {r["chip"]: (r[x] / fx, r[y] / fy) for _, r in refs.iterrows()
            if np.isfinite(r[x]) and np.isfinite(r[y])}  # the others are not drawn


def objectives(folder: Path) -> list[dict]:
    return list(json.loads((folder / "run.json").read_text())["objectives"].values())


@pytest.mark.parametrize("which", ["fvb", "mg"])
def test_pareto_labels_name_their_own_markers(study_dirs, drawn, tmp_path, which):
    folder = study_dirs[which]
    dse("plot", "pareto", folder, "--out", tmp_path / "p.png")
    fig = drawn[-1]
    found = check_labels(fig)
    x, y = (o["column"] for o in objectives(folder)[:2])
    where = reference_points(folder, x, y)
    assert sorted(t.get_text() for t in found) == sorted(where)
    for t in found:  # the label points at the marker of the chip it names
        assert t.xy == pytest.approx(where[t.get_text()], rel=1e-9)
    ax = fig.axes[0]
    for label in (ax.get_xlabel(), ax.get_ylabel()):
        check_units(label)
        assert "objective." not in label and "_" not in label


def test_the_study_plot_labels_the_references_too(study_dirs, drawn, tmp_path):
    """pareto.png as `dse study` writes it (drawn again from the same study)."""
    dse("study", Path(__file__).parents[2] / "studies" / "middle-ground.yaml", "--trials", 16,
        "--batch", 16, "--no-alternatives", "-q",
        "--out", tmp_path / "mg")
    pareto = next(f for f in drawn if f.axes[0].get_xlabel().startswith("memory bound"))
    # the products that run the study's workloads (tpu-v5e and groq-lpu do not: not drawn)
    assert {t.get_text() for t in check_labels(pareto)} == {
        "h100-sxm", "h200-sxm", "b200", "mi300x", "gaudi3", "gpu-like", "middle-ground"}
    assert pareto.axes[0].get_xlabel().startswith("memory bound (\u00d7 middle-ground)")
    assert pareto.axes[0].get_ylabel().startswith("encoder (samples/s)")


def test_custom_axes_in_words_with_units_and_the_area_budget(study_dirs, drawn, tmp_path):
    folder = study_dirs["fvb"]
    dse("plot", "pareto", folder, "--x", "llama2-7b-decode.output_tokens_per_s:max",
        "--y", "area_per_chip_mm2:min", "--out", tmp_path / "c.png")
    fig = drawn[-1]
    check_labels(fig)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "llama2-7b-decode output (tokens/s)  \u2192  better"
    assert ax.get_ylabel() == "area per chip (mm\u00b2)  \u2193  better"
    budget = [t for t in ax.texts if t.get_text().startswith("area budget")]
    assert [t.get_text() for t in budget] == ["area budget 814 mm\u00b2"]
    assert any(np.allclose(line.get_ydata(), 814.0) for line in ax.get_lines())


def test_the_default_study_plot_draws_the_budget_on_its_area_objective(study_dirs, drawn,
                                                                        tmp_path):
    dse("plot", "pareto", study_dirs["fvb"], "--out", tmp_path / "d.png")
    ax = drawn[-1].axes[0]
    assert ax.get_ylabel().startswith("area (mm\u00b2)")
    assert [t.get_text() for t in ax.texts if "budget" in t.get_text()] == [
        "area budget 814 mm\u00b2"]


def test_a_text_column_as_an_axis_is_one_line(study_dirs):
    """T4: --x reason was an internal error (could not convert string to float)."""
    for option, column, holds in (("--x", "reason", "text"), ("--y", "feasible",
                                                               "true/false")):
        r = runner.invoke(app, ["plot", "pareto", str(study_dirs["fvb"]), option, column,
                                "--out", "x.png"])
        assert r.exit_code == 2, r.output
        line = r.output.strip()
        assert "\n" not in line and "Traceback" not in line
        assert f"column '{column}' of trials.parquet holds {holds}, not numbers" in line
        assert "numeric columns: " in line and "area_per_chip_mm2" in line
        assert "reason," not in line.split("numeric columns: ")[1]


def test_axes_without_a_direction_say_how_to_draw_the_front(study_dirs, tmp_path):
    """A column named without :max or :min has no front; the console says which axis and
    how (was '0 on the front of ...', read as an empty front)."""
    out = tmp_path / "p.png"
    r = runner.invoke(app, ["plot", "pareto", str(study_dirs["fvb"]), "--x",
                            "area_per_chip_mm2", "--y", "die_mm2:min", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "no front drawn: --x has no direction (add :max or :min to the column, e.g. " \
           "area_per_chip_mm2:min)" in r.output
    r = runner.invoke(app, ["plot", "pareto", str(study_dirs["fvb"]), "--x",
                            "area_per_chip_mm2:min", "--y", "die_mm2:max", "--out", str(out)])
    assert r.exit_code == 0 and " on the front of area_per_chip_mm2 and die_mm2" in r.output


# ---- parallel coordinates ------------------------------------------------------------------

def test_parallel_axes_in_units_with_objectives_and_a_consistent_colour(study_dirs, drawn,
                                                                       tmp_path):
    dse("study", Path(__file__).parents[2] / "studies" / "middle-ground.yaml", "--trials", 16,
        "--batch", 16, "--no-alternatives", "-q",
        "--out", tmp_path / "mg")
    fig = next(f for f in drawn if "Pareto front's" in f.axes[0].get_title())
    ren = renderer(fig)
    ax, bar = fig.axes[0], fig.axes[1]
    names = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
    assert names[:5] == ["compute units", "L2 capacity (MiB)", "HBM3 stacks",
                         "LPDDR5X channels", "interconnect links"]
    assert names[5].startswith("memory bound (\u00d7 middle-ground) \u2191 better")
    assert names[6] == "encoder (samples/s) \u2191 better"
    ticks = [t.get_text() for t in ax.texts]
    assert "16" in ticks and "1,024" in ticks  # the L2 range 16 MiB - 1 GiB, in MiB
    assert not any(re.search(r"e[+-]\d", t) for t in ticks)  # no 1.074e+09
    boxes = [t.get_window_extent(ren) for t in ax.texts]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)
    # the front's line colours are the colour bar's colours at their objective's value
    trials = pd.read_parquet(tmp_path / "mg" / "trials.parquet")
    front = pd.read_csv(tmp_path / "mg" / "pareto.csv")
    ok = trials[trials["feasible"]]["objective.memory_bound"]
    low, high = bar.get_ylim()
    assert (low, high) == pytest.approx((ok.min(), ok.max()))
    lines = next(c for c in ax.collections if isinstance(c, LineCollection)
                 and c.get_zorder() == 3)
    cmap = matplotlib.colormaps["viridis"]
    values = np.sort(front["objective.memory_bound"].to_numpy())
    expected = cmap((values - low) / (high - low))
    assert lines.get_colors()[:, :3] == pytest.approx(expected[:, :3], abs=1e-6)


def test_one_design_on_the_front_takes_its_colour_from_the_bar(tmp_path):
    """The colour bar once spanned a made-up range around a single design while its line
    took the colour map's lowest colour."""
    from dse.report import pareto_plot as pp

    front = pd.DataFrame({"a": [3.0], "objective.o": [1.2]})
    feasible = pd.DataFrame({"a": [1.0, 2.0, 3.0], "objective.o": [0.5, 0.9, 1.2]})
    axes = [pp.parameter_axis("a", 1.0, 4.0), pp.objective_axis(
        "objective.o", "x base", "base", True, feasible["objective.o"].to_numpy())]
    d = pp.parallel_data(front, feasible, axes, 1, "t")
    import matplotlib.pyplot as plt

    captured = []
    original = Figure.savefig
    def fake(self, fname, *a, **k):  # the figure, and an empty file for the rename
        captured.append(self)
        Path(fname).write_bytes(b"")

    Figure.savefig = fake
    try:
        pp.draw_parallel(d, [tmp_path / "unused.png"])
    finally:
        Figure.savefig = original
        plt.close("all")
    ax, bar = captured[0].axes
    assert bar.get_ylim() == pytest.approx((0.5, 1.2))
    line = next(c for c in ax.collections if isinstance(c, LineCollection)
                and c.get_zorder() == 3)
    assert line.get_colors()[0][:3] == pytest.approx(matplotlib.colormaps["viridis"](1.0)[:3])


# ---- roofline, breakdown, trends -------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["h100-sxm", "llama2-70b"],
    ["h100-sxm", "llama2-70b", "--phase", "decode", "--set", "compute.units=96",
     "--chips", "2", "--tp", "2"],
    ["a100-sxm-80gb", "gpt3-175b", "--phase", "prefill", "--batch", "1", "--chips", "8",
     "--tp", "8"],
])
def test_roofline_labels_name_their_own_points(drawn, tmp_path, args):
    dse("plot", "roofline", *args, "--out", tmp_path / "r.png")
    fig = drawn[-1]
    ax = fig.axes[0]
    points = {(float(x), float(y)) for c in ax.collections for x, y in c.get_offsets()}
    for t in check_labels(fig):
        assert tuple(map(float, t.xy)) in points, t.get_text()
    assert check_units(ax.get_xlabel()) == "FLOP/byte"
    assert check_units(ax.get_ylabel()) == "FLOP/s"
    no_options(fig)
    if "--set" in args:
        assert "changed: compute units 96" in ax.get_title()


@pytest.mark.parametrize("args", [
    ["h100-sxm", "llama2-70b"],  # seconds
    ["h100-sxm", "llama3-8b", "--phase", "serve"],  # milliseconds
    ["h100-sxm", "gemm:4096x4096x4096"],  # microseconds
])
def test_breakdown_time_axis_names_the_unit_of_its_ticks(drawn, tmp_path, args):
    dse("plot", "breakdown", *args, "--out", tmp_path / "b.png")
    fig = drawn[-1]
    renderer(fig)
    ax = fig.axes[1]
    unit = check_units(ax.get_xlabel())
    factor = TIME_UNITS[unit]
    lo, hi = ax.get_xlim()
    shown = [(tick, label.get_text()) for tick, label in zip(
        ax.get_xticks(), ax.get_xticklabels(), strict=True) if lo <= tick <= hi]
    assert len(shown) >= 3
    for tick, text in shown:
        assert float(text.replace(",", "")) * factor == pytest.approx(tick, abs=1e-12), (
            unit, tick, text)
    assert max(float(t.replace(",", "")) for _, t in shown) >= 1  # not 0.0004 s
    no_options(fig)


@pytest.mark.parametrize("models", [False, True])
def test_trends_labels_name_their_own_points(drawn, tmp_path, models):
    dse("plot", "trends", *(["--models"] if models else []), "--out", tmp_path / "t.png")
    fig = drawn[-1]
    ax = fig.axes[0]
    points = {(round(float(x), 6), round(float(y), 3)) for c in ax.collections
              for x, y in c.get_offsets()}
    for t in check_labels(fig):
        x, y = t.xy
        assert (round(float(x), 6), round(float(y), 3)) in points, t.get_text()


# ---- the pieces -------------------------------------------------------------------------------

def test_placer_puts_each_label_nearest_its_own_marker():
    """Two markers one label-height apart: each label on its own marker's side, or with a
    leader line; none overlap; deterministic."""
    anchors = [(100.0, 100.0), (100.0, 112.0), (160.0, 100.0)]
    sizes = [(60.0, 10.0)] * 3
    occupied = [(x - 4, y - 4, x + 4, y + 4) for x, y in anchors]
    spots = place(anchors, sizes, occupied, (0, 0, 400, 300), reach=4.0)
    assert spots == place(anchors, sizes, occupied, (0, 0, 400, 300), reach=4.0)
    boxes = [s.box for s in spots]
    for a, b in itertools.combinations(boxes, 2):
        assert not label_placement._overlaps(a, b)
    for k, s in enumerate(spots):
        mine = figure.box_distance(s.box, *anchors[k])
        if not s.leader:
            assert all(figure.box_distance(s.box, *a) > mine
                       for j, a in enumerate(anchors) if j != k)
        assert not any(label_placement._overlaps(s.box, o) for o in occupied)


def test_placer_gives_a_leader_line_to_a_label_that_had_to_move():
    """Around the marker is taken (a legend, say): the label goes further out, with a
    leader line, clear of what is taken."""
    taken = (150.0, 110.0, 250.0, 190.0)
    (spot,) = place([(200.0, 150.0)], [(40.0, 10.0)], [taken], (0, 0, 400, 300), reach=4.0)
    assert spot.leader and not label_placement._overlaps(spot.box, taken)
    (near,) = place([(200.0, 150.0)], [(40.0, 10.0)], [], (0, 0, 400, 300), reach=4.0)
    assert not near.leader  # beside its marker


def test_placer_places_a_crowd_without_overlap():
    """Twelve labels on one marker: every one placed (the later ones further out, with
    leader lines), none overlapping."""
    spots = place([(200.0, 150.0)] * 12, [(40.0, 10.0)] * 12, [(196, 146, 204, 154)],
                  (0, 0, 400, 300), reach=4.0)
    assert all(s is not None for s in spots)
    assert not spots[0].leader and spots[-1].leader
    for a, b in itertools.combinations([s.box for s in spots], 2):
        assert not label_placement._overlaps(a, b)


@pytest.mark.parametrize(("column", "unit", "label"), [
    ("area_per_chip_mm2", None, "area per chip (mm\u00b2)"),
    ("llama2-70b-decode.output_tokens_per_s", None, "llama2-70b-decode output (tokens/s)"),
    ("llama2-70b-decode.tpot_s", None, "llama2-70b-decode time per output token (ms)"),
    ("bert-large.power_per_chip_w", None, "bert-large power per chip (W)"),
    ("memory.L2.capacity_bytes", None, "L2 capacity (MiB)"),
    ("interconnect.link_bandwidth_bytes_per_s", None,
     "interconnect link bandwidth (GB/s)"),
    ("compute.units", None, "compute units"),
    ("objective.memory_bound", "x base", "memory bound (\u00d7 middle-ground)"),
    ("objective.speed", "FLOP/s", "speed (TFLOP/s)"),
    ("constraint.area_mm2", None, "area over the budget (mm\u00b2)"),
])
def test_columns_in_words_with_units(column, unit, label):
    values = {"llama2-70b-decode.tpot_s": [0.02, 0.03], "memory.L2.capacity_bytes": [2**24],
              "interconnect.link_bandwidth_bytes_per_s": [50e9],
              "objective.speed": [5e14]}.get(column, [1.0])
    assert describe_column(column, unit, "middle-ground").label(values) == label


def test_budgets_belong_to_area_and_power_columns_only():
    assert describe_column("area_per_chip_mm2").budget == "area"
    assert describe_column("objective.a", "mm2").budget == "area"
    assert describe_column("x.power_per_chip_w").budget == "power"
    assert describe_column("die_mm2").budget is None  # the budget holds all dies
    assert describe_column("constraint.area_mm2").budget is None
    assert describe_column("objective.t", "tokens/s").budget is None


def test_axis_scale_and_tick_numbers():
    assert axis_scale(units.BYTES, [2**24, 2**30]) == axis_scale(units.BYTES, [2**30])
    assert axis_scale(units.BYTES, [2**30]).unit == "GiB"
    assert axis_scale(units.TIME, [0.0017]).unit == "ms"
    assert axis_scale(units.TIME, [2e-7]).unit == "ns"
    assert axis_scale(units.TIME, [2e-7]).factor == 1e-9
    assert axis_scale(units.AREA, [757.0]).unit == "mm\u00b2"
    assert axis_scale("fraction", [0.5]) == figure.Scale("%", 0.01)
    assert [plain_number(v) for v in (739.97, 10106.3, 0.0156, 1.0, 12.5)] == [
        "740", "10,106", "0.0156", "1", "12.5"]


def test_titles_in_words():
    doc = {"workload": "llama2-70b", "hardware": "h100-sxm",
           "scenario": {"name": "chat-decode-int8", "phase": "decode",
                        "description": "decode, batch 1, seq_in 5, seq_out 200, w8a16",
                        "chips": 2, "tp": 2, "pp": 1},
           "overrides": {"phase": "decode", "memory.L2.capacity": 96 * 2**20}}
    assert figure.scenario_words(doc) == (
        "llama2-70b, decode: batch 1, 5 prompt tokens, 200 output tokens, w8a16 (scenario "
        "chat-decode-int8) on h100-sxm, 2 chips (tensor-parallel 2, pipeline-parallel 1); "
        "changed: L2 capacity 96 MiB")
    assert figure.wrap_title("A", "x" * 30 + " chat-decode-int8", 35).split("\n") == [
        "A", "x" * 30, "chat-decode-int8"]
