"""Designs that share a batch run one lowered table per distinct batch (phase_pass.
_distinct_tables, ChipOps.rows): every number equals the pass that lowers every design's
operators on its own."""

from __future__ import annotations

import numpy as np
import pytest

import dse
from dse.model import phase_pass
from dse.model.execution import Execution
from dse.workloads import lower, resolve_scenario


def _per_design(wl, sc, ex, batch):
    return lower(wl, sc, batch=batch, chips=ex.dp), None


def _arrays(ev) -> dict[str, np.ndarray]:
    out = {f"metrics.{k}": v for k, v in ev.metrics.items()}
    for f in ("feasible", "sequences", "memory_bytes", "ops_count", "ops_flops", "op_traffic",
              "ops_time", "ops_bound_code"):
        out[f] = np.asarray(getattr(ev, f))
    out["reason"] = np.asarray([ev.reason.text(i) for i in range(ev.n)], dtype=object)
    return out


@pytest.mark.parametrize(("workload", "scenario", "batch", "chips"), [
    ("llama3-8b", "serve-2048-128", "max", 1),
    ("llama3-8b", "serve-2048-128", "best", 1),
    ("mixtral-8x7b", "serve-2048-128", "max", 2),
    ("bert-large", "case-study-512", "max", 1),
])
def test_distinct_tables_change_no_number(monkeypatch, workload, scenario, batch, chips):
    hw = dse.load_hardware("h100-sxm")
    wl = dse.load_workload(workload)
    rng = np.random.default_rng(5)
    n = 120
    designs = {"compute.units": rng.integers(66, 265, n),
               "memory.HBM3.stacks": rng.choice([2, 3, 5, 7], n)}

    def run():
        return dse.evaluate(hw, wl, scenario, batch=batch, chips=chips, tp=chips,
                            overrides=designs)

    calls = []
    real = phase_pass._distinct_tables
    monkeypatch.setattr(phase_pass, "_distinct_tables",
                        lambda *a: calls.append(real(*a)) or calls[-1])
    got = run()
    assert any(t is not None for _, t in calls), "no pass ran distinct tables"
    monkeypatch.setattr(phase_pass, "_distinct_tables", _per_design)
    want = run()
    g, w = _arrays(got), _arrays(want)
    assert g.keys() == w.keys()
    for k in g:
        if g[k].dtype == object:
            assert g[k].tolist() == w[k].tolist(), k
        else:
            np.testing.assert_array_equal(g[k], w[k], err_msg=k)


def test_few_designs_of_their_own_batch_lower_per_design():
    """More than half the designs with a batch of their own: lowered per design; else once
    per distinct batch, each design pointing at its table."""
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, "serve-2048-128")
    ex = Execution(chips=1)
    table, tables = phase_pass._distinct_tables(wl, sc, ex, np.array([1.0, 2.0, 3.0, 3.0]))
    assert tables is None and table.flops.shape[0] == 4
    table, tables = phase_pass._distinct_tables(wl, sc, ex, np.array([4.0, 2.0, 4.0, 2.0]))
    assert tables is not None and tables.tolist() == [1, 0, 1, 0]
    assert table.flops.shape[0] == 2
