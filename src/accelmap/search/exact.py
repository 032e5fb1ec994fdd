"""``exact``: branch and bound over the whole map space of the ``loopnest`` model.

The space (a `MapSpace`: per-dim factor tables, per-level loop orders, keep bits) is split
as follows, and every branch is bounded by `accelmap.costmodels.loopnest_bounds`, whose
bounds never exceed the model's cost of any mapping in the branch:

1. **Keep pattern.** Every assignment of the free keep bits is a separate tree.
2. **Spatial factors, then temporal factors innermost level first.** The first branching
   fixes the spatial factors (X and Y) of every level for every dim: with them fixed, the
   multicast and reduction every tensor gets are known together (bounded each on its own,
   every tensor could claim the whole array), the fanouts cut, and what the outer levels
   leave open is their temporal factors alone. A node below fixes the temporal factors of
   levels ``k .. L-1`` for every dim; its children fix level ``k-1``. Each dim's factor table
   is sorted in this order (spatial, then temporal innermost first), so the rows that agree
   with a node form one contiguous run, and a node is one run index per dim. Innermost first
   makes the small buffers' capacities cut early, makes every tile the bound reads exact,
   and leaves only products of the outer factors unknown (their range per dim is read off
   the run).
3. **Loop orders at the leaves.** With every factor fixed, only the relative order of the
   loops with a bound of at least 2 changes a cost (the model skips unit loops), so each
   level's candidates are the permutations of its active free loops (pinned loops stay
   where the constraints pin them). Levels are fixed outermost first, bounded with the
   order-aware bound, and complete orders are evaluated by the model itself.

**Imperfect factorization** (a space with ``allow_padding``). Above the keep patterns, the
space is split by the padded bound vector ``B'`` its factors multiply to (`PaddedBranches`):
the model counts a padded mapping as the same mapping of ``P' = problem.padded_iteration(B')``
(`accelmap.costmodels.loopnest`), so each branch is the perfect-factor space of ``P'`` within
the space's minimal covers (`BranchSpace`), bounded by the `BoundModel` of ``P'``: every
argument of `accelmap.costmodels.loopnest_bounds` holds for ``P'`` as written (its bounds
are ``B'``, and the shares of words that exist, ``exist``, scale every count of a tensor as
the model scales them). Branches go in the order of a cheap bound that grows with the padded
MACs, so the first one cut by it cuts the rest (`_solve_padded`).

Spatial children are made one dim at a time, and a partial choice whose spatial factors
already exceed a level's fanout is dropped before the next dim multiplies it (most spatial
combinations do). Siblings under the incumbent are expanded together, up to about one
numpy pass of children, since a proof expands every one of them anyway.

Search is best first (depth first while too many nodes are open) with the children of
every node sorted by bound, starting from an incumbent found by a short default search
(the warm start). A branch is cut when its bound
is no better than the incumbent (``bound >= incumbent * (1 - 1e-12)``: "optimal" means that
no mapping is better by more than one part in 10^12, far above the rounding of float64 costs
and far below any difference that matters). When the tree is exhausted the incumbent is proven
optimal; when the time or evaluation limit stops the search first, the certified lower bound
is the smallest bound among the open branches. The approach follows the branch-and-bound
mappers that prove optimality in a space by pruning it (the Turbo-Charged Mapper, arXiv
2602.15172), with bounds derived here from the model's own counting rules.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from accelmap._typing import IntArray
from accelmap.costmodels._bounds_kernel import tables_of
from accelmap.costmodels.loopnest_bounds import BoundCut, BoundModel, partial_bounds, traffic_table
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.mapper.mapping import MappingBatch
from accelmap.search._exact_kernel import fanout_ok, feasible_nodes, gather_dim
from accelmap.search.base import Cap
from accelmap.search.objectives import Objective, ObjectiveSpec

__all__ = ["ExactSearcher", "BranchSpace", "Certificate", "DimTree", "PaddedBranches", "bound_model",
           "default_workers", "k_of", "node_inputs", "root_bound", "solve"]

_EPS = 1e-12  # relative tolerance of the cut test (float rounding of costs and bounds)
_CHUNK = 8_192  # children bounded per numpy pass (and between two checks of the time limit)
_ORDER_BATCH = 4_096  # complete order combinations evaluated at once
_LEAF_GROUP = 256  # sibling leaves handled together
_ORDER_MEMO = 4_096  # the most leaf order sets kept (`_leaf_orders`)
# switches of the node handling, for the tests and `benchmarks/bench_exact_nodes.py` (the same
# nodes, bounds and leaves either way): the bound inputs of children that passed `_feasible_nodes`
# are not tested again (`partial_bounds`' rows_feasible); a leaf's order sets made once per set of
# active loops and its legality tested once per factorization (`_leaf_orders`, `_evaluate_many`)
_TRUST_TEST = True
_LEAF_MEMO = True
_FANOUT_KERNEL = True  # the spatial children's fanout test compiled (`_fanout_ok`)
_EXPAND_GROUP = 4_096  # the most sibling nodes expanded together (see _loop)
_SPATIAL_GROUP = 64  # the most sibling nodes of depth 0 expanded together
_NODE_TEST = True  # children tested for feasibility before their bound inputs are built (`_feasible_nodes`)
_REGION_TRIAL = 256  # calls of a keep pattern's bound after which a region count that never lifted is dropped
_PAIR_TRIAL = 64  # calls of a keep pattern's bound at one depth of levels after which argument 13's pairs that never lifted are dropped
_WARM_FLOOR = 20_000  # the fewest warm-start evaluations (see ExactSearcher's warm_budget)
_DIVE_SHARE = 0.1  # the most share of the branch and bound's time that dives take (see _Diver)
_DIVE_BEAM = 8  # nodes a dive keeps per step (the lowest bounds among their children)
_DIVE_LEAVES = 64  # leaves a dive's last step keeps
_DIVE_MAX_S = 2.0  # the longest one dive may run (its order search stops there)
_DIVE_STARTS = 16  # the open frames with the lowest bounds a dive's start is chosen among
_WARM_BESIDE = True  # the warm start in its own process beside the tree (`_WarmStart`; False: before it)
_QUICK_WARM = 20_000  # evaluations of the quick first warm start of the tree while `_WarmStart` runs (0: none)


@dataclass
class Certificate:
    """What the exact search proves.

    proven_optimal: the whole space was covered or cut by bound, so no mapping of the space
    beats the incumbent. lower_bound: the certified lower bound of the objective (the
    incumbent when proven, else the smallest bound among the open branches). gap:
    incumbent / lower_bound - 1 (0 when proven).
    """

    proven_optimal: bool = False
    lower_bound: float = 0.0
    incumbent: float = math.inf
    nodes: int = 0  # nodes expanded (factor nodes and order nodes)
    cut: int = 0  # branches cut by bound
    infeasible: int = 0  # branches cut because no completion fits (fanout, capacity)
    leaves: int = 0  # mappings evaluated by the model
    patterns: int = 0  # keep patterns
    elapsed_s: float = 0.0
    stop_reason: str = "proven"
    warm_start_evaluations: int = 0
    root_lower_bound: float = 0.0
    workers: int = 1  # processes that shared the tree (`_solve_workers`)
    worker_cpu_s: list[float] = field(default_factory=list)  # each worker's CPU seconds on its shares
    dives: int = 0  # dives from open nodes for incumbents (`_Diver`)
    dive_leaves: int = 0  # mappings the dives evaluated (not in ``leaves``)
    dive_improved: int = 0  # dives that found a better incumbent
    dive_s: float = 0.0  # seconds the dives took

    @property
    def gap(self) -> float:
        if self.proven_optimal:
            return 0.0
        if not math.isfinite(self.incumbent):
            return math.inf
        if self.lower_bound <= 0:
            return math.inf
        return max(self.incumbent / self.lower_bound - 1.0, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"proven_optimal": self.proven_optimal, "lower_bound": self.lower_bound,
                "incumbent": self.incumbent, "gap": self.gap, "nodes": self.nodes, "cut": self.cut,
                "infeasible": self.infeasible, "leaves": self.leaves, "patterns": self.patterns,
                "elapsed_s": round(self.elapsed_s, 6), "stop_reason": self.stop_reason,
                "warm_start_evaluations": self.warm_start_evaluations,
                "root_lower_bound": self.root_lower_bound, "workers": self.workers,
                "worker_cpu_s": [round(x, 3) for x in self.worker_cpu_s],
                "dives": self.dives, "dive_leaves": self.dive_leaves, "dive_improved": self.dive_improved,
                "dive_s": round(self.dive_s, 3)}


class DimTree:
    """One dim's factor table sorted spatial factors first, then temporal factors innermost
    level first, with its runs per depth.

    Depth 0 is the root; depth 1 fixes the spatial factors (X and Y) of every level; depth
    ``1 + j`` fixes besides the temporal factors of levels ``L-j .. L-1``, so the leaves sit
    at depth ``L + 1`` (`leaf_depth`). ``starts[j]`` (G_j,) are the first rows of the runs of
    rows that agree on what depth ``j`` fixes; ``child_lo[j]``/``child_hi[j]`` the runs of
    depth ``j+1`` inside each; ``omin[j]``, ``omax[j]``, ``otmin[j]`` the smallest and largest
    product of a run's factors at the levels ``< k_of(j)`` whose temporal factors are open
    (and the smallest product of those temporal factors).
    """

    def __init__(self, table: IntArray) -> None:
        R, L, _ = table.shape
        self.L = L
        self.leaf_depth = L + 1
        # significance order: every spatial factor, then the temporal ones innermost first
        cols = [table[:, lv, s] for lv in range(L) for s in (1, 2)] + [table[:, lv, 0] for lv in range(L - 1, -1, -1)]
        order = np.lexsort(cols[::-1])
        self.rows = np.ascontiguousarray(table[order])  # (R, L, 3)
        full = self.rows.prod(axis=2)  # (R, L)
        keyed = np.stack([c[order] for c in cols], axis=1)  # (R, 3L) in significance order
        self.starts: list[IntArray] = []
        self.ends: list[IntArray] = []
        self.omin: list[IntArray] = []
        self.omax: list[IntArray] = []
        self.otmin: list[IntArray] = []
        for j in range(L + 2):
            if j == 0:
                st = np.zeros(1, dtype=np.int64)
            else:
                key = keyed[:, : 2 * L + j - 1]
                change = np.ones(R, dtype=bool)
                change[1:] = (key[1:] != key[:-1]).any(axis=1)
                st = np.flatnonzero(change).astype(np.int64)
            en = np.append(st[1:], R).astype(np.int64)
            k = k_of(L, j)
            outer = full[:, :k].prod(axis=1) if k > 0 else np.ones(R, dtype=np.int64)
            outer_t = self.rows[:, :k, 0].prod(axis=1) if k > 0 else np.ones(R, dtype=np.int64)
            self.starts.append(st)
            self.ends.append(en)
            self.omin.append(np.minimum.reduceat(outer, st))
            self.omax.append(np.maximum.reduceat(outer, st))
            self.otmin.append(np.minimum.reduceat(outer_t, st))
        # each depth-1 run's spatial factors (X, Y) per level: the fanout test of a node
        # whose spatial factors are being chosen, before it is bounded
        self.sp_x = np.ascontiguousarray(self.rows[self.starts[1], :, 1])  # (G_1, L)
        self.sp_y = np.ascontiguousarray(self.rows[self.starts[1], :, 2])
        # the largest product of the spatial factors (X*Y over every level) of any row
        self.room = int(self.rows[:, :, 1:].prod(axis=(1, 2)).max())
        self.child_lo: list[IntArray] = []
        self.child_hi: list[IntArray] = []
        for j in range(L + 1):
            self.child_lo.append(np.searchsorted(self.starts[j + 1], self.starts[j]).astype(np.int64))
            self.child_hi.append(np.searchsorted(self.starts[j + 1], self.ends[j]).astype(np.int64))


def k_of(L: int, depth: int) -> int:
    """The first level whose temporal factors a node of ``depth`` fixes (``L``: none)."""
    return L - max(depth - 1, 0)


def node_inputs(trees: list[DimTree], depth: int, split: int, ids: IntArray) -> dict[str, Any]:
    """`partial_bounds` inputs of nodes (``ids`` (n, D) run indices, the dims ``< split`` one
    depth deeper): ``k``; ``fac`` (n, L, D, 3) the runs' first rows; the outer ranges (n, D)
    over the levels ``< k``; ``next_level``, the factors the dims ``< split`` chose at level
    ``k-1`` (None when none did or they chose spatial factors); ``spatial`` (n, L, D, 2), the
    spatial factors fixed so far (ones for dims not yet fixed) and ``spatial_complete``;
    ``spatial_room`` (n, D) while some dim's are open; ``next_chosen`` (D,), the dims ``< split``
    (see `partial_bounds`)."""
    n, D = ids.shape
    L = trees[0].L
    k = k_of(L, depth)
    fac = np.empty((n, L, D, 3), dtype=np.int64)
    omin = np.empty((n, D), dtype=np.int64)
    omax = np.empty((n, D), dtype=np.int64)
    otmin = np.empty((n, D), dtype=np.int64)
    nxt = np.ones((n, D, 3), dtype=np.int64) if split and depth >= 1 else None
    known = np.zeros(D, dtype=bool)
    # each dim in one compiled pass (`gather_dim`): its factor rows, outer ranges and level k-1 factors
    for d, tr in enumerate(trees):
        g = ids[:, d]
        if d < split and depth == 0:  # spatial factors chosen: a run of depth 1, k unchanged
            gather_dim(fac, omin, omax, otmin, nxt, d, tr.rows, tr.starts[1], tr.omin[1], tr.omax[1], tr.otmin[1], g, -1)
            known[d] = True
        elif d < split:  # a run one depth deeper: its outer range times its level k-1 factors
            gather_dim(fac, omin, omax, otmin, nxt, d, tr.rows, tr.starts[depth + 1], tr.omin[depth + 1],
                       tr.omax[depth + 1], tr.otmin[depth + 1], g, k - 1)
        else:  # fac[:, :, d, :] = tr.rows[tr.starts[depth][g]], the ranges of those runs
            gather_dim(fac, omin, omax, otmin, nxt, d, tr.rows, tr.starts[depth], tr.omin[depth], tr.omax[depth],
                       tr.otmin[depth], g, -1)
    if depth >= 1:
        known[:] = True
    complete = bool(known.all())
    # every dim's spatial factors fixed: a view of fac (np.where would copy the (n, L, D, 2)
    # block, about a quarter of this function's time on 8,192 nodes); partial_bounds only reads it
    spatial = fac[..., 1:] if complete else np.where(known[None, None, :, None], fac[..., 1:], 1)
    room = None
    if not complete:  # fixed dims their spatial product, open dims the most their table has
        room = np.where(known[None, :], spatial.prod(axis=(1, 3)),
                        np.array([tr.room for tr in trees], dtype=np.int64)[None, :])
    return {"k": k, "fac": fac, "outer_min": omin, "outer_tmin": otmin, "outer_max": omax, "next_level": nxt,
            "spatial": spatial, "spatial_complete": complete, "spatial_room": room,
            "next_chosen": np.arange(D) < split if nxt is not None else None}


@dataclass
class _Frame:
    """Open siblings: dims ``< split`` sit at depth ``depth + 1`` (their spatial factors, or
    their temporal factor at level ``k_of(depth) - 1``, chosen), the others at ``depth``."""

    pattern: int
    depth: int
    split: int
    ids: IntArray  # (m, D) run index per dim, sorted by bound
    bounds: Any  # (m,) objective bounds, ascending
    pos: int = 0


@dataclass
class _Problem:
    """Everything the search shares: the space, the model, the objective, the patterns."""

    space: Any
    model: Any
    objective: ObjectiveSpec
    trees: list[DimTree]
    patterns: list[Any]  # (L, T) keep arrays
    bms: list[BoundModel]
    L: int
    D: int
    free_orders: list[IntArray]
    outer_orders: list[list[int]]
    inner_orders: list[list[int]]
    cert: Certificate = field(default_factory=Certificate)
    best_value: float = math.inf
    best_batch: MappingBatch | None = None
    deadline: float = math.inf
    max_leaves: int | None = None
    stopped: str = ""
    current: float = math.inf  # bound of the node being worked on (open while it is)
    schedule: dict[tuple[int, int], int] = field(default_factory=dict)  # see _group_end
    dive_share: float = _DIVE_SHARE  # the most share of the loop's time the dives take (`_Diver`)


    packed: dict[Any, Any] = field(default_factory=dict)  # see _feasible_nodes
    orders: dict[Any, Any] = field(default_factory=dict)  # see _level_orders and _leaf_orders

    @property
    def leaf_depth(self) -> int:
        return self.L + 1

    def objective_bound(self, e: Any, c: Any) -> Any:
        return self.objective.scalar(e, c, np.ones(len(e), dtype=bool))

    def cutoff(self) -> BoundCut | None:
        """The incumbent's cut-off for a staged bound (`partial_bounds`' ``cutoff``): the
        rows `_cut_test` cuts, as `objective_bound` forms their objective (None while there
        is no incumbent; `_bound_switches._STAGED` switches the staging off)."""
        if not math.isfinite(self.best_value):
            return None
        o = self.objective
        a, b = {Objective.ENERGY: (1.0, 0.0), Objective.CYCLES: (0.0, 1.0),
                Objective.WEIGHTED: (o.energy_exp, o.cycles_exp)}.get(o.kind, (1.0, 1.0))
        return BoundCut(value=self.best_value * (1.0 - _EPS), energy_exp=a, cycles_exp=b,
                        objective=self.objective_bound)


def _patterns(space: Any) -> list[Any]:
    state = space._keep_state  # (L, T): -1 free, 0 bypass, 1 keep
    free = np.argwhere(state == -1)
    out = []
    for bits in itertools.product((False, True), repeat=len(free)):
        keep = state == 1
        for (lv, t), b in zip(free, bits, strict=True):
            keep[lv, t] = b
        out.append(keep)
    return out


def bound_model(space: Any, keep: Any) -> BoundModel:
    """The `BoundModel` of one keep pattern of ``space``, with its capacity-aware traffic
    table over the tile extents level 1 can have (`traffic_table`)."""
    bm = BoundModel.build(space.problem, space.arch, keep)
    if space._L < 3:
        return bm
    tile1 = [np.unique(space._tables[d][:, 1:, :].prod(axis=(1, 2))) for d in range(space._D)]
    return dataclasses.replace(bm, traffic=traffic_table(bm, tile1, space.problem.bounds))


def _require(model: Any, objective: ObjectiveSpec) -> None:
    if getattr(model, "name", "") != "loopnest":
        raise SpecError(f"searcher exact proves optimality on the loopnest model only; got model "
                        f"{getattr(model, 'name', type(model).__name__)!r}. Use --model loopnest or another searcher")
    if objective.is_pareto:
        raise SpecError("searcher exact minimises one objective (edp, energy, cycles or energy^a*cycles^b), "
                        "not a Pareto front; use --searcher anneal or optuna for energy,cycles")


def _setup(space: Any, model: Any, objective: ObjectiveSpec) -> _Problem:
    _require(model, objective)
    trees = getattr(space, "dim_trees", None) or [DimTree(space._tables[d]) for d in range(space._D)]
    pats = _patterns(space)
    bms = [dataclasses.replace(bound_model(space, p), region_trial=_REGION_TRIAL, pair_trial=_PAIR_TRIAL)
           for p in pats]  # the trials of arguments 12 and 13
    return _Problem(space=space, model=model, objective=objective, trees=trees, patterns=pats,
                    bms=bms,
                    L=space._L, D=space._D,
                    free_orders=[np.asarray(f, dtype=np.int64) for f in space._order_free],
                    outer_orders=[list(o) for o in space._order_outer],
                    inner_orders=[list(i) for i in space._order_inner])


# --- imperfect factorization: one branch per padded bound vector ---------------------------
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


def _bound_nodes(P: _Problem, pattern: int, depth: int, split: int, ids: IntArray,
                 cutoff: BoundCut | None = None) -> tuple[Any, Any]:
    """(n,) objective bounds of nodes and (n,) whether they are feasible. With ``cutoff``
    (`_Problem.cutoff`, for children the caller cuts by it at once) the bound is staged: a
    node it cuts may get a weaker bound, still at or above the cut-off."""
    bm = P.bms[pattern]
    ok = _feasible_nodes(P, bm, depth, split, ids) if _NODE_TEST else None
    if ok is None:
        e, c, ok = partial_bounds(bm, **node_inputs(P.trees, depth, split, ids), cutoff=cutoff)
    elif ok.all():  # (the same test `partial_bounds` makes first: not made again)
        e, c, _ = partial_bounds(bm, **node_inputs(P.trees, depth, split, ids), rows_feasible=_TRUST_TEST,
                                 cutoff=cutoff)
    else:  # the inputs of the feasible nodes alone (`partial_bounds` bounds each row by itself)
        e, c = np.full(len(ids), np.inf), np.full(len(ids), np.inf)
        sel = np.flatnonzero(ok)
        if len(sel):
            e[sel], c[sel], _ = partial_bounds(bm, **node_inputs(P.trees, depth, split, ids[sel]),
                                               rows_feasible=_TRUST_TEST, cutoff=cutoff)
    return P.objective_bound(e, c), ok


def _feasible_nodes(P: _Problem, bm: BoundModel, depth: int, split: int, ids: IntArray) -> Any:
    """(n,) `partial_bounds`' feasibility test of the nodes, compiled and read from their
    runs (`_exact_kernel.feasible_nodes`): most children fail it at some depths, and their
    `node_inputs` are then never built. The stacked rows and runs are made once per
    (depth, split) and kept in ``P.packed``."""
    key = (depth, split)
    got = P.packed.get(key)
    if got is None:
        if "rows" not in P.packed:
            sizes = [len(tr.rows) for tr in P.trees]
            P.packed["rows"] = (np.ascontiguousarray(np.concatenate([tr.rows for tr in P.trees])),
                                np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))
        row_off = P.packed["rows"][1]
        runs = [tr.starts[depth + 1 if d < split else depth] + row_off[d] for d, tr in enumerate(P.trees)]
        st_off = np.concatenate([[0], np.cumsum([len(r) for r in runs])[:-1]]).astype(np.int64)
        known = np.ones(P.D, dtype=bool) if depth >= 1 else np.arange(P.D) < split
        P.packed[key] = got = (np.concatenate(runs).astype(np.int64), st_off, known)
    starts, st_off, known = got
    k = k_of(P.L, depth)
    return feasible_nodes(np.ascontiguousarray(ids), split, k, bool(split) and depth >= 1 and k > 0,
                          P.packed["rows"][0], starts, st_off, known, bm, tables_of(bm))


def _fanout_ok(P: _Problem, chosen: int, ids: IntArray, fan_x: IntArray, fan_y: IntArray) -> Any:
    """(n,) whether the spatial factors of the dims ``< chosen`` (their ids are depth-1 runs)
    fit every level's fanout: the test `partial_bounds` makes first, in integers and
    without building its inputs. Factors are >= 1, so a partial choice that fails it fails
    with every choice of the other dims."""
    if _FANOUT_KERNEL:  # the same test compiled (`_exact_kernel.fanout_ok`), on the stacked runs
        got = P.packed.get("sp")
        if got is None:
            sizes = [len(tr.sp_x) for tr in P.trees]
            P.packed["sp"] = got = (np.ascontiguousarray(np.concatenate([tr.sp_x for tr in P.trees]), dtype=np.int64),
                                    np.ascontiguousarray(np.concatenate([tr.sp_y for tr in P.trees]), dtype=np.int64),
                                    np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))
        return fanout_ok(ids, chosen, got[0], got[1], got[2], fan_x, fan_y)
    n = len(ids)
    px = np.ones((n, P.L), dtype=np.int64)
    py = np.ones((n, P.L), dtype=np.int64)
    for d in range(chosen):
        tr = P.trees[d]
        px *= tr.sp_x[ids[:, d]]
        py *= tr.sp_y[ids[:, d]]
    return (px <= fan_x).all(axis=1) & (py <= fan_y).all(axis=1)


def _spatial_children(P: _Problem, pattern: int, nodes: IntArray, dims: range) -> tuple[IntArray, int]:
    """The children of depth-0 nodes that choose the spatial factors of ``dims`` (after the
    dims before them), one dim at a time, each partial choice tested against the fanouts
    (`_fanout_ok`) before the next dim multiplies it; returns them and how many children
    the failed partial choices stood for (counted as infeasible)."""
    bm = P.bms[pattern]
    cur = nodes
    n_inf = 0
    dl = list(dims)
    for i, d in enumerate(dl):
        cur = _children_many(P, 0, d, cur, range(d, d + 1))
        ok = _fanout_ok(P, d + 1, cur, bm.fan_x, bm.fan_y)
        if not ok.all():
            bad = cur[~ok]
            rest = np.ones(len(bad), dtype=np.int64)  # the combinations of the later dims they stood for
            for d2 in dl[i + 1:]:
                tr = P.trees[d2]
                rest *= tr.child_hi[0][bad[:, d2]] - tr.child_lo[0][bad[:, d2]]
            n_inf += int(rest.sum())
            cur = cur[ok]
    return cur, n_inf


def _child_counts(P: _Problem, depth: int, split: int, nodes: IntArray) -> IntArray:
    """(n,) the children `_expand` makes of each node (before the fanout test at depth 0)."""
    end = _group_end(P, depth, split)
    out = np.ones(len(nodes), dtype=np.int64)
    for d in range(split, end):
        tr = P.trees[d]
        out *= tr.child_hi[depth][nodes[:, d]] - tr.child_lo[depth][nodes[:, d]]
    return out


def _children_many(P: _Problem, depth: int, split: int, nodes: IntArray, dims: range) -> IntArray:
    """(m, D) the children of every node of ``nodes`` (n, D), node after node, in the order
    of `_children`: the dims in ``dims`` take every child run (depth + 1) of their run."""
    n = len(nodes)
    dl = list(dims)
    lo = np.empty((n, len(dl)), dtype=np.int64)
    sizes = np.empty((n, len(dl)), dtype=np.int64)
    for i, d in enumerate(dl):
        tr = P.trees[d]
        lo[:, i] = tr.child_lo[depth][nodes[:, d]]
        sizes[:, i] = tr.child_hi[depth][nodes[:, d]] - lo[:, i]
    counts = sizes.prod(axis=1)
    owner = np.repeat(np.arange(n), counts)
    local = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    out = nodes[owner]
    for i in range(len(dl) - 1, -1, -1):
        s = sizes[owner, i]
        out[:, dl[i]] = lo[owner, i] + local % s
        local //= s
    return out


def _cut_test(bound: Any, incumbent: float) -> Any:
    """Cut where no completion can beat the incumbent by more than the relative tolerance
    ``_EPS`` (costs and bounds are float64 sums: their rounding is far below it)."""
    return bound >= incumbent * (1.0 - _EPS)


def _group_end(P: _Problem, depth: int, split: int) -> int:
    """The dims ``split .. end-1`` of the next depth are chosen together: as many as
    keep the largest product of their choices (over every run at this depth) at most
    ``_CHUNK``, one at least. Fixed per (depth, split), so siblings share their schedule."""
    key = (depth, split)
    got = P.schedule.get(key)
    if got is None:
        most = [int((tr.child_hi[depth] - tr.child_lo[depth]).max()) for tr in P.trees]
        end = split + 1
        while end < P.D and math.prod(most[split: end + 1]) <= _CHUNK:
            end += 1
        P.schedule[key] = got = end
    return got


def _expand(P: _Problem, f: _Frame, nodes: IntArray) -> tuple[_Frame | None, bool]:
    """Children of some nodes of one frame (same pattern, depth and split), bounded together:
    the next dims of the next depth (see `_group_end`). Returns one frame of the live
    children sorted by bound, and False if the time limit interrupted (nothing counted)."""
    depth, split = f.depth, f.split
    end = _group_end(P, depth, split)
    dims = range(split, end)
    new_depth, new_split = (depth + 1, 0) if end == P.D else (depth, end)
    kept_ids, kept_b = [], []
    n_inf = n_cut = 0
    buf: list[IntArray] = []

    def flush() -> None:
        nonlocal n_inf, n_cut
        ch = np.concatenate(buf)
        b, ok = _bound_nodes(P, f.pattern, new_depth, new_split, ch, P.cutoff())
        n_inf += int((~ok).sum())
        live = ok & ~_cut_test(b, P.best_value)
        n_cut += int((ok & ~live).sum())
        if live.any():
            kept_ids.append(ch[live])
            kept_b.append(b[live])

    if depth == 0:  # spatial factors: partial choices that exceed a fanout never multiply out
        allk, n_inf = _spatial_children(P, f.pattern, nodes, dims)
    else:
        allk = _children_many(P, depth, split, nodes, dims)
    for start in range(0, len(allk), _CHUNK):
        if time.perf_counter() > P.deadline:  # the nodes stay open, nothing of them is counted
            return None, False
        buf = [allk[start: start + _CHUNK]]
        flush()
    P.cert.infeasible += n_inf
    P.cert.cut += n_cut
    if not kept_ids:
        return None, True
    ids = np.concatenate(kept_ids)
    b = np.concatenate(kept_b)
    srt = np.argsort(b, kind="stable")
    return _Frame(f.pattern, new_depth, new_split, ids[srt], b[srt]), True


# --- loop orders at a leaf ----------------------------------------------------------------
def _level_orders(P: _Problem, lv: int, temporal: IntArray) -> IntArray:
    """(m, D) full orders of level lv, one per relative order of its active free loops
    (read only: made once per level and set of active free loops, `_Problem.orders`)."""
    free = P.free_orders[lv]
    key = (lv, bytes(temporal[lv, free] >= 2))
    got = P.orders.get(key) if _LEAF_MEMO else None
    if got is None:
        active = [int(d) for d in free if temporal[lv, d] >= 2]
        idle = [int(d) for d in free if temporal[lv, d] < 2]
        perms = list(itertools.permutations(active)) if active else [()]
        got = np.array([P.outer_orders[lv] + list(p) + idle + P.inner_orders[lv] for p in perms], dtype=np.int64)
        got.setflags(write=False)
        P.orders[key] = got
    return got


def _leaf_orders(P: _Problem, fac: IntArray) -> tuple[list[IntArray], IntArray | None]:
    """The candidate orders of every level of a leaf (`_level_orders`) and, when their
    combinations are at most ``_ORDER_BATCH``, all of them (`_combos`; None otherwise). Both
    depend only on which free loops are active at each level, so they are made once per such
    pattern (`_Problem.orders`, read only)."""
    temporal = fac[:, :, 0]
    key = bytes(temporal >= 2)
    got = P.orders.get(key) if _LEAF_MEMO else None
    if got is None:
        cands = [_level_orders(P, lv, temporal) for lv in range(P.L)]
        combos = _combos(cands) if math.prod(len(c) for c in cands) <= _ORDER_BATCH else None
        if combos is not None:
            combos.setflags(write=False)
        if len(P.orders) > _ORDER_MEMO:  # (a bound on the memory: start again)
            P.orders.clear()
        P.orders[key] = got = (cands, combos)
    return got


def _solve_leaves(P: _Problem, pattern: int, facs: IntArray, bounds: Any) -> None:
    """Leaves (n, L, D, 3) of one keep pattern: every order combination of those with few
    is evaluated in one batch; the others go through :func:`_solve_orders` one by one."""
    small_f, small_o = [], []
    n_small = 0  # rows in small_o
    for fac, b in zip(facs, bounds, strict=True):
        if _cut_test(b, P.best_value):
            P.cert.cut += 1
            continue
        _, orders = _leaf_orders(P, fac)
        if orders is None:
            _solve_orders(P, pattern, fac)
            if P.stopped:
                return
            continue
        small_f.append(np.broadcast_to(fac, (len(orders),) + fac.shape))
        small_o.append(orders)
        # (without _LEAF_MEMO as before: the rows summed again after every leaf)
        n_small = n_small + len(orders) if _LEAF_MEMO else sum(len(o) for o in small_o)
        if n_small >= _ORDER_BATCH:
            _evaluate_many(P, np.concatenate(small_f), P.patterns[pattern], np.concatenate(small_o),
                           np.array([len(o) for o in small_o]) if _LEAF_MEMO else None)
            small_f, small_o, n_small = [], [], 0
    if small_o:
        _evaluate_many(P, np.concatenate(small_f), P.patterns[pattern], np.concatenate(small_o),
                       np.array([len(o) for o in small_o]) if _LEAF_MEMO else None)


def _combos(cands: list[IntArray]) -> IntArray:
    """(m, L, D) every combination of the per-level candidate orders."""
    idx = np.array(list(itertools.product(*[range(len(c)) for c in cands])), dtype=np.int64).reshape(-1, len(cands))
    return np.stack([c[idx[:, i]] for i, c in enumerate(cands)], axis=1)


def _evaluate_many(P: _Problem, facs: IntArray, keep: Any, orders: IntArray, reps: IntArray | None = None) -> None:
    """Evaluate complete mappings (facs (n, L, D, 3), orders (n, L, D)); update the incumbent.

    ``reps`` (g,), where given, says that the rows come in g runs of one factorization each
    (``reps[i]`` rows, their orders from `_level_orders`): the space's legality test is then
    made on each run's first row alone. It does not depend on such an order: the orders are
    permutations with the pinned loops where the constraints pin them, by construction, and
    the rest of `MapSpace.check` (factors, keep bits, fanouts, capacities, utilization,
    factor constraints) reads the factors and keep bits alone."""
    n = len(orders)
    batch = MappingBatch(temporal=np.ascontiguousarray(facs[..., 0]), spatial=np.ascontiguousarray(facs[..., 1:]),
                         order=orders, keep=np.broadcast_to(keep, (n,) + keep.shape).copy())
    if reps is None:
        valid = P.space.check(batch).valid
    else:
        valid = np.repeat(P.space.check(batch.take(np.cumsum(reps) - reps)).valid, reps)
    P.cert.leaves += n
    if not valid.any():
        return
    m = P.model.evaluate(P.space.problem, P.space.arch, batch)
    val = P.objective.scalar(m.energy_pj, m.cycles, m.valid & valid)
    i = int(np.argmin(val))
    if val[i] < P.best_value:
        P.best_value = float(val[i])
        P.best_batch = batch.take(np.array([i]))


def _solve_orders(P: _Problem, pattern: int, fac: IntArray) -> None:
    """Exact minimum over loop orders of one complete factorization (fac (L, D, 3))."""
    L, D = P.L, P.D
    keep = P.patterns[pattern]
    temporal = fac[:, :, 0]
    cands = [_level_orders(P, lv, temporal) for lv in range(L)]
    sizes = [len(c) for c in cands]
    bm = P.bms[pattern]
    ones = np.ones((1, D), dtype=np.int64)

    def pos_of(orders: IntArray) -> IntArray:
        pos = np.empty_like(orders)
        np.put_along_axis(pos, orders, np.broadcast_to(np.arange(D), orders.shape), axis=-1)
        return pos

    def rec(chosen: list[IntArray]) -> None:
        lv = len(chosen)
        if math.prod(sizes[lv:]) <= _ORDER_BATCH:
            orders = _combos([o[None] for o in chosen] + [cands[x] for x in range(lv, L)])
            _evaluate_many(P, np.broadcast_to(fac, (len(orders),) + fac.shape), keep, orders,
                           np.array([len(orders)]) if _LEAF_MEMO else None)
            return
        if time.perf_counter() > P.deadline:
            P.stopped = "time"
            return
        # fix level lv: bound each candidate with the orders of levels <= lv fixed
        m = sizes[lv]
        pos = np.zeros((m, L, D), dtype=np.int64)
        for x, o in enumerate(chosen):
            pos[:, x] = pos_of(o[None])[0]
        pos[:, lv] = pos_of(cands[lv])
        fixed = np.zeros(L, dtype=bool)
        fixed[: lv + 1] = True
        facs = np.broadcast_to(fac, (m,) + fac.shape)
        e, c, _ = partial_bounds(bm, 0, facs, np.repeat(ones, m, 0), np.repeat(ones, m, 0), np.repeat(ones, m, 0),
                                 order_pos=pos, order_fixed=fixed, cutoff=P.cutoff())
        b = P.objective_bound(e, c)  # (staged: the incumbent only falls, so a row cut now stays cut)
        P.cert.nodes += m
        for i in np.argsort(b, kind="stable"):
            if _cut_test(b[i], P.best_value):
                P.cert.cut += 1
                continue
            rec(chosen + [cands[lv][i]])
            if P.stopped:
                return

    rec([])


# --- the search ----------------------------------------------------------------------------
def _root_frames(P: _Problem) -> list[_Frame]:
    """One frame per keep pattern whose root can be legal, each holding its root node."""
    frames = []
    for pi in range(len(P.patterns)):
        ids = np.zeros((1, P.D), dtype=np.int64)
        b, ok = _bound_nodes(P, pi, 0, 0, ids)
        if ok[0]:
            frames.append(_Frame(pi, 0, 0, ids, b))
    return frames


class _Open:
    """The open nodes: frames of sorted siblings, visited best first (the frame whose next
    node has the smallest bound) while at most ``cap`` nodes are open, depth first (the
    newest frame) above that, so memory stays bounded. Heap keys are lower bounds of a
    frame's next bound (checked lazily), so the smallest key is the certified bound."""

    def __init__(self, cap: int = 2_000_000) -> None:
        self.heap: list[tuple[float, int, int, _Frame]] = []  # (bound, -depth, seq, frame): ties go deep
        self.stack: list[_Frame] = []
        self.n_open = 0
        self.cap = cap
        self._seq = 0

    def push(self, f: _Frame) -> None:
        if f.pos >= len(f.ids):
            return
        self._seq += 1
        heapq.heappush(self.heap, (float(f.bounds[f.pos]), -self._deep(f), self._seq, f))
        self.stack.append(f)
        self.n_open += len(f.ids) - f.pos

    def take(self, f: _Frame, n: int) -> None:
        """n nodes of f leave the open set (expanded or cut)."""
        f.pos += n
        self.n_open -= n
        # the frame's heap entry keeps its old key, still a lower bound of its next node;
        # _clean_top raises it when it reaches the top
        if f.pos >= len(f.ids):  # exhausted: free its arrays (its heap entry is dropped when seen)
            f.ids = f.ids[:0]
            f.bounds = f.bounds[:0]
            f.pos = 0

    @staticmethod
    def _deep(f: _Frame) -> int:
        return f.depth * 64 + f.split

    def _clean_top(self) -> None:
        while self.heap:
            key, _, _, f = self.heap[0]
            if f.pos >= len(f.ids):
                heapq.heappop(self.heap)
                continue
            true = float(f.bounds[f.pos])
            if true > key:
                self._seq += 1
                heapq.heapreplace(self.heap, (true, -self._deep(f), self._seq, f))
                continue
            return

    def pick(self) -> _Frame | None:
        if self.n_open > self.cap:  # depth first: the newest frame with open nodes
            while self.stack and self.stack[-1].pos >= len(self.stack[-1].ids):
                self.stack.pop()
            if self.stack:
                return self.stack[-1]
        self._clean_top()
        if not self.heap:
            return None
        return self.heap[0][3]

    def min_bound(self) -> float:
        self._clean_top()
        return self.heap[0][0] if self.heap else math.inf


