"""The systolic and aspect models' cuda engines on a GPU: equality with the numpy path, first
calls, and host batches of 100,000 and 1,000,000 rows against the cpu engine on every core.

Run by hand through the device tool (needs numba-cuda and a GPU), from the repo root::

    python benchmarks/bench_cuda_models.py [--out results.json]

For each case, 4,000 rows (2,000 `MapSpace.sample` and 2,000 `sample_valid` for systolic;
2,000 directive-form and 2,000 constrained samples for aspect) are evaluated by
``engine="cuda"`` and compared with ``engine="numpy"`` (`Metrics` with
`assert_engines_agree`; systolic's `SystolicStats` field by field), timing the first call
(the kernel's compile). Then a pool of legal rows, tiled to 100,000 and 1,000,000 rows, is
evaluated three times by the cuda engine (wall time, transfers included) and, for systolic,
100,000 rows by the cpu engine on all of numba's threads. Evaluations per second from the
best of three. The issue's per-core comparison is ``bench_costmodel.py --backends numpy cpu
cuda``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def _tile(batch, n: int):  # noqa: ANN001, ANN202
    from accelmap.mapper.mapping import MappingBatch

    k = -(-n // len(batch))
    return MappingBatch.concat([batch] * k).take(slice(0, n))


def _best_rate(fn, n: int, repeats: int = 3) -> tuple[float, list[float]]:  # noqa: ANN001
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return n / min(times), times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import _aspect_case, _aspect_pool

    from accelmap.arch.presets import preset
    from accelmap.costmodels.aspect import AspectModel, aspect_constraints
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.mapper.space import MapSpace
    from accelmap.testing.costmodel_checks import assert_engines_agree
    from accelmap.testing.examples import aspect_batch
    from accelmap.workloads.builders import conv2d, matmul

    out: dict = {"first_calls": {}}
    arch = preset("systolic")
    for problem in (conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8),
                    matmul("GEMM_512", m=512, n=512, k=512, word_bits=8),
                    conv2d("c", c=8, k=8, p=6, q=6, r=3, s=3, word_bits=8)):
        space, rng = MapSpace(problem, arch), np.random.default_rng(1)
        batch = MappingBatch.concat([space.sample(2000, rng), space.sample_valid(2000, rng)])
        gpu = SystolicModel(engine="cuda")
        t0 = time.perf_counter()
        got = gpu.evaluate(problem, arch, batch)
        first = time.perf_counter() - t0
        assert_engines_agree(got, SystolicModel(engine="numpy").evaluate(problem, arch, batch), what=problem.name)
        s1, s2 = gpu.stats(problem, arch, batch), SystolicModel(engine="numpy").stats(problem, arch, batch)
        for f in s1.__dataclass_fields__:
            a, b = getattr(s1, f), getattr(s2, f)
            assert np.array_equal(a, b) or np.allclose(a, b, rtol=1e-12, atol=0), f
        print(f"systolic {problem.name}: equal on {len(batch)} rows ({int(got.valid.sum())} valid), "
              f"first call {first:.1f} s", flush=True)
        out["first_calls"][f"systolic/{problem.name}"] = {"first_call_s": first, "rows": len(batch),
                                                         "valid": int(got.valid.sum()), "equal": True}
        pool = space.sample_valid(20000, rng)
        cpu = SystolicModel(engine="cpu")
        cpu.evaluate(problem, arch, pool.take(slice(0, 1000)))
        rows = {}
        for n in (100_000, 1_000_000):
            b = _tile(pool, n)
            rate, times = _best_rate(lambda b=b, m=gpu, p=problem: m.evaluate(p, arch, b), n)
            c100 = b.take(slice(0, 100_000))
            cpu_rate, _ = _best_rate(lambda c=c100, m=cpu, p=problem: m.evaluate(p, arch, c), 100_000)
            rows[n] = {"cuda_evals_per_s": rate, "cuda_s": times, "cpu_all_threads_evals_per_s_100k": cpu_rate}
            print(f"systolic {problem.name} {n} rows: cuda {rate:,.0f}/s, cpu (all threads, 100,000 rows) "
                  f"{cpu_rate:,.0f}/s", flush=True)
        out[f"systolic/{problem.name}"] = rows
    for name, problem in (("eyeriss-like", conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3)),
                          ("tpu-v1-like", matmul("mm", m=64, n=32, k=48))):  # (the second: every row illegal)
        arch, rng = preset(name), np.random.default_rng(1)
        space = MapSpace(problem, arch, aspect_constraints(problem, arch))
        batch = MappingBatch.concat([aspect_batch(problem, arch, 2000, rng), space.sample(2000, rng)])
        t0 = time.perf_counter()
        got = AspectModel(engine="cuda").evaluate(problem, arch, batch)
        first = time.perf_counter() - t0
        assert_engines_agree(got, AspectModel(engine="numpy").evaluate(problem, arch, batch), what=name)
        print(f"aspect {problem.name}/{name}: equal on {len(batch)} rows ({int(got.valid.sum())} valid), "
              f"first call {first:.1f} s", flush=True)
        out["first_calls"][f"aspect/{problem.name}/{name}"] = {"first_call_s": first, "rows": len(batch),
                                                               "valid": int(got.valid.sum()), "equal": True}
    problem, arch = _aspect_case()
    pool = _aspect_pool(problem, arch, 20000, np.random.default_rng(0))
    gpu = AspectModel(engine="cuda")
    assert_engines_agree(gpu.evaluate(problem, arch, pool), AspectModel(engine="cpu").evaluate(problem, arch, pool),
                         what="vgg16_conv3")
    rows = {}
    for n in (100_000, 1_000_000):
        b = _tile(pool, n)
        rate, times = _best_rate(lambda b=b: gpu.evaluate(problem, arch, b), n)
        rows[n] = {"cuda_evals_per_s": rate, "cuda_s": times}
        print(f"aspect vgg16_conv3 {n} rows: cuda {rate:,.0f}/s", flush=True)
    out["aspect/vgg16_conv3"] = rows
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
