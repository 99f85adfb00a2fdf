"""Attention at the rate its kernels publish: the fused attention operators (scores and
weighted values) of a chip that a stack's attention tables cover run at the tables'
fraction of the matrix peak (dse.spec.stack.Attention: FlashAttention-3, cuDNN, by head
dimension and sequence length, interpolated in log(seq)) instead of the GEMM fraction.

The factor scales the operator's matrix rate (peak x achievable fraction x typical share):
efficiency / (fraction x typical), so that the rate is peak x efficiency before the tile
and wave terms every matrix operator gets. Decode attention (one query per sequence) is not
what the tables measure and keeps the GEMM fraction; so does the backward pass without
backward tables, and attention in a data type the tables do not hold. No I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.kernel import TYPICAL, executed_precision
from dse.model.operators import ChipOps
from dse.spec import stack_library
from dse.spec.workload import Scenario

ATTENTION_KINDS = ("attention_score", "attention_value")
# A row whose FLOPs are below this share of the full (query x key) square is causal: causal
# prefill counts s(s+1)/2 pairs of s^2 (dse.workloads.common.attention_pairs).
CAUSAL_BELOW = 0.75


@dataclass(frozen=True)
class OnStack:
    """What a DesignBatch carries of the stack it runs (DesignBatch.attention)."""

    stack: str  # the stack's name
    tables: Any  # its attention tables for this chip (dse.spec.stack.Attention), or None
    tensor_overlap: bool = False  # it overlaps tensor-parallel collectives with GEMMs


def on_stack(db: DesignBatch, sc: Scenario) -> tuple[DesignBatch, Scenario]:
    """The designs and the scenario as the scenario's stack runs them (the hardware
    vendor's default where it names none): the scenario names the stack; the designs carry
    its attention tables for their chip and their GEMMs' typical share times the stack's
    GEMM-library factor (once: a batch already on this stack is returned as it is)."""
    stack = stack_library.of(sc.stack, db.spec.vendor)
    sc = sc if sc.stack is not None else sc.model_copy(update={"stack": stack.name})
    if isinstance(db.attention, OnStack) and db.attention.stack == stack.name:
        return db, sc
    typical = db.matrix_typical
    if stack.gemm.factor != 1.0:
        typical = np.where(np.isnan(typical), TYPICAL, typical) * stack.gemm.factor
    return dataclasses.replace(db, matrix_typical=typical, attention=OnStack(
        stack.name, stack.attention_for(db.spec.name, db.spec.base),
        stack.overlap.tensor)), sc


def attention_factor(batch: DesignBatch, ops: ChipOps) -> np.ndarray | None:
    """[N, I] factor on the matrix rate of each operator (1 where no table applies); None
    when none applies anywhere."""
    att = batch.attention.tables if isinstance(batch.attention, OnStack) else None
    if att is None:
        return None
    kinds, dtypes, stages = ops.kind.tolist(), ops.dtype.tolist(), ops.stage.tolist()
    cols = [i for i, (k, d) in enumerate(zip(kinds, dtypes, strict=True))
            if k in ATTENTION_KINDS and d in att.precisions
            and not (stages[i] == "backward" and not att.backward)]
    if not cols:
        return None
    typical = np.where(np.isnan(batch.matrix_typical), TYPICAL, batch.matrix_typical)
    out = np.ones((batch.n, len(kinds)))
    for i in cols:
        shape = np.asarray(ops.shape[..., i, :], dtype=float)  # [4] or [U, 4]
        flops = np.asarray(ops.flops[..., i], dtype=float)  # [] or [U]
        m, n, k, b = (shape[..., j] for j in range(4))
        head, seq = (k, n) if kinds[i] == "attention_score" else (n, k)
        backward = stages[i] == "backward"  # twice the forward's FLOPs (both gradients)
        with np.errstate(divide="ignore", invalid="ignore"):
            causal = flops / (2.0 if backward else 1.0) < CAUSAL_BELOW * 2.0 * m * n * k * b
        eff = _efficiency(att, head, seq, causal, backward)
        eff = np.where(m > 1, eff, np.nan)  # decode: one query per sequence
        if np.ndim(eff) and ops.rows is not None:
            eff = eff[ops.rows]  # distinct tables -> designs
        p = executed_precision(batch.matrix_peak, dtypes[i])
        if p not in batch.matrix_peak:
            continue
        factor = eff / (batch.matrix_fraction[p] * typical)
        out[:, i] = np.where(np.isnan(factor), 1.0, factor)
    return None if bool((out == 1.0).all()) else out


def _efficiency(att: Any, head: np.ndarray, seq: np.ndarray, causal: np.ndarray,
                backward: bool) -> np.ndarray:
    """The tables' efficiency for each (head dimension, sequence length, causality) of an
    operator: one value, or one per design where the shapes differ by design."""
    if np.ndim(head) == 0 and np.ndim(causal) == 0:  # one shape for every design
        return att.efficiency(max(float(head), 1.0), seq, causal=bool(causal),
                              backward=backward)
    head, seq, causal = np.broadcast_arrays(head, seq, causal)
    out = np.empty(head.shape)
    for hd in np.unique(head):
        for c in (True, False):
            at = (head == hd) & (causal == c)
            if at.any():
                out[at] = att.efficiency(float(max(hd, 1.0)), seq[at], causal=c,
                                         backward=backward)
    return out
