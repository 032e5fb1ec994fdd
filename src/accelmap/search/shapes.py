"""Array shape as a search variable (the aspect model's PE-array aspect ratio).

`search_shapes` co-optimizes the shape of the PE array and the mapping: for every shape
``(x, y)`` with ``x * y`` PEs (x PEs per cluster, y clusters; `accelmap.costmodels.aspect.
shapes`) it runs the mapping search on the arch with that array (`arch_with_shape`), then
returns every shape's best and the best overall. The budget is split evenly over shapes;
the seeds are spawned from one `SeedSequence`, so a run is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.costmodels.aspect import arch_with_shape, aspect_constraints, aspect_view, shapes
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.search.result import SearchResult

__all__ = ["ShapeResult", "ShapeSearchResult", "search_shapes", "search_shapes_network"]


@dataclass(frozen=True, slots=True)
class ShapeResult:
    """One shape's search: ``result`` is None when no legal mapping was found."""

    x: int
    y: int
    result: SearchResult | None
    why: str = ""

    @property
    def objective(self) -> float:
        return float("inf") if self.result is None or self.result.best is None else float(self.result.best_objective)


@dataclass(frozen=True, slots=True)
class ShapeSearchResult:
    """Every shape tried and the best one (lowest objective)."""

    per_shape: tuple[ShapeResult, ...]

    @property
    def best(self) -> ShapeResult:
        return min(self.per_shape, key=lambda s: s.objective)

    def table(self) -> str:
        rows = [f"{'shape (x PEs/cluster x y clusters)':<36}{'best objective':>18}{'cycles':>16}"]
        for s in self.per_shape:
            if s.result is None or s.result.best is None:
                rows.append(f"{f'{s.x} x {s.y}':<36}{'-':>18}{'-':>16}  {s.why}")
            else:
                cyc = (s.result.best_metrics or {}).get("cycles", float("nan"))
                rows.append(f"{f'{s.x} x {s.y}':<36}{s.objective:>18.4g}{cyc:>16,.0f}")
        b = self.best
        if b.result is None or b.result.best is None:
            rows.append("no legal mapping for any shape")
        else:
            rows.append(f"best shape: {b.x} x {b.y}")
        return "\n".join(rows)


def search_shapes(problem: Any, arch: Any, *, n_pes: int | None = None,
                  candidates: list[tuple[int, int]] | None = None, budget: int = 30_000,
                  seed: int = 0, constraints: Any = None, **search_kwargs: Any) -> ShapeSearchResult:
    """Co-optimize the PE-array shape and the mapping with the aspect model.

    Parameters
    ----------
    problem, arch
        As for `accelmap.search.api.search` (objects, zoo/preset names or files).
    n_pes
        PEs of the array (default: the arch's array size); every ``(x, y)`` with
        ``x * y == n_pes`` is tried unless ``candidates`` lists the shapes.
    budget
        Evaluations in all, split evenly over the shapes.
    constraints
        Extra constraints, layered over `aspect_constraints` (filters whole in the PE).
    search_kwargs
        Passed to `search` (searcher, objective, time_limit_s, ...); the model is ``aspect``.
    """
    from accelmap.costmodels.aspect import AspectModel
    from accelmap.search.api import _arch, _problem, load_constraints_any, search

    prob = _problem(problem)
    arc = _arch(arch)
    why = AspectModel.unsupported(prob, arc)
    if why is not None:
        raise SpecError(why)
    view = aspect_view(arc)
    total = n_pes if n_pes is not None else view.x * view.y
    cands = candidates if candidates is not None else shapes(total)
    if not cands:
        raise SpecError(f"no array shapes to try for {total} PEs")
    per = max(1, budget // len(cands))
    seeds = np.random.SeedSequence(seed).generate_state(len(cands))
    out = []
    for (x, y), s in zip(cands, seeds, strict=True):
        shaped = arch_with_shape(arc, x, y)
        cons = aspect_constraints(prob, shaped)
        if constraints is not None:
            cons = cons.override(load_constraints_any(constraints, shaped, prob))
        try:
            res = search(prob, shaped, model="aspect", budget=per, seed=int(s), constraints=cons, **search_kwargs)
            out.append(ShapeResult(x, y, res))
        except InfeasibleSpaceError as exc:
            out.append(ShapeResult(x, y, None, str(exc).splitlines()[0]))
    return ShapeSearchResult(tuple(out))


def search_shapes_network(network_or_layers: Any, arch: Any, **kwargs: Any) -> list[tuple[str, int, ShapeSearchResult]]:
    """`search_shapes` for every distinct layer of a network: (layer name, occurrences,
    result) per layer, so a reconfigurable array's best shape per layer can be read off.
    ``kwargs`` go to `search_shapes` (``budget`` is per layer)."""
    from accelmap.search.api import _arch

    if isinstance(network_or_layers, str):
        from accelmap.workloads.zoo import network

        layers = list(network(network_or_layers).layers)
    else:
        layers = list(getattr(network_or_layers, "layers", network_or_layers))
    arc = _arch(arch)
    seen: dict[tuple[Any, ...], int] = {}
    order: list[Any] = []
    for p in layers:
        key = (p.dims, p.tensors)
        if key in seen:
            seen[key] += p.repeat
        else:
            seen[key] = p.repeat
            order.append(p)
    return [(p.name, seen[(p.dims, p.tensors)], search_shapes(p, arc, **kwargs)) for p in order]
