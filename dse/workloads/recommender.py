"""Recommender (DLRM-style) lowering: a scenario becomes an operator table.

For B samples of P user-item pairs each (M = B x P pairs):
- one gather per table (kind `embedding`): M x lookups rows read from the embedding tables
  (each row rounded up to the DRAM access granularity), their indices read, the pooled sum
  (M x dim) written; pooling is M x lookups x dim additions on the vector units;
- the bottom MLP on the dense features and the top MLP: one GEMM per layer (M x width x
  previous width; bias and activation fused into the GEMM's epilogue, as library kernels
  do);
- the interaction: `dot`, a batched GEMM of the F feature vectors with themselves (M
  products of F x d by d x F; the F(F-1)/2 distinct dot products are kept), or `cross`,
  DCNv2 layers x_{l+1} = x0 * (U (V x_l) + b) + x_l: two GEMMs per layer when low-rank
  (M x rank x D, M x D x rank), one when full (M x D x D), and the elementwise update.
The tables are the `embeddings` tensor class: placed in memory like weights, but read by
gathers whose accesses are skewed (dse.model.hitrate), so the share of lookups each level
serves differs from the share of the tables it stores.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.spec.workload import (
    RECOMMENDER_WORKS,
    RecommenderSpec,
    RecOptimizer,
    RecScenario,
    Skew,
)
from dse.workloads.common import DEFAULT, PRECISIONS, Counting
from dse.workloads.optable import DTYPE_BYTES, Facts, Gather, Num, OpRow, OpTable
from dse.workloads.sharding import Shard, critical_chip, plan_groups

WORKS = RECOMMENDER_WORKS  # the shapes of work (dse.phases.WORKS) it lowers
INDEX_BYTES = 4.0  # int32 row indices (MLPerf DLRM-v2 harnesses; TorchRec's int64: 8)
# The backward sorts the (row index, position) pairs of a batch by row before it reduces the
# gradients of repeated rows (FBGEMM's TBE backward, a CUB radix sort): one pass per 8 bits
# of the row index (CUB's onesweep digit), each reading and writing both 4-byte keys.
SORT_DIGIT_BITS = 8.0
SORT_PAIR_BYTES = 2 * INDEX_BYTES
# Optimizer state per embedding row of `dim` elements, fp32 (FBGEMM's TBE optimizers): SGD
# none; Adagrad one accumulator per element; row-wise Adagrad one per row; Adam two moments
# per element.
STATE_BYTES: dict[str, Callable[[int], float]] = {
    "sgd": lambda dim: 0.0, "adagrad": lambda dim: 4.0 * dim,
    "adagrad_rowwise": lambda dim: 4.0, "adam": lambda dim: 8.0 * dim}
# FLOPs per element of an optimizer update beyond the gradient's add (Adagrad: square,
# accumulate, sqrt, divide, multiply-add ~5; Adam ~10; SGD: the multiply-add 1).
UPDATE_FLOPS = {"sgd": 1.0, "adagrad": 5.0, "adagrad_rowwise": 3.0, "adam": 10.0}


def zipf_exponent(skew: Skew) -> float:
    """The Zipf exponent of a table's skew; a measured curve's best fit: the exponent whose
    hottest-rows share (H(k, a) / H(R, a), taken for a large table, where it tends to the
    fraction f^(1-a)) matches the curve's points in least squares, over a in [0, 2]."""
    if skew.alpha is not None:
        return float(skew.alpha)
    assert skew.curve is not None
    f = np.array([p.rows for p in skew.curve])
    h = np.array([p.hits for p in skew.curve])
    grid = np.linspace(0.0, 2.0, 401)
    # share of the hottest fraction f of a very large table: f^(1-a) (a < 1), 1 + ln f / ln R
    # (a = 1) and ~1 (a > 1) -- evaluated at R = 1e7 rows through the finite sums' limit
    rows = 1e7
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = np.maximum(f[None, :] * rows, 1.0)
        a = grid[:, None]
        num = np.where(np.abs(a - 1) < 1e-9, np.log(k) + 0.5772,
                       (k ** (1 - a) - 1) / (1 - a) + 1)
        den = np.where(np.abs(a - 1) < 1e-9, np.log(rows) + 0.5772,
                       (rows ** (1 - a) - 1) / (1 - a) + 1)
        share = np.clip(num / den, 0.0, 1.0)
    err = ((share - h[None, :]) ** 2).sum(axis=1)
    return float(grid[int(np.argmin(err))])


