"""Training memory planner (dse.model.training_memory, dse.model.activation_memory) against
hand-computed numbers, Korthikanti et al.'s formulas and the "AI and Memory Wall" table."""

import csv
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.model import activation_memory as am
from dse.model.training_memory import (
    GRAD_BUCKET_BYTES,
    TrainingMemory,
    TrainingPlan,
    plan_training_memory,
    recompute_flop_multiplier,
    state_bytes_per_parameter,
)
from dse.spec.load import load_workload
from dse.spec.workload import MoE, Scenario, TransformerSpec, parameter_counts

# a copy of shared/data/memory_wall/training_memory_breakdown.csv (MIT, Gholami et al.)
MEMORY_WALL = Path(__file__).resolve().parents[1] / "data" / "memory_wall"
TRAINING = {"t": Scenario(phase="training", seq_in=128)}


def small(**kw) -> TransformerSpec:
    """2 layers, h 64, 4 heads, GELU d_ff 256, vocab 1000, no biases, RMSNorm, untied head."""
    base = dict(name="small", source="hand-built test model", kind="transformer",
                architecture="decoder", layers=2, d_model=64, heads=4, d_ff=256, ffn="gelu",
                vocab=1000, bias=False, norm="rmsnorm", position="rope", scenarios=TRAINING)
    return TransformerSpec(**{**base, **kw})


@pytest.fixture(scope="module")
def gpt3() -> TransformerSpec:
    return load_workload("gpt3-175b")


# ---- 1. model states: the 16P rule -------------------------------------------------------

def test_bytes_per_parameter_conventions():
    per = {(p, o): sum(float(x) for x in state_bytes_per_parameter(p, o))
           for p in ("fp32", "mixed16") for o in ("sgd", "momentum", "adam")}
    assert per["mixed16", "adam"] == 16  # ZeRO Sec. 3.1: 2 + 2 + K=12
    assert [float(x) for x in state_bytes_per_parameter("mixed16", "adam")] == [2, 2, 12]
    assert per["mixed16", "momentum"] == 12  # 2 + 2 + fp32 master 4 + momentum 4
    assert per["mixed16", "sgd"] == 8        # 2 + 2 + fp32 master 4
    assert per["fp32", "adam"] == 16         # 4 + 4 + m, v 8
    assert per["fp32", "momentum"] == 12
    assert per["fp32", "sgd"] == 8
    # a Shampoo-style optimizer with 4 fp32 words of state per parameter
    assert float(state_bytes_per_parameter("mixed16", "adam", 4.0)[2]) == 4 + 16
    # arrays of names broadcast
    opt = state_bytes_per_parameter(np.array(["fp32", "mixed16"]), "momentum")[2]
    assert opt.tolist() == [4.0, 8.0]


def test_gpt3_175b_model_states_are_about_2_8_tb(gpt3):
    r = plan_training_memory(gpt3, TrainingPlan(seq=2048))
    states = float(r.parameters + r.gradients + r.optimizer_state)
    assert states == 16 * parameter_counts(gpt3)["total"]  # 174,604,259,328 parameters
    assert states == pytest.approx(2.8e12, rel=0.01)       # 2.794e12 bytes
    # data parallelism without ZeRO-3 adds one 25 MiB gradient bucket to the temporaries
    dp2 = plan_training_memory(gpt3, TrainingPlan(seq=2048, dp=2))
    assert float(dp2.temporary - r.temporary) == GRAD_BUCKET_BYTES


# ---- 2. a small model under each ZeRO stage (exact bytes) --------------------------------

