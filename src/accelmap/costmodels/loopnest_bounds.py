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
   adds ``min(shift, span)`` new rows of the window per step). Its stronger forms at the
   loops outside a pass, 5b and 5c, are in `_order_bounds`.
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
The stronger arguments, each with its proof in the docstring of the module that implements it
(the numbering is this module's throughout):

- `_order_bounds`: the passes outside a tile, 5b (`_outer_pass`) and 5c (`_next_level_pass`);
  the open levels' innermost loops, 8 (`_open_energy`) and 9 with the capacities
  (`_coupled_open_energy`); the order of the dims' innermost open loops, 10 and 10b
  (`_jstar_order_energy`, compiled in `_jstar_kernel`); a region of small buffers, 11
  (`_capacity_energy`); each known level's outermost and innermost loops chosen jointly, 13
  (`_pair_order_energy`).
- `_bound_model`: `BoundModel`, `TrafficTable` and the counts' record ``_X``, with argument 12
  (`_region_forms`, the region forms argument 11 reads).
- `_bypass_bounds`: the traffic table with the outermost level's order counted exactly, 14
  (`traffic_table`, `dram_order_table`), 14b-d (`_dram_order_bypass_energy`,
  `_dram_order_known_energy`, `_two_level_bypass`); the distinct offsets exactly and the
  tensors that bypass level 1, 15 and 15b (`_distinct_exact`, `_joint_bypass_energy`); each
  instance's own tiles, 16 (`_instance_words_floors`); 15b with level 1's factors open, 17
  (`_joint_split_energy`); the open spatial factors in the fanouts left, 18 (`_spatial_most`);
  the bypassing and kept tensors together, 19 (`_kept_bypass_energy`).
- `_bound_switches`: every switch and limit named here and there (``_USE_*``, ``_STAGED``,
  ``_PAIR_MAX_K``, ...), read at call time from that one module, so a test or benchmark sets
  them there. A function of one of these modules calls another module's argument through
  that module (``order_bounds._capacity_energy``), so a test replaces it where it is defined.

`partial_bounds` below combines them (with arguments 1-7 written out in it) and stages them
(`_staged_bounds`).

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

from dataclasses import dataclass
from typing import Any

import numpy as np

import accelmap.costmodels._bound_switches as sw
import accelmap.costmodels._bypass_bounds as bypass_bounds
import accelmap.costmodels._order_bounds as order_bounds
from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.costmodels._bound_model import _X, BoundModel, TrafficTable, _footprint, _Prefix, _prod, _span
from accelmap.costmodels._bounds_kernel import feasible_rows, tables_of
from accelmap.costmodels._bypass_bounds import dram_order_deliveries, dram_order_table, traffic_table

__all__ = ["BoundCut", "BoundModel", "TrafficTable", "dram_order_deliveries", "dram_order_table", "partial_bounds", "traffic_table"]


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
    if (sw._USE_JOINT_SPLIT or sw._USE_KEPT_BYPASS) and k == 2 and sp_known and bypass_bounds._level1_bypassers(bm):
        return True
    t = bm.stage_tally.setdefault(k, [0.0, 0.0, 0.0])
    if t[0] < sw._STAGE_TRIAL_ROWS or t[1] <= sw._STAGE_LIVE_MAX * t[0]:
        return True
    t[2] += 1
    if t[2] >= sw._STAGE_PROBE:
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
    if cutoff is not None and sw._STAGED and costly and n and _stage_now(bm, k, spatial is not None and spatial_complete):
        return _staged_bounds(bm, k, fac, outer_min, outer_tmin, outer_max, order_pos, order_fixed, next_level,
                              spatial, spatial_complete, spatial_room, next_chosen, rows_feasible, cutoff)
    checked = rows_feasible  # every row passed the compiled feasibility test: the numpy one is skipped
    if sw._USE_KERNEL and n and not rows_feasible:
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
    fac_f = fac.astype(np.float64)
    tt = fac_f[..., 0]  # (n, L, D) temporal
    g = fac_f[..., 1] * fac_f[..., 2]  # spatial X*Y
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
        for kt in np.flatnonzero(bm.keep[lv]):
            need += _footprint(bm, int(kt), tl)
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
    if k > 0 and sw._USE_ORDER and sw._USE_ORDER_PASS:
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
    use_order = sw._USE_ORDER and costly
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
        got = dl_cache.get((t, lv)) if sw._SHARE else None
        if got is not None:
            return got
        out = np.ones(n)
        if lv < k and not sp_known:
            return out
        if sw._USE_DISTINCT_EXACT and lv >= k - 1:  # argument 15: the strides are known, eq. S exactly
            out = bypass_bounds._distinct_exact(bm, t, g[:, lv], tile[:, lv + 1])
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
        got = pr_cache.get((t, c)) if sw._MEMO else None
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
                    assert order_pos is not None  # given with ``order_fixed`` (see the parameters)
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
            pu = order_bounds._pass_union(bm, t, tile[:, c], ext, n_lo, n_act, U, _prod((omin / s_out)[:, jr], 1))
        return _Prefix(pref=pref, kout=kout, found=found, free=free, lstar=lstar, U=U, jr=jr, pu=pu)

    op_cache: dict[tuple[Any, ...], FloatArray | None] = {}  # (t, c): 5b; (t, c, "next"): 5c

    def deliveries(t: int, c: int) -> _X:
        got = dv_cache.get((t, c)) if sw._MEMO else None
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
                op_cache[(t, c)] = order_bounds._outer_pass(bm, t, c, k, tile, tt, t_all, used, omin)
            op = op_cache[(t, c)]
            if next_level is not None and k > 0 and sw._USE_NEXT_PASS:
                key = (t, c, "next")
                if key not in op_cache:
                    op_cache[key] = order_bounds._next_level_pass(
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
        if sp_known and sw._USE_PASS_READS:
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
    if sw._USE_INSTANCE_WORDS and costly and sp_known and k >= 1:
        # argument 16: each instance of a level takes in at least the union of its own tiles
        terms = bypass_bounds._instance_words_floors(bm, k, tile, tt, g, used, omin, omax, otmin, gs, dl_lb, terms, at)
    order_e = order_bounds._order_energy(terms, tt, t_all, k, L, D, n)
    pair_tally = bm.pair_tally.setdefault(k, [0, 0])
    if sw._USE_PAIRS and costly and k < L and (sw._PAIR_MAX_K < 0 or k <= sw._PAIR_MAX_K) and (bm.pair_trial <= 0 or pair_tally[1] > 0 or pair_tally[0] < bm.pair_trial):
        # argument 13: each known level's outermost and innermost active loops chosen jointly
        # for every tensor (arguments 1, 2 and 5b charged at the same pair)
        passes: dict[int, tuple[list[tuple[int, FloatArray, FloatArray]], FloatArray | float, float, FloatArray]] = {}
        for t, p, c in bm.pairs:
            for key, cc in ((("r", int(t), int(c)), c), (("f", int(t), int(p)), p)):
                i = at.get(key)
                if i is None or cc >= L or cc <= k or (key[0] == "r" and p < k) or op_cache.get((t, cc)) is None:
                    continue
                levels = order_bounds._outer_pass_levels(bm, t, cc, k, tile, tt, t_all, used, omin)
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
        joint = order_bounds._pair_order_energy(terms, passes, tt, t_all, k, L, n, order_pos, order_fixed)
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
            final = order_bounds._jstar_order_energy(terms, mt, np.asarray(z_possible.any(axis=0), dtype=bool)
                                        if open_dims is None else open_dims, n)
        coupled = order_bounds._coupled_open_energy(terms, allowed_of, none_active, k, n, final) if use_room else None
        energy = energy + (coupled if coupled is not None else order_bounds._open_energy(terms, z_possible, none_active, n, final))
    tab = bm.traffic
    if tab is not None and k <= 1 and sw._DRAM_ORDER_KNOWN and costly:
        # level 0's temporal factors: known at k = 0; at k = 1 the open product where it is one value
        two = bypass_bounds._two_level_bypass(bm, tab, tile, tt[:, 1], g[:, 1], tt[:, 0] if k == 0 else omin, dl_lb) \
            if sw._TWO_LEVEL and (k == 0 or np.array_equal(omin, omax)) else None
        alt = bypass_bounds._dram_order_known_energy(bm, tab, tile[:, 1], terms, at, two)  # arguments 14c, 14d
        if alt is not None:
            energy = np.maximum(energy, alt)
    if sw._USE_JOINT_BYPASS and costly and k <= 1 and (k == 0 or np.array_equal(omin, omax)):
        # argument 15b: the tensors that bypass level 1 at their least over levels 0 and 1's orders together
        alt = bypass_bounds._joint_bypass_energy(bm, tile, tt[:, 1], g[:, 1], tt[:, 0] if k == 0 else omin, tt, g, used, dl_lb,
                                   terms, at)
        if alt is not None:
            energy = np.maximum(energy, alt)
    if sw._USE_JOINT_SPLIT and costly and k == 2 and sp_known:
        # argument 17: argument 15b at its least over the level-1/level-0 splits of the open products too
        alt = bypass_bounds._joint_split_energy(bm, tile, tt, g, omin, omax, next_level, next_chosen, used, dl_lb, terms, at,
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
        exact_order = bypass_bounds._dram_order_energy(tab, idx, over)  # argument 14
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
        alt = bypass_bounds._dram_order_bypass_energy(bm, tab, idx, over, terms, at)  # argument 14b
        if alt is not None:
            energy = np.maximum(energy, alt)
    if sw._USE_KEPT_BYPASS and costly and (k <= 1 and (k == 0 or np.array_equal(omin, omax)) or k == 2 and sp_known):
        # argument 19: 15b's (17's) tensors and level 1's kept ones at their least over both orders together (after
        # the traffic table's charge at k >= 2, which adds to the kept tensors' order-free terms)
        alt = bypass_bounds._kept_bypass_energy(bm, k, tile, tt, g, omin, omax, next_chosen, used, dl_lb, terms, at)
        if alt is not None:
            energy = np.maximum(energy, alt)
    tally = bm.region_tally
    if sp_known and sw._USE_CAPACITY and costly and (bm.region_trial <= 0 or tally[1] > 0 or tally[0] < bm.region_trial):
        # argument 11: the words a region of small buffers must take in to do its MACs
        def share(t: int, p: int, c: int) -> FloatArray:
            out = np.ones(n)
            for lv in range(p, c):
                out = out * dl_lb(t, lv) / used[:, lv]
            return out

        alt = order_bounds._capacity_energy(bm, terms, at, used, _prod(p_min, 1), share, k, n, tile)
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
        most = bypass_bounds._spatial_most(bm, spatial, spatial_room, p_min, p_max) \
            if sw._USE_SPATIAL_MOST and spatial is not None and spatial_room is not None else None
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
