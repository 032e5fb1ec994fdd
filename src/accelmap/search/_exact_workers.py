"""One tree of the exact mapper on several processes (`accelmap.search.exact`).

`_solve_workers` expands the tree in this process until ``_SHARE_NODES`` nodes per worker are
open (a small tree is proven here, with no process started), deals the open nodes into one
share per worker (`_deal`: every share a spread of the bound order) and forks the workers
(`_worker_main`), each running the same `_exact_tree._loop` on its share with an open set of
its own. The incumbent's value is shared memory (`_exact_warm._sync`); an idle worker makes a
busy one give half its open nodes away at its next node (`_split_open`), and they are dealt to
the idle ones. The proof is the serial search's: every node is cut by the global incumbent or
expanded by one worker, the tree is closed only when every share was, and otherwise the
certified bound is the least of the workers' open bounds and of the shares not yet run.
Workers are forked (`_can_fork`): they start with this process's `_Problem`, and what comes
back through the queues (frames, mappings, counts) is pickled, so every class sent is defined
at module level. `default_workers` is the number of processes a search uses by default.
"""

from __future__ import annotations

import math
import time
from typing import Any

from accelmap.search import _exact_switches as sw
from accelmap.search._exact_nodes import Certificate, _Frame, _Problem
from accelmap.search._exact_tree import _loop, _Open
from accelmap.search._exact_warm import _sync, _WarmStart


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def default_workers() -> int:
    """The processes one exact search uses by default: the CPUs this process may run on, or,
    inside a Ray task (a sweep's or a portfolio's), the CPUs Ray assigned to the task, so
    that tasks side by side do not share cores."""
    import os
    import sys

    ray = sys.modules.get("ray")  # loaded only where Ray runs: never imported from here
    if ray is not None and ray.is_initialized():
        try:
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
        except Exception:  # noqa: BLE001 - the driver or an old Ray: no task's share to read
            cpus = None
        if cpus:
            return max(1, int(cpus))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not every platform has sched_getaffinity
        return max(1, os.cpu_count() or 1)


def _deal(frames: list[_Frame], k: int) -> list[list[_Frame]]:
    """The open nodes of ``frames`` dealt into ``k`` shares, every share a spread of the
    bound order: a frame with at least ``k`` open nodes gives every share every k-th node
    (each part still sorted), a smaller one goes whole to the next share in turn."""
    parts: list[list[_Frame]] = [[] for _ in range(k)]
    turn = 0
    live = [f for f in frames if f.pos < len(f.ids)]
    live.sort(key=lambda f: float(f.bounds[f.pos]))
    for f in live:
        ids, b = f.ids[f.pos:], f.bounds[f.pos:]
        if len(ids) >= k:
            for j in range(k):
                parts[(j + turn) % k].append(_Frame(f.pattern, f.depth, f.split, ids[j::k].copy(), b[j::k].copy()))
        else:
            parts[turn % k].append(_Frame(f.pattern, f.depth, f.split, ids.copy(), b.copy()))
        turn += 1
    return [p for p in parts if p]


def _split_open(open_: _Open) -> list[_Frame]:
    """Half of the open nodes of ``open_``, taken out of it for another worker: every other
    node of each frame with two or more open, every other frame of those with one. Each
    frame keeps its next node, so its heap key stays a lower bound of it."""
    give: list[_Frame] = []
    alt = False
    for _, _, _, f in open_.heap:
        r = len(f.ids) - f.pos
        if r <= 0:
            continue
        ids, b = f.ids[f.pos:], f.bounds[f.pos:]
        if r >= 2:
            give.append(_Frame(f.pattern, f.depth, f.split, ids[1::2].copy(), b[1::2].copy()))
            f.ids, f.bounds, f.pos = ids[0::2].copy(), b[0::2].copy(), 0
        else:
            if alt:
                give.append(_Frame(f.pattern, f.depth, f.split, ids.copy(), b.copy()))
                f.ids, f.bounds, f.pos = f.ids[:0], f.bounds[:0], 0
            alt = not alt
    open_.n_open = sum(len(f.ids) - f.pos for _, _, _, f in open_.heap)
    return give


def _open_frames(open_: _Open) -> list[_Frame]:
    return [f for _, _, _, f in open_.heap if f.pos < len(f.ids)]


def _frames_low(frames: list[_Frame]) -> float:
    return min((float(f.bounds[f.pos]) for f in frames if f.pos < len(f.ids)), default=math.inf)


_COUNTS = ("nodes", "cut", "infeasible", "leaves", "dives", "dive_leaves", "dive_improved", "dive_s")


def _worker_main(P: _Problem, wid: int, tasks: Any, results: Any, best: Any, hungry: Any, halt: Any,
                 t0: float) -> None:
    """One worker of `_solve_workers` (a forked process holding ``P``): runs the branch and
    bound on each share it is sent until it is sent None. Before every node it trades the
    incumbent's value with the others (``best``, shared memory), stops if ``halt`` is set,
    and gives half its open nodes away when a worker is idle (``hungry``)."""
    import signal
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent catches Ctrl-C and sets halt
    last = [0.0]

    def poll(open_: _Open) -> str:
        _sync(P, best)
        if halt.value:
            return "interrupted"
        if hungry.value > 0 and open_.n_open >= 2 and time.perf_counter() - last[0] >= sw._DONATE_EVERY_S:
            with hungry.get_lock():
                mine = hungry.value > 0
                if mine:
                    hungry.value -= 1
            if mine:
                last[0] = time.perf_counter()
                gift = _split_open(open_)
                if gift:
                    results.put(("donate", wid, gift))
        return ""

    cpu0 = time.process_time()
    while True:
        share = tasks.get()
        if share is None:
            return
        try:
            P.cert = Certificate()
            P.current, P.stopped = math.inf, ""
            P.best_value, P.best_batch = best.value, None
            open_ = _Open()
            for f in share:
                open_.push(f)
            stop = _loop(P, open_, None, t0, poll=poll)
            low = min(open_.min_bound(), P.current) if stop else math.inf
            poll(open_)  # publish an incumbent found after the last node
            found = P.best_batch is not None
            results.put(("done", wid, stop, low, P.best_value if found else math.inf, P.best_batch,
                         {k: getattr(P.cert, k) for k in _COUNTS}, time.process_time() - cpu0))
        except Exception:  # noqa: BLE001 - reported to the parent, which raises it
            results.put(("error", wid, traceback.format_exc()))
            return


