"""The switches and limits of the exact mapper (`accelmap.search.exact`), in one place.

Every part of the mapper reads them here, at call time, as attributes of this module
(``sw._NODE_TEST``), never as copies: a test or benchmark that sets one
(``monkeypatch.setattr(_exact_switches, "_SHARE_NODES", 1)``) changes what every later call
does. The node-handling switches (``_TRUST_TEST``, ``_LEAF_MEMO``, ``_FANOUT_KERNEL``,
``_NODE_TEST``) choose how a value is computed, never the value: the same nodes, bounds and
leaves either way (`tests/unit/search/test_exact.py`, `benchmarks/bench_exact_nodes.py`).
The others size the work (per numpy pass, per group of siblings, per dive) or choose where
the warm start runs; they change how fast a proof comes, never what it proves. (The cut
test's tolerance is no switch: it says what "optimal" means, `_exact_nodes._EPS`.)
"""

from __future__ import annotations

# --- the nodes (`_exact_nodes`) and their leaves (`_exact_leaves`) ---------------------
_CHUNK = 8_192  # children bounded per numpy pass (and between two checks of the time limit)
_ORDER_BATCH = 4_096  # complete order combinations evaluated at once
_ORDER_MEMO = 4_096  # the most leaf order sets kept (`_leaf_orders`)
# switches of the node handling, for the tests and `benchmarks/bench_exact_nodes.py` (the same
# nodes, bounds and leaves either way): the bound inputs of children that passed `_feasible_nodes`
# are not tested again (`partial_bounds`' rows_feasible); a leaf's order sets made once per set of
# active loops and its legality tested once per factorization (`_leaf_orders`, `_evaluate_many`)
_TRUST_TEST = True
_LEAF_MEMO = True
_FANOUT_KERNEL = True  # the spatial children's fanout test compiled (`_fanout_ok`)
_NODE_TEST = True  # children tested for feasibility before their bound inputs are built (`_feasible_nodes`)
_REGION_TRIAL = 256  # calls of a keep pattern's bound after which a region count that never lifted is dropped
_PAIR_TRIAL = 64  # calls of a keep pattern's bound at one depth of levels after which argument 13's pairs that never lifted are dropped

# --- the loop and its dives (`_exact_tree`) --------------------------------------------
_LEAF_GROUP = 256  # sibling leaves handled together
_EXPAND_GROUP = 4_096  # the most sibling nodes expanded together (see _loop)
_SPATIAL_GROUP = 64  # the most sibling nodes of depth 0 expanded together
_DIVE_SHARE = 0.1  # the most share of the branch and bound's time that dives take (see _Diver)
_DIVE_BEAM = 8  # nodes a dive keeps per step (the lowest bounds among their children)
_DIVE_LEAVES = 64  # leaves a dive's last step keeps
_DIVE_MAX_S = 2.0  # the longest one dive may run (its order search stops there)
_DIVE_STARTS = 16  # the open frames with the lowest bounds a dive's start is chosen among

# --- the warm start (`exact.ExactSearcher.run`, `_exact_warm`) -------------------------
_WARM_FLOOR = 20_000  # the fewest warm-start evaluations (see ExactSearcher's warm_budget)
_WARM_BESIDE = True  # the warm start in its own process beside the tree (`_WarmStart`; False: before it)
_QUICK_WARM = 20_000  # evaluations of the quick first warm start of the tree while `_WarmStart` runs (0: none)

# --- one tree on several processes (`_exact_workers`) ----------------------------------
_SHARE_NODES = 64  # open nodes per worker before the tree is dealt out (see _solve_workers)
_DONATE_EVERY_S = 0.05  # the least time between two gifts of work from one worker
