"""The loop-order arguments of the ``loopnest`` bounds: the passes outside a tile (5b-5c), the open
levels' innermost loops (8-9), the order of the dims' innermost open loops (10), the words a
region of small buffers must take in (11) and each known level's outer and inner loops chosen
jointly (13). Part of `accelmap.costmodels.loopnest_bounds`, whose docstring holds the notation
and arguments 1-7 these build on; `partial_bounds` there combines them.

5b. **The loops outside a pass.** Eq. D is ``F_c = S + sum_j (prod_{i<j} n_i)(n_j - 1)
   Delta_j`` with every ``Delta_j >= 0``, and ``Delta_i`` of a loop ``i`` depends only on
   ``i``, the loops inside it and the innermost active loop (its step moves ``i``'s dim and
   returns the loops inside ``i``). So for any active loop ``j``, the terms of the loops
   inside ``j`` are ``P_j`` times those of the nest of the loops inside ``j`` alone (``P_j``
   the product of the loops at or outside ``j``: each pass of that nest repeats them), whose
   deliveries ``F_in`` are at least the union ``U_j`` of the tiles it visits (the argument
   above): ``F_c >= S + P_j (F_in - S) >= S + P_j (U_j - S)``. The visited tiles form a grid
   over the dims, so ``U_j`` is the product over ``t``'s coordinates (disjoint dims) of the
   union of each coordinate's intervals, at least ``span + sum_d (e_d - 1) min(a_d T_d,
   span)`` with ``e_d`` the loops over ``d`` inside ``j`` (a monotone path over the grid:
   each step moves the interval by at least ``a_d T_d``, a loop's stride being at least the
   tile of ``c``; a one-dim coordinate's intervals are disjoint, ``e_d span``). ``j`` is
   taken as the outermost active loop of a known level ``lv`` (``k <= lv < c``): the loops
   inside it are every other loop of ``lv .. c-1``, ``P_j`` is at least ``n_j`` times every
   loop of the levels above ``lv`` (the open levels' temporal and spatial products together
   at least ``prod omin``), and with ``lv``'s order open the least over its active loops
   bounds every order. ``X(c) = inst_c F_c``. This charges a tensor that no jump loop
   reloads (a sliding input, say) for the irrelevant loops at the outer levels: simple3's
   res3a_2b_s2 with the GLB keeping only outputs re-reads the inputs from DRAM once per
   ``M`` iteration there (``bench_exact.py --groups timeloop``, ``docs/performance.md``).
5c. **The same at the open level just above the known ones** (`_next_level_pass`). Where
   some dims have chosen their temporal factors at level ``k-1`` (``next_level``), take ``j``
   the outermost active loop of ``k-1``: the loops inside it include the other chosen loops of
   ``k-1`` and every loop of ``k .. c-1``, so ``U_j`` is at least the union of their tiles as in
   5b; ``P_j`` is ``n_j`` times every loop of the levels above ``k-1``, and with the spatial
   factors above ``c`` (the instances) at least ``n_j`` times, per dim, a chosen dim's open
   product over its chosen temporal factor and any other dim's fixed spatial factor at
   ``k-1`` (a loop not chosen only adds to the union inside ``j`` or to the loops outside it,
   both of which only grow ``F_c``; leaving it out lowers the bound). ``k-1``'s order is open,
   so the least over its chosen active loops bounds every order, and where a dim not chosen
   may still have an active loop at ``k-1`` (its open temporal product can reach 2), also
   ``n_j = 2`` with the union of every chosen loop. The floors of 5b and 5c bound the
   deliveries ``X(c)``; the reads of an open parent ``p < k`` serving ``c`` are ``X(c)
   G_{p,c}`` over the instances the levels ``p .. c-1`` add (eq. S), so with every spatial
   factor fixed they are at least the floor times ``prod_{l=p}^{c-1} distinct_l / used_l``
   (argument 4's ``distinct_l``). It charges the inputs and weights that bypass a GLB for
   the passes its chosen loops repeat: res3a_branch2b's frontier (eyeriss-like, the GLB
   keeping outputs only) had both at their order-free DRAM reads, 0.73 of the least energy
   of the nodes' sub-trees (``docs/performance.md``, "The open 3x3 layers' frontier").
8. **The open levels' innermost loop, one for every tensor.** The open levels ``0 .. k-1``
   are one loop nest above the known levels; let ``z`` be its innermost active loop. A count
   of tensor ``t`` into a known level ``c`` (``k <= c < L``) whose known levels ``k .. c-1``
   hold no active jump loop of ``t`` has its J* among the open loops: when ``z`` is over a
   jump dim of ``t``, J* is ``z`` and every open loop is at or outside it, so the count is
   at least its value with every open loop charged (argument 1, as for a J* at a known
   level); otherwise at least its order-free value. ``z`` is the same for every tensor, so
   the sum of the counts' energies is at least its least over the dims that can carry an
   active open loop (0 extra where every open temporal product can be 1): the per-level
   relaxation of argument 2 and of the traffic table, applied to the open levels together.
   It charges, say, the weights of a node whose GLB keeps nothing for every loop above their
   scratchpad when the outputs, whose scratchpad sits below, are to escape their reloads.
9. **The open levels' innermost loops, coupled through their capacities** (with every
   spatial factor fixed; `_coupled_open_energy`). Each open level ``l`` has its own innermost
   active loop (or none), and a count of tensor ``t`` into an open level ``c`` depends on the
   innermost active loop ``z_c`` of the levels ``0 .. c-1``: the one of the deepest active
   level above ``c``. When ``z_c`` is over a jump dim of ``t``, it is J*, every loop above
   ``c`` is at or outside it, and (argument 1, summed over the instances of ``c``)
   ``X(c) >= S_c(T) prod_d E_d / T_d`` with ``T`` the tile of ``c`` and ``E`` the (padded)
   extents. Grouped by ``t``'s coordinates (disjoint dims), a one-dim coordinate gives
   ``(1 + a (T_d - 1)) E_d / T_d >= E_d``; a sliding one's tiles cover every value the
   coordinate takes, so their spans summed over the loops of its dims are at least its
   distinct values, ``>= 1 + sum_d (E_d - 1)``; the dims ``t`` does not index give
   ``prod E_d / T_d``, and their extents at ``c`` are at most those at any level ``l <= c``
   (it contains ``c``'s tile), whose capacity bounds them: for a tensor ``u`` kept at ``l``,
   every coordinate of ``u`` with exactly one such dim ``d`` has span ``>= T_d + e`` (``e``
   the rest of its span at the smallest tile ``l`` can have), and the product of those spans
   is at most ``M`` (the capacity less the other kept tensors' smallest footprints, over the
   rest of ``u``'s coordinates' smallest spans). With ``x_i + e_i`` of product ``<= M`` and
   ``x_i >= 1``, each ``x_i <= X_i = M / prod_{j != i} (1 + e_j) - e_i`` and ``prod x_i <=
   M prod X_i / (X_i + e_i)`` (``x / (x + e)`` grows with ``x``). The reads of the parent
   ``p`` are that count times ``G_{p,c}`` over the instances the levels ``p .. c-1`` add
   (eq. S: the multicast share). Otherwise the count is at least its order-free value. A
   level can have an active loop over ``d`` only where the dim's open temporal product can
   reach 2 and the tiles of the levels ``0 .. l`` (which contain ``l``'s) still fit with
   ``d``'s extent doubled (``l = k-1``: its chosen temporal factors are in its tile
   already). So the energy of every mapping of the node is at least the least cost of a
   path down the open levels, each level keeping the innermost loop above it or setting it
   to an allowed dim, each count into an open level charged by the loop above it, and the
   counts into known levels (argument 8) by the last; no active loop at all only where every
   open temporal product can be 1. The counts from level 0 into level 1 are left to the
   traffic table where it applies (it bounds their sum on its own).
10. **The order of the dims' innermost open loops, one for every tensor**
   (`_jstar_order_energy`). Argument 8 looks at the innermost open loop alone; the tensors
   that do not jump over it still compete for the order above it. Order the dims by the
   position of their innermost open loop (a dim with no active open loop first, anywhere
   before the others). For a count of tensor ``t`` into a known level ``c`` whose known levels
   ``k .. c-1`` hold no active jump loop of ``t``, J* is the innermost open loop over a jump
   dim of ``t``: its dim ``j`` is ``t``'s last jump dim in that order (an inactive jump dim
   stands for no J* among the open loops: then every dim before it is inactive too). Every
   open loop of a dim ``d`` placed before ``j`` is outside J* (its innermost one is), so by
   argument 1 the count is at least its order-free value (``free``: the jump dims' open
   products times the union of the known tiles inside J*, before the touched-words floor)
   times ``ot_d`` for each such ``d`` that ``t`` does not jump over, ``ot_d`` the open
   temporal product of ``d`` (at least its smallest, and at least its smallest full product
   over the most spatial instances the open levels can have); a dim with no active loop
   has ``ot_d = 1`` and charges nothing, which is why it may stand first. The count is also
   at least its order-free value, and when ``j`` is the innermost dim of the order (``z`` of
   argument 8) at least argument 8's ``opened``. Every mapping of the node realises one
   order, so the least over all orders of the summed energies bounds it: a shortest path
   over the sets ``S`` of dims placed, innermost first, where adding ``d`` charges each
   tensor that jumps over ``d`` and over no dim of ``S`` (``d`` is its J*) for its dims
   outside ``S``. The path is kept per innermost dim ``z``, so it replaces argument 8's charge
   for ``z`` (and argument 9's last state). The tensors jumping over ``z`` have J* = ``z``; a
   single other tensor escapes on its own (its other jump dims first, then its J*, then the
   dims it does not jump over, then ``z``), so the path is run only on the rows where two
   tensors that can rise both skip some ``z``: never for a GEMM or a 1x1 convolution (each
   dim indexes two of the three tensors), and on a convolution with a window only where the
   inputs (one jump dim, ``C``, besides ``N``) can rise with the outputs or the weights.
   **10b. The passes repeated inside J*** (`_pass_union`, `_pass_lift`, `_pass_floor`; a
   sliding tensor ``t`` whose coordinates use disjoint dims, ``_USE_ORDER_PASS``). Argument 10
   lets the dims placed inside a tensor's J* escape; a sliding tensor still pays for them.
   Write ``n_lo_d`` for a lower bound of the bound of dim ``d``'s innermost open loop where
   ``d`` is active: 2, its chosen temporal factor at level ``k-1`` when that is at least 2,
   and its whole open temporal product ``mt_d`` with one open level (``k = 1``) or when it
   chose 1 at level ``k-1 = 1``; ``act_d = max(mt_d, n_lo_d)`` bounds its open temporal
   product where active. In an order, let ``S`` be the dims placed inside J* (all active: the
   dims without an active open loop stand outermost, ``t``'s jump dims innermost among them,
   so an inactive dim is never inside J* nor its anchor below). (i) By argument 1 with argument 5's
   union (5b's decomposition at ``j = J*``), ``F_c >= P_{J*} U(S)``, ``U(S)`` the union of the
   tiles the known loops and the innermost open loops of ``S`` visit: 5b's product over
   ``t``'s coordinates of ``span + sum_d (e_d - 1) min(a_d T_d, span)`` with ``e_d`` the known
   loops over ``d`` times ``n_lo_d`` for ``d`` in ``S``, at least the union ``U`` of ``free``;
   so the count is at least ``free U(S) / U`` times argument 10's charge of the dims outside
   J*. (ii) Let ``l`` be the first dim placed (innermost) that ``t`` does not index, inside J*,
   and ``S_l`` the dims inside it. Argument 5b at ``j`` = ``l``'s innermost open loop: every
   loop of a dim outside ``S_l`` is at or outside ``j`` (``t``'s jump dims too: J* is outside),
   so ``P_j >= act_l`` times ``mt`` of every other dim not in ``S_l`` that ``t`` does not jump
   over, times the jump dims' open products; the nest inside ``j`` delivers at least ``U(S_l) -
   S_c`` new words per pass, and ``j``'s own ``P_j (1 - 1/n_j)`` steps each return that pass to
   its first tile, whose words not in the last tile are at least ``S_c - prod_h max(2 span_h -
   r_h, 0)`` (the pass moves each sliding coordinate ``h`` by at least its range ``r_h`` less
   its span; the other coordinates do not move); with eq. D's first tile per instance, ``F_c
   >= S_c + P_j (U(S_l) - S_c + (1 - 1/n_lo_l) ret)``. Both scale like ``free``, which for
   these counts also takes the open levels' fixed spatial factors of the dims ``t`` does not
   jump over: every instance of ``c`` has its own tile (``X(c) = inst_c F_c``), and an open
   parent's reads are ``F_c`` times the distinct offsets (eq. S) of ``t``'s sliding
   coordinates as well (argument 4). The path keeps, besides the set placed, ``(S_l, l)`` for
   ``t`` from the placing of ``l`` until its J*, whose charge is then the larger of (i) and
   (ii); one such tensor per problem (the inputs of a convolution, ``l`` = ``K``). So with
   ``P``, ``Q`` inside the weights' J* (``K``) and ``K`` inside the inputs' (``C``), the inputs
   pay ``K``'s iterations of the window's pass over ``P``, ``Q``: res3a_branch2b's frontier had
   both at their order-free DRAM reads (``docs/performance.md``, "The open 3x3 layers'
   frontier"). With the passes the path runs on every row where such a count's J* is open.
11. **The words a region of small buffers must take in** (with every spatial factor fixed,
   `_capacity_energy`; a Hong-Kung red-blue pebble count, Hong and Kung, STOC 1981, with the
   Loomis-Whitney inequality, as in the communication lower bounds of convolution
   accelerators, Chen et al., HPCA 2019, and Orojenesis' data-movement bounds, Huang et al.,
   ISCA 2024; derived here from the model's own counts). As first written it applied where
   every dim that moves indexes exactly two of the three tensors and each coordinate is one
   dim (a GEMM, a 1x1 convolution, a fully connected layer; argument 12 extends it to any
   problem of three tensors, windows and padding included): then a MAC is fixed by
   the words of any two tensors it uses, and a set ``V`` of MACs using the word sets ``A_t``
   has ``|V| <= |A_1| |A_2|`` for any two tensors and ``|V| <= sqrt(|A_1| |A_2| |A_3|)``
   (Loomis and Whitney, 1949). Take a *region*: one instance of a level ``c0 >= 1`` with
   every level below it, and a set of two or three tensors each kept at some level of the
   region and above it (``c_t`` the topmost in the region, ``p_t`` the next keeper above).
   The region does ``v = MACs / inst[c0]`` MACs (``inst[c0]`` the product of the spatial
   factors above ``c0``), every MAC's word of ``t`` lies in the tile of ``c_t`` of its
   instance at that time, and every word of a tile that was not in the previous tile of the
   same instance is delivered (argument 5): so the words that MACs use while the region
   takes in some words are at most, per tensor, the tiles held when it starts (at most the
   capacity, summed over the instances of ``c_t`` in the region, the tensors of one level
   sharing it) plus the words delivered meanwhile. Each word of ``t`` delivered into the
   region costs at least ``w_t = (e1 + e2)`` of the fills of ``c_t`` plus ``share (e1 + e2)``
   of the reads of ``p_t`` (every term is ``g(x) = e1 x + e2 (x - part)^+ >= (e1 + e2) x -
   e2 part``, with ``part`` at most its upper bound, and the reads of ``p_t`` are at least
   ``share = prod_{l=p}^{c-1} distinct_l / used_l`` times the deliveries: eq. S). Cut the
   deliveries, in the order of the loop nest, into segments of cost ``B`` (a segment ends
   before the word that would take it over ``B``; a segment that starts inside a step has
   the words of that step delivered before it inside the step's new tile, so what it can use
   is still the held tiles plus its own deliveries). With ``K0`` the cost of the held words
   (each level's capacity times its instances in the region times the dearest ``w_t`` kept
   there), the words a segment's MACs use have ``sum_t w_t |A_t| <= K0 + B``, so by the
   inequality above and the AM-GM inequality a segment does at most ``((K0 + B) / m)^m /
   prod w_t`` MACs for ``m = 2`` tensors (its square root for ``m = 3``); ``h`` segments do
   all ``v``, every one but the last costs at least ``B - max w_t``, and the region's
   deliveries cost at least ``(B - max w_t)(v / most - 1)``, ``B = b K0`` with ``b`` in 1, 2,
   4 (the largest counts). Over the ``inst[c0]`` regions, less the ``part`` terms, this is a
   lower bound of the energy of the counts it covers; the other counts keep their
   order-free values and the MACs their energy, and the total is taken as a maximum with
   the bound of arguments 1-10 (each a lower bound of every completion). It charges what
   arguments 8-10 cannot see: every open loop, not only the innermost ones, since a few
   words of scratchpad bound the reuse of all three tensors together (on eyeriss-like with
   the GLB keeping nothing, the 12-word input and 16-word psum scratchpads force DRAM
   reloads whatever the order; `docs/performance.md`, "This round: a region of small
   buffers"). Only regions whose top level is open (``c0 < k``) are bounded: below ``k``
   every tile is known and the other arguments see the counts.
13. **Each known level's outermost and innermost active loops, chosen jointly**
   (`_pair_order_energy`, with `_outer_pass_levels`). Arguments 2 and 5b relax a known
   level's open order count by count: argument 2 (`_order_energy`) through the level's
   innermost active loop ``z``, argument 5b (`_outer_pass`) through its outermost active loop
   ``j``, each count taking its own best, so two tensors can each escape at once where no
   order lets both (simple3's res3a_2b_s2: the inputs want the GLB's ``Q`` loop outermost,
   the weights want it innermost). One order of level ``l`` fixes both: with two or more
   active loops ``j != z``, both active; with one, ``j = z``; with none the level charges
   nothing. Given ``(j, z)`` at ``l``: a count whose J* sits at ``l`` (its order open) is at
   least ``base`` times the loops of ``l`` up to J* (argument 1): every loop of ``l`` when
   ``z`` is a jump dim of the tensor (J* is ``z``), else its jump loops times ``n_j`` when
   ``j`` is not a jump dim (the outermost loop is at or outside J*); and a count that
   argument 5b bounds at ``l`` is at least 5b's value for that ``j`` (5b's ``j`` *is* the
   outermost active loop of ``l``). Both hold under the same order, so the count is at least
   their maximum with its other floors (the order-free value where its J* is fixed, the 5b
   values of its other levels, the touched words), times the parent's share where it is a
   read (eq. S), as before. A count depends on the pairs of several levels (its J*'s and each
   of its 5b levels'): each count is given, per row, one *home* level ``h`` (where its value
   spreads most over the pairs; any choice is sound) and at every other level the least over
   that level's pairs (what arguments 2 and 5b take). So for every order, with ``(j_h,
   z_h)`` its pairs, count ``i`` is at least ``f_i(j_{h_i}, z_{h_i})``, and the energy (each
   term nondecreasing in its count) is at least ``sum_h min_{(j, z) allowed at h} sum_{i:
   h_i = h} g_i(f_i(j, z))``: the levels' minima are taken independently, each count in one
   level's sum only. A level whose order is fixed (the order search, `_exact_leaves._solve_orders`)
   allows only its own pair. The total is taken as a maximum with argument 2's
   (`_order_energy`; both bound the same terms). The search of the pairs is ``D^2`` per level
   over the dims active somewhere in the batch, one numpy pass per count homed there, on the
   rows where two or more counts spread at the same home (elsewhere the least of their sum is
   the sum of their least values). *On trial* (`BoundModel.pair_trial`): where the known
   levels hold one tensor each (eyeriss-like's scratchpads, ``k >= 2``) no pair lifts a row,
   so the exact searcher drops the term at a keep pattern's nodes of one ``k`` once its first
   64 calls there have lifted none; dropping it only lowers a bound (as argument 12's trial).
   *Where it runs* (``_PAIR_MAX_K``, default 0): at the leaves and in the order search only.
   At the nodes with the DRAM level open (``k = 1``) it lifts about half the rows by about 1%
   but costs more than their cuts save (`docs/performance.md`, "Argument 13").
"""

