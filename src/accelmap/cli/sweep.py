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
    p.add_argument("--retries", type=int, default=3, metavar="N",
                   help="Ray retries of a task whose worker or node is lost (default 3)")
    p.add_argument("--max-tasks", type=int, default=None, metavar="N",
                   help="run at most N of the remaining tasks, leave the rest for a later run")
    p.add_argument("--dry-run", action="store_true",
                   help="list the sweep's axes and how many tasks are left, run nothing")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where each search's inner loop runs (default cpu; cuda: random, anneal and exhaustive on loopnest, "
                        "on an NVIDIA GPU, see accelmap search --device)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelmap.cli import UsageError
    from accelmap.parallel.backend import make_backend
    from accelmap.parallel.store import DEFAULT_STORE, ResultStore
    from accelmap.parallel.sweep import load_sweep, run_sweep

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}; expected an int >= 1")
    if args.retries < 0:
        raise UsageError(f"--retries {args.retries}; expected an int >= 0")
    if args.max_tasks is not None and args.max_tasks < 0:
        raise UsageError(f"--max-tasks {args.max_tasks}; expected an int >= 0")
    if args.backend == "serial" and (args.address or args.workers not in (None, 1)):
        raise UsageError("--address and --workers need the Ray backend; drop --backend serial")
    if args.device is not None:  # every task's search reads it (accelmap.search.api.search)
        import os

        from accelmap.search.gpu import check_device

        check_device(args.device)
        os.environ["ACCELMAP_DEVICE"] = args.device
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
                               max_retries=args.retries, log_to_driver=args.verbose > 0)
        try:
            if args.backend == "ray":
                print(f"running on Ray with {getattr(backend, 'n_workers', 1)} worker(s)", file=sys.stderr)
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


# --- the portfolio options of `accelmap search` ------------------------------------------
_PORTFOLIO_OPTIONS = ("workers", "seeds", "address", "backend", "rounds")


