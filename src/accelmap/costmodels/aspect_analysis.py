"""What the ``aspect`` cost model counts: MAESTRO's data-centric analysis of one layer under
one directive mapping (``analyze``), and the MAESTRO-side specs it reads.

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
`docs/validation.md` lists where and why the numbers differ. This module is the scalar
reference of the model; `accelmap.costmodels.aspect` reads accelmap mappings through it,
`_aspect_numpy` (closed forms over a batch) and `_aspect_kernel` (compiled, per mapping)
are the fast paths, held equal to it by tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from accelmap.errors import SpecError

__all__ = [
    "DirectiveKind",
    "Directive",
    "ClusterDirective",
    "MaestroLayer",
    "MaestroHardware",
    "DirectiveMapping",
    "AspectResult",
    "analyze",
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
