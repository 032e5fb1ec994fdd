"""The MapSpace row functions compiled for CUDA (`_space_kernel.cuda_kernels`) under numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, in a subprocess so that the rest of the suite
keeps the real numba.cuda): decode, the check of decoded points and the factor moves give
the numpy path's results, from the same uniforms."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"
HAVE_NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None

SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    from accelmap.arch.presets import preset
    from accelmap.workloads.builders import conv2d, matmul
    from accelmap.mapper.constraints import Constraints
    from accelmap.mapper.space import MapSpace
    from accelmap.mapper import _space_kernel as K

    ker = K.cuda_kernels()
    cases = [("eyeriss-like", conv2d("c", c=8, k=8, p=6, q=6, r=3, s=3), {}),
             ("simba-like", conv2d("s", c=8, k=16, p=5, q=4, r=3, s=3, stride=2), {"allow_padding": True}),
             ("a100-sm", matmul("mm", m=16, n=8, k=12), {"constraints": Constraints(min_utilization=0.05)})]
    for name, problem, kw in cases:
        space = MapSpace(problem, preset(name), engine="numpy", **kw)
        c = K.space_consts(space)
        n = 48
        x = space.sample_encoded(n, np.random.default_rng(2))
        ref = space.decode(x)
        L, T = c.keep_base.shape
        D = len(c.offsets)
        rows = np.zeros((n, D), np.int64)
        out = [np.zeros((n, L, D), np.int64), np.zeros((n, L, D, 2), np.int64), np.zeros((n, L, D), np.int64),
               np.zeros((n, L, T), np.bool_)]
        local = np.zeros((n, max(c.free_pad.shape[1], 1)), np.int64)
        ker["decode"][2, 32](x, c.tile_dims, c.tile_cols, c.offsets, c.lvl_t, c.lvl_s, c.n_free, c.free_pad,
                             c.outer_n, c.outer_pad, c.inner_n, c.inner_pad, c.order_cols, c.order_tab, c.order_off,
                             c.order_w, c.keep_base, c.keep_free, c.keep_cols, rows, *out, local)
        for got, want in zip(out, (ref.temporal, ref.spatial, ref.order, ref.keep)):
            assert (got == want).all(), name
        reason = np.full(n, -9, np.int64)
        level = np.full(n, -9, np.int64)
        ker["reasons"][2, 32](rows, out[3], c.offsets, c.row_sxy, c.fan_cols, c.fan_limits, c.cap_levels, c.caps,
                              c.tiles_m1, c.term_n, c.term_d, c.term_a, c.tsteps, c.util, reason, level)
        chk = space.check(ref)
        assert (reason == chk.reason).all() and (level == chk.level).all(), name
        # factor moves from the numpy path's draws: the numpy rows, then the device rows
        sel = np.arange(0, n, 2)
        want_rows, want_done = rows.copy(), np.zeros(n, np.bool_)
        space._factor_moves(want_rows, sel, want_done, np.random.default_rng(5))
        rng = np.random.default_rng(5)
        pick = rng.integers(0, len(c.tile_dims), size=len(sel))
        u = rng.random(len(sel) * (2 * c.flat.shape[1] + 1))
        dim, base, rank, size = K.factor_groups(c, pick)
        got_rows, got_done = rows.copy(), np.zeros(n, np.bool_)
        S = c.flat.shape[1]
        ker["factor_moves"][1, 32](got_rows, sel, dim, base, rank, size, u, got_done, c.offsets, c.flat,
                                   c.slot_exists, c.primes, c.n_primes, c.keys, c.krows, c.mult, c.dim_mult,
                                   np.zeros((len(sel), S), np.int64), np.zeros((len(sel), S), np.bool_))
        assert (got_rows == want_rows).all() and (got_done == want_done).all() and want_done.any(), name
    print("SIM-OK")
""")


@pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda is not installed (the cuda extra)")
def test_space_row_functions_on_cuda_under_the_simulator() -> None:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0 and "SIM-OK" in res.stdout, res.stderr[-3000:]
