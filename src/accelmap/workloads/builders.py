"""Builders for the common layer shapes: convolution, GEMM, attention matmuls, FC.

Every builder returns a :class:`~accelmap.workloads.problem.Problem` with accelmap's
canonical loop letters (see :mod:`accelmap.workloads.problem`):

=====================  =====================  ==========================================
builder                dims (loop order)      tensors (coordinates)
=====================  =====================  ==========================================
``conv2d``             ``N K C P Q R S``      Weights[K,C,R,S] Inputs[N,C,H,W] Outputs[N,K,P,Q]
``conv2d`` groups>1    ``N G K C P Q R S``    Weights[G,K,C,R,S] Inputs[N,G,C,H,W] Outputs[N,G,K,P,Q]
``conv2d`` depthwise   ``N C P Q R S``        Weights[C,R,S] Inputs[N,C,H,W] Outputs[N,C,P,Q]
``matmul``             ``M N K``              A[M,K] B[K,N] C[M,N]
``batched_matmul``     ``B M N K``            A[B,M,K] B[B,K,N] C[B,M,N]
``fully_connected``    ``N K C``              Weights[K,C] Inputs[N,C] Outputs[N,K]
=====================  =====================  ==========================================

with ``H = stride*P + dilation*R`` and ``W = stride*Q + dilation*S`` (``P`` and ``Q`` are
output sizes). By default the padding is folded into the input (every projected row
exists); ``conv2d(..., padding=..., input_hw=...)`` and ``conv2d_from_input`` give the
Inputs tensor its ``pad`` and ``extent`` instead, so models count only the words of the real
map (see `Tensor`). This is the convolution of Timeloop's
``CNN-Layer`` problem shape (Parashar et al., ISPASS 2019), with ``K`` for the output
channels where Timeloop writes ``M``.

A grouped convolution keeps the group as its own tensor coordinate ``G`` rather than
folding it into the channel coordinate (``g*C/groups + c``): the footprint of a tile is
then exact (``tG * tC`` channels) instead of the affine hull of a strided range.
"""

from __future__ import annotations

from accelmap.errors import SpecError
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

__all__ = [
    "conv2d",
    "conv2d_from_input",
    "conv_output_size",
    "matmul",
    "batched_matmul",
    "fully_connected",
    "pointwise",
]


def _positive_int(builder: str, name: str, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{builder}({name!r}): {key} = {value!r}; expected an int >= 1")
    return value


def _pair(builder: str, name: str, key: str, value: object, *, minimum: int = 1) -> tuple[int, int]:
    """An int or an (rows, cols) pair of ints, each >= ``minimum``."""
    values = value if isinstance(value, (tuple, list)) else (value, value)
    ok = len(values) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in values
    )
    if not ok:
        raise SpecError(
            f"{builder}({name!r}): {key} = {value!r}; expected an int >= {minimum} "
            f"or a (rows, cols) pair of them"
        )
    return int(values[0]), int(values[1])


