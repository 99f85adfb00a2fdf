"""A software stack as documented data: the serving engine, the front-end's cost per
request, the GEMM library and the attention kernels a measurement ran on.

A chip's calibration rows (its GEMM achievable fraction) measure hardware plus one library;
what runs on top of it differs by stack: TensorRT-LLM behind Triton adds a request path
(HTTP/gRPC, the server's scheduler, tokenization, the backend's enqueue) to every first
token, vLLM on ROCm runs hipBLASLt GEMMs and CK/AITER attention, a training stack
cuDNN/Transformer Engine attention. A stack file (`stacks/NAME.yaml`, or a user's path)
names the figures, each with its public source; a scenario names the stack (`stack:`,
`dse eval --stack`), else the hardware vendor's default applies (`default_for`).

The shipped files are read by dse.spec.stack_files (through dse.spec's YAML reader) against
`Stack`; the model sees the profile. No I/O here.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from dse.spec.scenario import Engine
from dse.spec.types import FlopRate, Spec, TimeOrZero


class FrontEnd(Spec):
    """What a served request costs beyond the model's forward before its first token
    reaches the client (host time the GPU does not hide)."""

    request: TimeOrZero = 0.0
    """The request path to the engine and back: HTTP/gRPC, the server's scheduler and the
    backend's enqueue, tokenization of the prompt, detokenization and the response of the
    first token."""
    first_sampling: TimeOrZero = 0.0
    """The first sampling step beyond the forward (logits to a token on the host side)."""
    source: str | None = None
    """Where the figures come from (a measurement of that front-end)."""

    @property
    def total(self) -> float:
        """s added to every served request's first token."""
        return float(self.request) + float(self.first_sampling)


class AttentionPoint(Spec):
    """One measured point of an attention kernel: its rate at one sequence length."""

    seq: int = Field(gt=0)
    """Sequence length, tokens (queries = keys)."""
    rate: FlopRate
    """Achieved FLOP/s as the benchmark counts them (causal: half the square)."""


class AttentionCurve(Spec):
    """An attention kernel's achieved rate over sequence length at one head dimension."""

    head_dim: int = Field(gt=0)
    """Head dimension the curve was measured at; a query uses the nearest one (in log2)."""
    causal: bool = True
    """Causal (masked) attention; a query uses a curve of its own causality where one
    exists."""
    points: list[AttentionPoint] = Field(min_length=1)

    @model_validator(mode="after")
    def _increasing(self) -> AttentionCurve:
        seqs = [p.seq for p in self.points]
        if any(b <= a for a, b in itertools.pairwise(seqs)):
            raise ValueError(f"points: sequence lengths must increase, found {seqs}")
        return self


class Attention(Spec):
    """The attention kernels' efficiency, as published benchmark tables of one chip: the
    fraction of that chip's dense matrix peak they reach, applied to the chips listed."""

    kernel: str = Field(min_length=1)
    """The kernel library (FlashAttention-3, CK/AITER, cuDNN)."""
    source: str = Field(min_length=1)
    """Where the tables come from (the benchmark and its publication)."""
    measured_on: str = Field(min_length=1)
    """The chip the tables were measured on (a hwspec name)."""
    peak: FlopRate
    """That chip's dense matrix peak at the tables' precision: efficiency = rate / peak."""
    precisions: list[Literal["fp32", "bf16", "fp16", "fp8", "int8"]] = Field(min_length=1)
    """The operators' data types the tables hold for (the benchmark's); attention in other
    data types keeps the GEMM fraction."""
    chips: list[str] = Field(min_length=1)
    """The hwspec names the tables apply to (the measured chip and its siblings of the same
    architecture), and designs whose `base:` is one of them; other chips keep the GEMM
    fraction."""
    forward: list[AttentionCurve] = Field(min_length=1)
    """Forward-pass tables, one curve per head dimension and causality."""
    backward: list[AttentionCurve] = Field(default_factory=list)
    """Backward-pass tables (training); empty: the forward tables."""

    def efficiency(self, head_dim: float, seq: np.ndarray | float, *, causal: bool = True,
                   backward: bool = False) -> np.ndarray:
        """Fraction of the matrix peak at `seq` tokens: the curve of the nearest head
        dimension (in log2) and causality (the other causality where the tables have none
        of this one), interpolated linearly in log(seq) between its points and held at the
        end points beyond them."""
        key = (float(head_dim), causal, backward and bool(self.backward))
        curve = self._curves.get(key)
        if curve is None:
            curve = self._curves[key] = self._curve(*key)
        s = np.log(np.maximum(np.asarray(seq, dtype=float), 1.0))
        return np.interp(s, *curve)

    @functools.cached_property
    def _curves(self) -> dict[tuple[float, bool, bool], tuple[np.ndarray, np.ndarray]]:
        """The curves looked up so far (every evaluation asks for a few)."""
        return {}

    def _curve(self, head_dim: float, causal: bool, backward: bool
               ) -> tuple[np.ndarray, np.ndarray]:
        """log(seq) and efficiency of the curve that serves (head_dim, causal)."""
        curves = self.backward if backward else self.forward
        same = [c for c in curves if c.causal == causal] or curves
        best = min(same, key=lambda c: (abs(math.log2(c.head_dim) - math.log2(head_dim)),
                                        c.head_dim))
        return (np.log([float(p.seq) for p in best.points]),
                np.array([p.rate for p in best.points]) / self.peak)


