"""The operator rows of a Transformer: a `Builder` that appends each layer's GEMMs,
attention and vector operators for one stage with the model's sizes and byte widths (the
counting rules of dse.workloads.transformer). No I/O."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dse import phases
from dse.spec.workload import Scenario, TransformerSpec
from dse.workloads.common import LINEAR_ONLY, PRECISIONS, Counting
from dse.workloads.optable import DTYPE_BYTES, Num, OpRow

# FLOPs per element of the vector-unit operators (operation counts of the usual kernels).
# Softmax: subtract the row max, exp, accumulate the sum, divide = 4. LayerNorm: mean and
# variance accumulation, centring, squaring, normalising, scale and shift = 8. GELU (tanh
# form 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))) = 10. These reproduce the "Other" FLOPs of
# the Kim et al. (2023) case study exactly: its totals fix softmax at 4 per element and
# 2*LayerNorm + 4*GELU + 2*add at 58 per token-feature of a BERT/GPT-2 layer (8+8+40+2).
FLOP_PER_ELEMENT = {
    "softmax": 4.0,
    "layernorm": 8.0,
    "rmsnorm": 4.0,  # square, accumulate, normalise, scale
    "gelu": 10.0,
    "relu": 1.0,
    "silu": 4.0,  # x * sigmoid(x): exp, add, divide, multiply
    "swiglu": 5.0,  # silu(gate) * up
    "geglu": 11.0,  # gelu(gate) * up
    "residual": 1.0,
    "rope": 3.0,  # x*cos + rotate(x)*sin with precomputed tables: 2 multiplies, 1 add
}
# 4-bit weight-only quantization stores one fp16 scale per group of 128 weights (the default
# group size of GPTQ and AWQ): 0.5 + 2/128 bytes per weight.
INT4_GROUP_SIZE = 128


class Attention(NamedTuple):
    """One group of sequences whose attention runs as its own kernels: `repeat` instances
    per layer of `seqs` sequences, each with q_len queries over kv_len keys and `pairs`
    (query, key) pairs per head."""

    stage: str
    repeat: float | np.ndarray
    seqs: float | np.ndarray
    q_len: float
    kv_len: float
    pairs: float


# Position metadata of 2:4 structured sparsity, bytes per dense weight: 2 bits for each of
# the 2 kept values of every 4 (cuSPARSELt's compressed format).
SPARSE_2_4_INDEX_BYTES = 2 * 2 / 8 / 4

class Builder:
    """Accumulates rows for one stage with the model's sizes and byte widths at hand."""

    def __init__(self, m: TransformerSpec, sc: Scenario, counting: Counting):
        self.m, self.counting = m, counting
        w, a, kv, self.dtype = PRECISIONS[sc.precision]
        # Work other than the linear layers' GEMMs runs at this type: the same one, except
        # in FP8 training, where (Transformer Engine's FP8 recipe, as the activation planner
        # counts it: dse.model.activation_memory) only the linear layers' GEMMs run in FP8,
        # on FP8 casts of their inputs and weights, while activations between operators,
        # attention, norms, activation functions and the LM head stay in bf16 (TE docs,
        # "Using FP8 with Transformer Engine"; DeepSeek-V3, arXiv 2412.19437, Sec. 3.3.1).
        # The linear layers read their inputs at the bf16 width: the cast of each input to
        # FP8 is a pass over it that the GEMM would otherwise save.
        self.other = self.dtype
        if (phases.get(sc.phase).trains and sc.precision == "fp8") \
                or sc.precision in LINEAR_ONLY:
            a, self.other = "bf16", "bf16"
        self.wdt = w
        kv = sc.kv_precision or kv
        eb = counting.element_bytes
        self.wb = eb or (DTYPE_BYTES[w] + (2.0 / INT4_GROUP_SIZE if w == "int4" else 0.0))
        self.ab = eb or DTYPE_BYTES[a]
        self.kvb = eb or DTYPE_BYTES[kv]
        self.rows: list[OpRow] = []
        self.ep = 1  # expert-parallel ranks sharing the experts (training)
        self.sparse = sc.sparsity == "2:4"

    def gemm(self, name: str, group: str, count: Num, m: Num, n: Num, k: Num,
             stage: str, kind: str = "gemm", bias: bool | None = None,
             split: str = "column") -> None:
        bias = self.m.bias if bias is None else bias
        # 2:4 sparse weights (a linear layer's, kind gemm): the matrix units skip the zero
        # half of the products, and the weights are stored compressed -- the kept half of the
        # values plus a 2-bit position per kept value, 1 bit per dense element (NVIDIA,
        # "Exploiting NVIDIA Ampere Structured Sparsity with cuSPARSELt", developer blog
        # 2020; Mishra et al., "Accelerating Sparse Deep Neural Networks", arXiv 2104.08378,
        # Sec. 2). The LM head stays dense.
        sparse = self.sparse and kind == "gemm"
        products = m * n * k * (0.5 if sparse else 1.0)
        per_weight = self.wb / 2 + SPARSE_2_4_INDEX_BYTES if sparse else self.wb
        self.rows.append(OpRow(
            name, kind, group, count, 2 * products + (m * n if bias else 0.0),
            read={"weights": k * n * per_weight + (n * self.ab if bias else 0.0),
                  "activations": m * k * self.ab},
            written={"activations": m * n * self.ab}, m=m, n=n, k=k, batch=1, stage=stage,
            dtype=self.other if kind == "lm_head" else self.dtype, wdtype=self.wdt,
            split=split))

    def elementwise(self, name: str, kind: str, op: str, count: Num, elements: Num,
                    stage: str, inputs: int = 1, weights: Num = 0.0,
                    split: str = "replicated") -> None:
        self.rows.append(OpRow(
            name, kind, "other", count, FLOP_PER_ELEMENT[op] * elements,
            read={"activations": inputs * elements * self.ab, "weights": weights * self.wb},
            written={"activations": elements * self.ab}, stage=stage, dtype=self.other,
            split=split))

    def layer(self, stage: str, count: Num, tokens: Num, seqs: Num, q_len: float,
              kv_len: float, pairs: float, kv_new: Num,
              attention: tuple[Attention, ...] | None = None) -> None:
        """One Transformer layer, `count` times. tokens: rows of the GEMMs (batch x query
        length); pairs: (query, key) pairs per head per sequence; kv_new: KV entries each
        sequence appends. `attention`: groups of sequences whose attention runs apart (a
        serving iteration: the new prompts and the decode tokens); by default one group of
        `seqs` sequences with q_len, kv_len and pairs."""
        m, d = self.m, self.m.d_model
        h, kvh, dh = m.heads, m.n_kv_heads, m.d_head
        first = len(self.rows)
        cached = m.architecture == "decoder" and stage in ("prefill", "decode")
        kv_class = "kv_cache" if cached else "activations"
        norm_w = d * (2 if m.norm == "layernorm" and m.bias else 1)
        self.elementwise("attn_norm", "norm", m.norm, count, tokens * d, stage, weights=norm_w)
        self.gemm("q_proj", "attention_proj", count, tokens, h * dh, d, stage)
        for name in ("k_proj", "v_proj"):
            self.gemm(name, "attention_proj", count, tokens, kvh * dh, d, stage)
            if cached:
                row = self.rows[-1]  # the new K/V entries go to the cache, not to activations
                row.written = {"kv_cache": seqs * kv_new * kvh * dh * self.kvb}
        if m.position == "rope":
            self.elementwise("rope", "rope", "rope", count, tokens * (h + kvh) * dh, stage,
                             split="part")
        for a in attention or (Attention(stage, 1.0, seqs, q_len, kv_len, pairs),):
            self.attention(a, count, kv_class)
        self.gemm("o_proj", "attention_proj", count, tokens, d, h * dh, stage, split="row")
        self.elementwise("attn_residual", "residual", "residual", count, tokens * d, stage, 2)
        self.elementwise("ffn_norm", "norm", m.norm, count, tokens * d, stage, weights=norm_w)
        self.ffn(stage, count, tokens)
        self.elementwise("ffn_residual", "residual", "residual", count, tokens * d, stage, 2)
        for row in self.rows[first:]:
            row.layer = True

    def attention(self, a: Attention, count: Num, kv_class: str) -> None:
        """Scores, softmax and weighted values of one group of sequences, count x a.repeat
        times."""
        h, kvh, dh = self.m.heads, self.m.n_kv_heads, self.m.d_head
        count = count * a.repeat
        scores = a.seqs * h * a.pairs
        kv_read = a.seqs * kvh * a.kv_len * dh * self.kvb
        q_bytes = a.seqs * h * a.q_len * dh * self.ab
        self.rows.append(OpRow(
            "attn_score", "attention_score", "attention_act", count, 2 * scores * dh,
            read=classes(("activations", q_bytes), (kv_class, kv_read)),
            written={"activations": scores * self.ab},
            m=a.q_len, n=a.kv_len, k=dh, batch=a.seqs * h, stage=a.stage, dtype=self.other,
            split="heads"))
        self.elementwise("softmax", "softmax", "softmax", count, scores, a.stage, split="part")
        self.rows.append(OpRow(
            "attn_value", "attention_value", "attention_act", count, 2 * scores * dh,
            read=classes(("activations", scores * self.ab), (kv_class, kv_read)),
            written={"activations": q_bytes},
            m=a.q_len, n=dh, k=a.kv_len, batch=a.seqs * h, stage=a.stage, dtype=self.other,
            split="heads"))

    def ffn(self, stage: str, count: Num, tokens: Num) -> None:
        m, d, f = self.m, self.m.d_model, self.m.d_ff
        gated = m.ffn in ("swiglu", "geglu")
        experts = [(count, tokens, "")]
        if m.moe:
            e, k = m.moe.experts, m.moe.top_k
            self.gemm("router", "ffn", count, tokens, e, d, stage, kind="router", bias=False,
                      split="replicated")
            # Distinct experts a batch of `tokens` touches under uniform routing, and the
            # tokens each of them receives: E * (1 - (1 - k/E)^T) and T * k / that. With
            # expert parallelism over `ep` ranks a rank holds E / ep experts and receives
            # the tokens routed to them from all ep ranks: T * ep tokens offered, T * k rows.
            ep = self.ep
            touched = -(e / ep) * np.expm1(tokens * ep * np.log1p(-k / e))  # exact for huge e
            experts = [(count * touched, tokens * k / touched, "expert_")]
            if m.moe.shared_experts:
                experts.append((count * m.moe.shared_experts, tokens, "shared_"))
        for n_inst, rows, prefix in experts:
            names = ("gate_proj", "up_proj") if gated else ("up_proj",)
            for name in names:
                self.gemm(prefix + name, "ffn", n_inst, rows, f, d, stage)
            self.elementwise(prefix + "activation", "activation", m.ffn, n_inst, rows * f,
                             stage, inputs=2 if gated else 1, split="part")
            self.gemm(prefix + "down_proj", "ffn", n_inst, rows, d, f, stage, split="row")

    def edges(self, stage: str, count: Num, tokens: Num, head_rows: Num) -> None:
        """Embedding lookup before the layers; final norm and LM head (or pooler) after."""
        if self.counting.layers_only:
            return
        m, d = self.m, self.m.d_model
        tables = 1 + (m.position == "learned") + (m.token_types > 0)
        self.rows.append(OpRow(
            "embedding", "embedding", "embedding", count, (tables - 1) * tokens * d,
            read={"weights": tables * tokens * d * self.wb},
            written={"activations": tokens * d * self.ab}, stage=stage, dtype=self.other))
        if m.architecture == "encoder":
            self.elementwise("embed_norm", "norm", m.norm, count, tokens * d, stage,
                             weights=2 * d)
            if m.pooler:
                self.gemm("pooler", "head", count, head_rows, d, d, stage, split="replicated")
            return
        self.elementwise("final_norm", "norm", m.norm, count, head_rows * d, stage, weights=d)
        self.gemm("lm_head", "head", count, head_rows, m.vocab, d, stage, kind="lm_head",
                  bias=False, split="vocab")


def classes(*pairs: tuple[str, Num]) -> dict[str, Num]:
    """Bytes by tensor class, summing entries of the same class."""
    out: dict[str, Num] = {}
    for cls, value in pairs:
        out[cls] = out.get(cls, 0.0) + value
    return out
