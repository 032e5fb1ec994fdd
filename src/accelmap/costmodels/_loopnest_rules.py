"""The counting rules of the ``loopnest`` model for one mapping, in the form numba compiles.

This module holds *what* the compiled engines count; how they are driven fast (the
per-(problem, arch) constants, the choice of driver, threads, scratch and output buffers kept
across calls) is `accelmap.costmodels._loopnest_kernel`'s. *What is counted* is defined once,
in the module docstring of `accelmap.costmodels.loopnest` and its scalar reference
(``_scalar_counts``); this module follows that reference line by line in integer arithmetic
that numba compiles, with the few shortcuts the batched numpy path also takes (named where
they appear). The numpy batched path stays the executable reference: the property tests
assert that every engine gives the same `Metrics`, bit for bit.

Each counting rule of one mapping is one function here (`RULES`), in plain code, and every
compiled driver calls these same functions:

* ``check``: legality (`check_batch` without padding: factors, orders, bypass, fanouts,
  capacities with ``footprint``);
* ``row_tables``: the spatial factors, the active temporal loops outermost first with their
  strides and running products, the used and utilized instances per level;
* ``closed_deliveries`` / ``deliveries``: eq. D, the closed form and the slide walk;
* ``keeper_counts``: eq. S (``distinct``), multicast and spatial reduction, reads, fills,
  updates and their energy per block (``ceil_blocks``) for one keeping level;
* ``latency_cycles``: compute or the slowest level's bandwidth.

With them, what runs them row by row: ``eval_range`` (check and count a range of rows on the
arrays of `KernelConsts`, the rules called as functions of their own), which the generic CUDA
kernels of `accelmap.costmodels._cuda` run on the device (the rules registered for the CUDA
target), and ``check_row`` (``check`` on those arrays); ``INLINED``, the rules again as
``inline="always"`` njit copies, which the driver of `accelmap.costmodels._loopnest_cpu`
specialised per structure inlines at numba's IR stage with the structure's tables as
constants, and ``eval_range`` with them inlined, which ``eval_rows`` below, the generic CPU
driver, runs; ``check_one``, ``check_row`` compiled once for the rows that
`accelmap.costmodels._loopnest_gen` writes out as source per structure (they inline
``deliveries`` and call ``check_one``); the reason codes, the output slots and the drivers'
scratch (``scratch``). The search kernels of `accelmap.costmodels._cuda_search` re-express the
rules in 32-bit scratch for the GPU (that module says where and why).

numba's on-disk cache keys a compiled function by its own file alone, not by the functions it
calls or inlines: the functions cached here (``eval_rows``, ``check_one``) are compiled anew
when this file changes, and the drivers compiled elsewhere carry a digest of this file's
source in their cache key (`_loopnest_cpu._rules_digest`).

Inputs are plain arrays: the mapping batch's own arrays (n, L, D) / (n, L, D, 2) /
(n, L, T), and the per-(problem, arch) constants of `_loopnest_kernel.KernelConsts`. Outputs
are written into preallocated arrays, every entry of every row (so they may be ``np.empty``).
"""

from __future__ import annotations

import math
import types

import numpy as np
from numba import njit
from numba.extending import register_jitable

from accelmap._typing import IntArray

__all__ = ["RULES", "INLINED", "check_row", "check_one", "eval_range", "eval_rows", "scratch"]

# Reason codes (the values of `accelmap.mapper.check.Reason`), as plain ints for numba.
_FACTORS, _ORDER, _KEEP, _FANOUT, _CAPACITY = 2, 3, 4, 5, 6
# Outputs: ``cnt`` (n, 6, L, T) counts per row, level and tensor (totals over instances), in
# this order; ``res`` (n, 4) per-row results; ``codes`` (n, 2) reason and its level.
_READS, _FILLS, _UPDATES, _ENERGY, _MCAST, _SRED = 0, 1, 2, 3, 4, 5
_CYCLES, _ENERGY_PJ, _COMPUTE_PJ, _UTIL = 0, 1, 2, 3


