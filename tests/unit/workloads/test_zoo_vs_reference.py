"""Zoo layer shapes against the layers the reference tools were run on (../shared/reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from accelmap.workloads import layer

REFERENCE = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference"

# Timeloop case layer tag -> (zoo layer, batch). res5c_branch2c has the shape of res5a_branch2c
# (the zoo lists the stage's expand 1x1 once, with repeat 3).
TIMELOOP_LAYERS = {
    "L1_resnet50_conv1": ("resnet50/conv1", 1),
    "L2_resnet50_res2a_2a": ("resnet50/res2a_branch2a", 1),
    "L3_resnet50_res2a_2b": ("resnet50/res2a_branch2b", 1),
    "L4_resnet50_res3a_2b_s2": ("resnet50/res3a_branch2b", 1),
    "L5_resnet50_res5c_2c": ("resnet50/res5a_branch2c", 1),
    "L6_resnet50_fc1000_b16": ("resnet50/fc1000", 16),
    "L7_mbv2_dw3x3_c144": ("mobilenet_v2/block2_2_dw", 1),
}


def _bounds(problem):
    return dict(zip(problem.dim_names, problem.bounds.tolist(), strict=True))


@pytest.mark.parametrize("tag", sorted(TIMELOOP_LAYERS))
def test_timeloop_reference_layers(tag):
    cases = REFERENCE / "timeloop" / "cases"
    if not cases.is_dir():
        pytest.skip(f"Timeloop reference data not found at {cases}")
    matches = sorted(cases.glob(f"simple3__{tag}__*/prob.yaml"))
    if not matches:
        pytest.skip(f"no simple3 case for {tag}")
    inst = yaml.safe_load(matches[0].read_text())["problem"]["instance"]
    name, batch = TIMELOOP_LAYERS[tag]
    prob = layer(name).with_bounds(N=batch)
    b = _bounds(prob)
    k = b.get("K", b["C"])  # the depthwise shape has no K
    assert (inst.get("M", k), inst["C"], inst["N"]) == (k, b["C"], b["N"])
    assert (inst.get("P", 1), inst.get("Q", 1), inst.get("R", 1), inst.get("S", 1)) == (
        b.get("P", 1), b.get("Q", 1), b.get("R", 1), b.get("S", 1),
    )  # fmt: skip
    if "P" in b:  # the input-row coefficient of P is the stride
        stride = prob.coefficients[prob.tensor_index("Inputs"), 2, prob.dim_index("P")]
        assert inst.get("Hstride", 1) == stride


def test_maestro_vgg16_layers():
    cases = REFERENCE / "maestro" / "cases.json"
    if not cases.is_file():
        pytest.skip(f"MAESTRO reference data not found at {cases}")
    rows = json.loads(cases.read_text())["cases"]
    vgg = {r["layer"]: r for r in rows if r["model"] == "vgg16"}
    names = [f"conv{g}_{i}" for g, n in ((1, 2), (2, 2), (3, 3), (4, 3), (5, 3)) for i in range(1, n + 1)]
    for index, name in enumerate(names, start=1):
        row = vgg.get(f"CONV{index}")
        if row is None:
            continue
        b = _bounds(layer(f"vgg16/{name}"))
        dims = row["dims"]
        # MAESTRO's layer files give the unpadded input size; VGG pads by 1, so Y == P.
        assert (dims["K"], dims["C"], dims["R"], dims["S"], dims["Y"]) == (
            b["K"],
            b["C"],
            b["R"],
            b["S"],
            b["P"],
        )


@pytest.mark.parametrize("tag", sorted(TIMELOOP_LAYERS))
def test_load_problem_reads_timeloop_reference_files(tag):
    """load_problem detects the Timeloop format and the imported problem matches the zoo layer."""
    from accelmap.workloads.io import load_problem

    matches = sorted((REFERENCE / "timeloop" / "cases").glob(f"simple3__{tag}__*/prob.yaml"))
    if not matches:
        pytest.skip(f"Timeloop reference case for {tag} not found under {REFERENCE}")
    imported = load_problem(str(matches[0]))
    name, batch = TIMELOOP_LAYERS[tag]
    zoo_layer = layer(name).with_bounds(N=batch)
    assert imported.macs == zoo_layer.macs
    assert sorted(imported.tensor_sizes().tolist()) == sorted(zoo_layer.tensor_sizes().tolist())
