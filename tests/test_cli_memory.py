"""`dse memory`: the training-memory breakdown, its placement and fit, the ranked strategies
of --suggest, offload to a slower tier, and one-line errors for bad input."""

import json
import time

import numpy as np
import pytest
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.model import memory_plan as mp
from dse.model import memory_suggest as ms
from dse.model.execution import Execution
from dse.model.training_memory import plan_training_memory
from dse.model.training_setups import plan_of

runner = CliRunner()
PARTS = ("parameters", "gradients", "optimizer_state", "activations", "temporary")
DONE_WHEN = ("memory", "h100-sxm", "llama2-70b", "--phase", "training", "--chips", "64",
             "--suggest")
GPT3 = ("memory", "h100-sxm", "gpt3-175b", "--scenario", "megatron-training", "--chips",
        "1024", "--tp", "8", "--pp", "16")


def run(*args: str):
    return runner.invoke(app, list(args))


def _strict(text: str) -> dict:
    def refuse(word: str) -> None:
        raise AssertionError(f"non-finite number in JSON: {word}")

    return json.loads(text, parse_constant=refuse)


def doc_of(*args: str, code: int = 0) -> dict:
    result = run(*args, "--format", "json")
    assert result.exit_code == code, result.output
    return _strict(result.stdout)


@pytest.fixture(scope="module")
def done_when() -> tuple[dict, float]:
    start = time.perf_counter()
    doc = doc_of(*DONE_WHEN)
    return doc, time.perf_counter() - start


def test_json_keys_and_totals_are_the_sum_of_parts():
    doc = doc_of(*GPT3)
    assert {"fits", "per_chip_bytes", "placement", "suggestions"} <= set(doc)
    per = doc["per_chip_bytes"]
    assert set(per) == {*PARTS, "total"}
    assert per["total"] == pytest.approx(sum(per[p] for p in PARTS), rel=1e-12)
    assert doc["fits"] is True and doc["fits_without_offload"] is True
    assert doc["suggestions"] == []  # without --suggest
    assert set(doc["placement"]) == {"L1", "L2", "HBM3"}
    # what is placed is every byte of the chip: on it and offloaded
    assert sum(doc["placement"].values()) == pytest.approx(
        per["total"] + doc["offloaded_bytes"], rel=1e-9)
    st = doc["setup"]
    assert (st["tp"], st["pp"], st["dp"], st["chips"]) == (8, 16, 8, 1024)
    assert set(st["chosen"]) == {"micro_batch", "zero", "recompute", "sequence_parallel",
                                 "schedule"}
    # 96 layers on 16 stages are 6 per stage: 1F1B or 2, 3 or 6 chunks per rank
    assert (st["schedule"], st["virtual_stages"]) in (
        [("1f1b", 1)] + [("interleaved", v) for v in (2, 3, 6)])
    assert doc["scenario"] == {"name": "megatron-training", "phase": "training",
                               "global_batch": 1536, "seq_in": 2048, "precision": "fp16"}
    assert doc["step_time_s"] > 0 and 0 < doc["mfu"] < 1


def test_fixed_setup_is_reported_as_given():
    doc = doc_of(*GPT3, "--micro-batch", "2", "--zero", "0", "--recompute", "full",
                 "--no-sequence-parallel", "--schedule", "interleaved", "--virtual-stages", "3")
    st = doc["setup"]
    assert (st["micro_batch"], st["zero"], st["recompute"], st["sequence_parallel"]) == \
        (2, 0, "full", False)
    assert (st["schedule"], st["virtual_stages"]) == ("interleaved", 3)
    assert st["chosen"] == [] and st["microbatches"] == 1536 / 8 / 2


def test_table_shows_breakdown_placement_and_setup():
    result = run(*GPT3)
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())  # as words: rich wraps to the terminal's width
    for text in ("gpt3-175b [megatron-training", "global batch 1536 sequences x 2048 tokens",
                 "1024 chips (tp 8, pp 16, dp 8)", "fits: yes", "optimizer state",
                 "activations", "temporary buffers", "Placement per level", "HBM3",
                 "(chosen)", "step time"):
        assert text in out, text


