"""The generated row driver of the loopnest CPU engine (`accelmap.costmodels._loopnest_gen`):
the same outputs as `_loopnest_cpu._driver` (the rules compiled with constant tables) bit for
bit, on legal, sampled and damaged rows, with and without counts, on padded problems; its
source and cache file; the fallback for structures it does not write."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.presets import preset
from accelmap.costmodels import _loopnest_cpu as cpu
from accelmap.costmodels import _loopnest_gen as gen
from accelmap.costmodels import _loopnest_kernel as kernel
from accelmap.costmodels import _loopnest_rules as rules
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.workloads.builders import conv2d, matmul


def _run(rows, consts, batch: MappingBatch, frac: np.ndarray, full: int,  # noqa: ANN001
         cnt: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    n, L, D = batch.temporal.shape
    T = batch.keep.shape[2]
    C = consts.coef.shape[1]
    res, valid, codes = np.full((n, 4), -7.0), np.zeros(n, dtype=np.bool_), np.full((n, 2), -7, dtype=np.int64)
    if cnt is None:
        cnt = np.full((n, 6, L, T), -7.0) if full else np.full((1, 6, L, T), -7.0)
    mp = tuple(np.ascontiguousarray(x) for x in (batch.temporal, batch.spatial, batch.order, batch.keep))
    c = consts
    rt = (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw, c.write_bw, c.tensor_size, c.scal, frac)
    sc = tuple(x[0] for x in rules.scratch(1, L, D, T, C, int(c.ints[1])))
    rows(0, n, int(full), mp, rt, (res, valid, codes, cnt), sc)
    return (res, valid, codes, cnt) if full else (res, valid, codes)


def _damaged(batch: MappingBatch, rng: np.random.Generator) -> MappingBatch:
    """Illegal variants: factors below 1, orders out of range (including dims that alias a
    legal one modulo 64), spatial factors at levels without a fanout, bypass errors."""
    t, s, o, k = (np.array(x) for x in (batch.temporal, batch.spatial, batch.order, batch.keep))
    n, L, D = t.shape
    for i in range(n):
        lv, d = int(rng.integers(L)), int(rng.integers(D))
        kind = i % 6
        if kind == 0:
            t[i, lv, d] = int(rng.choice([0, -1]))
        elif kind == 1:
            o[i, lv, d] = int(rng.choice([-1, D, 64 + int(o[i, lv, d]), -64 + int(o[i, lv, d]), 1 << 40]))
        elif kind == 2:  # a spatial factor moved to a level without a fanout (factors still multiply out)
            s[i, lv, d, int(rng.integers(2))] *= max(t[i, lv, d], 2)
            t[i, lv, d] = 1
        elif kind == 3:
            s[i, lv, d, 0] = int(rng.choice([0, -1]))
        elif kind == 4:
            k[i, lv, int(rng.integers(k.shape[2]))] ^= True
        else:
            t[i, lv, d] = 2 ** 40
    return MappingBatch(temporal=t, spatial=s, order=o, keep=k)


# (each case compiles both drivers once per machine: numba's disk cache keeps them; the
# property tests compare the engine, on this driver, with the numpy path on every preset)
CASES = [("eyeriss-like", lambda: conv2d("c", c=16, k=32, p=14, q=14, r=3, s=3)),
         ("eyeriss-like", lambda: conv2d("c2", c=8, k=8, p=13, q=13, r=3, s=3, stride=2)),
         ("simba-like", lambda: matmul("m", m=64, n=48, k=32)),
         ("tpu-v1-like", lambda: matmul("m", m=64, n=48, k=32))]


# the first case in the default run, the others marked slow (each compiles two drivers, 25-40 s
# on a 2-core machine with a cold cache)
@pytest.mark.parametrize("case", [0, *(pytest.param(i, marks=pytest.mark.slow) for i in range(1, len(CASES)))])
def test_generated_rows_equal_the_specialised_driver(case: int) -> None:
    arch_name, build = CASES[case]
    arch, problem = preset(arch_name), build()
    consts = kernel.kernel_consts(problem, arch)
    S = consts.structure
    assert gen.supports(S)
    rng = np.random.default_rng(case)
    space = MapSpace(problem, arch)
    legal = space.sample_valid(150, rng)
    batch = MappingBatch.concat([legal, space.sample(150, rng), _damaged(legal, rng)])
    fracs = [np.ones(problem.n_tensors), np.linspace(0.5, 1.0, problem.n_tensors)]  # none, and padding's scale
    for frac in fracs:
        for full in (True, False):
            got = _run(gen.driver(S), consts, batch, frac, full)
            want = _run(cpu._driver(S), consts, batch, frac, full)
            for g, w_ in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w_)
    # every reason code occurs, and legal rows
    codes = _run(gen.driver(S), consts, batch, fracs[0], False)[2][:, 0]
    assert {0, 2, 3, 4}.issubset(set(codes.tolist()))
    # full == 2: the entries zero in every row of the structure are left as they are (here a
    # sentinel), every other one written as with full == 1
    want = _run(gen.driver(S), consts, batch, fracs[1], 1)
    zero = _structural_zeros(consts)
    assert zero.any() and not want[3][:, zero].any()
    sentinel = np.full_like(want[3], -7.0)
    got = _run(gen.driver(S), consts, batch, fracs[1], 2, cnt=sentinel)
    for g, w_ in zip(got[:3], want[:3], strict=True):
        np.testing.assert_array_equal(g, w_)
    legal_rows = got[1]
    assert (got[3][legal_rows][:, zero] == -7.0).all()
    np.testing.assert_array_equal(got[3][:, ~zero], want[3][:, ~zero])
    np.testing.assert_array_equal(got[3][~legal_rows], want[3][~legal_rows])  # (illegal rows: all zeros)


def test_generated_rows_equal_the_specialised_driver_where_int64_products_wrap_around() -> None:
    """Rows that pass the checks only because their int64 products wrap around (a level-0 factor
    raised by 2^64 / t, where the tile below it is t = 2^k: t0 = bounds + 2^64; `_damaged` makes
    none): both drivers do the same int64 and float operations on them, so their outputs agree
    there too (and the generated rows' unsigned indices, `_loopnest_gen`, stay in range)."""
    arch_name, build = CASES[0]
    arch, problem = preset(arch_name), build()
    consts = kernel.kernel_consts(problem, arch)
    S = consts.structure
    legal = MapSpace(problem, arch).sample_valid(300, np.random.default_rng(7))
    t = np.array(legal.temporal)
    bounds = np.asarray(problem.bounds)
    changed = 0
    for i in range(len(t)):
        for d in range(t.shape[2]):
            below = int(bounds[d]) // int(t[i, 0, d])  # the tile under level 0 (no fanout there)
            k = below.bit_length() - 1
            if below == 1 << k and 2 <= k and int(np.prod(np.array(legal.spatial)[i, 0, d])) == 1:
                t[i, 0, d] += 1 << (64 - k)
                changed += 1
                break
    assert changed >= 50
    # built past the public constructor, which refuses factors whose products pass 2^62
    batch = MappingBatch._trusted(temporal=t, spatial=legal.spatial, order=legal.order, keep=legal.keep)
    frac = np.ones(problem.n_tensors)
    for full in (True, False):
        got = _run(gen.driver(S), consts, batch, frac, full)
        want = _run(cpu._driver(S), consts, batch, frac, full)
        for g, w_ in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w_)
    assert got[1].sum() >= 50  # such rows pass the checks


