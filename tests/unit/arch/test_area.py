"""The area model against the published figures its presets cite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelmap.arch.area import (
    arch_area,
    area_mm2,
    energy_scale,
    level_area_um2,
    mac_area_um2,
    storage_kind,
    with_level,
    without_level,
)
from accelmap.arch.presets import preset, presets
from accelmap.errors import SpecError

REF = Path(__file__).resolve().parents[4] / "shared" / "reference" / "timeloop" / "cases"
EYERISS_CASE = REF / "eyeriss_like__L0_alexnet_conv1__exercise_ref" / "expected.json"


def _accelergy_eyeriss_um2() -> dict[str, float]:
    """Per-level area totals of the eyeriss_like exercise as Timeloop/Accelergy printed them."""
    text = (EYERISS_CASE.parent / "timeloop-model.stats.txt").read_text()
    out: dict[str, float] = {}
    name = None
    instances = 1
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("=== ") and s.endswith(" ==="):
            name = s.strip("= ").strip()
        elif s.startswith("Instances") and name:
            instances = int(s.split(":")[1].split()[0])
        elif s.startswith("Area (total)") and name:
            out[name] = float(s.split(":")[1].split()[0])
        elif s.startswith("Area ") and ":" in s and name and name not in out:
            out[name] = float(s.split(":")[1].split()[0]) * instances
    return out


@pytest.mark.skipif(not EYERISS_CASE.exists(), reason="reference outputs not present")
def test_eyeriss_like_matches_accelergy_table():
    ref = _accelergy_eyeriss_um2()
    ours = arch_area(preset("eyeriss-like")).by_name()
    for level in ("shared_glb", "ifmap_spad", "weights_spad", "psum_spad"):
        assert ours[level] * 1e6 == pytest.approx(ref[level], rel=0.01), level
    # MACs come from Horowitz's table, not Accelergy's: within 10%
    assert ours["MAC"] * 1e6 == pytest.approx(ref["mac"], rel=0.10)
    total_ref = sum(v for k, v in ref.items() if k != "DRAM") * 1e-6
    assert area_mm2(preset("eyeriss-like")) == pytest.approx(total_ref, rel=0.02)


def test_tpu_v1_buffers_match_published_floorplan():
    # Jouppi et al., ISCA 2017: die < 331 mm^2 at 28 nm; the floor plan gives the unified
    # buffer 29% and the accumulators 6% of it. The model predicts the SRAMs from bit-cell
    # scaling alone (calibrated at 45 nm on another chip's table).
    die = 331.0
    ours = arch_area(preset("tpu-v1-like")).by_name()
    assert ours["unified_buffer"] == pytest.approx(0.29 * die, rel=0.20)
    assert ours["unified_buffer"] + ours["accumulators"] == pytest.approx(0.35 * die, rel=0.25)
    assert area_mm2(preset("tpu-v1-like")) < die


def test_every_preset_has_a_node_and_a_positive_area():
    for name in presets():
        a = preset(name)
        assert a.node_nm is not None
        b = arch_area(a)
        assert b.total_mm2 > 0 and b.node_nm == a.node_nm


def test_area_grows_with_capacity_bandwidth_and_macs():
    a = preset("eyeriss-like")
    glb = a.levels[1]
    bigger = with_level(a, "shared_glb", capacity_words=glb.capacity_words * 2)
    assert area_mm2(bigger) > area_mm2(a)
    wider = with_level(a, "shared_glb", read_bandwidth_words_per_cycle=64.0)
    assert area_mm2(wider) > area_mm2(a)
    more = with_level(a, "shared_glb", fanout_x=28)
    assert area_mm2(more) > 1.5 * (area_mm2(a) - arch_area(a).by_name()["shared_glb"])
    assert mac_area_um2(16) > mac_area_um2(8)


def test_node_scaling_and_unknown_node():
    a = preset("eyeriss-like")
    assert area_mm2(a, 28) < area_mm2(a, 45) < area_mm2(a, 65)
    with pytest.raises(SpecError, match="node_nm = 3"):
        area_mm2(a, 3)


def test_kinds():
    a = preset("eyeriss-like")
    assert [storage_kind(lv) for lv in a.levels] == ["off-chip", "sram", "regfile", "sram", "regfile"]
    assert level_area_um2(a.levels[0]) == 0.0


def test_energy_follows_capacity_by_the_preset_rule():
    a = preset("eyeriss-like")
    b = with_level(a, "shared_glb", capacity_words=16384)
    # a quarter of the capacity: half the per-bit energy (square-root rule)
    assert b.levels[1].read_energy_pj == pytest.approx(a.levels[1].read_energy_pj / 2, rel=1e-4)
    c = with_level(a, "shared_glb", block_words=8)
    assert c.levels[1].read_energy_pj == pytest.approx(2 * a.levels[1].read_energy_pj, rel=1e-4)
    # explicit energies win; DRAM (unbounded) keeps its energy
    d = with_level(a, "shared_glb", capacity_words=16384, read_energy_pj=1.0)
    assert d.levels[1].read_energy_pj == 1.0
    assert energy_scale(a.levels[0], a.levels[0]) == 1.0
    with pytest.raises(SpecError, match="do not exist"):
        with_level(a, "shared_glb", capacity=3)


def test_without_level_keeps_macs():
    a = preset("simba-like")
    b = without_level(a, "PEAccuBuffer")
    assert b.n_macs == a.n_macs and b.n_levels == a.n_levels - 1
    with pytest.raises(SpecError, match="outermost"):
        without_level(a, "DRAM")


def test_breakdown_table_and_json_ready():
    text = arch_area(preset("eyeriss-like")).describe()
    assert "shared_glb" in text and "mm^2" in text
    json.dumps(arch_area(preset("eyeriss-like")).by_name())
