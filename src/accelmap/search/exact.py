"""``exact``: branch and bound over the whole map space of the ``loopnest`` model.

Every branch of the space is bounded by `accelmap.costmodels.loopnest_bounds`, whose bounds
never exceed the model's cost of any mapping in the branch, and a branch is cut when its bound
is no better than the incumbent's value (within one part in 10^12). When the tree is exhausted
the incumbent is proven optimal; when the time or evaluation limit stops the search first, the
certified lower bound is the smallest bound among the open branches. The approach follows the
branch-and-bound mappers that prove optimality in a space by pruning it (the Turbo-Charged
Mapper, arXiv 2602.15172), with bounds derived here from the model's own counting rules.

This module holds the entry points: `ExactSearcher` (the ``exact`` searcher, a solver run by
`accelmap.search.api` through `ExactSearcher.run`, which runs the warm start and builds the
`SearchResult`), `solve` (the branch and bound of one space) and `root_bound` (a cheap lower
bound of every mapping of a space, which every loopnest search result carries). The parts,
each explained in its own module's docstring:

* `accelmap.search._exact_nodes`: the tree (keep patterns, then spatial factors, then
  temporal factors innermost level first: `DimTree`, `node_inputs`), how a node is bounded and
  its children made, the cut test, what the search shares (`_Problem`) and proves
  (`Certificate`);
* `accelmap.search._exact_leaves`: loop orders at the leaves (every combination, or the order
  search), and every evaluation by the model;
* `accelmap.search._exact_tree`: the open set and the loop (best first, depth first while too
  many nodes are open), and the dives for incumbents between its nodes;
* `accelmap.search._exact_warm`: the first incumbent, the warm start run beside the tree and
  the incumbent's value shared between processes;
* `accelmap.search._exact_workers`: one tree on several processes (dealing the open nodes,
  work given to idle workers);
* `accelmap.search._exact_padded`: imperfect factorization, one branch per padded bound
  vector;
* `accelmap.search._exact_switches`: every switch and limit, read at call time;
* `accelmap.search._exact_kernel`: the compiled parts of the node handling.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from accelmap.costmodels.loopnest_bounds import partial_bounds
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.mapper.mapping import MappingBatch
from accelmap.search import _exact_switches as sw
from accelmap.search import _exact_warm  # `_WarmStart` read through its module: a test replaces it there
from accelmap.search._exact_nodes import (
    Certificate,
    DimTree,
    _bound_nodes,
    _children_many,
    _Frame,
    _require,
    _root_frames,
    _setup,
    bound_model,
    k_of,
    node_inputs,
)
from accelmap.search._exact_padded import BranchSpace, PaddedBranches, _solve_padded
from accelmap.search._exact_tree import _loop, _Open
from accelmap.search._exact_warm import _first_incumbent, _sync
from accelmap.search._exact_workers import _can_fork, _solve_workers, default_workers
from accelmap.search.base import Cap
from accelmap.search.objectives import ObjectiveSpec

__all__ = ["ExactSearcher", "BranchSpace", "Certificate", "DimTree", "PaddedBranches", "bound_model",
           "default_workers", "k_of", "node_inputs", "root_bound", "solve"]


def solve(space: Any, model: Any, objective: ObjectiveSpec, *, time_limit_s: float | None = None,
          max_leaves: int | None = None, incumbent: MappingBatch | None = None,
          progress: Any = None, workers: int = 1,
          dive_share: float = sw._DIVE_SHARE,
          warm: _exact_warm._WarmStart | None = None) -> tuple[MappingBatch | None, float, Certificate]:
    """Branch and bound over ``space``.

    Parameters
    ----------
    space, model, objective
        A `MapSpace`, the ``loopnest`` model and a single objective.
    time_limit_s, max_leaves
        Stop after this many seconds, or once this many mappings were evaluated; the
        certificate then holds the smallest bound among the open branches.
    incumbent
        Mappings to start from; the best legal one is the first incumbent.
    progress
        Optional callback ``progress(best, lower_bound, certificate)``, about once a second.
    workers
        Processes that share the tree (`_solve_workers`); 1 runs it in this process. A
        padded space, a ``max_leaves`` limit, or a platform without ``fork`` run on one.
    dive_share
        The most share of the time that dives from the open nodes with the lowest bounds take
        (`_Diver`: incumbents from the frontier); 0 turns them off. They can only lower the
        incumbent; the proof and the certified bound do not depend on them.
    warm
        A warm start running beside the search (`_WarmStart`): its value is cut with as soon
        as it ends, and its mapping is the result when no better one is found (it is waited
        for unless the search proved a mapping of its own optimal first).

    Returns
    -------
    (best mapping as a one-row batch or None, its objective value, `Certificate`)
    """
    if getattr(space, "allow_padding", False):
        return _solve_padded(space, model, objective, time_limit_s=time_limit_s, max_leaves=max_leaves,
                             incumbent=incumbent, progress=progress, dive_share=dive_share)
    t0 = time.perf_counter()
    P = _setup(space, model, objective)
    P.deadline = t0 + time_limit_s if time_limit_s is not None else math.inf
    P.max_leaves = max_leaves
    P.dive_share = dive_share
    P.best_value, P.best_batch = _first_incumbent(space, model, objective, incumbent)
    P.cert.patterns = len(P.patterns)
    roots = _root_frames(P)
    open_ = _Open()
    for fr in roots:
        open_.push(fr)
    P.cert.root_lower_bound = min([float(fr.bounds[0]) for fr in roots] + [P.best_value])
    low = None  # the least bound of the work left open by the workers (`_solve_workers`)
    try:
        if workers > 1 and max_leaves is None and _can_fork():
            stop, low = _solve_workers(P, open_, progress, t0, workers, warm)
        else:
            stop = _loop(P, open_, progress, t0,
                         poll=None if warm is None else _warm_poll(P, warm))
    except KeyboardInterrupt:  # Ctrl-C: keep the incumbent, certify what is open
        stop = "interrupted"
    except BaseException:
        if warm is not None:
            warm.close()
        raise
    if warm is not None:
        _sync(P, warm.shared)
        # wait for it unless the tree holds the best mapping and was proven or interrupted
        warm.finish(P, needed=P.best_batch is None or stop not in ("", "interrupted"))
        P.cert.warm_start_evaluations = warm.evaluations
    current = P.current
    cert = P.cert
    cert.incumbent = P.best_value
    cert.elapsed_s = time.perf_counter() - t0
    if stop:
        cert.stop_reason = stop
        cert.proven_optimal = False
        cert.lower_bound = min(open_.min_bound(), current, P.best_value) if low is None else min(low, P.best_value)
    else:
        cert.stop_reason = "proven" if math.isfinite(P.best_value) else "infeasible"
        cert.proven_optimal = math.isfinite(P.best_value)
        cert.lower_bound = P.best_value
    return P.best_batch, P.best_value, cert


def _warm_poll(P: Any, warm: Any) -> Callable[[Any], str]:
    """`_loop`'s poll while a warm start runs beside the tree: before every node the
    incumbent's value is traded with it (`_sync`); the answer is always "" (never a stop)."""
    def poll(open_: Any) -> str:
        _sync(P, warm.shared)
        return ""
    return poll


