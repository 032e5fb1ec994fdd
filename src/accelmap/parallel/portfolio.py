"""A portfolio: several searchers and seeds on one layer at once, the best merged.

Each member (one searcher, one seed) is one task on the backend: a whole search, with the
frozen `Problem` and `Arch`, plugin names and a seed spawned from one
`numpy.random.SeedSequence`. With ``rounds=1`` (the default) members run independently;
with ``rounds=R`` each member's budget is split into R rounds and, between rounds, the best
mappings found by all members (the elites) are handed to every member's next search as
starting points (an island model with migration; the searcher's ``seed_points`` takes
them in). The portfolio's result is the member whose best scalar objective is lowest, plus
a table of every member.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.parallel.backend import Backend, make_backend
from accelmap.parallel.store import ResultStore
from accelmap.parallel.sweep import (
    SearchTask,
    _check_searcher_options,
    raise_if_interrupted,
    result_row,
    search_kwargs,
    spawn_seeds,
)
from accelmap.workloads.problem import Problem

__all__ = ["PortfolioMember", "PortfolioResult", "IslandTask", "run_portfolio", "run_portfolio_task",
           "run_island_task"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PortfolioMember:
    """One member's outcome."""

    searcher: str
    seed: int
    status: str  # ok | infeasible | error
    best_objective: float  # inf when the member found nothing
    cycles: float | None
    energy_pj: float | None
    edp: float | None
    n_evaluations: int
    wall_s: float | None
    worker: str | None
    error: str | None
    task_key: str
    cpu_s: float | None = None  # CPU seconds of the member's worker process (all rounds)


