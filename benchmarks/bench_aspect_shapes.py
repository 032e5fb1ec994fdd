"""Searched PE-array shape + mapping vs MAESTRO's bundled dataflows (issue 8's figure).

For five VGG-16 layers on MAESTRO's ``acc1`` hardware with 256 PEs (NoC 1,000 and off-chip
50 words/cycle; buffer capacities unconstrained, as MAESTRO only warns about them), run
`accelmap.search.shapes.search_shapes` (aspect model, objective cycles) over every array
shape of 256 PEs and compare the best runtime with the best runtime among the bundled
MAESTRO dataflows in ``../shared/reference/maestro`` (KC-P, CK-P, row stationary, X-P, YX-P,
NLR; completed runs with a correct MAC count only).

Run by hand from the repo root: ``python benchmarks/bench_aspect_shapes.py [--budget N]``.
Writes ``benchmarks/results/bench_aspect_shapes.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.search.shapes import search_shapes
from accelmap.workloads.builders import conv2d

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / ".." / "shared" / "reference" / "maestro" / "cases.json"
RESULTS = ROOT / "benchmarks" / "results" / "bench_aspect_shapes.json"
LAYERS = ("CONV1", "CONV3", "CONV5", "CONV8", "CONV11")


def acc1(n_pes: int) -> Arch:
    return Arch(name=f"maestro-acc1-{n_pes}", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=50, read_energy_pj=200.0,
                     write_energy_pj=200.0),
        StorageLevel(name="L2", capacity_words=None, read_bandwidth_words_per_cycle=1000, fanout_x=16,
                     fanout_y=n_pes // 16, read_energy_pj=18.61, write_energy_pj=18.61),
        StorageLevel(name="L1", capacity_words=None, read_energy_pj=1.68, write_energy_pj=1.68),
    ), compute=Compute(energy_per_mac_pj=1.0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--budget", type=int, default=45_000, help="evaluations per layer (split over shapes)")
    ap.add_argument("--searcher", default="anneal")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cases = json.loads(REF.read_text())["cases"]
    arch = acc1(256)
    out = {"arch": arch.name, "budget_per_layer": args.budget, "searcher": args.searcher, "layers": []}
    for name in LAYERS:
        ref = [c for c in cases if c["model"] == "vgg16" and c["layer"] == name and c["num_pes"] == 256
               and c["hw"]["tag"] == "acc1" and c["status"] == "ok" and c["macs_match"]]
        best_ref = min(ref, key=lambda c: c["runtime_cycles"])
        d, st = best_ref["dims"], best_ref["stride"]
        prob = conv2d(f"vgg16_{name}", c=d["C"], k=d["K"], r=d["R"], s=d["S"],
                      p=(d["Y"] - d["R"]) // st["Y"] + 1, q=(d["X"] - d["S"]) // st["X"] + 1,
                      stride=(st["Y"], st["X"]))
        t0 = time.perf_counter()
        res = search_shapes(prob, arch, budget=args.budget, searcher=args.searcher, objective="cycles",
                            seed=args.seed)
        secs = time.perf_counter() - t0
        best = res.best
        row = {
            "layer": name, "problem": prob.describe(), "macs": prob.macs,
            "ideal_cycles_256": -(-prob.macs // 256),
            "maestro_best_dataflow": best_ref["dataflow"], "maestro_best_cycles": best_ref["runtime_cycles"],
            "maestro_dataflows": {c["dataflow"]: c["runtime_cycles"] for c in ref},
            "searched_shape": [best.x, best.y], "searched_cycles": best.objective,
            "speedup_vs_best_dataflow": best_ref["runtime_cycles"] / best.objective,
            "per_shape_cycles": {f"{s.x}x{s.y}": s.objective for s in res.per_shape},
            "search_s": secs,
        }
        out["layers"].append(row)
        print(f"{name:<7} MAESTRO best {best_ref['dataflow']:<9} {best_ref['runtime_cycles']:>13,.0f}   "
              f"searched {best.x}x{best.y} {best.objective:>13,.0f}   "
              f"({row['speedup_vs_best_dataflow']:.2f}x, ideal {row['ideal_cycles_256']:,}, {secs:.1f} s)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
