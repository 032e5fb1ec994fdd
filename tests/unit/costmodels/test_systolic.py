"""Unit tests of the systolic cost model: SCALE-Sim's formulas on arrays of any shape,
dataflows from the PE level's keep, axes from the spatial unrolling, invalid shapes,
stalls, energy and the conformance checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelmap.arch.presets import preset, systolic_array
from accelmap.costmodels.systolic import Dataflow, SystolicModel, systolic_layout
from accelmap.costmodels.systolic_variants import scalesim_mapping
from accelmap.mapper.check import Reason
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.testing.costmodel_checks import check_cost_model
from accelmap.testing.examples import small_arch, small_conv, trivial_mapping
from accelmap.workloads.builders import batched_matmul, conv2d, matmul

MODEL = SystolicModel()


def _arch(rows: int, cols: int, kb: int = 64, bw: float | None = None):
    return systolic_array(rows, cols, kb, kb, kb, dram_bandwidth_words_per_cycle=bw)


def _hand(m: int, n: int, k: int, rows: int, cols: int, df: str) -> dict[str, int]:
    """SCALE-Sim's formulas for a GEMM (ifmap M x K, filter K x N), written out by hand."""
    sr, sc, t = {"os": (m, n, k), "ws": (k, n, m), "is": (k, m, n)}[df]
    fr, fc = math.ceil(sr / rows), math.ceil(sc / cols)
    folds = fr * fc
    per_fold = t + rows + cols - 2 if df == "os" else 2 * rows + cols + t - 2
    reads = {
        "os": (fc * sr * t, fr * sc * t, sr * sc + folds * (rows + cols)),
        "ws": (fc * t * sr, sr * sc, fr * t * sc),
        "is": (sr * sc, fc * t * sr, fr * sc * t),
    }[df]
    return {"cycles": folds * per_fold - 1, "ifmap": reads[0], "filter": reads[1], "ofmap": reads[2],
            "folds": folds}


@pytest.mark.parametrize("df", ["os", "ws", "is"])
@pytest.mark.parametrize(("rows", "cols"), [(8, 8), (4, 16), (16, 4), (3, 5), (32, 32), (1, 1)])
@pytest.mark.parametrize(("m", "n", "k"), [(20, 13, 30), (64, 64, 64), (7, 100, 3)])
def test_gemm_matches_scalesim_formulas_on_any_array(df, rows, cols, m, n, k):
    prob = matmul("g", m=m, n=n, k=k, word_bits=8)
    arch = _arch(rows, cols)
    s = MODEL.stats(prob, arch, scalesim_mapping(prob, arch, df))
    want = _hand(m, n, k, rows, cols, df)
    assert s.valid[0]
    assert int(s.total_cycles[0]) == want["cycles"]
    assert int(s.folds[0]) == want["folds"]
    assert int(s.sram_reads[0, 0]) == want["ifmap"]
    assert int(s.sram_reads[0, 1]) == want["filter"]
    assert int(s.sram_writes[0]) == want["ofmap"]


def test_hand_computed_literals_8x8():
    """M=20, N=13, K=30 on 8 x 8, worked by hand from SCALE-Sim's demand matrices."""
    prob = matmul("g", m=20, n=13, k=30, word_bits=8)
    arch = _arch(8, 8)
    got = {df: MODEL.stats(prob, arch, scalesim_mapping(prob, arch, df)).report(0) for df in ("os", "ws", "is")}
    # OS: 3 x 2 folds of 30 + 8 + 8 - 2 = 44 cycles; ofmap writes 260 + 6 folds x 16.
    assert got["os"]["total_cycles"] == 263
    assert got["os"]["sram_reads"] == {"ifmap": 1200, "filter": 1170}
    assert got["os"]["sram_writes"] == {"ofmap": 356}
    # WS: 4 x 2 folds of 2*8 + 8 + 20 - 2 = 42 cycles.
    assert got["ws"]["total_cycles"] == 335
    assert got["ws"]["sram_reads"] == {"ifmap": 1200, "filter": 390}
    assert got["ws"]["sram_writes"] == {"ofmap": 1040}
    # IS: 4 x 3 folds of 2*8 + 8 + 13 - 2 = 35 cycles.
    assert got["is"]["total_cycles"] == 419
    assert got["is"]["sram_reads"] == {"ifmap": 600, "filter": 1170}
    assert got["is"]["sram_writes"] == {"ofmap": 1040}
    # mapping efficiency: used PEs / (folds x 64)
    assert got["os"]["mapping_efficiency_pct"] == pytest.approx(100 * 260 / (6 * 64))


