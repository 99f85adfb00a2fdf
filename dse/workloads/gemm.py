"""`gemm:MxNxK` / `gemm:BxMxNxK` workloads: one matrix multiply as an operator table."""

from __future__ import annotations

import re

from dse.errors import DseError
from dse.spec.workload import GemmSpec, Scenario
from dse.workloads.optable import OpRow, OpTable
from dse.workloads.transformer import DEFAULT, DTYPE_BYTES, PRECISIONS, Counting

_NAME = re.compile(r"^gemm:(\d+)x(\d+)x(\d+)(?:x(\d+))?$")


def is_gemm_name(ref: str) -> bool:
    return ref.startswith("gemm:")


def gemm_from_name(ref: str) -> GemmSpec:
    """`gemm:1024x10240x5120` -> M=1024, N=10240, K=5120; four numbers put the batch first."""
    match = _NAME.match(ref)
    if not match or any(int(g) == 0 for g in match.groups() if g is not None):
        raise DseError(f"{ref}: expected gemm:MxNxK or gemm:BxMxNxK with positive whole "
                       "numbers, e.g. gemm:1024x10240x5120")
    nums = [int(g) for g in match.groups() if g is not None]
    batch, (m, n, k) = (nums[0], nums[1:]) if len(nums) == 4 else (1, nums)
    return GemmSpec(name=ref, kind="gemm", source="matrix multiply given by name",
                    m=m, n=n, k=k, batch=batch)


def lower_gemm(spec: GemmSpec, scenario: Scenario, counting: Counting = DEFAULT) -> OpTable:
    """One row: 2*B*M*N*K FLOPs; reads A (activations) and W (weights), writes C."""
    if scenario.phase != "gemm":
        raise DseError(f"{spec.name}: a gemm workload runs only in phase gemm, "
                       f"not {scenario.phase}")
    w, a, _, dtype = PRECISIONS[scenario.precision]
    wb = counting.element_bytes or DTYPE_BYTES[w]
    ab = counting.element_bytes or DTYPE_BYTES[a]
    b, m, n, k = spec.batch, spec.m, spec.n, spec.k
    row = OpRow("gemm", "gemm", "gemm", 1.0, 2.0 * b * m * n * k,
                read={"activations": b * m * k * ab, "weights": b * k * n * wb},
                written={"activations": b * m * n * ab}, m=m, n=n, k=k, batch=b,
                stage="gemm", dtype=dtype, wdtype=w)
    meta = {"phase": "gemm", "batch": 1.0, "seq_in": 0.0, "seq_out": 0.0, "layers": 0,
            "hidden_bytes_per_token": 0.0,
            "weight_bytes": b * k * n * wb, "kv_bytes_per_token": 0.0,
            "context_max": 0.0, "context_avg": 0.0}
    return OpTable.from_rows([row], meta)