class Gemm(Spec):
    """The GEMM library, relative to the one the chip's calibration rows were measured
    with (its achievable fraction)."""

    library: str = Field(min_length=1)
    """The GEMM library (cuBLAS, hipBLASLt, CUTLASS)."""
    factor: float = Field(default=1.0, gt=0, le=2)
    """Its rate over the calibration library's on the same shapes (1.0 unless sourced)."""
    source: str | None = None
    """Where `factor` comes from (a comparison of the two libraries)."""


class Overlap(Spec):
    """The communication a stack overlaps with compute, beyond what every training stack
    does (data-parallel gradients and parameter gathers, context parallelism's exchange)."""

    tensor: bool = False
    """Tensor-parallel all-gathers and reduce-scatters pipelined with the GEMMs they feed
    or follow (Transformer Engine's userbuffers; it needs sequence parallelism)."""
    source: str | None = None
    """Where the overlap is documented (the library's or framework's description)."""


class Stack(Spec):
    """A software stack: engine, front-end, GEMM library, attention kernels, collectives."""

    name: str = Field(min_length=1)
    """Name of the stack, shown in the outputs (a shipped stack's is its file name)."""
    description: str = Field(min_length=1)
    """One line on what the stack is (engine, libraries), shown with the shipped stacks."""
    vendor: Literal["cuda", "rocm", "other"]
    """The platform it runs on."""
    default_for: list[str] = Field(default_factory=list)
    """Hardware vendors (a hwspec's `vendor`) whose chips run this stack when a scenario
    names none."""
    software: list[str] = Field(default_factory=list)
    """Prefixes of a measurement's `software` text this stack covers (case-insensitive),
    e.g. "TensorRT-LLM v0.14 + Triton"."""
    engine: Engine = Field(default_factory=Engine)
    """The serving engine (continuous batching); a scenario's `engine:` fields override."""
    front_end: FrontEnd = Field(default_factory=FrontEnd)
    gemm: Gemm
    attention: Attention | None = None
    """None: attention at the GEMM fraction."""
    collectives: str | None = None
    """The collective library (NCCL, RCCL): documentation of the stack."""
    overlap: Overlap = Field(default_factory=Overlap)
    source: str | None = None
    """Where the stack's composition comes from (release notes, the engine's docs)."""

    def covers(self, software: str) -> int:
        """Length of the longest of `software`'s prefixes listed (0: none)."""
        text = " ".join(software.split()).casefold()
        return max((len(p) for p in self.software if text.startswith(
            " ".join(p.split()).casefold())), default=0)

    def attention_for(self, chip: str, base: str | None = None) -> Attention | None:
        """The attention tables that apply to hwspec `chip` (or a design derived from
        `base`, its `base:`), if any."""
        a = self.attention
        return a if a is not None and (chip in a.chips or base in a.chips) else None


def describe_stack(stack: Stack, named: bool) -> str:
    """One line: the stack, `(default)` when the scenario names none."""
    parts = [f"GEMM {stack.gemm.library}" + (f" x{stack.gemm.factor:g}"
                                            if stack.gemm.factor != 1.0 else "")]
    if stack.attention is not None:
        parts.append(f"attention {stack.attention.kernel} (on "
                     f"{', '.join(stack.attention.chips)})")
    if stack.collectives:
        parts.append(stack.collectives)
    parts.append(f"front-end {stack.front_end.total * 1e3:.3g} ms per request")
    return f"stack{'' if named else ' (default)'}: {stack.name}: " + ", ".join(parts)
