"""The rows measured on 2024-2026 software stacks (validation/current-stacks.csv): read with
their execution columns (cp, dp, ep, software), validated by default, the pending rows
reported, and the accuracy the model reaches on them."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse import Execution, validate
from dse.cli import app
from dse.errors import DseError

runner = CliRunner()


@pytest.fixture(scope="module")
def rows():
    return validate.run()


def _current(rows):
    return [r for r in rows if r.file == "current-stacks.csv"]


def _csv(tmp_path, *lines: str, extra: str = ",cp,dp,ep,software"):
    head = ",".join(validate.COLUMNS) + extra
    path = tmp_path / "m.csv"
    path.write_text("\n".join([head, *lines]) + "\n")
    return path


ROW = "{id},h100-sxm,{chips},{tp},1,llama3-8b,training,bf16,{batch},4096,,samples_per_s,10"


def test_every_current_row_runs(rows):
    current = _current(rows)
    assert len(current) == 37
    assert [r.id for r in current if r.rel_error is None] == []


def test_accuracy_on_current_stacks_no_worse_than_recorded(rows):
    """What the model reaches on current stacks today (median 7.6%, p90 26.7%, with the
    cp column, hierarchical collectives, the stacks' first token and attention rates and
    their tensor-parallel overlap; it was 14.7% and 41.1% before them): a change may only
    improve it."""
    s = validate.summary(_current(rows))
    assert s["overall"]["median"] <= 0.08, s["overall"]
    assert s["overall"]["p90"] <= 0.27, s["overall"]


@pytest.mark.xfail(strict=True, reason="issue 27's band is not met yet: the p90 is 26.7% "
                   "(MI300X on vLLM, DLRM at 64 chips and on B200; docs: validation.md)")
def test_issue_27_band_on_current_stacks(rows):
    """median |error| <= 10%, p90 <= 25%, every phase's median <= 15%."""
    s = validate.summary(_current(rows))
    assert s["overall"]["median"] <= 0.10 and s["overall"]["p90"] <= 0.25, s["overall"]
    for phase, stats in s.items():
        if isinstance(stats, dict) and phase != "overall":
            assert stats["median"] <= 0.15, (phase, stats)


def test_the_record_files_keep_their_band(rows):
    """The older files (2021-2023 stacks) stay within their figures: median <= 5%, p90 <=
    20%, every GEMM row within 5%."""
    record = [r for r in rows if r.file in ("measurements.csv", "gemm-calibration.csv")]
    s = validate.summary(record)
    assert s["overall"]["median"] <= 0.05 and s["overall"]["p90"] <= 0.20, s["overall"]
    assert all(abs(r.rel_error) < 0.05 for r in record if r.phase == "gemm")


def test_context_parallel_rows_run_with_cp(rows):
    """T003 (405B on 1,024 H100s, CP 2): with cp folded into dp it came out 26.6% slow;
    run with cp = 2 as measured, and with NeMo's tensor-parallel overlap, it is within 12%
    (+6.6%)."""
    t003 = next(r for r in rows if r.id == "T003")
    assert abs(t003.rel_error) < 0.12, t003.rel_error


def test_pending_rows_are_reported_with_their_reason(rows):
    pending = [r for r in rows if r.pending]
    assert len(pending) == 10
    ran = {r.id for r in pending if r.rel_error is not None}
    assert ran == {"TU01", "TU03", "TU07", "TU09"}  # runnable with cp, and with fp4
    why = {r.id: r.skipped for r in pending if r.skipped}
    assert set(why) == {"TU04", "TU05", "TU13", "TU15", "TU17", "TU19"}
    assert all("seq_in" in w and "length distribution" in w for w in why.values())


def test_a_pending_rows_failure_does_not_stop_the_others(tmp_path):
    bad = ROW.format(id="bad", chips=8, tp=1, batch=4).replace("bf16", "fp4") + ",1,8,1,x"
    good = ROW.format(id="good", chips=8, tp=1, batch=8) + ",1,8,1,x"
    path = _csv(tmp_path, bad, good)
    out = {r.id: r for r in validate.run([], pending=path)}
    assert out["bad"].skipped.startswith("pending: precision")
    assert out["good"].rel_error is not None
    with pytest.raises(DseError, match=r"m.csv:2: precision"):  # as measurements: an error
        validate.run(path)


