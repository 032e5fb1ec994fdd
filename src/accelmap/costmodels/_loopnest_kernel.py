"""Compiled evaluation of the ``loopnest`` model on the CPU: how its rules are driven fast.

This is the fast path of `LoopNestModel.evaluate`. What is counted, each counting rule written
once, and the generic driver that runs them are `accelmap.costmodels._loopnest_rules`'; this
module holds what makes them fast and drives them:

* `KernelConsts` (`kernel_consts`, `rebound`): everything of (problem, arch) the rules read,
  as contiguous arrays, with the structure of `accelmap.costmodels._loopnest_cpu` that keys
  its compiled drivers;
* `evaluate_batch`: every row of a batch, on one of the two CPU drivers, the generic one
  (``_loopnest_rules.eval_rows``: one compiled function for every structure, the rules
  inlined at numba's IR stage) or `_loopnest_cpu`'s, specialised per structure (the rules
  inlined with the structure's tables as constants, ``_loopnest_rules.INLINED``, or the row
  written out as source per structure by `accelmap.costmodels._loopnest_gen`), in blocks of
  rows over threads; when the specialised one takes over (``_SPECIALISE_AFTER_ROWS``,
  ``_SPECIALISE_IN_BACKGROUND``);
* `SerialPlan` (with `_Outputs`): a serial call of the specialised rows in few Python steps,
  its outputs refilled in place;
* the drivers' scratch kept per thread (`ThreadScratch`), the counts array taken from the
  caller's `OutputBuffers` with its zero entries marked (`_zeros_mark`), and the threads a
  batch may use (`_threads`, which the systolic and aspect kernels share).

The generic CUDA kernels of `accelmap.costmodels._cuda` run the same rules on the arrays of
`KernelConsts` (`KernelConsts.as_tuple`). Outputs are written into preallocated arrays,
every entry of every row (so they may be ``np.empty``).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numba
import numpy as np
from numba.np.ufunc import parallel as _numba_parallel

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels import _loopnest_cpu
from accelmap.costmodels._loopnest_rules import (
    _COMPUTE_PJ,
    _CYCLES,
    _ENERGY,
    _ENERGY_PJ,
    _FILLS,
    _MCAST,
    _READS,
    _SRED,
    _UPDATES,
    _UTIL,
    eval_rows,
    scratch,
)
from accelmap.workloads.problem import Problem

if TYPE_CHECKING:
    from accelmap.costmodels.base import Metrics, ObjectiveMetrics

__all__ = ["KernelConsts", "kernel_consts", "evaluate_batch"]


@dataclass(frozen=True, slots=True, eq=False)
class KernelConsts:
    """Everything of (problem, arch) the kernel reads, as contiguous arrays.

    ``coef`` (T, C, D) affine coefficients; the same sparse: ``nterm`` (T, C) nonzero terms
    of each coordinate, ``tdim``/``tcoef`` (T, C, M) their dims and coefficients; ``closed``
    (T,) every coordinate that can move (dims of bound > 1) has one dim; ``rel`` (T, D) the
    dim indexes the tensor;
    ``bounds`` (D,); ``holds`` (L, T); ``fan_xy`` (L, 2); ``capacity`` (L,) words, inf =
    unbounded; ``block`` (L,) words per access; ``read_pj``/``write_pj`` (L,); ``read_bw``/
    ``write_bw`` (L,) words per cycle, inf = unlimited; ``tensor_size`` (T,); ``scal``
    float64 (macs, n_macs, mac_pj); ``ints`` int64 (output tensor index, max fanout);
    ``structure`` the CPU engine's compile-time constants (`_loopnest_cpu.structure`; not
    part of `as_tuple`, which the CUDA kernels take).
    """

    coef: IntArray
    nterm: IntArray
    tdim: IntArray
    tcoef: IntArray
    closed: BoolArray
    rel: BoolArray
    bounds: IntArray
    holds: BoolArray
    fan_xy: IntArray
    capacity: FloatArray
    block: IntArray
    read_pj: FloatArray
    write_pj: FloatArray
    read_bw: FloatArray
    write_bw: FloatArray
    tensor_size: IntArray
    scal: FloatArray
    ints: IntArray
    structure: tuple = ()  # `_loopnest_cpu.structure`: the CPU engine's compile-time constants

    def as_tuple(self) -> tuple:
        return (self.coef, self.nterm, self.tdim, self.tcoef, self.closed, self.rel, self.bounds, self.holds, self.fan_xy, self.capacity, self.block,
                self.read_pj, self.write_pj, self.read_bw, self.write_bw, self.tensor_size, self.scal, self.ints)


def kernel_consts(problem: Problem, arch: Arch) -> KernelConsts:
    inf = np.inf
    c = np.ascontiguousarray
    levels = arch.levels
    coef = np.ascontiguousarray(problem.coefficients, dtype=np.int64)
    T, C, D = coef.shape
    nz = coef != 0
    M = max(int(nz.sum(axis=2).max()), 1)
    nterm = nz.sum(axis=2).astype(np.int64)
    tdim = np.zeros((T, C, M), np.int64)
    tcoef = np.zeros((T, C, M), np.int64)
    for t in range(T):
        for cc in range(C):
            dims = np.flatnonzero(nz[t, cc])
            tdim[t, cc, :dims.size] = dims
            tcoef[t, cc, :dims.size] = coef[t, cc, dims]
    big = problem.bounds > 1
    closed = np.array([all(int((nz[t, cc] & big).sum()) <= 1 for cc in range(C)) for t in range(T)])
    consts = KernelConsts(
        coef=coef, nterm=nterm, tdim=tdim, tcoef=tcoef, closed=closed,
        rel=c(problem.relevance, dtype=np.bool_),
        bounds=c(problem.bounds, dtype=np.int64),
        holds=c(arch.holds_mask(problem), dtype=np.bool_),
        fan_xy=c(arch.fanouts, dtype=np.int64),
        capacity=c(arch.capacities_words, dtype=np.float64),
        block=np.array([lv.block_words for lv in levels], dtype=np.int64),
        read_pj=np.array([lv.read_energy_pj for lv in levels], dtype=np.float64),
        write_pj=np.array([lv.write_energy_pj for lv in levels], dtype=np.float64),
        read_bw=np.array([inf if lv.read_bandwidth_words_per_cycle is None else lv.read_bandwidth_words_per_cycle
                          for lv in levels], dtype=np.float64),
        write_bw=np.array([inf if lv.write_bandwidth_words_per_cycle is None else lv.write_bandwidth_words_per_cycle
                           for lv in levels], dtype=np.float64),
        tensor_size=c(problem.tensor_sizes(), dtype=np.int64),
        scal=np.array([float(problem.macs), float(arch.n_macs), float(arch.compute.energy_per_mac_pj)]),
        ints=np.array([problem.output_index, int(max(lv.fanout for lv in levels))], dtype=np.int64),
    )
    return replace(consts, structure=_loopnest_cpu.structure(consts))


def rebound(consts: KernelConsts, problem: Problem) -> KernelConsts:
    """The `KernelConsts` of ``problem``, a problem that differs from the one of ``consts`` in
    its bounds only (a padded iteration, `Problem.padded_iteration`): the bounds, the tensor
    sizes and the MAC count replaced, everything else shared (the structure too, so no new
    compile), or `kernel_consts` afresh where a bound of 1 became larger (``closed`` and the
    structure depend on which bounds exceed 1)."""
    big = problem.bounds > 1
    if not np.array_equal(big, consts.bounds > 1):
        raise ValueError("rebound: the bounds that exceed 1 differ; build kernel_consts afresh")
    scal = consts.scal.copy()
    scal[0] = float(problem.macs)
    return replace(consts, bounds=np.ascontiguousarray(problem.bounds, dtype=np.int64),
                   tensor_size=np.ascontiguousarray(problem.tensor_sizes(), dtype=np.int64), scal=scal)



class ThreadScratch:
    """The drivers' scratch kept across calls, one set per thread (a call uses its thread's
    set; the blocks of a call run on other threads on slices of it), per shape: what
    `evaluate_batch` takes with ``scratch_buffers``. Scratch allocated anew on every call
    made the generated rows 3-5 ns a row slower than the same rows on scratch kept across
    calls (one process, interleaved, 10,000 and 100,000 rows; touching new scratch first did
    not help), and handing it out through an `OutputBuffers` (reference counts under a lock)
    cost about 40 us a call at 10,000 rows, 4 ns a row, on the Python objects the rows had
    pushed out of the caches. A pickled one carries no arrays."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __reduce__(self) -> tuple:
        return (ThreadScratch, ())

    def get(self, key: tuple, make) -> tuple:  # noqa: ANN001
        """The arrays of ``key`` of this thread (``make()`` the first time)."""
        sets = getattr(self._local, "sets", None)
        if sets is None:
            sets = self._local.sets = {}
        got = sets.get(key)
        if got is None:
            if len(sets) >= 8:
                sets.clear()
            got = sets[key] = make()
        return got


