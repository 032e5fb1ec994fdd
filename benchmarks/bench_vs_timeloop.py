"""accelmap's search against Timeloop's mapper, in Timeloop's own mapping space.

For every ``mapper_edp_best`` case of the Timeloop reference data (``../shared/reference/
timeloop``), search the same layer on the same architecture (the transcriptions in
``tests/golden/data/timeloop``) under the same constraints (the Eyeriss-like architecture
and mapspace constraint files Timeloop's mapper searched under; none for simple3), with the
default searcher, and compare the best EDP with the EDP of Timeloop's best mapping. The
loopnest model reproduces Timeloop's numbers for a given mapping exactly (31/31 reference
cases), so the two EDPs are on one scale.

Run by hand from the repo root::

    python benchmarks/bench_vs_timeloop.py [--time 20] [--budget N] [--cases L4,L7]

Writes ``benchmarks/results/bench_vs_timeloop.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "timeloop"
ARCHS = ROOT / "tests" / "golden" / "data" / "timeloop"
RESULTS = ROOT / "benchmarks" / "results" / "bench_vs_timeloop.json"


def _constraints(arch_name: str, layer: str) -> list[Path]:
    if arch_name != "eyeriss_like":
        return []
    suffix = "_dw" if "dw" in layer else ""
    folder = REFERENCE / "constraints" / "eyeriss_like"
    return [folder / f"arch_constraints{suffix}.yaml", folder / f"map_constraints{suffix}.yaml"]


def run(time_s: float, budget: int | None, only: set[str] | None, seed: int) -> dict:
    from accelmap.arch.io import load_arch
    from accelmap.search.api import search
    from accelmap.workloads.io import load_problem

    rows = []
    for case in sorted((REFERENCE / "cases").iterdir()):
        arch_name, layer, mapping_name = case.name.split("__")
        if mapping_name != "mapper_edp_best":
            continue
        if only and not any(tag in layer for tag in only):
            continue
        exp = json.loads((case / "expected.json").read_text())
        ref_edp = exp["cycles"] * exp["energy_pJ"]
        ert = ARCHS / arch_name / "ERT.yaml"
        arch = load_arch(str(ARCHS / arch_name / "arch.yaml"), energy=str(ert) if ert.exists() else None)
        problem = load_problem(str(case / "prob.yaml"))
        t0 = time.perf_counter()
        result = search(problem, arch, constraints=[str(p) for p in _constraints(arch_name, layer)] or None,
                        budget=budget, time_limit_s=time_s, seed=seed)
        wall = time.perf_counter() - t0
        best = result.best_metrics
        rows.append({
            "case": case.name,
            "timeloop": {"cycles": exp["cycles"], "energy_pj": exp["energy_pJ"], "edp": ref_edp},
            "accelmap": {"cycles": best["cycles"], "energy_pj": best["energy_pj"], "edp": best["edp"],
                         "evaluations": result.n_evaluations, "wall_s": round(wall, 2),
                         "searcher": result.config.get("searcher")},
            "edp_ratio": best["edp"] / ref_edp,
        })
        print(f"{case.name:<55} accelmap/timeloop EDP = {best['edp'] / ref_edp:.3f} "
              f"({result.n_evaluations:,} evaluations, {wall:.1f} s)", flush=True)
    return {"platform": platform.platform(), "python": platform.python_version(),
            "time_limit_s": time_s, "budget": budget, "seed": seed, "cases": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time", type=float, default=20.0, help="seconds per layer (default 20)")
    ap.add_argument("--budget", type=int, default=None, help="evaluations per layer (default: time-limited)")
    ap.add_argument("--cases", default="", help="comma-separated layer tags, e.g. L4,L7")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not REFERENCE.exists():
        raise SystemExit(f"{REFERENCE} is missing: this benchmark needs the Timeloop reference data")
    only = {t for t in args.cases.split(",") if t} or None
    out = run(args.time, args.budget, only, args.seed)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
