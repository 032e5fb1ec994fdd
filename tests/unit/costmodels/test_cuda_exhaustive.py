"""Exhaustive search on the GPU under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, in a
subprocess so that the rest of the suite keeps the real numba.cuda): on small spaces with
fixed and free orders, free bypass bits, a minimum utilization and a bandwidth limit, the
device visits exactly the points CPU exhaustive visits (every point's EDP equal, same
evaluated and legal counts), finds the same optimum, stops at a budget on the same prefix,
and refuses what the CPU searcher refuses."""

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
    from accelmap.arch.spec import Arch, Compute, StorageLevel
    from accelmap.costmodels import _cuda_exhaustive as X
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.errors import SpaceTooLargeError, SpecError
    from accelmap.mapper.constraints import constraints_from_dict
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.mapper.space import MapSpace
    from accelmap.search.api import search
    from accelmap.workloads.builders import conv2d, matmul

    def tiny(bw=None):
        return Arch(name="tiny", compute=Compute(energy_per_mac_pj=1.0), levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100.0, write_energy_pj=120.0,
                         block_words=2, read_bandwidth_words_per_cycle=bw, write_bandwidth_words_per_cycle=bw),
            StorageLevel(name="GLB", capacity_words=48, read_energy_pj=5.0, write_energy_pj=6.0, fanout_x=2,
                         fanout_y=2),
            StorageLevel(name="RF", capacity_words=8, read_energy_pj=0.5, write_energy_pj=0.6)))

    conv_cons = {"version": 1, "min_utilization": 0.2,
                 "orders": [{"level": "DRAM", "outer": ["K"]}, {"level": "RF", "inner": ["C"]}],
                 "keep": [{"level": "GLB", "keep": ["input", "output"], "choose": ["weight"]},
                          {"level": "RF", "keep": ["weight"], "choose": ["input", "output"]}],
                 "spatial": [{"level": "GLB", "x": ["K"], "y": ["P"]}],
                 "factors": [{"level": "RF", "dim": "R", "slot": "temporal", "fixed": "full"},
                             {"level": "DRAM", "dim": "C", "slot": "temporal", "fixed": 1}]}
    strided_cons = {"version": 1,
                    "keep": [{"level": "GLB", "keep": ["input"], "choose": ["weight", "output"]},
                             {"level": "RF", "keep": ["weight", "input", "output"]}],
                    "factors": [{"level": "RF", "dim": "S", "slot": "temporal", "fixed": "full"},
                                {"level": "DRAM", "dim": "C", "slot": "temporal", "fixed": 1},
                                {"level": "DRAM", "dim": "K", "slot": "temporal", "fixed": 1}],
                    "spatial": [{"level": "GLB", "x": ["K", "C"], "y": ["Q"]}]}
    gemm_cons = {"version": 1, "min_utilization": 0.2,
                 "orders": [{"level": "GLB", "outer": ["N"], "inner": ["K"]}],
                 "keep": [{"level": "GLB", "keep": ["input", "output"], "choose": ["weight"]},
                          {"level": "RF", "keep": ["weight", "input", "output"]}]}
    cases = [("conv", conv2d("c", n=1, k=2, c=1, p=3, q=2, r=2, s=1), tiny(), conv_cons),
             ("strided", conv2d("cs", n=1, k=2, c=2, p=2, q=2, r=1, s=2, stride=2), tiny(8.0), strided_cons),
             ("gemm", matmul("g", m=4, n=2, k=2), tiny(), gemm_cons)]
    import os
    every = os.environ.get("ACCELMAP_SIM_EVERY_CASE") == "1"  # the slow run: the API checks on every case
    cpu_model = LoopNestModel(engine="cpu")
    for name, problem, arch, cons in cases:
        space = MapSpace(problem, arch, constraints_from_dict(cons, arch=arch))
        b = MappingBatch.concat(list(space.enumerate(1 << 16)))
        assert 300 < len(b) < 4000, (name, len(b))
        m = LoopNestModel(engine="numpy").evaluate(problem, arch, b)
        ok = space.check(b).valid & m.valid
        ref = np.where(ok, m.edp, np.inf)
        assert ok.any() and not ok.all()
        # small chunks and launches, few threads: many launches, many points per thread
        r = X.exhaustive_search(space, max_size=10**6, threads=64, rows_per_chunk=7, points_per_launch=200,
                                per_point=True)
        # the device visits the rows the utilization leaves, in enumeration order
        util_ok = space.utilization(b) >= space.min_utilization - 1e-12
        dev = r.per_point[: int(util_ok.sum())]
        assert np.array_equal(np.isfinite(dev), ok[util_ok]), name
        assert np.allclose(dev[ok[util_ok]], ref[util_ok & ok], rtol=1e-12, atol=0), name
        assert r.evaluations == len(b) == r.size and r.legal == int(ok.sum()) and r.completed, name
        assert r.launches > 1
        # the optimum: the device's value, and the CPU's value of the device's mapping
        assert np.isclose(r.edp, ref.min(), rtol=1e-12, atol=0), name
        got = cpu_model.evaluate(problem, arch, r.mapping)
        assert got.valid[0] and np.isclose(got.edp[0], ref.min(), rtol=1e-12, atol=0), name
        api = every or name == "strided"  # the search API's comparisons (slow under the simulator)
        if api:  # the CPU searcher through the same API: same counts, same optimum
            cpu = search(problem, arch, searcher="exhaustive", space=space, seed=0)
            gpu = search(problem, arch, searcher="exhaustive", space=space, device="cuda", seed=0)
            assert (gpu.n_evaluations, gpu.n_valid) == (cpu.n_evaluations, cpu.n_valid), name
            assert np.isclose(gpu.best_objective, cpu.best_objective, rtol=1e-12, atol=0), name
            assert gpu.config["completed"] and gpu.stop_reason == "exhausted"
        # a budget stops at the same prefix of the enumeration as on the CPU
        legal_at = np.flatnonzero(ok)
        k = int(legal_at[len(legal_at) // 2]) + 1  # a prefix with some legal points, not all of the space
        assert k < len(b)
        part = X.exhaustive_search(space, max_size=10**6, budget=k, threads=32, rows_per_chunk=5,
                                   points_per_launch=100)
        assert part.evaluations == k and not part.completed and part.legal == int(ok[:k].sum()), name
        if ok[:k].any():
            assert np.isclose(part.edp, ref[:k].min(), rtol=1e-12, atol=0), name
        if api:
            cpu_k = search(problem, arch, searcher="exhaustive", space=space, budget=k, seed=0)
            gpu_k = search(problem, arch, searcher="exhaustive", space=space, budget=k, device="cuda", seed=0)
            assert (gpu_k.n_evaluations, gpu_k.n_valid) == (cpu_k.n_evaluations, cpu_k.n_valid) == (k, int(ok[:k].sum()))
            assert gpu_k.stop_reason == "budget" and not gpu_k.config["completed"]
    # a time limit stops between launches, after the first: a prefix, not completed
    cut = X.exhaustive_search(space, max_size=10**6, time_limit_s=1e-9, threads=32, rows_per_chunk=5,
                              points_per_launch=100)
    assert 0 < cut.evaluations < len(b) and not cut.completed
    # constraints given by name as on the CPU path
    problem, arch, cons = cases[2][1], cases[2][2], cases[2][3]
    res = search(problem, arch, searcher="exhaustive", constraints=constraints_from_dict(cons, arch=arch),
                 device="cuda")
    assert res.n_evaluations == MapSpace(problem, arch, constraints_from_dict(cons, arch=arch)).n_distinct()
    # the CPU searcher's refusals
    for call in (lambda: search(problem, arch, searcher="exhaustive", device="cuda",
                                searcher_options={"max_size": 10}),
                 lambda: search(problem, arch, searcher="exhaustive", searcher_options={"max_size": 10})):
        try:
            call()
        except SpaceTooLargeError as exc:
            assert "exhaustive search refused" in str(exc) and "max_size" in str(exc)
        else:
            raise AssertionError("expected SpaceTooLargeError")
    for kw, err in (({"allow_padding": True}, SpecError), ({"warm_start": "x"}, SpecError),
                    ({"searcher_options": {"tries": 3}}, TypeError)):
        try:
            search(problem, arch, searcher="exhaustive", device="cuda", **kw)
        except err:
            pass
        else:
            raise AssertionError(f"expected {err.__name__} for {kw}")
    # the CLI: --device cuda --searcher exhaustive with a constraints file
    import contextlib, io, json, sys, tempfile, yaml
    from pathlib import Path
    from accelmap.arch.io import save_arch
    from accelmap.cli import main
    from accelmap.workloads.io import save_problem
    with tempfile.TemporaryDirectory() as tmp:
        save_problem(problem, Path(tmp) / "g.yaml")
        save_arch(arch, Path(tmp) / "tiny.yaml")
        (Path(tmp) / "c.yaml").write_text(yaml.safe_dump(cons))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["search", str(Path(tmp) / "g.yaml"), "--arch", str(Path(tmp) / "tiny.yaml"), "--constraints",
                       str(Path(tmp) / "c.yaml"), "--device", "cuda", "--searcher", "exhaustive", "--json",
                       "--no-progress", "--out", str(Path(tmp) / "out")])
        assert rc == 0
        got = json.loads(buf.getvalue())
        assert got["n_evaluations"] == res.n_evaluations and got["config"]["completed"] is True
        assert np.isclose(got["best"]["objective"], res.best_objective, rtol=1e-12)
        assert got["n_valid"] == res.n_valid and got["stop_reason"] == "exhausted"
    print("SIM-OK")
""")


def _run_script(every: bool) -> None:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
               ACCELMAP_SIM_EVERY_CASE="1" if every else "0")
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0 and "SIM-OK" in res.stdout, res.stderr[-3000:]


@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda is not installed (the cuda extra)")
def test_exhaustive_on_the_device_visits_the_cpu_points_under_the_simulator() -> None:
    """Every case point by point and at a budget on the device; the search API's device/CPU
    comparisons on the strided case (the one with a bandwidth limit and a stride)."""
    _run_script(every=False)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda is not installed (the cuda extra)")
def test_exhaustive_on_the_device_matches_the_cpu_searcher_on_every_case_under_the_simulator() -> None:
    _run_script(every=True)


class _MeetAfterLookUp(dict):
    """A block's shared-array table whose first two look-ups both answer "not there yet" and
    return only once both threads have asked: the interleaving that made the simulator give
    two threads of one block two different arrays."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.meet = threading.Barrier(2, timeout=30)
        self.asked = 0

    def get(self, key, default=None):  # type: ignore[override]
        found = super().get(key, default)
        self.asked += 1
        if self.asked <= 2:
            self.meet.wait()
        return found


def _two_threads_ask(array) -> tuple:  # one call site: both threads ask for the same array
    import threading

    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    block = FakeCUDAShared(0)
    block._allocations = _MeetAfterLookUp()
    got = [None, None]

    def thread(i: int) -> None:
        got[i] = array(block, 4, np.int64)

    workers = [threading.Thread(target=thread, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return tuple(got)


@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda is not installed")
def test_threads_of_a_block_that_ask_at_once_share_one_shared_array() -> None:
    """The simulator's own ``FakeCUDAShared.array`` hands two threads that meet after the
    look-up two arrays (so the test can fail); the guarded one hands them the same array."""
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    from accelmap.costmodels._cuda_search import guarded_shared_array

    original = getattr(FakeCUDAShared.array, "unguarded", FakeCUDAShared.array)
    a, b = _two_threads_ask(original)
    assert a is not b  # the race, reproduced without timing luck
    a, b = _two_threads_ask(guarded_shared_array(original))
    assert a is b and a.shape == (4,) and a.dtype == np.int64