from __future__ import annotations

from typing import Any

import numpy as np

import accelmap.costmodels._bound_switches as sw
from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.costmodels._bound_model import (
    _X,
    BoundModel,
    _b3,
    _footprint,
    _PassU,
    _prod,
    _span,
    _term_energy,
)

_SEGMENTS = np.array([[1.0], [2.0], [4.0]])  # argument 11's segment costs b (times k0), one row each


def _order_energy(terms: list[tuple[_X, float, float, FloatArray | float]], tt: FloatArray, t_all: FloatArray,
                  k: int, L: int, D: int, n: int) -> FloatArray:
    """Energy of the terms, the open orders chosen jointly per level.

    A term whose J* sits at a level l whose order is open depends on that order through
    its prefix (the loops of l up to J*). One order serves every term of the level: relaxed
    to the choice of its innermost active loop z, a tensor with z among its jump dims pays
    every loop of l (its J* is z), any other tensor at least its own jump loops. So the
    level's terms cost at least the smallest, over the active z, of their sum; the levels'
    orders are independent, so the sum of those minima bounds the total."""
    total = np.zeros(n)
    dep_terms = []
    for x, e1, e2, part in terms:
        if x.dep is None:
            total += _term_energy(x.fixed, e1, e2, part)
        else:
            total += np.where(x.dep, 0.0, _term_energy(x.fixed, e1, e2, part))
            dep_terms.append((x, e1, e2, part))
    if not dep_terms:
        return total
    for lv in range(k, L):
        here = []
        for x, e1, e2, part in dep_terms:
            assert x.dep is not None  # the terms kept above depend on an order
            here.append((x, e1, e2, part, x.dep & (x.lstar == lv)))
        here = [h for h in here if h[4].any()]
        if not here:
            continue
        active = tt[:, lv] >= 2  # (n, D)
        best = np.full(n, np.inf)
        for z in range(D):
            if not active[:, z].any():
                continue
            e_z = np.zeros(n)
            for x, e1, e2, part, m in here:
                assert x.jr is not None and x.pref_rel is not None  # set with ``dep`` (`_X.of`)
                pref = t_all[:, lv] if x.jr[z] else x.pref_rel
                e_z += np.where(m, _term_energy(x.at(pref), e1, e2, part), 0.0)
            best = np.where(active[:, z], np.minimum(best, e_z), best)
        total += np.where(np.isfinite(best), best, 0.0)
    return total


