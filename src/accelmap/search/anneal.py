"""`anneal`: simulated annealing over MapSpace neighbours, many chains at once.

After a random warm-up (uniform samples; the best distinct points seed the chains), every
step proposes ``proposals`` neighbours per chain (`MapSpace.neighbours`: move a prime
factor between levels, swap two loops, change a spatial or bypass choice; sometimes two or
three moves at once), each chain takes the best of its proposals (a multiple-try move,
which keeps batches large while chains stay few and long) and accepts it with the
Metropolis rule on the *log* of the objective::

    accept  if  log f' <= log f   or   u < exp(-(log f' - log f) / T)     (u ~ U(0, 1))

(Kirkpatrick, Gelatt & Vecchi, Science 1983), for all chains in one vectorized step. The
log makes the temperature scale-free: T = 0.1 accepts a 10% worse mapping with
probability exp(-log(1.1) / 0.1), about 0.39. T falls geometrically from ``t_start`` to
``t_end`` over the budget (or per step when only a time limit is known). Every ``elite_every`` steps the worst quarter of
the chains restart from the best points found so far (a population-annealing style
resampling, which is what makes many short chains converge within a small budget).

With ``sweep`` > 0, a share of the budget goes, after the plain runs, to a sweep over the
keep/bypass patterns: every pattern gets a short run of its own with its keep bits held
(islands of a few chains, all stepped in one batch), and the best patterns of that round
get a longer fresh run each (`_PatternSweep`; by default 40% of budgets of 1M and more).

The last ``polish`` fraction of the budget is a vectorized coordinate descent from the
best point: for one encoded parameter at a time, *every* value of it (every factorization
of one dim over all levels, every digit of a loop order, each bypass bit) is scored in one
batch with the rest held fixed, and the best is kept; sweeps repeat in random parameter
order until a whole sweep finds nothing better, then the next-best distinct elite point is
polished. It is off by default: on the benchmark layers it found nothing the chains had
not (docs/search.md), but it is a cheap check that a result is a coordinate-wise optimum.
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
        Chains stepped together; default 64.
    proposals
        Neighbours proposed per chain and step; the chain considers the best (default 16).
    warmup
        Uniform samples before annealing. None: 10% of a run of up to 100k evaluations,
        rising linearly to 25% of a run of 200k or more; at least 4 x chains, at most
        50_000 (see `_default_warmup`).
    t_start, t_end
        Start and end temperatures in units of log-objective.
    multi_move
        Probability that a proposal applies 2-3 neighbour moves instead of one.
    elite_every
        Steps between restarts of the worst quarter of the chains from the elite.
    islands
        0 (default): restarts draw from the global elite pool; k > 0: chains form k
        groups and restart from their own group's best (more diversity, slower).
    restarts
        Independent runs the budget is split into (each with its own warm-up, chains
        and schedule); the best of all is the result. Needs a budget. None (default):
        one run per ``RUN_EVALUATIONS`` (200,000) evaluations of budget: the landscape is
        multi-modal, and a fresh run from a new warm-up is the cheapest insurance against
        a poor basin, but a run much shorter than 200k cools before its chains have
        settled (on the hardest benchmark layers a 100k run ends within 1% of the best
        known EDP about a quarter of the time or less, a 200k run about half the time).
    polish
        Fraction of the budget spent on coordinate-descent sweeps at the end (0 = none).
        Without a budget (time limit only), polishing starts once the chains have cooled.
    polish_max_values
        At most this many values of one parameter per coordinate (drawn at random when
        the parameter has more).
    sweep
        Fraction of the budget (0 = none) spent, after the plain runs, on the
        bypass-pattern sweep (`_PatternSweep`): a short run of its own for every keep/bypass
        pattern, ``sweep_chains`` chains each, then fresh runs of the ``sweep_top`` best
        patterns with what is left. Needs a budget and free keep bits;
        patterns are all 2^k of the k free keep bits, or ``sweep_patterns`` of them drawn at
        random (the last plain run's best first) when there are more. None (default):
        ``SWEEP_SHARE`` (0.4) of budgets of at least ``SWEEP_MIN_BUDGET`` (1M, the default
        budget of one layer), else none. Measured in docs/performance.md ("Bypass-pattern
        sweep"): it finds the basins a plain run does not enter, where they differ by their
        whole dataflow and tiling each is quick (GEMMs); plain runs do better on
        convolutions, hence the mix.
    """

    name: ClassVar[str] = "anneal"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.SEEDABLE, Cap.CHECKPOINT})
    default_budget: ClassVar[int] = 100_000
    #: evaluations per independent run when ``restarts`` is None (docs/search.md)
    RUN_EVALUATIONS: ClassVar[int] = 200_000
    #: the bypass-pattern sweep's share of a budget of at least SWEEP_MIN_BUDGET (``sweep``
    #: None): the default 1M buys three 200k plain runs and a 400k sweep (docs/search.md)
    SWEEP_SHARE: ClassVar[float] = 0.4
    SWEEP_MIN_BUDGET: ClassVar[int] = 1_000_000
    #: share of the bypass-pattern sweep's budget spent on its first stage (every pattern)
    SWEEP_SHARE_A: ClassVar[float] = 0.8

    def __init__(self, space: SearchSpace, *, n_objectives: int = 1,
                 seed: np.random.SeedSequence | int | None = None, budget_hint: int | None = None,
                 chains: int = 64, warmup: int | None = None, t_start: float = 1.0,
                 t_end: float = 0.003, multi_move: float = 0.5, elite_every: int = 10,
                 polish: float = 0.0, polish_max_values: int = 2048, proposals: int = 16,
                 islands: int = 0, restarts: int | None = None, sweep: float | None = None,
                 sweep_chains: int = 8, sweep_top: int = 4, sweep_patterns: int = 64) -> None:
        super().__init__(space, n_objectives=n_objectives, seed=seed, budget_hint=budget_hint)
        for key, v, low in (("chains", chains, 1), ("elite_every", elite_every, 1), ("proposals", proposals, 1),
                            ("islands", islands, 0), ("restarts", 1 if restarts is None else restarts, 1),
                            ("sweep_chains", sweep_chains, 1), ("sweep_top", sweep_top, 0),
                            ("sweep_patterns", sweep_patterns, 1), ("polish_max_values", polish_max_values, 2)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise SpecError(f"anneal searcher: {key} = {v!r}; expected an int >= {low}")
        for name, num in (("t_start", t_start), ("t_end", t_end), ("multi_move", multi_move), ("polish", polish),
                          ("sweep", 0.0 if sweep is None else sweep)):
            if isinstance(num, bool) or not isinstance(num, (int, float)):
                raise SpecError(f"anneal searcher: {name} = {num!r}; expected a number")
        if not (t_start > 0 and t_end > 0 and t_end <= t_start):
            raise SpecError(f"anneal searcher: t_start = {t_start!r}, t_end = {t_end!r}; "
                             "expected 0 < t_end <= t_start")
        if not 0 <= multi_move <= 1:
            raise SpecError(f"anneal searcher: multi_move = {multi_move!r}; expected a probability")
        if not 0 <= polish < 1:
            raise SpecError(f"anneal searcher: polish = {polish!r}; expected a fraction in [0, 1)")
        self.chains = chains
        keep_cols = np.flatnonzero(self.kind_mask("keep"))
        if sweep is None:  # the default: a share of budgets from SWEEP_MIN_BUDGET up
            sweep = self.SWEEP_SHARE if (budget_hint or 0) >= self.SWEEP_MIN_BUDGET else 0.0
        if not 0 <= sweep < 1:
            raise SpecError(f"anneal searcher: sweep = {sweep!r}; expected a fraction in [0, 1)")
        self.sweep_budget = int(sweep * budget_hint) if budget_hint and len(keep_cols) else 0
        main_budget = (budget_hint - self.sweep_budget) if budget_hint else None
        # independent runs share the budget (restarts need a budget to split)
        if restarts is None:  # one independent run per RUN_EVALUATIONS of budget
            restarts = max(1, (main_budget or 0) // self.RUN_EVALUATIONS)
        self.restarts = restarts if main_budget else 1
        self.budget_run = main_budget // self.restarts if main_budget else None
        self.sweep_state: _PatternSweep | None = None
        self.n_told = 0  # evaluations told in all (the sweep gets what the plain runs left)
        self._sweep_args = (keep_cols, sweep_chains, sweep_top, sweep_patterns)
        self.run_index = 0
        if warmup is None:
            warmup = _default_warmup(self.budget_run or 0, chains)
        self.warmup = int(warmup)
        self.t_start = float(t_start)
        self.t_end = float(t_end)
        self.multi_move = float(multi_move)
        self.elite_every = elite_every
        self.seen = 0  # points told so far in the current run
        self.step = 0
        self.pool_x = np.zeros((0, space.n_params), dtype=np.int64)  # warm-up elite
        self.pool_f = np.zeros(0)
        self.cur_x: IntArray = np.zeros((0, space.n_params), dtype=np.int64)  # chain states (empty: not started)
        self.cur_f: FloatArray = np.zeros(0)
        self._idx: IntArray | None = None  # chains of the pending proposals
        self.seed_x = np.zeros((0, space.n_params), dtype=np.int64)  # warm-start points
        self.seed_f = np.zeros(0)
        self._k = 1  # proposals per chain in the pending step
        self._cursor = 0
        self.polish = float(polish)
        self.proposals = proposals
        self.islands = islands
        self.polish_max_values = polish_max_values
        self.pol_x: IntArray = np.zeros(0, dtype=np.int64)  # the point being polished (empty: none)
        self.pol_f = math.inf
        self.pol_order = np.zeros(0, dtype=np.int64)  # parameter sweep order
        self.pol_pos = 0
        self.pol_improved = False
        self.pol_done: list[IntArray] = []  # points polished to convergence
        self._pol_pending = False

    @property
    def batch_size(self) -> int:
        if self.sweep_state is not None and not self.sweep_state.done:
            return self.sweep_state.batch_size()
        if self.seen < self.warmup:
            return max(1, min(4096, self.warmup - self.seen))
        if self.polishing():
            return max(self.chains * self.proposals, 1024)
        return self.chains * self.proposals

    def polishing(self) -> bool:
        """True once the coordinate-descent phase has begun."""
        if self.polish <= 0 or self.seen < self.warmup:
            return False
        if self.budget_run:
            return self.seen >= self.warmup + (1.0 - self.polish) * max(self.budget_run - self.warmup, 0)
        return self.step >= 400

    def temperature(self) -> float:
        """Current temperature (log-objective units)."""
        if self.budget_run:
            span = max(self.budget_run - self.warmup, 1)
            frac = min(max((self.seen - self.warmup) / span, 0.0), 1.0)
        else:  # time-limited: cool over ~400 steps, then stay cold
            frac = min(self.step / 400.0, 1.0)
        return self.t_start * (self.t_end / self.t_start) ** frac

    def ask(self, n: int) -> IntArray:
        n = int(n)
        if self.sweep_state is not None and not self.sweep_state.done:
            return self.sweep_state.ask(n, self.space, self.rng)
        if self.seen < self.warmup or len(self.cur_x) == 0 and len(self.pool_x) == 0:
            return self.space.sample(max(1, min(n, max(self.warmup - self.seen, 1))), self.rng)
        if len(self.cur_x) == 0:
            self._start_chains()
        if self.polishing():
            return self._ask_polish(n)
        k = self.proposals
        m = max(1, min(n // k, self.chains))
        k = min(k, max(1, n // m))
        if m == self.chains:
            idx = np.arange(self.chains)
        else:  # a partial step: rotate through the chains
            idx = (self._cursor + np.arange(m)) % self.chains
            self._cursor = int((self._cursor + m) % self.chains)
        self._idx = np.repeat(idx, k)  # k proposals per chain, chain-major
        self._k = k
        y = self.space.neighbours(self.cur_x[self._idx], self.rng)
        m = len(y)
        extra = self.rng.random(m) < self.multi_move
        for _ in range(2):
            if not extra.any():
                break
            y[extra] = self.space.neighbours(y[extra], self.rng)
            extra &= self.rng.random(m) < 0.5
        return y

    def seed_points(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        """Warm-start points join the elite pool of every run (before its chains start)."""
        f = _log(objective, valid)
        ok = np.isfinite(f)
        self.seed_x = np.asarray(x, dtype=np.int64)[ok].copy()
        self.seed_f = f[ok].copy()

    def _start_chains(self) -> None:
        if len(self.seed_x):  # warm-start points compete with the warm-up's best
            self.pool_x, self.pool_f = _elite(np.concatenate([self.pool_x, self.seed_x]),
                                              np.concatenate([self.pool_f, self.seed_f]), self.chains)
        k = len(self.pool_x)
        reps = np.resize(np.arange(k), self.chains)  # repeat the elite if it is small
        self.cur_x = self.pool_x[reps].copy()
        self.cur_f = self.pool_f[reps].copy()

    # --- coordinate-descent polish ------------------------------------------------------------
    def _next_polish_point(self) -> None:
        """Polish the best elite point not polished yet (or a kicked copy of the best)."""
        done = {tuple(p.tolist()) for p in self.pol_done}
        order = np.argsort(self.pool_f, kind="stable")
        pick = next((i for i in order if tuple(self.pool_x[i].tolist()) not in done and np.isfinite(self.pool_f[i])),
                    None)
        if pick is not None:
            self.pol_x, self.pol_f = self.pool_x[pick].copy(), float(self.pool_f[pick])
        else:  # every elite point is a local optimum of the sweep: kick the best and go on
            best = int(order[0])
            x = self.pool_x[best][None]
            for _ in range(3):
                x = self.space.neighbours(x, self.rng)
            self.pol_x, self.pol_f = x[0].copy(), math.inf
        self._new_sweep()

    def _new_sweep(self) -> None:
        free = np.flatnonzero(np.asarray(self.space.bounds) > 1)
        self.pol_order = self.rng.permutation(free)
        self.pol_pos = 0
        self.pol_improved = False

    def _ask_polish(self, n: int) -> IntArray:
        if len(self.pol_x) == 0:
            self._next_polish_point()
        bounds = np.asarray(self.space.bounds)
        rows = []
        total = 0
        while self.pol_pos < len(self.pol_order) and total < n:
            i = int(self.pol_order[self.pol_pos])
            values = np.arange(bounds[i])
            values = values[values != self.pol_x[i]]
            cap = min(self.polish_max_values, n - total)
            if len(values) > cap:
                values = self.rng.choice(values, size=cap, replace=False)
            block = np.repeat(self.pol_x[None], len(values), axis=0)
            block[:, i] = values
            rows.append(block)
            total += len(values)
            self.pol_pos += 1
        self._pol_pending = True
        if not rows:  # a space with no free parameter
            return np.repeat(self.pol_x[None], 1, axis=0)
        return np.concatenate(rows)

    def _tell_polish(self, x: IntArray, f: FloatArray) -> None:
        self._pol_pending = False
        self.seen += len(x)
        self.step += 1
        if len(f):
            j = int(np.argmin(f))
            if f[j] < self.pol_f:
                self.pol_x, self.pol_f = x[j].copy(), float(f[j])
                self.pol_improved = True
                self._add_to_pool(x[j:j + 1], f[j:j + 1])
        if self.pol_pos >= len(self.pol_order):
            if self.pol_improved:
                self._new_sweep()
            else:
                self.pol_done.append(self.pol_x.copy())
                self._next_polish_point()

    def _add_to_pool(self, x: IntArray, f: FloatArray) -> None:
        self.pool_x, self.pool_f = _elite(np.concatenate([self.pool_x, x]), np.concatenate([self.pool_f, f]),
                                          max(8, self.chains // 8))

    def tell(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        self.n_told += len(x)
        if self.sweep_state is not None and not self.sweep_state.done:
            self.sweep_state.tell(x, _log(objective, valid), self.rng)
            if self.sweep_state.done:  # budget left over (rounding): one more plain run
                self._restart()
            return
        self._tell(x, _log(objective, valid))
        if self.budget_run and self.seen >= self.budget_run:
            if self.run_index < self.restarts - 1:
                self._restart()
            elif self.sweep_budget and self.sweep_state is None:
                self._start_sweep()

    def _start_sweep(self) -> None:
        """After the plain runs: the bypass-pattern sweep (`_PatternSweep`)."""
        keep_cols, chains, top, max_patterns = self._sweep_args
        k = len(keep_cols)
        if k <= 16 and 2 ** k <= max_patterns:
            patterns = (np.arange(2 ** k)[:, None] >> np.arange(k)[::-1][None, :]) & 1
        else:  # too many: the last plain run's best pattern and distinct random others
            draw = self.rng.integers(0, 2, size=(4 * max_patterns, k))
            if len(self.pool_x):
                draw = np.concatenate([self.pool_x[:1, keep_cols], draw])
            _, first = np.unique(draw, axis=0, return_index=True)
            patterns = draw[np.sort(first)][:max_patterns]
        n_pat = len(patterns)
        top = min(top, n_pat)
        share_a = self.SWEEP_SHARE_A if top else 1.0
        budget = max((self.budget_hint or 0) - self.n_told, 0)
        eval_a = int(share_a * budget / n_pat)
        # what the sweep may spend: stage A's islands, then stage B's share in whole islands
        total = eval_a * n_pat + (int((1 - share_a) * budget / top) * top if top else 0)
        self.sweep_state = _PatternSweep(patterns, keep_cols, self.space.n_params, eval_a, total, top, chains,
                                         self.proposals, self.multi_move, self.t_start, self.t_end,
                                         self.elite_every)

    def _restart(self) -> None:
        """Begin the next independent run: fresh warm-up, chains, elite and schedule."""
        self.run_index += 1
        self.seen = 0
        self.step = 0
        self._cursor = 0
        self.pool_x = np.zeros((0, self.space.n_params), dtype=np.int64)
        self.pool_f = np.zeros(0)
        self.cur_x = np.zeros((0, self.space.n_params), dtype=np.int64)
        self.cur_f = np.zeros(0)
        self.pol_x, self.pol_f, self.pol_done = np.zeros(0, dtype=np.int64), math.inf, []

    def _tell(self, x: IntArray, f: FloatArray) -> None:
        if self._pol_pending:
            self._tell_polish(x, f)
            return
        if self._idx is None:  # warm-up
            self.seen += len(x)
            self.pool_x, self.pool_f = _elite(np.concatenate([self.pool_x, x]), np.concatenate([self.pool_f, f]),
                                              self.chains)
            return
        idx = self._idx
        self._idx = None
        self.seen += len(x)
        self.step += 1
        t = self.temperature()
        k = self._k
        if k > 1:  # each chain considers only the best of its k proposals
            fk = f.reshape(-1, k)
            j = np.argmin(fk, axis=1)
            rows = np.arange(len(fk)) * k + j
            x_all, f_all = x, f
            x, f, idx = x[rows], f[rows], idx[rows]
        else:
            x_all, f_all = x, f
        p = _accept_prob(f, self.cur_f[idx], t)
        accept = self.rng.random(len(idx)) < p
        self.cur_x[idx[accept]] = x[accept]
        self.cur_f[idx[accept]] = f[accept]
        # keep the elite pool of the best distinct points seen
        better = f_all < (self.pool_f.max() if len(self.pool_f) else math.inf)
        if better.any():
            self._add_to_pool(x_all[better], f_all[better])
        if self.step % self.elite_every == 0:
            self._resample()

    def _resample(self) -> None:
        """The worst quarter of the chains restart: from the elite pool of the best distinct
        points (``islands = 0``), or, within each of ``islands`` groups of chains, from
        copies of the group's best quarter (separate basins stay alive)."""
        if self.islands == 0:
            if len(self.pool_x):
                worst = np.argsort(-self.cur_f, kind="stable")[: self.chains // 4]
                pick = self.rng.integers(0, len(self.pool_x), size=len(worst))
                self.cur_x[worst] = self.pool_x[pick]
                self.cur_f[worst] = self.pool_f[pick]
            return
        groups = np.array_split(np.arange(self.chains), min(self.islands, self.chains))
        for g in groups:
            q = len(g) // 4
            if q == 0:
                continue
            order = g[np.argsort(self.cur_f[g], kind="stable")]
            best, worst = order[:q], order[-q:]
            src = best[self.rng.integers(0, q, size=q)]
            self.cur_x[worst] = self.cur_x[src]
            self.cur_f[worst] = self.cur_f[src]


def _default_warmup(run: int, chains: int) -> int:
    """Uniform warm-up samples for a run of ``run`` evaluations.

    A long run gains from a wide warm-up: the best distinct uniform samples start the chains,
    and more of them cover more basins (at 200k per run, a 50k warm-up ended within 1% of
    the best known EDP on 54 of 60 benchmark runs, a 20k one on 51, a 4k one on 8 of 15
    hard ones). A short run (60k, then the per-layer budget of network searches) needs its
    evaluations for the annealing itself (a 15k warm-up there made the ResNet-50 network
    EDP 2-3% worse than 6k). Hence 10% up to 100k, rising linearly to 25% at 200k.
    """
    frac = 0.10 + 0.15 * min(max((run - 100_000) / 100_000, 0.0), 1.0)
    return int(min(50_000, max(4 * chains, frac * run)))


def _log(objective: FloatArray, valid: BoolArray) -> FloatArray:
    v = np.asarray(objective, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.log(np.maximum(v, 1e-300))
    return np.where(np.asarray(valid, dtype=bool) & np.isfinite(f), f, np.inf)


class _PatternSweep:
    """The bypass-pattern sweep: short annealing runs, each with its keep bits fixed.

    Basins of the mapping landscape follow the keep/bypass pattern (which level keeps which
    tensor): a chain tuned to one pattern almost never crosses to another, since a flip
    alone leaves the tiling tuned to the old pattern (docs/performance.md, "Bypass-pattern
    basins"). The sweep gives every pattern it is handed a run of its own: stage A runs each
    for ``eval_a`` evaluations, stage B runs the ``top`` best patterns of stage A again,
    fresh, sharing what stage A left of ``total``. Every run is an island of ``chains``
    chains with its own warm-up (uniform samples with the pattern's keep bits, pushed
    towards legality where the space can), temperature schedule and elite, and all islands
    of a stage step together, so each ask is one large batch although each run is short.
    The sweep holds no reference to the space (it is pickled with the searcher for
    checkpoints).
    """

    def __init__(self, patterns: IntArray, keep_cols: IntArray, n_params: int, eval_a: int, total: int, top: int,
                 chains: int, proposals: int, multi_move: float, t_start: float, t_end: float,
                 elite_every: int) -> None:
        self.patterns = np.asarray(patterns, dtype=np.int64)
        self.keep_cols = np.asarray(keep_cols, dtype=np.int64)
        self.n_params = int(n_params)
        self.eval_a, self.total, self.top = int(eval_a), int(total), int(top)
        self.chains, self.proposals, self.multi_move = chains, proposals, multi_move
        self.t_start, self.t_end, self.elite_every = t_start, t_end, elite_every
        self.pool_size = max(8, chains)
        self.stage = ""
        self.told = 0  # evaluations told to the sweep (all stages)
        self._start_stage("A", np.arange(len(self.patterns)), self.eval_a)

    # --- islands ----------------------------------------------------------------------
    def _start_stage(self, stage: str, which: IntArray, budget: int) -> None:
        self.stage = stage
        self.which = np.asarray(which, dtype=np.int64)  # pattern index of each island
        n_isl = len(self.which)
        self.budget = int(budget)
        self.warmup = int(min(max(4 * self.chains, 0.1 * budget), budget // 2))
        self.seen = np.zeros(n_isl, dtype=np.int64)
        self.step = 0
        self.best_f = np.full(n_isl, np.inf)
        self.pool_max = np.full(n_isl, np.inf)  # worst point of a full elite (inf: not full)
        self.annealing = False  # False during the warm-up
        self.cur_x = np.zeros((n_isl * self.chains, self.n_params), dtype=np.int64)  # chain states
        self.cur_f = np.full(n_isl * self.chains, np.inf)
        self.pool_x = [np.zeros((0, self.n_params), dtype=np.int64) for _ in range(n_isl)]
        self.pool_f = [np.zeros(0) for _ in range(n_isl)]
        self.dead = np.zeros(n_isl, dtype=bool)  # no legal point found in the warm-up
        self._pending: tuple[str, IntArray] | None = None
        self._k = self.proposals

    @property
    def done(self) -> bool:
        return self.stage == "done"

    def batch_size(self) -> int:
        live = int((~self.dead).sum())
        if not self.annealing:
            return max(1, live * (self.warmup // 2 or 1))
        return max(1, live * self.chains * self.proposals)

    def _set_pattern(self, x: IntArray, isl: IntArray) -> IntArray:
        if len(self.keep_cols):
            x[:, self.keep_cols] = self.patterns[self.which[isl]]
        return x

    def ask(self, n: int, space: SearchSpace, rng: np.random.Generator) -> IntArray:
        live = np.flatnonzero(~self.dead)
        if not self.annealing:  # warm-up: uniform samples with each island's keep bits
            per = max(1, min(self.warmup - int(self.seen[live].min()), max(1, n // max(len(live), 1))))
            isl = np.repeat(live, per)[:n]
            x = self._set_pattern(space.sample(len(isl), rng), isl)
            legalize = getattr(space, "legalize", None)
            if legalize is not None:  # uniform draws pushed to fit: most of them become legal
                x = legalize(x, rng)
            self._pending = ("warm", isl)
            return x
        c, k = self.chains, self.proposals
        k = max(1, min(k, n // max(len(live) * c, 1)))
        chain = (live[:, None] * c + np.arange(c)[None, :]).reshape(-1)
        idx = np.repeat(chain, k)
        y = self._neighbours(self.cur_x[idx], idx // c, space, rng)
        extra = rng.random(len(y)) < self.multi_move
        for _ in range(2):  # multi-move proposals, as in the plain runs
            if not extra.any():
                break
            y[extra] = self._neighbours(y[extra], idx[extra] // c, space, rng)
            extra &= rng.random(len(y)) < 0.5
        self._pending = ("step", idx)
        self._k = k
        return y[:n]

    def _neighbours(self, parent: IntArray, isl: IntArray, space: SearchSpace, rng: np.random.Generator) -> IntArray:
        """One move per row with the island's keep bits held (the moves of a space whose
        keep bits are fixed by constraints)."""
        return self._set_pattern(space.neighbours(parent, rng, flips=False), isl)

    def tell(self, x: IntArray, f: FloatArray, rng: np.random.Generator) -> None:
        """Take the (log) scores of the last ask."""
        kind, ref = self._pending  # type: ignore[misc]
        self._pending = None
        self.told += len(x)
        ref = ref[: len(x)]
        if kind == "warm":
            isl = ref
            np.add.at(self.seen, isl, 1)
            for i in np.unique(isl):
                sel = isl == i
                self._pool_add(int(i), x[sel], f[sel])
            if int(self.seen[~self.dead].min(initial=self.warmup)) >= self.warmup:
                self._start_chains()
            return
        idx = ref
        c, k = self.chains, self._k
        n_full = (len(idx) // k) * k
        idx, x, f = idx[:n_full], x[:n_full], f[:n_full]
        np.add.at(self.seen, idx // c, 1)
        self.step += 1
        if len(f):
            fk = f.reshape(-1, k)
            j = np.argmin(fk, axis=1)
            rows = np.arange(len(fk)) * k + j
            xb, fb, cb = x[rows], f[rows], idx[rows]
            frac = np.clip((self.seen[cb // c] - self.warmup) / max(self.budget - self.warmup, 1), 0.0, 1.0)
            t = self.t_start * (self.t_end / self.t_start) ** frac
            acc = rng.random(len(cb)) < _accept_prob(fb, self.cur_f[cb], t)
            self.cur_x[cb[acc]] = xb[acc]
            self.cur_f[cb[acc]] = fb[acc]
            # each island's elite: the best distinct points among all its proposals
            isl_all = idx // c
            better = f < self.pool_max[isl_all]
            for i in np.unique(isl_all[better]):
                sel = better & (isl_all == i)
                self._pool_add(int(i), x[sel], f[sel])
        if self.step % self.elite_every == 0:
            self._resample(rng)
        if int(self.seen[~self.dead].min(initial=self.budget)) >= self.budget:
            self._next_stage()

    def _pool_add(self, i: int, x: IntArray, f: FloatArray) -> None:
        px, pf = _elite(np.concatenate([self.pool_x[i], x]), np.concatenate([self.pool_f[i], f]), self.pool_size)
        ok = np.isfinite(pf)
        self.pool_x[i], self.pool_f[i] = px[ok], pf[ok]
        if ok.any():
            self.best_f[i] = min(self.best_f[i], float(pf[ok].min()))
            self.pool_max[i] = float(pf[ok].max()) if ok.sum() >= self.pool_size else np.inf

    def _start_chains(self) -> None:
        c = self.chains
        for i in range(len(self.which)):
            if len(self.pool_x[i]) == 0:
                self.dead[i] = True
                continue
            reps = np.resize(np.arange(len(self.pool_x[i])), c)
            self.cur_x[i * c:(i + 1) * c] = self.pool_x[i][reps]
            self.cur_f[i * c:(i + 1) * c] = self.pool_f[i][reps]
        self.seen[:] = self.warmup
        self.annealing = True
        if self.dead.all():
            self._next_stage()

    def _resample(self, rng: np.random.Generator) -> None:
        """In each island the worst quarter of the chains restart from its elite."""
        c = self.chains
        q = max(1, c // 4)
        cf = self.cur_f.reshape(-1, c)
        worst = np.argsort(-cf, axis=1, kind="stable")[:, :q]  # (n_isl, q)
        for i in np.flatnonzero(~self.dead):
            if len(self.pool_x[i]):
                pick = rng.integers(0, len(self.pool_x[i]), size=q)
                rows = i * c + worst[i]
                self.cur_x[rows] = self.pool_x[i][pick]
                self.cur_f[rows] = self.pool_f[i][pick]

    def _next_stage(self) -> None:
        if self.stage == "A" and self.top > 0 and self.total > self.eval_a * len(self.patterns):
            order = np.argsort(self.best_f, kind="stable")
            order = order[np.isfinite(self.best_f[order])][: self.top]
            if len(order):  # what stage A left of the sweep's budget, shared evenly (less
                # one step of slack, the most a last step of a run can overshoot)
                left = max(self.total - self.told, 0) // len(order) - self.chains * self.proposals
                self._start_stage("B", self.which[order], max(left, 16 * self.chains))
                return
        self.stage = "done"


def _elite(px: IntArray, pf: FloatArray, n: int) -> tuple[IntArray, FloatArray]:
    """The ``n`` best distinct rows of ``px`` by ``pf`` (ties in the order of np.unique)."""
    _, first = np.unique(px, axis=0, return_index=True)
    keep = first[np.argsort(pf[first], kind="stable")[:n]]
    return px[keep], pf[keep]


def _accept_prob(f: FloatArray, old: FloatArray, t: float | FloatArray) -> FloatArray:
    """Metropolis acceptance probability of moving from log-objective ``old`` to ``f`` at
    temperature ``t``: 1 when not worse, exp(-delta / t) when worse; a legal point always
    replaces an illegal one, and between two illegal ones it is a coin toss."""
    with np.errstate(invalid="ignore", over="ignore"):
        delta = f - old
        p = np.where(np.isfinite(delta), np.exp(-np.maximum(delta, 0.0) / t), 0.0)
    both_bad = ~np.isfinite(f) & ~np.isfinite(old)
    out: FloatArray = np.where(both_bad, 0.5, np.where(np.isfinite(f) & ~np.isfinite(old), 1.0, p))
    return out
