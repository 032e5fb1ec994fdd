"""The exact search's branch and bound on 1 and on W processes from the same incumbent.

For each case the default search (``anneal``, default budget, seed 0) finds one incumbent,
then `accelmap.search.exact.solve` runs from it with ``workers`` 1, W, 1, W, ... (interleaved
in this process, so each pair sees the same load). Each run records its wall time, the CPU
seconds of this process and of its forked workers (``cpu_s``), each worker's CPU seconds on
its shares (``worker_cpu_s``: the longest is the run's critical path on an idle machine,
plus the part this process ran before dealing the tree out), the nodes and the result.
The warm start is not timed: it is the same for every worker count.

Usage::

    python benchmarks/bench_exact_workers.py [--cases LAYER@ARCH ...] [--workers 1 2] [--repeats 1]
        [--time 60] [--out FILE]

Benchmarks are run by hand; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_exact_workers.json"
CASES = ["resnet50/res4b_branch2a@eyeriss-like", "resnet50/res4b_branch2a@simba-like",
         "bert_base_128/qkv_proj@eyeriss-like", "bert_base_128/qkv_proj@simba-like",
         "bert_base_128/ffn_up@eyeriss-like", "bert_base_128/ffn_up@simba-like"]


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    from accelmap.arch.io import load_arch
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.search.api import build_space, search
    from accelmap.search.exact import solve
    from accelmap.search.objectives import parse_objective
    from accelmap.workloads.io import load_problem

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=CASES, metavar="LAYER@ARCH")
    ap.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--time", type=float, default=60.0)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    rows = []
    doc = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_average_at_start": list(os.getloadavg()), "time_limit_s": args.time, "rows": rows}
    obj = parse_objective("edp")
    for case in args.cases:
        layer, arch_name = case.split("@")
        problem, arch = load_problem(layer), load_arch(arch_name)
        space = build_space(problem, arch)
        warm = search(problem, arch, seed=0)
        inc = warm.best.as_batch()
        for rep in range(args.repeats):
            for w in args.workers:
                c0, t0 = _cpu(), time.perf_counter()
                _, value, cert = solve(space, LoopNestModel(), obj, time_limit_s=args.time, incumbent=inc, workers=w)
                wall, cpu = time.perf_counter() - t0, _cpu() - c0
                rows.append({"case": case, "workers": w, "repeat": rep, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                             "worker_cpu_s": [round(x, 3) for x in cert.worker_cpu_s], "proven": cert.proven_optimal,
                             "objective": value, "lower_bound": cert.lower_bound, "gap": cert.gap, "nodes": cert.nodes,
                             "leaves": cert.leaves, "warm_objective": warm.best_objective,
                             "load_average": list(os.getloadavg())})
                print(f"{case:<44} W={w} {'PROVEN' if cert.proven_optimal else 'open  '} wall {wall:6.1f} s  cpu "
                      f"{cpu:6.1f} s  workers {rows[-1]['worker_cpu_s']}  nodes {cert.nodes}  gap {cert.gap:.2%}  "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
