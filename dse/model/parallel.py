"""Multi-chip execution: what one chip runs under tensor and pipeline parallelism, the
kernels a production stack fuses, and the collectives with their cost.

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

Each collective kind is priced by its own formula (`COLLECTIVES`; the ring and pairwise
algorithms NCCL uses on NVLink and xGMI, Thakur et al., "Optimization of Collective
Communication Operations in MPICH", IJHPCA 2005), with S the whole tensor and p chips:
    all_reduce:     2 (p - 1) steps, 2 (p - 1) / p x S sent per chip
    all_gather:       (p - 1) steps,   (p - 1) / p x S
    reduce_scatter:   (p - 1) steps,   (p - 1) / p x S
    all_to_all:       (p - 1) steps,   (p - 1) / p x S  (each chip keeps 1/p of its data)
    send:                   1 step,                  S
    time = overhead + steps x latency + sent / (link bandwidth x achieved fraction)
with the link bandwidth of the peers a chip reaches directly (fully connected chips), and
the scale-out network for groups larger than a node. No I/O; arrays over N designs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse import phases
from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.model.operators import A, ChipOps
from dse.workloads.optable import DTYPE_BYTES, TENSOR_CLASSES, Facts, OpTable
from dse.workloads.optable import SPLITS as TABLE_SPLITS

# What a collective is for (Collectives.role): the stages that plan, overlap or count a
# collective find it by its role, never by its name.
ROLES = (
    "tensor",  # a tensor-parallel split's all-reduce or gather (Megatron's f and g)
    "pipeline_send",  # a stage's activations to the next (and gradients back, training)
    "embedding_exchange",  # sharded embedding tables' pooled rows to their samples' chips
    "gradient_reduce",  # data-parallel gradients all-reduced (ZeRO 0, DDP)
    "gradient_reduce_scatter",  # ... reduce-scattered (ZeRO 1-3, distributed optimizer)
    "parameter_all_gather",  # updated parameter shards all-gathered after the update
    "parameter_prefetch",  # ZeRO-3 / FSDP: every stage's parameters gathered before use
    "context_kv_gather",  # context parallelism: K and V of the whole sequence (forward)
    "context_kv_scatter",  # ... their gradients reduce-scattered (backward)
    "expert_dispatch",  # expert parallelism: tokens to their experts and back (forward)
    "expert_dispatch_backward",  # ... and their gradients (backward)
)

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


# (steps, bytes each chip sends) of one collective over p chips of a tensor of S bytes.
COLLECTIVES: dict[str, Callable[[int, np.ndarray], tuple[int, np.ndarray]]] = {
    "all_reduce": lambda p, s: (2 * (p - 1), 2.0 * (p - 1) / p * s),
    "all_gather": lambda p, s: (p - 1, (p - 1) / p * s),
    "reduce_scatter": lambda p, s: (p - 1, (p - 1) / p * s),
    "all_to_all": lambda p, s: (p - 1, (p - 1) / p * s),
    "send": lambda p, s: (1, 1.0 * s),
}


@dataclass(frozen=True)
class Collectives:
    """Communication steps, [J] arrays (nbytes [J] or [N, J] when the batch differs by
    design): kind (a key of COLLECTIVES), stage (prefill, decode ... as the operators'),
    group size, bytes per instance (the whole tensor), repeat count, and role (one of
    ROLES: what the collective is for, which the training stages find it by)."""

    name: np.ndarray
    kind: np.ndarray
    stage: np.ndarray
    group: np.ndarray
    nbytes: np.ndarray
    count: np.ndarray
    role: np.ndarray

    def __post_init__(self) -> None:
        for kind in self.kind:
            if kind not in COLLECTIVES:
                raise ValueError(f"unknown collective '{kind}'; expected one of: "
                                 f"{', '.join(COLLECTIVES)}")
        if len(self.role) != len(self.name):
            raise ValueError(f"{len(self.name)} collectives but {len(self.role)} roles")
        for role in self.role:
            if role not in ROLES:
                raise ValueError(f"unknown collective role '{role}'; expected one of: "
                                 f"{', '.join(ROLES)}")

    def having(self, role: str) -> np.ndarray:
        """[J] bool: the collectives of `role` (one of ROLES)."""
        if role not in ROLES:
            raise ValueError(f"unknown collective role '{role}'; expected one of: "
                             f"{', '.join(ROLES)}")
        return self.role == role

    def __len__(self) -> int:
        return len(self.name)


def _mask(split: np.ndarray, attr: str) -> np.ndarray:
    return np.array([getattr(SPLITS[s], attr) for s in split], dtype=bool)


def picked_collectives(coll: Collectives, tables: np.ndarray) -> Collectives:
    """The collectives of designs that run distinct tables (`tables`: [N] table of each
    design), their per-table bytes and counts ([U, J]) picked per design ([N, J])."""
    return dataclasses.replace(coll, **{f: getattr(coll, f)[tables] for f in ("nbytes", "count")
                                        if np.ndim(getattr(coll, f)) >= 2})


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


def _collectives(table: OpTable, ex: Execution, stages_in_sequence: bool) -> Collectives:
    """The collective each split declares (over the tp group) and the pipeline sends."""
    tp, pp = ex.tp, ex.pp
    sizes: list[float | np.ndarray]  # bytes and calls per collective: one, or [N] per design
    counts: list[float | np.ndarray]
    names, kinds, stages, groups, sizes, counts = [], [], [], [], [], []
    roles: list[str] = []
    # throughput phases: a chip runs the layers of its stage only (as chip_ops counts them)
    per_stage = math.ceil((table.facts.layers or pp) / pp) / (table.facts.layers or pp) \
        if not stages_in_sequence and pp > 1 else 1.0
    if tp > 1:
        for i, s in enumerate(table.split):
            kind = SPLITS[s].collective
            if kind is None:
                continue
            names.append(f"{table.name[i]}.{kind}")
            roles.append("tensor")
            kinds.append(kind)
            stages.append(table.stage[i])
            groups.append(tp)
            sizes.append(table.written[..., i, A])
            counts.append(table.count[..., i] * (per_stage if table.layer[i] else 1.0))
    exchange = table.facts.exchange
    if ex.dp > 1 and np.any(np.asarray(exchange) > 0):
        # sharded embedding tables: the pooled rows go back to the chips whose pairs they are
        names.append("embeddings.all_to_all")
        roles.append("embedding_exchange")
        kinds.append("all_to_all")
        stages.append("forward")
        groups.append(ex.dp)
        sizes.append(np.asarray(exchange, dtype=float))
        counts.append(1.0)
    reduce = table.facts.reduce
    if ex.dp > 1 and np.any(np.asarray(reduce) > 0):
        names.append("gradients.all_reduce")  # data-parallel dense layers
        roles.append("gradient_reduce")
        kinds.append("all_reduce")
        stages.append("backward")
        groups.append(ex.dp)
        sizes.append(np.asarray(reduce, dtype=float))
        counts.append(1.0)
    if pp > 1:
        f = table.facts
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
        names.append("stage_send")
        roles.append("pipeline_send")
        kinds.append("send")
        stages.append(stage)
        groups.append(2)
        sizes.append(tokens * f.hidden_bytes_per_token)
        counts.append(passes * hops)
    return collectives_of(names, kinds, stages, groups, sizes, counts, roles)


def collectives_of(names: list[str], kinds: list[str], stages: list[str], groups: list[int],
                   sizes: list[float | np.ndarray], counts: list[float | np.ndarray],
                   roles: list[str]) -> Collectives:
    """Collectives from one list per field, one entry per collective (sizes and counts:
    numbers, or [N] arrays where they differ by design; roles: of ROLES)."""
    lead = np.broadcast_shapes(*(np.shape(v) for v in (*sizes, *counts))) if sizes else ()

    def cols(values: list[Any]) -> np.ndarray:
        if not values:
            return np.zeros(0)
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), lead) for v in values],
                        axis=-1)

    return Collectives(name=np.array(names, dtype=object), kind=np.array(kinds, dtype=object),
                       stage=np.array(stages, dtype=object), group=np.array(groups, dtype=float),
                       nbytes=cols(sizes), count=cols(counts),
                       role=np.array(roles, dtype=object))


def collective_bandwidth(batch: DesignBatch, group: int) -> np.ndarray:
    """[N] bytes/s one chip moves per direction in a collective over `group` chips."""
    links = batch.links * batch.link_bandwidth * batch.link_fraction
    per_node = np.broadcast_to(np.asarray(batch.chips_per_node, dtype=float), (batch.n,))
    if batch.topology == "fully_connected":
        peers = np.minimum(group, per_node) - 1
        links = np.where(per_node > 1, links * peers / np.maximum(per_node - 1, 1), links)
    out = group > per_node
    if np.any(out):
        across = np.where(links > 0, np.minimum(links, batch.scale_out_bandwidth),
                          batch.scale_out_bandwidth) if np.any(links > 0) \
            else batch.scale_out_bandwidth
        links = np.where(out, across, links)
    return links


def collective_volume(coll: Collectives) -> np.ndarray:
    """[J] or [N, J] bytes each chip sends over its links per instance of each collective."""
    out = np.zeros(np.shape(coll.nbytes))
    for j, kind in enumerate(coll.kind):
        out[..., j] = COLLECTIVES[kind](int(coll.group[j]), coll.nbytes[..., j])[1]
    return out


def collective_times(batch: DesignBatch, coll: Collectives) -> np.ndarray:
    """[N, J] seconds per instance of each collective (inf where chips cannot talk)."""
    out = np.zeros((batch.n, len(coll)))
    links: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # bandwidth, latency per group size
    for j, kind in enumerate(coll.kind):
        p = int(coll.group[j])
        if p not in links:
            links[p] = (collective_bandwidth(batch, p), batch.link_latency + np.where(
                p > np.asarray(batch.chips_per_node), batch.scale_out_latency, 0.0))
        bw, latency = links[p]
        steps, volume = COLLECTIVES[kind](p, coll.nbytes[..., j])
        with np.errstate(divide="ignore"):
            out[:, j] = batch.collective_overhead + steps * latency + np.where(
                bw > 0, volume / np.where(bw > 0, bw, 1.0), np.inf)
    return out
