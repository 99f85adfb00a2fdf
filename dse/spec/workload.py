"""Workload description schema: Transformer models and their named scenarios.

A workload file describes one model (architecture and sizes) and a few named scenarios (phase,
batch, sequence lengths, precision). The lowering in `dse.workloads` turns a model plus a
scenario into an operator table. This module does no I/O (a named length distribution is
read by the loader, dse.spec.load).
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    Field,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from dse import phases
from dse.errors import DseError
from dse.spec import lengths as length_library
from dse.spec.lengths import LengthDistribution
from dse.spec.types import MAX_WHOLE, Spec, Time, TimeOrZero


def _registered(name: str) -> str:
    """A phase name the registry knows (dse.phases), refused as a choice otherwise."""
    if name not in phases.REGISTRY:
        raise PydanticCustomError("literal_error", "unknown phase",
                                  {"expected": ", ".join(f"'{p}'" for p in phases.names())})
    return name


# A phase: one of dse.phases' registry (the built-ins and any a module registers).
Phase = Annotated[str, AfterValidator(_registered)]
DataType = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
# Scenario precision names: a data type for everything, or weight-only quantization.
PrecisionName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "w8a16", "w4a16", "mixed"]
PRECISION_NAMES: tuple[str, ...] = get_args(PrecisionName)
# The precisions a Transformer trains in (dse.workloads.training.TRAINING_PRECISIONS): no
# integer or weight-only training.
TRAINING_PRECISION_NAMES = ("fp32", "bf16", "fp16", "mixed", "fp8")
TRAINING_PRECISION_TEXT = ("training runs fp32, bf16, fp16, mixed or fp8 (mixed precision "
                           "with fp32 master weights)")


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


class Offload(Spec):
    """Training: model states kept in a slower memory level and streamed over its link
    (ZeRO-Offload, ZeRO-Infinity)."""

    to: str = Field(min_length=1)
    """Name of the hardware's memory level that holds them (host, an LPDDR or CXL tier)."""
    optimizer: bool = True
    """Whether the optimizer state (with the fp32 master weights) is kept there."""
    parameters: bool = False
    """Whether the 16-bit parameters are kept there too (ZeRO-Infinity parameter offload)."""


class Compression(Spec):
    """Training: stored activations compressed between the forward and the backward (Gist,
    cDMA): they take 1 / factor of the memory, at a compute cost per byte."""

    factor: float = Field(ge=1)
    """Bytes before / after compression (Gist: 2-4x lossless-ish encodings; cDMA ~2.6x)."""
    flops_per_byte: float = Field(default=4.0, ge=0)
    """Vector operations per uncompressed byte to compress and decompress it again (default
    4: an encode and a decode pass of about two operations each per byte)."""


class Training(Spec):
    """How a Transformer trains (phase training): the scenario's `batch` is the global batch
    in sequences and `seq_in` the sequence length. A field left out is chosen per design
    as the fastest choice that fits (dse.model.training); tensor and pipeline parallelism
    are the execution's (--tp, --pp), data parallelism the chips left over."""

    micro_batch: int | None = Field(default=None, ge=1)
    """Sequences per micro-batch per data-parallel replica."""
    optimizer: Literal["sgd", "momentum", "adam", "adamw"] = "adam"
    optimizer_state: float | None = Field(default=None, ge=0)
    """Optimizer state in fp32 words per parameter, for optimizers not listed (Adam: 2)."""
    zero: Literal[0, 1, 2, 3] | None = None
    """ZeRO stage over the data-parallel ranks (3 = FSDP)."""
    recompute: Literal["none", "selective", "full"] | None = None
    """Activation recomputation (Korthikanti et al. 2022)."""
    sequence_parallel: bool | None = None
    """Megatron sequence parallelism (with --tp > 1)."""
    context_parallel: int = Field(default=1, ge=1)
    expert_parallel: int = Field(default=1, ge=1)
    schedule: Literal["1f1b", "interleaved"] | None = None
    """Pipeline schedule (with --pp > 1); left out, the planner tries 1F1B and every
    interleaved split of a stage's layers."""
    virtual_stages: int | None = Field(default=None, ge=1)
    """Interleaved schedule: model chunks per pipeline rank."""
    dropout: bool = False
    """Whether the model trains with dropout (its masks are stored)."""
    offload: Offload | None = None
    compression: Compression | None = None

    @model_validator(mode="after")
    def _schedule(self) -> Training:
        if (self.virtual_stages or 1) > 1 and self.schedule == "1f1b":
            raise ValueError("virtual_stages > 1 goes with schedule interleaved")
        return self


