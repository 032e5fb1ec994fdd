"""`permutation_rows` (the loop-order test of `check_batch`) equals the sort-based test."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.mapper.check import permutation_rows


@pytest.mark.parametrize("D", [1, 2, 3, 7, 9])
def test_permutation_rows_equals_sorting(D: int) -> None:
    rng = np.random.default_rng(D)
    order = rng.integers(-3, D + 3, size=(3000, 4, D))
    order[:1000] = np.argsort(rng.random((1000, 4, D)), axis=2)  # true permutations
    order[1000:1100] = order[:100]
    order[1000:1100, :, 0] = order[1000:1100, :, -1]  # a duplicate (for D > 1)
    order[1200, 1, 0] = -(2**63)
    order[1201, 2, 0] = 2**62
    expected = (np.sort(order, axis=2) == np.arange(D)).all(axis=2)
    assert np.array_equal(permutation_rows(order), expected)
    # every value in range (the one-shift path): permutations and rows with a duplicate
    assert np.array_equal(permutation_rows(order[:1100]), expected[:1100])
    assert permutation_rows(order[1000:1100]).sum() == (0 if D > 1 else 400)


def test_permutation_rows_empty() -> None:
    assert permutation_rows(np.zeros((0, 3, 5), dtype=np.int64)).shape == (0, 3)
