"""`RayBackend` on a local Ray it starts itself: a run ended early (Ctrl-C, a caller that
stops reading) leaves its tasks in flight to `close`, which shuts Ray down, instead of
force-cancelling them; the next run on the same backend cancels them first and still
returns every one of its own results."""

from __future__ import annotations

import sys
import time

import pytest

from accelmap.parallel.backend import RayBackend

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


def nap(seconds: float) -> dict:
    time.sleep(seconds)
    return {"slept": seconds}


def test_early_end_leaves_tasks_to_shutdown_and_next_run_is_whole():
    if ray.is_initialized():  # pragma: no cover - another test left Ray running
        pytest.skip("Ray already running in this process; this test needs the backend to start it")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    backend = RayBackend(workers=2)
    try:
        assert backend._owns and backend._local
        gen = backend.run(nap, [0.01] + [30.0] * 3)
        i, outcome = next(gen)
        assert (i, outcome["status"]) == (0, "ok")
        gen.close()  # what a KeyboardInterrupt in the consumer does
        assert len(backend._abandoned) == 3  # not cancelled: close's ray.shutdown stops them
        got = dict(backend.run(nap, [0.01, 0.02, 0.03]))
        assert backend._abandoned == []
        assert sorted(got) == [0, 1, 2]
        assert [got[k]["payload"]["slept"] for k in range(3)] == [0.01, 0.02, 0.03]
    finally:
        backend.close()
    assert not ray.is_initialized()