def _open_energy(terms: list[tuple[_X, float, float, FloatArray | float]], z_possible: BoolArray,
                 none_possible: BoolArray, n: int, final: FloatArray | None = None) -> FloatArray:
    """Energy to add to the terms' order-free values, the open levels' innermost loop chosen
    jointly for every tensor.

    The open levels ``0 .. k-1`` form one loop nest above the known levels. Let ``z`` be its
    innermost active loop. A count of tensor ``t`` whose known levels hold no active jump
    loop of ``t`` has its J* among the open loops; if ``z`` is over a jump dim of ``t``, J*
    is ``z`` and every open loop is at or outside it, so the count is at least ``opened``
    (argument 1 of the module doc); otherwise at least its order-free value. One ``z``
    serves every tensor, so the least over the ``z`` that can be active (``z_possible``
    (n, D): the open temporal product of the dim can be >= 2) of the tensors' increases
    bounds the total increase; 0 where no open loop need be active (``none_possible``).
    The same relaxation as `_order_energy` (and as the traffic table's), on the open levels
    taken together. ``final`` (n, D), where given, is argument 10's increase for each ``z``
    (`_jstar_order_energy`, at least the one above)."""
    if final is not None:
        best = np.where(z_possible, final, np.inf).min(axis=1)
        return np.where(none_possible | ~np.isfinite(best), 0.0, best)
    # the increases summed per tensor (a tensor's jump dims are the same in all its terms)
    per: dict[bytes, tuple[BoolArray, FloatArray]] = {}
    for x, e1, e2, part in terms:
        if x.opened is None or x.jr_open is None or not x.jr_open.any() or x.level >= 0:
            continue
        d = _term_energy(x.opened, e1, e2, part) - _term_energy(x.fixed, e1, e2, part)
        key = x.jr_open.tobytes()
        per[key] = (x.jr_open, d if key not in per else per[key][1] + d)
    per = {key: (jr, np.maximum(d, 0.0)) for key, (jr, d) in per.items() if np.any(d > 0)}
    if not per:
        return np.zeros(n)
    # dims charging the same tensors give the same sum: one pass per such set of dims
    D = z_possible.shape[1]
    sets: dict[tuple[bytes, ...], list[int]] = {}
    for z in range(D):
        sets.setdefault(tuple(key for key, (jr, _) in per.items() if jr[z]), []).append(z)
    best = np.full(n, np.inf)
    for keys, zs in sets.items():
        can = z_possible[:, zs].any(axis=1)
        if not can.any():
            continue
        e_z = sum((per[key][1] for key in keys), np.zeros(n))
        best = np.where(can, np.minimum(best, e_z), best)
    return np.where(none_possible | ~np.isfinite(best), 0.0, best)


