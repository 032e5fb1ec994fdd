"""`accelmap search` as a subprocess on small layers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelmap.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _cli_tree(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`_cli` on this tree's sources (a relative PYTHONPATH would not survive the cwd)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "accelmap.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=env)


def test_search_prints_loop_nest_metrics_gap_and_writes_result(tmp_path):
    r = _cli("search", "resnet50/conv3_1", "--arch", "eyeriss-like", "--budget", "3000", "--seed", "1",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "for " in r.stdout and "cycles" in r.stdout and "lower bound" in r.stdout
    out = tmp_path / "accelmap-out" / "resnet50" / "conv3_1" / "result.json"
    data = json.loads(out.read_text())
    assert data["n_evaluations"] == 3000 and data["best"]["edp"] > 0 and data["seed"] == 1


def test_search_json_has_the_best_metrics_and_mapping(tmp_path):
    r = _cli("search", "resnet50/conv3_1", "--arch", "eyeriss-like", "--budget", "2000", "--searcher", "random",
             "--json", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    best = data["best"]
    assert best["cycles"] > 0 and best["energy_pj"] > 0 and best["edp"] == pytest.approx(best["cycles"] * best["energy_pj"])
    assert "mapping" in best and data["searcher"] == "random"
    assert (tmp_path / "o" / "result.json").exists()


def test_pareto_objective_prints_a_front(tmp_path):
    r = _cli("search", "resnet50/conv3_1", "--arch", "eyeriss-like", "--budget", "2000", "--searcher", "genetic",
             "--objective", "energy,cycles", "--out", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Pareto front" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--searcher", "anneall"], "Did you mean"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--objective", "speed"], "objective"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--budget", "0"], "--budget"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--storage", "sqlite:///x.db"], "--searcher optuna"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--searcher-option", "bogus=1"], "no option"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--model-option", "bogus=1"], "has no option(s) ['bogus']"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--model-option", "engine"], "expected KEY=VALUE"),
    (["resnet50/conv3_1", "--arch", "systolic", "--model", "systolic", "--model-option", "dram_window=wrong"],
     "dram_window"),
    (["--network", "resnet50", "--arch", "eyeriss-like", "--searcher", "exact", "--network-time", "5",
      "--workers", "2", "--model-option", "engine=numpy"], "--model-option is not taken"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--model-option", "bogus=1", "--seeds", "2",
      "--backend", "serial"], "has no option(s) ['bogus']"),
    (["--arch", "eyeriss-like"], "LAYER or --network"),
    (["resnet50/nope", "--arch", "eyeriss-like"], "layer"),
    (["resnet50/conv3_1", "--arch", "eyeriss-like", "--searcher", "exhaustive"], "exhaustive"),
])
def test_bad_options_exit_2_with_a_message(tmp_path, args, message):
    r = _cli("search", *args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_network_search_prints_a_table_with_totals(tmp_path):
    r = _cli("search", "--network", "resnet50", "--arch", "eyeriss-like", "--budget", "300", "--searcher",
             "random", "--out", str(tmp_path / "net"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "total (x repeat)" in r.stdout
    data = json.loads((tmp_path / "net" / "result.json").read_text())
    assert data["totals"]["layers"] >= 50 and data["totals"]["complete"]
    assert data["totals"]["distinct_layers"] == len(data["layers"]) < data["totals"]["layers"]


_TIMELOOP_CONV = """\
problem:
  shape:
    name: CNN-Layer
    dimensions: [C, M, R, S, N, P, Q]
    coefficients: [{name: Wstride, default: 1}, {name: Hstride, default: 1}]
    data-spaces:
    - {name: Weights, projection: [[[C]], [[M]], [[R]], [[S]]]}
    - {name: Inputs, projection: [[[N]], [[C]], [[R], [P, Wstride]], [[S], [Q, Hstride]]]}
    - {name: Outputs, projection: [[[N]], [[M]], [[Q]], [[P]]], read-write: true}
  instance: {C: 16, M: 16, R: 3, S: 3, N: 1, P: 7, Q: 7, Wstride: 2, Hstride: 2}
