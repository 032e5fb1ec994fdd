"""Admissible lower bounds of the ``loopnest`` model on partial mappings.

A *partial mapping* fixes, for one keep pattern, every factor (temporal, spatial X and Y) at
the levels ``k .. L-1`` (the inner levels) and leaves the outer levels ``0 .. k-1`` open:
what is known of them per dim is the range of the product of their factors over the
completions still allowed (``outer_min`` / ``outer_max``, and ``outer_tmin`` for the temporal
factors alone). Loop orders may be fixed at some levels (the exact mapper fixes them last).
:func:`partial_bounds` returns, for a batch of such partial mappings, a lower bound of the
energy and of the cycles that the model (`accelmap.costmodels.loopnest`) gives *any*
completion, and whether any completion can be legal.

Notation as in the model's docstring: ``F_c`` the words delivered into one instance of level
``c`` (eq. D), ``X(c) = inst[c] F_c`` the deliveries over all instances, ``S_c`` the tile's
footprint, ``n_j`` the bound of loop ``j``, ``G_{p,c} = prod_{l=p}^{c-1} distinct_l`` (eq. S).
For a tensor ``t`` a *jump dim* is the only moving dim of some coordinate of ``t`` (``K`` and
``C`` of a convolution's weights, say); the other coordinates slide (``stride*P + R``).

Why each bound holds, for every order of every loop:

1. **Jump loops reload the whole tile.** Let ``J*`` be the innermost active loop above ``c``
   over a jump dim of ``t``. For a loop ``j`` at or outside ``J*`` the step of eq. D moves a
   jump coordinate by at least its span: the loop's own stride is a positive multiple of the
   tile extent, and the inner loops of the same dim move back by strides that sum to less
   than it (each inner stride is at most half the next outer one); a loop over another dim
   moves that coordinate back by a whole inner stride. So ``Delta_j = S_c``, and summing the
   terms of eq. D up to ``J*`` (the prefix products telescope) gives
   ``F_c >= S_c prod_{j <= J*} n_j``; the loops inside ``J*`` add terms >= 0. This is
   equality for tensors without sliding coordinates.
2. **Orders are relaxed per level.** ``prod_{j <= J*} n_j`` is every loop of the levels
   above the level ``l*`` of ``J*``, times the loops of ``l*`` ordered before ``J*``; the
   fewest are the jump loops of ``t`` themselves (irrelevant loops placed innermost), unless
   the level's order is fixed. The outer levels' loops multiply, with their spatial
   factors, to the outer product of each dim, so the unknown split between temporal and
   spatial factors cancels in ``X(c)``.
3. **Unknown tiles are at least the known ones.** A tile of an outer level contains the tile
   of level ``k``: its footprint, and so the capacity it needs, is at least that of
   ``tile[k]``, and a jump coordinate's span over the tile times the number of tiles along
   it is at least the dim's whole (padded) extent.
4. **Multicast and reduction.** ``distinct_l`` is the product over coordinates of the number
   of distinct offsets, at least ``1 + sum_d (g_d - 1)`` over a coordinate's dims (a sumset
   of integer progressions; exact for one-dim coordinates); unknown levels count 1, and where a bound divides by
   the instances, the unknown levels' spatial factors of non-jump dims are bounded by their
   fanout.
5. **Every touched word is delivered.** For one instance, ``F_c`` is at least the words of
   the union of the tiles it visits: by induction over the loops from the innermost, a pass
   of loop ``j`` is ``n_j`` translates of the inner pass's union ``X``, and the step that eq.
   D charges ``Delta_j`` for compares two tiles of consecutive translates, so ``Delta_j >=
   S - |X & (X + v)|`` and the new words of each translate are paid for. Summed over the
   distinct instances (children with the same offsets share a tile sequence), deliveries and
   the parent's reads are at least the words any MAC touches, and, inside ``J*``, at least
   the union of the tiles the inner loops visit (a path that moves one coordinate at a time
   adds ``min(shift, span)`` new rows of the window per step).
   **5b. The loops outside a pass.** Eq. D is ``F_c = S + sum_j (prod_{i<j} n_i)(n_j - 1)
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
   **5c. The same at the open level just above the known ones** (`_next_level_pass`). Where
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
6. **Fixed spatial factors** (the exact mapper fixes every level's spatial factors before
   any temporal one). Each level's fanout holds the product of its fixed spatial factors,
   and an outer tile holds the fixed spatial factors of the levels between it and level
   ``k``. A dim's outer product is ``o_d = t_d s_d`` (temporal times spatial over the levels
   ``< k``), and the spatial products of all dims fit the fanouts, so for a set of dims
   ``prod t_d >= prod omin_d / (prod S_d * F_rem)``, with ``S_d`` the fixed spatial product
   of a dim (1 if open) and ``F_rem`` what the fanouts leave to the open dims. Spatial
   factors at levels above the reading level ``p`` make instances of ``p`` that read for
   themselves (``inst[p]`` of eq. S): they multiply the reads even over dims the tensor
   does not index; only those at ``p`` and below can multicast.
7. **Energy and cycles.** Energy charges ``ceil(count / block)`` accesses, at least
   ``count / block``; the output's first reads and fills (``part``) are subtracted with an
   upper bound of ``part``. Cycles are at least the temporal steps (every temporal factor
   of the known levels times the smallest outer temporal product) and at least the padded
   MACs over the most instances the partial mapping can use (at most the fanouts, and at
   most the product over dims of the largest spatial product each can still take), and at
   least every
   bandwidth-limited level's reads (writes) per instance over its read (write) bandwidth:
   the words of a level's counts above (order-free parts), over the most instances the
   level can have.
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
12. **A window, and any problem, in argument 11's region count** (`_region_forms`, used by
   `_capacity_energy`). Argument 11 needs ``|V|`` bounded by the word sets ``A_t`` of *any*
   set ``V`` of MACs (a segment's MACs are no tile). From the projections alone, two facts.
   *Pairs:* the words of tensors ``t1``, ``t2`` fix a MAC when every moving dim follows from
   them: a coordinate ``sum_d a_d x_d`` (``a_d >= 1``) whose dims are all known but one gives
   that one, repeated until nothing changes (a convolution's inputs and weights give ``K``,
   ``C``, ``R``, ``S`` and then ``P = (h - d R) / u``; inputs and outputs give ``R``; weights
   and outputs every dim; any stride ``u`` and dilation ``d``); then ``V -> A_t1 x A_t2`` is
   one-to-one and ``|V| <= |A_t1| |A_t2|``. *Slices:* let ``Sigma`` be a set of dims that are
   lone coordinates of one tensor ``tau`` (``R``, ``S`` of the weights) such that, with
   ``Sigma`` fixed, every coordinate of every tensor has at most one dim left and every dim
   left indexes exactly two of the three tensors. Split ``V`` by the values ``sigma`` of
   ``Sigma``: in a slice each tensor's word gives the dims it indexes (its coordinates less
   the fixed ``sigma`` terms; for the inputs ``(c, p u + r d, ...)`` with ``r`` fixed is one-to-one
   in ``(c, p, ...)``), so by Loomis-Whitney ``|V_sigma| <= sqrt(|A_1,sigma| |A_2,sigma|
   |A_3,sigma|)``; ``A_t,sigma`` lies in ``A_t``, and the slices of ``tau``'s words are
   disjoint (``sigma`` is part of its word), so by Cauchy-Schwarz over the ``F`` slices
   present ``|V| <= sqrt(prod_{t != tau} |A_t|) sum_sigma sqrt(|A_tau,sigma|) <= sqrt(F
   |A_1| |A_2| |A_3|)``, ``F`` at most the number of values of ``Sigma`` (``R S``; the least
   over ``tau`` and ``Sigma``; 1 with ``Sigma`` empty: argument 11's form). A depthwise layer's
   ``C`` indexes all three tensors, so it joins ``Sigma`` (``F = C R S``: its pairs decide); a
   reduction dim that only the weights index is a slice of theirs. So a segment whose words
   cost ``sum_t w_t |A_t| <= K`` does at most ``min(sqrt(F (K/3)^3 / prod w_t), (K/2)^2 /
   (w_i w_j))`` MACs with all three tensors (the pairs that fix a MAC, within the same budget),
   and ``(K/2)^2 / (w_i w_j)`` with a pair alone: argument 11's count with these in place of
   its own. Padded words (halos, imperfect factorization: ``exist < 1``) are words of the
   padded iteration space like any other, and the model scales every count of a padded
   tensor by its ``exist`` share, which each ``w_t`` carries (the terms' energies): so the
   count holds for them too. The held words: a known level (``c >= k``) of the region holds
   its tile, so each tensor kept there holds at most the tile's footprint per instance, each
   word at its own ``w_t`` (the least of that sum and the capacity times the dearest ``w_t``
   enters ``K0``). Each form is tight on some set of MACs (a one-channel 1-D
   window reaches ``sqrt(F ...)`` within 1.5%); the segment count around them is not (the
   node test passes with ``F`` 3x too small, fails 9x too small).
   *On trial in the exact searcher* (`BoundModel.region_trial`): where the region count lifts
   no node it costs about a third of a node's bound (simba-like layers, depthwise layers), so
   the exact searcher drops it for a keep pattern once its first 256 bound calls there have
   lifted no node above the other terms. Dropping a term only lowers a bound, so what it
   proves is proven and what it certifies stays a lower bound; only the speed depends on it.
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
   level's sum only. A level whose order is fixed (the order search, `exact._solve_orders`)
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

*Staged bounds* (`BoundCut`, `partial_bounds`' ``cutoff``, ``_STAGED``; how the bound is made
cheap, not an argument). A search cuts a node once its objective bound reaches the incumbent's,
so the arguments that cost most per row (10, 11, 13, 14c-d, 15b, 16 and 17) are wasted on the
rows the others already cut. Given the cut-off, every row is bounded first without them (the
same cycles bound: none of them enters it), and only the rows still below the cut-off are bounded
again with them; argument 17's least is computed only up to the energy at which each row is cut
(``min(least, limit)``: below it the same value, at it a value that still cuts the row). Each
stage's value is a bound, and a row below the cut-off gets exactly its full bound (argument 10's
candidate dims are then taken from the whole batch, ``open_dims``), so the search cuts the same
nodes, and the order and certificate read the same bounds of the nodes it keeps
(``tests/unit/search/test_exact_staged.py``), but for the exact searcher's trials of arguments
11-13 (``region_trial``, ``pair_trial``), which now see only the rows below the cut-off: they may
drop a region count or pair term at another call than without the stages.

The bounds are property-tested against the model on sampled mappings, and the exact mapper
that uses them against exhaustive enumeration (``tests/unit/search/test_exact.py``).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels._bounds_kernel import feasible_rows, tables_of
from accelmap.workloads.problem import Problem

__all__ = ["BoundCut", "BoundModel", "TrafficTable", "dram_order_deliveries", "dram_order_table", "partial_bounds", "traffic_table"]

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
_SEGMENTS = np.array([[1.0], [2.0], [4.0]])  # argument 11's segment costs b (times k0), one row each
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


@dataclass(frozen=True, slots=True, eq=False)
class BoundModel:
    """What the bounds need of one (problem, arch, keep pattern), computed once."""

    L: int
    D: int
    T: int
    keep: BoolArray  # (L, T)
    pairs: tuple[tuple[int, int, int], ...]  # (tensor, parent level p, child level c or L)
    jump: BoolArray  # (T, D) jump dims of each tensor
    coords: tuple[tuple[tuple[IntArray, IntArray], ...], ...]  # per tensor: (dims, coefs) of moving coords
    sliding: tuple[tuple[int, ...], ...]  # per tensor: indices into coords with >= 2 dims
    coef_fp: IntArray  # (T, C, D) footprint coefficients (Problem.coefficients)
    output: int
    out_simple: bool  # every output coordinate is one dim with coefficient 1
    out_dims: BoolArray  # (D,) dims indexing the output
    read_pj_word: FloatArray  # (L,) read energy per word (per access / block)
    write_pj_word: FloatArray  # (L,)
    fan_x: IntArray  # (L,)
    fan_y: IntArray  # (L,)
    fan: IntArray  # (L,) X*Y
    capacity: FloatArray  # (L,) inf = unbounded
    mac_energy_pj: float
    n_macs: int
    touched: FloatArray  # (T,) lower bound of the words of each tensor any MAC touches
    disjoint: tuple[bool, ...]  # per tensor: its moving coordinates use disjoint dims
    exist: FloatArray  # (T,) share of a padded tensor's words that exist (the model scales its energy by it)
    read_bw: FloatArray  # (L,) read words per cycle of one instance, inf = unlimited
    write_bw: FloatArray  # (L,)
    traffic: TrafficTable | None = None  # see `traffic_table` (attached by the exact mapper)
    # argument 9: per (tensor, child level c), the capacities that bound the tile extents at c
    # of the dims the tensor does not index (see `_room_rules`); empty where none does
    room_rules: dict[tuple[int, int], tuple[tuple[int, int, tuple[tuple[int, int, int], ...], tuple[int, ...]], ...]] \
        | None = None
    # arguments 11-12: the sets of tensors whose words bound the MACs of any set of MACs
    # (`_region_forms`); None where the problem has not three tensors
    region_forms: RegionForms | None = None
    # arguments 11-12 on trial (a speed rule, never a soundness one): with ``region_trial`` > 0
    # the region count is dropped for this keep pattern once ``region_trial`` calls of
    # `partial_bounds` in a row of its first ones have lifted no node above the other terms;
    # ``region_tally`` = [calls counted, calls that lifted]. 0 (the default): always computed
    region_trial: int = 0
    region_tally: list[int] = field(default_factory=lambda: [0, 0])
    # argument 13 on trial (a speed rule, as ``region_trial``): with ``pair_trial`` > 0 the joint
    # pairs are dropped at the nodes of ``k`` known-from levels once ``pair_trial`` calls there
    # have lifted no row above argument 2's relaxation; ``pair_tally[k]`` = [calls, calls that lifted]
    pair_trial: int = 0
    pair_tally: dict[int, list[int]] = field(default_factory=dict)
    # staged bounds (a speed rule, as the trials above): ``stage_tally[k]`` = [rows staged, rows the
    # first stage left below the cut-off (both halved as they grow), calls not staged since]
    stage_tally: dict[int, list[float]] = field(default_factory=dict)

    @staticmethod
    def build(problem: Problem, arch: Arch, keep: BoolArray) -> BoundModel:
        coef = problem.coefficients
        T, C, D = coef.shape
        L = arch.n_levels
        big = problem.bounds > 1
        jump = np.zeros((T, D), dtype=bool)
        coords: list[tuple[tuple[IntArray, IntArray], ...]] = []
        sliding: list[tuple[int, ...]] = []
        for t in range(T):
            cs = []
            sl = []
            for c in range(C):
                dims = np.flatnonzero((coef[t, c] > 0) & big)
                if len(dims) == 0:
                    continue
                if len(dims) == 1:
                    jump[t, dims[0]] = True
                else:
                    sl.append(len(cs))
                cs.append((dims.astype(np.int64), coef[t, c, dims].astype(np.int64)))
            coords.append(tuple(cs))
            sliding.append(tuple(sl))
        keep = np.asarray(keep, dtype=bool)
        pairs = []
        for t in range(T):
            keepers = [lv for lv in range(L) if keep[lv, t]]
            for i, p in enumerate(keepers):
                pairs.append((t, p, keepers[i + 1] if i + 1 < len(keepers) else L))
        o = problem.output_index
        out_simple = all(len(d) == 1 and int(a[0]) == 1 for d, a in coords[o])
        block = np.array([lv.block_words for lv in arch.levels], dtype=np.float64)
        bounds = problem.bounds
        disjoint = []
        touched = np.ones(T)
        for t in range(T):
            dims_all = [int(d) for dims, _ in coords[t] for d in dims]
            disjoint.append(len(dims_all) == len(set(dims_all)))
            counts = [_distinct_full(dims, a, bounds) for dims, a in coords[t]]
            touched[t] = float(np.prod(counts)) if disjoint[-1] else float(max(counts, default=1))
        return BoundModel(
            L=L, D=D, T=T, keep=keep, pairs=tuple(pairs), jump=jump, coords=tuple(coords),
            sliding=tuple(sliding), coef_fp=coef, output=o, out_simple=out_simple,
            out_dims=problem.relevance[o].copy(),
            read_pj_word=np.array([lv.read_energy_pj for lv in arch.levels]) / block,
            write_pj_word=np.array([lv.write_energy_pj for lv in arch.levels]) / block,
            fan_x=arch.fanouts[:, 0].copy(), fan_y=arch.fanouts[:, 1].copy(),
            fan=arch.fanouts.prod(axis=1), capacity=arch.capacities_words,
            mac_energy_pj=float(arch.compute.energy_per_mac_pj) * problem.macs,
            n_macs=int(arch.n_macs), touched=touched, disjoint=tuple(disjoint),
            exist=problem.existing_fraction(),
            read_bw=np.array([np.inf if lv.read_bandwidth_words_per_cycle is None
                              else lv.read_bandwidth_words_per_cycle for lv in arch.levels], dtype=np.float64),
            write_bw=np.array([np.inf if lv.write_bandwidth_words_per_cycle is None
                               else lv.write_bandwidth_words_per_cycle for lv in arch.levels], dtype=np.float64),
            room_rules=_room_rules(keep, tuple(coords), tuple(disjoint), arch.capacities_words, bounds),
            region_forms=_region_forms(tuple(coords), bounds),
        )


@dataclass(frozen=True, slots=True)
class RegionForms:
    """Argument 12 of the module doc: what bounds the MACs of any set ``V`` of MACs by the word
    sets ``A_t`` its MACs use (three tensors)."""

    pairs: tuple[tuple[int, int], ...]  # (t1, t2): their words fix a MAC, so |V| <= |A_t1| |A_t2|
    # |V| <= sqrt(slices |A_0| |A_1| |A_2|) (Loomis-Whitney over at most ``slices`` slices); None: no such form
    slices: float | None
    sliced: int  # the tensor whose words the slices split (-1 where slices is 1 or None)


def _fixing_dims(coords: tuple[tuple[tuple[IntArray, IntArray], ...], ...], ts: tuple[int, ...],
                 known: set[int]) -> set[int]:
    """The dims that the words of tensors ``ts`` (with the dims ``known`` given) determine: a
    coordinate ``sum_d a_d x_d`` (``a_d >= 1``) with every dim but one determined determines
    that one; repeated until nothing changes."""
    got = set(known)
    changed = True
    while changed:
        changed = False
        for t in ts:
            for dims, _ in coords[t]:
                left = [int(d) for d in dims.tolist() if int(d) not in got]
                if len(left) == 1:
                    got.add(left[0])
                    changed = True
    return got


def _region_forms(coords: tuple[tuple[tuple[IntArray, IntArray], ...], ...], bounds: IntArray) -> RegionForms | None:
    """Argument 12 of the module doc, from the problem's projections (``coords``: per tensor its
    moving coordinates, dims of bound > 1): the pairs of tensors whose words fix a MAC, and the
    fewest slices ``F`` of a three-way Loomis-Whitney form: a set ``Sigma`` of dims that are
    lone coordinates of one tensor ``tau`` (so ``tau``'s words split by their values) such that,
    with ``Sigma`` fixed, every coordinate has at most one dim left and every dim left indexes
    exactly two tensors; ``F`` is the number of values ``Sigma`` takes (1 for a GEMM or a 1x1
    convolution, ``R S`` for a window). None where there are not three tensors."""
    if len(coords) != 3:
        return None
    moving: set[int] = {int(d) for cs in coords for dims, _ in cs for d in dims.tolist()}
    pairs = tuple(ts for ts in ((0, 1), (0, 2), (1, 2)) if _fixing_dims(coords, ts, set()) >= moving)
    index = [{int(d) for dims, _ in cs for d in dims.tolist()} for cs in coords]
    best: tuple[float, int] | None = None
    for tau in range(3):
        lone = sorted({int(dims[0]) for dims, _ in coords[tau] if len(dims) == 1})
        for mask in range(1 << len(lone)):
            sigma = {d for i, d in enumerate(lone) if mask >> i & 1}
            if any(sum(int(d) not in sigma for d in dims.tolist()) > 1 for cs in coords for dims, _ in cs):
                continue
            if any(sum(d in ix for ix in index) != 2 for d in moving - sigma):
                continue
            f = float(math.prod(int(bounds[d]) for d in sigma))
            if best is None or f < best[0]:
                best = (f, tau if sigma else -1)
    return RegionForms(pairs=pairs, slices=None if best is None else best[0], sliced=-1 if best is None else best[1])


def _room_rules(keep: BoolArray, coords: tuple[tuple[tuple[IntArray, IntArray], ...], ...], disjoint: tuple[bool, ...],
                capacity: FloatArray, bounds: IntArray) -> dict[tuple[int, int], tuple[
                    tuple[int, int, tuple[tuple[int, int, int], ...], tuple[int, ...]], ...]]:
    """Argument 9 of the module doc: for each tensor ``t`` kept at a level ``c >= 1``, the
    (level ``l <= c`` of finite capacity, tensor ``u`` kept there) whose footprint bounds the
    tile extents at ``c`` of dims ``t`` does not index: ``(l, u, bounding, others)`` with
    ``bounding`` the (coordinate, dim, coefficient) of each coordinate of ``u`` with exactly
    one such dim (every such dim once) and ``others`` the rest of ``u``'s coordinates.

    A rule is kept only where the capacity is at most the product of its dims' extents: a
    larger one can hold those dims whole and bounds their loops by little, while every rule
    costs its numpy passes on every node (leaving a rule out only weakens the bound)."""
    L, T = keep.shape
    big = np.asarray(bounds) > 1
    D = len(big)
    out: dict[tuple[int, int], tuple[tuple[int, int, tuple[tuple[int, int, int], ...], tuple[int, ...]], ...]] = {}
    for t in range(T):
        if not disjoint[t]:
            continue
        in_t = np.zeros(D, dtype=bool)
        for dims, _ in coords[t]:
            in_t[dims] = True
        q = big & ~in_t
        if not q.any():
            continue
        for c in range(1, L):
            if not keep[c, t]:
                continue
            rules = []
            for lv in range(c + 1):
                if not np.isfinite(capacity[lv]):
                    continue
                for u in np.flatnonzero(keep[lv]).tolist():
                    if not disjoint[u]:
                        continue
                    bounding, others = [], []
                    for ci, (dims, a) in enumerate(coords[u]):
                        hit = [i for i, d in enumerate(dims.tolist()) if q[d]]
                        if len(hit) == 1:
                            bounding.append((ci, int(dims[hit[0]]), int(a[hit[0]])))
                        else:
                            others.append(ci)
                    if bounding and capacity[lv] <= math.prod(int(bounds[d]) for _, d, _ in bounding):
                        rules.append((lv, u, tuple(bounding), tuple(others)))
            if rules:
                out[(t, c)] = tuple(rules)
    return out


@dataclass(frozen=True, slots=True, eq=False)
class TrafficTable:
    """The least energy of the words level 1 receives from level 0, over every tile level 1
    can hold that is at least a given one (see `traffic_table`)."""

    tensors: IntArray  # tensors kept at levels 0 and 1: their level 0 -> 1 terms are bounded here
    vals: tuple[FloatArray, ...]  # per dim, the sorted tile extents level 1 can have
    least: FloatArray  # (|vals_0|, ..., |vals_D-1|) least energy over the tiles >= each cell
    # argument 14: the same cells' least over the level-0 loop orders of the exact deliveries
    # (`dram_order_table`); None where switched off (``_USE_DRAM_ORDER``)
    order_least: FloatArray | None = None
    # argument 14b: (tensor, next keeper c) of the tensors kept at level 0 that bypass level 1,
    # every coordinate one dim with coefficient 1 (`_unit_bypass`), and the cells' least over
    # the orders with their level 0 -> c counts added (None where there are none)
    bypass: tuple[tuple[int, int], ...] = ()
    bypass_least: FloatArray | None = None
    # argument 14c: the same per cell before the suffix minimum (a node with level 1's tile known)
    cell: FloatArray | None = None


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
    for t in np.flatnonzero(bm.keep[1]):
        need += _footprint(bm, int(t), tiles)
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
    order = dram_order_table(bm, tiles, q, fit, tensors, bounds).reshape(shape) if _USE_DRAM_ORDER else None
    bypass = _unit_bypass(bm) if _USE_DRAM_ORDER else ()
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
    those tensors' terms that the joint least replaces (arguments 15b and 17)."""
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
        elif bm.capacity[c] > _INSTANCE_WORDS_MAX_ROOM:
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


def _distinct_full(dims: IntArray, a: IntArray, bounds: IntArray) -> int:
    """Distinct values of ``sum_d a_d x_d`` over ``0 <= x_d < bounds[d]`` (a lower bound where
    not exact): one dim, its bound; two dims, one with coefficient 1 (``stride*P + R``),
    ``min(a (e_a - 1) + e_u, e_a e_u)`` (the windows of consecutive ``x_a`` overlap or not);
    otherwise ``1 + sum_d (e_d - 1)`` (a path that raises one index at a time)."""
    e = [int(bounds[d]) for d in dims]
    if len(dims) == 1:
        return e[0]
    if len(dims) == 2 and 1 in (int(a[0]), int(a[1])):
        u = 0 if int(a[0]) == 1 else 1
        o = 1 - u
        return min(int(a[o]) * (e[o] - 1) + e[u], e[o] * e[u])
    return 1 + sum(x - 1 for x in e)


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
    if not caps or math.prod(caps) > _SPATIAL_MOST_CELLS:
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
    if chosen.any() and not _JOINT_SPLIT_CHOSEN:
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
    rows = np.ascontiguousarray(np.concatenate([span.reshape(n, -1), w, s1, o, fixed1], axis=1))
    keys = [r.tobytes() for r in rows]
    out = np.empty(n)
    todo = []
    for i, key in enumerate(keys):
        v = table.get(key)
        if v is None and limit is not None:
            fl = floors.get(key)
            if fl is not None and fl >= limit[i]:
                v = fl
        if v is None:
            todo.append(i)
        else:
            out[i] = v
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
                if v == math.inf or (v < li and (v >= 0.0 or not _SPLIT_STOP)):
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

    if _JOINT_SPLIT_ENGINE == "cpu":
        return two_level_split_least_below(span, coef, w, s1, o, fixed1, kcoef, cap, _JOINT_SPLIT_MAX, limit,
                                           _SPLIT_STOP)
    least = _split_least(span, coef, w, s1, o, fixed1, kcoef, cap)
    out = np.where(np.isinf(least) | (least < 0.0), least, np.minimum(least, limit))
    if _SPLIT_STOP:
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

    if _JOINT_SPLIT_ENGINE == "cpu":
        return two_level_split_least(span, coef, w, s1, o, fixed1, kcoef, cap, _JOINT_SPLIT_MAX)
    n, D = o.shape
    out = np.full(n, np.inf)
    for i in range(n):
        choices = [[float(fixed1[i, d])] if fixed1[i, d] > 0 else
                   [float(x) for x in range(1, int(o[i, d]) + 1) if int(o[i, d]) % x == 0] for d in range(D)]
        if math.prod(len(ch) for ch in choices) > _JOINT_SPLIT_MAX or max(len(ch) for ch in choices) > 64:
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
    if not byp or not kept or k > 2 or (k == 2 and _KEPT_SPLIT_MAX <= 0) or (k <= 1 and not _KEPT_KNOWN):
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
    span_b = np.ones((n, len(byp), C))
    w_b = np.zeros((n, len(byp)))
    for i, (t, c) in enumerate(byp):
        ok = oks[i]
        span_b[:, i] = 1.0 + ((tile[:, c][:, None, :] - 1.0) * coef[t][None]).sum(axis=2)
        reads = np.ones(n)
        for lv in range(1, c):
            reads = reads * dl(t, lv)
        f = float(bm.exist[t])
        w_b[:, i] = np.where(ok, f * (bm.read_pj_word[0] * reads + bm.write_pj_word[c] * _prod(used[:, :c], 1)), 0.0)
        out = out - np.where(ok, free[at[("r", t, c)]] + free[at[("f", t, c)]], 0.0)
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
    coef_b, coef_k = coef[[t for t, _ in byp]], coef[kept]
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
                                        + np.float64(cap).tobytes() + np.int64(_KEPT_SPLIT_MAX).tobytes(), {})
    if len(table) > _SPLIT_MEMO_ROWS:
        table.clear()
    keys = [r.tobytes() for r in np.ascontiguousarray(np.concatenate([span_b.reshape(n, -1), w_b, w_k, s1, o], axis=1))]
    out = np.empty(n)
    todo = []
    for i, key in enumerate(keys):
        v = table.get(key)
        if v is None:
            todo.append(i)
        else:
            out[i] = v
    if todo:
        sel = np.asarray(todo)
        got = kept_split_least(span_b[sel], coef_b, w_b[sel], coef_k, w_k[sel], s1[sel], o[sel],
                               np.zeros((len(sel), o.shape[1])), kcoef, cap, _KEPT_SPLIT_MAX)
        out[sel] = got
        for i, v in zip(todo, got.tolist(), strict=True):
            table[keys[i]] = v
    return out


