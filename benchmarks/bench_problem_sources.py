"""One problem, any model: problem sources x cost models, each cell run.

For every problem of `accelmap.testing.problem_sources` (Timeloop YAML, accelmap YAML with
renamed dims, ONNX, zoo layers) and every cost model, run the search a user would run
(`loopnest` on eyeriss-like, `systolic` on the systolic preset, `aspect` with its array
shape searched on eyeriss-like) and record the kind recognised, whether a legal mapping
was found, its cycles, or the message when the model does not take the kind.

Run by hand from the repo root: ``python benchmarks/bench_problem_sources.py [--budget N]``.
Writes ``benchmarks/results/bench_problem_sources.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from accelmap.errors import AccelmapError
from accelmap.search.api import search
from accelmap.search.shapes import search_shapes
from accelmap.testing.problem_sources import problem_sources
from accelmap.workloads.structure import recognize

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_problem_sources.json"
ARCH = {"loopnest": "eyeriss-like", "systolic": "systolic", "aspect": "eyeriss-like"}


def run_cell(problem, model: str, budget: int) -> dict:
    t0 = time.perf_counter()
    try:
        if model == "aspect":
            shaped = search_shapes(problem, ARCH[model], budget=budget, seed=0)
            res = shaped.best.result
            if res is None:
                return {"status": "no legal mapping", "why": shaped.best.why[:200]}
            extra = {"shape": f"{shaped.best.x}x{shaped.best.y}"}
        else:
            res = search(problem, ARCH[model], model=model, budget=budget, seed=0)
            extra = {}
    except AccelmapError as exc:
        return {"status": "refused", "why": str(exc).splitlines()[0][:300], "seconds": time.perf_counter() - t0}
    return {"status": "ok", "cycles": float(res.best_metrics["cycles"]), "edp": float(res.edp),
            "seconds": time.perf_counter() - t0, **extra}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=4000)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for source, problems in problem_sources(tmp).items():
            for p in problems:
                st = recognize(p)
                for model in ("loopnest", "systolic", "aspect"):
                    cell = run_cell(p, model, args.budget)
                    rows.append({"source": source, "problem": p.name, "dims": list(p.dim_names),
                                 "kind": st.kind.value, "model": model, "arch": ARCH[model], **cell})
                    print(source, p.name, model, cell["status"], flush=True)
    RESULTS.write_text(json.dumps({"budget": args.budget, "rows": rows}, indent=1))
    print("\n| source | problem (dims) | kind | loopnest | systolic | aspect |\n|---|---|---|---|---|---|")
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for r in rows:
        cells.setdefault((r["source"], r["problem"]), {"dims": r["dims"], "kind": r["kind"]})[r["model"]] = r
    for (source, name), c in cells.items():
        def fmt(r: dict) -> str:
            if r["status"] == "ok":
                return f"{r['cycles']:,.0f} cycles" + (f" ({r['shape']})" if "shape" in r else "")
            return f"{r['status']}: {r['why'][:90]}"
        print(f"| {source} | {name} ({' '.join(c['dims'])}) | {c['kind']} | "
              f"{fmt(c['loopnest'])} | {fmt(c['systolic'])} | {fmt(c['aspect'])} |")


if __name__ == "__main__":
    main()
