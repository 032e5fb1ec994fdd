from __future__ import annotations

import numpy as np
import pytest
import yaml

from accelmap import Mapping, SpecError
from accelmap.mapper.io import load_mapping, mapping_from_dict, mapping_to_dict, save_mapping
from accelmap.testing.examples import small_arch, small_conv, trivial_mapping


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
