"""Two versions of the systolic model's cpu engine, interleaved in one process, one core.

Run by hand from the repo root::

    python benchmarks/bench_systolic_versions.py --old REV [--repeats 11] [--sizes 10000 100000] [--model search]

The package ``src/accelmap`` of git revision ``REV`` is copied into a temporary folder as a
package of its own (``accelmap_old``: its imports rewritten), so that both versions live in
one process with their own numba caches. On the pools of ``bench_costmodel.py`` (random
SCALE-Sim-style mappings of CB2a_2 and GEMM_512 on the ``systolic`` preset) each version's
``SystolicModel(engine="cpu")`` (``--model report``) or its ranking model,
``SystolicModel(engine="cpu").for_search()`` (``--model search``, the default: what a search
evaluates and what ``bench_costmodel.py``'s systolic rows time), is warmed until its driver
specialised per structure serves, every `Metrics` field of the two is checked equal, then
``evaluate`` and ``evaluate_objective`` of both are timed in turn within every repeat (the
order of the two reversed every other repeat), by the process's CPU time and wall time, with
the minor page faults of each call (``getrusage``). numba runs on one thread.

Results: ``benchmarks/results/bench_systolic_versions.json`` (or ``--results``): per layer,
batch and call, the median and best ns a row of each version and their ratios (new / old).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_systolic_versions.json"
FIELDS = ("cycles", "energy_pj", "compute_energy_pj", "utilization", "valid", "reason", "reason_level", "reads",
          "fills", "updates", "energy_breakdown_pj", "multicast", "spatial_reductions")


def _old_package(rev: str, where: Path) -> str:
    """``src/accelmap`` of ``rev`` as the package ``accelmap_old`` under ``where``."""
    pkg = where / "accelmap_old"
    sys.path.insert(0, str(where))
    if pkg.exists():  # (kept from an earlier run with ``--old-dir``: its numba cache too)
        return "accelmap_old"
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src/accelmap"], check=True,
                         capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=tar, check=True)
    (where / "src" / "accelmap").rename(pkg)
    for f in pkg.rglob("*.py"):
        text = f.read_text()
        text = re.sub(r"\baccelmap\.", "accelmap_old.", text)
        text = re.sub(r"from accelmap import", "from accelmap_old import", text)
        f.write_text(text)
    return "accelmap_old"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="git revision of the version to compare with")
    ap.add_argument("--sizes", nargs="*", type=int, default=[10000, 100000])
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--model", choices=("search", "report"), default="search",
                    help="time the ranking model (`SystolicModel.for_search`) or the reporting default")
    ap.add_argument("--old-dir", type=Path, default=None,
                    help="keep the old package in this folder (made if absent) so that its numba cache is kept "
                         "between runs; default a temporary folder")
    args = ap.parse_args()
    import numba

    numba.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _pools

    from accelmap.costmodels import _systolic_engine
    from accelmap.costmodels.systolic import SystolicModel

    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        if args.old_dir is not None:
            where = args.old_dir.resolve()
            where.mkdir(parents=True, exist_ok=True)
        old_name = _old_package(args.old, where)
        old_model = importlib.import_module(f"{old_name}.costmodels.systolic").SystolicModel
        models = {"old": old_model(engine="cpu"), "new": SystolicModel(engine="cpu")}
        if args.model == "search":
            models = {k: m.for_search() for k, m in models.items()}
        out: dict = {"old": args.old, "new": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                                             capture_output=True, text=True).stdout.strip(),
                     "load_average_start": list(os.getloadavg()), "repeats": args.repeats, "model": args.model,
                     "cases": {}}
        for label, problem, arch, pool in _pools("systolic", max(args.sizes)):
            for m in models.values():  # until the specialised driver serves (and its walks are in the table)
                seen = 0
                while seen <= _systolic_engine._SPECIALISE_AFTER_ROWS:
                    m.evaluate(problem, arch, pool)
                    m.evaluate_objective(problem, arch, pool)
                    seen += len(pool)
            a, b = (m.evaluate(problem, arch, pool) for m in models.values())
            for f in FIELDS:
                if not np.array_equal(getattr(a, f), getattr(b, f)):
                    raise SystemExit(f"{label}: field {f} differs between the two versions")
            rows = []
            for n in args.sizes:
                batch = pool.take(slice(0, n))
                res: dict = {}
                for r in range(args.repeats):
                    order = list(models.items()) if r % 2 == 0 else list(models.items())[::-1]
                    for call in ("evaluate", "evaluate_objective"):
                        for name, m in order:
                            fn = getattr(m, call)
                            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                            t0, c0 = time.perf_counter(), time.process_time()
                            fn(problem, arch, batch)
                            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
                            res.setdefault((call, name), []).append((cpu / n * 1e9, wall / n * 1e9, faults))
                row: dict = {"batch": n}
                for call in ("evaluate", "evaluate_objective"):
                    entry = {}
                    for name in models:
                        v = res[(call, name)]
                        entry[name] = {"cpu_ns_median": statistics.median(x[0] for x in v),
                                       "cpu_ns_best": min(x[0] for x in v),
                                       "wall_ns_median": statistics.median(x[1] for x in v),
                                       "wall_ns_best": min(x[1] for x in v),
                                       "page_faults_median": statistics.median(x[2] for x in v)}
                    entry["new_over_old_cpu_median"] = entry["new"]["cpu_ns_median"] / entry["old"]["cpu_ns_median"]
                    entry["new_over_old_cpu_best"] = entry["new"]["cpu_ns_best"] / entry["old"]["cpu_ns_best"]
                    row[call] = entry
                    print(f"{label} {n:>7} {call:18s} old {entry['old']['cpu_ns_median']:6.1f} / "
                          f"{entry['old']['cpu_ns_best']:6.1f} ns, new {entry['new']['cpu_ns_median']:6.1f} / "
                          f"{entry['new']['cpu_ns_best']:6.1f} ns (CPU, median / best; faults "
                          f"{entry['old']['page_faults_median']:.0f} / {entry['new']['page_faults_median']:.0f}): "
                          f"new/old {entry['new_over_old_cpu_median']:.3f} / {entry['new_over_old_cpu_best']:.3f}",
                          flush=True)
                rows.append(row)
            out["cases"][label] = rows
        out["load_average_end"] = list(os.getloadavg())
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
