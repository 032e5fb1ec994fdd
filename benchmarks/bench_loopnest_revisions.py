"""The loopnest engines of several checkouts of this repository on the same rows, one core.

Run by hand from the repo root::

    git worktree add /tmp/old <commit>
    python benchmarks/bench_loopnest_revisions.py old=/tmp/old new=. [--rounds 3] [--repeats 5]

Every checkout runs in a fresh process of its own (``PYTHONPATH=<checkout>/src``), one after
another in each round (the order reversed every other round), so that the load of a shared
machine hits them alike: it warms a ``LoopNestModel(engine="cpu")`` until the specialised
driver serves (`_loopnest_kernel._SPECIALISE_AFTER_ROWS` rows), then times ``evaluate`` and
``evaluate_objective`` of the cpu engine, the generic driver and the numpy engine's
``evaluate`` in turn, on one saved pool: ``MapSpace.sample_valid`` rows of res2a_branch2b on
eyeriss-like drawn by the first checkout (the case of ``bench_costmodel.py --backends``;
the same arrays go to every checkout, whatever its own sampler draws). Time is the thread's
CPU time (`time.thread_time`) in ns a row, wall time beside it; medians and bests over every
repeat of every round. Results: ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASE = ("resnet50/res2a_branch2b", "eyeriss-like")


def _child(pool: str, repeats: int, sizes: list[int]) -> None:
    """One checkout's timings (its own package on ``PYTHONPATH``), as JSON on stdout."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numba
    import numpy as np

    numba.set_num_threads(1)
    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _loopnest_kernel as lk
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.workloads.io import load_problem

    z = np.load(pool)
    rows = MappingBatch(temporal=z["temporal"], spatial=z["spatial"], order=z["order"], keep=z["keep"])
    problem, arch = load_problem(CASE[0]), load_arch(CASE[1])
    cpu, ref = LoopNestModel(engine="cpu"), LoopNestModel(engine="numpy")
    lk._SPECIALISE_IN_BACKGROUND = False  # (compiled here: the steady state is what is timed)
    seen = 0
    while seen < lk._SPECIALISE_AFTER_ROWS:
        cpu.evaluate(problem, arch, rows)
        seen += len(rows)

    def generic(p, a, b):  # noqa: ANN001, ANN202
        saved, lk._SPECIALISE_AFTER_ROWS = lk._SPECIALISE_AFTER_ROWS, 1 << 62
        try:
            return cpu.evaluate(p, a, b)
        finally:
            lk._SPECIALISE_AFTER_ROWS = saved

    calls = {"cpu": cpu.evaluate, "cpu_objective": cpu.evaluate_objective, "cpu_generic": generic,
             "numpy": ref.evaluate}
    out: dict = {}
    for n in sizes:
        batch = rows.take(slice(0, n))
        for fn in calls.values():
            fn(problem, arch, batch)
        got: dict = {k: {"thread_ns": [], "wall_ns": []} for k in calls}
        for _ in range(repeats):
            for k, fn in calls.items():
                t0, c0 = time.perf_counter(), time.thread_time()
                fn(problem, arch, batch)
                got[k]["wall_ns"].append((time.perf_counter() - t0) / n * 1e9)
                got[k]["thread_ns"].append((time.thread_time() - c0) / n * 1e9)
        out[str(n)] = got
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkouts", nargs="*", help="label=path of a checkout of this repository")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000])
    ap.add_argument("--pool-rows", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", help=argparse.SUPPRESS)  # (a saved pool: time this checkout)
    args = ap.parse_args()
    if not args.child and not args.checkouts:
        ap.error("name at least one checkout, label=path")
    if args.child:
        _child(args.child, args.repeats, args.sizes)
        return
    versions = [tuple(v.split("=", 1)) for v in args.checkouts]
    me = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        pool = os.path.join(tmp, "pool.npz")
        first = Path(versions[0][1]).resolve()
        code = ("import sys, numpy as np; from accelmap.arch.io import load_arch; from accelmap.mapper.space import MapSpace; "
                "from accelmap.workloads.io import load_problem; "
                f"p, a = load_problem({CASE[0]!r}), load_arch({CASE[1]!r}); "
                f"b = MapSpace(p, a).sample_valid({args.pool_rows}, np.random.default_rng(0)); "
                "np.savez(sys.argv[1], temporal=b.temporal, spatial=b.spatial, order=b.order, keep=b.keep)")
        subprocess.run([sys.executable, "-c", code, pool], cwd=first, check=True,
                       env=dict(os.environ, PYTHONPATH=str(first / "src")))
        raw: dict = {}
        loads = [os.getloadavg()[0]]
        for r in range(args.rounds):
            for label, path in (versions if r % 2 == 0 else versions[::-1]):
                root = Path(path).resolve()
                res = subprocess.run([sys.executable, me, "--child", pool, "--repeats", str(args.repeats),
                                      "--sizes", *map(str, args.sizes)], cwd=root, capture_output=True, text=True,
                                     env=dict(os.environ, PYTHONPATH=str(root / "src")))
                if res.returncode:
                    raise SystemExit(f"{label}: {res.stderr[-3000:]}")
                for n, per in json.loads(res.stdout.strip().splitlines()[-1]).items():
                    for k, x in per.items():
                        slot = raw.setdefault(label, {}).setdefault(n, {}).setdefault(k, {"thread_ns": [], "wall_ns": []})
                        for q in ("thread_ns", "wall_ns"):
                            slot[q] += x[q]
            loads.append(os.getloadavg()[0])
    summary: dict = {}
    for label, per_n in raw.items():
        for n, per in per_n.items():
            parts = []
            for k, x in per.items():
                med, best, wall = statistics.median(x["thread_ns"]), min(x["thread_ns"]), statistics.median(x["wall_ns"])
                summary.setdefault(label, {}).setdefault(n, {})[k] = {"thread_median_ns": med, "thread_best_ns": best,
                                                                      "wall_median_ns": wall, "samples": len(x["thread_ns"])}
                parts.append(f"{k} {med:,.0f} / {best:,.0f}")
            print(f"{label:>10} {int(n):>7,} rows: " + ", ".join(parts) + "  (median / best thread ns a row)")
    print("load average (1 min) by round:", [round(x, 2) for x in loads])
    if args.out:
        args.out.write_text(json.dumps({"case": CASE, "checkouts": dict(versions), "rounds": args.rounds,
                                        "repeats": args.repeats, "load_1min": loads, "summary": summary, "raw": raw},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
