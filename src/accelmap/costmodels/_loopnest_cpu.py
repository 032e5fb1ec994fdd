"""The CPU engine of the ``loopnest`` model: its row functions specialised per structure.

`accelmap.costmodels._loopnest_kernel` holds the row functions the CUDA kernels share
(``check_row``, ``eval_range`` and their helpers: arrays in, one mapping per call). On one
CPU core two things made those slow, and this module removes both:

* **calls**: each call of a helper passes every array as a by-value structure (shape,
  strides, data), and a row makes dozens of calls (footprints, deliveries, distinct
  offsets); here the row loop and the counts are one function per structure (`_driver`)
  and the small helpers are inlined into it (numba's ``inline="always"``, at the IR level;
  see `_driver` for why no large helper is);
* **tables read at run time**: what the (problem, arch) fix, the shapes L, D, T, C, the
  sparse coefficients of each tensor coordinate, which level may hold which tensor, the
  block sizes, which levels have a fanout, a capacity or a bandwidth limit, are here
  compile-time constants (a tuple captured by a closure), so loops over them unroll and
  the coefficient arithmetic folds. Bounds, capacities, energies and bandwidths stay
  run-time arrays: every layer of one shape and stride pattern on one arch shares a kernel.

The steps and the arithmetic are those of ``check_row`` / ``eval_range`` (same order, same
integer and float operations; the one difference is that a closed tensor's innermost relevant
loop is found walking back from each kept level rather than by a forward pass, the same
index), so the results are identical; the property tests compare
them with the numpy path bit for bit. A kernel is compiled once per structure and kept in
numba's on-disk cache (``cache=True``: the closure's index key is the structure tuple).

Padding is applied in the row (`_loopnest_numpy._count_existing_words`' rule: a padded tensor's
counts and energy scaled by the share of its words that exist, the energy total moved by
the change), and with ``full=False`` the counts go to a one-row scratch, so that a search,
which reads only cycles, energy, validity and reason, writes no (n, L, T) arrays.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.costmodels.engines import thread_pool

__all__ = ["structure", "evaluate_rows"]

# The codes and output slots of `_loopnest_kernel` (kept equal by a test).
_FACTORS, _ORDER, _KEEP, _FANOUT, _CAPACITY = 2, 3, 4, 5, 6
_READS, _FILLS, _UPDATES, _ENERGY, _MCAST, _SRED = 0, 1, 2, 3, 4, 5
_CYCLES, _ENERGY_PJ, _COMPUTE_PJ, _UTIL = 0, 1, 2, 3
# Without numba's reference counting (``_nrt=False``): every array comes from the caller,
# scratch included, so no per-call bookkeeping is needed.
_JIT = {"cache": True, "_nrt": False}


def structure(consts) -> tuple:  # noqa: ANN001 (a `KernelConsts`; imported lazily by its module)
    """The compile-time constants of a `KernelConsts`: L, D, T, C, M (most nonzero terms of a
    coordinate), then flat tuples (row-major) of ``nterm`` (T, C), ``tdim``/``tcoef``
    (T, C, M), ``coef`` (T, C, D), ``holds`` (L, T), ``closed`` (T,), ``rel`` (T, D),
    ``block`` (L,), the output tensor, and per level whether the capacity, the read and the
    write bandwidth are finite and whether the level has a fanout."""
    T, C, D = consts.coef.shape
    L = consts.holds.shape[0]
    M = consts.tdim.shape[2]

    def flat(a: np.ndarray) -> tuple[int, ...]:
        return tuple(int(x) for x in np.asarray(a).ravel())

    return (L, D, T, C, M, flat(consts.nterm), flat(consts.tdim), flat(consts.tcoef), flat(consts.coef),
            flat(consts.holds), flat(consts.closed), flat(consts.rel), flat(consts.block), int(consts.ints[0]),
            flat(np.isfinite(consts.capacity)), flat(np.isfinite(consts.read_bw)), flat(np.isfinite(consts.write_bw)),
            flat(consts.fan_xy[:, 0] * consts.fan_xy[:, 1] > 1))


@njit(inline="always", **_JIT)  # type: ignore[call-overload]
def _fp(S, t, ext, row, spans):
    L, D, T, C, M, NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, OUT, CAPF, RBWF, WBWF, FANL = S
    size = 1
    for cc in range(C):
        s = 1
        for k in range(NTERM[t * C + cc]):
            s += TCOEF[(t * C + cc) * M + k] * (ext[row, TDIM[(t * C + cc) * M + k]] - 1)
        spans[cc] = s
        size *= s
    return size

@njit(inline="always", **_JIT)  # type: ignore[call-overload]
def _cblk(S, words, p):
    L, D, T, C, M, NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, OUT, CAPF, RBWF, WBWF, FANL = S
    block = BLOCK[p]
    if block == 1:
        return float(words)
    if block & (block - 1) == 0:
        return math.ceil(words * (1.0 / block))
    return math.ceil(words / block)

@njit(inline="always", **_JIT)  # type: ignore[call-overload]
def _check(S, i, temporal, spatial, order, keep, bounds, fan_xy, capacity, tile, spans):
    L, D, T, C, M, NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, OUT, CAPF, RBWF, WBWF, FANL = S
    ok = True
    for d in range(D):
        tile[L, d] = 1
        run = 1  # the running product in a register, not read back from ``tile`` (2-3% per row)
        for lv in range(L - 1, -1, -1):
            a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
            if a < 1 or x < 1 or y < 1:
                ok = False
            run = run * a * x * y
            tile[lv, d] = run
        if run != bounds[d]:
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
            if (keep[i, lv, t] and not HOLDS[lv * T + t]) or (lv == 0 and not keep[i, 0, t]):
                return _KEEP, lv
    for lv in range(L):
        ux, uy = 1, 1
        for d in range(D):
            ux *= spatial[i, lv, d, 0]
            uy *= spatial[i, lv, d, 1]
        if ux > fan_xy[lv, 0] or uy > fan_xy[lv, 1]:
            return _FANOUT, lv
    for lv in range(L):
        if not CAPF[lv]:
            continue
        need = 0
        for t in range(T):
            if HOLDS[lv * T + t] and keep[i, lv, t]:
                need += _fp(S, t, tile, lv, spans)
        if need > capacity[lv]:
            return _CAPACITY, lv
    return 0, -1

@njit(inline="always", **_JIT)  # type: ignore[call-overload]
def _deliv_f(S, t, c, tile, lp, kc, spans, shift):
    L, D, T, C, M, NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, OUT, CAPF, RBWF, WBWF, FANL = S
    size = _fp(S, t, tile, c, spans)
    if kc == 0:
        return size
    for cc in range(C):
        shift[cc] = 0
    for j in range(kc - 1, -1, -1):
        d, st = lp[0, j], lp[2, j]
        moved, which, amount = 0, -1, 0
        for cc in range(C):
            a = COEF[(t * C + cc) * D + d] * st
            s = a - shift[cc]
            shift[cc] += a
            if s != 0:
                moved += 1
                which, amount = cc, s
        if moved == 0:
            lp[5, j] = 0
        elif moved == 1 and abs(amount) < spans[which]:
            lp[5, j] = 2
            lp[7, j] = which
            lp[6, j] = 1 if amount > 0 else -1
            lp[8, j] = abs(amount) * (size // spans[which])
        else:
            lp[5, j] = 1
    total, prefix = size, 1
    inner = kc - 1
    for j in range(kc):
        k = lp[5, j]
        if k == 0:
            new = 0
        elif k == 1:
            new = size
        elif lp[5, inner] == 2 and (lp[7, j] != lp[7, inner] or lp[6, j] != lp[6, inner]):
            new = size
        else:
            new = lp[8, j]
        total += prefix * (lp[1, j] - 1) * new
        prefix *= lp[1, j]
    return total

@njit(inline="always", **_JIT)  # type: ignore[call-overload]
def _distinct(S, t, lv, g, tile, buf):
    L, D, T, C, M, NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, OUT, CAPF, RBWF, WBWF, FANL = S
    count = 1
    for cc in range(C):
        base = t * C + cc
        # One or two terms (the number is a constant here): a term with factor 1 multiplies by
        # 1, so the product of the factors is the count unless both are unrolled, the only
        # case that needs the gcd (no branch on which factors exceed 1).
        if NTERM[base] == 0:
            continue
        if NTERM[base] == 1:
            count *= g[lv, TDIM[base * M]]
            continue
        if NTERM[base] == 2:
            d1, d2 = TDIM[base * M], TDIM[base * M + 1]
            n1, n2 = g[lv, d1], g[lv, d2]
            if n1 > 1 and n2 > 1:
                a = TCOEF[base * M] * tile[lv + 1, d1]
                b = TCOEF[base * M + 1] * tile[lv + 1, d2]
                x, y = a, b
                while y:
                    x, y = y, x % y
                count *= n1 * n2 - max(n1 - b // x, 0) * max(n2 - a // x, 0)
            else:
                count *= n1 * n2
            continue
        nt, k1, k2 = 0, -1, -1
        for k in range(NTERM[base]):
            if g[lv, TDIM[base * M + k]] > 1:
                nt += 1
                if k1 < 0:
                    k1 = k
                elif k2 < 0:
                    k2 = k
        if nt == 0:
            continue
        if nt == 1:
            count *= g[lv, TDIM[base * M + k1]]
            continue
        if nt == 2:
            d1, d2 = TDIM[base * M + k1], TDIM[base * M + k2]
            n1, n2 = g[lv, d1], g[lv, d2]
            a = TCOEF[base * M + k1] * tile[lv + 1, d1]
            b = TCOEF[base * M + k2] * tile[lv + 1, d2]
            x, y = a, b
            while y:
                x, y = y, x % y
            count *= n1 * n2 - max(n1 - b // x, 0) * max(n2 - a // x, 0)
            continue
        m = 1
        for k in range(NTERM[base]):
            m *= g[lv, TDIM[base * M + k]]
        for ii in range(m):
            rem, v = ii, 0
            for k in range(NTERM[base]):
                d = TDIM[base * M + k]
                v += TCOEF[base * M + k] * tile[lv + 1, d] * (rem % g[lv, d])
                rem //= g[lv, d]
            buf[ii] = v
        for ii in range(1, m):
            v, j = buf[ii], ii - 1
            while j >= 0 and buf[j] > v:
                buf[j + 1] = buf[j]
                j -= 1
            buf[j + 1] = v
        u = 1
        for ii in range(1, m):
            if buf[ii] != buf[ii - 1]:
                u += 1
        count *= u
    return count

@functools.lru_cache(maxsize=32)
def _driver(S: tuple):  # noqa: ANN202 (a numba dispatcher)
    """The driver of one structure: rows lo..hi-1, legality (``check_row``'s steps), then the
    counts of the legal ones (``eval_range``'s). numba compiles it on its first call, or
    loads it from the on-disk cache. Its only closure variable is ``S``, so the cache's index
    key is the structure itself. It releases the GIL, so that blocks of one batch can run on
    several threads. The arrays come grouped (a call of more than 30 arguments compiles to a
    ``*args`` call, which numba cannot inline): ``mp`` the mapping arrays, ``rt`` the
    run-time constants, ``out`` the outputs, ``sc`` the scratch.

    The row loop and the counts are written out here rather than in helpers inlined into
    it: numba inlines a function (``inline="always"``) by deep-copying its IR block by block,
    and each block's copy copies the function's whole variable scope, so inlining a large
    function that has itself inlined others costs its size squared. Nested that way (rows ->
    row loop -> counts -> leaves) it was about three quarters of this driver's compile time;
    only the small leaves (`_check`, `_fp`, `_deliv_f`, `_distinct`, `_cblk`) are inlined now.
    """

    @njit(nogil=True, **_JIT)  # type: ignore[call-overload]
    def rows(lo, hi, full, mp, rt, out, sc):
        L, D, T, C, M, NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, OUT, CAPF, RBWF, WBWF, FANL = S
        temporal, spatial, order, keep = mp
        bounds, fan_xy, capacity, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, frac = rt
        res, valid, codes, cnt = out
        tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl = sc
        for i in range(lo, hi):
            ci = i if full else 0
            why, where = _check(S, i, temporal, spatial, order, keep, bounds, fan_xy, capacity, tile, spans)
            codes[i, 0] = why
            codes[i, 1] = where
            if why != 0:
                valid[i] = False
                res[i, _CYCLES] = np.inf
                res[i, _ENERGY_PJ] = np.inf
                res[i, _COMPUTE_PJ] = np.inf
                res[i, _UTIL] = 0.0
                if full:
                    for q in range(6):
                        for lv in range(L):
                            for t in range(T):
                                cnt[i, q, lv, t] = 0.0
                continue
            # --- the counts of a legal row (``tile`` from `_check`) ---
            macs, n_macs, mac_pj = scal[0], scal[1], scal[2]
            # Spatial factors only below levels with a fanout (elsewhere a legal row has none: g = 1,
            # never read).
            for lv in range(L):
                if FANL[lv]:
                    for d in range(D):
                        g[lv, d] = spatial[i, lv, d, 0] * spatial[i, lv, d, 1]
            # The active temporal loops (bound >= 2), outermost first, written unconditionally and
            # kept by advancing k (random mappings make a branch on the bound unpredictable).
            # (The running product stays in a register: read back from ``lp`` it made a chain of
            # stores and loads through memory, the slowest part of the row.)
            k = 0
            prod = 1
            lp[3, 0] = 1
            for lv in range(L):
                kcs[lv] = k
                for j in range(D):
                    d = order[i, lv, j]
                    b = temporal[i, lv, d]
                    prod *= b
                    lp[0, k] = d
                    lp[1, k] = b
                    lp[2, k] = g[lv, d] * tile[lv + 1, d] if FANL[lv] else tile[lv + 1, d]
                    lp[3, k + 1] = prod
                    k += b >= 2
            kcs[L] = k
            macs_per_unit = lp[3, k]
            ib = 1
            for lv in range(L):
                ub = 1
                if FANL[lv]:
                    for d in range(D):
                        ub *= g[lv, d]
                lvl[0, lv] = ub
                lvl[1, lv] = ib
                ib *= ub
                lvl[2, lv] = 0
                lvl[3, lv] = 0
            for t in range(T):
                for c in range(1, L):
                    if HOLDS[c * T + t] and keep[i, c, t]:
                        if CLOSED[t]:
                            # Eq. D's closed form: the tile times the loops down to the innermost
                            # relevant one above c, found walking back from c's innermost active loop
                            # (it stops at the first relevant one, about two steps). A forward pass
                            # over every active loop per tensor, each step reading back the one
                            # before it from ``lp``, made a chain through memory: 1.3x slower rows
                            # (`bench_loopnest_variants.py`, ``before_closed_forward``).
                            j = kcs[c]
                            while j > 0 and not REL[t * D + lp[0, j - 1]]:
                                j -= 1
                            deliv[c, t] = _fp(S, t, tile, c, spans) * lp[3, j]
                        else:
                            deliv[c, t] = _deliv_f(S, t, c, tile, lp, kcs[c], spans, shift)
                is_out = t == OUT
                child = L
                for p in range(L - 1, -1, -1):
                    if not (HOLDS[p * T + t] and keep[i, p, t]):
                        for q in range(6):
                            cnt[ci, q, p, t] = 0.0
                        continue
                    f_child = deliv[child, t] if child < L else macs_per_unit
                    groups, children = 1, 1
                    for lv in range(p, child):
                        if FANL[lv] and lvl[0, lv] > 1:
                            groups *= _distinct(S, t, lv, g, tile, buf)
                            children *= lvl[0, lv]
                    a_p = f_child * groups
                    f_p = deliv[p, t] if p > 0 else tensor_size[t]
                    ip = lvl[1, p]
                    if is_out:
                        for d in range(D):
                            w = tile[p, d]
                            for lv in range(p):
                                w *= temporal[i, lv, d]
                            ext[0, d] = w
                        part = _fp(S, t, ext, 0, spans)
                        r, f, u = a_p - part, (f_p - part if p > 0 else 0), a_p
                        cnt[ci, _SRED, p, t] = float((f_child * children - a_p) * ip)
                        cnt[ci, _MCAST, p, t] = 0.0
                    else:
                        r, f, u = a_p, (f_p if p > 0 else 0), 0
                        cnt[ci, _MCAST, p, t] = float((f_child * children - a_p) * ip)
                        cnt[ci, _SRED, p, t] = 0.0
                    e = _cblk(S, r, p) * read_pj[p]
                    if is_out and p > 0:
                        e += (_cblk(S, f, p) + _cblk(S, u, p)) * write_pj[p]
                    elif is_out:
                        e += _cblk(S, u, p) * write_pj[p]
                    elif p > 0:
                        e += _cblk(S, f, p) * write_pj[p]
                    cnt[ci, _READS, p, t] = float(r * ip)
                    cnt[ci, _FILLS, p, t] = float(f * ip)
                    cnt[ci, _UPDATES, p, t] = float(u * ip)
                    cnt[ci, _ENERGY, p, t] = e * ip
                    lvl[2, p] += r
                    lvl[3, p] += f + u
                    child = p
            total = 0.0
            for lv in range(L):
                for t in range(T):
                    total += cnt[ci, _ENERGY, lv, t]
            cyc = float(macs_per_unit)
            for lv in range(L):
                if RBWF[lv]:
                    cyc = max(cyc, lvl[2, lv] / read_bw[lv])
                if WBWF[lv]:
                    cyc = max(cyc, lvl[3, lv] / write_bw[lv])
            cf = float(math.ceil(cyc))
            energy = total + macs * mac_pj
            for t in range(T):
                fr = frac[t]
                if fr < 1.0:
                    before, after = 0.0, 0.0
                    for lv in range(L):
                        e0 = cnt[ci, _ENERGY, lv, t]
                        before += e0
                        e1 = e0 * fr
                        after += e1
                        cnt[ci, _ENERGY, lv, t] = e1
                        cnt[ci, _READS, lv, t] *= fr
                        cnt[ci, _FILLS, lv, t] *= fr
                        cnt[ci, _UPDATES, lv, t] *= fr
                    energy += after - before
            valid[i] = True
            res[i, _CYCLES] = cf
            res[i, _ENERGY_PJ] = energy
            res[i, _COMPUTE_PJ] = macs * mac_pj
            res[i, _UTIL] = macs / (n_macs * cf)

    return rows


def evaluate_rows(consts, temporal: IntArray, spatial: IntArray, order: IntArray, keep: BoolArray,  # noqa: ANN001
                  frac: FloatArray, res: FloatArray, valid: BoolArray, codes: IntArray, cnt: FloatArray,
                  full: bool, scratch: tuple, threads: int) -> None:
    """Fill ``res``, ``valid``, ``codes`` (and ``cnt`` when ``full``) for every row, in
    ``len(scratch[0])`` blocks of rows (``scratch``: per-block arrays of
    `_loopnest_kernel.scratch`) spread over ``threads`` threads (1: the calling thread). Without
    ``full``, ``cnt`` holds one (1, 6, L, T) scratch row per block."""
    rows = _driver(consts.structure)
    c = consts
    mp = (temporal, spatial, order, keep)
    rt = (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw, c.write_bw, c.tensor_size, c.scal, frac)
    n = temporal.shape[0]
    n_blocks = scratch[0].shape[0]
    if n_blocks == 1 or threads <= 1:
        if n:
            rows(0, n, full, mp, rt, (res, valid, codes, cnt if full else cnt[0]), tuple(x[0] for x in scratch))
        return
    step = (n + n_blocks - 1) // n_blocks
    jobs = [thread_pool(threads).submit(rows, lo, min(n, lo + step), full, mp, rt,
                                  (res, valid, codes, cnt if full else cnt[b]), tuple(x[b] for x in scratch))
            for b, lo in enumerate(range(0, n, step))]
    for job in jobs:
        job.result()