def _scratch_from(kept: ThreadScratch | None, n_blocks: int, L: int, D: int, T: int, C: int,
                  grid: int) -> tuple[tuple[IntArray, ...], FloatArray]:
    """`scratch` and the per-block one-row counts scratch of an objective-only call: this
    thread's kept set of ``kept`` when given, else new arrays."""
    def make() -> tuple[tuple[IntArray, ...], FloatArray]:
        return scratch(n_blocks, L, D, T, C, grid), np.empty((n_blocks, 1, 6, L, T))

    if kept is None:
        return make()
    return kept.get((n_blocks, L, D, T, C, grid), make)


# Below this many rows a batch runs on the calling thread (starting the pool costs more).
_PARALLEL_MIN_ROWS = 4096


def _numba_threads() -> int:
    """``numba.get_num_threads()``, the calling thread's number of numba threads. Once numba's
    threading layer is up, its own reader is called directly: ``get_num_threads`` first takes
    two locks to see whether the layer must be started (2.3 us a call warm, against 0.4 us,
    and several times that with the caches cold after a batch's rows)."""
    if getattr(_numba_parallel, "_is_initialized", False):
        n = int(_numba_parallel._get_num_threads())  # type: ignore[attr-defined]  # numba-internal reader, not in its stubs
        if n > 0:
            return n
    return numba.get_num_threads()


