"""Cost-model throughput: evaluations per second per core of the batched path.

Run by hand (from the repo root): ``python benchmarks/bench_costmodel.py [--models loopnest]``.
Results go to ``benchmarks/results/bench_costmodel.json`` (one key per model; a run updates
only the models it measured). One function per model; each returns a JSON-ready dict.

With ``--backends numpy cpu [cuda]`` it instead compares the engines of each model on one
core: the same pool, every backend timed in turn within each repeat (interleaved, so that
the load of a shared machine hits them alike), medians and the ratio to numpy; results in
``benchmarks/results/bench_costmodel_backends.json``, with the first-call compile time of
the kernels (a fresh process with an empty and with a filled numba cache).
"""

from __future__ import annotations

import os

# One core: keep BLAS/OpenMP pools (if any are touched) to a single thread.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_costmodel.json"


def _time_best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _time_best_cpu(fn, repeats: int) -> tuple[float, float]:
    """Best wall-clock and best process CPU seconds over the repeats (CPU time is steadier
    on a machine shared with other jobs)."""
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def bench_loopnest(sizes: list[int], repeats: int, seed: int = 0) -> dict:
    """ResNet-50 res2a_branch2b (3x3, 64->64, 56x56) on the eyeriss-like preset.

    Mappings are drawn once from the MapSpace (legal ones only, so every row runs the whole
    model: invalid rows would skip the counting and flatter the figure); the timed region is
    ``LoopNestModel.evaluate`` alone, including its legality check.
    """
    from accelmap.arch.io import load_arch
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    problem = load_problem("resnet50/res2a_branch2b")
    arch = load_arch("eyeriss-like")
    space = MapSpace(problem, arch)
    rng = np.random.default_rng(seed)
    n_max = max(sizes)
    t0 = time.perf_counter()
    pool = space.sample_valid(n_max, rng)
    sample_s = time.perf_counter() - t0
    model = LoopNestModel()
    model.evaluate(problem, arch, pool.take(slice(0, 64)))  # warm the per-(problem, arch) cache
    rows = []
    for n in sizes:
        batch = pool.take(slice(0, n))
        secs, cpu_s = _time_best_cpu(lambda b=batch: model.evaluate(problem, arch, b), repeats)
        peak = _peak_bytes(lambda b=batch: model.evaluate(problem, arch, b))
        rows.append({"batch": n, "seconds": secs, "evals_per_s": n / secs, "cpu_seconds": cpu_s,
                     "evals_per_cpu_s": n / cpu_s, "peak_bytes": peak, "peak_bytes_per_mapping": peak / n})
    scalar_n = 200
    one = pool.take(slice(0, scalar_n))
    t_scalar = _time_best(lambda: [model.evaluate_one(problem, arch, one[i]) for i in range(scalar_n)], 1)
    return {
        "load_average": list(os.getloadavg()),
        "problem": problem.describe(), "arch": arch.name, "valid_pool": len(pool), "sampling_s": sample_s,
        "rows": rows, "scalar_evals_per_s": scalar_n / t_scalar, "target_evals_per_s": 1e6,
    }


def _aspect_pool(problem, arch, n: int, rng: np.random.Generator):
    """Random exact tilings with the filter dims inside the PE (what MAESTRO's directives can
    express), one dim unrolled along each array axis, random loop orders."""
    from accelmap.mapper.mapping import MappingBatch

    L, D = arch.n_levels, problem.n_dims
    fan = arch.fanouts[1]
    divs = {b: [d for d in range(1, b + 1) if b % d == 0] for b in range(1, int(problem.bounds.max()) + 1)}
    t = np.ones((n, L, D), np.int64)
    s = np.ones((n, L, D, 2), np.int64)
    filt = [problem.dim_index(d) for d in ("R", "S")]
    for i in range(n):
        rem = problem.bounds.copy()
        for ax in (0, 1):
            d = int(rng.integers(D))
            opts = [f for f in divs[int(rem[d])] if f <= fan[ax]]
            s[i, 1, d, ax] = opts[int(rng.integers(len(opts)))]
            rem[d] //= s[i, 1, d, ax]
        for d in range(D):
            r = int(rem[d])
            if d not in filt:
                for lv in range(L - 1):
                    f = divs[r][int(rng.integers(len(divs[r])))]
                    t[i, lv, d] = f
                    r //= f
            t[i, L - 1, d] = r
    order = np.argsort(rng.random((n, L, D)), axis=2)
    return MappingBatch(temporal=t, spatial=s, order=order, keep=np.ones((n, L, problem.n_tensors), bool))


