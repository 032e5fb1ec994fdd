"""Hardware design-space search: which accelerator to build for a set of workloads.

An outer Optuna study proposes architecture parameters (PE array, buffer sizes, block
sizes, bandwidths, optional levels) of a base arch; each proposal (a *candidate*) gets a
whole-workload mapping search: every distinct layer shape is one `SearchTask`, run on the
sweep runner (Ray or serial) and committed to the results store, so a layer already
searched on the same candidate (a repeated layer, a candidate proposed again, a resumed
study) is served from the store. The candidate's network energy and cycles are the sums of
its layers' best mappings weighted by their repeat counts; its area comes from
`accelmap.arch.area`. Trials are committed to an Optuna RDB study on SQLite as they finish.

This module reads design-space files (`load_dse`, `parse_dse`), evaluates candidates and runs
the outer search (`run_dse`); `dse` runs a study and writes its outputs through
`accelmap.parallel.dse_outputs`. The data these read into and fill (`Parameter`, `DseSpec`,
`Candidate`, `TrialRecord`, `DseResult`, `pareto_front`, `study_storage`) is defined in
`accelmap.parallel.dse_types` and can be imported from here as well.

The design-space file (strict YAML, ``docs/dse.md``)::

    version: 1
    name: eyeriss-dse              # optional; the Optuna study name (default: file stem)
    base: eyeriss-like             # a preset name or an arch file path; or {preset: X} / {file: P}
    node_nm: 45                    # optional; default the base arch's node_nm (else 45)
    parameters:
      - {level: shared_glb, field: capacity_words, values: [16384, 32768, 65536]}
      - {level: shared_glb, field: fanout_x, low: 4, high: 32, step: 2}
      - {level: DRAM, field: bandwidth_words_per_cycle, low: 2.0, high: 32.0, log: true}
      - {level: psum_spad, field: present, values: [true, false]}
    workloads:                     # as in sweep files
      - network: resnet50
      - layer: resnet50/conv3_1
      - file: layers/my_conv.yaml
    objectives: [edp, area]        # edp | energy | cycles | area; one or more
    constraints: {area_mm2: base, power_w: 2.0}   # area budget in mm^2 ("base": the base's own)
    trials: 40                     # distinct candidates to search (repeats and over-budget ones are free)
    searcher: tpe                  # tpe | nsga2 | random | grid (default tpe; multi-objective TPE for a front)
    seed: 0
    mapping: {searcher: anneal, budget: 200000, time_limit_s: null, model: loopnest,
              objective: edp, options: {}, model_options: {}}   # options: the searcher's
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import accelmap._schema as schema
from accelmap._files import read_text
from accelmap.arch.area import area_mm2
from accelmap.arch.spec import Arch
from accelmap.errors import SpecError
from accelmap.parallel.backend import Backend, Outcome
from accelmap.parallel.dse_outputs import write_outputs
from accelmap.parallel.dse_types import (
    _METRIC,
    FIELDS,
    Candidate,
    DseResult,
    DseSpec,
    Parameter,
    TrialRecord,
    pareto_front,
    study_storage,
)
from accelmap.parallel.store import ResultStore
from accelmap.parallel.sweep import (
    SearchTask,
    _check_searcher_options,
    _workload,
    run_tasks,
)
from accelmap.workloads.problem import Problem

__all__ = [
    "FIELDS",
    "OBJECTIVES",
    "OUTER_SEARCHERS",
    "Parameter",
    "DseSpec",
    "Candidate",
    "TrialRecord",
    "DseResult",
    "load_dse",
    "parse_dse",
    "run_dse",
    "dse",
    "pareto_front",
    "study_storage",
]

OBJECTIVES = ("edp", "energy", "cycles", "area")
OUTER_SEARCHERS = ("tpe", "nsga2", "random", "grid")
_TOP_KEYS = ("version", "name", "base", "node_nm", "parameters", "workloads", "objectives",
             "constraints", "trials", "searcher", "seed", "mapping")
_MAPPING_KEYS = ("searcher", "budget", "time_limit_s", "model", "objective", "options", "model_options")
# A study stops after this many proposals per wanted trial even if it keeps proposing
# candidates it has seen (a converged sampler on a small space).
MAX_PROPOSALS_PER_TRIAL = 20


# --- reading design-space files -------------------------------------------------------------
def load_dse(path: str | Path) -> DseSpec:
    """Read and resolve a design-space file (relative paths inside are relative to it)."""
    import yaml

    p = Path(path)
    text = read_text(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{p}: not valid YAML: {exc}") from exc
    return parse_dse(data, source=str(p), base_dir=p.parent)


def _base_arch(obj: Any, where: str, base_dir: Path) -> Arch:
    from accelmap.arch.io import load_arch
    from accelmap.arch.presets import preset, presets

    try:
        if isinstance(obj, str):
            if obj in presets():
                return preset(obj)
            path = Path(obj) if Path(obj).is_absolute() else base_dir / obj
            if path.is_file():
                return load_arch(path)
            return load_arch(obj)
        d = schema.check_keys(obj, ("preset", "file"), where, "a preset name or file path")
        if len(d) != 1:
            raise SpecError(f"{where} = {obj!r}; expected exactly one of preset: NAME or file: PATH")
        if "preset" in d:
            return preset(schema.name(d, "preset", where, default=schema.REQUIRED))
        return load_arch(base_dir / schema.name(d, "file", where, default=schema.REQUIRED))
    except SpecError as exc:
        if str(exc).startswith(where):
            raise
        raise SpecError(f"{where}: {exc}") from exc
    except LookupError as exc:
        raise SpecError(f"{where}: {exc}") from exc


def _value(v: Any, path: str, kind: type) -> Any:
    """One parameter value of the field's type (ints >= 1, numbers > 0, or booleans)."""
    if kind is bool:
        return schema.bool_value(v, path)
    if kind is int:
        return schema.int_value(v, path)
    return schema.number_value(v, path)


