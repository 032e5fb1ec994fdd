"""`exhaustive`: every mapping of a small space, in chunks.

Uses `MapSpace.enumerate`. Above ``max_size`` mappings it refuses with
`SpaceTooLargeError` before enumerating anything, with the size and what to do about it.
It is the ground truth of the search benchmarks where a space is tractable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import SpaceTooLargeError, SpecError
from accelmap.search.base import Cap, SearcherBase, SearchSpace

__all__ = ["ExhaustiveSearcher", "DEFAULT_MAX_SIZE"]

DEFAULT_MAX_SIZE = 20_000_000


class ExhaustiveSearcher(SearcherBase):
    """Enumerate the whole space.

    Parameters
    ----------
    space
        The encoded map space.
    max_size
        Refuse spaces with more mappings than this (default 2e7).
    chunk
        Points per ask (default 8192).
    """

    name: ClassVar[str] = "exhaustive"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.SEEDABLE, Cap.CHECKPOINT, Cap.FINITE})
    default_budget: ClassVar[int | None] = None  # the whole space

    def __init__(self, space: SearchSpace, *, n_objectives: int = 1,
                 seed: np.random.SeedSequence | int | None = None, budget_hint: int | None = None,
                 max_size: int = DEFAULT_MAX_SIZE, chunk: int = 8192) -> None:
        super().__init__(space, n_objectives=n_objectives, seed=seed, budget_hint=budget_hint)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise SpecError(f"exhaustive searcher: chunk = {chunk!r}; expected an int >= 1")
        self.chunk = chunk
        self.max_size = int(max_size)
        try:
            self.size = int(space.n_enumerable(self.max_size))
        except SpaceTooLargeError as exc:
            raise SpaceTooLargeError(
                f"exhaustive search refused: {exc}. The exhaustive limit is {self.max_size:,} mappings; "
                "use a sampling searcher (anneal, genetic, optuna, random), add constraints that fix "
                "loop orders or factors, or raise the limit (searcher_options={'max_size': N}, "
                "CLI --searcher-option max_size=N)"
            ) from exc
        self.consumed = 0  # points handed out so far (the resume position)
        self._iter: Iterator[IntArray] | None = None
        self._pending: IntArray | None = None

    @property
    def batch_size(self) -> int:
        return self.chunk

    def _next_rows(self, n: int) -> IntArray:
        parts = []
        have = 0
        while have < n:
            if self._pending is None or len(self._pending) == 0:
                if self._iter is None:
                    self._iter = self.space.enumerate(self.chunk, self.max_size)
                nxt = next(self._iter, None)
                if nxt is None:
                    break
                self._pending = np.asarray(nxt, dtype=np.int64)
            take = self._pending[: n - have]
            self._pending = self._pending[n - have:]
            parts.append(take)
            have += len(take)
        if not parts:
            return np.zeros((0, self.space.n_params), dtype=np.int64)
        return np.concatenate(parts)

    def ask(self, n: int) -> IntArray:
        x = self._next_rows(int(n))
        self.consumed += len(x)
        if len(x) < n:
            self._done = True
        return x

    def tell(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        """Nothing to learn; the driver keeps the best."""

    def state_dict(self) -> dict[str, Any]:
        # the enumeration iterator is not picklable: store the position and replay to it
        return {"consumed": self.consumed, "done": self._done}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._iter = None
        self._pending = None
        skip = int(state["consumed"])
        while skip > 0:
            got = len(self._next_rows(min(skip, 1 << 16)))
            if got == 0:
                break
            skip -= got
        self.consumed = int(state["consumed"])
        self._done = bool(state["done"])
