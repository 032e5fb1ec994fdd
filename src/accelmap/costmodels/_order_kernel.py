"""Compiled least over the outermost level's loop orders of the words level 1 receives.

Argument 14 of `accelmap.costmodels.loopnest_bounds`: for a tile ``T`` of level 1 (one
instance, no fanout above it) the loops of level 0 are one per dim, ``q_d = E_d / T_d``
iterations of stride ``T_d``, and the model's deliveries into level 1 (eq. D and eq. G of
`accelmap.costmodels.loopnest`) follow from ``T`` and the order of those loops alone.
`order_least` returns, per tile, the least over every order of the weighted sum of those
deliveries over a set of tensors, by a shortest path over the sets of dims placed, innermost
first: the term of loop ``j`` is ``(prod of the loops outside j) (q_j - 1) Delta_j`` and
``Delta_j`` depends on ``j``, the set ``I`` of active loops inside it (each moved back by one
stride, Timeloop's two-iteration extrapolation) and the innermost loop ``z`` (eq. G resets a
window that slid another way), so for each ``z`` the least sum over the orders is a shortest
path over the sets ``I`` containing ``z``. The readable reference is
`loopnest_bounds.dram_order_deliveries` (one order, the model's rules written out) taken
over every permutation; ``tests/unit/search/test_exact.py`` holds the two equal.

Every value is an integer far below ``2**53`` (tile extents, loop bounds, spans and their
products), so the float sums are exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from accelmap._typing import FloatArray, IntArray

__all__ = ["order_least", "two_level_least", "two_level_least_many", "two_level_split_least",
           "two_level_split_least_below"]

_JIT: dict[str, Any] = {"cache": True}


@njit(**_JIT)
def _order_least(tiles: FloatArray, q: FloatArray, coef: FloatArray, w: FloatArray) -> FloatArray:  # pragma: no cover - compiled
    n, D = tiles.shape
    T, C, _ = coef.shape
    out = np.empty(n)
    act = np.empty(D, dtype=np.int64)
    span = np.empty((T, C))
    size = np.empty(T)
    nm = 1 << D
    back = np.zeros((T, nm, C))  # sum over the active loops of a set of their one-stride return
    kind = np.empty((T, nm, D), dtype=np.int64)  # -2 still, -1 jump, else 2 coord + (move > 0)
    new = np.empty((T, nm, D))
    ikind = np.empty((T, D), dtype=np.int64)
    dp = np.empty(nm)
    for i in range(n):
        na = 0
        for d in range(D):
            if q[i, d] >= 2.0:
                act[na] = d
                na += 1
        for t in range(T):
            s = 1.0
            for c in range(C):
                sp = 1.0
                for d in range(D):
                    sp += coef[t, c, d] * (tiles[i, d] - 1.0)
                span[t, c] = sp
                s *= sp
            size[t] = s
        if na == 0:
            tot = 0.0
            for t in range(T):
                tot += w[t] * size[t]
            out[i] = tot
            continue
        full = (1 << na) - 1
        qall = 1.0
        for b in range(na):
            qall *= q[i, act[b]]
        for t in range(T):
            for c in range(C):
                back[t, 0, c] = 0.0
            for m in range(1, full + 1):
                b = 0
                while not (m >> b) & 1:
                    b += 1
                d = act[b]
                for c in range(C):
                    back[t, m, c] = back[t, m & (m - 1), c] + coef[t, c, d] * tiles[i, d]
            for m in range(full + 1):
                for jb in range(na):
                    if (m >> jb) & 1:
                        continue
                    d = act[jb]
                    moved = 0
                    mc = -1
                    mv = 0.0
                    for c in range(C):
                        sh = coef[t, c, d] * tiles[i, d] - back[t, m, c]
                        if sh != 0.0:
                            moved += 1
                            mc = c
                            mv = sh
                    if moved == 0:
                        kind[t, m, jb] = -2
                        new[t, m, jb] = 0.0
                    elif moved == 1 and abs(mv) < span[t, mc]:
                        kind[t, m, jb] = 2 * mc + (1 if mv > 0.0 else 0)
                        new[t, m, jb] = abs(mv) * (size[t] / span[t, mc])
                    else:
                        kind[t, m, jb] = -1
                        new[t, m, jb] = size[t]
            for zb in range(na):
                ikind[t, zb] = kind[t, 0, zb]
        best = np.inf
        for zb in range(na):
            for m in range(full + 1):
                dp[m] = np.inf
            z0 = 1 << zb
            qz = q[i, act[zb]]
            v = 0.0
            for t in range(T):
                v += w[t] * new[t, 0, zb]
            dp[z0] = (qall / qz) * (qz - 1.0) * v
            for m in range(z0, full + 1):
                if not (m & z0) or dp[m] == np.inf:
                    continue
                inner = 1.0
                for b in range(na):
                    if (m >> b) & 1:
                        inner *= q[i, act[b]]
                for jb in range(na):
                    if (m >> jb) & 1:
                        continue
                    qj = q[i, act[jb]]
                    v = 0.0
                    for t in range(T):
                        k = kind[t, m, jb]
                        ik = ikind[t, zb]
                        if ik >= 0 and k >= 0 and k != ik:
                            v += w[t] * size[t]  # eq. G: the window slid another way inside
                        else:
                            v += w[t] * new[t, m, jb]
                    cost = dp[m] + (qall / (inner * qj)) * (qj - 1.0) * v
                    m2 = m | (1 << jb)
                    if cost < dp[m2]:
                        dp[m2] = cost
            if dp[full] < best:
                best = dp[full]
        tot = best
        for t in range(T):
            tot += w[t] * size[t]
        out[i] = tot
    return out


def order_least(tiles: FloatArray, q: FloatArray, coef: FloatArray, w: FloatArray) -> FloatArray:
    """(n,) the least over the orders of level 0's loops of ``sum_t w[t] F_t`` per tile.

    Parameters
    ----------
    tiles, q
        (n, D) level 1's tile extents and level 0's loop bounds (``E_d / T_d``).
    coef
        (T, C, D) the tensors' coordinate coefficients (`Problem.coefficients`).
    w
        (T,) energy per delivered word of each tensor (pJ).
    """
    return _order_least(np.ascontiguousarray(tiles, dtype=np.float64), np.ascontiguousarray(q, dtype=np.float64),
                        np.ascontiguousarray(coef, dtype=np.float64), np.ascontiguousarray(w, dtype=np.float64))


@njit(**_JIT)
def _step(sh: FloatArray, span: FloatArray, size: float) -> tuple[int, float]:  # pragma: no cover - compiled
    """A loop's step ``sh`` (per coordinate, back-moves included) as eq. D reads it: its kind
    (-2 nothing moved, -1 a jump, ``2 c + (sh_c > 0)`` a slide along coordinate ``c`` shorter
    than the span) and the new words it brings (0, the whole tile, or the slid strip)."""
    moved = 0
    mc = -1
    for c in range(sh.shape[0]):
        if sh[c] != 0.0:
            moved += 1
            mc = c
    if moved == 0:
        return -2, 0.0
    if moved == 1 and abs(sh[mc]) < span[mc]:
        return 2 * mc + (1 if sh[mc] > 0.0 else 0), abs(sh[mc]) * (size / span[mc])
    return -1, size


@njit(**_JIT)
def _active_loops(n1: FloatArray, s1: FloatArray, n0: FloatArray, s0: FloatArray, dims: IntArray, nb: FloatArray,
                  st: FloatArray) -> tuple[int, int]:  # pragma: no cover - compiled
    """The active loops (bound >= 2) of level 1, then of level 0, of one row ((D,) bounds and
    strides per level): their dims, bounds and strides written to the front of ``dims``,
    ``nb`` and ``st``, level 1's first; returns how many each level has, ``(a1, a0)``."""
    D = n1.shape[0]
    a1 = 0
    for d in range(D):
        if n1[d] >= 2.0:
            dims[a1] = d
            nb[a1] = n1[d]
            st[a1] = s1[d]
            a1 += 1
    a0 = 0
    for d in range(D):
        if n0[d] >= 2.0:
            dims[a1 + a0] = d
            nb[a1 + a0] = n0[d]
            st[a1 + a0] = s0[d]
            a0 += 1
    return a1, a0