def _solve_workers(P: _Problem, open_: _Open, progress: Any, t0: float, workers: int,
                   warm: _WarmStart | None = None) -> tuple[str, float]:
    """Branch and bound of one tree on ``workers`` processes; returns the stop reason ("" when
    the whole tree was closed) and the least bound of the work left open.

    This process first expands the tree best first until ``_SHARE_NODES`` nodes per worker
    are open (a small tree is proven here, with no process started), then deals the open
    nodes into one share per worker (`_deal`) and forks the workers (`_worker_main`), each
    running the same `_loop` on its share with its own open set. The incumbent's value is
    shared memory: every worker cuts with the best any worker found. A worker with no share
    left makes the others give half their open nodes away (`_split_open`), which are dealt
    to the idle ones (work stealing). The result is exact as the serial search's is: every
    node is cut by the global incumbent or expanded by one worker; the tree is closed only
    when every share was; else the certified bound is the least of the workers' open bounds
    and of the shares not yet run (their nodes' bounds). With ``warm`` (a warm start running
    beside the tree, `_WarmStart`) the incumbent's value is its ``shared``, and the last
    worker starts only when the warm start has ended."""
    import multiprocessing
    import queue

    target = sw._SHARE_NODES * workers

    def share_poll(o: _Open) -> str:
        if warm is not None:
            _sync(P, warm.shared)
        return "share" if o.n_open >= target else ""

    stop = _loop(P, open_, progress, t0, poll=share_poll)
    if stop != "share":
        return stop, (min(open_.min_bound(), P.current) if stop else math.inf)
    ctx = multiprocessing.get_context("fork")
    if warm is not None:
        best = warm.shared
        _sync(P, best)
    else:
        best = ctx.Value("d", P.best_value)
    hungry = ctx.Value("i", 0)
    halt = ctx.Value("i", 0)
    results = ctx.Queue()
    tasks = [ctx.SimpleQueue() for _ in range(workers)]
    procs = [ctx.Process(target=_worker_main, args=(P, w, tasks[w], results, best, hungry, halt, t0), daemon=True)
             for w in range(workers)]
    pending = _open_frames(open_)
    open_.heap, open_.stack, open_.n_open = [], [], 0  # the work is the workers' now
    late = workers - 1 if warm is not None and warm.running() else workers  # the first not started yet
    idle = set(range(late))
    running: dict[int, float] = {}  # worker -> the least bound of its share when sent
    stops: list[str] = []
    lows: list[float] = []
    stopping = False
    last_report = time.perf_counter()

    def dispatch() -> None:
        nonlocal pending
        if pending and idle and not stopping:
            for share in _deal(pending, len(idle)):
                w = idle.pop()
                running[w] = _frames_low(share)
                tasks[w].put(share)
            pending = []
        hungry.value = len(idle) if not pending and not stopping else 0

    P.cert.workers = workers
    P.cert.worker_cpu_s = [0.0] * workers
    for pr in procs[:late]:
        pr.start()
    try:
        dispatch()
        while running:
            if late < workers and warm is not None and not warm.running():
                for w in range(late, workers):
                    procs[w].start()
                    idle.add(w)
                late = workers
                dispatch()
            try:
                try:
                    msg = results.get(timeout=0.25)
                except queue.Empty:
                    dead = [w for w in running if not procs[w].is_alive()]
                    if dead:
                        raise RuntimeError(f"exact search: worker process {dead[0]} died (exit code "
                                           f"{procs[dead[0]].exitcode}) with its share of the tree open") from None
                    msg = None
                if msg is not None:
                    kind, w = msg[0], msg[1]
                    if kind == "error":
                        raise RuntimeError(f"exact search: worker process {w} failed:\n{msg[2]}")
                    if kind == "donate":
                        pending.extend(msg[2])
                    else:
                        _, _, st, low, value, batch, counts, cpu = msg
                        P.cert.worker_cpu_s[w] = cpu
                        for k, v in counts.items():
                            setattr(P.cert, k, getattr(P.cert, k) + v)
                        if batch is not None and value < P.best_value:
                            P.best_value, P.best_batch = value, batch
                        del running[w]
                        idle.add(w)
                        if st:
                            stops.append(st)
                            lows.append(low)
                            stopping = True
                    dispatch()
                if progress is not None and time.perf_counter() - last_report > 1.0:
                    last_report = time.perf_counter()
                    lb = min(list(running.values()) + [_frames_low(pending), P.best_value])
                    progress(min(P.best_value, best.value), lb, P.cert)
            except KeyboardInterrupt:  # Ctrl-C: the workers stop at their next node and report
                halt.value = 1
                stopping = True
                stops.append("interrupted")
                dispatch()
    finally:
        halt.value = 1
        for q in tasks[:late]:
            q.put(None)
        for pr in procs[:late]:
            pr.join(timeout=5)
            if pr.is_alive():
                pr.terminate()
    low = min(lows + [_frames_low(pending)])
    if not stops and not pending:
        return "", math.inf
    stop = "interrupted" if "interrupted" in stops else (stops[0] if stops else "time")
    return stop, low


