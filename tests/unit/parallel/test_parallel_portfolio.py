"""Portfolio merging on the serial backend with an injected member function."""

from __future__ import annotations

import pytest

from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.parallel.portfolio import run_portfolio
from accelmap.parallel.store import ResultStore
from accelmap.parallel.sweep import spawn_seeds
from accelmap.testing.examples import small_arch, small_conv


def fake_member(task) -> dict:
    if task.searcher == "anneal":
        return {"status": "infeasible", "error": "nothing legal", "n_evaluations": 5, "result": {"best": None}}
    obj = float(task.seed % 1000) + (0.5 if task.searcher == "genetic" else 0.0)
    best = {"objective": obj, "cycles": 1.0, "energy_pj": obj, "edp": obj,
            "mapping": {"m": task.seed}, "metrics": {"edp": obj}}
    return {"cycles": 1.0, "energy_pj": obj, "edp": obj, "n_evaluations": 10,
            "result": {"best": best, "seed": task.seed}}


def test_best_member_wins():
    res = run_portfolio(small_conv(), small_arch(), searchers=("random", "genetic", "anneal"), seeds=3,
                        seed=11, backend="serial", task_fn=fake_member,
                        searcher_options={"genetic": {"population": 8}})
    assert len(res.members) == 9
    seeds = spawn_seeds(11, 3)
    assert [m.seed for m in res.members[:3]] == list(seeds)
    ok = [m for m in res.members if m.status == "ok"]
    assert len(ok) == 6
    winner = min(ok, key=lambda m: m.best_objective)
    assert res.best_member == winner
    assert res.best["seed"] == winner.seed
    assert res.n_evaluations == 6 * 10 + 3 * 5
    assert "*" in res.table()


def test_members_committed_to_store(tmp_path):
    with ResultStore(tmp_path / "p.sqlite") as store:
        run_portfolio(small_conv(), small_arch(), searchers=("random",), seeds=[1, 2], backend="serial",
                      task_fn=fake_member, store=store)
        rows = list(store.rows())
        assert len(rows) == 2 and {r["seed"] for r in rows} == {1, 2}
        assert rows[0]["mapping_json"] == {"m": rows[0]["seed"]}
        assert "mapping" not in rows[0]["result_json"]["best"]


def test_all_infeasible_raises():
    with pytest.raises(InfeasibleSpaceError, match="no member found a legal mapping"):
        run_portfolio(small_conv(), small_arch(), searchers=("anneal",), seeds=2, backend="serial",
                      task_fn=fake_member)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"searchers": ()}, "no searchers"),
        ({"searchers": ("randon",)}, "random"),
        ({"seeds": 0}, "seeds = 0"),
        ({"searcher_options": {"genetic": {}}}, "not in searchers"),
        ({"searchers": ("genetic",), "searcher_options": {"genetic": {"popsize": 3}}}, "no option"),
        ({"backend": "dask"}, "backend"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(SpecError, match=match):
        run_portfolio(small_conv(), small_arch(), **{"backend": "serial", **kwargs}, task_fn=fake_member)
