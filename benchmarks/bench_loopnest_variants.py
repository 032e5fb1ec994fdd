"""Stage ablations of the loopnest CPU driver and the variants tried on it, one core.

Run by hand from the repo root::

    python benchmarks/bench_loopnest_variants.py [--rows 20000] [--repeats 31] [--only NAME ...]

Every variant is the `accelmap.costmodels._loopnest_cpu` source of commit ``f7c5b4e`` (the
driver that still held its rules itself; ``--rev`` for another) with one textual patch
(below; a patch that no longer applies is an error naming it), loaded as its own module
and compiled (numba's cache off, so no variant loads another's code). All run on the same
pool of legal MapSpace samples of res2a_branch2b on eyeriss-like (the case of
``bench_costmodel.py --backends``), on the calling thread, each timed in turn within every
repeat (interleaved), ``full`` (counts written) and objective-only. Time is the thread's CPU
time (`time.thread_time`): on a shared, loaded machine it leaves out the time the thread
waits for a core, which wall time does not (it still counts a busy hyperthread sibling).

Variants marked ``equal`` must give the current driver's results exactly (cycles, energy,
validity, reason and all six counts); the script checks it. Ablations (``abl_*``) remove a
step and are timed only. Variants named ``before_*`` put back a form the driver had before a
change that was kept (so that change can be measured again); the others are changes tried
and not kept.

Results: ``benchmarks/results/bench_loopnest_variants.json`` (``--out`` to change): medians
and bests in ns per row.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bench_loopnest_variants.json"
# The patches below were written against the driver that held its rules itself (the
# commit before the rules moved to `_loopnest_kernel`, issue 14); they are applied to that
# source, read with ``git show`` (``--rev`` for another).
BASE_REV = "f7c5b4e"
SRC_PATH = "src/accelmap/costmodels/_loopnest_cpu.py"


def _source(rev: str) -> str:
    import subprocess

    return subprocess.run(["git", "show", f"{rev}:{SRC_PATH}"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout

_LEGAL = "            # --- the counts of a legal row (``tile`` from `_check`) ---\n"
_TENSORS = "            for t in range(T):\n                for c in range(1, L):\n"
_STOP = "            valid[i] = True\n            res[i, _CYCLES] = {}\n            continue\n"

# The forms of this round's changes (kept: ``before_*`` puts the old back) and the tried ones.
_BEFORE_CLOSED_FORWARD_0_OLD = """            for t in range(T):
                for c in range(1, L):
"""
_BEFORE_CLOSED_FORWARD_0_NEW = """            for t in range(T):
                if CLOSED[t]:
                    lp[4, 0] = 0
                    for j in range(kcs[L - 1]):
                        lp[4, j + 1] = j + 1 if REL[t * D + lp[0, j]] else lp[4, j]
                for c in range(1, L):
"""
_BEFORE_CLOSED_FORWARD_1_OLD = """                            j = kcs[c]
                            while j > 0 and not REL[t * D + lp[0, j - 1]]:
                                j -= 1
                            deliv[c, t] = _fp(S, t, tile, c, spans) * lp[3, j]
"""
_BEFORE_CLOSED_FORWARD_1_NEW = """                            deliv[c, t] = _fp(S, t, tile, c, spans) * lp[3, lp[4, kcs[c]]]
"""
_BEFORE_CLOSED = [(_BEFORE_CLOSED_FORWARD_0_OLD, _BEFORE_CLOSED_FORWARD_0_NEW), (_BEFORE_CLOSED_FORWARD_1_OLD, _BEFORE_CLOSED_FORWARD_1_NEW)]
_BEFORE_TILE_MEMORY_0_OLD = """    for d in range(D):
        tile[L, d] = 1
        run = 1  # the running product in a register, not read back from ``tile`` (2-3% per row)
        for lv in range(L - 1, -1, -1):
            a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
            if a < 1 or x < 1 or y < 1:
                ok = False
            run = run * a * x * y
            tile[lv, d] = run
        if run != bounds[d]:
            ok = False
"""
_BEFORE_TILE_MEMORY_0_NEW = """    for d in range(D):
        tile[L, d] = 1
    for lv in range(L - 1, -1, -1):
        for d in range(D):
            a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
            if a < 1 or x < 1 or y < 1:
                ok = False
            tile[lv, d] = tile[lv + 1, d] * a * x * y
    for d in range(D):
        if tile[0, d] != bounds[d]:
            ok = False
