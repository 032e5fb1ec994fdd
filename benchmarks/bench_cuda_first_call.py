"""First calls of the systolic and aspect cuda engines in fresh processes: the kernel's compile
in the first, its on-disk cache entry in the second (needs numba-cuda and a GPU).

Run by hand through the device tool, from the repo root, with an empty ``__pycache__`` for
``_systolic_cuda`` / ``_aspect_cuda``::

    python benchmarks/bench_cuda_first_call.py systolic aspect [--out results.json]

For each model named, the same script runs twice in a new process ("cold", then "warm"): 256
rows (CB2a_2 on the ``systolic`` preset; directive-form rows of a 3x3 convolution on
``eyeriss-like``) evaluated by ``engine="cuda"``, the first call timed, the result checked
equal to ``engine="numpy"``. Prints one line per process and, with ``--out``, writes them as
JSON (per model and run: the process's seconds, the first call's seconds, whether equal).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CODE = {"systolic": """
import time, numpy as np
from accelmap.arch.presets import preset
from accelmap.workloads.builders import conv2d
from accelmap.mapper.space import MapSpace
from accelmap.costmodels.systolic import SystolicModel
from accelmap.testing.costmodel_checks import assert_engines_agree
p = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8); a = preset("systolic")
b = MapSpace(p, a).sample(256, np.random.default_rng(0))
t0 = time.perf_counter(); g = SystolicModel(engine="cuda").evaluate(p, a, b); t = time.perf_counter() - t0
assert_engines_agree(g, SystolicModel(engine="numpy").evaluate(p, a, b), what="x"); print("FIRST_CALL", t)
""", "aspect": """
import time, numpy as np
from accelmap.arch.presets import preset
from accelmap.workloads.builders import conv2d
from accelmap.costmodels.aspect import AspectModel
from accelmap.testing.examples import aspect_batch
from accelmap.testing.costmodel_checks import assert_engines_agree
p = conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3); a = preset("eyeriss-like")
b = aspect_batch(p, a, 256, np.random.default_rng(0))
t0 = time.perf_counter(); g = AspectModel(engine="cuda").evaluate(p, a, b); t = time.perf_counter() - t0
assert_engines_agree(g, AspectModel(engine="numpy").evaluate(p, a, b), what="x"); print("FIRST_CALL", t)
"""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", choices=sorted(CODE))
    ap.add_argument("--out", default=None, help="JSON file for the figures")
    args = ap.parse_args()
    out: dict = {}
    for model in args.models:
        for run in ("cold", "warm"):
            t0 = time.time()
            r = subprocess.run([sys.executable, "-W", "ignore", "-c", CODE[model]], capture_output=True, text=True,
                               check=False)
            process_s = time.time() - t0
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("FIRST_CALL ")]
            # (the child asserts equality with numpy before it prints: a line means equal)
            first = float(lines[-1].split()[1]) if r.returncode == 0 and lines else None
            out.setdefault(model, {})[run] = {"process_s": process_s, "first_call_s": first, "equal": first is not None}
            print(model, run, f"process {process_s:.1f} s, first call "
                  + (f"{first:.2f} s, equal to numpy" if first is not None else "failed:\n" + r.stderr[-1500:]),
                  flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
