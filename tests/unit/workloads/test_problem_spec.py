from __future__ import annotations

import numpy as np
import pytest

from accelmap import Dim, Problem, SpecError, Tensor, TensorRole, Term
from accelmap.testing.examples import small_conv


def test_macs_bounds_and_relevance():
    p = small_conv(k=8, c=4, p=6, q=6, r=3, s=3)
    assert p.macs == 8 * 4 * 6 * 6 * 3 * 3
    assert p.bounds.tolist() == [1, 8, 4, 6, 6, 3, 3]
    rel = p.relevance
    assert rel[p.tensor_index("Weights")].tolist() == [False, True, True, False, False, True, True]
    assert not rel[p.output_index][p.dim_index("C")]  # outputs are reduced over C


def test_footprint_sliding_window_halo_for_stride_and_dilation():
    p = small_conv(k=2, c=3, p=5, q=5, r=3, s=3, stride=2)
    sizes = p.tensor_sizes()
    # input rows = stride*(P-1) + (R-1) + 1 = 2*4 + 2 + 1 = 11
    assert sizes[p.tensor_index("Inputs")] == 3 * 11 * 11
    assert sizes[p.tensor_index("Weights")] == 2 * 3 * 3 * 3
    tile = np.array([1, 1, 1, 2, 1, 3, 1])
    assert p.footprint(tile)[p.tensor_index("Inputs")] == (2 * 1 + 2 + 1) * 1


def test_footprint_is_vectorized():
    p = small_conv()
    tiles = np.ones((5, 2, p.n_dims), dtype=np.int64)
    assert p.footprint(tiles).shape == (5, 2, p.n_tensors)


def test_problem_lists_every_problem_at_once():
    with pytest.raises(SpecError) as err:
        Problem(
            name="bad",
            dims=(Dim(name="K", bound=4),),
            tensors=(Tensor(name="A", projection=((Term(dim="Z"),),), role=TensorRole.INPUT),),
        )
    msg = str(err.value)
    assert "0 output tensors" in msg and "unknown dimension(s) ['Z']" in msg


@pytest.mark.parametrize("bound", [0, -3])
def test_bad_bound(bound):
    with pytest.raises(SpecError, match="expected an int >= 1"):
        Dim(name="K", bound=bound)


def test_tensor_lookup_by_role_and_unknown():
    p = small_conv()
    assert p.tensor_index("weight") == p.tensor_index("Weights")
    with pytest.raises(SpecError, match="no tensor named or with role 'psum'"):
        p.tensor_index("psum")


def test_with_bounds():
    p = small_conv().with_bounds(N=4)
    assert p.bounds[0] == 4
    with pytest.raises(SpecError):
        small_conv().with_bounds(Z=2)
