"""`optuna`: Optuna samplers (TPE, CMA-ES, NSGA-II, GP) over the structural choices.

An Optuna trial costs milliseconds of sampler time while the batched cost model scores a
mapping in about a microsecond, so a trial that proposed one mapping would leave the cost
model idle. Here each trial carries real work:

1. the trial (``study.ask``) fixes the *structural* parameters: every parameter of kind
   ``order``, ``spatial`` and ``keep`` (loop orders, spatial unrolling, bypass);
2. a vectorized inner search completes the tiling: ``inner`` points with those structural
   values and uniformly drawn ``tile`` parameters, then ``refine`` rounds of neighbour
   moves around the trial's best tiling (structural parameters held fixed);
3. the trial reports the best objective of its inner search (``study.tell``).

Several trials are open at once (``trials_per_ask``), so one ask is a few thousand
points. Samplers: ``tpe`` (default for one objective; multivariate, constant liar since
trials are pending together), ``nsga2`` (default for the energy-cycles Pareto objective),
``cmaes`` (needs the ``cmaes`` package) and ``gp`` (needs ``torch``), plus ``random``.
The study lives in memory unless ``storage`` names an Optuna storage URL such as
``sqlite:///study.db``, which optuna-dashboard can read.
"""

from __future__ import annotations

import importlib.util
import math
import pickle
import warnings
from typing import Any, ClassVar

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import SpecError, UnknownPluginError
from accelmap.search.base import Cap, SearcherBase, SearchSpace

__all__ = ["OptunaSearcher", "SAMPLERS"]

SAMPLERS = ("tpe", "nsga2", "cmaes", "gp", "random")
_PENALTY = 1e300  # reported for a trial whose inner search found nothing legal


