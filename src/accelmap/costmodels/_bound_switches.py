"""The switches and limits of the ``loopnest`` bounds (`accelmap.costmodels.loopnest_bounds`), in
one place.

Every function of the bounds reads them here, at call time, as attributes of this module
(``sw._USE_ORDER``), never as copies: a test or benchmark that sets one
(``monkeypatch.setattr(_bound_switches, "_USE_ORDER", False)``) changes what every later call
computes. A ``_USE_*`` switch turns one argument off (the bound only gets weaker); the others
choose where an argument runs or how its value is computed (the same value either way, unless
their comment says otherwise). The arguments are numbered as in `loopnest_bounds`.
"""

from __future__ import annotations

_USE_CAPACITY = True  # argument 11 (`_capacity_energy`); a switch for the tests and benchmarks that measure it
_USE_ORDER = True  # argument 10 (`_jstar_order_energy`); a switch for the tests and benchmarks that measure it
# the feasibility test compiled (`_bounds_kernel.feasible_rows`), the rest bounded on the
# feasible rows only; False: the numpy test on every row (the reference), as before
_USE_KERNEL = True
_USE_NEXT_PASS = True  # argument 5c (`_next_level_pass`); a switch for the tests and benchmarks that measure it
_USE_PASS_READS = True  # arguments 5b-5c also floor the reads of an open parent (eq. S); a switch for the tests
_USE_PAIRS = True  # argument 13 (`_pair_order_energy`); a switch for the tests and benchmarks that measure it
_PAIR_MAX_K = 0  # argument 13 only at nodes with k <= this (0: the leaves and the order search; -1: every k)
_MEMO = True  # deliveries and J* prefixes made once per call (False: every time they are asked for, as before)
# argument 10 with the passes repeated inside J* (`_PassU`, `_pass_lift`); a switch for the tests and benchmarks
_USE_ORDER_PASS = True
# the distinct-offset bounds (`dl_lb`), the region count's held costs and footprints made once per call,
# and its three segment lengths in one pass (False: each made where it is used, one segment at a time);
# the same values either way (tests/unit/search/test_exact.py)
_SHARE = True
# argument 14 (`dram_order_table`, `_dram_order_energy`): the traffic table's cells with the level-0
# loop order's exact deliveries; a switch for the tests and benchmarks that measure it (read when
# the table is built)
_USE_DRAM_ORDER = True
_DRAM_ORDER_KNOWN = True  # argument 14c at the nodes with level 1's tile known (k <= 1: the leaves included)
_USE_DISTINCT_EXACT = True  # argument 15 (`_distinct_exact`); a switch for the tests and benchmarks that measure it
_USE_JOINT_BYPASS = True  # argument 15b (`_joint_bypass_energy`); a switch for the tests and benchmarks that measure it
_USE_INSTANCE_WORDS = True  # argument 16 (`_instance_words_energy`); a switch for the tests and benchmarks that measure it
# argument 16 at an open level only where its capacity is at most this many words: the tiles of a
# larger buffer are many to enumerate per row (simba-like's 8,192- and 32,768-word PE buffers made
# conv1's proof 4.8x slower and left block2_2_dw open) and a loose floor there lifts little;
# skipping a floor only weakens the bound (docs/performance.md, "End of the round of arguments 16-18")
_INSTANCE_WORDS_MAX_ROOM = 1024


_USE_SPATIAL_MOST = True  # argument 18 (`_spatial_most`); a switch for the tests and benchmarks that measure it
_SPATIAL_MOST_CELLS = 1 << 16  # argument 18's table over the room left per fanout is built up to this many cells
_USE_JOINT_SPLIT = True  # argument 17 (`_joint_split_energy`); a switch for the tests and benchmarks that measure it
# argument 17 also at the nodes where some dims' level-1 factors are chosen (about 3 in 4 of its rows on
# simple3 L4; off: only where none is, `docs/performance.md`, "Arguments 17 and 18")
_JOINT_SPLIT_CHOSEN = False
_JOINT_SPLIT_MAX = 512  # argument 17 on the nodes whose level-1 splits number at most this many
# argument 17's least over the splits: "cpu" compiled (`_order_kernel.two_level_split_least`), "numpy" the
# reference; the same values (tests/unit/search/test_exact.py)
_JOINT_SPLIT_ENGINE = "cpu"
_USE_KEPT_BYPASS = True  # argument 19 (`_kept_bypass_energy`); a switch for the tests and benchmarks that measure it
_KEPT_SPLIT_MAX = 4096  # argument 19 at k = 2 on the nodes whose level-1 splits number at most this many (0: not at k = 2)
# argument 19 also at the nodes with every factor known (k <= 1): off, as on simple3 L4 it cut no node
# there (938,982 nodes to the proof either way) and cost 148 against 124 CPU s
_KEPT_KNOWN = False
_TWO_LEVEL = True  # argument 14d (`_two_level_bypass`); a switch for the tests and benchmarks that measure it
# argument 10's charges and shortest path (`_jstar_order_energy`): "cpu" compiled (`_jstar_kernel`),
# "numpy" the reference; the same values bit for bit (tests/unit/costmodels/test_jstar_kernel.py)
_JSTAR_ENGINE = "cpu"
# staged bounds: where the caller passes its cut-off (`BoundCut`), the costly arguments (10, 11,
# 13-17 and 19) run only on the rows that the others leave below it, and argument 17 computes its least
# only up to the cut (`_order_kernel.two_level_split_least_below`); off: every argument on every row
_STAGED = True
# argument 17 under a cut-off gives up on a row at its first split below the cut (the row is not cut
# by it, and keeps the bound of the other arguments); off: its least is computed wherever it is below
_SPLIT_STOP = False
# the staging is kept at a k where its first stage leaves at most this share of the rows below the
# cut-off (after ``_STAGE_TRIAL_ROWS`` rows; else the second stage repeats most of the first), and
# where argument 17 runs (its limit needs the first stage's cycles); elsewhere one call in
# ``_STAGE_PROBE`` is staged, to follow the share as the search goes on
_STAGE_LIVE_MAX = 0.5
_STAGE_TRIAL_ROWS = 4096
_STAGE_PROBE = 16