def _aspect_case():  # noqa: ANN202
    """VGG-16 conv3 in MAESTRO's no-padding shape on a 1024-PE array of 16 clusters x 64 PEs
    with MAESTRO's acc1 bandwidths (NoC 1000, off-chip 50 words/cycle)."""
    from accelmap.arch.spec import Arch, Compute, StorageLevel
    from accelmap.workloads.builders import conv2d

    problem = conv2d("vgg16_conv3", c=64, k=128, p=110, q=110, r=3, s=3)
    arch = Arch(name="maestro-acc1-1024", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=50, read_energy_pj=200.0,
                     write_energy_pj=200.0),
        StorageLevel(name="L2", capacity_words=None, read_bandwidth_words_per_cycle=1000, fanout_x=64, fanout_y=16,
                     read_energy_pj=18.61, write_energy_pj=18.61),
        StorageLevel(name="L1", capacity_words=None, read_energy_pj=1.68, write_energy_pj=1.68),
    ), compute=Compute(energy_per_mac_pj=1.0))
    return problem, arch


def bench_aspect(sizes: list[int], repeats: int, seed: int = 0) -> dict:
    """VGG-16 conv3 (3x3, 64->128, 110x110 outputs, MAESTRO's no-padding shape) on a
    1024-PE array of 16 clusters x 64 PEs with MAESTRO's acc1 bandwidths (NoC 1000,
    off-chip 50 words/cycle).

    The pool holds mappings the aspect model can evaluate (directive form exists and does
    exactly the layer's MACs); the timed region is ``AspectModel(engine="numpy").evaluate``
    (legality check, batched closed forms, and the scalar fallback for the few irregular
    rows). The compiled engine is compared with it by ``--backends numpy cpu``.
    """
    from accelmap.costmodels.aspect import AspectModel

    problem, arch = _aspect_case()
    rng = np.random.default_rng(seed)
    model = AspectModel(engine="numpy")
    n_max = max(sizes)
    t0 = time.perf_counter()
    raw = _aspect_pool(problem, arch, int(n_max * 1.6) + 64, rng)
    keep = model.evaluate(problem, arch, raw).valid
    pool = raw.take(np.flatnonzero(keep)[:n_max])
    sample_s = time.perf_counter() - t0
    rows = []
    for n in sizes:
        batch = pool.take(slice(0, min(n, len(pool))))
        secs = _time_best(lambda b=batch: model.evaluate(problem, arch, b), repeats)
        peak = _peak_bytes(lambda b=batch: model.evaluate(problem, arch, b))
        rows.append({"batch": len(batch), "seconds": secs, "evals_per_s": len(batch) / secs, "peak_bytes": peak,
                     "peak_bytes_per_mapping": peak / len(batch)})
    # the same, restricted to rows the closed forms handle (no scalar fallback)
    from accelmap.costmodels.aspect import _evaluate_regular, _layout, aspect_view

    _, regular, _ = _evaluate_regular(problem, _layout(problem), aspect_view(arch), pool)
    reg_pool = pool.take(np.flatnonzero(regular))
    reg_rows = []
    for n in sizes:
        batch = reg_pool.take(slice(0, min(n, len(reg_pool))))
        secs = _time_best(lambda b=batch: model.evaluate(problem, arch, b), repeats)
        reg_rows.append({"batch": len(batch), "seconds": secs, "evals_per_s": len(batch) / secs})
    # what a search feeds the model: MapSpace samples under aspect_constraints (valid or not)
    from accelmap.costmodels.aspect import aspect_constraints
    from accelmap.mapper.space import MapSpace

    space = MapSpace(problem, arch, aspect_constraints(problem, arch))
    drawn = space.sample(max(sizes), np.random.default_rng(seed + 1))
    space_rows = []
    for n in sizes:
        batch = drawn.take(slice(0, n))
        secs = _time_best(lambda b=batch: model.evaluate(problem, arch, b), repeats)
        valid = float(model.evaluate(problem, arch, batch).valid.mean())
        space_rows.append({"batch": n, "seconds": secs, "evals_per_s": n / secs, "valid_fraction": valid})
    scalar_n = 200
    one = pool.take(slice(0, scalar_n))
    t_scalar = _time_best(lambda: [model.evaluate_one(problem, arch, one[i]) for i in range(len(one))], 1)
    return {
        "mapspace_rows": space_rows,
        "problem": problem.describe(), "arch": arch.name, "valid_fraction_of_raw": float(keep.mean()),
        "pool": len(pool), "regular_fraction_of_pool": float(regular.mean()), "sampling_s": sample_s,
        "rows": rows, "regular_rows": reg_rows, "scalar_evals_per_s": len(one) / t_scalar,
    }


