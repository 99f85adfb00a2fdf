"""What every workload file shares in the workload schema: the phase, number formats and
precisions, a named scenario (how to run the model: phase, batch, lengths, precision,
offload, compression, training setup) and the fields every workload file states. This
module does no I/O."""

from __future__ import annotations

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
from dse.spec import lengths as length_library
from dse.spec import stack_library
from dse.spec.lengths import LengthDistribution
from dse.spec.types import Spec, Time, TimeOrZero


def _registered(name: str) -> str:
    """A phase name the registry knows (dse.phases), refused as a choice otherwise."""
    if name not in phases.REGISTRY:
        raise PydanticCustomError("literal_error", "unknown phase",
                                  {"expected": ", ".join(f"'{p}'" for p in phases.names())})
    return name


# A phase: one of dse.phases' registry (the built-ins and any a module registers).
Phase = Annotated[str, AfterValidator(_registered)]


DataType = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]


# Scenario precision names: a data type for everything, or weight-only quantization.
PrecisionName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "w8a16", "w4a16", "mixed", "fp4",
                        "nvfp4", "mxfp4"]


PRECISION_NAMES: tuple[str, ...] = get_args(PrecisionName)


# The precisions a Transformer trains in (dse.workloads.training.TRAINING_PRECISIONS): no
# integer or weight-only training.
TRAINING_PRECISION_NAMES = ("fp32", "bf16", "fp16", "mixed", "fp8")


TRAINING_PRECISION_TEXT = ("training runs fp32, bf16, fp16, mixed or fp8 (mixed precision "
                           "with fp32 master weights)")


class Engine(Spec):
    """How the serving engine runs the serve phase (continuous batching). The defaults are
    TensorRT-LLM's, the engine of the validation rows (docs: model/serving.md)."""

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
    """The optimizer: its state per parameter (SGD none, momentum 1, Adam/AdamW 2 fp32
    words) sets the memory footprint, its update the FLOPs of the optimizer step."""
    optimizer_state: float | None = Field(default=None, ge=0)
    """Optimizer state in fp32 words per parameter, for optimizers not listed (Adam: 2)."""
    zero: Literal[0, 1, 2, 3] | None = None
    """ZeRO stage over the data-parallel ranks (3 = FSDP)."""
    recompute: Literal["none", "selective", "full"] | None = None
    """Activation recomputation (Korthikanti et al. 2022)."""
    sequence_parallel: bool | None = None
    """Megatron sequence parallelism (with --tp > 1)."""
    context_parallel: int = Field(default=1, ge=1)
    """Context-parallel degree: ranks that share each sequence; it divides the data-parallel
    ranks (chips / (tp x pp))."""
    expert_parallel: int = Field(default=1, ge=1)
    """Expert-parallel degree: ranks that share each MoE layer's experts; it divides the
    data-parallel ranks."""
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
    sparsity: Literal["2:4"] | None = None
    """Weight sparsity of a Transformer's linear layers, a what-if (pruning): 2:4, two of
    every four weights zero, run on the matrix units' structured-sparse path (half the
    FLOPs, half the values plus 2 bits of position per kept value); null: dense."""
    engine: Engine | None = None
    """Serve: the serving engine's profile (iteration overhead, KV admission, limits); fields
    not given keep the documented default (Engine)."""
    training: Training | None = None
    """Training of a Transformer: micro-batch, optimizer, ZeRO, recomputation, offload;
    fields not given are chosen per design (dse.model.training)."""
    stack: str | None = None
    """The software stack the scenario runs on: a shipped name (stacks/: cuda-default,
    trtllm-triton, vllm-cuda, vllm-rocm, megatron-te) or a stack file's path; left out, the
    hardware vendor's default (dse.spec.stack)."""
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

    @field_validator("sparsity")
    @classmethod
    def _sparse_inference(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Pruned weights are an inference what-if: training updates dense weights."""
        phase = phases.REGISTRY.get(str(info.data.get("phase")))
        if value is not None and phase is not None and phase.trains:
            raise ValueError(f"{value}: sparse weights are modelled for inference; "
                             "training updates dense weights")
        return value

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

    @field_validator("stack")
    @classmethod
    def _stack_known(cls, value: str | None) -> str | None:
        """A name or path the stack library loads (a broken stack file reports itself)."""
        if value is not None:
            stack_library.find(value)
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
    """One line on what the model is, shown with the shipped workloads."""
    base: str | None = None
    """Workload this one inherits from (a name or a path)."""
