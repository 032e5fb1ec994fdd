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
so a count costs one pass over the stream (about a nanosecond an entry, numba), and is the
same number `accelmap.costmodels.scalesim_io.replay_dram_reads` gets from SCALE-Sim's own
address matrices. Repetitions of a pass are skipped where that stays exact (a period of
the reset positions, a resident unit, or uses of every word at least ``W - 1`` words
apart); `window_fetches_capped` walks at most a given number of passes and extrapolates
the rest (an estimate, for streams too long to walk whole).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt
from numba import njit

from accelmap._typing import IntArray

__all__ = ["window_fetches", "window_fetches_capped", "class_table"]

_JIT = {"cache": True, "_nrt": False}

# Stream modes: how the operand's two classes meet the array.
ROWS_TIME = 0  # streamed, indexed by the row class and the time class (skewed over rows)
COLS_TIME = 1  # streamed, indexed by the column class and the time class (skewed over columns)
STATIONARY = 2  # indexed by the row and column classes (pre-filled bottom-up)


@njit(**_JIT)  # type: ignore[call-overload]
def _fold(a_off: IntArray, b_off: IntArray, stamp: IntArray, x0: int, nx: int, t_len: int, window: int,
          state: IntArray) -> None:
    """Walk one fold's skewed stream (``x0, nx``: the operand's array-side chunk; diagonal
    ``t + c``, ``c`` ascending). ``state`` = [epoch, count, total, position, position of the
    last reset in this unit] is updated in place."""
    epoch, count, total, pos, last = state[0], state[1], state[2], state[3], state[4]
    if nx == 1 or t_len == 1:
        # one entry a diagonal: the fold is one line, walked straight (no diagonal bounds)
        n_line = t_len if nx == 1 else nx
        for j in range(n_line):
            a = x0 if nx == 1 else x0 + j
            b = j if nx == 1 else 0
            pos += 1
            addr = a_off[a] + b_off[b]
            seen = stamp[addr]
            if seen != epoch and seen >= 0:  # (negative: no word there)
                stamp[addr] = epoch
                total += 1
                count += 1
                if count == window:
                    epoch += 1
                    count = 0
                    last = pos
    else:
        for d in range(t_len + nx - 1):
            lo_c = max(0, d - t_len + 1)
            hi_c = min(d, nx - 1) + 1
            for c in range(lo_c, hi_c):
                pos += 1
                addr = a_off[x0 + c] + b_off[d - c]
                seen = stamp[addr]
                if seen != epoch and seen >= 0:
                    stamp[addr] = epoch
                    total += 1
                    count += 1
                    if count == window:
                        epoch += 1
                        count = 0
                        last = pos
    state[0], state[1], state[2], state[3], state[4] = epoch, count, total, pos, last


@njit(**_JIT)  # type: ignore[call-overload]
def _stationary(a_off: IntArray, b_off: IntArray, stamp: IntArray, s_r: int, s_c: int, ur: int, uc: int,
                window: int) -> int:
    """Words fetched for a stationary operand: every fold pre-filled bottom row first, left
    to right (column folds outer, row folds inner), each entry once; one loop nest with the
    window's state in locals (folds of a few entries are common in searches)."""
    epoch, count, total = 1, 0, 0
    for y0 in range(0, s_c, uc):
        y1 = min(y0 + uc, s_c)
        for x0 in range(0, s_r, ur):
            for a in range(min(x0 + ur, s_r) - 1, x0 - 1, -1):
                base = a_off[a]
                for b in range(y0, y1):
                    addr = base + b_off[b]
                    seen = stamp[addr]
                    if seen != epoch and seen >= 0:  # (negative: no word there)
                        stamp[addr] = epoch
                        total += 1
                        count += 1
                        if count == window:
                            epoch += 1
                            count = 0
    return total