def test_conv_uses_ceil_output_and_im2col_view():
    """Conv as SCALE-Sim sees it: Sr = ofmap pixels, Sc = filters, T = R*S*C."""
    prob = conv2d("c", c=3, k=10, p=5, q=5, r=3, s=3, word_bits=8)
    arch = _arch(8, 4)
    s = MODEL.stats(prob, arch, scalesim_mapping(prob, arch, "os"))
    sr, sc, t = 25, 10, 27
    fr, fc = math.ceil(sr / 8), math.ceil(sc / 4)
    assert int(s.total_cycles[0]) == fr * fc * (t + 8 + 4 - 2) - 1
    assert int(s.sram_reads[0, 0]) == fc * sr * t
    assert int(s.dram_reads[0, 0]) == 7 * 7 * 3  # fits the SRAM: each ifmap word once
    assert int(s.dram_writes[0]) == sr * sc


def test_dataflow_comes_from_the_pe_level_keep():
    prob = matmul("g", m=40, n=24, k=16, word_bits=8)
    arch = _arch(8, 8)
    for df in Dataflow:
        s = MODEL.stats(prob, arch, scalesim_mapping(prob, arch, df))
        assert int(s.dataflow[0]) == int(df)


def test_axes_follow_the_spatial_unrolling():
    """Transposing OS (filters on rows, pixels on columns) swaps the fold counts."""
    prob = matmul("g", m=40, n=12, k=16, word_bits=8)
    arch = _arch(8, 4)
    base = scalesim_mapping(prob, arch, "os")[0]
    lay, _ = systolic_layout(prob, arch)
    sp = base.spatial.copy()
    a = lay.array_level
    m_, n_ = prob.dim_index("M"), prob.dim_index("N")
    sp[a, m_] = (4, 1)  # M on X (columns)
    sp[a, n_] = (1, 8)  # N on Y (rows)
    t = np.ones_like(base.temporal)
    t[0] = [math.ceil(40 / 4), math.ceil(12 / 8), 16]
    trans = Mapping(temporal=t, spatial=sp, order=base.order, keep=base.keep)
    s = MODEL.stats(prob, arch, trans.as_batch())
    assert s.valid[0]
    assert (int(s.row_folds[0]), int(s.col_folds[0])) == (math.ceil(12 / 8), math.ceil(40 / 4))
    assert int(s.sram_reads[0, 0]) == math.ceil(12 / 8) * 40 * 16  # ifmap read once per row fold


def test_partial_unrolling_uses_fewer_pes():
    prob = matmul("g", m=64, n=64, k=8, word_bits=8)
    arch = _arch(16, 16)
    full = scalesim_mapping(prob, arch, "os")[0]
    lay, _ = systolic_layout(prob, arch)
    sp = full.spatial.copy()
    sp[lay.array_level, prob.dim_index("M"), 1] = 8  # 8 of 16 rows
    t = full.temporal.copy()
    t[0, prob.dim_index("M")] = 8
    half = Mapping(temporal=t, spatial=sp, order=full.order, keep=full.keep)
    s_full = MODEL.stats(prob, arch, full.as_batch())
    s_half = MODEL.stats(prob, arch, half.as_batch())
    assert int(s_half.row_folds[0]) == 2 * int(s_full.row_folds[0])
    assert s_half.mapping_efficiency[0] == pytest.approx(0.5 * s_full.mapping_efficiency[0])


def test_invalid_rows_say_model():
    prob = matmul("g", m=32, n=32, k=32, word_bits=8)
    arch = _arch(8, 8)
    good = scalesim_mapping(prob, arch, "ws")[0]
    lay, _ = systolic_layout(prob, arch)
    keep2 = good.keep.copy()
    keep2[lay.pe_level, :] = True  # PEs keep every tensor and nothing is unrolled: no dataflow
    ones = np.ones_like(good.spatial)
    t1 = good.temporal.copy()
    t1[0] = prob.bounds
    sp = good.spatial.copy()
    sp[lay.array_level, prob.dim_index("M"), 1] = 8  # WS streams M; unrolling it is not systolic
    sp[lay.array_level, prob.dim_index("K"), 1] = 1
    t = good.temporal.copy()
    t[0, prob.dim_index("M")] = 4
    t[0, prob.dim_index("K")] = 32
    bad_keep = Mapping(temporal=t1, spatial=ones, order=good.order, keep=keep2)
    bad_axes = Mapping(temporal=t, spatial=sp, order=good.order, keep=good.keep)
    batch = MappingBatch.from_mappings([good, bad_keep, bad_axes])
    m = MODEL.evaluate(prob, arch, batch)
    assert m.valid.tolist() == [True, False, False]
    assert m.reason[1] == Reason.MODEL and m.reason[2] == Reason.MODEL
    assert np.isinf(m.cycles[1:]).all()
    assert "keeps" in MODEL.explain(prob, arch, bad_keep)[0]
    assert "WS" in MODEL.explain(prob, arch, bad_axes)[0]
    assert MODEL.explain(prob, arch, good) == []


