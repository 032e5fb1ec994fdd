"""Cost-model throughput: evaluations per second per core of the batched path.

Run by hand (from the repo root): ``python benchmarks/bench_costmodel.py [--models loopnest]``.
Results go to ``benchmarks/results/bench_costmodel.json`` (one key per model; a run updates
only the models it measured). One function per model; each returns a JSON-ready dict.
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
        secs = _time_best(lambda b=batch: model.evaluate(problem, arch, b), repeats)
        peak = _peak_bytes(lambda b=batch: model.evaluate(problem, arch, b))
        rows.append({"batch": n, "seconds": secs, "evals_per_s": n / secs, "peak_bytes": peak,
                     "peak_bytes_per_mapping": peak / n})
    scalar_n = 200
    one = pool.take(slice(0, scalar_n))
    t_scalar = _time_best(lambda: [model.evaluate_one(problem, arch, one[i]) for i in range(scalar_n)], 1)
    return {
        "problem": problem.describe(), "arch": arch.name, "valid_pool": len(pool), "sampling_s": sample_s,
        "rows": rows, "scalar_evals_per_s": scalar_n / t_scalar, "target_evals_per_s": 1e6,
    }


MODELS = {"loopnest": bench_loopnest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", nargs="*", default=sorted(MODELS), choices=sorted(MODELS))
    ap.add_argument("--sizes", nargs="*", type=int, default=[1000, 10000, 100000])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    out = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    out["machine"] = {"python": platform.python_version(), "numpy": np.__version__,
                      "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine()}
    for name in args.models:
        out[name] = MODELS[name](args.sizes, args.repeats)
        for r in out[name]["rows"]:
            print(f"{name}: batch {r['batch']:>7}: {r['evals_per_s']:>12,.0f} evals/s, "
                  f"{r['peak_bytes_per_mapping']:,.0f} B peak per mapping")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
