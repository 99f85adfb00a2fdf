"""The measured operating point of a chip: energy per matrix FLOP and clocked-core power
calibrated so that a large GEMM at the chip's achievable rate draws exactly its TDP.

A chip's achievable GEMM fraction (compute.matrix.achievable) is measured on the real,
power-limited card: large GEMMs hold GPUs at their power limit (the H100 SXM sustains
~700 W in cuBLAS GEMM loops, nvidia-smi; the A100 PCIe drops below its 1.41 GHz boost at
300 W). So the datasheet TDP and the measured rate together fix the chip's dynamic energy:

    P_GEMM = TDP - P_static - P_mem          (P_mem: the GEMM's bytes x energy per byte / T)
    P_active = ACTIVE_SHARE x P_GEMM          (clocked cores, whatever they compute)
    e_op(p)  = (1 - ACTIVE_SHARE) x P_GEMM / R(p)   (R: the GEMM's achieved FLOP/s at p)

for the reference precision and every precision with its own measured fraction (others
follow by the ratio of their peaks in dse.model.power). A shipped chip states these figures
in its file (`power:`), computed by this formula, so that designs derived from it keep the
chip's energy per operation and move along the DVFS curve; a chip without them is
calibrated here at evaluation, on its own spec. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.stages import Step

# GEMM the operating point is taken at: M = N = K = 8192, large enough that tile and wave
# quantization and DRAM traffic barely limit it (the regime of the achievable fractions);
# the next smaller size on a chip whose memory cannot hold its operands (SRAM-only chips).
CALIBRATION_GEMMS = (8192, 4096, 2048, 1024)
# Share of a GEMM's core power that the clocked cores draw whatever they compute. ML.ENERGY
# Benchmark v3.0 (Chung et al., "Where Do the Joules Go?", arXiv 2601.22076, H100 SXM with
# vLLM) reads ~300 W for batch-1 decode, which is memory-bound. On the H100 SXM at its
# rated clock the model's static, HBM, L2 and L1 power and the FLOPs' energy of llama3-8b
# batch-1 decode leave ~120 W to the clocked SMs, 0.20 of the GEMM's core power; with 0.20
# that decode draws 301 W.
ACTIVE_SHARE = 0.20


def reference_precision(db: DesignBatch) -> str | None:
    """The precision the operating point is stated at: bf16, else fp16, else the first
    matrix precision the chip has."""
    for p in ("bf16", "fp16"):
        if p in db.matrix_peak:
            return p
    return next(iter(db.matrix_peak), None)


def calibration_precisions(db: DesignBatch) -> list[str]:
    """The reference precision and every precision with its own measured fraction."""
    ref = reference_precision(db)
    ach = db.spec.compute.matrix.achievable
    own = [p for p in (ach.per_precision if ach else {}) if p in db.matrix_peak]
    return ([ref] if ref else []) + [p for p in own if p != ref]


def calibrate(db: DesignBatch, static_w: np.ndarray, run: Callable[[str], Step],
              energy: Callable[[Step], tuple[np.ndarray, np.ndarray]]
              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Matrix energy per precision ([N] J/FLOP) and clocked power per unit ([N] W) that put
    a large GEMM at the chip's achievable rate exactly at its TDP. `run(p)` gives the step
    of the calibration GEMM (CALIBRATION_GEMMS) at precision p; `energy(step)` its
    memory-and-link energy and its operators' FLOPs ([N] J, [N] FLOP). NaN where the chip
    has no TDP."""
    tdp = db.tdp
    out: dict[str, np.ndarray] = {}
    active = np.full(db.n, np.nan)
    for j, p in enumerate(calibration_precisions(db)):
        st = run(p)
        moved, flops = energy(st)
        with np.errstate(divide="ignore", invalid="ignore"):
            gemm_w = np.maximum(tdp - static_w - moved / st.total, 0.0)
            out[p] = (1.0 - ACTIVE_SHARE) * gemm_w / (flops / st.total)
        if j == 0:
            active = ACTIVE_SHARE * gemm_w / db.units
    return out, active
