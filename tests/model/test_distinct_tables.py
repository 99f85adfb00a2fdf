"""Designs that share a batch run one lowered table per distinct batch, and a call keeps its
table and plan for later calls with the same inputs (dse.model.lowered): every number equals
the pass that lowers every design's operators on its own, in every call."""

from __future__ import annotations

import numpy as np
import pytest

import dse
from dse.model import lowered as lowering
from dse.model.execution import Execution
from dse.workloads import lower, resolve_scenario


def _per_design(wl, sc, ex, batch):
    """The pass as it was: lowered per design (or at the scenario's batch), nothing kept."""
    return lowering.Lowered(table=lower(wl, sc, batch=batch, chips=ex.dp), plan=None)


def _arrays(ev) -> dict[str, np.ndarray]:
    out = {f"metrics.{k}": v for k, v in ev.metrics.items()}
    for f in ("feasible", "sequences", "memory_bytes", "ops_count", "ops_flops", "op_traffic",
              "ops_time", "ops_bound_code"):
        out[f] = np.asarray(getattr(ev, f))
    out["reason"] = np.asarray([ev.reason.text(i) for i in range(ev.n)], dtype=object)
    return out


def _assert_same(got, want) -> None:
    g, w = _arrays(got), _arrays(want)
    assert g.keys() == w.keys()
    for k in g:
        if g[k].dtype == object:
            assert g[k].tolist() == w[k].tolist(), k
        else:
            np.testing.assert_array_equal(g[k], w[k], err_msg=k)


CASES = [("llama3-8b", "serve-2048-128", "max", 1), ("llama3-8b", "serve-2048-128", "best", 1),
         ("mixtral-8x7b", "serve-2048-128", "max", 2), ("bert-large", "case-study-512", "max", 1),
         ("llama2-70b", "chat-decode", None, 2), ("dlrm-dcnv2", "mlperf-offline", None, 1)]


@pytest.mark.parametrize(("workload", "scenario", "batch", "chips"), CASES)
def test_distinct_and_kept_tables_change_no_number(monkeypatch, workload, scenario, batch,
                                                   chips):
    hw = dse.load_hardware("h100-sxm")
    wl = dse.load_workload(workload)
    rng = np.random.default_rng(5)
    n = 120
    designs = {"compute.units": rng.integers(66, 265, n),
               "memory.HBM3.stacks": rng.choice([2, 3, 5, 7], n)}
    given = {} if batch is None else {"batch": batch}

    def run():
        return dse.evaluate(hw, wl, scenario, chips=chips, tp=chips, overrides=designs,
                            **given)

    lowering.clear()
    first, again = run(), run()  # made, then found kept
    assert lowering._KEPT.entries
    monkeypatch.setattr(lowering, "lowered", _per_design)
    monkeypatch.setattr("dse.model.phase_pass.lowered", _per_design)
    want = run()
    _assert_same(first, want)
    _assert_same(again, want)


def test_few_designs_of_their_own_batch_lower_per_design():
    """More than half the designs with a batch of their own: lowered per design, nothing
    kept; else once per distinct batch, each design pointing at its table."""
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, "serve-2048-128")
    ex = Execution(chips=1)
    lowering.clear()
    low = lowering.lowered(wl, sc, ex, np.array([1.0, 2.0, 3.0, 3.0]))
    assert low.tables is None and low.plan is None and low.table.flops.shape[0] == 4
    assert not lowering._KEPT.entries
    low = lowering.lowered(wl, sc, ex, np.array([4.0, 2.0, 4.0, 2.0]))
    assert low.tables is not None and low.tables.tolist() == [1, 0, 1, 0]
    assert low.table.flops.shape[0] == 2 and low.plan is not None


def test_kept_tables_are_read_only_and_keyed_by_every_input():
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, "serve-2048-128", batch=8)
    ex = Execution(chips=1)
    lowering.clear()
    low = lowering.lowered(wl, sc, ex, None)
    assert lowering.lowered(wl, sc, ex, None) is low  # found, not made again
    with pytest.raises(ValueError, match="read-only"):
        low.table.flops[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        low.plan.ops.read[0, 0] = 1.0
    others = [lowering.lowered(wl, sc.model_copy(update={"seq_in": 1024}), ex, None),
              lowering.lowered(wl, sc, Execution(chips=2, tp=2), None),
              lowering.lowered(wl.model_copy(update={"layers": wl.layers - 2}), sc, ex, None),
              lowering.lowered(wl, sc, ex, np.array([3.0, 3.0]))]
    assert all(o is not low for o in others) and len(lowering._KEPT.entries) == 5
    flops = [float(np.sum(o.table.flops * o.table.count)) for o in [low, others[0], others[2]]]
    assert len(set(flops)) == 3  # each entry is its own inputs' table
    assert not np.array_equal(others[1].plan.ops.flops, low.plan.ops.flops)  # split over tp


def test_the_least_recently_used_table_is_dropped(monkeypatch):
    monkeypatch.setattr(lowering, "MAX_ENTRIES", 2)
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, "serve-2048-128", batch=8)
    ex = Execution(chips=1)
    lowering.clear()
    for seq in (1024, 2048, 1024, 4096):  # 2048 is the least recently used when 4096 comes
        lowering.lowered(wl, sc.model_copy(update={"seq_in": seq}), ex, None)
    kept = {key[2] for key in lowering._KEPT.entries}
    assert len(kept) == 2 and all('"seq_in":2048' not in k for k in kept)


def test_a_wide_set_of_batches_is_not_kept(monkeypatch):
    """More distinct batches than KEEP_DISTINCT: lowered as distinct tables, not kept (the
    store stays bounded in bytes, not only in entries)."""
    monkeypatch.setattr(lowering, "KEEP_DISTINCT", 3)
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, "serve-2048-128")
    ex = Execution(chips=1)
    lowering.clear()
    low = lowering.lowered(wl, sc, ex, np.array([1.0, 2.0, 3.0, 4.0] * 3))
    assert low.tables is not None and low.table.flops.shape[0] == 4
    assert not lowering._KEPT.entries
    lowering.lowered(wl, sc, ex, np.array([1.0, 2.0, 3.0] * 3))
    assert len(lowering._KEPT.entries) == 1
