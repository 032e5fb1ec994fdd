"""Unit tests of the aspect cost model: MAESTRO file reading, the directive analysis, the
accelmap view (mapping -> directives), shapes, and the CostModel conformance checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.aspect import (
    AspectModel,
    ClusterDirective,
    Directive,
    DirectiveKind,
    DirectiveMapping,
    MaestroHardware,
    MaestroLayer,
    analyze,
    arch_with_shape,
    aspect_view,
    directives_from_mapping,
    shapes,
)
from accelmap.costmodels.maestro_io import (
    parse_hardware,
    parse_mapping,
    render_hardware_file,
    render_mapping_file,
    to_problem,
)
from accelmap.errors import SpecError
from accelmap.mapper.check import Reason
from accelmap.mapper.mapping import Mapping
from accelmap.testing.costmodel_checks import check_cost_model
from accelmap.workloads.builders import conv2d, matmul

REF = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference" / "maestro"

KCP = """
Network vgg16 {
Layer CONV3 {
Type: CONV
Dimensions { K 128,C 64,R 3,S 3,Y 112,X 112 }
Dataflow {
        // NVDLA-like
        SpatialMap(1,1) K;
        TemporalMap(64,64) C;
        TemporalMap(Sz(R),Sz(R)) R;
        TemporalMap(Sz(S),Sz(S)) S;
        TemporalMap(Sz(R),1) Y;
        TemporalMap(Sz(S),1) X;
        Cluster(64, P);
        SpatialMap(1,1) C;
        TemporalMap(Sz(R),1) Y;
        TemporalMap(Sz(S),1) X;
        TemporalMap(Sz(R),Sz(R)) R;
        TemporalMap(Sz(S),Sz(S)) S;
}
}
}
"""
HW = "num_pes: 1024\nl1_size_cstr: 100\nl2_size_cstr: 3000\nnoc_bw_cstr: 1000\noffchip_bw_cstr: 50\n"


def _arch(x: int, y: int, *, l1: int | None = None, l2: int | None = None) -> Arch:
    """MAESTRO's acc1 hardware as an accelmap arch: off-chip 50, NoC 1000 words/cycle."""
    return Arch(
        name="acc1",
        levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=50,
                         read_energy_pj=100.0, write_energy_pj=100.0),
            StorageLevel(name="L2", capacity_words=l2, read_bandwidth_words_per_cycle=1000,
                         fanout_x=x, fanout_y=y, read_energy_pj=18.61, write_energy_pj=18.61),
            StorageLevel(name="L1", capacity_words=l1, read_energy_pj=1.68, write_energy_pj=1.68),
        ),
        compute=Compute(energy_per_mac_pj=1.0),
    )


def _mapping(problem, arch, temporal, sx=None, sy=None, order=None) -> Mapping:
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    t = np.ones((L, D), np.int64)
    s = np.ones((L, D, 2), np.int64)
    for (lv, dn), v in temporal.items():
        t[lv, problem.dim_index(dn)] = v
    for dd, ax in ((sx, 0), (sy, 1)):
        for (lv, dn), v in (dd or {}).items():
            s[lv, problem.dim_index(dn), ax] = v
    o = np.tile(np.arange(D), (L, 1))
    for lv, names in (order or {}).items():
        o[lv] = [problem.dim_index(n) for n in names]
    return Mapping(temporal=t, spatial=s, order=o, keep=np.ones((L, T), bool))


def _kcp_mapping():
    p = conv2d("CONV3", c=64, k=128, p=110, q=110, r=3, s=3)
    a = _arch(64, 16)
    m = _mapping(p, a, {(1, "K"): 8, (1, "P"): 110, (1, "Q"): 110, (2, "R"): 3, (2, "S"): 3},
                 sx={(1, "C"): 64}, sy={(1, "K"): 16}, order={1: ["K", "C", "R", "S", "P", "Q", "N"]})
    return p, a, m


# --- maestro_io -------------------------------------------------------------------------

def test_parse_mapping_resolves_sizes_and_clusters() -> None:
    net = parse_mapping(KCP)
    assert net.name == "vgg16" and len(net.layers) == 1
    lay = net.layers[0]
    assert lay.layer.dim_dict == {"K": 128, "C": 64, "R": 3, "S": 3, "Y": 112, "X": 112}
    assert lay.directives[0] == Directive(DirectiveKind.SPATIAL, "K", 1, 1)
    assert lay.directives[2] == Directive(DirectiveKind.TEMPORAL, "R", 3, 3)
    assert lay.directives[6] == ClusterDirective(64)


