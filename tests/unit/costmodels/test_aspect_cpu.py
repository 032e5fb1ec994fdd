"""The aspect rows compiled per structure (`accelmap.costmodels._aspect_cpu`) equal the generic
driver and the numpy path, and `AspectModel` serves the generic driver until it switches."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.presets import preset
from accelmap.costmodels import _aspect_cpu, _aspect_kernel
from accelmap.costmodels.aspect import AspectModel, aspect_constraints
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.costmodel_checks import assert_engines_agree
from accelmap.testing.examples import aspect_batch
from accelmap.workloads.builders import conv2d, matmul


def _small_l1_arch():  # noqa: ANN202
    """Two per-PE levels (MAESTRO's L1 over both), a 4 x 2 array, small capacities."""
    from accelmap.arch.spec import Arch, Compute, StorageLevel

    return Arch(name="split", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=8, read_energy_pj=50.0,
                     write_energy_pj=60.0),
        StorageLevel(name="L2", capacity_words=4000, read_bandwidth_words_per_cycle=4, fanout_x=4, fanout_y=2,
                     read_energy_pj=5.0, write_energy_pj=6.0),
        StorageLevel(name="W", capacity_words=300, read_energy_pj=0.5, write_energy_pj=0.7,
                     holds=frozenset({"weight"})),
        StorageLevel(name="RF", capacity_words=300, read_energy_pj=1.0, write_energy_pj=1.5)),
        compute=Compute(energy_per_mac_pj=1.0))


# several structures: problem kinds (conv, strided conv, depthwise, GEMM, batched conv), presets
# with different levels, array shapes and bandwidths
CASES = {
    "conv/eyeriss-like": (lambda: conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3), lambda: preset("eyeriss-like")),
    "strided/edge-tpu-like": (lambda: conv2d("s2", c=8, k=16, p=7, q=7, r=3, s=3, stride=2),
                              lambda: preset("edge-tpu-like")),
    "depthwise/systolic": (lambda: conv2d("dw", c=16, k=16, p=8, q=8, r=3, s=3, groups=16), lambda: preset("systolic")),
    "gemm/tpu-v1-like": (lambda: matmul("mm", m=64, n=32, k=48), lambda: preset("tpu-v1-like")),
    "batched/split-l1": (lambda: conv2d("b", c=6, k=8, p=6, q=10, r=3, s=1, n=2), _small_l1_arch),
}


def _damage(batch: MappingBatch, rng: np.random.Generator) -> MappingBatch:
    """Illegal variants: a factor 0 or doubled, a repeated dim in an order, a keep flag
    flipped, a spatial factor past the fanout, a huge factor."""
    t, s, o, k = (np.array(x) for x in (batch.temporal, batch.spatial, batch.order, batch.keep))
    n, L, D = t.shape
    for i in range(n):
        kind, lv, d = int(rng.integers(6)), int(rng.integers(L)), int(rng.integers(D))
        if kind == 0:
            t[i, lv, d] = int(rng.choice([0, 2 * max(t[i, lv, d], 1)]))
        elif kind == 1:
            o[i, lv, 0] = o[i, lv, D - 1]
        elif kind == 2:
            k[i, lv, int(rng.integers(k.shape[2]))] ^= True
        elif kind == 3:
            s[i, lv, d, int(rng.integers(2))] *= 1000
        elif kind == 4:
            t[i, lv, d] = 2 ** 40
        # (kind 5: the row left as it was)
    return MappingBatch(temporal=t, spatial=s, order=o, keep=k)


def _rows(problem, arch, rng: np.random.Generator) -> MappingBatch:  # noqa: ANN001
    """Random directive-form mappings (edge tiles among them), the same damaged, and MapSpace
    samples under `aspect_constraints` (mostly rejected by the checks)."""
    rand = aspect_batch(problem, arch, 300, rng)
    space = MapSpace(problem, arch, aspect_constraints(problem, arch))
    return MappingBatch.concat([rand, _damage(rand, rng), space.sample(300, rng)])


# One structure in the default run (its driver's cold compile: under a minute on a 2-core
# machine), the others marked slow.
_DEFAULT_CASE = "conv/eyeriss-like"


@pytest.mark.parametrize("case", [c if c == _DEFAULT_CASE else pytest.param(c, marks=pytest.mark.slow)
                                  for c in sorted(CASES)])
