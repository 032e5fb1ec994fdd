"""Legal starting points of an aspect-model search on one array shape.

Uniform draws from a map space are rarely legal for the aspect model (MAESTRO's
double-buffered capacities are stricter than the map space's check), so a search from them
alone may end with none. `legal_starts` draws legal points of the space the model's
directive form expresses (`aspect_space`: `aspect_constraints` under the user's
constraints), moves them into that form, repairs them against the model's own checks
(`model_repair`) and keeps the best few, encoded. `accelmap.search.api.search` starts from
them on the arch's own shape, `accelmap.search.shapes.search_shapes` on every shape it tries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelmap.costmodels.aspect import aspect_constraints, aspect_view
from accelmap.errors import InfeasibleSpaceError, SpecError
from accelmap.search._inputs import build_space

__all__ = ["aspect_space", "legal_starts", "model_repair"]


def _smallest_prime(n: np.ndarray) -> np.ndarray:
    """Elementwise smallest prime factor of n >= 2 (n itself when prime)."""
    out = n.copy()
    m = int(n.max(initial=1))
    for p in range(2, int(m ** 0.5) + 1):
        hit = (n % p == 0) & (out == n) & (n > p)
        out[hit] = p
    return out


def model_repair(problem: Any, arch: Any, batch: Any, rng: np.random.Generator, *, rounds: int = 40) -> Any:
    """Legal mappings pushed towards what the aspect model accepts: while a row fails the
    model's own capacity check (MAESTRO's double-buffered L1/L2 requirements, stricter
    than the map space's), a prime factor of a dim stepping inside the failing level moves
    out -- from a PE level to the array level's temporal loop, from the array level to
    DRAM -- so tiles only shrink; a row the model rejects outright (a strided window it
    miscounts) first gets its output rows and columns moved out of the PE. Filter dims stay where they are (`aspect_constraints`).
    Returns the batch after at most ``rounds`` moves per row."""
    from accelmap.costmodels.aspect import AspectModel, aspect_view
    from accelmap.mapper.check import Reason
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.workloads.structure import DimRole, recognize

    a = aspect_view(arch).array_level
    st = recognize(problem)
    movable = np.ones(problem.n_dims, dtype=bool)
    movable[list(st.dims_of(DimRole.FILTER_ROW) + st.dims_of(DimRole.FILTER_COL))] = False
    windows = [w.out_dim for w in st.windows]
    t = batch.temporal.copy()
    sp = batch.spatial.copy()
    model = AspectModel()
    n, L, D = t.shape
    for it in range(rounds):
        b = MappingBatch._trusted(temporal=t.copy(), spatial=sp.copy(), order=batch.order, keep=batch.keep)
        met = model.evaluate(problem, arch, b)
        # MAESTRO's strided sliding windows lose MACs (Reason.MODEL) when output rows or
        # columns step inside the PE: those factors move to the array level (then, if
        # that is not enough, the spatial ones too)
        off = np.flatnonzero(met.reason == int(Reason.MODEL))
        if len(off) and windows and it < 2:
            for d in windows:
                if it == 0:
                    t[off, a, d] *= t[off, a + 1:, d].prod(axis=1)
                    t[off, a + 1:, d] = 1
                else:
                    t[off, a, d] *= sp[off, a, d, 0] * sp[off, a, d, 1]
                    sp[off, a, d, :] = 1
            continue
        bad = np.flatnonzero((met.reason == int(Reason.CAPACITY)) & (met.reason_level >= 1))
        if not len(bad):
            break
        lv = met.reason_level[bad]
        # source levels: the failing level and everything inside it; destination: the array
        # level for a PE level, DRAM for the array level (or above)
        src = (np.arange(L)[None, :] >= lv[:, None])
        src &= np.where(lv[:, None] > a, np.arange(L)[None, :] > a, True)
        dst = np.where(lv > a, a, 0)
        cand = (t[bad] > 1) & src[:, :, None] & movable[None, None, :]
        cand &= np.arange(L)[None, :, None] != dst[:, None, None]
        has = cand.reshape(len(bad), -1).any(axis=1)
        if not has.any():
            break
        bad, cand, dst = bad[has], cand[has], dst[has]
        pick = np.argmax((rng.random(cand.shape) * cand).reshape(len(bad), -1), axis=1)
        pl, pd = np.divmod(pick, D)
        f = t[bad, pl, pd]
        pr = _smallest_prime(f)
        t[bad, pl, pd] = f // pr
        t[bad, dst, pd] *= pr
    return MappingBatch._trusted(temporal=t, spatial=sp, order=batch.order, keep=batch.keep)


def _rejections(met: Any, arch: Any) -> str:
    """Why the aspect model rejected every row of ``met``: a share per reason and level."""
    from accelmap.mapper.check import Reason

    n = len(met.reason)
    keys, counts = np.unique(np.stack([met.reason, met.reason_level], axis=1), axis=0, return_counts=True)
    parts = []
    for (r, lv), c in sorted(zip(keys.tolist(), counts.tolist(), strict=True), key=lambda kc: -kc[1]):
        what = ("exceed the model's (double-buffered) capacity of " + arch.level_names[lv]
                if r == int(Reason.CAPACITY) and lv >= 0 else Reason(r).name.lower())
        parts.append(f"{100 * c // n}% {what}")
    return f"the aspect model rejects all {n} legal mappings drawn (repaired): " + ", ".join(parts)


def aspect_space(problem: Any, arch: Any, constraints: Any, *, allow_padding: bool) -> Any:
    """The map space the aspect model's directive form expresses on ``arch``:
    `aspect_constraints` layered under ``constraints`` (a `Constraints` or None)."""
    cons = aspect_constraints(problem, arch)
    return build_space(problem, arch, cons if constraints is None else cons.override(constraints),
                       allow_padding=allow_padding)


def legal_starts(problem: Any, arch: Any, constraints: Any, *, allow_padding: bool, n_draw: int,
                 rng: np.random.Generator, objective: Any) -> tuple[Any, np.ndarray | None, int, str, float]:
    """Legal starting points of an aspect-model search on ``arch`` as it is (one array
    shape): the map space under `aspect_constraints` (layered under ``constraints``, a
    `Constraints` or None), ``n_draw`` of its legal points (`MapSpace.sample_valid`) moved into
    the directive form and repaired (`model_repair`), scored, and the best (up to 8) encoded.

    Returns ``(space, starts, evaluated, why, best)``: ``starts`` is None (and ``why`` says
    why) when the space has no legal point or the model rejects every draw; ``space`` is None
    when the space cannot be built; ``best`` is the objective of the first start."""
    from accelmap.costmodels.aspect import AspectModel, directive_form

    try:
        space = aspect_space(problem, arch, constraints, allow_padding=allow_padding)
        drawn = space.sample_valid(n_draw, rng, allow_fewer=True)
    except (InfeasibleSpaceError, SpecError) as exc:
        return None, None, 0, str(exc).splitlines()[0], float("inf")
    drawn = model_repair(problem, arch, directive_form(aspect_view(arch), drawn), rng)
    met = AspectModel().evaluate(problem, arch, drawn)
    score = objective.scalar(met.energy_pj, met.cycles.astype(float), met.valid)
    ok = np.flatnonzero(met.valid)
    if not len(ok):
        return space, None, len(drawn), _rejections(met, arch), float("inf")
    ok = ok[np.argsort(score[ok], kind="stable")][:8]
    try:
        starts = space.encode(drawn.take(ok))
    except SpecError as exc:  # moved off the space by the directive form (user constraints)
        return space, None, len(drawn), str(exc).splitlines()[0], float("inf")
    return space, starts, len(drawn), "", float(score[ok[0]])