# --- the counting rules, each written once ---------------------------------------------------
# Every rule of one mapping is a function below, called by both CPU drivers (``eval_range``
# here, `_loopnest_cpu`'s driver specialised per structure) and, through ``eval_range``, by
# the CUDA kernels of `accelmap.costmodels._cuda`. numba compiles one source for whatever
# the caller passes: here the tables of `KernelConsts` (run-time arrays); in the specialised
# driver the same tables as constant arrays captured by its closure, so that, inlined at
# numba's IR stage (``inline="always"``), their shapes and entries fold into the code. Two
# tables only say *where* a run-time value applies, so that the specialised driver can pass
# a constant with the same pattern: ``fanl`` (L,), nonzero where a level spreads below it
# (`has_fanout`), and ``limited`` (L,), a level has a capacity
# (or a bandwidth) where its entry is finite. Loop trip counts come from the tables' shapes,
# or from ``D``, the number of dims (a constant there), never from the mapping or scratch
# arrays', for the same reason.


# The rules below, by name (the CUDA engine registers them for its target too).
RULES = ("has_fanout", "ceil_blocks", "footprint", "check", "row_tables", "closed_deliveries", "deliveries", "distinct",
         "keeper_counts", "latency_cycles")


@register_jitable
def has_fanout(fanl, lv):
    """Whether level ``lv`` has instances below it (X x Y > 1): ``fanl`` (L,) is nonzero there."""
    return fanl[lv] != 0


@register_jitable
def ceil_blocks(words, block):
    # ``ceil(words / block)`` as the numpy path computes it (_loopnest_numpy._blocks): no
    # division for a one-word block, a multiply by the exact reciprocal for a power of two.
    if block == 1:
        return float(words)
    if block & (block - 1) == 0:
        return math.ceil(words * (1.0 / block))
    return math.ceil(words / block)


@register_jitable
def footprint(nterm, tdim, tcoef, t, ext, row, spans):
    """`Problem.footprint` of tensor t over a box of extents ``ext[row]`` (D,): the span
    ``1 + sum_d a_d (ext_d - 1)`` of every coordinate into ``spans`` (C,), and their product."""
    size = 1
    for cc in range(nterm.shape[1]):
        s = 1
        for k in range(nterm[t, cc]):
            s += tcoef[t, cc, k] * (ext[row, tdim[t, cc, k]] - 1)
        spans[cc] = s
        size *= s
    return size


@register_jitable
def check(i, D, temporal, spatial, order, keep, nterm, tdim, tcoef, bounds, holds, fan_xy, capacity, limited, tile,
          spans):
    """`check_batch` (no padding) of mapping i: (reason, level), the first failing check in
    `Reason` order. Fills ``tile`` (L+1, D) (meaningful once the factors multiply out).
    ``limited`` (L,): a level's capacity is checked where its entry is finite."""
    L, T = holds.shape[0], holds.shape[1]
    # FACTORS: every factor >= 1 and the factors of each dim multiply to its bound.
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
    # ORDER: each level's order is a permutation of 0..D-1.
    for lv in range(L):
        seen = 0
        for k in range(D):
            v = order[i, lv, k]
            seen |= (1 << D) if v < 0 or v >= D else (1 << v)
        if seen != (1 << D) - 1:
            return _ORDER, lv
    # KEEP: only tensors the level may hold; the outermost level keeps every tensor.
    for lv in range(L):
        for t in range(T):
            if (keep[i, lv, t] and not holds[lv, t]) or (lv == 0 and not keep[i, 0, t]):
                return _KEEP, lv
    # FANOUT: instances used along X and Y below each level.
    for lv in range(L):
        ux, uy = 1, 1
        for d in range(D):
            ux *= spatial[i, lv, d, 0]
            uy *= spatial[i, lv, d, 1]
        if ux > fan_xy[lv, 0] or uy > fan_xy[lv, 1]:
            return _FANOUT, lv
    # CAPACITY: the footprints of the kept tiles.
    for lv in range(L):
        if not math.isfinite(limited[lv]):
            continue
        need = 0
        for t in range(T):
            if holds[lv, t] and keep[i, lv, t]:
                need += footprint(nterm, tdim, tcoef, t, tile, lv, spans)
        if need > capacity[lv]:
            return _CAPACITY, lv
    return 0, -1