# --- incumbents from the frontier ----------------------------------------------------------
def _dive(P: _Problem, pattern: int, depth: int, split: int, node: IntArray) -> None:
    """Complete one open node cheaply, for an incumbent: a beam search down its sub-tree that
    keeps, at every step, the ``_DIVE_BEAM`` children with the lowest bounds (the children
    `_expand` would make, bounded the same way, cut by the incumbent), and at the leaves the
    ``_DIVE_LEAVES`` lowest, solved as the loop solves leaves (`_solve_leaves`: every order,
    or the order search). A better leaf becomes the incumbent through `_evaluate_many`, the
    only way any mapping does: a dive can only lower the incumbent, it opens, closes or cuts
    no node of the tree, so the proof and the certified bound stay those of the loop."""
    cur = node[None, :]
    while depth < P.leaf_depth:
        end = _group_end(P, depth, split)
        dims = range(split, end)
        new_depth, new_split = (depth + 1, 0) if end == P.D else (depth, end)
        if depth == 0:
            kids, _ = _spatial_children(P, pattern, cur, dims)
        else:
            kids = _children_many(P, depth, split, cur, dims)
        keep_ids, keep_b = [], []
        for start in range(0, len(kids), _CHUNK):
            ch = kids[start: start + _CHUNK]
            b, ok = _bound_nodes(P, pattern, new_depth, new_split, ch, P.cutoff())
            live = ok & ~_cut_test(b, P.best_value)
            keep_ids.append(ch[live])
            keep_b.append(b[live])
            if time.perf_counter() > P.deadline:
                return
        ids = np.concatenate(keep_ids) if keep_ids else np.zeros((0, P.D), dtype=np.int64)
        if not len(ids):
            return
        b = np.concatenate(keep_b)
        width = _DIVE_LEAVES if new_depth == P.leaf_depth else _DIVE_BEAM
        top = np.argsort(b, kind="stable")[:width]
        cur, bounds, depth, split = ids[top], b[top], new_depth, new_split
    _solve_leaves(P, pattern, node_inputs(P.trees, depth, 0, cur)["fac"], bounds)


