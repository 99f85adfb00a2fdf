"""2:4 structured weight sparsity, a what-if (the paper's pruning remedy): a Transformer's
linear layers run half their products on sparse matrix units and store half their values
plus 2 bits of position per kept value; a chip without such units cannot run it."""

import pytest
from typer.testing import CliRunner

import dse
from dse.cli import app
from dse.errors import DseError
from dse.workloads import resolve_scenario
from dse.workloads.optable import TENSOR_CLASSES
from dse.workloads.transformer import lower

runner = CliRunner()


def _table(sparsity, precision="fp8"):
    wl = dse.load_workload("llama3-8b")
    _, sc = resolve_scenario(wl, phase="decode", precision=precision, batch=4, seq_in=128,
                             seq_out=1, sparsity=sparsity)
    return lower(wl, sc)


@pytest.mark.parametrize("precision, dense_bytes", [("fp8", 1.0), ("bf16", 2.0),
                                                    ("fp4", 0.5625)])
def test_linear_layers_halve_their_products_and_store_half_plus_positions(precision,
                                                                          dense_bytes):
    dense, sparse = _table(None, precision), _table("2:4", precision)
    i = list(dense.name).index("up_proj")
    w = TENSOR_CLASSES.index("weights")
    m, n, k = dense.shape[i][:3]
    assert dense.flops[i] == 2 * m * n * k
    assert sparse.flops[i] == m * n * k
    # half the values, and 2 bits for each of the 2 kept values of 4: 1 bit per weight
    assert sparse.read[i][w] == n * k * (dense_bytes / 2 + 1 / 8)


def test_attention_and_the_lm_head_stay_dense():
    dense, sparse = _table(None), _table("2:4")
    for name in ("attn_score", "attn_value", "lm_head"):
        i = list(dense.name).index(name)
        assert sparse.flops[i] == dense.flops[i], name
        assert (sparse.read[i] == dense.read[i]).all(), name


def test_sparse_decode_is_faster_on_sparse_tensor_cores():
    hw, wl = dse.load_hardware("h100-sxm"), dse.load_workload("llama3-70b")
    rate = {s: dse.evaluate(hw, wl, phase="decode", precision="fp8", chips=2, tp=2,
                            sparsity=s).metrics["decode_tokens_per_s"][0]
            for s in (None, "2:4")}
    # the linear weights move 0.625 of their dense bytes: at most 1.6x, the rest dense
    assert 1.2 < rate["2:4"] / rate[None] < 1.6


def test_a_chip_without_sparse_units_cannot_run_it():
    ev = dse.evaluate(dse.load_hardware("tpu-v5e"), dse.load_workload("llama3-8b"),
                      phase="decode", sparsity="2:4")
    assert not ev.feasible[0]
    assert ev.reason[0] == "tpu-v5e has no 2:4 sparse matrix units (compute.matrix.sparsity)"


@pytest.mark.parametrize("args, message", [
    (["h100-sxm", "dlrm-dcnv2"], "--sparsity: 2:4: dlrm-dcnv2 is a recommender workload, "
                                 "whose lowering applies no weight sparsity"),
    (["h100-sxm", "llama3-8b", "--phase", "training", "--batch", "8", "--seq-in", "1024"],
     "--sparsity: 2:4: sparse weights are modelled for inference"),
    (["h100-sxm", "llama3-8b", "--precision", "fp32"],
     "--sparsity: 2:4: 2:4 sparse matrix units take 16-, 8- and 4-bit weights"),
])
def test_where_it_does_not_apply_one_line_exit_2(args, message):
    result = runner.invoke(app, ["eval", *args, "--sparsity", "2:4"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.output


def test_an_unknown_pattern_is_refused():
    with pytest.raises(DseError, match="sparsity"):
        dse.evaluate(dse.load_hardware("h100-sxm"), dse.load_workload("llama3-8b"),
                     phase="decode", sparsity="1:4")
