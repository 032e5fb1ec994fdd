"""The bypass-pattern sweep of `anneal` (``sweep`` > 0) and neighbours with held keep bits."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from toy import ToyModel, tiny_arch, tiny_problem

from accelmap._registry import searchers
from accelmap.errors import SpecError
from accelmap.mapper.space import MapSpace
from accelmap.search import anneal as anneal_module
from accelmap.search.anneal import AnnealSearcher
from accelmap.search.base import EncodedSpace
from accelmap.search.driver import Driver, DriverOptions
from accelmap.search.objectives import parse_objective


@pytest.fixture(scope="module")
def setup():
    p, a = tiny_problem(), tiny_arch()
    return p, a, MapSpace(p, a)


def _keep_cols(space: EncodedSpace) -> np.ndarray:
    return np.flatnonzero(np.asarray(space.param_kinds) == "keep")


def test_neighbours_without_flips_hold_the_keep_bits(setup):
    _, _, s = setup
    es = EncodedSpace(s)
    rng = np.random.default_rng(0)
    x = es.sample(2000, rng)
    kc = _keep_cols(es)
    assert len(kc) >= 2
    y = es.neighbours(x, rng, flips=False)
    assert (y[:, kc] == x[:, kc]).all()
    moved = (y != x).any(axis=1)
    assert moved.mean() > 0.9  # a drawn flip becomes another move, not a copy
    z = es.neighbours(x, np.random.default_rng(0))  # with flips some rows change a keep bit
    assert (z[:, kc] != x[:, kc]).any()
    # the mapping-level entry point holds them too
    b = s.neighbours(s.decode(x[:200]), np.random.default_rng(1), flips=False)
    assert (b.keep == s.decode(x[:200]).keep).all()


def test_legalize_holds_keep_bits_and_orders_and_makes_draws_fit(setup):
    _, _, s = setup
    es = EncodedSpace(s)
    rng = np.random.default_rng(3)
    x = es.sample(4000, rng)
    y = es.legalize(x, rng)
    kinds = np.asarray(es.param_kinds)
    held = kinds != "tile"
    assert (y[:, held] == x[:, held]).all()  # keep bits and loop orders as given
    before = s.check(s.decode(x)).valid.mean()
    after = s.check(s.decode(y)).valid
    assert after.mean() > max(0.9, before)
    # points already legal are left alone
    legal = x[s.check(s.decode(x)).valid]
    assert (es.legalize(legal, rng) == legal).all()


def _drive(setup, budget, seed=0, batch=None, **opts):
    """Ask/tell by hand, recording each sweep step's rows and their islands."""
    p, a, s = setup
    es = EncodedSpace(s)
    sr = AnnealSearcher(es, seed=seed, budget_hint=budget, **opts)
    model = ToyModel()
    told, steps = 0, []
    while told < budget:
        n = min(batch or sr.batch_size, budget - told)
        x = sr.ask(n)
        sw = sr.sweep_state
        if sw is not None and not sw.done and sw._pending and sw._pending[0] == "step":
            isl = sw._pending[1][: len(x)] // sw.chains
            steps.append((x.copy(), sw.patterns[sw.which[isl]]))
        b = s.decode(x)
        m = model.evaluate(p, a, b)
        sr.tell(x, m.edp, s.check(b).valid)
        told += len(x)
    return sr, steps


def test_sweep_runs_every_pattern_with_its_keep_bits_then_the_best_ones(setup, monkeypatch):
    stage_best = {}  # each stage's island bests as it ends
    end_stage = anneal_module._PatternSweep._next_stage

    def record(self):
        stage_best[self.stage] = self.best_f.copy()
        end_stage(self)

    monkeypatch.setattr(anneal_module._PatternSweep, "_next_stage", record)
    sr, steps = _drive(setup, 60_000, sweep=0.5, sweep_top=3)
    kc = _keep_cols(sr.space)
    sw = sr.sweep_state
    assert sw is not None and sw.done
    assert len(sw.patterns) == 2 ** len(kc)  # every pattern of the free keep bits
    assert len(np.unique(sw.patterns, axis=0)) == len(sw.patterns)
    assert steps, "the sweep never stepped"
    for x, pat in steps:  # each island's proposals carry its own pattern
        assert (x[:, kc] == pat).all()
    # stage B re-ran the three best patterns of stage A, best first
    assert set(stage_best) == {"A", "B"}
    a_best = stage_best["A"]
    top = np.argsort(a_best, kind="stable")[:3]
    assert np.isfinite(a_best[top]).all()
    assert list(sw.which) == list(top)
    # the plain runs had the rest of the budget
    assert sr.sweep_budget == 30_000 and sr.budget_run * sr.restarts == 30_000


