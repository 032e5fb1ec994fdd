"""What the ``loopnest`` bounds know of one (problem, arch, keep pattern), and the pieces every
argument shares (part of `accelmap.costmodels.loopnest_bounds`, whose numbering of the
arguments this follows).

`BoundModel` holds the arrays the bounds read (capacities, energies per word, fanouts, the
tensors' coordinates and footprint coefficients) and the region forms of argument 12;
`TrafficTable` is argument 14's table (built by `_bypass_bounds.traffic_table`). ``_X`` is one
count of deliveries (a tensor's fills of a child level, or reads of a parent) with its
order-free value and what the order arguments need of it (``_Prefix``: the loops up to J* at
the known levels, arguments 1-2; ``_PassU``: the passes of argument 10b); `_term_energy` is
its energy at a given value. `_footprint`, `_span` and `_prod` are the footprint of a tile
(`Problem.footprint`), a coordinate's span, and a product that stays exact in floats.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.workloads.problem import Problem


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
            cs: list[tuple[IntArray, IntArray]] = []
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


def _b3(a: Any, rows: IntArray) -> Any:
    """A per-row array (n,) at ``rows`` as (r, 1, 1), to meet the (r, j, z) arrays of
    `_pair_order_energy`; a scalar as it is."""
    return a[rows][:, None, None] if isinstance(a, np.ndarray) and a.ndim == 1 else a
