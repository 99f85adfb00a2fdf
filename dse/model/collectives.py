"""Collectives between chips: their kinds, roles and cost over a described topology.

Each collective kind is priced by its own formula (`COLLECTIVES`; the ring and pairwise
algorithms NCCL uses on NVLink and xGMI, Thakur et al., "Optimization of Collective
Communication Operations in MPICH", IJHPCA 2005), with S the whole tensor and p chips:
    all_reduce:     2 (p - 1) steps, 2 (p - 1) / p x S sent per chip
    all_gather:       (p - 1) steps,   (p - 1) / p x S
    reduce_scatter:   (p - 1) steps,   (p - 1) / p x S
    all_to_all:       (p - 1) steps,   (p - 1) / p x S  (each chip keeps 1/p of its data)
    send:                   1 step,                  S
    time = overhead + steps x latency + sent / (link bandwidth x achieved fraction)
with the link bandwidth of the peers a chip reaches directly (fully connected chips).

A group that spans scale-up domains (`chips_per_node`: an NVLink node, an xGMI platform)
runs hierarchically, as NCCL does (`HIERARCHICAL`): with g of its p ranks in each domain
(`ranks_per_domain`: the group's stride in the stack's rank order, Megatron-Core's
tp-cp-ep-dp-pp) and n = p / g domains, an all-reduce reduce-scatters within the domain
(g ranks, the links), all-reduces S / g per rank across the n domains over that rank's own
NICs (every rank's NIC at once: a rail-optimized or full-bisection fabric), and
all-gathers within the domain again:
    all_reduce:     2 (g - 1) steps, 2 (g - 1) / g x S  in;  2 (n - 1), 2 (n - 1) / n x S / g  out
    all_gather:       (g - 1),         (g - 1) / g x S  in;    (n - 1),   (n - 1) / n x S / g  out
    reduce_scatter:   (g - 1),         (g - 1) / g x S  in;    (n - 1),   (n - 1) / n x S / g  out
    all_to_all:       (g - 1),         (g - 1) / p x S  in;    (p - g),   (p - g) / p x S      out
    send:           1 step in a domain (g = 2), else 1 step out
    time = overhead + in steps x link latency + out steps x scale-out latency
           + max(in bytes / link bandwidth, out bytes / (scale-out bandwidth x its fraction))
The phases are pipelined chunk by chunk, so the slower link class sets the rate: NCCL's
tuning model prices its hierarchical algorithms at min(bwIntra, bwInter) (NVIDIA/nccl
src/graph/tuning.cc, ncclTopoTuneModel: NVLS, NVLS_TREE); an all-to-all's sends go out
together (ncclGroupStart/End), NVLink and network at once. A group within one domain is
priced as above. No I/O; arrays over N designs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.model.batch import DesignBatch

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
    "parameter_prefetch_backward",  # ... and gathered again for the backward
    "context_kv_gather",  # context parallelism: K and V of the whole sequence (forward)
    "context_kv_scatter",  # ... their gradients reduce-scattered (backward)
    "expert_dispatch",  # expert parallelism: tokens to their experts and back (forward)
    "expert_dispatch_backward",  # ... and their gradients (backward)
)

# (steps, bytes each chip sends) of one collective over p chips of a tensor of S bytes.
COLLECTIVES: dict[str, Callable[[int, np.ndarray], tuple[int, np.ndarray]]] = {
    "all_reduce": lambda p, s: (2 * (p - 1), 2.0 * (p - 1) / p * s),
    "all_gather": lambda p, s: (p - 1, (p - 1) / p * s),
    "reduce_scatter": lambda p, s: (p - 1, (p - 1) / p * s),
    "all_to_all": lambda p, s: (p - 1, (p - 1) / p * s),
    "send": lambda p, s: (1, 1.0 * s),
}

Hier = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# A group spanning domains, g of its p ranks in each ([N] per design) and n = p / g domains:
# (steps within the domain, bytes each chip sends over the links, steps across domains,
# bytes each chip sends over its scale-out NICs), of a tensor of S bytes (module docstring;
# NCCL's hierarchical algorithms: reduce-scatter in the domain, the cross-domain step on
# 1/g of the data per rank, all-gather in the domain).
HIERARCHICAL: dict[str, Callable[[int, np.ndarray, np.ndarray], Hier]] = {
    "all_reduce": lambda p, g, s: (2 * (g - 1), 2.0 * (g - 1) / g * s,
                                   2 * (p / g - 1), 2.0 * (1 - g / p) * s / g),
    "all_gather": lambda p, g, s: (g - 1, (g - 1) / g * s, p / g - 1, (1 - g / p) * s / g),
    "reduce_scatter": lambda p, g, s: (g - 1, (g - 1) / g * s, p / g - 1,
                                       (1 - g / p) * s / g),
    "all_to_all": lambda p, g, s: (g - 1, (g - 1) / p * s, p - g, (p - g) / p * s),
    "send": lambda p, g, s: (np.where(g >= 2, 1.0, 0.0), np.where(g >= 2, 1.0, 0.0) * s,
                             np.where(g >= 2, 0.0, 1.0), np.where(g >= 2, 0.0, 1.0) * s),
}
assert set(HIERARCHICAL) == set(COLLECTIVES), "every collective kind runs across domains"


def ranks_per_domain(domain: np.ndarray | int, stride: float, p: int) -> np.ndarray:
    """[N] ranks of a group of `p` that share a scale-up domain of `domain` chips ([N]),
    the group's members `stride` ranks apart in the stack's rank order (Megatron-Core's
    RankGenerator, order tp-cp-ep-dp-pp: a tensor-parallel group is adjacent ranks, stride
    1; a data-parallel group's stride is the product of the inner degrees, tp x cp):
    clamp(floor(domain / stride), 1, p)."""
    d = np.asarray(domain, dtype=float)
    return np.clip(np.floor(d / max(float(stride), 1.0)), 1.0, float(p))


@dataclass(frozen=True)
class Collectives:
    """Communication steps, [J] arrays (nbytes [J] or [N, J] when the batch differs by
    design): kind (a key of COLLECTIVES), stage (prefill, decode ... as the operators'),
    group size, bytes per instance (the whole tensor), repeat count, role (one of
    ROLES: what the collective is for, which the training stages find it by) and stride:
    the rank distance between the group's members in the stack's rank order
    (`ranks_per_domain`; None: 1, adjacent ranks)."""

    name: np.ndarray
    kind: np.ndarray
    stage: np.ndarray
    group: np.ndarray
    nbytes: np.ndarray
    count: np.ndarray
    role: np.ndarray
    stride: np.ndarray | None = None

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
        if self.stride is not None and (len(self.stride) != len(self.name)
                                        or np.any(np.asarray(self.stride) < 1)):
            raise ValueError(f"{len(self.name)} collectives need as many strides of at "
                             f"least 1; found {list(self.stride)}")

    def strides(self) -> np.ndarray:
        """[J] each collective's stride (1 where none is given)."""
        return np.ones(len(self.name)) if self.stride is None \
            else np.asarray(self.stride, dtype=float)

    def having(self, role: str) -> np.ndarray:
        """[J] bool: the collectives of `role` (one of ROLES)."""
        if role not in ROLES:
            raise ValueError(f"unknown collective role '{role}'; expected one of: "
                             f"{', '.join(ROLES)}")
        return self.role == role

    def __len__(self) -> int:
        return len(self.name)


def picked_collectives(coll: Collectives, tables: np.ndarray) -> Collectives:
    """The collectives of designs that run distinct tables (`tables`: [N] table of each
    design), their per-table bytes and counts ([U, J]) picked per design ([N, J])."""
    return dataclasses.replace(coll, **{f: getattr(coll, f)[tables] for f in ("nbytes", "count")
                                        if np.ndim(getattr(coll, f)) >= 2})


def collectives_of(names: list[str], kinds: list[str], stages: list[str], groups: list[int],
                   sizes: list[float | np.ndarray], counts: list[float | np.ndarray],
                   roles: list[str], strides: list[float] | None = None) -> Collectives:
    """Collectives from one list per field, one entry per collective (sizes and counts:
    numbers, or [N] arrays where they differ by design; roles: of ROLES; strides: the rank
    distance within each group, None: adjacent ranks)."""
    lead = np.broadcast_shapes(*(np.shape(v) for v in (*sizes, *counts))) if sizes else ()

    def cols(values: list[Any]) -> np.ndarray:
        if not values:
            return np.zeros(0)
        return np.stack([np.broadcast_to(np.asarray(v, dtype=float), lead) for v in values],
                        axis=-1)

    return Collectives(name=np.array(names, dtype=object), kind=np.array(kinds, dtype=object),
                       stage=np.array(stages, dtype=object), group=np.array(groups, dtype=float),
                       nbytes=cols(sizes), count=cols(counts),
                       role=np.array(roles, dtype=object),
                       stride=None if strides is None else np.array(strides, dtype=float))


def collective_bandwidth(batch: DesignBatch, group: int | np.ndarray) -> np.ndarray:
    """[N] bytes/s one chip moves per direction over the scale-up links in a collective
    over `group` chips of its domain ([N] where it differs by design)."""
    links = batch.links * batch.link_bandwidth * batch.link_fraction
    per_node = np.broadcast_to(np.asarray(batch.chips_per_node, dtype=float), (batch.n,))
    if batch.topology == "fully_connected":
        peers = np.minimum(group, per_node) - 1
        links = np.where(per_node > 1, links * peers / np.maximum(per_node - 1, 1), links)
    return links


def scale_out_bandwidth(batch: DesignBatch) -> np.ndarray:
    """[N] bytes/s one chip moves per direction over its scale-out NICs in a collective:
    their line rate x the achieved fraction (nccl-tests multi-node bus bandwidth)."""
    return batch.scale_out_bandwidth * batch.scale_out_fraction


def collective_volume(coll: Collectives) -> np.ndarray:
    """[J] or [N, J] bytes each chip sends over its links per instance of each collective."""
    out = np.zeros(np.shape(coll.nbytes))
    for j, kind in enumerate(coll.kind):
        out[..., j] = COLLECTIVES[kind](int(coll.group[j]), coll.nbytes[..., j])[1]
    return out


def collective_times(batch: DesignBatch, coll: Collectives) -> np.ndarray:
    """[N, J] seconds per instance of each collective (inf where chips cannot talk): within
    one scale-up domain as COLLECTIVES prices it, across domains hierarchically
    (HIERARCHICAL; the module docstring)."""
    out = np.zeros((batch.n, len(coll)))
    per_node = np.broadcast_to(np.asarray(batch.chips_per_node, dtype=float), (batch.n,))
    links: dict[int, np.ndarray] = {}  # the links' bandwidth per group size
    strides = coll.strides()
    out_bw = scale_out_bandwidth(batch)
    for j, kind in enumerate(coll.kind):
        p = int(coll.group[j])
        g = ranks_per_domain(per_node, strides[j], p)  # [N]
        if p not in links:
            links[p] = collective_bandwidth(batch, p)
        bw = links[p]
        steps, volume = COLLECTIVES[kind](p, coll.nbytes[..., j])
        with np.errstate(divide="ignore", invalid="ignore"):
            flat = batch.collective_overhead + steps * batch.link_latency + np.where(
                bw > 0, volume / np.where(bw > 0, bw, 1.0), np.inf)
            if np.all(g >= p):  # every design's group within one domain
                out[:, j] = flat
                continue
            in_steps, in_bytes, out_steps, out_bytes = HIERARCHICAL[kind](
                p, g, coll.nbytes[..., j])
            in_bw = collective_bandwidth(batch, g)
            # a class that carries nothing takes no time, even without links (0 / 0)
            t_in = np.where(in_bytes > 0, in_bytes / in_bw, 0.0)
            t_out = np.where(out_bytes > 0, out_bytes / out_bw, 0.0)
            hier = batch.collective_overhead + in_steps * batch.link_latency \
                + out_steps * batch.scale_out_latency + np.maximum(t_in, t_out)
        out[:, j] = np.where(g >= p, flat, hier)
    return out
