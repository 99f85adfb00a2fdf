"""`dse plot` and the plot data behind it: roofs, ridge points, operator points, the time
breakdown and the memory-wall fits against hand-computed values; each plot drawn through the
CLI to PNG, SVG and PDF; bad input is one line and exit 2."""

import itertools
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.errors import DseError
from dse.model.batch import design_batch
from dse.report import breakdown_plot, roofline_plot, trends_plot, validation_view
from dse.report.figure import default_out, image_format, place_labels, spread
from dse.spec.hardware import derived_figures
from dse.validate import Row

runner = CliRunner()

# H100 SXM from hwspecs/h100-sxm.yaml: 132 SMs x 4096 bf16 FLOP/cycle x 1.83 GHz (the
# file's per-unit peak), achievable 0.865 (bf16), 0.752 (fp8); HBM3 3.35 TB/s x 0.867;
# L1 256 KiB per SM at 128 B/cycle, L2 6.65 TB/s, both at fraction 1.
H100_BF16_PEAK = 132 * 4096 * 1.83e9  # 989.4 TFLOP/s
H100_BF16 = H100_BF16_PEAK * 0.865  # 855.9 TFLOP/s
H100_HBM = 3.35e12 * 0.867  # 2.904 TB/s
H100_L2 = 6.65e12


@pytest.fixture(scope="module")
def h100():
    return roofline_plot.roofline_data(design_batch(dse.load_hardware("h100-sxm")))


# ---- roofline data ------------------------------------------------------------------------

def test_memory_roofs_are_bandwidth_times_fraction(h100):
    roofs = {m.level: m for m in h100.memory}
    assert list(roofs) == ["L1", "L2", "HBM3"]  # innermost first
    assert roofs["HBM3"].bandwidth == pytest.approx(H100_HBM, rel=1e-12)
    assert roofs["HBM3"].peak == pytest.approx(3.35e12)
    assert roofs["HBM3"].fraction == pytest.approx(0.867)
    assert roofs["L2"].bandwidth == pytest.approx(H100_L2) and roofs["L2"].fraction == 1.0
    assert roofs["L1"].bandwidth == pytest.approx(132 * 128 * 1.83e9)
    assert roofs["HBM3"].label == "HBM3 2.9 TB/s (0.867 x 3.35 TB/s)"
    assert roofs["L2"].label == "L2 6.65 TB/s"


def test_compute_roofs_are_peak_times_achievable_and_merge_equal_rates(h100):
    bf16 = h100.roof("bf16")
    assert bf16.precisions == ("bf16", "fp16")  # one roof for equal rates
    assert bf16.rate == pytest.approx(H100_BF16, rel=1e-4)
    assert bf16.peak == pytest.approx(H100_BF16_PEAK, rel=1e-4)
    assert h100.roof("fp8").rate == pytest.approx(2 * H100_BF16_PEAK * 0.752, rel=1e-4)
    assert h100.roof("int8").label.startswith("int8 1.71 POP/s")  # integer ops, not FLOP
    rates = [c.rate for c in h100.compute]
    assert rates == sorted(rates, reverse=True)


def test_ridge_points_at_achieved_rates(h100):
    assert h100.precision == "bf16"
    assert h100.ridges["HBM3"] == pytest.approx(H100_BF16 / H100_HBM, rel=1e-4)  # 294.7
    assert h100.ridges["HBM3"] == pytest.approx(294.67, rel=1e-4)
    assert h100.ridges["L2"] == pytest.approx(128.70, rel=1e-4)


def test_ridge_points_at_datasheet_rates_match_dse_show(h100):
    """With the fractions taken out, the ridges are `dse show`'s table (derived_figures)."""
    shown = derived_figures(dse.load_hardware("h100-sxm"))["levels"]
    for m, level in zip(h100.memory, shown, strict=True):
        for roof in h100.compute:
            for p in roof.precisions:
                assert roof.peak / m.peak == pytest.approx(level["ridge_flop_per_byte"][p],
                                                           rel=1e-9)


def test_attainable_is_the_lowest_roof(h100):
    assert h100.attainable(10.0) == pytest.approx(10.0 * H100_HBM)  # HBM3 bounds at 10
    assert h100.attainable(1e4) == pytest.approx(H100_BF16, rel=1e-4)  # compute bound
    ridge = h100.ridges["HBM3"]
    assert h100.attainable(ridge) == pytest.approx(H100_BF16, rel=1e-9)


