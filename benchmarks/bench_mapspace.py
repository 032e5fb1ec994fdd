"""MapSpace throughput per core: samples/s, decodes/s, encodes/s, checks/s, neighbours/s and
legal mappings/s, for a ResNet-50 3x3 conv (res2a_branch2b) on the eyeriss-like preset, in
the unconstrained space and in the space of Timeloop's Eyeriss constraint files.

Run by hand from the repo root: ``python benchmarks/bench_mapspace.py [--n 65536]``.
Writes ``benchmarks/results/bench_mapspace.json``. Each figure is per core: items per
second of process CPU time, best of a few repeats.

``--backends numpy cpu`` compares the engines of the MapSpace operations instead (the numpy
batched path and the numba-compiled one, `accelmap.mapper._space_kernel`): for each batch
size of ``--sizes`` and each operation, both engines are timed in turn within every repeat
(interleaved, same inputs, generators in the same state), medians of process CPU time with
numba on one thread, and the ratio. Writes ``benchmarks/results/bench_mapspace_backends.json``.

``--compile`` measures the first calls of the compiled MapSpace operations instead: each
operation alone in a fresh process on an empty numba cache (``NUMBA_CACHE_DIR`` a new
folder per process), then all of them in the order a search meets them in one process on
an empty cache, then again in a second process that loads what the first one cached. Wall
time of each first call (compile or cache load included; the space's tables are built
before the clock starts), ``--compile-repeats`` times, medians. Writes
``benchmarks/results/bench_mapspace_compile.json`` (``--out`` for another file).

``--kernels-vs OTHER_SRC`` times this checkout's compiled MapSpace kernels against another
checkout's (``OTHER_SRC/accelmap/mapper/_space_kernel.py``, loaded beside them; its kernels
must read the same `MapSpace` tables) in one process: the same spaces, inputs and generator
seeds, the two versions called in turn within every repeat, medians of process CPU time,
numba on one thread; the outputs are checked equal. Writes
``benchmarks/results/bench_mapspace_kernel_versions.json`` (``--out`` for another file).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_mapspace.json"
RESULTS_BACKENDS = RESULTS.with_name("bench_mapspace_backends.json")
RESULTS_COMPILE = RESULTS.with_name("bench_mapspace_compile.json")
RESULTS_VERSIONS = RESULTS.with_name("bench_mapspace_kernel_versions.json")
#: the compiled operations in the order a search meets them (see `_first_calls`)
COMPILE_OPS = ("decode", "check_decoded", "neighbours_encoded", "neighbours", "legal_repair")
_ROOT = Path(__file__).resolve().parents[1]
# the reference folder sits beside the checkout (or beside the folder of its worktrees)
REF = next((p for p in (_ROOT / ".." / "shared", _ROOT / ".." / ".." / "shared") if p.is_dir()),
           _ROOT / ".." / "shared") / "reference" / "timeloop" / "constraints" / "eyeriss_like"


def _best(fn, repeats: int) -> float:
    """Best CPU time of this process over the repeats (seconds). CPU time, not wall time:
    the machine is shared, and with one BLAS thread numpy runs on one core, so CPU time
    is the per-core cost even when other work competes for the cores."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return max(best, 1e-9)


