"""A portfolio: several searchers and seeds on one layer at once, the best merged.

Each member (one searcher, one seed) is one task on the backend: a whole search, with the
frozen `Problem` and `Arch`, plugin names and a seed spawned from one
`numpy.random.SeedSequence`. Members run independently (islands without migration); the
portfolio's result is the member whose best scalar objective is lowest, plus a table of
every member.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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

__all__ = ["PortfolioMember", "PortfolioResult", "run_portfolio", "run_portfolio_task"]


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

    def table(self) -> str:
        """One line per member, the winner marked with ``*``."""
        rows = [f"  {'':1} {'searcher':<12}{'seed':>12}{'status':>12}{'objective':>14}{'evals':>10}{'wall s':>9}  worker"]
        for m in self.members:
            mark = "*" if self.best_member is not None and m.task_key == self.best_member.task_key else " "
            obj = f"{m.best_objective:.4g}" if math.isfinite(m.best_objective) else "-"
            wall = f"{m.wall_s:.1f}" if m.wall_s is not None else "-"
            rows.append(f"  {mark} {m.searcher:<12}{m.seed:>12}{m.status:>12}{obj:>14}{m.n_evaluations:>10,}"
                        f"{wall:>9}  {m.worker or '-'}")
        return "\n".join(rows)


def run_portfolio_task(task: SearchTask) -> dict[str, Any]:
    """One member: a search whose whole `SearchResult` comes back as a dict."""
    from accelmap.search.api import search

    result = search(task.problem, task.arch, **search_kwargs(task))
    raise_if_interrupted(result)
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
    backend: str | Backend = "ray",
    workers: int | None = None,
    address: str | None = None,
    store: ResultStore | None = None,
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
    searcher_options
        ``{searcher name: {option: value}}``.
    backend
        ``"ray"`` (default; a local Ray unless ``address`` is given), ``"serial"``, or a
        backend object (left open).
    workers, address
        For the Ray backend: tasks in flight and the cluster to join.
    store
        Also commit every member to this results store.
    task_fn
        Replaces :func:`run_portfolio_task` (tests).

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
    tasks = [
        SearchTask(problem=problem, arch=arch, model=model, searcher=name,
                   searcher_options=dict(options.get(name, {})), seed=s, budget=budget,
                   objective=objective, time_limit_s=time_limit_s, constraints=constraints,
                   allow_padding=allow_padding, early_stop=early_stop, seed_index=si, sweep="portfolio")
        for name in searchers for si, s in enumerate(seed_list)
    ]
    t0 = time.perf_counter()
    owned = isinstance(backend, str)
    runner: Backend = make_backend(backend, address=address, workers=workers) if isinstance(backend, str) else backend
    outcomes: dict[int, dict[str, Any]] = {}
    try:
        for i, outcome in runner.run(task_fn or run_portfolio_task, tasks):
            outcomes[i] = outcome
            if store is not None:
                store.commit(result_row(tasks[i], {**outcome, "payload": _store_payload(outcome)}))
    finally:
        if owned:
            runner.close()
    members = []
    for i, task in enumerate(tasks):
        o = outcomes.get(i, {"status": "error", "payload": {}, "error": "not run"})
        p = o.get("payload") or {}
        data = p.get("result") or {}
        best = data.get("best") if isinstance(data, dict) else None
        obj = _objective(best)
        members.append(PortfolioMember(
            searcher=task.searcher, seed=task.seed, status=o["status"],
            best_objective=obj if o["status"] == "ok" else math.inf,
            cycles=p.get("cycles"), energy_pj=p.get("energy_pj"), edp=p.get("edp"),
            n_evaluations=int(p.get("n_evaluations") or 0), wall_s=o.get("wall_s"),
            worker=o.get("worker"), error=o.get("error"), task_key=task.key,
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
    best_result = _search_result(outcomes[win]["payload"]["result"])
    return PortfolioResult(best=best_result, best_member=members[win], members=tuple(members),
                           n_evaluations=n_evals, wall_s=wall)


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
