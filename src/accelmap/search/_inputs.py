"""What a search does with its arguments before it searches: a problem or an arch given by
name or file loaded (`_problem`, `_arch`), constraints read from files or objects
(`load_constraints_any`), the map space built (`build_space`), and imperfect factorization
refused for a model that counts exact factorizations only (`refuse_padding`).

`accelmap.search.api` (where users import them from), `accelmap.search.gpu`,
`accelmap.search.shapes` and the aspect model's legal starts (`accelmap.search._aspect_starts`)
all take them from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelmap._registry import costmodels
from accelmap.errors import SpecError

__all__ = ["load_constraints_any", "build_space", "refuse_padding"]


def _problem(problem: Any) -> Any:
    if isinstance(problem, (str, Path)):
        from accelmap.workloads.io import load_problem

        return load_problem(problem)
    return problem


def _arch(arch: Any, energy: str | Path | None = None) -> Any:
    if isinstance(arch, (str, Path)):
        from accelmap.arch.io import load_arch

        return load_arch(arch, energy=energy)
    return arch


def load_constraints_any(spec: Any, arch: Any, problem: Any = None) -> Any:
    """Constraints from None, a `Constraints`, a file, or a list of files and `Constraints`.

    Files may be in accelmap or Timeloop format (told apart by content; Timeloop's arch and
    mapspace constraint files are read together); later accelmap files override earlier
    ones rule by rule, and `Constraints` objects are layered last, in order.
    """
    if spec is None:
        return None
    from accelmap.mapper.constraints import Constraints, load_constraint_files

    if isinstance(spec, Constraints):
        return spec
    items = [spec] if isinstance(spec, (str, Path)) else list(spec)
    paths = [Path(i) for i in items if not isinstance(i, Constraints)]
    for path in paths:
        if not path.exists():
            raise SpecError(f"constraints file {path} does not exist")
    out: Any = load_constraint_files(paths, problem=problem, arch=arch) if paths else None
    for c in items:
        if isinstance(c, Constraints):
            out = c if out is None else out.override(c)
    return out


def build_space(problem: Any, arch: Any, constraints: Any = None, *, allow_padding: bool = False) -> Any:
    """The `MapSpace` of a problem on an arch under constraints."""
    from accelmap.mapper.space import MapSpace

    return MapSpace(problem, arch, constraints, allow_padding=allow_padding)


def refuse_padding(cost: Any, model_name: str) -> None:
    """Raise `SpecError` when ``allow_padding`` is asked of a model that counts exact
    factorizations only (a model's ``imperfect_factorization`` attribute, True when absent):
    its padded points would all be illegal, and a search of them ends infeasible."""
    if getattr(cost, "imperfect_factorization", True):
        return
    takes = sorted(name for name in costmodels.names()
                   if getattr(costmodels.get(name), "imperfect_factorization", True))
    raise SpecError(f"imperfect factorization (allow_padding, CLI --padding) is not modelled by the {model_name} "
                    "model, which counts mappings whose factors multiply out to every bound exactly; drop it, "
                    f"or use a model that ceil-divides tiles ({', '.join(takes) or 'none registered'})")