@njit(**_JIT)
def _loop_products(nb: FloatArray, a1: int, a0: int) -> tuple[float, float]:  # pragma: no cover - compiled
    """The products of level 1's and of level 0's active loop bounds (`_active_loops`' ``nb``)."""
    p1 = 1.0
    for b in range(a1):
        p1 *= nb[b]
    p0 = 1.0
    for b in range(a0):
        p0 *= nb[a1 + b]
    return p1, p0


@njit(**_JIT)
def _first_tiles(span0: FloatArray, w: FloatArray, span: FloatArray, size: FloatArray,
                 first: float) -> float:  # pragma: no cover - compiled
    """Each tensor's tile: its coordinates' spans ``span0`` (T, C) copied to ``span`` (which may
    be ``span0`` itself) and their product, its words, to ``size``; returns ``first`` plus the
    tiles' words weighted by ``w``, added tensor by tensor (the path's first term)."""
    T, C = span0.shape
    for t in range(T):
        s = 1.0
        for c in range(C):
            span[t, c] = span0[t, c]
            s *= span[t, c]
        size[t] = s
        first += w[t] * s
    return first


@njit(**_JIT)
def _back_table(coef: FloatArray, dims: IntArray, st: FloatArray, off: int, a: int,
                back: FloatArray) -> None:  # pragma: no cover - compiled
    """``back[m, t, c]`` for every set ``m`` (a bit per loop) of one level's ``a`` active loops,
    which start at ``off`` in ``dims`` and ``st``: how far the loops of ``m`` have moved tensor
    ``t``'s coordinate ``c`` when they return (the sum of their strides times its coefficients),
    each set from the set without its lowest loop."""
    T, C, _ = coef.shape
    for t in range(T):
        for c in range(C):
            back[0, t, c] = 0.0
    for m in range(1, (1 << a)):
        b = 0
        while not (m >> b) & 1:
            b += 1
        for t in range(T):
            for c in range(C):
                back[m, t, c] = back[m & (m - 1), t, c] + coef[t, c, dims[off + b]] * st[off + b]