def measure(space, n: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    x = space.sample_encoded(n, rng)
    batch = space.decode(x)
    out = {
        "size_total": str(space.size().total),
        "n_params": space.n_params,
        "legal_fraction_uniform": float(space.check(batch).valid.mean()),
        "samples_per_s": n / _best(lambda: space.sample(n, rng), repeats),
        "sample_encoded_per_s": n / _best(lambda: space.sample_encoded(n, rng), repeats),
        "decodes_per_s": n / _best(lambda: space.decode(x), repeats),
        "encodes_per_s": n / _best(lambda: space.encode(batch), repeats),
        "checks_per_s": n / _best(lambda: space.check(batch), repeats),
        "neighbours_per_s": n / _best(lambda: space.neighbours(batch, rng), repeats),
        "neighbours_encoded_per_s": n / _best(lambda: space.neighbours_encoded(x, rng), repeats),
        "decode_neighbours_encode_per_s": n / _best(lambda: space.encode(space.neighbours(space.decode(x), rng)),
                                                    repeats),
        "repairs_per_s": n / _best(lambda: space.repair(batch), repeats),
    }
    for method in ("reject", "auto", "repair"):
        k = n if method != "repair" else max(n // 8, 1024)
        out[f"legal_per_s_{method}"] = k / _best(lambda m=method, k=k: space.sample_valid(k, rng, method=m), repeats)
    return out


def _ops(space, n: int):
    """The operations compared across engines: name -> (items, fn(rng)); every fn draws
    from the generator it is handed, so both engines get the same inputs."""
    x = space.sample_encoded(n, np.random.default_rng(0))
    batch = space.decode(x)
    k = max(n // 8, 256)
    return {
        "_space": space, "_x": x,
        "sample": (n, lambda rng: space.sample(n, rng)),
        "decode": (n, lambda rng: space.decode(x)),
        # `check` of the batch `decode` returned last (the search's case): decode untimed
        "check_decoded": (n, lambda rng: space.check(batch)),
        "decode_check": (n, lambda rng: space.check(space.decode(x))),
        "neighbours_encoded": (n, lambda rng: space.neighbours_encoded(x, rng)),
        "neighbours": (n, lambda rng: space.neighbours(batch, rng)),
        "legal_reject": (k, lambda rng: space.sample_valid(k, rng, method="reject")),
        "legal_repair": (k, lambda rng: space.sample_valid(k, rng, method="repair")),
    }


def _check_of(ops: dict):
    space, batch = ops["_space"], ops["_batch"]
    return lambda rng: space.check(batch)


def compare_backends(spaces: dict, sizes: list[int], backends: list[str], repeats: int) -> dict:
    out: dict = {}
    for sname, space in spaces.items():
        out[sname] = {}
        for n in sizes:
            ops = {b: _ops(space.with_engine(b), n) for b in backends}
            names = [op for op in ops[backends[0]] if not op.startswith("_")]
            for b in backends:  # compile or load the kernels, touch the tables
                for op in names:
                    ops[b][op][1](np.random.default_rng(1))
            rows = {}
            for op in names:
                times: dict[str, list[float]] = {b: [] for b in backends}
                for r in range(repeats):
                    for b in backends:  # interleaved: every repeat times each engine in turn
                        items, fn = ops[b][op]
                        rng = np.random.default_rng(100 + r)
                        if op == "check_decoded":
                            ops[b]["_batch"] = ops[b]["_space"].decode(ops[b]["_x"])
                            fn = _check_of(ops[b])
                        t0 = time.process_time()
                        fn(rng)
                        times[b].append(max(time.process_time() - t0, 1e-9))
                row = {f"{b}_per_s": items / float(np.median(times[b])) for b in backends}
                if "numpy" in backends:
                    for b in backends:
                        if b != "numpy":
                            row[f"{b}_over_numpy"] = float(np.median(times["numpy"]) / np.median(times[b]))
                rows[op] = row
                print(f"{sname} n={n} {op}: " + ", ".join(f"{k}={v:,.2f}" for k, v in row.items()), flush=True)
            out[sname][str(n)] = rows
    return out


def _first_calls(ops: list[str]) -> dict:
    """Wall time of the first call of each operation in ``ops``, in this (fresh) process:
    conv3_1 on the eyeriss-like preset, engine cpu. The import of the map space and the
    space's tables (including the kernels' copy of them) are timed apart."""
    t0 = time.perf_counter()
    from accelmap.arch.presets import preset
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.zoo import layer

    out: dict = {"import_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    space = MapSpace(layer("resnet50/conv3_1"), preset("eyeriss-like"), engine="cpu")
    space._consts()
    rng = np.random.default_rng(0)
    x = space.sample_encoded(1024, rng)
    out["build_s"] = time.perf_counter() - t0
    calls = {
        "decode": lambda batch: space.decode(x),
        "check_decoded": lambda batch: space.check(batch),
        "neighbours_encoded": lambda batch: space.neighbours_encoded(x, rng),
        "neighbours": lambda batch: space.neighbours(batch, rng),
        "legal_repair": lambda batch: space.sample_valid(256, rng, method="repair"),
    }
    for op in ops:
        # a decoded batch is the input of `check` and `neighbours`: decoded untimed, except
        # where the first call of decode is the one timed
        batch = None if op == "decode" else space.decode(x)
        t0, c0 = time.perf_counter(), time.process_time()
        calls[op](batch)
        out[op] = time.perf_counter() - t0
        out[f"{op}_cpu"] = time.process_time() - c0
    return out


def _child(ops: list[str], cache_dir: str, src: str | None = None) -> dict:
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, ACCELMAP_KERNELS="cpu")
    if src is not None:  # another checkout's package
        env["PYTHONPATH"] = src
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--compile-child", *ops],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def compile_times(repeats: int, scratch: Path, srcs: list[str | None]) -> dict:
    """First-call times of the compiled operations: each alone on an empty cache, all in a
    search's order on an empty cache, and all again in a second process on that cache. With
    several source folders (checkouts' ``src``), every measurement runs each of them in
    turn (interleaved). Wall and process CPU time; medians over the repeats."""
    import shutil
    import tempfile

    scratch.mkdir(parents=True, exist_ok=True)
    runs: dict = {str(s): {"alone": {op: [] for op in COMPILE_OPS}, "cold": [], "cached": []} for s in srcs}
    for r in range(repeats):
        for op in COMPILE_OPS:
            for src in srcs:
                d = tempfile.mkdtemp(prefix="numba-", dir=scratch)
                runs[str(src)]["alone"][op].append(_child([op], d, src))
                shutil.rmtree(d)
                print(f"repeat {r} {src} {op} alone: {runs[str(src)]['alone'][op][-1][op]:.2f} s", flush=True)
        for src in srcs:
            d = tempfile.mkdtemp(prefix="numba-", dir=scratch)
            runs[str(src)]["cold"].append(_child(list(COMPILE_OPS), d, src))
            runs[str(src)]["cached"].append(_child(list(COMPILE_OPS), d, src))
            shutil.rmtree(d)
            print(f"repeat {r} {src} cold: {runs[str(src)]['cold'][-1]}\n"
                  f"repeat {r} {src} cached: {runs[str(src)]['cached'][-1]}", flush=True)

    def med(values: list[float]) -> float:
        return float(np.median(values))

    keys = ["import_s", "build_s", *COMPILE_OPS, *(f"{op}_cpu" for op in COMPILE_OPS)]
    out: dict = {}
    for src, rr in runs.items():
        out[src] = {
            "alone_cold_s": {op: med([run[op] for run in v]) for op, v in rr["alone"].items()},
            "alone_cold_cpu_s": {op: med([run[f"{op}_cpu"] for run in v]) for op, v in rr["alone"].items()},
            "sequence_cold_s": {k: med([run[k] for run in rr["cold"]]) for k in keys},
            "sequence_cold_total_s": med([sum(run[op] for op in COMPILE_OPS) for run in rr["cold"]]),
            "sequence_cold_total_cpu_s": med([sum(run[f"{op}_cpu"] for op in COMPILE_OPS) for run in rr["cold"]]),
            "sequence_cached_s": {k: med([run[k] for run in rr["cached"]]) for k in keys},
            "sequence_cached_total_s": med([sum(run[op] for op in COMPILE_OPS) for run in rr["cached"]]),
            "runs": rr,
        }
    return out


def compare_kernel_versions(other_src: Path, sizes: list[int], repeats: int) -> dict:
    """Per (space, batch size, kernel operation): CPU time per call of the other checkout's
    kernels and of this one's, interleaved, and their ratio (this / other)."""
    import importlib.util
    import sys

    import numba

    from accelmap.arch.presets import preset
    from accelmap.mapper import _space_kernel as this
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.zoo import layer

    spec = importlib.util.spec_from_file_location("_space_kernel_other",
                                                  other_src / "accelmap" / "mapper" / "_space_kernel.py")
    other = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = other
    spec.loader.exec_module(other)
    numba.set_num_threads(1)
    out: dict = {}
    for lname in ("resnet50/conv3_1", "resnet50/res2a_branch2b"):
        space = MapSpace(layer(lname), preset("eyeriss-like"), engine="numpy")
        consts = {"other": other.space_consts(space), "this": this.space_consts(space)}
        mods = {"other": other, "this": this}
        out[lname] = {}
        for n in sizes:
            x = space.sample_encoded(n, np.random.default_rng(0))
            rows, _, _, _, keep = this.decode(consts["this"], x)
            k = max(n // 8, 1)
            ops = {
                "decode": lambda m, c, rng, x=x: m.decode(c, x),
                "check": lambda m, c, rng, rows=rows, keep=keep: m.fast_reasons(c, rows, keep),
                "neighbours_encoded": lambda m, c, rng, x=x: m.neighbours_encoded(c, x, rng, True),
                "repair": lambda m, c, rng, rows=rows[:k], keep=keep[:k]: m.push_out(c, rows, keep, rng, 64),
            }
            rows_out = {}
            for op, fn in ops.items():
                got = {v: fn(mods[v], consts[v], np.random.default_rng(1)) for v in ("other", "this")}
                for a, b in zip(*(g if isinstance(g, tuple) else (g,) for g in got.values()), strict=True):
                    if not np.array_equal(a, b):
                        raise AssertionError(f"{lname} n={n} {op}: the two kernel versions disagree")
                times: dict[str, list[float]] = {"other": [], "this": []}
                for r in range(repeats):
                    for v in ("other", "this"):
                        rng = np.random.default_rng(100 + r)
                        t0 = time.process_time()
                        fn(mods[v], consts[v], rng)
                        times[v].append(time.process_time() - t0)
                med = {v: float(np.median(t)) for v, t in times.items()}
                rows_out[op] = {"other_s": med["other"], "this_s": med["this"], "this_over_other_time": med["this"] / med["other"],
                                "items": k if op == "repair" else n}
                print(f"{lname} n={n} {op}: other {med['other'] * 1e3:.3f} ms, this {med['this'] * 1e3:.3f} ms, "
                      f"this/other {med['this'] / med['other']:.2f}", flush=True)
            out[lname][str(n)] = rows_out
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=65536, help="batch size (default 65536)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", nargs="+", choices=["numpy", "cpu"], default=None,
                    help="compare these engines of the MapSpace operations (e.g. numpy cpu)")
    ap.add_argument("--sizes", nargs="+", type=int, default=[1024, 16384],
                    help="batch sizes of the --backends comparison (default 1024 16384)")
    ap.add_argument("--compile", action="store_true",
                    help="time the first calls of the compiled operations on an empty and on a filled numba cache")
    ap.add_argument("--compile-repeats", type=int, default=3)
    ap.add_argument("--scratch", type=Path, default=None,
                    help="folder for the --compile runs' numba caches (default: the system's temporary folder)")
    ap.add_argument("--out", type=Path, default=None, help="JSON file to write (--compile only)")
    ap.add_argument("--compile-src", nargs="+", default=None, metavar="DIR",
                    help="--compile: time these source folders (checkouts' src), interleaved (default: this one)")
    ap.add_argument("--compile-labels", nargs="+", default=None, metavar="NAME",
                    help="--compile: a name for each --compile-src folder in the JSON (default: the folders)")
    ap.add_argument("--kernels-vs", type=Path, default=None, metavar="OTHER_SRC",
                    help="time this checkout's compiled MapSpace kernels against another checkout's src folder")
    ap.add_argument("--compile-child", nargs="+", choices=COMPILE_OPS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compile_child:
        print(json.dumps(_first_calls(args.compile_child)))
        return
    if args.compile:
        _main_compile(args)
        return
    if args.kernels_vs:
        import subprocess

        load0 = list(os.getloadavg())
        res = compare_kernel_versions(args.kernels_vs, args.sizes, args.repeats)
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT, capture_output=True,
                             text=True).stdout.strip()
        out = {"commit": rev, "other": args.kernels_vs.name, "arch": "eyeriss-like", "sizes": args.sizes,
               "repeats": args.repeats, "repair_rows": "batch / 8",
               "timing": "median process CPU time per call, the two versions interleaved within each repeat",
               "load_average_start": load0, "load_average_end": list(os.getloadavg()), "spaces": res}
        path = args.out or RESULTS_VERSIONS
        path.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {path}")
        return
    if args.backends:
        _main_backends(args)
        return

    from accelmap.arch.presets import preset
    from accelmap.mapper.space import MapSpace
    from accelmap.mapper.timeloop_constraints import EYERISS_PRESET_LEVEL_MAP, load_timeloop_constraints
    from accelmap.workloads.zoo import layer

    problem, arch = layer("resnet50/res2a_branch2b"), preset("eyeriss-like")
    results = {
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "cpu": platform.processor() or platform.machine(),
                    "threads": 1},
        "layer": "resnet50/res2a_branch2b", "arch": "eyeriss-like", "batch": args.n,
        "spaces": {},
    }
    t0 = time.perf_counter()
    space = MapSpace(problem, arch)
    results["build_s"] = time.perf_counter() - t0
    results["spaces"]["unconstrained"] = measure(space, args.n, args.repeats)
    if REF.is_dir():
        c = load_timeloop_constraints([REF / "arch_constraints.yaml", REF / "map_constraints.yaml"], problem=problem,
                                      arch=arch, level_map=EYERISS_PRESET_LEVEL_MAP)
        results["spaces"]["timeloop_eyeriss_constraints"] = measure(MapSpace(problem, arch, c), args.n, args.repeats)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    for name, r in results["spaces"].items():
        print(f"{name}: " + ", ".join(f"{k}={v:,.0f}" if isinstance(v, float) and v > 10 else f"{k}={v}"
                                     for k, v in r.items()))


def _main_backends(args: argparse.Namespace) -> None:
    import numba

    from accelmap.arch.presets import preset
    from accelmap.mapper.space import MapSpace
    from accelmap.mapper.timeloop_constraints import EYERISS_PRESET_LEVEL_MAP, load_timeloop_constraints
    from accelmap.workloads.zoo import layer

    numba.set_num_threads(1)  # per-core figures
    spaces = {}
    for lname in ("resnet50/res2a_branch2b", "resnet50/conv3_1"):
        problem, arch = layer(lname), preset("eyeriss-like")
        spaces[f"{lname} unconstrained"] = MapSpace(problem, arch)
    if REF.is_dir():
        problem = layer("resnet50/res2a_branch2b")
        c = load_timeloop_constraints([REF / "arch_constraints.yaml", REF / "map_constraints.yaml"], problem=problem,
                                      arch=preset("eyeriss-like"), level_map=EYERISS_PRESET_LEVEL_MAP)
        spaces["resnet50/res2a_branch2b timeloop_eyeriss_constraints"] = MapSpace(problem, preset("eyeriss-like"), c)
    load0 = list(os.getloadavg())
    res = compare_backends(spaces, args.sizes, args.backends, args.repeats)
    out = {"machine": {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
                       "cpu": platform.processor() or platform.machine(), "numba_threads": 1},
           "arch": "eyeriss-like", "backends": args.backends, "sizes": args.sizes, "repeats": args.repeats,
           "timing": "median process CPU time per call, engines interleaved within each repeat",
           "load_average_start": load0, "load_average_end": list(os.getloadavg()), "spaces": res}
    RESULTS_BACKENDS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_BACKENDS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS_BACKENDS}")


def _main_compile(args: argparse.Namespace) -> None:
    import subprocess
    import tempfile

    import numba

    load0 = list(os.getloadavg())
    res = compile_times(args.compile_repeats, args.scratch or Path(tempfile.gettempdir()) / "accelmap-bench-compile",
                        args.compile_src or [None])
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT, capture_output=True, text=True).stdout.strip()
    srcs = args.compile_src or [None]
    labels = args.compile_labels or [str(s) for s in srcs]
    res = {label: res[str(src)] for label, src in zip(labels, srcs, strict=True)}
    out = {"machine": {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
                       "cpu": platform.processor() or platform.machine(), "n_cpus": os.cpu_count()},
           "commit": rev, "layer": "resnet50/conv3_1", "arch": "eyeriss-like", "batch": 1024,
           "repeats": args.compile_repeats,
           "timing": "wall and process CPU time (*_cpu) of each first call in a fresh process on an empty numba "
                     "cache (cold) or on the cache a first process filled (cached), sources interleaved, medians "
                     "over the repeats",
           "load_average_start": load0, "load_average_end": list(os.getloadavg()), "sources": res}
    path = args.out or RESULTS_COMPILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
