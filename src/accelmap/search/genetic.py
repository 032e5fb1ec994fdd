"""`genetic`: a GAMMA-style genetic algorithm on DEAP, one batch per generation.

GAMMA (Kao & Krishna, "GAMMA: Automating the HW Mapping of DNN Models on Accelerators via
Genetic Algorithm", ICCAD 2020) encodes a mapping as genes per level (tile sizes, loop
order, parallelized dims) and evolves them with operators that respect that structure.
Here the genes are the MapSpace encoding (one row of the encoded array per individual) and
the operators are vectorized over the whole offspring array:

* **crossover of whole levels**: a child takes each level (its temporal and spatial
  factors, order and bypass) from one of two parents, then `MapSpace.repair` makes the
  factors multiply out again (GAMMA's crossover across levels);
* **move a prime factor between levels / swap two loops**: `MapSpace.neighbours`
  (GAMMA's "reorder" and tile mutations);
* **change the unrolled dims**: redraw one ``spatial`` gene (GAMMA's "grow"/parallel-dim
  mutation);
* **flip bypass**: redraw one ``keep`` gene;
* a larger jump: redraw one ``order`` or ``tile`` gene.

DEAP provides the evolutionary machinery: `creator` fitness/individual types, a `toolbox`
with tournament selection (single objective) or NSGA-II selection (Deb et al. 2002; the
energy-cycles Pareto objective), a `HallOfFame` of elites carried into every generation,
and a `Logbook` of per-generation statistics. Each individual is a light object that holds
its row; the population is scored as ONE batch per generation (the driver evaluates the
array that :meth:`GeneticSearcher.ask` returns).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import SpecError
from accelmap.search.base import Cap, SearcherBase, SearchSpace

__all__ = ["GeneticSearcher"]

_BIG = 1e300  # stands in for inf inside DEAP (its crowding distance dislikes inf)
_OPERATORS = ("neighbour", "spatial", "keep", "order", "tile")


class _Row:
    """A DEAP individual: one row of the encoded population (``x``) and its index."""

    def __init__(self, x: IntArray, index: int) -> None:
        self.x = x
        self.index = index


def _deap() -> tuple[Any, Any, Any]:
    from deap import base, creator, tools

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # creator warns when a class exists
        for m in (1, 2):
            fit = f"AccelmapFitnessMin{m}"
            if not hasattr(creator, fit):
                creator.create(fit, base.Fitness, weights=(-1.0,) * m)
            ind = f"AccelmapIndividual{m}"
            if not hasattr(creator, ind):
                creator.create(ind, _Row, fitness=getattr(creator, fit))
    return base, creator, tools


class GeneticSearcher(SearcherBase):
    """GAMMA-style GA with DEAP selection, elitism and a logbook.

    Parameters
    ----------
    population
        Individuals per generation (default 256).
    init_factor
        Generation 0 draws ``init_factor x population`` uniform samples and keeps the best
        (default 4).
    elite
        Hall-of-fame size, copied unchanged into every generation (default 8).
    tournament
        Tournament size for single-objective selection (default 3).
    cx_prob
        Probability that a child is a level crossover of two parents (default 0.5).
    mut_prob
        Probability that a child is mutated (default 0.9).
    mutation_weights
        Relative weights of the operators ``neighbour``, ``spatial``, ``keep``, ``order``,
        ``tile`` (default 0.5, 0.15, 0.1, 0.1, 0.15).
    """

    name: ClassVar[str] = "genetic"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.MULTI_OBJECTIVE, Cap.SEEDABLE, Cap.CHECKPOINT})
    default_budget: ClassVar[int] = 100_000

    def __init__(self, space: SearchSpace, *, n_objectives: int = 1,
                 seed: np.random.SeedSequence | int | None = None, budget_hint: int | None = None,
                 population: int = 256, init_factor: int = 4, elite: int = 8, tournament: int = 3,
                 cx_prob: float = 0.5, mut_prob: float = 0.9,
                 mutation_weights: dict[str, float] | None = None) -> None:
        super().__init__(space, n_objectives=n_objectives, seed=seed, budget_hint=budget_hint)
        for key, v in (("population", population), ("init_factor", init_factor), ("tournament", tournament)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"genetic searcher: {key} = {v!r}; expected an int >= 1")
        if isinstance(elite, bool) or not isinstance(elite, int) or not 0 <= elite < population:
            raise SpecError(f"genetic searcher: elite = {elite!r}; expected 0 <= elite < population")
        for key, p in (("cx_prob", cx_prob), ("mut_prob", mut_prob)):
            if not 0 <= p <= 1:
                raise SpecError(f"genetic searcher: {key} = {p!r}; expected a probability")
        w = {"neighbour": 0.5, "spatial": 0.15, "keep": 0.1, "order": 0.1, "tile": 0.15}
        if mutation_weights is not None:
            unknown = sorted(set(mutation_weights) - set(_OPERATORS))
            if unknown:
                raise SpecError(f"genetic searcher: unknown mutation operators {unknown}; known: {list(_OPERATORS)}")
            w.update({k: float(v) for k, v in mutation_weights.items()})
        # an operator whose genes do not exist in this space gets no weight
        kinds = set(space.param_kinds)
        for op in ("spatial", "keep", "order", "tile"):
            if op not in kinds:
                w[op] = 0.0
        total = sum(w.values())
        if total <= 0:
            raise SpecError("genetic searcher: every mutation weight is zero")
        self.weights = np.array([w[k] / total for k in _OPERATORS])
        self.population = population
        self.init_factor = init_factor
        self.elite = elite
        self.tournament = tournament
        self.cx_prob = float(cx_prob)
        self.mut_prob = float(mut_prob)
        self.generation = 0
        self.pop_x: IntArray | None = None  # (population, n_params)
        self.pop_f: FloatArray | None = None  # (population, n_objectives), log objective
        self.hof_x = np.zeros((0, space.n_params), dtype=np.int64)
        self.hof_f = np.zeros((0, self.n_objectives))
        self.seed_x: IntArray | None = None  # warm-start points (generation 0)
        self.seed_f: FloatArray | None = None
        self.logbook: list[dict[str, Any]] = []  # DEAP Logbook records (a list pickles anywhere)
        self._n_levels = int(space.n_levels)

    @property
    def batch_size(self) -> int:
        return self.population * self.init_factor if self.pop_x is None else self.population

    # --- DEAP glue ------------------------------------------------------------------------
    def _individuals(self, x: IntArray, f: FloatArray) -> list[Any]:
        _, creator, _ = _deap()
        cls = getattr(creator, f"AccelmapIndividual{self.n_objectives}")
        inds = []
        for i in range(len(x)):
            ind = cls(x[i], i)
            ind.fitness.values = tuple(min(float(v), _BIG) for v in f[i])
            inds.append(ind)
        return inds

    def _toolbox(self) -> Any:
        base, _, tools = _deap()
        tb = base.Toolbox()
        if self.n_objectives > 1:
            tb.register("survive", tools.selNSGA2)
        else:
            tb.register("survive", tools.selTournament, tournsize=self.tournament)
        tb.register("parents", tools.selRandom)
        return tb

    def _select(self, fn: Any, inds: list[Any], k: int) -> IntArray:
        # DEAP's selectors draw from Python's `random`; seed it from our generator so the
        # same seed gives the same run, then restore the caller's state.
        import random as pyrandom

        saved = pyrandom.getstate()
        pyrandom.seed(int(self.rng.integers(0, 2**63 - 1)))
        try:
            chosen = fn(inds, k)
        finally:
            pyrandom.setstate(saved)
        return np.array([ind.index for ind in chosen], dtype=np.int64)

    # --- ask/tell ---------------------------------------------------------------------------
    def ask(self, n: int) -> IntArray:
        n = int(n)
        if self.pop_x is None or self.pop_f is None:
            return self.space.sample(max(1, min(n, self.population * self.init_factor)), self.rng)
        m = max(1, min(n, self.population))
        inds = self._individuals(self.pop_x, self.pop_f)
        tb = self._toolbox()
        pa = self._select(tb.parents, inds, m)
        pb = self._select(tb.parents, inds, m)
        xa, xb = self.pop_x[pa], self.pop_x[pb]
        child = xa.copy()
        cx = self.rng.random(m) < self.cx_prob
        if cx.any():
            take_b = self.rng.random((int(cx.sum()), self._n_levels)) < 0.5
            child[cx] = self.space.cross_levels(xa[cx], xb[cx], take_b)
        mut = self.rng.random(m) < self.mut_prob
        op = self.rng.choice(len(_OPERATORS), size=m, p=self.weights)
        for k, name in enumerate(_OPERATORS):
            rows = mut & (op == k)
            if not rows.any():
                continue
            if name == "neighbour":
                child[rows] = self.space.neighbours(child[rows], self.rng)
            else:
                child = self._redraw(child, rows, self.kind_mask(name))
        # a child identical to its parent wastes an evaluation: nudge it
        same = (child == xa).all(axis=1)
        if same.any():
            child[same] = self.space.neighbours(child[same], self.rng)
        return child

    def tell(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        f = _logf(objective, valid, self.n_objectives)
        base, _, tools = _deap()
        if self.pop_x is None:
            cand_x, cand_f = x, f
            if self.seed_x is not None:  # warm-start points compete for generation 0
                cand_x = np.concatenate([self.seed_x, x])
                cand_f = np.concatenate([self.seed_f, f])
        else:
            cand_x = np.concatenate([self.pop_x, x])
            cand_f = np.concatenate([self.pop_f, f])
        # drop duplicate genomes so the population keeps its diversity
        _, first = np.unique(cand_x, axis=0, return_index=True)
        first.sort()
        cand_x, cand_f = cand_x[first], cand_f[first]
        inds = self._individuals(cand_x, cand_f)
        hof = tools.HallOfFame(max(self.elite, 1), similar=lambda a, b: bool(np.array_equal(a.x, b.x)))
        hof.update(self._individuals(self.hof_x, self.hof_f) + inds if len(self.hof_x) else inds)
        if len(hof):
            self.hof_x = np.stack([h.x for h in hof.items]).astype(np.int64)
            self.hof_f = np.array([h.fitness.values for h in hof.items], dtype=np.float64)
            self.hof_f[self.hof_f >= _BIG] = np.inf
        k = min(self.population, len(cand_x))
        if self.n_objectives > 1:
            keep = self._select(self._toolbox().survive, inds, k)
            self.pop_x, self.pop_f = cand_x[keep].copy(), cand_f[keep].copy()
        elif self.generation == 0:  # initial population: the best of the uniform samples
            keep = np.argsort(cand_f[:, 0], kind="stable")[:k]
            self.pop_x, self.pop_f = cand_x[keep].copy(), cand_f[keep].copy()
        else:  # the hall of fame survives unchanged; tournaments fill the rest
            n_elite = min(self.elite, len(self.hof_x), k)
            rest = self._select(self._toolbox().survive, inds, k - n_elite)
            self.pop_x = np.concatenate([self.hof_x[:n_elite], cand_x[rest]])
            self.pop_f = np.concatenate([self.hof_f[:n_elite], cand_f[rest]])
        finite = np.isfinite(f[:, 0])
        self.logbook.append({
            "gen": self.generation, "nevals": int(len(x)),
            "min": float(f[finite, 0].min()) if finite.any() else math.inf,
            "median": float(np.median(f[finite, 0])) if finite.any() else math.inf,
            "valid": int(finite.sum()),
        })
        self.generation += 1

    def seed_points(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        """Warm-start points join the candidates of generation 0."""
        f = _logf(objective, valid, self.n_objectives)
        ok = np.isfinite(f).all(axis=1)
        self.seed_x, self.seed_f = np.asarray(x, dtype=np.int64)[ok].copy(), f[ok].copy()

    def deap_logbook(self) -> Any:
        """The per-generation statistics as a `deap.tools.Logbook`."""
        _, _, tools = _deap()
        lb = tools.Logbook()
        lb.header = ["gen", "nevals", "valid", "min", "median"]
        for rec in self.logbook:
            lb.record(**rec)
        return lb


def _logf(objective: FloatArray, valid: BoolArray, m: int) -> FloatArray:
    v = np.asarray(objective, dtype=np.float64).reshape(len(valid), -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.log(np.maximum(v, 1e-300))
    f[~np.asarray(valid, dtype=bool)] = np.inf
    f[~np.isfinite(f)] = np.inf
    if f.shape[1] != m:
        raise SpecError(f"genetic searcher got {f.shape[1]} objective columns; expected {m}")
    return f