def _root_bound_padded(space: Any, objective: ObjectiveSpec, max_nodes: int,
                       time_s: float) -> dict[str, float] | None:
    """`root_bound` of a padded space: the least over its branches (`PaddedBranches`) of each
    branch's root bound, cheapest branch first while ``time_s`` lasts; the branches left
    count with their cheap bounds (MAC energy and ``ceil(M' / n_macs)`` cycles). None when
    the space has too many padded bound vectors to list (the caller falls back to another
    bound)."""
    t0 = time.perf_counter()
    try:
        br = PaddedBranches(space, objective)
    except SpecError:
        return None
    best = {"cycles": math.inf, "energy_pj": math.inf, "edp": math.inf, "objective": math.inf}
    for i in range(len(br)):
        left = time_s - (time.perf_counter() - t0)
        if left <= 0 or br.cheap[i] >= best["objective"] and i > 0:
            # the rest at their cheap bounds (each the least at the branch with fewest MACs)
            best["energy_pj"] = min(best["energy_pj"], float(br.energy_lb[i]))
            best["cycles"] = min(best["cycles"], float(br.cycles_lb[i]))
            best["edp"] = min(best["edp"], float(br.energy_lb[i] * br.cycles_lb[i]))
            best["objective"] = min(best["objective"], float(br.cheap[i]))
            break
        rb = root_bound(br.view(i), objective, max_nodes=max_nodes, time_s=left / 4)
        if rb is not None:
            for key in best:
                best[key] = min(best[key], rb[key])
    if not math.isfinite(best["objective"]):
        return None
    return best