@njit(**_JIT)
def _two_level_least(span0: FloatArray, coef: FloatArray, n1: FloatArray, s1: FloatArray, n0: FloatArray,
                     s0: FloatArray) -> FloatArray:  # pragma: no cover - compiled
    n, D = n1.shape
    C = coef.shape[0]
    out = np.empty(n)
    dims = np.empty(2 * D, dtype=np.int64)
    nb = np.empty(2 * D)
    st = np.empty(2 * D)
    span = np.empty(C)
    nm = 1 << D
    back1 = np.zeros((nm, C))
    back0 = np.zeros((nm, C))
    dp = np.empty(nm)
    sh = np.empty(C)
    for i in range(n):
        a1, a0 = _active_loops(n1[i], s1[i], n0[i], s0[i], dims, nb, st)
        size = 1.0
        for c in range(C):
            span[c] = span0[i, c]
            size *= span[c]
        if a1 + a0 == 0:
            out[i] = size
            continue
        full1 = (1 << a1) - 1
        full0 = (1 << a0) - 1
        p1, p0 = _loop_products(nb, a1, a0)
        for c in range(C):
            back1[0, c] = 0.0
            back0[0, c] = 0.0
        for m in range(1, full1 + 1):
            b = 0
            while not (m >> b) & 1:
                b += 1
            for c in range(C):
                back1[m, c] = back1[m & (m - 1), c] + coef[c, dims[b]] * st[b]
        for m in range(1, full0 + 1):
            b = 0
            while not (m >> b) & 1:
                b += 1
            for c in range(C):
                back0[m, c] = back0[m & (m - 1), c] + coef[c, dims[a1 + b]] * st[a1 + b]
        best = np.inf
        for zi in range(a1 + a0):
            if a1 > 0 and zi >= a1:
                break  # the innermost loop is one of level 1's when it has any
            # the innermost loop's own step: its kind is the one eq. G compares with
            for c in range(C):
                sh[c] = coef[c, dims[zi]] * st[zi]
            ik, v = _step(sh, span, size)
            if ik < 0:
                ik = -2
            level1 = zi < a1
            z0 = 1 << (zi if level1 else zi - a1)
            carry = 0.0
            # phase 1 (level 1's loops, innermost first), then phase 2 (level 0's)
            for phase in range(2):
                if phase == 0 and not level1:
                    continue
                na = a1 if phase == 0 else a0
                off = 0 if phase == 0 else a1
                full = full1 if phase == 0 else full0
                for m in range(full + 1):
                    dp[m] = np.inf
                if phase == 0 or not level1:
                    start = z0
                    # the innermost loop: nothing inside it
                    for c in range(C):
                        sh[c] = coef[c, dims[zi]] * st[zi]
                    v = _step(sh, span, size)[1]
                    dp[start] = (p1 * p0 / nb[zi]) * (nb[zi] - 1.0) * v
                else:
                    start = 0
                    dp[0] = carry
                for m in range(start, full + 1):
                    if dp[m] == np.inf or (m & start) != start:
                        continue
                    inner = 1.0
                    for b in range(na):
                        if (m >> b) & 1:
                            inner *= nb[off + b]
                    for jb in range(na):
                        if (m >> jb) & 1:
                            continue
                        j = off + jb
                        for c in range(C):
                            bk = back1[m, c] if phase == 0 else back1[full1, c] + back0[m, c]
                            sh[c] = coef[c, dims[j]] * st[j] - bk
                        k, v = _step(sh, span, size)
                        if k >= 0 and ik >= 0 and k != ik:
                            v = size  # eq. G
                        outside = (p1 / (inner * nb[j])) * p0 if phase == 0 else p0 / (inner * nb[j])
                        cost = dp[m] + outside * (nb[j] - 1.0) * v
                        m2 = m | (1 << jb)
                        if cost < dp[m2]:
                            dp[m2] = cost
                carry = dp[full]
            if carry < best:
                best = carry
        out[i] = best + size
    return out


