"""Imperfect factorization in the loopnest model: a mapping whose factors multiply past a
bound is the same mapping of the padded iteration space (`Problem.padded_iteration`), on
every path (numpy, scalar, CPU kernel), and exact mappings are untouched."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels import _loopnest_kernel
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.errors import SpecError
from accelmap.mapper.check import Reason
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.costmodel_checks import assert_engines_agree
from accelmap.workloads.builders import conv2d, matmul


def arch8() -> Arch:
    return Arch(name="tiny8", compute=Compute(energy_per_mac_pj=1.0), levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100.0, write_energy_pj=120.0, block_words=2),
        StorageLevel(name="GLB", capacity_words=256, read_energy_pj=5.0, write_energy_pj=6.0, fanout_x=4,
                     fanout_y=2),
        StorageLevel(name="RF", capacity_words=16, read_energy_pj=0.5, write_energy_pj=0.6)))


PROBLEMS = {
    "conv": lambda: conv2d("c", n=1, k=5, c=3, p=7, q=6, r=3, s=3),
    "conv-strided-padded": lambda: conv2d("cs", n=1, k=3, c=2, p=5, q=5, r=3, s=3, stride=2, padding=1,
                                         input_hw=(9, 9)),
    "gemm": lambda: matmul("g", m=13, n=7, k=3),
}


def _padded_batch(problem, n: int = 600, seed: int = 0) -> MappingBatch:
    space = MapSpace(problem, arch8(), allow_padding=True)
    rng = np.random.default_rng(seed)
    batch = MappingBatch.concat([space.sample_valid(n // 2, rng), space.sample(n - n // 2, rng)])
    prod = batch.temporal.prod(axis=1) * batch.spatial.prod(axis=(1, 3))
    assert (prod != problem.bounds).any(axis=1).sum() > n // 4  # mostly padded rows
    return batch


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_padded_mapping_is_the_mapping_of_the_padded_iteration_space(name) -> None:
    problem, arch = PROBLEMS[name](), arch8()
    batch = _padded_batch(problem)
    model = LoopNestModel(engine="numpy")
    m = model.evaluate(problem, arch, batch)
    assert m.valid.any() and m.macs == problem.macs
    prod = batch.temporal.prod(axis=1) * batch.spatial.prod(axis=(1, 3))
    for i in np.flatnonzero(m.valid & (prod != problem.bounds).any(axis=1))[:40]:
        hand = problem.padded_iteration(tuple(int(v) for v in prod[i]))  # P' built by hand
        one = model.evaluate(hand, arch, batch.take(np.array([i])))
        assert one.valid[0]
        for f in ("cycles", "energy_pj", "compute_energy_pj", "reads", "fills", "updates", "energy_breakdown_pj"):
            assert np.array_equal(getattr(one, f)[0], getattr(m, f)[i]), f
        assert one.compute_energy_pj[0] == hand.macs * 1.0  # the padded MACs are executed
        assert m.utilization[i] == pytest.approx(problem.macs / (arch.n_macs * m.cycles[i]), rel=1e-15)


#: the layers whose padded batches also run the driver specialised per structure by default
#: (each structure costs a cold compile of 10-20 s on CI); the others run it under ``-m slow``
SPECIALISED_PADDED = ("conv-strided-padded",)


@pytest.mark.parametrize("name,specialised", [(n, n in SPECIALISED_PADDED) for n in sorted(PROBLEMS)]
                         + [pytest.param(n, True, marks=pytest.mark.slow, id=f"{n}-specialised")
                            for n in sorted(PROBLEMS) if n not in SPECIALISED_PADDED])
def test_numpy_scalar_and_kernel_agree_on_padded_batches(name, specialised) -> None:
    problem, arch = PROBLEMS[name](), arch8()
    batch = _padded_batch(problem, seed=1)
    ref = LoopNestModel(engine="numpy").evaluate(problem, arch, batch)
    cpu = LoopNestModel(engine="cpu")
    before = _loopnest_kernel._SPECIALISE_AFTER_ROWS
    try:
        # the generic driver, then the one specialised per structure
        for after in ((1 << 62, 0) if specialised else (1 << 62,)):
            _loopnest_kernel._SPECIALISE_AFTER_ROWS = after
            got = cpu.evaluate(problem, arch, batch)
            assert_engines_agree(got, ref, what=f"{name} padded (after {after})")
            obj = cpu.evaluate_objective(problem, arch, batch)
            for f in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
                assert np.array_equal(getattr(obj, f), getattr(got, f)), f
    finally:
        _loopnest_kernel._SPECIALISE_AFTER_ROWS = before
    scalar = LoopNestModel(engine="numpy")
    for i in range(0, len(batch), 7):
        one = scalar.evaluate_one(problem, arch, batch[i])
        assert_engines_agree(one, ref.take(np.array([i])), what=f"{name} scalar row {i}")


def test_exact_rows_are_bit_identical_in_a_mixed_batch() -> None:
    problem, arch = PROBLEMS["conv"](), arch8()
    padded = _padded_batch(problem, seed=2)
    exact = MapSpace(problem, arch).sample(300, np.random.default_rng(3))
    mixed = MappingBatch.concat([padded, exact])
    for engine in ("numpy", "cpu"):
        alone = LoopNestModel(engine=engine).evaluate(problem, arch, exact)
        both = LoopNestModel(engine=engine).evaluate(problem, arch, mixed).take(np.arange(len(padded), len(mixed)))
        for f in ("cycles", "energy_pj", "compute_energy_pj", "utilization", "valid", "reason", "reason_level",
                  "reads", "fills", "updates", "energy_breakdown_pj", "multicast", "spatial_reductions"):
            assert np.array_equal(getattr(alone, f), getattr(both, f)), (engine, f)


def test_factors_below_a_bound_stay_illegal() -> None:
    problem, arch = PROBLEMS["gemm"](), arch8()
    batch = _padded_batch(problem, seed=4)
    t = batch.temporal.copy()
    t[:, 0, 0] = 1  # M's DRAM factor 1: most rows no longer cover M
    t[:, 0, 1] = np.maximum(t[:, 0, 1], 2)  # and N covered past its bound
    short = MappingBatch(temporal=t, spatial=batch.spatial, order=batch.order, keep=batch.keep)
    prod = short.temporal.prod(axis=1) * short.spatial.prod(axis=(1, 3))
    under = (prod < problem.bounds).any(axis=1)
    assert under.any()
    for engine in ("numpy", "cpu"):
        m = LoopNestModel(engine=engine).evaluate(problem, arch, short)
        assert not m.valid[under].any() and (m.reason[under] == int(Reason.FACTORS)).all()


def test_padding_pays_on_an_array_that_a_prime_bound_cannot_fill() -> None:
    """M = 7 on a 4 x 2 array: no exact factorization unrolls M, a padded one unrolls 8."""
    problem, arch = matmul("g", m=7, n=1, k=2), arch8()
    t = np.ones((1, 3, 3), dtype=np.int64)
    t[0, 2, 2] = 2  # K at the RF
    s = np.ones((1, 3, 3, 2), dtype=np.int64)
    s[0, 1, 0] = [4, 2]  # M = 8 over the 4 x 2 PEs
    order = np.broadcast_to(np.arange(3), (1, 3, 3)).copy()
    keep = np.ones((1, 3, 3), dtype=bool)
    m = LoopNestModel().evaluate(problem, arch, MappingBatch(temporal=t, spatial=s, order=order, keep=keep))
    assert m.valid[0] and m.cycles[0] == 2  # K steps only: all 7 (8) rows at once
    assert m.utilization[0] == pytest.approx(14 / (8 * 2))
    assert m.compute_energy_pj[0] == 16.0  # 8 x 1 x 2 padded MACs


def test_cuda_engine_refuses_padded_rows() -> None:
    model = LoopNestModel(engine="numpy")
    model.engine = "cuda"  # the refusal comes before any device work
    problem = PROBLEMS["gemm"]()
    with pytest.raises(SpecError, match="cuda engine evaluates mappings whose factors multiply out"):
        model.evaluate(problem, arch8(), _padded_batch(problem, n=40))


def test_objective_of_many_groups_equals_evaluate() -> None:
    """The cpu engine's objective path builds every group's constants at once (`Problem.
    padded_fractions`); a row that pads a bound of 1 (a new kernel structure) takes its own."""
    problem, arch = PROBLEMS["conv-strided-padded"](), arch8()
    batch = _padded_batch(problem, n=400, seed=5)
    t = batch.temporal.copy()
    t[::9, 0, 0] = 2  # N (bound 1) padded to 2 at DRAM
    batch = MappingBatch(temporal=t, spatial=batch.spatial, order=batch.order, keep=batch.keep)
    model = LoopNestModel(engine="cpu")
    full = model.evaluate(problem, arch, batch)
    obj = model.evaluate_objective(problem, arch, batch)
    assert full.valid[::9].any()
    for f in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
        assert np.array_equal(getattr(obj, f), getattr(full, f)), f
    keys = np.unique(batch.temporal.prod(axis=1) * batch.spatial.prod(axis=(1, 3)), axis=0)
    keys = keys[(keys >= problem.bounds).all(axis=1)]
    got = problem.padded_fractions(keys)
    for g, key in enumerate(keys):
        assert np.array_equal(got[g], problem.padded_iteration(key).existing_fraction())
