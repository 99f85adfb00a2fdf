"""dse: design-space exploration for AI accelerators under the memory wall."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dse")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"

from dse.model import Evaluation, Execution, design_batch, evaluate
from dse.spec.load import load_hardware, load_workload

__all__ = ["Evaluation", "Execution", "__version__", "design_batch", "evaluate",
           "load_hardware", "load_workload"]