def _systolic_pool(problem, arch, n: int, rng: np.random.Generator):
    """Random SCALE-Sim-style mappings: a random dataflow (what the PE registers keep), its
    two array classes on the rows and columns with a random number of PEs (1 .. R, 1 .. C)
    on the innermost dim of each class, every temporal loop at DRAM."""
    from accelmap.costmodels.systolic import systolic_layout
    from accelmap.costmodels.systolic_variants import scalesim_mapping
    from accelmap.mapper.mapping import MappingBatch

    lay, _ = systolic_layout(problem, arch)
    bases = [scalesim_mapping(problem, arch, df) for df in ("os", "ws", "is")]
    pick = rng.integers(0, 3, n)
    t = np.concatenate([bases[i].temporal for i in pick])
    s = np.concatenate([bases[i].spatial for i in pick]).copy()
    keep = np.concatenate([bases[i].keep for i in pick])
    order = np.concatenate([bases[i].order for i in pick])
    a = lay.array_level
    for axis, extent in ((1, lay.rows), (0, lay.cols)):
        unrolled = s[:, a, :, axis] > 1
        draw = rng.integers(1, extent + 1, n)
        s[:, a, :, axis] = np.where(unrolled, np.minimum(draw[:, None], s[:, a, :, axis]), 1)
    per_dim = s.prod(axis=(1, 3))
    t = t.copy()
    t[:, 0, :] = -(-problem.bounds[None, :] // per_dim)
    return MappingBatch(temporal=t, spatial=s, order=order, keep=keep)


def bench_systolic(sizes: list[int], repeats: int, seed: int = 0) -> dict:
    """The systolic model on the ``systolic`` preset (128 x 128, 64 kB SRAMs, 10 words/cycle).

    Two layers: ResNet-50 CB2a_2 as SCALE-Sim sees it (3x3, 64->64, 56x56 input, 54x54
    output: the sliding-window DRAM estimate) and the 512^3 GEMM (exact window rules). The
    pool is random SCALE-Sim-style mappings (see ``_systolic_pool``), all valid; the timed
    region is ``SystolicModel.evaluate`` (legality check, GEMM view, counts, energy) of the
    model a search ranks with (`SystolicModel.for_search`: the estimate beyond the walk limits;
    the reporting default's guarded sample would sample every new far fold shape of the pool).
    """
    from accelmap.arch.presets import preset
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.workloads.builders import conv2d, matmul

    arch = preset("systolic")
    model = SystolicModel().for_search()
    out: dict = {"arch": arch.name, "layers": {}, "model": "SystolicModel().for_search() (the ranking model)"}
    for problem in (conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8),
                    matmul("GEMM_512", m=512, n=512, k=512, word_bits=8)):
        rng = np.random.default_rng(seed)
        pool = _systolic_pool(problem, arch, max(sizes), rng)
        valid = model.evaluate(problem, arch, pool.take(slice(0, 1000))).valid
        rows = []
        for n in sizes:
            batch = pool.take(slice(0, n))
            secs = _time_best(lambda b=batch, p=problem: model.evaluate(p, arch, b), repeats)
            peak = _peak_bytes(lambda b=batch, p=problem: model.evaluate(p, arch, b))
            rows.append({"batch": n, "seconds": secs, "evals_per_s": n / secs, "peak_bytes": peak,
                         "peak_bytes_per_mapping": peak / n})
        scalar_n = 200
        t_scalar = _time_best(
            lambda p=problem, q=pool, k=scalar_n: [model.evaluate_one(p, arch, q[i]) for i in range(k)], 1)
        out["layers"][problem.name] = {
            "problem": problem.describe(), "valid_fraction": float(valid.mean()), "rows": rows,
            "scalar_evals_per_s": scalar_n / t_scalar,
        }
    # main() prints "rows": report the sliding-window layer (the slower path) there
    out["rows"] = out["layers"]["CB2a_2"]["rows"]
    out["exact_window"] = _systolic_exact_window(arch, repeats, seed)
    return out


