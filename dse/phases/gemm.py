"""Phase gemm: one matrix multiply, a microbenchmark of the chip's matrix engines."""

from __future__ import annotations

from dse.phases.base import Array, Phase, Rates, step_rates


def rates(r: Rates) -> dict[str, Array]:
    """The step and the FLOP/s it achieves."""
    return step_rates(r)


GEMM = Phase(
    name="gemm", summary="a single matrix multiply (achieved FLOP/s)", work="gemm",
    rates=rates, throughput="achieved_flop_per_s",
    headline=("step_time_s", "achieved_flop_per_s"), in_sequence=True,
    compared=("achieved_flop_per_s",), per_request=False)
