"""Building blocks shared by every spec schema: the frozen base model and unit-checked fields.

A quantity field is declared as e.g. `capacity: Bytes`; in YAML it must be a string with a
unit ("80 GiB"), and after validation it is a float in the internal unit (bytes). Fields that
accept per-cycle values ("64 B/cycle") read the design's clock from the validation context
key `clock_hz`, which the loader fills in from `compute.clock` before validating.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo
from pydantic_core import PydanticCustomError

from dse import units
from dse.units import Kind, UnitError

CLOCK_CONTEXT_KEY = "clock_hz"


class Spec(BaseModel):
    """Base of every user-facing schema: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=False, strict=True,
                              use_attribute_docstrings=True)


def _quantity(kind: Kind, positive: bool) -> BeforeValidator:
    def parse(value: Any, info: ValidationInfo) -> float:
        clock = (info.context or {}).get(CLOCK_CONTEXT_KEY)
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
