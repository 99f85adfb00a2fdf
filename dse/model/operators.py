"""The operators one chip runs (`ChipOps`, after parallel splitting) and the time the
roofline gives each (`OpTimes`), with the tensor classes' columns and how their bytes
reach the compute units. The types the plan, the kernel and the step hand each other. No I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from dse.workloads.optable import CLASSES, MATRIX_KINDS, TENSOR_CLASSES

MATRIX = frozenset(MATRIX_KINDS)  # operator kinds that run on the matrix engines

W, A, KV, G = (TENSOR_CLASSES.index(c) for c in ("weights", "activations", "kv_cache",
                                                  "gradients"))
# The tensor classes by how their bytes reach the compute units (optable.CLASSES): placed
# classes cross level l in the share stored at l or beyond (`home`); the others live with
# each operator's activations (`act_home`). (column, name, GEMM-operand role) each.
PLACED_ROLES = tuple((TENSOR_CLASSES.index(c.name), c.name, c.operand) for c in CLASSES
                     if c.placed)
TRANSIENT_ROLES = tuple((TENSOR_CLASSES.index(c.name), c.name, c.operand) for c in CLASSES
                        if not c.placed)


@dataclass(frozen=True)
class ChipOps:
    """The operators one chip runs (after parallel splitting), as arrays over I rows. The
    numeric quantities are per operator ([I], [I, C], [I, 4]) or, where they differ by
    design (a per-design batch size), per design and operator ([N, I], [N, I, C] ...)."""

    name: np.ndarray  # [I] str
    kind: np.ndarray  # [I] str
    stage: np.ndarray  # [I] str
    dtype: np.ndarray  # [I] str
    wdtype: np.ndarray  # [I] str
    count: np.ndarray  # [I] or [N, I]
    flops: np.ndarray  # [I] or [N, I] per instance
    read: np.ndarray  # [I, C] or [N, I, C] per instance, bytes that live off the compute units
    written: np.ndarray  # [I, C] or [N, I, C]
    onchip: np.ndarray  # [I] or [N, I] bytes that stay in the innermost level (fused
    # intermediates)
    shape: np.ndarray  # [I, 4] or [N, I, 4] m, n, k, batch
    launches: np.ndarray  # [I] or [N, I] kernels per instance (0: fused into a neighbour)
    rows: np.ndarray | None = None
    """[N] where the per-design quantities are the U < N distinct tables of designs that
    share a batch ([U, I] ...): design n runs table rows[n] (`expanded` gives [N, I] ...);
    None: they are per design, or per operator."""

    @property
    def is_matrix(self) -> np.ndarray:
        return np.array([k in MATRIX for k in self.kind.tolist()], dtype=bool)


@dataclass(frozen=True)
class OpTimes:
    """Per design and operator: time per instance, its terms and the traffic per level."""

    time: np.ndarray  # [N, I] s per instance
    compute: np.ndarray  # [N, I] s
    traffic: np.ndarray  # [N, I, L] bytes per instance
    bound: np.ndarray  # [N, I] int8: 0 compute, 1 + l for memory level l, -1 the fixed
    # per-operator overhead (when it exceeds every roofline term)
    missing_rate: np.ndarray  # [N] bool: some operator's precision has no rate


# Dimensions of each ChipOps quantity per operator; one more where it is per design.
_OP_NDIM = {"count": 1, "flops": 1, "read": 2, "written": 2, "onchip": 1, "shape": 2,
            "launches": 1}


def take_rows(ops: ChipOps, rows: np.ndarray | slice) -> ChipOps:
    """The operators `rows` of `ops` (every design's)."""
    fields = {f: getattr(ops, f)[rows] for f in ("name", "kind", "stage", "dtype", "wdtype")}
    for f, nd in _OP_NDIM.items():
        v = getattr(ops, f)
        fields[f] = v[:, rows] if v.ndim > nd else v[rows]
    return dataclasses.replace(ops, **fields)


def take_ops(ops: ChipOps, idx: np.ndarray, n: int) -> ChipOps:
    """The operators of the designs `idx` (per-design quantities subset, the rest shared)."""
    if ops.rows is not None:  # the distinct tables stay; the designs pick theirs
        return dataclasses.replace(ops, rows=ops.rows[idx])
    return dataclasses.replace(ops, **{
        f: getattr(ops, f)[idx] for f, nd in _OP_NDIM.items() if getattr(ops, f).ndim > nd})


def expanded(ops: ChipOps) -> ChipOps:
    """`ops` with its per-design quantities given per design ([N, I] ...), not as distinct
    tables (`ChipOps.rows`)."""
    if ops.rows is None:
        return ops
    return dataclasses.replace(ops, rows=None, **{
        f: getattr(ops, f)[ops.rows] for f, nd in _OP_NDIM.items() if getattr(ops, f).ndim > nd})


def per_design(a: np.ndarray, rows: np.ndarray | None, ndim: int) -> np.ndarray:
    """A quantity of `ndim` dimensions per operator, or one more per design: as it is, or
    picked per design from distinct tables (`ChipOps.rows`)."""
    return a[rows] if rows is not None and a.ndim > ndim else a
