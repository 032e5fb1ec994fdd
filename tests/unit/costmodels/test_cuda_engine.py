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
    from accelmap.errors import SpecError

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
        # the specialized search kernels' own evaluation: same legality, same EDP
        e, f = _cuda.search_objective(problem, arch, batch.temporal, batch.spatial, batch.order, batch.keep)
        ref = LoopNestModel(engine="numpy").evaluate(problem, arch, batch)
        assert np.array_equal(f, ref.valid) and np.allclose(e[f], ref.edp[f], rtol=1e-12, atol=0)
        assert np.isinf(e[~f]).all()
    # a padded zoo layer: the padded tensors' energy is scaled on the device as on the host
    from accelmap.workloads.io import load_problem
    zoo, eyeriss = load_problem("resnet50/conv3_1"), preset("eyeriss-like")
    assert zoo.has_padding
    zb = MapSpace(zoo, eyeriss).sample_valid(12, np.random.default_rng(2))
    e, f = _cuda.search_objective(zoo, eyeriss, zb.temporal, zb.spatial, zb.order, zb.keep)
    ref = LoopNestModel(engine="cpu").evaluate(zoo, eyeriss, zb)
    assert f.all() and np.allclose(e, ref.edp, rtol=1e-12, atol=0)
    problem, arch = cases[0][1], preset(cases[0][0])
    cpu = LoopNestModel(engine="cpu")
    runs = [(_cuda.random_search, {"per_thread": 6, "kernel": "generic"}),
            (_cuda.anneal_search, {"steps": 10, "n_init": 3, "kernel": "generic"})]
    runs += [(_cuda.random_search, {"per_thread": 6, "kernel": "specialized", "share": share, "tries": 3})
             for share in ("none", "order", "order+keep")]
    runs += [(_cuda.anneal_search, {"steps": 10, "n_init": 3, "kernel": "specialized", "anneal_share": ash})
             for ash in ("move", "none")]
    # one round of up to 3 draws, the fitting one evaluated under 4 loop orders
    runs += [(_cuda.random_search, {"per_thread": 6, "kernel": "specialized", "share": share, "tries": 3, "orders": 4})
             for share in ("none", "order")]
    # annealing steps of 4 mappings (the moved one and 3 loop-order variants), chains of one
    # thread and of 4 (8 threads asked, one block of 32 launched)
    runs += [(_cuda.anneal_search, {"steps": 10, "n_init": 3, "kernel": "specialized", "orders": 4, "lanes": w,
                                    "tpb": 32}) for w in (1, 4)]
    # (chains of 8 lanes whose lanes draw their own move kinds)
    runs += [(_cuda.anneal_search, {"steps": 10, "n_init": 3, "kernel": "specialized", "orders": 2, "lanes": 8,
                                    "tpb": 32, "anneal_share": "none"})]
    # restarts (chains of several lanes): every step, greedy (a tiny temperature), so that
    # most best rows come after a restart; and every 3 steps at the usual temperatures. The
    # rows a chain reports after taking another chain's state and factor caches are still
    # evaluated as the CPU evaluates them, and the counters are a step's as without restarts
    runs += [(_cuda.anneal_search, {"steps": 10, "n_init": 3, "kernel": "specialized", "orders": 2, "lanes": 4,
                                    "tpb": 32, "restart": 1, "t_start": 1e-6, "t_end": 1e-6}),
             (_cuda.anneal_search, {"steps": 10, "n_init": 3, "kernel": "specialized", "orders": 4, "lanes": 8,
                                    "tpb": 32, "restart": 3})]
    # (on the zoo layer not "order+keep": one warp's two shared bypass draws may both be unfit)
    cases = [(run, (problem, arch)) for run in runs]
    cases += [(run, (zoo, eyeriss)) for run in (runs[0], runs[1], runs[3], runs[5], runs[6], runs[8], runs[9],
                                                runs[10], runs[11], runs[12])]
    for (fn, kw), (pr, ar) in cases:
        r = fn(pr, ar, threads=8, seed=3, top=3, **kw)
        assert r.kernel == kw["kernel"]
        if kw.get("orders", 1) > 1 and fn is _cuda.anneal_search:
            # each of the 13 steps per thread: a refused move (one evaluation, not legal) or
            # `orders` legal evaluations
            n, k = r.threads * 13, kw["orders"]
            assert r.threads == (8 if kw["lanes"] == 1 else 32) and r.legal % k == 0
            assert r.legal // k + (r.evaluations - r.legal) == n and r.legal > 0
        elif fn is _cuda.anneal_search or kw["kernel"] == "generic":
            # every step or draw is one evaluation
            assert r.evaluations == 8 * (6 if "per_thread" in kw else 13)
        elif kw.get("orders", 1) > 1:
            # per thread: k <= 3 draws checked, and if one fits, 3 more orders of it
            assert 8 <= r.evaluations <= 8 * 6 and r.legal % 4 == 0 and r.legal <= 8 * 4
            assert r.evaluations - r.legal * 3 // 4 <= 8 * 3
        else:
            # rounds of up to `tries` draws, each draw checked; the fitting one evaluated
            assert 8 * 2 <= r.evaluations <= 8 * 6 and r.legal <= 8 * 2
        assert 0 < r.legal <= r.evaluations
        m = cpu.evaluate(pr, ar, MappingBatch(temporal=r.temporal, spatial=r.spatial, order=r.order, keep=r.keep))
        assert m.valid.all() and np.allclose(m.edp, r.edp, rtol=1e-12) and (np.diff(r.edp) >= 0).all()
    # the lanes of a warp share the round's orders (and bypass) when asked to
    r = _cuda.random_search(problem, arch, threads=8, per_thread=4, seed=5, top=8, kernel="specialized",
                            share="order+keep", tries=4)
    if len(r.edp) >= 2:
        assert (r.order == r.order[0]).all() and (r.keep == r.keep[0]).all()
    # a fitting tiling under several orders (a thread whose draws all fail evaluates none)
    r = _cuda.random_search(problem, arch, threads=1, per_thread=39, seed=11, top=1, kernel="specialized", share="none",
                            tries=8, orders=32)
    assert r.legal in (0, 32) and r.evaluations - r.legal <= 8
    # an annealing step's variants are distinct swaps: the pair stride is coprime with the
    # number of pairs; bad orders and lanes are refused
    from accelmap.costmodels import _cuda_search
    for n in (1, 2, 3, 21, 35, 84, 105):
        st = _cuda_search.pair_stride(n)
        assert len({(5 + j * st) % n for j in range(n)}) == n
    for bad in ({"orders": 0}, {"lanes": 3}, {"restart": -1}):
        try:
            _cuda.anneal_search(problem, arch, threads=8, steps=4, kernel="specialized", **bad)
        except SpecError as exc:
            assert next(iter(bad)) in str(exc)
        else:
            raise AssertionError(f"expected a SpecError for {bad}")
    for bad in ({"orders": 0}, {"tries": 0}, {"share": "all"}):
        try:
            _cuda.random_search(problem, arch, threads=8, per_thread=4, kernel="specialized", **bad)
        except SpecError as exc:
            assert next(iter(bad)) in str(exc)
        else:
            raise AssertionError(f"expected a SpecError for {bad}")
    try:
        _cuda.anneal_search(problem, arch, threads=8, steps=4, anneal_share="all")
    except SpecError as exc:
        assert "anneal_share" in str(exc)
    else:
        raise AssertionError("expected a SpecError")
    res = search(problem, arch, searcher="anneal", budget=200, device="cuda", seed=4)
    assert res.best is not None and res.n_evaluations >= 200 and res.config["device"] == "cuda"
    assert res.edp == cpu.evaluate(problem, arch, res.best.as_batch()).edp[0]
    # the default: chains of 8 lanes, 16 mappings per step, restarts every 8 steps (a budget
    # of whole blocks of 128 threads); and one mapping per step on chains of one thread
    res = search(problem, arch, searcher="anneal", budget=20_000, device="cuda", seed=4)
    assert res.best is not None and 20_000 <= res.n_evaluations < 20_000 + 2 * 128 * 9 * 16
    cfg = res.config
    assert res.n_valid <= res.n_evaluations and (cfg["orders"], cfg["lanes"], cfg["restart"]) == (16, 8, 8)
    assert res.edp == cpu.evaluate(problem, arch, res.best.as_batch()).edp[0]
    res = search(problem, arch, searcher="anneal", budget=2_000, device="cuda", seed=4,
                 searcher_options={"orders": 1, "lanes": 1})
    assert res.best is not None and 2_000 <= res.n_evaluations < 2_000 + 32 * 9
    assert (res.config["orders"], res.config["lanes"], res.config["restart"]) == (1, 1, 0)
    assert res.edp == cpu.evaluate(problem, arch, res.best.as_batch()).edp[0]
    for opts, exc in (({"chains": 4}, TypeError), ({"lanes": 3}, SpecError), ({"orders": 0}, SpecError),
                      ({"restart": -2}, SpecError)):
        try:
            search(problem, arch, searcher="anneal", budget=200, device="cuda", searcher_options=opts)
        except exc as e:
            assert next(iter(opts)) in str(e)
        else:
            raise AssertionError(f"expected {exc.__name__} for {opts}")
    assert res.edp == cpu.evaluate(problem, arch, res.best.as_batch()).edp[0]
    res = search(problem, arch, searcher="random", budget=500, device="cuda", seed=4)
    assert res.best is not None and res.n_evaluations >= 500 and res.n_valid <= res.n_evaluations
    assert res.edp == cpu.evaluate(problem, arch, res.best.as_batch()).edp[0]
    # generator states seeded on the device: distinct per thread and per seed, never all zero
    s5, s6 = _cuda.device_states(256, 5).copy_to_host(), _cuda.device_states(256, 6).copy_to_host()
    pairs5 = set(zip(s5["s0"].tolist(), s5["s1"].tolist()))
    assert len(pairs5) == 256 and not pairs5 & set(zip(s6["s0"].tolist(), s6["s1"].tolist()))
    assert ((s5["s0"] != 0) | (s5["s1"] != 0)).all()
    again = _cuda.device_states(256, 5).copy_to_host()
    assert (again["s0"] == s5["s0"]).all() and (again["s1"] == s5["s1"]).all()
    # kernels specialized per (problem, arch) need 32-bit tiles: checked on the host
    big = matmul("big", m=4096, n=4096, k=4096)
    ok, why = _cuda.fits_32bit_check(big, arch)
    assert not ok and "int32" in why
    try:
        _cuda.random_search(big, arch, threads=8, per_thread=2, kernel="specialized")
    except _cuda.DeviceError as exc:
        assert "generic" in str(exc)
    else:
        raise AssertionError("expected a DeviceError")
    print("SIM-OK")
""")


@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda is not installed (the cuda extra)")
@pytest.mark.skipif(sys.version_info < (3, 11), reason="numba-cuda's simulator runs this script past 25 minutes on "
                    "Python 3.10 (measured alone on 2 cores); CI runs it on 3.11, the real GPU through the device tool")
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
