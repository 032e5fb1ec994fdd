from __future__ import annotations

import json
import math

import numpy as np

from accelmap.mapper.mapping import Mapping
from accelmap.search.objectives import parse_objective
from accelmap.search.result import History, SearchResult


def _result(**kw):
    m = Mapping(temporal=np.array([[2, 1], [1, 3]]), spatial=np.ones((2, 2, 2), int),
                order=np.array([[0, 1], [1, 0]]), keep=np.ones((2, 3), bool))
    base = dict(problem="p", arch="a", model="toy", searcher="random", objective=parse_objective("edp"),
                best=m, best_x=(1, 2, 3), best_metrics={"cycles": 6, "energy_pj": 10.0, "edp": 60.0},
                best_objective=60.0, history=History(evaluations=(10, 20), seconds=(0.1, 0.2), best=(70.0, 60.0)),
                n_evaluations=20, n_valid=5, lower_bound={"cycles": 3.0, "energy_pj": 5.0, "edp": 15.0},
                config={"budget": 20}, seed=3)
    base.update(kw)
    return SearchResult(**base)


def test_json_round_trip(tmp_path):
    r = _result()
    d = r.to_dict()
    json.dumps(d)  # strict JSON-able
    assert d["best"]["cycles"] == 6 and d["best"]["edp"] == 60.0 and "mapping" in d["best"]
    back = SearchResult.from_dict(d)
    assert back.best == r.best and back.best_x == r.best_x and back.history == r.history
    assert back.to_dict() == d
    p = r.save(tmp_path / "x" / "result.json")
    assert SearchResult.load(p).to_dict() == d


def test_gap_and_history_lookup():
    r = _result()
    assert r.gap() == {"cycles": 2.0, "energy_pj": 2.0, "edp": 4.0}
    assert r.history.best_at(5) == math.inf
    assert r.history.best_at(15) == 70.0 and r.history.best_at(10**6) == 60.0
    assert r.history.best_at_seconds(0.15) == 70.0


def test_result_without_best_round_trips():
    r = _result(best=None, best_x=None, best_metrics=None, best_objective=math.inf, stop_reason="interrupted")
    d = r.to_dict()
    assert d["best"] is None and d["gap"] is None
    assert SearchResult.from_dict(json.loads(json.dumps(d))).best is None
    assert "no legal mapping" in r.summary()