def test_small_model_under_each_zero_stage():
    m = small()
    # per layer: attention 4*64*64 = 16384, FFN 2*64*256 = 32768, two norms 128 -> 49280;
    # embeddings 64000 + final norm 64; untied head 64000
    psi = 2 * 49280 + 64064 + 64000
    assert psi == parameter_counts(m)["total"] == 226624
    expect = {  # dp = 4, mixed-precision Adam: (parameters, gradients, optimizer state)
        0: (2 * psi, 2 * psi, 12 * psi),
        1: (2 * psi, 2 * psi, 12 * psi / 4),
        2: (2 * psi, 2 * psi / 4, 12 * psi / 4),
        3: (2 * psi / 4, 2 * psi / 4, 12 * psi / 4),
    }
    for stage, (p, g, o) in expect.items():
        r = plan_training_memory(m, TrainingPlan(seq=128, dp=4, zero=stage))
        assert (float(r.parameters), float(r.gradients), float(r.optimizer_state)) == (p, g, o)
    # temporaries: the 16-bit logits buffer (128 tokens x 1000) plus the gradient bucket
    # (capped by the gradients: all of them here) for stages 0-2, or ZeRO-3's two gathered
    # layers of 16-bit weights and one layer's gradients (49152 = 49280 - the two norms)
    temp = [float(plan_training_memory(m, TrainingPlan(seq=128, dp=4, zero=z)).temporary)
            for z in range(4)]
    logits = 2 * 128 * 1000
    assert temp == [logits + 2 * psi, logits + 2 * psi, logits + 2 * psi / 4,
                    logits + 49152 * (2 * 2 + 2)]
    # vectorized over the stages at once
    r = plan_training_memory(m, TrainingPlan(seq=128, dp=4, zero=np.arange(4)))
    assert r.optimizer_state.tolist() == [e[2] for e in expect.values()]


def test_tensor_and_pipeline_split_of_the_small_model():
    m = small()
    # tp 2: norms (2 per layer + the final one) replicated, everything else halved
    r = plan_training_memory(m, TrainingPlan(seq=128, tp=2, precision="fp32", optimizer="sgd"))
    assert float(r.parameters) == 4 * ((226624 - 4 * 64 - 64) / 2 + 4 * 64 + 64)
    # pp 2: one layer per stage; the first holds the embeddings, the last the head
    first = plan_training_memory(m, TrainingPlan(seq=128, pp=2), stage="first")
    last = plan_training_memory(m, TrainingPlan(seq=128, pp=2), stage="last")
    assert float(first.parameters) == 2 * (49280 + 64064)
    assert float(last.parameters) == 2 * (49280 + 64000)
    # tied embeddings: the last stage keeps its own copy of the word table
    tied = plan_training_memory(small(tied_embeddings=True), TrainingPlan(seq=128, pp=2),
                                stage="last")
    assert float(tied.parameters) == 2 * (49280 + 64000)


def test_offload_and_fp8_and_moe_sharding():
    m = small()
    psi = 226624
    r = plan_training_memory(m, TrainingPlan(seq=128, offload_optimizer=True,
                                             offload_params=0.5))
    assert float(r.optimizer_state) == 0 and float(r.offloaded_optimizer_state) == 12 * psi
    assert float(r.parameters) == float(r.offloaded_parameters) == psi
    assert float(r.offloaded) == 13 * psi
    # FP8: + 2 bytes per layer parameter of cached FP8 weights (and their transpose)
    r8 = plan_training_memory(m, TrainingPlan(seq=128, precision="mixed8"))
    assert float(r8.parameters) == 2 * psi + 2 * 2 * 49280
    # MoE: 4 experts, ep 2 shards only the experts; ZeRO shards them over dp / ep
    moe = small(moe=MoE(experts=4, top_k=2))
    pc = parameter_counts(moe)
    routed = pc["ffn"]
    r = plan_training_memory(moe, TrainingPlan(seq=128, ep=2, dp=4, zero=1))
    assert float(r.parameters) == 2 * (pc["total"] - routed + routed / 2)
    assert float(r.optimizer_state) == 12 * ((pc["total"] - routed) / 4 + routed / 2 / 2)


# ---- 3. activations against Korthikanti et al. (MLSys 2023) Sec. 4 -----------------------

def korthikanti(m, s, b, t=1, sp=False, selective=False):
    """Their per-layer bytes (Eqs. 1-4): 16-bit activations with dropout."""
    h, a = m.d_model, m.heads
    scores = 0 if selective else 5 * a * s / h
    if sp:
        return s * b * h / t * (34 + scores)
    return s * b * h * (10 + 24 / t + scores / t)


@pytest.mark.parametrize("t,sp,rec", [(1, False, "none"), (8, False, "none"),
                                      (8, True, "none"), (8, True, "selective"),
                                      (4, False, "selective"), (1, False, "selective")])
def test_layer_activations_match_korthikanti(gpt3, t, sp, rec):
    s, b = 2048, 2
    got = am.layer_activation_bytes(gpt3, s, b, tp=t, sequence_parallel=sp, recompute=rec,
                                    dropout=True)
    assert float(got) == pytest.approx(korthikanti(gpt3, s, b, t, sp, rec == "selective"),
                                       rel=1e-12)


