"""Time per operator: a roofline over the whole memory hierarchy, for N designs at once.

For operator i on design n:

    time[n, i] = overlap(max(compute[n, i], on-chip bytes[n, i, l] / bandwidth[n, l]),
                         max(off-chip bytes[n, i, l] / bandwidth[n, l]))
                 + launches[i] * op_overhead[n]

- compute = matrix FLOPs / (matrix peak x achievable fraction x tile utilization), or the
  vector units' rate when that is faster (a GEMV at batch 1 wastes 127/128 of a 128-row
  array), + vector FLOPs / vector peak + dequantization work of weight-only-quantized
  weights on the vector units;
- bytes at level l = the traffic crossing level l toward the compute units: compulsory
  traffic of every tensor stored at l or beyond, plus the re-reads a tiled GEMM makes when
  the level inside l cannot hold its operands (`crossings`);
- bandwidth = the level's peak x its achieved fraction (a measured property of the chip);
- overlap: the work on the die and the off-chip traffic overlap imperfectly (kernel.overlap);
  the matrix rate also carries the thread blocks' wave share and the alignment rule
  (kernel.issue_factor).
The largest term is the operator's bound ("overhead" when the fixed cost exceeds them
all). Everything is [N designs] x [I operators] x [L levels] array arithmetic (computed on
operators x designs blocks, see op_times); no I/O.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dse.model.attention import attention_factor
from dse.model.batch import DesignBatch
from dse.model.blocks import BLOCK, WORK_ELEMENTS, Field, scratch
from dse.model.blocks import blocks as design_blocks
from dse.model.blocks import shaped as work_rows
from dse.model.kernel import DEQUANT_SLOTS, issue_factor, overlap, rate_of, rate_table
from dse.model.kernel_terms import Classes, Through
from dse.model.operators import (
    MATRIX,
    PLACED_ROLES,
    TRANSIENT_ROLES,
    ChipOps,
    OpTimes,
    take_ops,
)
from dse.model.tiling import Gemms, Side, crossings, same_side, tile_sides


def op_times(batch: DesignBatch, ops: ChipOps, home: dict[str, np.ndarray],
             act_home: np.ndarray) -> OpTimes:
    """Time of every operator instance on every design (see `_op_times`). Designs whose
    native tile or register file differ (a study varying them) are timed in groups of equal
    ones: the tile shapes every GEMM, so the per-operator work is worked out per group."""
    if not isinstance(batch.tile, np.ndarray) and not isinstance(batch.register_file,
                                                                 np.ndarray):
        return _op_times(batch, ops, home, act_home)
    n = batch.n
    tiles = batch.tile if isinstance(batch.tile, np.ndarray) else \
        np.tile(np.array(batch.tile or (np.nan,) * 3, dtype=float), (n, 1))
    rf = np.broadcast_to(np.asarray(batch.register_file if batch.register_file is not None
                                    else np.nan, dtype=float), (n,))
    keys, group = np.unique(np.column_stack([tiles, rf]), axis=0, return_inverse=True)
    parts = []
    for g, key in enumerate(keys):
        idx = np.flatnonzero(group.ravel() == g)
        sub = dataclasses.replace(
            batch.take(idx), tile=None if np.isnan(key[0]) else (int(key[0]), int(key[1]),
                                                                 int(key[2])),
            register_file=None if np.isnan(key[3]) else float(key[3]))
        parts.append((idx, _op_times(sub, take_ops(ops, idx, n),
                                     {c: h[idx] for c, h in home.items()}, act_home[idx])))
    i, lv = len(ops.name), batch.levels
    out = OpTimes(time=np.empty((n, i)), compute=np.empty((n, i)),
                  traffic=np.empty((n, i, lv)), bound=np.empty((n, i), dtype=np.int8),
                  missing_rate=np.empty(n, dtype=bool))
    for idx, part in parts:
        for field in ("time", "compute", "traffic", "bound", "missing_rate"):
            getattr(out, field)[idx] = getattr(part, field)
    return out


def _op_times(batch: DesignBatch, ops: ChipOps, home: dict[str, np.ndarray],
              act_home: np.ndarray) -> OpTimes:
    """Time of every operator instance on every design of one native tile. The hot kernel:
    hand-blocked and in place for speed, so longer than a function should be; its plain
    specification is dse.model.reference.reference_op_times, which the tests hold it to.

    home: per placed class, [N, L] share stored at each level, or [N, I, L]
    where it differs by operator (a cache that holds the decode working set; [N, 1, L]
    broadcasts); act_home: [N, I] level index where each operator's activations live.
    Operator quantities (flops, read, written, onchip, shape, launches) may be per operator
    ([I], [I, C], [I, 4]) or per design and operator ([N, I], [N, I, C], [N, I, 4]).

    Computed for blocks of designs, level by level, on operators x designs arrays updated
    in place; a per-design operator quantity is copied once per block into such an array
    (`_Field`), a per-operator one broadcasts as [I, 1], and so does a GEMM dimension that
    is the same for every design of the block (`_Gemms`). The bytes crossing level l are

        sum over placed classes c of (read_c x cross_c,l + written_c) x through_c,l
        + [act_home >= l] x sum over the other classes of (read x cross_l + written)
        (+ onchip at level 0)

    with cross_l the crossings of the GEMM operand the class is (`optable.CLASSES`: "b",
    the weights and KV cache, re-read ceil(M / T_l) times; "a", the activations,
    ceil(N / T_l); "": once; `crossings`) and through_c,l the share of class c stored at
    level l or beyond (`home[c]`). A placed class's term is computed for the operators that
    have its bytes only (`Classes`, per block where the bytes are per design), a transient
    class's where it has bytes, onchip for the operators that have it. A level whose terms
    all equal the level's above (same tile sides, no share stored there, the same
    activation mask) reuses its bytes. The running maximum of compute and bytes / bandwidth
    is the roof, the first largest term the bound."""
    n_, lv = batch.n, batch.levels
    n_ops = len(ops.kind)
    kinds, dtypes, wdtypes = ops.kind.tolist(), ops.dtype.tolist(), ops.wdtype.tolist()
    is_matrix = np.array([k in MATRIX for k in kinds], dtype=bool)
    blocks = design_blocks(n_, min(BLOCK, max(64, WORK_ELEMENTS // max(n_ops, 1))))
    block = max((d.stop - d.start for d in blocks), default=0)

    # Rates per precision ([P, N]) and where each operator finds its own.
    precisions = sorted(set(dtypes))
    m_tab, v_tab, gv_tab = (np.ascontiguousarray(t.T) for t in rate_table(batch, precisions))
    rate_row = None if len(precisions) == 1 else \
        np.array([precisions.index(d) for d in dtypes], dtype=np.intp)
    fp32_vector = rate_of(batch.vector_peak, "fp32", n_)
    fp32_vector = np.where(np.isnan(fp32_vector), v_tab.min(axis=0) if v_tab.size else np.nan,
                           fp32_vector)
    vector_rows = np.flatnonzero(~is_matrix)
    slots = np.array([DEQUANT_SLOTS.get(wd, 0.0) if m and d not in ("int8", "int4") else 0.0
                      for wd, d, m in zip(wdtypes, dtypes, is_matrix.tolist(), strict=True)])
    dequant_rows = np.flatnonzero(slots)
    plain_rows = np.flatnonzero(slots == 0)

    # What is the same for every design is worked out once; the rest per block (it reads
    # the block's bytes and shapes, which its copies then find in the caches).
    tile = batch.one_tile()
    shape, r, w = ops.shape, ops.read, ops.written
    # Thread-block waves and the alignment rule scale the matrix rate ([N, I]; None: 1).
    # distinct tables (ChipOps.rows): design n runs table tables[n]; the operator
    # quantities are gathered per block, and what holds over all tables is worked out once
    tables = ops.rows
    issue = issue_factor(batch, shape, dtypes, is_matrix, ops.kind, tables)
    attention = attention_factor(batch, ops)  # the stack's attention kernels (None: GEMM's)
    if attention is not None:
        issue = attention if issue is None else issue * attention
    # The GEMMs over all designs: per operator, or over the distinct tables (a dimension the
    # same in all of them is fixed for every block); else per block.
    gemms = Gemms.of(shape, tile, is_matrix, slots) if shape.ndim == 2 or tables is not None \
        else None
    dim_fields = [Field(f"dim{j}", shape[..., j], block, tables) for j in range(3)]
    classes = Classes.of(r, w) if (r.ndim == 2 and w.ndim == 2) or tables is not None \
        else None
    onchip_rows = None if ops.onchip.ndim == 2 and tables is None else \
        np.flatnonzero(ops.onchip.any(axis=0) if ops.onchip.ndim == 2 else ops.onchip != 0)
    flops = Field("flops", ops.flops, block, tables)
    placed_fields = [(Field(f"r_{name}", r[..., c], block, tables),
                      Field(f"w_{name}", w[..., c], block, tables))
                     for c, name, _ in PLACED_ROLES]
    transient_fields = [(Field(f"r_{name}", r[..., c], block, tables),
                         Field(f"w_{name}", w[..., c], block, tables))
                        for c, name, _ in TRANSIENT_ROLES]
    onchip = Field("onchip", ops.onchip, block, tables)
    act_home = np.asarray(act_home)
    sides = tile_sides(batch)
    bandwidth = np.ascontiguousarray(batch.bandwidth.T)  # [L, N]
    overhead_on = bool(np.any(batch.op_overhead)) and bool(np.any(ops.launches))
    launches = Field("launches", ops.launches, block, tables)

    # The outputs are stored operator-major ([I, N], [L, I, N]), as the blocks compute them,
    # and handed on as their transposed views ([N, I], [N, I, L]): a block's rows are
    # copied out whole, not transposed element by element.
    time_t, compute_t = np.empty((n_ops, n_)), np.empty((n_ops, n_))
    traffic_t = np.empty((lv, n_ops, n_))
    bound_t = np.empty((n_ops, n_), dtype=np.int8)
    missing = np.zeros(n_, dtype=bool)
    work = scratch("work", 7 * n_ops * block, np.float64)
    # Levels on the die come first (innermost); the first off-chip level's index.
    first_off = int(batch.on_chip.sum())
    mixed_work = scratch("mixed", n_ops * block, np.float64)
    part_work = scratch("part", n_ops * block, np.float64)
    hit_work = scratch("hit", n_ops * block, np.bool_)
    code_work = scratch("code", n_ops * block, np.int8)

    for d in blocks:
        b = d.stop - d.start
        out, mem, roof, comp, tmp, off_r, on_r = work_rows(work, 7, n_ops, b)
        off_r.fill(0.0)
        on_r.fill(0.0)
        hit, code = work_rows(hit_work, n_ops, b), work_rows(code_work, n_ops, b)
        if gemms is None:
            gm = Gemms.of(shape[d], tile, is_matrix, slots)
        elif tables is not None and shape.ndim == 3:  # the dequantization work, per table
            gm = dataclasses.replace(gemms, dequant=gemms.dequant[:, tables[d]])
        else:
            gm = gemms
        cl = classes or Classes.of(r[d] if r.ndim == 3 else r, w[d] if w.ndim == 3 else w)
        mixed = cl.mixed
        mixed_out = work_rows(mixed_work, len(mixed), b)
        on_rows = onchip_rows if onchip_rows is not None \
            else np.flatnonzero(ops.onchip[d].any(axis=0))

        # The per-design GEMM dimensions of this block (max(dim, 1)); the tile utilization
        # (computed in `roof`, with `mem` for a second per-design factor), then the
        # dimensions zeroed for the operators that are not GEMMs.
        dim_b = [None if col is not None else f.at(d)
                 for col, f in zip(gm.fixed, dim_fields, strict=True)]
        for x in dim_b:
            if x is not None:
                np.maximum(x, 1.0, out=x)
        util = gm.util
        if util is None:
            for j, t in enumerate(tile or ()):  # (util is None only with a tile)
                f, rows = gm.factors[j], gm.factor_rows[j]
                if f is None:  # the factor differs by design, as does the dimension
                    col_b = dim_b[j]
                    assert col_b is not None
                    f = roof if util is None else mem
                    np.divide(col_b, t, out=f)
                    np.ceil(f, out=f)
                    f *= t
                    np.divide(col_b, f, out=f)
                elif rows is None or not rows.size:  # (rows is None only where f is)
                    continue  # 1 for every GEMM
                elif util is not None and util is roof and 2 * rows.size < n_ops:
                    roof[rows] *= f[rows]
                    continue
                util = f if util is None else np.multiply(util, f, out=roof)
        for x in dim_b[:2]:
            if x is not None and vector_rows.size:
                x[vector_rows] = 0.0
        m_dim = gm.m_dim if dim_b[0] is None else dim_b[0]
        n_dim = gm.n_dim if dim_b[1] is None else dim_b[1]
        # fixed for every design (Gemms) or per design (dim_b): one of the two is set, and
        # so is the utilization (Gemms.util, else a factor that differs by design)
        assert m_dim is not None and n_dim is not None and util is not None
        # GEMM dimension along which each role's operand is re-read: the B operand (weights,
        # KV cache) once per row of output tiles (M), the A operand once per column (N).
        role_dim = {"b": m_dim, "a": n_dim}

        # Compute time. A small GEMM runs on whichever engine is faster: the under-used
        # array or the vector units. A chip without vector units has only the array (its
        # vector work runs there).
        m_rate, v_rate, gv_rate = m_tab[:, d], v_tab[:, d], gv_tab[:, d]
        if rate_row is not None:
            m_rate, v_rate, gv_rate = m_rate[rate_row], v_rate[rate_row], gv_rate[rate_row]
        np.multiply(m_rate, util, out=comp)
        if issue is not None:
            comp *= issue[d].T
        if batch.vector_peak:  # a GEMM on the vector units reaches their achievable share
            np.maximum(comp, gv_rate, out=comp)
        if vector_rows.size:
            comp[vector_rows] = v_rate[vector_rows] if rate_row is not None else v_rate
        flops_b = flops.at(d)
        np.divide(flops_b, comp, out=comp)
        with np.errstate(divide="ignore", invalid="ignore"):
            if dequant_rows.size:
                comp[dequant_rows] += gm.dequant / fp32_vector[d]
            zero = 0.0 / fp32_vector[d]  # no dequantization work at a missing fp32 rate: NaN
            if np.isnan(zero).any():
                comp[plain_rows] += zero
        if not np.isfinite(comp).all():
            missing[d] = np.any(np.isnan(comp) & (flops_b > 0), axis=0)
            np.nan_to_num(comp, copy=False, nan=np.inf)
        np.copyto(compute_t[:, d], comp)

        # Bytes per level and the roofline terms, outermost level first: the shares stored
        # at l or beyond accumulate inwards, and the bound (the first largest term: compute,
        # then the innermost level) is kept by letting a term replace the running maximum
        # when it is at least as large.
        act_at = act_home[d]
        act_lo, act_hi = (int(act_at.min()), int(act_at.max())) if act_at.size else (0, -1)
        act_at = act_at.T
        transient = [(fr.at(d), role, fw.at(d))
                     for (fr, fw), (_, _, role), has in zip(transient_fields, TRANSIENT_ROLES,
                                                            cl.transient, strict=True) if has]
        placed = [(fr.at(d, rows), role_dim[role][rows] if role else None, role,
                   fw.at(d, rows) if writes else None, Through(home[name][d], rows), at)
                  for (fr, fw), (_, name, role), rows, at, writes in zip(
                      placed_fields, PLACED_ROLES, cl.rows, cl.at, cl.writes, strict=True)
                  if rows.size]
        roles = {role for _, _, role, _, _, _ in placed if role}
        above: tuple[Side, Side] | None = None  # the tile sides at the level above
        for level in reversed(range(lv)):
            side_a, side_b = sides[level]
            if isinstance(side_a, np.ndarray) and isinstance(side_b, np.ndarray):
                side_a, side_b = side_a[d], side_b[d]
            side = {"a": side_a, "b": side_b}
            new = [through.add(level) for _, _, _, _, through, _ in placed]
            same_act = above is not None and (level < act_lo or level > act_hi) \
                and same_side(side_a, above[0])
            same_mixed = above is not None and not any(new) and all(
                same_side(side[role], above[0 if role == "a" else 1]) for role in roles)
            if not (same_act and same_mixed):  # else: the bytes of the level above, in out
                if level > act_hi or not transient:
                    out.fill(0.0)
                else:
                    # sum over the transient classes of read x crossings + written
                    act = None
                    for read_b, role, write_b in transient:
                        term = read_b * crossings(n_dim if role == "a" else m_dim,
                                                  side[role]) if role else read_b
                        act = term + write_b if act is None else act + term + write_b
                    assert act is not None  # `transient` is not empty
                    if level > act_lo:  # only where the activations live at l or beyond
                        np.multiply(act, np.greater_equal(act_at, level, out=hit), out=out)
                    else:
                        np.copyto(out, np.broadcast_to(act, out.shape))
                if mixed.size:
                    if not same_mixed:
                        # sum over the placed classes of (read x crossings + written) x the
                        # share stored at l or beyond, for the operators that have such bytes
                        # (x the share is skipped where it is 1 for every operator: exact).
                        mixed_out.fill(0.0)
                        for read_b, dim, role, wrote, through, at in placed:
                            part = work_rows(part_work, len(at), b)
                            if role and dim is not None:  # (a role's operands have a dim)
                                np.multiply(read_b, crossings(dim, side[role]), out=part)
                            else:
                                np.copyto(part, np.broadcast_to(read_b, part.shape))
                            if wrote is not None:
                                part += wrote
                            if not through.ones():
                                part *= through.value
                            mixed_out[at] += part
                    out[mixed] += mixed_out
            if level == 0 and on_rows.size:
                if on_rows.size == n_ops:
                    out += onchip.at(d)
                else:
                    out[on_rows] += onchip.at(d, on_rows)
            np.copyto(traffic_t[level, :, d], out)
            np.divide(out, bandwidth[level, d], out=mem)
            if level == lv - 1:
                np.fmax(mem, 0.0, out=roof)  # fmax: NaN (0 / 0 bandwidth) is no traffic
                code.fill(level + 1)
            else:
                np.greater_equal(mem, roof, out=hit)
                np.copyto(code, level + 1, where=hit)
                np.fmax(roof, mem, out=roof)
            if level < first_off:
                np.fmax(on_r, mem, out=on_r)
            elif level == first_off:
                np.copyto(off_r, roof)  # the largest off-chip term
            above = (side_a, side_b)
        np.greater_equal(comp, roof, out=hit)
        np.copyto(code, 0, where=hit)
        # The roof: compute and the on-chip terms (one pipeline) against the off-chip one,
        # overlapping imperfectly near the ridge (`overlap`).
        np.fmax(on_r, comp, out=on_r)
        overlap(on_r, off_r, out=roof)
        if overhead_on:  # the fixed cost per launch, when it exceeds every term
            overhead = np.multiply(launches.at(d), batch.op_overhead[d], out=tmp)
            np.greater(overhead, roof, out=hit)
            np.copyto(code, -1, where=hit)
            roof += overhead
        np.copyto(time_t[:, d], roof)
        np.copyto(bound_t[:, d], code)
    return OpTimes(time=time_t.T, compute=compute_t.T, traffic=traffic_t.transpose(2, 1, 0),
                   bound=bound_t.T, missing_rate=missing)