def _threads() -> int:
    """numba's threads, capped by ``OMP_NUM_THREADS`` when set (Ray sets it to a task's CPUs, so
    that workers sharing a machine do not oversubscribe it)."""
    n = _numba_threads()
    if n <= 1:  # (no cap can raise it: the environment is not read, 7 us a call with cold caches)
        return n
    cap = os.environ.get("OMP_NUM_THREADS", "").strip()
    return min(n, int(cap)) if cap.isdigit() and int(cap) > 0 else n


# The two CPU drivers. `_loopnest_cpu`'s, specialised per structure, is about twice as fast
# per row but compiles for 10-30 s per new structure (once: numba's on-disk cache keeps it);
# ``_loopnest_rules.eval_rows``, one compiled function for every structure, serves a model
# until it has evaluated this many rows of a (problem, arch) (`LoopNestModel` counts them), so
# that evaluating a few mappings of a new layer (``accelmap evaluate``, a short search) never
# waits for that compile.
_SPECIALISE_AFTER_ROWS = 100_000
# Where those rows are not compiled yet (neither in this process nor in numba's on-disk cache),
# a process of their own compiles them while the generic driver goes on serving here, and they
# serve once it has ended (`_loopnest_cpu.rows_ready`). False: they compile here, on the first
# call past the row count, and the model waits for that compile (the environment variable
# ``ACCELMAP_COMPILE_IN_BACKGROUND=0``; the test suite and the benchmarks that time or compare
# the specialised rows from a given call on set it so).
_SPECIALISE_IN_BACKGROUND = os.environ.get("ACCELMAP_COMPILE_IN_BACKGROUND", "1").strip() != "0"


def _scale_padded(frac: FloatArray, reads: FloatArray, fills: FloatArray, updates: FloatArray, energy: FloatArray,
                  energy_pj: FloatArray) -> None:
    """`_loopnest_numpy._count_existing_words` on the arrays of `eval_rows` (``energy_pj`` holds the
    MAC energy already, as in the rows of `_loopnest_cpu`)."""
    for t in np.flatnonzero(frac < 1.0):
        f = float(frac[t])
        before = energy[:, :, t].sum(axis=1)
        for a in (reads, fills, updates, energy):
            a[:, :, t] *= f
        energy_pj += energy[:, :, t].sum(axis=1) - before


