"""Where tasks run: in this process (`SerialBackend`) or on Ray (`RayBackend`).

A backend takes a task function and a list of tasks and yields ``(index, outcome)`` pairs
as tasks finish, in completion order. It knows nothing of what a task does: sweeps and
portfolios hand it a module-level function (so Ray pickles it by reference) and frozen
task specs. Every task runs through :func:`execute`, which times it, names the worker and
turns an exception into an ``error`` outcome, so one bad task never stops a sweep.

Ray is imported only when a `RayBackend` starts. With no address it starts a local Ray
(``ray.init()``, the embedded default) and shuts it down on `close`; ``"auto"`` or
``"ray://host:port"`` joins a running cluster.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import traceback
from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol, TypeVar

from accelmap.errors import InfeasibleSpaceError, SpecError

__all__ = ["Backend", "SerialBackend", "RayBackend", "execute", "make_backend", "SYSTEM_EXCEPTIONS"]

T = TypeVar("T")
Outcome = dict[str, Any]
TaskFn = Callable[[Any], dict[str, Any]]

# Exceptions that say the machine, not the task, failed: Ray retries the task on them
# (retry_exceptions) as it does on a lost worker (max_retries).
SYSTEM_EXCEPTIONS: tuple[type[BaseException], ...] = (MemoryError, ConnectionError)


def execute(task_fn: TaskFn, task: Any) -> Outcome:
    """Run one task and wrap its result as an outcome.

    Parameters
    ----------
    task_fn
        ``task -> payload`` where payload is a dict of result columns (``cycles``,
        ``energy_pj``, ``edp``, ``mapping``, ...). A payload may set ``status`` and
        ``error`` (a message).
    task
        The task spec, passed through.

    Returns
    -------
    ``{"status", "payload", "error", "worker", "started_at", "finished_at", "wall_s", "cpu_s"}``
    (``cpu_s``: CPU seconds of the worker process during the task);
    status is ``ok``, ``infeasible`` (the task raised `InfeasibleSpaceError`) or ``error``
    (any other exception, with its message and traceback). `SYSTEM_EXCEPTIONS` propagate so
    that Ray retries the task.
    """
    started = time.time()
    t0, c0 = time.perf_counter(), time.process_time()
    payload: dict[str, Any] = {}
    error: str | None = None
    try:
        payload = dict(task_fn(task))
        status = str(payload.pop("status", "ok"))
        error = payload.pop("error", None)
    except SYSTEM_EXCEPTIONS:
        raise
    except InfeasibleSpaceError as exc:
        status, error = "infeasible", str(exc)
    except Exception as exc:  # one failing task is data for the store, not the end of a sweep
        status = "error"
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
    return {
        "status": status,
        "payload": payload,
        "error": error,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "started_at": started,
        "finished_at": time.time(),
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
    }


class Backend(Protocol):
    """Runs tasks and yields ``(index into tasks, outcome)`` as each finishes."""

    name: str

    def run(self, task_fn: TaskFn, tasks: Sequence[Any]) -> Generator[tuple[int, Outcome], None, None]: ...

    def close(self) -> None: ...


class SerialBackend:
    """Runs every task in this process, one after another (no Ray needed)."""

    name = "serial"

    def __init__(self) -> None:
        self.n_workers = 1

    def run(self, task_fn: TaskFn, tasks: Sequence[Any]) -> Generator[tuple[int, Outcome], None, None]:
        for i, task in enumerate(tasks):
            yield i, execute(task_fn, task)

    def close(self) -> None:
        pass

    def __enter__(self) -> SerialBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ray_execute(task_fn: TaskFn, task: Any) -> Outcome:
    return execute(task_fn, task)


class RayBackend:
    """Runs tasks as Ray tasks, one CPU each, retried when their worker is lost.

    Parameters
    ----------
    address
        None starts a local Ray on demand (``ray.init()``) and shuts it down on `close`,
        unless the ``RAY_ADDRESS`` environment variable names a cluster to join;
        ``"auto"`` joins the cluster this node belongs to (``ray start``); ``"ray://host:port"``
        connects through Ray Client. When Ray is already initialised in this process it is
        used as is (and left running).
    workers
        The most tasks in flight at once. For a local Ray it is also its CPU count (default:
        every CPU of the machine); on a cluster the default is the cluster's CPU count.
    max_retries
        Retries of a task whose worker process or node dies (Ray ``max_retries``), and of a
        task that raised one of `SYSTEM_EXCEPTIONS` (``retry_exceptions``).
    log_to_driver
        Forward worker stdout/stderr to this process (off: accelmap workers print nothing
        and Ray's own worker chatter is noise).
    queue
        On a local Ray, send up to twice ``workers`` tasks at once (the others wait in Ray's
        queue, which hides the driver's round trip). False sends at most ``workers``: for a
        caller that sets a task's inputs when it is sent (the exact network search sets
        its time then), so none waits.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        *,
        max_retries: int = 3,
        log_to_driver: bool = False,
        queue: bool = True,
    ) -> None:
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise SpecError(f"workers = {workers!r}; expected an int >= 1")
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - ray is a dependency
            raise SpecError(
                "the Ray backend needs the `ray` package: pip install 'ray[default]', "
                "or use --backend serial"
            ) from exc
        self._ray = ray
        self._owns = False  # this backend called ray.init (and so calls ray.shutdown)
        started_local = False  # ... and that started a local Ray of `workers` CPUs
        if address is None and os.environ.get("RAY_ADDRESS"):
            address = os.environ["RAY_ADDRESS"]  # Ray's own convention for "join this cluster"
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": log_to_driver,
                # Ray's own warnings on a local start (e.g. about its token authentication)
                # are noise to a sweep user; on a cluster they may matter.
                "logging_level": logging.ERROR if address is None else logging.WARNING,
            }
            if address is None:
                kwargs["num_cpus"] = workers or os.cpu_count() or 1
                # A small object store: tasks carry specs and results of a few kB each.
                kwargs["object_store_memory"] = 256 * 1024**2
            else:
                kwargs["address"] = address
            try:
                ray.init(**kwargs)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise SpecError(
                    f"could not start or join Ray at address {address!r}: {str(exc).rstrip('.')}. For a "
                    "cluster, run `ray start --head` on the head node and pass --address auto "
                    "there (or ray://HEAD:10001 from elsewhere); for no cluster, omit --address"
                ) from exc
            self._owns = True
            started_local = address is None
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.n_workers = workers
        self._local = started_local
        # Tasks left running when a `run` ended early on a local Ray this backend started:
        # `close` (ray.shutdown) stops them, or the next `run` cancels them first.
        self._abandoned: list[Any] = []
        # Tasks in flight: on a joined cluster `workers` is the user's cap on concurrency; on
        # a local Ray we started with num_cpus=workers, Ray itself caps concurrency, and one
        # queued task per worker hides the driver's round trip between tasks.
        self._window = 2 * workers if started_local and queue else workers
        self._remote = ray.remote(  # type: ignore[call-overload]  # stubs say bool; a list is documented
            num_cpus=1, max_retries=max_retries, retry_exceptions=list(SYSTEM_EXCEPTIONS)
        )(_ray_execute)

    def run(self, task_fn: TaskFn, tasks: Sequence[Any]) -> Generator[tuple[int, Outcome], None, None]:
        ray = self._ray
        self._cancel(self._abandoned)
        self._abandoned = []
        fn_ref = ray.put(task_fn)
        pending: dict[Any, int] = {}
        next_i = 0
        try:
            while pending or next_i < len(tasks):
                # A bounded window: an interrupt then cancels at most that much work.
                while next_i < len(tasks) and len(pending) < self._window:
                    pending[self._remote.remote(fn_ref, tasks[next_i])] = next_i
                    next_i += 1
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i = pending.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        # Retries exhausted (worker or node lost every time) or a system
                        # exception raised on every attempt: record it; a re-run retries.
                        outcome = {
                            "status": "error", "payload": {}, "worker": None,
                            "error": f"task failed after retries: {type(exc).__name__}: {exc}",
                            "started_at": None, "finished_at": time.time(), "wall_s": None,
                        }
                    yield i, outcome
        finally:
            if pending and self._local and self._owns:
                # Not cancelled here: a cancel that races the task's own reply aborts the
                # driver inside Ray ("Tried to complete task that was not pending",
                # ray-project/ray#54846; still in Ray 2.60), and a Ctrl-C is exactly when
                # replies are in flight. The ray.shutdown of `close` stops these workers.
                self._abandoned = list(pending)
            else:
                self._cancel(list(pending))

    def _cancel(self, refs: list[Any]) -> None:
        for ref in refs:
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - best effort on the way out
                logging.getLogger(__name__).debug("could not cancel %s", ref, exc_info=True)

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_backend(
    name: str = "ray",
    *,
    address: str | None = None,
    workers: int | None = None,
    max_retries: int = 3,
    log_to_driver: bool = False,
    queue: bool = True,
) -> Backend:
    """A backend by name: ``"ray"`` or ``"serial"`` (which takes no address)."""
    if name == "serial":
        if address is not None:
            raise SpecError(f"--address {address!r} needs the Ray backend; drop --backend serial")
        return SerialBackend()
    if name == "ray":
        return RayBackend(address=address, workers=workers, max_retries=max_retries, log_to_driver=log_to_driver,
                          queue=queue)
    raise SpecError(f"backend {name!r}; expected 'ray' or 'serial'")