def test_general_layer_reduces_to_34_plus_5as_over_h(gpt3):
    """The tensor list sums to 34 (s*b*h bytes) and 5 (a*s^2*b bytes) for GELU, 4h, MHA."""
    h, a = gpt3.d_model, gpt3.heads
    tensors = am.stored_tensors(gpt3)
    per_token = sum(x.per_token * (1 if x.mask else 2) for x in tensors) / h
    per_pair = sum(x.per_pair * (1 if x.mask else 2) for x in tensors) / a
    assert (per_token, per_pair) == (34, 5)


def test_full_recompute_keeps_the_layer_input(gpt3):
    s, b, h, t = 2048, 1, gpt3.d_model, 8
    full = am.layer_activation_bytes(gpt3, s, b, recompute="full", dropout=True)
    assert float(full) == 2 * s * b * h
    full_sp = am.layer_activation_bytes(gpt3, s, b, tp=t, sequence_parallel=True,
                                        recompute="full")
    assert float(full_sp) == 2 * s * b * h / t


def test_full_recompute_saves_5x_or_more_at_a_third_more_compute(gpt3):
    s = 2048
    none = am.layer_activation_bytes(gpt3, s, 1, dropout=True)
    full = am.layer_activation_bytes(gpt3, s, 1, recompute="full", dropout=True)
    # (34 + 5 * 96 * 2048 / 12288) / 2 = 114 / 2 = 57x per layer
    assert float(none / full) == pytest.approx(57.0)
    plan = TrainingPlan(seq=s, dropout=True, recompute=np.array(["none", "full"]))
    whole = plan_training_memory(gpt3, plan).activations  # + embedding and output layer
    assert whole[0] / whole[1] > 5   # 51.4x with the embedding and output layers
    # compute: Korthikanti Sec. 5, 96sh^2L(1 + s/6h + V/16hL) / 72sh^2L(1 + s/6h + V/12hL)
    h, L, V = gpt3.d_model, gpt3.layers, gpt3.vocab
    ratio = 96 * (1 + s / (6 * h) + V / (16 * h * L)) / (72 * (1 + s / (6 * h)
                                                              + V / (12 * h * L)))
    assert float(recompute_flop_multiplier(gpt3, s, "full")) == pytest.approx(ratio, 1e-12)
    assert ratio == pytest.approx(1.332, abs=1e-3)
    # selective: + 4s^2h per layer (QK^T and PV again): 0.9% for GPT-3 at 2048
    sel = 1 + 4 * s * s * h * L / (72 * s * h * h * L * (1 + s / (6 * h) + V / (12 * h * L)))
    assert float(recompute_flop_multiplier(gpt3, s, "selective")) == pytest.approx(sel, 1e-12)


def test_pipeline_first_stage_and_output_layer(gpt3):
    s, b, t, p, L, h = 2048, 1, 8, 8, gpt3.layers, gpt3.d_model
    layer = korthikanti(gpt3, s, b, t, sp=True, selective=True)
    mask = s * b * h / t  # embedding dropout mask, 1 byte (Sec. 4.2.4)
    base = dict(seq=s, micro_batch=b, global_batch=1536, tp=t, pp=p, dp=16,
                sequence_parallel=True, recompute="selective", dropout=True)
    # 1F1B: p micro-batches of L/p layers = L layers' worth, p embedding masks
    first = plan_training_memory(gpt3, TrainingPlan(**base), stage="first")
    assert float(first.activations) == pytest.approx(L * layer + p * mask, rel=1e-12)
    # interleaved, v = 3: L(1 + (p - 1)/(p v)) layers' worth (Sec. 4.2.3)
    inter = plan_training_memory(gpt3, TrainingPlan(**base, schedule="interleaved",
                                                    virtual_stages=3), stage="first")
    assert float(inter.activations) == pytest.approx(
        L * (1 + (p - 1) / (p * 3)) * layer + p * mask, rel=1e-12)
    # fewer micro-batches than stages: only those are in flight
    few = plan_training_memory(gpt3, TrainingPlan(**{**base, "global_batch": 64}),
                               stage="first")
    assert float(few.activations) == pytest.approx(4 * L / p * layer + 4 * mask, rel=1e-12)
    # one stage: + sbh/t (1 + 4) + 4sbv/t for the embedding and output layers (Sec. 4.2.4)
    one = plan_training_memory(gpt3, TrainingPlan(**{**base, "pp": 1}))
    out = s * b * h / t * 5 + 4 * s * b * gpt3.vocab / t
    assert float(one.activations) == pytest.approx(L * layer + out, rel=1e-12)
    # context parallel 2 halves everything sequence-proportional
    cp2 = plan_training_memory(gpt3, TrainingPlan(**{**base, "pp": 1, "cp": 2}))
    assert float(cp2.activations) == pytest.approx((L * layer + out) / 2, rel=1e-12)