def _footprint(bm: BoundModel, t: int, tile: FloatArray) -> FloatArray:
    """(n,) words of tensor t over tiles (n, D) (`Problem.footprint`, in float64)."""
    out = np.ones(len(tile))
    for dims, a in bm.coords[t]:
        out = out * (1.0 + ((tile[:, dims] - 1.0) * a).sum(axis=1))
    return out


def _span(dims: IntArray, a: IntArray, tile: FloatArray) -> FloatArray:
    return 1.0 + ((tile[:, dims] - 1.0) * a).sum(axis=1)


def _prod(x: Any, axis: int | tuple[int, ...]) -> Any:
    """``np.prod(x, axis)`` over a short axis, as its slices multiplied one after the other.

    numpy reduces a short axis of a large array row by row: on (8192, 7) float64 its ``prod``
    takes about 4x the time of the slices multiplied in turn, and on (8192, 4, 7) over the
    last axis about 2.5x (``docs/performance.md``, "Exact mapper"). Every product taken here
    is of integer values (factors, tiles, extents) far below ``2**53``, so each partial
    product is exact and the result is bit for bit ``np.prod``'s, whatever the order."""
    if isinstance(axis, tuple):
        for ax in sorted(axis, reverse=True):
            x = _prod(x, ax)
        return x
    m = x.shape[axis]
    if m == 0:
        return np.ones(x.shape[:axis] + x.shape[axis + 1:], dtype=x.dtype)
    pre = (slice(None),) * axis
    out = x[pre + (0,)].copy()
    for i in range(1, m):
        out *= x[pre + (i,)]
    return out


