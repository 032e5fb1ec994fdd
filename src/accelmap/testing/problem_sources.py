"""The same kinds of layer from every problem source, for cross-model checks.

`problem_sources(folder)` writes small problem files into ``folder`` and returns, per
source (Timeloop YAML, accelmap YAML with renamed dims, ONNX, the zoo), a few problems read
back through the ordinary loaders, so a test or a benchmark can run each against every
cost model (`docs/validation.md`, "One problem, any model").
"""

from __future__ import annotations

from pathlib import Path

from accelmap.workloads.builders import conv2d, matmul
from accelmap.workloads.io import load_problem, save_problem
from accelmap.workloads.problem import Dim, Problem, Tensor, Term

__all__ = ["problem_sources", "rename_dims", "SOURCES"]

SOURCES = ("timeloop", "accelmap", "onnx", "zoo")

_TIMELOOP = """\
problem:
  shape:
    name: CNN-Layer
    dimensions: [C, M, R, S, N, P, Q]
    coefficients:
    - {name: Wstride, default: 1}
    - {name: Hstride, default: 1}
    - {name: Wdilation, default: 1}
    - {name: Hdilation, default: 1}
    data-spaces:
    - name: Weights
      projection: [[[C]], [[M]], [[R]], [[S]]]
    - name: Inputs
      projection: [[[N]], [[C]], [[R, Wdilation], [P, Wstride]], [[S, Hdilation], [Q, Hstride]]]
    - name: Outputs
      projection: [[[N]], [[M]], [[Q]], [[P]]]
      read-write: true
  instance: {C: 8, M: 16, R: 3, S: 3, N: 1, P: 6, Q: 6, Wstride: 2, Hstride: 2}
"""

_TIMELOOP_GEMM = """\
problem:
  shape:
    name: GEMM
    dimensions: [I, J, L]
    data-spaces:
    - {name: A, projection: [[[I]], [[L]]]}
    - {name: B, projection: [[[L]], [[J]]]}
    - {name: Z, projection: [[[I]], [[J]]], read-write: true}
  instance: {I: 16, J: 8, L: 12}
"""


def rename_dims(problem: Problem, names: dict[str, str]) -> Problem:
    """``problem`` with its dims renamed by ``names`` (dims not named keep theirs)."""

    def nm(d: str) -> str:
        return names.get(d, d)

    dims = tuple(Dim(name=nm(d.name), bound=d.bound) for d in problem.dims)
    tensors = tuple(
        Tensor(name=t.name, role=t.role, word_bits=t.word_bits,
               projection=tuple(tuple(Term(dim=nm(x.dim), coef=x.coef) for x in c) for c in t.projection))
        for t in problem.tensors)
    return Problem(name=problem.name, dims=dims, tensors=tensors, repeat=problem.repeat)


def _onnx_problems(folder: Path) -> list[Problem]:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from accelmap.workloads.onnx_import import problems_from_onnx

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["y1"], name="conv", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["y1", "w2"], ["y2"], name="dw", group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Flatten", ["y2"], ["y3"]),
        helper.make_node("Gemm", ["y3", "wfc"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 12, 12])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=[w("w1", 8, 4, 3, 3), w("w2", 8, 1, 3, 3), w("wfc", 10, 8 * 6 * 6)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "tiny.onnx"
    onnx.save(model, str(path))
    return list(problems_from_onnx(path))


def problem_sources(folder: str | Path, *, onnx: bool = True) -> dict[str, list[Problem]]:
    """Problems per source, read back from files written into ``folder``.

    ``onnx=False`` leaves the ONNX source out (the ``onnx`` package is an extra)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Problem]] = {}
    tl = []
    for i, text in enumerate((_TIMELOOP, _TIMELOOP_GEMM)):
        path = folder / f"timeloop_{i}.yaml"
        path.write_text(text)
        tl.append(load_problem(path))
    out["timeloop"] = tl
    am = []
    conv = rename_dims(conv2d("conv_renamed", c=8, k=16, p=6, q=6, r=3, s=3, stride=1),
                       {"N": "batch", "K": "oc", "C": "ic", "P": "oy", "Q": "ox", "R": "fy", "S": "fx"})
    dw = rename_dims(conv2d("dw_renamed", c=8, k=8, p=6, q=6, r=3, s=3, groups=8),
                     {"N": "b", "C": "ch", "P": "y", "Q": "x", "R": "ky", "S": "kx"})
    mm = rename_dims(matmul("gemm_renamed", m=16, n=8, k=12), {"M": "rows", "N": "cols", "K": "red"})
    for p in (conv, dw, mm):
        path = folder / f"{p.name}.yaml"
        save_problem(p, path)
        am.append(load_problem(path))
    out["accelmap"] = am
    if onnx:
        out["onnx"] = _onnx_problems(folder)
    out["zoo"] = _zoo()
    return out


def _zoo() -> list[Problem]:
    """The first strided convolution of ResNet-50, the first depthwise convolution of
    MobileNet-V2 and the first batched matmul of BERT-base (sequence 128)."""
    from accelmap.workloads.structure import ProblemKind, recognize
    from accelmap.workloads.zoo import network

    def first(net: str, kind: ProblemKind, strided: bool = False) -> Problem:
        for p in network(net).layers:
            s = recognize(p)
            if s.kind is kind and (not strided or any(w.stride > 1 for w in s.windows)):
                return p
        raise LookupError(f"no {kind.value} in {net}")

    return [first("resnet50", ProblemKind.CONV, strided=True), first("mobilenet_v2", ProblemKind.DEPTHWISE_CONV),
            first("bert_base_128", ProblemKind.BATCHED_MATMUL)]
