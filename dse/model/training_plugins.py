"""The training step's plug-ins of the one pass (dse.model.passes.Plugin): the collectives a
training step adds to the plan's (pipeline sends both ways per micro-batch; data-parallel
gradient reduction and parameter gathers by ZeRO stage; context parallelism's K/V exchange;
expert parallelism's all-to-alls), their overlap with compute, and the pipeline bubble and
the activations' compression as columns of the step. Collectives are found by their typed
role (dse.model.parallel.ROLES), operators by their kind, never by name. No I/O.

    overlap    the gradient reduction runs under the last micro-batch's backward and the
               parameter all-gather under the first micro-batch's forward (Megatron's
               overlap_grad_reduce / overlap_param_gather, DDP's buckets); ZeRO-3's gathers
               under the micro-batch's own forward, and its backward's under the backward
               (FSDP prefetch, layer by layer); ring attention's K and
               V exchange under the layer's attention: only the excess shows;
    bubble     (pp - 1) / (v x m) of the micro-batches' compute (Narayanan et al., SC21,
               Sec. 2.2: 1F1B and its interleaved form with v chunks per rank).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

import numpy as np

from dse.model.attention import OnStack
from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.model.operators import ChipOps
from dse.model.parallel import Collectives, collectives_of
from dse.model.stages import PIPELINE, Step, row_sums, spent
from dse.spec.workload import Scenario, Training, TransformerSpec, parameter_counts
from dse.workloads.common import PRECISIONS
from dse.workloads.optable import DTYPE_BYTES, TENSOR_CLASSES
from dse.workloads.training import TRAINING_PRECISIONS, state_bytes

# The stages of a training step's operators, in the order their times are summed.
STAGES = ("forward", "recompute", "backward")
# The operator kinds of a layer's attention core, under which ring attention passes its K
# and V blocks (the context-parallel exchange's overlap window).
ATTENTION_CORE = ("attention_score", "softmax", "attention_value")


def training_collectives(coll: Collectives, wl: TransformerSpec, sc: Scenario,
                          ex: Execution, m: float) -> Collectives:
    """The tensor-parallel collectives of the table (already counted per micro-batch), the
    pipeline sends of every micro-batch both ways, and the data-parallel, context-parallel
    and expert-parallel ones of the execution `ex` as it runs (its micro-batch and ZeRO
    stage set); each with its role (dse.model.parallel.ROLES)."""
    names, kinds, stages = list(coll.name), list(coll.kind), list(coll.stage)
    roles, strides = list(coll.role), list(coll.strides())
    sends = coll.having("pipeline_send")
    if ex.pp > 1 and not sends.any():  # its count is scaled per micro-batch below
        raise ValueError(f"training with pp = {ex.pp}: the table's collectives have no "
                         f"pipeline_send (the pipeline's sends); found: "
                         f"{', '.join(roles) or 'none'}")
    groups, sizes, counts = list(coll.group), list(coll.nbytes.T), list(coll.count.T)
    t = sc.training or Training()
    mb, zero = ex.micro_batch or 1, ex.zero or 0  # the setup the step runs (planner's choice)
    for j in np.flatnonzero(sends):
        # activations forward, their gradients back: once per chunk boundary, v per
        # micro-batch with v chunks per rank (SC21 Sec. 2.2.2: "the amount of
        # communication also increases by v"); the received shards' all-gather over the tp
        # group (parallel._collectives) only without sequence parallelism, whose boundary
        # activations stay split over the tp ranks
        gathered = 0.0 if kinds[j] == "all_gather" and ex.sequence_parallel else 1.0
        counts[j] = counts[j] * 2.0 * m * (ex.virtual_stages or 1) * gathered
    prec = TRAINING_PRECISIONS[sc.precision]
    p_b, g_b, _ = state_bytes(prec, t.optimizer, t.optimizer_state)
    pc = parameter_counts(wl)
    routed = pc["ffn"] * wl.moe.experts / (wl.moe.experts + wl.moe.shared_experts) \
        if wl.moe else 0.0
    # one chip's parameters before ZeRO: expert parallelism splits the routed experts
    params = (pc["total"] - routed + routed / ex.ep) / (ex.tp * ex.pp)
    act = DTYPE_BYTES[PRECISIONS[sc.precision][1]]
    layers = math.ceil(wl.layers / ex.pp)  # the stage's
    tokens = mb * sc.seq_in / ex.cp  # one rank's, per micro-batch
    # (name, role, kind, stage, group, stride, bytes, count) of the cp, ep and dp
    # collectives; the stride is the group's rank distance in Megatron-Core's order
    # tp-cp-ep-dp-pp (parallel.ranks_per_domain): cp ranks tp apart, ep ranks tp x cp apart
    ranks = []
    if ex.cp > 1:
        # ring attention: every rank gathers the whole sequence's K and V of its heads each
        # layer (forward), and the gradients of K and V go back (backward, reduce-scatter)
        kv = 2 * mb * sc.seq_in * wl.n_kv_heads / min(ex.tp, wl.n_kv_heads) \
            * wl.d_head * act
        ranks += [("context.kv_all_gather", "context_kv_gather", "all_gather", "forward",
                   ex.cp, ex.tp, kv, layers * m),
                  ("context.kv_reduce_scatter", "context_kv_scatter", "reduce_scatter",
                   "backward", ex.cp, ex.tp, kv, layers * m)]
    if ex.ep > 1 and wl.moe is not None:
        # each MoE layer sends its tokens to their experts' ranks and back (dispatch and
        # combine), forward and backward
        routed_bytes = tokens * wl.moe.top_k * wl.d_model * act / ex.tp
        ranks += [("experts.all_to_all", "expert_dispatch", "all_to_all", "forward",
                   ex.ep, ex.tp * ex.cp, routed_bytes, 2 * layers * m),
                  ("experts.all_to_all.backward", "expert_dispatch_backward", "all_to_all",
                   "backward", ex.ep, ex.tp * ex.cp, routed_bytes, 2 * layers * m)]
    if ex.dp > 1:  # every setup lists all five (count 0 where unused): setups compare
        # the data-parallel group (cp folded in: ex.dp counts the cp ranks): all the ranks
        # of one tp rank and stage, tp apart
        sharded, dp, tp = (1.0 if zero >= 1 else 0.0), ex.dp, ex.tp
        ranks += [("gradients.all_reduce", "gradient_reduce", "all_reduce", "backward", dp,
                   tp, params * g_b, 1 - sharded),
                  ("gradients.reduce_scatter", "gradient_reduce_scatter", "reduce_scatter",
                   "backward", dp, tp, params * g_b, sharded),
                  ("parameters.all_gather", "parameter_all_gather", "all_gather",
                   "optimizer", dp, tp, params * p_b, sharded),
                  ("parameters.gather", "parameter_prefetch", "all_gather", "forward", dp,
                   tp, params * p_b, m if zero == 3 else 0.0),
                  ("parameters.gather.backward", "parameter_prefetch_backward", "all_gather",
                   "backward", dp, tp, params * p_b, m if zero == 3 else 0.0)]
    for name, role, kind, stage, group, stride, size, count in ranks:
        for into, value in ((names, name), (roles, role), (strides, float(stride)),
                            (kinds, kind), (stages, stage), (groups, float(group)),
                            (sizes, np.asarray(size, dtype=float)),
                            (counts, np.asarray(count, dtype=float))):
            into.append(value)
    return collectives_of(names, kinds, stages, groups, sizes, counts, roles, strides)


def times_by_stage(st: Step, row: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """[N] time of the step's operators of each stage (forward, recompute, backward), the
    operators' time over their repeats worked out once for all three. `row`: [J] the
    step's counts where they are the same for every design."""
    i = len(st.ops.name)
    ran = spent(st.time[:, :i], st.count[:, :i], None if row is None else row[:i])
    return {s: row_sums(np.where(st.ops.stage == s, ran, 0.0)) for s in STAGES}


