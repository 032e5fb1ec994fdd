"""`accelmap sweep SWEEP.yaml`: run a sweep on Ray (or serially) into a results store.

Re-running the same command skips the tasks the store already holds and runs the rest, so
an interrupted sweep (Ctrl-C, a lost node) is finished by running it again. Exit 0 when
every task is done, 1 when some tasks failed (their errors are in the store; a re-run
retries them), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="run a sweep file (workloads x archs x models x searchers x seeds)",
        description="Run every task of a sweep file that the results store does not hold yet, "
                    "one search per task, on Ray (a local Ray by default) or serially. Results "
                    "are committed as they finish; re-run the command to resume.")
    p.add_argument("sweep", help="sweep file (YAML, version: 1; see docs/sweeps.md)")
    p.add_argument("--store", default=None, metavar="PATH",
                   help="results store (SQLite; default ./accelmap-results.sqlite)")
    p.add_argument("--backend", choices=("ray", "serial"), default="ray",
                   help="where tasks run (default: ray)")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="Ray cluster to join: 'auto' (this node's cluster) or ray://HOST:10001; "
                        "default: start a local Ray")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="tasks in flight at once (default: every CPU of the local machine or cluster)")
    p.add_argument("--max-tasks", type=int, default=None, metavar="N",
                   help="run at most N of the remaining tasks, leave the rest for a later run")
    p.add_argument("--dry-run", action="store_true",
                   help="list the sweep's axes and how many tasks are left, run nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelmap.cli import UsageError
    from accelmap.parallel.backend import make_backend
    from accelmap.parallel.store import DEFAULT_STORE, ResultStore
    from accelmap.parallel.sweep import load_sweep, run_sweep

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}; expected an int >= 1")
    if args.max_tasks is not None and args.max_tasks < 0:
        raise UsageError(f"--max-tasks {args.max_tasks}; expected an int >= 0")
    if args.backend == "serial" and (args.address or args.workers not in (None, 1)):
        raise UsageError("--address and --workers need the Ray backend; drop --backend serial")
    sweep = load_sweep(args.sweep)
    store_path = args.store or DEFAULT_STORE
    with ResultStore(store_path) as store:
        tasks = sweep.tasks()
        done = store.done_keys(t.key for t in tasks)
        left = len(tasks) - len(done)
        print(f"sweep {sweep.name}: {len(sweep.workloads)} workload(s) x {len(sweep.archs)} arch(s) x "
              f"{len(sweep.models)} model(s) x {len(sweep.searchers)} searcher(s) x {len(sweep.seeds)} "
              f"seed(s) = {len(tasks)} tasks; {len(done)} already in {store_path}, {left} to run",
              file=sys.stderr)
        if args.dry_run:
            for arch in sweep.archs:
                print(f"  arch  {arch.name}", file=sys.stderr)
            for network, problem in sweep.workloads:
                print(f"  layer {(network + '/') if network else ''}{problem.describe()}", file=sys.stderr)
            return 0
        if left == 0:
            return 0
        backend = make_backend(args.backend, address=args.address, workers=args.workers,
                               log_to_driver=args.verbose > 0)
        try:
            if args.backend == "ray":
                print(f"running on Ray with {backend.n_workers} worker(s)", file=sys.stderr)
            summary = run_sweep(sweep, store=store, backend=backend, max_tasks=args.max_tasks,
                                progress=not args.no_progress and sys.stderr.isatty())
        finally:
            backend.close()
        print(f"{summary.n_run} task(s) finished in {summary.wall_s:.1f} s: {summary.n_ok} ok, "
              f"{summary.n_infeasible} infeasible, {summary.n_failed} failed; "
              f"{summary.n_tasks - summary.n_remaining} of {summary.n_tasks} done in {store_path}",
              file=sys.stderr)
        if summary.n_failed:
            first = next(store.rows(status="error", columns=("layer", "arch", "searcher", "error")), None)
            if first is not None:
                msg = (first["error"] or "").splitlines()[0] if first["error"] else "?"
                print(f"first failure: {first['layer']} on {first['arch']} ({first['searcher']}): {msg}",
                      file=sys.stderr)
        if summary.interrupted:
            print(f"interrupted: {summary.n_remaining} task(s) left; run the same command again to "
                  "finish them", file=sys.stderr)
            return 130
        if summary.n_remaining:
            print(f"{summary.n_remaining} task(s) left; run the same command again to "
                  f"{'retry' if summary.n_failed else 'finish'} them", file=sys.stderr)
        return 1 if summary.n_failed else 0
