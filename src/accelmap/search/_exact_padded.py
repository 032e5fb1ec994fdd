"""Imperfect factorization in the exact mapper (`accelmap.search.exact`): one branch per padded
bound vector.

Above the keep patterns, a space with ``allow_padding`` is split by the padded bound vector
``B'`` its factors multiply to (`PaddedBranches`): the model counts a padded mapping as the
same mapping of ``P' = problem.padded_iteration(B')`` (`accelmap.costmodels.loopnest`), so
each branch is the perfect-factor space of ``P'`` within the space's minimal covers
(`BranchSpace`), bounded by the `BoundModel` of ``P'``: every argument of
`accelmap.costmodels.loopnest_bounds` holds for ``P'`` as written (its bounds are ``B'``, and
the shares of words that exist, ``exist``, scale every count of a tensor as the model scales
them). Branches go in the order of a cheap bound that grows with the padded MACs, so the first
one cut by it cuts the rest (`_solve_padded`, which runs each branch's tree with
`accelmap.search._exact_tree._loop`, sharing the incumbent, the limits and the certificate).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from accelmap._typing import IntArray
from accelmap.errors import SpecError
from accelmap.mapper.mapping import MappingBatch
from accelmap.search import _exact_switches as sw
from accelmap.search._exact_nodes import (
    Certificate,
    DimTree,
    _cut_test,
    _patterns,
    _require,
    _root_frames,
    _setup,
)
from accelmap.search._exact_tree import _loop, _Open
from accelmap.search._exact_warm import _first_incumbent
from accelmap.search.objectives import ObjectiveSpec


class BranchSpace:
    """The part of a padded map space (``allow_padding``) whose factors of every dim ``d``
    multiply to ``B'_d``: the perfect-factor space of ``P' = problem.padded_iteration(B')``
    restricted to the minimal covers the space holds. The loopnest model counts a mapping
    of the padded space on its ``P'`` (`accelmap.costmodels.loopnest`), so a branch is
    searched and bounded as a space of ``P'`` (its `BoundModel` built on ``P'``, whose
    ``exist`` shares scale the words that do not exist); legality is the parent's `check`."""

    def __init__(self, space: Any, bounds: tuple[int, ...], rows: list[IntArray], trees: list[DimTree]) -> None:
        self.parent = space
        self.bounds = bounds
        self.problem = space.problem.padded_iteration(bounds)
        self.arch = space.arch
        self.allow_padding = False
        self._tables = [space._tables[d][r] for d, r in enumerate(rows)]
        self.dim_trees = trees
        self._L, self._D = space._L, space._D
        self._keep_state = space._keep_state
        self._order_free, self._order_outer, self._order_inner = (space._order_free, space._order_outer,
                                                                  space._order_inner)

    def check(self, batch: MappingBatch) -> Any:
        return self.parent.check(batch)


class PaddedBranches:
    """The padded bound vectors ``B'`` of a padded map space, sorted by a cheap admissible
    bound of their mappings: ``B'`` executes ``M' = prod B'`` MACs, so its energy is at least
    ``M'`` times the MAC energy and its cycles at least ``ceil(M' / n_macs)`` (module doc of
    `accelmap.costmodels.loopnest`: padded MACs are executed). The objective is monotone in
    both, so the bound grows with ``M'``, and once one branch is cut by it every later one is.
    ``max_branches`` caps the vectors enumerated (a `SpecError` beyond it)."""

    def __init__(self, space: Any, objective: ObjectiveSpec, max_branches: int = 1_000_000) -> None:
        self.space = space
        prods = [space._tables[d].prod(axis=(1, 2)) for d in range(space._D)]
        self._prods = prods
        self.values = [np.unique(p) for p in prods]
        n = math.prod(len(v) for v in self.values)
        if n > max_branches:
            raise SpecError(
                f"searcher exact: the padded space of {space.problem.name} has {n:,} padded bound vectors "
                f"(per dim {[len(v) for v in self.values]}), more than {max_branches:,}; fix some factors "
                "(constraints) or search without padding")
        grids = np.meshgrid(*[v.astype(np.float64) for v in self.values], indexing="ij")
        macs = np.ones(n)
        for g in grids:
            macs = macs * g.reshape(-1)
        self.order = np.argsort(macs, kind="stable")
        self.macs = macs[self.order]
        arch = space.arch
        self.energy_lb = self.macs * float(arch.compute.energy_per_mac_pj)
        self.cycles_lb = np.ceil(self.macs / float(arch.n_macs))
        self.cheap = objective.scalar(self.energy_lb, self.cycles_lb, np.ones(n, dtype=bool))
        self._shape = tuple(len(v) for v in self.values)
        self._rows: dict[tuple[int, int], IntArray] = {}
        self._trees: dict[tuple[int, int], DimTree] = {}

    def __len__(self) -> int:
        return len(self.order)

    def bounds(self, i: int) -> tuple[int, ...]:
        idx = np.unravel_index(int(self.order[i]), self._shape)
        return tuple(int(self.values[d][j]) for d, j in enumerate(idx))

    def view(self, i: int) -> BranchSpace:
        """The `BranchSpace` of the i-th vector (rows and dim trees shared between branches)."""
        b = self.bounds(i)
        rows, trees = [], []
        for d, v in enumerate(b):
            key = (d, v)
            if key not in self._rows:
                self._rows[key] = np.flatnonzero(self._prods[d] == v)
                self._trees[key] = DimTree(self.space._tables[d][self._rows[key]])
            rows.append(self._rows[key])
            trees.append(self._trees[key])
        return BranchSpace(self.space, b, rows, trees)