"""
_BEFORE_TILE = [(_BEFORE_TILE_MEMORY_0_OLD, _BEFORE_TILE_MEMORY_0_NEW)]
_OUT_EXTENT_0_OLD = """                    if is_out:
                        for d in range(D):
                            w = tile[p, d]
                            for lv in range(p):
                                w *= temporal[i, lv, d]
                            ext[0, d] = w
                        part = _fp(S, t, ext, 0, spans)
"""
_OUT_EXTENT_0_NEW = """                    if is_out:
                        q = -1
                        for lv in range(p):
                            if FANL[lv]:
                                q = lv
                        if q < 0:
                            part = part_top
                        else:
                            for d in range(D):
                                w = tile[q + 1, d]
                                for lv in range(q + 1):
                                    w *= temporal[i, lv, d]
                                ext[0, d] = w
                            part = _fp(S, t, ext, 0, spans)
"""
_OUT_EXTENT_1_OLD = """        for i in range(lo, hi):
"""
_OUT_EXTENT_1_NEW = """        for d in range(D):
            ext[0, d] = bounds[d]
        part_top = _fp(S, OUT, ext, 0, spans)
        for i in range(lo, hi):
"""
_SHIFT_IN_REGISTERS_0_OLD = """    for cc in range(C):
        shift[cc] = 0
    for j in range(kc - 1, -1, -1):
        d, st = lp[0, j], lp[2, j]
        moved, which, amount = 0, -1, 0
        for cc in range(C):
            a = COEF[(t * C + cc) * D + d] * st
            s = a - shift[cc]
            shift[cc] += a
"""
_SHIFT_IN_REGISTERS_0_NEW = """    for cc in range(C):
        shift[cc] = 0
    h0, h1, h2, h3 = 0, 0, 0, 0
    for j in range(kc - 1, -1, -1):
        d, st = lp[0, j], lp[2, j]
        moved, which, amount = 0, -1, 0
        for cc in range(C):
            a = COEF[(t * C + cc) * D + d] * st
            if C <= 4:
                hv = h0 if cc == 0 else (h1 if cc == 1 else (h2 if cc == 2 else h3))
            else:
                hv = shift[cc]
            s = a - hv
            if C <= 4:
                if cc == 0:
                    h0 = hv + a
                elif cc == 1:
                    h1 = hv + a
                elif cc == 2:
                    h2 = hv + a
                else:
                    h3 = hv + a
            else:
                shift[cc] = hv + a