"""


def test_timeloop_problem_runs_on_the_aspect_model_and_a_batched_matmul_exits_2(tmp_path):
    """Issue 16: a Timeloop CNN-Layer (dims C M R S N P Q) is a convolution to every model;
    a kind the model does not take exits 2 naming the kind found and the kinds taken."""
    prob = tmp_path / "prob.yaml"
    prob.write_text(_TIMELOOP_CONV)
    r = _cli_tree("search", str(prob), "--arch", "eyeriss-like", "--model", "aspect", "--budget", "3000",
             "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "best shape" in r.stdout
    r = _cli_tree("search", "bert_base_128/attn_qk", "--arch", "eyeriss-like", "--model", "aspect", "--budget", "100",
             cwd=tmp_path)
    assert r.returncode == 2
    assert "the aspect model takes convolution, depthwise convolution, GEMM; found batched matmul" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_problem_of_no_modelled_kind_exits_2_on_the_systolic_model(tmp_path):
    prob = tmp_path / "odd.yaml"
    prob.write_text("version: 1\nproblem:\n  name: odd\n  dims: {i: 4, j: 4, x: 3}\n  tensors:\n"
                    "    - {name: A, role: input, projection: [[i], [j]]}\n"
                    "    - {name: B, role: weight, projection: [[j]]}\n"
                    "    - {name: Y, role: output, projection: [[i], [x]]}\n")
    r = _cli_tree("search", str(prob), "--arch", "systolic", "--model", "systolic", "--budget", "100",
                  "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "the systolic model takes convolution" in r.stderr and "found other (dim x indexes ['Y']" in r.stderr


def test_padding_runs_the_exact_search_on_the_loopnest_model(tmp_path):
    """`--padding` on the loopnest model (imperfect factorization): the exact search proves the
    optimum of the padded space, a padded mapping that beats the perfect-factor optimum (M = 7
    cannot be unrolled over the 4 x 2 array without padding); the JSON reports the real MACs."""
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "search"))
    from test_exact import arch8

    from accelmap.arch.io import save_arch
    from accelmap.workloads.builders import matmul
    from accelmap.workloads.io import save_problem

    save_problem(matmul("g7", m=7, n=1, k=2), tmp_path / "g7.yaml")
    save_arch(arch8(), tmp_path / "a8.yaml")
    runs = {}
    for pad in (True, False):
        r = _cli_tree("search", "g7.yaml", "--arch", "a8.yaml", "--searcher", "exact", "--searcher-option",
                      "warm_budget=2000", "--json", "--no-progress", *(["--padding"] if pad else []),
                      "--out", str(tmp_path / f"o{pad}"), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        runs[pad] = json.loads(r.stdout)
    d = runs[True]
    assert d["proven_optimal"] is True and d["bound_kind"] == "exact" and d["config"]["allow_padding"] is True
    assert d["certificate"]["gap"] == 0.0 and d["lower_bound"]["edp"] <= d["best"]["edp"] * (1 + 1e-12)
    assert d["best"]["metrics"]["macs"] == 14 and d["best"]["metrics"]["compute_energy_pj"] == 16.0  # 8 x 2 padded
    spatial = np.array(d["best"]["mapping"]["arrays"]["spatial"])
    temporal = np.array(d["best"]["mapping"]["arrays"]["temporal"])
    assert temporal[:, 0].prod() * spatial[:, 0].prod() == 8  # M padded from 7 to 8
    assert runs[False]["proven_optimal"] and d["best"]["edp"] < runs[False]["best"]["edp"]


def test_searcher_options_on_device_cuda_are_the_gpu_searches_own():
    """`--searcher-option` with `--device cuda` is checked against the GPU searches' options
    (anneal: orders, lanes and restart; random: none), not the CPU searcher's constructor."""
    import argparse

    from accelmap.cli import UsageError
    from accelmap.cli._options import searcher_options

    def opts(searcher, device, *items):
        ns = argparse.Namespace(searcher_option=list(items), storage=None, study_name=None, device=device)
        return searcher_options(ns, searcher, "layer", "arch")

    assert opts("anneal", "cuda", "orders=16", "lanes=8") == {"orders": 16, "lanes": 8}
    assert opts("anneal", "cuda", "restart=0") == {"restart": 0}
    for searcher, device, item in (("anneal", "cuda", "chains=4"), ("random", "cuda", "orders=16"),
                                   ("anneal", "cpu", "lanes=8")):
        try:
            opts(searcher, device, item)
        except UsageError as exc:
            assert "no option" in str(exc)
        else:
            raise AssertionError(f"expected a UsageError for {searcher} {device} {item}")