class _Diver:
    """Dives (`_dive`) from the open nodes with the lowest bounds, interleaved with the
    branch and bound: called before every node, it dives while the dives' time stays within
    ``share`` of the time since the loop began (so the loop keeps at least ``1 - share`` of
    it, give or take one dive, itself cut at ``_DIVE_MAX_S``). The start is the lowest-bound
    open node not yet dived from, among the next few nodes of the ``_DIVE_STARTS`` frames
    whose keys are the lowest. The tree's counts are left as they were; the dives' own are
    in the certificate's ``dives``, ``dive_leaves``, ``dive_improved`` and ``dive_s``."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.t0 = time.perf_counter()
        self.spent = 0.0
        self.seen: set[tuple[int, int, int, bytes]] = set()

    def due(self) -> bool:
        return self.share > 0 and self.spent <= self.share * (time.perf_counter() - self.t0)

    def _start(self, open_: _Open, leaf_depth: int) -> tuple[int, int, int, IntArray] | None:
        best: tuple[float, tuple[int, int, int, IntArray]] | None = None
        for _, _, _, f in heapq.nsmallest(_DIVE_STARTS, open_.heap):
            if f.depth >= leaf_depth:  # the loop solves an open leaf next anyway
                continue
            for j in range(f.pos, min(f.pos + 4, len(f.ids))):
                key = (f.pattern, f.depth, f.split, f.ids[j].tobytes())
                if key not in self.seen:
                    if best is None or float(f.bounds[j]) < best[0]:
                        best = (float(f.bounds[j]), (f.pattern, f.depth, f.split, f.ids[j]))
                    break
        return None if best is None else best[1]

    def run(self, P: _Problem, open_: _Open) -> None:
        t = time.perf_counter()
        start = self._start(open_, P.leaf_depth)
        if start is None:
            self.spent += time.perf_counter() - t
            return
        pattern, depth, split, node = start
        self.seen.add((pattern, depth, split, node.tobytes()))
        cert = P.cert
        saved = (cert.nodes, cert.cut, cert.infeasible, cert.leaves)
        deadline, before = P.deadline, P.best_value
        P.deadline = min(deadline, t + _DIVE_MAX_S)
        try:
            _dive(P, pattern, depth, split, node)
        finally:
            P.deadline = deadline
            P.stopped = ""  # a dive cut at its own time limit stops nothing else
            cert.dive_leaves += cert.leaves - saved[3]
            cert.nodes, cert.cut, cert.infeasible, cert.leaves = saved
            cert.dives += 1
            cert.dive_improved += int(P.best_value < before)
            dt = time.perf_counter() - t
            cert.dive_s += dt
            self.spent += dt


def _loop(P: _Problem, open_: _Open, progress: Any, t0: float, poll: Any = None) -> str:
    """Branch and bound until no node is open (returns "") or a limit stops it.

    ``poll(open_)``, when given, is called before every node, where the open set holds all
    the work left (`_solve_workers`: the incumbent exchanged, work given away); a non-empty
    answer stops the loop with that reason."""
    last_report = t0
    diver = _Diver(P.dive_share)
    while True:
        if time.perf_counter() > P.deadline:
            return "time"
        if poll is not None:
            said = poll(open_)
            if said:
                return str(said)
        if P.max_leaves is not None and P.cert.leaves >= P.max_leaves:
            return "budget"
        if diver.due():
            diver.run(P, open_)
        f = open_.pick()
        if f is None:
            return ""
        b = float(f.bounds[f.pos])
        if _cut_test(b, P.best_value):  # sorted: the rest of the frame is cut too
            P.cert.cut += len(f.ids) - f.pos
            open_.take(f, len(f.ids) - f.pos)
            continue
        P.cert.nodes += 1
        P.current = b  # open until its children are pushed (or its orders are searched)
        if f.depth == P.leaf_depth:
            # this leaf and its open siblings (sorted by bound, not yet cut): their small order
            # sets are evaluated in one batch, larger ones by the order search
            lo = f.pos
            hi = lo + 1
            while hi < len(f.ids) and hi - lo < _LEAF_GROUP and not _cut_test(f.bounds[hi], P.best_value):
                hi += 1
            ids = f.ids[lo:hi]
            bnds = f.bounds[lo:hi]
            P.cert.nodes += len(ids) - 1
            open_.take(f, hi - lo)
            _solve_leaves(P, f.pattern, node_inputs(P.trees, f.depth, 0, ids)["fac"], bnds)
            if P.stopped:
                return P.stopped
            P.current = math.inf
            continue
        # this node and the next siblings under the incumbent, expanded together (one numpy
        # pass over all their children)
        lo = f.pos
        hi = lo + 1
        if hi < len(f.ids) and not _cut_test(f.bounds[hi], P.best_value):
            # siblings while their children fill about one numpy pass: every node under the
            # incumbent is expanded before a proof, so taking them together costs nothing
            # but the order among them
            top = min(len(f.ids), lo + (_EXPAND_GROUP if f.depth else _SPATIAL_GROUP))
            live = lo + 1 + int(np.argmax(_cut_test(f.bounds[lo + 1: top], P.best_value))) \
                if _cut_test(f.bounds[top - 1], P.best_value) else top
            if f.depth:
                counts = np.cumsum(_child_counts(P, f.depth, f.split, f.ids[lo:live]))
                hi = lo + max(1, int(np.searchsorted(counts, _CHUNK, side="right")))
            else:  # spatial: most children fail a fanout early (`_spatial_children`)
                hi = live
        nodes = f.ids[lo:hi]
        P.cert.nodes += len(nodes) - 1
        open_.take(f, hi - lo)
        child, complete = _expand(P, f, nodes)
        if not complete:
            return "time"
        if child is not None:
            open_.push(child)
        P.current = math.inf
        if progress is not None and time.perf_counter() - last_report > 1.0:
            last_report = time.perf_counter()
            progress(P.best_value, min(open_.min_bound(), P.best_value), P.cert)


def solve(space: Any, model: Any, objective: ObjectiveSpec, *, time_limit_s: float | None = None,
          max_leaves: int | None = None, incumbent: MappingBatch | None = None,
          progress: Any = None, workers: int = 1,
          dive_share: float = _DIVE_SHARE,
          warm: _WarmStart | None = None) -> tuple[MappingBatch | None, float, Certificate]:
    """Branch and bound over ``space``.

    Parameters
    ----------
    space, model, objective
        A `MapSpace`, the ``loopnest`` model and a single objective.
    time_limit_s, max_leaves
        Stop after this many seconds, or once this many mappings were evaluated; the
        certificate then holds the smallest bound among the open branches.
    incumbent
        Mappings to start from; the best legal one is the first incumbent.
    progress
        Optional callback ``progress(best, lower_bound, certificate)``, about once a second.
    workers
        Processes that share the tree (`_solve_workers`); 1 runs it in this process. A
        padded space, a ``max_leaves`` limit, or a platform without ``fork`` run on one.
    dive_share
        The most share of the time that dives from the open nodes with the lowest bounds take
        (`_Diver`: incumbents from the frontier); 0 turns them off. They can only lower the
        incumbent; the proof and the certified bound do not depend on them.
    warm
        A warm start running beside the search (`_WarmStart`): its value is cut with as soon
        as it ends, and its mapping is the result when no better one is found (it is waited
        for unless the search proved a mapping of its own optimal first).

    Returns
    -------
    (best mapping as a one-row batch or None, its objective value, `Certificate`)
    """
    if getattr(space, "allow_padding", False):
        return _solve_padded(space, model, objective, time_limit_s=time_limit_s, max_leaves=max_leaves,
                             incumbent=incumbent, progress=progress, dive_share=dive_share)
    t0 = time.perf_counter()
    P = _setup(space, model, objective)
    P.deadline = t0 + time_limit_s if time_limit_s is not None else math.inf
    P.max_leaves = max_leaves
    P.dive_share = dive_share
    P.best_value, P.best_batch = _first_incumbent(space, model, objective, incumbent)
    P.cert.patterns = len(P.patterns)
    roots = _root_frames(P)
    open_ = _Open()
    for fr in roots:
        open_.push(fr)
    P.cert.root_lower_bound = min([float(fr.bounds[0]) for fr in roots] + [P.best_value])
    low = None  # the least bound of the work left open by the workers (`_solve_workers`)
    try:
        if workers > 1 and max_leaves is None and _can_fork():
            stop, low = _solve_workers(P, open_, progress, t0, workers, warm)
        else:
            stop = _loop(P, open_, progress, t0,
                         poll=None if warm is None else (lambda o: _sync(P, warm.shared) or ""))
    except KeyboardInterrupt:  # Ctrl-C: keep the incumbent, certify what is open
        stop = "interrupted"
    except BaseException:
        if warm is not None:
            warm.close()
        raise
    if warm is not None:
        _sync(P, warm.shared)
        # wait for it unless the tree holds the best mapping and was proven or interrupted
        warm.finish(P, needed=P.best_batch is None or stop not in ("", "interrupted"))
        P.cert.warm_start_evaluations = warm.evaluations
    current = P.current
    cert = P.cert
    cert.incumbent = P.best_value
    cert.elapsed_s = time.perf_counter() - t0
    if stop:
        cert.stop_reason = stop
        cert.proven_optimal = False
        cert.lower_bound = min(open_.min_bound(), current, P.best_value) if low is None else min(low, P.best_value)
    else:
        cert.stop_reason = "proven" if math.isfinite(P.best_value) else "infeasible"
        cert.proven_optimal = math.isfinite(P.best_value)
        cert.lower_bound = P.best_value
    return P.best_batch, P.best_value, cert


# --- one tree on several processes -----------------------------------------------------
_SHARE_NODES = 64  # open nodes per worker before the tree is dealt out (see _solve_workers)
_DONATE_EVERY_S = 0.05  # the least time between two gifts of work from one worker


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def default_workers() -> int:
    """The processes one exact search uses by default: the CPUs this process may run on, or,
    inside a Ray task (a sweep's or a portfolio's), the CPUs Ray assigned to the task, so
    that tasks side by side do not share cores."""
    import os
    import sys

    ray = sys.modules.get("ray")  # loaded only where Ray runs: never imported from here
    if ray is not None and ray.is_initialized():
        try:
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
        except Exception:  # noqa: BLE001 - the driver or an old Ray: no task's share to read
            cpus = None
        if cpus:
            return max(1, int(cpus))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not every platform has sched_getaffinity
        return max(1, os.cpu_count() or 1)


def _deal(frames: list[_Frame], k: int) -> list[list[_Frame]]:
    """The open nodes of ``frames`` dealt into ``k`` shares, every share a spread of the
    bound order: a frame with at least ``k`` open nodes gives every share every k-th node
    (each part still sorted), a smaller one goes whole to the next share in turn."""
    parts: list[list[_Frame]] = [[] for _ in range(k)]
    turn = 0
    live = [f for f in frames if f.pos < len(f.ids)]
    live.sort(key=lambda f: float(f.bounds[f.pos]))
    for f in live:
        ids, b = f.ids[f.pos:], f.bounds[f.pos:]
        if len(ids) >= k:
            for j in range(k):
                parts[(j + turn) % k].append(_Frame(f.pattern, f.depth, f.split, ids[j::k].copy(), b[j::k].copy()))
        else:
            parts[turn % k].append(_Frame(f.pattern, f.depth, f.split, ids.copy(), b.copy()))
        turn += 1
    return [p for p in parts if p]


def _split_open(open_: _Open) -> list[_Frame]:
    """Half of the open nodes of ``open_``, taken out of it for another worker: every other
    node of each frame with two or more open, every other frame of those with one. Each
    frame keeps its next node, so its heap key stays a lower bound of it."""
    give: list[_Frame] = []
    alt = False
    for _, _, _, f in open_.heap:
        r = len(f.ids) - f.pos
        if r <= 0:
            continue
        ids, b = f.ids[f.pos:], f.bounds[f.pos:]
        if r >= 2:
            give.append(_Frame(f.pattern, f.depth, f.split, ids[1::2].copy(), b[1::2].copy()))
            f.ids, f.bounds, f.pos = ids[0::2].copy(), b[0::2].copy(), 0
        else:
            if alt:
                give.append(_Frame(f.pattern, f.depth, f.split, ids.copy(), b.copy()))
                f.ids, f.bounds, f.pos = f.ids[:0], f.bounds[:0], 0
            alt = not alt
    open_.n_open = sum(len(f.ids) - f.pos for _, _, _, f in open_.heap)
    return give


def _open_frames(open_: _Open) -> list[_Frame]:
    return [f for _, _, _, f in open_.heap if f.pos < len(f.ids)]


def _frames_low(frames: list[_Frame]) -> float:
    return min((float(f.bounds[f.pos]) for f in frames if f.pos < len(f.ids)), default=math.inf)


_COUNTS = ("nodes", "cut", "infeasible", "leaves", "dives", "dive_leaves", "dive_improved", "dive_s")


def _worker_main(P: _Problem, wid: int, tasks: Any, results: Any, best: Any, hungry: Any, halt: Any,
                 t0: float) -> None:
    """One worker of `_solve_workers` (a forked process holding ``P``): runs the branch and
    bound on each share it is sent until it is sent None. Before every node it trades the
    incumbent's value with the others (``best``, shared memory), stops if ``halt`` is set,
    and gives half its open nodes away when a worker is idle (``hungry``)."""
    import signal
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent catches Ctrl-C and sets halt
    last = [0.0]

    def poll(open_: _Open) -> str:
        _sync(P, best)
        if halt.value:
            return "interrupted"
        if hungry.value > 0 and open_.n_open >= 2 and time.perf_counter() - last[0] >= _DONATE_EVERY_S:
            with hungry.get_lock():
                mine = hungry.value > 0
                if mine:
                    hungry.value -= 1
            if mine:
                last[0] = time.perf_counter()
                gift = _split_open(open_)
                if gift:
                    results.put(("donate", wid, gift))
        return ""

    cpu0 = time.process_time()
    while True:
        share = tasks.get()
        if share is None:
            return
        try:
            P.cert = Certificate()
            P.current, P.stopped = math.inf, ""
            P.best_value, P.best_batch = best.value, None
            open_ = _Open()
            for f in share:
                open_.push(f)
            stop = _loop(P, open_, None, t0, poll=poll)
            low = min(open_.min_bound(), P.current) if stop else math.inf
            poll(open_)  # publish an incumbent found after the last node
            found = P.best_batch is not None
            results.put(("done", wid, stop, low, P.best_value if found else math.inf, P.best_batch,
                         {k: getattr(P.cert, k) for k in _COUNTS}, time.process_time() - cpu0))
        except Exception:  # noqa: BLE001 - reported to the parent, which raises it
            results.put(("error", wid, traceback.format_exc()))
            return


def _solve_workers(P: _Problem, open_: _Open, progress: Any, t0: float, workers: int,
                   warm: _WarmStart | None = None) -> tuple[str, float]:
    """Branch and bound of one tree on ``workers`` processes; returns the stop reason ("" when
    the whole tree was closed) and the least bound of the work left open.

    This process first expands the tree best first until ``_SHARE_NODES`` nodes per worker
    are open (a small tree is proven here, with no process started), then deals the open
    nodes into one share per worker (`_deal`) and forks the workers (`_worker_main`), each
    running the same `_loop` on its share with its own open set. The incumbent's value is
    shared memory: every worker cuts with the best any worker found. A worker with no share
    left makes the others give half their open nodes away (`_split_open`), which are dealt
    to the idle ones (work stealing). The result is exact as the serial search's is: every
    node is cut by the global incumbent or expanded by one worker; the tree is closed only
    when every share was; else the certified bound is the least of the workers' open bounds
    and of the shares not yet run (their nodes' bounds). With ``warm`` (a warm start running
    beside the tree, `_WarmStart`) the incumbent's value is its ``shared``, and the last
    worker starts only when the warm start has ended."""
    import multiprocessing
    import queue

    target = _SHARE_NODES * workers

    def share_poll(o: _Open) -> str:
        if warm is not None:
            _sync(P, warm.shared)
        return "share" if o.n_open >= target else ""

    stop = _loop(P, open_, progress, t0, poll=share_poll)
    if stop != "share":
        return stop, (min(open_.min_bound(), P.current) if stop else math.inf)
    ctx = multiprocessing.get_context("fork")
    if warm is not None:
        best = warm.shared
        _sync(P, best)
    else:
        best = ctx.Value("d", P.best_value)
    hungry = ctx.Value("i", 0)
    halt = ctx.Value("i", 0)
    results = ctx.Queue()
    tasks = [ctx.SimpleQueue() for _ in range(workers)]
    procs = [ctx.Process(target=_worker_main, args=(P, w, tasks[w], results, best, hungry, halt, t0), daemon=True)
             for w in range(workers)]
    pending = _open_frames(open_)
    open_.heap, open_.stack, open_.n_open = [], [], 0  # the work is the workers' now
    late = workers - 1 if warm is not None and warm.running() else workers  # the first not started yet
    idle = set(range(late))
    running: dict[int, float] = {}  # worker -> the least bound of its share when sent
    stops: list[str] = []
    lows: list[float] = []
    stopping = False
    last_report = time.perf_counter()

    def dispatch() -> None:
        nonlocal pending
        if pending and idle and not stopping:
            for share in _deal(pending, len(idle)):
                w = idle.pop()
                running[w] = _frames_low(share)
                tasks[w].put(share)
            pending = []
        hungry.value = len(idle) if not pending and not stopping else 0

    P.cert.workers = workers
    P.cert.worker_cpu_s = [0.0] * workers
    for pr in procs[:late]:
        pr.start()
    try:
        dispatch()
        while running:
            if late < workers and warm is not None and not warm.running():
                for w in range(late, workers):
                    procs[w].start()
                    idle.add(w)
                late = workers
                dispatch()
            try:
                try:
                    msg = results.get(timeout=0.25)
                except queue.Empty:
                    dead = [w for w in running if not procs[w].is_alive()]
                    if dead:
                        raise RuntimeError(f"exact search: worker process {dead[0]} died (exit code "
                                           f"{procs[dead[0]].exitcode}) with its share of the tree open") from None
                    msg = None
                if msg is not None:
                    kind, w = msg[0], msg[1]
                    if kind == "error":
                        raise RuntimeError(f"exact search: worker process {w} failed:\n{msg[2]}")
                    if kind == "donate":
                        pending.extend(msg[2])
                    else:
                        _, _, st, low, value, batch, counts, cpu = msg
                        P.cert.worker_cpu_s[w] = cpu
                        for k, v in counts.items():
                            setattr(P.cert, k, getattr(P.cert, k) + v)
                        if batch is not None and value < P.best_value:
                            P.best_value, P.best_batch = value, batch
                        del running[w]
                        idle.add(w)
                        if st:
                            stops.append(st)
                            lows.append(low)
                            stopping = True
                    dispatch()
                if progress is not None and time.perf_counter() - last_report > 1.0:
                    last_report = time.perf_counter()
                    lb = min(list(running.values()) + [_frames_low(pending), P.best_value])
                    progress(min(P.best_value, best.value), lb, P.cert)
            except KeyboardInterrupt:  # Ctrl-C: the workers stop at their next node and report
                halt.value = 1
                stopping = True
                stops.append("interrupted")
                dispatch()
    finally:
        halt.value = 1
        for q in tasks[:late]:
            q.put(None)
        for pr in procs[:late]:
            pr.join(timeout=5)
            if pr.is_alive():
                pr.terminate()
    low = min(lows + [_frames_low(pending)])
    if not stops and not pending:
        return "", math.inf
    stop = "interrupted" if "interrupted" in stops else (stops[0] if stops else "time")
    return stop, low


class _WarmStart:
    """The warm start (``anneal``) run in a forked process beside the branch and bound
    (`ExactSearcher.run` with two or more workers): ``shared`` is the incumbent's value that
    the tree's processes cut with (`_sync`), which the warm start lowers to its best as soon
    as it ends; its mapping comes back through a pipe (`finish`). Run first, the warm start
    keeps the branch and bound waiting, though it uses less than one core (its proposals
    are numpy on one thread; only its evaluations spread over threads: 2.1 CPU s in 3.3 s
    for simple3 L3's 1M evaluations). While it runs, `_solve_workers` keeps one of its
    workers unstarted, so the processes never outnumber the workers; the last worker starts
    when the warm start ends and takes half of a busy one's nodes. The warm start is the
    same run (budget, seed, time cap), so its mapping is the same as when it ran first
    unless its time cap stops it earlier. The tree does not start from nothing: a quick
    warm start of ``_QUICK_WARM`` evaluations runs in this process first (beside this one),
    since the tree's cuts want an incumbent early (simple3's depthwise layer, one process:
    84-133 thousand nodes to the proof from no incumbent, 60 thousand from 20,000
    evaluations' mapping, 59 thousand from 1M evaluations')."""

    def __init__(self, run: Any) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.shared = ctx.Value("d", math.inf)
        self._recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_warm_main, args=(run, self.shared, send), daemon=True)
        self.proc.start()
        send.close()
        self.evaluations = 0
        self.seconds = 0.0

    def running(self) -> bool:
        return self.proc.is_alive() and not self._recv.poll()

    def finish(self, P: _Problem, needed: bool) -> None:
        """Take the warm start's mapping as the incumbent if it is better. ``needed``: wait
        for the warm start to end (the search was stopped by time, or holds no mapping of its
        own for its incumbent); otherwise (proven, or interrupted, from a mapping of its own)
        a warm start still running is stopped (its evaluations are not counted)."""
        if not needed and self.running():
            self.close()
            return
        try:
            msg = self._recv.recv()
        except EOFError:
            raise RuntimeError(f"exact search: the warm start's process died (exit code {self.proc.exitcode})") \
                from None
        finally:
            self.close()
        if msg[0] == "error":
            raise RuntimeError(f"exact search: the warm start failed:\n{msg[1]}")
        _, self.evaluations, self.seconds, value, batch = msg
        if batch is not None and (value < P.best_value or P.best_batch is None and value <= P.best_value):
            P.best_value, P.best_batch = value, batch

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()
        self._recv.close()


def _warm_main(run: Any, shared: Any, send: Any) -> None:
    """The warm start's process (`_WarmStart`): ``run()`` returns ``(evaluations, batch or
    None)``; the batch's value is taken as `_first_incumbent` takes it, published to
    ``shared`` and sent with the batch."""
    import signal
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent catches Ctrl-C and stops this
    try:
        t = time.perf_counter()
        n, batch, space, model, objective = run()
        value, batch = _first_incumbent(space, model, objective, batch)
        with shared.get_lock():
            if value < shared.value:
                shared.value = value
        send.send(("done", n, time.perf_counter() - t, value, batch))
    except Exception:  # noqa: BLE001 - reported to the parent, which raises it
        send.send(("error", traceback.format_exc()))
    finally:
        send.close()


def _sync(P: _Problem, shared: Any) -> None:
    """Trade the incumbent's value with the other processes of one search through ``shared``
    (a `multiprocessing.Value`): publish one found here, cut with one found elsewhere (whose
    mapping stays with its finder)."""
    value = shared.value
    if P.best_value < value:
        with shared.get_lock():
            if P.best_value < shared.value:
                shared.value = P.best_value
    elif value < P.best_value:
        P.best_value, P.best_batch = value, None


def _first_incumbent(space: Any, model: Any, objective: ObjectiveSpec,
                     incumbent: MappingBatch | None) -> tuple[float, MappingBatch | None]:
    """The best legal mapping of ``incumbent`` (objective value, one-row batch), or
    ``(inf, None)`` when there is none."""
    if incumbent is None or not len(incumbent):
        return math.inf, None
    chk = space.check(incumbent)
    m = model.evaluate(space.problem, space.arch, incumbent)
    val = objective.scalar(m.energy_pj, m.cycles, m.valid & chk.valid)
    i = int(np.argmin(val))
    if not math.isfinite(val[i]):
        return math.inf, None
    return float(val[i]), incumbent.take(np.array([i]))


def _solve_padded(space: Any, model: Any, objective: ObjectiveSpec, *, time_limit_s: float | None,
                  max_leaves: int | None, incumbent: MappingBatch | None,
                  progress: Any, dive_share: float = _DIVE_SHARE) -> tuple[MappingBatch | None, float, Certificate]:
    """`solve` of a padded space: the branch and bound of each padded bound vector ``B'``
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


