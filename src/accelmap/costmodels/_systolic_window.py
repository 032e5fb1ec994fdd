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
entry's two classes, so two tables of per-class partial coordinates suffice). Entries
outside a padded tensor's extent are not words and fetch nothing (SCALE-Sim's ``-1``).

The window (``read_buffer_estimate_bw.py`` in CALC mode): the SRAM's 100 sets of
``floor(words / 100)`` words, half active, keep ``W = 50 * floor(words / 100)`` distinct
words; a word not among them is fetched, and the ``W``-th fetch since the last reset drops
them all. One epoch stamp per word of the tensor makes a membership test one array read,
so a count costs one pass over the stream (about a nanosecond an entry, numba), and is the
same number `accelmap.costmodels.scalesim_io.replay_dram_reads` gets from SCALE-Sim's own
address matrices.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from accelmap._typing import IntArray

__all__ = ["window_fetches", "class_table"]

_JIT = {"cache": True, "_nrt": False}

# Stream modes: how the operand's two classes meet the array.
ROWS_TIME = 0  # streamed, indexed by the row class and the time class (skewed over rows)
COLS_TIME = 1  # streamed, indexed by the column class and the time class (skewed over columns)
STATIONARY = 2  # indexed by the row and column classes (pre-filled bottom-up)


@njit(**_JIT)  # type: ignore[call-overload]
def _walk(xa: IntArray, xb: IntArray, lo: IntArray, hi: IntArray, mult: IntArray, stamp: IntArray,
          mode: int, s_r: int, s_c: int, ur: int, uc: int, t_len: int, window: int) -> int:
    """Words fetched for one operand's demand stream.

    ``xa`` (ranks, size): per-coordinate contribution of the operand's array-side class
    (the row class for ``ROWS_TIME`` and ``STATIONARY``, the column class for
    ``COLS_TIME``); ``xb`` the same for its other class (time, or columns when
    stationary). An element exists where ``lo <= coordinate < hi`` on every rank; its
    word is ``sum (coordinate - lo) * mult``. ``stamp`` (words,) is zeroed scratch.
    """
    ranks = xa.shape[0]
    f_r = (s_r + ur - 1) // ur
    f_c = (s_c + uc - 1) // uc
    epoch = 1
    count = 0
    total = 0
    for fc in range(f_c):
        c0 = fc * uc
        nc = min(uc, s_c - c0)
        for fr in range(f_r):
            r0 = fr * ur
            nr = min(ur, s_r - r0)
            if mode == STATIONARY:
                n_diag = nr
            else:
                n = nr if mode == ROWS_TIME else nc
                n_diag = t_len + n - 1
            for d in range(n_diag):
                if mode == STATIONARY:
                    lo_c, hi_c = 0, nc
                else:
                    lo_c = max(0, d - t_len + 1)
                    hi_c = min(d, n - 1) + 1
                for c in range(lo_c, hi_c):
                    if mode == STATIONARY:
                        a, b = r0 + nr - 1 - d, c0 + c
                    elif mode == ROWS_TIME:
                        a, b = r0 + c, d - c
                    else:
                        a, b = c0 + c, d - c
                    addr = 0
                    ok = True
                    for k in range(ranks):
                        x = xa[k, a] + xb[k, b]
                        if x < lo[k] or x >= hi[k]:
                            ok = False
                            break
                        addr += (x - lo[k]) * mult[k]
                    if not ok or stamp[addr] == epoch:
                        continue
                    stamp[addr] = epoch
                    total += 1
                    count += 1
                    if count == window:
                        epoch += 1
                        count = 0
    return total


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
                   ur: int, uc: int, window: int) -> int:
    """Words of one operand fetched through SCALE-Sim's window over one repetition of the GEMM.

    ``coef_key`` is the tensor's projection (ranks x D nested tuples); ``classes`` the
    operand's (array-side, other) classes for ``mode``; ``lo``/``hi`` the range of
    coordinates that exist per rank (``None``: every projected value). Cached: a search
    meets the same (dataflow, row class, chunk sizes, order) many times.
    """
    coef = np.array(coef_key, dtype=np.int64).reshape(len(coef_key), len(bounds))
    used_a = np.array(used, dtype=bool)
    size = [1, 1, 1]
    for d, c in enumerate(dim_class):
        if 0 <= c <= 2:
            size[c] *= bounds[d]
    xa = class_table(coef, used_a, dim_class, bounds, order, classes[0])
    xb = class_table(coef, used_a, dim_class, bounds, order, classes[1])
    span_hi = 1 + xa.max(axis=1) + xb.max(axis=1)
    if lo is None or hi is None:
        lo_a = np.zeros(coef.shape[0], dtype=np.int64)
        hi_a = span_hi
    else:
        lo_a = np.array(lo, dtype=np.int64)
        hi_a = np.minimum(np.array(hi, dtype=np.int64), span_hi)
    ext = np.maximum(hi_a - lo_a, 1)
    mult = np.ones(coef.shape[0], dtype=np.int64)
    for k in range(coef.shape[0] - 2, -1, -1):
        mult[k] = mult[k + 1] * ext[k + 1]
    stamp = np.zeros(int(mult[0] * ext[0]), dtype=np.int32)
    tc = 3 - rc - cc
    return int(_walk(xa, xb, lo_a, hi_a, mult, stamp, mode, size[rc], size[cc], ur, uc, size[tc], window))
