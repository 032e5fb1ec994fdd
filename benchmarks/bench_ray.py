"""Sweep throughput on a local Ray with 1 and 2 workers, and the per-task overhead.

Run by hand::

    python benchmarks/bench_ray.py                  # synthetic tasks of ~2 s of CPU work
    python benchmarks/bench_ray.py --task search    # real searches (budget per task)

Writes ``benchmarks/results/bench_ray.json``:

* ``tasks_per_s`` for 1 and 2 workers: finished tasks / wall time of the sweep, every task
  committed to a SQLite store as in a real sweep. One local Ray with 2 CPUs is started once
  (``ray_init_s``) and warmed up; "1 worker" keeps one task in flight, "2 workers" two.
  Rounds of 1 and 2 workers alternate (``--rounds``) so that load from other processes hits
  both alike; the figures are medians over rounds;
* ``speedup`` = tasks_per_s[2] / tasks_per_s[1] (target >= 1.8 on tasks of a few seconds),
  and ``speedup_per_round``;
* ``overhead_per_task_ms``: wall time per no-op task with one worker (Ray round trip,
  pickling, one store commit); ``driver_overhead_per_task_ms``: (sweep wall - sum of task
  wall times) / tasks with one worker;
* ``serial``: the same tasks in-process without Ray; the load average before and after, and
  ``task_slowdown_2_vs_1`` per round (mean task time with 2 workers / with 1: about 1.0
  when both cores are free). The machine may be shared: ``contended`` and ``note`` say when
  other processes took CPU from the run; ``speedup_free_rounds_median`` is the median
  speedup over the ``free_rounds`` rounds whose slowdown was at most 1.1.

``--migration`` instead compares portfolio quality at equal budget: the best EDP of a
portfolio whose members exchange elites over ``--rounds`` rounds against independent
members (``bench_ray_migration.json``).

Synthetic tasks do a fixed amount of CPU work (numpy on small arrays, calibrated once), not a
fixed time, so that contention shows as it would for real searches.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from accelmap.parallel.backend import RayBackend, SerialBackend
from accelmap.parallel.store import ResultStore
from accelmap.parallel.sweep import SearchTask, run_search_task, run_tasks
from accelmap.testing.examples import small_arch, small_conv

OUT = Path(__file__).resolve().parent / "results" / "bench_ray.json"


def _work(n_iter: int) -> float:
    """A fixed amount of single-threaded CPU work."""
    rng = np.random.default_rng(0)
    a = rng.random((64, 64))
    acc = 0.0
    for _ in range(n_iter):
        a = np.tanh(a @ a.T * 1e-2)
        acc += float(a[0, 0])
    return acc


def spin_task(task: SearchTask) -> dict:
    n_iter = int(task.searcher_options["n_iter"])
    t0 = time.perf_counter()
    _work(n_iter)
    dt = time.perf_counter() - t0
    return {"cycles": float(n_iter), "energy_pj": dt, "edp": n_iter * dt, "n_evaluations": n_iter}


def noop_task(task: SearchTask) -> dict:
    return {"cycles": 1.0, "energy_pj": 1.0, "edp": 1.0}


def _calibrate(target_s: float) -> int:
    _work(20)
    n = 50
    while True:
        t0 = time.perf_counter()
        _work(n)
        dt = time.perf_counter() - t0
        if dt > 0.3:
            return max(1, int(n * target_s / dt))
        n *= 2


def _tasks(n: int, options: dict, tag: str, searcher: str = "random") -> list[SearchTask]:
    p, a = small_conv(), small_arch()
    return [SearchTask(problem=p, arch=a, searcher=searcher, searcher_options={**options, "tag": tag},
                       seed=i, seed_index=i, sweep=f"bench-{tag}") for i in range(n)]


def _sweep(backend, fn, tasks, store_path: Path) -> tuple[float, float]:
    with ResultStore(store_path) as store:
        t0 = time.perf_counter()
        summary = run_tasks(tasks, store=store, backend=backend, task_fn=fn)
        wall = time.perf_counter() - t0
        assert summary.n_ok == len(tasks), summary
        task_s = sum(r["wall_s"] for r in store.rows(columns=("wall_s",)) if r["wall_s"] is not None)
    return wall, task_s


def migration(args: argparse.Namespace) -> None:
    """Portfolio quality at equal budget: independent members vs islands with migration."""
    from accelmap.arch.presets import preset
    from accelmap.parallel.portfolio import run_portfolio
    from accelmap.workloads.zoo import layer

    prob, arch = layer(args.layer), preset(args.arch)
    searchers = tuple(args.searchers.split(","))
    runs = []
    for root in range(args.n_portfolios):
        for rounds in (1, args.rounds):
            t0 = time.perf_counter()
            res = run_portfolio(prob, arch, searchers=searchers, seeds=args.seeds, seed=root, budget=args.budget,
                                rounds=rounds, n_elites=2, backend="serial")
            runs.append({"seed": root, "rounds": rounds, "best_edp": res.best.edp, "n_evaluations": res.n_evaluations,
                         "wall_s": time.perf_counter() - t0, "winner": res.best_member.searcher})
    ratios = []
    for root in range(args.n_portfolios):
        one = next(r for r in runs if r["seed"] == root and r["rounds"] == 1)
        many = next(r for r in runs if r["seed"] == root and r["rounds"] == args.rounds)
        ratios.append(many["best_edp"] / one["best_edp"])
    out = {"benchmark": "bench_ray --migration", "layer": args.layer, "arch": args.arch, "searchers": searchers,
           "seeds_per_searcher": args.seeds, "budget_per_member": args.budget, "rounds": args.rounds,
           "runs": runs, "edp_ratio_migration_over_independent": ratios,
           "median_edp_ratio": statistics.median(ratios)}
    path = Path(args.out).with_name("bench_ray_migration.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("edp_ratio_migration_over_independent", "median_edp_ratio")}, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=("synthetic", "search"), default="synthetic")
    ap.add_argument("--migration", action="store_true",
                    help="instead: portfolio best EDP with --rounds rounds of migration vs none, equal budget "
                         "(writes bench_ray_migration.json)")
    ap.add_argument("--layer", default="resnet50/conv3_1", help="--migration: zoo layer")
    ap.add_argument("--arch", default="eyeriss-like", help="--migration: arch preset")
    ap.add_argument("--searchers", default="anneal,genetic", help="--migration: portfolio searchers")
    ap.add_argument("--seeds", type=int, default=2, help="--migration: seeds per searcher")
    ap.add_argument("--n-portfolios", type=int, default=3, help="--migration: portfolios (root seeds) compared")
    ap.add_argument("--n-tasks", type=int, default=8, help="tasks per sweep (default 8)")
    ap.add_argument("--task-s", type=float, default=2.0, help="synthetic task length on an idle core")
    ap.add_argument("--budget", type=int, default=20000,
                    help="evaluations per search (--task search) or per portfolio member (--migration)")
    ap.add_argument("--searcher", default="random", help="searcher of --task search")
    ap.add_argument("--model", default="loopnest", help="cost model of --task search")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of 1 and 2 workers; with --migration: portfolio rounds")
    ap.add_argument("--n-noop", type=int, default=100, help="no-op tasks for the overhead figure")
    ap.add_argument("--settle-s", type=float, default=8.0,
                    help="wait after ray.init for Ray's own helper processes to finish starting")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if args.migration:
        migration(args)
        return

    load_before = os.getloadavg()
    if args.task == "synthetic":
        n_iter = _calibrate(args.task_s)
        fn, options, searcher = spin_task, {"n_iter": n_iter}, "random"
    else:
        from accelmap.workloads.zoo import layer

        n_iter = None
        fn, options, searcher = run_search_task, {}, args.searcher

    def tasks(tag: str) -> list[SearchTask]:
        if args.task == "synthetic":
            return _tasks(args.n_tasks, options, tag)
        prob = layer("resnet50/conv3_1")
        from accelmap.arch.presets import preset

        arch = preset("eyeriss-like")
        return [SearchTask(problem=prob, arch=arch, model=args.model, searcher=searcher, budget=args.budget,
                           seed=1000 + i, seed_index=i, sweep=f"bench-{tag}") for i in range(args.n_tasks)]

    out: dict = {
        "benchmark": "bench_ray",
        "task": args.task,
        "n_tasks": args.n_tasks,
        "synthetic_task_s_idle": args.task_s if args.task == "synthetic" else None,
        "synthetic_n_iter": n_iter,
        "budget": args.budget if args.task == "search" else None,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "loadavg_before": load_before,
    }
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        # Serial baseline: the same tasks in this process, no Ray.
        wall, task_s = _sweep(SerialBackend(), fn, tasks("serial"), tmpdir / "serial.sqlite")
        out["serial"] = {"wall_s": wall, "task_s": task_s, "tasks_per_s": args.n_tasks / wall}
        # One local Ray with 2 CPUs; "1 worker" = at most one task in flight. Rounds of 1 and
        # 2 workers alternate so that load from other processes hits both alike.
        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 object_store_memory=256 * 1024**2)
        out["ray_init_s"] = time.perf_counter() - t0
        # Ray's agents keep importing for seconds after init returns; let them settle, then
        # warm the workers up (process start, imports), not counted.
        time.sleep(args.settle_s)
        _sweep(RayBackend(workers=2), noop_task, _tasks(4, {}, "warm"), tmpdir / "warm.sqlite")
        rounds: dict[int, list[dict]] = {1: [], 2: []}
        try:
            for r in range(args.rounds):
                for workers in (1, 2):
                    wall, task_s = _sweep(RayBackend(workers=workers), fn, tasks(f"r{r}w{workers}"),
                                          tmpdir / f"r{r}w{workers}.sqlite")
                    rounds[workers].append({"wall_s": wall, "task_s": task_s, "tasks_per_s": args.n_tasks / wall,
                                            "mean_task_s": task_s / args.n_tasks,
                                            "driver_overhead_per_task_ms": 1e3 * (wall * workers - task_s) / args.n_tasks,
                                            "loadavg": os.getloadavg()[0]})
            nw, _ = _sweep(RayBackend(workers=1), noop_task, _tasks(args.n_noop, {}, "noop"), tmpdir / "noop.sqlite")
        finally:
            ray.shutdown()
    for workers in (1, 2):
        out[f"workers_{workers}"] = {"rounds": rounds[workers],
                                     "tasks_per_s_median": statistics.median(x["tasks_per_s"] for x in rounds[workers])}
    tps = {w: out[f"workers_{w}"]["tasks_per_s_median"] for w in (1, 2)}
    out["tasks_per_s"] = {"1": tps[1], "2": tps[2]}
    out["speedup"] = tps[2] / tps[1]
    out["speedup_per_round"] = [b["tasks_per_s"] / a["tasks_per_s"] for a, b in zip(rounds[1], rounds[2], strict=True)]
    out["overhead_per_task_ms"] = 1e3 * nw / args.n_noop
    out["driver_overhead_per_task_ms"] = statistics.median(x["driver_overhead_per_task_ms"] for x in rounds[1])
    out["loadavg_after"] = os.getloadavg()
    # How much slower a task ran beside another than alone: about 1.0 when both cores are free.
    out["task_slowdown_2_vs_1"] = [b["mean_task_s"] / a["mean_task_s"]
                                   for a, b in zip(rounds[1], rounds[2], strict=True)]
    # Rounds in which two tasks side by side ran at their solo speed: the cores were free.
    free = [sp for sp, sl in zip(out["speedup_per_round"], out["task_slowdown_2_vs_1"], strict=True) if sl <= 1.1]
    out["free_rounds"] = len(free)
    out["speedup_free_rounds_median"] = statistics.median(free) if free else None
    busy = load_before[0] > 0.5 or statistics.median(out["task_slowdown_2_vs_1"]) > 1.15
    out["contended"] = bool(busy)
    out["note"] = ("other processes competed for the cores (load before the run "
                   f"{load_before[0]:.2f}; a task ran {statistics.median(out['task_slowdown_2_vs_1']):.2f}x "
                   "slower beside another than alone), so the speedup understates what 2 free cores give"
                   ) if busy else "machine quiet"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("tasks_per_s", "speedup", "speedup_per_round", "free_rounds",
                                          "speedup_free_rounds_median", "overhead_per_task_ms",
                                          "driver_overhead_per_task_ms", "loadavg_before", "loadavg_after")}, indent=2))


if __name__ == "__main__":
    main()
