"""Golden tests: the systolic model against SCALE-Sim 3.0.0 on its own files.

Reference: ../shared/reference/scalesim/ (runs.json, configs/*.cfg, topologies/*.csv):
ResNet-50 (21 unique layer shapes) and 4 GEMMs on a 128 x 128 array, dataflows os, ws, is,
64 kB SRAMs, CALC bandwidth: 75 (run, layer) points. The model runs on SCALE-Sim's own
config and topology files through `accelmap.costmodels.scalesim_io`, with SCALE-Sim's
mapping (`scalesim_mapping`).

Tolerances (issues 7, 16): total cycles and SRAM accesses exact; SCALE-Sim's mapping
efficiency, compute and overall utilization to 1e-9 relative; DRAM reads exact with the
model's ``dram_window="exact"`` (the demand-stream walk) and with the default ``"auto"``
(it walks every point's streams: SCALE-Sim's mappings have the fewest folds, and no stream
is longer than its limit); DRAM writes within 2 %. The closed-form estimate
(``dram_window="estimate"``, which ``"auto"`` uses for other mappings) is held to 2 %; its
points outside 2 % are listed in ``DRAM_DISAGREEMENTS`` with the reason and xfailed
strictly (an improvement must move the point out of the list); docs/validation.md, section
SCALE-Sim, gives both numbers of each.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from accelmap.costmodels.scalesim_io import config_arch, read_config, read_topology
from accelmap.costmodels.systolic import SystolicModel
from accelmap.costmodels.systolic_variants import scalesim_mapping

REF = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "scalesim"

if not (REF / "runs.json").exists():  # pragma: no cover - depends on the checkout
    pytest.skip(f"SCALE-Sim reference data not found at {REF}", allow_module_level=True)

RUNS = {r["run_name"]: r for r in json.loads((REF / "runs.json").read_text())["runs"]}
POINTS = [
    (name, layer["name"])
    for name, run in RUNS.items()
    for layer in run["layers"]
    if not layer.get("simulated_as")
]
IDS = [f"{run}-{layer}" for run, layer in POINTS]

# The six strided 1x1 layers (every dataflow): SCALE-Sim rounds the ofmap up, so its last
# row and column of windows lie past the ifmap edge and fetch nothing. The topology reader
# gives the problem the ifmap's extent (`Tensor.extent`), and the model counts only the words
# that exist: their DRAM reads are exact (`test_strided_dram_reads_exact`).
STRIDED = [
    (f"resnet50u_128x128_{df}", layer)
    for df in ("os", "ws", "is")
    for layer in ("CB3a_1", "CB3s", "CB4a_1", "CB4s", "CB5a_1", "CB5s")
]
_WINDOW = (
    "sliding-window ifmap: SCALE-Sim's count depends on which im2col duplicates fall in one "
    "prefetch window; the closed-form estimate reads it from tile footprints (exact mode walks it)"
)
# (run, layer) -> why the estimate's DRAM reads differ from SCALE-Sim's by more than 2 %.
DRAM_DISAGREEMENTS: dict[tuple[str, str], str] = {
    ("resnet50u_128x128_is", "CB3a_2"): _WINDOW,
    ("resnet50u_128x128_os", "CB3a_2"): _WINDOW,
    ("resnet50u_128x128_is", "CB4a_2"): _WINDOW,
    ("resnet50u_128x128_os", "CB4a_2"): _WINDOW,
    ("resnet50u_128x128_ws", "Conv1"): _WINDOW,
    ("resnet50u_128x128_ws", "CB2a_2"): _WINDOW,
}


def _topology(run_name: str) -> Path:
    return REF / "topologies" / ("gemms.csv" if run_name.startswith("gemms") else "Resnet50_unique.csv")


@cache
def _results(run_name: str, dram_window: str = "estimate") -> dict[str, dict]:
    """Model report of every layer of a run, by layer name."""
    config = read_config(REF / "configs" / f"{run_name}.cfg")
    arch = config_arch(config)
    model = SystolicModel(dram_window=dram_window)
    out = {}
    for layer in read_topology(_topology(run_name)):
        stats = model.stats(layer.problem, arch, scalesim_mapping(layer.problem, arch, config.dataflow))
        out[layer.name] = stats.report(0) | {"macs": layer.problem.macs}
    return out


def _ref(run_name: str, layer: str) -> dict:
    return next(x for x in RUNS[run_name]["layers"] if x["name"] == layer)


def test_reference_has_the_expected_points():
    assert len(POINTS) == 75
    assert {r["dataflow"] for r in RUNS.values()} == {"os", "ws", "is"}


@pytest.mark.parametrize(("run", "layer"), POINTS, ids=IDS)
def test_macs_and_cycles_exact(run: str, layer: str):
    got, ref = _results(run)[layer], _ref(run, layer)
    assert got["macs"] == ref["macs"]
    assert got["total_cycles"] == ref["total_cycles"]
    assert got["compute_cycles"] == ref["compute_cycles"]
    assert got["stall_cycles"] == ref["stall_cycles"] == 0


@pytest.mark.parametrize(("run", "layer"), POINTS, ids=IDS)
def test_sram_accesses_exact(run: str, layer: str):
    got, ref = _results(run)[layer], _ref(run, layer)
    assert got["sram_reads"] == ref["sram_reads"]
    assert got["sram_writes"] == ref["sram_writes"]


@pytest.mark.parametrize(("run", "layer"), POINTS, ids=IDS)
def test_efficiency_and_utilization(run: str, layer: str):
    got, ref = _results(run)[layer], _ref(run, layer)
    for key in ("mapping_efficiency_pct", "compute_util_pct", "overall_util_pct"):
        assert got[key] == pytest.approx(ref[key], rel=1e-9), key


def _dram_params():
    out = []
    for point, pid in zip(POINTS, IDS, strict=True):
        why = DRAM_DISAGREEMENTS.get(point)
        marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
        out.append(pytest.param(*point, marks=marks, id=pid))
    return out


@pytest.mark.parametrize(("run", "layer"), _dram_params())
def test_dram_within_two_percent(run: str, layer: str):
    got, ref = _results(run)[layer], _ref(run, layer)
    for kind, key in (("dram_reads", "ifmap"), ("dram_reads", "filter"), ("dram_writes", "ofmap")):
        assert got[kind][key] == pytest.approx(ref[kind][key], rel=0.02), f"{kind} {key}"


@pytest.mark.parametrize(("run", "layer"), POINTS, ids=IDS)
def test_dram_reads_exact(run: str, layer: str):
    """The demand-stream walk gives SCALE-Sim's ifmap and filter DRAM reads exactly on
    every point (sliding-window and strided layers included); cycles, SRAM counts and DRAM
    writes are the estimate mode's."""
    got, ref = _results(run, "exact")[layer], _ref(run, layer)
    assert got["dram_reads"] == ref["dram_reads"]
    est = _results(run)[layer]
    assert {k: v for k, v in got.items() if k != "dram_reads"} == {k: v for k, v in est.items() if k != "dram_reads"}