def _systolic_exact_window(arch, repeats: int, seed: int, n: int = 256) -> dict:
    """``SystolicModel(dram_window="exact")`` against the estimate on CB2a_2 (the
    sliding-window layer), ``n`` random mappings of the same pool, interleaved: the exact
    mode cold (its walk cache cleared: one walk per distinct fold shape and operand) and
    warm (the same batch again: every walk cached)."""
    import statistics

    from accelmap.costmodels._systolic_window import window_fetches
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.workloads.builders import conv2d

    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, arch, n, np.random.default_rng(seed))
    est, exact = SystolicModel().for_search(), SystolicModel(dram_window="exact")
    t_est, t_cold, t_warm, walks = [], [], [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        est.evaluate(problem, arch, pool)
        t_est.append(time.perf_counter() - t0)
        window_fetches.cache_clear()
        t0 = time.perf_counter()
        exact.evaluate(problem, arch, pool)
        t_cold.append(time.perf_counter() - t0)
        walks = window_fetches.cache_info().misses
        t0 = time.perf_counter()
        exact.evaluate(problem, arch, pool)
        t_warm.append(time.perf_counter() - t0)
    med = {k: statistics.median(v) / n for k, v in (("estimate", t_est), ("exact_cold", t_cold),
                                                     ("exact_warm", t_warm))}
    print(f"systolic exact window, CB2a_2, {n} mappings ({walks} walks): estimate "
          f"{med['estimate'] * 1e6:.1f} us/mapping, exact cold {med['exact_cold'] * 1e6:,.0f} us/mapping, "
          f"warm {med['exact_warm'] * 1e6:.1f} us/mapping")
    return {"problem": problem.name, "mappings": n, "walks": walks, "s_per_mapping": med,
            "exact_cold_over_estimate": med["exact_cold"] / med["estimate"],
            "exact_warm_over_estimate": med["exact_warm"] / med["estimate"]}


MODELS = {"loopnest": bench_loopnest, "aspect": bench_aspect, "systolic": bench_systolic}
BACKENDS_RESULTS = RESULTS.parent / "bench_costmodel_backends.json"


def _pools(name: str, n: int, seed: int = 0) -> list[tuple[str, object, object, object]]:
    """(label, problem, arch, batch) of the model's benchmark cases (the pools above)."""
    from accelmap.mapper.space import MapSpace

    if name == "loopnest":
        from accelmap.arch.io import load_arch
        from accelmap.workloads.io import load_problem

        problem, arch = load_problem("resnet50/res2a_branch2b"), load_arch("eyeriss-like")
        return [("res2a_branch2b/eyeriss-like", problem, arch,
                 MapSpace(problem, arch).sample_valid(n, np.random.default_rng(seed)))]
    if name == "systolic":
        from accelmap.arch.presets import preset
        from accelmap.workloads.builders import conv2d, matmul

        arch = preset("systolic")
        return [(p.name, p, arch, _systolic_pool(p, arch, n, np.random.default_rng(seed)))
                for p in (conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8),
                          matmul("GEMM_512", m=512, n=512, k=512, word_bits=8))]
    if name == "aspect":
        from accelmap.costmodels.aspect import aspect_constraints

        problem, arch = _aspect_case()
        space = MapSpace(problem, arch, aspect_constraints(problem, arch))
        # random directive-form mappings (about 87 % legal, 15 % of those with edge tiles),
        # and what a search sends: MapSpace samples under aspect_constraints (about 5 % legal)
        return [(f"{problem.name}/{arch.name} random", problem, arch,
                 _aspect_pool(problem, arch, n, np.random.default_rng(seed))),
                (f"{problem.name}/{arch.name} mapspace", problem, arch,
                 space.sample(n, np.random.default_rng(seed + 1)))]
    raise ValueError(f"no backend comparison for model {name!r}")