def test_unrolled_classes_name_the_dataflow_when_keep_does_not():
    prob = matmul("g", m=32, n=24, k=16, word_bits=8)
    arch = _arch(8, 8)
    lay, _ = systolic_layout(prob, arch)
    for df in Dataflow:
        m = scalesim_mapping(prob, arch, df)[0]
        keep = m.keep.copy()
        keep[lay.pe_level, :] = True
        s_keep = MODEL.stats(prob, arch, m.as_batch())
        s_all = MODEL.stats(prob, arch, Mapping(temporal=m.temporal, spatial=m.spatial, order=m.order,
                                                keep=keep).as_batch())
        assert int(s_all.dataflow[0]) == int(df)
        assert int(s_all.total_cycles[0]) == int(s_keep.total_cycles[0])


def test_not_a_systolic_arch_is_invalid_with_reasons():
    prob = small_conv()
    arch = small_arch()
    batch = trivial_mapping(prob, arch).as_batch()
    m = MODEL.evaluate(prob, arch, batch)
    assert not m.valid.any() and (m.reason == Reason.MODEL).all()
    _, msgs = systolic_layout(prob, arch)
    assert msgs and any("SRAM" in x for x in msgs)
    with pytest.raises(Exception, match="not a systolic shape"):
        scalesim_mapping(prob, arch, "os")


def test_illegal_factors_keep_their_reason():
    prob = matmul("g", m=32, n=32, k=32, word_bits=8)
    arch = _arch(8, 8)
    good = scalesim_mapping(prob, arch, "os")[0]
    t = good.temporal.copy()
    t[0, 0] = 1  # factors no longer cover M
    m = MODEL.evaluate(prob, arch, Mapping(temporal=t, spatial=good.spatial, order=good.order,
                                           keep=good.keep).as_batch())
    assert m.reason[0] == Reason.FACTORS
    msgs = MODEL.explain(prob, arch, Mapping(temporal=t, spatial=good.spatial, order=good.order, keep=good.keep))
    assert msgs[0] == "illegal mapping (factors)" and any("dim M" in x for x in msgs[1:])


def test_stalls_for_a_given_bandwidth():
    prob = matmul("g", m=256, n=256, k=256, word_bits=8)
    free = MODEL.stats(prob, _arch(16, 16), scalesim_mapping(prob, _arch(16, 16), "os"))
    slow_arch = _arch(16, 16, bw=1.0)
    slow = MODEL.stats(prob, slow_arch, scalesim_mapping(prob, slow_arch, "os"))
    assert int(free.stall_cycles[0]) == 0
    words = int(slow.dram_reads[0].sum())
    assert int(slow.stall_cycles[0]) == max(0, words - int(slow.compute_cycles[0]))
    assert int(slow.total_cycles[0]) == int(slow.compute_cycles[0]) + int(slow.stall_cycles[0])
    assert int(slow.compute_cycles[0]) == int(free.compute_cycles[0])


def test_energy_from_per_access_energies():
    prob = matmul("g", m=64, n=48, k=32, word_bits=8)
    arch = _arch(8, 8)
    m = MODEL.evaluate(prob, arch, scalesim_mapping(prob, arch, "ws"))
    want = 0.0
    for li, lv in enumerate(arch.levels):
        want += float(m.reads[0, li].sum()) * lv.read_energy_pj
        want += float((m.fills[0, li] + m.updates[0, li]).sum()) * lv.write_energy_pj
    want += prob.macs * arch.compute.energy_per_mac_pj
    assert m.energy_pj[0] == pytest.approx(want, rel=1e-12)
    assert m.compute_energy_pj[0] == pytest.approx(prob.macs * arch.compute.energy_per_mac_pj)
    assert m.utilization[0] == pytest.approx(prob.macs / (m.cycles[0] * 64))