def two_level_least(span: FloatArray, coef: FloatArray, n1: FloatArray, s1: FloatArray, n0: FloatArray,
                    s0: FloatArray) -> FloatArray:
    """(n,) the least over the orders of levels 0 and 1 of one tensor's deliveries into level 2
    (argument 14d of `loopnest_bounds`): eq. D and eq. G over level 1's loops (innermost) and
    level 0's, a shortest path over the sets of each level's loops placed, level 1's first.

    Parameters
    ----------
    span
        (n, C) the spans of the tensor's coordinates over level 2's tile.
    coef
        (C, D) its coordinate coefficients.
    n1, s1, n0, s0
        (n, D) the bounds and strides of the loops of level 1 and of level 0.
    """
    f = np.ascontiguousarray
    return _two_level_least(f(span, dtype=np.float64), f(coef, dtype=np.float64), f(n1, dtype=np.float64),
                            f(s1, dtype=np.float64), f(n0, dtype=np.float64), f(s0, dtype=np.float64))


@njit(**_JIT)
def _two_level_least_many(span0: FloatArray, coef: FloatArray, w: FloatArray, n1: FloatArray, s1: FloatArray,
                          n0: FloatArray, s0: FloatArray) -> FloatArray:  # pragma: no cover - compiled
    n, D = n1.shape
    T, C, _ = coef.shape
    out = np.empty(n)
    dims = np.empty(2 * D, dtype=np.int64)
    nb = np.empty(2 * D)
    st = np.empty(2 * D)
    span = np.empty((T, C))
    size = np.empty(T)
    ik = np.empty(T, dtype=np.int64)
    nm = 1 << D
    back1 = np.zeros((nm, T, C))
    back0 = np.zeros((nm, T, C))
    dp = np.empty(nm)
    sh = np.empty(C)
    for i in range(n):
        a1, a0 = _active_loops(n1[i], s1[i], n0[i], s0[i], dims, nb, st)
        first = _first_tiles(span0[i], w[i], span, size, 0.0)
        if a1 + a0 == 0:
            out[i] = first
            continue
        full1 = (1 << a1) - 1
        full0 = (1 << a0) - 1
        p1, p0 = _loop_products(nb, a1, a0)
        _back_table(coef, dims, st, 0, a1, back1)
        _back_table(coef, dims, st, a1, a0, back0)
        best = np.inf
        for zi in range(a1 + a0):
            if a1 > 0 and zi >= a1:
                break  # the innermost loop is one of level 1's when it has any
            # the innermost loop's own step, per tensor: its kind is the one eq. G compares with,
            # its new words the first term of the path
            v0 = 0.0
            for t in range(T):
                for c in range(C):
                    sh[c] = coef[t, c, dims[zi]] * st[zi]
                k, v = _step(sh, span[t], size[t])
                ik[t] = k if k >= 0 else -2
                v0 += w[i, t] * v
            level1 = zi < a1
            z0 = 1 << (zi if level1 else zi - a1)
            carry = 0.0
            # phase 1 (level 1's loops, innermost first), then phase 2 (level 0's)
            for phase in range(2):
                if phase == 0 and not level1:
                    continue
                na = a1 if phase == 0 else a0
                off = 0 if phase == 0 else a1
                full = full1 if phase == 0 else full0
                for m in range(full + 1):
                    dp[m] = np.inf
                if phase == 0 or not level1:
                    start = z0
                    dp[start] = (p1 * p0 / nb[zi]) * (nb[zi] - 1.0) * v0
                else:
                    start = 0
                    dp[0] = carry
                for m in range(start, full + 1):
                    if dp[m] == np.inf or (m & start) != start:
                        continue
                    inner = 1.0
                    for b in range(na):
                        if (m >> b) & 1:
                            inner *= nb[off + b]
                    for jb in range(na):
                        if (m >> jb) & 1:
                            continue
                        j = off + jb
                        vs = 0.0
                        for t in range(T):
                            for c in range(C):
                                bk = back1[m, t, c] if phase == 0 else back1[full1, t, c] + back0[m, t, c]
                                sh[c] = coef[t, c, dims[j]] * st[j] - bk
                            k, v = _step(sh, span[t], size[t])
                            if k >= 0 and ik[t] >= 0 and k != ik[t]:
                                v = size[t]  # eq. G
                            vs += w[i, t] * v
                        outside = (p1 / (inner * nb[j])) * p0 if phase == 0 else p0 / (inner * nb[j])
                        cost = dp[m] + outside * (nb[j] - 1.0) * vs
                        m2 = m | (1 << jb)
                        if cost < dp[m2]:
                            dp[m2] = cost
                carry = dp[full]
            if carry < best:
                best = carry
        out[i] = best + first
    return out


