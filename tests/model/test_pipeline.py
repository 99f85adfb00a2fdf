"""The staged pipeline: per-design batches in one pass, batch best, the execution plan,
collectives and splits as data, placement policy, and errors at table-build time."""

import numpy as np
import pytest
from conftest import without_engine_limits

import dse
from dse.errors import DseError
from dse.model.batch import design_batch
from dse.model.batch_search import size
from dse.model.chunks import BEST_CANDIDATES
from dse.model.execution import Execution
from dse.model.parallel import COLLECTIVES, SPLITS, Collectives, chip_ops, collective_times
from dse.model.placement import POLICY, Footprint, place
from dse.workloads import lower, resolve_scenario
from dse.workloads.optable import SPLITS as TABLE_SPLITS
from dse.workloads.optable import Facts, OpRow, OpTable

H100 = dse.load_hardware("h100-sxm")
LLAMA3_8B = dse.load_workload("llama3-8b")
LLAMA70 = dse.load_workload("llama2-70b")
SERVE = dict(phase="serve", seq_in=1024, seq_out=128, precision="fp8")


def test_per_design_lowering_equals_one_lowering_per_batch():
    for wl, kw in ((LLAMA70, dict(phase="serve", batch=4, seq_in=128, seq_out=64)),
                   (dse.load_workload("mixtral-8x7b"), dict(phase="serve", batch=4,
                                                            seq_in=128, seq_out=64)),
                   (dse.load_workload("bert-large"), dict(phase="inference", batch=4,
                                                          seq_in=384))):
        _, sc = resolve_scenario(wl, None, **kw)
        batches = np.array([1.0, 3.0, 17.0])
        table = lower(wl, sc, batch=batches)
        for j, b in enumerate(batches):
            one = lower(wl, sc.model_copy(update={"batch": int(b)}))
            for field in ("count", "flops", "read", "written", "shape"):
                np.testing.assert_allclose(np.broadcast_to(getattr(table, field),
                                                           (3, *getattr(one, field).shape))[j],
                                           getattr(one, field), rtol=1e-12)


def test_batch_max_in_one_pass_equals_each_design_alone():
    caps = ["24 GiB", "40 GiB", "80 GiB", "141 GiB"]
    wl = without_engine_limits(LLAMA3_8B)  # batch max set by memory alone
    ev = dse.evaluate(H100, wl, batch="max", overrides={"memory.HBM3.capacity": caps},
                      **SERVE)
    assert len(set(ev.sequences)) == 4  # four different batch sizes, one call
    for i, cap in enumerate(caps):
        one = dse.evaluate(H100, wl, batch="max",
                           overrides={"memory.HBM3.capacity": cap}, **SERVE)
        assert one.sequences[0] == ev.sequences[i]
        for m in ("output_tokens_per_s", "latency_s", "tpot_s", "ttft_s",
                  "decode_tokens_per_s"):
            assert ev.metrics[m][i] == pytest.approx(one.metrics[m][0], rel=1e-12)
        fixed = dse.evaluate(H100, wl, batch=int(ev.sequences[i]),
                             overrides={"memory.HBM3.capacity": cap}, **SERVE)
        assert fixed.metrics["output_tokens_per_s"][0] == pytest.approx(
            ev.metrics["output_tokens_per_s"][i], rel=1e-12)


def test_batch_max_is_the_most_that_fits():
    ev = dse.evaluate(H100, LLAMA3_8B, batch="max", **SERVE)
    most = int(ev.sequences[0])
    assert dse.evaluate(H100, LLAMA3_8B, batch=most, **SERVE).feasible[0]
    assert not dse.evaluate(H100, LLAMA3_8B, batch=most + 1, **SERVE).feasible[0]