def add_portfolio_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--workers/--seeds/--address/--backend/--rounds`` (and ``--elites/--store/--no-store``,
    which only a portfolio uses) to the `accelmap search` parser."""
    g = p.add_argument_group("portfolio (several searches of one layer at once, the best kept)")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run a portfolio on N Ray workers: every searcher of --searcher (comma-"
                        "separated, e.g. anneal,genetic) x --seeds seeds spawned from --seed")
    g.add_argument("--seeds", type=int, default=None, metavar="K",
                   help="portfolio seeds per searcher (default: enough to give every worker a search)")
    g.add_argument("--address", default=None, metavar="ADDR",
                   help="Ray cluster to join ('auto' or ray://HOST:10001); default: a local Ray")
    g.add_argument("--backend", choices=("ray", "serial"), default=None,
                   help="portfolio backend (default ray; serial runs the members one by one)")
    g.add_argument("--rounds", type=int, default=None, metavar="R",
                   help="split each member's budget into R rounds; between rounds the best "
                        "mappings of all members start every member's next search (default 1)")
    g.add_argument("--elites", type=int, default=None, metavar="K",
                   help="with --rounds: mappings handed on between rounds (default 2)")
    g.add_argument("--store", default=None, metavar="PATH",
                   help="commit every member's result to this SQLite results store "
                        "(default ./accelmap-results.sqlite; read it with `accelmap report`)")
    g.add_argument("--no-store", action="store_true", help="do not write a results store")


def wants_portfolio(args: argparse.Namespace) -> bool:
    """True when any portfolio option was given. The options only a portfolio uses
    (``--elites``, ``--store``, ``--no-store``) without one are a usage error."""
    if any(getattr(args, k, None) is not None for k in _PORTFOLIO_OPTIONS):
        return True
    given = [f"--{k.replace('_', '-')}" for k in ("elites", "store", "no_store") if getattr(args, k, None)]
    if given:
        from accelmap.cli import UsageError

        raise UsageError(f"{'/'.join(given)} apply to a portfolio only (--workers/--seeds/--address/--backend/"
                         "--rounds); a single search writes its result.json and no results store")
    return False


def run_portfolio_cli(args: argparse.Namespace) -> int:
    """`accelmap search LAYER --arch A --workers N ...`: a portfolio; prints and saves the best."""
    import json
    import math
    from pathlib import Path

    from accelmap._registry import costmodels
    from accelmap.arch.io import load_arch
    from accelmap.cli import UsageError
    from accelmap.mapper.check import render_loop_nest
    from accelmap.parallel.portfolio import run_portfolio
    from accelmap.search.api import DEFAULT_SEARCHER, load_constraints_any
    from accelmap.search.objectives import parse_objective
    from accelmap.workloads.io import load_problem

    if args.network is not None or args.layer is None:
        raise UsageError("a portfolio (--workers/--seeds/--address/--backend/--rounds) searches one LAYER; "
                         "for a network use `accelmap sweep` (docs/sweeps.md)")
    for opt, value in (("--checkpoint", args.checkpoint), ("--storage", args.storage),
                       ("--warm-start", getattr(args, "warm_start", None))):
        if value is not None:
            raise UsageError(f"{opt} applies to a single search, not to a portfolio")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}; expected an int >= 1")
    if args.seeds is not None and args.seeds < 1:
        raise UsageError(f"--seeds {args.seeds}; expected an int >= 1")
    if args.rounds is not None and args.rounds < 1:
        raise UsageError(f"--rounds {args.rounds}; expected an int >= 1")
    if args.elites is None:
        args.elites = 2
    if args.elites < 1:
        raise UsageError(f"--elites {args.elites}; expected an int >= 1")
    backend = args.backend or "ray"
    if backend == "serial" and args.address is not None:
        raise UsageError("--address needs the Ray backend; drop --backend serial")
    names = [s.strip() for s in (args.searcher or DEFAULT_SEARCHER).split(",") if s.strip()]
    if len(set(names)) != len(names):
        raise UsageError(f"--searcher {args.searcher!r} names a searcher twice")
    if args.searcher_option and len(names) > 1:
        raise UsageError("--searcher-option is ambiguous with several searchers; give one searcher")
    model_cls = costmodels.get(args.model)
    from accelmap.cli._options import model_from_options, model_options

    m_opts = model_options(getattr(args, "model_option", None) or [])
    built = model_from_options(args.model, m_opts)  # a bad option: exit 2 before any worker starts
    if args.padding:
        from accelmap.search.api import refuse_padding

        refuse_padding(model_cls, args.model)
    objective = parse_objective(args.objective)
    problem = load_problem(args.layer)
    arch = load_arch(args.arch, energy=args.energy)
    options: dict[str, dict] = {}
    if args.searcher_option:
        from accelmap.cli._options import searcher_options

        options[names[0]] = searcher_options(args, names[0], problem.name, arch.name)
    # Constraint files are read here: members may run on nodes that do not have them.
    constraints = load_constraints_any(args.constraints, arch, problem) if args.constraints else None
    n_seeds = args.seeds or max(1, math.ceil((args.workers or 1) / len(names)))
    rounds = f", {args.rounds} rounds with migration" if (args.rounds or 1) > 1 else ""
    print(f"portfolio: {problem.describe()} on {arch.name}: {', '.join(names)} x {n_seeds} seed(s) "
          f"({args.model}, objective {objective.name}{rounds}) on {backend}"
          f"{f' with {args.workers} worker(s)' if args.workers and backend == 'ray' else ''}", file=sys.stderr)
    if args.model == "aspect":
        from accelmap.costmodels.aspect import aspect_view

        view = aspect_view(arch)
        print(f"portfolio: the aspect model searches {arch.name}'s own array shape ({view.x} x {view.y}); a single "
              "search (no --workers/--seeds/--rounds) searches the shape as well", file=sys.stderr)
    from contextlib import nullcontext

    from accelmap.parallel.store import DEFAULT_STORE, ResultStore

    if args.no_store and args.store is not None:
        raise UsageError("--store and --no-store contradict each other; give one")
    store_path = None if args.no_store else Path(args.store or DEFAULT_STORE)
    with (ResultStore(store_path) if store_path is not None else nullcontext()) as store:
        res = run_portfolio(
            problem, arch, searchers=names, seeds=n_seeds, seed=args.seed, model=args.model,
            budget=args.budget, objective=objective.name, time_limit_s=args.time, constraints=constraints,
            allow_padding=args.padding, early_stop=args.early_stop, searcher_options=options,
            model_options=m_opts, backend=backend, workers=args.workers, address=args.address,
            rounds=args.rounds or 1, n_elites=args.elites, store=store,
        )
    out_dir = Path(args.out) if args.out else Path("accelmap-out") / problem.name
    if m_opts:  # what the model was built with, beside its name (as a single search records it)
        res.best.config["model_options"] = dict(m_opts)
    path = res.best.save(out_dir / "result.json")
    members = [{"searcher": m.searcher, "seed": m.seed, "status": m.status,
                "best_objective": m.best_objective if math.isfinite(m.best_objective) else None,
                "cycles": m.cycles, "energy_pj": m.energy_pj, "edp": m.edp,
                "n_evaluations": m.n_evaluations, "wall_s": m.wall_s, "cpu_s": m.cpu_s, "worker": m.worker,
                "error": m.error}
               for m in res.members]
    (out_dir / "portfolio.json").write_text(json.dumps(
        {"winner": members[res.members.index(res.best_member)], "members": members,
         "n_evaluations": res.n_evaluations, "wall_s": res.wall_s, "rounds": res.rounds}, indent=2) + "\n")
    if args.json:
        print(res.best.to_json())
        return 0
    print(res.table(), file=sys.stderr)
    metrics = (built if m_opts else model_cls()).evaluate(problem, arch, res.best.best.as_batch())
    print(render_loop_nest(problem, arch, res.best.best))
    print()
    print(metrics.table(0))
    print()
    print(f"best of {len(res.members)} searches ({res.n_evaluations:,} evaluations, {res.wall_s:.1f} s): "
          f"{res.best.summary()}")
    stored = f"; results committed to {store_path}" if store_path is not None else ""
    print(f"wrote {path} and {out_dir / 'portfolio.json'}{stored}")
    return 0
