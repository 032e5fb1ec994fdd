"""`accelmap search --model systolic` as a subprocess: the chosen dataflow is reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from accelmap.arch.presets import preset
from accelmap.costmodels.systolic import Dataflow, SystolicModel
from accelmap.costmodels.systolic_variants import scalesim_mapping
from accelmap.mapper.mapping import MappingBatch
from accelmap.workloads.zoo import layer


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelmap.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_systolic_search_reports_the_dataflow_and_beats_scalesim(tmp_path):
    r = _cli("search", "resnet50/conv3_1", "--arch", "systolic", "--model", "systolic", "--budget", "3000",
             "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("dataflow ")]
    assert line and "rows take" in line[0] and "folds" in line[0]
    data = json.loads((tmp_path / "out" / "result.json").read_text())
    assert data["config"]["variant"]
    problem, arch = layer("resnet50/conv3_1"), preset("systolic")
    m = SystolicModel().evaluate(problem, arch, MappingBatch.concat(
        [scalesim_mapping(problem, arch, df) for df in Dataflow]))
    assert data["best"]["cycles"] <= m.cycles.min()  # SCALE-Sim's own best mapping on this layer and preset