@pytest.mark.parametrize(("chip", "precision", "expected"), [
    ("h100-sxm", None, "bf16"), ("h100-sxm", "w8a16", "fp16"), ("h100-sxm", "fp8", "fp8"),
    ("a100-sxm-80gb", "fp8", "fp16"),  # no fp8 on an A100: runs as fp16
    ("xeon-gold-6242", None, "fp32"),  # no bf16 engine: bf16 work runs at fp32
])
def test_ridge_precision_follows_what_the_matrix_work_runs_at(chip, precision, expected):
    roofs = roofline_plot.compute_roofs(design_batch(dse.load_hardware(chip)))
    assert roofline_plot.ridge_precision(roofs, precision) == expected


def test_gemm_point_by_hand():
    """One 4096^3 bf16 GEMM: 2 x 4096^3 FLOPs over the bytes at its bounding level."""
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload("gemm:4096x4096x4096"))
    data = roofline_plot.roofline_data(ev.batch, ev)
    (p,) = data.ops
    assert p.flops == 2 * 4096**3
    level = ev.level_names.index(p.level)
    assert p.bytes == pytest.approx(float(ev.op_traffic[0, 0, level]))
    assert p.intensity == pytest.approx(2 * 4096**3 / p.bytes)
    assert p.achieved == pytest.approx(2 * 4096**3 / float(ev.ops_time[0, 0]))
    assert p.share == pytest.approx(1.0)
    assert p.achieved <= data.roof("bf16").rate


@pytest.mark.parametrize(("workload", "kwargs"), [
    ("llama2-70b", {"phase": "decode", "chips": 2, "tp": 2}),
    ("llama2-7b", {"phase": "prefill"}),
    ("llama3-8b", {"phase": "serve", "batch": "max"}),
])
def test_no_operator_sits_above_its_roofs(workload, kwargs):
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload(workload), **kwargs)
    data = roofline_plot.roofline_data(ev.batch, ev)
    bandwidth = {m.level: m.bandwidth for m in data.memory}
    assert data.ops
    for p in data.ops:
        assert p.achieved <= p.intensity * bandwidth[p.level] * (1 + 1e-9), p
        assert p.achieved <= data.compute[0].rate, p
        if p.bound in bandwidth:  # memory-bound: placed against its own level
            assert p.level == p.bound
    # collectives have no FLOPs and no traffic through the levels: omitted, by name
    if kwargs.get("tp", 1) > 1:
        assert "o_proj.all_reduce" in data.omitted
    assert sum(p.time_s for p in data.ops) <= float(np.sum(ev.ops_count * ev.ops_time))


def _op(name, intensity, achieved, time_s, share):
    return roofline_plot.OpPoint(name=name, count=1.0, flops=achieved * time_s, level="HBM3",
                                 bytes=achieved * time_s / intensity, intensity=intensity,
                                 achieved=achieved, time_s=time_s, share=share, bound="HBM3")


def test_label_groups_merge_operators_at_one_point():
    ops = (_op("a", 2.0, 1e12, 3.0, 0.3), _op("b", 2.0, 1.001e12, 3.0, 0.3),
           _op("c", 50.0, 1e13, 4.0, 0.4))
    groups = roofline_plot.label_groups(ops)
    assert [text for _, text in groups] == ["a, b (60%)", "c (40%)"]
    assert len(roofline_plot.label_groups(ops, top=1)) == 1


# ---- label placement and output files -----------------------------------------------------

def test_spread_keeps_order_and_gap():
    out = spread([0.0, 0.05, 0.1, 5.0], 0.1)
    assert out == sorted(out)
    assert all(b - a >= 0.1 - 1e-9 for a, b in itertools.pairwise(out))
    assert out[3] == 5.0  # far from the others: not moved
    assert spread([1.0, 1.0], 1.0) == [0.5, 1.5]  # moved symmetrically


def test_place_labels_never_overlap_and_stay_in_the_frame():
    anchors = [(50.0, 50.0)] * 4
    spots = place_labels(anchors, [(30.0, 10.0)] * 4, occupied=[(45, 45, 55, 55)],
                         frame=(0, 0, 200, 200))
    boxes = [(x, y, x + 30, y + 10) for x, y in spots]

    def overlap(a, b):
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    for i, a in enumerate(boxes):
        assert min(a) >= 0 and max(a) <= 200  # inside the frame
        assert not overlap(a, (45, 45, 55, 55))
        assert not any(overlap(a, b) for b in boxes[i + 1:])
    assert place_labels([(5.0, 5.0)], [(50.0, 50.0)], frame=(0, 0, 20, 20)) == [None]


