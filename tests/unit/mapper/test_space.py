"""MapSpace: encoding, sizes, sampling, legality, moves, enumeration, lower bounds."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import InfeasibleSpaceError, SpaceTooLargeError, SpecError
from accelmap.mapper.check import Reason
from accelmap.mapper.constraints import Constraints, FactorRule, KeepRule, OrderRule, Slot, SpatialRule
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace, n_ordered_factorizations
from accelmap.testing.examples import small_arch, small_conv
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term


def tiny_matmul(m: int = 4, n: int = 2, k: int = 3) -> Problem:
    def t(name, dims, role):
        return Tensor(name=name, projection=tuple((Term(dim=d),) for d in dims), role=role)
    return Problem(
        name="mm", dims=(Dim(name="M", bound=m), Dim(name="N", bound=n), Dim(name="K", bound=k)),
        tensors=(t("A", "MK", TensorRole.INPUT), t("B", "KN", TensorRole.WEIGHT), t("C", "MN", TensorRole.OUTPUT)),
    )


def tiny_arch(fx: int = 2, fy: int = 1, cap: int | None = 8) -> Arch:
    return Arch(
        name="tiny",
        levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100, write_energy_pj=100),
            StorageLevel(name="RF", capacity_words=cap, read_energy_pj=1, write_energy_pj=1, fanout_x=fx, fanout_y=fy),
        ),
        compute=Compute(energy_per_mac_pj=1.0),
    )


@pytest.fixture(scope="module")
def space() -> MapSpace:
    return MapSpace(small_conv(), small_arch())


def test_counts_match_stars_and_bars() -> None:
    assert n_ordered_factorizations(12, 3) == 3 * 6  # 2^2: C(4,2)=6; 3^1: 3
    assert n_ordered_factorizations(1, 5) == 1
    # no fanout: every slot is temporal, so the table is exactly the ordered factorizations
    sp = MapSpace(small_conv(k=8, c=4), small_arch(fanout=(1, 1)))
    for name, count in sp.size().per_dim:
        b = sp.problem.dims[sp.problem.dim_index(name)].bound
        assert count == n_ordered_factorizations(b, 3)


def test_size_is_product_of_bounds_and_exceeds_int64(space: MapSpace) -> None:
    s = space.size()
    assert s.total == math.prod(int(b) for b in space.bounds)
    assert s.total == s.factorizations * s.orders * s.bypass
    assert isinstance(s.total, int) and s.total > 2**63
    assert len(space.param_names) == len(space.param_kinds) == space.n_params == len(space.bounds)
    assert set(space.param_kinds) <= {"tile", "spatial", "order", "keep"}


def test_decode_encode_round_trip(space: MapSpace) -> None:
    rng = np.random.default_rng(1)
    x = space.sample_encoded(500, rng)
    b = space.decode(x)
    assert (b.factors().prod(axis=1) == space.problem.bounds).all()
    np.testing.assert_array_equal(space.encode(b), x)
    assert space.decode(space.encode(b)) == b


def test_decode_corners_of_box(space: MapSpace) -> None:
    lo = np.zeros((1, space.n_params), dtype=np.int64)
    hi = (space.bounds - 1)[None]
    for x in (lo, hi):
        b = space.decode(x)
        assert (b.factors().prod(axis=1) == space.problem.bounds).all()
    with pytest.raises(SpecError, match="expected 0 <= value"):
        space.decode(space.bounds[None])


def test_check_reports_fanout_and_capacity(space: MapSpace) -> None:
    b = space.sample(2000, np.random.default_rng(2))
    res = space.check(b)
    assert set(np.unique(res.reason)) <= {0, int(Reason.FANOUT), int(Reason.CAPACITY)}
    assert res.valid.any() and (~res.valid).any()


def test_sample_valid_only_legal(space: MapSpace) -> None:
    rng = np.random.default_rng(3)
    for method in ("reject", "repair", "auto"):
        v = space.sample_valid(300, rng, method=method)
        assert len(v) == 300
        assert space.check(v).valid.all()


def test_sample_valid_infeasible_message() -> None:
    keep_all = Constraints(keep=tuple(KeepRule(level="RF", tensor=t, keep=True) for t in ("input", "weight", "output")))
    sp = MapSpace(small_conv(), small_arch(rf_words=2), keep_all)
    with pytest.raises(InfeasibleSpaceError, match=r"0 of \d+ sampled mappings of small_conv .*% exceed"):
        sp.sample_valid(10, np.random.default_rng(0), max_draws=5000)


def test_neighbours_stay_in_space_and_move_once(space: MapSpace) -> None:
    rng = np.random.default_rng(4)
    b = space.sample(400, rng)
    nb = space.neighbours(b, rng)
    x0, x1 = space.encode(b), space.encode(nb)  # encode raises if outside the space
    changed = (x0 != x1).any(axis=1)
    assert changed.mean() > 0.9
    assert (nb.factors().prod(axis=1) == space.problem.bounds).all()


def test_repair_whole_level_crossover(space: MapSpace) -> None:
    rng = np.random.default_rng(5)
    a, b = space.sample(200, rng), space.sample(200, rng)
    t = a.temporal.copy()
    t[:, 1] = b.temporal[:, 1]  # GLB temporal level from the other parent
    child = MappingBatch(temporal=t, spatial=a.spatial, order=a.order, keep=a.keep)
    fixed = space.repair(child)
    assert (fixed.factors().prod(axis=1) == space.problem.bounds).all()
    space.encode(fixed)
    assert space.repair(a) == a
    legal = space.repair(child, np.random.default_rng(0), legalize=True)
    space.encode(legal)
    assert space.check(legal).valid.mean() > space.check(fixed).valid.mean()
    assert space.check(legal).valid.mean() > 0.9


def test_enumerate_matches_brute_force() -> None:
    sp = MapSpace(tiny_matmul(), tiny_arch())
    pts = MappingBatch.concat(list(sp.enumerate(chunk_size=50)))
    assert len(pts) == sp.n_distinct()
    # brute force: decode the whole box and dedupe by (factors, order among non-unit loops, keep)
    grid = np.array(list(itertools.product(*[range(int(b)) for b in sp.bounds])), dtype=np.int64)
    allb = sp.decode(grid)

    def key(m):
        orders = tuple(tuple(int(d) for d in m.order[lv] if m.temporal[lv, d] > 1) for lv in range(m.n_levels))
        return (m.temporal.tobytes(), m.spatial.tobytes(), orders, m.keep.tobytes())

    assert len({key(m) for m in allb}) == len(pts) == len({key(m) for m in pts})
    assert sp.size().total == len(grid)


def test_enumerate_too_large(space: MapSpace) -> None:
    with pytest.raises(SpaceTooLargeError, match="enumeration limit"):
        next(space.enumerate(max_points=1000))


def test_constraints_shrink_tables_and_hold() -> None:
    p, a = small_conv(), small_arch()
    c = Constraints(
        factors=(FactorRule(level="RF", dim="S", fixed=0), FactorRule(level="GLB", dim="K", slot=Slot.SPATIAL_X, fixed=4),
                 FactorRule(level="DRAM", dim="C", max=2)),
        spatial=(SpatialRule(level="GLB", x=frozenset({"K"}), y=frozenset({"C", "P"})),),
        orders=(OrderRule(level="RF", inner=("R", "S")), OrderRule(level="DRAM", outer=("K",))),
        keep=(KeepRule(level="GLB", tensor="weight", keep=False), KeepRule(level="RF", tensor="Outputs", keep=True)),
    )
    sp = MapSpace(p, a, c)
    b = sp.sample(500, np.random.default_rng(6))
    s, k = p.dim_index("S"), p.dim_index("K")
    assert (b.temporal[:, 2, s] == 3).all()
    assert (b.spatial[:, 1, k, 0] == 4).all()
    assert (b.temporal[:, 0, p.dim_index("C")] <= 2).all()
    assert (b.spatial[:, 1, :, 0][:, [d for d in range(7) if d != k]] == 1).all()
    assert (b.order[:, 2, -2:] == [p.dim_index("R"), s]).all()
    assert (b.order[:, 0, 0] == k).all()
    assert (~b.keep[:, 1, 0]).all() and b.keep[:, 2, 2].all()
    assert sp.constraint_ok(b).all()
    free = MapSpace(p, a)
    assert not sp.constraint_ok(free.sample(500, np.random.default_rng(7))).any()
    assert sp.size().total < free.size().total


def test_min_utilization_reason() -> None:
    c = Constraints(min_utilization=0.5)
    sp = MapSpace(small_conv(), small_arch(), c)
    b = sp.sample(2000, np.random.default_rng(8))
    res = sp.check(b)
    assert (res.reason == int(Reason.UTILIZATION)).any()
    v = sp.sample_valid(50, np.random.default_rng(9))
    assert (sp.utilization(v) >= 0.5).all()


def test_padding_space_covers_bounds() -> None:
    p = small_conv(k=7, c=5, p=6, q=6)
    sp = MapSpace(p, small_arch(), allow_padding=True)
    exact = MapSpace(p, small_arch())
    assert sp.size().total > exact.size().total
    b = sp.sample(500, np.random.default_rng(10))
    prod = b.factors().prod(axis=1)
    assert (prod >= p.bounds).all() and (prod > p.bounds).any()
    assert sp.check(b).reason.max() <= int(Reason.CAPACITY)
    ok = sp.check(b).valid
    assert ok.any() and (sp.utilization(b)[ok] <= 1.0 + 1e-12).all()
    assert sp.decode(sp.encode(b)) == b


def test_lower_bounds() -> None:
    p, a = small_conv(), small_arch()
    lb = MapSpace(p, a).lower_bounds()
    np.testing.assert_array_equal(lb.compulsory_words[0], p.tensor_sizes())
    assert lb.min_compute_cycles == math.ceil(p.macs / a.n_macs)
    assert lb.min_energy_pj >= p.macs * a.compute.energy_per_mac_pj


def test_many_dims_use_iterative_lehmer_decode() -> None:
    names = "ABCDEFGHI"
    dims = tuple(Dim(name=n, bound=2 if i % 3 == 0 else 1) for i, n in enumerate(names))
    tensors = (
        Tensor(name="X", projection=tuple((Term(dim=n),) for n in names[:5]), role=TensorRole.INPUT),
        Tensor(name="W", projection=tuple((Term(dim=n),) for n in names[3:]), role=TensorRole.WEIGHT),
        Tensor(name="Y", projection=tuple((Term(dim=n),) for n in names[::2]), role=TensorRole.OUTPUT),
    )
    p = Problem(name="nine", dims=dims, tensors=tensors)
    sp = MapSpace(p, tiny_arch(cap=None))
    assert sp.size().orders == math.factorial(9) ** 2
    rng = np.random.default_rng(11)
    x = sp.sample_encoded(300, rng)
    b = sp.decode(x)
    assert (np.sort(b.order, axis=2) == np.arange(9)).all()
    np.testing.assert_array_equal(sp.encode(b), x)
    # Lehmer digits of all-zero are the identity order; the last digits reverse it
    ident = sp.decode(np.zeros((1, sp.n_params), dtype=np.int64))
    assert (ident.order[0] == np.arange(9)).all()


def test_param_groups_and_describe(space: MapSpace) -> None:
    groups = space.param_groups()
    assert set(groups) == {"tile", "order", "keep"}
    assert sum(len(v) for v in groups.values()) == space.n_params
    assert all(space.param_kinds[i] == k for k, cols in groups.items() for i in cols)
    text = space.describe()
    assert "factorizations" in text and "small_conv" in text


def test_resample_varies_only_the_given_kinds(space: MapSpace) -> None:
    rng = np.random.default_rng(12)
    x = space.sample_encoded(3, rng)
    y = space.resample(x, "tile", 50, rng)
    assert y.shape == (150, space.n_params)
    tile = space.param_groups()["tile"]
    other = np.setdiff1d(np.arange(space.n_params), tile)
    np.testing.assert_array_equal(y[:, other], np.repeat(x, 50, axis=0)[:, other])
    assert len(np.unique(y[:, tile], axis=0)) > 100
    assert ((y >= 0) & (y < space.bounds)).all()
    with pytest.raises(SpecError, match="resample kinds"):
        space.resample(x, "tiles", 2, rng)


def test_empty_batches_and_one_point_space(space: MapSpace) -> None:
    rng = np.random.default_rng(13)
    empty = space.sample(0, rng)
    assert len(empty) == 0 and len(space.sample_valid(0, rng)) == 0
    assert space.check(empty).valid.shape == (0,) and space.encode(empty).shape == (0, space.n_params)
    assert len(space.neighbours(empty, rng)) == 0 and len(space.repair(empty)) == 0
    one = MapSpace(tiny_matmul(1, 1, 1), tiny_arch(fx=1, cap=None),
                   Constraints(keep=tuple(KeepRule(level="RF", tensor=t, keep=False) for t in "ABC")))
    # only the orders of unit loops vary: 3! per level, all cost-equivalent
    assert one.size().total == 36 and one.n_distinct() == 1
    assert len(MappingBatch.concat(list(one.enumerate()))) == 1
    pinned = MapSpace(one.problem, one.arch, one.constraints.override(Constraints(
        orders=tuple(OrderRule(level=lv, inner=("M", "N", "K")) for lv in ("DRAM", "RF")))))
    assert pinned.n_params == 0 and pinned.size().total == 1
    b = pinned.sample_valid(4, rng)
    assert len(b) == 4 and pinned.neighbours(b, rng) == b


def test_repair_sampling_raises_utilization() -> None:
    # 16 x 16 PEs and a 90 % floor: uniform draws rarely reach it
    sp = MapSpace(small_conv(k=16, c=16, p=8, q=8), small_arch(fanout=(16, 16), glb_words=1 << 20, rf_words=1 << 10),
                  Constraints(min_utilization=0.9))
    rng = np.random.default_rng(14)
    assert sp.check(sp.sample(2048, rng)).valid.mean() < 0.02
    b = sp.sample_valid(50, rng, method="repair")
    assert sp.check(b).valid.all() and (sp.utilization(b) >= 0.9).all()


def test_neighbours_encoded_matches_neighbours(space: MapSpace) -> None:
    x = space.sample_encoded(300, np.random.default_rng(15))
    a = space.neighbours_encoded(x, np.random.default_rng(16))
    b = space.encode(space.neighbours(space.decode(x), np.random.default_rng(16)))
    np.testing.assert_array_equal(a, b)
    assert ((a >= 0) & (a < space.bounds)).all() and (a != x).any(axis=1).all()


def test_spaces_pickled_before_the_split_still_load() -> None:
    """Checkpoints pickle the searcher with its map space; those written before the table
    arithmetic left `space.py` name its row index `accelmap.mapper.space._RowIndex`."""
    import pickle

    from accelmap.mapper._space_tables import RowIndex

    space = MapSpace(small_conv(), small_arch(), engine="numpy")
    where = (RowIndex.__module__, RowIndex.__qualname__)
    RowIndex.__module__, RowIndex.__qualname__ = "accelmap.mapper.space", "_RowIndex"  # as pickled then
    try:
        old = pickle.dumps(space)
    finally:
        RowIndex.__module__, RowIndex.__qualname__ = where
    assert b"_RowIndex" in old
    back = pickle.loads(old)
    x = space.sample_encoded(64, np.random.default_rng(0))
    assert back.decode(x) == space.decode(x)
    assert (back.encode(space.decode(x)) == x).all()