@register_jitable
def row_tables(i, D, temporal, spatial, order, fanl, tile, g, lp, kcs, lvl):
    """The per-row tables of a legal mapping (``tile`` from `check`); returns the product of
    every temporal bound (the MACs one unit performs).

    ``g`` (L, D): the spatial factor (X x Y) of each dim below each level with a fanout
    (elsewhere a legal row has none: g = 1, never read). ``lp`` rows 0..3: dim, bound,
    stride of each active temporal loop (bound >= 2), outermost first, and ``lp[3, k]`` the
    product of the bounds of loops 0..k-1 (rows 5..8 are `deliveries`' scratch); ``kcs[c]``:
    the active loops above level c. ``lvl`` rows: used instances below each level, utilized
    instances of it, words read / written per instance (zeroed); the generic driver keeps its
    ``fanl`` in row 4."""
    L = fanl.shape[0]
    for lv in range(L):
        if has_fanout(fanl, lv):
            for d in range(D):
                g[lv, d] = spatial[i, lv, d, 0] * spatial[i, lv, d, 1]
    # Every loop written unconditionally and kept by advancing k (random mappings make a
    # branch on the bound unpredictable); the running product stays in a register (read back
    # from ``lp`` it made a chain of stores and loads through memory, the slowest part of the
    # row).
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
            lp[2, k] = g[lv, d] * tile[lv + 1, d] if has_fanout(fanl, lv) else tile[lv + 1, d]
            lp[3, k + 1] = prod
            k += b >= 2
    kcs[L] = k
    ib = 1
    for lv in range(L):
        ub = 1
        if has_fanout(fanl, lv):
            for d in range(D):
                ub *= g[lv, d]
        lvl[0, lv] = ub
        lvl[1, lv] = ib
        ib *= ub
        lvl[2, lv] = 0
        lvl[3, lv] = 0
    return lp[3, k]


@register_jitable
def closed_deliveries(nterm, tdim, tcoef, rel, t, c, tile, lp, kcs, spans):
    """Eq. D's closed form, for a tensor every moving coordinate of which has one dim
    (``closed``; loopnest's batched path proves it): a step moves some coordinate exactly
    when a loop of a relevant dim is among the loops inside it, and then by at least the
    tile's span, so F_c = |tile| x (product of the bounds of loops 0..J), J the innermost
    active loop above c of a relevant dim, found walking back from c's innermost active loop
    (it stops at the first relevant one, about two steps; j: 1 + J, 0 if none). (A forward
    pass over every active loop per tensor, each step reading back the one before it from
    ``lp``, made a chain through memory: 1.3x slower rows.)"""
    j = kcs[c]
    while j > 0 and not rel[t, lp[0, j - 1]]:
        j -= 1
    return footprint(nterm, tdim, tcoef, t, tile, c, spans) * lp[3, j]


