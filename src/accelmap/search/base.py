"""The `Searcher` protocol and the encoded space searchers see.

A searcher is only its algorithm. It sees the map space as a box of integer vectors
(`SearchSpace`: ``bounds``, ``param_kinds`` and a few vectorized operators) and one
objective array per batch, never cost models or specs. The driver
(:mod:`accelmap.search.driver`) owns the rest: budget, time, early stop, progress, history,
checkpoints and seeds.

Protocol (batched ask/tell, optuna's and nevergrad's shape)::

    searcher = SearcherClass(space, n_objectives=1, seed=np.random.SeedSequence(0),
                             budget_hint=100_000, **options)
    x = searcher.ask(n)            # (m, n_params) ints in [0, bounds), 0 <= m <= n
    searcher.tell(x, objective, valid)
    searcher.done                  # True once the searcher has nothing left to propose

``objective`` has shape (m,) or, for a searcher with `Cap.MULTI_OBJECTIVE` on a Pareto
objective, (m, n_objectives); lower is better and invalid rows hold ``inf``. A searcher
without `Cap.MULTI_OBJECTIVE` always receives the scalar objective (the product of the
Pareto columns).
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import SpaceTooLargeError
from accelmap.mapper.mapping import MappingBatch

__all__ = ["Cap", "SearchSpace", "EncodedSpace", "Searcher", "SearcherBase", "PARAM_KINDS"]

PARAM_KINDS = ("tile", "spatial", "order", "keep")


class Cap(str, Enum):
    """Searcher capabilities, declared as data (``capabilities = frozenset({...})``)."""

    MULTI_OBJECTIVE = "multi_objective"  # tell() takes (n, m) objectives; keeps a front itself
    SEEDABLE = "seedable"  # same seed -> same proposals
    CHECKPOINT = "checkpoint"  # state_dict()/load_state_dict() resume to the same result
    FINITE = "finite"  # may run out of proposals (done = True) before the budget
    SOLVER = "solver"  # owns its loop over the space and the cost model (`run`), no ask/tell


@runtime_checkable
class SearchSpace(Protocol):
    """The encoded map space as a searcher sees it.

    Every vector ``x`` with ``0 <= x[i] < bounds[i]`` is a valid encoding (it decodes to a
    mapping whose factors multiply out); capacity and fanout limits may still make it
    illegal, which the objective reports as ``inf``.
    """

    n_params: int
    bounds: IntArray  # (n_params,) exclusive upper bounds
    param_names: tuple[str, ...]
    param_kinds: tuple[str, ...]  # each one of PARAM_KINDS

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        """(n, n_params) points drawn uniformly over the mappings."""
        ...

    def neighbours(self, x: IntArray, rng: np.random.Generator, *, flips: bool = True) -> IntArray:
        """(n, n_params) one random small move per row (move a prime factor between levels,
        swap two loops, change a spatial dimension or a bypass bit; with ``flips`` False,
        never a bypass bit)."""
        ...

    def repair(self, x: IntArray) -> IntArray:
        """(n, n_params) the nearest legal points (fit capacities and fanouts where possible)."""
        ...

    def cross_levels(self, xa: IntArray, xb: IntArray, take_b: BoolArray) -> IntArray:
        """(n, n_params) children taking whole levels from ``xb`` where ``take_b`` (n, n_levels)
        is True and from ``xa`` elsewhere, then repaired so that factors multiply out."""
        ...

    @property
    def n_levels(self) -> int: ...

    def size_total(self) -> int:
        """Number of points in the box (a Python int; may be huge)."""
        ...

    def n_enumerable(self, limit: int) -> int:
        """Points `enumerate` yields; raises SpaceTooLargeError above ``limit``."""
        ...

    def enumerate(self, chunk_size: int, max_points: int | None = None) -> Iterator[IntArray]:
        """Every (cost-distinct) point of the space in chunks; SpaceTooLargeError when too large."""
        ...


class EncodedSpace:
    """`SearchSpace` over a `accelmap.mapper.space.MapSpace` (encode/decode around its ops).

    Parameters
    ----------
    mapspace
        A MapSpace (or anything with its methods: ``bounds``, ``param_names``,
        ``param_kinds``, ``sample_encoded``, ``encode``, ``decode``, ``neighbours``,
        ``repair``, ``enumerate``, ``size``).
    """

    def __init__(self, mapspace: Any) -> None:
        self.mapspace = mapspace
        self.bounds = np.asarray(mapspace.bounds, dtype=np.int64).copy()
        self.bounds.setflags(write=False)
        self.n_params = int(self.bounds.shape[0])
        self.param_names = tuple(mapspace.param_names)
        self.param_kinds = tuple(str(k) for k in mapspace.param_kinds)

    @property
    def n_levels(self) -> int:
        arch = getattr(self.mapspace, "arch", None)
        if arch is not None:
            return int(arch.n_levels)
        return int(self.mapspace.decode(np.zeros((1, self.n_params), dtype=np.int64)).n_levels)

    def decode(self, x: IntArray) -> MappingBatch:
        return self.mapspace.decode(np.asarray(x, dtype=np.int64))

    def encode(self, batch: MappingBatch) -> IntArray:
        return np.asarray(self.mapspace.encode(batch), dtype=np.int64)

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        return np.asarray(self.mapspace.sample_encoded(n, rng), dtype=np.int64)

    def neighbours(self, x: IntArray, rng: np.random.Generator, *, flips: bool = True) -> IntArray:
        if len(x) == 0:
            return np.asarray(x, dtype=np.int64)
        fast = getattr(self.mapspace, "neighbours_encoded", None)
        if fast is not None:  # the same moves without building mappings (~4x faster)
            return np.asarray(fast(np.asarray(x, dtype=np.int64), rng, flips=flips), dtype=np.int64)
        return self.encode(self.mapspace.neighbours(self.decode(x), rng, flips=flips))

    def repair(self, x: IntArray) -> IntArray:
        if len(x) == 0:
            return np.asarray(x, dtype=np.int64)
        return self.encode(self.mapspace.repair(self.decode(x)))

    def legalize(self, x: IntArray, rng: np.random.Generator) -> IntArray:
        """Points pushed towards legality (fanout, capacity, utilization) with their keep
        bits and loop orders held; unchanged where the map space has no such repair."""
        fix = getattr(self.mapspace, "legalize_encoded", None)
        x = np.asarray(x, dtype=np.int64)
        return x if fix is None or len(x) == 0 else np.asarray(fix(x, rng), dtype=np.int64)

    def cross_levels(self, xa: IntArray, xb: IntArray, take_b: BoolArray) -> IntArray:
        if len(xa) == 0:
            return np.asarray(xa, dtype=np.int64)
        a, b = self.decode(xa), self.decode(xb)
        t = np.asarray(take_b, dtype=bool)
        child = MappingBatch._trusted(
            temporal=np.where(t[:, :, None], b.temporal, a.temporal),
            spatial=np.where(t[:, :, None, None], b.spatial, a.spatial),
            order=np.where(t[:, :, None], b.order, a.order),
            keep=np.where(t[:, :, None], b.keep, a.keep),
        )
        return self.encode(self.mapspace.repair(child))

    def size_total(self) -> int:
        return int(self.mapspace.size().total)

    def n_enumerable(self, limit: int) -> int:
        """Points :meth:`enumerate` would yield (cost-distinct ones where the MapSpace
        dedups); raises `SpaceTooLargeError` above ``limit``."""
        fn = getattr(self.mapspace, "n_distinct", None)
        n = int(fn(max_points=limit)) if fn is not None else self.size_total()
        if n > limit:
            raise SpaceTooLargeError(f"the map space has {n:,} points, more than the limit {limit:,}")
        return n

    def enumerate(self, chunk_size: int, max_points: int | None = None) -> Iterator[IntArray]:
        it = (self.mapspace.enumerate(chunk_size) if max_points is None
              else self.mapspace.enumerate(chunk_size, max_points=max_points))
        for batch in it:
            yield self.encode(batch)


@runtime_checkable
class Searcher(Protocol):
    """A batched ask/tell search algorithm (entry-point group ``accelmap.searchers``)."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[Cap]]

    def ask(self, n: int) -> IntArray:
        """Up to ``n`` points to evaluate next, (m, n_params) with m <= n."""
        ...

    def tell(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        """Scores of the points of the last ``ask`` (same rows, same order)."""
        ...

    @property
    def done(self) -> bool:
        """True when the searcher has nothing more to propose."""
        ...

    @property
    def batch_size(self) -> int:
        """How many points the searcher likes to be asked for at once."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Picklable state for a checkpoint (with its random generator state)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output into a freshly built searcher."""
        ...


class SearcherBase:
    """Shared plumbing for the built-in searchers (not part of the protocol).

    Subclasses set ``name``, ``capabilities`` and ``default_batch``; they get ``space``,
    ``rng`` (a Generator from the driver's SeedSequence), ``n_objectives`` and
    ``budget_hint`` (evaluations the driver expects to spend, None when only a time
    limit applies), and a default state_dict that pickles every attribute but the space.
    """

    name: ClassVar[str] = "base"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.SEEDABLE, Cap.CHECKPOINT})
    default_batch: ClassVar[int] = 4096

    def __init__(self, space: SearchSpace, *, n_objectives: int = 1,
                 seed: np.random.SeedSequence | int | None = None,
                 budget_hint: int | None = None) -> None:
        if n_objectives > 1 and Cap.MULTI_OBJECTIVE not in self.capabilities:
            raise ValueError(f"searcher {self.name!r} takes one objective; the driver must scalarize")
        self.space = space
        self.n_objectives = int(n_objectives)
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        self.seed_seq = ss
        self.rng = np.random.default_rng(ss)
        self.budget_hint = budget_hint
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def batch_size(self) -> int:
        return self.default_batch

    def seed_points(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        """Scored points found elsewhere (a warm start) that the searcher may build on.

        Optional in the protocol; the driver calls it once, before the first ``ask``, when
        it has such points. The default ignores them (the driver still counts them).
        """

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "space"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # helpers -------------------------------------------------------------------------
    def kind_mask(self, *kinds: str) -> BoolArray:
        """(n_params,) True where the parameter's kind is one of ``kinds``."""
        return np.array([k in kinds for k in self.space.param_kinds], dtype=bool)

    def _redraw(self, x: IntArray, rows: BoolArray, cols: BoolArray) -> IntArray:
        """Redraw one random parameter among ``cols`` in each selected row (in place copy)."""
        out = np.array(x, dtype=np.int64, copy=True)
        choices = np.flatnonzero(cols & (np.asarray(self.space.bounds) > 1))
        sel = np.flatnonzero(rows)
        if choices.size == 0 or sel.size == 0:
            return out
        c = choices[self.rng.integers(0, choices.size, size=sel.size)]
        b = np.asarray(self.space.bounds)[c]
        # a new value different from the old one: shift by 1..b-1 modulo b
        out[sel, c] = (out[sel, c] + self.rng.integers(1, b)) % b
        return out