def two_level_least_many(span: FloatArray, coef: FloatArray, w: FloatArray, n1: FloatArray, s1: FloatArray,
                         n0: FloatArray, s0: FloatArray) -> FloatArray:
    """(n,) the least over the orders of levels 0 and 1 of ``sum_t w[:, t] F_t``, ``F_t`` tensor
    ``t``'s deliveries into one instance of its next keeper below level 1 (argument 15 of
    `loopnest_bounds`: the tensors that bypass level 1 share its loop order): the shortest
    path of `two_level_least` with every tensor's terms summed at each step (each depends on
    the loop, the set of loops inside it and the innermost loop only). With one tensor and
    ``w = 1`` it equals `two_level_least` bit for bit; that one stays its own body because it
    runs at most nodes of argument 14d and this one's tensor loops cost 1.08-1.26x its time
    there (4,000 random 7-dim rows).

    Parameters
    ----------
    span
        (n, T, C) the spans of each tensor's coordinates over its keeper's tile.
    coef
        (T, C, D) their coordinate coefficients.
    w
        (n, T) energy per delivered word of each tensor (pJ; 0 leaves a tensor out).
    n1, s1, n0, s0
        (n, D) the bounds and strides of the loops of level 1 and of level 0 (common to every
        tensor: strides of the iteration space).
    """
    f = np.ascontiguousarray
    return _two_level_least_many(f(span, dtype=np.float64), f(coef, dtype=np.float64), f(w, dtype=np.float64),
                                 f(n1, dtype=np.float64), f(s1, dtype=np.float64), f(n0, dtype=np.float64),
                                 f(s0, dtype=np.float64))


