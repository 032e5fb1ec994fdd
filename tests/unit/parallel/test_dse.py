"""Design-space search: strict files, the front against a brute-force sweep, resume."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import yaml

from accelmap.arch.area import area_mm2
from accelmap.arch.io import save_arch
from accelmap.cli import main
from accelmap.errors import SpecError
from accelmap.parallel.dse import Candidate, load_dse, pareto_front, parse_dse, run_dse
from accelmap.parallel.store import ResultStore
from accelmap.parallel.sweep import Sweep, run_sweep
from accelmap.testing.examples import small_arch, small_conv
from accelmap.workloads.io import save_problem


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    save_arch(small_arch(glb_words=1024, rf_words=64, fanout=(4, 4)), tmp_path / "arch.yaml")
    save_problem(small_conv(), tmp_path / "conv.yaml")
    return tmp_path


def _doc(**over) -> dict:
    doc = {
        "version": 1,
        "name": "t",
        "base": "arch.yaml",
        "parameters": [
            {"level": "GLB", "field": "capacity_words", "values": [256, 1024, 4096]},
            {"level": "GLB", "field": "fanout_x", "values": [2, 4]},
            {"level": "GLB", "field": "fanout_y", "values": [2, 4]},
        ],
        "workloads": [{"file": "conv.yaml"}],
        "objectives": ["edp", "area"],
        "trials": 30,
        "mapping": {"searcher": "anneal", "budget": 1500},
    }
    doc.update(over)
    return doc


def _write(dirpath: Path, doc: dict, name: str = "dse.yaml") -> Path:
    p = dirpath / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _key(c: Candidate) -> tuple:
    return (json.dumps(c.params, sort_keys=True), round(c.area_mm2, 9), c.edp)


def test_front_equals_brute_force_sweep(files: Path):
    spec = load_dse(_write(files, _doc()))
    grid = spec.grid()
    assert grid is not None and len(grid) == 12
    with ResultStore(files / "dse.sqlite") as store:
        res = run_dse(spec, study_path=files / "study.sqlite", store=store, workers=2)
    assert res.n_distinct == 12  # the search stops once the whole grid has been seen
    # Brute force: a sweep over the same candidate archs, same mapping search and seed.
    archs = [spec.candidate(g) for g in grid]
    sweep = Sweep(name="bf", workloads=spec.workloads, archs=tuple(archs),
                  searchers=(("anneal", {}),), seeds=(spec.inner_seed,), budget=1500, objective="edp")
    with ResultStore(files / "bf.sqlite") as bf:
        summary = run_sweep(sweep, store=bf)
        assert summary.n_ok == 12
        cands = []
        for g, arch in zip(grid, archs, strict=True):
            (task,) = [t for t in sweep.tasks() if t.arch == arch]
            row = bf.get(task.key)
            cands.append(Candidate(params=g, arch=arch, area_mm2=area_mm2(arch), status="ok",
                                   cycles=row["cycles"], energy_pj=row["energy_pj"]))
    brute = pareto_front(cands, ("edp", "area"))
    assert [_key(c) for c in res.front] == [_key(c) for c in brute]
    assert len(brute) >= 2
    # every told trial is a row of the results store too, beside its layer searches
    with ResultStore(files / "dse.sqlite") as store:
        rows = store.trials(spec.name)
    by_number = {r["trial"]: r for r in rows}
    assert len(rows) >= len(res.trials) and all(
        by_number[t.number]["candidate"]["params"] == t.candidate.params
        and by_number[t.number]["feasible"] == t.feasible for t in res.trials)


@pytest.mark.parametrize(("searcher", "objectives"), [("tpe", ["edp"]), ("nsga2", ["edp", "area"])])
def test_resumed_study_equals_uninterrupted(files: Path, searcher: str, objectives: list[str]):
    doc = _doc(searcher=searcher, objectives=objectives, trials=10,
               parameters=[{"level": "GLB", "field": "capacity_words", "low": 128, "high": 8192, "log": True},
                           {"level": "GLB", "field": "fanout_x", "values": [1, 2, 4]}])
    spec = load_dse(_write(files, doc))
    with ResultStore(files / "a.sqlite") as store:
        full = run_dse(spec, study_path=files / "full.sqlite", store=store, workers=2)
    seen = []

    def stop_after_three(rec):
        seen.append(rec.number)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with ResultStore(files / "b.sqlite") as store:
        part = run_dse(spec, study_path=files / "resumed.sqlite", store=store, workers=2, on_trial=stop_after_three)
        assert part.interrupted and len(part.trials) == 3
        resumed = run_dse(spec, study_path=files / "resumed.sqlite", store=store, workers=2)
    assert not resumed.interrupted

    def history(r):
        return sorted((json.dumps(t.candidate.params, sort_keys=True), t.values) for t in r.trials)

    assert resumed.n_distinct == full.n_distinct == 10
    assert history(resumed) == history(full)
    assert [_key(c) for c in resumed.front] == [_key(c) for c in full.front]


def test_area_budget_keeps_front_within_and_skips_searches(files: Path):
    doc = _doc(constraints={"area_mm2": "base"}, objectives=["edp"], searcher="random", trials=8)
    spec = load_dse(_write(files, doc))
    budget = spec.area_budget_mm2
    assert budget == pytest.approx(area_mm2(spec.base))
    with ResultStore(files / "s.sqlite") as store:
        res = run_dse(spec, study_path=files / "st.sqlite", store=store, workers=1)
        over = [t for t in res.trials if t.candidate.status == "over_budget"]
        assert over, "the grid has candidates over the base's area"
        assert all(not t.feasible and math.isinf(t.values[0]) for t in over)
        searched_archs = {r["arch"] for r in store.rows(columns=("arch",))}
        assert not {t.candidate.arch.name for t in over} & searched_archs
    assert res.front and all(c.area_mm2 <= budget * (1 + 1e-9) for c in res.front)


def test_exact_inner_search_reports_certified_gap(files: Path):
    doc = _doc(objectives=["edp"], trials=2, searcher="random",
               parameters=[{"level": "GLB", "field": "fanout_x", "values": [2, 4]}],
               mapping={"searcher": "exact", "time_limit_s": 5})
    spec = load_dse(_write(files, doc))
    with ResultStore(files / "s.sqlite") as store:
        res = run_dse(spec, study_path=files / "st.sqlite", store=store)
    for t in res.trials:
        assert t.candidate.certified_gap is not None and t.candidate.certified_gap >= 0
    assert res.base.certified_gap is not None


def test_optional_level_and_bandwidth_parameters(files: Path):
    doc = _doc(parameters=[{"level": "RF", "field": "present", "values": [True, False]},
                           {"level": "DRAM", "field": "bandwidth_words_per_cycle", "values": [1.0, 8.0]}])
    spec = load_dse(_write(files, doc))
    a = spec.candidate({"RF.present": False, "DRAM.bandwidth_words_per_cycle": 8.0})
    assert a.level_names == ("DRAM", "GLB") and a.n_macs == spec.base.n_macs
    assert a.levels[0].read_bandwidth_words_per_cycle == 8.0 == a.levels[0].write_bandwidth_words_per_cycle
    b = spec.candidate({"RF.present": True, "DRAM.bandwidth_words_per_cycle": 1.0})
    assert b.level_names == spec.base.level_names and b.name != a.name


def test_capacity_parameter_moves_energy_by_the_rule(files: Path):
    spec = load_dse(_write(files, _doc()))
    small = spec.candidate({"GLB.capacity_words": 256, "GLB.fanout_x": 4, "GLB.fanout_y": 4})
    big = spec.candidate({"GLB.capacity_words": 4096, "GLB.fanout_x": 4, "GLB.fanout_y": 4})
    assert big.levels[1].read_energy_pj > small.levels[1].read_energy_pj
    assert area_mm2(big) > area_mm2(small)


@pytest.mark.parametrize(("change", "message"), [
    ({"colour": 1}, "colour: unknown key"),
    ({"parameters": [{"level": "GLB", "feild": "fanout_x"}]}, "feild: unknown key (did you mean 'field'?)"),
    ({"version": 2}, "version = 2; expected 1"),
    ({"base": "nope-arch"}, "base"),
    ({"parameters": [{"level": "XYZ", "field": "fanout_x", "values": [1]}]}, "parameters[0].level = 'XYZ'"),
    ({"parameters": [{"level": "GLB", "field": "size", "values": [1]}]}, "parameters[0].field = 'size'"),
    ({"parameters": [{"level": "GLB", "field": "fanout_x", "values": [1], "low": 1}]}, "either values"),
    ({"parameters": [{"level": "GLB", "field": "fanout_x", "values": [0]}]}, "parameters[0].values[0] = 0"),
    ({"parameters": [{"level": "GLB", "field": "fanout_x", "low": 4, "high": 2}]}, "high = 2 < low = 4"),
    ({"parameters": [{"level": "DRAM", "field": "capacity_words", "values": [4]}]}, "unbounded"),
    ({"parameters": [{"level": "DRAM", "field": "present", "values": [True, False]}]}, "outermost"),
    ({"objectives": ["edp", "speed"]}, "objectives[1] = 'speed'"),
    ({"objectives": ["area"]}, "add a workload objective"),
    ({"searcher": "anneal"}, "searcher = 'anneal'"),
    ({"constraints": {"area": 3}}, "constraints.area: unknown key (did you mean 'area_mm2'?)"),
    ({"constraints": {"area_mm2": -1}}, "constraints.area_mm2 = -1"),
    ({"mapping": {"searcher": "anealing"}}, "mapping.searcher"),
    ({"mapping": {"budget": 0}}, "mapping.budget = 0"),
    ({"mapping": {"model_options": {"nope": 1}}}, "mapping.model_options: cost model 'loopnest' has no option(s) ['nope']"),
    ({"mapping": {"model": "systolic", "model_options": {"dram_window": "wrong"}}}, "dram_window"),
    ({"workloads": [{"layer": "resnet50/nope"}]}, "workloads[0]"),
    ({"trials": "many"}, "trials = 'many'"),
    ({"searcher": "grid", "parameters": [{"level": "GLB", "field": "fanout_x", "low": 1, "high": 4}]},
     "grid needs values"),
])
def test_strict_file_errors(files: Path, change: dict, message: str):
    doc = _doc(**change)
    with pytest.raises(SpecError) as exc:
        parse_dse(doc, source="dse.yaml", base_dir=files)
    assert message in str(exc.value)
    assert str(exc.value).startswith("dse.yaml")


def test_smallest_issue_file_parses():
    doc = yaml.safe_load("""
