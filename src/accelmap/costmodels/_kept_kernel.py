"""Compiled least over the orders of levels 0 and 1 of the words that cross them, the tensors
that bypass level 1 and those it keeps together.

Argument 19 of `accelmap.costmodels.loopnest_bounds`. With no fanout above level 1 and every
factor known, two kinds of deliveries follow from the loop orders of levels 0 and 1 alone
(eq. D and eq. G of `accelmap.costmodels.loopnest`):

* a tensor that bypasses level 1 (kept at level 0 and next at ``c >= 2``, no loop over its dims
  between): its deliveries ``F_t`` into one instance of ``c``, over the loops of both levels
  (level 1's strides ``s1``, level 0's ``s0``), as `_order_kernel.two_level_least_many` counts
  them;
* a tensor kept at levels 0 and 1: its deliveries ``F_1`` into level 1, over level 0's loops
  alone (strides ``s0``, the level-1 tile), as `_order_kernel.order_least` counts them.

Every mapping has one order per level for all of them, so the least over both orders of the
weighted sum bounds their energy together, where the two kernels above take each kind at its
own least order. The least is a shortest path as in `two_level_least_many`: level 1's loops
placed innermost first, then level 0's, each step's term depending on its loop, the set of
loops inside it and the innermost loop (of both levels for the bypassing tensors, eq. G; of
level 0 for the kept ones, so level 0's innermost loop is enumerated too). The readable
reference is every pair of permutations with each tensor's deliveries written out
(``tests/unit/search/test_exact.py``).

Every value is an integer far below ``2**53``, so the float sums are exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from accelmap._typing import FloatArray
from accelmap.costmodels._order_kernel import (
    _active_loops,
    _back_table,
    _first_tiles,
    _loop_products,
    _next_split,
    _split_at,
    _split_divisors,
    _step,
    _tile_words,
)

__all__ = ["kept_bypass_least", "kept_split_least"]

_JIT: dict[str, Any] = {"cache": True}


@njit(**_JIT)
def _kept_one(span_b: FloatArray, coef_b: FloatArray, w_b: FloatArray, span_k: FloatArray, coef_k: FloatArray,
              w_k: FloatArray, n1: FloatArray, s1: FloatArray, n0: FloatArray, s0: FloatArray, dims: Any, nb: FloatArray,
              st: FloatArray, size_b: FloatArray, size_k: FloatArray, ik: Any, ikk: Any, back1: FloatArray,
              back0: FloatArray, backk: FloatArray, dp: FloatArray, dp0: FloatArray, sh: FloatArray, seen: Any,
              seen_v: FloatArray, cap_v: float) -> float:  # pragma: no cover - compiled
    """One row of `kept_bypass_least` (its arguments the row's, and work arrays); inf where the
    least is not below ``cap_v`` (every term is >= 0, so a partial path at or above it is dropped)."""
    D = n1.shape[0]
    TB, C, _ = coef_b.shape
    TK = coef_k.shape[0]
    a1, a0 = _active_loops(n1, s1, n0, s0, dims, nb, st)
    first = _first_tiles(span_b, w_b, span_b, size_b, 0.0)
    first = _first_tiles(span_k, w_k, span_k, size_k, first)
    if first >= cap_v:
        return np.inf
    if a1 + a0 == 0:
        return first
    full1 = (1 << a1) - 1
    full0 = (1 << a0) - 1
    p1, p0 = _loop_products(nb, a1, a0)
    _back_table(coef_b, dims, st, 0, a1, back1)
    _back_table(coef_b, dims, st, a1, a0, back0)
    _back_table(coef_k, dims, st, a1, a0, backk)
    best = cap_v - first  # the paths to beat (inf: every path)
    slide_k = False
    for t in range(TK):
        for c in range(C):
            nd = 0
            for d in range(D):
                if coef_k[t, c, d] != 0.0:
                    nd += 1
            if nd > 1:
                slide_k = True
    n_seen = 0
    # the innermost loop of both levels: one of level 1's when it has any (else level 0's
    # innermost, chosen below)
    for zi in range(a1 if a1 > 0 else 1):
        carry = 0.0
        if a1 > 0:
            v0 = 0.0
            for t in range(TB):
                for c in range(C):
                    sh[c] = coef_b[t, c, dims[zi]] * st[zi]
                k, v = _step(sh, span_b[t], size_b[t])
                ik[t] = k if k >= 0 else -2
                v0 += w_b[t] * v
            for m in range(full1 + 1):
                dp[m] = np.inf
            start = 1 << zi
            dp[start] = (p1 * p0 / nb[zi]) * (nb[zi] - 1.0) * v0
            for m in range(start, full1 + 1):
                if dp[m] >= best or (m & start) != start:
                    continue
                inner = 1.0
                for b in range(a1):
                    if (m >> b) & 1:
                        inner *= nb[b]
                for jb in range(a1):
                    if (m >> jb) & 1:
                        continue
                    vs = 0.0
                    for t in range(TB):
                        for c in range(C):
                            sh[c] = coef_b[t, c, dims[jb]] * st[jb] - back1[m, t, c]
                        k, v = _step(sh, span_b[t], size_b[t])
                        if k >= 0 and ik[t] >= 0 and k != ik[t]:
                            v = size_b[t]  # eq. G
                        vs += w_b[t] * v
                    cost = dp[m] + (p1 / (inner * nb[jb])) * p0 * (nb[jb] - 1.0) * vs
                    m2 = m | (1 << jb)
                    if cost < dp[m2]:
                        dp[m2] = cost
            carry = dp[full1]
            if carry >= best:
                continue  # level 0's loops add terms >= 0
        if a0 == 0:
            if carry < best:
                best = carry
            continue
        if a1 > 0:  # level 0's part depends on this innermost loop only through the kinds ik
            hit = -1
            for u in range(n_seen):
                same = True
                for t in range(TB):
                    if seen[u, t] != ik[t]:
                        same = False
                        break
                if same:
                    hit = u
                    break
            if hit >= 0:
                if carry + seen_v[hit] < best:
                    best = carry + seen_v[hit]
                continue
        part = np.inf
        # level 0's innermost loop: the kept tensors' eq. G compares with it; where none of them
        # has a coordinate over two dims none of their steps is a slide (a one-dim coordinate's
        # step is a whole span or more), eq. G never applies and one pass places every loop
        one_pass = a1 > 0 and not slide_k
        for zb in range(1 if one_pass else a0):
            j0 = a1 + zb
            for t in range(TK):
                if one_pass:
                    ikk[t] = -2
                    continue
                for c in range(C):
                    sh[c] = coef_k[t, c, dims[j0]] * st[j0]
                k, v = _step(sh, span_k[t], size_k[t])
                ikk[t] = k if k >= 0 else -2
            if a1 == 0:  # then it is the innermost of both levels
                for t in range(TB):
                    for c in range(C):
                        sh[c] = coef_b[t, c, dims[j0]] * st[j0]
                    k, v = _step(sh, span_b[t], size_b[t])
                    ik[t] = k if k >= 0 else -2
            for m in range(full0 + 1):
                dp0[m] = np.inf
            start = 1 << zb
            lim = best - carry if part == np.inf else min(best - carry, part)
            if one_pass:
                start = 0
            for m in range(full0 + 1):
                if m != 0 and (dp0[m] >= lim or (m & start) != start):
                    continue
                base = 0.0 if m == 0 else dp0[m]
                inner = 1.0
                for b in range(a0):
                    if (m >> b) & 1:
                        inner *= nb[a1 + b]
                for jb in range(a0):
                    if (m >> jb) & 1 or (m == 0 and jb != zb and not one_pass):
                        continue
                    j = a1 + jb
                    vs = 0.0
                    for t in range(TB):
                        for c in range(C):
                            sh[c] = coef_b[t, c, dims[j]] * st[j] - back1[full1, t, c] - back0[m, t, c]
                        k, v = _step(sh, span_b[t], size_b[t])
                        if k >= 0 and ik[t] >= 0 and k != ik[t]:
                            v = size_b[t]  # eq. G
                        vs += w_b[t] * v
                    for t in range(TK):
                        for c in range(C):
                            sh[c] = coef_k[t, c, dims[j]] * st[j] - backk[m, t, c]
                        k, v = _step(sh, span_k[t], size_k[t])
                        if k >= 0 and ikk[t] >= 0 and k != ikk[t]:
                            v = size_k[t]  # eq. G, against level 0's innermost loop
                        vs += w_k[t] * v
                    cost = base + (p0 / (inner * nb[j])) * (nb[j] - 1.0) * vs
                    m2 = m | (1 << jb)
                    if cost < dp0[m2]:
                        dp0[m2] = cost
            if dp0[full0] < part:
                part = dp0[full0]
        if a1 > 0 and carry + part < best:  # exact only below the limit: kept only then
            for t in range(TB):
                seen[n_seen, t] = ik[t]
            seen_v[n_seen] = part
            n_seen += 1
        if carry + part < best:
            best = carry + part
    if best >= cap_v - first:
        return np.inf
    return best + first


@njit(**_JIT)
def _work(D: int, TB: int, TK: int, C: int) -> Any:  # pragma: no cover - compiled
    nm = 1 << D
    return (np.empty(2 * D, dtype=np.int64), np.empty(2 * D), np.empty(2 * D), np.empty(TB), np.empty(TK),
            np.empty(TB, dtype=np.int64), np.empty(TK, dtype=np.int64), np.zeros((nm, TB, C)), np.zeros((nm, TB, C)),
            np.zeros((nm, TK, C)), np.empty(nm), np.empty(nm), np.empty(C), np.empty((2 * D, TB), dtype=np.int64),
            np.empty(2 * D))


@njit(**_JIT)
def _kept_bypass_least(span_b: FloatArray, coef_b: FloatArray, w_b: FloatArray, span_k: FloatArray,
                       coef_k: FloatArray, w_k: FloatArray, n1: FloatArray, s1: FloatArray, n0: FloatArray,
                       s0: FloatArray) -> FloatArray:  # pragma: no cover - compiled
    n, D = n1.shape
    TB, C, _ = coef_b.shape
    dims, nb, st, size_b, size_k, ik, ikk, back1, back0, backk, dp, dp0, sh, seen, seen_v = \
        _work(D, TB, coef_k.shape[0], C)
    out = np.empty(n)
    for i in range(n):
        out[i] = _kept_one(span_b[i], coef_b, w_b[i], span_k[i], coef_k, w_k[i], n1[i], s1[i], n0[i], s0[i], dims, nb,
                           st, size_b, size_k, ik, ikk, back1, back0, backk, dp, dp0, sh, seen, seen_v, np.inf)
    return out


def kept_bypass_least(span_b: FloatArray, coef_b: FloatArray, w_b: FloatArray, span_k: FloatArray,
                      coef_k: FloatArray, w_k: FloatArray, n1: FloatArray, s1: FloatArray, n0: FloatArray,
                      s0: FloatArray) -> FloatArray:
    """(n,) the least over the orders of levels 0 and 1 of ``sum_b w_b F_b + sum_k w_k F1_k``:
    ``F_b`` a bypassing tensor's deliveries into one instance of its keeper below level 1 (over
    both levels' loops), ``F1_k`` a kept tensor's deliveries into level 1 (over level 0's).

    Parameters
    ----------
    span_b, coef_b, w_b
        (n, TB, C) spans of the bypassing tensors' coordinates over their keepers' tiles,
        (TB, C, D) their coefficients, (n, TB) energy per delivered word (pJ; 0 leaves one out).
    span_k, coef_k, w_k
        (n, TK, C) spans of the kept tensors' coordinates over level 1's tile, (TK, C, D) their
        coefficients, (n, TK) energy per delivered word.
    n1, s1, n0, s0
        (n, D) the bounds and strides of the loops of level 1 and of level 0 (``s0`` is level
        1's tile).
    """
    f = np.ascontiguousarray
    return _kept_bypass_least(f(span_b, dtype=np.float64), f(coef_b, dtype=np.float64), f(w_b, dtype=np.float64),
                              f(span_k, dtype=np.float64), f(coef_k, dtype=np.float64), f(w_k, dtype=np.float64),
                              f(n1, dtype=np.float64), f(s1, dtype=np.float64), f(n0, dtype=np.float64),
                              f(s0, dtype=np.float64))


@njit(**_JIT)
def _kept_split_least(span_b: FloatArray, coef_b: FloatArray, w_b: FloatArray, coef_k: FloatArray, w_k: FloatArray,
                      s1: FloatArray, o: FloatArray, fixed1: FloatArray, kcoef: FloatArray, cap: float,
                      most: int) -> FloatArray:  # pragma: no cover - compiled
    n, D = o.shape
    K, C, _ = kcoef.shape
    TK = coef_k.shape[0]
    out = np.full(n, np.inf)
    divs = np.ones((D, 64))
    nd = np.ones(D, dtype=np.int64)
    at = np.zeros(D, dtype=np.int64)
    n1 = np.ones((1, D))
    n0 = np.ones((1, D))
    t1 = np.ones((1, D))
    span_k = np.ones((1, TK, C))
    dims, nb, st, size_b, size_k, ik, ikk, back1, back0, backk, dp, dp0, sh, seen, seen_v = \
        _work(D, coef_b.shape[0], TK, C)
    for i in range(n):
        count = _split_divisors(o[i], fixed1[i], divs, nd)
        if count > most or nd.max() > 64:
            out[i] = -1.0  # too many splits: no bound here
            continue
        at[:] = 0
        for _ in range(count):
            _split_at(at, divs, o[i], s1[i], n1[0], n0[0], t1[0])
            if _tile_words(kcoef, t1[0]) <= cap:
                for t in range(TK):
                    for c in range(C):
                        sp = 1.0
                        for d in range(D):
                            sp += coef_k[t, c, d] * (t1[0, d] - 1.0)
                        span_k[0, t, c] = sp
                v = _kept_one(span_b[i], coef_b, w_b[i], span_k[0], coef_k, w_k[i], n1[0], s1[i], n0[0], t1[0], dims,
                              nb, st, size_b, size_k, ik, ikk, back1, back0, backk, dp, dp0, sh, seen, seen_v, out[i])
                if v < out[i]:
                    out[i] = v
            _next_split(at, nd)
    return out


def kept_split_least(span_b: FloatArray, coef_b: FloatArray, w_b: FloatArray, coef_k: FloatArray, w_k: FloatArray,
                     s1: FloatArray, o: FloatArray, fixed1: FloatArray, kcoef: FloatArray, cap: float,
                     most: int) -> FloatArray:
    """(n,) argument 19 with level 1's factors open (as argument 17 of `loopnest_bounds`): the
    least of `kept_bypass_least` over the splits of each dim's temporal product ``o`` over
    levels 0 and 1 into level 1's factor ``n1`` (a divisor of ``o``, or ``fixed1`` where that is
    > 0) and level 0's ``o / n1``, with level 1's tile ``s1 n1`` holding the tensors of
    ``kcoef`` in ``cap`` words; the kept tensors' spans are taken over that tile. inf where no
    split fits, -1 where a row has more than ``most`` splits (not bounded).

    Parameters
    ----------
    span_b, coef_b, w_b
        As `kept_bypass_least`: the bypassing tensors.
    coef_k, w_k
        (TK, C, D) the kept tensors' coefficients, (n, TK) their energy per delivered word.
    s1, o, fixed1
        (n, D) the strides of level 1's loops, each dim's temporal product over levels 0 and 1,
        and its level-1 factor where chosen (0 where open).
    kcoef, cap
        (K, C, D) the coefficients of the tensors level 1 keeps, and its capacity in words.
    """
    f = np.ascontiguousarray
    return _kept_split_least(f(span_b, dtype=np.float64), f(coef_b, dtype=np.float64), f(w_b, dtype=np.float64),
                             f(coef_k, dtype=np.float64), f(w_k, dtype=np.float64), f(s1, dtype=np.float64),
                             f(o, dtype=np.float64), f(fixed1, dtype=np.float64), f(kcoef, dtype=np.float64),
                             float(cap), int(most))
