"""The CPU engine of the ``loopnest`` model: its row loop specialised per structure.

`accelmap.costmodels._loopnest_rules` holds the counting rules, each written once
(``check``, ``row_tables``, ``closed_deliveries``, ``deliveries``, ``keeper_counts`` with
``distinct``, ``footprint`` and ``ceil_blocks``, ``latency_cycles``), and the generic driver
that calls them as functions of their own (``eval_range``: arrays in, one compiled function
for every problem and arch), which the CUDA kernels share; `accelmap.costmodels._loopnest_kernel`
picks the driver of a batch and calls this module's (`evaluate_rows`). On one CPU core two
things made that generic driver slow, and this module removes both:

* **calls**: each call of a rule passes every array as a by-value structure (shape,
  strides, data), and a row makes dozens of calls (footprints, deliveries, distinct
  offsets); here the row loop is one function per structure (`_driver`) and the rules are
  inlined into it at numba's IR stage (``_loopnest_rules.INLINED``: the same code objects
  compiled as ``inline="always"`` njit functions), none inlining more than one further
  level (a footprint, a distinct-offset count, a block rounding), which keeps the compile
  short;
* **tables read at run time**: what the (problem, arch) fix, the shapes L, D, T, C, the
  sparse coefficients of each tensor coordinate, which level may hold which tensor, the
  block sizes, which levels have a fanout, a capacity or a bandwidth limit, are here
  compile-time constants: the structure tuple and the arrays made from it (`_tables`),
  captured by a closure, which numba compiles as constant data, so the rules' loops over
  them unroll and their tests fold. Bounds, capacities, energies and bandwidths stay
  run-time arrays: every layer of one shape and stride pattern on one arch shares a kernel.

Where it can, the engine runs the row written out per structure instead (`rows_driver`:
`accelmap.costmodels._loopnest_gen`, generated source with every loop unrolled and the row's
values in locals, 1.6-1.9x faster per row); this module's `_driver` serves the structures that
generator does not write (a coordinate of more than two terms), and stays the reference the
generated rows are tested against.

What is this driver's own is the row loop and the output layout: the counts of a row go to
``cnt`` (or, with ``full=False``, only their energies, to a one-row scratch, so that a search,
which reads only cycles, energy, validity and reason, writes no (n, L, T) arrays), and padding is applied in
the row (`_loopnest_numpy._count_existing_words`' rule: a padded tensor's counts and energy
scaled by the share of its words that exist, the energy total moved by the change; the
generic driver's caller applies the same rule after the rows, ``_scale_padded``). The
integer and float operations are those of the rules, in the same order, so the results are
identical; the property tests compare both drivers with the numpy path bit for bit. A kernel
is compiled once per structure and kept in numba's on-disk cache (``cache=True``: the
closure's index key is the structure tuple and its tables; the structure ends with a digest
of `_loopnest_rules`' source, so an edit of the rules compiles the drivers anew).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numba import njit

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.costmodels import _loopnest_rules
from accelmap.costmodels.engines import thread_pool

__all__ = ["structure", "evaluate_rows", "rows_ready", "wait_rows"]

# The rules of `_loopnest_rules`, as the copies numba inlines at its IR stage.
check = _loopnest_rules.INLINED["check"]
row_tables = _loopnest_rules.INLINED["row_tables"]
closed_deliveries = _loopnest_rules.INLINED["closed_deliveries"]
deliveries = _loopnest_rules.INLINED["deliveries"]
keeper_counts = _loopnest_rules.INLINED["keeper_counts"]
latency_cycles = _loopnest_rules.INLINED["latency_cycles"]

# The codes and output slots of `_loopnest_rules` (kept equal by a test).
_FACTORS, _ORDER, _KEEP, _FANOUT, _CAPACITY = 2, 3, 4, 5, 6
_READS, _FILLS, _UPDATES, _ENERGY, _MCAST, _SRED = 0, 1, 2, 3, 4, 5
_CYCLES, _ENERGY_PJ, _COMPUTE_PJ, _UTIL = 0, 1, 2, 3
# Without numba's reference counting (``_nrt=False``): every array comes from the caller,
# scratch included, so no per-call bookkeeping is needed. numba's numpy error model: a
# division by zero gives numpy's value (inf or nan; 0 for integers) instead of raising, so
# the compiled divisions need no test of the divisor (the generated rows ran 0.97-0.98x the
# time, issue 14). No legal row divides by zero: the divisors are bandwidths (> 0 by the
# arch's validation), gcds and spans of tiles and the cycles (all >= 1), unless the row's
# int64 products wrap around; every CPU driver (this one, the generated rows and
# `_loopnest_rules.eval_rows`) uses it, so they agree on such a row too.
_JIT = {"cache": True, "_nrt": False, "error_model": "numpy"}


def _rules_digest() -> int:
    """A digest of `_loopnest_rules`' source, the last entry of every structure. numba's
    on-disk cache keys a driver by this module's source and the closure's values, not by the
    rules it inlines from `_loopnest_rules`; with the digest in the closure's structure, an
    edit of those shared rules compiles the drivers anew instead of loading stale ones (the
    rows of `_loopnest_gen` too: the digest is written into their source, whose own digest
    names their file)."""
    try:
        return int.from_bytes(hashlib.sha256(Path(_loopnest_rules.__file__).read_bytes()).digest()[:7], "big")
    except OSError:  # (no source file to read: nothing to tell apart)
        return 0


_RULES_DIGEST = _rules_digest()


def structure(consts) -> tuple:  # noqa: ANN001 (a `_loopnest_kernel.KernelConsts`: that module imports this one)
    """The compile-time constants of a `KernelConsts`: L, D, T, C, M (most nonzero terms of a
    coordinate), then flat tuples (row-major) of ``nterm`` (T, C), ``tdim``/``tcoef``
    (T, C, M), ``coef`` (T, C, D), ``holds`` (L, T), ``closed`` (T,), ``rel`` (T, D),
    ``block`` (L,), the output tensor, and per level whether the capacity, the read and the
    write bandwidth are finite, whether the level has a fanout, and the digest of the shared
    rules' source (`_rules_digest`)."""
    T, C, D = consts.coef.shape
    L = consts.holds.shape[0]
    M = consts.tdim.shape[2]

    def flat(a: np.ndarray) -> tuple[int, ...]:
        return tuple(int(x) for x in np.asarray(a).ravel())

    return (L, D, T, C, M, flat(consts.nterm), flat(consts.tdim), flat(consts.tcoef), flat(consts.coef),
            flat(consts.holds), flat(consts.closed), flat(consts.rel), flat(consts.block), int(consts.ints[0]),
            flat(np.isfinite(consts.capacity)), flat(np.isfinite(consts.read_bw)), flat(np.isfinite(consts.write_bw)),
            flat(consts.fan_xy[:, 0] * consts.fan_xy[:, 1] > 1), _RULES_DIGEST)


