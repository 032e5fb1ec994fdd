"""The ``systolic`` model's row loop specialised per structure: the CPU engine's second driver.

`accelmap.costmodels._systolic_kernel` holds the generic driver (``_eval_rows``: one
compiled function for every problem and arch). Its row is a chain of calls (``_row``,
``_check_padded``, ``_metrics_row``, ...) that numba compiles as separate functions, each
call passing every array as a by-value structure (a few hundred bytes of arguments a row),
and its loops over levels, dims and tensors have run-time trip counts (4 to 7), so each
carries the set-up of a vectorised loop. Here, as in `_loopnest_cpu`, what the (problem,
arch) structure fixes is a compile-time constant (a tuple captured by a closure): the
shapes L, D, T, the array and PE levels, the three tensors and their SRAM levels, each
dim's GEMM class, which level may hold which tensor, which levels' blocks are one word and
whether every per-access energy is finite. The loops over them unroll and their branches
fold; the legality check, the classes, folds, cycles, SRAM counts, the DRAM-window
estimate, stalls and `Metrics` are one loop body (the walk table's probe and the neighbour
step stay calls, made only where a row reaches them). Bounds, class sizes, energies and
bandwidths stay run-time arrays, so every layer of one shape on one arch shares a kernel.

Each counting rule past the legality check is written once, in `_systolic_kernel`, and both
drivers call it: the dataflow and array classes (``_unrolled_classes``,
``_dataflow_classes``), folds, compute cycles and SRAM words (``_folds_and_counts``), the
walked-count lookup (``_walked_lookup``), the DRAM-window estimate (``_dram_words``,
``_dram``, ``_box``, ``_distinct``), stalls and utilizations (``_cycles``,
``_efficiencies``, ``_utilization``; the last two only where an output reads them) and the
`Metrics` cells (``_cell_accesses``, ``_cell_energy``); they are inlined at numba's IR
stage, so this driver's constants (array level, dims, classes, terms) fold into them where
the generic driver passes run-time values. Written twice, in the form each driver needs, is
the legality check (here each dim's product formed in registers, a level without a fanout
multiplying its temporal factors alone, then the fanouts, orders and keep bits level by
level, each test ending in a select rather than a branch, a damaged row's products in full;
``_check_padded`` there): the same verdicts in the same order. The row stays one loop body:
split into passes over blocks of rows (the check, then the counts; or the `Metrics` cells
apart) it ran 1.05-1.16x the time, since the out-of-order core no longer overlapped one
row's check with the previous row's chains of divisions (`docs/performance.md`). The integer and float operations are the same in both drivers, so that the
results are identical; the property tests compare both with the numpy path bit for bit. A kernel is compiled once
per structure and kept in numba's on-disk cache (``cache=True``: the closure's index key is
the structure tuple).

``mode`` 2 writes the whole `Metrics` (its (n, L, T) cells that hold 0.0 in every row left
unwritten: the caller's cell arrays hold 0.0 there, `zero_cells_mask`); 1 (what a search reads, `SystolicModel.
evaluate_objective`) only cycles, energy, validity and reason, the energy summed in the
same order without writing the (n, L, T) arrays; 0 neither (the report alone).

Which driver runs a batch, and how it is called, is `_systolic_engine`'s (`evaluate_rows`).
"""

from __future__ import annotations

import functools
import hashlib
import math
import pickle
from pathlib import Path

import numpy as np
from numba import njit

from accelmap.costmodels import _systolic_kernel
from accelmap.costmodels._loopnest_gen import prefetch_read, prefetch_write
from accelmap.costmodels._systolic_kernel import (
    _FACTORS,
    _FANOUT,
    _KEEP,
    _MODEL,
    _ORDER,
    _cell_accesses,
    _cell_energy,
    _cycles,
    _dataflow_classes,
    _dram_words,
    _efficiencies,
    _folds_and_counts,
    _unrolled_classes,
    _utilization,
    _walked_lookup,
)

__all__ = ["structure", "driver", "ready", "ready_known"]


def _rules_digest() -> int:
    """A digest of `_systolic_kernel`'s source, the last entry of every structure. numba's
    on-disk cache keys a driver by this module's source and the closure's values, not by the
    helpers it inlines from `_systolic_kernel`; with the digest in the closure's structure,
    an edit of those shared rules compiles the drivers anew instead of loading stale ones."""
    try:
        return int.from_bytes(hashlib.sha256(Path(_systolic_kernel.__file__).read_bytes()).digest()[:7], "big")
    except OSError:  # (no source file to read: nothing to tell apart)
        return 0