"""

# name -> (what it is, whether its results must equal the driver's, [(old, new), ...])
VARIANTS: dict[str, tuple[str, bool, list[tuple[str, str]]]] = {
    "current": ("the driver as it is", True, []),
    "abl_legal": ("legality only: stops after `_check`", False, [(_LEGAL, _STOP.format("1.0") + _LEGAL)]),
    "abl_setup": ("legality and the loop-nest setup (active loops, fanout products); no per-tensor work", False,
                  [(_TENSORS, _STOP.format("float(macs_per_unit + lvl[1, L - 1])") + _TENSORS)]),
    "abl_checks": ("without the checks after FACTORS (ORDER, KEEP, FANOUT, CAPACITY)", False,
                   [("    for lv in range(L):\n        seen = 0",
                     "    return 0, -1\n    for lv in range(L):\n        seen = 0")]),
    "abl_slide": ("without eq. D's walk for non-closed tensors (closed form for every tensor)", False,
                  [("deliv[c, t] = _deliv_f(S, t, c, tile, lp, kcs[c], spans, shift)",
                    "deliv[c, t] = _fp(S, t, tile, c, spans) * lp[3, kcs[c]]")]),
    "abl_distinct": ("without eq. S (groups = the fanout product)", False,
                     [("groups *= _distinct(S, t, lv, g, tile, buf)", "groups *= lvl[0, lv]")]),
    "abl_padding": ("without the padding scale (the padded input's counts left as they are)", False,
                    [("                if fr < 1.0:", "                if fr < 0.0:")]),
    "horner": ("eq. D in one pass from the innermost loop out (Horner's rule, as `_cuda_search`), no step table",
               True, [(
                   """    for j in range(kc - 1, -1, -1):
        d, st = lp[0, j], lp[2, j]
        moved, which, amount = 0, -1, 0
        for cc in range(C):
            a = COEF[(t * C + cc) * D + d] * st
            s = a - shift[cc]
            shift[cc] += a
            if s != 0:
                moved += 1
                which, amount = cc, s
        if moved == 0:
            lp[5, j] = 0
        elif moved == 1 and abs(amount) < spans[which]:
            lp[5, j] = 2
            lp[7, j] = which
            lp[6, j] = 1 if amount > 0 else -1
            lp[8, j] = abs(amount) * (size // spans[which])
        else:
            lp[5, j] = 1
    total, prefix = size, 1
    inner = kc - 1
    for j in range(kc):
        k = lp[5, j]
        if k == 0:
            new = 0
        elif k == 1:
            new = size
        elif lp[5, inner] == 2 and (lp[7, j] != lp[7, inner] or lp[6, j] != lp[6, inner]):
            new = size
        else:
            new = lp[8, j]
        total += prefix * (lp[1, j] - 1) * new
        prefix *= lp[1, j]
    return total
""", """    acc = 0
    in_slide, in_which, in_sgn = False, -1, 0
    for j in range(kc - 1, -1, -1):
        d, st = lp[0, j], lp[2, j]
        moved, which, amount = 0, -1, 0
        for cc in range(C):
            a = COEF[(t * C + cc) * D + d] * st
            s = a - shift[cc]
            shift[cc] += a
            if s != 0:
                moved += 1
                which, amount = cc, s
        if moved == 0:
            new = 0
        elif moved == 1 and abs(amount) < spans[which]:
            sgn = 1 if amount > 0 else -1
            if j == kc - 1:
                in_slide, in_which, in_sgn = True, which, sgn
                new = abs(amount) * (size // spans[which])
            elif in_slide and (which != in_which or sgn != in_sgn):
                new = size
            else:
                new = abs(amount) * (size // spans[which])
        else:
            new = size
        b = lp[1, j]
        acc = (b - 1) * new + b * acc
    return size + acc
""")]),
    "int32_scratch": ("tiles, spatial factors, loop tables, spans, shifts and offsets in int32 scratch (as "
                      "`_cuda_search` where `fits_32bit` holds; the mapping arrays stay int64, so the arithmetic "
                      "stays 64-bit and only loads and stores narrow; deliveries and per-level words int64)", True, [
        ("    n_blocks = scratch[0].shape[0]\n",
         "    n_blocks = scratch[0].shape[0]\n"
         "    scratch = tuple(x.astype(np.int32) if k in (0, 1, 2, 4, 5, 7, 8) else x for k, x in enumerate(scratch))\n")]),
    "split_products": ("the loop nest's running product of bounds as one chain per level times the product of "
                       "the levels above (a 7-deep multiply chain per level instead of one 35 deep)", True, [
        ("""            k = 0
            prod = 1
            lp[3, 0] = 1
            for lv in range(L):
                kcs[lv] = k
                for j in range(D):
                    d = order[i, lv, j]
                    b = temporal[i, lv, d]
                    prod *= b
""", """            k = 0
            above = 1
            lp[3, 0] = 1
            for lv in range(L):
                kcs[lv] = k
                run = 1
                for j in range(D):
                    d = order[i, lv, j]
                    b = temporal[i, lv, d]
                    run *= b
                    prod = above * run
"""), ("""                    k += b >= 2
            kcs[L] = k
""", """                    k += b >= 2
                above *= run
            kcs[L] = k
""")]),
    "before_closed_forward": (
        "(the driver before this round's first change) closed tensors: a forward pass per tensor over every "
        "active loop storing the index after the last relevant one (``lp[4]``, each entry read back from the "
        "one before), then read at each kept level",
        True, _BEFORE_CLOSED),
    "before_tile_memory": (
        "(before) legality's tile products level by level, each read back from the tile array",
        True, _BEFORE_TILE),
    "out_extent": (
        "the output's extent below a kept level from the fanout structure: the bounds above the first level "
        "with a fanout (their footprint formed once per call), below it the tile under the last fanout level "
        "times the temporal factors down to it, instead of the product over every level above",
        True, [(_OUT_EXTENT_0_OLD, _OUT_EXTENT_0_NEW), (_OUT_EXTENT_1_OLD, _OUT_EXTENT_1_NEW)]),
    "before_all": ("the driver before this round (both changes undone)", True, _BEFORE_CLOSED + _BEFORE_TILE),
    "shift_in_registers": (
        "eq. D's slide walk (non-closed tensors) with the per-coordinate shifts in four scalars (structures "
        "of at most four coordinates) instead of read back from the shift array at every loop",
        True, [(_SHIFT_IN_REGISTERS_0_OLD, _SHIFT_IN_REGISTERS_0_NEW)]),
}


def _load(name: str, patches: list[tuple[str, str]], where: Path, base: str):  # noqa: ANN202 (a module)
    src = base.replace('"cache": True', '"cache": False')
    for old, new in patches:
        if src.count(old) != 1:
            raise SystemExit(f"variant {name}: a patch matches {src.count(old)} times (expected once); "
                             f"the driver changed, update the patch: {old[:80]!r}")
        src = src.replace(old, new)
    path = where / f"_lnvar_{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"_lnvar_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def driver_inputs(n: int):  # noqa: ANN201 (a tuple of the pool and the driver's arguments)
    """The pool of ``n`` legal rows (`bench_costmodel._pools`, res2a_branch2b on eyeriss-like)
    and what the specialised driver takes for it: its `KernelConsts`, the tensors' existing
    fractions, (L, T, D, C), the grid and the four mapping arrays in the driver's dtypes."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _pools

    from accelmap.costmodels.loopnest import LoopNestModel

    label, problem, arch, batch = _pools("loopnest", n)[0]
    consts = LoopNestModel(engine="cpu")._kernel_consts(problem, arch)
    frac = np.ascontiguousarray(problem.existing_fraction() if problem.has_padding else np.ones(problem.n_tensors))
    dims = (arch.n_levels, problem.n_tensors, problem.n_dims, consts.coef.shape[1])
    mp = (np.ascontiguousarray(batch.temporal, dtype=np.int64), np.ascontiguousarray(batch.spatial, dtype=np.int64),
          np.ascontiguousarray(batch.order, dtype=np.int64), np.ascontiguousarray(batch.keep, dtype=np.bool_))
    return label, problem, arch, batch, consts, frac, dims, int(consts.ints[1]), mp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--only", nargs="*", choices=sorted(VARIANTS), help="these variants (and `current`)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--rev", default=BASE_REV, help="the commit whose driver the patches apply to")
    args = ap.parse_args()
    base = _source(args.rev)

    import numba

    numba.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    from accelmap.costmodels import _loopnest_rules as lr

    names = ["current"] + [v for v in (args.only or VARIANTS) if v != "current"]
    n = args.rows
    label, problem, arch, batch, consts, frac, (L, T, D, C), grid, mp = driver_inputs(n)

    def run(mod, full: bool):  # noqa: ANN001, ANN202
        res, valid, codes = np.empty((n, 4)), np.empty(n, np.bool_), np.empty((n, 2), np.int64)
        cnt = np.empty((n, 6, L, T)) if full else np.empty((1, 1, 6, L, T))
        sc = lr.scratch(1, L, D, T, C, grid)
        t0 = time.thread_time()
        own = replace(consts, structure=mod.structure(consts))  # (that driver's own structure tuple)
        mod.evaluate_rows(own, *mp, frac, res, valid, codes, cnt, full, sc, 1)
        return time.thread_time() - t0, (res, valid, codes, cnt if full else None)

    with tempfile.TemporaryDirectory() as tmp:
        mods, compile_s, outs = {}, {}, {}
        for name in names:
            t0 = time.process_time()
            mods[name] = _load(name, VARIANTS[name][2], Path(tmp), base)
            for full in (False, True):
                outs[name, full] = run(mods[name], full)[1]
            compile_s[name] = time.process_time() - t0
        for name in names:
            if not VARIANTS[name][1]:
                continue
            for full in (False, True):
                got, ref = outs[name, full], outs["current", full]
                for a, b in zip(got, ref, strict=True):
                    if a is not None and not np.array_equal(a, b):
                        raise SystemExit(f"variant {name} (full={full}) differs from the current driver")
        times: dict[tuple[str, bool], list[float]] = {(v, f): [] for v in names for f in (False, True)}
        for _ in range(args.repeats):
            for (v, f) in times:
                times[v, f].append(run(mods[v], f)[0])
    rows = []
    for (v, f), ts in times.items():
        rows.append({"variant": v, "what": VARIANTS[v][0], "equal_checked": VARIANTS[v][1], "counts": f,
                     "median_ns_per_row": float(np.median(ts)) / n * 1e9, "best_ns_per_row": min(ts) / n * 1e9,
                     "compile_and_first_calls_cpu_s": compile_s[v]})
        print(f"{v:18s} counts={f!s:5s} median {rows[-1]['median_ns_per_row']:6.0f}  best "
              f"{rows[-1]['best_ns_per_row']:6.0f} ns/row")
    load = os.getloadavg()
    print("load average", load)
    args.out.write_text(json.dumps({"case": label, "rows_per_call": n, "repeats": args.repeats,
                                    "legal_share": float(outs["current", True][1].mean()),
                                    "timer": "time.thread_time", "load_average_after": load,
                                    "machine": {"python": platform.python_version(), "numpy": np.__version__,
                                                "numba": numba.__version__, "cpus": os.cpu_count()},
                                    "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