def test_parse_mapping_clamps_tiles_and_reads_strides() -> None:
    text = KCP.replace("Type: CONV", "Type: CONV\nStride { X: 2, Y: 2 }").replace("C 64", "C 3")
    lay = parse_mapping(text).layers[0]
    assert lay.layer.stride_x == 2 and lay.layer.stride_y == 2
    assert lay.directives[1] == Directive(DirectiveKind.TEMPORAL, "C", 3, 64)  # size clamped to C


@pytest.mark.parametrize(
    "bad, msg",
    [
        (KCP.replace("SpatialMap(1,1) K;", "SpatialMap(1,1) Z;"), "unknown dimension"),
        (KCP.replace("Cluster(64, P);", "Clusterr(64);"), "cannot read directive"),
        (KCP.replace("Dimensions { K 128,", "Dimensions { "), "lacks"),
        (KCP.replace("TemporalMap(64,64) C;", "TemporalMap(Sz(Q),1) C;"), "Sz(Q)"),
        ("Layer x { }", "no 'Network"),
    ],
)
def test_parse_mapping_errors_say_what_and_where(bad: str, msg: str) -> None:
    with pytest.raises(SpecError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        parse_mapping(bad, source="m.m")


def test_parse_hardware() -> None:
    hw = parse_hardware(HW)
    assert (hw.num_pes, hw.l1_size, hw.l2_size, hw.noc_bw, hw.offchip_bw) == (1024, 100, 3000, 1000, 50)
    with pytest.raises(SpecError, match="unknown key 'num_pe'"):
        parse_hardware("num_pe: 3\n", source="hw.m")
    with pytest.raises(SpecError, match="num_pes is missing"):
        parse_hardware("l1_size_cstr: 3\n")
    assert parse_hardware(render_hardware_file(hw)) == hw


def test_render_mapping_round_trip() -> None:
    net = parse_mapping(KCP)
    again = parse_mapping(render_mapping_file(net.name, list(net.layers)))
    assert again.layers == net.layers


def test_to_problem_counts_analytic_macs() -> None:
    lay = MaestroLayer(name="l", kind="CONV", dims=(("K", 4), ("C", 3), ("R", 3), ("S", 3), ("Y", 9), ("X", 9)),
                       stride_y=2, stride_x=2)
    assert to_problem(lay).macs == lay.analytic_macs() == 4 * 3 * 9 * 4 * 4
    dw = MaestroLayer(name="d", kind="DSCONV", dims=(("K", 1), ("C", 8), ("R", 3), ("S", 3), ("Y", 6), ("X", 6)))
    assert to_problem(dw).macs == dw.analytic_macs() == 8 * 9 * 16


# --- the analysis ------------------------------------------------------------------------

def test_analyze_kcp_matches_reference_numbers() -> None:
    """VGG-16 CONV3 under KC-P on 1024 PEs (MAESTRO: 18,876,000 cycles; L1 54, L2 19,616)."""
    res = analyze(parse_mapping(KCP).layers[0], parse_hardware(HW))
    assert res.runtime_cycles == 18_876_000
    assert res.num_macs == 128 * 64 * 9 * 110 * 110
    assert (res.l1_size_req, res.l2_size_req) == (54, 19_616)


def test_analyze_rejects_malformed_directives() -> None:
    lay = parse_mapping(KCP).layers[0]
    no_spatial = DirectiveMapping(layer=lay.layer, directives=tuple(
        Directive(DirectiveKind.TEMPORAL, d.dim, d.size, d.offset) if isinstance(d, Directive) else d
        for d in lay.directives))
    with pytest.raises(SpecError, match="no SpatialMap"):
        analyze(no_spatial, parse_hardware(HW))
    with pytest.raises(SpecError, match="need 2048 PEs"):
        analyze(DirectiveMapping(layer=lay.layer, directives=(*lay.directives, ClusterDirective(32))),
                parse_hardware(HW))


def test_more_bandwidth_never_slower() -> None:
    lay = parse_mapping(KCP).layers[0]
    slow = analyze(lay, MaestroHardware(num_pes=1024, noc_bw=10, offchip_bw=5))
    fast = analyze(lay, MaestroHardware(num_pes=1024, noc_bw=10**6, offchip_bw=10**6))
    assert fast.runtime_cycles <= slow.runtime_cycles
    assert fast.num_macs == slow.num_macs


# --- the accelmap view -------------------------------------------------------------------

def test_accelmap_mapping_reproduces_kcp_reference() -> None:
    p, a, m = _kcp_mapping()
    dm, hw = directives_from_mapping(p, a, m)
    assert hw.num_pes == 1024
    assert ClusterDirective(64) in dm.directives
    met = AspectModel().evaluate(p, a, m.as_batch())
    assert met.valid[0] and met.cycles[0] == 18_876_000
    assert met.macs == p.macs
    one = AspectModel().evaluate_one(p, a, m)
    assert one.cycles[0] == met.cycles[0] and np.array_equal(one.reads, met.reads)


def test_accelmap_mapping_reproduces_xp_reference() -> None:
    """X-P on 256 PEs: a one-level MAESTRO mapping (Q unrolled over 110 PEs)."""
    p = conv2d("CONV3", c=64, k=128, p=110, q=110, r=3, s=3)
    a = _arch(1, 256)
    m = _mapping(p, a, {(1, "K"): 128, (1, "C"): 64, (1, "P"): 110, (2, "R"): 3, (2, "S"): 3},
                 sy={(1, "Q"): 110}, order={1: ["K", "C", "P", "Q", "R", "S", "N"]})
    dm, _ = directives_from_mapping(p, a, m)
    assert not any(isinstance(d, ClusterDirective) for d in dm.directives)
    res = analyze(dm, directives_from_mapping(p, a, m)[1])
    assert (res.runtime_cycles, res.l1_size_req, res.l2_size_req) == (17_121_280, 54, 2_218)


def test_unrepresentable_mappings_are_model_invalid() -> None:
    p, a, m = _kcp_mapping()
    t = m.temporal.copy()
    t[1, p.dim_index("R")], t[2, p.dim_index("R")] = 3, 1  # filter rows tiled above the PE
    bad = Mapping(temporal=t, spatial=m.spatial, order=m.order, keep=m.keep)
    met = AspectModel().evaluate(p, a, bad.as_batch())
    assert not met.valid[0] and met.reason[0] == int(Reason.MODEL) and np.isinf(met.cycles[0])


def test_capacity_uses_maestro_requirements() -> None:
    p, _, m = _kcp_mapping()
    small = _arch(64, 16, l1=53, l2=None)
    met = AspectModel().evaluate(p, small, m.as_batch())
    assert met.reason[0] == int(Reason.CAPACITY) and met.reason_level[0] == 2
    assert AspectModel().evaluate(p, _arch(64, 16, l1=54, l2=19_616), m.as_batch()).valid[0]


def test_unsupported_problem_gives_model_invalid_rows_and_a_reason() -> None:
    from accelmap.workloads.builders import batched_matmul

    p = batched_matmul("bmm", b=2, m=4, n=4, k=4)
    a = _arch(2, 2)
    assert "aspect model takes" in AspectModel.unsupported(p, a)
    m = _mapping(p, a, {(1, "B"): 2, (1, "M"): 4, (1, "N"): 4, (1, "K"): 4})
    met = AspectModel().evaluate(p, a, m.as_batch())
    assert not met.valid[0] and met.reason[0] == int(Reason.MODEL)
    assert AspectModel().evaluate_one(p, a, m).reason[0] == int(Reason.MODEL)
    with pytest.raises(SpecError, match="aspect model takes"):
        directives_from_mapping(p, a, m)


def test_conformance_on_random_mappings() -> None:
    from accelmap.mapper.mapping import MappingBatch

    p = conv2d("c", c=8, k=4, p=6, q=4, r=3, s=3)
    a = _arch(4, 4, l1=10**5, l2=10**6)
    rng = np.random.default_rng(3)
    rows = [_random_mapping(p, a, rng) for _ in range(24)]
    check_cost_model(AspectModel(), p, a, MappingBatch.from_mappings(rows))


def _random_mapping(p, a, rng) -> Mapping:
    L, D = a.n_levels, p.n_dims
    t = np.ones((L, D), np.int64)
    s = np.ones((L, D, 2), np.int64)
    rem = p.bounds.copy()
    for ax in (0, 1):
        d = int(rng.integers(D))
        opts = [x for x in range(1, 5) if rem[d] % x == 0]
        s[1, d, ax] = int(rng.choice(opts))
        rem[d] //= s[1, d, ax]
    for d in range(D):
        r = int(rem[d])
        for lv in range(L - 1):
            f = int(rng.choice([x for x in range(1, r + 1) if r % x == 0]))
            t[lv, d] = f
            r //= f
        t[L - 1, d] = r
    o = np.stack([rng.permutation(D) for _ in range(L)])
    return Mapping(temporal=t, spatial=s, order=o, keep=np.ones((L, p.n_tensors), bool))


def test_matmul_is_read_as_a_1x1_convolution() -> None:
    p = matmul("mm", m=16, n=8, k=4)
    a = _arch(4, 2)
    m = _mapping(p, a, {(1, "M"): 16, (2, "K"): 4}, sx={(1, "N"): 4}, sy={(1, "N"): 2})
    met = AspectModel().evaluate(p, a, m.as_batch())
    assert met.valid[0] and met.macs == p.macs
    assert met.utilization[0] <= 1.0


# --- shapes ------------------------------------------------------------------------------

def test_shapes_and_arch_with_shape() -> None:
    assert shapes(12) == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]
    assert all(x * y == 1024 for x, y in shapes(1024))
    a = arch_with_shape(_arch(64, 16), 32, 32)
    assert aspect_view(a).x == 32 and aspect_view(a).y == 32 and a.n_macs == 1024
    with pytest.raises(SpecError):
        shapes(0)


