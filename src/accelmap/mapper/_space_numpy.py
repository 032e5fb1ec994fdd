"""The batched numpy operations of a `accelmap.mapper.space.MapSpace`: decode, the legality
check of decoded points, the repair towards legality and the neighbour moves, each over a
whole batch of points at once.

`MapSpace` (`space.py`) says what the space is: its dims, factor tables, loop-order and
keep choices, constraints, encoding and size, and it answers the public calls. How those
calls are computed over a batch lives here and in `_space_kernel.py`: these functions are
the executable reference (engine ``"numpy"``), and the kernels redo each of them row by row
under numba (engine ``"cpu"``), held equal to them bit for bit, random stream included, by
`tests/property/test_space_kernels_equal_numpy.py`. Which rule a function applies is the
one its `MapSpace` method documents.

Every function takes the built space first and reads its tables (the private attributes
`MapSpace` builds: ``_big``/``_flat`` the factor tables, ``_offsets``, ``_index`` the row
index, ``_order_*`` the loop-order tables, ``_keep_*`` the keep bits, ``_row_*`` per-row
figures of the check); none of them changes the space. Random numbers come from the
caller's `numpy.random.Generator`, in the order that the docstrings state (the compiled
twins draw the same numbers in the same order).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, IntArray
from accelmap.mapper._space_tables import lehmer_decode
from accelmap.mapper.check import Reason
from accelmap.mapper.mapping import MappingBatch

__all__ = ["decode", "fast_reasons", "factor_moves", "neighbours", "neighbours_encoded", "push_out"]

#: a built `accelmap.mapper.space.MapSpace` (not imported here: the space imports this module)
Space = Any
#: ``factor_moves(rows, sel, done, rng)``: the factor moves of `moves`, numpy or compiled
FactorMoves = Callable[[IntArray, IntArray, BoolArray, np.random.Generator], None]

_T = 0  # the temporal slot of a level (a level's slots: temporal, spatial X, spatial Y)


def decode(space: Space, x: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray, BoolArray]:
    """In-box encoded points (n, n_params) -> table rows (n, D), temporal (n, L, D), spatial
    (n, L, D, 2), order (n, L, D) and keep (n, L, T) of `MapSpace.decode`."""
    rows, keep = rows_and_keep(space, x)
    temporal, spatial = space._rows_to_factors(rows)
    return rows, temporal, spatial, decode_orders(space, x), keep


def rows_and_keep(space: Space, x: IntArray) -> tuple[IntArray, BoolArray]:
    """Encoded points (n, n_params) -> their factor-table rows (n, D) and keep bits (n, L, T)."""
    n = len(x)
    rows = np.zeros((n, space._D), dtype=np.int64)
    rows[:, space._tile_dims] = x[:, space._tile_cols]
    keep = np.broadcast_to(space._keep_base, (n, space._L, space._T)).copy()
    if len(space._keep_free):
        keep[:, space._keep_free[:, 0], space._keep_free[:, 1]] = x[:, space._keep_cols].astype(bool)
    return rows, keep


def decode_orders(space: Space, x: IntArray) -> IntArray:
    """(n, L, D) loop orders of encoded vectors: every level through the order table at
    once (Lehmer index of each level's digits -> row), digit by digit past the table."""
    n = len(x)
    if len(space._order_tab_cols):
        idx = (x[:, space._order_tab_cols].astype(np.float64) @ space._order_weights).astype(np.int64)
        idx += space._order_off
    else:
        idx = np.broadcast_to(space._order_off, (n, space._L))
    order: IntArray = np.take(space._order_tab, idx, axis=0)
    for lv in space._order_untabled:
        order[:, lv, len(space._order_outer[lv]): len(space._order_outer[lv]) + len(space._order_free[lv])] = \
            free_orders(space, x, lv)
    return order


def free_orders(space: Space, x: IntArray, lv: int) -> IntArray:
    """(n, m) the free dims of level lv in loop order (outermost first) for encoded
    vectors, for a level with more free loops than the order tables hold (smaller
    levels are decoded through the tables)."""
    free = space._order_free[lv]
    m = len(free)
    digits = x[:, space._order_cols[lv]]
    full = np.concatenate([digits, np.zeros((len(x), 1), dtype=np.int64)], axis=1)
    return free[lehmer_decode(full, np.arange(m, dtype=np.int64))]


def fast_reasons(space: Space, rows: IntArray, keep: BoolArray) -> tuple[IntArray, IntArray]:
    """Fanout, capacity and utilization of decoded-to-be points, from table rows and keep
    bits alone (orders never change legality). Same rules and reason order as
    `check_batch` followed by the utilization check of `check`."""
    n = len(rows)
    flat = rows + space._offsets[None, :]
    reason = np.zeros(n, dtype=np.int64)
    level = np.full(n, -1, dtype=np.int64)
    if len(space._fan_cols):
        used = np.multiply.reduce(np.take(space._row_sxy, flat.T, axis=0), axis=0, dtype=np.int64)  # (n, n_fan_cols)
        bad = used > space._fan_limits[None, :]
        anyb = bad.any(axis=1)
        reason[anyb] = int(Reason.FANOUT)
        level[anyb] = space._fan_cols[np.argmax(bad[anyb], axis=1)] // 2
    else:
        anyb = np.zeros(n, dtype=bool)
    caps = space.arch.capacities_words
    cap_levels = space._cap_levels
    live = np.nonzero(~anyb)[0]
    if cap_levels and len(live):
        fl = flat[live]
        m, Lc = len(live), len(cap_levels)
        coef, n_coords = space._span_coef
        # a coordinate sum_d a_d x_d over a tile spans 1 + sum_d a_d (t_d - 1) values
        # (`Problem.footprint`); integers far below 2**53, so the float64 product is exact
        tm1 = np.take(space._row_tiles_m1, fl, axis=0)  # (m, D, Lc)
        span = (np.tensordot(tm1, coef, axes=([1], [0])).astype(np.int64) + 1).reshape(m, Lc, space._T, n_coords)
        fp = span[..., 0].copy()  # (m, Lc, T) footprints: product over the coordinates
        for c in range(1, n_coords):
            fp *= span[..., c]
        need = (fp * keep[live][:, cap_levels, :]).sum(axis=2)
        over = need > caps[cap_levels][None, :]
        anyo = over.any(axis=1)
        idx = live[anyo]
        reason[idx] = int(Reason.CAPACITY)
        level[idx] = np.asarray(cap_levels)[np.argmax(over[anyo], axis=1)]
    if space.min_utilization > 0:
        steps = space._row_tsteps[flat].prod(axis=1)
        util = space.problem.macs / (space.arch.n_macs * steps)
        low = (reason == 0) & (util < space.min_utilization - 1e-12)
        reason[low] = int(Reason.UTILIZATION)
    return reason, level


def move_prime(space: Space, rows: IntArray, d: int, src_slot: IntArray, dst_slot: IntArray,
                prime: IntArray) -> IntArray:
    """Move ``prime`` of dim d from flat slot src to dst in table rows; -1 where illegal."""
    vec = np.take(space._flat, rows + space._offsets[d], axis=0)  # a copy
    i = np.arange(len(rows))
    ok = vec[i, src_slot] % prime == 0
    vec[i, src_slot] = np.where(ok, vec[i, src_slot] // prime, vec[i, src_slot])
    vec[i, dst_slot] = np.where(ok, vec[i, dst_slot] * prime, vec[i, dst_slot])
    g = space._index.lookup(vec, d)
    return np.where(ok & (g >= 0), g - space._offsets[d], -1)


def push_out(space: Space, rows: IntArray, keep: BoolArray, rng: np.random.Generator,
              max_rounds: int = 64) -> IntArray:
    """Repair towards legality: while a row breaks the fanout below level l, move a
    prime factor of one of its spatial factors there to a temporal loop at level <= l;
    while it overflows level l, move a prime factor of a dim that indexes a tensor kept
    at l, from a slot at level >= l to a temporal loop at a level < l. Either move
    shrinks what failed and grows nothing inside it. Rows below the minimum
    utilization get the opposite move (`push_in`). Moves that would leave the dim's
    table (a constraint) are skipped and another is drawn in the next round.

    rows (n, D) table rows, keep (n, L, T); returns the new rows.
    """
    rows = rows.copy()
    L = space._L
    S = L * 3
    slot_lv = np.repeat(np.arange(L), 3)
    slot_k = np.tile(np.arange(3), L)
    rel = space.problem.relevance  # (T, D)
    active = np.arange(len(rows))
    strikes = np.zeros(len(rows), dtype=np.int64)  # rounds in a row without a move
    for _ in range(max_rounds):
        if len(active) == 0:
            break
        before = rows[active].copy()
        reason, level = fast_reasons(space, rows[active], keep[active])
        low = reason == int(Reason.UTILIZATION)
        sel = (reason == int(Reason.FANOUT)) | (reason == int(Reason.CAPACITY))
        if low.any():
            push_in(space, rows, active[low], rng)
        out = active[sel]
        if len(out):
            push_out_round(space, rows, keep, out, level[sel], reason[sel] == int(Reason.CAPACITY), rng,
                                 slot_lv, slot_k, rel, S)
        # rows still failing stay; rows that could not move 3 rounds running leave
        changed = (rows[active] != before).any(axis=1)
        strikes[active] = np.where(changed, 0, strikes[active] + 1)
        failing = low | sel
        active = active[failing & (strikes[active] < 3)]
    return rows


def push_out_round(space: Space, rows: IntArray, keep: BoolArray, active: IntArray, lvl: IntArray, is_cap: BoolArray,
                    rng: np.random.Generator, slot_lv: IntArray, slot_k: IntArray, rel: BoolArray,
                    S: int) -> None:
    """One push-out move for each row of ``active`` (in place); see `push_out`."""
    D = space._D
    m = len(active)
    vec = np.take(space._big, rows[active] + space._offsets[None, :], axis=0).reshape(m, D, S)
    src_ok = np.where(
        is_cap[:, None], slot_lv[None, :] >= lvl[:, None],
        (slot_lv[None, :] == lvl[:, None]) & (slot_k[None, :] > 0),
    )  # (m, S)
    dims_ok = np.ones((m, D), dtype=bool)
    if is_cap.any():
        kept = keep[active, lvl, :]  # (m, T)
        dims_ok = np.where(is_cap[:, None], (kept.astype(np.int64) @ rel.astype(np.int64)) > 0, True)
    movable = (vec > 1) & src_ok[:, None, :] & dims_ok[:, :, None]
    score = np.where(movable, rng.random(movable.shape), -1.0).reshape(m, -1)
    pick = score.argmax(axis=1)
    has = score[np.arange(m), pick] >= 0
    d_sel, s_sel = pick // S, pick % S
    # destination: a temporal loop at a level < l (capacity) or <= l (fanout)
    top = np.where(is_cap, lvl - 1, lvl)
    has &= top >= 0
    dst_lv = (rng.random(m) * (np.maximum(top, 0) + 1)).astype(np.int64)
    dst = dst_lv * 3 + _T
    for d in np.unique(d_sel[has]):
        ii = np.nonzero(has & (d_sel == d))[0]
        f = vec[ii, d, s_sel[ii]]
        prime = space._primes[f, (rng.random(len(ii)) * space._n_primes[f]).astype(np.int64)]
        moved = move_prime(space, rows[active[ii], d], int(d), s_sel[ii], dst[ii], prime)
        ok = moved >= 0
        rows[active[ii[ok]], d] = moved[ok]


def push_in(space: Space, rows: IntArray, idx: IntArray, rng: np.random.Generator) -> None:
    """Raise the utilization of rows ``idx`` (in place): move a prime factor of a
    temporal loop into a spatial slot whose axis has room for it. A source inside the
    slot's level (a deeper temporal loop) shrinks tiles and grows none, so it is
    preferred; otherwise the factor comes from a temporal loop at or above the level
    (tiles grow; a later push-out round may have to undo it)."""
    if len(space._fan_cols) == 0 or len(idx) == 0:
        return
    L, D = space._L, space._D
    S = L * 3
    m = len(idx)
    vec = np.take(space._big, rows[idx] + space._offsets[None, :], axis=0).reshape(m, D, S)
    used = np.take(space._row_sxy, rows[idx] + space._offsets[None, :], axis=0).prod(axis=1, dtype=np.int64)  # (m, n_fan)
    room = space._fan_limits[None, :] // np.maximum(used, 1)  # largest factor that still fits
    # destination: a spatial (level, axis) with room for a factor >= 2, at random
    fan_lv = space._fan_cols // 2
    fan_slot = fan_lv * 3 + 1 + space._fan_cols % 2  # flat slot index of (level, X|Y)
    dscore = np.where(room >= 2, rng.random(room.shape), -1.0)
    dj = dscore.argmax(axis=1)
    has = dscore[np.arange(m), dj] >= 0
    dst = fan_slot[dj]
    dst_lv = fan_lv[dj]
    exists = space._slot_exists.reshape(D, S)  # (D, S)
    slot_lv = np.repeat(np.arange(L), 3)
    is_t = np.tile(np.arange(3), L) == _T
    # source: a temporal loop (> 1) of a dim that may use the destination slot
    src_ok = (vec > 1) & is_t[None, None, :] & exists[None, :, :] & exists[:, dst].T[:, :, None]
    deeper = slot_lv[None, :] > dst_lv[:, None]  # (m, S)
    score = np.where(src_ok, rng.random(src_ok.shape) + 1.0 * deeper[:, None, :], -1.0).reshape(m, -1)
    pick = score.argmax(axis=1)
    has &= score[np.arange(m), pick] >= 0
    d_sel, s_sel = pick // S, pick % S
    for d in np.unique(d_sel[has]):
        ii = np.nonzero(has & (d_sel == d))[0]
        f = vec[ii, d, s_sel[ii]]
        prime = space._primes[f, (rng.random(len(ii)) * space._n_primes[f]).astype(np.int64)]
        fits = prime <= room[ii, dj[ii]]
        moved = move_prime(space, rows[idx[ii], d], int(d), s_sel[ii], dst[ii], prime)
        ok = fits & (moved >= 0)
        rows[idx[ii[ok]], d] = moved[ok]


def neighbours(space: Space, batch: MappingBatch, rows: IntArray, rng: np.random.Generator, flips: bool,
               factor_moves: FactorMoves) -> MappingBatch:
    """`MapSpace.neighbours` of a batch of points of the space whose factor-table rows are
    ``rows`` (n, D): `moves` on the rows, the batch's loop orders and its free keep bits."""
    bits = batch.keep[:, space._keep_free[:, 0], space._keep_free[:, 1]] if len(space._keep_free) else \
        np.zeros((len(batch), 0), dtype=bool)
    order = batch.order.copy()

    def seg_of(ii: IntArray, lv: IntArray) -> IntArray:
        return order[ii[:, None], lv[:, None], space._free_pos[lv]]

    def set_seg(ii: IntArray, lv: IntArray, seg: IntArray) -> None:
        rr, cc = np.nonzero(space._free_valid[lv])
        order[ii[rr], lv[rr], space._free_pos[lv[rr], cc]] = seg[rr, cc]

    bits = bits.copy()
    rows = moves(space, rows, seg_of, set_seg, bits, rng, flips, factor_moves)
    temporal, spatial = space._rows_to_factors(rows)
    keep = batch.keep.copy()
    if len(space._keep_free):
        keep[:, space._keep_free[:, 0], space._keep_free[:, 1]] = bits
    return MappingBatch._trusted(temporal=temporal, spatial=spatial, order=order, keep=keep)


def neighbours_encoded(space: Space, x: IntArray, rng: np.random.Generator, flips: bool) -> IntArray:
    """`MapSpace.neighbours_encoded` of in-box points ``x`` (n, n_params): `moves` without
    building mappings; only the swapped levels of the swapped rows are decoded and
    re-encoded."""
    rows = np.zeros((len(x), space._D), dtype=np.int64)
    rows[:, space._tile_dims] = x[:, space._tile_cols]
    bits = x[:, space._keep_cols].astype(bool)
    out = x.copy()

    def seg_of(ii: IntArray, lv: IntArray) -> IntArray:
        xs = x[ii]
        idx = (xs[:, space._order_tab_cols].astype(np.float64) @ space._order_weights)[np.arange(len(ii)), lv]
        full = np.take(space._order_tab, idx.astype(np.int64) + space._order_off[lv], axis=0)  # (k, D) orders of the levels lv
        for ul in space._order_untabled:
            r = np.flatnonzero(lv == ul)
            if len(r):
                o = len(space._order_outer[ul])
                full[r, o: o + len(space._order_free[ul])] = free_orders(space, xs[r], ul)
        return np.take_along_axis(full, space._free_pos[lv], axis=1)

    def set_seg(ii: IntArray, lv: IntArray, seg: IntArray) -> None:
        local = space._order_lut_all[lv[:, None], seg]  # positions among the free dims
        if space._swap_m:  # every level with swaps has this many free loops
            out[ii[:, None], space._order_cols_pad[lv]] = space._lehmer_of(local)
            return
        m_row = space._n_free[lv]
        for m in np.flatnonzero(np.bincount(m_row)):
            r = np.flatnonzero(m_row == m)
            out[ii[r, None], space._order_cols_pad[lv[r], : m - 1]] = space._lehmer_of(local[r, :m])

    rows = moves(space, rows, seg_of, set_seg, bits, rng, flips, functools.partial(factor_moves, space))
    out[:, space._tile_cols] = rows[:, space._tile_dims]
    out[:, space._keep_cols] = bits
    return out


def moves(space: Space, rows: IntArray, seg_of: Callable[[IntArray, IntArray], IntArray],
           set_seg: Callable[[IntArray, IntArray, IntArray], None], bits: BoolArray,
           rng: np.random.Generator, flips: bool, factor_moves: FactorMoves) -> IntArray:
    """The moves of `MapSpace.neighbours` on table rows (n, D) and free keep bits (n, n_keep_free,
    modified in place); returns the new rows. Loop orders are seen through ``seg_of(ii,
    lv)``: for rows ii (k,) and one level each lv (k,), that level's free dims outermost
    first, padded to the largest free count M ((k, M); see ``_free_pos``), and written
    through ``set_seg(ii, lv, seg)`` (the unpadded part); each row is written at most once.
    The factor moves are ``factor_moves(rows, sel, done, rng)``: `factor_moves` of this
    module, or its compiled twin (`accelmap.mapper._space_kernel.factor_moves`, whose
    `moves_encoded` also has the whole of this function for encoded points)."""
    n = len(rows)
    rows = rows.copy()
    kinds = rng.integers(0, 3, size=n)  # 0 factor, 1 swap, 2 flip
    done = np.zeros(n, dtype=bool)
    levels_ok = space._levels_ok
    for attempt in range(6):
        if done.all():
            break
        # two tries of the drawn kind, then the others; a move of one kind never marks
        # rows of another kind done, so the three selections can be made up front
        kind_now = np.where(done, 3, (kinds + attempt // 2) % 3)
        # --- factor moves
        sel = np.flatnonzero(kind_now == 0)
        if len(sel) and len(space._tile_dims):
            factor_moves(rows, sel, done, rng)
        # --- swaps of two free loops in one level
        sel = np.flatnonzero(kind_now == 1)
        if len(sel) and levels_ok.any():
            swap_moves(space, rows, sel, seg_of, set_seg, rng)
            done[sel] = True
        # --- bypass flips
        sel = np.flatnonzero(kind_now == 2)
        if len(sel) and bits.shape[1] and flips:
            k = rng.integers(0, bits.shape[1], size=len(sel))
            bits[sel, k] = ~bits[sel, k]
            done[sel] = True
    return rows


def factor_moves(space: Space, rows: IntArray, sel: IntArray, done: BoolArray, rng: np.random.Generator) -> None:
    """Move a prime factor of one random dim between two of its slots, for rows ``sel``
    (in place; rows that moved are marked in ``done``).

    The random stream is the one of a loop over the picked dims in increasing order
    drawing, per dim with k rows, source scores (k, S), destination scores (k, S) and
    prime picks (k,): all are drawn at once and each row takes its slice."""
    S = space._L * 3
    k = len(sel)
    d_pick = space._tile_dims[rng.integers(0, len(space._tile_dims), size=k)]
    perm = np.argsort(d_pick, kind="stable")
    d = d_pick[perm]
    r_ = sel[perm]
    cnt = np.bincount(d, minlength=space._D)
    gs = (np.cumsum(cnt) - cnt)[d]  # where each row's dim group starts
    kd = cnt[d]
    j = np.arange(k) - gs  # row within its group
    # row j of a group of kd rows that starts at gs reads its source scores at
    # gs (2S+1) + j S + c, its destination scores kd S further on and its prime pick
    # at gs (2S+1) + 2 kd S + j (c < S): one (k, 2S+1) gather, see the space's `_draw_*`
    at = (gs * (2 * S + 1))[:, None] + j[:, None] * space._draw_j + kd[:, None] * space._draw_kd + space._draw_c
    u = rng.random(k * (2 * S + 1))[at]
    src_u, dst_u, pick_u = u[:, :S], u[:, S: 2 * S], u[:, 2 * S]
    g = rows[r_, d] + space._offsets[d]
    vec = np.take(space._flat, g, axis=0)  # (k, S)
    exists = np.take(space._slot_exists_flat, d, axis=0)  # (k, S), a copy
    src_ok = (vec > 1) & exists
    src = np.where(src_ok, src_u, -1.0).argmax(axis=1)
    ar = np.arange(k)
    has = src_ok[ar, src]
    exists[ar, src] = False
    dst = np.where(exists, dst_u, -1.0).argmax(axis=1)
    has &= exists[ar, dst]
    f = vec[ar, src]
    pick = (pick_u * np.maximum(space._n_primes[f], 1)).astype(np.int64)
    prime = space._primes[f, pick]
    # prime divides f (it is one of f's primes, or 1 where f == 1): move it in every
    # row, and keep the moves of rows that have one, of a prime > 1, into the table
    vec[ar, src] = f // prime
    vec[ar, dst] *= prime
    moved = space._index.lookup(vec, d)
    ok = np.flatnonzero(has & (prime > 1) & (moved >= 0))
    rr, dd = r_[ok], d[ok]
    rows[rr, dd] = moved[ok] - space._offsets[dd]
    done[rr] = True


def swap_moves(space: Space, rows: IntArray, sel: IntArray, seg_of: Callable[[IntArray, IntArray], IntArray],
                set_seg: Callable[[IntArray, IntArray, IntArray], None], rng: np.random.Generator) -> None:
    """Swap two free loops of one level in each row of ``sel`` (see `moves`).

    The random stream is the one of a loop over the picked levels in increasing order
    drawing, per level with k rows and m free loops, scores (k, m): drawn at once, and
    each row scores its free loops (padded to the largest m, padding never picked)."""
    k = len(sel)
    # prefer a level with two running (bound > 1) free loops: swapping unit loops
    # changes no cost
    idx = (rows[sel] + space._offsets)[:, None, :] + space._lvl_off[:, None]  # (k, L, D)
    nonunit_all = np.take(space._lvl_t, idx) > 1
    running = (nonunit_all & space._free_mask_ld).sum(axis=2)  # (k, L)
    score = rng.random((k, space._L)) + 1.0 * (running >= 2)
    score[:, ~space._levels_ok] = -1.0
    lv = score.argmax(axis=1)
    perm = np.argsort(lv, kind="stable")  # the rows level by level, in order within a level
    seg = seg_of(sel, lv)  # (k, M) free dims in their current positions
    nonunit = np.take_along_axis(nonunit_all[np.arange(k), lv], seg, axis=1)
    if space._swap_m:  # every swappable level has M free loops: the draws are (k, M) rows
        u = np.empty((k, space._swap_m))
        u[perm] = rng.random((k, space._swap_m))
        score2 = u + nonunit * 1.0
    else:
        m = space._n_free[lv]
        cnt = np.bincount(lv, minlength=space._L)
        w = np.empty(k, dtype=np.int64)  # row within its level's group
        w[perm] = np.arange(k) - (np.cumsum(cnt) - cnt)[lv[perm]]
        size = cnt * space._n_free
        u = rng.random(int(size.sum()))
        valid = space._free_valid[lv]  # (k, M)
        uidx = np.where(valid, ((np.cumsum(size) - size)[lv] + w * m)[:, None] + np.arange(valid.shape[1]), 0)
        score2 = np.where(valid, u[uidx] + nonunit * 1.0, -np.inf)
    two = np.argsort(-score2, axis=1)[:, :2]
    a, b = two[:, 0], two[:, 1]
    r = np.arange(k)
    va, vb = seg[r, a].copy(), seg[r, b].copy()
    seg[r, a], seg[r, b] = vb, va
    set_seg(sel, lv, seg)
