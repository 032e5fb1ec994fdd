"""SCALE-Sim's own mappings and the dataflow sub-spaces a systolic search covers.

`scalesim_mapping` builds the mapping SCALE-Sim itself runs for a dataflow (the reference
point of every validation against it); `systolic_variants` splits the map space into one
sub-space per dataflow and row class, and `variant_seeds` seeds each with SCALE-Sim's mapping
of it and its nearest chunkings. They read the model's types (`accelmap.costmodels.
systolic_layout`: the GEMM classes, `Dataflow`, `systolic_layout`); the counting rules live in
`accelmap.costmodels.systolic`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accelmap._typing import BoolArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels.systolic_layout import (
    _DEFAULT_AXES,
    _K,
    _M,
    _N,
    _STATIONARY,
    Dataflow,
    SystolicLayout,
    systolic_layout,
)
from accelmap.errors import SpecError
from accelmap.mapper.constraints import Constraints, KeepRule, SpatialRule
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem

__all__ = ["scalesim_mapping", "SystolicVariant", "systolic_variants", "variant_seeds"]


def scalesim_mapping(problem: Problem, arch: Arch, dataflow: Dataflow | str) -> MappingBatch:
    """SCALE-Sim's mapping of ``problem`` on a systolic ``arch`` for one dataflow (one row).

    Rows take the dataflow's row class, columns its column class (module docstring table),
    as many of each as the array has (``min(R, Sr)`` rows, ``min(C, Sc)`` columns): the
    whole count goes on the class's innermost dimension that is larger than 1, padded past
    its bound when the array is larger (SCALE-Sim's flattened im2col chunks), so the mapping
    is legal with padding allowed. Every temporal loop sits at DRAM; DRAM keeps every
    tensor, each SRAM its operand, the PE registers the stationary one.

    Raises
    ------
    SpecError
        The arch or problem is not a systolic shape (the message lists why).
    """
    df = Dataflow.parse(dataflow) if isinstance(dataflow, str) else Dataflow(dataflow)
    layout, msgs = systolic_layout(problem, arch)
    if layout is None:
        raise SpecError("not a systolic shape: " + "; ".join(msgs))
    L, D = arch.n_levels, problem.n_dims
    bounds = [int(b) for b in problem.bounds]
    spatial = np.ones((L, D, 2), dtype=np.int64)
    row_c, col_c = _DEFAULT_AXES[df]
    for axis, cls, extent in ((1, row_c, layout.rows), (0, col_c, layout.cols)):
        members = [d for d in range(D) if layout.dim_class[d] == cls]
        size = math.prod(bounds[d] for d in members) if members else 1
        if size <= extent:
            for d in members:
                spatial[layout.array_level, d, axis] = bounds[d]
        else:
            inner = [d for d in members if bounds[d] > 1][-1]
            spatial[layout.array_level, inner, axis] = extent
    temporal = np.ones((L, D), dtype=np.int64)
    per_dim = spatial.prod(axis=(0, 2))
    for d in range(D):
        temporal[0, d] = -(-bounds[d] // int(per_dim[d]))
    order, keep = _native_order_keep(problem, arch, layout, df)
    return Mapping(temporal=temporal, spatial=spatial, order=order, keep=keep).as_batch()


def _native_order_keep(problem: Problem, arch: Arch, layout: SystolicLayout, df: Dataflow) -> tuple[IntArray, BoolArray]:
    """Loop orders (L, D) and keep bits (L, T) of SCALE-Sim's native mapping: dim order
    everywhere but SCALE-Sim's im2col order at the array level; DRAM keeps every tensor,
    each SRAM its operand, the PE registers the dataflow's stationary operand."""
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    order = np.tile(np.arange(D, dtype=np.int64), (L, 1))
    order[layout.array_level] = _im2col_order(problem, layout)
    keep = np.zeros((L, T), dtype=bool)
    keep[0, :] = True
    for o in range(3):
        keep[layout.sram[o], layout.tensor[o]] = True
    keep[layout.pe_level, layout.tensor[_STATIONARY[df]]] = True
    return order, keep


def _im2col_order(problem: Problem, layout: SystolicLayout) -> IntArray:
    """SCALE-Sim's flattening order (outermost first) of each class, as one permutation.

    Its operand matrices (``operand_matrix.py``) number ofmap pixels row-major and the
    convolution window in the ifmap's row, column, channel layout: window dims that slide
    with a pixel dim (``R``, ``S``) outside, the others (channels) innermost.
    """
    t_in = layout.tensor[0]
    coef = problem.coefficients[t_in]
    sliding = [bool(((coef[:, d] > 0) & ((coef > 0).sum(axis=1) > 1)).any()) for d in range(problem.n_dims)]
    dims = list(range(problem.n_dims))

    def key(d: int) -> tuple[int, int, int]:
        c = layout.dim_class[d]
        return (c if c >= 0 else 9, 0 if (c == _K and sliding[d]) else 1, d)

    return np.array(sorted(dims, key=key), dtype=np.int64)


# --- searching a systolic array ------------------------------------------------------------
# The model accepts a mapping only when each array axis unrolls dims of one GEMM class and
# the PE registers (or, failing that, the two classes on the array) name a dataflow. A
# MapSpace's rules are per dim, so it cannot say "one class per axis" for all dataflows at
# once; it can for one dataflow and one choice of which class sits on the rows. There are
# six such choices (three dataflows, two ways round), and the search covers them as six
# sub-spaces in which (almost) every mapping is one the model accepts.

# The dims of a GEMM class, as symbols `MapSpace` resolves against any problem: a class is
# named by the tensor its dims leave out (m: weight, n: input, k: output; module docstring).
_CLASS_LEFT_OUT = {_M: 1, _N: 0, _K: 2}  # class -> operand index (ifmap, filter, ofmap)
_CLASS_NAMES = {_M: "m", _N: "n", _K: "k"}


@dataclass(frozen=True, slots=True)
class SystolicVariant:
    """One dataflow with one choice of which GEMM class sits on the rows.

    ``constraints`` pins the PE registers to the stationary operand and lets the array
    unroll only the row class's dims on Y and the column class's dims on X; layered over
    the arch's own constraints it makes a sub-space the model accepts (almost) whole.
    """

    dataflow: Dataflow
    row_class: int
    col_class: int
    constraints: Constraints

    @property
    def label(self) -> str:
        """E.g. ``"ws k-rows n-cols"``."""
        return (f"{self.dataflow.name.lower()} {_CLASS_NAMES[self.row_class]}-rows "
                f"{_CLASS_NAMES[self.col_class]}-cols")


def systolic_variants(problem: Problem, arch: Arch) -> list[SystolicVariant]:
    """The six (dataflow, row class) sub-spaces of ``problem`` on a systolic ``arch``.

    Empty when the pair is not a systolic shape (`systolic_layout` says why). SCALE-Sim's
    own assignment of each dataflow (module docstring table) comes first.
    """
    layout, _ = systolic_layout(problem, arch)
    if layout is None:
        return []
    names = [problem.tensors[t].name for t in layout.tensor]
    pe = arch.level_names[layout.pe_level]
    array = arch.level_names[layout.array_level]
    out: list[SystolicVariant] = []
    for df in Dataflow:
        stat = _STATIONARY[df]
        keep = (
            KeepRule(level=pe, tensor=names[stat], keep=True),
            *(KeepRule(level=pe, tensor=names[o], keep=False) for o in range(3) if o != stat),
        )
        row_c, col_c = _DEFAULT_AXES[df]
        for rc, cc in ((row_c, col_c), (col_c, row_c)):
            spatial = SpatialRule(level=array,
                                  y=frozenset({f"@irrelevant:{names[_CLASS_LEFT_OUT[rc]]}"}),
                                  x=frozenset({f"@irrelevant:{names[_CLASS_LEFT_OUT[cc]]}"}))
            cons = Constraints(keep=keep, spatial=(spatial,), allow_padding=True,
                               source=f"systolic {df.name.lower()} {_CLASS_NAMES[rc]}-rows {_CLASS_NAMES[cc]}-cols")
            out.append(SystolicVariant(dataflow=df, row_class=rc, col_class=cc, constraints=cons))
    return out


def _axis_options(bounds: list[int], dims: list[int], fanout: int, size: int,
                  n_best: int) -> list[dict[int, int]]:
    """Per-dim unrolling of one class on one array axis, best ``n_best`` first.

    Every product up to ``fanout`` of factors ``f`` that are minimal covers of their dim's
    bound ``b`` with ``ceil(b / f)`` temporal steps (``(f - 1) * ceil(b / f) < b``, the
    padded factorizations a MapSpace holds), one entry per product, ranked by folds
    ``ceil(size / product)`` and then by the larger product: SCALE-Sim's
    ``min(fanout, size)`` where the bounds allow it, else the nearest they reach.
    """
    states: dict[int, dict[int, int]] = {1: {}}
    for d in dims:
        nxt: dict[int, dict[int, int]] = {}
        for prod, asg in states.items():
            for f in range(1, bounds[d] + 1):
                q = prod * f
                if q > fanout:
                    break
                if (f - 1) * -(-bounds[d] // f) < bounds[d] and q not in nxt:
                    nxt[q] = {**asg, d: f}
        states = nxt
    ranked = sorted(states, key=lambda q: (-(-size // q), -q))
    return [states[q] for q in ranked[:n_best]]


def variant_seeds(problem: Problem, arch: Arch, variant: SystolicVariant, n_best: int = 3) -> MappingBatch:
    """SCALE-Sim's mapping of ``variant`` written as points of its sub-space (a few rows).

    `scalesim_mapping` pads a class's innermost dim past its bound to fill the array,
    which is no minimal cover and so no point of a MapSpace; the model reads only the
    product of an axis's factors, so the same fold count is reached by spreading the
    count over the class's dims as minimal covers (8 of 14 x 14 pixels as ``P x Q = 4 x
    2``, ``P`` padded to 16). The ``n_best`` best products per axis (fewest folds, then most rows/columns)
    give up to ``n_best**2`` rows; every temporal loop at DRAM, SCALE-Sim's im2col order
    at the array level, DRAM keeping everything, each SRAM its operand and the PE
    registers the stationary operand.

    Raises
    ------
    SpecError
        The arch or problem is not a systolic shape.
    """
    layout, msgs = systolic_layout(problem, arch)
    if layout is None:
        raise SpecError("not a systolic shape: " + "; ".join(msgs))
    L, D = arch.n_levels, problem.n_dims
    bounds = [int(b) for b in problem.bounds]
    per_axis = []
    for cls, fanout in ((variant.row_class, layout.rows), (variant.col_class, layout.cols)):
        dims = [d for d in range(D) if layout.dim_class[d] == cls and bounds[d] > 1]
        per_axis.append(_axis_options(bounds, dims, fanout, layout.class_size[cls], n_best))
    order, keep = _native_order_keep(problem, arch, layout, variant.dataflow)
    rows: list[Mapping] = []
    for ys in per_axis[0]:
        for xs in per_axis[1]:
            spatial = np.ones((L, D, 2), dtype=np.int64)
            for d, f in ys.items():
                spatial[layout.array_level, d, 1] = f
            for d, f in xs.items():
                spatial[layout.array_level, d, 0] = f
            temporal = np.ones((L, D), dtype=np.int64)
            temporal[0] = -(-np.array(bounds) // spatial[layout.array_level].prod(axis=1))
            rows.append(Mapping(temporal=temporal, spatial=spatial, order=order.copy(), keep=keep.copy()))
    return MappingBatch.concat([r.as_batch() for r in rows])