@dataclass(frozen=True, slots=True)
class _Prefix:
    """The loops up to J* at the known levels, per row: ``pref`` the loops of l* up to J*
    (its jump loops when l*'s order is open, ``free``), ``kout`` every loop of the known
    levels above l*, ``found`` an active jump loop at a known level, ``lstar`` its level."""

    pref: FloatArray
    kout: FloatArray
    found: BoolArray
    free: BoolArray
    lstar: IntArray
    U: FloatArray
    jr: BoolArray
    pu: _PassU | None = None  # argument 10's passes inside J* (None: not a sliding tensor, or switched off)


@dataclass(frozen=True, slots=True)
class _PassU:
    """The union of the tiles of a sliding tensor ``t`` at level ``c`` that the loops inside
    an open loop visit, per row, as a function of which dims' innermost open loops lie inside
    it (argument 10, the passes inside J*): ``rest`` the product of the ranges of ``t``'s
    one-dim coordinates under the known loops, and per sliding coordinate its range under the
    known loops ``rng0`` and what each of its ``dims`` adds when that dim's innermost open loop
    is inside (``inc`` (n, len(dims))). ``u0`` the union the count's ``free`` was made with
    (`_Prefix.U`), ``st`` the tile's footprint, ``act`` (n, D) a lower bound of each dim's open
    temporal product where it is active (at least its innermost open loop's bound)."""

    u0: FloatArray
    st: FloatArray
    rest: FloatArray
    coords: tuple[tuple[FloatArray, tuple[int, ...], FloatArray, FloatArray], ...]
    act: FloatArray
    n_lo: FloatArray
    jot: FloatArray  # the product over t's jump dims of the least open temporal product (omin / s_out)


