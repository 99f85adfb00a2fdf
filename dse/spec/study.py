"""Study description schema: a search over designs derived from one base chip, on named
workload scenarios, for objectives under constraints.

The schema checks the file's shape and plain values; what needs the base chip (parameter
paths and their units) or the workload library (scenarios) is checked when the study is
resolved (dse.search.space), with the same file:line:col messages. No I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from dse.spec.scenario import DataType, Phase, PrecisionName, Scenario
from dse.spec.types import Area, Cost, Power, Spec, Time, same_as

Scalar = str | int | float
Sampler = Literal["nsga2", "tpe", "random", "grid", "gp"]
SAMPLERS: tuple[str, ...] = get_args(Sampler)
# What an objective can rank designs by. Per-workload metrics are in the workload's own
# units (SI); `area` belongs to the design alone.
Metric = Literal["throughput", "throughput_per_mm2", "throughput_per_watt",
                 "throughput_per_dollar", "energy_per_token", "energy_per_sample", "latency",
                 "ttft", "tpot", "power", "area", "cost"]
METRICS: tuple[str, ...] = get_args(Metric)
DESIGN_METRICS = ("area", "cost")

# The largest seed the samplers take (numpy's RandomState: 0 .. 2^32 - 1).
MAX_SEED = 2**32 - 1


def in_memory_database(url: str) -> bool:
    """An SQLite URL whose database lives in one connection's memory (`sqlite://`,
    `sqlite:///:memory:`, `?mode=memory`)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower().split("+")[0] != "sqlite":
        return False
    path, _, query = rest.partition("?")
    db = path[1:] if path.startswith("/") else path
    return db == "" or ":memory:" in db or "mode=memory" in query


IN_MEMORY = ("an in-memory SQLite database lasts one connection, and a study opens its storage "
             "several times (the run, each worker, the outputs, a resumed run, the dashboard); "
             "give a file (sqlite:///study.db) or leave the storage out for the journal file "
             "in the output folder")


class Parameter(Spec):
    """One design-vocabulary path to vary: a range (`low`/`high`, optionally `log` and a
    `step`) or a list of `choices`, in the path's units ("8 MiB", "2 TB/s"; plain numbers for
    counts)."""

    low: Scalar | None = None
    """Lowest value of the range, in the path's units (with `high`)."""
    high: Scalar | None = None
    """Highest value of the range, in the path's units (included)."""
    log: bool = False
    """Sample the range uniformly in log space (capacities, bandwidths)."""
    step: Scalar | None = None
    """Values are low + k x step (whole numbers: step 1 unless given)."""
    choices: list[Scalar] | None = Field(default=None, min_length=1)
    """The values to try, in the path's units, instead of a range."""

    @model_validator(mode="after")
    def _range_or_choices(self) -> Parameter:
        ranged = self.low is not None or self.high is not None
        if self.choices is not None and (ranged or self.step is not None or self.log):
            raise ValueError("give either choices or a range (low, high, log, step), not both")
        if self.choices is None and (self.low is None or self.high is None):
            raise ValueError("expected low and high (a range) or choices (a list)")
        if self.log and self.step is not None:
            raise ValueError("a log range takes no step")
        return self


