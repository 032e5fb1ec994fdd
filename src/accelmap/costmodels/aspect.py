"""The ``aspect`` cost model: MAESTRO-class data-centric analysis of a PE array whose shape
(cluster sizes, aspect ratio) is a variable.

The model follows the data-centric cost model of Kwon et al., "Understanding Reuse,
Performance, and Hardware Cost of DNN Dataflows: A Data-Centric Approach" (MICRO 2019) and
"MAESTRO: A Data-Centric Approach to Understand Reuse, Performance, and Hardware Cost of DNN
Mappings" (IEEE Micro 2020). A mapping is a list of *cluster levels*; each level has
directives (`Directive`): ``SpatialMap(size, offset) D`` spreads ``D`` over the sub-clusters
of the level, ``TemporalMap(size, offset) D`` steps ``D`` over time, directive order is loop
order (outer first). For every level the analysis

1. classifies each directive's iterations into an *init*, a *steady* and an *edge* state
   (paper Sec. 4, "iteration cases"), and enumerates their combinations with occurrence
   counts;
2. per case, derives each tensor's ingress (operands) and egress (outputs) traffic from the
   mapped, unique (new) and reused elements of every dimension (temporal reuse: only the
   innermost changing dimension brings new data; spatial reuse: a tensor not indexed by the
   spatially mapped dimension is multicast, one indexed by it is unicast per sub-cluster);
3. derives per-case delays: NoC ``hops x hop_latency + ceil(traffic / bandwidth) - 1``
   (paper Eq. for the outstanding delay), compute = the sub-cluster's runtime (recursively)
   or, at the PE level, the number of partial sums per PE; with double buffering a
   steady case costs ``max(ingress, compute, egress)`` and the all-init case ``ingress +
   compute``; at the top level an off-chip delay (the L2 tile over the off-chip bandwidth)
   also bounds every case;
4. sums delays and buffer accesses over cases; L1 (per PE) and L2 (shared) requirements
   are twice (double buffering) the per-PE mapped volume and the first case's traffic.

The counting rules, edge conventions and quirks are chosen to reproduce the reference tool
(MAESTRO at commit 4eb08d17) on its own mapping files; `docs/aspect.md` documents them and
`docs/validation.md` lists where and why the numbers differ.

Two entry points:

* `analyze` evaluates one `DirectiveMapping` (a MAESTRO layer) and returns an
  `AspectResult` in MAESTRO's naming (this is what ``accelmap evaluate --maestro-*`` prints);
* `AspectModel` is the `CostModel` plugin for accelmap `MappingBatch` es: a mapping's
  directive form (`directives_from_mapping`) is analysed with numpy closed forms over the
  whole batch where it has no edge tiles, and with `analyze` otherwise; `evaluate_one` is
  always `analyze` (the scalar reference).

The PE-array shape is a variable: `shapes` lists the candidates, `arch_with_shape` builds
the arch, and `accelmap.search.shapes` searches shape and mapping together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import ClassVar

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.costmodels.base import Metrics
from accelmap.errors import SpecError
from accelmap.mapper.check import Reason, check_batch
from accelmap.mapper.constraints import Constraints
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem
from accelmap.workloads.structure import DimRole, ProblemKind, recognize, require_kind

__all__ = [
    "DirectiveKind",
    "Directive",
    "ClusterDirective",
    "MaestroLayer",
    "MaestroHardware",
    "DirectiveMapping",
    "AspectResult",
    "analyze",
    "AspectModel",
    "AspectView",
    "aspect_view",
    "directives_from_mapping",
    "directive_form",
    "aspect_constraints",
    "shapes",
    "arch_with_shape",
    "L1_ENERGY_PER_ACCESS_X_MAC",
    "L2_ENERGY_PER_ACCESS_X_MAC",
]

# Energy of one buffer access in multiples of one MAC's energy (MAESTRO's defaults, from
# its 28 nm SRAM characterization: L2 18.61, L1 1.68).
L2_ENERGY_PER_ACCESS_X_MAC = 18.61
L1_ENERGY_PER_ACCESS_X_MAC = 1.68


class DirectiveKind(str, Enum):
    SPATIAL = "SpatialMap"
    TEMPORAL = "TemporalMap"


@dataclass(frozen=True, slots=True)
class Directive:
    """``SpatialMap(size, offset) dim`` or ``TemporalMap(size, offset) dim``.

    ``size`` is the extent of ``dim`` mapped to one unit (sub-cluster or time step) and
    ``offset`` how far the next unit (or step) starts: ``offset < size`` is a sliding
    window (the overlap is reused), ``offset == size`` a plain tiling.
    """

    kind: DirectiveKind
    dim: str
    size: int
    offset: int

    def __str__(self) -> str:
        return f"{self.kind.value}({self.size},{self.offset}) {self.dim};"


@dataclass(frozen=True, slots=True)
class ClusterDirective:
    """``Cluster(size, P)``: the directives after it describe the inside of a group of
    ``size`` units."""

    size: int

    def __str__(self) -> str:
        return f"Cluster({self.size},P);"


@dataclass(frozen=True, slots=True, kw_only=True)
class MaestroLayer:
    """A layer in MAESTRO's terms: ``dims`` K C R S Y X (Y, X = *input* rows and columns;
    N optional), outer ``stride`` per input dim, and the layer ``kind`` (CONV or DSCONV).

    MAESTRO models no padding: output rows ``Y' = (Y - R) / stride + 1``.
    """

    name: str
    kind: str  # "CONV" or "DSCONV"
    dims: tuple[tuple[str, int], ...]
    stride_y: int = 1
    stride_x: int = 1

    def dim(self, name: str) -> int:
        for n, v in self.dims:
            if n == name:
                return v
        raise SpecError(f"layer {self.name}: no dimension {name!r}; dimensions: {[n for n, _ in self.dims]}")

    @property
    def dim_dict(self) -> dict[str, int]:
        return dict(self.dims)

    def output_rows(self) -> int:
        return (self.dim("Y") - self.dim("R")) // self.stride_y + 1

    def output_cols(self) -> int:
        return (self.dim("X") - self.dim("S")) // self.stride_x + 1

    def analytic_macs(self) -> int:
        """MACs of the layer (no padding): K*C*R*S*Y'*X' (K = 1 for depthwise), times N."""
        d = self.dim_dict
        k = 1 if self.kind == "DSCONV" else d.get("K", 1)
        return d.get("N", 1) * k * d["C"] * d["R"] * d["S"] * self.output_rows() * self.output_cols()

    def tensor_vars(self) -> dict[str, tuple[str, ...]]:
        """Dimensions indexing each tensor, in MAESTRO's coupling (Y, X are input dims)."""
        batch = ("N",) if "N" in self.dim_dict else ()
        if self.kind == "DSCONV":
            return {"input": (*batch, "C", "Y", "X"), "filter": ("C", "R", "S"), "output": (*batch, "C", "Y", "X")}
        return {"input": (*batch, "C", "Y", "X"), "filter": ("K", "C", "R", "S"), "output": (*batch, "K", "Y", "X")}