version: 1
base: eyeriss-like
parameters:
  - {level: shared_glb, field: capacity_words, values: [16384, 32768, 65536, 131072]}
  - {level: shared_glb, field: fanout_x, values: [7, 14, 28]}
  - {level: shared_glb, field: fanout_y, values: [6, 12, 24]}
workloads:
  - layer: resnet50/conv3_1
objectives: [edp, area]
trials: 40
mapping: {searcher: anneal, budget: 200000}
""")
    spec = parse_dse(doc)
    assert spec.searcher == "tpe" and spec.mapping_budget == 200000 and len(spec.grid()) == 36


def test_cli_exit_2_on_bad_file(files: Path, capsys):
    bad = _write(files, _doc(objectives=["speed"]), "bad.yaml")
    assert main(["dse", str(bad), "--backend", "serial"]) == 2
    err = capsys.readouterr().err
    assert "objectives[0] = 'speed'" in err and "Traceback" not in err
    assert main(["dse", str(files / "missing.yaml"), "--backend", "serial"]) == 2


def test_cli_serial_json_and_report(files: Path, capsys, monkeypatch):
    monkeypatch.chdir(files)
    path = _write(files, _doc(trials=4, parameters=[{"level": "GLB", "field": "fanout_x", "values": [2, 4]}]))
    assert main(["dse", str(path), "--backend", "serial", "--seed", "0", "--json", "--out", "out"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["front"] and all({"params", "area_mm2", "edp", "arch_file"} <= set(r) for r in data["front"])
    arch_file = data["front"][0]["arch_file"]
    assert main(["show", "arch", arch_file]) == 0
    assert "mm^2" in capsys.readouterr().out
    for f in ("front.csv", "trials.csv", "front.png", "front.json"):
        assert (files / "out" / f).is_file()
    assert main(["report", "out"]) == 0
    out = capsys.readouterr().out
    assert "study t.seed0" in out and "base" in out
    # a rerun resumes: nothing new to do, same front
    assert main(["dse", str(path), "--backend", "serial", "--seed", "0", "--json", "--out", "out"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [r["params"] for r in again["front"]] == [r["params"] for r in data["front"]]


def test_changed_file_with_same_study_is_refused(files: Path):
    spec = load_dse(_write(files, _doc(trials=1)))
    with ResultStore(files / "s.sqlite") as store:
        run_dse(spec, study_path=files / "st.sqlite", store=store)
        other = dataclasses.replace(spec, objectives=("energy", "area"))
        with pytest.raises(SpecError, match="different design-space file"):
            run_dse(other, study_path=files / "st.sqlite", store=store)


def test_power_budget_makes_candidates_infeasible(files: Path):
    doc = _doc(trials=2, searcher="random", constraints={"power_w": 1e-12},
               parameters=[{"level": "GLB", "field": "fanout_x", "values": [2, 4]}])
    spec = load_dse(_write(files, doc))
    assert spec.power_budget_w == 1e-12
    with ResultStore(files / "s.sqlite") as store:
        res = run_dse(spec, study_path=files / "st.sqlite", store=store)
    assert res.trials and all(t.candidate.status == "ok" and not t.feasible for t in res.trials)
    assert all(t.candidate.power_w() > 1e-12 for t in res.trials)
    assert res.front == ()


def test_lower_bounds_and_certified_comparison_with_base(files: Path):
    doc = _doc(trials=2, searcher="random", parameters=[{"level": "GLB", "field": "fanout_x", "values": [2, 4]}])
    spec = load_dse(_write(files, doc))
    with ResultStore(files / "s.sqlite") as store:
        res = run_dse(spec, study_path=files / "st.sqlite", store=store)
    for t in res.trials:
        c = t.candidate
        assert c.lower_bound("edp") is not None and c.lower_bound("edp") <= c.edp
        assert c.lower_bound("cycles") <= c.cycles and c.lower_bound("energy") <= c.energy_pj
    data = res.to_dict()
    for row, c in zip(data["front"], res.front, strict=True):
        assert row["edp_lower_bound"] == c.lower_bound("edp")
        assert row["edp_beats_base_certified"] == (c.edp < res.base.lower_bound("edp"))
        assert not row["edp_beats_base_certified"] or row["edp_beats_base"]


def test_outputs_without_matplotlib_skip_the_plot_and_say_so(files: Path, capsys, monkeypatch):
    """matplotlib is the `plot` extra: without it the study still writes every other output."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    monkeypatch.chdir(files)
    path = _write(files, _doc(trials=2, parameters=[{"level": "GLB", "field": "fanout_x", "values": [2, 4]}]))
    assert main(["dse", str(path), "--backend", "serial", "--seed", "0", "--json", "--out", "out"]) == 0
    cap = capsys.readouterr()
    data = json.loads(cap.out)
    assert data["front"] and "matplotlib is not installed" in cap.err
    assert not (files / "out" / "front.png").exists() and (files / "out" / "front.csv").is_file()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped interrupt
