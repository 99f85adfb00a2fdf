"""Training of a Transformer: the conventions of model-state bytes and the operator rows of
one optimizer step on one data-parallel replica (forward, recomputation and backward of every
micro-batch, then the optimizer's update). The memory planner (dse.model.training_memory)
and the step-time model (dse.model.training) build on these; no I/O.

A step of `global` sequences on `dp` replicas runs m = global / (dp x micro_batch)
micro-batches per replica; every forward, recomputation and backward row counts m times, the
optimizer once. Recomputation (Korthikanti et al., "Reducing Activation Recomputation in
Large Transformer Models", MLSys 2023, Sec. 4-5): `full` runs every layer's forward again
before its backward; `selective` the attention core only (QK^T, softmax, attention over V).
"""

from __future__ import annotations

from dataclasses import dataclass

from dse.spec.workload import Scenario, Training, TransformerSpec
from dse.workloads.optable import OpRow

# Bytes per parameter of (parameters, gradients, optimizer master copy) by training
# precision. fp32: 4-byte weights and gradients, no master copy. mixed16: 16-bit weights and
# gradients, fp32 master weights in the optimizer (Rajbhandari et al., "ZeRO", SC20, Sec.
# 3.1; Micikevicius et al., "Mixed Precision Training", ICLR 2018). mixed8: the mixed16
# states (Megatron-Core with Transformer Engine FP8 keeps bf16 weights and the fp32
# optimizer; DeepSeek-V3, arXiv 2412.19437, Sec. 3.3.3, keeps fp32 master weights).
STATE_BYTES = {"fp32": (4.0, 4.0, 0.0), "mixed16": (2.0, 2.0, 4.0), "mixed8": (2.0, 2.0, 4.0)}
# Optimizer state in fp32 words per parameter: SGD none, momentum one (the velocity), Adam /
# AdamW two (first and second moments; Kingma & Ba, ICLR 2015). So mixed-precision Adam is
# 4 + 8 = K = 12 bytes beside 2 + 2: the 16 bytes per parameter of ZeRO Sec. 3.1; mixed
# momentum 2 + 2 + 8 = 12, plain mixed SGD 2 + 2 + 4 = 8; fp32 Adam 4 + 4 + 8 = 16.
OPTIMIZER_WORDS = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0, "adamw": 2.0}
FP32_WORD_BYTES = 4.0
# Vector operations per parameter of an optimizer update (fused kernels, e.g. apex's
# multi_tensor_adam): Adam/AdamW ~12 (two moment updates, bias corrections, sqrt, divide,
# weight decay, the master-to-16-bit cast); momentum ~4; SGD ~2.
UPDATE_FLOPS = {"sgd": 2.0, "momentum": 4.0, "adam": 12.0, "adamw": 12.0}
# The scenario precision names a training run may use, and the planner's name for each.
TRAINING_PRECISIONS = {"fp32": "fp32", "bf16": "mixed16", "fp16": "mixed16",
                       "mixed": "mixed16", "fp8": "mixed8"}


def state_bytes(precision: str, optimizer: str, words: float | None = None
                ) -> tuple[float, float, float]:
    """Unsharded (parameter, gradient, optimizer-state) bytes per parameter of one training
    precision (a TRAINING_PRECISIONS value) and optimizer: (2, 2, 12) for mixed Adam."""
    param, grad, master = STATE_BYTES[precision]
    w = OPTIMIZER_WORDS[optimizer] if words is None else words
    return param, grad, master + FP32_WORD_BYTES * w


@dataclass(frozen=True)
class Setup:
    """A training setup with every choice made (the scenario's, else the defaults)."""

    micro_batch: int
    microbatches: int
    precision: str  # a TRAINING_PRECISIONS value
    optimizer: str
    optimizer_state: float | None
    zero: int
    recompute: str
    sequence_parallel: bool
    cp: int = 1  # context parallel: ranks sharing each sequence
    ep: int = 1  # expert parallel: ranks sharing the experts of each MoE layer


def setup(sc: Scenario, dp: int) -> Setup:
    """The setup `sc` states for `dp` replicas; choices it leaves open take the simplest
    value (one sequence per micro-batch, no ZeRO, no recomputation), which the step-time
    model replaces by the fastest that fits (dse.model.training)."""
    t = sc.training or Training()
    if sc.precision not in TRAINING_PRECISIONS:
        raise ValueError(f"precision {sc.precision}: training runs fp32, bf16, fp16, mixed "
                         "or fp8 (mixed precision with fp32 master weights)")
    if not isinstance(sc.batch, int):
        raise ValueError(f"batch {sc.batch}: training takes a global batch (sequences)")
    mb = t.micro_batch or 1
    cp, ep = t.context_parallel, t.expert_parallel
    if dp % cp or dp % ep:
        raise ValueError(f"training: context_parallel ({cp}) and expert_parallel ({ep}) "
                         f"divide the {dp} data-parallel ranks (chips / (tp x pp))")
    dp = dp // cp  # the ranks of one context-parallel group share their sequences
    per_replica = sc.batch / dp
    if per_replica < mb:
        raise ValueError(f"batch {sc.batch}: {dp} data-parallel replicas of micro-batch {mb} "
                         f"need a global batch of at least {dp * mb}")
    return Setup(micro_batch=mb, microbatches=max(1, round(per_replica / mb)),
                 precision=TRAINING_PRECISIONS[sc.precision], optimizer=t.optimizer,
                 optimizer_state=t.optimizer_state, zero=t.zero or 0,
                 recompute=t.recompute or "none",
                 sequence_parallel=bool(t.sequence_parallel), cp=cp, ep=ep)


def recompute_rows(forward: list[OpRow], recompute: str) -> list[OpRow]:
    """The forward rows run again before the backward: every layer row (full) or the
    attention core's (selective). Every layer row is listed whatever the choice, with a
    count of 0 where it does not run, so that setups compare operator by operator."""
    core = ("attention_score", "softmax", "attention_value")
    return [OpRow(f"{r.name}.recompute", r.kind, r.group,
                  r.count if recompute == "full" or (recompute == "selective"
                                                     and r.kind in core) else 0.0,
                  r.flops, dict(r.read), dict(r.written), m=r.m, n=r.n, k=r.k,
                  batch=r.batch, stage="recompute", dtype=r.dtype, wdtype=r.wdtype,
                  split=r.split, layer=True) for r in forward if r.layer]


def optimizer_row(model: TransformerSpec, s: Setup, parameters: float, dp: int) -> OpRow:
    """The optimizer's update of one replica's parameters (tensor and pipeline parallelism
    split it further, split `shard`): it reads the 16-bit parameters, the gradients and the
    state (master weights and moments) and writes the parameters and the state. With ZeRO
    (stage >= 1) each data-parallel rank updates only its 1/dp shard."""
    p_b, g_b, o_b = state_bytes(s.precision, s.optimizer, s.optimizer_state)
    shard = parameters / (dp if s.zero >= 1 else 1)
    del model
    return OpRow("optimizer.step", "residual", "optimizer", 1.0,
                 shard * UPDATE_FLOPS[s.optimizer],
                 read={"weights": shard * p_b, "gradients": shard * g_b,
                       "optimizer_state": shard * o_b},
                 written={"weights": shard * p_b, "optimizer_state": shard * o_b},
                 stage="optimizer", dtype="fp32", split="shard", layer=True)
