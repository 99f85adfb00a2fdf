"""Workload lowering: a workload spec plus a scenario becomes an operator table.

Workload kinds are registered in `KINDS` (kind name -> `WorkloadKind`): how to lower a
scenario, how to check an execution plan against the model (parallel degrees divide what
they split), and the model's context. A new kind is a module with its schema (registered in
`dse.spec.workload.WORKLOAD_SCHEMAS`) and its lowering, plus one entry here; a kind of
one's own is one module that calls `register_kind`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import ValidationError

from dse import phases, units
from dse.errors import DseError
from dse.spec import scenario_fields
from dse.spec.messages import blamed
from dse.spec.workload import (
    WORKLOAD_SCHEMAS,
    RecScenario,
    Scenario,
    WorkloadFile,
    WorkloadSpec,
)
from dse.workloads import gemm, recommender, transformer
from dse.workloads.common import DEFAULT, Counting
from dse.workloads.optable import OpTable


@dataclass(frozen=True)
class WorkloadKind:
    """What the model needs to know of one kind of workload."""

    lower: Callable[..., OpTable]
    """lower(spec, scenario, counting, batch=None, chips=1): the operator table of a spec run
    as a scenario on one of `chips` data-parallel chips; `batch` ([N] sequences) replaces the
    scenario's, making it [N, I]."""
    check: Callable[[Any, Any, int, int], tuple[list[DseError], list[str]]]
    """(errors, warnings) of running a scenario split tp x pp ways."""
    context: Callable[[Any], int | None]
    """Longest sequence the model supports (None: no limit or not a sequence model)."""
    works: frozenset[str]
    """The shapes of work (dse.phases.WORKS) it lowers: it runs the phases of these."""
    tokens: bool = True
    """Its samples are sequences of tokens (False: a recommender's user-item pairs)."""
    works_of: Callable[[Any], frozenset[str]] | None = None
    """The works one workload of the kind runs, where they depend on the workload (a
    Transformer decoder's are not an encoder's); None: all of `works`."""
    sparsity: frozenset[str] = frozenset()
    """The weight sparsity patterns its lowering applies (a scenario's `sparsity`)."""

    def runs(self, spec: Any) -> frozenset[str]:
        """The shapes of work `spec` runs."""
        return self.works if self.works_of is None else self.works_of(spec)


KINDS: dict[str, WorkloadKind] = {
    "transformer": WorkloadKind(transformer.lower, transformer.check, transformer.context,
                                transformer.WORKS, works_of=transformer.works_of,
                                sparsity=frozenset({"2:4"})),
    "gemm": WorkloadKind(gemm.lower_gemm, gemm.check, lambda spec: None, gemm.WORKS),
    "recommender": WorkloadKind(recommender.lower, recommender.check, lambda spec: None,
                                recommender.WORKS, tokens=False),
}
assert set(KINDS) == set(WORKLOAD_SCHEMAS), "every workload schema has a lowering"


def register_kind(name: str, schema: type[WorkloadFile], kind: WorkloadKind) -> WorkloadKind:
    """Add a workload kind: the schema of its files (their `kind: NAME`) and how the model
    lowers it. Every route (load, check, eval, validate, studies) knows it from then on."""
    if name in KINDS:
        raise ValueError(f"workload kind {name} is registered already")
    unknown = kind.works - set(phases.WORKS)
    if unknown:
        raise ValueError(f"workload kind {name}: works {', '.join(sorted(unknown))}; "
                         f"expected some of: {', '.join(phases.WORKS)}")
    WORKLOAD_SCHEMAS[name] = schema
    KINDS[name] = kind
    return kind


def unregister_kind(name: str) -> None:
    """Remove a kind (a test's toy kind)."""
    KINDS.pop(name, None)
    WORKLOAD_SCHEMAS.pop(name, None)


def kind_of(spec: WorkloadSpec) -> WorkloadKind:
    """The registered kind of a workload spec."""
    return KINDS[spec.kind]

def check_runs(spec: WorkloadSpec, phase: str) -> None:
    """DseError unless a workload of this kind runs `phase` (its kind lowers the phase's
    work), naming the phases it does run."""
    kind = kind_of(spec)
    if phases.get(phase).work not in kind.works:
        able = phases.those(lambda p: p.work in kind.works)
        raise DseError(f"{spec.name}: a {spec.kind} workload runs phase "
                       f"{phases.listed(able, 'or')}, not {phase}")


# The scenario a phase runs when the workload file names none of that phase and the caller
# names no scenario (`--phase decode` on a model whose file lists only prefill scenarios) is
# the phase's `default` (dse.phases), with lengths capped at the model's context.


def _phase_default(spec: WorkloadSpec, phase: str) -> Scenario:
    """The phase's default scenario, of the workload kind's own scenario class (a
    recommender's RecScenario, which keeps its own seq_in and refuses the phases a
    recommender does not run)."""
    cls = get_args(type(spec).model_fields["scenarios"].annotation)[1]
    fields = {"phase": phase, **phases.get(phase).default}
    if issubclass(cls, RecScenario):
        fields.pop("seq_in", None)
    context = kind_of(spec).context(spec)
    if context:
        room = context - int(fields.get("seq_out", 0))
        fields["seq_in"] = min(int(fields.get("seq_in", 0)), max(room, 1))
    try:
        return cls.model_validate(fields)
    except ValidationError as e:
        raise DseError("; ".join(str(err["msg"]).removeprefix("Value error, ")
                                 for err in e.errors(include_url=False)),
                       field="phase", value=phase) from None