def _model(name: str, engine: str):
    from accelmap._registry import costmodels

    model = costmodels.get(name)(engine=engine)
    # the systolic model: what a search's inner loop evaluates, `SystolicModel.for_search` (the
    # estimate beyond the walk limits), not the reporting model's guarded sample, which would
    # sample thousands of new fold shapes on a random pool (minutes cold)
    hook = getattr(model, "for_search", None)
    return model if hook is None else hook()


def _compile_seconds(model: str) -> dict:
    """First-call seconds of the cpu engine in a fresh process: empty numba cache (compile)
    and filled cache (load)."""
    import subprocess
    import sys
    import tempfile

    code = (f"import time, numpy as np; from benchmarks.bench_costmodel import _pools, _model; "
            f"label, p, a, b = _pools({model!r}, 64)[0]; m = _model({model!r}, 'cpu'); "
            f"t0 = time.perf_counter(); m.evaluate(p, a, b); print(time.perf_counter() - t0)")
    variants = {"": code}
    if model == "loopnest":  # the driver specialised per structure, compiled for this case alone
        variants["_specialised"] = ("from accelmap.costmodels import _loopnest_kernel as lk; "
                                    "lk._SPECIALISE_AFTER_ROWS = 0; lk._SPECIALISE_IN_BACKGROUND = False; " + code)
    if model == "systolic":  # the same
        variants["_specialised"] = ("from accelmap.costmodels import _systolic_engine as se; "
                                    "se._SPECIALISE_AFTER_ROWS = 0; " + code)
    if model == "aspect":  # the structure's own driver (`_aspect_cpu`), compiled in the background
        variants["_specialised"] = ("import time; from accelmap.costmodels import _aspect_cpu as ac; "
                                    "from accelmap.costmodels._aspect_kernel import aspect_consts; "
                                    "from benchmarks.bench_costmodel import _pools; "
                                    "label, p, a, b = _pools('aspect', 64)[0]; "
                                    "t0 = time.perf_counter(); ac.compiled(ac.structure(aspect_consts(p, a)), "
                                    "block=True); print(time.perf_counter() - t0)")
    root = Path(__file__).resolve().parents[1]
    out = {}
    for suffix, src in variants.items():
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(
                [str(root / "src"), str(root), os.environ.get("PYTHONPATH", "")]))
            for key in ("cold_cache", "warm_cache"):
                res = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True, check=True)
                out[f"{key}{suffix}_s"] = float(res.stdout.strip().splitlines()[-1])
            if model == "systolic" and suffix:
                # the default engine in a process whose cache holds the specialised driver: that
                # driver serves from the first row (`_systolic_engine._SPECIALISE_IF_READY`)
                res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
                out["warm_cache_default_with_specialised_s"] = float(res.stdout.strip().splitlines()[-1])
    return out


def _never_specialised(model, module, threshold: str):  # noqa: ANN001, ANN202
    """``model.evaluate`` with ``module.<threshold>`` (rows before the specialised driver takes
    over) raised out of reach for the call: the generic driver every process starts with."""

    def evaluate(problem, arch, batch):  # noqa: ANN001, ANN202
        saved = getattr(module, threshold)
        setattr(module, threshold, 1 << 62)
        try:
            return model.evaluate(problem, arch, batch)
        finally:
            setattr(module, threshold, saved)

    return evaluate


