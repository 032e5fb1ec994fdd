"""Every registered searcher passes the same checks: the ask/tell contract, capabilities
declared as data, determinism for a seed, checkpoint round trips, and a real search on a
small layer through the driver."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from accelmap._registry import costmodels, searchers
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.mapper.space import MapSpace
from accelmap.search.base import Cap, EncodedSpace, Searcher
from accelmap.search.driver import Driver, DriverOptions
from accelmap.search.objectives import parse_objective
from accelmap.workloads.builders import matmul

ALL_NAMES = searchers.names()
# Solvers (Cap.SOLVER) own their loop over the space and the cost model; they get their
# own checks below instead of the ask/tell contract.
SOLVERS = [n for n in ALL_NAMES if Cap.SOLVER in searchers.get(n).capabilities]
NAMES = [n for n in ALL_NAMES if n not in SOLVERS]
SMALL_OPTIONS = {
    "optuna": {"inner": 64, "trials_per_ask": 2},
    "genetic": {"population": 32, "init_factor": 2},
    "anneal": {"chains": 32, "warmup": 128},
    "random": {"batch": 256},
    "exhaustive": {"chunk": 256},
}


def _space() -> EncodedSpace:
    p = matmul("conf", m=4, n=4, k=2)
    a = Arch(name="conf-arch", compute=Compute(energy_per_mac_pj=1.0), levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100.0, write_energy_pj=100.0),
        StorageLevel(name="GLB", capacity_words=64, read_energy_pj=5.0, write_energy_pj=5.0, fanout_x=2, fanout_y=2),
        StorageLevel(name="RF", capacity_words=8, read_energy_pj=0.5, write_energy_pj=0.5),
    ))
    return EncodedSpace(MapSpace(p, a))


def _make(name: str, seed: int = 0, n_objectives: int = 1):
    return searchers.get(name)(_space(), n_objectives=n_objectives, seed=np.random.SeedSequence(seed),
                               budget_hint=2000, **SMALL_OPTIONS.get(name, {}))


def _score(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    f = 1.0 + ((x - 1) ** 2).sum(axis=1).astype(float)
    valid = x[:, 0] % 5 != 4
    return np.where(valid, f, np.inf), valid


def _drive(s, steps: int = 6, n: int = 200) -> list[np.ndarray]:
    out = []
    for _ in range(steps):
        if s.done:
            break
        x = s.ask(n)
        out.append(x.copy())
        if len(x):
            s.tell(x, *_score(x))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_declares_protocol_and_capabilities(name):
    cls = searchers.get(name)
    assert isinstance(cls.name, str) and cls.name == name
    assert isinstance(cls.capabilities, frozenset) and all(isinstance(c, Cap) for c in cls.capabilities)
    assert isinstance(_make(name), Searcher)


@pytest.mark.parametrize("name", NAMES)
def test_ask_returns_at_most_n_points_inside_the_box(name):
    s = _make(name)
    sp = s.space
    for n in (1, 7, 200):
        x = s.ask(n)
        assert x.dtype == np.int64 and x.ndim == 2 and x.shape[1] == sp.n_params and 0 < len(x) <= n
        assert ((x >= 0) & (x < sp.bounds)).all()
        s.tell(x, *_score(x))
    assert s.batch_size >= 1


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_proposals(name):
    a = _drive(_make(name, seed=5))
    b = _drive(_make(name, seed=5))
    assert len(a) == len(b) and all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))


@pytest.mark.parametrize("name", [n for n in NAMES if Cap.CHECKPOINT in searchers.get(n).capabilities])
def test_state_dict_round_trip_continues_identically(name):
    s = _make(name, seed=2)
    _drive(s, steps=3)
    state = pickle.loads(pickle.dumps(s.state_dict()))
    t = _make(name, seed=2)
    t.load_state_dict(state)
    assert all(np.array_equal(u, v) for u, v in zip(_drive(s, steps=3), _drive(t, steps=3), strict=True))


@pytest.mark.parametrize("name", [n for n in NAMES if Cap.MULTI_OBJECTIVE in searchers.get(n).capabilities])
def test_multi_objective_searchers_take_two_columns(name):
    s = _make(name, n_objectives=2)
    for _ in range(3):
        x = s.ask(100)
        f, valid = _score(x)
        s.tell(x, np.stack([f, 1.0 / np.where(valid, f, 1.0)], axis=1), valid)


@pytest.mark.parametrize("name", NAMES)
def test_searches_a_layer_through_the_driver(name):
    sp = _space()
    ms = sp.mapspace
    model = costmodels.get("loopnest")()
    d = Driver(ms.problem, ms.arch, ms, model, searchers.get(name), objective=parse_objective("edp"),
               options=DriverOptions(budget=1500), searcher_options=SMALL_OPTIONS.get(name, {}))
    r = d.run()
    assert r.best is not None and r.best_metrics["valid"] and 0 < r.n_evaluations <= 1500
    assert np.isfinite(r.best_objective) and r.best_objective == pytest.approx(r.edp)


@pytest.mark.parametrize("name", SOLVERS)
def test_solver_declares_itself_and_refuses_ask_tell(name):
    cls = searchers.get(name)
    assert isinstance(cls.name, str) and cls.name == name
    assert isinstance(cls.capabilities, frozenset) and all(isinstance(c, Cap) for c in cls.capabilities)
    assert callable(getattr(cls, "run", None))
    assert isinstance(getattr(cls, "option_names", None), tuple)
    with pytest.raises(TypeError, match="solver"):
        _make(name)


@pytest.mark.parametrize("name", SOLVERS)
def test_solver_finds_the_exhaustive_optimum_of_a_small_space(name):
    import accelmap

    base = _space().mapspace
    sp = MapSpace(matmul("conf-small", m=2, n=4, k=2), base.arch)
    obj = parse_objective("edp")
    ex = accelmap.search(sp.problem, sp.arch, searcher="exhaustive", space=sp, objective=obj)
    r = accelmap.search(sp.problem, sp.arch, searcher=name, space=sp, objective=obj, seed=3,
                        searcher_options={"warm_budget": 200} if "warm_budget" in searchers.get(name).option_names else {})
    assert r.best is not None and r.searcher == name
    assert r.best_objective == pytest.approx(ex.best_objective, rel=1e-12)
    assert r.best_objective <= ex.best_objective * (1 + 1e-12)
    if r.proven_optimal:
        assert r.lower_bound["objective"] == pytest.approx(r.best_objective, rel=1e-12)
