"""The default search on a machine that has compiled nothing yet: the loopnest rows' first
compile in the search's process or in a process of its own.

Run by hand from the repo root::

    python benchmarks/bench_cold_search.py [--pairs 2] [--workers 1 2] [--backend serial] [--out FILE]

Each run is a fresh ``python -m accelmap.cli search resnet50/conv3_1 --arch eyeriss-like``
(``--workers 1``: one process; ``--workers 2``: the README's portfolio of two searches on a
local Ray) with empty numba and accelmap caches (``NUMBA_CACHE_DIR``, ``ACCELMAP_CACHE_DIR`` in
a temporary folder), as after ``pip install .`` on a new machine, once with
``ACCELMAP_COMPILE_IN_BACKGROUND=0`` (the specialised rows compile in the search's process, on
the call past `_loopnest_kernel._SPECIALISE_AFTER_ROWS`) and once with ``=1`` (the default: a
process of their own compiles them, `_loopnest_cpu.rows_ready`), the two interleaved, the
order reversed every other pair. ``--backend serial`` (``--workers 1`` only) runs the search
without Ray, on a machine that has none. Records each run's wall time, the search's own time and best
EDP as printed, and the load average (JSON)."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(background: bool, workers: int, backend: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NUMBA_CACHE_DIR=f"{tmp}/numba", ACCELMAP_CACHE_DIR=f"{tmp}/accelmap",
                   ACCELMAP_COMPILE_IN_BACKGROUND="1" if background else "0")
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
        cmd = [sys.executable, "-m", "accelmap.cli", "search", "resnet50/conv3_1", "--arch", "eyeriss-like",
               "--workers", str(workers), "--out", f"{tmp}/out", *(["--backend", backend] if backend else [])]
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, check=True).stdout
        wall = time.perf_counter() - t0
    m = re.search(r"best of \d+ searches \(([\d,]+) evaluations, ([\d.]+) s\).*EDP ([\d.e+]+)", out)
    return {"background": background, "workers": workers, "backend": backend or "ray", "wall_s": wall, "load_start": load,
            "evaluations": int(m.group(1).replace(",", "")) if m else None,
            "search_s": float(m.group(2)) if m else None, "edp": float(m.group(3)) if m else None}


def _machine() -> dict:
    return {"cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": sys.platform}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--backend", choices=["serial"], default=None, help="the search's backend (default: the CLI's, Ray)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_cold_search.json")
    args = ap.parse_args()
    if args.backend == "serial" and args.workers != [1]:
        ap.error("--backend serial runs one search process: use it with --workers 1")
    runs = []
    for w in args.workers:
        for k in range(args.pairs):
            for bg in ((False, True) if k % 2 == 0 else (True, False)):
                r = _run(bg, w, args.backend)
                runs.append(r)
                args.out.write_text(json.dumps({"machine": _machine(), "runs": runs, "complete": False}, indent=1) + "\n")  # (so far)
                print(f"workers {w} background {int(bg)}: wall {r['wall_s']:6.1f} s, search {r['search_s']} s, "
                      f"EDP {r['edp']:.4g}, load {r['load_start']:.2f}", flush=True)
    summary = {}
    for w in args.workers:
        for bg in (False, True):
            walls = [r["wall_s"] for r in runs if r["workers"] == w and r["background"] == bg]
            summary[f"workers{w}_background{int(bg)}_median_wall_s"] = statistics.median(walls) if walls else None
    args.out.write_text(json.dumps({"machine": _machine(), "runs": runs, "summary": summary, "complete": True}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
