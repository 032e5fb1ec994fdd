"""The `Problem` spec: one tensor operation as a perfectly nested loop.

A problem is a set of named loop dimensions with bounds (the iteration space) and a set of
tensors (Timeloop calls them dataspaces). Every coordinate of a tensor is an affine
function of the loop indices with non-negative integer coefficients, e.g. for a convolution
the input row is ``stride*P + dilation*R``. One tensor is the output: it is read, modified
and written, and reduced over every dimension that does not index it.

Canonical loop letters, written down once:

* convolution: ``N`` batch, ``K`` output channels (Timeloop's ``M``), ``C`` input channels,
  ``P`` output rows... Timeloop files keep their own letters (``M`` for output channels);
  accelmap's builders use ``N K C P Q R S`` (``G`` for groups where there is more than one);
* matmul: ``M N K`` (``C[M,N] += A[M,K] * B[K,N]``), ``B`` for the batch of a batched matmul.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, IntArray
from accelmap.errors import SpecError

__all__ = ["Dim", "Term", "Tensor", "TensorRole", "Problem"]


class TensorRole(str, Enum):
    """What a tensor is to the operation; architectures may name tensors by role."""

    INPUT = "input"  # the activation operand (Timeloop's Inputs, matmul A)
    WEIGHT = "weight"  # the parameter operand (Timeloop's Weights, matmul B)
    OUTPUT = "output"  # the read-modify-write result


@dataclass(frozen=True, slots=True, kw_only=True)
class Dim:
    """One loop dimension of the iteration space."""

    name: str
    bound: int

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise SpecError(f"dimension name {self.name!r}; expected a non-empty identifier")
        if not isinstance(self.bound, int) or isinstance(self.bound, bool) or self.bound < 1:
            raise SpecError(
                f"dimension {self.name}: bound = {self.bound!r}; expected an int >= 1"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Term:
    """``coef * dim`` inside one affine tensor coordinate."""

    dim: str
    coef: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.coef, int) or isinstance(self.coef, bool) or self.coef < 1:
            raise SpecError(f"projection term {self.dim}: coef = {self.coef!r}; expected an int >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tensor:
    """One tensor (dataspace).

    ``projection[i]`` is the tuple of terms whose sum is the tensor's i-th coordinate.
    """

    name: str
    projection: tuple[tuple[Term, ...], ...]
    role: TensorRole
    word_bits: int = 16
    # Padding and extents (None: every coordinate the projection reaches exists). Element
    # ``i`` of coordinate ``c`` sits at projected value ``pad[c] + i`` for ``0 <= i <
    # extent[c]``; projected values outside (a convolution's zero padding, or windows past
    # the edge of an input whose output size was rounded up) are not words of the tensor.
    pad: tuple[int, ...] | None = None
    extent: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("tensor name is empty; expected a non-empty string")
        if not self.projection or any(len(c) == 0 for c in self.projection):
            raise SpecError(
                f"tensor {self.name}: projection {self.projection!r}; expected at least one "
                "coordinate, each a non-empty sum of terms"
            )
        if not isinstance(self.word_bits, int) or self.word_bits < 1:
            raise SpecError(f"tensor {self.name}: word_bits = {self.word_bits!r}; expected an int >= 1")
        rank = len(self.projection)
        for key, low in (("pad", 0), ("extent", 1)):
            v = getattr(self, key)
            if v is None:
                continue
            v = tuple(v)
            object.__setattr__(self, key, v)
            if len(v) != rank or any(not isinstance(x, int) or isinstance(x, bool) or x < low for x in v):
                raise SpecError(
                    f"tensor {self.name}: {key} = {list(v)!r}; expected {rank} ints >= {low}, one per "
                    "coordinate of the projection"
                )
        if self.pad is not None and self.extent is None:
            raise SpecError(f"tensor {self.name}: pad without extent; give the tensor's extent per coordinate too")

    @property
    def padded(self) -> bool:
        """Whether some projected values are not words of the tensor (pad/extent given)."""
        return self.extent is not None

    @property
    def is_output(self) -> bool:
        return self.role is TensorRole.OUTPUT

    @property
    def dims(self) -> frozenset[str]:
        """Dimensions that index this tensor (its relevant dims)."""
        return frozenset(t.dim for coord in self.projection for t in coord)


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One layer: loop dimensions, tensors, exactly one output tensor.

    Derived arrays (relevance, coefficients) are computed once here so that cost models
    and the map space do array math only.
    """

    name: str
    dims: tuple[Dim, ...]
    tensors: tuple[Tensor, ...]
    # How many times this exact shape occurs in its network (zoo layers); 1 otherwise.
    repeat: int = 1
    # The bounds of the real iteration space when this problem is a padded iteration of it
    # (`padded_iteration`: imperfect factorization runs ``bounds >= real_bounds``); None when
    # the bounds are the real ones. Words that only the padded iterations reach do not exist.
    real_bounds: tuple[int, ...] | None = None
    # (rank-padded) coefficient table: coef[t, c, d] = coefficient of dim d in coord c of t.
    _coef: IntArray = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        problems: list[str] = []
        names = [d.name for d in self.dims]
        if not self.dims:
            problems.append("no dimensions")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            problems.append(f"duplicate dimension names {dup}")
        tnames = [t.name for t in self.tensors]
        tdup = sorted({n for n in tnames if tnames.count(n) > 1})
        if tdup:
            problems.append(f"duplicate tensor names {tdup}")
        n_out = sum(t.is_output for t in self.tensors)
        if n_out != 1:
            problems.append(f"{n_out} output tensors; expected exactly one (role: output)")
        if len(self.tensors) < 2:
            problems.append(f"{len(self.tensors)} tensors; expected at least one operand and one output")
        for t in self.tensors:
            unknown = sorted(t.dims - set(names))
            if unknown:
                problems.append(
                    f"tensor {t.name} uses unknown dimension(s) {unknown}; known: {names}"
                )
        if not isinstance(self.repeat, int) or self.repeat < 1:
            problems.append(f"repeat = {self.repeat!r}; expected an int >= 1")
        if self.real_bounds is not None:
            rb = tuple(self.real_bounds)
            object.__setattr__(self, "real_bounds", rb)
            if len(rb) != len(self.dims) or any(
                    not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= d.bound
                    for r, d in zip(rb, self.dims, strict=False)):
                problems.append(f"real_bounds = {list(rb)!r}; expected {len(self.dims)} ints, each between 1 and "
                                "its dimension's bound")
        if problems:
            raise SpecError(f"problem {self.name}: " + "; ".join(problems))
        rank = max(len(t.projection) for t in self.tensors)
        coef = np.zeros((len(self.tensors), rank, len(self.dims)), dtype=np.int64)
        index = {n: i for i, n in enumerate(names)}
        for ti, t in enumerate(self.tensors):
            for ci, coord in enumerate(t.projection):
                for term in coord:
                    coef[ti, ci, index[term.dim]] += term.coef
        coef.setflags(write=False)
        object.__setattr__(self, "_coef", coef)

    # --- names and shapes -------------------------------------------------------------
    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    @property
    def tensor_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors)

    @property
    def n_dims(self) -> int:
        return len(self.dims)

    @property
    def n_tensors(self) -> int:
        return len(self.tensors)

    @property
    def bounds(self) -> IntArray:
        """(n_dims,) loop bounds."""
        return np.array([d.bound for d in self.dims], dtype=np.int64)

    @property
    def output_index(self) -> int:
        return next(i for i, t in enumerate(self.tensors) if t.is_output)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the whole operation (product of all bounds)."""
        return math.prod(d.bound for d in self.dims)

    def dim_index(self, name: str) -> int:
        try:
            return self.dim_names.index(name)
        except ValueError:
            raise SpecError(
                f"problem {self.name}: unknown dimension {name!r}; known: {list(self.dim_names)}"
            ) from None

    def tensor_index(self, name_or_role: str) -> int:
        """Index of a tensor named ``name_or_role`` or, failing that, with that role."""
        for i, t in enumerate(self.tensors):
            if t.name == name_or_role:
                return i
        for i, t in enumerate(self.tensors):
            if t.role.value == name_or_role:
                return i
        raise SpecError(
            f"problem {self.name}: no tensor named or with role {name_or_role!r}; "
            f"tensors: {[f'{t.name} ({t.role.value})' for t in self.tensors]}"
        )

    def tensors_matching(self, names_or_roles: frozenset[str] | None) -> BoolArray:
        """(n_tensors,) mask of tensors whose name or role is in the set (None = all)."""
        if names_or_roles is None:
            return np.ones(self.n_tensors, dtype=bool)
        return np.array(
            [t.name in names_or_roles or t.role.value in names_or_roles for t in self.tensors],
            dtype=bool,
        )

    # --- derived arrays ---------------------------------------------------------------
    @property
    def relevance(self) -> BoolArray:
        """(n_tensors, n_dims): True where the dim indexes the tensor."""
        return np.asarray((self._coef > 0).any(axis=1))

    @property
    def coefficients(self) -> IntArray:
        """(n_tensors, max_rank, n_dims) affine coefficients; unused ranks are zero rows."""
        return self._coef

    @property
    def rank_used(self) -> BoolArray:
        """(n_tensors, max_rank): True for coordinates the tensor really has."""
        return np.asarray((self._coef > 0).any(axis=2))

    def footprint(self, tiles: IntArray) -> IntArray:
        """Words of each tensor touched by a tile of the iteration space.

        A coordinate ``sum_d a_d * x_d`` over a box of extents ``t_d`` spans
        ``1 + sum_d a_d (t_d - 1)`` values (the sliding-window halo of a strided or dilated
        convolution: rows = stride*(P-1) + dilation*(R-1) + 1). The footprint is the product
        over coordinates.

        Parameters
        ----------
        tiles
            (..., n_dims) tile extents (>= 1).

        Returns
        -------
        (..., n_tensors) words.
        """
        t = np.asarray(tiles, dtype=np.int64)
        if t.ndim == 0 or t.shape[-1] != self.n_dims:
            raise ValueError(f"footprint: tiles have shape {t.shape}; expected (..., {self.n_dims})")
        # Term by term over the few nonzero coefficients (int64, so the result equals the
        # dense product bit for bit); each dim's extents are made contiguous once.
        lead = t.shape[:-1]
        t = t.reshape(-1, self.n_dims)  # 2-d: wraps on overflow silently, like the dense form
        ext: list[Any] = [None] * self.n_dims
        out = np.ones((t.shape[0], self.n_tensors), dtype=np.int64)
        for ti, rows in enumerate(self._coef):
            prod = None
            for row in rows:
                dims = np.flatnonzero(row)
                if dims.size == 0:
                    continue  # an unused (padding) coordinate spans one value
                span: Any = None
                for d in dims.tolist():
                    if ext[d] is None:
                        ext[d] = t[:, d] - 1
                    term = ext[d] * row[d] if row[d] != 1 else ext[d]
                    span = term + 1 if span is None else span + term
                prod = span if prod is None else prod * span
            if prod is not None:
                out[:, ti] = prod
        return out.reshape(lead + (self.n_tensors,))

    def tensor_sizes(self) -> IntArray:
        """(n_tensors,) words of each whole tensor."""
        return self.footprint(self.bounds)

    # --- padding: the words that exist ---------------------------------------------------
    @property
    def has_padding(self) -> bool:
        """Whether some projected words do not exist: a tensor's pad/extent, or a padded
        iteration space (`real_bounds`)."""
        return self.real_bounds is not None or any(t.padded for t in self.tensors)

    @property
    def real_macs(self) -> int:
        """The MACs of the real iteration space (`macs` unless this is a padded iteration)."""
        return self.macs if self.real_bounds is None else math.prod(self.real_bounds)

    def padded_iteration(self, bounds: IntArray | tuple[int, ...]) -> Problem:
        """This problem run over the padded iteration space ``bounds`` (>= `bounds` per dim).

        Imperfect factorization (a mapping whose factors of dim ``d`` multiply to ``B'_d >=
        B_d``, ceil-divided tiles) executes every point of the box ``B'``; the words its
        padded points reach beyond the real tensors do not exist and are no traffic. The
        result has the bounds ``B'``, the same tensors (a tensor's own pad and extent still
        say which of its words exist) and ``real_bounds = B``: a tensor without pad/extent
        has the words its projection spans over the real space (`existing_fraction`).
        ``bounds`` equal to this problem's bounds return the problem itself; the result is
        cached, so equal ``bounds`` give the same object.
        """
        b = tuple(int(x) for x in np.asarray(bounds, dtype=np.int64).reshape(-1))
        return _padded_iteration(self, b)

    def padded_fractions(self, bounds: IntArray) -> np.ndarray:
        """(G, n_tensors) `existing_fraction` of ``padded_iteration(bounds[g])`` for each row of
        ``bounds`` (G, n_dims), computed without building those problems (the same numbers,
        bit for bit: a model evaluating many padded iterations at once reads them here)."""
        b = np.asarray(bounds, dtype=np.int64).reshape(-1, self.n_dims)
        real = np.array(self.real_bounds if self.real_bounds is not None else self.bounds, dtype=np.int64)
        span = self.footprint(b)  # (G, T)
        real_span = self.footprint(real)
        out = np.ones(span.shape)
        for ti, t in enumerate(self.tensors):
            if t.padded:
                exist = np.ones(len(b), dtype=np.int64)
                for ci in range(len(t.projection)):  # each coordinate's count per distinct bounds of its dims
                    row = self._coef[ti, ci]
                    dims = np.flatnonzero(row)
                    lo = 0 if t.pad is None else t.pad[ci]
                    coefs = tuple(int(row[d]) for d in dims)
                    uniq, inv = np.unique(b[:, dims], axis=0, return_inverse=True)
                    counts = np.array([_count_values(coefs, tuple(int(v) for v in u), lo, lo + t.extent[ci])  # type: ignore[index]
                                       for u in uniq], dtype=np.int64)
                    exist *= counts[inv.reshape(-1)]
                out[:, ti] = exist.astype(np.float64) / span[:, ti].astype(np.float64)
            else:
                out[:, ti] = float(real_span[ti]) / span[:, ti].astype(np.float64)
        return out

    def existing_words(self, bounds: IntArray | None = None) -> IntArray:
        """(n_tensors,) words of each tensor a box of the iteration space (``bounds``,
        default the whole space, from the origin) touches that exist.

        Per coordinate, the distinct projected values the box reaches are enumerated (exact
        for strided coordinates, where the span overcounts) and those inside
        ``[pad, pad + extent)`` counted; the tensor's words are the product over
        coordinates. Unpadded tensors count every distinct value."""
        b = self.bounds if bounds is None else np.asarray(bounds, dtype=np.int64)
        out = np.ones(self.n_tensors, dtype=np.int64)
        real = None if self.real_bounds is None else np.minimum(b, np.array(self.real_bounds, dtype=np.int64))
        for ti, t in enumerate(self.tensors):
            for ci in range(len(t.projection)):
                row = self._coef[ti, ci]
                dims = np.flatnonzero(row)
                lo, hi = 0, -1  # every value
                if t.extent is not None:
                    lo = 0 if t.pad is None else t.pad[ci]
                    hi = lo + t.extent[ci]
                elif real is not None:  # a padded iteration: the span over the real space exists
                    hi = 1 + int((row * (real - 1)).sum())
                out[ti] *= _count_values(tuple(int(row[d]) for d in dims), tuple(int(b[d]) for d in dims), lo, hi)
        return out

    def existing_fraction(self) -> np.ndarray:
        """(n_tensors,) words that exist over the words the projections span, for the whole
        iteration space (1.0 for unpadded tensors). Models that count tiles by their span
        scale a padded tensor's traffic by it (`accelmap.costmodels.loopnest`)."""
        if not self.has_padding:
            return np.ones(self.n_tensors)
        return _existing_fraction(self).copy()

    def with_bounds(self, **bounds: int) -> Problem:
        """A copy with some dimension bounds changed (e.g. a different batch size)."""
        unknown = sorted(set(bounds) - set(self.dim_names))
        if unknown:
            raise SpecError(f"problem {self.name}: unknown dimension(s) {unknown}")
        dims = tuple(Dim(name=d.name, bound=bounds.get(d.name, d.bound)) for d in self.dims)
        return Problem(name=self.name, dims=dims, tensors=self.tensors, repeat=self.repeat)

    def describe(self) -> str:
        """One line: name, dims with bounds, MACs."""
        dims = " ".join(f"{d.name}={d.bound}" for d in self.dims)
        return f"{self.name}: {dims}  ({self.macs:,} MACs)"