@njit(**_JIT)
def _split_divisors(o: FloatArray, fixed1: FloatArray, divs: FloatArray, nd: IntArray) -> int:  # pragma: no cover
    """The level-1 factors each dim can take (``fixed1`` where > 0, else every divisor of ``o``,
    at most 64 kept in ``divs``; their count in ``nd``); returns the number of splits."""
    count = 1
    for d in range(len(o)):
        if fixed1[d] > 0.0:
            divs[d, 0] = fixed1[d]
            nd[d] = 1
        else:
            v = int(o[d])
            m = 0
            for x in range(1, v + 1):
                if v % x == 0:
                    if m < 64:
                        divs[d, m] = x
                    m += 1
            nd[d] = m
        count *= nd[d]
    return count


@njit(**_JIT)
def _split_at(at: IntArray, divs: FloatArray, o: FloatArray, s1: FloatArray, n1: FloatArray, n0: FloatArray,
              t1: FloatArray) -> None:  # pragma: no cover - compiled
    """The split ``at`` (an index into each dim's divisors): level 1's factors ``n1``, level 0's
    ``o / n1`` and level 1's tile ``s1 n1``."""
    for d in range(len(o)):
        n1[d] = divs[d, at[d]]
        n0[d] = o[d] / n1[d]
        t1[d] = s1[d] * n1[d]


@njit(**_JIT)
def _tile_words(kcoef: FloatArray, t1: FloatArray) -> float:  # pragma: no cover - compiled
    """The words of the tensors of ``kcoef`` in a tile ``t1`` (each coordinate's span multiplied)."""
    K, C, D = kcoef.shape
    need = 0.0
    for t in range(K):
        fp = 1.0
        for c in range(C):
            sp = 1.0
            for d in range(D):
                sp += kcoef[t, c, d] * (t1[d] - 1.0)
            fp *= sp
        need += fp
    return need


@njit(**_JIT)
def _next_split(at: IntArray, nd: IntArray) -> None:  # pragma: no cover - compiled
    """The next split: a mixed-radix counter over the dims' divisors."""
    d = 0
    while d < len(at):
        at[d] += 1
        if at[d] < nd[d]:
            break
        at[d] = 0
        d += 1


@njit(**_JIT)
def _two_level_split_least(span0: FloatArray, coef: FloatArray, w: FloatArray, s1: FloatArray, o: FloatArray,
                           fixed1: FloatArray, kcoef: FloatArray, cap: float,
                           most: int) -> FloatArray:  # pragma: no cover - compiled
    n, D = o.shape
    K, C, _ = kcoef.shape
    out = np.full(n, np.inf)
    divs = np.ones((D, 64))
    nd = np.ones(D, dtype=np.int64)
    at = np.zeros(D, dtype=np.int64)
    n1 = np.ones((1, D))
    n0 = np.ones((1, D))
    t1 = np.ones((1, D))
    for i in range(n):
        count = _split_divisors(o[i], fixed1[i], divs, nd)
        if count > most or nd.max() > 64:
            out[i] = -1.0  # too many splits: no bound here
            continue
        at[:] = 0
        for _ in range(count):
            _split_at(at, divs, o[i], s1[i], n1[0], n0[0], t1[0])
            if _tile_words(kcoef, t1[0]) <= cap:
                v = _two_level_least_many(span0[i:i + 1], coef, w[i:i + 1], n1, s1[i:i + 1], n0, t1)[0]
                if v < out[i]:
                    out[i] = v
            _next_split(at, nd)
    return out


