"""First calls of the systolic and aspect cuda engines in fresh processes: the kernel's compile
in the first, its on-disk cache entry in the second (needs numba-cuda and a GPU).

Run by hand through the device tool, from the repo root, with an empty ``__pycache__`` for
``_systolic_cuda`` / ``_aspect_cuda``::

    python benchmarks/bench_cuda_first_call.py systolic aspect

For each model named, the same script runs twice in a new process ("cold", then "warm"): 256
rows (CB2a_2 on the ``systolic`` preset; directive-form rows of a 3x3 convolution on
``eyeriss-like``) evaluated by ``engine="cuda"``, the first call timed, the result checked
equal to ``engine="numpy"``. Prints one line per process.
"""
from __future__ import annotations

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
assert_engines_agree(g, SystolicModel(engine="numpy").evaluate(p, a, b), what="x"); print("first call", round(t, 2), "s, equal")
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
assert_engines_agree(g, AspectModel(engine="numpy").evaluate(p, a, b), what="x"); print("first call", round(t, 2), "s, equal")
"""}


def main() -> None:
    for model in sys.argv[1:]:
        for run in ("cold", "warm"):
            t0 = time.time()
            r = subprocess.run([sys.executable, "-W", "ignore", "-c", CODE[model]], capture_output=True, text=True,
                               check=False)
            print(model, run, f"process {time.time() - t0:.1f} s:", r.stdout.strip()[-200:],
                  r.stderr[-1500:] if r.returncode else "", flush=True)


if __name__ == "__main__":
    main()
