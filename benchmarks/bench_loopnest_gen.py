"""The loopnest CPU engine's generated rows against the specialised driver, one core.

Run by hand from the repo root::

    python benchmarks/bench_loopnest_gen.py [--rows 10000] [--repeats 25] [--out FILE]

Both drivers of one structure (`accelmap.costmodels._loopnest_gen.driver`, the row written out
per structure, and `accelmap.costmodels._loopnest_cpu._driver`, the shared rules compiled with
the structure's tables as constants) run on the same pool of legal `MapSpace.sample_valid` rows
of res2a_branch2b on eyeriss-like (the case of ``bench_costmodel.py --backends``), on the calling
thread, each timed in turn within every repeat (interleaved), objective-only and with counts;
their outputs are checked equal first (cycles, energy, validity, reason, and the six counts).
Time is the thread's CPU time (`time.thread_time`), which on a shared machine leaves out the time
the thread waits for a core. Results: ``benchmarks/results/bench_loopnest_gen.json``: medians and
bests in ns per row, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_loopnest_gen.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    import numba

    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _loopnest_cpu, _loopnest_gen, _loopnest_kernel, _loopnest_rules
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    numba.set_num_threads(1)
    problem, arch = load_problem("resnet50/res2a_branch2b"), load_arch("eyeriss-like")
    consts = _loopnest_kernel.kernel_consts(problem, arch)
    pool = MapSpace(problem, arch).sample_valid(args.rows, np.random.default_rng(0))
    n, L, D = pool.temporal.shape
    T, C = pool.keep.shape[2], consts.coef.shape[1]
    frac = problem.existing_fraction() if problem.has_padding else np.ones(T)
    c = consts
    rt = (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw, c.write_bw, c.tensor_size, c.scal, frac)
    mp = tuple(np.ascontiguousarray(x) for x in (pool.temporal, pool.spatial, pool.order, pool.keep))

    def run(rows, full: bool) -> tuple[np.ndarray, ...]:  # noqa: ANN001
        res, valid, codes = np.empty((n, 4)), np.empty(n, dtype=np.bool_), np.empty((n, 2), dtype=np.int64)
        cnt = np.empty((n, 6, L, T)) if full else np.empty((1, 6, L, T))
        sc = tuple(x[0] for x in _loopnest_rules.scratch(1, L, D, T, C, int(c.ints[1])))
        rows(0, n, full, mp, rt, (res, valid, codes, cnt), sc)
        return (res, valid, codes, cnt) if full else (res, valid, codes)

    drivers = {"generated": _loopnest_gen.driver(c.structure), "specialised": _loopnest_cpu._driver(c.structure)}
    first = {}
    for name, rows in drivers.items():
        t0 = time.process_time()
        run(rows, False)
        run(rows, True)
        first[name] = time.process_time() - t0
    for full in (False, True):
        a, b = run(drivers["generated"], full), run(drivers["specialised"], full)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    load_start = list(os.getloadavg())
    times: dict[str, list[float]] = {f"{k}_{m}": [] for k in drivers for m in ("objective", "counts")}
    for _ in range(args.repeats):
        for name, rows in drivers.items():
            for mode, full in (("objective", False), ("counts", True)):
                t0 = time.thread_time()
                run(rows, full)
                times[f"{name}_{mode}"].append((time.thread_time() - t0) / n * 1e9)
    out = {"case": "res2a_branch2b / eyeriss-like", "rows": n, "repeats": args.repeats, "legal_rows": True,
           "load_average_start": load_start, "load_average_end": list(os.getloadavg()),
           "first_call_cpu_s_this_process": first,
           "ns_per_row": {k: {"median": float(np.median(v)), "best": float(min(v))} for k, v in times.items()}}
    for mode in ("objective", "counts"):
        out[f"speedup_{mode}_median"] = (out["ns_per_row"][f"specialised_{mode}"]["median"]
                                        / out["ns_per_row"][f"generated_{mode}"]["median"])
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for k, v in out["ns_per_row"].items():
        print(f"{k:24s} median {v['median']:6.0f}  best {v['best']:6.0f} ns/row")
    print(f"load {load_start} -> {out['load_average_end']}; wrote {args.out}")


if __name__ == "__main__":
    main()
