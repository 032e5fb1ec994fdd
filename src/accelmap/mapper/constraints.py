"""Mapping constraints: frozen specs, a strict YAML reader, and dataflow presets.

A `Constraints` object narrows a `MapSpace`:

* `FactorRule`: per level and dim, a fixed / minimum / maximum factor on one *slot*
  (``temporal``, ``spatial_x``, ``spatial_y``, or ``spatial`` = the X times Y product);
* `SpatialRule`: which dims may be unrolled on X and on Y below a level;
* `OrderRule`: a fixed or partial loop order at a level (dims pinned outermost and/or
  innermost, both lists written outermost first, the rest free in between);
* `KeepRule`: a level must keep, must bypass, or may choose for one tensor (name or role);
* ``min_utilization``: a minimum PE utilization (used MACs over all MACs, padded work
  counted as waste);
* ``allow_padding``: imperfect factorization (ceil-divided tiles).

Rules are keyed (a factor rule by level, dim and slot; an order or spatial rule by level; a
keep rule by level and tensor); :meth:`Constraints.override` lets a later set replace the
rules of an earlier one key by key, which is how a user loosens an arch preset's default
constraints (a rule with no bound, e.g. ``{level: RF, dim: K, slot: temporal}``, frees a
factor the preset had fixed).

YAML (every file carries ``version: 1``; unknown keys are errors)::

    version: 1
    dataflow: weight-stationary        # optional preset, explicit rules below win
    min_utilization: 0.5
    allow_padding: false
    factors:
      - {level: GLB, dim: K, slot: temporal, fixed: 4}
      - {level: RF, dim: S, slot: temporal, fixed: full}   # the dim's whole bound
      - {level: GLB, dim: C, slot: spatial_x, max: 8}
    spatial:
      - {level: GLB, x: [K, C], y: [P]}
    orders:
      - {level: RF, inner: [C, S]}      # ... C then S innermost
      - {level: DRAM, outer: [K]}
    keep:
      - {level: GLB, keep: [input, output], bypass: [weight]}
      - {level: RF, choose: [weight]}   # let the search decide
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

import accelmap._schema as schema
from accelmap._files import read_text
from accelmap.errors import SpecError

__all__ = [
    "Slot",
    "FactorRule",
    "SpatialRule",
    "OrderRule",
    "KeepRule",
    "Constraints",
    "constraints_from_dict",
    "load_constraints",
    "load_constraint_files",
    "arch_default_constraints",
    "dataflow",
    "DATAFLOWS",
]


class Slot(str, Enum):
    """Where a factor sits at one level."""

    TEMPORAL = "temporal"
    SPATIAL_X = "spatial_x"
    SPATIAL_Y = "spatial_y"
    SPATIAL = "spatial"  # the product of X and Y


@dataclass(frozen=True, slots=True, kw_only=True)
class FactorRule:
    """Fixed / min / max factor of ``dim`` in ``slot`` at ``level``.

    ``fixed = 0`` means "the dim's whole bound" (written ``full`` in YAML; Timeloop's
    ``=0``). A rule with no ``fixed``, ``min`` 1 and no ``max`` constrains nothing; it
    exists to override (loosen) an earlier rule with the same key.
    """

    level: str
    dim: str
    slot: Slot = Slot.TEMPORAL
    fixed: int | None = None
    min: int = 1
    max: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.slot, Slot):
            object.__setattr__(self, "slot", Slot(schema.choice_value(self.slot, "factor rule slot", _SLOTS)))
        where = f"factor rule (level {self.level}, dim {self.dim}, {self.slot.value})"
        if self.fixed is not None and (not schema.is_int(self.fixed) or self.fixed < 0):
            raise SpecError(f"{where}: fixed = {self.fixed!r}; expected an int >= 1 or 'full'")
        if not schema.is_int(self.min) or self.min < 1:
            raise SpecError(f"{where}: min = {self.min!r}; expected an int >= 1")
        if self.max is not None and (not schema.is_int(self.max) or self.max < self.min):
            raise SpecError(f"{where}: max = {self.max!r}; expected an int >= min ({self.min})")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.level, self.dim, self.slot.value)

    @property
    def is_free(self) -> bool:
        return self.fixed is None and self.min == 1 and self.max is None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpatialRule:
    """Dims that may be unrolled on X / on Y below ``level`` (None = any dim)."""

    level: str
    x: frozenset[str] | None = None
    y: frozenset[str] | None = None

    def __post_init__(self) -> None:
        for key in ("x", "y"):
            v = getattr(self, key)
            if v is not None and not isinstance(v, frozenset):
                object.__setattr__(self, key, frozenset(v))

    @property
    def key(self) -> str:
        return self.level


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderRule:
    """Temporal loop order at ``level``: ``outer`` dims outermost, ``inner`` dims innermost.

    Both lists are written outermost first (the order of `MappingBatch.order`). Dims in
    neither list are free between them. Listing every dim fixes the order completely.
    """

    level: str
    outer: tuple[str, ...] = ()
    inner: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "outer", tuple(self.outer))
        object.__setattr__(self, "inner", tuple(self.inner))
        both = list(self.outer) + list(self.inner)
        dup = sorted({d for d in both if both.count(d) > 1})
        if dup:
            raise SpecError(
                f"order rule at level {self.level}: dim(s) {dup} listed more than once in outer "
                f"{list(self.outer)} / inner {list(self.inner)}; list each dim at most once"
            )

    @property
    def key(self) -> str:
        return self.level


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepRule:
    """Level ``level`` keeps (True), bypasses (False) or may choose (None) ``tensor``.

    ``tensor`` is a tensor name or a role (``input``, ``weight``, ``output``).
    """

    level: str
    tensor: str
    keep: bool | None

    @property
    def key(self) -> tuple[str, str]:
        return (self.level, self.tensor)


def _merge(old: Iterable[Any], new: Iterable[Any]) -> tuple[Any, ...]:
    out: dict[Any, Any] = {r.key: r for r in old}
    for r in new:
        out.pop(r.key, None)
        out[r.key] = r
    return tuple(out.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class Constraints:
    """A set of mapping constraints (see the module docstring).

    ``ignore_arch_defaults`` drops the arch preset's own constraints instead of layering
    these over them. ``min_utilization`` and ``allow_padding`` left as None inherit.
    """

    factors: tuple[FactorRule, ...] = ()
    spatial: tuple[SpatialRule, ...] = ()
    orders: tuple[OrderRule, ...] = ()
    keep: tuple[KeepRule, ...] = ()
    min_utilization: float | None = None
    allow_padding: bool | None = None
    ignore_arch_defaults: bool = False
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for key in ("factors", "spatial", "orders", "keep"):
            object.__setattr__(self, key, tuple(getattr(self, key)))
        mu = self.min_utilization
        if mu is not None and (isinstance(mu, bool) or not isinstance(mu, (int, float)) or not 0 <= mu <= 1):
            raise SpecError(f"{self.source or 'constraints'}: min_utilization = {mu!r}; expected a number in [0, 1]")

    def override(self, other: Constraints | None) -> Constraints:
        """These constraints with ``other``'s rules replacing ours key by key."""
        if other is None:
            return self
        return Constraints(
            factors=_merge(self.factors, other.factors),
            spatial=_merge(self.spatial, other.spatial),
            orders=_merge(self.orders, other.orders),
            keep=_merge(self.keep, other.keep),
            min_utilization=other.min_utilization if other.min_utilization is not None else self.min_utilization,
            allow_padding=other.allow_padding if other.allow_padding is not None else self.allow_padding,
            ignore_arch_defaults=self.ignore_arch_defaults or other.ignore_arch_defaults,
            source=" + ".join(s for s in (self.source, other.source) if s),
        )

    @property
    def is_empty(self) -> bool:
        return not (self.factors or self.spatial or self.orders or self.keep
                    or self.min_utilization or self.allow_padding)


