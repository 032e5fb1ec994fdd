from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.mapper.io import mapping_from_dict, mapping_to_dict
from accelmap.mapper.space import MapSpace
from accelmap.testing.strategies import problems, small_archs


@settings(max_examples=40, deadline=None)
@given(problem=problems(), arch=small_archs(), seed=st.integers(0, 2**31))
def test_mapping_dict_round_trip(problem, arch, seed):
    import numpy as np

    space = MapSpace(problem, arch)
    batch = space.sample(4, np.random.default_rng(seed))
    for m in batch:
        assert mapping_from_dict(mapping_to_dict(m, problem, arch), problem, arch) == m
