"""op_times against the plain reference kept in the package (dse.model.reference).

`reference_op_times` is the original [N, I, L]-array formulation of the roofline, the
specification the fast version must reproduce: same times, compute terms, traffic, bound
codes and missing-rate flags, on the inputs `evaluate` really builds (captured by wrapping
`op_times` during `dse.evaluate`)."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest
from conftest import op_times_calls, without_engine_limits

import dse
from dse.model.operators import KV, G, OpTimes, W, expanded
from dse.model.performance import op_times
from dse.model.reference import reference_op_times

EVALUATE = importlib.import_module("dse.model.evaluate")
PERFORMANCE = importlib.import_module("dse.model.performance")


# --- real inputs --------------------------------------------------------------------------

CHIPS = ("h100-sxm", "a100-sxm-80gb", "groq-lpu", "gh200")
WORKLOADS = {
    "llama2-70b-decode": ("llama2-70b", dict(phase="decode", batch=1, seq_in=1024,
                                             seq_out=128, precision="bf16", chips=2, tp=2)),
    "llama2-7b-prefill-w4a16": ("llama2-7b", dict(phase="prefill", precision="w4a16")),
    "mixtral-serve-64": ("mixtral-8x7b", dict(phase="serve", batch=64)),
    "bert-large-inference-8": ("bert-large", dict(phase="inference", batch=8)),
    "gemm-4096": ("gemm:4096x4096x4096", {}),
}


def _overrides(chip: str, n: int) -> dict[str, np.ndarray] | None:
    """n designs varying the unit count, the L2 (else first level) capacity and the first
    DRAM (else last level) bandwidth."""
    if n == 1:
        return None
    spec = dse.load_hardware(chip)
    names = [lv.name for lv in spec.memory]
    kinds = [lv.kind for lv in spec.memory]
    cap = names.index("L2") if "L2" in names else 0
    bw = kinds.index("dram") if "dram" in kinds else len(names) - 1
    rng = np.random.default_rng(1)
    return {
        "compute.units": rng.integers(max(spec.compute.units // 2, 1),
                                      spec.compute.units * 2 + 1, n),
        f"memory[{cap}].capacity": spec.memory[cap].capacity * rng.uniform(0.25, 4.0, n),
        f"memory[{bw}].bandwidth": spec.memory[bw].bandwidth * rng.uniform(0.5, 3.0, n),
    }


def _capture(chip: str, workload: str, n: int) -> list[tuple]:
    """The (batch, ops, home, act_home) of every op_times call one evaluate() makes."""
    wl_name, kwargs = WORKLOADS[workload]
    return op_times_calls(lambda: dse.evaluate(dse.load_hardware(chip),
                                               dse.load_workload(wl_name),
                                               overrides=_overrides(chip, n), **kwargs))


def _assert_same(got: OpTimes, want: OpTimes) -> None:
    for name in ("time", "compute", "traffic"):
        g, w = getattr(got, name), getattr(want, name)
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, err_msg=name)
    assert got.bound.shape == want.bound.shape
    np.testing.assert_array_equal(got.bound, want.bound)
    np.testing.assert_array_equal(got.missing_rate, want.missing_rate)


@pytest.mark.parametrize("n", [1, 40])
@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize("chip", CHIPS)
def test_matches_reference(chip, workload, n):
    for batch, ops, home, act_home in _capture(chip, workload, n):
        assert batch.n == n
        _assert_same(op_times(batch, ops, home, act_home),
                     reference_op_times(batch, ops, home, act_home))


@pytest.fixture(scope="module")
def decode_inputs():
    return _capture("h100-sxm", "llama2-70b-decode", 40)[0]


@pytest.fixture(scope="module")
def prefill_inputs():
    return _capture("gh200", "llama2-7b-prefill-w4a16", 40)[0]


def test_per_design_operator_arrays(decode_inputs, prefill_inputs):
    """Operator quantities given per design ([N, I], [N, I, C], [N, I, 4]) broadcast like
    their [I] forms; rows that differ give each design its own operators."""
    for batch, ops, home, act_home in (decode_inputs, prefill_inputs):
        n = batch.n

        def per_design(a: np.ndarray, n: int = n) -> np.ndarray:
            return np.broadcast_to(a, (n, *a.shape)).copy()

        wide = dataclasses.replace(
            ops, flops=per_design(ops.flops), read=per_design(ops.read),
            written=per_design(ops.written), shape=per_design(ops.shape),
            onchip=per_design(ops.onchip), launches=per_design(ops.launches))
        _assert_same(op_times(batch, wide, home, act_home),
                     reference_op_times(batch, ops, home, act_home))

        # Design k runs operators scaled by k + 1 (batch size, say): row k of the result is
        # the reference's row k on those operators.
        scale = np.arange(1, n + 1, dtype=float)
        varied = dataclasses.replace(
            ops, flops=ops.flops[None, :] * scale[:, None],
            read=ops.read[None] * scale[:, None, None],
            written=ops.written[None] * scale[:, None, None],
            shape=ops.shape[None] * np.array([1.0, 0.0, 0.0, 0.0]) * scale[:, None, None]
            + ops.shape[None] * np.array([0.0, 1.0, 1.0, 1.0]),
            onchip=ops.onchip[None, :] * scale[:, None])
        got = op_times(batch, varied, home, act_home)
        for k in (0, 1, n // 2, n - 1):
            ops_k = dataclasses.replace(
                ops, flops=varied.flops[k], read=varied.read[k], written=varied.written[k],
                shape=varied.shape[k], onchip=varied.onchip[k])
            want = reference_op_times(batch, ops_k, home, act_home)
            for name in ("time", "compute", "traffic"):
                np.testing.assert_allclose(getattr(got, name)[k], getattr(want, name)[k],
                                           rtol=1e-12, atol=0, err_msg=name)
            np.testing.assert_array_equal(got.bound[k], want.bound[k])
            assert got.missing_rate[k] == want.missing_rate[k]


def test_home_per_design_only(decode_inputs):
    """Homes given as [N, L] (the same for every operator) broadcast over the operators."""
    batch, ops, home, act_home = decode_inputs
    flat = {k: v[:, 0, :] if v.ndim == 3 else v for k, v in home.items()}
    _assert_same(op_times(batch, ops, flat, act_home),
                 reference_op_times(batch, ops, flat, act_home))


@pytest.mark.parametrize("variant", ["no_vector", "no_rate", "no_tile", "overhead",
                                     "varying_l1", "all_dram"])
def test_unusual_chips(decode_inputs, prefill_inputs, variant):
    """Chips without vector units, without any rate for the precision (missing_rate), without
    a tile or register file, with a large fixed cost per operator, with a per-unit level
    that varies per design, and with every activation in DRAM."""
    for batch, ops, home, act_home in (decode_inputs, prefill_inputs):
        n = batch.n
        if variant == "no_vector":
            batch = dataclasses.replace(batch, vector_peak={})
        elif variant == "no_rate":
            batch = dataclasses.replace(batch, vector_peak={}, matrix_peak={
                "fp64": batch.matrix_peak["fp64"]})
        elif variant == "no_tile":
            batch = dataclasses.replace(batch, tile=None, register_file=None)
        elif variant == "overhead":
            batch = dataclasses.replace(batch, op_overhead=np.linspace(1e-6, 1e-3, n))
        elif variant == "varying_l1":
            cap = batch.unit_capacity.copy()
            cap[:, 0] *= np.linspace(0.01, 100.0, n)
            batch = dataclasses.replace(batch, unit_capacity=cap)
        elif variant == "all_dram":
            act_home = np.full_like(act_home, batch.levels - 1)
        got = op_times(batch, ops, home, act_home)
        want = reference_op_times(batch, ops, home, act_home)
        _assert_same(got, want)
        if variant == "no_rate":
            assert got.missing_rate.all()
        if variant == "overhead":
            assert (got.bound == -1).any()


def _subset(inputs: tuple, rows: list[int]) -> tuple:
    """The op_times inputs of the operators `rows` only."""
    batch, ops, home, act_home = inputs
    sub = dataclasses.replace(ops, **{f.name: getattr(ops, f.name)[rows]
                                      for f in dataclasses.fields(ops)
                                      if getattr(ops, f.name) is not None})
    return batch, sub, {k: v[:, rows] if v.ndim == 3 else v for k, v in home.items()}, \
        act_home[:, rows]


def test_operator_subsets(decode_inputs, prefill_inputs):
    """Every operator alone, and tables where the weight, KV-cache and activation-only
    operators mix in other proportions (e.g. every weight reader also writes the KV cache,
    beside KV-only readers)."""
    for inputs in (decode_inputs, prefill_inputs):
        ops = inputs[1]
        names = ops.name.tolist()
        subsets = [[i] for i in range(len(names))]
        pick = [n for n in ("k_proj", "attn_score", "attn_norm", "v_proj", "attn_value")
                if n in names]
        subsets += [[names.index(n) for n in pick], [names.index(n) for n in pick[:2]],
                    list(reversed(range(len(names))))]
        for rows in subsets:
            _assert_same(op_times(*_subset(inputs, rows)),
                         reference_op_times(*_subset(inputs, rows)))


# --- per-design operators (a per-design batch size: serving with batch "max") --------------

# Per-operator ndim of each ChipOps field; one more axis in front means per design.
_OP_NDIM = {"read": 2, "written": 2, "shape": 2}
_PER_LEVEL = ("resident", "per_unit")  # [L] batch fields (not per design)


def _design(inputs: tuple, k: int) -> tuple:
    """The op_times inputs of design k alone: a one-design batch and its own operators."""
    batch, ops, home, act_home = inputs
    one = {}
    for f in dataclasses.fields(batch):
        v = getattr(batch, f.name)
        if isinstance(v, dict):
            v = {key: a[k:k + 1] if isinstance(a, np.ndarray) else a for key, a in v.items()}
        elif isinstance(v, np.ndarray) and v.ndim and f.name not in _PER_LEVEL:
            v = v[k:k + 1]
        one[f.name] = v
    one["n"] = 1
    ops = expanded(ops)  # distinct tables (ChipOps.rows) given per design
    own = {f.name: getattr(ops, f.name)[k] if getattr(ops, f.name).ndim
           > _OP_NDIM.get(f.name, 1) else getattr(ops, f.name) for f in dataclasses.fields(ops)
           if getattr(ops, f.name) is not None}
    return (dataclasses.replace(batch, **one), dataclasses.replace(ops, **own),
            {c: h[k:k + 1] for c, h in home.items()}, act_home[k:k + 1])


def _reference_per_design(inputs: tuple) -> OpTimes:
    """The reference, design by design (it takes per-operator quantities only)."""
    rows = [reference_op_times(*_design(inputs, k)) for k in range(inputs[0].n)]
    return OpTimes(**{f.name: np.concatenate([getattr(r, f.name) for r in rows])
                      for f in dataclasses.fields(OpTimes)})


def _capture_serve_max(chip: str, workload: str, n: int) -> tuple:
    """The op_times inputs of a serve evaluate with batch "max" on n designs whose outermost
    memory capacity varies (so does the batch that fits, hence the operators)."""
    spec = dse.load_hardware(chip)
    last = len(spec.memory) - 1
    overrides = _overrides(chip, n) or {}
    overrides[f"memory[{last}].capacity"] = \
        spec.memory[last].capacity * np.random.default_rng(2).uniform(0.3, 2.5, n)
    calls = op_times_calls(lambda: dse.evaluate(
        spec, without_engine_limits(dse.load_workload(workload)), phase="serve", batch="max",
        seq_in=1024, seq_out=128, precision="fp8", overrides=overrides))
    assert len(calls) == 1
    return calls[0]


@pytest.mark.parametrize(("chip", "workload"), [("h100-sxm", "llama3-8b"),
                                                ("a100-sxm-80gb", "mixtral-8x7b"),
                                                ("gh200", "llama3-8b")])
def test_serve_max_matches_reference(chip, workload):
    """Serving with batch "max": flops, bytes and shapes differ by design ([N, I], [N, I, C],
    [N, I, 4]); every design's row is the reference's on its own operators."""
    inputs = _capture_serve_max(chip, workload, 200)
    ops = inputs[1]
    assert ops.flops.ndim == 2 and ops.shape.ndim == 3
    assert len(np.unique(ops.flops, axis=0)) > 100  # the designs do run different operators
    _assert_same(op_times(*inputs), _reference_per_design(inputs))


@pytest.mark.parametrize(("chip", "workload"), [("h100-sxm", "llama3-8b"),
                                                ("a100-sxm-80gb", "mixtral-8x7b")])
def test_distinct_tables_match_per_design_operators(chip, workload):
    """Designs that share batches run the distinct tables lowered once per batch
    (ChipOps.rows): the times, terms, traffic and bounds are those of the same operators
    given per design, bit for bit, and the reference's design by design."""
    spec = dse.load_hardware(chip)
    last = len(spec.memory) - 1
    overrides = _overrides(chip, 300) or {}
    overrides[f"memory[{last}].capacity"] = spec.memory[last].capacity * \
        np.random.default_rng(3).choice([0.4, 0.7, 1.0, 1.6, 2.5], 300)
    calls = op_times_calls(lambda: dse.evaluate(
        spec, without_engine_limits(dse.load_workload(workload)), phase="serve", batch="max",
        seq_in=1024, seq_out=128, precision="fp8", overrides=overrides))
    batch, ops, home, act_home = calls[0]
    assert ops.rows is not None and ops.flops.shape[0] <= 5 < batch.n  # tables, not designs
    got = op_times(batch, ops, home, act_home)
    plain = op_times(batch, expanded(ops), home, act_home)
    for f in dataclasses.fields(OpTimes):
        np.testing.assert_array_equal(getattr(got, f.name), getattr(plain, f.name), f.name)
    _assert_same(got, _reference_per_design(calls[0]))