def _root_bound_padded(space: Any, objective: ObjectiveSpec, max_nodes: int,
                       time_s: float) -> dict[str, float] | None:
    """`root_bound` of a padded space: the least over its branches (`PaddedBranches`) of each
    branch's root bound, cheapest branch first while ``time_s`` lasts; the branches left
    count with their cheap bounds (MAC energy and ``ceil(M' / n_macs)`` cycles). None when
    the space has too many padded bound vectors to list (the caller falls back to another
    bound)."""
    t0 = time.perf_counter()
    try:
        br = PaddedBranches(space, objective)
    except SpecError:
        return None
    best = {"cycles": math.inf, "energy_pj": math.inf, "edp": math.inf, "objective": math.inf}
    for i in range(len(br)):
        left = time_s - (time.perf_counter() - t0)
        if left <= 0 or br.cheap[i] >= best["objective"] and i > 0:
            # the rest at their cheap bounds (each the least at the branch with fewest MACs)
            best["energy_pj"] = min(best["energy_pj"], float(br.energy_lb[i]))
            best["cycles"] = min(best["cycles"], float(br.cycles_lb[i]))
            best["edp"] = min(best["edp"], float(br.energy_lb[i] * br.cycles_lb[i]))
            best["objective"] = min(best["objective"], float(br.cheap[i]))
            break
        rb = root_bound(br.view(i), objective, max_nodes=max_nodes, time_s=left / 4)
        if rb is not None:
            for key in best:
                best[key] = min(best[key], rb[key])
    if not math.isfinite(best["objective"]):
        return None
    return best