def root_bound(space: Any, objective: ObjectiveSpec, *, max_nodes: int = 4_096,
               time_s: float = 0.3) -> dict[str, float] | None:
    """A cheap lower bound of every mapping of the space under the loopnest model.

    Bounds the root of every keep pattern's tree, then, patterns with the smallest bound
    first and while ``time_s`` lasts, expands a pattern's tree breadth first (one level of
    the map space, one or more dims at a time, as the search does) while it has at most
    ``max_nodes`` open nodes. Returns the smallest bound among the open nodes of every
    pattern, ``{"cycles", "energy_pj", "edp", "objective"}`` (each minimised on its own, so
    each bounds its own metric), or None when no mapping can be legal.
    """
    if getattr(space, "allow_padding", False):
        return _root_bound_padded(space, objective, max_nodes, time_s)
    t0 = time.perf_counter()
    P = _setup(space, type("LoopNest", (), {"name": "loopnest"})(), objective)
    zero = np.zeros((1, P.D), dtype=np.int64)
    frontier: list[tuple[float, _Frame]] = []
    for pi in range(len(P.patterns)):
        b, ok = _bound_nodes(P, pi, 0, 0, zero)
        if ok[0]:
            frontier.append((float(b[0]), _Frame(pi, 0, 0, zero, b)))
    frontier.sort(key=lambda x: x[0])
    finals: list[tuple[int, _Frame]] = []
    for _, f in frontier:
        pi = f.pattern
        while f.depth < P.leaf_depth and time.perf_counter() - t0 < time_s:
            sizes = np.ones((len(f.ids), P.D), dtype=np.int64)  # (nodes, D) children per dim
            for d in range(f.split, P.D):
                tr = P.trees[d]
                sizes[:, d] = tr.child_hi[f.depth][f.ids[:, d]] - tr.child_lo[f.depth][f.ids[:, d]]
            end = f.split + 1
            while end < P.D and int(sizes[:, f.split: end + 1].prod(axis=1).sum()) <= max_nodes:
                end += 1
            if int(sizes[:, f.split: end].prod(axis=1).sum()) > max_nodes:
                break
            dims = range(f.split, end)
            new_depth, new_split = (f.depth + 1, 0) if end == P.D else (f.depth, end)
            allk = _children_many(P, f.depth, f.split, f.ids, dims)
            kids = []
            for start in range(0, len(allk), sw._CHUNK):
                ch = allk[start: start + sw._CHUNK]
                _, ok = _bound_nodes(P, pi, new_depth, new_split, ch)
                kids.append(ch[ok])
            ids = np.concatenate(kids) if kids else np.zeros((0, P.D), dtype=np.int64)
            f = _Frame(pi, new_depth, new_split, ids, np.zeros(len(ids)))
            if len(ids) == 0:
                break
        if len(f.ids):
            finals.append((pi, f))
    best = {"cycles": math.inf, "energy_pj": math.inf, "edp": math.inf, "objective": math.inf}
    for pi, f in finals:
        e, c, ok = partial_bounds(P.bms[pi], **node_inputs(P.trees, f.depth, f.split, f.ids))
        if not ok.any():
            continue
        e, c = e[ok], c[ok]
        best["energy_pj"] = min(best["energy_pj"], float(e.min()))
        best["cycles"] = min(best["cycles"], float(c.min()))
        best["edp"] = min(best["edp"], float((e * c).min()))
        best["objective"] = min(best["objective"], float(P.objective_bound(e, c).min()))
    if not math.isfinite(best["objective"]):
        return None
    return best