_RULES_DIGEST = _rules_digest()

# In mode 2 each row first asks for the lines of the four (n, L * T) `Metrics` cell arrays of the
# row this many rows ahead in a writable state (`_loopnest_gen.prefetch_write`, a hint that changes
# no value): at 10,000 rows and more those arrays lie outside the caches, and a row's cell stores
# (up to 480 bytes) otherwise wait for their lines.
_PREFETCH_ROWS = 4

_M, _N, _K, _B = 0, 1, 2, 3
_OS, _WS, _IS = 0, 1, 2
_JIT = {"cache": True, "_nrt": False}


def structure(consts, n_levels: int, n_tensors: int) -> tuple:  # noqa: ANN001 (a `SystolicConsts`)
    """The compile-time constants of a `SystolicConsts`: L, D, T, the array and PE levels, the
    ifmap, filter and ofmap tensors, their SRAM levels, then flat tuples of each dim's class
    (D,), the holds mask (L * T, row-major), whether each level's block is one word (L,),
    whether every per-access energy is finite and >= 0, the most nonzero terms of a read
    operand M, the operands' terms (`SystolicConsts.terms`, (2, M, 3) flat), whether each
    level has a fanout (L,), which accesses each `Metrics` cell may count (`zero_cells_mask`)
    and the digest of the shared rules' source (`_rules_digest`)."""
    ints = consts.ints
    return (n_levels, int(consts.bounds.shape[0]), n_tensors, int(ints[0]), int(ints[1]), int(ints[4]),
            int(ints[5]), int(ints[6]), int(ints[15]), int(ints[16]), int(ints[17]),
            tuple(int(c) for c in consts.dim_class), tuple(int(h) for h in np.asarray(consts.holds).ravel()),
            tuple(bool(b == 1.0) for b in consts.levels[:, 0]), bool(ints[22] != 0), int(consts.terms.shape[1]),
            tuple(int(x) for x in consts.terms.ravel()),
            tuple(bool(x * y > 1) for x, y in consts.fan_xy.tolist()), zero_cells_mask(consts, n_levels, n_tensors),
            _RULES_DIGEST)


def zero_cells_mask(consts, n_levels: int, n_tensors: int) -> int:  # noqa: ANN001
    """Per `Metrics` cell k = level * T + tensor, which of its reads (bit 3 k), fills (bit
    3 k + 1) and updates (bit 3 k + 2) the model may count: `_systolic_kernel._cell_accesses`
    (the rule itself) asked with every access count nonzero. A cell whose bit is clear holds
    0.0 in every row (a valid row's as an invalid one's), and the driver leaves it unwritten
    in mode 2: its callers hand it cell arrays whose such cells hold 0.0 already
    (`cell_tag`). (One int, not a tuple: the driver shifts it by the cell's index, where a
    tuple indexed by the cell's index made mode 1 of CB2a_2 about 1.3x the time.)"""
    ints = consts.ints
    ti, tw, to, si, sw, so, pe = (int(ints[k]) for k in (4, 5, 6, 15, 16, 17, 1))
    mask = 0
    for lv in range(n_levels):
        for t in range(n_tensors):
            acc = _cell_accesses.py_func(lv, t, ti, tw, to, si, sw, so, pe, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)
            mask |= sum(1 << j for j, x in enumerate(acc) if x != 0.0) << (3 * (lv * n_tensors + t))
    return mask


def cell_tag(S: tuple) -> tuple[bool, int]:
    """What a set of cell arrays written by the driver of structure ``S`` is kept under
    (`OutputBuffers.take`'s ``tag``): its `zero_cells_mask` and whether it skips access-free
    cells' energies (``SKIPZ``; else such a cell's energy is written, and need not be 0.0).
    Every driver of the same tag leaves the same cells at 0.0, so a set zeroed once serves all
    of them."""
    return (S[14], S[18])