def training_step(st: Step, db: DesignBatch, ex: Execution, m: float,
                  row: np.ndarray | None = None) -> Step:
    """The timed step as training runs it: collectives overlapped with compute, then the
    bubble and compression columns (`overlapped`, `with_extra`), the operators' time per
    stage worked out once for both (the overlap changes collectives' times only). `row`:
    [J] the step's counts where they are the same for every design (None: per design)."""
    per_stage = times_by_stage(st, row)
    return with_extra(overlapped(st, m, per_stage, row, tensor_overlap(db, ex)), db, ex,
                      st.ops, m, per_stage)


def tensor_overlap(db: DesignBatch, ex: Execution) -> int:
    """The tp degree whose collectives the designs' stack pipelines with the GEMMs (0: none
    overlapped): the stack's `overlap.tensor`, with tp > 1 and sequence parallelism on
    (Megatron-Bridge's gating of tp_comm_overlap)."""
    on = isinstance(db.attention, OnStack) and db.attention.tensor_overlap
    return ex.tp if on and ex.tp > 1 and ex.sequence_parallel is True else 0


def overlapped(st: Step, m: float, per_stage: dict[str, np.ndarray] | None = None,
               row: np.ndarray | None = None, tensor: int = 0) -> Step:
    """Collectives hidden under compute show only their excess (see the module docstring):
    the data-parallel gradient reduction under the last micro-batch's backward, the
    parameter all-gather under the first micro-batch's forward, ZeRO-3's gathers under the
    pass they serve (a micro-batch's forward, its backward), and context parallelism's K and
    V exchange under the layer's attention (ring attention passes the blocks while it
    computes on the ones it has); with `tensor` (the tp degree, 0: off) the tensor-parallel
    collectives under the step's GEMMs (`hide_tensor`).
    `per_stage`: `times_by_stage(st)` where the caller has it; `row`: as there."""
    per_stage = times_by_stage(st, row) if per_stage is None else per_stage
    time = st.time.copy()
    hidden = hide(time, st.ops, st.role, m, per_stage)
    if tensor:
        hidden = hide_tensor(time, st.count, st.ops, st.role, tensor) or hidden
    if not hidden:  # the step as it was (the same total)
        return st
    return dataclasses.replace(st, time=time, total=row_sums(spent(time, st.count, row)))


