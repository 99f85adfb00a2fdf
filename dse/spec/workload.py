"""Workload description schema: Transformer models and their named scenarios.

A workload file describes one model (architecture and sizes) and a few named scenarios (phase,
batch, sequence lengths, precision). The lowering in `dse.workloads` turns a model plus a
scenario into an operator table. This module does no I/O (a named length distribution is
read by the loader, dse.spec.load). What every kind shares (a scenario, the file's common
fields) is in dse.spec.scenario, the recommender kind in dse.spec.recommender; the `X as X`
imports re-export the parts that the model, the workloads and tests import from here.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from dse.errors import DseError
from dse.spec.recommender import RECOMMENDER_WORKS as RECOMMENDER_WORKS
from dse.spec.recommender import RecommenderSpec as RecommenderSpec
from dse.spec.recommender import RecOptimizer as RecOptimizer
from dse.spec.recommender import RecScenario as RecScenario
from dse.spec.recommender import Skew as Skew
from dse.spec.scenario import TRAINING_PRECISION_NAMES as TRAINING_PRECISION_NAMES
from dse.spec.scenario import Compression as Compression
from dse.spec.scenario import Engine as Engine
from dse.spec.scenario import Offload as Offload
from dse.spec.scenario import Phase as Phase
from dse.spec.scenario import Scenario as Scenario
from dse.spec.scenario import Training as Training
from dse.spec.scenario import WorkloadFile as WorkloadFile
from dse.spec.types import MAX_WHOLE, Spec


class MoE(Spec):
    """Mixture of experts in the feed-forward block."""

    experts: int = Field(gt=1)
    """Routed experts per MoE layer."""
    top_k: int = Field(gt=0)
    """Experts each token is routed to."""
    shared_experts: int = Field(default=0, ge=0)
    """Experts every token always uses (DeepSeek-style), in addition to top_k."""

    @model_validator(mode="after")
    def _k_le_experts(self) -> MoE:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        return self


class TransformerSpec(WorkloadFile):
    """A Transformer encoder or decoder."""

    kind: Literal["transformer"]
    """The kind of workload, which selects this schema."""
    architecture: Literal["encoder", "decoder"]
    """encoder: bidirectional attention over the whole input (BERT); decoder: causal
    attention with a KV cache (GPT, Llama)."""
    layers: int = Field(gt=0)
    """Transformer blocks (attention plus feed-forward), each lowered to its operators."""
    d_model: int = Field(gt=0)
    """Hidden size."""
    heads: int = Field(gt=0)
    """Query heads."""
    kv_heads: int | None = Field(default=None, gt=0)
    """Key/value heads: = heads for multi-head, 1 for multi-query, between for grouped-query
    attention. Defaults to heads."""
    head_dim: int | None = Field(default=None, gt=0)
    """Size of one head; defaults to d_model / heads."""
    d_ff: int = Field(gt=0)
    """Inner size of the feed-forward block (per expert for MoE)."""
    ffn: Literal["gelu", "relu", "swiglu", "geglu"] = "gelu"
    """gelu/relu: two matrices (up, down); swiglu/geglu: three (gate, up, down)."""
    vocab: int = Field(gt=0)
    """Vocabulary size, tokens: the embedding table and the LM head are vocab x d_model."""
    tied_embeddings: bool = False
    """The LM head reuses the input embedding matrix."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    """Normalization before attention and the feed-forward block: layernorm (scale and,
    with `bias`, shift) or rmsnorm (scale only); sets its weights and elementwise FLOPs."""
    position: Literal["learned", "rope", "alibi", "none"] = "learned"
    """Position encoding; learned adds a max_positions x d_model table."""
    max_positions: int | None = Field(default=None, gt=0)
    """Longest sequence the model supports (size of a learned position table)."""
    bias: bool = True
    """Linear layers and norms carry biases (GPT-2, BERT) or not (Llama)."""
    token_types: int = Field(default=0, ge=0)
    """Segment (token type) embeddings, e.g. 2 for BERT."""
    pooler: bool = False
    """A d_model x d_model pooler on the first token (BERT)."""
    moe: MoE | None = None
    scenarios: dict[str, Scenario] = Field(min_length=1)
    """Named scenarios; the first is the default."""

    @field_validator("kv_heads")
    @classmethod
    def _kv_divides_heads(cls, kv: int | None, info: ValidationInfo) -> int | None:
        heads = info.data.get("heads")
        if kv is not None and heads is not None and heads % kv:
            raise ValueError(f"expected a divisor of heads ({heads}) for grouped-query "
                             f"attention, found {kv}")
        return kv

    @model_validator(mode="after")
    def _shapes(self) -> TransformerSpec:
        if self.head_dim is None and self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) is not divisible by heads "
                             f"({self.heads}); give head_dim")
        if self.position == "learned" and self.max_positions is None:
            raise ValueError("position: learned needs max_positions")
        return self

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.heads


class GemmSpec(WorkloadFile):
    """A single (batched) matrix multiply C[B, M, N] = A[B, M, K] @ W[B, K, N]; the
    `gemm:MxNxK` and `gemm:BxMxNxK` workload names build one."""

    kind: Literal["gemm"]
    """The kind of workload, which selects this schema."""
    m: int = Field(gt=0)
    """Rows of A and C (tokens, for a linear layer)."""
    n: int = Field(gt=0)
    """Columns of W and C (output features)."""
    k: int = Field(gt=0)
    """Reduction dimension: columns of A, rows of W (input features)."""
    batch: int = Field(default=1, gt=0)
    """Independent multiplies of the same shape."""
    scenarios: dict[str, Scenario] = Field(
        default_factory=lambda: {"gemm": Scenario(phase="gemm", precision="bf16")})


WorkloadSpec = TransformerSpec | GemmSpec | RecommenderSpec
# Workload kinds by the `kind:` key of a file. A new kind is a schema class here (or in a
# module of its own) plus one entry; its lowering registers in dse.workloads.KINDS.
WORKLOAD_SCHEMAS: dict[str, type[WorkloadFile]] = {"transformer": TransformerSpec, "gemm": GemmSpec,
                                           "recommender": RecommenderSpec}

_GEMM_NAME = re.compile(r"^gemm:(\d+)x(\d+)x(\d+)(?:x(\d+))?$")


def is_gemm_name(ref: str) -> bool:
    """Whether a workload reference names a single matrix multiply (`gemm:...`)."""
    return ref.startswith("gemm:")


def gemm_from_name(ref: str) -> GemmSpec:
    """`gemm:1024x10240x5120` -> M=1024, N=10240, K=5120; four numbers put the batch first."""
    match = _GEMM_NAME.match(ref)
    if not match or any(int(g) == 0 for g in match.groups() if g is not None):
        raise DseError(f"{ref}: expected gemm:MxNxK or gemm:BxMxNxK with positive whole "
                       "numbers, e.g. gemm:1024x10240x5120")
    groups = [g for g in match.groups() if g is not None]
    if any(len(g.lstrip("0")) > len(str(MAX_WHOLE)) or int(g) > MAX_WHOLE for g in groups):
        raise DseError(f"{ref}: sizes are at most {MAX_WHOLE} (2^53, the largest whole "
                       "number dse accepts)")
    nums = [int(g) for g in groups]
    batch, (m, n, k) = (nums[0], nums[1:]) if len(nums) == 4 else (1, nums)
    return GemmSpec(name=ref, kind="gemm", source="matrix multiply given by name",
                    m=m, n=n, k=k, batch=batch)


def parameter_counts(m: TransformerSpec) -> dict[str, int]:
    """Parameters by group: embeddings, attention, ffn, norms, head, total, and `active`
    (used per token: MoE counts top_k + shared experts only)."""
    d, dh, h, kv = m.d_model, m.d_head, m.heads, m.n_kv_heads
    b = 1 if m.bias else 0
    attn = d * h * dh + 2 * d * kv * dh + h * dh * d + b * (h * dh + 2 * kv * dh + d)
    mats = 3 if m.ffn in ("swiglu", "geglu") else 2
    expert = mats * d * m.d_ff + b * ((mats - 1) * m.d_ff + d)
    n_experts = m.moe.experts + m.moe.shared_experts if m.moe else 1
    active_experts = m.moe.top_k + m.moe.shared_experts if m.moe else 1
    router = d * m.moe.experts if m.moe else 0
    norm = (2 if m.norm == "layernorm" and m.bias else 1) * d
    per_layer_dense = attn + 2 * norm + router
    embed = m.vocab * d + (m.max_positions or 0) * d * (m.position == "learned") \
        + m.token_types * d + norm  # + the embedding norm (BERT) or the final norm
    head = 0 if m.tied_embeddings else m.vocab * d
    pooler = (d * d + b * d) if m.pooler else 0
    total = embed + head + pooler + m.layers * (per_layer_dense + n_experts * expert)
    active = embed + head + pooler + m.layers * (per_layer_dense + active_experts * expert)
    return {
        "embeddings": embed, "attention": m.layers * attn, "ffn": m.layers * n_experts * expert,
        "norms": m.layers * 2 * norm, "head": head + pooler, "total": total, "active": active,
    }
