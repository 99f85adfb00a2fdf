"""Building blocks shared by every spec schema: the frozen base model and unit-checked fields.

A quantity field is declared as e.g. `capacity: Bytes`; in YAML it must be a string with a
unit ("80 GiB"), and after validation it is a float in the internal unit (bytes). Fields that
accept per-cycle values ("64 B/cycle") read the design's clock from the validation context
key `clock_hz`, which the loader fills in from `compute.clock` before validating.
"""

from __future__ import annotations

import math
import sys
import typing
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from dse import units
from dse.units import Kind, UnitError

CLOCK_CONTEXT_KEY = "clock_hz"
# Set by the loader when compute.clock is given but wrong: that field reports the problem,
# and per-cycle values are converted at a stand-in clock (1 Hz) so they do not repeat it as
# "give compute.clock" (the spec cannot validate either way).
CLOCK_INVALID_KEY = "clock_invalid"
# Largest whole number a spec may give: every integer up to 2^53 converts to a float exactly,
# and the model computes in floats (a 309-digit count would not convert at all).
MAX_WHOLE = 2**53


class Spec(BaseModel):
    """Base of every user-facing schema: immutable, unknown keys rejected, and every number
    one the model can compute with (`_representable`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=False, strict=True,
                              use_attribute_docstrings=True)

    @field_validator("*", mode="after")
    @classmethod
    def _representable(cls, value: Any, info: ValidationInfo) -> Any:
        """Whole numbers within +-MAX_WHOLE; plain (unit-less) numbers finite and 0 or within
        units.MIN_MAGNITUDE .. MAX_MAGNITUDE; quantities are checked by dse.units."""
        problem = _number_problem(value, _has_quantity(cls, info.field_name or ""))
        if problem:
            raise PydanticCustomError("number_range", "{msg}", {"msg": problem})
        return value


def same_as(model: type[BaseModel], name: str) -> str:
    """The description of field `name` of `model`, for a field that repeats it (a study
    workload's scenario fields, an alternative's parameter and constraint changes):
    `Field(description=same_as(Scenario, "phase"))` keeps one text for both, in the
    reference and in error messages."""
    description = model.model_fields[name].description
    if not description:
        raise TypeError(f"{model.__name__}.{name} has no docstring to share")
    return description


def _number_problem(value: Any, quantity: bool) -> str | None:
    """Why a validated value (or a number inside a list or mapping) is not representable."""
    if isinstance(value, bool) or value is None or isinstance(value, BaseModel | str):
        return None
    if isinstance(value, int):
        if abs(value) <= MAX_WHOLE:
            return None
        digits = len(str(abs(value))) if value.bit_length() < 10_000 else None
        found = (str(value) if digits and digits <= 30 else
                 f"a number of {digits} digits" if digits else "a number of over 3,000 digits")
        return (f"expected a whole number of at most {MAX_WHOLE} (2^53, the largest a float "
                f"holds exactly), found {found}")
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"expected a finite number, found {value}"
        if value != 0 and abs(value) < sys.float_info.min:
            return (f"expected a normal number, found {value!r} (below the smallest normal "
                    "float)")
        if not quantity and value != 0 and not (
                units.MIN_MAGNITUDE <= abs(value) <= units.MAX_MAGNITUDE):
            return (f"expected 0 or a number of magnitude {units.MIN_MAGNITUDE:g} to "
                    f"{units.MAX_MAGNITUDE:g}, found {value!r}")
        return None
    items = value.values() if isinstance(value, dict) else (
        value if isinstance(value, list | tuple) else ())
    return next((p for v in items if (p := _number_problem(v, quantity))), None)


_QUANTITY_FIELDS: dict[tuple[type, str], bool] = {}


def _has_quantity(cls: type[BaseModel], name: str) -> bool:
    """Whether field `name` of `cls` holds quantities (a unit-checked type anywhere in its
    annotation), whose range dse.units checks in SI units before the internal scaling."""
    key = (cls, name)
    if key not in _QUANTITY_FIELDS:
        field = cls.model_fields.get(name)
        _QUANTITY_FIELDS[key] = field is not None and (
            any(_marks_quantity(m) for m in field.metadata) or _annotation_has_quantity(
                field.annotation))
    return _QUANTITY_FIELDS[key]


def _marks_quantity(meta: Any) -> bool:
    return getattr(getattr(meta, "func", None), "quantity", None) is not None


def _annotation_has_quantity(ann: Any) -> bool:
    if typing.get_origin(ann) is Annotated:
        base, *extra = typing.get_args(ann)
        return any(_marks_quantity(m) for m in extra) or _annotation_has_quantity(base)
    return any(_annotation_has_quantity(a) for a in typing.get_args(ann))


def _quantity(kind: Kind, positive: bool) -> BeforeValidator:
    def parse(value: Any, info: ValidationInfo) -> float:
        context = info.context or {}
        clock = context.get(CLOCK_CONTEXT_KEY) or (1.0 if context.get(CLOCK_INVALID_KEY)
                                                    else None)
        try:
            return units.to_kind(value, kind, clock_hz=clock, positive=positive)
        except UnitError as e:
            raise PydanticCustomError("quantity", "{msg}", {"msg": str(e)}) from None

    parse.quantity = (kind, positive)  # type: ignore[attr-defined]  # read by vocabulary
    return BeforeValidator(parse)


Bytes = Annotated[float, _quantity(units.BYTES, True)]
Bandwidth = Annotated[float, _quantity(units.BANDWIDTH, True)]
FlopRate = Annotated[float, _quantity(units.FLOP_RATE, True)]
OpsPerCycle = Annotated[float, _quantity(units.OPS_PER_CYCLE, True)]
Time = Annotated[float, _quantity(units.TIME, True)]
TimeOrZero = Annotated[float, _quantity(units.TIME, False)]
Frequency = Annotated[float, _quantity(units.FREQUENCY, True)]
Area = Annotated[float, _quantity(units.AREA, True)]
Length = Annotated[float, _quantity(units.LENGTH, True)]
Power = Annotated[float, _quantity(units.POWER, True)]
Energy = Annotated[float, _quantity(units.ENERGY, True)]
EnergyPerOp = Annotated[float, _quantity(units.ENERGY_PER_OP, True)]
EnergyPerByte = Annotated[float, _quantity(units.ENERGY_PER_BYTE, True)]
PowerDensity = Annotated[float, _quantity(units.POWER_DENSITY, False)]
AreaPerByte = Annotated[float, _quantity(units.AREA_PER_BYTE, True)]
AreaPerRate = Annotated[float, _quantity(units.AREA_PER_RATE, True)]
Cost = Annotated[float, _quantity(units.COST, True)]
CostOrZero = Annotated[float, _quantity(units.COST, False)]
CostPerByte = Annotated[float, _quantity(units.COST_PER_BYTE, True)]
CostPerArea = Annotated[float, _quantity(units.COST_PER_AREA, False)]
PerArea = Annotated[float, _quantity(units.PER_AREA, False)]
