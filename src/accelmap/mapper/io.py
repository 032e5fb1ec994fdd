"""The accelmap mapping file format (YAML or JSON), strict.

.. code-block:: yaml

    version: 1
    mapping:
      levels:                    # any subset of the arch's levels, by name
        - level: DRAM
          temporal: {K: 4, P: 7}  # loop bounds at this level; omitted dims are 1
          order: [K, P]           # outermost first; unlisted dims follow, in problem order
          keep: [Weights, Inputs, Outputs]   # tensor names or roles; default: all it may hold
        - level: GLB
          temporal: {C: 16}
          spatial_x: {K: 14}      # unrolled across the fanout below this level
          spatial_y: {C: 12}

A level that is not listed has all factors 1 and keeps every tensor it may hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import accelmap._schema as schema
from accelmap._files import read_text
from accelmap.arch.spec import Arch
from accelmap.errors import SpecError
from accelmap.mapper.mapping import Mapping, refuse_huge_factors
from accelmap.workloads.problem import Problem

__all__ = ["mapping_to_dict", "mapping_from_dict", "load_mapping", "save_mapping", "read_structured"]

_TOP_KEYS = ("version", "mapping")
_MAPPING_KEYS = ("problem", "arch", "levels")
_LEVEL_KEYS = ("level", "temporal", "spatial_x", "spatial_y", "order", "keep")


def read_structured(path: str | Path) -> Any:
    """Parse a YAML or JSON file; a syntax error becomes a `SpecError` naming file and line."""
    p = Path(path)
    text = read_text(p)
    try:
        if p.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{p}: line {exc.lineno}: invalid JSON: {exc.msg}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{p}: {where}invalid YAML: {problem}") from exc


def mapping_to_dict(mapping: Mapping, problem: Problem, arch: Arch) -> dict[str, Any]:
    """The file form of one mapping (unit factors omitted, orders outermost first)."""
    levels = []
    holds = arch.holds_mask(problem)
    for lv, level in enumerate(arch.levels):
        entry: dict[str, Any] = {"level": level.name}
        t = {problem.dim_names[d]: int(mapping.temporal[lv, d]) for d in range(problem.n_dims) if mapping.temporal[lv, d] != 1}
        if t:
            entry["temporal"] = t
        for axis, key in ((0, "spatial_x"), (1, "spatial_y")):
            s = {problem.dim_names[d]: int(mapping.spatial[lv, d, axis]) for d in range(problem.n_dims) if mapping.spatial[lv, d, axis] != 1}
            if s:
                entry[key] = s
        entry["order"] = [problem.dim_names[d] for d in mapping.order[lv]]
        if not np.array_equal(mapping.keep[lv], holds[lv]):
            entry["keep"] = [problem.tensor_names[t] for t in range(problem.n_tensors) if mapping.keep[lv, t]]
        levels.append(entry)
    return {"version": 1, "mapping": {"problem": problem.name, "arch": arch.name, "levels": levels}}


def _factors(entry: dict[str, Any], key: str, problem: Problem, where: str) -> dict[int, int]:
    factors = schema.int_mapping(entry, key, where, problem.dim_names, key_kind="dimension",
                                 keys_label=f"dims of {problem.name}", value_kind="factor", example="{K: 4}")
    return {problem.dim_index(name): f for name, f in factors.items()}


def mapping_from_dict(data: Any, problem: Problem, arch: Arch, source: str = "<mapping>") -> Mapping:
    """Build a `Mapping` from its file form; every malformed key is a `SpecError` with its path.

    Legality (factor products, capacity, fanout) is *not* checked here: use
    `accelmap.mapper.check.validate`, which lists every problem with level names and numbers.
    """
    top = schema.check_keys(data, _TOP_KEYS, f"{source}: ", "a mapping file", required=("mapping",))
    if top.get("version") != 1 or isinstance(top.get("version"), bool):
        raise SpecError(f"{source}: version = {top.get('version')!r}; expected 1 (add `version: 1` at the top)")
    body = schema.check_keys(top.get("mapping"), _MAPPING_KEYS, f"{source}: mapping", "the mapping body")
    b_where = f"{source}: mapping"
    levels = body.get("levels")
    if not isinstance(levels, list):
        raise SpecError(f"{schema.join(b_where, 'levels')} = {levels!r}; expected a list of levels")
    L, D = arch.n_levels, problem.n_dims
    # Exact Python ints until every factor is read (`refuse_huge_factors`, then int64 arrays).
    temporal = [[1] * D for _ in range(L)]
    spatial = [[[1, 1] for _ in range(D)] for _ in range(L)]
    order = np.tile(np.arange(D), (L, 1))
    keep = arch.holds_mask(problem).copy()
    seen: set[str] = set()
    for i, entry in enumerate(levels):
        where = f"{b_where}.levels[{i}]"
        entry = schema.check_keys(entry, _LEVEL_KEYS, where, "a level entry", required=("level",))
        name = schema.choice(entry, "level", where, arch.level_names, default=schema.REQUIRED,
                             label=f"the levels of {arch.name}")
        if name in seen:
            raise SpecError(f"{where}.level = {name!r} appears twice; list each level once")
        seen.add(name)
        lv = arch.level_index(name)
        for d, f in _factors(entry, "temporal", problem, where).items():
            temporal[lv][d] = f
        for axis, key in ((0, "spatial_x"), (1, "spatial_y")):
            for d, f in _factors(entry, key, problem, where).items():
                spatial[lv][d][axis] = f
        if "order" in entry:
            listed = schema.names(entry, "order", where, "dim names, outermost first", default=schema.REQUIRED)
            bad = [x for x in listed if x not in problem.dim_names]
            if bad:
                raise SpecError(f"{where}.order: unknown dimension {bad[0]!r}; dims: {', '.join(problem.dim_names)}")
            if len(set(listed)) != len(listed):
                raise SpecError(f"{where}.order = {listed}: a dimension is listed twice")
            idx = [problem.dim_index(x) for x in listed]
            order[lv] = idx + [d for d in range(D) if d not in idx]
        if "keep" in entry:
            listed = schema.names(entry, "keep", where, "tensor names or roles", default=schema.REQUIRED)
            keep[lv] = False
            for x in listed:
                keep[lv, problem.tensor_index(x)] = True
    refuse_huge_factors(problem.dim_names, temporal, spatial, arch.level_names, b_where)
    return Mapping(temporal=np.array(temporal, dtype=np.int64), spatial=np.array(spatial, dtype=np.int64),
                   order=order, keep=keep)


def load_mapping(path: str | Path, problem: Problem, arch: Arch) -> Mapping:
    """Read a mapping file: accelmap format, or Timeloop's (detected by content)."""
    data = read_structured(path)
    if isinstance(data, dict) and isinstance(data.get("mapping"), list):
        from accelmap.mapper.timeloop import mapping_from_timeloop

        return mapping_from_timeloop(data, problem, arch, str(path))
    return mapping_from_dict(data, problem, arch, str(path))


def save_mapping(mapping: Mapping, problem: Problem, arch: Arch, path: str | Path) -> None:
    """Write a mapping as YAML (or JSON when the suffix is ``.json``)."""
    p = Path(path)
    data = mapping_to_dict(mapping, problem, arch)
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(data, indent=2) + "\n")
    else:
        p.write_text(yaml.safe_dump(data, sort_keys=False))
