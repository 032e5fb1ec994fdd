from __future__ import annotations

import pytest
from toy import ToyModel, tiny_arch, tiny_problem

import accelmap
import accelmap.search
from accelmap.errors import SpecError, UnknownPluginError
from accelmap.search import NetworkResult, SearchResult, search_network
from accelmap.search.api import search


def test_the_package_is_callable_and_forwards_to_api_search():
    p, a = tiny_problem(), tiny_arch()
    r1 = accelmap.search(p, a, model=ToyModel(), searcher="random", budget=1000, seed=3)
    r2 = search(p, a, model=ToyModel(), searcher="random", budget=1000, seed=3)
    assert isinstance(r1, SearchResult) and r1.best_x == r2.best_x
    assert callable(accelmap.search) and accelmap.search.search is search


def test_default_searcher_and_budget():
    r = search(tiny_problem(), tiny_arch(), model=ToyModel(), budget=2000)
    assert r.searcher == accelmap.search.DEFAULT_SEARCHER and r.n_evaluations == 2000
    assert r.config["seed"] == 0 and r.versions["numpy"]
    assert r.lower_bound and r.gap()["cycles"] >= 1.0


def test_bad_arguments_are_clear():
    with pytest.raises(UnknownPluginError, match="Did you mean"):
        search(tiny_problem(), tiny_arch(), model=ToyModel(), searcher="anneall")
    with pytest.raises(SpecError, match="objective"):
        search(tiny_problem(), tiny_arch(), model=ToyModel(), objective="speed")
    with pytest.raises(SpecError, match="does not exist"):
        search(tiny_problem(), tiny_arch(), model=ToyModel(), constraints="/nonexistent.yaml")


def test_search_network_searches_each_shape_once(tmp_path):
    a = tiny_arch()
    p1 = tiny_problem()
    p2 = tiny_problem(4, 4, 2)
    twin = p1.with_bounds()  # same shape as p1
    layers = [p1, p2, twin]
    seen = []
    res = search_network(layers, a, model=ToyModel(), searcher="random", budget=500,
                         on_layer=lambda i, n, r: seen.append((i, n)))
    assert seen == [(0, 2), (1, 2)] and res.repeats == (2, 1) and res.complete
    assert res.cycles == pytest.approx(2 * res.layers[0].cycles + res.layers[1].cycles)
    assert res.edp == pytest.approx(res.cycles * res.energy_pj)
    assert "total" in res.table()
    back = NetworkResult.from_dict(res.to_dict())
    assert back.cycles == pytest.approx(res.cycles) and back.repeats == res.repeats
    res.save(tmp_path / "net.json")
    with pytest.raises(SpecError, match="checkpoint_dir"):
        search_network(layers, a, model=ToyModel(), checkpoint="x")


def test_dataflow_warm_start_counts_in_the_budget():
    r = search(tiny_problem(), tiny_arch(), model=ToyModel(), budget=4000, warm_start="dataflows", seed=2)
    runs = r.config["warm_start_runs"]
    assert r.n_evaluations == 4000 and {d["dataflow"] for d in runs} >= {"weight-stationary"}
    seeded = [d for d in runs if "edp" in d]
    assert seeded and r.edp <= min(d["edp"] for d in seeded) * (1 + 1e-12)
    with pytest.raises(SpecError, match="warm_start"):
        search(tiny_problem(), tiny_arch(), model=ToyModel(), budget=100, warm_start="magic")
    # also where the cost model searches its own variants first (systolic: one per dataflow)
    with pytest.raises(SpecError, match="warm_start"):
        search("resnet50/conv1", "systolic", model="systolic", budget=100, warm_start="magic")