class Scenario(Spec):
    """A named way to run the model; the CLI can override each field."""

    phase: Phase
    """A registered phase (dse.phases): gemm (a single matrix multiply), prefill (time to
    first token), decode (token generation), serve (continuous batching), inference
    (encoders, recommenders), training."""
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
    training: Training | None = None
    """Training of a Transformer: micro-batch, optimizer, ZeRO, recomputation, offload;
    fields not given are chosen per design (dse.model.training)."""
    lengths: LengthDistribution | None = None
    """Inference: the distribution of the sequences' real lengths when the harness skips
    padding (each at most seq_in): a shipped name (squad-v1.1), a histogram (a list of
    {length, share}) or {mean, second_moment} / {mean, std}. Token work scales with E[L],
    attention with E[L^2]; without it every sequence is seq_in long."""

    @field_validator("precision")
    @classmethod
    def _training_precision(cls, value: str, info: ValidationInfo) -> str:
        """Refused at the precision key (file:line:col), as `dse check` and every command
        that loads the file say it; recommenders keep their own rule."""
        phase = phases.REGISTRY.get(str(info.data.get("phase")))
        if (phase is not None and phase.trains and cls._transformer_training
                and value not in TRAINING_PRECISION_NAMES):
            raise ValueError(f"{value}: {TRAINING_PRECISION_TEXT}")
        return value

    _transformer_training: ClassVar[bool] = True

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
        ph = phases.get(self.phase)
        if "seq_out" in ph.needs and self.seq_out < 1:
            raise ValueError(f"phase {self.phase} needs seq_out >= 1 (tokens to generate)")
        if "seq_in" in ph.needs and self.seq_in < 1:
            raise ValueError(f"phase {self.phase} needs seq_in >= 1")
        if self.batch in ("max", "best") and self.batch not in ph.batch_modes:
            takers = phases.those(lambda p: self.batch in p.batch_modes)
            raise ValueError(f"batch '{self.batch}' is for the {phases.listed(takers)} "
                             f"phase{'s' if len(takers) > 1 else ''}")
        if self.latency_target is not None and self.batch != "best":
            raise ValueError("latency_target goes with batch 'best'")
        for section, what in (("engine", "engine"),
                              ("training", "training (the training setup)")):
            if getattr(self, section) is not None and section not in ph.takes:
                takers = tuple(p.name for p in phases.REGISTRY.values()
                               if section in p.takes)
                raise ValueError(f"{what} goes with phase {phases.listed(takers, 'or')}")
        if self.lengths is not None:
            if "lengths" not in ph.takes:
                takers = phases.those(lambda p: "lengths" in p.takes)
                raise ValueError(f"lengths (a length distribution) goes with phase "
                                 f"{phases.listed(takers, 'or')}; phase {self.phase} runs "
                                 "every sequence at its seq_in")
            why = self.lengths.fits(self.seq_in)
            if why:
                raise ValueError(why)
        return self


class WorkloadFile(Spec):
    """What every workload file states besides its kind's own fields."""

    name: str = Field(min_length=1)
    """Name of the model; defaults to the file name."""
    source: str = Field(min_length=1)
    """Where the configuration comes from (paper, model card, config.json)."""
    description: str | None = None
    base: str | None = None
    """Workload this one inherits from (a name or a path)."""


class TransformerSpec(WorkloadFile):
    """A Transformer encoder or decoder."""

    kind: Literal["transformer"]
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


class GemmSpec(WorkloadFile):
    """A single (batched) matrix multiply C[B, M, N] = A[B, M, K] @ W[B, K, N]; the
    `gemm:MxNxK` and `gemm:BxMxNxK` workload names build one."""

    kind: Literal["gemm"]
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)
    batch: int = Field(default=1, gt=0)
    """Independent multiplies of the same shape."""
    scenarios: dict[str, Scenario] = Field(
        default_factory=lambda: {"gemm": Scenario(phase="gemm", precision="bf16")})


class HitPoint(Spec):
    """One point of a measured hit-rate curve: caching this share of a table's rows (the
    hottest ones) serves this share of its lookups."""

    rows: float = Field(gt=0, le=1)
    hits: float = Field(ge=0, le=1)


class Skew(Spec):
    """How unevenly a table's rows are looked up: a Zipf exponent (row i of R is looked up
    with probability proportional to i^-alpha; 0 is uniform) or a measured curve."""

    alpha: float | None = Field(default=None, ge=0, le=3)
    curve: list[HitPoint] | None = Field(default=None, min_length=1)
    source: str | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Skew:
        if (self.alpha is None) == (self.curve is None):
            raise ValueError("give the skew as alpha (a Zipf exponent) or as a curve of "
                             "{rows, hits} points, one of the two")
        if self.curve is not None:
            rows = [p.rows for p in self.curve]
            hits = [p.hits for p in self.curve]
            if rows != sorted(rows) or len(set(rows)) != len(rows) or hits != sorted(hits):
                raise ValueError("curve points must rise: rows strictly, hits never falling")
        return self


class Table(Spec):
    """An embedding table, or `count` identical ones."""

    name: str = Field(min_length=1)
    count: int = Field(default=1, ge=1)
    rows: int = Field(gt=0)
    dim: int = Field(gt=0)
    """Elements per row (the embedding dimension)."""
    lookups: float = Field(gt=0)
    """Rows gathered and pooled (summed) per user-item pair: the pooling factor."""
    skew: Skew | None = None
    """This table's skew (default: the workload's)."""