def _name(builder: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise SpecError(f"{builder}: name = {name!r}; expected a non-empty string")
    return name


def _t(*dims: str | tuple[str, int]) -> tuple[Term, ...]:
    """One coordinate: a sum of terms, each a dim name or a (dim, coef) pair."""
    return tuple(Term(dim=d) if isinstance(d, str) else Term(dim=d[0], coef=d[1]) for d in dims)


def conv_output_size(size: int, kernel: int, *, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    """Output rows (or columns) of a convolution: ``floor((size + 2*pad - dil*(k-1) - 1)/stride) + 1``.

    The usual framework formula (PyTorch ``Conv2d``, ONNX ``Conv`` with explicit pads);
    ``padding`` here is per side.
    """
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv2d(
    name: str,
    *,
    c: int,
    k: int,
    p: int,
    q: int,
    r: int,
    s: int,
    n: int = 1,
    stride: int | tuple[int, int] = 1,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
    padding: int | tuple[int, int] = 0,
    input_hw: tuple[int, int] | None = None,
    word_bits: int = 16,
    repeat: int = 1,
) -> Problem:
    """A 2D convolution with output size ``p x q``.

    Parameters
    ----------
    name
        Problem name.
    c, k
        Input and output channels of the whole layer (all groups together).
    p, q
        Output rows and columns.
    r, s
        Filter rows and columns.
    n
        Batch size.
    stride, dilation
        An int, or a (rows, cols) pair.
    groups
        Channel groups; ``c`` and ``k`` must be multiples of it. ``groups == c == k`` is a
        depthwise convolution, which gets the shape ``N C P Q R S`` with no ``K`` (as
        Timeloop's depthwise problem); other ``groups > 1`` add a ``G`` dimension with
        per-group channel bounds ``C = c/groups`` and ``K = k/groups``.
    padding
        Zero padding at the top and left (an int or a (rows, cols) pair): input row ``h``
        of the projection ``stride*P + dilation*R`` is row ``h - padding`` of the map.
    input_hw
        The input map's rows and columns; default: the projection's span less twice the
        padding. With either given, the Inputs tensor carries ``pad`` and ``extent``
        (`Tensor`), and models count only the words that exist.
    word_bits
        Bits per word of every tensor.
    repeat
        How many times this shape occurs in its network.

    Returns
    -------
    Problem
        MACs = ``n * k * (c/groups) * p * q * r * s``.

    Examples
    --------
    >>> prob = conv2d("res3a_branch2b", c=128, k=128, p=28, q=28, r=3, s=3, stride=2)
    >>> prob.dim_names, prob.macs
    (('N', 'K', 'C', 'P', 'Q', 'R', 'S'), 115605504)
    >>> int(prob.tensor_sizes()[1])  # Inputs: 57 x 57 x 128 (the padded 56 x 56 map)
    415872
    """
    b = "conv2d"
    name = _name(b, name)
    c, k, p, q, r, s, n = (
        _positive_int(b, name, key, v)
        for key, v in (("c", c), ("k", k), ("p", p), ("q", q), ("r", r), ("s", s), ("n", n))
    )
    sh, sw = _pair(b, name, "stride", stride)
    dh, dw = _pair(b, name, "dilation", dilation)
    groups = _positive_int(b, name, "groups", groups)
    word_bits = _positive_int(b, name, "word_bits", word_bits)
    repeat = _positive_int(b, name, "repeat", repeat)
    if c % groups or k % groups:
        raise SpecError(
            f"{b}({name!r}): groups = {groups} must divide both c = {c} and k = {k}; "
            "pass the channel counts of the whole layer (all groups together)"
        )
    ph, pw = _pair(b, name, "padding", padding, minimum=0)
    span = ((p - 1) * sh + (r - 1) * dh + 1, (q - 1) * sw + (s - 1) * dw + 1)
    if input_hw is not None:
        hw = _pair(b, name, "input_hw", input_hw)
    else:
        hw = (span[0] - 2 * ph, span[1] - 2 * pw)
        if min(hw) < 1:
            raise SpecError(
                f"{b}({name!r}): padding {ph}x{pw} leaves a {hw[0]}x{hw[1]} input for the {span[0]}x{span[1]} "
                "the output reaches; expected a positive input (give input_hw or less padding)"
            )
    padded = (ph, pw) != (0, 0) or input_hw is not None
    row = _t(("P", sh), ("R", dh))
    col = _t(("Q", sw), ("S", dw))
    dims: tuple[tuple[str, int], ...]
    weights: tuple[tuple[Term, ...], ...]
    inputs: tuple[tuple[Term, ...], ...]
    outputs: tuple[tuple[Term, ...], ...]
    if groups > 1 and groups == c == k:
        dims = (("N", n), ("C", c), ("P", p), ("Q", q), ("R", r), ("S", s))
        weights = (_t("C"), _t("R"), _t("S"))
        inputs = (_t("N"), _t("C"), row, col)
        outputs = (_t("N"), _t("C"), _t("P"), _t("Q"))
    elif groups > 1:
        dims = (
            ("N", n), ("G", groups), ("K", k // groups), ("C", c // groups),
            ("P", p), ("Q", q), ("R", r), ("S", s),
        )  # fmt: skip
        weights = (_t("G"), _t("K"), _t("C"), _t("R"), _t("S"))
        inputs = (_t("N"), _t("G"), _t("C"), row, col)
        outputs = (_t("N"), _t("G"), _t("K"), _t("P"), _t("Q"))
    else:
        dims = (("N", n), ("K", k), ("C", c), ("P", p), ("Q", q), ("R", r), ("S", s))
        weights = (_t("K"), _t("C"), _t("R"), _t("S"))
        inputs = (_t("N"), _t("C"), row, col)
        outputs = (_t("N"), _t("K"), _t("P"), _t("Q"))
    return Problem(
        name=name,
        dims=tuple(Dim(name=d, bound=v) for d, v in dims),
        tensors=(
            Tensor(name="Weights", projection=weights, role=TensorRole.WEIGHT, word_bits=word_bits),
            Tensor(name="Inputs", projection=inputs, role=TensorRole.INPUT, word_bits=word_bits,
                   pad=(0,) * (len(inputs) - 2) + (ph, pw) if padded else None,
                   extent=tuple(_input_extents(dims, len(inputs))) + hw if padded else None),
            Tensor(name="Outputs", projection=outputs, role=TensorRole.OUTPUT, word_bits=word_bits),
        ),
        repeat=repeat,
    )


def _input_extents(dims: tuple[tuple[str, int], ...], rank: int) -> list[int]:
    """Extents of the Inputs coordinates before the two window coordinates (N, [G,] C)."""
    bound = dict(dims)
    names = ["N", "G", "C"] if rank == 5 else ["N", "C"]
    return [bound[d] for d in names]


def conv2d_from_input(
    name: str,
    *,
    c: int,
    k: int,
    h: int,
    w: int,
    r: int,
    s: int,
    n: int = 1,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
    word_bits: int = 16,
    repeat: int = 1,
) -> Problem:
    """A 2D convolution given its input map ``h x w`` and symmetric ``padding`` per side.

    The output size follows :func:`conv_output_size`; the rest is :func:`conv2d`.

    Examples
    --------
    >>> conv2d_from_input("conv1", c=3, k=64, h=224, w=224, r=7, s=7, stride=2, padding=3).describe()
    'conv1: N=1 K=64 C=3 P=112 Q=112 R=7 S=7  (118,013,952 MACs)'
    """
    b = "conv2d_from_input"
    name = _name(b, name)
    h = _positive_int(b, name, "h", h)
    w = _positive_int(b, name, "w", w)
    r = _positive_int(b, name, "r", r)
    s = _positive_int(b, name, "s", s)
    sh, sw = _pair(b, name, "stride", stride)
    ph, pw = _pair(b, name, "padding", padding, minimum=0)
    dh, dw = _pair(b, name, "dilation", dilation)
    p = conv_output_size(h, r, stride=sh, padding=ph, dilation=dh)
    q = conv_output_size(w, s, stride=sw, padding=pw, dilation=dw)
    if p < 1 or q < 1:
        raise SpecError(
            f"{b}({name!r}): the {r}x{s} filter (dilation {dh}x{dw}) is larger than the "
            f"padded {h + 2 * ph}x{w + 2 * pw} input, giving a {p}x{q} output; "
            "expected an output of at least 1x1 (increase padding or the input size)"
        )
    return conv2d(
        name, c=c, k=k, p=p, q=q, r=r, s=s, n=n, stride=(sh, sw), dilation=(dh, dw),
        groups=groups, padding=(ph, pw), input_hw=(h, w), word_bits=word_bits, repeat=repeat,
    )  # fmt: skip


def pointwise(
    name: str,
    *,
    c: int,
    k: int,
    p: int,
    q: int,
    n: int = 1,
    stride: int | tuple[int, int] = 1,
    word_bits: int = 16,
    repeat: int = 1,
) -> Problem:
    """A 1x1 convolution (MobileNet expand/project, ResNet bottleneck 1x1): conv2d with r = s = 1."""
    return conv2d(name, c=c, k=k, p=p, q=q, r=1, s=1, n=n, stride=stride, word_bits=word_bits, repeat=repeat)


def matmul(name: str, *, m: int, n: int, k: int, word_bits: int = 16, repeat: int = 1) -> Problem:
    """``C[M,N] += A[M,K] * B[K,N]``; A is the input (activation), B the weight operand.

    Examples
    --------
    >>> matmul("gemm", m=128, n=3072, k=768).macs
    301989888
    """
    b = "matmul"
    name = _name(b, name)
    m, n, k, word_bits, repeat = (
        _positive_int(b, name, key, v)
        for key, v in (("m", m), ("n", n), ("k", k), ("word_bits", word_bits), ("repeat", repeat))
    )
    return Problem(
        name=name,
        dims=(Dim(name="M", bound=m), Dim(name="N", bound=n), Dim(name="K", bound=k)),
        tensors=(
            Tensor(name="A", projection=(_t("M"), _t("K")), role=TensorRole.INPUT, word_bits=word_bits),
            Tensor(name="B", projection=(_t("K"), _t("N")), role=TensorRole.WEIGHT, word_bits=word_bits),
            Tensor(name="C", projection=(_t("M"), _t("N")), role=TensorRole.OUTPUT, word_bits=word_bits),
        ),
        repeat=repeat,
    )


def batched_matmul(
    name: str, *, b: int, m: int, n: int, k: int, word_bits: int = 16, repeat: int = 1
) -> Problem:
    """``C[B,M,N] += A[B,M,K] * B[B,K,N]``: both operands batched (attention heads).

    Attention over ``h`` heads of width ``d`` at sequence length ``L`` is
    ``batched_matmul(b=h, m=L, n=L, k=d)`` for ``Q K^T`` and
    ``batched_matmul(b=h, m=L, n=d, k=L)`` for ``softmax(.) V``. Roles: A is the input
    operand, B the "weight" operand (an activation too in attention, but the one an
    accelerator would keep stationary in a weight-stationary dataflow).
    """
    bn = "batched_matmul"
    name = _name(bn, name)
    b, m, n, k, word_bits, repeat = (
        _positive_int(bn, name, key, v)
        for key, v in (("b", b), ("m", m), ("n", n), ("k", k), ("word_bits", word_bits), ("repeat", repeat))
    )
    return Problem(
        name=name,
        dims=(Dim(name="B", bound=b), Dim(name="M", bound=m), Dim(name="N", bound=n), Dim(name="K", bound=k)),
        tensors=(
            Tensor(
                name="A", projection=(_t("B"), _t("M"), _t("K")), role=TensorRole.INPUT, word_bits=word_bits
            ),
            Tensor(
                name="B", projection=(_t("B"), _t("K"), _t("N")), role=TensorRole.WEIGHT, word_bits=word_bits
            ),
            Tensor(
                name="C", projection=(_t("B"), _t("M"), _t("N")), role=TensorRole.OUTPUT, word_bits=word_bits
            ),
        ),
        repeat=repeat,
    )


def fully_connected(name: str, *, n: int, c: int, k: int, word_bits: int = 16, repeat: int = 1) -> Problem:
    """A fully connected layer: ``Outputs[N,K] += Weights[K,C] * Inputs[N,C]``.

    The conv tensor names are kept (Weights, Inputs, Outputs) so that an architecture
    written for convolutions holds the same tensors.
    """
    b = "fully_connected"
    name = _name(b, name)
    n, c, k, word_bits, repeat = (
        _positive_int(b, name, key, v)
        for key, v in (("n", n), ("c", c), ("k", k), ("word_bits", word_bits), ("repeat", repeat))
    )
    return Problem(
        name=name,
        dims=(Dim(name="N", bound=n), Dim(name="K", bound=k), Dim(name="C", bound=c)),
        tensors=(
            Tensor(
                name="Weights", projection=(_t("K"), _t("C")), role=TensorRole.WEIGHT, word_bits=word_bits
            ),
            Tensor(name="Inputs", projection=(_t("N"), _t("C")), role=TensorRole.INPUT, word_bits=word_bits),
            Tensor(
                name="Outputs", projection=(_t("N"), _t("K")), role=TensorRole.OUTPUT, word_bits=word_bits
            ),
        ),
        repeat=repeat,
    )
