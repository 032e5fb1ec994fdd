"""`Problem.footprint` (term by term over nonzero coefficients) equals the dense formula
``prod_c (1 + sum_d coef[t, c, d] (tile_d - 1))`` bit for bit, wrap-around included."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.workloads.builders import conv2d, matmul
from accelmap.workloads.problem import Problem


def _dense(problem: Problem, tiles: np.ndarray) -> np.ndarray:
    t = np.asarray(tiles, dtype=np.int64)
    span = 1 + np.einsum("tcd,...d->...tc", problem.coefficients, t - 1)
    span = np.where(problem.rank_used, span, 1)
    return np.prod(span, axis=-1)


@pytest.mark.parametrize("problem", [
    conv2d("c", c=4, k=6, p=5, q=7, r=3, s=2, stride=(2, 1), dilation=(1, 3)),
    matmul("m", m=4, n=3, k=5),
], ids=["strided-dilated-conv", "matmul"])
@pytest.mark.parametrize("shape", [(), (3,), (4, 5), (0, 2)])
@pytest.mark.parametrize("high", [6, 2**40])
def test_footprint_equals_dense(problem: Problem, shape: tuple[int, ...], high: int) -> None:
    rng = np.random.default_rng(len(shape) + high % 7)
    tiles = rng.integers(-2, high, size=shape + (problem.n_dims,))
    got = problem.footprint(tiles)
    want = _dense(problem, tiles)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def test_footprint_rejects_wrong_width() -> None:
    problem = matmul("m", m=4, n=3, k=5)
    with pytest.raises(ValueError):
        problem.footprint(np.ones((2, problem.n_dims + 1), dtype=np.int64))