def _tables(S: tuple) -> tuple:
    """The tables of a structure as the shared rules of `_loopnest_rules` read them, as
    arrays: NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK with the shapes and dtypes of
    `KernelConsts`; the capacity, read and write limits as (L,) arrays finite exactly where
    the level has one (0.0, else inf), FANL (L,) true where the level has a fanout, and the
    output tensor. Captured by the driver's closure, numba
    compiles them as constants, so the rules' loops over them unroll and their tests fold."""
    L, D, T, C, M, nterm, tdim, tcoef, coef, holds, closed, rel, block, out, capf, rbwf, wbwf, fanl, _ = S

    def arr(x: tuple, dtype: type, *shape: int) -> np.ndarray:
        a: np.ndarray = np.array(x, dtype=dtype).reshape(shape)
        a.setflags(write=False)
        return a

    def limit(x: tuple) -> np.ndarray:
        return arr(tuple(0.0 if f else np.inf for f in x), np.float64, L)

    return (arr(nterm, np.int64, T, C), arr(tdim, np.int64, T, C, M), arr(tcoef, np.int64, T, C, M),
            arr(coef, np.int64, T, C, D), arr(holds, np.bool_, L, T), arr(closed, np.bool_, T), arr(rel, np.bool_, T, D),
            arr(block, np.int64, L), limit(capf), limit(rbwf), limit(wbwf),
            arr(fanl, np.bool_, L), out)


