"""Argument 16 of `accelmap.costmodels.loopnest_bounds`, compiled: the words of the union of the
tiles that one instance of a level visits, per row of a batch of nodes, and its least over the
tiles that the level's capacity allows where that tile is still open.

`_bypass_bounds._coordinate_union` is the reference (numpy, one coordinate of one row); the
tests hold both equal (``tests/unit/search/test_exact.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from accelmap._typing import BoolArray, FloatArray, IntArray

__all__ = ["instance_unions"]


@njit(cache=True)
def _coord_union(nd: int, a: IntArray, cnt: IntArray, strd: IntArray, span: int, mark: Any, idx: IntArray) -> int:
    """Union of the intervals ``[sum_j a_j x_j, + span)``, ``x_j`` (``j < nd``) over the mixed radix
    of ``cnt[j, s]`` iterations at stride ``strd[j, s]``; ``mark`` and ``idx`` are scratch (``mark``
    all False, long enough, and left so)."""
    m = cnt.shape[1]
    top = 0
    for j in range(nd):
        for s in range(m):
            top += a[j] * (cnt[j, s] - 1) * strd[j, s]
    for j in range(nd):
        for s in range(m):
            idx[j, s] = 0
    while True:
        v = 0
        for j in range(nd):
            for s in range(m):
                v += a[j] * idx[j, s] * strd[j, s]
        mark[v] = True
        # odometer over every (dim, digit)
        j, s = nd - 1, m - 1
        while j >= 0:
            idx[j, s] += 1
            if idx[j, s] < cnt[j, s]:
                break
            idx[j, s] = 0
            s -= 1
            if s < 0:
                s = m - 1
                j -= 1
        if j < 0:
            break
    total = 0
    last = -1
    for v in range(top + 1):
        if mark[v]:
            total += span if last < 0 else min(v - last, span)
            last = v
            mark[v] = False
    return total


@njit(cache=True)
def _coord_distinct(nd: int, a: IntArray, g: IntArray, tile: IntArray, mark: Any) -> int:
    """Distinct offsets ``sum_j a_j tile_j y_j`` over ``0 <= y_j < g_j`` (eq. S of one coordinate);
    ``mark`` scratch as in `_coord_union`."""
    top = 0
    for j in range(nd):
        top += a[j] * tile[j] * (g[j] - 1)
    idx = np.zeros(nd, dtype=np.int64)
    while True:
        v = 0
        for j in range(nd):
            v += a[j] * tile[j] * idx[j]
        mark[v] = True
        j = nd - 1
        while j >= 0:
            idx[j] += 1
            if idx[j] < g[j]:
                break
            idx[j] = 0
            j -= 1
        if j < 0:
            break
    out = 0
    for v in range(top + 1):
        if mark[v]:
            out += 1
            mark[v] = False
    return out


@njit(cache=True)
def _instance_unions(ptr: IntArray, cdims: IntArray, ca: IntArray, tdims: IntArray, tc0: IntArray,
                     ostr0: IntArray, o: IntArray, lone: BoolArray, kcnt: IntArray, kstr: IntArray,
                     room: FloatArray, gdist: IntArray, enum: bool, max_cand: int) -> tuple[FloatArray, FloatArray]:
    n, D = tc0.shape
    mk = kcnt.shape[2]
    nc = len(ptr) - 1
    fills = np.zeros(n)
    reads = np.zeros(n)
    nt = len(tdims)
    w_max = 1
    for ci in range(nc):
        w_max = max(w_max, ptr[ci + 1] - ptr[ci])
    cnt = np.ones((w_max, mk + 1), dtype=np.int64)
    strd = np.ones((w_max, mk + 1), dtype=np.int64)
    idx = np.zeros((w_max, mk + 1), dtype=np.int64)
    tl = np.empty(w_max, dtype=np.int64)
    gg = np.empty(w_max, dtype=np.int64)
    a = np.empty(w_max, dtype=np.int64)
    mark = np.zeros(1024, dtype=np.bool_)
    ndiv = np.ones(nt, dtype=np.int64)
    divs = np.ones((nt, 64), dtype=np.int64)
    pick = np.zeros(nt, dtype=np.int64)
    mval = np.ones(D, dtype=np.int64)
    for i in range(n):
        if i > 0:
            # a row equal to the previous one over t's dims (siblings that differ in another dim)
            same = room[i] == room[i - 1]
            for q in range(nt):
                d = tdims[q]
                same = same and tc0[i, d] == tc0[i - 1, d] and ostr0[i, d] == ostr0[i - 1, d] and \
                    o[i, d] == o[i - 1, d] and lone[i, d] == lone[i - 1, d] and gdist[i, d] == gdist[i - 1, d]
                for s in range(mk):
                    same = same and kcnt[i, d, s] == kcnt[i - 1, d, s] and kstr[i, d, s] == kstr[i - 1, d, s]
            if same:
                fills[i] = fills[i - 1]
                reads[i] = reads[i - 1]
                continue
        # candidate m per dim of t: divisors of o (only 1 where the tile is known)
        total = 1
        for q in range(nt):
            d = tdims[q]
            ndiv[q] = 1
            divs[q, 0] = 1
            if enum:
                c = 0
                for x in range(1, o[i, d] + 1):
                    if o[i, d] % x == 0 and c < 64:
                        divs[q, c] = x
                        c += 1
                ndiv[q] = c
            total *= ndiv[q]
        if total > max_cand:
            continue  # too many tiles to try: no floor
        # scratch long enough for every coordinate at every tile tried (m = 1 spans the most)
        need = 1
        for ci in range(nc):
            top = 0
            for z in range(ptr[ci], ptr[ci + 1]):
                d = cdims[z]
                top += ca[z] * ((o[i, d] - 1) * ostr0[i, d] + tc0[i, d] * o[i, d] * max(gdist[i, d], 1))
                for s in range(mk):
                    top += ca[z] * (kcnt[i, d, s] - 1) * kstr[i, d, s]
            need = max(need, top + 1)
        if need > len(mark):
            mark = np.zeros(need, dtype=np.bool_)
        best_f = np.inf
        best_r = np.inf
        for q in range(nt):
            pick[q] = 0
        while True:
            for q in range(nt):
                mval[tdims[q]] = divs[q, pick[q]]
            # t's footprint at this tile of c
            fp = 1.0
            for ci in range(nc):
                sp = 1
                for z in range(ptr[ci], ptr[ci + 1]):
                    d = cdims[z]
                    sp += ca[z] * (tc0[i, d] * mval[d] - 1)
                fp *= sp
            if fp <= room[i] * (1.0 + 1e-12):
                u = 1.0
                dist = 1.0
                for ci in range(nc):
                    w = ptr[ci + 1] - ptr[ci]
                    sp = 1
                    for j in range(w):
                        d = cdims[ptr[ci] + j]
                        a[j] = ca[ptr[ci] + j]
                        tl[j] = tc0[i, d] * mval[d]
                        gg[j] = gdist[i, d]
                        sp += a[j] * (tl[j] - 1)
                        cnt[j, 0] = o[i, d] // mval[d] if lone[i, d] else 1
                        strd[j, 0] = ostr0[i, d] * mval[d]
                        for s in range(mk):
                            cnt[j, s + 1] = kcnt[i, d, s]
                            strd[j, s + 1] = kstr[i, d, s]
                    u *= _coord_union(w, a, cnt, strd, sp, mark, idx)
                    if enum:
                        dist *= _coord_distinct(w, a, gg, tl, mark)
                best_f = min(best_f, u)
                best_r = min(best_r, u * dist)
            else:
                # the footprint grows with every m: the innermost dim's larger divisors fit no better
                pick[nt - 1] = ndiv[nt - 1] - 1
            q = nt - 1
            while q >= 0:
                pick[q] += 1
                if pick[q] < ndiv[q]:
                    break
                pick[q] = 0
                q -= 1
            if q < 0:
                break
        if best_f < np.inf:
            fills[i] = best_f
            reads[i] = best_r
    return fills, reads


def instance_unions(ptr: IntArray, cdims: IntArray, ca: IntArray, tdims: IntArray, tc0: IntArray,
                    ostr0: IntArray, o: IntArray, lone: BoolArray, kcnt: IntArray, kstr: IntArray,
                    room: FloatArray, gdist: IntArray, enum: bool,
                    max_cand: int = 4096) -> tuple[FloatArray, FloatArray]:
    """Per row, the least words of the union of the tiles one instance of level ``c`` visits, and
    the least of that union times the distinct offsets of the level above ``c`` (eq. S).

    Tensor ``t``'s coordinates are ``cdims[ptr[i]:ptr[i+1]]`` with coefficients ``ca`` (disjoint
    dims, ``tdims`` all of them). Per row and dim: the tile of ``c`` is ``tc0 m`` and the open
    levels above it one loop of ``o / m`` iterations (1 where not ``lone``) at stride ``ostr0 m``,
    with the known levels between ``c`` and those adding ``kcnt`` (n, D, mk) iterations at
    strides ``kstr``. With ``enum`` (the tile of ``c`` open) ``m`` runs over the divisors of ``o``
    per dim of ``t`` whose footprint of ``t`` fits ``room``, the distinct offsets over the spatial
    factors ``gdist`` of the level above ``c`` (child tile ``tc0 m``) enter the second value, and a
    row with more than ``max_cand`` tiles to try gets 0 (no floor); without it ``m = 1``.
    Returns (fills, reads) (n,) float64: 0 where no tile fits."""
    return _instance_unions(ptr, cdims, ca, tdims, tc0, ostr0, o, lone, kcnt, kstr, room, gdist, enum, max_cand)