class ExactSearcher:
    """The ``exact`` searcher: branch and bound with a certificate (see module doc).

    It is a solver: it owns its loop over the space and the cost model, so the API runs
    it through :meth:`run` rather than the ask/tell driver. Options (``searcher_options``):

    warm_budget
        Evaluations of the default searcher (``anneal``) that find the first incumbent, at
        most a quarter of the time limit and a quarter of the space's points (at least
        20,000) (default 1,000,000: the default search itself, so the exact result is never
        worse than it; 0: none, the search starts from no incumbent).
    workers
        Processes that share the branch and bound of the layer (default: every CPU this
        process may use, inside a Ray task the CPUs Ray gave it, `default_workers`; 1: this
        process alone). The incumbent is shared
        and idle workers take half of a busy one's open nodes (`_solve_workers`); the proof
        and the certified bound are the same as on one. The warm start runs on one process:
        on two or more, beside the tree (`_WarmStart`), which starts from a quick warm start
        of ``_QUICK_WARM`` evaluations.
    dive_share
        The most share of the branch and bound's time spent on dives for incumbents from the
        open nodes with the lowest bounds (`_Diver`; default 0.1; 0: none).
    """

    name: ClassVar[str] = "exact"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.SOLVER, Cap.SEEDABLE})
    default_budget: ClassVar[int | None] = None
    option_names: ClassVar[tuple[str, ...]] = ("warm_budget", "workers", "dive_share")
    DEFAULT_WARM_BUDGET: ClassVar[int] = 1_000_000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("the exact searcher is a solver: run it with accelmap.search(..., searcher='exact') "
                        "or `accelmap search --searcher exact`, not through ask/tell")

    @classmethod
    def run(cls, *, problem: Any, arch: Any, space: Any, model: Any, model_name: str, objective: ObjectiveSpec,
            seed: int, budget: int | None, time_limit_s: float | None, options: dict[str, Any],
            progress: bool, config: dict[str, Any], initial: Any = None) -> Any:
        """Run the exact search; returns a `SearchResult` with its certificate.

        ``budget`` caps the mappings the branch and bound evaluates (the warm start's
        evaluations are counted apart); ``time_limit_s`` caps the warm start and the branch
        and bound together (the map space, built before, and the cheap root bound of the
        result, at most 0.3 s after, come on top). Either limit ends the run with the
        certified bound of the open branches. ``initial`` (k, n_params), encoded points of
        ``space``, join the warm start's best as candidates for the first incumbent (a
        network search hands a layer's best mapping to its next run so).
        """
        from accelmap.search.driver import Driver, DriverOptions
        from accelmap.search.result import History, SearchResult, mapping_to_json

        opts = dict(options)
        warm = opts.pop("warm_budget", cls.DEFAULT_WARM_BUDGET)
        workers = opts.pop("workers", None)
        dive_share = opts.pop("dive_share", sw._DIVE_SHARE)
        if opts:
            raise TypeError(f"searcher exact: unknown option(s) {sorted(opts)}; it takes warm_budget, workers "
                            "and dive_share")
        if isinstance(dive_share, bool) or not isinstance(dive_share, (int, float)) or not 0 <= dive_share < 1:
            raise SpecError(f"searcher exact: dive_share = {dive_share!r}; expected a number in [0, 1)")
        if isinstance(warm, bool) or not isinstance(warm, int) or warm < 0:
            raise SpecError(f"searcher exact: warm_budget = {warm!r}; expected an int >= 0")
        if workers is None:
            workers = default_workers()
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise SpecError(f"searcher exact: workers = {workers!r}; expected an int >= 1")
        if budget is not None and budget < 1:
            raise SpecError(f"budget = {budget}; expected an int >= 1")
        _require(model, objective)  # refuse other models and Pareto objectives before any work
        t0 = time.perf_counter()
        incumbent = None
        n_warm = 0
        beside: _exact_warm._WarmStart | None = None
        if warm:
            from accelmap._registry import searchers

            # a small space (a constrained one, say) is proven faster than it is sampled
            warm_run = min(warm, max(sw._WARM_FLOOR, space.size().total // 4))
            wopts = DriverOptions(budget=warm_run, time_limit_s=None if time_limit_s is None else 0.25 * time_limit_s)

            def warm_start(o: DriverOptions = wopts) -> tuple[int, MappingBatch | None, Any, Any, ObjectiveSpec]:
                try:
                    wr = Driver(problem, arch, space, model, searchers.get("anneal"), objective=objective, seed=seed,
                                options=o, model_name=model_name, searcher_name="anneal").run()
                except InfeasibleSpaceError:  # no legal mapping found by sampling: the exact search decides
                    return 0, None, space, model, objective
                return wr.n_evaluations, (None if wr.best is None else wr.best.as_batch()), space, model, objective

            # (a warm start no longer than the quick one runs first: a fork would cost more)
            if sw._WARM_BESIDE and workers > 1 and budget is None and warm_run > sw._QUICK_WARM and _can_fork() \
                    and not getattr(space, "allow_padding", False):
                beside = _exact_warm._WarmStart(warm_start)  # on its own core while the tree starts on the others
                if sw._QUICK_WARM:  # a first incumbent for the tree, while the warm start runs
                    n_warm, incumbent, *_ = warm_start(dataclasses.replace(wopts, budget=sw._QUICK_WARM))
            else:
                n_warm, incumbent, *_ = warm_start()
        if initial is not None and len(initial):
            given = space.decode(np.asarray(initial, dtype=np.int64))
            incumbent = given if incumbent is None else MappingBatch.concat([given, incumbent])
        left = None if time_limit_s is None else max(time_limit_s - (time.perf_counter() - t0), 0.0)
        bar = _progress_bar(progress)
        try:
            best, value, cert = solve(space, model, objective, time_limit_s=left, max_leaves=budget,
                                      incumbent=incumbent, progress=bar, workers=workers,
                                      dive_share=float(dive_share), warm=beside)
        finally:
            if bar is not None:
                bar.close()
            if beside is not None:
                beside.close()
        cert.warm_start_evaluations += n_warm
        cert.elapsed_s = time.perf_counter() - t0
        if best is None:
            if cert.proven_optimal or cert.stop_reason == "infeasible":
                raise InfeasibleSpaceError(
                    f"no mapping of {getattr(problem, 'name', 'the problem')} on {getattr(arch, 'name', 'the arch')} "
                    "is legal: the exact search covered the whole space (every branch exceeds a capacity or "
                    "fanout, or fails a constraint). Try a larger buffer, fewer constraints"
                    + (" or imperfect factorization (--padding)." if not getattr(space, "allow_padding", True) else "."))
            raise InfeasibleSpaceError(
                f"the exact search found no legal mapping of {getattr(problem, 'name', 'the problem')} before it "
                f"stopped ({cert.stop_reason}); give it more time or a budget")
        metrics = model.evaluate(problem, arch, best)
        row = metrics.row(0)
        rb = root_bound(space, objective)
        if rb is not None and not cert.proven_optimal:  # both bound the objective: keep the larger
            cert.lower_bound = min(max(cert.lower_bound, rb["objective"]), value)
        lb: dict[str, float] = dict(rb) if rb else {}
        lb["objective"] = cert.lower_bound
        key = {"edp": "edp", "energy": "energy_pj", "cycles": "cycles"}.get(objective.name)
        if key is not None:
            lb[key] = max(lb.get(key, 0.0), cert.lower_bound)
        n_eval = n_warm + cert.leaves
        stop = "exhausted" if cert.proven_optimal else cert.stop_reason
        cfg = dict(config)
        cfg.update({"searcher_options": {"warm_budget": warm, "workers": workers, "dive_share": dive_share},
                    "budget": budget, "time_limit_s": time_limit_s,
                    "seed": seed, "objective": objective.name, "model": model_name})
        return SearchResult(
            problem=getattr(problem, "name", str(problem)), arch=getattr(arch, "name", str(arch)),
            model=model_name, searcher=cls.name, objective=objective, best=best[0],
            best_x=tuple(int(v) for v in space.encode(best)[0]), best_metrics=row, best_objective=value,
            history=History(evaluations=(n_eval,), seconds=(round(cert.elapsed_s, 6),), best=(value,)),
            n_evaluations=n_eval, n_valid=n_eval, elapsed_s=round(cert.elapsed_s, 6), stop_reason=stop,
            lower_bound=lb, proven_optimal=cert.proven_optimal, bound_kind="exact",
            certificate=cert.to_dict(), config=cfg, seed=seed,
            best_mapping_json=mapping_to_json(best[0], problem, arch),
        )


def _progress_bar(enabled: bool) -> Any:
    """A tqdm line showing the incumbent, the certified bound and the node counts."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    bar = tqdm(total=None, unit="node", dynamic_ncols=True, desc="exact", leave=True)

    def update(best: float, lb: float, cert: Certificate) -> None:
        gap = best / lb - 1.0 if lb > 0 and math.isfinite(best) else math.inf
        bar.set_postfix_str(f"best {best:.5g} bound {lb:.5g} gap {gap:.2%} cut {cert.cut:,} leaves {cert.leaves:,}")
        bar.n = cert.nodes
        bar.refresh()

    update.close = bar.close  # type: ignore[attr-defined]
    return update
