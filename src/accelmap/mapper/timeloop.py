"""Read and write Timeloop mapping YAML (``mapping: [ {target, type, ...}, ... ]``).

Each entry names a storage level (``target``) and a ``type``:

* ``temporal``: ``factors`` (``"C=3 M=1 ..."`` or ``"C3 M1 ..."``; unlisted dims are 1) and
  ``permutation``, a string of dim names **innermost first** (accelmap's ``order`` is
  outermost first, so it is reversed; dims the string leaves out go outermost);
* ``spatial``: the unrolling below the level; ``permutation`` + ``split``: the dims at
  positions ``< split`` of the permutation go along X, the rest along Y. Without ``split``
  every dim goes along X, unless the level fans out only along Y;
* ``bypass`` or ``datatype``: ``keep`` / ``bypass`` lists of data-space names.

A level without a ``bypass``/``datatype`` entry keeps every tensor (Timeloop's default when
the mapping is evaluated as given).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.errors import SpecError
from accelmap.mapper.mapping import Mapping, refuse_huge_factors
from accelmap.workloads.problem import Problem

__all__ = ["mapping_from_timeloop", "mapping_to_timeloop"]

_FACTOR = re.compile(r"([A-Za-z_][A-Za-z_0-9]*?)\s*=?\s*(\d+)")


def _parse_factors(source: str, where: str, text: Any, problem: Problem) -> dict[int, int]:
    if isinstance(text, dict):
        items = [(str(k), v) for k, v in text.items()]
    elif isinstance(text, str):
        items = []
        for tok in text.split():
            m = _FACTOR.fullmatch(tok)
            if m is None:
                raise SpecError(f"{source}: {where}.factors: cannot read {tok!r}; expected DIM=N or DIMN")
            items.append((m[1], int(m[2])))
    else:
        raise SpecError(f"{source}: {where}.factors = {text!r}; expected a string like 'C=3 M=16'")
    out: dict[int, int] = {}
    for name, v in items:
        if name not in problem.dim_names:
            raise SpecError(f"{source}: {where}.factors: unknown dimension {name!r}; known: {list(problem.dim_names)}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise SpecError(f"{source}: {where}.factors: {name} = {v!r}; expected an integer >= 1")
        # Timeloop's 0 means "the rest" in constraints; a mapping to evaluate is fully given.
        if v == 0:
            raise SpecError(f"{source}: {where}.factors: {name}=0 (a constraint wildcard); a mapping needs explicit factors")
        out[problem.dim_index(name)] = v
    return out


def _parse_perm(source: str, where: str, text: Any, problem: Problem) -> list[int]:
    if text is None:
        return []
    if isinstance(text, list):
        names = [str(x) for x in text]
    elif isinstance(text, str):
        s = text.replace(" ", "")
        names = []
        i = 0
        dims = sorted(problem.dim_names, key=len, reverse=True)
        while i < len(s):
            for d in dims:
                if s.startswith(d, i):
                    names.append(d)
                    i += len(d)
                    break
            else:
                raise SpecError(f"{source}: {where}.permutation = {text!r}: unknown dimension at {s[i:]!r}; "
                                f"known: {list(problem.dim_names)}")
    else:
        raise SpecError(f"{source}: {where}.permutation = {text!r}; expected a string of dimension names")
    idx = [problem.dim_index(n) for n in names]
    if len(set(idx)) != len(idx):
        raise SpecError(f"{source}: {where}.permutation = {text!r} repeats a dimension")
    return idx


def mapping_from_timeloop(data: dict, problem: Problem, arch: Arch, source: str) -> Mapping:
    """Build a `Mapping` from a parsed Timeloop ``map.yaml``.

    Raises
    ------
    SpecError
        Unknown target level, dimension or data-space; a malformed entry (file and index).
    """
    entries = data.get("mapping") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise SpecError(f"{source}: expected a top-level `mapping:` list (Timeloop mapping file)")
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    # Exact Python ints until every factor is read (`refuse_huge_factors`, then int64 arrays).
    temporal = [[1] * D for _ in range(L)]
    spatial = [[[1, 1] for _ in range(D)] for _ in range(L)]
    order = np.tile(np.arange(D, dtype=np.int64), (L, 1))
    keep = np.ones((L, T), dtype=bool)
    seen: set[tuple[int, str]] = set()
    for i, e in enumerate(entries):
        where = f"mapping[{i}]"
        if not isinstance(e, dict) or "target" not in e or "type" not in e:
            raise SpecError(f"{source}: {where}: expected {{target, type, ...}}")
        target = str(e["target"])
        if target not in arch.level_names:
            raise SpecError(f"{source}: {where}.target = {target!r}; levels of arch {arch.name}: {list(arch.level_names)}")
        lv = arch.level_index(target)
        kind = str(e["type"])
        if (lv, kind) in seen:
            raise SpecError(f"{source}: {where}: a second {kind!r} entry for {target}")
        seen.add((lv, kind))
        if kind == "temporal":
            for d, v in _parse_factors(source, where, e.get("factors", ""), problem).items():
                temporal[lv][d] = v
            perm = _parse_perm(source, where, e.get("permutation"), problem)
            rest = [d for d in range(D) if d not in perm]
            order[lv] = np.array(rest + perm[::-1], dtype=np.int64)  # innermost-first -> outermost-first
        elif kind == "spatial":
            factors = _parse_factors(source, where, e.get("factors", ""), problem)
            perm = _parse_perm(source, where, e.get("permutation"), problem)
            perm = perm + [d for d in range(D) if d not in perm]
            level = arch.levels[lv]
            default_split = 0 if (level.fanout_x == 1 and level.fanout_y > 1) else D
            split = e.get("split", default_split)
            if isinstance(split, bool) or not isinstance(split, int) or split < 0:
                raise SpecError(f"{source}: {where}.split = {split!r}; expected an integer >= 0")
            for pos, d in enumerate(perm):
                spatial[lv][d][0 if pos < split else 1] = factors.get(d, 1)
        elif kind in ("bypass", "datatype"):
            for key, value in (("keep", True), ("bypass", False)):
                names = e.get(key) or []
                if not isinstance(names, list):
                    raise SpecError(f"{source}: {where}.{key} = {names!r}; expected a list of data-space names")
                for n in names:
                    if str(n) not in problem.tensor_names:
                        raise SpecError(f"{source}: {where}.{key}: unknown data-space {n!r}; known: {list(problem.tensor_names)}")
                    keep[lv, problem.tensor_index(str(n))] = value
        else:
            raise SpecError(f"{source}: {where}.type = {kind!r}; expected temporal, spatial, bypass or datatype")
    refuse_huge_factors(problem.dim_names, temporal, spatial, arch.level_names, f"{source}: mapping")
    return Mapping(temporal=np.array(temporal, dtype=np.int64), spatial=np.array(spatial, dtype=np.int64),
                   order=order, keep=keep)


def mapping_to_timeloop(mapping: Mapping, problem: Problem, arch: Arch) -> dict[str, Any]:
    """A Timeloop ``map.yaml`` (as a dict) for ``mapping``; inverse of `mapping_from_timeloop`."""
    names = problem.dim_names
    out: list[dict[str, Any]] = []
    for lv, level in enumerate(arch.levels):
        out.append({
            "target": level.name, "type": "temporal",
            "factors": " ".join(f"{names[d]}={int(mapping.temporal[lv, d])}" for d in range(problem.n_dims)),
            "permutation": "".join(names[d] for d in mapping.order[lv][::-1]),
        })
        sx, sy = mapping.spatial[lv, :, 0], mapping.spatial[lv, :, 1]
        if (sx > 1).any() or (sy > 1).any():
            both = [d for d in range(problem.n_dims) if sx[d] > 1 and sy[d] > 1]
            if both:
                raise SpecError(
                    f"level {level.name}: dims {[names[d] for d in both]} are unrolled along both X and Y; "
                    "Timeloop's mapping format gives each dim one spatial axis"
                )
            xs = [d for d in range(problem.n_dims) if sx[d] > 1]
            ys = [d for d in range(problem.n_dims) if d not in xs]
            out.append({
                "target": level.name, "type": "spatial",
                "factors": " ".join(f"{names[d]}={int(max(sx[d], sy[d]))}" for d in range(problem.n_dims)),
                "permutation": "".join(names[d] for d in xs + ys),
                "split": len(xs),
            })
        out.append({
            "target": level.name, "type": "bypass",
            "keep": [t.name for ti, t in enumerate(problem.tensors) if mapping.keep[lv, ti]],
            "bypass": [t.name for ti, t in enumerate(problem.tensors) if not mapping.keep[lv, ti]],
        })
    return {"mapping": out}
