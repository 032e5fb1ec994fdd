"""Compiled MapSpace operations: decode, the legality check of decoded points, the neighbour
moves and the repair towards legality, one encoded point per loop iteration.

This is the fast path of `accelmap.mapper.space.MapSpace`. *What* a decode, a check or a
move is stays defined once, in the batched numpy functions of `accelmap.mapper._space_numpy`
(the executable reference: `decode`, `fast_reasons`, `factor_moves`, `swap_moves`,
`push_out`); this module redoes each of them row by row in integer arithmetic that numba
compiles (``@njit(cache=True)``), and the property tests
(`tests/property/test_space_kernels_equal_numpy.py`) hold both equal, bit for bit.

Random numbers are never chosen here. The caller draws them from its
`numpy.random.Generator` exactly as the numpy path does (same calls, same shapes, same
order), or the driver draws them from that generator in the same order, and the kernels
read them where the numpy path reads them, so both engines give the same neighbours from
the same generator state, and a search takes the same path on either engine.

The per-row functions (``row_lookup``, ``decode_row``, ``reasons_row``, ``factor_move_row``,
``swap_row``) are ``register_jitable``: they take only arrays and scalars and allocate
nothing (scratch comes from the caller), so the same source can also be compiled as CUDA
device functions. The drivers (``*_rows``, ``push_out_rows``) loop over rows on the calling
thread without numba's reference counting (``_nrt=False``; every array, scratch included,
comes from the host wrappers), except `moves_encoded`, whose array draws from numba's
``Generator`` allocate. No driver is threaded: on the reference machine (2 cores, shared)
threaded decode and check drivers were slower than the serial ones at 4,096-16,384 rows (the
rows are a few hundred ns each, and the output arrays' first touch dominates).

Compile time (every fresh install and every CI run compiles these once; `cache=True` keeps
the result): the decode and check drivers inline their row functions at numba's untyped
stage (``njit(inline="always")`` aliases), not through ``register_jitable(inline=...)``,
which compiles the row function once more only to type it; each driver has one signature,
its read-only inputs always handed in as read-only arrays (`_in`); and the repair loop
checks its active rows through one compiled call. ``bench_mapspace.py --compile`` measures
the first calls.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

import numpy as np
from numba import njit
from numba.extending import register_jitable

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import SpecError

__all__ = ["ENGINES", "ENV_VAR", "SpaceConsts", "resolve_space_engine"]

#: engines of the MapSpace operations; ``cuda`` runs them compiled on the host (a MapSpace
#: answers with host arrays; the device loop of ``--device cuda`` has its own kernels)
ENGINES = ("cpu", "numpy", "cuda")
ENV_VAR = "ACCELMAP_KERNELS"  # the variable the cost models read as well

# Reason codes (the values of `accelmap.mapper.check.Reason`), as plain ints for numba.
_FANOUT, _CAPACITY, _UTILIZATION = 5, 6, 7

_JIT = {"cache": True, "_nrt": False}


def resolve_space_engine(engine: str | None) -> str:
    """The engine of the MapSpace operations: ``engine`` if given, else ``$ACCELMAP_KERNELS``,
    else ``"cpu"`` (the same rule as the cost models' engine choice)."""
    where = "engine argument"
    if engine is None:
        engine = os.environ.get(ENV_VAR, "").strip().lower() or "cpu"
        where = f"environment variable {ENV_VAR}"
    if engine not in ENGINES:
        raise SpecError(f"{where}: unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    return engine


@dataclass(frozen=True, slots=True, eq=False)
class SpaceConsts:
    """Everything of one MapSpace the kernels read, as contiguous int64/float64/bool arrays.

    Factor tables: ``flat`` (R, S) every dim's table rows (S = 3 L slots), ``offsets`` (D,)
    where each dim's rows start, ``lvl_t`` (L R,) / ``lvl_s`` (L R, 2) the temporal and
    spatial factors of row r at level l at ``l R + r``, ``tile_dims``/``tile_cols`` (nt,)
    the dims with a tile parameter and its column, ``slot_exists`` (D, S), ``primes``/
    ``n_primes`` the distinct primes of every factor value. Row index (`_RowIndex`):
    ``keys``/``krows`` (R,) sorted hash keys and their rows, ``mult`` (S,) / ``dim_mult`` (D,)
    the hash multipliers (uint64 bits as int64: products wrap alike). Loop orders: ``n_free``
    (L,), ``free_pad`` (L, M) the free dims, ``outer_n``/``inner_n`` (L,) and
    ``outer_pad``/``inner_pad`` (L, D) the pinned dims, ``order_cols`` (L, max(M-1, 1)) the
    Lehmer digit columns, ``order_tab`` (N, M) int8 all permutations of 0..m-1 in
    lexicographic order for every m of a level with at most `_PERM_TABLE_MAX_M` free loops,
    level lv's block from ``order_off[lv]`` (-1: decoded digit by digit), ``order_w`` (L, max(M-1, 1)) the digits' weights (m-1-p)!, ``free_mask`` (L, D), ``levels_ok`` (L,) levels with two free loops.
    Keep bits: ``keep_base`` (L, T), ``keep_free`` (nk, 2), ``keep_cols`` (nk,). Check:
    ``row_sxy`` (R, nf) spatial factors of the (level, axis) pairs ``fan_cols`` with a fanout
    ``fan_limits`` (nf,); ``cap_levels`` (Lc,) levels with a capacity ``caps`` (Lc,),
    ``tiles_m1`` (R, Lc) tile extent - 1, ``coef`` (D, T C) footprint coefficients, their nonzero terms per
    (tensor, coordinate) ``term_n`` (T, C), ``term_d``/``term_a`` (T, C, most terms),
    ``tsteps`` (R,) temporal steps; ``util`` (macs, n_macs, min_utilization); ``rel`` (T, D)
    which dims index which tensor.
    """

    flat: IntArray
    offsets: IntArray
    lvl_t: IntArray
    lvl_s: IntArray
    tile_dims: IntArray
    tile_cols: IntArray
    slot_exists: BoolArray
    primes: IntArray
    n_primes: IntArray
    keys: IntArray
    krows: IntArray
    mult: IntArray
    dim_mult: IntArray
    n_free: IntArray
    free_pad: IntArray
    outer_n: IntArray
    outer_pad: IntArray
    inner_n: IntArray
    inner_pad: IntArray
    order_cols: IntArray
    order_tab: np.ndarray
    order_off: IntArray
    order_w: IntArray
    free_mask: BoolArray
    levels_ok: BoolArray
    keep_base: BoolArray
    keep_free: IntArray
    keep_cols: IntArray
    row_sxy: IntArray
    fan_cols: IntArray
    fan_limits: IntArray
    cap_levels: IntArray
    caps: FloatArray
    tiles_m1: FloatArray
    coef: FloatArray
    n_coords: int
    term_n: IntArray
    term_d: IntArray
    term_a: FloatArray
    tsteps: FloatArray
    util: FloatArray
    rel: BoolArray

    @property
    def n_rows(self) -> int:
        return int(self.flat.shape[0])


def _i64(a: np.ndarray | list[int]) -> IntArray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _in(a: np.ndarray, dtype: type = np.int64) -> np.ndarray:
    """An array the kernels only read: C-contiguous, of ``dtype``, and read-only (a view where
    the caller's is writable). numba compiles a driver anew for a read-only and for a
    writable array of the same dtype, and callers hand both (a decoded batch's arrays are
    read-only), so every read-only input goes in as one type and each driver has one
    signature."""
    a = np.ascontiguousarray(a, dtype=dtype)
    if a.flags.writeable:
        a = a.view()
        a.setflags(write=False)
    return a


def space_consts(space) -> SpaceConsts:  # noqa: ANN001 (a MapSpace; imported the other way round)
    """The kernels' view of a built `MapSpace` (its private tables, copied contiguous)."""
    L, D = space._L, space._D
    M = max(int(space._n_free.max()), 1)
    free_pad = np.zeros((L, M), dtype=np.int64)
    outer_pad = np.zeros((L, D), dtype=np.int64)
    inner_pad = np.zeros((L, D), dtype=np.int64)
    for lv in range(L):
        free_pad[lv, : len(space._order_free[lv])] = space._order_free[lv]
        outer_pad[lv, : len(space._order_outer[lv])] = space._order_outer[lv]
        inner_pad[lv, : len(space._order_inner[lv])] = space._order_inner[lv]
    coef, n_coords = space._span_coef
    caps = space.arch.capacities_words
    # local permutations (positions among a level's free dims) of every tabled m, one
    # block per m shared by the levels, as int8: a few tens of kB stay in cache where the
    # MapSpace's table of whole orders per level does not
    blocks, at = [], 0
    start_m: dict[int, int] = {}
    order_off = np.full(L, -1, dtype=np.int64)
    Mw = max(int(space._n_free.max()), 1)
    for lv in range(L):
        m = len(space._order_free[lv])
        if lv in space._order_untabled:
            continue
        if m not in start_m:
            perms = space._perms_by_m.get(m, np.zeros((1, m), dtype=np.int64) + np.arange(m))
            blk = np.zeros((len(perms), Mw), dtype=np.int8)
            blk[:, :m] = perms
            start_m[m] = at
            blocks.append(blk)
            at += len(blk)
        order_off[lv] = start_m[m]
    order_tab = np.ascontiguousarray(np.concatenate(blocks) if blocks else np.zeros((1, Mw), dtype=np.int8))
    T = space._T
    nz = coef.reshape(D, T, n_coords) != 0
    term_n = nz.sum(axis=0).astype(np.int64)  # (T, C)
    mt = max(int(term_n.max(initial=0)), 1)
    term_d = np.zeros((T, n_coords, mt), dtype=np.int64)
    term_a = np.zeros((T, n_coords, mt), dtype=np.float64)
    for t in range(T):
        for k in range(n_coords):
            ds = np.flatnonzero(nz[:, t, k])
            term_d[t, k, : len(ds)] = ds
            term_a[t, k, : len(ds)] = coef[ds, t * n_coords + k]
    order_w = np.zeros(space._order_cols_pad.shape, dtype=np.int64)
    for lv in range(L):
        m = len(space._order_free[lv])
        for p in range(m - 1):
            order_w[lv, p] = math.factorial(m - 1 - p)
    idx = space._index
    return SpaceConsts(
        flat=_i64(space._flat), offsets=_i64(space._offsets), lvl_t=_i64(space._lvl_t), lvl_s=_i64(space._lvl_s),
        tile_dims=_i64(space._tile_dims), tile_cols=_i64(space._tile_cols),
        slot_exists=np.ascontiguousarray(space._slot_exists_flat, dtype=np.bool_),
        primes=_i64(space._primes), n_primes=_i64(space._n_primes),
        keys=_i64(idx.keys), krows=_i64(idx.rows), mult=_i64(idx.mult.view(np.int64)),
        dim_mult=_i64(idx.dim_mult.view(np.int64)),
        n_free=_i64(space._n_free), free_pad=free_pad,
        outer_n=_i64([len(o) for o in space._order_outer]), outer_pad=outer_pad,
        inner_n=_i64([len(i) for i in space._order_inner]), inner_pad=inner_pad,
        order_cols=_i64(space._order_cols_pad), order_tab=order_tab, order_off=order_off,
        order_w=order_w, free_mask=np.ascontiguousarray(space._free_mask_ld, dtype=np.bool_),
        levels_ok=np.ascontiguousarray(space._levels_ok, dtype=np.bool_),
        keep_base=np.ascontiguousarray(space._keep_base, dtype=np.bool_),
        keep_free=_i64(space._keep_free.reshape(-1, 2)), keep_cols=_i64(space._keep_cols),
        row_sxy=_i64(space._row_sxy), fan_cols=_i64(space._fan_cols), fan_limits=_i64(space._fan_limits),
        cap_levels=_i64(space._cap_levels), caps=np.ascontiguousarray(caps[space._cap_levels], dtype=np.float64),
        tiles_m1=np.ascontiguousarray(space._row_tiles_m1, dtype=np.float64),
        coef=np.ascontiguousarray(coef, dtype=np.float64), n_coords=int(n_coords),
        term_n=term_n, term_d=term_d, term_a=term_a,
        tsteps=np.ascontiguousarray(space._row_tsteps, dtype=np.float64),
        util=np.array([float(space.problem.macs), float(space.arch.n_macs), float(space.min_utilization)]),
        rel=np.ascontiguousarray(space.problem.relevance, dtype=np.bool_),
    )


# --- per-row functions (no allocation: CPU and CUDA alike) ------------------------------------

@register_jitable
def row_lookup(vec, d, flat, keys, krows, mult, dim_mult):  # noqa: ANN001, ANN201
    """Global table row of the factor row ``vec`` (S,) of dim ``d``, -1 where it is not in
    the dim's table: `_RowIndex.lookup` for one row (hash, binary search, verify)."""
    S = vec.shape[0]
    key = dim_mult[d]
    for s in range(S):
        key += vec[s] * mult[s]  # int64 products and sums wrap like the uint64 ones
    lo = 0
    hi = keys.shape[0]
    while lo < hi:  # searchsorted, side left
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo > keys.shape[0] - 1:
        lo = keys.shape[0] - 1
    if keys[lo] != key:
        return -1
    g = krows[lo]
    for s in range(S):
        if flat[g, s] != vec[s]:
            return -1
    return g


@register_jitable(inline="always")
def lehmer_local(x, i, lv, m, order_cols, local):  # noqa: ANN001, ANN201
    """Level lv's free loops of encoded row ``x[i]`` as positions among its free dims,
    outermost first, into ``local[:m]`` (digit p picks the p-th of the not yet placed)."""
    for p in range(m):
        local[p] = p
    for p in range(m - 1):
        dgt = x[i, order_cols[lv, p]]
        v = local[p + dgt]
        for q in range(p + dgt, p, -1):  # the picked one moves to position p
            local[q] = local[q - 1]
        local[p] = v


@register_jitable
def decode_row(i, x, tile_dims, tile_cols, offsets, lvl_t, lvl_s, n_free, free_pad, outer_n, outer_pad, inner_n,
               inner_pad, order_cols, order_tab, order_off, order_w, keep_base, keep_free, keep_cols, rows, temporal,
               spatial, order, keep, local):  # noqa: ANN001, ANN201
    """`MapSpace.decode` of row i: table rows, factors, loop orders and keep bits. A level's
    order is a row of the order table (its Lehmer index sum_p digit_p (m-1-p)!), or, past
    the table, decoded digit by digit."""
    L = temporal.shape[1]
    D = temporal.shape[2]
    T = keep.shape[2]
    R = lvl_t.shape[0] // L
    for d in range(D):
        rows[i, d] = 0
    for j in range(tile_dims.shape[0]):
        rows[i, tile_dims[j]] = x[i, tile_cols[j]]
    for lv in range(L):
        for d in range(D):
            g = lv * R + rows[i, d] + offsets[d]
            temporal[i, lv, d] = lvl_t[g]
            spatial[i, lv, d, 0] = lvl_s[g, 0]
            spatial[i, lv, d, 1] = lvl_s[g, 1]
        m = n_free[lv]
        o = outer_n[lv]
        for p in range(o):
            order[i, lv, p] = outer_pad[lv, p]
        if order_off[lv] >= 0:
            k = order_off[lv]
            for p in range(m - 1):
                k += x[i, order_cols[lv, p]] * order_w[lv, p]
            for p in range(m):
                order[i, lv, o + p] = free_pad[lv, order_tab[k, p]]
        else:
            lehmer_local(x, i, lv, m, order_cols, local)
            for p in range(m):
                order[i, lv, o + p] = free_pad[lv, local[p]]
        ni = inner_n[lv]
        for p in range(ni):
            order[i, lv, D - ni + p] = inner_pad[lv, p]
        for t in range(T):
            keep[i, lv, t] = keep_base[lv, t]
    for j in range(keep_cols.shape[0]):
        keep[i, keep_free[j, 0], keep_free[j, 1]] = x[i, keep_cols[j]] != 0


@register_jitable
def reasons_row(i, rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n, term_d,
                term_a, tsteps, util, reason, level):  # noqa: ANN001, ANN201
    """`_space_numpy.fast_reasons` of row i: fanout, then capacity, then utilization."""
    D = rows.shape[1]
    T = keep.shape[2]
    reason[i] = 0
    level[i] = -1
    for f in range(fan_cols.shape[0]):
        used = 1
        for d in range(D):
            used *= row_sxy[rows[i, d] + offsets[d], f]
        if used > fan_limits[f]:
            reason[i] = _FANOUT
            level[i] = fan_cols[f] // 2
            return
    for c in range(cap_levels.shape[0]):
        lv = cap_levels[c]
        need = 0
        for t in range(T):
            if not keep[i, lv, t]:
                continue
            fp = 1
            for k in range(term_n.shape[1]):
                # a coordinate sum_d a_d x_d over a tile spans 1 + sum_d a_d (t_d - 1) values
                # (nonzero terms only); integers far below 2**53, so the float64 sum is exact
                # whatever its order (numpy's is a matrix product)
                s = 0.0
                for j in range(term_n[t, k]):
                    d = term_d[t, k, j]
                    s += tiles_m1[rows[i, d] + offsets[d], c] * term_a[t, k, j]
                fp *= np.int64(s) + 1
            need += fp
        if need > caps[c]:
            reason[i] = _CAPACITY
            level[i] = lv
            return
    if util[2] > 0:
        steps = 1.0
        for d in range(D):
            steps *= tsteps[rows[i, d] + offsets[d]]
        if util[0] / (util[1] * steps) < util[2] - 1e-12:
            reason[i] = _UTILIZATION


@register_jitable
def factor_move_row(r, d, base, j, kd, u, rows, done, offsets, flat, slot_exists, primes, n_primes, keys, krows,
                    mult, dim_mult, vec, ex):  # noqa: ANN001, ANN201
    """`_space_numpy.factor_moves` for row r and dim d: move a prime factor between two of the
    dim's slots; the row reads its uniforms in ``u`` where the numpy path's gather puts them
    (group of kd rows from ``base``, row j within it). In place; marks ``done[r]``."""
    S = flat.shape[1]
    g0 = rows[r, d] + offsets[d]
    for s in range(S):
        vec[s] = flat[g0, s]
        ex[s] = slot_exists[d, s]
    # argmax of where(ok, u, -1) (first maximum), as np.argmax
    src = 0
    best = -2.0
    for s in range(S):
        v = u[base + j * S + s] if (vec[s] > 1 and ex[s]) else -1.0
        if v > best:
            best = v
            src = s
    has = vec[src] > 1 and ex[src]
    ex[src] = False
    dst = 0
    best = -2.0
    for s in range(S):
        v = u[base + kd * S + j * S + s] if ex[s] else -1.0
        if v > best:
            best = v
            dst = s
    has = has and ex[dst]
    if not has:
        return
    f = vec[src]
    npr = n_primes[f]
    pick = np.int64(u[base + 2 * kd * S + j] * (npr if npr > 1 else 1))
    prime = primes[f, pick]
    if prime <= 1:
        return
    vec[src] = f // prime
    vec[dst] *= prime
    g = row_lookup(vec, d, flat, keys, krows, mult, dim_mult)
    if g >= 0:
        rows[r, d] = g - offsets[d]
        done[r] = True


@register_jitable
def swap_level_row(i, r, u1, rows, offsets, lvl_t, free_mask, levels_ok):  # noqa: ANN001, ANN201
    """The level of `_space_numpy.swap_moves` for row r: the best score u + [two running free
    loops] among the levels with two free loops (first maximum); the row's uniforms are
    ``u1[i L: (i + 1) L]``."""
    L = free_mask.shape[0]
    D = free_mask.shape[1]
    R = lvl_t.shape[0] // L
    lv = 0
    best = -2.0
    for lvl in range(L):
        if not levels_ok[lvl]:
            s = -1.0
        else:
            running = 0
            for d in range(D):
                if free_mask[lvl, d] and lvl_t[lvl * R + rows[r, d] + offsets[d]] > 1:
                    running += 1
            s = u1[i * L + lvl] + (1.0 if running >= 2 else 0.0)
        if s > best:
            best = s
            lv = lvl
    return lv


@register_jitable
def swap_row(r, lv, off, u2, x, out, rows, offsets, lvl_t, n_free, free_pad, order_cols, local):  # noqa: ANN001, ANN201
    """`_space_numpy.swap_moves` for row r at level lv: swap the two free loops with the best
    scores u + [loop bound > 1] (the row's uniforms start at ``u2[off]``), re-encode the
    level's Lehmer digits into ``out[r]``."""
    L = n_free.shape[0]
    R = lvl_t.shape[0] // L
    m = n_free[lv]
    lehmer_local(x, r, lv, m, order_cols, local)
    a = 0
    best = -2.0
    for c in range(m):
        dd = free_pad[lv, local[c]]
        s = u2[off + c] + (1.0 if lvl_t[lv * R + rows[r, dd] + offsets[dd]] > 1 else 0.0)
        if s > best:
            best = s
            a = c
    b = 0
    best = -2.0
    for c in range(m):
        if c == a:
            continue
        dd = free_pad[lv, local[c]]
        s = u2[off + c] + (1.0 if lvl_t[lv * R + rows[r, dd] + offsets[dd]] > 1 else 0.0)
        if s > best:
            best = s
            b = c
    v = local[a]
    local[a] = local[b]
    local[b] = v
    for p in range(m - 1):  # Lehmer digit p: later positions holding a smaller value
        cnt = 0
        for q in range(p + 1, m):
            if local[q] < local[p]:
                cnt += 1
        out[r, order_cols[lv, p]] = cnt


# --- drivers ---------------------------------------------------------------------------------

# The decode and check drivers inline their row function (a call per row costs the check
# about 1.6x its time): numba inlines an ``njit(inline="always")`` function into its caller
# before typing it, once; ``register_jitable(inline="always")`` would compile the row
# function a second time, whole, only to type the call.
_decode_row = njit(inline="always")(decode_row)
_reasons_row = njit(inline="always")(reasons_row)


@njit(**_JIT)  # type: ignore[call-overload]
def decode_rows(x, tile_dims, tile_cols, offsets, lvl_t, lvl_s, n_free, free_pad, outer_n, outer_pad, inner_n,
                inner_pad, order_cols, order_tab, order_off, order_w, keep_base, keep_free, keep_cols, rows, temporal,
                spatial, order, keep, local):  # noqa: ANN001, ANN201
    for i in range(x.shape[0]):
        _decode_row(i, x, tile_dims, tile_cols, offsets, lvl_t, lvl_s, n_free, free_pad, outer_n, outer_pad, inner_n,
                   inner_pad, order_cols, order_tab, order_off, order_w, keep_base, keep_free, keep_cols, rows, temporal,
                   spatial, order, keep, local)


@njit(**_JIT)  # type: ignore[call-overload]
def reasons_rows(rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n, term_d,
                 term_a, tsteps, util, reason, level):  # noqa: ANN001, ANN201
    for i in range(rows.shape[0]):
        _reasons_row(i, rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n,
                     term_d, term_a, tsteps, util, reason, level)


@njit(**_JIT)  # type: ignore[call-overload]
def reasons_at(idx, n_idx, rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n,
               term_d, term_a, tsteps, util, reason, level):  # noqa: ANN001, ANN201
    """`reasons_rows` of the rows ``idx[:n_idx]`` (the active rows of the push-out loop)."""
    for a in range(n_idx):
        _reasons_row(idx[a], rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n,
                     term_d, term_a, tsteps, util, reason, level)


@njit(**_JIT)  # type: ignore[call-overload]
def factor_moves_rows(rows, sel, pick_dim, u, done, tile_dims, offsets, flat, slot_exists, primes, n_primes, keys,
                      krows, mult, dim_mult, cnt, start, seen, vec, ex):  # noqa: ANN001, ANN201
    """Factor moves of the rows ``sel``: ``pick_dim`` (k,) the drawn index into tile_dims,
    ``u`` (k (2S+1),) the uniforms. The numpy path sorts the rows by dim (stably) and hands
    each dim group its block of uniforms; here each row finds its group's start and its
    rank within the group by counting (cnt, start, seen: (D,) scratch)."""
    k = sel.shape[0]
    D = offsets.shape[0]
    W = 2 * flat.shape[1] + 1
    for d in range(D):
        cnt[d] = 0
        seen[d] = 0
    for i in range(k):
        cnt[tile_dims[pick_dim[i]]] += 1
    acc = 0
    for d in range(D):
        start[d] = acc
        acc += cnt[d]
    for i in range(k):
        d = tile_dims[pick_dim[i]]
        j = seen[d]
        seen[d] += 1
        factor_move_row(sel[i], d, start[d] * W, j, cnt[d], u, rows, done, offsets, flat, slot_exists, primes,
                        n_primes, keys, krows, mult, dim_mult, vec, ex)


@njit(**_JIT)  # type: ignore[call-overload]
def swap_levels_rows(rows, sel, u1, offsets, lvl_t, free_mask, levels_ok, n_free, lv_out):  # noqa: ANN001, ANN201
    """The level of each swap of rows ``sel`` (u1 (k L,)); returns the uniforms the swaps
    read next (the free-loop count of each row's level, summed)."""
    total = 0
    for i in range(sel.shape[0]):
        lv = swap_level_row(i, sel[i], u1, rows, offsets, lvl_t, free_mask, levels_ok)
        lv_out[i] = lv
        total += n_free[lv]
    return total


@njit(**_JIT)  # type: ignore[call-overload]
def swap_rows(sel, lvs, u2, x, out, rows, offsets, lvl_t, n_free, free_pad, order_cols, cnt, start, seen,
              local):  # noqa: ANN001, ANN201
    """Swaps of rows ``sel`` at levels ``lvs``. The numpy path hands the uniforms out level by
    level (levels in increasing order, rows in order within a level, m of them per row):
    cnt, start, seen (L,) scratch find each row's block."""
    L = n_free.shape[0]
    for lv in range(L):
        cnt[lv] = 0
        seen[lv] = 0
    for i in range(sel.shape[0]):
        cnt[lvs[i]] += 1
    acc = 0
    for lv in range(L):
        start[lv] = acc
        acc += cnt[lv] * n_free[lv]
    for i in range(sel.shape[0]):
        lv = lvs[i]
        w = seen[lv]
        seen[lv] += 1
        swap_row(sel[i], lv, start[lv] + w * n_free[lv], u2, x, out, rows, offsets, lvl_t, n_free, free_pad,
                 order_cols, local)


@njit(cache=True)  # type: ignore[call-overload]
def moves_encoded(x, out, flips, rng, tile_dims, tile_cols, offsets, flat, slot_exists, primes, n_primes, keys, krows,
                  mult, dim_mult, lvl_t, free_mask, levels_ok, n_free, free_pad, order_cols, keep_cols, rows, done, sel,
                  lvs, kind_now, k3, cnt, start, seen, vec, ex, local):  # noqa: ANN001, ANN201
    """`MapSpace.neighbours_encoded` in one call: ``out`` (a copy of ``x``) receives one move
    per row. The random numbers come from the numpy ``Generator`` ``rng`` (numba draws the
    same streams as numpy), drawn in the numpy path's order and shapes (`_space_numpy.moves`):
    the kinds, then per attempt the factor moves' dims and uniforms, the swaps' level and
    loop uniforms, the flipped bits. Scratch from the caller (`neighbours_encoded`): ``rows``
    (n, D) zeros, ``done`` (n,) False, (n,) ``sel``, ``lvs``, ``kind_now``, (3,) ``k3``,
    (max(D, L),) ``cnt``, ``start``, ``seen``, (S,) ``vec``, ``ex``, (max(M, 1),) ``local``."""
    n = x.shape[0]
    L = n_free.shape[0]
    S = flat.shape[1]
    nt = tile_dims.shape[0]
    nk = keep_cols.shape[0]
    for i in range(n):
        for j in range(nt):
            rows[i, tile_dims[j]] = x[i, tile_cols[j]]
    any_level = False
    for lv in range(L):
        any_level = any_level or levels_ok[lv]
    kinds = rng.integers(0, 3, size=n)
    for attempt in range(6):
        n_done = 0
        for i in range(n):
            if done[i]:
                n_done += 1
        if n_done == n:
            break
        # the rows of each kind this attempt (chosen before any move of the attempt)
        k3[:] = 0
        for i in range(n):
            kind_now[i] = 3 if done[i] else (kinds[i] + attempt // 2) % 3
            if kind_now[i] < 3:
                k3[kind_now[i]] += 1
        # --- factor moves
        if k3[0] > 0 and nt > 0:
            k = 0
            for i in range(n):
                if kind_now[i] == 0:
                    sel[k] = i
                    k += 1
            pick = rng.integers(0, nt, size=k)
            u = rng.random(k * (2 * S + 1))
            factor_moves_rows(rows, sel[:k], pick, u, done, tile_dims, offsets, flat, slot_exists, primes, n_primes,
                              keys, krows, mult, dim_mult, cnt, start, seen, vec, ex)
        # --- swaps of two free loops in one level
        if k3[1] > 0 and any_level:
            k = 0
            for i in range(n):
                if kind_now[i] == 1:
                    sel[k] = i
                    k += 1
            u1 = rng.random(k * L)
            total = swap_levels_rows(rows, sel[:k], u1, offsets, lvl_t, free_mask, levels_ok, n_free, lvs)
            u2 = rng.random(total)
            swap_rows(sel[:k], lvs[:k], u2, x, out, rows, offsets, lvl_t, n_free, free_pad, order_cols, cnt, start,
                      seen, local)
            for j in range(k):
                done[sel[j]] = True
        # --- bypass flips
        if k3[2] > 0 and nk > 0 and flips:
            k = 0
            for i in range(n):
                if kind_now[i] == 2:
                    sel[k] = i
                    k += 1
            bit = rng.integers(0, nk, size=k)
            for j in range(k):
                c = keep_cols[bit[j]]
                out[sel[j], c] = 1 - out[sel[j], c]
                done[sel[j]] = True
    for i in range(n):
        for j in range(nt):
            out[i, tile_cols[j]] = rows[i, tile_dims[j]]


@njit(**_JIT)  # type: ignore[call-overload]
def first_outside(x, bounds):  # noqa: ANN001, ANN201
    """Flat index of the first entry of x (n, P) outside [0, bounds), -1 when none."""
    P = x.shape[1]
    for i in range(x.shape[0]):
        for j in range(P):
            if x[i, j] < 0 or x[i, j] >= bounds[j]:
                return i * P + j
    return -1


@register_jitable
def move_prime(row, d, src, dst, prime, offsets, flat, keys, krows, mult, dim_mult, vec):  # noqa: ANN001, ANN201
    """`_space_numpy.move_prime` for one row: dim d's table row after moving ``prime`` from slot
    src to slot dst, -1 where src does not divide or the result leaves the table."""
    S = flat.shape[1]
    g0 = row + offsets[d]
    for s in range(S):
        vec[s] = flat[g0, s]
    if vec[src] % prime != 0:
        return -1
    vec[src] = vec[src] // prime
    vec[dst] = vec[dst] * prime
    g = row_lookup(vec, d, flat, keys, krows, mult, dim_mult)
    return g - offsets[d] if g >= 0 else -1


@register_jitable
def apply_prime_moves(m, grp, has, d_sel, s_sel, dst, limit, rng, rows, offsets, flat, primes, n_primes, keys, krows,
                      mult, dim_mult, vec):  # noqa: ANN001, ANN201
    """The moves of one kind of a push-out round (`_space_numpy.push_out_round` and
    `push_in`): row ``grp[a]`` (a < m) moves a prime factor of dim ``d_sel[a]`` from slot
    ``s_sel[a]`` to slot ``dst[a]`` where ``has[a]``, the prime no larger than ``limit[a]``
    and the result in the dim's table. The prime picks are drawn dim by dim in increasing
    order, rows in order within a dim, as the numpy path groups them."""
    D = offsets.shape[0]
    for d in range(D):
        for a in range(m):
            if has[a] and d_sel[a] == d:
                r = grp[a]
                f = flat[rows[r, d] + offsets[d], s_sel[a]]
                prime = primes[f, np.int64(rng.random() * n_primes[f])]
                moved = move_prime(rows[r, d], d, s_sel[a], dst[a], prime, offsets, flat, keys, krows, mult, dim_mult,
                                   vec)
                if prime <= limit[a] and moved >= 0:
                    rows[r, d] = moved


@njit(**_JIT)  # type: ignore[call-overload]
def push_out_rows(rows, keep, rng, max_rounds, offsets, flat, slot_exists, primes, n_primes, keys, krows, mult,
                  dim_mult, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n, term_d, term_a, tsteps,
                  util, rel, reason, level, strikes, active, before, grp, has, d_sel, s_sel, dst, limit, room,
                  vec):  # noqa: ANN001, ANN201
    """`_space_numpy.push_out` (with its `push_in` and `push_out_round`) on table rows (n, D),
    in place. The uniforms come from the numpy ``Generator`` ``rng`` one at a time, in the
    order in which the numpy path's array draws lay them out (row, dim, slot; then per move
    the per-dim groups in increasing dim order, rows in order), so both give the same rows
    and leave the generator alike. Scores and first-maximum picks as `np.argmax`. Scratch
    from the caller (`push_out`): (n,) ``reason``, ``level``, ``strikes`` (zeros), ``active``
    (0..n-1), ``grp``, ``has``, ``d_sel``, ``s_sel``, ``dst``, ``limit``; ``before``
    (n, D), ``room`` (n, fan-out pairs or 1), ``vec`` (S,)."""
    n, D = rows.shape
    S = flat.shape[1]
    T = keep.shape[2]
    nf = fan_cols.shape[0]
    n_act = n
    no_limit = np.iinfo(np.int64).max
    for _ in range(max_rounds):
        if n_act == 0:
            break
        for a in range(n_act):
            r = active[a]
            for d in range(D):
                before[a, d] = rows[r, d]
        reasons_at(active, n_act, rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1,
                   term_n, term_d, term_a, tsteps, util, reason, level)
        # --- push in (utilization too low): a temporal prime into a spatial slot with room
        m = 0
        for a in range(n_act):
            if reason[active[a]] == _UTILIZATION:
                grp[m] = active[a]
                m += 1
        if m > 0 and nf > 0:
            for a in range(m):
                r = grp[a]
                for f in range(nf):
                    used = 1
                    for d in range(D):
                        used *= row_sxy[rows[r, d] + offsets[d], f]
                    room[a, f] = fan_limits[f] // (used if used > 1 else 1)
            for a in range(m):  # destination: a fan-out (level, axis) with room for 2+
                best = -2.0
                pick = 0
                for f in range(nf):
                    u = rng.random()
                    v = u if room[a, f] >= 2 else -1.0
                    if v > best:
                        best = v
                        pick = f
                has[a] = best >= 0
                dst[a] = (fan_cols[pick] // 2) * 3 + 1 + fan_cols[pick] % 2
                limit[a] = room[a, pick]
            for a in range(m):  # source: a temporal loop > 1 of a dim allowed there; deeper first
                r = grp[a]
                dlv = dst[a] // 3
                best = -2.0
                pick = 0
                for d in range(D):
                    g = rows[r, d] + offsets[d]
                    for s2 in range(S):
                        u = rng.random()
                        ok = flat[g, s2] > 1 and s2 % 3 == 0 and slot_exists[d, s2] and slot_exists[d, dst[a]]
                        v = (u + (1.0 if s2 // 3 > dlv else 0.0)) if ok else -1.0
                        if v > best:
                            best = v
                            pick = d * S + s2
                has[a] = has[a] and best >= 0
                d_sel[a] = pick // S
                s_sel[a] = pick % S
            apply_prime_moves(m, grp, has, d_sel, s_sel, dst, limit, rng, rows, offsets, flat, primes, n_primes, keys,
                              krows, mult, dim_mult, vec)
        # --- push out (fanout or capacity broken at a level)
        m = 0
        for a in range(n_act):
            rs = reason[active[a]]
            if rs == _FANOUT or rs == _CAPACITY:
                grp[m] = active[a]
                m += 1
        if m > 0:
            for a in range(m):
                r = grp[a]
                lv = level[r]
                cap = reason[r] == _CAPACITY
                best = -2.0
                pick = 0
                for d in range(D):
                    dim_ok = True
                    if cap:  # a dim that indexes a tensor kept at the level
                        dim_ok = False
                        for t in range(T):
                            if keep[r, lv, t] and rel[t, d]:
                                dim_ok = True
                    g = rows[r, d] + offsets[d]
                    for s2 in range(S):
                        u = rng.random()
                        if cap:
                            src_ok = s2 // 3 >= lv
                        else:
                            src_ok = s2 // 3 == lv and s2 % 3 > 0
                        v = u if (flat[g, s2] > 1 and src_ok and dim_ok) else -1.0
                        if v > best:
                            best = v
                            pick = d * S + s2
                has[a] = best >= 0
                d_sel[a] = pick // S
                s_sel[a] = pick % S
            for a in range(m):  # destination: a temporal loop at a level < l (capacity), <= l (fanout)
                r = grp[a]
                top = level[r] - 1 if reason[r] == _CAPACITY else level[r]
                has[a] = has[a] and top >= 0
                dst[a] = np.int64(rng.random() * ((top if top > 0 else 0) + 1)) * 3
                limit[a] = no_limit
            apply_prime_moves(m, grp, has, d_sel, s_sel, dst, limit, rng, rows, offsets, flat, primes, n_primes, keys,
                              krows, mult, dim_mult, vec)
        # rows still failing stay; rows that could not move 3 rounds running leave
        k = 0
        for a in range(n_act):
            r = active[a]
            changed = False
            for d in range(D):
                if rows[r, d] != before[a, d]:
                    changed = True
            strikes[r] = 0 if changed else strikes[r] + 1
            rs = reason[r]
            if (rs == _UTILIZATION or rs == _FANOUT or rs == _CAPACITY) and strikes[r] < 3:
                active[k] = r
                k += 1
        n_act = k


# --- host wrappers ---------------------------------------------------------------------------

def outside(x: IntArray, bounds: IntArray) -> int:
    """Flat index of the first entry of encoded points x (n, P) outside [0, bounds), -1 when none."""
    return int(first_outside(_in(x), _in(bounds)))


def decode(c: SpaceConsts, x: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray, BoolArray]:
    """rows (n, D), temporal (n, L, D), spatial (n, L, D, 2), order (n, L, D), keep (n, L, T)."""
    n = len(x)
    L, T = c.keep_base.shape
    D = len(c.offsets)
    rows = np.empty((n, D), dtype=np.int64)
    temporal = np.empty((n, L, D), dtype=np.int64)
    spatial = np.empty((n, L, D, 2), dtype=np.int64)
    order = np.empty((n, L, D), dtype=np.int64)
    keep = np.empty((n, L, T), dtype=np.bool_)
    M = max(c.free_pad.shape[1], 1)
    args = (_in(x), c.tile_dims, c.tile_cols, c.offsets, c.lvl_t, c.lvl_s, c.n_free, c.free_pad, c.outer_n,
            c.outer_pad, c.inner_n, c.inner_pad, c.order_cols, c.order_tab, c.order_off, c.order_w, c.keep_base,
            c.keep_free, c.keep_cols, rows, temporal, spatial, order, keep)
    if n:
        decode_rows(*args, np.empty(M, dtype=np.int64))
    return rows, temporal, spatial, order, keep


def fast_reasons(c: SpaceConsts, rows: IntArray, keep: BoolArray) -> tuple[IntArray, IntArray]:
    """(n,) reason codes and (n,) levels of `_space_numpy.fast_reasons`."""
    n = len(rows)
    reason = np.empty(n, dtype=np.int64)
    level = np.empty(n, dtype=np.int64)
    args = (_in(rows), _in(keep, np.bool_), c.offsets, c.row_sxy, c.fan_cols, c.fan_limits,
            c.cap_levels, c.caps, c.tiles_m1, c.term_n, c.term_d, c.term_a, c.tsteps, c.util, reason, level)
    if n:
        reasons_rows(*args)
    return reason, level


def push_out(c: SpaceConsts, rows: IntArray, keep: BoolArray, rng: np.random.Generator,
             max_rounds: int) -> IntArray:
    """`_space_numpy.push_out`: the repaired rows (a copy), same draws."""
    out = _i64(rows).copy()
    n, D = out.shape
    if n:
        scratch = [np.empty(n, np.int64) for _ in range(7)]
        push_out_rows(out, _in(keep, np.bool_), rng, int(max_rounds), c.offsets, c.flat,
                      c.slot_exists, c.primes, c.n_primes, c.keys, c.krows, c.mult, c.dim_mult, c.row_sxy, c.fan_cols,
                      c.fan_limits, c.cap_levels, c.caps, c.tiles_m1, c.term_n, c.term_d, c.term_a, c.tsteps, c.util,
                      c.rel, *scratch[:2], np.zeros(n, np.int64), np.arange(n, dtype=np.int64),
                      np.empty((n, D), np.int64), scratch[2], np.empty(n, np.bool_), *scratch[3:7],
                      np.empty((n, max(len(c.fan_cols), 1)), np.int64), np.empty(c.flat.shape[1], np.int64))
    return out


def factor_moves(c: SpaceConsts, rows: IntArray, sel: IntArray, done: BoolArray, rng: np.random.Generator) -> None:
    """`_space_numpy.factor_moves` (in place), drawing from ``rng`` as it does."""
    k = len(sel)
    S = c.flat.shape[1]
    D = len(c.offsets)
    pick_dim = rng.integers(0, len(c.tile_dims), size=k)
    u = rng.random(k * (2 * S + 1))
    factor_moves_rows(rows, _i64(sel), _i64(pick_dim), u, done, c.tile_dims, c.offsets, c.flat, c.slot_exists,
                      c.primes, c.n_primes, c.keys, c.krows, c.mult, c.dim_mult, np.empty(D, np.int64),
                      np.empty(D, np.int64), np.empty(D, np.int64), np.empty(S, np.int64), np.empty(S, np.bool_))


def neighbours_encoded(c: SpaceConsts, x: IntArray, rng: np.random.Generator, flips: bool) -> IntArray:
    """`MapSpace.neighbours_encoded` of in-box points ``x`` (n, n_params), same draws."""
    x = _in(x)
    out = x.copy()
    n = len(x)
    if n:
        DL = max(len(c.offsets), len(c.n_free))
        S = c.flat.shape[1]
        moves_encoded(x, out, bool(flips), rng, c.tile_dims, c.tile_cols, c.offsets, c.flat, c.slot_exists, c.primes,
                      c.n_primes, c.keys, c.krows, c.mult, c.dim_mult, c.lvl_t, c.free_mask, c.levels_ok, c.n_free,
                      c.free_pad, c.order_cols, c.keep_cols, np.zeros((n, len(c.offsets)), np.int64),
                      np.zeros(n, np.bool_), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
                      np.empty(3, np.int64), np.empty(DL, np.int64), np.empty(DL, np.int64), np.empty(DL, np.int64),
                      np.empty(S, np.int64), np.empty(S, np.bool_), np.empty(max(c.free_pad.shape[1], 1), np.int64))
    return out


# --- the same row functions on CUDA ----------------------------------------------------------

_CUDA_SHARED = (row_lookup, lehmer_local, decode_row, reasons_row, factor_move_row, swap_level_row, swap_row)
# numba.cuda once `cuda_kernels` has run: a module global, as the kernels' source names it
# (numba's CUDA simulator swaps the kernels' global ``cuda`` for its own)
cuda = None


@functools.lru_cache(maxsize=1)
def cuda_kernels() -> dict:  # pragma: no cover - needs numba-cuda (a GPU, or its simulator)
    """The per-row functions above registered for the CUDA target (numba-cuda, the ``cuda``
    extra), and one kernel per operation, a thread per row: ``decode``, ``reasons`` (the
    check of decoded points) and ``factor_moves`` (the group of each row precomputed on the
    host, see `factor_groups`). Same source as the CPU drivers; the device search loop of
    `accelmap.search.gpu` has its own sampler and moves."""
    global cuda
    from numba import cuda as _cuda_module
    from numba.cuda.extending import register_jitable as cuda_jitable  # type: ignore[attr-defined]

    cuda = _cuda_module

    for fn in _CUDA_SHARED:
        cuda_jitable(fn)

    @cuda.jit
    def decode_kernel(x, tile_dims, tile_cols, offsets, lvl_t, lvl_s, n_free, free_pad, outer_n, outer_pad, inner_n,
                      inner_pad, order_cols, order_tab, order_off, order_w, keep_base, keep_free, keep_cols, rows,
                      temporal, spatial, order, keep, local):  # noqa: ANN001, ANN202
        i = cuda.grid(1)
        if i < x.shape[0]:
            decode_row(i, x, tile_dims, tile_cols, offsets, lvl_t, lvl_s, n_free, free_pad, outer_n, outer_pad,
                       inner_n, inner_pad, order_cols, order_tab, order_off, order_w, keep_base, keep_free, keep_cols,
                       rows, temporal, spatial, order, keep, local[i])

    @cuda.jit
    def reasons_kernel(rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n, term_d,
                       term_a, tsteps, util, reason, level):  # noqa: ANN001, ANN202
        i = cuda.grid(1)
        if i < rows.shape[0]:
            reasons_row(i, rows, keep, offsets, row_sxy, fan_cols, fan_limits, cap_levels, caps, tiles_m1, term_n,
                        term_d, term_a, tsteps, util, reason, level)

    @cuda.jit
    def factor_kernel(rows, sel, dim, base, rank, size, u, done, offsets, flat, slot_exists, primes, n_primes, keys,
                      krows, mult, dim_mult, vec, ex):  # noqa: ANN001, ANN202
        i = cuda.grid(1)
        if i < sel.shape[0]:
            factor_move_row(sel[i], dim[i], base[i], rank[i], size[i], u, rows, done, offsets, flat, slot_exists,
                            primes, n_primes, keys, krows, mult, dim_mult, vec[i], ex[i])

    return {"decode": decode_kernel, "reasons": reasons_kernel, "factor_moves": factor_kernel}


def factor_groups(c: SpaceConsts, pick_dim: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Per factor move (the drawn index into ``tile_dims``): its dim, where its dim group's
    uniforms start, its rank in the group and the group's size (what `factor_moves_rows`
    counts on the fly), for kernels that give each row a thread."""
    d = c.tile_dims[pick_dim]
    D = len(c.offsets)
    cnt = np.bincount(d, minlength=D)
    start = np.cumsum(cnt) - cnt
    perm = np.argsort(d, kind="stable")
    rank = np.empty(len(d), dtype=np.int64)
    rank[perm] = np.arange(len(d)) - start[d[perm]]
    W = 2 * c.flat.shape[1] + 1
    return _i64(d), _i64(start[d] * W), rank, _i64(cnt[d])