@dataclass(frozen=True, slots=True)
class _X:
    """A count bound: ``fixed`` where it does not depend on an open order; else, where
    ``dep``, ``max(max(base * prefix, lo) * scale, lo)`` with the prefix of level ``lstar``
    chosen with that level's order (`_order_energy`). ``opened`` (with ``jr_open``, the
    tensor's jump dims), where set, is the count when the innermost active loop of the open
    levels ``0 .. k-1`` is over one of those jump dims (`_open_energy`); it is ``fixed`` on
    the rows where it does not apply."""

    fixed: FloatArray
    dep: BoolArray | None = None
    base: FloatArray | None = None
    pref_rel: FloatArray | None = None
    lstar: IntArray | None = None
    jr: BoolArray | None = None
    lo: FloatArray | float = 0.0
    scale: FloatArray | float = 1.0
    inner: FloatArray | float | None = None  # the count's own floor before ``scale`` (None: ``lo``)
    opened: FloatArray | None = None
    jr_open: BoolArray | None = None
    level: int = -1  # opened counts into an open level: that level (argument 9); -1: a known level
    # argument 10: where the count's J* is among the open loops, its order-free value before the
    # touched-words floor (each open loop of a dim outside J* that the tensor does not jump
    # over multiplies it); 0 on the rows whose J* is at a known level
    free: FloatArray | None = None
    pass_: _PassU | None = None  # argument 10's passes inside J* (see `_PassU`), with ``free``
    # and what the open levels' fixed spatial factors of the dims t does not jump over add to
    # ``free`` for those passes (the instances of c, or the distinct offsets of the parent's reads)
    pass_sf: FloatArray | float = 1.0

    @staticmethod
    def fixed_of(x: FloatArray) -> _X:
        return _X(fixed=x)

    @classmethod
    def of(cls, pr: _Prefix, with_star: FloatArray, without: FloatArray, lo: float, scale: float,
           open_levels: bool = False, pass_sf: FloatArray | float = 1.0) -> _X:
        val = np.maximum(np.where(pr.found, with_star * pr.pref, without), lo)
        # no known level has an active jump loop of the tensor: if the innermost active loop
        # of the open levels is one of its jump loops, it is J*, and every open loop is at or
        # outside it (the prefix is every loop above the known levels: ``with_star``)
        opened = np.where(pr.found, val, np.maximum(with_star, val)) if open_levels else None
        jr_open = pr.jr if open_levels else None
        free = np.where(pr.found, 0.0, without) if open_levels else None
        pu = pr.pu if open_levels else None
        dep = pr.found & pr.free
        if not dep.any():
            return cls(fixed=val, opened=opened, jr_open=jr_open, free=free, pass_=pu, pass_sf=pass_sf)
        return cls(fixed=val, dep=dep, base=with_star, pref_rel=pr.pref, lstar=pr.lstar, jr=pr.jr, lo=lo,
                   opened=opened, jr_open=jr_open, free=free, pass_=pu, pass_sf=pass_sf)

    def scaled(self, scale: FloatArray, lo: float) -> _X:
        val = np.maximum(self.fixed * scale, lo)
        opened = None if self.opened is None else np.maximum(self.opened * scale, lo)
        free = None if self.free is None else self.free * scale
        if self.dep is None:
            return _X(fixed=val, opened=opened, jr_open=self.jr_open, free=free, pass_=self.pass_,
                      pass_sf=self.pass_sf)
        return _X(fixed=val, dep=self.dep, base=self.base, pref_rel=self.pref_rel, lstar=self.lstar, jr=self.jr,
                  lo=lo, scale=scale, opened=opened, jr_open=self.jr_open, free=free,
                  inner=self.lo if self.inner is None else self.inner, pass_=self.pass_, pass_sf=self.pass_sf)

    def at(self, pref: FloatArray) -> FloatArray:
        if self.base is None:
            return self.fixed
        inner = self.lo if self.inner is None else self.inner
        return np.maximum(np.maximum(self.base * pref, inner) * self.scale, self.lo)


def _term_energy(x: FloatArray, e1: float, e2: float, part: FloatArray | float) -> FloatArray:
    out = e1 * x
    if e2:
        out = out + e2 * np.maximum(x - part, 0.0)
    return out


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
        here = [(x, e1, e2, part, x.dep & (x.lstar == lv)) for x, e1, e2, part in dep_terms]
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
    if _JSTAR_ENGINE == "cpu":
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
        got = fp_of.get((t, c)) if _SHARE else None
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
            got = held_of.get((t, p, c)) if _SHARE else None
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
            if _SHARE:  # the loop below with its three segments as the rows of one (3, n) pass
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
            for b in () if _SHARE else (1.0, 2.0, 4.0):
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
            a_min = raw if x.dep is None else np.where(x.dep, x.base * x.pref_rel, raw)
            cnt = np.maximum(np.maximum(np.maximum(a_min, touched), v_all) * scale, touched)
        else:
            cnt = np.where(x.dep, x.at(x.pref_rel), x.fixed)
        vmin.append(mins)
        least.append(_term_energy(cnt, e1, e2, part))
        total += least[-1]
        if x.dep is not None:
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


