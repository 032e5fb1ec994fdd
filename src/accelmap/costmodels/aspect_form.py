"""The directive form of an accelmap mapping: how the ``aspect`` model reads a `Problem`, an
`Arch` and a `Mapping` as a MAESTRO layer, hardware and directive list.

* `_layout` places the problem's dims on MAESTRO's variables by their roles
  (`accelmap.workloads.structure`), `_maestro_layer` gives the layer;
* `aspect_view` reads the arch (one PE array: ``fanout_x`` PEs per cluster by ``fanout_y``
  clusters; L2 at the array level, L1 below it, off-chip above), `shapes` and
  `arch_with_shape` make the array shape a variable;
* `_row_plan` / `directives_from_mapping` write one mapping as directives (top level in the
  mapping's loop order, the Y-unrolled dim as SpatialMap; ``Cluster(f_x)``; inner level over
  the per-PE tiles, the X-unrolled dim as SpatialMap);
* `_unrepresentable` / `directive_form` say which mappings have no directive form and move
  a batch into it; `aspect_constraints` keeps a MapSpace inside it.

See docs/aspect.md for the correspondence and its limits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.costmodels.aspect_analysis import (
    ClusterDirective,
    Directive,
    DirectiveKind,
    DirectiveMapping,
    MaestroHardware,
    MaestroLayer,
)
from accelmap.errors import SpecError
from accelmap.mapper.constraints import Constraints
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem
from accelmap.workloads.structure import DimRole, ProblemKind, recognize, require_kind

__all__ = [
    "AspectView",
    "aspect_view",
    "directives_from_mapping",
    "directive_form",
    "aspect_constraints",
    "shapes",
    "arch_with_shape",
]

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
_TNAMES = ("input", "filter", "output")  # MAESTRO's tensors, in its order


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


def _tensor_var_masks(kind: str, vars_: list[str]) -> dict[str, np.ndarray]:
    """Which of the directive-form variables ``vars_`` index each tensor (input, filter, output)."""
    dims: tuple[tuple[str, int], ...] = (("K", 1),) + ((("N", 1),) if "N" in vars_ else ())
    tv = MaestroLayer(name="", kind=kind, dims=dims).tensor_vars()
    return {t: np.array([v in vs for v in vars_]) for t, vs in tv.items()}


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
    return MappingBatch._trusted(temporal=t, spatial=sp, order=batch.order, keep=batch.keep)


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
