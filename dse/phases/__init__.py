"""The phase registry: every phase is one `Phase` object (dse.phases.base), registered by
its module. The built-in phases are registered here, in the order messages list them; a
phase of one's own is a module that calls `register(Phase(...))`."""

from __future__ import annotations

from dse.phases import decode, gemm, inference, prefill, serve, training
from dse.phases.base import (
    REGISTRY,
    WORKS,
    Phase,
    Rates,
    get,
    listed,
    names,
    register,
    step_rates,
    those,
    unregister,
)

for _phase in (gemm.GEMM, prefill.PREFILL, decode.DECODE, serve.SERVE, inference.INFERENCE,
               training.TRAINING):
    register(_phase)

__all__ = ["REGISTRY", "WORKS", "Phase", "Rates", "get", "listed", "names", "register",
           "step_rates", "those", "unregister"]
