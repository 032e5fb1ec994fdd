from __future__ import annotations

import pytest

from accelmap import SpecError, StorageLevel
from accelmap.testing.examples import small_arch, small_conv


def test_instances_and_macs():
    a = small_arch(fanout=(4, 2))
    assert a.instances.tolist() == [1, 1, 8]
    assert a.n_macs == 8
    assert a.fanouts.tolist() == [[1, 1], [4, 2], [1, 1]]


def test_holds_by_role_and_name():
    a = small_arch()
    lv = StorageLevel(name="WB", capacity_words=8, holds=frozenset({"weight", "Outputs"}))
    import dataclasses

    a2 = dataclasses.replace(a, levels=a.levels[:2] + (lv,))
    mask = a2.holds_mask(small_conv())
    assert mask[2].tolist() == [True, False, True]
    assert a2.check_problem(small_conv()) == []


def test_zero_capacity_message():
    with pytest.raises(SpecError, match=r"capacity_words = 0; expected an int >= 1"):
        StorageLevel(name="GLB", capacity_words=0)


def test_negative_energy_and_fanout_are_all_reported():
    with pytest.raises(SpecError) as err:
        StorageLevel(name="GLB", capacity_words=8, read_energy_pj=-1, fanout_x=0)
    assert "read_energy_pj" in str(err.value) and "fanout_x" in str(err.value)


def test_outermost_must_hold_everything():
    import dataclasses

    a = small_arch()
    dram = dataclasses.replace(a.levels[0], holds=frozenset({"weight"}))
    a2 = dataclasses.replace(a, levels=(dram,) + a.levels[1:])
    msgs = a2.check_problem(small_conv())
    assert any("outermost level DRAM" in m for m in msgs)


def test_describe_has_units():
    text = small_arch().describe()
    assert "unbounded" in text and "1,024 w" in text and "pJ" in text
