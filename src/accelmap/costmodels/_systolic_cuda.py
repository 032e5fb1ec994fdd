"""The ``cuda`` engine of the ``systolic`` model: `_systolic_kernel`'s rows on an NVIDIA GPU.

`SystolicModel(engine="cuda")` hands each pass of a batch here (`run`, called by
`_systolic_engine._run` in place of a CPU driver). One GPU thread runs one mapping through the
CPU generic driver's own function, ``_systolic_kernel._eval_rows``, on one-row slices of the
batch and its outputs: numba-cuda compiles that function and every rule it calls (`_row`,
`_metrics_row` and their helpers) as device functions from the same source, so what the GPU
counts is what the CPU counts, rule for rule. The thread's scratch (the report row and the
dims' extents) is local memory, sized for `_cuda.LOCAL_DIMS` dims at least (`_kernel`).

Everything around the pass stays the CPU engine's: the walked DRAM counts a row misses from
the `WalkTable` are walked on the host and the row is evaluated again
(`_systolic_engine.evaluate_rows`), and the outputs come back as the same named arrays.
Needs numba-cuda and a GPU (`accelmap.costmodels._cuda.require`, `DeviceError` otherwise);
tests run it under numba's CUDA simulator.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from accelmap.costmodels import _cuda
from accelmap.costmodels import _systolic_kernel as K

# (a module global: numba's CUDA simulator swaps ``cuda`` in a kernel's globals; None without
# numba-cuda, `_cuda.require` says why)
from accelmap.costmodels._cuda import cuda
from accelmap.costmodels._systolic_kernel import SystolicConsts, WalkTable

__all__ = ["run"]

# GPU threads a block.
_TPB = 128


# What the kernel calls for ``_systolic_kernel._eval_rows`` (`_cuda.device_function`), set when
# the kernel is built. A module global rather than a closure constant: numba-cuda keys a cached
# kernel by the pickled values of its closure, and a dispatcher pickles differently in each
# process (the entry would never be found again, and each process would add one).
_device_eval_rows = None


@functools.lru_cache(maxsize=1)
def _register_device_overloads() -> None:
    """What the rules call that numba-cuda compiles otherwise than numba: `_systolic_kernel.fmod`
    as ``math.fmod`` (exact in CUDA as in C; numba-cuda has no ``np.fmod``). The simulator runs
    the rules' Python, which needs none."""
    from numba import config

    if config.ENABLE_CUDASIM:  # type: ignore[attr-defined]
        return
    from numba.cuda.extending import overload  # type: ignore[attr-defined]

    @overload(K.fmod, target="cuda")
    def _fmod_cuda(x, y):  # noqa: ANN001, ANN202
        return lambda x, y: math.fmod(x, y)


@functools.lru_cache(maxsize=8)
def _kernel(D: int):  # noqa: ANN202 (a numba-cuda kernel)
    """The kernel for problems of up to ``D`` dims (the local scratch's shape is a compile-time
    constant; callers pass `_cuda.local_dims`, so one kernel serves every problem of up to
    `_cuda.LOCAL_DIMS` dims): thread i runs ``_eval_rows`` on row i."""
    _cuda.require()
    _register_device_overloads()
    from numba import float64, int64

    global _device_eval_rows  # (a global, not a closure constant: see `_device_eval_rows`)
    _device_eval_rows = _cuda.device_function(K._eval_rows)
    NI, NF, D1 = K._N_INT, K._N_FLT, D + 1

    # (a closure constant: the kernel's on-disk cache entry changes with every rule it compiles)
    digest = _cuda.source_digest(K._eval_rows)

    @cuda.jit(cache=True)
    def rows_kernel(temporal, spatial, order, keep, spatial2, order2, bounds, holds, fan_xy, dim_class, full, terms,
                    ints, flts, pairs, levels, tkeys, tvals, walk_limit, walk_ratio, walk_cap, walk_far, walk_sample,
                    want_stats, out_i, out_f, valid, missing, want_metrics, reason, level, cycles, energy, comp, util,
                    reads, fills, updates, breakdown, fold_tab):  # noqa: ANN001, ANN202
        i = cuda.grid(1)
        if i < temporal.shape[0] and digest >= 0:
            j = i + 1
            scratch_i = cuda.local.array(NI, int64)
            scratch_f = cuda.local.array(NF, float64)
            ext = cuda.local.array(D, int64)
            suff = cuda.local.array(D1, int64)
            # (an output a pass does not want has no rows: its slice is empty and never written)
            _device_eval_rows(temporal[i:j], spatial[i:j], order[i:j], keep[i:j], spatial2[i:j], order2[i:j], bounds, holds,
                      fan_xy, dim_class, full, terms, ints, flts, pairs, levels, tkeys, tvals, walk_limit, walk_ratio,
                      walk_cap, walk_far, walk_sample, want_stats, out_i[i:j], out_f[i:j], valid[i:j], missing[i:j],
                      want_metrics, reason[i:j], level[i:j], cycles[i:j], energy[i:j], comp[i:j], util[i:j],
                      reads[i:j], fills[i:j], updates[i:j], breakdown[i:j], scratch_i, scratch_f, ext, suff, fold_tab)

    return rows_kernel