class StudyWorkload(Spec):
    """A workload scenario the designs are evaluated on: a workload (shipped name or path),
    its scenario (default: the workload's first, or the first of `phase`) with fields
    replaced, how many chips run it, and its weight in multi-workload objectives."""

    workload: str = Field(min_length=1)
    """The workload (a shipped name or a workload file's path)."""
    scenario: str | None = None
    """The workload's scenario to run (default: the first, or the first of `phase`); the
    fields below replace its own."""
    # the scenario fields it may replace: every simple one (dse.spec.scenario_fields), each
    # described as the scenario's
    phase: Phase | None = Field(default=None, description=same_as(Scenario, "phase"))
    batch: int | Literal["max", "best"] | None = Field(
        default=None, description=same_as(Scenario, "batch"))
    latency_target: Time | None = Field(default=None,
                                        description=same_as(Scenario, "latency_target"))
    seq_in: int | None = Field(default=None, ge=0, description=same_as(Scenario, "seq_in"))
    seq_out: int | None = Field(default=None, ge=0, description=same_as(Scenario, "seq_out"))
    precision: PrecisionName | None = Field(default=None,
                                            description=same_as(Scenario, "precision"))
    kv_precision: DataType | None = Field(default=None,
                                          description=same_as(Scenario, "kv_precision"))
    sparsity: Literal["2:4"] | None = Field(default=None,
                                            description=same_as(Scenario, "sparsity"))
    stack: str | None = None
    """The software stack (a shipped name or a stack file); left out: the scenario's."""
    chips: int = Field(default=1, ge=1)
    """Chips that run it: the system of the base chip and of the references; a study may
    vary it per design (`parameters: workloads.<name>.chips`)."""
    tp: Annotated[int, Field(ge=1)] | Literal["all"] = 1
    """Tensor-parallel degree; `all`: every chip of a pipeline stage (tp = chips / pp), so
    the split follows a varied chip count."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel degree: stages the model's layers are split over."""
    cp: int = Field(default=1, ge=1)
    """Training: context-parallel degree (ranks that share each sequence)."""
    ep: int = Field(default=1, ge=1)
    """Training: expert-parallel degree (ranks that share each MoE layer's experts)."""
    weight: float = Field(default=1.0, gt=0)
    """Exponent of this workload in a weighted geometric mean (weights are normalized)."""

    @field_validator("weight", mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Objective(Spec):
    """Maximize or minimize one metric: of one workload, the weighted geometric mean over
    several (each relative to the base chip, so workloads in different units combine), or
    of the design alone (area)."""

    maximize: Metric | None = None
    """The metric to make as large as possible; give it or `minimize`."""
    minimize: Metric | None = None
    """The metric to make as small as possible; give it or `maximize`."""
    workloads: list[str] | None = Field(default=None, min_length=1)
    """Workload names of this study (default: every workload; none for area)."""

    @model_validator(mode="after")
    def _one_direction(self) -> Objective:
        if (self.maximize is None) == (self.minimize is None):
            raise ValueError("expected exactly one of maximize or minimize (a metric: "
                             + ", ".join(METRICS) + ")")
        if self.metric in DESIGN_METRICS and self.workloads is not None:
            raise ValueError(f"{self.metric} belongs to the design: it takes no workloads")
        return self

    @property
    def metric(self) -> str:
        return str(self.maximize or self.minimize)

    @property
    def direction(self) -> Literal["maximize", "minimize"]:
        return "maximize" if self.maximize is not None else "minimize"


class Constraints(Spec):
    """Designs that break one are told to the sampler as violating (with the amount) and
    kept with their reason; they never make the front."""

    area: Area | None = None
    """Die area budget per chip (all dies of a package), mm2, as the area model counts it."""
    area_of: str | None = None
    """Instead of `area`: the budget is the modelled area of this chip (a shipped name or a
    path), so designs get exactly the silicon the model gives that chip."""
    reticle: bool = True
    """Each die within the node's reticle limit."""
    shoreline: bool = True
    """The off-chip interfaces fit on the die's edge without padding the die larger."""
    cost: Cost | None = None
    """Cost to make one chip, USD ("3500 USD"), as the cost model counts it (dse.model.cost:
    good dies, memory, package, assembly, test): an iso-dollar study."""
    cost_of: str | None = None
    """Instead of `cost`: the budget is the modelled cost of this chip (a shipped name or a
    path)."""
    system_cost: Cost | None = None
    """Cost to make the chips that run each workload (cost per chip x that workload's chips,
    which a study may vary), USD: "fewer, dearer chips" against "more chips" at equal
    dollars."""
    system_cost_of: str | None = None
    """Instead of `system_cost`: each workload's budget is this chip's modelled cost x the
    workload's own `chips` (the reference system it is compared with)."""
    power: Power | None = None
    """Most power per chip on any workload, W (designs are already clocked to their TDP)."""
    fit: bool = True
    """Every workload runs (fits in memory, meets its latency target, its power)."""

    @model_validator(mode="after")
    def _one_budget(self) -> Constraints:
        _one_of_each_budget(self)
        return self


def _one_of_each_budget(c: Any) -> None:
    """A budget given once: as a quantity (area, cost, system_cost) or as a chip whose
    modelled figure it is (area_of ...), not both (Constraints and an alternative's
    ConstraintChange alike)."""
    for what, own, chip in (("area", c.area, c.area_of), ("cost", c.cost, c.cost_of),
                            ("system cost", c.system_cost, c.system_cost_of)):
        if own is not None and chip is not None:
            key = what.replace(" ", "_")
            raise ValueError(f"give the {what} budget once: {key} (a quantity) or {key}_of "
                             "(a chip)")


class Search(Spec):
    """How designs are chosen."""

    sampler: Sampler = "nsga2"
    """nsga2 (the default: fastest per trial and the best front at equal trials on the
    shipped studies, docs: guide/studies.md, Choosing the sampler), tpe, random, gp, or grid (every
    combination, evaluated in vectorized chunks without a sampler)."""
    trials: int = Field(default=1000, ge=1)
    """Designs to evaluate (complete trials); re-running the study resumes until this many
    are stored, across every worker."""
    batch: int = Field(default=256, ge=1, le=100_000)
    """Trials asked, evaluated in one vectorized call per workload, and told at a time."""
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    """Seed of the sampler (a resumed run derives its own from it and the trials stored):
    the same study and seed give the same trials."""
    population: int | None = Field(default=None, ge=2)
    """nsga2: individuals per generation (default: the batch size, at least 2)."""
    grid_points: int = Field(default=8, ge=2, le=1000)
    """grid: values per range parameter without a step (choices and steps list their own)."""
    max_designs: int = Field(default=1_000_000, ge=1, le=10_000_000)
    """grid: the most designs the grid may have."""
    grid_trials: bool = False
    """grid: also store every design as a finished Optuna trial in the output folder's
    journal (for `dse dashboard`; about 2 ms a design), not only in the tables."""


class ParameterChange(Spec):
    """An alternative's change to one parameter: the fields given replace the study's (a
    range replaces the study's choices and choices its range); a path the study does not
    vary becomes a parameter (then a whole range or choices)."""

    low: Scalar | None = Field(default=None, description=same_as(Parameter, "low"))
    high: Scalar | None = Field(default=None, description=same_as(Parameter, "high"))
    log: bool | None = Field(default=None, description=same_as(Parameter, "log"))
    step: Scalar | None = Field(default=None, description=same_as(Parameter, "step"))
    choices: list[Scalar] | None = Field(default=None, min_length=1,
                                         description=same_as(Parameter, "choices"))


class ConstraintChange(Spec):
    """An alternative's constraints: each field given replaces the study's (`area` replaces
    `area_of` and the reverse); the others stay."""

    area: Area | None = Field(default=None, description=same_as(Constraints, "area"))
    area_of: str | None = Field(default=None, description=same_as(Constraints, "area_of"))
    reticle: bool | None = Field(default=None, description=same_as(Constraints, "reticle"))
    shoreline: bool | None = Field(default=None,
                                   description=same_as(Constraints, "shoreline"))
    power: Power | None = Field(default=None, description=same_as(Constraints, "power"))
    fit: bool | None = Field(default=None, description=same_as(Constraints, "fit"))
    cost: Cost | None = Field(default=None, description=same_as(Constraints, "cost"))
    cost_of: str | None = Field(default=None, description=same_as(Constraints, "cost_of"))
    system_cost: Cost | None = Field(default=None,
                                     description=same_as(Constraints, "system_cost"))
    system_cost_of: str | None = Field(default=None,
                                       description=same_as(Constraints, "system_cost_of"))

    @model_validator(mode="after")
    def _one_budget(self) -> ConstraintChange:
        _one_of_each_budget(self)
        return self


class Alternative(Spec):
    """A named alternative assumption: the same study run again, as its own study (its own
    trials and storage, the same seed), with parameters, fixed hardware values or
    constraints changed. The summary compares its best designs with the study's."""

    description: str | None = None
    """The assumption in a line, shown in the summary's sensitivity table (default: the
    changes it makes)."""
    params: dict[str, ParameterChange] = {}
    set: dict[str, Scalar] = {}
    """Hardware values every design of the alternative takes (design-vocabulary paths with
    units); a path the study varies is fixed at the value."""
    constraints: ConstraintChange = ConstraintChange()
    trials: int | None = Field(default=None, ge=1)
    """Complete trials of the alternative's run (default: the study's; never more than the
    main run's)."""

    @model_validator(mode="after")
    def _changes(self) -> Alternative:
        if not self.params and not self.set and not self.constraints.model_fields_set:
            raise ValueError("an alternative changes something: give params, set or "
                             "constraints")
        return self


class StudySpec(Spec):
    """A study file (`studies/*.yaml`)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Name of the study: its storage's study name and the default output folder's."""
    description: str | None = None
    """The question the study answers, in a line, at the top of its summary."""
    source: str = Field(min_length=1)
    """Why the study is set up as it is: the question, where the ranges come from."""
    base: str = Field(min_length=1)
    """The hardware every design derives from (a shipped name or a path)."""
    parameters: dict[str, Parameter] = Field(min_length=1)
    workloads: dict[str, StudyWorkload] = Field(min_length=1)
    objectives: dict[str, Objective] = Field(min_length=1)
    constraints: Constraints = Constraints()
    search: Search = Search()
    references: list[str] = []
    """Chips (names or paths) evaluated on the same workloads and marked on the plots
    (default: the base)."""
    set: dict[str, Scalar] | None = None
    """Hardware values every design takes, on top of the base chip (design-vocabulary paths
    with units, as `dse eval --set`): a study of a variant without a hardware file of it."""
    alternatives: dict[str, Alternative] | None = None
    """Named alternative assumptions, each run as its own study after this one (its outputs
    in <out>/alternatives/<name>/) and compared in the summary's sensitivity table."""
    storage: str | None = None
    """An Optuna storage URL shared by workers (postgresql://...); default: a journal file in
    the output folder. Not an in-memory SQLite database (IN_MEMORY)."""

    @field_validator("storage")
    @classmethod
    def _lasting(cls, value: str | None) -> str | None:
        if value is not None and in_memory_database(value):
            raise ValueError(IN_MEMORY)
        return value