@pytest.mark.parametrize(("run", "layer"), POINTS, ids=IDS)
def test_default_dram_reads_exact(run: str, layer: str):
    """The default model (``dram_window="auto"``) gives SCALE-Sim's DRAM reads on every
    point, and the exact mode's whole report."""
    assert SystolicModel().dram_window == "auto"
    got, ref = _results(run, "auto")[layer], _ref(run, layer)
    assert got["dram_reads"] == ref["dram_reads"]
    assert got == _results(run, "exact")[layer]


def test_auto_walks_the_sliding_window_points():
    """The six points the estimate misses are walked by ``"auto"``, and a limit below
    their streams' length gives the estimate back without a sample (the limit is what
    decides), and the guarded sample's count (the default) within 2 % of SCALE-Sim's with one."""
    for (run, layer) in DRAM_DISAGREEMENTS:
        config = read_config(REF / "configs" / f"{run}.cfg")
        arch = config_arch(config)
        prob = next(x for x in read_topology(_topology(run)) if x.name == layer).problem
        one = scalesim_mapping(prob, arch, config.dataflow)
        entries = int(SystolicModel().stats(prob, arch, one).sram_reads[0, 0])  # one repetition
        assert entries <= SystolicModel.MAX_WALK_ENTRIES
        short = SystolicModel(dram_window="auto", max_walk_entries=entries - 1,
                              max_sample_entries=0).stats(prob, arch, one).report(0)
        assert short["dram_reads"] == _results(run)[layer]["dram_reads"]
        sampled = SystolicModel(max_walk_entries=entries - 1).stats(prob, arch, one).report(0)["dram_reads"]
        for op, want in _ref(run, layer)["dram_reads"].items():
            assert abs(sampled[op] - want) <= 0.02 * want, (run, layer, op, sampled[op], want)
        at = SystolicModel(dram_window="auto", max_walk_entries=entries).stats(prob, arch, one).report(0)
        assert at["dram_reads"] == _ref(run, layer)["dram_reads"]


