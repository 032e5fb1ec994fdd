"""`accelmap sweep` and `accelmap report`, in-process, serial backend, tiny real searches."""

from __future__ import annotations

import csv

import pytest
import yaml

from accelmap.cli import main
from accelmap.parallel.store import ResultStore

SWEEP = {
    "version": 1,
    "name": "cli",
    "workloads": [{"network": "resnet50", "layers": ["fc", "conv3_1"]}],
    "architectures": [{"preset": "eyeriss-like",
                       "variants": {"buffers": [{"level": "shared_glb", "capacity_words": [32768, 65536]}]}}],
    "searchers": ["random"],
    "seeds": 1,
    "budget": 100,
}


@pytest.fixture
def sweep_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SWEEP))
    return path


def test_sweep_resume_and_report(sweep_file, tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    argv = ["sweep", str(sweep_file), "--backend", "serial", "--store", str(store), "--no-progress"]
    assert main(argv + ["--dry-run"]) == 0
    assert "= 4 tasks; 0 already" in capsys.readouterr().err
    assert main(argv + ["--max-tasks", "1"]) == 0
    err = capsys.readouterr().err
    assert "1 of 4 done" in err and "3 task(s) left" in err
    assert main(argv) == 0
    assert "3 task(s) finished" in capsys.readouterr().err
    assert main(argv) == 0  # nothing left to do
    assert "4 already in" in capsys.readouterr().err
    with ResultStore(store) as s:
        rows = list(s.rows())
        assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
        assert all(r["mapping_json"] and r["metrics_json"]["edp"] == pytest.approx(r["edp"]) for r in rows)
        assert all(r["n_evaluations"] >= 1 for r in rows)

    out_csv = tmp_path / "best.csv"
    assert main(["report", str(store), "--csv", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "best edp per layer and arch" in out and "network totals" in out
    with open(out_csv) as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 4 and {r["layer"] for r in table} == {"fc1000", "res3a_branch2b"}
    all_csv = tmp_path / "all.csv"
    assert main(["report", str(store), "--csv", str(all_csv), "--all", "--metric", "energy"]) == 0
    with open(all_csv) as fh:
        assert len(list(csv.DictReader(fh))) == 4


@pytest.mark.slow  # matplotlib's import and a savefig take a second or two
def test_report_plot(sweep_file, tmp_path):
    pytest.importorskip("matplotlib")
    store = tmp_path / "r.sqlite"
    assert main(["sweep", str(sweep_file), "--backend", "serial", "--store", str(store), "--no-progress",
                 "--max-tasks", "2"]) == 0
    png = tmp_path / "best.png"
    assert main(["report", str(store), "--plot", str(png)]) == 0
    assert png.stat().st_size > 1000


def test_user_errors_exit_2(tmp_path, sweep_file, capsys):
    assert main(["report", str(tmp_path / "missing.sqlite")]) == 2
    assert "no such results store" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SWEEP, "seeds": 0}))
    assert main(["sweep", str(bad), "--backend", "serial"]) == 2
    assert "seeds = 0" in capsys.readouterr().err
    assert main(["sweep", str(sweep_file), "--backend", "serial", "--address", "auto"]) == 2
    assert main(["sweep", str(sweep_file), "--workers", "0"]) == 2


def test_search_portfolio_serial(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["search", "resnet50/fc", "--arch", "eyeriss-like", "--searcher", "random,anneal", "--budget", "200",
            "--workers", "2", "--backend", "serial", "--rounds", "2", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "best of 2 searches" in captured.out and "2 rounds with migration" in captured.err
    import json

    portfolio = json.loads((out / "portfolio.json").read_text())
    assert len(portfolio["members"]) == 2 and portfolio["rounds"] == 2
    assert json.loads((out / "result.json").read_text())["best"]["edp"] == pytest.approx(
        min(m["edp"] for m in portfolio["members"]))
    assert main(["search", "--network", "resnet50", "--arch", "eyeriss-like", "--workers", "2"]) == 2
    assert "use `accelmap sweep`" in capsys.readouterr().err
    assert main(["search", "resnet50/fc", "--arch", "eyeriss-like", "--backend", "serial", "--address", "auto"]) == 2
    capsys.readouterr()
    # options only a portfolio uses are refused without one (they would be ignored)
    for extra in (["--store", str(tmp_path / "s.sqlite")], ["--no-store"], ["--elites", "5"]):
        assert main(["search", "resnet50/fc", "--arch", "eyeriss-like", "--budget", "50", *extra]) == 2
        assert "apply to a portfolio only" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()
