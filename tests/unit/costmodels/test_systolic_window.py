"""The demand-stream walk of SCALE-Sim's prefetch window (`_systolic_window`): counted from
reset to reset (`_jump`, `_reset_offsets`) it equals the walk entry by entry and a plain
replay of the same stream, on random layers (strided, sliding-window, 1x1, zero-padded,
GEMMs), every stream mode, chunk sizes, flattening orders and windows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from accelmap.arch.presets import systolic_array
from accelmap.costmodels import _systolic_window as sw
from accelmap.costmodels import systolic as sy
from accelmap.mapper.mapping import MappingBatch
from accelmap.workloads.builders import conv2d, conv2d_from_input, matmul

ARCH = systolic_array(16, 16, 1, 1, 1, dram_bandwidth_words_per_cycle=None)


def _replay(a_off: np.ndarray, b_off: np.ndarray, stamp: np.ndarray, mode: int, size: list[int], rc: int,
            cc: int, ur: int, uc: int, window: int) -> int:
    """The stream written out entry by entry (column folds outer, row folds inner; skewed
    folds along anti-diagonals, ``c`` ascending; stationary folds bottom row first) and
    replayed through a set that is dropped when it holds ``window`` words."""
    tc = 3 - rc - cc
    s_r, s_c, t_len = size[rc], size[cc], size[tc]
    stream: list[int] = []
    for y0 in range(0, s_c, uc):
        for x0 in range(0, s_r, ur):
            nx, ny = min(ur, s_r - x0), min(uc, s_c - y0)
            if mode == sw.STATIONARY:
                stream += [a_off[a] + b_off[b] for a in range(x0 + nx - 1, x0 - 1, -1) for b in range(y0, y0 + ny)]
                continue
            base, n = (x0, nx) if mode == sw.ROWS_TIME else (y0, ny)
            stream += [a_off[base + c] + b_off[d - c] for d in range(t_len + n - 1)
                       for c in range(max(0, d - t_len + 1), min(d, n - 1) + 1)]
    seen: set[int] = set()
    fetched = 0
    for a in stream:
        if stamp[a] < 0 or a in seen:
            continue
        seen.add(a)
        fetched += 1
        if len(seen) == window:
            seen = set()
    return fetched


@st.composite
def streams(draw):
    """One operand's demand stream: a random layer (the ifmap of a convolution, strided,
    zero-padded or with SCALE-Sim's rounded-up ofmap, or a GEMM's), a random pair of array
    classes, chunk sizes, flattening order and window."""
    kind = draw(st.sampled_from(["conv", "conv", "padded", "gemm"]))
    if kind == "gemm":
        prob = matmul("g", m=draw(st.integers(1, 60)), n=draw(st.integers(1, 30)), k=draw(st.integers(1, 60)),
                      word_bits=8)
    else:
        h = draw(st.integers(4, 20))
        f = min(draw(st.sampled_from([1, 2, 3, 5])), h)
        stride = draw(st.sampled_from([1, 1, 2, 3]))
        c, k = draw(st.sampled_from([1, 2, 3, 8])), draw(st.sampled_from([2, 4, 12]))
        if kind == "padded":
            prob = conv2d_from_input("c", c=c, k=k, h=h, w=h, r=f, s=f, stride=stride, padding=1, word_bits=8)
        else:
            e = -(-(h - f) // stride) + 1
            prob = conv2d("c", c=c, k=k, p=e, q=e, r=f, s=f, stride=stride, input_hw=(h, h), word_bits=8)
    lay = sy.systolic_layout(prob, ARCH)[0]
    rc, cc = draw(st.sampled_from([(0, 1), (1, 0), (2, 1), (1, 2), (2, 0), (0, 2)]))
    size = lay.class_size
    # small chunks often: many folds, so many repetitions of a unit
    ur = draw(st.integers(1, min(size[rc], draw(st.sampled_from([2, 3, 9])))))
    uc = draw(st.integers(1, min(size[cc], draw(st.sampled_from([2, 3, 9])))))
    order = draw(st.permutations(range(prob.n_dims)))
    window = draw(st.sampled_from([1, 2, 7, 50, 120, 500]))
    return prob, lay, rc, cc, ur, uc, order, window


def _arrays(prob, lay, rc, cc, order):  # noqa: ANN001, ANN202
    tc = 3 - rc - cc
    mine = (0, 2)  # the ifmap's classes (m, k)
    if rc in mine and cc in mine:
        mode, classes = sw.STATIONARY, (rc, cc)
    elif rc in mine:
        mode, classes = sw.ROWS_TIME, (rc, tc)
    else:
        mode, classes = sw.COLS_TIME, (cc, tc)
    rel = tuple(d for d in order if lay.dim_class[d] in classes and int(prob.bounds[d]) > 1)
    return mode, (*sy._walk_static(prob, lay, 0), rel, classes)


def _count(args: tuple, mode: int, rc: int, cc: int, ur: int, uc: int, window: int, *, jump: bool,
           max_reps: int | None = None) -> int:
    a_off, b_off, stamp, size = sw._stream_arrays(*args)
    old = sw.JUMP_MIN_REPS
    sw.JUMP_MIN_REPS = old if jump else 1 << 62  # (read when the walk's scratch is sized)
    try:
        return sw._run_walk(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window, max_reps)
    finally:
        sw.JUMP_MIN_REPS = old


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_jump_equals_the_entry_walk_and_the_replay(case):
    """Counting the repetitions of a unit from reset to reset gives the entry walk's count
    (the walk with the jump off: period skips, the ``W - 1`` gap check and all) and the
    replay's, on every stream mode."""
    prob, lay, rc, cc, ur, uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    size = lay.class_size
    reps = -(-size[cc] // uc) if mode == sw.ROWS_TIME else -(-size[rc] // ur)
    event("jumps" if mode != sw.STATIONARY and reps >= sw.JUMP_MIN_REPS else "walks")
    got = _count(args, mode, rc, cc, ur, uc, window, jump=True)
    assert got == _count(args, mode, rc, cc, ur, uc, window, jump=False)
    a_off, b_off, stamp, sizes = sw._stream_arrays(*args)
    assert got == _replay(a_off, b_off, stamp, mode, sizes, rc, cc, ur, uc, window)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_capped_walk_is_exact_where_it_jumps(case):
    """`window_fetches_capped` walks at most a few passes; where a unit's repetitions are
    counted by `_jump` (more than ``JUMP_MIN_REPS`` of them: a unit that starts with words
    in the window walks one repetition first), its count is the whole walk's."""
    prob, lay, rc, cc, ur, uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    want = _count(args, mode, rc, cc, ur, uc, window, jump=False)
    got = _count(args, mode, rc, cc, ur, uc, window, jump=True, max_reps=2)
    size = lay.class_size
    reps = -(-size[cc] // uc) if mode == sw.ROWS_TIME else -(-size[rc] // ur)
    if mode != sw.STATIONARY and reps > sw.JUMP_MIN_REPS:
        event("jumps")
        assert got == want


@pytest.mark.parametrize("seed", range(4))
def test_reset_offsets_by_brute_force(seed):
    """`_reset_offsets`: from every start of a unit repeated without end, the entries to the
    ``window``-th distinct word (or -1 when the unit has fewer words), as a scan from each
    start finds them; non-words (-1) count as entries, never as words."""
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n = int(rng.integers(1, 40))
        unit = rng.integers(-1, int(rng.integers(1, 30)), size=n).astype(np.int32)
        window = int(rng.integers(1, 12))
        fwd = np.empty(n, dtype=np.int32)
        cnt = np.zeros(32, dtype=np.int32)
        sw._reset_offsets(unit, n, window, cnt, fwd)
        assert not cnt.any()
        words = len(set(unit[unit >= 0].tolist()))
        for p in range(n):
            want = -1
            if words >= window:
                seen: set[int] = set()
                j = 0
                while True:
                    a = int(unit[(p + j) % n])
                    if a >= 0:
                        seen.add(a)
                        if len(seen) == window:
                            want = j
                            break
                    j += 1
            assert int(fwd[p]) == want, (unit.tolist(), window, p)


def test_capped_rows_of_auto_jump():
    """Every row ``"auto"`` walks with capped passes has more passes than the cap
    (`systolic._walk_rows`), hence, with the cap at least `JUMP_MIN_REPS`, more
    repetitions than the jump needs after one walked repetition: its count is exact."""
    from accelmap.costmodels.systolic import SystolicModel

    assert SystolicModel.CAPPED_WALK_REPS >= sw.JUMP_MIN_REPS


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.lists(st.integers(1, 9), min_size=1, max_size=4), st.sampled_from([None, 0, 2]))
def test_shapes_sharing_a_unit_equal_the_walk(case, chunks, rows):
    """Fold shapes that differ only in the column chunk share a ``ROWS_TIME`` unit's table
    (`_UnitTables`): counted through `window_fetches` and `window_fetches_capped` one after
    another (the first builds the table, the rest reuse it), each equals the entry walk and
    the replay of its own stream; every stream mode (only ``ROWS_TIME`` shares tables)."""
    prob, lay, rc, cc, ur, _uc, order, window = case
    size = lay.class_size
    if rows is not None:  # the ifmap streamed by rows (the filters on the columns): units shared
        rc, cc, ur = rows, 1, min(ur, size[rows])
        chunks = [1] + [1 + c % 3 for c in chunks]  # (small column chunks: enough repetitions to jump)
    mode, args = _arrays(prob, lay, rc, cc, order)
    sw.window_fetches.cache_clear()  # (drops the unit tables too)
    hits0 = sw._UNITS.hits
    for i, uc in enumerate(sorted({min(c, size[cc]) for c in chunks})):
        # (the capped walk with a cap above every repetition count: the whole walk, exact)
        fetch = sw.window_fetches if i % 2 == 0 else (lambda *a: sw.window_fetches_capped(*a, 1 << 20))
        got = fetch(*args, mode, rc, cc, ur, uc, window)
        assert got == _count(args, mode, rc, cc, ur, uc, window, jump=False)
        a_off, b_off, stamp, sizes = sw._stream_arrays(*args)
        assert got == _replay(a_off, b_off, stamp, mode, sizes, rc, cc, ur, uc, window)
    if sw._UNITS.hits > hits0:
        event("unit table reused")


def test_unit_tables_are_reused_and_cleared():
    """Two column chunks with enough repetitions each build one table between them, which
    two chunks of fewer repetitions then use too; clearing the walk cache drops it (a cold
    start walks again)."""
    prob = conv2d("c", c=3, k=12, p=8, q=8, r=3, s=3, word_bits=8)
    lay = sy.systolic_layout(prob, ARCH)[0]
    mode, args = _arrays(prob, lay, 0, 1, tuple(range(prob.n_dims)))
    assert mode == sw.ROWS_TIME
    sw.window_fetches.cache_clear()
    a = sw.window_fetches(*args, mode, 0, 1, 5, 1, 40)  # 12 repetitions
    b = sw.window_fetches(*args, mode, 0, 1, 5, 3, 40)  # 4
    c = sw.window_fetches(*args, mode, 0, 1, 5, 6, 40)  # 2: too few to build a table, not to use one
    d = sw.window_fetches(*args, mode, 0, 1, 5, 12, 40)  # 1
    assert (sw._UNITS.misses, sw._UNITS.hits) == (1, 3)
    assert a == _count(args, mode, 0, 1, 5, 1, 40, jump=False)
    assert b == _count(args, mode, 0, 1, 5, 3, 40, jump=False)
    assert c == _count(args, mode, 0, 1, 5, 6, 40, jump=False)
    assert d == _count(args, mode, 0, 1, 5, 12, 40, jump=False)
    sw.window_fetches_capped.cache_clear()
    assert (sw._UNITS.misses, sw._UNITS.hits, sw.window_fetches.cache_info().currsize) == (0, 0, 0)
    assert sw.window_fetches(*args, mode, 0, 1, 5, 3, 40) == b
    assert sw._UNITS.misses == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=2, max_size=4))
