"""The CPU engine of the ``systolic`` model: how a batch runs on its compiled drivers.

`SystolicModel` (``engine="cpu"``) hands a batch here (`evaluate_rows`). Two drivers count it
with the same rules (`_systolic_kernel`): ``_systolic_kernel._eval_rows``, one compiled
function for every problem and arch, and `_systolic_cpu.driver`, the row loop specialised per
structure, faster per row but compiled once per new structure; the model changes over to the
second after `_SPECIALISE_AFTER_ROWS` rows of a (problem, arch), or at once where it is ready
without a compile (`_SPECIALISE_IF_READY`). This module runs a pass of a driver over a batch
(`_run`: on the calling thread through a kept `SerialPlan`, or as blocks of rows on threads,
`engines.run_blocks`), has the walked DRAM counts the pass found missing from the `WalkTable`
walked and evaluates those rows again, and hands the outputs back as `SystolicStats`
(`stats_from`) or `Metrics` (`metrics_from`), the largest arrays from an `OutputBuffers`.
Nothing here counts: what is counted is `_systolic_kernel`'s rules (and, readable,
`accelmap.costmodels.systolic`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numba
import numpy as np

from accelmap._typing import IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels import _systolic_cpu
from accelmap.costmodels._buffers import OutputBuffers
from accelmap.costmodels._loopnest_kernel import _threads
from accelmap.costmodels._systolic_kernel import (
    _CC,
    _COMPUTE,
    _DF,
    _DR0,
    _DR1,
    _DW,
    _FC,
    _FOLDS,
    _FR,
    _LEVEL,
    _N_FLT,
    _N_INT,
    _RC,
    _REASON,
    _SR0,
    _SR1,
    _STALL,
    _SW,
    _TOTAL,
    _UC,
    _UR,
    SystolicConsts,
    WalkTable,
    _eval_rows,
)
from accelmap.costmodels.base import Metrics
from accelmap.costmodels.engines import run_blocks
from accelmap.costmodels.systolic_layout import SystolicStats
from accelmap.workloads.problem import Problem

__all__ = ["OutputBuffers", "SerialPlan", "SerialPlans", "evaluate_rows", "stats_from", "metrics_from"]

# The two CPU drivers: `_systolic_cpu`'s, specialised per structure, is faster per row but
# compiles for several seconds per new structure (once: numba's on-disk cache keeps it);
# ``_systolic_kernel._eval_rows``, one compiled function for every structure, serves a model
# until it has evaluated this many rows of a (problem, arch) (`SystolicModel` counts them), so
# that evaluating a few mappings of a new layer never waits for that compile.
_SPECIALISE_AFTER_ROWS = 100_000
# ... unless the specialised driver is ready without a compile (`_systolic_cpu.ready`: compiled
# in this process already, or in numba's on-disk cache): then it serves from the first row.
# Loading it from the cache costs about 10 ms; the 0.3-0.5 s of a process's first call is
# numba's own start (its target context and registries), which the generic driver pays alike.
_SPECIALISE_IF_READY = True

# Below this many rows a batch runs on the calling thread.
_PARALLEL_MIN_ROWS = 4096


def _spec_args(consts: SystolicConsts, table: WalkTable, rule: tuple[int, float, int, int, int], flat: tuple,
               want_stats: bool, mode: int, out: tuple, scratch: tuple) -> tuple:
    """The arguments of the specialised driver (`_systolic_cpu.driver`) in its order: ``flat``
    the mapping arrays as rows (and the 3-D order), ``out`` the outputs, ``scratch`` its two
    scratch rows."""
    c = consts
    rt = (c.bounds, c.fan_xy, c.dim_class, c.full, c.terms, c.ints, c.flts, c.pairs, c.levels, c.fold_tab)
    wk = (*table.arrays, np.int64(rule[0]), float(rule[1]), np.int64(rule[2]), np.int64(rule[3]), np.int64(rule[4]))
    return flat, rt, wk, want_stats, mode, out, scratch


def _flat(arrays: tuple) -> tuple:
    """The mapping arrays as (n, L * D ...) rows (free reshapes of contiguous arrays: one stride
    a row), and the 3-D order again for the generic helpers the specialised driver calls."""
    n = arrays[0].shape[0]
    return (*(x.reshape(n, math.prod(x.shape[1:])) for x in arrays), arrays[2])


def _spec_ready(spec: tuple, consts: SystolicConsts, table: WalkTable, rule: tuple[int, float, int, int, int],
                arrays: tuple, want_stats: bool, mode: int, cells: int) -> bool:
    """Whether the specialised driver of ``spec`` runs a call of these kinds without compiling
    (`_systolic_cpu.ready`, asked with zero-row arrays of the call's types)."""
    known = _systolic_cpu.ready_known(spec)
    if known is not None:
        return known
    e, f8, i8 = np.empty, np.float64, np.int64
    out = (e((0, _N_INT), i8), e((0, _N_FLT), f8), e(0, np.bool_), e(0, i8), e(0, i8), e(0, i8), *(e(0, f8),) * 4,
           *(e((0, cells), f8),) * 4)
    D = consts.bounds.shape[0]
    args = _spec_args(consts, table, rule, _flat(tuple(x[:0] for x in arrays)), want_stats, mode, out,
                      (e(D, i8), e(D + 1, i8)))
    return _systolic_cpu.ready(spec, args)


class SerialPlan:
    """What a call of the specialised driver on the calling thread reads besides the batch, for
    one (problem, arch), walk table state, walk rule and thread, gathered once and kept
    (`_run`, ``plans``): the compiled rows, the run-time constants and walk arguments as the
    driver takes them, the thread's scratch, the cells' tag (`_systolic_cpu.cell_tag`) and
    zero-row arrays for the outputs a mode does not write. After a large call's rows every
    Python step before the next call runs with cold caches, so each object not built again
    saves several times its warm cost (hashing the structure tuple to find the driver,
    building the argument tuples, the scratch)."""

    __slots__ = ("rows", "rt", "table_arrays", "rule", "wk", "scratch", "tag", "none_i", "none_f", "none_s",
                 "cell_shapes")

    def __init__(self, consts: SystolicConsts, table: WalkTable, rule: tuple[int, float, int, int, int],
                 spec: tuple) -> None:
        c = consts
        D = c.bounds.shape[0]
        e, f8, i8 = np.empty, np.float64, np.int64
        self.rows = _systolic_cpu.driver(spec)
        self.rt = (c.bounds, c.fan_xy, c.dim_class, c.full, c.terms, c.ints, c.flts, c.pairs, c.levels, c.fold_tab)
        self.table_arrays = table.arrays
        self.rule = rule
        self.wk = (*table.arrays, np.int64(rule[0]), float(rule[1]), np.int64(rule[2]), np.int64(rule[3]),
                   np.int64(rule[4]))
        self.scratch = (e(D, i8), e(D + 1, i8))
        self.tag = _systolic_cpu.cell_tag(spec)
        # (zero-row outputs are never written: one set serves every call)
        self.none_i, self.none_f, self.none_s = e(0, i8), e(0, f8), (e((0, _N_INT), i8), e((0, _N_FLT), f8))
        self.cell_shapes: tuple[int, dict] = (-1, {})

    def fits(self, table: WalkTable, rule: tuple[int, float, int, int, int]) -> bool:
        """Whether the plan still describes ``table`` and ``rule`` (a put swaps the table's arrays)."""
        return self.table_arrays is table.arrays and self.rule == rule

    def cells(self, n: int, n_cells: int) -> dict:
        """The four (n, L * T) cell fields' shapes for `OutputBuffers.take`, kept for the last ``n``."""
        if self.cell_shapes[0] != n:
            self.cell_shapes = (n, {k: ((n, n_cells), np.float64) for k in ("reads", "fills", "updates", "breakdown")})
        return self.cell_shapes[1]


class SerialPlans(dict):
    """The `SerialPlan` of each thread for one (problem, arch), by thread id; pickled empty
    (a plan holds compiled drivers and per-process scratch, remade on the first call)."""

    def __reduce__(self) -> tuple:
        return (SerialPlans, ())


def _run_serial(plan: SerialPlan, arrays: tuple, n: int, want_stats: bool, mode: int,
                buffers: OutputBuffers | None, n_cells: int) -> tuple[dict[str, np.ndarray], int]:
    """`_run`'s call of one block on the calling thread through ``plan``: the same outputs by
    name. The int64 outputs (missing, reason, level) are rows of one array and the float64
    ones (cycles, energy, then in mode 2 compute energy and utilization) of another, each row
    contiguous, so a call allocates three arrays where it allocated eight."""
    e = np.empty
    valid = e(n, np.bool_)
    blk_i = e((3 if mode else 1, n), np.int64)
    missing = blk_i[0]
    if mode:
        reason, level = blk_i[1], blk_i[2]
        blk_f = e((4 if mode == 2 else 2, n), np.float64)
        cycles, energy = blk_f[0], blk_f[1]
    else:
        reason = level = plan.none_i
        cycles = energy = plan.none_f
    comp, util = (blk_f[2], blk_f[3]) if mode == 2 else (plan.none_f, plan.none_f)
    out_i, out_f = (e((n, _N_INT), np.int64), e((n, _N_FLT), np.float64)) if want_stats else plan.none_s
    if mode == 2:
        if buffers is None:
            cell = {k: np.zeros(sh, dtype=t) for k, (sh, t) in plan.cells(n, n_cells).items()}
        else:
            cell = buffers.take(plan.cells(n, n_cells), plan.tag)
            for a in cell.values():
                a.setflags(write=True)  # (arrays of their own: `metrics_from` handed them out read-only)
        reads, fills, updates, brk = cell["reads"], cell["fills"], cell["updates"], cell["breakdown"]
    else:
        reads = fills = updates = brk = plan.none_s[1]
    temporal, spatial, order, keep = arrays
    mp = (temporal.reshape(n, -1), spatial.reshape(n, -1), order.reshape(n, -1), keep.reshape(n, -1), order)
    n_missing = plan.rows(mp, plan.rt, plan.wk, want_stats, mode,
                          (out_i, out_f, valid, missing, reason, level, cycles, energy, comp, util, reads, fills,
                           updates, brk), plan.scratch)
    out = {"out_i": out_i, "out_f": out_f, "valid": valid, "missing": missing, "reason": reason, "level": level,
           "cycles": cycles, "energy": energy, "comp": comp, "util": util, "reads": reads, "fills": fills,
           "updates": updates, "breakdown": brk}
    return out, int(n_missing)


def _run(consts: SystolicConsts, table: WalkTable, rule: tuple[int, float, int, int, int], arrays: tuple,
         want_stats: bool, want_metrics: bool, n_levels: int, n_tensors: int, spec: tuple | None = None,
         objective: bool = False, buffers: OutputBuffers | None = None,
         compile_spec: bool = True, plans: dict | None = None,
         device: str = "cpu") -> tuple[dict[str, np.ndarray], int | None]:
    """One kernel pass over the mapping ``arrays`` (temporal, spatial, order, keep): the
    outputs of the modes wanted (`_eval_rows`, or with ``spec`` the driver specialised for
    that structure, `_systolic_cpu.driver`), by name, and how many rows miss a walked count
    (None: not counted; ``missing`` tells). ``objective`` (``spec`` only): of the
    `Metrics` fields only cycles, energy, validity and reason. ``buffers``: the output arrays
    come from there (`OutputBuffers`), else they are new. ``compile_spec`` False: ``spec``
    serves only where its driver is ready without a compile (`_spec_ready`), else the generic
    driver does. ``device`` ``"cuda"``: the generic driver's rows on the GPU
    (`_systolic_cuda.run`; ``spec``, ``objective``, ``buffers`` and ``plans`` do not apply)."""
    if device == "cuda":
        from accelmap.costmodels import _systolic_cuda

        return _systolic_cuda.run(consts, table, rule, arrays, want_stats, want_metrics, n_levels, n_tensors), None
    n = arrays[0].shape[0]
    if spec is not None and not compile_spec:
        mode = 0 if not want_metrics else (1 if objective else 2)
        if not _spec_ready(spec, consts, table, rule, arrays, want_stats, mode, n_levels * n_tensors):
            spec = None
    D = consts.bounds.shape[0]
    objective = objective and spec is not None and want_metrics
    if spec is not None and plans is not None and (n < _PARALLEL_MIN_ROWS or numba.get_num_threads() == 1
                                                   or _threads() == 1):
        # one block on this thread through the kept plan (`SerialPlan`)
        ident = threading.get_ident()
        plan = plans.get(ident)
        if plan is None or not plan.fits(table, rule):
            if len(plans) > 8:
                plans.clear()
            plan = plans[ident] = SerialPlan(consts, table, rule, spec)
        mode = 0 if not want_metrics else (1 if objective else 2)
        return _run_serial(plan, arrays, n, want_stats, mode, buffers, n_levels * n_tensors)
    m_s, m_m = (n if want_stats else 0), (n if want_metrics else 0)
    m_f = 0 if objective else m_m  # the fields an objective pass does not write
    f8, i8 = np.float64, np.int64
    cells = n_levels * n_tensors  # the (n, L, T) fields as (n, L * T) rows (`metrics_from` reshapes)
    e = np.empty
    out = {"out_i": e((m_s, _N_INT), i8), "out_f": e((m_s, _N_FLT), f8), "valid": e(n, np.bool_),
           "missing": e(n, i8), "reason": e(m_m, i8), "level": e(m_m, i8), "cycles": e(m_m, f8),
           "energy": e(m_m, f8), "comp": e(m_f, f8), "util": e(m_f, f8)}
    # the four (n, L * T) fields, the largest: from ``buffers`` where given (the others, an
    # eighth of the bytes, come fresh: the allocator hands back memory just freed, still in
    # cache, where arrays kept per mode would widen what a search touches)
    # The specialised driver leaves the cells that hold 0.0 in every row unwritten
    # (`_systolic_cpu.zero_cells_mask`): its arrays start as zeros, and those from ``buffers``
    # are a set of zeros kept under the driver's `_systolic_cpu.cell_tag`, handed out
    # read-only (`metrics_from`) so that no caller's write can leave a value there.
    cell_shapes = {k: ((m_f, cells), f8) for k in ("reads", "fills", "updates", "breakdown")}
    if buffers is None or m_f == 0:
        make = e if spec is None else np.zeros
        out.update({k: make(sh, dtype=t) for k, (sh, t) in cell_shapes.items()})
    else:
        if spec is None:
            taken = buffers.take(cell_shapes)
        else:
            taken = buffers.take(cell_shapes, _systolic_cpu.cell_tag(spec))
        for a in taken.values():
            a.setflags(write=True)  # (arrays of their own: `metrics_from` handed them out read-only)
        out.update(taken)
    names = list(out)
    # (numba on one thread: one block, without `_threads`' look at the environment, 2-5 us a
    # call, which the cap of OMP_NUM_THREADS could only lower)
    threads = 1 if n < _PARALLEL_MIN_ROWS or numba.get_num_threads() == 1 else _threads()
    n_blocks = threads * 4 if threads > 1 else 1
    if spec is not None and n_blocks == 1:
        # One block on this thread, the case a search's batch and a benchmark's are: the
        # arguments built with as few Python objects as can be (no slices, no closure). Every
        # object touched here is cold in the caches after the previous call's rows, so each
        # costs several times its warm time: the Python around a 10,000-row call came to
        # 20-30 ns a row before (about 200 us a call), against about 5 once warm.
        mode = 0 if not want_metrics else (1 if objective else 2)
        n_missing = _systolic_cpu.driver(spec)(*_spec_args(consts, table, rule, _flat(arrays), want_stats, mode,
                                                           tuple(out.values()), (e(D, i8), e(D + 1, i8))))
        return out, int(n_missing)
    scratch = (e((n_blocks, _N_INT), i8), e((n_blocks, _N_FLT), f8), e((n_blocks, D), i8), e((n_blocks, D + 1), i8))
    if spec is None:
        # the spatial factors and orders as rows too, and the terms flat (for the shared helpers)
        spatial2, order2 = (x.reshape(n, math.prod(x.shape[1:])) for x in arrays[1:3])
        c = consts
        tables = (c.bounds, c.holds, c.fan_xy, c.dim_class, c.full, c.terms.reshape(-1), c.ints, c.flts, c.pairs,
                  c.levels, *table.arrays, np.int64(rule[0]), float(rule[1]), np.int64(rule[2]), np.int64(rule[3]),
                  np.int64(rule[4]))

        def block(b: int, lo: int, hi: int) -> None:
            o = [out[k][lo:hi] if len(out[k]) else out[k] for k in names]
            _eval_rows(*(x[lo:hi] for x in arrays), spatial2[lo:hi], order2[lo:hi], *tables, want_stats, o[0], o[1], o[2], o[3],
                       want_metrics, *o[4:], *(x[b] for x in scratch), c.fold_tab)
    else:
        rows = _systolic_cpu.driver(spec)
        mode = 0 if not want_metrics else (1 if objective else 2)
        flat = _flat(arrays)

        def block(b: int, lo: int, hi: int) -> None:
            o = tuple(out[k][lo:hi] if len(out[k]) else out[k] for k in names)
            rows(*_spec_args(consts, table, rule, tuple(x[lo:hi] for x in flat), want_stats, mode, o,
                             (scratch[2][b], scratch[3][b])))

    if n_blocks > 1:  # blocks of rows on threads (`engines.run_blocks`)
        run_blocks(block, n, n_blocks, threads)
    elif n:
        block(0, 0, n)
    return out, None


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Read-only views: numba compiles a driver once per argument type, and writability is
    part of an array's type, so a batch's frozen arrays and the copies made for its walked
    rows would otherwise compile every driver twice."""
    views = tuple(a.view() for a in arrays)
    for v in views:
        v.flags.writeable = False
    return views


def evaluate_rows(consts: SystolicConsts, table: WalkTable, walk_limit: int, walk_ratio: float, walk_cap: int,
                  walk_far: int, walk: Callable[..., IntArray], temporal, spatial, order, keep,  # noqa: ANN001
                  *, want_stats: bool, want_metrics: bool, n_levels: int, n_tensors: int,
                  spec: tuple | None = None, objective: bool = False,
                  buffers: OutputBuffers | None = None, compile_spec: bool = True,
                  frozen: bool = False, walk_sample: int = 0, plans: dict | None = None,
                  device: str = "cpu") -> dict[str, np.ndarray]:
    """`_run` over a batch (shapes already matching the problem and arch), the walked counts
    it misses filled in first: ``walk(o, rc, cc, ur, uc, f_r, f_c, reads, orders)`` returns
    operand ``o``'s walked DRAM words of rows given by their row and column classes, rows and
    columns used, row and column folds, the operand's SRAM reads (m,) and array-level orders
    (m, D) (`systolic_dram._walked_reads`); those rows are then evaluated again. ``walk_limit`` <
    0: nothing is walked; else `systolic_dram._walk_rows`'s rule with ``walk_ratio``,
    ``walk_cap`` (`SystolicModel.CAPPED_WALK_REPS`) and ``walk_far`` (the limit beyond the
    ratio; 0: no such row walked) and ``walk_sample`` (> 0: a row over its limit that is not
    capped is counted from a walked sample, `window_fetches_sampled`). ``spec``: run the driver specialised
    for this structure (`_systolic_cpu.structure`) instead of the generic one; with it,
    ``objective`` writes only cycles, energy, validity and reason of the `Metrics` fields.
    ``buffers``: the outputs' arrays come from there (`OutputBuffers`; the walked rows'
    second pass allocates its own). ``compile_spec`` False: ``spec`` serves only if its driver
    is ready without a compile (`_run`). ``frozen``: the mapping arrays are C-contiguous,
    read-only and of the kernel's dtypes already (a `MappingBatch`'s), used as they are.
    ``plans``: a dict kept per (problem, arch) by the caller, in which a call of ``spec``'s driver
    on the calling thread keeps its `SerialPlan` (one per thread). ``device`` ``"cuda"``: every
    pass runs on the GPU (`_systolic_cuda`), the walks on the host as on the CPU."""
    arrays: tuple[np.ndarray, ...] = (temporal, spatial, order, keep)
    if not frozen:
        arrays = _read_only(np.ascontiguousarray(temporal, dtype=np.int64),
                            np.ascontiguousarray(spatial, dtype=np.int64),
                            np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(keep, dtype=np.bool_))
    rule = (walk_limit, walk_ratio, walk_cap, walk_far, walk_sample)
    out, n_missing = _run(consts, table, rule, arrays, want_stats, want_metrics, n_levels, n_tensors, spec, objective,
                          buffers, compile_spec, plans, device)
    if n_missing == 0:
        return out
    miss = np.flatnonzero(out["missing"])
    if miss.size == 0:
        return out
    sub = _read_only(*(np.ascontiguousarray(x[miss]) for x in arrays))
    rep, _ = _run(consts, table, rule, sub, True, False, n_levels, n_tensors, spec, compile_spec=compile_spec,
                  plans=plans, device=device)
    al = int(consts.ints[0])
    for o in (0, 1):
        rows = np.flatnonzero(rep["missing"] & (1 << o))
        if rows.size:
            s = rep["out_i"][rows]
            orders = sub[2][rows, al]
            head = np.stack([np.full(rows.size, o), s[:, _RC], s[:, _CC], s[:, _UR], s[:, _UC]], axis=1)
            table.put(head, orders, walk(o, head[:, 1], head[:, 2], head[:, 3], head[:, 4], s[:, _FR], s[:, _FC],
                                         s[:, _SR0 + o], orders))
    again, _ = _run(consts, table, rule, sub, want_stats, want_metrics, n_levels, n_tensors, spec, objective,
                    compile_spec=compile_spec, plans=plans, device=device)
    if again["missing"].any():
        raise RuntimeError("systolic kernel: walked counts still missing after the walk table was filled")
    for k, v in again.items():
        if len(out[k]):
            out[k][miss] = v
    return out


def stats_from(out: dict[str, np.ndarray]) -> SystolicStats:
    """`SystolicStats` of `evaluate_rows`'s report (``want_stats``)."""
    out_i, out_f = out["out_i"], out["out_f"]
    c = out_i.T
    return SystolicStats(
        valid=out["valid"], reason=c[_REASON], reason_level=c[_LEVEL], dataflow=c[_DF], row_class=c[_RC],
        col_class=c[_CC], rows_used=c[_UR], cols_used=c[_UC], row_folds=c[_FR], col_folds=c[_FC],
        folds=c[_FOLDS], compute_cycles=c[_COMPUTE], stall_cycles=c[_STALL], total_cycles=c[_TOTAL],
        sram_reads=out_i[:, _SR0:_SR1 + 1], sram_writes=c[_SW], dram_reads=out_i[:, _DR0:_DR1 + 1],
        dram_writes=c[_DW], mapping_efficiency=out_f[:, 0], compute_utilization=out_f[:, 1],
        utilization=out_f[:, 2],
    )