def _counts_array(n: int, L: int, T: int, buffers, mark: object = None) -> tuple[FloatArray, bool]:  # noqa: ANN001
    """The (n, 6, L, T) counts output, uninitialised (the drivers write every entry of every
    row), and whether the entries that ``mark`` names hold 0.0 already: from ``buffers``
    (`_buffers.OutputBuffers`) when given. 720 bytes a row on a 5-level, 3-tensor problem: a
    fresh 72 MB array per 100,000-row call was mapped anew by the allocator on every call
    (about 700 page faults, `evaluate` 1.4x the time of `evaluate_objective` on
    res2a_branch2b / eyeriss-like, against 1.1x at 10,000 rows)."""
    if buffers is None:
        return np.empty((n, 6, L, T)), False
    arrays, zeroed = buffers.take_marked({"cnt": ((n, 6, L, T), np.float64)}, mark)
    return arrays["cnt"], zeroed


def _zeros_mark(consts: KernelConsts) -> tuple:
    """What the counts of every row of ``consts``' structure hold as 0.0, as an
    `OutputBuffers` mark: the entries of a level that never holds a tensor, of the output's
    multicast and of an operand's spatial reduction follow from which level may hold which
    tensor and which tensor is the output alone."""
    return ("loopnest zero counts", consts.holds.shape, consts.holds.tobytes(), int(consts.ints[0]))


def _read_only_views(cnt: FloatArray) -> tuple[FloatArray, ...]:
    """The six (n, L, T) fields of ``cnt``, read-only: a buffer whose zero entries are marked
    (`_counts_array`) must not be written by the `Metrics` that holds it."""
    ro = cnt.view()
    ro.flags.writeable = False  # (a view of a read-only view is read-only: one flag set, not six)
    return tuple(ro[:, q] for q in range(6))


class SerialPlan:
    """What a serial call of the specialised driver on one (problem, arch) needs besides the
    batch, gathered once: the generated rows (`_loopnest_cpu.rows_driver`), the run-time
    constants as the rows take them, the calling thread's scratch of one block with the
    objective's one-row counts (`ThreadScratch`), and the output sets it hands out (`_Outputs`).
    `run` is `evaluate_batch` with ``specialised=True`` on one thread, the same rows on the
    same arrays, in fewer Python steps: after a batch's rows have streamed its inputs and
    counts through the caches, every Python step between two calls runs several times slower
    than warm (a scratch look-up 0.6 us warm, 9-50 us there), and the steps of
    `evaluate_batch` took 150-270 us a call, 15-27 ns a row of a 10,000-row batch.
    A plan serves the thread that made it only (``ident``)."""

    __slots__ = ("consts", "ident", "rows", "rt", "sc", "one_row", "cnt_dims", "shape_ld", "shape_t", "names",
                 "outputs")

    def __init__(self, consts: KernelConsts, frac: FloatArray | None, scratch_buffers: ThreadScratch,
                 names: tuple[int, tuple[str, ...], tuple[str, ...]]) -> None:
        c = consts
        L, T = c.holds.shape
        D, C = c.bounds.shape[0], c.coef.shape[1]
        fr = np.ones(T) if frac is None else np.ascontiguousarray(frac, dtype=np.float64)
        sc, one_row = _scratch_from(scratch_buffers, 1, L, D, T, C, int(c.ints[1]))
        self.consts = consts
        self.ident = threading.get_ident()
        self.rows = _loopnest_cpu.rows_driver(c.structure)
        self.rt = (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw, c.write_bw, c.tensor_size,
                   c.scal, fr)
        self.sc = tuple(x[0] for x in sc)
        self.one_row = one_row[0]
        self.cnt_dims = (6, L, T)
        self.shape_ld, self.shape_t = (L, D), (T,)  # a batch's (levels, dims) and (tensors)
        self.names = names  # (macs, level names, tensor names) of the `Metrics`
        self.outputs: dict[tuple[int, bool], _Outputs] = {}  # by (rows, counts)

    def run(self, temporal: IntArray, spatial: IntArray, order: IntArray, keep: BoolArray,
            counts: bool) -> tuple[Metrics | ObjectiveMetrics, int]:
        """The `Metrics` of every row (``counts``; else its `ObjectiveMetrics`), as
        `evaluate_batch` forms its fields (the count fields read-only views of one (n, 6, L, T)
        array), and the number of illegal rows. The result may be one this plan returned
        before, refilled: only one that nothing outside the plan refers to any more, neither
        it nor any of its arrays nor a view of them (`_Outputs.free`)."""
        n = temporal.shape[0]
        key = (n, counts)
        o = self.outputs.get(key)
        reuse = o is not None and o.free()
        if not reuse:
            if len(self.outputs) >= 4:
                self.outputs.clear()
            o = self.outputs[key] = _Outputs(n, self.cnt_dims if counts else None, self.names)
        assert o is not None  # reused (so found) or made just above
        mp = (np.ascontiguousarray(temporal, dtype=np.int64), np.ascontiguousarray(spatial, dtype=np.int64),
              np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(keep, dtype=np.bool_))
        if counts:  # (a counts array this plan's rows filled before holds the structure's zeros: ``full == 2``)
            bad = self.rows(0, n, 2 if reuse else 1, mp, self.rt, (o.res, o.valid, o.codes, o.cnt), self.sc)
        else:
            bad = self.rows(0, n, 0, mp, self.rt, (o.res, o.valid, o.codes, self.one_row), self.sc)
        if not reuse:
            o.seal()
        return o.result, bad