@functools.lru_cache(maxsize=32)
def _driver(S: tuple):  # noqa: ANN202 (a numba dispatcher)
    """The driver of one structure: rows lo..hi-1, legality (``check``), then the counts of
    the legal ones (the other rules), in the order of ``eval_range``; it returns the number
    of illegal rows. numba compiles it on
    its first call, or loads it from the on-disk cache. Its closure holds ``S`` and the
    tables made from it (`_tables`), so the cache's index key is the structure itself. It
    releases the GIL, so that blocks of one batch can run on several threads. The arrays
    come grouped (a call of more than 30 arguments compiles to a ``*args`` call, which numba
    cannot inline): ``mp`` the mapping arrays, ``rt`` the run-time constants, ``out`` the
    outputs, ``sc`` the scratch.

    The row loop is written out here and each rule inlined into it once: numba inlines a
    function (``inline="always"``) by deep-copying its IR block by block, and each block's
    copy copies the function's whole variable scope, so inlining a large function that has
    itself inlined others costs its size squared. Nested that way (rows -> row loop -> counts
    -> leaves) it was about three quarters of this driver's compile time; the rules inline
    at most one more level (``footprint``, ``distinct``, ``ceil_blocks``, ``has_fanout``).
    """

    (NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, CAP_LIMITED, READ_LIMITED, WRITE_LIMITED, FANL,
     OUT) = _tables(S)

    @njit(nogil=True, **_JIT)  # type: ignore[call-overload]
    def rows(lo, hi, full, mp, rt, out, sc):
        L, D, T = S[0], S[1], S[2]
        temporal, spatial, order, keep = mp
        bounds, fan_xy, capacity, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, frac = rt
        res, valid, codes, cnt = out
        tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl = sc
        nbad = 0
        for i in range(lo, hi):
            ci = i if full else 0
            why, where = check(i, D, temporal, spatial, order, keep, NTERM, TDIM, TCOEF, bounds, HOLDS, fan_xy,
                               capacity, CAP_LIMITED, tile, spans)
            codes[i, 0] = why
            codes[i, 1] = where
            if why != 0:
                nbad += 1
                valid[i] = False
                res[i, _CYCLES] = np.inf
                res[i, _ENERGY_PJ] = np.inf
                res[i, _COMPUTE_PJ] = np.inf
                res[i, _UTIL] = 0.0
                if full:
                    for q in range(6):
                        for lv in range(L):
                            for t in range(T):
                                cnt[i, q, lv, t] = 0.0
                continue
            macs, n_macs, mac_pj = scal[0], scal[1], scal[2]
            mpu = row_tables(i, D, temporal, spatial, order, FANL, tile, g, lp, kcs, lvl)
            for t in range(T):
                for c in range(1, L):
                    if HOLDS[c, t] and keep[i, c, t]:
                        if CLOSED[t]:
                            deliv[c, t] = closed_deliveries(NTERM, TDIM, TCOEF, REL, t, c, tile, lp, kcs, spans)
                        else:
                            deliv[c, t] = deliveries(COEF, NTERM, TDIM, TCOEF, t, c, tile, lp, kcs[c], spans, shift)
                child = L
                for p in range(L - 1, -1, -1):
                    if not (HOLDS[p, t] and keep[i, p, t]):
                        if full:
                            for q in range(6):
                                cnt[ci, q, p, t] = 0.0
                        else:
                            cnt[ci, _ENERGY, p, t] = 0.0
                        continue
                    r, f, u, spread, e = keeper_counts(i, D, t, p, child, mpu, temporal, NTERM, TDIM, TCOEF, tile, g,
                                                       lvl, deliv, tensor_size, BLOCK, read_pj, write_pj, FANL, OUT,
                                                       ext, spans, buf)
                    ip = lvl[1, p]
                    if full:  # (without counts only the energy is read back: its total and padding)
                        if t == OUT:
                            cnt[ci, _SRED, p, t] = float(spread * ip)
                            cnt[ci, _MCAST, p, t] = 0.0
                        else:
                            cnt[ci, _MCAST, p, t] = float(spread * ip)
                            cnt[ci, _SRED, p, t] = 0.0
                        cnt[ci, _READS, p, t] = float(r * ip)
                        cnt[ci, _FILLS, p, t] = float(f * ip)
                        cnt[ci, _UPDATES, p, t] = float(u * ip)
                    cnt[ci, _ENERGY, p, t] = e * ip
                    child = p
            total = 0.0
            for lv in range(L):
                for t in range(T):
                    total += cnt[ci, _ENERGY, lv, t]
            cf = latency_cycles(lvl, mpu, read_bw, write_bw, READ_LIMITED, WRITE_LIMITED)
            energy = total + macs * mac_pj
            for t in range(T):
                fr = frac[t]
                if fr < 1.0:
                    before, after = 0.0, 0.0
                    for lv in range(L):
                        e0 = cnt[ci, _ENERGY, lv, t]
                        before += e0
                        e1 = e0 * fr
                        after += e1
                        cnt[ci, _ENERGY, lv, t] = e1
                        if full:
                            cnt[ci, _READS, lv, t] *= fr
                            cnt[ci, _FILLS, lv, t] *= fr
                            cnt[ci, _UPDATES, lv, t] *= fr
                    energy += after - before
            valid[i] = True
            res[i, _CYCLES] = cf
            res[i, _ENERGY_PJ] = energy
            res[i, _COMPUTE_PJ] = macs * mac_pj
            res[i, _UTIL] = macs / (n_macs * cf)
        return nbad

    return rows


