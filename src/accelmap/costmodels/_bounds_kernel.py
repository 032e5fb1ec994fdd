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
executable reference (``_bound_switches._USE_KERNEL = False``), and
``tests/unit/search/test_exact.py`` holds both equal on sampled nodes of several spaces.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit

from accelmap._typing import BoolArray, FloatArray, IntArray

__all__ = ["feasible_rows", "coord_tables", "tables_of", "row_feasible"]

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
def row_feasible(f: IntArray, k: int, sp: IntArray, has_spatial: bool, nx: IntArray, has_next: bool,
                 fan_x: IntArray, fan_y: IntArray, capacity: FloatArray, keep: BoolArray, first: IntArray,
                 n_terms: IntArray, dims: IntArray, coefs: IntArray, tile: FloatArray, tile_outer: FloatArray,
                 base: FloatArray, tile_sp: FloatArray, tl: FloatArray) -> bool:
    """One row of `feasible_rows`: ``f`` (L, D, 3) its factors, ``sp`` (L, D, 2) its fixed
    spatial factors, ``nx`` (D, 3) level k-1's chosen factors; the last five are scratch
    (L + 1, D), (D,), (D,), (max(k, 1), D), (D,)."""
    L, D = f.shape[0], f.shape[1]
    T = keep.shape[1]
    # fanouts of the known levels, of the fixed spatial factors of the outer ones, and of
    # the factors chosen at level k-1
    for lv in range(k, L):
        px = 1
        py = 1
        for d in range(D):
            px *= f[lv, d, 1]
            py *= f[lv, d, 2]
        if px > fan_x[lv] or py > fan_y[lv]:
            return False
    if has_spatial:
        for lv in range(k):
            px = 1
            py = 1
            for d in range(D):
                px *= sp[lv, d, 0]
                py *= sp[lv, d, 1]
            if px > fan_x[lv] or py > fan_y[lv]:
                return False
    if has_next and k > 0:
        px = 1
        py = 1
        for d in range(D):
            px *= nx[d, 1]
            py *= nx[d, 2]
        if px > fan_x[k - 1] or py > fan_y[k - 1]:
            return False
    # tiles of the known levels; the outer levels' at least tile k (times level k-1's
    # chosen factors) and, where spatial factors are fixed, those of the levels below
    for d in range(D):
        tile[L, d] = 1.0
    for lv in range(L - 1, k - 1, -1):
        for d in range(D):
            tile[lv, d] = tile[lv + 1, d] * float(f[lv, d, 0]) * (float(f[lv, d, 1]) * float(f[lv, d, 2]))
    for d in range(D):
        if has_next and k > 0:
            tile_outer[d] = tile[k, d] * float(nx[d, 0] * nx[d, 1] * nx[d, 2])
            base[d] = tile[k, d] * float(nx[d, 0])
        else:
            tile_outer[d] = tile[k, d]
            base[d] = tile[k, d]
    if has_spatial:
        for d in range(D):
            acc = base[d]
            for lv in range(k - 1, -1, -1):
                acc = acc * float(sp[lv, d, 0] * sp[lv, d, 1])
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
            return False
    return True


@njit(**_JIT)
def row_scratch(L: int, D: int, k: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """The scratch arrays `row_feasible` takes last, for L levels, D dims and level k."""
    return np.empty((L + 1, D)), np.empty(D), np.empty(D), np.empty((max(k, 1), D)), np.empty(D)


@njit(**_JIT)
def _feasible(fac: IntArray, k: int, spatial: IntArray, has_spatial: bool, nxt: IntArray, has_next: bool,
              fan_x: IntArray, fan_y: IntArray, capacity: FloatArray, keep: BoolArray, first: IntArray,
              n_terms: IntArray, dims: IntArray, coefs: IntArray, out: BoolArray) -> None:
    n, L, D = fac.shape[0], fac.shape[1], fac.shape[2]
    tile, tile_outer, base, tile_sp, tl = row_scratch(L, D, k)
    for i in range(n):
        out[i] = row_feasible(fac[i], k, spatial[i if has_spatial else 0], has_spatial, nxt[i if has_next else 0],
                              has_next, fan_x, fan_y, capacity, keep, first, n_terms, dims, coefs, tile, tile_outer,
                              base, tile_sp, tl)


def feasible_rows(fac: IntArray, k: int, spatial: IntArray | None, next_level: IntArray | None, fan_x: IntArray,
                  fan_y: IntArray, capacity: FloatArray, keep: BoolArray,
                  tables: tuple[IntArray, IntArray, IntArray, IntArray]) -> BoolArray:
    """(n,) the feasibility test of `partial_bounds` (same arguments; ``tables`` from
    `coord_tables` of the bound model's coordinates)."""
    n = len(fac)
    out = np.empty(n, dtype=np.bool_)
    dummy4 = np.ones((1, 1, 1, 2), dtype=np.int64)
    dummy3 = np.ones((1, 1, 3), dtype=np.int64)
    # C-contiguous int64 whatever the caller's layout (a view, a broadcast): one compiled
    # specialization, never compiled again inside a timed search
    sp = dummy4 if spatial is None else np.ascontiguousarray(spatial, dtype=np.int64)
    nx = dummy3 if next_level is None else np.ascontiguousarray(next_level, dtype=np.int64)
    first, n_terms, dims, coefs = tables
    _feasible(np.ascontiguousarray(fac, dtype=np.int64), int(k), sp, spatial is not None, nx, next_level is not None,
              np.asarray(fan_x, dtype=np.int64), np.asarray(fan_y, dtype=np.int64),
              np.asarray(capacity, dtype=np.float64), np.asarray(keep, dtype=np.bool_), first, n_terms, dims, coefs,
              out)
    return out