def two_level_split_least(span: FloatArray, coef: FloatArray, w: FloatArray, s1: FloatArray, o: FloatArray,
                          fixed1: FloatArray, kcoef: FloatArray, cap: float, most: int) -> FloatArray:
    """(n,) argument 17 of `loopnest_bounds`: the least of `two_level_least_many` over the
    splits of each dim's temporal product ``o`` over levels 0 and 1 into level 1's factor
    ``n1`` (a divisor of ``o``, or ``fixed1`` where that is > 0) and level 0's ``o / n1``, with
    level 1's tile ``s1 n1`` (the strides of level 0's loops) holding the tensors of ``kcoef``
    in ``cap`` words; inf where no split fits, -1 where a row has more than ``most`` splits
    (not bounded).

    Parameters
    ----------
    span, coef, w
        As `two_level_least_many`: (n, T, C) spans over the keepers' tiles, (T, C, D)
        coefficients, (n, T) energies per delivered word.
    s1
        (n, D) the strides of level 1's loops (its spatial factors times level 2's tile).
    o, fixed1
        (n, D) each dim's temporal product over levels 0 and 1, and its level-1 factor where
        already chosen (0 where open).
    kcoef, cap
        (K, C, D) the coordinate coefficients of the tensors level 1 keeps, and its capacity
        in words (inf: unbounded).
    """
    f = np.ascontiguousarray
    return _two_level_split_least(f(span, dtype=np.float64), f(coef, dtype=np.float64), f(w, dtype=np.float64),
                                  f(s1, dtype=np.float64), f(o, dtype=np.float64), f(fixed1, dtype=np.float64),
                                  f(kcoef, dtype=np.float64), float(cap), int(most))


@njit(**_JIT)
def _two_level_least_below(span0: FloatArray, coef: FloatArray, w: FloatArray, n1: FloatArray, s1: FloatArray,
                           n0: FloatArray, s0: FloatArray, bound: float) -> float:  # pragma: no cover - compiled
    """``min(two_level_least_many(...)[0], bound)`` of one row ((1, ...) arrays): the same
    shortest paths, with every partial path that already reaches ``bound`` dropped. Each step
    adds ``outside (n_j - 1) sum_t w_t v_t >= 0``, so a dropped path ends at ``>= bound``, and
    the paths kept are summed in the same order as `_two_level_least_many`'s: below ``bound``
    the value is the same bit for bit."""
    D = n1.shape[1]
    T, C, _ = coef.shape
    dims = np.empty(2 * D, dtype=np.int64)
    nb = np.empty(2 * D)
    st = np.empty(2 * D)
    span = np.empty((T, C))
    size = np.empty(T)
    ik = np.empty(T, dtype=np.int64)
    sh = np.empty(C)
    a1, a0 = _active_loops(n1[0], s1[0], n0[0], s0[0], dims, nb, st)
    first = _first_tiles(span0[0], w[0], span, size, 0.0)
    if a1 + a0 == 0:
        return min(first, bound)
    lim = bound - first  # a path of at least this much ends at or above the bound
    if lim <= 0.0:
        return bound
    full1 = (1 << a1) - 1
    full0 = (1 << a0) - 1
    nm = 1 << max(a1, a0)
    back1 = np.zeros((full1 + 1, T, C))
    back0 = np.zeros((full0 + 1, T, C))
    dp = np.empty(nm)
    p1, p0 = _loop_products(nb, a1, a0)
    _back_table(coef, dims, st, 0, a1, back1)
    _back_table(coef, dims, st, a1, a0, back0)
    best = lim
    for zi in range(a1 + a0):
        if a1 > 0 and zi >= a1:
            break  # the innermost loop is one of level 1's when it has any
        v0 = 0.0
        for t in range(T):
            for c in range(C):
                sh[c] = coef[t, c, dims[zi]] * st[zi]
            k, v = _step(sh, span[t], size[t])
            ik[t] = k if k >= 0 else -2
            v0 += w[0, t] * v
        level1 = zi < a1
        z0 = 1 << (zi if level1 else zi - a1)
        carry = 0.0
        for phase in range(2):
            if phase == 0 and not level1:
                continue
            na = a1 if phase == 0 else a0
            off = 0 if phase == 0 else a1
            full = full1 if phase == 0 else full0
            for m in range(full + 1):
                dp[m] = np.inf
            if phase == 0 or not level1:
                start = z0
                dp[start] = (p1 * p0 / nb[zi]) * (nb[zi] - 1.0) * v0
            else:
                start = 0
                dp[0] = carry
            for m in range(start, full + 1):
                if dp[m] >= best or (m & start) != start:
                    continue
                inner = 1.0
                for b in range(na):
                    if (m >> b) & 1:
                        inner *= nb[off + b]
                for jb in range(na):
                    if (m >> jb) & 1:
                        continue
                    j = off + jb
                    vs = 0.0
                    for t in range(T):
                        for c in range(C):
                            bk = back1[m, t, c] if phase == 0 else back1[full1, t, c] + back0[m, t, c]
                            sh[c] = coef[t, c, dims[j]] * st[j] - bk
                        k, v = _step(sh, span[t], size[t])
                        if k >= 0 and ik[t] >= 0 and k != ik[t]:
                            v = size[t]  # eq. G
                        vs += w[0, t] * v
                    outside = (p1 / (inner * nb[j])) * p0 if phase == 0 else p0 / (inner * nb[j])
                    cost = dp[m] + outside * (nb[j] - 1.0) * vs
                    m2 = m | (1 << jb)
                    if cost < dp[m2]:
                        dp[m2] = cost
            carry = dp[full]
        if carry < best:
            best = carry
    return best + first if best < lim else bound


