"""Training step time (dse.model.training): the setup chosen per design, the pipeline bubble
and the data-parallel overlap by hand, offload, monotonicity, and bad setups."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import dse
from dse.errors import DseError
from dse.spec.workload import Scenario, Training


def _wl(name: str = "llama2-7b", **training):
    """`name` with a first scenario that trains 2048-token sequences with `training`."""
    wl = dse.load_workload(name)
    sc = Scenario(phase="training", batch=64, seq_in=2048, precision="bf16",
                  training=Training(**training) if training else None)
    return wl.model_copy(update={"scenarios": {"train": sc, **wl.scenarios}})


def _eval(hw: str = "h100-sxm", wl=None, **kw):
    return dse.evaluate(dse.load_hardware(hw), wl if wl is not None else _wl(), **kw)


def _op(ev, name: str, i: int = 0) -> tuple[float, float]:
    j = list(ev.ops_name).index(name)
    return float(ev.ops_count[i, j]), float(ev.ops_time[i, j])


def test_the_fastest_setup_that_fits_is_chosen_per_design() -> None:
    """With all the HBM, a 7B model trains without recomputation; with 24 GiB the chosen
    setup must store less (more ZeRO or recomputation), and still fits."""
    ev = _eval(chips=8, overrides={"memory.HBM3.capacity": ["80 GiB", "24 GiB"]})
    assert ev.feasible.all()
    roomy, tight = ({k: v[i] for k, v in ev.training.items()} for i in (0, 1))
    assert roomy["recompute"] == "none"
    assert tight["memory_total_bytes"] < 24 * 2**30 < roomy["memory_total_bytes"]
    assert (tight["zero"], tight["recompute"]) != (roomy["zero"], roomy["recompute"])
    t = ev.metrics["step_time_s"]
    assert t[1] >= t[0]


def test_every_divisor_of_a_replicas_batch_is_a_micro_batch_tried() -> None:
    """48 sequences on 8 chips are 6 per replica: micro-batches 1, 2, 3 and 6 are tried (not
    only powers of two), and none that fits, given explicitly, is faster than the choice."""
    from dse.model.training_setups import MAX_MICRO_BATCH, micro_batches

    assert micro_batches(6) == [1, 2, 3, 6]
    assert micro_batches(192)[-3:] == [64, 96, 192] and micro_batches(7) == [1, 7]
    assert max(micro_batches(2 * 3 * 5 * 7 * 11)) <= MAX_MICRO_BATCH
    wl = dse.load_workload("mpt-7b")
    chosen = _eval(wl=wl, scenario="foundry-training", chips=8)
    for mb in (1, 2, 3, 6):
        for zero in (1, 2, 3):
            sc = wl.scenarios["foundry-training"].model_copy(update={
                "training": Training(micro_batch=mb, zero=zero)})
            given = _eval(wl=wl.model_copy(update={"scenarios": {"s": sc}}), chips=8)
            if given.feasible[0]:
                assert chosen.metrics["step_time_s"][0] <= given.metrics["step_time_s"][0]


@pytest.mark.parametrize("path,values", [
    ("memory.HBM3.bandwidth", ["2 TB/s", "3.35 TB/s", "5 TB/s"]),
    ("compute.matrix.peak.bf16", ["500 TFLOPS", "989 TFLOPS", "1500 TFLOPS"]),
    ("memory.HBM3.capacity", ["40 GiB", "80 GiB", "160 GiB"]),
    ("interconnect.link_bandwidth", ["10 GB/s", "25 GB/s", "50 GB/s"]),
])
def test_more_bandwidth_peak_or_capacity_is_never_slower(path: str, values: list[str]) -> None:
    ev = _eval(chips=8, overrides={path: values})
    t = ev.metrics["step_time_s"]
    assert ev.feasible.all() and np.all(np.isfinite(t))
    assert np.all(np.diff(t) <= 1e-9 * t[:-1]), t


def test_pipeline_bubble_by_hand() -> None:
    """1F1B over pp stages idles (pp - 1) / m of the micro-batches' compute; interleaving
    with v chunks divides that by v."""
    for schedule, v in (("1f1b", 1), ("interleaved", 2)):
        wl = _wl(micro_batch=1, zero=0, recompute="none", sequence_parallel=False,
                 schedule=schedule, virtual_stages=v)
        ev = _eval(wl=wl, chips=8, tp=1, pp=4)
        m = ev.training["microbatches"][0]
        assert m == 64 / 2  # 2 replicas of 32 one-sequence micro-batches
        names = list(ev.ops_name)
        i = len(ev.op_traffic[0])  # the operators come first, then the collectives
        compute = sum(c * t for n, c, t in zip(names[:i], ev.ops_count[0, :i],
                                               ev.ops_time[0, :i], strict=True)
                      if not n.startswith("optimizer"))
        _, bubble = _op(ev, "pipeline.bubble")
        assert bubble == pytest.approx(3 / (v * m) * compute, rel=1e-9)


def test_interleaving_sends_v_times_per_micro_batch() -> None:
    """With v chunks per rank every micro-batch crosses v of a rank's stage boundaries each
    way: the stage-to-stage sends run 2 m v times (SC21 Sec. 2.2.2)."""
    for v in (1, 2, 4):
        wl = _wl(micro_batch=1, zero=0, recompute="none", sequence_parallel=False,
                 schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v)
        ev = _eval(wl=wl, chips=8, tp=1, pp=4)
        m = ev.training["microbatches"][0]
        count, _ = _op(ev, "stage_send")
        assert count == 2 * m * v
        assert ev.training["virtual_stages"][0] == v


def test_the_planner_chooses_the_pipeline_schedule() -> None:
    """Left open, the schedule is 1F1B or an interleaved split of a stage's whole layers
    (Llama-2-7B: 32 layers on 4 stages, 8 each: v in 1, 2, 4, 8), the fastest that fits;
    never interleaved when the micro-batches are not a multiple of the stages; a schedule
    the scenario names is kept."""
    from dse.model.execution import Execution
    from dse.model.training_setups import schedules

    ex = Execution(chips=8, tp=1, pp=4)
    assert schedules(ex.with_training(Training()), 32, 32) == [1, 2, 4, 8]
    assert schedules(ex.with_training(Training()), 32, 6) == [1]  # 6 micro-batches on 4 stages
    assert schedules(ex.with_training(Training(schedule="1f1b")), 32, 32) == [1]
    assert schedules(ex.with_training(Training(schedule="interleaved")), 32, 6) == [2, 4, 8]
    assert schedules(ex.with_training(Training(virtual_stages=4)), 32, 32) == [4]
    assert schedules(Execution(chips=8, tp=8, pp=1).with_training(Training()), 32, 32) == [1]
    open_ = _eval(wl=_wl(micro_batch=1, zero=0, recompute="none", sequence_parallel=False),
                  chips=8, tp=1, pp=4)
    times = []
    for v in (1, 2, 4, 8):
        fixed = _wl(micro_batch=1, zero=0, recompute="none", sequence_parallel=False,
                    schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v)
        ev = _eval(wl=fixed, chips=8, tp=1, pp=4)
        if ev.feasible[0]:
            times.append((float(ev.metrics["step_time_s"][0]), v))
    best_time, best_v = min(times)
    assert open_.training["virtual_stages"][0] == best_v
    assert float(open_.metrics["step_time_s"][0]) == pytest.approx(best_time, rel=1e-12)


def test_gradient_reduction_shows_only_beyond_the_last_backward() -> None:
    """ZeRO 0 on 8 chips over a slow network: the all-reduce of the 7B gradients (13.5 GB)
    runs under the last micro-batch's backward, and only its excess is in the step."""
    wl = _wl(micro_batch=1, zero=0, recompute="none")
    slow = _eval(wl=wl, chips=8, overrides={"interconnect.link_bandwidth": "5 GB/s"})
    count, exposed = _op(slow, "gradients.all_reduce")
    assert count == 1.0 and exposed > 0
    from dse.model.parallel import COLLECTIVES

    grads = 2.0 * 6_738_415_616  # bf16 gradients of every parameter on each chip
    _, sent = COLLECTIVES["all_reduce"](8, np.array(grads))
    assert exposed < float(sent) / (18 * 5e9)  # the whole transfer would take longer