def _gemm(name: str, group: str, m: Num, n: int, k: int, ab: float, wb: float, dtype: str,
          wdtype: str, bias: bool = True) -> OpRow:
    weights = (k * n + (n if bias else 0)) * wb
    return OpRow(name, "gemm", group, 1.0, 2.0 * m * n * k,
                 read={"activations": m * k * ab, "weights": weights},
                 written={"activations": m * n * ab}, m=m, n=n, k=k, batch=1.0,
                 stage="forward", dtype=dtype, wdtype=wdtype)


def dense_parameters(spec: RecommenderSpec) -> int:
    """Parameters of the MLPs and the interaction (weights and biases)."""
    total, prev = 0, spec.dense_features
    for w in spec.bottom_mlp:
        total += prev * w + w
        prev = w
    it, d = spec.interaction, _cross_width(spec)
    if it.kind == "cross":
        total += it.layers * ((2 * d * it.rank + d) if it.rank else (d * d + d))
    prev = _top_input(spec)
    for w in spec.top_mlp:
        total += prev * w + w
        prev = w
    return total


def _cross_width(spec: RecommenderSpec) -> int:
    """D: the concatenated feature vector (bottom MLP output and every pooled embedding)."""
    dense = spec.bottom_mlp[-1] if spec.bottom_mlp else spec.dense_features
    return dense + sum(t.count * t.dim for t in spec.tables)


def _features(spec: RecommenderSpec) -> int:
    """F: feature vectors meeting in a dot interaction (the tables and the dense one)."""
    return spec.n_tables + (1 if spec.bottom_mlp or spec.dense_features else 0)


def _top_input(spec: RecommenderSpec) -> int:
    if spec.interaction.kind in ("cross", "cat"):
        return _cross_width(spec)
    # DLRM: the dense vector concatenated with the F(F-1)/2 distinct dot products
    f = _features(spec)
    dense = spec.bottom_mlp[-1] if spec.bottom_mlp else spec.dense_features
    return dense + f * (f - 1) // 2


def lower(spec: RecommenderSpec, scenario: RecScenario, counting: Counting = DEFAULT,
          batch: object = None, chips: int = 1) -> OpTable:
    """The operator table of `scenario` on one of `chips` chips (`batch`: [N] samples per
    chip per design, else the scenario's per chip). With several chips the dense layers are
    data-parallel (each chip its own samples) and the tables are sharded over the chips
    (`plan_shards`): a chip gathers from its shards for every chip's samples, and an
    all-to-all returns the pooled rows to the chips whose samples they belong to (the chip
    with the most gather traffic is modelled)."""
    training = phases.get(scenario.phase).trains
    w, a, _, dtype = PRECISIONS[scenario.precision]
    wb = counting.element_bytes or DTYPE_BYTES[w]
    ab = counting.element_bytes or DTYPE_BYTES[a]
    eb = counting.element_bytes or DTYPE_BYTES[scenario.embedding_precision or w]
    samples = np.asarray(batch, dtype=float) if batch is not None else float(scenario.batch)
    m = samples * (scenario.pairs or spec.sample.pairs)
    opt = scenario.optimizer or RecOptimizer()
    rows, gathers, stored, pooled = _embedding_rows(spec, scenario, m, chips, eb, ab, dtype,
                                                    training)
    rows += _dense_rows(spec, m, ab, wb, dtype, w)
    dense = dense_parameters(spec)
    weights = dense * wb
    evals = 0.0  # forward-only pairs evaluated per pair trained
    if training:
        rows.extend(_backward([r for r in rows if r.kind != "embedding"], ab))
        if scenario.evaluation is not None:
            evals = scenario.evaluation.pairs / scenario.evaluation.every
            for r in rows:  # the evaluation passes run the forward operators again
                if r.stage == "forward":
                    r.count *= 1.0 + evals
        # the dense optimizer: fp32 master weights and state beside the compute copy
        master = 4.0 if wb < 4 else 0.0
        st = STATE_BYTES[opt.dense](1) + master
        rows.append(OpRow("optimizer.dense", "residual", "optimizer", 1.0,
                          dense * (1 + UPDATE_FLOPS[opt.dense]),
                          read={"weights": dense * (wb + st), "gradients": dense * 4.0},
                          written={"weights": dense * (wb + st)}, stage="optimizer",
                          dtype="fp32"))  # after the gradients' all-reduce, as training's
        weights = dense * (wb + st)
    facts = Facts(phase=scenario.phase, batch=samples, seq_in=1.0,
                  resident={"weights": weights, "embeddings": stored},
                  gathers=gathers,
                  exchange=((2.0 + evals) if training else 1.0) * pooled if chips > 1
                  else 0.0,
                  reduce=dense * 4.0 if training and chips > 1 else 0.0)
    return OpTable.from_rows(rows, facts)