def run(consts: SystolicConsts, table: WalkTable, rule: tuple[int, float, int, int, int], arrays: tuple,
        want_stats: bool, want_metrics: bool, n_levels: int, n_tensors: int) -> dict[str, np.ndarray]:
    """One pass of the generic driver over the mapping ``arrays`` (temporal, spatial, order,
    keep) on the GPU: the outputs `_systolic_engine._run` names (its generic driver's: every
    field of the modes wanted; a mode not wanted gives zero-row arrays)."""
    _cuda.require()
    temporal, spatial, order, keep = (np.ascontiguousarray(a) for a in arrays)
    n, _, D = temporal.shape
    m_s, m_m = (n if want_stats else 0), (n if want_metrics else 0)
    cells = n_levels * n_tensors
    f8, i8 = np.float64, np.int64
    shapes = {"out_i": ((m_s, K._N_INT), i8), "out_f": ((m_s, K._N_FLT), f8), "valid": ((n,), np.bool_),
              "missing": ((n,), i8), "reason": ((m_m,), i8), "level": ((m_m,), i8), "cycles": ((m_m,), f8),
              "energy": ((m_m,), f8), "comp": ((m_m,), f8), "util": ((m_m,), f8), "reads": ((m_m, cells), f8),
              "fills": ((m_m, cells), f8), "updates": ((m_m, cells), f8), "breakdown": ((m_m, cells), f8)}
    if n == 0:
        return {k: np.empty(s, dtype=t) for k, (s, t) in shapes.items()}
    c = consts
    # (the problem's constants copied once per `SystolicConsts`; the walk table, which a put
    # replaces, with every pass)
    *const, fold_tab = _cuda.device_constants(c, (c.bounds, c.holds, c.fan_xy, c.dim_class, c.full, c.terms.reshape(-1),
                                                   c.ints, c.flts, c.pairs, c.levels, c.fold_tab))
    dev = [cuda.to_device(np.ascontiguousarray(a)) for a in (temporal, spatial, order, keep)]
    # (the spatial factors and orders as rows too, for the shared helpers: views of the same device memory)
    dev += [dev[1].reshape(n, spatial[0].size), dev[2].reshape(n, order[0].size)]
    dev += const
    dev += [cuda.to_device(np.ascontiguousarray(a)) for a in table.arrays]
    # (every output entry of a row is written by the row's thread: allocated on the device only)
    out = {k: cuda.device_array(s, dtype=t) for k, (s, t) in shapes.items()}
    o = list(out.values())
    walk = (np.int64(rule[0]), float(rule[1]), np.int64(rule[2]), np.int64(rule[3]), np.int64(rule[4]))
    blocks = (n + _TPB - 1) // _TPB
    _kernel(_cuda.local_dims(D))[blocks, _TPB](*dev, *walk, bool(want_stats), o[0], o[1], o[2], o[3], bool(want_metrics), *o[4:],
                             fold_tab)
    return {k: v.copy_to_host() for k, v in out.items()}
