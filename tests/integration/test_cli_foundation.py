"""The foundation verbs as a user runs them: list, show, validate, and the error policy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from accelmap.cli import main

MAPPING = {
    "version": 1,
    "mapping": {
        "levels": [
            {"level": "DRAM", "temporal": {"K": 2, "C": 8, "P": 7, "Q": 28}},
            {"level": "shared_glb", "temporal": {"P": 2}, "spatial_x": {"K": 14}, "spatial_y": {"R": 3, "C": 4}},
            {"level": "ifmap_spad", "temporal": {"S": 3}},
            {"level": "weights_spad", "temporal": {"C": 4}},
            {"level": "psum_spad", "temporal": {"K": 5, "P": 2}},
        ]
    },
}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_archs_shows_the_presets(capsys):
    code, out, _ = run(capsys, "list", "archs")
    assert code == 0
    for name in ("eyeriss-like", "simba-like", "tpu-v1-like", "nvdla-like", "edge-tpu-like", "v100-sm", "a100-sm", "mlu-like"):
        assert name in out


def test_show_arch_has_units(capsys):
    code, out, _ = run(capsys, "show", "arch", "eyeriss-like")
    assert code == 0
    assert "168 MACs" in out and "pJ" in out and "14x12" in out and "65,536 w" in out


def test_list_and_show_workloads(capsys):
    code, out, _ = run(capsys, "list", "workloads")
    assert code == 0 and "resnet50" in out and "mobilenet_v2" in out and "GMACs" in out
    code, out, _ = run(capsys, "show", "workload", "resnet50")
    assert code == 0 and "conv1" in out and "118,013,952" in out
    code, out, _ = run(capsys, "show", "workload", "resnet50/conv3_1")  # kind, roles, padding
    assert code == 0 and "kind: convolution (N: batch, K: output channel" in out
    assert "pad [0, 0, 1, 1], extent [1, 128, 56, 56] (401,408 words exist)" in out


def test_validate_names_level_and_numbers(capsys, tmp_path: Path):
    data = yaml.safe_load(yaml.safe_dump(MAPPING))
    data["mapping"]["levels"][4]["temporal"]["K"] = 5  # K: 2*14*5 = 140 != 128
    data["mapping"]["levels"][1]["spatial_y"] = {"R": 3, "C": 8}  # 24 > fanout Y 12
    data["mapping"]["levels"][0]["temporal"]["C"] = 4
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = run(capsys, "validate", "resnet50/res3a_branch2b", "eyeriss-like", str(path))
    assert code == 2
    assert "dim K: factors multiply to 140 (DRAM:2 x shared_glb:14 x psum_spad:5), expected 128" in err
    assert "level shared_glb: spatial Y unrolling C=8 x R=3 uses 24 instances; fanout Y is 12" in err
    assert "level ifmap_spad: tiles need 36 words (Inputs 36); capacity is 12 words" in err


def test_validate_legal(capsys, tmp_path: Path):
    data = {"version": 1, "mapping": {"levels": [
        {"level": "DRAM", "temporal": {"C": 8, "P": 7, "Q": 28}},
        {"level": "shared_glb", "temporal": {"P": 4}, "spatial_x": {"K": 8}, "spatial_y": {"R": 3, "C": 4}},
        {"level": "ifmap_spad", "temporal": {"S": 3}},
        {"level": "weights_spad", "temporal": {"C": 4}},
        {"level": "psum_spad", "temporal": {"K": 16}},
    ]}}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run(capsys, "validate", "resnet50/res3a_branch2b", "eyeriss-like", str(path))
    assert code == 0, err
    assert "legal mapping" in out and "spatial-X for K in [0:8)" in out


CORPUS = {
    "bad_yaml": ("problem", "version: 1\nproblem: [\n", "line"),
    "unknown_key": ("problem", "version: 1\nproblem:\n  name: x\n  dimz: {K: 2}\n", "dimz"),
    "negative_bound": ("problem", "version: 1\nproblem:\n  name: x\n  dims: {K: -2, C: 3}\n  tensors:\n"
                       "    - {name: A, role: input, projection: [[{dim: C}]]}\n"
                       "    - {name: B, role: weight, projection: [[{dim: K}], [{dim: C}]]}\n"
                       "    - {name: O, role: output, projection: [[{dim: K}]]}\n", "-2"),
    "unknown_dim": ("problem", "version: 1\nproblem:\n  name: x\n  dims: {K: 2, C: 3}\n  tensors:\n"
                    "    - {name: A, role: input, projection: [[{dim: Z}]]}\n"
                    "    - {name: B, role: weight, projection: [[{dim: K}], [{dim: C}]]}\n"
                    "    - {name: O, role: output, projection: [[{dim: K}]]}\n", "Z"),
    "zero_capacity": ("arch", "version: 1\nname: a\ncompute: {energy_per_mac_pj: 1}\nlevels:\n"
                      "  - {name: DRAM, capacity_words: null}\n  - {name: GLB, capacity_words: 0}\n", "capacity_words = 0"),
}


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_malformed_input_exit_2_no_traceback(case, capsys, tmp_path: Path):
    kind, text, needle = CORPUS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    argv = ["show", "workload", str(path)] if kind == "problem" else ["show", "arch", str(path)]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert needle in err and str(path.name) in err
    assert "Traceback" not in err


def test_unknown_preset_and_missing_file(capsys, tmp_path: Path):
    code, _, err = run(capsys, "show", "arch", "eyeris")
    assert code == 2 and "Did you mean 'eyeriss-like'" in err
    code, _, err = run(capsys, "validate", "resnet50/conv1", "eyeriss-like", str(tmp_path / "none.yaml"))
    assert code == 2 and "none.yaml" in err and "Traceback" not in err


def test_subprocess_exit_codes_and_verbose_traceback(tmp_path: Path):
    exe = [sys.executable, "-m", "accelmap.cli"]
    r = subprocess.run([*exe, "show", "arch", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "unknown" in r.stderr
    r = subprocess.run([*exe, "-v", "show", "arch", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" in r.stderr
    r = subprocess.run([*exe, "list", "nonsense"], capture_output=True, text=True)
    assert r.returncode == 2
