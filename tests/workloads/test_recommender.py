"""Recommender workloads: the MLPerf DLRM-DCNv2 figures, the lowering by hand, where the
gathers find their rows (skew, caches, tiers), monotonicity, and bad files."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.workloads import lower, resolve_scenario
from dse.workloads.recommender import dense_parameters
from dse.workloads.sharding import PLANNER_GRANULARITY, row_bytes


def _eval(hw: str, wl: str, **kw):
    from dse.spec.load import load_design

    spec, tech, _ = load_design(hw)
    return dse.evaluate(spec, dse.load_workload(wl), tech=tech, reticle=False, **kw)


def test_dlrm_dcnv2_matches_the_mlperf_configuration() -> None:
    """mlcommons/training recommendation_v2/torchrec_dlrm: 26 tables, 204,184,588 rows of
    dim 128, 214 lookups per pair, 16,044,545 dense parameters (bottom 171,392, cross
    10,627,200, top 5,245,953)."""
    wl = dse.load_workload("dlrm-dcnv2")
    assert wl.n_tables == 26
    assert wl.embedding_rows() == 204_184_588
    assert wl.embedding_parameters() == 26_135_627_264
    assert sum(t.count * t.lookups for t in wl.tables) == 214
    assert dense_parameters(wl) == 16_044_545


def test_inference_sample_is_a_query_of_270_pairs() -> None:
    wl = dse.load_workload("dlrm-dcnv2")
    _, sc = resolve_scenario(wl, "mlperf-offline")
    assert sc.pairs == 270
    table = lower(wl, sc.model_copy(update={"batch": 10}))
    gather = list(table.name).index("gather.t20")
    # 10 samples x 270 pairs x 100 lookups x 128 int8 bytes
    assert table.read[gather, list(_classes()).index("embeddings")] == \
        pytest.approx(10 * 270 * 100 * 128)
    # forward FLOPs per pair ~32.1 MFLOP (cross 21.2, top 10.5, bottom 0.34; gathers' adds)
    assert table.total_flops / 2700 == pytest.approx(32.1e6, rel=0.01)


def _classes():
    from dse.workloads.optable import TENSOR_CLASSES

    return TENSOR_CLASSES


def test_the_planner_costs_rows_in_64_byte_accesses() -> None:
    assert PLANNER_GRANULARITY == 64
    assert row_bytes(16, 1.0) == 64  # a 16-byte row moves a whole burst
    assert row_bytes(128, 1.0) == 128
    assert row_bytes(100, 4.0) == 448  # 400 B -> 7 bursts


def test_gathers_are_served_by_the_levels_that_hold_the_hot_rows() -> None:
    """H100: the tables live in HBM, the L2 catches the hottest rows; every gather's shares
    sum to 1 and the small tables are served mostly by the L2."""
    ev = _eval("h100-sxm", "dlrm-dcnv2", batch=200)
    names = list(ev.ops_name)
    levels = list(ev.level_names)
    t20 = ev.op_traffic[0, names.index("gather.t20")]
    assert t20[levels.index("L2")] > t20[levels.index("HBM3")] > 0
    assert ev.ops_bound[0, names.index("gather.t20")] == "HBM3"


def test_gh200_with_less_hbm_spills_cold_rows_to_lpddr_and_stays_feasible() -> None:
    ev = _eval("gh200", "dlrm-dcnv2", scenario="mlperf-offline-fp32", batch=2222,
               overrides={"memory.HBM3e.capacity": ["96 GiB", "144 GiB"]})
    assert ev.feasible.all()
    lp = list(ev.level_names).index("LPDDR5X")
    assert ev.memory_bytes[0, lp] > 30e9 and ev.memory_bytes[1, lp] == 0
    # the cold rows serve few lookups: the spill costs little
    spilled, held = ev.metrics["samples_per_s"]
    assert 0.9 * held < spilled <= held


@pytest.mark.parametrize("path,values", [
    ("memory.L2.capacity", ["25 MiB", "50 MiB", "200 MiB", "800 MiB"]),
    ("memory.HBM3.bandwidth", ["2 TB/s", "3.35 TB/s", "5 TB/s"]),
])
def test_more_cache_or_bandwidth_is_never_slower(path: str, values: list[str]) -> None:
    ev = _eval("h100-sxm", "dlrm-dcnv2", batch=500, overrides={path: values})
    thr = ev.metrics["samples_per_s"]
    assert np.all(np.diff(thr) >= -1e-9 * thr[:-1])


def test_flatter_skew_is_never_faster(tmp_path: Path) -> None:
    base = (Path(dse.__file__).parent.parent / "workloads" / "rm2.yaml")
    if not base.exists():
        from dse.spec.load import library_dir

        base = library_dir("workload") / "rm2.yaml"
    out = []
    for alpha in (1.2, 0.9, 0.5, 0.0):
        p = tmp_path / f"rm2-{alpha}.yaml"
        p.write_text(f"base: {base}\nname: rm2-{alpha}\nsource: test\n"
                     f"skew: {{alpha: {alpha}}}\n")
        ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload(p), batch=64)
        out.append(float(ev.metrics["samples_per_s"][0]))
    assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(out)), out


@pytest.mark.parametrize("body,where", [
    ("tables: []", "tables"),
    ("tables:\n  - {name: a, rows: 0, dim: 8, lookups: 1}", "tables[0].rows"),
    ("skew: {alpha: 1.0, curve: [{rows: 0.1, hits: 0.5}]}", "skew"),
    ("interaction: {kind: dott}", "interaction.kind"),
])
def test_bad_recommender_files_name_file_line_and_key(tmp_path: Path, body: str,
                                                      where: str) -> None:
    good = {"name": "r", "kind": "recommender", "source": "t", "dense_features": 4,
            "skew": "{alpha: 1.0}", "bottom_mlp": "[8]", "interaction": "{kind: dot}",
            "top_mlp": "[4, 1]", "tables": "\n  - {name: a, rows: 100, dim: 8, lookups: 1}",
            "scenarios": "\n  s: {phase: inference, batch: 4}"}
    key = body.split(":")[0]
    good[key] = body.split(":", 1)[1].strip() if not body.startswith(key + ":\n") else \
        body.split(":", 1)[1]
    text = "\n".join(f"{k}: {v}" for k, v in good.items()) + "\n"
    path = tmp_path / "r.yaml"
    path.write_text(text)
    r = CliRunner().invoke(app, ["check", str(path)])
    assert r.exit_code == 2, r.output
    line = r.output.strip().splitlines()[0]
    assert line.startswith(f"{path}:") and f": {where}" in line, line


@pytest.mark.parametrize("sharding", ["auto", "row", "column"])
def test_sharding_plan_conserves_bytes_and_lookups(sharding: str) -> None:
    """Every piece together holds each table's rows x columns once and serves each of its
    lookups x columns once, whichever way the heavy tables are cut."""
    from dse.workloads.sharding import plan_shards

    wl = dse.load_workload("dlrm-dcnv2")
    for chips in (2, 3, 8, 16):
        for eb in (1.0, 4.0):
            plan = plan_shards(wl, chips, eb, sharding)
            assert len(plan) == chips
            cells = sum(s.rows(wl) * s.dim(wl) for p in plan for s in p)
            looked = sum(s.lookups(wl) * s.dim(wl) for p in plan for s in p)
            assert cells == pytest.approx(sum(t.count * t.rows * t.dim for t in wl.tables))
            assert looked == pytest.approx(214 * 128)
            # the heaviest table (t20: 100 of 214 lookups, 47%) is split once it is heavier
            # than a chip's fair share (3 chips and more), not left on one chip
            cuts = {s.cut for p in plan for s in p if wl.tables[s.table].name == "t20"
                    and s.parts > 1}
            if chips >= 3:
                assert len(cuts) == 1
                # auto: columns while a slice keeps 64-byte rows (int8 128 B in 2, fp32
                # 512 B in up to 8)
                parts = max(s.parts for p in plan for s in p if wl.tables[s.table].name == "t20")
                whole = 128 * eb / parts >= 64
                want = {"auto": "column" if whole else "row", "row": "row",
                        "column": "column"}[sharding]
                assert cuts == {want}, (chips, eb)


def test_all_to_all_volume_by_hand(tmp_path: Path) -> None:
    """Two tables of equal load on two chips: each chip holds one and pools its rows for
    both chips' pairs (2 x 4 samples x 3 pairs x dim 8 x 2 bytes = 384 B), and sends the
    other chip its half: an all-to-all over 2 chips moves (2 - 1) / 2 of it."""
    p = tmp_path / "r.yaml"
    p.write_text("name: r\nkind: recommender\nsource: t\ndense_features: 4\n"
                 "skew: {alpha: 1.0}\nbottom_mlp: [8]\ninteraction: {kind: dot}\n"
                 "top_mlp: [4, 1]\ntables:\n"
                 "  - {name: a, rows: 1000, dim: 8, lookups: 2}\n"
                 "  - {name: b, rows: 1000, dim: 8, lookups: 2}\n"
                 "scenarios:\n  s: {phase: inference, batch: 8, precision: fp16, pairs: 3}\n")
    wl = dse.load_workload(p)
    _, sc = resolve_scenario(wl, "s")
    table = lower(wl, sc.model_copy(update={"batch": 4}), chips=2)
    assert [n for n in table.name if n.startswith("gather")] in (["gather.a"], ["gather.b"])
    assert table.facts.exchange == pytest.approx(2 * 4 * 3 * 8 * 2)
    from dse.model.execution import Execution
    from dse.model.parallel import COLLECTIVES, chip_ops

    _, coll = chip_ops(table, Execution(chips=2))
    (i,) = [k for k, n in enumerate(coll.name) if n == "embeddings.all_to_all"]
    steps, sent = COLLECTIVES[coll.kind[i]](int(coll.group[i]), coll.nbytes[i])
    assert (steps, float(sent)) == (1, pytest.approx(192.0))


def test_column_cut_pools_each_slice_once(tmp_path: Path) -> None:
    """One table of dim 64 (fp32: 256 B rows) with all the lookups, on 4 chips: auto cuts
    it column-wise in 4 slices of 16 columns (64 B); each chip gathers every pair's lookups
    of its slice and makes a quarter of every pooled row, so the chips' pooled bytes add
    up to one pooled row per pair. Cut row-wise instead, each piece makes partial sums of
    whole pooled rows: four times the bytes to exchange."""
    p = tmp_path / "c.yaml"
    p.write_text("name: c\nkind: recommender\nsource: t\ndense_features: 4\n"
                 "skew: {alpha: 1.0}\nbottom_mlp: [64]\ninteraction: {kind: cat}\n"
                 "top_mlp: [4, 1]\ntables:\n"
                 "  - {name: big, rows: 100000, dim: 64, lookups: 20}\n"
                 "scenarios:\n  s: {phase: inference, batch: 8, precision: fp32}\n")
    wl = dse.load_workload(p)
    _, sc = resolve_scenario(wl, "s")
    out = {}
    for cut in ("auto", "row"):
        table = lower(wl, sc.model_copy(update={"batch": 2, "sharding": cut}), chips=4)
        (g,) = [n for n in table.name if n.startswith("gather")]
        out[cut] = (g, table.facts.exchange,
                    table.read[list(table.name).index(g), list(_classes()).index("embeddings")])
    assert out["auto"][0] == "gather.big.cols4" and out["row"][0] == "gather.big.part4"
    pairs = 2 * 4  # 2 per chip, every chip's pairs through this chip's piece
    assert out["auto"][1] == pytest.approx(pairs * 16 * 4)
    assert out["row"][1] == pytest.approx(pairs * 64 * 4)
    # the same bytes gathered: every lookup x a quarter row, or a quarter of the lookups
    assert out["auto"][2] == pytest.approx(pairs * 20 * 16 * 4) == out["row"][2]


def test_tables_too_big_for_one_chip_fit_sharded() -> None:
    """fp32 DLRM-DCNv2 (104.5 GB of tables) does not fit one H100 (80 GiB); sharded over
    eight, each holds about an eighth and the pooled rows cross the NVLink switch."""
    one = _eval("h100-sxm", "dlrm-dcnv2", scenario="mlperf-offline-fp32")
    assert not one.feasible[0] and "embeddings 104.5 GB" in one.reason[0]
    eight = _eval("h100-sxm", "dlrm-dcnv2", scenario="mlperf-offline-fp32", chips=8)
    assert eight.feasible[0]
    names = list(eight.ops_name)
    assert eight.ops_bound[0, names.index("embeddings.all_to_all")] == "interconnect"
    hbm = list(eight.level_names).index("HBM3")
    assert eight.memory_bytes[0, hbm] < 20e9


def test_training_adds_the_backward_and_the_optimizer() -> None:
    """Training: every dense GEMM gets a backward of twice its FLOPs, every gather an update
    that reads and writes the looked-up rows and their Adagrad state (one fp32 per element),
    the tables' footprint carries the state, and the evaluation passes the rules put in
    the timed run repeat the forward operators."""
    wl = dse.load_workload("dlrm-dcnv2")
    _, sc = resolve_scenario(wl, "training")
    table = lower(wl, sc.model_copy(update={"batch": 1000, "evaluation": None}))
    names = list(table.name)
    fwd = table.flops[names.index("top_mlp.0")]
    assert table.flops[names.index("top_mlp.0.backward")] == pytest.approx(2 * fwd)
    emb = list(_classes()).index("embeddings")
    upd = names.index("gather.t20.update")
    # 1000 pairs x 100 lookups x (512 B fp32 row + 512 B Adagrad state), read and written,
    # stated per lookup (the model keeps the distinct rows' share: tests/model/test_gathers)
    assert table.read[upd, emb] == pytest.approx(1000 * 100 * 1024)
    assert table.facts.gathers["gather.t20.update"].distinct == pytest.approx(1000 * 100)
    assert table.written[upd, emb] == pytest.approx(1000 * 100 * 1024)
    assert table.facts.resident["embeddings"] == pytest.approx(2 * 104_542_509_056)
    with_eval = lower(wl, sc.model_copy(update={"batch": 1000}))
    r = 89_137_319 / 209_737_728
    assert with_eval.count[names.index("top_mlp.0")] == pytest.approx(1 + r)
    assert with_eval.count[names.index("top_mlp.0.backward")] == pytest.approx(1.0)


def test_training_on_eight_chips_runs_and_names_its_bounds() -> None:
    ev = _eval("h100-sxm", "dlrm-dcnv2", phase="training", chips=8)
    assert ev.feasible[0]
    names = list(ev.ops_name)
    assert ev.ops_bound[0, names.index("gradients.all_reduce")] == "interconnect"
    assert ev.ops_bound[0, names.index("gather.t20.cols4.update")] == "HBM3"


def test_a_derived_file_replaces_a_measured_curve_by_an_exponent(tmp_path: Path) -> None:
    """t20 states its skew as a measured curve; a derived file that gives it an exponent
    replaces the curve (and the curve's source) instead of failing on both at once, and a
    uniform t20 is slower."""
    p = tmp_path / "flat.yaml"
    p.write_text("base: dlrm-dcnv2\nname: flat\nsource: what-if\ntables:\n"
                 "  - {name: t20, rows: 40000000, dim: 128, lookups: 100, skew: {alpha: 0.0}}\n")
    wl = dse.load_workload(p)
    t20 = next(t for t in wl.tables if t.name == "t20")
    assert t20.skew is not None and t20.skew.alpha == 0.0
    assert t20.skew.curve is None and t20.skew.source is None
    hw = dse.load_hardware("h100-sxm")
    flat = dse.evaluate(hw, wl).metrics["samples_per_s"][0]
    base = dse.evaluate(hw, dse.load_workload("dlrm-dcnv2")).metrics["samples_per_s"][0]
    assert flat < base
