"""Two versions of the generic loopnest row kernel (`_loopnest_rules.eval_rows`), interleaved, one core.

Run by hand from the repo root::

    git show REV:src/accelmap/costmodels/_loopnest_rules.py > /tmp/old_rules.py
    python benchmarks/bench_loopnest_generic_versions.py --old /tmp/old_rules.py [--repeats 21]

(For a REV older than `_loopnest_rules`, its ``_loopnest_kernel.py``, which held the rules and
``eval_rows`` then.) Both files are loaded as their own modules with numba's cache off (so
neither loads the other's code) and run ``eval_rows`` on new output and scratch arrays, then
the padding scale (`_loopnest_kernel._scale_padded`), as ``evaluate_batch(...,
specialised=False)`` does (the driver a model starts with, and the row functions the CUDA
kernels share), on the pool of
``bench_loopnest_variants.py`` (legal MapSpace samples of res2a_branch2b on eyeriss-like),
on the calling thread, each timed in turn within every repeat by the thread's CPU time. Every
output of the two is checked equal first.

Results: ``benchmarks/results/bench_loopnest_generic_versions.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_loopnest_generic_versions.json"
NEW = ROOT / "src" / "accelmap" / "costmodels" / "_loopnest_rules.py"


def _load(name: str, path: Path, where: Path):  # noqa: ANN202 (a module)
    src = path.read_text().replace("cache=True", "cache=False").replace('"cache": True', '"cache": False')
    out = where / f"_lngen_{name}.py"
    out.write_text(src)
    spec = importlib.util.spec_from_file_location(f"_lngen_{name}", out)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", type=Path, required=True,
                    help="the other version of _loopnest_rules.py (or of _loopnest_kernel.py, before that module)")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()

    import numba

    numba.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _pools

    from accelmap.costmodels._loopnest_kernel import _scale_padded
    from accelmap.costmodels.loopnest import LoopNestModel

    label, problem, arch, batch = _pools("loopnest", args.rows)[0]
    consts = LoopNestModel(engine="cpu")._kernel_consts(problem, arch)
    frac = problem.existing_fraction() if problem.has_padding else None
    mp = tuple(np.ascontiguousarray(x, dtype=dt) for x, dt in ((batch.temporal, np.int64), (batch.spatial, np.int64),
                                                                (batch.order, np.int64), (batch.keep, np.bool_)))
    n, L, D = batch.temporal.shape
    T, C, grid = batch.keep.shape[2], consts.coef.shape[1], int(consts.ints[1])
    with tempfile.TemporaryDirectory() as tmp:
        mods = {"new": _load("new", NEW, Path(tmp)), "old": _load("old", args.old, Path(tmp))}

        def run(name: str) -> tuple[float, dict]:
            t0 = time.thread_time()
            mod = mods[name]
            out = {"res": np.empty((n, 4)), "valid": np.empty(n, np.bool_), "codes": np.empty((n, 2), np.int64),
                   "cnt": np.empty((n, 6, L, T))}
            sc = tuple(x[0] for x in mod.scratch(1, L, D, T, C, grid))
            mod.eval_rows(0, n, *mp, *consts.as_tuple(), *out.values(), *sc)
            if frac is not None and (frac < 1.0).any():
                cnt = out["cnt"]  # (its slots: reads, fills, updates, energy; res[:, 1] the energy)
                _scale_padded(np.asarray(frac), cnt[:, 0], cnt[:, 1], cnt[:, 2], cnt[:, 3], out["res"][:, 1])
            return time.thread_time() - t0, out

        ref, got = run("old")[1], run("new")[1]
        for k in ref:
            if not np.array_equal(ref[k], got[k]):
                raise SystemExit(f"the two versions differ in {k}")
        times: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(args.repeats):
            for name in times:
                times[name].append(run(name)[0])
    n = args.rows
    rows = {k: {"median_ns_per_row": float(np.median(v)) / n * 1e9, "best_ns_per_row": min(v) / n * 1e9}
            for k, v in times.items()}
    for k, v in rows.items():
        print(f"{k}: median {v['median_ns_per_row']:.0f}  best {v['best_ns_per_row']:.0f} ns/row")
    print(f"old / new (medians): {rows['old']['median_ns_per_row'] / rows['new']['median_ns_per_row']:.3f}")
    load = os.getloadavg()
    print("load average", load)
    args.out.write_text(json.dumps({"case": label, "rows_per_call": n, "repeats": args.repeats,
                                    "timer": "time.thread_time", "old": str(args.old), "load_average_after": load,
                                    "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
