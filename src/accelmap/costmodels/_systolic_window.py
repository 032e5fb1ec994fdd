"""SCALE-Sim's prefetch window, counted word by word on the demand stream it implies.

`accelmap.costmodels.systolic_dram` counts DRAM reads of operands without im2col duplicates in
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
the rest (an estimate, for streams too long to walk whole, where no jump below applies).

**From reset to reset** (`_jump`). The coarsest unit the count needs is the epoch, the
stretch from one reset to the next: the window's content at any entry is the distinct
words since the current epoch's start ``P``, and the epoch resets at the first entry ``q``
where ``distinct(stream[P..q]) = W``; the fetches are ``W`` per reset plus the words of
the last epoch, whatever the order of entries inside an epoch. A streamed operand reads
one unit of ``n`` entries again and again (above), and on a stretch that is one unit
repeated ``distinct(stream[P..q])`` depends only on ``P mod n`` and ``q - P``, so where an
epoch that starts at ``P`` resets is a table ``fwd[P mod n]``, the same in every
repetition. `_reset_offsets` fills it for all ``n`` starts with two pointers over the
doubled unit (the stretch from ``p`` that holds ``W - 1`` words ends no earlier than the
one from ``p - 1``: dropping entries from the start never adds a word), at most ``3 n``
steps; a unit of fewer than ``W`` words never resets (a stretch of ``n`` entries holds
every word of the unit). The remaining repetitions then cost one step per reset, and the
last epoch's words (the whole unit, or a suffix of the last repetition) are stamped as the
window's content for what follows (the next column fold's unit, ``COLS_TIME``). A unit
with at least `JUMP_MIN_REPS` repetitions left is counted this way from its first
repetition when the window is empty there, else after one walked repetition (from its
last reset): about three passes' work however many repetitions, exact, where the walk
costs a pass each (the periods above are found only where reset positions recur). The
stationary operand reads every entry once and is walked as it is.

**One unit, many fold shapes** (`_UnitTables`). A ``ROWS_TIME`` operand's unit (the pass
over the row folds) and its table ``fwd`` depend on the row chunk, the flattening order and
the window, not on the column chunk, which only sets how many times the unit repeats; and
with at least `JUMP_MIN_REPS` repetitions its count is `_jump` over them from the unit's
start with an empty window (`_walk` takes no other step first: the window is empty at the
start of the stream). So fold shapes that differ only in the column chunk share one unit
and one table: the count of each is `_jump` alone (one step per reset and the last epoch's
words), the same computation as the walk's, so the same number; once a table is kept, a
shape of fewer repetitions (which would not build one: walking its one to three passes
costs less) is counted by it too, since `_jump` from an empty window is exact for any
number of repetitions (the stream up to any repetition's end is a prefix of the unit
repeated without end, on which ``fwd`` is defined). The last few tables are
kept (`UNIT_CACHE_BYTES`); clearing `window_fetches`'s cache drops them too, so a cold
measurement stays cold.

**Samples** (`window_fetches_sampled`). Let ``next(P)`` be where the epoch that starts at
``P`` ends (the entry after its ``W``-th distinct word). It never moves back as ``P`` moves
on (a stretch's distinct words can only drop when its start moves on), so the epoch starts
``A_j`` of the window walked from an empty state at any entry ``a`` interleave with the
walk's own ``T_k`` (from the stream's start): ``T_k <= a < T_{k+1}`` gives
``T_{k+j} <= A_j <= T_{k+j+1}`` for every ``j``, by induction. The words fetched on a stretch
are ``W`` per reset in it plus the count at its end minus the count at its start (each
below ``W``), and the resets of the two walks in a stretch differ by one at most, so the
two counts of any stretch differ by less than ``3 W``, whatever state the stretch starts
from. That is also all a lead-in buys: the interleaved walks meet (and are one walk from
there) only where the stream's reuse pulls their epoch ends together, which on the streams
of docs/validation.md ("Beyond the far limit") did not happen in eight epochs of lead-in
at any of the stretch starts tried (the phase of the resets persists), so a stretch started
after a lead-in is not the walk's count, only within ``3 W`` of it. A rate measured on a
stretch that fetched at least `SAMPLE_MIN_WINDOWS` (150) windows' worth of words is thus
within 2 % of that stretch's rate on any reset phase; on fewer, where the resets fall
decides it (a stream with seven windows a pass, as CB2a_2's, is off by up to 42 % from a
2^18-entry sample), and the stream is walked instead (exact; `window_fetches_sampled`).
What no argument bounds is how far the rest of the stream's rate is from the stretch's
(a stream whose structure changes past the sample).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from numba import njit

from accelmap._typing import IntArray

__all__ = ["window_fetches", "window_fetches_capped", "window_fetches_sampled", "class_table", "canonical_order"]

_JIT = {"cache": True, "_nrt": False}

# A unit with at least this many repetitions left is counted from reset to reset (`_jump`):
# about three passes' work (`_fill_unit`, `_reset_offsets`, the last epoch's words), exact.
JUMP_MIN_REPS = 4
# ... when one repetition has at most this many entries (8 bytes an entry of scratch).
JUMP_MAX_ENTRIES = 1 << 23

# Bytes of ``ROWS_TIME`` unit counts kept for reuse by fold shapes that differ only in the
# column chunk (`_UnitTables`: 8 bytes per number of repetitions, one count for each up to
# the most column folds the operand can have; CB2a_2's 64 filters: 512 bytes a unit).
UNIT_CACHE_BYTES = 1 << 26
# `_unit_counts` follows the resets of a unit's repetitions beyond the ones asked for (to
# count every number of repetitions the unit can have) while its steps stay within this
# many times the unit's entries (the table's own cost is about three).
UNIT_COUNT_STEPS = 4

# A sample's rate is used only when the stretch it is measured on fetched at least this many
# windows' worth of words; else the stream is walked (`window_fetches_sampled`). Two reset
# sequences of one stream interleave, so a stretch's count from any window state differs
# from the walk's by less than three windows (module docstring, "Samples"): at 150 the
# rate's share from where the resets fall is below 2 %.
SAMPLE_MIN_WINDOWS = 150
# ... when the walk costs at most this many times the sample's entries (`_walk_cost`); a
# longer one keeps the sample's rate, unguarded (a walk is bounded in cost by the sample).
SAMPLE_MAX_WALK_FACTOR = 16

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
def _all_words(stamp: IntArray) -> bool:
    """Whether every address of the operand's span is a word (no padded halo: no negative
    stamp; the walk's stamps of existing words are never negative)."""
    for i in range(stamp.shape[0]):
        if stamp[i] < 0:
            return False
    return True