# The row drivers by the identity of their structure tuple (the one a `KernelConsts` carries):
# the caches of `_loopnest_gen.driver` and `_driver` key by the tuple's value, and hashing it
# (a few hundred small ints) cost about 10 us a call, 1 ns a row of a 10,000-row batch.
_BY_ID: dict[int, tuple[tuple, object]] = {}


def rows_driver(S: tuple):  # noqa: ANN201 (a numba dispatcher)
    """The row driver of structure ``S``: the generated one (`_loopnest_gen`: the row written
    out per structure) where it supports the structure, else `_driver`."""
    hit = _BY_ID.get(id(S))
    if hit is not None and hit[0] is S:
        return hit[1]
    from accelmap.costmodels import _loopnest_gen

    rows = _loopnest_gen.driver(S) if _loopnest_gen.supports(S) else _driver(S)
    if len(_BY_ID) >= 64:
        _BY_ID.clear()
    _BY_ID[id(S)] = (S, rows)
    return rows


def evaluate_rows(consts, temporal: IntArray, spatial: IntArray, order: IntArray, keep: BoolArray,  # noqa: ANN001
                  frac: FloatArray, res: FloatArray, valid: BoolArray, codes: IntArray, cnt: FloatArray,
                  full: int, scratch: tuple, threads: int) -> None:
    """Fill ``res``, ``valid``, ``codes`` (and ``cnt`` when ``full``) for every row, in
    ``len(scratch[0])`` blocks of rows (``scratch``: per-block arrays of
    `_loopnest_rules.scratch`) spread over ``threads`` threads (1: the calling thread). Without
    ``full``, ``cnt`` holds one (1, 6, L, T) scratch row per block. ``full``: 0 no counts, 1
    the counts, 2 the counts where ``cnt``'s entries that are zero in every row of the
    structure hold 0.0 already (the generated rows leave them; this module's `_driver` writes
    them all the same). Always an int, so that each driver compiles once."""
    rows = rows_driver(consts.structure)
    full = int(full)
    c = consts
    n = temporal.shape[0]
    mp = (temporal, spatial, order, keep)
    rt = (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw, c.write_bw, c.tensor_size, c.scal, frac)
    n_blocks = scratch[0].shape[0]
    if n_blocks == 1 or threads <= 1:
        if n:
            rows(0, n, full, mp, rt, (res, valid, codes, cnt if full else cnt[0]), tuple(x[0] for x in scratch))
        return
    step = (n + n_blocks - 1) // n_blocks
    jobs = [thread_pool(threads).submit(rows, lo, min(n, lo + step), full, mp, rt,
                                  (res, valid, codes, cnt if full else cnt[b]), tuple(x[b] for x in scratch))
            for b, lo in enumerate(range(0, n, step))]
    for job in jobs:
        job.result()


# --- a structure's first compile, in a process of its own ---------------------------------
# Compiling a structure's rows takes 10-30 s on a quiet core the first time a machine sees it
# (numba's typing and SSA passes, which hold the GIL: a thread would stall the search beside
# it), and 50 s on a loaded 2-core machine, where the default search itself takes about 13 s.
# So the model asks `rows_ready` once a (problem, arch) has seen enough rows: rows already
# compiled in this process or found in numba's on-disk cache serve at once; otherwise a
# separate Python process compiles them into that cache (the same code path on a one-row
# batch: the same argument types, so the same cache entry) while the generic driver goes on
# serving here, and the rows serve once that process has ended (loaded from the cache in
# 0.03-0.5 s; if it failed, they compile here on their first call, as without it).

