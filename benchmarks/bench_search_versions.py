"""The default search with two source trees of accelmap (before / after a change).

``python benchmarks/bench_search_versions.py --before ../main/src [--after src]`` runs
``search("resnet50/conv3_1", "eyeriss-like")`` (the default searcher, budget and engine: what
``accelmap search resnet50/conv3_1 --arch eyeriss-like`` does) in a fresh process per run,
alternating the two trees (``--repeats`` pairs, after one warm-up run each, so that both load
compiled kernels from numba's cache and the load of a shared machine hits them alike), then the
two trees under a time limit equal to the ``before`` runs' median wall time (evaluations and
best EDP at equal wall time). Results: ``benchmarks/results/bench_search_versions.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "bench_search_versions.json"

CODE = """
import json, sys, time
from accelmap.search.api import search
kw = json.loads(sys.argv[1])
t0 = time.perf_counter()
r = search(kw.pop("layer"), kw.pop("arch"), **kw)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "evaluations": r.n_evaluations, "best_edp": r.edp}))
"""


def _run(src: Path, **kw) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", CODE, json.dumps(kw)], env=env, capture_output=True, text=True,
                         check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["evals_per_s"] = res["evaluations"] / res["wall_s"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", type=Path, required=True, help="the src folder of the earlier tree")
    ap.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--layer", default="resnet50/conv3_1")
    ap.add_argument("--arch", default="eyeriss-like")
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"JSON file to write (default {RESULTS})")
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    case = {"layer": args.layer, "arch": args.arch}
    for src in trees.values():  # compile or load every kernel once per tree (past the 100,000
        _run(src, **case, budget=200_000)  # rows after which the loopnest cpu engine specialises)
    runs = []
    for _ in range(args.repeats):
        for name, src in trees.items():
            runs.append({"tree": name, **_run(src, **case)})
            print(runs[-1])
    med = {k: float(np.median([r["wall_s"] for r in runs if r["tree"] == k])) for k in trees}
    eps = {k: float(np.median([r["evals_per_s"] for r in runs if r["tree"] == k])) for k in trees}
    # Both trees under a time limit equal to the ``before`` runs' median wall time (a search
    # under a time limit schedules its phases by time, so only such runs compare).
    equal = {name: _run(src, **case, time_limit_s=med["before"]) for name, src in trees.items()}
    print("at the before runs' median wall time:", equal)
    out = {"load_average": list(os.getloadavg()), "trees": {k: str(v) for k, v in trees.items()},
           "command": f"accelmap search {args.layer} --arch {args.arch}", "runs": runs, "median_wall_s": med,
           "median_evals_per_s": eps, "speedup": med["before"] / med["after"], "at_before_median_wall_time": equal}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"speedup {out['speedup']:.2f}x; wrote {args.out}")


if __name__ == "__main__":
    main()