def test_compression_divides_stored_activations():
    m = small()
    a1, a4 = (plan_training_memory(m, TrainingPlan(seq=128, compression=c)) for c in (1, 4))
    assert float(a4.activations) == pytest.approx(float(a1.activations) / 4)
    # the layer being back-propagated is decompressed: one layer's 3/4 in the temporary
    layer = float(am.layer_activation_bytes(m, 128, 1))
    assert float(a4.temporary - a1.temporary) == pytest.approx(layer * 3 / 4)


def test_gqa_swiglu_moe_and_fp8_layers_by_hand():
    s, b = 100, 3
    m = small(d_model=64, heads=8, kv_heads=2, d_ff=160, ffn="swiglu")  # d = 8, g*d = 16
    # per token: norm1 64, qkv in 64, Q 64, K 16, V 16, scores 8s, proj in 64, norm2 64,
    # fc1 in 64, gate + up 320, fc2 in 160 -> 896 + 8s elements, 2 bytes each
    assert float(am.layer_activation_bytes(m, s, b)) == 2 * s * b * (896 + 8 * s)
    # tp 4 (no SP): norms, qkv and fc1 inputs replicated (256); Q, scores, proj, FFN / 4;
    # K and V over min(4, 2 KV heads) = 2
    tp4 = am.layer_activation_bytes(m, s, b, tp=4)
    assert float(tp4) == 2 * s * b * (256 + 16 + 8 + 8 + 2 * s + 16 + 80 + 40)
    # FP8: qkv, proj, fc1, fc2 inputs at 1 byte (64 + 64 + 64 + 160 elements)
    fp8 = am.layer_activation_bytes(m, s, b, precision="mixed8")
    assert float(fp8) == s * b * (2 * (896 + 8 * s) - 352)
    # MoE, top 2 of 4: twice the expert tensors, + permuted inputs 128, router probs 4,
    # expert outputs 128
    moe = small(d_model=64, heads=8, kv_heads=2, d_ff=160, ffn="swiglu",
                moe=MoE(experts=4, top_k=2))
    assert float(am.layer_activation_bytes(moe, s, b)) == \
        2 * s * b * (896 + 8 * s + 480 + 128 + 4 + 128)


# ---- 4. properties -----------------------------------------------------------------------

SPECS = [small(layers=8, heads=8, kv_heads=4, d_model=128, d_ff=320, ffn="swiglu"),
         small(layers=8, heads=8, d_model=128, moe=MoE(experts=8, top_k=2),
               tied_embeddings=True)]
plans = st.fixed_dictionaries({
    "seq": st.sampled_from([64, 512, 4096]), "micro_batch": st.integers(1, 4),
    "tp": st.sampled_from([1, 2, 4]), "pp": st.sampled_from([1, 2, 4]),
    "dp": st.sampled_from([1, 2, 8]), "cp": st.sampled_from([1, 2]),
    "ep": st.sampled_from([1, 2]), "sequence_parallel": st.booleans(),
    "zero": st.integers(0, 3), "recompute": st.sampled_from(am.RECOMPUTE),
    "schedule": st.sampled_from(["1f1b", "interleaved"]),
    "virtual_stages": st.sampled_from([1, 2]), "compression": st.sampled_from([1.0, 3.5]),
    "offload_optimizer": st.sampled_from([0.0, 0.5, 1.0]),
    "offload_params": st.sampled_from([0.0, 1.0]), "dropout": st.booleans(),
    "precision": st.sampled_from(am.PRECISIONS),
    "optimizer": st.sampled_from(["sgd", "momentum", "adam"]),
    "accumulation": st.integers(1, 16),
})


def make(d: dict) -> TrainingPlan:
    d = dict(d)
    acc = d.pop("accumulation")
    return TrainingPlan(**d, global_batch=d["micro_batch"] * d["dp"] * acc)


SHARDED = ("parameters", "gradients", "optimizer_state")


