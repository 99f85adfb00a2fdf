"""Length distributions of inference scenarios: the shipped SQuAD v1.1 one, the inline forms,
and one-line errors for inputs no distribution of sequences up to seq_in can have."""

import json
from pathlib import Path

import pytest

import dse
from dse.errors import SpecError
from dse.spec.lengths import LengthDistribution
from dse.spec.load import library_names, load_lengths, load_workload
from dse.spec.workload import Scenario
from dse.workloads import resolve_scenario


def test_squad_gives_the_documented_mean():
    squad = load_lengths("squad-v1.1")
    mean, square = squad.moments()
    # workloads/lengths/squad-v1.1.yaml: 10,833 features (MLPerf's BERT sample count) of
    # 1,933,625 tokens, whose squares sum to 395,990,953.
    assert sum(1 for _ in squad.histogram) == 343
    assert mean == pytest.approx(1_933_625 / 10_833, rel=1e-12)
    assert mean == pytest.approx(178.494, abs=5e-4)
    assert square == pytest.approx(395_990_953 / 10_833, rel=1e-12)
    assert 1 - mean / 384 == pytest.approx(0.535, abs=5e-4)  # "about 54% padding" at 384
    assert max(b.length for b in squad.histogram) == 384
    assert "squad-v1.1" in library_names("lengths")
    assert "create_squad_data.py" in squad.source and "10833" in squad.source


def test_inline_forms_give_their_moments():
    def moments(lengths):
        return Scenario.model_validate({"phase": "inference", "seq_in": 8,
                                        "lengths": lengths}).lengths.moments()

    # lengths 2 and 6, half each: E[L] = 4, E[L^2] = (4 + 36) / 2 = 20
    hist = [{"length": 2, "share": 0.5}, {"length": 6, "share": 0.5}]
    assert moments(hist) == (4.0, 20.0)
    assert moments({"histogram": hist}) == (4.0, 20.0)
    assert moments({"mean": 4, "second_moment": 20}) == (4.0, 20.0)
    assert moments({"mean": 4, "std": 2}) == (4.0, 20.0)  # 4^2 + 2^2
    # shares within the tolerance are normalised: 1/3 each written to three decimals
    thirds = [{"length": n, "share": 0.333} for n in (2, 4, 8)]
    assert moments(thirds) == pytest.approx((14 / 3, (4 + 16 + 64) / 3), rel=1e-12)


def test_a_shipped_distribution_is_kept_by_name():
    sc = Scenario.model_validate({"phase": "inference", "seq_in": 384,
                                  "lengths": "squad-v1.1"})
    assert sc.model_dump()["lengths"] == "squad-v1.1"
    assert Scenario.model_validate(sc.model_dump()) == sc
    inline = Scenario.model_validate({"phase": "inference", "seq_in": 8,
                                      "lengths": {"mean": 4, "std": 2}})
    assert inline.model_dump()["lengths"] == {"mean": 4.0, "std": 2.0}
    assert Scenario.model_validate(inline.model_dump()) == inline


BAD = [
    ([{"length": 2, "share": 0.5}, {"length": 6, "share": 0.4}],
     "histogram shares sum to 0.9; expected 1 (within 0.001)"),
    ([{"length": 2, "share": 0.5}, {"length": 600, "share": 0.5}],
     "lengths reach 600 tokens, above seq_in 384 (the longest sequence); expected seq_in >= 600"),
    ([{"length": 2, "share": 0.5}, {"length": 2, "share": 0.5}],
     "length 2 appears twice in the histogram"),
    ({"mean": 400, "std": 10}, "need sequences longer than seq_in 384"),
    ({"mean": 300, "second_moment": 150_000}, "need sequences longer than seq_in 384"),
    ({"mean": 100, "second_moment": 9_000}, "is below mean^2 = 10000"),
    ({"mean": 100}, "a mean needs exactly one of second_moment or std"),
    ({"mean": 100, "std": 5, "second_moment": 10_025}, "exactly one of second_moment or std"),
    ({"mean": 100, "std": 5, "histogram": [{"length": 100, "share": 1}]},
     "give a histogram or moments, not both"),
    ({}, "expected a histogram (a list of {length, share}) or a mean"),
    ("squad-v2", "unknown length distribution 'squad-v2'; expected one of: squad-v1.1"),
    ({"name": "mine", "mean": 100, "std": 5}, "name and source belong to the shipped"),
    ([{"length": 0, "share": 1}], "lengths.histogram[0].length"),
]


