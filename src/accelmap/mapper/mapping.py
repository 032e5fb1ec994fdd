"""`Mapping` (one) and `MappingBatch` (many, as arrays).

A mapping says, for every storage level ``l`` (0 = outermost) and loop dimension ``d``:

* ``temporal[l, d]``: the bound of the temporal loop over ``d`` run at level ``l``
  (it walks the tiles that level ``l`` hands to the levels below);
* ``spatial[l, d, 0|1]``: how many instances below level ``l`` (next inner level, or MACs
  for the innermost) ``d`` is unrolled across, along X and along Y;
* ``order[l, :]``: the temporal loops of level ``l`` as dim indices, outermost first;
* ``keep[l, t]``: whether level ``l`` stores tensor ``t`` (False = bypassed).

The tile an instance of level ``l`` holds covers ``prod_{l' >= l} temporal[l'] *
spatial[l', :, 0] * spatial[l', :, 1]`` iterations of each dim (Timeloop's convention: the
loops at a level, temporal and spatial, and everything inside them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from accelmap._typing import BoolArray, IntArray
from accelmap.errors import SpecError

__all__ = ["Mapping", "MappingBatch", "tiles_from_factors"]


def tiles_from_factors(fac: IntArray) -> IntArray:
    """(n, L, D) tiles from (n, L, D) per-level factors: ``tiles[:, l] = prod_{l' >= l}
    fac[:, l']`` (a reversed cumulative product, one level at a time: faster than
    ``np.cumprod`` over the reversed axis)."""
    tiles = np.empty_like(fac)
    tiles[:, -1] = fac[:, -1]
    for lv in range(fac.shape[1] - 2, -1, -1):
        np.multiply(tiles[:, lv + 1], fac[:, lv], out=tiles[:, lv])
    return tiles


# The cost models count a dim's factor product, tiles and accesses in int64. A mapping read
# from a file whose factors multiply past this could wrap around to a legal-looking product,
# so the readers refuse it (no real layer's dim comes near: this is about 4.6e18).
FACTOR_PRODUCT_LIMIT = 1 << 62


def refuse_huge_factors(dim_names: Sequence[str], temporal: Sequence[Sequence[int]],
                        spatial: Sequence[Sequence[Sequence[int]]], level_names: Sequence[str],
                        where: str) -> None:
    """A `SpecError` naming the dim and its factors when one dim's factors (every level,
    temporal and both spatial axes, as exact integers) multiply past `FACTOR_PRODUCT_LIMIT`
    in magnitude."""
    for d, name in enumerate(dim_names):
        prod, parts = 1, []
        for lv, level in enumerate(level_names):
            for kind, f in (("", temporal[lv][d]), (" spatial_x", spatial[lv][d][0]),
                            (" spatial_y", spatial[lv][d][1])):
                prod *= int(f)
                if int(f) != 1:
                    parts.append(f"{level}{kind}: {int(f)}")
        if abs(prod) > FACTOR_PRODUCT_LIMIT:
            raise SpecError(f"{where}: the factors of dim {name} multiply to {prod} ({', '.join(parts)}), more "
                            "than 2^62, beyond what the cost models count exactly in 64-bit integers; a "
                            "dim's factors multiply to its bound: fix the factors")


_FIELDS = ("temporal", "spatial", "order", "keep")


def _same_arrays(a: Mapping | MappingBatch, b: Mapping | MappingBatch) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in _FIELDS)


def _frozen(a: np.ndarray, dtype: type) -> np.ndarray:
    """``a`` as a read-only contiguous array of ``dtype``, converted unchecked (for arrays a
    caller already holds in that dtype: `MappingBatch._trusted`)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    a.setflags(write=False)
    return a


_INT64_MAX = np.iinfo(np.int64).max


def _first_index(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(x) for x in np.argwhere(mask)[0])


