"""Mapping constraints as data: the rule kinds and the `Constraints` set that layers them.

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

Both constraint file readers build these: `accelmap.mapper.constraints` (accelmap's YAML,
dataflow presets, and the reading of a mix of files) and
`accelmap.mapper.timeloop_constraints` (Timeloop's constraint files).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import accelmap._schema as schema
from accelmap.errors import SpecError

__all__ = ["Slot", "FactorRule", "SpatialRule", "OrderRule", "KeepRule", "Constraints"]


class Slot(str, Enum):
    """Where a factor sits at one level."""

    TEMPORAL = "temporal"
    SPATIAL_X = "spatial_x"
    SPATIAL_Y = "spatial_y"
    SPATIAL = "spatial"  # the product of X and Y


_SLOTS = tuple(m.value for m in Slot)


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