def test_generated_rows_equal_the_specialised_driver_with_zero_factors_and_a_bound_below_1() -> None:
    """The generated least-factor test reads only the factors' signs, relying on a zero factor
    making its dim's product 0, unequal to a bound of at least 1; with a bound below 1 every
    row takes the rule's check instead. Rows with a zero factor (alone, or with a negative
    one of another dim or the same dim) agree with the specialised driver under the problem's
    bounds and under the same bounds with a dim's bound set to 0 (where a product of 0
    matches it and the rule passes the row on to the later checks) or to -2."""
    from dataclasses import replace

    arch_name, build = CASES[0]
    arch, problem = preset(arch_name), build()
    consts = kernel.kernel_consts(problem, arch)
    S = consts.structure
    rng = np.random.default_rng(11)
    legal = MapSpace(problem, arch).sample_valid(200, rng)
    t = np.array(legal.temporal)
    n, L, D = t.shape
    for i in range(n):
        d = i % D
        t[i, int(rng.integers(L)), d] = 0
        if i % 3 == 1:
            t[i, int(rng.integers(L)), int(rng.integers(D))] = -1
        elif i % 3 == 2:
            t[i, int(rng.integers(L)), d] *= -1
    batch = MappingBatch.concat([legal, MappingBatch(temporal=t, spatial=legal.spatial, order=legal.order,
                                                     keep=legal.keep)])
    frac = np.ones(problem.n_tensors)
    for low in (None, 0, -2):
        c = consts
        if low is not None:
            b = np.array(consts.bounds)
            b[int(np.argmax(b))] = low
            c = replace(consts, bounds=b)
        for full in (True, False):
            got = _run(gen.driver(S), c, batch, frac, full)
            want = _run(cpu._driver(S), c, batch, frac, full)
            for g, w_ in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w_)
        if low is None:
            assert got[1][:n].all() and not got[1][n:].any()
            assert (got[2][n:, 0] == 2).all()  # FACTORS


