"""The exact searcher's warm start run first or beside the branch and bound, interleaved in
this process: time to proof (or the gap at ``--time``) of ``accelmap.search(...,
searcher="exact")`` as a user runs it (warm start included, every worker).

Versions (switches of the exact mapper, `accelmap.search._exact_switches`):

* ``old``: the warm start (``anneal``, 1M evaluations) first, the tree from its mapping
  (``_WARM_BESIDE = False``);
* ``beside``: the warm start in a forked process beside the tree, which starts from no
  incumbent (``_WARM_BESIDE = True``, ``_QUICK_WARM = 0``: no quick warm start);
* ``new``: the same after a quick warm start of ``_QUICK_WARM`` (20,000) evaluations here,
  the searcher's default.

The bounds are the same in all three (no bound code is switched); the trees differ only by
the incumbent they cut with and when. Each row has the wall and CPU seconds (this process
and its children: the workers and the warm start's process), the nodes, the certified gap,
the warm start's evaluations and the load average at its start and end. On a machine shared
with other jobs a row's wall time moves with the load: compare the versions' rows of one
repeat (run one after the other) and their medians.

Usage::

    python benchmarks/bench_exact_warm.py [--cases CASE ...] [--time 60] [--repeats 2]
        [--versions old beside new] [--out FILE]

A case is ``LAYER@ARCH`` or ``timeloop:ARCH:LAYER`` (as ``bench_exact_nodes.py``). Writes
``benchmarks/results/bench_exact_warm.json``. Benchmarks are run by hand; nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "bench_exact_warm.json"
CASES = ["timeloop:simple3:L2_resnet50_res2a_2a", "timeloop:simple3:L7_mbv2_dw3x3_c144",
         "resnet50/res4b_branch2a@eyeriss-like", "timeloop:simple3:L3_resnet50_res2a_2b"]
VERSIONS: dict[str, dict[str, Any]] = {"old": {"_WARM_BESIDE": False},
                                       "beside": {"_WARM_BESIDE": True, "_QUICK_WARM": 0},
                                       "new": {"_WARM_BESIDE": True, "_QUICK_WARM": 20_000}}


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    from bench_exact_nodes import _load

    from accelmap.search.api import search

    try:  # the exact mapper's switches (`_exact_switches`; a checkout before it kept them in `exact`)
        import accelmap.search._exact_switches as switches
    except ImportError:
        import accelmap.search.exact as switches

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=CASES)
    ap.add_argument("--time", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS), choices=list(VERSIONS))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    doc = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_average_at_start": list(os.getloadavg()), "time_limit_s": args.time,
           "versions": {v: VERSIONS[v] for v in args.versions}, "rows": rows, "summary": summary}
    for case in args.cases:
        problem, arch, cons = _load(case)
        search(problem, arch, constraints=cons, seed=1, budget=20_000)  # load the compiled kernels first
        for rep in range(args.repeats):
            for v in args.versions:
                for name, value in VERSIONS[v].items():
                    setattr(switches, name, value)
                load0, c0, t0 = os.getloadavg()[0], _cpu(), time.perf_counter()
                r = search(problem, arch, constraints=cons, searcher="exact", time_limit_s=args.time, seed=0)
                wall, cpu = time.perf_counter() - t0, _cpu() - c0
                c = r.certificate or {}
                rows.append({"case": case, "version": v, "repeat": rep, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                             "proven": r.proven_optimal, "objective": r.best_objective,
                             "lower_bound": c.get("lower_bound"), "gap": c.get("gap"), "nodes": c.get("nodes"),
                             "leaves": c.get("leaves"), "warm_start_evaluations": c.get("warm_start_evaluations"),
                             "worker_cpu_s": c.get("worker_cpu_s"), "dives": c.get("dives"),
                             "dive_improved": c.get("dive_improved"), "load_start": round(load0, 2),
                             "load_end": round(os.getloadavg()[0], 2)})
                print(f"{case:<42} {v:<6} {'PROVEN' if r.proven_optimal else 'open  '} wall {wall:6.1f} s "
                      f"cpu {cpu:6.1f} s nodes {c.get('nodes', 0):>9,} gap {c.get('gap', 0):.3%} "
                      f"load {load0:.1f}", flush=True)
                Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
        mine = [r for r in rows if r["case"] == case]
        summary.append({"case": case, **{v: {"median_wall_s": statistics.median(r["wall_s"] for r in mine
                                                                                 if r["version"] == v),
                                             "proven": [r["proven"] for r in mine if r["version"] == v]}
                                         for v in args.versions}})
    doc["load_average_at_end"] = list(os.getloadavg())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