def test_done_when_command_ranks_strategies_that_fit(done_when):
    doc, seconds = done_when
    rows = doc["suggestions"]
    assert len(rows) >= 5
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    times = [r["step_time_s"] for r in rows]
    assert times == sorted(times) and all(t > 0 for t in times)
    cap = doc["capacity"]["HBM3"]
    for r in rows:
        assert r["tp"] * r["pp"] * r["cp"] * r["dp"] == 64
        assert r["tp"] <= ms.TP_MAX and 64 % r["tp"] == 0 and 80 % r["pp"] == 0
        assert r["memory_per_chip_bytes"] <= cap
        assert set(r) >= {"tp", "pp", "dp", "micro_batch", "zero", "recompute",
                          "sequence_parallel", "offload", "memory_per_chip_bytes",
                          "step_time_s", "tokens_per_s", "mfu"}
    # the default training scenario, stated: one sequence per chip
    assert doc["scenario"]["global_batch"] == 64 and doc["scenario"]["seq_in"] == 2048
    assert any("no training scenario" in n for n in doc["notes"])
    summary = doc["suggest_summary"]
    assert summary["evaluated"] <= ms.MAX_EVALUATED
    assert summary["feasible"] == len(rows) <= summary["fit"] <= summary["enumerated"]
    assert seconds < 60  # ~4 s on one free core


def test_done_when_table(done_when):
    result = run(*DONE_WHEN)
    assert result.exit_code == 0, result.output
    assert "Strategies that fit, by step time" in result.stdout
    assert "strategies enumerated" in result.stdout


def test_a_suggestion_evaluated_as_given_matches_its_row(done_when):
    top = done_when[0]["suggestions"][0]
    args = ["memory", "h100-sxm", "llama2-70b", "--phase", "training", "--chips", "64",
            "--tp", str(top["tp"]), "--pp", str(top["pp"]), "--micro-batch",
            str(top["micro_batch"]), "--zero", str(top["zero"]), "--recompute",
            top["recompute"],
            "--sequence-parallel" if top["sequence_parallel"] else "--no-sequence-parallel"]
    doc = doc_of(*args)
    assert doc["step_time_s"] == pytest.approx(top["step_time_s"], rel=1e-9)
    assert doc["per_chip_bytes"]["total"] == pytest.approx(top["on_chip_bytes"], rel=1e-9)


def test_too_big_without_remedies_does_not_fit_but_suggestions_do():
    # 13B with 16 bytes per parameter, no ZeRO and no recomputation: 208 GB per chip
    doc = doc_of("memory", "h100-sxm", "llama2-13b", "--chips", "4", "--zero", "0",
                 "--recompute", "none", "--suggest", code=3)
    assert doc["fits"] is False and doc["reason"]
    assert doc["per_chip_bytes"]["total"] > doc["capacity"]["HBM3"]
    rows = doc["suggestions"]
    assert rows
    times = [r["step_time_s"] for r in rows]
    assert times == sorted(times)


def test_nothing_fits_says_what_the_least_needs():
    args = ("memory", "h100-sxm", "llama2-70b", "--chips", "8", "--suggest")
    doc = doc_of(*args, code=3)
    assert doc["fits"] is False and doc["suggestions"] == []
    least = doc["suggest_summary"]["least_memory"]
    assert least["bytes_per_chip"] > least["room_bytes"]
    result = run(*args)
    assert result.exit_code == 3
    assert "no strategy fits on 8 chips" in " ".join(result.stdout.split())


def test_model_that_fits_only_with_offload_is_reported_as_fitting_with_offload():
    # 13B's model states (208 GB) exceed a GH200's 144 GiB of HBM3e; its LPDDR5X holds them
    doc = doc_of("memory", "gh200", "llama2-13b", "--offload", "LPDDR5X")
    assert doc["fits"] is True and doc["fits_without_offload"] is False
    assert doc["setup"]["offload"] == {"to": "LPDDR5X", "optimizer": 1.0, "parameters": 0.0}
    assert doc["per_chip_bytes"]["optimizer_state"] == 0.0
    assert doc["offloaded_bytes"] > 1e11
    assert doc["placement"]["LPDDR5X"] >= doc["offloaded_bytes"]
    assert doc["beyond_fast_bytes"]["LPDDR5X"] == doc["placement"]["LPDDR5X"]
    result = run("memory", "gh200", "llama2-13b", "--offload", "LPDDR5X")
    out = " ".join(result.stdout.split())
    assert "fits: yes, with offload" in out and "offloaded to LPDDR5X" in out
    # without an offload option placement spills the optimizer state there by itself
    spilled = doc_of("memory", "gh200", "llama2-13b")
    assert spilled["fits"] is True and spilled["fits_without_offload"] is False
    assert spilled["placement"]["LPDDR5X"] > 0
    # the same model on a chip without a slower tier does not fit
    assert doc_of("memory", "h200-sxm", "llama2-13b", code=3)["fits"] is False


