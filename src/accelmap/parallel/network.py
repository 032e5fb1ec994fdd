"""An exact network search under one total time with the layers as tasks on several workers.

`accelmap.search.search_network` with ``network_time_s`` runs the distinct layers one after
the other in this process (`accelmap.search.api._exact_network`), each branch and bound on
every CPU (the exact searcher's ``workers``). Here the same two phases run as tasks on a
`Backend` of ``W`` workers (a local Ray, a Ray cluster, or this process):

1. every layer's warm start (``anneal``), ``NETWORK_EXACT_WARM_SHARE`` of the time on ``W``
   workers, so each gets ``NETWORK_EXACT_WARM_SHARE * total * W / n`` seconds;
2. one branch and bound per layer, one process each, the layers in increasing order of their
   part of the network's gap (as in `_exact_network`). A layer's time is set when it is sent
   to a worker: the worker time left, ``W`` times the wall time left less what the layers
   still running were given and have not used, times ``(1 - f) / m + f w_i / W_m`` (``m``
   the layers not yet sent, ``W_m`` their weights), at most the wall time left. A layer
   proven early hands its unused time to the layers sent after it;
3. with the wall time left (at least ``NETWORK_EXACT_AGAIN_MIN_S``), a second branch and
   bound of each layer still open, from its best mapping, the largest parts of the gap
   first, each layer's time set when it is sent by the same rule; a layer keeps the run with
   the higher certified bound and the better mapping (`search.api.second_run_result`).

Results come back as each layer finishes (``on_layer``); Ctrl-C returns every finished
layer. Each layer's certificate is its own; the network's certified gap is
`NetworkResult.certified_gap`, as for a serial run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from accelmap.errors import SpecError

__all__ = ["search_network_exact"]


def _warm_task(task: dict[str, Any]) -> dict[str, Any]:
    """One layer's warm start (module level, so Ray pickles it by reference)."""
    from accelmap.search.api import search

    t0 = time.perf_counter()
    r = search(task["problem"], task["arch"], searcher="anneal", budget=task["budget"],
               time_limit_s=task["time_limit_s"], **task["kwargs"])
    return {"result": r.to_dict(), "wall_s": round(time.perf_counter() - t0, 3)}


def _exact_task(task: dict[str, Any]) -> dict[str, Any]:
    """One layer's branch and bound, for at most its part of the time and never past the
    network's end (``end``, wall-clock seconds since the epoch)."""
    import numpy as np

    from accelmap.search.api import build_space, load_constraints_any, search

    part = max(min(task["time_limit_s"], task["end"] - time.time()), 1e-3)
    t0 = time.perf_counter()
    kw = task["kwargs"]
    p, arc = task["problem"], task["arch"]
    space = build_space(p, arc, load_constraints_any(kw.get("constraints"), arc, p),
                        allow_padding=kw.get("allow_padding", False))
    initial = None if task["initial"] is None else np.asarray([task["initial"]], dtype=np.int64)
    r = search(p, arc, searcher="exact", time_limit_s=part, space=space, searcher_options=task["options"],
               initial=initial, **kw)
    return {"result": r.to_dict(), "wall_s": round(time.perf_counter() - t0, 3), "time_limit_s": round(part, 3)}


class _ExactQueue(Sequence[dict[str, Any]]):
    """The exact tasks in gap order, each made when the backend sends it: its time is then
    set from the worker time left (see the module doc)."""

    def __init__(self, order: list[int], make: Any, weights: list[float], workers: int, end: float) -> None:
        self.order, self.make, self.weights, self.workers, self.end = order, make, weights, workers, end
        self.pool = sum(weights[i] for i in order)
        self.running: dict[int, tuple[float, float]] = {}  # layer -> (sent at, its time)

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, j: Any) -> Any:
        if isinstance(j, slice):
            raise TypeError("the exact tasks are made one at a time")
        from accelmap.search.api import NETWORK_EXACT_GAP_SHARE as f

        i = self.order[j]
        now = time.time()
        wall_left = max(self.end - now, 0.0)
        given = sum(max(part - (now - sent), 0.0) for sent, part in self.running.values())
        left = max(self.workers * wall_left - given, 0.0)
        m = len(self.order) - j
        share = (1.0 - f) / m + (f * self.weights[i] / self.pool if self.pool > 0 else f / m)
        self.pool -= self.weights[i]
        part = min(left * share, wall_left)
        self.running[i] = (now, part)
        return self.make(i, part)

    def finished(self, i: int) -> None:
        self.running.pop(i, None)