def _embedding_rows(spec: RecommenderSpec, scenario: RecScenario, m: Num, chips: int,
                    eb: float, ab: float, dtype: str, training: bool
                    ) -> tuple[list[OpRow], dict[str, Gather], float, Num]:
    """The gathers of the table shards this chip holds (the busiest chip's, with several),
    for every chip's pairs, and in training their backward: (rows, the gathers' tables,
    bytes stored, bytes of pooled rows made for the other chips' pairs)."""
    rows: list[OpRow] = []
    gathers: dict[str, Gather] = {}
    if chips > 1:
        held = dict(critical_chip(plan_groups(spec, chips, eb, scenario.sharding)).shards)
    else:
        held = {Shard(i, 1): t.count for i, t in enumerate(spec.tables)}
    m_all = m * chips  # every chip's pairs come through this chip's shards
    stored = 0.0
    pooled: Num = 0.0  # bytes of pooled rows this chip makes for the other chips' pairs
    opt = scenario.optimizer or RecOptimizer()
    for sh, count in held.items():
        t = spec.tables[sh.table]
        name = f"gather.{t.name}" + (f".{'part' if sh.cut == 'row' else 'cols'}{sh.parts}"
                                     if sh.parts > 1 else "")
        dim, n_rows = sh.dim(spec), sh.rows(spec)
        looked = m_all * sh.lookups(spec)
        state = STATE_BYTES[opt.embeddings](dim) if training else 0.0
        if training and opt.embeddings == "adagrad_rowwise" and sh.cut == "column":
            state = 4.0  # each column piece keeps its own row-wise accumulator (TorchRec)
        alpha = zipf_exponent(spec.skew_of(t))
        row = dim * eb
        gathers[name] = Gather(n_rows, alpha, row + state, sh.lookups(spec), pieces=(row,))
        rows.append(OpRow(
            name, "embedding", "embedding", float(count), looked * dim,
            read={"embeddings": looked * row, "activations": looked * INDEX_BYTES},
            written={"activations": m_all * dim * ab}, stage="forward", dtype=dtype))
        if training:
            # The backward: the lookups sorted by row, the pooled gradients summed per
            # distinct row, and the optimizer's read-modify-write of each distinct row and
            # its state once. The table's bytes are stated per lookup here; the model keeps
            # the distinct rows' share of them (dse.model.distinct, via Gather.distinct: a
            # row looked up many times is updated once). The optimizer's arithmetic is
            # counted per lookup, an upper bound (it runs on the vector units, far from
            # bounding the update).
            rmw = looked * (row + state)
            passes = math.ceil(math.log2(max(n_rows, 2.0)) / SORT_DIGIT_BITS)
            sort = looked * passes * SORT_PAIR_BYTES
            gathers[f"{name}.update"] = Gather(n_rows, alpha, row + state, sh.lookups(spec),
                                               pieces=(row, state) if state else (row,),
                                               table=name, distinct=looked)
            rows.append(OpRow(
                f"{name}.update", "embedding", "embedding", float(count),
                looked * dim * (1 + UPDATE_FLOPS[opt.embeddings]),
                read={"embeddings": rmw, "activations": m_all * dim * ab
                      + looked * INDEX_BYTES + sort},
                written={"embeddings": rmw, "activations": sort}, stage="backward",
                dtype="fp32"))
        stored += count * n_rows * (row + state)
        pooled += count * m_all * dim * ab
    return rows, gathers, stored, pooled


