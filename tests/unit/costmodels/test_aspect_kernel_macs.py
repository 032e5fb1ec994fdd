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
from accelmap.costmodels.aspect import aspect_view
from accelmap.mapper.mapping import MappingBatch
from accelmap.workloads.builders import conv2d


def _pool(problem, arch, n: int, rng: np.random.Generator) -> MappingBatch:
    """Directive-form mappings with edge tiles: one dim unrolled along each array axis (any
    factor up to the fanout, not only divisors), the filter dims below the array, random
    factors elsewhere with the remainder at the innermost level, random loop orders."""
    a = aspect_view(arch).array_level
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    fan = arch.fanouts[a]
    filt = {problem.dim_index(d) for d in ("R", "S") if d in problem.dim_names}
    t = np.ones((n, L, D), np.int64)
    s = np.ones((n, L, D, 2), np.int64)
    for i in range(n):
        rem = problem.bounds.astype(np.int64).copy()
        for ax in (0, 1):
            d = int(rng.integers(D))
            divs = [f for f in range(1, int(fan[ax]) + 1) if rem[d] % f == 0]
            s[i, a, d, ax] = divs[int(rng.integers(len(divs)))]
            rem[d] //= s[i, a, d, ax]
        for d in range(D):
            r = int(rem[d])
            for lv in (range(a + 1, L) if d in filt else range(L)):
                ds = [f for f in range(1, r + 1) if r % f == 0]
                f = ds[int(rng.integers(len(ds)))]
                t[i, lv, d] *= f
                r //= f
            t[i, L - 1, d] *= r
    order = np.argsort(rng.random((n, L, D)), axis=2)
    keep = np.broadcast_to(arch.holds_mask(problem), (n, L, T)).copy()
    return MappingBatch(temporal=t, spatial=s, order=order, keep=keep)


CASES = {
    "conv": lambda: conv2d("c", c=12, k=10, p=13, q=11, r=3, s=3),
    "conv-strided": lambda: conv2d("s2", c=6, k=10, p=7, q=5, r=3, s=3, stride=2),
    "conv-wide": lambda: conv2d("w", c=16, k=24, p=20, q=18, r=3, s=3),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("arch_name", ["eyeriss-like", "systolic"])
def test_factored_macs_equal_the_case_walk(case: str, arch_name: str, monkeypatch) -> None:
    problem, arch = CASES[case](), preset(arch_name)
    batch = _pool(problem, arch, 400, np.random.default_rng(len(case) * 7 + len(arch_name)))
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
    K.eval_range(0, n, *arrays, *consts.as_tuple(), out, codes, *(x[0] for x in K._scratch(1, D)))
    np.testing.assert_array_equal(out, compiled_out)
    np.testing.assert_array_equal(codes, compiled_codes)
    assert seen["general"] >= 5 and seen["factored"] >= seen["general"] // 2, seen