@register_jitable
def deliveries(coef, nterm, tdim, tcoef, t, c, tile, lp, kc, spans, shift):
    """Eq. D: words delivered into one instance of level ``c`` over the whole run.

    The loops above ``c`` are the first ``kc`` active loops (bound >= 2), outermost first.
    Loop j's step moves its dim forward by its stride and every loop inside it back by one
    stride: its coordinate shift is ``coef . stride_j e_dj`` minus the inner loops' sum of
    the same, kept as a running suffix sum (``shift``)."""
    C = coef.shape[1]
    size = footprint(nterm, tdim, tcoef, t, tile, c, spans)
    if kc == 0:
        return size
    for cc in range(C):
        shift[cc] = 0
    for j in range(kc - 1, -1, -1):
        d, st = lp[0, j], lp[2, j]
        moved, which, amount = 0, -1, 0
        for cc in range(C):
            a = coef[t, cc, d] * st
            s = a - shift[cc]  # this loop forward, the inner ones back to their start
            shift[cc] += a
            if s != 0:
                moved += 1
                which, amount = cc, s
        # Timeloop's axis-aligned box difference (loopnest._step_kind).
        if moved == 0:
            lp[5, j] = 0  # still
        elif moved == 1 and abs(amount) < spans[which]:
            lp[5, j] = 2  # slide: along ``which`` (lp[7]), forward or back (lp[6]), new words lp[8]
            lp[7, j] = which
            lp[6, j] = 1 if amount > 0 else -1
            lp[8, j] = abs(amount) * (size // spans[which])
        else:
            lp[5, j] = 1  # jump: the whole tile is new
    total, prefix = size, 1
    inner = kc - 1
    for j in range(kc):
        k = lp[5, j]
        if k == 0:
            new = 0
        elif k == 1:
            new = size
        elif lp[5, inner] == 2 and (lp[7, j] != lp[7, inner] or lp[6, j] != lp[6, inner]):
            # Timeloop's RESET_ON_GRADIENT_CHANGE: a slide other than the innermost loop's
            # (same coordinate, same direction) fetches the whole tile.
            new = size
        else:
            new = lp[8, j]
        total += prefix * (lp[1, j] - 1) * new
        prefix *= lp[1, j]
    return total


@register_jitable
def distinct(nterm, tdim, tcoef, t, lv, g, tile, buf):
    """Eq. S: distinct offset vectors of tensor t over the spatial grid below level lv.

    Per coordinate: no unrolled dim gives 1; one gives its factor; two with steps a, b and
    factors n1, n2 give ``n1 n2 - max(0, n1 - b/k) max(0, n2 - a/k)`` with k = gcd(a, b)
    (_loopnest_numpy._distinct_level); more are enumerated. A coordinate of one or two terms
    needs no count of its unrolled dims (a factor of 1 multiplies by 1: the product of the
    factors is the count unless both are unrolled, the one case that needs the gcd)."""
    M = tdim.shape[2]
    count = 1
    for cc in range(nterm.shape[1]):
        n = nterm[t, cc]
        if n == 0:
            continue
        if n == 1:
            count *= g[lv, tdim[t, cc, 0]]
            continue
        if n == 2:
            d1, d2 = tdim[t, cc, 0], tdim[t, cc, 1]
            n1, n2 = g[lv, d1], g[lv, d2]
            if n1 > 1 and n2 > 1:
                a = tcoef[t, cc, 0] * tile[lv + 1, d1]
                b = tcoef[t, cc, 1] * tile[lv + 1, d2]
                x, y = a, b
                while y:
                    x, y = y, x % y
                count *= n1 * n2 - max(n1 - b // x, 0) * max(n2 - a // x, 0)
            else:
                count *= n1 * n2
            continue
        if M <= 2:  # (no coordinate has more terms: no enumeration code in a specialised driver)
            continue
        nt, k1, k2 = 0, -1, -1
        for k in range(n):
            if g[lv, tdim[t, cc, k]] > 1:
                nt += 1
                if k1 < 0:
                    k1 = k
                elif k2 < 0:
                    k2 = k
        if nt == 0:
            continue
        if nt == 1:
            count *= g[lv, tdim[t, cc, k1]]
            continue
        if nt == 2:
            d1, d2 = tdim[t, cc, k1], tdim[t, cc, k2]
            n1, n2 = g[lv, d1], g[lv, d2]
            a = tcoef[t, cc, k1] * tile[lv + 1, d1]
            b = tcoef[t, cc, k2] * tile[lv + 1, d2]
            x, y = a, b
            while y:
                x, y = y, x % y
            count *= n1 * n2 - max(n1 - b // x, 0) * max(n2 - a // x, 0)
            continue
        m = 1
        for k in range(n):
            m *= g[lv, tdim[t, cc, k]]
        for ii in range(m):
            rem, v = ii, 0
            for k in range(n):
                d = tdim[t, cc, k]
                v += tcoef[t, cc, k] * tile[lv + 1, d] * (rem % g[lv, d])
                rem //= g[lv, d]
            buf[ii] = v
        for ii in range(1, m):  # insertion sort (the grid is small; no library sort on a GPU)
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


@register_jitable
def keeper_counts(i, D, t, p, child, mpu, temporal, nterm, tdim, tcoef, tile, g, lvl, deliv, tensor_size, block, read_pj,
                  write_pj, fanl, out, ext, spans, buf):
    """Per instance of level p, which keeps tensor t, its next inner keeper being ``child``
    (L: the MACs, which take ``mpu`` operands each): (reads, fills, updates, words spread,
    energy pJ), adding the words read and written to ``lvl`` rows 2 and 3.

    Eq. S: level p serves its children's deliveries once per distinct group of them
    (``distinct`` over the spatial levels between p and the child); the rest is multicast
    (read operands) or spatial reduction (the output), ``spread`` words. The output is read
    back, filled and updated except for the distinct outputs one instance ever holds (its
    tile widened by every temporal loop above it), which start at zero. Energy: reads at the
    read energy, fills and updates at the write energy, per block."""
    L = fanl.shape[0]
    f_child = deliv[child, t] if child < L else mpu
    groups, children = 1, 1
    for lv in range(p, child):
        if has_fanout(fanl, lv) and lvl[0, lv] > 1:
            groups *= distinct(nterm, tdim, tcoef, t, lv, g, tile, buf)
            children *= lvl[0, lv]
    a_p = f_child * groups
    f_p = deliv[p, t] if p > 0 else tensor_size[t]
    is_out = t == out
    if is_out:
        for d in range(D):
            w = tile[p, d]
            for lv in range(p):
                w *= temporal[i, lv, d]
            ext[0, d] = w
        part = footprint(nterm, tdim, tcoef, t, ext, 0, spans)
        r, f, u = a_p - part, (f_p - part if p > 0 else 0), a_p
    else:
        r, f, u = a_p, (f_p if p > 0 else 0), 0
    blk = block[p]
    e = ceil_blocks(r, blk) * read_pj[p]
    if is_out and p > 0:
        e += (ceil_blocks(f, blk) + ceil_blocks(u, blk)) * write_pj[p]
    elif is_out:
        e += ceil_blocks(u, blk) * write_pj[p]
    elif p > 0:
        e += ceil_blocks(f, blk) * write_pj[p]
    lvl[2, p] += r
    lvl[3, p] += f + u
    return r, f, u, f_child * children - a_p, e


@register_jitable
def latency_cycles(lvl, mpu, read_bw, write_bw, read_limited, write_limited):
    """The compute cycles or the slowest level's traffic over its bandwidth, rounded up
    (``*_limited`` (L,): a bandwidth applies where the entry is finite)."""
    cyc = float(mpu)
    for lv in range(read_limited.shape[0]):
        if math.isfinite(read_limited[lv]):
            cyc = max(cyc, lvl[2, lv] / read_bw[lv])
        if math.isfinite(write_limited[lv]):
            cyc = max(cyc, lvl[3, lv] / write_bw[lv])
    return float(math.ceil(cyc))



@register_jitable
def check_row(i, temporal, spatial, order, keep, nterm, tdim, tcoef, bounds, holds, fan_xy, capacity, tile, spans):
    """`check` with the arrays of `KernelConsts` (every finite capacity checked)."""
    return check(i, temporal.shape[2], temporal, spatial, order, keep, nterm, tdim, tcoef, bounds, holds, fan_xy,
                 capacity, capacity, tile, spans)


@njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def check_one(i, temporal, spatial, order, keep, nterm, tdim, tcoef, bounds, holds, fan_xy, capacity, tile, spans):
    """`check_row`, compiled once for every structure: the generated rows of `_loopnest_gen`
    call it for the rows whose spatial factors they do not take apart themselves."""
    return check_row(i, temporal, spatial, order, keep, nterm, tdim, tcoef, bounds, holds, fan_xy, capacity, tile,
                     spans)


@register_jitable
def eval_range(lo, hi, temporal, spatial, order, keep, coef, nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy,
               capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints, res, valid, codes, cnt,
               tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl):
    """Check and count mappings lo..hi-1 into their rows of every output (scratch arrays
    last): the rules above in the order of loopnest._scalar_counts, on the tables of
    `KernelConsts`; one function for the whole range, so that the ~50 arrays are passed once
    per range, not once per row."""
    L, D = temporal.shape[1], temporal.shape[2]
    T = keep.shape[2]
    macs, n_macs, mac_pj = scal[0], scal[1], scal[2]
    for lv in range(L):  # lvl row 4: which levels have a fanout (`has_fanout`)
        lvl[4, lv] = 1 if fan_xy[lv, 0] * fan_xy[lv, 1] > 1 else 0
    fanl = lvl[4]
    for i in range(lo, hi):
        why, where = check(i, D, temporal, spatial, order, keep, nterm, tdim, tcoef, bounds, holds, fan_xy, capacity,
                           capacity, tile, spans)
        codes[i, 0] = why
        codes[i, 1] = where
        for q in range(cnt.shape[1]):
            for lv in range(L):
                for t in range(T):
                    cnt[i, q, lv, t] = 0.0
        if why != 0:
            valid[i] = False
            res[i, _CYCLES] = np.inf
            res[i, _ENERGY_PJ] = np.inf
            res[i, _COMPUTE_PJ] = np.inf
            res[i, _UTIL] = 0.0
            continue
        mpu = row_tables(i, D, temporal, spatial, order, fanl, tile, g, lp, kcs, lvl)
        for t in range(T):
            for c in range(1, L):
                if holds[c, t] and keep[i, c, t]:
                    if closed[t]:
                        deliv[c, t] = closed_deliveries(nterm, tdim, tcoef, rel, t, c, tile, lp, kcs, spans)
                    else:
                        deliv[c, t] = deliveries(coef, nterm, tdim, tcoef, t, c, tile, lp, kcs[c], spans, shift)
            child = L  # the next inner keeper (L: the MACs)
            for p in range(L - 1, -1, -1):
                if not (holds[p, t] and keep[i, p, t]):
                    continue
                r, f, u, spread, e = keeper_counts(i, D, t, p, child, mpu, temporal, nterm, tdim, tcoef, tile, g,
                                                   lvl, deliv, tensor_size, block, read_pj, write_pj, fanl, ints[0],
                                                   ext, spans, buf)
                ip = lvl[1, p]  # the utilized instances of level p
                cnt[i, _SRED if t == ints[0] else _MCAST, p, t] = float(spread * ip)
                cnt[i, _READS, p, t] = float(r * ip)
                cnt[i, _FILLS, p, t] = float(f * ip)
                cnt[i, _UPDATES, p, t] = float(u * ip)
                cnt[i, _ENERGY, p, t] = e * ip
                child = p
        # Summed level by level, tensor by tensor (the order of the other paths).
        total = 0.0
        for lv in range(L):
            for t in range(T):
                total += cnt[i, _ENERGY, lv, t]
        cf = latency_cycles(lvl, mpu, read_bw, write_bw, read_bw, write_bw)
        valid[i] = True
        res[i, _CYCLES] = cf
        res[i, _ENERGY_PJ] = total + macs * mac_pj
        res[i, _COMPUTE_PJ] = macs * mac_pj
        res[i, _UTIL] = macs / (n_macs * cf)


def _inlined_rules() -> dict:
    """The rules again, for `_loopnest_cpu`'s specialised driver: each the same code object
    compiled as an ``inline="always"`` njit function, whose calls of the other rules resolve
    to these copies too, so that numba inlines them at its untyped IR stage, where the
    driver's constant tables fold into them. (Registered as ``inline="always"`` overloads
    instead, every rule was compiled on its own first and its inlining ran type inference
    again: the specialised driver's cold compile took 19.8 s of CPU instead of 8.4, the
    generic one's 24.4 s instead of 7.1; `bench_loopnest_compile.py`.)

    Also ``eval_range`` again, its rules inlined the same way: the generic CPU driver
    ``eval_rows`` runs it (the CUDA kernels run ``eval_range`` itself, which calls the rules
    as functions of their own). With every rule a call, passing its arrays as by-value
    structures (``keeper_counts`` takes 22 arguments, once per keeping level and tensor),
    the generic rows were 1.23x slower than with the counts written out in ``eval_range``."""
    ns = dict(globals())
    out = {}
    for name in RULES:
        fn = globals()[name]
        copy = types.FunctionType(fn.__code__, ns, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        out[name] = njit(inline="always", _nrt=False)(copy)  # type: ignore[call-overload]  # _nrt: a numba flag its stubs leave out
        ns[name] = out[name]
    fn = eval_range
    copy = types.FunctionType(fn.__code__, ns, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    out["eval_range"] = njit(_nrt=False)(copy)  # type: ignore[call-overload]  # _nrt: a numba flag its stubs leave out
    return out


INLINED = _inlined_rules()
_eval_range_inlined = INLINED["eval_range"]


def scratch(n_blocks: int, L: int, D: int, T: int, C: int, grid: int) -> tuple[IntArray, ...]:
    """Per-block scratch of the drivers: tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl."""
    e = np.empty
    return (e((n_blocks, L + 1, D), np.int64), e((n_blocks, L, D), np.int64), e((n_blocks, 9, L * D + 1), np.int64),
            e((n_blocks, L + 1), np.int64), e((n_blocks, C), np.int64), e((n_blocks, C), np.int64),
            e((n_blocks, L, T), np.int64), e((n_blocks, 1, D), np.int64), e((n_blocks, max(grid, 1)), np.int64),
            e((n_blocks, 5, L), np.int64))


# The generic CPU driver sits with the rules, not with the code that drives it
# (`_loopnest_kernel`): numba's on-disk cache checks the file of a cached function only, so
# here an edit of a rule compiles it anew.
@njit(nogil=True, cache=True, _nrt=False, error_model="numpy")  # type: ignore[call-overload]
def eval_rows(lo, hi, temporal, spatial, order, keep, coef, nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy,
              capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints, res, valid, codes, cnt,
              tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl):
    """Rows lo..hi-1 of a batch on the calling thread (`eval_range`), with one scratch. It
    runs without numba's reference counting (``_nrt=False``): every array comes from the
    caller; and with numba's numpy error model, as every CPU driver does (`_loopnest_cpu._JIT`).

    (Compiling ``eval_range`` itself as this entry point saves a quarter of the cold compile,
    3.5 -> 2.7 s, since numba then no longer optimises its code once alone and again linked
    into this wrapper; but the rows ran 4-5% slower: the second optimisation pays.)"""
    _eval_range_inlined(lo, hi, temporal, spatial, order, keep, coef, nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy,
               capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints, res, valid, codes, cnt,
               tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl)