def _workload(tmp_path: Path, scenario: str) -> Path:
    path = tmp_path / "enc.yaml"
    path.write_text(
        "name: enc\nkind: transformer\nsource: test\narchitecture: encoder\nlayers: 1\n"
        "d_model: 8\nheads: 2\nd_ff: 16\nvocab: 10\nposition: none\n"
        f"scenarios:\n  s: {scenario}\n")
    return path


@pytest.mark.parametrize("lengths, message", BAD)
def test_bad_lengths_are_one_line_errors_at_the_scenario(tmp_path, lengths, message):
    import json

    path = _workload(tmp_path, "{phase: inference, seq_in: 384, lengths: "
                               f"{json.dumps(lengths)}}}")
    with pytest.raises(SpecError) as e:
        load_workload(path)
    text = str(e.value)
    assert message in text, text
    assert "\n" not in text and "Traceback" not in text
    assert text.startswith(f"{path}:12:")  # the scenario's line
    assert "scenarios.s" in text


def test_lengths_go_with_the_inference_phase_only(tmp_path):
    path = _workload(tmp_path, "{phase: decode, seq_in: 4, seq_out: 4, lengths: squad-v1.1}")
    with pytest.raises(SpecError, match=r"lengths \(a length distribution\) goes with phase "
                                        r"inference; phase decode runs every sequence at its "
                                        r"seq_in"):
        load_workload(path)


def test_an_explicit_seq_in_replaces_the_distribution():
    """Issue 23: --seq-in 128 on mlperf-offline was refused ("lengths squad-v1.1 reach 384
    tokens"); a named length is the length run."""
    bert = dse.load_workload("bert-large")
    assert resolve_scenario(bert, "mlperf-offline")[1].lengths is not None
    for n in (128, 384, 512):
        sc = resolve_scenario(bert, "mlperf-offline", seq_in=n)[1]
        assert sc.lengths is None and sc.seq_in == n


def test_describe():
    assert load_lengths("squad-v1.1").describe() == "squad-v1.1 (mean 178.5)"
    hist = LengthDistribution(histogram=[{"length": 2, "share": 0.5},
                                         {"length": 6, "share": 0.5}])
    assert hist.describe() == "histogram of 2 (mean 4)"
    assert LengthDistribution(mean=4, std=2).describe() == "mean 4, std 2"
    assert LengthDistribution(mean=4, second_moment=20).describe() == \
        "mean 4, second moment 20"


def test_a_broken_shipped_file_is_reported_at_its_counts_line(tmp_path):
    from dse.spec.lengths import ShippedFile
    from dse.spec.load import read_yaml, validate

    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nsource: test\nmax_length: 8\nfeatures: 3\n"
                    "counts: [[2, 1], [6, 1]]\n")
    with pytest.raises(SpecError,
                       match=r"bad.yaml:5:9: counts: the counts sum to 2, but features says 3"):
        validate(ShippedFile, read_yaml(path))
    path.write_text("name: bad\nsource: test\nmax_length: 8\nfeatures: 2\n"
                    "counts: [[2, 1], [9, 1]]\n")
    with pytest.raises(SpecError, match=r"bad.yaml:5:9: counts: expected \[length in 1..8, "
                                        r"count >= 1\] pairs, found \[9, 1\] \(pair 2\)"):
        validate(ShippedFile, read_yaml(path))


def test_workload_seq_in_runs_that_length_issue_23():
    """`dse workload bert-large --phase inference --seq-in N --convention paper` gave the
    SQuAD distribution's 112 GFLOPs for N = 512, 1024, 2048 and 4096 alike."""
    from typer.testing import CliRunner

    from dse.cli import app

    def flops(*args: str) -> float:
        r = CliRunner().invoke(app, ["workload", "bert-large", *args, "--convention", "paper",
                                     "-f", "json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["flops"]

    runs = [flops("--phase", "inference", "--seq-in", str(n)) for n in (512, 1024, 2048)]
    assert runs[0] < runs[1] < runs[2]
    assert runs[0] == flops("--scenario", "case-study-512")  # batch 1, 512 tokens, int8
    assert flops("--phase", "inference") < 0.5 * runs[0]  # the scenario keeps SQuAD's lengths
    assert flops("--phase", "inference", "--seq-in", "128") > 0  # was refused