@functools.lru_cache(maxsize=4096)
def _count_values(coefs: tuple[int, ...], bounds: tuple[int, ...], lo: int, hi: int) -> int:
    """Distinct values of ``sum_i coefs[i] * x_i`` over ``0 <= x_i < bounds[i]`` in ``[lo, hi)``
    (``hi < 0``: no upper limit). Cached: padded iterations share most coordinates."""
    vals = np.zeros(1, dtype=np.int64)
    for a, n in zip(coefs, bounds, strict=True):
        if hi >= 0:  # terms are >= 0: an index whose own term reaches hi adds no value below it
            n = min(n, -(-hi // a))
        vals = np.unique(np.add.outer(vals, a * np.arange(n, dtype=np.int64)).ravel())
    keep = vals >= lo
    if hi >= 0:
        keep &= vals < hi
    return int(keep.sum())


@functools.lru_cache(maxsize=4096)
def _existing_fraction(problem: Problem) -> np.ndarray:
    """`Problem.existing_fraction`, computed once per problem (models call it per batch)."""
    frac = np.ones(problem.n_tensors)
    exist, span = problem.existing_words(), problem.tensor_sizes()
    real_span = None if problem.real_bounds is None else problem.footprint(np.array(problem.real_bounds))
    for ti, t in enumerate(problem.tensors):
        if t.padded:
            frac[ti] = float(exist[ti]) / float(span[ti])
        elif real_span is not None:
            # a tensor without pad/extent has every word its projection spans (the model's
            # count of an unpadded tensor, strided holes included): over a padded iteration,
            # the span over the real space
            frac[ti] = float(real_span[ti]) / float(span[ti])
    return frac


@functools.lru_cache(maxsize=1024)
def _padded_iteration(problem: Problem, bounds: tuple[int, ...]) -> Problem:
    """`Problem.padded_iteration`, one object per (problem, bounds)."""
    own = tuple(int(b) for b in problem.bounds)
    if len(bounds) != len(own) or any(b < o for b, o in zip(bounds, own, strict=False)):
        raise SpecError(f"problem {problem.name}: padded iteration bounds {list(bounds)}; expected "
                        f"{len(own)} ints, each at least its dimension's bound {list(own)}")
    if bounds == own:
        return problem
    real = problem.real_bounds if problem.real_bounds is not None else own
    dims = tuple(Dim(name=d.name, bound=b) for d, b in zip(problem.dims, bounds, strict=True))
    return Problem(name=problem.name, dims=dims, tensors=problem.tensors, repeat=problem.repeat, real_bounds=real)
