"""The recommender workload schema (kind: recommender): embedding tables and their access
skew, feature interaction, the dense network, the optimizer, and its scenarios (encode,
train). This module does no I/O."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import (
    Field,
    model_validator,
)

from dse import phases
from dse.spec.scenario import DataType, Scenario, WorkloadFile
from dse.spec.types import Spec


class HitPoint(Spec):
    """One point of a measured hit-rate curve: caching this share of a table's rows (the
    hottest ones) serves this share of its lookups."""

    rows: float = Field(gt=0, le=1)
    """Share of the table's rows cached, the hottest first (0 to 1)."""
    hits: float = Field(ge=0, le=1)
    """Share of the table's lookups those rows serve (0 to 1)."""


class Skew(Spec):
    """How unevenly a table's rows are looked up: a Zipf exponent (row i of R is looked up
    with probability proportional to i^-alpha; 0 is uniform) or a measured curve."""

    alpha: float | None = Field(default=None, ge=0, le=3)
    """Zipf exponent of the row popularity (0: uniform); give it or `curve`."""
    curve: list[HitPoint] | None = Field(default=None, min_length=1)
    """Measured hit-rate curve, points rising in `rows`; the model uses the Zipf exponent
    that fits it best."""
    source: str | None = None
    """Where the exponent or the curve comes from (a trace study, a paper)."""

    @model_validator(mode="after")
    def _one_form(self) -> Skew:
        if (self.alpha is None) == (self.curve is None):
            raise ValueError("give the skew as alpha (a Zipf exponent) or as a curve of "
                             "{rows, hits} points, one of the two")
        if self.curve is not None:
            rows = [p.rows for p in self.curve]
            hits = [p.hits for p in self.curve]
            if rows != sorted(rows) or len(set(rows)) != len(rows) or hits != sorted(hits):
                raise ValueError("curve points must rise: rows strictly, hits never falling")
        return self


class Table(Spec):
    """An embedding table, or `count` identical ones."""

    name: str = Field(min_length=1)
    """Name of the table (unique in the file), used in the operator table's rows."""
    count: int = Field(default=1, ge=1)
    """Identical tables this entry stands for."""
    rows: int = Field(gt=0)
    """Rows of the table (distinct ids it embeds); with `dim`, its size in memory."""
    dim: int = Field(gt=0)
    """Elements per row (the embedding dimension)."""
    lookups: float = Field(gt=0)
    """Rows gathered and pooled (summed) per user-item pair: the pooling factor."""
    skew: Skew | None = None
    """This table's skew (default: the workload's)."""


class Interaction(Spec):
    """How the pooled embeddings and the bottom MLP's output meet: `dot`, the pairwise dot
    products of the F = tables + 1 feature vectors (DLRM); `cross`, DCNv2 cross layers
    x_{l+1} = x0 * (U (V x_l) + b) + x_l on their concatenation, low-rank when `rank` is
    given (U, V: d x rank); `cat`, their concatenation alone (DeepRecSys RM1/RM2)."""

    kind: Literal["dot", "cross", "cat"]
    """The interaction: dot (DLRM's dot products), cross (DCNv2's cross layers) or cat
    (concatenation alone)."""
    layers: int = Field(default=3, ge=1)
    """cross: cross layers stacked."""
    rank: int | None = Field(default=None, gt=0)
    """cross: rank of the low-rank factors U, V (two GEMMs a layer); omitted: full-rank
    (one D x D GEMM a layer)."""


class Sample(Spec):
    """What one sample of the workload's throughput is."""

    pairs: float = Field(default=1.0, ge=1)
    """User-item pairs one sample scores (MLPerf inference aggregates many per query)."""
    note: str | None = None
    """What a sample is, in words (documentation)."""


class RecOptimizer(Spec):
    """Training: the optimizer of the embedding rows and of the dense layers."""

    embeddings: Literal["sgd", "adagrad", "adagrad_rowwise", "adam"] = "adagrad"
    """Optimizer of the embedding rows: its state (Adagrad one fp32 word per element,
    row-wise Adagrad one per row, Adam two per element) and update FLOPs per row touched."""
    dense: Literal["sgd", "adagrad", "adagrad_rowwise", "adam"] = "adagrad"
    """Optimizer of the MLPs' and interaction's weights (state and update FLOPs)."""


