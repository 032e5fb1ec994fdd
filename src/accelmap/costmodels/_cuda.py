"""The ``cuda`` engine: the loopnest kernel compiled for NVIDIA GPUs (numba-cuda), and
searches whose inner loop stays on the device.

The per-row functions of `accelmap.costmodels._loopnest_rules` (``check_row``,
``eval_range`` and their helpers) are registered for the CUDA target too, so the
GPU runs the very source the CPU engine runs. On top of them:

* ``evaluate`` -- one thread per mapping of a host batch (the engine behind
  ``LoopNestModel(engine="cuda")``);
* ``random_search`` -- every thread draws mappings on the device (each prime factor of each
  dim placed in a random level and temporal / X / Y slot, fanouts respected as they are
  placed; random loop orders; random bypass among the tensors a level may hold), checks and
  evaluates them and keeps its best; only each thread's best row and its counters return;
* ``anneal_search`` -- one annealing chain per thread, started at its first legal draw
  (moves: one prime factor to another slot, two loops of a level swapped, one bypass bit
  flipped; Metropolis acceptance on log EDP with a geometric temperature schedule), best
  rows and counters back.

Scratch lives in per-thread local arrays whose shapes are compile-time constants, so kernels
are built (and cached) per (levels, dims, tensors, coordinates) shape.

These are the *generic* kernels. ``random_search`` and ``anneal_search`` run by default
(``kernel="auto"``) the *specialized* kernels of `accelmap.costmodels._cuda_search`, built per
(problem, arch) and computing only legality and the EDP, several times faster; the generic
ones remain for problems whose tiles do not provably fit 32 bits
(`accelmap.costmodels._cuda_search.fits_32bit`) and as the reference the specialized ones
are measured against (``benchmarks/bench_gpu.py``). Both scale a padded tensor's energy by
the share of its words that exist, as `LoopNestModel` does after the kernel.

Without numba-cuda or without a GPU, `require` raises `DeviceError` (the CLI's exit 2).
Tests run these kernels under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.costmodels import _cuda_search
from accelmap.costmodels import _loopnest_kernel as K
from accelmap.costmodels import _loopnest_rules as R
from accelmap.errors import SpecError
from accelmap.workloads.problem import Problem

try:  # module globals: the CUDA simulator swaps ``cuda`` in a kernel's globals
    from numba import cuda
    from numba.cuda.random import xoroshiro128p_dtype, xoroshiro128p_uniform_float64
    _IMPORT_ERROR: Exception | None = None
except Exception as _exc:  # no numba-cuda, or one that fails against this numpy
    cuda = None  # type: ignore[assignment]
    _IMPORT_ERROR = _exc

__all__ = ["DeviceError", "require", "device_function", "device_constants", "source_digest", "evaluate", "search_objective", "random_search", "anneal_search", "GpuSearchResult"]

INSTALL_HINT = ('install the GPU extra: pip install "accelmap[cuda]" (numba-cuda and its CUDA wheels); '
                'check that a GPU is seen with: python -c "from numba import cuda; cuda.detect()"')


class DeviceError(SpecError):
    """The requested device cannot be used (no numba-cuda, no GPU, unsupported shape)."""


def require(what: str = "--device cuda") -> object:
    """The ``numba.cuda`` module, or `DeviceError` saying what is missing and how to fix it
    (``what``: what asked for the GPU, the message's first words)."""
    if cuda is None:
        raise DeviceError(f"{what}: numba-cuda cannot be imported ({_IMPORT_ERROR}); {INSTALL_HINT}")
    try:
        ok = cuda.is_available()
    except Exception as exc:
        raise DeviceError(f"{what}: the CUDA driver cannot be initialized ({exc}); {INSTALL_HINT}") from None
    if not ok:
        raise DeviceError(f"{what}: no CUDA GPU is visible to numba-cuda; {INSTALL_HINT}")
    _register_shared()
    return cuda


def device_function(fn):  # noqa: ANN001, ANN201
    """``fn`` (a numba CPU dispatcher, or a plain or ``register_jitable`` function of the
    package) as a kernel calls it. On a GPU it is ``fn`` itself: numba-cuda compiles a CPU
    dispatcher's Python source as a device function, and so every function it calls. Under
    numba's CUDA simulator, where kernels run as Python on fake device arrays that a CPU
    dispatcher cannot take, it is a copy of ``fn``'s Python source whose globals name the
    same copies of the package's functions it calls (`_python_twin`)."""
    from numba import config

    return _python_twin(fn, {}) if config.ENABLE_CUDASIM else fn  # type: ignore[attr-defined]


def _package_callees(fn):  # noqa: ANN001, ANN202
    """``fn``'s Python function (a dispatcher's ``py_func``, or ``fn``) and the (global name,
    value) pairs of its source that a kernel compiles with it: numba dispatchers and plain or
    ``register_jitable`` functions of the package."""
    import types

    from numba.core.dispatcher import Dispatcher

    py = fn.py_func if isinstance(fn, Dispatcher) else fn
    callees = []
    for name in py.__code__.co_names:
        v = py.__globals__.get(name)
        if isinstance(v, Dispatcher) or (isinstance(v, types.FunctionType)
                                         and (v.__module__ or "").startswith("accelmap.")):
            callees.append((name, v))
    return py, callees


def _python_twin(fn, memo: dict):  # noqa: ANN001, ANN202
    """A plain Python copy of ``fn`` whose global names that refer to the functions it calls
    (`_package_callees`) refer to their twins."""
    import types

    py, callees = _package_callees(fn)
    if py in memo:
        return memo[py]
    glb = dict(py.__globals__)
    twin = types.FunctionType(py.__code__, glb, py.__name__, py.__defaults__, py.__closure__)
    memo[py] = twin
    for name, v in callees:
        glb[name] = _python_twin(v, memo)
    return twin


def source_digest(fn) -> int:  # noqa: ANN001
    """A 60-bit digest of the source files of every package module whose functions ``fn``
    reaches (through `_package_callees`, as `_python_twin` follows them): a kernel cached on
    disk (``cuda.jit(cache=True)``) that holds it as a closure constant is compiled again when
    any rule it calls changes (numba's cache looks at the kernel's own file alone)."""
    import hashlib
    import sys

    seen: set = set()
    modules: set[str] = set()
    todo = [fn]
    while todo:
        py, callees = _package_callees(todo.pop())
        if py in seen:
            continue
        seen.add(py)
        modules.add(py.__module__)
        todo.extend(v for _, v in callees)
    h = hashlib.sha256()
    for m in sorted(modules):
        path = getattr(sys.modules.get(m), "__file__", None)
        h.update(m.encode())
        if path:
            with open(path, "rb") as f:
                h.update(f.read())
    return int(h.hexdigest()[:15], 16)


# The systolic and aspect kernels size their per-thread scratch for at least this many dims
# (`local_dims`), so that one compiled kernel serves every problem of up to 8 dims (convolutions
# 7, grouped ones 8, GEMMs 3, batched matmuls 4) on every arch: its compile (tens of seconds to
# minutes) is paid once a machine, not once a new dim count. The rules index the scratch by the
# problem's own dim count, so the entries past it are never read.
LOCAL_DIMS = 8


def local_dims(D: int) -> int:
    """How many dims a systolic or aspect kernel's per-thread scratch holds for a problem of
    ``D`` dims (`LOCAL_DIMS` at least)."""
    return max(int(D), LOCAL_DIMS)


_DEVICE_CONSTANTS: dict[int, tuple[object, list]] = {}


def device_constants(owner: object, arrays: tuple) -> list:
    """Device copies of ``arrays``, the constants of ``owner`` (an immutable object such as a
    model's per-(problem, arch) constants), made on the first call for that object and kept
    (the 16 last owners), so that each batch copies only its own rows to the device."""
    hit = _DEVICE_CONSTANTS.get(id(owner))
    if hit is not None and hit[0] is owner:
        return hit[1]
    if len(_DEVICE_CONSTANTS) >= 16:
        _DEVICE_CONSTANTS.clear()
    copies = [cuda.to_device(np.ascontiguousarray(a)) for a in arrays]
    _DEVICE_CONSTANTS[id(owner)] = (owner, copies)
    return copies


# The rules of `_loopnest_rules` (each written once, shared with both CPU drivers) and the
# generic row functions built on them.
_SHARED = tuple(getattr(R, name) for name in R.RULES) + (R.check_row, R.eval_range)


@functools.lru_cache(maxsize=1)
def _register_shared() -> None:
    """Make the CPU kernel's per-row functions callable from CUDA kernels (same source)."""
    from numba.cuda.extending import register_jitable  # type: ignore[attr-defined]

    for fn in _SHARED:
        register_jitable(fn)


# ------------------------------------------------------------------------------------------
# Device-side sampling tables
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class SamplerTables:
    """What the device sampler needs: ``pf`` (D, F) the prime factors of each bound (``npf``
    (D,) of them); ``slot_level``/``slot_kind``/``slot_temporal`` (S,) every place a factor can go (kind 0 =
    temporal, 1 = spatial X, 2 = spatial Y, the latter only below a level with that fanout)."""

    pf: np.ndarray
    npf: np.ndarray
    slot_level: np.ndarray
    slot_kind: np.ndarray
    slot_temporal: np.ndarray  # (S,) the temporal slot of the same level


def sampler_tables(problem: Problem, arch: Arch) -> SamplerTables:
    factors = []
    for b in problem.bounds.tolist():
        f, p = [], 2
        while b > 1:
            while b % p:
                p += 1
            b //= p
            f.append(p)
        factors.append(f)
    F = max(1, max(len(f) for f in factors))
    pf = np.ones((problem.n_dims, F), np.int64)
    for d, f in enumerate(factors):
        pf[d, :len(f)] = f
    slots = [(lv, k) for lv in range(arch.n_levels) for k in range(3)
             if k == 0 or (k == 1 and arch.levels[lv].fanout_x > 1) or (k == 2 and arch.levels[lv].fanout_y > 1)]
    return SamplerTables(pf=pf, npf=np.array([len(f) for f in factors], np.int64),
                         slot_level=np.array([s[0] for s in slots], np.int64),
                         slot_kind=np.array([s[1] for s in slots], np.int64),
                         slot_temporal=np.array([slots.index((s[0], 0)) for s in slots], np.int64))


@functools.lru_cache(maxsize=16)
def _kernels(L: int, D: int, T: int, C: int, F: int, buf_len: int, max_registers: int | None = None,
             tpb: int = 128) -> dict:
    """Kernels for one shape (local scratch sizes are compile-time constants); the search
    kernels optionally capped at ``max_registers`` per thread (more threads resident per
    SM, more spills)."""
    require()
    from numba import boolean, float64, int64

    eval_range = R.eval_range
    ENERGY = R._ENERGY
    P1 = L * D + 1  # shapes of local arrays: plain ints (compile-time constants)
    L1 = L + 1

    @cuda.jit
    def evaluate_kernel(temporal, spatial, order, keep, coef, nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy,
                        capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints, res, valid,
                        codes, cnt):
        i = cuda.grid(1)
        if i < temporal.shape[0]:
            tile = cuda.local.array((L1, D), int64)  # the scratch of `eval_range`
            g = cuda.local.array((L, D), int64)
            lp = cuda.local.array((9, P1), int64)
            kcs = cuda.local.array(L1, int64)
            spans = cuda.local.array(C, int64)
            shift = cuda.local.array(C, int64)
            deliv = cuda.local.array((L, T), int64)
            ext = cuda.local.array((1, D), int64)
            buf = cuda.local.array(buf_len, int64)
            lvl = cuda.local.array((5, L), int64)
            eval_range(i, i + 1, temporal, spatial, order, keep, coef, nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy,
                     capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints, res, valid, codes,
                     cnt, tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl)

    @cuda.jit(device=True)
    def rand_below(states, tid, k):
        """A uniform integer in [0, k)."""
        r = int(xoroshiro128p_uniform_float64(states, tid) * k)
        return r if r < k else k - 1

    @cuda.jit(device=True)
    def build(assign, pf, npf, slot_level, slot_kind, temporal, spatial):
        """Mapping factors from the slot of every prime factor."""
        for lv in range(L):
            for d in range(D):
                temporal[0, lv, d] = 1
                spatial[0, lv, d, 0] = 1
                spatial[0, lv, d, 1] = 1
        for d in range(D):
            for k in range(npf[d]):
                s = assign[d, k]
                lv, kind = slot_level[s], slot_kind[s]
                if kind == 0:
                    temporal[0, lv, d] *= pf[d, k]
                else:
                    spatial[0, lv, d, kind - 1] *= pf[d, k]

    @cuda.jit(device=True)
    def sample(states, tid, pf, npf, slot_level, slot_kind, slot_temporal, fan_xy, holds, assign, used, order, keep):
        """A random mapping: every prime factor to a random slot (a spatial slot only while
        the level's fanout along that axis still has room, else the level's temporal slot);
        random loop orders (Fisher-Yates); random bypass among the tensors a level may hold."""
        S = slot_level.shape[0]
        for lv in range(L):
            used[lv, 0] = 1
            used[lv, 1] = 1
        for d in range(D):
            for k in range(npf[d]):
                s = rand_below(states, tid, S)
                kind = slot_kind[s]
                if kind > 0:
                    lv = slot_level[s]
                    if used[lv, kind - 1] * pf[d, k] > fan_xy[lv, kind - 1]:
                        s = slot_temporal[s]
                    else:
                        used[lv, kind - 1] *= pf[d, k]
                assign[d, k] = s
        for lv in range(L):
            for j in range(D):
                order[0, lv, j] = j
            for j in range(D - 1, 0, -1):
                m = rand_below(states, tid, j + 1)
                x = order[0, lv, j]
                order[0, lv, j] = order[0, lv, m]
                order[0, lv, m] = x
        for lv in range(L):
            for t in range(T):
                if lv == 0:
                    keep[0, lv, t] = True
                else:
                    keep[0, lv, t] = holds[lv, t] and xoroshiro128p_uniform_float64(states, tid) < 0.5

    @cuda.jit(device=True)
    def save(tid, temporal, spatial, order, keep, best_t, best_s, best_o, best_k):
        for lv in range(L):
            for d in range(D):
                best_t[tid, lv, d] = temporal[0, lv, d]
                best_s[tid, lv, d, 0] = spatial[0, lv, d, 0]
                best_s[tid, lv, d, 1] = spatial[0, lv, d, 1]
                best_o[tid, lv, d] = order[0, lv, d]
            for t in range(T):
                best_k[tid, lv, t] = keep[0, lv, t]

    jit = cuda.jit if max_registers is None else cuda.jit(max_registers=max_registers)  # type: ignore[call-arg]

    @cuda.jit(device=True)
    def padded_edp(res, cnt, frac):
        """Cycles x energy, a padded tensor's energy scaled by the share of its words that
        exist (as `LoopNestModel` does after the kernel: _loopnest_numpy._count_existing_words)."""
        energy = res[0, 1]
        for t in range(T):
            if frac[t] < 1.0:
                s = 0.0
                for lv in range(L):
                    s += cnt[0, ENERGY, lv, t]
                energy += s * frac[t] - s
        return res[0, 0] * energy

    @jit
    def random_kernel(n_iter, states, pf, npf, slot_level, slot_kind, slot_temporal, coef, nterm, tdim, tcoef, closed, rel, bounds,
                      holds, fan_xy, capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints,
                      frac, best_obj, best_t, best_s, best_o, best_k, counters):
        tid = cuda.grid(1)
        if tid >= best_obj.shape[0]:
            return
        temporal = cuda.local.array((1, L, D), int64)
        spatial = cuda.local.array((1, L, D, 2), int64)
        order = cuda.local.array((1, L, D), int64)
        keep = cuda.local.array((1, L, T), boolean)
        assign = cuda.local.array((D, F), int64)
        used = cuda.local.array((L, 2), int64)
        res = cuda.local.array((1, 4), float64)
        valid = cuda.local.array(1, boolean)
        codes = cuda.local.array((1, 2), int64)
        cnt = cuda.local.array((1, 6, L, T), float64)
        tile = cuda.local.array((L1, D), int64)  # the scratch of `eval_range`
        g = cuda.local.array((L, D), int64)
        lp = cuda.local.array((9, P1), int64)
        kcs = cuda.local.array(L1, int64)
        spans = cuda.local.array(C, int64)
        shift = cuda.local.array(C, int64)
        deliv = cuda.local.array((L, T), int64)
        ext = cuda.local.array((1, D), int64)
        buf = cuda.local.array(buf_len, int64)
        lvl = cuda.local.array((5, L), int64)
        best = math.inf
        legal = 0
        for _ in range(n_iter):
            sample(states, tid, pf, npf, slot_level, slot_kind, slot_temporal, fan_xy, holds, assign, used, order, keep)
            build(assign, pf, npf, slot_level, slot_kind, temporal, spatial)
            eval_range(0, 1, temporal, spatial, order, keep, coef, nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy,
                     capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints, res, valid,
                     codes, cnt, tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl)
            if valid[0]:
                legal += 1
                obj = padded_edp(res, cnt, frac)  # EDP: cycles x energy
                if obj < best:
                    best = obj
                    save(tid, temporal, spatial, order, keep, best_t, best_s, best_o, best_k)
        best_obj[tid] = best
        counters[tid, 0] = n_iter
        counters[tid, 1] = legal

    @jit
    def anneal_kernel(n_steps, n_init, t_start, t_end, states, pf, npf, slot_level, slot_kind, slot_temporal, coef,
                      nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy, capacity, block, read_pj, write_pj, read_bw,
                      write_bw, tensor_size, scal, ints, frac, best_obj, best_t, best_s, best_o, best_k, counters):
        tid = cuda.grid(1)
        if tid >= best_obj.shape[0]:
            return
        temporal = cuda.local.array((1, L, D), int64)
        spatial = cuda.local.array((1, L, D, 2), int64)
        order = cuda.local.array((1, L, D), int64)
        keep = cuda.local.array((1, L, T), boolean)
        assign = cuda.local.array((D, F), int64)
        used = cuda.local.array((L, 2), int64)
        res = cuda.local.array((1, 4), float64)
        valid = cuda.local.array(1, boolean)
        codes = cuda.local.array((1, 2), int64)
        cnt = cuda.local.array((1, 6, L, T), float64)
        tile = cuda.local.array((L1, D), int64)  # the scratch of `eval_range`
        g = cuda.local.array((L, D), int64)
        lp = cuda.local.array((9, P1), int64)
        kcs = cuda.local.array(L1, int64)
        spans = cuda.local.array(C, int64)
        shift = cuda.local.array(C, int64)
        deliv = cuda.local.array((L, T), int64)
        ext = cuda.local.array((1, D), int64)
        buf = cuda.local.array(buf_len, int64)
        lvl = cuda.local.array((5, L), int64)
        S = slot_level.shape[0]
        best = math.inf
        legal = 0
        evals = 0
        cur = math.inf
        has_factors = False  # some bound > 1 (else no factor can move)
        for d in range(D):
            if npf[d] > 0:
                has_factors = True
        # One call site of the (large, inlined) model: a chain draws until its first legal
        # mapping, then anneals; n_init + n_steps evaluations in all.
        ratio = t_end / t_start
        for step in range(n_init + n_steps):
            if cur == math.inf:  # no legal state yet: keep drawing
                sample(states, tid, pf, npf, slot_level, slot_kind, slot_temporal, fan_xy, holds, assign, used, order, keep)
                kind_move, a, b, c = -1, 0, 0, 0
            else:
                u = xoroshiro128p_uniform_float64(states, tid)
                if u < 0.6 and has_factors:  # one prime factor of one dim to another slot
                    kind_move = 0
                    a = rand_below(states, tid, D)
                    while npf[a] == 0:
                        a = rand_below(states, tid, D)
                    b = rand_below(states, tid, npf[a])
                    c = assign[a, b]
                    assign[a, b] = rand_below(states, tid, S)
                elif u < 0.85:  # swap two loops of one level
                    kind_move = 1
                    a = rand_below(states, tid, L)
                    b = rand_below(states, tid, D)
                    c = rand_below(states, tid, D)
                    x = order[0, a, b]
                    order[0, a, b] = order[0, a, c]
                    order[0, a, c] = x
                else:  # flip one bypass bit (never at the outermost level)
                    kind_move = 2
                    a = 1 + rand_below(states, tid, L - 1) if L > 1 else 0
                    b = rand_below(states, tid, T)
                    c = 0
                    if a > 0 and holds[a, b]:
                        keep[0, a, b] = not keep[0, a, b]
            build(assign, pf, npf, slot_level, slot_kind, temporal, spatial)
            eval_range(0, 1, temporal, spatial, order, keep, coef, nterm, tdim, tcoef, closed, rel, bounds, holds, fan_xy,
                     capacity, block, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, ints, res, valid,
                     codes, cnt, tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl)
            evals += 1
            accept = False
            if valid[0]:
                legal += 1
                obj = padded_edp(res, cnt, frac)
                lo = math.log(obj)
                temp = t_start * ratio ** (step / (n_init + n_steps))
                if lo <= cur or xoroshiro128p_uniform_float64(states, tid) < math.exp((cur - lo) / temp):
                    accept = True
                    cur = lo
                if obj < best:
                    best = obj
                    save(tid, temporal, spatial, order, keep, best_t, best_s, best_o, best_k)
            if not accept and kind_move >= 0:  # undo the move
                if kind_move == 0:
                    assign[a, b] = c
                elif kind_move == 1:
                    x = order[0, a, b]
                    order[0, a, b] = order[0, a, c]
                    order[0, a, c] = x
                elif a > 0 and holds[a, b]:
                    keep[0, a, b] = not keep[0, a, b]
        best_obj[tid] = best
        counters[tid, 0] = evals
        counters[tid, 1] = legal

    return {"evaluate": evaluate_kernel, "random": random_kernel, "anneal": anneal_kernel}


def _shape_key(consts: K.KernelConsts, problem: Problem, arch: Arch, tables: SamplerTables | None) -> tuple:
    T, C, _ = consts.coef.shape
    # The enumeration buffer of eq. S is needed only for coordinates of three or more dims.
    buf_len = int(consts.ints[1]) if int(consts.nterm.max(initial=0)) > 2 else 1
    if buf_len > 4096:
        raise DeviceError(f"--device cuda: a coordinate of three or more dims over a fanout of {buf_len} is not "
                          "supported on the GPU (at most 4096); use the cpu engine")
    F = 1 if tables is None else int(tables.pf.shape[1])
    return (arch.n_levels, problem.n_dims, T, C, F, buf_len)


def kernel_info(problem: Problem, arch: Arch, kind: str, max_registers: int | None = None,
                kernel: str = "generic", share: str = "order", anneal_share: str = "move", redirect: bool = True,
                lanes: int = 1, tpb: int = 128, orders: int = 1) -> dict:
    """Registers and local memory per thread of a compiled search kernel (after a launch)."""
    consts = K.kernel_consts(problem, arch)
    tables = sampler_tables(problem, arch)
    if kernel == "specialized":
        regs = _cuda_search.max_registers(kind, max_registers)
        kern = _cuda_search.search_kernels(_cuda_search.SearchSpec(consts, tables, problem.existing_fraction()), share,
                                           regs, anneal_share, bool(redirect), int(lanes),
                                           int(tpb) if lanes > 1 and kind == "anneal" else 0,
                                           kind == "anneal" and lanes == 1 and orders == 1)[kind]
    else:
        kern = _kernels(*_shape_key(consts, problem, arch, tables), max_registers)[kind]
    if not hasattr(kern, "get_regs_per_thread"):  # the CUDA simulator compiles nothing
        return {"registers": 0, "local_bytes": 0}
    regs, local = kern.get_regs_per_thread(), kern.get_local_mem_per_thread()
    regs = next(iter(regs.values())) if isinstance(regs, dict) else regs
    local = next(iter(local.values())) if isinstance(local, dict) else local
    return {"registers": int(regs), "local_bytes": int(local)}


@functools.lru_cache(maxsize=1)
def _seed_kernel():
    from numba import uint64

    golden, m1, m2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    u27, u30, u31 = np.uint64(27), np.uint64(30), np.uint64(31)

    @cuda.jit(device=True)
    def splitmix(z):
        z = (z ^ (z >> u30)) * m1
        z = (z ^ (z >> u27)) * m2
        return z ^ (z >> u31)

    @cuda.jit
    def seed_kernel(states, seed):
        i = cuda.grid(1)
        if i < states.shape[0]:
            z = uint64(seed) + (uint64(i) * uint64(2) + uint64(1)) * golden
            s0 = splitmix(z)
            s1 = splitmix(z + golden)
            if s0 == 0 and s1 == 0:  # xoroshiro's one forbidden state
                s1 = uint64(1)
            states[i]["s0"] = s0
            states[i]["s1"] = s1

    return seed_kernel


def device_states(n: int, seed: int) -> object:
    """``n`` xoroshiro128+ states (numba's state layout), seeded on the device: state i is
    two SplitMix64 outputs of its own point of the seed's Weyl sequence (Steele, Lea and
    Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the seeding Vigna
    recommends for xoroshiro). numba's ``create_xoroshiro128p_states`` jumps every stream
    ahead on the host instead, which took 50-150 ms per launch of 262,144 threads: most of
    a short launch's time."""
    states = cuda.device_array(max(int(n), 1), dtype=xoroshiro128p_dtype)
    blocks, tpb = _threads(states.shape[0])
    _seed_kernel()[blocks, tpb](states, np.uint64(int(seed) % 2**64))
    return states


def _threads(n: int) -> tuple[int, int]:
    tpb = 128
    return (n + tpb - 1) // tpb, tpb


def evaluate(consts: K.KernelConsts, problem: Problem, arch: Arch, temporal, spatial, order, keep) -> dict:
    """`_loopnest_kernel.evaluate_batch` on the GPU: one thread per mapping."""
    require()
    n, L, _ = temporal.shape
    T = keep.shape[2]
    kern = _kernels(*_shape_key(consts, problem, arch, None))["evaluate"]
    shapes = (((n, 4), np.float64), ((n,), np.bool_), ((n, 2), np.int64), ((n, 6, L, T), np.float64))
    res, valid, codes, cnt = (np.empty(s, dtype=t) for s, t in shapes)
    if n:
        dev = [cuda.to_device(np.ascontiguousarray(a)) for a in (
            np.asarray(temporal, np.int64), np.asarray(spatial, np.int64), np.asarray(order, np.int64),
            np.asarray(keep, np.bool_))]
        cdev = [cuda.to_device(a) for a in consts.as_tuple()]
        # Outputs allocated on the device only (the kernel writes every entry of every row):
        # copying empty host arrays there was about 150 MB of transfers for nothing at 200,000 rows.
        out = [cuda.device_array(s, dtype=t) for s, t in shapes]
        blocks, tpb = _threads(n)
        kern[blocks, tpb](*dev, *cdev, *out)
        res, valid, codes, cnt = (o.copy_to_host() for o in out)
    return {"cycles": res[:, R._CYCLES], "energy_pj": res[:, R._ENERGY_PJ],
            "compute_energy_pj": res[:, R._COMPUTE_PJ], "utilization": res[:, R._UTIL], "valid": valid,
            "reason": codes[:, 0], "reason_level": codes[:, 1], "reads": cnt[:, R._READS],
            "fills": cnt[:, R._FILLS], "updates": cnt[:, R._UPDATES], "energy_breakdown_pj": cnt[:, R._ENERGY],
            "multicast": cnt[:, R._MCAST], "spatial_reductions": cnt[:, R._SRED]}


def fits_32bit_check(problem: Problem, arch: Arch) -> tuple[bool, str]:
    """Whether the specialized search kernels may run ``problem`` on ``arch`` (and if not,
    why): `accelmap.costmodels._cuda_search.fits_32bit`."""
    return _cuda_search.fits_32bit(problem, arch)


def search_objective(problem: Problem, arch: Arch, temporal, spatial, order, keep) -> tuple[np.ndarray, np.ndarray]:
    """(edp, fits) of host rows through the specialized search kernels' evaluation (rows with
    exact factorizations, permutation orders and allowed bypass; fanouts and capacities are
    checked): what the searches compute, for equality tests against the host engines."""
    require()
    ok32, why = _cuda_search.fits_32bit(problem, arch)
    if not ok32:
        raise DeviceError(f"the specialized search kernels need 32-bit tiles: {why}")
    spec = _cuda_search.search_spec(problem, arch, sampler_tables(problem, arch))
    kern = _cuda_search.search_kernels(spec)["objective"]
    n = temporal.shape[0]
    out_edp, out_fits = np.full(n, np.inf), np.zeros(n, np.bool_)
    if n:
        dev = [cuda.to_device(np.ascontiguousarray(a, dtype=dt)) for a, dt in (
            (temporal, np.int64), (spatial, np.int64), (order, np.int64), (keep, np.bool_))]
        oe, of = cuda.to_device(out_edp), cuda.to_device(out_fits)
        blocks, tpb = _threads(n)
        kern[blocks, tpb](_cuda_search.loop_counts(spec), *dev, oe, of)
        out_edp, out_fits = oe.copy_to_host(), of.copy_to_host()
    return out_edp, out_fits


@dataclass(frozen=True, slots=True, eq=False)
class GpuSearchResult:
    """Best rows of a device search (one per thread, sorted by EDP, ``top`` kept) and its
    counters: evaluations, legal evaluations, kernel seconds (device time, synchronized)."""

    edp: np.ndarray
    temporal: np.ndarray
    spatial: np.ndarray
    order: np.ndarray
    keep: np.ndarray
    evaluations: int
    legal: int
    seconds: float
    threads: int
    kernel: str = "generic"

    @property
    def legal_per_s(self) -> float:
        return self.legal / self.seconds if self.seconds > 0 else math.nan

    @property
    def evals_per_s(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else math.nan


def _search(kind: str, problem: Problem, arch: Arch, *, threads: int, seed: int, top: int, args: tuple,
            max_registers: int | None = None, tpb: int = 128, kernel: str = "auto", share: str = "order",
            tries: int = 8, orders: int = 1, anneal_share: str = "move", redirect: bool = True,
            lanes: int = 1, restart: int = 0) -> GpuSearchResult:
    require()
    if kernel not in ("auto", "specialized", "generic"):
        raise SpecError(f"kernel = {kernel!r}; expected one of auto, specialized, generic")
    if share not in _cuda_search.SHARES:
        raise SpecError(f"share = {share!r}; expected one of {', '.join(_cuda_search.SHARES)}")
    if int(lanes) < 1 or _cuda_search.WARP % int(lanes):
        raise SpecError(f"lanes = {lanes}; expected a divisor of {_cuda_search.WARP} (1, 2, 4, 8, 16 or 32)")
    if anneal_share not in _cuda_search.ANNEAL_SHARES:
        raise SpecError(f"anneal_share = {anneal_share!r}; expected one of {', '.join(_cuda_search.ANNEAL_SHARES)}")
    if int(orders) < 1:
        raise SpecError(f"orders = {orders}; expected an int >= 1")
    if int(tries) < 1:
        raise SpecError(f"tries = {tries}; expected an int >= 1")
    if tpb < 32 or tpb % 32:
        raise SpecError(f"tpb = {tpb}; expected a positive multiple of 32 (whole warps)")
    if threads < 1:
        raise SpecError(f"threads = {threads}; expected an int >= 1")
    if kind == "anneal" and int(lanes) > 1:  # whole blocks: a block's lanes step together
        threads = -(-int(threads) // tpb) * tpb
    consts = K.kernel_consts(problem, arch)
    tables = sampler_tables(problem, arch)
    ok32, why = _cuda_search.fits_32bit(problem, arch)
    if kernel == "specialized" and not ok32:
        raise DeviceError(f"the specialized search kernels need 32-bit tiles: {why}; use kernel='generic'")
    specialized = kernel == "specialized" or (kernel == "auto" and ok32)
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    blocks = (threads + tpb - 1) // tpb
    states = device_states(threads, seed)
    best_obj = cuda.device_array(threads, np.float64)
    best_t = cuda.device_array((threads, L, D), np.int64)
    best_s = cuda.device_array((threads, L, D, 2), np.int64)
    best_o = cuda.device_array((threads, L, D), np.int64)
    best_k = cuda.device_array((threads, L, T), np.bool_)
    counters = cuda.device_array((threads, 2), np.int64)
    outs = (best_obj, best_t, best_s, best_o, best_k, counters)
    if specialized:
        spec = _cuda_search.SearchSpec(consts, tables, problem.existing_fraction())
        regs = _cuda_search.max_registers(kind, max_registers)
        lanes = int(lanes) if kind == "anneal" else 1
        # (one mapping per step and one thread per chain: the annealing kernel built for that case)
        single = kind == "anneal" and lanes == 1 and int(orders) == 1
        kern = _cuda_search.search_kernels(spec, share, regs, anneal_share, bool(redirect), lanes,
                                           tpb if lanes > 1 else 0, single)[kind]
        # one warp-wide generator per warp of the launch, from a stream of its own
        wstates = device_states(blocks * tpb // _cuda_search.WARP, (int(seed) * 1_000_003 + 7_919) % 2**63)
        if kind == "random":
            n_draws, = args
            tries = max(1, min(int(tries), int(n_draws)))
            # a round checks up to `tries` draws, then evaluates the fitting one under `orders` loop orders
            n_rounds = max(1, int(n_draws) // (tries + int(orders) - 1))
            launch_args = (n_rounds, tries, int(orders), _cuda_search.loop_counts(spec), states, wstates)
        else:
            # loop-order variants per step: at most the distinct swaps of a mapping
            n_orders = max(1, min(int(orders), _cuda_search.loop_pairs(spec)))
            launch_args = (*args, n_orders, int(restart), _cuda_search.loop_counts(spec), states, wstates)
    else:
        kern = _kernels(*_shape_key(consts, problem, arch, tables), max_registers)[kind]
        cdev = [cuda.to_device(a) for a in consts.as_tuple()]
        tdev = [cuda.to_device(a) for a in (tables.pf, tables.npf, tables.slot_level, tables.slot_kind,
                                                 tables.slot_temporal)]
        launch_args = (*args, states, *tdev, *cdev, cuda.to_device(problem.existing_fraction()))
    cuda.synchronize()
    t0 = time.perf_counter()
    kern[blocks, tpb](*launch_args, *outs)
    cuda.synchronize()
    secs = time.perf_counter() - t0
    obj = best_obj.copy_to_host()
    cnt = counters.copy_to_host()
    pick = np.argsort(obj, kind="stable")[:top]
    pick = pick[np.isfinite(obj[pick])]
    # only the chosen rows come back from the device
    take = [np.stack([a[int(i)].copy_to_host() for i in pick]) if pick.size else np.zeros((0,) + a.shape[1:], a.dtype)
            for a in (best_t, best_s, best_o, best_k)]
    return GpuSearchResult(edp=obj[pick], temporal=take[0], spatial=take[1], order=take[2], keep=take[3],
                           evaluations=int(cnt[:, 0].sum()), legal=int(cnt[:, 1].sum()), seconds=secs,
                           threads=threads, kernel="specialized" if specialized else "generic")


def random_search(problem: Problem, arch: Arch, *, threads: int = 1 << 16, per_thread: int = 64, seed: int = 0,
                  top: int = 16, max_registers: int | None = None, tpb: int = 128, kernel: str = "auto",
                  share: str = "order", tries: int = 8, orders: int = 1) -> GpuSearchResult:
    """Random search on the device: at most ``threads x per_thread`` mappings drawn and
    checked there, the legal ones evaluated; each thread's best returns.

    ``kernel``: ``"specialized"`` (`accelmap.costmodels._cuda_search`: compiled per (problem,
    arch), objective only, 32-bit tiles; ``per_thread // tries`` rounds, each drawing up to
    ``tries`` mappings until one fits, the lanes of a warp sharing what ``share`` says:
    ``"none"``, ``"order"`` or ``"order+keep"``; the fitting draw is evaluated under
    ``orders`` random loop orders, which reuse its tile-dependent terms, and a round counts
    ``tries + orders - 1`` of the ``per_thread`` draws), ``"generic"`` (the CPU kernel's code,
    ``per_thread`` draws each evaluated), or ``"auto"``: specialized where
    `_cuda_search.fits_32bit` allows."""
    return _search("random", problem, arch, threads=threads, seed=seed, top=top, args=(per_thread,),
                   max_registers=max_registers, tpb=tpb, kernel=kernel, share=share, tries=tries, orders=orders)


def anneal_search(problem: Problem, arch: Arch, *, threads: int = 1 << 16, steps: int = 256, n_init: int = 8,
                  t_start: float = 1.0, t_end: float = 0.01, seed: int = 0, top: int = 16,
                  max_registers: int | None = None, tpb: int = 128, kernel: str = "auto",
                  anneal_share: str = "move", redirect: bool = True, orders: int = 1,
                  lanes: int = 1, restart: int = 0) -> GpuSearchResult:
    """Simulated annealing on the device, one chain per thread (temperatures on log EDP),
    ``n_init + steps`` steps per chain (``kernel`` as in `random_search`;
    ``anneal_share="move"``: the chains of a warp draw each round's move kind alike, so that
    loop swaps and bypass flips, which reuse the tile-dependent terms, run together; ``"none"``:
    each chain draws its own). In the specialized kernel an illegal move is a rejected step;
    ``redirect`` (default): a factor moved to a spatial slot without room for it goes to that
    level's temporal slot instead (fewer illegal moves; the proposal is then no longer uniform
    over slots; ``False``: uniform, an illegal move rejected).

    ``orders`` (specialized kernel): a step whose move fits evaluates ``orders`` distinct
    mappings from one set of factor caches, the moved mapping and ``orders - 1`` loop-order
    variants of it (one more distinct loop swap each; a swap step: ``orders`` distinct swaps),
    and the best of them goes through the Metropolis test (a multiple-try move, as the CPU
    ``anneal`` takes the best of its proposals); capped at the number of distinct swaps
    (`_cuda_search.loop_pairs`). ``lanes``: GPU threads per chain (a divisor of 32): each
    lane of a chain proposes its own move (and its ``orders - 1`` variants) from the chain's
    state, the best of the ``lanes x orders`` mappings goes through the Metropolis test, and
    the winner's state becomes every lane's (``threads // lanes`` chains; ``threads`` is
    rounded up to whole blocks of ``tpb``, whose lanes step together). Evaluations count
    every mapping checked (a refused move: one, not legal) and every one evaluated (legal);
    with ``orders=1`` and ``lanes=1``, one per step, as before. ``restart`` (chains of several
    lanes; 0: never): every ``restart`` steps the worse half of a block's chains take the
    states of its better half, rank for rank (population annealing; it evaluates nothing).
    The generic kernel takes one evaluation per step (``orders``, ``lanes`` and ``restart`` do
    not apply)."""
    if int(orders) < 1:
        raise SpecError(f"orders = {orders}; expected an int >= 1")
    if isinstance(restart, bool) or int(restart) < 0:
        raise SpecError(f"restart = {restart!r}; expected an int >= 0 (0: no restarts)")
    return _search("anneal", problem, arch, threads=threads, seed=seed, top=top,
                   args=(steps, n_init, t_start, t_end), max_registers=max_registers, tpb=tpb, kernel=kernel,
                   anneal_share=anneal_share, redirect=redirect, orders=orders, lanes=lanes, restart=restart)