def test_dp_must_agree_with_the_other_degrees(tmp_path):
    path = _csv(tmp_path, ROW.format(id="a", chips=16, tp=2, batch=16) + ",2,8,1,x")
    with pytest.raises(DseError, match=r"m.csv:2: dp: expected chips = tp x pp x cp x dp "
                                       r"\(16\), found 2 x 1 x 2 x 8 = 32"):
        validate.run(path)


def test_blank_execution_columns_are_one(tmp_path):
    blank = _csv(tmp_path, ROW.format(id="a", chips=16, tp=2, batch=16) + ",,,,")
    plain = tmp_path / "plain.csv"
    plain.write_text(",".join(validate.COLUMNS) + "\n" + ROW.format(id="a", chips=16, tp=2,
                                                                     batch=16) + "\n")
    assert validate.run(blank)[0].predicted == validate.run(plain)[0].predicted


def test_cp_column_runs_context_parallelism(tmp_path):
    folded = _csv(tmp_path, ROW.format(id="a", chips=16, tp=2, batch=16) + ",1,8,1,x")
    (tmp_path / "cp.csv").write_text(folded.read_text().replace(",1,8,1,x", ",2,4,1,x"))
    a, b = validate.run(folded)[0].predicted, validate.run(tmp_path / "cp.csv")[0].predicted
    assert a is not None and b is not None and a != b


def test_blank_seq_in_of_a_sequence_model_is_an_error(tmp_path):
    """A blank seq_in used to run the scenario's default length: 5-15x off for an MLPerf
    data set's row. Without a length distribution in the scenario it is refused."""
    row = "a,h100-sxm,1,1,1,llama3-8b,serve,fp8,max,,128,output_tokens_per_s,100"
    path = _csv(tmp_path, row, extra="")
    with pytest.raises(DseError, match=r"m.csv:2: seq_in: blank, but llama3-8b is a sequence "
                                       "model"):
        validate.run(path)


def test_cp_halves_attention_per_chip_and_adds_the_kv_exchange():
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama3-8b")
    got = {}
    for cp in (1, 2):
        ex = Execution(chips=16, tp=2, cp=cp, micro_batch=2, zero=1, recompute="none",
                       sequence_parallel=True)
        ev = dse.evaluate(hw, wl, phase="training", batch=64, seq_in=8192, precision="bf16",
                          execution=ex)
        names = list(ev.ops_name)
        flops = np.atleast_2d(ev.ops_flops)[0]
        got[cp] = (flops[names.index("attn_score")], "context.kv_all_gather" in names)
    assert got[2][0] == got[1][0] / 2
    assert got[2][1] and not got[1][1]


def test_cp_outside_training_is_refused():
    result = runner.invoke(app, ["eval", "h100-sxm", "llama3-8b", "--phase", "decode",
                                 "--chips", "2", "--cp", "2"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == ["--cp: context and expert parallelism are modelled in training only "
                     "(phase decode splits over tp and pp; found 2)"], result.output


def test_eval_cp_names_it_in_the_heading():
    result = runner.invoke(app, ["eval", "h100-sxm", "llama3-8b", "--phase", "training",
                                 "--batch", "64", "--seq-in", "4096", "--chips", "16",
                                 "--tp", "2", "--cp", "2", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["scenario"]["cp"] == 2 and doc["scenario"]["ep"] == 1


def test_validate_reports_by_file_and_by_stack():
    result = runner.invoke(app, ["validate", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc["by_file"]) == {"measurements.csv", "gemm-calibration.csv",
                                   "current-stacks.csv", "current-stacks-pending.csv"}
    assert {"cuda-default", "trtllm-triton", "megatron-te", "vllm-rocm"} <= set(doc["by_stack"])


def test_a_cp_that_does_not_divide_the_sequence_names_the_option():
    result = runner.invoke(app, ["eval", "h100-sxm", "llama3-8b", "--phase", "training",
                                 "--batch", "64", "--seq-in", "8191", "--chips", "16",
                                 "--cp", "2"])
    assert result.exit_code == 2
    assert result.output.strip() == ("--cp 2: context parallelism must divide the sequence "
                                     "(8191 tokens)")
