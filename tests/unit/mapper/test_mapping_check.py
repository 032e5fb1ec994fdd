from __future__ import annotations

import numpy as np
import pytest

from accelmap import Mapping, MappingBatch, SpecError
from accelmap.mapper.check import Reason, check_batch, render_loop_nest, validate
from accelmap.testing.examples import small_arch, small_conv, trivial_mapping


def _legal():
    p, a = small_conv(), small_arch()
    m = trivial_mapping(p, a)
    t = m.temporal.copy()
    s = m.spatial.copy()
    # K: 2 at DRAM, 4 across X below GLB; C: 4 at RF
    t[0, p.dim_index("K")] = 2
    s[1, p.dim_index("K"), 0] = 4
    t[0, p.dim_index("C")] = 1
    t[2, p.dim_index("C")] = 4
    return p, a, Mapping(temporal=t, spatial=s, order=m.order, keep=m.keep)


def test_trivial_mapping_is_legal():
    p, a = small_conv(), small_arch()
    assert validate(p, a, trivial_mapping(p, a)) == []


def test_tiles_are_reverse_cumulative_products():
    p, a, m = _legal()
    tiles = m.tiles()
    assert tiles[0].tolist() == p.bounds.tolist()
    k = p.dim_index("K")
    assert tiles[1, k] == 4 and tiles[2, k] == 1
    assert tiles[2, p.dim_index("C")] == 4


def test_factor_product_message_names_levels_and_numbers():
    p, a, m = _legal()
    t = m.temporal.copy()
    t[0, p.dim_index("K")] = 3
    bad = Mapping(temporal=t, spatial=m.spatial, order=m.order, keep=m.keep)
    msgs = validate(p, a, bad)
    assert any("dim K: factors multiply to 12 (DRAM:3 x GLB:4), expected 8" in x for x in msgs)
    assert check_batch(p, a, bad.as_batch()).reason[0] == Reason.FACTORS


def test_capacity_message_with_sliding_window_input():
    p, a = small_conv(), small_arch(rf_words=16)
    m = trivial_mapping(p, a)
    t = m.temporal.copy()
    for d in ("P", "R"):
        t[0, p.dim_index(d)] = 1
        t[2, p.dim_index(d)] = p.bounds[p.dim_index(d)]
    bad = Mapping(temporal=t, spatial=m.spatial, order=m.order, keep=m.keep)
    msgs = validate(p, a, bad)
    # RF tile: Weights 3 (R), Inputs 8 rows (6 + 3 - 1), Outputs 6 (P) = 17 > 16
    assert msgs == ["level RF: tiles need 17 words (Weights 3, Inputs 8, Outputs 6); capacity is 16 words"]
    chk = check_batch(p, a, bad.as_batch())
    assert chk.reason[0] == Reason.CAPACITY and chk.level[0] == 2


def test_fanout_message():
    p, a, m = _legal()
    s = m.spatial.copy()
    t = m.temporal.copy()
    s[1, p.dim_index("K"), 0] = 8
    t[0, p.dim_index("K")] = 1
    bad = Mapping(temporal=t, spatial=s, order=m.order, keep=m.keep)
    msgs = validate(p, a, bad)
    assert msgs == ["level GLB: spatial X unrolling K=8 uses 8 instances; fanout X is 4"]
    assert check_batch(p, a, bad.as_batch()).reason[0] == Reason.FANOUT


def test_keep_and_order_checks():
    p, a, m = _legal()
    keep = m.keep.copy()
    keep[0, 0] = False
    order = m.order.copy()
    order[1] = 0
    bad = Mapping(temporal=m.temporal, spatial=m.spatial, order=order, keep=keep)
    msgs = validate(p, a, bad)
    assert any("not a permutation" in x for x in msgs)
    assert any("outermost level DRAM must keep Weights" in x for x in msgs)


def test_batch_ops_and_mask():
    p, a, m = _legal()
    good = m.as_batch()
    t = m.temporal.copy()
    t[0, 1] = 5
    bad = Mapping(temporal=t, spatial=m.spatial, order=m.order, keep=m.keep).as_batch()
    batch = MappingBatch.concat([good, bad, good])
    assert len(batch) == 3 and batch[2] == m
    chk = check_batch(p, a, batch)
    assert chk.valid.tolist() == [True, False, True]
    assert batch.take(np.array([0, 2])) == MappingBatch.from_mappings([m, m])
    assert check_batch(p, a, batch, allow_padding=True).valid.tolist() == [True, True, True]


def test_shape_errors():
    with pytest.raises(SpecError, match="spatial has shape"):
        MappingBatch(temporal=np.ones((1, 2, 3)), spatial=np.ones((1, 2, 3)), order=np.zeros((1, 2, 3)), keep=np.ones((1, 2, 1)))


def test_arrays_are_read_only():
    _, _, m = _legal()
    with pytest.raises(ValueError):
        m.temporal[0, 0] = 7


def test_loop_nest_rendering():
    p, a, m = _legal()
    text = render_loop_nest(p, a, m)
    assert "[DRAM]" in text and "spatial-X for K in [0:4)" in text and "for C in [0:4)" in text