@settings(max_examples=150, deadline=None)
@given(plans, st.sampled_from(["dp", "tp", "pp"]), st.integers(0, 1),
       st.sampled_from(["first", "last"]))
def test_more_chips_never_increase_the_sharded_parts(d, axis, which, stage):
    m = SPECS[which]
    lo = plan_training_memory(m, make(d), stage=stage)
    hi = plan_training_memory(m, make({**d, axis: d[axis] * 2}), stage=stage)
    for name in SHARDED:
        assert getattr(hi, name) <= getattr(lo, name) * (1 + 1e-12), name
    if axis in ("dp", "tp"):  # activations too (more dp: fewer micro-batches in flight)
        assert hi.activations <= lo.activations * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(plans, st.integers(0, 1))
def test_outputs_are_finite_and_non_negative(d, which):
    r = plan_training_memory(SPECS[which], make(d))
    for name, value in vars(r).items():
        assert np.all(np.isfinite(value)) and np.all(value >= 0), name
    assert r.total == pytest.approx(r.parameters + r.gradients + r.optimizer_state
                                    + r.activations + r.temporary)
    assert r.recompute_flop_multiplier >= 1


@settings(max_examples=25, deadline=None)
@given(st.lists(plans, min_size=1, max_size=6), st.integers(0, 1),
       st.sampled_from(["busiest", "first", "last"]))
def test_vectorized_equals_scalar_per_element(ds, which, stage):
    m = SPECS[which]
    scalar = [plan_training_memory(m, make(d), stage=stage) for d in ds]
    cols = {k: np.array([d[k] for d in ds]) for k in ds[0]}
    vector = plan_training_memory(m, make(cols), stage=stage)
    for name in vars(vector):
        got = getattr(vector, name)
        assert got.shape == (len(ds),)
        want = np.array([getattr(r, name) for r in scalar])
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)


def test_bad_choices_raise():
    with pytest.raises(ValueError, match="recompute"):
        plan_training_memory(small(), TrainingPlan(seq=8, recompute="some"))
    with pytest.raises(ValueError, match="zero"):
        plan_training_memory(small(), TrainingPlan(seq=8, zero=4))
    with pytest.raises(ValueError, match="compression"):
        plan_training_memory(small(), TrainingPlan(seq=8, compression=0.5))
    assert isinstance(plan_training_memory(small(), TrainingPlan(seq=8)), TrainingMemory)


# ---- 5. "AI and Memory Wall" (Gholami et al., IEEE Micro 2024), Fig. 3 / the repo's table --
# The paper's convention, worked out from its numbers: parameters in fp32 (4 B), optimizer =
# Adam's m and v in fp32 (8 B; no gradients, no master copy: the total is the sum of the
# three columns), activations = fp32 inputs of every matrix multiply of the Transformer
# layers, each stored once (X for QKV, Q, K, the a x s x s scores, V, the attention context,
# the FFN input and the FFN activation output: 10sh + as^2 per layer and sequence for GPT-style
# layers), no embedding or logits, x batch. That count reproduces the repo's own "#Features"
# column: BERT Large 226.5M (230M), GPT-2 1.5B 2045M at 1024 (2,000M), GPT-3 62.8B (63,000M),
# Transformer base 77.07M (77M), GPT-1 85.0M (85M).
ROWS = {  # training_memory_breakdown.csv, as printed (GB)
    "Transformer Big (WMT)": dict(seq=512, batch=6, params=1.02, optimizer=2.04,
                                  activations=11.78),
    "BERT Large": dict(seq=512, batch=16, params=1.32, optimizer=2.64, activations=14.38),
    "GPT-2": dict(seq=2014, batch=1, params=5.86, optimizer=11.62, activations=8.63),
}
PAPER = dict(precision="fp32", optimizer="adam", activation_count="matmul_inputs")


def gpt2_xl() -> TransformerSpec:
    """GPT-2 1.5B (48 layers, 1600 wide, 25 heads, n_ctx 1024; Radford et al. 2019 Table 2):
    the row's 5.86 GB of fp32 parameters is 1.47B, not the 124M of workloads/gpt2.yaml."""
    return load_workload("gpt2").model_copy(update=dict(
        name="gpt2-xl", layers=48, d_model=1600, heads=25, d_ff=6400))


def paper_columns(m: TransformerSpec, seq: int, batch: int) -> tuple[float, float, float]:
    r = plan_training_memory(m, TrainingPlan(seq=seq, micro_batch=batch, **PAPER))
    return float(r.parameters), float(r.optimizer_state), float(r.activations)


