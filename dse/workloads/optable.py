"""The operator table: what a workload scenario asks of the hardware, one row per distinct
operator, as a struct of numpy arrays.

Each row is one operator instance (per-instance FLOPs, bytes and GEMM shape) with a repeat
`count` (layers x generated tokens ...), so a 126-layer model generating 2048 tokens is still
a few dozen rows. Bytes are split by tensor class and by direction (read, written), because
placement puts classes in different memory levels (weights in SRAM or HBM, KV cache in HBM or
LPDDR, ...). Where an instance's size varies across its repeats (decode attention over a
growing KV cache), the row holds the average over the repeats; every such quantity is linear
in the varying length, so count x average is the exact total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np


@dataclass(frozen=True)
class TensorClass:
    """A class of tensors and how the performance model treats its bytes. A class still to
    come (optimizer state, embedding rows) is one more row of CLASSES."""

    name: str
    placed: bool
    """Stored across steps and placed in the memory levels by `placement.POLICY` (weights,
    KV cache), rather than living with each operator's activations."""
    operand: str
    """Its role when a GEMM reads it: "b", the stationary operand, re-read once per row of
    output tiles (weights, KV cache); "a", the streamed operand, re-read once per column
    (activations); "": read once."""
    per_sequence: bool = False
    """Its size grows with the sequences in flight (the KV cache): batch max sizes on it."""

    def __post_init__(self) -> None:
        if self.operand not in OPERAND_ROLES:
            raise ValueError(f"tensor class {self.name}: unknown GEMM-operand role "
                             f"'{self.operand}'; expected one of: "
                             f"{', '.join(repr(r) for r in OPERAND_ROLES)}")


# GEMM-operand roles a tensor class may take (TensorClass.operand).
OPERAND_ROLES = ("a", "b", "")


CLASSES: tuple[TensorClass, ...] = (
    TensorClass("weights", placed=True, operand="b"),
    TensorClass("activations", placed=False, operand="a"),
    TensorClass("kv_cache", placed=True, operand="b", per_sequence=True),
    TensorClass("gradients", placed=False, operand=""),
    # Recommender embedding tables: stored like weights, read by skewed gathers (the share
    # of lookups a level serves is not the share of the tables it stores: dse.model.hitrate)
    TensorClass("embeddings", placed=True, operand=""),
    # Training: the optimizer's state (fp32 master weights and moments), read and written
    # once per step by the optimizer; a scenario may keep it in a slower tier (offload)
    TensorClass("optimizer_state", placed=True, operand=""),
)
# Bytes per element of each data type an operator computes in or stores its weights in, its
# block scales included. The 4-bit floating-point formats are E2M1 values (0.5 bytes) plus
# one scale per block: NVFP4, one FP8 E4M3 scale per 16 elements (0.5 + 1/16 = 0.5625 bytes,
# 4.5 bits; its one FP32 scale per tensor is negligible) -- NVIDIA, "Introducing NVFP4 for
# Efficient and Accurate Low-Precision Inference" (developer blog, 2025) and ModelOpt's NVFP4
# checkpoint format (group_size 16, float8_e4m3fn weight_scale); MXFP4, one E8M0 scale per 32
# elements (0.5 + 1/32 = 0.53125 bytes, 4.25 bits) -- OCP Microscaling Formats (MX)
# Specification v1.0 (2023), Sec. 5.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5,
               "nvfp4": 0.5 + 1.0 / 16, "mxfp4": 0.5 + 1.0 / 32}
# Bytes per element of a GEMM operand's packed values alone (the library's alignment rule
# reads the leading dimension in these): the data type's size, less its block scales.
PAYLOAD_BYTES = {**DTYPE_BYTES, "nvfp4": 0.5, "mxfp4": 0.5}
# Tensor classes, in column order of `read` and `written`.
TENSOR_CLASSES = tuple(c.name for c in CLASSES)
PLACED_CLASSES = tuple(c.name for c in CLASSES if c.placed)
KINDS = ("gemm", "attention_score", "attention_value", "softmax", "norm", "activation",
         "residual", "rope", "embedding", "lm_head", "router")