def test_two_fanout_levels_are_rejected() -> None:
    a = _arch(4, 4)
    levels = list(a.levels)
    levels[0] = StorageLevel(name="DRAM", capacity_words=None, fanout_x=2)
    with pytest.raises(SpecError, match="one PE array"):
        aspect_view(Arch(name="two", levels=tuple(levels), compute=a.compute))


@pytest.mark.skipif(not (REF / "cases.json").exists(), reason="MAESTRO reference data absent")
def test_cli_run_prints_maestro_names(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from accelmap.cli import _maestro

    case = REF / "cases" / "vgg16__L02_CONV3__T_kcp_ws__pe1024__acc1"
    args = argparse.Namespace(maestro_hw=str(case / "hw.m"), maestro_mapping=str(case / "mapping.m"), json=True)
    assert _maestro.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    layer = out["layers"][0]
    assert layer["runtime_cycles"] == 18_876_000 and layer["l1_size_req"] == 54
    assert set(layer["tensors"]) == {"input", "filter", "output"}
    assert set(layer["tensors"]["input"]) >= {"l1_read", "l1_write", "l2_read", "l2_write"}
    args.json = False
    assert _maestro.run(args) == 0
    text = capsys.readouterr().out
    assert "runtime_cycles" in text and "l2_size_req" in text


def test_to_accelmap_kcp_and_its_refusals() -> None:
    import dataclasses

    from accelmap.costmodels.maestro_io import to_accelmap, to_arch

    lay = parse_mapping(KCP).layers[0]
    hw = dataclasses.replace(parse_hardware(HW), l1_size=None, l2_size=None)
    p, a, m = to_accelmap(lay, hw)
    assert (aspect_view(a).x, aspect_view(a).y) == (64, 16)
    assert AspectModel().evaluate(p, a, m.as_batch()).cycles[0] == 18_876_000
    with pytest.raises(SpecError, match="edge"):
        to_accelmap(parse_mapping(KCP.replace("TemporalMap(64,64) C;", "TemporalMap(48,48) C;")).layers[0], hw)
    with pytest.raises(SpecError, match="not a tile of whole outputs"):
        to_accelmap(parse_mapping(KCP.replace("TemporalMap(Sz(R),1) Y;\n        TemporalMap(Sz(S),1) X;\n        Cluster",
                                              "TemporalMap(4,1) Y;\n        TemporalMap(Sz(S),1) X;\n        Cluster")).layers[0], hw)
    with pytest.raises(SpecError, match="does not fit"):
        to_arch(hw, 64, 32)


def test_evaluate_verb_dispatches_maestro_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from accelmap.cli import main

    (tmp_path / "m.m").write_text(KCP)
    (tmp_path / "hw.m").write_text(HW)
    assert main(["evaluate", "--maestro-hw", str(tmp_path / "hw.m"), "--maestro-mapping", str(tmp_path / "m.m"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"][0]["runtime_cycles"] == 18_876_000
    assert main(["evaluate", "--maestro-mapping", str(tmp_path / "m.m")]) == 2
    assert "go together" in capsys.readouterr().err
    assert main(["evaluate"]) == 2
