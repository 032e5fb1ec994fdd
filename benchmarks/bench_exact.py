"""The exact searcher: time to proof, or the certified gap at a time limit, beside the default
search's EDP and its ratio to the exact result.

Groups of cases (``--groups``):

* ``search``: the 12 cases of ``bench_search.py`` (6 layers x eyeriss-like, simba-like),
  unconstrained spaces;
* ``timeloop``: every ``mapper_edp_best`` case of ``../shared/reference/timeloop`` on its own
  architecture, under the constraint files Timeloop's mapper searched under (as
  ``bench_vs_timeloop.py``);
* ``resnet50``: every distinct ResNet-50 layer on eyeriss-like (one ``search_network``).

Usage::

    python benchmarks/bench_exact.py [--time 60] [--groups search timeloop resnet50]
        [--default-budget N] [--seed 0] [--cases SUBSTRING ...] [--out FILE] [--reference DIR]
        [--network-time SECONDS] [--workers W [W ...]] [--ray-workers N] [--dive-share S]

Writes ``benchmarks/results/bench_exact.json`` (one row per case: proven, seconds, certified
lower bound and gap of the EDP, the exact search's EDP, the default search's EDP and the
ratios). With ``--workers 1 2`` every case's exact search runs once per worker count, one
after the other in one process (rows carry ``workers``; the default search runs once), so
their ratio is measured under the same load. Benchmarks are run by hand; nothing here is
asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_vs_timeloop as tl  # noqa: E402
from bench_search import ARCHS as SEARCH_ARCHS  # noqa: E402
from bench_search import LAYERS as SEARCH_LAYERS  # noqa: E402
from bench_vs_timeloop import ARCHS as TL_ARCHS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_exact.json"


def _cpu() -> float:
    """CPU seconds of this process and of its children waited for (the exact search's forked
    workers; not a Ray's workers)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _rows(label: str, problem: Any, arch: Any, constraints: Any, time_s: float, default_budget: int | None,
          seed: int, workers: list[int | None], dive_share: float | None = None) -> list[dict[str, Any]]:
    """One row per worker count of the exact search (None: its default), beside one default
    search."""
    from accelmap.search.api import search

    t0 = time.perf_counter()
    d = search(problem, arch, constraints=constraints, budget=default_budget, seed=seed)
    t_default = time.perf_counter() - t0
    return [_row(label, problem, arch, constraints, time_s, seed, w, d, t_default, dive_share) for w in workers]


def _row(label: str, problem: Any, arch: Any, constraints: Any, time_s: float, seed: int, workers: int | None,
         d: Any, t_default: float, dive_share: float | None = None) -> dict[str, Any]:
    from accelmap.search.api import search

    c0 = _cpu()
    t0 = time.perf_counter()
    opts: dict[str, Any] = {} if workers is None else {"workers": workers}
    if dive_share is not None:
        opts["dive_share"] = dive_share
    r = search(problem, arch, constraints=constraints, searcher="exact", time_limit_s=time_s, seed=seed,
               searcher_options=opts)
    wall = time.perf_counter() - t0
    cpu_s = _cpu() - c0
    c = r.certificate or {}
    lb = float(c.get("lower_bound", 0.0))
    row = {
        "case": label, "workers": (r.config.get("searcher_options") or {}).get("workers"),
        "proven": r.proven_optimal, "seconds": round(wall, 2), "cpu_s": round(cpu_s, 2),
        "worker_cpu_s": c.get("worker_cpu_s"), "stop": c.get("stop_reason"),
        "exact_edp": r.edp, "certified_lower_bound": lb, "certified_gap": c.get("gap"),
        "root_lower_bound": c.get("root_lower_bound"), "nodes": c.get("nodes"), "cut": c.get("cut"),
        "infeasible": c.get("infeasible"), "leaves": c.get("leaves"),
        "default_edp": d.edp, "default_seconds": round(t_default, 2),
        "default_over_exact": d.edp / r.edp if r.edp else None,
        "default_over_bound": d.edp / lb if lb > 0 else None,
        "default_bound_kind": d.bound_kind,
    }
    gap = c.get("gap")
    print(f"{label:<58} W={row['workers']} {'PROVEN' if r.proven_optimal else 'open  '} {wall:7.1f} s  cpu {cpu_s:6.1f} s  "
          f"gap {('-' if gap is None else f'{gap:8.2%}')}  default/exact {row['default_over_exact']:.4f}",
          flush=True)
    return row


