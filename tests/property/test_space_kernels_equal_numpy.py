"""Property: the compiled MapSpace operations (`accelmap.mapper._space_kernel`) give what the
numpy path gives, bit for bit, from the same random generator state, which they leave in
the same state: decode, the check of decoded points, neighbour moves (encoded and on
batches, keep flips on and off), uniform sampling, `sample_valid` (reject, repair, auto)
and `legalize_encoded`. Spaces: a layer on every preset, random spaces with every kind of
constraint (factors, spatial dims, pinned loop orders, keep rules, minimum utilization),
imperfect factorization, a level with more free loops than the order tables hold, and the
Timeloop Eyeriss constraint files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from accelmap.arch.presets import preset, presets
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.mapper.constraints import Constraints, FactorRule, KeepRule, OrderRule, Slot, SpatialRule
from accelmap.mapper.space import MapSpace
from accelmap.workloads.builders import conv2d, matmul
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

ROOT = Path(__file__).resolve().parents[2]
# the reference folder sits beside the checkout (or beside the folder of its worktrees)
_REFS = [ROOT / ".." / "shared" / "reference" / "timeloop", ROOT / ".." / ".." / "shared" / "reference" / "timeloop"]
REF = next((p for p in _REFS if p.is_dir()), _REFS[0])
CON = REF / "constraints" / "eyeriss_like"

PROBLEMS = {
    "a100-sm": lambda: matmul("mm", m=64, n=32, k=48),
    "v100-sm": lambda: matmul("mm", m=48, n=64, k=32),
    "edge-tpu-like": lambda: conv2d("c", c=8, k=16, p=14, q=14, r=3, s=3),
    "eyeriss-like": lambda: conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3),
    "mlu-like": lambda: conv2d("g", c=8, k=8, p=8, q=6, r=3, s=2, stride=(2, 1), dilation=(1, 2), groups=2),
    "nvdla-like": lambda: conv2d("s", c=16, k=32, p=7, q=7, r=3, s=3, stride=2),
    "simba-like": lambda: conv2d("s2", c=8, k=16, p=7, q=7, r=3, s=3, stride=2),
    "systolic": lambda: conv2d("dw", c=16, k=16, p=8, q=8, r=3, s=3, groups=16),
    "tpu-v1-like": lambda: conv2d("c", c=32, k=64, p=7, q=7, r=1, s=1),
}


def _gen(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def assert_space_engines_agree(space: MapSpace, seed: int, n: int = 256) -> None:
    """Every compiled operation of ``space`` against its numpy path, same seeds."""
    sn, sc = space.with_engine("numpy"), space.with_engine("cpu")
    assert not sn.compiled and sc.compiled
    rn, rc = _gen(seed), _gen(seed)
    xn, xc = sn.sample_encoded(n, rn), sc.sample_encoded(n, rc)
    np.testing.assert_array_equal(xn, xc)
    x = xn
    # decode and the check of decoded points (the fast path of `check`)
    bn, bc = sn.decode(x), sc.decode(x)
    assert bn == bc
    cn, cc = sn.check(bn), sc.check(bc)
    np.testing.assert_array_equal(cn.reason, cc.reason)
    np.testing.assert_array_equal(cn.level, cc.level)
    # the fast path agrees with the full check of the same arrays
    full = sn.check(bn.take(np.arange(len(bn))))
    np.testing.assert_array_equal(full.reason, cc.reason)
    # uniform sampling (decoded)
    assert sn.sample(n, rn) == sc.sample(n, rc)
    # neighbour moves, chained a few times (rows move away from the sampled ones)
    yn = yc = x
    for flips in (True, False, True):
        yn, yc = sn.neighbours_encoded(yn, rn, flips=flips), sc.neighbours_encoded(yc, rc, flips=flips)
        np.testing.assert_array_equal(yn, yc)
    assert yn.shape == x.shape and (yn >= 0).all() and (yn < np.maximum(space.bounds, 1)).all()
    nbn, nbc = sn.neighbours(sn.decode(yn), rn), sc.neighbours(sc.decode(yc), rc)
    assert nbn == nbc
    # legal sampling and legalization
    for method in ("reject", "repair", "auto"):
        try:
            vn = sn.sample_valid(32, rn, method=method, max_draws=20_000, allow_fewer=True)
            en = None
        except InfeasibleSpaceError as e:
            vn, en = None, str(e)
        try:
            vc = sc.sample_valid(32, rc, method=method, max_draws=20_000, allow_fewer=True)
            ec = None
        except InfeasibleSpaceError as e:
            vc, ec = None, str(e)
        assert en == ec
        if vn is not None:
            assert vn == vc
            assert sc.check(vc).valid.all()
    np.testing.assert_array_equal(sn.legalize_encoded(x, rn), sc.legalize_encoded(x, rc))
    # both engines drew the same numbers
    assert rn.bit_generator.state == rc.bit_generator.state


@pytest.mark.parametrize("name", sorted(presets()))
def test_every_preset(name: str) -> None:
    arch = preset(name)
    space = MapSpace(PROBLEMS[name](), arch)
    for seed in range(3):
        assert_space_engines_agree(space, seed)


@pytest.mark.parametrize("name", ["eyeriss-like", "simba-like", "nvdla-like"])
def test_imperfect_factorization(name: str) -> None:
    p = conv2d("odd", c=13, k=22, p=7, q=9, r=3, s=3)
    space = MapSpace(p, preset(name), allow_padding=True)
    for seed in range(3):
        assert_space_engines_agree(space, seed)


def test_level_with_more_free_loops_than_the_order_tables() -> None:
    # nine dims: the loop orders of a level are decoded digit by digit (past the m! table)
    dims = tuple(Dim(name=f"D{i}", bound=b) for i, b in enumerate((4, 3, 2, 2, 3, 2, 2, 1, 2)))
    names = [d.name for d in dims]
    tensors = (
        Tensor(name="A", projection=tuple((Term(dim=n),) for n in names[:5]), role=TensorRole.INPUT),
        Tensor(name="B", projection=tuple((Term(dim=n),) for n in names[3:]), role=TensorRole.WEIGHT),
        Tensor(name="C", projection=tuple((Term(dim=n),) for n in names[::2]), role=TensorRole.OUTPUT),
    )
    problem = Problem(name="nine", dims=dims, tensors=tensors)
    arch = Arch(name="two", levels=(StorageLevel(name="DRAM", capacity_words=None),
                                    StorageLevel(name="RF", capacity_words=400, fanout_x=4, fanout_y=2)),
                compute=Compute(energy_per_mac_pj=1.0))
    space = MapSpace(problem, arch)
    assert space._order_untabled  # the case this test is for
    for seed in range(4):
        assert_space_engines_agree(space, seed)


@pytest.mark.skipif(not CON.is_dir(), reason="../shared/reference/timeloop/constraints not present")
@pytest.mark.parametrize("dw", [False, True])
def test_timeloop_eyeriss_constraint_files(dw: bool) -> None:
    from accelmap.mapper.timeloop_constraints import EYERISS_PRESET_LEVEL_MAP, load_timeloop_constraints
    from accelmap.workloads.zoo import layer

    sfx = "_dw" if dw else ""
    problem = layer("mobilenet_v2/block2_1_dw" if dw else "resnet50/res2a_branch2b")
    arch = preset("eyeriss-like")
    c = load_timeloop_constraints([CON / f"arch_constraints{sfx}.yaml", CON / f"map_constraints{sfx}.yaml"],
                                  problem=problem, arch=arch, level_map=EYERISS_PRESET_LEVEL_MAP)
    space = MapSpace(problem, arch, c)
    for seed in range(3):
        assert_space_engines_agree(space, seed, n=512)


def test_zoo_layers_with_padding() -> None:
    from accelmap.workloads.zoo import layer

    for name, arch in (("resnet50/conv3_1", "eyeriss-like"), ("resnet50/conv1", "simba-like")):
        space = MapSpace(layer(name), preset(arch))
        assert_space_engines_agree(space, 7, n=1024)


DIMS = ("M", "N", "K")


@st.composite
def constrained_spaces(draw):  # noqa: ANN001, ANN201
    bounds = [draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 18, 24])) for _ in DIMS]
    n_levels = draw(st.integers(2, 4))
    levels = []
    for i in range(n_levels):
        levels.append(StorageLevel(
            name=f"L{i}",
            capacity_words=None if i == 0 else draw(st.integers(4, 400)),
            fanout_x=1 if i == 0 else draw(st.integers(1, 6)),
            fanout_y=1 if i == 0 else draw(st.integers(1, 4)),
            holds=None if i == 0 else draw(st.sampled_from([None, frozenset({"input"}),
                                                             frozenset({"weight", "output"})])),
        ))
    arch = Arch(name="rand", levels=tuple(levels), compute=Compute(energy_per_mac_pj=1.0))
    names = [lv.name for lv in levels]
    factors, spatial, orders, keep = [], [], [], []
    for _ in range(draw(st.integers(0, 2))):
        factors.append(FactorRule(level=draw(st.sampled_from(names)), dim=draw(st.sampled_from(DIMS)),
                                  slot=Slot.TEMPORAL, max=draw(st.integers(1, 6))))
    if draw(st.booleans()):
        spatial.append(SpatialRule(level=names[-1], x=frozenset(draw(st.sets(st.sampled_from(DIMS))))))
    for lv in draw(st.sets(st.sampled_from(names), max_size=2)):
        perm = draw(st.permutations(DIMS))
        k_out = draw(st.integers(0, 2))
        k_in = draw(st.integers(0, 3 - k_out))
        orders.append(OrderRule(level=lv, outer=tuple(perm[:k_out]), inner=tuple(perm[k_out: k_out + k_in])))
    if draw(st.booleans()):
        keep.append(KeepRule(level=names[-1], tensor="output", keep=draw(st.sampled_from([True, False, None]))))
    util = draw(st.sampled_from([None, 0.1, 0.3]))
    c = Constraints(factors=tuple(factors), spatial=tuple(spatial), orders=tuple(orders), keep=tuple(keep),
                    min_utilization=util)
    problem = Problem(
        name="mm", dims=tuple(Dim(name=n, bound=b) for n, b in zip(DIMS, bounds, strict=True)),
        tensors=(Tensor(name="A", projection=((Term(dim="M"),), (Term(dim="K"),)), role=TensorRole.INPUT),
                 Tensor(name="B", projection=((Term(dim="K"),), (Term(dim="N"),)), role=TensorRole.WEIGHT),
                 Tensor(name="C", projection=((Term(dim="M"),), (Term(dim="N"),)), role=TensorRole.OUTPUT)),
    )
    try:
        return MapSpace(problem, arch, c, allow_padding=draw(st.booleans()))
    except (SpecError, InfeasibleSpaceError):
        assume(False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constrained_spaces(), st.integers(0, 2**32 - 1))
def test_random_constrained_spaces(space: MapSpace, seed: int) -> None:
    assert_space_engines_agree(space, seed, n=128)


def test_engine_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    problem, arch = PROBLEMS["eyeriss-like"](), preset("eyeriss-like")
    monkeypatch.setenv("ACCELMAP_KERNELS", "numpy")
    assert MapSpace(problem, arch).engine == "numpy"
    assert MapSpace(problem, arch, engine="cpu").engine == "cpu"
    monkeypatch.delenv("ACCELMAP_KERNELS")
    assert MapSpace(problem, arch).engine == "cpu"
    monkeypatch.setenv("ACCELMAP_KERNELS", "fortran")
    with pytest.raises(SpecError, match="ACCELMAP_KERNELS: unknown engine 'fortran'"):
        MapSpace(problem, arch)
    with pytest.raises(SpecError, match="engine argument: unknown engine 'gpu'"):
        MapSpace(problem, arch, engine="gpu")


def test_out_of_box_vectors_raise_the_same_error_on_both_engines() -> None:
    space = MapSpace(PROBLEMS["eyeriss-like"](), preset("eyeriss-like"))
    rng = _gen(3)
    for row, col, value in ((3, 0, -1), (7, 2, 10**6), (0, space.n_params - 1, int(space.bounds[-1]))):
        x = space.sample_encoded(10, rng)
        x[row, col] = value
        messages = []
        for engine in ("numpy", "cpu"):
            with pytest.raises(SpecError, match=rf"encoded vector row {row}: ") as err:
                space.with_engine(engine).neighbours_encoded(x, rng)
            messages.append(str(err.value))
        assert messages[0] == messages[1]