# (a recommender's optimizer step is a `residual`-kind elementwise operator)
# How tensor parallelism (Megatron-style) splits an operator over `tp` chips: replicated
# (norms, residuals, embeddings: every chip does all of it); column (weights split along N:
# Q/K/V, gate, up; no communication); row (weights split along K: output and down
# projections; an all-reduce of the output follows); heads (attention: heads split); part
# (elementwise work on a split tensor); vocab (LM head split along the vocabulary; an
# all-gather of the logits follows).
# Training adds the backward of the split GEMMs -- column_bwd (a column-parallel GEMM's input
# gradient is a partial sum: an all-reduce follows, Megatron's `f` operator) and row_bwd (no
# communication) -- and shard (every class split: the optimizer step over its shard).
# column_bwd_sum is a column-parallel GEMM whose input another one shares (K and V with Q,
# up with gate): its input gradient is added to that one's before their single all-reduce.
SPLITS = ("replicated", "column", "row", "heads", "part", "vocab", "column_bwd",
          "column_bwd_sum", "row_bwd", "shard")
# Matrix-engine kinds: the rest run on vector units (or are pure data movement: embedding).
MATRIX_KINDS = ("gemm", "attention_score", "attention_value", "lm_head", "router")


def class_bytes(per_class: np.ndarray) -> dict[str, float]:
    """A [C] vector of bytes by tensor class as a dict, plus `total`."""
    out = {c: float(v) for c, v in zip(TENSOR_CLASSES, per_class, strict=True)}
    out["total"] = float(per_class.sum())
    return out


# A quantity of a row or a table fact: one number, or an [N] array of one per design (a
# batch that differs by design).
Num: TypeAlias = float | np.ndarray


@dataclass
class OpRow:
    """One operator while a table is being built (plain Python, converted once)."""

    name: str
    kind: str
    group: str  # attention_proj, attention_act, ffn, other, embedding, head
    count: Num
    flops: Num
    read: dict[str, Num] = field(default_factory=dict)
    written: dict[str, Num] = field(default_factory=dict)
    m: Num = 0.0
    n: Num = 0.0
    k: Num = 0.0
    batch: Num = 0.0  # independent matrices per instance (batch x heads for attention)
    stage: str = "forward"  # forward, backward, prefill, decode
    dtype: str = "bf16"  # compute data type
    wdtype: str = ""  # stored data type of the weights read ("" when none)
    split: str = "replicated"  # how tensor parallelism splits it: see SPLITS
    layer: bool = False  # repeated per Transformer layer (pipeline stages divide these)


@dataclass(frozen=True)
class Gather:
    """The table a gather operator reads: its rows, the Zipf exponent of their popularity
    (a measured curve is carried as the exponent that fits it best), the bytes one row
    occupies, and its lookups per step (only ratios between tables matter)."""

    rows: float
    alpha: float
    row_bytes: float
    lookups: float
    pieces: tuple[float, ...] = ()
    """Bytes of each separately stored array one access reads per row (the row; the row and
    its optimizer state), each rounded up to the serving level's access granularity; empty:
    the row alone."""
    table: str = ""
    """The gather operator whose table this operator touches ("": its own)."""
    distinct: Num | None = None
    """For an operator that touches each distinct row once (the sparse optimizer update):
    the lookups per step ([N] or a number) whose distinct rows it touches; None: every
    lookup is an access."""