@dataclass(frozen=True, slots=True, kw_only=True)
class PortfolioResult:
    """The merged outcome of a portfolio.

    ``best`` is the `SearchResult` of the winning member (None when no member found a legal
    mapping); ``members`` lists every member in submission order; ``n_evaluations`` sums
    them; ``wall_s`` is the portfolio's wall time.
    """

    best: Any
    best_member: PortfolioMember | None
    members: tuple[PortfolioMember, ...]
    n_evaluations: int
    wall_s: float
    rounds: int = 1

    def table(self) -> str:
        """One line per member, the winner marked with ``*``."""
        rows = [f"  {'':1} {'searcher':<12}{'seed':>12}{'status':>12}{'objective':>14}{'evals':>10}{'wall s':>9}{'CPU s':>8}  worker"]
        for m in self.members:
            mark = "*" if self.best_member is not None and m.task_key == self.best_member.task_key else " "
            obj = f"{m.best_objective:.4g}" if math.isfinite(m.best_objective) else "-"
            wall = f"{m.wall_s:.1f}" if m.wall_s is not None else "-"
            cpu = f"{m.cpu_s:.1f}" if m.cpu_s is not None else "-"
            rows.append(f"  {mark} {m.searcher:<12}{m.seed:>12}{m.status:>12}{obj:>14}{m.n_evaluations:>10,}"
                        f"{wall:>9}{cpu:>8}  {m.worker or '-'}")
        return "\n".join(rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class IslandTask:
    """One member's search in one round of a portfolio with migration.

    ``elites`` are mappings (as in ``SearchResult.to_dict()["best"]["mapping"]``) found by
    any member in earlier rounds; the search starts from them.
    """

    task: SearchTask
    elites: tuple[dict[str, Any], ...] = field(default=(), hash=False)
    round: int = 0


def run_portfolio_task(task: SearchTask) -> dict[str, Any]:
    """One member: a search whose whole `SearchResult` comes back as a dict."""
    from accelmap.search.api import search

    result = search(task.problem, task.arch, **search_kwargs(task))
    raise_if_interrupted(result)
    return _member_payload(result)


def run_island_task(island: IslandTask) -> dict[str, Any]:
    """One member in one round: a search that starts from the elites of earlier rounds.

    The search is the one :func:`accelmap.search.api.search` runs (same space, cost model,
    searcher, objective, budget), with the elites encoded in the map space and handed to the
    search driver as warm-start points (they count in the round's budget). Elites that are
    not points of the space are skipped.
    """
    task = island.task
    if not island.elites:
        return run_portfolio_task(task)
    from accelmap._registry import build_costmodel, searchers
    from accelmap.search.api import build_space, load_constraints_any, ranking_model, report_with
    from accelmap.search.driver import Driver, DriverOptions
    from accelmap.search.objectives import parse_objective
    from accelmap.search.result import mapping_from_json

    constraints = load_constraints_any(task.constraints, task.arch, task.problem)
    space = build_space(task.problem, task.arch, constraints, allow_padding=task.allow_padding)
    rows = []
    for m in island.elites:
        try:
            rows.append(np.asarray(space.encode(mapping_from_json(m).as_batch()), dtype=np.int64))
        except (SpecError, KeyError, ValueError):  # not a point of this space
            continue
    report = build_costmodel(task.model, task.model_options)
    ranked = ranking_model(report)  # (as `search`: rank with it, report with the model itself)
    driver = Driver(
        task.problem, task.arch, space, ranked, searchers.get(task.searcher),
        objective=parse_objective(task.objective), seed=int(task.seed),
        options=DriverOptions(budget=task.budget, time_limit_s=task.time_limit_s, early_stop=task.early_stop),
        searcher_options=dict(task.searcher_options), model_name=task.model, searcher_name=task.searcher,
        config={"portfolio_round": island.round, "elites": len(rows), "allow_padding": task.allow_padding}
        | ({"ranked_with": report.ranking()} if hasattr(report, "ranking") else {}),
        initial=np.concatenate(rows) if rows else None,
    )
    result = report_with(driver.run(), task.problem, task.arch, report, ranked)
    raise_if_interrupted(result)
    return _member_payload(result)


def _member_payload(result: Any) -> dict[str, Any]:
    data = result.to_dict()
    best = data.get("best")
    out: dict[str, Any] = {"n_evaluations": data.get("n_evaluations"), "result": data}
    if not best:
        out["status"] = "infeasible"
        out["error"] = f"no legal mapping found in {data.get('n_evaluations', 0):,} evaluations"
    else:
        out.update(cycles=best["cycles"], energy_pj=best["energy_pj"], edp=best["edp"])
    return out


def run_portfolio(
    problem: Problem,
    arch: Arch,
    *,
    searchers: Sequence[str] = ("random",),
    seeds: int | Sequence[int] = 1,
    seed: int = 0,
    model: str = "loopnest",
    budget: int | None = None,
    objective: str = "edp",
    time_limit_s: float | None = None,
    constraints: Any = None,
    allow_padding: bool = False,
    early_stop: int | None = None,
    searcher_options: Mapping[str, Mapping[str, Any]] | None = None,
    model_options: Mapping[str, Any] | None = None,
    backend: str | Backend = "ray",
    workers: int | None = None,
    address: str | None = None,
    store: ResultStore | None = None,
    rounds: int = 1,
    n_elites: int = 2,
    task_fn: Any = None,
) -> PortfolioResult:
    """Run every (searcher, seed) pair as one task and keep the best.

    Parameters
    ----------
    problem, arch
        The layer and the accelerator (frozen specs, shipped to the workers).
    searchers
        Searcher plugin names; each runs once per seed.
    seeds
        A number of seeds spawned from ``SeedSequence(seed)``, or explicit seeds.
    seed
        The SeedSequence root when ``seeds`` is a number.
    model, budget, objective, time_limit_s, constraints, allow_padding, early_stop
        Passed to every member's `accelmap.search.api.search` (``constraints`` as a loaded
        `Constraints`, not file names: members may run on machines without the files).
    model_options
        Keyword arguments of the cost model's constructor; each member builds its model
        from the name and these (`accelmap._registry.build_costmodel`), checked here first.
    searcher_options
        ``{searcher name: {option: value}}``.
    backend
        ``"ray"`` (default; a local Ray unless ``address`` is given), ``"serial"``, or a
        backend object (left open).
    workers, address
        For the Ray backend: tasks in flight and the cluster to join.
    store
        Also commit every member (every round of it) to this results store.
    rounds
        1: members run independently. R > 1: each member's budget (default: the search
        default) is split into R rounds; every round after the first starts each member's
        search from the ``n_elites`` best mappings found so far by all members (each round
        with a fresh seed spawned from the member's seed).
    n_elites
        Mappings handed on between rounds.
    task_fn
        Replaces :func:`run_portfolio_task` (``rounds=1``; it gets a `SearchTask`) or
        :func:`run_island_task` (``rounds > 1``; it gets an `IslandTask`), for tests.

    Returns
    -------
    PortfolioResult
        ``best`` is a `SearchResult` rebuilt from the winning member (lowest scalar
        objective; ties go to the earlier member).

    Raises
    ------
    InfeasibleSpaceError
        When every member failed to find a legal mapping (the message lists why).
    """
    from accelmap._registry import did_you_mean
    from accelmap._registry import searchers as registry

    if not searchers:
        raise SpecError("portfolio: no searchers given; expected at least one searcher name")
    for name in searchers:
        if name not in registry.names():
            raise SpecError(f"portfolio: {did_you_mean(name, registry.names(), what='searcher')}")
    options = dict(searcher_options or {})
    unknown = sorted(set(options) - set(searchers))
    if unknown:
        raise SpecError(f"portfolio: searcher_options for {unknown}, which are not in searchers {list(searchers)}")
    for name, opts in options.items():
        _check_searcher_options(name, dict(opts), f"portfolio: searcher_options[{name!r}]")
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise SpecError(f"portfolio: seeds = {seeds}; expected an int >= 1 or a list of seeds")
        seed_list = spawn_seeds(seed, seeds)
    else:
        seed_list = tuple(int(s) for s in seeds)  # type: ignore[union-attr]
        if not seed_list:
            raise SpecError("portfolio: seeds is empty; expected at least one seed")
    m_opts = dict(model_options or {})
    if m_opts:
        from accelmap._registry import build_costmodel

        build_costmodel(model, m_opts, where="portfolio: model_options: ")
    tasks = [
        SearchTask(problem=problem, arch=arch, model=model, model_options=m_opts, searcher=name,
                   searcher_options=dict(options.get(name, {})), seed=s, budget=budget,
                   objective=objective, time_limit_s=time_limit_s, constraints=constraints,
                   allow_padding=allow_padding, early_stop=early_stop, seed_index=si, sweep="portfolio")
        for name in searchers for si, s in enumerate(seed_list)
    ]
    for key, value in (("rounds", rounds), ("n_elites", n_elites)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"portfolio: {key} = {value!r}; expected an int >= 1")
    if rounds > 1:
        from accelmap.search.api import DEFAULT_BUDGET

        per_round = max(1, math.ceil((budget or DEFAULT_BUDGET) / rounds))
        if budget is not None and budget < rounds:
            raise SpecError(f"portfolio: budget = {budget} cannot be split into {rounds} rounds")
    t0 = time.perf_counter()
    owned = isinstance(backend, str)
    runner: Backend = make_backend(backend, address=address, workers=workers) if isinstance(backend, str) else backend
    # Per member: its best (objective, outcome, task of that round), evaluations and wall time.
    best_of: list[tuple[float, dict[str, Any] | None, SearchTask]] = [(math.inf, None, t) for t in tasks]
    last: list[dict[str, Any]] = [{"status": "error", "payload": {}, "error": "not run"} for _ in tasks]
    evals = [0] * len(tasks)
    walls = [0.0] * len(tasks)
    cpus = [0.0] * len(tasks)
    elites: tuple[dict[str, Any], ...] = ()
    try:
        for r in range(rounds):
            if rounds == 1:
                round_tasks: list[Any] = list(tasks)
                fn = task_fn or run_portfolio_task
            else:
                round_tasks = [
                    IslandTask(task=dataclasses.replace(t, seed=_round_seed(t.seed, r), budget=per_round,
                                                        sweep=f"portfolio-round{r}"),
                               elites=elites, round=r)
                    for t in tasks
                ]
                fn = task_fn or run_island_task
            found: list[tuple[float, str, dict[str, Any]]] = []
            for i, outcome in runner.run(fn, round_tasks):
                task_i = round_tasks[i].task if rounds > 1 else round_tasks[i]
                if store is not None:
                    store.commit(result_row(task_i, {**outcome, "payload": _store_payload(outcome)}))
                p = outcome.get("payload") or {}
                last[i] = outcome
                evals[i] += int(p.get("n_evaluations") or 0)
                walls[i] += float(outcome.get("wall_s") or 0.0)
                cpus[i] += float(outcome.get("cpu_s") or 0.0)
                data = p.get("result")
                best = data.get("best") if isinstance(data, dict) else None
                obj = _objective(best) if outcome["status"] == "ok" else math.inf
                if obj < best_of[i][0]:
                    best_of[i] = (obj, outcome, task_i)
                if math.isfinite(obj) and isinstance(best, dict) and best.get("mapping") is not None:
                    found.append((obj, json.dumps(best["mapping"], sort_keys=True), best["mapping"]))
            # The elites: the best distinct mappings so far, over every member and round.
            pool = {text: (obj, m) for obj, text, m in found}
            for m in elites:
                pool.setdefault(json.dumps(m, sort_keys=True), (_elite_objective(m, best_of), m))
            elites = tuple(m for _, m in sorted(pool.values(), key=lambda om: om[0])[:n_elites])
    finally:
        if owned:
            runner.close()
    members = []
    for i, task in enumerate(tasks):
        obj, o_best, t_best = best_of[i]
        o = o_best if o_best is not None else last[i]
        p = o.get("payload") or {}
        members.append(PortfolioMember(
            searcher=task.searcher, seed=task.seed, status=o["status"], best_objective=obj,
            cycles=p.get("cycles"), energy_pj=p.get("energy_pj"), edp=p.get("edp"),
            n_evaluations=evals[i], wall_s=walls[i] if walls[i] else o.get("wall_s"),
            worker=o.get("worker"), error=o.get("error"), task_key=t_best.key,
            cpu_s=cpus[i] if cpus[i] else o.get("cpu_s"),
        ))
    finite = [(m.best_objective, i) for i, m in enumerate(members) if math.isfinite(m.best_objective)]
    wall = time.perf_counter() - t0
    n_evals = sum(m.n_evaluations for m in members)
    if not finite:
        why = "; ".join(f"{m.searcher} seed {m.seed}: {m.status}: {(m.error or '').splitlines()[0] if m.error else '-'}"
                        for m in members)
        raise InfeasibleSpaceError(
            f"portfolio on {problem.name} / {arch.name}: no member found a legal mapping ({why})"
        )
    _, win = min(finite)
    winner = best_of[win][1]
    assert winner is not None  # a finite objective comes with its outcome
    best_result = _search_result(winner["payload"]["result"])
    return PortfolioResult(best=best_result, best_member=members[win], members=tuple(members),
                           n_evaluations=n_evals, wall_s=wall, rounds=rounds)


def _round_seed(seed: int, r: int) -> int:
    """Round 0 keeps the member's seed; later rounds get seeds spawned from it."""
    if r == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), r]).generate_state(1, dtype=np.uint32)[0])


