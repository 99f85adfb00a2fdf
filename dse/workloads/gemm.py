"""`gemm:MxNxK` / `gemm:BxMxNxK` workloads: one matrix multiply as an operator table."""

from __future__ import annotations

from dse.errors import DseError
from dse.spec.workload import GemmSpec, Scenario
from dse.workloads.common import DEFAULT, PRECISIONS, Counting
from dse.workloads.optable import DTYPE_BYTES, Facts, OpRow, OpTable

WORKS = frozenset({"gemm"})  # the shapes of work (dse.phases.WORKS) it lowers


def lower_gemm(spec: GemmSpec, scenario: Scenario, counting: Counting = DEFAULT,
               batch: object = None, chips: int = 1) -> OpTable:
    """One row: 2*B*M*N*K FLOPs; reads A (activations) and W (weights), writes C (on one
    chip: `chips` does not apply)."""
    del chips
    w, a, _, dtype = PRECISIONS[scenario.precision]
    wb = counting.element_bytes or DTYPE_BYTES[w]
    ab = counting.element_bytes or DTYPE_BYTES[a]
    b, m, n, k = spec.batch, spec.m, spec.n, spec.k
    row = OpRow("gemm", "gemm", "gemm", 1.0, 2.0 * b * m * n * k,
                read={"activations": b * m * k * ab, "weights": b * k * n * wb},
                written={"activations": b * m * n * ab}, m=m, n=n, k=k, batch=b,
                stage="gemm", dtype=dtype, wdtype=w)
    facts = Facts(phase="gemm", resident={"weights": b * k * n * wb})
    return OpTable.from_rows([row], facts)


def check(spec: GemmSpec, sc: Scenario, tp: int, pp: int
          ) -> tuple[list[DseError], list[str]]:
    """A single matrix multiply runs on one chip: no tensor or pipeline split."""
    return [DseError(f"{v}: a single gemm is not split across chips (tp and pp are 1)",
                     field=name, domain="execution", value=v, inline=True)
            for name, v in (("tp", tp), ("pp", pp)) if v > 1], []
