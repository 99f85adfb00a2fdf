"""Workload description schema: Transformer models and their named scenarios.

A workload file describes one model (architecture and sizes) and a few named scenarios (phase,
batch, sequence lengths, precision). The lowering in `dse.workloads` turns a model plus a
scenario into an operator table. This module does no I/O (a named length distribution is
read by the loader, dse.spec.load).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import Field, ValidationInfo, field_serializer, field_validator, model_validator

from dse.errors import DseError
from dse.spec import lengths as length_library
from dse.spec.lengths import LengthDistribution
from dse.spec.types import Spec, Time, TimeOrZero

Phase = Literal["gemm", "prefill", "decode", "serve", "inference", "training"]
PHASES: tuple[str, ...] = get_args(Phase)
DataType = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
# Scenario precision names: a data type for everything, or weight-only quantization.
PrecisionName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "w8a16", "w4a16", "mixed"]
PRECISION_NAMES: tuple[str, ...] = get_args(PrecisionName)


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


class Engine(Spec):
    """How the serving engine runs the serve phase (continuous batching). The defaults are
    TensorRT-LLM's, the engine of the validation rows (README "Serving as servers run it")."""

    iteration_overhead: TimeOrZero = 0.58e-3
    """GPU idle time the host leaves per iteration (scheduling, sampling, detokenization not
    hidden behind the forward). Default 0.58 ms: TensorRT-LLM's PyTorch executor with its
    overlap scheduler exposes ~580 us per iteration on steady-state decode (Llama-3.1-8B
    FP8 on B200; NVIDIA/TensorRT-LLM issue #13957)."""
    kv_memory_fraction: float = Field(default=0.9, gt=0, le=1)
    """Share of the memory left after the weights and the activation workspace that the
    engine gives the KV cache (TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction, 0.9)."""
    admission: Literal["reserve_max", "average"] = "reserve_max"
    """reserve_max: a request is admitted only with KV blocks reserved for its prompt plus its
    maximum output (TensorRT-LLM's default GUARANTEED_NO_EVICT capacity scheduler); average:
    sequences hold KV for their current context only, the cache sized at the average context
    (a scheduler that admits on current use and preempts when full)."""
    kv_block_tokens: int = Field(default=32, ge=1)
    """Tokens per paged KV block (TensorRT-LLM KvCacheConfig.tokens_per_block, 32; its older
    TensorRT-backend plugin used 64)."""
    max_batch: int | None = Field(default=2048, ge=1)
    """Most sequences in flight (TensorRT-LLM max_batch_size, default 2048); null: no limit."""
    max_tokens_per_iteration: int | None = Field(default=8192, ge=1)
    """Most tokens one iteration forwards, decode and prompt tokens together (TensorRT-LLM
    max_num_tokens, default 8192); prompts longer than what is left are chunked over several
    iterations. null: no limit."""