_COMPILE_SOURCE = """
import pickle, sys
import numpy as np
from accelmap.costmodels import _loopnest_kernel as lk
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.mapping import MappingBatch
lk._SPECIALISE_AFTER_ROWS = 0
lk._SPECIALISE_IN_BACKGROUND = False
with open(sys.argv[1], "rb") as f:
    problem, arch = pickle.load(f)
L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
one = MappingBatch(temporal=np.ones((1, L, D), np.int64), spatial=np.ones((1, L, D, 2), np.int64),
                   order=np.tile(np.arange(D, dtype=np.int64), (1, L, 1)), keep=np.ones((1, L, T), bool))
model = LoopNestModel(engine="cpu")
model.evaluate(problem, arch, one)
model.evaluate_objective(problem, arch, one)
"""

class _Compiling(NamedTuple):
    """A structure's compile process and the file holding its (problem, arch)."""

    proc: subprocess.Popen
    path: str


# per structure: True (the rows serve), or its compile under way
_ROWS_STATE: dict[tuple, bool | _Compiling] = {}
_ROWS_LOCK = threading.Lock()


def _rows_compiled(S: tuple) -> bool:
    """Whether the rows of ``S`` run without a compile here: compiled in this process, or an
    entry of theirs in numba's on-disk cache (its index for the module the generator wrote;
    any entry: the file is the structure's, and every call here passes the same types)."""
    rows = rows_driver(S)
    if getattr(rows, "overloads", None):
        return True
    try:
        return bool(rows._cache._cache_file._load_index())
    except Exception:  # noqa: BLE001 (no cache, or numba's internals not as expected: not known to be there)
        return False


def _finish(S: tuple, path: str) -> None:
    """End structure ``S``'s compile (its process ended, failed, or never started): remove its
    input file and let its rows serve (compiled by that process, or else here on their first
    call). The caller holds `_ROWS_LOCK`."""
    Path(path).unlink(missing_ok=True)
    _ROWS_STATE[S] = True


def rows_ready(problem, arch, S: tuple) -> bool:  # noqa: ANN001
    """Whether the rows of structure ``S`` (of ``problem`` on ``arch``) should serve now:
    True where they run without a compile (`_rows_compiled`) or once the process compiling
    them has ended; else False, and that process is started (one at a time in a process; the
    generic driver serves meanwhile)."""
    state = _ROWS_STATE.get(S)
    if state is True:
        return True
    with _ROWS_LOCK:
        state = _ROWS_STATE.get(S)
        if state is True:
            return True
        if state is None:
            if _rows_compiled(S):
                _ROWS_STATE[S] = True
                return True
            for other, v in list(_ROWS_STATE.items()):  # (another structure's process that has ended)
                if isinstance(v, _Compiling) and v.proc.poll() is not None:
                    _finish(other, v.path)
            if any(isinstance(v, _Compiling) for v in _ROWS_STATE.values()):
                return False  # (another structure compiling: this one waits its turn)
            fd, path = tempfile.mkstemp(prefix="accelmap_rows_", suffix=".pickle")
            try:
                with os.fdopen(fd, "wb") as f:
                    pickle.dump((problem, arch), f)
                env = dict(os.environ)
                src = str(Path(__file__).resolve().parents[2])  # (the folder holding this accelmap package)
                env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
                proc = subprocess.Popen([sys.executable, "-c", _COMPILE_SOURCE, path], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
            except Exception:  # noqa: BLE001 (no process: compile here, as without one)
                _finish(S, path)
                return True
            _ROWS_STATE[S] = _Compiling(proc, path)
            return False
        if not isinstance(state, _Compiling):
            return True
        proc, path = state
        if proc.poll() is None:
            return False
        _finish(S, path)  # (ended, or failed: then the first call compiles here)
        return True


def wait_rows() -> None:
    """Wait for every structure's compile under way (benchmarks and tests: the steady state)."""
    with _ROWS_LOCK:
        running = [(S, v) for S, v in _ROWS_STATE.items() if isinstance(v, _Compiling)]
    for S, (proc, path) in running:
        proc.wait()
        with _ROWS_LOCK:
            _finish(S, path)