_PARAM_KEYS = ("level", "field", "values", "low", "high", "step", "log")


def _parameter(obj: Any, where: str, base: Arch) -> Parameter:
    d = schema.check_keys(obj, _PARAM_KEYS, where, "a parameter", required=("level", "field"))
    level = schema.choice(d, "level", where, base.level_names, default=schema.REQUIRED)
    fld = schema.choice(d, "field", where, tuple(FIELDS), default=schema.REQUIRED)
    kind = FIELDS[fld]
    if fld == "capacity_words" and base.levels[base.level_index(level)].capacity_words is None:
        raise SpecError(f"{where}: level {level} is unbounded (capacity null); its capacity cannot be searched")
    if fld == "present" and base.level_index(level) == 0:
        raise SpecError(f"{where}: level {level} is the outermost level; it cannot be removed")
    has_values = "values" in d
    has_range = "low" in d or "high" in d
    if has_values == has_range:
        raise SpecError(f"{where}: give either values: [...] or a range low: / high: (with optional "
                        "step: and log:), not both or neither")
    if has_values:
        raw = schema.nonempty_list(d, "values", where, f"{fld} values")
        vals = [_value(v, f"{schema.join(where, 'values')}[{i}]", kind) for i, v in enumerate(raw)]
        if len(set(vals)) != len(vals):
            raise SpecError(f"{schema.join(where, 'values')} = {vals!r}; a value repeats")
        for k in ("step", "log"):
            if k in d:
                raise SpecError(f"{schema.join(where, k)}: only a range (low/high) takes {k}")
        return Parameter(level=level, field=fld, values=tuple(vals))
    if kind is bool:
        raise SpecError(f"{where}: field present takes values: [true, false], not a range")
    bounds = []
    for k in ("low", "high"):
        if k not in d:
            raise SpecError(f"{schema.join(where, k)} is missing; a range needs both low: and high:")
        bounds.append(_value(d[k], schema.join(where, k), kind))
    low, high = bounds
    if high < low:
        raise SpecError(f"{where}: high = {high!r} < low = {low!r}; expected low <= high")
    step = _value(d["step"], schema.join(where, "step"), kind) if "step" in d else None
    log = schema.boolean(d, "log", where, default=False)
    if log and step not in (None, 1):
        raise SpecError(f"{where}: log: true takes no step")
    return Parameter(level=level, field=fld, low=low, high=high, step=step, log=log)


