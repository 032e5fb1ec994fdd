"""A portfolio search commits every member to the SQLite results store by default."""

from __future__ import annotations

import sqlite3

from accelmap.cli import main


def test_portfolio_commits_members_to_the_default_store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["search", "resnet50/res2a_branch2a", "--arch", "eyeriss-like", "--backend", "serial",
                 "--seeds", "2", "--budget", "1500", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "results committed to accelmap-results.sqlite" in out
    with sqlite3.connect(tmp_path / "accelmap-results.sqlite") as db:
        rows = db.execute("SELECT status, edp FROM results").fetchall()
    assert len(rows) == 2 and all(status == "ok" and edp > 0 for status, edp in rows)


def test_no_store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["search", "resnet50/res2a_branch2a", "--arch", "eyeriss-like", "--backend", "serial",
                 "--seeds", "1", "--budget", "1000", "--no-store", "--no-progress"])
    assert code == 0
    assert not (tmp_path / "accelmap-results.sqlite").exists()
    code = main(["search", "resnet50/res2a_branch2a", "--arch", "eyeriss-like", "--backend", "serial",
                 "--no-store", "--store", "x.sqlite"])
    assert code == 2 and "contradict" in capsys.readouterr().err