@dataclass(frozen=True, slots=True)
class BoundCut:
    """The cut-off of a branch and bound, for a staged bound (`partial_bounds`' ``cutoff``): the
    search cuts every row whose objective bound ``objective(energy_lb, cycles_lb)`` is at least
    ``value`` (the incumbent's objective less the cut tolerance). The objective is
    ``energy^a cycles^b`` (``a, b >= 0``: EDP 1 and 1, energy 1 and 0, cycles 0 and 1), so it
    grows with each bound, and with a row's cycles bound ``c`` the row is cut once its energy
    bound reaches ``(value / c^b)^(1/a)`` (`energy_needed`). ``objective`` is the search's own
    (None: ``energy^a cycles^b`` here), so the stages cut exactly the rows the search cuts."""

    value: float
    energy_exp: float = 1.0
    cycles_exp: float = 1.0
    objective: Any = None  # (energy (n,), cycles (n,)) -> (n,) objective bound, as the search forms it

    def of(self, energy: FloatArray, cycles: FloatArray) -> FloatArray:
        """(n,) the objective bound of energy and cycles bounds (inf where either is)."""
        if self.objective is not None:
            return np.asarray(self.objective(energy, cycles), dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.power(energy, self.energy_exp) * np.power(cycles, self.cycles_exp)
        return np.where(np.isfinite(energy) & np.isfinite(cycles), out, np.inf)

    def energy_needed(self, cycles: FloatArray) -> FloatArray:
        """(n,) the energy bound at which a row with cycles bound ``cycles`` is cut (inf where
        energy does not enter the objective, 0 where the cycles alone cut it)."""
        if self.energy_exp <= 0.0:
            return np.full(len(cycles), np.inf)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            need = np.power(self.value / np.power(cycles, self.cycles_exp), 1.0 / self.energy_exp)
        return np.where(np.isnan(need), 0.0, need)


def _stage_now(bm: BoundModel, k: int, sp_known: bool) -> bool:
    """Whether a call of `partial_bounds` at ``k`` with a cut-off is staged (`_staged_bounds`):
    where argument 17 or 19 can run, always; elsewhere while the first stage has left at most
    ``_STAGE_LIVE_MAX`` of the rows below the cut-off (``stage_tally``; the first
    ``_STAGE_TRIAL_ROWS`` rows are staged), and one call in ``_STAGE_PROBE`` otherwise. On
    res3a_branch2b (eyeriss-like) the first stage costs 4-6 us a row and leaves 69% and 89% of
    the rows at k = 2 and 4 to the second (7-10 us a row): staged, those calls cost more than
    the full bound (`docs/performance.md`, "Staged bounds")."""
    if (_USE_JOINT_SPLIT or _USE_KEPT_BYPASS) and k == 2 and sp_known and _level1_bypassers(bm):
        return True
    t = bm.stage_tally.setdefault(k, [0.0, 0.0, 0.0])
    if t[0] < _STAGE_TRIAL_ROWS or t[1] <= _STAGE_LIVE_MAX * t[0]:
        return True
    t[2] += 1
    if t[2] >= _STAGE_PROBE:
        t[2] = 0
        return True
    return False


def _staged_bounds(bm: BoundModel, k: int, fac: IntArray, outer_min: IntArray, outer_tmin: IntArray,
                   outer_max: IntArray, order_pos: IntArray | None, order_fixed: BoolArray | None,
                   next_level: IntArray | None, spatial: IntArray | None, spatial_complete: bool,
                   spatial_room: IntArray | None, next_chosen: BoolArray | None, rows_feasible: bool,
                   cutoff: BoundCut) -> tuple[FloatArray, FloatArray, BoolArray]:
    """`partial_bounds` in two stages (its ``cutoff``): every row without the costly arguments
    (``costly=False``: the same cycles bound, a weaker energy bound, each a valid bound), then
    the rows whose objective bound is still below ``cutoff.value`` with every argument and
    their energy cut (argument 17 stops there). The rows cut by the first stage keep its
    bound; where energy does not enter the objective the first stage is the bound. On the
    plateau of simple3 L4 (30 CPU s from the default incumbent) the first stage costs 0.13-0.43x
    the full bound per row and cuts 96% of the rows at k = 1, 71% at k = 3, 10% at k = 2
    (`docs/performance.md`, "Staged bounds")."""
    e, c, ok = partial_bounds(bm, k, fac, outer_min, outer_tmin, outer_max, order_pos, order_fixed, next_level,
                              spatial, spatial_complete, spatial_room, next_chosen, rows_feasible, costly=False)
    if cutoff.energy_exp <= 0.0:
        return e, c, ok
    live = np.flatnonzero(ok & (cutoff.of(e, c) < cutoff.value))
    t = bm.stage_tally.setdefault(k, [0.0, 0.0, 0.0])
    t[0] += float(ok.sum())
    t[1] += float(len(live))
    if t[0] > 1 << 16:  # (the recent calls count most)
        t[0] /= 2.0
        t[1] /= 2.0
    if len(live) and k > 0:
        # argument 10's candidate dims over every feasible row, as the whole batch has them
        # (`partial_bounds`' ``z_possible``: a dim's open temporal product can reach 2)
        s_open = np.ones((len(fac), bm.D)) if spatial is None else \
            _prod((spatial[:, :k, :, 0] * spatial[:, :k, :, 1]).astype(np.float64), 1)
        open_dims = np.asarray((outer_max[ok].astype(np.float64) / s_open[ok] >= 2.0).any(axis=0), dtype=bool)
    else:
        open_dims = None
    if len(live):
        def sub(x: Any) -> Any:
            return None if x is None else x[live]

        e[live], _, _ = partial_bounds(bm, k, fac[live], outer_min[live], outer_tmin[live], outer_max[live],
                                       sub(order_pos), order_fixed, sub(next_level), sub(spatial), spatial_complete,
                                       sub(spatial_room), next_chosen, rows_feasible=True,
                                       energy_cut=cutoff.energy_needed(c[live]), open_dims=open_dims)
    return e, c, ok


def _b3(a: Any, rows: IntArray) -> Any:
    """A per-row array (n,) at ``rows`` as (r, 1, 1), to meet the (r, j, z) arrays of
    `_pair_order_energy`; a scalar as it is."""
    return a[rows][:, None, None] if isinstance(a, np.ndarray) and a.ndim == 1 else a


def partial_bounds(bm: BoundModel, k: int, fac: IntArray, outer_min: IntArray, outer_tmin: IntArray,
                   outer_max: IntArray, order_pos: IntArray | None = None,
                   order_fixed: BoolArray | None = None,
                   next_level: IntArray | None = None, spatial: IntArray | None = None,
                   spatial_complete: bool = False,
                   spatial_room: IntArray | None = None,
                   next_chosen: BoolArray | None = None,
                   rows_feasible: bool = False, cutoff: BoundCut | None = None, costly: bool = True,
                   energy_cut: FloatArray | None = None,
                   open_dims: BoolArray | None = None) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Lower bounds of energy (pJ) and cycles over every completion of partial mappings.

    Parameters
    ----------
    bm
        `BoundModel.build` of the problem, arch and keep pattern.
    k
        Levels ``k .. L-1`` are fixed (``k = 0``: every factor is fixed).
    fac
        (n, L, D, 3) factors (temporal, spatial X, spatial Y); read at levels >= k only.
    outer_min, outer_tmin, outer_max
        (n, D) the smallest and largest product of the factors of levels < k over the
        completions allowed (``outer_tmin``: temporal factors only).
    order_pos, order_fixed
        Optional (n, L, D) position of each dim in the loop order of level l, read where
        ``order_fixed[l]`` (L,) is set.
    next_level
        Optional (n, D, 3) factors already chosen at level ``k-1`` for some dims (ones for
        the others): level ``k-1`` must then fit its fanout with at least these spatial
        factors and its capacity with at least these tiles. The outer ranges must already
        include the chosen factors.
    spatial, spatial_complete
        Optional (n, L, D, 2) spatial factors (X, Y) already fixed at every level, ones
        where a dim's are still open; with ``spatial_complete`` every dim's are fixed, and
        the outer ranges then cover temporal factors alone at the levels ``< k`` (times the
        fixed spatial ones).
    spatial_room
        Optional (n, D) the largest product of a dim's spatial factors over every level
        that any completion can have (its fixed product where they are fixed): the
        instances of any level, and the MACs working at once, are at most their product.
    next_chosen
        Optional (D,) the dims whose factors at level ``k-1`` are chosen (``next_level``'s,
        ones included); a chosen dim with temporal factor 1 there has its innermost open loop
        at a level above (argument 10's passes inside J*).
    rows_feasible
        Every row is known to pass the feasibility test below (the caller ran the same
        compiled test, `accelmap.costmodels._bounds_kernel.row_feasible`, as the exact
        mapper's `_feasible_nodes` does): it is not run again. Same values either way.
    cutoff
        Optional `BoundCut`: the search cuts every row whose objective bound reaches it. The
        bound is then staged (``_STAGED``): every row is bounded without the costly
        arguments first (``costly=False``), and only the rows still below the cut-off are
        bounded again with them (and ``energy_cut``). A row cut by the first stage keeps its
        first bound: a valid bound, at or above the cut-off, so the search cuts the same rows.
    costly
        False: arguments 10, 11, 13, 14c-d, 15b, 16 and 17 are left out (a weaker bound, the
        same cycles).
    energy_cut
        Optional (n,) the energy at which each row is cut (`BoundCut.energy_needed` of its
        cycles bound): argument 17 computes its least only up to it.
    open_dims
        Optional (D,) the dims whose open temporal product can reach 2 on some row of the
        batch (argument 10's candidates for the innermost open loop; by default those of
        these rows): the second stage of a staged bound takes the whole batch's, so that its
        rows get the bound they get in the whole batch.

    Returns
    -------
    energy_lb, cycles_lb (n,) float64 and feasible (n,) bool (False: no completion fits
    the fanout or capacity of the known levels, or the capacity of the outer ones).
    """
    L, D = bm.L, bm.D
    n = len(fac)
    if cutoff is not None and _STAGED and costly and n and _stage_now(bm, k, spatial is not None and spatial_complete):
        return _staged_bounds(bm, k, fac, outer_min, outer_tmin, outer_max, order_pos, order_fixed, next_level,
                              spatial, spatial_complete, spatial_room, next_chosen, rows_feasible, cutoff)
    checked = rows_feasible  # every row passed the compiled feasibility test: the numpy one is skipped
    if _USE_KERNEL and n and not rows_feasible:
        ok = feasible_rows(fac, k, spatial, next_level if k > 0 else None, bm.fan_x, bm.fan_y, bm.capacity,
                           bm.keep, tables_of(bm))
        if not ok.all():  # bound the feasible rows alone (a row's bound does not depend on the others)
            sel = np.flatnonzero(ok)
            energy_all, cycles_all = np.full(n, np.inf), np.full(n, np.inf)
            if len(sel):
                def cut(x: Any) -> Any:
                    return None if x is None else x[sel]

                energy_all[sel], cycles_all[sel], _ = partial_bounds(
                    bm, k, fac[sel], outer_min[sel], outer_tmin[sel], outer_max[sel], cut(order_pos), order_fixed,
                    cut(next_level), cut(spatial), spatial_complete, cut(spatial_room), next_chosen,
                    costly=costly, energy_cut=cut(energy_cut), open_dims=open_dims)
            return energy_all, cycles_all, ok
        checked = True
    f = fac.astype(np.float64)
    tt = f[..., 0]  # (n, L, D) temporal
    g = f[..., 1] * f[..., 2]  # spatial X*Y
    omin = outer_min.astype(np.float64)
    otmin = outer_tmin.astype(np.float64)
    omax = outer_max.astype(np.float64)
    feasible = np.ones(n, dtype=bool)
    # tiles of the known levels: tile[l] = prod_{l' >= l} t g
    tile = np.ones((n, L + 1, D))
    for lv in range(L - 1, k - 1, -1):
        tile[:, lv] = tile[:, lv + 1] * tt[:, lv] * g[:, lv]
    tile_k = tile[:, k]
    used = _prod(g, 2)  # (n, L)
    t_all = _prod(tt, 2)  # (n, L)
    for lv in range(k, L if not checked else k):
        feasible &= (_prod(fac[:, lv, :, 1], 1) <= bm.fan_x[lv]) & (_prod(fac[:, lv, :, 2], 1) <= bm.fan_y[lv])
    # capacity: known levels exactly, outer levels at least the tile of level k (times the
    # factors already chosen at level k-1)
    tile_outer = tile_k * _prod(next_level, 2) if next_level is not None and k > 0 else tile_k
    if spatial is not None:
        gs = (spatial[..., 0] * spatial[..., 1]).astype(np.float64)  # (n, L, D) fixed spatial
        for lv in range(k if not checked else 0):
            feasible &= (_prod(spatial[:, lv, :, 0], 1) <= bm.fan_x[lv]) & \
                (_prod(spatial[:, lv, :, 1], 1) <= bm.fan_y[lv])
        # a tile of level lv < k also holds the fixed spatial factors of levels lv .. k-1 (the
        # temporal factors chosen at level k-1, if any, once: next_level's spatial ones are
        # the same fixed factors)
        base = tile_k * next_level[..., 0] if next_level is not None and k > 0 else tile_k
        tile_sp = np.empty((n, k, D))
        acc = base.copy()
        for lv in range(k - 1, -1, -1):
            acc = acc * gs[:, lv]
            tile_sp[:, lv] = acc
    for lv in range(L if not checked else 0):
        if not np.isfinite(bm.capacity[lv]) or not bm.keep[lv].any():
            continue
        if lv >= k:
            tl = tile[:, lv]
        elif spatial is not None:
            tl = np.maximum(tile_sp[:, lv], tile_outer)
        else:
            tl = tile_outer
        need = np.zeros(n)
        for t in np.flatnonzero(bm.keep[lv]):
            need += _footprint(bm, int(t), tl)
        feasible &= need <= bm.capacity[lv]
    if next_level is not None and k > 0 and not checked:
        feasible &= (_prod(next_level[:, :, 1], 1) <= bm.fan_x[k - 1]) & \
            (_prod(next_level[:, :, 2], 1) <= bm.fan_y[k - 1])
    # bound the feasible rows only (most children are not, at some levels): every array the
    # rest reads is cut to them once, and the bounds are scattered back at the end
    rows = None
    if not feasible.all():
        rows = np.flatnonzero(feasible)
        if not len(rows):
            return np.full(n, np.inf), np.full(n, np.inf), feasible
        n = len(rows)
        tt, g, used, t_all, tile, tile_k = tt[rows], g[rows], used[rows], t_all[rows], tile[rows], tile_k[rows]
        tile_outer = tile_outer[rows]
        omin, otmin, omax = omin[rows], otmin[rows], omax[rows]
        if order_pos is not None:
            order_pos = order_pos[rows]
        if next_level is not None:
            next_level = next_level[rows]
        if spatial is not None:
            spatial, gs, tile_sp = spatial[rows], gs[rows], tile_sp[rows]
        if spatial_room is not None:
            spatial_room = spatial_room[rows]
        if energy_cut is not None:
            energy_cut = energy_cut[rows]
    # spatial products of the outer levels: fixed, or at most their fanouts
    sp_known = spatial is not None and spatial_complete
    if sp_known:
        used = used.copy()
        used[:, :k] = _prod(gs[:, :k], 2)
        g = g.copy()
        g[:, :k] = gs[:, :k]
        fan_outer: FloatArray | float = _prod(used[:, :k], 1) if k > 0 else 1.0
    else:
        fan_outer = float(np.prod(bm.fan[:k])) if k > 0 else 1.0
    # the outer temporal products of a set of dims: each at least its smallest over the run,
    # and together at least their smallest full products over the most spatial instances
    # they can still have (the fixed spatial factors times what the fanouts leave to the
    # dims not fixed yet): o_d = t_d s_d and prod s_d <= prod fan
    fan_all = float(np.prod(bm.fan[:k])) if k > 0 else 1.0
    s_out = _prod(gs[:, :k], 1) if spatial is not None and k > 0 else np.ones((n, D))  # (n, D)
    f_rem = np.maximum(fan_all / _prod(s_out, 1), 1.0)
    # argument 10's passes inside J*: each dim's innermost open loop, where active, has a bound
    # of at least 2, its chosen temporal factor at level k-1, and with one open level (k = 1)
    # its whole open temporal product
    n_lo = n_act = None
    if k > 0 and _USE_ORDER and _USE_ORDER_PASS:
        mt_all = np.maximum(otmin, omin / (s_out * f_rem[:, None]))  # as argument 10's `mt` below
        n_lo = np.maximum(2.0, next_level[..., 0].astype(np.float64)) if next_level is not None \
            else np.full((n, D), 2.0)
        if k == 1:
            n_lo = np.maximum(n_lo, mt_all)
        elif k == 2 and next_level is not None and next_chosen is not None:
            # a dim that chose temporal factor 1 at level 1 has every open loop at level 0
            n_lo = np.where(next_chosen[None, :] & (next_level[..., 0] < 2), np.maximum(n_lo, mt_all), n_lo)
        n_act = np.maximum(n_lo, mt_all)

    def t_outer(mask: BoolArray) -> FloatArray:
        return np.maximum(_prod(otmin[:, mask], 1), _prod(omin[:, mask], 1) / (_prod(s_out[:, mask], 1) * f_rem))

    def inst_above(p: int, mask: BoolArray) -> FloatArray:
        """The fixed spatial factors of the dims in ``mask`` at the levels above ``p``: they
        make instances of ``p`` that each read for themselves (no multicast), so a read
        count that leaves these dims' spatial factors out is multiplied by them."""
        if spatial is None or p == 0:
            return np.ones(n)
        return _prod(gs[:, : min(p, k)][:, :, mask], (1, 2))

    # argument 9 needs every level's spatial factors (its counts into open levels and their
    # multicast) and a level between the outermost and the known ones
    use_room = sp_known and k >= 2 and bool(bm.room_rules)
    use_order = _USE_ORDER and costly
    p_min = tile_k * omin  # (n, D) smallest full product of each dim
    p_max = tile_k * omax
    energy = np.full(n, bm.mac_energy_pj)

    dl_cache: dict[tuple[int, int], FloatArray] = {}  # dl_lb per (t, lv), made once per call (read only)

    def dl_lb(t: int, lv: int) -> FloatArray:
        """distinct_lv(t) >= prod over coords of ``1 + sum_d (g_d - 1)`` over its dims: a
        coordinate's offsets are the sumset of one arithmetic progression of ``g_d`` terms
        per dim (stride ``a_d tile[lv+1][d] > 0``), and a sumset of finite integer sets
        has at least ``|A| + |B| - 1`` elements (the sum of the smallest element of one
        with every element of the other, then of the largest of the other with every
        element of the one; Cauchy-Davenport for the integers, Nathanson, Additive Number
        Theory: Inverse Problems, 1996, Thm. 1.2)."""
        got = dl_cache.get((t, lv)) if _SHARE else None
        if got is not None:
            return got
        out = np.ones(n)
        if lv < k and not sp_known:
            return out
        if _USE_DISTINCT_EXACT and lv >= k - 1:  # argument 15: the strides are known, eq. S exactly
            out = _distinct_exact(bm, t, g[:, lv], tile[:, lv + 1])
        else:
            for dims, _ in bm.coords[t]:
                out = out * (1.0 + (g[:, lv][:, dims] - 1.0).sum(axis=1))
        dl_cache[(t, lv)] = out
        return out

    # each count is asked for more than once (a level's fills are its child's deliveries,
    # read again by the reads its parent serves): made once per call. Nothing writes into
    # an `_X` or `_Prefix` array after it is made, so sharing one changes no value
    pr_cache: dict[tuple[int, int], _Prefix] = {}
    dv_cache: dict[tuple[int, int], _X] = {}

    def jump_prefix(t: int, c: int) -> _Prefix:
        got = pr_cache.get((t, c)) if _MEMO else None
        if got is None:
            pr_cache[(t, c)] = got = jump_prefix_of(t, c)
        return got

    def jump_prefix_of(t: int, c: int) -> _Prefix:
        """The loops up to J* at the known levels k..c-1 (see `_Prefix`), and U, a lower
        bound of the words of the union of the tiles that the known loops inside J* visit
        (at least the tile's footprint)."""
        jr = bm.jump[t]
        pref = np.ones(n)
        kout = np.ones(n)
        found = np.zeros(n, dtype=bool)
        free = np.zeros(n, dtype=bool)  # l*'s order is open: its prefix is chosen jointly (below)
        lstar = np.full(n, -1)
        ext = np.ones((n, D))  # per dim: blocks of the tile visited by the known loops inside J*
        # walk from the deepest level up: the first level with an active jump loop is l*
        for lv in range(c - 1, k - 1, -1):
            act = (tt[:, lv][:, jr] >= 2).any(axis=1) if jr.any() else np.zeros(n, dtype=bool)
            new = act & ~found
            if new.any():
                lstar = np.where(new, lv, lstar)
                if order_fixed is not None and order_fixed[lv]:
                    pos = order_pos[:, lv].astype(np.float64)  # (n, D)
                    active_jr = (tt[:, lv] >= 2) & jr[None, :]
                    last = np.where(active_jr, pos, -1.0).max(axis=1)  # innermost active jump loop
                    pref = np.where(new, _prod(np.where(pos <= last[:, None], tt[:, lv], 1.0), 1), pref)
                    after = np.where(pos > last[:, None], tt[:, lv], 1.0)  # the loops of l* after J*
                    ext = np.where(new[:, None], ext * after, ext)
                else:
                    pref = np.where(new, _prod(tt[:, lv][:, jr], 1), pref)
                    free |= new
            # levels above l* (still known) multiply every loop
            kout = np.where(found, kout * t_all[:, lv], kout)
            ext = np.where((~found & ~new)[:, None], ext * tt[:, lv], ext)
            found |= new
        S = _footprint(bm, t, tile[:, c])
        U = S
        if bm.sliding[t] and bm.disjoint[t]:
            extra = np.zeros(n)
            for ci in bm.sliding[t]:
                dims, a = bm.coords[t][ci]
                span = _span(dims, a, tile[:, c])
                step = np.zeros(n)
                for d, ad in zip(dims.tolist(), a.tolist(), strict=True):
                    step += (ext[:, d] - 1.0) * np.minimum(ad * tile[:, c, d], span)
                extra += S / span * step
            U = S + extra
        pu = None
        if n_lo is not None and n_act is not None and bm.sliding[t] and bm.disjoint[t] and not found.all():
            pu = _pass_union(bm, t, tile[:, c], ext, n_lo, n_act, U, _prod((omin / s_out)[:, jr], 1))
        return _Prefix(pref=pref, kout=kout, found=found, free=free, lstar=lstar, U=U, jr=jr, pu=pu)

    op_cache: dict[tuple[Any, ...], FloatArray | None] = {}  # (t, c): 5b; (t, c, "next"): 5c

    def deliveries(t: int, c: int) -> _X:
        got = dv_cache.get((t, c)) if _MEMO else None
        if got is None:
            dv_cache[(t, c)] = got = deliveries_of(t, c)
        return got

    def deliveries_of(t: int, c: int) -> _X:
        """X(c) lower bound: words delivered into all instances of level c (1 <= c < L)."""
        jr = bm.jump[t]
        lo = bm.touched[t]
        if c >= k:
            used_kc = _prod(used[:, k:c], 1)
            pr = jump_prefix(t, c)
            with_star = _prod(omin, 1) * used_kc * pr.U * pr.kout
            without = _prod(omin[:, jr], 1) * used_kc * pr.U
            if (t, c) not in op_cache:  # (each count is asked for more than once)
                op_cache[(t, c)] = _outer_pass(bm, t, c, k, tile, tt, t_all, used, omin)
            op = op_cache[(t, c)]
            if next_level is not None and k > 0 and _USE_NEXT_PASS:
                key = (t, c, "next")
                if key not in op_cache:
                    op_cache[key] = _next_level_pass(
                        bm, t, c, k, tile, tt, used, omin, omax, next_level[..., 0].astype(np.float64),
                        gs[:, k - 1] if spatial is not None else np.ones((n, D)), s_out)
                nx = op_cache[key]
                if nx is not None:
                    op = nx if op is None else np.maximum(op, nx)
            op_cache[(t, c, "floor")] = op
            # argument 10's passes: X(c) = inst_c F_c, and inst_c also counts the open levels'
            # fixed spatial factors of the dims t does not jump over
            sf = _prod(s_out[:, ~jr], 1) if pr.pu is not None and spatial is not None else 1.0
            return _X.of(pr, with_star, without, lo if op is None else np.maximum(op, lo), 1.0,
                         open_levels=k > 0 and c < L, pass_sf=sf)
        # c < k: unknown tile containing tile[k]
        out = _prod(p_min[:, jr], 1)
        for ci in bm.sliding[t]:
            dims, a = bm.coords[t][ci]
            out = out * _span(dims, a, tile_outer)
        val = np.maximum(out, lo)
        full = open_full(t, c)
        if full is None:
            return _X.fixed_of(val)
        return _X(fixed=val, opened=np.maximum(full, val), jr_open=jr, level=c)

    lb_cache: dict[int, FloatArray] = {}

    def lb_tile(lv: int) -> FloatArray:
        """(n, D) at most the tile of open level lv (as the capacity test above)."""
        got = lb_cache.get(lv)
        if got is None:
            lb_cache[lv] = got = np.maximum(tile_sp[:, lv], tile_outer)
        return got

    full_cache: dict[tuple[int, int], FloatArray | None] = {}

    def open_full(t: int, c: int) -> FloatArray | None:
        """Argument 9: X(c) of tensor t into the open level c when the innermost active loop
        above c is over a jump dim of t (every loop above c reloads its tile): at least the
        distinct words of t's coordinates over the whole extents, times the loops above c of
        the dims t does not index, whose tile extents at c the capacities of the levels
        ``<= c`` bound (`_room_rules`). None where it does not apply."""
        key = (t, c)
        if key in full_cache:
            return full_cache[key]
        rules = None
        if use_room and bm.room_rules is not None and not (c == 1 and bm.traffic is not None):
            rules = bm.room_rules.get(key)
        if not rules:
            full_cache[key] = None
            return None
        words = np.ones(n)
        for dims, _ in bm.coords[t]:
            words = words * (1.0 + (p_min[:, dims] - 1.0).sum(axis=1))
        room = np.ones(n)
        for lv, u, bounding, others in rules:
            lbt = lb_tile(lv)
            rest = np.full(n, float(bm.capacity[lv]))
            for u2 in np.flatnonzero(bm.keep[lv]).tolist():
                if u2 != u:
                    rest = rest - _footprint(bm, u2, lbt)
            for ci in others:
                dims, a = bm.coords[u][ci]
                rest = rest / _span(dims, a, lbt)
            # prod over the bounding coordinates of (T_d + e_c) <= rest, e_c the rest of the
            # coordinate's span at its smallest: so T_d <= X_c and prod T_d <= rest prod X_c / (X_c + e_c)
            es = []
            for ci, d, ad in bounding:
                dims, a = bm.coords[u][ci]
                es.append(_span(dims, a, lbt) - 1.0 - ad * (lbt[:, d] - 1.0))
            lo_all = np.ones(n)
            for e in es:
                lo_all = lo_all * (1.0 + e)
            ub = rest.copy()
            num = np.ones(n)
            for (_, d, _), e in zip(bounding, es, strict=True):
                xc = np.maximum(rest * (1.0 + e) / lo_all - e, 1.0)
                ub = ub * xc / (xc + e)
                num = num * p_min[:, d]
            room = np.maximum(room, num / np.maximum(ub, 1.0))
        full = words * room
        full_cache[key] = full
        return full

    def parent_reads(t: int, p: int, c: int) -> _X:
        """inst[p] F_c G_{p,c} lower bound (the reads of p that serve its child c)."""
        jr = bm.jump[t]
        lo = bm.touched[t]
        if c == L:
            if p >= k:
                x = _prod(p_min, 1)
                for lv in range(p, L):
                    x = x * dl_lb(t, lv) / used[:, lv]
                return _X.fixed_of(np.maximum(x, lo))
            known = _prod(t_all[:, k:], 1)
            for lv in range(k, L):
                known = known * dl_lb(t, lv)
            if sp_known:
                # the open levels p .. k-1 still multiply the groups by their sliding
                # coordinates' distinct offsets (the jump coordinates' are in omin)
                for lv in range(p, k):
                    for ci in bm.sliding[t]:
                        known = known * (1.0 + (g[:, lv][:, bm.coords[t][ci][0]] - 1.0).sum(axis=1))
            return _X.fixed_of(np.maximum(_prod(omin[:, jr], 1) * t_outer(~jr) * inst_above(p, ~jr) * known, lo))
        if c < k:
            x = deliveries(t, c)
            if x.opened is None:
                return x
            # reads of p serving c: X(c) G_{p,c} / (the instances levels p .. c-1 add)
            scale = np.ones(n)
            for lv in range(p, c):
                scale = scale * dl_lb(t, lv) / used[:, lv]
            return _X(fixed=x.fixed, opened=np.maximum(x.opened * scale, x.fixed), jr_open=jr, level=c)
        if p >= k:
            x = deliveries(t, c)
            scale = np.ones(n)
            for lv in range(p, c):
                scale = scale * dl_lb(t, lv) / used[:, lv]
            return x.scaled(scale, lo)
        # p < k <= c
        pr = jump_prefix(t, c)
        dl = np.ones(n)
        for lv in range(k, c):
            dl = dl * dl_lb(t, lv)
        above = inst_above(p, ~jr)
        with_star = _prod(omin[:, jr], 1) * t_outer(~jr) * above * pr.U * pr.kout * dl
        without = _prod(omin[:, jr], 1) * above * pr.U * dl
        if sp_known and _USE_PASS_READS:
            # arguments 5b-5c: the deliveries' pass floor read through eq. S, X(c) times
            # prod_{lv=p}^{c-1} distinct_lv / used_lv (every spatial factor fixed)
            deliveries(t, c)
            floor = op_cache.get((t, c, "floor"))
            if floor is not None:
                scale = np.ones(n)
                for lv in range(p, c):
                    scale = scale * dl_lb(t, lv) / used[:, lv]
                lo = np.maximum(lo, floor * scale)
        sf: FloatArray | float = 1.0
        if pr.pu is not None and spatial is not None:
            # argument 10's passes: the reads are X(c) G_{p,c} over the instances (eq. S), and the
            # distinct offsets of t's sliding coordinates at the open levels p .. k-1 (argument 4)
            # multiply them with the jump dims' (in omin)
            sf = np.ones(n)
            for lv in range(p, k):
                for ci in bm.sliding[t]:
                    sf = sf * (1.0 + (gs[:, lv][:, bm.coords[t][ci][0]] - 1.0).sum(axis=1))
        return _X.of(pr, with_star, without, lo, 1.0, open_levels=True, pass_sf=sf)

    def part_ub(p: int) -> FloatArray:
        """inst[p] part_p upper bound: distinct outputs held over all instances of p."""
        o = bm.output
        if bm.out_simple:
            x = _prod(p_max[:, bm.out_dims], 1)
            for lv in range(p):
                if lv >= k or sp_known:
                    x = x * _prod(g[:, lv][:, ~bm.out_dims], 1)
                else:
                    x = x * bm.fan[lv]
            return x
        x = _footprint(bm, o, p_max)
        for lv in range(p):
            x = x * (used[:, lv] if lv >= k or sp_known else bm.fan[lv])
        return x

    # every energy term is e1 X + e2 max(X - part, 0) of one delivery or read count X
    terms: list[tuple[_X, float, float, FloatArray | float]] = []
    # words read from and written into each level over all its instances, at least (the
    # order-free part of each count: `_X.fixed` is its least over the open orders), for the
    # bandwidth bound of the cycles; padding does not scale them (the model streams the
    # padded tiles, `loopnest._count_existing_words`)
    rd_words = np.zeros((L, n))
    wr_words = np.zeros((L, n))
    at: dict[tuple[str, int, int], int] = {}  # argument 11: ("r", t, c) reads of c's parent, ("f", t, p) fills of p
    for t, p, c in bm.pairs:
        reads = parent_reads(t, p, c)
        at[("r", int(t), int(c))] = len(terms)
        if p > 0:
            at[("f", int(t), int(p))] = len(terms) + 1
        f = float(bm.exist[t])  # padding: the model counts only existing words (all counts x f)
        if t == bm.output:
            part = part_ub(p)
            terms.append((reads, f * bm.write_pj_word[p], f * bm.read_pj_word[p], part))  # updates, reads
            wr_words[p] += reads.fixed
            rd_words[p] += np.maximum(reads.fixed - part, 0.0)
            if p > 0:
                fills = deliveries(t, p)
                terms.append((fills, 0.0, f * bm.write_pj_word[p], part))  # fills
                wr_words[p] += np.maximum(fills.fixed - part, 0.0)
        else:
            terms.append((reads, f * bm.read_pj_word[p], 0.0, 0.0))
            rd_words[p] += reads.fixed
            if p > 0:
                fills = deliveries(t, p)
                terms.append((fills, f * bm.write_pj_word[p], 0.0, 0.0))
                wr_words[p] += fills.fixed
    if _USE_INSTANCE_WORDS and costly and sp_known and k >= 1:
        # argument 16: each instance of a level takes in at least the union of its own tiles
        terms = _instance_words_floors(bm, k, tile, tt, g, used, omin, omax, otmin, gs, dl_lb, terms, at)
    order_e = _order_energy(terms, tt, t_all, k, L, D, n)
    pair_tally = bm.pair_tally.setdefault(k, [0, 0])
    if _USE_PAIRS and costly and k < L and (_PAIR_MAX_K < 0 or k <= _PAIR_MAX_K) and (bm.pair_trial <= 0 or pair_tally[1] > 0 or pair_tally[0] < bm.pair_trial):
        # argument 13: each known level's outermost and innermost active loops chosen jointly
        # for every tensor (arguments 1, 2 and 5b charged at the same pair)
        passes: dict[int, tuple[list[tuple[int, FloatArray, FloatArray]], FloatArray | float, float, FloatArray]] = {}
        for t, p, c in bm.pairs:
            for key, cc in ((("r", int(t), int(c)), c), (("f", int(t), int(p)), p)):
                i = at.get(key)
                if i is None or cc >= L or cc <= k or (key[0] == "r" and p < k) or op_cache.get((t, cc)) is None:
                    continue
                levels = _outer_pass_levels(bm, t, cc, k, tile, tt, t_all, used, omin)
                if not levels:
                    continue
                scale: FloatArray | float = 1.0
                if key[0] == "r":
                    scale = np.ones(n)
                    for lv in range(p, c):
                        scale = scale * dl_lb(t, lv) / used[:, lv]
                pr = jump_prefix(t, cc)
                used_kc = _prod(used[:, k:cc], 1)
                raw = np.where(pr.found, _prod(omin, 1) * used_kc * pr.U * pr.kout * pr.pref,
                               _prod(omin[:, bm.jump[t]], 1) * used_kc * pr.U)  # as `deliveries_of`, before its floors
                passes[i] = (levels, scale, float(bm.touched[t]), raw)
        joint = _pair_order_energy(terms, passes, tt, t_all, k, L, n, order_pos, order_fixed)
        if joint is not None:
            if bm.pair_trial > 0 and pair_tally[1] == 0:
                pair_tally[0] += 1
                pair_tally[1] += int(np.any(joint > order_e * (1.0 + 1e-9)))
            order_e = np.maximum(order_e, joint)
    energy = energy + order_e
    if k > 0:
        # the open levels' innermost loop, chosen once for every tensor (`_open_energy`): a dim
        # can carry it where its open temporal product can reach 2; none need be active only
        # where every dim's can be 1
        s_open = _prod(gs[:, :k], 1) if spatial is not None else np.ones((n, D))
        none_active: BoolArray = np.asarray((otmin < 2.0).all(axis=1), dtype=bool)
        z_possible = omax / s_open >= 2.0

        def allowed_of() -> BoolArray:
            """(k, n, D): level lv's innermost active loop can be over dim d: d's open temporal
            product can reach 2 and every level <= lv still fits with d's tile extent doubled
            (level k-1's chosen temporal factors are in its tile already)."""
            out = np.empty((k, n, D), dtype=bool)
            fits = np.ones((n, D), dtype=bool)
            for lv in range(k):
                if np.isfinite(bm.capacity[lv]) and bm.keep[lv].any():
                    lbt = lb_tile(lv)
                    need = np.zeros(n)
                    grow = np.zeros((n, D))  # words the kept tensors gain when dim d doubles
                    for u in np.flatnonzero(bm.keep[lv]).tolist():
                        fp = _footprint(bm, u, lbt)
                        need += fp
                        for dims, a in bm.coords[u]:
                            sp = _span(dims, a, lbt)
                            for d, ad in zip(dims.tolist(), a.tolist(), strict=True):
                                grow[:, d] += fp * (ad * lbt[:, d]) / sp
                    fits &= need[:, None] + grow <= bm.capacity[lv] * (1.0 + 1e-12)
                ok = fits
                if lv == k - 1 and next_level is not None:
                    ok = fits | (next_level[:, :, 0] >= 2)
                out[lv] = z_possible & ok
            return out

        # argument 10: the order of the dims' innermost open loops, one for every tensor; each
        # dim's open temporal product is at least its smallest (also over the most spatial
        # instances the open levels can still have, as `t_outer`)
        final = None
        if use_order:
            mt = np.maximum(otmin, omin / (s_out * f_rem[:, None]))
            final = _jstar_order_energy(terms, mt, np.asarray(z_possible.any(axis=0), dtype=bool)
                                        if open_dims is None else open_dims, n)
        coupled = _coupled_open_energy(terms, allowed_of, none_active, k, n, final) if use_room else None
        energy = energy + (coupled if coupled is not None else _open_energy(terms, z_possible, none_active, n, final))
    tab = bm.traffic
    if tab is not None and k <= 1 and _DRAM_ORDER_KNOWN and costly:
        # level 0's temporal factors: known at k = 0; at k = 1 the open product where it is one value
        two = _two_level_bypass(bm, tab, tile, tt[:, 1], g[:, 1], tt[:, 0] if k == 0 else omin, dl_lb) \
            if _TWO_LEVEL and (k == 0 or np.array_equal(omin, omax)) else None
        alt = _dram_order_known_energy(bm, tab, tile[:, 1], terms, at, two)  # arguments 14c, 14d
        if alt is not None:
            energy = np.maximum(energy, alt)
    if _USE_JOINT_BYPASS and costly and k <= 1 and (k == 0 or np.array_equal(omin, omax)):
        # argument 15b: the tensors that bypass level 1 at their least over levels 0 and 1's orders together
        alt = _joint_bypass_energy(bm, tile, tt[:, 1], g[:, 1], tt[:, 0] if k == 0 else omin, tt, g, used, dl_lb,
                                   terms, at)
        if alt is not None:
            energy = np.maximum(energy, alt)
    if _USE_JOINT_SPLIT and costly and k == 2 and sp_known:
        # argument 17: argument 15b at its least over the level-1/level-0 splits of the open products too
        alt = _joint_split_energy(bm, tile, tt, g, omin, omax, next_level, next_chosen, used, dl_lb, terms, at,
                                  energy_cut)
        if alt is not None:
            energy = np.maximum(energy, alt)
    if tab is not None and k >= 2:
        # level 1's tile is open: at least the known tile times the fixed spatial factors of
        # levels 1 .. k-1 and the temporal factors chosen at level k-1
        lb = tile_k * next_level[..., 0] if next_level is not None else tile_k.copy()
        if spatial is not None:
            lb = lb * _prod(gs[:, 1:k], 1)
        elif next_level is not None:
            lb = lb * next_level[..., 1] * next_level[..., 2]
        idx = np.empty((n, D), dtype=np.int64)
        over = np.zeros(n, dtype=bool)
        for d in range(D):
            idx[:, d] = np.searchsorted(tab.vals[d], lb[:, d] * (1.0 - 1e-12), side="left")
            over |= idx[:, d] >= len(tab.vals[d])
            np.minimum(idx[:, d], len(tab.vals[d]) - 1, out=idx[:, d])
        least = np.where(over, np.inf, tab.least[tuple(idx.T)])
        exact_order = _dram_order_energy(tab, idx, over)  # argument 14
        if exact_order is not None:
            least = np.maximum(least, exact_order)
        # what the terms above charged for the same words (all fixed: level 1 < k)
        have = np.zeros(n)
        for t in tab.tensors.tolist():
            x = deliveries(t, 1).fixed
            f = float(bm.exist[t])
            if t == bm.output:
                have += f * bm.write_pj_word[0] * x + f * bm.read_pj_word[0] * np.maximum(x - part_ub(0), 0.0) \
                    + f * bm.write_pj_word[1] * np.maximum(x - part_ub(1), 0.0)
            else:
                have += f * (bm.read_pj_word[0] + bm.write_pj_word[1]) * x
        energy = energy + np.maximum(least - have, 0.0)
        alt = _dram_order_bypass_energy(bm, tab, idx, over, terms, at)  # argument 14b
        if alt is not None:
            energy = np.maximum(energy, alt)
    if _USE_KEPT_BYPASS and costly and (k <= 1 and (k == 0 or np.array_equal(omin, omax)) or k == 2 and sp_known):
        # argument 19: 15b's (17's) tensors and level 1's kept ones at their least over both orders together (after
        # the traffic table's charge at k >= 2, which adds to the kept tensors' order-free terms)
        alt = _kept_bypass_energy(bm, k, tile, tt, g, omin, omax, next_chosen, used, dl_lb, terms, at)
        if alt is not None:
            energy = np.maximum(energy, alt)
    tally = bm.region_tally
    if sp_known and _USE_CAPACITY and costly and (bm.region_trial <= 0 or tally[1] > 0 or tally[0] < bm.region_trial):
        # argument 11: the words a region of small buffers must take in to do its MACs
        def share(t: int, p: int, c: int) -> FloatArray:
            out = np.ones(n)
            for lv in range(p, c):
                out = out * dl_lb(t, lv) / used[:, lv]
            return out

        alt = _capacity_energy(bm, terms, at, used, _prod(p_min, 1), share, k, n, tile)
        if alt is not None:
            if bm.region_trial > 0 and tally[1] == 0:
                tally[0] += 1
                tally[1] += int(np.any(alt > energy))
            energy = np.maximum(energy, alt)
    steps = _prod(t_all[:, k:], 1) * t_outer(np.ones(D, dtype=bool))
    spatial_max = np.minimum(_prod(used[:, k:], 1) * fan_outer, float(bm.n_macs))
    room = _prod(spatial_room.astype(np.float64), 1) if spatial_room is not None and not sp_known else None
    if room is not None:
        spatial_max = np.minimum(spatial_max, room)
        most = _spatial_most(bm, spatial, spatial_room, p_min, p_max) \
            if _USE_SPATIAL_MOST and spatial is not None and spatial_room is not None else None
        if most is not None:  # argument 18: the spatial factors still open share the fanouts left
            spatial_max = np.minimum(spatial_max, most)
    cycles = np.maximum(steps, np.ceil(_prod(p_min, 1) / spatial_max))
    # bandwidth: the model's cycles are at least one instance's reads (writes) of a level over
    # its read (write) bandwidth, and one instance does 1/inst[p] of the level's words;
    # inst[p] is at most the product of the (fixed or fanout) spatial factors above p
    inst_ub = np.ones(n)
    for p in range(L):
        if p > 0:
            inst_ub = inst_ub * (used[:, p - 1] if p - 1 >= k or sp_known else float(bm.fan[p - 1]))
            if room is not None:
                inst_ub = np.minimum(inst_ub, room)
        for words, bw in ((rd_words[p], bm.read_bw[p]), (wr_words[p], bm.write_bw[p])):
            if np.isfinite(bw):
                cycles = np.maximum(cycles, np.ceil(words / (inst_ub * bw)))
    if rows is not None:
        energy_all = np.full(len(feasible), np.inf)
        cycles_all = np.full(len(feasible), np.inf)
        energy_all[rows] = energy
        cycles_all[rows] = cycles
        return energy_all, cycles_all, feasible
    return energy, cycles, feasible
