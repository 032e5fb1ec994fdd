"""What the exact DRAM reads of operands with missing words cost, against the source before.

An operand without im2col duplicates whose padded tensor has missing words (SCALE-Sim's
rounded-up ofmap of a strided 1x1 layer) has column-chunk tiles of different sizes; the
systolic model counts them tile by tile (`accelmap.costmodels.systolic_dram`,
``_varied_tiles_one``), where it used to take every tile at the size of a full chunk. This
benchmark runs one worker process per source tree (``--before``: a checkout's ``src``
before that change; this checkout's ``src`` after), alternately, ``--repeats`` times each,
and reports medians and the rows whose counts differ:

* pools of 20,000 random SCALE-Sim-style mappings (`benchmarks.bench_costmodel.
  _systolic_pool`): CB2a_2 (3x3, no missing words) on the ``systolic`` preset, and the
  strided 1x1 layers CB3a_1 and CB4a_1 (SCALE-Sim rounds their ofmap up, 29 x 29 and 15 x 15)
  on the ``resnet50u_128x128_ws`` reference config, CB3a_1 as drawn (the ifmap is never
  read on consecutive folds there) and both with every row's rows and columns swapped
  (OS n-rows m-cols, WS n-rows k-cols, IS m-rows k-cols: the ifmap's tiles uneven): ``SystolicModel.evaluate`` per second on
  the cpu engine (warm: compiled and walks cached; best of 5 calls) and on the numpy engine
  (2,000 rows, best of 3), and the DRAM reads of every row;
* the default search (`accelmap.search.search`, budget 5,000, seed 0) on CB2a_2 and CB3a_1
  on that config: wall seconds (walk caches cleared first) and the best EDP;
* the DRAM reads of the seeds of every systolic sub-space of the 40 random convolutions of
  `bench_scalesim_dram.variant_errors` and of 40 random strided 1x1 layers with a rounded-up
  ofmap (inputs 9 to 40, strides 2 and 3, arrays of 8 to 32, SRAMs of 1 to 8 kB); the latter
  also walked (the oracle), so that each side's error against the walk shows.

Run by hand from the repo root: ``python benchmarks/bench_systolic_varied.py --before
PATH/src``. Writes ``benchmarks/results/bench_systolic_varied_window7.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / ".." / "shared" / "reference" / "scalesim"
RESULTS = ROOT / "benchmarks" / "results" / "bench_systolic_varied_window7.json"


def _random_strided(rng: np.random.Generator):  # type: ignore[no-untyped-def]
    from accelmap.arch.presets import systolic_array
    from accelmap.workloads.builders import conv2d

    st = int(rng.choice([2, 3]))
    p = int(rng.integers(5, 14))
    h = (p - 1) * st + 1 - int(rng.integers(1, st))  # SCALE-Sim's rounded-up ofmap: windows past the edge
    prob = conv2d("s", c=int(rng.choice([3, 16, 32, 64])), k=int(rng.choice([8, 16, 64])), p=p, q=p, r=1, s=1,
                  stride=st, input_hw=(h, h), word_bits=8)
    kb = int(rng.choice([1, 2, 4, 8]))
    arch = systolic_array(int(rng.choice([8, 16, 32])), int(rng.choice([8, 16, 32])), kb, kb, kb,
                          dram_bandwidth_words_per_cycle=None)
    return prob, arch


def worker(out: Path, ref: Path) -> None:
    """One source tree's figures (the module docstring), into ``out`` (npz + json)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool
    from benchmarks.bench_scalesim_dram import random_convolutions

    from accelmap.arch.presets import preset
    from accelmap.costmodels import _systolic_window
    from accelmap.costmodels.scalesim_io import config_arch, read_config, read_topology
    from accelmap.costmodels.systolic import SystolicModel, systolic_layout
    from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds
    from accelmap.search.api import search
    from accelmap.workloads.builders import conv2d

    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    ref_arch = config_arch(cfg)
    layers = {x.name: x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv")}
    cases = {"CB2a_2@systolic": (conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8), preset("systolic")),
             "CB3a_1@ws128": (layers["CB3a_1"].problem, ref_arch),
             "CB3a_1@ws128 transposed": (layers["CB3a_1"].problem, ref_arch),
             "CB4a_1@ws128 transposed": (layers["CB4a_1"].problem, ref_arch)}
    arrays: dict[str, np.ndarray] = {}
    figs: dict = {"pools": {}, "search": {}}
    for name, (prob, arch) in cases.items():
        pool = _systolic_pool(prob, arch, 20000, np.random.default_rng(0))
        if name.endswith("transposed"):
            # rows and columns swapped (the array is square): OS n-rows m-cols, WS n-rows k-cols and IS
            # m-rows k-cols, where the ifmap is read on consecutive folds (case B), its tiles uneven
            a = systolic_layout(prob, arch)[0].array_level
            sp = pool.spatial.copy()
            sp[:, a] = sp[:, a, :, ::-1]
            pool = dataclasses.replace(pool, spatial=sp)
        cpu, npy = SystolicModel(engine="cpu"), SystolicModel(engine="numpy")
        for _ in range(2):  # compiled, walks cached, specialised driver in use
            cpu.evaluate(prob, arch, pool)
        t_cpu = []
        for _ in range(5):
            t0 = time.perf_counter()
            cpu.evaluate(prob, arch, pool)
            t_cpu.append(time.perf_counter() - t0)
        small = pool.take(np.arange(2000))
        npy.evaluate(prob, arch, small)
        t_np = []
        for _ in range(3):
            t0 = time.perf_counter()
            npy.evaluate(prob, arch, small)
            t_np.append(time.perf_counter() - t0)
        arrays[f"pool_{name}"] = cpu.stats(prob, arch, pool).dram_reads
        arrays[f"pool_numpy_{name}"] = npy.stats(prob, arch, small).dram_reads
        figs["pools"][name] = {"cpu_evals_per_s": 20000 / min(t_cpu), "cpu_s": t_cpu,
                               "numpy_evals_per_s": 2000 / min(t_np), "numpy_s": t_np}
        print(f"{name}: cpu {20000 / min(t_cpu):.3g}/s, numpy {2000 / min(t_np):.3g}/s", flush=True)
    for name in ("CB2a_2", "CB3a_1"):
        prob = layers[name].problem
        search(prob, ref_arch, model=SystolicModel(), budget=500, seed=99)  # warm
        _systolic_window.window_fetches.cache_clear()
        t0 = time.perf_counter()
        res = search(prob, ref_arch, model=SystolicModel(), budget=5000, seed=0)
        figs["search"][name] = {"seconds": time.perf_counter() - t0, "best_edp": float(res.best_objective),
                                "evaluations": res.n_evaluations}
        print(f"search {name}: {figs['search'][name]['seconds']:.2f} s, best {res.best_objective:.4e}", flush=True)
    # the 40 random convolutions of bench_scalesim_dram.variant_errors (same draws)
    rng = np.random.default_rng(0)
    est = SystolicModel(dram_window="estimate")
    auto = SystolicModel()
    got_e, got_a = [], []
    for prob, arch in random_convolutions(rng, 40):
        for v in systolic_variants(prob, arch):
            seeds = variant_seeds(prob, arch, v)
            got_e.append(est.stats(prob, arch, seeds).dram_reads)
            got_a.append(auto.stats(prob, arch, seeds).dram_reads)
    arrays["variants_estimate"] = np.concatenate(got_e)
    arrays["variants_auto"] = np.concatenate(got_a)
    # 40 random strided 1x1 layers with a rounded-up ofmap: the model against the walk
    from accelmap.costmodels import systolic as sy

    rng = np.random.default_rng(1)
    got, want = [], []
    for _ in range(40):
        prob, arch = _random_strided(rng)
        lay = systolic_layout(prob, arch)[0]
        for v in systolic_variants(prob, arch):
            seeds = variant_seeds(prob, arch, v)
            s = auto.stats(prob, arch, seeds)
            for i in np.flatnonzero(s.valid).tolist():
                got.append(s.dram_reads[i])
                want.append([sy._walked_reads(prob, lay, o, s.row_class[i:i + 1], s.col_class[i:i + 1],
                                              s.rows_used[i:i + 1], s.cols_used[i:i + 1],
                                              seeds.order[i:i + 1, lay.array_level], np.array([sy.WALK_ALL]))[0]
                             for o in (0, 1)])
    arrays["strided_model"] = np.array(got)
    arrays["strided_walk"] = np.array(want)
    np.savez(out.with_suffix(".npz"), **arrays)
    out.with_suffix(".json").write_text(json.dumps(figs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="the src folder of the checkout before the change")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference", type=Path, default=REF)
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/bench_systolic_varied"))
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker, args.reference)
        return
    args.scratch.mkdir(parents=True, exist_ok=True)
    load0 = list(os.getloadavg())
    sides = {"before": args.before.resolve(), "after": (ROOT / "src").resolve()}
    figs: dict[str, list[dict]] = {k: [] for k in sides}
    arrays: dict[str, dict[str, np.ndarray]] = {}
    for r in range(args.repeats):
        for side, src in sides.items():  # interleaved
            out = args.scratch / f"{side}_{r}"
            env = dict(os.environ, PYTHONPATH=str(src))
            subprocess.run([sys.executable, __file__, "--worker", str(out), "--reference", str(args.reference)],
                           check=True, env=env, cwd=ROOT)
            figs[side].append(json.loads(out.with_suffix(".json").read_text()))
            with np.load(out.with_suffix(".npz")) as z:
                arrays[side] = {k: z[k] for k in z.files}
    result: dict = {"repeats": args.repeats, "pools": {}, "search": {}, "changed_rows": {}}
    for name in figs["after"][0]["pools"]:
        row = {}
        for side in sides:
            for key in ("cpu_evals_per_s", "numpy_evals_per_s"):
                row[f"{side}_{key}"] = statistics.median(f["pools"][name][key] for f in figs[side])
        row["cpu_after_over_before"] = row["after_cpu_evals_per_s"] / row["before_cpu_evals_per_s"]
        row["numpy_after_over_before"] = row["after_numpy_evals_per_s"] / row["before_numpy_evals_per_s"]
        result["pools"][name] = row
    for name in figs["after"][0]["search"]:
        row = {}
        for side in sides:
            row[f"{side}_seconds"] = statistics.median(f["search"][name]["seconds"] for f in figs[side])
            row[f"{side}_best_edp"] = figs[side][0]["search"][name]["best_edp"]
        row["after_over_before"] = row["after_seconds"] / row["before_seconds"]
        result["search"][name] = row
    b, a = arrays["before"], arrays["after"]
    for key in a:
        if key.startswith("strided"):
            continue
        diff = (a[key] != b[key]).any(axis=1)
        result["changed_rows"][key] = {"rows": int(a[key].shape[0]), "changed": int(diff.sum())}
    walk = a["strided_walk"]
    for side in sides:
        err = arrays[side]["strided_model"] / np.maximum(walk, 1) - 1
        result["changed_rows"][f"strided_{side}"] = {
            "operand_counts": int(err.size), "off_the_walk": int((err != 0).sum()),
            "worst_error": float(np.abs(err).max()), "median_error_where_off": float(np.median(np.abs(err[err != 0])))
            if (err != 0).any() else 0.0}
    result["load_average"] = [load0, list(os.getloadavg())]
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
