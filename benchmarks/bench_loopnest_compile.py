"""First-call (compile) time of the loopnest CPU kernels, with an empty numba cache.

Run by hand from the repo root::

    python benchmarks/bench_loopnest_compile.py [--repeats 3] [--src OTHER/src ...] [--passes]

Each measurement is a fresh process with a fresh ``NUMBA_CACHE_DIR``: it builds a case, then
times one `LoopNestModel.evaluate` of 64 legal rows on the ``cpu`` engine, on the generic
driver (``_loopnest_rules.eval_rows``) or on the driver specialised per structure
(``_loopnest_cpu``), by process CPU time (steadier than wall time on a shared machine) and
wall time. A second process on the filled cache gives the load time. With several ``--src``
trees (e.g. an older checkout's ``src``) the trees are measured in turn within each repeat
(interleaved), so that the machine's load hits them alike; the figures are medians.

``--runtime OLD_SRC``: instead, the run-time speed of the two drivers of this tree against
those of another tree's ``_loopnest_rules`` (in a tree older than that module, its
``_loopnest_kernel``) / ``_loopnest_cpu`` files (loaded beside them in one process), on 10,000
legal rows, one core, every entry timed in turn within each repeat, by the calling thread's
CPU time (`time.thread_time`: on a loaded machine it leaves out the time the thread waits for a
core); medians in ns per row (``bench_loopnest_compile_runtime.json``).

``--passes``: also record numba's compile events (``numba:run_pass``) and report, per
compiled function, its exclusive time per compiler pass (the largest ones), to show where a
compile spends its time.

Results: ``benchmarks/results/bench_loopnest_compile.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_loopnest_compile.json"

# Cases: (label, problem, arch); distinct structures (shapes, sliding windows or not).
CASES = {
    "res2a_branch2b/eyeriss-like": ("resnet50/res2a_branch2b", "eyeriss-like"),
    "matmul/simba-like": ("matmul", "simba-like"),
}

_CHILD = r"""
import json, sys, time
import numpy as np
from accelmap.arch.io import load_arch
from accelmap.costmodels import _loopnest_kernel as lk
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.space import MapSpace

problem_name, arch_name, driver, passes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
if problem_name == "matmul":
    from accelmap.workloads.builders import matmul
    problem = matmul("mm", m=256, n=128, k=512)
else:
    from accelmap.workloads.io import load_problem
    problem = load_problem(problem_name)
arch = load_arch(arch_name)
batch = MapSpace(problem, arch).sample_valid(64, np.random.default_rng(0))
lk._SPECIALISE_AFTER_ROWS = 0 if driver == "specialised" else 1 << 62
lk._SPECIALISE_IN_BACKGROUND = False  # (the compile timed here, in this process)
model = LoopNestModel(engine="cpu")
rec = None
if passes:
    from numba.core import event
    rec = event.RecordingListener()
    event.register("numba:run_pass", rec)