def _dense_rows(spec: RecommenderSpec, m: Num, ab: float, wb: float, dtype: str, w: str
                ) -> list[OpRow]:
    """The forward of the dense layers: bottom MLP, feature interaction, top MLP."""
    rows: list[OpRow] = []
    prev = spec.dense_features
    for i, width in enumerate(spec.bottom_mlp):
        rows.append(_gemm(f"bottom_mlp.{i}", "bottom_mlp", m, width, prev, ab, wb, dtype, w))
        prev = width
    it = spec.interaction
    if it.kind == "cat":
        pass  # the concatenation is the pooled outputs side by side: no work of its own
    elif it.kind == "dot":
        f, d = _features(spec), spec.tables[0].dim
        rows.append(OpRow("interaction.dot", "gemm", "interaction", 1.0, 2.0 * m * f * f * d,
                          read={"activations": m * f * d * ab},
                          written={"activations": m * f * (f - 1) / 2 * ab},
                          m=f, n=f, k=d, batch=m, stage="forward", dtype=dtype))
    else:
        d = _cross_width(spec)
        if it.rank:
            rows.append(_gemm("cross.v", "interaction", m, it.rank, d, ab, wb, dtype, w,
                              bias=False))
            rows.append(_gemm("cross.u", "interaction", m, d, it.rank, ab, wb, dtype, w))
            for r in rows[-2:]:
                r.count = float(it.layers)
        else:
            rows.append(_gemm("cross.w", "interaction", m, d, d, ab, wb, dtype, w))
            rows[-1].count = float(it.layers)
        rows.append(OpRow("cross.update", "residual", "interaction", float(it.layers),
                          3.0 * m * d, read={"activations": 3 * m * d * ab},
                          written={"activations": m * d * ab}, stage="forward", dtype=dtype))
    prev = _top_input(spec)
    for i, width in enumerate(spec.top_mlp):
        rows.append(_gemm(f"top_mlp.{i}", "top_mlp", m, width, prev, ab, wb, dtype, w))
        prev = width
    return rows


def _backward(forward: list[OpRow], ab: float) -> list[OpRow]:
    """The backward of the dense operators: each GEMM's input gradient and weight gradient
    (twice its forward FLOPs, one row of the same shape), each elementwise operator once
    more; gradients of the weights written in fp32."""
    out = []
    for r in forward:
        if r.kind == "gemm":
            wgrad = r.read.get("weights", 0.0) / max(DTYPE_BYTES.get(r.wdtype, 2.0), 0.5) * 4.0
            out.append(OpRow(
                f"{r.name}.backward", r.kind, r.group, r.count, 2.0 * r.flops,
                read={"activations": r.written.get("activations", 0.0)
                      + r.read.get("activations", 0.0), "weights": r.read.get("weights", 0.0)},
                written={"activations": r.read.get("activations", 0.0), "gradients": wgrad},
                m=r.m, n=r.n, k=r.k, batch=r.batch, stage="backward", dtype=r.dtype,
                wdtype=r.wdtype))
        else:
            out.append(OpRow(f"{r.name}.backward", r.kind, r.group, r.count, r.flops,
                             read=dict(r.written) | {"activations": r.read.get(
                                 "activations", 0.0) + r.written.get("activations", 0.0)},
                             written={"activations": r.read.get("activations", 0.0)},
                             stage="backward", dtype=r.dtype))
    del ab
    return out


def check(spec: RecommenderSpec, sc: RecScenario, tp: int, pp: int
          ) -> tuple[list[DseError], list[str]]:
    """Recommenders shard their tables over every chip and run their dense layers
    data-parallel (`lower`): no tensor or pipeline split."""
    return [DseError(f"{v}: a recommender is not split tensor- or pipeline-parallel: its "
                     "tables are sharded over all the chips (--chips) and its MLPs run "
                     "data-parallel", field=name, domain="execution", value=v, inline=True)
            for name, v in (("tp", tp), ("pp", pp)) if v > 1], []