def test_batch_best_beats_max_when_a_slow_tier_holds_the_overflow():
    mg = dse.load_hardware("middle-ground")  # HBM3, then LPDDR5X and CXL tiers
    kw = dict(phase="serve", seq_in=1024, seq_out=128, precision="fp16")
    over = {"memory.HBM3.capacity": ["16 GiB", "80 GiB"]}
    wl = without_engine_limits(LLAMA70)  # batch max set by memory alone
    mx = dse.evaluate(mg, wl, batch="max", overrides=over, **kw)
    best = dse.evaluate(mg, wl, batch="best", overrides=over, **kw)
    m = "output_tokens_per_s"
    assert np.all(best.metrics[m] >= mx.metrics[m] * (1 - 1e-12))
    assert best.metrics[m][0] > 1.5 * mx.metrics[m][0]  # max packs sequences into CXL
    assert np.all(best.sequences <= mx.sequences)
    # best is at least as good as every batch on a fine grid of fixed batches.
    for i, cap in enumerate(over["memory.HBM3.capacity"]):
        grid = np.unique(np.geomspace(1, mx.sequences[i], 40).round().astype(int))
        tput = [dse.evaluate(mg, wl, batch=int(b), overrides={"memory.HBM3.capacity": cap},
                             **kw).metrics[m][0] for b in grid]
        assert best.metrics[m][i] >= 0.99 * np.nanmax(tput)


def test_batch_best_honours_a_latency_target():
    free = dse.evaluate(H100, LLAMA3_8B, batch="best", **SERVE)
    per_token = 1 / free.metrics["decode_tokens_per_s"][0]
    wl = LLAMA3_8B.model_copy(update={"scenarios": {"tight": LLAMA3_8B.scenarios[
        "serve-128-2048"].model_copy(update={"batch": "best", "latency_target":
                                              float(per_token / 3)})}})
    tight = dse.evaluate(H100, wl, "tight", seq_in=1024, seq_out=128)
    assert tight.feasible[0]
    assert 1 / tight.metrics["decode_tokens_per_s"][0] <= per_token / 3
    assert tight.sequences[0] < free.sequences[0]
    impossible = wl.model_copy(update={"scenarios": {"t": wl.scenarios["tight"].model_copy(
        update={"latency_target": 1e-9})}})
    res = dse.evaluate(H100, impossible, "t", seq_in=1024, seq_out=128)
    assert not res.feasible[0] and "latency target" in res.reason[0]


def test_best_searches_few_candidates():
    assert 4 <= BEST_CANDIDATES <= 32


@pytest.mark.parametrize(("kw", "message"), [
    (dict(chips=0), "^chips: expected a whole number from 1 to "),
    (dict(chips=3, tp=2), "not a multiple of tp x pp"),
    (dict(tp=True), "expected a whole number from 1 to "),
    (dict(fusion="magic"), "fusion: expected one of"),
])
def test_execution_rejects_bad_plans(kw, message):
    with pytest.raises(DseError, match=message):
        Execution(**kw)


@pytest.mark.parametrize(("kw", "message"), [
    (dict(chips=1024, tp=1024), "expected a divisor of 64"),
    (dict(chips=3, tp=3), "expected a divisor of 64"),
    (dict(chips=128, pp=128), "expected at most 80 stages"),
])
def test_parallel_degrees_divide_what_they_split(kw, message):
    with pytest.raises(DseError, match=message):
        dse.evaluate(H100, LLAMA70, phase="decode", **kw)


def test_uneven_stages_warn_and_the_longest_sets_the_pace():
    ev = dse.evaluate(H100, LLAMA70, phase="serve", batch=8, seq_in=128, seq_out=16,
                      chips=3, pp=3)
    assert any("longest stage holds 27 layers" in w for w in ev.warnings)
    even = dse.evaluate(H100, LLAMA70, phase="serve", batch=8, seq_in=128, seq_out=16,
                        chips=4, pp=4)
    assert not even.warnings


def test_lengths_beyond_the_context_warn():
    ev = dse.evaluate(H100, dse.load_workload("llama2-7b"), phase="prefill", seq_in=100_000)
    assert any("exceed the model's context of 4096" in w for w in ev.warnings)


