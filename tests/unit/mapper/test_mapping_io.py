from __future__ import annotations

import numpy as np
import pytest
import yaml

from accelmap import Mapping, SpecError
from accelmap.mapper.io import load_mapping, mapping_from_dict, mapping_to_dict, save_mapping
from accelmap.testing.examples import small_arch, small_conv, trivial_mapping, wrapping_factor_pair


def _mapping(p, a):
    m = trivial_mapping(p, a)
    t, s, o = m.temporal.copy(), m.spatial.copy(), m.order.copy()
    t[0, 1], s[1, 1, 0] = 2, 4
    o[0] = o[0][::-1]
    keep = m.keep.copy()
    keep[2, 1] = False
    return Mapping(temporal=t, spatial=s, order=o, keep=keep)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trip(tmp_path, suffix):
    p, a = small_conv(), small_arch()
    m = _mapping(p, a)
    path = tmp_path / f"m{suffix}"
    save_mapping(m, p, a, path)
    assert load_mapping(path, p, a) == m


def test_partial_order_and_defaults():
    p, a = small_conv(), small_arch()
    data = {"version": 1, "mapping": {"levels": [{"level": "DRAM", "temporal": dict(zip(p.dim_names, p.bounds.tolist(), strict=True)), "order": ["Q", "P"]}]}}
    m = mapping_from_dict(data, p, a)
    assert [p.dim_names[d] for d in m.order[0][:3]] == ["Q", "P", "N"]
    assert m.keep.all()


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d["mapping"]["levels"][0].update(tempral={}), r"m.yaml: mapping.levels\[0\].tempral: unknown key \(did you mean 'temporal'\?\); accepted keys"),
        (lambda d: d["mapping"]["levels"][0].update(level="L9"), r"levels\[0\].level = 'L9'; expected one of the levels"),
        (lambda d: d["mapping"]["levels"][0].update(temporal={"Z": 2}), r"levels\[0\].temporal.Z: unknown dimension"),
        (lambda d: d["mapping"]["levels"][0].update(temporal={"K": 0}), r"levels\[0\].temporal.K = 0; expected an int >= 1"),
        (lambda d: d.pop("version"), r"version = None; expected 1"),
        (lambda d: d["mapping"]["levels"][0].update(temporal={"KK": 2}),
         r"levels\[0\].temporal.KK: unknown dimension \(did you mean 'K'\?\); dims of"),
        (lambda d: d["mapping"]["levels"][0].update(order="KC"), r"levels\[0\].order = 'KC' \(a string\); expected a list of dim"),
        (lambda d: d.pop("mapping"), r"m.yaml: mapping is missing"),
    ],
)
def test_malformed(tmp_path, mutate, match):
    p, a = small_conv(), small_arch()
    data = mapping_to_dict(_mapping(p, a), p, a)
    mutate(data)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=match):
        load_mapping(path, p, a)


def test_bad_yaml_names_line(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nmapping: [\n")
    with pytest.raises(SpecError, match=r"m.yaml: line \d+"):
        load_mapping(path, small_conv(), small_arch())


def test_to_dict_omits_unit_factors():
    p, a = small_conv(), small_arch()
    d = mapping_to_dict(_mapping(p, a), p, a)
    assert d["mapping"]["levels"][1]["spatial_x"] == {"K": 4}
    assert "temporal" not in d["mapping"]["levels"][2]
    assert np.array_equal(mapping_from_dict(d, p, a).keep, _mapping(p, a).keep)


@pytest.mark.parametrize("second", ["wrap", "huge"])
def test_factors_past_int64_are_refused_with_the_dim_named(tmp_path, second):
    # N's bound is 1: factors a and b multiply to 1 in int64 arithmetic (a wrap-around) and
    # would pass every int64 check; a factor past int64 would not fit the arrays at all.
    p, a = small_conv(), small_arch()
    f1, f2 = wrapping_factor_pair()
    data = mapping_to_dict(_mapping(p, a), p, a)
    levels = data["mapping"]["levels"]
    levels[0].setdefault("temporal", {})["N"] = f1
    levels[2].setdefault("temporal", {})["N"] = f2 if second == "wrap" else 1 << 70
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    exact = f1 * (f2 if second == "wrap" else 1 << 70)
    with pytest.raises(SpecError, match=rf"m.yaml: mapping: the factors of dim N multiply to {exact} "
                                        rf"\(DRAM: {f1}, RF: \d+\), more than 2\^62"):
        load_mapping(path, p, a)


def test_timeloop_factors_past_int64_are_refused():
    from accelmap.mapper.timeloop import mapping_from_timeloop

    p, a = small_conv(), small_arch()
    f1, f2 = wrapping_factor_pair()
    rest = " ".join(f"{n}={b}" for n, b in zip(p.dim_names, p.bounds.tolist(), strict=True) if n != "N")
    data = {"mapping": [{"target": "DRAM", "type": "temporal", "factors": f"N={f1} {rest}"},
                        {"target": "RF", "type": "temporal", "factors": f"N={f2}"}]}
    with pytest.raises(SpecError, match=rf"t.yaml: mapping: the factors of dim N multiply to {f1 * f2}"):
        mapping_from_timeloop(data, p, a, "t.yaml")
    data["mapping"][1]["factors"] = "N=1"
    assert mapping_from_timeloop(data, p, a, "t.yaml").temporal[0, 0] == f1  # one large factor still reads


def test_validate_takes_exact_products():
    from accelmap.mapper.check import validate

    p, a = small_conv(), small_arch()
    m = trivial_mapping(p, a)
    f1, f2 = wrapping_factor_pair()
    t = m.temporal.copy()
    t[0, 0], t[2, 0] = f1, f2  # an int64 product of N's factors is 1, its bound
    # the public constructor refuses such factors (test_mapping_values.py); `validate` still
    # reports them for a mapping built past it
    with pytest.raises(SpecError, match=r"^mapping: the factors of dim 0 multiply to \d+ \(level 0: \d+, level 2: \d+\), more than 2\^62"):
        Mapping(temporal=t, spatial=m.spatial, order=m.order, keep=m.keep)
    msgs = validate(p, a, Mapping._trusted(t, m.spatial, m.order, m.keep))
    assert any(f"dim N: factors multiply to {f1 * f2}" in s for s in msgs), msgs
    assert validate(p, a, m) == []
