"""ONNX import on small models built in memory with onnx.helper (no downloads)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from accelmap.errors import SpecError
from accelmap.workloads import batched_matmul, conv2d, fully_connected, matmul

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from accelmap.workloads.onnx_import import OptionalDependencyError, problems_from_onnx  # noqa: E402


def weight(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def make_model(nodes, inputs, outputs, initializers, name="tiny"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if all(o.type.tensor_type.HasField("shape") for o in outputs):  # the checker wants output shapes
        onnx.checker.check_model(model)
    return model


def vinfo(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


@pytest.fixture
def cnn():
    """conv 3x3/2 -> depthwise dilated -> 1x1 -> grouped -> relu -> flatten -> Gemm."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["y1"], name="stem", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node(
            "Conv", ["y1", "w2"], ["y2"], name="dw", group=8, dilations=[2, 2], pads=[2, 2, 2, 2]
        ),
        helper.make_node("Conv", ["y2", "w3"], ["y3"], name="pw"),
        helper.make_node(
            "Conv", ["y3", "w4"], ["y4"], name="grouped", group=4, auto_pad="SAME_UPPER", strides=[2, 2]
        ),
        helper.make_node("Relu", ["y4"], ["y5"]),
        helper.make_node("Flatten", ["y5"], ["y6"]),
        helper.make_node("Gemm", ["y6", "wfc"], ["logits"], transB=1),
    ]
    inits = [weight("w1", 8, 3, 3, 3), weight("w2", 8, 1, 3, 3), weight("w3", 16, 8, 1, 1),
             weight("w4", 16, 4, 3, 3), weight("wfc", 10, 16 * 8 * 8)]  # fmt: skip
    return make_model(nodes, [vinfo("x", [1, 3, 32, 32])], [vinfo("logits", [1, 10])], inits)


def test_cnn_layers(cnn, tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(cnn, str(path))
    for model in (cnn, path, str(path)):
        probs = problems_from_onnx(model)
        assert [p.name for p in probs] == ["stem", "dw", "pw", "grouped", "gemm_6"]
        stem, dw, pw, grouped, fc = probs
        assert stem == conv2d("stem", c=3, k=8, p=16, q=16, r=3, s=3, stride=2, padding=1, input_hw=(32, 32))
        assert dw == conv2d("dw", c=8, k=8, p=16, q=16, r=3, s=3, dilation=2, groups=8, padding=2, input_hw=(16, 16))
        assert dw.dim_names == ("N", "C", "P", "Q", "R", "S")  # depthwise shape, no K
        assert pw == conv2d("pw", c=8, k=16, p=16, q=16, r=1, s=1)
        # SAME_UPPER: one row of padding, at the end (windows reach past the 16 x 16 map)
        assert grouped == conv2d("grouped", c=16, k=16, p=8, q=8, r=3, s=3, stride=2, groups=4, input_hw=(16, 16))
        assert fc == fully_connected("gemm_6", n=1, c=1024, k=10)


def test_matmuls_and_conv1d():
    nodes = [
        # Linear layer on a (1, 7, 10) activation: leading dims fold into N.
        helper.make_node("MatMul", ["t", "wl"], ["u"], name="linear"),
        # Attention-style batched matmul of two activations (2 heads).
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
        # A plain 2-D matmul of two activations, and a Gemm of activations.
        helper.make_node("MatMul", ["a", "b"], ["c"]),
        helper.make_node("Gemm", ["a2", "b2"], ["c2"], name="g", transA=1),
        # Conv1d: (1, 4, 20) with kernel 5, stride 3.
        helper.make_node("Conv", ["seq", "w1d"], ["o1d"], name="c1d", strides=[3]),
        # Duplicate name gets a suffix.
        helper.make_node("MatMul", ["a", "b"], ["c3"], name="linear"),
    ]
    inputs = [vinfo("t", [1, 7, 10]), vinfo("q", [2, 5, 4]), vinfo("kt", [2, 4, 6]), vinfo("a", [3, 4]),
              vinfo("b", [4, 5]), vinfo("a2", [4, 3]), vinfo("b2", [4, 5]), vinfo("seq", [1, 4, 20])]  # fmt: skip
    outputs = [vinfo(n, None) for n in ("u", "s", "c", "c2", "o1d", "c3")]
    model = make_model(nodes, inputs, outputs, [weight("wl", 10, 6), weight("w1d", 8, 4, 5)])
    linear, scores, mm, gemm, c1d, dup = problems_from_onnx(model, word_bits=8)
    assert linear == fully_connected("linear", n=7, c=10, k=6, word_bits=8)
    assert scores == batched_matmul("scores", b=2, m=5, n=6, k=4, word_bits=8)
    assert mm == matmul("matmul_2", m=3, n=5, k=4, word_bits=8)
    assert gemm == matmul("g", m=3, n=5, k=4, word_bits=8)
    assert c1d == conv2d("c1d", c=4, k=8, p=1, q=6, r=1, s=5, stride=(1, 3), word_bits=8)
    assert dup.name == "linear_2"


def test_symbolic_batch_needs_a_value():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[1, 1, 1, 1])]
    model = make_model(nodes, [vinfo("x", ["batch", 3, 8, 8])], [vinfo("y", None)], [weight("w", 4, 3, 3, 3)])
    with pytest.raises(SpecError, match=r"node c \(Conv\): input 'x' has shape \['batch', 3, 8, 8\].*"
                                        r"pass dim_values=\{'batch': VALUE\}"):  # fmt: skip
        problems_from_onnx(model)
    (prob,) = problems_from_onnx(model, dim_values={"batch": 4})
    assert prob == conv2d("c", c=3, k=4, p=8, q=8, r=3, s=3, n=4, padding=1)
    with pytest.raises(SpecError, match="no graph input has"):
        problems_from_onnx(model, dim_values={"seq": 4})


def test_unsupported_and_unreadable(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c3d")]
    model = make_model(nodes, [vinfo("x", [1, 2, 4, 4, 4])], [vinfo("y", None)], [weight("w", 2, 2, 1, 1, 1)])
    with pytest.raises(SpecError, match="3-D convolution"):
        problems_from_onnx(model)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all \xff\xfe")
    with pytest.raises(SpecError, match=r"bad\.onnx: not a readable ONNX model"):
        problems_from_onnx(bad)
    with pytest.raises(SpecError, match=r"missing\.onnx: no such file"):
        problems_from_onnx(tmp_path / "missing.onnx")


def test_missing_onnx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(OptionalDependencyError, match=r"pip install 'accelmap\[onnx\]'"):
        problems_from_onnx("model.onnx")
    with pytest.raises(ImportError):
        problems_from_onnx("model.onnx")
