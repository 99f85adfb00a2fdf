"""Embedding gathers at each level: access granularity, the gather share of peak bandwidth,
and the distinct rows a sparse update touches (dse.model.distinct)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dse
from dse.model.distinct import distinct_rows, distinct_share
from dse.model.stages import granularity_factor
from dse.spec.hardware import GATHER_TO_STREAM


def test_granularity_factor_by_hand() -> None:
    g = np.array([[1.0, 32.0, 64.0]])
    # a 16-byte row: as is from a scratchpad, a 32-byte sector, a 64-byte burst
    assert granularity_factor(g, (16.0,)).tolist() == [[1.0, 2.0, 4.0]]
    # a 512-byte row and its 4-byte row-wise Adagrad state, stored apart: 512 + 32 at 32 B
    assert granularity_factor(g, (512.0, 4.0))[0, 1] == pytest.approx(544 / 516)
    assert granularity_factor(g, (512.0, 4.0))[0, 2] == pytest.approx(576 / 516)
    assert granularity_factor(g, (256.0,)).tolist() == [[1.0, 1.0, 1.0]]


def test_level_defaults_name_their_interface_or_kind() -> None:
    h100 = dse.load_hardware("h100-sxm")
    hbm, l2 = _level(h100, "HBM3"), _level(h100, "L2")
    assert hbm.gather_granularity() == 32  # HBM3 pseudo-channel burst (JESD238)
    assert l2.gather_granularity() == 32  # the spec file's NVIDIA sector
    # 2646 GB/s of gathers (FBGEMM #3993) over 2903 GB/s of copies on the same chip
    assert hbm.gather_fraction() == pytest.approx(0.867 * 2646 / 2903)
    assert hbm.gather_fraction() * 3.35e12 == pytest.approx(2646e9, rel=0.01)
    assert l2.gather_fraction() == 1.0  # caches gather at their streaming rate
    xeon = dse.load_hardware("xeon-gold-6242")
    ddr = next(lv for lv in xeon.memory if lv.kind == "dram")
    assert ddr.gather_granularity() == 64  # DDR4 64-bit x BL8
    assert ddr.gather_fraction() == pytest.approx(
        (ddr.achievable.fraction if ddr.achievable else 1.0) * GATHER_TO_STREAM)


def _level(spec, name: str):
    return next(lv for lv in spec.memory if lv.name == name)


def _table(tmp_path: Path, dim: int, rows: float = 4e8, alpha: float = 0.0) -> Path:
    p = tmp_path / f"one-{dim}.yaml"
    p.write_text(
        "name: one\nkind: recommender\nsource: test\ndense_features: 0\n"
        f"skew: {{alpha: {alpha}}}\ninteraction: {{kind: cat}}\ntop_mlp: [1]\n"
        f"tables:\n  - {{name: t, rows: {int(rows)}, dim: {dim}, lookups: 50}}\n"
        "scenarios:\n  s: {phase: inference, batch: 4096, precision: fp16}\n")
    return p


def test_small_rows_move_whole_sectors(tmp_path: Path) -> None:
    """A uniformly accessed 400M-row table barely hits the 50 MiB L2: a 16-byte row costs
    a 32-byte HBM3 access, a 32-byte row exactly one."""
    hw = dse.load_hardware("h100-sxm")
    moved = {}
    for dim in (8, 16):
        ev = dse.evaluate(hw, dse.load_workload(_table(tmp_path, dim)))
        i = list(ev.ops_name).index("gather.t")
        hbm = list(ev.level_names).index("HBM3")
        moved[dim] = ev.op_traffic[0, i, hbm] / (4096 * 50 * dim * 2)
    assert moved[8] == pytest.approx(2.0, rel=0.01)
    assert moved[16] == pytest.approx(1.0, rel=0.01)


def test_gathers_run_at_the_gather_share_of_peak(tmp_path: Path) -> None:
    """Two gather fractions differ by HBM bytes / peak x (1/f1 - 1/f2) in the gather's time
    (the L2 made fast enough that the on-die term cannot blur the difference)."""
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload(_table(tmp_path, 128)),
                      overrides={"memory.HBM3.gather.fraction": [0.5, 0.79],
                                 "memory.L2.bandwidth": "1000 TB/s"})
    i = list(ev.ops_name).index("gather.t")
    hbm = list(ev.level_names).index("HBM3")
    assert list(ev.ops_bound[:, i]) == ["HBM3", "HBM3"]
    moved = ev.op_traffic[0, i, hbm]
    assert ev.ops_time[0, i] - ev.ops_time[1, i] == pytest.approx(
        moved / 3.35e12 * (1 / 0.5 - 1 / 0.79), rel=1e-2)


def test_a_higher_gather_fraction_is_never_slower(tmp_path: Path) -> None:
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload(_table(tmp_path, 64)),
                      overrides={"memory.HBM3.gather.fraction": [0.3, 0.5, 0.79, 1.0]})
    thr = ev.metrics["samples_per_s"]
    assert np.all(np.diff(thr) > 0)


@pytest.mark.parametrize("rows,alpha,draws", [
    (1000, 1.0, 500), (10_000, 0.8, 20_000), (100_000, 1.2, 100_000), (50_000, 0.0, 30_000),
])
def test_distinct_rows_match_the_exact_sums(rows: int, alpha: float, draws: int) -> None:
    p = np.arange(1, rows + 1, dtype=float) ** -alpha
    p /= p.sum()
    touched = 1 - (1 - p) ** draws
    assert distinct_rows(rows, alpha, draws) == pytest.approx(touched.sum(), rel=1e-3)
    k = rows // 10
    assert distinct_share(rows, alpha, draws, k) == pytest.approx(
        touched[:k].sum() / touched.sum(), abs=1e-3)


def test_distinct_rows_match_a_sampled_batch() -> None:
    rng = np.random.default_rng(7)
    rows, alpha, draws = 200_000, 1.05, 300_000
    p = np.arange(1, rows + 1, dtype=float) ** -alpha
    p /= p.sum()
    seen = [np.unique(rng.choice(rows, size=draws, p=p)).size for _ in range(3)]
    assert distinct_rows(rows, alpha, draws) == pytest.approx(np.mean(seen), rel=0.01)


def test_the_sparse_update_touches_each_distinct_row_once() -> None:
    """DLRM-DCNv2 training on 8 H100s: t20 (fp32, 512-byte rows) is cut in 4 column slices
    of 32 columns; its update moves distinct / lookups of the per-lookup read-modify-write
    bytes (128 B of row and 128 B of Adagrad state, each read and written)."""
    wl = dse.load_workload("dlrm-dcnv2")
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), wl, phase="training", batch=4096,
                      chips=8)
    names = list(ev.ops_name)
    i = names.index("gather.t20.cols4.update")
    moved = ev.op_traffic[0, i, list(ev.level_names).index("HBM3")]
    looked = 4096 * 100  # the 4,096 pairs of all 8 chips x 100 lookups, every slice
    alpha = _facts(wl)["gather.t20.cols4"].alpha
    share = distinct_rows(40e6, alpha, looked) / looked
    assert 0.5 < share < 0.95
    assert moved == pytest.approx(looked * share * 256 * 2, rel=1e-6)


def _facts(wl):
    from dse.workloads import lower, resolve_scenario

    _, sc = resolve_scenario(wl, "training")
    return lower(wl, sc.model_copy(update={"batch": 512}), chips=8).facts.gathers
