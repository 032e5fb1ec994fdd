"""``loopnest``: a Timeloop-class analytical model of a hierarchical memory over a PE array.

The counting rules follow Timeloop's nest analysis (Parashar et al., "Timeloop: A
Systematic Approach to DNN Accelerator Evaluation", ISPASS 2019, Sec. IV-B, and the
behaviour of ``timeloop-model`` 3.0.3 documented in ``docs/validation.md``). Notation: level
``l = 0`` is the outermost (DRAM), ``L`` the number of storage levels, level ``L`` stands for
the MACs. ``tile[l, d]`` is the extent of dim ``d`` held by one instance of level ``l``.

**Deliveries into a tile** (eq. D). The temporal loops *above* level ``c`` (levels ``0..c-1``,
outermost first) walk the tiles of one instance of ``c``. Timeloop simulates iteration 0 and
iteration 1 of every loop and extrapolates the rest (its ``gExtrapolateUniformTemporal``), and
charges each visit only the part of the tile that is new with respect to the tile visited
just before. For loop ``j`` with bound ``n_j`` the step from one visit to the next moves
dim ``d_j`` forward by the loop's stride and moves every active loop inside ``j`` back by one
stride. So, with ``Delta_j`` the new words after that step,

    F_c = |tile| + sum_j (prod_{i<j} n_i) (n_j - 1) Delta_j.

``Delta_j`` follows Timeloop's axis-aligned box difference: zero if no tensor coordinate
moves; ``|shift| x (other spans)`` if exactly one coordinate moves by less than its span
(the sliding-window halo reuse of convolutions); the whole tile otherwise. This gives
temporal reuse across the innermost loops that do not index the tensor, and halo reuse when
an output (or filter) loop advances. One more Timeloop rule (its ``RESET_ON_GRADIENT_CHANGE``):
a window keeps sliding only while successive moves go the same way, so when the innermost
active loop above ``c`` slides along a coordinate, any other loop whose step slides along a
different coordinate or direction reloads the whole tile (eq. G).

Mappings must factorize every bound exactly (``check_batch`` without padding); Timeloop's
residual iterations of imperfect factorizations are not modelled.

**Spatial sharing** (eq. S). Below level ``l`` the children with identical deltas are served
by one read (multicast) and, for the output, their updates are combined (spatial
reduction). Children have identical deltas exactly when their coordinate offsets agree, so a
level divides traffic into ``distinct_l(t)`` groups: the number of distinct offset vectors of
tensor ``t`` over the level's spatial index grid (the product of the spatial factors of the
dims that index ``t``, unless two of them share a coordinate, e.g. ``P`` and ``R`` unrolled
together, when equal sums coincide).

**Per level and tensor** (per instance), with ``p`` a level keeping ``t`` and ``c`` the next
inner level keeping it (or the MACs, which touch every operand once per MAC):

* content accesses ``A_p = F_c x prod_{l=p}^{c-1} distinct_l(t)``;
* inputs/weights: reads = ``A_p``, fills = ``F_p`` (none at the outermost level);
* the output: updates = ``A_p``, reads = ``A_p - part_p`` (the first read of each output is
  elided), fills = ``F_p - part_p``, where ``part_p`` is the number of distinct outputs one
  instance ever holds (its tile widened by every temporal loop above it).

Totals multiply by the utilized instances of the level. Energy of a level =
``sum_actions ceil(count / block) x energy`` per instance (reads at the read energy, fills
and updates at the write energy), plus MACs x MAC energy. Cycles = the larger of the compute
cycles (MACs per PE) and, for every level with a bandwidth limit, its read words over its
read bandwidth and its written words over its write bandwidth.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels.base import Metrics
from accelmap.mapper.check import check_batch
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem

__all__ = ["LoopNestModel"]

# Rows per chunk of the batched path: bounds the (rows, loops, tensors, coords) temporaries.
_CHUNK_ROWS = 4096


@dataclass(frozen=True, slots=True, eq=False)
class _Compiled:
    """Everything the batched path needs that depends only on (problem, arch)."""

    coef: IntArray  # (T, C, D)
    rank_used: BoolArray  # (T, C)
    is_output: BoolArray  # (T,)
    tensor_sizes: IntArray  # (T,)
    block: IntArray  # (L,)
    read_pj: FloatArray  # (L,)
    write_pj: FloatArray  # (L,)
    read_bw: FloatArray  # (L,) inf = unlimited
    write_bw: FloatArray  # (L,)
    fanout: IntArray  # (L,) X*Y
    mac_pj: float
    n_macs: int
    holds: BoolArray  # (L, T) levels that may keep each tensor
    coef_rows: FloatArray  # (T*C, D) coefficients as a float matrix (spans by one matmul)
    coef_rows_out: FloatArray  # (C, D) the output tensor's rows
    output: int  # index of the output tensor
    # Per tensor, per *moving* coordinate (one with a dim of bound > 1): ((D,) int32
    # coefficients, coordinate index). Coordinates that never move never change a delta.
    slots: tuple[tuple[tuple[IntArray, int], ...], ...]
    # Per tensor: every moving coordinate has one dim (the closed form of eq. D applies).
    closed: tuple[bool, ...]
    rel: BoolArray  # (T, D) the dim indexes the tensor


def _compile(problem: Problem, arch: Arch) -> _Compiled:
    coef = problem.coefficients
    inf = np.inf
    moving_dims = ((coef > 0) & (problem.bounds > 1)).sum(axis=2)  # (T, C) dims that can move
    return _Compiled(
        coef=coef,
        rank_used=problem.rank_used,
        is_output=np.array([t.is_output for t in problem.tensors]),
        tensor_sizes=problem.tensor_sizes(),
        block=np.array([lv.block_words for lv in arch.levels], dtype=np.int64),
        read_pj=np.array([lv.read_energy_pj for lv in arch.levels], dtype=np.float64),
        write_pj=np.array([lv.write_energy_pj for lv in arch.levels], dtype=np.float64),
        read_bw=np.array([inf if lv.read_bandwidth_words_per_cycle is None else lv.read_bandwidth_words_per_cycle
                          for lv in arch.levels], dtype=np.float64),
        write_bw=np.array([inf if lv.write_bandwidth_words_per_cycle is None else lv.write_bandwidth_words_per_cycle
                           for lv in arch.levels], dtype=np.float64),
        fanout=np.array([lv.fanout for lv in arch.levels], dtype=np.int64),
        mac_pj=float(arch.compute.energy_per_mac_pj),
        n_macs=int(arch.n_macs),
        holds=arch.holds_mask(problem),
        coef_rows=coef.reshape(-1, coef.shape[2]).astype(np.float64),
        coef_rows_out=coef[problem.output_index].astype(np.float64),
        output=problem.output_index,
        slots=tuple(tuple((coef[t, c].astype(np.int32), c) for c in range(coef.shape[1]) if moving_dims[t, c] > 0)
                    for t in range(coef.shape[0])),
        closed=tuple(bool((moving_dims[t] <= 1).all()) for t in range(coef.shape[0])),
        rel=problem.relevance,
    )


class LoopNestModel:
    """Timeloop-class loop-nest cost model (see the module docstring for the equations).

    Examples
    --------
    >>> from accelmap.testing.examples import small_arch, small_conv, trivial_mapping
    >>> problem, arch = small_conv(), small_arch()
    >>> mapping = trivial_mapping(problem, arch)  # every loop at DRAM, one MAC busy
    >>> m = LoopNestModel().evaluate(problem, arch, mapping.as_batch())
    >>> int(m.cycles[0]) == problem.macs, float(m.utilization[0])
    (True, 0.0625)
    >>> m.row(0)["levels"]["RF"]["Weights"]["reads"] == problem.macs
    True
    """

    name: ClassVar[str] = "loopnest"

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int], tuple[Problem, Arch, _Compiled]] = {}

    def _compiled(self, problem: Problem, arch: Arch) -> _Compiled:
        key = (id(problem), id(arch))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is problem and hit[1] is arch:
            return hit[2]
        comp = _compile(problem, arch)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (problem, arch, comp)
        return comp

    # ------------------------------------------------------------------------------------
    # Batched path
    # ------------------------------------------------------------------------------------
    def evaluate(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        """Evaluate every mapping of a batch with array math (no per-mapping Python loop).

        Returns `Metrics` whose count arrays have shape (n, n_levels, n_tensors) and hold
        totals over all instances of a level; invalid rows have ``inf`` cycles and energy
        and zero counts.
        """
        comp = self._compiled(problem, arch)
        n, L, T = len(mappings), arch.n_levels, problem.n_tensors
        # Counts are integers but `Metrics` holds floats: allocate floats once.
        reads, fills, updates = np.zeros((n, L, T)), np.zeros((n, L, T)), np.zeros((n, L, T))
        energy_lt, mcast, sred = np.zeros((n, L, T)), np.zeros((n, L, T)), np.zeros((n, L, T))
        cycles = np.full(n, np.inf)
        util = np.zeros(n)
        valid = np.zeros(n, dtype=bool)
        reason = np.zeros(n, dtype=np.int64)
        reason_level = np.full(n, -1, dtype=np.int64)
        # Chunks of rows keep every temporary (the legality check's too) cache-sized.
        for start in range(0, n, _CHUNK_ROWS):
            block = slice(start, min(start + _CHUNK_ROWS, n))
            chunk = mappings.take(block)
            check = check_batch(problem, arch, chunk)
            valid[block], reason[block], reason_level[block] = check.valid, check.reason, check.level
            if check.valid.all():  # the common case in a search: plain slices, no gathers
                rows: slice | IntArray = block
                part = chunk
            else:
                keep_rows = np.flatnonzero(check.valid)
                if keep_rows.size == 0:
                    continue
                rows = keep_rows + start
                part = chunk.take(keep_rows)
            r, f, u, e, mc, sr, cyc = _batch_counts(comp, part)
            reads[rows], fills[rows], updates[rows], energy_lt[rows] = r, f, u, e
            mcast[rows], sred[rows], cycles[rows] = mc, sr, cyc
            util[rows] = problem.macs / (comp.n_macs * cyc)
        compute_pj = np.where(valid, problem.macs * comp.mac_pj, np.inf)
        # Summed level by level, tensor by tensor: the scalar path adds in the same order,
        # so both agree to the last bit.
        total = np.zeros(n)
        for lv in range(L):
            for t in range(T):
                total = total + energy_lt[:, lv, t]
        energy = np.where(valid, total + problem.macs * comp.mac_pj, np.inf)
        return Metrics(
            cycles=cycles, energy_pj=energy, compute_energy_pj=compute_pj, utilization=util,
            valid=valid, reason=reason, reason_level=reason_level,
            reads=reads, fills=fills, updates=updates, energy_breakdown_pj=energy_lt,
            multicast=mcast, spatial_reductions=sred,
            macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
        )

    # ------------------------------------------------------------------------------------
    # Scalar reference path
    # ------------------------------------------------------------------------------------
    def evaluate_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> Metrics:
        """The scalar reference: one mapping, plain Python integers, loop by loop."""
        check = check_batch(problem, arch, mapping.as_batch())
        L, T = arch.n_levels, problem.n_tensors
        z = np.zeros((1, L, T))
        if not check.valid[0]:
            return Metrics(
                cycles=np.array([np.inf]), energy_pj=np.array([np.inf]), compute_energy_pj=np.array([np.inf]),
                utilization=np.zeros(1), valid=check.valid, reason=check.reason, reason_level=check.level,
                reads=z, fills=z.copy(), updates=z.copy(), energy_breakdown_pj=z.copy(), multicast=z.copy(),
                spatial_reductions=z.copy(), macs=problem.macs, level_names=arch.level_names,
                tensor_names=problem.tensor_names,
            )
        res = _scalar_counts(problem, arch, mapping)
        mac_pj = problem.macs * float(arch.compute.energy_per_mac_pj)
        energy = 0.0
        for row in res["energy"]:
            for e in row:
                energy += e
        energy += mac_pj
        cyc = res["cycles"]
        return Metrics(
            cycles=np.array([float(cyc)]), energy_pj=np.array([energy]), compute_energy_pj=np.array([mac_pj]),
            utilization=np.array([problem.macs / (arch.n_macs * cyc)]),
            valid=check.valid, reason=check.reason, reason_level=check.level,
            reads=np.array([res["reads"]], dtype=np.float64), fills=np.array([res["fills"]], dtype=np.float64),
            updates=np.array([res["updates"]], dtype=np.float64),
            energy_breakdown_pj=np.array([res["energy"]], dtype=np.float64),
            multicast=np.array([res["multicast"]], dtype=np.float64),
            spatial_reductions=np.array([res["reductions"]], dtype=np.float64),
            macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
        )


# ========================================================================================
# Scalar reference
# ========================================================================================
def _step_kind(shift: list[int], span: list[int]) -> tuple[str, int, int]:
    """Classify a box move (Timeloop's axis-aligned box difference): ``("still", -1, 0)``,
    ``("slide", coord, sign)`` when exactly one coordinate moves by less than its span, or
    ``("jump", -1, 0)`` (disjoint, or several coordinates move: the whole box is new)."""
    moved = [c for c, s in enumerate(shift) if s != 0]
    if not moved:
        return ("still", -1, 0)
    if len(moved) == 1 and abs(shift[moved[0]]) < span[moved[0]]:
        c = moved[0]
        return ("slide", c, 1 if shift[c] > 0 else -1)
    return ("jump", -1, 0)


def _scalar_counts(problem: Problem, arch: Arch, m: Mapping) -> dict:
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    coef = problem.coefficients.tolist()  # [t][c][d]
    used = problem.rank_used.tolist()
    temporal = m.temporal.tolist()
    g = [[int(m.spatial[lv, d, 0] * m.spatial[lv, d, 1]) for d in range(D)] for lv in range(L)]
    # tile[l][d]: extent held by one instance of level l; tile[L] is one MAC.
    tile = [[1] * D for _ in range(L + 1)]
    for lv in range(L - 1, -1, -1):
        tile[lv] = [tile[lv + 1][d] * temporal[lv][d] * g[lv][d] for d in range(D)]
    # The temporal loops, outermost first: (level, dim, bound, stride).
    loops = []
    for lv in range(L):
        for d in m.order[lv].tolist():
            loops.append((lv, d, temporal[lv][d], g[lv][d] * tile[lv + 1][d]))
    macs_per_unit = math.prod(temporal[lv][d] for lv in range(L) for d in range(D))

    def spans(t: int, ext: list[int]) -> list[int]:
        return [1 + sum(coef[t][c][d] * (ext[d] - 1) for d in range(D)) if used[t][c] else 1
                for c in range(len(coef[t]))]

    def deliveries(c: int, t: int) -> int:
        """Eq. D: words delivered into one instance of level c over the whole run."""
        sp = spans(t, tile[c])
        size = math.prod(sp)
        above = [lp for lp in loops if lp[0] < c and lp[2] >= 2]
        kinds = []
        for j, (_, d, _, stride) in enumerate(above):
            move = [0] * D
            move[d] += stride
            for _, d2, _, stride2 in above[j + 1:]:
                move[d2] -= stride2  # inner loops return from iteration 1 to 0
            shift = [sum(coef[t][cc][dd] * move[dd] for dd in range(D)) for cc in range(len(coef[t]))]
            kinds.append((_step_kind(shift, sp), shift))
        innermost = kinds[-1][0] if kinds else ("still", -1, 0)
        total, prefix = size, 1
        for (_, _, bound, _), (kind, shift) in zip(above, kinds, strict=True):
            if kind[0] == "still":
                new = 0
            elif kind[0] == "jump":
                new = size
            elif innermost[0] == "slide" and kind != innermost:
                # Timeloop keeps a sliding window only while successive moves go the same
                # way (its RESET_ON_GRADIENT_CHANGE): after the innermost loop slid along
                # another coordinate or direction the whole tile is fetched again.
                new = size
            else:
                new = abs(shift[kind[1]]) * (size // sp[kind[1]])
            total += prefix * (bound - 1) * new
            prefix *= bound
        return total

    def distinct(lv: int, t: int) -> int:
        """Eq. S: distinct offset vectors of tensor t over the spatial grid below level lv."""
        count = 1
        for c in range(len(coef[t])):
            if not used[t][c]:
                continue
            terms = [(coef[t][c][d] * tile[lv + 1][d], g[lv][d]) for d in range(D)
                     if coef[t][c][d] and g[lv][d] > 1]
            values = {sum(a * i for (a, _), i in zip(terms, idx, strict=True))
                      for idx in itertools.product(*(range(k) for _, k in terms))}
            count *= len(values)
        return count

    used_below = [math.prod(g[lv]) for lv in range(L)]
    inst = [math.prod(used_below[:lv]) for lv in range(L)]  # utilized instances
    reads = [[0] * T for _ in range(L)]
    fills = [[0] * T for _ in range(L)]
    updates = [[0] * T for _ in range(L)]
    multicast = [[0] * T for _ in range(L)]
    reductions = [[0] * T for _ in range(L)]
    energy = [[0.0] * T for _ in range(L)]
    per_inst_rd = [0] * L
    per_inst_wr = [0] * L
    keep = m.keep.tolist()
    for t in range(T):
        out = problem.tensors[t].is_output
        keepers = [lv for lv in range(L) if keep[lv][t]]
        for k, p in enumerate(keepers):
            child = keepers[k + 1] if k + 1 < len(keepers) else L
            f_child = deliveries(child, t) if child < L else macs_per_unit
            groups = math.prod(distinct(lv, t) for lv in range(p, child))
            children = math.prod(used_below[lv] for lv in range(p, child))
            a_p = f_child * groups
            f_p = deliveries(p, t) if p > 0 else int(problem.tensor_sizes()[t])
            if out:
                ext = [tile[p][d] * math.prod(temporal[lv][d] for lv in range(p)) for d in range(D)]
                part = math.prod(spans(t, ext))
                r, f, u = a_p - part, (f_p - part if p > 0 else 0), a_p
                reductions[p][t] = (f_child * children - a_p) * inst[p]
            else:
                r, f, u = a_p, (f_p if p > 0 else 0), 0
                multicast[p][t] = (f_child * children - a_p) * inst[p]
            lv_spec = arch.levels[p]
            b = lv_spec.block_words
            e = (-(-r // b)) * lv_spec.read_energy_pj + ((-(-f // b)) + (-(-u // b))) * lv_spec.write_energy_pj
            reads[p][t], fills[p][t], updates[p][t] = r * inst[p], f * inst[p], u * inst[p]
            energy[p][t] = e * inst[p]
            per_inst_rd[p] += r
            per_inst_wr[p] += f + u
    cycles = float(macs_per_unit)
    for lv, spec in enumerate(arch.levels):
        if spec.read_bandwidth_words_per_cycle is not None:
            cycles = max(cycles, per_inst_rd[lv] / spec.read_bandwidth_words_per_cycle)
        if spec.write_bandwidth_words_per_cycle is not None:
            cycles = max(cycles, per_inst_wr[lv] / spec.write_bandwidth_words_per_cycle)
    return {"reads": reads, "fills": fills, "updates": updates, "energy": energy,
            "multicast": multicast, "reductions": reductions, "cycles": math.ceil(cycles)}


# ========================================================================================
# Batched path
# ========================================================================================
def _ceil_div(a: IntArray, b: IntArray) -> FloatArray:
    """``ceil(a / b)`` as floats (exact for counts below 2**50; float division is fast)."""
    return np.ceil(a / b)


# Layout: the batch axis is the *last* axis of every array below ("structure of arrays"),
# so that each numpy operation runs over long contiguous rows even though levels, dims,
# tensors and coordinates are only a handful each.


def _distinct_groups(comp: _Compiled, g: IntArray, tile_below: IntArray) -> IntArray:
    """Eq. S for every level, tensor and row: (L, T, n) distinct child offsets.

    ``g`` (L, D, n) spatial factors (X*Y) below each level; ``tile_below`` (L, D, n) the tile
    of the next inner level (the stride of one spatial step). Per coordinate: one unrolled
    dim gives its factor; two dims with step sizes ``a``, ``b`` and factors ``n1``, ``n2``
    give ``n1*n2 - max(0, n1 - b/gcd) * max(0, n2 - a/gcd)`` distinct sums (the equal sums
    form chains along ``(+b/gcd, -a/gcd)``; each chain link is one coincidence); more dims
    are enumerated.
    """
    L, _, n = g.shape
    T = comp.coef.shape[0]
    out = np.ones((L, T, n), dtype=np.int64)
    for t in range(T):
        for c in np.flatnonzero(comp.rank_used[t]):
            dims = np.flatnonzero(comp.coef[t, c])
            if len(dims) == 1:
                out[:, t] *= g[:, dims[0]]
            elif len(dims) == 2:
                d1, d2 = dims
                n1, n2 = g[:, d1], g[:, d2]
                a = comp.coef[t, c, d1] * tile_below[:, d1]
                b = comp.coef[t, c, d2] * tile_below[:, d2]
                k = np.gcd(a, b)
                links = np.maximum(n1 - b // k, 0) * np.maximum(n2 - a // k, 0)
                out[:, t] *= n1 * n2 - links
            else:
                out[:, t] *= _distinct_sums(comp.coef[t, c], g, tile_below, int(comp.fanout.max()))
    return out


def _distinct_sums(coef_c: IntArray, g: IntArray, tile_below: IntArray, grid: int) -> IntArray:
    """(L, n) distinct values of ``sum_d coef_c[d] * tile_below[d] * i_d`` over the spatial
    grid ``i_d < g[d]``, by enumeration (at most ``grid`` points per level and row)."""
    L, D, n = g.shape
    g_eff = np.where(coef_c[None, :, None] > 0, g, 1).transpose(0, 2, 1).reshape(L * n, D)
    step = (coef_c[None, :, None] * tile_below).transpose(0, 2, 1).reshape(L * n, D)
    idx = np.arange(grid)
    radix = np.ones_like(g_eff)
    radix[:, 1:] = np.cumprod(g_eff[:, :-1], axis=1)
    digits = (idx[None, :, None] // radix[:, None, :]) % g_eff[:, None, :]
    valid = idx[None, :] < np.prod(g_eff, axis=1)[:, None]
    vals = np.where(valid, (digits * step[:, None, :]).sum(-1), -1)
    vals.sort(axis=1)
    distinct = ((np.diff(vals, axis=1) != 0) & (vals[:, 1:] >= 0)).sum(1) + (vals[:, 0] >= 0)
    return distinct.reshape(L, n)


def _spans(coef_rows: FloatArray, ext: IntArray) -> IntArray:
    """(..., R, n) spans ``1 + sum_d coef[r, d] (ext[..., d, :] - 1)`` for coefficient rows
    ``coef_rows`` (R, D), as one float64 matrix product (exact: values far below 2**53)."""
    return (coef_rows @ (ext - 1).astype(np.float64)).astype(np.int64) + 1


def _batch_counts(comp: _Compiled, b: MappingBatch) -> tuple:
    """Counts of one chunk; returns arrays with the batch axis first, like `Metrics`."""
    n, L, D = b.temporal.shape
    T, C, _ = comp.coef.shape
    cols = np.arange(n)
    temporal = np.ascontiguousarray(b.temporal.transpose(1, 2, 0))  # (L, D, n)
    g = np.ascontiguousarray((b.spatial[..., 0] * b.spatial[..., 1]).transpose(1, 2, 0))
    order = np.ascontiguousarray(b.order.transpose(1, 2, 0))  # (L, D, n): dim at position k
    keep = np.ascontiguousarray(b.keep.transpose(1, 2, 0))  # (L, T, n)
    fac = temporal * g
    tile = np.ones((L + 1, D, n), dtype=np.int64)  # tile[L]: one MAC
    for lv in range(L - 1, -1, -1):
        tile[lv] = tile[lv + 1] * fac[lv]
    stride = g * tile[1:]  # (L, D, n) stride of the temporal loop (l, d)

    # Loops in nest order, outermost first (P = L*D positions), then compacted so that the
    # active loops (bound >= 2) of each row come first, in order: inactive loops neither
    # weigh nor move anything, and most loops of a mapping are inactive. The compaction
    # sorts small integer keys ``inactive << bits | position`` along each row (batch-first,
    # contiguous rows: numpy sorts and scans along a strided axis many times slower).
    P = L * D
    order_bf = b.order  # (n, L, D)
    bound_bf = np.take_along_axis(b.temporal, order_bf, axis=2).reshape(n, P)
    active_bf = bound_bf >= 2
    n_active = active_bf.sum(axis=1)
    K = max(int(n_active.max()) if n else 0, 1)
    bits = max(P - 1, 1).bit_length()
    key_dtype = np.int16 if bits < 15 else np.int64
    keys = (~active_bf).astype(key_dtype) << bits
    keys |= np.arange(P, dtype=key_dtype)
    keys.sort(axis=1)
    pick_bf = keys[:, :K] & key_dtype((1 << bits) - 1)  # (n, K) nest positions
    pick = pick_bf.T.astype(np.int64)
    real = np.arange(K)[:, None] < n_active[None, :]
    rows_bf = np.arange(n)[:, None] * P
    flat_pick = (rows_bf + pick_bf).ravel()
    dim_k = np.ascontiguousarray(order_bf.reshape(-1)[flat_pick].reshape(n, K).T)
    bound_k = np.where(real, bound_bf.reshape(-1)[flat_pick].reshape(n, K).T, 1)
    stride_nest = np.take_along_axis(stride, order, axis=1).reshape(P, n)
    stride_k = stride_nest.reshape(-1)[(pick * n + cols[None, :]).ravel()].reshape(K, n)
    prefix_ext = np.ones((K + 1, n), dtype=np.int64)  # product of the bounds of loops 0..k-1
    for k in range(K):
        np.multiply(prefix_ext[k], bound_k[k], out=prefix_ext[k + 1])
    weight = prefix_ext[:K] * (bound_k - 1)  # (K, n)
    step_k = (stride_k * real).astype(np.int32)  # inactive padding moves nothing

    # Spans and sizes of each level's tile: (L+1, T, C, n), (L+1, T, n).
    span = _spans(comp.coef_rows, tile).reshape(L + 1, T, C, n)
    size = np.prod(span, axis=2)

    # Eq. D, per tensor and per level c = 1..L-1 that may keep it (level 0 is delivered
    # once: the whole tensor). Work is per coordinate ("slot") on (loops, n) arrays.
    deliv = np.zeros((L + 1, T, n), dtype=np.int64)
    deliv[0] = comp.tensor_sizes[:, None]
    # Loops above level c: the first kc positions (the active loops of levels 0..c-1).
    per_level = (temporal >= 2).sum(axis=1)  # (L, n)
    kcs = [np.zeros(n, dtype=np.int64)]
    for c in range(1, L):
        kcs.append(kcs[-1] + per_level[c - 1])
    for t in range(T):
        levels_t = [c for c in range(1, L) if comp.holds[c, t]]
        if not levels_t:
            continue
        if comp.closed[t]:
            # Closed form of eq. D when every moving coordinate has one dim: a step of loop
            # j moves some coordinate exactly when a loop of a relevant dim is among loops
            # j..kc-1, and then by at least the tile's span (strides of nested loops of one
            # dim shrink by at least their bounds), so it never slides: Delta_j = |tile|
            # up to the innermost relevant loop J and 0 below it, and the sum telescopes to
            # F_c = |tile| x (product of the bounds of loops 0..J).
            rel_k = comp.rel[t][dim_k]
            last_rel = np.zeros((K + 1, n), dtype=np.int64)  # loops 0..J among the first k
            for k in range(K):
                np.copyto(last_rel[k + 1], last_rel[k])
                np.copyto(last_rel[k + 1], k + 1, where=rel_k[k])
            for c in levels_t:
                deliv[c, t] = size[c, t] * prefix_ext[last_rel[kcs[c], cols], cols]
            continue
        n_slots = len(comp.slots[t])
        # pow3[k]: k is a power of three (exactly one slot moved).
        pow3 = np.zeros(3 ** n_slots, dtype=bool)
        pow3[[3 ** u for u in range(n_slots)]] = True
        shift = []  # per slot: shift of one step of each loop, and its suffix sums
        for coef_u, cu in comp.slots[t]:
            a_u = coef_u[dim_k] * step_k  # (K, n)
            sfx_u = np.zeros((K + 1, n), dtype=np.int32)
            for k in range(K - 1, -1, -1):
                np.add(sfx_u[k + 1], a_u[k], out=sfx_u[k])
            shift.append((a_u, sfx_u, cu))
        for c in levels_t:
            kc = kcs[c]
            Kc = int(kc.max()) if n else 0
            sz = size[c, t]
            if Kc == 0 or n_slots == 0:
                deliv[c, t] = sz
                continue
            # Per slot u: key += sign(shift_u) * 3**u identifies which slots moved and which
            # way (one moved slot <=> |key| is a power of 3); partial += |shift_u| x (size /
            # span_u) is the new volume when only slot u moves (>= size when it jumps).
            key = np.zeros((Kc, n), dtype=np.int32)
            partial = np.zeros((Kc, n), dtype=np.int64)
            for u, (a_u, sfx_u, cu) in enumerate(shift):
                # Step of loop j: forward along its dim, every active loop inside it (and
                # above c) back to its start.
                sigma = a_u[:Kc] - sfx_u[1:Kc + 1] + sfx_u[kc, cols]
                key += np.sign(sigma) * np.int32(3 ** u)
                partial += np.abs(sigma) * (sz // span[c, t, cu])
            slide = pow3[np.abs(key)] & (partial < sz)
            # Timeloop's gradient reset: a slide other than the innermost loop's (same
            # coordinate, same direction) fetches the whole tile.
            inner = np.maximum(kc - 1, 0)
            inner_slide = slide[inner, cols] & (kc > 0)
            keep_slide = slide & (~inner_slide | (key == key[inner, cols]))
            delta = np.where(key == 0, 0, np.where(keep_slide, partial, sz))
            w = np.where(np.arange(Kc)[:, None] < kc, weight[:Kc], 0)
            deliv[c, t] = sz + (w * delta).sum(axis=0)
    macs_per_unit = np.prod(temporal, axis=(0, 1))
    deliv[L] = macs_per_unit

    # Keepers: child of (p, t) = next inner level keeping t, or L (the MACs).
    nxt = np.full((L + 1, T, n), L, dtype=np.int64)
    for p in range(L - 1, -1, -1):
        nxt[p] = np.where(keep[p], p, nxt[p + 1])
    child = nxt[1:]  # (L, T, n): first keeper strictly below p

    groups = _distinct_groups(comp, g, tile[1:])  # (L, T, n)
    pg = np.ones((L + 1, T, n), dtype=np.int64)
    for lv in range(L):
        np.multiply(pg[lv], groups[lv], out=pg[lv + 1])
    used_below = np.prod(g, axis=1)  # (L, n)
    pu = np.ones((L + 1, n), dtype=np.int64)
    for lv in range(L):
        np.multiply(pu[lv], used_below[lv], out=pu[lv + 1])
    inst = pu[:L]  # utilized instances of each level

    f_child = np.take_along_axis(deliv, child, axis=0)
    # Exact quotients of products (float division is far faster than integer division and
    # exact here: the divisor divides the dividend and both are below 2**53).
    grp = np.rint(np.take_along_axis(pg, child, axis=0) / pg[:L]).astype(np.int64)
    kids = np.rint(np.take_along_axis(np.broadcast_to(pu[:, None, :], (L + 1, T, n)), child, axis=0)
                   / pu[:L, None]).astype(np.int64)
    a_p = f_child * grp
    f_p = deliv[:L].copy()
    f_p[0] = 0

    # Outputs: distinct outputs one instance ever holds (tile widened by the loops above).
    above = np.ones((L, D, n), dtype=np.int64)
    for lv in range(1, L):
        np.multiply(above[lv - 1], temporal[lv - 1], out=above[lv])
    ext = tile[:L] * above
    part = np.prod(_spans(comp.coef_rows_out, ext), axis=1)  # (L, n)

    o = comp.output
    rd, fl, up = a_p.copy(), f_p, np.zeros_like(a_p)
    rd[:, o] = a_p[:, o] - part
    fl[1:, o] = f_p[1:, o] - part[1:]
    up[:, o] = a_p[:, o]
    rd, fl, up = rd * keep, fl * keep, up * keep
    shared = (f_child * kids - a_p) * keep * inst[:, None]
    mc = shared.copy()
    mc[:, o] = 0
    sr = np.zeros_like(shared)
    sr[:, o] = shared[:, o]

    blk = comp.block[:, None, None]
    e_pi = _ceil_div(rd, blk) * comp.read_pj[:, None, None] + \
        (_ceil_div(fl, blk) + _ceil_div(up, blk)) * comp.write_pj[:, None, None]
    rd_pi, wr_pi = rd.sum(axis=1), (fl + up).sum(axis=1)  # (L, n) words per instance
    bw_cyc = np.maximum(rd_pi / comp.read_bw[:, None], wr_pi / comp.write_bw[:, None]).max(axis=0)
    cyc = np.ceil(np.maximum(macs_per_unit.astype(np.float64), bw_cyc))
    i3 = inst[:, None]

    def batch_first(x: np.ndarray) -> np.ndarray:
        return x.transpose(2, 0, 1)

    return (batch_first(rd * i3), batch_first(fl * i3), batch_first(up * i3), batch_first(e_pi * i3),
            batch_first(mc), batch_first(sr), cyc)
