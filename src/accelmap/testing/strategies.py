"""Hypothesis strategies for accelmap specs (public, for plugin authors' property tests).

Requires the ``test`` extra (hypothesis).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from accelmap.arch.spec import Arch
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.examples import small_arch
from accelmap.workloads import builders
from accelmap.workloads.problem import Problem

__all__ = ["conv_problems", "matmul_problems", "problems", "small_archs", "mapping_batches"]

_SMALL = st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16])


@st.composite
def conv_problems(draw: st.DrawFn) -> Problem:
    """Small 2-D convolutions: strided, dilated, depthwise or plain."""
    kind = draw(st.sampled_from(["plain", "strided", "dilated", "depthwise"]))
    r = draw(st.sampled_from([1, 3]))
    c = draw(_SMALL)
    k = c if kind == "depthwise" else draw(_SMALL)
    return builders.conv2d(
        f"conv_{kind}", c=c, k=k, p=draw(_SMALL), q=draw(_SMALL), r=r, s=r,
        n=draw(st.sampled_from([1, 2])),
        stride=2 if kind == "strided" else 1,
        dilation=2 if kind == "dilated" else 1,
        groups=c if kind == "depthwise" else 1,
    )


@st.composite
def matmul_problems(draw: st.DrawFn) -> Problem:
    return builders.matmul("gemm", m=draw(_SMALL), n=draw(_SMALL), k=draw(_SMALL))


def problems() -> st.SearchStrategy[Problem]:
    return st.one_of(conv_problems(), matmul_problems())


@st.composite
def small_archs(draw: st.DrawFn) -> Arch:
    return small_arch(
        glb_words=draw(st.sampled_from([256, 1024, 1 << 16])),
        rf_words=draw(st.sampled_from([16, 64, 512])),
        fanout=(draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 4]))),
    )


@st.composite
def mapping_batches(draw: st.DrawFn, space: MapSpace, max_size: int = 16) -> MappingBatch:
    """Mappings drawn uniformly from a map space (legal or not: capacity is not enforced)."""
    n = draw(st.integers(1, max_size))
    seed = draw(st.integers(0, 2**32 - 1))
    return space.sample(n, np.random.default_rng(seed))
