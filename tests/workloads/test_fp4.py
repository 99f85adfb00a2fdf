"""4-bit floating point with block scales (NVFP4, MXFP4): the bytes of an element with its
scales, the linear layers alone in the narrow type, the chip's fp4 rate, and no rate on a
chip without FP4 tensor cores."""

import numpy as np
import pytest

import dse
from dse.workloads import resolve_scenario
from dse.workloads.common import PRECISIONS
from dse.workloads.optable import DTYPE_BYTES, PAYLOAD_BYTES, TENSOR_CLASSES
from dse.workloads.transformer import lower


def test_nvfp4_is_four_and_a_half_bits_with_its_scales():
    # E2M1 (4 bits) + one E4M3 scale (8 bits) per 16 elements = 4.5 bits
    assert DTYPE_BYTES["nvfp4"] * 8 == 4.5
    # E2M1 + one E8M0 scale per 32 elements = 4.25 bits
    assert DTYPE_BYTES["mxfp4"] * 8 == 4.25
    assert PAYLOAD_BYTES["nvfp4"] == PAYLOAD_BYTES["mxfp4"] == 0.5
    assert PRECISIONS["fp4"] == PRECISIONS["nvfp4"]


@pytest.mark.parametrize("precision, per_weight", [("fp4", 0.5625), ("mxfp4", 0.53125),
                                                   ("fp8", 1.0)])
def test_linear_weights_are_read_at_the_formats_bytes(precision, per_weight):
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, phase="decode", precision=precision, batch=1, seq_in=128,
                             seq_out=1)
    table = lower(wl, sc)
    i = list(table.name).index("up_proj")
    n, k = table.shape[i][1], table.shape[i][2]  # [M, N, K, batch]
    assert (n, k) == (14336, 4096)
    weights = table.read[i][TENSOR_CLASSES.index("weights")]
    assert weights == k * n * per_weight


def test_fp4_attention_and_kv_stay_bf16():
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, phase="decode", precision="fp4", batch=1, seq_in=128,
                             seq_out=1)
    table = lower(wl, sc)
    names = list(table.name)
    assert table.dtype[names.index("up_proj")] == "nvfp4"
    assert table.dtype[names.index("attn_score")] == "bf16"


def test_b200_decodes_faster_at_fp4_than_at_fp8():
    """Decode is bound by reading the weights: 4.5 bits against 8 per linear weight."""
    hw, wl = dse.load_hardware("b200"), dse.load_workload("llama3-70b")
    rate = {p: dse.evaluate(hw, wl, phase="decode", batch=1, seq_in=128, seq_out=128,
                            precision=p).metrics["decode_tokens_per_s"][0]
            for p in ("fp4", "fp8")}
    assert 1.3 < rate["fp4"] / rate["fp8"] < 1.78  # below 8 / 4.5: the rest stays bf16


def test_a_chip_without_fp4_tensor_cores_has_no_fp4_rate():
    ev = dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload("llama3-8b"),
                      phase="decode", precision="fp4")
    assert not ev.feasible[0]
    assert "no compute rate for precision fp4" in ev.reason[0]
    assert np.isnan(ev.metrics["decode_tokens_per_s"][0])