def _pass_union(bm: BoundModel, t: int, tc: FloatArray, ext: FloatArray, n_lo: FloatArray, act: FloatArray,
                u0: FloatArray, jot: FloatArray) -> _PassU:
    """`_PassU` of tensor ``t`` (a sliding tensor whose coordinates use disjoint dims) at the
    tile ``tc`` (n, D) of its level, ``ext`` (n, D) the known loops above it per dim (every
    loop of the known levels: J* is open) and ``n_lo`` (n, D) a lower bound of the bound of
    each dim's innermost open loop where it is active, ``act`` (n, D) one of its whole open
    temporal product (argument 10 of the module doc, the passes inside J*). Each coordinate's range is 5b's: ``span + sum_d (e_d - 1) min(a_d T_d, span)`` with
    ``e_d`` the loops over ``d`` inside, ``ext_d`` or ``ext_d n_lo_d``."""
    rest = np.ones(len(tc))
    coords = []
    sl = set(bm.sliding[t])
    for ci, (dims, a) in enumerate(bm.coords[t]):
        span = _span(dims, a, tc)
        step = np.minimum(a[None, :] * tc[:, dims], span[:, None])
        e = ext[:, dims]
        rng0 = span + ((e - 1.0) * step).sum(axis=1)
        if ci in sl:
            coords.append((rng0, tuple(int(d) for d in dims), e * (n_lo[:, dims] - 1.0) * step, span))
        else:
            rest = rest * rng0
    return _PassU(u0=u0, st=_footprint(bm, t, tc), rest=rest, coords=tuple(coords), act=act, n_lo=n_lo, jot=jot)


def _pass_lift(pu: _PassU, inside: list[int] | set[int], rows: IntArray | None) -> FloatArray:
    """(n,) the union ``U(S)`` of the tiles that the known loops and the innermost open loops
    of the dims ``inside`` (``S``) visit, over ``pu.u0`` (argument 10's passes inside J*, module
    doc), on ``rows`` (all if None): a count whose J* has ``S`` inside is at least its ``free``
    times this and the charge of the dims outside J* (argument 1 with 5's union)."""
    sel = slice(None) if rows is None else rows
    U = pu.rest[sel]
    for rng0, dims, inc, _ in pu.coords:
        r = rng0[sel]
        for j, d in enumerate(dims):
            if d in inside:
                r = r + inc[sel, j]
        U = U * r
    return U / pu.u0[sel]


def _pass_floor(pu: _PassU, inside: set[int], dl: int, rows: IntArray | None) -> FloatArray:
    """(n,) argument 5b at the innermost open loop ``j`` of dim ``dl`` (active), with the dims
    ``inside`` (``S_l``) inside it, over ``pu.u0`` and per unit of the open temporal products of
    the dims outside it other than ``dl`` (argument 10's passes inside J*, module doc): eq. D's
    terms of the loops inside ``j`` are ``P_j`` times the pass inside ``j``, at least ``U(S_l) -
    S_c`` new words, and ``j``'s own steps, ``P_j (1 - 1/n_j)`` of them, each return that pass to
    its first tile, at least the words of the first tile not in the last (``S_c - prod_h max(2
    span_h - r_h, 0)``: the pass moves each sliding coordinate by at least its range ``r_h``
    less its span); ``P_j`` at least ``dl``'s open temporal product where active (``pu.act``) and
    ``n_j`` at least ``pu.n_lo``. On ``rows`` (all if None)."""
    sel = slice(None) if rows is None else rows
    U = pu.rest[sel]
    back = pu.rest[sel]  # the words the first tile of the pass shares with its last
    for rng0, dims, inc, span in pu.coords:
        r = rng0[sel]
        for j, d in enumerate(dims):
            if d in inside:
                r = r + inc[sel, j]
        U = U * r
        back = back * np.maximum(2.0 * span[sel] - r, 0.0)
    st = pu.st[sel]
    ret = (1.0 - 1.0 / pu.n_lo[sel, dl]) * np.maximum(st - back, 0.0)
    return pu.act[sel, dl] * (np.maximum(U - st, 0.0) + ret) / pu.u0[sel]


def _pass_first(pu: _PassU, rows: IntArray | None) -> FloatArray:
    """(n,) the first tile of every instance that a count's ``free`` (over ``pu.u0``) stands
    for: ``free`` counts the open jump products (``omin``, spatial and temporal) and every
    instance of the known levels, and each instance of ``c`` (or each distinct group its
    parent reads for) takes its first tile whole (eq. D's ``|tile|``), so the term ``S_c``
    of 5b is ``free S_c / (u0 jot)``."""
    sel = slice(None) if rows is None else rows
    return pu.st[sel] / (pu.u0[sel] * pu.jot[sel])


