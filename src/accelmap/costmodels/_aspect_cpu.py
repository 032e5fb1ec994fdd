"""The ``aspect`` model's CPU row loop specialised per structure.

`accelmap.costmodels._aspect_kernel` holds the rules, each written once (``check_row``,
``plan_row`` with ``_tiles``, ``regular_row``, the case analysis of ``general_row``), and the
generic driver ``eval_rows``, one compiled function for every problem and arch, which reads the
structure from arrays at run time. This module compiles the same row loop (``eval_range``) once
per structure with the structure as compile-time constants: the shapes (levels, dims, tensors,
MAESTRO's variables), the array level, the slots of Y X R S and the strides (the sliding-window
dims), which dims each tensor reads (``tmask``) and which problem dim each slot is (``src``),
which level may hold which tensor, the fan-out shapes, the NoC and off-chip bandwidths. They
are arrays captured by the driver's closure, which numba compiles as constant data, so the
rules' loops over them have constant trip counts (LLVM unrolls them) and their tests on the
structure fold. The layer's values (bounds, extents, MACs) and the mapping (factors, order,
spatial choice) stay run-time: every layer of one shape and stride pattern on one arch shares
a driver.

The rules are the same code objects (`_rule_copies`: ``eval_range`` and the rules it inlines
into the row loop, compiled ``inline="always"``, so that the constants reach them); the case
analysis stays calls of the kernel's own compiled rules. The results are therefore those of
the generic driver, bit for bit (`tests/unit/costmodels/test_aspect_cpu.py`).

A driver compiles once per structure (cold: see docs/performance.md) and is kept in numba's
on-disk cache (``cache=True``: the index key holds the closure's values, the structure's tables
and a digest of `_aspect_kernel`'s source, so an edit of the rules compiles the drivers anew).
`AspectModel` runs the generic driver until a (problem, arch) has seen
`SPECIALISE_AFTER_ROWS` rows, so that a short run never waits for the compile.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import types
from pathlib import Path

import numpy as np
from numba import njit
from numba.core import cgutils
from numba.core import types as nbtypes
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from accelmap.costmodels import _aspect_kernel as _k

__all__ = ["structure", "driver", "compiled", "wait", "SPECIALISE_AFTER_ROWS"]

# Rows of one (problem, arch) the generic driver serves before the specialised one is asked
# for (its compile started in the background, the first time on a machine; loaded from numba's
# cache later): as `_loopnest_kernel._SPECIALISE_AFTER_ROWS`, so that evaluating a few
# mappings (``accelmap evaluate``, a short search) starts no compile.
SPECIALISE_AFTER_ROWS = 100_000

_JIT = {"cache": True, "_nrt": False}


def _rules_digest() -> int:
    """A digest of `_aspect_kernel`'s source (the structure's last entry): numba's cache keys a
    driver by this module's source and the closure's values, not by the rules it inlines."""
    try:
        return int.from_bytes(hashlib.sha256(Path(_k.__file__).read_bytes()).digest()[:7], "big")
    except OSError:  # (no source file to read: nothing to tell apart)
        return 0


_RULES_DIGEST = _rules_digest()

# The rules inlined into the specialised row loop (the row loop itself included, so that the
# closure's constants reach every rule it inlines).
_INLINE = ("check_row", "_tiles", "plan_row", "regular_row", "eval_range")


def _rule_copies() -> dict:
    """``eval_range`` and the rules of `_INLINE`, the same code objects compiled as
    ``inline="always"`` njit functions; their calls of the other rules (the case analysis)
    resolve to `_aspect_kernel`'s compiled rules."""
    ns = dict(vars(_k))
    out = {}
    for name in _INLINE:
        fn = getattr(_k, name)
        copy = types.FunctionType(fn.__code__, ns, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        out[name] = njit(inline="always", _nrt=False)(copy)  # type: ignore[call-overload]  # _nrt: a numba flag its stubs leave out
        ns[name] = out[name]
    return out


_RULES = _rule_copies()
eval_range = _RULES["eval_range"]


def structure(consts: _k.AspectConsts) -> tuple:
    """The compile-time constants of an `AspectConsts`: ``ints`` with the MACs left out
    (they are the layer's, read from ``dfull``), the shapes and flat contents of ``src``,
    ``tmask``, ``holds`` and ``fan_xy``, and the rules' digest."""
    ints = consts.ints.copy()
    ints[_k._MACS] = 0

    def flat(a: np.ndarray) -> tuple[int, ...]:
        return tuple(int(x) for x in np.asarray(a).ravel())

    return (flat(ints), flat(consts.src), consts.tmask.shape, flat(consts.tmask), consts.holds.shape,
            flat(consts.holds), consts.fan_xy.shape, flat(consts.fan_xy), _RULES_DIGEST)


def _tables(S: tuple) -> tuple[np.ndarray, ...]:
    """INTS, SRC, TMASK, HOLDS, FAN_XY of a structure, read-only (numba's constants)."""
    ints, src, tshape, tmask, hshape, holds, fshape, fan, _ = S

    def arr(x: tuple, dtype: type, shape: tuple) -> np.ndarray:
        a = np.array(x, dtype=dtype).reshape(shape)
        a.setflags(write=False)
        return a

    return (arr(ints, np.int64, (len(ints),)), arr(src, np.int64, (len(src),)), arr(tmask, np.bool_, tshape),
            arr(holds, np.bool_, hshape), arr(fan, np.int64, fshape))


def _stack_codegen(shape: list[int]):  # noqa: ANN202
    arrty = nbtypes.Array(nbtypes.int64, len(shape), "C")

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202, ARG001
        size = int(np.prod(shape))
        data = cgutils.alloca_once(builder, context.get_value_type(nbtypes.int64), size=max(size, 1))
        strides = [8 * int(np.prod(shape[k + 1:])) for k in range(len(shape))]
        ary = make_array(arrty)(context, builder)
        intp = context.get_value_type(nbtypes.intp)
        populate_array(ary, data=data, shape=[intp(x) for x in shape], strides=[intp(x) for x in strides],
                       itemsize=intp(8), meminfo=None)
        return ary._getvalue()

    return arrty, codegen


def _literal(*dims) -> list[int] | None:  # noqa: ANN002
    if not all(isinstance(d, nbtypes.IntegerLiteral) for d in dims):
        return None
    return [int(d.literal_value) for d in dims]


# ``stack_array(a)`` .. ``stack_array4(a, b, c, d)``: a C-ordered int64 array of constant shape
# whose data is on the calling function's stack (allocated once, in its entry block; contents
# undefined). Unlike scratch from the caller, LLVM knows it aliases nothing else, so its values
# can stay in registers and its stores need not be kept where nothing reads them.

@intrinsic
def stack_array(typingctx, a):  # noqa: ANN001, ANN201, ARG001 (a numba intrinsic)
    shape = _literal(a)
    if shape is None:
        return None
    arrty, codegen = _stack_codegen(shape)
    return arrty(a), codegen


@intrinsic
def stack_array2(typingctx, a, b):  # noqa: ANN001, ANN201, ARG001 (a numba intrinsic)
    shape = _literal(a, b)
    if shape is None:
        return None
    arrty, codegen = _stack_codegen(shape)
    return arrty(a, b), codegen


@intrinsic
def stack_array3(typingctx, a, b, c):  # noqa: ANN001, ANN201, ARG001 (a numba intrinsic)
    shape = _literal(a, b, c)
    if shape is None:
        return None
    arrty, codegen = _stack_codegen(shape)
    return arrty(a, b, c), codegen


@intrinsic
def stack_array4(typingctx, a, b, c, d):  # noqa: ANN001, ANN201, ARG001 (a numba intrinsic)
    shape = _literal(a, b, c, d)
    if shape is None:
        return None
    arrty, codegen = _stack_codegen(shape)
    return arrty(a, b, c, d), codegen


@functools.lru_cache(maxsize=32)
def driver(S: tuple):  # noqa: ANN201 (a numba dispatcher)
    """The row loop of structure ``S``: ``rows(temporal, spatial, order, keep, dfull, bounds,
    out, codes)`` fills ``out`` and ``codes`` of every row as `_aspect_kernel.eval_rows`
    does, its scratch on its own stack (`stack_array`). It releases the GIL, so
    blocks of a batch can run on several threads. numba compiles it on its first call or loads
    it from the on-disk cache (the closure holds the tables of ``S`` and its digest)."""
    INTS, SRC, TMASK, HOLDS, FAN_XY = _tables(S)

    D = int(INTS[_k._D])
    MEMO = _k.MEMO
    DIGEST = S[-1]  # (the rules' digest: in the closure, so that numba's cache keys the driver by it)

    @njit(nogil=True, **_JIT)  # type: ignore[call-overload]
    def rows(temporal, spatial, order, keep, dfull, bounds, out, codes):
        if DIGEST < 0:  # (never: a digest is >= 0)
            return
        # the scratch of `_aspect_kernel._scratch`, on the stack
        sc = (stack_array(D), stack_array(D), stack_array2(4, 9), stack_array(9), stack_array(D), stack_array(D),
              stack_array(9), stack_array(9), stack_array2(10, 9), stack_array3(2, 8, 8), stack_array3(2, 4, 9),
              stack_array4(2, 7, 3, 5), stack_array3(2, 4, 7), stack_array3(2, 7, 5), stack_array2(6, 3),
              stack_array2(3, 9), stack_array2(MEMO, 9), stack_array(MEMO), stack_array(1))
        eval_range(0, temporal.shape[0], temporal, spatial, order, keep, INTS, SRC, dfull, TMASK, bounds, HOLDS,
                   FAN_XY, out, codes, sc)

    return rows


# Compiled drivers by structure (None: the compile failed; the generic driver serves), the
# compiles under way, and the same drivers by the identity of their structure tuple (hashing
# the tuple, a hundred small ints or more, would cost microseconds a call).
_READY: dict[tuple, object] = {}
_PENDING: dict[tuple, threading.Thread] = {}
_BY_ID: dict[int, tuple[tuple, object]] = {}
_LOCK = threading.Lock()


def _compile(S: tuple) -> None:
    """Compile (or load from numba's cache) the driver of ``S`` on one row the check rejects
    (all factors 0), with the argument types `_aspect_kernel.evaluate_rows` passes."""
    rows = None
    try:
        ints = S[0]
        L, D, T, nv = ints[_k._L], ints[_k._D], ints[_k._T], ints[_k._NV]
        z = np.zeros
        rows = driver(S)
        rows(z((1, L, D), np.int64), z((1, L, D, 2), np.int64), z((1, L, D), np.int64), z((1, L, T), np.bool_),
             z(nv + 3, np.int64), z(D, np.int64), z((1, _k.N_COLS), np.int64), z((1, 2), np.int64))
    except Exception:  # noqa: BLE001 (any failure: the generic driver keeps serving)
        rows = None
    with _LOCK:
        _READY[S] = rows
        _PENDING.pop(S, None)


def compiled(S: tuple, *, block: bool = False):  # noqa: ANN201 (a numba dispatcher or None)
    """The specialised driver of ``S`` if it is compiled, else None, its compile started in a
    background thread the first time it is asked for (``block``: wait for it), so that the
    caller's generic driver serves meanwhile."""
    hit = _BY_ID.get(id(S))
    if hit is not None and hit[0] is S:
        return hit[1]
    with _LOCK:
        done = S in _READY
        th = _PENDING.get(S)
        if not done and th is None:
            # not a daemon: a process that ends while it compiles waits for it (and caches the
            # driver) rather than tearing LLVM down under a thread that is running it
            th = threading.Thread(target=_compile, args=(S,), name="accelmap-aspect-compile", daemon=False)
            _PENDING[S] = th
            th.start()
    if th is not None and block:
        th.join()
    with _LOCK:
        if S not in _READY:
            return None
        rows = _READY[S]
        if len(_BY_ID) >= 64:
            _BY_ID.clear()
        _BY_ID[id(S)] = (S, rows)
        return rows


def wait() -> None:
    """Wait for every compile under way (benchmarks: time the steady state)."""
    with _LOCK:
        threads = list(_PENDING.values())
    for th in threads:
        th.join()