def test_batched_matmul_repeats_the_gemm():
    one = matmul("g", m=24, n=20, k=12, word_bits=8)
    four = batched_matmul("b", b=4, m=24, n=20, k=12, word_bits=8)
    arch = _arch(8, 8)
    s1 = MODEL.stats(one, arch, scalesim_mapping(one, arch, "is"))
    s4 = MODEL.stats(four, arch, scalesim_mapping(four, arch, "is"))
    assert int(s4.folds[0]) == 4 * int(s1.folds[0])
    assert int(s4.compute_cycles[0]) == 4 * (int(s1.compute_cycles[0]) + 1) - 1
    assert (s4.sram_reads[0] == 4 * s1.sram_reads[0]).all()


def test_tpu_preset_is_a_systolic_shape():
    arch = preset("tpu-v1-like")
    prob = matmul("g", m=512, n=512, k=512, word_bits=8)
    s = MODEL.stats(prob, arch, scalesim_mapping(prob, arch, "ws"))
    assert s.valid[0]
    assert int(s.folds[0]) == 4  # 512 / 256 rows x 512 / 256 cols


def test_conformance_checks():
    prob = conv2d("c", c=16, k=24, p=10, q=10, r=3, s=3, word_bits=8)
    arch = _arch(8, 8, kb=1)  # a small SRAM so that windows reset
    rows = [scalesim_mapping(prob, arch, df)[0] for df in ("os", "ws", "is")]
    bad = rows[0]
    keep = bad.keep.copy()
    keep[-1, :] = False
    rows.append(Mapping(temporal=bad.temporal, spatial=bad.spatial, order=bad.order, keep=keep))
    check_cost_model(MODEL, prob, arch, MappingBatch.from_mappings(rows))


def test_registry_finds_the_model():
    from accelmap._registry import costmodels

    assert costmodels.get("systolic") is SystolicModel


def test_sram_window_counts_words_of_the_operand_width():
    """A 16-bit operand in an SRAM of 8-bit words gets half as many words."""
    arch = _arch(8, 8, kb=4)
    narrow = matmul("g", m=64, n=64, k=64, word_bits=8)
    wide = matmul("g", m=64, n=64, k=64, word_bits=16)
    w8 = systolic_layout(narrow, arch)[0].window_words
    w16 = systolic_layout(wide, arch)[0].window_words
    assert w8[0] == 50 * (4096 // 100) and w16[0] == 50 * (2048 // 100)


def test_one_mac_on_one_pe_every_path():
    """One MAC on a 1 x 1 array: SCALE-Sim's total (the last cycle's index) is 0 for OS; the
    utilization is taken over one cycle on every path (the kernel divided by zero)."""
    prob = matmul("g", m=1, n=1, k=1, word_bits=8)
    arch = systolic_array(1, 1, 1, 1, 1, dram_bandwidth_words_per_cycle=None)
    for df in ("os", "ws", "is"):
        batch = scalesim_mapping(prob, arch, df)
        stats = [SystolicModel(engine=e).stats(prob, arch, batch) for e in ("cpu", "numpy")]
        stats.append(SystolicModel().stats_one(prob, arch, batch[0]))
        for s in stats:
            assert s.valid[0] and s.utilization[0] == 1.0 / max(int(s.total_cycles[0]), 1)
        assert int(stats[0].total_cycles[0]) == (0 if df == "os" else 1)


def test_an_order_naming_a_dim_past_the_last_is_an_order_verdict_on_every_path():
    """A row whose array-level order names a dim that does not exist is illegal (ORDER): the
    numpy path once walked its DRAM reads anyway and indexed past the dim tables (IndexError)
    on CB2a_2, whose operands overflow the prefetch window."""
    from accelmap.mapper.space import MapSpace

    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    arch = preset("systolic")
    good = MapSpace(problem, arch).sample_valid(12, np.random.default_rng(1))
    order = np.array(good.order)
    layout, _ = systolic_layout(problem, arch)
    order[:, layout.array_level, 5] = problem.n_dims  # (one past the last dim)
    bad = MappingBatch(temporal=good.temporal, spatial=good.spatial, order=order, keep=good.keep)
    ref = SystolicModel(engine="numpy").evaluate(problem, arch, bad)
    assert not ref.valid.any() and (ref.reason == int(Reason.ORDER)).all()
    cpu = SystolicModel(engine="cpu").evaluate(problem, arch, bad)
    assert np.array_equal(cpu.reason, ref.reason) and np.array_equal(cpu.reason_level, ref.reason_level)
    one = SystolicModel().evaluate_one(problem, arch, bad[0])
    assert int(one.reason[0]) == int(Reason.ORDER)