def test_suggestions_include_offload_to_each_slower_level():
    doc = doc_of("memory", "gh200", "llama2-13b", "--suggest")
    offloads = {r["offload"] for r in doc["suggestions"]}
    assert offloads == {None, "LPDDR5X"}


def test_recommender_is_placed_per_level():
    doc = doc_of("memory", "h100-sxm", "dlrm-dcnv2", "--chips", "8")
    assert doc["fits"] is True and doc["setup"] is None
    per = doc["per_chip_bytes"]
    assert all(per[p] is None for p in PARTS)
    assert per["total"] == pytest.approx(sum(doc["placement"].values()))
    assert any("recommender" in n for n in doc["notes"])


@pytest.mark.parametrize(("args", "start"), [
    (("--zero", "5"), "--zero: expected a ZeRO stage 0, 1, 2 or 3"),
    (("--offload", "DDR"), "--offload: h100-sxm has no slower memory level 'DDR'"),
    (("--phase", "decode", "--suggest"), "--phase: dse memory plans training, found decode"),
    (("--chips", "3", "--tp", "3"), "--tp 3: tensor parallelism splits the 64 attention"),
    (("--recompute", "some"), "--recompute: expected one of: none, selective, full"),
    (("--chips", "abc"), "--chips: expected a whole number"),
    (("--offload-params",), "--offload-params: give --offload LEVEL"),
    (("--schedule", "1f1b", "--virtual-stages", "2"),
     "--virtual-stages: virtual_stages > 1 goes with schedule"),
    (("--format", "xml"), "--format: expected table or json"),
    (("--set", "memory.HBM3.capacity=1GiB,2GiB"), "--set memory.HBM3.capacity: dse memory"),
    (("--chips", "64", "--tp", "8", "--pp", "16"), "--chips 64 is not a multiple of tp x pp"),
])
def test_bad_input_is_one_line_and_exit_2(args, start):
    result = run("memory", "h100-sxm", "llama2-70b", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), result.stderr


def test_recommender_rejects_training_setups():
    result = run("memory", "h100-sxm", "dlrm-dcnv2", "--suggest")
    assert result.exit_code == 2
    assert result.stderr.startswith("--suggest: training setups and --suggest are for "
                                    "Transformers")


def test_one_planner_pass_equals_the_plan_of_each_strategy():
    wl = dse.load_workload("llama2-70b")
    db = dse.design_batch(dse.load_hardware("gh200"))
    _, sc, _ = mp.training_scenario(wl, None, chips=64)
    cands = ms.strategies(wl, sc, db, 64)
    mem = ms.plan_all(wl, sc, 64, cands)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(cands), size=12, replace=False):
        s = cands[i]
        sc_s = ms._scenario_of(sc, s, False)
        ex = Execution(chips=64, tp=s.tp, pp=s.pp).with_training(sc_s.training)
        one = plan_training_memory(wl, plan_of(sc_s, ex, s.choice()))
        for part in (*PARTS, "total", "offloaded"):
            assert getattr(mem, part)[i] == pytest.approx(float(getattr(one, part)),
                                                          rel=1e-12), (s, part)


