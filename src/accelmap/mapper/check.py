"""Legality of mappings: a vectorized mask with reason codes, and readable messages.

Inside hot paths an illegal mapping is data (a mask and a reason code), never an
exception; :func:`validate` turns the same checks into messages for one mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from accelmap._typing import BoolArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.mapper.mapping import Mapping, MappingBatch, tiles_from_factors
from accelmap.workloads.problem import Problem

__all__ = ["Reason", "BatchCheck", "check_batch", "validate", "render_loop_nest"]


class Reason(IntEnum):
    """Why a mapping is illegal; the first failing check wins (in this order)."""

    OK = 0
    SHAPE = 1  # arrays do not match the problem/arch
    FACTORS = 2  # factor product of a dim != its bound (or < bound when padding is allowed)
    ORDER = 3  # a level's order is not a permutation of the dims
    KEEP = 4  # a level keeps a tensor it may not hold, or the outermost level drops one
    FANOUT = 5  # spatial unrolling exceeds the fanout below a level
    CAPACITY = 6  # the tiles a level keeps exceed its capacity
    UTILIZATION = 7  # below a minimum PE utilization (a constraint)
    CONSTRAINT = 8  # violates a user constraint
    MODEL = 9  # the cost model cannot evaluate this mapping (e.g. unsupported shape)


@dataclass(frozen=True, slots=True)
class BatchCheck:
    """Result of :func:`check_batch`.

    valid (n,) bool; reason (n,) `Reason` codes; level (n,) the level index the reason
    refers to (-1 when it refers to none).
    """

    valid: BoolArray
    reason: IntArray
    level: IntArray


def check_batch(problem: Problem, arch: Arch, batch: MappingBatch, *, allow_padding: bool = False) -> BatchCheck:
    """Check every mapping of a batch at once.

    Parameters
    ----------
    allow_padding
        Imperfect factorization: accept factor products >= the bound (ceil-divided tiles)
        instead of exactly equal.
    """
    n = len(batch)
    reason = np.zeros(n, dtype=np.int64)
    level = np.full(n, -1, dtype=np.int64)
    if batch.n_levels != arch.n_levels or batch.n_dims != problem.n_dims or batch.n_tensors != problem.n_tensors:
        return BatchCheck(np.zeros(n, bool), np.full(n, int(Reason.SHAPE)), level)

    def mark(bad: BoolArray | np.bool_, code: Reason, lvl: IntArray | int) -> None:
        new = bad & (reason == 0)
        reason[new] = int(code)
        level[new] = lvl[new] if isinstance(lvl, np.ndarray) else lvl

    # Reductions over the small level/dim axes run as a few whole-batch operations, one
    # per level or dim (numpy reduces short middle axes slowly); products are int64 like
    # ``np.prod``, so the results are the same bit for bit.
    L, D = arch.n_levels, problem.n_dims
    temporal, spatial, keep = batch.temporal, batch.spatial, batch.keep
    sx, sy = spatial[..., 0], spatial[..., 1]
    fac = temporal * sx * sy  # (n, L, D) == batch.factors()
    prod = fac[:, 0].copy()
    for lv in range(1, L):
        prod *= fac[:, lv]
    positive = (temporal.reshape(n, L * D).min(axis=1, initial=1) >= 1) & \
        (spatial.reshape(n, L * D * 2).min(axis=1, initial=1) >= 1)
    bounds = problem.bounds
    ok = (prod >= bounds).all(axis=1) if allow_padding else (prod == bounds).all(axis=1)
    mark(~(ok & positive), Reason.FACTORS, -1)

    perm_ok = permutation_rows(batch.order)  # (n, n_levels)
    mark(~perm_ok.all(axis=1), Reason.ORDER, np.argmin(perm_ok, axis=1))

    holds = arch.holds_mask(problem)  # (L, T)
    forbidden = keep & ~holds  # (n, L, T)
    keep_bad = forbidden[:, :, 0].copy()  # (n, L): any over T, one pass per tensor
    for t in range(1, forbidden.shape[2]):
        keep_bad |= forbidden[:, :, t]
    keep_bad[:, 0] |= ~keep[:, 0, :].all(axis=1)
    mark(keep_bad.any(axis=1), Reason.KEEP, np.argmax(keep_bad, axis=1))

    used_x, used_y = sx[:, :, 0].copy(), sy[:, :, 0].copy()  # (n, L) == batch.spatial_used()
    for d in range(1, D):
        used_x *= sx[:, :, d]
        used_y *= sy[:, :, d]
    fanouts = arch.fanouts
    fan_bad = (used_x > fanouts[None, :, 0]) | (used_y > fanouts[None, :, 1])  # (n, L)
    mark(fan_bad.any(axis=1), Reason.FANOUT, np.argmax(fan_bad, axis=1))

    need = _need_words(problem, tiles_from_factors(fac), keep)  # (n, L)
    cap_bad = need > arch.capacities_words[None]
    mark(cap_bad.any(axis=1), Reason.CAPACITY, np.argmax(cap_bad, axis=1))
    return BatchCheck(reason == 0, reason, level)


def permutation_rows(order: IntArray) -> BoolArray:
    """(n, L) from (n, L, D) orders: True where a level's order is a permutation of 0..D-1.

    The OR of ``1 << value`` over a row is ``2**D - 1`` exactly when its D values are
    distinct and in range (a value out of range sets bit D instead), one pass per position.
    """
    n, L, D = order.shape
    if D > 62:
        return (np.sort(order, axis=2) == np.arange(D)).all(axis=2)
    rows = order.reshape(n * L, D)
    if rows.size and 0 <= rows.min() and rows.max() < D:  # all in range: one whole-array shift
        bits = np.left_shift(1, rows.astype(np.int64, copy=False))
        acc = bits[:, 0].copy()
        for k in range(1, D):
            acc |= bits[:, k]
        return (acc == (1 << D) - 1).reshape(n, L)
    acc = np.zeros(n * L, dtype=np.int64)
    for k in range(D):
        # negative values wrap to huge unsigned ones: both ends clip to the bit D
        v = np.minimum(rows[:, k].astype(np.int64, copy=False).view(np.uint64), np.uint64(D)).view(np.int64)
        acc |= np.left_shift(1, v)
    return (acc == (1 << D) - 1).reshape(n, L)


def _need_words(problem: Problem, tiles: IntArray, keep: BoolArray) -> IntArray:
    """(n, L) footprints of the kept tiles summed per level (tensor by tensor, int64)."""
    fp = problem.footprint(tiles)  # (n, L, T)
    need = fp[..., 0] * keep[..., 0]
    for t in range(1, fp.shape[-1]):
        need += fp[..., t] * keep[..., t]
    return need


def capacity_need_words(problem: Problem, batch: MappingBatch) -> IntArray:
    """(n, n_levels) words each level must hold: the footprints of the tiles it keeps.

    Input tiles include the sliding-window halo (see `Problem.footprint`).
    """
    return _need_words(problem, batch.tiles(), batch.keep)


def validate(problem: Problem, arch: Arch, mapping: Mapping, *, allow_padding: bool = False) -> list[str]:
    """Every problem of one mapping, each with the level, dim or tensor and the numbers."""
    msgs: list[str] = []
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    shapes = {
        "temporal": (mapping.temporal.shape, (L, D)),
        "spatial": (mapping.spatial.shape, (L, D, 2)),
        "order": (mapping.order.shape, (L, D)),
        "keep": (mapping.keep.shape, (L, T)),
    }
    for key, (got, want) in shapes.items():
        if tuple(got) != want:
            msgs.append(
                f"mapping.{key} has shape {tuple(got)}; expected {want} for {L} levels "
                f"{list(arch.level_names)}, dims {list(problem.dim_names)}, tensors {list(problem.tensor_names)}"
            )
    if msgs:
        return msgs
    names = arch.level_names
    for a, key in ((mapping.temporal, "temporal"), (mapping.spatial, "spatial")):
        bad = np.argwhere(a < 1)
        for idx in bad:
            msgs.append(f"{key} factor at level {names[idx[0]]}, dim {problem.dim_names[idx[1]]} is {a[tuple(idx)]}; expected >= 1")
    f = mapping.factors()
    for d, dim in enumerate(problem.dims):
        # Exact integers: an int64 product could wrap around to the bound.
        prod = math.prod(int(x) for x in (*mapping.temporal[:, d], *mapping.spatial[:, d].ravel()))
        okay = prod >= dim.bound if allow_padding else prod == dim.bound
        if not okay:
            parts = " x ".join(f"{names[lv]}:{int(f[lv, d])}" for lv in range(L) if f[lv, d] != 1) or "1"
            msgs.append(
                f"dim {dim.name}: factors multiply to {prod} ({parts}), expected "
                f"{'at least ' if allow_padding else ''}{dim.bound}"
            )
    for lv in range(L):
        if sorted(mapping.order[lv].tolist()) != list(range(D)):
            msgs.append(f"level {names[lv]}: loop order {mapping.order[lv].tolist()} is not a permutation of 0..{D - 1}")
    holds = arch.holds_mask(problem)
    for lv in range(L):
        for t in range(T):
            if mapping.keep[lv, t] and not holds[lv, t]:
                msgs.append(f"level {names[lv]} keeps {problem.tensors[t].name} but may not hold it")
            if lv == 0 and not mapping.keep[lv, t]:
                msgs.append(f"outermost level {names[0]} must keep {problem.tensors[t].name}")
    used = np.prod(mapping.spatial, axis=1)  # (L, 2)
    for lv, level in enumerate(arch.levels):
        for axis, (u, cap) in enumerate(zip(used[lv], (level.fanout_x, level.fanout_y), strict=True)):
            if u > cap:
                dims = " x ".join(
                    f"{problem.dim_names[d]}={int(mapping.spatial[lv, d, axis])}"
                    for d in range(D) if mapping.spatial[lv, d, axis] > 1
                )
                msgs.append(
                    f"level {level.name}: spatial {'XY'[axis]} unrolling {dims} uses {int(u)} instances; "
                    f"fanout {'XY'[axis]} is {cap}"
                )
    need = capacity_need_words(problem, mapping.as_batch())[0]
    fp = problem.footprint(mapping.tiles())
    for lv, level in enumerate(arch.levels):
        if level.capacity_words is not None and need[lv] > level.capacity_words:
            parts = ", ".join(
                f"{problem.tensors[t].name} {int(fp[lv, t])}" for t in range(T) if mapping.keep[lv, t]
            )
            msgs.append(
                f"level {level.name}: tiles need {int(need[lv])} words ({parts}); capacity is "
                f"{level.capacity_words} words"
            )
    return msgs


def render_loop_nest(problem: Problem, arch: Arch, mapping: Mapping) -> str:
    """A readable loop nest: one block per level, temporal loops outermost first, then the
    spatial loops below the level (marked ``spatial-X``/``spatial-Y``); unit loops omitted."""
    lines: list[str] = []
    indent = 0
    tiles = mapping.tiles()
    fp = problem.footprint(tiles)
    for lv, level in enumerate(arch.levels):
        kept = [problem.tensors[t].name for t in range(problem.n_tensors) if mapping.keep[lv, t]]
        sizes = ", ".join(f"{problem.tensors[t].name}={int(fp[lv, t])}" for t in range(problem.n_tensors) if mapping.keep[lv, t])
        lines.append("  " * indent + f"[{level.name}] keeps {', '.join(kept) or 'nothing'}" + (f" ({sizes} words)" if sizes else ""))
        for d in mapping.order[lv]:
            b = int(mapping.temporal[lv, d])
            if b > 1:
                lines.append("  " * indent + f"for {problem.dim_names[d]} in [0:{b})")
                indent += 1
        for axis in (0, 1):
            for d in range(problem.n_dims):
                b = int(mapping.spatial[lv, d, axis])
                if b > 1:
                    lines.append("  " * indent + f"spatial-{'XY'[axis]} for {problem.dim_names[d]} in [0:{b})")
                    indent += 1
    lines.append("  " * indent + f"{arch.compute.name}: " + " += ".join(
        [problem.tensors[problem.output_index].name,
         " * ".join(t.name for t in problem.tensors if not t.is_output)]))
    return "\n".join(lines)
