"""Property: any valid Arch survives arch_to_dict -> (YAML / JSON text or file) -> arch_from_dict."""

from __future__ import annotations

import json
import string

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap.arch import Arch, Compute, StorageLevel, arch_from_dict, arch_to_dict, load_arch_file, save_arch

names = st.text(string.ascii_letters + string.digits + "_-. :/ü", min_size=1, max_size=12).filter(
    lambda s: s.strip() != ""
)
energies = st.one_of(
    st.integers(0, 10_000),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
)
bandwidths = st.one_of(
    st.none(), st.floats(min_value=1e-3, max_value=1e5, allow_nan=False, allow_infinity=False), st.integers(1, 4096)
)
holds = st.one_of(
    st.none(),
    st.frozensets(st.sampled_from(["input", "weight", "output", "Weights", "A", "B", "C"]), max_size=4),
)


@st.composite
def levels(draw, name: str, outermost: bool) -> StorageLevel:
    return StorageLevel(
        name=name,
        capacity_words=None if outermost else draw(st.one_of(st.none(), st.integers(1, 2**40))),
        word_bits=draw(st.sampled_from([1, 4, 8, 16, 24, 32, 64])),
        block_words=draw(st.integers(1, 64)),
        read_energy_pj=draw(energies),
        write_energy_pj=draw(energies),
        read_bandwidth_words_per_cycle=draw(bandwidths),
        write_bandwidth_words_per_cycle=draw(bandwidths),
        holds=None if outermost else draw(holds),
        fanout_x=draw(st.integers(1, 256)),
        fanout_y=draw(st.integers(1, 256)),
        multicast=draw(st.booleans()),
        spatial_reduction=draw(st.booleans()),
    )


@st.composite
def archs(draw) -> Arch:
    level_names = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    lvls = tuple(draw(levels(n, i == 0)) for i, n in enumerate(level_names))
    compute = Compute(
        name=draw(names),
        energy_per_mac_pj=draw(energies),
        clock_hz=draw(st.floats(min_value=1.0, max_value=1e12, allow_nan=False, allow_infinity=False)),
        word_bits=draw(st.sampled_from([4, 8, 16, 32])),
    )
    return Arch(
        name=draw(names),
        levels=lvls,
        compute=compute,
        description=draw(st.text(max_size=40)),
    )


def _same(a: Arch, b: Arch) -> bool:
    return a == b and a.describe() == b.describe()


@settings(max_examples=60, deadline=None)
@given(archs())
def test_dict_yaml_json_round_trip(arch):
    d = arch_to_dict(arch)
    assert _same(arch_from_dict(d, "gen.yaml"), arch)
    assert _same(arch_from_dict(yaml.safe_load(yaml.safe_dump(d, sort_keys=False)), "gen.yaml"), arch)
    assert _same(arch_from_dict(json.loads(json.dumps(d)), "gen.json"), arch)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arch=archs(), suffix=st.sampled_from([".yaml", ".yml", ".json"]))
def test_file_round_trip(tmp_path, arch, suffix):
    path = tmp_path / f"arch{suffix}"
    save_arch(arch, path)
    assert _same(load_arch_file(path), arch)