def resolve_scenario(spec: WorkloadSpec, name: str | None = None, *, phase: str | None = None,
                     **overrides: Any) -> tuple[str, Scenario]:
    """(name, scenario): the named scenario, else the first one of `phase` in the file, else
    the phase's documented default (named "<phase> (default)"), else the file's first;
    with the given fields replaced (None values are ignored). Bad names or values raise
    DseError naming the option."""
    if name is None and phase is not None:
        name = next((n for n, s in spec.scenarios.items() if s.phase == phase), None)
        if name is None:
            phases.get(phase)  # a phase the registry knows
            base = _phase_default(spec, phase)
            return f"{phase} (default)", _replaced(spec, f"{phase} (default)", base, overrides)
    if name is None:
        name = next(iter(spec.scenarios))
    if name not in spec.scenarios:
        raise DseError(f"{spec.name}: unknown scenario '{name}'; expected one of: "
                       f"{', '.join(spec.scenarios)}")
    return name, _replaced(spec, name, spec.scenarios[name], {"phase": phase, **overrides})


def _replaced(spec: WorkloadSpec, name: str, base: Scenario, overrides: dict[str, Any]
              ) -> Scenario:
    fields = base.model_dump()
    if fields.get("latency_target") is not None:  # back to YAML's form: a time with a unit
        fields["latency_target"] = f"{fields['latency_target']!r} s"
    if base.engine is not None:  # the fields the scenario sets, so they stay the ones shown
        fields["engine"] = base.engine.model_dump(exclude_unset=True)
        if "iteration_overhead" in fields["engine"]:
            fields["engine"]["iteration_overhead"] = \
                f"{fields['engine']['iteration_overhead']!r} s"
    fields.update({k: scenario_fields.as_given(k, v) for k, v in overrides.items()
                   if v is not None})
    if overrides.get("seq_in") is not None and "lengths" in fields:
        # a length the caller names is the length run: it replaces the distribution
        fields["lengths"] = None
    try:
        return type(base).model_validate(fields)  # a kind's own scenario class stays it
    except ValidationError as e:  # named by the option that replaced the field, if one did
        given = [k for k, v in overrides.items() if v is not None]
        found = blamed(e, type(base), given)

        def problem(field: str, message: str, also: list[DseError] | None = None
                    ) -> DseError:  # structured: each route names the field its own way
            if field:
                return DseError(message, field=field, value=overrides[field], also=also or ())
            return DseError(f"{spec.name} scenario '{name}': {message}", also=also or ())

        raise problem(*found[0], [problem(*f) for f in found[1:]]) from None


def scenario_for(spec: WorkloadSpec, name: str | None = None, **overrides: Any) -> Scenario:
    """The scenario of `resolve_scenario`, without its name."""
    return resolve_scenario(spec, name, **overrides)[1]


def describe_scenario(sc: Scenario) -> str:
    """One line: phase, batch, lengths, precision ("decode, batch 1, seq_in 5, seq_out 200,
    bf16"); serve adds its engine ("engine default", or the engine fields it sets)."""
    ph = phases.get(sc.phase)
    parts: list[str] = [sc.phase]
    if ph.work != "gemm":
        parts.append(f"batch {sc.batch}")
        if isinstance(sc, RecScenario):
            if sc.pairs:
                parts.append(f"{sc.pairs:g} pairs per sample")
        elif sc.seq_in:
            parts.append(f"seq_in {sc.seq_in}")
        if ph.generates:
            parts.append(f"seq_out {sc.seq_out}")
        if sc.lengths is not None:
            parts.append(f"lengths {sc.lengths.describe()}")
    parts.append(sc.precision + (f" (KV {sc.kv_precision})" if sc.kv_precision else ""))
    if ph.served:  # the engine's fields the scenario sets (serving.describe_engine)
        given = sorted(sc.engine.model_fields_set) if sc.engine is not None else []
        shown = {k: units.format_quantity(getattr(sc.engine, k), units.TIME)
                 if k == "iteration_overhead" else getattr(sc.engine, k) for k in given}
        parts.append("engine " + (" ".join(f"{k}={v}" for k, v in shown.items())
                                  or "default"))
    return ", ".join(parts)


def execution_issues(spec: WorkloadSpec, sc: Scenario, tp: int, pp: int
                     ) -> tuple[list[DseError], list[str]]:
    """(errors, warnings) of running `sc` split `tp` x `pp` ways: parallel degrees must
    divide what they split; lengths beyond the model's context are legal but suspect. The
    errors are structured (field tp or pp), for each route to word. A sparsity pattern the
    kind's lowering does not apply is an error (field sparsity)."""
    kind = kind_of(spec)
    errors, warnings = kind.check(spec, sc, tp, pp)
    sparsity = getattr(sc, "sparsity", None)
    if sparsity is not None and sparsity not in kind.sparsity:
        errors = [*errors, DseError(
            f"{sparsity}: {spec.name} is a {spec.kind} workload, whose lowering applies no "
            "weight sparsity (a Transformer's linear layers take 2:4)", field="sparsity",
            value=sparsity, rule="a pattern the workload's kind applies")]
    return errors, warnings


def lower(spec: WorkloadSpec, scenario: Scenario, counting: Counting = DEFAULT,
          batch: Any = None, chips: int = 1) -> OpTable:
    """The operator table of a workload run as a scenario; `batch` ([N] sequences, one per
    design) replaces the scenario's batch and makes every quantity [N, I]. `chips`: the
    data-parallel replicas, for the kinds whose lowering depends on them (a recommender
    shards its tables over them)."""
    check_runs(spec, scenario.phase)
    kind = kind_of(spec)
    try:
        return kind.lower(spec, scenario, counting, batch=batch, chips=chips)
    except ValueError as e:
        raise DseError(f"{spec.name}: {e}") from None