def _jstar_order_energy(terms: list[tuple[_X, float, float, FloatArray | float]], mt: FloatArray,
                        candidates: BoolArray, n: int) -> FloatArray | None:
    """Argument 10 of the module doc: the increase of the counts into known levels whose J*
    is among the open loops, given the innermost active open loop ``z``, with the order of
    every dim's innermost open loop chosen once for every tensor.

    Order the dims by the position of their innermost open loop (the dims without an active
    open loop first). A tensor's J* is then its last jump dim in that order, and every open
    loop of a dim placed before it is outside J*, so each count is at least ``free`` times
    the least open temporal product ``mt`` (n, D) of each such dim it does not jump over
    (and at least its order-free value). The least over the orders is found by a shortest
    path over the sets of dims placed, innermost first: adding dim ``d`` to the inner set
    ``S`` charges every tensor that jumps over ``d`` and over no dim of ``S`` (``d`` is its
    J*) for the dims outside ``S``. The first dim placed is ``z``: a tensor jumping over it
    pays at least ``opened`` (argument 8). Returns (n, D): the least increase over the
    orders whose innermost dim is ``z``, for the dims in ``candidates`` (D,) (those that can
    carry an active open loop on some row; 0 for the others), or None where no row has two
    tensors that can rise and do not jump over a same dim (argument 8 then gives as much,
    at less cost) and no sliding tensor's count has its J* open. Argument 10b: a sliding
    tensor's counts (``pass_``) also pay the union of the tiles inside J* (`_pass_lift`), and
    the path's state keeps, for one such tensor, the first dim it does not index placed
    before its J* with the dims inside that dim, so that its J* charge also takes argument 5b
    at that dim's innermost open loop (`_pass_floor`, `_pass_first`). With ``_JSTAR_ENGINE =
    "cpu"`` the charges and the path run compiled (`_jstar_kernel`: the same operations in the
    same order, so the same values bit for bit); ``charge`` and ``least`` below are the
    reference."""
    groups: dict[bytes, list[tuple[_X, float, float, FloatArray | float]]] = {}
    for x, e1, e2, part in terms:
        if x.free is None or x.opened is None or x.jr_open is None or x.level >= 0 or not x.jr_open.any():
            continue
        groups.setdefault(x.jr_open.tobytes(), []).append((x, e1, e2, part))
    D = mt.shape[1]
    cd = np.flatnonzero(candidates).tolist()
    # after the innermost dim z, the tensors jumping over z are charged in full and a single
    # other tensor escapes (its dims outside J* can all follow z): the path adds to argument 8
    # only where two tensors do not jump over z (never for a GEMM or a 1x1 convolution, whose
    # dims each index two of the three tensors)
    jumps = [grp[0][0].jr_open for grp in groups.values()]
    two_free = [z for z in cd if sum(1 for jr in jumps if jr is not None and not jr[z]) >= 2]
    # a sliding tensor with its J* open pays for the passes inside J* (`_pass_lift`) in every
    # order: then the path can add to argument 8 even for one tensor
    passes = [x.free > 0 for grp in groups.values() for x, _, _, _ in grp if x.pass_ is not None and x.free is not None]
    if not two_free and not passes:
        return None
    m = len(cd)
    bit = {d: 1 << i for i, d in enumerate(cd)}
    full = (1 << m) - 1
    # per tensor: its jump dims (a mask over cd), the dims of cd it does not jump over, and its
    # counts as (free, fixed, opened, e1, e2, part)
    info: list[tuple[int, list[int], list[tuple[FloatArray, FloatArray, FloatArray, float, float,
                                                FloatArray | float, _PassU | None]]]] = []
    for terms_t in groups.values():
        jr = terms_t[0][0].jr_open
        assert jr is not None
        counts = []
        for x, e1, e2, part in terms_t:
            assert x.free is not None and x.opened is not None
            counts.append((x.free if x.pass_ is None else x.free * x.pass_sf, x.fixed, x.opened, e1, e2, part,
                           x.pass_))
        info.append((sum(bit[d] for d in cd if jr[d]), [d for d in cd if not jr[d]], counts))

    def charge(i: int, out: int, rows: IntArray | None, with_opened: bool = False,
               anchor: tuple[int, int] | None = None) -> FloatArray:
        """The increase of tensor i's counts (on ``rows``, all if None) with the dims of
        ``out`` (a mask over cd) outside J*; with ``with_opened``, at least ``opened``.
        A sliding count (``pu``) is at least ``free`` times the union of the tiles the loops
        inside J* visit (`_pass_lift`), and with ``anchor = (S_l, l)`` (a dim ``l`` the tensor
        does not index inside J*, the dims of ``S_l`` inside l and every other dim outside it)
        also at least argument 5b at l's innermost open loop: ``free`` times l's open temporal
        product where active (``pu.act``), the least open temporal product of every other dim
        outside l that the tensor does not jump over, and the new words of the pass inside l,
        ``U(S_l) - S_c`` (over ``u0``, as ``free`` has it)."""
        _, nj, counts = info[i]
        mt_r = mt if rows is None else mt[rows]
        mult = np.ones(len(mt_r))
        for d in nj:
            if out & bit[d]:
                mult = mult * mt_r[:, d]
        inside = {d for d in cd if not out & bit[d]}
        lifts: dict[int, FloatArray] = {}  # the counts of one (tensor, level) share their union
        if anchor is not None:
            s_l, d_l = anchor
            mult_l = np.ones(len(mt_r))
            for d in nj:
                if d != d_l and not s_l & bit[d]:
                    mult_l = mult_l * mt_r[:, d]
            inside_l = {d for d in cd if s_l & bit[d]}
        e = np.zeros(len(mt_r))
        for free, fixed, opened, e1, e2, part, pu in counts:
            if rows is not None:
                free, fixed, opened = free[rows], fixed[rows], opened[rows]
                part = part[rows] if isinstance(part, np.ndarray) else part
            if pu is not None:
                lift = lifts.get(id(pu))
                if lift is None:
                    lift = mult * _pass_lift(pu, inside, rows)
                    if anchor is not None:
                        lift = np.maximum(lift, mult_l * _pass_floor(pu, inside_l, d_l, rows) + _pass_first(pu, rows))
                    lifts[id(pu)] = lift
                x = np.maximum(free * lift, fixed)
            else:
                x = np.maximum(free * mult, fixed)
            if with_opened:
                x = np.maximum(x, opened)
            e = e + _term_energy(x, e1, e2, part) - _term_energy(fixed, e1, e2, part)
        return np.maximum(e, 0.0)

    # the innermost dim z: every tensor jumping over it has z as J*, every open loop outside
    flat = None
    if sw._JSTAR_ENGINE == "cpu":
        from accelmap.costmodels import _jstar_kernel as jk

        flat = jk.flatten(info, cd, n, D)
        q_full = np.array([[i, full, 0, -1] for i in range(len(info))], dtype=np.int64).reshape(len(info), 4)
        full_inc = list(jk.charges(q_full, True, mt, cd, flat).T)
    else:
        full_inc = [charge(i, full, None, True) for i in range(len(info))]
    # and only on the rows where two tensors that can rise do not jump over some such z
    rising = [v > 0 for v in full_inc]
    two = np.zeros(n, dtype=bool)
    for z in two_free:
        two |= sum((r & (not (jmask & bit[z]))).astype(np.int64) for r, (jmask, _, _) in zip(rising, info, strict=True)) >= 2
    for p in passes:
        two |= p
    rows = np.flatnonzero(two)
    if len(rows) == 0:
        return None
    out = np.zeros((n, D))
    for z in cd:
        for i, (jmask, _, _) in enumerate(info):
            if jmask & bit[z]:
                out[:, z] += full_inc[i]
    # argument 10's passes inside J*, one sliding tensor ``ip`` (the first with a dim ``l`` it does
    # not index among cd): the first such dim placed before its J* anchors the path, ``(S_l, l)``
    # with ``S_l`` the dims inside l, and its J* charge takes argument 5b at l's innermost open
    # loop as well (`charge` with ``anchor``)
    ip, irr = -1, 0
    for i, (_, nj, counts) in enumerate(info):
        pus = [pu for *_, pu in counts if pu is not None]
        if pus:
            sliding = {d for _, dims, _, _ in pus[0].coords for d in dims}
            irr = sum(bit[d] for d in nj if d not in sliding)
            if irr:
                ip = i
                break
    cache: dict[tuple[Any, ...], FloatArray] = {}

    memo: dict[tuple[int, tuple[int, int] | None], FloatArray] = {}
    zero = np.zeros(len(rows))
    jm_ip = info[ip][0] if ip >= 0 else 0

    def least(S: int, anc: tuple[int, int] | None) -> FloatArray:
        """The least charge of ordering the dims outside ``S`` (placed innermost first)."""
        if S == full:
            return zero
        got = memo.get((S, anc))
        if got is not None:
            return got
        best = None
        for d in cd:
            b = bit[d]
            if S & b:
                continue
            nxt = anc
            if ip >= 0 and anc is None and irr & b and not jm_ip & S:
                nxt = (S, d)  # the first dim ip does not index, inside its J*
            if jm_ip & b:
                nxt = None
            val = least(S | b, nxt)
            for i, (jmask, _, _) in enumerate(info):
                if jmask & b and not jmask & S:
                    if i == ip and anc is not None:
                        key: tuple[Any, ...] = (i, full & ~S, anc)
                        got = cache.get(key)
                        if got is None:
                            cache[key] = got = charge(i, full & ~S, rows, anchor=anc)
                    else:
                        key = (i, full & ~S)
                        got = cache.get(key)
                        if got is None:
                            cache[key] = got = charge(i, full & ~S, rows)
                    val = val + got
            best = val if best is None else np.minimum(best, val)
        assert best is not None
        memo[(S, anc)] = best
        return best

    if flat is not None:
        program = jk.path_program(m, tuple(jmask for jmask, _, _ in info), ip, irr, jk.pass_masks(flat))
        paths = jk.least_paths(rows, program, mt, cd, flat)
        for zi, z in enumerate(cd):
            out[rows, z] += paths[:, zi]
        return out
    for z in cd:
        out[rows, z] += least(bit[z], (0, z) if ip >= 0 and irr & bit[z] else None)
    return out


def _loomis_whitney_ok(bm: BoundModel) -> bool:
    """Argument 11 as first written applies (argument 12's `_region_forms` covers it and
    more): three unpadded tensors, each coordinate one dim, every dim that
    moves indexing exactly two of them (a GEMM, a 1x1 convolution, a fully connected layer)."""
    if bm.T != 3 or not all(bm.disjoint) or not np.all(bm.exist == 1.0):
        return False
    seen = np.zeros(bm.D, dtype=np.int64)
    for t in range(3):
        for dims, _ in bm.coords[t]:
            if len(dims) != 1:
                return False
            seen[int(dims[0])] += 1
    return bool(np.all((seen == 0) | (seen == 2)))


