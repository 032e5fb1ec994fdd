"""The ``cuda`` engine of the ``aspect`` model: `_aspect_kernel`'s rows on an NVIDIA GPU.

`AspectModel(engine="cuda")` hands a batch here (`evaluate`). One GPU thread runs one
mapping through the rules the CPU drivers run: ``_aspect_kernel.eval_range`` on its row (the
directive form, MAESTRO's counts and runtime, the reason codes), then
``_aspect_kernel.metrics_rows`` on its one-row slices (the buffer requirements against the
capacities, the counts on the arch's levels, the energies). numba-cuda compiles both, and
every rule they call, as device functions from the same source, so what the GPU counts is
what the CPU counts, rule for rule. The thread's scratch is local memory, its shapes those
of `_aspect_kernel._scratch` for one block, sized for `_cuda.LOCAL_DIMS` dims (`_kernel`).

Needs numba-cuda and a GPU (`accelmap.costmodels._cuda.require`, `DeviceError` otherwise);
tests run it under numba's CUDA simulator.
"""

from __future__ import annotations

import functools

import numpy as np

from accelmap.costmodels import _aspect_kernel as K
from accelmap.costmodels import _cuda
from accelmap.costmodels._aspect_kernel import AspectConsts

# (a module global: numba's CUDA simulator swaps ``cuda`` in a kernel's globals; None without
# numba-cuda, `_cuda.require` says why)
from accelmap.costmodels._cuda import cuda

__all__ = ["evaluate"]

# GPU threads a block.
_TPB = 128


# What the kernel calls for ``_aspect_kernel.eval_range`` and ``metrics_rows``
# (`_cuda.device_function`), set when the kernel is built. Module globals rather than closure
# constants: numba-cuda keys a cached kernel by the pickled values of its closure, and a
# dispatcher pickles differently in each process (the entry would never be found again).
_device_eval_range = None
_device_metrics_rows = None


@functools.lru_cache(maxsize=8)
def _kernel(D: int):  # noqa: ANN202 (a numba-cuda kernel)
    """The kernel for problems of up to ``D`` dims (the local scratch's shapes are compile-time
    constants; callers pass `_cuda.local_dims`, so one kernel serves every problem of up to
    `_cuda.LOCAL_DIMS` dims on every arch): thread i evaluates row i."""
    _cuda.require()
    from numba import int64

    global _device_eval_range, _device_metrics_rows  # (globals, not closure constants: see there)
    _device_eval_range = _cuda.device_function(K.eval_range)
    _device_metrics_rows = _cuda.device_function(K.metrics_rows)
    MEMO = K.MEMO

    # (a closure constant: the kernel's on-disk cache entry changes with every rule it compiles)
    digest = _cuda.source_digest(K.eval_range)

    @cuda.jit(cache=True)
    def rows_kernel(temporal, spatial, order, keep, ints, src, dfull, tmask, bounds, holds, fan_xy, out, codes,
                    m_ints, tensor, l1_level, caps, read_pj, write_pj, scal, cycles, energy, compute_pj, util, valid,
                    reads, fills, updates, breakdown):  # noqa: ANN001, ANN202
        i = cuda.grid(1)
        if i < temporal.shape[0] and digest >= 0:
            # one block's scratch of `_aspect_kernel._scratch`, in the thread's local memory
            sc = (cuda.local.array(D, int64), cuda.local.array(D, int64), cuda.local.array((4, 9), int64),
                  cuda.local.array(9, int64), cuda.local.array(D, int64), cuda.local.array(D, int64),
                  cuda.local.array(9, int64), cuda.local.array(9, int64), cuda.local.array((10, 9), int64),
                  cuda.local.array((2, 8, 8), int64), cuda.local.array((2, 4, 9), int64),
                  cuda.local.array((2, 7, 3, 5), int64), cuda.local.array((2, 4, 7), int64),
                  cuda.local.array((2, 7, 5), int64), cuda.local.array((6, 3), int64),
                  cuda.local.array((3, 9), int64), cuda.local.array((MEMO, 9), int64), cuda.local.array(MEMO, int64),
                  cuda.local.array(1, int64))
            _device_eval_range(i, i + 1, temporal, spatial, order, keep, ints, src, dfull, tmask, bounds, holds, fan_xy, out,
                       codes, sc)
            for lv in range(reads.shape[1]):  # (`metrics_rows` takes its (n, L, T) rows zeroed)
                for t in range(reads.shape[2]):
                    reads[i, lv, t] = 0.0
                    fills[i, lv, t] = 0.0
                    updates[i, lv, t] = 0.0
                    breakdown[i, lv, t] = 0.0
            j = i + 1
            _device_metrics_rows(out[i:j], codes[i:j], m_ints, tensor, l1_level, caps, read_pj, write_pj, scal, cycles[i:j],
                         energy[i:j], compute_pj[i:j], util[i:j], valid[i:j], reads[i:j], fills[i:j], updates[i:j],
                         breakdown[i:j])

    return rows_kernel


def evaluate(consts: AspectConsts, problem, arch, temporal, spatial, order, keep):  # noqa: ANN001, ANN201
    """`Metrics` of every row (shapes already matching the problem and arch), as
    `_aspect_kernel.evaluate_rows` then `_aspect_kernel.metrics` give them, on the GPU."""
    from accelmap.costmodels.base import Metrics

    _cuda.require()
    n, L, D = temporal.shape
    T = problem.n_tensors
    f8, i8 = np.float64, np.int64
    shapes = {"out": ((n, K.N_COLS), i8), "codes": ((n, 2), i8), "cycles": ((n,), f8), "energy": ((n,), f8),
              "compute_pj": ((n,), f8), "util": ((n,), f8), "valid": ((n,), np.bool_), "reads": ((n, L, T), f8),
              "fills": ((n, L, T), f8), "updates": ((n, L, T), f8), "breakdown": ((n, L, T), f8)}
    if n:
        host = (np.ascontiguousarray(temporal, dtype=i8), np.ascontiguousarray(spatial, dtype=i8),
                np.ascontiguousarray(order, dtype=i8), np.ascontiguousarray(keep, dtype=np.bool_))
        rows = [cuda.to_device(a) for a in host]
        # (the layer's constants copied once per `AspectConsts`: the kernel's and `metrics_rows`')
        n_rows = len(consts.as_tuple())
        const = _cuda.device_constants(consts, (*consts.as_tuple(), *consts.metric_tuple()))
        # (every output entry of a row is written by the row's thread: allocated on the device only)
        d_out = {k: cuda.device_array(s, dtype=t) for k, (s, t) in shapes.items()}
        blocks = (n + _TPB - 1) // _TPB
        _kernel(_cuda.local_dims(D))[blocks, _TPB](*rows, *const[:n_rows], d_out["out"], d_out["codes"], *const[n_rows:],
                                       *(d_out[k] for k in list(shapes)[2:]))
        got = {k: v.copy_to_host() for k, v in d_out.items()}
    else:
        got = {k: np.empty(s, dtype=t) for k, (s, t) in shapes.items()}
    codes = got["codes"]
    return Metrics(
        cycles=got["cycles"], energy_pj=got["energy"], compute_energy_pj=got["compute_pj"], utilization=got["util"],
        valid=got["valid"], reason=codes[:, 0], reason_level=codes[:, 1], reads=got["reads"], fills=got["fills"],
        updates=got["updates"], energy_breakdown_pj=got["breakdown"], multicast=np.zeros((n, L, T)),
        spatial_reductions=np.zeros((n, L, T)), macs=problem.macs, level_names=arch.level_names,
        tensor_names=problem.tensor_names,
    )
