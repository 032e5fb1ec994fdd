"""The floor of the loopnest CPU driver, one core: memory traffic alone, and the operations a row does.

Run by hand from the repo root::

    python benchmarks/bench_loopnest_floor.py [--rows 20000] [--repeats 31] [--count-rows 300]

Two measurements on the pool of ``bench_loopnest_variants.py`` (legal MapSpace samples of
res2a_branch2b on eyeriss-like):

1. **Traffic.** ``io_*`` kernels read every input of a row (temporal, spatial, order, keep) and
   write its outputs (cycles, energy, compute energy, utilisation, validity, reason; with
   ``counts`` also the (6, L, T) counts), doing nothing else but a sum so that no read is
   dropped. They are timed interleaved with the driver (`_loopnest_cpu`), on the calling
   thread, by thread CPU time, at the full pool (``--rows``, 1.1 kB of int64 input per row:
   beyond L2) and on a block of 1,000 rows evaluated again and again (in L2). ``io_narrow``
   reads the same values stored narrow (temporal and spatial int16, order int8): what the
   traffic would cost if a `MappingBatch` carried them so.
2. **Operations.** The driver's source is run as plain Python on ``--count-rows`` rows, with
   every value that comes from a run-time array wrapped in a counting integer (or float), so
   that an operation is counted only when one operand is run-time data: arithmetic on the
   compile-time structure (coefficient tables, loop bounds of L, D, T, C) folds in the
   compiled driver and is not counted. Counted per row: arithmetic (``+ - * // % & | << >>``,
   ``max``, ``abs``, ``ceil``, int-to-float), comparisons and tests (each a branch or a
   select in the compiled code), array loads and array stores; attributed to the step of the
   row (legality, loop-nest setup, per tensor, totals) and, within the per-tensor work, to
   each tensor. Results are the same as the compiled driver's (checked).

Results: ``benchmarks/results/bench_loopnest_floor.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_loopnest_floor.json"
SRC = ROOT / "src" / "accelmap" / "costmodels" / "_loopnest_cpu.py"


# ---------------------------------------------------------------- 1. traffic

def _io_kernels():  # noqa: ANN202 (numba dispatchers)
    from numba import njit

    @njit(nogil=True, cache=False)
    def io_rows(lo, hi, full, temporal, spatial, order, keep, res, valid, codes, cnt):
        n_l, n_d, n_t = temporal.shape[1], temporal.shape[2], keep.shape[2]
        for i in range(lo, hi):
            s = 0
            for lv in range(n_l):
                for d in range(n_d):
                    s += temporal[i, lv, d] + order[i, lv, d] + spatial[i, lv, d, 0] + spatial[i, lv, d, 1]
                for t in range(n_t):
                    s += keep[i, lv, t]
            f = float(s)
            res[i, 0] = f
            res[i, 1] = f + 1.0
            res[i, 2] = f + 2.0
            res[i, 3] = f + 3.0
            valid[i] = s > 0
            codes[i, 0] = s & 7
            codes[i, 1] = -1
            if full:
                for q in range(6):
                    for lv in range(n_l):
                        for t in range(n_t):
                            cnt[i, q, lv, t] = f
    return io_rows


# ---------------------------------------------------------------- 2. operations

class _Tally:
    """Where the counted operations go: (step, tensor, kind) -> count."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.rows_frame = None

    def add(self, kind: str) -> None:
        f = sys._getframe(2)
        while f is not None and f.f_code.co_name != "rows":
            f = f.f_back
        step, tensor = "other", -1
        if f is not None:
            step = _STEP_OF_LINE.get(f.f_lineno, "other")
            if step == "per tensor":
                tensor = int(f.f_locals.get("t", -1))
        self.counts[step, tensor, kind] += 1


TALLY = _Tally()
_STEP_OF_LINE: dict[int, str] = {}


def _arith(name: str):  # noqa: ANN202
    def op(self, other):  # noqa: ANN001, ANN202
        TALLY.add("arith")
        r = getattr(int(self) if isinstance(self, CInt) else float(self), name)(_raw(other))
        return _wrap(r)
    return op


def _cmp(name: str):  # noqa: ANN202
    def op(self, other):  # noqa: ANN001, ANN202
        TALLY.add("compare")
        return getattr(_raw_self(self), name)(_raw(other))
    return op


