"""The aspect model's ``cpu`` engine of several checkouts of this repository on the same rows,
one core.

Run by hand from the repo root::

    git archive <commit> | tar -x -C /tmp/old
    python benchmarks/bench_aspect_versions.py old=/tmp/old new=. [--rounds 3] [--repeats 5]

The case and pools of ``bench_costmodel.py --models aspect --backends`` (VGG-16 conv3 on
``maestro-acc1-1024``): random directive-form mappings (``_aspect_pool``, mostly legal) and
MapSpace samples under ``aspect_constraints`` (mostly rejected), drawn once by this checkout
and saved, so every checkout times the same arrays. Every checkout runs in a fresh process of
its own (``PYTHONPATH=<checkout>/src``), one after another in each round (the order reversed
every other round), so that the load of a shared machine hits them alike; each warms its
numba cache on a first call, then times ``AspectModel(engine="cpu").evaluate`` on each pool
and batch size in turn. Time is the thread's CPU time (`time.thread_time`) in ns a row, wall
time beside it; medians and bests over every repeat of every round, and the ratio of each
checkout's median to the first one's. Results: ``--out`` (JSON).
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

POOLS = ("random", "mapspace")


def _child(pool: str, repeats: int, sizes: list[int]) -> None:
    """One checkout's timings (its own package on ``PYTHONPATH``), as JSON on stdout."""
    import numba
    import numpy as np

    numba.set_num_threads(1)
    from accelmap.costmodels.aspect import AspectModel
    from accelmap.mapper.mapping import MappingBatch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import _aspect_case

    problem, arch = _aspect_case()
    z = np.load(pool)
    model = AspectModel(engine="cpu")
    out: dict = {}
    for name in POOLS:
        rows = MappingBatch(temporal=z[f"{name}_temporal"], spatial=z[f"{name}_spatial"], order=z[f"{name}_order"],
                            keep=z[f"{name}_keep"])
        model.evaluate(problem, arch, rows.take(slice(0, 64)))
        # the steady state of a long run: every driver a checkout switches to after a number of
        # rows (the aspect rows per structure, `_aspect_cpu`, where the checkout has them) compiled
        model.evaluate(problem, arch, rows)
        try:
            from accelmap.costmodels import _aspect_cpu
        except ImportError:
            pass
        else:
            _aspect_cpu.wait()
        for n in sizes:
            batch = rows.take(slice(0, n))
            model.evaluate(problem, arch, batch)
            got: dict = {"thread_ns": [], "wall_ns": []}
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), time.thread_time()
                model.evaluate(problem, arch, batch)
                got["wall_ns"].append((time.perf_counter() - t0) / n * 1e9)
                got["thread_ns"].append((time.thread_time() - c0) / n * 1e9)
            out[f"{name} {n}"] = got
    print(json.dumps(out))


def _save_pools(path: str, n: int, seed: int = 0) -> None:
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_costmodel import _aspect_case, _aspect_pool

    from accelmap.costmodels.aspect import aspect_constraints
    from accelmap.mapper.space import MapSpace

    problem, arch = _aspect_case()
    pools = {"random": _aspect_pool(problem, arch, n, np.random.default_rng(seed)),
             "mapspace": MapSpace(problem, arch, aspect_constraints(problem, arch)).sample(
                 n, np.random.default_rng(seed + 1))}
    np.savez(path, **{f"{k}_{f}": getattr(b, f) for k, b in pools.items()
                      for f in ("temporal", "spatial", "order", "keep")})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkouts", nargs="*", help="label=path of a checkout of this repository")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
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
        _save_pools(pool, max(args.sizes))
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
                for key, x in json.loads(res.stdout.strip().splitlines()[-1]).items():
                    slot = raw.setdefault(label, {}).setdefault(key, {"thread_ns": [], "wall_ns": []})
                    for q in ("thread_ns", "wall_ns"):
                        slot[q] += x[q]
            loads.append(os.getloadavg()[0])
    summary: dict = {}
    first = versions[0][0]
    for label, per in raw.items():
        for key, x in per.items():
            med, best = statistics.median(x["thread_ns"]), min(x["thread_ns"])
            ratio = med / statistics.median(raw[first][key]["thread_ns"])
            summary.setdefault(label, {})[key] = {
                "thread_median_ns": med, "thread_best_ns": best, "wall_median_ns": statistics.median(x["wall_ns"]),
                "evals_per_cpu_s": 1e9 / med, "ratio_to_first": ratio, "samples": len(x["thread_ns"])}
            print(f"{label:>10} {key:>16}: {med:7.1f} / {best:7.1f} ns a row (median / best thread time), "
                  f"{1e9 / med:12,.0f} evals per CPU s, {ratio:.3f}x the time of {first}")
    print("load average (1 min) by round:", [round(x, 2) for x in loads])
    if args.out:
        args.out.write_text(json.dumps({"case": "vgg16_conv3/maestro-acc1-1024", "checkouts": dict(versions),
                                        "rounds": args.rounds, "repeats": args.repeats, "load_1min": loads,
                                        "summary": summary, "raw": raw}, indent=1) + "\n")


if __name__ == "__main__":
    main()
