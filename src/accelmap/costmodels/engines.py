"""Choice of the engine that evaluates a batch: compiled kernels or the numpy reference.

``"cpu"`` (the default) runs the numba-compiled kernels of a model; ``"numpy"`` its numpy
batched path (the executable reference); ``"cuda"`` the same kernels' rules on an NVIDIA GPU
(numba-cuda, the ``cuda`` extra), one GPU thread a mapping of a host batch, for every model. The default can be changed for a whole process
with the environment variable ``ACCELMAP_KERNELS`` (``numpy`` or ``cpu``); an explicit
``engine=`` argument wins over it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from accelmap.errors import SpecError

__all__ = ["ENGINES", "ENV_VAR", "resolve_engine", "run_blocks", "thread_pool"]

ENGINES = ("cpu", "numpy", "cuda")
ENV_VAR = "ACCELMAP_KERNELS"


def resolve_engine(engine: str | None) -> str:
    """The engine to use: ``engine`` if given, else ``$ACCELMAP_KERNELS``, else ``"cpu"``."""
    where = "engine argument"
    if engine is None:
        engine = os.environ.get(ENV_VAR, "").strip().lower() or "cpu"
        where = f"environment variable {ENV_VAR}"
    if engine not in ENGINES:
        raise SpecError(f"{where}: unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    return engine


_POOL: list[ThreadPoolExecutor] = []
# A forked child (the exact searcher's workers) inherits the pool object but none of its
# threads, and the pool would count the parent's idle threads as its own and never start
# one: the child's first threaded batch would wait forever. The child starts its own pool.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.clear)


def thread_pool(threads: int) -> ThreadPoolExecutor:
    """One process-wide pool of at least ``threads`` threads for the CPU kernels' blocks."""
    if not _POOL or _POOL[0]._max_workers < threads:  # noqa: SLF001 (its size, to grow it)
        if _POOL:
            _POOL.pop().shutdown(wait=False)
        _POOL.append(ThreadPoolExecutor(max_workers=threads, thread_name_prefix="accelmap-kernels"))
    return _POOL[0]


def run_blocks(block: Callable[[int, int, int], None], n: int, n_blocks: int, threads: int) -> None:
    """``block(b, lo, hi)`` for ``n_blocks`` contiguous blocks ``[lo, hi)`` of ``range(n)``,
    spread over ``threads`` threads of `thread_pool` (the calling thread waits). The blocks
    call a serial kernel compiled with ``nogil=True`` on slices of the batch, so a model
    compiles one driver for any number of threads (a ``prange`` driver would compile the
    whole row code a second time)."""
    if n <= 0:
        return
    step = (n + n_blocks - 1) // n_blocks
    jobs = [thread_pool(threads).submit(block, b, lo, min(n, lo + step)) for b, lo in enumerate(range(0, n, step))]
    for job in jobs:
        job.result()
