"""Model against measured chips: the accuracy band of issue 4, and `dse validate` itself."""

import json

import numpy as np
import pytest
from shared_folder import shared
from typer.testing import CliRunner

from dse import phases, validate
from dse.cli import app
from dse.errors import DseError

runner = CliRunner()


@pytest.fixture(scope="module")
def rows():
    return validate.run()


# The files whose rows the older bands below hold: the record of the 2021-2023 stacks.
RECORD = ("measurements.csv", "gemm-calibration.csv")


def test_shipped_copies_match_shared_measurements():
    folder = shared("validation")
    shipped = validate.default_measurements()
    assert [p.name for p in shipped] == [*RECORD, "current-stacks.csv"]
    assert [p.name for p in validate.default_pending()] == ["current-stacks-pending.csv"]
    for path in (*shipped, *validate.default_pending()):
        assert path.read_bytes() == (folder / path.name).read_bytes(), path.name


def modelled(rows):
    out = [r for r in rows if r.phase in phases.names() and r.rel_error is not None
           and r.file in RECORD]
    assert out and all(r.rel_error is not None for r in out), \
        [(r.id, r.skipped) for r in out if r.rel_error is None]
    return out


def test_accuracy_band_on_modelled_phases(rows):
    """Issue 11, on both shipped files (31 modelled rows with DLRM and training): overall
    median |error| <= 10% and p90 <= 25%; gemm, decode, serve, inference and prefill medians
    <= 15% (prefill since a model's layer GEMMs run at the library's typical rate,
    kernel.TYPICAL: 14.8%). Prefill's H100 fp8 row stays at -46% (2023 fp8 kernels), so
    prefill keeps a 50% bound on every row; training's band is issue 14's (below)."""
    rows_ = modelled(rows)
    s = validate.summary(rows_)
    assert s["overall"]["n"] == 31
    assert s["overall"]["median"] <= 0.10, s["overall"]
    assert s["overall"]["p90"] <= 0.25, s["overall"]
    for phase in ("gemm", "decode", "serve", "inference", "prefill"):
        assert s[phase]["median"] <= 0.15, (phase, s[phase])
    assert s["prefill"]["max"] <= 0.50, s["prefill"]


def test_typical_layer_rate_moves_compute_bound_rows_toward_their_measurements(rows):
    """Without kernel.TYPICAL every compute-bound whole-model row was predicted faster than
    measured; with it, none of those rows is further from its measurement than 2.7 points
    more (M074, -4.8% -> -7.5%), and the GEMM rows, which measure the best shape, stay."""
    by_id = {r.id: r.rel_error for r in rows}
    before = {"M053": -0.179, "M054": -0.179, "M057": -0.206, "M076": 0.168, "M083": 0.249,
              "M096": 0.059, "M102": 0.343, "M104": 0.432, "M109": 0.295, "M124": 0.216,
              "M127": 0.058, "M087": 0.022, "M074": -0.048}
    for id_, old in before.items():
        assert abs(by_id[id_]) <= abs(old) + 0.03, (id_, old, by_id[id_])
    moved = [i for i, old in before.items() if abs(by_id[i]) < abs(old) - 0.03]
    assert len(moved) >= 9, moved  # every row but M074, M087, M127 and the HBM-bound M051
    for r in rows:
        if r.phase == "gemm":
            assert abs(r.rel_error) < 0.05, (r.id, r.rel_error)


def test_gemm_rows_reproduce_the_achievable_fractions(rows):
    """The GEMM rows are where the chips' achievable fractions come from: large, aligned
    shapes must land within 5% (the rest is wave and L2 effects, not fudge)."""
    for r in rows:
        if r.phase == "gemm":
            assert abs(r.rel_error) < 0.05, (r.id, r.rel_error)


def test_decode_rows_within_twenty_percent(rows):
    for r in rows:
        if r.phase == "decode":
            assert abs(r.rel_error) < 0.20, (r.id, r.rel_error)


def test_every_shipped_row_is_modelled(rows):
    """Every row but a pending one (which needs what the model cannot express yet) runs."""
    assert [r.id for r in rows if r.skipped and not r.pending] == []
    assert all(r.skipped.startswith("pending: ") for r in rows if r.skipped)