def test_sweep_draws_a_subset_when_there_are_too_many_patterns(setup):
    sr, _ = _drive(setup, 30_000, sweep=0.5, sweep_patterns=8, sweep_top=2)
    sw = sr.sweep_state
    assert len(sw.patterns) == 8 and len(np.unique(sw.patterns, axis=0)) == 8


def test_sweep_default_share_and_budget_split(setup):
    es = EncodedSpace(setup[2])
    assert AnnealSearcher(es, seed=0, budget_hint=600_000).sweep_budget == 0
    default = AnnealSearcher(es, seed=0, budget_hint=1_000_000)  # the default budget of one layer
    assert default.sweep_budget == 400_000 and (default.restarts, default.budget_run) == (3, 200_000)
    assert AnnealSearcher(es, seed=0, budget_hint=1_000_000, sweep=0.0).sweep_budget == 0
    assert AnnealSearcher(es, seed=0, budget_hint=None, sweep=0.3).sweep_budget == 0
    assert AnnealSearcher(es, seed=0, budget_hint=600_000, sweep=0.3).sweep_budget == 180_000


@pytest.mark.parametrize("bad", [{"sweep": 1.0}, {"sweep": -0.1}, {"sweep": True}, {"sweep": "half"},
                                 {"sweep_chains": 0}, {"sweep_top": -1}, {"sweep_top": "x"}, {"sweep_top": True},
                                 {"sweep_top": 1.5}, {"sweep_patterns": 0}, {"islands": -1}, {"islands": "x"},
                                 {"t_start": "hot"}, {"multi_move": None}])
def test_bad_sweep_options_are_refused(setup, bad):
    ((key, value),) = bad.items()
    with pytest.raises(SpecError, match=f"anneal searcher: {key} = {value!r}"):  # names the value given
        AnnealSearcher(EncodedSpace(setup[2]), seed=0, budget_hint=10_000, **bad)


def _run(setup, *, model=None, seed=0, **opts):
    p, a, s = setup
    so = opts.pop("searcher_options")
    d = Driver(p, a, s, model or ToyModel(), searchers.get("anneal"), objective=parse_objective("edp"),
               seed=seed, options=DriverOptions(**opts), searcher_options=so)
    return d.run()


def test_sweep_same_seed_same_result_and_resume_from_a_checkpoint(setup, tmp_path):
    class Interrupting(ToyModel):
        def evaluate(self, problem, arch, mappings):
            if self.calls == 30:  # inside the sweep
                os.kill(os.getpid(), signal.SIGINT)
            return super().evaluate(problem, arch, mappings)

    so = {"sweep": 0.6, "sweep_patterns": 8, "sweep_top": 2}
    opts = dict(budget=12_000, batch_size=256)
    ref = _run(setup, searcher_options=so, **opts)
    again = _run(setup, searcher_options=so, **opts)
    assert again.best_x == ref.best_x and again.history.best == ref.history.best
    ck = tmp_path / "sweep.ckpt"
    part = _run(setup, model=Interrupting(), searcher_options=so, checkpoint=ck, checkpoint_every_s=0, **opts)
    assert part.stop_reason == "interrupted" and 0 < part.n_evaluations < 12_000
    done = _run(setup, searcher_options=so, checkpoint=ck, **opts)
    assert done.n_evaluations == ref.n_evaluations == 12_000
    assert done.best_x == ref.best_x and done.best_objective == ref.best_objective
    assert done.history.best == ref.history.best


def test_sweep_runs_when_warm_start_evaluations_took_part_of_the_budget(setup, monkeypatch):
    """Evaluations spent before the search (a dataflow warm start) leave the sweep its share:
    the searcher plans with what is left of the budget."""
    stages = []
    end_stage = anneal_module._PatternSweep._next_stage

    def record(self):
        stages.append(self.stage)
        end_stage(self)

    monkeypatch.setattr(anneal_module._PatternSweep, "_next_stage", record)
    p, a, s = setup
    d = Driver(p, a, s, ToyModel(), searchers.get("anneal"), objective=parse_objective("edp"), seed=0,
               options=DriverOptions(budget=20_000), searcher_options={"sweep": 0.4, "sweep_patterns": 8},
               initial_evaluations=8_000)
    assert d.searcher.budget_hint == 12_000
    r = d.run()
    assert r.n_evaluations == 20_000
    assert stages == ["A", "B"]