def parse_dse(data: Any, *, source: str = "<dse>", base_dir: str | Path = ".") -> DseSpec:
    """Validate a design-space document (parsed YAML) and resolve its names and files.

    Every error is a `SpecError` naming ``source`` and the key path, what was found and what
    is expected (the shared `accelmap._schema` layer).
    """
    from accelmap._registry import costmodels, searchers
    from accelmap.arch.area import NODE_AREA_SCALE

    bdir = Path(base_dir)
    top_where = f"{source}: "
    top = schema.check_keys(data, _TOP_KEYS, top_where, "a design-space file",
                            required=("version", "base", "parameters", "workloads"))
    if top["version"] != 1 or isinstance(top["version"], bool):
        raise SpecError(f"{source}: version = {top['version']!r}; expected 1 (add `version: 1` at the top)")
    name = schema.name(top, "name", top_where, default=Path(source).stem if not source.startswith("<") else "dse")
    base = _base_arch(top["base"], f"{source}: base", bdir)
    node = schema.integer(top, "node_nm", top_where, default=base.node_nm or 45)
    if node not in NODE_AREA_SCALE:
        raise SpecError(f"{source}: node_nm = {node}; expected one of the area model's nodes "
                        f"{sorted(NODE_AREA_SCALE)}")
    base = dataclasses.replace(base, node_nm=node)

    params = [_parameter(p, f"{source}: parameters[{i}]", base)
              for i, p in enumerate(schema.nonempty_list(top, "parameters", top_where, "parameters"))]
    names = [p.name for p in params]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"{source}: parameters: {dup} given more than once; give each level field once")
    for p in params:
        both = f"{p.level}.bandwidth_words_per_cycle"
        if p.field.endswith("bandwidth_words_per_cycle") and p.name != both and both in names:
            raise SpecError(f"{source}: parameters: {p.name} and {both} both set {p.level}'s bandwidth")

    workloads: list[tuple[str | None, Problem]] = []
    for i, item in enumerate(schema.nonempty_list(top, "workloads", top_where, "workloads")):
        workloads += _workload(item, f"{source}: workloads[{i}]", bdir)

    if isinstance(top.get("objectives"), str):
        top = dict(top, objectives=[top["objectives"]])
    objectives = (schema.nonempty_list(top, "objectives", top_where, f"objectives ({', '.join(OBJECTIVES)})")
                  if "objectives" in top else ["edp", "area"])
    for i, _ in enumerate(objectives):
        schema.choice_value(objectives[i], f"{source}: objectives[{i}]", OBJECTIVES)
    if len(set(objectives)) != len(objectives):
        raise SpecError(f"{source}: objectives = {objectives!r}; an objective repeats")
    if objectives == ["area"]:
        raise SpecError(f"{source}: objectives = ['area']; add a workload objective (edp, energy or cycles)")

    cons_where = f"{source}: constraints"
    cons = schema.check_keys(top.get("constraints") or {}, ("area_mm2", "power_w"), cons_where, "constraints")
    area_budget: float | None = None
    if cons.get("area_mm2") == "base":
        area_budget = area_mm2(base)
    elif cons.get("area_mm2") is not None:
        area_budget = float(schema.number(cons, "area_mm2", cons_where, default=None, minimum=0, strict=True))
    power_budget = schema.number(cons, "power_w", cons_where, default=None, minimum=0, strict=True, nullable=True,
                                 null_means="no power budget")
    trials = schema.integer(top, "trials", top_where, default=40)
    # TPE (multi-objective TPE for a front) by default: on ResNet-50 / eyeriss-like it beat
    # NSGA-II and random search at 24 trials on every seed measured (docs/performance.md).
    outer = schema.choice(top, "searcher", top_where, OUTER_SEARCHERS, default="tpe")
    if outer == "grid":
        for p in params:
            if p.values is None:
                raise SpecError(f"{source}: searcher grid needs values: lists; parameter {p.name} is a range")
    seed = schema.integer(top, "seed", top_where, default=0, minimum=0)

    m_where = f"{source}: mapping"
    m = schema.check_keys(top.get("mapping") or {}, _MAPPING_KEYS, m_where, "the mapping search")
    model = schema.plugin_value(m.get("model", "loopnest"), schema.join(m_where, "model"), costmodels.names(),
                                "cost model")
    model_opts = dict(schema.mapping(m, "model_options", m_where, "option: value"))
    if model_opts:
        from accelmap._registry import build_costmodel

        # built once here, so a bad option fails now rather than in every candidate's tasks
        build_costmodel(model, model_opts, where=f"{schema.join(m_where, 'model_options')}: ")
    msearcher = schema.plugin_value(m.get("searcher", "anneal"), schema.join(m_where, "searcher"), searchers.names(),
                                    "searcher")
    opts = schema.mapping(m, "options", m_where, "option: value")
    _check_searcher_options(msearcher, opts, schema.join(m_where, "options"))
    budget = schema.integer(m, "budget", m_where, default=None, nullable=True, null_means="no evaluation budget")
    tl = schema.number(m, "time_limit_s", m_where, default=None, minimum=0, strict=True, nullable=True,
                       null_means="no time limit")
    if budget is None and tl is None:
        if msearcher == "exact":
            tl = 60.0
        else:
            budget = 150_000
    metric_objs = [o for o in objectives if o != "area"]
    mobj = schema.choice(m, "objective", m_where, tuple(_METRIC),
                         default=metric_objs[0] if len(metric_objs) == 1 else "edp")
    return DseSpec(
        name=name, base=base, node_nm=node, parameters=tuple(params), workloads=tuple(workloads),
        objectives=tuple(objectives), area_budget_mm2=area_budget, power_budget_w=power_budget,
        trials=trials, searcher=outer, seed=seed, model=model, model_options=model_opts,
        mapping_searcher=msearcher,
        mapping_budget=budget, mapping_time_limit_s=None if tl is None else float(tl), mapping_objective=mobj,
        mapping_options=dict(opts),
    )


