"""Training memory planner: bytes per chip of parameters, gradients, optimizer state,
activations and temporary buffers of a Transformer trained under a parallel strategy, plus
what is offloaded and the FLOP multiplier recomputation implies. Pure numpy, no I/O.

Every numeric field of a `TrainingPlan` may be a scalar or an array [S] of candidate
strategies, and every categorical field a string or an array of strings; they broadcast
together, so hundreds of strategies are scored in one pass of array arithmetic.

Model states (Rajbhandari et al., "ZeRO", SC20, arXiv 1910.02054, Sec. 3.1): mixed-precision
Adam keeps 2 (16-bit parameters) + 2 (16-bit gradients) + K = 12 (fp32 master weights,
momentum, variance) bytes per parameter, 16 in all; ZeRO stage 1 shards the K part over the
Nd data-parallel ranks, stage 2 also the gradients, stage 3 (= FSDP) also the parameters.
Conventions for the other cases are in `STATE_BYTES` and `OPTIMIZER_WORDS`. Nd is dp x cp
(Megatron-Core shards its distributed optimizer over the data- and context-parallel ranks);
MoE expert parameters are sharded over ep and their ZeRO group is the dp x cp / ep ranks
that hold the same experts.

Pipeline stages differ: the first holds the input embedding and the most micro-batches in
flight, the last the LM head (a copy of tied embeddings when pp > 1) and the logits. The plan
reports the busiest of the two by default (`stage="first"` / `"last"` pick one).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dse.model import activation_memory as am
from dse.spec.workload import TransformerSpec, parameter_counts

# Bytes per parameter of (parameters, gradients, optimizer master copy) by precision.
# fp32: 4-byte weights and gradients, no master copy. mixed16: 16-bit weights and gradients,
# fp32 master weights in the optimizer (ZeRO Sec. 3.1; Micikevicius et al., ICLR 2018).
# mixed8: the mixed16 states (Megatron-Core with Transformer Engine FP8 keeps bf16 weights
# and the fp32 optimizer unchanged, as DeepSeek-V3, arXiv 2412.19437, Sec. 3.3.3, keeps fp32
# master weights) plus FP8_WEIGHT_CACHE_BYTES per layer parameter.
STATE_BYTES = {"fp32": (4.0, 4.0, 0.0), "mixed16": (2.0, 2.0, 4.0), "mixed8": (2.0, 2.0, 4.0)}
# FP8 copies of the layers' GEMM weights cached across the micro-batches of a step (TE's
# is_first_microbatch weight caching, which Megatron-Core's TELinear enables): the FP8 weight
# and its transpose (Hopper's FP8 GEMMs take both operands K-major), 1 byte each.
FP8_WEIGHT_CACHE_BYTES = 2.0
# Optimizer state in fp32 words per parameter: SGD none, momentum one (the velocity), Adam /
# AdamW two (first and second moments; Kingma & Ba, ICLR 2015). So mixed-precision Adam is
# 4 + 8 = K = 12 bytes, mixed momentum 4 + 4 = 8 (16-bit weights and gradients: 12 in all),
# plain mixed SGD 4 (the master copy); fp32 Adam 8, momentum 4, SGD 0.
# `optimizer_state_multiplier` replaces the word count (e.g. Shampoo-style preconditioners).
OPTIMIZER_WORDS = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0, "adamw": 2.0}
FP32_WORD_BYTES = 4.0
# Gradient communication bucket of data parallelism without ZeRO-3: PyTorch DDP's default
# bucket_cap_mb = 25 (Li et al., "PyTorch Distributed", VLDB 2020, Sec. 4.2.2), 25 MiB.
GRAD_BUCKET_BYTES = 25 * 2**20
# ZeRO-3 / FSDP gathers the full parameters of the layer it computes and prefetches the next
# one (Zhao et al., "PyTorch FSDP", VLDB 2023, Sec. 3.3.2: backward prefetch, at most two
# all-gathers in flight), and holds one layer's unsharded gradient before its reduce-scatter.
ZERO3_GATHERED_LAYERS = 2


@dataclass(frozen=True)
class TrainingPlan:
    """A training strategy. Numeric fields: scalars or arrays [S]; categorical: str or arrays
    of str. Batches count sequences, seq tokens."""

    seq: ArrayLike
    micro_batch: ArrayLike = 1
    global_batch: ArrayLike | None = None
    """Sequences per optimizer step; default micro_batch x dp (one micro-batch per replica)."""
    precision: ArrayLike = "mixed16"
    """fp32, mixed16 (bf16/fp16 with fp32 master weights) or mixed8 (FP8 GEMMs)."""
    optimizer: ArrayLike = "adam"
    """sgd, momentum, adam or adamw."""
    optimizer_state_multiplier: ArrayLike | None = None
    """Optimizer state in fp32 words per parameter, replacing the optimizer's own count."""
    tp: ArrayLike = 1
    pp: ArrayLike = 1
    dp: ArrayLike = 1
    cp: ArrayLike = 1
    ep: ArrayLike = 1
    """Expert parallel: shards MoE experts only."""
    sequence_parallel: ArrayLike = False
    zero: ArrayLike = 0
    """ZeRO stage 0-3 (3 = FSDP) over the dp x cp ranks."""
    recompute: ArrayLike = "none"
    """none, selective (attention scores) or full (each layer keeps only its input)."""
    schedule: ArrayLike = "1f1b"
    """Pipeline schedule: 1f1b or interleaved (with virtual_stages chunks per rank)."""
    virtual_stages: ArrayLike = 1
    compression: ArrayLike = 1.0
    """Stored activations are divided by this factor (>= 1)."""
    offload_optimizer: ArrayLike = 0.0
    """Share (or bool) of the optimizer state (with the master weights) kept off chip."""
    offload_params: ArrayLike = 0.0
    """Share (or bool) of the parameters kept off chip."""
    dropout: ArrayLike = False
    """Whether the model trains with dropout (masks are stored). Default off: Llama, MPT and
    most current LLM pretraining use none; Korthikanti et al. count it (GPT-3, BERT)."""
    activation_count: str = "all"
    """all: every tensor the backward needs (Korthikanti et al.); matmul_inputs: only the
    inputs of the layers' matrix multiplies, no embedding or output layer and no logits
    buffer (with precision fp32 and adam: the "AI and Memory Wall" Fig. 3 convention)."""


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes per chip (SI) of one pipeline stage's chip; arrays broadcast over the plan.
    On-chip parts exclude what is offloaded; gradients are never offloaded."""

    parameters: np.ndarray
    gradients: np.ndarray
    optimizer_state: np.ndarray
    activations: np.ndarray
    temporary: np.ndarray
    """Recomputed / decompressed working set of one layer, the logits buffer (last stage),
    ZeRO-3's gathered layers or the data-parallel gradient bucket."""
    total: np.ndarray
    """On-chip sum of the five above (all counted live at once: an upper bound of the peak)."""
    offloaded_parameters: np.ndarray
    offloaded_optimizer_state: np.ndarray
    offloaded: np.ndarray
    recompute_flop_multiplier: np.ndarray
    """Executed / model FLOPs of a step (model FLOPs = 3 x forward)."""
    microbatches: np.ndarray
    """Micro-batches per step per data-parallel replica."""
    last_stage: np.ndarray
    """True where the reported chip is the last pipeline stage's (else the first's)."""


