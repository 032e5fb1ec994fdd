from __future__ import annotations

import itertools

import numpy as np
import pytest

from accelmap.errors import SpecError
from accelmap.search.objectives import Objective, ObjectiveSpec, non_dominated, parse_objective


@pytest.mark.parametrize("text, kind", [
    ("edp", Objective.EDP), ("EDP", Objective.EDP), ("energy", Objective.ENERGY),
    ("cycles", Objective.CYCLES), ("latency", Objective.CYCLES),
    ("energy,cycles", Objective.PARETO), ("pareto", Objective.PARETO),
])
def test_parse_simple(text, kind):
    spec = parse_objective(text)
    assert spec.kind is kind
    assert parse_objective(spec.name) == spec


def test_parse_weighted():
    spec = parse_objective("energy^2*cycles")
    assert spec.kind is Objective.WEIGHTED and spec.energy_exp == 2 and spec.cycles_exp == 1
    assert parse_objective(spec.name) == spec
    spec = parse_objective("cycles^0.5 * energy")
    assert (spec.energy_exp, spec.cycles_exp) == (1.0, 0.5)


@pytest.mark.parametrize("bad", ["", "edp2", "energy^x", "energy*energy", "power", "energy^-1", "energy^0*cycles^0"])
def test_parse_errors_name_the_accepted_forms(bad):
    with pytest.raises(SpecError, match="objective"):
        parse_objective(bad)


def test_values_mark_invalid_as_inf():
    e = np.array([2.0, 3.0, 4.0])
    c = np.array([10.0, 1.0, np.inf])
    valid = np.array([True, False, True])
    v = parse_objective("edp").values(e, c, valid)
    assert v.tolist() == [20.0, np.inf, np.inf]
    w = parse_objective("energy^2*cycles").values(e, c, valid)
    assert w[0] == pytest.approx(40.0)
    p = parse_objective("energy,cycles").values(e, c, valid)
    assert p.shape == (3, 2) and p[0].tolist() == [2.0, 10.0] and np.isinf(p[1:]).all()
    assert parse_objective("energy,cycles").scalarize(p)[0] == 20.0
    assert ObjectiveSpec(kind=Objective.PARETO).n_objectives == 2


def _brute(f):
    n = len(f)
    keep = np.ones(n, bool)
    for i, j in itertools.product(range(n), range(n)):
        if i != j and (f[j] <= f[i]).all() and (f[j] < f[i]).any():
            keep[i] = False
    keep &= np.isfinite(f).all(axis=1)
    # duplicates: keep the first
    for i in range(n):
        for j in range(i):
            if keep[j] and keep[i] and (f[i] == f[j]).all():
                keep[i] = False
    return keep


@pytest.mark.parametrize("m", [2, 3])
def test_non_dominated_matches_brute_force(m):
    rng = np.random.default_rng(m)
    for _ in range(20):
        f = rng.integers(0, 6, size=(40, m)).astype(float)
        f[rng.random(40) < 0.1, 0] = np.inf
        assert (non_dominated(f) == _brute(f)).all()


def test_non_dominated_edge_cases():
    assert non_dominated(np.zeros((0, 2))).shape == (0,)
    assert non_dominated(np.full((3, 2), np.inf)).sum() == 0
    assert non_dominated(np.array([[3.0], [1.0], [2.0]])).tolist() == [False, True, False]
