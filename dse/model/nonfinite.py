"""The error a stage raises when it would hand on a NaN or infinite value where the model's
rule is a finite one (a bug in the model, never a property of the input). No I/O."""

from __future__ import annotations

import numpy as np


class NonFiniteError(ValueError):
    """A stage handed on a NaN or infinite value where the model's rule is a finite one: a
    bug in the model, never a property of the input (an internal error, exit 1). Fields:
    the stage, the metric, the first design (index) and its value."""

    def __init__(self, stage: str, metric: str, design: int, value: float, detail: str = ""):
        self.stage, self.metric, self.design, self.value = stage, metric, design, value
        super().__init__(f"stage {stage}: {metric} of design {design} is {value}"
                         + (f" ({detail})" if detail else ""))


def check_step_time(names: np.ndarray, per: np.ndarray, total: np.ndarray,
                     flagged: np.ndarray) -> None:
    """NonFiniteError unless the step time is finite wherever no operator lacks a rate and
    no collective lacks a link (`flagged`: the designs infeasible for those reasons, whose
    time is infinite by design)."""
    bad = ~np.isfinite(total) & ~flagged
    if bad.any():
        i = int(np.argmax(bad))
        j = int(np.argmax(~np.isfinite(per[i])))
        raise NonFiniteError("step", "step_time_s", i, float(total[i]),
                             f"first non-finite: {names[j]}, {per[i, j]} s")