class Scenario(Spec):
    """A named way to run the model; the CLI can override each field."""

    phase: Phase
    """gemm (a single matrix multiply), prefill (time to first token), decode (token
    generation), serve (continuous batching), inference (encoder), training."""
    batch: int | Literal["max", "best"] = 1
    """Sequences per step; or `max`: the most that fit in memory, or `best`: the batch that
    gives the most throughput among those that fit (serve, inference)."""
    latency_target: Time | None = None
    """With `batch: best`: the longest time per output token (serve) or per batch
    (inference) a design may take; larger batches that miss it are not chosen."""
    seq_in: int = Field(default=0, ge=0)
    """Prompt tokens (decoders) or sequence length (encoders, training)."""
    seq_out: int = Field(default=0, ge=0)
    """Generated tokens (decode, serve)."""
    precision: PrecisionName = "bf16"
    """Data types: bf16, fp16, fp32, fp8, int8 (weights, activations and KV cache alike),
    w8a16 / w4a16 (8- or 4-bit weights, 16-bit activations and KV), mixed (training)."""
    kv_precision: DataType | None = None
    """KV-cache data type when it differs from the activations (e.g. fp8 KV cache)."""
    engine: Engine | None = None
    """Serve: the serving engine's profile (iteration overhead, KV admission, limits); fields
    not given keep the documented default (Engine)."""
    lengths: LengthDistribution | None = None
    """Inference: the distribution of the sequences' real lengths when the harness skips
    padding (each at most seq_in): a shipped name (squad-v1.1), a histogram (a list of
    {length, share}) or {mean, second_moment} / {mean, std}. Token work scales with E[L],
    attention with E[L^2]; without it every sequence is seq_in long."""

    @field_validator("lengths", mode="before")
    @classmethod
    def _length_forms(cls, value: object) -> object:
        if isinstance(value, str):
            return length_library.named(value)
        if isinstance(value, list):
            return {"histogram": value}
        if isinstance(value, dict) and ({"name", "source"} & set(value)):
            raise ValueError("name and source belong to the shipped distributions; give "
                             "lengths: NAME, a histogram or a mean with second_moment or std")
        return value

    @field_serializer("lengths")
    def _length_out(self, value: LengthDistribution | None) -> object:
        """A shipped distribution by its name, an inline one as written."""
        if value is None or value.name:
            return value.name if value else None
        return value.model_dump(exclude_none=True)

    @model_validator(mode="after")
    def _lengths(self) -> Scenario:
        if isinstance(self.batch, int) and self.batch < 1:
            raise ValueError("batch must be a positive whole number, 'max' or 'best'")
        if self.phase in ("decode", "serve") and self.seq_out < 1:
            raise ValueError(f"phase {self.phase} needs seq_out >= 1 (tokens to generate)")
        if self.phase in ("prefill", "inference", "training", "serve") and self.seq_in < 1:
            raise ValueError(f"phase {self.phase} needs seq_in >= 1")
        if self.batch in ("max", "best") and self.phase not in ("serve", "inference"):
            raise ValueError(f"batch '{self.batch}' is for the serve and inference phases")
        if self.latency_target is not None and self.batch != "best":
            raise ValueError("latency_target goes with batch 'best'")
        if self.engine is not None and self.phase != "serve":
            raise ValueError("engine goes with phase serve")
        if self.lengths is not None:
            if self.phase != "inference":
                raise ValueError(f"lengths (a length distribution) goes with phase inference; "
                                 f"phase {self.phase} runs every sequence at its seq_in")
            why = self.lengths.fits(self.seq_in)
            if why:
                raise ValueError(why)
        return self


class TransformerSpec(Spec):
    """A Transformer encoder or decoder."""

    name: str = Field(min_length=1)
    """Name of the model; defaults to the file name."""
    kind: Literal["transformer"]
    source: str = Field(min_length=1)
    """Where the configuration comes from (paper, model card, config.json)."""
    description: str | None = None
    base: str | None = None
    """Workload this one inherits from (a name or a path)."""
    architecture: Literal["encoder", "decoder"]
    """encoder: bidirectional attention over the whole input (BERT); decoder: causal
    attention with a KV cache (GPT, Llama)."""
    layers: int = Field(gt=0)
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
    tied_embeddings: bool = False
    """The LM head reuses the input embedding matrix."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
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


class GemmSpec(Spec):
    """A single (batched) matrix multiply C[B, M, N] = A[B, M, K] @ W[B, K, N]; the
    `gemm:MxNxK` and `gemm:BxMxNxK` workload names build one."""

    name: str = Field(min_length=1)
    kind: Literal["gemm"]
    source: str = Field(min_length=1)
    description: str | None = None
    base: str | None = None
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    batch: int = Field(default=1, gt=0)
    """Independent multiplies of the same shape."""
    scenarios: dict[str, Scenario] = Field(
        default_factory=lambda: {"gemm": Scenario(phase="gemm", precision="bf16")})


WorkloadSpec = TransformerSpec | GemmSpec
# Workload kinds by the `kind:` key of a file. A new kind is a schema class here (or in a
# module of its own) plus one entry; its lowering registers in dse.workloads.KINDS.
WORKLOAD_SCHEMAS: dict[str, type[Spec]] = {"transformer": TransformerSpec, "gemm": GemmSpec}

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
    nums = [int(g) for g in match.groups() if g is not None]
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
