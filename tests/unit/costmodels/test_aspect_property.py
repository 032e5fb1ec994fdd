"""Property tests of the aspect model: the batched paths (numpy and compiled) equal the scalar reference
(`evaluate_one`, the directive analysis) row by row, exactly, on random problems, arrays and
mappings; and batch invariance."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.aspect import AspectModel
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.testing.costmodel_checks import assert_metrics_equal
from accelmap.workloads.builders import conv2d, fully_connected, matmul


def _arch(x: int, y: int, noc: int, off: int) -> Arch:
    return Arch(
        name="p",
        levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=off, read_energy_pj=50.0),
            StorageLevel(name="L2", capacity_words=10**7, read_bandwidth_words_per_cycle=noc,
                         fanout_x=x, fanout_y=y, read_energy_pj=5.0, write_energy_pj=5.0),
            StorageLevel(name="L1", capacity_words=10**6, read_energy_pj=1.0, write_energy_pj=1.0),
        ),
        compute=Compute(energy_per_mac_pj=1.0),
    )


@st.composite
def problems(draw):
    kind = draw(st.sampled_from(["conv", "dw", "mm", "fc"]))
    if kind == "fc":
        return fully_connected("fc", n=draw(st.sampled_from([1, 2, 4])), c=draw(st.sampled_from([4, 6, 8])),
                               k=draw(st.sampled_from([2, 4, 8])))
    if kind == "mm":
        return matmul("mm", m=draw(st.sampled_from([4, 6, 8, 12])), n=draw(st.sampled_from([2, 4, 6])),
                      k=draw(st.sampled_from([2, 3, 4])))
    c = draw(st.sampled_from([2, 3, 4, 6]))
    r = draw(st.sampled_from([1, 2, 3]))
    stride = draw(st.sampled_from([1, 1, 2]))
    p, q = draw(st.sampled_from([2, 3, 4, 6])), draw(st.sampled_from([2, 4]))
    n = draw(st.sampled_from([1, 1, 2]))
    if kind == "dw":
        return conv2d("dw", c=c, k=c, p=p, q=q, r=r, s=r, stride=stride, groups=c, n=n)
    return conv2d("cv", c=c, k=draw(st.sampled_from([2, 4, 8])), p=p, q=q, r=r, s=draw(st.sampled_from([1, 3])),
                  stride=stride, n=n)


def _divs(b: int) -> list[int]:
    return [d for d in range(1, b + 1) if b % d == 0]


@st.composite
def cases(draw):
    prob = draw(problems())
    x, y = draw(st.sampled_from([(1, 4), (2, 2), (4, 1), (2, 4), (4, 4), (1, 1)]))
    arch = _arch(x, y, draw(st.sampled_from([1, 4, 1000])), draw(st.sampled_from([1, 8, 50])))
    L, D = arch.n_levels, prob.n_dims
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        t = np.ones((L, D), np.int64)
        s = np.ones((L, D, 2), np.int64)
        rem = prob.bounds.copy()
        for ax, fan in ((0, x), (1, y)):
            d = draw(st.integers(0, D - 1))
            f = draw(st.sampled_from([v for v in _divs(int(rem[d])) if v <= fan]))
            s[1, d, ax] = f
            rem[d] //= f
        for d in range(D):
            r = int(rem[d])
            for lv in range(L - 1):
                f = draw(st.sampled_from(_divs(r)))
                t[lv, d] = f
                r //= f
            t[L - 1, d] = r
        order = np.stack([np.array(draw(st.permutations(list(range(D))))) for _ in range(L)])
        rows.append(Mapping(temporal=t, spatial=s, order=order, keep=np.ones((L, prob.n_tensors), bool)))
    return prob, arch, MappingBatch.from_mappings(rows)


@pytest.mark.parametrize("engine", ["numpy", "cpu"])
@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_batched_equals_scalar_reference(engine, case) -> None:
    """Both batched engines (numpy closed forms, compiled kernel) equal the scalar analysis."""
    prob, arch, batch = case
    model = AspectModel(engine=engine)
    got = model.evaluate(prob, arch, batch)
    for i in range(len(batch)):
        assert_metrics_equal(got.take([i]), model.evaluate_one(prob, arch, batch[i]), what=f"row {i}")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.randoms(use_true_random=False))
def test_batch_invariance(case, rnd) -> None:
    prob, arch, batch = case
    model = AspectModel()
    full = model.evaluate(prob, arch, batch)
    perm = np.array(rnd.sample(range(len(batch)), len(batch)))
    assert_metrics_equal(model.evaluate(prob, arch, batch.take(perm)), full.take(perm), what="permuted")