@dataclass(frozen=True, slots=True, kw_only=True)
class MaestroHardware:
    """MAESTRO's hardware file: PE count, buffer sizes (elements; they only warn), NoC and
    off-chip bandwidth (elements per cycle), NoC hop latency (cycles), SIMD lanes per PE."""

    num_pes: int
    l1_size: int | None = None
    l2_size: int | None = None
    noc_bw: int = 1000
    offchip_bw: int = 50
    noc_hop_latency: int = 1
    noc_hops: int = 1
    simd_lanes: int = 1

    def __post_init__(self) -> None:
        for key in ("num_pes", "noc_bw", "offchip_bw", "noc_hop_latency", "noc_hops", "simd_lanes"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"hardware.{key} = {v!r}; expected an int >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectiveMapping:
    """One layer and its dataflow: directives and clusters, outer first, sizes resolved."""

    layer: MaestroLayer
    directives: tuple[Directive | ClusterDirective, ...]

    def render(self) -> str:
        return "\n".join(str(d) for d in self.directives)


@dataclass(frozen=True, slots=True, kw_only=True)
class AspectResult:
    """Cost of one layer in MAESTRO's naming (counts in elements, delays in cycles).

    ``tensors[name][key]`` for name in input / filter / output and key in
    ``l1_read l1_write l2_read l2_write l1_size_req l2_size_req``.
    """

    layer: str
    runtime_cycles: int
    num_macs: int
    l1_size_req: int
    l2_size_req: int
    tensors: dict[str, dict[str, int]]
    noc_bw_req_peak: int
    offchip_bw_req: int
    avg_utilized_pes: float
    num_pes_used: int
    ingress_delay: tuple[int, int, float]  # min, max, avg
    egress_delay: tuple[int, int, float]
    computation_delay: tuple[int, int, float]

    @property
    def energy_x_mac(self) -> float:
        """Total energy in multiples of one MAC: (L2 rd+wr) 18.61 + (L1 rd+wr) 1.68 + MACs."""
        l2 = sum(t["l2_read"] + t["l2_write"] for t in self.tensors.values())
        l1 = sum(t["l1_read"] + t["l1_write"] for t in self.tensors.values())
        return l2 * L2_ENERGY_PER_ACCESS_X_MAC + l1 * L1_ENERGY_PER_ACCESS_X_MAC + self.num_macs

    def as_dict(self) -> dict[str, object]:
        return {
            "layer": self.layer,
            "runtime_cycles": self.runtime_cycles,
            "num_macs": self.num_macs,
            "l1_size_req": self.l1_size_req,
            "l2_size_req": self.l2_size_req,
            "energy_total_xMAC": self.energy_x_mac,
            "noc_bw_req_peak": self.noc_bw_req_peak,
            "offchip_bw_req": self.offchip_bw_req,
            "avg_utilized_pes": self.avg_utilized_pes,
            "tensors": {k: dict(v) for k, v in self.tensors.items()},
        }


# ----------------------------------------------------------------------------------------
# Cluster construction (the directive list -> levels, outer first)
# ----------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Dir:
    """A mutable working copy of a directive inside one level."""

    spatial: bool
    dim: str
    size: int
    ofs: int


@dataclass(slots=True)
class _Level:
    dataflow: list[_Dir]
    dims: dict[str, int]  # static dims of the level (the upper level's mapped sizes)
    n_sub: int  # sub-clusters below this level
    # filled by _prepare
    n_edge_sub: int = 1
    mapped: dict[str, int] = field(default_factory=dict)
    unique: dict[str, int] = field(default_factory=dict)
    mapped_edge: dict[str, int] = field(default_factory=dict)
    unique_edge: dict[str, int] = field(default_factory=dict)


_OVERLAP = {"Y": "R", "X": "S"}  # reference (input) dim -> sliding (filter) dim
_OUT_OF = {"Y": "Y'", "X": "X'"}


def _build_levels(mapping: DirectiveMapping, num_pes: int) -> list[_Level]:
    layer = mapping.layer
    tvars = layer.tensor_vars()
    operand_vars = sorted(set(tvars["input"]) | set(tvars["filter"]))
    full = dict(layer.dims)
    full["Y'"] = full["Y"] - full["R"] + 1
    full["X'"] = full["X"] - full["S"] + 1
    strides = {"Y": layer.stride_y, "X": layer.stride_x}

    sizes = [d.size for d in mapping.directives if isinstance(d, ClusterDirective)]
    uppermost = math.prod(sizes) if sizes else 1
    innermost = sizes[-1] if sizes else num_pes
    if uppermost > num_pes:
        raise SpecError(
            f"layer {layer.name}: clusters {sizes} need {uppermost} PEs; the hardware has {num_pes}"
        )
    n_units = uppermost * (num_pes // uppermost)
    program: list[Directive | ClusterDirective] = [*mapping.directives, ClusterDirective(innermost)]

    levels: list[_Level] = []
    cur: list[_Dir] = []
    prev: list[_Dir] | None = None
    dims = full
    last_size = n_units
    for d in program:
        if isinstance(d, Directive):
            cur.append(_Dir(d.kind is DirectiveKind.SPATIAL, d.dim, d.size, d.offset))
            continue
        is_top = not levels
        _to_input_centric(cur, dims)
        if prev is not None:  # directives of the level above that this one omits are inherited
            for up in prev:
                if not any(x.dim == up.dim for x in cur):
                    cur.insert(0, _Dir(False, up.dim, up.size, up.ofs))
        for var in operand_vars:  # dims still missing are unrolled at once
            if var in dims and not any(x.dim == var for x in cur):
                cur.append(_Dir(False, var, dims[var], dims[var]))
        _apply_outer_stride(is_top, cur, full, strides)
        n_sub = n_units // uppermost if is_top else last_size
        spatial = [x for x in cur if x.spatial]
        if not spatial:
            raise SpecError(
                f"layer {layer.name}: cluster level {len(levels)} has no SpatialMap; "
                "every level needs exactly one or two SpatialMap directives"
            )
        if len(spatial) > 2:
            raise SpecError(f"layer {layer.name}: cluster level {len(levels)} has {len(spatial)} SpatialMaps; at most 2")
        level = _Level(dataflow=cur, dims=dims, n_sub=n_sub)
        _prepare(level)
        levels.append(level)
        last_size = d.size
        nxt = {}
        for var in operand_vars:
            dd = next(x for x in cur if x.dim == var)
            nxt[var] = min(dd.size, dims[var])
        dims = nxt
        prev = cur
        cur = []
    return levels


def _to_input_centric(cur: list[_Dir], dims: dict[str, int]) -> None:
    """Output-row/column directives (Y', X') become input ones: size + filter size - 1."""
    for out, inp, filt in (("X'", "X", "S"), ("Y'", "Y", "R")):
        if any(x.dim == inp for x in cur):
            continue
        for x in cur:
            if x.dim == out:
                f = next((y.size for y in cur if y.dim == filt), dims.get(filt, 1))
                x.dim = inp
                x.size = x.size + f - 1


def _apply_outer_stride(is_top: bool, cur: list[_Dir], full: dict[str, int], strides: dict[str, int]) -> None:
    """A strided convolution: a window of input rows holding whole filters covers
    ``(size + stride - R) // stride`` outputs; its size and offset are rescaled to them."""
    for x in cur:
        stride = strides.get(x.dim, 1)
        if x.dim not in _OVERLAP or stride == 1:
            continue
        r = full[_OVERLAP[x.dim]]
        if x.size >= r:
            n_out = (x.size + stride - r) // stride
            new_size = n_out * min(stride, r) + max(r - stride, 0)
            new_ofs = n_out * stride
            if not is_top and r < stride:
                new_ofs = n_out * r
            x.size, x.ofs = new_size, new_ofs


def _prepare(level: _Level) -> None:
    """Spatial edge clusters and per-dimension mapped / unique element counts."""
    dims = level.dims
    sp = next(x for x in level.dataflow if x.spatial)
    size, ofs, n = sp.size, sp.ofs, level.n_sub
    dim_sz = dims[sp.dim]
    full_cov = ofs * (n - 1) + size
    if dim_sz > full_cov:
        steady = ((dim_sz - size) // ofs + 1) // n - 1
        remaining = dim_sz - (steady + 1) * ofs * n
        n_edge = 1 if remaining < size else (remaining - size) // ofs + 1
    else:
        if dim_sz > size:
            n_edge = (dim_sz - size) // ofs + 1
            if ofs * (n_edge - 1) + size < dim_sz:
                n_edge += 1
        else:
            n_edge = 1
    if dim_sz <= size:
        n_edge = 1
    level.n_edge_sub = n_edge

    for x in level.dataflow:
        d = dims[x.dim]
        steady = max((d - x.size) // x.ofs, 0)
        has_edge = (steady * x.ofs + x.size < d) or (x.size > d)
        level.mapped[x.dim] = x.size
        level.unique[x.dim] = min(x.size, x.ofs)
        if not x.spatial and d <= x.size:  # fully unrolled in time: nothing new ever
            level.unique[x.dim] = 0
        edge_size = d - (steady + 1) * x.ofs
        edge_size = d if edge_size < 0 else edge_size
        out_of_bound = x.size - edge_size
        level.mapped_edge[x.dim] = edge_size if has_edge else x.size
        level.unique_edge[x.dim] = max(x.ofs - out_of_bound, 0)
    for x in level.dataflow:
        if x.dim in _OVERLAP:
            out = _OUT_OF[x.dim]
            r = _OVERLAP[x.dim]
            level.mapped[out] = level.mapped[x.dim] - level.mapped[r] + 1
            level.unique[out] = min(x.ofs, x.size)
            level.mapped_edge[out] = level.mapped_edge[x.dim] - level.mapped_edge[r] + 1
            level.unique_edge[out] = min(x.ofs, level.mapped_edge[out])


# ----------------------------------------------------------------------------------------
# Iteration cases
# ----------------------------------------------------------------------------------------

_INIT, _STEADY, _EDGE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class _State:
    pos: int
    occ: int
    unrolled: bool
    init_edge: bool
    sp_edge_edge: bool = False

    @property
    def is_edge(self) -> bool:
        return self.pos == _EDGE or self.init_edge


def _dim_states(level: _Level, dims: dict[str, int]) -> list[list[_State]]:
    out = []
    for x in level.dataflow:
        d, size, ofs = dims[x.dim], x.size, x.ofs
        states: list[_State] = []
        if not x.spatial:
            states.append(_State(_INIT, 1, d <= size, d < size))
            n_steady = (d - size) // ofs
            if size < d and n_steady > 0:
                states.append(_State(_STEADY, n_steady, False, False))
            if not d < size and n_steady * ofs + size < d:
                states.append(_State(_EDGE, 1, False, False))
        else:
            n = level.n_sub
            cover = size + ofs * (n - 1)
            init_unroll, init_edge = d <= cover, d < cover
            states.append(_State(_INIT, 1, init_unroll, init_edge, init_edge))
            n_steady = ((d - size) // ofs + 1) // n - 1
            has_edge = (not init_unroll) and (
                (n_steady + 1) * (ofs * n) + cover > d and n_steady * (ofs * n) + cover != d
            )
            if cover < d and n_steady > 0:
                states.append(_State(_STEADY, n_steady, False, False))
            remaining = d - (n_steady + 1) * ofs * n
            n_active = 1 if remaining < size else (remaining - size) // ofs + 1
            sp_ee = (n_active - 1) * ofs + size < remaining
            if not init_edge and has_edge:
                states.append(_State(_EDGE, 1, False, False, sp_ee))
        out.append(states)
    return out


def _cases(per_dim: list[list[_State]]) -> list[tuple[tuple[_State, ...], int]]:
    """Every combination of per-directive states, with its number of occurrences.

    The visiting order matches the reference tool's (the first case is all-init; the
    buffer requirements are taken from it).
    """
    n = len(per_dim)
    total = math.prod(len(s) for s in per_dim)
    freq = [1] * n
    acc = 1
    for i in range(n - 1, -1, -1):
        freq[i] = acc
        acc *= len(per_dim[i])
    counter = [0] * n
    out = []
    for case in range(total):
        states = []
        occ = 1
        for i in range(n):
            s = per_dim[i][counter[i]]
            states.append(s)
            occ *= s.occ
            if case % freq[i] == 0:
                counter[i] = 0 if counter[i] + 1 == len(per_dim[i]) else counter[i] + 1
        out.append((tuple(states), occ))
    return out


# ----------------------------------------------------------------------------------------
# Reuse analysis of one level under one case
# ----------------------------------------------------------------------------------------

class _Reuse:
    def __init__(self, level: _Level, states: tuple[_State, ...]) -> None:
        self.lv = level
        self.df = level.dataflow
        self.st = {x.dim: s for x, s in zip(self.df, states, strict=True)}
        self.idx = {x.dim: i for i, x in enumerate(self.df)}

    def _sp_state(self, vars_: Sequence[str], *, any_spatial: bool = False) -> tuple[bool, bool, _State | None]:
        mapped, edge, state = False, False, None
        for v in vars_:
            x = self.df[self.idx[v]]
            if x.spatial:
                mapped, state = True, self.st[v]
                edge = edge or self.st[v].is_edge
        if any_spatial:
            for x in self.df:
                if x.spatial:
                    mapped, state = True, self.st[x.dim]
                    if self.st[x.dim].is_edge:
                        edge = True
        return mapped, edge, state

    # -- operands ------------------------------------------------------------------------
    def pe_mapped_volume(self, vars_: Sequence[str], first: bool = True, spee: bool = False) -> int:
        lv = self.lv
        ret = 1
        for x in self.df:
            if x.dim not in vars_:
                continue
            s = self.st[x.dim]
            if not x.spatial:
                ret *= lv.mapped_edge[x.dim] if s.is_edge else lv.mapped[x.dim]
            elif s.is_edge:
                if lv.n_edge_sub == 1 and (first or spee):
                    ret *= lv.mapped_edge[x.dim]
                elif lv.n_edge_sub > 1:
                    ret *= lv.mapped_edge[x.dim] if spee else lv.mapped[x.dim]
            else:
                ret *= lv.mapped[x.dim]
        return ret

    def _changing_idx(self) -> int:
        idx = -1
        for i, x in enumerate(self.df):
            if self.st[x.dim].pos != _INIT:
                idx = i
        return idx

    def _inited(self, vars_: Sequence[str], changing: int) -> bool:
        for i, x in enumerate(self.df):
            s = self.st[x.dim]
            if s.pos == _INIT and x.dim in vars_ and i > changing and not s.unrolled:
                return True
        return False

    def pe_ingress_volume(self, vars_: Sequence[str], first: bool = True, spee: bool = False) -> int:
        lv = self.lv
        changing = self._changing_idx()
        if changing == -1:
            return self.pe_mapped_volume(vars_, first, spee)
        inited = self._inited(vars_, changing)
        ret = 1
        changes = False
        for i, x in enumerate(self.df):
            if x.dim not in vars_:
                continue
            s = self.st[x.dim]
            is_changing = i == changing
            is_reset = i > changing
            if is_changing:
                changes = True
            if not x.spatial:
                if s.pos == _INIT:
                    ret *= lv.mapped_edge[x.dim] if s.is_edge else lv.mapped[x.dim]
                elif is_changing and not inited:
                    ret *= max(lv.unique[x.dim], 1)
                else:
                    ret *= lv.mapped[x.dim]
            else:
                m = lv.mapped_edge if spee else lv.mapped
                u = lv.unique_edge if spee else lv.unique
                if s.pos == _INIT:
                    ret *= m[x.dim] if (first or not is_reset) else u[x.dim]
                elif first:
                    ret *= m[x.dim]
                else:
                    ret *= u[x.dim] if (not inited and is_changing) else m[x.dim]
        return ret if changes else 0

    def ingress(self, vars_: Sequence[str]) -> int:
        mapped, edge, state = self._sp_state(vars_)
        n, ne = self.lv.n_sub, self.lv.n_edge_sub
        if not mapped:
            return self.pe_ingress_volume(vars_)
        if not edge:
            return self.pe_ingress_volume(vars_, True, False) + (n - 1) * self.pe_ingress_volume(vars_, False, False)
        assert state is not None
        spee = state.sp_edge_edge
        ret = self.pe_ingress_volume(vars_, True, ne == 1 and spee)
        if ne > 1:
            n_ee = 1 if spee else 0
            n_full = max(ne - n_ee - 1, 0)
            ret += n_full * self.pe_ingress_volume(vars_, False, False)
            ret += n_ee * self.pe_ingress_volume(vars_, False, True)
        return ret

    # -- outputs -------------------------------------------------------------------------
    def pe_egress_volume(self, vars_: Sequence[str], psums: bool = False, first: bool = True,
                         spee: bool = False, reuse_at_edge: bool = True) -> int:
        lv = self.lv
        ret = 1
        if psums:
            for x in self.df:
                if x.dim in vars_:
                    continue
                s = self.st[x.dim]
                if not x.spatial:
                    ret *= lv.mapped_edge[x.dim] if s.is_edge else lv.mapped[x.dim]
                    continue
                ret *= self._sp_out_factor(x.dim, x.dim, s, first, spee, psum_dim=True)
        for v in vars_:
            x = self.df[self.idx[v]]
            s = self.st[v]
            actual = _OUT_OF.get(v, v)
            if not x.spatial:
                if s.pos == _INIT:
                    ret *= lv.mapped_edge[actual] if s.is_edge else lv.mapped[actual]
                elif s.pos == _STEADY:
                    ret *= lv.mapped[actual]
                else:
                    ret *= lv.mapped_edge[actual]
                continue
            if s.pos == _INIT and s.is_edge and spee:
                if lv.n_edge_sub == 1:
                    ret *= lv.mapped_edge[actual]
                elif spee:
                    ret *= lv.unique_edge[actual] if reuse_at_edge else lv.mapped_edge[actual]
            elif s.pos in (_INIT, _STEADY):
                if first:
                    ret *= lv.mapped[actual]
                elif lv.unique[actual] != 0:
                    ret *= lv.unique[actual]
            else:  # spatial edge
                if lv.n_edge_sub == 1 and (first or spee):
                    ret *= lv.mapped_edge[v]  # the reference uses the input dim here
                elif lv.n_edge_sub > 1:
                    if spee:
                        ret *= lv.unique_edge[actual]
                    elif first:
                        ret *= lv.mapped[actual]
                    elif lv.unique[actual] != 0:
                        ret *= lv.unique[actual]
        return ret

    def _sp_out_factor(self, key: str, dim: str, s: _State, first: bool, spee: bool, psum_dim: bool) -> int:
        """Spatial factor of a reduction dim in the partial-sum count."""
        lv = self.lv
        if s.pos == _INIT:
            if s.is_edge and spee:
                if lv.n_edge_sub == 1:
                    return lv.mapped_edge[key]
                if spee:
                    return lv.mapped_edge[key]
                return 1
            if first:
                return lv.mapped[key]
            return lv.unique[key] if lv.unique[key] != 0 else 1
        if s.pos == _STEADY:
            if first:
                return lv.mapped[key]
            return lv.unique[key] if lv.unique[key] != 0 else 1
        if lv.n_edge_sub == 1 and (first or spee):
            return lv.mapped_edge[key]
        if lv.n_edge_sub > 1:
            if spee:
                return lv.unique_edge[key]
            if first:
                return lv.mapped[key]
            return lv.unique[key] if lv.unique[key] != 0 else 1
        return 1

    def egress(self, vars_: Sequence[str]) -> int:
        mapped, edge, state = self._sp_state(vars_)
        n, ne = self.lv.n_sub, self.lv.n_edge_sub
        if not mapped:
            return self.pe_egress_volume(vars_)
        if not edge:
            return self.pe_egress_volume(vars_, False, True, False) + (n - 1) * self.pe_egress_volume(vars_, False, False, False)
        assert state is not None
        spee = state.sp_edge_edge
        ret = self.pe_egress_volume(vars_, False, True, ne == 1 and spee)
        if ne > 1:
            n_ee = 1 if spee else 0
            n_full = max(ne - n_ee - 1, 0)
            ret += n_full * self.pe_egress_volume(vars_, False, False, False)
            ret += n_ee * self.pe_egress_volume(vars_, False, False, True)
        return ret

    def critical_psums(self, vars_: Sequence[str]) -> int:
        mapped, edge, state = self._sp_state(vars_)
        if not mapped:
            return self.pe_egress_volume(vars_, True)
        if not edge:
            return self.pe_egress_volume(vars_, True, True, False)
        assert state is not None
        return self.pe_egress_volume(vars_, True, True, self.lv.n_edge_sub == 1 and state.sp_edge_edge)

    def psum_mapping_size(self, vars_: Sequence[str]) -> int:
        """MACs over the whole sub-cluster array in this case."""
        mapped, edge, state = self._sp_state(vars_, any_spatial=True)
        n, ne = self.lv.n_sub, self.lv.n_edge_sub
        if not edge:
            return n * self.pe_egress_volume(vars_, True, True, False)
        assert state is not None
        spee = state.sp_edge_edge
        ret = self.pe_egress_volume(vars_, True, True, ne == 1 and spee)
        if ne > 1:
            n_ee = 1 if spee else 0
            n_full = max(ne - n_ee - 1, 0)
            ret += n_full * self.pe_egress_volume(vars_, True, True, False)
            ret += n_ee * self.pe_egress_volume(vars_, True, False, True, False)
        return ret

    def mapped_volume(self, vars_: Sequence[str]) -> int:
        ret = 1
        for v in vars_:
            if v in self.lv.mapped:
                ret *= self.lv.mapped[v]
        return ret

    def sub_cluster_dims(self, spee: bool) -> dict[str, int]:
        lv = self.lv
        out: dict[str, int] = {}
        for x in self.df:
            s = self.st[x.dim]
            if not x.spatial:
                out[x.dim] = lv.mapped_edge[x.dim] if s.is_edge else lv.mapped[x.dim]
            elif s.pos == _STEADY:
                out[x.dim] = lv.mapped[x.dim]
            elif s.pos == _INIT and not s.is_edge:
                out[x.dim] = lv.mapped[x.dim]
            else:
                out[x.dim] = lv.mapped_edge[x.dim] if (lv.n_edge_sub == 1 or spee) else lv.mapped[x.dim]
        for inp, out_dim in _OUT_OF.items():
            if inp in out and _OVERLAP[inp] in out:
                out[out_dim] = out[inp] - out[_OVERLAP[inp]] + 1
        return out


# ----------------------------------------------------------------------------------------
# The level analysis (recursive over cluster levels)
# ----------------------------------------------------------------------------------------

@dataclass(slots=True)
class _LevelResult:
    runtime: int = 0
    macs: int = 0
    up_read: dict[str, int] = field(default_factory=dict)
    up_write: dict[str, int] = field(default_factory=dict)
    down_read: dict[str, int] = field(default_factory=dict)
    down_write: dict[str, int] = field(default_factory=dict)
    up_req: dict[str, int] = field(default_factory=dict)
    down_req: dict[str, int] = field(default_factory=dict)
    avg_active: float = 0.0
    peak_bw: int = 0
    offchip_bw: int = 0
    delays: dict[str, list[float]] = field(default_factory=dict)


class _Analysis:
    def __init__(self, mapping: DirectiveMapping, hw: MaestroHardware) -> None:
        self.layer = mapping.layer
        self.hw = hw
        self.levels = _build_levels(mapping, hw.num_pes)
        tv = self.layer.tensor_vars()
        self.inputs = [("input", tv["input"]), ("filter", tv["filter"])]
        self.outputs = [("output", tv["output"])]
        self.first_inner: _LevelResult | None = None
        self._memo: dict[tuple[int, tuple[tuple[str, int], ...]], _LevelResult] = {}

    def noc_delay(self, traffic: int) -> int:
        sends = -(-traffic // self.hw.noc_bw)
        return self.hw.noc_hops * self.hw.noc_hop_latency + sends - 1

    def run(self) -> _LevelResult:
        top = self.levels[0]
        full = dict(top.dims)
        return self.level(0, full)

    def level(self, li: int, dims: dict[str, int]) -> _LevelResult:
        key = (li, tuple(sorted(dims.items())))
        hit = self._memo.get(key)
        if hit is not None:
            if li == len(self.levels) - 1 and self.first_inner is None:
                self.first_inner = hit
            return hit
        res = self._level(li, dims)
        self._memo[key] = res
        return res

    def _level(self, li: int, dims: dict[str, int]) -> _LevelResult:
        lv = self.levels[li]
        n_levels = len(self.levels)
        res = _LevelResult()
        for name in ("input", "filter", "output"):
            for d in (res.up_read, res.up_write, res.down_read, res.down_write, res.up_req, res.down_req):
                d[name] = 0
        mins = {k: math.inf for k in ("ingress", "egress", "compute")}
        maxs = {k: -math.inf for k in ("ingress", "egress", "compute")}
        sums = {k: 0.0 for k in ("ingress", "egress", "compute")}
        total_occ = 0
        avg_bw = 0.0
        sp = next(x for x in lv.dataflow if x.spatial)
        for ci, (states, occ) in enumerate(_cases(_dim_states(lv, dims))):
            ra = _Reuse(lv, states)
            if ci == 0:
                self._buffer_reqs(res, ra, dims)
            ingress = egress = psums = psum_size = 0
            for name, vars_ in self.outputs:
                e = ra.egress(vars_)
                psum_size += ra.psum_mapping_size(vars_)
                egress += e
                res.up_write[name] += occ * e
                res.down_write[name] += occ * psum_size
                res.down_read[name] += occ * psum_size
                psums += ra.critical_psums(vars_)
            if psums <= 0:
                continue
            for name, vars_ in self.inputs:
                t = ra.ingress(vars_)
                ingress += t
                res.up_read[name] += occ * t
                # the reference tool sets the L1 writes of an operand to its L2 reads
                res.down_write[name] = res.up_read[name]
                res.down_read[name] += occ * psum_size
            sp_state = ra.st[sp.dim]
            n_active = lv.n_edge_sub if sp_state.is_edge else lv.n_sub
            active_units = 0.0
            if li < n_levels - 1:
                subs: list[tuple[_LevelResult, int]] = []
                if sp_state.is_edge:
                    if sp_state.sp_edge_edge:
                        subs.append((self.level(li + 1, ra.sub_cluster_dims(True)), 1))
                        if lv.n_edge_sub - 1 > 0:
                            subs.append((self.level(li + 1, ra.sub_cluster_dims(False)), lv.n_edge_sub - 1))
                    else:
                        subs.append((self.level(li + 1, ra.sub_cluster_dims(False)), lv.n_edge_sub))
                else:
                    subs.append((self.level(li + 1, ra.sub_cluster_dims(False)), lv.n_sub))
                compute = max(s.runtime for s, _ in subs)
                # the reference keeps one spatial-occurrence count per shared result object
                active_units = sum(s.avg_active * k for s, k in subs)
            else:
                compute = -(-psums // self.hw.simd_lanes)
                if self.first_inner is None:
                    self.first_inner = res
            in_delay = self.noc_delay(ingress)
            out_delay = self.noc_delay(egress)
            if all(s.pos == _INIT for s in states):
                delay = compute + in_delay
            else:
                delay = max(out_delay, compute, in_delay)
            if li == 0:
                bw = self.hw.offchip_bw
                off_out = (res.up_req["output"] // bw) // 2
                off_in = ((res.up_req["input"] + res.up_req["filter"]) // bw) // 2
                delay = max(off_in, delay, off_out)
                c = compute if compute else 1
                ob = max(res.offchip_bw, res.up_req["output"] // c,
                         (res.up_req["input"] + res.up_req["filter"]) // c)
                res.offchip_bw = ob // 2
            res.runtime += occ * delay
            res.macs += occ * psum_size
            if active_units == 0:
                active_units = n_active
            res.avg_active += active_units * occ
            if compute == 0:
                compute = 1
            res.peak_bw = max(res.peak_bw, max(ingress, egress) // compute)
            avg_bw += (occ * max(ingress, egress)) // compute
            for k, v in (("ingress", in_delay), ("egress", out_delay), ("compute", compute)):
                sums[k] += occ * v
                mins[k] = min(mins[k], v)
                maxs[k] = max(maxs[k], v)
            total_occ += occ
        if total_occ:
            res.avg_active /= total_occ
        res.delays = {k: [mins[k], maxs[k], sums[k] / total_occ if total_occ else 0.0] for k in sums}
        return res

    def _buffer_reqs(self, res: _LevelResult, ra: _Reuse, dims: dict[str, int]) -> None:
        for name, vars_ in self.inputs:
            res.up_req[name] += 2 * ra.ingress(vars_)
            res.up_write[name] = math.prod(dims[v] for v in vars_)
            res.down_req[name] += 2 * ra.mapped_volume(vars_)
        for name, vars_ in self.outputs:
            size = 1
            for v in vars_:
                size *= dims[v] - dims[_OVERLAP[v]] + 1 if v in _OVERLAP else dims[v]
            res.up_req[name] = 2 * ra.egress(vars_)
            res.up_read[name] = size
            res.down_req[name] = 2 * ra.mapped_volume(vars_)


def analyze(mapping: DirectiveMapping, hw: MaestroHardware) -> AspectResult:
    """Cost of one layer under one directive mapping, in MAESTRO's naming.

    Raises
    ------
    SpecError
        If the directives cannot describe a mapping (no SpatialMap in a level, more PEs in
        the clusters than the hardware has, a directive over an unknown dimension).
    """
    known = set(mapping.layer.dim_dict) | {"Y'", "X'"}
    for d in mapping.directives:
        if isinstance(d, Directive):
            if d.dim not in known:
                raise SpecError(
                    f"layer {mapping.layer.name}: directive {d} maps unknown dimension {d.dim!r}; "
                    f"known: {sorted(known)}"
                )
            if d.size < 1 or d.offset < 1:
                raise SpecError(f"layer {mapping.layer.name}: directive {d}: size and offset must be >= 1")
        elif d.size < 1:
            raise SpecError(f"layer {mapping.layer.name}: {d}: cluster size must be >= 1")
    an = _Analysis(mapping, hw)
    top = an.run()
    inner = an.first_inner if an.first_inner is not None else top
    tensors = {}
    for name in ("input", "filter", "output"):
        tensors[name] = {
            "l1_read": int(top.down_read[name]),
            "l1_write": int(top.down_write[name]),
            "l2_read": int(top.up_read[name]),
            "l2_write": int(top.up_write[name]),
            "l1_size_req": int(inner.down_req[name]),
            "l2_size_req": int(top.up_req[name]),
        }
    dl = top.delays
    return AspectResult(
        layer=mapping.layer.name,
        runtime_cycles=int(top.runtime),
        num_macs=int(top.macs),
        l1_size_req=sum(t["l1_size_req"] for t in tensors.values()),
        l2_size_req=sum(t["l2_size_req"] for t in tensors.values()),
        tensors=tensors,
        noc_bw_req_peak=int(top.peak_bw),
        offchip_bw_req=int(top.offchip_bw),
        avg_utilized_pes=float(top.avg_active),
        num_pes_used=an.levels[0].n_sub * math.prod(lv.n_sub for lv in an.levels[1:]),
        ingress_delay=(int(dl["ingress"][0]), int(dl["ingress"][1]), float(dl["ingress"][2])),
        egress_delay=(int(dl["egress"][0]), int(dl["egress"][1]), float(dl["egress"][2])),
        computation_delay=(int(dl["compute"][0]), int(dl["compute"][1]), float(dl["compute"][2])),
    )


# ----------------------------------------------------------------------------------------
# The accelmap view: Problem + Arch + Mapping  <->  MAESTRO layer + hardware + directives
# ----------------------------------------------------------------------------------------

_UNLIMITED_BW = 1 << 40  # "bandwidth unconstrained" (MAESTRO's bwinf runs use 1e9)


@dataclass(frozen=True, slots=True)
class _Layout:
    """Which accelmap dimension plays each MAESTRO variable (None: absent, extent 1)."""

    kind: str
    dim_of: tuple[tuple[str, int | None], ...]  # MAESTRO var -> accelmap dim index
    stride_y: int
    stride_x: int
    tensor_of: tuple[tuple[str, int], ...]  # "input"/"filter"/"output" -> accelmap tensor index

    def dim(self, var: str) -> int | None:
        return dict(self.dim_of)[var]

    def tensor(self, name: str) -> int:
        return dict(self.tensor_of)[name]


_ASPECT_KINDS = (ProblemKind.CONV, ProblemKind.DEPTHWISE_CONV, ProblemKind.GEMM)


def _layout(problem: Problem) -> _Layout:
    """Place the problem's dims on MAESTRO's variables by their roles (`workloads.structure`).

    A convolution: batch -> N, output/input channel -> K/C (the depthwise channel -> C),
    filter row/column -> R/S, output row/column -> Y'/X'. A GEMM is a 1x1 convolution:
    reduction -> C, columns -> K, rows -> Y' (a second and third row dim -> X', N)."""
    st = require_kind(problem, _ASPECT_KINDS, "aspect")
    names = problem.dim_names
    bounds = problem.bounds
    problems: list[str] = []

    def pick(role: DimRole, var: str) -> int | None:
        dims = st.dims_of(role)
        big = [d for d in dims if bounds[d] > 1]
        if len(big) > 1:
            problems.append(f"dims {[names[d] for d in big]} all play the {role.value}; MAESTRO's {var} is one dim")
        return big[0] if big else (dims[0] if dims else None)

    if st.kind is ProblemKind.GEMM:
        rows = [d for d in st.dims_of(DimRole.GEMM_M) if bounds[d] > 1] or list(st.dims_of(DimRole.GEMM_M))[:1]
        if len(rows) > 3:
            problems.append(f"{len(rows)} row dims {[names[d] for d in rows]}; MAESTRO holds three (N, Y', X')")
        place = {1: ("Y'",), 2: ("Y'", "X'"), 3: ("N", "Y'", "X'")}.get(len(rows), ())
        at = dict(zip(place, rows, strict=False))
        dim_of: tuple[tuple[str, int | None], ...] = (
            ("N", at.get("N")), ("K", pick(DimRole.GEMM_N, "K")), ("C", pick(DimRole.GEMM_K, "C")),
            ("R", None), ("S", None), ("Y'", at.get("Y'")), ("X'", at.get("X'")))
        kind, sy, sx = "CONV", 1, 1
    else:
        dw = st.kind is ProblemKind.DEPTHWISE_CONV
        for i, w in enumerate(st.windows):
            if w.dilation != 1 and w.filter_dim is not None and bounds[w.filter_dim] > 1:
                problems.append(f"dilation {w.dilation} on the {'rows' if i == 0 else 'columns'} "
                                f"({names[w.filter_dim]}); MAESTRO's convolutions have dilation 1")
        dim_of = (("N", pick(DimRole.BATCH, "N")),
                  ("K", None if dw else pick(DimRole.OUT_CHANNEL, "K")),
                  ("C", pick(DimRole.CHANNEL if dw else DimRole.IN_CHANNEL, "C")),
                  ("R", pick(DimRole.FILTER_ROW, "R")), ("S", pick(DimRole.FILTER_COL, "S")),
                  ("Y'", pick(DimRole.OUT_ROW, "Y'")), ("X'", pick(DimRole.OUT_COL, "X'")))
        if dw:  # a bound-1 output/input channel of a depthwise layer is a free dim
            extra = [d for d in st.dims_of(DimRole.OUT_CHANNEL) + st.dims_of(DimRole.IN_CHANNEL) if bounds[d] > 1]
            if extra:
                problems.append(f"channel dims {[names[d] for d in extra]} beside the depthwise channel")
        kind = "DSCONV" if dw else "CONV"
        sy = st.windows[0].stride if st.windows else 1
        sx = st.windows[1].stride if len(st.windows) > 1 else 1
    if problems:
        raise SpecError(f"problem {problem.name}: the aspect model cannot read this {st.describe()}: "
                        + "; ".join(problems))
    tensor_of = (("input", st.input), ("filter", st.weight), ("output", st.output))
    return _Layout(kind, dim_of, sy, sx, tensor_of)


def _maestro_layer(problem: Problem, lay: _Layout) -> MaestroLayer:
    b = problem.bounds

    def ext(var: str) -> int:
        d = lay.dim(var)
        return 1 if d is None else int(b[d])

    r, s = ext("R"), ext("S")
    dims = [("K", ext("K")), ("C", ext("C")), ("R", r), ("S", s),
            ("Y", (ext("Y'") - 1) * lay.stride_y + r), ("X", (ext("X'") - 1) * lay.stride_x + s)]
    if lay.dim("N") is not None:
        dims.insert(0, ("N", ext("N")))
    return MaestroLayer(name=problem.name, kind=lay.kind, dims=tuple(dims),
                        stride_y=lay.stride_y, stride_x=lay.stride_x)


@dataclass(frozen=True, slots=True)
class AspectView:
    """How the aspect model reads an `Arch`.

    ``array_level`` is the level whose fanout is the PE array (MAESTRO's L2, shared): its
    ``fanout_x`` PEs form one cluster (``Cluster(x)``) and ``fanout_y`` clusters the array.
    The level below it (if any) is the per-PE L1; levels above it are off-chip (their
    temporal loops fold into the top cluster level). NoC bandwidth = the array level's read
    bandwidth; off-chip bandwidth = the outermost level's (None = unconstrained).
    """

    array_level: int
    x: int
    y: int
    noc_bw: int
    offchip_bw: int

    @property
    def l1_level(self) -> int | None:
        return self.array_level + 1


def aspect_view(arch: Arch) -> AspectView:
    fan = [lv.fanout for lv in arch.levels]
    multi = [i for i, f in enumerate(fan) if f > 1]
    if len(multi) > 1:
        raise SpecError(
            f"arch {arch.name}: the aspect model has one PE array (one level with a fanout); levels "
            f"{[arch.levels[i].name for i in multi]} all fan out. Keep the fanout on one level"
        )
    a = multi[0] if multi else max(arch.n_levels - 2, 0)
    lv = arch.levels[a]

    def bw(v: float | None) -> int:
        return _UNLIMITED_BW if v is None else max(1, int(v))

    off = bw(arch.levels[0].read_bandwidth_words_per_cycle) if a > 0 else _UNLIMITED_BW
    return AspectView(a, lv.fanout_x, lv.fanout_y, bw(lv.read_bandwidth_words_per_cycle), off)


def shapes(n_pes: int) -> list[tuple[int, int]]:
    """Every array shape ``(x, y)`` with ``x * y == n_pes``: x PEs per cluster, y clusters.

    >>> shapes(16)
    [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)]
    """
    if isinstance(n_pes, bool) or not isinstance(n_pes, int) or n_pes < 1:
        raise SpecError(f"n_pes = {n_pes!r}; expected an int >= 1")
    return [(x, n_pes // x) for x in range(1, n_pes + 1) if n_pes % x == 0]


def arch_with_shape(arch: Arch, x: int, y: int) -> Arch:
    """A copy of ``arch`` whose PE array (the aspect view's array level) is ``x`` by ``y``."""
    view = aspect_view(arch)
    if x < 1 or y < 1:
        raise SpecError(f"array shape {x}x{y}; expected positive sizes")
    levels = list(arch.levels)
    levels[view.array_level] = replace(levels[view.array_level], fanout_x=x, fanout_y=y)
    return replace(arch, name=f"{arch.name}[{x}x{y}]", levels=tuple(levels))


def _vars(lay: _Layout) -> list[str]:
    """MAESTRO variables of the directive form, in a fixed order (N K C R S Y X)."""
    keep = {"C", "R", "S", "Y", "X"}
    if lay.kind == "CONV":
        keep.add("K")
    if lay.dim("N") is not None:
        keep.add("N")
    return [v for v in ("N", "K", "C", "R", "S", "Y", "X") if v in keep]


def _row_plan(problem: Problem, lay: _Layout, view: AspectView, m: Mapping) -> tuple[list, list, int, int]:
    """Directive plan of one mapping: (top, inner, f_y, f_x) with entries (var, spatial, size, ofs).

    Raises SpecError when the mapping has no directive form (spatial unrolling away from the
    array level, two dims unrolled along one array axis)."""
    a = view.array_level
    t, sp = m.temporal, m.spatial
    L = t.shape[0]
    for lvl in range(L):
        if lvl != a and (sp[lvl] > 1).any():
            raise SpecError("spatial unrolling below a level other than the PE array")
    fx_dims = np.flatnonzero(sp[a, :, 0] > 1)
    fy_dims = np.flatnonzero(sp[a, :, 1] > 1)
    if len(fx_dims) > 1 or len(fy_dims) > 1:
        raise SpecError("more than one dimension unrolled along one array axis (one SpatialMap per cluster level)")
    pe = np.prod(t[a + 1:], axis=0) if a + 1 < L else np.ones(t.shape[1], dtype=np.int64)
    pe = pe * np.prod(sp[a + 1:, :, 0] * sp[a + 1:, :, 1], axis=0) if a + 1 < L else pe
    cl = pe * sp[a, :, 0]
    f_x = int(sp[a, fx_dims[0], 0]) if len(fx_dims) else 1
    f_y = int(sp[a, fy_dims[0], 1]) if len(fy_dims) else 1
    d_x = int(fx_dims[0]) if len(fx_dims) else None
    d_y = int(fy_dims[0]) if len(fy_dims) else None
    # position of each dim in the top loop nest: its innermost temporal loop at levels <= a
    pos: dict[int, tuple[int, int]] = {}
    for lvl in range(a + 1):
        for rank, d in enumerate(m.order[lvl]):
            if t[lvl, d] > 1:
                pos[int(d)] = (lvl, rank)
    if d_y is not None and d_y not in pos:
        pos[d_y] = (a, -1)
    vars_ = _vars(lay)
    src = {v: lay.dim("Y'" if v == "Y" else "X'" if v == "X" else v) for v in vars_}
    strides = {"Y": lay.stride_y, "X": lay.stride_x}
    filt = {"Y": "R", "X": "S"}

    def size_ofs(v: str, tile: np.ndarray) -> tuple[int, int]:
        d = src[v]
        n = 1 if d is None else int(tile[d])
        if v in filt:
            rd = src[filt[v]]
            r = 1 if rd is None else int(tile[rd])
            return (n - 1) * strides[v] + r, n * strides[v]
        return n, n

    def key(v: str) -> tuple[int, int, int]:
        d = src[v]
        if d is not None and d in pos:
            return (0, *pos[d])
        return (1, 0, vars_.index(v))

    top_vars = sorted(vars_, key=key)
    sp_top = next((v for v in top_vars if d_y is not None and src[v] == d_y), None)
    if sp_top is None:  # no Y unrolling: a one-cluster SpatialMap over a dim that does not iterate
        sp_top = next((v for v in reversed(top_vars) if key(v)[0] == 1), top_vars[-1])
    top = [(v, v == sp_top, *size_ofs(v, cl)) for v in top_vars]
    sp_in = next((v for v in vars_ if d_x is not None and src[v] == d_x), vars_[-1])
    inner = [(v, v == sp_in, *size_ofs(v, pe)) for v in vars_]
    return top, inner, f_y, f_x


def directives_from_mapping(problem: Problem, arch: Arch, mapping: Mapping) -> tuple[DirectiveMapping, MaestroHardware]:
    """The MAESTRO form of an accelmap mapping: directives and the hardware they run on.

    Top level: one directive per dimension, in the mapping's loop order (the innermost
    level at or above the PE array where the dim has a temporal loop), sizes = the cluster's
    tile; the Y-unrolled dim is the ``SpatialMap``. ``Cluster(f_x)``; inner level: the
    X-unrolled dim is the ``SpatialMap``, sizes = the per-PE tile. Convolution rows and
    columns are written in input coordinates: ``TemporalMap((P_t - 1) * stride + R_t,
    P_t * stride) Y``. See docs/aspect.md for the correspondence and its limits.

    Raises
    ------
    SpecError
        If the problem is not a convolution or matmul, or the mapping has no directive form.
    """
    lay = _layout(problem)
    view = aspect_view(arch)
    top, inner, f_y, f_x = _row_plan(problem, lay, view, mapping)
    kinds = {True: DirectiveKind.SPATIAL, False: DirectiveKind.TEMPORAL}
    dirs: list[Directive | ClusterDirective] = [Directive(kinds[s], v, size, ofs) for v, s, size, ofs in top]
    if f_x > 1:  # one PE per top-level unit needs no inner cluster level (MAESTRO's 1-level form)
        dirs.append(ClusterDirective(f_x))
        dirs += [Directive(kinds[s], v, size, ofs) for v, s, size, ofs in inner]
    caps = arch.capacities_words
    a = view.array_level
    l1 = caps[a + 1] if a + 1 < arch.n_levels else np.inf
    hw = MaestroHardware(
        num_pes=f_x * f_y, noc_bw=view.noc_bw, offchip_bw=view.offchip_bw,
        l2_size=None if not np.isfinite(caps[a]) else int(caps[a]),
        l1_size=None if not np.isfinite(l1) else int(l1),
    )
    return DirectiveMapping(layer=_maestro_layer(problem, lay), directives=tuple(dirs)), hw


# ----------------------------------------------------------------------------------------
# The CostModel plugin
# ----------------------------------------------------------------------------------------

_TNAMES = ("input", "filter", "output")
_RESULT_FIELDS = ("runtime", "macs", "l1_read", "l1_write", "l2_read", "l2_write", "l1_req", "l2_req")


def _empty_rows(n: int) -> dict[str, np.ndarray]:
    out = {"runtime": np.zeros(n, np.int64), "macs": np.zeros(n, np.int64)}
    for k in _RESULT_FIELDS[2:]:
        out[k] = np.zeros((n, 3), np.int64)
    return out


def _fill_row(rows: dict[str, np.ndarray], i: int, r: AspectResult) -> None:
    rows["runtime"][i] = r.runtime_cycles
    rows["macs"][i] = r.num_macs
    for j, t in enumerate(_TNAMES):
        for k, src in (("l1_read", "l1_read"), ("l1_write", "l1_write"), ("l2_read", "l2_read"),
                       ("l2_write", "l2_write"), ("l1_req", "l1_size_req"), ("l2_req", "l2_size_req")):
            rows[k][i, j] = r.tensors[t][src]


class AspectModel:
    """MAESTRO-class cost model (plugin name ``aspect``).

    Reads the arch through `aspect_view` (one PE array of ``fanout_x`` PEs per cluster by
    ``fanout_y`` clusters, an L2 at the array level, an L1 per PE below it, off-chip above)
    and each mapping through `directives_from_mapping`. Per mapping: cycles = the analysed
    runtime; per-level counts: L2 and L1 reads/fills/updates as MAESTRO counts them, off-chip
    reads = L2 fills of the operands and off-chip updates = L2 reads of the output (the
    write-back); energy = counts x the arch's per-access energies + MACs x MAC energy.

    A problem or arch the model cannot read (`unsupported` says why) gives all rows
    ``Reason.MODEL``. A row is invalid (`Reason`) when `check_batch` rejects it (capacity excepted), when it
    has no directive form or the directive form does not do exactly the problem's MACs
    (``MODEL``: e.g. a filter dim tiled above the PE, which MAESTRO's sliding-window
    directives cannot express), or when MAESTRO's double-buffered L1 / L2 requirements
    exceed the arch's capacities (``CAPACITY``). The ``keep`` array is not used: the model
    keeps every tensor at L1 and L2, as MAESTRO does.
    """

    name: ClassVar[str] = "aspect"

    def __init__(self, engine: str | None = None, *, vectorized: bool = True) -> None:
        """``engine``: ``"cpu"`` (the compiled kernel, `_aspect_kernel`; the default) or
        ``"numpy"`` (the batched numpy path, its executable reference; also
        ``ACCELMAP_KERNELS=numpy``). ``vectorized=False`` sends every row of the numpy path
        through the scalar analysis (for tests).

        Raises
        ------
        SpecError
            The engine is unknown, or ``"cuda"`` (the aspect model has no GPU engine).
        """
        from accelmap.costmodels.engines import resolve_engine

        self.engine = resolve_engine(engine)
        if self.engine == "cuda":
            raise SpecError("the aspect model has no cuda engine; use engine 'cpu' or 'numpy'")
        self.vectorized = vectorized
        self._consts: dict[tuple[int, int], tuple[Problem, Arch, object]] = {}

    @staticmethod
    def unsupported(problem: Problem, arch: Arch) -> str | None:
        """Why this model cannot read ``problem`` on ``arch`` (None when it can).

        `evaluate` then marks every row invalid (``Reason.MODEL``) instead of raising."""
        try:
            _layout(problem)
            aspect_view(arch)
        except SpecError as exc:
            return str(exc)
        return None

    def evaluate(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        n = len(mappings)
        if self.unsupported(problem, arch) is not None:
            return _all_model_invalid(problem, arch, n)
        view = aspect_view(arch)
        shapes_ok = (mappings.n_levels, mappings.n_dims, mappings.n_tensors) == (arch.n_levels, problem.n_dims,
                                                                              problem.n_tensors)
        if self.engine == "cpu" and self.vectorized and shapes_ok and n:
            return self._evaluate_kernel(problem, arch, view, mappings)
        lay = _layout(problem)
        chk = check_batch(problem, arch, mappings)
        ok = chk.valid | (chk.reason == int(Reason.CAPACITY))
        reason = np.where(ok, 0, chk.reason)
        level = np.where(ok, -1, chk.level)
        rows = _empty_rows(n)
        done = np.zeros(n, dtype=bool)
        if self.vectorized and ok.any():
            idx = np.flatnonzero(ok)
            sub, regular, macs_ok = _evaluate_regular(problem, lay, view, mappings.take(idx))
            ridx = idx[regular & macs_ok]
            for k in rows:
                rows[k][ridx] = sub[k][regular & macs_ok]
            # no directive form (spatial unrolling off the array level, two dims on one axis)
            shape_bad = _unrepresentable(view, mappings.take(idx))
            reason[idx[(regular & ~macs_ok) | shape_bad]] = int(Reason.MODEL)
            done[idx[regular | shape_bad]] = True
        for i in np.flatnonzero(ok & ~done):
            res = self._row(problem, arch, mappings[int(i)])
            if res is None:
                reason[i] = int(Reason.MODEL)
            else:
                _fill_row(rows, int(i), res)
        return _metrics(problem, arch, view, rows, reason, level)

    def _evaluate_kernel(self, problem: Problem, arch: Arch, view: AspectView, mappings: MappingBatch) -> Metrics:
        """`evaluate` by the compiled kernel (`_aspect_kernel`): the same rows and codes as the
        numpy path, then the shared `_metrics`."""
        from accelmap.costmodels import _aspect_kernel

        key = (id(problem), id(arch))
        hit = self._consts.get(key)
        if hit is None or hit[0] is not problem or hit[1] is not arch:
            if len(self._consts) > 64:
                self._consts.clear()
            hit = (problem, arch, _aspect_kernel.aspect_consts(problem, arch))
            self._consts[key] = hit
        out, codes = _aspect_kernel.evaluate_rows(hit[2], mappings.temporal, mappings.spatial, mappings.order,
                                                  mappings.keep)
        return _aspect_kernel.metrics(hit[2], out, codes, problem, arch)

    def evaluate_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> Metrics:
        """Scalar reference: the directive form of the mapping through `analyze`."""
        if self.unsupported(problem, arch) is not None:
            return _all_model_invalid(problem, arch, 1)
        view = aspect_view(arch)
        batch = mapping.as_batch()
        chk = check_batch(problem, arch, batch)
        ok = bool(chk.valid[0] or chk.reason[0] == int(Reason.CAPACITY))
        reason = np.array([0 if ok else int(chk.reason[0])])
        level = np.array([-1 if ok else int(chk.level[0])])
        rows = _empty_rows(1)
        if ok:
            res = self._row(problem, arch, mapping)
            if res is None:
                reason[0] = int(Reason.MODEL)
            else:
                _fill_row(rows, 0, res)
        return _metrics(problem, arch, view, rows, reason, level)

    @staticmethod
    def _row(problem: Problem, arch: Arch, mapping: Mapping) -> AspectResult | None:
        try:
            dm, hw = directives_from_mapping(problem, arch, mapping)
        except SpecError:
            return None
        res = _analyze_cached(dm, hw)
        return res if res.num_macs == problem.macs else None


def _all_model_invalid(problem: Problem, arch: Arch, n: int) -> Metrics:
    L, T = arch.n_levels, problem.n_tensors
    z = np.zeros((n, L, T))
    return Metrics(
        cycles=np.full(n, np.inf), energy_pj=np.full(n, np.inf), compute_energy_pj=np.zeros(n),
        utilization=np.zeros(n), valid=np.zeros(n, bool), reason=np.full(n, int(Reason.MODEL), np.int64),
        reason_level=np.full(n, -1, np.int64), reads=z, fills=z.copy(), updates=z.copy(),
        energy_breakdown_pj=z.copy(), multicast=z.copy(), spatial_reductions=z.copy(),
        macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
    )


# searches revisit mappings; specs are frozen and hashable, results are never mutated
_analyze_cached = functools.lru_cache(maxsize=4096)(analyze)


def _l1_levels(problem: Problem, arch: Arch, view: AspectView, lay: _Layout) -> dict[str, int | None]:
    """The accelmap level of MAESTRO's L1 for each tensor (input, filter, output).

    MAESTRO's L1 is all per-PE storage: each tensor goes to the first level below the array
    that may hold it (one level for all when none says so; None without a level below)."""
    a, L = view.array_level, arch.n_levels
    holds = arch.holds_mask(problem)
    l1_of: dict[str, int | None] = {}
    for tname in _TNAMES:
        t = lay.tensor(tname)
        below = [lv for lv in range(a + 1, L) if holds[lv, t]]
        l1_of[tname] = below[0] if below else (a + 1 if a + 1 < L else None)
    return l1_of


def _metrics(problem: Problem, arch: Arch, view: AspectView, rows: dict[str, np.ndarray],
             reason: np.ndarray, level: np.ndarray) -> Metrics:
    n = len(reason)
    L, T = arch.n_levels, problem.n_tensors
    lay = _layout(problem)
    a = view.array_level
    l1_of = _l1_levels(problem, arch, view, lay)
    caps = arch.capacities_words
    valid = reason == 0
    l2_need = rows["l2_req"].sum(axis=1)
    cap_bad = valid & (l2_need > caps[a])
    for lv in sorted({v for v in l1_of.values() if v is not None}):
        need = sum(rows["l1_req"][:, j] for j, tn in enumerate(_TNAMES) if l1_of[tn] == lv)
        l1_bad = valid & ~cap_bad & (reason == 0) & (need > caps[lv])
        level = np.where(l1_bad, lv, level)
        reason = np.where(l1_bad, int(Reason.CAPACITY), reason)
    level = np.where(cap_bad, a, level)
    reason = np.where(cap_bad, int(Reason.CAPACITY), reason)
    valid = reason == 0
    reads = np.zeros((n, L, T))
    fills = np.zeros((n, L, T))
    updates = np.zeros((n, L, T))
    for j, tname in enumerate(_TNAMES):
        t = lay.tensor(tname)
        l1 = l1_of[tname]
        if tname == "output":
            reads[:, a, t] = rows["l2_read"][:, j]
            updates[:, a, t] = rows["l2_write"][:, j]
            if l1 is not None:
                reads[:, l1, t] = rows["l1_read"][:, j]
                updates[:, l1, t] = rows["l1_write"][:, j]
            if a > 0:
                updates[:, 0, t] = rows["l2_read"][:, j]
        else:
            reads[:, a, t] = rows["l2_read"][:, j]
            fills[:, a, t] = rows["l2_write"][:, j]
            if l1 is not None:
                reads[:, l1, t] = rows["l1_read"][:, j]
                fills[:, l1, t] = rows["l1_write"][:, j]
            if a > 0:
                reads[:, 0, t] = rows["l2_write"][:, j]
    rd_e = np.array([lv.read_energy_pj / lv.block_words for lv in arch.levels])
    wr_e = np.array([lv.write_energy_pj / lv.block_words for lv in arch.levels])
    breakdown = reads * rd_e[None, :, None] + (fills + updates) * wr_e[None, :, None]
    macs = problem.macs
    compute = np.full(n, macs * arch.compute.energy_per_mac_pj, dtype=float)
    energy = breakdown.sum(axis=(1, 2)) + compute
    cycles = rows["runtime"].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(cycles > 0, macs / (np.maximum(cycles, 1) * arch.n_macs), 0.0)
    inv = ~valid
    cycles = np.where(inv, np.inf, cycles)
    energy = np.where(inv, np.inf, energy)
    util = np.where(inv, 0.0, util)
    for arr in (reads, fills, updates, breakdown):
        arr[inv] = 0.0
    return Metrics(
        cycles=cycles, energy_pj=energy, compute_energy_pj=np.where(inv, 0.0, compute),
        utilization=util, valid=valid, reason=reason.astype(np.int64), reason_level=level.astype(np.int64),
        reads=reads, fills=fills, updates=updates, energy_breakdown_pj=breakdown,
        multicast=np.zeros((n, L, T)), spatial_reductions=np.zeros((n, L, T)),
        macs=macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
    )


# ----------------------------------------------------------------------------------------
# Batched path: closed forms of the analysis for "regular" mappings
# ----------------------------------------------------------------------------------------
#
# A mapping is regular when its directive form has no edge iterations (every tile divides
# its dimension, sliding windows included) and its inner cluster level is fully unrolled
# (one iteration: the per-PE tile is computed in place). Then, with the top-level
# directives at positions 0..P-1 (outer first), t_i iterations each and s the SpatialMap:
#
# * every case is "changing position j" (the innermost non-init directive) or all-init; the
#   cases with changing position j occur w_j = (t_j - 1) * prod_{i<j} t_i times;
# * an operand's traffic depends only on j: its per-PE volume keeps the mapped size of
#   every indexing directive except the changing one, which brings only its unique
#   (new) elements unless an inner directive of the tensor re-initializes it (Kwon et al.,
#   temporal reuse), and a unicast spatial dim brings only unique elements to the non-first
#   sub-clusters (spatial reuse);
# * egress, partial sums and the sub-cluster runtime do not depend on the case.
# The scalar engine above is the reference; tests check both agree exactly.

def _tensor_var_masks(kind: str, vars_: list[str]) -> dict[str, np.ndarray]:
    dims: tuple[tuple[str, int], ...] = (("K", 1),) + ((("N", 1),) if "N" in vars_ else ())
    tv = MaestroLayer(name="", kind=kind, dims=dims).tensor_vars()
    return {t: np.array([v in vs for v in vars_]) for t, vs in tv.items()}


def _stride_adjust(size: np.ndarray, ofs: np.ndarray, stride: int, r_full: int, top: bool) -> tuple[np.ndarray, np.ndarray]:
    if stride == 1:
        return size, ofs
    n_out = (size + stride - r_full) // stride
    hit = size >= r_full
    new_size = n_out * min(stride, r_full) + max(r_full - stride, 0)
    new_ofs = n_out * (r_full if (not top and r_full < stride) else stride)
    return np.where(hit, new_size, size), np.where(hit, new_ofs, ofs)


def _unrepresentable(view: AspectView, batch: MappingBatch) -> np.ndarray:
    """(n,) rows `_row_plan` rejects: spatial unrolling off the array level, or more than
    one dim unrolled along one array axis."""
    a = view.array_level
    sp = batch.spatial
    others = np.ones(sp.shape[1], dtype=bool)
    others[a] = False
    bad = (sp[:, others] > 1).any(axis=(1, 2, 3))
    return bad | ((sp[:, a, :, 0] > 1).sum(axis=1) > 1) | ((sp[:, a, :, 1] > 1).sum(axis=1) > 1)


def directive_form(view: AspectView, batch: MappingBatch) -> MappingBatch:
    """``batch`` moved into the directive form the model reads (`_unrepresentable` is then
    False everywhere): spatial factors off the array level, and all but the largest one
    per array axis, become temporal factors of the same level.

    Every tile keeps its extent (a level's tile counts its own spatial and temporal factors
    alike), so a legal mapping stays legal; only the PEs used shrink."""
    a = view.array_level
    t = batch.temporal.copy()
    sp = batch.spatial.copy()
    n, L, D = t.shape
    others = np.ones(L, dtype=bool)
    others[a] = False
    t[:, others] *= (sp[..., 0] * sp[..., 1])[:, others]
    sp[:, others] = 1
    rows = np.arange(n)
    for ax in (0, 1):
        f = sp[:, a, :, ax]
        keep = np.argmax(f, axis=1)
        moved = f.copy()
        moved[rows, keep] = 1
        t[:, a] *= moved
        f_new = np.ones_like(f)
        f_new[rows, keep] = f[rows, keep]
        sp[:, a, :, ax] = f_new
    return MappingBatch(temporal=t, spatial=sp, order=batch.order, keep=batch.keep)


def _evaluate_regular(problem: Problem, lay: _Layout, view: AspectView,
                      batch: MappingBatch) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Vectorized analysis of the regular rows of ``batch``.

    Returns (rows, regular, macs_ok): per-row result arrays (meaningful where regular),
    which rows are regular, and which of those do exactly the problem's MACs.
    """
    n = len(batch)
    a = view.array_level
    t_all, sp_all, order = batch.temporal, batch.spatial, batch.order
    L, D = t_all.shape[1], t_all.shape[2]
    rows = _empty_rows(n)
    regular = np.ones(n, dtype=bool)
    others = np.ones(L, dtype=bool)
    others[a] = False
    regular &= ~(sp_all[:, others] > 1).any(axis=(1, 2, 3))
    regular &= ((sp_all[:, a, :, 0] > 1).sum(axis=1) <= 1) & ((sp_all[:, a, :, 1] > 1).sum(axis=1) <= 1)
    f = t_all * sp_all[..., 0] * sp_all[..., 1]
    pe = np.prod(f[:, a + 1:], axis=1) if a + 1 < L else np.ones((n, D), np.int64)
    cl = pe * sp_all[:, a, :, 0]
    f_x = np.prod(sp_all[:, a, :, 0], axis=1)
    f_y = np.prod(sp_all[:, a, :, 1], axis=1)
    d_x = np.where(f_x > 1, np.argmax(sp_all[:, a, :, 0], axis=1), -1)
    d_y = np.where(f_y > 1, np.argmax(sp_all[:, a, :, 1], axis=1), -1)

    vars_ = _vars(lay)
    nv = len(vars_)
    src = np.array([-1 if (d := lay.dim("Y'" if v == "Y" else "X'" if v == "X" else v)) is None else d
                    for v in vars_])
    layer = _maestro_layer(problem, lay)
    full = layer.dim_dict
    d_full = np.array([full.get(v, 1) for v in vars_])
    iy, ix = vars_.index("Y"), vars_.index("X")
    ir, is_ = vars_.index("R"), vars_.index("S")
    strides = {iy: lay.stride_y, ix: lay.stride_x}
    filt = {iy: ir, ix: is_}

    def tiles(tile: np.ndarray, top: bool) -> tuple[np.ndarray, np.ndarray]:
        g = np.where(src >= 0, np.take_along_axis(tile, np.maximum(src, 0)[None, :].repeat(n, 0), axis=1), 1)
        size, ofs = g.copy(), g.copy()
        for v, r in filt.items():
            st = strides[v]
            size[:, v] = (g[:, v] - 1) * st + g[:, r]
            ofs[:, v] = g[:, v] * st
            size[:, v], ofs[:, v] = _stride_adjust(size[:, v], ofs[:, v], st, full[vars_[r]], top)
        return size, ofs

    m_top_v, o_top_v = tiles(cl, True)  # (n, nv) per var
    m_in_v, o_in_v = tiles(pe, False)

    # --- top-level order: innermost temporal loop of each dim at levels <= a -------------
    last_lvl = np.full((n, D), -1)
    rank = np.zeros((n, D), np.int64)
    inv = np.argsort(order, axis=2)  # (n, L, D): position of dim d in order[l]
    for lvl in range(a + 1):
        hit = t_all[:, lvl] > 1
        last_lvl = np.where(hit, lvl, last_lvl)
        rank = np.where(hit, inv[:, lvl], rank)
    ys = (d_y >= 0) & (np.take_along_axis(last_lvl, np.maximum(d_y, 0)[:, None], 1)[:, 0] < 0)
    rows_i = np.flatnonzero(ys)
    last_lvl[rows_i, d_y[rows_i]] = a
    rank[rows_i, d_y[rows_i]] = -1
    srcc = np.maximum(src, 0)
    v_lvl = np.where(src[None, :] >= 0, last_lvl[:, srcc], -1)
    v_rank = np.where(src[None, :] >= 0, rank[:, srcc], 0)
    group = (v_lvl < 0).astype(np.int64)
    key = ((group * (L + 2) + np.where(group == 1, 0, v_lvl)) * (D + 2) + np.where(group == 1, 0, v_rank + 1)) * (nv + 1) \
        + np.arange(nv)[None, :]
    perm = np.argsort(key, axis=1, kind="stable")  # (n, P): var at each top position
    sp_var_y = np.where(d_y[:, None] >= 0, src[None, :] == d_y[:, None], False)
    has_y = sp_var_y.any(axis=1)
    grp_sorted = np.take_along_axis(group, perm, 1)
    last_g1 = nv - 1 - np.argmax(grp_sorted[:, ::-1] == 1, axis=1)
    any_g1 = (grp_sorted == 1).any(axis=1)
    fallback_pos = np.where(any_g1, last_g1, nv - 1)
    sp_top_var = np.where(has_y, np.argmax(sp_var_y, axis=1), perm[np.arange(n), fallback_pos])
    sp_in_var = np.where(d_x >= 0, np.argmax(np.where(d_x[:, None] >= 0, src[None, :] == d_x[:, None], False), axis=1), nv - 1)

    # --- regularity (no edges at the top; inner level one iteration) ---------------------
    m_top = np.take_along_axis(m_top_v, perm, 1)
    o_top = np.take_along_axis(o_top_v, perm, 1)
    d_top = d_full[perm]
    is_sp = perm == sp_top_var[:, None]
    nsub = f_y[:, None]
    steady_t = (d_top - m_top) // o_top
    t_temporal = 1 + np.where((m_top < d_top) & (steady_t > 0), steady_t, 0)
    edge_t = (d_top < m_top) | (~(d_top < m_top) & (steady_t * o_top + m_top < d_top))
    cover = m_top + o_top * (nsub - 1)
    n_steady_s = ((d_top - m_top) // o_top + 1) // nsub - 1
    init_unroll_s = d_top <= cover
    edge_s = (d_top < cover) | (~init_unroll_s & (((n_steady_s + 1) * o_top * nsub + cover > d_top)
                                                 & (n_steady_s * o_top * nsub + cover != d_top)))
    t_spatial = 1 + np.where((cover < d_top) & (n_steady_s > 0), n_steady_s, 0)
    t = np.where(is_sp, t_spatial, t_temporal)
    regular &= ~np.where(is_sp, edge_s, edge_t).any(axis=1)
    # inner: dims = the top level's mapped sizes
    d_in = m_top_v
    in_sp = np.arange(nv)[None, :] == sp_in_var[:, None]
    cover_in = m_in_v + o_in_v * (f_x[:, None] - 1)
    single = f_x == 1  # no inner cluster level: the top level's units are the PEs
    regular &= single | np.where(in_sp, cover_in == d_in, m_in_v == d_in).all(axis=1)

    # --- per-var reuse tables ------------------------------------------------------------
    def tables(m_v: np.ndarray, o_v: np.ndarray, d_v: np.ndarray, sp_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """mapped / unique per var, plus Y' and X' appended (columns nv, nv+1)."""
        is_spv = np.arange(nv)[None, :] == sp_var[:, None]
        uniq = np.minimum(m_v, o_v)
        uniq = np.where(~is_spv & (d_v <= m_v), 0, uniq)
        my = m_v[:, iy] - m_v[:, ir] + 1
        mx = m_v[:, ix] - m_v[:, is_] + 1
        mapped = np.concatenate([m_v, my[:, None], mx[:, None]], axis=1)
        unique = np.concatenate([uniq, np.minimum(o_v[:, iy], m_v[:, iy])[:, None],
                                 np.minimum(o_v[:, ix], m_v[:, ix])[:, None]], axis=1)
        return mapped, unique

    mapped_top, unique_top = tables(m_top_v, o_top_v, np.broadcast_to(d_full, (n, nv)), sp_top_var)
    mapped_in, _ = tables(m_in_v, o_in_v, d_in, sp_in_var)
    actual = np.arange(nv)
    actual[iy], actual[ix] = nv, nv + 1
    masks = _tensor_var_masks(lay.kind, vars_)
    out_mask = masks["output"]
    ones = np.ones(n, np.int64)

    def out_products(mapped: np.ndarray, unique: np.ndarray | None, sp_var: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(per-PE egress first, per-PE egress others, partial sums per sub-cluster)."""
        e1 = ones.copy()
        e0 = ones.copy()
        for v in np.flatnonzero(out_mask):
            mv = mapped[:, actual[v]]
            e1 = e1 * mv
            if unique is not None:
                uv = unique[:, actual[v]]
                e0 = e0 * np.where(sp_var == v, np.where(uv != 0, uv, 1), mv)
        ps = e1.copy()
        for v in np.flatnonzero(~out_mask):
            ps = ps * mapped[:, v]
        return e1, e0, ps

    # inner level (single all-init case)
    _, _, psum_pe = out_products(mapped_in, None, sp_in_var)
    ing_in = np.zeros(n, np.int64)
    for tname in ("input", "filter"):
        vm = masks[tname]
        vol = np.prod(np.where(vm[None, :], m_in_v, 1), axis=1)
        ing_in += np.where(vm[sp_in_var], f_x, 1) * vol
    hop = 1  # hops x hop latency (MAESTRO: 1 x 1)

    def noc(traffic: np.ndarray, bw: int) -> np.ndarray:
        return hop + (-(-traffic // bw)) - 1

    runtime_in = psum_pe + noc(ing_in, view.noc_bw)
    e1, e0, psum_cl = out_products(mapped_top, unique_top, sp_top_var)
    for j, tname in enumerate(_TNAMES):
        vm = masks[tname]
        rows["l1_req"][:, j] = 2 * np.prod(np.where(vm[None, :], np.where(single[:, None], m_top_v, m_in_v), 1), axis=1)

    # top level
    out_sp = out_mask[sp_top_var]
    egress = e1 + np.where(out_sp, (f_y - 1) * e0, 0)
    psum_size = f_y * psum_cl
    total = np.prod(t, axis=1)
    excl = np.concatenate([np.ones((n, 1), np.int64), np.cumprod(t, axis=1)[:, :-1]], axis=1)
    w = (t - 1) * excl  # occurrences of the cases whose changing position is j
    compute = np.where(single, psum_cl, runtime_in)
    m_pos = m_top
    u_pos = np.take_along_axis(unique_top[:, :nv], perm, 1)
    s_pos = np.argmax(is_sp, axis=1)
    P = nv
    ing_init = {}
    ing_case = {}
    for tname in ("input", "filter"):
        vpos = masks[tname][perm]  # (n, P) tensor indexed by the directive at each position
        fpos = np.where(vpos, m_pos, 1)
        base = np.prod(fpos, axis=1)
        v_s = vpos[np.arange(n), s_pos]
        ing_init[tname] = np.where(v_s, f_y, 1) * base
        iter_v = vpos & (t > 1)
        # inited_j: an indexing directive inside j that iterates
        after = np.concatenate([np.cumsum(iter_v[:, ::-1], axis=1)[:, ::-1][:, 1:], np.zeros((n, 1), np.int64)], axis=1) > 0
        pre = np.concatenate([np.ones((n, 1), np.int64), np.cumprod(fpos, axis=1)[:, :-1]], axis=1)
        suf = np.concatenate([np.cumprod(fpos[:, ::-1], axis=1)[:, ::-1][:, 1:], np.ones((n, 1), np.int64)], axis=1)
        excl_j = pre * suf
        temporal_j = ~is_sp
        fj_first = np.where(temporal_j & ~after, np.maximum(u_pos, 1), m_pos)
        pe1 = excl_j * fj_first
        f_s = fpos[np.arange(n), s_pos][:, None]
        u_s = u_pos[np.arange(n), s_pos][:, None]
        m_s = m_pos[np.arange(n), s_pos][:, None]
        jj = np.arange(P)[None, :]
        g_s = np.where(s_pos[:, None] > jj, u_s, m_s)
        pe0_ne = (excl_j // f_s) * fj_first * g_s
        pe0_eq = excl_j * np.where(~after, u_s, m_s)
        pe0 = np.where(jj == s_pos[:, None], pe0_eq, pe0_ne)
        ing = pe1 + np.where(v_s[:, None], (f_y[:, None] - 1) * pe0, 0)
        ing_case[tname] = np.where(vpos, ing, 0)
    l2_req = {k: 2 * v for k, v in ing_init.items()}
    l2_req["output"] = 2 * egress
    bw = view.offchip_bw
    off_in = ((l2_req["input"] + l2_req["filter"]) // bw) // 2
    off_out = (l2_req["output"] // bw) // 2
    off = np.maximum(off_in, off_out)
    delay0 = np.maximum(compute + noc(ing_init["input"] + ing_init["filter"], view.noc_bw), off)
    ing_j = ing_case["input"] + ing_case["filter"]
    delay_j = np.maximum(np.maximum(noc(egress, view.noc_bw)[:, None], compute[:, None]), noc(ing_j, view.noc_bw))
    delay_j = np.maximum(delay_j, off[:, None])
    rows["runtime"] = delay0 + (w * delay_j).sum(axis=1)
    rows["macs"] = total * psum_size
    for j, tname in enumerate(_TNAMES):
        vm = masks[tname]
        if tname == "output":
            rows["l2_write"][:, j] = total * egress
            rows["l1_write"][:, j] = total * psum_size
            rows["l1_read"][:, j] = total * psum_size
            size = ones.copy()
            for v in (int(i) for i in np.flatnonzero(vm)):
                size = size * (d_full[v] - d_full[filt[v]] + 1 if v in filt else d_full[v])
            rows["l2_read"][:, j] = size
        else:
            rd = ing_init[tname] + (w * ing_case[tname]).sum(axis=1)
            rows["l2_read"][:, j] = rd
            rows["l1_write"][:, j] = rd
            rows["l1_read"][:, j] = total * psum_size
            rows["l2_write"][:, j] = int(np.prod(d_full[vm]))
        rows["l2_req"][:, j] = l2_req[tname]
    macs_ok = rows["macs"] == problem.macs
    return rows, regular, macs_ok


def aspect_constraints(problem: Problem, arch: Arch) -> Constraints:
    """Constraints that keep a `MapSpace` inside what the directive form expresses: the
    filter dims (filter rows and columns, found by `workloads.structure`) whole inside one
    cluster -- no temporal factor at or above the PE array level and no unrolling across
    clusters (Y) -- since MAESTRO's sliding windows need whole filters at the top level;
    inside the cluster they may be unrolled across PEs (X, as Eyeriss's row-stationary
    dataflow spreads filter rows over a PE column) or stepped in the PE.
    Returns a `accelmap.mapper.constraints.Constraints`."""
    from accelmap.mapper.constraints import FactorRule, Slot

    names = problem.dim_names
    st = recognize(problem)
    filt = st.dims_of(DimRole.FILTER_ROW) + st.dims_of(DimRole.FILTER_COL)
    try:
        a = aspect_view(arch).array_level
    except SpecError:
        a = arch.n_levels - 2
    rules = [FactorRule(level=arch.levels[lv].name, dim=names[d], fixed=1) for d in filt for lv in range(a + 1)]
    rules += [FactorRule(level=arch.levels[a].name, dim=names[d], slot=Slot.SPATIAL_Y, fixed=1) for d in filt]
    return Constraints(factors=tuple(rules), source="aspect model")
