"""Choice of the engine that evaluates a batch: compiled kernels or the numpy reference.

``"cpu"`` (the default) runs the numba-compiled kernels of a model; ``"numpy"`` its numpy
batched path (the executable reference); ``"cuda"`` the same kernels on an NVIDIA GPU
(numba-cuda, the ``cuda`` extra; loopnest only). The default can be changed for a whole process
with the environment variable ``ACCELMAP_KERNELS`` (``numpy`` or ``cpu``); an explicit
``engine=`` argument wins over it.
"""

from __future__ import annotations

import os

from accelmap.errors import SpecError

__all__ = ["ENGINES", "ENV_VAR", "resolve_engine"]

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
