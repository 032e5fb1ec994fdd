"""`accelmap sweep` as a subprocess on a local Ray: Ctrl-C mid-sweep, then resume.

Ctrl-C in a terminal signals the whole foreground process group, so the test starts the
CLI in its own group and sends SIGINT to all of it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SWEEP = {
    "version": 1,
    "name": "ctrl-c",
    "workloads": [{"network": "resnet50", "layers": ["conv3_1", "conv4_1"]}],
    "architectures": [{"preset": "eyeriss-like"}],
    "searchers": ["anneal", "random"],
    "seeds": 3,
    "budget": 15000,
}


def _rows(store) -> list[tuple]:
    if not store.exists():
        return []
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT task_key, status, committed_at FROM results").fetchall()
    except sqlite3.OperationalError:  # table not created yet
        return []
    finally:
        conn.close()


def test_ctrl_c_then_resume(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump(SWEEP))
    store = tmp_path / "r.sqlite"
    cmd = [sys.executable, "-m", "accelmap.cli", "sweep", str(sweep), "--workers", "2", "--store", str(store),
           "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_rows(store)) < 2 and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    before = {k: (s, t) for k, s, t in _rows(store)}
    assert 2 <= len(before) < 12 and all(s == "ok" for s, _ in before.values())
    conn = sqlite3.connect(store)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()

    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{len(before)} already in" in done.stderr
    after = _rows(store)
    assert len(after) == 12 == len({k for k, _, _ in after})
    for k, s, t in after:  # rows committed before Ctrl-C are untouched
        if k in before:
            assert (s, t) == before[k]