def test_image_format_and_default_names(tmp_path):
    assert image_format(tmp_path / "a.PNG") == "png"
    assert image_format(tmp_path / "a.svg") == "svg"
    for bad in ("a.jpg", "a"):
        with pytest.raises(DseError, match="--out"):
            image_format(tmp_path / bad)
    with pytest.raises(DseError, match="does not exist"):
        image_format(tmp_path / "nowhere" / "a.png")
    assert default_out("roofline", "h100-sxm") == Path("roofline-h100-sxm.png")
    assert default_out("roofline", "h100-sxm", "gemm:4096x4096x4096") == \
        Path("roofline-h100-sxm-gemm-4096x4096x4096.png")
    assert default_out("breakdown", "chips/my-chip.yaml", None) == \
        Path("breakdown-my-chip.png")


# ---- breakdown data -----------------------------------------------------------------------

def test_breakdown_totals_fold_and_shares():
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload("llama2-70b"),
                      phase="decode", chips=2, tp=2)
    total = float(np.sum(ev.ops_count[0] * ev.ops_time[0]))
    data = breakdown_plot.breakdown_data(ev, top=5)
    assert data.total_s == pytest.approx(total)
    assert len(data.ops) == 6 and data.ops["bound"].iloc[-1] == breakdown_plot.OTHER
    assert data.ops["name"].iloc[-1] == f"{len(ev.ops_name) - 5} other operators"
    assert data.ops["time_s"].sum() == pytest.approx(total)
    assert list(data.ops["time_s"].iloc[:5]) == sorted(data.ops["time_s"].iloc[:5],
                                                       reverse=True)
    assert data.by_bound["share"].sum() == pytest.approx(1.0)
    shares = dict(zip(data.by_bound["bound"], data.by_bound["share"], strict=True))
    assert shares["HBM3"] > 0.5  # batch-1 decode is bound by weight streaming
    assert breakdown_plot.share_text(0.0004) == "<0.1%"


# ---- the memory wall ----------------------------------------------------------------------

# The paper's rates come from the same digitized points, so the fits land within a few
# percent (3.03x, 1.59x, 1.42x); the tolerance leaves room for a re-digitization.
TOLERANCE = 0.05


def test_fit_growth_recovers_an_exact_exponential():
    years = np.array([2000.0, 2003.5, 2010.0])
    fit = trends_plot.fit_growth(years, 5.0 * 3.0 ** ((years - 2000.0) / 2.0))
    assert fit.per_two_years == pytest.approx(3.0, rel=1e-12)
    assert fit.at(2002.0) == pytest.approx(15.0)
    with pytest.raises(DseError):
        trends_plot.fit_growth(np.array([2000.0]), np.array([1.0]))


@pytest.mark.parametrize(("key", "paper"), [
    ("hw_peak_flops", 3.0), ("dram_bandwidth", 1.6), ("interconnect_bandwidth", 1.4)])
def test_figure_1_growth_rates_match_the_paper(key, paper):
    data = trends_plot.hardware_trends()
    s = data.by_key(key)
    assert s.stated == paper  # read from scaling_rates_stated.csv
    assert s.fit.per_two_years == pytest.approx(paper, rel=TOLERANCE)
    assert s.value[np.argmin(s.year)] == 1.0  # normalized to its first device


def test_model_size_and_memory_rates():
    data = trends_plot.model_trends()
    assert data.by_key("transformer_model_params").fit.per_two_years == \
        pytest.approx(410.0, rel=TOLERANCE)
    memory = data.by_key("ai_hw_memory_series")
    assert memory.fit.per_two_years == pytest.approx(2.0, rel=0.10)  # 1.86x
    # the paper plots GB / 6: P100's 12 GB is 2e9 parameters
    assert memory.value[0] * trends_plot.BYTES_PER_PARAM / 1e9 == pytest.approx(12.0)
    assert data.by_key("cv_model_params").fit is None


def test_trends_data_ships_inside_the_package():
    folder = Path(trends_plot.__file__).resolve().parent.parent / "data" / "memory_wall"
    for name in ("LICENSE", "README.md", "fig_hw_scaling_digitized.csv",
                 "fig_model_size_scaling_digitized.csv", "scaling_rates_stated.csv"):
        assert (folder / name).is_file(), name
    assert "a1f1d676a6e54413b57a7f89374b0dddeab5f356" in (folder / "README.md").read_text()


# ---- validation plot data -----------------------------------------------------------------

