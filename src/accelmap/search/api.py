"""The Python API of search: :func:`search` (one layer) and :func:`search_network`.

Both mirror ``accelmap search`` and return the same results. ``accelmap.search`` is both
this subpackage and, because the package module is callable, this function::

    >>> import accelmap
    >>> result = accelmap.search("resnet50/conv3_1", "eyeriss-like", budget=2000)  # doctest: +SKIP
    >>> result.edp  # doctest: +SKIP

Around the driver, `search` resolves its arguments, ranks with `ranking_model` and reports
with `report_with`, and gathers starting points (dataflow presets, a model's sub-spaces, the
aspect model's legal draws from `accelmap.search._aspect_starts`); ``device="cuda"`` hands
the search to `accelmap.search.gpu`. `search_network` groups a network's layers by shape
and searches each once, under one total time for the exact searcher (`_exact_network`).
The argument helpers (`build_space`, `load_constraints_any`, `refuse_padding`) are defined
in `accelmap.search._inputs` and importable from here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from accelmap._registry import costmodels, searchers
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.search._inputs import _arch, _problem, build_space, load_constraints_any, refuse_padding
from accelmap.search.base import Cap
from accelmap.search.driver import Driver, DriverOptions
from accelmap.search.objectives import ObjectiveSpec, parse_objective
from accelmap.search.result import SearchResult, versions

__all__ = ["search", "search_network", "NetworkResult", "DEFAULT_SEARCHER", "DEFAULT_BUDGET",
           "NETWORK_DEFAULT_BUDGET",
           "load_constraints_any", "build_space", "ranking_model", "report_with"]

# Chosen on benchmarks/bench_search.py (docs/search.md, "Which searcher"): many-chain
# annealing after a random warm-up reaches the best EDP of every searcher soonest.
DEFAULT_SEARCHER = "anneal"
DEFAULT_BUDGET = 1_000_000  # one layer: three 200k annealing runs and a 400k bypass-pattern sweep, 4-8 CPU s
NETWORK_DEFAULT_BUDGET = 150_000  # per distinct layer of a network search (ResNet-50: ~19-25 CPU s)
NETWORK_EXACT_TIME_S = 60.0  # per distinct layer of an exact network search without --time or --budget
#: an exact network search under one total time (``network_time_s``, `_exact_network`): the
#: share of it the layers' warm starts take (in equal parts), and the share of the rest given
#: by each layer's part of the network's gap (the other part: in equal parts)
NETWORK_EXACT_WARM_SHARE = 0.2
NETWORK_EXACT_GAP_SHARE = 0.5
#: the warm start's evaluations per layer there: one whole annealing run
#: (`AnnealSearcher.RUN_EVALUATIONS`); a larger budget cut short by the time limit stops
#: its runs before they cool (conv1 on eyeriss-like: 8.0e14 after 254,624 of 1M
#: evaluations, against 4.6e14 from the default search)
NETWORK_EXACT_WARM_BUDGET = 200_000
#: the least time worth a second branch and bound of a layer left open (`_exact_network_again`)
NETWORK_EXACT_AGAIN_MIN_S = 1.0


def _lower_bound(space: Any, model_name: str = "", objective: ObjectiveSpec | None = None
                 ) -> tuple[dict[str, float] | None, str]:
    """The tightest cheap lower bound of the space and what produced it.

    On the loopnest model: the exact mapper's root bound (`accelmap.search.exact.root_bound`,
    proven for every mapping of the space, a fraction of a second). Otherwise compulsory
    traffic at full utilization (`MapSpace.lower_bounds`).
    """
    if model_name == "loopnest" and objective is not None and not objective.is_pareto and hasattr(space, "_tables"):
        from accelmap.search.exact import root_bound

        rb = root_bound(space, objective)
        if rb is not None:
            return rb, "loopnest-root"
    fn = getattr(space, "lower_bounds", None)
    if fn is None:
        return None, "none"
    lb = fn()
    cycles = float(getattr(lb, "min_compute_cycles", math.nan))
    energy = float(getattr(lb, "min_energy_pj", math.nan))
    return {"cycles": cycles, "energy_pj": energy, "edp": cycles * energy}, "compulsory"


def _model(model: Any) -> tuple[Any, str]:
    if isinstance(model, str):
        return costmodels.get(model)(), model
    return model, getattr(model, "name", type(model).__name__)


def ranking_model(model: Any) -> Any:
    """The model a search's inner loop ranks mappings with: ``model.for_search()`` where the
    model has that hook (the systolic model: its estimate beyond the walk limits unless
    ``search_sample_entries`` says otherwise), else the model itself. What the search
    reports is re-evaluated with ``model`` (`report_with`)."""
    hook = getattr(model, "for_search", None)
    return model if hook is None else hook()


def report_with(result: SearchResult, problem: Any, arch: Any, model: Any, ranked: Any) -> SearchResult:
    """``result`` (found by ranking with ``ranked``) with what it reports evaluated by
    ``model``: the best mapping's metrics and objective, and each Pareto point's energy,
    cycles and EDP (the points and their order stay those the ranking found). The ranked
    objective of the best goes to ``config["ranked_best_objective"]``; the history keeps
    the ranked values. ``result`` itself when ``ranked`` is ``model``."""
    if ranked is model or (result.best is None and not result.pareto):
        return result
    import numpy as np

    from accelmap.mapper.mapping import MappingBatch
    from accelmap.search.result import mapping_from_json

    changes: dict[str, Any] = {}
    config = dict(result.config)
    if result.best is not None:
        m = model.evaluate(problem, arch, result.best.as_batch())
        changes["best_metrics"] = m.row(0)
        changes["best_objective"] = float(result.objective.scalar(m.energy_pj, m.cycles, m.valid)[0])
        config["ranked_best_objective"] = float(result.best_objective)
    if result.pareto:
        batch = MappingBatch.from_mappings([mapping_from_json(p["mapping"]) for p in result.pareto])
        m = model.evaluate(problem, arch, batch)
        edp = np.asarray(m.energy_pj, dtype=np.float64) * np.asarray(m.cycles, dtype=np.float64)
        changes["pareto"] = tuple(p | {"energy_pj": float(m.energy_pj[i]), "cycles": float(m.cycles[i]),
                                       "edp": float(edp[i])} for i, p in enumerate(result.pareto))
    changes["config"] = config
    return dataclasses.replace(result, **changes)


def search(problem: Any, arch: Any, *, model: Any = "loopnest", searcher: str = DEFAULT_SEARCHER,
           budget: int | None = None, time_limit_s: float | None = None,
           objective: str | ObjectiveSpec = "edp", seed: int = 0, constraints: Any = None,
           early_stop: int | None = None, progress: bool = False, checkpoint: str | Path | None = None,
           searcher_options: dict[str, Any] | None = None, allow_padding: bool = False,
           batch_size: int | None = None, checkpoint_every_s: float = 10.0,
           energy: str | Path | None = None, space: Any = None,
           warm_start: str | None = None, initial: Any = None, device: str | None = None) -> SearchResult:
    """Find the best mapping of one layer on one accelerator.

    Parameters
    ----------
    problem
        A `Problem`, a zoo name (``"resnet50/conv3_1"``) or a problem file.
    arch
        An `Arch`, a preset name (``"eyeriss-like"``) or an arch file (accelmap or
        Timeloop format; ``energy`` names the Timeloop ERT where needed).
    model
        Cost model name (``"loopnest"``, ``"systolic"``, ``"aspect"``) or instance. A model
        with a ``for_search`` hook (the systolic model) is ranked with what that returns
        and the result (best metrics and objective, Pareto front) re-evaluated with the
        model itself (`report_with`; ``config["ranked_with"]`` says what ranked).
    searcher
        ``"anneal"`` (default), ``"genetic"``, ``"optuna"``, ``"random"``, ``"exhaustive"`` or
        ``"exact"`` (branch and bound on the loopnest model: the result says whether it is
        ``proven_optimal`` and carries the certified bound; `accelmap.search.exact`), or any
        name registered under ``accelmap.searchers``.
    budget
        Evaluations (mappings scored). None: ``DEFAULT_BUDGET`` (1,000,000) when no time limit is given (the
        whole space for ``exhaustive``, until proven for ``exact``), unlimited when ``time_limit_s`` is given.
    time_limit_s
        Wall-clock limit in seconds.
    objective
        ``"edp"``, ``"energy"``, ``"cycles"``, ``"energy^a*cycles^b"`` or ``"energy,cycles"``
        (Pareto; the result carries the front).
    seed
        Root seed; the same seed gives the same result (budget-limited runs).
    constraints
        None, a `Constraints`, or one or more constraint files (accelmap or Timeloop).
    early_stop
        Stop after this many evaluations without improvement.
    progress
        Show a progress bar on stderr.
    checkpoint
        A file to write the search state to every ``checkpoint_every_s`` seconds; when it
        exists, the search resumes from it.
    searcher_options
        Keyword options of the searcher (see docs/search.md); unknown ones raise TypeError.
    allow_padding
        Imperfect factorization (ceil-divided tiles).
    batch_size
        Points per batch (None = the searcher's preference).
    space
        A prebuilt `MapSpace` (then ``constraints`` and ``allow_padding`` are ignored).
    device
        ``"cpu"`` or ``"cuda"``: the ``random`` and ``anneal`` searchers on the ``loopnest``
        model with sampling or moves, legality and evaluation on a GPU, and ``exhaustive``
        (the CPU searcher's points, constraints and ``max_size`` refusal, enumerated and
        evaluated on the device) (`accelmap.search.gpu`; needs numba-cuda and a GPU,
        ``pip install "accelmap[cuda]"``). None: the environment
        variable ``ACCELMAP_DEVICE`` (set by ``accelmap sweep --device``), else ``"cpu"``.
    warm_start
        ``"dataflows"``: first search the layer under each dataflow preset
        (`accelmap.mapper.constraints.DATAFLOWS`: weight-, output-, input- and
        row-stationary, where they apply) with ``anneal`` for 5% of the budget each, and
        hand the best mappings to the searcher as starting points; None: no warm start.
    initial
        (k, n_params) encoded starting points in ``space`` (scored first, counted in the
        budget); only with ``space``.

    Returns
    -------
    SearchResult

    Raises
    ------
    InfeasibleSpaceError
        When no legal mapping was found (with a histogram of why).
    SpaceTooLargeError
        For ``exhaustive`` on a space above its size limit.
    """
    prob = _problem(problem)
    arc = _arch(arch, energy)
    obj = parse_objective(objective)
    if device is None:
        import os

        device = os.environ.get("ACCELMAP_DEVICE", "").strip().lower() or "cpu"
    if device != "cpu":  # the inner loop on a GPU
        from accelmap.search.gpu import check_device, device_search

        check_device(device)
        return device_search(prob, arc, model_name=model if isinstance(model, str) else getattr(model, "name", ""),
                             searcher=searcher, objective=obj,
                             # (exhaustive: no budget = the whole space, as on the CPU)
                             budget=DEFAULT_BUDGET if budget is None and time_limit_s is None
                             and searcher != "exhaustive" else budget,
                             time_limit_s=time_limit_s, seed=seed,
                             unsupported={"constraints": constraints, "allow_padding": allow_padding, "space": space,
                                          "checkpoint": checkpoint, "warm_start": warm_start,
                                          "early_stop": early_stop, "searcher_options": searcher_options})
    if not isinstance(searcher, str):
        raise SpecError(f"searcher = {searcher!r}; expected a registered name such as 'anneal'")
    searcher_cls = searchers.get(searcher)
    report, model_name = _model(model)
    cost = ranking_model(report)  # what the inner loop ranks with; `report` scores what is returned
    if allow_padding and space is None:
        refuse_padding(cost, model_name)
    cons = load_constraints_any(constraints, arc, prob) if space is None else None
    ms = space if space is not None else build_space(prob, arc, cons, allow_padding=allow_padding)
    if budget is None and time_limit_s is None:
        budget = DEFAULT_BUDGET if getattr(searcher_cls, "default_budget", DEFAULT_BUDGET) else None
    opts = dict(searcher_options or {})
    options = DriverOptions(budget=budget, time_limit_s=time_limit_s, early_stop=early_stop,
                            batch_size=batch_size, progress=progress,
                            checkpoint=Path(checkpoint) if checkpoint is not None else None,
                            checkpoint_every_s=checkpoint_every_s)
    extra: dict[str, Any] = {"constraints": _describe_constraints(constraints), "allow_padding": allow_padding,
                             "warm_start": warm_start}
    if hasattr(report, "ranking"):  # (the systolic model: what the search ranked with)
        extra["ranked_with"] = report.ranking()
    if initial is not None and space is None:
        raise SpecError("initial points are encoded in a map space: pass the space too")
    if warm_start not in (None, "dataflows"):
        raise SpecError(f"warm_start = {warm_start!r}; expected 'dataflows' or None")
    n_pre = 0
    aspect_why = ""
    resuming = checkpoint is not None and Path(checkpoint).exists()
    if space is None and model_name == "aspect":  # the space the directive form expresses, legal starts
        initial, n_pre, ms, aspect_why = _aspect_starts(
            prob, arc, cons, allow_padding, seed, budget, obj,
            draw=initial is None and not resuming and warm_start is None)
    variants = getattr(cost, "search_variants", None)  # e.g. systolic: one sub-space per dataflow
    if variants is not None and space is None and checkpoint is None:
        import time

        t_plan = time.perf_counter()
        plan = _variant_seeds(prob, arc, variants(prob, arc), cost, obj, seed, budget, time_limit_s, cons,
                              allow_padding)
        if plan is not None:
            ms, initial, n_pre, extra["warm_start_runs"] = plan
            extra["variant"] = extra["warm_start_runs"][-1]["chosen"]
            if time_limit_s is not None:  # the sub-space runs count against the time limit
                left_s = max(time_limit_s - (time.perf_counter() - t_plan), 1e-3)
                options = dataclasses.replace(options, time_limit_s=left_s)
    if warm_start is not None and not resuming and initial is None:
        per = max(1000, int(0.05 * budget)) if budget is not None else 10_000
        initial, n_pre, info = _dataflow_seeds(prob, arc, ms, cost, obj, seed, per, cons, allow_padding)
        extra["warm_start_runs"] = info
    if Cap.SOLVER in getattr(searcher_cls, "capabilities", frozenset()):
        if checkpoint is not None or warm_start is not None or early_stop is not None:
            raise SpecError(f"searcher {searcher} runs to a proof or a limit: it takes no checkpoint, warm_start "
                            "or early_stop (give a time limit or a budget instead)")
        solved = cast(Any, searcher_cls).run(problem=prob, arch=arc, space=ms, model=cost, model_name=model_name,
                                             objective=obj, seed=seed, budget=budget, time_limit_s=time_limit_s,
                                             options=opts, progress=progress, config=extra, initial=initial)
        return report_with(solved, prob, arc, report, cost)
    bound, kind = _lower_bound(ms, model_name, obj)
    driver = Driver(prob, arc, ms, cost, searcher_cls, objective=obj, seed=seed, options=options,
                    searcher_options=opts, model_name=model_name, searcher_name=searcher,
                    config=extra, lower_bound=bound, initial=initial, initial_evaluations=n_pre)
    try:
        result = driver.run()
    except InfeasibleSpaceError as exc:
        if aspect_why:
            raise InfeasibleSpaceError(f"{exc} Before the search, {aspect_why}") from None
        raise
    result = report_with(result, prob, arc, report, cost)
    return dataclasses.replace(result, bound_kind=kind) if bound is not None else result


def _dataflow_seeds(problem: Any, arch: Any, space: Any, model: Any, objective: ObjectiveSpec, seed: int,
                    budget: int, constraints: Any, allow_padding: bool) -> tuple[Any, int, list[dict[str, Any]]]:
    """Best mapping under each applicable dataflow preset, encoded in ``space``."""
    import numpy as np

    from accelmap.errors import InfeasibleSpaceError
    from accelmap.mapper.constraints import DATAFLOWS, dataflow

    anneal = searchers.get("anneal")
    rows: list[Any] = []
    info: list[dict[str, Any]] = []
    spent = 0
    for i, name in enumerate(DATAFLOWS):
        try:
            df = dataflow(name, arch)
            sub = build_space(problem, arch, df if constraints is None else df.override(constraints),
                              allow_padding=allow_padding)
            sub_seed = int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
            r = Driver(problem, arch, sub, model, anneal, objective=objective, seed=sub_seed,
                       options=DriverOptions(budget=budget)).run()
        except (SpecError, InfeasibleSpaceError) as exc:  # the dataflow does not apply here
            info.append({"dataflow": name, "skipped": str(exc)[:200]})
            continue
        spent += r.n_evaluations
        if r.best is None:
            continue
        try:
            x = space.encode(r.best.as_batch())
        except SpecError as exc:  # not a point of the main space (user constraints)
            info.append({"dataflow": name, "evaluations": r.n_evaluations, "skipped": str(exc)[:200]})
            continue
        rows.append(np.asarray(x, dtype=np.int64))
        info.append({"dataflow": name, "evaluations": r.n_evaluations, "edp": r.edp, "objective": r.best_objective})
    return (np.concatenate(rows) if rows else None), spent, info


def _aspect_starts(prob: Any, arc: Any, cons: Any, allow_padding: bool, seed: int, budget: int | None,
                   obj: Any, *, draw: bool) -> tuple[Any, int, Any, str]:
    """The aspect model's map space (`aspect_constraints` under the user's ``cons``: filter
    dims whole in a cluster, which is all its directive form expresses) and, with ``draw``,
    legal starting points: uniform draws are rarely legal for the model (MAESTRO's
    double-buffered capacities), so a search from them alone may end with none
    (`accelmap.search._aspect_starts.legal_starts`). Returns ``(initial, evaluations, space, why)``,
    ``why`` saying why no draw was legal ("" when one was)."""
    import numpy as np

    from accelmap.search._aspect_starts import aspect_space, legal_starts

    if not draw:
        return None, 0, aspect_space(prob, arc, cons, allow_padding=allow_padding), ""
    n_draw = max(4, min(256, (budget if budget is not None else 5_120) // 20))
    space, starts, n, why, _ = legal_starts(prob, arc, cons, allow_padding=allow_padding, n_draw=n_draw,
                                            rng=np.random.default_rng([seed, 0xA5]), objective=obj)
    if space is None:
        raise InfeasibleSpaceError(f"{getattr(prob, 'name', 'the problem')} on {getattr(arc, 'name', 'the arch')} "
                                   f"with the aspect model: {why}")
    return starts, n, space, why


def _variant_seeds(problem: Any, arch: Any, variants: list[Any], model: Any, objective: ObjectiveSpec, seed: int,
                   budget: int | None, time_limit_s: float | None, constraints: Any,
                   allow_padding: bool) -> tuple[Any, Any, int, list[dict[str, Any]]] | None:
    """Search each sub-space a cost model names (``search_variants``), keep the best one.

    Each variant (label, constraints, seed mappings) gets ``anneal`` over its sub-space
    (its constraints under the user's), started from its seeds, for half the budget split
    evenly (and half the time limit, split the same way). Returns the best variant's space, its best
    mapping plus its seeds (encoded there) as starting points, the evaluations spent and
    a per-variant record; None when no variant applies.
    """
    import numpy as np

    from accelmap.errors import InfeasibleSpaceError

    if not variants:
        return None
    anneal = searchers.get("anneal")
    per = max(50, budget // (2 * len(variants))) if budget is not None else 10_000
    per_s = None if time_limit_s is None else time_limit_s / (2 * len(variants))
    info: list[dict[str, Any]] = []
    best: tuple[float, Any, Any, str] | None = None
    spent = 0
    for i, (label, cons, seeds) in enumerate(variants):
        try:
            sub = build_space(problem, arch, cons if constraints is None else cons.override(constraints),
                              allow_padding=allow_padding)
            try:
                x0 = sub.encode(seeds)
            except SpecError:  # the user's constraints exclude the seeds
                x0 = None
            sub_seed = int(np.random.SeedSequence([seed, 100 + i]).generate_state(1)[0])
            r = Driver(problem, arch, sub, model, anneal, objective=objective, seed=sub_seed,
                       options=DriverOptions(budget=per, time_limit_s=per_s), initial=x0).run()
        except (SpecError, InfeasibleSpaceError) as exc:  # the variant does not apply here
            info.append({"variant": label, "skipped": str(exc)[:200]})
            continue
        spent += r.n_evaluations
        info.append({"variant": label, "evaluations": r.n_evaluations, "objective": r.best_objective,
                     "cycles": r.best_metrics["cycles"] if r.best_metrics else None})
        if r.best is not None and (best is None or r.best_objective < best[0]):
            xb = sub.encode(r.best.as_batch())
            best = (r.best_objective, sub, xb if x0 is None else np.concatenate([xb, x0]), label)
    if best is None:
        return None
    info.append({"chosen": best[3]})
    return best[1], best[2], spent, info


def _describe_constraints(spec: Any) -> Any:
    if spec is None:
        return None
    if isinstance(spec, (str, Path)):
        return [str(spec)]
    if isinstance(spec, Sequence):
        return [str(s) if isinstance(s, (str, Path)) else getattr(s, "source", "") or repr(s) for s in spec]
    return getattr(spec, "source", "") or repr(spec)


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkResult:
    """Per-layer results of a whole network and its totals.

    ``layers`` holds one `SearchResult` per distinct layer shape; ``repeats[i]`` is how
    often that shape occurs in the network. Totals weight each layer by its repeat:
    ``cycles`` and ``energy_pj`` are sums (layers run one after another), ``edp`` is
    their product.
    """

    network: str
    arch: str
    layers: tuple[SearchResult, ...]
    repeats: tuple[int, ...]
    names: tuple[tuple[str, ...], ...] = ()  # layer names that share each searched shape
    n_distinct: int = 0  # distinct layer shapes in the network (> len(layers) if interrupted)
    elapsed_s: float = 0.0
    config: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=versions)

    @property
    def complete(self) -> bool:
        """False when the search was interrupted before every distinct layer was searched."""
        return len(self.layers) >= self.n_distinct

    @property
    def cycles(self) -> float:
        return float(sum(r.cycles * k for r, k in zip(self.layers, self.repeats, strict=False)))

    @property
    def energy_pj(self) -> float:
        return float(sum(r.energy_pj * k for r, k in zip(self.layers, self.repeats, strict=False)))

    @property
    def edp(self) -> float:
        return self.cycles * self.energy_pj

    @property
    def n_proven(self) -> int:
        """Distinct layers whose mapping an exact search proved optimal."""
        return sum(1 for r in self.layers if r.proven_optimal)

    def certified_gap(self) -> float | None:
        """The gap of the layer objectives summed over the network (each layer weighted by its
        repeat): sum(best) / sum(certified lower bound) - 1; 0 when every layer is proven,
        None when a layer has no bound. Each layer is searched for its own objective, so this
        is the gap of what the network search minimises."""
        best = lbs = 0.0
        for r, k in zip(self.layers, self.repeats, strict=False):
            lb = r.objective_lower_bound() if not r.proven_optimal else r.best_objective
            if lb is None or not math.isfinite(r.best_objective):
                return None
            best += k * r.best_objective
            lbs += k * lb
        if not lbs > 0:
            return None
        return max(best / lbs - 1.0, 0.0)

    def table(self) -> str:
        """A per-layer table with network totals."""
        head = f"{'layer':<28}{'x':>4}{'cycles':>16}{'energy pJ':>18}{'EDP':>13}{'gap EDP':>9}{'evals':>9}{'s':>7}"
        rows = [head, "-" * len(head)]
        for r, k, names in zip(self.layers, self.repeats, self.names or [()] * len(self.layers), strict=False):
            gap = r.gap() or {}
            g = f"{gap['edp']:.2f}" if "edp" in gap else "-"
            label = r.problem if len(names) <= 1 else f"{r.problem} (+{len(names) - 1})"
            rows.append(f"{label[:27]:<28}{k:>4}{r.cycles:>16,.0f}{r.energy_pj:>18,.1f}{r.edp:>13.4g}"
                        f"{g:>9}{r.n_evaluations:>9,}{r.elapsed_s:>7.1f}")
        rows.append("-" * len(head))
        rows.append(f"{'total (x repeat)':<28}{sum(self.repeats):>4}{self.cycles:>16,.0f}{self.energy_pj:>18,.1f}"
                    f"{self.edp:>13.4g}{'':>9}{sum(r.n_evaluations for r in self.layers):>9,}{self.elapsed_s:>7.1f}")
        if any(r.bound_kind == "exact" for r in self.layers):
            cg = self.certified_gap()
            rows.append(f"proven optimal: {self.n_proven} of {len(self.layers)} distinct layers; certified gap of the "
                        f"summed layer objectives: {'-' if cg is None else f'{cg:.2%}'}")
        return "\n".join(rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "network": self.network, "arch": self.arch,
            "totals": {"cycles": self.cycles, "energy_pj": self.energy_pj, "edp": self.edp,
                       "layers": sum(self.repeats), "distinct_layers": self.n_distinct or len(self.layers),
                       "searched_layers": len(self.layers),
                       "complete": self.complete, "proven_layers": self.n_proven,
                       "certified_gap": self.certified_gap()},
            "layers": [dict(r.to_dict(), repeat=k, names=list(n))
                       for r, k, n in zip(self.layers, self.repeats, self.names or [()] * len(self.layers), strict=False)],
            "elapsed_s": self.elapsed_s, "config": self.config, "versions": dict(self.versions),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> NetworkResult:
        return NetworkResult(
            network=d["network"], arch=d["arch"],
            layers=tuple(SearchResult.from_dict(x) for x in d["layers"]),
            repeats=tuple(int(x.get("repeat", 1)) for x in d["layers"]),
            names=tuple(tuple(x.get("names", ())) for x in d["layers"]),
            n_distinct=int(d.get("totals", {}).get("distinct_layers", len(d["layers"]))),
            elapsed_s=float(d.get("elapsed_s", 0.0)), config=dict(d.get("config", {})),
            versions=dict(d.get("versions", {})),
        )

    def save(self, path: str | Path) -> Path:
        import json

        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return p


def _exact_network(firsts: list[Any], arc: Any, repeats: list[int], total_s: float, on_layer: Any,
                   kwargs: dict[str, Any]) -> list[SearchResult]:
    """Exact searches of the distinct layers ``firsts`` sharing ``total_s`` seconds.

    First every layer gets a warm start: ``anneal`` for at most ``warm_budget`` evaluations
    (``searcher_options``, default ``NETWORK_EXACT_WARM_BUDGET``, 200,000) and at most
    ``NETWORK_EXACT_WARM_SHARE * total_s / n`` seconds, whose result carries the layer's root
    bound. Then each layer gets one branch and bound from its warm start's best mapping, the
    layers in increasing order of ``w_i = repeat_i (best_i - bound_i)`` (the layer's part of
    the gap of the summed objectives, `NetworkResult.certified_gap`): layer ``i`` gets the
    time left times ``(1 - f) / m + f w_i / W`` (``f = NETWORK_EXACT_GAP_SHARE``, ``m`` the
    layers and ``W`` their weights still to run), so every layer has a part and the large
    gaps more, and what a layer proven early leaves goes to the later ones. Each layer's
    result is the exact search's, with the warm start's evaluations added and
    ``certificate["runs"]`` listing both runs."""
    import time

    import numpy as np

    t0 = time.perf_counter()
    kw = dict(kwargs)
    kw.pop("searcher", None)
    kw.pop("budget", None)
    opts = dict(kw.pop("searcher_options", None) or {})
    warm_budget = opts.get("warm_budget", NETWORK_EXACT_WARM_BUDGET)
    constraints = kw.pop("constraints", None)
    allow_padding = kw.pop("allow_padding", False)
    n = len(firsts)
    spaces = [build_space(p, arc, load_constraints_any(constraints, arc, p), allow_padding=allow_padding)
              for p in firsts]
    warm_s = NETWORK_EXACT_WARM_SHARE * total_s / n
    warm: list[Any] = [None] * n
    weight = [0.0] * n
    for i, p in enumerate(firsts):
        if not warm_budget:
            break
        t_run = time.perf_counter()
        try:
            warm[i] = search(p, arc, space=spaces[i], searcher="anneal", budget=warm_budget, time_limit_s=warm_s,
                             constraints=constraints, allow_padding=allow_padding, **kw)
        except InfeasibleSpaceError:  # no legal mapping sampled: the exact search decides
            warm[i] = None
        if warm[i] is not None:
            if warm[i].stop_reason == "interrupted":
                raise KeyboardInterrupt
            lb = warm[i].objective_lower_bound()
            weight[i] = repeats[i] * (warm[i].best_objective - (lb if lb is not None and lb > 0 else 0.0))
            warm[i] = (warm[i], round(time.perf_counter() - t_run, 3))
    top = max(weight, default=0.0)
    weight = [w if warm[i] is not None else max(top, 1.0) for i, w in enumerate(weight)]  # no start: unknown gap
    results: list[Any] = [None] * n
    todo = sorted(range(n), key=lambda j: weight[j])
    pool = sum(weight)
    exact_opts = dict(opts, warm_budget=0) if warm_budget else opts
    for m_left, i in zip(range(n, 0, -1), todo, strict=True):
        left = max(total_s - (time.perf_counter() - t0), 0.0)
        part = left * ((1.0 - NETWORK_EXACT_GAP_SHARE) / m_left
                       + (NETWORK_EXACT_GAP_SHARE * weight[i] / pool if pool > 0 else NETWORK_EXACT_GAP_SHARE / m_left))
        pool -= weight[i]
        initial = None
        runs = []
        if warm[i] is not None:
            wr, wall = warm[i]
            initial = np.asarray([wr.best_x], dtype=np.int64)
            runs.append({"searcher": "anneal", "time_limit_s": round(warm_s, 3), "wall_s": wall,
                         "evaluations": wr.n_evaluations, "best": wr.best_objective,
                         "lower_bound": wr.objective_lower_bound()})
        t_run = time.perf_counter()
        r = search(firsts[i], arc, space=spaces[i], searcher="exact", time_limit_s=max(part, 1e-3),
                   searcher_options=exact_opts, initial=initial, constraints=constraints,
                   allow_padding=allow_padding, **kw)
        runs.append({"searcher": "exact", "time_limit_s": round(part, 3),
                     "wall_s": round(time.perf_counter() - t_run, 3), "proven": r.proven_optimal,
                     "best": r.best_objective, "lower_bound": r.objective_lower_bound()})
        cert = dict(r.certificate or {}, runs=runs)
        if warm[i] is not None:
            cert["warm_start_evaluations"] = warm[i][0].n_evaluations
            r = dataclasses.replace(r, n_evaluations=r.n_evaluations + warm[i][0].n_evaluations,
                                    elapsed_s=round(r.elapsed_s + warm[i][1], 6))
        results[i] = dataclasses.replace(r, certificate=cert)
        if on_layer is not None:
            on_layer(i, n, results[i])
        if r.stop_reason == "interrupted":
            return [x for x in results if x is not None]
    return _exact_network_again(firsts, arc, repeats, total_s, t0, spaces, results, on_layer, exact_opts,
                                constraints, allow_padding, kw)


def _exact_network_again(firsts: list[Any], arc: Any, repeats: list[int], total_s: float, t0: float,
                         spaces: list[Any], results: list[Any], on_layer: Any, exact_opts: dict[str, Any],
                         constraints: Any, allow_padding: bool, kw: dict[str, Any]) -> list[SearchResult]:
    """The time the first pass of `_exact_network` left (layers proven before their share
    ran out give it back, and the last layers cannot use it all) goes to a second branch and
    bound of each layer still open, from its best mapping, the largest parts of the network's
    gap first, each given the time left times its part of the open layers' gap. A layer keeps
    the run with the higher certified bound (both bound the same space's optimum; a proof
    wins), the other's best mapping if better, and both runs in ``certificate["runs"]``."""
    import time

    import numpy as np

    todo, weight = open_layers_by_gap(results, repeats)
    pool = sum(weight[i] for i in todo)
    for i in todo:
        left = total_s - (time.perf_counter() - t0)
        if left < NETWORK_EXACT_AGAIN_MIN_S or pool <= 0:
            break
        part = left * weight[i] / pool
        pool -= weight[i]
        if part < NETWORK_EXACT_AGAIN_MIN_S:
            continue
        first = results[i]
        t_run = time.perf_counter()
        r = search(firsts[i], arc, space=spaces[i], searcher="exact", time_limit_s=part,
                   searcher_options=exact_opts, initial=np.asarray([first.best_x], dtype=np.int64),
                   constraints=constraints, allow_padding=allow_padding, **kw)
        results[i] = second_run_result(first, r, {"time_limit_s": round(part, 3),
                                                   "wall_s": round(time.perf_counter() - t_run, 3)})
        if on_layer is not None:
            on_layer(i, len(results), results[i])
        if r.stop_reason == "interrupted":
            break
    return results


def open_layers_by_gap(results: list[Any], repeats: list[int]) -> tuple[list[int], list[float]]:
    """The layers of a network search still open, largest part of the network's gap first,
    and every layer's part (its repeat times its best objective less its certified bound)."""
    weight = [0.0] * len(results)
    for i, r in enumerate(results):
        if r is not None:
            lb = r.objective_lower_bound()
            weight[i] = repeats[i] * (r.best_objective - (lb if lb is not None and lb > 0 else 0.0))
    todo = sorted((i for i, r in enumerate(results) if r is not None and not r.proven_optimal
                   and r.best_x is not None), key=lambda i: weight[i], reverse=True)
    return todo, weight


def second_run_result(first: SearchResult, r: SearchResult, run: dict[str, Any]) -> SearchResult:
    """A layer's result after a second branch and bound ``r`` started from the best mapping of
    its first result ``first``: the run with the higher certified bound (both bound the same
    space's optimum; a proof wins) and the better mapping, every run in
    ``certificate["runs"]`` (``run`` adds its time limit and wall time to the second's)."""
    runs = list((first.certificate or {}).get("runs", []))
    runs.append({"searcher": "exact", "pass": 2, **run, "proven": r.proven_optimal,
                 "best": r.best_objective, "lower_bound": r.objective_lower_bound()})
    lb1, lb2 = first.objective_lower_bound(), r.objective_lower_bound()
    second = r.proven_optimal or (lb2 is not None and (lb1 is None or lb2 >= lb1))
    if second and r.best_objective <= first.best_objective:
        kept = r
    elif not second and first.best_objective <= r.best_objective:
        kept = first
    else:  # one run has the bound, the other the better mapping: the second started from
        # the first's best, so its best is never worse; keep it with the first's bound
        kept = dataclasses.replace(r, lower_bound=first.lower_bound, proven_optimal=False)
    cert = dict(kept.certificate or {}, runs=runs)
    if kept is not r and kept is not first:  # the first run's bound on the second's mapping
        cert.update(proven_optimal=False, lower_bound=lb1, incumbent=kept.best_objective,
                    gap=(max(kept.best_objective / lb1 - 1.0, 0.0) if lb1 else float("inf")))
    if "warm_start_evaluations" in (first.certificate or {}):
        cert["warm_start_evaluations"] = (first.certificate or {})["warm_start_evaluations"]
    return dataclasses.replace(kept, certificate=cert, n_evaluations=first.n_evaluations + r.n_evaluations,
                               elapsed_s=round(first.elapsed_s + r.elapsed_s, 6))


def _shape_key(p: Any) -> tuple[Any, ...]:
    return (p.dims, p.tensors)


def network_groups(network_or_layers: Any) -> tuple[str, list[list[Any]]]:
    """A network's name and its layers grouped by shape (dims and tensors), in order of
    first occurrence: a zoo network name, a `Network`, or a sequence of problems (or problem
    files), as `search_network` takes them."""
    if isinstance(network_or_layers, str):
        from accelmap.workloads.zoo import network

        net = network(network_or_layers)
        name, layers = net.name, list(net.layers)
    elif hasattr(network_or_layers, "layers"):
        name, layers = network_or_layers.name, list(network_or_layers.layers)
    else:
        layers = [_problem(p) for p in network_or_layers]
        name = "layers"
    if not layers:
        raise SpecError(f"network {name}: no layers to search")
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for p in layers:
        groups.setdefault(_shape_key(p), []).append(p)
    return name, list(groups.values())


def search_network(network_or_layers: Any, arch: Any, *, on_layer: Any = None,
                   checkpoint_dir: str | Path | None = None, network_time_s: float | None = None,
                   **kwargs: Any) -> NetworkResult:
    """Search every distinct layer of a network once and total the network.

    Parameters
    ----------
    network_or_layers
        A zoo network name (``"resnet50"``), a `Network`, or a sequence of `Problem`.
    arch
        As for :func:`search`.
    on_layer
        Optional callback ``on_layer(index, n_layers, result)`` after each layer (the
        CLI prints progress with it).
    checkpoint_dir
        Directory for one checkpoint file per layer (resumable network searches).
    network_time_s
        ``searcher="exact"`` only: one time limit for the whole network instead of one per
        layer (`_exact_network`): every distinct layer first gets a warm start (``anneal``,
        an equal part of ``NETWORK_EXACT_WARM_SHARE``, 20%, of the time, and at most
        ``warm_budget`` evaluations, default ``NETWORK_EXACT_WARM_BUDGET``, 200,000: one whole
        annealing run), which also gives its root bound; then
        one branch and bound per layer from that start, in increasing order of the layer's
        part of the network's gap (its repeat times its best objective less its bound),
        each given the time left times half an equal part plus half its share of the gap; a
        layer proven early leaves its time to the later ones. Each branch and bound runs on
        the exact searcher's ``workers`` (``searcher_options``, default every CPU);
        `accelmap.parallel.search_network_exact` runs the layers instead as tasks on Ray
        workers, one process each.
    **kwargs
        Every other option of :func:`search`; ``budget`` and ``time_limit_s`` apply per
        layer (default budget ``NETWORK_DEFAULT_BUDGET``, 150,000, per layer when neither is given;
        for ``searcher="exact"`` a time limit of ``NETWORK_EXACT_TIME_S``, 60 s, per layer instead).
        For ``searcher="exact"``, ``time_limit_s`` caps each layer's warm start and branch and
        bound together; building the layer's map space and bound tables before, and its cheap
        root bound after (at most 0.3 s), come on top.

    Layers with the same shape (dims and tensors) are searched once; their occurrences
    (``Problem.repeat`` and duplicates in the list) weight the totals.
    """
    import time

    if "checkpoint" in kwargs:
        raise SpecError("search_network takes checkpoint_dir (one checkpoint per layer), not checkpoint")
    name, groups = network_groups(network_or_layers)
    arc = _arch(arch, kwargs.pop("energy", None))
    if network_time_s is not None:
        if kwargs.get("searcher") != "exact":
            raise SpecError(f"network_time_s = {network_time_s}: a total time is shared among the layers by the "
                            "exact searcher only (searcher='exact'); give other searchers time_limit_s per layer")
        if not network_time_s > 0:
            raise SpecError(f"network_time_s = {network_time_s}; expected seconds > 0")
        if kwargs.get("time_limit_s") is not None or kwargs.get("budget") is not None or checkpoint_dir is not None:
            raise SpecError("network_time_s shares one time among the layers: give no time_limit_s or budget (per "
                            "layer) and no checkpoint_dir with it")
    elif kwargs.get("budget") is None and kwargs.get("time_limit_s") is None:
        if kwargs.get("searcher") == "exact":
            kwargs["time_limit_s"] = NETWORK_EXACT_TIME_S
        else:
            kwargs["budget"] = NETWORK_DEFAULT_BUDGET
    t0 = time.perf_counter()
    results, repeats, names = [], [], []
    if network_time_s is not None:
        members_of = groups
        repeats = [sum(int(getattr(p, "repeat", 1)) for p in members) for members in members_of]
        names = [tuple(p.name for p in members) for members in members_of]
        results = _exact_network([m[0] for m in members_of], arc, repeats, network_time_s, on_layer, kwargs)
    for i, members in enumerate(groups if network_time_s is None else ()):
        first = members[0]
        ck = None
        if checkpoint_dir is not None:
            from accelmap.workloads.io import file_stem

            ck = Path(checkpoint_dir) / f"{i:03d}-{file_stem(first.name)}.ckpt"
        r = search(first, arc, checkpoint=ck, **kwargs)
        results.append(r)
        repeats.append(sum(int(getattr(p, "repeat", 1)) for p in members))
        names.append(tuple(p.name for p in members))
        if on_layer is not None:
            on_layer(i, len(groups), r)
        if r.stop_reason == "interrupted":  # Ctrl-C ends the whole network, not one layer
            break
    cfg = dict(results[0].config)
    cfg.pop("problem", None)
    if network_time_s is not None:
        cfg["network_time_s"] = network_time_s
    return NetworkResult(network=name, arch=getattr(arc, "name", str(arc)), layers=tuple(results),
                         repeats=tuple(repeats), names=tuple(names), n_distinct=len(groups),
                         elapsed_s=round(time.perf_counter() - t0, 3), config=cfg)