def test_stream_tables_are_kept_and_walked_on_a_copy(case, chunks):
    """The address tables of a stream (`_stream_base`) are computed once per operand, the
    order of each class's dims and the classes, whatever the other dims' order, and kept:
    the walk of one fold shape stamps a copy, so the next shape starts from a fresh stamp
    (0 where a word exists, -1 elsewhere), and each count equals the replay of its stream
    and the count with the kept tables dropped before it."""
    prob, lay, rc, cc, _ur, _uc, order, window = case
    size = lay.class_size
    mode, args = _arrays(prob, lay, rc, cc, order)
    sw.window_fetches.cache_clear()  # (drops the kept tables too)
    assert sw._stream_base.cache_info().currsize == 0
    first = sw._stream_arrays(*args)
    fresh = first[2].copy()
    # the two classes' dims interleaved otherwise (each class's own order kept): the same tables
    rel, classes = args[-2], args[-1]
    by_class = [tuple(d for d in rel if lay.dim_class[d] == c) for c in classes]
    again = sw._stream_arrays(*args[:-2], by_class[1] + by_class[0], classes)
    assert again[0] is first[0] and again[1] is first[1] and again[2] is not first[2]
    assert np.array_equal(again[2], fresh)
    for ur, uc in chunks:
        ur, uc = min(ur, size[rc]), min(uc, size[cc])
        got = sw.window_fetches(*args, mode, rc, cc, ur, uc, window)
        a_off, b_off, stamp, sizes = sw._stream_arrays(*args)
        assert np.array_equal(stamp, fresh)  # (the kept stamp untouched by the walks)
        assert got == _replay(a_off, b_off, stamp, mode, sizes, rc, cc, ur, uc, window)
        sw._stream_base.cache_clear()
        assert got == _count(args, mode, rc, cc, ur, uc, window, jump=True)
    assert sw._stream_base.cache_info().currsize == 1