def test_transformer_training_rows(rows):
    """Issue 14's band is 15% per row and is not met yet: Megatron GPT-3 175B on 1,024
    A100s (hardware FLOP/s), MPT-7B MFU on 8 H100s and on 8 A100s. All three are
    predicted faster than measured (+18% to +36%, MFU counted as the sources count it, layer
    GEMMs at the library's typical rate): the rest lies in the measured runs' software
    stacks (docs: validation.md). Held to 40% and to that sign until a
    mechanism closes the gap."""
    for id_ in ("M102", "M104", "M109"):
        r = next(x for x in rows if x.id == id_)
        assert r.rel_error is not None and 0 < r.rel_error <= 0.40, (id_, r.rel_error)


def test_dlrm_rows_within_issue_13s_band(rows):
    """Issue 13: each dlrm-dcnv2 row within 30%: M127 (MLPerf v4.0 Offline on one H100,
    int8, 270-pair queries) and M124 (MLPerf v3.0 training on 8 A100s, 55,296-pair
    batches, the rules' evaluation passes included)."""
    for id_ in ("M124", "M127"):
        dlrm = next(r for r in rows if r.id == id_)
        assert dlrm.rel_error is not None and abs(dlrm.rel_error) <= 0.30, \
            (id_, dlrm.rel_error)


def test_bert_runs_the_squad_lengths_the_harness_runs(rows):
    bert = next(r for r in rows if r.id == "M096")
    assert bert.note is None  # padding skipping is modelled (lengths: squad-v1.1), not noted
    assert bert.rel_error > -0.25  # at the full 384 tokens the model gave -50%


