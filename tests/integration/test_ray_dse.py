"""`accelmap dse` on a local Ray of 2 workers: Ctrl-C, then a rerun that resumes and ends
with the front of an uninterrupted study (same seed, same workers)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from accelmap.arch.io import save_arch
from accelmap.parallel.dse import load_dse, run_dse
from accelmap.parallel.store import ResultStore
from accelmap.testing.examples import small_arch, small_conv
from accelmap.workloads.io import save_problem

pytest.importorskip("ray")
pytestmark = pytest.mark.ray

DOC = {
    "version": 1, "name": "rt", "base": "arch.yaml",
    "parameters": [
        {"level": "GLB", "field": "capacity_words", "values": [256, 1024, 4096]},
        {"level": "GLB", "field": "fanout_x", "values": [1, 2, 4]},
    ],
    "workloads": [{"file": "conv.yaml"}, {"file": "conv2.yaml"}],
    "objectives": ["edp", "area"], "trials": 8, "searcher": "nsga2",
    "mapping": {"searcher": "anneal", "budget": 1500},
}


def _complete(study: Path) -> int:
    if not study.exists():
        return 0
    try:
        con = sqlite3.connect(study, timeout=1)
        try:
            return int(con.execute("SELECT count(*) FROM trials WHERE state='COMPLETE'").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_ctrl_c_then_resume_matches_uninterrupted(tmp_path):
    save_arch(small_arch(), tmp_path / "arch.yaml")
    save_problem(small_conv(), tmp_path / "conv.yaml")
    save_problem(small_conv(k=16, c=8, p=4, q=4), tmp_path / "conv2.yaml")
    path = tmp_path / "rt.yaml"
    path.write_text(yaml.safe_dump(DOC))
    cmd = [sys.executable, "-m", "accelmap.cli", "dse", str(path), "--workers", "2", "--seed", "0",
           "--json", "--out", "out", "--no-plot"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    # Progress is read from the CLI's own trial lines (printed as each trial is told), not
    # by polling the study file: a reader of the SQLite file can wait on the writer's locks
    # until the study is nearly done, and a Ctrl-C then lands after the last trial.
    lines: list[str] = []

    def read_stderr() -> None:
        for line in proc.stderr:
            lines.append(line)

    pump = threading.Thread(target=read_stderr, daemon=True)
    pump.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and sum(ln.startswith("trial") for ln in lines) < 2 and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "".join(lines)
    told_before = sum(ln.startswith("trial") for ln in lines)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    pump.join(timeout=30)
    assert proc.returncode == 130, f"{told_before} trial(s) told before Ctrl-C\n" + "".join(lines)
    assert _complete(tmp_path / "out" / "study.sqlite") >= 2
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout)

    spec = load_dse(path)
    spec = dataclasses.replace(spec, name="rt.seed0")
    with ResultStore(tmp_path / "ref.sqlite") as store:
        ref = run_dse(spec, study_path=tmp_path / "ref-study.sqlite", store=store, workers=2)
    assert [(r["params"], r["edp"]) for r in resumed["front"]] == [(c.params, c.edp) for c in ref.front]
    assert resumed["distinct_candidates"] == ref.n_distinct == 8