@pytest.mark.parametrize("seed", range(3))
def test_closed_form_without_duplicates_equals_the_walk(seed):
    """Operands without im2col duplicates (1x1 convolutions, strided or not, and GEMMs) keep
    the closed form in every mode; on the seeds of every systolic sub-space (column chunks
    that do not line up with the pixel rows or the window dims flattened in them: a tile is
    the chunk's indices times the time class's, not the box of its extents) both operands'
    DRAM reads equal the walk of their stream on the numpy and compiled engines and the
    scalar path (the walk equals the replay above)."""
    from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds

    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(6):
        if rng.random() < 0.25:
            prob = matmul("g", m=int(rng.integers(20, 200)), n=int(rng.integers(8, 64)), k=int(rng.integers(8, 64)),
                          word_bits=8)
        else:
            st_ = int(rng.choice([1, 2]))
            p = int(rng.integers(5, 20))
            prob = conv2d("c", c=int(rng.choice([3, 16, 32])), k=int(rng.choice([8, 64])), p=p, q=p, r=1, s=1,
                          stride=st_, input_hw=((p - 1) * st_ + 1, (p - 1) * st_ + 1), word_bits=8)
        arch = systolic_array(int(rng.choice([8, 16, 32])), int(rng.choice([8, 16, 32])), 1, 1, 1,
                              dram_bandwidth_words_per_cycle=None)
        lay = sy.systolic_layout(prob, arch)[0]
        for v in systolic_variants(prob, arch):
            seeds = variant_seeds(prob, arch, v)
            got = {e: sy.SystolicModel(engine=e, dram_window="estimate").stats(prob, arch, seeds).dram_reads
                   for e in ("numpy", "cpu")}
            s = sy.SystolicModel(engine="numpy", dram_window="exact").stats(prob, arch, seeds)
            for i in np.flatnonzero(s.valid).tolist():
                one = sy.SystolicModel(dram_window="estimate").stats_one(prob, arch, seeds[i]).dram_reads[0]
                for o in (0, 1):
                    want = sy._walked_reads(prob, lay, o, s.row_class[i:i + 1], s.col_class[i:i + 1],
                                            s.rows_used[i:i + 1], s.cols_used[i:i + 1],
                                            seeds.order[i:i + 1, lay.array_level], np.array([sy.WALK_ALL]))[0]
                    assert got["numpy"][i, o] == got["cpu"][i, o] == one[o] == s.dram_reads[i, o] == want, (
                        v.label, i, o, got["numpy"][i, o], got["cpu"][i, o], one[o], want)
                    checked += 1
    assert checked > 100