# --- evaluating candidates ------------------------------------------------------------------
def _aggregate(params: dict[str, Any], arch: Arch, area: float,
               parts: Sequence[tuple[SearchTask, int, tuple[str, ...]]], store: ResultStore) -> Candidate:
    cycles = energy = 0.0
    best_obj = lb_obj = 0.0
    gap_known = True
    n_proven = 0
    lb_c: float | None = 0.0
    lb_e: float | None = 0.0
    for task, repeat, _ in parts:
        row = store.get(task.key)
        if row is None or row["status"] == "error":
            msg = (row or {}).get("error") or "not run"
            return Candidate(params=params, arch=arch, area_mm2=area, status="error",
                             error=f"{task.problem.name}: {str(msg).splitlines()[0] if msg else msg}")
        if row["status"] == "infeasible":
            return Candidate(params=params, arch=arch, area_mm2=area, status="infeasible",
                             error=f"{task.problem.name}: {row.get('error') or 'no legal mapping'}")
        cycles += repeat * float(row["cycles"])
        energy += repeat * float(row["energy_pj"])
        res = row.get("result_json") or {}
        obj = float(row[_METRIC[task.objective]])
        proven = bool(res.get("proven_optimal"))
        n_proven += proven
        lbd = res.get("lower_bound") or {}
        for metric in ("cycles", "energy_pj"):
            # a mapping proven optimal for this very metric is its own bound
            own = proven and _METRIC[task.objective] == metric
            bound = float(row[metric]) if own else lbd.get(metric)
            if metric == "cycles":
                lb_c = None if lb_c is None or bound is None else lb_c + repeat * float(bound)
            else:
                lb_e = None if lb_e is None or bound is None else lb_e + repeat * float(bound)
        lb = obj if proven else _objective_bound(res, task.objective)
        if lb is None or not lb > 0:
            gap_known = False
        else:
            best_obj += repeat * obj
            lb_obj += repeat * lb
    gap = max(best_obj / lb_obj - 1.0, 0.0) if gap_known and lb_obj > 0 else None
    return Candidate(params=params, arch=arch, area_mm2=area, status="ok", cycles=cycles, energy_pj=energy,
                     certified_gap=gap, n_layers=len(parts), n_proven=n_proven, lb_cycles=lb_c, lb_energy_pj=lb_e)


