"""Many searches at once: portfolios and sweeps on Ray (or serially), a SQLite results store.

Tasks are coarse (one search each) and carry frozen specs, plugin names and seeds spawned
from one `numpy.random.SeedSequence`. Ray is imported only when the Ray backend starts.
"""

from __future__ import annotations

from accelmap.parallel.backend import RayBackend, SerialBackend, make_backend
from accelmap.parallel.network import search_network_exact
from accelmap.parallel.portfolio import PortfolioResult, run_portfolio
from accelmap.parallel.store import DEFAULT_STORE, ResultStore
from accelmap.parallel.sweep import (
    SearchTask,
    Sweep,
    SweepSummary,
    load_sweep,
    parse_sweep,
    run_sweep,
    run_tasks,
    task_key,
)

__all__ = [
    "DEFAULT_STORE",
    "ResultStore",
    "RayBackend",
    "SerialBackend",
    "make_backend",
    "PortfolioResult",
    "run_portfolio",
    "search_network_exact",
    "SearchTask",
    "Sweep",
    "SweepSummary",
    "load_sweep",
    "parse_sweep",
    "run_sweep",
    "run_tasks",
    "task_key",
]
