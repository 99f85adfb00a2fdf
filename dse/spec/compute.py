"""A chip's compute in the hardware schema: its vector and matrix engines (peak per unit
per cycle, per precision), what real code achieves of the peaks, thread-block limits and
the operand alignment its matrix engines need."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dse.spec.hardware_terms import PRECISIONS, Fraction, Precision
from dse.spec.types import (
    Bytes,
    FlopRate,
    Frequency,
    OpsPerCycle,
    Spec,
    TimeOrZero,
)


class Achievable(Spec):
    """Fraction of a datasheet peak that real code reaches on the real chip (hardware plus
    its best library), with the measurement it comes from: of a memory level's or a link's
    bandwidth (a stream or collective benchmark)."""

    fraction: Fraction
    """Achieved / peak (0 < f <= 1)."""
    source: str = Field(min_length=1)
    """Where the measurement comes from (benchmark, paper, log)."""


class MatrixAchievable(Achievable):
    """The matrix engines' achievable fractions: `fraction` is the best-shape rate (a shape
    search such as the maximum achievable matmul FLOPS finder) for every precision not in
    `per_precision`, `typical` what a model's layer GEMMs get of it."""

    per_precision: dict[Precision, Fraction] = {}
    """Precision-specific fractions where they were measured separately (e.g. fp8)."""
    typical: Fraction | None = None
    """Share of the best-shape rate that the GEMMs inside a model reach with the library's
    own kernel choice at their layer shapes (0 < t <= 1); omitted: dse's default
    (dse.model.kernel.TYPICAL), measured on NVIDIA GPUs. A `gemm:MxNxK` microbenchmark runs
    at the best-shape rate."""

    def at(self, precision: str) -> float:
        """The achievable fraction at `precision`."""
        return self.per_precision.get(precision, self.fraction)  # type: ignore[call-overload]


class Tile(Spec):
    """Native tile of the matrix engine, in elements: a GEMM of shape M x N x K runs as
    ceil(M/m) * ceil(N/n) * ceil(K/k) tiles, so small or ragged shapes waste the array."""

    m: int = Field(gt=0)
    """Rows of the output tile (the M dimension), elements."""
    n: int = Field(gt=0)
    """Columns of the output tile (the N dimension), elements."""
    k: int = Field(gt=0)
    """Depth of the reduction per tile step (the K dimension), elements."""


class Engine(Spec):
    """Peak rates of one kind of execution unit, per precision, dense (no sparsity): for the
    whole chip (`peak`, fixed) or per compute unit per cycle (`peak_per_unit`, which scales
    with `compute.units` and `compute.clock`, so a derived design that changes either keeps
    a consistent peak)."""

    peak: dict[Precision, FlopRate] = {}
    """Dense peak of the whole chip per precision, FLOP/s, e.g. {bf16: 989 TFLOPS}."""
    peak_per_unit: dict[Precision, OpsPerCycle] = {}
    """Dense peak of one unit per precision, FLOP/cycle, e.g. {bf16: 4096 FLOP/cycle};
    chip peak = this * units * clock."""

    @model_validator(mode="after")
    def _one_way_per_precision(self) -> Engine:
        both = sorted(set(self.peak) & set(self.peak_per_unit))
        if both:
            raise ValueError(f"precision {', '.join(both)} is given both in peak and in "
                             "peak_per_unit; give each precision one way")
        if not self.peak and not self.peak_per_unit:
            raise ValueError("expected at least one rate in peak or peak_per_unit")
        return self

    def chip_peak(self, units: int, clock_hz: float | None) -> dict[str, float]:
        """Dense peak of the chip per precision, FLOP/s."""
        out = {p: v * units * (clock_hz or 0.0) for p, v in self.peak_per_unit.items()}
        out.update(self.peak)
        return {p: out[p] for p in PRECISIONS if p in out}


class ThreadBlocks(Spec):
    """Output tiles (thread blocks) a GEMM library splits a problem into, one compute unit
    each: a GEMM of M x N runs ceil(M / m) x ceil(N / n) tiles in waves of `units`, and the
    last, partial wave leaves units idle. The library runs the candidate that finishes
    first (a large tile for large problems, a small one when a large one leaves units idle)."""

    tiles: list[str] = Field(min_length=1)
    """Candidate tiles as "MxN" in elements, e.g. ["128x256", "128x128", "64x128"]."""
    source: str = Field(min_length=1)
    """Which library's tile configurations these are."""

    @model_validator(mode="after")
    def _shapes(self) -> ThreadBlocks:
        for t in self.tiles:
            parts = t.lower().split("x")
            if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
                raise ValueError(f"tile {t!r}: expected MxN with positive whole numbers, "
                                 "e.g. 128x256")
        return self

    def shapes(self) -> list[tuple[int, int]]:
        """The tiles as (m, n) pairs."""
        return [(int(a), int(b)) for a, b in (t.lower().split("x") for t in self.tiles)]


