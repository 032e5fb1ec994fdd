"""The arch file format: round trips, the malformed-input corpus, and load_arch dispatch."""

from __future__ import annotations

import json
import sys
import types

import pytest
import yaml

from accelmap import SpecError, UnknownPluginError
from accelmap.arch import (
    Arch,
    arch_from_dict,
    arch_to_dict,
    load_arch,
    load_arch_file,
    preset,
    presets,
    save_arch,
)

GOOD = """\
version: 1
name: tiny
compute: {energy_per_mac_pj: 1, clock_hz: 1e9}
levels:
- {name: DRAM, capacity_words: null, read_energy_pj: 200, write_energy_pj: 200}
- name: GLB
  capacity_words: 1024
  read_energy_pj: 6.0
  holds: [input, Outputs]
  fanout_x: 4
  fanout_y: 2
- {name: RF, capacity_words: 16, read_energy_pj: 1.0e-1}
"""


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", presets.presets())
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_every_preset_round_trips_through_files(tmp_path, name, suffix):
    arch = preset(name)
    path = tmp_path / f"arch{suffix}"
    save_arch(arch, path)
    again = load_arch(str(path))
    assert again == arch
    assert again.describe() == arch.describe()


def test_dict_round_trip_and_version():
    arch = preset("simba-like")
    d = arch_to_dict(arch)
    assert d["version"] == 1
    assert arch_from_dict(d, "x.yaml") == arch
    assert arch_from_dict(json.loads(json.dumps(d)), "x.json") == arch
    assert arch_from_dict(yaml.safe_load(yaml.safe_dump(d)), "x.yaml") == arch


def test_good_file_defaults_and_floats(tmp_path):
    arch = load_arch_file(_write(tmp_path, "tiny.yaml", GOOD))
    assert isinstance(arch, Arch)
    assert arch.compute.clock_hz == 1e9  # `1e9` is a float, not the string "1e9"
    assert arch.levels[2].read_energy_pj == pytest.approx(0.1)
    assert arch.levels[1].holds == frozenset({"input", "Outputs"})
    assert arch.levels[0].holds is None
    assert arch.n_macs == 8
    assert arch.levels[2].word_bits == 16 and arch.levels[2].block_words == 1


def test_name_defaults_to_file_stem(tmp_path):
    arch = load_arch_file(_write(tmp_path, "my_array.yaml", GOOD.replace("name: tiny\n", "")))
    assert arch.name == "my_array"


def test_constraints_round_trip():
    d = arch_to_dict(preset("eyeriss-like"))
    d["constraints"] = {"dataflow": "row-stationary"}
    arch = arch_from_dict(d, "c.yaml")
    assert arch.constraints == (("dataflow", "row-stationary"),)
    assert arch_to_dict(arch)["constraints"] == {"dataflow": "row-stationary"}


# --- malformed corpus: (file name, text, expected message) ----------------------------------
LEVELS = "levels:\n- {name: DRAM, capacity_words: null}\n"
COMPUTE = "compute: {energy_per_mac_pj: 1}\n"
CORPUS = [
    ("syntax.yaml", "version: 1\nlevels: [\n  - name: a\n", r"syntax\.yaml: line 3, column 3: invalid YAML"),
    ("syntax.json", '{"version": 1,\n "name": }', r"syntax\.json: line 2, column 10: invalid JSON"),
    ("nover.yaml", COMPUTE + LEVELS, r"nover\.yaml: version = None; expected 1"),
    ("ver2.yaml", "version: 2\n" + COMPUTE + LEVELS, r"ver2\.yaml: version = 2; expected 1"),
    ("list.yaml", "- 1\n- 2\n", r"list\.yaml: the top level is a list \(\[1, 2\]\); expected an arch file with keys version, name"),
    ("topkey.yaml", "version: 1\n" + COMPUTE + "level: []\n",
     r"topkey\.yaml: level: unknown key \(did you mean 'levels'\?\); accepted keys: version, name,"),
    ("unknown.yaml", "version: 1\n" + COMPUTE + LEVELS + "- {name: RF, capacity_word: 3}\n",
     r"unknown\.yaml: levels\[1\]\.capacity_word: unknown key \(did you mean 'capacity_words'\?\); "
     r"accepted keys: name, capacity_words,"),
    ("zero.yaml", "version: 1\n" + COMPUTE + LEVELS + "- {name: RF, capacity_words: 0}\n",
     r"zero\.yaml: levels\[1\]\.capacity_words = 0; expected an int >= 1"),
    ("float_cap.yaml", "version: 1\n" + COMPUTE + LEVELS + "- {name: RF, capacity_words: 2.5}\n",
     r"levels\[1\]\.capacity_words = 2\.5 \(a float\); expected an int >= 1"),
    ("nocap.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM}\n",
     r"nocap\.yaml: levels\[0\]\.capacity_words is missing; expected an int >= 1, or null for unbounded"),
    ("negative.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, read_energy_pj: -1}\n",
     r"negative\.yaml: levels\[0\]\.read_energy_pj = -1; expected a number >= 0"),
    ("nan.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, write_energy_pj: .nan}\n",
     r"levels\[0\]\.write_energy_pj = nan; expected a number >= 0"),
    ("strenergy.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, read_energy_pj: '5'}\n",
     r"levels\[0\]\.read_energy_pj = '5' \(a string\); expected a number >= 0"),
    ("bw0.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, read_bandwidth_words_per_cycle: 0}\n",
     r"levels\[0\]\.read_bandwidth_words_per_cycle = 0; expected a number > 0, or null for unlimited"),
    ("fanout.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, fanout_x: 0}\n",
     r"levels\[0\]\.fanout_x = 0; expected an int >= 1"),
    ("bool.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, multicast: 1}\n",
     r"levels\[0\]\.multicast = 1 \(an int\); expected true or false"),
    ("holds.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, holds: input}\n",
     r"levels\[0\]\.holds = 'input'; expected a list of tensor names or roles"),
    ("holds_dup.yaml", "version: 1\n" + COMPUTE + "levels:\n- {name: DRAM, capacity_words: null, holds: [input, input]}\n",
     r"levels\[0\]\.holds lists \['input'\] more than once"),
    ("noname.yaml", "version: 1\n" + COMPUTE + "levels:\n- {capacity_words: null}\n",
     r"levels\[0\]\.name is missing; expected a non-empty string"),
    ("levelnotdict.yaml", "version: 1\n" + COMPUTE + "levels:\n- DRAM\n",
     r"levels\[0\] is a str \('DRAM'\); expected a storage level"),
    ("nolevels.yaml", "version: 1\n" + COMPUTE + "levels: []\n",
     r"nolevels\.yaml: levels = \[\]; expected a non-empty list"),
    ("dup.yaml", "version: 1\n" + COMPUTE + LEVELS + "- {name: DRAM, capacity_words: 4}\n",
     r"dup\.yaml: .*duplicate level names \['DRAM'\]"),
    ("nocompute.yaml", "version: 1\n" + LEVELS, r"nocompute\.yaml: compute is missing"),
    ("computekey.yaml", "version: 1\ncompute: {energy_per_mac: 1}\n" + LEVELS,
     r"computekey\.yaml: compute\.energy_per_mac: unknown key \(did you mean 'energy_per_mac_pj'\?\)"),
    ("negmac.yaml", "version: 1\ncompute: {energy_per_mac_pj: -0.5}\n" + LEVELS,
     r"compute\.energy_per_mac_pj = -0\.5; expected a number >= 0"),
    ("clock.yaml", "version: 1\ncompute: {energy_per_mac_pj: 1, clock_hz: 0}\n" + LEVELS,
     r"compute\.clock_hz = 0; expected a number > 0"),
    ("desc.yaml", "version: 1\ndescription: [a]\n" + COMPUTE + LEVELS, r"desc\.yaml: description = \['a'\]; expected a string"),
]


