"""The performance model: pure numpy, vectorized over a batch of designs, no I/O."""

from dse.model.batch import DesignBatch, design_batch
from dse.model.evaluate import evaluate
from dse.model.execution import Execution
from dse.model.results import Evaluation
from dse.model.stages import METRICS

__all__ = ["METRICS", "DesignBatch", "Evaluation", "Execution", "design_batch", "evaluate"]
