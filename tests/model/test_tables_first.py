"""Recommender `batch: max` sizes the batch beside the embedding tables: the hot rows keep
the fastest tier and the batch takes what they leave, so a design with a slower capacity
tier (GH200's LPDDR5X) does not spill tables to make room for activations."""

import numpy as np

import dse


def _max(hw: str) -> dse.Evaluation:
    return dse.evaluate(dse.load_hardware(hw), dse.load_workload("dlrm-dcnv2"),
                        "mlperf-offline", batch="max")


def test_gh200_keeps_its_tables_in_hbm():
    ev = _max("gh200")
    names = list(ev.level_names)
    used = ev.memory_bytes[0]
    assert used[names.index("LPDDR5X")] == 0.0
    # the batch is the most whose activations fit beside the tables in HBM: one more does
    # not fit there
    hbm = dse.load_hardware("gh200")
    batch = int(ev.sequences[0])
    more = dse.evaluate(hbm, dse.load_workload("dlrm-dcnv2"), "mlperf-offline",
                        batch=batch + 1)
    assert more.memory_bytes[0][names.index("LPDDR5X")] > 0


def test_gh200_batch_max_is_not_slower_than_a_batch_that_keeps_the_tables():
    fixed = dse.evaluate(dse.load_hardware("gh200"), dse.load_workload("dlrm-dcnv2"),
                         "mlperf-offline", batch=4096)
    assert _max("gh200").metrics["samples_per_s"][0] >= fixed.metrics["samples_per_s"][0]


def test_one_tier_chip_sizes_as_before():
    """With one DRAM tier the room beside the tables is all the room there is."""
    ev = _max("h100-sxm")
    assert int(ev.sequences[0]) == 16007
    assert np.isfinite(ev.metrics["samples_per_s"][0])