def search_network_exact(network_or_layers: Any, arch: Any, *, network_time_s: float, backend: str = "ray",
                         address: str | None = None, workers: int | None = None, on_layer: Any = None,
                         on_start: Any = None, **kwargs: Any) -> Any:
    """`search_network(..., searcher="exact", network_time_s=...)` with the layers as tasks
    on ``workers`` workers (module doc).

    Parameters
    ----------
    network_or_layers, arch
        As for `accelmap.search.search_network`.
    network_time_s
        The wall time of the whole search, starting a Ray included.
    backend, address, workers
        Where the tasks run (`accelmap.parallel.make_backend`): ``"ray"`` (a local Ray of
        ``workers`` CPUs, default every CPU, or the cluster at ``address``) or ``"serial"``
        (this process, one worker).
    on_layer
        ``on_layer(index, n_layers, result)`` as each layer's exact search finishes.
    on_start
        ``on_start(backend)`` once the workers are up (the CLI prints their number).
    **kwargs
        The options of `accelmap.search.search` (not ``searcher``, ``budget`` or
        ``time_limit_s``). ``searcher_options`` go to the exact searches (``warm_budget``
        is the warm start's, as in `search_network`); their ``workers`` is 1 unless given.

    Returns
    -------
    `NetworkResult` whose layers are in the network's order, those finished when Ctrl-C
    stopped it only.
    """
    from accelmap.parallel.backend import make_backend
    from accelmap.search.api import (
        NETWORK_EXACT_AGAIN_MIN_S,
        NETWORK_EXACT_WARM_BUDGET,
        NETWORK_EXACT_WARM_SHARE,
        NetworkResult,
        _arch,
        network_groups,
        open_layers_by_gap,
        second_run_result,
    )
    from accelmap.search.result import SearchResult

    t0 = time.perf_counter()
    end = time.time() + network_time_s
    if not network_time_s > 0:
        raise SpecError(f"network_time_s = {network_time_s}; expected seconds > 0")
    for key in ("searcher", "budget", "time_limit_s", "checkpoint", "space"):
        if kwargs.get(key) not in (None, "exact"):
            raise SpecError(f"{key} = {kwargs[key]!r}: a network under one total time (network_time_s) sets each "
                            "layer's searches itself; give no searcher other than exact, budget, time_limit_s, "
                            "checkpoint or space")
        kwargs.pop(key, None)
    name, members_of = network_groups(network_or_layers)
    arc = _arch(arch, kwargs.pop("energy", None))
    firsts = [m[0] for m in members_of]
    repeats = [sum(int(getattr(p, "repeat", 1)) for p in m) for m in members_of]
    names = [tuple(p.name for p in m) for m in members_of]
    n = len(firsts)
    opts = dict(kwargs.pop("searcher_options", None) or {})
    warm_budget = opts.pop("warm_budget", NETWORK_EXACT_WARM_BUDGET)
    kwargs["progress"] = False
    exact_opts = dict(opts, warm_budget=0)  # the warm start runs apart (or is switched off)
    exact_opts.setdefault("workers", 1)  # one process per layer: the layers fill the workers
    results: list[Any] = [None] * n
    be = make_backend(backend, address=address, workers=workers, queue=False)
    W = int(getattr(be, "n_workers", 1))
    try:
        if on_start is not None:
            on_start(be)
        warm: list[Any] = [None] * n
        weight = [0.0] * n
        if warm_budget:
            warm_s = NETWORK_EXACT_WARM_SHARE * network_time_s * W / n
            tasks = [{"problem": p, "arch": arc, "budget": warm_budget, "time_limit_s": warm_s, "kwargs": kwargs}
                     for p in firsts]
            for i, out in be.run(_warm_task, tasks):
                if out["status"] == "ok":
                    r = SearchResult.from_dict(out["payload"]["result"])
                    lb = r.objective_lower_bound()
                    weight[i] = repeats[i] * (r.best_objective - (lb if lb is not None and lb > 0 else 0.0))
                    warm[i] = (r, out["payload"]["wall_s"], warm_s)
                elif out["status"] != "infeasible":  # infeasible: no legal mapping sampled, the exact search decides
                    raise SpecError(f"warm start of {firsts[i].name} failed: {out['error']}")
        top = max(weight, default=0.0)
        weight = [w if warm[i] is not None else max(top, 1.0) for i, w in enumerate(weight)]

        def make(i: int, part: float) -> dict[str, Any]:
            return {"problem": firsts[i], "arch": arc, "time_limit_s": part, "end": end, "options": exact_opts,
                    "initial": None if warm[i] is None else list(warm[i][0].best_x), "kwargs": kwargs}

        queue = _ExactQueue(sorted(range(n), key=lambda j: weight[j]), make, weight, W, end)
        done = 0
        for j, out in be.run(_exact_task, queue):
            i = queue.order[j]
            queue.finished(i)
            if out["status"] != "ok":
                raise SpecError(f"exact search of {firsts[i].name} failed: {out['error']}")
            results[i] = _layer_result(SearchResult.from_dict(out["payload"]["result"]), out, warm[i])
            done += 1
            if on_layer is not None:
                on_layer(done - 1, n, results[i])
        # the time left (layers proven early give theirs back): a second branch and bound of
        # each layer still open from its best mapping, largest parts of the gap first
        todo, gap_part = open_layers_by_gap(results, repeats)
        if todo and end - time.time() >= NETWORK_EXACT_AGAIN_MIN_S:
            def make_again(i: int, part: float) -> dict[str, Any]:
                return {"problem": firsts[i], "arch": arc, "time_limit_s": part, "end": end, "options": exact_opts,
                        "initial": list(results[i].best_x), "kwargs": kwargs}

            again = _ExactQueue(todo, make_again, gap_part, W, end)
            for j, out in be.run(_exact_task, again):
                i = again.order[j]
                again.finished(i)
                if out["status"] != "ok":
                    raise SpecError(f"exact search of {firsts[i].name} failed: {out['error']}")
                results[i] = second_run_result(
                    results[i], SearchResult.from_dict(out["payload"]["result"]),
                    {"time_limit_s": out["payload"]["time_limit_s"], "wall_s": out["payload"]["wall_s"],
                     "worker": out.get("worker")})
                if on_layer is not None:
                    on_layer(i, n, results[i])
    except KeyboardInterrupt:  # keep every finished layer; the tasks in flight are cancelled
        pass
    finally:
        be.close()
    kept = [i for i in range(n) if results[i] is not None]
    cfg = dict(results[kept[0]].config) if kept else {}
    cfg.pop("problem", None)
    cfg.update({"network_time_s": network_time_s, "backend": backend, "workers": W})
    return NetworkResult(network=name, arch=getattr(arc, "name", str(arc)), layers=tuple(results[i] for i in kept),
                         repeats=tuple(repeats[i] for i in kept), names=tuple(names[i] for i in kept),
                         n_distinct=n, elapsed_s=round(time.perf_counter() - t0, 3), config=cfg)


def _layer_result(r: Any, out: dict[str, Any], warm: Any) -> Any:
    """A layer's exact result with its warm start's evaluations added and both runs listed
    in ``certificate["runs"]`` (as `_exact_network` makes it)."""
    runs = []
    if warm is not None:
        wr, wall, warm_s = warm
        runs.append({"searcher": "anneal", "time_limit_s": round(warm_s, 3), "wall_s": wall,
                     "evaluations": wr.n_evaluations, "best": wr.best_objective,
                     "lower_bound": wr.objective_lower_bound()})
    runs.append({"searcher": "exact", "time_limit_s": out["payload"]["time_limit_s"],
                 "wall_s": out["payload"]["wall_s"], "worker": out.get("worker"), "proven": r.proven_optimal,
                 "best": r.best_objective, "lower_bound": r.objective_lower_bound()})
    cert = dict(r.certificate or {}, runs=runs)
    if warm is not None:
        cert["warm_start_evaluations"] = warm[0].n_evaluations
        r = dataclasses.replace(r, n_evaluations=r.n_evaluations + warm[0].n_evaluations,
                                elapsed_s=round(r.elapsed_s + warm[1], 6))
    return dataclasses.replace(r, certificate=cert)