def _capacity_energy(bm: BoundModel, terms: list[tuple[_X, float, float, FloatArray | float]],
                     at: dict[tuple[str, int, int], int], used: FloatArray, macs: FloatArray, share: Any,
                     k: int, n: int, tile: FloatArray | None = None) -> FloatArray | None:
    """Argument 11 of the module doc: a lower bound of the whole energy from the words that a
    region of small buffers (levels ``c0 .. L-1`` under one instance of ``c0``) must take in
    to do its MACs; None where it does not apply.

    ``terms`` and ``at`` as `partial_bounds` builds them (``at`` finds the parent reads of
    each pair by its child and the fills of each level); ``used`` (n, L) the fixed spatial
    products; ``macs`` (n,) the (padded) MACs; ``share(t, p, c)`` (n,) a lower bound of the
    parent reads of ``p`` per word delivered into ``c`` (eq. S's multicast share). For every
    ``c0`` and every set of two or three tensors kept in the region, the bound of the module
    doc, with argument 12's forms (``bm.region_forms``: a window's ``F`` slices and the
    pairs of tensors that fix a MAC); returns the largest (n,), to be taken as a maximum with
    the other bound. ``tile`` (n, L + 1, D): the tiles of the known levels ``>= k``, whose
    held words are their footprints (at most the capacity)."""
    forms = bm.region_forms
    if forms is None or (forms.slices is None and not forms.pairs):
        return None
    L = bm.L
    fixed_e = [_term_energy(x.fixed, e1, e2, part) for x, e1, e2, part in terms]
    base = bm.mac_energy_pj + sum(fixed_e, np.zeros(n))
    best: FloatArray | None = None
    # (with _SHARE) each tensor's held cost per (t, p, c) and each known tile's footprint made
    # once per call: regions of different tops c0 share them (nothing writes into them)
    held_of: dict[tuple[int, int, int], tuple[Any, Any, Any, int]] = {}
    fp_of: dict[tuple[int, int], FloatArray] = {}

    def footprint(t: int, c: int) -> FloatArray:
        got = fp_of.get((t, c)) if sw._SHARE else None
        if got is None:
            assert tile is not None
            got = fp_of[(t, c)] = _footprint(bm, t, tile[:, c])
        return got

    for c0 in range(1, min(L, k)):  # a region whose top level is open (below k every tile is known)
        held = {}  # tensor -> (its cost per word delivered into the region, kappa, charged energy, level)
        for t in range(3):
            kept = [lv for lv in range(c0, L) if bm.keep[lv, t]]
            above = [lv for lv in range(c0) if bm.keep[lv, t]]
            if not kept or not above or not np.isfinite(bm.capacity[kept[0]]):
                continue
            p, c = above[-1], kept[0]
            got = held_of.get((t, p, c)) if sw._SHARE else None
            if got is None:
                ir, iff = at[("r", t, c)], at[("f", t, c)]
                _, e1r, e2r, part_r = terms[ir]
                _, e1f, e2f, part_f = terms[iff]
                # g(x) = e1 x + e2 (x - part)^+ >= (e1 + e2) x - e2 part, and the reads are >= share x
                got = held_of[(t, p, c)] = ((e1f + e2f) + share(t, p, c) * (e1r + e2r), e2f * part_f + e2r * part_r,
                                            fixed_e[ir] + fixed_e[iff], c)
            held[t] = got
        if len(held) < 2:
            continue
        inst = _prod(used[:, :c0], 1)
        v = macs / inst  # the MACs of one region
        sets = [tuple(held)] if len(held) == 3 and forms.slices is not None else []
        sets += [s for s in forms.pairs if s[0] in held and s[1] in held]
        for ts in sets:
            m = len(ts)
            cost = [held[t][0] for t in ts]
            kappa = sum((held[t][1] for t in ts), np.zeros(n))
            have = sum((held[t][2] for t in ts), np.zeros(n))
            # the cost of the words held at once: the tensors of one level share its capacity,
            # so sum_t c_t S_t <= sum over levels of the capacity (times the level's instances in
            # the region) times the dearest c_t kept there
            k0 = np.zeros(n)
            for c in sorted({held[t][3] for t in ts}):
                if c >= k and tile is not None:
                    # a known level holds its tiles: each tensor's footprint at its own cost
                    dear = sum((held[t][0] * footprint(t, c) for t in ts if held[t][3] == c), np.zeros(n))
                    room = np.minimum(dear, float(bm.capacity[c]) * np.max(
                        [held[t][0] for t in ts if held[t][3] == c], axis=0))
                else:
                    room = float(bm.capacity[c]) * np.max([held[t][0] for t in ts if held[t][3] == c], axis=0)
                k0 = k0 + room * _prod(used[:, c0:c], 1)
            prod_c = cost[0] * cost[1] * (cost[2] if m == 3 else 1.0)
            pos = (k0 > 0.0) & (prod_c > 0.0)
            k0s = np.where(pos, k0, 1.0)
            c_max = np.max(cost, axis=0)
            if sw._SHARE:  # the loop below with its three segments as the rows of one (3, n) pass
                bk = (1.0 + _SEGMENTS) * k0s
                most = (bk / m) ** m / np.where(pos, prod_c, 1.0)
                if m == 3:
                    assert forms.slices is not None
                    most = np.sqrt(forms.slices * most)
                    for i, j in forms.pairs:
                        most = np.minimum(most, (bk / 2) ** 2 / np.where(pos, cost[ts.index(i)] * cost[ts.index(j)],
                                                                         1.0))
                w = np.where(pos, np.maximum(_SEGMENTS * k0s - c_max, 0.0) * (v / most - 1.0), 0.0)
                words = np.maximum(np.maximum(np.maximum(np.zeros(n), w[0]), w[1]), w[2])
            else:
                words = np.zeros(n)
            # segments of cost b k0 (the best b: 2 for three tensors, 1 for two), one at a time
            for b in () if sw._SHARE else (1.0, 2.0, 4.0):
                # the most MACs a segment can do: ((1 + b) k0 / m)^m / prod c, square-rooted for three
                most = ((1.0 + b) * k0s / m) ** m / np.where(pos, prod_c, 1.0)
                if m == 3:
                    # argument 12: F slices (F = 1 without a window), and each pair of tensors
                    # that fixes a MAC within the same budget
                    assert forms.slices is not None
                    most = np.sqrt(forms.slices * most)
                    for i, j in forms.pairs:
                        most = np.minimum(most, ((1.0 + b) * k0s / 2) ** 2
                                          / np.where(pos, cost[ts.index(i)] * cost[ts.index(j)], 1.0))
                words = np.maximum(words, np.where(pos, np.maximum(b * k0s - c_max, 0.0) * (v / most - 1.0), 0.0))
            alt = base + np.maximum(inst * words - kappa - have, 0.0)
            best = alt if best is None else np.maximum(best, alt)
    return best