def root_bound(space: Any, objective: ObjectiveSpec, *, max_nodes: int = 4_096,
               time_s: float = 0.3) -> dict[str, float] | None:
    """A cheap lower bound of every mapping of the space under the loopnest model.

    Bounds the root of every keep pattern's tree, then, patterns with the smallest bound
    first and while ``time_s`` lasts, expands a pattern's tree breadth first (one level of
    the map space, one or more dims at a time, as the search does) while it has at most
    ``max_nodes`` open nodes. Returns the smallest bound among the open nodes of every
    pattern, ``{"cycles", "energy_pj", "edp", "objective"}`` (each minimised on its own, so
    each bounds its own metric), or None when no mapping can be legal.
    """
    if getattr(space, "allow_padding", False):
        return _root_bound_padded(space, objective, max_nodes, time_s)
    t0 = time.perf_counter()
    P = _setup(space, type("LoopNest", (), {"name": "loopnest"})(), objective)
    zero = np.zeros((1, P.D), dtype=np.int64)
    frontier: list[tuple[float, _Frame]] = []
    for pi in range(len(P.patterns)):
        b, ok = _bound_nodes(P, pi, 0, 0, zero)
        if ok[0]:
            frontier.append((float(b[0]), _Frame(pi, 0, 0, zero, b)))
    frontier.sort(key=lambda x: x[0])
    finals: list[tuple[int, _Frame]] = []
    for _, f in frontier:
        pi = f.pattern
        while f.depth < P.leaf_depth and time.perf_counter() - t0 < time_s:
            sizes = np.ones((len(f.ids), P.D), dtype=np.int64)  # (nodes, D) children per dim
            for d in range(f.split, P.D):
                tr = P.trees[d]
                sizes[:, d] = tr.child_hi[f.depth][f.ids[:, d]] - tr.child_lo[f.depth][f.ids[:, d]]
            end = f.split + 1
            while end < P.D and int(sizes[:, f.split: end + 1].prod(axis=1).sum()) <= max_nodes:
                end += 1
            if int(sizes[:, f.split: end].prod(axis=1).sum()) > max_nodes:
                break
            dims = range(f.split, end)
            new_depth, new_split = (f.depth + 1, 0) if end == P.D else (f.depth, end)
            allk = _children_many(P, f.depth, f.split, f.ids, dims)
            kids = []
            for start in range(0, len(allk), _CHUNK):
                ch = allk[start: start + _CHUNK]
                _, ok = _bound_nodes(P, pi, new_depth, new_split, ch)
                kids.append(ch[ok])
            ids = np.concatenate(kids) if kids else np.zeros((0, P.D), dtype=np.int64)
            f = _Frame(pi, new_depth, new_split, ids, np.zeros(len(ids)))
            if len(ids) == 0:
                break
        if len(f.ids):
            finals.append((pi, f))
    best = {"cycles": math.inf, "energy_pj": math.inf, "edp": math.inf, "objective": math.inf}
    for pi, f in finals:
        e, c, ok = partial_bounds(P.bms[pi], **node_inputs(P.trees, f.depth, f.split, f.ids))
        if not ok.any():
            continue
        e, c = e[ok], c[ok]
        best["energy_pj"] = min(best["energy_pj"], float(e.min()))
        best["cycles"] = min(best["cycles"], float(c.min()))
        best["edp"] = min(best["edp"], float((e * c).min()))
        best["objective"] = min(best["objective"], float(P.objective_bound(e, c).min()))
    if not math.isfinite(best["objective"]):
        return None
    return best


