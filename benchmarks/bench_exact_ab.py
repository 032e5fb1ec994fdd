"""Same-incumbent A/B of one term of the exact mapper's bound, on whole branch and bounds.

For each layer (on ``--arch``), the default search's best mapping (``--default-budget``
evaluations, seed 0) is the incumbent of two exact searches (objective edp, ``--time`` seconds
of wall time each, one process), the first with the term on, the second with it off, one
after the other in one process; each row has the certified gap, the nodes, the process's CPU
seconds (the fair measure on a shared machine) and the load average at its start and end.

Terms (``--term``): ``capacity`` = arguments 11-12 of `accelmap.costmodels.loopnest_bounds`
(the words a region of small buffers must take in, `_capacity_energy`, switched by
``_USE_CAPACITY``); ``order`` = argument 10 (``_USE_ORDER``); ``pass`` = argument 5c and the pass
floors read at an open parent (``_USE_NEXT_PASS`` and ``_USE_PASS_READS`` together);
``orderpass`` = argument 10's passes repeated inside J* (``_USE_ORDER_PASS``);
``pairs`` = argument 13 (each known level's outermost and innermost loops chosen jointly,
`_pair_order_energy`, ``_USE_PAIRS``).

Usage::

    python benchmarks/bench_exact_ab.py [--layers resnet50/res3b_branch2b ...] [--arch eyeriss-like]
        [--time 60] [--term capacity] [--default-budget 200000] [--out FILE]

Writes ``benchmarks/results/bench_exact_ab.json``. Benchmarks are run by hand; nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_exact_ab.json"
LAYERS = ["resnet50/res3b_branch2b", "resnet50/res2a_branch2b", "resnet50/res4a_branch2b"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _layer(layer: str, arch_name: str, time_s: float, budget: int, term: str) -> list[dict[str, Any]]:
    import accelmap.costmodels._bound_switches as sw
    from accelmap.arch.presets import preset
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.space import MapSpace
    from accelmap.search.api import search
    from accelmap.search.exact import solve
    from accelmap.search.objectives import parse_objective
    from accelmap.workloads.io import load_problem

    switches = {"order": ["_USE_ORDER"], "capacity": ["_USE_CAPACITY"],
                "pass": ["_USE_NEXT_PASS", "_USE_PASS_READS"], "orderpass": ["_USE_ORDER_PASS"], "pairs": ["_USE_PAIRS"]}[term]
    problem, arch = load_problem(layer), preset(arch_name)
    incumbent = search(problem, arch, budget=budget, seed=0).best.as_batch()
    space = MapSpace(problem, arch)
    rows = []
    try:
        for on in (True, False):
            for switch in switches:
                setattr(sw, switch, on)
            c0, t0, load0 = _cpu(), time.perf_counter(), os.getloadavg()[0]
            _, value, cert = solve(space, LoopNestModel(), parse_objective("edp"), time_limit_s=time_s,
                                   incumbent=incumbent)
            row = {"layer": layer, "arch": arch_name, "term": term, "on": on, "proven": bool(cert.proven_optimal),
                   "gap": float(cert.gap), "nodes": int(cert.nodes), "cpu_s": round(_cpu() - c0, 2),
                   "wall_s": round(time.perf_counter() - t0, 2), "best_edp": float(value),
                   "lower_bound": float(cert.lower_bound), "load_start": round(load0, 2),
                   "load_end": round(os.getloadavg()[0], 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        for switch in switches:
            setattr(sw, switch, True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=LAYERS, help="(default: %(default)s)")
    ap.add_argument("--arch", default="eyeriss-like")
    ap.add_argument("--time", type=float, default=60.0, help="wall seconds per exact search (default 60)")
    ap.add_argument("--term", choices=["order", "capacity", "pass", "orderpass", "pairs"], default="capacity")
    ap.add_argument("--default-budget", type=int, default=200_000)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    for layer in args.layers:
        rows += _layer(layer, args.arch, args.time, args.default_budget, args.term)
    out = {"benchmark": "bench_exact_ab", "term": args.term, "machine": platform.platform(),
           "cpus": os.cpu_count(), "load_average_at_start": load0, "load_average_at_end": os.getloadavg(),
           "time_s": args.time, "default_budget": args.default_budget, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