def bench_backends(models: list[str], sizes: list[int], backends: list[str], repeats: int) -> dict:
    """Evaluations per second on one core of each backend, interleaved; ratios to numpy."""
    import numba

    numba.set_num_threads(1)  # per core: the kernels' parallel driver is not used
    out: dict = {"load_average_start": list(os.getloadavg()), "backends": backends, "models": {}}
    for name in models:
        res: dict = {"cases": {}}
        engines = {b: _model(name, b) for b in backends}
        # What each timed entry calls: ``evaluate`` of every engine, and for loopnest on the
        # cpu engine also ``evaluate_objective`` (what the search driver calls: no counts).
        calls = {b: m.evaluate for b, m in engines.items()}
        if name == "loopnest" and "cpu" in engines:
            # ``cpu`` runs the driver a long-running process settles on (specialised per
            # structure, after `_SPECIALISE_AFTER_ROWS` rows); ``cpu_generic`` the one every
            # process starts with.
            from accelmap.costmodels import _loopnest_kernel as lk

            calls["cpu_objective"] = engines["cpu"].evaluate_objective
            calls["cpu_generic"] = _never_specialised(engines["cpu"], lk, "_SPECIALISE_AFTER_ROWS")
        if name == "aspect" and "cpu" in engines:
            # ``cpu`` runs the driver a long-running process settles on (`_aspect_cpu`: the
            # structure's own, after `SPECIALISE_AFTER_ROWS` rows); ``cpu_generic`` the one every
            # process starts with
            from accelmap.costmodels import _aspect_cpu as ac

            calls["cpu_generic"] = _never_specialised(engines["cpu"], ac, "SPECIALISE_AFTER_ROWS")
        if name == "systolic":
            # ``numpy`` and ``cpu`` run the default ``dram_window="auto"`` of the model a search
            # ranks with (`SystolicModel.for_search`, `_model`: the kernel plus the walked counts
            # it looks up per fold shape, the estimate beyond the walk limits); ``*_estimate``
            # the closed-form estimate everywhere (the kernel alone).
            from accelmap.costmodels.systolic import SystolicModel

            res["dram_window"] = {b: "auto (ranking model, for_search: max_sample_entries=0)" for b in calls}
            for b in [b for b in backends if b in ("numpy", "cpu")]:
                calls[f"{b}_estimate"] = SystolicModel(engine=b, dram_window="estimate").evaluate
                res["dram_window"][f"{b}_estimate"] = "estimate"
            if "cpu" in engines:
                # ``cpu`` and ``cpu_estimate`` run the driver a long-running process settles on
                # (specialised per structure, after `_SPECIALISE_AFTER_ROWS` rows); ``cpu_generic``
                # the one every process starts with; ``cpu_objective`` what the search driver
                # calls (`evaluate_objective`: no per-level counts), all under ``"auto"``.
                from accelmap.costmodels import _systolic_engine as se

                def generic_s(problem, arch, batch, m=engines["cpu"]):  # noqa: ANN001, ANN202
                    saved = se._SPECIALISE_AFTER_ROWS, se._SPECIALISE_IF_READY
                    se._SPECIALISE_AFTER_ROWS, se._SPECIALISE_IF_READY = 1 << 62, False
                    try:
                        return m.evaluate(problem, arch, batch)
                    finally:
                        se._SPECIALISE_AFTER_ROWS, se._SPECIALISE_IF_READY = saved

                calls["cpu_objective"] = engines["cpu"].evaluate_objective
                calls["cpu_generic"] = generic_s
                res["dram_window"].update(cpu_objective=res["dram_window"]["cpu"], cpu_generic=res["dram_window"]["cpu"])
        for label, problem, arch, pool in _pools(name, max(sizes)):
            for fn in calls.values():  # compile / warm every per-(problem, arch) cache
                fn(problem, arch, pool.take(slice(0, 64)))
            if name == "aspect" and "cpu" in engines:  # until the specialised driver serves
                from accelmap.costmodels import _aspect_cpu as ac

                seen = 0
                while seen < ac.SPECIALISE_AFTER_ROWS:
                    engines["cpu"].evaluate(problem, arch, pool)
                    seen += len(pool)
                ac.wait()
            if name == "loopnest" and "cpu" in engines:  # until the specialised driver serves
                lk._SPECIALISE_IN_BACKGROUND = False  # (compiled here: the steady state is what is timed)
                seen = 0
                while seen < lk._SPECIALISE_AFTER_ROWS:
                    engines["cpu"].evaluate(problem, arch, pool)
                    seen += len(pool)
            if name == "systolic" and "cpu" in engines:  # the same for both cpu models
                for fn in (engines["cpu"].evaluate, calls["cpu_estimate"]):
                    seen = 0
                    while seen < se._SPECIALISE_AFTER_ROWS:
                        fn(problem, arch, pool)
                        seen += len(pool)
            rows = []
            for n in sizes:
                batch = pool.take(slice(0, n))
                times: dict[str, list[float]] = {b: [] for b in calls}
                cpu: dict[str, list[float]] = {b: [] for b in calls}  # process CPU seconds
                for _ in range(repeats):
                    for b, fn in calls.items():
                        t0, c0 = time.perf_counter(), time.process_time()
                        fn(problem, arch, batch)
                        times[b].append(time.perf_counter() - t0)
                        cpu[b].append(time.process_time() - c0)
                row = {"batch": n}
                for b in calls:
                    med = float(np.median(times[b]))
                    row[b] = {"median_s": med, "evals_per_s": n / med, "best_evals_per_s": n / min(times[b]),
                              "evals_per_cpu_s": n / max(float(np.median(cpu[b])), 1e-9)}
                if "numpy" in backends:
                    for b in calls:  # (an ``*_estimate`` entry: to the numpy path in the same mode)
                        ref = "numpy_estimate" if b.endswith("_estimate") and "numpy_estimate" in calls else "numpy"
                        row[b]["ratio_to_numpy"] = row[b]["evals_per_s"] / row[ref]["evals_per_s"]
                rows.append(row)
                print(f"{name} {label} batch {n:>7}: " + ", ".join(
                    f"{b} {row[b]['evals_per_s']:>12,.0f}/s" + (f" ({row[b]['ratio_to_numpy']:.2f}x)" if b != "numpy" and "numpy" in backends else "")
                    for b in calls))
            res["cases"][label] = {"problem": problem.describe(), "arch": arch.name, "rows": rows}
            if name == "aspect":  # what the rows hold: legal share, and closed-form share of those
                from accelmap.costmodels.aspect import _evaluate_regular, _layout, aspect_view

                valid = engines[backends[0]].evaluate(problem, arch, pool).valid
                legal = pool.take(np.flatnonzero(valid))
                regular = _evaluate_regular(problem, _layout(problem), aspect_view(arch), legal)[1]
                res["cases"][label].update(valid_fraction=float(valid.mean()),
                                           regular_fraction_of_valid=float(regular.mean()) if len(legal) else None)
        if "cpu" in backends:
            res["first_call"] = _compile_seconds(name)
            print(f"{name}: first call {res['first_call']}")
        out["models"][name] = res
    out["load_average_end"] = list(os.getloadavg())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", nargs="*", default=sorted(MODELS), choices=sorted(MODELS))
    ap.add_argument("--sizes", nargs="*", type=int, default=[1000, 10000, 100000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--results", type=Path, default=None,
                    help="with --backends: the JSON file to update (default benchmarks/results/"
                         "bench_costmodel_backends.json)")
    ap.add_argument("--backends", nargs="*", choices=["numpy", "cpu", "cuda"],
                    help="compare the engines of each model instead (one core, interleaved)")
    args = ap.parse_args()
    if args.backends:
        res = bench_backends(args.models, args.sizes, args.backends, max(args.repeats, 5))
        target = args.results or BACKENDS_RESULTS
        old = json.loads(target.read_text()) if target.exists() else {}
        old["machine"] = {"python": platform.python_version(), "numpy": np.__version__,
                          "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine()}
        for k in ("load_average_start", "load_average_end", "backends"):
            old[k] = res[k]
        old.setdefault("models", {}).update(res["models"])
        target.write_text(json.dumps(old, indent=1) + "\n")
        print(f"wrote {target}")
        return
    out = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    out["machine"] = {"python": platform.python_version(), "numpy": np.__version__,
                      "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine()}
    for name in args.models:
        out[name] = MODELS[name](args.sizes, args.repeats)
        for r in out[name]["rows"]:
            cpu = f" ({r['evals_per_cpu_s']:,.0f} per CPU second)" if "evals_per_cpu_s" in r else ""
            print(f"{name}: batch {r['batch']:>7}: {r['evals_per_s']:>12,.0f} evals/s{cpu}, "
                  f"{r['peak_bytes_per_mapping']:,.0f} B peak per mapping")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