def test_enumeration_rules():
    wl = dse.load_workload("gpt3-175b")  # 96 heads, 96 layers
    db = dse.design_batch(dse.load_hardware("h100-sxm"))
    _, sc, _ = mp.training_scenario(wl, "megatron-training", chips=1024)
    cands = ms.strategies(wl, sc, db, 1024)
    assert {s.tp for s in cands} == {1, 2, 4, 8}
    assert all(96 % s.pp == 0 and 1536 % s.dp == 0 for s in cands)
    assert all(s.tp * s.pp * s.cp * s.dp == 1024 for s in cands)
    # context parallelism: divisors of the ranks left that divide the 2,048-token sequence,
    # at most CP_MAX
    assert {s.cp for s in cands} == {1, 2, 4, 8, 16}
    # ZeRO shards over every data-parallel rank, the ones that share a sequence included
    assert all(s.zero == 0 for s in cands if s.dp * s.cp == 1)
    assert all(not s.sequence_parallel for s in cands if s.tp == 1)
    assert {s.offload for s in cands} == {None}  # an H100 has no slower tier
    fits = np.ones(len(cands), dtype=bool)
    picked = ms.shortlist(cands, fits, limit=10)
    assert len(picked) == 10
    # the first of each group: no recomputation, ZeRO 1 (the step model's first choice)
    assert all(cands[i].recompute == "none" and cands[i].zero in (0, 1) for i in picked)


def test_fit_per_tier_and_offload_levels():
    wl = dse.load_workload("llama2-13b")
    db = dse.design_batch(dse.load_hardware("middle-ground"))  # HBM3, then LPDDR5X and CXL
    assert mp.slower_levels(db) == ["LPDDR5X", "CXL"]
    _, sc, _ = mp.training_scenario(wl, None, chips=2)
    cands = ms.strategies(wl, sc, db, 2)
    assert {s.offload for s in cands} == {None, "LPDDR5X", "CXL"}
    fits = ms.fitting(db, cands, ms.plan_all(wl, sc, 2, cands))
    assert fits.shape == (len(cands), 3)
    # a wider set of tiers never fits less; an offload needs its level among the tiers
    assert np.all(fits[:, 1] >= fits[:, 0]) and np.all(fits[:, 2] >= fits[:, 1])
    off = np.array([s.offload or "" for s in cands])
    assert not fits[off == "LPDDR5X", 0].any() and not fits[off == "CXL", :2].any()


def test_interleaved_without_virtual_stages_leaves_their_number_chosen():
    """`--schedule interleaved` alone: the step model picks v among the stage's splits, and
    the setup says so; with --virtual-stages too, nothing about the schedule is chosen."""
    open_v = doc_of(*GPT3, "--schedule", "interleaved")["setup"]
    assert open_v["schedule"] == "interleaved" and open_v["virtual_stages"] in (2, 3, 6)
    assert "schedule" in open_v["chosen"]
    fixed = doc_of(*GPT3, "--schedule", "interleaved", "--virtual-stages", "2")["setup"]
    assert fixed["virtual_stages"] == 2 and "schedule" not in fixed["chosen"]


def test_suggest_chooses_context_parallelism_for_long_sequences():
    """At 32K tokens on 16 H100s, sharing each sequence over ranks (cp) fits where data
    parallelism alone does not, and the ranking picks one: the planner chooses cp as it
    chooses tp and pp."""
    result = runner.invoke(app, ["memory", "h100-sxm", "llama3-8b", "--phase", "training",
                                 "--batch", "16", "--seq-in", "32768", "--chips", "16",
                                 "--suggest", "--format", "json"])
    assert result.exit_code in (0, 3), result.output
    rows = json.loads(result.stdout)["suggestions"]
    assert rows and rows[0]["cp"] > 1
    assert all(r["tp"] * r["pp"] * r["cp"] * r["dp"] == 16 for r in rows)
    assert all(32768 % r["cp"] == 0 for r in rows)


def test_suggest_chooses_expert_parallelism_for_a_mixture_of_experts():
    """Mixtral's 8 experts on 16 chips: ep runs over the divisors of both; a dense model
    has no ep to choose."""
    db = dse.design_batch(dse.load_hardware("h100-sxm"))
    moe = dse.load_workload("mixtral-8x7b")
    _, sc, _ = mp.training_scenario(moe, None, phase="training", batch=64, seq_in=4096,
                                    chips=16)
    cands = ms.strategies(moe, sc, db, 16)
    assert {s.ep for s in cands} == {1, 2, 4, 8}
    assert all((s.dp * s.cp) % s.ep == 0 and 8 % s.ep == 0 for s in cands)
    dense = dse.load_workload("llama3-8b")
    _, sc, _ = mp.training_scenario(dense, None, phase="training", batch=64, seq_in=4096,
                                    chips=16)
    assert {s.ep for s in ms.strategies(dense, sc, db, 16)} == {1}
