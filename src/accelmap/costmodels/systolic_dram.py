"""DRAM reads of the ``systolic`` model: SCALE-Sim's prefetch window, in closed form and walked.

What is counted: the words of the ifmap and of the filter that SCALE-Sim's double-buffered
read buffers fetch from DRAM (``read_buffer_estimate_bw.py``, CALC mode), for one mapping's
fold schedule (module docstring of `accelmap.costmodels.systolic`: the GEMM classes, the
row, column and time classes of a dataflow, chunks of ``ur`` rows and ``uc`` columns,
``f_r`` row folds inner and ``f_c`` column folds outer). The SRAM of ``S`` words is cut into
100 sets of ``floor(S / 100)`` words and half of them are active, so a window of
``W = 50 * floor(S / 100)`` distinct words is kept; a word not in it is fetched, and the
``W``-th fetch since the last reset drops the window whole. So the words fetched are
``W`` per reset plus the window's count at the end.

An operand that fits (``distinct < W``) is fetched once. Else, by how the operand meets the
array (it indexes two of the three classes):

* **A, stationary** (indexed by the row and column classes): every word once.
* **C, indexed by the row class** (not the column class): the sequence of ``f_r`` row-chunk
  tiles is read again on every column fold.
* **B, indexed by the column class** (not the row class): one tile per column chunk, each
  read on ``f_r`` consecutive folds (the OS filter tile).

For an operand without im2col duplicates (GEMMs, 1x1 convolutions) these are exact: the
tiles are disjoint, a pass reads each of its words once in the same order, and a window
that holds fewer words than the pass can hold only a suffix of it, so a pass of at least
``W`` words misses on every word (case C: ``f_c`` times the operand). A case-B tile of
``t < W`` words that starts at window count ``c`` is fetched once when ``c + t < W``
(count ``c + t``), else its first ``W - c`` words are dropped by the reset its first pass
causes and fetched again on the second (``t + W - c``, count ``t``); a tile of ``t >= W``
words misses on every word of every pass (``f_r t``, count ``(c + f_r t) mod W``). A tile
of a column chunk holds the chunk's indices times the time class's words, whether or not
the chunk lines up with the dims flattened in it. With tiles of one size this recurrence
has a closed form (`_repeated_tiles_one`). A padded operand (`Tensor.extent`, e.g.
SCALE-Sim's rounded-up strided ofmap reaching past the ifmap edge: those windows fetch
nothing, address -1) is fetched as its existing words only (SRAM reads and cycles still
count every im2col entry, as SCALE-Sim does).

**Tiles of different sizes** (an operand without duplicates with missing words: a strided
1x1 layer's rounded-up ofmap, a padded GEMM operand). The tiles are still disjoint and each
pass reads a tile's words in one order, so the recurrence above holds tile by tile; only
the sizes differ. The words that exist at column index ``x`` over every index ``y`` of
the time class are ``g(x) = #{y : lo_k <= a_k(x) + b_k(y) < hi_k for every coordinate
k}`` (``a_k``, ``b_k`` the parts of coordinate ``k`` from each class, ``[lo_k, hi_k)`` the
tensor's pad and extent), and with the class flattened in the array level's order the
chunk ``[j uc, (j + 1) uc)`` holds ``E((j + 1) uc) - E(j uc)`` words, ``E`` the prefix sums
of ``g`` (`_tile_prefix`, once per order of the class's dims). The count is then the
recurrence run over the ``f_c`` tiles (`_varied_tiles_one`): ``f_c`` steps a row, where
tiles of one size take ``O(1)``. Since the fetches are ``W`` per reset plus the final
count, no shorter form is known for uneven sizes (a next-fit packing of the tiles into
windows). Exact: the walk's count on every mapping tested
(``test_closed_form_with_missing_words_equals_the_walk``).

For sliding-window operands (im2col duplicates) the closed form estimates: window chunks on
the rows (WS-like) give tiles that are shifted copies, sharing nothing once two exceed the
window or once the tile holding a word's previous use is a window away (window chunks on
the columns, WS transposed, likewise, each tile read on the consecutive row folds as tiles
without duplicates are); otherwise every window reset loses about half the tile's pending
reuse (`_reset_loss`: ``x = d / (1 - h / 2W)``), and a tile larger than the window keeps
only duplicates that return within it (see ``docs/validation.md`` for how close this
comes). The chunks follow the array level's loop order (SCALE-Sim's im2col order in
`accelmap.costmodels.systolic_variants.scalesim_mapping`: pixels row-major; window rows,
columns, then channels). Where `_walk_rows` says so (``SystolicModel(dram_window=
"exact")`` every row, the default ``"auto"`` the mappings a search can end on and the
streams of at most ``max_far_walk_entries`` entries of the others) such an
operand is instead counted on its demand stream, word by word through the window
(`_window_exact`, `accelmap.costmodels._systolic_window`): SCALE-Sim's own count. With
``SystolicModel(max_sample_entries=...)`` > 0 (default 0) the other rows ``"auto"`` would
walk but whose streams are too long are counted from a walked sample of the stream
(`_systolic_window.window_fetches_sampled`): an estimate where the sample's rate was measured
over at least 150 windows' worth of fetched words (then where the window resets moves it by
less than 2 %), else the walk (exact) unless that costs more than 16 times the sample;
measured in ``docs/validation.md`` ("Beyond the far limit").

Where it lives: `_dram_reads_batch` is the batched numpy path (the executable reference),
`_dram_reads_one` the scalar path; the compiled twin is `accelmap.costmodels.
_systolic_kernel` (``_dram_words`` / ``_dram`` with ``_box``, ``_distinct``,
``_repeated_tiles``, ``_reset_loss``, ``_neighbour_step`` and ``_big_tile``, inlined into
the specialised driver of `accelmap.costmodels._systolic_cpu`), which follows the numpy path
row by row with the same int64 and float64 arithmetic. The walk itself is
`accelmap.costmodels._systolic_window`; the kernel looks walked counts up in its
``WalkTable``, filled by `_walked_reads`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, IntArray
from accelmap.costmodels._systolic_window import (
    COLS_TIME,
    ROWS_TIME,
    STATIONARY,
    canonical_order,
    window_fetches,
    window_fetches_capped,
    window_fetches_sampled,
)
from accelmap.costmodels.systolic_layout import _B, _K, _M, _N, SystolicLayout
from accelmap.workloads.problem import Problem

# A longer stream of a mapping near the fewest folds, read over more passes than this, this
# many of which fit in the walk's limit, is walked with at most this many passes
# (`SystolicModel.CAPPED_WALK_REPS`, `_walk_rows`).
CAPPED_WALK_REPS = 4


def _class_indexes(o: int, c: int) -> bool:
    """Whether operand ``o`` (ifmap, filter, ofmap) is indexed by class ``c`` (by the classes'
    definition; an empty class has size 1 and changes no count either way)."""
    return c in {0: (_M, _K), 1: (_N, _K), 2: (_M, _N)}[o]


def _distinct_words(coef: IntArray, used: BoolArray, ext: IntArray) -> IntArray:
    """(n,) distinct words of one tensor touched by a box of extents ``ext`` (n, D).

    A coordinate ``sum a_d x_d`` over the box takes ``min(span, prod of extents)`` values:
    the span ``1 + sum a_d (e_d - 1)`` when windows overlap (stride <= window), the plain
    product when they do not (a strided 1x1 convolution skips rows).
    """
    total = np.ones(ext.shape[0], dtype=np.int64)
    for c in range(coef.shape[0]):
        if not used[c]:
            continue
        terms = np.nonzero(coef[c])[0]
        span = 1 + (ext[:, terms] - 1) @ coef[c, terms]
        prod = np.prod(ext[:, terms], axis=1)
        total = total * np.minimum(span, prod)
    return total


def _distinct_words_one(coef: IntArray, used: BoolArray, ext: list[int]) -> int:
    total = 1
    for c in range(coef.shape[0]):
        if not used[c]:
            continue
        terms = [d for d in range(coef.shape[1]) if coef[c, d] > 0]
        span = 1 + sum(int(coef[c, d]) * (ext[d] - 1) for d in terms)
        prod = math.prod(ext[d] for d in terms)
        total *= min(span, prod)
    return total


def _operand_words(problem: Problem, t: int, full: IntArray, distinct: int) -> int:
    """Words of tensor ``t`` one repetition of the GEMM fetches from DRAM: its distinct
    words, less those outside a padded tensor's extent (SCALE-Sim fetches nothing for the
    windows of a rounded-up ofmap that lie past the ifmap edge: address -1)."""
    if not problem.tensors[t].padded:
        return distinct
    return _existing_words(problem, tuple(int(b) for b in full))[t]


@functools.lru_cache(maxsize=256)
def _existing_words(problem: Problem, full: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(w) for w in problem.existing_words(np.array(full, dtype=np.int64)))


def _chunk_extents_one(bounds: list[int], members: list[int], size: int) -> list[int]:
    ext = [1] * len(bounds)
    rem = size
    for d in reversed(members):
        ext[d] = min(rem, bounds[d])
        rem = -(-rem // bounds[d])
    return ext


def _overlaps(coef: IntArray, used: BoolArray, bounds: IntArray) -> bool:
    """True when some coordinate of the tensor repeats across the loop box (im2col)."""
    for c in range(coef.shape[0]):
        if not used[c]:
            continue
        terms = [d for d in range(coef.shape[1]) if coef[c, d] > 0 and bounds[d] > 1]
        if len(terms) < 2:
            continue
        span = 1 + sum(int(coef[c, d]) * (int(bounds[d]) - 1) for d in terms)
        if span < math.prod(int(bounds[d]) for d in terms):
            return True
    return False


def _passes(o: int, rc: IntArray, cc: IntArray, f_r: IntArray, f_c: IntArray) -> IntArray:
    """(n,) passes over operand ``o`` in its demand stream: a streamed operand indexed by the
    row class is read once per column fold, one indexed by the column class once per row
    fold, the stationary operand once (`accelmap.costmodels._systolic_window`)."""
    cls_of = np.array([_class_indexes(o, c) for c in range(3)])
    ir, ic = cls_of[rc], cls_of[cc]
    out: IntArray = np.where(ir & ~ic, f_c, np.where(ic & ~ir, f_r, 1)).astype(np.int64)
    return out


# `_walk_rows`: a row walked whole (every repetition; larger than any repetition count)
WALK_ALL = 1 << 62


def _walk_rows(valid: BoolArray, reads: IntArray, folds: IntArray, fewest: IntArray, b_rep: int,
               rule: tuple[int, float, int, int] | None, passes: IntArray) -> IntArray:
    """(n,) how each row's operand is counted on its demand stream: 0 not at all (the
    estimate), `WALK_ALL` walked whole (exact), the most repetitions of its pass over
    the operand walked (`window_fetches_capped`: exact here, since such a row has more
    passes than `_systolic_window.JUMP_MIN_REPS`, which are counted from reset to reset),
    or, negative, minus the entries of a walked sample (`window_fetches_sampled`).

    ``rule`` None (``"exact"``): every valid row whole; a negative first length
    (``"estimate"``): none; else (``"auto"``) ``(limit, ratio, far, sample)``: a row whose
    ``folds`` (per repetition of the GEMM) are at most ``ratio`` times the ``fewest`` the
    array allows is walked within ``limit`` entries, any other within ``far`` (0: not at
    all): whole when the stream has at most that many entries (one repetition's stream has
    the operand's SRAM reads, ``reads`` over ``b_rep`` repetitions, as entries, which
    bounds the walk's length), else `CAPPED_WALK_REPS` of its ``passes`` when they have at
    most that many entries and there are more passes than that, else, when ``sample`` > 0,
    from a sample of ``sample`` entries. Only an operand that needs the window
    (`_dram_reads_batch`) is walked, whatever this says."""
    if rule is None:
        out: IntArray = np.where(valid, WALK_ALL, 0).astype(np.int64)
        return out
    limit, ratio, far, sample = rule
    cap = CAPPED_WALK_REPS
    per = reads // max(b_rep, 1)
    lim = np.where(folds <= ratio * fewest, limit, far)
    on = valid & (limit >= 0) & (lim > 0)
    whole = on & (per <= lim)
    capped = on & ~whole & (passes > cap) & ((per // np.maximum(passes, 1)) * cap <= lim)
    sampled = on & ~whole & ~capped & (sample > 0)
    out = np.where(whole, WALK_ALL, np.where(capped, cap, np.where(sampled, -sample, 0))).astype(np.int64)
    return out


def _walkable(problem: Problem, layout: SystolicLayout, o: int) -> bool:
    """Whether operand ``o`` is ever walked: im2col duplicates and more words than the window."""
    t = layout.tensor[o]
    dim_class = np.array(layout.dim_class, dtype=np.int64)
    full = np.where(dim_class == _B, 1, problem.bounds)
    coef, used = problem.coefficients[t], problem.rank_used[t]
    d_tot = _operand_words(problem, t, full, int(_distinct_words(coef, used, full[None, :])[0]))
    return d_tot >= layout.window_words[o] and _overlaps(coef, used, full)


def _dram_reads_batch(problem: Problem, layout: SystolicLayout, o: int, t: int, rc: IntArray, cc: IntArray,
                      s_r: IntArray, s_c: IntArray, ur: IntArray, uc: IntArray, f_r: IntArray, f_c: IntArray,
                      ir: BoolArray, ic: BoolArray, reads: IntArray, bounds: IntArray,
                      dim_class: IntArray, order: IntArray, walk_reps: IntArray | None = None) -> IntArray:
    """(n,) DRAM words read for operand ``o`` (0 ifmap, 1 filter); see the module docstring.

    ``order`` (n, D) is the array level's loop order: the flattening order (outermost first)
    of the dims of each class when they are cut into fold chunks. On the rows where
    ``walk_reps`` (`_walk_rows`) is not zero a sliding-window operand is counted on its
    demand stream (`_window_exact`, once per distinct fold shape and order: walked, or from
    a walked sample where negative) instead of estimated.
    """
    n = rc.shape[0]
    w = layout.window_words[o]
    coef = problem.coefficients[t]
    used = problem.rank_used[t]
    b_rep = layout.class_size[3]
    full = np.where(dim_class == _B, 1, bounds)  # one repetition of the GEMM
    d_tot = _operand_words(problem, t, full, int(_distinct_words(coef, used, full[None, :])[0]))
    if d_tot < w or n == 0:
        return np.full(n, d_tot * b_rep, dtype=np.int64)
    overlap = _overlaps(coef, used, full)
    tc = 3 - rc - cc
    rows_idx = np.arange(n)

    def box(chunk_cls: IntArray, chunk: IntArray, whole: list[IntArray]) -> IntArray:
        """Extents: ``chunk`` flattened elements of class ``chunk_cls`` (inner dims first in
        ``order``), the classes in ``whole`` at their full bounds, every other dim 1."""
        ext = np.ones((n, len(bounds)), dtype=np.int64)
        rem = chunk.copy()
        for pos in range(len(bounds) - 1, -1, -1):
            d = order[:, pos]
            member = dim_class[d] == chunk_cls
            b = bounds[d]
            ext[rows_idx, d] = np.where(member, np.minimum(rem, b), ext[rows_idx, d])
            rem = np.where(member, -(-rem // b), rem)
        for wc in whole:
            ext = np.where(dim_class[None, :] == wc[:, None], full[None, :], ext)
        return ext

    last_r = s_r - (f_r - 1) * ur
    last_c = s_c - (f_c - 1) * uc
    case_c = ir & ~ic  # tile set by the row chunk; the sequence of f_r tiles repeats f_c times
    case_b = ic & ~ir  # tile set by the column chunk, read on f_r consecutive folds
    if not overlap:
        # Without duplicates every index of a column chunk has its own words, so a tile holds
        # the chunk's indices times the time class's (case B's operand indexes both); the box of
        # the chunk's extents holds more where the chunk does not line up with the dims
        # flattened in it (28 pixels of 13-pixel rows span 3 rows: 39 pixels)
        size_t = np.asarray(layout.class_size, dtype=np.int64)[tc]
        t_full = np.minimum(_distinct_words(coef, used, box(cc, uc, [tc])), uc * size_t)
        t_last = np.minimum(_distinct_words(coef, used, box(cc, last_c, [tc])), last_c * size_t)
        rep = _repeated_tiles_batch(f_c - 1, t_full, t_last, f_r, w)
        if problem.tensors[t].padded:  # missing words: tiles of different sizes, the recurrence tile by tile
            on = np.flatnonzero(case_b)
            rep[on] = _varied_tiles_batch(problem, layout, o, cc[on], uc[on], f_r[on], order[on])
        # case A (stationary operand): every word once
        out: IntArray = np.where(case_b, rep, np.where(case_c, f_c * d_tot, d_tot))
        return out * b_rep
    walked = None
    sel = np.flatnonzero(walk_reps != 0) if walk_reps is not None else np.zeros(0, dtype=np.int64)
    if sel.size:
        assert walk_reps is not None
        walked = np.zeros(n, dtype=np.int64)
        walked[sel] = _walked_reads(problem, layout, o, rc[sel], cc[sel], ur[sel], uc[sel], order[sel],
                                    walk_reps[sel])
        if sel.size == n:
            return walked
    # Sliding-window operand (im2col duplicates): estimates per pass over the operand.
    passes = np.where(case_c, f_c, 1)
    reads_pass = reads // passes
    d_arr = np.full(n, d_tot, dtype=np.int64)
    # Case C: tiles of one row chunk each.
    t_full = _distinct_words(coef, used, box(rc, ur, [tc]))
    t_last = _distinct_words(coef, used, box(rc, last_r, [tc]))
    # Window chunks on the rows (WS-like) make tiles that are shifted copies of one another:
    # nothing is reused from one to the next once two of them exceed the window, or once the
    # tile that shares a word with this one (``step / ur`` tiles back) is a window away.
    step = _neighbour_step_batch(coef, used, dim_class, bounds, order)
    shifted = (rc == _K) & ((2 * t_full >= w) | (step * t_full >= w * ur))
    # A tile larger than the window keeps the duplicates of neighbouring pixels only when
    # they come back within the window: `step` im2col elements later, `u` words a step.
    u_pix = np.where(rc == _M, ur, np.where(cc == _M, uc, 1))
    near = step * u_pix < w
    big_tile = np.where(near, _reset_loss(d_arr, np.full(n, w), w, reads_pass), reads_pass)
    c_est = np.where(
        shifted, (f_r - 1) * t_full + t_last,
        np.where(t_full >= w, big_tile, _reset_loss(d_arr, t_full - d_tot // (2 * f_r), w, reads_pass)),
    )
    # Cases A and B: a group of folds shares one column chunk, tiled like case C.
    group = _distinct_words(coef, used, box(cc, uc, [tc, rc]))
    ab_est = np.where(group >= w, big_tile, _reset_loss(d_arr, group - d_tot // (2 * f_c), w, reads_pass))
    # Case B with window chunks on the columns (case C's WS-like tiles, transposed): shifted
    # copies again, each read on `f_r` consecutive folds, as tiles without duplicates are.
    tb_full = _distinct_words(coef, used, box(cc, uc, [tc]))
    tb_last = _distinct_words(coef, used, box(cc, last_c, [tc]))
    shifted_b = case_b & (cc == _K) & ((2 * tb_full >= w) | (step * tb_full >= w * uc))
    ab_est = np.where(shifted_b, _repeated_tiles_batch(f_c - 1, tb_full, tb_last, f_r, w), ab_est)
    est = np.where(case_c, c_est, ab_est)
    out = passes * est * b_rep
    if walked is not None:
        out[sel] = walked[sel]
    return out


def _dram_reads_one(problem: Problem, layout: SystolicLayout, o: int, rc: int, cc: int, s_r: int, s_c: int,
                    ur: int, uc: int, f_r: int, f_c: int, ir: bool, ic: bool, reads: int,
                    order: list[int], walk_reps: int = 0) -> int:
    t = layout.tensor[o]
    w = layout.window_words[o]
    coef = problem.coefficients[t]
    used = problem.rank_used[t]
    b_rep = layout.class_size[3]
    dim_class = layout.dim_class
    bounds = [int(b) for b in problem.bounds]
    full = [1 if dim_class[d] == _B else bounds[d] for d in range(len(bounds))]
    d_tot = _operand_words(problem, t, np.array(full), _distinct_words_one(coef, used, full))
    if d_tot < w:
        return d_tot * b_rep
    overlap = _overlaps(coef, used, np.array(full))
    tc = 3 - rc - cc

    def box(chunk_cls: int, chunk: int, whole: list[int]) -> list[int]:
        members = [d for d in order if dim_class[d] == chunk_cls]
        ext = _chunk_extents_one(bounds, members, chunk)
        for d in range(len(bounds)):
            if dim_class[d] in whole:
                ext[d] = full[d]
        return ext

    case_c = ir and not ic
    case_b = ic and not ir
    if not overlap:
        if case_b and problem.tensors[t].padded:  # missing words: tiles of different sizes
            members = tuple(d for d in order if dim_class[d] == cc and bounds[d] > 1)
            return _varied_tiles_one(_tile_prefix(problem, layout, o, cc, members), s_c, uc, f_r, int(w)) * b_rep
        if case_b:  # (the batched path's rule: a chunk's indices times the time class's, at most)
            size_t = layout.class_size[tc]
            t_full = min(_distinct_words_one(coef, used, box(cc, uc, [tc])), uc * size_t)
            last_c = s_c - (f_c - 1) * uc
            t_last = min(_distinct_words_one(coef, used, box(cc, last_c, [tc])), last_c * size_t)
            return _repeated_tiles_one(f_c - 1, t_full, t_last, f_r, w) * b_rep
        if case_c:
            return f_c * d_tot * b_rep
        return d_tot * b_rep
    if walk_reps != 0:
        return _window_exact(problem, layout, o, rc, cc, ur, uc, order, walk_reps=walk_reps)
    passes = f_c if case_c else 1
    reads_pass = reads // passes
    if case_c:
        t_full = _distinct_words_one(coef, used, box(rc, ur, [tc]))
        t_last = _distinct_words_one(coef, used, box(rc, s_r - (f_r - 1) * ur, [tc]))
        if rc == _K and (2 * t_full >= w or _neighbour_step_one(coef, used, dim_class, bounds, order) * t_full
                         >= w * ur):
            est = (f_r - 1) * t_full + t_last
        elif t_full >= w:
            est = _big_tile_one(coef, used, dim_class, bounds, order, rc, cc, ur, uc, d_tot, w, reads_pass)
        else:
            est = _reset_loss(d_tot, t_full - d_tot // (2 * f_r), w, reads_pass)
    else:
        group = _distinct_words_one(coef, used, box(cc, uc, [tc, rc]))
        tb_full = _distinct_words_one(coef, used, box(cc, uc, [tc]))
        if case_b and cc == _K and (2 * tb_full >= w or _neighbour_step_one(coef, used, dim_class, bounds, order)
                                    * tb_full >= w * uc):
            tb_last = _distinct_words_one(coef, used, box(cc, s_c - (f_c - 1) * uc, [tc]))
            est = _repeated_tiles_one(f_c - 1, tb_full, tb_last, f_r, w)
        elif group >= w:
            est = _big_tile_one(coef, used, dim_class, bounds, order, rc, cc, ur, uc, d_tot, w, reads_pass)
        else:
            est = _reset_loss(d_tot, group - d_tot // (2 * f_c), w, reads_pass)
    return passes * est * b_rep


def _repeated_tiles_one(n_full: int, t: int, t_last: int, k: int, w: float) -> int:
    """Words fetched for ``n_full`` tiles of ``t`` words and a last one of ``t_last`` words,
    each read on ``k`` consecutive folds, through SCALE-Sim's reset window of ``w`` words.

    With ``t >= w`` every pass misses on every word (a reset falls before any word comes
    back), so ``k * t`` per tile and the window count afterwards is that total modulo ``w``.
    With ``t < w``: a tile that starts at window count ``c`` and overflows it (``c + t >= w``)
    loses the ``w - c`` words fetched before the reset and fetches them again on its second
    pass, after which the window holds just that tile (count ``t``). From an empty window
    ``a = ceil(w / t) - 1`` tiles fit, and every ``a``-th tile after them overflows, each
    time at count ``a * t``. (Scalar path; `_repeated_tiles_batch` is the same on arrays.)
    """
    full: float
    c: float
    if t >= w:
        # every pass over a tile larger than the window misses on every word, so the
        # window count after the full tiles is the words fetched so far, modulo `w`
        full = k * n_full * t
        c = full % w
    else:
        a = max(int(math.ceil(w / t)) - 1, 1)
        resets = (n_full - 1) // a if n_full >= 1 else 0
        full = n_full * t + (resets * (w - a * t) if k >= 2 else 0)
        if n_full == 0:
            c = 0
        elif n_full <= a:
            c = n_full * t
        else:
            c = t + ((n_full - 1) % a) * t
        if k < 2:
            c = 0  # no refetch without a second pass; only the overflow matters below
    last: float
    if t_last >= w:
        last = k * t_last
    elif k >= 2 and c + t_last >= w:
        last = t_last + (w - c)
    else:
        last = t_last
    return int(full + last)


def _repeated_tiles_batch(n_full: IntArray, t: IntArray, t_last: IntArray, k: IntArray, w: float) -> IntArray:
    """`_repeated_tiles_one` on arrays (n,), in float64 (exact for these integer sizes)."""
    tf = t.astype(np.float64)
    tl = t_last.astype(np.float64)
    nf = n_full.astype(np.float64)
    kf = k.astype(np.float64)
    big = tf >= w
    ts = np.where(big, 1.0, tf)
    a = np.maximum(np.ceil(w / ts) - 1, 1)
    resets = np.where(nf >= 1, np.floor((nf - 1) / a), 0)
    full_small = nf * tf + np.where(kf >= 2, resets * (w - a * tf), 0)
    c = np.where(nf == 0, 0, np.where(nf <= a, nf * tf, tf + np.mod(nf - 1, a) * tf))
    c = np.where(kf >= 2, c, 0)
    full = np.where(big, kf * nf * tf, full_small)
    c = np.where(big, np.mod(full, w), c)  # big tiles: every word missed, count = fetched mod w
    last = np.where(tl >= w, kf * tl,
                    np.where((kf >= 2) & (c + tl >= w), tl + (w - c), tl))
    out: IntArray = (full + last).astype(np.int64)
    return out



@functools.lru_cache(maxsize=64)
def _tile_prefix(problem: Problem, layout: SystolicLayout, o: int, cls: int, members: tuple[int, ...]) -> IntArray:
    """(size + 1,) prefix sums, over the indices of class ``cls`` flattened in ``members``'
    order (its dims of bound > 1, outermost first), of the words of operand ``o`` that exist
    at each index over every index of the operand's other class (one repetition of the
    GEMM): the words of the column chunk ``[a, b)`` are ``prefix[b] - prefix[a]``.

    A word exists when every coordinate ``k`` lies in ``[lo_k, hi_k)`` (the tensor's pad and
    extent); a coordinate is the sum of its part from this class, ``x_k``, and from the
    other, ``y_k`` (`_systolic_window.class_table`). Coordinates of one class only filter
    the indices of that class; for one coordinate of both the count over the other class
    is ``#{y : lo_k - x_k <= y_k < hi_k - x_k}`` (two binary searches), for more every pair
    is checked."""
    from accelmap.costmodels._systolic_window import class_table

    t = layout.tensor[o]
    tensor = problem.tensors[t]
    n_ranks = len(tensor.projection)
    coef = problem.coefficients[t][:n_ranks]
    used = problem.rank_used[t][:n_ranks]
    dim_class = layout.dim_class
    bounds = tuple(1 if c == _B else int(b) for c, b in zip(dim_class, problem.bounds, strict=True))
    other = ({_M, _K} if o == 0 else {_N, _K}) - {cls}
    (oc,) = other
    xa = class_table(coef, used, dim_class, bounds, members, cls)  # (ranks, size of cls)
    xb = class_table(coef, used, dim_class, bounds, tuple(range(len(bounds))), oc)  # (ranks, size of oc)
    lo = np.array(tensor.pad if tensor.pad is not None else (0,) * n_ranks, dtype=np.int64)
    hi = lo + np.array(tensor.extent, dtype=np.int64)
    ok_x = np.ones(xa.shape[1], dtype=bool)
    ok_y = np.ones(xb.shape[1], dtype=bool)
    mixed = []
    for k in range(n_ranks):
        a_zero, b_zero = not xa[k].any(), not xb[k].any()
        if b_zero:
            ok_x &= (xa[k] >= lo[k]) & (xa[k] < hi[k])
        elif a_zero:
            ok_y &= (xb[k] >= lo[k]) & (xb[k] < hi[k])
        else:
            mixed.append(k)
    if not mixed:
        words = np.where(ok_x, int(ok_y.sum()), 0)
    elif len(mixed) == 1:
        k = mixed[0]
        ys = np.sort(xb[k, ok_y])
        words = np.where(ok_x, np.searchsorted(ys, hi[k] - xa[k], side="left")
                         - np.searchsorted(ys, lo[k] - xa[k], side="left"), 0)
    else:
        words = np.zeros(xa.shape[1], dtype=np.int64)
        yb = xb[np.ix_(np.array(mixed), np.flatnonzero(ok_y))]  # (mixed ranks, y)
        step = max(1, (1 << 22) // max(yb.shape[1], 1))
        for a in range(0, xa.shape[1], step):
            v = xa[mixed, a:a + step][:, :, None] + yb[:, None, :]  # (mixed, x, y)
            inside = ((v >= lo[mixed][:, None, None]) & (v < hi[mixed][:, None, None])).all(axis=0)
            words[a:a + step] = inside.sum(axis=1)
        words = np.where(ok_x, words, 0)
    out: IntArray = np.concatenate([[0], np.cumsum(words)]).astype(np.int64)
    out.flags.writeable = False
    return out


def _varied_tiles_one(prefix: IntArray, s_c: int, uc: int, k: int, w: int) -> int:
    """Words fetched for the column chunks of ``uc`` indices (the last one shorter) of an
    operand without duplicates whose tile sizes ``prefix`` gives (`_tile_prefix`), each
    tile read on ``k`` consecutive folds, through SCALE-Sim's reset window of ``w`` words:
    the recurrence of the module docstring, tile by tile from an empty window (window count
    ``c``): a tile of ``t`` words is fetched ``k`` times whole when ``k == 1`` or ``t >= w``
    (count ``(c + k t) mod w``), ``t + (w - c)`` times when ``c + t >= w`` (count ``t``),
    else once (count ``c + t``). `_repeated_tiles_one` is its closed form for tiles of one
    size; `_systolic_kernel._varied_tiles` the compiled twin."""
    total = 0
    c = 0
    at = prefix[np.minimum(np.arange(0, s_c + uc, uc), s_c)]  # at the chunks' bounds, the last s_c
    for t in (at[1:] - at[:-1]).tolist():
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


def _varied_tiles_batch(problem: Problem, layout: SystolicLayout, o: int, cc: IntArray, uc: IntArray, f_r: IntArray,
                        order: IntArray) -> IntArray:
    """(m,) `_varied_tiles_one` of each row (column class ``cc``, chunk ``uc``, ``f_r``
    passes a tile, array-level ``order`` (m, D)): once per distinct (class, the order of its
    dims, chunk, passes), the tile sizes of all chunks at once from `_tile_prefix`."""
    out = np.zeros(cc.shape[0], dtype=np.int64)
    if cc.size == 0:
        return out
    dim_class = np.array(layout.dim_class, dtype=np.int64)
    member = (dim_class[order] == cc[:, None]) & (problem.bounds[order] > 1)  # (m, D) in order
    key = np.concatenate([np.stack([cc, uc, f_r], axis=1), np.where(member, order, -1)], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    w = int(layout.window_words[o])
    size = layout.class_size
    vals = []
    prefixes: dict[tuple[int, ...], IntArray] = {}  # (hashing the problem for the cache costs more than a key's count)
    for u in uniq.tolist():
        c, chunk, k = u[0], u[1], u[2]
        members = tuple(d for d in u[3:] if d >= 0)
        prefix = prefixes.get((c, *members))
        if prefix is None:
            prefix = prefixes[(c, *members)] = _tile_prefix(problem, layout, o, c, members)
        vals.append(_varied_tiles_one(prefix, size[c], chunk, k, w))
    out[:] = np.array(vals, dtype=np.int64)[inv.ravel()]
    return out

def _reset_loss(d_pass: Any, h: Any, w: float, reads_pass: Any) -> Any:
    """Estimated words fetched for one pass over ``d_pass`` distinct words of a sliding-window
    operand whose fold tiles share ``h`` words with their neighbours: every window reset
    (one per ``w`` fetched words) loses on average half of that working set, so
    ``x = d + (x / w) * h / 2``, i.e. ``x = d / (1 - h / 2w)``, at most the SRAM reads."""
    if isinstance(d_pass, np.ndarray):
        hh = np.minimum(np.maximum(h, 0), w).astype(np.float64)
        x = d_pass / (1.0 - hh / (2.0 * w))
        return np.minimum(np.floor(x + 0.5), reads_pass).astype(np.int64)
    hh = float(min(max(h, 0), w))
    x = d_pass / (1.0 - hh / (2.0 * w))
    return int(min(math.floor(x + 0.5), reads_pass))


def _neighbour_step_batch(coef: IntArray, used: BoolArray, dim_class: IntArray, bounds: IntArray,
                          order: IntArray) -> IntArray:
    """(n,) im2col elements between a word's uses by two neighbouring pixels.

    In a coordinate ``a * x_m + 1 * x_k`` (pixel dim ``x_m``, window dim ``x_k``) the next
    pixel reads what the window read ``a`` steps of ``x_k`` earlier; one step of ``x_k`` is
    the product of the window dims flattened inside it (``order``: outermost first). A huge
    value when no coordinate pairs a pixel dim with a window dim.
    """
    n, n_dims = order.shape
    pos = np.argsort(order, axis=1)  # (n, D) position of each dim in the flattening order
    best = np.full(n, np.iinfo(np.int64).max // 4, dtype=np.int64)
    for c in range(coef.shape[0]):
        if not used[c]:
            continue
        ms = [d for d in range(n_dims) if coef[c, d] > 0 and dim_class[d] == _M and bounds[d] > 1]
        ks = [d for d in range(n_dims) if coef[c, d] > 0 and dim_class[d] == _K and bounds[d] > 1]
        for dm in ms:
            for dk in ks:
                inner = np.ones(n, dtype=np.int64)
                for d in range(n_dims):
                    if dim_class[d] == _K:
                        inner = inner * np.where(pos[:, d] > pos[:, dk], bounds[d], 1)
                best = np.minimum(best, int(coef[c, dm]) * inner)
    return best


def _neighbour_step_one(coef: IntArray, used: BoolArray, dim_class: tuple[int, ...], bounds: list[int],
                        order: list[int]) -> int:
    """Scalar twin of `_neighbour_step_batch`."""
    pos = {d: i for i, d in enumerate(order)}
    step = int(np.iinfo(np.int64).max // 4)
    for c in range(coef.shape[0]):
        if not used[c]:
            continue
        ms = [d for d in range(len(bounds)) if coef[c, d] > 0 and dim_class[d] == _M and bounds[d] > 1]
        ks = [d for d in range(len(bounds)) if coef[c, d] > 0 and dim_class[d] == _K and bounds[d] > 1]
        for dm in ms:
            for dk in ks:
                inner = math.prod(bounds[d] for d in range(len(bounds)) if dim_class[d] == _K and pos[d] > pos[dk])
                step = min(step, int(coef[c, dm]) * inner)
    return step


def _big_tile_one(coef: IntArray, used: BoolArray, dim_class: tuple[int, ...], bounds: list[int],
                  order: list[int], rc: int, cc: int, ur: int, uc: int, d_tot: int, w: float,
                  reads_pass: int) -> int:
    """Scalar twin of the batched rule for a fold tile larger than the window."""
    step = _neighbour_step_one(coef, used, dim_class, bounds, order)
    u_pix = ur if rc == _M else (uc if cc == _M else 1)
    if step * u_pix < w:
        return _reset_loss(d_tot, w, w, reads_pass)
    return reads_pass


def _walked_reads(problem: Problem, layout: SystolicLayout, o: int, rc: IntArray, cc: IntArray, ur: IntArray,
                  uc: IntArray, order: IntArray, walk_reps: IntArray) -> IntArray:
    """(m,) DRAM words of operand ``o`` counted on the demand stream of each row's fold
    shape and array-level ``order`` (m, D), walking at most ``walk_reps`` repetitions
    (`_walk_rows`): one `_window_exact` per distinct shape."""
    key = np.concatenate([np.stack([rc, cc, ur, uc, walk_reps], axis=1), order], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    static = _walk_static(problem, layout, o)
    vals = np.array([_window_exact(problem, layout, o, u[0], u[1], u[2], u[3], u[5:], static, walk_reps=u[4])
                     for u in uniq.tolist()], dtype=np.int64)
    out: IntArray = vals[inv.ravel()]
    return out


def _walk_static(problem: Problem, layout: SystolicLayout, o: int) -> tuple[Any, ...]:
    """The mapping-independent arguments of `window_fetches` for operand ``o`` (hashable):
    projection, used ranks, dim classes, bounds of one repetition, existing ranges."""
    t = layout.tensor[o]
    tensor = problem.tensors[t]
    lo: tuple[int, ...] | None = None
    hi: tuple[int, ...] | None = None
    if tensor.extent is not None:
        lo = tuple(tensor.pad) if tensor.pad is not None else (0,) * len(tensor.extent)
        hi = tuple(a + e for a, e in zip(lo, tensor.extent, strict=True))
    coef = problem.coefficients[t]
    n_ranks = len(tensor.projection)
    dim_class = layout.dim_class
    return (tuple(tuple(int(x) for x in row) for row in coef[:n_ranks]),
            tuple(bool(u) for u in problem.rank_used[t][:n_ranks]), dim_class,
            tuple(1 if c == _B else int(b) for c, b in zip(dim_class, problem.bounds, strict=True)), lo, hi)


def _window_exact(problem: Problem, layout: SystolicLayout, o: int, rc: int, cc: int, ur: int, uc: int,
                  order: list[int], static: tuple[Any, ...] | None = None, *, walk_reps: int = WALK_ALL) -> int:
    """DRAM words of operand ``o`` counted on SCALE-Sim's demand stream through its window
    (`accelmap.costmodels._systolic_window`), times the GEMM's repetitions. ``static``:
    `_walk_static` of the operand, when the caller has it. ``walk_reps`` below `WALK_ALL`:
    at most that many repetitions of the pass over the operand are walked and the rest
    extrapolated (`window_fetches_capped`); negative: counted from a walked sample of
    ``-walk_reps`` entries (`window_fetches_sampled`)."""
    tc = 3 - rc - cc
    mine = {0: (_M, _K), 1: (_N, _K)}[o]
    if rc in mine and cc in mine:
        mode, classes = STATIONARY, (rc, cc)
    elif rc in mine:
        mode, classes = ROWS_TIME, (rc, tc)
    else:
        mode, classes = COLS_TIME, (cc, tc)
    dim_class = layout.dim_class
    # only the order of these dims matters (a dim of bound 1 flattens to nothing), and only
    # each class's own: the stream's tables read the order of each class's dims alone
    # (`_systolic_window._stream_arrays`), so orders that interleave the two classes'
    # dims differently give one stream, walked once (`canonical_order`)
    rel = canonical_order(dim_class, tuple(int(b) for b in problem.bounds), order, classes)
    # The chunk of the class the operand does not index matters only through its fold
    # count: key the walk on the smallest chunk with that count (more cache hits).
    size = layout.class_size
    if mode == ROWS_TIME:
        uc = -(-size[cc] // -(-size[cc] // uc))
    elif mode == COLS_TIME:
        ur = -(-size[rc] // -(-size[rc] // ur))
    if static is None:
        static = _walk_static(problem, layout, o)
    if walk_reps >= WALK_ALL:
        words = window_fetches(*static, rel, classes, mode, rc, cc, ur, uc, int(layout.window_words[o]))
    elif walk_reps < 0:
        words = window_fetches_sampled(*static, rel, classes, mode, rc, cc, ur, uc, int(layout.window_words[o]),
                                       int(-walk_reps))
    else:
        words = window_fetches_capped(*static, rel, classes, mode, rc, cc, ur, uc, int(layout.window_words[o]),
                                      int(walk_reps))
    return words * layout.class_size[3]
