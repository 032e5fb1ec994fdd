"""Dives for incumbents from the frontier of the exact search (`accelmap.search._exact_tree._Diver`):
the same branch and bound with and without them, from the same warm start, side by side.

For every case, the warm start (the default ``anneal`` search with ``--warm-budget``
evaluations, seed 0) is computed once and handed to both runs as their first incumbent, so the
two differ only in the dives. The runs alternate (off then on, then on then off at the next
case) so that a change of load falls on both. Each run is one process (``workers=1``) under
``--time`` seconds; its incumbent and certified bound are sampled about once a second.

Usage::

    python benchmarks/bench_exact_dive.py [--time 60] [--warm-budget 200000] [--share 0.1]
        [--cases SUBSTRING ...] [--out FILE]

Writes ``benchmarks/results/bench_exact_dive.json``: per case and run, proven, seconds, the
incumbent and the certified bound at the end and at half the time, the gap, the dives'
counts, and the trajectory. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

RESULTS = ROOT / "benchmarks" / "results" / "bench_exact_dive.json"
CASES = ("resnet50/res3b_branch2b @ eyeriss-like", "resnet50/res4a_branch2b @ eyeriss-like",
         "timeloop L4_resnet50_res3a_2b_s2 @ simple3", "resnet50/res4b_branch2a @ eyeriss-like",
         "mobilenet_v2/block2_2_dw @ eyeriss-like", "bert_base_128/qkv_proj @ eyeriss-like",
         "resnet50/res2a_branch2a @ eyeriss-like", "resnet50/res2a_branch2b @ eyeriss-like",
         "resnet50/res3a_branch2b @ eyeriss-like")


def _case(label: str) -> tuple[Any, Any, Any]:
    """(problem, arch, constraints) of one label."""
    from accelmap.arch.io import load_arch
    from accelmap.workloads.io import load_problem
    from accelmap.workloads.zoo import network

    if label.startswith("timeloop "):
        import bench_vs_timeloop as tl

        layer, arch_name = label[len("timeloop "):].split(" @ ")
        case = tl.REFERENCE / "cases" / f"{arch_name}__{layer}__mapper_edp_best"
        ert = tl.ARCHS / arch_name / "ERT.yaml"
        arch = load_arch(str(tl.ARCHS / arch_name / "arch.yaml"), energy=str(ert) if ert.exists() else None)
        cons = [str(p) for p in tl._constraints(arch_name, layer)] or None
        return load_problem(str(case / "prob.yaml")), arch, cons
    name, arch_name = label.split(" @ ")
    net, layer = name.split("/")
    if net == "resnet50":  # every ResNet-50 layer from the zoo, as the network search takes them
        return next(p for p in network("resnet50").layers if p.name == layer), load_arch(arch_name), None
    return load_problem(name), load_arch(arch_name), None


def _run(space: Any, warm: Any, time_s: float, share: float) -> dict[str, Any]:
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.search.exact import solve
    from accelmap.search.objectives import parse_objective

    traj: list[tuple[float, float, float]] = []
    t0 = time.perf_counter()

    def progress(best: float, lb: float, cert: Any) -> None:
        traj.append((round(time.perf_counter() - t0, 2), best, lb))

    c0 = time.process_time()
    best, value, cert = solve(space, LoopNestModel(), parse_objective("edp"), time_limit_s=time_s, incumbent=warm,
                              progress=progress, workers=1, dive_share=share)
    wall = time.perf_counter() - t0
    half = [x for x in traj if x[0] <= time_s / 2]
    return {"dive_share": share, "proven": cert.proven_optimal, "seconds": round(wall, 2),
            "cpu_s": round(time.process_time() - c0, 2), "edp": value, "lower_bound": cert.lower_bound,
            "gap": cert.gap, "half_time": {"t": half[-1][0], "incumbent": half[-1][1], "bound": half[-1][2]}
            if half else None, "nodes": cert.nodes, "leaves": cert.leaves, "dives": cert.dives,
            "dive_leaves": cert.dive_leaves, "dive_improved": cert.dive_improved, "dive_s": round(cert.dive_s, 2),
            "load_average_at_end": list(os.getloadavg()), "trajectory": traj[::5] + traj[-1:]}


def run(time_s: float, warm_budget: int, share: float, only: list[str] | None, out: Path) -> dict[str, Any]:
    from accelmap.search.api import build_space, load_constraints_any, search

    doc: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(), "time_s": time_s,
                           "warm_budget": warm_budget, "share": share, "load_average_at_start": list(os.getloadavg()),
                           "cases": []}
    flip = False
    for label in CASES:
        if only and not any(s in label for s in only):
            continue
        problem, arch, cons = _case(label)
        space = build_space(problem, arch, load_constraints_any(cons, arch, problem))
        t0 = time.perf_counter()
        w = search(problem, arch, constraints=cons, budget=warm_budget, seed=0)
        row: dict[str, Any] = {"case": label, "warm_edp": w.edp, "warm_seconds": round(time.perf_counter() - t0, 2),
                               "runs": []}
        for s in ((share, 0.0) if flip else (0.0, share)):
            r = _run(space, w.best.as_batch(), time_s, s)
            row["runs"].append(r)
            print(f"{label:<48} share {s:4.2f} {'PROVEN' if r['proven'] else 'open  '} {r['seconds']:6.1f} s "
                  f"gap {r['gap']:7.2%} edp {r['edp']:.6g} dives {r['dives']} (+{r['dive_improved']}) "
                  f"load {r['load_average_at_end'][0]:.1f}", flush=True)
        flip = not flip
        doc["cases"].append(row)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time", type=float, default=60.0, help="seconds per run (default 60)")
    ap.add_argument("--warm-budget", type=int, default=200_000, help="evaluations of the shared warm start")
    ap.add_argument("--share", type=float, default=0.1, help="dive share of the run with dives (default 0.1)")
    ap.add_argument("--cases", nargs="*", default=None, help="only the cases whose label contains one of these")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args()
    run(a.time, a.warm_budget, a.share, a.cases, a.out)


if __name__ == "__main__":
    main()
