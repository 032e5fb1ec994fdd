"""The arguments of the ``loopnest`` bounds on the outer levels' orders and the tensors that bypass
level 1: the traffic table with the outermost level's loop order counted exactly (14, 14b-d), the
distinct offsets exactly and the bypassing tensors sharing level 1's order (15, 15b), each
instance's own tiles (16), 15b with level 1's factors open (17), the open spatial factors
sharing the fanouts (18), and the bypassing and kept tensors together (19). Part of
`accelmap.costmodels.loopnest_bounds`, whose docstring holds the notation and arguments 1-7
these build on; `partial_bounds` there combines them. The compiled least over the orders and
splits is in `_order_kernel` (14d, 15b, 17) and `_kept_kernel` (19).

14. **The outermost level's loop order, counted exactly** (`dram_order_table`, with the traffic
   table; `_dram_order_energy` at the nodes). The traffic table relaxes level 0's loop order
   to its innermost loop and counts a sliding tensor's loops as free, so a tile that fits
   level 1 can reach its least with every tensor read once although no order allows it
   (simple3's res3a_2b_s2: one output pixel of one output channel with every input channel
   at the GLB, ``M`` outermost at DRAM, when every ``M`` iteration needs every input again).
   With no fanout above level 1 (the table's condition), level 0 has one loop per dim, and in
   a perfect-factor space (a padded one is searched as perfect-factor branches of ``P'``) its
   bound is ``q_d = E_d / T_d`` with ``T`` the level-1 tile and its stride ``T_d``. So for a
   tensor kept at levels 0 and 1 the deliveries ``F_1`` into level 1 follow from ``T`` and
   level 0's order alone, by eq. D and eq. G of the model as written (each step moves its dim
   one stride on and every active loop inside it one stride back; a box difference in one
   coordinate is a slide, otherwise the whole tile; a window whose innermost loop slid
   another way is fetched whole): `dram_order_deliveries` is that count, equal to the model's
   on every mapping of the test spaces. The model charges level 0's reads and level 1's
   fills of an input or weight ``F_1`` each, and for the output level 0's updates ``F_1`` and
   its reads and level 1's fills ``F_1 - part`` with ``part`` the output's (padded) words (every
   loop of level 0 widens level 1's tile: it holds the whole tensor over the run), each at
   least ``count / block`` accesses times the tensor's ``exist`` share. Their sum over the
   tensors of the table is linear in the ``F_1``, and eq. D is a sum over the loops of
   ``(prod of the loops outside j) (q_j - 1) Delta_j`` where ``Delta_j`` depends only on ``j``,
   the set ``I`` of active loops inside it and the innermost loop ``z``: so its least over
   every order is, for each ``z``, a shortest path over the sets ``I`` from ``{z}`` to every
   active dim (`_order_kernel.order_least`; ``D 2^(D-1) (D-1)`` steps, every permutation
   checked equal in the tests). That least is the energy of those counts for *some* order of
   a mapping with tile ``T``, so it bounds them for every mapping whose level-1 tile is
   ``T``; per node, the least over the tiles at least the known one (the traffic table's
   suffix minimum) bounds every completion, and it replaces the table's value where larger
   (it is never smaller: argument 1 and argument 5 hold for every order). It is the
   capacity-aware data-movement bound of Orojenesis (Huang et al., ISCA 2024: the least
   backing-store traffic over the tilings that fit a buffer) with the loop order of the
   backing store's loops enumerated and counted by the model's own rules rather than
   relaxed. **14c.** At a node whose level-1 tile is known (``k = 1``: only level 0 open) the
   cell of that tile itself (before the suffix minimum; every completion has that tile and
   ``q``) bounds the same counts; arguments 8-10 may already charge extras to them there, so
   it enters as a second bound: the MACs, every other term at its order-free value and the
   cell (with 14b's tensors), taken as a maximum with the rest.
   **14d. A tensor that bypasses level 1 into level 2, both levels' orders** (`_two_level_bypass`,
   with 14c): at ``k <= 1`` every factor is known (level 0's are the open product where it is
   one value, as in a perfect-factor space), so an input or weight kept at level 0, not at 1,
   and next at 2 (a sliding input included: simple3's inputs that bypass a GLB keeping only
   outputs) has its deliveries ``F_2`` into one instance of level 2 fixed by the orders of
   levels 0 and 1 alone: eq. D and eq. G over level 1's loops (strides ``g_1 T_2``, innermost)
   and level 0's (strides ``T_1``), as written out for 14 (equal to the model's fills on every
   mapping of the test space). The least over both orders is a shortest path that places level
   1's loops, then level 0's, with the innermost loop fixed per run (`_order_kernel.
   two_level_least`; every pair of permutations checked equal). Its reads at level 0 are
   ``F_2 prod_l distinct_l`` (eq. S; level 0 has no fanout, ``distinct_1`` at least its
   sumset bound, argument 4) and level 2's fills ``inst_2 F_2``: each tensor at its own least
   order (each term a lower bound of its own counts, whatever order the others take), added to
   14c's second bound in place of the counts' order-free values.
   **14b. A tensor that bypasses level 1** (`_unit_bypass`, `_dram_order_bypass_energy`): an
   input or weight kept at level 0, not at level 1, next kept at ``c`` (``1 < c < L``), whose
   every coordinate is one dim with coefficient 1 (a convolution's weights, a GEMM's
   operands; eyeriss-like's weights, which go from DRAM to the weight scratchpads). Its
   level-0 reads ``A_0 = F_c prod_{l<c} distinct_l`` (eq. S) are at least ``F_1`` of a
   level-1 tile of it under the same level-0 order (`dram_order_deliveries` on ``T``). Proof:
   with no sliding coordinate argument 1 is an equality, ``F_c = S_c prod_{j <= J*} n_j`` with
   ``J*`` the innermost active loop over its dims among the levels ``0 .. c-1``, and ``F_1 =
   S_1 prod_{j <= J*_0} q_j`` over level 0's loops. A coefficient-1 coordinate's distinct
   offsets at level ``l`` are its dim's spatial factor, so ``S_c prod_l distinct_l`` is ``S_c``
   times the spatial factors of its dims at levels ``1 .. c-1``. If no level ``1 .. c-1`` has an
   active loop over its dims, its dims' extents grow from ``c`` to level 1 by those spatial
   factors alone, that product is ``S_1``, ``J* = J*_0`` and ``A_0 = F_1``; otherwise ``J*`` lies
   below level 0, every level-0 loop is outside it, and every active loop over its dims at
   levels ``1 .. c-1`` is at or outside it (it is the innermost), so ``A_0 >= S_c prod_l
   distinct_l prod_{those loops} n prod_d q_d = S_1 prod_d q_d >= F_1``. (With a coefficient
   ``a > 1`` a tile's span ``a (T - 1) + 1`` is not additive over the spatial factors and the
   claim fails: a strided 1x1 convolution's inputs, 0.6 of it on the test space; a sliding
   coordinate fails it as well, 0.67.) Level c's fills ``X(c) = inst_c F_c`` are at least
   ``A_0`` (``distinct_l <= used_l``). So the table with these tensors added at ``(e_r0 +
   e_wc) F_1`` bounds the energy of the counts it covers; the other counts enter at their
   order-free values (the extras of arguments 5b-13 may charge the bypassing tensor's counts
   too, so the table is not added to them: this bound is the MACs, the other terms' order-free
   values and the table, taken as a maximum with the rest). It charges the trade that
   res3a_branch2b's frontier relaxed: the weights, re-read by every level-0 loop over ``P``
   or ``Q`` outside their ``C``, against the inputs and outputs kept at the GLB.
15. **The distinct offsets exactly, and the tensors that bypass level 1 sharing its order.**
   (a) *Eq. S counted* (`_distinct_exact`, ``_USE_DISTINCT_EXACT``). Argument 4 bounds a level's
   distinct offsets of a coordinate by the sumset size ``1 + sum_d (g_d - 1)``, which ignores
   the steps: a stride-2 window unrolled over ``Q`` 7 and ``S`` 3 has offsets ``2 q + s``, 15
   of them, where the sumset bound says 9. Where the level's spatial factors and its child's
   tile are known (the known levels ``l >= k``, and ``k-1`` once every spatial factor is fixed),
   every completion has these offsets, and the model's own count (`_loopnest_numpy.
   _distinct_level`: one unrolled dim its factor, two dims with steps ``a``, ``b`` ``n1 n2 -
   max(0, n1 - b/gcd) max(0, n2 - a/gcd)``, more enumerated) is the value itself; it replaces
   the sumset bound wherever ``distinct_l`` is read (the reads of an open parent, arguments
   5b-5c, 11, 14d). Elsewhere the sumset bound stays: with the child tile open the count is not
   monotone in it (``2 q + s`` over ``Q`` 7 and ``S`` 3: 15 with unit steps, 9 with ``S``'s step 2).
   (b) *The orders of levels 0 and 1 together* (`_joint_bypass_energy`, ``_USE_JOINT_BYPASS``).
   At a node with every factor known (``k = 0``, or ``k = 1`` with level 0's product one value,
   no fanout above level 1), take every input or weight ``t`` kept at level 0, not at 1, next
   kept at ``c_t >= 2``, whose dims have no temporal or spatial factor at the levels ``2 ..
   c_t - 1`` (eyeriss-like's inputs into their scratchpad, ``c = 2``, and its weights into
   theirs, ``c = 3``, below the input scratchpad's level). Its deliveries ``F_t`` into one
   instance of ``c_t`` follow from the orders of levels 0 and 1 alone, by eq. D and eq. G as in
   14d: a loop of a level between moves none of ``t``'s coordinates (its step is "still", it
   adds no term, and moving it back changes no step of an outer loop), the loops' strides are
   those of the iteration space (level 1's ``g_1 T_2``, level 0's ``T_1``) and ``t``'s tile
   over its own dims is ``c_t``'s (equal to the model's fills on the mappings of the test
   space compared, every seventh). Its level-0 reads are ``F_t prod_{l<c_t} distinct_l`` and ``c_t``'s fills ``inst_c
   F_t`` (eq. S), so these terms cost at least ``W_t F_t`` with ``W_t = exist_t (e_r0 prod_l
   distinct_l + e_wc inst_c)``. Every mapping of the node has one pair of orders for all
   these tensors, so their summed energy is at least ``min over (order_0, order_1) of sum_t
   W_t F_t``: the shortest path of 14d with every tensor's term summed at each step (each
   term depends on its loop, the set of loops inside it and the innermost loop only;
   `_order_kernel.two_level_least_many`, equal to every pair of permutations in the tests). With
   the MACs and every other term at its order-free value this is a second bound, taken as a
   maximum with the rest. It charges the trade 14b and 14d leave out: eyeriss-like's weights
   want the GLB's ``P`` and ``Q`` loops inside their innermost ``K`` or ``C`` loop, the inputs
   want ``K`` innermost, and each tensor alone reaches its least under an order the other pays
   for (res3a_branch2b's lowest open leaves, keep pattern 15: 651.1 uJ before, 804.2 uJ with
   15a and 15b, the leaf's least energy; `docs/performance.md`, "Argument 15").
16. **Each instance takes in at least the union of its own tiles** (`_instance_words_floors`,
   compiled in `_union_kernel.instance_unions`; ``_USE_INSTANCE_WORDS``). Argument 5 floors a
   count by the words *any* MAC touches, once. The model charges every instance of a level ``c``
   the deliveries ``F_c`` of one instance (eq. D over the loops above ``c``, strides ``g_l
   tile[l+1]``) and the parent's reads ``F_c prod_{l<p} used_l prod_{l=p}^{c-1} distinct_l``
   (eq. S), so where neighbouring instances share words (a stride-2 window's columns across PEs)
   each still pays for its own. By argument 5, ``F_c`` is at least the words of the union of the
   tiles the instance visits; with coordinates of disjoint dims the tiles sit on a product grid,
   so that union is the product over ``t``'s coordinates of the union of the intervals ``[sum_d
   a_d x_d, + span)`` over the positions ``x_d`` (``span`` the tile's span of the coordinate).
   With every spatial factor fixed (``k >= 1``) the positions of each dim are a mixed radix of the
   temporal loops above ``c``: (i) ``c >= k``: the known levels ``k .. c-1`` give theirs, and the
   open levels ``0 .. k-1``, where no level above ``k-1`` unrolls ``d``, one progression of
   ``o_d`` iterations at stride ``g_{k-1} tile[k]_d`` (``o_d`` their temporal product, at least
   ``max(otmin, omin / s_out)``; fewer iterations, or one where a level above ``k-1`` unrolls
   ``d``, give a subset of the positions and a smaller union). (ii) ``c < k``, with a finite
   capacity and a fanout above ``c``: ``tile[c] = tile[k] S m``, ``S`` the fixed spatial factors
   of ``c .. k-1`` and ``m_d`` those levels' temporal product, a divisor of ``o_d`` (on the rows
   where the open product is one value: a perfect-factor space or branch); the levels ``0 ..
   c-1`` give one progression of ``o_d / m_d`` at stride ``g_{c-1} tile[c]_d`` (as in (i)).
   Every completion has one such ``m`` whose footprint of ``t`` fits ``c``'s capacity less the
   other kept tensors' smallest footprints (at ``m = 1``), so the least over those ``m`` of the
   union bounds ``F_c``, and the least of the union times ``distinct_{c-1}`` (counted at child
   tile ``tile[c]`` as argument 15 counts it) bounds ``F_c distinct_{c-1}``. So ``X(c) = inst_c
   F_c >= inst_c U`` and the reads of ``p`` are at least ``U prod_{l<p} used_l prod_{l=p}^{c-1}
   distinct_l`` (argument 4's or 15's lower bounds of ``distinct_l`` above ``c-1``). Each is a
   lower bound of its count under every order, so the count's order-free value, its ``opened``
   value and the floor of an order-dependent count are raised to it (the floor applies after
   the count's ``scale``; the inner floor keeps its value), and every other argument charges as
   before on these counts (each takes the larger of its own bound and the count's, or the
   difference above the count's order-free value). Level 1's counts of the traffic table's
   tensors keep their values (its charge at ``k >= 2`` subtracts them). A tensor whose
   coordinates are one dim each with coefficient 1 is left out: argument 1's order-free count is
   its instance's words already. This is the per-instance form of the data a processing element
   must receive for its own MACs, as in the communication lower bounds of convolution
   accelerators (Chen et al., HPCA 2019), with the sharing between instances the model allows
   (eq. S's distinct offsets) counted rather than assumed perfect. Case (ii) runs only where
   ``c``'s capacity is at most ``_INSTANCE_WORDS_MAX_ROOM`` words (leaving a floor out only
   weakens the bound): a large buffer's tiles are many to enumerate on every row.

17. **Argument 15b with level 1's factors open too** (`_joint_split_energy`, ``_USE_JOINT_SPLIT``).
   At a node with level 2's tile and every spatial factor known and the temporal factors of
   levels 0 and 1 open (``k = 2``; level 0 without fanout, each dim's outer product one value,
   so its temporal product over levels 0 and 1 is one value ``o_d``), every completion splits
   each ``o_d`` into level 1's factor ``n1_d`` (a divisor) and level 0's ``o_d / n1_d``, and
   level 1's tile is ``s1 n1`` with ``s1`` its spatial factors times level 2's tile, which must
   hold the tensors level 1 keeps. For a completion, 15b's count holds as written (the tensors
   that bypass level 1 into ``c >= 2`` with no factor over their dims between, their deliveries
   fixed by the orders of levels 0 and 1; ``W_t`` needs only the spatial factors and level 2's
   tile, known here), so the energy of their level-0 reads and keeper fills is at least the
   joint least at that completion's split, and so at least the least over every split whose
   level-1 tile fits (`_order_kernel.two_level_split_least`: the splits enumerated, the
   shortest path of `two_level_least_many` at each; the dims whose level-1 factor is chosen,
   ``next_level``, have that one). The other terms' order-free values at the node bound their
   counts in every completion, so with the MACs this is a second bound, taken as a maximum
   with the rest. It follows 15b (the orders of levels 0 and 1 together) and argument 14's
   capacity-aware tiles (Orojenesis' least backing-store traffic over the tilings that fit a
   buffer, Huang et al., ISCA 2024). On simple3's res3a_2b_s2 (pattern 14, the GLB keeping
   outputs only) it lifts the lowest open node of the profiled plateau from 501.2 uJ (every
   count order-free, the inputs' DRAM reads the words touched) to 1,384.9 uJ, its sub-tree's
   least energy (`docs/performance.md`, "Arguments 17 and 18"). Rows with more than
   ``_JOINT_SPLIT_MAX`` splits, or a dim with more than 64 divisors, are not bounded by it; by
   default (``_JOINT_SPLIT_CHOSEN``) neither are the rows where some dims' level-1 factors are
   chosen (their parent had it).
18. **The spatial factors still open share the fanouts the chosen ones leave** (`_spatial_most`,
   ``_USE_SPATIAL_MOST``). At a node whose spatial factors are chosen for some dims only (depth
   0), argument 7 bounds the instances by the fanouts' product and by the product over dims of
   each dim's largest spatial product, each dim taken alone. In a completion every dim's
   factors multiply to its bound (a perfect-factor space, or one padded branch ``B'``), so an
   open dim's spatial factor at each (level, axis) is a divisor of its bound, their product
   divides the bound and is at most the largest its table has (``spatial_room``), and at each
   (level, axis) the open dims' factors multiply to at most ``floor(fanout / chosen)``, the
   chosen dims' product there. So the instances of every completion are at most the chosen
   product times the largest product of the open dims' factors under those caps: a table over
   the room left per (level, axis) of the largest reachable product (the reachable products of
   the open dims built dim by dim, then a running maximum along every axis), cached per open
   dims and fanouts, read per row. The cycles are at least the padded MACs over the instances
   (argument 7). On simple3's res3a_2b_s2 (16x16 PEs) a node with ``R`` 3 on X and ``M`` 2 and
   ``S`` 3 on Y leaves ``P`` and ``Q`` (28 each) at most 4 on X and 2 on Y: 144 PEs, 802,816
   cycles, where argument 7 said 256 and 451,584 (the sub-tree's least cycles are 802,816).
19. **The tensors that bypass level 1 and those it keeps share levels 0 and 1's orders**
   (`_kept_bypass_energy`, compiled in `_kept_kernel`; ``_USE_KEPT_BYPASS``). With no fanout above
   level 1, take (i) 15b's tensors (inputs and weights kept at level 0, not at 1, next at ``c_t >=
   2``, no factor over their dims at the levels ``2 .. c_t - 1``), whose level-0 reads and
   ``c_t``'s fills cost at least ``W_t F_t`` with ``F_t`` fixed by the orders of levels 0 and 1
   (15b), and (ii) the tensors kept at levels 0 and 1, whose level-0 reads and level-1 fills
   (the output's updates, reads and fills) cost at least 14c's ``w_u F_1 + const`` with ``F_1``
   their deliveries into level 1, fixed by level 1's tile and level 0's order alone (argument
   14). 14c, 14d and 15b charge (ii) at its least over level 0's orders and (i) at its least over
   both levels' orders, each apart; every mapping has one order per level for both, so at a
   node with every factor known (``k <= 1``, level 0's product one value) the least over both
   orders of the summed terms bounds them together: a shortest path as 15b's (level 1's loops
   placed innermost first, then level 0's) with the kept tensors' terms added at each step of
   level 0's loops (each depends on its loop, the set of level-0 loops inside it and level 0's
   innermost loop, eq. G, which the path enumerates; `_kept_kernel.kept_bypass_least`, equal to
   every pair of permutations in the tests). At ``k = 2`` (level 2's tile and every spatial factor
   known, no dim's level-1 factor chosen) every completion splits each dim's open temporal product
   between levels 1 and 0 with a level-1 tile that holds what level 1 keeps (argument 17), and at
   that split the count above holds, so the least over the splits that fit bounds every completion
   (`_kept_kernel.kept_split_least`, the splits pruned by the least found so far since every term
   is >= 0; rows of more than ``_KEPT_SPLIT_MAX`` splits are left out). By default
   (``_KEPT_KNOWN``) only the part at ``k = 2`` runs: on simple3 L4 the part at ``k <= 1`` cut no
   node once the part at ``k = 2`` cut their parents.
   With the MACs and every other term at its order-free value this is a second bound, taken as a
   maximum after the traffic table's charge (which at ``k >= 2`` adds to the kept tensors'
   order-free terms: before it, that charge would count their traffic twice). It charges the trade
   that simple3's res3a_2b_s2 leaves open under keep pattern 46 (the GLB keeping weights and
   outputs, the inputs from DRAM): the inputs want the weights' ``M`` innermost at DRAM, the
   weights want it outermost; the lowest open node of that pattern at ``k = 1`` goes from 501.4 uJ
   to 1,894.1 uJ, its sub-tree's least, and at ``k = 2`` from 504.2 to 685.1 uJ (pattern 30, the
   weights from DRAM under a GLB keeping inputs and outputs: 496.7 to 684.6 uJ), above the
   incumbent's 588.0 uJ (`docs/performance.md`, "Argument 19"). As 15b and 17, it
   follows the capacity-aware data-movement bounds of Orojenesis (Huang et al., ISCA 2024) with
   the backing store's and the buffer's loop orders counted by the model's own rules.

"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np

import accelmap.costmodels._bound_switches as sw
from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.costmodels._bound_model import _X, BoundModel, TrafficTable, _footprint, _prod, _term_energy


def traffic_table(bm: BoundModel, tile_values: list[IntArray], bounds: IntArray,
                  max_cells: int = 2_000_000) -> TrafficTable | None:
    """A capacity-aware bound of the traffic between the outermost level and level 1.

    Every tile ``T`` (one extent per dim, from ``tile_values``) that fits level 1's capacity
    with the tensors it keeps is charged, for each such tensor ``t``, ``S_t(T) R_t`` words
    delivered (read from level 0, written into level 1; outputs: written back to level 0),
    where the reloads ``R_t`` follow from the loops left above level 1, at least
    ``ceil(E_d / T_d)`` iterations of each dim ``d`` (argument 1 of the module doc: a tensor
    is reloaded whole by each iteration of the loops at or above its innermost active jump
    loop ``J*``), and at least the words any MAC touches (argument 5). One loop order serves every tensor: relaxed to its innermost active loop
    ``z``, a tensor with ``z`` among its jump dims pays every loop, any other its own jump
    loops (as `_order_energy`). The least over ``z``, then over every tile at least as large
    in every dim (a suffix minimum over the grid), bounds the sum of those terms of any
    completion whose level-1 tile is at least the known part. It is the data-movement bound
    of a buffer of fixed capacity (Orojenesis, Huang et al., ISCA 2024: the least backing-store
    traffic over the tilings that fit), taken on the model's own counting rules. Returns
    None where it does not apply (fewer than three levels, fanout above level 1, unbounded
    level 1, nothing kept at levels 0 and 1, or more than ``max_cells`` tiles).
    """
    if bm.L < 3 or bm.fan[0] != 1 or not np.isfinite(bm.capacity[1]):
        return None
    tensors = np.flatnonzero(bm.keep[0] & bm.keep[1])
    if len(tensors) == 0:
        return None
    vals = [np.unique(np.asarray(v, dtype=np.float64)) for v in tile_values]
    shape = tuple(len(v) for v in vals)
    cells = int(np.prod(shape))
    if cells > max_cells:
        return None
    grids = np.meshgrid(*vals, indexing="ij")
    tiles = np.stack([g.ravel() for g in grids], axis=1)  # (cells, D)
    q = np.ceil(np.asarray(bounds, dtype=np.float64)[None, :] / tiles)
    active = q >= 2
    q_all = q.prod(axis=1)
    need = np.zeros(cells)
    for kt in np.flatnonzero(bm.keep[1]):
        need += _footprint(bm, int(kt), tiles)
    parts = []
    for t in tensors.tolist():
        f = float(bm.exist[t])
        w = f * bm.write_pj_word[0] if t == bm.output else f * (bm.read_pj_word[0] + bm.write_pj_word[1])
        parts.append((w, _footprint(bm, t, tiles), q[:, bm.jump[t]].prod(axis=1), float(bm.touched[t])))
    # each tensor's words: at least the reloads of its whole tile, and every touched word once
    best = np.where(active.any(axis=1), np.inf, sum(w * np.maximum(sz, lo) for w, sz, _, lo in parts))
    for z in range(bm.D):
        if not active[:, z].any():
            continue
        val = sum(w * np.maximum(sz * (q_all if bm.jump[t, z] else own), lo)
                  for t, (w, sz, own, lo) in zip(tensors.tolist(), parts, strict=True))
        best = np.where(active[:, z], np.minimum(best, val), best)
    fit = need <= bm.capacity[1]
    best = np.where(fit, best, np.inf).reshape(shape)
    order = dram_order_table(bm, tiles, q, fit, tensors, bounds).reshape(shape) if sw._USE_DRAM_ORDER else None
    bypass = _unit_bypass(bm) if sw._USE_DRAM_ORDER else ()
    with_bypass = dram_order_table(bm, tiles, q, fit, tensors, bounds, bypass).reshape(shape) if bypass else None
    cell = (with_bypass if with_bypass is not None else order).copy() if order is not None else None
    for ax in range(bm.D):  # least over the tiles >= each cell
        best = np.flip(np.minimum.accumulate(np.flip(best, axis=ax), axis=ax), axis=ax)
        if order is not None:
            order = np.flip(np.minimum.accumulate(np.flip(order, axis=ax), axis=ax), axis=ax)
        if with_bypass is not None:
            with_bypass = np.flip(np.minimum.accumulate(np.flip(with_bypass, axis=ax), axis=ax), axis=ax)
    return TrafficTable(tensors=tensors, vals=tuple(vals), least=best, order_least=order, bypass=bypass,
                        bypass_least=with_bypass, cell=cell)


def _unit_bypass(bm: BoundModel) -> tuple[tuple[int, int], ...]:
    """Argument 14b: the (tensor, next keeper ``c``) of each input or weight kept at level 0,
    not at level 1, next kept at a level ``1 < c < L``, whose every coordinate is one dim with
    coefficient 1 (a convolution's weights, a GEMM's operands)."""
    out = []
    for t in range(bm.T):
        if t == bm.output or not bm.keep[0, t] or bm.keep[1, t]:
            continue
        keepers = np.flatnonzero(bm.keep[2:, t])
        if len(keepers) == 0:
            continue
        unit = all(int(bm.coef_fp[t, c].sum()) <= 1 for c in range(bm.coef_fp.shape[1]))
        if unit:
            out.append((t, int(keepers[0]) + 2))
    return tuple(out)


_ORDER_CACHE: dict[tuple[Any, ...], FloatArray] = {}


def dram_order_table(bm: BoundModel, tiles: FloatArray, q: FloatArray, fit: BoolArray,
                     tensors: IntArray, bounds: IntArray, bypass: tuple[tuple[int, int], ...] = ()) -> FloatArray:
    """Argument 14 of the module doc: (cells,) per tile of level 1 that fits (``fit``), the
    least over every order of level 0's loops of the energy of the deliveries from level 0
    into level 1 of ``tensors`` (each kept at both), counted exactly as the model counts them
    (eq. D, eq. G: `dram_order_deliveries`); inf where the tile does not fit.

    Inputs and weights: ``(e_r0 + e_w1) F`` (level 0's reads, level 1's fills); the output:
    level 0's updates ``F``, its reads and level 1's fills ``F - part`` with ``part`` the
    output's (padded) words (every temporal loop of level 0 widens level 1's tile to the whole
    tensor); each times the tensor's ``exist`` share, as the traffic table's terms. The least
    over the orders is `_order_kernel.order_least` (a shortest path over the sets of dims
    placed). With ``bypass`` (argument 14b: (tensor, next keeper ``c``) pairs of `_unit_bypass`)
    each such tensor adds level 0's reads and level c's fills, ``(e_r0 + e_wc) F_1`` with
    ``F_1`` its deliveries into a level-1 tile (both counts are at least that). Tables of keep
    patterns that agree at levels 0 and 1 are equal: they are made once per process
    (``_ORDER_CACHE``)."""
    from accelmap.costmodels._order_kernel import order_least

    ts = [int(t) for t in tensors] + [t for t, _ in bypass]
    w = np.empty(len(ts))
    keeper = dict(bypass)
    const = 0.0
    full = np.asarray(bounds, dtype=np.float64)
    for i, t in enumerate(ts):
        f = float(bm.exist[t])
        if t == bm.output:
            rest = bm.read_pj_word[0] + bm.write_pj_word[1]
            w[i] = f * (bm.write_pj_word[0] + rest)
            const -= f * rest * float(_footprint(bm, t, full[None])[0])
        else:
            w[i] = f * (bm.read_pj_word[0] + bm.write_pj_word[keeper.get(t, 1)])
    coef = np.asarray(bm.coef_fp, dtype=np.float64)[ts]
    key = (tiles.tobytes(), fit.tobytes(), coef.tobytes(), w.tobytes(), const, bypass)
    got = _ORDER_CACHE.get(key)
    if got is None:
        got = np.full(len(tiles), np.inf)
        sel = np.flatnonzero(fit)
        if len(sel):
            got[sel] = order_least(tiles[sel], q[sel], coef, w) + const
        if len(_ORDER_CACHE) >= 256:
            _ORDER_CACHE.clear()
        _ORDER_CACHE[key] = got
    return got.copy()


def dram_order_deliveries(coef_t: IntArray, tile: IntArray, q: IntArray, order: IntArray) -> int:
    """Words delivered into level 1 from level 0 (one instance, no fanout above it) for one
    tensor, one tile and one order of level 0's loops: the model's eq. D and eq. G written out
    (`accelmap.costmodels.loopnest`, its scalar ``deliveries``), the readable reference of
    argument 14's compiled least (`_order_kernel.order_least`).

    Parameters
    ----------
    coef_t
        (C, D) the tensor's coordinate coefficients.
    tile, q
        (D,) level 1's tile extents and level 0's loop bounds; a loop ``d``'s stride is
        ``tile[d]``.
    order
        (D,) level 0's loop order, outermost first.
    """
    C, D = len(coef_t), len(tile)
    spans = [1 + sum(int(coef_t[c][d]) * (int(tile[d]) - 1) for d in range(D)) for c in range(C)]
    size = math.prod(spans)
    above = [int(d) for d in order if q[d] >= 2]
    kinds: list[tuple[tuple[str, int, int], list[int]]] = []
    for j, d in enumerate(above):
        move = [0] * D
        move[d] += int(tile[d])
        for d2 in above[j + 1:]:
            move[d2] -= int(tile[d2])  # the inner loops return from iteration 1 to 0
        shift = [sum(int(coef_t[c][dd]) * move[dd] for dd in range(D)) for c in range(C)]
        moved = [c for c in range(C) if shift[c] != 0]
        if not moved:
            kind = ("still", -1, 0)
        elif len(moved) == 1 and abs(shift[moved[0]]) < spans[moved[0]]:
            kind = ("slide", moved[0], 1 if shift[moved[0]] > 0 else -1)
        else:
            kind = ("jump", -1, 0)
        kinds.append((kind, shift))
    innermost = kinds[-1][0] if kinds else ("still", -1, 0)
    total, prefix = size, 1
    for d, (kind, shift) in zip(above, kinds, strict=True):
        if kind[0] == "still":
            new = 0
        elif kind[0] == "jump" or (innermost[0] == "slide" and kind != innermost):
            new = size  # eq. G: a window that slid another way inside is fetched whole
        else:
            new = abs(shift[kind[1]]) * (size // spans[kind[1]])
        total += prefix * (int(q[d]) - 1) * new
        prefix *= int(q[d])
    return total


def _dram_order_bypass_energy(bm: BoundModel, tab: TrafficTable, idx: IntArray, over: BoolArray,
                              terms: list[tuple[_X, float, float, FloatArray | float]],
                              at: dict[tuple[str, int, int], int]) -> FloatArray | None:
    """Argument 14b at a node: the MACs, every term outside the table at its order-free value,
    and the table with the unit tensors that bypass level 1 (``tab.bypass_least``) for the
    terms it covers (levels 0 and 1 of the table's tensors, level 0's reads and level c's
    fills of the bypassing ones); None where there is no such table."""
    if tab.bypass_least is None:
        return None
    covered: set[int] = set()
    for t in tab.tensors.tolist():
        covered.update((at[("r", t, 1)], at[("f", t, 1)]))
    for t, c in tab.bypass:
        covered.update((at[("r", t, c)], at[("f", t, c)]))
    out = np.where(over, np.inf, tab.bypass_least[tuple(idx.T)]) + bm.mac_energy_pj
    for i, (x, e1, e2, part) in enumerate(terms):
        if i not in covered:
            out = out + _term_energy(x.fixed, e1, e2, part)
    return out


def _two_level_bypass(bm: BoundModel, tab: TrafficTable, tile: FloatArray, n1: FloatArray, g1: FloatArray,
                      n0: FloatArray, dl: Any) -> list[tuple[int, FloatArray]]:
    """Argument 14d: at a node with every factor known (``k <= 1``), for each input or weight kept
    at level 0, not at level 1, next kept at level 2 and not among the table's (``tab.bypass``),
    ``(t, e)``: ``e`` (n,) the least over the orders of levels 0 and 1 of its level-0 reads and
    level-2 fills, ``(e_r0 distinct_1 + e_w2 inst_2) F_2`` with ``F_2`` the deliveries into one
    instance of level 2 (`_order_kernel.two_level_least`), ``distinct_1`` at least ``dl(t, 1)``.
    ``n1``, ``g1`` (n, D): level 1's temporal and spatial factors; ``n0`` level 0's temporal ones
    (no fanout above level 1: the table's condition)."""
    from accelmap.costmodels._order_kernel import two_level_least

    done = {t for t, _ in tab.bypass}
    out: list[tuple[int, FloatArray]] = []
    if bm.L < 3:
        return out
    for t in range(bm.T):
        if t == bm.output or t in done or not bm.keep[0, t] or bm.keep[1, t] or not bm.keep[2, t]:
            continue
        coef = np.asarray(bm.coef_fp[t], dtype=np.float64)
        span = 1.0 + ((tile[:, 2][:, None, :] - 1.0) * coef[None]).sum(axis=2)  # (n, C)
        s1 = g1 * tile[:, 2]
        s0 = tile[:, 1]
        f2 = two_level_least(span, coef, n1, s1, n0, s0)
        f = float(bm.exist[t])
        inst2 = _prod(g1, 1)
        out.append((t, f * (bm.read_pj_word[0] * dl(t, 1) + bm.write_pj_word[2] * inst2) * f2))
    return out


def _level1_bypassers(bm: BoundModel) -> list[tuple[int, int]]:
    """(tensor, its next keeper below level 1) for every input kept at level 0, not at level 1
    and kept again below (arguments 15b and 17); none where the arch has fewer than three levels
    or level 0 fans out."""
    if bm.L < 3 or bm.fan[0] != 1:
        return []
    byp: list[tuple[int, int]] = []
    for t in range(bm.T):
        if t == bm.output or not bm.keep[0, t] or bm.keep[1, t]:
            continue
        keepers = np.flatnonzero(bm.keep[2:, t])
        if len(keepers):
            byp.append((t, int(keepers[0]) + 2))
    return byp


def _bypass_rows_ok(bm: BoundModel, byp: list[tuple[int, int]], tt: FloatArray, g: FloatArray,
                    n: int) -> BoolArray:
    """(len(byp), n): the rows where no loop of the levels between level 1 and a bypassing
    tensor's parent moves the tensor (its deliveries are then two levels'; arguments 15b, 17, 19)."""
    oks = np.ones((len(byp), n), dtype=bool)
    for i, (t, c) in enumerate(byp):
        dims = bm.coef_fp[t].sum(axis=0) > 0
        for lv in range(2, c):
            oks[i] &= (tt[:, lv][:, dims] <= 1.0).all(axis=1) & (g[:, lv][:, dims] <= 1.0).all(axis=1)
    return oks


def _bypass_charges(bm: BoundModel, byp: list[tuple[int, int]], oks: BoolArray, coef: FloatArray,
                    tile: FloatArray, dl: Any, used: FloatArray, free: list[FloatArray],
                    at: dict[Any, int], span: FloatArray, w: FloatArray, base: FloatArray) -> FloatArray:
    """Fills each bypassing tensor's spans of its parent's tile (``span``, (n, len(byp), C)) and
    its energy a word of level 0 (``w``: DRAM reads over the distinct counts ``dl`` plus the
    parent's writes), 0 where ``oks`` is False; returns ``base`` less the order-free charges of
    those tensors' terms that the joint least replaces (arguments 15b, 17 and 19)."""
    n = len(tile)
    for i, (t, c) in enumerate(byp):
        ok = oks[i]
        span[:, i] = 1.0 + ((tile[:, c][:, None, :] - 1.0) * coef[i][None]).sum(axis=2)
        reads = np.ones(n)
        for lv in range(1, c):
            reads = reads * dl(t, lv)
        f = float(bm.exist[t])
        w[:, i] = np.where(ok, f * (bm.read_pj_word[0] * reads + bm.write_pj_word[c] * _prod(used[:, :c], 1)), 0.0)
        base = base - np.where(ok, free[at[("r", t, c)]] + free[at[("f", t, c)]], 0.0)
    return base


def _joint_bypass_energy(bm: BoundModel, tile: FloatArray, n1: FloatArray, g1: FloatArray, n0: FloatArray,
                         tt: FloatArray, g: FloatArray, used: FloatArray, dl: Any,
                         terms: list[tuple[_X, float, float, FloatArray | float]],
                         at: dict[tuple[str, int, int], int]) -> FloatArray | None:
    """Argument 15b: at a node with every factor known (``k <= 1``), the MACs, every term at its
    order-free value but the level-0 reads and keeper fills of the tensors that bypass level 1,
    and those at their least over the orders of levels 0 and 1 *together*
    (`_order_kernel.two_level_least_many`). A tensor ``t`` counts where it is an input or weight
    kept at level 0, not at 1, next kept at ``c >= 2``, and (per row) the levels ``2 .. c-1`` have
    no temporal or spatial factor over its dims; elsewhere its terms keep their order-free
    values. ``tile`` (n, L+1, D) the known tiles; ``n1``, ``g1``, ``n0`` level 1's temporal and
    spatial factors and level 0's temporal ones; ``tt``, ``g``, ``used`` (n, L, D) / (n, L) the
    factors and spatial products; ``dl(t, l)`` a lower bound of distinct_l (argument 15: exact
    here). None where fewer than two tensors bypass level 1 or level 0 has a fanout."""
    from accelmap.costmodels._order_kernel import two_level_least_many

    byp = _level1_bypassers(bm)
    if len(byp) < 2:
        return None
    n = len(tile)
    C = bm.coef_fp.shape[1]
    span = np.ones((n, len(byp), C))
    w = np.zeros((n, len(byp)))
    coef = np.asarray(bm.coef_fp, dtype=np.float64)[[t for t, _ in byp]]
    oks = _bypass_rows_ok(bm, byp, tt, g, n)
    rows = np.flatnonzero(oks.sum(axis=0) >= 2)  # one tensor alone: argument 14d's own least
    if not len(rows):
        return None
    free = [_term_energy(x.fixed, e1, e2, part) for x, e1, e2, part in terms]
    out = bm.mac_energy_pj + np.sum(free, axis=0)
    out = _bypass_charges(bm, byp, oks, coef, tile, dl, used, free, at, span, w, out)
    s1 = g1 * tile[:, 2]
    s0 = tile[:, 1]
    alt = np.zeros(n)  # rows with fewer than two such tensors: no second bound (0 under the maximum)
    alt[rows] = out[rows] + two_level_least_many(span[rows], coef, w[rows], n1[rows], s1[rows], n0[rows], s0[rows])
    return alt


def _coordinate_union(a: IntArray, cnt: IntArray, strd: IntArray, span: int) -> int:
    """Argument 16's count for one coordinate, written plainly (the reference of
    `_union_kernel`): the words of the union of the intervals ``[sum_j a_j x_j, + span)``, each
    ``x_j`` over the mixed radix of ``cnt[j, s]`` iterations at stride ``strd[j, s]``."""
    starts = np.zeros(1, dtype=np.int64)
    for j in range(len(a)):
        pos = np.zeros(1, dtype=np.int64)
        for c, st in zip(cnt[j].tolist(), strd[j].tolist(), strict=True):
            pos = (pos[:, None] + np.arange(c, dtype=np.int64)[None, :] * st).ravel()
        starts = np.unique((starts[:, None] + int(a[j]) * pos[None, :]).ravel())
    return int(span + np.minimum(np.diff(starts), span).sum())


def _instance_words_floors(bm: BoundModel, k: int, tile: FloatArray, tt: FloatArray, g: FloatArray,
                           used: FloatArray, omin: FloatArray, omax: FloatArray, otmin: FloatArray, gs: FloatArray,
                           dl: Any, terms: list[tuple[_X, float, float, FloatArray | float]],
                           at: dict[tuple[str, int, int], int]) -> list[tuple[_X, float, float, FloatArray | float]]:
    """Argument 16: ``terms`` with the fills of each level
    ``c >= 1`` keeping a tensor ``t`` (of disjoint coordinates) and the reads of its parent ``p``
    serving it at least their values for deliveries ``F_c`` of one instance's union of tiles
    (`_union_kernel.instance_unions`): ``X(c) = inst_c F_c`` and ``p``'s reads ``F_c prod_{l<p}
    used_l prod_{l=p}^{c-1} distinct_l`` (eq. S). A known ``c`` (``c >= k``) has its tile and the
    known levels' loops; an open one (``c < k``) its least over the tiles its capacity allows
    (every factor of the open levels a divisor of the open product: the rows where that product
    is one value), with ``distinct_{c-1}`` counted for each. ``dl(t, l)`` a lower bound of
    distinct_l. Each floored count keeps its other bounds (``fixed``, ``opened`` and the floor
    ``lo`` of an order-dependent count raised to at least the floor: every one a lower bound of
    the count under its condition, and the floor one under every order). Level 1's counts of the
    traffic table's tensors keep theirs (the table's charge at ``k >= 2`` subtracts them)."""
    from accelmap.costmodels._union_kernel import instance_unions

    n, L, D = tt.shape
    s_out = _prod(gs[:, :k], 1)
    o_lb = np.maximum(otmin, np.ceil(omin / s_out - 1e-9))
    one_value = omin == omax
    floors: dict[int, FloatArray] = {}
    for t, p, c in bm.pairs:
        if c >= L or not bm.disjoint[t] or not bm.coords[t]:
            continue
        if c == 1 and bm.traffic is not None and t in bm.traffic.tensors.tolist():
            continue
        if not bm.sliding[t] and all(bool((a == 1).all()) for _, a in bm.coords[t]):
            continue  # one-dim unit coordinates: argument 1's order-free count is this union already
        ptr = np.cumsum([0] + [len(dims) for dims, _ in bm.coords[t]]).astype(np.int64)
        cdims = np.concatenate([dims for dims, _ in bm.coords[t]]).astype(np.int64)
        ca = np.concatenate([a for _, a in bm.coords[t]]).astype(np.int64)
        if c >= k:
            tc0 = tile[:, c]
            ostr0 = g[:, k - 1] * tile[:, k]
            lone: BoolArray = np.asarray((gs[:, : k - 1] <= 1.0).all(axis=1), dtype=bool) if k > 1 \
                else np.ones((n, D), dtype=bool)
            o = o_lb
            kcnt = np.ascontiguousarray(np.moveaxis(tt[:, k:c], 1, 2))
            kstr = np.ascontiguousarray(np.moveaxis(g[:, k:c] * tile[:, k + 1:c + 1], 1, 2))
            room = np.full(n, np.inf)
        elif not np.isfinite(bm.capacity[c]) or np.prod(bm.fan[:c]) == 1:
            continue  # one instance (its touched words are charged already), or every tile of c allowed
        elif bm.capacity[c] > sw._INSTANCE_WORDS_MAX_ROOM:
            continue  # a large buffer: its tiles cost much to enumerate and lift little (a weaker bound)
        else:
            tc0 = tile[:, k] * _prod(gs[:, c:k], 1)
            ostr0 = gs[:, c - 1] * tc0
            lone = np.asarray((gs[:, : c - 1] <= 1.0).all(axis=1), dtype=bool) if c > 1 \
                else np.ones((n, D), dtype=bool)
            o = np.rint(omin / s_out)
            kcnt = kstr = np.ones((n, D, 0))
            room = np.full(n, float(bm.capacity[c]))
            for u in np.flatnonzero(bm.keep[c]).tolist():
                if u != t:
                    room = room - _footprint(bm, u, tc0)
            room = np.where(one_value[:, cdims].all(axis=1), room, -1.0)  # (no floor where o is open)
        fl, rd = instance_unions(ptr, cdims, ca, np.unique(cdims), np.rint(tc0).astype(np.int64),
                                 np.rint(ostr0).astype(np.int64), np.rint(o).astype(np.int64), lone,
                                 np.rint(kcnt).astype(np.int64), np.rint(kstr).astype(np.int64), room,
                                 np.rint(gs[:, c - 1]).astype(np.int64), c < k)
        above = _prod(used[:, :p], 1) if p > 0 else np.ones(n)
        if c >= k:
            rd = fl.copy()
            for lv in range(p, c):
                rd = rd * dl(t, lv)
        else:
            for lv in range(p, c - 1):
                rd = rd * dl(t, lv)
        i = at[("r", int(t), int(c))]
        floors[i] = np.maximum(floors.get(i, 0.0), rd * above)
        j = at.get(("f", int(t), int(c)))
        if j is not None:
            floors[j] = np.maximum(floors.get(j, 0.0), fl * _prod(used[:, :c], 1))
    out = list(terms)
    for i, fl in floors.items():
        x, e1, e2, part = terms[i]
        if not (fl > x.fixed).any():
            continue
        # the floor is on the count itself, after ``scale``: the inner floor keeps its value
        out[i] = (replace(x, fixed=np.maximum(x.fixed, fl), lo=np.maximum(x.lo, fl),
                          inner=x.lo if x.inner is None else x.inner,
                          opened=None if x.opened is None else np.maximum(x.opened, fl)), e1, e2, part)
    return out


def _dram_order_known_energy(bm: BoundModel, tab: TrafficTable, tile1: FloatArray,
                             terms: list[tuple[_X, float, float, FloatArray | float]],
                             at: dict[tuple[str, int, int], int],
                             two_level: list[tuple[int, FloatArray]] | None = None) -> FloatArray | None:
    """Argument 14c: at a node whose level-1 tile ``tile1`` (n, D) is known (``k = 1``), the MACs,
    every term outside the table at its order-free value and the table's own cell (the least
    over level 0's orders for that tile, the bypassing unit tensors included); None where
    there is no table or a tile is not one of its cells."""
    if tab.cell is None:
        return None
    idx = np.empty(tile1.shape, dtype=np.int64)
    for d in range(tile1.shape[1]):
        v = tab.vals[d]
        at_d = np.minimum(np.searchsorted(v, tile1[:, d] * (1.0 - 1e-12), side="left"), len(v) - 1)
        if not np.all(v[at_d] == tile1[:, d]):
            return None
        idx[:, d] = at_d
    covered: set[int] = set()
    for t in tab.tensors.tolist():
        covered.update((at[("r", t, 1)], at[("f", t, 1)]))
    for t, c in tab.bypass:
        covered.update((at[("r", t, c)], at[("f", t, c)]))
    out = tab.cell[tuple(idx.T)] + bm.mac_energy_pj
    for t, e in two_level or ():  # argument 14d
        covered.update((at[("r", t, 2)], at[("f", t, 2)]))
        out = out + e
    for i, (x, e1, e2, part) in enumerate(terms):
        if i not in covered:
            out = out + _term_energy(x.fixed, e1, e2, part)
    return out


def _dram_order_energy(tab: TrafficTable, idx: IntArray, over: BoolArray) -> FloatArray | None:
    """Argument 14 at a node: the least of `dram_order_table` over the level-1 tiles at least
    the node's (``idx`` their first cell, ``over`` no such tile); None where not built."""
    if tab.order_least is None:
        return None
    return np.where(over, np.inf, tab.order_least[tuple(idx.T)])


def _distinct_exact(bm: BoundModel, t: int, g_lv: FloatArray, stride: FloatArray) -> FloatArray:
    """Argument 15: (n,) the distinct offset vectors of tensor ``t`` over the spatial factors
    ``g_lv`` (n, D) of one level whose child tile ``stride`` (n, D) is known: eq. S of the model
    counted as the model counts it (`_loopnest_numpy._distinct_level`: one unrolled dim its
    factor; two dims with steps ``a``, ``b`` ``n1 n2 - max(0, n1 - b/gcd) max(0, n2 - a/gcd)``;
    more dims enumerated). Every completion has these factors and this tile, so the count is
    its distinct_l exactly, at least argument 4's sumset bound (a strided window's offsets
    ``2 q + s`` over ``Q`` 7 and ``S`` 3 are 15, the sumset bound 9)."""
    from accelmap.costmodels._loopnest_numpy import _distinct_sums

    n = len(g_lv)
    out = np.ones(n)
    if all(len(dims) == 1 or not ((g_lv[:, dims] > 1.0).sum(axis=1) >= 2).any() for dims, _ in bm.coords[t]):
        # no coordinate unrolled over two dims anywhere: the sumset bound is the count itself
        for dims, _ in bm.coords[t]:
            out = out * (1.0 + (g_lv[:, dims] - 1.0).sum(axis=1))
        return out
    gi = np.rint(g_lv).astype(np.int64)
    si = np.rint(stride).astype(np.int64)
    for dims, a in bm.coords[t]:
        if len(dims) == 1:
            out = out * gi[:, dims[0]]
        elif len(dims) == 2:
            n1, n2 = gi[:, dims[0]], gi[:, dims[1]]
            s1, s2 = int(a[0]) * si[:, dims[0]], int(a[1]) * si[:, dims[1]]
            h = np.gcd(s1, s2)
            out = out * (n1 * n2 - np.maximum(n1 - s2 // h, 0) * np.maximum(n2 - s1 // h, 0))
        else:
            coef_c = np.zeros(bm.D, dtype=np.int64)
            coef_c[dims] = a
            grid = int(np.prod(np.where(coef_c[None, :] > 0, gi, 1), axis=1).max())
            out = out * _distinct_sums(coef_c, gi.T[None], si.T[None], max(grid, 1))[0]
    return out


def _spatial_slots(bm: BoundModel) -> tuple[int, ...]:
    """The fanouts a spatial factor can use, one per (level, axis) with more than one instance
    (level-major, X before Y): ``fan_x[l]`` at ``2 l``, ``fan_y[l]`` at ``2 l + 1``."""
    return tuple(int(f) for lv in range(bm.L) for f in (bm.fan_x[lv], bm.fan_y[lv]))


@functools.lru_cache(maxsize=64)
def _spatial_most_table(fans: tuple[int, ...], open_dims: tuple[tuple[int, int], ...]) -> IntArray | None:
    """Argument 18's table: for the dims ``open_dims`` ((bound, room) each, spatial factors all
    open), ``out[c]`` (an array over every vector ``c`` of room left per slot with fanout > 1,
    ``1 <= c_i <= fans_i``) the largest product of their spatial factors over every choice
    that fits: each dim takes at each slot a divisor of its bound, their product (over the
    slots) dividing its bound and at most its room, and the dims' factors at each slot
    multiply to at most ``c_i``. None where the table would be too large."""
    slots = [i for i, f in enumerate(fans) if f > 1]
    caps = [fans[i] for i in slots]
    if not caps or math.prod(caps) > sw._SPATIAL_MOST_CELLS:
        return None
    reach: set[tuple[int, ...]] = {tuple(1 for _ in caps)}
    for bound, room in open_dims:
        divs = [x for x in range(1, bound + 1) if bound % x == 0]
        opts: list[tuple[int, ...]] = [()]
        for cap in caps:  # the dim's factor per slot: a divisor, the running product dividing its bound
            opts = [o + (x,) for o in opts for x in divs if x <= cap
                    and bound % (math.prod(o) * x) == 0 and math.prod(o) * x <= room]
        reach = {tuple(a * x for a, x in zip(r, o, strict=True)) for r in reach for o in opts
                 if all(a * x <= cap for a, x, cap in zip(r, o, caps, strict=True))}
    out = np.zeros(caps, dtype=np.int64)
    for r in reach:
        out[tuple(x - 1 for x in r)] = max(out[tuple(x - 1 for x in r)], math.prod(r))
    for ax in range(len(caps)):  # the most over every vector at most c: a running maximum per axis
        np.maximum.accumulate(out, axis=ax, out=out)
    return out


def _spatial_most(bm: BoundModel, spatial: IntArray, spatial_room: IntArray, p_min: FloatArray,
                  p_max: FloatArray) -> FloatArray | None:
    """Argument 18: (n,) the most spatial instances (the product of every level's X and Y
    factors over every dim) of any completion of nodes whose spatial factors are partly chosen.
    ``spatial`` (n, L, D, 2) the fixed factors (ones where open), ``spatial_room`` (n, D) each
    dim's largest spatial product (its fixed one where chosen), ``p_min``, ``p_max`` (n, D) each
    dim's smallest and largest full product (its bound where they agree). A dim whose factors
    are all ones is taken as open (a chosen one of all ones has room 1: no choice but ones).
    Rows where a bound is not one value, or the table is too large, get inf (no bound)."""
    fans = _spatial_slots(bm)
    slots = [i for i, f in enumerate(fans) if f > 1]
    n, L, D, _ = spatial.shape
    out = np.full(n, np.inf)
    if not slots:
        return None
    fixed = np.ones((n, len(slots)), dtype=np.int64)  # the chosen dims' product per slot
    for j, i in enumerate(slots):
        fixed[:, j] = spatial[:, i // 2, :, i % 2].prod(axis=1)
    is_open = (spatial == 1).all(axis=(1, 3))  # (n, D)
    bound = np.rint(p_min).astype(np.int64)
    one = (p_min == p_max).all(axis=1)
    key = np.where(is_open & (spatial_room > 1) & (bound > 1), bound * (1 << 32) + spatial_room, 0)
    uk, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    caps = np.array([fans[i] for i in slots], dtype=np.int64)
    left = caps[None, :] // fixed  # room left per slot
    base = fixed.prod(axis=1).astype(np.float64)
    for u in range(len(uk)):
        dims = tuple((int(v >> 32), int(v & 0xFFFFFFFF)) for v in uk[u].tolist() if v)
        tab = _spatial_most_table(fans, dims)
        if tab is None:
            continue
        sel = np.flatnonzero((inv == u) & one & (left >= 1).all(axis=1))
        out[sel] = base[sel] * tab[tuple((left[sel] - 1).T)]
    return out


def _joint_split_energy(bm: BoundModel, tile: FloatArray, tt: FloatArray, g: FloatArray, omin: FloatArray,
                        omax: FloatArray, next_level: IntArray | None, next_chosen: BoolArray | None, used: FloatArray, dl: Any,
                        terms: list[tuple[_X, float, float, FloatArray | float]],
                        at: dict[tuple[str, int, int], int], energy_cut: FloatArray | None = None) -> FloatArray | None:
    """Argument 17: at a node with level 2's tile and every spatial factor known and levels 0 and
    1's temporal factors open (``k = 2``), argument 15b's bound taken at its least over the
    splits of each dim's open temporal product ``o_d`` between level 1 (``n1_d``) and level 0
    (``o_d / n1_d``) as well as over both levels' orders: the MACs, every term at its
    order-free value but the level-0 reads and keeper fills of the inputs and weights kept at
    level 0, not at 1, next at ``c >= 2`` (no factor over their dims at the levels ``2 .. c-1``),
    and those at ``min over n1 of two_level_least_many``. Only the splits whose level-1 tile
    fits its capacity count (every completion's does); a dim whose level-1 factor is chosen
    (``next_level``) has that one split. ``tile`` (n, L+1, D) the known tiles; ``tt``, ``g``
    (n, L, D) the temporal factors (known levels) and the spatial ones (fixed at every level);
    ``omin``/``omax`` (n, D) the outer products; ``used`` (n, L) the spatial products;
    ``dl(t, l)`` a lower bound of distinct_l. ``energy_cut`` (n,), where given, the energy at
    which each row is cut: the least is computed up to it (`_split_least_memo`), so a row
    whose least reaches it gets at least that energy (and is cut) and every other row its
    least. Returns (n,) (0 on rows it does not bound, and where no split fits) or None where
    no row qualifies."""
    byp = _level1_bypassers(bm)
    if not byp:
        return None
    n, D = omin.shape
    oks = _bypass_rows_ok(bm, byp, tt, g, n)
    o = omin / (g[:, 0] * g[:, 1])  # each dim's temporal product over levels 0 and 1
    rows_ok = oks.any(axis=0) & (omin == omax).all(axis=1) & (o == np.rint(o)).all(axis=1)
    rows = np.flatnonzero(rows_ok)
    if not len(rows):
        return None
    chosen = np.zeros(D, dtype=bool) if next_level is None or next_chosen is None else np.asarray(next_chosen)
    if chosen.any() and not sw._JOINT_SPLIT_CHOSEN:
        return None
    free = [_term_energy(x.fixed, e1, e2, part) for x, e1, e2, part in terms]
    base = bm.mac_energy_pj + np.sum(free, axis=0)
    C = bm.coef_fp.shape[1]
    coef = np.asarray(bm.coef_fp, dtype=np.float64)[[t for t, _ in byp]]
    w = np.zeros((n, len(byp)))
    span = np.ones((n, len(byp), C))
    base = _bypass_charges(bm, byp, oks, coef, tile, dl, used, free, at, span, w, base)
    s1 = g[:, 1] * tile[:, 2]
    fixed1 = np.zeros((len(rows), D))
    if chosen.any() and next_level is not None:  # a chosen dim: its level-1 factor (one split)
        fixed1[:, chosen] = next_level[rows][:, chosen, 0]
    kcoef = np.asarray(bm.coef_fp, dtype=np.float64)[bm.keep[1]]
    limit = None
    if energy_cut is not None:  # (the margin: base + limit lands at or above the cut in float64 sums)
        limit = np.maximum(energy_cut[rows] * (1.0 + 1e-9) - base[rows], 0.0)
    least = _split_least_memo(span[rows], coef, w[rows], s1[rows], o[rows], fixed1, kcoef, float(bm.capacity[1]),
                              limit)
    alt = np.zeros(n)
    alt[rows] = np.where(np.isfinite(least) & (least >= 0.0), base[rows] + least, 0.0)
    return alt


_SPLIT_MEMO: dict[bytes, dict[bytes, float]] = {}  # argument 17's least per row, per (coefficients, capacity)
_SPLIT_MEMO_ROWS = 1 << 20  # a table is emptied when it holds this many rows
# argument 17 under a limit (`_split_least_below`): per row, a value the least is known to reach
_SPLIT_FLOORS: dict[bytes, dict[bytes, float]] = {}


def _memo_lookup(table: dict[bytes, float], parts: list[FloatArray], floors: dict[bytes, float] | None = None,
                 limit: FloatArray | None = None) -> tuple[list[bytes], FloatArray, list[int]]:
    """The rows' keys (the inputs ``parts``, (n, .) each, side by side, byte for byte), their
    values found in ``table`` (or, with ``limit``, a floor in ``floors`` that reaches the row's
    limit) and the rows still to compute: (keys, out with the found values filled in, todo)."""
    keys = [r.tobytes() for r in np.ascontiguousarray(np.concatenate(parts, axis=1))]
    out = np.empty(len(keys))
    todo = []
    for i, key in enumerate(keys):
        v = table.get(key)
        if v is None and limit is not None and floors is not None:
            fl = floors.get(key)
            if fl is not None and fl >= limit[i]:
                v = fl
        if v is None:
            todo.append(i)
        else:
            out[i] = v
    return keys, out, todo


def _split_least_memo(span: FloatArray, coef: FloatArray, w: FloatArray, s1: FloatArray, o: FloatArray,
                      fixed1: FloatArray, kcoef: FloatArray, cap: float,
                      limit: FloatArray | None = None) -> FloatArray:
    """`_split_least` with each row's value kept (``_SPLIT_MEMO``, keyed by the row's inputs
    byte for byte): nodes of different keep patterns and branches often share level 2's tile,
    the spatial factors and the open products (on simple3 L4, 27,963 distinct ones among 69,126
    rows in 8 CPU s). The same values as `_split_least`; with ``limit`` (n,) those of
    `_split_least_below`: a least known is taken as it is (below the limit it is the value
    asked for; at or above it, it is at least the limit and cuts the row all the same), a
    floor from an earlier limit where it reaches this one, and the rest computed up to their
    limits (their leasts kept where below it, their floors where not)."""
    n = len(o)
    key0 = coef.tobytes() + kcoef.tobytes() + np.float64(cap).tobytes()
    table = _SPLIT_MEMO.setdefault(key0, {})
    floors = _SPLIT_FLOORS.setdefault(key0, {})
    if len(table) > _SPLIT_MEMO_ROWS:
        table.clear()
    if len(floors) > _SPLIT_MEMO_ROWS:
        floors.clear()
    keys, out, todo = _memo_lookup(table, [span.reshape(n, -1), w, s1, o, fixed1], floors, limit)
    if todo:
        sel = np.asarray(todo)
        if limit is None:
            got = _split_least(span[sel], coef, w[sel], s1[sel], o[sel], fixed1[sel], kcoef, cap)
            for i, v in zip(todo, got.tolist(), strict=True):
                table[keys[i]] = v
        else:
            lim = limit[sel]
            got = _split_least_below(span[sel], coef, w[sel], s1[sel], o[sel], fixed1[sel], kcoef, cap, lim)
            for i, v, li in zip(todo, got.tolist(), lim.tolist(), strict=True):
                if v == math.inf or (v < li and (v >= 0.0 or not sw._SPLIT_STOP)):
                    table[keys[i]] = v  # the least itself (inf: no split fits; -1: too many splits)
                elif v >= li:
                    floors[keys[i]] = v  # every split reaches the limit
        out[sel] = got
    return out


def _split_least_below(span: FloatArray, coef: FloatArray, w: FloatArray, s1: FloatArray, o: FloatArray,
                       fixed1: FloatArray, kcoef: FloatArray, cap: float, limit: FloatArray) -> FloatArray:
    """`_split_least` computed up to ``limit`` (n,): ``min(least, limit)`` where some split fits
    (inf where none does, -1 where there are too many, as `_split_least`); with
    ``_SPLIT_STOP`` also -1 (not bounded) where the least is below the limit. Compiled
    (`_order_kernel.two_level_split_least_below`, a branch and bound over the splits and
    each split's shortest path) or, with ``_JOINT_SPLIT_ENGINE = "numpy"``, `_split_least`'s
    reference clipped: the same values."""
    from accelmap.costmodels._order_kernel import two_level_split_least_below

    if sw._JOINT_SPLIT_ENGINE == "cpu":
        return two_level_split_least_below(span, coef, w, s1, o, fixed1, kcoef, cap, sw._JOINT_SPLIT_MAX, limit,
                                           sw._SPLIT_STOP)
    least = _split_least(span, coef, w, s1, o, fixed1, kcoef, cap)
    out = np.where(np.isinf(least) | (least < 0.0), least, np.minimum(least, limit))
    if sw._SPLIT_STOP:
        out = np.where((least >= 0.0) & (least < limit), -1.0, out)
    return out


def _split_least(span: FloatArray, coef: FloatArray, w: FloatArray, s1: FloatArray, o: FloatArray,
                 fixed1: FloatArray, kcoef: FloatArray, cap: float) -> FloatArray:
    """Argument 17's least (`_order_kernel.two_level_split_least`, ``_JOINT_SPLIT_ENGINE =
    "cpu"``) or its readable reference (``"numpy"``): every split of each dim's product ``o``
    into a level-1 factor ``n1`` (a divisor; ``fixed1`` where > 0) and level 0's ``o / n1``
    enumerated, those whose level-1 tile ``s1 n1`` holds the tensors of ``kcoef`` in ``cap``
    words kept, `two_level_least_many` at each; inf where none fits, -1 where a row has more
    than ``_JOINT_SPLIT_MAX`` splits (not bounded)."""
    from accelmap.costmodels._order_kernel import two_level_least_many, two_level_split_least

    if sw._JOINT_SPLIT_ENGINE == "cpu":
        return two_level_split_least(span, coef, w, s1, o, fixed1, kcoef, cap, sw._JOINT_SPLIT_MAX)
    n, D = o.shape
    out = np.full(n, np.inf)
    for i in range(n):
        choices = [[float(fixed1[i, d])] if fixed1[i, d] > 0 else
                   [float(x) for x in range(1, int(o[i, d]) + 1) if int(o[i, d]) % x == 0] for d in range(D)]
        if math.prod(len(ch) for ch in choices) > sw._JOINT_SPLIT_MAX or max(len(ch) for ch in choices) > 64:
            out[i] = -1.0
            continue
        n1 = np.array(list(itertools.product(*choices)), dtype=np.float64).reshape(-1, D)
        t1 = s1[i][None, :] * n1
        need = np.zeros(len(n1))
        for kc in kcoef:
            need += np.prod(1.0 + ((t1[:, None, :] - 1.0) * kc[None]).sum(axis=2), axis=1)
        fit = need <= cap
        if fit.any():
            r = np.zeros(int(fit.sum()), dtype=np.int64) + i
            out[i] = two_level_least_many(span[r], coef, w[r], n1[fit], s1[r], o[r] / n1[fit], t1[fit]).min()
    return out


def _kept_bypass_energy(bm: BoundModel, k: int, tile: FloatArray, tt: FloatArray, g: FloatArray, omin: FloatArray,
                        omax: FloatArray, next_chosen: BoolArray | None, used: FloatArray, dl: Any,
                        terms: list[tuple[_X, float, float, FloatArray | float]],
                        at: dict[tuple[str, int, int], int]) -> FloatArray | None:
    """Argument 19: the MACs, every term at its order-free value but (i) the level-0 reads and
    keeper fills of the tensors that bypass level 1 (as 15b: inputs and weights kept at level 0,
    not at 1, next at ``c >= 2``, no factor over their dims at the levels ``2 .. c-1``; per row)
    and (ii) level 0's reads and level 1's fills of the tensors kept at both levels (argument
    14c's terms, the output's updates with them), and those together at their least over the
    orders of levels 0 and 1: at ``k <= 1`` (every factor known, level 0's product one value)
    `_kept_kernel.kept_bypass_least`; at ``k = 2`` (level 2's tile and every spatial factor
    known, no dim's level-1 factor chosen) its least over the splits of the open products
    between levels 1 and 0 whose level-1 tile fits (`_kept_kernel.kept_split_least`, as
    argument 17). Arguments 14c, 14d, 15b and 17 take (ii) and (i) each at its own least order;
    every mapping has one order per level for both. ``tile`` (n, L+1, D) the known tiles;
    ``tt``, ``g`` (n, L, D) the temporal factors (known levels) and spatial ones; ``omin`` /
    ``omax`` (n, D) the outer products; ``used`` (n, L) the spatial products; ``dl(t, l)`` a
    lower bound of distinct_l. Returns (n,) (0 on rows it does not bound) or None where no row
    qualifies (no tensor bypasses level 1, none is kept at levels 0 and 1, or level 0 fans
    out)."""
    from accelmap.costmodels._kept_kernel import kept_bypass_least

    byp = _level1_bypassers(bm)
    kept = np.flatnonzero(bm.keep[0] & bm.keep[1]).tolist()
    if not byp or not kept or k > 2 or (k == 2 and sw._KEPT_SPLIT_MAX <= 0) or (k <= 1 and not sw._KEPT_KNOWN):
        return None
    n = len(tile)
    oks = _bypass_rows_ok(bm, byp, tt, g, n)
    ok_rows = oks.any(axis=0)
    s1 = g[:, 1] * tile[:, 2]
    if k == 2:  # each dim's temporal product over levels 0 and 1, one value
        if next_chosen is not None and np.asarray(next_chosen).any():
            return None
        o = omin / (g[:, 0] * g[:, 1])
        ok_rows &= (omin == omax).all(axis=1) & (o == np.rint(o)).all(axis=1)
        whole = s1 * o  # level 0's tile: the (padded) extents
    else:
        n0 = tt[:, 0] if k == 0 else omin
        whole = tile[:, 1] * n0
    rows = np.flatnonzero(ok_rows)
    if not len(rows):
        return None
    free = [_term_energy(x.fixed, e1, e2, part) for x, e1, e2, part in terms]
    out = bm.mac_energy_pj + np.sum(free, axis=0)
    C = bm.coef_fp.shape[1]
    coef = np.asarray(bm.coef_fp, dtype=np.float64)
    coef_b = coef[[t for t, _ in byp]]
    span_b = np.ones((n, len(byp), C))
    w_b = np.zeros((n, len(byp)))
    out = _bypass_charges(bm, byp, oks, coef_b, tile, dl, used, free, at, span_b, w_b, out)
    w_k = np.zeros((n, len(kept)))
    for i, t in enumerate(kept):  # argument 14's weights: (e_r0 + e_w1) F_1; the output's F_1 - part
        f = float(bm.exist[t])
        if t == bm.output:
            rest = bm.read_pj_word[0] + bm.write_pj_word[1]
            w_k[:, i] = f * (bm.write_pj_word[0] + rest)
            out = out - f * rest * _footprint(bm, t, whole)
        else:
            w_k[:, i] = f * (bm.read_pj_word[0] + bm.write_pj_word[1])
        out = out - free[at[("r", t, 1)]] - free[at[("f", t, 1)]]
    coef_k = coef[kept]
    alt = np.zeros(n)
    if k <= 1:
        tile1 = tile[:, 1]
        span_k = 1.0 + ((tile1[:, None, None, :] - 1.0) * coef_k[None]).sum(axis=3)
        least = kept_bypass_least(span_b[rows], coef_b, w_b[rows], span_k[rows], coef_k, w_k[rows], tt[rows, 1],
                                  s1[rows], n0[rows], tile1[rows])
        alt[rows] = out[rows] + least
        return alt
    kcoef = coef[bm.keep[1]]
    least = _kept_split_memo(span_b[rows], coef_b, w_b[rows], coef_k, w_k[rows], s1[rows], o[rows], kcoef,
                             float(bm.capacity[1]))
    alt[rows] = np.where(np.isfinite(least) & (least >= 0.0), out[rows] + least, 0.0)
    return alt


_KEPT_SPLIT_MEMO: dict[bytes, dict[bytes, float]] = {}  # argument 19's least per row at k = 2, per tensors, capacity, limit


def _kept_split_memo(span_b: FloatArray, coef_b: FloatArray, w_b: FloatArray, coef_k: FloatArray, w_k: FloatArray,
                     s1: FloatArray, o: FloatArray, kcoef: FloatArray, cap: float) -> FloatArray:
    """`_kept_kernel.kept_split_least` (no level-1 factor chosen, at most ``_KEPT_SPLIT_MAX``
    splits) with each row's value kept, keyed by the row's inputs byte for byte (as
    `_split_least_memo`: rows of different nodes often share level 2's tile, the spatial factors
    and the open products). The same values as the kernel."""
    from accelmap.costmodels._kept_kernel import kept_split_least

    n = len(o)
    table = _KEPT_SPLIT_MEMO.setdefault(coef_b.tobytes() + coef_k.tobytes() + kcoef.tobytes()
                                        + np.float64(cap).tobytes() + np.int64(sw._KEPT_SPLIT_MAX).tobytes(), {})
    if len(table) > _SPLIT_MEMO_ROWS:
        table.clear()
    keys, out, todo = _memo_lookup(table, [span_b.reshape(n, -1), w_b, w_k, s1, o])
    if todo:
        sel = np.asarray(todo)
        got = kept_split_least(span_b[sel], coef_b, w_b[sel], coef_k, w_k[sel], s1[sel], o[sel],
                               np.zeros((len(sel), o.shape[1])), kcoef, cap, sw._KEPT_SPLIT_MAX)
        out[sel] = got
        for i, v in zip(todo, got.tolist(), strict=True):
            table[keys[i]] = v
    return out
