"""The aspect kernel's top-level MAC count (`_aspect_kernel._macs_factored`: the sum over
MAESTRO's cases regrouped per directive) against the walk over every case, row by row.

The kernel's rules are plain Python functions (``register_jitable``), so the rows run here
uncompiled: ``general_row`` once as it is and once with the factored count switched off
(every case walked), and both must write the same counts, runtime and MAC total, for the
rows whose MAC count matches the layer's and for those it rejects. The compiled driver must
give what the uncompiled one gives."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.presets import preset
from accelmap.costmodels import _aspect_kernel as K
from accelmap.testing.examples import aspect_batch
from accelmap.workloads.builders import conv2d

CASES = {
    "conv": lambda: conv2d("c", c=12, k=10, p=13, q=11, r=3, s=3),
    "conv-strided": lambda: conv2d("s2", c=6, k=10, p=7, q=5, r=3, s=3, stride=2),
    "conv-wide": lambda: conv2d("w", c=16, k=24, p=20, q=18, r=3, s=3),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("arch_name", ["eyeriss-like", "systolic"])
def test_factored_macs_equal_the_case_walk(case: str, arch_name: str, monkeypatch) -> None:
    problem, arch = CASES[case](), preset(arch_name)
    batch = aspect_batch(problem, arch, 400, np.random.default_rng(len(case) * 7 + len(arch_name)))
    consts = K.aspect_consts(problem, arch)
    arrays = (batch.temporal, batch.spatial, batch.order, batch.keep)
    compiled_out, compiled_codes = K.evaluate_rows(consts, *arrays)

    factored, general = K._macs_factored, K.general_row
    seen = {"general": 0, "factored": 0}

    def counted(*args):  # noqa: ANN002, ANN202
        done, macs = factored(*args)
        seen["factored"] += bool(done)
        return done, macs

    def walked(*args):  # noqa: ANN002, ANN202
        return False, 0

    def both(*args):  # noqa: ANN002, ANN202
        seen["general"] += 1
        out = args[-1]
        a, b = out.copy(), out.copy()
        monkeypatch.setattr(K, "_macs_factored", counted)
        general(*args[:-1], a)
        monkeypatch.setattr(K, "_macs_factored", walked)
        general(*args[:-1], b)
        np.testing.assert_array_equal(a, b)
        out[:] = a

    monkeypatch.setattr(K, "general_row", both)
    for name in ("_egress_term", "_load_state"):  # (compiled to be inlined: here their Python source)
        monkeypatch.setattr(K, name, getattr(K, name).py_func)
    n, D = len(batch), problem.n_dims
    out = np.empty((n, K.N_COLS), np.int64)
    codes = np.empty((n, 2), np.int64)
    K.eval_range(0, n, *arrays, *consts.as_tuple(), out, codes, tuple(x[0] for x in K._scratch(1, D)))
    np.testing.assert_array_equal(out, compiled_out)
    np.testing.assert_array_equal(codes, compiled_codes)
    assert seen["general"] >= 5 and seen["factored"] >= seen["general"] // 2, seen