class Interaction(Spec):
    """How the pooled embeddings and the bottom MLP's output meet: `dot`, the pairwise dot
    products of the F = tables + 1 feature vectors (DLRM); `cross`, DCNv2 cross layers
    x_{l+1} = x0 * (U (V x_l) + b) + x_l on their concatenation, low-rank when `rank` is
    given (U, V: d x rank); `cat`, their concatenation alone (DeepRecSys RM1/RM2)."""

    kind: Literal["dot", "cross", "cat"]
    layers: int = Field(default=3, ge=1)
    rank: int | None = Field(default=None, gt=0)


class Sample(Spec):
    """What one sample of the workload's throughput is."""

    pairs: float = Field(default=1.0, ge=1)
    """User-item pairs one sample scores (MLPerf inference aggregates many per query)."""
    note: str | None = None


class RecOptimizer(Spec):
    """Training: the optimizer of the embedding rows and of the dense layers."""

    embeddings: Literal["sgd", "adagrad", "adagrad_rowwise", "adam"] = "adagrad"
    dense: Literal["sgd", "adagrad", "adagrad_rowwise", "adam"] = "adagrad"


class Evaluation(Spec):
    """Training: forward-only evaluation passes inside the timed run (MLPerf's rules place
    them every 5% of the epoch): `pairs` evaluated every `every` pairs trained."""

    pairs: int = Field(gt=0)
    every: int = Field(gt=0)


# The shapes of work (dse.phases.WORKS) a recommender runs: a forward of its samples, and
# training.
RECOMMENDER_WORKS = frozenset({"encode", "train"})


class RecScenario(Scenario):
    """A recommender scenario: `batch` counts samples of `pairs` user-item pairs each;
    sequence lengths do not apply."""

    _transformer_training: ClassVar[bool] = False

    seq_in: int = Field(default=1, ge=0)
    pairs: float | None = Field(default=None, ge=1)
    """User-item pairs per sample (default: the workload's `sample.pairs`). MLPerf
    inference scores a query of many pairs as one sample; training counts one pair."""
    embedding_precision: DataType | None = None
    """Stored type of the embedding rows when it differs from `precision`."""
    optimizer: RecOptimizer | None = None
    """Training: the optimizers (default Adagrad for both, as MLPerf fixes)."""
    evaluation: Evaluation | None = None
    """Training: evaluation passes counted in the throughput (a benchmark's timed run)."""
    sharding: Literal["auto", "row", "column"] = "auto"
    """Several chips: how a table heavier than a chip's share is cut (auto: column-wise
    where each piece keeps whole 64-byte accesses per row, else row-wise; see
    dse.workloads.sharding.plan_groups)."""

    @model_validator(mode="after")
    def _phase(self) -> RecScenario:
        if phases.get(self.phase).work not in RECOMMENDER_WORKS:
            able = phases.those(lambda p: p.work in RECOMMENDER_WORKS)
            raise ValueError(f"a recommender runs phase {phases.listed(able, 'or')}, not "
                             f"{self.phase}")
        if (self.optimizer is not None or self.evaluation is not None) \
                and not phases.get(self.phase).trains:
            raise ValueError("optimizer and evaluation go with phase training")
        if self.training is not None:
            raise ValueError("training: a recommender states its optimizer and evaluation "
                             "passes directly in the scenario (optimizer, evaluation)")
        return self


class RecommenderSpec(WorkloadFile):
    """A DLRM-style recommender."""

    kind: Literal["recommender"]
    sample: Sample = Sample()
    dense_features: int = Field(ge=0)
    tables: list[Table] = Field(min_length=1)
    skew: Skew
    """The default skew of every table (a table's own `skew` replaces it)."""
    bottom_mlp: list[int] = Field(default=[], description="layer widths")
    interaction: Interaction
    top_mlp: list[int] = Field(min_length=1)
    scenarios: dict[str, RecScenario] = Field(min_length=1)

    @model_validator(mode="after")
    def _shapes(self) -> RecommenderSpec:
        dims = {t.dim for t in self.tables}
        if self.interaction.kind == "dot" and len(dims) > 1:
            raise ValueError("dot interaction needs every table of one dimension, found "
                             f"{sorted(dims)}")
        if self.interaction.kind == "dot" and self.bottom_mlp and self.bottom_mlp[-1] not in dims:
            raise ValueError(f"dot interaction: the bottom MLP's last width "
                             f"({self.bottom_mlp[-1]}) must equal the embedding dimension")
        if self.dense_features == 0 and self.bottom_mlp:
            raise ValueError("a bottom MLP needs dense features")
        if any(w <= 0 for w in (*self.bottom_mlp, *self.top_mlp)):
            raise ValueError("MLP widths must be positive")
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError("table names must be unique")
        return self

    @property
    def n_tables(self) -> int:
        return sum(t.count for t in self.tables)

    def skew_of(self, table: Table) -> Skew:
        return table.skew or self.skew

    def embedding_rows(self) -> int:
        return sum(t.count * t.rows for t in self.tables)

    def embedding_parameters(self) -> int:
        return sum(t.count * t.rows * t.dim for t in self.tables)


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
