"""The search driver: everything around a searcher that is not its algorithm.

One loop, the same for every searcher::

    x = searcher.ask(n)                        # encoded points, (m, n_params)
    batch = mapspace.decode(x)                 # MappingBatch
    metrics = model.evaluate(problem, arch, batch)
    searcher.tell(x, objective(metrics), valid)

around which the driver owns

* the budget in evaluations and in wall seconds, and early stop after N evaluations
  without improvement of the scalar objective;
* the best so far, its history (against evaluations and seconds) and, for a Pareto
  objective, the archive of non-dominated points (vectorized filtering);
* a tqdm progress bar (off unless asked) showing the best so far;
* Ctrl-C: the first SIGINT is caught and ends the search after the current batch, with
  the best so far kept (a second one interrupts at once);
* checkpoints: the searcher's state and the driver's own state are pickled to a file
  every ``checkpoint_every_s`` seconds and at the end; a run started with an existing
  checkpoint resumes from it, and for a searcher with `Cap.CHECKPOINT` it reaches the same
  result as an uninterrupted run with the same seed and budget;
* seeds: one `numpy.random.SeedSequence` from the root seed; the searcher's generator is
  spawned from it, so the same seed gives the same result.

Only load checkpoints you wrote yourself: they are pickles.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.mapper.check import Reason
from accelmap.search.base import Cap, EncodedSpace
from accelmap.search.objectives import ObjectiveSpec, non_dominated
from accelmap.search.result import History, SearchResult, mapping_to_json, versions

__all__ = ["Driver", "DriverOptions", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverOptions:
    """Stopping, progress and checkpoint options of one search.

    Attributes
    ----------
    budget
        Evaluations to spend (None = no limit; then a time limit, early stop or a finite
        searcher must end the search).
    time_limit_s
        Wall-clock seconds (None = no limit). Checked between batches.
    early_stop
        Stop after this many evaluations without improvement (None = never).
    batch_size
        Points asked per batch (None = the searcher's preferred size).
    progress
        Show a tqdm progress bar on stderr.
    checkpoint
        File to resume from (when it exists) and to write the state to.
    checkpoint_every_s
        Seconds between checkpoint writes (0 = after every batch).
    """

    budget: int | None = 100_000
    time_limit_s: float | None = None
    early_stop: int | None = None
    batch_size: int | None = None
    progress: bool = False
    checkpoint: Path | None = None
    checkpoint_every_s: float = 10.0

    def __post_init__(self) -> None:
        for key in ("budget", "early_stop", "batch_size"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise SpecError(f"search {key} = {v!r}; expected an int >= 1 or None")
        if self.time_limit_s is not None and (
            isinstance(self.time_limit_s, bool) or not isinstance(self.time_limit_s, (int, float))
            or not self.time_limit_s > 0
        ):
            raise SpecError(f"search time_limit_s = {self.time_limit_s!r}; expected a number > 0 or None")
        if self.checkpoint_every_s < 0:
            raise SpecError(f"checkpoint_every_s = {self.checkpoint_every_s!r}; expected a number >= 0")


@dataclass(slots=True)
class _State:
    """The driver's mutable state (pickled into checkpoints)."""

    n_evals: int = 0
    n_valid: int = 0
    elapsed_s: float = 0.0
    best_scalar: float = math.inf
    best_x: IntArray | None = None
    evals_at_best: int = 0
    hist_evals: list[int] = field(default_factory=list)
    hist_seconds: list[float] = field(default_factory=list)
    hist_best: list[float] = field(default_factory=list)
    front_f: FloatArray | None = None  # (k, 2) Pareto archive objectives
    front_x: IntArray | None = None  # (k, n_params)
    invalid: dict[str, int] = field(default_factory=dict)
    stop_reason: str = ""


class Driver:
    """Runs one searcher on one (problem, arch, MapSpace, cost model).

    Parameters
    ----------
    problem, arch
        The layer and the accelerator.
    mapspace
        The `MapSpace` (decode/check/encode and the operators the searchers use).
    model
        A cost model instance (``evaluate(problem, arch, batch) -> Metrics``).
    searcher_cls
        The searcher class (from ``accelmap._registry.searchers``).
    objective
        What to minimise.
    seed
        Root seed of the `numpy.random.SeedSequence`.
    options
        Budget, time, early stop, progress and checkpoint options.
    searcher_options
        Keyword options of the searcher (unknown ones raise `TypeError`).
    model_name, searcher_name
        Names recorded in the result.
    config
        Extra configuration recorded in the result (constraints, ...).
    lower_bound
        ``{"cycles", "energy_pj", "edp"}`` lower bounds recorded for the gap, or None.
    initial
        (k, n_params) encoded warm-start points, scored before the first ask and handed
        to the searcher's ``seed_points`` (when it has one); they count in the budget.
    initial_evaluations
        Evaluations spent elsewhere to find ``initial`` (e.g. searches under dataflow
        constraints); they count in the budget and the result's ``n_evaluations``.
    """

    def __init__(self, problem: Any, arch: Any, mapspace: Any, model: Any, searcher_cls: type, *,
                 objective: ObjectiveSpec, seed: int = 0, options: DriverOptions | None = None,
                 searcher_options: dict[str, Any] | None = None, model_name: str = "",
                 searcher_name: str = "", config: dict[str, Any] | None = None,
                 lower_bound: dict[str, float] | None = None, initial: IntArray | None = None,
                 initial_evaluations: int = 0) -> None:
        self.problem = problem
        self.arch = arch
        self.mapspace = mapspace
        self.model = model
        self.objective = objective
        self.seed = int(seed)
        self.options = options or DriverOptions()
        self.searcher_options = dict(searcher_options or {})
        self.model_name = model_name or getattr(model, "name", type(model).__name__)
        self.searcher_name = searcher_name or getattr(searcher_cls, "name", searcher_cls.__name__)
        self.extra_config = dict(config or {})
        self.lower_bound = lower_bound
        self.space = EncodedSpace(mapspace)
        caps: frozenset[Cap] = getattr(searcher_cls, "capabilities", frozenset())
        o = self.options
        if o.budget is None and o.time_limit_s is None and o.early_stop is None and Cap.FINITE not in caps:
            raise SpecError(f"searcher {getattr(searcher_cls, 'name', searcher_cls.__name__)!r} never runs out "
                            "of points: give a budget, a time limit or an early stop")
        self.multi = objective.is_pareto and Cap.MULTI_OBJECTIVE in caps
        root = np.random.SeedSequence(self.seed)
        (searcher_seed,) = root.spawn(1)
        self.initial = None if initial is None else np.asarray(initial, dtype=np.int64).reshape(-1, self.space.n_params)
        self.initial_evaluations = int(initial_evaluations)
        # the searcher plans with what the warm start leaves of the budget
        spent = self.initial_evaluations + (0 if self.initial is None else len(self.initial))
        hint = None if self.options.budget is None else max(1, self.options.budget - spent)
        self.searcher = searcher_cls(
            self.space, n_objectives=objective.n_objectives if self.multi else 1, seed=searcher_seed,
            budget_hint=hint, **self.searcher_options,
        )
        self.state = _State()
        self._stop_requested = False
        self._n_levels = int(getattr(arch, "n_levels", 0))
        self._level_names = tuple(getattr(arch, "level_names", ()))

    # --- configuration and fingerprint -----------------------------------------------
    def config(self) -> dict[str, Any]:
        o = self.options
        return {
            "problem": getattr(self.problem, "name", str(self.problem)),
            "arch": getattr(self.arch, "name", str(self.arch)),
            "model": self.model_name,
            "searcher": self.searcher_name,
            "objective": self.objective.name,
            "budget": o.budget,
            "time_limit_s": o.time_limit_s,
            "early_stop": o.early_stop,
            "batch_size": o.batch_size,
            "seed": self.seed,
            "searcher_options": _jsonable(self.searcher_options),
            "checkpoint": str(o.checkpoint) if o.checkpoint else None,
            **_jsonable(self.extra_config),
        }

    def fingerprint(self) -> str:
        """Hash of everything that must match for a checkpoint to be resumed."""
        parts = [repr(self.problem), repr(self.arch), self.model_name, self.searcher_name,
                 self.objective.name, str(self.seed), repr(sorted(self.searcher_options.items())),
                 repr(self.space.param_names), repr(self.space.bounds.tolist()),
                 repr(sorted(self.extra_config.items()))]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    # --- evaluation ---------------------------------------------------------------------
    def evaluate(self, x: IntArray) -> tuple[FloatArray, FloatArray, BoolArray, IntArray, IntArray]:
        """Energy (pJ), cycles, validity, reason and reason level of encoded points.

        The MapSpace check runs first; the cost model scores only the rows it passes (an
        illegal row needs no cost), and the rows the model rejects keep its reason.
        """
        batch = self.mapspace.decode(x)
        chk = self.mapspace.check(batch)
        n = len(batch)
        energy = np.full(n, np.inf)
        cycles = np.full(n, np.inf)
        reason = np.asarray(chk.reason, dtype=np.int64).copy()
        level = np.asarray(chk.level, dtype=np.int64).copy()
        ok = np.asarray(chk.valid, dtype=bool)
        idx = np.flatnonzero(ok)
        if idx.size:
            sub = batch if idx.size == n else batch.take(idx)
            # A model that can skip its per-level counts (``evaluate_objective``) gives only
            # the fields read here; others give full `Metrics`.
            fast = getattr(self.model, "evaluate_objective", None)
            m = (fast or self.model.evaluate)(self.problem, self.arch, sub)
            good = np.asarray(m.valid, dtype=bool) & np.isfinite(m.cycles) & np.isfinite(m.energy_pj)
            energy[idx] = np.where(good, m.energy_pj, np.inf)
            cycles[idx] = np.where(good, m.cycles, np.inf)
            mr = np.asarray(m.reason, dtype=np.int64)
            reason[idx] = np.where(good, 0, np.where(mr != 0, mr, int(Reason.MODEL)))
            level[idx] = np.where(good, -1, np.asarray(m.reason_level, dtype=np.int64))
        return energy, cycles, reason == 0, reason, level

    # --- the loop ----------------------------------------------------------------------
    def run(self) -> SearchResult:
        """Search until a stop condition holds; return the result."""
        o = self.options
        if o.checkpoint is not None and Path(o.checkpoint).exists():
            self._load_checkpoint(Path(o.checkpoint))
        st = self.state
        bar = _progress(o, st.n_evals, self.objective.name)
        t0 = time.perf_counter()
        base_elapsed = st.elapsed_s
        last_ckpt = time.perf_counter()
        restore = self._install_sigint()
        interrupted = False
        try:
            if st.n_evals == 0 and (self.initial is not None or self.initial_evaluations):
                self._warm_start()
                if bar is not None:
                    bar.update(st.n_evals)
            while True:
                st.elapsed_s = base_elapsed + (time.perf_counter() - t0)
                reason = self._should_stop()
                if reason:
                    st.stop_reason = reason
                    break
                n = o.batch_size or self.searcher.batch_size
                if o.budget is not None:
                    n = min(n, o.budget - st.n_evals)
                x = np.asarray(self.searcher.ask(int(n)), dtype=np.int64)
                if x.shape[0] == 0:
                    st.stop_reason = "exhausted"
                    break
                if x.shape[0] > n or x.ndim != 2 or x.shape[1] != self.space.n_params:
                    raise RuntimeError(
                        f"searcher {self.searcher_name!r} returned shape {x.shape} for ask({n}); "
                        f"expected (<= {n}, {self.space.n_params})"
                    )
                energy, cycles, valid, rsn, lvl = self.evaluate(x)
                values = self.objective.values(energy, cycles, valid)
                told = values if self.multi else self.objective.scalarize(values)
                self.searcher.tell(x, told, valid)
                st.elapsed_s = base_elapsed + (time.perf_counter() - t0)
                self._record(x, values, valid, rsn, lvl)
                if bar is not None:
                    bar.update(int(x.shape[0]))
                    if math.isfinite(st.best_scalar):
                        bar.set_postfix_str(f"best {self.objective.name}={st.best_scalar:.4g}", refresh=False)
                if o.checkpoint is not None and time.perf_counter() - last_ckpt >= o.checkpoint_every_s:
                    self._save_checkpoint(Path(o.checkpoint))
                    last_ckpt = time.perf_counter()
        except KeyboardInterrupt:
            # a second Ctrl-C (or one outside the main thread) lands here: the searcher may
            # be mid-update, so keep the last consistent checkpoint and stop.
            interrupted = True
            st.stop_reason = "interrupted"
        finally:
            restore()
            if bar is not None:
                bar.close()
        st.elapsed_s = base_elapsed + (time.perf_counter() - t0)
        if o.checkpoint is not None and not interrupted:
            self._save_checkpoint(Path(o.checkpoint))
        return self._result()

    def _warm_start(self) -> None:
        st = self.state
        st.n_evals += self.initial_evaluations
        if self.initial is None or len(self.initial) == 0:
            return
        x = self.initial
        energy, cycles, valid, rsn, lvl = self.evaluate(x)
        values = self.objective.values(energy, cycles, valid)
        self._record(x, values, valid, rsn, lvl)
        seed = getattr(self.searcher, "seed_points", None)
        if seed is not None:
            seed(x, values if self.multi else self.objective.scalarize(values), valid)

    def _should_stop(self) -> str:
        o, st = self.options, self.state
        if self._stop_requested:
            return "interrupted"
        if o.budget is not None and st.n_evals >= o.budget:
            return "budget"
        if o.time_limit_s is not None and st.elapsed_s >= o.time_limit_s:
            return "time"
        if o.early_stop is not None and st.best_x is not None and st.n_evals - st.evals_at_best >= o.early_stop:
            return "early_stop"
        if self.searcher.done:
            return "exhausted"
        return ""

    def _record(self, x: IntArray, values: FloatArray, valid: BoolArray, rsn: IntArray, lvl: IntArray) -> None:
        st = self.state
        scalar = self.objective.scalarize(values)
        st.n_evals += int(x.shape[0])
        st.n_valid += int(valid.sum())
        if valid.any():
            i = int(np.argmin(scalar))
            if scalar[i] < st.best_scalar:
                st.best_scalar = float(scalar[i])
                st.best_x = x[i].copy()
                st.evals_at_best = st.n_evals
                st.hist_evals.append(st.n_evals)
                st.hist_seconds.append(round(st.elapsed_s, 6))
                st.hist_best.append(st.best_scalar)
            if self.objective.is_pareto:
                f = values[valid]
                xs = x[valid]
                if st.front_f is not None:
                    f = np.concatenate([st.front_f, f])
                    xs = np.concatenate([st.front_x, xs])
                keep = non_dominated(f)
                st.front_f, st.front_x = f[keep], xs[keep]
        bad = ~valid
        if bad.any():
            codes, counts = np.unique(rsn[bad] * 1024 + (lvl[bad] + 1), return_counts=True)
            for code, count in zip(codes.tolist(), counts.tolist(), strict=False):
                key = self._reason_key(code // 1024, code % 1024 - 1)
                st.invalid[key] = st.invalid.get(key, 0) + int(count)

    def _reason_key(self, reason: int, level: int) -> str:
        try:
            name = Reason(reason).name.lower()
        except ValueError:
            name = f"reason{reason}"
        if 0 <= level < len(self._level_names):
            return f"{name}@{self._level_names[level]}"
        return name

    # --- Ctrl-C ---------------------------------------------------------------------------
    def _install_sigint(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum: int, frame: Any) -> None:
            if self._stop_requested:  # second Ctrl-C: stop at once
                signal.signal(signal.SIGINT, previous if callable(previous) else signal.default_int_handler)
                raise KeyboardInterrupt
            self._stop_requested = True

        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main interpreter
            return lambda: None

        def restore() -> None:
            signal.signal(signal.SIGINT, previous)

        return restore

    def request_stop(self) -> None:
        """Ask the loop to stop after the current batch (what the first Ctrl-C does)."""
        self._stop_requested = True

    # --- checkpoints -------------------------------------------------------------------
    def _save_checkpoint(self, path: Path) -> None:
        payload = {
            "format": CHECKPOINT_FORMAT,
            "fingerprint": self.fingerprint(),
            "config": self.config(),
            "driver": self.state,
            "searcher": self.searcher.state_dict(),
            "versions": versions(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        with open(tmp, "wb") as fh:
            pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)

    def _load_checkpoint(self, path: Path) -> None:
        try:
            with open(path, "rb") as fh:
                payload = pickle.load(fh)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            raise SpecError(
                f"{path}: not a readable accelmap checkpoint ({exc}); delete it or pass another path"
            ) from exc
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise SpecError(f"{path}: not an accelmap search checkpoint (format {CHECKPOINT_FORMAT}); "
                            "delete it or pass another path")
        if payload["fingerprint"] != self.fingerprint():
            old = payload.get("config", {})
            diff = {k: (old.get(k), v) for k, v in self.config().items()
                    if k not in ("budget", "time_limit_s", "early_stop", "checkpoint") and old.get(k) != v}
            raise SpecError(
                f"{path}: checkpoint belongs to a different search (differs in: "
                f"{', '.join(f'{k} {a!r} -> {b!r}' for k, (a, b) in diff.items()) or 'problem/arch/space'}); "
                "resume with the same layer, arch, model, searcher, objective, seed and options, "
                "or delete the checkpoint"
            )
        self.state = payload["driver"]
        self.state.stop_reason = ""
        self.searcher.load_state_dict(payload["searcher"])

    # --- result ----------------------------------------------------------------------------
    def _result(self) -> SearchResult:
        st = self.state
        if st.best_x is None and st.stop_reason != "interrupted":
            raise InfeasibleSpaceError(self._infeasible_message())
        hist = History(evaluations=tuple(st.hist_evals) + (st.n_evals,),
                       seconds=tuple(st.hist_seconds) + (round(st.elapsed_s, 6),),
                       best=tuple(st.hist_best) + (st.best_scalar,))
        best = best_x = best_metrics = best_json = None
        if st.best_x is not None:
            bx = st.best_x[None]
            batch = self.mapspace.decode(bx)
            metrics = self.model.evaluate(self.problem, self.arch, batch)
            best = batch[0]
            best_x = tuple(int(v) for v in st.best_x)
            best_metrics = metrics.row(0)
            best_json = mapping_to_json(best, self.problem, self.arch)
        pareto = None
        if self.objective.is_pareto and st.front_x is not None and st.front_f is not None:
            order = np.lexsort((st.front_f[:, 1], st.front_f[:, 0]))
            fx = st.front_x[order]
            batch = self.mapspace.decode(fx)
            metrics = self.model.evaluate(self.problem, self.arch, batch)
            pareto = tuple(
                {"energy_pj": float(metrics.energy_pj[i]), "cycles": float(metrics.cycles[i]),
                 "edp": float(metrics.edp[i]), "x": [int(v) for v in fx[i]],
                 "mapping": mapping_to_json(batch[i], self.problem, self.arch)}
                for i in range(len(batch))
            )
        return SearchResult(
            problem=getattr(self.problem, "name", str(self.problem)),
            arch=getattr(self.arch, "name", str(self.arch)),
            model=self.model_name, searcher=self.searcher_name, objective=self.objective,
            best=best, best_x=best_x, best_metrics=best_metrics, best_objective=st.best_scalar,
            pareto=pareto, history=hist, n_evaluations=st.n_evals, n_valid=st.n_valid,
            elapsed_s=round(st.elapsed_s, 6), stop_reason=st.stop_reason or "budget",
            invalid_reasons=dict(sorted(st.invalid.items(), key=lambda kv: -kv[1])),
            lower_bound=self.lower_bound, config=self.config(), seed=self.seed,
            best_mapping_json=best_json,
        )

    def _infeasible_message(self) -> str:
        st = self.state
        name = getattr(self.problem, "name", "the problem")
        total = max(st.n_evals, 1)
        parts = [f"{100.0 * c / total:.0f}% {_describe(k)}" for k, c in
                 sorted(st.invalid.items(), key=lambda kv: -kv[1])[:4]]
        return (f"0 of {st.n_evals:,} evaluated mappings of {name} on "
                f"{getattr(self.arch, 'name', 'the arch')} are legal"
                + (f": {', '.join(parts)}" if parts else "")
                + ". Try a larger budget, a larger buffer, fewer constraints"
                + (", or imperfect factorization." if not getattr(self.mapspace, "allow_padding", True)
                   and getattr(self.model, "imperfect_factorization", True) else "."))


def _describe(key: str) -> str:
    reason, _, level = key.partition("@")
    where = f" {level}" if level else ""
    return {
        "capacity": f"exceed the capacity of{where or ' a level'}",
        "fanout": f"exceed the fanout below{where or ' a level'}",
        "utilization": "are below the minimum utilization",
        "constraint": "violate a constraint",
        "keep": f"keep a tensor{where} may not hold",
        "factors": "have factors that do not multiply out",
    }.get(reason, f"are illegal ({key})")


def _progress(o: DriverOptions, initial: int, objective_name: str) -> Any:
    if not o.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=o.budget, initial=initial, unit="eval", unit_scale=True, dynamic_ncols=True,
                desc="search", leave=True)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, Path):
        return str(v)
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return repr(v)