def _solve_padded(space: Any, model: Any, objective: ObjectiveSpec, *, time_limit_s: float | None,
                  max_leaves: int | None, incumbent: MappingBatch | None,
                  progress: Any, dive_share: float = sw._DIVE_SHARE) -> tuple[MappingBatch | None, float, Certificate]:
    """`exact.solve` of a padded space: the branch and bound of each padded bound vector ``B'``
    (`PaddedBranches`, cheapest first; a branch is one `BranchSpace`), sharing the incumbent,
    the limits and the certificate's counts. A branch whose cheap bound is cut ends the
    search (every later one is cut too); one whose root is cut counts as cut. The certified
    bound of a stopped search is the least of the open nodes of the branch it stopped in and
    the cheap bound of the next branch (the least of every branch not begun)."""
    t0 = time.perf_counter()
    _require(model, objective)
    deadline = t0 + time_limit_s if time_limit_s is not None else math.inf
    br = PaddedBranches(space, objective)
    cert = Certificate()
    best_value, best_batch = _first_incumbent(space, model, objective, incumbent)
    cert.patterns = len(_patterns(space))
    stop = ""
    low = math.inf  # the least bound the stopped branch left open
    roots: list[float] = []
    nxt = len(br)  # the first branch not begun
    for i in range(len(br)):
        if _cut_test(br.cheap[i], best_value):  # sorted: every later branch is cut too
            cert.cut += len(br) - i
            break
        if time.perf_counter() > deadline:
            stop, nxt = "time", i
            break
        if max_leaves is not None and cert.leaves >= max_leaves:
            stop, nxt = "budget", i
            break
        P = _setup(br.view(i), model, objective)
        P.cert = cert
        P.deadline = deadline
        P.max_leaves = max_leaves
        P.dive_share = dive_share
        P.best_value, P.best_batch = best_value, best_batch
        frames = _root_frames(P)
        roots.append(min([float(fr.bounds[0]) for fr in frames], default=math.inf))
        open_ = _Open()
        for fr in frames:
            open_.push(fr)
        later = float(br.cheap[i + 1]) if i + 1 < len(br) else math.inf  # the branches not begun
        shown = None if progress is None else (
            lambda best, lb, c, later=later: progress(best, min(lb, later), c))
        try:
            st = _loop(P, open_, shown, t0)
        except KeyboardInterrupt:
            st = "interrupted"
        best_value, best_batch = P.best_value, P.best_batch
        if st:
            stop, nxt = st, i + 1
            low = min(open_.min_bound(), P.current)
            break
    rest = float(br.cheap[nxt]) if nxt < len(br) else math.inf
    cert.root_lower_bound = min(roots + [rest, best_value])
    cert.incumbent = best_value
    cert.elapsed_s = time.perf_counter() - t0
    if stop:
        cert.stop_reason = stop
        cert.proven_optimal = False
        cert.lower_bound = min(low, rest, best_value)
    else:
        cert.stop_reason = "proven" if math.isfinite(best_value) else "infeasible"
        cert.proven_optimal = math.isfinite(best_value)
        cert.lower_bound = best_value
    return best_batch, best_value, cert


