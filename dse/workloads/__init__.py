"""Workload lowering: a workload spec plus a scenario becomes an operator table."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from dse.errors import DseError
from dse.spec.workload import GemmSpec, Scenario, WorkloadSpec
from dse.workloads.gemm import lower_gemm
from dse.workloads.optable import OpTable
from dse.workloads.transformer import DEFAULT, Counting
from dse.workloads.transformer import lower as lower_transformer


def scenario_for(spec: WorkloadSpec, name: str | None = None, **overrides: Any) -> Scenario:
    """The named scenario (the first one by default) with the given fields replaced; None
    values are ignored. Bad names or values raise DseError naming the option."""
    if name is None:
        name = next(iter(spec.scenarios))
    if name not in spec.scenarios:
        raise DseError(f"{spec.name}: unknown scenario '{name}'; expected one of: "
                       f"{', '.join(spec.scenarios)}")
    fields = spec.scenarios[name].model_dump()
    fields.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Scenario.model_validate(fields)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'scenario'}: "
            f"{str(err['msg']).removeprefix('Value error, ')}"
            for err in e.errors(include_url=False))
        raise DseError(f"{spec.name} scenario '{name}': {problems}") from None


def lower(spec: WorkloadSpec, scenario: Scenario, counting: Counting = DEFAULT) -> OpTable:
    """The operator table of a workload run as a scenario."""
    if isinstance(spec, GemmSpec):
        return lower_gemm(spec, scenario, counting)
    try:
        return lower_transformer(spec, scenario, counting)
    except ValueError as e:
        raise DseError(f"{spec.name}: {e}") from None