@njit(**_JIT)  # type: ignore[call-overload]
def _fill_unit(a_off: IntArray, b_off: IntArray, stamp: IntArray, mode: int, s_r: int, s_c: int, ur: int, uc: int,
               t_len: int, u: int, out: npt.NDArray[np.int32], every: bool) -> int:
    """The addresses of one repetition of a streamed operand's unit (`_walk`: ``ROWS_TIME``
    the pass over the row folds, ``COLS_TIME`` column fold ``u``) in stream order (`_fold`'s:
    diagonal ``t + c``, ``c`` ascending) into ``out``, -1 where the projection reaches no
    word; returns the unit's entries. ``every``: `_all_words` of ``stamp`` (then no entry is
    looked up: the addresses alone). A fold of at most ``t_len`` rows is written as its head
    triangle, its full diagonals and its tail triangle, the full diagonals a column at a time
    where they are short (8 entries or fewer): a CB2a_2 pass of 1.68 million entries in a
    median 1.40 ms against 9.42 ms for one loop over every diagonal with every word looked up
    (docs/performance.md, SCALE-Sim)."""
    n = 0
    if mode == ROWS_TIME:
        first, last, step, width = 0, (s_r + ur - 1) // ur, ur, s_r
    else:
        first, last, step, width = u, u + 1, uc, s_c
    for f in range(first, last):
        x0 = f * step
        nx = min(step, width - x0)
        if nx == 1:  # one entry a diagonal: a straight line
            a = a_off[x0]
            for j in range(t_len):
                out[n + j] = a + b_off[j]
            n += t_len
            continue
        if nx <= t_len:  # the head triangle, the diagonals of nx entries, the tail triangle
            for d in range(nx - 1):
                for c in range(d + 1):
                    out[n] = a_off[x0 + c] + b_off[d - c]
                    n += 1
            if nx <= 8:  # (few entries a diagonal: one column at a time, every nx-th entry)
                for c in range(nx):
                    a = a_off[x0 + c]
                    for d in range(nx - 1, t_len):
                        out[n + (d - nx + 1) * nx + c] = a + b_off[d - c]
                n += (t_len - nx + 1) * nx
            else:
                for d in range(nx - 1, t_len):
                    for c in range(nx):
                        out[n + c] = a_off[x0 + c] + b_off[d - c]
                    n += nx
            for d in range(t_len, t_len + nx - 1):
                for c in range(d - t_len + 1, nx):
                    out[n] = a_off[x0 + c] + b_off[d - c]
                    n += 1
            continue
        for d in range(t_len + nx - 1):
            for c in range(max(0, d - t_len + 1), min(d, nx - 1) + 1):
                out[n] = a_off[x0 + c] + b_off[d - c]
                n += 1
    if not every:
        for i in range(n):
            if stamp[out[i]] < 0:
                out[i] = -1
    return n


@njit(**_JIT)  # type: ignore[call-overload]
def _reset_offsets(unit: npt.NDArray[np.int32], n: int, window: int, cnt: npt.NDArray[np.int32],
                   fwd: npt.NDArray[np.int32]) -> None:
    """``fwd[p]``, for every start ``p`` of the unit's first ``n`` entries repeated without
    end: how many entries after ``p`` the ``window``-th distinct word of the stream from ``p``
    comes (where an epoch that starts at ``p`` resets), or -1 when the unit has fewer than
    ``window`` words (no epoch ever resets). Two pointers over the doubled unit: the end of
    the stretch from ``p`` with ``window - 1`` distinct words never moves back as ``p``
    advances (a stretch's distinct words can only drop when its start moves on), so the
    whole table costs at most ``3 n`` steps; ``cnt`` (words,): zeros on entry and on exit.
    """
    _reset_offsets_from(unit, n, window, cnt, fwd, 0, n)


@njit(**_JIT)  # type: ignore[call-overload]
def _reset_offsets_from(unit: npt.NDArray[np.int32], n: int, window: int, cnt: npt.NDArray[np.int32],
                        fwd: npt.NDArray[np.int32], start: int, stop: int) -> None:
    """`_reset_offsets` for the starts ``start <= p < stop`` only (two pointers from
    ``start``); ``cnt`` zeros on entry and on exit."""
    distinct = 0
    q = start  # the stretch is [p, q) of the doubled unit
    for p in range(start, stop):
        while distinct < window and q < p + n:
            a = unit[q - n] if q >= n else unit[q]
            if a >= 0:
                if cnt[a] == 0:
                    distinct += 1
                cnt[a] += 1
            q += 1
        # [p, q - 1) has fewer than `window` words (so it had when entry q - 1 was added, from
        # an earlier start), and [p, q) has `window`: entry q - 1 is the reset
        fwd[p] = q - 1 - p if distinct >= window else -1
        a = unit[p]
        if a >= 0:
            cnt[a] -= 1
            if cnt[a] == 0:
                distinct -= 1
    for i in range(stop, q):  # what is left counted: the stretch [stop, q) of the doubled unit
        a = unit[i - n] if i >= n else unit[i]
        if a >= 0:
            cnt[a] = 0


@njit(**_JIT)  # type: ignore[call-overload]
def _row_period(a_off: IntArray, s_r: int) -> int:
    """The fewest rows ``P`` such that ``a_off[x + P] - a_off[x]`` is one number for every row
    ``x`` of ``0 .. s_r - P - 1`` (rows ``P`` apart are one word offset apart), or ``s_r``."""
    for period in range(1, s_r):
        d = a_off[period] - a_off[0]
        ok = True
        for x in range(1, s_r - period):
            if a_off[x + period] - a_off[x] != d:
                ok = False
                break
        if ok:
            return period
    return s_r


