"""Activation memory of Transformer training: the tensors each layer stores for its backward
pass, per chip, under tensor / sequence / context parallelism and recomputation. Pure numpy,
no I/O; every numeric argument may be a scalar or an array [S] (broadcast together), the
categorical ones a string or an array of strings.

The per-layer count generalizes Korthikanti et al., "Reducing Activation Recomputation in
Large Transformer Models" (MLSys 2023, arXiv 2205.05198) Sec. 4.1: instead of their fixed
coefficients it lists the tensors a layer actually keeps (`stored_tensors`), from the model's
shapes: hidden h, a query heads and g key/value heads of size d, FFN inner size f (two inputs
to the activation for gated units), MoE top_k (+ shared) experts per token. For h_ff = 4h,
GELU, g = a, d = h/a, 16-bit activations and 1-byte dropout masks the list sums to their
s*b*h*(34 + 5*a*s/h) bytes per layer (tests/model/test_training_memory.py checks it).
Encoders and decoders store the same tensors (the causal mask saves no stored scores).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from dse.spec.workload import TransformerSpec

# Bytes per stored activation element by training precision. fp32 training keeps 4-byte
# activations; mixed16 (bf16/fp16 with fp32 master weights; Micikevicius et al., "Mixed
# Precision Training", ICLR 2018) keeps 2 bytes, as Korthikanti et al. Sec. 4.1 count.
ACT_BYTES = {"fp32": 4.0, "mixed16": 2.0, "mixed8": 2.0}
# mixed8 (FP8): NVIDIA Transformer Engine's Linear / LayerNormLinear save the FP8 cast of
# their input for the weight gradient (TE docs, "Using FP8 with Transformer Engine"; Micikevicius
# et al., "FP8 Formats for Deep Learning", arXiv 2209.05433), so inputs of linear layers take
# 1 byte; attention internals, norms, activations functions and the LM head stay in bf16, as
# in DeepSeek-V3 (arXiv 2412.19437) Sec. 3.3.1 (embedding, output head, gating, norms and
# attention operators in BF16/FP32).
FP8_LINEAR_INPUT_BYTES = 1.0
# Dropout masks: 1 byte per element (Korthikanti et al. Sec. 4.1: "mask ... of size sbh").
MASK_BYTES = 1.0
# Logits are kept in fp32 for the cross entropy (Korthikanti et al. Sec. 4.2.4: 4sbv/t).
LOGIT_BYTES = 4.0
PRECISIONS = tuple(ACT_BYTES)
RECOMPUTE = ("none", "selective", "full")
COUNTS = ("all", "matmul_inputs")


class StoredTensor(NamedTuple):
    """One tensor a Transformer layer keeps for its backward pass. Elements per token of a
    micro-batch: `per_token` + `per_pair` * seq (score tensors: a heads x seq keys)."""

    name: str
    per_token: float
    per_pair: float
    mask: bool       # a 1-byte dropout mask (else an activation of the training precision)
    split: str       # "tp": split by tensor parallel; "kv": by min(tp, kv heads) (KV heads
                     # are replicated beyond their count); "sp": only by sequence parallel
    selective: bool  # recomputed (not stored) under selective recomputation
    linear: bool     # input of a linear layer (FP8 under mixed8)
    matmul: bool     # input of a matrix multiply (what the memory-wall convention counts)
    dropout: bool    # exists only when the model trains with dropout


def stored_tensors(m: TransformerSpec) -> tuple[StoredTensor, ...]:
    """The tensors one layer stores for backward (Korthikanti et al. Sec. 4.1, generalized;
    their sizes for GPT-style layers, in 2-byte units of s*b*h, in the comments)."""
    h, a, g, d, f = m.d_model, m.heads, m.n_kv_heads, m.d_head, m.d_ff
    gates = 2 if m.ffn in ("swiglu", "geglu") else 1  # gated units keep gate and up (2f)
    k = (m.moe.top_k + m.moe.shared_experts) if m.moe else 1  # expert copies per token
    t = StoredTensor
    rows = [
        # attention block: 11sbh + 5as^2b
        t("norm1_input", h, 0, False, "sp", False, False, False, False),     # 2sbh (LN)
        t("qkv_input", h, 0, False, "sp", False, True, True, False),         # 2sbh
        t("query", a * d, 0, False, "tp", False, False, True, False),        # 2sbh (Q, K: 4)
        t("key", g * d, 0, False, "kv", False, False, True, False),          # 2sbh
        t("value", g * d, 0, False, "kv", False, False, True, False),        # 2sbh
        t("softmax_output", 0, a, False, "tp", True, False, True, False),   # 2as^2b
        t("softmax_dropout_mask", 0, a, True, "tp", True, False, False, True),   # as^2b
        t("softmax_dropout_output", 0, a, False, "tp", True, False, True, True),  # 2as^2b
        t("projection_input", a * d, 0, False, "tp", False, True, True, False),  # 2sbh
        t("attention_dropout_mask", h, 0, True, "sp", False, False, False, True),  # sbh
        # MLP block: 19sbh (+ LN 2sbh)
        t("norm2_input", h, 0, False, "sp", False, False, False, False),     # 2sbh (LN)
        t("fc1_input", h, 0, False, "sp", False, True, True, False),         # 2sbh
        t("activation_input", gates * f * k, 0, False, "tp", False, False, False, False),  # 8
        t("fc2_input", f * k, 0, False, "tp", False, True, True, False),     # 8sbh
        t("mlp_dropout_mask", h, 0, True, "sp", False, False, False, True),  # sbh
    ]
    if m.moe:
        # Megatron-Core MoE keeps the permuted copies of the tokens sent to the top_k experts
        # (the expert FC1 inputs), the router's probabilities over the experts and the expert
        # outputs the combine weights multiply (their gradient needs them).
        e, top = m.moe.experts, m.moe.top_k
        rows += [t("expert_inputs", h * top, 0, False, "sp", False, True, True, False),
                 t("router_probs", e, 0, False, "sp", False, False, False, False),
                 t("expert_outputs", h * top, 0, False, "sp", False, False, False, False)]
    return tuple(rows)


def act_bytes(precision: ArrayLike) -> np.ndarray:
    """Bytes per stored activation element of each training precision (ACT_BYTES)."""
    prec = check_choice("precision", precision, PRECISIONS)
    return np.select([prec == p for p in PRECISIONS], list(ACT_BYTES.values()))


def _as(x: ArrayLike) -> np.ndarray:
    return np.asarray(x)


def check_choice(name: str, value: ArrayLike, allowed: tuple[str, ...]) -> np.ndarray:
    arr = np.asarray(value)
    bad = ~np.isin(arr, allowed)
    if np.any(bad):
        raise ValueError(f"{name}: expected one of {', '.join(allowed)}, found "
                         f"{sorted(set(np.atleast_1d(arr[bad]).tolist()))}")
    return arr


def layer_activation_bytes(m: TransformerSpec, seq: ArrayLike, micro_batch: ArrayLike, *,
                           precision: ArrayLike = "mixed16", tp: ArrayLike = 1,
                           cp: ArrayLike = 1, sequence_parallel: ArrayLike = False,
                           recompute: ArrayLike = "none", dropout: ArrayLike = False,
                           count: str = "all") -> np.ndarray:
    """Bytes one layer stores per chip for one micro-batch of `micro_batch` sequences of `seq`
    tokens. Tensor parallel splits the "tp" tensors by tp (Korthikanti Eq. 2: 10 + 24/t); with
    sequence parallel every tensor is split (Eq. 3: (34 + 5as/h)/t); context parallel splits
    every tensor by cp (each rank keeps seq/cp queries against all keys). Selective
    recomputation drops the attention scores (Eq. 4: 34/t with SP); full keeps only the layer
    input, 2sbh (/t with SP, Sec. 4.3). `count="matmul_inputs"` keeps only the inputs of the
    matrix multiplies (the "AI and Memory Wall" convention, see training_memory)."""
    if count not in COUNTS:
        raise ValueError(f"count: expected one of {', '.join(COUNTS)}, found {count!r}")
    prec = check_choice("precision", precision, PRECISIONS)
    rec = check_choice("recompute", recompute, RECOMPUTE)
    seq, b, tp, cp = _as(seq), _as(micro_batch), _as(tp), _as(cp)
    sp, drop = _as(sequence_parallel).astype(bool), _as(dropout).astype(bool)
    act = act_bytes(prec)
    tokens = seq * b / cp
    sp_div = np.where(sp, tp, 1)
    split = {"tp": tp, "kv": np.minimum(tp, m.n_kv_heads), "sp": sp_div}
    kept: float | np.ndarray = 0.0
    for x in stored_tensors(m):
        if count == "matmul_inputs" and not x.matmul:
            continue
        size = np.where(x.mask, MASK_BYTES,
                        np.where((prec == "mixed8") & x.linear, FP8_LINEAR_INPUT_BYTES, act))
        size = size * tokens * (x.per_token + x.per_pair * seq) / split[x.split]
        present = drop if x.dropout else True
        if count == "matmul_inputs" and x.name == "softmax_output":
            present = ~drop  # the P.V input is the dropout output when there is dropout
        kept = kept + np.where(present & ~((rec == "selective") & x.selective), size, 0.0)
    layer_input = act * tokens * m.d_model / sp_div  # full recomputation: 2sbh (/t with SP)
    return np.where(rec == "full", layer_input, kept)


def inflight_layers(layers: int, pp: ArrayLike, microbatches: ArrayLike, *,
                    schedule: ArrayLike = "1f1b", virtual_stages: ArrayLike = 1,
                    rank: ArrayLike = 0) -> np.ndarray:
    """Layers' worth of one micro-batch's activations pipeline rank `rank` holds at its peak.
    1F1B (Narayanan et al., SC21, arXiv 2104.04473, Sec. 2.2): rank r runs p - r - 1 warm-up
    forwards plus one before its first backward, so it holds min(m, p - r) micro-batches of
    its L/p layers: L layers' worth on the first stage (Korthikanti Sec. 4.2.3). Interleaved
    with v chunks per rank: Megatron-LM's warm-up is 2(p - r - 1) + (v - 1)p chunk-forwards,
    +1, each of L/(pv) layers: L(1 + (p - 1)/(pv)) on the first stage (Korthikanti Sec. 4.2.3,
    their m = v), capped by the m*v chunk-micro-batches there are."""
    sched = check_choice("schedule", schedule, ("1f1b", "interleaved"))
    p, mb, v, r = _as(pp), _as(microbatches), _as(virtual_stages), _as(rank)
    one_f_one_b = np.minimum(mb, p - r) * layers / p
    v = np.where(sched == "interleaved", v, 1)
    interleaved = np.minimum(mb * v, 2 * (p - r - 1) + (v - 1) * p + 1) * layers / (p * v)
    return np.where(sched == "interleaved", interleaved, one_f_one_b)


def embedding_activation_bytes(m: TransformerSpec, seq: ArrayLike, micro_batch: ArrayLike, *,
                               tp: ArrayLike = 1, cp: ArrayLike = 1,
                               sequence_parallel: ArrayLike = False,
                               dropout: ArrayLike = False) -> np.ndarray:
    """Bytes the input embedding stores per micro-batch: its dropout mask, sbh (/t with SP)
    (Korthikanti Sec. 4.2.4); nothing without dropout."""
    div = np.where(_as(sequence_parallel).astype(bool), tp, 1)
    mask = MASK_BYTES * _as(seq) * _as(micro_batch) / _as(cp) * m.d_model / div
    return np.where(_as(dropout).astype(bool), mask, 0.0)


def output_activation_bytes(m: TransformerSpec, seq: ArrayLike, micro_batch: ArrayLike, *,
                            precision: ArrayLike = "mixed16", tp: ArrayLike = 1,
                            cp: ArrayLike = 1,
                            sequence_parallel: ArrayLike = False) -> np.ndarray:
    """Bytes the output layer stores per micro-batch (Korthikanti Sec. 4.2.4): the final norm's
    input and the LM head's input, 2sbh each in 16 bits (/t with SP; the head stays in bf16
    under FP8), and the fp32 logits of the vocabulary-parallel cross entropy, 4sbv/t."""
    act = act_bytes(precision)
    tokens = _as(seq) * _as(micro_batch) / _as(cp)
    div = np.where(_as(sequence_parallel).astype(bool), tp, 1)
    return 2 * act * tokens * m.d_model / div + LOGIT_BYTES * tokens * m.vocab / _as(tp)


def forward_flops(m: TransformerSpec, seq: ArrayLike) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """Forward FLOPs per sequence of `seq` tokens: (matrix multiplies of one layer, attention
    score and score-times-value products of one layer, LM head). 2 FLOPs per multiply-add;
    biases, norms and softmax left out, full s x s scores counted, as in Korthikanti et al.
    Sec. 5 (24sh^2 + 4s^2h per layer, 2shV for the head, for GPT-style layers)."""
    s = _as(seq).astype(float)
    h, a, g, d, f = m.d_model, m.heads, m.n_kv_heads, m.d_head, m.d_ff
    mats = 3 if m.ffn in ("swiglu", "geglu") else 2
    k = (m.moe.top_k + m.moe.shared_experts) if m.moe else 1
    router = h * m.moe.experts if m.moe else 0
    gemm = 2 * s * (h * a * d + 2 * h * g * d + a * d * h + mats * h * f * k + router)
    scores = 2 * 2 * s * s * a * d   # Q K^T and P V
    return gemm, scores, 2 * s * h * m.vocab
