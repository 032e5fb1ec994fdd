"""GPU throughput of the loopnest kernel and of the device-side searches.

Run on a machine with an NVIDIA GPU and numba-cuda (``pip install "accelmap[cuda]"``), from the
repo root: ``python benchmarks/bench_gpu.py [--out FILE]``. It

1. checks the GPU kernel against the CPU kernel on MapSpace samples (legal and illegal rows),
   all `Metrics` fields bit for bit;
2. times ``LoopNestModel(engine="cuda").evaluate`` on a host batch (transfers included);
3. times ``random_search`` and ``anneal_search`` (sampling or moves, legality check and
   evaluation on the device; only each thread's best row and counters come back): legal
   evaluations per second, the kernel time measured between device synchronizations after
   a warm-up run that compiles;
4. re-evaluates the best rows on the CPU (same EDP) and records the best EDP found;
5. (``--tuning``) register caps and block sizes; 6. (``--api-budget N``) the API's searches;
7. (``--exhaustive``, alone) exhaustive search on the device (`accelmap.costmodels._cuda_exhaustive`)
   on the 79,920-point space of resnet50/res2a_branch2b under Timeloop's Eyeriss constraint
   files (checked against CPU exhaustive: same optimum, same evaluated and legal counts) and
   on a space of 2.4e8 cost-distinct points (a 16x8x8 GEMM on eyeriss-like, unconstrained):
   evaluations and legal evaluations per second, wall time (host enumeration of the tile
   rows included) and the time spent waiting for the device, after a warm-up run that
   compiles. Writes ``benchmarks/results/bench_gpu_exhaustive.json`` by default.
8. (``--anneal-sweep`` / ``--api-sweep``, alone) annealing configurations (orders, lanes,
   restarts, steps, threads, temperatures, block size) on several ``--seeds``: legal
   evaluations per second and the best / median / worst EDP over the seeds, every reported
   row re-evaluated on the CPU; then the API's annealing with several searcher options, at a
   budget or a time limit (``time_ms``), after a search that compiles. Writes
   ``benchmarks/results/bench_gpu_anneal_sweep.json`` by default.

Step 3 times the generic search kernels (the CPU kernel's code on the device) and the
specialized ones (`accelmap.costmodels._cuda_search`: random search with each warp-share
option and with each ``--orders`` count of loop orders per fitting draw; annealing with the
move kinds shared by a warp or not, with uniform factor moves, and with ``--anneal-orders``
mappings evaluated per step, with one or several threads per chain, at about the same evaluations) in
turn within each repeat; step 1 also checks the specialized kernels' evaluation
(legality and EDP) against the CPU kernel.

Results: JSON (``benchmarks/results/bench_gpu.json`` by default).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_gpu.json"
# annealing's default on the device (`accelmap.search.gpu`): mappings per step, threads per
# chain, steps between restarts; and the rule of one mapping per step on chains of one thread
ANNEAL_DEFAULT = {"orders": 16, "lanes": 8, "restart": 8}
ONE_PER_STEP = {"orders": 1, "lanes": 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problem", default="resnet50/conv3_1")
    ap.add_argument("--arch", default="eyeriss-like")
    ap.add_argument("--threads", type=int, default=1 << 18)
    ap.add_argument("--per-thread", type=int, default=256, help="random search: draws per thread")
    ap.add_argument("--steps", type=int, default=256, help="anneal: steps per chain")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--check-rows", type=int, default=20000, help="equality: sampled rows (plus a fifth legal ones)")
    ap.add_argument("--host-rows", type=int, default=1_000_000, help="host batch: rows")
    ap.add_argument("--api-budget", type=int, default=0, help="also search through the API with this budget")
    ap.add_argument("--tries", type=int, default=8, help="specialized random search: draws per round until one fits")
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 8, 16, 32],
                    help="specialized random search: loop orders evaluated per fitting draw (share order; one variant each)")
    ap.add_argument("--anneal-orders", type=int, nargs="+", default=[1, 4, 8, 16, 32],
                    help="specialized annealing: mappings evaluated per step (the moved one and loop-order variants "
                         "of it); each run with the steps that give about the evaluations of --steps at one per step")
    ap.add_argument("--anneal-lanes", type=int, nargs="+", default=[1, 32],
                    help="specialized annealing with --anneal-orders: GPU threads per chain, each proposing a move")
    ap.add_argument("--anneal-restarts", type=int, nargs="*", default=[8],
                    help="specialized annealing with --anneal-lanes above 1: also with these steps between restarts")
    ap.add_argument("--anneal-registers", type=int, nargs="+", default=[],
                    help="specialized annealing with 16 orders and 8 lanes: also these register caps (0 = none)")
    ap.add_argument("--kernels", nargs="+", default=["generic", "specialized"],
                    help="search kernels to time: generic, specialized (every share), or specialized_SHARE")
    ap.add_argument("--tuning", action="store_true", help="also step 5 (register caps, block sizes; generic kernels)")
    ap.add_argument("--tuning-only", action="store_true", help="only step 5 (register caps, block sizes)")
    ap.add_argument("--tuning-kernel", default="specialized", choices=["generic", "specialized"])
    ap.add_argument("--tuning-orders", type=int, default=32, help="step 5, specialized random search: orders per draw")
    ap.add_argument("--exhaustive", action="store_true", help="only step 7 (exhaustive search on the device)")
    ap.add_argument("--timeloop-constraints", type=Path,
                    default=Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "timeloop"
                    / "constraints" / "eyeriss_like", help="step 7: Timeloop's Eyeriss constraint files")
    ap.add_argument("--exhaustive-budget", type=int, default=0,
                    help="step 7: points per run (0 = the whole space; small values for dry runs)")
    ap.add_argument("--anneal-sweep", nargs="+", default=[], metavar="NAME:KEY=V,...",
                    help="only step 8: annealing configurations (keys of anneal_search: orders, lanes, restart, "
                         "threads, steps, t_start, t_end), each run on every --seeds; e.g. "
                         "fast:orders=16,lanes=8,restart=16,steps=56")
    ap.add_argument("--api-sweep", nargs="*", default=None, metavar="NAME:KEY=V,...",
                    help="step 8: also search through the API (--api-budget) with these searcher_options on every "
                         "--seeds ('default:' for none)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="step 8: seeds")
    args = ap.parse_args()
    if args.anneal_sweep or args.api_sweep:
        if args.out == RESULTS:
            args.out = RESULTS.with_name("bench_gpu_anneal_sweep.json")
        _anneal_sweep(args)
        return
    if args.exhaustive:
        if args.out == RESULTS:
            args.out = RESULTS.with_name("bench_gpu_exhaustive.json")
        _exhaustive(args)
        return


    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _cuda, _cuda_search
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.mapper.space import MapSpace
    from accelmap.testing.costmodel_checks import assert_engines_agree
    from accelmap.workloads.io import load_problem

    _cuda.require()
    out: dict = {"machine": _machine(),
                 "problem": args.problem, "arch": args.arch}
    problem, arch = load_problem(args.problem), load_arch(args.arch)
    out["problem_describe"] = problem.describe()
    space = MapSpace(problem, arch)
    rng = np.random.default_rng(0)
    cpu, gpu = LoopNestModel(engine="cpu"), LoopNestModel(engine="cuda")

    if args.tuning_only:
        _tuning(args, problem, arch, out, _cuda)
        return
    # 1. equality
    batch = MappingBatch.concat([space.sample(args.check_rows, rng), space.sample_valid(args.check_rows // 5, rng)])
    t0 = time.perf_counter()
    got = gpu.evaluate(problem, arch, batch)
    out["first_call_s"] = time.perf_counter() - t0
    ref = cpu.evaluate(problem, arch, batch)
    assert_engines_agree(got, ref, what="cuda vs cpu")  # counts exact, energies to 1e-12 (the GPU fuses multiply-adds)
    fdiff = float(np.max(np.abs(got.energy_pj[got.valid] / ref.energy_pj[got.valid] - 1), initial=0.0))
    out["equality"] = {"rows": len(batch), "legal_rows": int(got.valid.sum()), "counts_bit_for_bit": True,
                       "max_rel_energy_diff": fdiff}
    print(f"equality: {len(batch)} rows ({int(got.valid.sum())} legal): counts exact, energy within {fdiff:.1e}; first call {out['first_call_s']:.1f} s")

    # 2. host batch evaluation (transfers included)
    big = space.sample_valid(args.host_rows, rng)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        gpu.evaluate(problem, arch, big)
        times.append(time.perf_counter() - t0)
    out["host_batch"] = {"rows": len(big), "median_s": float(np.median(times)),
                         "evals_per_s": len(big) / float(np.median(times))}
    print(f"host batch of {len(big):,}: {out['host_batch']['evals_per_s']:,.0f} evals/s (transfers included)")

    # 1b. the specialized search kernels' evaluation on the same rows (EDP and fit)
    e_sp, f_sp = _cuda.search_objective(problem, arch, batch.temporal, batch.spatial, batch.order, batch.keep)
    same_fit = bool(np.array_equal(f_sp, ref.valid))
    rel = float(np.max(np.abs(e_sp[ref.valid] / ref.edp[ref.valid] - 1), initial=0.0))
    assert same_fit and rel <= 1e-12, (same_fit, rel)
    out["equality_specialized"] = {"rows": len(batch), "legal_rows": int(f_sp.sum()), "same_legality": same_fit,
                                   "max_rel_edp_diff": rel, "edp_bit_for_bit": bool(np.array_equal(
                                       e_sp[ref.valid], ref.edp[ref.valid]))}
    print(f"specialized kernels: same legality on {len(batch)} rows, EDP within {rel:.1e}")

    # 3. device searches: every variant compiled first, then timed in turn within each repeat
    variants = [("random", "generic", _cuda.random_search, {"per_thread": args.per_thread, "kernel": "generic"})]
    variants += [("random", f"specialized_{share}", _cuda.random_search,
                  {"per_thread": args.per_thread, "kernel": "specialized", "tries": args.tries, "share": share,
                   "orders": 1}) for share in _cuda_search.SHARES]
    variants += [("random", f"specialized_order_x{n}", _cuda.random_search,
                  {"per_thread": args.per_thread, "kernel": "specialized", "tries": args.tries, "share": "order",
                   "orders": n}) for n in args.orders if n > 1]
    variants += [("anneal", "generic", _cuda.anneal_search, {"steps": args.steps, "n_init": 8, "kernel": "generic"})]
    variants += [("anneal", "specialized" if ash == "move" else f"specialized_{ash}", _cuda.anneal_search,
                  {"steps": args.steps, "n_init": 8, "kernel": "specialized", "anneal_share": ash})
                 for ash in reversed(_cuda_search.ANNEAL_SHARES)]
    variants += [("anneal", "specialized_uniform_moves", _cuda.anneal_search,
                  {"steps": args.steps, "n_init": 8, "kernel": "specialized", "redirect": False})]
    # multiple-try steps: `orders` mappings per step whose move fits, at about equal evaluations
    # (n_init + steps) x orders ~ n_init + --steps
    def eq_steps(k: int) -> int:
        return max(1, round((args.steps + 8) / k) - 8)

    variants += [("anneal", f"specialized_orders{k}_lanes{w}", _cuda.anneal_search,
                  {"steps": eq_steps(k), "n_init": 8, "kernel": "specialized", "orders": k, "lanes": w})
                 for w in args.anneal_lanes for k in args.anneal_orders if (k, w) != (1, 1)]
    variants += [("anneal", f"specialized_orders{k}_lanes{w}_restart{r}", _cuda.anneal_search,
                  {"steps": eq_steps(k), "n_init": 8, "kernel": "specialized", "orders": k, "lanes": w, "restart": r})
                 for r in args.anneal_restarts for w in args.anneal_lanes for k in args.anneal_orders if w > 1]
    variants += [("anneal", f"specialized_orders{ANNEAL_DEFAULT['orders']}_lanes{ANNEAL_DEFAULT['lanes']}_regs{r}", _cuda.anneal_search,
                  {"steps": eq_steps(ANNEAL_DEFAULT["orders"]), "n_init": 8, "kernel": "specialized", **ANNEAL_DEFAULT, "max_registers": r})
                 for r in args.anneal_registers]
    variants = [v for v in variants if v[1] in args.kernels or v[1].split("_")[0] in args.kernels]
    compile_s = {}
    for name, kern, fn, kw in variants:
        t0 = time.perf_counter()
        small = {k: (2 if k in ("per_thread", "steps") else v) for k, v in kw.items()}
        fn(problem, arch, threads=1024, seed=99, **small)
        compile_s[(name, kern)] = time.perf_counter() - t0
    runs: dict = {(name, kern): [] for name, kern, _, _ in variants}
    for rep in range(args.repeats):
        for name, kern, fn, kw in variants:
            runs[(name, kern)].append(fn(problem, arch, threads=args.threads, seed=rep, **kw))
    out["searches"] = []
    for name, kern, _, kw in variants:
        rs = runs[(name, kern)]
        med = sorted(rs, key=lambda r: r.legal_per_s)[len(rs) // 2]
        best = min(rs, key=lambda r: r.edp[0] if len(r.edp) else np.inf)
        rows = MappingBatch(temporal=best.temporal, spatial=best.spatial, order=best.order, keep=best.keep)
        check = cpu.evaluate(problem, arch, rows)
        agree = bool(check.valid.all() and np.allclose(check.edp, best.edp, rtol=1e-12))
        info = _cuda.kernel_info(problem, arch, name, kernel=kern.split("_")[0], share=kw.get("share", "order"),
                                 anneal_share=kw.get("anneal_share", "move"), redirect=kw.get("redirect", True),
                                 lanes=kw.get("lanes", 1), orders=kw.get("orders", 1),
                                 max_registers=kw.get("max_registers"))
        row = {"search": name, "kernel": kern, "threads": args.threads, **{k: v for k, v in kw.items() if k != "kernel"},
               "all_runs_best_edp": [float(r.edp[0]) if len(r.edp) else None for r in rs],
               **info, "compile_s": compile_s[(name, kern)], "evaluations": med.evaluations, "legal": med.legal,
               "kernel_s": med.seconds, "evals_per_s": med.evals_per_s, "legal_per_s": med.legal_per_s,
               "all_runs_legal_per_s": [r.legal_per_s for r in rs], "best_edp": float(best.edp[0]),
               "best_rows_agree_with_cpu": agree,
               "best_mapping": {"temporal": best.temporal[0].tolist(), "spatial": best.spatial[0].tolist(),
                                "order": best.order[0].tolist(), "keep": best.keep[0].tolist()}}
        out["searches"].append(row)
        print(f"{name} [{kern}] {info['registers']} regs, {info['local_bytes']} B local: {med.evaluations:,} evaluations "
              f"({med.legal:,} legal) in {med.seconds:.3f} s: {med.legal_per_s:,.0f} legal/s, {med.evals_per_s:,.0f} "
              f"evals/s; best EDP {best.edp[0]:.4g} (CPU agrees: {agree}); compile {compile_s[(name, kern)]:.1f} s")
    if args.api_budget:
        _api(args, out)
    if args.tuning:
        _tuning(args, problem, arch, out, _cuda)
    else:
        _write(args, out)


def _api(args, out: dict) -> None:
    # 6. the same searches through the API (``search(..., device="cuda")``): launches repeat
    # until the budget is spent, compile time and host work included in the wall time
    from accelmap.search.api import search

    out["api_search"] = {}
    for name, searcher, opts in (("random", "random", None), ("anneal", "anneal", None),
                                 ("anneal_one_per_step", "anneal", ONE_PER_STEP)):
        t0 = time.perf_counter()
        res = search(args.problem, args.arch, searcher=searcher, budget=args.api_budget, device="cuda", seed=0,
                     searcher_options=opts)
        row = {"wall_s": time.perf_counter() - t0, "evaluations": res.n_evaluations, "legal": res.n_valid,
               "best_edp": res.edp, **res.config}
        out["api_search"][name] = row
        print(f"api {name}: {row}")


def _tuning(args, problem, arch, out: dict, _cuda) -> None:
    # 5. registers, local memory and throughput under register caps and block sizes
    tuning = []
    # max_registers: 0 = no cap; None = the kernels' default (generic: none)
    for regs in ((0, 128, 96, 64) if args.tuning_kernel == "specialized" else (None, 128, 64)):
        for tpb in (128, 256):
            kw = {"threads": args.threads, "seed": 7, "max_registers": regs, "tpb": tpb}
            try:
                kw["kernel"] = args.tuning_kernel
                _cuda.random_search(problem, arch, **{**kw, "threads": 1024}, per_thread=2)  # compile both
                _cuda.anneal_search(problem, arch, **{**kw, "threads": 1024}, steps=2, n_init=2)
                r = _cuda.random_search(problem, arch, per_thread=max(args.per_thread // 4, 1), **kw,
                                        **({"orders": args.tuning_orders} if args.tuning_kernel == "specialized" else {}))
                a = _cuda.anneal_search(problem, arch, steps=max(args.steps // 4, 1), n_init=8, **kw)
                ai = _cuda.kernel_info(problem, arch, "anneal", regs, kernel=args.tuning_kernel)
                row = {"max_registers": regs, "tpb": tpb, **_cuda.kernel_info(problem, arch, "random", regs, kernel=args.tuning_kernel),
                       "anneal_registers": ai["registers"], "anneal_local_bytes": ai["local_bytes"],
                       "random_legal_per_s": r.legal_per_s, "anneal_legal_per_s": a.legal_per_s}
            except Exception as exc:  # a launch configuration the kernel cannot take
                row = {"max_registers": regs, "tpb": tpb, "error": str(exc)[:200]}
            tuning.append(row)
            print("tuning", row)
    out["tuning"] = tuning
    _write(args, out)


def _exhaustive(args) -> None:
    # 7. exhaustive search on the device: the host walks the tile rows, the device decodes
    # orders and bypass, checks and evaluates; only each block's best and counts come back

    from accelmap.arch.presets import preset
    from accelmap.costmodels import _cuda, _cuda_exhaustive
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.constraints import load_constraint_files
    from accelmap.mapper.space import MapSpace
    from accelmap.search.api import search
    from accelmap.workloads.builders import matmul
    from accelmap.workloads.io import load_problem

    _cuda.require()
    out: dict = {"machine": _machine(), "exhaustive": []}
    ref = args.timeloop_constraints
    res2a, eyeriss = load_problem("resnet50/res2a_branch2b"), preset("eyeriss-like")
    cons = load_constraint_files([ref / "arch_constraints.yaml", ref / "map_constraints.yaml"], problem=res2a,
                                 arch=eyeriss, level_map={"DummyBuffer": "shared_glb:y"})
    gemm = matmul("gemm16x8x8", m=16, n=8, k=8)
    cases = [("res2a_branch2b, Timeloop Eyeriss constraints", MapSpace(res2a, eyeriss, cons), True),
             ("gemm 16x8x8 on eyeriss-like, unconstrained", MapSpace(gemm, eyeriss), False)]
    cpu = LoopNestModel(engine="cpu")
    for label, space, with_cpu in cases:
        t0 = time.perf_counter()
        size = int(space.n_distinct(max_points=10**10))
        count_s = time.perf_counter() - t0
        budget = args.exhaustive_budget or None
        t0 = time.perf_counter()
        _cuda_exhaustive.exhaustive_search(space, max_size=10**10, size=size, budget=min(size, 4096))
        compile_s = time.perf_counter() - t0
        # the host's share alone: walking the tile rows and building their factors
        t0 = time.perf_counter()
        seen = 0
        for rows, counts in space._tile_chunks(10**10):
            space._rows_to_factors(rows)
            seen += int(counts.sum()) << len(space._keep_free)
            if budget is not None and seen >= budget:
                break
        host_s = time.perf_counter() - t0
        runs = [_cuda_exhaustive.exhaustive_search(space, max_size=10**10, size=size, budget=budget)
                for _ in range(args.repeats)]
        med = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
        if med.mapping is None:
            raise SystemExit(f"{label}: no legal point among the {med.evaluations:,} visited; raise --exhaustive-budget")
        check = cpu.evaluate(space.problem, space.arch, med.mapping)
        agree = bool(check.valid[0] and np.isclose(check.edp[0], med.edp, rtol=1e-12, atol=0))
        row = {"case": label, "problem": space.problem.describe(), "arch": space.arch.name,
               "cost_distinct_points": size, "free_bypass_bits": len(space._keep_free),
               "count_s": count_s, "compile_and_first_run_s": compile_s, "host_rows_only_s": host_s,
               "evaluations": med.evaluations, "legal": med.legal, "completed": med.completed,
               "launches": med.launches, "wall_s": med.seconds, "kernel_wait_s": med.kernel_s,
               "evals_per_s": med.evals_per_s, "legal_per_s": med.legal_per_s,
               "all_runs_wall_s": [r.seconds for r in runs], "best_edp": med.edp, "best_edp_cpu": float(check.edp[0]),
               "best_agrees_with_cpu": agree,
               "best_mapping": {"temporal": med.mapping.temporal[0].tolist(),
                                "spatial": med.mapping.spatial[0].tolist(), "order": med.mapping.order[0].tolist(),
                                "keep": med.mapping.keep[0].tolist()}}
        if with_cpu:
            t0 = time.perf_counter()
            c = search(space.problem, space.arch, searcher="exhaustive", space=space, budget=budget, seed=0)
            row["cpu_exhaustive"] = {"wall_s": time.perf_counter() - t0, "evaluations": c.n_evaluations,
                                     "legal": c.n_valid, "best_edp": c.best_objective,
                                     "same_counts": (c.n_evaluations, c.n_valid) == (med.evaluations, med.legal),
                                     "same_optimum": bool(np.isclose(c.best_objective, check.edp[0], rtol=1e-12))}
            t0 = time.perf_counter()
            g = search(space.problem, space.arch, searcher="exhaustive", space=space, budget=budget, seed=0,
                       device="cuda")
            row["api_device"] = {"wall_s": time.perf_counter() - t0, "evaluations": g.n_evaluations,
                                 "legal": g.n_valid, "best_edp": g.best_objective, **g.config}
        out["exhaustive"].append(row)
        print(f"exhaustive [{label}]: {med.evaluations:,} points ({med.legal:,} legal) in {med.seconds:.3f} s "
              f"({med.kernel_s:.3f} s waiting for the device): {med.evals_per_s:,.0f} evals/s, "
              f"{med.legal_per_s:,.0f} legal/s; best EDP {med.edp:.6g} (CPU agrees: {agree}); host rows alone "
              f"{host_s:.2f} s; compile + first run {compile_s:.1f} s"
              + (f"; CPU exhaustive {row['cpu_exhaustive']}" if with_cpu else ""), flush=True)
        _write(args, out)  # after each case, so that a cut-off run keeps what it measured


def _machine() -> dict:
    import numba
    from numba import cuda

    dev = cuda.get_current_device()
    name = getattr(dev, "name", "simulator")
    return {"gpu": name.decode() if isinstance(name, bytes) else str(name),
            "sm_count": getattr(dev, "MULTIPROCESSOR_COUNT", 0), "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__}


def _parse_config(text: str) -> tuple[str, dict]:
    name, _, body = text.partition(":")
    kw: dict = {}
    for item in filter(None, body.split(",")):
        key, _, val = item.partition("=")
        kw[key] = float(val) if key.startswith("t_") else int(val)
    return name, kw


def _anneal_sweep(args) -> None:
    # 8. annealing configurations on several seeds (best / median / worst EDP, legal
    # evaluations per second), then the API's annealing with several searcher options

    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _cuda
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.search.api import search
    from accelmap.workloads.io import load_problem

    _cuda.require()
    out: dict = {"machine": _machine(),
                 "problem": args.problem, "arch": args.arch, "seeds": args.seeds, "anneal_sweep": [], "api_sweep": []}
    problem, arch = load_problem(args.problem), load_arch(args.arch)
    cpu = LoopNestModel(engine="cpu")
    configs = [_parse_config(c) for c in args.anneal_sweep]
    compile_s = {}
    def kern_key(kw: dict) -> tuple:  # what a kernel is compiled for (orders > 1 or not, lanes, block size)
        return kw.get("orders", 1) > 1, kw.get("lanes", 1), kw.get("tpb", 128)

    for _label, kw in configs:  # compile every kernel first (restarts, steps and temperatures are launch arguments)
        if kern_key(kw) not in compile_s:
            t0 = time.perf_counter()
            _cuda.anneal_search(problem, arch, threads=1024, steps=2, n_init=1, seed=99, orders=kw.get("orders", 1),
                                lanes=kw.get("lanes", 1), tpb=kw.get("tpb", 128), kernel="specialized")
            compile_s[kern_key(kw)] = time.perf_counter() - t0
    runs: dict = {label: [] for label, _ in configs}
    for seed in args.seeds:  # configurations in turn within each seed
        for label, kw in configs:
            kw = dict(kw)
            threads = kw.pop("threads", args.threads)
            steps = kw.pop("steps", args.steps)
            runs[label].append(_cuda.anneal_search(problem, arch, threads=threads, steps=steps, n_init=8, seed=seed,
                                                   kernel="specialized", **kw))
    for label, kw in configs:
        rs = runs[label]
        edps = sorted(float(r.edp[0]) for r in rs)
        med = sorted(rs, key=lambda r: r.legal_per_s)[len(rs) // 2]
        agree = True
        for r in rs:
            m = cpu.evaluate(problem, arch, MappingBatch(temporal=r.temporal, spatial=r.spatial, order=r.order,
                                                         keep=r.keep))
            agree &= bool(m.valid.all() and np.allclose(m.edp, r.edp, rtol=1e-12))
        info = _cuda.kernel_info(problem, arch, "anneal", kernel="specialized", lanes=kw.get("lanes", 1),
                                 orders=kw.get("orders", 1), tpb=kw.get("tpb", 128))
        row = {"config": label, **kw, "threads": kw.get("threads", args.threads), "steps": kw.get("steps", args.steps),
               **info, "compile_s": compile_s[kern_key(kw)],
               "evaluations": med.evaluations, "legal": med.legal, "kernel_s": med.seconds,
               "legal_per_s": med.legal_per_s, "all_runs_legal_per_s": [r.legal_per_s for r in rs],
               "all_runs_best_edp": [float(r.edp[0]) for r in rs],
               "best_median_worst_edp": [edps[0], edps[len(edps) // 2], edps[-1]], "best_rows_agree_with_cpu": agree}
        out["anneal_sweep"].append(row)
        print(f"sweep {label}: {med.evaluations:,} evals ({med.legal:,} legal) in {med.seconds:.3f} s: "
              f"{med.legal_per_s:.3e} legal/s; EDP best/median/worst {edps[0]:.4e} / {edps[len(edps) // 2]:.4e} / "
              f"{edps[-1]:.4e}; CPU agrees {agree}", flush=True)
    _write(args, out)
    from accelmap.search import gpu

    steps0 = gpu._MULTI_STEPS
    for text in args.api_sweep or []:
        label, opts = _parse_config(text)
        # (exploration: ``launch_steps`` sets the evaluations per thread and launch of chains of
        # several mappings per step, the module's _MULTI_STEPS, for this configuration only)
        gpu._MULTI_STEPS = opts.pop("launch_steps", steps0)
        budget = opts.pop("budget", args.api_budget or 10**9)
        limit = opts.pop("time_ms", None)  # a time limit (ms) instead of the budget
        budget, limit = (None, limit / 1000) if limit else (budget, None)
        rows = []
        # (compiled first: a time limit then measures the search, not the compile)
        search(args.problem, args.arch, searcher="anneal", budget=10**6, device="cuda", seed=99,
               searcher_options=opts or None)
        for seed in args.seeds:
            t0 = time.perf_counter()
            res = search(args.problem, args.arch, searcher="anneal", budget=budget, time_limit_s=limit, device="cuda",
                         seed=seed, searcher_options=opts or None)
            rows.append({"seed": seed, "wall_s": time.perf_counter() - t0, "evaluations": res.n_evaluations,
                         "legal": res.n_valid, "best_edp": res.edp, **res.config})
        edps = sorted(r["best_edp"] for r in rows)
        summary = {"config": label, "searcher_options": opts, "budget": budget, "time_limit_s": limit,
                   "launch_steps": gpu._MULTI_STEPS,
                   "runs": rows,
                   "best_median_worst_edp": [edps[0], edps[len(edps) // 2], edps[-1]],
                   "median_legal_per_s": float(np.median([r["legal_evaluations_per_s"] for r in rows])),
                   "median_wall_s": float(np.median([r["wall_s"] for r in rows]))}
        out["api_sweep"].append(summary)
        print(f"api {label} {opts}: legal/s {summary['median_legal_per_s']:.3e}, wall {summary['median_wall_s']:.2f} s "
              f"(evaluations {np.median([r['evaluations'] for r in rows]):.3e}) "
              f"(first with compile {rows[0]['wall_s']:.2f} s); EDP best/median/worst "
              f"{edps[0]:.4e} / {edps[len(edps) // 2]:.4e} / {edps[-1]:.4e}", flush=True)
        _write(args, out)
    gpu._MULTI_STEPS = steps0


def _write(args, out: dict) -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