def _raw(x):  # noqa: ANN001, ANN202
    if isinstance(x, CInt):
        return int(x)
    if isinstance(x, CFloat):
        return float(x)
    return x


def _raw_self(x):  # noqa: ANN001, ANN202
    return int(x) if isinstance(x, CInt) else float(x)


def _wrap(r):  # noqa: ANN001, ANN202
    if r is NotImplemented:
        return r
    if isinstance(r, bool):
        return r
    if isinstance(r, int):
        return CInt(r)
    if isinstance(r, float):
        return CFloat(r)
    return r


class CInt(int):
    """An int read from a run-time array, or computed from one: its operations are counted."""

    def __bool__(self) -> bool:
        TALLY.add("compare")
        return int(self) != 0

    def __index__(self) -> int:
        return int(self)

    def __neg__(self):  # noqa: ANN204
        TALLY.add("arith")
        return CInt(-int(self))

    def __hash__(self) -> int:
        return int.__hash__(self)


class CFloat(float):
    """A float from run-time data: its operations are counted."""

    def __bool__(self) -> bool:
        TALLY.add("compare")
        return float(self) != 0.0

    def __ceil__(self):  # noqa: ANN204
        TALLY.add("arith")
        return CInt(math.ceil(float(self)))

    def __hash__(self) -> int:
        return float.__hash__(self)


for _n in ("add", "sub", "mul", "floordiv", "mod", "and", "or", "xor", "lshift", "rshift", "truediv"):
    for _m in (f"__{_n}__", f"__r{_n}__"):
        setattr(CInt, _m, _arith(_m))
        setattr(CFloat, _m, _arith(_m))
for _n in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(CInt, f"__{_n}__", _cmp(f"__{_n}__"))
    setattr(CFloat, f"__{_n}__", _cmp(f"__{_n}__"))


class CArray:
    """A run-time array: loads and stores counted, elements handed out wrapped."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.shape = a.shape

    def __getitem__(self, k):  # noqa: ANN001, ANN204
        TALLY.add("load")
        v = self.a[_key(k)]
        if isinstance(v, np.ndarray):
            return CArray(v)
        return CFloat(float(v)) if self.a.dtype.kind == "f" else CInt(int(v))

    def __setitem__(self, k, v) -> None:  # noqa: ANN001
        TALLY.add("store")
        self.a[_key(k)] = _raw(v)


def _key(k):  # noqa: ANN001, ANN202
    return tuple(int(x) for x in k) if isinstance(k, tuple) else int(k)


def _f(x):  # noqa: ANN001, ANN202
    if isinstance(x, CInt):
        TALLY.add("arith")
        return CFloat(float(int(x)))
    return float(x)


def _max(a, b):  # noqa: ANN001, ANN202
    if isinstance(a, (CInt, CFloat)) or isinstance(b, (CInt, CFloat)):
        TALLY.add("arith")
        return _wrap(max(_raw(a), _raw(b)))
    return max(a, b)


def _abs(a):  # noqa: ANN001, ANN202
    if isinstance(a, (CInt, CFloat)):
        TALLY.add("arith")
        return _wrap(abs(_raw(a)))
    return abs(a)


def _plain_module(where: Path, src_path: Path = SRC):  # noqa: ANN202
    """The driver's source with ``njit`` a no-op and the built-ins it calls counted."""
    src = src_path.read_text()
    src = src.replace("from numba import njit",
                      "def njit(*a, **k):\n    return (lambda f: f)\n")
    src = src.replace("float(", "_f(").replace("max(", "_max(").replace("abs(", "_abs(")
    path = where / "_lnfloor_plain.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("_lnfloor_plain", path)
    mod = importlib.util.module_from_spec(spec)
    mod._f, mod._max, mod._abs = _f, _max, _abs
    spec.loader.exec_module(mod)
    lines = src.splitlines()
    start = next(k for k, s in enumerate(lines) if "def rows(" in s)
    step = "legality"
    for k in range(start, len(lines)):
        s = lines[k]
        if "# --- the counts of a legal row" in s:
            step = "setup"
        elif s.startswith("            for t in range(T):") and step == "setup":
            step = "per tensor"
        elif s.startswith("            total = 0.0"):
            step = "totals and padding"
        elif s.startswith("    return rows"):
            break
        _STEP_OF_LINE[k + 1] = step
    return mod


