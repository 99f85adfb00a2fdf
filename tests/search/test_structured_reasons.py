"""A study's per-workload and budget reasons are kept as data (Outcome.job_reason,
budget_reason, the `<workload>.reason` table column): the outputs read them, never take the
joined `reason` text back apart, so a reason whose words look like another workload's
prefix, or like a budget, stays whole."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from dse.search import outputs
from dse.search.objective import Outcome


def _outcome(job_reason: dict[str, str], budget: str) -> Outcome:
    names = list(job_reason)
    joined = "; ".join([budget, *(f"{k}: {v}" for k, v in job_reason.items() if v)])
    return Outcome(values=np.zeros((1, 1)), constraints={}, feasible=np.array([False]),
                   reason=np.array([joined], dtype=object), columns={},
                   per_job={k: {"throughput": np.array([np.nan if job_reason[k] else 1.0])}
                            for k in names},
                   job_reason={k: np.array([v], dtype=object) for k, v in job_reason.items()},
                   budget_reason=np.array([budget], dtype=object))


def test_not_run_and_outside_budget_read_the_kept_reasons():
    tricky = "weights need 90 GB; decode: and 10 GB more; power of two tiles"
    out = _outcome({"decode": "", "decode-long": tricky, "serve": "not enough links"},
                   "area 900 mm2 exceeds the budget of 757 mm2")
    study = SimpleNamespace(jobs={"decode": None, "decode-long": None, "serve": None})
    assert outputs.not_run(study, out) == \
        f"decode-long: {tricky}; serve: not enough links"  # type: ignore[arg-type]
    assert outputs.outside_budget(out) == "area 900 mm2 exceeds the budget of 757 mm2"


def test_each_workload_reason_is_a_table_column():
    out = _outcome({"decode": "does not fit", "serve": ""}, "")
    study = SimpleNamespace(params=[], fixed={})
    frame = outputs.outcome_frame(study, {}, out)  # type: ignore[arg-type]
    assert frame["decode.reason"].tolist() == ["does not fit"]
    assert frame["serve.reason"].tolist() == [""]
    assert isinstance(frame, pd.DataFrame)

