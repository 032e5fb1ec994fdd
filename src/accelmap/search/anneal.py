"""`anneal`: simulated annealing over MapSpace neighbours, many chains at once.

After a random warm-up (uniform samples; the best distinct points seed the chains), every
step proposes one neighbour per chain (`MapSpace.neighbours`: move a prime factor between
levels, swap two loops, change a spatial or bypass choice; sometimes two or three moves at
once) and accepts it with the Metropolis rule on the *log* of the objective::

    accept  if  log f' <= log f   or   u < exp(-(log f' - log f) / T)     (u ~ U(0, 1))

(Kirkpatrick, Gelatt & Vecchi, Science 1983), for all chains in one vectorized step. The
log makes the temperature scale-free: T = 0.1 accepts a 10% worse mapping with probability
about exp(-0.95). T falls geometrically from ``t_start`` to ``t_end`` over the budget (or
per step when only a time limit is known). Every ``elite_every`` steps the worst quarter of
the chains restart from the best points found so far (a population-annealing style
resampling, which is what makes many short chains converge within a small budget).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import SpecError
from accelmap.search.base import Cap, SearcherBase, SearchSpace

__all__ = ["AnnealSearcher"]


class AnnealSearcher(SearcherBase):
    """Vectorized many-chain simulated annealing with a random warm-up.

    Parameters
    ----------
    chains
        Chains stepped together (one neighbour each per ask); default 256.
    warmup
        Uniform samples before annealing (None = 10% of the budget, at least 4 x chains,
        at most 50_000).
    t_start, t_end
        Start and end temperatures in units of log-objective.
    multi_move
        Probability that a proposal applies 2-3 neighbour moves instead of one.
    elite_every
        Steps between restarts of the worst quarter of the chains from the elite.
    """

    name: ClassVar[str] = "anneal"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.SEEDABLE, Cap.CHECKPOINT})
    default_budget: ClassVar[int] = 100_000

    def __init__(self, space: SearchSpace, *, n_objectives: int = 1,
                 seed: np.random.SeedSequence | int | None = None, budget_hint: int | None = None,
                 chains: int = 256, warmup: int | None = None, t_start: float = 0.3,
                 t_end: float = 0.003, multi_move: float = 0.25, elite_every: int = 10) -> None:
        super().__init__(space, n_objectives=n_objectives, seed=seed, budget_hint=budget_hint)
        for key, v in (("chains", chains), ("elite_every", elite_every)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"anneal searcher: {key} = {v!r}; expected an int >= 1")
        if not (t_start > 0 and t_end > 0 and t_end <= t_start):
            raise SpecError(f"anneal searcher: t_start = {t_start!r}, t_end = {t_end!r}; "
                             "expected 0 < t_end <= t_start")
        if not 0 <= multi_move <= 1:
            raise SpecError(f"anneal searcher: multi_move = {multi_move!r}; expected a probability")
        self.chains = chains
        if warmup is None:
            warmup = int(min(50_000, max(4 * chains, 0.1 * (budget_hint or 0))))
        self.warmup = int(warmup)
        self.t_start = float(t_start)
        self.t_end = float(t_end)
        self.multi_move = float(multi_move)
        self.elite_every = elite_every
        self.seen = 0  # points told so far
        self.step = 0
        self.pool_x = np.zeros((0, space.n_params), dtype=np.int64)  # warm-up elite
        self.pool_f = np.zeros(0)
        self.cur_x: IntArray | None = None
        self.cur_f: FloatArray | None = None
        self._idx: IntArray | None = None  # chains of the pending proposals
        self._cursor = 0

    @property
    def batch_size(self) -> int:
        if self.seen < self.warmup:
            return max(1, min(4096, self.warmup - self.seen))
        return self.chains

    def temperature(self) -> float:
        """Current temperature (log-objective units)."""
        if self.budget_hint:
            span = max(self.budget_hint - self.warmup, 1)
            frac = min(max((self.seen - self.warmup) / span, 0.0), 1.0)
        else:  # time-limited: cool over ~400 steps, then stay cold
            frac = min(self.step / 400.0, 1.0)
        return self.t_start * (self.t_end / self.t_start) ** frac

    def ask(self, n: int) -> IntArray:
        n = int(n)
        if self.seen < self.warmup or self.cur_x is None and len(self.pool_x) == 0:
            return self.space.sample(max(1, min(n, max(self.warmup - self.seen, 1))), self.rng)
        if self.cur_x is None:
            self._start_chains()
        m = min(n, self.chains)
        if m == self.chains:
            idx = np.arange(self.chains)
        else:  # a partial step: rotate through the chains
            idx = (self._cursor + np.arange(m)) % self.chains
            self._cursor = int((self._cursor + m) % self.chains)
        self._idx = idx
        y = self.space.neighbours(self.cur_x[idx], self.rng)
        extra = self.rng.random(m) < self.multi_move
        for _ in range(2):
            if not extra.any():
                break
            y[extra] = self.space.neighbours(y[extra], self.rng)
            extra &= self.rng.random(m) < 0.5
        return y

    def _start_chains(self) -> None:
        k = len(self.pool_x)
        reps = np.resize(np.arange(k), self.chains)  # repeat the elite if it is small
        self.cur_x = self.pool_x[reps].copy()
        self.cur_f = self.pool_f[reps].copy()

    def tell(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        f = _log(objective, valid)
        if self._idx is None:  # warm-up
            self.seen += len(x)
            px = np.concatenate([self.pool_x, x])
            pf = np.concatenate([self.pool_f, f])
            _, first = np.unique(px, axis=0, return_index=True)
            px, pf = px[first], pf[first]
            keep = np.argsort(pf, kind="stable")[: self.chains]
            self.pool_x, self.pool_f = px[keep], pf[keep]
            return
        idx = self._idx
        self._idx = None
        self.seen += len(x)
        self.step += 1
        t = self.temperature()
        old = self.cur_f[idx]
        with np.errstate(invalid="ignore", over="ignore"):
            delta = f - old
            both_bad = ~np.isfinite(f) & ~np.isfinite(old)
            p = np.where(np.isfinite(delta), np.exp(-np.maximum(delta, 0.0) / t), 0.0)
        p = np.where(both_bad, 0.5, np.where(np.isfinite(f) & ~np.isfinite(old), 1.0, p))
        accept = self.rng.random(len(idx)) < p
        self.cur_x[idx[accept]] = x[accept]
        self.cur_f[idx[accept]] = f[accept]
        # keep the elite pool of the best distinct points seen
        better = f < (self.pool_f.max() if len(self.pool_f) else math.inf)
        if better.any():
            px = np.concatenate([self.pool_x, x[better]])
            pf = np.concatenate([self.pool_f, f[better]])
            _, first = np.unique(px, axis=0, return_index=True)
            px, pf = px[first], pf[first]
            keep = np.argsort(pf, kind="stable")[: max(8, self.chains // 8)]
            self.pool_x, self.pool_f = px[keep], pf[keep]
        if self.step % self.elite_every == 0 and len(self.pool_x):
            worst = np.argsort(-self.cur_f, kind="stable")[: self.chains // 4]
            pick = self.rng.integers(0, len(self.pool_x), size=len(worst))
            self.cur_x[worst] = self.pool_x[pick]
            self.cur_f[worst] = self.pool_f[pick]


def _log(objective: FloatArray, valid: BoolArray) -> FloatArray:
    v = np.asarray(objective, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.log(np.maximum(v, 1e-300))
    return np.where(np.asarray(valid, dtype=bool) & np.isfinite(f), f, np.inf)
