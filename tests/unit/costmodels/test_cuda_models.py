"""The systolic and aspect models' cuda engines under numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``, in a subprocess so that the rest of the suite keeps the real
numba.cuda): the GPU rows give the numpy path's `Metrics` (and, for systolic, its
`SystolicStats`) on random, sampled and damaged mappings, walked DRAM counts included.
The same script runs on a real GPU through the device tool (docs/performance.md)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
HAVE_NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None

SCRIPT = textwrap.dedent("""
    import numpy as np
    from accelmap.arch.presets import preset
    from accelmap.workloads.builders import conv2d, matmul
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.mapper.space import MapSpace
    from accelmap.costmodels import _systolic_cuda
    from accelmap.costmodels.aspect import AspectModel, aspect_constraints
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.testing.costmodel_checks import assert_engines_agree
    from accelmap.testing.examples import aspect_batch, damaged_batch as damage

    # the walked DRAM counts a pass misses: walked on the host, the rows run again on the device
    passes = []
    run = _systolic_cuda.run
    def spy(*args, **kw):
        got = run(*args, **kw)
        passes.append((len(args[3][0]), int((got["missing"] != 0).sum())))
        return got
    _systolic_cuda.run = spy

    for name, problem in (("systolic", conv2d("c", c=8, k=8, p=6, q=6, r=3, s=3, word_bits=8)),
                          ("systolic", matmul("mm", m=16, n=8, k=12, word_bits=8)),
                          ("systolic", conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)),
                          ("tpu-v1-like", conv2d("s", c=8, k=16, p=5, q=5, r=3, s=3, stride=2, word_bits=8))):
        arch = preset(name)
        rng = np.random.default_rng(1)
        sp = MapSpace(problem, arch)
        good = sp.sample_valid(12, rng)
        batch = MappingBatch.concat([sp.sample(12, rng), good, damage(good, rng)])
        model = SystolicModel(engine="cuda")
        got = model.evaluate(problem, arch, batch)
        assert_engines_agree(got, SystolicModel(engine="numpy").evaluate(problem, arch, batch), what=problem.name)
        assert got.valid.any() and not got.valid.all()
        obj = model.evaluate_objective(problem, arch, batch)
        assert np.array_equal(obj.cycles, got.cycles) and np.array_equal(obj.energy_pj, got.energy_pj)
        s1, s2 = model.stats(problem, arch, batch), SystolicModel(engine="numpy").stats(problem, arch, batch)
        for f in s1.__dataclass_fields__:
            a, b = getattr(s1, f), getattr(s2, f)
            assert a.dtype == b.dtype and (np.array_equal(a, b) or np.allclose(a, b, rtol=1e-12, atol=0)), f
        empty = model.evaluate(problem, arch, batch.take(slice(0, 0)))
        assert len(empty.cycles) == 0
    assert any(m > 0 for _, m in passes), passes  # (CB2a_2: a fold shape walked)

    cases = [("eyeriss-like", conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3)),
             ("eyeriss-like", matmul("mm", m=64, n=32, k=48))]
    for name, problem in cases:
        arch = preset(name)
        rng = np.random.default_rng(2)
        rand = aspect_batch(problem, arch, 24, rng)
        sp = MapSpace(problem, arch, aspect_constraints(problem, arch))
        batch = MappingBatch.concat([rand, damage(rand, rng), sp.sample(8, rng)])
        got = AspectModel(engine="cuda").evaluate(problem, arch, batch)
        assert_engines_agree(got, AspectModel(engine="numpy").evaluate(problem, arch, batch), what=name)
        assert got.valid.any() and not got.valid.all(), name
    # one kernel a model for problems of 3 and 7 dims (its scratch sized for `_cuda.LOCAL_DIMS`):
    # compiled once a machine, not once a dim count
    from accelmap.costmodels import _aspect_cuda
    assert _systolic_cuda._kernel.cache_info().currsize == 1, _systolic_cuda._kernel.cache_info()
    assert _aspect_cuda._kernel.cache_info().currsize == 1, _aspect_cuda._kernel.cache_info()
    print("SIM-OK")
""")


@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda is not installed (the cuda extra)")
def test_systolic_and_aspect_cuda_engines_under_the_simulator() -> None:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0 and "SIM-OK" in res.stdout, res.stderr[-3000:]


def test_fmod_of_the_rules_is_cs_fmod_where_the_quotient_is_not_exact() -> None:
    """`_systolic_kernel._int_fmod` past its exact-quotient shortcut calls `fmod` (``np.fmod``
    on the CPU, ``math.fmod`` on CUDA): C's fmod, exact, on the values that reach it."""
    from accelmap.costmodels._systolic_kernel import _int_fmod

    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.integers(2 ** 51, 2 ** 62, 200).astype(float), [2.0 ** 53, 2.0 ** 60 + 2 ** 9]])
    ys = np.concatenate([rng.integers(1, 2 ** 20, 200).astype(float), [3.0, 7.5]])
    for x, y in zip(xs, ys, strict=True):
        assert _int_fmod(x, np.floor(x / y), y) == np.fmod(x, y)


def test_device_function_is_the_function_itself_off_the_simulator() -> None:
    """On a GPU a kernel calls the CPU dispatcher (numba-cuda compiles its source); the
    simulator's Python twin is made only under the simulator."""
    from numba import config

    from accelmap.costmodels import _cuda, _systolic_kernel

    if config.ENABLE_CUDASIM:
        pytest.skip("this process runs the simulator")
    assert _cuda.device_function(_systolic_kernel._eval_rows) is _systolic_kernel._eval_rows


def test_python_twin_names_twins_of_the_rules_it_calls() -> None:
    """The simulator's twin of a dispatcher is plain Python, and the rules it calls are twins
    too (none a dispatcher, which the simulator's fake arrays cannot enter), giving the same
    values."""
    import types

    from numba.core.dispatcher import Dispatcher

    from accelmap.costmodels import _cuda, _systolic_kernel

    twin = _cuda._python_twin(_systolic_kernel._int_fmod, {})
    assert isinstance(twin, types.FunctionType) and not isinstance(twin, Dispatcher)
    assert not isinstance(twin.__globals__["fmod"], Dispatcher)
    assert twin(2.0 ** 60, np.floor(2.0 ** 60 / 7.0), 7.0) == np.fmod(2.0 ** 60, 7.0)
    row = _cuda._python_twin(_systolic_kernel._row, {})
    assert isinstance(row.__globals__["_check_padded"], types.FunctionType)
    assert isinstance(row.__globals__["_unrolled_classes"], types.FunctionType)
    assert row.__globals__["_unrolled_classes"] is not _systolic_kernel._unrolled_classes