def _optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class OptunaSearcher(SearcherBase):
    """Optuna ask/tell over structural parameters with a vectorized inner tiling search.

    Parameters
    ----------
    sampler
        ``"tpe"``, ``"nsga2"``, ``"cmaes"``, ``"gp"`` or ``"random"`` (None = tpe for one
        objective, nsga2 for two).
    inner
        Uniform tilings per trial (default 1024).
    refine
        Rounds of neighbour refinement per trial (default 1), each ``inner // 2`` points.
    trials_per_ask
        Trials open at once (default 4).
    storage
        Optuna storage URL (None = in memory), e.g. ``"sqlite:///study.db"``.
    study_name
        Study name in the storage (default ``"accelmap"``); an existing study is resumed.
    n_startup_trials
        Random trials before the model-based sampler starts (default 10).
    """

    name: ClassVar[str] = "optuna"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.MULTI_OBJECTIVE, Cap.SEEDABLE, Cap.CHECKPOINT})
    default_budget: ClassVar[int] = 100_000

    def __init__(self, space: SearchSpace, *, n_objectives: int = 1,
                 seed: np.random.SeedSequence | int | None = None, budget_hint: int | None = None,
                 sampler: str | None = None, inner: int = 1024, refine: int = 1, trials_per_ask: int = 4,
                 storage: str | None = None, study_name: str = "accelmap",
                 n_startup_trials: int = 10) -> None:
        super().__init__(space, n_objectives=n_objectives, seed=seed, budget_hint=budget_hint)
        for key, v in (("inner", inner), ("trials_per_ask", trials_per_ask), ("n_startup_trials", n_startup_trials)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"optuna searcher: {key} = {v!r}; expected an int >= 1")
        if isinstance(refine, bool) or not isinstance(refine, int) or refine < 0:
            raise SpecError(f"optuna searcher: refine = {refine!r}; expected an int >= 0")
        sampler = sampler or ("nsga2" if self.n_objectives > 1 else "tpe")
        if sampler not in SAMPLERS:
            raise SpecError(f"optuna searcher: sampler = {sampler!r}; expected one of {list(SAMPLERS)}")
        need = {"cmaes": "cmaes", "gp": "torch"}.get(sampler)
        if need and importlib.util.find_spec(need) is None:
            raise UnknownPluginError(
                f"optuna sampler {sampler!r} needs the {need!r} package, which is not installed; "
                + ("`pip install 'accelmap[cmaes]'`" if need == "cmaes" else f"`pip install {need}`")
                + " or choose sampler 'tpe', 'nsga2' or 'random'"
            )
        self.sampler_name = sampler
        self.inner = inner
        self.refine = refine
        self.trials_per_ask = trials_per_ask
        self.storage = storage
        self.study_name = study_name
        self.n_startup_trials = n_startup_trials
        kinds = np.array(space.param_kinds)
        self.outer = np.flatnonzero(kinds != "tile")
        self.tile = np.flatnonzero(kinds == "tile")
        self._sampler_seed = int(self.seed_seq.generate_state(1)[0])
        self.study = self._create_study()
        # per open trial: number, fixed outer values, best x / scalar / values, rounds left, points
        self._open: list[dict[str, Any]] = []
        self._slices: list[tuple[int, int, int]] = []  # (open index, start, stop) of the last ask
        self.n_trials = 0

    @property
    def batch_size(self) -> int:
        return self.inner * self.trials_per_ask

    # --- study -----------------------------------------------------------------------------
    def _make_sampler(self) -> Any:
        optuna = _optuna()
        s = self.sampler_name
        seed = self._sampler_seed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental-feature warnings
            if s == "tpe":
                return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                                  n_startup_trials=self.n_startup_trials)
            if s == "nsga2":
                return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(8, 2 * self.trials_per_ask))
            if s == "cmaes":
                return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=self.n_startup_trials)
            if s == "gp":
                return optuna.samplers.GPSampler(seed=seed, n_startup_trials=self.n_startup_trials)
            return optuna.samplers.RandomSampler(seed=seed)

    def _create_study(self) -> Any:
        optuna = _optuna()
        directions = ["minimize"] * self.n_objectives
        return optuna.create_study(sampler=self._make_sampler(), storage=self.storage,
                                   study_name=self.study_name if self.storage else None,
                                   directions=directions, load_if_exists=bool(self.storage))

    def _distributions(self) -> dict[str, Any]:
        optuna = _optuna()
        b = np.asarray(self.space.bounds)
        return {self.space.param_names[i]: optuna.distributions.IntDistribution(0, int(b[i]) - 1)
                for i in self.outer}

    # --- ask/tell ----------------------------------------------------------------------------
    def ask(self, n: int) -> IntArray:
        n = max(1, int(n))
        refining = [k for k, t in enumerate(self._open) if t["best_x"] is not None and t["rounds"] > 0]
        if refining:
            return self._ask_refine(refining, n)
        return self._ask_new(n)

    def _ask_new(self, n: int) -> IntArray:
        k = max(1, min(self.trials_per_ask, n // max(1, min(self.inner, n))))
        per = max(1, n // k)
        dists = self._distributions()
        rows, self._slices = [], []
        start = 0
        for _ in range(k):
            trial = self.study.ask(dists)
            fixed = np.array([trial.params[self.space.param_names[i]] for i in self.outer], dtype=np.int64)
            x = self.space.sample(per, self.rng)
            x[:, self.outer] = fixed
            self._open.append({"number": trial.number, "fixed": fixed,
                               "best_x": None, "best_s": math.inf, "best_v": None, "rounds": self.refine,
                               "n": 0})
            self._slices.append((len(self._open) - 1, start, start + per))
            rows.append(x)
            start += per
        return np.concatenate(rows)

    def _ask_refine(self, refining: list[int], n: int) -> IntArray:
        per = max(1, min(max(1, self.inner // 2), n // len(refining)))
        refining = refining[: max(1, n // per)]
        rows, self._slices = [], []
        start = 0
        for k in refining:
            t = self._open[k]
            base = np.repeat(t["best_x"][None], per, axis=0)
            x = self.space.neighbours(base, self.rng)
            twice = self.rng.random(per) < 0.5
            if twice.any():
                x[twice] = self.space.neighbours(x[twice], self.rng)
            if len(self.tile):  # also redraw one tile parameter in a third of the rows
                x = self._redraw(x, self.rng.random(per) < 0.33, self.kind_mask("tile"))
            x[:, self.outer] = t["fixed"]  # the trial's structural choice stays fixed
            t["rounds"] -= 1
            self._slices.append((k, start, start + per))
            rows.append(x)
            start += per
        return np.concatenate(rows)

    def tell(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        v = np.asarray(objective, dtype=np.float64).reshape(len(x), -1)
        s = v.prod(axis=1) if v.shape[1] > 1 else v[:, 0]
        s = np.where(np.asarray(valid, dtype=bool), s, np.inf)
        for k, a, b in self._slices:
            t = self._open[k]
            t["n"] += b - a
            if b > a:
                i = a + int(np.argmin(s[a:b]))
                if s[i] < t["best_s"] or t["best_x"] is None:
                    t["best_s"], t["best_x"], t["best_v"] = float(s[i]), x[i].copy(), v[i].copy()
        self._slices = []
        still = []
        for t in self._open:
            if t["rounds"] > 0 and t["best_x"] is not None and math.isfinite(t["best_s"]):
                still.append(t)
                continue
            self._finish(t)
        self._open = still

    def _finish(self, t: dict[str, Any]) -> None:
        if t["best_v"] is None or not math.isfinite(t["best_s"]):
            values: Any = [_PENALTY] * self.n_objectives
        else:
            values = [float(min(val, _PENALTY)) for val in t["best_v"]]
        # study.tell takes the trial number, so open trials survive a checkpoint round trip
        self.study.tell(t["number"], values if self.n_objectives > 1 else values[0])
        self.n_trials += 1

    # --- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("space", "study")}
        if self.storage is None:
            state["study_pickle"] = pickle.dumps(self.study)
        else:  # the study lives in the storage; keep the sampler (its RNG) only
            state["sampler_pickle"] = pickle.dumps(self.study.sampler)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        study = state.pop("study_pickle", None)
        sampler = state.pop("sampler_pickle", None)
        self.__dict__.update(state)
        if study is not None:
            self.study = pickle.loads(study)
        else:
            optuna = _optuna()
            self.study = optuna.load_study(study_name=self.study_name, storage=self.storage,
                                           sampler=pickle.loads(sampler) if sampler else self._make_sampler())
