"""What exact SCALE-Sim DRAM reads cost: the replay of SCALE-Sim's prefetch window against
the systolic model's closed-form estimate, on the reference points where they differ.

For every SCALE-Sim reference point (`../shared/reference/scalesim`) whose ifmap DRAM reads
the model does not match exactly, time `accelmap.costmodels.scalesim_io.replay_dram_reads`
(exact: it replays SCALE-Sim's demand streams through its CALC-mode window) and the
systolic model's batched `stats` on SCALE-Sim's mapping (per mapping, over a batch of
4,096 copies), interleaved in one run, and record both counts and SCALE-Sim's.

Run by hand from the repo root: ``python benchmarks/bench_scalesim_dram.py``.
Writes ``benchmarks/results/bench_scalesim_dram.json``.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from accelmap.costmodels.scalesim_io import config_arch, read_config, read_topology, replay_dram_reads
from accelmap.costmodels.systolic import SystolicModel, scalesim_mapping
from accelmap.mapper.mapping import MappingBatch

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / ".." / "shared" / "reference" / "scalesim"
RESULTS = ROOT / "benchmarks" / "results" / "bench_scalesim_dram.json"


def main() -> None:
    runs = {r["run_name"]: r for r in json.loads((REF / "runs.json").read_text())["runs"]}
    model = SystolicModel()
    rows = []
    for name, run in runs.items():
        cfg = read_config(REF / "configs" / f"{name}.cfg")
        arch = config_arch(cfg)
        topo = REF / "topologies" / ("gemms.csv" if name.startswith("gemms") else "Resnet50_unique.csv")
        for layer in read_topology(topo):
            ref = next((x for x in run["layers"] if x["name"] == layer.name and not x.get("simulated_as")), None)
            if ref is None:
                continue
            one = scalesim_mapping(layer.problem, arch, cfg.dataflow)
            est = model.stats(layer.problem, arch, one).report(0)["dram_reads"]
            if est == ref["dram_reads"]:
                continue
            batch = MappingBatch.from_mappings([one[0]] * 4096)
            t_model, t_replay = [], []
            for _ in range(3):  # interleaved
                t0 = time.perf_counter()
                model.stats(layer.problem, arch, batch)
                t_model.append((time.perf_counter() - t0) / len(batch))
                t0 = time.perf_counter()
                exact = replay_dram_reads(layer, cfg)
                t_replay.append(time.perf_counter() - t0)
            row = {
                "run": name, "layer": layer.name, "dataflow": cfg.dataflow.name.lower(),
                "scalesim_ifmap": ref["dram_reads"]["ifmap"], "model_ifmap": est["ifmap"], "replay_ifmap": exact[0],
                "model_error_pct": 100 * (est["ifmap"] - ref["dram_reads"]["ifmap"]) / ref["dram_reads"]["ifmap"],
                "model_s_per_mapping": statistics.median(t_model), "replay_s": statistics.median(t_replay),
            }
            row["ratio"] = row["replay_s"] / row["model_s_per_mapping"]
            rows.append(row)
            print(f"{row['dataflow']} {layer.name:8} SCALE-Sim {row['scalesim_ifmap']:>9,} model {row['model_ifmap']:>9,} "
                  f"({row['model_error_pct']:+.1f} %) replay {row['replay_ifmap']:>9,}; model "
                  f"{row['model_s_per_mapping'] * 1e6:.2f} us/mapping, replay {row['replay_s']:.2f} s "
                  f"({row['ratio']:,.0f}x)", flush=True)
    RESULTS.write_text(json.dumps({"points": rows}, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