@njit(**_JIT)  # type: ignore[call-overload]
def _min_gap(a_off: IntArray, b_off: IntArray, stamp: IntArray, last: IntArray, s_r: int, ur: int, t_len: int) -> int:
    """The fewest words between two uses of one word (existing words only) over two passes
    of a ``ROWS_TIME`` unit: every gap of the whole stream is one of these, since each pass
    is the same unit. ``last`` (words,): scratch."""
    for i in range(last.shape[0]):
        last[i] = -1
    pos = 0
    gap = 1 << 62
    f_r = (s_r + ur - 1) // ur
    for _ in range(2):
        for fr in range(f_r):
            x0 = fr * ur
            nx = min(ur, s_r - x0)
            for d in range(t_len + nx - 1):
                for c in range(max(0, d - t_len + 1), min(d, nx - 1) + 1):
                    addr = a_off[x0 + c] + b_off[d - c]
                    if stamp[addr] < 0:
                        continue
                    p = last[addr]
                    if p >= 0 and pos - p - 1 < gap:
                        gap = pos - p - 1
                    last[addr] = pos
                    pos += 1
    return gap


@njit(**_JIT)  # type: ignore[call-overload]
def _walk(a_off: IntArray, b_off: IntArray, stamp: IntArray, mode: int, s_r: int, s_c: int, ur: int, uc: int,
          t_len: int, window: int, state: IntArray, seen: IntArray, max_reps: int, unit_words: int,
          last: IntArray) -> int:
    """Words fetched for one operand's demand stream (column folds outer, row folds inner).

    ``a_off`` (size,): the word offset of each index of the operand's array-side class
    (the row class for ``ROWS_TIME`` and ``STATIONARY``, the column class for
    ``COLS_TIME``); ``b_off`` the same for its other class. ``stamp`` (words,): 0 where a
    word exists, -1 where the projection reaches no word (a padded tensor's halo);
    ``state`` (5,) and ``seen`` (3, repetitions + 1) scratch (the kernel allocates nothing).

    A streamed operand reads one *unit* again and again (``ROWS_TIME``: the pass over all
    row folds, once per column fold; ``COLS_TIME``: one fold, on each of the row folds).
    The window's state at the start of a repetition is the set of words since the last
    reset, fixed by where in the unit that reset fell; when that position repeats, the
    repetitions between are a period and are counted without walking them. A repetition
    without a reset leaves the whole unit resident: the rest fetch nothing.

    A ``ROWS_TIME`` unit whose second repetition fetched every one of its ``unit_words``
    entries (the unit's entries when every one is a word; -1 otherwise) is checked for the
    fewest words between two uses of a word (`_min_gap`, ``last`` its scratch): when at
    least ``window - 1``, every entry of the stream is a fetch (a use ``n`` words after the
    previous use of its word, which left the window count at 1 or more, brings the count to
    ``window`` in between, so a reset dropped the word), and the remaining repetitions
    fetch ``unit_words`` each.

    ``max_reps``: the most repetitions of a unit walked; when neither ends the walk by
    then, each remaining repetition is counted as the mean of those walked after the
    first (an estimate: `window_fetches_capped`). Exact when it is at least the
    repetitions.
    """
    if mode == STATIONARY:
        return _stationary(a_off, b_off, stamp, s_r, s_c, ur, uc, window)
    f_r = (s_r + ur - 1) // ur
    f_c = (s_c + uc - 1) // uc
    state[:] = 0
    state[0] = 1
    n_units = 1 if mode == ROWS_TIME else f_c
    reps = f_c if mode == ROWS_TIME else f_r
    for u in range(n_units):
        n_seen = 0  # rows of `seen`: reset position, repetitions done, words fetched so far
        r = 0
        walked = 0  # repetitions walked, and the words they fetched after the first
        later = 0
        while r < reps:
            if walked == max_reps and walked >= 2:
                state[2] += ((reps - r) * later + (walked - 1) // 2) // (walked - 1)
                break
            before = state[2]
            state[3] = 0
            state[4] = -1
            if mode == ROWS_TIME:
                for fr in range(f_r):
                    _fold(a_off, b_off, stamp, fr * ur, min(ur, s_r - fr * ur), t_len, window, state)
            else:
                _fold(a_off, b_off, stamp, u * uc, min(uc, s_c - u * uc), t_len, window, state)
            r += 1
            walked += 1
            if walked >= 2:
                later += state[2] - before
            if (walked == 2 and mode == ROWS_TIME and reps - r >= 2 and state[2] - before == unit_words
                    and _min_gap(a_off, b_off, stamp, last, s_r, ur, t_len) >= window - 1):
                state[2] += (reps - r) * unit_words
                break
            if state[4] < 0:
                break  # the whole unit is resident: the remaining repetitions fetch nothing
            hit = -1
            for i in range(n_seen):
                if seen[0, i] == state[4]:
                    hit = i
                    break
            if hit >= 0:
                period = r - seen[1, hit]
                skip = (reps - r) // period
                state[2] += skip * (state[2] - seen[2, hit])
                r += skip * period
                n_seen = 0
            else:
                seen[0, n_seen] = state[4]
                seen[1, n_seen] = r
                seen[2, n_seen] = state[2]
                n_seen += 1
    return state[2]


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


def _stream_arrays(coef_key: tuple[tuple[int, ...], ...], used: tuple[bool, ...], dim_class: tuple[int, ...],
                   bounds: tuple[int, ...], lo: tuple[int, ...] | None, hi: tuple[int, ...] | None,
                   order: tuple[int, ...], classes: tuple[int, int]) -> tuple[IntArray, IntArray, npt.NDArray[np.int32], list[int]]:
    """(a_off, b_off, stamp, class sizes) of one operand's demand stream (`window_fetches`)."""
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
    return a_off, b_off, stamp, size


@lru_cache(maxsize=4096)
def window_fetches(coef_key: tuple[tuple[int, ...], ...], used: tuple[bool, ...], dim_class: tuple[int, ...],
                   bounds: tuple[int, ...], lo: tuple[int, ...] | None, hi: tuple[int, ...] | None,
                   order: tuple[int, ...], classes: tuple[int, int], mode: int, rc: int, cc: int,
                   ur: int, uc: int, window: int) -> int:
    """Words of one operand fetched through SCALE-Sim's window over one repetition of the GEMM.

    ``coef_key`` is the tensor's projection (ranks x D nested tuples); ``classes`` the
    operand's (array-side, other) classes for ``mode``; ``lo``/``hi`` the range of
    coordinates that exist per rank (``None``: every projected value). Cached: a search
    meets the same (dataflow, row class, chunk sizes, order) many times.
    """
    a_off, b_off, stamp, size = _stream_arrays(coef_key, used, dim_class, bounds, lo, hi, order, classes)
    return _run_walk(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window, None)


@lru_cache(maxsize=4096)
def window_fetches_capped(coef_key: tuple[tuple[int, ...], ...], used: tuple[bool, ...], dim_class: tuple[int, ...],
                          bounds: tuple[int, ...], lo: tuple[int, ...] | None, hi: tuple[int, ...] | None,
                          order: tuple[int, ...], classes: tuple[int, int], mode: int, rc: int, cc: int,
                          ur: int, uc: int, window: int, max_reps: int) -> int:
    """`window_fetches` walking at most ``max_reps`` repetitions of each unit (`_walk`).

    A unit's repetitions differ only by the window's state at their start (where the last
    reset fell); once the walk has neither found a period nor left the unit resident after
    ``max_reps`` of them, each remaining one is counted as the mean of those walked after
    the first, which already start from a state the stream left. Costs at most
    ``max_reps`` passes over the operand; within 0.8 % of `window_fetches` with 8 on every
    fold shape measured (docs/validation.md, SCALE-Sim section). Cached like it.
    """
    a_off, b_off, stamp, size = _stream_arrays(coef_key, used, dim_class, bounds, lo, hi, order, classes)
    return _run_walk(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window, max_reps)


def _run_walk(a_off: IntArray, b_off: IntArray, stamp: npt.NDArray[np.int32], mode: int, size: list[int], rc: int,
              cc: int, ur: int, uc: int, window: int, max_reps: int | None) -> int:
    """`_walk` with its scratch (``max_reps`` None: every repetition)."""
    tc = 3 - rc - cc
    reps = max(-(-size[rc] // ur), -(-size[cc] // uc))
    every = bool((stamp >= 0).all())
    unit_words = size[rc] * size[tc] if mode == ROWS_TIME and every else -1
    last = np.empty(stamp.shape[0] if unit_words > 0 and reps >= 4 else 1, dtype=np.int64)
    return int(_walk(a_off, b_off, stamp, mode, size[rc], size[cc], ur, uc, size[tc], window,
                     np.zeros(5, dtype=np.int64), np.zeros((3, reps + 1), dtype=np.int64),
                     reps + 1 if max_reps is None else max_reps, unit_words if last.shape[0] > 1 else -1, last))