def _coupled_open_energy(terms: list[tuple[_X, float, float, FloatArray | float]], allowed_of: Any,
                         none_possible: BoolArray, k: int, n: int,
                         final: FloatArray | None = None) -> FloatArray | None:
    """Energy to add to the terms' order-free values, the innermost loop of every open level
    chosen jointly (argument 9 of the module doc): a shortest path down the open levels.

    ``allowed_of()`` gives (k, n, D): whether level ``l``'s innermost active loop can be over dim ``d``
    (its open temporal product can reach 2, and the tiles of the levels ``0 .. l`` still fit
    with that dim's extent doubled). The state after levels ``0 .. c-1`` is the innermost
    active loop above level ``c`` (or none): each level either has no active loop (the
    state stays) or sets it to an allowed dim. A count into level ``c`` (``x.level == c``;
    ``-1``: a known level, read after level ``k-1``) is raised to ``opened`` where the state
    is one of its jump dims. The least over the final states (none only where every open
    temporal product can be 1) bounds the increase. Returns None where no count into an open
    level can rise (`_open_energy` then gives the same, at less cost). ``final`` (n, D), where
    given, raises the counts into known levels for the last state (argument 10,
    `_jstar_order_energy`)."""
    if not any(x.opened is not None and x.level >= 0 for x, _, _, _ in terms):
        return None
    D = len(next(x.jr_open for x, _, _, _ in terms if x.jr_open is not None))
    inc = np.zeros((k + 1, n, D))  # inc[c][:, z]: the increase of the counts read at boundary c
    any_inc = False
    for x, e1, e2, part in terms:
        if x.opened is None or x.jr_open is None or not x.jr_open.any():
            continue
        c = k if x.level < 0 else x.level
        d = np.maximum(_term_energy(x.opened, e1, e2, part) - _term_energy(x.fixed, e1, e2, part), 0.0)
        if not np.any(d > 0):
            continue
        inc[c][:, x.jr_open] += d[:, None]
        any_inc |= c < k
    if not any_inc:
        return None
    allowed = allowed_of()
    cost = np.full((n, D), np.inf)  # the innermost active loop so far is over dim z
    cost_none = np.zeros(n)  # no active loop so far
    for lv in range(k):
        if lv > 0:
            cost = cost + inc[lv]
        best = np.minimum(cost.min(axis=1), cost_none)
        cost = np.where(allowed[lv], np.minimum(cost, best[:, None]), cost)
    cost = cost + (inc[k] if final is None else np.maximum(inc[k], final))
    out = np.where(none_possible, np.minimum(cost.min(axis=1), cost_none), cost.min(axis=1))
    return np.where(np.isfinite(out), out, 0.0)


def _pass_geometry(bm: BoundModel, t: int, tc: FloatArray) -> tuple[FloatArray, list[FloatArray], list[FloatArray],
                                                                     dict[int, tuple[int, int]]]:
    """What arguments 5b-5c need of tensor ``t``'s tile ``tc`` (n, D) at the count's level: its
    footprint ``S``, each coordinate's span, the rows one step of a loop over each of the
    coordinate's dims adds to its range (its stride is at least ``a_d T_d``, and a step past the
    span adds at most the span), and each dim's (coordinate, position) in ``t``'s coordinates."""
    S = _footprint(bm, t, tc)
    spans = [_span(dims, a, tc) for dims, a in bm.coords[t]]
    step = [np.minimum(a[None, :] * tc[:, dims], sp[:, None]) for (dims, a), sp in zip(bm.coords[t], spans,
                                                                                      strict=True)]
    coord_of = {int(d): (ci, i) for ci, (dims, _) in enumerate(bm.coords[t]) for i, d in enumerate(dims.tolist())}
    return S, spans, step, coord_of


def _union_without(d: int, nj: FloatArray, ext: FloatArray, rng_: list[FloatArray], u_all: FloatArray,
                   step: list[FloatArray], coord_of: dict[int, tuple[int, int]]) -> FloatArray:
    """``U_j`` of arguments 5b-5c for the loop ``j`` over dim ``d`` of ``nj`` iterations: the
    union of the tiles the loops inside it visit. ``j``'s own steps leave the union, so its
    dim's extent is taken without ``j``; a dim ``t`` does not index leaves it as it is."""
    if d not in coord_of:
        return u_all
    ci, i = coord_of[d]
    less = rng_[ci] - (ext[:, d] - ext[:, d] / nj) * step[ci][:, i]
    return u_all / rng_[ci] * less


def _outer_pass(bm: BoundModel, t: int, c: int, k: int, tile: FloatArray, tt: FloatArray, t_all: FloatArray,
                used: FloatArray, omin: FloatArray) -> FloatArray | None:
    """Argument 5b of the module doc: X(c) of tensor ``t`` into the known level ``c > k`` is
    at least ``inst_c (S + P_j (U_j - S))`` for the outermost active loop ``j`` of any known
    level ``lv < c``, the least over the level's active loops (its order open); returns the
    largest over the levels (None where ``t``'s coordinates share dims). Inputs as in
    `partial_bounds`: ``tile`` (n, L+1, D), ``tt`` (n, L, D) temporal factors, ``t_all`` and
    ``used`` (n, L) temporal and spatial products per level, ``omin`` (n, D)."""
    levels = _outer_pass_levels(bm, t, c, k, tile, tt, t_all, used, omin)
    if levels is None:
        return None
    best = None
    for _, V, none in levels:  # inst * min_j val_j == min_j (inst * val_j): rounding is monotone
        low = V.min(axis=1)
        got = np.where(np.isfinite(low), low, none)
        best = got if best is None else np.maximum(best, got)
    return best


def _next_level_pass(bm: BoundModel, t: int, c: int, k: int, tile: FloatArray, tt: FloatArray, used: FloatArray,
                     omin: FloatArray, omax: FloatArray, nxt_t: FloatArray, s_next: FloatArray,
                     s_out: FloatArray) -> FloatArray | None:
    """Argument 5c of the module doc: argument 5b at the open level ``k-1`` whose temporal
    factors ``nxt_t`` (n, D) are chosen for some dims (1 for the others): X(c) of tensor ``t``
    into the known level ``c >= k`` is at least ``inst_c (S + P_j (U_j - S))`` for the
    outermost active loop ``j`` of level ``k-1``, the least over the level's chosen active
    loops and, where a dim not chosen may still have an active loop there, over ``n_j = 2``
    with the union of every chosen loop. ``s_next`` (n, D) the fixed spatial factors of level
    ``k-1`` (ones where open), ``s_out`` (n, D) those of every open level; other inputs as
    `_outer_pass`. None where ``t``'s coordinates share dims or no loop of ``k-1`` can be
    active."""
    if not bm.disjoint[t] or k < 1 or c < k:
        return None
    act = nxt_t >= 2.0
    more = ((nxt_t < 2.0) & (omax / s_out >= 2.0)).any(axis=1)  # a dim not (yet) chosen may be active
    if not act.any() and not more.any():
        return None
    n, D = nxt_t.shape
    S, spans, step, coord_of = _pass_geometry(bm, t, tile[:, c])
    # the loops of the levels k-1 .. c-1 per dim (k-1: the chosen ones; a loop not chosen
    # only adds to the union or to the loops outside j, so leaving it out lowers the bound)
    ext = _prod(tt[:, k:c], 1) * nxt_t if c > k else nxt_t.copy()
    # P_j inst_c >= n_j times, per dim, the factors of the levels above k-1 and level k-1's
    # spatial ones: a chosen dim's open product over its chosen temporal factor, any other
    # dim's fixed spatial factor at k-1 (at least 1)
    po = _prod(np.where(act, omin / nxt_t, s_next), 1)
    inst = _prod(used[:, k:c], 1)
    rng_ = [sp + ((ext[:, dims] - 1.0) * st).sum(axis=1)
            for (dims, _), sp, st in zip(bm.coords[t], spans, step, strict=True)]
    u_all = _prod(np.stack(rng_, axis=1), 1) if rng_ else np.ones(n)
    low = np.where(more, S + po * 2.0 * np.maximum(u_all - S, 0.0), np.inf)
    for d in range(D):
        if not act[:, d].any():
            continue
        nj = nxt_t[:, d]
        u_j = _union_without(d, nj, ext, rng_, u_all, step, coord_of)
        val = S + po * nj * np.maximum(u_j - S, 0.0)
        low = np.where(act[:, d], np.minimum(low, val), low)
    return inst * np.where(np.isfinite(low), low, S)


