"""Names mean one thing (issue 23): latency, TTFT, TPOT, step and request are defined once
(dse.model.metrics) and every output follows it; per-chip quantities say so in their
names and labels."""

import csv
import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.model.metrics import METRICS, PER_CHIP, SYSTEM
from dse.spec.workload import Engine, Scenario

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
H100 = dse.load_hardware("h100-sxm")
TECH = dse.spec.load.load_design("h100-sxm")[1]
LLAMA7 = dse.load_workload("llama2-7b")
OLD = {"power_w", "area_mm2", "memory_bytes"}


def eval_json(*args: str) -> dict:
    result = runner.invoke(app, ["eval", "h100-sxm", *args, "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("args", [
    ("llama2-7b", "--phase", "decode", "--batch", "4", "--seq-in", "128", "--seq-out", "16"),
    ("llama3-8b", "--scenario", "serve-128-2048"),
    ("llama2-7b", "--phase", "prefill", "--seq-in", "256"),
    ("bert-large", "--scenario", "case-study-512"),
    ("llama2-7b", "--phase", "training", "--batch", "8", "--seq-in", "512", "--chips", "8"),
])
def test_every_reported_metric_is_defined_once(args):
    doc = eval_json(*args)
    keys = set(doc["metrics"]) - {"memory_per_chip_bytes"}
    assert keys <= set(METRICS), keys - set(METRICS)
    assert not keys & OLD


def test_per_chip_and_system_quantities_say_which():
    for key, m in METRICS.items():
        assert ("_per_chip" in key) == (m.scope == PER_CHIP), key
        if m.scope == PER_CHIP:
            assert "per chip" in m.label, key
        if m.scope == SYSTEM:
            assert "(system)" in m.label and "per_chip" not in key, key
    for key in ("power_per_chip_w", "area_per_chip_mm2"):
        assert METRICS[key].scope == PER_CHIP
    assert METRICS["energy_per_step_j"].scope == SYSTEM


def test_metrics_reference_is_the_registry():
    """The documentation's metrics page is generated from the registry: one row per metric
    with its label, scope and meaning, and no other row."""
    sys.path.insert(0, str(ROOT / "tools"))
    import docs_reference

    text = docs_reference.metrics_page()
    for m in METRICS.values():
        row = (f"| `{m.key}` | {docs_reference.text(m.label)} | "
               f"{docs_reference.text(m.unit if isinstance(m.unit, str) else m.unit.unit)} | "
               f"{m.scope} | {docs_reference.text(m.meaning)} |")
        assert row in text, row
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, flags=re.M))
    assert listed == set(METRICS)


def test_decode_latency_energy_and_tpot_cover_what_they_say():
    """Was: decode latency_s was one token's time while energy_per_step_j covered all."""
    ev = dse.evaluate(H100, LLAMA7, phase="decode", batch=4, seq_in=128, seq_out=16,
                      chips=2, tp=2, tech=TECH)
    m = {k: float(v[0]) for k, v in ev.metrics.items()}
    assert m["latency_s"] == m["step_time_s"]  # the request's 16 tokens, in lockstep
    assert m["tpot_s"] == pytest.approx(m["step_time_s"] / 16, rel=1e-12)
    assert m["energy_per_step_j"] == pytest.approx(
        m["power_per_chip_w"] * 2 * m["step_time_s"], rel=1e-12)
    assert m["energy_per_token_j"] == pytest.approx(m["energy_per_step_j"] / (4 * 16),
                                                    rel=1e-9)


def test_serve_ttft_and_tpot_are_distinct_quantities():
    """Was: latency = TTFT = TPOT = one iteration. With a 256-token iteration budget a
    1,024-token prompt rides in 5 iterations (the decode tokens take a share of each)."""
    sc = Scenario(phase="serve", batch=8, seq_in=1024, seq_out=32, precision="bf16",
                  engine=Engine(max_tokens_per_iteration=256))
    wl = LLAMA7.model_copy(update={"scenarios": {"tight": sc}})
    ev = dse.evaluate(H100, wl, "tight", tech=TECH)
    m = {k: float(v[0]) for k, v in ev.metrics.items()}
    assert m["tpot_s"] == m["step_time_s"]  # one iteration
    k = m["ttft_s"] / m["tpot_s"]
    assert k == pytest.approx(5.0, rel=1e-12)
    assert m["latency_s"] == pytest.approx(m["ttft_s"] + 31 * m["tpot_s"], rel=1e-12)
    assert m["energy_per_step_j"] == pytest.approx(m["power_per_chip_w"] * m["tpot_s"],
                                                   rel=1e-12)
    doc = {"scenario": {"phase": "serve"}, "metrics": m}
    from dse.report.eval_view import _serve_label

    assert _serve_label("ttft_s", "time to first token (TTFT)", doc) == \
        "time to first token (TTFT): 5 iterations, no queueing"


def test_tables_and_csv_use_the_new_names():
    result = runner.invoke(app, ["eval", "h100-sxm", "llama3-8b", "--scenario",
                                 "serve-128-2048"])
    assert result.exit_code == 0, result.output
    for label in ("latency per request", "time to first token (TTFT): 1 iteration, no "
                  "queueing", "time per output token (TPOT): one iteration", "power per chip",
                  "energy per step (system): one iteration", "die area per chip"):
        assert label in result.stdout, label
    result = runner.invoke(app, ["eval", "h100-sxm", "llama2-7b", "--phase", "decode",
                                 "--batch", "1,2", "-f", "csv"])
    assert result.exit_code == 0, result.output
    cols = next(csv.reader(io.StringIO(result.stdout)))
    assert {"power_per_chip_w", "area_per_chip_mm2", "step_time_s",
            "memory_per_chip_HBM3_bytes"} <= set(cols)
    assert not set(cols) & {*OLD, "memory_HBM3_bytes"}


def test_study_columns_use_the_new_names():
    from dse.search.objective import evaluate_designs
    from dse.search.space import load_study

    study = load_study("flops-vs-bandwidth")
    out = evaluate_designs(study, {})
    assert "area_per_chip_mm2" in out.columns and "area_mm2" not in out.columns
    assert any(c.endswith(".power_per_chip_w") for c in out.columns)
    assert not any(c.endswith(".power_w") for c in out.columns)
    assert np.isfinite(out.columns["area_per_chip_mm2"][0])


def test_phases_without_requests_show_the_step_time():
    result = runner.invoke(app, ["eval", "h100-sxm", "gemm:4096x4096x4096"])
    assert result.exit_code == 0, result.output
    assert "step time" in result.stdout and "latency per request" not in result.stdout
    result = runner.invoke(app, ["eval", "h100-sxm", "llama2-7b", "--phase", "decode"])
    assert "latency per request" in result.stdout and "step time" not in result.stdout
