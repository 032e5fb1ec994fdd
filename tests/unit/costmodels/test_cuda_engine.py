"""The cuda engine under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, in a subprocess
so that the rest of the suite keeps the real numba.cuda): the GPU kernel gives the CPU
kernel's `Metrics`, the device searches return legal best rows whose EDP the CPU confirms,
and ``search(device="cuda")`` returns a `SearchResult`. Without a GPU, asking for the device
is a clear error."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
HAVE_NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None

SCRIPT = textwrap.dedent("""
    import numpy as np
    from accelmap.arch.presets import preset
    from accelmap.workloads.builders import conv2d, matmul
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.mapper.space import MapSpace
    from accelmap.costmodels import _cuda
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.testing.costmodel_checks import assert_engines_agree
    from accelmap.search.api import search

    cases = [("eyeriss-like", conv2d("c", c=8, k=8, p=6, q=6, r=3, s=3)),
             ("simba-like", conv2d("s", c=8, k=16, p=4, q=4, r=3, s=3, stride=2)),
             ("a100-sm", matmul("mm", m=16, n=8, k=12))]
    for name, problem in cases:
        arch = preset(name)
        rng = np.random.default_rng(1)
        sp = MapSpace(problem, arch)
        batch = MappingBatch.concat([sp.sample(24, rng), sp.sample_valid(8, rng)])
        got = LoopNestModel(engine="cuda").evaluate(problem, arch, batch)
        assert_engines_agree(got, LoopNestModel(engine="numpy").evaluate(problem, arch, batch), what=name)
        assert got.valid.any() and not got.valid.all()
    problem, arch = cases[0][1], preset(cases[0][0])
    cpu = LoopNestModel(engine="cpu")
    for fn, kw in ((_cuda.random_search, {"per_thread": 6}), (_cuda.anneal_search, {"steps": 10, "n_init": 3})):
        r = fn(problem, arch, threads=8, seed=3, top=3, **kw)
        assert r.evaluations == 8 * (6 if "per_thread" in kw else 13) and 0 < r.legal <= r.evaluations
        m = cpu.evaluate(problem, arch, MappingBatch(temporal=r.temporal, spatial=r.spatial, order=r.order,
                                                      keep=r.keep))
        assert m.valid.all() and np.allclose(m.edp, r.edp, rtol=1e-12) and (np.diff(r.edp) >= 0).all()
    res = search(problem, arch, searcher="anneal", budget=200, device="cuda", seed=4)
    assert res.best is not None and res.n_evaluations >= 200 and res.config["device"] == "cuda"
    assert res.edp == cpu.evaluate(problem, arch, res.best.as_batch()).edp[0]
    print("SIM-OK")
""")


@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda is not installed (the cuda extra)")
def test_cuda_kernels_under_the_simulator() -> None:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0 and "SIM-OK" in res.stdout, res.stderr[-3000:]


def test_cuda_device_without_a_gpu_is_a_clear_error() -> None:
    from accelmap.costmodels import _cuda
    from accelmap.errors import SpecError

    try:
        _cuda.require()
    except _cuda.DeviceError as exc:
        msg = str(exc)
        assert "accelmap[cuda]" in msg and "cuda.detect()" in msg
        assert isinstance(exc, SpecError)
        with pytest.raises(_cuda.DeviceError):
            from accelmap.costmodels.loopnest import LoopNestModel

            LoopNestModel(engine="cuda")
        from accelmap.search.api import search

        with pytest.raises(_cuda.DeviceError):
            search("resnet50/conv3_1", "eyeriss-like", budget=10, device="cuda")
    else:
        pytest.skip("a CUDA GPU is visible here")


def test_device_name_is_checked() -> None:
    from accelmap.errors import SpecError
    from accelmap.search.gpu import check_device

    assert check_device("cpu") == "cpu"
    with pytest.raises(SpecError, match="expected one of cpu, cuda"):
        check_device("tpu")