def test_zero3_gathers_the_parameters_twice_per_micro_batch() -> None:
    ev = _eval(wl=_wl(micro_batch=2, zero=3, recompute="none"), chips=8)
    m = ev.training["microbatches"][0]
    # once for the forward, once for the backward: two collectives since each hides under
    # its own pass (issue 27, overlap windows)
    assert _op(ev, "parameters.gather")[0] == m
    assert _op(ev, "parameters.gather.backward")[0] == m
    assert _op(ev, "gradients.all_reduce")[0] == 0.0


def test_a_model_too_big_for_hbm_runs_with_its_optimizer_state_in_lpddr5x() -> None:
    """Llama-2-13B (16 x 13B = 208 GB of model states) on one GH200: the state that HBM
    cannot hold goes to LPDDR5X, and the optimizer's update is bound by it."""
    ev = _eval("gh200", _wl("llama2-13b"))
    assert ev.feasible[0]
    lp = list(ev.level_names).index("LPDDR5X")
    assert ev.memory_bytes[0, lp] > 30e9
    j = list(ev.ops_name).index("optimizer.step")
    assert ev.ops_bound[0, j] == "LPDDR5X"


def test_offload_confines_the_optimizer_state_to_the_named_level() -> None:
    """Llama-2-7B fits a GH200's HBM; offloading its optimizer state (ZeRO-Offload style)
    moves exactly that state to LPDDR5X."""
    wl = _wl(micro_batch=1, zero=0, recompute="none", offload={"to": "LPDDR5X"})
    on = _eval("gh200", _wl(micro_batch=1, zero=0, recompute="none"))
    off = _eval("gh200", wl)
    lp = list(off.level_names).index("LPDDR5X")
    assert on.memory_bytes[0, lp] == 0
    assert off.memory_bytes[0, lp] == pytest.approx(
        off.training["memory_offloaded_bytes"][0], rel=1e-9)
    assert off.metrics["step_time_s"][0] > on.metrics["step_time_s"][0]