@dataclass(frozen=True)
class Facts:
    """What the model needs to know of a lowered scenario beside its operator rows."""

    phase: str
    batch: float | np.ndarray = 1.0  # sequences per step (an [N] array: one per design)
    seq_in: float = 0.0  # tokens per sequence: E[L] where the scenario gives lengths
    seq_out: float = 0.0  # generated tokens (0 outside decode and serve)
    layers: int = 0  # repeated layers (pipeline stages divide these)
    kv_heads: int = 0  # KV heads (tensor parallelism splits the KV cache over at most these)
    resident: dict[str, float | np.ndarray] = field(default_factory=dict)
    """Bytes of each placed class for the whole model and batch, before any parallel split
    (weights; the KV cache at the context it is sized for: the average over the generation
    in steady-state serving, else the most the step reaches)."""
    hidden_bytes_per_token: float = 0.0  # one token's activations between layers
    context_max: float = 0.0  # tokens in the KV cache at the end of the step
    context_avg: float = 0.0  # tokens in the KV cache on average over the generation
    iteration_tokens: float | np.ndarray = 0.0  # serve: tokens one iteration forwards
    allowed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Placed classes a scenario confines to named memory levels (training offload)."""
    gathers: dict[str, Gather] = field(default_factory=dict)
    """Recommenders: the embedding table each gather operator (by name) reads."""
    exchange: float | np.ndarray = 0.0
    """Recommenders on several chips: bytes of pooled rows one chip makes per step for all
    the chips' pairs (and, training, their gradients back), exchanged by all-to-alls
    (dse.model.parallel)."""
    reduce: float | np.ndarray = 0.0
    """Data-parallel training: bytes of weight gradients all-reduced over the replicas."""

    @property
    def weight_bytes(self) -> float:
        return float(self.resident.get("weights", 0.0))


@dataclass(frozen=True)
class OpTable:
    """Operators of one scenario as arrays of length I (rows)."""

    name: np.ndarray  # [I] str
    kind: np.ndarray  # [I] str
    group: np.ndarray  # [I] str
    stage: np.ndarray  # [I] str
    dtype: np.ndarray  # [I] str
    count: np.ndarray  # [I] repeats
    flops: np.ndarray  # [I] FLOP per instance
    read: np.ndarray  # [I, C] bytes read per instance by tensor class
    written: np.ndarray  # [I, C] bytes written per instance by tensor class
    shape: np.ndarray  # [I, 4] m, n, k, batch per instance (0 for non-GEMM)
    wdtype: np.ndarray  # [I] str, stored data type of the weights ("" when none)
    split: np.ndarray  # [I] str, one of SPLITS
    layer: np.ndarray  # [I] bool, repeated per layer
    facts: Facts = field(default_factory=lambda: Facts(phase="gemm"), compare=False)
    """Scenario facts the performance model needs beside the rows."""

    @staticmethod
    def from_rows(rows: list[OpRow], facts: Facts) -> OpTable:
        """Arrays from rows. A row's numbers may be [N] arrays (one value per design, when
        the batch differs by design): every quantity is then [N, I] ([N, I, C] by class,
        [N, I, 4] shapes), else [I]. Unknown kinds, splits, tensor classes or data types are
        errors."""
        for cls in facts.resident:
            if cls not in PLACED_CLASSES:
                raise ValueError(f"resident bytes of '{cls}', which is not a placed tensor "
                                 f"class; expected one of: {', '.join(PLACED_CLASSES)}")
        for r in rows:
            if r.kind not in KINDS:
                raise ValueError(f"operator {r.name}: unknown kind '{r.kind}'; expected one "
                                 f"of: {', '.join(KINDS)}")
            for what, dtype in (("data type", r.dtype), ("weight data type", r.wdtype)):
                if dtype not in DTYPE_BYTES and not (what == "weight data type" and dtype == ""):
                    raise ValueError(f"operator {r.name}: unknown {what} '{dtype}'; expected "
                                     f"one of: {', '.join(DTYPE_BYTES)}")
            if r.split not in SPLITS:
                raise ValueError(f"operator {r.name}: unknown split '{r.split}'; expected one "
                                 f"of: {', '.join(SPLITS)}")
            for cls in (*r.read, *r.written):
                if cls not in TENSOR_CLASSES:
                    raise ValueError(f"operator {r.name}: unknown tensor class '{cls}'; "
                                     f"expected one of: {', '.join(TENSOR_CLASSES)}")
        lead = _designs(rows)

        def col(values: list[Any]) -> np.ndarray:
            """[I] of one quantity per row, or [N, I] where some row's value differs by
            design (a quantity the batch does not change stays [I])."""
            if lead is None or all(np.ndim(v) == 0 for v in values):
                return np.array(values, dtype=float).reshape(len(values))
            return _fill(np.empty((len(values), *lead)), values).T

        def per_class(maps: list[dict[str, Any]]) -> np.ndarray:
            """[I, C], or [N, I, C] when some class differs by design."""
            cols = [[mp.get(c, 0.0) for mp in maps] for c in TENSOR_CLASSES]
            if lead is None or all(np.ndim(v) == 0 for c in cols for v in c):
                return np.array(cols, dtype=float).reshape(len(cols), len(maps)).T.copy()
            out = np.empty((len(cols), len(maps), *lead))
            for c, values in enumerate(cols):
                _fill(out[c], values)
            return out.transpose(2, 1, 0)

        return OpTable(
            name=np.array([r.name for r in rows], dtype=object),
            kind=np.array([r.kind for r in rows], dtype=object),
            group=np.array([r.group for r in rows], dtype=object),
            stage=np.array([r.stage for r in rows], dtype=object),
            dtype=np.array([r.dtype for r in rows], dtype=object),
            count=col([r.count for r in rows]),
            flops=col([r.flops for r in rows]),
            read=per_class([r.read for r in rows]),
            written=per_class([r.written for r in rows]),
            shape=_shape(rows, lead),
            wdtype=np.array([r.wdtype for r in rows], dtype=object),
            split=np.array([r.split for r in rows], dtype=object),
            layer=np.array([r.layer for r in rows], dtype=bool),
            facts=facts,
        )

    def __len__(self) -> int:
        return len(self.name)

    @property
    def bytes(self) -> np.ndarray:
        """[I, C] bytes moved per instance (read + written) by tensor class."""
        return self.read + self.written

    @property
    def total_flops(self) -> float | np.ndarray:
        """FLOPs of the whole scenario (an [N] array when the batch differs by design)."""
        out = (self.count * self.flops).sum(axis=-1)
        return float(out) if np.ndim(out) == 0 else out

    def total_bytes(self) -> dict[str, float]:
        """Bytes moved by the whole scenario, by tensor class, plus `total` (one design)."""
        return class_bytes(np.einsum("i,ic->c", self.count, self.bytes))

    @property
    def arithmetic_intensity(self) -> float | np.ndarray:
        """FLOP per byte moved, over the whole scenario."""
        total = self.total_bytes()["total"]
        return self.total_flops / total if total else float("inf")

    def select(self, mask: np.ndarray) -> OpTable:
        """The rows where `mask` is true (a table of one design)."""
        return OpTable(**{f: getattr(self, f)[mask] for f in self.__dataclass_fields__
                          if f != "facts"}, facts=self.facts)


def _shape(rows: list[OpRow], lead: tuple[int, ...] | None) -> np.ndarray:
    """[I, 4] m, n, k, batch per row, or [N, I, 4] (a view of [4, I, N]) per design."""
    dims = [[getattr(r, d) for r in rows] for d in ("m", "n", "k", "batch")]
    if lead is None or all(np.ndim(v) == 0 for d in dims for v in d):
        return np.array(dims, dtype=float).reshape(4, len(rows)).T.copy()
    out = np.empty((4, len(rows), *lead))
    for j, values in enumerate(dims):
        _fill(out[j], values)
    return out.transpose(2, 1, 0)


def _fill(out: np.ndarray, values: list[Any]) -> np.ndarray:
    """Row i of `out` ([I, N], designs contiguous) set to values[i], a number or [N]. The
    tables hand out the transposed view ([N, I]): building rows costs one contiguous write
    each, and the model reads designs in blocks along that axis."""
    for i, v in enumerate(values):
        out[i] = v
    return out


def _designs(rows: list[OpRow]) -> tuple[int, ...] | None:
    """(N,) when some row holds [N] arrays (a batch per design), else None."""
    sizes = {np.size(v) for r in rows
             for v in (r.count, r.flops, r.m, r.n, r.k, r.batch, *r.read.values(),
                       *r.written.values()) if np.ndim(v) > 0}
    if not sizes:
        return None
    if len(sizes) > 1:
        raise ValueError(f"operator quantities of different lengths {sorted(sizes)}")
    return (sizes.pop(),)
