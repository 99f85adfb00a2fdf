"""Technology-level assumptions: fields the models read once per hardware spec, not per
design (the package geometry a design departs from its node's rules by, and the spares
policy). A study's `set:` (and an alternative's), `--set` with one value, and the API's
overrides fix them by applying them to the spec itself, a validated copy; they cannot be
varied across the designs of one batch. No I/O.

    technology.spares                    as-built (default) | none
    technology.package.packaging         cowos-s | cowos-l | organic
    technology.package.hbm_edges         whole, 1-4 (the node's rule: 2)
    technology.package.aspect_ratio      number, 1-4
    technology.package.d2d_bandwidth     bandwidth with its unit
    technology.package.in_plane          whole >= 1
"""

from __future__ import annotations

from typing import get_args

import numpy as np
from pydantic import BaseModel

from dse.errors import DseError
from dse.spec import hardware_checks, vocabulary
from dse.spec.hardware import HardwareSpec, PackageChoice, Technology

SPARES = "technology.spares"
PACKAGE = "technology.package."
# The message a study parameter or several --set values on one of these paths get.
NOT_VARIED = ("the model reads one value of this field for every design, so it cannot be "
              "varied yet")


def _words(model: type[BaseModel], name: str) -> tuple[str, ...]:
    """The words a Literal field of `model` takes (optional or not)."""
    def words(ann: object) -> list[str]:
        return [w for a in get_args(ann) for w in ([a] if isinstance(a, str) else words(a))]

    return tuple(words(model.model_fields[name].annotation))


WORDS = {SPARES: _words(Technology, "spares"),
         f"{PACKAGE}packaging": _words(PackageChoice, "packaging")}


def is_assumption(path: object) -> bool:
    """Whether `path` (a dotted path as written) names a technology-level assumption."""
    return isinstance(path, str) and (path == SPARES or (
        path.startswith(PACKAGE) and path[len(PACKAGE):] in PackageChoice.model_fields))


def paths() -> list[str]:
    """Every assumption path, for help texts and messages."""
    return [SPARES, *(PACKAGE + f for f in PackageChoice.model_fields)]


def _one(values: object) -> object:
    """The single value of an override (a scalar, or a list / array whose values are all
    equal); DseError when the values differ (the field is read once per spec)."""
    if isinstance(values, np.ndarray):
        values = list(values.ravel())
    if not isinstance(values, list | tuple):
        return values
    distinct = list(dict.fromkeys(values))
    if len(distinct) != 1:
        raise ValueError(NOT_VARIED + "; give one value")
    return distinct[0]


def _parsed(spec: HardwareSpec, path: str, value: object) -> object:
    """`value` for assumption `path` as the schema holds it (a word, or a number in SI)."""
    if path in WORDS:
        words = WORDS[path]
        if not isinstance(value, str) or value.strip() not in words:
            raise ValueError(f"expected one of: {', '.join(words)}; found {value!r}")
        return value.strip()
    _, term = vocabulary.canonical(spec, path)
    got = float(vocabulary.convert(path, term, value, spec.compute.clock)[0])
    return int(got) if term.integer else got


def applied(spec: HardwareSpec, values: dict[str, object]) -> HardwareSpec:
    """`spec` with each assumption of `values` (path -> value, as written or SI) set: a
    validated copy (the loader's private state, a derived design's base spares included, is
    kept). DseError with one line naming the path when a value is not one the field takes
    or the spec has no technology to hold it."""
    if not values:
        return spec
    if spec.technology is None:
        first = next(iter(values))
        raise DseError(f"{spec.name} names no technology (process node), so "
                       "it has no package or spares to set", field=first, domain="design")
    tech_update: dict[str, object] = {}
    package_update: dict[str, object] = {}
    for path, raw in values.items():
        try:
            value = _parsed(spec, path, _one(raw))
        except ValueError as e:
            raise DseError(str(e), field=path, domain="design") from None
        if path == SPARES:
            tech_update["spares"] = value
        else:
            package_update[path[len(PACKAGE):]] = value
    tech = spec.technology
    if package_update:
        package = tech.package or PackageChoice()
        tech_update["package"] = package.model_copy(update=package_update)
    out = spec.model_copy(update={"technology": tech.model_copy(update=tech_update)})
    for loc, message in hardware_checks.hierarchy_issues(out):
        where = ".".join(str(x) for x in loc)
        raise DseError(message, field=where, domain="design")
    return out


def values_of(spec: HardwareSpec, paths: list[str]) -> dict[str, object]:
    """The values `spec` gives assumption `paths` (None where the node's rule applies)."""
    tech = spec.technology
    out: dict[str, object] = {}
    for path in paths:
        if path == SPARES:
            out[path] = tech.spares if tech else None
        else:
            package = tech.package if tech else None
            out[path] = getattr(package, path[len(PACKAGE):]) if package else None
    return out


def split(spec: HardwareSpec, overrides: dict[str, object]
          ) -> tuple[HardwareSpec, dict[str, object]]:
    """(`spec` with the assumptions among `overrides` applied, the other overrides): what
    `design_batch` does first, so `--set technology.package.hbm_edges=4` and the API take
    one value of such a field as the spec's."""
    fixed = {k: v for k, v in overrides.items() if is_assumption(k)}
    if not fixed:
        return spec, overrides
    return applied(spec, fixed), {k: v for k, v in overrides.items() if k not in fixed}
