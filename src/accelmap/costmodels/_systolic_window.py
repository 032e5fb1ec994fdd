"""SCALE-Sim's prefetch window, counted word by word on the demand stream it implies.

`accelmap.costmodels.systolic` counts DRAM reads of operands without im2col duplicates in
closed form. For a sliding-window operand (a convolution's ifmap, where neighbouring
output pixels read the same words) the count depends on where each reset of SCALE-Sim's
read window falls in the skewed demand stream, so this module walks that stream.

The stream follows SCALE-Sim's demand matrices (``systolic_compute_{os,ws,is}.py``), in
the model's GEMM view (module docstring of `accelmap.costmodels.systolic`): folds with
column folds outer and row folds inner; a streamed operand indexed by the row (column)
class and the time class enters skewed, read along the anti-diagonals of its ``T x n``
fold matrix (time ``t``, array position ``c``; diagonal ``t + c``, ``c`` ascending); the
stationary operand (indexed by both array classes) is pre-filled bottom row first, left to
right. A class is flattened in the array level's loop order (outermost first) and cut into
chunks of the rows (columns) a fold uses, as the model's closed form does.

Each stream entry is an element of the operand; its address comes from the tensor's
projection (coordinate ``c`` is ``sum_d a_cd * i_d``, split into the contribution of the
entry's two classes, so one word offset per class index suffices). Entries outside a
padded tensor's extent are not words and fetch nothing (SCALE-Sim's ``-1``): their
addresses are marked once, before the walk.

The window (``read_buffer_estimate_bw.py`` in CALC mode): the SRAM's 100 sets of
``floor(words / 100)`` words, half active, keep ``W = 50 * floor(words / 100)`` distinct
words; a word not among them is fetched, and the ``W``-th fetch since the last reset drops
them all. One epoch stamp per word of the tensor makes a membership test one array read,
so a count costs one pass over the stream (one to a few nanoseconds an entry, numba), and
is the same number `accelmap.costmodels.scalesim_io.replay_dram_reads` gets from
SCALE-Sim's own address matrices.

Right after a reset the window is empty, so what follows depends only on the stream from
there on. A streamed operand's stream is a sequence of skewed folds that often repeat
shifted: the same fold on every repetition of a unit, or the next chunk of a class whose
index moves every word by one step (a chunk of channels, the next filter). When a reset
falls at the same offset of two folds, and the folds from the first on are copies of the
folds one period later moved by one constant shift (with the same words existing), the
resets between them repeat, shifted, for as long as that holds, and those periods are
counted without walking them. This is exact; how much it saves depends on the mapping:
nothing on SCALE-Sim's own mappings of the ResNet-50 layers, whose few long folds do not
repeat, and a fifth of the walking time over the walks of a default search
(`benchmarks/bench_scalesim_dram.py`, docs/validation.md).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from accelmap._typing import IntArray

__all__ = ["window_fetches", "walk_counts", "class_table"]

_JIT = {"cache": True, "_nrt": False}
_RING = 4096  # resets remembered per unit when looking for a period
_HASH = 1024  # chains of those resets by fold offset
_TRIES = 8  # earlier resets at shifted folds tried per reset

# Stream modes: how the operand's two classes meet the array.
ROWS_TIME = 0  # streamed, indexed by the row class and the time class (skewed over rows)
COLS_TIME = 1  # streamed, indexed by the column class and the time class (skewed over columns)
STATIONARY = 2  # indexed by the row and column classes (pre-filled bottom-up)


@njit(**_JIT)  # type: ignore[call-overload]
def _stationary_fold(a_off: IntArray, b_off: IntArray, stamp: IntArray, x0: int, nx: int, y0: int, ny: int,
                     window: int, st: IntArray) -> None:
    """Walk one pre-filled stationary fold (rows ``x0 .. x0 + nx - 1`` bottom-up, columns
    ``y0 .. y0 + ny - 1`` left to right); ``st`` = [epoch, count, total] updated in place."""
    epoch, count, total = st[0], st[1], st[2]
    for d in range(nx):
        base = a_off[x0 + nx - 1 - d]
        for c in range(ny):
            addr = base + b_off[y0 + c]
            seen = stamp[addr]
            if seen != epoch and seen >= 0:  # (negative: no word there)
                stamp[addr] = epoch
                total += 1
                count += 1
                if count == window:
                    epoch += 1
                    count = 0
    st[0], st[1], st[2] = epoch, count, total


@njit(**_JIT)  # type: ignore[call-overload]
def _skewed_fold(a_off: IntArray, b_off: IntArray, stamp: IntArray, x0: int, nx: int, t_len: int, d0: int,
                 c0: int, pos: int, window: int, st: IntArray) -> int:
    """Walk one skewed fold (array positions ``x0 .. x0 + nx - 1`` against the ``t_len``
    time indices, along anti-diagonals) from its entry ``(d0, c0)`` (diagonal, array
    position), whose offset in the fold is ``pos``, until a window reset.

    ``st`` = [epoch, count, total, -, diagonal, position] is updated in place. Returns the
    fold offset of the entry whose fetch filled the window (the reset; the window is empty
    after it; ``st[4:6]`` hold that entry), or -1 when the fold ended first.
    """
    epoch, count, total = st[0], st[1], st[2]
    n_diag = t_len + nx - 1
    d, c_first = d0, c0
    while d < n_diag:
        hi_c = nx if d >= nx - 1 else d + 1
        for c in range(c_first, hi_c):
            addr = a_off[x0 + c] + b_off[d - c]
            seen = stamp[addr]
            if seen != epoch and seen >= 0:
                stamp[addr] = epoch
                total += 1
                count += 1
                if count == window:
                    st[0], st[1], st[2], st[4], st[5] = epoch + 1, 0, total, d, c
                    return pos + c - c_first
        pos += max(hi_c - c_first, 0)
        d += 1
        c_first = d - t_len + 1 if d >= t_len else 0
    st[0], st[1], st[2] = epoch, count, total
    return -1


@njit(**_JIT)  # type: ignore[call-overload]
def _translated_folds(xa: IntArray, b_lo: IntArray, b_hi: IntArray, lo: IntArray, hi: IntArray, g0: int,
                      period: int, n_g: int, nf: int, chunk: int, size_a: int, fixed: int, ref: IntArray) -> int:
    """Last fold ``e >= g0`` such that every fold ``f`` in ``g0 .. e`` is fold ``f + period``
    moved by one and the same coordinate shift, with the same words existing (-1 when fold
    ``g0`` already is not).

    Fold ``f`` reads array-side indices ``x0 .. x0 + nx - 1`` (``x0 = (f % nf) * chunk``,
    or ``fixed * chunk`` when ``fixed >= 0``) against the whole time class, whose
    coordinates per rank lie in ``b_lo .. b_hi``. Two folds are translates when each
    rank's coordinate moves by a constant ``ref[k]`` across the chunk; the same words exist
    in both when every moved rank stays inside ``lo .. hi`` (the tensor's extent) in both.
    """
    n_ranks = xa.shape[0]
    e = -1
    for f in range(g0, n_g - period):
        i_s = f % nf if fixed < 0 else fixed
        i_t = (f + period) % nf if fixed < 0 else fixed
        xs, xt = i_s * chunk, i_t * chunk
        nx = min(chunk, size_a - xs)
        if min(chunk, size_a - xt) != nx:
            return e
        for k in range(n_ranks):
            delta = xa[k, xt] - xa[k, xs]
            if f == g0:
                ref[k] = delta
            elif delta != ref[k]:
                return e
            if delta == 0 and xs == xt:
                continue
            mn = min(xa[k, xs], xa[k, xt])
            mx = max(xa[k, xs], xa[k, xt])
            for c in range(1, nx):
                vs, vt = xa[k, xs + c], xa[k, xt + c]
                if vt - vs != delta:
                    return e
                mn = min(mn, vs, vt)
                mx = max(mx, vs, vt)
            if delta != 0 and (mn + b_lo[k] < lo[k] or mx + b_hi[k] >= hi[k]):
                return e
        e = f
    return e


@njit(**_JIT)  # type: ignore[call-overload]
def _walk(a_off: IntArray, b_off: IntArray, stamp: IntArray, xa: IntArray, b_lo: IntArray, b_hi: IntArray,
          lo: IntArray, hi: IntArray, mode: int, s_r: int, s_c: int, ur: int, uc: int, t_len: int, window: int,
          skip: bool, st: IntArray, ring: IntArray, head: IntArray, ref: IntArray) -> int:
    """Words fetched for one operand's demand stream (column folds outer, row folds inner).

    ``a_off`` (size,): the word offset of each index of the operand's array-side class
    (the row class for ``ROWS_TIME`` and ``STATIONARY``, the column class for
    ``COLS_TIME``), ``xa`` (ranks, size) its coordinates; ``b_off`` the offsets of its
    other class, whose coordinates per rank lie in ``b_lo .. b_hi``; ``lo .. hi`` the
    coordinates that exist per rank. ``stamp`` (words,): 0 where a word exists, -1 where
    the projection reaches no word (a padded tensor's halo); ``st`` (6,) scratch whose
    fourth entry counts the folds skipped, ``ring`` (4, n), ``head`` (h,) and ``ref`` (ranks,)
    scratch (the kernel allocates nothing): the resets of the current unit (fold, offset,
    words fetched, next reset with the same offset hash) and the latest per offset hash.

    A streamed operand reads one *unit* of folds again and again (``ROWS_TIME``: the pass
    over all row folds, once per column fold; ``COLS_TIME``: one fold, on each of the row
    folds). After a reset the window is empty, so what follows depends only on the stream
    from there on. When a reset falls at the same offset of a later fold, and the folds
    from the earlier one on are moved copies of the folds one period ahead (the same
    chunk one repetition later, or the next chunk along a dim whose index moves every word
    by the same step; `_translated_folds`), the resets between the two repeat, shifted,
    for as long as that holds: those periods are counted without walking them (``skip``).
    A repetition without a reset leaves the whole unit resident: the rest fetch nothing.
    """
    f_r = (s_r + ur - 1) // ur
    f_c = (s_c + uc - 1) // uc
    st[:] = 0
    st[0] = 1
    if mode == STATIONARY:
        for fc in range(f_c):
            for fr in range(f_r):
                _stationary_fold(a_off, b_off, stamp, fr * ur, min(ur, s_r - fr * ur),
                                 fc * uc, min(uc, s_c - fc * uc), window, st)
        return st[2]
    rows = mode == ROWS_TIME
    n_units = 1 if rows else f_c
    reps = f_c if rows else f_r
    nf = f_r if rows else 1
    chunk = ur if rows else uc
    size_a = s_r if rows else s_c
    cap = ring.shape[1]
    n_hash = head.shape[0]
    head[:] = -1
    n_ring = 0
    for u in range(n_units):
        fixed = -1 if rows else u
        n_g = reps * nf
        g, start, d0, c0, last_reset = 0, 0, 0, 0, -1
        if n_ring > 0:  # a new unit: forget the last one's resets
            n_ring = 0
            head[:] = -1
        while g < n_g:
            i = g % nf if rows else u
            if g % nf == 0 and start == 0 and g > 0 and last_reset < g - nf:
                break  # a whole repetition without a reset: the unit is resident
            x0 = i * chunk
            off = _skewed_fold(a_off, b_off, stamp, x0, min(chunk, size_a - x0), t_len, d0, c0, start, window, st)
            if off < 0:
                g += 1
                start, d0, c0 = 0, 0, 0
                continue
            last_reset = g
            start, d0, c0 = off + 1, st[4], st[5] + 1
            if not skip:
                continue
            # earlier resets at the same fold offset (chained per hash of the offset), latest
            # first: whole repetitions of the unit first (the same folds, the longest skips),
            # then the latest few at shifted folds
            jumped = False
            for whole in (True, False):
                j = head[off % n_hash]
                tries = 0
                while j >= 0 and not jumped and tries < _TRIES:
                    period = g - ring[0, j]
                    if ring[1, j] == off and (period % nf == 0) == whole:
                        tries += 0 if whole else 1
                        e = _translated_folds(xa, b_lo, b_hi, lo, hi, ring[0, j], period, n_g, nf, chunk,
                                              size_a, fixed, ref)
                        if e >= g:
                            m = (e - g) // period + 1
                            st[2] += m * (st[2] - ring[2, j])
                            st[3] += m * period
                            g += m * period
                            last_reset = g
                            jumped = True
                    j = ring[3, j]
                if jumped:
                    break
            if jumped:
                continue  # (the resets remembered stay valid: a later period may span the jump)
            if n_ring == cap:  # a full table: forget what came before
                n_ring = 0
                head[:] = -1
            h = off % n_hash
            ring[0, n_ring], ring[1, n_ring], ring[2, n_ring], ring[3, n_ring] = g, off, st[2], head[h]
            head[h] = n_ring
            n_ring += 1
    return st[2]


def class_table(coef: IntArray, used: IntArray, dim_class: tuple[int, ...], bounds: tuple[int, ...],
                order: tuple[int, ...], cls: int) -> IntArray:
    """(ranks, size) partial coordinates of every flattened index of class ``cls``.

    The class's dims are flattened in ``order`` (outermost first, the last innermost);
    ``coef`` (ranks, D) is the tensor's projection, rows of unused ranks zero.
    """
    members = [d for d in order if dim_class[d] == cls and bounds[d] > 1]
    size = 1
    for d in members:
        size *= bounds[d]
    flat = np.arange(size, dtype=np.int64)
    out = np.zeros((coef.shape[0], size), dtype=np.int64)
    for d in reversed(members):
        idx = flat % bounds[d]
        flat = flat // bounds[d]
        out += coef[:, d][:, None].astype(np.int64) * idx[None, :]
    out[~np.asarray(used, dtype=bool)] = 0
    return out


@lru_cache(maxsize=4096)
def window_fetches(coef_key: tuple[tuple[int, ...], ...], used: tuple[bool, ...], dim_class: tuple[int, ...],
                   bounds: tuple[int, ...], lo: tuple[int, ...] | None, hi: tuple[int, ...] | None,
                   order: tuple[int, ...], classes: tuple[int, int], mode: int, rc: int, cc: int,
                   ur: int, uc: int, window: int, skip: bool = True) -> int:
    """Words of one operand fetched through SCALE-Sim's window over one repetition of the GEMM.

    ``coef_key`` is the tensor's projection (ranks x D nested tuples); ``classes`` the
    operand's (array-side, other) classes for ``mode``; ``lo``/``hi`` the range of
    coordinates that exist per rank (``None``: every projected value); ``skip``: count
    periods of shifted fold copies without walking them (`_walk`; off only to test it).
    Cached: a search meets the same (dataflow, row class, chunk sizes, order) many times.
    """
    return walk_counts(coef_key, used, dim_class, bounds, lo, hi, order, classes, mode, rc, cc, ur, uc, window,
                       skip)[0]


def walk_counts(coef_key: tuple[tuple[int, ...], ...], used: tuple[bool, ...], dim_class: tuple[int, ...],
                bounds: tuple[int, ...], lo: tuple[int, ...] | None, hi: tuple[int, ...] | None,
                order: tuple[int, ...], classes: tuple[int, int], mode: int, rc: int, cc: int,
                ur: int, uc: int, window: int, skip: bool = True) -> tuple[int, int]:
    """`window_fetches` uncached, with the number of folds the walk skipped by periods."""
    coef = np.array(coef_key, dtype=np.int64).reshape(len(coef_key), len(bounds))
    used_a = np.array(used, dtype=bool)
    size = [1, 1, 1]
    for d, c in enumerate(dim_class):
        if 0 <= c <= 2:
            size[c] *= bounds[d]
    xa = class_table(coef, used_a, dim_class, bounds, order, classes[0])
    xb = class_table(coef, used_a, dim_class, bounds, order, classes[1])
    # Addresses over the projected span (coordinates 0 .. span - 1 per rank): word =
    # sum_k coordinate_k * mult_k, split into one offset per class.
    span = 1 + xa.max(axis=1) + xb.max(axis=1)
    mult = np.ones(coef.shape[0], dtype=np.int64)
    for k in range(coef.shape[0] - 2, -1, -1):
        mult[k] = mult[k + 1] * span[k + 1]
    a_off = xa.T @ mult
    b_off = xb.T @ mult
    exists = np.ones(1, dtype=bool)
    for k in range(coef.shape[0]):
        v = np.arange(span[k])
        ok = np.ones(span[k], dtype=bool) if lo is None or hi is None else (v >= lo[k]) & (v < hi[k])
        exists = (exists[:, None] & ok[None, :]).ravel()
    stamp = np.where(exists, 0, -1).astype(np.int32)
    tc = 3 - rc - cc
    big = np.int64(1) << 62
    lo_a = np.full(coef.shape[0], -big, dtype=np.int64) if lo is None else np.array(lo, dtype=np.int64)
    hi_a = np.full(coef.shape[0], big, dtype=np.int64) if hi is None else np.array(hi, dtype=np.int64)
    st = np.zeros(6, dtype=np.int64)
    words = _walk(a_off, b_off, stamp, np.ascontiguousarray(xa), xb.min(axis=1), xb.max(axis=1), lo_a, hi_a,
                  mode, size[rc], size[cc], ur, uc, size[tc], window, skip, st,
                  np.zeros((4, _RING), dtype=np.int64), np.zeros(_HASH, dtype=np.int64),
                  np.zeros(coef.shape[0], dtype=np.int64))
    return int(words), int(st[3])
