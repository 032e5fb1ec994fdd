"""Searching a systolic array with the ``systolic`` model: valid fractions and best mappings.

For each (arch, layer): the fraction of uniformly sampled mappings the model accepts in the
whole map space without the arch's default constraints ("before"), with them, and in each
of the six per-dataflow sub-spaces (`accelmap.costmodels.systolic.systolic_variants`);
SCALE-Sim's own OS / WS / IS cycles and EDP; and the default search (EDP) over the whole
space without the defaults ("before": an explicit ``space=``, so no sub-spaces) and with
the default path (sub-spaces seeded with SCALE-Sim's mappings).

Writes ``benchmarks/results/bench_systolic_search.json``.

    python benchmarks/bench_systolic_search.py                 # ~20 s
    python benchmarks/bench_systolic_search.py --budget 10000 --samples 5000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from accelmap.arch.presets import preset, systolic_array
from accelmap.costmodels.systolic import Dataflow, SystolicModel
from accelmap.costmodels.systolic_variants import scalesim_mapping, systolic_variants
from accelmap.mapper.constraints import Constraints
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.search.api import search
from accelmap.workloads.zoo import layer

CASES = (
    ("resnet50/conv3_1", "systolic", preset("systolic")),
    ("resnet50/conv3_1", "systolic-32x32", systolic_array(32, 32)),
    ("resnet50/conv3_1", "tpu-v1-like", preset("tpu-v1-like")),
)


def run(budget: int, samples: int, seed: int) -> list[dict[str, Any]]:
    model = SystolicModel()
    out = []
    for layer_name, arch_name, arch in CASES:
        prob = layer(layer_name)
        row: dict[str, Any] = {"layer": layer_name, "arch": arch_name}
        whole = MapSpace(prob, arch, Constraints(ignore_arch_defaults=True))
        for key, space in (("valid_before", whole), ("valid_preset_defaults", MapSpace(prob, arch))):
            m = model.evaluate(prob, arch, space.sample(samples, np.random.default_rng(seed)))
            row[key] = float(m.valid.mean())
        row["valid_variants"] = {
            v.label: float(model.evaluate(prob, arch, MapSpace(prob, arch, v.constraints).sample(
                samples, np.random.default_rng(seed))).valid.mean())
            for v in systolic_variants(prob, arch)
        }
        ref = model.evaluate(prob, arch, MappingBatch.concat([scalesim_mapping(prob, arch, df) for df in Dataflow]))
        row["scalesim"] = {df.name.lower(): {"cycles": float(ref.cycles[i]), "edp": float(ref.cycles[i] * ref.energy_pj[i])}
                           for i, df in enumerate(Dataflow)}
        for key, kw in (("search_before", {"space": whole}), ("search_after", {})):
            t0 = time.perf_counter()
            r = search(prob, arch, model="systolic", budget=budget, seed=seed, **kw)
            wall = time.perf_counter() - t0
            st = model.stats(prob, arch, r.best.as_batch())
            row[key] = {"cycles": r.cycles, "edp": r.edp, "wall_s": wall, "summary": st.summary(0),
                        "variant": r.config.get("variant")}
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=50_000)
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_systolic_search.json"))
    a = ap.parse_args()
    rows = run(a.budget, a.samples, a.seed)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"budget": a.budget, "samples": a.samples, "rows": rows}, indent=1) + "\n")
    for r in rows:
        best_ref = min(v["cycles"] for v in r["scalesim"].values())
        print(f"{r['arch']:<16} valid {r['valid_before']:.3f} -> {r['valid_preset_defaults']:.3f} (preset) / "
              f"{min(r['valid_variants'].values()):.3f}+ (sub-spaces); SCALE-Sim best {best_ref:,.0f} cycles; "
              f"search {r['search_before']['cycles']:,.0f} -> {r['search_after']['cycles']:,.0f} cycles, "
              f"EDP {r['search_before']['edp']:.4g} -> {r['search_after']['edp']:.4g}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