@njit(**_JIT)  # type: ignore[call-overload]
def _reset_offsets_shifted(unit: npt.NDArray[np.int32], n: int, window: int, cnt: npt.NDArray[np.int32],
                           fwd: npt.NDArray[np.int32], shift: int, full_end: int) -> None:
    """`_reset_offsets` of a ``ROWS_TIME`` unit whose entries ``shift`` apart are one word
    offset apart up to ``full_end`` (``unit[p] = unit[p - shift] + delta`` for
    ``shift <= p < full_end``, every entry a word: `_unit_shift`). The stream from such a
    ``p`` is then the stream from ``p - shift`` moved by ``delta`` for as long as it stays
    below ``full_end``, so it holds the same number of distinct words at every length there,
    and ``fwd[p] = fwd[p - shift]`` wherever ``p + fwd[p - shift] < full_end``: two pointers
    over the starts below ``shift`` and over those from the first start where that fails
    (the ends ``p + fwd[p - shift]`` never move back as ``p`` moves on, so every later start
    fails too), the rest copied. Same table; ``cnt`` zeros on entry and on exit."""
    _reset_offsets_from(unit, n, window, cnt, fwd, 0, shift)
    if fwd[0] < 0:  # fewer than `window` words in the whole unit: no start ever resets
        for p in range(shift, n):
            fwd[p] = -1
        return
    # Copied, ``fwd[p] = fwd[p mod shift]``, without a check where no epoch from the starts
    # below ``shift`` can reach ``full_end`` (whole copies of the first ``shift`` starts), then
    # start by start until the first that fails.
    longest = 0
    for p in range(shift):
        longest = max(longest, fwd[p])
    safe = full_end - longest - 1  # every start below this ends below full_end
    p = shift
    while p + shift <= safe:
        for i in range(shift):
            fwd[p + i] = fwd[i]
        p += shift
    while p < full_end:
        j = fwd[p - shift]
        if p + j >= full_end:
            break
        fwd[p] = j
        p += 1
    _reset_offsets_from(unit, n, window, cnt, fwd, p, n)


@njit(**_JIT)  # type: ignore[call-overload]
def _jump(unit: npt.NDArray[np.int32], n: int, fwd: npt.NDArray[np.int32], start: int, end: int, window: int,
          stamp: IntArray, state: IntArray) -> None:
    """The remaining repetitions of a unit counted from reset to reset (`_reset_offsets`).

    The stream from the current epoch's start ``start`` (entries from the start of the last
    repetition walked) to ``end`` is the unit repeated, so the epoch that starts at ``P``
    resets ``fwd[P mod n]`` entries later (or never): one step per reset. The last epoch
    keeps the distinct words from its start to ``end`` (the whole unit, or the suffix of its
    last repetition), which are stamped as the window's content for what follows; ``state``
    as in `_fold`."""
    base = state[2] - state[1]  # words fetched before the current epoch
    pos = start
    resets = 0
    while True:
        j = fwd[pos % n]
        if j < 0 or pos + j >= end:
            break
        resets += 1
        pos += j + 1
    epoch = state[0] + 1
    count = 0
    for i in range(max(n - (end - pos), 0), n):  # (end is a repetition's end: the suffix of end - pos entries)
        a = unit[i]
        if a >= 0 and stamp[a] != epoch:
            stamp[a] = epoch
            count += 1
    state[0] = epoch
    state[1] = count
    state[2] = base + resets * window + count


@njit(**_JIT)  # type: ignore[call-overload]
def _unit_counts(unit: npt.NDArray[np.int32], n: int, fwd: npt.NDArray[np.int32], window: int, r_need: int,
                 r_max: int, max_steps: int, seen: npt.NDArray[np.int32], queries: IntArray,
                 counts: IntArray) -> int:
    """``counts[r - 1]``: the words fetched over ``r`` repetitions of the unit from an empty
    window, for ``r`` = 1 up to ``r_max`` (at least ``r_need``, more while the resets
    followed stay within ``max_steps``); returns how many were counted. One chain of resets
    from the unit's start (`_jump`'s, which stops at ``r n`` for ``r`` repetitions: the chain
    up to any repetition's end is a prefix of the chain to the last one), ``W`` per reset,
    plus the last epoch's words, the distinct words of the unit's suffix from that epoch's
    start (or of the whole unit), read off one backward pass. ``fwd`` (`_reset_offsets`) is
    overwritten by that pass (the suffixes' distinct words); ``seen`` (words,): zeros;
    ``queries`` and ``counts`` (``r_max``,): scratch and the result."""
    pos = 0  # the current epoch's start, entries from the stream's start
    resets = 0
    steps = 0
    done = 0
    lo = n
    for r in range(1, r_max + 1):
        if r > r_need and steps > max_steps:
            break
        end = r * n
        while True:
            j = fwd[pos % n]
            if j < 0 or pos + j >= end:
                break
            resets += 1
            steps += 1
            pos += j + 1
        counts[r - 1] = resets * window
        q = max(n - (end - pos), 0)  # the last epoch: the unit's entries q .. n - 1 (all of them when 0)
        queries[r - 1] = q
        lo = min(lo, q)
        done = r
    d = 0
    for i in range(n - 1, lo - 1, -1):  # the distinct words of each suffix, over fwd (no longer read)
        a = unit[i]
        if a >= 0 and seen[a] == 0:
            seen[a] = 1
            d += 1
        fwd[i] = d
    for r in range(done):
        if queries[r] < n:
            counts[r] += fwd[queries[r]]
    return done


@njit(**_JIT)  # type: ignore[call-overload]
def _skip_period(seen: IntArray, n_seen: int, r: int, reps: int, state: IntArray) -> tuple[int, int]:
    """After repetition ``r`` of ``reps``: if the window's state key ``state[4]`` was seen
    before (``seen``: key, repetition, count), the repetitions since then form a period, and
    every whole period left is added at once to the count ``state[2]``; returns the
    repetition reached and the number of keys kept (0 after a skip)."""
    for i in range(n_seen):
        if seen[0, i] == state[4]:
            period = r - seen[1, i]
            skip = (reps - r) // period
            state[2] += skip * (state[2] - seen[2, i])
            return r + skip * period, 0
    seen[0, n_seen] = state[4]
    seen[1, n_seen] = r
    seen[2, n_seen] = state[2]
    return r, n_seen + 1