class ExactSearcher:
    """The ``exact`` searcher: branch and bound with a certificate (see module doc).

    It is a solver: it owns its loop over the space and the cost model, so the API runs
    it through :meth:`run` rather than the ask/tell driver. Options (``searcher_options``):

    warm_budget
        Evaluations of the default searcher (``anneal``) that find the first incumbent, at
        most a quarter of the time limit and a quarter of the space's points (at least
        20,000) (default 1,000,000: the default search itself, so the exact result is never
        worse than it; 0: none, the search starts from no incumbent).
    workers
        Processes that share the branch and bound of the layer (default: every CPU this
        process may use, inside a Ray task the CPUs Ray gave it, `default_workers`; 1: this
        process alone). The incumbent is shared
        and idle workers take half of a busy one's open nodes (`_solve_workers`); the proof
        and the certified bound are the same as on one. The warm start runs on one process:
        on two or more, beside the tree (`_WarmStart`), which starts from a quick warm start
        of ``_QUICK_WARM`` evaluations.
    dive_share
        The most share of the branch and bound's time spent on dives for incumbents from the
        open nodes with the lowest bounds (`_Diver`; default 0.1; 0: none).
    """

    name: ClassVar[str] = "exact"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.SOLVER, Cap.SEEDABLE})
    default_budget: ClassVar[int | None] = None
    option_names: ClassVar[tuple[str, ...]] = ("warm_budget", "workers", "dive_share")
    DEFAULT_WARM_BUDGET: ClassVar[int] = 1_000_000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("the exact searcher is a solver: run it with accelmap.search(..., searcher='exact') "
                        "or `accelmap search --searcher exact`, not through ask/tell")

    @classmethod
    def run(cls, *, problem: Any, arch: Any, space: Any, model: Any, model_name: str, objective: ObjectiveSpec,
            seed: int, budget: int | None, time_limit_s: float | None, options: dict[str, Any],
            progress: bool, config: dict[str, Any], initial: Any = None) -> Any:
        """Run the exact search; returns a `SearchResult` with its certificate.

        ``budget`` caps the mappings the branch and bound evaluates (the warm start's
        evaluations are counted apart); ``time_limit_s`` caps the warm start and the branch
        and bound together (the map space, built before, and the cheap root bound of the
        result, at most 0.3 s after, come on top). Either limit ends the run with the
        certified bound of the open branches. ``initial`` (k, n_params), encoded points of
        ``space``, join the warm start's best as candidates for the first incumbent (a
        network search hands a layer's best mapping to its next run so).
        """
        from accelmap.search.driver import Driver, DriverOptions
        from accelmap.search.result import History, SearchResult, mapping_to_json

        opts = dict(options)
        warm = opts.pop("warm_budget", cls.DEFAULT_WARM_BUDGET)
        workers = opts.pop("workers", None)
        dive_share = opts.pop("dive_share", _DIVE_SHARE)
        if opts:
            raise TypeError(f"searcher exact: unknown option(s) {sorted(opts)}; it takes warm_budget, workers "
                            "and dive_share")
        if isinstance(dive_share, bool) or not isinstance(dive_share, (int, float)) or not 0 <= dive_share < 1:
            raise SpecError(f"searcher exact: dive_share = {dive_share!r}; expected a number in [0, 1)")
        if isinstance(warm, bool) or not isinstance(warm, int) or warm < 0:
            raise SpecError(f"searcher exact: warm_budget = {warm!r}; expected an int >= 0")
        if workers is None:
            workers = default_workers()
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise SpecError(f"searcher exact: workers = {workers!r}; expected an int >= 1")
        if budget is not None and budget < 1:
            raise SpecError(f"budget = {budget}; expected an int >= 1")
        _require(model, objective)  # refuse other models and Pareto objectives before any work
        t0 = time.perf_counter()
        incumbent = None
        n_warm = 0
        beside: _WarmStart | None = None
        if warm:
            from accelmap._registry import searchers

            # a small space (a constrained one, say) is proven faster than it is sampled
            warm_run = min(warm, max(_WARM_FLOOR, space.size().total // 4))
            wopts = DriverOptions(budget=warm_run, time_limit_s=None if time_limit_s is None else 0.25 * time_limit_s)

            def warm_start(o: DriverOptions = wopts) -> tuple[int, MappingBatch | None, Any, Any, ObjectiveSpec]:
                try:
                    wr = Driver(problem, arch, space, model, searchers.get("anneal"), objective=objective, seed=seed,
                                options=o, model_name=model_name, searcher_name="anneal").run()
                except InfeasibleSpaceError:  # no legal mapping found by sampling: the exact search decides
                    return 0, None, space, model, objective
                return wr.n_evaluations, (None if wr.best is None else wr.best.as_batch()), space, model, objective

            # (a warm start no longer than the quick one runs first: a fork would cost more)
            if _WARM_BESIDE and workers > 1 and budget is None and warm_run > _QUICK_WARM and _can_fork() \
                    and not getattr(space, "allow_padding", False):
                beside = _WarmStart(warm_start)  # on its own core while the tree starts on the others
                if _QUICK_WARM:  # a first incumbent for the tree, while the warm start runs
                    n_warm, incumbent, *_ = warm_start(dataclasses.replace(wopts, budget=_QUICK_WARM))
            else:
                n_warm, incumbent, *_ = warm_start()
        if initial is not None and len(initial):
            given = space.decode(np.asarray(initial, dtype=np.int64))
            incumbent = given if incumbent is None else MappingBatch.concat([given, incumbent])
        left = None if time_limit_s is None else max(time_limit_s - (time.perf_counter() - t0), 0.0)
        bar = _progress_bar(progress)
        try:
            best, value, cert = solve(space, model, objective, time_limit_s=left, max_leaves=budget,
                                      incumbent=incumbent, progress=bar, workers=workers,
                                      dive_share=float(dive_share), warm=beside)
        finally:
            if bar is not None:
                bar.close()
            if beside is not None:
                beside.close()
        cert.warm_start_evaluations += n_warm
        cert.elapsed_s = time.perf_counter() - t0
        if best is None:
            if cert.proven_optimal or cert.stop_reason == "infeasible":
                raise InfeasibleSpaceError(
                    f"no mapping of {getattr(problem, 'name', 'the problem')} on {getattr(arch, 'name', 'the arch')} "
                    "is legal: the exact search covered the whole space (every branch exceeds a capacity or "
                    "fanout, or fails a constraint). Try a larger buffer, fewer constraints"
                    + (" or imperfect factorization (--padding)." if not getattr(space, "allow_padding", True) else "."))
            raise InfeasibleSpaceError(
                f"the exact search found no legal mapping of {getattr(problem, 'name', 'the problem')} before it "
                f"stopped ({cert.stop_reason}); give it more time or a budget")
        metrics = model.evaluate(problem, arch, best)
        row = metrics.row(0)
        rb = root_bound(space, objective)
        if rb is not None and not cert.proven_optimal:  # both bound the objective: keep the larger
            cert.lower_bound = min(max(cert.lower_bound, rb["objective"]), value)
        lb: dict[str, float] = dict(rb) if rb else {}
        lb["objective"] = cert.lower_bound
        key = {"edp": "edp", "energy": "energy_pj", "cycles": "cycles"}.get(objective.name)
        if key is not None:
            lb[key] = max(lb.get(key, 0.0), cert.lower_bound)
        n_eval = n_warm + cert.leaves
        stop = "exhausted" if cert.proven_optimal else cert.stop_reason
        cfg = dict(config)
        cfg.update({"searcher_options": {"warm_budget": warm, "workers": workers, "dive_share": dive_share},
                    "budget": budget, "time_limit_s": time_limit_s,
                    "seed": seed, "objective": objective.name, "model": model_name})
        return SearchResult(
            problem=getattr(problem, "name", str(problem)), arch=getattr(arch, "name", str(arch)),
            model=model_name, searcher=cls.name, objective=objective, best=best[0],
            best_x=tuple(int(v) for v in space.encode(best)[0]), best_metrics=row, best_objective=value,
            history=History(evaluations=(n_eval,), seconds=(round(cert.elapsed_s, 6),), best=(value,)),
            n_evaluations=n_eval, n_valid=n_eval, elapsed_s=round(cert.elapsed_s, 6), stop_reason=stop,
            lower_bound=lb, proven_optimal=cert.proven_optimal, bound_kind="exact",
            certificate=cert.to_dict(), config=cfg, seed=seed,
            best_mapping_json=mapping_to_json(best[0], problem, arch),
        )


def _progress_bar(enabled: bool) -> Any:
    """A tqdm line showing the incumbent, the certified bound and the node counts."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    bar = tqdm(total=None, unit="node", dynamic_ncols=True, desc="exact", leave=True)

    def update(best: float, lb: float, cert: Certificate) -> None:
        gap = best / lb - 1.0 if lb > 0 and math.isfinite(best) else math.inf
        bar.set_postfix_str(f"best {best:.5g} bound {lb:.5g} gap {gap:.2%} cut {cert.cut:,} leaves {cert.leaves:,}")
        bar.n = cert.nodes
        bar.refresh()

    update.close = bar.close  # type: ignore[attr-defined]
    return update
