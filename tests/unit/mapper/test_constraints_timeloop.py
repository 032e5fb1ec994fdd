"""Timeloop constraint files -> accelmap Constraints (Eyeriss-like row-stationary files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from accelmap.errors import SpecError
from accelmap.mapper.space import MapSpace
from accelmap.mapper.timeloop_constraints import (
    EYERISS_PRESET_LEVEL_MAP,
    load_timeloop_constraints,
    timeloop_constraints_from_dict,
)
from accelmap.testing.examples import small_arch, small_conv

REPO = Path(__file__).resolve().parents[3]
REF = REPO / ".." / "shared" / "reference" / "timeloop"
CON = REF / "constraints" / "eyeriss_like"
TL_ARCH = REPO / "tests" / "golden" / "data" / "timeloop" / "eyeriss_like"


def _files(dw: bool) -> list[Path]:
    sfx = "_dw" if dw else ""
    return [CON / f"arch_constraints{sfx}.yaml", CON / f"map_constraints{sfx}.yaml"]


needs_ref = pytest.mark.skipif(not CON.is_dir(), reason="../shared/reference/timeloop/constraints not present")


@needs_ref
def test_eyeriss_preset_with_folded_dummy_buffer() -> None:
    from accelmap.arch.presets import preset
    from accelmap.workloads.zoo import layer

    p, a = layer("resnet50/res2a_branch2b"), preset("eyeriss-like")
    with pytest.raises(SpecError, match=r"level 'DummyBuffer' is not a level of arch eyeriss-like.*level_map"):
        load_timeloop_constraints(_files(False), problem=p, arch=a)
    c = load_timeloop_constraints(_files(False), problem=p, arch=a, level_map=EYERISS_PRESET_LEVEL_MAP)
    sp = MapSpace(p, a, c)
    size = sp.size()
    assert size.orders == 1 and size.bypass == 1  # both fully fixed by the files
    b = sp.sample_valid(200, np.random.default_rng(0))
    glb = a.level_index("shared_glb")
    d = p.dim_index
    assert (b.spatial[:, glb, d("S"), 1] == 3).all()  # S=0 on DummyBuffer's (Y) fanout
    others_x = [d(n) for n in "NCPRS"]
    assert (b.spatial[:, glb, others_x, 0] == 1).all()  # only Q and K (M) unroll on X
    assert (b.temporal[:, glb, d("P")] == 56).all()  # map constraint P=0 at shared_glb
    assert (b.temporal[:, a.level_index("weights_spad"), d("R")] == 3).all()
    # Timeloop permutation "NMPQS CR" (innermost first): R outermost, then C
    ws = a.level_index("weights_spad")
    assert (b.order[:, ws, :2] == [d("R"), d("C")]).all()


@needs_ref
@pytest.mark.skipif(not (TL_ARCH / "arch.yaml").is_file(), reason="transcribed Timeloop eyeriss arch not present")
@pytest.mark.parametrize("case", sorted(p.name for p in (REF / "cases").glob("eyeriss_like__*")) if (REF / "cases").is_dir() else [])
def test_reference_mappings_are_points_of_the_imported_space(case: str) -> None:
    """Every mapping Timeloop ran (hand-written and its mapper's best) lies in the space
    read from the constraint files it searched under."""
    from accelmap.arch.io import load_arch
    from accelmap.mapper.timeloop import mapping_from_timeloop
    from accelmap.workloads.io import load_problem

    arch = load_arch(TL_ARCH / "arch.yaml", TL_ARCH / "ERT.yaml")
    d = REF / "cases" / case
    problem = load_problem(d / "prob.yaml")
    c = load_timeloop_constraints(_files("M" not in problem.dim_names), problem=problem, arch=arch)
    sp = MapSpace(problem, arch, c)
    m = mapping_from_timeloop(yaml.safe_load((d / "map.yaml").read_text()), problem, arch, str(d / "map.yaml"))
    b = m.as_batch()
    assert sp.check(b).valid.all()
    # Timeloop leaves unit loops anywhere; repair moves them to the space's canonical spots
    # without touching factors, bypass or the order of the loops that run
    r = sp.repair(b)
    assert sp.decode(sp.encode(r)) == r
    assert sp.decode(sp.encode(b, canonicalize=True)) == r
    np.testing.assert_array_equal(r.factors(), b.factors())
    np.testing.assert_array_equal(r.keep, b.keep)
    for lv in range(arch.n_levels):
        running_r = [int(x) for x in r.order[0, lv] if b.temporal[0, lv, x] > 1]
        running_b = [int(x) for x in b.order[0, lv] if b.temporal[0, lv, x] > 1]
        assert running_r == running_b


def test_inline_documents_and_errors() -> None:
    p, a = small_conv(), small_arch()
    doc = {"mapspace_constraints": {"targets": [
        {"target": "RF", "type": "temporal", "factors": "N=1 M=1 S=0 C<=2", "permutation": "SR QP"},
        {"target": "GLB", "type": "spatial", "factors": "R=1 S=1", "permutation": "KC PQ", "split": 2},
        {"target": "GLB", "type": "bypass", "keep": ["Inputs"], "bypass": ["Weights"]},
        {"target": "DRAM", "type": "utilization", "min": 0.25},
    ]}}
    c = timeloop_constraints_from_dict([doc], problem=p, arch=a)
    sp = MapSpace(p, a, c)
    b = sp.sample_valid(100, np.random.default_rng(1))
    d = p.dim_index
    assert (b.temporal[:, 2, d("S")] == 3).all() and (b.temporal[:, 2, d("K")] == 1).all()
    assert (b.temporal[:, 2, d("C")] <= 2).all()
    assert (b.order[:, 2, -2:] == [d("R"), d("S")]).all()  # S innermost, then R
    assert (b.order[:, 2, :2] == [d("P"), d("Q")]).all()  # P outermost, then Q
    assert (b.spatial[:, 1, [d("P"), d("Q")], 0] == 1).all()  # P, Q only on Y
    assert (b.spatial[:, 1, [d("K"), d("C")], 1] == 1).all()  # K, C only on X
    assert b.keep[:, 1, 1].all() and (~b.keep[:, 1, 0]).all()
    assert (sp.utilization(b) >= 0.25).all()

    def bad(targets, match, **kw):
        with pytest.raises(SpecError, match=match):
            timeloop_constraints_from_dict([{"architecture_constraints": {"targets": targets}}], problem=p, arch=a, **kw)

    bad([{"target": "RF", "type": "temporal", "factrs": "N=1"}], r"targets\[0\]\.factrs: unknown key \(did you mean 'factors'\?\)")
    bad([{"target": "RF", "type": "skew"}], r"type = 'skew'; supported")
    bad([{"target": "RF", "type": "temporal", "factors": "Z=1"}], r"dimension 'Z' is not in problem")
    bad([{"target": "RF", "type": "temporal", "factors": "K=2"}, {"target": "RF", "type": "temporal", "factors": "K=4"}],
        r"re-specification of the temporal factor of K")
    bad([{"target": "Buf", "type": "temporal", "factors": "K=1"}], r"level 'Buf' is not a level of arch small")
    bad([{"target": "Buf", "type": "temporal", "factors": "K=2"}], r"folded into RF .*no temporal loops",
        level_map={"Buf": "RF:x"})
    bad([{"target": "RF", "type": "bypass", "keep": ["Psums"]}], r"unknown data-space 'Psums'")