def test_ctrl_c_dropped_in_a_finalizer_still_stops_the_study_at_the_next_check() -> None:
    """A KeyboardInterrupt raised inside a ``__del__`` (a progress bar's, say) is dropped by
    Python ("Exception ignored in"); the study's SIGINT handler notes it, so the next check
    between batches still stops the study."""
    import os
    import signal

    from accelmap.parallel.dse import _SigintNoted

    before = signal.getsignal(signal.SIGINT)
    noted = _SigintNoted().start()
    try:
        class Finalized:
            def __del__(self) -> None:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):  # the handler runs between bytecodes, here
                    pass

        obj = Finalized()
        del obj  # the KeyboardInterrupt it raises is dropped
        assert noted.seen
        with pytest.raises(KeyboardInterrupt):
            noted.check()
    finally:
        noted.stop()
    assert signal.getsignal(signal.SIGINT) is before


def test_mapping_model_options_reach_every_task_and_the_fingerprint(files: Path):
    """``mapping.model_options`` are the cost model's constructor options: every candidate's
    search tasks carry them (so the worker builds that model), they enter the task keys and
    the study's fingerprint, and a spec without them keeps the keys it had."""
    from accelmap.parallel.dse import _spec_fingerprint

    plain = parse_dse(_doc(), source="dse.yaml", base_dir=files)
    opts = parse_dse(_doc(mapping={"searcher": "random", "budget": 200, "model_options": {"engine": "numpy"}}),
                     source="dse.yaml", base_dir=files)
    assert opts.model_options == {"engine": "numpy"} and plain.model_options == {}
    arch = plain.candidate({p.name: (p.values or [p.low])[0] for p in plain.parameters})
    task = opts.tasks(arch)[0][0]
    assert task.model_options == {"engine": "numpy"}
    from accelmap.parallel.sweep import search_kwargs

    assert getattr(search_kwargs(task)["model"], "engine", None) == "numpy"
    assert "model_options" not in plain.tasks(arch)[0][0].spec()
    assert _spec_fingerprint(opts) != _spec_fingerprint(
        parse_dse(_doc(mapping={"searcher": "random", "budget": 200}), source="dse.yaml", base_dir=files))
