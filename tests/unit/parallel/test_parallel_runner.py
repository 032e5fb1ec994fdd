"""The sweep runner on the serial backend, with injected task functions."""

from __future__ import annotations

import os

import pytest

from accelmap.errors import InfeasibleSpaceError
from accelmap.parallel.backend import SerialBackend, execute, make_backend
from accelmap.parallel.store import ResultStore
from accelmap.parallel.sweep import Sweep, run_sweep, spawn_seeds
from accelmap.testing.examples import small_arch, small_conv


def fake_search(task) -> dict:
    """Deterministic stand-in for a search: metrics from the seed and the layer size."""
    cycles = float(task.problem.macs // 16 + task.seed % 97)
    energy = float(task.problem.macs) * (1 + task.seed % 5)
    return {"cycles": cycles, "energy_pj": energy, "edp": cycles * energy,
            "mapping": {"seed": task.seed}, "n_evaluations": 10, "pid": os.getpid()}


def picky_search(task) -> dict:
    if task.arch.name.endswith("GLB=8w]"):
        raise InfeasibleSpaceError("nothing fits an 8-word GLB")
    if task.searcher == "anneal":
        raise RuntimeError("searcher exploded")
    return fake_search(task)


def _sweep(n_seeds: int = 2, **kw) -> Sweep:
    return Sweep(
        name="t",
        workloads=(("net", small_conv(k=8)), ("net", small_conv(k=16))),
        archs=(small_arch(),),
        searchers=(("random", {}), ("genetic", {"population": 4})),
        seeds=spawn_seeds(0, n_seeds),
        budget=50,
        **kw,
    )


def test_sweep_runs_every_task_once(tmp_path):
    sweep = _sweep()
    with ResultStore(tmp_path / "r.sqlite") as store:
        summary = run_sweep(sweep, store=store, task_fn=fake_search)
        assert summary.n_tasks == 8 == sweep.n_tasks
        assert (summary.n_run, summary.n_ok, summary.n_remaining, summary.interrupted) == (8, 8, 0, False)
        rows = list(store.rows())
        assert len({r["task_key"] for r in rows}) == 8 == len(rows)
        r = rows[0]
        assert r["status"] == "ok" and r["searcher"] in ("random", "genetic")
        assert r["mapping_json"] == {"seed": r["seed"]}
        assert r["result_json"]["pid"] == os.getpid()
        assert r["task_json"]["searcher_options"] in ({}, {"population": 4})
        assert r["worker"].endswith(f":{os.getpid()}") and r["wall_s"] >= 0
        # a second run skips everything
        again = run_sweep(sweep, store=store, task_fn=fake_search)
        assert (again.n_skipped, again.n_run) == (8, 0)
        assert store.count() == 8


def test_more_seeds_later_only_runs_new_replicas(tmp_path):
    with ResultStore(tmp_path / "r.sqlite") as store:
        run_sweep(_sweep(n_seeds=1), store=store, task_fn=fake_search)
        summary = run_sweep(_sweep(n_seeds=2), store=store, task_fn=fake_search)
        assert (summary.n_skipped, summary.n_run) == (4, 4)


def test_interrupt_then_resume(tmp_path):
    sweep = _sweep()
    seen = []

    def stop_after_three(task, outcome):
        seen.append(task.key)
        if len(seen) == 3:
            raise KeyboardInterrupt

    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        first = run_sweep(sweep, store=store, task_fn=fake_search, on_result=stop_after_three)
    assert first.interrupted and first.n_run == 3 and first.n_remaining == 5
    with ResultStore(path) as store:  # a fresh process would reopen the file like this
        assert store.done_keys() == set(seen)
        second = run_sweep(sweep, store=store, task_fn=fake_search)
        assert (second.n_skipped, second.n_run, second.n_remaining) == (3, 5, 0)
        keys = [r["task_key"] for r in store.rows()]
        assert len(keys) == len(set(keys)) == 8
        assert all(r["attempts"] == 1 for r in store.rows())


def test_max_tasks_leaves_the_rest(tmp_path):
    with ResultStore(tmp_path / "r.sqlite") as store:
        s = run_sweep(_sweep(), store=store, task_fn=fake_search, max_tasks=5)
        assert (s.n_run, s.n_remaining) == (5, 3)
        s = run_sweep(_sweep(), store=store, task_fn=fake_search)
        assert (s.n_skipped, s.n_run, s.n_remaining) == (5, 3, 0)


def test_failures_are_recorded_and_retried(tmp_path):
    from accelmap.parallel.sweep import arch_variants

    archs = tuple(arch_variants(small_arch(), {"buffers": [{"level": "GLB", "capacity_words": [8, 1024]}]}))
    sweep = Sweep(name="t", workloads=((None, small_conv()),), archs=archs,
                  searchers=(("random", {}), ("anneal", {})), seeds=(1,))
    with ResultStore(tmp_path / "r.sqlite") as store:
        s = run_sweep(sweep, store=store, task_fn=picky_search)
        assert (s.n_ok, s.n_infeasible, s.n_failed, s.n_remaining) == (1, 2, 1, 1)
        errors = list(store.rows(status="error"))
        assert all("searcher exploded" in r["error"] for r in errors)
        infeasible = next(store.rows(status="infeasible"))
        assert "8-word" in infeasible["error"] and infeasible["edp"] is None
        # the next run retries only the error row; it fails again and counts its attempts
        s = run_sweep(sweep, store=store, task_fn=picky_search)
        assert (s.n_skipped, s.n_run, s.n_failed) == (3, 1, 1)
        assert {r["attempts"] for r in store.rows(status="error")} == {2}
        # and a fixed task function finishes them
        s = run_sweep(sweep, store=store, task_fn=fake_search)
        assert (s.n_run, s.n_ok, s.n_remaining) == (1, 1, 0)
        assert store.count() == 4


def test_execute_wraps_outcomes():
    out = execute(lambda t: {"cycles": 1.0, "status": "ok"}, None)
    assert out["status"] == "ok" and out["payload"] == {"cycles": 1.0} and out["error"] is None
    out = execute(lambda t: 1 / 0, None)
    assert out["status"] == "error" and "ZeroDivisionError" in out["error"]

    def lost(t):
        raise MemoryError

    with pytest.raises(MemoryError):  # system failures propagate for Ray to retry
        execute(lost, None)


def test_make_backend_serial():
    assert isinstance(make_backend("serial"), SerialBackend)
    from accelmap.errors import SpecError

    with pytest.raises(SpecError):
        make_backend("serial", address="auto")
    with pytest.raises(SpecError):
        make_backend("dask")