# --- YAML / dict reading ----------------------------------------------------------------

_SLOTS = tuple(m.value for m in Slot)


_TOP_KEYS = ("version", "dataflow", "min_utilization", "allow_padding", "ignore_arch_defaults",
             "factors", "spatial", "orders", "keep")
_FACTOR_KEYS = ("level", "dim", "slot", "fixed", "min", "max")


def _dims(item: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    """A list of dim names (a lone name stands for a list of one); absent: none."""
    return tuple(schema.names(item, key, where, "dim names", default=[], single="a dim name"))


def constraints_from_dict(data: Mapping[str, Any], *, source: str = "constraints", arch: Any = None,
                          require_version: bool = True) -> Constraints:
    """Build `Constraints` from plain data (a parsed YAML document).

    Parameters
    ----------
    data
        The document (see the module docstring for the format).
    source
        Where it came from, used in error messages (a file name).
    arch
        Needed only when the document names a ``dataflow`` preset.
    require_version
        Demand ``version: 1`` (files); arch presets' embedded constraints skip it.
    """
    top_where = f"{source}: "
    data = schema.check_keys(data, _TOP_KEYS, top_where, "a constraints file")
    if require_version and data.get("version") != 1:
        raise SpecError(f"{source}: version = {data.get('version')!r}; expected version: 1")
    if "version" in data and (data["version"] != 1 or isinstance(data["version"], bool)):
        raise SpecError(f"{source}: version = {data['version']!r}; expected version: 1")
    factors: list[FactorRule] = []
    for i, item in enumerate(schema.items(data, "factors", top_where, "factor rules")):
        where = f"{source}: factors[{i}]"
        schema.check_keys(item, _FACTOR_KEYS, where, "a factor rule", required=("level", "dim"))
        fixed = item.get("fixed")
        if fixed == "full":
            fixed = 0
        elif fixed is not None and (not schema.is_int(fixed) or fixed < 1):
            raise SpecError(f"{where}.fixed = {fixed!r}; expected an int >= 1 or 'full'")
        try:
            factors.append(FactorRule(
                level=schema.name(item, "level", where, default=schema.REQUIRED),
                dim=schema.name(item, "dim", where, default=schema.REQUIRED),
                slot=Slot(schema.choice(item, "slot", where, _SLOTS, default="temporal")),
                fixed=fixed, min=schema.integer(item, "min", where, default=1),
                max=schema.integer(item, "max", where, default=None, nullable=True, null_means="no maximum"),
            ))
        except SpecError as exc:
            if str(exc).startswith(where):
                raise
            raise SpecError(f"{where}: {exc}") from None
    spatial: list[SpatialRule] = []
    for i, item in enumerate(schema.items(data, "spatial", top_where, "spatial rules")):
        where = f"{source}: spatial[{i}]"
        schema.check_keys(item, ("level", "x", "y"), where, "a spatial rule", required=("level",))
        spatial.append(SpatialRule(
            level=schema.name(item, "level", where, default=schema.REQUIRED),
            x=None if item.get("x") is None else frozenset(_dims(item, "x", where)),
            y=None if item.get("y") is None else frozenset(_dims(item, "y", where)),
        ))
    orders: list[OrderRule] = []
    for i, item in enumerate(schema.items(data, "orders", top_where, "order rules")):
        where = f"{source}: orders[{i}]"
        schema.check_keys(item, ("level", "outer", "inner"), where, "an order rule", required=("level",))
        try:
            orders.append(OrderRule(
                level=schema.name(item, "level", where, default=schema.REQUIRED),
                outer=_dims(item, "outer", where),
                inner=_dims(item, "inner", where),
            ))
        except SpecError as exc:
            if str(exc).startswith(where):
                raise
            raise SpecError(f"{where}: {exc}") from None
    keep: list[KeepRule] = []
    for i, item in enumerate(schema.items(data, "keep", top_where, "keep rules")):
        where = f"{source}: keep[{i}]"
        schema.check_keys(item, ("level", "keep", "bypass", "choose"), where, "a keep rule", required=("level",))
        level = schema.name(item, "level", where, default=schema.REQUIRED)
        for key, value in (("keep", True), ("bypass", False), ("choose", None)):
            for t in schema.names(item, key, where, "tensor names or roles", default=[], single="a tensor name or role"):
                keep.append(KeepRule(level=level, tensor=t, keep=value))
    mu = schema.number(data, "min_utilization", top_where, default=None, minimum=0, maximum=1, strict=False,
                       nullable=True, null_means="the inherited value")
    pad = data.get("allow_padding")
    if pad is not None:
        pad = schema.boolean(data, "allow_padding", top_where, default=None)
    ign = schema.boolean(data, "ignore_arch_defaults", top_where, default=False)
    explicit = Constraints(
        factors=tuple(factors), spatial=tuple(spatial), orders=tuple(orders), keep=tuple(keep),
        min_utilization=mu, allow_padding=pad, ignore_arch_defaults=ign, source=source,
    )
    if data.get("dataflow") is not None:
        name = schema.name(data, "dataflow", top_where, default=schema.REQUIRED)
        if arch is None:
            raise SpecError(f"{source}: dataflow {name!r} needs the arch; pass arch=")
        base = dataflow(name, arch)
        return replace(base.override(explicit), source=source, ignore_arch_defaults=ign)
    return explicit


def load_constraints(path: str | Path, *, arch: Any = None) -> Constraints:
    """Read a constraints YAML file (``version: 1``); see the module docstring."""
    import yaml

    p = Path(path)
    try:
        data = yaml.safe_load(read_text(p))
    except yaml.YAMLError as exc:
        raise SpecError(f"{p}: not valid YAML: {exc}") from None
    if isinstance(data, Mapping) and ("architecture_constraints" in data or "mapspace_constraints" in data):
        raise SpecError(
            f"{p}: this is a Timeloop constraints file; read it with "
            "accelmap.mapper.timeloop_constraints.load_timeloop_constraints"
        )
    return constraints_from_dict(data, source=str(p), arch=arch)


def load_constraint_files(paths: Iterable[str | Path], *, problem: Any, arch: Any,
                          level_map: Mapping[str, str] | None = None) -> Constraints | None:
    """Read several constraint files, accelmap or Timeloop format (told apart by content).

    accelmap files are layered in the order given (later ones override earlier ones);
    Timeloop files are read together (as Timeloop's mapper reads its arch and mapspace
    constraints) and layered first. Returns None for no files.
    """
    import yaml

    from accelmap.mapper.timeloop_constraints import timeloop_constraints_from_dict

    ours: list[Constraints] = []
    tl_docs: list[Any] = []
    tl_names: list[str] = []
    for path in paths:
        p = Path(path)
        try:
            data = yaml.safe_load(read_text(p))
        except yaml.YAMLError as exc:
            raise SpecError(f"{p}: not valid YAML: {exc}") from None
        if isinstance(data, Mapping) and any(k in data for k in ("architecture_constraints", "mapspace_constraints",
                                                                  "mapspace")):
            tl_docs.append(data)
            tl_names.append(str(p))
        else:
            if not isinstance(data, Mapping):
                raise SpecError(f"{p}: expected a constraints mapping with `version: 1`; received {type(data).__name__}")
            ours.append(constraints_from_dict(data, source=str(p), arch=arch))
    result: Constraints | None = None
    if tl_docs:
        result = timeloop_constraints_from_dict(tl_docs, problem=problem, arch=arch, sources=tl_names,
                                                level_map=level_map)
    for c in ours:
        result = c if result is None else result.override(c)
    return result


def arch_default_constraints(arch: Any) -> Constraints:
    """The arch preset's own constraints (``Arch.constraints`` plain data), or empty."""
    if not arch.constraints:
        return Constraints()
    return constraints_from_dict(dict(arch.constraints), source=f"arch {arch.name} constraints",
                                 arch=arch, require_version=False)


# --- dataflow presets -------------------------------------------------------------------
# Chen, Emer, Sze, "Eyeriss: A Spatial Architecture for Energy-Efficient Dataflow for
# Convolutional Neural Networks", ISCA 2016, section IV: a dataflow is named after the
# operand that stays put in the PE's register file. Written generically through tensor
# relevance so that they apply to any problem (conv, matmul, ...):
#   *-stationary: at the innermost storage levels (those below the last spatial fanout,
#   i.e. inside a PE) the innermost temporal loops are the dims that do NOT index the
#   stationary tensor (so its element is reused while they run), and the array unrolls
#   only dims that DO index it (each PE owns different elements).
#   row-stationary (Eyeriss): a 1-D convolution primitive per PE: filter rows unrolled on
#   one array axis, output rows on the other, a whole filter row processed inside the PE.

DATAFLOWS = ("weight-stationary", "output-stationary", "input-stationary", "row-stationary")


def _pe_levels(arch: Any) -> list[int]:
    """Levels inside a PE: below the last level with a fanout > 1 (or the innermost)."""
    fan = [lv.fanout_x * lv.fanout_y for lv in arch.levels]
    last = max((i for i, f in enumerate(fan) if f > 1), default=-1)
    inner = list(range(last + 1, arch.n_levels))
    return inner or [arch.n_levels - 1]


def _spatial_levels(arch: Any) -> list[int]:
    return [i for i, lv in enumerate(arch.levels) if lv.fanout_x * lv.fanout_y > 1]


def dataflow(name: str, arch: Any) -> Constraints:
    """Constraints of a named dataflow on ``arch``.

    Parameters
    ----------
    name
        One of `DATAFLOWS`.
    arch
        The architecture (its fanouts decide which levels are PE-local).

    Returns
    -------
    Constraints. The stationary presets name dims symbolically (``@relevant:<role>`` /
    ``@irrelevant:<role>``: the dims that do / do not index the tensor with that role),
    resolved against the problem by `MapSpace`; row-stationary names the conv letters
    ``P R S`` (and ``K C N``), so it needs a convolution.
    """
    src = f"dataflow {name}"
    if name in ("weight-stationary", "output-stationary", "input-stationary"):
        role = {"weight-stationary": "weight", "output-stationary": "output", "input-stationary": "input"}[name]
        return Constraints(
            orders=tuple(OrderRule(level=arch.levels[i].name, inner=(f"@irrelevant:{role}",)) for i in _pe_levels(arch)),
            spatial=tuple(SpatialRule(level=arch.levels[i].name, x=frozenset({f"@relevant:{role}"}),
                                      y=frozenset({f"@relevant:{role}"})) for i in _spatial_levels(arch)),
            source=src,
        )
    if name == "row-stationary":
        sp = _spatial_levels(arch)
        if not sp:
            raise SpecError(f"{src}: arch {arch.name} has no spatial fanout; row-stationary needs a PE array")
        pe = _pe_levels(arch)
        # the filter row is held where weights live inside the PE (innermost such level)
        wl = [i for i in pe if arch.levels[i].holds is None or
              {"weight", "Weights"} & set(arch.levels[i].holds)]
        row_level = arch.levels[(wl or pe)[-1]].name
        # Rows: P (output rows) and R (filter rows) pair in input rows (stride*P + R).
        rules_sp = []
        for i in sp:
            rules_sp.append(SpatialRule(level=arch.levels[i].name,
                                        x=frozenset({"P", "K", "N"}), y=frozenset({"R", "C", "K"})))
        return Constraints(
            spatial=tuple(rules_sp),
            factors=(FactorRule(level=row_level, dim="S", slot=Slot.TEMPORAL, fixed=0),),
            orders=(OrderRule(level=row_level, inner=("S",)),),
            source=src,
        )
    from accelmap._registry import did_you_mean

    raise SpecError(did_you_mean(name, list(DATAFLOWS), what="dataflow"))