def count_operations(consts, mp, frac, n_rows: int, L: int, D: int, T: int, C: int, grid: int, ref: tuple,  # noqa: ANN001
                     src_path: Path = SRC) -> dict:
    from accelmap.costmodels import _loopnest_rules as lr

    _STEP_OF_LINE.clear()
    with tempfile.TemporaryDirectory() as tmp:
        mod = _plain_module(Path(tmp), src_path)
        rows = mod._driver(consts.structure)
        c = consts
        n = n_rows
        res, valid, codes = np.empty((n, 4)), np.empty(n, np.bool_), np.empty((n, 2), np.int64)
        cnt = np.empty((n, 6, L, T))
        sc = tuple(CArray(x[0]) for x in lr.scratch(1, L, D, T, C, grid))
        rt = tuple(CArray(np.asarray(x)) for x in (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw,
                                                  c.write_bw, c.tensor_size, c.scal, frac))
        TALLY.counts.clear()
        rows(0, n, True, tuple(CArray(x[:n]) for x in mp), rt,
             (CArray(res), CArray(valid), CArray(codes), CArray(cnt)), sc)
    for a, b in zip((res, valid, codes, cnt), ref, strict=True):
        if not np.array_equal(a, b[:n]):
            raise SystemExit("the counted Python run differs from the compiled driver")
    per_step: dict[str, dict[str, float]] = {}
    per_tensor: dict[int, dict[str, float]] = {}
    for (step, t, kind), v in TALLY.counts.items():
        per_step.setdefault(step, Counter())[kind] += v / n
        if t >= 0:
            per_tensor.setdefault(t, Counter())[kind] += v / n
    total = Counter()
    for v in per_step.values():
        total.update(v)
    return {"rows": n, "per_row": dict(total), "per_row_all": float(sum(total.values())),
            "per_step": {k: dict(v) for k, v in per_step.items()},
            "per_tensor": {str(k): dict(v) for k, v in sorted(per_tensor.items())}}