def test_full_recomputation_costs_a_forward_and_stores_less() -> None:
    base = dict(micro_batch=1, zero=1, sequence_parallel=False)
    ev = {r: _eval(wl=_wl(recompute=r, **base), chips=8) for r in ("selective", "full")}
    hw = {r: e.metrics["hardware_flop_per_s_per_chip"][0] * e.metrics["step_time_s"][0]
          for r, e in ev.items()}
    assert hw["full"] / hw["selective"] == pytest.approx(4 / 3, rel=0.02)
    acts = {r: e.training["memory_activations_bytes"][0] for r, e in ev.items()}
    assert acts["full"] < acts["selective"] / 5


@pytest.mark.parametrize("training,kw,message", [
    ({"offload": {"to": "SSD"}}, {}, "training.offload.to: h100-sxm has no memory level 'SSD'"),
    ({"context_parallel": 2}, {}, "context_parallel (2) and expert_parallel (1) must divide"),
    ({"expert_parallel": 2}, {"chips": 2}, "2: expert parallelism must divide the "
                                           "experts of a MoE model"),
    ({}, {"precision": "int8"}, "precision: int8: training runs"),
])
def test_bad_training_setups_are_one_line_errors(training: dict, kw: dict,
                                                 message: str) -> None:
    with pytest.raises(DseError, match=re.escape(message)) as e:
        _eval(wl=_wl(**training), **kw)
    assert "\n" not in str(e.value)


