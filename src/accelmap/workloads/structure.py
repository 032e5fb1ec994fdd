"""What a problem *is*, read from its tensors' projections, never from its dims' names.

Every cost model that needs more than the generic loop nest (the systolic model's GEMM
view, the aspect model's MAESTRO convolution) asks this module which kind of operation a
`Problem` is and which part each loop plays, so that one problem file serves every model
whatever its dims are called (Timeloop's ``C M R S N P Q``, accelmap's ``N K C P Q R S``,
``B M N K``, or ``batch oc ic oy ox fy fx``).

The reading (SCALE-Sim's GEMM view, Samajdar et al., ISPASS 2020, Sec. III, and the
convolution of Timeloop's ``CNN-Layer`` shape, Parashar et al., ISPASS 2019):

1. The operands. The output is the tensor with role ``output``; the other two are the
   operands. The *input* is the operand with sliding-window coordinates (a coordinate that
   is a sum of terms, or a term with a coefficient > 1); when neither or both have one, the
   tensors' roles decide (``input`` before ``weight``), then their order.
2. The GEMM class of each dim, by which of (input, weight, output) it indexes: ``m``
   (input and output: output pixels, batch; GEMM ``M``), ``n`` (weight and output: output
   channels; GEMM ``N``), ``k`` (input and weight: the reduction; GEMM ``K``), ``b`` (all
   three: groups, the depthwise channel, the batch of a batched matmul). A dim of bound > 1
   in no class (e.g. indexing the output alone) has no GEMM view: kind ``other``.
3. Sliding windows. An input coordinate ``stride * p + dilation * r`` with one ``m`` dim
   ``p`` and at most one ``k`` dim ``r`` is a window: ``p`` is an output row (the first
   window) or column (the second), ``r`` a filter row or column. A problem with windows is
   a convolution; without, a GEMM (a batched matmul when a ``b`` dim has bound > 1).
4. Convolutions with a ``b`` dim: one ``b`` dim and no output or input channel (bound > 1)
   is a depthwise convolution (its ``b`` dim is the channel); otherwise a grouped one.

Dims of bound 1 take the role their indexing gives them but never decide the kind, so a
convolution whose batch of 1 is absent reads the same as one with ``N = 1``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum

import numpy as np

from accelmap.errors import SpecError
from accelmap.workloads.problem import Problem, TensorRole

__all__ = [
    "ProblemKind",
    "DimRole",
    "GemmClass",
    "Window",
    "Structure",
    "recognize",
    "require_kind",
]


class ProblemKind(str, Enum):
    """The kind of operation a problem is."""

    CONV = "convolution"
    DEPTHWISE_CONV = "depthwise convolution"
    GROUPED_CONV = "grouped convolution"
    GEMM = "GEMM"
    BATCHED_MATMUL = "batched matmul"
    OTHER = "other"


class GemmClass(int, Enum):
    """A dim's class in the GEMM (im2col) view of the problem."""

    M = 0  # indexes input and output
    N = 1  # indexes weight and output
    K = 2  # indexes input and weight (reduced)
    B = 3  # indexes all three (repeats the whole GEMM)
    NONE = -1  # none of the above


class DimRole(str, Enum):
    """The part a dim plays in its problem's kind."""

    BATCH = "batch"
    GROUP = "group"
    CHANNEL = "channel"  # the depthwise convolution's channel
    OUT_CHANNEL = "output channel"
    IN_CHANNEL = "input channel"
    OUT_ROW = "output row"
    OUT_COL = "output column"
    FILTER_ROW = "filter row"
    FILTER_COL = "filter column"
    GEMM_M = "rows (M)"
    GEMM_N = "columns (N)"
    GEMM_K = "reduction (K)"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Window:
    """One sliding-window input coordinate: ``stride * out_dim + dilation * filter_dim``."""

    out_dim: int
    filter_dim: int | None  # None: no filter dim (a strided 1x1 convolution)
    stride: int
    dilation: int
    coord: int  # the input tensor's coordinate index