@pytest.mark.parametrize(("fname", "text", "message"), CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_corpus(tmp_path, fname, text, message):
    path = _write(tmp_path, fname, text)
    with pytest.raises(SpecError, match=message):
        load_arch(str(path))


def test_timeloop_tree_given_to_arch_from_dict_says_what_to_do():
    with pytest.raises(SpecError, match=r"a Timeloop arch file .*load_arch_file"):
        arch_from_dict({"architecture": {"version": 0.4}}, "t.yaml")


# --- load_arch dispatch ----------------------------------------------------------------------
def test_load_arch_preset_name():
    assert load_arch("eyeriss-like") == preset("eyeriss-like")


def test_load_arch_unknown_name():
    with pytest.raises(UnknownPluginError, match=r"unknown architecture preset 'tpu-v1'.*Did you mean 'tpu-v1-like'"):
        load_arch("tpu-v1")


def test_load_arch_missing_file(tmp_path):
    with pytest.raises(SpecError, match=r"no such arch file"):
        load_arch(str(tmp_path / "nope.yaml"))
    with pytest.raises(SpecError, match=r"nope\.yaml: no such file"):
        load_arch_file(tmp_path / "nope.yaml")


def test_energy_table_only_for_timeloop_files(tmp_path):
    with pytest.raises(SpecError, match=r"preset; an energy reference table applies only"):
        load_arch("eyeriss-like", energy="ERT.yaml")
    path = _write(tmp_path, "tiny.yaml", GOOD)
    with pytest.raises(SpecError, match=r"applies only to a Timeloop arch file"):
        load_arch(str(path), energy="ERT.yaml")


def test_timeloop_files_dispatch_to_the_importer(tmp_path, monkeypatch):
    calls = []
    fake = types.ModuleType("accelmap.arch.timeloop")

    def arch_from_timeloop(data, source, ert=None):
        calls.append((data, source, ert))
        return preset("eyeriss-like")

    fake.arch_from_timeloop = arch_from_timeloop
    monkeypatch.setitem(sys.modules, "accelmap.arch.timeloop", fake)
    arch_file = _write(tmp_path, "arch.yaml", "architecture:\n  version: 0.3\n  subtree: []\n")
    ert_file = _write(tmp_path, "ERT.yaml", "ERT:\n  version: 0.3\n  tables: []\n")
    assert load_arch(str(arch_file), energy=str(ert_file)) == preset("eyeriss-like")
    assert calls[-1] == ({"architecture": {"version": 0.3, "subtree": []}}, str(arch_file),
                         {"ERT": {"version": 0.3, "tables": []}})
    load_arch_file(arch_file)
    assert calls[-1][2] is None
    bad_ert = _write(tmp_path, "bad_ert.yaml", "ERT: [\n")
    with pytest.raises(SpecError, match=r"bad_ert\.yaml: line \d+, column \d+: invalid YAML"):
        load_arch_file(arch_file, energy=bad_ert)
