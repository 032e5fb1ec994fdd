"""Architecture presets: every one builds, has the documented shape and takes every problem."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from accelmap import SpecError, UnknownPluginError
from accelmap.arch import array_shape, preset, presets, systolic_array
from accelmap.arch.presets import SYSTOLIC_LEVEL_ROLES
from accelmap.workloads import batched_matmul, conv2d, fully_connected, matmul

REFERENCE = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference"

EXPECTED_MACS = {
    "eyeriss-like": 168,  # 14 x 12 PEs
    "simba-like": 16 * 8 * 8,  # 16 PEs x 8 vector MACs x 8 lanes
    "tpu-v1-like": 256 * 256,
    "nvdla-like": 64 * 32,  # Atomic-C x Atomic-K
    "edge-tpu-like": 64 * 64,
    "v100-sm": 8 * 64,  # 8 tensor cores x 4x4x4
    "a100-sm": 4 * 256,
    "mlu-like": 4 * 4096,  # 4 cores per cluster
    "systolic": 128 * 128,
}

PROBLEMS = [
    conv2d("conv", c=8, k=16, p=7, q=7, r=3, s=3),
    conv2d("dw", c=8, k=8, p=7, q=7, r=3, s=3, groups=8),
    conv2d("grouped", c=8, k=8, p=7, q=7, r=3, s=3, groups=2),
    matmul("mm", m=16, n=16, k=16),
    batched_matmul("bmm", b=2, m=8, n=8, k=8),
    fully_connected("fc", n=4, c=32, k=10),
]


def test_preset_list_is_sorted_and_complete():
    assert presets.presets() == sorted(EXPECTED_MACS)


@pytest.mark.parametrize("name", sorted(EXPECTED_MACS))
def test_preset_builds_with_expected_macs(name):
    arch = preset(name)
    assert arch.name == name
    assert arch.n_macs == EXPECTED_MACS[name]
    assert arch.levels[0].capacity_words is None, "outermost level is unbounded DRAM"
    assert arch.levels[0].holds is None, "outermost level holds every tensor"
    assert all(lv.capacity_words is not None for lv in arch.levels[1:])
    if name in ("systolic", "tpu-v1-like"):  # the systolic layout's default constraints
        assert set(dict(arch.constraints)) == {"keep", "spatial"}
    else:
        assert arch.constraints == ()
    assert arch.description
    assert arch.compute.energy_per_mac_pj > 0
    # DRAM is the most expensive level per word, and dearer than a MAC
    per_word = [lv.read_energy_pj / lv.block_words for lv in arch.levels]
    assert per_word[0] == max(per_word), per_word
    assert per_word[0] > arch.compute.energy_per_mac_pj


@pytest.mark.parametrize("name", sorted(EXPECTED_MACS))
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_every_preset_takes_every_problem(name, problem):
    assert preset(name).check_problem(problem) == []


def test_preset_is_a_fresh_equal_value():
    assert preset("eyeriss-like") == preset("eyeriss-like")
    assert hash(preset("tpu-v1-like")) == hash(preset("tpu-v1-like"))


def test_unknown_preset_suggests_close_names():
    with pytest.raises(UnknownPluginError, match=r"unknown architecture preset 'eyeris'.*Did you mean 'eyeriss-like'"):
        preset("eyeris")


def test_eyeriss_layout_follows_timeloop_exercise():
    arch = preset("eyeriss-like")
    assert arch.level_names == ("DRAM", "shared_glb", "ifmap_spad", "weights_spad", "psum_spad")
    assert arch.instances.tolist() == [1, 1, 168, 168, 168]
    glb = arch.levels[1]
    assert (glb.fanout_x, glb.fanout_y) == (14, 12)
    assert glb.capacity_words == 65536 and glb.word_bits == 16
    assert glb.read_bandwidth_words_per_cycle == 16
    assert glb.holds == frozenset({"input", "output"})
    assert 17 < glb.read_energy_pj / glb.block_words < 19.5  # ~18 pJ per 16-bit word
    assert [lv.holds for lv in arch.levels[2:]] == [{"input"}, {"weight"}, {"output"}]
    assert [lv.capacity_words for lv in arch.levels[2:]] == [12, 192, 16]
    dram = arch.levels[0]
    assert dram.read_energy_pj / dram.block_words == 128.0


@pytest.mark.parametrize("name", ["systolic", "tpu-v1-like"])
def test_systolic_layout(name):
    arch = preset(name)
    assert tuple(lv.holds for lv in arch.levels) == SYSTOLIC_LEVEL_ROLES
    rows, cols = array_shape(arch)
    assert arch.levels[3].fanout_x == cols and arch.levels[3].fanout_y == rows
    assert arch.instances[-1] == rows * cols
    assert arch.levels[-1].capacity_words == 3


def test_systolic_preset_uses_scale_sim_defaults():
    arch = preset("systolic")
    assert array_shape(arch) == (128, 128)
    # 64 kB SRAMs of 1-byte words, 10 words/cycle DRAM (scale.cfg)
    assert [lv.capacity_words for lv in arch.levels[1:4]] == [65536] * 3
    assert arch.levels[0].read_bandwidth_words_per_cycle == 10
    assert arch.compute.word_bits == 8


def test_systolic_array_parameters():
    arch = systolic_array(rows=32, cols=16, ifmap_sram_kb=8, filter_sram_kb=16, ofmap_sram_kb=4,
                          dram_bandwidth_words_per_cycle=None, word_bits=16)
    assert array_shape(arch) == (32, 16)
    assert arch.n_macs == 512
    assert [lv.capacity_words for lv in arch.levels[1:4]] == [2048, 8192, 4096]
    assert arch.levels[0].read_bandwidth_words_per_cycle is None
    assert arch.name == "systolic-32x16"


@pytest.mark.parametrize("kwargs", [{"rows": 0}, {"cols": 2.5}, {"word_bits": True}, {"ifmap_sram_kb": -1}])
def test_systolic_array_rejects_bad_arguments(kwargs):
    with pytest.raises(SpecError, match=rf"systolic_array: {next(iter(kwargs))} = "):
        systolic_array(**kwargs)


def test_tpu_figures():
    arch = preset("tpu-v1-like")
    acc, wfifo, ub = arch.levels[1:4]
    assert acc.capacity_words * acc.word_bits // 8 == 4 * 2**20  # 4 MiB accumulators
    assert ub.capacity_words * ub.word_bits // 8 == 24 * 2**20  # 24 MiB unified buffer
    assert wfifo.capacity_words == 4 * 64 * 1024
    # 34 GB/s at 700 MHz, 1-byte words
    assert arch.levels[0].read_bandwidth_words_per_cycle == pytest.approx(34e9 / 700e6, rel=1e-4)
    assert arch.compute.clock_hz == 700e6


@pytest.mark.parametrize(
    ("name", "n_sms", "hbm", "clock", "smem_kb", "rf_kb"),
    [("v100-sm", 80, 900e9, 1.53e9, 96, 256), ("a100-sm", 108, 1555e9, 1.41e9, 164, 256)],
)
def test_gpu_sm_apportioning(name, n_sms, hbm, clock, smem_kb, rf_kb):
    arch = preset(name)
    hbm_level = arch.levels[0]
    assert hbm_level.read_bandwidth_words_per_cycle == pytest.approx(hbm / n_sms / clock / 2, rel=1e-4)
    smem = arch.levels[arch.level_index("shared_mem")]
    assert smem.capacity_words * 2 == smem_kb * 1024
    rf_i = arch.level_index("register_file")
    rf = arch.levels[rf_i]
    assert rf.capacity_words * 2 * arch.instances[rf_i] == rf_kb * 1024
    assert arch.compute.clock_hz == clock


def _eyeriss_cases():
    root = REFERENCE / "timeloop" / "cases"
    return sorted(root.glob("eyeriss_like__*/expected.json")) if root.is_dir() else []


@pytest.mark.skipif(not _eyeriss_cases(), reason="../shared/reference/timeloop is absent")
def test_eyeriss_energies_reproduce_timeloop_reference():
    """Per-level energies of the Timeloop runs, recomputed from their access counts with the
    preset's per-action energies: ceil(count / block) x energy, reads -> read, fills and
    updates -> write (the reference README's counting rule)."""
    arch = preset("eyeriss-like")
    by_name = {lv.name: lv for lv in arch.levels}
    checked = 0
    for path in _eyeriss_cases():
        case = json.loads(path.read_text())
        for lv in case["levels"]:
            if lv["name"] == "mac":
                assert arch.compute.energy_per_mac_pj * lv["stats"]["Computes (total)"] == pytest.approx(
                    lv["stats"]["Energy (total)"], rel=1e-9
                )
                continue
            level = by_name.get(lv["name"])
            if level is None:
                continue
            assert lv["specs"]["Block size"] == level.block_words
            for ds in lv["dataspaces"].values():
                inst = ds["utilized_instances_max"]
                reads = ds["reads_per_instance"]
                writes = ds["fills_per_instance"] + ds["updates_per_instance"]
                b = level.block_words
                energy = inst * (
                    math.ceil(reads / b) * level.read_energy_pj + math.ceil(writes / b) * level.write_energy_pj
                )
                assert energy == pytest.approx(ds["energy_total_pJ"], rel=2e-4, abs=1.0), (path.parent.name, lv["name"])
                checked += 1
    assert checked > 20
