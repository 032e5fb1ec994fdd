"""Search: one ask/tell driver and the searchers it runs.

``accelmap.search`` is this package *and* a function: the module object is callable and
forwards to :func:`accelmap.search.api.search`, so both of these work::

    import accelmap
    result = accelmap.search("resnet50/conv3_1", "eyeriss-like", budget=5000)

    from accelmap.search import search, SearchResult
    result = search(problem, arch, searcher="genetic", objective="energy,cycles")

(``import accelmap.search`` binds the package; calling it is the same as calling
``accelmap.search.api.search``.) Searchers load lazily through the plugin registry
(``accelmap._registry.searchers``): ``random``, ``exhaustive``, ``optuna``, ``genetic``,
``anneal``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from accelmap.search.api import DEFAULT_BUDGET, DEFAULT_SEARCHER, NetworkResult, search, search_network
from accelmap.search.base import Cap, EncodedSpace, Searcher, SearchSpace
from accelmap.search.driver import Driver, DriverOptions
from accelmap.search.objectives import Objective, ObjectiveSpec, non_dominated, parse_objective
from accelmap.search.result import History, SearchResult

__all__ = [
    "search", "search_network", "SearchResult", "NetworkResult", "History",
    "Objective", "ObjectiveSpec", "parse_objective", "non_dominated",
    "Searcher", "SearchSpace", "EncodedSpace", "Cap", "Driver", "DriverOptions",
    "DEFAULT_SEARCHER", "DEFAULT_BUDGET",
]


class _CallableModule(types.ModuleType):
    """The module type of ``accelmap.search``: calling the module runs a search."""

    def __call__(self, *args: Any, **kwargs: Any) -> SearchResult:
        return search(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
