"""accelmap: a dataflow mapper and design-space search engine for spatial DNN accelerators.

Given one layer (a `Problem`) and one accelerator (an `Arch`), accelmap finds the mapping
(tiling, loop order, spatial unrolling, bypass) that minimises energy, latency or their
product. Imports here are cheap; heavy backends (Ray, Optuna) load on first use.
"""

from __future__ import annotations

from accelmap._version import __version__
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import (
    AccelmapError,
    InfeasibleSpaceError,
    SpaceTooLargeError,
    SpecError,
    UnknownPluginError,
)
from accelmap.mapper.mapping import Mapping, MappingBatch

# Binds `accelmap.search` to the callable search package: `accelmap.search(problem, arch)`
# runs a search and `accelmap.search.search_network` stays reachable.
from accelmap.search import SearchResult
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term


def dse(spec, **kwargs):  # type: ignore[no-untyped-def]
    """Hardware design-space search; see :func:`accelmap.parallel.dse.dse` (loaded on first use)."""
    from accelmap.parallel.dse import dse as _dse

    return _dse(spec, **kwargs)


__all__ = [
    "__version__",
    "AccelmapError",
    "SpecError",
    "UnknownPluginError",
    "InfeasibleSpaceError",
    "SpaceTooLargeError",
    "Problem",
    "Dim",
    "Tensor",
    "TensorRole",
    "Term",
    "Arch",
    "StorageLevel",
    "Compute",
    "Mapping",
    "MappingBatch",
    "search",
    "dse",
    "SearchResult",
]