def test_specialised_rows_equal_generic_and_numpy(case: str) -> None:
    """Bit for bit: counts, cycles, MACs and reason codes of the structure's driver equal the
    generic driver's, and the model's `Metrics` with it equal the numpy path's (energies
    1e-12). Compiles one driver per structure (cold: tens of seconds each)."""
    problem, arch = CASES[case][0](), CASES[case][1]()
    batch = _rows(problem, arch, np.random.default_rng(7))
    consts = _aspect_kernel.aspect_consts(problem, arch)
    rows = _aspect_cpu.compiled(_aspect_cpu.structure(consts), block=True)
    assert rows is not None
    args = (batch.temporal, batch.spatial, batch.order, batch.keep)
    out_g, codes_g = _aspect_kernel.evaluate_rows(consts, *args)
    out_s, codes_s = _aspect_kernel.evaluate_rows(consts, *args, rows)
    assert np.array_equal(out_g, out_s)
    assert np.array_equal(codes_g, codes_s)
    assert (codes_g[:, 0] == 0).any()  # some rows evaluated, not only rejected
    # blocks of rows on two threads (`engines.run_blocks`), each block on the driver's own stack
    big = MappingBatch.concat([batch] * (1 + _aspect_kernel._PARALLEL_MIN_ROWS // len(batch)))
    saved_threads = _aspect_kernel._threads
    try:
        _aspect_kernel._threads = lambda: 2
        out_t, codes_t = _aspect_kernel.evaluate_rows(consts, big.temporal, big.spatial, big.order, big.keep, rows)
    finally:
        _aspect_kernel._threads = saved_threads
    reps = len(big) // len(batch)
    assert np.array_equal(out_t, np.concatenate([out_g] * reps)) and np.array_equal(codes_t, np.concatenate([codes_g] * reps))

    model = AspectModel(engine="cpu")
    model.evaluate(problem, arch, batch)  # (rows seen below the threshold: the generic driver)
    saved = _aspect_cpu.SPECIALISE_AFTER_ROWS
    try:
        _aspect_cpu.SPECIALISE_AFTER_ROWS = 0
        got = model.evaluate(problem, arch, batch)
    finally:
        _aspect_cpu.SPECIALISE_AFTER_ROWS = saved
    ref = AspectModel(engine="numpy").evaluate(problem, arch, batch)
    assert_engines_agree(got, ref, what=f"{case} specialised")


def test_structure_leaves_out_the_layers_values() -> None:
    """Layers of one shape and stride pattern on one arch share a structure (their bounds,
    extents and MACs are run-time values); another stride, kind or arch does not."""
    arch = preset("eyeriss-like")

    def s(problem, a=arch) -> tuple:  # noqa: ANN001
        return _aspect_cpu.structure(_aspect_kernel.aspect_consts(problem, a))

    base = s(conv2d("a", c=16, k=16, p=14, q=14, r=3, s=3))
    assert s(conv2d("b", c=64, k=32, p=28, q=7, r=3, s=3)) == base
    assert s(conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3, stride=2)) != base
    assert s(matmul("m", m=64, n=32, k=48)) != base
    assert s(conv2d("a", c=16, k=16, p=14, q=14, r=3, s=3), preset("systolic")) != base


def test_model_serves_the_generic_driver_until_the_threshold(monkeypatch) -> None:  # noqa: ANN001
    """Below `SPECIALISE_AFTER_ROWS` rows of a (problem, arch) no specialised driver is asked
    for; from there on it is, and while it is not ready (None) the generic driver serves the
    same rows."""
    asked: list[tuple] = []

    def fake(S: tuple, *, block: bool = False) -> None:  # noqa: ARG001
        asked.append(S)

    monkeypatch.setattr(_aspect_cpu, "compiled", fake)
    monkeypatch.setattr(_aspect_cpu, "SPECIALISE_AFTER_ROWS", 100)
    problem, arch = conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3), preset("eyeriss-like")
    batch = aspect_batch(problem, arch, 60, np.random.default_rng(1))
    model = AspectModel(engine="cpu")
    first = model.evaluate(problem, arch, batch)
    assert asked == []
    second = model.evaluate(problem, arch, batch)  # 120 rows seen
    assert len(asked) == 1 and asked[0] == _aspect_cpu.structure(_aspect_kernel.aspect_consts(problem, arch))
    assert np.array_equal(first.cycles, second.cycles) and np.array_equal(first.reason, second.reason)
