"""The loopnest cpu engine with this tree's generated rows against another checkout's, one process.

Run by hand from the repo root::

    python benchmarks/bench_loopnest_rows_ab.py --before <checkout> [--sizes 10000 100000] [--repeats 15]

``<checkout>``'s generator (`accelmap.costmodels._loopnest_gen.source`, run in a subprocess with
``PYTHONPATH=<checkout>/src``) writes its rows for the case of ``bench_costmodel.py --backends``
(res2a_branch2b on eyeriss-like); this process compiles them beside its own and times
``LoopNestModel.evaluate`` and ``evaluate_objective`` of the cpu engine (the specialised driver
serving, one thread) with each in turn, interleaved within every repeat, on the same
``MapSpace.sample_valid`` rows, so that the load of a shared machine and the process's memory
layout hit both alike (the same compiled code runs up to 15% apart from one process to the
next). The engine around the rows is this tree's for both (with the other checkout's rows it
writes every count entry: rows of an older generator write them whatever ``full`` says). Outputs
are checked equal first. Time: thread CPU time and wall time, ns a row, medians and bests.
Results: ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASE = ("resnet50/res2a_branch2b", "eyeriss-like")
_WRITE_SOURCE = """
import sys
from accelmap.arch.io import load_arch
from accelmap.costmodels import _loopnest_kernel as lk, _loopnest_gen as gen
from accelmap.workloads.io import load_problem
c = lk.kernel_consts(load_problem(sys.argv[2]), load_arch(sys.argv[3]))
open(sys.argv[1], "w").write(gen.source(c.structure))
"""


def _rows_of(checkout: Path, folder: Path):  # noqa: ANN202 (a numba dispatcher)
    """The generated rows of ``checkout`` for `CASE`, compiled in this process."""
    path = folder / f"before_rows_{abs(hash(str(checkout.resolve())))}.py"
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    subprocess.run([sys.executable, "-c", _WRITE_SOURCE, str(path), *CASE], env=env, check=True)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod.rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="a checkout of this repository")
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numba

    numba.set_num_threads(1)
    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _loopnest_cpu as cpu
    from accelmap.costmodels import _loopnest_kernel as lk
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    problem, arch = load_problem(CASE[0]), load_arch(CASE[1])
    pool = MapSpace(problem, arch).sample_valid(max(args.sizes), np.random.default_rng(0))
    S = lk.kernel_consts(problem, arch).structure
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        before = _rows_of(args.before, Path(tmp))
        after = cpu.rows_driver(S)
        rows_of = {"before": before, "after": after}
        own = cpu.rows_driver
        # one model per rows: a model's serial plan (`_loopnest_kernel.SerialPlan`) takes its
        # rows from `rows_driver` once, when it is built, and keeps them
        models = {name: LoopNestModel(engine="cpu") for name in rows_of}
        which = {"rows": "after"}
        lk._SPECIALISE_IN_BACKGROUND = False  # (both rows compiled here before the timing)
        cpu.rows_driver = lambda s: rows_of[which["rows"]] if s == S else own(s)
        try:
            for name, model in models.items():  # compile (or load) both, then the specialised driver serves
                which["rows"] = name
                seen = 0
                while seen < lk._SPECIALISE_AFTER_ROWS:
                    model.evaluate(problem, arch, pool)
                    seen += len(pool)
                assert model._plan is not None and model._plan[2].rows is rows_of[name]
            first_s = time.process_time() - t0
            check = pool.take(slice(0, 2000))
            got = {}
            for name, model in models.items():
                which["rows"] = name
                m = model.evaluate(problem, arch, check)
                got[name] = {f: np.array(getattr(m, f)) for f in ("cycles", "energy_pj", "valid", "reason", "reads",
                                                                    "fills", "updates", "energy_breakdown_pj",
                                                                    "multicast", "spatial_reductions")}
                del m
            for f, v in got["before"].items():
                np.testing.assert_array_equal(v, got["after"][f])
            load_start = list(os.getloadavg())
            out: dict = {"case": f"{CASE[0]} / {CASE[1]}", "before": str(args.before), "repeats": args.repeats,
                         "load_average_start": load_start, "first_calls_cpu_s": first_s, "sizes": {}}
            for n in args.sizes:
                batch = pool.take(slice(0, n))
                calls = {f"{name}_{kind}": (name, getattr(models[name], kind))
                         for kind in ("evaluate", "evaluate_objective") for name in rows_of}
                for name, fn in calls.values():
                    which["rows"] = name
                    fn(problem, arch, batch)
                th: dict[str, list[float]] = {k: [] for k in calls}
                wa: dict[str, list[float]] = {k: [] for k in calls}
                for _ in range(args.repeats):
                    for key, (name, fn) in calls.items():
                        which["rows"] = name
                        t0, c0 = time.perf_counter(), time.thread_time()
                        fn(problem, arch, batch)
                        wa[key].append((time.perf_counter() - t0) / n * 1e9)
                        th[key].append((time.thread_time() - c0) / n * 1e9)
                out["sizes"][str(n)] = {k: {"thread_ns_median": float(np.median(th[k])), "thread_ns_best": min(th[k]),
                                            "wall_ns_median": float(np.median(wa[k])), "wall_ns_best": min(wa[k])}
                                        for k in calls}
                for k, v in out["sizes"][str(n)].items():
                    print(f"{n:>7} {k:28s} thread {v['thread_ns_median']:6.1f} (best {v['thread_ns_best']:6.1f})  "
                          f"wall {v['wall_ns_median']:6.1f} (best {v['wall_ns_best']:6.1f}) ns a row")
            out["load_average_end"] = list(os.getloadavg())
        finally:
            cpu.rows_driver = own
    print(f"load {out['load_average_start']} -> {out['load_average_end']}")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
