"""Searches whose inner loop runs on a GPU (``device="cuda"``, ``accelmap search --device cuda``).

The ``random`` and ``anneal`` searchers on the ``loopnest`` model run as the device kernels of
`accelmap.costmodels._cuda`: mappings are drawn (or moved, one annealing chain per GPU
thread), checked and evaluated on the device, and only each thread's best row and its
counters come back. An evaluation is one distinct mapping evaluated (a legal one) or checked
and refused: random search evaluates each fitting tiling under ``_ORDERS`` random loop
orders; annealing runs chains of W GPU threads (``searcher_options`` ``lanes``, default 8),
each of which proposes its own move per step and, if it fits, evaluates the moved mapping and
K - 1 loop-order variants of it (``orders``, default 16); the best of the chain's W x K goes
through the Metropolis test, and every R steps (``restart``, default 8; 0: never) the worse
half of a block's 16 chains take the states of the better half. ``{"orders": 1, "lanes":
1}`` is the rule of one moved mapping per step and chain (one GPU thread).
Launches repeat, each with its own seed, until the budget (evaluations) or the time limit is
spent. The best row is evaluated once more on the host (the CPU
kernel) for the `SearchResult`.

The device draws from the whole map space of exact factorizations (every prime factor of a
bound in some level's temporal, X or Y slot; any loop order; any bypass the arch allows), so
constraints, padding, warm starts and checkpoints are not available there: asking for them
is an error that says so.

The ``exhaustive`` searcher visits the points the CPU ``exhaustive`` searcher visits (every
cost-distinct point of the `MapSpace`, constraints applied, in `MapSpace.enumerate`'s order;
the space built as the CPU search builds it, with `build_space` and `load_constraints_any` of
`accelmap.search._inputs`) with `accelmap.costmodels._cuda_exhaustive`: the host ships tile
rows, the device decodes orders and bypass, checks and evaluates, and only each block's best
and legal count come back. It refuses the spaces the CPU searcher refuses
(`SpaceTooLargeError` above ``searcher_options={"max_size": N}``, default 2e7), needs no
budget (the whole space), stops at a budget (a prefix of the enumeration) or time limit, and
says in ``config["completed"]`` whether it visited every point; padding, warm starts,
checkpoints and early stops are not available.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.search._inputs import build_space, load_constraints_any
from accelmap.search.objectives import Objective, ObjectiveSpec
from accelmap.search.result import History, SearchResult, mapping_to_json

__all__ = ["DEVICES", "device_search", "check_device"]

DEVICES = ("cpu", "cuda")
SEARCHERS = ("random", "anneal", "exhaustive")
# One launch: GPU threads (chains), and draws per thread (random) or steps per chain (anneal).
_THREADS = 1 << 18
_PER_THREAD = 1024
_STEPS = 1024
# Annealing chains of several mappings per step or several lanes: evaluations per thread and
# launch (2048 // orders steps per chain). On an H100 (docs/performance.md) chains of 128
# steps of 16 mappings found the best EDP of the one-mapping-per-step rule on ten seeds out
# of ten at its wall time, chains of 64 steps on nine.
_MULTI_STEPS = 2048
_N_INIT = 8
# Random search: loop orders evaluated per fitting tiling (`_cuda.random_search`'s ``orders``;
# measured on an H100, benchmarks/results/bench_gpu.json).
_ORDERS = 32
# Annealing (``searcher_options``): ``orders``, the mappings evaluated per step whose move
# fits (the moved one and loop-order variants of it from the same factor caches),
# ``lanes``, the GPU threads of a chain, each proposing its own move (the best of a chain's
# proposals goes through the Metropolis test), and ``restart``, the steps between two
# restarts, where the worse half of a block's chains take the better half's states
# (`_cuda.anneal_search`). A launch's threads take _MULTI_STEPS // orders steps (_STEPS with
# one mapping per step on chains of one thread); budgets below one block's launch of one
# step run chains of one thread. Defaults measured on an H100 (docs/performance.md,
# benchmarks/results/bench_gpu_anneal_default.json).
_ANNEAL_ORDERS = 16
_ANNEAL_LANES = 8
_ANNEAL_RESTART = 8
_ANNEAL_OPTIONS = ("orders", "lanes", "restart")
_TPB = 128


def check_device(device: str) -> str:
    if device not in DEVICES:
        raise SpecError(f"device = {device!r}; expected one of {', '.join(DEVICES)}")
    if device == "cuda":
        from accelmap.costmodels._cuda import require

        require()
    return device


def device_search(problem: Any, arch: Any, *, model_name: str, searcher: str, objective: ObjectiveSpec,
                  budget: int | None, time_limit_s: float | None, seed: int, unsupported: dict[str, Any]
                  ) -> SearchResult:
    """Random search, annealing or exhaustive enumeration on the GPU; see the module docstring."""
    from accelmap.costmodels import _cuda
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.mapping import MappingBatch

    check_device("cuda")
    if model_name != "loopnest":
        raise SpecError(f"device cuda runs the loopnest model only (got model {model_name!r}); use device cpu")
    if searcher not in SEARCHERS:
        raise SpecError(f"device cuda runs the searchers {', '.join(SEARCHERS)} (got {searcher!r}); use device cpu")
    if objective.kind is not Objective.EDP:
        raise SpecError("device cuda searches for the best EDP only; use objective 'edp' or device cpu")
    if searcher == "exhaustive":
        return _exhaustive(problem, arch, model_name=model_name, objective=objective, budget=budget,
                           time_limit_s=time_limit_s, seed=seed, options=dict(unsupported))
    unsupported = dict(unsupported)
    opts = dict(unsupported.pop("searcher_options", None) or {}) if searcher == "anneal" else {}
    bad = sorted(set(opts) - set(_ANNEAL_OPTIONS))
    if bad:
        raise TypeError(f"anneal on device cuda: unknown searcher options {bad}; accepted: {', '.join(_ANNEAL_OPTIONS)}")
    for key in opts:
        v = opts[key]
        least = 0 if key == "restart" else 1
        if isinstance(v, bool) or not isinstance(v, int) or v < least or (key == "lanes" and 32 % v):
            raise SpecError(f"anneal on device cuda: {key} = {v!r}; expected "
                            + ("a divisor of 32" if key == "lanes" else f"an int >= {least}"))
    given = [k for k, v in unsupported.items() if v not in (None, False, {}, [])]
    if given:
        raise SpecError(f"device cuda does not support {', '.join(given)}; drop them or use device cpu")
    if budget is None and time_limit_s is None:
        raise SpecError("device cuda needs a budget (evaluations) or a time limit")
    t0 = time.perf_counter()
    # Compile the kernel (or load it) on a tiny launch first, so that launch timings are the
    # device's (the compile time still counts in the wall time).
    # Annealing: chains of `lanes` lanes in blocks of _TPB threads, unless the budget is below
    # one such launch of one step (then chains of one thread): one kernel per search.
    k = int(opts.get("orders", _ANNEAL_ORDERS))  # (annealing: evaluations per step)
    lanes = int(opts.get("lanes", _ANNEAL_LANES))
    lanes = lanes if budget is None or budget >= _TPB * (1 + _N_INIT) * k else 1
    restart = int(opts.get("restart", _ANNEAL_RESTART)) if lanes > 1 else 0
    if searcher == "random":
        _cuda.random_search(problem, arch, threads=32, per_thread=1, seed=seed, top=1)
    else:
        _cuda.anneal_search(problem, arch, threads=_TPB, steps=1, n_init=1, seed=seed, top=1, orders=k, lanes=lanes,
                            tpb=_TPB)
    compile_s = time.perf_counter() - t0
    n_evals = n_legal = 0
    best: _cuda.GpuSearchResult | None = None
    launch = 0
    kernel_s = 0.0
    fill = 1.0  # evaluations a launch made per evaluation it could make (refused moves count one, not `k`)
    while True:
        left = None if budget is None else budget - n_evals
        if left is not None and left <= 0:
            break
        # (at least one launch: a time limit shorter than the compile still returns a row)
        if time_limit_s is not None and launch and time.perf_counter() - t0 >= time_limit_s:
            break
        # Small budgets: fewer draws or steps per thread, so that at least 32 threads (a block
        # of chains of several lanes) run.
        least = _TPB if lanes > 1 else 32
        most = (_STEPS if k == 1 and lanes == 1 else _MULTI_STEPS) // k
        steps = most if left is None else max(1, min(most, left // (least * k) - _N_INIT))
        per = (_PER_THREAD if left is None else max(1, min(_PER_THREAD, left // 32))) if searcher == "random" \
            else (steps + _N_INIT) * k
        # the launch that finishes the budget is sized by the previous launch's fill, less 1%
        # where launches fall short (else a refused move's shortfall leaves a tail of ever
        # smaller launches)
        least_fill = fill if fill >= 1.0 else 0.99 * fill
        threads = _THREADS if left is None else int(min(_THREADS, max(1, math.ceil(left / (per * least_fill)))))
        sub_seed = int(np.random.SeedSequence([seed, launch]).generate_state(1)[0])
        if searcher == "random":
            r = _cuda.random_search(problem, arch, threads=threads, per_thread=per, seed=sub_seed, top=1,
                                    orders=max(1, min(_ORDERS, per // 4)))
        else:
            # chains of several lanes run in whole blocks (the last launch may exceed the
            # budget by one block's evaluations and by 1% of its own)
            if lanes > 1:
                threads = min(_THREADS, -(-threads // _TPB) * _TPB)
            r = _cuda.anneal_search(problem, arch, threads=threads, steps=steps, n_init=_N_INIT, seed=sub_seed, top=1,
                                    orders=k, lanes=lanes, tpb=_TPB, restart=restart)
        launch += 1
        fill = min(1.0, max(0.5, r.evaluations / (r.threads * per)))
        n_evals += r.evaluations
        n_legal += r.legal
        kernel_s += r.seconds
        if len(r.edp) and (best is None or r.edp[0] < best.edp[0]):
            best = r
    elapsed = time.perf_counter() - t0
    if best is None or not len(best.edp):
        raise InfeasibleSpaceError(f"no legal mapping found on the GPU in {n_evals:,} evaluations")
    batch = MappingBatch._trusted(temporal=best.temporal[:1], spatial=best.spatial[:1], order=best.order[:1],
                         keep=best.keep[:1])
    metrics = LoopNestModel(engine="cpu").evaluate(problem, arch, batch)
    mapping = batch[0]
    return SearchResult(
        problem=getattr(problem, "name", str(problem)), arch=getattr(arch, "name", str(arch)), model=model_name,
        searcher=searcher, objective=objective, best=mapping, best_x=None, best_metrics=metrics.row(0),
        best_objective=float(metrics.edp[0]),
        history=History(evaluations=(n_evals,), seconds=(round(elapsed, 6),), best=(float(metrics.edp[0]),)),
        n_evaluations=n_evals, n_valid=n_legal, elapsed_s=round(elapsed, 6),
        stop_reason="budget" if budget is not None and n_evals >= budget else "time",
        config={"device": "cuda", "launches": launch,
                **({"orders": k, "lanes": lanes, "restart": restart} if searcher == "anneal" else {}),
                "kernel_s": round(kernel_s, 6), "compile_s": round(compile_s, 3),
                "legal_evaluations_per_s": n_legal / kernel_s if kernel_s > 0 else None},
        seed=seed, best_mapping_json=mapping_to_json(mapping, problem, arch),
    )


def _exhaustive(problem: Any, arch: Any, *, model_name: str, objective: ObjectiveSpec, budget: int | None,
                time_limit_s: float | None, seed: int, options: dict[str, Any]) -> SearchResult:
    from accelmap.costmodels import _cuda_exhaustive
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.errors import SpaceTooLargeError
    from accelmap.search.exhaustive import DEFAULT_MAX_SIZE

    opts = dict(options.pop("searcher_options", None) or {})
    max_size = opts.pop("max_size", DEFAULT_MAX_SIZE)
    opts.pop("chunk", None)  # the CPU searcher's batch size: the device chooses its own
    if opts:
        raise TypeError(f"exhaustive on device cuda: unknown searcher options {sorted(opts)}; accepted: max_size, chunk")
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise SpecError(f"exhaustive searcher: max_size = {max_size!r}; expected an int >= 1")
    space = options.pop("space", None)
    constraints = options.pop("constraints", None)
    allow_padding = bool(options.pop("allow_padding", False))
    given = [k for k, v in options.items() if v not in (None, False, {}, [])]
    if given:
        raise SpecError(f"exhaustive on device cuda does not support {', '.join(given)}; drop them or use device cpu")
    if allow_padding:
        raise SpecError("exhaustive on device cuda takes exact factorizations only (no allow_padding); use device cpu")
    if budget is not None and (isinstance(budget, bool) or budget < 1):
        raise SpecError(f"budget = {budget!r}; expected an int >= 1 or None (the whole space)")
    if space is None:
        space = build_space(problem, arch, load_constraints_any(constraints, arch, problem) if constraints else None)
    t0 = time.perf_counter()
    try:
        size = int(space.n_distinct(max_points=max_size))
        if size > max_size:
            raise SpaceTooLargeError(f"the map space has {size:,} points, more than the limit {max_size:,}")
    except SpaceTooLargeError as exc:  # the CPU searcher's refusal, word for word
        raise SpaceTooLargeError(
            f"exhaustive search refused: {exc}. The exhaustive limit is {max_size:,} mappings; "
            "use a sampling searcher (anneal, genetic, optuna, random), add constraints that fix "
            "loop orders or factors, or raise the limit (searcher_options={'max_size': N}, "
            "CLI --searcher-option max_size=N)"
        ) from exc
    r = _cuda_exhaustive.exhaustive_search(space, max_size=max_size, size=size, budget=budget,
                                           time_limit_s=None if time_limit_s is None else
                                           max(0.0, time_limit_s - (time.perf_counter() - t0)))
    elapsed = time.perf_counter() - t0
    if r.mapping is None:
        raise InfeasibleSpaceError(
            f"no legal mapping among the {r.evaluations:,} points the GPU enumerated"
            f"{'' if r.completed else f' (of {r.size:,})'}; try a larger buffer, fewer constraints or device cpu")
    metrics = LoopNestModel(engine="cpu").evaluate(space.problem, space.arch, r.mapping)
    mapping = r.mapping[0]
    stop = "exhausted" if r.completed else ("budget" if budget is not None and r.evaluations >= budget else "time")
    return SearchResult(
        problem=getattr(problem, "name", str(problem)), arch=getattr(arch, "name", str(arch)), model=model_name,
        searcher="exhaustive", objective=objective, best=mapping, best_x=None, best_metrics=metrics.row(0),
        best_objective=float(metrics.edp[0]),
        history=History(evaluations=(r.evaluations,), seconds=(round(elapsed, 6),), best=(float(metrics.edp[0]),)),
        n_evaluations=r.evaluations, n_valid=r.legal, elapsed_s=round(elapsed, 6), stop_reason=stop,
        config={"device": "cuda", "completed": r.completed, "space_size": r.size, "launches": r.launches,
                "kernel_wait_s": round(r.kernel_s, 6), "max_size": max_size,
                "evaluations_per_s": r.evals_per_s, "legal_evaluations_per_s": r.legal_per_s},
        seed=seed, best_mapping_json=mapping_to_json(mapping, space.problem, space.arch),
    )
