"""Search quality against budget and time: every searcher on six layers and two archs.

For each (arch, layer), each searcher runs at budgets of 600, 10k and 100k evaluations
(``--budgets``); its best EDP is divided by the optimum: the exhaustive optimum where the
space is small enough to enumerate, else the best EDP any run found (including a long
reference run of the default searcher, ``--ref-budget``). The history of the largest
budget gives best-so-far against wall and CPU seconds. ``--network`` also times a whole
network search with the default settings.

Writes ``benchmarks/results/bench_search.json`` and ``benchmarks/results/bench_search.png``.

    python benchmarks/bench_search.py                      # the full benchmark (~30 min)
    python benchmarks/bench_search.py --quick              # 2 layers, 1 arch, small budgets
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from accelmap.arch.io import load_arch
from accelmap.errors import SpaceTooLargeError
from accelmap.search.api import DEFAULT_SEARCHER, build_space, search, search_network
from accelmap.search.result import versions
from accelmap.workloads.io import load_problem

LAYERS = {
    "resnet50/res4b_branch2a": "ResNet-50 1x1",
    "resnet50/res3b_branch2b": "ResNet-50 3x3",
    "resnet50/conv1": "ResNet-50 7x7 stride 2",
    "mobilenet_v2/block2_2_dw": "MobileNet-V2 depthwise 3x3",
    "bert_base_128/qkv_proj": "BERT-base GEMM 128x768x768",
    "bert_base_128/ffn_up": "BERT-base GEMM 128x3072x768",
}
ARCHS = ("eyeriss-like", "simba-like")
SEARCHERS = ("anneal", "genetic", "optuna", "random")
BUDGETS = (600, 10_000, 100_000)
EXHAUSTIVE_LIMIT = 2_000_000
# Layers searched under the Eyeriss-like constraints Timeloop's mapper used (shared/reference),
# small enough for an exhaustive optimum.
CONSTRAINED_LAYERS = ("resnet50/conv1", "resnet50/res2a_branch2a", "resnet50/res2a_branch2b",
                      "resnet50/res3a_branch2b")
REFERENCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "timeloop" / "constraints"

OUT = Path(__file__).resolve().parent / "results"


WARM_START: str | None = None  # set by --warm-start
ANNEAL_OPTIONS: dict[str, Any] = {}  # set by --anneal-option


def _run(problem: Any, arch: Any, space: Any, searcher: str, budget: int, seed: int) -> dict[str, Any]:
    c0, t0 = time.process_time(), time.perf_counter()
    opts = ANNEAL_OPTIONS if searcher == "anneal" and ANNEAL_OPTIONS else None
    r = search(problem, arch, searcher=searcher, budget=budget, seed=seed, space=space, warm_start=WARM_START,
               searcher_options=opts)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    # the driver's history is in wall seconds; scale it to CPU seconds of this process
    scale = cpu / wall if wall > 0 else 1.0
    return {
        "searcher": searcher, "budget": budget, "seed": seed, "edp": r.edp, "cycles": r.cycles,
        "energy_pj": r.energy_pj, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
        "n_evaluations": r.n_evaluations, "n_valid": r.n_valid,
        "history": {"evaluations": list(r.history.evaluations), "wall_s": list(r.history.seconds),
                    "cpu_s": [round(s * scale, 4) for s in r.history.seconds], "edp": list(r.history.best)},
    }


def _exhaustive(problem: Any, arch: Any, space: Any) -> float | None:
    try:
        n = space.n_distinct(max_points=EXHAUSTIVE_LIMIT)
    except SpaceTooLargeError:
        return None
    if n > EXHAUSTIVE_LIMIT:
        return None
    return search(problem, arch, searcher="exhaustive", space=space,
                  searcher_options={"max_size": EXHAUSTIVE_LIMIT}).edp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", nargs="+", default=list(LAYERS))
    ap.add_argument("--archs", nargs="+", default=list(ARCHS))
    ap.add_argument("--searchers", nargs="+", default=list(SEARCHERS))
    ap.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    ap.add_argument("--seeds", type=int, default=1, help="seeds per (searcher, budget)")
    ap.add_argument("--ref-budget", type=int, default=300_000,
                    help="budget of the long reference run of the default searcher (0 = none)")
    ap.add_argument("--network", default="resnet50", help="network to time end to end ('' = none)")
    ap.add_argument("--quick", action="store_true", help="2 layers, 1 arch, budgets 600 and 10k, no network")
    ap.add_argument("--optimum-from", default=None, metavar="JSON",
                    help="an earlier bench_search JSON (or bench_search_best_known.json) whose optima "
                         "(best EDP per arch and layer) count too, e.g. to score a new default "
                         "against the full benchmark")
    ap.add_argument("--warm-start", default=None, choices=("dataflows",),
                    help="warm start of every search (search(warm_start=...))")
    ap.add_argument("--anneal-option", action="append", default=[], metavar="KEY=VALUE",
                    help="an option of every anneal search (repeatable; VALUE as JSON), e.g. sweep=0 for "
                         "plain runs only")
    ap.add_argument("--constrained", action="store_true",
                    help="only the Timeloop-constrained Eyeriss cases (exhaustive optimum; writes "
                         "bench_search_constrained.json)")
    ap.add_argument("--best-known", nargs="+", default=None, metavar="JSON",
                    help="no search: merge these bench_search JSONs into the best EDP known per "
                         "(arch, layer), write bench_search_best_known.json and print every "
                         "file's runs as ratios to it")
    ap.add_argument("--network-only", action="store_true",
                    help="no per-layer cases: only time the --network search with the defaults")
    ap.add_argument("--portfolio", type=int, default=None, metavar="N",
                    help="the README's search instead: the default searcher at its default budget "
                         "on N local Ray workers (a portfolio of N seeds), --seeds portfolio seeds "
                         "per case, scored against --optimum-from (a bench_search_best_known.json "
                         "or a bench_search JSON); writes bench_search_portfolio.json")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.portfolio is not None:
        if args.anneal_option or args.warm_start:
            ap.error("--portfolio runs the README's search with the defaults; it takes no --anneal-option "
                     "or --warm-start")
        return portfolio(args)
    args.out = args.out or str(OUT / "bench_search.json")
    if args.network_only:
        args.layers, args.ref_budget = [], 0
    global WARM_START
    WARM_START = args.warm_start
    for item in args.anneal_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--anneal-option {item!r}: expected KEY=VALUE, e.g. sweep=0")
        try:
            ANNEAL_OPTIONS[key] = json.loads(value)
        except json.JSONDecodeError:
            ANNEAL_OPTIONS[key] = value
    if args.quick:
        args.layers, args.archs, args.budgets = args.layers[:2], args.archs[:1], [600, 10_000]
        args.ref_budget, args.network = 30_000, ""

    if args.constrained:
        return constrained(args)
    if args.best_known:
        return best_known(args.best_known, Path(args.out).with_name("bench_search_best_known.json"))
    known = _known_optima(args.optimum_from)
    cases = []
    for arch_name in args.archs:
        arch = load_arch(arch_name)
        for layer in args.layers:
            problem = load_problem(layer)
            space = build_space(problem, arch)
            runs = []
            for searcher in args.searchers:
                for budget in args.budgets:
                    for seed in range(args.seeds):
                        run = _run(problem, arch, space, searcher, budget, seed)
                        runs.append(run)
                        print(f"{arch_name:13s} {layer:26s} {searcher:8s} {budget:>7,} seed {seed}: "
                              f"EDP {run['edp']:.4g}  {run['cpu_s']:.1f} s CPU", flush=True)
            ref_run = None
            if args.ref_budget:
                ref_run = _run(problem, arch, space, DEFAULT_SEARCHER, args.ref_budget, 1000)
                print(f"{arch_name:13s} {layer:26s} reference {DEFAULT_SEARCHER} {args.ref_budget:,}: "
                      f"EDP {ref_run['edp']:.4g}", flush=True)
            exact = _exhaustive(problem, arch, space)
            best_seen = min([r["edp"] for r in runs] + ([ref_run["edp"]] if ref_run else [])
                            + ([known[(arch_name, layer)]] if (arch_name, layer) in known else []))
            optimum = exact if exact is not None else best_seen
            for r in runs:
                r["ratio"] = r["edp"] / optimum
            cases.append({
                "arch": arch_name, "layer": layer, "label": LAYERS.get(layer, layer),
                "problem": problem.describe(), "space_size": str(space.size().total),
                "optimum_edp": optimum, "optimum_source": "exhaustive" if exact is not None else "best of all runs",
                "reference_run": ref_run, "runs": runs,
            })

    network = None
    if args.network:
        for arch_name in args.archs:
            c0, t0 = time.process_time(), time.perf_counter()
            res = search_network(args.network, arch_name)
            network = network or []
            network.append({"network": args.network, "arch": arch_name, "searcher": DEFAULT_SEARCHER,
                            "distinct_layers": len(res.layers), "layers": sum(res.repeats),
                            "budget_per_layer": res.layers[0].n_evaluations,
                            "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2),
                            "edp": res.edp, "cycles": res.cycles, "energy_pj": res.energy_pj})
            print(f"network {args.network} on {arch_name}: {network[-1]['wall_s']} s wall, "
                  f"{network[-1]['cpu_s']} s CPU", flush=True)

    summary = _summary(cases, args.searchers, args.budgets)
    data = {
        "benchmark": "bench_search", "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_at_end": os.getloadavg()},
        "versions": versions(), "default_searcher": DEFAULT_SEARCHER,
        "budgets": args.budgets, "seeds": args.seeds, "warm_start": args.warm_start, "anneal_options": ANNEAL_OPTIONS,
        "cases": cases, "summary": summary, "network": network,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}")
    for line in _table(summary, args.budgets):
        print(line)
    if not cases:  # --network-only: nothing to plot
        return
    try:
        png = out.with_suffix(".png")
        plot(data, png)
        print(f"wrote {png}")
    except ImportError:
        print("matplotlib is not installed; no plot")


def _known_optima(path: str | None) -> dict[tuple[str, str], float]:
    """Best EDP per (arch, layer) from a bench_search_best_known.json or a bench_search JSON."""
    if not path:
        return {}
    data = json.loads(Path(path).read_text())
    if "cases" in data:
        return {(c["arch"], c["layer"]): c["optimum_edp"] for c in data["cases"]}
    return {tuple(key.split("|", 1)): float(v) for key, v in data.items()}  # type: ignore[misc]


def portfolio(args: argparse.Namespace) -> None:
    """The README's search (``accelmap search LAYER --arch A --workers N``) on every case.

    One local Ray of N workers is started once (``ray_init_s``; a single CLI search pays it
    too, as well as the shutdown). Each portfolio runs N members of the default searcher at
    the default budget with seeds spawned from the portfolio seed, as the CLI does. Per run:
    the portfolio's wall seconds (submission to merged result) and each member's CPU seconds.
    """
    from accelmap.parallel.backend import RayBackend
    from accelmap.parallel.portfolio import run_portfolio
    from accelmap.search.api import DEFAULT_BUDGET

    n = args.portfolio
    known = _known_optima(args.optimum_from)
    out = Path(args.out or OUT / "bench_search_portfolio.json")
    t0 = time.perf_counter()
    backend = RayBackend(workers=n)
    ray_init_s = time.perf_counter() - t0
    cases = []
    try:
        for arch_name in args.archs:
            arch = load_arch(arch_name)
            for layer in args.layers:
                problem = load_problem(layer)
                runs = []
                for seed in range(args.seeds):
                    load0 = os.getloadavg()[0]
                    res = run_portfolio(problem, arch, searchers=(DEFAULT_SEARCHER,), seeds=n, seed=seed,
                                        backend=backend)
                    members = res.members
                    runs.append({
                        "searcher": f"{DEFAULT_SEARCHER} portfolio x{n}", "budget": DEFAULT_BUDGET, "seed": seed,
                        "edp": res.best.edp, "cycles": res.best.cycles, "energy_pj": res.best.energy_pj,
                        "wall_s": round(res.wall_s, 3),
                        "cpu_s": round(max(m.cpu_s or 0.0 for m in members), 3),
                        "member_cpu_s": [round(m.cpu_s or 0.0, 3) for m in members],
                        "member_wall_s": [round(m.wall_s or 0.0, 3) for m in members],
                        "member_edp": [m.edp for m in members], "member_seeds": [m.seed for m in members],
                        "n_evaluations": res.n_evaluations, "loadavg_before": round(load0, 2),
                    })
                    print(f"{arch_name:13s} {layer:26s} portfolio seed {seed}: EDP {res.best.edp:.4g}  "
                          f"{res.wall_s:.1f} s wall, members {', '.join(f'{c:.1f}' for c in runs[-1]['member_cpu_s'])}"
                          f" s CPU (load {load0:.1f})", flush=True)
                optimum = min([r["edp"] for r in runs] + ([known[(arch_name, layer)]] if (arch_name, layer) in known
                                                          else []))
                for r in runs:
                    r["ratio"] = r["edp"] / optimum
                cases.append({"arch": arch_name, "layer": layer, "label": LAYERS.get(layer, layer),
                              "optimum_edp": optimum, "optimum_source": "best known (--optimum-from) and these runs",
                              "reference_run": None, "runs": runs})
    finally:
        t1 = time.perf_counter()
        backend.close()
        ray_shutdown_s = time.perf_counter() - t1
    ratios = [r["ratio"] for c in cases for r in c["runs"]]
    walls = [r["wall_s"] for c in cases for r in c["runs"]]
    summary = {
        "runs": len(ratios), "within_1pct": sum(x <= 1.01 for x in ratios),
        "geo_mean_ratio": math.exp(float(np.mean(np.log(ratios)))) if ratios else None,
        "worst_ratio": max(ratios, default=None), "wall_s_max": max(walls, default=None),
        "wall_s_mean": float(np.mean(walls)) if walls else None,
        "ray_init_s": round(ray_init_s, 2), "ray_shutdown_s": round(ray_shutdown_s, 2),
    }
    data = {
        "benchmark": "bench_search --portfolio", "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
        "versions": versions(), "default_searcher": DEFAULT_SEARCHER, "workers": n,
        "budget_per_member": DEFAULT_BUDGET, "seeds": args.seeds, "optimum_from": args.optimum_from,
        "cases": cases, "summary": summary,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}")
    print(json.dumps(summary, indent=1))


def constrained(args: argparse.Namespace) -> None:
    """Every searcher against the exact optimum of the Timeloop-constrained Eyeriss spaces."""
    from accelmap.arch.presets import preset
    from accelmap.mapper.timeloop_constraints import EYERISS_PRESET_LEVEL_MAP, load_timeloop_constraints

    if not REFERENCE.exists():
        print(f"{REFERENCE} not found; nothing to do")
        return
    arch = preset("eyeriss-like")
    cases = []
    for layer in CONSTRAINED_LAYERS:
        problem = load_problem(layer)
        cons = load_timeloop_constraints([REFERENCE / "eyeriss_like" / "arch_constraints.yaml",
                                          REFERENCE / "eyeriss_like" / "map_constraints.yaml"],
                                         problem=problem, arch=arch, level_map=EYERISS_PRESET_LEVEL_MAP)
        space = build_space(problem, arch, cons)
        c0 = time.process_time()
        exact = search(problem, arch, searcher="exhaustive", space=space,
                       searcher_options={"max_size": EXHAUSTIVE_LIMIT})
        ex_cpu = time.process_time() - c0
        runs = []
        for searcher in args.searchers:
            for budget in (600, 2_000, 10_000):
                for seed in range(max(args.seeds, 3)):
                    run = _run(problem, arch, space, searcher, budget, seed)
                    run["ratio"] = run["edp"] / exact.edp
                    run.pop("history")
                    runs.append(run)
        cases.append({"arch": arch.name, "layer": layer, "problem": problem.describe(),
                      "space_points": exact.n_evaluations, "optimum_edp": exact.edp,
                      "exhaustive_cpu_s": round(ex_cpu, 2), "runs": runs})
        print(f"{layer}: {exact.n_evaluations:,} points, optimum EDP {exact.edp:.5g} ({ex_cpu:.1f} s CPU)", flush=True)
        for searcher in args.searchers:
            cells = []
            for budget in (600, 2_000, 10_000):
                rs = [r["ratio"] for r in runs if r["searcher"] == searcher and r["budget"] == budget]
                cells.append(f"{budget:>6,}: {sum(x <= 1.0 + 1e-9 for x in rs)}/{len(rs)} exact, worst {max(rs):.3f}")
            print(f"  {searcher:8s} " + "   ".join(cells), flush=True)
    out = Path(args.out).with_name("bench_search_constrained.json")
    out.write_text(json.dumps({"benchmark": "bench_search --constrained", "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                               "versions": versions(), "cases": cases}, indent=1) + "\n")
    print(f"wrote {out}")


def best_known(files: list[str], out: Path) -> None:
    """The best EDP of any run in ``files`` per (arch, layer), and every run against it."""
    data = {f: json.loads(Path(f).read_text()) for f in files}
    best: dict[str, float] = {}
    for d in data.values():
        for c in d["cases"]:
            vals = [r["edp"] for r in c["runs"]] + ([c["reference_run"]["edp"]] if c.get("reference_run") else [])
            key = f"{c['arch']}|{c['layer']}"
            best[key] = min([best.get(key, math.inf)] + vals)
    out.write_text(json.dumps(best, indent=1) + "\n")
    print(f"wrote {out}")
    for f, d in data.items():
        print(f)
        ratios = []
        for c in d["cases"]:
            key = f"{c['arch']}|{c['layer']}"
            for r in c["runs"]:
                ratio = r["edp"] / best[key]
                ratios.append(ratio)
                print(f"  {c['arch']:13s} {c['layer']:26s} {r['searcher']:8s} {r['budget']:>8,} seed {r['seed']}: "
                      f"{ratio:.3f}  {r['cpu_s']:.1f} s CPU")
        print(f"  within 1%: {sum(x <= 1.01 for x in ratios)}/{len(ratios)}, geo-mean "
              f"{math.exp(np.mean(np.log(ratios))):.4f}, worst {max(ratios):.3f}")


def _summary(cases: list[dict[str, Any]], searchers: list[str], budgets: list[int]) -> dict[str, Any]:
    """Geometric-mean and worst ratio to the optimum per (arch, searcher, budget)."""
    out: dict[str, Any] = {}
    for arch in sorted({c["arch"] for c in cases}):
        for s in searchers:
            for b in budgets:
                ratios = [r["ratio"] for c in cases if c["arch"] == arch for r in c["runs"]
                          if r["searcher"] == s and r["budget"] == b]
                cpu = [r["cpu_s"] for c in cases if c["arch"] == arch for r in c["runs"]
                       if r["searcher"] == s and r["budget"] == b]
                if ratios:
                    out[f"{arch}|{s}|{b}"] = {
                        "geomean_ratio": float(np.exp(np.mean(np.log(ratios)))), "worst_ratio": max(ratios),
                        "within_1pct": sum(x <= 1.01 for x in ratios), "n": len(ratios),
                        "mean_cpu_s": float(np.mean(cpu)),
                    }
    return out


def _table(summary: dict[str, Any], budgets: list[int]) -> list[str]:
    lines = [f"{'arch':<14}{'searcher':<10}" + "".join(f"{f'{b:,}':>26}" for b in budgets)]
    keys = sorted({tuple(k.split('|')[:2]) for k in summary})
    for arch, s in keys:
        cells = []
        for b in budgets:
            v = summary.get(f"{arch}|{s}|{b}")
            cells.append(f"{v['geomean_ratio']:.3f} (max {v['worst_ratio']:.2f}, {v['mean_cpu_s']:.1f}s)" if v else "-")
        lines.append(f"{arch:<14}{s:<10}" + "".join(f"{c:>26}" for c in cells))
    return lines


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    archs = sorted({c["arch"] for c in data["cases"]})
    searchers = sorted({r["searcher"] for c in data["cases"] for r in c["runs"]})
    budgets = data["budgets"]
    fig, axes = plt.subplots(2, len(archs), figsize=(6 * len(archs), 8.5), squeeze=False)
    colors = dict(zip(searchers, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    for j, arch in enumerate(archs):
        cs = [c for c in data["cases"] if c["arch"] == arch]
        ax = axes[0][j]
        for s in searchers:
            for c in cs:
                ys = [min((r["ratio"] for r in c["runs"] if r["searcher"] == s and r["budget"] == b), default=math.nan)
                      for b in budgets]
                ax.plot(budgets, ys, color=colors[s], alpha=0.25, lw=0.8)
            gm = [data["summary"].get(f"{arch}|{s}|{b}", {}).get("geomean_ratio", math.nan) for b in budgets]
            ax.plot(budgets, gm, "o-", color=colors[s], lw=2, label=s)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.01, color="k", ls=":", lw=1)
        ax.set_xlabel("evaluations (budget)")
        ax.set_ylabel("best EDP / optimum")
        ax.set_title(f"{arch}: quality vs budget (thick: geo-mean of {len(cs)} layers)")
        ax.legend()
        ax = axes[1][j]
        grid = np.logspace(-1.5, 1.5, 60)
        bmax = max(budgets)
        for s in searchers:
            curves = []
            for c in cs:
                run = next((r for r in c["runs"] if r["searcher"] == s and r["budget"] == bmax), None)
                if run is None:
                    continue
                t = np.array(run["history"]["cpu_s"])
                e = np.array(run["history"]["edp"]) / c["optimum_edp"]
                idx = np.searchsorted(t, grid, side="right") - 1
                curves.append(np.where(idx >= 0, e[np.maximum(idx, 0)], np.nan))
            if curves:
                with np.errstate(invalid="ignore"):
                    gm = np.exp(np.nanmean(np.log(np.array(curves)), axis=0))
                ax.plot(grid, gm, color=colors[s], lw=2, label=s)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.01, color="k", ls=":", lw=1)
        ax.axvline(10.0, color="grey", ls="--", lw=1)
        ax.set_xlabel("CPU seconds (one process)")
        ax.set_ylabel("best-so-far EDP / optimum (geo-mean)")
        ax.set_title(f"{arch}: quality vs time, budget {bmax:,}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
