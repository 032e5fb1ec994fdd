"""Loop orders at the leaves of the exact mapper's tree (`accelmap.search.exact`).

With every factor fixed (a leaf of `accelmap.search._exact_nodes`' tree), only the relative
order of the loops with a bound of at least 2 changes a cost (the model skips unit loops), so
each level's candidates are the permutations of its active free loops, pinned loops staying
where the constraints pin them (`_level_orders`). A leaf with few order combinations has them
all evaluated by the model in one batch with its siblings' (`_solve_leaves`, `_evaluate_many`);
a leaf with more is solved by an order search (`_solve_orders`): levels are fixed outermost
first, bounded with the order-aware bound (`partial_bounds`' ``order_pos``), and complete
orders are evaluated by the model itself. Every mapping that becomes the incumbent comes
through `_evaluate_many`.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np

from accelmap._typing import IntArray
from accelmap.costmodels.loopnest_bounds import partial_bounds
from accelmap.mapper.mapping import MappingBatch
from accelmap.search import _exact_switches as sw
from accelmap.search._exact_nodes import _cut_test, _Problem


def _level_orders(P: _Problem, lv: int, temporal: IntArray) -> IntArray:
    """(m, D) full orders of level lv, one per relative order of its active free loops
    (read only: made once per level and set of active free loops, `_Problem.orders`)."""
    free = P.free_orders[lv]
    key = (lv, bytes(temporal[lv, free] >= 2))
    got = P.orders.get(key) if sw._LEAF_MEMO else None
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
    got = P.orders.get(key) if sw._LEAF_MEMO else None
    if got is None:
        cands = [_level_orders(P, lv, temporal) for lv in range(P.L)]
        combos = _combos(cands) if math.prod(len(c) for c in cands) <= sw._ORDER_BATCH else None
        if combos is not None:
            combos.setflags(write=False)
        if len(P.orders) > sw._ORDER_MEMO:  # (a bound on the memory: start again)
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
        # (without `_LEAF_MEMO` as before: the rows summed again after every leaf)
        n_small = n_small + len(orders) if sw._LEAF_MEMO else sum(len(o) for o in small_o)
        if n_small >= sw._ORDER_BATCH:
            _evaluate_many(P, np.concatenate(small_f), P.patterns[pattern], np.concatenate(small_o),
                           np.array([len(o) for o in small_o]) if sw._LEAF_MEMO else None)
            small_f, small_o, n_small = [], [], 0
    if small_o:
        _evaluate_many(P, np.concatenate(small_f), P.patterns[pattern], np.concatenate(small_o),
                       np.array([len(o) for o in small_o]) if sw._LEAF_MEMO else None)


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
    batch = MappingBatch._trusted(temporal=np.ascontiguousarray(facs[..., 0]), spatial=np.ascontiguousarray(facs[..., 1:]),
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
        if math.prod(sizes[lv:]) <= sw._ORDER_BATCH:
            orders = _combos([o[None] for o in chosen] + [cands[x] for x in range(lv, L)])
            _evaluate_many(P, np.broadcast_to(fac, (len(orders),) + fac.shape), keep, orders,
                           np.array([len(orders)]) if sw._LEAF_MEMO else None)
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


