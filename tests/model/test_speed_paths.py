"""Regressions of issue 26's two speed fixes: the reason a design does not fit kept as data
and worded only when read (the text unchanged), and DLRM training's distinct-row sums over
one table's popularity nodes, not one set per design (the metrics unchanged, bit for bit)."""

import importlib
import pickle

import numpy as np
import pytest

import dse
from dse.model.reasons import Reasons
from dse.spec.load import hardware_with_technology

DISTINCT = importlib.import_module("dse.model.distinct")
STAGES = importlib.import_module("dse.model.stages")

LLAMA70 = dse.load_workload("llama2-70b")
H100 = dse.load_hardware("h100-sxm")

# The texts the code before the change wrote for these designs (hard-coded from its output).
FIT = ("weights 68.98 GB + KV cache 180 MiB + workspace 84 KiB per chip exceed the {} of "
       "memory that can hold them ({} short)")
MAX = ("not even one sequence fits: weights 138 GB + KV cache 400 MiB + workspace 16 MiB per "
       "chip exceed the {} of memory that can hold them ({} short)")
TDP = "{} W even at the lowest clock (10% of the rated one) exceeds the 60 W TDP (a 757 mm2 die)"


def _no_wording(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the designs whose fit reason is worded (the word function of stages)."""
    worded: list[int] = []
    real = STAGES.fit_word

    def spy(*args):
        word = real(*args)
        return lambda i: worded.append(i) or word(i)

    monkeypatch.setattr(STAGES, "fit_word", spy)
    monkeypatch.setattr(importlib.import_module("dse.model.passes"), "fit_word", spy)
    return worded


def test_decode_reasons_are_the_old_text_and_worded_only_when_read(monkeypatch) -> None:
    worded = _no_wording(monkeypatch)
    ov = {"compute.units": np.array([132, 66, 200, 132]),
          "memory.HBM3.stacks": np.array([3, 5, 4, 1])}
    ev = dse.evaluate(H100, LLAMA70, phase="decode", batch=1, seq_in=1024, seq_out=128,
                      precision="bf16", chips=2, tp=2, overrides=ov)
    assert ev.feasible.tolist() == [False, True, False, False]
    assert worded == []  # evaluating worded nothing
    assert ev.reason[3] == FIT.format("16 GiB", "51.99 GB")
    assert worded == [3]  # reading one design words that one
    assert np.asarray(ev.reason).tolist() == [
        FIT.format("48 GiB", "17.63 GB"), "", FIT.format("64 GiB", "446 MB"),
        FIT.format("16 GiB", "51.99 GB")]
    assert (ev.reason == "").tolist() == [False, True, False, False]
    assert ev.columns()["reason"].tolist() == list(ev.reason)
    assert pickle.loads(pickle.dumps(ev.reason)).tolist() == ev.reason.tolist()


def test_serve_max_and_power_reasons_are_the_old_text() -> None:
    ev = dse.evaluate(H100, LLAMA70, phase="serve", batch="max", seq_in=1024, seq_out=128,
                      precision="bf16", chips=1, overrides={"memory.HBM3.stacks": [1, 5]})
    assert ev.reason.tolist() == [MAX.format("16 GiB", "121.2 GB"),
                                  MAX.format("80 GiB", "52.49 GB")]
    hw, tech = hardware_with_technology("h100-sxm")
    ov = {"memory.HBM3.stacks": np.array([1, 5]), "tdp": np.array([700.0, 60.0])}
    ev = dse.evaluate(hw, LLAMA70, phase="serve", batch="max", seq_in=1024, seq_out=128,
                      tech=tech, overrides=ov)
    assert ev.reason.tolist() == [MAX.format("16 GiB", "121.2 GB"),
                                  MAX.format("80 GiB", "52.49 GB") + "; " + TDP.format(87)]
    ev = dse.evaluate(hw, dse.load_workload("llama2-7b"), phase="decode", batch=4, seq_in=128,
                      tech=tech, area_budget=600, overrides=ov)
    assert ev.reason.tolist() == [
        "a die area of 674 mm2 exceeds the area budget of 600 mm2",
        "a die area of 757 mm2 exceeds the area budget of 600 mm2; " + TDP.format(86)]


def test_serve_engine_limit_reason_is_the_old_text() -> None:
    ev = dse.evaluate(H100, dse.load_workload("llama3-8b"), phase="serve", batch=500,
                      seq_in=1024, seq_out=128, precision="bf16",
                      overrides={"memory.HBM3.stacks": np.array([1, 5])})
    assert ev.reason.tolist() == [
        "weights 16.06 GB + KV cache 78.12 GiB + workspace 386.7 MB per chip exceed the 16 GiB "
        "of memory that can hold them (83.15 GB short)",
        "weights 16.06 GB + KV cache 78.12 GiB + workspace 386.7 MB per chip exceed the 80 GiB "
        "of memory that can hold them (14.43 GB short)"]


def test_chunked_reasons_join_in_order(monkeypatch) -> None:
    """Several chunks: each chunk's reasons at its designs."""
    monkeypatch.setattr(importlib.import_module("dse.model.chunks"), "CHUNK_DESIGNS", 3)
    stacks = np.array([3, 5, 4, 1, 5, 3, 5])
    ev = dse.evaluate(H100, LLAMA70, phase="decode", batch=1, seq_in=1024, seq_out=128,
                      precision="bf16", chips=2, tp=2, overrides={"memory.HBM3.stacks": stacks})
    one = [dse.evaluate(H100, LLAMA70, phase="decode", batch=1, seq_in=1024, seq_out=128,
                        precision="bf16", chips=2, tp=2,
                        overrides={"memory.HBM3.stacks": [s]}).reason[0] for s in stacks]
    assert ev.reason.tolist() == one and one[3] == FIT.format("16 GiB", "51.99 GB")


def test_reasons_read_like_an_object_array() -> None:
    r = Reasons.none(4).first(np.array([True, False, False, True]), lambda i: f"a{i}")
    r = r.first(np.array([True, True, False, False]), "b").also(np.array([0, 0, 0, 1], bool),
                                                                "c")
    assert r.tolist() == ["a0", "b", "", "a3; c"]
    assert r.prefixed(np.array([False, True, True, False]), "p: ").tolist() == \
        ["a0", "p: b", "p: ", "a3; c"]
    assert r.only(np.array([True, False, True, True])).tolist() == ["a0", "", "", "a3; c"]
    assert r[[3, 0]].tolist() == ["a3; c", "a0"] and r[-1] == "a3; c"
    assert Reasons.concatenate([r, r[1:3]]).tolist() == ["a0", "b", "", "a3; c", "b", ""]
    with pytest.raises(IndexError):
        r[4]


# --- DLRM training: distinct_rows over one table's nodes -------------------------------------

def _dlrm_designs(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {"compute.units": rng.integers(66, 265, n),
            "memory.L2.capacity": rng.uniform(10, 200, n) * 2.0**20,
            "memory.HBM3.stacks": rng.integers(3, 8, n)}


def _dlrm_training(n: int) -> dse.Evaluation:
    return dse.evaluate(H100, dse.load_workload("dlrm-dcnv2"), scenario="training", chips=8,
                        overrides=_dlrm_designs(n))


def test_dlrm_training_computes_popularity_nodes_once_per_table(monkeypatch) -> None:
    """The per-design path (nodes of a [N, ...] broadcast table) is never taken."""
    real = DISTINCT.popularity_nodes

    def one_table_only(rows, alpha):
        assert np.ndim(rows) == 0 and np.ndim(alpha) == 0, "nodes computed per design"
        return real(rows, alpha)

    monkeypatch.setattr(DISTINCT, "popularity_nodes", one_table_only)
    ev = _dlrm_training(50)
    assert ev.feasible.all()
    # the same with the inputs broadcast to the per-design shape first
    hottest = np.linspace(0.0, 4e7, 50 * 3).reshape(50, 3)
    wide = [np.broadcast_to(x, (50, 3)) for x in (4e7, 1.05, 3e4)]
    assert np.array_equal(DISTINCT.distinct_rows(*wide, hottest),
                          DISTINCT.distinct_rows(4e7, 1.05, 3e4, hottest))


def test_dlrm_training_metrics_are_bit_for_bit_the_per_design_ones(monkeypatch) -> None:
    """3,000 designs: the metrics equal those of nodes computed per design (the old path,
    forced by leaving broadcast inputs as they are) bit for bit, and a few hard-coded from
    the code before the change."""
    fast = _dlrm_training(3000)
    monkeypatch.setattr(DISTINCT, "_one_value", lambda x: np.asarray(x, dtype=float))
    monkeypatch.setattr(STAGES, "distinct_rows", lambda r, a, n, h=None: DISTINCT.distinct_rows(
        *np.broadcast_arrays(r, a, n, *(() if h is None else (h,)))[:3],
        None if h is None else h))
    slow = _dlrm_training(3000)
    assert fast.metrics.keys() == slow.metrics.keys()
    for k, v in fast.metrics.items():
        assert np.array_equal(v, slow.metrics[k], equal_nan=True), k
    at = [0, 1, 7, 100, 2999]
    assert [float(fast.metrics["step_time_s"][i]).hex() for i in at] == [
        "0x1.66b88a6e45e93p-9", "0x1.9f60dbad3c623p-9", "0x1.d0cca75c3ac0cp-8",
        "0x1.8fce0dca585d8p-8", "0x1.9af8bd2eea95cp-9"]
    assert [float(fast.metrics["samples_per_s"][i]).hex() for i in at] == [
        "0x1.344ba0d88b6a6p+24", "0x1.0a3e77bd10712p+24", "0x1.dbdea9a2d40e6p+22",
        "0x1.149d6b6bbe031p+23", "0x1.0d194f0f3da5ap+24"]