def _outer_pass_levels(bm: BoundModel, t: int, c: int, k: int, tile: FloatArray, tt: FloatArray,
                       t_all: FloatArray, used: FloatArray, omin: FloatArray) -> list[tuple[int, FloatArray, FloatArray]] | None:
    """Argument 5b per loop (argument 13 of the module doc): for each known level ``lv``
    (``k <= lv < c``) where some row has an active loop, ``(lv, V, none)`` with ``V`` (n, D)
    the bound ``inst_c (S + P_j (U_j - S))`` of X(c) of tensor ``t`` when the outermost active
    loop of ``lv`` is over dim ``j`` (``inf`` where ``j`` is not active) and ``none`` (n,) the
    bound where no loop of ``lv`` is active (``inst_c S``). `_outer_pass` is, bit for bit, the
    largest over the levels of the least over each row's active ``j`` (``none`` where there is
    none). None where ``t``'s coordinates share dims."""
    if not bm.disjoint[t] or c <= k:
        return None
    n, D = tt.shape[0], tt.shape[2]
    S, spans, step, coord_of = _pass_geometry(bm, t, tile[:, c])
    inst = _prod(used[:, k:c], 1)
    po = _prod(omin, 1)
    ext = np.ones((n, D))
    out = []
    for lv in range(c - 1, k - 1, -1):
        ext = ext * tt[:, lv]
        act = tt[:, lv] >= 2.0
        if not act.any():
            continue
        above = _prod(t_all[:, k:lv], 1)
        rng_ = [sp + ((ext[:, dims] - 1.0) * st).sum(axis=1)
                for (dims, _), sp, st in zip(bm.coords[t], spans, step, strict=True)]
        u_all = _prod(np.stack(rng_, axis=1), 1) if rng_ else np.ones(n)
        V = np.full((n, D), np.inf)
        for d in range(D):
            if not act[:, d].any():
                continue
            nj = tt[:, lv, d]
            u_j = _union_without(d, nj, ext, rng_, u_all, step, coord_of)
            val = S + po * above * nj * np.maximum(u_j - S, 0.0)
            V[:, d] = np.where(act[:, d], inst * val, np.inf)
        out.append((lv, V, inst * S))
    return out


def _pair_order_energy(terms: list[tuple[_X, float, float, FloatArray | float]],
                       passes: dict[int, tuple[list[tuple[int, FloatArray, FloatArray]], FloatArray | float, float,
                                               FloatArray]],
                       tt: FloatArray, t_all: FloatArray, k: int, L: int, n: int,
                       order_pos: IntArray | None, order_fixed: BoolArray | None) -> FloatArray | None:
    """Argument 13 of the module doc: the energy of the terms with each known level's outermost
    active loop ``j`` and innermost active loop ``z`` chosen jointly for every tensor.

    ``passes`` maps a term's index to what argument 5b knows of it: the per-loop bounds of the
    delivery count it derives from (`_outer_pass_levels`), the count's scale (the parent's
    share, 1 for fills), its touched-words floor and its value before any floor (``A`` where
    its J* is fixed, the order-free value where it is not). Each term is charged at one *home*
    level per row (where its bound spreads most over the pairs); at every other level the
    least over the pairs is taken, as arguments 2 and 5b do. The pairs are searched only on
    the rows where two or more terms spread at the same home level (elsewhere the least of
    the sum is the sum of the least values). Returns the total energy of the terms (not an
    increase), or None where no term depends on a known level's order."""
    total = np.zeros(n)
    items = []  # (x, e1, e2, part, pass or None)
    for i, (x, e1, e2, part) in enumerate(terms):
        ps = passes.get(i)
        if x.dep is None and ps is None:
            total += _term_energy(x.fixed, e1, e2, part)
        else:
            items.append((x, e1, e2, part, ps))
    if not items:
        return None
    rows = np.arange(n)
    # per term: the least of each 5b level over its active loops, its spread over the pairs
    # per level (the home is where it is largest), and its least value (every level relaxed)
    spread = np.zeros((len(items), n, L))
    vmin: list[dict[int, FloatArray]] = []
    least: list[FloatArray] = []
    for ii, (x, e1, e2, part, ps) in enumerate(items):
        mins: dict[int, FloatArray] = {}
        if ps is not None:
            levels, scale, touched, raw = ps
            v_all = np.zeros(n)
            for lv, V, none in levels:
                lo_v = V.min(axis=1)
                fin = np.isfinite(lo_v)
                mins[lv] = np.where(fin, lo_v, none)
                v_all = np.maximum(v_all, mins[lv])
                hi_v = np.where(np.isfinite(V), V, -np.inf).max(axis=1)
                spread[ii, :, lv] += np.where(fin, hi_v - lo_v, 0.0) * scale * (e1 + e2)
            if x.dep is None:
                a_min = raw
            else:
                assert x.base is not None and x.pref_rel is not None  # set with ``dep`` (`_X.of`)
                a_min = np.where(x.dep, x.base * x.pref_rel, raw)
            cnt = np.maximum(np.maximum(np.maximum(a_min, touched), v_all) * scale, touched)
        else:
            assert x.dep is not None and x.pref_rel is not None  # an item without passes depends on an order
            cnt = np.where(x.dep, x.at(x.pref_rel), x.fixed)
        vmin.append(mins)
        least.append(_term_energy(cnt, e1, e2, part))
        total += least[-1]
        if x.dep is not None:
            assert x.lstar is not None and x.base is not None and x.pref_rel is not None  # set with ``dep``
            lst = np.where(x.dep, x.lstar, 0)
            gain = np.where(x.dep, x.base * (t_all[rows, lst] - x.pref_rel), 0.0) * x.scale * (e1 + e2)
            spread[ii, rows, lst] += gain
    home = k + spread[:, :, k:].argmax(axis=2)  # (items, n): each row's home level, k .. L-1
    for h in range(k, L):
        live = (home == h) & (spread[:, :, h] > 0.0)  # (items, n)
        R = np.flatnonzero(live.sum(axis=0) >= 2)
        if not len(R):
            continue
        mine = [ii for ii in range(len(items)) if live[ii, R].any()]
        r = len(R)
        act = tt[R, h] >= 2.0  # (r, D)
        dims = np.flatnonzero(act.any(axis=0))
        m = len(dims)
        a = act[:, dims]  # (r, m)
        nact = a.sum(axis=1)
        eye = np.eye(m, dtype=bool)[None]
        if order_fixed is not None and order_fixed[h]:
            assert order_pos is not None  # given with ``order_fixed`` (`partial_bounds`)
            pos = np.where(a, order_pos[R, h][:, dims], 0)
            jj = np.where(a, pos, np.iinfo(np.int64).max).argmin(axis=1)
            zz = np.where(a, pos, -1).argmax(axis=1)
            valid = np.zeros((r, m, m), dtype=bool)
            valid[np.arange(r), jj, zz] = True
        else:
            valid = a[:, :, None] & a[:, None, :] & (~eye | (nact == 1)[:, None, None])
        tth = tt[R, h][:, dims]  # (r, m)
        E = np.zeros((r, m, m))
        for ii in mine:
            x, e1, e2, part, ps = items[ii]
            sel = live[ii, R]  # (r,)
            # A: the count's value from its J* (argument 1), with the pair where J* is at h
            if x.dep is not None:
                assert x.jr is not None and x.pref_rel is not None and x.lstar is not None and x.base is not None
                jr = x.jr[dims]
                dep = x.dep[R]
                pref_rel = x.pref_rel[R][:, None, None]
                at_h = dep & (x.lstar[R] == h)
                pref = np.where(jr[None, None, :], t_all[R, h][:, None, None],
                                pref_rel * np.where(~jr[None, :, None] & ~eye, tth[:, :, None], 1.0))
                pref = np.where(at_h[:, None, None], pref, pref_rel)
                base = x.base[R][:, None, None]
            if ps is None:  # argument 2's count (`_X.at`) at each pair
                inner = _b3(x.lo if x.inner is None else x.inner, R)
                cnt = np.maximum(np.maximum(base * pref, inner) * _b3(x.scale, R), _b3(x.lo, R))
                cnt = np.where(dep[:, None, None], cnt, x.fixed[R][:, None, None])
            else:
                levels, scale, touched, raw = ps
                A = raw[R][:, None, None]
                if x.dep is not None:
                    A = np.where(dep[:, None, None], base * pref, A)
                V = np.zeros((r, 1, 1))
                for lv, Vl, _none in levels:
                    mn = vmin[ii][lv][R]
                    if lv == h:
                        Vh = Vl[R][:, dims]
                        Vh = np.where(np.isfinite(Vh), Vh, mn[:, None])
                        V = np.maximum(V, Vh[:, :, None])
                    else:
                        V = np.maximum(V, mn[:, None, None])
                cnt = np.maximum(np.maximum(np.maximum(A, touched), V) * _b3(scale, R), touched)
            e = _term_energy(cnt, e1, e2, _b3(part, R))
            E += np.where(sel[:, None, None], e - least[ii][R][:, None, None], 0.0)
        best = np.where(valid, E, np.inf).min(axis=(1, 2))
        total[R] += np.where(np.isfinite(best), np.maximum(best, 0.0), 0.0)
    return total
