"""First-call cost of the aspect model's ``cpu`` engine in fresh processes, run by hand::

    python benchmarks/bench_aspect_compile.py [--out benchmarks/results/bench_aspect_compile.json]

With an empty numba cache (a temporary ``NUMBA_CACHE_DIR``), then with that cache filled: the
generic driver's first call (64 rows of ``bench_costmodel.py``'s aspect case, VGG-16 conv3 on
``maestro-acc1-1024``: what every process pays before its first rows) and, after it, the
compile of the structure's own driver (`_aspect_cpu.compiled`, waited for; in a model it runs
in the background after `_aspect_cpu.SPECIALISE_AFTER_ROWS` rows). Wall and process CPU
seconds, the load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import json, os, sys, time
import numpy as np
sys.path.insert(0, "benchmarks")
from bench_costmodel import _aspect_case, _aspect_pool
from accelmap.costmodels import _aspect_cpu, _aspect_kernel
from accelmap.costmodels.aspect import AspectModel
problem, arch = _aspect_case()
batch = _aspect_pool(problem, arch, 64, np.random.default_rng(0))
c0, t0 = time.process_time(), time.perf_counter()
AspectModel(engine="cpu").evaluate(problem, arch, batch)
c1, t1 = time.process_time(), time.perf_counter()
_aspect_cpu.compiled(_aspect_cpu.structure(_aspect_kernel.aspect_consts(problem, arch)), block=True)
c2, t2 = time.process_time(), time.perf_counter()
print(json.dumps({"generic_first_call_wall_s": t1 - t0, "generic_first_call_cpu_s": c1 - c0,
                  "specialised_compile_wall_s": t2 - t1, "specialised_compile_cpu_s": c2 - c1,
                  "load_1min": os.getloadavg()[0]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    out: dict = {"case": "vgg16_conv3/maestro-acc1-1024"}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(root / "src"))
        for key in ("cold_cache", "warm_cache"):
            res = subprocess.run([sys.executable, "-c", _CHILD], cwd=root, env=env, capture_output=True, text=True,
                                 check=True)
            out[key] = json.loads(res.stdout.strip().splitlines()[-1])
            print(key, out[key])
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
