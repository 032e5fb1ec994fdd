"""Sweeps on a real local Ray (2 CPUs): a worker killed mid-task, and interrupt + resume.

Both tests share one Ray instance (``ray.init`` costs seconds). Task functions are the
test's own, shipped to the workers by value.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from accelmap.parallel.backend import RayBackend
from accelmap.parallel.store import ResultStore
from accelmap.parallel.sweep import Sweep, run_sweep
from accelmap.testing.examples import small_arch, small_conv

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def local_ray():
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=128 * 1024**2)
    yield
    ray.shutdown()


def marked_task(task) -> dict:
    """Leaves ``<dir>/<key>.<pid>`` when it starts; the first attempt of the victim waits to be killed."""
    marks = Path(task.searcher_options["marks"])
    first_attempt = not any(marks.glob(f"{task.key}.*"))
    (marks / f"{task.key}.{os.getpid()}").write_text("")
    if task.seed_index == task.searcher_options.get("victim", -1) and first_attempt:
        (marks / f"victim.{os.getpid()}").write_text("")
        time.sleep(60)  # killed long before this ends
    time.sleep(task.searcher_options.get("sleep_s", 0.05))
    return {"cycles": 1.0 + task.seed, "energy_pj": 2.0, "edp": 2.0 * (1.0 + task.seed), "pid": os.getpid()}


def _sweep(marks: Path, n: int, **options) -> Sweep:
    return Sweep(name="ray-test", workloads=((None, small_conv()),), archs=(small_arch(),),
                 searchers=(("random", {"marks": str(marks), **options}),), seeds=tuple(range(n)))


def test_killed_worker_loses_nothing(local_ray, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    sweep = _sweep(marks, 6, victim=1)
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            found = list(marks.glob("victim.*"))
            if found:
                pid = int(found[0].suffix[1:])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    with ResultStore(tmp_path / "r.sqlite") as store:
        summary = run_sweep(sweep, store=store, backend=RayBackend(workers=2), task_fn=marked_task)
        thread.join(timeout=5)
        assert killed, "the victim task never started"
        assert (summary.n_run, summary.n_ok, summary.n_failed, summary.n_remaining) == (6, 6, 0, 0)
        rows = list(store.rows())
        keys = [r["task_key"] for r in rows]
        assert len(rows) == 6 and len(set(keys)) == 6
        assert {k for k in keys} == {t.key for t in sweep.tasks()}
        assert all(r["status"] == "ok" and r["attempts"] == 1 for r in rows)
        victim = next(t for t in sweep.tasks() if t.seed_index == 1)
        starts = sorted(int(p.suffix[1:]) for p in marks.glob(f"{victim.key}.*"))
        assert killed[0] in starts and len(starts) == 2  # killed once, retried once on a new worker
        assert store.get(victim.key)["result_json"]["pid"] != killed[0]
    assert ray.is_initialized()  # the backend did not own Ray, so it left it running


def test_interrupt_and_resume(local_ray, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    sweep = _sweep(marks, 8, sleep_s=0.2)
    committed = []

    def stop_after_three(task, outcome):
        committed.append(task.key)
        if len(committed) == 3:
            raise KeyboardInterrupt

    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        first = run_sweep(sweep, store=store, backend=RayBackend(workers=2), task_fn=marked_task,
                          on_result=stop_after_three)
    assert first.interrupted and first.n_run == 3 and first.n_remaining == 5
    with ResultStore(path) as store:
        assert store.done_keys() == set(committed)
        second = run_sweep(sweep, store=store, backend=RayBackend(workers=2), task_fn=marked_task)
        assert (second.n_skipped, second.n_run, second.n_remaining, second.interrupted) == (3, 5, 0, False)
        keys = [r["task_key"] for r in store.rows()]
        assert sorted(keys) == sorted(t.key for t in sweep.tasks())


def test_portfolio_of_real_searches_on_ray(local_ray, tmp_path):
    from accelmap.parallel.portfolio import run_portfolio

    res = run_portfolio(small_conv(), small_arch(), searchers=("random", "anneal"), seeds=2, seed=3,
                        budget=300, backend=RayBackend(workers=2))
    assert len(res.members) == 4 and all(m.status == "ok" for m in res.members)
    assert res.best.best is not None
    assert res.best.edp == min(m.edp for m in res.members)
    assert {m.worker for m in res.members} != {None}
    # the same portfolio in-process finds the same members' results (same seeds, same budget)
    serial = run_portfolio(small_conv(), small_arch(), searchers=("random", "anneal"), seeds=2, seed=3,
                           budget=300, backend="serial")
    assert [m.edp for m in serial.members] == [m.edp for m in res.members]


def suicidal_task(task) -> dict:
    if task.seed == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"cycles": 1.0, "energy_pj": 1.0, "edp": 1.0}


def test_worker_lost_on_every_try_is_an_error_row(local_ray, tmp_path):
    sweep = _sweep(tmp_path, 3)
    with ResultStore(tmp_path / "r.sqlite") as store:
        s = run_sweep(sweep, store=store, backend=RayBackend(workers=2, max_retries=0), task_fn=suicidal_task)
        assert (s.n_ok, s.n_failed, s.n_remaining) == (2, 1, 1)
        (row,) = store.rows(status="error")
        assert row["seed"] == 0 and "failed after retries" in row["error"]
        # the next run retries only that task
        s = run_sweep(sweep, store=store, backend=RayBackend(workers=2), task_fn=marked_task)
        assert (s.n_skipped, s.n_run, s.n_ok, s.n_remaining) == (2, 1, 1, 0)
        assert store.get(row["task_key"])["attempts"] == 2


def test_portfolio_islands_on_ray_match_serial(local_ray):
    from accelmap.parallel.portfolio import run_portfolio

    kw = dict(searchers=("anneal", "genetic"), seeds=1, seed=9, budget=400, rounds=2)
    on_ray = run_portfolio(small_conv(), small_arch(), backend=RayBackend(workers=2), **kw)
    serial = run_portfolio(small_conv(), small_arch(), backend="serial", **kw)
    assert [m.best_objective for m in on_ray.members] == [m.best_objective for m in serial.members]
    assert on_ray.best.best_objective == serial.best.best_objective
