"""Golden: the loopnest model against timeloop-model 3.0.3 on the shared reference cases.

Each case in ``../shared/reference/timeloop/cases`` gives the problem and mapping Timeloop
ran and its results (``expected.json``, read from Timeloop's own stats file). The cases do
not ship the architecture or energy table they were run with, so the archs come from
``tests/golden/data/timeloop/<arch>/`` (transcribed from the specs Timeloop printed; see
docs/validation.md). Tolerances: access counts exact (totals over utilized instances),
energy and cycles within 1%.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from accelmap.arch.io import load_arch
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.io import load_mapping
from accelmap.workloads.io import load_problem

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / ".." / "shared" / "reference" / "timeloop"
ARCHS = Path(__file__).resolve().parent / "data" / "timeloop"
CASES = sorted(p.name for p in (REFERENCE / "cases").iterdir() if p.is_dir()) if (REFERENCE / "cases").is_dir() else []

# Cases we disagree with on purpose (none at present); name -> reason.
XFAIL: dict[str, str] = {}


def _inputs(case: str):
    folder = REFERENCE / "cases" / case
    arch_dir = ARCHS / case.split("__")[0]
    ert = arch_dir / "ERT.yaml"
    problem = load_problem(folder / "prob.yaml")
    arch = load_arch(arch_dir / "arch.yaml", energy=ert if ert.exists() else None)
    mapping = load_mapping(folder / "map.yaml", problem, arch)
    return problem, arch, mapping, json.loads((folder / "expected.json").read_text())


def _compare(row: dict, exp: dict) -> list[str]:
    bad = []
    for key, ref in (("cycles", exp["cycles"]), ("energy_pj", exp["energy_pJ"])):
        if abs(row[key] - ref) > 0.01 * abs(ref):
            bad.append(f"{key}: {row[key]} vs Timeloop {ref}")
    for level in exp["levels"]:
        for tensor, d in level["dataspaces"].items():
            got = row["levels"][level["name"]][tensor]
            for k in ("reads", "fills", "updates"):
                ref = d[f"{k}_x_utilized_instances"]
                if got[k] != ref:
                    bad.append(f"{level['name']}.{tensor}.{k}: {got[k]} vs Timeloop {ref}")
    return bad


@pytest.mark.skipif(not CASES, reason=f"Timeloop reference cases not found at {REFERENCE}")
@pytest.mark.parametrize("path", ["batched", "scalar"])
@pytest.mark.parametrize("case", CASES or ["none"])
def test_matches_timeloop(case: str, path: str) -> None:
    if case in XFAIL:
        pytest.xfail(XFAIL[case])
    problem, arch, mapping, exp = _inputs(case)
    model = LoopNestModel()
    m = model.evaluate(problem, arch, mapping.as_batch()) if path == "batched" else model.evaluate_one(problem, arch, mapping)
    assert m.valid[0], f"{case}: mapping judged illegal ({m.reason[0]})"
    bad = _compare(m.row(0), exp)
    assert not bad, f"{case} ({path}): " + "; ".join(bad)
    assert m.utilization[0] == pytest.approx(exp["utilization"], abs=0.006)


@pytest.mark.skipif(not CASES, reason=f"Timeloop reference cases not found at {REFERENCE}")
def test_all_cases_in_one_batch() -> None:
    """Cases of one problem/arch pair evaluated together give the same rows as one by one."""
    model = LoopNestModel()
    groups: dict[tuple[str, str], list] = {}
    for case in CASES:
        arch_name, layer, _ = case.split("__")
        groups.setdefault((arch_name, layer), []).append(case)
    checked = 0
    for cases in groups.values():
        loaded = [_inputs(c) for c in cases]
        problem, arch = loaded[0][0], loaded[0][1]
        from accelmap.mapper.mapping import MappingBatch

        batch = MappingBatch.from_mappings([x[2] for x in loaded])
        m = model.evaluate(problem, arch, batch)
        for i, (_, _, _, exp) in enumerate(loaded):
            assert not _compare(m.row(i), exp)
            checked += 1
    assert checked == len(CASES)


@pytest.mark.skipif(not CASES, reason=f"Timeloop reference cases not found at {REFERENCE}")
def test_cli_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """`accelmap evaluate --json` on one case prints the documented schema with Timeloop's totals."""
    from accelmap.cli import main

    case = "eyeriss_like__L3_resnet50_res2a_2b__mapper_edp_best"
    if case not in CASES:
        pytest.skip(f"{case} not in the reference set")
    folder = REFERENCE / "cases" / case
    arch_dir = ARCHS / "eyeriss_like"
    code = main(["evaluate", str(folder / "prob.yaml"), str(arch_dir / "arch.yaml"), str(folder / "map.yaml"),
                 "--energy", str(arch_dir / "ERT.yaml"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("cycles", "energy_pj", "macs", "utilization", "levels"):
        assert key in out
    exp = json.loads((folder / "expected.json").read_text())
    assert not _compare(out, exp)
    assert isinstance(out["levels"]["shared_glb"]["Inputs"]["reads"], int)
    assert np.isclose(out["energy_pj"], exp["energy_pJ"], rtol=1e-4)
