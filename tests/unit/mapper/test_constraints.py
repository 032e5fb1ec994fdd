"""Constraints: strict YAML, override/loosen, dataflow presets, arch default constraints."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from accelmap.errors import SpecError
from accelmap.mapper.constraints import (
    DATAFLOWS,
    Constraints,
    FactorRule,
    KeepRule,
    Slot,
    constraints_from_dict,
    dataflow,
    load_constraints,
)
from accelmap.mapper.space import MapSpace
from accelmap.testing.examples import small_arch, small_conv

DOC = {
    "version": 1,
    "min_utilization": 0.25,
    "allow_padding": False,
    "factors": [
        {"level": "GLB", "dim": "K", "slot": "spatial_x", "fixed": 4},
        {"level": "RF", "dim": "S", "fixed": "full"},
        {"level": "DRAM", "dim": "C", "max": 2},
    ],
    "spatial": [{"level": "GLB", "x": ["K"], "y": ["C", "P"]}],
    "orders": [{"level": "RF", "inner": ["R", "S"]}, {"level": "DRAM", "outer": ["K"]}],
    "keep": [{"level": "GLB", "keep": ["input"], "bypass": ["weight"], "choose": ["output"]}],
}


def test_yaml_round_trip_builds_rules(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(DOC))
    c = load_constraints(path)
    assert c.min_utilization == 0.25 and c.allow_padding is False
    assert FactorRule(level="RF", dim="S", slot=Slot.TEMPORAL, fixed=0) in c.factors
    assert {(r.tensor, r.keep) for r in c.keep} == {("input", True), ("weight", False), ("output", None)}
    assert c.orders[0].inner == ("R", "S")
    sp = MapSpace(small_conv(), small_arch(), c)
    b = sp.sample_valid(200, np.random.default_rng(0))
    p = sp.problem
    assert (b.temporal[:, 2, p.dim_index("S")] == p.dims[p.dim_index("S")].bound).all()
    assert (b.spatial[:, 1, p.dim_index("K"), 0] == 4).all()
    assert (sp.utilization(b) >= 0.25).all()


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({**DOC, "bogus": 1}, r"c\.yaml: bogus: unknown key; accepted keys: version, dataflow"),
        ({**DOC, "version": 2}, r"version = 2; expected version: 1"),
        ({k: v for k, v in DOC.items() if k != "version"}, r"version = None; expected version: 1"),
        ({"version": 1, "factors": [{"level": "RF", "dim": "S", "fixd": 3}]}, r"factors\[0\]\.fixd: unknown key \(did you mean 'fixed'\?\)"),
        ({"version": 1, "factors": [{"level": "RF", "dim": "S", "slot": "spatial_z"}]}, r"factors\[0\]\.slot = 'spatial_z'"),
        ({"version": 1, "factors": [{"level": "RF", "dim": "S", "fixed": -1}]}, r"factors\[0\]\.fixed = -1"),
        ({"version": 1, "factors": [{"level": "RF", "fixed": 2}]}, r"factors\[0\]\.dim is missing; a factor rule needs keys level, dim"),
        ({"version": 1, "orders": [{"level": "RF", "inner": ["R", "R"]}]}, r"orders\[0\]: .*listed more than once"),
        ({"version": 1, "min_utilization": 2}, r"min_utilization = 2; expected a number in \[0, 1\]"),
        ({"version": 1, "factors": [{"level": "RF", "dim": "S", "min": 0}]}, r"factors\[0\]\.min = 0; expected an int >= 1"),
        ({"version": 1, "spatial": [{"level": "RF", "x": 3}]}, r"spatial\[0\]\.x = 3 \(an int\); expected a dim name or a list"),
        ({"version": 1, "keep": {"level": "RF"}}, r"keep = .*expected a list"),
    ],
)
def test_strict_errors(tmp_path, doc, match) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=match):
        load_constraints(path)


def test_unknown_level_dim_tensor_in_space() -> None:
    p, a = small_conv(), small_arch()
    for c, match in (
        (Constraints(factors=(FactorRule(level="L9", dim="K", fixed=2),)), r"unknown level 'L9'; arch small has"),
        (Constraints(factors=(FactorRule(level="RF", dim="Z", fixed=2),)), r"unknown dimension 'Z'"),
        (Constraints(keep=(KeepRule(level="RF", tensor="psum", keep=True),)), r"no tensor named or with role 'psum'"),
        (Constraints(keep=(KeepRule(level="DRAM", tensor="input", keep=False),)), r"outermost level DRAM must keep"),
    ):
        with pytest.raises(SpecError, match=match):
            MapSpace(p, a, c)


def test_override_loosens_by_key() -> None:
    strict = Constraints(factors=(FactorRule(level="RF", dim="K", fixed=1),), min_utilization=0.5)
    loose = strict.override(Constraints(factors=(FactorRule(level="RF", dim="K"),)))
    assert loose.min_utilization == 0.5
    assert loose.factors == (FactorRule(level="RF", dim="K"),)
    p, a = small_conv(), small_arch()
    assert MapSpace(p, a, loose).size().total > MapSpace(p, a, strict.override(Constraints(min_utilization=0.0))).size().total


def test_arch_default_constraints_apply_and_can_be_loosened() -> None:
    p = small_conv()
    a = dataclasses.replace(small_arch(), constraints=(
        ("factors", [{"level": "RF", "dim": "K", "fixed": 1}]),
        ("orders", [{"level": "RF", "inner": ["S"]}]),
    ))
    sp = MapSpace(p, a)
    b = sp.sample(100, np.random.default_rng(1))
    assert (b.temporal[:, 2, p.dim_index("K")] == 1).all()
    loosened = MapSpace(p, a, Constraints(factors=(FactorRule(level="RF", dim="K"),)))
    b2 = loosened.sample(2000, np.random.default_rng(2))
    assert (b2.temporal[:, 2, p.dim_index("K")] > 1).any()
    assert (b2.order[:, 2, -1] == p.dim_index("S")).all()  # the order default still holds
    ignored = MapSpace(p, a, Constraints(ignore_arch_defaults=True))
    assert ignored.size().total == MapSpace(p, small_arch()).size().total


@pytest.mark.parametrize("name", DATAFLOWS)
def test_dataflow_presets(name: str) -> None:
    p, a = small_conv(), small_arch()
    c = dataflow(name, a)
    sp = MapSpace(p, a, c)
    b = sp.sample_valid(100, np.random.default_rng(3), method="repair")
    assert sp.check(b).valid.all()
    rel = p.relevance
    role = {"weight-stationary": 0, "input-stationary": 1, "output-stationary": 2}.get(name)
    if role is not None:
        # inside the PE (RF) the innermost loops are those the stationary tensor ignores
        irrelevant = [d for d in range(p.n_dims) if not rel[role, d]]
        assert (np.sort(b.order[:, 2, -len(irrelevant):], axis=1) == irrelevant).all()
        relevant = rel[role]
        assert (b.spatial[:, 1, ~relevant, :] == 1).all()
    else:
        assert (b.temporal[:, 2, p.dim_index("S")] == 3).all()
        assert (b.spatial[:, 1, p.dim_index("Q"), :] == 1).all()
    assert sp.size().total < MapSpace(p, a).size().total


def test_dataflow_in_yaml_and_unknown_name() -> None:
    a = small_arch()
    c = constraints_from_dict({"version": 1, "dataflow": "output-stationary", "min_utilization": 0.1}, arch=a)
    assert c.min_utilization == 0.1 and c.orders
    with pytest.raises(SpecError, match="unknown dataflow 'output-stationery'.*Did you mean 'output-stationary'"):
        dataflow("output-stationery", a)