def _elite_objective(mapping: dict[str, Any], best_of: list[tuple[float, Any, Any]]) -> float:
    """Objective of an earlier elite: that of the member best it came from (else inf)."""
    text = json.dumps(mapping, sort_keys=True)
    for obj, outcome, _ in best_of:
        if outcome is None:
            continue
        data = (outcome.get("payload") or {}).get("result")
        best = data.get("best") if isinstance(data, dict) else None
        if isinstance(best, dict) and json.dumps(best.get("mapping"), sort_keys=True) == text:
            return obj
    return math.inf


def _objective(best: Any) -> float:
    if not isinstance(best, dict):
        return math.inf
    v = best.get("objective", best.get("edp"))
    if v is None:
        return math.inf
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.inf


def _search_result(data: dict[str, Any]) -> Any:
    try:
        from accelmap.search.result import SearchResult
    except ImportError:  # pragma: no cover - search always ships with parallel
        return data
    return SearchResult.from_dict(data) if "format_version" in data else data


def _store_payload(outcome: dict[str, Any]) -> dict[str, Any]:
    """A portfolio member as a store payload: mapping and metrics in their own columns."""
    p = dict(outcome.get("payload") or {})
    data = p.get("result")
    if isinstance(data, dict) and isinstance(data.get("best"), dict):
        best = data["best"]
        p["mapping"] = best.get("mapping")
        p["metrics"] = best.get("metrics")
        p["result"] = {**data, "best": {k: v for k, v in best.items() if k not in ("mapping", "metrics")}}
    return p