def _network_rows(rows: list[dict[str, Any]], total_s: float, seed: int, only: list[str] | None,
                  workers: int | None = None, ray_workers: int | None = None,
                  dive_share: float | None = None) -> None:
    """Every distinct ResNet-50 layer on eyeriss-like in one exact network search sharing
    ``total_s`` seconds (``search_network(..., network_time_s=...)``); one row per layer
    (its runs listed) and a last row for the network (no default search beside them)."""
    from accelmap.arch.io import load_arch
    from accelmap.search.api import search_network
    from accelmap.workloads.zoo import network

    layers = [p for p in network("resnet50").layers if not only or any(s in p.name for s in only)]
    c0 = _cpu()
    t0 = time.perf_counter()
    opts: dict[str, Any] = {} if workers is None else {"workers": workers}
    if dive_share is not None:
        opts["dive_share"] = dive_share
    if ray_workers is None:  # the layers one after the other, each proof on `workers` processes
        net = search_network(layers, load_arch("eyeriss-like"), searcher="exact", network_time_s=total_s, seed=seed,
                             searcher_options=opts)
    else:  # the layers as tasks on a local Ray of `ray_workers` CPUs
        from accelmap.parallel.network import search_network_exact

        net = search_network_exact(layers, load_arch("eyeriss-like"), network_time_s=total_s, seed=seed,
                                   backend="ray", workers=ray_workers, searcher_options=opts)
    wall = time.perf_counter() - t0
    for r, k in zip(net.layers, net.repeats, strict=True):
        c = r.certificate or {}
        runs = c.get("runs", [])
        rows.append({"case": f"resnet50/{r.problem} @ eyeriss-like", "group": "resnet50-network",
                     "proven": r.proven_optimal, "seconds": round(sum(x["wall_s"] for x in runs), 2),
                     "repeat": k, "exact_edp": r.edp, "certified_lower_bound": r.objective_lower_bound(),
                     "certified_gap": r.certified_gap(), "runs": runs})
        print(f"{rows[-1]['case']:<58} {'PROVEN' if r.proven_optimal else 'open  '} {rows[-1]['seconds']:7.1f} s  "
              f"gap {r.certified_gap():8.2%}  runs {len(runs)}", flush=True)
    rows.append({"case": "resnet50 network @ eyeriss-like", "group": "resnet50-network",
                 "proven": net.n_proven == len(net.layers), "seconds": round(wall, 2), "network_time_s": total_s,
                 "cpu_s_here": round(_cpu() - c0, 2),
                 "workers": (net.config.get("searcher_options") or {}).get("workers", workers),
                 "ray_workers": ray_workers,
                 "proven_layers": net.n_proven, "layers": len(net.layers),
                 "certified_gap": net.certified_gap()})
    print(f"network: {net.n_proven} of {len(net.layers)} proven in {wall:.1f} s (budget {total_s} s); "
          f"certified gap {net.certified_gap():.2%}", flush=True)