def test_training_block_goes_with_phase_training(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dse.cli import app

    p = tmp_path / "w.yaml"
    p.write_text("base: llama2-7b\nname: w\nsource: t\nscenarios:\n"
                 "  s: {phase: decode, batch: 1, seq_in: 8, seq_out: 8, "
                 "training: {zero: 1}}\n")
    r = CliRunner().invoke(app, ["check", str(p)])
    assert r.exit_code == 2
    assert "training" in r.output and str(p) in r.output.splitlines()[0]


def test_context_parallelism_splits_each_sequence_and_gathers_k_and_v() -> None:
    """Llama-2-7B at 16,384 tokens on 8 chips: with 4 context-parallel ranks a rank runs a
    quarter of each sequence's tokens (GEMM rows) and a quarter of its attention pairs, and
    gathers every layer's K and V over the 4 ranks each micro-batch (32 heads x 128 x 2
    bytes x 16,384 tokens, twice)."""
    wl = dse.load_workload("llama2-7b")
    sc = Scenario(phase="training", batch=8, seq_in=16384, precision="bf16",
                  training=Training(micro_batch=1, zero=1, recompute="none",
                                    context_parallel=4))
    wl = wl.model_copy(update={"scenarios": {"long": sc}})
    ev = _eval(wl=wl, chips=8)
    assert ev.feasible[0]
    m = ev.training["microbatches"][0]
    assert m == 8 / 2  # 8 chips / 4 context ranks = 2 replicas of 4 sequences
    count, _ = _op(ev, "context.kv_all_gather")
    assert count == 32 * m
    from dse.workloads import lower

    rows = lower(wl, sc, chips=8)
    q = list(rows.name).index("q_proj")
    assert rows.shape[q, 0] == 16384 / 4  # GEMM rows: a quarter of the sequence


def test_expert_parallelism_splits_the_experts_and_routes_tokens() -> None:
    """Mixtral-8x7B on 16 chips (tp 2, so 8 data-parallel ranks), 8 expert-parallel ranks:
    a rank holds one of the 8
    experts and runs the top-2 rows of its tokens; each MoE layer sends the routed tokens
    to their experts and back, forward and backward."""
    wl = dse.load_workload("mixtral-8x7b")
    sc = Scenario(phase="training", batch=16, seq_in=4096, precision="bf16",
                  training=Training(micro_batch=1, zero=1, recompute="none",
                                    expert_parallel=8))
    wl = wl.model_copy(update={"scenarios": {"t": sc}})
    ev = _eval(wl=wl, chips=16, tp=2)
    assert ev.feasible[0]
    m = ev.training["microbatches"][0]
    assert m == 16 / 8
    count, _ = _op(ev, "experts.all_to_all")
    assert count == 2 * 32 * m
    from dse.workloads import lower

    t = lower(wl, sc, chips=8)
    up = list(t.name).index("expert_up_proj")
    # 4,096 tokens x 8 ranks offered to this rank's one expert: all of it touched, with
    # 4,096 x 2 rows (every token's top-2 over the 8 ranks' 8 experts)
    assert t.count[up] / (32 * m) == pytest.approx(1.0)
    assert t.shape[up, 0] == pytest.approx(4096 * 2)


def test_mfu_counts_model_flops_as_megatron_and_llm_foundry_do() -> None:
    """MFU's numerator is Megatron-LM's model FLOPs, 72 B s l h^2 (1 + s/6h + V/12lh) per
    step (Korthikanti et al. 2022, App. A): the whole s x s attention (a decoder's causal mask
    is not subtracted), no recomputation, no elementwise work. Hand value for GPT-3 175B at
    16 x 2,048 tokens, whatever setup runs: full recomputation changes the hardware FLOPs,
    not the model FLOPs."""
    b, s, layers, h, v = 16, 2048, 96, 12288, 50257
    megatron = 72 * b * s * layers * h**2 * (1 + s / (6 * h) + v / (12 * layers * h))
    wl = dse.load_workload("gpt3-175b")
    for recompute in ("none", "full"):
        sc = Scenario(phase="training", batch=b, seq_in=s, precision="bf16",
                      training=Training(recompute=recompute, micro_batch=1))
        w = wl.model_copy(update={"scenarios": {"train": sc}})
        ev = dse.evaluate(dse.load_hardware("h100-sxm"), w, chips=64, tp=8, pp=8)
        step = float(ev.metrics["step_time_s"][0])
        model = float(ev.metrics["model_flop_per_s_per_chip"][0]) * step * 64
        # GPT-3's biases add 2 FLOPs per weight column per token: 1e-4 of the total
        assert model == pytest.approx(megatron, rel=2e-4), recompute
        peak = 132 * 4096 * 1.83e9  # H100 SXM dense bf16: SMs x FLOP/cycle x clock
        assert float(ev.metrics["mfu"][0]) == pytest.approx(model / step / 64 / peak)
    # full recomputation executes a second forward: more hardware than model FLOPs
    hw_rate = float(ev.metrics["hardware_flop_per_s_per_chip"][0])
    assert hw_rate > 1.3 * float(ev.metrics["model_flop_per_s_per_chip"][0])


def test_fp8_training_runs_only_the_linear_layers_in_fp8() -> None:
    """Transformer Engine's FP8 recipe: the linear layers' GEMMs in FP8; attention, norms,
    activation functions, the LM head and the activations between operators in bf16 (as the
    activation planner counts them). FP8 inference keeps everything in FP8."""
    from dse.workloads import lower

    wl = dse.load_workload("llama2-7b")
    sc = Scenario(phase="training", batch=8, seq_in=2048, precision="fp8",
                  training=Training(micro_batch=1))
    t = lower(wl, sc, chips=1)
    kinds = dict(zip(t.name.tolist(), zip(t.kind.tolist(), t.dtype.tolist(), strict=True),
                     strict=True))
    assert kinds["q_proj"] == ("gemm", "fp8") and kinds["down_proj"] == ("gemm", "fp8")
    for name in ("attn_score", "attn_value", "softmax", "attn_norm", "activation", "lm_head"):
        assert kinds[name][1] == "bf16", name
    i = t.name.tolist().index("attn_residual")
    tokens, d = 2048, wl.d_model
    assert t.written[i, 1] == tokens * d * 2  # bf16 activations (column 1: activations)
    inference = lower(wl, Scenario(phase="prefill", batch=1, seq_in=2048, precision="fp8"))
    assert set(inference.dtype.tolist()) == {"fp8"}
    # the MFU is against the FP8 peak, and FP8 gains less than the 2x of its peak
    runs = {}
    for p in ("bf16", "fp8"):
        w = wl.model_copy(update={"scenarios": {"t": sc.model_copy(update={"precision": p})}})
        runs[p] = _eval(wl=w, chips=8)
    fp8, bf16 = (float(runs[p].metrics["tokens_per_s"][0]) for p in ("fp8", "bf16"))
    assert 1.0 < fp8 / bf16 < 1.9
    model = float(runs["fp8"].metrics["model_flop_per_s_per_chip"][0])
    peak = 132 * 8192 * 1.83e9  # H100 SXM dense fp8
    assert float(runs["fp8"].metrics["mfu"][0]) == pytest.approx(model / peak)
