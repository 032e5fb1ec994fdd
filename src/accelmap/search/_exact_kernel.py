"""Compiled parts of the exact mapper's node handling (`accelmap.search._exact_nodes`).

`gather_runs` fills one dim's column of the (n, L, D, 3) factor block of a batch of nodes
with the first rows of their runs: the numpy form, ``fac[:, :, d, :] = rows[starts[g]]``,
writes that column with a stride of D * 3 words and took about 2.4 ms of a 2.9-ms
`node_inputs` call on 8,192 nodes of a seven-dim layer (L = 5) on the reference machine;
the loop below writes the same words in the order they lie. `tests/unit/search/test_exact.py`
holds it equal to the numpy form.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.costmodels._bounds_kernel import row_feasible, row_scratch

__all__ = ["gather_runs", "gather_dim", "feasible_nodes", "fanout_ok"]

_JIT: dict[str, Any] = {"cache": True, "_nrt": False}  # as the other kernels: cached, no reference counting (allocates nothing)


@njit(**_JIT)
def _gather(fac: IntArray, d: int, rows: IntArray, starts: IntArray, g: IntArray) -> None:
    n, L = fac.shape[0], fac.shape[1]
    for i in range(n):
        r = starts[g[i]]
        for lv in range(L):
            for s in range(3):
                fac[i, lv, d, s] = rows[r, lv, s]


def gather_runs(fac: IntArray, d: int, rows: IntArray, starts: IntArray, g: IntArray) -> None:
    """``fac[:, :, d, :] = rows[starts[g]]`` in place (fac (n, L, D, 3) int64, rows (R, L, 3)
    int64, starts and g int64)."""
    _gather(fac, d, rows, starts, g)


@njit(**_JIT)
def _gather_dim(fac: IntArray, omin: IntArray, omax: IntArray, otmin: IntArray, nxt: IntArray, d: int,
                rows: IntArray, starts: IntArray, run_min: IntArray, run_max: IntArray, run_tmin: IntArray,
                g: IntArray, lv_next: int) -> None:
    n, L = fac.shape[0], fac.shape[1]
    for i in range(n):
        j = g[i]
        r = starts[j]
        for lv in range(L):
            for s in range(3):
                fac[i, lv, d, s] = rows[r, lv, s]
        if lv_next < 0:
            omin[i, d] = run_min[j]
            omax[i, d] = run_max[j]
            otmin[i, d] = run_tmin[j]
        else:
            t, x, y = rows[r, lv_next, 0], rows[r, lv_next, 1], rows[r, lv_next, 2]
            full = t * x * y
            omin[i, d] = run_min[j] * full
            omax[i, d] = run_max[j] * full
            otmin[i, d] = run_tmin[j] * t
            nxt[i, d, 0] = t
            nxt[i, d, 1] = x
            nxt[i, d, 2] = y


def gather_dim(fac: IntArray, omin: IntArray, omax: IntArray, otmin: IntArray, nxt: IntArray | None, d: int,
               rows: IntArray, starts: IntArray, run_min: IntArray, run_max: IntArray, run_tmin: IntArray,
               g: IntArray, lv_next: int) -> None:
    """One dim of `accelmap.search._exact_nodes.node_inputs` in one pass, in place: ``fac[:, :, d, :]
    = rows[starts[g]]`` as `gather_runs`, and the outer ranges ``omin[:, d] = run_min[g]``
    (``omax``, ``otmin`` alike); with ``lv_next >= 0`` (a run one depth deeper, its factors at
    level ``lv_next`` chosen) the ranges times those factors (their product; the temporal one
    for ``otmin``) and ``nxt[:, d, :]`` the factors. Integer arithmetic: equal to the numpy
    form (``tests/unit/search/test_exact.py``)."""
    none = np.zeros((1, 1, 3), dtype=np.int64)  # not written: lv_next < 0 wherever nxt is None
    _gather_dim(fac, omin, omax, otmin, none if nxt is None else nxt, d, rows, starts, run_min, run_max, run_tmin,
                np.ascontiguousarray(g), lv_next)


@njit(cache=True)
def _feasible_nodes(ids: IntArray, split: int, k: int, has_next: bool, rows: IntArray, starts: IntArray,
                    st_off: IntArray, fan_x: IntArray, fan_y: IntArray, capacity: FloatArray, keep: BoolArray,
                    first: IntArray, n_terms: IntArray, dims: IntArray, coefs: IntArray, known: BoolArray,
                    out: BoolArray) -> None:
    n, D = ids.shape[0], ids.shape[1]
    L = rows.shape[1]
    f = np.empty((L, D, 3), dtype=np.int64)
    sp = np.empty((L, D, 2), dtype=np.int64)
    nx = np.ones((D, 3), dtype=np.int64)
    tile, tile_outer, base, tile_sp, tl = row_scratch(L, D, k)
    for i in range(n):
        for d in range(D):
            r = starts[st_off[d] + ids[i, d]]
            for lv in range(L):
                for s in range(3):
                    f[lv, d, s] = rows[r, lv, s]
                sp[lv, d, 0] = f[lv, d, 1] if known[d] else 1
                sp[lv, d, 1] = f[lv, d, 2] if known[d] else 1
            if has_next and d < split:
                for s in range(3):
                    nx[d, s] = f[k - 1, d, s]
        out[i] = row_feasible(f, k, sp, True, nx, has_next, fan_x, fan_y, capacity, keep, first, n_terms, dims,
                              coefs, tile, tile_outer, base, tile_sp, tl)


def feasible_nodes(ids: IntArray, split: int, k: int, has_next: bool, rows: IntArray, starts: IntArray,
                   st_off: IntArray, known: BoolArray, bm: object, tables: tuple[IntArray, ...]) -> BoolArray:
    """(n,) the feasibility test of `partial_bounds` on the nodes ``ids`` (n, D), read from
    their runs without building `node_inputs`: ``rows`` every dim's factor rows stacked,
    ``starts`` the first row (in ``rows``) of each run of the depth a dim's ids refer to,
    dim ``d``'s from ``st_off[d]``; ``known`` (D,) the dims whose spatial factors are fixed,
    ``has_next`` whether level k-1's factors of the dims ``< split`` are chosen (as
    `node_inputs`' ``next_level``). The same per-row test as
    `accelmap.costmodels._bounds_kernel.feasible_rows` (`row_feasible`)."""
    out = np.empty(len(ids), dtype=np.bool_)
    first, n_terms, dims, coefs = tables
    _feasible_nodes(ids, split, k, has_next, rows, starts, st_off, bm.fan_x, bm.fan_y,  # type: ignore[attr-defined]
                    bm.capacity, bm.keep, first, n_terms, dims, coefs, known, out)  # type: ignore[attr-defined]
    return out


@njit(**_JIT)
def _fanout_ok(ids: IntArray, chosen: int, sp_x: IntArray, sp_y: IntArray, off: IntArray, fan_x: IntArray,
               fan_y: IntArray, out: BoolArray) -> None:
    n, L = ids.shape[0], sp_x.shape[1]
    for i in range(n):
        ok = True
        for lv in range(L):
            px = 1
            py = 1
            for d in range(chosen):
                r = off[d] + ids[i, d]
                px *= sp_x[r, lv]
                py *= sp_y[r, lv]
            if px > fan_x[lv] or py > fan_y[lv]:
                ok = False
                break
        out[i] = ok


def fanout_ok(ids: IntArray, chosen: int, sp_x: IntArray, sp_y: IntArray, off: IntArray, fan_x: IntArray,
              fan_y: IntArray) -> BoolArray:
    """(n,) `accelmap.search._exact_nodes._fanout_ok` row by row: whether the spatial factors of the
    dims ``< chosen`` of the nodes ``ids`` (n, D) (depth-1 run indices) fit every level's
    fanout. ``sp_x``, ``sp_y`` (G, L) every dim's runs' spatial factors stacked (`DimTree.sp_x`),
    dim ``d``'s from ``off[d]``. Integer products, as the numpy form (equal:
    ``tests/unit/search/test_exact.py``)."""
    out = np.empty(len(ids), dtype=np.bool_)
    _fanout_ok(np.ascontiguousarray(ids, dtype=np.int64), int(chosen), sp_x, sp_y, off,
               np.asarray(fan_x, dtype=np.int64), np.asarray(fan_y, dtype=np.int64), out)
    return out
