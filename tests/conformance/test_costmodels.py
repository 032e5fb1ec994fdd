"""Every registered cost model passes the shipped conformance checks on every kind of arch.

A model that cannot evaluate an arch or mapping must say so with invalid rows (inf cost,
a reason code), never an exception, so every model is run on every arch here.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelmap._registry import costmodels
from accelmap.arch.presets import preset
from accelmap.errors import InfeasibleSpaceError
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.costmodel_checks import check_cost_model
from accelmap.testing.examples import small_arch
from accelmap.workloads import builders

PROBLEMS = {
    "conv": builders.conv2d("conv", c=16, k=16, p=8, q=8, r=3, s=3),
    "strided": builders.conv2d("strided", c=8, k=16, p=7, q=7, r=3, s=3, stride=2),
    "depthwise": builders.conv2d("dw", c=16, k=16, p=8, q=8, r=3, s=3, groups=16),
    "gemm": builders.matmul("gemm", m=32, n=16, k=24),
}
ARCHS = {"eyeriss-like": lambda: preset("eyeriss-like"), "systolic": lambda: preset("systolic"),
         "small": lambda: small_arch()}


@pytest.mark.parametrize("model_name", costmodels.names())
@pytest.mark.parametrize("arch_name", sorted(ARCHS))
@pytest.mark.parametrize("problem_name", sorted(PROBLEMS))
def test_cost_model_conformance(model_name, arch_name, problem_name):
    model = costmodels.get(model_name)()
    problem, arch = PROBLEMS[problem_name], ARCHS[arch_name]()
    space = MapSpace(problem, arch)
    rng = np.random.default_rng(7)
    parts = [space.sample(6, rng)]
    try:
        parts.append(space.sample_valid(10, rng))
    except InfeasibleSpaceError:
        pass  # a space with few legal points is still checked on its random rows
    check_cost_model(model, problem, arch, MappingBatch.concat(parts))
