from __future__ import annotations

import dataclasses
import os
import signal

import numpy as np
import pytest
from toy import ToyModel, tiny_arch, tiny_problem

from accelmap._registry import searchers
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.mapper.check import Reason
from accelmap.mapper.space import MapSpace
from accelmap.search.driver import Driver, DriverOptions
from accelmap.search.objectives import non_dominated, parse_objective


@pytest.fixture(scope="module")
def setup():
    p, a = tiny_problem(), tiny_arch()
    return p, a, MapSpace(p, a)


def _run(setup, searcher="random", *, model=None, objective="edp", seed=0, **opts):
    p, a, s = setup
    searcher_options = opts.pop("searcher_options", None)
    d = Driver(p, a, s, model or ToyModel(), searchers.get(searcher), objective=parse_objective(objective),
               seed=seed, options=DriverOptions(**opts), searcher_options=searcher_options)
    return d.run()


def test_budget_is_exact_and_history_monotone(setup):
    r = _run(setup, budget=5000, batch_size=700)
    assert r.n_evaluations == 5000 and r.stop_reason == "budget"
    h = r.history
    assert list(h.evaluations) == sorted(h.evaluations) and h.evaluations[-1] == 5000
    assert all(b2 <= b1 for b1, b2 in zip(h.best[:-1], h.best[1:], strict=False))
    assert h.best[-1] == r.best_objective == pytest.approx(r.edp)
    assert r.best is not None and r.best_metrics["valid"]
    assert sum(r.invalid_reasons.values()) == r.n_evaluations - r.n_valid


def test_same_seed_same_result_different_seed_differs(setup):
    a = _run(setup, "anneal", budget=3000, seed=7)
    b = _run(setup, "anneal", budget=3000, seed=7)
    c = _run(setup, "random", budget=500, seed=8)
    d = _run(setup, "random", budget=500, seed=9)
    assert a.best_x == b.best_x and a.history.best == b.history.best
    assert c.history.best != d.history.best or c.best_x != d.best_x


def test_time_limit_and_early_stop(setup):
    r = _run(setup, budget=None, time_limit_s=0.05, batch_size=256)
    assert r.stop_reason == "time" and r.n_evaluations > 0
    r = _run(setup, budget=10**6, early_stop=2000, batch_size=500)
    assert r.stop_reason == "early_stop"
    last_improvement = r.history.evaluations[-2]
    assert r.n_evaluations - last_improvement >= 2000


def test_ctrl_c_stops_cleanly_and_keeps_the_best(setup):
    class Interrupting(ToyModel):
        def evaluate(self, problem, arch, mappings):
            if self.calls == 3:
                os.kill(os.getpid(), signal.SIGINT)
            return super().evaluate(problem, arch, mappings)

    before = signal.getsignal(signal.SIGINT)
    r = _run(setup, model=Interrupting(), budget=100_000, batch_size=200)
    assert r.stop_reason == "interrupted"
    assert 0 < r.n_evaluations < 100_000 and r.best is not None
    assert signal.getsignal(signal.SIGINT) is before  # handler restored


@pytest.mark.parametrize("searcher", ["random", "anneal", "genetic", "optuna"])
def test_checkpoint_resume_reaches_the_uninterrupted_result(setup, tmp_path, searcher):
    class Interrupting(ToyModel):
        def evaluate(self, problem, arch, mappings):
            if self.calls == 4:
                os.kill(os.getpid(), signal.SIGINT)
            return super().evaluate(problem, arch, mappings)

    opts = dict(budget=4000, batch_size=256)
    so = {"inner": 64, "trials_per_ask": 2} if searcher == "optuna" else None
    ref = _run(setup, searcher, searcher_options=so, **opts)
    ck = tmp_path / "search.ckpt"
    part = _run(setup, searcher, model=Interrupting(), searcher_options=so, checkpoint=ck,
                checkpoint_every_s=0, **opts)
    assert part.stop_reason == "interrupted" and part.n_evaluations < 4000 and ck.exists()
    done = _run(setup, searcher, searcher_options=so, checkpoint=ck, **opts)
    assert done.n_evaluations == ref.n_evaluations == 4000
    assert done.best_x == ref.best_x and done.best_objective == ref.best_objective
    assert done.history.best == ref.history.best and done.history.evaluations == ref.history.evaluations


def test_checkpoint_of_another_search_is_refused(setup, tmp_path):
    ck = tmp_path / "c.ckpt"
    _run(setup, budget=500, checkpoint=ck)
    with pytest.raises(SpecError, match="different search"):
        _run(setup, budget=500, checkpoint=ck, seed=1)
    (tmp_path / "junk.ckpt").write_bytes(b"not a pickle")
    with pytest.raises(SpecError, match="checkpoint"):
        _run(setup, budget=500, checkpoint=tmp_path / "junk.ckpt")


def test_infeasible_search_reports_a_histogram(setup):
    class NothingFits(ToyModel):
        def evaluate(self, problem, arch, mappings):
            m = super().evaluate(problem, arch, mappings)
            n = len(mappings)
            return dataclasses.replace(m, valid=np.zeros(n, bool), reason=np.full(n, int(Reason.CAPACITY)),
                                       reason_level=np.ones(n, np.int64))

    with pytest.raises(InfeasibleSpaceError, match=r"0 of 300 .*capacity of GLB"):
        _run(setup, model=NothingFits(), budget=300)


def test_pareto_objective_keeps_a_non_dominated_front(setup):
    r = _run(setup, "random", objective="energy,cycles", budget=3000)
    assert r.pareto and len(r.pareto) >= 1
    f = np.array([[pt["energy_pj"], pt["cycles"]] for pt in r.pareto])
    assert non_dominated(f).all()
    assert min(pt["edp"] for pt in r.pareto) == pytest.approx(r.edp)


def test_progress_bar_runs(setup, capsys):
    r = _run(setup, budget=1000, progress=True)
    assert r.n_evaluations == 1000
    assert "eval" in capsys.readouterr().err


def test_bad_options():
    with pytest.raises(SpecError, match="budget"):
        DriverOptions(budget=0)
    with pytest.raises(SpecError, match="time_limit_s"):
        DriverOptions(time_limit_s=-1)


def test_an_endless_search_is_refused(setup):
    with pytest.raises(SpecError, match="budget, a time limit or an early stop"):
        _run(setup, budget=None)


@pytest.mark.parametrize("searcher", ["anneal", "genetic", "random", "optuna"])
def test_initial_points_are_scored_and_offered_to_the_searcher(setup, searcher):
    p, a, s = setup
    x0 = s.sample_encoded(50, np.random.default_rng(5))
    so = {"inner": 64} if searcher == "optuna" else None
    d = Driver(p, a, s, ToyModel(), searchers.get(searcher), objective=parse_objective("edp"),
               options=DriverOptions(budget=2000), searcher_options=so, initial=x0, initial_evaluations=100)
    r = d.run()
    assert r.n_evaluations == 2000 and r.history.evaluations[0] >= 150
    e, c, valid, _, _ = d.evaluate(x0)
    assert r.best_objective <= np.min(np.where(valid, e * c, np.inf))