@pytest.fixture(scope="module")
def serve_inputs():
    return _capture_serve_max("h100-sxm", "llama3-8b", 200)


def test_serve_max_in_blocks(serve_inputs, monkeypatch):
    """Blocks of designs that differ in which operators have weight, KV-cache, gradient and
    onchip bytes, and in which GEMM dimensions are the same for all their designs: each block
    works them out for itself."""
    monkeypatch.setattr(PERFORMANCE, "BLOCK", 64)  # 200 designs: 4 blocks of 50
    batch, ops, home, act_home = serve_inputs
    n = batch.n
    names = ops.name.tolist()
    first = np.arange(n) < 75  # the first block and half the second
    read, written, onchip = ops.read.copy(), ops.written.copy(), ops.onchip.copy()
    read[first, names.index("q_proj"), W] = 0.0  # weights from the second block on
    written[~first, names.index("k_proj"), KV] = 0.0  # KV-cache writes in the first two
    read[first, names.index("attn_norm"), G] = 1e6  # gradients in the first two
    written[~first, names.index("ffn_norm"), G] = 2e6  # and in the last two
    onchip[first] = 0.0  # onchip bytes from the second block on
    shape = ops.shape.copy()
    shape[first, names.index("o_proj"), 1] += 3.0  # n per design in the first two blocks
    shape[~first, names.index("up_proj"), 2] += 5.0  # k per design in the last two
    inputs = (batch, dataclasses.replace(ops, read=read, written=written, onchip=onchip,
                                         shape=shape), home, act_home)
    _assert_same(op_times(*inputs), _reference_per_design(inputs))
    _assert_same(op_times(*serve_inputs), _reference_per_design(serve_inputs))


def test_every_shape_column_per_design(prefill_inputs):
    """Each of m, n, k and the batch count varying by design alone, and all together
    (weight-only quantization: n, k and the count set the dequantization work)."""
    batch, ops, home, act_home = prefill_inputs
    n = batch.n
    assert (ops.wdtype == "int4").any()
    scale = np.linspace(0.3, 7.0, n)[:, None]
    for cols in ([0], [1], [2], [3], [0, 1, 2, 3]):
        shape = np.broadcast_to(ops.shape, (n, *ops.shape.shape)).copy()
        shape[:, :, cols] = np.round(shape[:, :, cols] * scale[:, :, None])
        inputs = (batch, dataclasses.replace(ops, shape=shape), home, act_home)
        _assert_same(op_times(*inputs), _reference_per_design(inputs))
