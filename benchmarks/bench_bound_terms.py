"""Lift and cost of one term of the exact mapper's bound, at fixed node sets.

For each case (a layer on a preset), the keep pattern of the default search's best mapping
(``--default-budget`` evaluations, seed 0) is fixed, and at each depth of the branch and bound
(1 .. 4: the innermost 1 .. 4 levels' temporal factors fixed, every spatial factor fixed)
random feasible nodes are drawn (up to ``--nodes``). Each node set is bounded with the term
on and off, interleaved, ``--repeats`` times; the medians of the times, their ratio, the share
of nodes the term lifts and the largest lift are written per depth.

Terms (``--term``): ``order`` = argument 10 of `accelmap.costmodels.loopnest_bounds` (the
order of the dims' innermost open loops, `_jstar_order_energy`, switched by ``_USE_ORDER``);
``capacity`` = argument 11 (the words a region of small buffers must take in,
`_capacity_energy`, switched by ``_USE_CAPACITY``).

Usage::

    python benchmarks/bench_bound_terms.py [--cases LAYER@ARCH ...] [--nodes 8192]
        [--repeats 9] [--default-budget 200000] [--out FILE]

Writes ``benchmarks/results/bench_bound_terms.json``, with the load average at the start and
the end. Benchmarks are run by hand; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_bound_terms.json"
CASES = ["resnet50/res3b_branch2b@eyeriss-like", "resnet50/res3b_branch2b@simba-like",
         "resnet50/res4a_branch1@eyeriss-like"]


def _case(spec: str, n_nodes: int, repeats: int, budget: int, term: str = "order") -> list[dict[str, Any]]:
    import accelmap.costmodels._bound_switches as sw
    import accelmap.costmodels.loopnest_bounds as lbm
    from accelmap.arch.presets import preset
    from accelmap.mapper.space import MapSpace
    from accelmap.search.api import search
    from accelmap.search.exact import DimTree, bound_model, node_inputs
    from accelmap.workloads.io import load_problem

    switch = {"order": "_USE_ORDER", "capacity": "_USE_CAPACITY"}[term]
    layer, arch_name = spec.split("@")
    problem, arch = load_problem(layer), preset(arch_name)
    space = MapSpace(problem, arch)
    best = search(problem, arch, budget=budget, seed=0).best.as_batch()
    trees = [DimTree(space._tables[d]) for d in range(space._D)]
    bm = bound_model(space, best.keep[0])
    rng = np.random.default_rng(0)
    rows = []
    for depth in (1, 2, 3, 4):
        got: list[np.ndarray] = []
        for _ in range(200):
            ids = np.stack([rng.integers(0, len(tr.starts[depth]), 20_000) for tr in trees], axis=1)
            _, _, ok = lbm.partial_bounds(bm, **node_inputs(trees, depth, 0, ids))
            got.append(ids[ok])
            if sum(len(g) for g in got) >= n_nodes:
                break
        ids = np.concatenate(got)[:n_nodes]
        if len(ids) == 0:
            continue
        inputs = node_inputs(trees, depth, 0, ids)
        times: dict[bool, list[float]] = {True: [], False: []}
        energy: dict[bool, np.ndarray] = {}
        try:
            for _ in range(repeats):
                for on in (True, False):
                    setattr(sw, switch, on)
                    t0 = time.perf_counter()
                    e, _, _ = lbm.partial_bounds(bm, **inputs)
                    times[on].append(time.perf_counter() - t0)
                    energy[on] = e
        finally:
            setattr(sw, switch, True)
        lift = energy[True] / energy[False]
        row = {"case": spec, "depth": depth, "nodes": len(ids),
               "ms_on": round(float(np.median(times[True])) * 1e3, 2),
               "ms_off": round(float(np.median(times[False])) * 1e3, 2),
               "ratio": round(float(np.median(times[True]) / np.median(times[False])), 3),
               "lifted_share": round(float((lift > 1 + 1e-9).mean()), 5), "max_lift": round(float(lift.max()), 4),
               "load_average": round(os.getloadavg()[0], 2)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=CASES, help="LAYER@ARCH (default: %(default)s)")
    ap.add_argument("--term", choices=["order", "capacity"], default="order")
    ap.add_argument("--nodes", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--default-budget", type=int, default=200_000)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    for spec in args.cases:
        rows += _case(spec, args.nodes, args.repeats, args.default_budget, args.term)
    out = {"benchmark": "bench_bound_terms", "term": args.term, "machine": platform.platform(),
           "cpus": os.cpu_count(), "load_average_at_start": load0, "load_average_at_end": os.getloadavg(),
           "repeats": args.repeats, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