def _structural_zeros(consts) -> np.ndarray:  # noqa: ANN001
    """(6, L, T) the count entries that are zero in every row of ``consts``' structure: a level
    that may not hold the tensor, the output's multicast, an operand's spatial reduction."""
    L, T = consts.holds.shape
    out = int(consts.ints[0])
    zero = np.zeros((6, L, T), dtype=bool)
    zero[:] = ~consts.holds[None]
    zero[4, :, out] = True
    zero[5, :, [t for t in range(T) if t != out]] = True
    return zero


def test_source_is_deterministic_and_cached_by_its_digest(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    S = kernel.kernel_consts(conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")).structure
    src = gen.source(S)
    assert src == gen.source(S)
    assert "def rows(lo, hi, full, mp, rt, out, sc):" in src
    monkeypatch.setenv("ACCELMAP_CACHE_DIR", str(tmp_path))
    assert gen.cache_dir() == tmp_path / "loopnest_rows"
    gen.driver.cache_clear()
    try:
        gen.driver(S)
        files = list((tmp_path / "loopnest_rows").glob("accelmap_loopnest_rows_*.py"))
        assert len(files) == 1 and files[0].read_text() == src
    finally:
        gen.driver.cache_clear()


def test_structures_it_does_not_write_fall_back_to_the_specialised_driver() -> None:
    S = kernel.kernel_consts(conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")).structure
    wide = (S[0], S[1], S[2], S[3], 3) + S[5:]
    assert not gen.supports(wide)
    with pytest.raises(ValueError, match="more than two terms"):
        gen.source(wide[:5] + (tuple(3 if x == 2 else x for x in S[5]),) + wide[6:])
    assert cpu.rows_driver(S) is gen.driver(S)


def test_counts_prefetch_names_every_line_of_a_row_and_changes_nothing() -> None:
    """The rows ask for their counts' row a few rows ahead (`prefetch_write`): every cache line
    of a row, wherever the row starts in a line; a hint that writes nothing and never faults,
    past the array's end included."""
    import re

    from numba import njit

    consts = kernel.kernel_consts(conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like"))
    L, T = consts.holds.shape
    row_bytes = 6 * L * T * 8
    src = gen.source(consts.structure)
    offsets = [int(m) for m in re.findall(r"prefetch_write\(cnt, i \+ \d+, (\d+)\)", src)]
    assert offsets
    for start in range(0, 64, 8):  # (float64 rows start at a multiple of 8 bytes)
        named = {(start + off) // 64 for off in offsets}
        assert named == set(range(start // 64, (start + row_bytes - 1) // 64 + 1))

    @njit
    def ask(a, rows):  # noqa: ANN001, ANN202
        for i in rows:
            for off in range(0, a.shape[1] * 8, 64):
                gen.prefetch_write(a, i, off)

    a = np.arange(30.0).reshape(3, 10)
    ask(a, np.array([0, 2, 3, 7, 1 << 20, -5], dtype=np.int64))
    np.testing.assert_array_equal(a, np.arange(30.0).reshape(3, 10))
