"""Read Timeloop architecture / mapspace constraint files into accelmap `Constraints`.

So that a search can run in the space Timeloop's mapper searches (e.g. the Eyeriss-like
row-stationary files in ``../shared/reference/timeloop/constraints/``). A file holds
``architecture_constraints:`` or ``mapspace_constraints:`` (or ``constraints:``/
``mapspace:``) with a ``targets:`` list; each target has a ``target`` level and a ``type``:

* ``temporal``: ``factors`` such as ``"N=1 M=1 R=0"`` (``0`` = the dim's whole bound,
  ``D<=k`` a maximum) and a ``permutation`` written innermost first. Before the first
  space: the innermost loops in that order; after it: the outermost ones (the last letter
  outermost); dims not listed are free in between. A permutation naming every dim fixes
  the order.
* ``spatial``: the same ``factors``; the ``permutation`` with ``split = s`` puts the dims at
  positions ``< s`` on X and the rest on Y (Timeloop's rule), which accelmap expresses as
  "dims allowed on X / on Y" plus per-axis factor rules.
* ``bypass`` / ``datatype``: ``keep`` and ``bypass`` lists of data-space names.
* ``utilization`` / ``parallelism``: ``min`` (minimum PE utilization).

Level names map onto the arch's by name, or through ``level_map``. A Timeloop level that
only expresses one axis of a fanout (Eyeriss's ``DummyBuffer``, which accelmap's
eyeriss-like preset folds into the GLB's 14 x 12 fanout) maps to ``"<level>:x"`` or
``"<level>:y"``: its spatial constraint then governs that axis of ``<level>``, and the
level's own spatial constraint governs only the other axis; its temporal factors must all
be 1 and it must keep nothing. Timeloop's dim letters map by name, ``M`` onto ``K`` when the
problem uses accelmap's conv letters (``dim_map`` overrides).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import accelmap._schema as schema
from accelmap._files import read_text
from accelmap.arch.spec import Arch
from accelmap.errors import SpecError
from accelmap.mapper.constraint_types import Constraints, FactorRule, KeepRule, OrderRule, Slot, SpatialRule
from accelmap.workloads.problem import Problem

__all__ = ["timeloop_constraints_from_dict", "load_timeloop_constraints", "EYERISS_PRESET_LEVEL_MAP"]

# accelmap's eyeriss-like preset folds Timeloop's DummyBuffer (the 12-wide Y fanout) into
# shared_glb's 14 x 12 fanout; every other level keeps its Timeloop name.
EYERISS_PRESET_LEVEL_MAP: dict[str, str] = {"DummyBuffer": "shared_glb:y"}

_TOP = ("architecture_constraints", "mapspace_constraints", "constraints", "mapspace")
_TARGET_KEYS = ("target", "type", "factors", "permutation", "split", "keep", "bypass", "min")
_FACTOR = re.compile(r"([A-Za-z_][A-Za-z_0-9]*?)\s*(<=|=)?\s*(\d+)")
_ROLE_OF = {"Weights": "weight", "Inputs": "input", "Outputs": "output"}


def _targets(data: Any, source: str) -> list[Any]:
    if isinstance(data, list):
        return data
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: expected a mapping with one of {list(_TOP)}; received {type(data).__name__}")
    keys = [k for k in data if k in _TOP]
    unknown = [k for k in data if k not in _TOP]
    if unknown or len(keys) != 1:
        raise SpecError(f"{source}: top-level keys {list(data)}; expected exactly one of {list(_TOP)}")
    body = data[keys[0]]
    if isinstance(body, list):
        return body
    if isinstance(body, Mapping) and set(body) <= {"targets", "version"} and isinstance(body.get("targets"), list):
        targets: list[Any] = body["targets"]
        return targets
    raise SpecError(f"{source}: {keys[0]}: expected a `targets:` list")


class _Reader:
    def __init__(self, problem: Problem, arch: Arch, level_map: Mapping[str, str] | None,
                 dim_map: Mapping[str, str] | None) -> None:
        self.problem, self.arch = problem, arch
        self.level_map = dict(level_map or {})
        self.dim_map = dict(dim_map or {})
        if not dim_map and "M" not in problem.dim_names and "K" in problem.dim_names:
            self.dim_map["M"] = "K"
        self.factors: dict[tuple[str, str, str], FactorRule] = {}
        self.spatial: dict[str, dict[str, frozenset[str]]] = {}
        self.orders: dict[str, OrderRule] = {}
        self.keep: dict[tuple[str, str], KeepRule] = {}
        self.min_utilization: float | None = None
        folded = {v.split(":")[0]: v.split(":")[1] for v in self.level_map.values() if v and ":" in v}
        self.folded_axis = folded  # arch level -> axis claimed by a folded Timeloop level

    # --- names ----------------------------------------------------------------------
    def level(self, name: str, where: str) -> tuple[str | None, str | None]:
        """(arch level, folded axis or None); (None, None) for a dropped level."""
        target = self.level_map.get(name, name)
        if target in ("", None):
            return None, None
        lvl, _, axis = str(target).partition(":")
        if lvl not in self.arch.level_names:
            raise SpecError(
                f"{where}: level {name!r} is not a level of arch {self.arch.name} "
                f"{list(self.arch.level_names)}; map it with level_map={{'{name}': '<level>'}} "
                f"(or '<level>:x' / '<level>:y' for a level that is one axis of a fanout)"
            )
        if axis not in ("", "x", "y"):
            raise SpecError(f"{where}: level_map[{name!r}] = {target!r}; expected '<level>', '<level>:x' or '<level>:y'")
        return lvl, axis or None

    def dim(self, name: str, where: str) -> str:
        d = self.dim_map.get(name, name)
        if d not in self.problem.dim_names:
            raise SpecError(
                f"{where}: dimension {name!r} is not in problem {self.problem.name} {list(self.problem.dim_names)}; "
                "pass dim_map to rename Timeloop letters"
            )
        return d

    def tensor(self, name: str, where: str) -> str:
        if name in self.problem.tensor_names:
            return name
        if name in _ROLE_OF:
            return _ROLE_OF[name]
        raise SpecError(f"{where}: unknown data-space {name!r}; problem {self.problem.name} has {list(self.problem.tensor_names)}")

    def parse_factors(self, text: Any, where: str) -> list[tuple[str, str, int]]:
        if text is None:
            return []
        if not isinstance(text, str):
            raise SpecError(f"{where}.factors = {text!r}; expected a string like 'N=1 M=0 C<=4'")
        out = []
        for tok in text.split():
            m = _FACTOR.fullmatch(tok)
            if m is None:
                raise SpecError(f"{where}.factors: cannot read {tok!r}; expected DIM=N, DIM<=N or DIMN")
            out.append((self.dim(m[1], f"{where}.factors"), m[2] or "=", int(m[3])))
        return out

    def parse_perm(self, text: Any, where: str) -> tuple[list[str], list[str]]:
        if text is None:
            return [], []
        if not isinstance(text, str):
            raise SpecError(f"{where}.permutation = {text!r}; expected a string of dim letters, innermost first")
        parts = text.split(None, 1)
        inner = [self.dim(c, f"{where}.permutation") for c in parts[0]] if parts else []
        outer = [self.dim(c, f"{where}.permutation") for c in parts[1] if not c.isspace()] if len(parts) > 1 else []
        return inner, outer

    # --- rules ----------------------------------------------------------------------
    def add_factor(self, rule: FactorRule, where: str) -> None:
        old = self.factors.get(rule.key)
        if old is not None and old != rule:
            raise SpecError(f"{where}: re-specification of the {rule.slot.value} factor of {rule.dim} at level "
                            f"{rule.level} ({old} vs {rule}); the architecture and mapspace constraints conflict")
        self.factors[rule.key] = rule

    def factor_rule(self, level: str, dim: str, slot: Slot, op: str, value: int) -> FactorRule:
        bound = self.problem.dims[self.problem.dim_index(dim)].bound
        if op == "<=":
            return FactorRule(level=level, dim=dim, slot=slot, max=max(1, value))
        # Timeloop clamps a factor above the bound to the bound, and reads 0 as the bound
        return FactorRule(level=level, dim=dim, slot=slot, fixed=0 if value == 0 else min(value, bound))

    def read(self, targets: list[Any], source: str) -> None:
        for i, t in enumerate(targets):
            where = f"{source}: targets[{i}]"
            t = schema.check_keys(t, _TARGET_KEYS, where, "a target", required=("target", "type"))
            kind = str(t["type"])
            name = str(t["target"])
            lvl, axis = self.level(name, where)
            if kind == "temporal":
                self.temporal(t, lvl, axis, name, where)
            elif kind == "spatial":
                self.spatial_target(t, lvl, axis, where)
            elif kind in ("bypass", "datatype", "bypassing"):
                self.bypass(t, lvl, axis, name, where)
            elif kind in ("utilization", "parallelism"):
                v = schema.number(t, "min", where, default=schema.REQUIRED, minimum=0, maximum=1, strict=False)
                self.min_utilization = float(v)
            else:
                raise SpecError(f"{where}.type = {kind!r}; supported: temporal, spatial, bypass, datatype, utilization")

    def temporal(self, t: dict[str, Any], lvl: str | None, axis: str | None, name: str, where: str) -> None:
        factors = self.parse_factors(t.get("factors"), where)
        if lvl is None or axis is not None:
            bad = [f"{d}={v}" for d, op, v in factors if not (op == "=" and v == 1)]
            if bad:
                raise SpecError(f"{where}: level {name} is folded into {lvl or 'nothing'} (level_map), so it can have "
                                f"no temporal loops, but its factors allow {bad}")
            return
        for d, op, v in factors:
            self.add_factor(self.factor_rule(lvl, d, Slot.TEMPORAL, op, v), where)
        inner, outer = self.parse_perm(t.get("permutation"), where)
        if inner or outer:
            rule = OrderRule(level=lvl, inner=tuple(reversed(inner)), outer=tuple(reversed(outer)))
            old = self.orders.get(lvl)
            if old is not None and old != rule:
                raise SpecError(f"{where}: re-specification of the loop order at level {lvl}")
            self.orders[lvl] = rule

    def spatial_target(self, t: dict[str, Any], lvl: str | None, axis: str | None, where: str) -> None:
        if lvl is None:
            return
        factors = self.parse_factors(t.get("factors"), where)
        inner, outer = self.parse_perm(t.get("permutation"), where)
        perm = inner + outer
        split = schema.integer(t, "split", where, default=None, minimum=0, nullable=True, null_means="no split")

        def axis_of(d: str) -> str | None:
            if split is None or d not in perm:
                return None
            return "x" if perm.index(d) < split else "y"

        if axis is not None:
            axes = [axis]  # a folded level governs one axis of its arch level
        else:
            claimed = self.folded_axis.get(lvl)
            axes = [a for a in ("x", "y") if a != claimed]
        rules = self.spatial.setdefault(lvl, {})
        for a in axes:
            allowed = frozenset(d for d in self.problem.dim_names if axis_of(d) in (None, a)
                                or (axis is not None and split is None))
            if a in rules and rules[a] != allowed:
                raise SpecError(f"{where}: re-specification of the dims allowed on {a.upper()} at level {lvl}")
            rules[a] = allowed
        for d, op, v in factors:
            ax = axis_of(d)
            if ax is None:
                ax = axes[0] if len(axes) == 1 else None
            if ax is not None and ax not in axes:
                if op == "=" and v == 1:
                    continue  # a unit factor on an axis another Timeloop level governs
                raise SpecError(f"{where}: factor {d}{op}{v} lies on the {ax.upper()} axis of {lvl}, which "
                                "level_map gives to another Timeloop level")
            slot = Slot.SPATIAL if ax is None else (Slot.SPATIAL_X if ax == "x" else Slot.SPATIAL_Y)
            self.add_factor(self.factor_rule(lvl, d, slot, op, v), where)

    def bypass(self, t: dict[str, Any], lvl: str | None, axis: str | None, name: str, where: str) -> None:
        for key, value in (("keep", True), ("bypass", False)):
            for n in schema.items(t, key, where, "data-space names"):
                tensor = self.tensor(str(n), f"{where}.{key}")
                if lvl is None or axis is not None:
                    if value:
                        raise SpecError(f"{where}: level {name} is folded away (level_map) but keeps {n}")
                    continue
                rule = KeepRule(level=lvl, tensor=tensor, keep=value)
                old = self.keep.get(rule.key)
                if old is not None and old != rule:
                    raise SpecError(f"{where}: re-specification of keep/bypass of {n} at level {lvl}")
                self.keep[rule.key] = rule

    def constraints(self, source: str) -> Constraints:
        return Constraints(
            factors=tuple(self.factors.values()),
            spatial=tuple(SpatialRule(level=lv, x=r.get("x"), y=r.get("y")) for lv, r in self.spatial.items()),
            orders=tuple(self.orders.values()),
            keep=tuple(self.keep.values()),
            min_utilization=self.min_utilization,
            source=source,
        )


def timeloop_constraints_from_dict(
    documents: Sequence[Any], *, problem: Problem, arch: Arch, sources: Sequence[str] | None = None,
    level_map: Mapping[str, str] | None = None, dim_map: Mapping[str, str] | None = None,
) -> Constraints:
    """Constraints from parsed Timeloop constraint documents (arch and mapspace files
    together, as Timeloop's mapper reads them; a factor or order given twice differently
    is an error, as in Timeloop)."""
    reader = _Reader(problem, arch, level_map, dim_map)
    sources = list(sources or [f"<timeloop constraints {i}>" for i in range(len(documents))])
    for doc, src in zip(documents, sources, strict=True):
        reader.read(_targets(doc, src), src)
    return reader.constraints(" + ".join(sources))


def load_timeloop_constraints(
    paths: str | Path | Sequence[str | Path], *, problem: Problem, arch: Arch,
    level_map: Mapping[str, str] | None = None, dim_map: Mapping[str, str] | None = None,
) -> Constraints:
    """Read Timeloop constraint YAML file(s); see the module docstring.

    Examples
    --------
    >>> from accelmap.arch.presets import preset                    # doctest: +SKIP
    >>> c = load_timeloop_constraints(["arch_constraints.yaml", "map_constraints.yaml"],
    ...     problem=layer, arch=preset("eyeriss-like"), level_map=EYERISS_PRESET_LEVEL_MAP)
    """
    import yaml

    if isinstance(paths, (str, Path)):
        paths = [paths]
    docs, names = [], []
    for p in paths:
        p = Path(p)
        try:
            docs.append(yaml.safe_load(read_text(p)))
        except yaml.YAMLError as exc:
            raise SpecError(f"{p}: not valid YAML: {exc}") from None
        names.append(str(p))
    return timeloop_constraints_from_dict(docs, problem=problem, arch=arch, sources=names,
                                          level_map=level_map, dim_map=dim_map)
