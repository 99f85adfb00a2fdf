"""The training planner's speed paths (issue 26, "Speed") change no number: what a call keeps
for later calls (dse.model.training_cache) is keyed by every input and read-only, each setup's
memory is its row of the planned array, a kept plan times each distinct operator once
(dse.model.distinct_ops) with the times of every operator, and one call of many designs
gives each design what a call of that design alone gives (its setup's link bytes, energy
and operator times included)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dse
from dse.model import training_cache
from dse.model.batch import design_batch
from dse.model.distinct_ops import same_as, timed_distinct
from dse.model.execution import Execution, Offload
from dse.model.passes import plan_pass
from dse.model.placement import TRAINING, WORKSPACE, Footprint, place
from dse.model.stages import Access, access, timed
from dse.model.training_memory import TrainingMemory, plan_training_memory
from dse.model.training_setups import plan_of
from dse.spec.load import hardware_with_technology

TRN = {"phase": "training", "batch": 64, "seq_in": 4096, "precision": "bf16", "chips": 8,
       "tp": 2}


def _designs(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """SMs, L2 and 2-7 HBM stacks: the planner picks different setups across them."""
    rng = np.random.default_rng(seed)
    return {"compute.units": rng.integers(66, 265, n),
            "memory.L2.capacity": rng.uniform(10, 200, n) * 2.0**20,
            "memory.HBM3.stacks": rng.integers(2, 8, n)}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal to the bit (NaN where NaN, the sign of zero)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "fc":
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True)) \
        and bool(np.array_equal(np.signbit(a), np.signbit(b)))


def _assert_same_evaluation(a: dse.Evaluation, b: dse.Evaluation) -> None:
    assert _same(a.feasible, b.feasible)
    assert list(a.reason) == list(b.reason)
    for k in a.metrics:
        assert _same(a.metrics[k], b.metrics[k]), k
    for k in ("memory_bytes", "ops_count", "ops_flops", "op_traffic", "ops_time",
              "ops_bound_code"):
        assert _same(getattr(a, k), getattr(b, k)), k


@pytest.fixture
def l8() -> dse.WorkloadSpec:
    return dse.load_workload("llama3-8b")


def test_a_kept_plan_gives_the_numbers_of_a_fresh_one(l8):
    hw = dse.load_hardware("h100-sxm")
    d = _designs(60)
    training_cache.clear()
    fresh = dse.evaluate(hw, l8, **TRN, overrides=d)
    kept = dse.evaluate(hw, l8, **TRN, overrides=d)
    assert len(training_cache._ENTRIES) == 1
    _assert_same_evaluation(fresh, kept)


def test_kept_tables_plans_and_memory_are_read_only(l8):
    training_cache.clear()
    dse.evaluate(dse.load_hardware("h100-sxm"), l8, **TRN, overrides=_designs(20))
    (entry,) = training_cache._ENTRIES.values()
    assert entry.setups
    with pytest.raises(ValueError, match="read-only"):
        entry.memory.total[0] = 0.0
    for s in entry.setups.values():
        for a in (s.table.flops, s.table.read, s.table.shape, s.plan.ops.read,
                  s.plan.ops.shape, s.plan.coll.nbytes, s.plan.ws, s.memory.total):
            assert not a.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            s.table.flops[0] = 1.0


@pytest.mark.parametrize("change", [
    {"seq_in": 2048}, {"precision": "fp8"}, {"batch": 32},
    {"execution": Execution(chips=8, tp=2, recompute="full")},
    {"execution": Execution(chips=8, tp=2, micro_batch=2)},
    {"execution": Execution(chips=8, tp=2, fusion="none")},
])
def test_inputs_differing_in_one_field_are_different_entries(l8, change):
    """Each scenario or execution field is part of the key: the changed call is planned
    anew and gives what a call with nothing kept gives."""
    hw = dse.load_hardware("h100-sxm")
    d = _designs(30, 3)
    kw = dict(TRN)
    if "execution" in change:
        kw = {k: v for k, v in kw.items() if k not in ("chips", "tp")}
    training_cache.clear()
    base = dse.evaluate(hw, l8, **kw, **({"chips": 8, "tp": 2} if "execution" in change
                                          else {}), overrides=d)
    changed = dse.evaluate(hw, l8, **{**kw, **change}, overrides=d)
    assert len(training_cache._ENTRIES) == 2
    assert not _same(base.metrics["step_time_s"], changed.metrics["step_time_s"])
    training_cache.clear()
    _assert_same_evaluation(changed, dse.evaluate(hw, l8, **{**kw, **change}, overrides=d))


def test_a_changed_workload_is_planned_anew_and_an_equal_one_is_not(l8):
    hw = dse.load_hardware("h100-sxm")
    d = _designs(20, 4)
    training_cache.clear()
    dse.evaluate(hw, l8, **TRN, overrides=d)
    dse.evaluate(hw, dse.load_workload("llama3-8b"), **TRN, overrides=d)  # equal content
    assert len(training_cache._ENTRIES) == 1
    shallow = l8.model_copy(update={"layers": 16})
    a = dse.evaluate(hw, shallow, **TRN, overrides=d)
    assert len(training_cache._ENTRIES) == 2
    training_cache.clear()
    _assert_same_evaluation(a, dse.evaluate(hw, shallow, **TRN, overrides=d))


@pytest.mark.parametrize("ex", [
    Execution(chips=8, tp=2),
    Execution(chips=16, tp=2, pp=2),
    Execution(chips=16, tp=2, pp=2, schedule="interleaved"),
    Execution(chips=16, tp=2, cp=2),
    Execution(chips=8, tp=2, offload=Offload(to="host", optimizer=True)),
])
def test_each_setups_memory_is_its_row_of_the_planned_array(l8, ex):
    """The planner plans every candidate in one array pass and gives each setup its row;
    the same bytes, to the bit, as planning that setup alone (as the step did before)."""
    sc = dse.evaluate(dse.load_hardware("h100-sxm"), l8, **TRN).scenario
    ex = ex.with_training(sc.training)
    training_cache.clear()
    entry = training_cache.planned(l8, sc, ex)
    assert len(entry.choices) > 1
    for i, c in enumerate(entry.choices):
        alone = plan_training_memory(l8, plan_of(sc, ex, c))
        row = entry.setup(i).memory
        for f in dataclasses.fields(TrainingMemory):
            assert _same(getattr(row, f.name), getattr(alone, f.name)), (c, f.name)


def test_distinct_operators_are_timed_as_every_operator(l8):
    """The operators the kernel cannot tell apart get the times, traffic and bounds timing
    each of them gives, over random designs."""
    sc = dse.evaluate(dse.load_hardware("h100-sxm"), l8, **TRN).scenario
    ex = Execution(chips=8, tp=2).with_training(sc.training)
    training_cache.clear()
    setup = training_cache.planned(l8, sc, ex).setup(0)
    plan = plan_pass(setup.table, ex, in_sequence=False, owned=False)
    same = same_as(plan.ops, setup.table.facts)
    assert same is not None
    names = plan.ops.name
    merged = {(str(names[j]), str(names[same[j]])) for j in np.flatnonzero(same != np.arange(
        len(same)))}
    assert ("up_proj", "gate_proj") in merged and ("v_proj", "k_proj") in merged
    db = design_batch(dse.load_hardware("h100-sxm"), _designs(200, 7))
    m = setup.memory
    fp = Footprint({"weights": m.parameters, "optimizer_state": m.optimizer_state,
                    TRAINING: m.gradients + m.activations + m.temporary,
                    WORKSPACE: np.zeros(())})
    acc = access(db, place(db, fp, None), fp, plan.ops, plan.ws, setup.table.facts)
    every, once = timed(db, plan.ops, acc, setup.table.facts), \
        timed_distinct(db, plan.ops, acc, setup.table.facts, same)
    for f in ("time", "compute", "traffic", "bound", "missing_rate"):
        assert _same(getattr(every, f), getattr(once, f)), f


def test_operators_whose_data_lives_elsewhere_stay_apart(l8):
    """Equal operators whose activations live at different levels in a pass are timed
    apart (the merge is checked against the pass's placement)."""
    sc = dse.evaluate(dse.load_hardware("h100-sxm"), l8, **TRN).scenario
    ex = Execution(chips=8, tp=2).with_training(sc.training)
    setup = training_cache.planned(l8, sc, ex).setup(0)
    plan = plan_pass(setup.table, ex, in_sequence=False, owned=False)
    same = same_as(plan.ops, setup.table.facts)
    assert same is not None
    db = design_batch(dse.load_hardware("h100-sxm"), _designs(5, 8))
    j = int(np.flatnonzero(same != np.arange(len(same)))[0])
    home = np.zeros((db.n, len(same)), dtype=np.int64) + db.levels - 1
    home[:, j] = 1  # this one's activations in L2, its twin's in HBM
    acc = Access(home={"weights": np.tile([0.0, 0.0, 1.0], (db.n, 1)),
                       "optimizer_state": np.tile([0.0, 0.0, 1.0], (db.n, 1))},
                 act_home=home)
    every = timed(db, plan.ops, acc, setup.table.facts)
    once = timed_distinct(db, plan.ops, acc, setup.table.facts, same)
    assert _same(every.time, once.time)
    assert not _same(every.time[:, j], every.time[:, same[j]])


def test_one_call_of_many_designs_gives_each_what_it_alone_gets(l8):
    """Designs that pick different setups, in one call and one at a time: the same metrics,
    operator times and energy, the links' included (each setup sends its own bytes)."""
    hw, tech = hardware_with_technology("h100-sxm")
    d = _designs(12, 11)
    many = dse.evaluate(hw, l8, **TRN, overrides=d, tech=tech)
    assert many.energy is not None
    assert many.training is not None
    assert len(set(many.training["micro_batch"].tolist())) > 1  # the setups differ
    for i in range(12):
        one = dse.evaluate(hw, l8, **TRN, overrides={k: v[i:i + 1] for k, v in d.items()},
                           tech=tech)
        assert one.energy is not None
        for k in many.metrics:
            assert _same(many.metrics[k][i:i + 1], one.metrics[k]), k
        assert _same(many.ops_time[i:i + 1], one.ops_time)
        assert _same(many.energy.links[i:i + 1], one.energy.links)
        assert one.training is not None
        for k in many.training:
            assert _same(many.training[k][i:i + 1], one.training[k]), k


def test_distinct_rows_of_repeated_counts_equal_each_count_alone():
    """DLRM training's sparse update: the distinct rows among each design's hottest rows,
    worked out once per distinct count, equal each count's own sum, to the bit."""
    from dse.model.distinct import distinct_rows
    rng = np.random.default_rng(2)
    hottest = rng.choice([0.0, 1e3, 2.5e5, 4e6, 1e7], size=(500, 3))
    hottest[7, 1] = rng.uniform(0, 1e7)
    many = distinct_rows(1e7, 1.05, 6.5e5, hottest)
    assert many.shape == hottest.shape
    for i, j in [(0, 0), (7, 1), (499, 2), (123, 1)]:
        alone = distinct_rows(np.full(1, 1e7), 1.05, 6.5e5, hottest[i, j:j + 1])
        assert _same(many[i, j:j + 1], alone)
    per_design = distinct_rows(np.full(500, 1e7), 1.05, np.full(500, 6.5e5),
                               hottest[:, 0])  # a table per design: no sharing
    assert _same(per_design, many[:, 0])


@pytest.mark.parametrize("ex", [
    Execution(chips=8, tp=2),
    Execution(chips=16, tp=2, pp=2, schedule="interleaved"),
    Execution(chips=16, tp=2, cp=2, zero=3),
])
def test_the_joined_step_is_the_step_stage_then_overlap_and_extra_columns(l8, ex):
    """training_join.joined gives, field by field and to the bit, what stages.step then
    training_plugins.training_step (overlap, bubble and compression columns) give."""
    from dse.model.parallel import collective_times
    from dse.model.stages import step
    from dse.model.training_join import joined
    from dse.model.training_plugins import training_step
    sc = dse.evaluate(dse.load_hardware("h100-sxm"), l8, **TRN).scenario
    ex = ex.with_training(sc.training)
    training_cache.clear()
    entry = training_cache.planned(l8, sc, ex)
    db = design_batch(dse.load_hardware("h100-sxm"), _designs(300, 9))
    for i in (0, len(entry.choices) // 2, len(entry.choices) - 1):
        setup = entry.setup(i)
        plan, mem, m = setup.plan, setup.memory, float(setup.memory.microbatches)
        assert setup.counts is not None
        fp = Footprint({"weights": mem.parameters, "optimizer_state": mem.optimizer_state,
                        TRAINING: mem.gradients + mem.activations + mem.temporary,
                        WORKSPACE: np.zeros(())})
        acc = access(db, place(db, fp, None), fp, plan.ops, plan.ws, setup.table.facts)
        t, t_coll = timed(db, plan.ops, acc, setup.table.facts), collective_times(db, plan.coll)
        old = training_step(step(db, plan.ops, plan.coll, t, t_coll), db, setup.execution, m)
        new = joined(db, plan.ops, plan.coll, t, t_coll, setup.execution, m, setup.counts)
        for f in dataclasses.fields(old):
            a, b = getattr(old, f.name), getattr(new, f.name)
            if f.name == "ops":
                continue
            assert _same(np.broadcast_to(a, np.broadcast_shapes(np.shape(a), np.shape(b))),
                         np.broadcast_to(b, np.broadcast_shapes(np.shape(a), np.shape(b)))), \
                (setup.choice, f.name)
            assert np.asarray(a).dtype == np.asarray(b).dtype, f.name


def test_the_least_recently_used_entry_is_dropped(l8, monkeypatch):
    monkeypatch.setattr(training_cache, "MAX_ENTRIES", 2)
    hw, d = dse.load_hardware("h100-sxm"), _designs(3, 5)
    training_cache.clear()
    for seq in (1024, 2048, 1024, 4096):  # 2048 is the least recently used when 4096 comes
        dse.evaluate(hw, l8, **{**TRN, "seq_in": seq}, overrides=d)
    kept = {e.sc.seq_in for e in training_cache._ENTRIES.values()}
    assert kept == {1024, 4096}
