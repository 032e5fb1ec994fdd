"""Compiled feasibility test of `accelmap.costmodels.loopnest_bounds.partial_bounds`.

`partial_bounds` first tests every row of a batch of partial mappings against the fanouts
and capacities of the levels (its "fanout" and "capacity" steps), then bounds the feasible
rows only. In the exact mapper most children fail that test at some depths (about three
in four on the eyeriss-like ResNet-50 layers), and the numpy form of the test builds its
float tiles and footprints on every row (about half of a call's time, ``docs/performance.md``,
"Exact mapper"). `feasible_rows` is the same test, row by row, so `partial_bounds` builds its
arrays on the feasible rows alone.

Every value the test forms is an integer far below ``2**53`` (factors, tile extents and
footprints, products and sums of them), so each float product and sum is exact and the
answer is the numpy form's, whatever the order of the operations; the numpy form stays the
executable reference (``loopnest_bounds._USE_KERNEL = False``), and
``tests/unit/search/test_exact.py`` holds both equal on sampled nodes of several spaces.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit

from accelmap._typing import BoolArray, FloatArray, IntArray

__all__ = ["feasible_rows", "coord_tables", "tables_of"]

_JIT: dict[str, Any] = {"cache": True}


def coord_tables(coords: tuple[tuple[tuple[IntArray, IntArray], ...], ...]) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """The moving coordinates of `BoundModel.coords` as arrays: ``first`` (T + 1,) the first
    coordinate of each tensor, ``n_terms`` (C,), ``dims`` and ``coefs`` (C, M) its dims and
    coefficients (M the most terms of a coordinate, zero-padded)."""
    flat = [c for per_t in coords for c in per_t]
    m = max((len(dims) for dims, _ in flat), default=1)
    dims = np.zeros((max(len(flat), 1), m), dtype=np.int64)
    coefs = np.zeros((max(len(flat), 1), m), dtype=np.int64)
    n_terms = np.zeros(max(len(flat), 1), dtype=np.int64)
    for i, (d, a) in enumerate(flat):
        dims[i, : len(d)] = d
        coefs[i, : len(a)] = a
        n_terms[i] = len(d)
    first = np.zeros(len(coords) + 1, dtype=np.int64)
    first[1:] = np.cumsum([len(per_t) for per_t in coords])
    return first, n_terms, dims, coefs


@lru_cache(maxsize=64)
def tables_of(bm: Any) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """`coord_tables` of a `BoundModel` (frozen, hashed by identity), made once per model."""
    return coord_tables(bm.coords)


@njit(**_JIT)
def _feasible(fac: IntArray, k: int, spatial: IntArray, has_spatial: bool, nxt: IntArray, has_next: bool,
              fan_x: IntArray, fan_y: IntArray, capacity: FloatArray, keep: BoolArray, first: IntArray,
              n_terms: IntArray, dims: IntArray, coefs: IntArray, out: BoolArray) -> None:
    n, L, D = fac.shape[0], fac.shape[1], fac.shape[2]
    T = keep.shape[1]
    tile = np.empty((L + 1, D))
    tile_outer = np.empty(D)
    base = np.empty(D)
    tile_sp = np.empty((max(k, 1), D))
    tl = np.empty(D)
    for i in range(n):
        ok = True
        # fanouts of the known levels, of the fixed spatial factors of the outer ones, and of
        # the factors chosen at level k-1
        for lv in range(k, L):
            px = 1
            py = 1
            for d in range(D):
                px *= fac[i, lv, d, 1]
                py *= fac[i, lv, d, 2]
            if px > fan_x[lv] or py > fan_y[lv]:
                ok = False
        if has_spatial:
            for lv in range(k):
                px = 1
                py = 1
                for d in range(D):
                    px *= spatial[i, lv, d, 0]
                    py *= spatial[i, lv, d, 1]
                if px > fan_x[lv] or py > fan_y[lv]:
                    ok = False
        if has_next and k > 0:
            px = 1
            py = 1
            for d in range(D):
                px *= nxt[i, d, 1]
                py *= nxt[i, d, 2]
            if px > fan_x[k - 1] or py > fan_y[k - 1]:
                ok = False
        if not ok:
            out[i] = False
            continue
        # tiles of the known levels; the outer levels' at least tile k (times level k-1's
        # chosen factors) and, where spatial factors are fixed, those of the levels below
        for d in range(D):
            tile[L, d] = 1.0
        for lv in range(L - 1, k - 1, -1):
            for d in range(D):
                tile[lv, d] = tile[lv + 1, d] * float(fac[i, lv, d, 0]) * (float(fac[i, lv, d, 1]) * float(fac[i, lv, d, 2]))
        for d in range(D):
            if has_next and k > 0:
                tile_outer[d] = tile[k, d] * float(nxt[i, d, 0] * nxt[i, d, 1] * nxt[i, d, 2])
                base[d] = tile[k, d] * float(nxt[i, d, 0])
            else:
                tile_outer[d] = tile[k, d]
                base[d] = tile[k, d]
        if has_spatial:
            for d in range(D):
                acc = base[d]
                for lv in range(k - 1, -1, -1):
                    acc = acc * float(spatial[i, lv, d, 0] * spatial[i, lv, d, 1])
                    tile_sp[lv, d] = acc
        for lv in range(L):
            if not np.isfinite(capacity[lv]):
                continue
            for d in range(D):
                if lv >= k:
                    tl[d] = tile[lv, d]
                elif has_spatial:
                    tl[d] = max(tile_sp[lv, d], tile_outer[d])
                else:
                    tl[d] = tile_outer[d]
            need = 0.0
            for t in range(T):
                if not keep[lv, t]:
                    continue
                fp = 1.0
                for c in range(first[t], first[t + 1]):
                    s = 0.0
                    for j in range(n_terms[c]):
                        s += (tl[dims[c, j]] - 1.0) * float(coefs[c, j])
                    fp = fp * (1.0 + s)
                need += fp
            if need > capacity[lv]:
                ok = False
                break
        out[i] = ok


def feasible_rows(fac: IntArray, k: int, spatial: IntArray | None, next_level: IntArray | None, fan_x: IntArray,
                  fan_y: IntArray, capacity: FloatArray, keep: BoolArray,
                  tables: tuple[IntArray, IntArray, IntArray, IntArray]) -> BoolArray:
    """(n,) the feasibility test of `partial_bounds` (same arguments; ``tables`` from
    `coord_tables` of the bound model's coordinates)."""
    n = len(fac)
    out = np.empty(n, dtype=np.bool_)
    dummy4 = np.ones((1, 1, 1, 2), dtype=np.int64)
    dummy3 = np.ones((1, 1, 3), dtype=np.int64)
    sp = dummy4 if spatial is None else np.asarray(spatial, dtype=np.int64)
    nx = dummy3 if next_level is None else np.asarray(next_level, dtype=np.int64)
    first, n_terms, dims, coefs = tables
    _feasible(np.asarray(fac, dtype=np.int64), int(k), sp, spatial is not None, nx, next_level is not None,
              np.asarray(fan_x, dtype=np.int64), np.asarray(fan_y, dtype=np.int64),
              np.asarray(capacity, dtype=np.float64), np.asarray(keep, dtype=np.bool_), first, n_terms, dims, coefs,
              out)
    return out
