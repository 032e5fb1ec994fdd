"""Properties of MapSpace on small random problems, archs and constraints."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.mapper.constraints import Constraints, FactorRule, KeepRule, OrderRule, Slot, SpatialRule
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

DIMS = ("M", "N", "K")


def _problem(bounds: tuple[int, int, int]) -> Problem:
    def t(name, dims, role):
        return Tensor(name=name, projection=tuple((Term(dim=d),) for d in dims), role=role)
    return Problem(
        name="mm",
        dims=tuple(Dim(name=n, bound=b) for n, b in zip(DIMS, bounds, strict=True)),
        tensors=(t("A", "MK", TensorRole.INPUT), t("B", "KN", TensorRole.WEIGHT), t("C", "MN", TensorRole.OUTPUT)),
    )


@st.composite
def spaces(draw, max_bound: int = 12):
    bounds = tuple(draw(st.integers(1, max_bound)) for _ in DIMS)
    n_levels = draw(st.integers(2, 3))
    levels = []
    for i in range(n_levels):
        levels.append(StorageLevel(
            name=f"L{i}",
            capacity_words=None if i == 0 else draw(st.integers(4, 200)),
            fanout_x=1 if i == 0 else draw(st.integers(1, 4)),
            fanout_y=1 if i == 0 else draw(st.integers(1, 3)),
            holds=None if i == 0 else draw(st.sampled_from([None, frozenset({"input"}), frozenset({"weight", "output"})])),
        ))
    arch = Arch(name="rand", levels=tuple(levels), compute=Compute(energy_per_mac_pj=1.0))
    names = [lv.name for lv in levels]
    rules = []
    if draw(st.booleans()):
        lv = draw(st.sampled_from(names))
        d = draw(st.sampled_from(DIMS))
        rules.append(FactorRule(level=lv, dim=d, slot=Slot.TEMPORAL, max=draw(st.integers(1, 4))))
    spatial = []
    if draw(st.booleans()):
        spatial.append(SpatialRule(level=names[-1], x=frozenset(draw(st.sets(st.sampled_from(DIMS))))))
    orders = []
    if draw(st.booleans()):
        perm = draw(st.permutations(DIMS))
        k = draw(st.integers(0, 3))
        orders.append(OrderRule(level=draw(st.sampled_from(names)), inner=tuple(perm[:k])))
    keep = []
    if draw(st.booleans()):
        keep.append(KeepRule(level=names[-1], tensor="output", keep=draw(st.sampled_from([True, False, None]))))
    c = Constraints(factors=tuple(rules), spatial=tuple(spatial), orders=tuple(orders), keep=tuple(keep))
    try:
        return MapSpace(_problem(bounds), arch, c)
    except (SpecError, InfeasibleSpaceError):
        assume(False)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(spaces(), st.integers(0, 2**32 - 1))
def test_sampled_decoded_neighbour_mappings_are_in_the_space(space: MapSpace, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = space.sample_encoded(64, rng)
    b = space.decode(x)
    bounds = space.problem.bounds
    assert (b.factors().prod(axis=1) == bounds).all()
    assert space.constraint_ok(b).all()
    np.testing.assert_array_equal(space.encode(b), x)
    assert space.decode(space.encode(b)) == b
    nb = space.neighbours(b, rng)
    assert (nb.factors().prod(axis=1) == bounds).all()
    assert space.constraint_ok(nb).all()
    assert space.decode(space.encode(nb)) == nb
    rep = space.repair(nb)
    assert rep == nb
    assert space.check(b).reason.max() <= 7  # never FACTORS/ORDER/KEEP/CONSTRAINT


def _brute_force_size(space: MapSpace) -> int:
    """Count by trying every factor assignment, permutation and bypass vector."""
    p, a = space.problem, space.arch
    L = a.n_levels
    fan = a.fanouts
    total = 1
    for d, dim in enumerate(p.dims):
        divisors = [f for f in range(1, dim.bound + 1) if dim.bound % f == 0]
        count = 0
        for combo in itertools.product(divisors, repeat=3 * L):
            if math.prod(combo) != dim.bound:
                continue
            f = np.array(combo).reshape(L, 3)
            temporal = np.ones((1, L, p.n_dims), dtype=np.int64)
            spatial = np.ones((1, L, p.n_dims, 2), dtype=np.int64)
            temporal[0, :, d] = f[:, 0]
            spatial[0, :, d, 0] = f[:, 1]
            spatial[0, :, d, 1] = f[:, 2]
            if (spatial[0, :, d] > fan).any():
                continue  # a single dim never unrolls beyond the fanout: pruned from the space
            # the other dims at their trivial assignment (all at the outermost level)
            for e in range(p.n_dims):
                if e != d:
                    temporal[0, 0, e] = p.dims[e].bound
            order = np.tile(np.arange(p.n_dims), (1, L, 1))
            keep = np.broadcast_to(space._keep_base, (1, L, p.n_tensors)).copy()
            b = MappingBatch(temporal=temporal, spatial=spatial, order=order, keep=keep)
            rows = space._factor_rows(b)
            count += int(rows[0, d] >= 0)
        total *= count
    for lv in range(L):
        outer, inner = space._order_outer[lv], space._order_inner[lv]
        count = 0
        for perm in itertools.permutations(range(p.n_dims)):
            if list(perm[: len(outer)]) == outer and (not inner or list(perm[p.n_dims - len(inner):]) == inner):
                count += 1
        total *= count
    holds = a.holds_mask(p)
    free_bits = 0
    for lv in range(1, L):
        for t in range(p.n_tensors):
            if holds[lv, t] and space._keep_state[lv, t] == -1:
                free_bits += 1
    return total * 2**free_bits


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces(max_bound=6))
def test_counted_size_equals_brute_force(space: MapSpace) -> None:
    assert space.size().total == _brute_force_size(space)
    assert space.size().total == math.prod(int(b) for b in space.bounds)


def test_uniform_sampling_chi_square() -> None:
    arch = Arch(
        name="tiny",
        levels=(StorageLevel(name="DRAM", capacity_words=None),
                StorageLevel(name="RF", capacity_words=None, fanout_x=2, holds=frozenset({"output"}))),
        compute=Compute(energy_per_mac_pj=1.0),
    )
    space = MapSpace(_problem((4, 1, 3)), arch)
    total = space.size().total
    assert 20 <= total <= 1000
    rng = np.random.default_rng(12345)
    n = 100 * total
    x = space.encode(space.sample(n, rng))
    radix = np.cumprod(np.concatenate([[1], space.bounds[:-1]]))
    index = x @ radix
    counts = np.bincount(index, minlength=total)
    assert len(counts) == total
    _, pvalue = stats.chisquare(counts)
    assert pvalue > 1e-4


def test_sample_valid_reject_is_uniform_over_legal_points() -> None:
    arch = Arch(
        name="tiny",
        levels=(StorageLevel(name="DRAM", capacity_words=None),
                StorageLevel(name="RF", capacity_words=6, fanout_x=2)),
        compute=Compute(energy_per_mac_pj=1.0),
    )
    space = MapSpace(_problem((4, 1, 3)), arch)
    grid = np.array(list(itertools.product(*[range(int(b)) for b in space.bounds])), dtype=np.int64)
    legal = space.check(space.decode(grid)).valid
    assert 10 <= legal.sum() < len(grid)
    rng = np.random.default_rng(7)
    got = space.encode(space.sample_valid(100 * int(legal.sum()), rng, method="reject"))
    radix = np.cumprod(np.concatenate([[1], space.bounds[:-1]]))
    counts = np.bincount(got @ radix, minlength=len(grid))
    grid_index = grid @ radix
    assert counts[grid_index[~legal]].sum() == 0
    _, pvalue = stats.chisquare(counts[grid_index[legal]])
    assert pvalue > 1e-4


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(st.integers(1, 9), st.integers(1, 5), st.integers(1, 7)), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_padded_spaces_round_trip_and_cover(bounds, fanout, seed) -> None:
    arch = Arch(
        name="pad",
        levels=(StorageLevel(name="DRAM", capacity_words=None),
                StorageLevel(name="RF", capacity_words=64, fanout_x=fanout)),
        compute=Compute(energy_per_mac_pj=1.0),
    )
    space = MapSpace(_problem(bounds), arch, allow_padding=True)
    exact = MapSpace(_problem(bounds), arch)
    assert space.size().total >= exact.size().total
    rng = np.random.default_rng(seed)
    b = space.sample(64, rng)
    prod = b.factors().prod(axis=1)
    assert (prod >= space.problem.bounds).all()
    # minimal covers: no factor (of any slot) can be lowered by one and still cover the bound
    for d in range(3):
        for g in (b.temporal[:, 0, d], b.temporal[:, 1, d], b.spatial[:, 1, d, 0]):
            assert ((g == 1) | (prod[:, d] // g * (g - 1) < bounds[d])).all()
    assert space.decode(space.encode(b)) == b
    nb = space.neighbours(b, rng)
    assert space.decode(space.encode(nb)) == nb


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces(max_bound=4))
def test_enumerate_yields_each_cost_distinct_point_once(space: MapSpace) -> None:
    assume(space.size().total <= 10_000)
    pts = MappingBatch.concat(list(space.enumerate(chunk_size=997)))
    assert len(pts) == space.n_distinct()
    assert space.constraint_ok(pts).all()

    def key(m):
        runs = tuple(tuple(int(d) for d in m.order[lv] if m.temporal[lv, d] > 1) for lv in range(m.n_levels))
        return (m.temporal.tobytes(), m.spatial.tobytes(), runs, m.keep.tobytes())

    keys = {key(m) for m in pts}
    assert len(keys) == len(pts)
    grid = np.array(list(itertools.product(*[range(int(b)) for b in space.bounds])), dtype=np.int64)
    assert {key(m) for m in space.decode(grid)} == keys


@SETTINGS
@given(spaces(), st.sampled_from([0.0, 0.2, 0.6]), st.booleans(), st.integers(0, 2**32 - 1))
def test_fast_legality_path_agrees_with_check(space: MapSpace, min_util: float, pad: bool, seed: int) -> None:
    """sample_valid's table-driven check gives the same reasons and levels as check()."""
    c = space.constraints.override(Constraints(min_utilization=min_util))
    try:
        space = MapSpace(space.problem, space.arch, c, allow_padding=pad)
    except (SpecError, InfeasibleSpaceError):
        assume(False)
    rng = np.random.default_rng(seed)
    x = space.sample_encoded(256, rng)
    b = space.decode(x)
    rows = np.zeros((len(x), space.problem.n_dims), dtype=np.int64)
    rows[:, space._tile_dims] = x[:, space._tile_cols]
    reason, level = space._fast_reasons(rows, b.keep)
    ref = space.check(b)
    np.testing.assert_array_equal(reason, ref.reason)
    np.testing.assert_array_equal(level[reason > 0][reason[reason > 0] != 7], ref.level[ref.reason > 0][ref.reason[ref.reason > 0] != 7])
