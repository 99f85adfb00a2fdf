"""Multi-chip inference: what one chip runs under tensor and pipeline parallelism, the
kernels a production stack fuses, and the collectives with their cost.

Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) splits each operator by its `split`:
column-parallel GEMMs (Q/K/V, gate, up) split N; row-parallel GEMMs (output, down) split K
and are followed by an all-reduce of their output; attention splits heads; the LM head
splits the vocabulary and all-gathers the logits; norms, residual adds and the embedding
are replicated. Two all-reduces per layer.

Pipeline parallelism splits the layers into `pp` stages; the activations of every token
cross each stage boundary once per pass.

Collective on p chips (ring algorithm, as NCCL uses on NVLink and xGMI):
    all-reduce: overhead + 2 (p - 1) latency + 2 (p - 1) / p * bytes / bandwidth
    all-gather: overhead + (p - 1) latency + (p - 1) / p * bytes / bandwidth
    send:       overhead + latency + bytes / bandwidth
with bandwidth the chip's link bandwidth per direction x its achieved fraction (the peers
it can reach directly, for fully connected chips); groups larger than a node use the
scale-out network. No I/O; arrays over N designs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.performance import KV, A, ChipOps, W
from dse.workloads.optable import OpTable

# Fusion of the flash-attention kernel (Dao et al. 2022), used by every production
# inference stack: scores, softmax and the weighted sum of V run as one kernel, so the
# score matrix never leaves the chip's innermost memory and the softmax and value steps
# launch nothing of their own. Every other operator is its own kernel.
FUSIONS = ("flash", "none")


@dataclass(frozen=True)
class Collectives:
    """Communication steps, [J] arrays: kind (all_reduce, all_gather, send), stage (prefill,
    decode ... as the operators'), group size, bytes per instance (the full tensor), repeat
    count."""

    name: np.ndarray
    kind: np.ndarray
    stage: np.ndarray
    group: np.ndarray
    nbytes: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return len(self.count)


def chip_ops(table: OpTable, tp: int, pp: int, fusion: str = "flash",
             stages_in_sequence: bool = True) -> tuple[ChipOps, Collectives]:
    """The operators one chip runs and the collectives between chips.

    stages_in_sequence: a step visits every pipeline stage in turn (latency phases: the
    step time is the sum over stages, so layer counts stay whole); otherwise stages work
    concurrently on different micro-batches (throughput phases: one stage's share)."""
    split = table.split
    div = np.where(split == "replicated", 1.0, float(tp))
    read, written = table.read.copy(), table.written.copy()
    shape = table.shape.copy()
    weights_split = np.isin(split, ["column", "row", "vocab"])
    read[:, W] /= np.where(weights_split, tp, 1.0)
    read[:, A] /= np.where(np.isin(split, ["row", "heads", "part"]), tp, 1.0)
    read[:, KV] /= np.where(split == "heads", tp, 1.0)
    written[:, A] /= np.where(np.isin(split, ["column", "heads", "part", "vocab"]), tp, 1.0)
    written[:, KV] /= np.where(np.isin(split, ["column", "heads"]), tp, 1.0)
    shape[:, 1] /= np.where(np.isin(split, ["column", "vocab"]), tp, 1.0)
    shape[:, 2] /= np.where(split == "row", tp, 1.0)
    shape[:, 3] /= np.where(split == "heads", tp, 1.0)

    onchip = np.zeros(len(table))
    launches = np.ones(len(table))
    if fusion == "flash":
        score = table.kind == "attention_score"
        onchip += np.where(score, written[:, A], 0.0)
        written[:, A] = np.where(score, 0.0, written[:, A])
        soft = table.kind == "softmax"
        onchip += np.where(soft, read[:, A] + written[:, A], 0.0)
        read[:, A] = np.where(soft, 0.0, read[:, A])
        written[:, A] = np.where(soft, 0.0, written[:, A])
        value = table.kind == "attention_value"
        onchip += np.where(value, read[:, A], 0.0)
        read[:, A] = np.where(value, 0.0, read[:, A])
        launches = np.where(soft | value, 0.0, launches)
    count = table.count.copy()
    if not stages_in_sequence:  # the stage with the most layers sets the pace
        layers = table.meta.get("layers") or pp
        count = np.where(table.layer, count * math.ceil(layers / pp) / layers, count)
    ops = ChipOps(name=table.name, kind=table.kind, stage=table.stage, dtype=table.dtype,
                  wdtype=table.wdtype, count=count, flops=table.flops / div,
                  read=read, written=written, onchip=onchip, shape=shape, launches=launches)

    names, kinds, stages, groups, sizes, counts = [], [], [], [], [], []
    if tp > 1:
        for i in np.flatnonzero(np.isin(split, ["row", "vocab"])):
            reduce = split[i] == "row"
            names.append(f"{table.name[i]}.{'all_reduce' if reduce else 'all_gather'}")
            kinds.append("all_reduce" if reduce else "all_gather")
            stages.append(table.stage[i])
            groups.append(tp)
            sizes.append(table.written[i, A])
            counts.append(table.count[i])
    if pp > 1:
        meta = table.meta
        passes = meta["seq_out"] if meta["phase"] == "decode" else 1.0
        tokens = meta["batch"] * (1.0 if meta["phase"] == "decode" else max(meta["seq_in"], 1))
        stage = {"decode": "decode", "serve": "decode", "prefill": "prefill"}.get(
            meta["phase"], meta["phase"])
        if meta["phase"] == "serve":  # one prefill pass plus seq_out decode passes
            names.append("stage_send.prefill")
            kinds.append("send")
            stages.append("prefill")
            groups.append(2)
            sizes.append(meta["batch"] * meta["seq_in"] * meta["hidden_bytes_per_token"])
            counts.append((pp - 1) if stages_in_sequence else 1.0)
            passes, tokens = meta["seq_out"], meta["batch"]
        names.append("stage_send")
        kinds.append("send")
        stages.append(stage)
        groups.append(2)
        sizes.append(tokens * meta["hidden_bytes_per_token"])
        counts.append(passes * ((pp - 1) if stages_in_sequence else 1.0))
    coll = Collectives(name=np.array(names, dtype=object), kind=np.array(kinds, dtype=object),
                       stage=np.array(stages, dtype=object),
                       group=np.array(groups, dtype=float), nbytes=np.array(sizes, dtype=float),
                       count=np.array(counts, dtype=float))
    return ops, coll


def collective_bandwidth(batch: DesignBatch, group: int) -> np.ndarray:
    """[N] bytes/s one chip moves per direction in a collective over `group` chips."""
    links = batch.links * batch.link_bandwidth * batch.link_fraction
    if batch.topology == "fully_connected" and batch.chips_per_node > 1:
        peers = min(group, batch.chips_per_node) - 1
        links = links * peers / (batch.chips_per_node - 1)
    if group > batch.chips_per_node:
        links = np.minimum(links, batch.scale_out_bandwidth) if np.any(links > 0) \
            else batch.scale_out_bandwidth
    return links


def _ring(kind: str, p: int, size: float) -> tuple[int, float]:
    """(steps, bytes each chip sends) of one ring collective over p chips."""
    if kind == "all_reduce":
        return 2 * (p - 1), 2 * (p - 1) / p * size
    if kind == "all_gather":
        return p - 1, (p - 1) / p * size
    return 1, size


def collective_volume(coll: Collectives) -> np.ndarray:
    """[J] bytes each chip sends over its links per instance of each collective."""
    return np.array([_ring(str(coll.kind[j]), int(coll.group[j]), float(coll.nbytes[j]))[1]
                     for j in range(len(coll))], dtype=float)


def collective_times(batch: DesignBatch, coll: Collectives) -> np.ndarray:
    """[N, J] seconds per instance of each collective (inf where chips cannot talk)."""
    out = np.zeros((batch.n, len(coll)))
    for j in range(len(coll)):
        p = int(coll.group[j])
        bw = collective_bandwidth(batch, p)
        latency = batch.link_latency + (batch.scale_out_latency
                                        if p > batch.chips_per_node else 0.0)
        steps, volume = _ring(str(coll.kind[j]), p, float(coll.nbytes[j]))
        with np.errstate(divide="ignore"):
            out[:, j] = batch.collective_overhead + steps * latency + np.where(
                bw > 0, volume / np.where(bw > 0, bw, 1.0), np.inf)
    return out