def test_collective_formulas():
    # p = 4 chips, 1 MB: ring all-reduce sends 2 (p-1)/p of it in 2 (p-1) steps; all-gather,
    # reduce-scatter and all-to-all (p-1)/p in p-1 steps; a send all of it in one step.
    s = np.array(1e6)
    assert COLLECTIVES["all_reduce"](4, s) == (6, pytest.approx(1.5e6))
    assert COLLECTIVES["all_gather"](4, s) == (3, pytest.approx(0.75e6))
    assert COLLECTIVES["reduce_scatter"](4, s) == (3, pytest.approx(0.75e6))
    assert COLLECTIVES["all_to_all"](4, s) == (3, pytest.approx(0.75e6))
    assert COLLECTIVES["send"](4, s) == (1, pytest.approx(1e6))
    db = design_batch(H100)
    coll = Collectives(name=np.array(["a2a"], dtype=object), kind=np.array(["all_to_all"]),
                       stage=np.array(["decode"], dtype=object), group=np.array([4.0]),
                       nbytes=np.array([1e6]), count=np.array([1.0]),
                       role=np.array(["expert_dispatch"], dtype=object))
    ic = H100.interconnect
    bw = ic.links * ic.link_bandwidth * ic.achievable.fraction
    expect = ic.collective_overhead + 3 * ic.latency + 0.75e6 / bw
    assert collective_times(db, coll)[0, 0] == pytest.approx(expect)
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        Collectives(name=np.array(["b"]), kind=np.array(["broadcast"]),
                    stage=np.array(["decode"]), group=np.array([2.0]),
                    nbytes=np.array([1.0]), count=np.array([1.0]),
                    role=np.array(["tensor"], dtype=object))
    with pytest.raises(ValueError, match="unknown collective role 'gossip'"):
        Collectives(name=np.array(["b"]), kind=np.array(["send"]),
                    stage=np.array(["decode"]), group=np.array([2.0]),
                    nbytes=np.array([1.0]), count=np.array([1.0]),
                    role=np.array(["gossip"], dtype=object))


def test_every_split_declares_what_it_divides():
    assert set(SPLITS) == set(TABLE_SPLITS)
    assert SPLITS["row"].collective == "all_reduce"
    assert SPLITS["vocab"].collective == "all_gather"
    assert SPLITS["replicated"].collective is None and not SPLITS["replicated"].flops


@pytest.mark.parametrize(("row", "message"), [
    (OpRow("x", "convolution", "other", 1, 1), "unknown kind 'convolution'"),
    (OpRow("x", "gemm", "other", 1, 1, split="diagonal"), "unknown split 'diagonal'"),
    (OpRow("x", "gemm", "other", 1, 1, read={"photons": 8.0}),
     "unknown tensor class 'photons'"),
])
def test_unknown_kinds_splits_and_classes_fail_at_table_build(row, message):
    with pytest.raises(ValueError, match=message):
        OpTable.from_rows([row], Facts(phase="gemm"))


def test_kv_cache_splits_over_at_most_the_kv_heads():
    """Llama-3-70B has 8 KV heads: at tp 16 each is replicated on two chips."""
    wl = dse.load_workload("llama3-70b")
    _, sc = resolve_scenario(wl, None, phase="decode", batch=4, seq_in=1024, seq_out=8)
    table = lower(wl, sc)
    ops8, _ = chip_ops(table, Execution(chips=8, tp=8))
    ops16, _ = chip_ops(table, Execution(chips=16, tp=16))
    kv = table.read[:, 2].sum()
    assert ops8.read[:, 2].sum() == pytest.approx(kv / 8)
    assert ops16.read[:, 2].sum() == pytest.approx(kv / 8)  # not / 16


def test_placement_follows_the_policy_order():
    assert [r.name for r in POLICY] == ["weights", "kv_cache", "workspace", "training_state",
                                        "optimizer_state", "embeddings"]
    gh = dse.load_hardware("gh200")
    db = design_batch(gh)
    first = db.level_kinds.index("dram")
    hbm = db.resident_capacity[0, first]
    p = place(db, Footprint({"weights": np.array(hbm * 0.9),
                             "kv_cache": np.array(hbm * 0.5), "workspace": np.array(0.0)}))
    assert p.share("weights")[0, first] == pytest.approx(1.0)  # weights first, all in HBM
    assert p.share("kv_cache")[0, first] == pytest.approx(0.2)  # the rest spills onward
    assert p.share("kv_cache")[0, first + 1:].sum() == pytest.approx(0.8)
    assert p.feasible[0]


def test_size_stage_counts_sequences_per_replica():
    _, sc = resolve_scenario(LLAMA3_8B, None, batch="max", **SERVE)
    db = design_batch(H100, {"memory.HBM3.capacity": ["40 GiB", "80 GiB"]})
    most = size(db, LLAMA3_8B, sc, Execution())
    assert most[1] > 2 * most[0] > 0