def metrics_from(out: dict[str, np.ndarray], problem: Problem, arch: Arch,
                 buffers: OutputBuffers | None = None, names: tuple | None = None) -> Metrics:
    """`Metrics` of `evaluate_rows`'s output (``want_metrics``). ``buffers``: the two zero
    fields are one read-only array of it (`OutputBuffers.zeros`), else two new ones, and the
    four (n, L, T) fields (arrays of ``buffers``, `_run`) are handed out read-only. ``names``:
    (level names, tensor names, MACs) as the problem and arch give them, read once by the caller."""
    n = len(out["valid"])
    level_names, tensor_names, macs = names if names is not None else (arch.level_names, problem.tensor_names,
                                                                        problem.macs)
    shape = (n, len(level_names), len(tensor_names))
    # The model counts no multicast and no spatial reduction: both fields are zeros, with
    # ``buffers`` one read-only array kept between calls (clearing two new ones cost 8-15 ns a
    # row at 10,000 rows). (Once dropped because, without these two large allocations, glibc's
    # heap trimmed and grew again between calls of 100,000 rows; the outputs' arrays now come
    # from `OutputBuffers`, which takes the allocator out of the loop.)
    zeros = buffers.zeros(shape) if buffers is not None else np.zeros(shape)
    if buffers is not None:  # (arrays kept for later calls, some cells never written: read-only)
        for k in ("reads", "fills", "updates", "breakdown"):
            out[k].setflags(write=False)
    return Metrics(
        cycles=out["cycles"], energy_pj=out["energy"], compute_energy_pj=out["comp"], utilization=out["util"],
        valid=out["valid"], reason=out["reason"], reason_level=out["level"], reads=out["reads"].reshape(shape),
        fills=out["fills"].reshape(shape), updates=out["updates"].reshape(shape),
        energy_breakdown_pj=out["breakdown"].reshape(shape), multicast=zeros,
        spatial_reductions=zeros if buffers is not None else np.zeros(shape), macs=macs,
        level_names=level_names, tensor_names=tensor_names,
    )