@pytest.mark.parametrize("seed", range(3))
def test_closed_form_with_missing_words_equals_the_walk(seed):
    """Operands without duplicates whose padded tensor has missing words: strided 1x1 and
    patch convolutions (windows no larger than the stride: a coordinate of both classes,
    `systolic_dram._tile_prefix`'s other two counts) whose rounded-up ofmap (SCALE-Sim's)
    starts windows past the ifmap edge, and GEMMs whose operand is padded, so that the column chunks' tiles differ in size
    (`systolic_dram._varied_tiles_one`). On the seeds of every systolic sub-space and on
    random array-level orders both operands' DRAM reads equal the walk of their stream on the
    numpy and compiled engines and the scalar path (tiles all taken at a full chunk's size
    were up to 13 times the walk's count here: docs/validation.md, SCALE-Sim)."""
    import dataclasses

    from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds

    rng = np.random.default_rng(100 + seed)
    checked = varied = 0
    for _ in range(5):
        if rng.random() < 0.3:
            m, k = int(rng.integers(20, 200)), int(rng.integers(8, 64))
            prob = matmul("g", m=m, n=int(rng.integers(8, 64)), k=k, word_bits=8)
            # a padded input: the last rows and columns of the M x K operand are not words
            inp = prob.tensors[0]
            ext = (m - int(rng.integers(1, 8)), k - int(rng.integers(0, 4)))
            prob = dataclasses.replace(prob, tensors=(dataclasses.replace(inp, pad=(0, 0), extent=ext),
                                                      *prob.tensors[1:]))
        else:
            # windows no larger than the stride (1x1, or patches: a coordinate of pixels and window
            # dims without duplicates), the last row and column of windows past the edge
            st_ = int(rng.choice([2, 3]))
            p = int(rng.integers(5, 20))
            r = int(rng.integers(1, st_ + 1))
            s_ = int(rng.choice([1, r]))
            h, w = (p - 1) * st_ + r - int(rng.integers(1, st_ + 1)), (p - 1) * st_ + s_ - int(rng.integers(0, st_ + 1))
            prob = conv2d("c", c=int(rng.choice([3, 16, 32])), k=int(rng.choice([8, 64])), p=p, q=p, r=r, s=s_,
                          n=int(rng.choice([1, 2])), stride=st_, input_hw=(h, w), word_bits=8)
        arch = systolic_array(int(rng.choice([8, 16, 32])), int(rng.choice([8, 16, 32])), 1, 1, 1,
                              dram_bandwidth_words_per_cycle=None)
        lay = sy.systolic_layout(prob, arch)[0]
        for v in systolic_variants(prob, arch):
            seeds = variant_seeds(prob, arch, v)
            # the same mappings with the array level's order shuffled (the chunks' flattening)
            order = seeds.order.copy()
            for i in range(len(seeds)):
                order[i, lay.array_level] = rng.permutation(order[i, lay.array_level])
            batch = MappingBatch.concat([seeds, dataclasses.replace(seeds, order=order)])
            got = {e: sy.SystolicModel(engine=e, dram_window="estimate").stats(prob, arch, batch).dram_reads
                   for e in ("numpy", "cpu")}
            s = sy.SystolicModel(engine="numpy", dram_window="exact").stats(prob, arch, batch)
            for i in np.flatnonzero(s.valid).tolist():
                one = sy.SystolicModel(dram_window="estimate").stats_one(prob, arch, batch[i]).dram_reads[0]
                for o in (0, 1):
                    want = sy._walked_reads(prob, lay, o, s.row_class[i:i + 1], s.col_class[i:i + 1],
                                            s.rows_used[i:i + 1], s.cols_used[i:i + 1],
                                            batch.order[i:i + 1, lay.array_level], np.array([sy.WALK_ALL]))[0]
                    assert got["numpy"][i, o] == got["cpu"][i, o] == one[o] == s.dram_reads[i, o] == want, (
                        v.label, i, o, got["numpy"][i, o], got["cpu"][i, o], one[o], want)
                    checked += 1
                    varied += int(prob.tensors[lay.tensor[o]].padded)
    assert checked > 100 and varied > 50


