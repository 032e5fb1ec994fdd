"""`random`: uniform sampling of the map space, vectorized in batches of thousands.

The baseline every other searcher must beat, and the warm-up of the hybrids. Sampling is
uniform over mappings as `MapSpace.sample_encoded` defines it (each dimension's
factorization drawn uniformly, loop orders and bypass bits uniformly).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.errors import SpecError
from accelmap.search.base import Cap, SearcherBase, SearchSpace

__all__ = ["RandomSearcher"]


class RandomSearcher(SearcherBase):
    """Uniform random sampling.

    Parameters
    ----------
    space
        The encoded map space.
    batch
        Points per ask (default 4096).
    """

    name: ClassVar[str] = "random"
    capabilities: ClassVar[frozenset[Cap]] = frozenset({Cap.SEEDABLE, Cap.CHECKPOINT})
    default_budget: ClassVar[int] = 100_000

    def __init__(self, space: SearchSpace, *, n_objectives: int = 1,
                 seed: np.random.SeedSequence | int | None = None, budget_hint: int | None = None,
                 batch: int = 4096) -> None:
        super().__init__(space, n_objectives=n_objectives, seed=seed, budget_hint=budget_hint)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise SpecError(f"random searcher: batch = {batch!r}; expected an int >= 1")
        self.batch = batch

    @property
    def batch_size(self) -> int:
        return self.batch

    def ask(self, n: int) -> IntArray:
        return self.space.sample(int(n), self.rng)

    def tell(self, x: IntArray, objective: FloatArray, valid: BoolArray) -> None:
        """Random search learns nothing; the driver keeps the best."""
