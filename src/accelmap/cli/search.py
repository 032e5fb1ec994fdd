"""`accelmap search LAYER --arch ARCH`: find the best mapping of a layer (or a network).

Prints the best loop nest, its metrics and the gap to the MapSpace lower bound, and writes
``result.json`` into ``--out`` (default ``./accelmap-out/<layer>``). ``--json`` prints the
result as JSON instead (``best.cycles``, ``best.energy_pj``, ``best.edp``, ``best.mapping``).
``--network NET`` searches every distinct layer of a zoo network and prints a per-layer
table with network totals. Ctrl-C stops the search and keeps the best so far.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from accelmap.search.api import DEFAULT_BUDGET, NETWORK_DEFAULT_BUDGET


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search", help="find the best mapping of a layer (or every layer of a network)",
        description="Search the mapping space of LAYER on ARCH with a cost model and a searcher. "
                    "LAYER is a zoo name (resnet50/conv3_1) or a problem file (accelmap or Timeloop "
                    "YAML); ARCH a preset (eyeriss-like) or an arch file. See docs/search.md.")
    p.add_argument("layer", nargs="?", default=None,
                   help="zoo layer 'network/layer' or a problem file (omit with --network)")
    p.add_argument("--arch", required=True, metavar="ARCH", help="arch preset name or arch file")
    p.add_argument("--network", default=None, metavar="NET",
                   help="search every distinct layer of zoo network NET (e.g. resnet50)")
    p.add_argument("--model", default="loopnest", metavar="M", help="cost model (default: loopnest)")
    p.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an argument of the cost model's constructor (repeatable), e.g. engine=numpy, or on "
                        "the systolic model dram_window=exact (SCALE-Sim's DRAM reads on every mapping), "
                        "search_sample_entries=524288 (rank with what is reported, within 2%%, not the faster "
                        "estimate) or max_sample_entries=0 (report the estimate too); see docs/search.md")
    p.add_argument("--searcher", default=None, metavar="S",
                   help="random, exhaustive, optuna, genetic, anneal (default) or exact (branch and bound "
                        "on the loopnest model: proves the optimum, or with --time reports the certified gap; "
                        "on every CPU, or --searcher-option workers=N processes)")
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help=f"evaluations per layer (default: {DEFAULT_BUDGET}; {NETWORK_DEFAULT_BUDGET} per layer "
                        "with --network; unlimited with --time)")
    p.add_argument("--time", type=float, default=None, metavar="SECONDS",
                   help="wall-clock limit per layer in seconds (with --searcher exact: the warm start and the "
                        "branch and bound together; building the map space before and the root bound after, "
                        "at most 0.3 s, come on top)")
    p.add_argument("--network-time", type=float, default=None, metavar="SECONDS",
                   help="with --network and --searcher exact: one wall-clock limit for the whole network "
                        "instead of --time per layer: 20%% of it in equal warm starts of every distinct layer, "
                        "then one branch and bound per layer, given half an equal part and half its share of "
                        "the network's gap (its repeat x best objective less its bound) of the time left; a "
                        "layer proven early leaves its time to the later ones. Each branch and bound runs on "
                        "every CPU (--searcher-option workers=N); with --workers N (and --address, --backend) "
                        "the layers run instead as tasks on N Ray workers, one process each, the time left "
                        "counted N times")
    p.add_argument("--objective", default="edp", metavar="O",
                   help="edp (default), energy, cycles, energy^A*cycles^B, or energy,cycles (Pareto)")
    p.add_argument("--seed", type=int, default=0, metavar="K", help="random seed (default 0)")
    p.add_argument("--constraints", nargs="+", action="extend", default=None, metavar="FILE",
                   help="constraint files (accelmap or Timeloop format); later ones override earlier")
    p.add_argument("--energy", default=None, metavar="ERT", help="Timeloop energy reference table for ARCH")
    p.add_argument("--padding", action="store_true", help="allow imperfect factorization (padded tiles)")
    p.add_argument("--warm-start", default=None, choices=("dataflows",),
                   help="first search under each dataflow preset (5%% of the budget each) and start "
                        "from the best mappings")
    p.add_argument("--early-stop", type=int, default=None, metavar="N",
                   help="stop after N evaluations without improvement")
    p.add_argument("--searcher-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a searcher option (repeatable), e.g. chains=512 or sampler=nsga2")
    p.add_argument("--storage", default=None, metavar="URL",
                   help="Optuna storage URL (e.g. sqlite:///study.db; optuna searcher only)")
    p.add_argument("--study-name", default=None, metavar="NAME",
                   help="Optuna study name in --storage (default: accelmap-<layer>-<arch>)")
    p.add_argument("--checkpoint", default=None, metavar="FILE",
                   help="write the search state to FILE and resume from it when it exists "
                        "(with --network: a directory, one file per layer)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where result.json goes (default: ./accelmap-out/<layer or network>)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the search's inner loop runs: cpu (default) or cuda (random, anneal and "
                        "exhaustive on loopnest, on an NVIDIA GPU; needs pip install \"accelmap[cuda]\")")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    from accelmap.cli.sweep import add_portfolio_arguments

    add_portfolio_arguments(p)  # --workers/--seeds/--address/--backend/--rounds: a portfolio
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelmap._registry import searchers
    from accelmap.cli import UsageError
    from accelmap.search.api import DEFAULT_SEARCHER
    from accelmap.search.objectives import parse_objective

    if (args.layer is None) == (args.network is None):
        raise UsageError("give exactly one of LAYER or --network NET")
    from accelmap.cli._options import model_from_options, model_options, searcher_options
    from accelmap.cli.sweep import run_portfolio_cli, wants_portfolio

    if args.budget is not None and args.budget < 1:
        raise UsageError(f"--budget {args.budget}; expected an int >= 1")
    if args.time is not None and not args.time > 0:
        raise UsageError(f"--time {args.time}; expected seconds > 0")
    if args.network_time is not None:
        if args.network is None or (args.searcher or "") != "exact":
            raise UsageError("--network-time shares one time among a network's layers: give it with --network "
                             "and --searcher exact")
        if not args.network_time > 0 or args.time is not None or args.budget is not None:
            raise UsageError(f"--network-time {args.network_time}; expected seconds > 0, and no --time or --budget "
                             "with it")
    if args.early_stop is not None and args.early_stop < 1:
        raise UsageError(f"--early-stop {args.early_stop}; expected an int >= 1")
    if args.model_option:
        why = ("--network-time with --workers/--address/--backend (the network's layers run as tasks that "
               "build the model by name)" if args.network_time is not None and wants_portfolio(args)
               else "--device cuda (the GPU kernels take the model by name)"
               if args.device != "cpu" else "the aspect model (its shape search builds one model per shape)"
               if args.model == "aspect" else None)
        if why is not None:
            raise UsageError(f"--model-option is not taken with {why}; drop it, or run one search on the cpu")
    network_tasks = args.network_time is not None and wants_portfolio(args)
    if network_tasks:  # the layers of an exact network search as tasks on workers (accelmap.parallel.network)
        if args.seeds is not None or args.rounds is not None:
            raise UsageError("--seeds and --rounds make a portfolio of one layer; with --network-time, --workers, "
                             "--address and --backend run the network's layers as tasks")
    elif wants_portfolio(args):  # several searches at once on Ray (accelmap.parallel.portfolio)
        return run_portfolio_cli(args)
    searcher = args.searcher or DEFAULT_SEARCHER
    searchers.get(searcher)  # unknown name -> a "did you mean" error (exit 2)
    args.model_options = model_options(args.model_option)
    model = model_from_options(args.model, args.model_options)
    objective = parse_objective(args.objective)
    label = args.network or _layer_label(args.layer)
    opts = searcher_options(args, searcher, label, Path(args.arch).stem)
    progress = not args.no_progress and sys.stderr.isatty()
    common = dict(model=model, searcher=searcher, budget=args.budget, time_limit_s=args.time,
                  objective=objective, seed=args.seed, constraints=args.constraints,
                  early_stop=args.early_stop, progress=progress, searcher_options=opts,
                  allow_padding=args.padding, warm_start=args.warm_start)
    if args.device != "cpu":  # fail early (exit 2) when the device cannot be used
        from accelmap.search.gpu import check_device

        check_device(args.device)
        common["device"] = args.device
    out_dir = Path(args.out) if args.out else Path("accelmap-out") / label
    if network_tasks:
        return _run_network_tasks(args, common, out_dir)
    if args.network:
        return _run_network(args, common, out_dir)
    return _run_layer(args, common, out_dir)


def _layer_label(layer: str) -> str:
    p = Path(layer)
    if p.suffix.lower() in (".yaml", ".yml", ".json") or p.exists():
        return p.stem
    return layer


def _run_layer(args: argparse.Namespace, common: dict[str, Any], out_dir: Path) -> int:
    from accelmap._registry import costmodels
    from accelmap.arch.io import load_arch
    from accelmap.errors import InfeasibleSpaceError
    from accelmap.mapper.check import render_loop_nest
    from accelmap.search.api import search
    from accelmap.workloads.io import load_problem

    problem = load_problem(args.layer)
    arch = load_arch(args.arch, energy=args.energy)
    if not args.json:
        print(f"searching {problem.describe()} on {arch.name} with {common['searcher']} "
              f"({args.model}, objective {common['objective'].name})", file=sys.stderr)
    if args.model == "aspect":  # the PE-array shape is searched too (accelmap.search.shapes)
        from accelmap.search.shapes import search_shapes

        kw = {k: v for k, v in common.items() if k not in ("model", "budget")}
        shaped = search_shapes(problem, arch, budget=common["budget"] or 30_000, **kw)
        print(shaped.table(), file=sys.stderr if args.json else sys.stdout)
        if shaped.best.result is None:
            raise InfeasibleSpaceError(f"no legal mapping found for any array shape of {arch.name}")
        result = shaped.best.result
        from accelmap.costmodels.aspect import arch_with_shape

        arch = arch_with_shape(arch, shaped.best.x, shaped.best.y)
    else:
        result = search(problem, arch, checkpoint=args.checkpoint, **common)
        if args.model_options:  # what the model was built with, beside its name
            result.config["model_options"] = dict(args.model_options)
    path = result.save(out_dir / "result.json")
    if args.json:
        print(result.to_json())
        return 130 if result.stop_reason == "interrupted" else 0
    if result.best is None:
        print(f"interrupted before any legal mapping was found ({result.n_evaluations:,} evaluations)")
        return 130
    model = common["model"] if not isinstance(common["model"], str) else costmodels.get(args.model)()
    metrics = model.evaluate(problem, arch, result.best.as_batch())
    print(render_loop_nest(problem, arch, result.best))
    print()
    print(metrics.table(0))
    if hasattr(model, "search_variants") and hasattr(model, "stats"):  # systolic: the chosen dataflow
        print(model.stats(problem, arch, result.best.as_batch()).summary(0))
    gap = result.gap()
    if result.certificate:
        c = result.certificate
        print()
        if result.proven_optimal:
            print(f"proven optimal: the exact search covered the whole space in {c['elapsed_s']:.1f} s "
                  f"({c['nodes']:,} nodes expanded, {c['cut']:,} branches cut by bound, {c['infeasible']:,} "
                  f"infeasible, {c['leaves']:,} mappings evaluated)")
        else:
            print(f"not proven ({c['stop_reason']}): certified lower bound {c['lower_bound']:.6g}, "
                  f"gap {c['gap']:.2%} ({c['nodes']:,} nodes expanded, {c['cut']:,} cut, "
                  f"{c['leaves']:,} mappings evaluated in {c['elapsed_s']:.1f} s)")
    elif gap:
        lb = result.lower_bound or {}
        print()
        what = "the exact mapper's root bound" if result.bound_kind == "loopnest-root" else "compulsory traffic"
        print(f"gap to the lower bound from {what} (best / bound):")
        for key, unit in (("cycles", "cycles"), ("energy_pj", "pJ"), ("edp", "pJ*cycles")):
            if key in gap:
                print(f"  {key:<10} {gap[key]:8.3f}x   (bound {lb[key]:.4g} {unit})")
    if result.pareto:
        print()
        print(f"Pareto front (energy vs cycles, {len(result.pareto)} points):")
        for pt in result.pareto[:20]:
            print(f"  energy {pt['energy_pj']:>16,.1f} pJ   cycles {pt['cycles']:>14,.0f}   EDP {pt['edp']:.4g}")
        if len(result.pareto) > 20:
            print(f"  ... {len(result.pareto) - 20} more in {path}")
    print()
    print(result.summary())
    print(f"wrote {path}")
    return 130 if result.stop_reason == "interrupted" else 0


def _run_network_tasks(args: argparse.Namespace, common: dict[str, Any], out_dir: Path) -> int:
    """`--network NET --searcher exact --network-time S --workers N [--address A]`: the layers'
    warm starts and exact searches as tasks on N workers (`search_network_exact`)."""
    import json

    from accelmap.arch.io import load_arch
    from accelmap.parallel.network import search_network_exact

    arch = load_arch(args.arch, energy=args.energy)
    kw = {k: v for k, v in common.items() if k not in ("searcher", "budget", "time_limit_s")}

    def on_start(backend: Any) -> None:
        if not args.json:
            print(f"running the layers on {backend.n_workers} {backend.name} worker(s)", file=sys.stderr)

    def on_layer(i: int, n: int, r: Any) -> None:
        if not args.json:
            print(f"[{i + 1}/{n}] {r.summary()}", file=sys.stderr)

    result = search_network_exact(args.network, arch, network_time_s=args.network_time,
                                  backend=args.backend or "ray", address=args.address, workers=args.workers,
                                  on_layer=on_layer, on_start=on_start, **kw)
    path = result.save(out_dir / "result.json")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(f"{result.network} on {result.arch}: {len(result.layers)} of {result.n_distinct} distinct layers "
              f"searched, {sum(result.repeats)} layers in all")
        print(result.table())
        print(f"wrote {path}")
    return 0 if result.complete else 130


def _run_network(args: argparse.Namespace, common: dict[str, Any], out_dir: Path) -> int:
    from accelmap.arch.io import load_arch
    from accelmap.search.api import search_network

    arch = load_arch(args.arch, energy=args.energy)
    if args.model == "aspect":  # best PE-array shape per layer (accelmap.search.shapes)
        from accelmap.search.shapes import search_shapes_network

        kw = {k: v for k, v in common.items() if k not in ("model", "budget")}
        rows = search_shapes_network(args.network, arch, budget=common["budget"] or 30_000, **kw)
        table: list[dict[str, Any]] = [{"layer": name, "repeat": rep, "shape": [r.best.x, r.best.y], "objective": r.best.objective,
                  "cycles": (r.best.result.best_metrics["cycles"] if r.best.result and r.best.result.best_metrics else None)}
                 for name, rep, r in rows]
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "shapes.json").write_text(json.dumps(table, indent=1) + "\n")
        if args.json:
            print(json.dumps(table, indent=1))
        else:
            for t in table:
                print(f"{t['layer']:<28} x{t['repeat']:<3} best shape {t['shape'][0]:>5} x {t['shape'][1]:<5} "
                      f"objective {t['objective']:.4g}")
            print(f"wrote {out_dir / 'shapes.json'}")
        return 0

    def on_layer(i: int, n: int, r: Any) -> None:
        if not args.json:
            print(f"[{i + 1}/{n}] {r.summary()}", file=sys.stderr)

    result = search_network(args.network, arch, on_layer=on_layer, checkpoint_dir=args.checkpoint,
                            network_time_s=args.network_time, **common)
    path = result.save(out_dir / "result.json")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"{result.network} on {result.arch}: {len(result.layers)} distinct layers, "
          f"{sum(result.repeats)} layers in all")
    print(result.table())
    print(f"wrote {path}")
    return 0