def hide_tensor(time: np.ndarray, count: np.ndarray, ops: ChipOps, role: np.ndarray | None,
                tp: int) -> bool:
    """The tensor-parallel collectives' time in `time` ([N, J]) cut to what their GEMMs
    leave exposed, in place, where the stack pipelines them with the GEMMs they feed or
    follow (Transformer Engine's userbuffers, NeMo's and Megatron-Bridge's
    `tp_comm_overlap`: NeMo Framework user guide, "Communication Overlap"): the exchange is
    split into tp chunks, each under a chunk of the GEMM, so one chunk in tp stays
    exposed, and whatever the GEMMs' time cannot cover. Per step, over all its GEMMs
    (kind gemm) and tensor collectives: exposed = max(C - W, C / tp); whether any was cut."""
    i = len(ops.name)
    cols = np.flatnonzero(role == "tensor") if role is not None else np.zeros(0, np.intp)
    cols = cols[cols >= i]
    gemms = np.flatnonzero(ops.kind == "gemm")
    if not cols.size or not gemms.size:
        return False
    spent_on = np.broadcast_to(count, time.shape)
    comm = (time[:, cols] * spent_on[:, cols]).sum(axis=1)
    window = (time[:, gemms] * spent_on[:, gemms]).sum(axis=1)
    exposed = np.maximum(comm - window, comm / tp)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(comm > 0, exposed / comm, 1.0)
    time[:, cols] *= share[:, None]
    return True


