"""Compiled evaluation of the ``systolic`` model: SCALE-Sim's report, one mapping per loop
iteration.

The fast path of `SystolicModel.stats` / ``evaluate``. What is counted is defined in
`accelmap.costmodels.systolic` (module docstring, ``_stats_one`` and its helpers); this
module follows the batched numpy path (``_stats_batch``, the executable reference) row by
row, with its integer and floating-point arithmetic (int64 products, float64 window
formulas), so that both give the same `SystolicStats` bit for bit. The conversion to
`Metrics` (``_to_metrics``) is shared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from numba.extending import register_jitable

from accelmap._typing import IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels._loopnest_kernel import _threads
from accelmap.costmodels.engines import run_blocks
from accelmap.workloads.problem import Problem

__all__ = ["SystolicConsts", "systolic_consts", "stats_batch"]

_M, _N, _K, _B = 0, 1, 2, 3
_OS, _WS, _IS = 0, 1, 2
_FACTORS, _ORDER, _KEEP, _FANOUT, _MODEL = 2, 3, 4, 5, 9
# ints columns of the output
(_DF, _RC, _CC, _UR, _UC, _FR, _FC, _FOLDS, _COMPUTE, _STALL, _TOTAL, _SR0, _SR1, _SW, _DR0, _DR1,
 _DW, _REASON, _LEVEL) = range(19)


@dataclass(frozen=True, slots=True, eq=False)
class SystolicConsts:
    """(problem, arch, layout) as arrays: ``ints`` = array level, PE level, rows, cols,
    tensors (ifmap, filter, ofmap), class sizes (m, n, k, b), d_tot (ifmap, filter), overlap
    (ifmap, filter); ``flts`` = windows (3), MACs, DRAM read bandwidth, DRAM write bandwidth
    (nan = unlimited)."""

    bounds: IntArray
    holds: np.ndarray
    fan_xy: IntArray
    dim_class: IntArray
    full: IntArray
    coef: IntArray
    used: np.ndarray
    ints: IntArray
    flts: np.ndarray

    def as_tuple(self) -> tuple:
        return (self.bounds, self.holds, self.fan_xy, self.dim_class, self.full, self.coef, self.used, self.ints,
                self.flts)


def systolic_consts(problem: Problem, arch: Arch, layout) -> SystolicConsts:  # noqa: ANN001
    from accelmap.costmodels.systolic import _distinct_words, _operand_words, _overlaps

    dim_class = np.array(layout.dim_class, dtype=np.int64)
    full = np.where(dim_class == _B, 1, problem.bounds).astype(np.int64)
    d_tot, overlap = [], []
    for o in (0, 1):
        t = layout.tensor[o]
        coef, used = problem.coefficients[t], problem.rank_used[t]
        # a padded operand fetches its existing words only (as the numpy path)
        d_tot.append(_operand_words(problem, t, full, int(_distinct_words(coef, used, full[None, :])[0])))
        overlap.append(int(_overlaps(coef, used, full)))
    lv = arch.levels[0]
    rbw = lv.read_bandwidth_words_per_cycle
    wbw = lv.write_bandwidth_words_per_cycle or lv.read_bandwidth_words_per_cycle
    ints = np.array([layout.array_level, layout.pe_level, layout.rows, layout.cols, *layout.tensor,
                     *layout.class_size, *d_tot, *overlap], dtype=np.int64)
    flts = np.array([*layout.window_words, float(problem.macs), math.nan if rbw is None else float(rbw),
                     math.nan if wbw is None else float(wbw)], dtype=np.float64)
    return SystolicConsts(bounds=np.ascontiguousarray(problem.bounds, dtype=np.int64),
                          holds=np.ascontiguousarray(arch.holds_mask(problem)),
                          fan_xy=np.ascontiguousarray(arch.fanouts, dtype=np.int64), dim_class=dim_class, full=full,
                          coef=np.ascontiguousarray(problem.coefficients, dtype=np.int64),
                          used=np.ascontiguousarray(problem.rank_used), ints=ints, flts=flts)


@register_jitable
def _check_padded(i, temporal, spatial, order, keep, bounds, holds, fan_xy):
    """`check_batch(allow_padding=True)` of mapping i up to (not including) its capacity
    check, which the systolic model ignores: (reason, level)."""
    L, D = temporal.shape[1], temporal.shape[2]
    T = keep.shape[2]
    ok = True
    for d in range(D):
        prod = 1
        for lv in range(L):
            a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
            if a < 1 or x < 1 or y < 1:
                ok = False
            prod *= a * x * y
        if prod < bounds[d]:
            ok = False
    if not ok:
        return _FACTORS, -1
    for lv in range(L):
        seen = 0
        for k in range(D):
            v = order[i, lv, k]
            seen |= (1 << D) if v < 0 or v >= D else (1 << v)
        if seen != (1 << D) - 1:
            return _ORDER, lv
    for lv in range(L):
        for t in range(T):
            if (keep[i, lv, t] and not holds[lv, t]) or (lv == 0 and not keep[i, 0, t]):
                return _KEEP, lv
    for lv in range(L):
        ux, uy = 1, 1
        for d in range(D):
            ux *= spatial[i, lv, d, 0]
            uy *= spatial[i, lv, d, 1]
        if ux > fan_xy[lv, 0] or uy > fan_xy[lv, 1]:
            return _FANOUT, lv
    return 0, -1


@register_jitable
def _distinct(coef, used, t, ext):
    """`systolic._distinct_words` of tensor t over extents ``ext`` (D,)."""
    total = 1
    for c in range(coef.shape[1]):
        if not used[t, c]:
            continue
        span, prod = 1, 1
        for d in range(coef.shape[2]):
            if coef[t, c, d] != 0:
                span += (ext[d] - 1) * coef[t, c, d]
                prod *= ext[d]
        total = total * min(span, prod)
    return total


@register_jitable
def _box(i, order, al, bounds, dim_class, full, chunk_cls, chunk, whole1, whole2, ext):
    """Extents: ``chunk`` flattened elements of class ``chunk_cls`` (inner dims first in the
    array level's order), classes ``whole1``/``whole2`` at their full bounds, others 1."""
    D = bounds.shape[0]
    for d in range(D):
        ext[d] = 1
    rem = chunk
    for pos in range(D - 1, -1, -1):
        d = order[i, al, pos]
        if dim_class[d] == chunk_cls:
            b = bounds[d]
            ext[d] = min(rem, b)
            rem = -(-rem // b)
    for d in range(D):
        if dim_class[d] == whole1 or dim_class[d] == whole2:
            ext[d] = full[d]


@register_jitable
def _reset_loss(d_pass, h, w, reads_pass):
    hh = float(min(max(h, 0), w))
    x = d_pass / (1.0 - hh / (2.0 * w))
    return min(np.int64(math.floor(x + 0.5)), reads_pass)


@register_jitable
def _repeated_tiles(n_full, t, t_last, k, w):
    """`systolic._repeated_tiles_batch` of one row (float64, as there)."""
    tf, tl, nf, kf = float(t), float(t_last), float(n_full), float(k)
    big = tf >= w
    ts = 1.0 if big else tf
    a = max(math.ceil(w / ts) - 1, 1.0)
    resets = math.floor((nf - 1) / a) if nf >= 1 else 0.0
    full_small = nf * tf + (resets * (w - a * tf) if kf >= 2 else 0.0)
    if nf == 0:
        c = 0.0
    elif nf <= a:
        c = nf * tf
    else:
        c = tf + np.fmod(nf - 1, a) * tf
    if kf < 2:
        c = 0.0
    full = kf * nf * tf if big else full_small
    if big:  # every word of a tile larger than the window is missed: count = fetched mod w
        c = np.fmod(full, w)
    if tl >= w:
        last = kf * tl
    elif kf >= 2 and c + tl >= w:
        last = tl + (w - c)
    else:
        last = tl
    return np.int64(full + last)


@register_jitable
def _neighbour_step(i, order, al, coef, used, t, dim_class, bounds):
    """`systolic._neighbour_step_batch` of one row."""
    D = bounds.shape[0]
    best = np.int64(9223372036854775807 // 4)
    for c in range(coef.shape[1]):
        if not used[t, c]:
            continue
        for dm in range(D):
            if not (coef[t, c, dm] > 0 and dim_class[dm] == _M and bounds[dm] > 1):
                continue
            for dk in range(D):
                if not (coef[t, c, dk] > 0 and dim_class[dk] == _K and bounds[dk] > 1):
                    continue
                pos_k = 0
                for p in range(D):
                    if order[i, al, p] == dk:
                        pos_k = p
                inner = np.int64(1)
                for p in range(pos_k + 1, D):
                    d = order[i, al, p]
                    if dim_class[d] == _K:
                        inner = inner * bounds[d]
                best = min(best, coef[t, c, dm] * inner)
    return best


@register_jitable
def _class_indexes(o, c):
    if o == 0:
        return c == _M or c == _K
    if o == 1:
        return c == _N or c == _K
    return c == _M or c == _N


@register_jitable
def _dram_reads(i, order, o, rc, cc, s_r, s_c, ur, uc, f_r, f_c, ir, ic, reads, bounds, dim_class, full, coef, used,
                ints, flts, ext):
    """`systolic._dram_reads_batch` of one row, operand ``o`` (0 ifmap, 1 filter)."""
    al = ints[0]
    t = ints[4 + o]
    b_rep = ints[10]
    d_tot = ints[11 + o]
    overlap = ints[13 + o] != 0
    w = flts[o]
    if d_tot < w:
        return d_tot * b_rep
    tc = 3 - rc - cc
    last_r = s_r - (f_r - 1) * ur
    last_c = s_c - (f_c - 1) * uc
    case_c = ir and not ic
    case_b = ic and not ir
    if not overlap:
        if case_b:
            _box(i, order, al, bounds, dim_class, full, cc, uc, tc, -9, ext)
            t_full = _distinct(coef, used, t, ext)
            _box(i, order, al, bounds, dim_class, full, cc, last_c, tc, -9, ext)
            t_last = _distinct(coef, used, t, ext)
            return _repeated_tiles(f_c - 1, t_full, t_last, f_r, w) * b_rep
        if case_c:
            return f_c * d_tot * b_rep
        return d_tot * b_rep
    passes = f_c if case_c else 1
    reads_pass = reads // passes
    step = _neighbour_step(i, order, al, coef, used, t, dim_class, bounds)
    u_pix = ur if rc == _M else (uc if cc == _M else 1)
    if step * u_pix < w:
        big_tile = _reset_loss(d_tot, w, w, reads_pass)
    else:
        big_tile = reads_pass
    if case_c:
        _box(i, order, al, bounds, dim_class, full, rc, ur, tc, -9, ext)
        t_full = _distinct(coef, used, t, ext)
        _box(i, order, al, bounds, dim_class, full, rc, last_r, tc, -9, ext)
        t_last = _distinct(coef, used, t, ext)
        if rc == _K and (2 * t_full >= w or step * t_full >= w * ur):
            est = (f_r - 1) * t_full + t_last
        elif t_full >= w:
            est = big_tile
        else:
            est = _reset_loss(d_tot, t_full - d_tot // (2 * f_r), w, reads_pass)
    else:
        _box(i, order, al, bounds, dim_class, full, cc, uc, tc, -9, ext)
        tb_full = _distinct(coef, used, t, ext)
        _box(i, order, al, bounds, dim_class, full, cc, uc, tc, rc, ext)
        group = _distinct(coef, used, t, ext)
        if case_b and cc == _K and (2 * tb_full >= w or step * tb_full >= w * uc):
            _box(i, order, al, bounds, dim_class, full, cc, last_c, tc, -9, ext)
            tb_last = _distinct(coef, used, t, ext)
            est = _repeated_tiles(f_c - 1, tb_full, tb_last, f_r, w)
        elif group >= w:
            est = big_tile
        else:
            est = _reset_loss(d_tot, group - d_tot // (2 * f_c), w, reads_pass)
    return passes * est * b_rep


@register_jitable
def _stall(words, compute, bw):
    if math.isnan(bw):
        return np.int64(0)
    need = np.int64(math.ceil(words / bw))
    return max(need - compute, 0)


@register_jitable
def stats_range(lo, hi, temporal, spatial, order, keep, bounds, holds, fan_xy, dim_class, full, coef, used, ints,
                flts, out_i, out_f, valid, ext):
    """SCALE-Sim's report of mappings lo..hi-1 (``out_i`` (n, 19) int64 columns, ``out_f``
    (n, 3) float64: mapping efficiency, compute utilization, utilization)."""
    D = bounds.shape[0]
    al, pe, R, C = ints[0], ints[1], ints[2], ints[3]
    t_in, t_w, t_out = ints[4], ints[5], ints[6]
    b_rep = ints[10]
    macs = flts[3]
    for i in range(lo, hi):
        for q in range(out_i.shape[1]):
            out_i[i, q] = 0
        out_f[i, 0] = 0.0
        out_f[i, 1] = 0.0
        out_f[i, 2] = 0.0
        out_i[i, _DF] = -1
        out_i[i, _RC] = -1
        out_i[i, _CC] = -1
        out_i[i, _LEVEL] = -1
        valid[i] = False
        why, where = _check_padded(i, temporal, spatial, order, keep, bounds, holds, fan_xy)
        if why != 0:
            out_i[i, _REASON] = why
            out_i[i, _LEVEL] = where
            continue
        # The dataflow: the operand the PE registers keep, else the two array classes.
        k0, k1, k2 = keep[i, pe, t_in], keep[i, pe, t_w], keep[i, pe, t_out]
        n_kept = int(k0) + int(k1) + int(k2)
        df = -1
        if n_kept == 1:
            df = _OS if k2 else (_WS if k1 else _IS)
        # The classes unrolled along Y (rows) and X (columns): one each at most.
        ymask, xmask, bad = 0, 0, False
        for d in range(D):
            c = dim_class[d]
            for axis in range(2):
                if spatial[i, al, d, axis] > 1:
                    if c < 0:
                        bad = True
                    elif axis == 1:
                        ymask |= 1 << c
                    else:
                        xmask |= 1 << c
        yc, xc = -1, -1
        for c in range(3, -1, -1):  # the lowest class present (numpy's argmax)
            if ymask & (1 << c):
                yc = c
            if xmask & (1 << c):
                xc = c
        if ymask & (ymask - 1) or xmask & (xmask - 1):  # two classes on one axis
            bad = True
        both = yc >= 0 and xc >= 0 and yc != xc and yc <= _K and xc <= _K
        if not (n_kept == 1 or not both):
            s = yc + xc
            df = _OS if s == 1 else (_IS if s == 2 else (_WS if s == 3 else -1))
        dfi = df if df >= 0 else 0
        def_r = _M if dfi == _OS else _K
        def_c = _N if dfi != _IS else _M
        pair = def_r + def_c
        rc = yc if yc >= 0 else (pair - xc if xc >= 0 else def_r)
        cc = xc if xc >= 0 else (pair - yc if yc >= 0 else def_c)
        arr_ok = rc != cc and rc + cc == pair and rc <= _K and cc <= _K and rc >= 0 and cc >= 0
        if not (df >= 0 and not bad and arr_ok):
            out_i[i, _REASON] = _MODEL
            out_i[i, _LEVEL] = pe
            continue
        tc = 3 - rc - cc
        s_r, s_c, t_len = ints[7 + rc], ints[7 + cc], ints[7 + tc]
        py, px = 1, 1
        for d in range(D):
            py *= spatial[i, al, d, 1]
            px *= spatial[i, al, d, 0]
        ur = max(min(py, s_r), 1)
        uc = max(min(px, s_c), 1)
        f_r = -(-s_r // ur)
        f_c = -(-s_c // uc)
        folds = f_r * f_c * b_rep
        os_ = dfi == _OS
        per_fold = t_len + R + C - 2 if os_ else 2 * R + C + t_len - 2
        compute = folds * per_fold - 1
        util_fold = t_len + R + C - 2 if os_ else 2 * R + 2 * C + t_len - 3
        acc0 = (s_r if _class_indexes(0, rc) else f_r) * (s_c if _class_indexes(0, cc) else f_c) * \
            (t_len if _class_indexes(0, tc) else 1) * b_rep
        acc1 = (s_r if _class_indexes(1, rc) else f_r) * (s_c if _class_indexes(1, cc) else f_c) * \
            (t_len if _class_indexes(1, tc) else 1) * b_rep
        acc2 = (s_r if _class_indexes(2, rc) else f_r) * (s_c if _class_indexes(2, cc) else f_c) * \
            (t_len if _class_indexes(2, tc) else 1) * b_rep
        sram_w = acc2 + (folds * (R + C) if os_ else 0)
        dr0 = _dram_reads(i, order, 0, rc, cc, s_r, s_c, ur, uc, f_r, f_c, _class_indexes(0, rc),
                          _class_indexes(0, cc), acc0, bounds, dim_class, full, coef, used, ints, flts, ext)
        dr1 = _dram_reads(i, order, 1, rc, cc, s_r, s_c, ur, uc, f_r, f_c, _class_indexes(1, rc),
                          _class_indexes(1, cc), acc1, bounds, dim_class, full, coef, used, ints, flts, ext)
        stall = max(_stall(dr0 + dr1, compute, flts[4]), _stall(acc2, compute, flts[5]))
        total = compute + stall
        map_eff = float(s_r * s_c) / (f_r * f_c * R * C)
        valid[i] = True
        out_i[i, _DF] = df
        out_i[i, _RC] = rc
        out_i[i, _CC] = cc
        out_i[i, _UR] = ur
        out_i[i, _UC] = uc
        out_i[i, _FR] = f_r
        out_i[i, _FC] = f_c
        out_i[i, _FOLDS] = folds
        out_i[i, _COMPUTE] = compute
        out_i[i, _STALL] = stall
        out_i[i, _TOTAL] = total
        out_i[i, _SR0] = acc0
        out_i[i, _SR1] = acc1
        out_i[i, _SW] = sram_w
        out_i[i, _DR0] = dr0
        out_i[i, _DR1] = dr1
        out_i[i, _DW] = acc2
        out_f[i, 0] = map_eff
        out_f[i, 1] = map_eff * t_len / util_fold
        out_f[i, 2] = macs / (float(max(total, 1)) * (R * C))  # (total 0: one MAC on a 1 x 1 array)


@njit(cache=True, _nrt=False, nogil=True)  # type: ignore[call-overload]
def _stats_rows(temporal, spatial, order, keep, bounds, holds, fan_xy, dim_class, full, coef, used, ints, flts, out_i,
                out_f, valid, ext):
    stats_range(0, temporal.shape[0], temporal, spatial, order, keep, bounds, holds, fan_xy, dim_class, full, coef,
                used, ints, flts, out_i, out_f, valid, ext)


# Below this many rows a batch runs on the calling thread.
_PARALLEL_MIN_ROWS = 4096


def stats_batch(consts: SystolicConsts, temporal, spatial, order, keep):  # noqa: ANN001, ANN201
    """`SystolicStats` of every row (shapes already matching the problem and arch)."""
    from accelmap.costmodels.systolic import SystolicStats

    n = temporal.shape[0]
    out_i = np.empty((n, 19), dtype=np.int64)
    out_f = np.empty((n, 3))
    valid = np.empty(n, dtype=np.bool_)
    args = (np.ascontiguousarray(temporal, dtype=np.int64), np.ascontiguousarray(spatial, dtype=np.int64),
            np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(keep, dtype=np.bool_),
            *consts.as_tuple(), out_i, out_f, valid)
    D = consts.bounds.shape[0]
    threads = _threads()
    if threads > 1 and n >= _PARALLEL_MIN_ROWS:  # blocks of rows on threads (`engines.run_blocks`)
        n_blocks = threads * 4
        ext = np.empty((n_blocks, D), np.int64)
        t, s, o, k = args[:4]
        tables = consts.as_tuple()

        def block(b: int, lo: int, hi: int) -> None:
            _stats_rows(t[lo:hi], s[lo:hi], o[lo:hi], k[lo:hi], *tables, out_i[lo:hi], out_f[lo:hi], valid[lo:hi],
                        ext[b])

        run_blocks(block, n, n_blocks, threads)
    elif n:
        _stats_rows(*args, np.empty(D, np.int64))
    c = out_i.T
    return SystolicStats(
        valid=valid, reason=c[_REASON], reason_level=c[_LEVEL], dataflow=c[_DF], row_class=c[_RC],
        col_class=c[_CC], rows_used=c[_UR], cols_used=c[_UC], row_folds=c[_FR], col_folds=c[_FC],
        folds=c[_FOLDS], compute_cycles=c[_COMPUTE], stall_cycles=c[_STALL], total_cycles=c[_TOTAL],
        sram_reads=out_i[:, _SR0:_SR1 + 1], sram_writes=c[_SW], dram_reads=out_i[:, _DR0:_DR1 + 1],
        dram_writes=c[_DW], mapping_efficiency=out_f[:, 0], compute_utilization=out_f[:, 1],
        utilization=out_f[:, 2],
    )
