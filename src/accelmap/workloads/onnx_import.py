"""Import the compute layers of an ONNX model as problems (needs ``accelmap[onnx]``).

Read: ``Conv`` (1-D and 2-D; strides, dilations, explicit or automatic padding, groups and
depthwise), ``Gemm`` (``transA``/``transB``) and ``MatMul`` (numpy broadcasting of batch
dimensions). Every other operator is skipped: element-wise ops, pooling and normalisation
are not loop nests of multiply-accumulates. Only the main graph is read, not the bodies
of ``If``/``Loop``/``Scan``.

Shapes come from ``onnx.shape_inference`` (with data propagation, so shapes computed by
``Shape``/``Reshape`` chains resolve). A symbolic dimension (``batch``) must be given a
value through ``dim_values``; the message names it.

Mapping to builders:

* ``Conv`` -> :func:`~accelmap.workloads.builders.conv2d` with the inferred output size
  (a 1-D convolution becomes a 2-D one of height 1);
* ``Gemm``, and ``MatMul`` whose second operand is a 2-D constant (an initializer or a
  ``Constant``), are linear layers -> :func:`~accelmap.workloads.builders.fully_connected`
  with the leading dimensions of the activation folded into ``N``;
* ``MatMul`` of two activations -> :func:`~accelmap.workloads.builders.matmul`, or
  :func:`~accelmap.workloads.builders.batched_matmul` over the broadcast batch dimensions
  when the second operand has any. (When only the second operand is batched, the first is
  broadcast; the batched problem then counts it once per batch entry.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from accelmap.errors import AccelmapError, SpecError
from accelmap.workloads.builders import batched_matmul, conv2d, fully_connected, matmul
from accelmap.workloads.problem import Problem

if TYPE_CHECKING:
    import onnx

__all__ = ["problems_from_onnx", "OptionalDependencyError"]


class OptionalDependencyError(AccelmapError, ImportError):
    """An optional backend is not installed; the message names the extra to install."""


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise OptionalDependencyError(
            "reading ONNX models needs the `onnx` package, which is not installed; "
            "install it with `pip install 'accelmap[onnx]'`"
        ) from exc
    return onnx


Shape = list[int | str | None]


class _Graph:
    """Shapes and constness of every value of an inferred ONNX graph."""

    def __init__(self, onnx: Any, model: onnx.ModelProto, source: str) -> None:
        self.source = source
        graph = model.graph
        self.shapes: dict[str, Shape] = {}
        for vi in [*graph.input, *graph.value_info, *graph.output]:
            t = vi.type
            if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
                self.shapes[vi.name] = [
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in t.tensor_type.shape.dim
                ]
        self.constants: set[str] = set()
        for init in graph.initializer:
            self.shapes[init.name] = list(init.dims)
            self.constants.add(init.name)
        for node in graph.node:
            if node.op_type == "Constant":
                self.constants.update(node.output)
                for attr in node.attribute:
                    if attr.name == "value":
                        self.shapes[node.output[0]] = list(attr.t.dims)

    def shape(self, node_label: str, value: str, what: str) -> list[int]:
        shape = self.shapes.get(value)
        if shape is None:
            raise SpecError(
                f"{self.source}: {node_label}: the shape of {what} {value!r} is unknown after ONNX "
                "shape inference; export the model with static input shapes"
            )
        for d in shape:
            if not isinstance(d, int) or d < 1:
                fix = (
                    f"pass dim_values={{{d!r}: VALUE}}"
                    if isinstance(d, str)
                    else "export the model with static input shapes"
                )
                raise SpecError(
                    f"{self.source}: {node_label}: {what} {value!r} has shape {shape} with the "
                    f"unresolved dimension {d!r}; {fix}"
                )
        return [d for d in shape if isinstance(d, int)]


def _attrs(onnx: Any, node: Any) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _conv(onnx: Any, g: _Graph, node: Any, label: str, name: str, word_bits: int) -> Problem:
    x = g.shape(label, node.input[0], "input")
    w = g.shape(label, node.input[1], "weight")
    a = _attrs(onnx, node)
    spatial = len(w) - 2
    if spatial not in (1, 2) or len(x) != len(w):
        raise SpecError(
            f"{g.source}: {label}: a {spatial}-D convolution (input shape {x}, weight shape {w}); "
            "accelmap reads 1-D and 2-D convolutions"
        )
    groups = int(a.get("group", 1))
    strides = [int(v) for v in a.get("strides", [1] * spatial)]
    dilations = [int(v) for v in a.get("dilations", [1] * spatial)]
    pads = [int(v) for v in a.get("pads", [0] * 2 * spatial)]
    auto_pad = a.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    n, c, sizes = x[0], x[1], x[2:]
    k, kernel = w[0], w[2:]
    if w[1] * groups != c:
        raise SpecError(
            f"{g.source}: {label}: weight shape {w} with group={groups} expects "
            f"{w[1] * groups} input channels, but the input has shape {x}"
        )
    out: list[int] = []
    y = g.shapes.get(node.output[0])
    if y is not None and len(y) == len(x) and all(isinstance(d, int) and d > 0 for d in y[2:]):
        out = [int(d) for d in y[2:]]  # type: ignore[arg-type]
    else:
        for i, (size, kk) in enumerate(zip(sizes, kernel, strict=True)):
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out.append(-(-size // strides[i]))
            else:
                pad = 0 if auto_pad == "VALID" else pads[i] + pads[i + spatial]
                out.append((size + pad - dilations[i] * (kk - 1) - 1) // strides[i] + 1)
    # padding at the start of each spatial axis (ONNX: pads = [x1_begin, x2_begin, ..., x1_end, ...])
    low: list[int] = []
    for i, (size, kk) in enumerate(zip(sizes, kernel, strict=True)):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max((out[i] - 1) * strides[i] + dilations[i] * (kk - 1) + 1 - int(size), 0)
            low.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
        else:
            low.append(0 if auto_pad == "VALID" else pads[i])
    in_hw = [int(v) for v in sizes]
    if spatial == 1:
        out, kernel, strides, dilations = [1, *out], [1, *kernel], [1, *strides], [1, *dilations]
        low, in_hw = [0, *low], [1, *in_hw]
    if min(out) < 1:
        raise SpecError(f"{g.source}: {label}: output size {out} (input {x}, kernel {w}); expected >= 1")
    spans = [(o - 1) * st + dl * (kk - 1) + 1 for o, st, dl, kk in zip(out, strides, dilations, kernel, strict=True)]
    # the input carries its extent where the windows reach padding (or past its end)
    padded = any(low) or any(sp > h for sp, h in zip(spans, in_hw, strict=True))
    return conv2d(
        name, c=c, k=k, p=out[0], q=out[1], r=kernel[0], s=kernel[1], n=n,
        stride=(strides[0], strides[1]), dilation=(dilations[0], dilations[1]), groups=groups,
        padding=(low[0], low[1]) if padded else 0, input_hw=(in_hw[0], in_hw[1]) if padded else None,
        word_bits=word_bits,
    )  # fmt: skip


def _gemm(onnx: Any, g: _Graph, node: Any, label: str, name: str, word_bits: int) -> Problem:
    a_shape = g.shape(label, node.input[0], "input A")
    b_shape = g.shape(label, node.input[1], "input B")
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise SpecError(f"{g.source}: {label}: Gemm operands of shapes {a_shape} and {b_shape}; expected 2-D")
    attrs = _attrs(onnx, node)
    m, k = a_shape[::-1] if attrs.get("transA", 0) else a_shape
    k2, n = b_shape[::-1] if attrs.get("transB", 0) else b_shape
    if k != k2:
        raise SpecError(f"{g.source}: {label}: Gemm inner dimensions differ ({a_shape} x {b_shape})")
    if node.input[1] in g.constants:
        return fully_connected(name, n=m, c=k, k=n, word_bits=word_bits)
    return matmul(name, m=m, n=n, k=k, word_bits=word_bits)


def _matmul(g: _Graph, node: Any, label: str, name: str, word_bits: int) -> Problem:
    a = g.shape(label, node.input[0], "input A")
    b = g.shape(label, node.input[1], "input B")
    # numpy.matmul semantics: a 1-D operand is a row (A) or a column (B) vector.
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    m, k = a2[-2:]
    k2, n = b2[-2:]
    if k != k2:
        raise SpecError(f"{g.source}: {label}: MatMul inner dimensions differ ({a} x {b})")
    if len(b2) == 2:
        m_all = math.prod(a2[:-2]) * m
        if node.input[1] in g.constants and len(b) == 2:
            return fully_connected(name, n=m_all, c=k, k=n, word_bits=word_bits)
        return matmul(name, m=m_all, n=n, k=k, word_bits=word_bits)
    try:
        batch = np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2]))
    except ValueError:
        raise SpecError(
            f"{g.source}: {label}: MatMul batch dimensions do not broadcast ({a} x {b})"
        ) from None
    return batched_matmul(name, b=math.prod(batch), m=m, n=n, k=k, word_bits=word_bits)


def problems_from_onnx(
    model: str | Path | onnx.ModelProto,
    *,
    dim_values: Mapping[str, int] | None = None,
    word_bits: int = 16,
) -> list[Problem]:
    """The Conv, Gemm and MatMul layers of an ONNX model, in graph order.

    Parameters
    ----------
    model
        A path to an ``.onnx`` file, or a loaded ``onnx.ModelProto``.
    dim_values
        Values for symbolic input dimensions, e.g. ``{"batch": 1}``.
    word_bits
        Bits per word of every tensor of every problem (ONNX data types are not used:
        the accelerator's number format is a property of the study, not of the export).

    Returns
    -------
    list[Problem]
        One problem per compute node, named after the node (``conv_3``-style when the
        node has no name; names are made unique), each with ``repeat = 1``.

    Raises
    ------
    OptionalDependencyError
        When the ``onnx`` package is missing (``pip install 'accelmap[onnx]'``).
    SpecError
        For an unreadable file, a shape that does not resolve, or an unsupported layer.
    """
    onnx = _import_onnx()
    if isinstance(model, (str, Path)):
        source = str(model)
        try:
            proto = onnx.load(source)
        except FileNotFoundError:
            raise SpecError(f"{source}: no such file") from None
        except Exception as exc:  # protobuf raises its own DecodeError; name it in the message
            raise SpecError(f"{source}: not a readable ONNX model: {type(exc).__name__}: {exc}") from exc
    else:
        proto = model
        source = f"<onnx model {proto.graph.name or 'unnamed'}>"
    proto = _fix_dims(onnx, proto, dict(dim_values or {}), source)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError and others
        raise SpecError(f"{source}: ONNX shape inference failed: {type(exc).__name__}: {exc}") from exc
    g = _Graph(onnx, inferred, source)
    problems: list[Problem] = []
    used: set[str] = set()
    for i, node in enumerate(inferred.graph.node):
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        name = node.name or f"{node.op_type.lower()}_{i}"
        base, j = name, 2
        while name in used:
            name, j = f"{base}_{j}", j + 1
        used.add(name)
        label = f"node {node.name or i} ({node.op_type})"
        if node.op_type == "Conv":
            problems.append(_conv(onnx, g, node, label, name, word_bits))
        elif node.op_type == "Gemm":
            problems.append(_gemm(onnx, g, node, label, name, word_bits))
        else:
            problems.append(_matmul(g, node, label, name, word_bits))
    return problems


def _fix_dims(onnx: Any, model: onnx.ModelProto, values: dict[str, int], source: str) -> onnx.ModelProto:
    """A copy of ``model`` with the symbolic input dims in ``values`` made concrete."""
    if not values:
        return model
    for key, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecError(f"{source}: dim_values[{key!r}] = {v!r}; expected an int >= 1")
    model = onnx.ModelProto.FromString(model.SerializeToString())
    found: set[str] = set()
    for vi in model.graph.input:
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in values:
                found.add(d.dim_param)
                d.dim_value = values[d.dim_param]
    unknown = sorted(set(values) - found)
    if unknown:
        raise SpecError(
            f"{source}: dim_values names {unknown}, which no graph input has as a symbolic dimension"
        )
    return model
