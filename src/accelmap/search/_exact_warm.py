"""The exact mapper's incumbents from outside its tree (`accelmap.search.exact`): the first
incumbent, the warm start beside the tree and the incumbent's value shared between processes.

The branch and bound cuts with an incumbent, so it starts from the best legal mapping of the
candidates it is given (`_first_incumbent`): the warm start's best, a short default search
(``anneal``) that `ExactSearcher.run` runs first, and any points the caller hands on. On two
or more workers the warm start runs in a forked process beside the tree instead (`_WarmStart`,
`_warm_main`), after a quick warm start of ``_QUICK_WARM`` evaluations that gives the tree
its first cuts; its value reaches the tree through a `multiprocessing.Value` as soon as it
ends. The processes of one search trade the incumbent's value through such a value
(`_sync`): one found here is published, one found elsewhere is cut with, its mapping staying
with its finder. The incumbents found inside the tree (its leaves and the dives) are
`accelmap.search._exact_tree`'s.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from accelmap.mapper.mapping import MappingBatch
from accelmap.search._exact_nodes import _Problem
from accelmap.search.objectives import ObjectiveSpec


class _WarmStart:
    """The warm start (``anneal``) run in a forked process beside the branch and bound
    (`ExactSearcher.run` with two or more workers): ``shared`` is the incumbent's value that
    the tree's processes cut with (`_sync`), which the warm start lowers to its best as soon
    as it ends; its mapping comes back through a pipe (`finish`). Run first, the warm start
    keeps the branch and bound waiting, though it uses less than one core (its proposals
    are numpy on one thread; only its evaluations spread over threads: 2.1 CPU s in 3.3 s
    for simple3 L3's 1M evaluations). While it runs, `_solve_workers` keeps one of its
    workers unstarted, so the processes never outnumber the workers; the last worker starts
    when the warm start ends and takes half of a busy one's nodes. The warm start is the
    same run (budget, seed, time cap), so its mapping is the same as when it ran first
    unless its time cap stops it earlier. The tree does not start from nothing: a quick
    warm start of ``_QUICK_WARM`` evaluations runs in this process first (beside this one),
    since the tree's cuts want an incumbent early (simple3's depthwise layer, one process:
    84-133 thousand nodes to the proof from no incumbent, 60 thousand from 20,000
    evaluations' mapping, 59 thousand from 1M evaluations')."""

    def __init__(self, run: Any) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.shared = ctx.Value("d", math.inf)
        self._recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_warm_main, args=(run, self.shared, send), daemon=True)
        self.proc.start()
        send.close()
        self.evaluations = 0
        self.seconds = 0.0

    def running(self) -> bool:
        return self.proc.is_alive() and not self._recv.poll()

    def finish(self, P: _Problem, needed: bool) -> None:
        """Take the warm start's mapping as the incumbent if it is better. ``needed``: wait
        for the warm start to end (the search was stopped by time, or holds no mapping of its
        own for its incumbent); otherwise (proven, or interrupted, from a mapping of its own)
        a warm start still running is stopped (its evaluations are not counted)."""
        if not needed and self.running():
            self.close()
            return
        try:
            msg = self._recv.recv()
        except EOFError:
            raise RuntimeError(f"exact search: the warm start's process died (exit code {self.proc.exitcode})") \
                from None
        finally:
            self.close()
        if msg[0] == "error":
            raise RuntimeError(f"exact search: the warm start failed:\n{msg[1]}")
        _, self.evaluations, self.seconds, value, batch = msg
        if batch is not None and (value < P.best_value or P.best_batch is None and value <= P.best_value):
            P.best_value, P.best_batch = value, batch

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()
        self._recv.close()


def _warm_main(run: Any, shared: Any, send: Any) -> None:
    """The warm start's process (`_WarmStart`): ``run()`` returns ``(evaluations, batch or
    None)``; the batch's value is taken as `_first_incumbent` takes it, published to
    ``shared`` and sent with the batch."""
    import signal
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent catches Ctrl-C and stops this
    try:
        t = time.perf_counter()
        n, batch, space, model, objective = run()
        value, batch = _first_incumbent(space, model, objective, batch)
        with shared.get_lock():
            if value < shared.value:
                shared.value = value
        send.send(("done", n, time.perf_counter() - t, value, batch))
    except Exception:  # noqa: BLE001 - reported to the parent, which raises it
        send.send(("error", traceback.format_exc()))
    finally:
        send.close()


def _sync(P: _Problem, shared: Any) -> None:
    """Trade the incumbent's value with the other processes of one search through ``shared``
    (a `multiprocessing.Value`): publish one found here, cut with one found elsewhere (whose
    mapping stays with its finder)."""
    value = shared.value
    if P.best_value < value:
        with shared.get_lock():
            if P.best_value < shared.value:
                shared.value = P.best_value
    elif value < P.best_value:
        P.best_value, P.best_batch = value, None


def _first_incumbent(space: Any, model: Any, objective: ObjectiveSpec,
                     incumbent: MappingBatch | None) -> tuple[float, MappingBatch | None]:
    """The best legal mapping of ``incumbent`` (objective value, one-row batch), or
    ``(inf, None)`` when there is none."""
    if incumbent is None or not len(incumbent):
        return math.inf, None
    chk = space.check(incumbent)
    m = model.evaluate(space.problem, space.arch, incumbent)
    val = objective.scalar(m.energy_pj, m.cycles, m.valid & chk.valid)
    i = int(np.argmin(val))
    if not math.isfinite(val[i]):
        return math.inf, None
    return float(val[i]), incumbent.take(np.array([i]))