def hide(time: np.ndarray, ops: ChipOps, role: np.ndarray | None, m: float,
         per_stage: Mapping[str, np.ndarray]) -> bool:
    """Each overlapped collective's time in `time` ([N, J]: the operators', then the
    collectives' columns; `role` [J]) cut to its excess over its window, in place (see
    `overlapped`); whether any collective has a window."""
    i = len(ops.name)

    def of(stage: str) -> np.ndarray:  # [N] one micro-batch's operators of `stage`
        if not np.any(ops.stage == stage):  # the collective would show whole: no window
            raise ValueError(f"overlap window of the data-parallel collectives: no {stage} "
                             "operator in the training step")
        return per_stage[stage] / m

    def fwd() -> np.ndarray:  # one micro-batch's forward
        return of("forward")

    def bwd() -> np.ndarray:
        return of("backward")

    def attention(stage: str) -> np.ndarray:  # [N] one instance of a layer's attention
        cols = {k: np.flatnonzero((ops.kind == k) & (ops.stage == stage))
                for k in ATTENTION_CORE}
        missing = [k for k, c in cols.items() if not c.size]
        if missing:  # the exchange would show whole: a window of 0 s
            raise ValueError(f"overlap window of the context-parallel exchange: no "
                             f"{stage} operator of kind {', '.join(missing)} in the "
                             "training step")
        return sum(time[:, c[:1]].sum(axis=1) for c in cols.values())

    # the window each role's collectives hide under (roles: dse.model.parallel.ROLES)
    windows: dict[str, Callable[[], np.ndarray]] = {
        "gradient_reduce": bwd, "gradient_reduce_scatter": bwd, "parameter_all_gather": fwd,
        "parameter_prefetch": fwd, "parameter_prefetch_backward": bwd,
        "context_kv_gather": lambda: attention("forward"),
        "context_kv_scatter": lambda: attention("backward")}
    hidden_any = False
    for name, window in windows.items():
        cols = np.flatnonzero(role == name) if role is not None else np.zeros(0, np.intp)
        cols = cols[cols >= i]
        if cols.size:
            hidden = window()
            time[:, cols] = np.maximum(time[:, cols] - hidden[:, None], 0.0)
            hidden_any = True
    return hidden_any


def with_extra(st: Step, db: DesignBatch, ex: Execution, ops: ChipOps, m: float,
               per_stage: dict[str, np.ndarray] | None = None) -> Step:
    """The pipeline bubble and the activations' compression as two more columns.
    `per_stage`: `times_by_stage(st)` where the caller has it."""
    bubble, squeeze = extra_columns(db, ex, ops, m, times_by_stage(st) if per_stage is None
                                    else per_stage)
    extra = {"pipeline.bubble": bubble, "activations.compress": squeeze}
    n = db.n
    add = np.stack(list(extra.values()), axis=1)  # [N, 2]
    return dataclasses.replace(
        st, names=np.concatenate([st.names, np.array(list(extra), dtype=object)]),
        precision=np.concatenate([st.precision, np.array(["", "fp32"], dtype=object)]),
        matrix=np.concatenate([st.matrix, np.zeros(2, dtype=bool)]),
        link_bytes=np.concatenate([st.link_bytes, np.zeros((*np.shape(st.link_bytes)[:-1], 2))],
                                  axis=-1),
        count=np.concatenate([st.count, np.ones((n, 2))], axis=1),
        flops=np.concatenate([st.flops, np.zeros((n, 1)),
                              (ex.compression.flops_per_byte if ex.compression else 0.0)
                              * np.zeros((n, 1))], axis=1),
        time=np.concatenate([st.time, add], axis=1),
        bound=np.concatenate([st.bound, np.tile(np.array([PIPELINE, 0], dtype=st.bound.dtype),
                                                (n, 1))], axis=1),
        total=st.total + row_sums(add),
        role=None if st.role is None else np.concatenate([st.role,
                                                          np.array(["", ""], dtype=object)]))


def extra_columns(db: DesignBatch, ex: Execution, ops: ChipOps, m: float,
                  per_stage: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """[N] the pipeline bubble, (pp - 1) / (v x m) of the operators' time, and the
    compression of the stored activations on the vector units, s."""
    bubble = np.asarray((ex.pp - 1) / ((ex.virtual_stages or 1) * m)
                        * sum(per_stage[s] for s in STAGES)) if ex.pp > 1 else np.zeros(db.n)
    squeeze = np.zeros(db.n)
    if ex.compression is not None:
        written = ops.written[..., TENSOR_CLASSES.index("activations")]
        stored = np.sum(np.broadcast_to(written * ops.count, (db.n, len(ops.name)))
                        * (ops.stage == "forward"), axis=1)
        rate = db.vector_peak.get("fp32", db.matrix_peak.get("fp32", np.full(db.n, np.inf)))
        squeeze = ex.compression.flops_per_byte * stored / rate
    return bubble, squeeze
