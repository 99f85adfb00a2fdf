"""Golden test: the "AI and Memory Wall" case study (Kim et al. 2023, arXiv 2302.14017),
reproduced with the `paper` counting convention (1 byte per parameter and activation, each
counted once per operator, Transformer layers only).

Tolerances: 5% on FLOPs, memory operations (MOPs) and arithmetic intensity. The published
GMOPs labels of the end-to-end figure are rounded to 0.1, so a MOPs value may also differ by
up to half that step (0.05 GB).

One documented exception: the published BERT-Large FLOPs are 5-9% below the exact count of
the published configuration (24 layers, d=1024, d_FFN=4096). They equal our count minus one
d x d projection per layer (2*l*d^2 FLOPs per layer) to within 0.5% at every length, while
BERT-Base (same code, same convention) matches with all four projections; the published
BERT-Large MOPs likewise lack that projection's bytes (d^2 weights + 2*l*d activations per
layer). We keep the exact count and assert the explanation instead of hiding it in a constant.

Second documented difference: the "Other" group (softmax, LayerNorm, GELU, residual adds) of
the hypothetical 4-head BERT-Base, where softmax is small and the per-token terms dominate.
We count 18 bytes per token-feature per layer (2 LayerNorms reading and writing, 2 residual
adds reading two inputs and writing one, GELU reading and writing 4*d); the published values
imply about 16.7, a 5-6% difference at l <= 512 that the 12-head rows (where softmax
dominates) keep under 5%. That group is asserted at 7%.
"""

from pathlib import Path

import pandas as pd
import pytest

from dse.spec.workload import Scenario, TransformerSpec
from dse.workloads.common import PAPER
from dse.workloads.transformer import lower

DATA = Path(__file__).resolve().parent.parent / "data" / "validation"
END_TO_END = pd.read_csv(DATA / "case_study_transformer_end_to_end.csv")
PER_LAYER = pd.read_csv(DATA / "case_study_transformer_per_layer.csv")
TOL = 0.05
GMOPS_ROUNDING = 0.05e9


def _model(architecture: str, layers: int, d: int, heads: int) -> TransformerSpec:
    return TransformerSpec.model_validate({
        "name": "case-study", "kind": "transformer", "source": "Kim et al. 2023 Table 1",
        "architecture": architecture, "layers": layers, "d_model": d, "heads": heads,
        "d_ff": 4 * d, "vocab": 30522, "max_positions": 512,
        "scenarios": {"s": {"phase": "inference", "seq_in": 128}}})


MODELS = {
    "BERT-Base": _model("encoder", 12, 768, 12),
    "BERT-Large": _model("encoder", 24, 1024, 16),
    "GPT-2": _model("decoder", 12, 768, 12),
    "BERT-Base hypothetical 4 heads": _model("encoder", 12, 768, 4),
}
GROUPS = {"MHA (projections)": "attention_proj", "MHA (act-to-act matmuls)": "attention_act",
          "FFN (projections)": "ffn", "Other": "other"}


def _table(model: str, seq: int):
    if model == "GPT-2":  # generate all l tokens one at a time with a KV cache, no prompt
        scenario = Scenario(phase="decode", batch=1, seq_in=0, seq_out=seq, precision="int8")
    else:
        scenario = Scenario(phase="inference", batch=1, seq_in=seq, precision="int8")
    return lower(MODELS[model], scenario, PAPER)


@pytest.mark.parametrize("row", END_TO_END.to_dict("records"),
                         ids=lambda r: f"{r['model']}-{r['seq_len']}")
def test_end_to_end(row):
    table = _table(row["model"], int(row["seq_len"]))
    flops = table.total_flops
    mops = table.total_bytes()["total"]
    if row["model"] == "BERT-Large":  # the published count's missing d x d projection
        seq, d, layers = row["seq_len"], 1024, 24
        flops -= 2 * seq * d**2 * layers
        mops -= (d**2 + 2 * seq * d) * layers
        assert table.total_flops / (row["gflops"] * 1e9) - 1 == pytest.approx(0.07, abs=0.02)
    assert flops == pytest.approx(row["gflops"] * 1e9, rel=TOL)
    assert abs(mops - row["gmops"] * 1e9) <= max(TOL * row["gmops"] * 1e9, GMOPS_ROUNDING)
    assert flops / mops == pytest.approx(row["arithmetic_intensity_flops_per_byte"], rel=TOL)


PER_LAYER_ROWS = [r for r in PER_LAYER.to_dict("records")
                  if r["model"].split(" (")[0] in MODELS]


@pytest.mark.parametrize("row", PER_LAYER_ROWS,
                         ids=lambda r: f"{r['model'][:14]}-{r['seq_len']}-{r['operator']}")
def test_per_layer_operator_groups(row):
    table = _table(row["model"].split(" (")[0], int(row["seq_len"]))
    if row["operator"] != "Total":
        table = table.select(table.group == GROUPS[row["operator"]])
    flops, mops = table.total_flops, table.total_bytes()["total"]
    tol = 0.07 if ("4 heads" in row["model"] and row["operator"] == "Other") else TOL
    assert flops / mops == pytest.approx(row["arithmetic_intensity"], rel=tol)
    gflops = str(row["gflops"])
    if "as printed" in gflops:
        # Published as "30" GFLOPs, a typo (the row's total implies 0.30); checked by AI above.
        assert flops == pytest.approx(0.30e9, rel=TOL)
        return
    assert flops == pytest.approx(float(gflops) * 1e9, rel=TOL)
    # MOPs follow from the published FLOPs and intensity (the printed GMOPs have 2-3 digits);
    # the implied value carries the rounding of the printed FLOPs (e.g. "0.07" is +-7%).
    implied = float(gflops) * 1e9 / row["arithmetic_intensity"]
    decimals = len(gflops.split(".")[1]) if "." in gflops else 0
    rounding = 0.5 * 10.0**-decimals / float(gflops)
    assert mops == pytest.approx(implied, rel=tol + rounding)
