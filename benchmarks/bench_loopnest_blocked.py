"""The row-blocked loopnest kernel (`costmodels/_loopnest_block.py`) against the
row-at-a-time one (`costmodels/_loopnest_cpu.py`), on one core, interleaved.

Run by hand (from the repo root, with an empty numba cache for the compile times):
``NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/bench_loopnest_blocked.py``. Pool: the
loopnest pool of ``bench_costmodel.py --backends`` (res2a_branch2b on eyeriss-like, legal
MapSpace samples). Entries, objective only (cycles, energy, validity, reason; no counts):
``row_at_a_time`` the specialised driver the cpu engine uses, ``blocked`` the row-blocked
driver, ``blocked_transpose_only`` its first pass alone (the structure-of-arrays copy of a
block, the tiles and the per-row gathers of each loop slot, replicated below) -- the part
of the blocked kernel that cannot be vectorised while a `MappingBatch` stores a mapping's
values contiguously (batch axis first). Writes ``results/bench_loopnest_blocked.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
from numba import njit, types

RESULTS = Path(__file__).resolve().parent / "results" / "bench_loopnest_blocked.json"


def _transpose_only(L: int, D: int, T: int, fanl: tuple, B: int, stride: int):  # noqa: ANN202
    """Pass 1 of `_loopnest_block.driver` (same stores, same scratch layout) for a structure."""

    @njit(inline="always")
    def U(k):  # noqa: ANN001, ANN202
        return types.uint64(k)

    oA, oX, oY, oTI, oKP, oSD, oSB, oSS, oOB = (k * (L + 1) * D * stride for k in range(9))

    @njit(error_model="numpy")
    def run(temporal, spatial, order, keep, W):  # noqa: ANN001, ANN202
        n = temporal.shape[0]
        for base in range(0, n, B):
            nb = min(B, n - base)
            for r in range(nb):
                i = base + r
                for d in range(D):
                    W[U(oTI + (L * D + d) * stride + r)] = 1
                for lv in range(L - 1, -1, -1):
                    for d in range(D):
                        a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
                        W[U(oA + (lv * D + d) * stride + r)] = a
                        W[U(oX + (lv * D + d) * stride + r)] = x
                        W[U(oY + (lv * D + d) * stride + r)] = y
                        W[U(oTI + (lv * D + d) * stride + r)] = W[U(oTI + ((lv + 1) * D + d) * stride + r)] * a * x * y
                for lv in range(L):
                    for t in range(T):
                        W[U(oKP + (lv * T + t) * stride + r)] = 1 if keep[i, lv, t] else 0
                for lv in range(L):
                    seen = 0
                    for j in range(D):
                        d = order[i, lv, j]
                        if d < 0 or d >= D:
                            seen |= 1 << D
                            d = 0
                        else:
                            seen |= 1 << d
                        s = lv * D + j
                        W[U(oSD + s * stride + r)] = d
                        W[U(oSB + s * stride + r)] = temporal[i, lv, d]
                        st = W[U(oTI + ((lv + 1) * D + d) * stride + r)]
                        if fanl[lv]:
                            st *= spatial[i, lv, d, 0] * spatial[i, lv, d, 1]
                        W[U(oSS + s * stride + r)] = st
                    W[U(oOB + lv * stride + r)] = seen != (1 << D) - 1

    return run, 9 * (L + 1) * D * stride


def main() -> None:
    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _loopnest_block as lb
    from accelmap.costmodels import _loopnest_cpu as lc
    from accelmap.costmodels import _loopnest_kernel as lk
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    problem, arch = load_problem("resnet50/res2a_branch2b"), load_arch("eyeriss-like")
    batch = MapSpace(problem, arch).sample_valid(10_000, np.random.default_rng(0))
    consts = lk.kernel_consts(problem, arch)
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    frac = problem.existing_fraction() if problem.has_padding else np.ones(T)
    mp = (np.ascontiguousarray(batch.temporal), np.ascontiguousarray(batch.spatial),
          np.ascontiguousarray(batch.order), np.ascontiguousarray(batch.keep))
    n = len(batch)
    res, valid, codes = np.empty((n, 4)), np.empty(n, np.bool_), np.empty((n, 2), np.int64)
    cnt = np.empty((1, 1, 6, L, T))
    sc = lk.scratch(1, L, D, T, consts.coef.shape[1], int(consts.ints[1]))
    fanl = consts.structure[-1]
    transpose, size = _transpose_only(L, D, T, fanl, lb.BLOCK_ROWS, lb.BLOCK_ROWS + lb._PAD)
    W = np.zeros(size, np.int64)
    numpy_model = LoopNestModel(engine="numpy")
    fns = {
        "numpy": lambda: numpy_model.evaluate(problem, arch, batch),
        "row_at_a_time": lambda: lc.evaluate_rows(consts, *mp, frac, res, valid, codes, cnt, False, sc, 1),
        "blocked": lambda: lb.evaluate_rows(consts, *mp, frac, res, valid, codes, cnt[0], False),
        "blocked_transpose_only": lambda: transpose(*mp, W),
    }
    first_call = {}
    for name, fn in fns.items():  # compile (or load from numba's cache)
        t0 = time.perf_counter()
        fn()
        first_call[name] = time.perf_counter() - t0
    # the two drivers agree (the property tests hold both equal to the numpy path)
    ref = [x.copy() for x in (res, valid, codes)]
    fns["row_at_a_time"]()
    assert all(np.array_equal(a, b) for a, b in zip(ref, (res, valid, codes), strict=True))
    load_start = list(os.getloadavg())
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(15):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    out = {"load_average_start": load_start, "load_average_end": list(os.getloadavg()), "batch": n,
           "case": "res2a_branch2b/eyeriss-like legal MapSpace samples", "block_rows": lb.BLOCK_ROWS,
           "first_call_s": first_call, "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR"), "entries": {}}
    for name, ts in times.items():
        med = float(np.median(ts))
        out["entries"][name] = {"median_ns_per_row": med / n * 1e9, "best_ns_per_row": min(ts) / n * 1e9,
                                "evals_per_s": n / med}
        print(f"{name:>24}: median {med / n * 1e9:7.0f} ns/row, best {min(ts) / n * 1e9:7.0f} "
              f"({n / med:,.0f}/s); first call {first_call[name]:.1f} s")
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"load {load_start} -> {out['load_average_end']}; wrote {RESULTS}")


if __name__ == "__main__":
    main()
