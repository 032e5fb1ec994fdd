"""Property: loopnest's batched path equals its scalar reference exactly on random mappings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap.arch.timeloop import arch_from_timeloop
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.mapping import MappingBatch
from accelmap.testing.costmodel_checks import assert_engines_agree, assert_metrics_equal
from accelmap.testing.examples import small_arch, small_conv
from accelmap.workloads.builders import conv2d, matmul
from accelmap.workloads.problem import Problem

DATA = Path(__file__).resolve().parents[1] / "golden" / "data" / "timeloop"


def _split(bound: int, slots: int, rng: np.random.Generator) -> list[int]:
    """A random ordered factorization of ``bound`` into ``slots`` factors."""
    out = [1] * slots
    n, p = bound, 2
    while n > 1:
        while n % p:
            p += 1
        n //= p
        out[int(rng.integers(slots))] *= p
    return out


def random_batch(problem: Problem, arch, n: int, rng: np.random.Generator) -> MappingBatch:
    """Random mappings: every dim's bound spread over (temporal, X, Y) slots of every level
    (X/Y only where the level fans out), random loop orders, random bypass (outermost keeps
    all). Some exceed capacity or fanout, so invalid rows are exercised too."""
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    temporal = np.ones((n, L, D), np.int64)
    spatial = np.ones((n, L, D, 2), np.int64)
    slots = [(lv, k) for lv in range(L) for k in range(3)
             if k == 0 or (k == 1 and arch.levels[lv].fanout_x > 1) or (k == 2 and arch.levels[lv].fanout_y > 1)]
    for i in range(n):
        for d, b in enumerate(problem.bounds.tolist()):
            for (lv, k), f in zip(slots, _split(b, len(slots), rng), strict=True):
                if k == 0:
                    temporal[i, lv, d] = f
                else:
                    spatial[i, lv, d, k - 1] = f
    order = np.argsort(rng.random((n, L, D)), axis=2)
    keep = rng.random((n, L, T)) < 0.6
    keep[:, 0] = True
    return MappingBatch(temporal=temporal, spatial=spatial, order=order, keep=keep)


def _eyeriss():
    arch = yaml.safe_load((DATA / "eyeriss_like" / "arch.yaml").read_text())
    ert = yaml.safe_load((DATA / "eyeriss_like" / "ERT.yaml").read_text())
    return arch_from_timeloop(arch, "eyeriss_like/arch.yaml", ert)


CASES = {
    "small-conv": lambda: (small_conv(), small_arch(glb_words=10**6, rf_words=10**4)),
    "strided-conv": lambda: (small_conv(k=4, c=2, p=4, q=6, r=3, s=2, stride=2), small_arch(glb_words=10**6, rf_words=10**4)),
    "eyeriss-like": lambda: (small_conv(k=8, c=6, p=4, q=4, r=3, s=3), _eyeriss()),
    "matmul": lambda: (matmul("mm", m=12, n=8, k=18), small_arch(glb_words=10**6, rf_words=10**4)),
    "dilated-grouped": lambda: (conv2d("g", c=8, k=8, p=4, q=3, r=3, s=2, stride=(2, 1), dilation=(1, 2), groups=2),
                                small_arch(glb_words=10**6, rf_words=10**4)),
    "depthwise": lambda: (conv2d("dw", c=6, k=6, p=6, q=4, r=3, s=3, groups=6), small_arch(glb_words=10**6, rf_words=10**4)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_batched_equals_scalar(case: str, seed: int) -> None:
    problem, arch = CASES[case]()
    batch = random_batch(problem, arch, 24, np.random.default_rng(seed))
    model = LoopNestModel()
    m = model.evaluate(problem, arch, batch)
    for i in range(len(batch)):
        assert_metrics_equal(m.take(slice(i, i + 1)), model.evaluate_one(problem, arch, batch[i]), what=f"row {i}")


def test_batched_equals_scalar_on_mapspace_samples() -> None:
    space_mod = pytest.importorskip("accelmap.mapper.space")
    problem, arch = small_conv(), small_arch(glb_words=10**6, rf_words=10**4)
    batch = space_mod.MapSpace(problem, arch).sample(40, np.random.default_rng(7))
    model = LoopNestModel()
    m = model.evaluate(problem, arch, batch)
    assert m.valid.any()
    for i in range(len(batch)):
        assert_metrics_equal(m.take(slice(i, i + 1)), model.evaluate_one(problem, arch, batch[i]), what=f"row {i}")


def test_physics_on_random_mappings() -> None:
    """Accesses never below compulsory traffic; energy at least MACs x MAC energy."""
    problem, arch = small_conv(), small_arch(glb_words=10**6, rf_words=10**4)
    batch = random_batch(problem, arch, 200, np.random.default_rng(3))
    m = LoopNestModel().evaluate(problem, arch, batch)
    ok = m.valid
    assert ok.sum() > 20
    sizes = problem.tensor_sizes()
    out = problem.output_index
    for t in range(problem.n_tensors):
        if t == out:
            assert (m.updates[ok, 0, t] >= sizes[t]).all()
        else:
            assert (m.reads[ok, 0, t] >= sizes[t]).all()
    assert (m.energy_pj[ok] >= problem.macs * arch.compute.energy_per_mac_pj).all()
    assert (m.cycles[ok] >= problem.macs / arch.n_macs).all()


@pytest.mark.parametrize("case", ["small-conv", "strided-conv", "matmul", "dilated-grouped"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_batched_equals_scalar_on_padded_mappings(case: str, seed: int) -> None:
    """Imperfect factorization: rows whose factors multiply past the bounds (each row its
    own padded bound vector, some exact) agree between the numpy path, the cpu kernel and
    the scalar reference, and equal the same rows evaluated on the padded problem."""
    problem, arch = CASES[case]()
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(12):
        padded = problem.padded_iteration(problem.bounds + rng.integers(0, 3, problem.n_dims) * (problem.bounds > 1))
        parts.append((padded, random_batch(padded, arch, 2, rng)))
    batch = MappingBatch.concat([b for _, b in parts])
    ref = LoopNestModel(engine="numpy").evaluate(problem, arch, batch)
    assert_engines_agree(LoopNestModel(engine="cpu").evaluate(problem, arch, batch), ref, what=f"{case} cpu")
    scalar = LoopNestModel(engine="numpy")
    for i in range(len(batch)):
        assert_engines_agree(scalar.evaluate_one(problem, arch, batch[i]), ref.take(np.array([i])),
                             what=f"{case} scalar row {i}")
        padded = parts[i // 2][0]
        on_padded = scalar.evaluate(padded, arch, batch.take(np.array([i])))
        for f in ("cycles", "energy_pj", "valid", "reads", "fills", "updates"):
            assert np.array_equal(getattr(on_padded, f), getattr(ref, f)[i:i + 1]), (case, i, f)