def test_validation_panels_by_phase_and_metric(tmp_path):
    rows = [Row("M1", "gemm", "achieved_flop_per_s", 5e14, "h100-sxm", "gemm:1x1x1", 5.5e14,
                0.1),
            Row("M2", "gemm", "achieved_flop_per_s", 2e14, "a100-sxm-80gb", "gemm:1x1x1",
                1.9e14, -0.05),
            Row("M3", "prefill", "ttft_s", 0.1, "h100-sxm", "llama2-7b", 0.09, -0.1),
            Row("M4", "decode", "decode_tokens_per_s", 50.0, "h100-sxm", "llama2-7b",
                55.0, 0.1),
            Row("M5", "training", "mfu", 0.5, "h100-sxm", "gpt3-175b", skipped="not yet")]
    data = validation_view.plot_data(rows)
    assert [(p.phase, p.metric) for p in data.panels] == [
        ("gemm", "achieved_flop_per_s"), ("prefill", "ttft_s"),
        ("decode", "decode_tokens_per_s")]
    assert [p.unit for p in data.panels] == ["FLOP/s", "s", "tokens/s"]
    assert data.hardware == ("h100-sxm", "a100-sxm-80gb")
    assert data.panels[0].points[1] == ("M2", "a100-sxm-80gb", 2e14, 1.9e14)
    for ext in ("png", "svg", "pdf"):
        validation_view.draw(data, tmp_path / f"v.{ext}")
        assert (tmp_path / f"v.{ext}").stat().st_size > 0
    with pytest.raises(DseError, match="--plot"):
        validation_view.draw(data, tmp_path / "v.gif")


# ---- the command line ---------------------------------------------------------------------

def run(*args: str):
    return runner.invoke(app, ["plot", *args])


@pytest.mark.parametrize(("args", "name", "printed"), [
    (("roofline", "h100-sxm"), "r.png", "ridge points at bf16: L1 27.7, L2 129, HBM3 295"),
    (("roofline", "h100-sxm", "llama2-70b", "--phase", "decode", "--chips", "2", "--tp", "2"),
     "r.svg", "operators placed"),
    (("roofline", "gh200", "gemm:4096x4096x4096", "--set", "memory.HBM3e.bandwidth=3TB/s"),
     "r.pdf", "1 operators placed"),
    (("breakdown", "h100-sxm", "llama2-7b", "--phase", "prefill"), "b.pdf",
     "step time per chip"),
    (("breakdown", "a100-sxm-80gb", "llama2-7b", "--phase", "decode", "--top", "5"), "b.png",
     "step time per chip"),
    (("trends",), "t.png", "Peak hardware FLOPS: 3.03x per 2 years (paper: 3.0x)"),
    (("trends", "--models"), "t.svg", "Transformer models: 413x per 2 years (paper: 410x)"),
])
def test_plots_are_written_in_the_format_of_the_extension(tmp_path, args, name, printed):
    out = tmp_path / name
    result = run(*args, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1000
    head = out.read_bytes()[:8]
    assert {"png": head.startswith(b"\x89PNG"), "svg": b"<?xml" in head,
            "pdf": head.startswith(b"%PDF")}[out.suffix[1:]]
    assert printed in result.stdout
    assert result.stdout.strip().splitlines()[-1] == f"plot written to {out}"


def test_default_output_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run("roofline", "h100-sxm").exit_code == 0
    assert run("breakdown", "h100-sxm", "gemm:1024x1024x1024").exit_code == 0
    assert run("trends").exit_code == 0
    assert run("trends", "--models").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "breakdown-h100-sxm-gemm-1024x1024x1024.png", "roofline-h100-sxm.png",
        "trends-models.png", "trends.png"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (("roofline", "h100-sxn"), 2, "unknown hardware 'h100-sxn'"),
    (("roofline", "h100-sxm", "--out", "r.jpg"), 2, "--out r.jpg: expected a .png, .svg or "
                                                    ".pdf file"),
    (("breakdown", "h100-sxm", "llama2-7b", "--out", "b"), 2, "--out b:"),
    (("trends", "--out", "t.gif"), 2, "--out t.gif"),
    (("roofline", "h100-sxm", "--phase", "decode"), 2, "scenario options need a WORKLOAD"),
    (("breakdown", "h100-sxm", "llama2-7b", "--batch", "1,2"), 2, "--batch: a plot draws one"),
    (("breakdown", "h100-sxm", "llama2-7b", "--set", "compute.units=100,120"), 2,
     "a plot draws one design"),
    (("breakdown", "h100-sxm", "nomodel"), 2, "nomodel"),
    (("roofline", "h100-sxm", "llama2-70b", "--phase", "prefill"), 3, "cannot run"),
])
def test_bad_input_is_one_line(tmp_path, monkeypatch, args, code, message):
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output
    assert not list(tmp_path.iterdir())  # nothing written


def test_validate_plot_rejects_an_unknown_format(tmp_path):
    result = runner.invoke(app, ["validate", "--plot", str(tmp_path / "v.jpg")])
    assert result.exit_code == 2
    assert "--plot" in result.stderr and len(result.stderr.strip().splitlines()) == 1