c0, t0 = time.process_time(), time.perf_counter()
m = model.evaluate(problem, arch, batch)
out = {"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0, "valid": int(m.valid.sum())}
if rec is not None:
    # exclusive time per (function, pass): nested passes (a callee compiled inside a
    # caller's pass) are subtracted from their parent
    stack, excl = [], {}
    for ts, ev in rec.buffer:
        if ev.is_start:
            stack.append([ev.data["qualname"], ev.data["name"].split(" [")[0], ts, 0.0])
        else:
            fn, name, start, inner = stack.pop()
            dur = ts - start
            excl[fn + " :: " + name] = excl.get(fn + " :: " + name, 0.0) + dur - inner
            if stack:
                stack[-1][3] += dur
    out["passes"] = excl
print("RESULT " + json.dumps(out))
"""


def _one(src: Path, case: str, driver: str, passes: bool) -> dict:
    problem, arch = CASES[case]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(src), OMP_NUM_THREADS="1",
                   NUMBA_NUM_THREADS="1")
        res = {}
        for key in ("cold", "warm"):
            run = subprocess.run([sys.executable, "-c", _CHILD, problem, arch, driver,
                                  "1" if passes and key == "cold" else "0"],
                                 env=env, capture_output=True, text=True)
            if run.returncode:
                raise RuntimeError(f"{src} {case} {driver}: {run.stderr[-3000:]}")
            line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT "))
            res[key] = json.loads(line[len("RESULT "):])
    return res


def _load(path: Path, name: str, rename: tuple[str, str] | None = None):  # noqa: ANN202 (a module)
    """The file ``path`` as module ``name``; with ``rename`` (old, new), its source with ``old``
    replaced by ``new``, run from a copy beside it in a temporary folder."""
    import importlib.util

    if rename is not None:
        copy = Path(tempfile.mkdtemp(prefix="bench_loopnest_compile_")) / path.name
        copy.write_text(path.read_text().replace(*rename))
        path = copy
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def runtime(old_src: Path, repeats: int, n: int) -> dict:
    """ns per row of the generic and specialised drivers, this tree's and ``old_src``'s."""
    import time
    from dataclasses import replace

    import numba
    import numpy as np

    sys.path.insert(0, str(ROOT / "src"))
    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _loopnest_cpu as new_cpu
    from accelmap.costmodels import _loopnest_kernel as new_k
    from accelmap.costmodels import _loopnest_rules as new_rules
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    numba.set_num_threads(1)
    old_dir = old_src / "accelmap" / "costmodels"
    old_rules_path = old_dir / "_loopnest_rules.py"
    if not old_rules_path.exists():  # (a tree older than that module: its rules and generic driver sat here)
        old_rules_path = old_dir / "_loopnest_kernel.py"
    old_rules = _load(old_rules_path, "_old_rules")
    # the other tree's engine on that tree's rules, not this tree's (it imports them as a module of the package)
    old_cpu = _load(old_dir / "_loopnest_cpu.py", "_old_loopnest_cpu",
                    (f"from accelmap.costmodels import {old_rules_path.stem}\n",
                     f"import _old_rules as {old_rules_path.stem}\n"))
    problem, arch = load_problem("resnet50/res2a_branch2b"), load_arch("eyeriss-like")
    b = MapSpace(problem, arch).sample_valid(n, np.random.default_rng(0))
    consts = new_k.kernel_consts(problem, arch)
    mp = tuple(np.ascontiguousarray(x, dtype=dt) for x, dt in
               ((b.temporal, np.int64), (b.spatial, np.int64), (b.order, np.int64), (b.keep, np.bool_)))
    L, T, D, C = arch.n_levels, problem.n_tensors, problem.n_dims, consts.coef.shape[1]
    grid = int(consts.ints[1])
    frac = np.ones(T)

    def spec(cpu, full):  # noqa: ANN001, ANN202
        res, valid, codes = np.empty((n, 4)), np.empty(n, np.bool_), np.empty((n, 2), np.int64)
        cnt = np.empty((n, 6, L, T)) if full else np.empty((1, 1, 6, L, T))
        sc = new_rules.scratch(1, L, D, T, C, grid)
        own = replace(consts, structure=cpu.structure(consts))  # (each tree's structure tuple has its own form)
        return lambda: cpu.evaluate_rows(own, *mp, frac, res, valid, codes, cnt, full, sc, 1)

    def generic(k):  # noqa: ANN001, ANN202
        res, valid, codes, cnt = np.empty((n, 4)), np.empty(n, np.bool_), np.empty((n, 2), np.int64), \
            np.empty((n, 6, L, T))
        sc = tuple(x[0] for x in new_rules.scratch(1, L, D, T, C, grid))
        return lambda: k.eval_rows(0, n, *mp, *consts.as_tuple(), res, valid, codes, cnt, *sc)

    entries = {"specialised_objective_new": spec(new_cpu, False), "specialised_objective_old": spec(old_cpu, False),
               "specialised_counts_new": spec(new_cpu, True), "specialised_counts_old": spec(old_cpu, True),
               "generic_new": generic(new_rules), "generic_old": generic(old_rules)}
    for fn in entries.values():  # compile (or load) first
        fn()
    times: dict[str, list[float]] = {k: [] for k in entries}
    load = [list(os.getloadavg())]
    for _ in range(repeats):
        for key, fn in entries.items():
            t0 = time.thread_time()
            fn()
            times[key].append((time.thread_time() - t0) / n * 1e9)
    load.append(list(os.getloadavg()))
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {"rows": n, "repeats": repeats, "timer": "time.thread_time", "load_average": load, "ns_per_row_median": med,
           "ns_per_row_best": {k: min(v) for k, v in times.items()},
           "new_over_old_median": {k: med[k + "_new"] / med[k + "_old"]
                                   for k in ("specialised_objective", "specialised_counts", "generic")}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", nargs="+", default=[str(ROOT / "src")], help="source trees to compare (interleaved)")
    ap.add_argument("--labels", nargs="+", help="a label per --src (default: the paths)")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--drivers", nargs="+", default=["generic", "specialised"], choices=["generic", "specialised"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--passes", action="store_true", help="per-function, per-pass exclusive compile times")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--runtime", type=Path, metavar="OLD_SRC", help="run-time speed against OLD_SRC's drivers")
    ap.add_argument("--rows", type=int, default=10_000)
    args = ap.parse_args()
    if args.runtime is not None:
        res = runtime(args.runtime, args.repeats, args.rows)
        out_path = args.out if args.out != RESULTS else RESULTS.with_name("bench_loopnest_compile_runtime.json")
        out_path.write_text(json.dumps({"command": " ".join(sys.argv), **res}, indent=1) + "\n")
        print(json.dumps(res, indent=1))
        return
    labels = args.labels or args.src
    if len(labels) != len(args.src):
        ap.error("--labels needs one label per --src")
    runs: dict = {lab: {c: {d: [] for d in args.drivers} for c in args.cases} for lab in labels}
    load = [list(os.getloadavg())]
    for r in range(args.repeats):
        for case in args.cases:
            for driver in args.drivers:
                for lab, src in zip(labels, args.src, strict=True):
                    res = _one(Path(src), case, driver, args.passes and r == 0)
                    runs[lab][case][driver].append(res)
                    print(f"{lab:>12} {case:>28} {driver:>11}: cold {res['cold']['cpu_s']:.2f} s cpu "
                          f"({res['cold']['wall_s']:.2f} wall), warm {res['warm']['cpu_s']:.3f} s", flush=True)
        load.append(list(os.getloadavg()))
    summary: dict = {}
    for lab in labels:
        for case in args.cases:
            for driver in args.drivers:
                rs = runs[lab][case][driver]
                entry = {
                    "cold_cpu_s_median": statistics.median(x["cold"]["cpu_s"] for x in rs),
                    "cold_wall_s_median": statistics.median(x["cold"]["wall_s"] for x in rs),
                    "warm_cpu_s_median": statistics.median(x["warm"]["cpu_s"] for x in rs),
                    "cold_cpu_s": [round(x["cold"]["cpu_s"], 3) for x in rs],
                }
                top = rs[0]["cold"].get("passes")
                if top:
                    entry["top_passes_s"] = dict(sorted(((k, round(v, 3)) for k, v in top.items()),
                                                        key=lambda kv: -kv[1])[:15])
                summary.setdefault(lab, {}).setdefault(case, {})[driver] = entry
    out = {"command": " ".join(sys.argv), "repeats": args.repeats, "load_average": load,
           "cpu": os.cpu_count(), "sources": dict(zip(labels, args.src, strict=True)), "results": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