def loop_stats(batch, consts) -> dict:  # noqa: ANN001
    """Active loops (bound >= 2) per row and per level, and held (level, tensor) pairs."""
    t = np.asarray(batch.temporal)
    holds = np.asarray(consts.holds)
    keep = np.asarray(batch.keep) & holds[None]
    return {"active_loops_per_row": float((t >= 2).sum(axis=(1, 2)).mean()),
            "active_loops_per_level": [float(x) for x in (t >= 2).sum(axis=2).mean(axis=0)],
            "held_level_tensor_pairs_per_row": float(keep.sum(axis=(1, 2)).mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--count-rows", type=int, default=300)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--count-src", type=Path, help="count the operations of this version of _loopnest_cpu.py "
                    "instead (e.g. from `git show REV:...`), and time nothing")
    args = ap.parse_args()

    import numba

    numba.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_loopnest_variants import driver_inputs

    from accelmap.costmodels import _loopnest_cpu as lc
    from accelmap.costmodels import _loopnest_rules as lr

    n = args.rows
    label, problem, arch, batch, consts, frac, (L, T, D, C), grid, mp = driver_inputs(n)
    narrow = (mp[0].astype(np.int16), mp[1].astype(np.int16), mp[2].astype(np.int8), mp[3])
    if args.count_src:
        ref = (np.empty((args.count_rows, 4)), np.empty(args.count_rows, np.bool_),
               np.empty((args.count_rows, 2), np.int64), np.empty((args.count_rows, 6, L, T)))
        lc.evaluate_rows(consts, *(x[:args.count_rows] for x in mp), frac, *ref, True,
                         lr.scratch(1, L, D, T, C, grid), 1)
        ops = count_operations(consts, mp, frac, args.count_rows, L, D, T, C, grid, ref, args.count_src)
        print(json.dumps(ops, indent=1))
        args.out.write_text(json.dumps({"case": label, "source": str(args.count_src), "operations": ops}, indent=1)
                            + "\n")
        return
    io_rows = _io_kernels()
    # The same 20 rows each repeated n / 20 times: in runs (branches predictable) and shuffled.
    base = np.arange(n) // (n // 20)
    shuffled = np.random.default_rng(0).permutation(base)
    runs_mp = tuple(np.ascontiguousarray(x[base]) for x in mp)
    shuf_mp = tuple(np.ascontiguousarray(x[shuffled]) for x in mp)
    small = 1_000
    reps_small = max(1, n // small)

    def outputs(m: int, full: bool) -> tuple:
        return (np.empty((m, 4)), np.empty(m, np.bool_), np.empty((m, 2), np.int64),
                np.empty((m, 6, L, T)) if full else np.empty((1, 1, 6, L, T)))

    def run_driver(full: bool, m: int, reps: int, arrs: tuple = mp) -> float:
        res, valid, codes, cnt = outputs(m, full)
        sc = lr.scratch(1, L, D, T, C, grid)
        args_ = tuple(x[:m] for x in arrs)
        t0 = time.thread_time()
        for _ in range(reps):
            lc.evaluate_rows(consts, *args_, frac, res, valid, codes, cnt, full, sc, 1)
        return (time.thread_time() - t0) / (m * reps)

    def run_io(arrs: tuple, full: bool, m: int, reps: int) -> float:
        res, valid, codes, cnt = outputs(m, full)
        c2 = cnt if full else cnt[0]
        a = tuple(x[:m] for x in arrs)
        t0 = time.thread_time()
        for _ in range(reps):
            io_rows(0, m, full, *a, res, valid, codes, c2)
        return (time.thread_time() - t0) / (m * reps)

    entries = {}
    for full in (False, True):
        entries[f"driver, {n} rows", full] = lambda f=full: run_driver(f, n, 1)
        entries[f"driver, {small} rows x {reps_small}", full] = lambda f=full: run_driver(f, small, reps_small)
        entries["driver, 20 rows in runs", full] = lambda f=full: run_driver(f, n, 1, runs_mp)
        entries["driver, 20 rows shuffled", full] = lambda f=full: run_driver(f, n, 1, shuf_mp)
        entries[f"io_int64, {n} rows", full] = lambda f=full: run_io(mp, f, n, 1)
        entries[f"io_int64, {small} rows x {reps_small}", full] = lambda f=full: run_io(mp, f, small, reps_small)
        entries[f"io_narrow, {n} rows", full] = lambda f=full: run_io(narrow, f, n, 1)
    for fn in entries.values():  # compile and warm
        fn()
    times: dict = {k: [] for k in entries}
    for _ in range(args.repeats):
        for k, fn in entries.items():
            times[k].append(fn())
    rows = []
    for (name, full), ts in times.items():
        rows.append({"entry": name, "counts": full, "median_ns_per_row": float(np.median(ts)) * 1e9,
                     "best_ns_per_row": float(min(ts)) * 1e9})
        print(f"{name:28s} counts={full!s:5s} median {rows[-1]['median_ns_per_row']:7.1f}  best "
              f"{rows[-1]['best_ns_per_row']:7.1f} ns/row")
    load_timed = os.getloadavg()
    print("load average", load_timed)

    ref = outputs(args.count_rows, True)
    lc.evaluate_rows(consts, *(x[:args.count_rows] for x in mp), frac, *ref, True,
                     lr.scratch(1, L, D, T, C, grid), 1)
    ops = count_operations(consts, mp, frac, args.count_rows, L, D, T, C, grid, ref)
    stats = loop_stats(batch, consts)
    print("operations per row (run-time operands only):", {k: round(v, 1) for k, v in ops["per_row"].items()},
          "all", round(ops["per_row_all"], 1))
    for step, v in ops["per_step"].items():
        print(f"  {step:20s}", {k: round(x, 1) for k, x in v.items()}, "all", round(sum(v.values()), 1))
    for t, v in ops["per_tensor"].items():
        print(f"  tensor {t}", {k: round(x, 1) for k, x in v.items()}, "all", round(sum(v.values()), 1))
    print(stats)
    bytes_in = sum(x[0].nbytes for x in mp)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "case": label, "rows_per_call": n, "repeats": args.repeats, "timer": "time.thread_time",
        "legal_share": float(ref[1].mean()), "structure": {"L": L, "D": D, "T": T, "C": C},
        "input_bytes_per_row_int64": int(bytes_in), "input_bytes_per_row_narrow": int(sum(x[0].nbytes for x in narrow)),
        "load_average_after_timing": load_timed, "timing": rows, "operations": ops, "loops": stats,
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
                    "cpus": os.cpu_count()}}, indent=1) + "\n")


if __name__ == "__main__":
    main()
