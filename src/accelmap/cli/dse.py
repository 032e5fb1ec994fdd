"""`accelmap dse FILE`: search the hardware design space of a design-space file.

Every trial is committed as it finishes (Optuna study in ``OUT/study.sqlite``, mapping
searches in the results store), so Ctrl-C loses nothing and running the same command again
resumes. Exit 0 when the study has its trials, 130 when interrupted, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dse", help="hardware design-space search: the accelerator for a set of workloads",
        description="Propose architectures from a base arch's parameters (Optuna: TPE, NSGA-II, "
                    "random or grid; TPE by default), give each a whole-workload mapping search (Ray tasks, results "
                    "store), and report the area/objective Pareto front with each front design as an "
                    "arch file. Re-run the command to resume. See docs/dse.md.")
    p.add_argument("file", help="design-space file (YAML, version: 1)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output directory (default ./dse-<name>): study, store, front, plot, arch files")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="Ray workers and candidates per round (default: every CPU)")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="Ray cluster to join ('auto' or ray://HOST:10001); default: a local Ray")
    p.add_argument("--backend", choices=("ray", "serial"), default="ray", help="where mapping searches run")
    p.add_argument("--seed", type=int, default=None, help="override the file's seed")
    p.add_argument("--trials", type=int, default=None, help="override the file's trial count")
    p.add_argument("--store", default=None, metavar="PATH", help="results store (default OUT/results.sqlite)")
    p.add_argument("--json", action="store_true", help="print the front as JSON on stdout")
    p.add_argument("--no-plot", action="store_true", help="do not draw front.png")
    p.add_argument("--no-progress", action="store_true", help="no per-trial lines on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelmap.cli import UsageError
    from accelmap.parallel.dse import TrialRecord, dse, load_dse
    from accelmap.parallel.dse_outputs import front_table

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}; expected an int >= 1")
    if args.trials is not None and args.trials < 1:
        raise UsageError(f"--trials {args.trials}; expected an int >= 1")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed {args.seed}; expected an int >= 0")
    if args.backend == "serial" and (args.address or args.workers not in (None, 1)):
        raise UsageError("--address and --workers need the Ray backend; drop --backend serial")
    spec = load_dse(args.file)
    quiet = args.no_progress

    def on_trial(rec: TrialRecord) -> None:
        if quiet:
            return
        c = rec.candidate
        vals = "  ".join(f"{o}={v:.4g}" for o, v in zip(spec.objectives, rec.values, strict=True))
        gap = "" if c.certified_gap is None else f"  gap {c.certified_gap:.1%}"
        flag = "" if rec.feasible else f"  [{c.status if c.status != 'ok' else 'over a budget'}]"
        print(f"trial {rec.number:>4}: {vals}{gap}{flag}", file=sys.stderr)

    print(f"dse {spec.name}: {len(spec.parameters)} parameter(s), {len(spec.workloads)} layer(s), "
          f"{spec.trials if args.trials is None else args.trials} trial(s), outer {spec.searcher}, mapping "
          f"{spec.mapping_searcher}", file=sys.stderr)
    result, data = dse(spec, out=args.out, workers=args.workers, address=args.address, backend=args.backend,
                       seed=args.seed, trials=args.trials, store=args.store, plot=not args.no_plot,
                       on_trial=on_trial)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(f"front of {len(data['front'])} design(s) over {data['trials']} trial(s) "
              f"({data['distinct_candidates']} distinct, {data['searched_candidates']} searched), "
              f"{data['wall_s']:.1f} s")
        print(front_table(data["front"], list(spec.objectives), data["base"]))
        for i, row in enumerate(data["front"]):
            print(f"  [{i}] {row['arch_file']}")
    out_dir = data["front"][0]["arch_file"].rsplit("/archs/", 1)[0] if data["front"] else args.out
    print(f"study: {data['study_storage']} (optuna-dashboard sqlite:///{data['study_storage']}); "
          f"outputs in {out_dir}", file=sys.stderr)
    if result.interrupted:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    return 0
