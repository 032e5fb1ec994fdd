"""Cost models: the `CostModel` protocol, `Metrics`, and the built-in models.

* :class:`~accelmap.costmodels.loopnest.LoopNestModel` (``"loopnest"``): Timeloop-class
  hierarchical-memory model, exact against ``timeloop-model`` on the reference cases.

Models are also reachable by name through ``accelmap._registry.costmodels``.
"""

from __future__ import annotations

from accelmap.costmodels.base import CostModel, Metrics
from accelmap.costmodels.loopnest import LoopNestModel

__all__ = ["CostModel", "Metrics", "LoopNestModel"]
