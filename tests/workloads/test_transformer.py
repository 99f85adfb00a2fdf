"""Lowering of Transformer scenarios: hand-computed layers, invariants, the shipped library."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.check import check_file
from dse.errors import DseError, SpecError
from dse.spec.load import library_names, load_workload
from dse.spec.workload import Scenario, TransformerSpec, gemm_from_name, parameter_counts
from dse.workloads import lower, scenario_for

BAD = Path(__file__).resolve().parent.parent / "data" / "bad_workloads"


def tiny(**kw) -> TransformerSpec:
    base = {"name": "tiny", "kind": "transformer", "source": "test", "architecture": "decoder",
            "layers": 1, "d_model": 8, "heads": 2, "d_ff": 16, "vocab": 10, "bias": False,
            "position": "none", "scenarios": {"s": {"phase": "prefill", "seq_in": 4}}}
    base.update(kw)
    return TransformerSpec.model_validate(base)


def rows(table):
    return {str(n): i for i, n in enumerate(table.name)}


def test_one_decoder_layer_prefill_by_hand():
    # d=8, 2 heads of 4, 1 KV head (MQA), d_ff=16 gelu, batch 1, 4 tokens, bf16 (2 B).
    m = tiny(kv_heads=1)
    t = lower(m, Scenario(phase="prefill", batch=1, seq_in=4, precision="bf16"))
    r = rows(t)
    q, k = r["q_proj"], r["k_proj"]
    assert t.flops[q] == 2 * 4 * 8 * 8  # 2*M*N*K
    assert t.flops[k] == 2 * 4 * 4 * 8  # N = kv_heads * head_dim = 4
    assert t.read[q, 0] == 8 * 8 * 2  # weights K*N*2 B
    assert t.read[q, 1] == 4 * 8 * 2  # activations M*K*2 B
    assert t.written[k, 2] == 4 * 4 * 2  # the 4 new K entries go to the KV cache
    s = r["attn_score"]
    pairs = 4 * 4 - 4 * 3 / 2  # causal: 10 (query, key) pairs per head
    assert t.flops[s] == 2 * 2 * pairs * 4  # 2 FLOP x heads x pairs x head_dim
    assert t.read[s, 2] == 1 * 4 * 4 * 2  # K: 1 KV head x 4 positions x 4 x 2 B
    assert t.written[s, 1] == 2 * pairs * 2  # scores: heads x pairs x 2 B
    assert t.flops[r["softmax"]] == 4 * 2 * pairs
    assert t.flops[r["up_proj"]] == 2 * 4 * 16 * 8
    assert t.flops[r["activation"]] == 10 * 4 * 16  # GELU, 10 FLOP per element
    assert t.flops[r["attn_norm"]] == 8 * 4 * 8  # LayerNorm, 8 FLOP per element
    # LM head on the last token only (time to first token): 2 * 1 * vocab * d
    assert t.flops[r["lm_head"]] == 2 * 1 * 10 * 8
    assert t.count[r["q_proj"]] == 1 and t.count[r["lm_head"]] == 1


def test_encoder_attention_is_full_and_has_no_kv_cache():
    m = tiny(architecture="encoder", max_positions=16, position="learned",
             scenarios={"s": {"phase": "inference", "seq_in": 4}})
    t = lower(m, Scenario(phase="inference", batch=2, seq_in=4, precision="int8"))
    s = rows(t)["attn_score"]
    assert t.flops[s] == 2 * (2 * 2 * 4 * 4) * 4  # batch x heads x s^2 pairs x head_dim
    assert t.total_bytes()["kv_cache"] == 0
    assert "lm_head" not in rows(t)


def test_decode_equals_the_sum_of_its_steps():
    m = tiny(kv_heads=1)
    whole = lower(m, Scenario(phase="decode", batch=3, seq_in=5, seq_out=7))
    steps = [lower(m, Scenario(phase="decode", batch=3, seq_in=5 + t, seq_out=1))
             for t in range(7)]
    assert whole.total_flops == pytest.approx(sum(s.total_flops for s in steps), rel=1e-12)
    for cls in ("weights", "activations", "kv_cache"):
        assert whole.total_bytes()[cls] == pytest.approx(
            sum(s.total_bytes()[cls] for s in steps), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(heads=st.sampled_from([8, 16, 32]), group=st.sampled_from([1, 2, 4, 8]),
       seq_in=st.integers(0, 4096), seq_out=st.integers(1, 512), batch=st.integers(1, 64))
def test_gqa_divides_kv_bytes_exactly(heads, group, seq_in, seq_out, batch):
    mha = tiny(d_model=heads * 8, heads=heads, d_ff=64)
    gqa = tiny(d_model=heads * 8, heads=heads, kv_heads=heads // group, d_ff=64)
    sc = Scenario(phase="decode", batch=batch, seq_in=seq_in, seq_out=seq_out)
    full, grouped = lower(mha, sc), lower(gqa, sc)
    assert full.total_bytes()["kv_cache"] == pytest.approx(
        group * grouped.total_bytes()["kv_cache"], rel=1e-12)
    assert np.all(np.isfinite(grouped.flops)) and grouped.total_flops > 0


def test_moe_flops_scale_with_top_k_and_weights_with_experts():
    def moe(experts, top_k):
        return tiny(ffn="swiglu", moe={"experts": experts, "top_k": top_k})

    sc = Scenario(phase="prefill", batch=64, seq_in=512)  # enough tokens to touch every expert

    def ffn_flops(model):
        t = lower(model, sc)
        return t.select(np.char.startswith(t.name.astype(str), "expert_")).total_flops

    assert ffn_flops(moe(8, 2)) == pytest.approx(2 * ffn_flops(moe(8, 1)), rel=1e-12)
    assert ffn_flops(moe(8, 2)) == pytest.approx(ffn_flops(moe(16, 2)), rel=1e-12)
    one_expert = parameter_counts(moe(2, 1))["ffn"] / 2
    assert parameter_counts(moe(8, 2))["ffn"] == 8 * one_expert
    assert parameter_counts(moe(8, 2))["active"] == parameter_counts(moe(8, 2))["total"] - \
        6 * one_expert
    # in decode a single token touches only top_k experts
    t = lower(moe(8, 2), Scenario(phase="decode", batch=1, seq_in=0, seq_out=1))
    up = rows(t)["expert_up_proj"]
    assert t.count[up] == pytest.approx(2.0)


def test_training_is_forward_plus_twice_backward():
    """A step of 2 sequences in micro-batches of 1: every forward row twice, the backward
    twice its FLOPs, recomputation listed but not run, and one optimizer update of every
    parameter (Adam: 12 operations each)."""
    m = tiny()
    train = lower(m, Scenario(phase="training", batch=2, seq_in=8))
    fwd = train.select(train.stage == "forward")
    one = lower(m, Scenario(phase="prefill", batch=1, seq_in=8))
    q = list(one.name).index("q_proj")
    assert fwd.count[list(fwd.name).index("q_proj")] == 2 * one.count[q]
    assert fwd.flops[list(fwd.name).index("q_proj")] == one.flops[q]
    steps = train.select(train.stage != "optimizer")
    assert steps.total_flops == pytest.approx(3 * fwd.total_flops)
    assert train.select(train.stage == "recompute").total_flops == 0
    opt = train.select(train.stage == "optimizer")
    assert opt.total_flops == pytest.approx(12 * parameter_counts(m)["total"])
    assert train.total_bytes()["gradients"] > 0
    assert train.total_bytes()["kv_cache"] == 0


def test_weight_only_quantization_bytes():
    m = tiny(d_model=128, heads=2, d_ff=256)
    sc = {p: lower(m, Scenario(phase="decode", batch=1, seq_in=0, seq_out=1, precision=p))
          for p in ("bf16", "w8a16", "w4a16")}
    q = {p: sc[p].read[rows(sc[p])["q_proj"], 0] for p in sc}
    assert q["bf16"] == 128 * 128 * 2
    assert q["w8a16"] == 128 * 128 * 1
    assert q["w4a16"] == 128 * 128 * (0.5 + 2 / 128)  # fp16 scale per group of 128
    assert sc["w4a16"].dtype[0] == "fp16"


# Published parameter counts (model cards, papers, Hugging Face configs); 1% tolerance.
PUBLISHED = {
    "bert-base": 1.10e8, "bert-large": 3.351e8, "gpt2": 1.24e8, "gpt3-175b": 1.75e11,
    "gpt-1t": 1.008e12, "llama2-7b": 6.74e9, "llama2-13b": 1.30e10, "llama2-70b": 6.90e10,
    "llama3-8b": 8.03e9, "llama3-70b": 7.06e10, "llama3-405b": 4.05e11, "mpt-7b": 6.7e9,
    "mpt-13b": 1.285e10, "mixtral-8x7b": 4.67e10,
}


def test_library_is_complete():
    assert set(PUBLISHED) <= set(library_names("workload"))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_published(name):
    assert parameter_counts(load_workload(name))["total"] == pytest.approx(
        PUBLISHED[name], rel=0.01)


@pytest.mark.parametrize("name", library_names("workload"))
def test_every_shipped_workload_lowers_in_every_scenario(name):
    spec = load_workload(name)
    for scenario in spec.scenarios:
        sc = scenario_for(spec, scenario)
        if sc.batch == "max":  # resolved against hardware by the performance model
            sc = scenario_for(spec, scenario, batch=4)
        table = lower(spec, sc)
        assert len(table) > 0
        assert np.all(np.isfinite(table.flops)) and np.all(table.flops >= 0)
        assert table.total_flops > 0 and table.total_bytes()["total"] > 0


def test_gemm_names():
    spec = gemm_from_name("gemm:1024x10240x5120")
    t = lower(spec, scenario_for(spec))
    assert t.total_flops == 2 * 1024 * 10240 * 5120
    assert t.read[0, 0] == 5120 * 10240 * 2  # bf16 weights K x N
    batched = gemm_from_name("gemm:8x64x64x32")
    assert lower(batched, scenario_for(batched)).total_flops == 2 * 8 * 64 * 64 * 32
    assert load_workload("gemm:2x3x4").k == 4
    for bad in ("gemm:1x2", "gemm:0x2x3", "gemm:axbxc"):
        with pytest.raises(DseError, match="expected gemm:MxNxK"):
            gemm_from_name(bad)


def test_scenario_overrides_and_errors():
    spec = load_workload("llama2-7b")
    sc = scenario_for(spec, None, seq_in=1000, precision="fp8")
    assert sc.seq_in == 1000 and sc.precision == "fp8"
    with pytest.raises(DseError, match="unknown scenario 'nope'"):
        scenario_for(spec, "nope")
    with pytest.raises(DseError, match="needs seq_out >= 1"):
        scenario_for(spec, None, phase="decode", seq_out=0)
    with pytest.raises(DseError, match="phase inference is for encoders"):
        lower(spec, scenario_for(spec, None, phase="inference"))
    with pytest.raises(DseError, match="a transformer workload runs phase prefill, decode, "
                                       "serve, inference or training, not gemm"):
        lower(spec, scenario_for(spec, None, phase="gemm"))


BAD_WORKLOADS = {
    "unknown_key.yaml": ':3:1: d_modle: unknown key; did you mean "d_model"?',
    "gqa_mismatch.yaml": ":3:11: kv_heads: expected a divisor of heads (12)",
    "bad_phase.yaml": ":4:17: scenarios.chat.phase: unknown value 'decoding'",
    "bad_kind.yaml": ":1:7: kind: expected a workload kind (transformer, gemm, recommender)",
    "moe_topk.yaml": ":3:6: moe: top_k (8) exceeds experts (4)",
}


@pytest.mark.parametrize("name,part", BAD_WORKLOADS.items())
def test_bad_workload_files(name, part):
    with pytest.raises(SpecError) as info:
        check_file(BAD / name)
    assert len(info.value.issues) == 1
    assert part in str(info.value)
