"""dse: design-space exploration for AI accelerators under the memory wall."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dse")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"

from dse.spec.load import load_hardware

__all__ = ["__version__", "load_hardware"]
