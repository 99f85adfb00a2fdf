"""dse: design-space exploration for AI accelerators under the memory wall."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dse")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"

from dse.errors import DseError
from dse.model import Evaluation, Execution, design_batch, evaluate
from dse.spec.load import load_hardware, load_workload

# DseError: every problem with what the caller gave (one line each, `str(e)`), so a script
# catches the API's refusals as `except dse.DseError`.
__all__ = ["DseError", "Evaluation", "Execution", "__version__", "design_batch", "evaluate",
           "load_hardware", "load_workload"]
