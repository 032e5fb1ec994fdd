"""Lower bounds: compulsory traffic, minimum compute cycles, energy floor."""

from __future__ import annotations

import math

import numpy as np

from accelmap.mapper.constraints import Constraints, KeepRule
from accelmap.mapper.lower_bounds import lower_bounds
from accelmap.mapper.space import MapSpace
from accelmap.testing.examples import small_arch, small_conv


def test_defaults_to_outermost_level() -> None:
    p, a = small_conv(), small_arch()
    lb = lower_bounds(p, a)
    sizes = p.tensor_sizes()
    np.testing.assert_array_equal(lb.tensor_words, sizes)
    np.testing.assert_array_equal(lb.compulsory_words[0], sizes)
    assert not lb.compulsory_words[1:].any()
    assert lb.min_compute_cycles == math.ceil(p.macs / a.n_macs)
    out = p.output_index
    dram = a.levels[0]
    expect = p.macs * a.compute.energy_per_mac_pj + (
        (sizes.sum() - sizes[out]) * dram.read_energy_pj + sizes[out] * dram.write_energy_pj) / dram.block_words
    assert math.isclose(lb.min_energy_pj, expect)


def test_forced_keep_adds_inner_traffic() -> None:
    p, a = small_conv(), small_arch()
    free = MapSpace(p, a).lower_bounds()
    forced = MapSpace(p, a, Constraints(keep=(KeepRule(level="RF", tensor="weight", keep=True),))).lower_bounds()
    w = p.tensor_index("weight")
    assert forced.compulsory_words[2, w] == p.tensor_sizes()[w]
    assert forced.min_energy_pj > free.min_energy_pj
    assert "RF: Weights" in forced.describe(p, a)


def test_no_sampled_mapping_beats_the_cycle_floor() -> None:
    p, a = small_conv(), small_arch()
    sp = MapSpace(p, a)
    b = sp.sample_valid(500, np.random.default_rng(0))
    steps = b.temporal.reshape(len(b), -1).prod(axis=1)
    assert (steps >= sp.lower_bounds().min_compute_cycles).all()
