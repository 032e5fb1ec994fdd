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
    assert "*" in res.table() and "CPU s" in res.table()
    assert all(m.cpu_s is not None and 0 <= m.cpu_s <= 60 for m in res.members)


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


def fake_island(island) -> dict:
    """Round 0: objective from the seed; later rounds: never worse than the best elite."""
    task = island.task
    own = float(task.seed % 1000) + 1.0
    inherited = min((m["obj"] for m in island.elites), default=float("inf"))
    obj = min(own, inherited)
    best = {"objective": obj, "cycles": 1.0, "energy_pj": obj, "edp": obj,
            "mapping": {"obj": obj, "from": task.searcher}, "metrics": {}}
    return {"cycles": 1.0, "energy_pj": obj, "edp": obj, "n_evaluations": task.budget,
            "result": {"best": best, "round": island.round, "n_elites": len(island.elites)}}


def test_islands_exchange_elites():
    seen = []

    def spy(island):
        seen.append((island.round, island.task.seed, island.task.budget, len(island.elites)))
        return fake_island(island)

    res = run_portfolio(small_conv(), small_arch(), searchers=("random", "genetic"), seeds=2, seed=5,
                        budget=90, rounds=3, n_elites=1, backend="serial", task_fn=spy)
    assert res.rounds == 3 and len(res.members) == 4
    assert [r for r, *_ in seen] == [0] * 4 + [1] * 4 + [2] * 4
    assert all(b == 30 for _, _, b, _ in seen)  # the budget is split over the rounds
    assert [n for r, _, _, n in seen if r == 0] == [0] * 4 and all(n == 1 for r, _, _, n in seen if r > 0)
    # each round has fresh seeds (replica i of every searcher shares one, as in sweeps)
    per_round = [{s for r, s, _, _ in seen if r == k} for k in range(3)]
    assert [len(x) for x in per_round] == [2, 2, 2] and len(set().union(*per_round)) == 6
    # after migration every member is at least as good as the best of round 0
    round0 = min(float(s % 1000) + 1.0 for r, s, _, _ in seen if r == 0)
    assert all(m.best_objective <= round0 for m in res.members)
    assert res.best["round"] == 0 or res.best["n_elites"] == 1
    assert res.n_evaluations == 4 * 90
    with pytest.raises(SpecError, match="rounds"):
        run_portfolio(small_conv(), small_arch(), rounds=0, backend="serial", task_fn=spy)


def test_islands_with_real_searches():
    res = run_portfolio(small_conv(), small_arch(), searchers=("anneal", "random"), seeds=1, budget=400,
                        rounds=2, backend="serial")
    assert res.best.best is not None and res.n_evaluations >= 2 * 400 - 10
    assert min(m.best_objective for m in res.members) == res.best.best_objective