class Alignment(Spec):
    """The alignment rule of the matrix engine's fast path: the leading dimensions (K of the
    A operand, N of B and C, row-major) times the element size must be a multiple of
    `bytes`; a GEMM that misses it runs at `slowdown` of the aligned rate."""

    bytes: int = Field(gt=0)
    """Required multiple of the leading dimension in bytes (16 for cuBLAS tensor-op paths
    and Hopper TMA descriptors)."""
    slowdown: Fraction
    """Rate of the misaligned path relative to the aligned one (0 < s <= 1)."""
    source: str = Field(min_length=1)
    """Where the rule and the factor come from."""


class MatrixEngine(Engine):
    """Matrix engines (tensor cores, MXUs, systolic arrays): GEMMs and attention run here."""

    tile: Tile | None = None
    """Native tile of the engine (the MMA instruction shape) for shape utilization;
    omitted: no tile quantization is modelled."""
    register_file: Bytes | None = None
    """Register file per compute unit, bytes: it holds the GEMM accumulators, so it sets
    the reuse of operands read from the innermost memory level (omitted: the native tile
    sets it)."""
    achievable: MatrixAchievable | None = None
    """Achieved fraction of `peak` on large GEMMs, measured on the real chip, and the share
    of it that layer GEMMs reach (`typical`)."""
    blocks: ThreadBlocks | None = None
    """Thread-block tiles of the chip's GEMM library (wave quantization); omitted: none is
    modelled (a chip that runs a GEMM as one unit, or spreads it evenly)."""
    alignment: Alignment | None = None
    """Alignment rule of the fast GEMM path; omitted: any shape runs at full rate."""
    sparsity: list[Literal["2:4"]] = Field(default_factory=list)
    """Weight sparsity patterns the engines run at twice the dense rate by skipping the
    zero products (2:4: NVIDIA's sparse tensor cores since Ampere, AMD's CDNA 3); omitted:
    none, and a scenario's sparsity is infeasible on the chip."""


class Compute(Spec):
    """The chip's compute: how many units, their clock and their engines."""

    units: int = Field(gt=0)
    """Number of compute units (SMs, cores, tiles, processing elements)."""
    unit_name: str = "unit"
    """What a unit is called on this chip (SM, CU, core, PE), for display."""
    clock: Frequency | None = None
    """Clock at which the peak rates hold; converts per-cycle values ("64 B/cycle")."""
    matrix: MatrixEngine
    """Matrix engines."""
    vector: Engine | None = None
    """Vector/SIMD units (softmax, norms, dequantization), where published."""
    op_overhead: TimeOrZero | None = None
    """Fixed time every operator (kernel) costs on top of its roofline time: launch,
    scheduling, pipeline fill and drain, end-of-kernel synchronisation. Seconds; omitted
    means none is charged (statically scheduled dataflow chips)."""
    style: Literal["gpu", "array"] | None = None
    """How the compute is built, which sets its area per FLOP/s in the area model: gpu
    (SIMT cores such as NVIDIA SMs or AMD CUs, whose matrix units sit among vector ALUs,
    register files and schedulers) or array (dedicated systolic or dot-product matrix
    arrays beside separate vector units)."""

    @model_validator(mode="after")
    def _clock_for_per_unit(self) -> Compute:
        engines = [("matrix", self.matrix), ("vector", self.vector)]
        if self.clock is None and any(e and e.peak_per_unit for _, e in engines):
            raise ValueError("peak_per_unit is per cycle and needs compute.clock")
        return self

    def matrix_peak(self) -> dict[str, float]:
        """Chip matrix-engine peak per precision, FLOP/s."""
        return self.matrix.chip_peak(self.units, self.clock)

    def vector_peak(self) -> dict[str, float]:
        """Chip vector-unit peak per precision, FLOP/s (empty when not given)."""
        return self.vector.chip_peak(self.units, self.clock) if self.vector else {}
