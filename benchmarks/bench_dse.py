"""Hardware design-space search on ResNet-50: NSGA-II and multi-objective TPE against random
and grid search.

The space: eyeriss-like with seven parameters (PE array X and Y, the global buffer and the
weight, input and partial-sum scratchpads, DRAM bandwidth; 20,480 grid points), objectives
EDP and area, area budget = eyeriss-like's own area. Each method runs the same number of
trials (distinct candidates given a mapping search; proposals over the area budget are
rejected from their area and cost none), each a whole-network mapping search (every distinct
ResNet-50 layer, the same mapping searcher, budget and seed), on a local Ray with
``--workers`` workers, each method with its own results store (so no method is served
another's searches). ``grid`` visits the full grid in a seeded random order.

Reported per method: wall time to its front, the hypervolume of its front in (area, EDP)
against the reference point (area budget, 2 x eyeriss-like's EDP), the hypervolume of its
first half of the trials (the issue's target: the optimiser at half the trials >= random at
all of them), how many front designs beat eyeriss-like in EDP at no more area (found, and
below the base's certified EDP bound).

Usage::

    python benchmarks/bench_dse.py [--trials 30] [--budget 20000] [--workers 2]
        [--methods nsga2 tpe random grid] [--layers N] [--seed 0] [--out DIR] [--json FILE]

Writes ``benchmarks/results/bench_dse.json``. Run by hand; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

PARAMETERS = [
    {"level": "shared_glb", "field": "fanout_x", "values": [7, 14, 21, 28]},
    {"level": "shared_glb", "field": "fanout_y", "values": [6, 12, 18, 24]},
    {"level": "shared_glb", "field": "capacity_words", "values": [16384, 32768, 65536, 131072]},
    {"level": "weights_spad", "field": "capacity_words", "values": [64, 128, 192, 256, 384]},
    {"level": "ifmap_spad", "field": "capacity_words", "values": [8, 12, 16, 24]},
    {"level": "psum_spad", "field": "capacity_words", "values": [8, 16, 24, 32]},
    {"level": "DRAM", "field": "bandwidth_words_per_cycle", "values": [4.0, 8.0, 16.0, 32.0]},
]


def hypervolume_2d(points: list[tuple[float, float]], ref: tuple[float, float]) -> float:
    """Area dominated by ``points`` (minimised in both) and bounded by ``ref``."""
    pts = sorted((a, e) for a, e in points if a < ref[0] and e < ref[1])
    front: list[tuple[float, float]] = []  # in area order, each better in EDP than the last
    for a, e in pts:
        if not front or e < front[-1][1]:
            front.append((a, e))
    hv = 0.0
    for i, (a, e) in enumerate(front):
        a_next = front[i + 1][0] if i + 1 < len(front) else ref[0]
        hv += (a_next - a) * (ref[1] - e)
    return hv


def _doc(method: str, trials: int, budget: int, layers: int | None, seed: int) -> dict[str, Any]:
    workloads: list[dict[str, Any]] = [{"network": "resnet50"}]
    if layers is not None:
        from accelmap.workloads.zoo import network

        names = [p.name for p in network("resnet50").unique_shapes().layers][:layers]
        workloads = [{"network": "resnet50", "layers": names}]
    return {
        "version": 1, "name": f"bench-{method}", "base": "eyeriss-like", "parameters": PARAMETERS,
        "workloads": workloads, "objectives": ["edp", "area"], "constraints": {"area_mm2": "base"},
        "trials": trials, "searcher": method, "seed": seed,
        "mapping": {"searcher": "anneal", "budget": budget},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--budget", type=int, default=20000, help="mapping evaluations per layer")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=["nsga2", "tpe", "random", "grid"])
    ap.add_argument("--layers", type=int, default=None, help="only the first N distinct layers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "dse_runs"))
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "bench_dse.json"))
    args = ap.parse_args()

    import ray
    import yaml

    from accelmap.parallel.dse import dse, load_dse

    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # One local Ray of `workers` CPUs for every method (its start is not part of a method's time).
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 * 1024**2)
    rows: dict[str, Any] = {}
    base_info: dict[str, Any] = {}
    try:
        for method in args.methods:
            path = out / f"{method}.yaml"
            path.write_text(yaml.safe_dump(_doc(method, args.trials, args.budget, args.layers, args.seed),
                                           sort_keys=False))
            spec = load_dse(path)
            t0 = time.perf_counter()
            result, data = dse(spec, out=out / method, workers=args.workers, plot=True)
            wall = time.perf_counter() - t0
            feasible = [(r.number, r.candidate) for r in result.trials if r.feasible]
            base = result.base
            base_info = {"area_mm2": base.area_mm2, "edp": base.edp, "cycles": base.cycles,
                         "energy_pj": base.energy_pj, "certified_gap": base.certified_gap,
                         "edp_lower_bound": base.lower_bound("edp")}
            # the order distinct candidates were first evaluated in
            seen: dict[str, tuple[float, float]] = {}
            for _, c in sorted(feasible, key=lambda nc: nc[0]):
                seen.setdefault(json.dumps(c.params, sort_keys=True, default=str), (c.area_mm2, c.edp))
            order = []
            firsts: set[str] = set()
            for r in sorted(result.trials, key=lambda r: r.number):
                k = json.dumps(r.candidate.params, sort_keys=True, default=str)
                if r.candidate.status != "over_budget" and k not in firsts:
                    firsts.add(k)
                    order.append(k)
            rows[method] = {
                "wall_s": round(wall, 2),
                "proposals": len(result.trials), "distinct": result.n_distinct, "searched": result.n_searched,
                "feasible_distinct": len(seen),
                "front": [{"params": r["params"], "area_mm2": r["area_mm2"], "edp": r["edp"],
                           "edp_lower_bound": r.get("edp_lower_bound"), "certified_gap": r["certified_gap"]}
                          for r in data["front"]],
                "points": list(seen.values()),
                "order": order, "seen": seen,
                "beat_base": sum(1 for r in data["front"] if r["edp"] < base.edp and r["area_mm2"] <= base.area_mm2),
                # below the base's certified EDP bound: better than any mapping of the base
                "beat_base_certified": sum(1 for r in data["front"] if r.get("edp_beats_base_certified")
                                           and r["area_mm2"] <= base.area_mm2),
            }
            print(f"{method}: {wall:.1f} s, {result.n_searched} searched, front {len(data['front'])}, "
                  f"{rows[method]['beat_base']} beat the base", file=sys.stderr)
    finally:
        ray.shutdown()
    ref = (base_info["area_mm2"], 2 * base_info["edp"])
    for _method, r in rows.items():
        r["hypervolume"] = hypervolume_2d(r.pop("points"), ref)
        half = r["order"][: max(1, len(r["order"]) // 2)]
        r["hypervolume_half_trials"] = hypervolume_2d([r["seen"][k] for k in half if k in r["seen"]], ref)
        r.pop("order")
        r.pop("seen")
    hv_norm = ref[0] * ref[1]
    for r in rows.values():
        r["hypervolume_normalised"] = r["hypervolume"] / hv_norm
        r["hypervolume_half_trials_normalised"] = r["hypervolume_half_trials"] / hv_norm
    result_doc = {
        "benchmark": "bench_dse", "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                             "python": platform.python_version()},
        "config": {"trials": args.trials, "mapping_budget_per_layer": args.budget, "workers": args.workers,
                   "layers": args.layers or "all distinct ResNet-50 layers", "seed": args.seed,
                   "parameters": PARAMETERS, "reference_point": {"area_mm2": ref[0], "edp": ref[1]}},
        "base": base_info, "methods": rows,
    }
    Path(args.json).write_text(json.dumps(result_doc, indent=2) + "\n")
    for m, r in rows.items():
        print(f"{m:>7}: wall {r['wall_s']:.0f} s, HV {r['hypervolume_normalised']:.4f} "
              f"(half the trials {r['hypervolume_half_trials_normalised']:.4f}), front {len(r['front'])}, "
              f"beat base {r['beat_base']} ({r['beat_base_certified']} certified)")
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