@dataclass(frozen=True, slots=True)
class Structure:
    """A problem's kind, its operands and the role of each of its dims.

    ``input``, ``weight``, ``output`` are tensor indices (-1 where there is no such
    operand); ``gemm_class[d]`` and ``roles[d]`` are per dim, in the problem's dim order;
    ``windows`` are the sliding windows, rows first. ``note`` says why the kind is ``other``
    (empty otherwise) or what is irregular about a convolution (a coordinate that is not a
    clean ``stride*p + dilation*r`` window).
    """

    kind: ProblemKind
    input: int
    weight: int
    output: int
    gemm_class: tuple[GemmClass, ...]
    roles: tuple[DimRole, ...]
    windows: tuple[Window, ...]
    irregular: str
    note: str
    dim_names: tuple[str, ...]

    @property
    def has_gemm_view(self) -> bool:
        """Whether every dim of bound > 1 falls in a GEMM class (the systolic model's view)."""
        return self.input >= 0 and not self.note

    def dims_of(self, role: DimRole) -> tuple[int, ...]:
        """Indices of the dims playing ``role`` (in the problem's dim order)."""
        return tuple(d for d, r in enumerate(self.roles) if r is role)

    def names_of(self, role: DimRole) -> tuple[str, ...]:
        return tuple(self.dim_names[d] for d in self.dims_of(role))

    def describe(self) -> str:
        """The kind and every dim's role, with the problem's own dim names."""
        head = self.kind.value
        if self.kind is ProblemKind.OTHER:
            return f"{head} ({self.note})"
        parts = [f"{n}: {r.value}" for n, r in zip(self.dim_names, self.roles, strict=True) if r is not DimRole.NONE]
        strides = [f"stride {w.stride}" + (f" dilation {w.dilation}" if w.dilation != 1 else "")
                   for w in self.windows]
        extra = f"; windows {', '.join(strides)}" if strides else ""
        irr = f"; {self.irregular}" if self.irregular else ""
        return f"{head} ({', '.join(parts)}{extra}{irr})"


def _other(problem: Problem, note: str, inp: int = -1, wgt: int = -1, out: int = -1,
           cls: tuple[GemmClass, ...] | None = None) -> Structure:
    n = problem.n_dims
    return Structure(kind=ProblemKind.OTHER, input=inp, weight=wgt, output=out,
                     gemm_class=cls if cls is not None else (GemmClass.NONE,) * n,
                     roles=(DimRole.NONE,) * n, windows=(), irregular="", note=note,
                     dim_names=problem.dim_names)


def _windowed(coef: np.ndarray) -> bool:
    """Whether a tensor's coefficient table (rank, dims) has a summed or scaled coordinate."""
    used = coef > 0
    return bool((used.sum(axis=1) > 1).any() or (coef > 1).any())


