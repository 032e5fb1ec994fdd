"""The exact mapper's branch and bound loop (`accelmap.search.exact`): the open set, the walk
over it, and the dives for incumbents between its nodes.

Search is best first (depth first while too many nodes are open) with the children of every
node sorted by bound (`_Open`: frames of sorted siblings, `_exact_nodes._Frame`), starting from
an incumbent found by a short default search (the warm start, `accelmap.search._exact_warm`).
Siblings under the incumbent are expanded together, up to about one numpy pass of children,
since a proof expands every one of them anyway (`_loop`); sibling leaves go to
`accelmap.search._exact_leaves` together. When no node is left open the incumbent is proven
optimal; when the time or evaluation limit stops the loop first, the certified lower bound is
the smallest bound among the open branches (the smallest key of `_Open`'s heap, and the node
being worked on).

Between two nodes the loop dives from the open nodes with the lowest bounds for incumbents
(`_Diver`, `_dive`: a beam completion by the children's own bounds, within a share of the
loop's time). A dive can only lower the incumbent: it opens, closes or cuts no node, so the
proof and the certified bound stay those of the loop.

`_loop` takes a ``poll`` called before every node, where the open set holds all the work
left: the processes of one tree (`accelmap.search._exact_workers`) trade the incumbent and
give work away there.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any

import numpy as np

from accelmap._typing import IntArray
from accelmap.search import _exact_switches as sw
from accelmap.search._exact_leaves import _solve_leaves
from accelmap.search._exact_nodes import (
    _bound_nodes,
    _child_counts,
    _children_many,
    _cut_test,
    _expand,
    _Frame,
    _group_end,
    _Problem,
    _spatial_children,
    node_inputs,
)


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
        for start in range(0, len(kids), sw._CHUNK):
            ch = kids[start: start + sw._CHUNK]
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
        width = sw._DIVE_LEAVES if new_depth == P.leaf_depth else sw._DIVE_BEAM
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
        for _, _, _, f in heapq.nsmallest(sw._DIVE_STARTS, open_.heap):
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
        P.deadline = min(deadline, t + sw._DIVE_MAX_S)
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
            while hi < len(f.ids) and hi - lo < sw._LEAF_GROUP and not _cut_test(f.bounds[hi], P.best_value):
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
            top = min(len(f.ids), lo + (sw._EXPAND_GROUP if f.depth else sw._SPATIAL_GROUP))
            live = lo + 1 + int(np.argmax(_cut_test(f.bounds[lo + 1: top], P.best_value))) \
                if _cut_test(f.bounds[top - 1], P.best_value) else top
            if f.depth:
                counts = np.cumsum(_child_counts(P, f.depth, f.split, f.ids[lo:live]))
                hi = lo + max(1, int(np.searchsorted(counts, sw._CHUNK, side="right")))
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