def _a(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=float)


def state_bytes_per_parameter(precision: ArrayLike = "mixed16", optimizer: ArrayLike = "adam",
                              optimizer_state_multiplier: ArrayLike | None = None
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unsharded (parameter, gradient, optimizer-state) bytes per parameter: (2, 2, 12) for
    mixed-precision Adam (ZeRO Sec. 3.1); the FP8 weight cache is not included."""
    prec = am.check_choice("precision", precision, am.PRECISIONS)
    opt = am.check_choice("optimizer", optimizer, tuple(OPTIMIZER_WORDS))
    pick = [prec == p for p in STATE_BYTES]
    param, grad, master = (np.select(pick, [v[i] for v in STATE_BYTES.values()])
                           for i in range(3))
    words = np.select([opt == o for o in OPTIMIZER_WORDS], list(OPTIMIZER_WORDS.values()))
    if optimizer_state_multiplier is not None:
        words = _a(optimizer_state_multiplier) + 0 * words  # replaces, keeps the shape
    return param, grad, master + FP32_WORD_BYTES * words


def recompute_flop_multiplier(m: TransformerSpec, seq: ArrayLike,
                              recompute: ArrayLike = "none") -> np.ndarray:
    """Executed FLOPs of a training step over model FLOPs (3 x forward: forward, and a backward
    of twice its FLOPs). Full recomputation adds one forward of every layer (not the LM head):
    Korthikanti et al. Sec. 5, 96sh^2L(1 + s/6h + V/16hL) over 72sh^2L(1 + s/6h + V/12hL),
    about 4/3. Selective adds the attention products QK^T and PV of every layer, 4s^2h."""
    rec = am.check_choice("recompute", recompute, am.RECOMPUTE)
    gemm, scores, head = am.forward_flops(m, seq)
    model = 3 * (m.layers * (gemm + scores) + head)
    extra = np.select([rec == "full", rec == "selective"],
                      [m.layers * (gemm + scores), m.layers * scores], 0.0)
    return 1 + extra / model


def _validate(p: TrainingPlan) -> None:
    """ValueError naming the first field out of range; NaN and infinity are out of every
    range (a comparison with NaN is false, so each check asks for the good values)."""
    def finite(name: str) -> np.ndarray:
        v = _a(getattr(p, name))
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name}: expected a finite number, found "
                             f"{v.flat[int(np.argmin(np.isfinite(v)))]}")
        return v

    for name in ("seq", "micro_batch", "tp", "pp", "dp", "cp", "ep", "virtual_stages"):
        if not np.all(finite(name) >= 1):
            raise ValueError(f"{name}: expected >= 1")
    if not np.all(finite("compression") >= 1):
        raise ValueError("compression: expected a factor >= 1")
    if not np.all(np.isin(_a(p.zero), (0, 1, 2, 3))):
        raise ValueError("zero: expected a stage 0, 1, 2 or 3")
    for name in ("offload_optimizer", "offload_params"):
        share = _a(getattr(p, name))
        if not np.all((share >= 0) & (share <= 1)):
            raise ValueError(f"{name}: expected a share in [0, 1] or a bool")


def plan_training_memory(m: TransformerSpec, plan: TrainingPlan,
                         stage: str = "busiest") -> TrainingMemory:
    """Bytes per chip of training `m` under `plan`: the first or last pipeline stage's chip, or
    per strategy the one with the larger total (`busiest`)."""
    if stage not in ("busiest", "first", "last"):
        raise ValueError(f"stage: expected busiest, first or last, found {stage!r}")
    _validate(plan)
    tp, pp, dp, cp, ep = (_a(getattr(plan, k)) for k in ("tp", "pp", "dp", "cp", "ep"))
    zero, seq, b = _a(plan.zero), _a(plan.seq), _a(plan.micro_batch)
    prec = am.check_choice("precision", plan.precision, am.PRECISIONS)
    gb = b * dp if plan.global_batch is None else _a(plan.global_batch)
    microbatches = np.maximum(gb / (b * dp), 1.0)

    # --- parameters per chip, before ZeRO: dense part (split by tp and pp) and experts
    pc = parameter_counts(m)
    routed = pc["ffn"] * m.moe.experts / (m.moe.experts + m.moe.shared_experts) if m.moe else 0
    layer_dense = pc["total"] - pc["embeddings"] - pc["head"] - routed
    word_table = m.vocab * m.d_model  # vocabulary-parallel: split by tp
    embed_rest = pc["embeddings"] - word_table  # positions, token types, a norm: replicated
    head_copy = np.where(pp > 1, word_table * m.tied_embeddings, 0.0)  # tied: the last stage
    single = pp == 1                                                  # keeps its own copy
    dense_layers = (layer_dense - pc["norms"]) / (pp * tp) + pc["norms"] / pp
    expert = routed / (pp * tp * ep)
    extra = {"first": word_table / tp + embed_rest + np.where(single, pc["head"] / tp, 0.0),
             "last": (pc["head"] + head_copy) / tp
             + np.where(single, word_table / tp + embed_rest, 0.0)}

    param_b, grad_b, opt_b = state_bytes_per_parameter(prec, plan.optimizer,
                                                       plan.optimizer_state_multiplier)
    fp8_cache = np.where(prec == "mixed8", FP8_WEIGHT_CACHE_BYTES, 0.0)
    n_dense, n_expert = dp * cp, np.maximum(dp * cp / ep, 1.0)

    def sharded(dense: np.ndarray, experts: np.ndarray, from_stage: int) -> np.ndarray:
        on = zero >= from_stage
        return dense / np.where(on, n_dense, 1) + experts / np.where(on, n_expert, 1)

    # --- activations of one layer for one micro-batch, and the in-flight counts
    act_kw = dict(tp=tp, cp=cp, sequence_parallel=plan.sequence_parallel)
    layer = am.layer_activation_bytes(m, seq, b, precision=prec, recompute=plan.recompute,
                                      dropout=plan.dropout, count=plan.activation_count,
                                      **act_kw)
    layer_plain = am.layer_activation_bytes(m, seq, b, precision=prec, dropout=plan.dropout,
                                            count=plan.activation_count, **act_kw)
    counted = plan.activation_count == "all"  # the memory-wall count: layers only
    emb_act = am.embedding_activation_bytes(m, seq, b, dropout=plan.dropout, **act_kw) * counted
    out_act = am.output_activation_bytes(m, seq, b, precision=prec, **act_kw) * counted
    pipe = dict(schedule=plan.schedule, virtual_stages=plan.virtual_stages)
    compression = _a(plan.compression)
    # logits buffer: the LM head's 16-bit (fp32 training: 4-byte) output before the fp32
    # cast, its input gradient in backward: one more logits-sized tensor on the last stage
    logits_buf = am.act_bytes(prec) * seq * b / cp * m.vocab / tp * counted
    # working set of the layer being back-propagated: what recomputation or decompression
    # brings back on top of what it stores (zero without either)
    working = layer_plain - layer / compression
    per_layer_params = (dense_layers - pc["norms"] / pp + expert) * pp / m.layers
    zero3 = np.where((zero == 3) & (n_dense > 1), per_layer_params * (
        ZERO3_GATHERED_LAYERS * (param_b + fp8_cache) + grad_b), 0.0)
    off_p, off_o = _a(plan.offload_params), _a(plan.offload_optimizer)

    out = {}
    for name, rank in (("first", 0.0), ("last", pp - 1)):
        is_first = name == "first"
        dense = dense_layers + extra[name]
        params = sharded(dense, expert, 3) * param_b \
            + sharded(dense_layers, expert, 3) * fp8_cache
        grads = sharded(dense, expert, 2) * grad_b
        opt = sharded(dense, expert, 1) * opt_b
        held = am.inflight_layers(m.layers, pp, microbatches, rank=rank, **pipe)
        emb_mb = np.minimum(microbatches, pp) if is_first else single
        out_mb = single if is_first else 1.0
        acts = (held * layer + emb_act * emb_mb + out_act * out_mb) / compression
        bucket = np.where((zero < 3) & (n_dense > 1), np.minimum(GRAD_BUCKET_BYTES, grads), 0.0)
        temp = working + logits_buf * out_mb + zero3 + bucket
        on = dict(parameters=params * (1 - off_p), gradients=grads,
                  optimizer_state=opt * (1 - off_o), activations=acts, temporary=temp)
        out[name] = dict(on, total=sum(on.values()), offloaded_parameters=params * off_p,
                         offloaded_optimizer_state=opt * off_o)
    return _of_stage(out, stage, recompute_flop_multiplier(m, seq, plan.recompute),
                     microbatches)


def _of_stage(out: dict[str, dict[str, Any]], stage: str, flops: Any,
              microbatches: np.ndarray) -> TrainingMemory:
    """The memory of the stage asked for (first, last, or per strategy the one with the
    larger total: busiest) from both stages' parts, with the recomputation FLOP multiplier
    and the micro-batches, all broadcast to one shape."""
    first, last = out["first"], out["last"]
    pick_last = {"first": False, "last": True,
                 "busiest": last["total"] > first["total"]}[stage]
    shape = np.broadcast_shapes(*(np.shape(v) for d in out.values() for v in d.values()),
                                np.shape(pick_last), np.shape(flops), np.shape(microbatches))
    res = {k: np.broadcast_to(np.where(pick_last, last[k], first[k]), shape).astype(float)
           for k in first}
    res["offloaded"] = res["offloaded_parameters"] + res["offloaded_optimizer_state"]
    res["recompute_flop_multiplier"] = np.broadcast_to(flops, shape).astype(float)
    res["microbatches"] = np.broadcast_to(microbatches, shape).astype(float)
    res["last_stage"] = np.broadcast_to(pick_last, shape)
    return TrainingMemory(**{f.name: res[f.name] for f in fields(TrainingMemory)})
