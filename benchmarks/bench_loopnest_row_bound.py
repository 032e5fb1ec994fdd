"""What bounds the loopnest cpu rows: memory, loop-order branches or instructions.

Run by hand from the repo root::

    python benchmarks/bench_loopnest_row_bound.py [--rows 100000] [--repeats 7] [--out FILE]

On the case of ``bench_costmodel.py --backends`` (res2a_branch2b on eyeriss-like, legal rows
from ``MapSpace.sample_valid``, the specialised driver serving, one thread), times
``LoopNestModel.evaluate`` on pools that differ in one respect each, interleaved within every
repeat in one process:

* ``distinct``: ``--rows`` distinct rows;
* ``tiled``: 1,000 of them repeated to ``--rows`` (the mapping arrays fit the core's caches);
* ``random_orders`` / ``one_order`` / ``sorted_by_order``: 10,000 rows as drawn, the same rows
  with the first row's loop orders in every row, and sorted by their loop orders.

``distinct`` equal to ``tiled`` says the rows do not wait for the mapping arrays; ``one_order``
equal to ``random_orders`` says the branches that follow a row's loop order are not what costs.
Also counts the instructions of the generated row function and those that touch the stack
(numba ``inspect_asm``; needs a fresh compile, so the generated module goes to a temporary
``ACCELMAP_CACHE_DIR`` with numba's cache off for that count). Results: evaluations per second,
medians and bests, and the counts (JSON)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _asm_counts() -> dict:
    """Instructions and stack references of the generated row function, compiled afresh in a
    subprocess (an inspection of cached code is empty)."""
    import subprocess

    code = r"""
import re, sys, numpy as np
from accelmap.arch.io import load_arch
from accelmap.costmodels import _loopnest_kernel as lk
from accelmap.workloads.io import load_problem
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.space import MapSpace
lk._SPECIALISE_AFTER_ROWS = 0
lk._SPECIALISE_IN_BACKGROUND = False
p, a = load_problem("resnet50/res2a_branch2b"), load_arch("eyeriss-like")
LoopNestModel().evaluate(p, a, MapSpace(p, a).sample_valid(16, np.random.default_rng(0)))
mod = [m for k, m in sys.modules.items() if "accelmap_loopnest_rows" in k][0]
asm = list(mod.rows.inspect_asm().values())[0]
funcs, cur = {}, None
for line in asm.splitlines():
    if re.match(r"^[A-Za-z_][\w.$]*:", line):
        cur = line
        funcs[cur] = []
    elif cur and line.startswith("\t") and not line.startswith("\t."):
        funcs[cur].append(line)
body = [v for k, v in funcs.items() if k.startswith("_ZN") and "cpython" not in k and "rows" in k]
body = max(body, key=len)
print(len(body), sum("%rsp" in x for x in body), sum(x.split()[0] == "movq" for x in body))
"""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ACCELMAP_CACHE_DIR=tmp, NUMBA_DISABLE_CACHE="1")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    n, rsp, movq = (int(x) for x in out.stdout.split()[-3:])
    return {"instructions": n, "stack_references": rsp, "movq": movq}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "bench_loopnest_row_bound.json")
    args = ap.parse_args()

    from accelmap.arch.io import load_arch
    from accelmap.costmodels import _loopnest_kernel as lk
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    lk._SPECIALISE_AFTER_ROWS = 0  # the driver a long-running process settles on, from the start
    lk._SPECIALISE_IN_BACKGROUND = False  # (compiled here, before the timing)
    problem, arch = load_problem("resnet50/res2a_branch2b"), load_arch("eyeriss-like")
    space = MapSpace(problem, arch)
    rng = np.random.default_rng(0)
    distinct = space.sample_valid(args.rows, rng)
    tiled = distinct.take(np.tile(np.arange(1000), -(-args.rows // 1000))[: args.rows])
    small = distinct.take(slice(0, 10_000))
    one_order = dataclasses.replace(small, order=np.broadcast_to(small.order[0], small.order.shape).copy())
    sorted_rows = small.take(np.lexsort(small.order.reshape(len(small), -1).T))
    pools = {"distinct": distinct, "tiled": tiled, "random_orders": small, "one_order": one_order,
             "sorted_by_order": sorted_rows}
    model = LoopNestModel()
    for b in pools.values():  # compile, and every buffer allocated once
        assert model.evaluate(problem, arch, b).valid.all()
    times: dict[str, list[float]] = {k: [] for k in pools}
    load0 = os.getloadavg()
    for _ in range(args.repeats):
        for name, b in pools.items():
            calls = max(1, 200_000 // len(b))
            t0 = time.perf_counter()
            for _ in range(calls):
                model.evaluate(problem, arch, b)
            times[name].append(calls * len(b) / (time.perf_counter() - t0))
    res = {
        "case": "resnet50/res2a_branch2b / eyeriss-like, LoopNestModel().evaluate, specialised driver, one thread",
        "rows": args.rows, "repeats": args.repeats, "load_average_start": load0, "load_average_end": os.getloadavg(),
        "evals_per_s": {k: {"median": float(np.median(v)), "best": float(max(v))} for k, v in times.items()},
        "row_function_asm": _asm_counts(),
    }
    for k, v in res["evals_per_s"].items():
        print(f"{k:>16}: median {v['median']:,.0f}/s, best {v['best']:,.0f}/s")
    print("row function:", res["row_function_asm"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
