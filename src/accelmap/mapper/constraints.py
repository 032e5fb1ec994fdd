"""Mapping constraints from files and presets: the strict YAML reader, the reading of a mix
of accelmap and Timeloop constraint files, an arch preset's own constraints, and dataflow
presets.

The constraints themselves (`Constraints` and its rules `FactorRule`, `SpatialRule`,
`OrderRule`, `KeepRule`, keyed by `Slot`) are defined in `accelmap.mapper.constraint_types`
and can be imported from here as well; the Timeloop format is read by
`accelmap.mapper.timeloop_constraints`, which `load_constraint_files` calls for the files
it recognises as Timeloop's.

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
from dataclasses import replace
from pathlib import Path
from typing import Any

import accelmap._schema as schema
from accelmap._files import read_text
from accelmap.errors import SpecError
from accelmap.mapper.constraint_types import (
    _SLOTS,
    Constraints,
    FactorRule,
    KeepRule,
    OrderRule,
    Slot,
    SpatialRule,
)
from accelmap.mapper.timeloop_constraints import timeloop_constraints_from_dict

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


# --- YAML / dict reading ----------------------------------------------------------------

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