def run(groups: list[str], time_s: float, default_budget: int | None, seed: int,
        out_path: Path | None = None, only: list[str] | None = None,
        network_time_s: float | None = None, workers: list[int | None] | None = None,
        ray_workers: int | None = None, dive_share: float | None = None) -> dict[str, Any]:
    """Run the groups (only the cases whose label contains one of ``only``, if given); with
    ``out_path``, the JSON is rewritten after every case, so a stopped run keeps the rows it
    finished. With ``network_time_s`` the ``resnet50`` group is one exact network search
    sharing that many seconds among its layers (`_network_rows`)."""
    import os

    from accelmap.arch.io import load_arch
    from accelmap.workloads.io import load_problem
    from accelmap.workloads.zoo import network

    def _doc(rows: list[dict[str, Any]]) -> dict[str, Any]:
        proven = sum(1 for r in rows if r["proven"])
        return {"platform": platform.platform(), "python": platform.python_version(), "time_limit_s": time_s,
                "network_time_s": network_time_s,
                "default_budget": default_budget, "seed": seed, "groups": groups, "workers": workers,
                "dive_share": dive_share,
                "load_average_at_start": load_at_start,
                "summary": {"cases": len(rows), "proven": proven}, "cases": list(rows)}

    load_at_start = list(os.getloadavg())
    rows: list[dict[str, Any]] = []

    def add(group: str, label: str, problem: Any, arch: Any, constraints: Any) -> None:
        """Run one case (unless ``only`` leaves it out) and rewrite the JSON."""
        if only and not any(s in label for s in only):
            return
        rows.extend(dict(x, group=group)
                    for x in _rows(label, problem, arch, constraints, time_s, default_budget, seed, workers or [None],
                                   dive_share))
        if out_path is not None:
            out_path.parent.mkdir(parents=True, exist_ok=True)
            out_path.write_text(json.dumps(_doc(rows), indent=2) + "\n")
    if "search" in groups:
        for layer in SEARCH_LAYERS:
            for arch in SEARCH_ARCHS:
                add("search", f"{layer} @ {arch}", load_problem(layer), load_arch(arch), None)
    if "timeloop" in groups and tl.REFERENCE.exists():
        for case in sorted((tl.REFERENCE / "cases").iterdir()):
            arch_name, layer, mapping_name = case.name.split("__")
            if mapping_name != "mapper_edp_best":
                continue
            ert = TL_ARCHS / arch_name / "ERT.yaml"
            arch = load_arch(str(TL_ARCHS / arch_name / "arch.yaml"), energy=str(ert) if ert.exists() else None)
            cons = [str(p) for p in tl._constraints(arch_name, layer)] or None
            add("timeloop", f"timeloop {layer} @ {arch_name}", load_problem(str(case / "prob.yaml")), arch, cons)
    if "resnet50" in groups and network_time_s is not None:
        for w in workers or [None]:
            _network_rows(rows, network_time_s, seed, only, w, ray_workers, dive_share)
        if out_path is not None:
            out_path.parent.mkdir(parents=True, exist_ok=True)
            out_path.write_text(json.dumps(_doc(rows), indent=2) + "\n")
    elif "resnet50" in groups:
        seen: set[Any] = set()
        arch = load_arch("eyeriss-like")
        for p in network("resnet50").layers:
            key = (p.dims, p.tensors)
            if key in seen:
                continue
            seen.add(key)
            add("resnet50", f"resnet50/{p.name} @ eyeriss-like", p, arch, None)
    return _doc(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time", type=float, default=60.0, help="seconds per case for the exact search (default 60)")
    ap.add_argument("--groups", nargs="+", default=["search", "timeloop", "resnet50"],
                    choices=["search", "timeloop", "resnet50"])
    ap.add_argument("--default-budget", type=int, default=None,
                    help="budget of the default search compared against (default: its own default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--cases", nargs="+", default=[], help="only the cases whose label contains one of these")
    ap.add_argument("--network-time", type=float, default=None, metavar="SECONDS",
                    help="the resnet50 group as one exact network search sharing SECONDS among its layers "
                         "(search_network's network_time_s) instead of --time per layer")
    ap.add_argument("--workers", type=int, nargs="+", default=None, metavar="W",
                    help="the exact search's processes (searcher_options workers); several: each case once per "
                         "count, one after the other (default: the searcher's default)")
    ap.add_argument("--ray-workers", type=int, default=None, metavar="N",
                    help="with --network-time: the layers as tasks on a local Ray of N CPUs "
                         "(accelmap.parallel.search_network_exact) instead of one after the other")
    ap.add_argument("--dive-share", type=float, default=None, metavar="S",
                    help="the exact search's dive_share (searcher_options; default: the searcher's, 0.1)")
    ap.add_argument("--reference", default=None,
                    help="the Timeloop reference folder (default: ../shared/reference/timeloop beside the checkout)")
    args = ap.parse_args()
    if args.reference is not None:
        tl.REFERENCE = Path(args.reference)
    path = Path(args.out)
    out = run(args.groups, args.time, args.default_budget, args.seed, out_path=path, only=args.cases,
              network_time_s=args.network_time, workers=args.workers, ray_workers=args.ray_workers,
              dive_share=args.dive_share)
    print(f"{out['summary']['proven']} of {out['summary']['cases']} proven; wrote {path}")


if __name__ == "__main__":
    main()
