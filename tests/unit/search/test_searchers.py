from __future__ import annotations

import numpy as np
import pytest
from toy import ToyModel, tiny_arch, tiny_problem

from accelmap._registry import searchers
from accelmap.errors import SpaceTooLargeError, SpecError, UnknownPluginError
from accelmap.mapper.space import MapSpace
from accelmap.search.anneal import AnnealSearcher
from accelmap.search.base import EncodedSpace
from accelmap.search.driver import Driver, DriverOptions
from accelmap.search.exhaustive import ExhaustiveSearcher
from accelmap.search.genetic import GeneticSearcher
from accelmap.search.objectives import parse_objective
from accelmap.search.optuna_searcher import OptunaSearcher


@pytest.fixture(scope="module")
def small():
    p, a = tiny_problem(4, 2, 2), tiny_arch()
    return p, a, MapSpace(p, a)


def _driver(setup, name, budget=None, objective="edp", **so):
    p, a, s = setup
    return Driver(p, a, s, ToyModel(), searchers.get(name), objective=parse_objective(objective),
                  options=DriverOptions(budget=budget), searcher_options=so)


def test_exhaustive_finds_the_optimum_of_every_point(small):
    p, a, s = small
    r = _driver(small, "exhaustive").run()
    assert r.stop_reason == "exhausted" and r.n_evaluations == s.n_distinct()
    everything = MapSpace.enumerate(s, 1 << 16)
    best = min(float(np.nanmin(np.where(m.valid, m.edp, np.inf)))
               for m in (ToyModel().evaluate(p, a, b) for b in everything))
    assert r.best_objective == best
    for name in ("random", "anneal", "genetic"):
        assert _driver(small, name, budget=3000).run().best_objective >= best


def test_exhaustive_refuses_a_large_space_clearly():
    p, a = tiny_problem(), tiny_arch()
    with pytest.raises(SpaceTooLargeError, match="exhaustive.*limit.*sampling searcher"):
        ExhaustiveSearcher(EncodedSpace(MapSpace(p, a)), max_size=1000)


def test_searcher_option_errors():
    p, a = tiny_problem(), tiny_arch()
    es = EncodedSpace(MapSpace(p, a))
    with pytest.raises(TypeError):
        AnnealSearcher(es, bogus=1)
    with pytest.raises(SpecError, match="chains"):
        AnnealSearcher(es, chains=0)
    with pytest.raises(SpecError, match="elite"):
        GeneticSearcher(es, population=4, elite=4)
    with pytest.raises(SpecError, match="mutation"):
        GeneticSearcher(es, mutation_weights={"teleport": 1.0})
    with pytest.raises(SpecError, match="sampler"):
        OptunaSearcher(es, sampler="bogus")
    with pytest.raises(UnknownPluginError, match="cmaes"):
        import importlib.util

        if importlib.util.find_spec("cmaes") is not None:
            raise UnknownPluginError("cmaes installed; nothing to check")
        OptunaSearcher(es, sampler="cmaes")


def test_genetic_operators_stay_in_the_box_and_keep_a_logbook():
    p, a = tiny_problem(), tiny_arch()
    es = EncodedSpace(MapSpace(p, a))
    g = GeneticSearcher(es, seed=1, population=32, init_factor=2)
    for _ in range(4):
        x = g.ask(64)
        assert ((x >= 0) & (x < es.bounds)).all()
        g.tell(x, np.arange(len(x), dtype=float) + 1.0, np.ones(len(x), bool))
    assert len(g.logbook) == 4 and g.pop_x.shape == (32, es.n_params)
    assert len(g.deap_logbook()) == 4
    assert len(g.hof_x) == 8


def test_level_crossover_takes_whole_levels():
    p, a = tiny_problem(), tiny_arch()
    s = MapSpace(p, a)
    es = EncodedSpace(s)
    rng = np.random.default_rng(0)
    xa, xb = s.sample_encoded(16, rng), s.sample_encoded(16, rng)
    same_a = es.cross_levels(xa, xb, np.zeros((16, 3), bool))
    assert (same_a == xa).all()
    same_b = es.cross_levels(xa, xb, np.ones((16, 3), bool))
    assert (same_b == xb).all()
    mixed = es.cross_levels(xa, xb, rng.random((16, 3)) < 0.5)
    assert ((mixed >= 0) & (mixed < es.bounds)).all()


@pytest.mark.parametrize("sampler", ["tpe", "nsga2", "random"])
def test_optuna_trials_carry_an_inner_search(sampler):
    p, a = tiny_problem(), tiny_arch()
    s = MapSpace(p, a)
    d = Driver(p, a, s, ToyModel(), searchers.get("optuna"), objective=parse_objective("edp"),
               options=DriverOptions(budget=3000),
               searcher_options={"sampler": sampler, "inner": 128, "trials_per_ask": 2})
    r = d.run()
    study = d.searcher.study
    assert r.n_evaluations == 3000 and len(study.trials) >= 5
    # every told trial fixed the structural params and reports the best of its inner search
    done = [t for t in study.trials if t.value is not None]
    assert done and min(t.value for t in done) >= r.best_objective
    assert set(done[0].params) == {s.param_names[i] for i in d.searcher.outer}


def test_optuna_sqlite_storage_persists_the_study(tmp_path):
    import optuna

    p, a = tiny_problem(), tiny_arch()
    url = f"sqlite:///{tmp_path / 'study.db'}"
    _driver((p, a, MapSpace(p, a)), "optuna", budget=256, inner=64, trials_per_ask=2, storage=url,
            study_name="t").run()
    study = optuna.load_study(study_name="t", storage=url)
    assert len(study.trials) >= 2


def test_pareto_with_multi_objective_searchers(small):
    for name, so in (("genetic", {"population": 32}), ("optuna", {"inner": 64})):
        r = _driver(small, name, budget=2000, objective="energy,cycles", **so).run()
        assert r.pareto and all(pt["edp"] >= r.edp * (1 - 1e-12) for pt in r.pareto)


def test_anneal_polish_and_time_limited_schedule():
    p, a = tiny_problem(), tiny_arch()
    s = MapSpace(p, a)
    d = Driver(p, a, s, ToyModel(), searchers.get("anneal"), objective=parse_objective("edp"),
               options=DriverOptions(budget=6000),
               searcher_options={"chains": 16, "proposals": 4, "polish": 0.5, "warmup": 200})
    r = d.run()
    assert r.n_evaluations == 6000 and d.searcher.polishing() and d.searcher.pol_x is not None
    es = EncodedSpace(s)
    t = AnnealSearcher(es, seed=0, budget_hint=None, chains=8, proposals=2, warmup=16, polish=0.2)
    for _ in range(30):
        x = t.ask(64)
        assert ((x >= 0) & (x < es.bounds)).all()
        t.tell(x, np.arange(len(x), dtype=float) + 1.0, np.ones(len(x), bool))
    assert t.temperature() < t.t_start


def test_network_checkpoints_one_file_per_layer(tmp_path):
    from accelmap.search import search_network

    layers = [tiny_problem(), tiny_problem(4, 4, 2)]
    res = search_network(layers, tiny_arch(), model=ToyModel(), searcher="random", budget=300,
                         checkpoint_dir=tmp_path)
    assert len(list(tmp_path.glob("*.ckpt"))) == 2
    again = search_network(layers, tiny_arch(), model=ToyModel(), searcher="random", budget=600,
                           checkpoint_dir=tmp_path)
    assert all(r.n_evaluations == 600 for r in again.layers)
    assert all(b.edp <= a.edp for a, b in zip(res.layers, again.layers, strict=True))