@functools.lru_cache(maxsize=32)
def driver(S: tuple):  # noqa: ANN201 (a numba dispatcher)
    """The driver of one structure (`structure`): every row of the batch, its report into
    ``out_i`` / ``out_f`` when ``want_stats``, its `Metrics` fields by ``mode`` (module
    docstring), ``valid`` and ``missing`` (walked counts not in the table, as
    `_systolic_kernel._row`) always. Arguments come grouped (``mp`` the mapping arrays, ``rt``
    the run-time constants, ``wk`` the walk table and rule, ``out`` the outputs, ``sc`` the
    scratch); the arrays of a mode not wanted may have no rows. Returns how many rows miss a
    walked count (``missing`` nonzero)."""

    # The per-level and per-cell flags as bits of one int each (a tuple indexed by a loop
    # variable costs a lookup where the loop is not unrolled; a shift of a constant does not)
    FANB = sum(1 << lv for lv, f in enumerate(S[17]) if f)  # levels with a fanout
    BLKB = sum(1 << lv for lv, b in enumerate(S[13]) if b)  # levels whose block is one word
    HOLDB = sum(1 << k for k, h in enumerate(S[12]) if h)  # (level, tensor) cells a level may hold

    @njit(nogil=True, **_JIT)  # type: ignore[call-overload]
    def rows(mp, rt, wk, want_stats, mode, out, sc):
        L, D, T, AL, PE, TI, TW, TO, SI, SW, SO, DC, _HOLDS, _BLK1, SKIPZ, MT, TERMS, _FANL, NZ, _RULES = S
        temporal, spatial, order, keep, order3 = mp
        bounds, fan_xy, dim_class, full, terms, ints, flts, pairs, levels, fold_tab = rt
        tkeys, tvals, walk_limit, walk_ratio, walk_cap, walk_far, walk_sample = wk
        out_i, out_f, valid, missing, reason, level, cycles, energy, comp, util, reads, fills, updates, brk = out
        ext, suff = sc
        R, C = ints[2], ints[3]
        # the fewest row and column folds of each class (`systolic_dram._walk_rows`' reference), once a batch
        fewest_r = (-(-ints[7] // R), -(-ints[8] // R), -(-ints[9] // R))
        fewest_c = (-(-ints[7] // C), -(-ints[8] // C), -(-ints[9] // C))
        macs = flts[3]
        n_missing = 0
        for i in range(temporal.shape[0]):
            # the spatial factors' row for reading, which the legality test reads first (a hint)
            for off in range(0, 2 * L * D * 8, 64):
                prefetch_read(spatial, i + _PREFETCH_ROWS, off)
            prefetch_read(spatial, i + _PREFETCH_ROWS, 2 * L * D * 8 - 1)
            if mode == 2:  # (a hint, no value changes: `_PREFETCH_ROWS`)
                for off in range(0, L * T * 8, 64):
                    prefetch_write(reads, i + _PREFETCH_ROWS, off)
                    prefetch_write(fills, i + _PREFETCH_ROWS, off)
                    prefetch_write(updates, i + _PREFETCH_ROWS, off)
                    prefetch_write(brk, i + _PREFETCH_ROWS, off)
            # --- legality: `_check_padded` (factors, orders, keep, fanout; no capacity) ---
            # Each test ends in a select (the first failing level of a test found from the last
            # level up), so that the only branch on the row's values is the rare damaged one.
            # A level without a fanout (``FANB``) whose spatial factors are all 1 (``ones``
            # 0: a legal row's) multiplies nothing: then each dim's product is its temporal
            # factors times the spatial ones of the levels with a fanout, formed dim by dim
            # in registers (int64 products wrap alike in any order), its least factor on a
            # chain of its own (min is exact in any grouping), and those levels' fanouts
            # are their products alone. Else (a damaged row) every level multiplies in
            # full, as `_check_padded` does.
            ones = np.int64(0)
            for lv in range(L):
                if not (FANB >> lv) & 1:
                    for k in range(2 * lv * D, 2 * (lv + 1) * D):
                        ones |= spatial[i, k] ^ 1
            least = np.int64(1)
            short = False
            for d in range(D):
                prod = np.int64(1)
                low = temporal[i, d]
                for lv in range(L):
                    a = temporal[i, lv * D + d]
                    low = min(low, a)
                    prod *= a
                    if (FANB >> lv) & 1:
                        x, y = spatial[i, 2 * (lv * D + d)], spatial[i, 2 * (lv * D + d) + 1]
                        low = min(low, min(x, y))
                        prod *= x * y
                least = min(least, low)
                short |= prod < bounds[d]
            fan_lv = np.int64(L)  # (L: none; the first level found from the last one up)
            py, px = np.int64(1), np.int64(1)
            for lv in range(L - 1, -1, -1):
                ux, uy = np.int64(1), np.int64(1)
                if (FANB >> lv) & 1:
                    for d in range(D):
                        ux *= spatial[i, 2 * (lv * D + d)]
                        uy *= spatial[i, 2 * (lv * D + d) + 1]
                if lv == AL:
                    px, py = ux, uy
                fan_lv = lv if (ux > fan_xy[lv, 0]) | (uy > fan_xy[lv, 1]) else fan_lv
            if ones != 0:  # (a damaged row: every level's factors, as `_check_padded`)
                for d in range(D):
                    ext[d] = 1
                least = np.int64(1)
                fan_lv = np.int64(L)
                for lv in range(L - 1, -1, -1):
                    ux, uy = np.int64(1), np.int64(1)
                    for d in range(D):
                        k = lv * D + d
                        a, x, y = temporal[i, k], spatial[i, 2 * k], spatial[i, 2 * k + 1]
                        least = min(least, a, x, y)
                        ext[d] *= a * x * y
                        ux *= x
                        uy *= y
                    if lv == AL:
                        px, py = ux, uy
                    fan_lv = lv if (ux > fan_xy[lv, 0]) | (uy > fan_xy[lv, 1]) else fan_lv
                short = False
                for d in range(D):
                    short |= ext[d] < bounds[d]
            # A level's order is a permutation of 0..D-1 iff its D entries set D bits 0..D-1
            # and none lies outside 0..63 (``rng``'s OR has no bit from 6 up, nor the sign:
            # then each shift is by the entry itself; ``& 63`` the shift instruction's own
            # mask, so it costs nothing). For D up to 62 (a constant: the branch folds).
            order_lv = np.int64(L)
            for lv in range(L - 1, -1, -1):
                seen, rng = np.int64(0), np.int64(0)
                for d in range(D):
                    v = order[i, lv * D + d]
                    if D <= 62:
                        rng |= v
                        seen |= np.int64(1) << (v & 63)
                    else:
                        seen |= (np.int64(1) << D) if v < 0 or v >= D else (np.int64(1) << v)
                order_lv = lv if (seen != (1 << D) - 1) | ((rng >> 6) != 0) else order_lv
            # a level keeps a tensor it may not hold, or DRAM (level 0) does not keep one
            keep_lv = np.int64(L)
            for lv in range(L - 1, -1, -1):
                bad = False
                for t in range(T):
                    kb = keep[i, lv * T + t]
                    if not (HOLDB >> (lv * T + t)) & 1:
                        bad |= kb
                    if lv == 0:
                        bad |= not kb
                keep_lv = lv if bad else keep_lv
            # the verdicts in `_check_padded`'s order
            fact = (least < 1) | short
            why = _FACTORS if fact else (_ORDER if order_lv < L else (_KEEP if keep_lv < L else (
                _FANOUT if fan_lv < L else 0)))
            where = -1 if fact else (order_lv if order_lv < L else (keep_lv if keep_lv < L else (
                fan_lv if fan_lv < L else -1)))
            # --- the dataflow and the array classes (`_systolic_kernel._dataflow_classes`) ---
            df, rc, cc = -1, -1, -1
            if why == 0:
                ymask, xmask, bad = _unrolled_classes(spatial, i, AL * D, D, DC)
                df, rc, cc = _dataflow_classes(keep[i, PE * T + TI], keep[i, PE * T + TW], keep[i, PE * T + TO], ymask,
                                               xmask, bad)
                if df < 0:
                    why, where = _MODEL, PE
            ok = why == 0
            valid[i] = ok
            miss = 0
            ur = uc = f_r = f_c = folds = compute = stall = total = acc0 = acc1 = acc2 = sram_w = np.int64(0)
            dr0, dr1 = np.int64(0), np.int64(0)
            map_eff = cu = ut = 0.0
            if ok:
                # --- folds, cycles and SRAM counts (`_folds_and_counts`) ---
                s_r, s_c, t_len, ur, uc, f_r, f_c, folds, compute, util_fold, acc0, acc1, acc2, sram_w = \
                    _folds_and_counts(df, rc, cc, py, px, ints, fold_tab)
                # --- DRAM reads: walked (looked up) where `systolic_dram._walk_rows` says so, else estimated ---
                dr0, dr1, miss = _walked_lookup(rc, cc, ur, uc, f_r, f_c, fewest_r[rc] * fewest_c[cc], acc0, acc1,
                                                ints, tkeys, tvals, walk_limit, walk_ratio, walk_cap, walk_far, walk_sample,
                                                order3, i, AL)
                if dr0 < 0:
                    dr0 = _dram_words(0, i, order, order3, AL, D, DC, MT, TERMS, rc, cc, s_r, s_c, ur, uc, f_r, f_c,
                                      acc0, bounds, dim_class, full, ints, flts, pairs, ext, suff)
                if dr1 < 0:
                    dr1 = _dram_words(1, i, order, order3, AL, D, DC, MT, TERMS, rc, cc, s_r, s_c, ur, uc, f_r, f_c,
                                      acc1, bounds, dim_class, full, ints, flts, pairs, ext, suff)
                stall, total = _cycles(dr0, dr1, acc2, compute, flts)
                # (float divisions that only the report, and mode 2's utilization, read)
                if want_stats:
                    map_eff, cu = _efficiencies(s_r, s_c, t_len, f_r, f_c, util_fold, ints)
                if want_stats or mode == 2:
                    ut = _utilization(total, ints, flts)
            missing[i] = miss
            n_missing += miss != 0
            if want_stats:
                ri = out_i[i]
                ri[0] = df
                ri[1] = rc
                ri[2] = cc
                ri[3] = ur
                ri[4] = uc
                ri[5] = f_r
                ri[6] = f_c
                ri[7] = folds
                ri[8] = compute
                ri[9] = stall
                ri[10] = total
                ri[11] = acc0
                ri[12] = acc1
                ri[13] = sram_w
                ri[14] = dr0
                ri[15] = dr1
                ri[16] = acc2
                ri[17] = why
                ri[18] = where
                out_f[i, 0] = map_eff
                out_f[i, 1] = cu
                out_f[i, 2] = ut
            if mode == 0:
                continue
            # --- `Metrics` (`_metrics_row`: `_cell_accesses` and `_cell_energy` a cell, in its order) ---
            reason[i] = why
            level[i] = where
            fdr0, fdr1, fdw = float(dr0), float(dr1), float(acc2)
            fsr0, fsr1, fsw = float(acc0), float(acc1), float(sram_w)
            e_sum = 0.0
            for lv in range(L):
                for t in range(T):
                    r, f, u = 0.0, 0.0, 0.0
                    if ok:  # (the level and tensor indices are constants here: the branches fold)
                        r, f, u = _cell_accesses(lv, t, TI, TW, TO, SI, SW, SO, PE, fdr0, fdr1, fdw, fsr0, fsr1, fsw,
                                                 macs)
                    # (a cell whose ``NZ`` bits are clear holds 0.0 already: `zero_cells_mask`)
                    nz = (NZ >> (3 * (lv * T + t))) & 7
                    if mode == 2:
                        if nz & 1:
                            reads[i, lv * T + t] = r
                        if nz & 2:
                            fills[i, lv * T + t] = f
                        if nz & 4:
                            updates[i, lv * T + t] = u
                    w = f + u
                    if SKIPZ and r == 0.0 and w == 0.0:
                        if mode == 2 and nz != 0:
                            brk[i, lv * T + t] = 0.0
                        continue
                    e = _cell_energy(r, w, (BLKB >> lv) & 1 != 0, levels[lv, 0], levels[lv, 1], levels[lv, 2])
                    if mode == 2 and (nz != 0 or not SKIPZ):
                        brk[i, lv * T + t] = e
                    e_sum = e_sum + e
            c = flts[6] if ok else 0.0
            e_sum = e_sum + c
            energy[i] = e_sum if ok else math.inf
            cycles[i] = float(total) if ok else math.inf
            if mode == 2:
                comp[i] = c
                util[i] = ut if ok else 0.0
        return n_missing

    return rows


# Per structure, whether its driver was ready without a compile when this process first asked
# (`ready`); kept so that the question costs one look at numba's cache index a process.
_READY: dict[tuple, bool] = {}


def ready_known(S: tuple) -> bool | None:
    """`ready`'s answer for structure ``S`` if this process has asked already (True once the
    driver has been compiled here since), else None."""
    known = _READY.get(S)
    if known is False and getattr(driver(S), "overloads", None):
        known = _READY[S] = True
    return known


def ready(S: tuple, args: tuple) -> bool:
    """Whether the driver of structure ``S`` runs arguments of the types of ``args`` without a
    compile: compiled in this process already, or its entry in numba's on-disk cache (the
    index file of this module's ``rows``, keyed as numba keys it: the signature, the target
    and the hashes of the bytecode and the closure's values; `numba.core.caching.Cache`),
    which numba then loads on the first call (about 10 ms). The answer is kept per structure
    for the process (`ready_known`); where numba's cache cannot be read that way (no cache,
    another numba's layout) the answer is False and the driver starts by the row count."""
    known = _READY.get(S)
    if known is not None:
        return known
    disp = driver(S)
    try:
        sig = tuple(disp.typeof_pyval(a) for a in args)
        found = sig in disp.overloads
        if not found:
            cache = disp._cache
            key = cache._index_key(sig, disp.targetctx.codegen())
            found = key in cache._cache_file._load_index()
    except (AttributeError, OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError):
        found = False  # (no dispatcher, no cache, or numba's internals not as expected: the row count decides)
    _READY[S] = found
    return found