class _Outputs:
    """One set of a `SerialPlan`'s outputs: the arrays the rows fill (``res``, ``valid``,
    ``codes`` and, with counts, ``cnt``), the `Metrics` (or `ObjectiveMetrics`) made of views
    of them, and the reference counts of all of these once the plan alone holds them
    (``seal``). A later call of the same size refills the set in place when every count is
    still that (`free`): nothing outside holds the result, one of its arrays, or a view of
    one (a numpy view refers to the array that owns the memory). That saves what the rows
    leave slow after they have flushed the caches: three allocations, a search of
    `OutputBuffers`, 13 views and a `Metrics` (about 100 us a call, 10 ns a row at 10,000
    rows)."""

    __slots__ = ("res", "valid", "codes", "cnt", "result", "held", "counts")

    def __init__(self, n: int, cnt_dims: tuple[int, int, int] | None,
                 names: tuple[int, tuple[str, ...], tuple[str, ...]]) -> None:
        from accelmap.costmodels.base import Metrics, ObjectiveMetrics

        res = self.res = np.empty((n, 4))
        valid = self.valid = np.empty(n, dtype=np.bool_)
        codes = self.codes = np.empty((n, 2), dtype=np.int64)
        if cnt_dims is None:
            self.cnt = None
            self.result: Metrics | ObjectiveMetrics = ObjectiveMetrics(
                cycles=res[:, 0], energy_pj=res[:, 1], valid=valid, reason=codes[:, 0], reason_level=codes[:, 1])
        else:
            cnt = self.cnt = np.empty((n, *cnt_dims))
            f = _read_only_views(cnt)
            macs, level_names, tensor_names = names
            self.result = Metrics(cycles=res[:, 0], energy_pj=res[:, 1], compute_energy_pj=res[:, 2],
                                  utilization=res[:, 3], valid=valid, reason=codes[:, 0], reason_level=codes[:, 1],
                                  reads=f[_READS], fills=f[_FILLS], updates=f[_UPDATES],
                                  energy_breakdown_pj=f[_ENERGY], multicast=f[_MCAST],
                                  spatial_reductions=f[_SRED], macs=macs, level_names=level_names,
                                  tensor_names=tensor_names)
        self.held: tuple = ()
        self.counts: list[int] = []

    def _objects(self) -> tuple:
        r = self.result
        arrays = tuple(getattr(r, name) for name in r.__slots__ if isinstance(getattr(r, name), np.ndarray))
        own = (self.res, self.valid, self.codes) if self.cnt is None else (self.res, self.valid, self.codes, self.cnt)
        return (r, *own, *arrays)

    def seal(self) -> None:
        """Take the reference counts of the set as the plan alone holds it (once, when new)."""
        self.held = self._objects()
        self.counts = list(map(sys.getrefcount, self.held))

    def free(self) -> bool:
        """Whether nothing outside the plan refers to the set (`seal`'s counts unchanged)."""
        held = self.held
        return bool(held) and list(map(sys.getrefcount, held)) == self.counts