def test_model_options_build_the_model_the_search_scores_with(tmp_path):
    """`--model-option` reaches the cost model's constructor: a systolic search with
    `dram_window=exact` reports, and records, the exact mode's counts of its best mapping
    (SCALE-Sim's DRAM reads), which the default mode's estimate need not equal."""
    from accelmap.arch.io import load_arch
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.mapper.io import mapping_from_dict
    from accelmap.workloads.io import load_problem

    r = _cli("search", "resnet50/conv3_1", "--arch", "systolic", "--model", "systolic", "--budget", "1000",
             "--searcher", "random", "--json", "--no-progress", "--model-option", "dram_window=exact",
             "--model-option", "max-walk-entries=4096", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["config"]["model_options"] == {"dram_window": "exact", "max_walk_entries": 4096}
    problem, arch = load_problem("resnet50/conv3_1"), load_arch("systolic")
    best = mapping_from_dict(d["best"]["mapping"]["mapping"], problem, arch).as_batch()
    exact = SystolicModel(dram_window="exact", max_walk_entries=4096).evaluate(problem, arch, best)
    assert d["best"]["metrics"]["energy_pj"] == pytest.approx(float(exact.energy_pj[0]), rel=1e-12)
    assert d["best"]["metrics"]["cycles"] == int(exact.cycles[0])


def test_model_from_options_checks_keys_against_the_constructor():
    from accelmap.cli import UsageError
    from accelmap.cli._options import model_from_options, model_options
    from accelmap.costmodels.loopnest import LoopNestModel

    assert model_from_options("loopnest", {}) == "loopnest"  # no options: the search builds its own
    m = model_from_options("loopnest", model_options(["engine=numpy"]))
    assert isinstance(m, LoopNestModel) and m.engine == "numpy"
    with pytest.raises(UsageError, match="its options: .*engine"):
        model_from_options("loopnest", {"nope": 1})


def test_model_options_reach_the_search_as_a_built_model(tmp_path, monkeypatch):
    """The search is handed the model built with the options (not its name), and the printed
    metrics come from that model."""
    import accelmap.search.api as api
    from accelmap.cli import main
    from accelmap.costmodels.systolic import SystolicModel

    seen = []
    real = api.search

    def spy(*a, **kw):
        seen.append(kw["model"])
        return real(*a, **kw)

    monkeypatch.setattr(api, "search", spy)
    rc = main(["search", "resnet50/conv3_1", "--arch", "systolic", "--model", "systolic", "--budget", "300",
               "--searcher", "random", "--no-progress", "--model-option", "dram_window=estimate",
               "--model-option", "max_sample_entries=0", "--out", str(tmp_path / "o")])
    assert rc == 0
    assert len(seen) == 1 and isinstance(seen[0], SystolicModel)
    assert seen[0].dram_window == "estimate" and seen[0].max_sample_entries == 0


def test_evaluate_takes_model_options(tmp_path, capsys):
    """`accelmap evaluate --model-option`: SCALE-Sim's own output-stationary mapping of conv3_1,
    whose ifmap DRAM reads the estimate and the walk count differently, reports each mode's
    energy as that mode's model gives it; a bad option exits 2 before any file is read."""
    from accelmap.arch.presets import preset
    from accelmap.cli import main
    from accelmap.costmodels.systolic import Dataflow, SystolicModel
    from accelmap.costmodels.systolic_variants import scalesim_mapping
    from accelmap.mapper.io import save_mapping
    from accelmap.workloads.zoo import layer

    problem, arch = layer("resnet50/conv3_1"), preset("systolic")
    mapping = scalesim_mapping(problem, arch, Dataflow(0))[0]
    save_mapping(mapping, problem, arch, tmp_path / "m.yaml")
    energy = {}
    for mode in ("estimate", "exact"):
        assert main(["evaluate", "resnet50/conv3_1", "systolic", str(tmp_path / "m.yaml"), "--model", "systolic",
                     "--json", "--model-option", f"dram_window={mode}"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["model_options"] == {"dram_window": mode}
        want = SystolicModel(dram_window=mode).evaluate(problem, arch, mapping.as_batch()).energy_pj[0]
        assert out["energy_pj"] == pytest.approx(float(want), rel=1e-12)
        energy[mode] = out["energy_pj"]
    assert energy["estimate"] != pytest.approx(energy["exact"], rel=1e-6)  # the option made the difference
    assert main(["evaluate", "resnet50/conv3_1", "systolic", str(tmp_path / "missing.yaml"), "--model", "systolic",
                 "--model-option", "window=exact"]) == 2
    assert "has no option(s) ['window']" in capsys.readouterr().err


def test_portfolio_members_build_the_model_with_its_options(tmp_path):
    """A portfolio (here two seeds on the serial backend) takes `--model-option` too: every
    member builds the model from its name and the options, the result records them, and the
    best mapping's metrics are that model's."""
    from accelmap.arch.io import load_arch
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.mapper.io import mapping_from_dict
    from accelmap.workloads.io import load_problem

    r = _cli("search", "resnet50/conv3_1", "--arch", "systolic", "--model", "systolic", "--budget", "300",
             "--searcher", "random", "--seeds", "2", "--backend", "serial", "--no-store", "--json",
             "--no-progress", "--model-option", "dram_window=exact", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["config"]["model_options"] == {"dram_window": "exact"}
    problem, arch = load_problem("resnet50/conv3_1"), load_arch("systolic")
    best = mapping_from_dict(d["best"]["mapping"]["mapping"], problem, arch).as_batch()
    exact = SystolicModel(dram_window="exact").evaluate(problem, arch, best)
    assert d["best"]["metrics"]["energy_pj"] == pytest.approx(float(exact.energy_pj[0]), rel=1e-12)


def _ranked_with(tmp_path, capsys, *opts: str) -> dict:
    from accelmap.cli import main

    out = tmp_path / f"o{len(opts)}"
    assert main(["search", "resnet50/conv3_1", "--arch", "systolic", "--model", "systolic", "--budget", "200",
                 "--searcher", "random", "--no-progress", "--json", *opts, "--out", str(out)]) == 0
    capsys.readouterr()
    return json.loads((out / "result.json").read_text())["config"]["ranked_with"]


def test_search_sample_entries_reaches_the_ranking_model(tmp_path, capsys):
    """A systolic search ranks with the estimate by default and reports the model's counts
    (``ranked_with`` in result.json); ``--model-option search_sample_entries=N`` sets the
    ranking model's sample (equal to ``max_sample_entries``: the reporting model itself); a
    bad value exits 2 with the model's message."""
    from accelmap.cli import main

    assert _ranked_with(tmp_path, capsys) == {"max_sample_entries": 0, "same_as_reported": False}
    assert _ranked_with(tmp_path, capsys, "--model-option", "max_sample_entries=0", "--model-option",
                        "search_sample_entries=0") == {"max_sample_entries": 0, "same_as_reported": True}
    for bad in ("-1", "2.5", "many"):
        assert main(["search", "resnet50/conv3_1", "--arch", "systolic", "--model", "systolic", "--budget", "200",
                     "--no-progress", "--model-option", f"search_sample_entries={bad}",
                     "--out", str(tmp_path / "bad")]) == 2
        assert "search_sample_entries" in capsys.readouterr().err


@pytest.mark.slow
def test_search_ranks_within_two_percent_from_the_command_line(tmp_path, capsys):
    """`--model-option search_sample_entries=524288`: the search ranks with what the model
    reports (the guarded sample of 2^19 entries), as the docs tell a user to ask for it."""
    assert _ranked_with(tmp_path, capsys, "--model-option", "search_sample_entries=524288") == {
        "max_sample_entries": 524288, "same_as_reported": True}
