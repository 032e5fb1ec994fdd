"""The default search before and after the compiled kernels.

``accelmap search resnet50/conv3_1 --arch eyeriss-like`` (the default searcher and budget;
``--arch``, ``--model`` and ``--layer`` change the case),
run in one process with the numpy engine and with the cpu engine in turn (interleaved,
``--repeats`` pairs), then the cpu engine under a time limit equal to the numpy runs' median
wall time (best EDP at equal wall time). Results: ``benchmarks/results/bench_default_search.json``
(``bench_default_search_<model>.json`` for another model).

``--compare space`` keeps the cost model on its compiled engine and switches only the
MapSpace operations (decode, check, neighbour moves, sampling: `MapSpace(engine=...)`)
between the numpy path and the compiled one; results in
``bench_default_search_space.json`` (``_space_<model>`` for another model).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_default_search.json"


CASE = {"layer": "resnet50/conv3_1", "arch": "eyeriss-like", "model": "loopnest"}


COMPARE = {"what": "engines"}


def _run(engine: str, **kw) -> dict:
    from accelmap.search.api import search

    extra = {}
    if COMPARE["what"] == "space":  # the model compiled, the MapSpace on ``engine``
        from accelmap.arch.presets import preset
        from accelmap.mapper.space import MapSpace
        from accelmap.workloads.zoo import layer

        os.environ["ACCELMAP_KERNELS"] = "cpu"
        extra["space"] = MapSpace(layer(CASE["layer"]), preset(CASE["arch"]), engine=engine)
    else:
        os.environ["ACCELMAP_KERNELS"] = engine  # read when the model and the space are built
    t0, c0 = time.perf_counter(), time.process_time()
    r = search(CASE["layer"], CASE["arch"], model=CASE["model"], **kw, **extra)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"engine": engine, "wall_s": wall, "process_cpu_s": cpu, "evaluations": r.n_evaluations, "evals_per_s": r.n_evaluations / wall,
            "best_edp": r.edp, **kw}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--layer", default=CASE["layer"])
    ap.add_argument("--arch", default=CASE["arch"])
    ap.add_argument("--model", default=CASE["model"])
    ap.add_argument("--compare", choices=["engines", "space"], default="engines",
                    help="engines: model and MapSpace both numpy vs both cpu; space: the MapSpace only")
    args = ap.parse_args()
    CASE.update(layer=args.layer, arch=args.arch, model=args.model)
    COMPARE["what"] = args.compare
    stem = "bench_default_search" + ("_space" if args.compare == "space" else "")
    results = RESULTS.with_name(f"{stem}.json" if args.model == "loopnest" else f"{stem}_{args.model}.json")
    import numba

    _run("cpu", budget=2000)  # compile or load the kernels, warm the caches
    _run("numpy", budget=2000)
    runs = []
    for _ in range(args.repeats):
        for engine in ("numpy", "cpu"):
            runs.append(_run(engine))
            print(runs[-1])
    med = {e: float(np.median([r["wall_s"] for r in runs if r["engine"] == e])) for e in ("numpy", "cpu")}
    med_cpu = {e: float(np.median([r["process_cpu_s"] for r in runs if r["engine"] == e])) for e in ("numpy", "cpu")}
    # best EDP at equal wall time: both engines under the numpy runs' median wall time as a
    # time limit (a time-limited anneal cools over a fixed number of steps, not a budget, so
    # the numpy engine is run that way too: the same algorithm on both)
    equal = _run("cpu", time_limit_s=med["numpy"])
    print("cpu at the numpy wall time:", equal)
    equal_numpy = _run("numpy", time_limit_s=med["numpy"])
    print("numpy at its own wall time, time-limited:", equal_numpy)
    # and with the default (budgeted) schedule: the budget the cpu engine scores in about
    # the numpy engine's wall time (the default budget times the speedup)
    from accelmap.search.api import DEFAULT_BUDGET

    scaled = _run("cpu", budget=int(round(DEFAULT_BUDGET * med["numpy"] / med["cpu"], -4)))
    print("cpu with the budget it scores in the numpy wall time:", scaled)
    out = {"compare": args.compare, "load_average": list(os.getloadavg()), "numba_threads": numba.get_num_threads(),
           "command": f"accelmap search {CASE['layer']} --arch {CASE['arch']} --model {CASE['model']}", "runs": runs,
           "median_wall_s": med, "speedup": med["numpy"] / med["cpu"],
           "median_process_cpu_s": med_cpu, "speedup_process_cpu": med_cpu["numpy"] / med_cpu["cpu"], "cpu_at_numpy_wall_time": equal,
           "numpy_at_numpy_wall_time": equal_numpy, "cpu_scaled_budget": scaled}
    results.write_text(json.dumps(out, indent=1) + "\n")
    print(f"speedup {out['speedup']:.2f}x; wrote {results}")


if __name__ == "__main__":
    main()
