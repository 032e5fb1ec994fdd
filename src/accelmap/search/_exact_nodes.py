"""The exact mapper's tree (`accelmap.search.exact`): its nodes, how they are bounded and
how a node's children are made.

The space (a `MapSpace`: per-dim factor tables, per-level loop orders, keep bits) is split
as follows, and every branch is bounded by `accelmap.costmodels.loopnest_bounds`, whose
bounds never exceed the model's cost of any mapping in the branch:

1. **Keep pattern.** Every assignment of the free keep bits is a separate tree (`_patterns`,
   one `BoundModel` each, `bound_model`).
2. **Spatial factors, then temporal factors innermost level first.** The first branching
   fixes the spatial factors (X and Y) of every level for every dim: with them fixed, the
   multicast and reduction every tensor gets are known together (bounded each on its own,
   every tensor could claim the whole array), the fanouts cut, and what the outer levels
   leave open is their temporal factors alone. A node below fixes the temporal factors of
   levels ``k .. L-1`` for every dim; its children fix level ``k-1``. Each dim's factor table
   is sorted in this order (spatial, then temporal innermost first, `DimTree`), so the rows
   that agree with a node form one contiguous run, and a node is one run index per dim.
   Innermost first makes the small buffers' capacities cut early, makes every tile the bound
   reads exact, and leaves only products of the outer factors unknown (their range per dim is
   read off the run, `node_inputs`).
3. **Loop orders at the leaves** (`accelmap.search._exact_leaves`).

Children are made a few dims at a time (`_group_end`: as many as keep one numpy pass of
children) and bounded together (`_expand`, `_bound_nodes`). Spatial children are made one dim
at a time, and a partial choice whose spatial factors already exceed a level's fanout is
dropped before the next dim multiplies it (most spatial combinations do, `_spatial_children`).

A branch is cut when its bound is no better than the incumbent (`_cut_test`:
``bound >= incumbent * (1 - 1e-12)``: "optimal" means that no mapping is better by more than one
part in 10^12, far above the rounding of float64 costs and far below any difference that
matters). What the search shares (the space, the bound models, the incumbent, the limits and
the certificate's counts) is one `_Problem`, made by `_setup`; what it proves is a
`Certificate`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelmap._typing import IntArray
from accelmap.costmodels._bounds_kernel import tables_of
from accelmap.costmodels.loopnest_bounds import BoundCut, BoundModel, partial_bounds, traffic_table
from accelmap.errors import SpecError
from accelmap.mapper.mapping import MappingBatch
from accelmap.search import _exact_switches as sw
from accelmap.search._exact_kernel import fanout_ok, feasible_nodes, gather_dim
from accelmap.search.objectives import Objective, ObjectiveSpec

_EPS = 1e-12  # relative tolerance of the cut test (float rounding of costs and bounds)


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
    dive_share: float = sw._DIVE_SHARE  # the most share of the loop's time the dives take (`_Diver`)


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
    bms = [dataclasses.replace(bound_model(space, p), region_trial=sw._REGION_TRIAL, pair_trial=sw._PAIR_TRIAL)
           for p in pats]  # the trials of arguments 12 and 13
    return _Problem(space=space, model=model, objective=objective, trees=trees, patterns=pats,
                    bms=bms,
                    L=space._L, D=space._D,
                    free_orders=[np.asarray(f, dtype=np.int64) for f in space._order_free],
                    outer_orders=[list(o) for o in space._order_outer],
                    inner_orders=[list(i) for i in space._order_inner])


def _bound_nodes(P: _Problem, pattern: int, depth: int, split: int, ids: IntArray,
                 cutoff: BoundCut | None = None) -> tuple[Any, Any]:
    """(n,) objective bounds of nodes and (n,) whether they are feasible. With ``cutoff``
    (`_Problem.cutoff`, for children the caller cuts by it at once) the bound is staged: a
    node it cuts may get a weaker bound, still at or above the cut-off."""
    bm = P.bms[pattern]
    ok = _feasible_nodes(P, bm, depth, split, ids) if sw._NODE_TEST else None
    if ok is None:
        e, c, ok = partial_bounds(bm, **node_inputs(P.trees, depth, split, ids), cutoff=cutoff)
    elif ok.all():  # (the same test `partial_bounds` makes first: not made again)
        e, c, _ = partial_bounds(bm, **node_inputs(P.trees, depth, split, ids), rows_feasible=sw._TRUST_TEST,
                                 cutoff=cutoff)
    else:  # the inputs of the feasible nodes alone (`partial_bounds` bounds each row by itself)
        e, c = np.full(len(ids), np.inf), np.full(len(ids), np.inf)
        sel = np.flatnonzero(ok)
        if len(sel):
            e[sel], c[sel], _ = partial_bounds(bm, **node_inputs(P.trees, depth, split, ids[sel]),
                                               rows_feasible=sw._TRUST_TEST, cutoff=cutoff)
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
    if sw._FANOUT_KERNEL:  # the same test compiled (`_exact_kernel.fanout_ok`), on the stacked runs
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
        while end < P.D and math.prod(most[split: end + 1]) <= sw._CHUNK:
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
    for start in range(0, len(allk), sw._CHUNK):
        if time.perf_counter() > P.deadline:  # the nodes stay open, nothing of them is counted
            return None, False
        buf = [allk[start: start + sw._CHUNK]]
        flush()
    P.cert.infeasible += n_inf
    P.cert.cut += n_cut
    if not kept_ids:
        return None, True
    ids = np.concatenate(kept_ids)
    b = np.concatenate(kept_b)
    srt = np.argsort(b, kind="stable")
    return _Frame(f.pattern, new_depth, new_split, ids[srt], b[srt]), True


def _root_frames(P: _Problem) -> list[_Frame]:
    """One frame per keep pattern whose root can be legal, each holding its root node."""
    frames = []
    for pi in range(len(P.patterns)):
        ids = np.zeros((1, P.D), dtype=np.int64)
        b, ok = _bound_nodes(P, pi, 0, 0, ids)
        if ok[0]:
            frames.append(_Frame(pi, 0, 0, ids, b))
    return frames