def _checked(a: object, field: str, boolean: bool) -> np.ndarray:
    """``a`` as a read-only contiguous int64 (``boolean``: bool) array, refusing every value
    the conversion would change: a float that is not a whole number (``2.7`` would become
    ``2``), not finite or outside int64, an unsigned or Python integer past int64 (it would
    wrap around or not convert), a ``keep`` entry other than 0/1/False/True; the error names
    the field and the first such index."""
    what = "a bool (or 0 / 1)" if boolean else "a whole number within int64"
    try:
        arr = np.asarray(a)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"mapping {field}: not an array of numbers ({exc}); expected {what} per entry") from None
    kind = arr.dtype.kind
    bad: np.ndarray | None = None
    if boolean:
        if kind in "iuf":
            bad = (arr != 0) & (arr != 1)
        elif kind != "b":
            bad = np.ones(arr.shape, dtype=bool)
    elif kind == "u":
        bad = arr > _INT64_MAX
    elif kind == "f":
        # whole, finite and inside int64 (2^63 itself is not: the float bound is exclusive)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (arr >= 2.0**63) | (arr < -(2.0**63))
    elif kind == "O":
        try:
            arr = np.array(arr.tolist(), dtype=np.int64)
        except (OverflowError, TypeError, ValueError):
            flat = arr.reshape(-1)
            for k, v in enumerate(flat):
                try:
                    ok = int(v) == v and -(2**63) <= int(v) <= _INT64_MAX
                except (TypeError, ValueError, OverflowError):
                    ok = False
                if not ok:
                    at = np.unravel_index(k, arr.shape)
                    raise SpecError(f"mapping {field}{list(map(int, at))}: {v!r} is not {what}") from None
    elif kind not in "bi":
        bad = np.ones(arr.shape, dtype=bool)
    if bad is not None and bad.any():
        idx = _first_index(bad)
        raise SpecError(f"mapping {field}{list(idx)}: {arr[idx].item()!r} is not {what}; a mapping's factors and loop "
                        "order are integers and its keep flags booleans")
    return _frozen(arr, np.bool_ if boolean else np.int64)


def _set_frozen(obj: Mapping | MappingBatch, temporal: IntArray, spatial: IntArray, order: IntArray,
                keep: BoolArray) -> None:
    """Store the four arrays on ``obj`` unchecked (`MappingBatch._trusted`)."""
    for field, a, dt in (("temporal", temporal, np.int64), ("spatial", spatial, np.int64),
                         ("order", order, np.int64), ("keep", keep, np.bool_)):
        object.__setattr__(obj, field, _frozen(a, dt))


def _refuse_wrapping_products(temporal: np.ndarray, spatial: np.ndarray) -> None:
    """A `SpecError` when some row's factors of one dim (every level, temporal and both
    spatial axes) multiply past `FACTOR_PRODUCT_LIMIT` in magnitude: the cost models form that
    product in int64, where it could wrap around to a legal-looking value. One float64 pass
    finds the candidate rows (a product of at most a few dozen factors is within a relative
    1e-14 of the exact one), and `refuse_huge_factors`'s exact products decide them."""
    if temporal.size == 0:
        return
    f = np.abs(temporal.astype(np.float64))
    f *= np.abs(spatial[..., 0])
    f *= np.abs(spatial[..., 1])
    prod = f.prod(axis=-2)  # (..., n_dims)
    near = prod > FACTOR_PRODUCT_LIMIT / 2
    if not near.any():
        return
    for idx in np.argwhere(near.any(axis=-1)):  # the exact products of those rows decide
        row = tuple(int(x) for x in idx)
        t, sp = temporal[row], spatial[row]
        refuse_huge_factors([str(d) for d in range(t.shape[1])], t.tolist(), sp.tolist(),
                            [f"level {lv}" for lv in range(t.shape[0])],
                            f"mapping: row {row[0]}" if row else "mapping")


@dataclass(frozen=True, slots=True, eq=False)
class Mapping:
    """One mapping: the arrays of `MappingBatch` without the leading batch axis.

    Shapes: temporal (n_levels, n_dims), spatial (n_levels, n_dims, 2),
    order (n_levels, n_dims), keep (n_levels, n_tensors).
    """

    temporal: IntArray
    spatial: IntArray
    order: IntArray
    keep: BoolArray

    def __post_init__(self) -> None:
        for field in _FIELDS:
            object.__setattr__(self, field, _checked(getattr(self, field), field, field == "keep"))
        _check_shapes(self.temporal[None], self.spatial[None], self.order[None], self.keep[None])
        _refuse_wrapping_products(self.temporal, self.spatial)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return _same_arrays(self, other)

    __hash__ = None  # type: ignore[assignment]

    @property
    def n_levels(self) -> int:
        return int(self.temporal.shape[0])

    @property
    def n_dims(self) -> int:
        return int(self.temporal.shape[1])

    def as_batch(self) -> MappingBatch:
        return MappingBatch._trusted(self.temporal[None], self.spatial[None], self.order[None], self.keep[None])

    @classmethod
    def _trusted(cls, temporal: IntArray, spatial: IntArray, order: IntArray, keep: BoolArray) -> Mapping:
        """One mapping from arrays already checked (a row of a batch): see `MappingBatch._trusted`."""
        self = object.__new__(cls)
        _set_frozen(self, temporal, spatial, order, keep)
        _check_shapes(self.temporal[None], self.spatial[None], self.order[None], self.keep[None])
        return self

    def factors(self) -> IntArray:
        """(n_levels, n_dims) all factors at each level: temporal x spatial X x spatial Y."""
        return self.temporal * self.spatial[..., 0] * self.spatial[..., 1]

    def tiles(self) -> IntArray:
        """(n_levels, n_dims) iterations of each dim covered by one instance of each level."""
        return self.as_batch().tiles()[0]