def _sampled_rule(a_off: np.ndarray, b_off: np.ndarray, stamp: np.ndarray, mode: int, size: list[int], rc: int,
                  cc: int, ur: int, uc: int, window: int, budget: int) -> tuple[int, int]:
    """`window_fetches_sampled` as its docstring states it, on the stream written out fold by
    fold and replayed through a set (`_replay`'s): walk to the end of the first column fold
    at or past ``budget`` entries (within the first column fold, of a row fold; for
    ``COLS_TIME``, entries of each column fold's first ``min(row folds, JUMP_MIN_REPS)`` row
    folds, whole column folds only), then count the rest at the rate of the second half of
    what was walked; returns the count and the words fetched on the stretch the rate is
    measured on (``inf`` where the sample covers the stream)."""
    tc = 3 - rc - cc
    s_r, s_c, t_len = size[rc], size[cc], size[tc]
    f_r = -(-s_r // ur)
    seen: set[int] = set()
    fetched = walked = cost = 0
    col_marks = [(0, 0)]
    half = None
    total = (-(-s_c // uc) * s_r * t_len if mode == sw.ROWS_TIME else
             f_r * s_c * t_len if mode == sw.COLS_TIME else s_r * s_c)
    for fc, y0 in enumerate(range(0, s_c, uc)):
        for fr, x0 in enumerate(range(0, s_r, ur)):
            nx, ny = min(ur, s_r - x0), min(uc, s_c - y0)
            if mode == sw.STATIONARY:
                fold = [a_off[a] + b_off[b] for a in range(x0 + nx - 1, x0 - 1, -1) for b in range(y0, y0 + ny)]
            else:
                base, n = (x0, nx) if mode == sw.ROWS_TIME else (y0, ny)
                fold = [a_off[base + c] + b_off[d - c] for d in range(t_len + n - 1)
                        for c in range(max(0, d - t_len + 1), min(d, n - 1) + 1)]
            for a in fold:
                walked += 1
                if stamp[a] < 0 or a in seen:
                    continue
                seen.add(a)
                fetched += 1
                if len(seen) == window:
                    seen = set()
            if fc == 0 and fr < f_r - 1 and mode != sw.COLS_TIME:
                if half is None and 2 * walked >= budget:
                    half = (walked, fetched)
                if walked >= budget:
                    h = half if half[0] < walked else (0, 0)
                    return fetched + round((fetched - h[1]) / (walked - h[0]) * (total - walked)), fetched - h[1]
        col_marks.append((walked, fetched))
        cost += min(f_r, sw.JUMP_MIN_REPS) * min(uc, s_c - y0) * t_len if mode == sw.COLS_TIME else 0
        if (cost if mode == sw.COLS_TIME else walked) >= budget and walked < total:
            u = len(col_marks) - 1
            h = col_marks[u // 2] if u >= 2 else (half if half is not None and half[0] < walked else (0, 0))
            return fetched + round((fetched - h[1]) / (walked - h[0]) * (total - walked)), fetched - h[1]
    assert walked == total
    return fetched, 1 << 62


def _sampled_reference(a_off: np.ndarray, b_off: np.ndarray, stamp: np.ndarray, mode: int, size: list[int], rc: int,
                       cc: int, ur: int, uc: int, window: int, budget: int, min_windows: int, walked: int) -> int:
    """`window_fetches_sampled` with its guard: the walk's count (``walked``) where the walk
    costs at most `SAMPLE_MAX_WALK_FACTOR` times ``budget`` (the operand's entries, a
    ``ROWS_TIME`` pass per column fold up to four, a ``COLS_TIME`` chunk on up to four row
    folds per column fold) and either the sample cannot hold ``min_windows`` windows
    (``ROWS_TIME`` and ``STATIONARY``, ``budget < 2 min_windows window``) or its rate's
    stretch fetched fewer than ``min_windows * window`` words; else `_sampled_rule`'s count."""
    tc = 3 - rc - cc
    s_r, s_c, t_len = size[rc], size[cc], size[tc]
    f_r, f_c = -(-s_r // ur), -(-s_c // uc)
    cost = (s_r * t_len * min(f_c, 4) if mode == sw.ROWS_TIME else s_c * t_len * min(f_r, 4)
            if mode == sw.COLS_TIME else s_r * s_c)
    ok = cost <= sw.SAMPLE_MAX_WALK_FACTOR * budget
    if ok and mode != sw.COLS_TIME and budget < 2 * min_windows * window:
        return walked
    got, words = _sampled_rule(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window, budget)
    return walked if ok and words < min_windows * window else got


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.floats(0.0, 1.2), st.sampled_from([0, 1, 3, None]))
def test_sampled_count_follows_its_rule_and_is_exact_over_the_whole_stream(case, q, min_windows):
    """`window_fetches_sampled` (a walked sample, the rest at its second half's rate, unless
    the rate's stretch holds too few windows' worth of words: then the walk) equals its rule
    replayed in Python (`_sampled_reference`) on every stream mode, padded and strided
    layers, samples of a fraction ``q`` of the stream and guards of 0 (none), 1, 3 and
    `SAMPLE_MIN_WINDOWS` (None) windows; a sample that covers the stream gives the walk's
    count, exactly."""
    prob, lay, rc, cc, ur, uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    a_off, b_off, stamp, size = sw._stream_arrays(*args)
    tc = 3 - rc - cc
    total = (-(-size[cc] // uc) * size[rc] * size[tc] if mode == sw.ROWS_TIME else
             -(-size[rc] // ur) * size[cc] * size[tc] if mode == sw.COLS_TIME else size[rc] * size[cc])
    budget = max(1, int(q * total))
    walked = _count(args, mode, rc, cc, ur, uc, window, jump=True)
    old = sw.SAMPLE_MIN_WINDOWS
    sw.SAMPLE_MIN_WINDOWS = old if min_windows is None else min_windows
    sw.window_fetches_sampled.cache_clear()
    try:
        got = sw.window_fetches_sampled(*args, mode, rc, cc, ur, uc, window, budget)
        want = _sampled_reference(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window, budget,
                                  sw.SAMPLE_MIN_WINDOWS, walked)
    finally:
        sw.SAMPLE_MIN_WINDOWS = old
        sw.window_fetches_sampled.cache_clear()
    assert got == want
    event("walked" if got == walked else "sampled")
    if budget >= total:
        event("whole stream")
        assert got == walked


def _stream(a_off: np.ndarray, b_off: np.ndarray, stamp: np.ndarray, mode: int, size: list[int], rc: int, cc: int,
            ur: int, uc: int) -> list[int]:
    """The demand stream written out entry by entry (`_replay`'s order), -1 for no word."""
    tc = 3 - rc - cc
    s_r, s_c, t_len = size[rc], size[cc], size[tc]
    out: list[int] = []
    for y0 in range(0, s_c, uc):
        for x0 in range(0, s_r, ur):
            nx, ny = min(ur, s_r - x0), min(uc, s_c - y0)
            if mode == sw.STATIONARY:
                out += [a_off[a] + b_off[b] for a in range(x0 + nx - 1, x0 - 1, -1) for b in range(y0, y0 + ny)]
                continue
            base, n = (x0, nx) if mode == sw.ROWS_TIME else (y0, ny)
            out += [a_off[base + c] + b_off[d - c] for d in range(t_len + n - 1)
                    for c in range(max(0, d - t_len + 1), min(d, n - 1) + 1)]
    return [a if stamp[a] >= 0 else -1 for a in out]


def _epochs(stream: list[int], start: int, window: int) -> tuple[list[int], list[int]]:
    """The window walked from an empty state at entry ``start``: where each epoch starts
    (``start`` first), and the words fetched before each entry from ``start`` on (one more
    entry: the total at the end)."""
    starts, fetched = [start], [0]
    seen: set[int] = set()
    for i in range(start, len(stream)):
        a = stream[i]
        n = fetched[-1]
        if a >= 0 and a not in seen:
            seen.add(a)
            n += 1
            if len(seen) == window:
                seen = set()
                starts.append(i + 1)
        fetched.append(n)
    return starts, fetched


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_a_lead_in_interleaves_with_the_walk_and_counts_within_three_windows(case, qa, qx, qy):
    """The guard of `window_fetches_sampled` (module docstring, "Samples"): the window walked
    from an empty state at any entry ``a`` (a lead-in) resets in step with the walk from the
    stream's start, one reset apart at most (epoch starts ``T_{k+j} <= A_j <= T_{k+j+1}``,
    ``T_k <= a < T_{k+1}``: where an epoch ends never moves back as its start moves on); so
    on any stretch ``[x, y)`` after ``a`` the two count within three windows of each other,
    and once an epoch of the lead-in starts where one of the walk's does, the two are the
    same walk from there (same window state at every later entry, same count)."""
    prob, lay, rc, cc, ur, uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    a_off, b_off, stamp, size = sw._stream_arrays(*args)
    stream = _stream(a_off, b_off, stamp, mode, size, rc, cc, ur, uc)
    n = len(stream)
    a = int(qa * (n - 1))
    x = a + int(qx * (n - a))
    y = x + int(qy * (n - x))
    t_starts, t_fetched = _epochs(stream, 0, window)
    l_starts, l_fetched = _epochs(stream, a, window)
    assert t_fetched[-1] == _replay(a_off, b_off, stamp, mode, size, rc, cc, ur, uc, window)
    k = max(i for i, p in enumerate(t_starts) if p <= a)
    for j, p in enumerate(l_starts):
        assert t_starts[k + j] <= p, (j, p)
        if k + j + 1 < len(t_starts):
            assert p <= t_starts[k + j + 1], (j, p)
    walk = t_fetched[y] - t_fetched[x]
    lead = l_fetched[y - a] - l_fetched[x - a]
    assert abs(walk - lead) < 3 * max(window, 1), (walk, lead)
    met = next((p for p in l_starts if p in set(t_starts)), None)
    if met is not None and met <= x:
        event("the lead-in met the walk")
        assert walk == lead


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.integers(1, 20), st.integers(0, 30))
def test_fill_unit_writes_the_units_stream(case, chunk, u):
    """`_fill_unit` (its straight line for one-entry diagonals, head triangle, full diagonals a
    column at a time or a diagonal at a time, tail triangle, and the general loop) writes a
    unit's entries in the stream's order, -1 for no word, whether the word lookup is skipped
    (every address a word) or not: against the stream written out in Python (`_stream`),
    chunks of 1 to 20 (diagonals shorter and longer than the 8 of the column-at-a-time path,
    and than the time class)."""
    prob, lay, rc, cc, ur, uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    if mode == sw.STATIONARY:
        return
    a_off, b_off, stamp, size = sw._stream_arrays(*args)
    tc = 3 - rc - cc
    s_r, s_c, t_len = size[rc], size[cc], size[tc]
    if mode == sw.ROWS_TIME:
        ur, uc, u = min(chunk, s_r), s_c, 0
        want = _stream(a_off, b_off, stamp, mode, size, rc, cc, ur, uc)
    else:
        ur, uc = s_r, min(chunk, s_c)
        u = u % -(-s_c // uc)
        want = _stream(a_off, b_off, stamp, mode, size, rc, cc, ur, uc)
        start = sum(min(uc, s_c - v * uc) * t_len for v in range(u))
        want = want[start:start + min(uc, s_c - u * uc) * t_len]
    every = bool((stamp >= 0).all())
    for skip in ((True, False) if every else (False,)):
        out = np.full(len(want) + 3, -7, dtype=np.int32)
        n = sw._fill_unit(a_off, b_off, stamp, mode, s_r, s_c, ur, uc, t_len, u, out, skip)
        assert n == len(want)
        assert out[:n].tolist() == want
        assert (out[n:] == -7).all()
    assert sw._all_words(stamp) == every


@pytest.mark.parametrize("seed", range(4))
def test_unit_counts_are_the_jump_for_every_repetition_count(seed):
    """`_unit_counts` (one chain of resets from the unit's start, the last epoch's words off
    one backward pass) gives, for every number of repetitions it counts, `_jump` from the
    unit's start and the replay of the unit repeated that many times; at least ``r_need``
    of them, and no more than ``r_max``."""
    rng = np.random.default_rng(seed)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        words = int(rng.integers(1, 30))
        unit = rng.integers(-1, words, size=n).astype(np.int32)
        window = int(rng.integers(1, 12))
        r_max = int(rng.integers(1, 9))
        r_need = int(rng.integers(1, r_max + 1))
        fwd = np.empty(n, dtype=np.int32)
        sw._reset_offsets(unit, n, window, np.zeros(words, dtype=np.int32), fwd)
        want = [sw._jump_from_start(unit, fwd, r, window, words) for r in range(1, r_max + 1)]
        steps = int(rng.choice([0, 3, 1 << 30]))
        counts = np.empty(r_max, dtype=np.int64)
        done = sw._unit_counts(unit, n, fwd.copy(), window, r_need, r_max, steps, np.zeros(words, dtype=np.int32),
                               np.empty(r_max, dtype=np.int64), counts)
        assert r_need <= done <= r_max
        if steps == 1 << 30:
            assert done == r_max
        assert counts[:done].tolist() == want[:done]
        for r in range(1, done + 1):  # the replay of the unit repeated r times through the window
            seen: set[int] = set()
            fetched = 0
            for a in np.tile(unit, r).tolist():
                if a >= 0 and a not in seen:
                    seen.add(a)
                    fetched += 1
                    if len(seen) == window:
                        seen = set()
            assert counts[r - 1] == fetched


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.randoms(use_true_random=False), st.lists(st.integers(1, 9), min_size=1, max_size=3))
def test_orders_of_one_stream_share_its_walk(case, rnd, chunks):
    """Orders that keep each class's dims in the same order (the two classes' dims interleaved
    otherwise) have one `canonical_order`, and the walk of each (cache cleared between) is the
    same count, the replay's: so `systolic_dram._window_exact`, which keys the walk on the
    canonical order, counts every such order's stream exactly; and a ``ROWS_TIME`` unit's
    counts, kept under its canonical order, serve the other order's shapes."""
    prob, lay, rc, cc, ur, uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    rel, classes = args[-2], args[-1]
    dim_class, bounds = args[2], args[3]
    by_class = [[d for d in rel if dim_class[d] == c] for c in classes]
    mixed = by_class[0] + by_class[1]
    for d in by_class[1]:  # the second class's dims moved to random places, its own order kept
        mixed.remove(d)
    slots = sorted(rnd.randint(0, len(by_class[0])) for _ in by_class[1])
    for i, d in zip(reversed(slots), reversed(by_class[1]), strict=True):
        mixed.insert(i, d)
    mixed_t = tuple(mixed)
    canon = sw.canonical_order(dim_class, bounds, rel, classes)
    assert sw.canonical_order(dim_class, bounds, mixed_t, classes) == canon
    assert canon == tuple(by_class[0] + by_class[1])
    size = lay.class_size
    sw.window_fetches.cache_clear()
    for c in chunks:
        uc_c = min(c, size[cc])
        a_off, b_off, stamp, sizes = sw._stream_arrays(*args)
        want = _replay(a_off, b_off, stamp, mode, sizes, rc, cc, ur, uc_c, window)
        assert sw.window_fetches(*args[:-2], mixed_t, classes, mode, rc, cc, ur, uc_c, window) == want
        assert sw.window_fetches(*args[:-2], canon, classes, mode, rc, cc, ur, uc_c, window) == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.integers(1, 12))
def test_shifted_reset_offsets_equal_the_two_pointers(case, chunk):
    """`_reset_offsets_shifted` (the starts of the rows that repeat shifted copied from one
    `_unit_shift` earlier, the rest by two pointers) is `_reset_offsets`' table on every
    ``ROWS_TIME`` unit whose entries are all words, and the shift it uses holds: entries that
    far apart below ``full_end`` are one word offset apart, and the unit written from its
    first folds and moved (`_fill_rows_unit`) is `_fill_unit`'s."""
    prob, lay, rc, cc, _ur, _uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    if mode != sw.ROWS_TIME:
        return
    a_off, b_off, stamp, size = sw._stream_arrays(*args)
    if not sw._all_words(stamp):
        return
    tc = 3 - rc - cc
    s_r, t_len = size[rc], size[tc]
    ur = min(chunk, s_r)
    n = s_r * t_len
    unit = np.empty(n, dtype=np.int32)
    sw._fill_unit(a_off, b_off, stamp, mode, s_r, 1, ur, 1, t_len, 0, unit, True)
    want = np.empty(n, dtype=np.int32)
    cnt = np.zeros(stamp.shape[0], dtype=np.int32)
    sw._reset_offsets(unit, n, window, cnt, want)
    shift, full_end = sw._unit_shift(a_off, s_r, ur, t_len)
    if shift == 0:
        return
    event("shifted")
    d = unit[shift:full_end] - unit[:full_end - shift]
    assert (d == d[0]).all()
    copied = np.full(n, -7, dtype=np.int32)  # the unit written from its first folds, moved
    sw._fill_rows_unit(a_off, b_off, stamp, s_r, ur, t_len, copied, True, shift, full_end)
    assert copied.tolist() == unit.tolist()
    got = np.full(n, -7, dtype=np.int32)
    sw._reset_offsets_shifted(unit, n, window, cnt, got, shift, full_end)
    assert not cnt.any()
    assert got.tolist() == want.tolist()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.integers(-3, 1 << 20), st.lists(st.integers(1, 9), min_size=1, max_size=3))
def test_kept_scratch_leaves_every_walk_exact(case, junk, chunks):
    """The walks' scratch is kept between walks (`_ScratchPool`): whatever an earlier walk
    left in it (here every kept array filled with junk, larger than this stream needs), each
    walk (whole through the unit tables, by `_walk`, or a sample that covers the stream)
    counts what the replay counts, and the pool hands
    out zeros where asked and the length asked."""
    prob, lay, rc, cc, ur, uc, order, window = case
    mode, args = _arrays(prob, lay, rc, cc, order)
    size = lay.class_size
    for role, dtype in (("unit", np.int32), ("fwd", np.int32), ("cnt", np.int32), ("last", np.int64)):
        sw._SCRATCH.arrays[role] = np.full(4096, junk, dtype=dtype)
    z = sw._SCRATCH.get("cnt", 100, np.int32, zero=True)
    assert z.shape == (100,) and not z.any()
    sw._SCRATCH.arrays["cnt"][:] = junk
    for c in chunks:
        uc_c = min(c, size[cc])
        a_off, b_off, stamp, sizes = sw._stream_arrays(*args)
        want = _replay(a_off, b_off, stamp, mode, sizes, rc, cc, ur, uc_c, window)
        sw.window_fetches.cache_clear()
        assert sw.window_fetches(*args, mode, rc, cc, ur, uc_c, window) == want
        for role in ("unit", "fwd", "cnt"):
            sw._SCRATCH.arrays[role][:] = junk
        assert _count(args, mode, rc, cc, ur, uc_c, window, jump=True) == want
        for role in ("unit", "fwd", "cnt"):
            sw._SCRATCH.arrays[role][:] = junk
        whole = size[0] * size[1] * size[2] + 1  # (a sample of the whole stream: its walk)
        assert sw.window_fetches_sampled(*args, mode, rc, cc, ur, uc_c, window, whole) == want
