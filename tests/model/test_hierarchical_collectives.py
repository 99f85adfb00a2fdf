"""Hierarchical collectives over a described topology, and their overlap with compute
(issue 27, mechanism 1): closed forms written out by hand, the stride rule, the overlap
windows of the Transformer and recommender training steps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dse
from dse.model.batch import design_batch
from dse.model.execution import Execution
from dse.model.parallel import (
    COLLECTIVES,
    HIERARCHICAL,
    chip_ops,
    collective_times,
    collectives_of,
    ranks_per_domain,
)
from dse.model.training_plugins import hide
from dse.workloads import lower, resolve_scenario

H100 = dse.load_hardware("h100-sxm")


def _one(kind: str, p: int, nbytes: float, stride: float = 1.0, db=None) -> np.ndarray:
    """[N] seconds of one collective of `kind` over `p` ranks `stride` apart."""
    coll = collectives_of(["c"], [kind], ["backward"], [p], [nbytes], [1.0],
                          ["gradient_reduce"], [stride])
    return collective_times(db or design_batch(H100), coll)[:, 0]


def test_all_reduce_on_two_nodes_of_eight_is_its_closed_form():
    # 1 GB all-reduced over 16 H100s, 8 per DGX node (stride 1: g = 8, n = 2).
    # Within the node: reduce-scatter + all-gather, 2 x 7 steps, 2 x 7/8 x 1 GB = 1.75 GB
    # over NVLink at 18 x 25 GB/s x 0.82 = 369 GB/s: 4.7425 ms.
    # Across: all-reduce of 1/8 GB per rank over 2 nodes, 2 x 1 steps, 2 x 1/2 x 0.125 GB =
    # 0.125 GB over the rank's own NIC at 50 GB/s x 0.94 = 47 GB/s: 2.6596 ms.
    # Pipelined: the slower class sets the time; fixed: 6.6 us + 14 x 0.6 us + 2 x 2.7 us.
    t = _one("all_reduce", 16, 1e9)[0]
    expect = 6.6e-6 + 14 * 0.6e-6 + 2 * 2.7e-6 + max(1.75e9 / 369e9, 0.125e9 / 47e9)
    assert t == pytest.approx(expect, rel=1e-12)
    assert t == pytest.approx(4.7629e-3, rel=1e-4)
    # The network phase alone, with NVLink made free (a design override): 2.6596 ms.
    fast = design_batch(H100, {"interconnect.link_bandwidth": "1e6 GB/s"})
    assert _one("all_reduce", 16, 1e9, db=fast)[0] == pytest.approx(
        6.6e-6 + 14 * 0.6e-6 + 2 * 2.7e-6 + 0.125e9 / 47e9, rel=1e-6)


def test_a_group_inside_one_node_is_priced_as_before():
    ic = H100.interconnect
    bw = ic.links * ic.link_bandwidth * ic.achievable.fraction
    for kind in COLLECTIVES:
        for p in (2, 4, 8):
            steps, volume = COLLECTIVES[kind](p, 3e8)
            expect = ic.collective_overhead + steps * ic.latency + volume / bw
            assert _one(kind, p, 3e8)[0] == expect  # to the bit
    # ranks two apart: 4 of them still share the node
    assert _one("all_reduce", 4, 3e8, stride=2.0)[0] == _one("all_reduce", 4, 3e8)[0]


def test_stride_rule_puts_dp_ranks_of_tp8_one_per_node():
    assert ranks_per_domain(8, 8, 16)[()] == 1  # tp = 8: dp ranks 8 apart, one per node
    assert ranks_per_domain(8, 2, 16)[()] == 4  # tp = 2: four per node
    assert ranks_per_domain(8, 1, 4)[()] == 4  # a group smaller than the node
    assert ranks_per_domain(8, 64, 2)[()] == 1
    # g = 1: the whole all-reduce crosses the network, every rank on its own NIC (all
    # rails in parallel): 2 (p - 1) steps, 2 (p - 1) / p x S at 47 GB/s
    t = _one("all_reduce", 16, 1e9, stride=8.0)[0]
    assert t == pytest.approx(6.6e-6 + 30 * 2.7e-6 + 2 * 15 / 16 * 1e9 / 47e9, rel=1e-12)
    # with g = 1 no step runs over NVLink
    assert HIERARCHICAL["all_reduce"](16, np.array(1.0), 1.0)[:2] == (0.0, 0.0)


def test_all_to_all_sends_the_off_node_share_over_the_nics():
    # 64 ranks, 8 per node: 56/64 of the data crosses the NICs, 7/64 NVLink, at once
    t = _one("all_to_all", 64, 1e9)[0]
    expect = 6.6e-6 + 7 * 0.6e-6 + 56 * 2.7e-6 + max(7 / 64 * 1e9 / 369e9, 56 / 64 * 1e9 / 47e9)
    assert t == pytest.approx(expect, rel=1e-12)


def test_pipeline_send_crosses_nodes_when_the_stages_are_a_node_apart():
    wl = dse.load_workload("llama2-7b")
    _, sc = resolve_scenario(wl, None, phase="prefill", batch=1, seq_in=512, precision="bf16")
    for tp, chips, crosses in ((4, 16, True), (2, 4, False)):
        ex = Execution(chips=chips, tp=tp, pp=2)
        _, coll = chip_ops(lower(wl, sc), ex)
        send = np.flatnonzero(coll.kind == "send")[0]
        # each tp rank sends its 1/tp (SC21 Sec. 4.1), stride tp x dp
        assert coll.stride[send] == tp * ex.dp
        whole = 512 * wl.d_model * 2
        assert coll.nbytes[send] == pytest.approx(whole / tp)
        t = collective_times(design_batch(H100), coll)[0, send]
        link = 47e9 if crosses else 369e9
        lat = 2.7e-6 if crosses else 0.6e-6
        assert t == pytest.approx(6.6e-6 + lat + whole / tp / link, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(COLLECTIVES)), p=st.integers(2, 512),
       stride=st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0]), size=st.floats(1.0, 1e11),
       low=st.floats(1e8, 1e11), more=st.floats(1.0, 100.0))
def test_more_scale_out_bandwidth_is_never_slower(kind, p, stride, size, low, more):
    db = design_batch(H100, {"interconnect.scale_out_bandwidth": [low, low * more]})
    if kind == "send":
        p = 2
    t = _one(kind, p, size, stride=stride, db=db)
    assert np.all(np.isfinite(t))
    assert t[1] <= t[0]


def _ops(stages: list[str]) -> SimpleNamespace:
    n = len(stages)
    return SimpleNamespace(name=np.array([f"op{i}" for i in range(n)], dtype=object),
                           stage=np.array(stages, dtype=object),
                           kind=np.full(n, "gemm", dtype=object))


def test_gradient_reduce_hidden_behind_a_long_backward_costs_nothing():
    ops = _ops(["forward", "backward"])
    role = np.array(["", "", "gradient_reduce"], dtype=object)
    # one micro-batch: forward 2 ms, backward 5 ms, the all-reduce 1 ms: all hidden
    time = np.array([[2e-3, 5e-3, 1e-3]])
    assert hide(time, ops, role, 1.0, {"forward": np.array([2e-3]),
                                       "backward": np.array([5e-3])})
    assert time[0, 2] == 0.0
    # a short backward (0.3 ms) exposes the rest: 0.7 ms
    time = np.array([[2e-3, 3e-4, 1e-3]])
    hide(time, ops, role, 1.0, {"forward": np.array([2e-3]), "backward": np.array([3e-4])})
    assert time[0, 2] == pytest.approx(7e-4)
    # 4 micro-batches: the window is the last one's backward, 8 ms / 4 = 2 ms
    time = np.array([[2e-3, 8e-3, 3e-3]])
    hide(time, ops, role, 4.0, {"forward": np.array([8e-3]), "backward": np.array([8e-3])})
    assert time[0, 2] == pytest.approx(1e-3)


def test_a_missing_overlap_window_is_an_error():
    ops = _ops(["forward"])
    role = np.array(["", "gradient_reduce"], dtype=object)
    with pytest.raises(ValueError, match="no backward operator"):
        hide(np.array([[1e-3, 1e-3]]), ops, role, 1.0, {"forward": np.array([1e-3])})


def test_each_design_has_its_own_domain():
    # the same 16-rank all-reduce on 16-GPU domains stays within one (priced as before), on
    # 8-GPU domains it crosses the network: one batch, two designs
    db = design_batch(H100, {"interconnect.chips_per_node": [16, 8]})
    t = _one("all_reduce", 16, 1e9, db=db)
    assert t[0] == pytest.approx(6.6e-6 + 30 * 0.6e-6 + 2 * 15 / 16 * 1e9 / 369e9, rel=1e-12)
    assert t[1] == pytest.approx(_one("all_reduce", 16, 1e9)[0], rel=1e-12)


def test_no_scale_out_network_cannot_cross_domains():
    # GH200 states no scale-out NIC: on 8-chip domains (an override) a group beyond one cannot
    # run (inf, which the pass reports as chips that cannot talk); within it, it can
    db = design_batch(dse.load_hardware("gh200"), {"interconnect.chips_per_node": 8})
    assert np.isinf(_one("all_reduce", 16, 1e9, db=db)[0])
    assert np.isfinite(_one("all_reduce", 8, 1e9, db=db)[0])
