"""The arguments of the public `dse.evaluate`, checked before anything else: a wrong type
is a one-line ArgumentError naming the keyword and what it takes, not an AttributeError
from deep in the model (docs: how-to/vary-designs.md: bad arguments raise dse.DseError). No I/O."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import numpy as np

from dse import units
from dse.errors import DseError
from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.spec.hardware import HardwareSpec
from dse.spec.technology import TechSpec
from dse.spec.workload import WorkloadFile

F = TypeVar("F", bound=Callable[..., Any])


class ArgumentError(DseError, TypeError):
    """A keyword of dse.evaluate of the wrong type: a DseError (docs: how-to/vary-designs.md: bad
    arguments raise dse.DseError) that is also the TypeError Python code expects."""


def _found(value: object) -> str:
    """A value as a message shows it: its type and a short repr, on one line."""
    shown = repr(value) if not isinstance(value, int) or value.bit_length() < 100 \
        else "a number of over 30 digits"
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{type(value).__name__} {shown}"


def _expect(keyword: str, what: str, value: object) -> NoReturn:
    raise ArgumentError(f"{keyword}: expected {what}, found {_found(value)}")


def _whole_or_numpy(value: object) -> object:
    """A numpy integer as a Python int (numpy scalars are whole numbers too); else as is."""
    return int(value) if isinstance(value, np.integer) else value


def _checked_arguments(a: dict[str, object]) -> None:
    """Check the type of every argument of evaluate (bound, defaults applied) and normalize
    the forms it accepts in place: numpy integers and booleans as Python's, `area_budget`
    as a number of mm2 or a string with an area unit ('600 mm2'). Values are checked where
    they are used (the scenario, Execution, the design vocabulary); this catches the types
    that would otherwise fail deep in the model as AttributeError or TypeError."""
    if not isinstance(a["hw"], HardwareSpec | DesignBatch):
        _expect("hw", "a hardware spec (dse.load_hardware('h100-sxm')) or a DesignBatch "
                      "(dse.design_batch)", a["hw"])
    if not isinstance(a["wl"], WorkloadFile):  # every kind's schema (dse.workloads.KINDS)
        _expect("wl", "a workload spec (dse.load_workload('llama2-7b'))", a["wl"])
    for key in ("scenario", "phase", "precision", "kv_precision", "sparsity"):
        if a[key] is not None and not isinstance(a[key], str):
            _expect(key, "a name (a string) or None", a[key])
    if not isinstance(a["fusion"], str):
        _expect("fusion", "a name (a string): flash or none", a["fusion"])
    batch = _whole_or_numpy(a["batch"])
    if isinstance(batch, np.ndarray) and batch.ndim != 1:
        raise ArgumentError(f"batch: expected one batch per design (a list or 1-D array), "
                            f"found an array of shape {batch.shape}")
    if batch is not None and not isinstance(batch, int | str | list | tuple | np.ndarray):
        _expect("batch", "a whole number, max, best, or a list of whole numbers (one per "
                         "design)", batch)
    a["batch"] = batch
    for key in ("seq_in", "seq_out", "chips", "tp", "pp", "cp", "ep"):
        a[key] = _whole_or_numpy(a[key])  # the values are the scenario's and Execution's
    if a["execution"] is not None:
        if not isinstance(a["execution"], Execution):
            _expect("execution", "a dse.Execution (dse.Execution(chips=2, tp=2)) or None",
                    a["execution"])
        given = [k for k, default in (("chips", 1), ("tp", 1), ("pp", 1), ("cp", 1),
                                      ("ep", 1), ("fusion", "flash")) if a[k] != default]
        if given:
            raise ArgumentError(f"execution: given together with {', '.join(given)}; give "
                                "the split once, in execution or as chips, tp, pp, cp, ep "
                                "and fusion")
    if a["overrides"] is not None and not isinstance(a["overrides"], dict):
        _expect("overrides", "a mapping of dotted paths to values "
                             "({'compute.units': 120}) or None", a["overrides"])
    if a["tech"] is not None and not isinstance(a["tech"], TechSpec):
        _expect("tech", "the chip's process node, a TechSpec "
                        "(dse.spec.load.hardware_with_technology), or None", a["tech"])
    if isinstance(a["reticle"], np.bool_):
        a["reticle"] = bool(a["reticle"])
    if not isinstance(a["reticle"], bool):
        _expect("reticle", "True or False", a["reticle"])
    a["area_budget"] = _area_budget(a["area_budget"])


def _area_budget(value: object) -> float | None:
    """area_budget as mm2: a number of mm2 (600) or a string with an area unit ('600 mm2',
    '0.0006 m2'), positive and within the window every quantity keeps (docs: guide/commands.md,
    "Input limits")."""
    if value is None:
        return None
    what = "a positive area, a number of mm2 (600) or a string with its unit ('600 mm2')"
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating
                                                 | str):
        _expect("area_budget", what, value)
    text = value if isinstance(value, str) else f"{float(value)!r} mm2"
    try:
        return units.to_kind(text, units.AREA)
    except units.UnitError as e:
        if isinstance(value, str):
            raise DseError(f"area_budget: {e}") from None
        raise DseError(f"area_budget: expected {what}, found {_found(value)}") from None


def checked(evaluate: F) -> F:
    """`evaluate` that checks its arguments first (_checked_arguments): a wrong type is a
    one-line ArgumentError naming the keyword and what it takes, not an AttributeError
    from deep in the model. Checked once per call, before the chunks are cut."""
    signature = inspect.signature(evaluate)

    @functools.wraps(evaluate)
    def run(*args: object, **kwargs: object) -> object:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:  # a missing or unknown keyword: Python's message, named
            raise ArgumentError(f"dse.evaluate: {e}") from None
        bound.apply_defaults()
        _checked_arguments(bound.arguments)
        return evaluate(*bound.args, **bound.kwargs)

    return run  # type: ignore[return-value]
