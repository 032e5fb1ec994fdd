"""The ``loopnest`` model's batched numpy path: the counting rules of
`accelmap.costmodels.loopnest` (its module docstring gives the equations, its
``_scalar_counts`` the readable one-mapping rule) over a whole batch of mappings at once, as
array math on batch-last arrays, chunk by chunk. It is the executable reference of the
compiled kernels (`_loopnest_kernel`, `_loopnest_cpu`, the CUDA modules); tests hold all
three equal, bit for bit.

What lives here: the per-(problem, arch) tables (`_compile`), the chunked driver
(`evaluate_numpy`), the legality check on the model's own arrays (`_fast_ok`,
`_check_chunk`), the vectorised counting passes (`_chunk_counts`: eq. D, eq. S, the per-level
counts, energy and cycles) and the padding rule (`_count_existing_words`) that every path
applies.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels.base import Metrics
from accelmap.mapper.check import Reason, check_batch, permutation_rows
from accelmap.mapper.mapping import MappingBatch
from accelmap.workloads.problem import Problem

__all__ = ["evaluate_numpy"]


# ========================================================================================
# Per (problem, arch): the tables every chunk reads
# ========================================================================================
# Rows per chunk of the batched path: bounds the (loops, rows) temporaries so that a chunk's
# working set stays in a core's L2 cache (measured best between 1,536 and 3,072 rows).
_CHUNK_ROWS = 2048


@dataclass(frozen=True, slots=True, eq=False)
class _Compiled:
    """Everything the batched path needs that depends only on (problem, arch).

    A *moving* coordinate of a tensor has a dim of bound > 1 (a dim of bound 1 has factor 1
    at every level of a legal mapping: it never tiles, unrolls or moves anything).
    """

    n_tensors: int
    macs: int
    output: int  # index of the output tensor
    block: IntArray  # (L,)
    read_pj: FloatArray  # (L,)
    write_pj: FloatArray  # (L,)
    read_bw: FloatArray  # (L,) inf = unlimited
    write_bw: FloatArray  # (L,)
    fanout: IntArray  # (L,) X*Y
    fan_levels: tuple[int, ...]  # levels with a spatial fanout (X*Y > 1)
    mac_pj: float
    n_macs: int
    holds: BoolArray  # (L, T) levels that may keep each tensor
    held: tuple[tuple[int, ...], ...]  # per tensor: the levels that may keep it
    # Per tensor, per moving coordinate: its terms ((dim, coefficient), ...) over dims of
    # bound > 1.
    coords: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]
    # Per tensor, per moving coordinate of several dims: ((D,) coefficients, its index in
    # ``coords``).
    slots: tuple[tuple[tuple[IntArray, int], ...], ...]
    jump_dims: BoolArray  # (T, D) the sole moving dim of a one-dim moving coordinate
    shift_dtype: type  # integer type of loop shifts (int16 or int32 unless the bounds are huge)
    # Per tensor: every moving coordinate has one dim (the closed form of eq. D applies).
    closed: tuple[bool, ...]
    rel: BoolArray  # (T, D) the dim indexes the tensor
    # Legality (`check_batch` without padding) on the model's arrays:
    bounds: IntArray  # (D,)
    fanouts_xy: IntArray  # (L, 2)
    capacity: FloatArray  # (L,) words, inf = unbounded
    capped_levels: tuple[int, ...]  # levels with a finite capacity
    held_at: tuple[tuple[int, ...], ...]  # per level: the tensors it may keep
    # (level, tensor) pairs whose tile footprint is needed: every level >= 1 that may keep
    # the tensor (deliveries), and any capped level that may keep it (capacity).
    pairs: tuple[tuple[int, int], ...]
    output_size: int  # words of the output tensor (Problem.tensor_sizes)
    read_limited: tuple[bool, ...]  # per level: a finite read bandwidth
    write_limited: tuple[bool, ...]  # per level: a finite write bandwidth
    output_dims: tuple[int, ...] | None  # the output's coordinate dims when each is one dim, coefficient 1
    plain_runs: tuple[tuple[int, int], ...]  # runs [lo, hi) of levels without a fanout
    forbidden_keep: BoolArray  # (L, T) ~holds


def _compile(problem: Problem, arch: Arch) -> _Compiled:
    coef = problem.coefficients
    T, C, D = coef.shape
    L = arch.n_levels
    inf = np.inf
    big = problem.bounds > 1
    coords = tuple(
        tuple(tuple((int(d), int(coef[t, c, d])) for d in np.flatnonzero((coef[t, c] > 0) & big))
              for c in range(C) if ((coef[t, c] > 0) & big).any())
        for t in range(T))
    moving = [[c for c in range(C) if ((coef[t, c] > 0) & big).any()] for t in range(T)]
    # Shifts and their sums stay below sum_d coef * bound: int32 when that fits.
    max_shift = int((coef.max(axis=(0, 1)) * problem.bounds).sum())
    shift_dtype = np.int16 if max_shift < 2 ** 14 else np.int32 if max_shift < 2 ** 30 else np.int64
    slots = tuple(tuple((coef[t, c].astype(shift_dtype), u) for u, c in enumerate(moving[t]) if len(coords[t][u]) > 1)
                  for t in range(T))
    jump_dims = np.zeros((T, D), dtype=bool)
    for t in range(T):
        for terms in coords[t]:
            if len(terms) == 1:
                jump_dims[t, terms[0][0]] = True
    holds = arch.holds_mask(problem)
    fanout = np.array([lv.fanout for lv in arch.levels], dtype=np.int64)
    capped = tuple(int(lv) for lv in np.flatnonzero(np.isfinite(arch.capacities_words)))
    read_bw = np.array([inf if lv.read_bandwidth_words_per_cycle is None else lv.read_bandwidth_words_per_cycle
                        for lv in arch.levels], dtype=np.float64)
    write_bw = np.array([inf if lv.write_bandwidth_words_per_cycle is None else lv.write_bandwidth_words_per_cycle
                         for lv in arch.levels], dtype=np.float64)
    output_size = int(problem.tensor_sizes()[problem.output_index])
    return _Compiled(
        n_tensors=T,
        macs=problem.macs,
        output=problem.output_index,
        block=np.array([lv.block_words for lv in arch.levels], dtype=np.int64),
        read_pj=np.array([lv.read_energy_pj for lv in arch.levels], dtype=np.float64),
        write_pj=np.array([lv.write_energy_pj for lv in arch.levels], dtype=np.float64),
        read_bw=read_bw,
        write_bw=write_bw,
        fanout=fanout,
        fan_levels=tuple(int(lv) for lv in np.flatnonzero(fanout > 1)),
        mac_pj=float(arch.compute.energy_per_mac_pj),
        n_macs=int(arch.n_macs),
        holds=holds,
        held=tuple(tuple(int(lv) for lv in np.flatnonzero(holds[:, t])) for t in range(T)),
        coords=coords,
        slots=slots,
        jump_dims=jump_dims,
        shift_dtype=shift_dtype,
        closed=tuple(all(len(terms) == 1 for terms in coords[t]) for t in range(T)),
        rel=problem.relevance,
        bounds=problem.bounds,
        fanouts_xy=arch.fanouts,
        capacity=arch.capacities_words,
        capped_levels=capped,
        held_at=tuple(tuple(int(t) for t in np.flatnonzero(holds[lv])) for lv in range(L)),
        pairs=tuple((lv, t) for lv in range(L) for t in range(T) if holds[lv, t] and (lv > 0 or lv in capped)),
        output_size=output_size,
        read_limited=tuple(bool(x) for x in np.isfinite(read_bw)),
        write_limited=tuple(bool(x) for x in np.isfinite(write_bw)),
        output_dims=(tuple(terms[0][0] for terms in coords[problem.output_index])
                     if all(len(terms) == 1 and terms[0][1] == 1 for terms in coords[problem.output_index]) else None),
        plain_runs=_plain_runs(fanout),
        forbidden_keep=~holds,
    )


def _plain_runs(fanout: IntArray) -> tuple[tuple[int, int], ...]:
    """Runs [lo, hi) of consecutive levels whose fanout is one."""
    runs: list[tuple[int, int]] = []
    for lv, f in enumerate(fanout.tolist()):
        if f > 1:
            continue
        if runs and runs[-1][1] == lv:
            runs[-1] = (runs[-1][0], lv + 1)
        else:
            runs.append((lv, lv + 1))
    return tuple(runs)


# ========================================================================================
# The chunked driver
# ========================================================================================
def evaluate_numpy(comp: _Compiled, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
    """`LoopNestModel.evaluate` with array math, chunk by chunk: ``comp`` is `_compile`'s
    tables of (problem, arch). The executable reference of the compiled kernels."""
    n, L, T = len(mappings), arch.n_levels, problem.n_tensors
    # Counts are integers but `Metrics` holds floats: allocate floats once.
    # (L, T, n) storage, so that each (level, tensor) count is one contiguous row to
    # fill; `Metrics` gets (n, L, T) views of it.
    out: dict[str, FloatArray] = {name: np.zeros((L, T, n)) for name in
                                  ("reads", "fills", "updates", "energy", "multicast", "reductions")}
    out["cycles"] = np.full(n, np.inf)
    out["total"] = np.zeros(n)  # energy of the levels, pJ
    out["util"] = np.zeros(n)
    valid = np.zeros(n, dtype=bool)
    reason = np.zeros(n, dtype=np.int64)
    reason_level = np.full(n, -1, dtype=np.int64)
    # Chunks of rows keep every temporary (the legality check's too) cache-sized.
    shapes_ok = (mappings.n_levels, mappings.n_dims, mappings.n_tensors) == (L, problem.n_dims, T)
    for start in range(0, n, _CHUNK_ROWS):
        block = slice(start, min(start + _CHUNK_ROWS, n))
        chunk = mappings if n <= _CHUNK_ROWS else mappings.take(block)
        if not shapes_ok:  # every row is a SHAPE error: nothing to count
            check = check_batch(problem, arch, chunk)
            valid[block], reason[block], reason_level[block] = check.valid, check.reason, check.level
            continue
        # The legality check runs on the model's own arrays (tiles, footprints).
        ch = _Chunk.build(comp, chunk)
        ok = _fast_ok(comp, chunk, ch)
        if ok is None:
            why, lvl = _check_chunk(comp, chunk, ch)
            ok = why == 0
            valid[block], reason[block], reason_level[block] = ok, why, lvl
        else:
            valid[block] = ok
            bad = np.flatnonzero(~ok)
            if bad.size:  # their reasons and levels from the full check
                why, lvl = _check_chunk(comp, chunk.take(bad), ch.take(bad))
                reason[bad + start], reason_level[bad + start] = why, lvl
        if ok.all():  # the common case in a search: plain slices, no gathers
            _chunk_counts(comp, chunk, ch, out, block)
            continue
        keep_rows = np.flatnonzero(ok)
        if keep_rows.size:
            _chunk_counts(comp, chunk.take(keep_rows), ch.take(keep_rows), out, keep_rows + start)
    reads, fills, updates, energy_lt, mcast, sred = (
        out[name].transpose(2, 0, 1) for name in ("reads", "fills", "updates", "energy", "multicast", "reductions"))
    cycles, util = out["cycles"], out["util"]
    compute_pj = np.where(valid, problem.macs * comp.mac_pj, np.inf)
    if problem.has_padding:  # padding only: see `_count_existing_words`
        _count_existing_words(problem, reads, fills, updates, energy_lt, out["total"])
    energy = np.where(valid, out["total"] + problem.macs * comp.mac_pj, np.inf)
    return Metrics(
        cycles=cycles, energy_pj=energy, compute_energy_pj=compute_pj, utilization=util,
        valid=valid, reason=reason, reason_level=reason_level,
        reads=reads, fills=fills, updates=updates, energy_breakdown_pj=energy_lt,
        multicast=mcast, spatial_reductions=sred,
        macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
    )


# ========================================================================================
# Padding: only the words that exist are traffic (every engine and the scalar path apply it)
# ========================================================================================
def _count_existing_words(problem: Problem, reads: FloatArray, fills: FloatArray, updates: FloatArray,
                          energy: FloatArray, total: FloatArray) -> None:
    """Scale, in place, the counts and energy of every padded tensor by the share of its
    projected words that exist (`Problem.existing_fraction`): halo reads outside an input
    (zero padding, windows past the edge) move no data. ``reads`` etc. are (n, L, T);
    ``total`` (n,) is the levels' energy, adjusted by the change.

    The share is the whole tensor's: exact for a tensor moved whole (a compulsory DRAM
    fetch), the mean over tile positions otherwise (an edge tile has more halo than an
    inner one; the counts are the tiles' sum, so the mean is what scales them). Cycles
    are left as counted (a bandwidth-bound level streams the padded tile)."""
    frac = problem.existing_fraction()
    for t in np.flatnonzero(frac < 1.0):
        f = float(frac[t])
        before = energy[:, :, t].sum(axis=1)
        for a in (reads, fills, updates, energy):
            a[:, :, t] *= f
        total += energy[:, :, t].sum(axis=1) - before


# ========================================================================================
# The counting passes
# ========================================================================================
# Layout: the batch axis is the *last* axis of every array below ("structure of arrays"),
# so that each numpy operation runs over long contiguous rows even though levels, dims,
# tensors and coordinates are only a handful each. Work is done only where it can be
# nonzero, decided once per (problem, arch) in `_compile`: coordinates with a dim of bound
# > 1, (level, tensor) pairs the arch lets a level keep, levels with a spatial fanout.


def _distinct_level(comp: _Compiled, t: int, g: IntArray, tile_below: IntArray) -> IntArray | None:
    """Eq. S at one level for tensor ``t``: (n,) distinct child offsets (None: all ones).

    ``g`` (D, n) spatial factors (X*Y) below the level; ``tile_below`` (D, n) the tile of the
    next inner level (the stride of one spatial step). Per coordinate: one unrolled dim
    gives its factor; two dims with step sizes ``a``, ``b`` and factors ``n1``, ``n2`` give
    ``n1*n2 - max(0, n1 - b/gcd) * max(0, n2 - a/gcd)`` distinct sums (the equal sums form
    chains along ``(+b/gcd, -a/gcd)``; each chain link is one coincidence); more dims are
    enumerated.
    """
    out = None
    for terms in comp.coords[t]:
        if len(terms) == 1:
            f = g[terms[0][0]]
        elif len(terms) == 2:
            (d1, c1), (d2, c2) = terms
            n1, n2 = g[d1], g[d2]
            f = n1 * n2
            # No links unless both dims are unrolled (a factor of 1 leaves n - b/gcd <= 0):
            # the gcds only on those rows.
            rows = np.flatnonzero((n1 > 1) & (n2 > 1))
            if rows.size:
                sub = rows if 4 * rows.size < f.size else slice(None)
                n1, n2 = n1[sub], n2[sub]
                a = c1 * tile_below[d1, sub]
                b = c2 * tile_below[d2, sub]
                k = np.gcd(a, b)
                f[sub] -= np.maximum(n1 - b // k, 0) * np.maximum(n2 - a // k, 0)
        else:
            coef_c = np.zeros(g.shape[0], dtype=np.int64)
            for d, c in terms:
                coef_c[d] = c
            f = _distinct_sums(coef_c, g[None], tile_below[None], int(comp.fanout.max()))[0]
        out = f if out is None else out * f
    return out


def _distinct_sums(coef_c: IntArray, g: IntArray, tile_below: IntArray, grid: int) -> IntArray:
    """(L, n) distinct values of ``sum_d coef_c[d] * tile_below[d] * i_d`` over the spatial
    grid ``i_d < g[d]``, by enumeration (at most ``grid`` points per level and row)."""
    L, D, n = g.shape
    g_eff = np.where(coef_c[None, :, None] > 0, g, 1).transpose(0, 2, 1).reshape(L * n, D)
    step = (coef_c[None, :, None] * tile_below).transpose(0, 2, 1).reshape(L * n, D)
    idx = np.arange(grid)
    radix = np.ones_like(g_eff)
    radix[:, 1:] = np.cumprod(g_eff[:, :-1], axis=1)
    digits = (idx[None, :, None] // radix[:, None, :]) % g_eff[:, None, :]
    valid = idx[None, :] < np.prod(g_eff, axis=1)[:, None]
    vals = np.where(valid, (digits * step[:, None, :]).sum(-1), -1)
    vals.sort(axis=1)
    distinct = ((np.diff(vals, axis=1) != 0) & (vals[:, 1:] >= 0)).sum(1) + (vals[:, 0] >= 0)
    return distinct.reshape(L, n)


def _coord_spans(terms_t: tuple, ext: IntArray) -> list[IntArray]:
    """Per moving coordinate of a tensor: (n,) spans ``1 + sum_d a_d (ext[d] - 1)`` of a
    box of extents ``ext`` (D, n) (`Problem.footprint`, over the few nonzero terms)."""
    spans = []
    for terms in terms_t:
        if len(terms) == 1 and terms[0][1] == 1:
            spans.append(ext[terms[0][0]])  # one dim, coefficient 1: the extent itself
            continue
        acc = None
        for d, a in terms:
            x = ext[d] * a if a != 1 else ext[d]
            acc = x.copy() if acc is None else acc + x
        acc += 1 - sum(a for _, a in terms)
        spans.append(acc)
    return spans


def _product(arrays: list[IntArray], n: int) -> IntArray:
    """Elementwise product of (n,) arrays (ones when the list is empty)."""
    if not arrays:
        return np.ones(n, dtype=np.int64)
    out = arrays[0].copy()
    for x in arrays[1:]:
        out *= x
    return out


class _Chunk:
    """The batch-last arrays of one chunk that both the legality check and the counts use:
    temporal (L, D, n); g, per level, (D, n) spatial factors X*Y (None at a level without
    fanout); used, per level with a fanout, (2, n) instances used along X and Y; tile
    (L+1, D, n) (tile[L]: one MAC); per kept (level, tensor) pair the spans of the tile's
    moving coordinates and their product, the tile's footprint in words."""

    __slots__ = ("temporal", "g", "used", "tile", "spans", "sizes")

    def __init__(self, temporal: IntArray, g: list, used: list, tile: IntArray, spans: dict, sizes: dict) -> None:
        self.temporal, self.g, self.used, self.tile, self.spans, self.sizes = temporal, g, used, tile, spans, sizes

    @staticmethod
    def build(comp: _Compiled, b: MappingBatch) -> _Chunk:
        n, L, D = b.temporal.shape
        temporal = _batch_last(b.temporal.reshape(n, L * D)).reshape(L, D, n)
        g: list[IntArray | None] = [None] * L
        used: list[IntArray | None] = [None] * L
        for lv in comp.fan_levels:
            xy = np.ascontiguousarray(b.spatial[:, lv].transpose(2, 1, 0))  # (2, D, n)
            g[lv] = xy[0] * xy[1]
            u = xy[:, 0].copy()  # (2, n) instances used along X and Y
            for d in range(1, D):
                u *= xy[:, d]
            used[lv] = u
        tile = np.empty((L + 1, D, n), dtype=np.int64)
        tile[L] = 1
        for lv in range(L - 1, -1, -1):
            np.multiply(tile[lv + 1], temporal[lv], out=tile[lv])
            if g[lv] is not None:
                tile[lv] *= g[lv]
        spans, sizes = {}, {}
        for lv, t in comp.pairs:
            spans[lv, t] = _coord_spans(comp.coords[t], tile[lv])
            sizes[lv, t] = _product(spans[lv, t], n)
        return _Chunk(temporal, g, used, tile, spans, sizes)

    def take(self, idx: IntArray) -> _Chunk:
        """The rows ``idx`` only."""
        return _Chunk(self.temporal[..., idx], [None if x is None else x[:, idx] for x in self.g],
                      [None if x is None else x[:, idx] for x in self.used],
                      self.tile[..., idx], {k: [x[idx] for x in v] for k, v in self.spans.items()},
                      {k: v[idx] for k, v in self.sizes.items()})


# Rows per block of the batch-first -> batch-last copies: a block's source rows stay in the
# L1/L2 cache while they are transposed (a whole chunk's rows would be fetched many times).
_COPY_ROWS = 256


def _batch_last(a: IntArray) -> IntArray:
    """(k, n) contiguous copy of an (n, k) array (rows may be strided), block by block."""
    n, k = a.shape
    out = np.empty((k, n), dtype=a.dtype)
    for lo in range(0, n, _COPY_ROWS):
        hi = min(lo + _COPY_ROWS, n)
        out[:, lo:hi] = a[lo:hi].T
    return out


def _fast_ok(comp: _Compiled, b: MappingBatch, ch: _Chunk) -> BoolArray | None:
    """Legal rows of a chunk by cheaper tests, or None when they do not apply.

    They apply when chunk-wide tests pass: every factor >= 1, no spatial unrolling below a
    level without fanout, every kept tensor allowed and all kept at the outermost level
    (what a MapSpace sample satisfies). Then a row is legal exactly when its factors
    multiply out (the outermost tile is the bounds), its orders are permutations, its
    unrolling fits the fanouts and its tiles fit the capacities; illegal rows still go
    through `_check_chunk` for their reason and level.
    """
    n, L, D = b.temporal.shape
    if b.temporal.min(initial=1) < 1 or b.spatial.min(initial=1) < 1:
        return None
    for lo, hi in comp.plain_runs:
        if b.spatial[:, lo:hi].max(initial=1) > 1:
            return None
    if comp.forbidden_keep.any() and (b.keep & comp.forbidden_keep).any():
        return None
    if not b.keep[:, 0].all():
        return None
    tile0 = ch.tile[0]
    ok = tile0[0] == comp.bounds[0]
    for d in range(1, D):
        ok &= tile0[d] == comp.bounds[d]
    perm_ok = permutation_rows(b.order)  # (n, L)
    for lv in range(L):
        ok &= perm_ok[:, lv]
    for lv in comp.fan_levels:
        ok &= ch.used[lv][0] <= comp.fanouts_xy[lv, 0]
        ok &= ch.used[lv][1] <= comp.fanouts_xy[lv, 1]
    for lv in comp.capped_levels:
        need = np.zeros(n, dtype=np.int64)
        for t in comp.held_at[lv]:
            need += ch.sizes[lv, t] * b.keep[:, lv, t]
        ok &= need <= comp.capacity[lv]
    return ok


def _check_chunk(comp: _Compiled, b: MappingBatch, ch: _Chunk) -> tuple[IntArray, IntArray]:
    """`check_batch` (no padding) of one chunk on the chunk's batch-last arrays: the same
    checks in the same order, so the same (reason, level) per row. Footprints come from
    the model's spans over moving coordinates: equal to `Problem.footprint` on every row
    that passes the factor check (dims of bound 1 then have tile 1), and only such rows
    reach the capacity check."""
    n, L, D = b.temporal.shape
    reason = np.zeros(n, dtype=np.int64)
    level = np.full(n, -1, dtype=np.int64)

    def mark(bad: BoolArray | np.bool_, code: Reason, lvl: IntArray | int) -> None:
        new = bad & (reason == 0)
        reason[new] = int(code)
        level[new] = lvl[new] if isinstance(lvl, np.ndarray) else lvl

    def first_level(bad: list[BoolArray]) -> tuple[BoolArray, IntArray]:
        """Any level bad, and the first bad level (0 where none), from per-level masks."""
        any_bad = np.zeros(n, dtype=bool)
        first = np.zeros(n, dtype=np.int64)
        for lv in range(len(bad) - 1, -1, -1):
            first[bad[lv]] = lv
            any_bad |= bad[lv]
        return any_bad, first

    temporal = ch.temporal  # (L, D, n)
    spatial = np.ascontiguousarray(b.spatial.transpose(1, 3, 2, 0))  # (L, 2, D, n)
    prod = temporal[0] * spatial[0, 0] * spatial[0, 1]  # (D, n) factor products
    for lv in range(1, L):
        prod *= temporal[lv]
        prod *= spatial[lv, 0]
        prod *= spatial[lv, 1]
    ok = (prod == comp.bounds[:, None]).all(axis=0)
    ok &= temporal.min(axis=(0, 1), initial=1) >= 1
    ok &= spatial.min(axis=(0, 1, 2), initial=1) >= 1
    mark(~ok, Reason.FACTORS, -1)

    perm_ok = permutation_rows(b.order)  # (n, L)
    mark(~perm_ok.all(axis=1), Reason.ORDER, np.argmin(perm_ok, axis=1))

    forbidden = b.keep & ~comp.holds  # (n, L, T)
    keep_bad = forbidden[:, :, 0].copy()  # (n, L)
    for t in range(1, forbidden.shape[2]):
        keep_bad |= forbidden[:, :, t]
    keep_bad[:, 0] |= ~b.keep[:, 0, :].all(axis=1)
    mark(keep_bad.any(axis=1), Reason.KEEP, np.argmax(keep_bad, axis=1))

    used = spatial[:, :, 0].copy()  # (L, 2, n) instances used below each level, X and Y
    for d in range(1, D):
        used *= spatial[:, :, d]
    fan_bad = (used[:, 0] > comp.fanouts_xy[:, 0, None]) | (used[:, 1] > comp.fanouts_xy[:, 1, None])  # (L, n)
    mark(fan_bad.any(axis=0), Reason.FANOUT, np.argmax(fan_bad, axis=0))

    cap_bad = [np.zeros(n, dtype=bool)] * L
    for lv in comp.capped_levels:
        need = np.zeros(n, dtype=np.int64)
        for t in comp.held_at[lv]:
            need += ch.sizes[lv, t] * b.keep[:, lv, t]
        cap_bad[lv] = need > comp.capacity[lv]
    bad, first = first_level(cap_bad)
    mark(bad, Reason.CAPACITY, first)
    return reason, level


@functools.lru_cache(maxsize=8)
def _nest_keys(L: int, D: int, n: int) -> tuple[int, int, type, IntArray]:
    """Bit widths, integer type and (n, L*D) base of the loop-compaction sort keys.

    key = position << (dim + index bits) | dim << index bits | (l*D + dim)*n + row; the
    base holds every term but the dim's (``dim * ((1 << index bits) + n)``). Read-only,
    cached per chunk shape.
    """
    P = L * D
    idx_bits = max(L * D * n - 1, 1).bit_length()
    dim_bits = max(D - 1, 1).bit_length()
    pos_bits = max(P - 1, 1).bit_length()
    key_dtype = np.int32 if 1 + pos_bits + dim_bits + idx_bits <= 31 else np.int64
    pos = np.arange(P, dtype=np.int64)
    base = ((pos << (dim_bits + idx_bits)) + (pos // D) * (D * n))[None, :] + np.arange(n, dtype=np.int64)[:, None]
    base = base.astype(key_dtype)
    base.setflags(write=False)
    return idx_bits, dim_bits, key_dtype, base


def _dim_flags(table: BoolArray, dim_k: IntArray) -> BoolArray:
    """``table[dim_k]`` for a (D,) bool table, (K, n) from (K, n); for (m, D) tables,
    (K, m, n): bits of an integer mask, shifted (no gather)."""
    if table.shape[-1] >= 8 * dim_k.dtype.itemsize - 1:  # more dims than bits: gather
        idx = dim_k.astype(np.intp)
        return np.take(table, idx) if table.ndim == 1 else np.moveaxis(table[:, idx], 0, 1)
    if table.ndim == 1:
        bits = sum(1 << d for d in np.flatnonzero(table).tolist())
        return ((dim_k.dtype.type(bits) >> dim_k) & 1).astype(bool)
    masks = np.array([sum(1 << d for d in np.flatnonzero(row).tolist()) for row in table], dtype=dim_k.dtype)
    return ((masks[None, :, None] >> dim_k[:, None, :]) & 1).astype(bool)


def _last_index(flag: BoolArray) -> IntArray:
    """(K+1, ...) from (K, ...) flags: out[k] = 1 + the last i < k with flag[i] (0 if none)."""
    K = flag.shape[0]
    dtype = np.int16 if K < 2 ** 15 - 1 else np.intp
    out = np.empty((K + 1,) + flag.shape[1:], dtype=dtype)
    out[0] = 0
    np.multiply(flag, np.arange(1, K + 1, dtype=dtype).reshape((K,) + (1,) * (flag.ndim - 1)), out=out[1:])
    for k in range(1, K + 1):
        np.maximum(out[k - 1], out[k], out=out[k])
    return out


def _chunk_counts(comp: _Compiled, b: MappingBatch, ch: _Chunk, out: dict[str, np.ndarray],
                  rows: slice | IntArray) -> None:
    """Counts of the legal mappings ``b`` (one chunk), written into the (L, T, N) arrays of
    ``out`` (and its (N,) ``cycles``, ``util``, ``total``) at ``rows``."""
    n, L, D = b.temporal.shape
    cols = np.arange(n)
    temporal, g, tile = ch.temporal, ch.g, ch.tile
    active = temporal >= 2  # (L, D, n) loops that run (bound 1 neither weighs nor moves)
    # (L, D, n) step of the temporal loop (l, d): the tile below it times the level's
    # spatial factor; zero for an inactive loop.
    step: np.ndarray = np.empty((L, D, n), dtype=comp.shift_dtype)
    for lv in range(L):
        np.multiply(tile[lv + 1], active[lv], out=step[lv], casting="unsafe")
        if g[lv] is not None:
            np.multiply(step[lv], g[lv], out=step[lv], casting="unsafe")
    # Loops above level c: the first kc positions (the active loops of levels 0..c-1).
    per_level = active.sum(axis=1)  # (L, n)
    kcs = [np.zeros(n, dtype=np.intp)]
    for c in range(1, L + 1):
        kcs.append(kcs[-1] + per_level[c - 1])
    K = max(int(kcs[L].max()) if n else 0, 1)

    # Loops in nest order, outermost first (P = L*D positions), compacted so that the
    # active loops of each row come first, in order. One sort along each row (batch-first,
    # contiguous rows: numpy sorts and scans along a strided axis many times slower) of
    # keys packing ``inactive | position | dim | flat index of (l, d, row)`` in (L, D, n).
    P = L * D
    idx_bits, dim_bits, key_dtype, key_base = _nest_keys(L, D, n)
    idx_mask = key_dtype((1 << idx_bits) - 1)
    keys = np.multiply(b.order.reshape(n, P), (1 << idx_bits) + n, dtype=key_dtype, casting="unsafe")
    keys += key_base
    inactive_bit = key_dtype(1 << (idx_bits + dim_bits + max(P - 1, 1).bit_length()))
    # (numpy gathers with intp indices many times faster than with int32 ones)
    inactive = ~np.take(active.reshape(-1), (keys & idx_mask).astype(np.intp))
    keys |= inactive.astype(key_dtype) * inactive_bit
    keys.sort(axis=1)
    top = np.ascontiguousarray(keys[:, :K].T)  # (K, n)
    flat_k = (top & idx_mask).astype(np.intp)  # index into (L, D, n) arrays
    top >>= idx_bits
    dim_k = top & key_dtype((1 << dim_bits) - 1)
    bound_k = np.take(temporal.reshape(-1), flat_k)  # 1 on the padding (inactive loops)
    step_k = np.take(step.reshape(-1), flat_k)  # 0 on the padding
    prefix_ext = np.ones((K + 1, n), dtype=np.int64)  # product of the bounds of loops 0..k-1
    for k in range(K):
        np.multiply(prefix_ext[k], bound_k[k], out=prefix_ext[k + 1])
    weight = None

    # Eq. D's scans along the loop nest, every tensor in one pass: the last loop of a
    # relevant dim (closed form) or of a forcing dim (sliding windows), per prefix of loops.
    scans: list[BoolArray] = []
    scan_of: dict[int, int] = {}
    for t in range(comp.n_tensors):
        if any(c > 0 for c in comp.held[t]):
            table = comp.rel[t] if comp.closed[t] else comp.jump_dims[t]
            if table.any():
                scan_of[t] = len(scans)
                scans.append(table)
    n_scans = len(scans)
    if n_scans:
        last_loop = _last_index(_dim_flags(np.array(scans), dim_k))  # (K+1, scans, n)

    # Eq. D, per tensor and per level c >= 1 that may keep it (level 0 is delivered once:
    # the whole tensor).
    deliv: dict[tuple[int, int], IntArray] = {}
    for t in range(comp.n_tensors):
        levels_t = [c for c in comp.held[t] if c > 0]
        if not levels_t:
            continue
        spans_c = {c: ch.spans[c, t] for c in levels_t}
        size_c = {c: ch.sizes[c, t] for c in levels_t}
        if comp.closed[t]:
            # Closed form of eq. D when every moving coordinate has one dim: a step of loop
            # j moves some coordinate exactly when a loop of a relevant dim is among loops
            # j..kc-1, and then by at least the tile's span (strides of nested loops of one
            # dim shrink by at least their bounds), so it never slides: Delta_j = |tile|
            # up to the innermost relevant loop J and 0 below it, and the sum telescopes to
            # F_c = |tile| x (product of the bounds of loops 0..J).
            for c in levels_t:
                if t not in scan_of:  # no moving coordinate: one delivery
                    deliv[c, t] = size_c[c]
                    continue
                # loops 0..J among the loops above c
                at = np.take(last_loop, (kcs[c] * n_scans + scan_of[t]) * n + cols).astype(np.intp) * n + cols
                deliv[c, t] = size_c[c] * np.take(prefix_ext, at)
            continue
        # General path: the moving coordinates of several dims (sliding windows). A loop
        # step that moves a one-dim coordinate moves it by at least its span (see above),
        # so it fetches the whole tile: such steps are "forced" jumps, and only the
        # several-dim coordinates ("slots") need the shift analysis.
        if weight is None:
            weight = prefix_ext[1:] - prefix_ext[:K]  # (K, n) prefix x (bound - 1)
        slots = comp.slots[t]
        n_slots = len(slots)
        jd = scan_of.get(t)  # 1 + the last forcing loop, in ``last_loop``
        # Per slot u: shift[:, u] the shift of each loop's step, up to the inner loops' end
        # (its suffix sums in ``sfx``), all slots in one scan.
        shift = np.empty((K, n_slots, n), dtype=step_k.dtype)
        for u, (coef_u, _) in enumerate(slots):
            if ((coef_u == 0) | (coef_u == 1)).all():
                np.multiply(_dim_flags(coef_u > 0, dim_k), step_k, out=shift[:, u])
            else:
                np.multiply(np.take(coef_u, dim_k.astype(np.intp)), step_k, out=shift[:, u])
        sfx = np.zeros((K + 1, n_slots, n), dtype=shift.dtype)
        for k in range(K - 1, -1, -1):
            np.add(sfx[k + 1], shift[k], out=sfx[k])
        shift -= sfx[1:]
        if n_slots > 2:
            pow3 = np.zeros(3 ** n_slots, dtype=bool)  # pow3[k]: k is a power of three
            pow3[[3 ** u for u in range(n_slots)]] = True
        for c in levels_t:
            kc = kcs[c]
            Kc = int(kc.max()) if n else 0
            sz = size_c[c]
            if Kc == 0:
                deliv[c, t] = sz
                continue
            # Per slot u: key += sign(shift_u) * 3**u identifies which slots moved and which
            # way (one moved slot <=> |key| is a power of 3, <=> key is odd for two slots);
            # partial += |shift_u| x (size / span_u) is the new volume when only slot u
            # moves (>= size when it jumps).
            spans = spans_c[c]
            key, partial = None, None
            for u in range(n_slots):
                # Step of loop j: forward along its dim, every active loop inside it (and
                # above c) back to its start.
                sigma = shift[:Kc, u] + np.take(sfx, (kc * n_slots + u) * n + cols)
                sign = np.sign(sigma)
                if u:
                    sign *= sign.dtype.type(3 ** u)
                    key += sign
                else:
                    key = sign
                np.abs(sigma, out=sigma)
                cu = slots[u][1]
                term = sigma * _product(spans[:cu] + spans[cu + 1:], n)  # |shift| x size / span_u
                if u:
                    partial += term
                else:
                    partial = term
            assert key is not None and partial is not None  # the loop above ran: a sliding tensor has slots
            one = pow3[np.abs(key)] if n_slots > 2 else (key & 1).astype(bool)
            slide = one & (partial < sz)
            moved = key != 0
            if jd is not None:
                forced = np.arange(Kc)[:, None] < np.take(last_loop, (kc * n_scans + jd) * n + cols)
                slide &= ~forced
                moved |= forced
            moved &= np.arange(Kc)[:, None] < kc  # only the loops above c step
            # Timeloop's gradient reset: a slide other than the innermost loop's (same
            # coordinate, same direction) fetches the whole tile.
            at_inner = np.maximum(kc - 1, 0) * n + cols
            inner_slide = np.take(slide, at_inner) & (kc > 0)
            keep_slide = slide & (~inner_slide | (key == np.take(key, at_inner)))
            delta = np.where(keep_slide, partial, sz)  # new words: a kept slide's partial volume, else the tile
            delta *= moved
            delta *= weight[:Kc]
            total_c = sz + delta[0]
            for k in range(1, Kc):
                total_c += delta[k]
            deliv[c, t] = total_c
    macs_per_unit = prefix_ext[K]  # the product of every temporal bound (inactive ones are 1)

    # Spatial: used instances below each level, and the utilized instances of each level.
    used_below: list[IntArray | None] = [None] * L
    for lv in comp.fan_levels:
        used_below[lv] = ch.used[lv][0] * ch.used[lv][1]  # the product of g[lv] over the dims
    inst: list[IntArray | int] = [1] * L
    for lv in range(1, L):
        ub = used_below[lv - 1]
        inst[lv] = inst[lv - 1] if ub is None else inst[lv - 1] * ub

    # Per tensor, from the innermost level out: ``child`` of a keeper p is the next inner
    # level keeping the tensor (or the MACs). Walking up, ``f_next`` is the deliveries into
    # that child, ``grp``/``kids`` the products of distinct groups / used instances of the
    # levels from p down to the child (exclusive). Counts go straight into the output rows.
    keep = np.ascontiguousarray(b.keep.transpose(1, 2, 0))  # (L, T, n)
    rd_pi: list[IntArray | None] = [None] * L  # words read per instance
    wr_pi: list[IntArray | None] = [None] * L  # words written per instance
    above: dict[int, IntArray] = {}  # (D, n) temporal loops above level p (for output parts)
    energy_pairs: dict[tuple[int, int], FloatArray] = {}  # (level, tensor): pJ, all instances
    o = comp.output
    T = comp.n_tensors
    cnt = {name: out[name].reshape(L * T, -1) for name in ("reads", "fills", "updates", "energy",
                                                            "multicast", "reductions")}

    def put(name: str, row: int, values: IntArray | FloatArray, ip: IntArray | int) -> None:
        """out[name][row, rows] = values x ip (an integer product for counts)."""
        dest = cnt[name][row]
        if isinstance(rows, slice):
            if isinstance(ip, int):
                dest[rows] = values
            else:
                np.multiply(values, ip, out=dest[rows])
        else:
            dest[rows] = values if isinstance(ip, int) else values * ip

    for t in range(T):
        f_next: IntArray = macs_per_unit
        grp_next: IntArray | int = 1
        kids_next: IntArray | int = 1
        for p in range(L - 1, -1, -1):
            grp, kids = grp_next, kids_next
            if g[p] is not None:
                groups_p = _distinct_level(comp, t, g[p], tile[p + 1])
                if groups_p is not None:  # (never modified in place: may share g's rows)
                    grp = groups_p if isinstance(grp, int) else groups_p * grp
                used_p = used_below[p]
                assert used_p is not None  # set for every fanout level, as g[p] is
                kids = used_p if isinstance(kids, int) else used_p * kids
            if not comp.holds[p, t]:
                grp_next, kids_next = grp, kids
                continue
            keep_p = keep[p, t]
            a_p = f_next if isinstance(grp, int) else f_next * grp  # an int grp is 1
            shared = None if isinstance(kids, int) else f_next * kids - a_p  # int: no fanout below
            r: IntArray
            f: IntArray | None
            upd: IntArray | None
            part: IntArray | int
            if t == o:
                if p == 0 or not any(g[lv] is not None for lv in range(p)):
                    part = comp.output_size  # no spatial loop above p: the widened tile is the whole output
                elif comp.output_dims is not None:
                    # One dim per coordinate, coefficient 1: the tile widened by the temporal
                    # loops above p spans bound / (spatial factors above p) along each dim.
                    spread = None
                    for lv in range(p):
                        if g[lv] is not None:
                            for d in comp.output_dims:
                                spread = g[lv][d] if spread is None else spread * g[lv][d]
                    assert spread is not None  # a spatial level above p (the branch above) spreads it
                    part = comp.output_size // spread
                else:
                    if p not in above:
                        above[p] = temporal[:p].prod(axis=0)
                    part = _product(_coord_spans(comp.coords[t], tile[p] * above[p]), n)
                r = a_p - part
                f = deliv[p, t] - part if p > 0 else None
                upd = a_p
            else:
                r, f, upd = a_p, (deliv[p, t] if p > 0 else None), None
            if p > 0:  # the outermost level keeps every tensor of a legal mapping
                r = r * keep_p
                f = f * keep_p
                if upd is not None:
                    upd = upd * keep_p
                if shared is not None:
                    shared *= keep_p
            ip = inst[p]
            # Energy per instance (reads at the read energy; fills and updates at the
            # write energy, per block), times the utilized instances.
            blk = int(comp.block[p])
            e = _scaled_blocks(r, blk, comp.read_pj[p])
            if f is not None or upd is not None:
                if f is None:
                    assert upd is not None  # one of the two is set (the test above)
                    w = _scaled_blocks(upd, blk, comp.write_pj[p])  # (0 + ceil(upd / blk)) x energy
                elif upd is None:
                    w = _scaled_blocks(f, blk, comp.write_pj[p])
                else:
                    w = _blocks(f, blk)
                    w += _blocks(upd, blk)
                    w *= comp.write_pj[p]
                e += w
            lt = p * T + t
            put("reads", lt, r, ip)
            if f is not None:
                put("fills", lt, f, ip)
            if upd is not None:
                put("updates", lt, upd, ip)
            if isinstance(rows, slice):  # times the instances, straight into the output row
                dest = cnt["energy"][lt, rows]
                if isinstance(ip, int):
                    dest[...] = e
                else:
                    np.multiply(e, ip, out=dest)
                energy_pairs[p, t] = dest
            else:
                if not isinstance(ip, int):
                    e *= ip
                put("energy", lt, e, 1)
                energy_pairs[p, t] = e
            if shared is not None:
                put("reductions" if t == o else "multicast", lt, shared, ip)
            if comp.read_limited[p]:
                rd_prev = rd_pi[p]
                rd_pi[p] = r if rd_prev is None else rd_prev + r
            if comp.write_limited[p] and (f is not None or upd is not None):
                wr = f if upd is None else (upd if f is None else f + upd)
                assert wr is not None  # one of f, upd is set (the test above)
                wr_prev = wr_pi[p]
                wr_pi[p] = wr if wr_prev is None else wr_prev + wr
            # Above p: p is the next keeper when it keeps the tensor.
            if p > 0:
                f_next = np.where(keep_p, deliv[p, t], f_next)
                grp_next = 1 if isinstance(grp, int) else np.where(keep_p, 1, grp)
                kids_next = 1 if isinstance(kids, int) else np.where(keep_p, 1, kids)

    # Summed level by level, tensor by tensor: the scalar path adds in the same order, so
    # both agree to the last bit (the pairs left out add exact zeros).
    total = None
    for key in sorted(energy_pairs):
        if total is None:
            total = energy_pairs[key].copy()
        else:
            total += energy_pairs[key]
    if total is not None:
        out["total"][rows] = total

    # Latency: the compute cycles or the slowest level's traffic over its bandwidth.
    cyc = macs_per_unit.astype(np.float64)
    for lv in range(L):
        if rd_pi[lv] is not None:  # only summed where the bandwidth is limited
            np.maximum(cyc, rd_pi[lv] / comp.read_bw[lv], out=cyc)
        if wr_pi[lv] is not None:
            np.maximum(cyc, wr_pi[lv] / comp.write_bw[lv], out=cyc)
    np.ceil(cyc, out=cyc)
    out["cycles"][rows] = cyc
    out["util"][rows] = comp.macs / (comp.n_macs * cyc)


def _scaled_blocks(words: IntArray, block: int, energy_pj: float) -> FloatArray:
    """``ceil(words / block) x energy_pj`` (one pass when the block is one word)."""
    if block == 1:
        return np.multiply(words, energy_pj)  # the words as floats, times the energy
    out = _blocks(words, block)
    out *= energy_pj
    return out


def _blocks(words: IntArray, block: int) -> FloatArray:
    """``ceil(words / block)`` as floats (true division, then ``ceil``). A block of one needs
    neither; dividing by a power of two is multiplying by its exact reciprocal."""
    if block == 1:
        return words.astype(np.float64)
    out = np.multiply(words, 1.0 / block) if block & (block - 1) == 0 else np.divide(words, block)
    np.ceil(out, out=out)
    return out