def test_dram_of_disagreements_is_on_the_documented_side():
    """No listed point is off by more than the documented worst case."""
    for (run, layer) in DRAM_DISAGREEMENTS:
        got, ref = _results(run)[layer], _ref(run, layer)
        ratio = got["dram_reads"]["ifmap"] / ref["dram_reads"]["ifmap"]
        assert 0.7 < ratio < 1.2, (run, layer, ratio)


@pytest.mark.parametrize(("run", "layer"), STRIDED)
def test_strided_dram_reads_exact(run: str, layer: str):
    got, ref = _results(run)[layer], _ref(run, layer)
    assert got["dram_reads"] == ref["dram_reads"]


@pytest.mark.parametrize("run", sorted(RUNS))
def test_network_totals(run: str):
    """Summed over every layer of the topology (54 for ResNet-50 via the dedup map)."""
    meta = RUNS[run]
    res = _results(run)
    expanded = [x.get("simulated_as") or x["name"] for x in meta["layers"]]
    assert sum(res[name]["total_cycles"] for name in expanded) == meta["totals"]["total_cycles"]
    assert sum(res[name]["sram_reads"]["ifmap"] for name in expanded) == meta["totals"]["sram_reads_ifmap"]
    assert sum(res[name]["sram_writes"]["ofmap"] for name in expanded) == meta["totals"]["sram_writes_ofmap"]


def test_cli_prints_scalesim_naming(capsys):
    from accelmap.cli import main

    run = "gemms_128x128_os"
    code = main(["evaluate", "--scalesim-config", str(REF / "configs" / f"{run}.cfg"),
                 "--scalesim-topology", str(_topology(run)), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataflow"] == "os"
    by_name = {x["layer"]: x for x in out["layers"]}
    for ref in RUNS[run]["layers"]:
        row = by_name[ref["name"]]
        assert row["total_cycles"] == ref["total_cycles"]
        assert row["sram_reads"] == ref["sram_reads"]
        assert row["sram_writes"] == ref["sram_writes"]
        assert set(row["dram_reads"]) == {"ifmap", "filter"} and set(row["dram_writes"]) == {"ofmap"}


# --- SCALE-Sim's prefetch window, replayed --------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("run", "layer"), POINTS, ids=IDS)
def test_replayed_window_reproduces_scalesim_dram_reads(run: str, layer: str):
    """`replay_dram_reads` (SCALE-Sim's demand streams through its CALC-mode prefetch window,
    the behaviour the model's DRAM rules follow) gives SCALE-Sim's own DRAM reads exactly."""
    from accelmap.costmodels.scalesim_io import replay_dram_reads

    config = read_config(REF / "configs" / f"{run}.cfg")
    (lay,) = [x for x in read_topology(_topology(run)) if x.name == layer]
    ref = _ref(run, layer)
    assert replay_dram_reads(lay, config) == (ref["dram_reads"]["ifmap"], ref["dram_reads"]["filter"])