def _check_shapes(temporal: np.ndarray, spatial: np.ndarray, order: np.ndarray, keep: np.ndarray) -> None:
    if temporal.ndim != 3:
        raise SpecError(f"mapping temporal has shape {temporal.shape}; expected (n, n_levels, n_dims)")
    n, nl, nd = temporal.shape
    if spatial.shape != (n, nl, nd, 2):
        raise SpecError(f"mapping spatial has shape {spatial.shape}; expected {(n, nl, nd, 2)}")
    if order.shape != (n, nl, nd):
        raise SpecError(f"mapping order has shape {order.shape}; expected {(n, nl, nd)}")
    if keep.ndim != 3 or keep.shape[:2] != (n, nl):
        raise SpecError(f"mapping keep has shape {keep.shape}; expected {(n, nl)} + (n_tensors,)")


@dataclass(frozen=True, slots=True, eq=False)
class MappingBatch:
    """Many mappings of one problem on one arch, as arrays with a leading batch axis.

    Shapes: temporal (n, n_levels, n_dims), spatial (n, n_levels, n_dims, 2),
    order (n, n_levels, n_dims), keep (n, n_levels, n_tensors).
    """

    temporal: IntArray
    spatial: IntArray
    order: IntArray
    keep: BoolArray

    def __post_init__(self) -> None:
        for field in _FIELDS:
            object.__setattr__(self, field, _checked(getattr(self, field), field, field == "keep"))
        _check_shapes(self.temporal, self.spatial, self.order, self.keep)
        _refuse_wrapping_products(self.temporal, self.spatial)

    @classmethod
    def _trusted(cls, temporal: IntArray, spatial: IntArray, order: IntArray, keep: BoolArray) -> MappingBatch:
        """A batch from arrays the package built itself, without the value checks of the
        public constructor (whole numbers, factor products within 2^62: one float pass, about a
        fifth of `MapSpace.sample`'s time). For the samplers, searchers and row selections,
        whose factors are divisors of the bounds per level (or rows of batches already
        checked), so that a dim's product stays within the bounds' product over the levels.
        Shapes are still checked."""
        self = object.__new__(cls)
        _set_frozen(self, temporal, spatial, order, keep)
        _check_shapes(self.temporal, self.spatial, self.order, self.keep)
        return self

    # --- container protocol -----------------------------------------------------------
    def __len__(self) -> int:
        return int(self.temporal.shape[0])

    def __getitem__(self, i: int) -> Mapping:
        return Mapping._trusted(self.temporal[i], self.spatial[i], self.order[i], self.keep[i])

    def __iter__(self) -> Iterator[Mapping]:
        for i in range(len(self)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MappingBatch):
            return NotImplemented
        return _same_arrays(self, other)

    __hash__ = None  # type: ignore[assignment]

    def take(self, index: IntArray | BoolArray | slice) -> MappingBatch:
        """Rows selected by an index array, a boolean mask or a slice."""
        return MappingBatch._trusted(self.temporal[index], self.spatial[index], self.order[index], self.keep[index])

    @staticmethod
    def concat(batches: Sequence[MappingBatch]) -> MappingBatch:
        """Rows of several batches, in order."""
        if not batches:
            raise ValueError("concat needs at least one batch")
        return MappingBatch._trusted(*(np.concatenate([getattr(b, k) for b in batches]) for k in _FIELDS))

    @staticmethod
    def from_mappings(mappings: Sequence[Mapping]) -> MappingBatch:
        """A batch whose rows are the given mappings."""
        if not mappings:
            raise ValueError("from_mappings needs at least one mapping")
        return MappingBatch._trusted(*(np.stack([getattr(m, k) for m in mappings]) for k in _FIELDS))

    # --- shapes and derived arrays ----------------------------------------------------
    @property
    def n_levels(self) -> int:
        return int(self.temporal.shape[1])

    @property
    def n_dims(self) -> int:
        return int(self.temporal.shape[2])

    @property
    def n_tensors(self) -> int:
        return int(self.keep.shape[2])

    def factors(self) -> IntArray:
        """(n, n_levels, n_dims) temporal x spatial X x spatial Y factors per level."""
        return self.temporal * self.spatial[..., 0] * self.spatial[..., 1]

    def tiles(self) -> IntArray:
        """(n, n_levels, n_dims) iterations covered by one instance of each level.

        ``tiles[:, l] = prod_{l' >= l} factors[:, l']`` (a reversed cumulative product).
        """
        return tiles_from_factors(self.factors())

    def spatial_used(self) -> IntArray:
        """(n, n_levels, 2) instances used below each level along X and Y."""
        return np.prod(self.spatial, axis=2)