def encoder_decoder(seq: int, batch: int, h: int = 1024, heads: int = 16,
                    d_ff: int = 4096) -> tuple[float, float, float]:
    """Vaswani et al. 2017 Transformer (defaults: big; base is h 512, 8 heads, d_ff 2048):
    6 + 6 layers, ReLU, a shared 37000-token BPE vocabulary tied across both embeddings and
    the softmax. Encoder and decoder are planned as two stacks; the decoder's cross-attention
    (4h^2 + 4h weights and a LayerNorm per layer; matmul inputs: its Q input, Q, K, the
    scores, V, the context = 5sh + as^2, its K/V input being the encoder output, stored
    once) is added by hand."""
    kw = dict(layers=6, d_model=h, heads=heads, d_ff=d_ff, ffn="relu", vocab=37000,
              tied_embeddings=True, bias=True, norm="layernorm", position="none")
    enc, dec = small(architecture="encoder", **kw), small(**kw)
    params = (parameter_counts(enc)["total"] + parameter_counts(dec)["total"]
              - 37000 * h + 6 * (4 * h * h + 4 * h + 2 * h))
    cross = 6 * 4 * batch * seq * (5 * h + heads * seq)
    acts = sum(paper_columns(x, seq, batch)[2] for x in (enc, dec)) + cross
    return 4 * params, 8 * params, acts


def test_table_rows_are_the_shared_csv():
    path = MEMORY_WALL / "training_memory_breakdown.csv"
    rows = {r["model"]: r for r in csv.DictReader(path.open())}
    for name, row in ROWS.items():
        got = rows[name]
        assert int(got["input_resolution_or_sentence_length"]) == row["seq"]
        assert int(got["batch_size"]) == row["batch"]
        assert [float(got[f"{k}_memory_gb"]) for k in ("params", "optimizer", "activation")] \
            == [row["params"], row["optimizer"], row["activations"]]


def check_row(name: str, got: tuple[float, float, float]) -> None:
    row = ROWS[name]
    for value, key in zip(got, ("params", "optimizer", "activations"), strict=True):
        assert value / 1e9 == pytest.approx(row[key], rel=0.10), key


def test_bert_large_row():
    # 1.341 / 2.681 / 14.50 GB vs 1.32 / 2.64 / 14.38: +1.6%, +1.6%, +0.8%
    check_row("BERT Large", paper_columns(load_workload("bert-large"), 512, 16))


def test_gpt2_row():
    # the table's "2014" tokens: GPT-2's context is 1024 and the repo's NLP table lists GPT-2
    # at 1024 tokens (2,000M features, reproduced), so 1024 is used
    # 6.230 / 12.461 / 8.179 GB vs 5.86 / 11.62 / 8.63: +6.3%, +7.2%, -5.2%
    check_row("GPT-2", paper_columns(gpt2_xl(), 1024, 1))


@pytest.mark.xfail(strict=True, reason=(
    "Transformer Big: the convention that reproduces BERT Large, GPT-2 and the repo's own "
    "#Features column (77.07M for Transformer base at 512 tokens, table: 77M) gives 3.70 GB "
    "of activations at 512 tokens x batch 6 against the table's 11.78 GB (-69%), and the "
    "213M parameters of Vaswani et al. Table 3 give 0.857 / 1.714 GB against 1.02 / 2.04 "
    "(-16%). The table's numbers are not reproducible from the stated configuration (1024 "
    "tokens would give 11.0 GB of activations, but the table says 512); not fitted."))
def test_transformer_big_row():
    check_row("Transformer Big (WMT)", encoder_decoder(512, 6))


def test_the_convention_reproduces_the_features_column():
    """#Features (nlp_models.csv, millions per sequence) = activations / 4 bytes / batch."""
    def features(m, seq):
        return paper_columns(m, seq, 1)[2] / 4 / 1e6
    assert features(load_workload("bert-large"), 512) == pytest.approx(230, rel=0.02)
    assert features(gpt2_xl(), 1024) == pytest.approx(2000, rel=0.03)
    assert features(load_workload("gpt3-175b"), 2048) == pytest.approx(63000, rel=0.01)
    base = encoder_decoder(512, 1, h=512, heads=8, d_ff=2048)[2] / 4 / 1e6
    assert base == pytest.approx(77, rel=0.01)  # 77.07M
