"""An exact network search under one total time with the layers as tasks on workers
(`accelmap.parallel.network`): the time rule, every layer's certificate its own, and the
same results on Ray (two CPUs) as in this process."""

from __future__ import annotations

import time

import pytest

import accelmap.parallel.network as netmod
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import SpecError
from accelmap.search.api import NETWORK_EXACT_GAP_SHARE, search
from accelmap.workloads.builders import matmul


def small_arch() -> Arch:
    return Arch(name="tiny", compute=Compute(energy_per_mac_pj=1.0), levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100.0, write_energy_pj=120.0, block_words=2),
        StorageLevel(name="GLB", capacity_words=48, read_energy_pj=5.0, write_energy_pj=6.0, fanout_x=2, fanout_y=2),
        StorageLevel(name="RF", capacity_words=8, read_energy_pj=0.5, write_energy_pj=0.6),
    ))


LAYERS = [matmul("a", m=4, n=2, k=2), matmul("b", m=2, n=2, k=4), matmul("a2", m=4, n=2, k=2),
          matmul("c", m=4, n=4, k=2)]


def test_time_of_a_layer_is_set_from_the_worker_time_left_when_it_is_sent() -> None:
    made = []
    end = time.time() + 100.0
    q = netmod._ExactQueue([2, 0, 1], lambda i, part: made.append((i, part)) or (i, part), [1.0, 2.0, 1.0], 2, end)
    assert len(q) == 3
    i0, p0 = q[0]
    f = NETWORK_EXACT_GAP_SHARE
    assert i0 == 2 and p0 == pytest.approx(200.0 * ((1 - f) / 3 + f * 1.0 / 4.0), rel=1e-3)
    i1, p1 = q[1]  # the time layer 2 was given and has not used is not the next one's
    assert i1 == 0 and p1 == pytest.approx((200.0 - p0) * ((1 - f) / 2 + f * 1.0 / 3.0), rel=1e-3)
    q.finished(2)  # layer 2 is done: what it did not use goes to the layers sent after it
    _, p2 = q[2]
    assert p2 == pytest.approx(min((200.0 - p1) * 1.0, 100.0), rel=1e-3)  # never past the end
    with pytest.raises(IndexError):
        q[3]


def test_serial_network_proves_every_layer_with_its_own_certificate() -> None:
    seen = []
    net = netmod.search_network_exact(LAYERS, small_arch(), network_time_s=30.0, backend="serial",
                                      on_layer=lambda i, n, r: seen.append((i, n, r.problem)),
                                      searcher_options={"warm_budget": 1000})
    assert len(net.layers) == 3 and net.complete and net.n_proven == 3 and net.certified_gap() == 0.0
    assert [s[:2] for s in seen] == [(0, 3), (1, 3), (2, 3)]
    assert [r.problem for r in net.layers] == ["a", "b", "c"] and net.repeats == (2, 1, 1)
    for r in net.layers:  # each layer equals its own exact search, with its two runs listed
        alone = search(matmul(r.problem, **{"a": {"m": 4, "n": 2, "k": 2}, "b": {"m": 2, "n": 2, "k": 4},
                                            "c": {"m": 4, "n": 4, "k": 2}}[r.problem]), small_arch(),
                       searcher="exact", time_limit_s=30, searcher_options={"warm_budget": 0, "workers": 1})
        assert r.best_objective == pytest.approx(alone.best_objective, rel=1e-12)
        assert [x["searcher"] for x in r.certificate["runs"]] == ["anneal", "exact"]
    assert net.config["workers"] == 1 and net.config["network_time_s"] == 30.0
    with pytest.raises(SpecError, match="one total time"):
        netmod.search_network_exact(LAYERS, small_arch(), network_time_s=5.0, backend="serial", time_limit_s=2.0)


def test_serial_tasks_give_the_time_left_to_a_second_run_of_an_open_layer(monkeypatch) -> None:
    """A layer left open by its first branch and bound (cut here to a millisecond) is sent
    again from its best mapping with the time left, and its result keeps both runs."""
    import accelmap.search.api as api

    real = api.search
    first = []

    def spy(problem, arch, **kw):
        if kw["searcher"] == "exact" and problem.name == "c" and not first:
            first.append(kw.get("initial"))
            kw["time_limit_s"] = 1e-3
        return real(problem, arch, **kw)

    monkeypatch.setattr(api, "search", spy)
    seen = []
    net = netmod.search_network_exact(LAYERS, small_arch(), network_time_s=30.0, backend="serial",
                                      on_layer=lambda i, n, r: seen.append((i, r.problem)),
                                      searcher_options={"warm_budget": 1000, "workers": 1})
    assert first and net.n_proven == 3 and net.certified_gap() == 0.0
    c = next(r for r in net.layers if r.problem == "c")
    runs = c.certificate["runs"]
    assert [(x["searcher"], x.get("pass")) for x in runs] == [("anneal", None), ("exact", None), ("exact", 2)]
    assert not runs[1]["proven"] and runs[2]["proven"] and c.proven_optimal
    assert c.best_objective <= runs[1]["best"] and len(seen) == 4 and seen[-1] == (2, "c")


def _default_workers() -> int:
    from accelmap.search.exact import default_workers

    return default_workers()


@pytest.mark.slow
def test_network_on_two_ray_workers_equals_the_serial_one() -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        net = netmod.search_network_exact(LAYERS, small_arch(), network_time_s=60.0, backend="ray",
                                          searcher_options={"warm_budget": 1000})
        # inside a one-CPU Ray task the exact searcher's default is one process
        assert ray.get(ray.remote(num_cpus=1)(_default_workers).remote()) == 1
    finally:
        ray.shutdown()
    serial = netmod.search_network_exact(LAYERS, small_arch(), network_time_s=30.0, backend="serial",
                                         searcher_options={"warm_budget": 1000})
    assert net.n_proven == 3 and net.config["workers"] == 2
    assert [r.best_objective for r in net.layers] == pytest.approx([r.best_objective for r in serial.layers],
                                                                   rel=1e-12)


def test_cli_network_tasks_take_no_portfolio_options(capsys) -> None:
    from accelmap.cli import main

    base = ["search", "--arch", "eyeriss-like", "--no-progress", "--network", "resnet50", "--searcher", "exact",
            "--network-time", "10", "--workers", "2"]
    assert main(base + ["--seeds", "2"]) == 2
    assert "--seeds and --rounds" in capsys.readouterr().err
    assert main(base + ["--rounds", "2"]) == 2


def test_exact_searcher_refuses_a_bad_worker_count() -> None:
    with pytest.raises(SpecError, match="workers = 0"):
        search(LAYERS[0], small_arch(), searcher="exact", searcher_options={"workers": 0})
