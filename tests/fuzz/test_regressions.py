"""Regression tests for the crashes the fuzz suite found, one per mechanism fixed, each with
the input that found it."""

from __future__ import annotations

import math

import pytest
from fuzzing import ROOT, assert_eval_doc, assert_promise, dse

import dse as api
from dse.errors import DseError

# --- a recommender's default scenario for a phase its file does not list -------------------
# Found by test_memory_arguments: `dse memory h100-sxm rm1` (and `dse eval h100-sxm rm1
# --phase training` or `--phase decode`) ended in "internal error: AttributeError: 'Scenario'
# object has no attribute 'embedding_precision'": the phase's default scenario was built as a
# Transformer Scenario, not the recommender's RecScenario. Fix: dse.workloads._phase_default
# builds the kind's own scenario class (committed with 16f6e44).

@pytest.mark.parametrize("workload", ["rm1", "rm2"])
def test_recommender_trains_with_the_default_training_scenario(workload):
    ran = dse("eval", "h100-sxm", workload, "--phase", "training", "--format", "json")
    doc = assert_promise(ran, json_out=True)
    assert_eval_doc(ran, doc)
    assert doc["scenario"]["name"] == "training (default)"
    assert doc["metrics"]["samples_per_s"] > 0
    assert_promise(dse("memory", "h100-sxm", workload, "--format", "json"), json_out=True)


@pytest.mark.parametrize("phase", ["decode", "prefill", "serve", "gemm"])
def test_recommender_refuses_the_phases_it_does_not_run(phase):
    ran = dse("eval", "h100-sxm", "rm1", "--phase", phase)
    assert_promise(ran)
    assert ran.code == 2
    assert ran.stderr == ("--phase: a recommender runs phase inference or training, not "
                          f"{phase}\n")


def test_recommender_default_training_scenario_through_the_api():
    hw, wl = api.load_hardware("h100-sxm"), api.load_workload("rm1")
    ev = api.evaluate(hw, wl, phase="training")
    assert ev.feasible[0] and math.isfinite(ev.metrics["samples_per_s"][0])
    with pytest.raises(DseError, match=r"^phase: a recommender runs phase inference or "
                                       r"training, not decode$"):
        api.evaluate(hw, wl, phase="decode")


# --- a lengths file that counts one length twice ----------------------------------------------
# Found by test_process_node_and_lengths_files: squad-v1.1.yaml with counts [[1, 3], [1, 4],
# ...] passed the file's schema (ShippedFile) and then failed building its histogram, so
# `dse check` ended in "internal error: ValidationError: ... length 1 appears twice in the
# histogram". Fix: ShippedFile refuses a length counted twice, at the file.

def test_lengths_file_with_a_length_twice_is_a_one_line_error(tmp_path):
    text = (ROOT / "workloads" / "lengths" / "squad-v1.1.yaml").read_text()
    text = text.replace("[41, 3], [42, 4]", "[41, 3], [41, 4]")
    assert "[41, 3], [41, 4]" in text
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    ran = dse("check", path)
    assert_promise(ran)
    assert ran.code == 2
    assert ran.stderr.startswith(f"{path}:") and "counts: length 41 appears twice" in ran.stderr


# --- an error that did not say where ------------------------------------------------------
# Found by test_eval_arguments: `dse eval a100-pcie-80gb gemm:1x1x1 --phase training` printed
# "phase training is for Transformers and recommenders, not a gemm workload": one line, but
# naming neither the workload nor the option. Fix: the message names the workload.

def test_training_a_gemm_names_the_workload():
    ran = dse("eval", "a100-pcie-80gb", "gemm:1x1x1", "--phase", "training")
    assert_promise(ran)
    assert ran.code == 2
    assert ran.stderr == "gemm:1x1x1: a gemm workload runs phase gemm, not training\n"


# --- link bytes of a step whose collectives differ per design --------------------------------
# Found by test_eval_arguments: `dse eval a100-pcie-80gb bert-large --scenario mlperf-offline
# --chips 2 --pp 2` (or --tp 2) ended in "internal error: ValueError: all the input arrays
# must have same number of dimensions": with batch max each design has its own batch, so its
# collectives' bytes are [N, C] while the operators' counts are [I]. Fix: stages.step joins
# the operators' zero link bytes and the collectives' volumes per design when either is.

@pytest.mark.parametrize("split", [["--pp", "2"], ["--tp", "2"]])
def test_pipeline_and_tensor_split_of_a_max_batch_encoder(split):
    ran = dse("eval", "h100-sxm", "bert-large", "--scenario", "mlperf-offline", "--chips", "2",
              *split, "--format", "json")
    doc = assert_promise(ran, json_out=True)
    assert_eval_doc(ran, doc)
    assert doc["feasible"] and doc["metrics"]["energy_per_sample_j"] > 0


# --- a command group without a command --------------------------------------------------------
# Found by the argument fuzzer: `dse` and `dse plot` alone printed the help on stdout and
# exited 2 with nothing on stderr, an exit 2 without its one-line error. They ask for the
# help, so they now print it with exit 0 (dse.cli_errors.DseGroup).

@pytest.mark.parametrize("args", [["plot"], []])
def test_a_command_group_without_a_command_prints_its_help(args):
    ran = dse(*args)
    assert_promise(ran)
    assert ran.code == 0 and ran.stderr == "" and "Usage:" in ran.stdout