def test_validate_json_and_plot(tmp_path):
    plot = tmp_path / "v.png"
    result = runner.invoke(app, ["validate", "--format", "json", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"id", "phase", "metric", "measured", "predicted", "rel_error"} <= set(doc["rows"][0])
    # the record, current stacks and the pending rows that run (cp: TU01/03; fp4: TU07/09)
    assert doc["summary"]["overall"]["n"] == 31 + 37 + 4
    assert doc["by_file"]["current-stacks.csv"]["n"] == 37
    assert plot.stat().st_size > 10_000


def test_validate_table_lists_summary():
    result = runner.invoke(app, ["validate"])
    assert result.exit_code == 0, result.output
    assert "overall" in result.stdout and "skipped" in result.stdout


@pytest.mark.parametrize(("content", "message"), [
    ("id,hardware\nM1,h100-sxm\n", "missing column"),
    ("id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric,value\n"
     "M1,h100-sxm,one,1,1,llama2-7b,decode,bf16,1,5,200,decode_tokens_per_s,100\n",
     ":2: chips: expected a number"),
    ("id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric,value\n"
     "M1,h100-sxm,1,1,1,llama2-7b,decoding,bf16,1,5,200,decode_tokens_per_s,100\n",
     ":2: phase: expected one of"),
    ("id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric,value\n"
     "M1,h100-sxm,1,1,1,llama2-7b,decode,bf16,1,5,200,ttft_s,100\n",
     ":2: metric: expected one of decode_tokens_per_s"),
    ("id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric,value\n"
     "M1,h100-sxm,1,1,1,llama2-7b,decode,bf17,1,5,200,decode_tokens_per_s,100\n",
     ":2: precision: unknown value 'bf17'; expected one of: fp32, bf16"),
])
def test_malformed_measurement_file_exits_two(tmp_path, content, message):
    path = tmp_path / "m.csv"
    path.write_text(content)
    result = runner.invoke(app, ["validate", "--measurements", str(path)])
    assert result.exit_code == 2
    assert message in result.output, result.output
    assert "Traceback" not in result.output


def test_ids_are_unique_across_the_files_validated_together(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(
        "id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric,value\n"
        "M001,h100-sxm,1,1,1,gemm:4096x4096x4096,gemm,bf16,1,,,achieved_flop_per_s,7e14\n")
    result = runner.invoke(app, ["validate", "--measurements", str(path), "--measurements",
                                 str(validate.default_measurements()[0])])
    assert result.exit_code == 2 and "M001 is also at" in result.output, result.output
    twice = runner.invoke(app, ["validate", "--measurements", str(path), "--measurements",
                                str(tmp_path / "." / "m.csv")])
    assert twice.exit_code == 2 and twice.stderr == (
        f"--measurements: {tmp_path / 'm.csv'} is given twice; give each file once\n")
    one = runner.invoke(app, ["validate", "--measurements", str(path), "-f", "json"])
    assert one.exit_code == 0 and json.loads(one.stdout)["summary"]["overall"]["n"] == 1


def test_unknown_hardware_row_is_skipped_not_fatal(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(
        "id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric,value\n"
        "X1,tpu-v9,1,1,1,llama2-7b,decode,bf16,1,5,200,decode_tokens_per_s,100\n"
        "X2,h100-sxm,1,1,1,gemm:4096x4096x4096,gemm,bf16,1,,,achieved_flop_per_s,7e14\n")
    rows = validate.run(path)
    assert rows[0].skipped and "tpu-v9" in rows[0].skipped
    assert rows[1].rel_error is not None


def test_rows_may_name_spec_files_relative_to_the_csv(tmp_path):
    """A hardware or workload cell may be a path, as everywhere a name is taken; a relative
    one is found beside the CSV (as base: is beside its file), not in the working folder."""
    (tmp_path / "chips").mkdir()
    (tmp_path / "chips" / "mine.yaml").write_text(
        "base: h100-sxm\nsource: a derived chip\ncompute:\n  units: 100\n")
    head = "id,hardware,chips,tp,pp,workload,phase,precision,batch,seq_in,seq_out,metric,value\n"
    row = "{},{},1,1,1,llama2-7b,decode,bf16,1,5,200,decode_tokens_per_s,100\n"
    path = tmp_path / "m.csv"
    path.write_text(head + row.format("A", "chips/mine.yaml") + row.format("B", "h100-sxm")
                    + row.format("C", "./nowhere.yaml"))
    mine, stock, missing = validate.run(path)
    assert mine.hardware == "chips/mine.yaml" and mine.skipped is None
    assert 0 < mine.predicted <= stock.predicted  # fewer SMs: no faster
    assert missing.skipped == ("hardware file './nowhere.yaml' not found (a path is relative "
                               "to the CSV's folder)")
    (tmp_path / "bad.yaml").write_text("base: h100-sxm\nsource: x\ncompute:\n  units: -3\n")
    path.write_text(head + row.format("A", "h100-sxm") + row.format("B", "bad.yaml"))
    with pytest.raises(DseError) as e:
        validate.run(path)
    assert str(e.value).startswith(f"{path}:3: {tmp_path / 'bad.yaml'}:4:10: compute.units: ")


def test_no_measured_case_is_throttled_far_below_its_rated_clock():
    """The shipped chips ran these cases at their TDP at most; each chip's energies are
    calibrated so a large GEMM at its measured rate draws exactly its TDP, so a case may
    sit at the TDP but only a few percent below the rated clock (a deep throttle would
    mean inconsistent constants)."""
    from dse.model import evaluate
    from dse.spec.load import library_names, load_design, load_workload

    for r in (row for path in validate.default_measurements()
              for row in validate.read_measurements(path)):
        if phases.get(r["phase"]).trains or (
                r["workload"] not in library_names("workload") and ":" not in r["workload"]):
            continue
        spec, tech, _ = load_design(r["hardware"])
        if tech is None:
            continue
        wl = load_workload(r["workload"])
        ev = evaluate(spec, wl, phase=r["phase"], batch=r["batch"],
                      precision=r["precision"] or None,
                      seq_in=int(r["seq_in"]) if r["seq_in"] else None,
                      seq_out=int(r["seq_out"]) if r["seq_out"] else None,
                      chips=r["chips"], tp=r["tp"], pp=r["pp"], tech=tech)
        clock = ev.metrics["clock_hz"][0] / spec.compute.clock
        assert clock >= 0.97 or not np.isfinite(clock), (r["id"], clock)
        assert spec.tdp is None or ev.metrics["power_per_chip_w"][0] <= spec.tdp * (1 + 1e-9)


def test_a_rows_seq_in_at_the_distributions_limit_keeps_the_distribution(tmp_path):
    """The measurement files' convention: MLPerf BERT's 384 is SQuAD's limit, so the row runs
    SQuAD (as with seq_in left out); another seq_in is the fixed length it names."""
    head = (validate.default_measurements()[0]).read_text().split("\n")[0]
    row = "{},a100-sxm-80gb,1,1,1,bert-large,inference,int8,1,{},,samples_per_s,1000,high,x"
    csv = tmp_path / "m.csv"
    csv.write_text("\n".join([head, row.format("limit", 384), row.format("blank", ""),
                              row.format("fixed", 256)]) + "\n")
    got = {r.id: r.predicted for r in validate.run(csv)}
    assert got["limit"] == got["blank"]
    # SQuAD's mean length (178.5 tokens) is below 256: the fixed length is slower per sample
    assert got["fixed"] < got["limit"]
