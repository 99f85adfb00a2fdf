"""The one JSON writer of every command: strict JSON, never `Infinity` or `NaN`.

Python's `json.dumps` writes non-finite floats as the bare words `Infinity` and `NaN`, which
no JSON parser accepts. Here every non-finite number becomes `null` first: NaN means "not
applicable" (a metric of another phase, an infeasible design), as it always has; an infinity
has no such meaning, so in a mapping it also gets a sibling `<key>_reason` saying what the
value was. numpy scalars and arrays become plain numbers and lists. The result is then
written with `allow_nan=False`, so a value that slipped through is an internal error rather
than invalid JSON. No I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

REASON_SUFFIX = "_reason"


def finite(doc: Any) -> Any:
    """`doc` with numpy values as plain Python ones and every non-finite float as None; an
    infinite value in a mapping adds `<key>_reason` (unless the mapping has that key)."""
    if isinstance(doc, dict):
        out: dict[Any, Any] = {}
        for key, value in doc.items():
            clean = finite(value)
            out[key] = clean
            reason = f"{key}{REASON_SUFFIX}" if isinstance(key, str) else None
            if clean is None and reason and reason not in doc and _infinite(value):
                out[reason] = f"not finite ({_float(value):+}): beyond the range of a float"
        return out
    if isinstance(doc, list | tuple):
        return [finite(v) for v in doc]
    if isinstance(doc, np.ndarray):
        return finite(doc.tolist())
    if isinstance(doc, np.generic):
        return finite(doc.item())
    if isinstance(doc, float) and not math.isfinite(doc):
        return None
    return doc


def _float(value: Any) -> float:
    return float(value.item() if isinstance(value, np.generic) else value)


def _infinite(value: Any) -> bool:
    return isinstance(value, float | np.floating) and math.isinf(_float(value))


def dumps(doc: Any, indent: int | None = 2, **kwargs: Any) -> str:
    """`doc` as strict JSON (see `finite`); raises ValueError on anything else non-finite."""
    return json.dumps(finite(doc), indent=indent, allow_nan=False, **kwargs)
