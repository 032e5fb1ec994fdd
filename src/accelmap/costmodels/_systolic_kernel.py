"""Compiled evaluation of the ``systolic`` model: SCALE-Sim's report, one mapping per loop
iteration.

The fast path of `SystolicModel.stats` / ``evaluate``. What is counted is defined in
`accelmap.costmodels.systolic` (module docstring, ``_stats_one`` and its helpers); this
module follows the batched numpy path (``_stats_batch``, the executable reference) row by
row, with its integer and floating-point arithmetic (int64 products, float64 window
formulas), so that both give the same `SystolicStats` bit for bit. The conversion to
`Metrics` (``_to_metrics``) is shared.

Here each counting rule is written once (helpers that both CPU drivers inline), with the
generic driver ``_eval_rows`` (one compiled function for every problem and arch), the
constants of a (problem, arch) (`SystolicConsts`, `systolic_consts`) and the table of walked
DRAM counts (`WalkTable`). `_systolic_cpu` compiles the same rules per structure;
`_systolic_engine` runs a batch on one driver or the other.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
from numba import njit
from numba.extending import overload, register_jitable

from accelmap._typing import IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels.systolic_dram import (
    _distinct_words,
    _operand_words,
    _overlaps,
    _tile_prefix,
    _walkable,
)
from accelmap.workloads.problem import Problem

__all__ = ["SystolicConsts", "WalkTable", "systolic_consts", "tables_fit"]

_M, _N, _K, _B = 0, 1, 2, 3
_OS, _WS, _IS = 0, 1, 2
_FACTORS, _ORDER, _KEEP, _FANOUT, _MODEL = 2, 3, 4, 5, 9
# ints columns of the output
(_DF, _RC, _CC, _UR, _UC, _FR, _FC, _FOLDS, _COMPUTE, _STALL, _TOTAL, _SR0, _SR1, _SW, _DR0, _DR1,
 _DW, _REASON, _LEVEL) = range(19)
# the report's int and float columns (`_row`'s ``ri`` and ``rf``)
_N_INT, _N_FLT = 19, 3


@dataclass(frozen=True, slots=True, eq=False)
class SystolicConsts:
    """(problem, arch, layout) as arrays, computed once per pair (compile once, evaluate many).

    ``ints`` = array level, PE level, rows, cols, tensors (ifmap, filter, ofmap), class sizes
    (m, n, k, b), d_tot (ifmap, filter), overlap (ifmap, filter), SRAM levels (ifmap, filter,
    ofmap), walkable (ifmap, filter: `systolic_dram._walkable`), neighbour pairs (ifmap, filter);
    whether every per-access energy is finite and >= 0, the problem's tensors, then the tile
    tables of an operand without duplicates with missing words (`_tile_tables`); ``flts`` =
    windows (3), MACs, DRAM read bandwidth, DRAM write bandwidth (nan = unlimited), compute
    energy of a valid mapping (pJ); ``terms`` (2, M, 3) = per read operand the nonzero terms
    of its used coordinates (dim, coefficient, last term of the coordinate;
    dim -1 past the end); ``pairs`` (2, P, 3) = per read operand the
    (pixel dim, window dim, coefficient) pairs `systolic_dram._neighbour_step_batch` scans (the
    mapping-independent part of its loops); ``levels`` (L, 3) = block words, read and write
    energy (pJ) per level, for `Metrics`; ``fold_tab`` (3, W) = per GEMM class (m, n, k) its
    folds on ``u`` PEs, ``ceil(size / u)``, for ``u`` = 1 .. W - 1 (`_fold_table`; not in
    `as_tuple`)."""

    bounds: IntArray
    holds: np.ndarray
    fan_xy: IntArray
    dim_class: IntArray
    full: IntArray
    terms: IntArray
    ints: IntArray
    flts: np.ndarray
    pairs: IntArray
    levels: np.ndarray
    fold_tab: IntArray

    def as_tuple(self) -> tuple:
        return (self.bounds, self.holds, self.fan_xy, self.dim_class, self.full, self.terms, self.ints, self.flts,
                self.pairs, self.levels)


def systolic_consts(problem: Problem, arch: Arch, layout) -> SystolicConsts:  # noqa: ANN001
    dim_class = np.array(layout.dim_class, dtype=np.int64)
    full = np.where(dim_class == _B, 1, problem.bounds).astype(np.int64)
    D = problem.n_dims
    d_tot, overlap, pairs, terms = [], [], [], []
    for o in (0, 1):
        t = layout.tensor[o]
        coef, used = problem.coefficients[t], problem.rank_used[t]
        # a padded operand fetches its existing words only (as the numpy path)
        d_tot.append(_operand_words(problem, t, full, int(_distinct_words(coef, used, full[None, :])[0])))
        overlap.append(int(_overlaps(coef, used, full)))
        # the nonzero terms of each used coordinate, as `_distinct_words` reads them
        mine = []
        for c in range(coef.shape[0]):
            nz = [d for d in range(D) if coef[c, d] != 0] if used[c] else []
            mine += [(d, int(coef[c, d]), int(j == len(nz) - 1)) for j, d in enumerate(nz)]
        terms.append(mine)
        # the (pixel dim, window dim) pairs of a coordinate, as `_neighbour_step_batch` finds them
        pairs.append([(dm, dk, int(coef[c, dm])) for c in range(coef.shape[0]) if used[c]
                      for dm in range(D) if coef[c, dm] > 0 and dim_class[dm] == _M and problem.bounds[dm] > 1
                      for dk in range(D) if coef[c, dk] > 0 and dim_class[dk] == _K and problem.bounds[dk] > 1])
    pair_arr = np.zeros((2, max(1, len(pairs[0]), len(pairs[1])), 3), dtype=np.int64)
    for o in (0, 1):
        if pairs[o]:
            pair_arr[o, :len(pairs[o])] = pairs[o]
    term_arr = np.full((2, max(1, len(terms[0]), len(terms[1])), 3), -1, dtype=np.int64)
    for o in (0, 1):
        if terms[o]:
            term_arr[o, :len(terms[o])] = terms[o]
    lv = arch.levels[0]
    rbw = lv.read_bandwidth_words_per_cycle
    wbw = lv.write_bandwidth_words_per_cycle or lv.read_bandwidth_words_per_cycle
    ints = np.array([layout.array_level, layout.pe_level, layout.rows, layout.cols, *layout.tensor,
                     *layout.class_size, *d_tot, *overlap, *layout.sram,
                     *(int(_walkable(problem, layout, o)) for o in (0, 1)), len(pairs[0]), len(pairs[1]),
                     int(all(math.isfinite(e) and e >= 0 for x in arch.levels
                             for e in (x.read_energy_pj, x.write_energy_pj))), problem.n_tensors,
                     *_tile_tables(problem, layout, d_tot, overlap)], dtype=np.int64)
    flts = np.array([*layout.window_words, float(problem.macs), math.nan if rbw is None else float(rbw),
                     math.nan if wbw is None else float(wbw),
                     float(problem.macs) * arch.compute.energy_per_mac_pj], dtype=np.float64)
    levels = np.array([[float(x.block_words), x.read_energy_pj, x.write_energy_pj] for x in arch.levels],
                      dtype=np.float64)
    return SystolicConsts(bounds=np.ascontiguousarray(problem.bounds, dtype=np.int64),
                          holds=np.ascontiguousarray(arch.holds_mask(problem)),
                          fan_xy=np.ascontiguousarray(arch.fanouts, dtype=np.int64), dim_class=dim_class, full=full,
                          terms=term_arr, ints=ints, flts=flts, pairs=pair_arr,
                          levels=levels, fold_tab=_fold_table(layout.class_size[:3], max(layout.rows, layout.cols)))


# the most PEs a row or column of the array may have for `_fold_table` to hold its folds
_FOLD_TABLE_PES = 4096


def _fold_table(sizes, pes: int) -> IntArray:  # noqa: ANN001
    """``tab[c, u] = ceil(sizes[c] / u)`` for ``u`` = 1 .. ``min(pes, _FOLD_TABLE_PES)`` (``u``
    = 0 unused): the row and column folds of a class on ``u`` PEs (`_folds_and_counts` reads
    them here instead of dividing, a 32-bit division of 20-30 cycles on the rows' critical
    path; beyond the table it divides)."""
    u = np.arange(1, min(max(pes, 1), _FOLD_TABLE_PES) + 1, dtype=np.int64)
    tab = np.zeros((3, len(u) + 1), dtype=np.int64)
    for c in range(3):
        tab[c, 1:] = -(-int(sizes[c]) // u)
    return tab


# `SystolicConsts.ints` from here on: per read operand o and class c the tile tables of an
# operand without duplicates with missing words (`_tile_tables`), meta at _TILE_META + 6 (3 o + c).
_TILE_META = 24
_TILE_MEMBERS = 4  # the most dims of bound > 1 a class may have for its tables (4! orders)
_TILE_ENTRIES = 1 << 22  # the most table entries kept (8 bytes each)


def _tile_tables(problem: Problem, layout, d_tot: list[int], overlap: list[int]) -> list[int]:  # noqa: ANN001
    """The tail of `SystolicConsts.ints` that `_varied_tiles` reads: for each read operand
    ``o`` (0 ifmap, 1 filter) and GEMM class ``c`` (0 m, 1 n, 2 k) six entries (where its
    tables start in ``ints``, or -1: none needed, -2: needed but too large, the batch then
    goes to the numpy path; the class's dims of bound > 1, ``r`` of them; those dims, -1
    after), then the tables: for an operand without im2col duplicates whose padded tensor
    has missing words (`systolic_dram._tile_prefix`) and exceeds its window, for each class
    that may be its column class in case B, one prefix table of ``size + 1`` entries per
    order of the class's dims (``r!`` of them, in the lexicographic order of
    `itertools.permutations`, which `_order_rank` ranks)."""
    import itertools

    meta = [-1] * 36
    tables: list[np.ndarray] = []
    start = _TILE_META + len(meta)
    for o in (0, 1):
        t = layout.tensor[o]
        if overlap[o] or not problem.tensors[t].padded or d_tot[o] < layout.window_words[o]:
            continue
        for c in ((_M, _K) if o == 0 else (_N, _K)):
            base = 6 * (3 * o + c)
            members = [d for d, k in enumerate(layout.dim_class) if k == c and int(problem.bounds[d]) > 1]
            n = math.factorial(len(members)) * (layout.class_size[c] + 1)
            if len(members) > _TILE_MEMBERS or start + n - _TILE_META - len(meta) > _TILE_ENTRIES:
                meta[base] = -2
                continue
            meta[base:base + 2 + len(members)] = [start, len(members), *members]
            tables += [_tile_prefix(problem, layout, o, c, tuple(members[j] for j in perm))
                       for perm in itertools.permutations(range(len(members)))]
            start += n
    return meta + [int(x) for tab in tables for x in tab]


def tables_fit(consts: SystolicConsts) -> bool:
    """Whether the kernel has every tile table it needs (`_tile_tables`; else the numpy path
    serves the batch)."""
    return not (consts.ints[_TILE_META:_TILE_META + 36] == -2).any()


@register_jitable
def _check_padded(i, temporal, spatial, order, keep, bounds, holds, fan_xy, prod):
    """`check_batch(allow_padding=True)` of mapping i up to (not including) its capacity
    check, which the systolic model ignores: (reason, level), the first failing check in
    `check_batch`'s order. One pass over the levels gathers the factor products (``prod``:
    scratch (D,)), the order permutations and the fanouts; the verdicts follow in that order."""
    L, D = temporal.shape[1], temporal.shape[2]
    T = keep.shape[2]
    for d in range(D):
        prod[d] = 1
    least = np.int64(1)
    order_lv, fan_lv = -1, -1
    for lv in range(L):
        seen, ux, uy = 0, np.int64(1), np.int64(1)
        for d in range(D):
            a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
            least = min(least, a, x, y)
            prod[d] *= a * x * y
            ux *= x
            uy *= y
            v = order[i, lv, d]
            seen |= (1 << D) if v < 0 or v >= D else (1 << v)
        if order_lv < 0 and seen != (1 << D) - 1:
            order_lv = lv
        if fan_lv < 0 and (ux > fan_xy[lv, 0] or uy > fan_xy[lv, 1]):
            fan_lv = lv
    if least < 1:
        return _FACTORS, -1
    for d in range(D):
        if prod[d] < bounds[d]:
            return _FACTORS, -1
    if order_lv >= 0:
        return _ORDER, order_lv
    for lv in range(L):
        for t in range(T):
            if (keep[i, lv, t] and not holds[lv, t]) or (lv == 0 and not keep[i, 0, t]):
                return _KEEP, lv
    if fan_lv >= 0:
        return _FANOUT, fan_lv
    return 0, -1


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _distinct(MT, TERMS, o, ext):
    """`systolic_dram._distinct_words` of read operand ``o`` over extents ``ext`` (D,): per used
    coordinate ``min(span, product of extents)`` over its nonzero terms (``TERMS``:
    `SystolicConsts.terms` (2, MT, 3) flat: dim, coefficient, last term of its coordinate;
    dim -1 past the end)."""
    total, span, prod = np.int64(1), np.int64(1), np.int64(1)
    for j in range(MT):
        base = (o * MT + j) * 3
        d = TERMS[base]
        if d >= 0:
            span += (ext[d] - 1) * TERMS[base + 1]
            prod *= ext[d]
            if TERMS[base + 2]:
                total = total * min(span, prod)
                span, prod = 1, 1
    return total


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _ceil_div(a, b):
    """``ceil(a / b)`` for ``b`` >= 1: ``-(-a // b)``, the same int64 for every ``a`` above
    -2**63, as the floor quotient plus one where the division leaves a remainder. The negated
    form divides a negative number, which takes the processor's 64-bit signed division
    (40-90 cycles on the machines measured); this one divides ``a`` >= 0, and the compiled
    code takes the 32-bit division (about 26 cycles) wherever both operands are below 2**32,
    as a row's sizes are."""
    q, r = divmod(a, b)
    return q + (r != 0)


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _box(i, order, AL, D, DC, bounds, full, chunk_cls, chunk, whole1, whole2, ext):
    """Extents: ``chunk`` flattened elements of class ``chunk_cls`` (inner dims first in the
    array level ``AL``'s order; ``order`` (n, L * D) rows, ``DC`` each dim's class), classes
    ``whole1`` / ``whole2`` at their full bounds, the others 1."""
    for d in range(D):
        ext[d] = 1
    rem = chunk
    for pos in range(D - 1, -1, -1):
        d = order[i, AL * D + pos]
        if DC[d] == chunk_cls:
            b = bounds[d]
            ext[d] = min(rem, b)
            # ceil(rem / b), without the division where it is 1 (a chunk within one dim)
            rem = 1 if 0 < rem <= b else _ceil_div(rem, b)
    for d in range(D):
        if DC[d] == whole1 or DC[d] == whole2:
            ext[d] = full[d]


@register_jitable
def _reset_loss(d_pass, h, w, reads_pass):
    hh = float(min(max(h, 0), w))
    x = d_pass / (1.0 - hh / (2.0 * w))
    return min(np.int64(math.floor(x + 0.5)), reads_pass)


# Below this bound an integer-valued float64 ``x`` and an integer-valued ``y`` >= 1 have
# ``floor(x / y)`` (the division rounded to nearest) equal to the integer quotient ``q``, so
# that ``x - q * y`` is ``fmod(x, y)`` exactly: where ``r = x - q y`` > 0, ``x / y`` lies at
# least ``1 / y`` below ``q + 1``, and rounding reaches ``q + 1`` only if ``1 / y`` is below
# half an ulp of ``q + 1``, i.e. ``y (q + 1) > 2**53``; here ``y (q + 1) <= x + y < 2**52``
# (the products ``q y <= x`` are exact, as is the difference).
_EXACT_QUOTIENT = 2.0 ** 51


def fmod(x, y):  # noqa: ANN001, ANN201
    """C's ``fmod`` of two floats (exact): ``np.fmod`` on the CPU (numba has no ``math.fmod``
    there), ``math.fmod`` in a CUDA kernel (numba-cuda has no ``np.fmod``;
    `_systolic_cuda` registers that overload)."""
    return np.fmod(x, y)


@overload(fmod)
def _fmod_cpu(x, y):  # noqa: ANN001, ANN202
    return lambda x, y: np.fmod(x, y)


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _int_fmod(x, q, y):
    """``np.fmod(x, y)`` for an integer-valued ``x`` >= 0 and ``y`` >= 1, given ``q =
    floor(x / y)``: ``x - q y`` where that is exact (``_EXACT_QUOTIENT``; the libm call's
    loop over the quotient's bits, 50-100 cycles, left out), else ``np.fmod``."""
    if x < _EXACT_QUOTIENT and y < _EXACT_QUOTIENT and y == math.floor(y):
        return x - q * y
    return fmod(x, y)


@register_jitable
def _repeated_tiles(n_full, t, t_last, k, w):
    """`systolic_dram._repeated_tiles_batch` of one row (float64, as there; its two
    ``np.fmod`` of integer-valued operands as `_int_fmod`, the same values)."""
    tf, tl, nf, kf = float(t), float(t_last), float(n_full), float(k)
    big = tf >= w
    ts = 1.0 if big else tf
    a = max(math.ceil(w / ts) - 1, 1.0)
    resets = math.floor((nf - 1) / a) if nf >= 1 else 0.0
    full_small = nf * tf + (resets * (w - a * tf) if kf >= 2 else 0.0)
    if nf == 0:
        c = 0.0
    elif nf <= a:
        c = nf * tf
    else:  # (nf > a >= 1: ``resets`` is floor((nf - 1) / a))
        c = tf + _int_fmod(nf - 1, resets, a) * tf
    if kf < 2:
        c = 0.0
    full = kf * nf * tf if big else full_small
    if big:  # every word of a tile larger than the window is missed: count = fetched mod w
        c = _int_fmod(full, math.floor(full / w), w)
    if tl >= w:
        last = kf * tl
    elif kf >= 2 and c + tl >= w:
        last = tl + (w - c)
    else:
        last = tl
    return np.int64(full + last)


@register_jitable
def _order_rank(i, order, AL, D, ints, mb, r):
    """The rank, among the orders of a class's ``r`` dims (``ints[mb + 2:]``) in the
    lexicographic order of `itertools.permutations`, of their order in row ``i``'s array
    level (``order`` (n, L * D) rows): the Lehmer code, the dims found by their positions."""
    rank = np.int64(0)
    for j in range(r):
        pj = 0
        for p in range(D):
            if order[i, AL * D + p] == ints[mb + 2 + j]:
                pj = p
        before = 0
        smaller_after = 0
        for j2 in range(r):
            pk = 0
            for p in range(D):
                if order[i, AL * D + p] == ints[mb + 2 + j2]:
                    pk = p
            if pk < pj:
                before += 1
            elif pk > pj and j2 < j:
                smaller_after += 1
        fact = np.int64(1)
        for f in range(2, r - before):
            fact *= f
        rank += smaller_after * fact
    return rank


@register_jitable
def _varied_tiles(ints, base, s_c, uc, k, w):
    """`systolic_dram._varied_tiles_one` of one row: the column chunks' tile sizes from the
    prefix table at ``ints[base:]``, each tile read on ``k`` consecutive folds through a
    reset window of ``w`` words, tile by tile from an empty window."""
    total = np.int64(0)
    c = np.int64(0)
    for a in range(0, s_c, uc):
        t = ints[base + min(a + uc, s_c)] - ints[base + a]
        if k == 1 or t >= w:
            total += k * t
            c = (c + k * t) % w
        elif c + t >= w:
            total += t + (w - c)
            c = t
        else:
            total += t
            c += t
    return total


@register_jitable
def _neighbour_step(i, order, al, o, pairs, n_pairs, dim_class, bounds, suff):
    """`systolic_dram._neighbour_step_batch` of one row: the least ``coef * inner`` over the
    operand's (pixel dim, window dim) pairs (`SystolicConsts.pairs`), ``inner`` the product of
    the window-class bounds flattened inside the window dim (``suff``: scratch (D + 1,))."""
    D = bounds.shape[0]
    best = np.int64(9223372036854775807 // 4)
    if n_pairs == 0:
        return best
    # suff[p]: product of the window-class bounds at positions p.. of the order; pos via suff
    suff[D] = 1
    for p in range(D - 1, -1, -1):
        d = order[i, al, p]
        suff[p] = suff[p + 1] * bounds[d] if dim_class[d] == _K else suff[p + 1]
    for j in range(n_pairs):
        dk = pairs[o, j, 1]
        pos_k = 0
        for p in range(D):
            if order[i, al, p] == dk:
                pos_k = p
        best = min(best, pairs[o, j, 2] * suff[pos_k + 1])
    return best


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _class_indexes(o, c):
    """`systolic_dram._class_indexes`: whether operand ``o`` (0 ifmap, 1 filter, 2 ofmap) is
    indexed by GEMM class ``c``."""
    if o == 0:
        return c == _M or c == _K
    if o == 1:
        return c == _N or c == _K
    return c == _M or c == _N


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _dram(o, i, order, order3, AL, D, DC, MT, TERMS, rc, cc, s_r, s_c, ur, uc, f_r, f_c, ir, ic, reads, bounds,
          dim_class, full, ints, flts, pairs, ext, suff):
    """`systolic_dram._dram_reads_batch` of one row, operand ``o`` (0 ifmap, 1 filter), whose
    words exceed the window (`_dram_words` has the first rule). ``order`` (n, L * D) rows
    and ``order3`` (n, L, D) the same orders; ``AL``, ``D``, ``DC``, ``MT``, ``TERMS``: the
    array level, dims, dim classes and read-operand terms (constants in the specialised
    driver, run-time values in the generic one)."""
    b_rep = ints[10]
    d_tot = ints[11 + o]
    w = flts[o]
    tc = 3 - rc - cc
    last_r = s_r - (f_r - 1) * ur
    last_c = s_c - (f_c - 1) * uc
    case_c = ir and not ic
    case_b = ic and not ir
    over = ints[13 + o] != 0
    if not over and not case_b:
        return f_c * d_tot * b_rep if case_c else d_tot * b_rep
    mb = _TILE_META + 6 * (3 * o + cc)
    if not over and ints[mb] >= 0:  # missing words: tiles of different sizes, tile by tile
        base = ints[mb] + _order_rank(i, order, AL, D, ints, mb, ints[mb + 1]) * (s_c + 1)
        return _varied_tiles(ints, base, s_c, uc, f_r, np.int64(w)) * b_rep
    # The numpy path's rules, each quantity computed only where its rule reads it, with the
    # boxes at two call sites (each box is inlined, so every site costs a copy of its code
    # and of its compile). Case C: tiles of one row chunk; window chunks on the rows (WS-like)
    # make shifted copies that share nothing once two exceed the window or the neighbour step
    # reaches a window. Cases A and B: a group of folds shares one column chunk; case B with
    # window chunks on the columns: case C's rule transposed. The first box is a row chunk
    # (case C) or column chunk, the second the last chunk where tiles shift or, else, the
    # group's tile. Without overlap only case B is left, whose two boxes are the full and the
    # last column chunk, as in the shifted rule.
    passes = f_c if case_c else 1
    chunk_cls, chunk, last = (rc, ur, last_r) if case_c else (cc, uc, last_c)
    may_shift = over and (rc == _K if case_c else (case_b and cc == _K))
    tile = np.int64(-1)
    if not over or case_c or may_shift:
        _box(i, order, AL, D, DC, bounds, full, chunk_cls, chunk, tc, -9, ext)
        tile = _distinct(MT, TERMS, o, ext)
    sure = may_shift and 2 * tile >= w
    step = np.int64(-1)
    if may_shift and not sure:
        step = _neighbour_step(i, order3, AL, o, pairs, ints[20 + o], dim_class, bounds, suff)
    shifted = not over or sure or (may_shift and step * tile >= w * chunk)
    second = np.int64(-1)
    if shifted or not case_c:
        if shifted:  # the last chunk
            c2, ch2, w2 = chunk_cls, last, -9
        else:  # the group's tile
            c2, ch2, w2 = cc, uc, rc
        _box(i, order, AL, D, DC, bounds, full, c2, ch2, tc, w2, ext)
        second = _distinct(MT, TERMS, o, ext)
    if not over:  # (case B: a chunk's indices times the time class's, at most; `reads` = f_r s_c t b_rep)
        t_len = reads // (s_c * f_r * b_rep)
        return _repeated_tiles(f_c - 1, min(tile, chunk * t_len), min(second, last * t_len), f_r, w) * b_rep
    reads_pass = reads if passes == 1 else reads // passes
    if shifted:
        est = (f_r - 1) * tile + second if case_c else _repeated_tiles(f_c - 1, tile, second, f_r, w)
    else:
        if not case_c:
            tile = second
        if tile >= w:
            if step < 0:
                step = _neighbour_step(i, order3, AL, o, pairs, ints[20 + o], dim_class, bounds, suff)
            est = _big_tile(step, ur if rc == _M else (uc if cc == _M else 1), d_tot, w, reads_pass)
        else:
            est = _reset_loss(d_tot, tile - d_tot // (2 * (f_r if case_c else f_c)), w, reads_pass)
    return passes * est * b_rep


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _dram_words(o, i, order, order3, AL, D, DC, MT, TERMS, rc, cc, s_r, s_c, ur, uc, f_r, f_c, reads, bounds,
                dim_class, full, ints, flts, pairs, ext, suff):
    """The estimated DRAM words of read operand ``o`` (`systolic_dram._dram_reads_batch`): an
    operand within the window is fetched once a repetition; else `_dram`."""
    if ints[11 + o] < flts[o]:
        return ints[11 + o] * ints[10]
    return _dram(o, i, order, order3, AL, D, DC, MT, TERMS, rc, cc, s_r, s_c, ur, uc, f_r, f_c, _class_indexes(o, rc),
                 _class_indexes(o, cc), reads, bounds, dim_class, full, ints, flts, pairs, ext, suff)


@register_jitable
def _dram_reads(o, i, order2, order3, rc, cc, s_r, s_c, ur, uc, f_r, f_c, reads, bounds, dim_class, full, terms, ints,
                flts, pairs, ext, suff):
    """`_dram_words` for the generic driver, compiled once as a function of its own (two
    inlined copies in `_row` made its compile half as long again): the array level, dims,
    classes and terms (flat) as run-time values."""
    return _dram_words(o, i, order2, order3, ints[0], bounds.shape[0], dim_class, terms.shape[0] // 6, terms, rc, cc,
                       s_r, s_c, ur, uc, f_r, f_c, reads, bounds, dim_class, full, ints, flts, pairs, ext, suff)


@register_jitable
def _big_tile(step, u_pix, d_tot, w, reads_pass):
    """A tile larger than the window keeps the duplicates of neighbouring pixels only when
    they come back within it (`systolic_dram._dram_reads_batch`, ``big_tile``)."""
    if step * u_pix < w:
        return _reset_loss(d_tot, w, w, reads_pass)
    return reads_pass


@register_jitable
def _stall(words, compute, bw):
    if math.isnan(bw):
        return np.int64(0)
    need = np.int64(math.ceil(words / bw))
    return max(need - compute, 0)



# --- walked DRAM counts, looked up by fold shape -------------------------------------------
# ``dram_window="auto"`` counts some rows' sliding-window operand on its demand stream
# (`systolic_dram._walked_reads`, Python, milliseconds a walk). The kernel looks the walked count up
# in an open-addressing table keyed by (operand, row class, column class, rows used, columns
# used, array-level order); a row whose key is missing is reported, its counts filled in
# between kernel calls (`_systolic_engine.evaluate_rows`), and the row evaluated again.


@register_jitable
def _key_slot(tkeys, o, rc, cc, ur, uc, order, i, al):
    """Slot of the key in ``tkeys`` (cap, 5 + D): where it is, or the empty slot to put it."""
    D = order.shape[2]
    h = np.int64(o * 31 + rc) * 1000003 + cc
    h = h * 1000003 + ur
    h = h * 1000003 + uc
    for p in range(D):
        h = h * 1000003 + order[i, al, p]
    h ^= h >> 29
    h *= np.int64(-4658895280553007687)
    h ^= h >> 32
    mask = tkeys.shape[0] - 1
    j = h & mask
    while True:
        k = tkeys[j]
        if k[0] < 0:
            return j
        same = k[0] == o and k[1] == rc and k[2] == cc and k[3] == ur and k[4] == uc
        if same:
            for p in range(D):
                if k[5 + p] != order[i, al, p]:
                    same = False
                    break
        if same:
            return j
        j = (j + 1) & mask


@njit(cache=True, _nrt=False, nogil=True)  # type: ignore[call-overload]
def _table_put(tkeys, tvals, head, orders, vals):
    """Insert the keys (``head`` (m, 5): operand, row class, column class, rows used, columns
    used; ``orders`` (m, 1, D): array-level orders) with their ``vals`` (m,); returns how many
    were new."""
    added = 0
    for r in range(head.shape[0]):
        j = _key_slot(tkeys, head[r, 0], head[r, 1], head[r, 2], head[r, 3], head[r, 4], orders, r, 0)
        if tkeys[j, 0] < 0:
            added += 1
        for q in range(5):
            tkeys[j, q] = head[r, q]
        for p in range(orders.shape[2]):
            tkeys[j, 5 + p] = orders[r, 0, p]
        tvals[j] = vals[r]
    return added


_PUT_LOCK = threading.Lock()


class WalkTable:
    """Walked DRAM words of (operand, row class, column class, rows used, columns used,
    array-level order) for one (problem, arch): an open-addressing table the kernel reads
    (`_key_slot`), filled from Python between kernel calls, at most half full. ``arrays``
    = (keys (cap, 5 + D), values (cap,)); a put builds new arrays and swaps them in whole, so
    that a kernel reading the table on another thread sees it before or after the put."""

    def __init__(self, n_dims: int, capacity: int = 256) -> None:
        self.n_dims = n_dims
        self.count = 0
        self.arrays = (np.full((capacity, 5 + n_dims), -1, dtype=np.int64), np.zeros(capacity, dtype=np.int64))

    def put(self, head: IntArray, orders: IntArray, vals: IntArray) -> None:
        """Add keys ``head`` (m, 5) and ``orders`` (m, D) with their counts ``vals`` (m,)."""
        with _PUT_LOCK:
            old_k, old_v = self.arrays
            need = self.count + len(head)
            cap = len(old_v)
            while 2 * need > cap:
                cap *= 2
            if cap == len(old_v):
                keys, vals_t = old_k.copy(), old_v.copy()
                count = self.count
            else:
                used = old_k[:, 0] >= 0
                keys = np.full((cap, 5 + self.n_dims), -1, dtype=np.int64)
                vals_t = np.zeros(cap, dtype=np.int64)
                count = int(_table_put(keys, vals_t, np.ascontiguousarray(old_k[used, :5]),
                                       np.ascontiguousarray(old_k[used, None, 5:]), old_v[used]))
            count += int(_table_put(keys, vals_t, np.ascontiguousarray(head, dtype=np.int64),
                                    np.ascontiguousarray(orders[:, None, :], dtype=np.int64),
                                    np.ascontiguousarray(vals, dtype=np.int64)))
            self.arrays = (keys, vals_t)
            self.count = count


# --- one mapping ------------------------------------------------------------------------------


@register_jitable
def _passes(o, rc, cc, f_r, f_c):
    """`systolic_dram._passes` of one row: passes over operand ``o`` in its demand stream."""
    ir, ic = _class_indexes(o, rc), _class_indexes(o, cc)
    if ir and not ic:
        return f_c
    if ic and not ir:
        return f_r
    return np.int64(1)


@register_jitable
def _walked(per, passes, walk_limit, walk_cap, walk_sample):
    """`systolic_dram._walk_rows` of a row under the limit ``walk_limit`` that its fold count
    gives it: its stream (``per`` entries a repetition of the GEMM) walked whole, or
    ``walk_cap`` of its ``passes`` walked, or (``walk_sample`` > 0) a sample of it walked."""
    if per <= walk_limit or walk_sample > 0:
        return True
    return passes > walk_cap and (per // max(passes, 1)) * walk_cap <= walk_limit


# --- the rules of one mapping, shared by both drivers ------------------------------------------
# `_row` below (the generic driver) and `_systolic_cpu`'s specialised driver call these: each
# counting rule of the kernel is written once here (`systolic._stats_one` is its readable
# form), inlined at numba's IR stage so that the specialised driver's compile-time constants
# (levels, tensors, dim classes) fold into them.


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _unrolled_classes(spatial, i, base, D, dim_class):
    """The GEMM classes unrolled along Y (rows, ``ymask``) and X (columns, ``xmask``) at the
    array level, as bit masks, and whether a dim of no class is unrolled (``bad``);
    ``spatial`` (n, L * D * 2) rows, ``base`` = array level * D."""
    ymask, xmask, bad = 0, 0, False
    for d in range(D):
        c = dim_class[d]
        sx, sy = spatial[i, (base + d) * 2], spatial[i, (base + d) * 2 + 1]
        if sx > 1:
            if c < 0:
                bad = True
            else:
                xmask |= 1 << c
        if sy > 1:
            if c < 0:
                bad = True
            else:
                ymask |= 1 << c
    return ymask, xmask, bad


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _dataflow_classes(k0, k1, k2, ymask, xmask, bad):
    """`systolic._stats_batch`'s dataflow and array classes: (dataflow, row class, column
    class), all -1 where the model rejects the mapping. The dataflow is the operand the PE
    registers keep (``k0``, ``k1``, ``k2``: ifmap, filter, ofmap) when exactly one is kept,
    else the pair of classes on the two axes; one class a axis at most (``ymask`` /
    ``xmask``, `_unrolled_classes`), an axis without one takes the dataflow's default."""
    n_kept = int(k0) + int(k1) + int(k2)
    df = -1
    if n_kept == 1:
        df = _OS if k2 else (_WS if k1 else _IS)
    yc, xc = -1, -1
    for c in range(3, -1, -1):  # the lowest class present (numpy's argmax)
        if ymask & (1 << c):
            yc = c
        if xmask & (1 << c):
            xc = c
    if ymask & (ymask - 1) or xmask & (xmask - 1):  # two classes on one axis
        bad = True
    both = yc >= 0 and xc >= 0 and yc != xc and yc <= _K and xc <= _K
    if not (n_kept == 1 or not both):
        s = yc + xc
        df = _OS if s == 1 else (_IS if s == 2 else (_WS if s == 3 else -1))
    dfi = df if df >= 0 else 0
    def_r = _M if dfi == _OS else _K
    def_c = _N if dfi != _IS else _M
    pair = def_r + def_c
    rc = yc if yc >= 0 else (pair - xc if xc >= 0 else def_r)
    cc = xc if xc >= 0 else (pair - yc if yc >= 0 else def_c)
    arr_ok = rc != cc and rc + cc == pair and rc <= _K and cc <= _K and rc >= 0 and cc >= 0
    if not (df >= 0 and not bad and arr_ok):
        return -1, -1, -1
    return df, rc, cc


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _folds_and_counts(df, rc, cc, py, px, ints, fold_tab):
    """SCALE-Sim's folds, compute cycles and SRAM words of a mapping with dataflow ``df`` and
    classes ``rc`` / ``cc`` on ``py`` x ``px`` PEs: (row, column, temporal class sizes, rows
    and columns used, row and column folds, folds, compute cycles, cycles a fold for the
    compute utilization, SRAM reads of ifmap and filter, ofmap words, SRAM writes). The folds
    ``ceil(s / u)`` come from ``fold_tab`` (`SystolicConsts.fold_tab`) where it holds them."""
    R, C, b_rep = ints[2], ints[3], ints[10]
    tc = 3 - rc - cc
    s_r, s_c, t_len = ints[7 + rc], ints[7 + cc], ints[7 + tc]
    ur = max(min(py, s_r), 1)
    uc = max(min(px, s_c), 1)
    W = fold_tab.shape[1]
    f_r = fold_tab[rc, ur] if ur < W else _ceil_div(s_r, ur)
    f_c = fold_tab[cc, uc] if uc < W else _ceil_div(s_c, uc)
    folds = f_r * f_c * b_rep
    os_ = df == _OS
    per_fold = t_len + R + C - 2 if os_ else 2 * R + C + t_len - 2
    compute = folds * per_fold - 1
    util_fold = t_len + R + C - 2 if os_ else 2 * R + 2 * C + t_len - 3
    acc0 = (s_r if _class_indexes(0, rc) else f_r) * (s_c if _class_indexes(0, cc) else f_c) * \
        (t_len if _class_indexes(0, tc) else 1) * b_rep
    acc1 = (s_r if _class_indexes(1, rc) else f_r) * (s_c if _class_indexes(1, cc) else f_c) * \
        (t_len if _class_indexes(1, tc) else 1) * b_rep
    acc2 = (s_r if _class_indexes(2, rc) else f_r) * (s_c if _class_indexes(2, cc) else f_c) * \
        (t_len if _class_indexes(2, tc) else 1) * b_rep
    sram_w = acc2 + (folds * (R + C) if os_ else 0)
    return s_r, s_c, t_len, ur, uc, f_r, f_c, folds, compute, util_fold, acc0, acc1, acc2, sram_w


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _walked_lookup(rc, cc, ur, uc, f_r, f_c, fewest, acc0, acc1, ints, tkeys, tvals, walk_limit, walk_ratio,
                   walk_cap, walk_far, walk_sample, order3, i, al):
    """The walked DRAM words of the two read operands where `systolic_dram._walk_rows` says so
    (``fewest``: the fewest folds of the classes; a row within ``walk_ratio`` of them walks
    streams of up to ``walk_limit`` entries, one beyond up to ``walk_far``), looked up in the
    walk table: (ifmap, filter, missing), -1 where not walked or not in the table;
    ``missing`` bit o: operand o's key is not in the table yet."""
    dr0, dr1, missing = np.int64(-1), np.int64(-1), 0
    limit = walk_limit if f_r * f_c <= walk_ratio * fewest else walk_far
    if walk_limit >= 0 and limit > 0:
        b1 = max(ints[10], 1)  # (one repetition of the GEMM, the usual case: no division)
        if ints[18] != 0 and _walked(acc0 if b1 == 1 else acc0 // b1, _passes(0, rc, cc, f_r, f_c), limit, walk_cap,
                                     walk_sample):
            j = _key_slot(tkeys, 0, rc, cc, ur, uc, order3, i, al)
            if tkeys[j, 0] >= 0:
                dr0 = tvals[j]
            else:
                missing |= 1
        if ints[19] != 0 and _walked(acc1 if b1 == 1 else acc1 // b1, _passes(1, rc, cc, f_r, f_c), limit, walk_cap,
                                     walk_sample):
            j = _key_slot(tkeys, 1, rc, cc, ur, uc, order3, i, al)
            if tkeys[j, 0] >= 0:
                dr1 = tvals[j]
            else:
                missing |= 2
    return dr0, dr1, missing


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _cycles(dr0, dr1, acc2, compute, flts):
    """Stall cycles (DRAM reads and writes against their bandwidths) and total cycles of a
    valid mapping."""
    stall = max(_stall(dr0 + dr1, compute, flts[4]), _stall(acc2, compute, flts[5]))
    return stall, compute + stall


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _efficiencies(s_r, s_c, t_len, f_r, f_c, util_fold, ints):
    """Mapping efficiency and compute utilization of a valid mapping (the report's)."""
    R, C = ints[2], ints[3]
    map_eff = float(s_r * s_c) / (f_r * f_c * R * C)
    return map_eff, map_eff * t_len / util_fold


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _utilization(total, ints, flts):
    """Utilization of a valid mapping of ``total`` cycles: MACs over cycles times PEs."""
    return flts[3] / (float(max(total, 1)) * (ints[2] * ints[3]))  # (total 0: one MAC on a 1 x 1 array)


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _timing(dr0, dr1, acc2, compute, s_r, s_c, t_len, f_r, f_c, util_fold, ints, flts):
    """Stall cycles, total cycles (`_cycles`), mapping efficiency, compute utilization
    (`_efficiencies`) and utilization (`_utilization`) of a valid mapping."""
    stall, total = _cycles(dr0, dr1, acc2, compute, flts)
    map_eff, cu = _efficiencies(s_r, s_c, t_len, f_r, f_c, util_fold, ints)
    return stall, total, map_eff, cu, _utilization(total, ints, flts)


@register_jitable
def _row(i, temporal, spatial, order, keep, bounds, holds, fan_xy, dim_class, full, terms, ints, flts, pairs,
         tkeys, tvals, walk_limit, walk_ratio, walk_cap, walk_far, walk_sample, ri, rf, ext, suff, spatial2, order2,
         fold_tab):
    """SCALE-Sim's report of mapping i into ``ri`` (19 int64 columns) and ``rf`` (3 float64:
    mapping efficiency, compute utilization, utilization); returns the walked counts missing
    from the table (bit o: operand o; the row then holds the estimate). ``spatial2`` and
    ``order2``: the spatial factors and orders as (n, L * D * 2) and (n, L * D) rows;
    ``terms`` flat."""
    D = bounds.shape[0]
    al, pe, R, C = ints[0], ints[1], ints[2], ints[3]
    for q in range(ri.shape[0]):
        ri[q] = 0
    rf[0] = 0.0
    rf[1] = 0.0
    rf[2] = 0.0
    ri[_DF] = -1
    ri[_RC] = -1
    ri[_CC] = -1
    ri[_LEVEL] = -1
    why, where = _check_padded(i, temporal, spatial, order, keep, bounds, holds, fan_xy, ext)
    if why != 0:
        ri[_REASON] = why
        ri[_LEVEL] = where
        return 0
    ymask, xmask, bad = _unrolled_classes(spatial2, i, al * D, D, dim_class)
    df, rc, cc = _dataflow_classes(keep[i, pe, ints[4]], keep[i, pe, ints[5]], keep[i, pe, ints[6]], ymask, xmask,
                                   bad)
    if df < 0:
        ri[_REASON] = _MODEL
        ri[_LEVEL] = pe
        return 0
    py, px = np.int64(1), np.int64(1)
    for d in range(D):
        py *= spatial[i, al, d, 1]
        px *= spatial[i, al, d, 0]
    s_r, s_c, t_len, ur, uc, f_r, f_c, folds, compute, util_fold, acc0, acc1, acc2, sram_w = \
        _folds_and_counts(df, rc, cc, py, px, ints, fold_tab)
    # DRAM reads: walked (looked up) where `systolic_dram._walk_rows` says so, else estimated
    dr0, dr1, missing = _walked_lookup(rc, cc, ur, uc, f_r, f_c, _ceil_div(s_r, R) * _ceil_div(s_c, C), acc0, acc1, ints,
                                       tkeys, tvals, walk_limit, walk_ratio, walk_cap, walk_far, walk_sample, order, i, al)
    if dr0 < 0:
        dr0 = _dram_reads(0, i, order2, order, rc, cc, s_r, s_c, ur, uc, f_r, f_c, acc0, bounds, dim_class, full,
                          terms, ints, flts, pairs, ext, suff)
    if dr1 < 0:
        dr1 = _dram_reads(1, i, order2, order, rc, cc, s_r, s_c, ur, uc, f_r, f_c, acc1, bounds, dim_class, full,
                          terms, ints, flts, pairs, ext, suff)
    stall, total, map_eff, cu, ut = _timing(dr0, dr1, acc2, compute, s_r, s_c, t_len, f_r, f_c, util_fold, ints, flts)
    ri[_DF] = df
    ri[_RC] = rc
    ri[_CC] = cc
    ri[_UR] = ur
    ri[_UC] = uc
    ri[_FR] = f_r
    ri[_FC] = f_c
    ri[_FOLDS] = folds
    ri[_COMPUTE] = compute
    ri[_STALL] = stall
    ri[_TOTAL] = total
    ri[_SR0] = acc0
    ri[_SR1] = acc1
    ri[_SW] = sram_w
    ri[_DR0] = dr0
    ri[_DR1] = dr1
    ri[_DW] = acc2
    rf[0] = map_eff
    rf[1] = cu
    rf[2] = ut
    return missing


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _cell_accesses(lv, t, ti, tw, to, si, sw, so, pe, dr0, dr1, dw, sr0, sr1, srw, macs):
    """The reads, fills and updates of cell (level ``lv``, tensor ``t``) of a valid mapping:
    `systolic._to_metrics`' stores in its order, the last one to a cell the one that counts.
    DRAM reads of the two read operands and writes of the ofmap (``dr0``, ``dr1``, ``dw``);
    the SRAMs' fills, reads (``sr0``, ``sr1``) and ofmap updates (``srw``; the ofmap SRAM is
    read ``dw`` words on the way out); one access a MAC of every operand in the PE
    registers. (In the specialised driver the levels and tensors are constants and each
    cell's branches fold.)"""
    r, f, u = 0.0, 0.0, 0.0
    if lv == 0 and t == ti:
        r = dr0
    if lv == 0 and t == tw:
        r = dr1
    if lv == 0 and t == to:
        u = dw
    if lv == si and t == ti:
        f = dr0
        r = sr0
    if lv == sw and t == tw:
        f = dr1
        r = sr1
    if lv == so and t == to:
        u = srw
        r = dw
    if lv == pe and t == ti:
        r = macs
    if lv == pe and t == tw:
        r = macs
    if lv == pe and t == to:
        u = macs
    return r, f, u


@njit(inline="always", cache=True, _nrt=False)  # type: ignore[call-overload]
def _cell_energy(r, w, blk1, blk, rpj, wpj):
    """`systolic._to_metrics`' energy of one (level, tensor) cell: ``r`` reads and ``w``
    writes (fills + updates) in blocks of ``blk`` words at ``rpj`` / ``wpj`` pJ a block access
    (``blk1``: a one-word block, where ``x / 1.0`` is ``x`` exactly and the division is left
    out)."""
    if blk1:
        return r * rpj + w * wpj
    return (r / blk) * rpj + (w / blk) * wpj


@register_jitable
def _metrics_row(i, ok, ri, rf, ints, flts, levels, cycles, energy, comp, util, reads, fills, updates, breakdown):
    """`systolic._to_metrics` of one row (the same accesses in the same places, the same
    float operations in the same order); the (n, L, T) fields as (n, L * T) rows."""
    T = ints[23]
    dr0, dr1, dw = float(ri[_DR0]), float(ri[_DR1]), float(ri[_DW])
    sr0, sr1, srw = float(ri[_SR0]), float(ri[_SR1]), float(ri[_SW])
    e_sum = 0.0
    skip_zeros = ints[22] != 0  # finite energies >= 0: an access-free cell costs exactly 0.0
    for lv in range(levels.shape[0]):
        for t in range(T):
            k = lv * T + t
            r, f, u = 0.0, 0.0, 0.0
            if ok:
                r, f, u = _cell_accesses(lv, t, ints[4], ints[5], ints[6], ints[15], ints[16], ints[17], ints[1],
                                         dr0, dr1, dw, sr0, sr1, srw, flts[3])
            reads[i, k] = r
            fills[i, k] = f
            updates[i, k] = u
            w = f + u
            if skip_zeros and r == 0.0 and w == 0.0:
                breakdown[i, k] = 0.0
                continue
            e = _cell_energy(r, w, levels[lv, 0] == 1.0, levels[lv, 0], levels[lv, 1], levels[lv, 2])
            breakdown[i, k] = e
            e_sum = e_sum + e
    c = flts[6] if ok else 0.0
    comp[i] = c
    e_sum = e_sum + c
    energy[i] = e_sum if ok else math.inf
    cycles[i] = float(ri[_TOTAL]) if ok else math.inf
    util[i] = rf[2] if ok else 0.0


@njit(cache=True, _nrt=False, nogil=True)  # type: ignore[call-overload]
def _eval_rows(temporal, spatial, order, keep, spatial2, order2, bounds, holds, fan_xy, dim_class, full, terms, ints, flts,
               pairs, levels, tkeys, tvals, walk_limit, walk_ratio, walk_cap, walk_far, walk_sample, want_stats, out_i, out_f, valid,
               missing, want_metrics, reason, level, cycles, energy, comp, util, reads, fills, updates, breakdown, scratch_i,
               scratch_f, ext, suff, fold_tab):
    """Every row of the batch: its report into ``out_i`` / ``out_f`` (``want_stats``) and
    its `Metrics` fields (``want_metrics``); ``valid`` and ``missing`` (`_row`) always. The
    arrays of the mode not wanted may have no rows."""
    for i in range(temporal.shape[0]):
        ri = out_i[i] if want_stats else scratch_i
        rf = out_f[i] if want_stats else scratch_f
        missing[i] = _row(i, temporal, spatial, order, keep, bounds, holds, fan_xy, dim_class, full, terms, ints,
                          flts, pairs, tkeys, tvals, walk_limit, walk_ratio, walk_cap, walk_far, walk_sample, ri, rf, ext, suff,
                          spatial2, order2, fold_tab)
        ok = ri[_REASON] == 0
        valid[i] = ok
        if want_metrics:
            reason[i] = ri[_REASON]
            level[i] = ri[_LEVEL]
            _metrics_row(i, ok, ri, rf, ints, flts, levels, cycles, energy, comp, util, reads, fills, updates,
                         breakdown)
