"""The performance model: pure numpy, vectorized over a batch of designs, no I/O."""

from dse.model.batch import DesignBatch, design_batch
from dse.model.evaluate import METRICS, Evaluation, evaluate
from dse.model.execution import Execution

__all__ = ["METRICS", "DesignBatch", "Evaluation", "Execution", "design_batch", "evaluate"]
