"""Array shape as a search variable (the aspect model's PE-array aspect ratio).

`search_shapes` co-optimizes the shape of the PE array and the mapping: for every shape
``(x, y)`` with ``x * y`` PEs (x PEs per cluster, y clusters; `accelmap.costmodels.aspect.
shapes`) it searches mappings on the arch with that array (`arch_with_shape`), then returns every
shape's best and the best overall. The seeds are spawned from one `SeedSequence`, so a run
is reproducible.

The budget goes to shapes by promise, not evenly (successive halving, Jamieson and
Talwalkar, AISTATS 2016; Karnin et al., ICML 2013):

1. *Legal draws.* Every shape gets a few legal mappings first (`legal_starts`, from
   `accelmap.search._aspect_starts`): `MapSpace.sample_valid` (rejection, switching to repair
   when legal points are rare) moved into the directive form the model reads
   (`directive_form`: one dim per array axis, spatial factors on the array level only),
   repaired against the model's own checks (`model_repair`), and scored. A shape whose space
   has no legal point is reported with the reason; every other shape has a legal mapping
   however small the budget.
2. *Halving.* The rest of the budget is cut into ``ceil(log2(shapes)) + 1`` rounds; in each
   round every surviving shape runs the searcher (from its best mappings so far) on an
   equal share of the round, then the worse half of the shapes drop out. The last shape
   standing gets the last round whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.costmodels.aspect import arch_with_shape, aspect_view, shapes
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.search._aspect_starts import legal_starts, model_repair
from accelmap.search._inputs import _arch, _problem, load_constraints_any, refuse_padding
from accelmap.search.api import search
from accelmap.search.result import SearchResult

__all__ = ["ShapeResult", "ShapeSearchResult", "search_shapes", "search_shapes_network",
           "model_repair"]  # (model_repair: defined in _aspect_starts, importable from here as before)


@dataclass(frozen=True, slots=True)
class ShapeResult:
    """One shape's search: ``result`` is None when no legal mapping was found."""

    x: int
    y: int
    result: SearchResult | None
    why: str = ""
    evaluations: int = 0  # spent on this shape in all (legal draws and every round)

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
        rows = [f"{'shape (x PEs/cluster x y clusters)':<36}{'best objective':>18}{'cycles':>16}{'evaluations':>13}"]
        for s in self.per_shape:
            if s.result is None or s.result.best is None:
                rows.append(f"{f'{s.x} x {s.y}':<36}{'-':>18}{'-':>16}{s.evaluations:>13,}  {s.why}")
            else:
                cyc = (s.result.best_metrics or {}).get("cycles", float("nan"))
                rows.append(f"{f'{s.x} x {s.y}':<36}{s.objective:>18.4g}{cyc:>16,.0f}{s.evaluations:>13,}")
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
        Evaluations in all: a few legal draws per shape, the rest by successive halving
        (see the module docstring).
    constraints
        Extra constraints, layered over `aspect_constraints` (filters whole in a cluster).
    search_kwargs
        Passed to `search` (searcher, objective, ...); the model is ``aspect``. A
        ``time_limit_s`` is shared out over the runs (about twice as many as the shapes
        with legal mappings).
    """
    from accelmap.costmodels.aspect import AspectModel
    from accelmap.search.objectives import parse_objective

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
    objective = parse_objective(search_kwargs.get("objective", "edp"))
    allow_padding = bool(search_kwargs.get("allow_padding", False))
    if allow_padding:
        refuse_padding(AspectModel(), "aspect")
    kw = {k: v for k, v in search_kwargs.items() if k not in ("allow_padding", "constraints", "warm_start")}
    seeds = np.random.SeedSequence(seed).generate_state(len(cands) + 1)
    rng = np.random.default_rng(int(seeds[-1]))
    n_draw = max(4, min(256, budget // (4 * len(cands))))
    spaces: dict[int, Any] = {}
    starts: dict[int, np.ndarray] = {}
    best: dict[int, SearchResult] = {}
    first: dict[int, float] = {}
    reasons: dict[int, str] = {}
    spent = 0
    used = [0] * len(cands)
    for i, (x, y) in enumerate(cands):  # 1. legal draws, scored
        shaped = arch_with_shape(arc, x, y)
        user = load_constraints_any(constraints, shaped, prob) if constraints is not None else None
        space, start, n_scored, why, first_score = legal_starts(prob, shaped, user, allow_padding=allow_padding, n_draw=n_draw,
                                                  rng=rng, objective=objective)
        spent += n_scored
        used[i] += n_scored
        if start is None:
            reasons[i] = why
            continue
        starts[i] = start
        spaces[i] = space
        first[i] = first_score
    alive = sorted(spaces, key=lambda i: first[i])
    if kw.get("time_limit_s") is not None and alive:  # halving runs about 2 x len(alive) searches
        kw["time_limit_s"] = float(kw["time_limit_s"]) / (2 * len(alive))
    left = max(budget - spent, 0)
    rounds = int(np.ceil(np.log2(max(len(alive), 1)))) + 1
    for r in range(rounds):  # 2. successive halving
        if not alive:
            break
        share = left // (rounds - r)
        per = share // len(alive)
        for i in alive:
            x, y = cands[i]
            n = max(per, len(starts[i]))
            try:
                res = search(prob, arch_with_shape(arc, x, y), model="aspect", budget=n,
                             seed=int(np.random.SeedSequence([int(seeds[i]), r]).generate_state(1)[0]),
                             space=spaces[i], initial=starts[i], **kw)
            except InfeasibleSpaceError as exc:
                reasons.setdefault(i, str(exc).splitlines()[0])
                left -= n
                used[i] += n
                continue
            left -= res.n_evaluations
            used[i] += res.n_evaluations
            if res.best is not None and (i not in best or res.best_objective < best[i].best_objective):
                best[i] = res
                starts[i] = np.concatenate([spaces[i].encode(res.best.as_batch()), starts[i]])[:8]
        ranked = sorted(alive, key=lambda i: best[i].best_objective if i in best else float("inf"))
        alive = ranked[:max(1, (len(ranked) + 1) // 2)] if r < rounds - 2 else ranked[:1]
    out = [ShapeResult(x, y, best.get(i), "" if i in best else reasons.get(i, "no legal mapping found"), used[i])
           for i, (x, y) in enumerate(cands)]
    return ShapeSearchResult(tuple(out))


def search_shapes_network(network_or_layers: Any, arch: Any, **kwargs: Any) -> list[tuple[str, int, ShapeSearchResult]]:
    """`search_shapes` for every distinct layer of a network: (layer name, occurrences,
    result) per layer, so a reconfigurable array's best shape per layer can be read off.
    ``kwargs`` go to `search_shapes` (``budget`` is per layer)."""
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
