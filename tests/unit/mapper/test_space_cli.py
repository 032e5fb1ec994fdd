"""`accelmap space` in-process (the CLI verb over MapSpace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from accelmap.cli import main

REF = Path(__file__).resolve().parents[3] / ".." / "shared" / "reference" / "timeloop" / "constraints" / "eyeriss_like"


def test_space_prints_sizes_and_loop_nests(capsys) -> None:
    assert main(["space", "resnet50/res2a_branch2b", "--arch", "eyeriss-like", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^total [\d,]+ \(~1\.\d+e\+33\)", out, re.M)
    assert "factorizations" in out and "loop orders" in out and "bypass choices" in out
    assert out.count("MAC: Outputs += Weights * Inputs") == 2
    assert "min compute cycles 688,128" in out


def test_space_with_accelmap_constraints_file(tmp_path, capsys) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"version": 1, "factors": [{"level": "psum_spad", "dim": "K", "fixed": 4}]}))
    assert main(["space", "resnet50/res2a_branch2b", "--arch", "eyeriss-like", "--constraints", str(f),
                 "--samples", "1", "--dataflow", "row-stationary"]) == 0
    out = capsys.readouterr().out
    assert "K in [0:4)" in out.split("[psum_spad]")[1]


@pytest.mark.skipif(not REF.is_dir(), reason="../shared/reference/timeloop/constraints not present")
def test_space_with_timeloop_constraints(capsys) -> None:
    files = [str(REF / "arch_constraints.yaml"), str(REF / "map_constraints.yaml")]
    assert main(["space", "resnet50/res2a_branch2b", "--arch", "eyeriss-like", "--samples", "0",
                 "--constraints", *files, "--level-map", "DummyBuffer=shared_glb:y"]) == 0
    assert "total 79,920" in capsys.readouterr().out
    assert main(["space", "resnet50/res2a_branch2b", "--arch", "eyeriss-like", "--samples", "0",
                 "--constraints", *files]) == 2
    assert "level_map" in capsys.readouterr().err
