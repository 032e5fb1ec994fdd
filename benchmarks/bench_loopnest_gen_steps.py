"""The loopnest generated rows against forms of them without one step each, one core, one process.

Run by hand from the repo root::

    python benchmarks/bench_loopnest_gen_steps.py [--sizes 10000 100000] [--repeats 15] [--out FILE]

This tree's generator (`accelmap.costmodels._loopnest_gen.source`) writes the rows of the case
of ``bench_costmodel.py --backends`` (res2a_branch2b on eyeriss-like); each variant is that
source with one textual change, loaded as a module of its own and compiled in this process:

* ``signed_indices``: every ``U(...)`` cast of a run-time index left out (numba then wraps a
  negative index around, per access);
* ``python_errors``: numba's default (Python) error model instead of ``error_model="numpy"``
  (a test of the divisor before every division);
* ``nested_indexing``: the mapping arrays indexed by all their dimensions instead of through
  their flat views at constant offsets (``tflat[U(ti + k)]`` -> ``temporal[iu, lv, d]``);
* ``fission_<B>``: the row loop split over blocks of ``B`` rows (``--blocks``): a first pass
  of the legality checks writes each row's reason codes (an illegal row's outputs, as before)
  and, for a legal row, its index and its 5 x 7 tiles to a block scratch; a second pass over
  the block's legal rows does the rest of the row, each mapping value loaded from the arrays
  where it is first read and the tiles from the scratch (the loop fission of issue 14).

Every variant's outputs (cycles, energy, utilisation, validity, reasons, the six counts) are
checked equal to the current rows' first; then all are timed in turn within every repeat
(the order reversed every other repeat), ``full=2`` (the counts written, zero entries kept)
and ``full=0`` (objective only), on ``MapSpace.sample_valid`` rows, on the calling thread.
Time is the thread's CPU time (`time.thread_time_ns`) in ns a row: medians, bests and the
median over repeats of each variant's time over the current rows' in the same repeat
(``paired``). Results: ``--out`` (JSON), with the load average.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASE = ("resnet50/res2a_branch2b", "eyeriss-like")


def signed_indices(src: str, L: int, D: int, T: int) -> str:  # noqa: ARG001
    return re.sub(r"\bU\(([^()]*)\)", r"\1", src)


def python_errors(src: str, L: int, D: int, T: int) -> str:  # noqa: ARG001
    out = src.replace(', error_model="numpy")', ")")
    assert out != src
    return out


def nested_indexing(src: str, L: int, D: int, T: int) -> str:  # noqa: ARG001
    def pos(k: str, per: int) -> tuple[int, int]:
        return divmod(int(k), per)

    s = re.sub(r"tflat\[U\(ti \+ (\d+) \+ (\w+)\)\]", lambda m: f"temporal[iu, {int(m[1]) // D}, U({m[2]})]", src)
    s = re.sub(r"tflat\[U\(ti \+ (\d+)\)\]", lambda m: "temporal[iu, {}, {}]".format(*pos(m[1], D)), s)
    s = re.sub(r"oflat\[U\(ti \+ (\d+)\)\]", lambda m: "order[iu, {}, {}]".format(*pos(m[1], D)), s)
    s = re.sub(r"kflat\[U\(ki \+ (\d+)\)\]", lambda m: "keep[iu, {}, {}]".format(*pos(m[1], T)), s)
    s = re.sub(r"sflat\[U\(si \+ (\d+)\)\]",
               lambda m: "spatial[iu, {}, {}, {}]".format(*pos(str(int(m[1]) // 2), D), int(m[1]) % 2), s)
    assert not re.search(r"[tosk]flat\[", s.split("def rows")[1].split("for i in")[1])
    return s


def fission(block: int):  # noqa: ANN201 (a variant)
    def make(src: str, L: int, D: int, T: int) -> str:
        lines = src.split("\n")
        head = lines.index("    for i in range(lo, hi):")
        # the legality ends with the illegal row's outputs and ``continue``; the rest of the row
        # starts after that block (the first statement at the row's indentation after it)
        why = next(k for k, ln in enumerate(lines) if ln == "        if why != 0:")
        rest = next(k for k in range(why + 1, len(lines)) if lines[k].startswith("        ")
                    and not lines[k].startswith("         "))
        end = next(k for k, ln in enumerate(lines) if ln == "    return nbad")
        row_prefetch = [k for k in range(head + 1, why) if "prefetch_write" in lines[k] or lines[k] == "        if full:"]
        first = [lines[k] for k in range(head + 1, why + 1)
                 if k not in row_prefetch and not lines[k].startswith("        ci = ")]
        out = lines[:head] + [f"    for b0 in range(lo, hi, {block}):", f"        b1 = min(b0 + {block}, hi)",
                              "        nl = 0", "        for i in range(b0, b1):"]
        out += ["    " + ln for ln in first] + ["    " + ln for ln in lines[why + 1:rest]]
        out += ["            blk[nl, 0] = i"]
        out += [f"            blk[nl, {1 + lv * D + d}] = t{lv}_{d}" for lv in range(L) for d in range(D)]
        out += ["            nl += 1", "        for jr in range(nl):", "            i = blk[jr, 0]",
                "            iu = U(i)", f"            ti, si, ki = i * {L * D}, i * {2 * L * D}, i * {L * T}",
                "            ci = iu if full else U(0)"]
        out += ["    " + lines[k] for k in row_prefetch]
        loads = {}
        for lv in range(L):
            for d in range(D):
                for name, expr in ((f"a{lv}_{d}", f"tflat[U(ti + {lv * D + d})]"),
                                   (f"x{lv}_{d}", f"sflat[U(si + {(lv * D + d) * 2})]"),
                                   (f"y{lv}_{d}", f"sflat[U(si + {(lv * D + d) * 2 + 1})]"),
                                   (f"t{lv}_{d}", f"blk[jr, {1 + lv * D + d}]"),
                                   (f"o{lv}_{d}", f"oflat[U(ti + {lv * D + d})]")):
                    loads[name] = expr
            for t in range(T):
                loads[f"k{lv}_{t}"] = f"kflat[U(ki + {lv * T + t})]"
        ident = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)\b")
        body: list[str] = []
        seen: set[str] = set()
        stmt = 0
        for ln in ["    " + x for x in lines[rest:end]]:
            top = ln.startswith(" " * 12) and not ln[12].isspace()
            if top and not ln[12:].startswith(("else:", "elif ")):
                stmt = len(body)
            new = [n for n in dict.fromkeys(ident.findall(ln)) if n in loads and n not in seen]
            seen.update(new)
            body[stmt:stmt] = [f"            {n} = {loads[n]}" for n in new]
            body.append(ln)
        out += body + lines[end:]
        return "\n".join(out).replace("def rows(lo, hi, full, mp, rt, out, sc):",
                                      "def rows(lo, hi, full, mp, rt, out, sc, blk):")

    return make


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--blocks", type=int, nargs="*", default=[64], help="the fission variants' block sizes")
    ap.add_argument("--only", nargs="*", default=None, help="these variants only (and the current rows)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numba

    numba.set_num_threads(1)
    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _loopnest_gen as gen
    from accelmap.costmodels import _loopnest_kernel as lk
    from accelmap.costmodels import _loopnest_rules as lr
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    problem, arch = load_problem(CASE[0]), load_arch(CASE[1])
    c = lk.kernel_consts(problem, arch)
    N = max(args.sizes)
    pool = MapSpace(problem, arch).sample_valid(N, np.random.default_rng(0))
    mp = tuple(np.ascontiguousarray(x) for x in (pool.temporal, pool.spatial, pool.order, pool.keep))
    L, T = c.holds.shape
    D, C = c.bounds.shape[0], c.coef.shape[1]
    frac = problem.existing_fraction() if problem.has_padding else np.ones(T)
    rt = (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw, c.write_bw, c.tensor_size, c.scal, frac)
    src = gen.source(c.structure)
    makers = {"signed_indices": signed_indices, "python_errors": python_errors, "nested_indexing": nested_indexing}
    makers.update({f"fission_{b}": fission(b) for b in args.blocks})
    if args.only is not None:
        makers = {k: v for k, v in makers.items() if k in args.only}
    sources = {"current": src} | {k: f(src, L, D, T) for k, f in makers.items()}
    rows = {}
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in sources.items():
            path = Path(tmp) / f"steps_{name}.py"
            path.write_text(text)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = mod
            spec.loader.exec_module(mod)
            rows[name] = mod.rows
        sc = tuple(x[0] for x in lr.scratch(1, L, D, T, C, int(c.ints[1])))
        blk = np.empty((max(args.blocks, default=1), L * D + 1), np.int64)
        one = np.empty((1, 6, L, T))

        def call(name: str, n: int, full: int, out: tuple) -> int:
            o = out if full else out[:3] + (one,)
            sub = tuple(x[:n] for x in mp)
            if name.startswith("fission_"):
                return rows[name](0, n, full, sub, rt, o, sc, blk)
            return rows[name](0, n, full, sub, rt, o, sc)

        outs = {(k, n): (np.empty((n, 4)), np.empty(n, np.bool_), np.empty((n, 2), np.int64), np.empty((n, 6, L, T)))
                for k in rows for n in args.sizes}
        n0 = min(args.sizes)
        for name in rows:  # compile, then check every variant against the current rows
            call(name, n0, 1, outs[(name, n0)])
            for x, y in zip(outs[(name, n0)], outs[("current", n0)], strict=True):
                np.testing.assert_array_equal(x, y, err_msg=name)
        first_s = time.process_time() - t0
        result: dict = {"case": f"{CASE[0]} / {CASE[1]}", "repeats": args.repeats, "compile_and_check_cpu_s": first_s,
                        "load_average_start": list(os.getloadavg()), "sizes": {}}
        for n in args.sizes:
            for full in (2, 0):
                for name in rows:
                    call(name, n, full if full != 2 else 1, outs[(name, n)])
                th: dict[str, list[float]] = {k: [] for k in rows}
                keys = list(rows)
                for r in range(args.repeats):
                    for name in keys if r % 2 == 0 else keys[::-1]:
                        c0 = time.thread_time_ns()
                        call(name, n, full, outs[(name, n)])
                        th[name].append((time.thread_time_ns() - c0) / n)
                base = np.array(th["current"])
                entry = {}
                for name, v in th.items():
                    paired = np.array(v) / base
                    entry[name] = {"thread_ns_median": float(np.median(v)), "thread_ns_best": float(min(v)),
                                   "paired_median": float(np.median(paired)),
                                   "paired_q25_q75": [float(np.percentile(paired, 25)),
                                                      float(np.percentile(paired, 75))]}
                    print(f"{n:>7} full={full} {name:18s} median {entry[name]['thread_ns_median']:6.1f} best "
                          f"{entry[name]['thread_ns_best']:6.1f} ns a row, paired {entry[name]['paired_median']:.3f}")
                result["sizes"][f"{n}_full{full}"] = entry
        result["load_average_end"] = list(os.getloadavg())
    print(f"load {result['load_average_start']} -> {result['load_average_end']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
