"""Multi-chip execution: what one chip runs under tensor and pipeline parallelism, the
kernels a production stack fuses, and the collectives between chips.

Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) splits each operator by its `split`
(the table `SPLITS`: which dimensions, tensor classes and FLOPs it divides, and the
collective that follows it): column-parallel GEMMs (Q/K/V, gate, up) split N; row-parallel
GEMMs (output, down) split K and are followed by an all-reduce of their output; attention
splits heads; the LM head splits the vocabulary and all-gathers the logits; norms, residual
adds and the embedding are replicated. Two all-reduces per layer. With grouped-query
attention and tp above the KV heads, each KV head is replicated on tp / kv_heads chips
(Megatron-LM and vLLM do this), so the KV cache divides by min(tp, kv_heads).

Pipeline parallelism splits the layers into `pp` stages; the activations of every token
cross each stage boundary once per pass (a point-to-point send).

The collectives' kinds, roles and cost (one scale-up domain, or hierarchically across
domains) are dse.model.collectives'. No I/O; arrays over N designs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse import phases
from dse.model.collectives import COLLECTIVES as COLLECTIVES
from dse.model.collectives import HIERARCHICAL as HIERARCHICAL
from dse.model.collectives import ROLES as ROLES
from dse.model.collectives import Collectives as Collectives
from dse.model.collectives import collective_bandwidth as collective_bandwidth
from dse.model.collectives import collective_times as collective_times
from dse.model.collectives import collective_volume as collective_volume
from dse.model.collectives import collectives_of as collectives_of
from dse.model.collectives import picked_collectives as picked_collectives
from dse.model.collectives import ranks_per_domain as ranks_per_domain
from dse.model.execution import Execution
from dse.model.operators import A, ChipOps
from dse.workloads.optable import DTYPE_BYTES, TENSOR_CLASSES, Facts, OpTable
from dse.workloads.optable import SPLITS as TABLE_SPLITS

# The stage a pipeline's activation send is counted in, by the shape of work (a serving
# iteration's sends are its decode stage's); other works count it in the phase's own.
SEND_STAGE = {"decode": "decode", "serve": "decode", "prefill": "prefill"}


@dataclass(frozen=True)
class Split:
    """What tensor parallelism divides for one kind of split: GEMM dimensions, FLOPs, the
    tensor classes read and written (by each class's divisor, `CLASS_SPLITS`), and the
    collective over the tp group (on the operator's whole output) that follows it."""

    flops: bool = False
    n: bool = False  # GEMM N (output columns)
    k: bool = False  # GEMM K (reduction)
    heads: bool = False  # independent matrices (attention heads)
    read: frozenset[str] = frozenset()
    written: frozenset[str] = frozenset()
    collective: str | None = None


_W, _A, _KV = "weights", "activations", "kv_cache"
_G, _O = "gradients", "optimizer_state"
SPLITS: dict[str, Split] = {
    "replicated": Split(),
    "column": Split(flops=True, n=True, read=frozenset({_W}), written=frozenset({_A, _KV})),
    "row": Split(flops=True, k=True, read=frozenset({_W, _A}), collective="all_reduce"),
    "heads": Split(flops=True, heads=True, read=frozenset({_A, _KV}),
                   written=frozenset({_A, _KV})),
    "part": Split(flops=True, read=frozenset({_A}), written=frozenset({_A})),
    "vocab": Split(flops=True, n=True, read=frozenset({_W}), written=frozenset({_A}),
                   collective="all_gather"),
    "column_bwd": Split(flops=True, n=True, read=frozenset({_W, _A}),
                        written=frozenset({_G}), collective="all_reduce"),
    "column_bwd_sum": Split(flops=True, n=True, read=frozenset({_W, _A}),
                            written=frozenset({_G})),
    "row_bwd": Split(flops=True, k=True, read=frozenset({_W, _A}),
                     written=frozenset({_A, _G})),
    "shard": Split(flops=True, read=frozenset({_W, _G, _O}), written=frozenset({_W, _O})),
}
assert set(SPLITS) == set(TABLE_SPLITS), "every split the lowering uses is defined here"


def _kv_split(ex: Execution, facts: Facts) -> float:
    """KV heads split over at most their number: beyond it each is replicated."""
    return float(min(ex.tp, facts.kv_heads or ex.tp))


# Chips over which tensor parallelism divides a class's bytes (where a split divides it):
# tp, except for the KV cache (above).
CLASS_SPLITS: dict[str, Callable[[Execution, Facts], float]] = {
    c: (lambda ex, facts: float(ex.tp)) for c in TENSOR_CLASSES}
CLASS_SPLITS[_KV] = _kv_split


def resident_split(name: str, ex: Execution, facts: Facts) -> float:
    """Chips one replica's bytes of a placed class are divided over: its tensor-parallel
    divisor x the pipeline stages."""
    return CLASS_SPLITS[name](ex, facts) * ex.pp


def _mask(split: np.ndarray, attr: str) -> np.ndarray:
    return np.array([getattr(SPLITS[s], attr) for s in split], dtype=bool)


def chip_ops(table: OpTable, ex: Execution, stages_in_sequence: bool = True,
             own: bool = False) -> tuple[ChipOps, Collectives]:
    """The operators one chip runs and the collectives between chips (the `plan` stage).

    stages_in_sequence: a step visits every pipeline stage in turn (latency phases: the
    step time is the sum over stages, so layer counts stay whole); otherwise stages work
    concurrently on different micro-batches (throughput phases: the longest stage's share).
    own: the caller hands the table over, so its byte and shape arrays are split in place
    instead of copied (they are [N, I, C] when the batch differs by design)."""
    tp, pp = ex.tp, ex.pp
    split = table.split
    coll = _collectives(table, ex, stages_in_sequence)  # of whole tensors: before the split
    read, written, shape = (a if own else a.copy()
                            for a in (table.read, table.written, table.shape))

    def divide(a: np.ndarray, rows: np.ndarray, by: float = float(tp)) -> None:
        if by != 1.0:
            a[..., np.flatnonzero(rows)] /= by

    for c, name in enumerate(TENSOR_CLASSES):
        by = CLASS_SPLITS[name](ex, table.facts)
        divide(read[..., c], np.array([name in SPLITS[s].read for s in split], dtype=bool), by)
        divide(written[..., c], np.array([name in SPLITS[s].written for s in split],
                                         dtype=bool), by)
    divide(shape[..., 1], _mask(split, "n"))
    divide(shape[..., 2], _mask(split, "k"))
    divide(shape[..., 3], _mask(split, "heads"))
    flops = table.flops / np.where(_mask(split, "flops"), float(tp), 1.0)

    onchip = np.zeros(np.broadcast_shapes(table.flops.shape, written.shape[:-1]))
    launches = np.ones(len(table))
    if ex.fusion == "flash":
        # The score matrix and the softmax stay in the innermost level: the scores' output,
        # the softmax's input and output and the value step's input move there instead.
        back = table.stage == "backward"
        for kind, moved in (("attention_score", (written,)), ("softmax", (read, written)),
                            ("attention_value", (read,))):
            cols = np.flatnonzero((table.kind == kind) & ~back)
            for a in moved:
                onchip[..., cols] += a[..., cols, A]
                a[..., cols, A] = 0.0
        # Their backward (FlashAttention's, Dao 2023 Alg. 2) keeps the score-sized tensors
        # on chip too: the scores' gradient that the score step reads, the probabilities and
        # their gradient the value step reads and writes, all of the softmax's.
        size = np.array([DTYPE_BYTES[d] for d in table.dtype.tolist()])
        for kind, dims, moved in (("attention_score", (0, 1), (read,)),
                                  ("attention_value", (0, 2), (read, written)),
                                  ("softmax", None, (read, written))):
            cols = np.flatnonzero((table.kind == kind) & back)
            if not cols.size:
                continue
            for a in moved:
                part = a[..., cols, A] if dims is None else np.minimum(
                    a[..., cols, A], shape[..., cols, dims[0]] * shape[..., cols, dims[1]]
                    * shape[..., cols, 3] * size[cols])
                onchip[..., cols] += part
                a[..., cols, A] -= part
        launches[np.isin(table.kind, ["softmax", "attention_value"])] = 0.0
    count = table.count.copy()
    if not stages_in_sequence:  # the stage with the most layers sets the pace
        layers = table.facts.layers or pp
        count = np.where(table.layer, count * math.ceil(layers / pp) / layers, count)
    ops = ChipOps(name=table.name, kind=table.kind, stage=table.stage, dtype=table.dtype,
                  wdtype=table.wdtype, count=count, flops=flops,
                  read=read, written=written, onchip=onchip, shape=shape, launches=launches)
    return ops, coll


# One collective as _collectives lists it: (name, role, kind, stage, group, stride, bytes,
# count); bytes and count one number, or [N] per design. The stride is the group's rank
# distance in the stack's order (collectives.ranks_per_domain; Megatron-Core tp-cp-ep-dp-pp).
Entry = tuple[str, str, str, str, int, float, Any, Any]


def _collectives(table: OpTable, ex: Execution, stages_in_sequence: bool) -> Collectives:
    """The collective each split declares (over the tp group) and the pipeline sends."""
    tp, pp = ex.tp, ex.pp
    out: list[Entry] = []
    # throughput phases: a chip runs the layers of its stage only (as chip_ops counts them)
    per_stage = math.ceil((table.facts.layers or pp) / pp) / (table.facts.layers or pp) \
        if not stages_in_sequence and pp > 1 else 1.0
    if tp > 1:  # tp is the innermost dimension: adjacent ranks, stride 1
        for i, s in enumerate(table.split):
            kind = SPLITS[s].collective
            if kind is not None:
                out.append((f"{table.name[i]}.{kind}", "tensor", kind, table.stage[i], tp,
                            1.0, table.written[..., i, A],
                            table.count[..., i] * (per_stage if table.layer[i] else 1.0)))
    exchange, reduce = table.facts.exchange, table.facts.reduce
    if ex.dp > 1 and np.any(np.asarray(exchange) > 0):
        # sharded embedding tables: the pooled rows go back to the chips whose pairs they
        # are (the data-parallel ranks, tp apart)
        out.append(("embeddings.all_to_all", "embedding_exchange", "all_to_all", "forward",
                    ex.dp, float(tp), np.asarray(exchange, dtype=float), 1.0))
    if ex.dp > 1 and np.any(np.asarray(reduce) > 0):  # data-parallel dense layers
        out.append(("gradients.all_reduce", "gradient_reduce", "all_reduce", "backward",
                    ex.dp, float(tp), np.asarray(reduce, dtype=float), 1.0))
    if pp > 1:
        out += _sends(table, ex, stages_in_sequence)
    names, roles, kinds, stages, groups, strides, sizes, counts = (
        [list(c) for c in zip(*out, strict=True)] if out else [[] for _ in range(8)])
    return collectives_of(names, kinds, stages, groups, sizes, counts, roles, strides)


def _sends(table: OpTable, ex: Execution, stages_in_sequence: bool) -> list[Entry]:
    """A pipeline stage's activations to the next stage (pp is the outermost dimension:
    the peer is tp x dp ranks away). Each of the stage's tp ranks sends its 1/tp of them over
    its own link and the peers all-gather them over the scale-up links (Narayanan et al.,
    SC21, Sec. 4.1, "scatter/gather communication optimization"; vLLM's send_tensor_dict
    with its all_gather_group); under sequence parallelism the boundary's activations are
    already split over the tp ranks, so there is no gather (training drops it)."""
    f, tp, pp = table.facts, ex.tp, ex.pp
    work = phases.get(f.phase).work
    # the activations a stage hands the next: decode, one token of each sequence per
    # generated token; serve, one iteration's prompt and decode tokens together; else
    # every token of the batch once
    passes = f.seq_out if work == "decode" else 1.0
    tokens = f.batch * (1.0 if work == "decode" else max(f.seq_in, 1))
    stage = SEND_STAGE.get(work, f.phase)
    hops = (pp - 1) if stages_in_sequence else 1.0
    if work == "serve":
        passes, tokens = 1.0, f.iteration_tokens
    whole = tokens * f.hidden_bytes_per_token
    out: list[Entry] = [("stage_send", "pipeline_send", "send", stage, 2, float(tp * ex.dp),
                         whole / tp, passes * hops)]
    if tp > 1:
        out.append(("stage_send.all_gather", "pipeline_send", "all_gather", stage, tp, 1.0,
                    whole, passes * hops * (0.0 if ex.sequence_parallel else 1.0)))
    return out