class Evaluation(Spec):
    """Training: forward-only evaluation passes inside the timed run (MLPerf's rules place
    them every 5% of the epoch): `pairs` evaluated every `every` pairs trained."""

    pairs: int = Field(gt=0)
    """User-item pairs each evaluation pass scores (forward only)."""
    every: int = Field(gt=0)
    """Pairs trained between evaluation passes; the forward work grows by pairs / every."""


# The shapes of work (dse.phases.WORKS) a recommender runs: a forward of its samples, and
# training.
RECOMMENDER_WORKS = frozenset({"encode", "train"})


class RecScenario(Scenario):
    """A recommender scenario: `batch` counts samples of `pairs` user-item pairs each;
    sequence lengths do not apply."""

    _transformer_training: ClassVar[bool] = False

    seq_in: int = Field(default=1, ge=0)
    """Not read: a recommender's sample has no sequence (the lowering counts one token per
    sample); default 1, which the inference and training phases require."""
    pairs: float | None = Field(default=None, ge=1)
    """User-item pairs per sample (default: the workload's `sample.pairs`). MLPerf
    inference scores a query of many pairs as one sample; training counts one pair."""
    embedding_precision: DataType | None = None
    """Stored type of the embedding rows when it differs from `precision`."""
    optimizer: RecOptimizer | None = None
    """Training: the optimizers (default Adagrad for both, as MLPerf fixes)."""
    evaluation: Evaluation | None = None
    """Training: evaluation passes counted in the throughput (a benchmark's timed run)."""
    sharding: Literal["auto", "row", "column"] = "auto"
    """Several chips: how a table heavier than a chip's share is cut (auto: column-wise
    where each piece keeps whole 64-byte accesses per row, else row-wise; see
    dse.workloads.sharding.plan_groups)."""

    @model_validator(mode="after")
    def _phase(self) -> RecScenario:
        if phases.get(self.phase).work not in RECOMMENDER_WORKS:
            able = phases.those(lambda p: p.work in RECOMMENDER_WORKS)
            raise ValueError(f"a recommender runs phase {phases.listed(able, 'or')}, not "
                             f"{self.phase}")
        if (self.optimizer is not None or self.evaluation is not None) \
                and not phases.get(self.phase).trains:
            raise ValueError("optimizer and evaluation go with phase training")
        if self.training is not None:
            raise ValueError("training: a recommender states its optimizer and evaluation "
                             "passes directly in the scenario (optimizer, evaluation)")
        return self


class RecommenderSpec(WorkloadFile):
    """A DLRM-style recommender."""

    kind: Literal["recommender"]
    """The kind of workload, which selects this schema."""
    sample: Sample = Sample()
    dense_features: int = Field(ge=0)
    """Continuous features per pair, the bottom MLP's input (0: none, and no bottom MLP)."""
    tables: list[Table] = Field(min_length=1)
    skew: Skew
    """The default skew of every table (a table's own `skew` replaces it)."""
    bottom_mlp: list[int] = Field(default=[], description="layer widths")
    interaction: Interaction
    top_mlp: list[int] = Field(min_length=1)
    """Layer widths of the MLP after the interaction, the last one the output (1: a click
    probability)."""
    scenarios: dict[str, RecScenario] = Field(min_length=1)

    @model_validator(mode="after")
    def _shapes(self) -> RecommenderSpec:
        dims = {t.dim for t in self.tables}
        if self.interaction.kind == "dot" and len(dims) > 1:
            raise ValueError("dot interaction needs every table of one dimension, found "
                             f"{sorted(dims)}")
        if self.interaction.kind == "dot" and self.bottom_mlp and self.bottom_mlp[-1] not in dims:
            raise ValueError(f"dot interaction: the bottom MLP's last width "
                             f"({self.bottom_mlp[-1]}) must equal the embedding dimension")
        if self.dense_features == 0 and self.bottom_mlp:
            raise ValueError("a bottom MLP needs dense features")
        if any(w <= 0 for w in (*self.bottom_mlp, *self.top_mlp)):
            raise ValueError("MLP widths must be positive")
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError("table names must be unique")
        return self

    @property
    def n_tables(self) -> int:
        return sum(t.count for t in self.tables)

    def skew_of(self, table: Table) -> Skew:
        return table.skew or self.skew

    def embedding_rows(self) -> int:
        return sum(t.count * t.rows for t in self.tables)

    def embedding_parameters(self) -> int:
        return sum(t.count * t.rows * t.dim for t in self.tables)