@njit(**_JIT)
def _two_level_split_least_below(span0: FloatArray, coef: FloatArray, w: FloatArray, s1: FloatArray,
                                 o: FloatArray, fixed1: FloatArray, kcoef: FloatArray, cap: float, most: int,
                                 limit: FloatArray, stop: bool) -> FloatArray:  # pragma: no cover - compiled
    n, D = o.shape
    K, C, _ = kcoef.shape
    out = np.full(n, np.inf)
    divs = np.ones((D, 64))
    nd = np.ones(D, dtype=np.int64)
    at = np.zeros(D, dtype=np.int64)
    n1 = np.ones((1, D))
    n0 = np.ones((1, D))
    t1 = np.ones((1, D))
    for i in range(n):
        count = _split_divisors(o[i], fixed1[i], divs, nd)
        if count > most or nd.max() > 64:
            out[i] = -1.0  # too many splits: no bound here
            continue
        at[:] = 0
        for _ in range(count):
            _split_at(at, divs, o[i], s1[i], n1[0], n0[0], t1[0])
            if _tile_words(kcoef, t1[0]) <= cap:
                v = _two_level_least_below(span0[i:i + 1], coef, w[i:i + 1], n1, s1[i:i + 1], n0, t1,
                                           min(out[i], limit[i]))
                if v < out[i]:
                    out[i] = v
                if stop and out[i] < limit[i]:
                    out[i] = -1.0  # a split under the limit: the row is not cut here, not bounded
                    break
            _next_split(at, nd)
    return out


def two_level_split_least_below(span: FloatArray, coef: FloatArray, w: FloatArray, s1: FloatArray, o: FloatArray,
                                fixed1: FloatArray, kcoef: FloatArray, cap: float, most: int, limit: FloatArray,
                                stop: bool = False) -> FloatArray:
    """(n,) `two_level_split_least` computed only up to a limit per row: ``min(least, limit)``,
    the least over the splits where it is below ``limit`` (the same value bit for bit) and
    ``limit`` where every split fitting level 1 reaches it (a lower bound of the least: the
    row is cut by it all the same). The splits are a branch and bound of their own: each
    split's shortest path (`_two_level_least_below`) drops the partial paths that reach the
    least so far or the limit. inf where no split fits and -1 where there are more than
    ``most``, as `two_level_split_least`; with ``stop``, also -1 (not bounded) on a row as soon as
    one split is under its limit (the row is not cut by argument 17, whose least is then not
    computed: a weaker bound, still a bound, for the search's order and certificate).

    Parameters
    ----------
    span, coef, w, s1, o, fixed1, kcoef, cap, most
        As `two_level_split_least`.
    limit
        (n,) the value of the least at which each row is cut (inf: no limit, the least itself).
    stop
        Give up on a row at its first split under ``limit``.
    """
    f = np.ascontiguousarray
    return _two_level_split_least_below(f(span, dtype=np.float64), f(coef, dtype=np.float64),
                                        f(w, dtype=np.float64), f(s1, dtype=np.float64), f(o, dtype=np.float64),
                                        f(fixed1, dtype=np.float64), f(kcoef, dtype=np.float64), float(cap),
                                        int(most), f(limit, dtype=np.float64), bool(stop))
