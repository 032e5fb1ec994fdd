"""Nodes per CPU second of the exact search's branch and bound, before and after the compiled
node handling, from the same incumbent, interleaved in this process.

For each case the default search (``anneal``, ``--warm-budget`` evaluations, seed 0) finds
one incumbent; then `accelmap.search.exact.solve` runs from it on one process, once per
version and repeat, the versions alternating (so each pair sees the same load). A version
is a setting of the module switches that choose the numpy reference or the compiled path
(``before``: ``_bound_switches._USE_KERNEL = False``, ``_MEMO = False`` and
``_exact_switches._NODE_TEST = False``: the numpy feasibility test on every row, every count made
each time it is asked for, every child's bound inputs built; ``after``: the compiled test,
`accelmap.costmodels._bounds_kernel`, each count made once per call, and the children
tested from their runs before their inputs are built, `_exact_nodes._feasible_nodes`).
The compiled gather of `accelmap.search._exact_nodes.node_inputs` has no switch: compare checkouts
for it (below). Both bound every
node to the same value (``tests/unit/search/test_exact.py``), so from one incumbent they
explore the same tree in the same order: a proven case takes the same nodes, and a case
stopped by time reaches further along the same sequence in the faster version. Each run
records its CPU seconds (this process), wall time, nodes, cuts, leaves, the certified
bound and gap; the summary per case is the median CPU seconds or nodes per CPU second
of each version and their ratio.

The dives for incumbents (`accelmap.search._exact_tree._Diver`) run by time, so with them a faster
version may find an incumbent at another node and its tree then differs; ``--dive-share 0``
turns them off, and every version then expands the same nodes in the same order.

With ``--cpu-clock`` the time limit counts this process's CPU seconds instead of the wall
clock (the clock of the exact mapper's modules is replaced for the run): on a machine shared with other
jobs every version then gets the same CPU, and the nodes it reaches and the gap it closes in
that CPU compare directly.

To compare two checkouts (every change, not only the switched ones), run this script once
per checkout with ``PYTHONPATH`` set to its ``src``, ``--versions after`` and the same
``--incumbents DIR`` (the first run saves each case's incumbent there, the others load it),
alternating the checkouts run by run.

Usage::

    python benchmarks/bench_exact_nodes.py [--cases NAME ...] [--time 30] [--repeats 3]
        [--warm-budget 200000] [--cpu-clock] [--versions before after] [--incumbents DIR]
        [--dive-share S] [--out FILE]

A case is ``LAYER@ARCH`` (a zoo layer on a preset) or ``timeloop:ARCH:LAYER`` (a case of
``../shared/reference/timeloop`` under its constraint files, as ``bench_exact.py``).
``--versions pass-off pass-on`` compares the bound without and with argument 5c of
`accelmap.costmodels.loopnest_bounds` (the outer pass at the partly chosen open level, and the
pass floors read through eq. S at an open parent); both are the compiled path.
``--versions dramorder-off dramorder-on`` compares the bound without and with argument 14 (level
0's loop order counted exactly in the traffic table, ``_USE_DRAM_ORDER``); ``--versions dramknown-off
dramknown-on`` its part 14c alone (``_DRAM_ORDER_KNOWN``), ``--versions twolevel-off twolevel-on``
its part 14d alone (``_TWO_LEVEL``).
``--versions arg15-off arg15-on`` compares the bound without and with argument 15 (eq. S's distinct
offsets exactly where the strides are known, ``_USE_DISTINCT_EXACT``, and the tensors that bypass
level 1 at their least over the orders of levels 0 and 1 together, ``_USE_JOINT_BYPASS``);
``distinct-off`` and ``joint-off`` leave out one part each.
``--versions arg1718-off arg1718-on`` compares the bound without and with arguments 17 (argument
15b at its least over the splits of the open products between levels 1 and 0, ``_USE_JOINT_SPLIT``)
and 18 (the most instances the open spatial factors can reach, ``_USE_SPATIAL_MOST``);
``split-off`` and ``most-off`` leave out one part each.
``--versions arg19-off arg19-on`` compares the bound without and with argument 19 (the tensors that
bypass level 1 and those level 1 keeps at their least over the orders of levels 0 and 1 together,
``_USE_KEPT_BYPASS``; ``arg19-on`` is the default: at ``k = 2`` on the nodes of at most 4,096 level-1
splits, ``_KEPT_SPLIT_MAX``, not at ``k <= 1``, ``_KEPT_KNOWN``); ``arg19-all`` also at ``k <= 1``,
``arg19-known`` at ``k <= 1`` only, ``arg19-512`` at both with 512 splits, ``arg19-split`` at ``k = 2``
with 512 splits, ``arg19-split4096`` the same as ``arg19-on``, ``arg19-split16384`` with 16,384 splits.


``--versions arg16-off arg16-on`` compares the bound without and with argument 16 (each instance of a
known level takes in at least the union of the tiles it visits, ``_USE_INSTANCE_WORDS``).
``--versions staged-off staged-on`` compares the bound with every argument on every row and the
staged bound (the costly arguments only on the rows still below the incumbent's cut-off, argument 17
only up to it; ``staged-stop``: argument 17 gives up on a row at its first split below the cut-off).
Every run starts with argument 17's kept values emptied (``_SPLIT_MEMO``), so no version reads
another's.
``--versions jstar-numpy jstar-cpu`` compares argument 10 in numpy (the reference) and compiled
(``_JSTAR_ENGINE``, `accelmap.costmodels._jstar_kernel`); both bound every node to the same value.
``--versions orderpass-off orderpass-on`` compares the bound without and with argument 10's
passes repeated inside J* (``_USE_ORDER_PASS``).
Benchmarks are run by hand; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "bench_exact_nodes.json"
CASES = ["resnet50/res3b_branch2b@eyeriss-like", "timeloop:simple3:L4_resnet50_res3a_2b_s2",
         "resnet50/res2a_branch2b@eyeriss-like", "resnet50/res4b_branch2a@eyeriss-like",
         "timeloop:simple3:L3_resnet50_res2a_2b"]
# "switches.X" is a switch of the bounds (`accelmap.costmodels._bound_switches`), "exact.X" one of the
# exact mapper (`accelmap.search._exact_switches`; in `exact` itself before the split)
VERSIONS: dict[str, dict[str, bool | int | str]] = {
    "before": {"switches._USE_KERNEL": False, "switches._MEMO": False, "exact._NODE_TEST": False},
    "after": {"switches._USE_KERNEL": True, "switches._MEMO": True, "exact._NODE_TEST": True},
    # arguments 5c and the pass floor read at an open parent (`_order_bounds._next_level_pass`)
    "pass-off": {"switches._USE_NEXT_PASS": False, "switches._USE_PASS_READS": False},
    "pass-on": {"switches._USE_NEXT_PASS": True, "switches._USE_PASS_READS": True},
    # the region count (arguments 11-12) always computed, or dropped per keep pattern once it
    # has lifted no node in its first calls (`exact._REGION_TRIAL`)
    "trial-off": {"exact._REGION_TRIAL": 0}, "trial-on": {"exact._REGION_TRIAL": 256},
    # argument 10 with the passes repeated inside J* (`_order_bounds._pass_floor`)
    "orderpass-off": {"switches._USE_ORDER_PASS": False},
    "orderpass-on": {"switches._USE_ORDER_PASS": True},
    # argument 13: each known level's outermost and innermost loops chosen jointly (`_USE_PAIRS`)
    # (on trial: dropped per keep pattern and depth of levels once it has lifted no row in its
    # first calls, `exact._PAIR_TRIAL`; always: computed on every call)
    "pairs-off": {"switches._USE_PAIRS": False, "exact._PAIR_TRIAL": 64, "switches._PAIR_MAX_K": -1},
    "pairs-on": {"switches._USE_PAIRS": True, "exact._PAIR_TRIAL": 64, "switches._PAIR_MAX_K": -1},
    "pairs-always": {"switches._USE_PAIRS": True, "exact._PAIR_TRIAL": 0},
    # at the leaves and the order search only (``_PAIR_MAX_K = 0``)
    "pairs-leaves": {"switches._USE_PAIRS": True, "exact._PAIR_TRIAL": 64, "switches._PAIR_MAX_K": 0},
    # the node handling of one more round (the same bounds): children that passed `_feasible_nodes`
    # not tested again, the distinct-offset bounds and the region count's parts made once per call
    # and its segments in one pass (`_bound_switches._SHARE`), leaf order sets made once and leaf
    # legality tested once per factorization (`exact._LEAF_MEMO`), the spatial children's fanout
    # test compiled (`exact._FANOUT_KERNEL`); "share-off" is the code before
    "share-off": {"switches._SHARE": False, "exact._TRUST_TEST": False, "exact._LEAF_MEMO": False,
                  "exact._FANOUT_KERNEL": False},
    "share-on": {"switches._SHARE": True, "exact._TRUST_TEST": True, "exact._LEAF_MEMO": True,
                 "exact._FANOUT_KERNEL": True},
    # argument 14: the traffic table's cells with level 0's loop order counted exactly
    # (`loopnest_bounds.dram_order_table`; read when the keep patterns' tables are built)
    "dramorder-off": {"switches._USE_DRAM_ORDER": False},
    "dramorder-on": {"switches._USE_DRAM_ORDER": True, "switches._DRAM_ORDER_KNOWN": True},
    # argument 14c alone (the cell of a known level-1 tile at k <= 1), 14 and 14b on in both
    "dramknown-off": {"switches._USE_DRAM_ORDER": True, "switches._DRAM_ORDER_KNOWN": False},
    "dramknown-on": {"switches._USE_DRAM_ORDER": True, "switches._DRAM_ORDER_KNOWN": True},
    # argument 14d alone (a tensor bypassing level 1 into level 2, both levels' orders), 14-14c on in both
    "twolevel-off": {"switches._USE_DRAM_ORDER": True, "switches._TWO_LEVEL": False},
    "twolevel-on": {"switches._USE_DRAM_ORDER": True, "switches._TWO_LEVEL": True},
    # argument 15 (eq. S's distinct offsets exactly where the strides are known, and the tensors
    # that bypass level 1 at their least over levels 0 and 1's orders together), off and on
    "arg15-off": {"switches._USE_DISTINCT_EXACT": False, "switches._USE_JOINT_BYPASS": False},
    "arg15-on": {"switches._USE_DISTINCT_EXACT": True, "switches._USE_JOINT_BYPASS": True},
    # its parts alone: 15a (the exact distinct offsets) and 15b (the joint orders) with the other on
    "distinct-off": {"switches._USE_DISTINCT_EXACT": False, "switches._USE_JOINT_BYPASS": True},
    "joint-off": {"switches._USE_DISTINCT_EXACT": True, "switches._USE_JOINT_BYPASS": False},
    # argument 10 (`_order_bounds._jstar_order_energy`): its charges and shortest path in numpy
    # (the reference) or compiled (`costmodels._jstar_kernel`); the same bounds bit for bit
    "jstar-numpy": {"switches._JSTAR_ENGINE": "numpy"},
    "jstar-cpu": {"switches._JSTAR_ENGINE": "cpu"},
    # argument 16 (each instance of a known level takes in at least the union of its own tiles), off and on
    "arg16-off": {"switches._USE_INSTANCE_WORDS": False},
    "arg16-on": {"switches._USE_INSTANCE_WORDS": True},


    # argument 17 (argument 15b over the level-1/level-0 splits of the open products too) and
    # argument 18 (the most instances the spatial factors still open can reach), off and on
    "arg1718-off": {"switches._USE_JOINT_SPLIT": False, "switches._USE_SPATIAL_MOST": False},
    "arg1718-on": {"switches._USE_JOINT_SPLIT": True, "switches._USE_SPATIAL_MOST": True,
                   "switches._JOINT_SPLIT_CHOSEN": False},
    # their parts alone, the other on
    "split-off": {"switches._USE_JOINT_SPLIT": False, "switches._USE_SPATIAL_MOST": True},
    "most-off": {"switches._USE_JOINT_SPLIT": True, "switches._USE_SPATIAL_MOST": False},
    # argument 17 also where some dims' level-1 factors are chosen (both on)
    "split-chosen": {"switches._USE_JOINT_SPLIT": True, "switches._USE_SPATIAL_MOST": True,
                     "switches._JOINT_SPLIT_CHOSEN": True},
    # staged bounds: the costly arguments only on the rows the others leave below the incumbent's
    # cut-off, argument 17 up to it (`loopnest_bounds.BoundCut`); off: every argument on every row;
    # "staged-stop": argument 17 also gives up on a row at its first split below the cut-off
    "staged-off": {"switches._STAGED": False, "switches._SPLIT_STOP": False},
    "staged-on": {"switches._STAGED": True, "switches._SPLIT_STOP": False},
    "staged-stop": {"switches._STAGED": True, "switches._SPLIT_STOP": True},
    # argument 19 (the tensors that bypass level 1 and those it keeps, both orders together), off and on
    "arg19-off": {"switches._USE_KEPT_BYPASS": False},
    "arg19-on": {"switches._USE_KEPT_BYPASS": True, "switches._KEPT_SPLIT_MAX": 4096,
                 "switches._KEPT_KNOWN": False},
    "arg19-all": {"switches._USE_KEPT_BYPASS": True, "switches._KEPT_SPLIT_MAX": 4096,
                  "switches._KEPT_KNOWN": True},
    # argument 19 at k <= 1 only, and at k = 2 on the nodes of at most 512 splits (argument 17's limit)
    "arg19-known": {"switches._USE_KEPT_BYPASS": True, "switches._KEPT_SPLIT_MAX": 0,
                    "switches._KEPT_KNOWN": True},
    "arg19-512": {"switches._USE_KEPT_BYPASS": True, "switches._KEPT_SPLIT_MAX": 512,
                  "switches._KEPT_KNOWN": True},
    # argument 19 at k = 2 only (at most 512 splits), not at the nodes with every factor known
    "arg19-split": {"switches._USE_KEPT_BYPASS": True, "switches._KEPT_SPLIT_MAX": 512,
                    "switches._KEPT_KNOWN": False},
    "arg19-split4096": {"switches._USE_KEPT_BYPASS": True, "switches._KEPT_SPLIT_MAX": 4096,
                        "switches._KEPT_KNOWN": False},
    "arg19-split16384": {"switches._USE_KEPT_BYPASS": True, "switches._KEPT_SPLIT_MAX": 16384,
                         "switches._KEPT_KNOWN": False}}


def _load(case: str) -> tuple[Any, Any, Any]:
    from accelmap.arch.io import load_arch
    from accelmap.workloads.io import load_problem

    if case.startswith("timeloop:"):
        import bench_vs_timeloop as tl

        _, arch_name, layer = case.split(":")
        folder = tl.REFERENCE / "cases" / f"{arch_name}__{layer}__mapper_edp_best"
        ert = tl.ARCHS / arch_name / "ERT.yaml"
        arch = load_arch(str(tl.ARCHS / arch_name / "arch.yaml"), energy=str(ert) if ert.exists() else None)
        cons = [str(p) for p in tl._constraints(arch_name, layer)] or None
        return load_problem(str(folder / "prob.yaml")), arch, cons
    layer, arch_name = case.split("@")
    return load_problem(layer), load_arch(arch_name), None


class _CpuClock:
    """The `time` module as the exact search sees it, with ``perf_counter`` reading this
    process's CPU seconds (a one-process search only: forked workers have their own)."""

    perf_counter = staticmethod(time.process_time)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _set(version: str) -> None:
    import importlib

    import accelmap.costmodels.loopnest_bounds as lb
    import accelmap.search.exact as exact

    try:  # the bounds' switches (`_bound_switches`; a checkout before it kept them in `loopnest_bounds`)
        switches = importlib.import_module("accelmap.costmodels._bound_switches")
        memos = importlib.import_module("accelmap.costmodels._bypass_bounds")
    except ImportError:
        switches = memos = lb
    try:  # the exact mapper's switches (`_exact_switches`; a checkout before it kept them in `exact`)
        exact_switches = importlib.import_module("accelmap.search._exact_switches")
    except ImportError:
        exact_switches = exact
    modules = {"switches": switches, "exact": exact_switches}
    for name, value in VERSIONS[version].items():
        module, attr = name.split(".")
        if hasattr(modules[module], attr):  # (a checkout without the switch: its one version)
            setattr(modules[module], attr, value)
    for memo in ("_SPLIT_MEMO", "_SPLIT_FLOORS"):  # argument 17's values kept: every run starts without them
        if hasattr(memos, memo):
            getattr(memos, memo).clear()


