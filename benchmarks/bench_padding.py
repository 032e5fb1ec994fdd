"""Imperfect factorization on the loopnest model: what padding costs and what it buys.

Run by hand from the repo root::

    python benchmarks/bench_padding.py [--repeats 5] [--rows 20000] [--budget 100000]

Three parts, each written to ``benchmarks/results/bench_padding.json``:

* ``throughput``: `LoopNestModel.evaluate_objective` (cpu engine, warm: kernels compiled,
  per-group constants built once) on ``--rows`` legal mappings sampled from the exact and
  from the padded map space of a layer, timed in turn within each repeat (interleaved, so
  the machine's load hits both alike); medians in ns per row, and how many padded bound
  vectors (groups) the padded batch holds.
* ``exact``: the exact search (`accelmap.search.exact.solve`, no warm start) on small
  layers with a prime bound on a 4 x 2 array (the test cases of ``test_exact.py``), with
  and without padding: the proven optima, their ratio and the time to proof.
* ``constrained``: the exact search on zoo layers under the Timeloop Eyeriss constraint
  files of ``../shared/reference/timeloop/constraints/eyeriss_like`` (eyeriss-like), with and
  without padding: the proven optima, the padded bound vectors, the time to proof.
* ``zoo``: the default search (anneal) with the same budget and seed on zoo layers whose
  bounds leave PEs idle, with and without padding: the best EDP found (not proven).

The load average is recorded with each run (this is a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_padding.json"
sys.path.insert(0, str(ROOT / "tests" / "unit" / "search"))

THROUGHPUT = [("eyeriss-like", "resnet50/res3a_branch2b"), ("simba-like", "resnet50/res5a_branch2b")]
ZOO = [("eyeriss-like", "resnet50/res5a_branch2b"), ("simba-like", "resnet50/res5a_branch2b"),
       ("eyeriss-like", "resnet50/conv1"), ("simba-like", "mobilenet_v2/block7_1_dw")]


def throughput(repeats: int, rows: int) -> list[dict]:
    from accelmap.arch.presets import preset
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    out = []
    for arch_name, layer in THROUGHPUT:
        problem, arch = load_problem(layer), preset(arch_name)
        rng = np.random.default_rng(0)
        batches = {pad: MapSpace(problem, arch, allow_padding=pad).sample_valid(rows, rng) for pad in (False, True)}
        model = LoopNestModel(engine="cpu")
        for b in batches.values():  # compile and build the constants
            model.evaluate_objective(problem, arch, b)
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(repeats):
            for pad, b in batches.items():
                t0 = time.perf_counter()
                model.evaluate_objective(problem, arch, b)
                times[pad].append(time.perf_counter() - t0)
        b = batches[True]
        prod = b.temporal.prod(axis=1) * b.spatial.prod(axis=(1, 3))
        row = {"arch": arch_name, "layer": layer, "rows": rows,
               "exact_ns_per_row": 1e9 * statistics.median(times[False]) / rows,
               "padded_ns_per_row": 1e9 * statistics.median(times[True]) / rows,
               "padded_groups": int(len(np.unique(prod, axis=0))),
               "padded_rows_exact": int((prod == problem.bounds).all(axis=1).sum()),
               "load_avg": os.getloadavg()[0]}
        row["ratio"] = row["padded_ns_per_row"] / row["exact_ns_per_row"]
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def exact() -> list[dict]:
    from test_exact import MODEL, PADDED_CASES, arch8

    from accelmap.mapper.space import MapSpace
    from accelmap.search.exact import solve
    from accelmap.search.objectives import parse_objective

    out = []
    for case, make in sorted(PADDED_CASES.items()):
        for objective in ("edp", "energy", "cycles"):
            obj = parse_objective(objective)
            row: dict = {"case": case, "objective": objective, "load_avg": os.getloadavg()[0]}
            for pad in (False, True):
                space = MapSpace(make(), arch8(), allow_padding=pad)
                t0 = time.perf_counter()
                best, value, cert = solve(space, MODEL, obj)
                key = "padded" if pad else "perfect"
                row[key] = {"optimum": value, "proven": cert.proven_optimal, "seconds": time.perf_counter() - t0,
                            "space_points": space.size().total,
                            "bounds": (best.temporal.prod(axis=1) * best.spatial.prod(axis=(1, 3)))[0].tolist()}
            row["padded_over_perfect"] = row["padded"]["optimum"] / row["perfect"]["optimum"]
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def constrained(time_limit_s: float = 300.0) -> list[dict]:
    from test_exact import MODEL, REF

    from accelmap.arch.presets import preset
    from accelmap.mapper.constraints import load_constraint_files
    from accelmap.mapper.space import MapSpace
    from accelmap.search.exact import PaddedBranches, solve
    from accelmap.search.objectives import parse_objective
    from accelmap.workloads.io import load_problem

    out = []
    obj = parse_objective("edp")
    for layer in ("resnet50/res2a_branch2b", "resnet50/res5a_branch2b"):
        problem, arch = load_problem(layer), preset("eyeriss-like")
        cons = load_constraint_files([REF / "arch_constraints.yaml", REF / "map_constraints.yaml"], problem=problem,
                                     arch=arch, level_map={"DummyBuffer": "shared_glb:y"})
        row: dict = {"arch": "eyeriss-like", "layer": layer, "objective": "edp", "load_avg": os.getloadavg()[0]}
        for pad in (False, True):
            space = MapSpace(problem, arch, cons, allow_padding=pad)
            t0 = time.perf_counter()
            best, value, cert = solve(space, MODEL, obj, time_limit_s=time_limit_s)
            row["padded" if pad else "perfect"] = {
                "optimum": value, "proven": cert.proven_optimal, "lower_bound": cert.lower_bound,
                "seconds": time.perf_counter() - t0, "space_points": space.size().total,
                "branches": len(PaddedBranches(space, obj)) if pad else 1, "leaves": cert.leaves,
                "bounds": (best.temporal.prod(axis=1) * best.spatial.prod(axis=(1, 3)))[0].tolist()}
        row["padded_over_perfect"] = row["padded"]["optimum"] / row["perfect"]["optimum"]
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def zoo(budget: int) -> list[dict]:
    import accelmap
    from accelmap.errors import SpaceTooLargeError

    out = []
    for arch_name, layer in ZOO:
        row: dict = {"arch": arch_name, "layer": layer, "budget": budget, "searcher": "anneal", "seed": 0}
        for pad in (False, True):
            t0 = time.perf_counter()
            try:
                r = accelmap.search(layer, arch_name, budget=budget, seed=0, allow_padding=pad, searcher="anneal")
            except SpaceTooLargeError as exc:  # the padded factor tables of a large bound
                row["padded" if pad else "perfect"] = {"error": str(exc)}
                continue
            prod = r.best.temporal.prod(axis=0) * r.best.spatial.prod(axis=(0, 2))
            row["padded" if pad else "perfect"] = {
                "edp": r.edp, "seconds": time.perf_counter() - t0, "bounds": prod.tolist(),
                "utilization": r.best_metrics["utilization"], "root_bound_edp": r.lower_bound.get("edp"),
                "load_avg": os.getloadavg()[0]}
        if "edp" in row["padded"] and "edp" in row["perfect"]:
            row["padded_over_perfect"] = row["padded"]["edp"] / row["perfect"]["edp"]
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--budget", type=int, default=100_000)
    ap.add_argument("--parts", default="throughput,exact,constrained,zoo", help="comma-separated parts to (re)run")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    res: dict = json.loads(args.out.read_text()) if args.out.exists() else {}  # parts not rerun are kept
    res["command"] = " ".join(sys.argv)
    parts = args.parts.split(",")
    if "throughput" in parts:
        res["throughput"] = throughput(args.repeats, args.rows)
    if "exact" in parts:
        res["exact"] = exact()
    if "constrained" in parts:
        res["constrained"] = constrained()
    if "zoo" in parts:
        res["zoo"] = zoo(args.budget)
    args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
