"""The exact mapper of two source trees, run in turn on the same cases: equal results and
times within noise, for a change that must not alter what the search does (a module split).

Each run is a fresh process with ``PYTHONPATH`` set to one tree's ``src``, running
``accelmap.search(..., searcher="exact")`` on one case; the trees alternate run by run
(A, B, A, B, ...) after one warm-up run of each (numba's caches loaded). Deterministic runs
(``--workers 1``, ``dive_share`` 0, a warm start with a budget and no time limit) must agree
in every field recorded: proven, best objective, its encoded mapping, the certified lower
bound, the root bound and the tree's counts (nodes, cut, infeasible, leaves). With
``--parallel`` one more run per tree and repeat uses the searcher's defaults (every CPU,
dives): its proof and optimum are compared, its counts only reported (they follow the
timing of the workers and the dives).

Usage::

    python benchmarks/bench_exact_split.py --trees A_SRC B_SRC [--cases CASE ...] [--repeats 3]
        [--parallel] [--out FILE]

A case is ``LAYER@ARCH`` or ``timeloop:ARCH:LAYER`` (as ``bench_exact_nodes.py``), or
``padded:KxCxPxR``, a convolution with imperfect factorization on a three-level arch with a
4 x 2 array (a prime K cannot fill it without padding). Writes
``benchmarks/results/bench_exact_split.json``. Benchmarks are run by hand; nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_exact_split.json"
CASES = ["timeloop:simple3:L2_resnet50_res2a_2a", "timeloop:simple3:L1_resnet50_conv1",
         "padded:7x3x5x3"]
COMPARED = ("proven", "objective", "best_x", "lower_bound", "root_lower_bound", "nodes", "cut",
            "infeasible", "leaves", "patterns", "stop_reason")

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {bench!r})
from bench_exact_nodes import _load
from accelmap.search.api import search
case, parallel = {case!r}, {parallel!r}
pad = case.startswith("padded:")
if pad:  # a small padded space: a prime bound that the 4 x 2 array cannot fill without padding
    from accelmap.arch.spec import Arch, Compute, StorageLevel
    from accelmap.workloads.builders import conv2d
    arch = Arch(name="tiny8", compute=Compute(energy_per_mac_pj=1.0), levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100.0, write_energy_pj=120.0, block_words=2),
        StorageLevel(name="GLB", capacity_words=64, read_energy_pj=5.0, write_energy_pj=6.0, fanout_x=4, fanout_y=2),
        StorageLevel(name="RF", capacity_words=8, read_energy_pj=0.5, write_energy_pj=0.6)))
    k, c, p, r = (int(v) for v in case.split(":")[1].split("x"))
    problem, cons = conv2d("c", n=1, k=k, c=c, p=p, q=1, r=r, s=1), None
else:
    problem, arch, cons = _load(case)
opts = {{}} if parallel else {{"workers": 1, "dive_share": 0.0}}
opts["warm_budget"] = 20_000
c0, t0 = time.process_time(), time.perf_counter()
r = search(problem, arch, constraints=cons, searcher="exact", seed=0, searcher_options=opts,
           allow_padding=pad)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
c = r.certificate
print(json.dumps({{"proven": r.proven_optimal, "objective": r.best_objective, "best_x": list(r.best_x),
                  "lower_bound": c["lower_bound"], "root_lower_bound": c["root_lower_bound"],
                  "nodes": c["nodes"], "cut": c["cut"], "infeasible": c["infeasible"], "leaves": c["leaves"],
                  "patterns": c["patterns"], "stop_reason": c["stop_reason"], "workers": c["workers"],
                  "dives": c["dives"], "warm_start_evaluations": c["warm_start_evaluations"],
                  "wall_s": round(wall, 3), "cpu_s": round(cpu + kids.ru_utime + kids.ru_stime, 3)}}))
"""


def _run(src: str, case: str, parallel: bool) -> dict[str, Any]:
    code = _CHILD.format(bench=str(ROOT / "benchmarks"), case=case, parallel=parallel)
    env = dict(os.environ, PYTHONPATH=src)
    load0 = os.getloadavg()[0]
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row.update({"load_start": round(load0, 2), "load_end": round(os.getloadavg()[0], 2)})
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", nargs=2, required=True, metavar=("A_SRC", "B_SRC"),
                    help="the two source folders (each holding the accelmap package)")
    ap.add_argument("--cases", nargs="+", default=CASES)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parallel", action="store_true", help="also a run with the searcher's defaults per repeat")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    trees = {"A": args.trees[0], "B": args.trees[1]}
    rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    doc = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_average_at_start": list(os.getloadavg()), "trees": trees, "compared": list(COMPARED),
           "rows": rows, "summary": summary}
    modes = ["one"] + (["parallel"] if args.parallel else [])
    for case in args.cases:
        for mode in modes:
            for src in trees.values():  # warm-up: compile or load every kernel
                _run(src, case, mode == "parallel")
            for rep in range(args.repeats):
                for tree, src in trees.items():
                    row = {"case": case, "mode": mode, "tree": tree, "repeat": rep,
                           **_run(src, case, mode == "parallel")}
                    rows.append(row)
                    print(f"{case:<44} {mode:<8} {tree} {'PROVEN' if row['proven'] else 'open  '} "
                          f"nodes {row['nodes']:>8,} obj {row['objective']:.6g} wall {row['wall_s']:6.2f} s "
                          f"cpu {row['cpu_s']:6.2f} s load {row['load_start']:.2f}", flush=True)
                    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
            mine = [r for r in rows if r["case"] == case and r["mode"] == mode]
            keys = COMPARED if mode == "one" else ("proven", "objective", "lower_bound", "stop_reason")
            first = {k: mine[0][k] for k in keys}
            equal = all(all(r[k] == first[k] for k in keys) for r in mine)
            med = {t: {"median_wall_s": statistics.median(r["wall_s"] for r in mine if r["tree"] == t),
                       "median_cpu_s": statistics.median(r["cpu_s"] for r in mine if r["tree"] == t)}
                   for t in trees}
            summary.append({"case": case, "mode": mode, "equal_in": list(keys), "equal": equal, **med,
                            "cpu_ratio_B_over_A": round(med["B"]["median_cpu_s"] / med["A"]["median_cpu_s"], 3),
                            "wall_ratio_B_over_A": round(med["B"]["median_wall_s"] / med["A"]["median_wall_s"], 3)})
            print(summary[-1], flush=True)
    doc["load_average_at_end"] = list(os.getloadavg())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
