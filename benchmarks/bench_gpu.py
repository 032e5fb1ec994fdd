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
4. re-evaluates the best rows on the CPU (same EDP) and records the best EDP found.

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problem", default="resnet50/conv3_1")
    ap.add_argument("--arch", default="eyeriss-like")
    ap.add_argument("--threads", type=int, default=1 << 18)
    ap.add_argument("--per-thread", type=int, default=256, help="random search: draws per thread")
    ap.add_argument("--steps", type=int, default=256, help="anneal: steps per chain")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--tuning-only", action="store_true", help="only step 5 (register caps, block sizes)")
    args = ap.parse_args()

    import numba
    from numba import cuda

    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _cuda
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.mapper.space import MapSpace
    from accelmap.testing.costmodel_checks import assert_engines_agree
    from accelmap.workloads.io import load_problem

    _cuda.require()
    dev = cuda.get_current_device()
    out: dict = {"machine": {"gpu": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
                             "sm_count": dev.MULTIPROCESSOR_COUNT, "python": platform.python_version(),
                             "numpy": np.__version__, "numba": numba.__version__},
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
    batch = MappingBatch.concat([space.sample(20000, rng), space.sample_valid(4000, rng)])
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
    big = space.sample_valid(1_000_000, rng)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        gpu.evaluate(problem, arch, big)
        times.append(time.perf_counter() - t0)
    out["host_batch"] = {"rows": len(big), "median_s": float(np.median(times)),
                         "evals_per_s": len(big) / float(np.median(times))}
    print(f"host batch of {len(big):,}: {out['host_batch']['evals_per_s']:,.0f} evals/s (transfers included)")

    # 3. device searches
    _cuda.random_search(problem, arch, threads=1024, per_thread=2, seed=99)  # compile
    _cuda.anneal_search(problem, arch, threads=1024, steps=2, n_init=2, seed=99)
    for name, fn, kw in (("random", _cuda.random_search, {"per_thread": args.per_thread}),
                         ("anneal", _cuda.anneal_search, {"steps": args.steps, "n_init": 8})):
        runs = []
        for rep in range(args.repeats):
            r = fn(problem, arch, threads=args.threads, seed=rep, **kw)
            runs.append(r)
        med = sorted(runs, key=lambda r: r.legal_per_s)[len(runs) // 2]
        best = min(runs, key=lambda r: r.edp[0] if len(r.edp) else np.inf)
        rows = MappingBatch(temporal=best.temporal, spatial=best.spatial, order=best.order, keep=best.keep)
        check = cpu.evaluate(problem, arch, rows)
        agree = bool(check.valid.all() and np.allclose(check.edp, best.edp, rtol=1e-12))
        out[name] = {"threads": args.threads, **kw, "evaluations": med.evaluations, "legal": med.legal,
                     "kernel_s": med.seconds, "evals_per_s": med.evals_per_s, "legal_per_s": med.legal_per_s,
                     "all_runs_legal_per_s": [r.legal_per_s for r in runs],
                     "best_edp": float(best.edp[0]), "best_rows_agree_with_cpu": agree,
                     "best_mapping": {"temporal": best.temporal[0].tolist(), "spatial": best.spatial[0].tolist(),
                                      "order": best.order[0].tolist(), "keep": best.keep[0].tolist()}}
        print(f"{name}: {med.evaluations:,} evaluations ({med.legal:,} legal) in {med.seconds:.3f} s: "
              f"{med.legal_per_s:,.0f} legal/s, {med.evals_per_s:,.0f} evals/s; best EDP {best.edp[0]:.4g} "
              f"(CPU agrees: {agree})")
    _tuning(args, problem, arch, out, _cuda)


def _tuning(args, problem, arch, out: dict, _cuda) -> None:
    # 5. registers, local memory and throughput under register caps and block sizes
    tuning = []
    for regs in (None, 128, 64):
        for tpb in (64, 128, 256):
            kw = {"threads": args.threads, "seed": 7, "max_registers": regs, "tpb": tpb}
            try:
                _cuda.random_search(problem, arch, **{**kw, "threads": 1024}, per_thread=2)
                r = _cuda.random_search(problem, arch, per_thread=max(args.per_thread // 4, 1), **kw)
                a = _cuda.anneal_search(problem, arch, steps=max(args.steps // 4, 1), n_init=8, **kw)
                row = {"max_registers": regs, "tpb": tpb, **_cuda.kernel_info(problem, arch, "random", regs),
                       "random_legal_per_s": r.legal_per_s, "anneal_legal_per_s": a.legal_per_s}
            except Exception as exc:  # a launch configuration the kernel cannot take
                row = {"max_registers": regs, "tpb": tpb, "error": str(exc)[:200]}
            tuning.append(row)
            print("tuning", row)
    out["tuning"] = tuning
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
