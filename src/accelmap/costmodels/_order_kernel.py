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

from accelmap._typing import FloatArray

__all__ = ["order_least"]

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
