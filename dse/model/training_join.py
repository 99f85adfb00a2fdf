"""The training step's `step` stage in one go, for a kept plan whose repeats are the same for
every design: the operators' and collectives' times joined, the overlapped collectives cut
to their excess and the bubble and compression columns added (what stages.step, then
training_plugins.overlapped and with_extra give, to the bit), each [N, J + 2] array made
once instead of three times. No I/O.
"""

from __future__ import annotations

import numpy as np

from dse.model.batch import DesignBatch
from dse.model.execution import Execution
from dse.model.nonfinite import check_step_time
from dse.model.operators import ChipOps, OpTimes
from dse.model.parallel import Collectives, collective_volume
from dse.model.stages import INTERCONNECT, PIPELINE, Step, row_sums, spent
from dse.model.training_plugins import extra_columns, hide, hide_tensor, tensor_overlap

EXTRA = ("pipeline.bubble", "activations.compress")  # the columns training adds


def joined(db: DesignBatch, ops: ChipOps, coll: Collectives, t: OpTimes, t_coll: np.ndarray,
           ex: Execution, m: float, row: np.ndarray) -> Step:
    """The training step of `ops` and `coll` timed as `t` and `t_coll` ([N, C]), run as `ex`
    with `m` micro-batches; `row` [J]: the repeats of each operator and collective, the same
    for every design."""
    n, i, nc = db.n, len(ops.name), len(coll)
    j = i + nc
    time = np.empty((n, j + 2))
    time[:, :i] = t.time
    time[:, i:j] = t_coll
    ran = spent(t.time, row[:i], row[:i])
    per_stage = _PerStage(ops, ran)
    role = np.concatenate([np.full(i, "", dtype=object), coll.role.astype(object)])
    hide(time[:, :j], ops, role, m, per_stage)
    tensor = tensor_overlap(db, ex)
    if tensor:
        hide_tensor(time[:, :j], row, ops, role, tensor)
    per = spent(time[:, :j], row, row)
    total = row_sums(per)
    no_link = ~np.all(np.isfinite(t_coll), axis=1)
    names = np.concatenate([ops.name, coll.name])
    check_step_time(names, per, total, t.missing_rate | no_link)
    bubble, squeeze = extra_columns(db, ex, ops, m, per_stage)
    add = np.stack([bubble, squeeze], axis=1)  # [N, 2]
    time[:, j:] = add
    count = np.empty((n, j + 2))
    count[:] = np.concatenate([row, np.ones(2)])
    flops = np.zeros((n, j + 2))
    flops[:, :i] = ops.flops
    bound = np.empty((n, j + 2), dtype=t.bound.dtype)  # (as stages.step: int8 codes)
    bound[:, :i] = t.bound
    bound[:, i:j] = INTERCONNECT
    bound[:, j:] = (PIPELINE, 0)
    return Step(
        ops=ops, names=np.concatenate([names, np.array(EXTRA, dtype=object)]),
        precision=np.concatenate([ops.dtype.astype(object), np.full(nc, "", dtype=object),
                                  np.array(["", "fp32"], dtype=object)]),
        matrix=np.concatenate([ops.is_matrix, np.zeros(nc + 2, dtype=bool)]),
        link_bytes=_link_bytes(n, ops, coll), count=count, flops=flops,
        traffic=t.traffic, compute=t.compute, time=time, bound=bound,
        total=total + row_sums(add), missing_rate=t.missing_rate, no_link=no_link,
        role=np.concatenate([role, np.array(["", ""], dtype=object)]))


class _PerStage(dict[str, np.ndarray]):
    """training_plugins.times_by_stage, each stage's sum worked out when first read (a
    step without pipeline parallelism or compression reads forward and backward only, and
    those only for the collectives that overlap)."""

    def __init__(self, ops: ChipOps, ran: np.ndarray):
        super().__init__()
        self.ops, self.ran = ops, ran

    def __missing__(self, stage: str) -> np.ndarray:
        out = self[stage] = row_sums(np.where(self.ops.stage == stage, self.ran, 0.0))
        return out


def _link_bytes(n: int, ops: ChipOps, coll: Collectives) -> np.ndarray:
    """[J + 2] (or [N, J + 2]) bytes each chip sends per instance: nothing for operators and
    the two added columns, each collective's volume (as stages.step)."""
    out = np.zeros(np.shape(ops.count))
    if len(coll):
        volume = collective_volume(coll)
        if np.ndim(out) != np.ndim(volume):
            out, volume = (np.broadcast_to(a, (n, np.shape(a)[-1])) for a in (out, volume))
        out = np.concatenate([out, volume], axis=-1)
    return np.concatenate([out, np.zeros((*np.shape(out)[:-1], 2))], axis=-1)
