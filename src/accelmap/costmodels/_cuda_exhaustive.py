"""Exhaustive search on the GPU: every cost-distinct point of a `MapSpace`, evaluated on the
device, with only the best point's index and the counters coming back.

The split follows the cost of each part. The host walks the tile rows of the space
(``MapSpace._tile_chunks``: one row per combination of factor-table rows, with its count of
cost-distinct loop orders), drops the rows below the space's minimum utilization (it depends
on the temporal factors alone, so no order or bypass of such a row is legal; their points
still count as evaluated, as on the CPU), and ships the others in large launches as int32
factor arrays with the prefix sums of their point counts. A row of ``c`` orders stands for
``c x 2**n_keep`` points: its order index ``i`` and free-bypass pattern ``b`` are the local
point ``i x 2**n_keep + b``, the order in which `MapSpace.enumerate` yields them.

On the device each thread walks the points ``tid, tid + n_threads, ...`` (neighbouring lanes
take neighbouring points: the same tile row and mostly the same orders, so a warp follows
one path through the loop nest), finds its row by binary search in the prefix sums, sets the
bypass bits from ``b``, checks fanouts and capacities with the specialized ``fits`` of
`accelmap.costmodels._cuda_search`, and for a fitting point decodes order index ``i`` as
``MapSpace._expand_orders`` does (per level: the fixed outer loops, then the free loops as a
Lehmer code over the free loops of bound > 1, unit ones after them in dim order, then the
fixed inner loops) and evaluates the specialized ``edp``. Each block reduces its threads'
best (EDP, point index) pairs lexicographically in shared memory, so ties go to the point
the CPU enumeration meets first, and writes one (EDP, index, legal count) triple. The host
turns the winning index back into a mapping with ``MapSpace._expand_orders`` itself.

Launches are asynchronous: the host prepares the next chunk of tile rows while the device
evaluates the current one.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.costmodels import _cuda, _cuda_search
from accelmap.errors import SpecError

try:  # a module global: the CUDA simulator swaps ``cuda`` in a kernel's globals
    from numba import cuda
except Exception:  # no numba-cuda; `accelmap.costmodels._cuda.require` says so first
    cuda = None  # type: ignore[assignment]

__all__ = ["ExhaustiveGpuResult", "exhaustive_search"]

_TPB = 128
_I64_MAX = np.iinfo(np.int64).max


@functools.lru_cache(maxsize=8)
def exhaustive_kernel(spec: _cuda_search.SearchSpec, max_registers: int | None = None) -> Any:
    """The exhaustive kernel of one (problem, arch) (compiled at first launch)."""
    from numba import config, float64, int8, int16, int32, int64

    dev = _cuda_search.search_kernels(spec)
    fits, edp = dev["fits"], dev["edp"]
    dims = spec.dims
    L, D, C, GRID = dims["L"], dims["D"], dims["C"], dims["GRID"]
    L1, LD1 = L + 1, L * D + 1
    TPB = _TPB
    ONE = np.int64(1)
    BIG = np.int64(_I64_MAX)

    @cuda.jit(device=True)
    def decode_order(oi, temporal, order, outer, nout, inner, nin, free, nfree, fact, items):
        """Order index ``oi`` of a tile row -> loop orders, as ``MapSpace._expand_orders``."""
        rem = oi
        for lv in range(L):
            o = nout[lv]
            for j in range(o):
                order[lv, j] = outer[lv, j]
            ni = nin[lv]
            for j in range(ni):
                order[lv, D - ni + j] = inner[lv, j]
            m = nfree[lv]
            if m == 0:
                continue
            k = 0
            for i in range(m):  # the free loops of bound > 1 first, in dim order
                if temporal[lv, free[lv, i]] > 1:
                    items[k] = free[lv, i]
                    k += 1
            u = k
            for i in range(m):  # then the unit ones
                if temporal[lv, free[lv, i]] <= 1:
                    items[u] = free[lv, i]
                    u += 1
            idx = rem % fact[k]
            rem //= fact[k]
            left = m
            for i in range(m):  # Lehmer digits, most significant first; zero past the k-th
                di = 0
                if i < k:
                    radix = fact[k - 1 - i]
                    di = idx // radix
                    idx -= di * radix
                order[lv, o + i] = items[di]
                for j in range(di, left - 1):
                    items[j] = items[j + 1]
                left -= 1

    capped = max_registers is not None and not config.ENABLE_CUDASIM  # type: ignore[attr-defined]
    jit = cuda.jit(max_registers=max_registers) if capped else cuda.jit  # type: ignore[call-arg]

    @jit
    def kernel(n_points, rt, row_t, row_s, start, outer, nout, inner, nin, free, nfree, kfree, n_keep, kbase, fact,
               blk_obj, blk_idx, blk_legal, per_point):
        tid = cuda.grid(1)
        stride = cuda.gridsize(1)
        nl, nt = rt[0], rt[1]
        nrows = start.shape[0] - 1
        temporal = cuda.local.array((L, D), int32)
        g = cuda.local.array((L, D), int32)
        uxy = cuda.local.array((L, 2), int32)
        order = cuda.local.array((L, D), int8)
        items = cuda.local.array(D, int8)
        tile = cuda.local.array((L1, D), int32)
        lp = cuda.local.array(LD1, int16)
        kcs = cuda.local.array(L1, int16)
        spans = cuda.local.array(C, int32)
        shift = cuda.local.array(C, int32)
        deliv = cuda.local.array(L1, int64)
        ubs = cuda.local.array(L, int32)
        ibs = cuda.local.array(L, int64)
        rw = cuda.local.array(L, int64)
        ww = cuda.local.array(L, int64)
        ext = cuda.local.array((1, D), int32)
        buf = cuda.local.array(GRID, int32)
        best = math.inf
        bidx = BIG
        legal = np.int64(0)
        r = 0
        cur = -1
        kmask_lo = (ONE << np.int64(n_keep)) - ONE
        p = np.int64(tid)
        while p < n_points:
            lo, hi = r, nrows - 1  # points only grow: search from the last row
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if start[mid] <= p:
                    lo = mid
                else:
                    hi = mid - 1
            r = lo
            if r != cur:
                cur = r
                for lv in range(L):
                    uxy[lv, 0] = 1
                    uxy[lv, 1] = 1
                    for d in range(D):
                        temporal[lv, d] = row_t[r, lv, d]
                        g[lv, d] = row_s[r, lv, d, 0] * row_s[r, lv, d, 1]
                        uxy[lv, 0] *= row_s[r, lv, d, 0]
                        uxy[lv, 1] *= row_s[r, lv, d, 1]
            local = p - start[r]
            b = local & kmask_lo
            kmask = kbase
            for j in range(n_keep):
                if (b >> np.int64(j)) & ONE:
                    kmask |= ONE << kfree[j]
            obj = math.inf
            if fits(temporal, g, uxy, kmask, tile, spans, nl, nt):
                legal += 1
                decode_order(local >> np.int64(n_keep), temporal, order, outer, nout, inner, nin, free, nfree, fact,
                             items)
                obj = edp(temporal, g, order, kmask, tile, lp, kcs, deliv, ubs, ibs, rw, ww, spans, shift, ext, buf,
                          nl, nt)
                if obj < best:  # p grows: the first of equal values stays
                    best = obj
                    bidx = p
            if per_point.shape[0] > 1:
                per_point[p] = obj
            p += stride
        # the block's best (EDP, index) and legal count, in shared memory
        s_obj = cuda.shared.array(TPB, float64)
        s_idx = cuda.shared.array(TPB, int64)
        s_leg = cuda.shared.array(TPB, int64)
        t = cuda.threadIdx.x
        s_obj[t] = best
        s_idx[t] = bidx
        s_leg[t] = legal
        h = TPB // 2
        while h > 0:
            cuda.syncthreads()
            if t < h:
                o_obj, o_idx = s_obj[t + h], s_idx[t + h]
                if o_obj < s_obj[t] or (o_obj == s_obj[t] and o_idx < s_idx[t]):
                    s_obj[t] = o_obj
                    s_idx[t] = o_idx
                s_leg[t] += s_leg[t + h]
            h //= 2
        if t == 0:
            blk = cuda.blockIdx.x
            blk_obj[blk] = s_obj[0]
            blk_idx[blk] = s_idx[0]
            blk_legal[blk] = s_leg[0]

    return kernel


@dataclass(frozen=True, slots=True, eq=False)
class ExhaustiveGpuResult:
    """The best point of a device exhaustive search and its counters.

    ``edp`` is the device's value (``inf`` when nothing legal was met), ``mapping`` the best
    point as a one-row `MappingBatch` (None when nothing legal was met); ``evaluations`` the points visited (in
    enumeration order: a budget stops at a prefix), ``legal`` those that passed every check,
    ``size`` the cost-distinct points of the space, ``completed`` whether every one was
    visited; ``kernel_s`` the time spent waiting for the device, ``launches`` the kernel
    launches."""

    edp: float
    mapping: Any
    evaluations: int
    legal: int
    size: int
    completed: bool
    seconds: float
    kernel_s: float
    launches: int
    per_point: np.ndarray | None = None

    @property
    def evals_per_s(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else math.nan

    @property
    def legal_per_s(self) -> float:
        return self.legal / self.seconds if self.seconds > 0 else math.nan


def _order_tables(space: Any) -> tuple[np.ndarray, ...]:
    L, D = space._L, space._D
    outer = np.zeros((L, D), np.int8)
    inner = np.zeros((L, D), np.int8)
    free = np.zeros((L, D), np.int8)
    nout, nin, nfree = (np.zeros(L, np.int32) for _ in range(3))
    for lv in range(L):
        for arr, cnt, vals in ((outer, nout, space._order_outer[lv]), (inner, nin, space._order_inner[lv]),
                               (free, nfree, space._order_free[lv])):
            vals = [int(v) for v in vals]
            arr[lv, : len(vals)] = vals
            cnt[lv] = len(vals)
    return outer, nout, inner, nin, free, nfree


def check_space(space: Any) -> None:
    """`SpecError` (a `DeviceError`) where the device cannot enumerate ``space`` as the CPU does."""
    ok32, why = _cuda_search.fits_32bit(space.problem, space.arch)
    if not ok32:
        raise _cuda.DeviceError(f"exhaustive search on the GPU needs 32-bit tiles: {why}; use device cpu")
    if space.allow_padding:
        raise _cuda.DeviceError("exhaustive search on the GPU takes exact factorizations only (no allow_padding); "
                                "use device cpu")
    if not space._decoded_clean:
        raise _cuda.DeviceError("exhaustive search on the GPU: the constraints fix a bypass the arch forbids or an "
                                "order that is not a permutation; use device cpu to see the violations")
    if space.arch.n_levels * space.problem.n_tensors > 62:
        raise _cuda.DeviceError("exhaustive search on the GPU holds the bypass in 62 bits; use device cpu")


def exhaustive_search(space: Any, *, max_size: int, size: int | None = None, budget: int | None = None,
                      time_limit_s: float | None = None, rows_per_chunk: int = 1 << 16, points_per_launch: int = 1 << 26, threads: int = 1 << 18,
                      max_registers: int | None = None, per_point: bool = False) -> ExhaustiveGpuResult:
    """Every cost-distinct point of ``space`` (a `MapSpace`), in `MapSpace.enumerate`'s order,
    on the GPU; see the module docstring.

    Parameters
    ----------
    space
        The map space (constraints applied; exact factorizations).
    max_size
        Refuse spaces of more cost-distinct points (`SpaceTooLargeError`, as the CPU searcher).
    size
        The space's count of cost-distinct points when the caller has it (``MapSpace.n_distinct``).
    budget, time_limit_s
        Stop after this many points (a prefix of the enumeration) or once this many seconds
        have passed (checked between launches, after the first); the result says whether the
        space was completed.
    rows_per_chunk, points_per_launch, threads
        Tile rows the host builds at a time, points per launch (at least one chunk's worth),
        device threads per launch (each walks a grid-stride range).
    per_point
        Also return the EDP (``inf`` where illegal) of every point the device visited, in
        enumeration order (the points of rows dropped for utilization are not among them):
        for tests on small spaces.
    """
    _cuda.require()
    check_space(space)
    if threads < 1 or rows_per_chunk < 1 or points_per_launch < 1:
        raise SpecError("threads, rows_per_chunk and points_per_launch must be >= 1")
    t0 = time.perf_counter()
    if size is None:
        size = int(space.n_distinct(max_points=max_size))
    if size > max_size:
        from accelmap.errors import SpaceTooLargeError

        raise SpaceTooLargeError(f"the map space has {size:,} points, more than the limit {max_size:,}")
    problem, arch = space.problem, space.arch
    L, T = space._L, space._T
    spec = _cuda_search.search_spec(problem, arch, _cuda.sampler_tables(problem, arch))
    kern = exhaustive_kernel(spec, _cuda_search.max_registers("exhaustive", max_registers))
    rt = _cuda_search.loop_counts(spec)
    n_keep = len(space._keep_free)
    kbase = np.int64(0)
    for lv in range(L):
        for t in range(T):
            if space._keep_base[lv, t]:
                kbase |= np.int64(1) << np.int64(lv * T + t)
    kfree = np.array([int(lv) * T + int(t) for lv, t in space._keep_free] or [0], np.int64)
    fact = np.array([math.factorial(i) for i in range(space._D + 1)], np.int64)
    const_dev = [cuda.to_device(a) for a in (*_order_tables(space), kfree)]
    fact_dev = cuda.to_device(fact)
    n_macs = float(arch.n_macs)
    limit = budget if budget is not None else size
    blocks_max = max(1, (threads + _TPB - 1) // _TPB)
    pp = np.full(size if per_point else 1, np.inf)
    pp_dev = cuda.to_device(pp)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, int, int]]:
        """(tile rows, points per row, points for the device, points covered) per launch, in
        order; the last row may be cut by the budget (the device's point count says where)."""
        done = 0  # points of the enumeration covered so far (shipped or dropped)
        acc_rows: list[np.ndarray] = []
        acc_pts: list[np.ndarray] = []
        acc_take = 0
        acc_cover = 0
        for rows, counts in space._tile_chunks(max_size, rows_per_chunk):
            if done >= limit:
                break
            pts = counts * (1 << n_keep)
            begin = done + np.cumsum(pts) - pts
            take = np.clip(limit - begin, 0, pts)
            live = take > 0
            rows, pts, take = rows[live], pts[live], take[live]
            cover = int(take.sum())
            done += cover
            if space.min_utilization > 0:
                temporal, _ = space._rows_to_factors(rows)
                steps = np.prod(temporal.reshape(len(rows), -1).astype(np.float64), axis=1)
                good = problem.macs / (n_macs * steps) >= space.min_utilization - 1e-12
                rows, pts, take = rows[good], pts[good], take[good]
            acc_rows.append(rows)
            acc_pts.append(pts)
            acc_take += int(take.sum())
            acc_cover += cover
            if acc_take >= points_per_launch:
                yield np.concatenate(acc_rows), np.concatenate(acc_pts), acc_take, acc_cover
                acc_rows, acc_pts, acc_take, acc_cover = [], [], 0, 0
        if acc_cover:
            yield np.concatenate(acc_rows), np.concatenate(acc_pts), acc_take, acc_cover

    best, best_row, legal, evaluations, launches, kernel_s = math.inf, None, 0, 0, 0, 0.0
    base = 0  # enumeration index of the first point of the pending launch (per_point only)
    pending: tuple | None = None

    def collect(p: tuple) -> None:
        nonlocal best, best_row, legal, kernel_s
        outs, rows, start = p
        w0 = time.perf_counter()
        obj, idx, leg = (o.copy_to_host() for o in outs)
        kernel_s += time.perf_counter() - w0
        legal += int(leg.sum())
        finite = np.isfinite(obj)
        if finite.any():
            order = np.lexsort((idx, obj))
            i = int(order[0])
            if obj[i] < best:  # launches follow the enumeration: the first of equal values stays
                best = float(obj[i])
                r = int(np.searchsorted(start, idx[i], side="right") - 1)
                best_row = (rows[r], int(idx[i] - start[r]))

    for rows, pts, n_dev, cover in chunks():
        # (the first launch always runs, as the CPU driver evaluates its first batch)
        if evaluations and time_limit_s is not None and time.perf_counter() - t0 >= time_limit_s:
            break
        start = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(pts, out=start[1:])
        temporal, spatial = space._rows_to_factors(rows)
        if n_dev:
            blocks = int(min(blocks_max, (n_dev + _TPB - 1) // _TPB))
            outs = (cuda.device_array(blocks, np.float64), cuda.device_array(blocks, np.int64),
                    cuda.device_array(blocks, np.int64))
            sink = pp_dev[base:base + n_dev] if per_point else pp_dev
            kern[blocks, _TPB](np.int64(n_dev), rt, cuda.to_device(temporal.astype(np.int32)),
                               cuda.to_device(spatial.astype(np.int32)), cuda.to_device(start), *const_dev[:6],
                               const_dev[6], np.int64(n_keep), kbase, fact_dev, *outs, sink)
            launches += 1
            if pending is not None:
                collect(pending)
            pending = (outs, rows, start)
        base += n_dev
        evaluations += cover
    if pending is not None:
        collect(pending)
    mapping = None
    if best_row is not None:
        row, local = best_row
        batch = space._expand_orders(row[None, :], np.array([local >> n_keep], np.int64))
        if n_keep:
            bits = local & ((1 << n_keep) - 1)
            keep = batch.keep.copy()
            for j, (lv, t) in enumerate(space._keep_free):
                keep[0, lv, t] = bool((bits >> j) & 1)
            batch = type(batch)(temporal=batch.temporal, spatial=batch.spatial, order=batch.order, keep=keep)
        mapping = batch
    return ExhaustiveGpuResult(
        edp=best, mapping=mapping, evaluations=evaluations, legal=legal, size=size,
        completed=evaluations >= size, seconds=time.perf_counter() - t0, kernel_s=kernel_s, launches=launches,
        per_point=pp_dev.copy_to_host() if per_point else None)