def main() -> None:
    import pickle

    import accelmap
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.search.api import build_space, search
    from accelmap.search.exact import solve
    from accelmap.search.objectives import parse_objective

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=CASES)
    ap.add_argument("--time", type=float, default=30.0, help="wall-clock limit of each branch and bound")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm-budget", type=int, default=200_000)
    ap.add_argument("--cpu-clock", action="store_true", help="the time limit in CPU seconds of this process")
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS), choices=list(VERSIONS))
    ap.add_argument("--incumbents", default=None, help="folder of saved incumbents (one pickle per case)")
    ap.add_argument("--dive-share", type=float, default=None,
                    help="the searcher's dive_share (default: its own); 0: no dives, so every version explores the "
                         "same tree in the same order")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    if args.cpu_clock:  # every part of the exact mapper that reads the clock
        import importlib

        for name in ("exact", "_exact_nodes", "_exact_leaves", "_exact_tree", "_exact_workers", "_exact_padded",
                     "_exact_warm"):
            try:
                part = importlib.import_module(f"accelmap.search.{name}")
            except ImportError:  # a checkout before the split: `exact` alone
                continue
            if hasattr(part, "time"):
                part.time = _CpuClock()  # type: ignore[attr-defined]
    rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    doc = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
           "load_average_at_start": list(os.getloadavg()), "time_limit_s": args.time, "cpu_clock": args.cpu_clock,
           "versions": {v: VERSIONS[v] for v in args.versions}, "accelmap": str(Path(accelmap.__file__).parent),
           "warm_budget": args.warm_budget, "dive_share": args.dive_share, "rows": rows, "summary": summary}
    obj = parse_objective("edp")
    model = LoopNestModel()
    dives = {} if args.dive_share is None else {"dive_share": args.dive_share}
    for case in args.cases:
        problem, arch, cons = _load(case)
        space = build_space(problem, arch, cons)
        saved = Path(args.incumbents) / (case.replace("/", "_").replace(":", "_").replace("@", "_") + ".pkl") \
            if args.incumbents else None
        if saved is not None and saved.exists():
            inc, warm_objective = pickle.loads(saved.read_bytes())
        else:
            warm = search(problem, arch, constraints=cons, seed=0, budget=args.warm_budget)
            inc, warm_objective = warm.best.as_batch(), warm.best_objective
            if saved is not None:
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_bytes(pickle.dumps((inc, warm_objective)))
        for version in args.versions:  # compile and load every kernel once before timing
            _set(version)
            solve(space, model, obj, time_limit_s=1.0, incumbent=inc, workers=1, **dives)
        for rep in range(args.repeats):
            for version in args.versions:
                _set(version)
                c0, t0 = time.process_time(), time.perf_counter()
                _, value, cert = solve(space, model, obj, time_limit_s=args.time, incumbent=inc, workers=1, **dives)
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                rows.append({"case": case, "version": version, "repeat": rep, "cpu_s": round(cpu, 3),
                             "wall_s": round(wall, 3), "proven": cert.proven_optimal, "nodes": cert.nodes,
                             "cut": cert.cut, "infeasible": cert.infeasible, "leaves": cert.leaves,
                             "nodes_per_cpu_s": round(cert.nodes / cpu, 1), "objective": value,
                             "lower_bound": cert.lower_bound, "gap": cert.gap,
                             "warm_objective": warm_objective, "load_average": list(os.getloadavg())})
                print(f"{case:<44} {version:<6} {'PROVEN' if cert.proven_optimal else 'open  '} cpu {cpu:6.2f} s "
                      f"wall {wall:6.1f} s nodes {cert.nodes:>9,} ({cert.nodes / cpu:8.0f}/cpu s) gap {cert.gap:.3%} "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        mine = [r for r in rows if r["case"] == case]
        per = {v: [r for r in mine if r["version"] == v] for v in args.versions}
        s: dict[str, Any] = {"case": case}
        for v, rs in per.items():
            s[v] = {"median_cpu_s": statistics.median(r["cpu_s"] for r in rs),
                    "median_nodes_per_cpu_s": statistics.median(r["nodes_per_cpu_s"] for r in rs),
                    "nodes": [r["nodes"] for r in rs], "proven": [r["proven"] for r in rs],
                    "gaps": [r["gap"] for r in rs]}
        if len(per) == 2:
            a, b = args.versions  # the second over the first ("after" over "before" by default)
            key = "after_over_before" if (a, b) == ("before", "after") else f"{b}_over_{a}"
            s[f"{key}_nodes_per_cpu_s"] = s[b]["median_nodes_per_cpu_s"] / s[a]["median_nodes_per_cpu_s"]
            if all(r["proven"] for r in mine):
                s[f"{key}_cpu_s"] = s[b]["median_cpu_s"] / s[a]["median_cpu_s"]
            print(f"  {case}: nodes per CPU s {b}/{a} {s[f'{key}_nodes_per_cpu_s']:.2f}x", flush=True)
        summary.append(s)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    doc["load_average_at_end"] = list(os.getloadavg())
    Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