@functools.lru_cache(maxsize=256)
def recognize(problem: Problem) -> Structure:
    """Read ``problem``'s kind and dim roles from its projections (see the module docstring)."""
    out = problem.output_index
    ops = [i for i in range(problem.n_tensors) if i != out]
    if len(ops) != 2:
        return _other(problem, f"{problem.n_tensors} tensors; a convolution or GEMM has two operands "
                      "and one output", out=out)
    coef = problem.coefficients
    win = [_windowed(coef[t]) for t in ops]
    if win[0] != win[1]:
        inp, wgt = (ops[0], ops[1]) if win[0] else (ops[1], ops[0])
    else:
        role_rank = {TensorRole.INPUT: 0, TensorRole.WEIGHT: 1, TensorRole.OUTPUT: 2}
        a, b = sorted(ops, key=lambda t: (role_rank[problem.tensors[t].role], t))
        inp, wgt = a, b
    rel = problem.relevance
    ri, rw, ro = rel[inp], rel[wgt], rel[out]
    bounds = problem.bounds
    cls: list[GemmClass] = []
    loose: list[str] = []
    for d in range(problem.n_dims):
        key = (bool(ri[d]), bool(rw[d]), bool(ro[d]))
        c = {(True, False, True): GemmClass.M, (False, True, True): GemmClass.N,
             (True, True, False): GemmClass.K, (True, True, True): GemmClass.B}.get(key, GemmClass.NONE)
        if c is GemmClass.NONE and bounds[d] > 1:
            idx = [problem.tensors[t].name for t in (inp, wgt, out) if rel[t, d]]
            loose.append(f"dim {problem.dim_names[d]} indexes {idx or 'no tensor'}")
        cls.append(c)
    clst = tuple(cls)
    if loose:
        return _other(problem, "; ".join(loose) + " (a GEMM or convolution dim indexes two or three of "
                      "input, weight and output)", inp, wgt, out, clst)
    big = bounds > 1

    # sliding windows in the input; the other coordinates of every tensor must be plain
    windows: list[Window] = []
    irregular: list[str] = []
    for t in (inp, wgt, out):
        for ci in range(coef.shape[1]):
            row = coef[t, ci]
            terms = np.flatnonzero(row)
            if terms.size == 0:
                continue
            if terms.size == 1 and row[terms[0]] == 1:
                continue
            name = problem.tensors[t].name
            text = " + ".join(f"{int(row[d])}*{problem.dim_names[d]}" if row[d] != 1 else problem.dim_names[d]
                              for d in terms)
            if t != inp:
                irregular.append(f"{name} coordinate {ci} is {text}")
                continue
            ms = [int(d) for d in terms if clst[d] is GemmClass.M]
            ks = [int(d) for d in terms if clst[d] is GemmClass.K]
            if len(ms) == 1 and len(ks) <= 1 and len(ms) + len(ks) == terms.size:
                windows.append(Window(out_dim=ms[0], filter_dim=ks[0] if ks else None,
                                      stride=int(row[ms[0]]), dilation=int(row[ks[0]]) if ks else 1, coord=ci))
            else:
                irregular.append(f"{name} coordinate {ci} is {text}, not stride*p + dilation*r")
    if len(windows) > 2:
        irregular.append(f"{len(windows)} sliding windows (a 2-D convolution has two)")
        windows = windows[:2]

    roles: list[DimRole] = [DimRole.NONE] * problem.n_dims
    has_b = any(clst[d] is GemmClass.B and big[d] for d in range(problem.n_dims))
    if windows or irregular:
        wdims: dict[int, DimRole] = {}
        for i, w in enumerate(windows):
            wdims[w.out_dim] = DimRole.OUT_ROW if i == 0 else DimRole.OUT_COL
            if w.filter_dim is not None:
                wdims[w.filter_dim] = DimRole.FILTER_ROW if i == 0 else DimRole.FILTER_COL
        n_ch = [d for d in range(problem.n_dims) if clst[d] is GemmClass.N and big[d]]
        k_ch = [d for d in range(problem.n_dims) if clst[d] is GemmClass.K and big[d] and d not in wdims]
        b_dims = [d for d in range(problem.n_dims) if clst[d] is GemmClass.B and big[d]]
        depthwise = len(b_dims) == 1 and not n_ch and not k_ch
        kind = ProblemKind.DEPTHWISE_CONV if depthwise else (
            ProblemKind.GROUPED_CONV if has_b else ProblemKind.CONV)
        for d in range(problem.n_dims):
            if d in wdims:
                roles[d] = wdims[d]
            else:
                roles[d] = {GemmClass.M: DimRole.BATCH, GemmClass.N: DimRole.OUT_CHANNEL,
                            GemmClass.K: DimRole.IN_CHANNEL,
                            GemmClass.B: DimRole.CHANNEL if depthwise else DimRole.GROUP,
                            GemmClass.NONE: DimRole.NONE}[clst[d]]
    else:
        kind = ProblemKind.BATCHED_MATMUL if has_b else ProblemKind.GEMM
        for d in range(problem.n_dims):
            roles[d] = {GemmClass.M: DimRole.GEMM_M, GemmClass.N: DimRole.GEMM_N, GemmClass.K: DimRole.GEMM_K,
                        GemmClass.B: DimRole.BATCH, GemmClass.NONE: DimRole.NONE}[clst[d]]
    return Structure(kind=kind, input=inp, weight=wgt, output=out, gemm_class=clst, roles=tuple(roles),
                     windows=tuple(windows), irregular="; ".join(irregular), note="",
                     dim_names=problem.dim_names)


def require_kind(problem: Problem, kinds: tuple[ProblemKind, ...], model: str, *,
                 regular: bool = True) -> Structure:
    """The structure of ``problem``, or a `SpecError` naming the kind found and ``kinds``.

    With ``regular``, a convolution must have clean windows (``stride*p + dilation*r``)."""
    s = recognize(problem)
    if s.kind in kinds and not (regular and s.irregular):
        return s
    takes = ", ".join(k.value for k in kinds)
    why = f"; irregular: {s.irregular}" if (s.kind in kinds and s.irregular) else ""
    raise SpecError(
        f"problem {problem.name}: the {model} model takes {takes}; found {s.describe()}{why}"
    )