def serial(n: int) -> bool:
    """Whether `evaluate_batch` runs a batch of ``n`` rows on the calling thread alone."""
    return n < _PARALLEL_MIN_ROWS or _threads() <= 1


def evaluate_batch(consts: KernelConsts, temporal: IntArray, spatial: IntArray, order: IntArray, keep: BoolArray,
                   *, parallel: bool = True, frac: FloatArray | None = None, counts: bool = True,
                   specialised: bool = True, buffers=None, scratch_buffers=None) -> dict[str, np.ndarray]:  # noqa: ANN001
    """Every row of a batch (shapes already matching the problem and arch): the arrays of
    `Metrics` (counts as (n, L, T) float64).

    ``frac`` (T,): the share of each tensor's words that exist (`Problem.existing_fraction`),
    applied as `_loopnest_numpy._count_existing_words` does; None: no padding. Without ``counts``
    only the per-row results come back (cycles, energies, utilization, valid, reason,
    reason_level), and the specialised driver writes no (n, L, T) arrays. ``specialised``:
    `_loopnest_cpu`'s driver (else ``eval_rows``, serial). ``buffers``: an
    `OutputBuffers` of the caller, from which the (n, 6, L, T) counts array is taken (an
    earlier call's, once nothing refers to it any more); None: a new array. An array from
    ``buffers`` is marked once filled (`_zeros_mark`): when a later call of the same structure
    gets it again, the generated rows leave its zero entries as they are (``full == 2``,
    `_loopnest_gen`); its count fields come back read-only, so nothing else writes into it.
    ``scratch_buffers``: a `ThreadScratch` of the caller for the drivers' scratch; None: new
    scratch."""
    n, L, _ = temporal.shape
    T = keep.shape[2]
    res = np.empty((n, 4))
    valid = np.empty(n, dtype=np.bool_)
    codes = np.empty((n, 2), dtype=np.int64)
    C = consts.coef.shape[1]
    D = temporal.shape[2]
    grid = int(consts.ints[1])
    mp = (np.ascontiguousarray(temporal, dtype=np.int64), np.ascontiguousarray(spatial, dtype=np.int64),
          np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(keep, dtype=np.bool_))
    mark = _zeros_mark(consts) if counts and buffers is not None else None
    if specialised:
        threads = _threads() if parallel and n >= _PARALLEL_MIN_ROWS else 1
        use_threads = threads > 1
        n_blocks = threads * 4 if use_threads else 1
        zeroed = False
        sc, one_row = _scratch_from(scratch_buffers, n_blocks, L, D, T, C, grid)
        if counts:
            cnt, zeroed = _counts_array(n, L, T, buffers, mark)
        else:
            cnt = one_row
        fr = np.ones(T) if frac is None else np.ascontiguousarray(frac, dtype=np.float64)
        _loopnest_cpu.evaluate_rows(consts, *mp, fr, res, valid, codes, cnt, (2 if zeroed else 1) if counts else 0,
                                    sc, threads if use_threads else 1)
    else:
        cnt = _counts_array(n, L, T, buffers, mark)[0]
        if n:
            eval_rows(0, n, *mp, *consts.as_tuple(), res, valid, codes, cnt,
                      *(x[0] for x in _scratch_from(scratch_buffers, 1, L, D, T, C, grid)[0]))
        if frac is not None and (frac < 1.0).any():
            _scale_padded(np.asarray(frac), cnt[:, _READS], cnt[:, _FILLS], cnt[:, _UPDATES], cnt[:, _ENERGY],
                          res[:, _ENERGY_PJ])
    out = {"cycles": res[:, _CYCLES], "energy_pj": res[:, _ENERGY_PJ], "compute_energy_pj": res[:, _COMPUTE_PJ],
           "utilization": res[:, _UTIL], "valid": valid, "reason": codes[:, 0], "reason_level": codes[:, 1]}
    if counts:
        fields = _read_only_views(cnt) if mark is not None else tuple(cnt[:, q] for q in range(6))
        out.update(zip(("reads", "fills", "updates", "energy_breakdown_pj", "multicast", "spatial_reductions"),
                       (fields[_READS], fields[_FILLS], fields[_UPDATES], fields[_ENERGY], fields[_MCAST],
                        fields[_SRED]), strict=True))
        if mark is not None:
            buffers.mark({"cnt": cnt}, mark)
    return out