def _objective_bound(result: dict[str, Any], objective: str) -> float | None:
    lbd = result.get("lower_bound") or {}
    if "objective" in lbd:
        return float(lbd["objective"])
    v = lbd.get(_METRIC[objective])
    return float(v) if v is not None else None


# --- the outer search ---------------------------------------------------------------------
def _sampler(spec: DseSpec, seed: int) -> Any:
    import optuna

    if spec.searcher == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=min(10, spec.trials // 4 + 1))
    if spec.searcher == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(20, spec.trials // 4)))
    return optuna.samplers.RandomSampler(seed=seed)


def _trial_seed(spec: DseSpec, index: int) -> int:
    # A seed per logical trial index, so a resumed study proposes what an uninterrupted
    # one would have: the proposal depends on (completed history, index) only.
    return int(np.random.SeedSequence([spec.seed, index]).generate_state(1, dtype=np.uint32)[0])


def run_dse(
    spec: DseSpec,
    *,
    study_path: str | Path,
    store: ResultStore,
    backend: Backend | None = None,
    workers: int = 1,
    trials: int | None = None,
    progress: bool = False,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> DseResult:
    """Run (or resume) the design-space search of ``spec``.

    Parameters
    ----------
    study_path
        The Optuna study's SQLite file; a study of the same name there is resumed.
    store
        The results store: one row per (layer, candidate) mapping search.
    backend
        Where mapping searches run (default serial).
    workers
        Candidates proposed at once (each proposal round evaluates this many).
    trials
        Total trials wanted (default ``spec.trials``); trials already complete count.
    on_trial
        Called with each trial as it is committed. Ctrl-C stops the run after committing
        what finished; the next run resumes.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    n_wanted = spec.trials if trials is None else trials
    directions = [optuna.study.StudyDirection.MINIMIZE] * len(spec.objectives)
    study = optuna.create_study(storage=study_storage(study_path), study_name=spec.name,
                                directions=directions, sampler=_sampler(spec, spec.seed), load_if_exists=True)
    if list(study.directions) != directions:
        raise SpecError(f"{study_path}: study {spec.name!r} has {len(study.directions)} objective(s); this file "
                        f"has {len(directions)}. Use another name: or study file")
    _check_study_attrs(study, spec, study_path)
    dists = {p.name: p.distribution() for p in spec.parameters}

    # Trials that a killed or interrupted run left unfinished: fail them and propose their
    # parameters again first, so the history matches an uninterrupted run.
    # The GA samplers' generation of each such trial is kept too: NSGA-II would otherwise
    # count the redone trial into the generation current at its new ask.
    redo: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,
                                                      optuna.trial.TrialState.WAITING)):
        if t.state == optuna.trial.TrialState.RUNNING:
            kept = {k: v for k, v in t.system_attrs.items() if k.endswith(":generation")}
            redo.append((dict(t.params), kept))
            study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
    grid = spec.grid()
    grid_order: list[dict[str, Any]] = []
    if spec.searcher == "grid" and grid is not None:
        rng = np.random.default_rng(spec.seed)
        grid_order = [grid[i] for i in rng.permutation(len(grid))]

    cache: dict[str, Candidate] = {}
    records: list[TrialRecord] = []
    for t in _complete(study):
        cand = _candidate_from_trial(spec, t)
        cache[_params_key(t.params)] = cand
        records.append(_record(spec, t.number, cand))

    # The base arch, evaluated once (served from the store after the first run).
    base_arch = spec.base
    base_parts = spec.tasks(base_arch)
    interrupted = False
    noted = _SigintNoted().start()
    try:
        _run_parts(base_parts, store, backend)
        base = _aggregate({}, base_arch, area_mm2(base_arch), base_parts, store)
        study.set_user_attr("base_result", base.to_dict())
        while True:
            noted.check()
            # `trials` counts distinct candidates given a mapping search: a proposal seen
            # before is answered from the cache, one over the area budget is rejected from its
            # area alone; neither costs a search (the sampler still learns from both).
            n_total = len(_complete(study))
            n_seen = len({_params_key(r.candidate.params) for r in records})
            n_searched = len({_params_key(r.candidate.params) for r in records
                              if r.candidate.status != "over_budget"})
            if n_searched >= n_wanted or n_total >= MAX_PROPOSALS_PER_TRIAL * n_wanted:
                break
            if grid is not None and n_seen >= len(grid) and not redo:
                break  # every candidate of the grid has been seen: the front is exact
            done = n_total
            k = max(1, min(workers, n_wanted - n_searched))
            # Unfinished trials of an interrupted run form a batch of their own, so later
            # batches start where an uninterrupted run's would.
            n_redo = min(k, len(redo))
            if n_redo:
                k = n_redo
            batch: list[tuple[Any, dict[str, Any], Arch, float, list[tuple[SearchTask, int, tuple[str, ...]]]]] = []
            with _sigint_deferred():  # a batch is asked whole or not at all
                for j in range(k):
                    fixed, kept = redo.pop(0) if n_redo else (None, {})
                    if fixed is None and grid_order:
                        seen = {_params_key(r.candidate.params) for r in records} | {
                            _params_key(tr.params) for tr, *_ in batch}
                        fixed = next((g for g in grid_order if _params_key(g) not in seen), None)
                        if fixed is None:
                            break
                    if fixed is not None:
                        study.enqueue_trial(fixed, skip_if_exists=False)
                    study.sampler = _sampler(spec, _trial_seed(spec, done + j))
                    trial = study.ask(dists)
                    for key, value in kept.items():
                        study._storage.set_trial_system_attr(trial._trial_id, key, value)
                    params = {p.name: trial.params[p.name] for p in spec.parameters}
                    arch = spec.candidate(params)
                    area = area_mm2(arch)
                    parts = [] if _over_area(spec, area) or _params_key(params) in cache else spec.tasks(arch)
                    batch.append((trial, params, arch, area, parts))
            if not batch:
                break
            pending = {i: {t.key for t, _, _ in b[4]} for i, b in enumerate(batch)}
            told: set[int] = set()
            failed: list[str] = []

            def tell_ready(batch: list[Any] = batch, pending: dict[int, set[str]] = pending,
                           told: set[int] = told, failed: list[str] = failed) -> None:
                for i, (trial, params, arch, area, parts) in enumerate(batch):
                    if i in told or pending[i]:
                        continue
                    key = _params_key(params)
                    if key in cache:
                        cand = dataclasses.replace(cache[key])
                    elif _over_area(spec, area):
                        cand = Candidate(params=params, arch=arch, area_mm2=area, status="over_budget")
                    else:
                        cand = _aggregate(params, arch, area, parts, store)
                    if cand.status == "error":
                        # Left running in the study: the next run redoes it with the same
                        # parameters (a worker lost to Ctrl-C lands here too), retrying the
                        # layers whose rows are errors.
                        told.add(i)
                        failed.append(cand.error or "?")
                        continue
                    cache[key] = cand
                    with _sigint_deferred():  # never a half-told trial
                        rec = _tell(study, spec, trial, cand)
                        store.commit_trial(spec.name, rec.number, rec.feasible, cand.to_dict())
                    records.append(rec)
                    told.add(i)
                    if on_trial is not None:
                        on_trial(rec)

            held = store.done_keys({k for keys in pending.values() for k in keys})
            for keys in pending.values():  # layers the store already holds
                keys.difference_update(held)
            tell_ready()

            def on_result(task: SearchTask, _outcome: Outcome, pending: dict[int, set[str]] = pending,
                          tell_ready: Callable[[], None] = tell_ready) -> None:
                for keys in pending.values():
                    keys.discard(task.key)
                tell_ready()

            tasks = [t for b in batch for t, _, _ in b[4] if t.key not in held]
            if tasks:
                summary = run_tasks(tasks, store=store, backend=backend, on_result=on_result, progress=progress)
                if summary.interrupted:
                    raise KeyboardInterrupt
            noted.check()
            if failed:  # a mapping search failed: its trial stays open, a rerun retries it
                raise SpecError(f"{len(failed)} candidate(s) could not be evaluated, first: {failed[0]}; "
                                f"the error rows are in {store.path}; run again to retry them")
    except KeyboardInterrupt:
        interrupted = True
        base = base if "base" in locals() else Candidate(params={}, arch=base_arch,
                                                         area_mm2=area_mm2(base_arch), status="error")
    finally:
        noted.stop()
    feasible = [r.candidate for r in records if r.feasible]
    uniq: dict[str, Candidate] = {}
    for c in feasible:
        uniq.setdefault(_params_key(c.params), c)
    front = pareto_front(list(uniq.values()), spec.objectives)
    return DseResult(spec=spec, trials=tuple(records), base=base, front=tuple(front),
                     study_path=str(study_path), store_path=store.path, wall_s=time.perf_counter() - t0,
                     interrupted=interrupted, n_distinct=len({_params_key(r.candidate.params) for r in records}),
                     n_searched=len({_params_key(r.candidate.params) for r in records
                                     if r.candidate.status != "over_budget"}),
                     grid_size=None if grid is None else len(grid))


class _SigintNoted:
    """Ctrl-C raises KeyboardInterrupt as usual and is also noted, so that one Python drops
    (raised inside a finalizer, e.g. a progress bar's ``__del__``: "Exception ignored in")
    still stops the study at the next `check`. Only in the main thread; elsewhere a no-op."""

    def __init__(self) -> None:
        self.seen = False
        self._previous: Any = None
        self._installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        self.seen = True
        raise KeyboardInterrupt

    def start(self) -> _SigintNoted:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
            self._installed = True
        return self

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt

    def stop(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C until the block ends, then raise it: study writes are never left half done.

    Only in the main thread (the only one Python delivers signals to); elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _run_parts(parts: Sequence[tuple[SearchTask, int, tuple[str, ...]]], store: ResultStore,
               backend: Backend | None) -> None:
    summary = run_tasks([t for t, _, _ in parts], store=store, backend=backend)
    if summary.interrupted:
        raise KeyboardInterrupt


def _complete(study: Any) -> list[Any]:
    import optuna

    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def _params_key(params: dict[str, Any]) -> str:
    return json.dumps({k: params[k] for k in sorted(params)}, sort_keys=True, default=str)


def _over_area(spec: DseSpec, area: float) -> bool:
    return spec.area_budget_mm2 is not None and area > spec.area_budget_mm2 * (1 + 1e-9)


def _violations(spec: DseSpec, cand: Candidate) -> dict[str, float]:
    out: dict[str, float] = {}
    if spec.area_budget_mm2 is not None:
        out["area_mm2"] = cand.area_mm2 - spec.area_budget_mm2
    if spec.power_budget_w is not None:
        p = cand.power_w()
        out["power_w"] = (p - spec.power_budget_w) if math.isfinite(p) else 1e9
    if cand.status != "ok":
        out["mappable"] = 1.0
    return out


def _record(spec: DseSpec, number: int, cand: Candidate) -> TrialRecord:
    viol = _violations(spec, cand)
    feasible = cand.status == "ok" and all(v <= 1e-9 * max(1.0, abs(v)) for v in viol.values())
    values = tuple(cand.value(o) if (o == "area" or cand.status == "ok") else math.inf for o in spec.objectives)
    return TrialRecord(number=number, candidate=cand, feasible=feasible, values=values)


def _tell(study: Any, spec: DseSpec, trial: Any, cand: Candidate) -> TrialRecord:
    rec = _record(spec, trial.number, cand)
    for k, v in _violations(spec, cand).items():
        trial.set_constraint(k, v)
    trial.set_user_attr("candidate", cand.to_dict())
    study.tell(trial, list(rec.values))
    return rec


def _candidate_from_trial(spec: DseSpec, t: Any) -> Candidate:
    d = t.user_attrs.get("candidate") or {}
    params = {p.name: t.params[p.name] for p in spec.parameters}
    arch = spec.candidate(params)

    def num(x: Any) -> float:
        return math.inf if x is None else float(x)

    return Candidate(params=params, arch=arch, area_mm2=float(d.get("area_mm2", area_mm2(arch))),
                     status=str(d.get("status", "ok")), cycles=num(d.get("cycles")),
                     energy_pj=num(d.get("energy_pj")), certified_gap=d.get("certified_gap"),
                     n_layers=int(d.get("n_layers", 0)), n_proven=int(d.get("n_proven", 0)), error=d.get("error"),
                     lb_cycles=d.get("lb_cycles"), lb_energy_pj=d.get("lb_energy_pj"))


def _spec_fingerprint(spec: DseSpec) -> str:
    from accelmap.parallel.sweep import canonical

    body = {
        "base": canonical(spec.base), "node_nm": spec.node_nm, "parameters": canonical(spec.parameters),
        "workloads": [[n, canonical(p)] for n, p in spec.workloads], "objectives": list(spec.objectives),
        "area": spec.area_budget_mm2, "power": spec.power_budget_w, "searcher": spec.searcher,
        **({"model_options": canonical(spec.model_options)} if spec.model_options else {}),
        "seed": spec.seed, "model": spec.model, "mapping": [spec.mapping_searcher, spec.mapping_budget,
                                                             spec.mapping_time_limit_s, spec.mapping_objective,
                                                             canonical(spec.mapping_options)],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _check_study_attrs(study: Any, spec: DseSpec, path: str | Path) -> None:
    fp = _spec_fingerprint(spec)
    old = study.user_attrs.get("spec_sha256")
    if old is None:
        study.set_user_attr("spec_sha256", fp)
        study.set_user_attr("objectives", list(spec.objectives))
        study.set_user_attr("parameters", [p.name for p in spec.parameters])
        study.set_user_attr("base", spec.base.name)
    elif old != fp:
        raise SpecError(
            f"{path}: study {spec.name!r} was run from a different design-space file (parameters, workloads, "
            "objectives, constraints, seed or mapping search changed); give this file another name: or use "
            "another --out directory"
        )


def dse(
    spec: DseSpec | str | Path,
    *,
    out: str | Path | None = None,
    workers: int | None = None,
    address: str | None = None,
    backend: str = "ray",
    seed: int | None = None,
    trials: int | None = None,
    store: str | Path | None = None,
    plot: bool = True,
    progress: bool = False,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> tuple[DseResult, dict[str, Any]]:
    """Run (or resume) a design-space search and write its outputs.

    Parameters
    ----------
    spec
        A `DseSpec` or the path of a design-space file.
    out
        Output directory (default ``dse-<name>``): ``study.sqlite`` (Optuna), ``results.sqlite``
        (the results store, unless ``store`` is given), ``front.json``/``.csv``, ``trials.csv``,
        ``front.png`` and ``archs/``.
    workers, address, backend
        Where the mapping searches run, as in ``accelmap sweep`` (``backend="serial"`` runs
        them in this process; ``workers`` is also how many candidates each round proposes).
    seed
        Overrides the file's ``seed``; the study is named ``<name>.seed<seed>``, so seeds
        share a directory.
    trials
        Overrides the file's ``trials``.

    Returns
    -------
    (DseResult, dict)
        The result, and the ``front.json`` document (each front design with ``arch_file``).
    """
    from accelmap.parallel.backend import make_backend

    s = load_dse(spec) if isinstance(spec, (str, Path)) else spec
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise SpecError(f"seed = {seed!r}; expected an int >= 0")
        s = dataclasses.replace(s, seed=seed)
    if trials is not None:
        s = dataclasses.replace(s, trials=schema.integer({"trials": trials}, "trials", "dse: ", default=None))
    out_dir = Path(out) if out is not None else Path(f"dse-{s.name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    runner = make_backend(backend, address=address, workers=workers)
    n_workers = int(getattr(runner, "n_workers", 1))
    study_spec = dataclasses.replace(s, name=f"{s.name}.seed{s.seed}")
    try:
        with ResultStore(store or out_dir / "results.sqlite") as st:
            result = run_dse(study_spec, study_path=out_dir / "study.sqlite", store=st, backend=runner,
                             workers=n_workers, progress=progress, on_trial=on_trial)
    finally:
        runner.close()
    data = write_outputs(result, out_dir, plot=plot)
    return result, data