@njit(**_JIT)  # type: ignore[call-overload]
def _walk(a_off: IntArray, b_off: IntArray, stamp: IntArray, mode: int, s_r: int, s_c: int, ur: int, uc: int,
          t_len: int, window: int, state: IntArray, seen: IntArray, max_reps: int, unit_words: int,
          last: IntArray, unit: npt.NDArray[np.int32], fwd: npt.NDArray[np.int32], cnt: npt.NDArray[np.int32],
          jump_min: int) -> int:
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

    A unit with at least ``jump_min`` repetitions left is counted from reset to reset
    (`_jump`, module docstring) before any of the above, when ``unit`` (the unit's entries,
    `_fill_unit`) and ``fwd`` (the same size) have room, and ``cnt`` (words,) is zero:
    exact, whatever ``max_reps``.
    """
    if mode == STATIONARY:
        return _stationary(a_off, b_off, stamp, s_r, s_c, ur, uc, window)
    f_r = (s_r + ur - 1) // ur
    f_c = (s_c + uc - 1) // uc
    state[:] = 0
    state[0] = 1
    n_units = 1 if mode == ROWS_TIME else f_c
    reps = f_c if mode == ROWS_TIME else f_r
    every = -1  # `_all_words`, looked up at the first jump
    for u in range(n_units):
        n_seen = 0  # rows of `seen`: reset position, repetitions done, words fetched so far
        r = 0
        walked = 0  # repetitions walked, and the words they fetched after the first
        later = 0
        while r < reps:
            if reps - r >= jump_min and unit.shape[0] > 1 and window >= 1 and (walked >= 1 or state[1] == 0):
                # Exact, in a few passes' work whatever the repetitions left (`_jump`): from the
                # epoch that starts after the last reset of the repetition walked last, or from
                # this repetition's start when the window is empty there.
                if every < 0:
                    every = 1 if _all_words(stamp) else 0
                n = _fill_unit(a_off, b_off, stamp, mode, s_r, s_c, ur, uc, t_len, u, unit, every == 1)
                _reset_offsets(unit, n, window, cnt, fwd)
                if walked >= 1:
                    _jump(unit, n, fwd, state[4], n * (1 + reps - r), window, stamp, state)
                else:
                    _jump(unit, n, fwd, 0, n * (reps - r), window, stamp, state)
                break
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
            r, n_seen = _skip_period(seen, n_seen, r, reps, state)
    return state[2]


@njit(**_JIT)  # type: ignore[call-overload]
def _sampled(a_off: IntArray, b_off: IntArray, stamp: IntArray, mode: int, s_r: int, s_c: int, ur: int, uc: int,
             t_len: int, window: int, budget: int, state: IntArray, marks: IntArray) -> None:
    """The demand stream walked as `_walk` walks it (column folds outer, row folds inner),
    without its shortcuts, until at least ``budget`` entries are walked: at the end of a
    column fold, or, while the first column fold is not done, at the end of a row fold.

    ``state`` (10 or more): `_fold`'s five (epoch, count, words fetched, entries walked, last
    reset), the column folds walked whole, the stream's entries, 1 where the whole stream
    was walked (``state[2]`` is then the exact count), and the entries walked and words
    fetched at the first row fold's end in the first column fold at or past half of
    ``budget`` (0, 0 if none). ``marks`` (2, column folds + 1): entries walked and words fetched at the
    end of each column fold walked (column 0: the start)."""
    state[:] = 0
    state[0] = 1
    marks[:, :] = 0
    f_r = (s_r + ur - 1) // ur
    f_c = (s_c + uc - 1) // uc
    if mode == ROWS_TIME:
        total = f_c * s_r * t_len
    elif mode == COLS_TIME:
        total = f_r * s_c * t_len
    else:
        total = s_r * s_c
    state[6] = total
    for fc in range(f_c):
        y0 = fc * uc
        ny = min(uc, s_c - y0)
        for fr in range(f_r):
            x0 = fr * ur
            nx = min(ur, s_r - x0)
            if mode == ROWS_TIME:
                _fold(a_off, b_off, stamp, x0, nx, t_len, window, state)
            elif mode == COLS_TIME:
                _fold(a_off, b_off, stamp, y0, ny, t_len, window, state)
            else:  # (a stationary fold: bottom row first, left to right, as `_stationary`)
                epoch, count, got, pos = state[0], state[1], state[2], state[3]
                for a in range(x0 + nx - 1, x0 - 1, -1):
                    base = a_off[a]
                    for b in range(y0, y0 + ny):
                        pos += 1
                        addr = base + b_off[b]
                        seen = stamp[addr]
                        if seen != epoch and seen >= 0:
                            stamp[addr] = epoch
                            got += 1
                            count += 1
                            if count == window:
                                epoch += 1
                                count = 0
                state[0], state[1], state[2], state[3] = epoch, count, got, pos
            if fc == 0 and fr < f_r - 1:
                if state[8] == 0 and 2 * state[3] >= budget:
                    state[8] = state[3]
                    state[9] = state[2]
                if state[3] >= budget:
                    return
        state[5] = fc + 1
        marks[0, fc + 1] = state[3]
        marks[1, fc + 1] = state[2]
        if state[3] >= budget and fc < f_c - 1:
            return
    state[7] = 1


def canonical_order(dim_class: tuple[int, ...], bounds: tuple[int, ...], order: Sequence[int],
                    classes: tuple[int, int]) -> tuple[int, ...]:
    """The flattening order of an operand's demand stream as the walk reads it: the dims of
    bound > 1 of ``classes[0]``, then of ``classes[1]``, each class's in ``order``.

    The stream's tables read the order of each class's own dims alone (`_stream_arrays`,
    `class_table`), so every ``order`` that gives the two classes' dims the same order gives
    one stream: fold shapes keyed on this are walked once (`test_orders_of_one_stream_share_its_walk`).
    """
    return tuple(d for c in classes for d in order if dim_class[d] == c and bounds[d] > 1)


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
    """(a_off, b_off, stamp, class sizes) of one operand's demand stream (`window_fetches`):
    the stamp fresh (the walk writes it), the rest shared by the fold shapes of one operand,
    flattening order and classes (`_stream_base`, which the chunks do not change)."""
    # (each class's table reads only the order of its own dims of bound > 1)
    per_class = tuple(tuple(d for d in order if dim_class[d] == c and bounds[d] > 1) for c in classes)
    a_off, b_off, stamp, size = _stream_base(coef_key, used, dim_class, bounds, lo, hi, per_class, classes)
    return a_off, b_off, stamp.copy(), list(size)


@lru_cache(maxsize=32)
def _stream_base(coef_key: tuple[tuple[int, ...], ...], used: tuple[bool, ...], dim_class: tuple[int, ...],
                 bounds: tuple[int, ...], lo: tuple[int, ...] | None, hi: tuple[int, ...] | None,
                 orders: tuple[tuple[int, ...], ...], classes: tuple[int, int]) -> tuple[IntArray, IntArray,
                                                                                          npt.NDArray[np.int32],
                                                                                          tuple[int, ...]]:
    """`_stream_arrays` computed, kept for the fold shapes met next (a search walks many
    chunkings of one order; half a small stream's walk was these tables). Nothing writes
    the arrays kept: the walk stamps a copy of ``stamp``. ``orders``: the flattening order
    of each class's dims."""
    coef = np.array(coef_key, dtype=np.int64).reshape(len(coef_key), len(bounds))
    used_a = np.array(used, dtype=bool)
    size = [1, 1, 1]
    for d, c in enumerate(dim_class):
        if 0 <= c <= 2:
            size[c] *= bounds[d]
    xa = class_table(coef, used_a, dim_class, bounds, orders[0], classes[0])
    xb = class_table(coef, used_a, dim_class, bounds, orders[1], classes[1])
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
    return a_off, b_off, stamp, tuple(size)


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
    key = (coef_key, used, dim_class, bounds, lo, hi, canonical_order(dim_class, bounds, order, classes), classes,
           rc, ur, window)
    hit = _rows_time_jump(key, mode, bounds, dim_class, rc, cc, uc)
    if hit is not None:
        return hit
    a_off, b_off, stamp, size = _stream_arrays(coef_key, used, dim_class, bounds, lo, hi, order, classes)
    return _run_walk(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window, None, key)


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
    fold shape measured (docs/validation.md, SCALE-Sim section), and equal to it wherever a
    unit's repetitions are counted from reset to reset (`_jump`: more than `JUMP_MIN_REPS`
    of them, a unit of at most `JUMP_MAX_ENTRIES` entries, a window of a word or more), as
    on every row `SystolicModel`'s ``"auto"`` caps (more passes than its
    ``CAPPED_WALK_REPS``). Cached like it.
    """
    key = (coef_key, used, dim_class, bounds, lo, hi, canonical_order(dim_class, bounds, order, classes), classes,
           rc, ur, window)
    hit = _rows_time_jump(key, mode, bounds, dim_class, rc, cc, uc)
    if hit is not None:
        return hit
    a_off, b_off, stamp, size = _stream_arrays(coef_key, used, dim_class, bounds, lo, hi, order, classes)
    return _run_walk(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window, max_reps, key)


@njit(**_JIT)  # type: ignore[call-overload]
def _cols_sampled(a_off: IntArray, b_off: IntArray, stamp: IntArray, s_r: int, s_c: int, ur: int, uc: int,
                  t_len: int, window: int, budget: int, state: IntArray, seen: IntArray,
                  unit: npt.NDArray[np.int32], fwd: npt.NDArray[np.int32], cnt: npt.NDArray[np.int32],
                  jump_min: int, marks: IntArray) -> None:
    """`_sampled` for a ``COLS_TIME`` operand, one column fold (a chunk read on every row fold)
    at a time, as `_walk` counts it (a resident chunk's remaining row folds fetch nothing,
    periods of the reset position are skipped, at least ``jump_min`` repetitions are counted
    from reset to reset: exact), until the column folds walked cost at least ``budget``: a
    column fold costs the entries of its first ``min(row folds, jump_min)`` row folds (about
    what its walk reads: a resident chunk stops after one or two, a jump reads about three).
    ``state`` (20,) and ``marks`` as `_sampled`'s (``state[3]``: the stream's entries up to
    the last column fold walked; ``state[15:20]``: the walk's own); ``seen`` (3, row folds + 1), ``unit`` and ``fwd`` (a column
    fold's entries, or 1 where no jump applies) and ``cnt`` (words, zeros): `_walk`'s scratch."""
    state[:] = 0
    state[0] = 1
    marks[:, :] = 0
    f_r = (s_r + ur - 1) // ur
    f_c = (s_c + uc - 1) // uc
    state[6] = f_r * s_c * t_len
    fold = state[15:20]  # `_fold`'s and `_jump`'s state of the column fold being walked
    every = -1  # `_all_words`, looked up at the first jump
    cost = 0
    pos = 0
    for u in range(f_c):
        ny = min(uc, s_c - u * uc)
        fold[0], fold[1], fold[2] = state[0], state[1], state[2]
        n_seen = 0
        r = 0
        walked = 0
        while r < f_r:
            if (f_r - r >= jump_min and unit.shape[0] >= ny * t_len and ny * t_len > 1 and window >= 1
                    and (walked >= 1 or fold[1] == 0)):
                if every < 0:
                    every = 1 if _all_words(stamp) else 0
                n = _fill_unit(a_off, b_off, stamp, COLS_TIME, s_r, s_c, ur, uc, t_len, u, unit, every == 1)
                _reset_offsets(unit, n, window, cnt, fwd)
                if walked >= 1:
                    _jump(unit, n, fwd, fold[4], n * (1 + f_r - r), window, stamp, fold)
                else:
                    _jump(unit, n, fwd, 0, n * (f_r - r), window, stamp, fold)
                break
            fold[3] = 0
            fold[4] = -1
            _fold(a_off, b_off, stamp, u * uc, ny, t_len, window, fold)
            r += 1
            walked += 1
            if fold[4] < 0:
                break  # the chunk is resident: its remaining row folds fetch nothing
            r, n_seen = _skip_period(seen, n_seen, r, f_r, fold)
        state[0], state[1], state[2] = fold[0], fold[1], fold[2]
        pos += f_r * ny * t_len
        cost += min(f_r, jump_min) * ny * t_len
        state[3] = pos
        state[5] = u + 1
        marks[0, u + 1] = pos
        marks[1, u + 1] = state[2]
        if cost >= budget and u < f_c - 1:
            return
    state[7] = 1


@lru_cache(maxsize=4096)
def window_fetches_sampled(coef_key: tuple[tuple[int, ...], ...], used: tuple[bool, ...], dim_class: tuple[int, ...],
                           bounds: tuple[int, ...], lo: tuple[int, ...] | None, hi: tuple[int, ...] | None,
                           order: tuple[int, ...], classes: tuple[int, int], mode: int, rc: int, cc: int,
                           ur: int, uc: int, window: int, budget: int) -> int:
    """`window_fetches` from a walked sample of about ``budget`` entries (an estimate where the
    stream is longer, exact where it is not): the stream walked from its start (`_sampled`)
    to the end of the first column fold at or past ``budget`` entries, and the rest counted
    at the rate, in words fetched per entry, of the second half of the column folds walked
    (the folds from the end of column fold ``u // 2`` to ``u``, ``u`` walked); where the first
    column fold alone reaches ``budget`` (a ``ROWS_TIME`` pass over every row fold), the
    walk stops at the first row fold's end at or past it (or at the column fold's end),
    and the rate is that from the first row fold's end at or past half of ``budget``.

    A column fold is the stream's unit of structure: ``ROWS_TIME`` reads one pass over the
    row folds again on each, ``COLS_TIME`` one chunk on each row fold, ``STATIONARY`` every
    row fold of one chunk; column folds of one chunk size are shifted copies of each
    other up to where a chunk crosses the edge of a flattened dim, so whole column folds
    give the rate of the stream, and dropping the first half leaves out the start from an
    empty window. A ``COLS_TIME`` column fold is counted as `_walk` counts it (a resident
    chunk's remaining row folds fetch nothing, repetitions jumped from reset to reset), so
    its cost is about its first ``min(row folds, JUMP_MIN_REPS)`` row folds' entries, and
    the sample ends at the first column fold's end where those costs reach ``budget``
    (`_cols_sampled`; the rate is still per entry of the stream). Measured against the walk
    in docs/validation.md (SCALE-Sim, "Beyond the far limit").

    **The guard** (module docstring, "Samples"): the rate is used only when the stretch it is
    measured on fetched at least `SAMPLE_MIN_WINDOWS` windows' worth of words, where the
    position of the window's resets moves the rate by less than 2 %; else the stream is walked
    (`window_fetches`, exact) when the walk costs at most `SAMPLE_MAX_WALK_FACTOR` times
    ``budget`` (`_walk_cost`), and the rate is used as it is otherwise. For ``ROWS_TIME`` and
    ``STATIONARY`` operands, where the rate's stretch is about half the sample, a sample
    that cannot hold that many words (``budget < 2 SAMPLE_MIN_WINDOWS window``) is not
    walked first. Cached like `window_fetches`."""
    walk_args = (coef_key, used, dim_class, bounds, lo, hi, order, classes, mode, rc, cc, ur, uc, window)
    budget = max(budget, 1)
    walk_ok = _walk_cost(mode, dim_class, bounds, rc, cc, ur, uc) <= SAMPLE_MAX_WALK_FACTOR * budget
    if walk_ok and mode != COLS_TIME and budget < 2 * SAMPLE_MIN_WINDOWS * window:
        return int(window_fetches(*walk_args))
    a_off, b_off, stamp, size = _stream_arrays(coef_key, used, dim_class, bounds, lo, hi, order, classes)
    tc = 3 - rc - cc
    f_c = -(-size[cc] // uc)
    state = np.zeros(20, dtype=np.int64)
    marks = np.zeros((2, f_c + 1), dtype=np.int64)
    if mode == COLS_TIME:
        f_r = -(-size[rc] // ur)
        n = min(uc, size[cc]) * size[tc]
        jump = f_r >= JUMP_MIN_REPS and 1 < n <= JUMP_MAX_ENTRIES
        _cols_sampled(a_off, b_off, stamp, size[rc], size[cc], ur, uc, size[tc], window, budget, state,
                      np.zeros((3, f_r + 1), dtype=np.int64), _SCRATCH.get("unit", n if jump else 1, np.int32),
                      _SCRATCH.get("fwd", n if jump else 1, np.int32),
                      _SCRATCH.get("cnt", stamp.shape[0] if jump else 1, np.int32, zero=True), JUMP_MIN_REPS, marks)
    else:
        _sampled(a_off, b_off, stamp, mode, size[rc], size[cc], ur, uc, size[tc], window, budget, state, marks)
    got, windows = _extrapolated(state, marks)
    if walk_ok and windows < SAMPLE_MIN_WINDOWS * window:
        return int(window_fetches(*walk_args))
    return got


def _walk_cost(mode: int, dim_class: tuple[int, ...], bounds: tuple[int, ...], rc: int, cc: int, ur: int,
               uc: int) -> int:
    """About the entries `window_fetches` reads for a stream (the guard of
    `window_fetches_sampled`): a ``ROWS_TIME`` pass once per column fold, or four passes'
    work from reset to reset (`_jump`) where there are `JUMP_MIN_REPS` or more; a
    ``COLS_TIME`` chunk on at most `JUMP_MIN_REPS` row folds per column fold (a resident
    chunk stops sooner, a jump costs about that much); a ``STATIONARY`` operand once."""
    size = [1, 1, 1]
    for d, c in enumerate(dim_class):
        if 0 <= c <= 2:
            size[c] *= bounds[d]
    t_len = size[3 - rc - cc]
    f_r, f_c = -(-size[rc] // ur), -(-size[cc] // uc)
    if mode == ROWS_TIME:
        return size[rc] * t_len * (f_c if f_c < JUMP_MIN_REPS else JUMP_MIN_REPS)
    if mode == COLS_TIME:
        return size[cc] * t_len * min(f_r, JUMP_MIN_REPS)
    return size[rc] * size[cc]


def _extrapolated(state: IntArray, marks: IntArray) -> tuple[int, int]:
    """`window_fetches_sampled`'s count from `_sampled`'s (or `_cols_sampled`'s) ``state`` and
    ``marks``, and the words fetched on the stretch its rate is measured on (a large number
    where the sample covers the stream: the count is the walk's)."""
    got, walked, total = int(state[2]), int(state[3]), int(state[6])
    if state[7] or walked >= total:
        return got, 1 << 62
    u = int(state[5])
    if u >= 2:
        h_e, h_f = int(marks[0, u // 2]), int(marks[1, u // 2])
    elif 0 < state[8] < walked:  # (within the first column fold, or at its end)
        h_e, h_f = int(state[8]), int(state[9])
    else:
        h_e, h_f = 0, 0
    rate = (got - h_f) / (walked - h_e)
    return got + int(round(rate * (total - walked))), got - h_f


# The largest scratch array (entries) `_scratch` keeps for the next walk; a larger one is
# allocated per walk and dropped.
SCRATCH_KEEP_ENTRIES = 1 << 22


class _ScratchPool(threading.local):
    """Scratch arrays of the walks kept from one walk to the next, per thread and per role
    (``"unit"``, ``"fwd"``, ``"cnt"``, ``"last"``). A walk's unit and reset table of a
    CB2a_2 pass are 6.7 MB each; allocated afresh they are faulted in page by page on their
    first write, which took about as long as the reset table itself (docs/performance.md,
    SCALE-Sim, window12). Only the values a walk writes before it reads are taken from
    them (`_fill_unit` writes every entry of a unit before `_reset_offsets` reads it, which
    writes every entry of ``fwd`` it reads), and ``zero=True`` hands out zeros."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, role: str, n: int, dtype: type, zero: bool = False) -> np.ndarray:
        n = max(int(n), 1)
        if n > SCRATCH_KEEP_ENTRIES:
            return np.zeros(n, dtype=dtype) if zero else np.empty(n, dtype=dtype)
        buf = self.arrays.get(role)
        if buf is None or buf.dtype != dtype or buf.shape[0] < n:
            buf = np.empty(max(n, 0 if buf is None else buf.shape[0]), dtype=dtype)
            self.arrays[role] = buf
        out = buf[:n]
        if zero:
            out[:] = 0
        return out

    def clear(self) -> None:
        self.arrays.clear()


_SCRATCH = _ScratchPool()


def _run_walk(a_off: IntArray, b_off: IntArray, stamp: npt.NDArray[np.int32], mode: int, size: list[int], rc: int,
              cc: int, ur: int, uc: int, window: int, max_reps: int | None, unit_key: tuple | None = None) -> int:
    """`_walk` with its scratch (``max_reps`` None: every repetition). A ``ROWS_TIME``
    operand counted from reset to reset from its start (`_UnitTables`) builds its unit's
    table once and keeps, under ``unit_key``, its counts for every number of repetitions."""
    tc = 3 - rc - cc
    f_c = -(-size[cc] // uc)
    if (unit_key is not None and mode == ROWS_TIME and f_c >= JUMP_MIN_REPS and window >= 1
            and 1 < size[rc] * size[tc] <= JUMP_MAX_ENTRIES):
        # (the counts for every column chunk: the most column folds are one per index)
        return int(_UNITS.build(unit_key, a_off, b_off, stamp, size[rc], ur, size[tc], window, f_c, size[cc])[f_c - 1])
    reps = max(-(-size[rc] // ur), -(-size[cc] // uc))
    every = bool((stamp >= 0).all())
    unit_words = size[rc] * size[tc] if mode == ROWS_TIME and every else -1
    last = _SCRATCH.get("last", stamp.shape[0] if unit_words > 0 and reps >= 4 else 1, np.int64)
    # scratch of `_jump`: a unit's entries (ROWS_TIME: every row fold; COLS_TIME: one column fold)
    unit_len = size[rc] * size[tc] if mode == ROWS_TIME else min(uc, size[cc]) * size[tc]
    unit_reps = -(-size[cc] // uc) if mode == ROWS_TIME else -(-size[rc] // ur)
    jump = mode != STATIONARY and unit_reps >= JUMP_MIN_REPS and 1 < unit_len <= JUMP_MAX_ENTRIES
    unit = _SCRATCH.get("unit", unit_len if jump else 1, np.int32)
    fwd = _SCRATCH.get("fwd", unit_len if jump else 1, np.int32)
    cnt = _SCRATCH.get("cnt", stamp.shape[0] if jump else 1, np.int32, zero=True)
    return int(_walk(a_off, b_off, stamp, mode, size[rc], size[cc], ur, uc, size[tc], window,
                     np.zeros(5, dtype=np.int64), np.zeros((3, reps + 1), dtype=np.int64),
                     reps + 1 if max_reps is None else max_reps, unit_words if last.shape[0] > 1 else -1, last,
                     unit, fwd, cnt, JUMP_MIN_REPS))


# `_unit_shift` copies the table (`_reset_offsets_shifted`) only where the rows that repeat
# shifted leave at least this share of the unit's full folds to copy
SHIFT_MIN_SHARE = 0.25


def _unit_shift(a_off: IntArray, s_r: int, ur: int, t_len: int) -> tuple[int, int]:
    """(shift, full_end) in entries of a ``ROWS_TIME`` unit (row folds of ``ur`` rows, each
    ``t_len`` long in time): folds ``lcm(P, ur) / ur`` apart (``P`` = `_row_period`) are
    the same fold moved by one word offset, up to the end of the last fold of ``ur`` rows
    (``full_end``), so entries ``shift`` apart are one offset apart there; (0, 0) where no
    such shift leaves `SHIFT_MIN_SHARE` of the full folds to copy."""
    full = (s_r // ur) * ur  # rows in full folds
    period = int(_row_period(a_off, s_r))
    rows = period * ur // math.gcd(period, ur)
    if rows >= full or full - rows < SHIFT_MIN_SHARE * full:
        return 0, 0
    return rows * t_len, full * t_len


@njit(**_JIT)  # type: ignore[call-overload]
def _copy_shifted(unit: npt.NDArray[np.int32], shift: int, full_end: int, delta: int) -> None:
    """``unit[p] = unit[p - shift] + delta`` for ``shift <= p < full_end`` (`_fill_rows_unit`)."""
    for p in range(shift, full_end):
        unit[p] = unit[p - shift] + delta


def _fill_rows_unit(a_off: IntArray, b_off: IntArray, stamp: npt.NDArray[np.int32], s_r: int, ur: int, t_len: int,
                    unit: npt.NDArray[np.int32], every: bool, shift: int, full_end: int) -> None:
    """`_fill_unit` of a ``ROWS_TIME`` unit; with a `_unit_shift` (``shift`` > 0, every entry
    a word) only the folds below ``shift`` and the last, short fold are written from the
    address tables, and the rest copied ``shift`` entries back and moved by the one word
    offset between rows that far apart (about a third of the time on CB2a_2's wider folds)."""
    if shift <= 0:
        _fill_unit(a_off, b_off, stamp, ROWS_TIME, s_r, 1, ur, 1, t_len, 0, unit, every)
        return
    rows, full = shift // t_len, full_end // t_len
    _fill_unit(a_off[:rows], b_off, stamp, ROWS_TIME, rows, 1, ur, 1, t_len, 0, unit[:shift], True)
    _copy_shifted(unit, shift, full_end, int(a_off[rows] - a_off[0]))
    if full < s_r:
        _fill_unit(a_off[full:], b_off, stamp, ROWS_TIME, s_r - full, 1, ur, 1, t_len, 0, unit[full_end:], True)


class _UnitTables:
    """The counts of the ``ROWS_TIME`` units met last, by unit key (projection, each class's
    flattening order, classes, row class and chunk, window: what `_fill_unit` and
    `_reset_offsets` read): for every number of repetitions from 1 to the most column folds
    the operand can have (`_unit_counts`, from the unit's table, which is not kept), at most
    `UNIT_CACHE_BYTES` of them (0: none kept, every shape builds its own table, as the walk
    does); the least recently used goes first."""

    def __init__(self) -> None:
        self._counts: OrderedDict[tuple, IntArray] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple) -> IntArray | None:
        """The counts under ``key`` (``counts[r - 1]``: ``r`` repetitions), or None."""
        hit = self._counts.get(key)
        if hit is not None:
            self._counts.move_to_end(key)
        return hit

    def build(self, key: tuple, a_off: IntArray, b_off: IntArray, stamp: npt.NDArray[np.int32], s_r: int, ur: int,
              t_len: int, window: int, reps: int, r_max: int) -> IntArray:
        """The unit's counts for 1 to ``r_max`` repetitions (at least ``reps`` of them), from
        its table (`_fill_unit`, `_reset_offsets`, `_unit_counts`), kept under ``key``;
        ``stamp`` must be fresh (0 where a word exists, -1 elsewhere)."""
        self.misses += 1
        n = s_r * t_len
        unit = _SCRATCH.get("unit", n, np.int32)
        fwd = _SCRATCH.get("fwd", n, np.int32)
        words = stamp.shape[0]
        every = _all_words(stamp)
        shift, full_end = _unit_shift(a_off, s_r, ur, t_len) if every else (0, 0)
        _fill_rows_unit(a_off, b_off, stamp, s_r, ur, t_len, unit, every, shift, full_end)
        scratch = _SCRATCH.get("cnt", words, np.int32, zero=True)
        if shift > 0:
            _reset_offsets_shifted(unit, n, window, scratch, fwd, shift, full_end)
        else:
            _reset_offsets(unit, n, window, scratch, fwd)  # (scratch zero again on exit)
        r_max = max(r_max, reps)
        queries = np.empty(r_max, dtype=np.int64)
        counts = np.empty(r_max, dtype=np.int64)
        done = _unit_counts(unit, n, fwd, window, reps, r_max, UNIT_COUNT_STEPS * n, scratch, queries, counts)
        counts = counts[:done].copy()
        old = self._counts.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._counts[key] = counts
        self._bytes += counts.nbytes
        while self._bytes > UNIT_CACHE_BYTES and self._counts:
            _, c = self._counts.popitem(last=False)
            self._bytes -= c.nbytes
        return counts

    def clear(self) -> None:
        self._counts.clear()
        self._bytes = 0
        self.hits = 0
        self.misses = 0


_UNITS = _UnitTables()


def _jump_from_start(unit: npt.NDArray[np.int32], fwd: npt.NDArray[np.int32], reps: int, window: int,
                     words: int) -> int:
    """Words fetched over ``reps`` repetitions of ``unit`` from an empty window: `_jump` from
    the unit's start, as `_walk` does for a ``ROWS_TIME`` unit of at least `JUMP_MIN_REPS`
    repetitions (its first step), with a fresh stamp for the last epoch's words (the readable
    form of one entry of `_unit_counts`)."""
    state = np.zeros(5, dtype=np.int64)
    state[0] = 1
    n = unit.shape[0]
    _jump(unit, n, fwd, 0, n * reps, window, np.zeros(words, dtype=np.int32), state)
    return int(state[2])


def _rows_time_jump(key: tuple, mode: int, bounds: tuple[int, ...], dim_class: tuple[int, ...], rc: int, cc: int,
                    uc: int) -> int | None:
    """The count of a ``ROWS_TIME`` operand whose unit's counts are kept (`_UnitTables`), or
    None (walk it). Any number of repetitions: a table is built only for `JUMP_MIN_REPS` or
    more, where it pays for itself, but its counts hold one to three repetitions too (the
    stream is the unit repeated from an empty window, `_jump` exact from one on)."""
    if mode != ROWS_TIME:
        return None
    hit = _UNITS.get(key)
    if hit is None:
        return None
    size_c = 1
    for d, c in enumerate(dim_class):
        if c == cc:
            size_c *= bounds[d]
    f_c = -(-size_c // uc)
    if f_c > hit.shape[0]:
        return None
    _UNITS.hits += 1
    return int(hit[f_c - 1])


def _clear_caches() -> None:
    """Drop the walked counts of `window_fetches` and `window_fetches_capped`, the kept
    unit tables and stream tables (a cold start)."""
    _lru_clear()
    _lru_clear_capped()
    _lru_clear_sampled()
    _UNITS.clear()
    _stream_base.cache_clear()


# Clearing either walk cache drops the unit tables too, so a cold measurement stays cold.
_lru_clear = window_fetches.cache_clear
_lru_clear_capped = window_fetches_capped.cache_clear
_lru_clear_sampled = window_fetches_sampled.cache_clear
window_fetches.cache_clear = _clear_caches  # type: ignore[method-assign]
window_fetches_capped.cache_clear = _clear_caches  # type: ignore[method-assign]
window_fetches_sampled.cache_clear = _clear_caches  # type: ignore[method-assign]
