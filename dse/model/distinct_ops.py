"""The operator-time stage over a table's distinct operators only. A layer repeats operators
the kernel cannot tell apart (gate and up projections, K and V projections, the two
residual adds, the norms: a Transformer training step's 55 operators are 41 kinds of work):
the kernel (dse.model.performance) times each operator on its own, from that operator's
kind, precisions, FLOPs, bytes, shape and launches and where its data lives, so an operator
equal to an earlier one in all of these gets that one's time, traffic and bound, unchanged
to the bit. No I/O.
"""

from __future__ import annotations

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.operators import ChipOps, OpTimes, take_rows
from dse.model.stages import Access, timed
from dse.workloads.optable import Facts

# ChipOps quantities per operator, as the kernel reads them (one more dimension: per design)
_PER_OP = {"flops": 1, "read": 2, "written": 2, "onchip": 1, "shape": 2, "launches": 1}


def same_as(ops: ChipOps, facts: Facts) -> np.ndarray | None:
    """[I] index of the first operator whose kernel inputs from the table equal each one's
    (its own index where none does), or None when every operator is distinct or a quantity
    differs by design. Gathers (timed against their own bandwidths) are never merged. The
    placement (`Access`) is compared per pass (`timed_distinct`)."""
    if any(getattr(ops, f).ndim != nd for f, nd in _PER_OP.items()):
        return None
    i = len(ops.name)
    codes = [np.unique(np.asarray(a, dtype=str), return_inverse=True)[1].reshape(i)
             for a in (ops.kind, ops.dtype, ops.wdtype)]
    gathers = np.array([j if n in facts.gathers else -1 for j, n in enumerate(ops.name.tolist())])
    key = np.column_stack([*codes, gathers, ops.flops, ops.read, ops.written, ops.onchip,
                           ops.shape, ops.launches]).astype(float)
    # compared as bits: -0.0 and 0.0 stay apart, so do different NaNs
    _, first, inverse = np.unique(np.ascontiguousarray(key).view(np.int64), axis=0,
                                  return_index=True, return_inverse=True)
    same = first[inverse.reshape(i)]
    return None if bool((same == np.arange(i)).all()) else same


def timed_distinct(db: DesignBatch, ops: ChipOps, acc: Access, facts: Facts,
                   same: np.ndarray | None) -> OpTimes:
    """`stages.timed` of the operators, each distinct one timed once (`same`: from
    `same_as`; operators whose data lives elsewhere in this pass stay apart)."""
    if same is None:
        return timed(db, ops, acc, facts)
    same = same.copy()
    twins = np.flatnonzero(same != np.arange(len(same)))
    apart = ~(acc.act_home[:, twins] == acc.act_home[:, same[twins]]).all(axis=0)
    for h in acc.home.values():
        if h.ndim == 3:  # shares that differ by operator
            apart |= ~(h[:, twins] == h[:, same[twins]]).all(axis=(0, 2))
    same[twins[apart]] = twins[apart]
    keep = np.flatnonzero(same == np.arange(len(same)))
    if keep.size == len(same):
        return timed(db, ops, acc, facts)
    part = timed(db, take_rows(ops, keep), Access(
        home={c: h[:, keep] if h.ndim == 3 else h for c, h in acc.home.items()},
        act_home=acc.act_home[:, keep]), facts)
    at = np.searchsorted(keep, same)  # each operator's column among the timed ones
    return OpTimes(time=np.take(part.time, at, axis=1), compute=np.take(part.compute, at, axis=1),
                   traffic=np.take(part.traffic, at, axis=1),
                   bound=np.take(part.bound, at, axis=1), missing_rate=part.missing_rate)
