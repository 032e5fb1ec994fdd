"""`accelmap import`: ONNX models and Timeloop files become accelmap files that load back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accelmap.arch.io import load_arch
from accelmap.cli import main
from accelmap.workloads.io import load_problem

REPO = Path(__file__).resolve().parents[2]
TL_ARCH = REPO / "tests" / "golden" / "data" / "timeloop" / "eyeriss_like"


def _onnx_model(path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), dtype=np.float32), "w")
    b = numpy_helper.from_array(np.zeros((16, 8 * 4 * 4), dtype=np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["y"], name="stem", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Flatten", ["y"], ["f"]),
        helper.make_node("Gemm", ["f", "b"], ["z"], name="head", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 16])], initializer=[w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_import_onnx_writes_one_problem_per_layer(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    _onnx_model(model)
    assert main(["import", str(model), "--out", str(tmp_path / "out")]) == 0
    files = sorted((tmp_path / "out").glob("*.yaml"))
    assert [f.stem for f in files] == ["head", "stem"]
    stem = load_problem(str(tmp_path / "out" / "stem.yaml"))
    assert stem.macs == 8 * 3 * 4 * 4 * 3 * 3


def test_import_timeloop_arch_round_trips_through_accelmap_format(tmp_path, capsys):
    assert main(["import", str(TL_ARCH / "arch.yaml"), "--energy", str(TL_ARCH / "ERT.yaml"),
                 "--out", str(tmp_path)]) == 0
    original = load_arch(str(TL_ARCH / "arch.yaml"), energy=str(TL_ARCH / "ERT.yaml"))
    again = load_arch(str(tmp_path / "arch.accelmap.yaml"))
    assert again.levels == original.levels and again.compute == original.compute


def test_import_timeloop_problem(tmp_path, capsys):
    src = tmp_path / "prob.yaml"
    src.write_text(
        "problem:\n  shape:\n    name: GEMM\n    dimensions: [M, N, K]\n    data-spaces:\n"
        "    - {name: A, projection: [[[M]], [[K]]]}\n    - {name: B, projection: [[[K]], [[N]]]}\n"
        "    - {name: Z, projection: [[[M]], [[N]]], read-write: true}\n"
        "  instance: {M: 8, N: 4, K: 2}\n")
    assert main(["import", str(src), "--out", str(tmp_path / "o")]) == 0
    p = load_problem(str(tmp_path / "o" / "prob.accelmap.yaml"))
    assert p.macs == 64 and p.tensors[p.output_index].name == "Z"


def test_import_unknown_content_is_a_user_error(tmp_path, capsys):
    bad = tmp_path / "x.yaml"
    bad.write_text("hello: 1\n")
    assert main(["import", str(bad)]) == 2
    assert "not an ONNX model" in capsys.readouterr().err


def test_import_bad_out_and_binary_source_are_user_errors(tmp_path, capsys):
    src = tmp_path / "prob.yaml"
    src.write_text("hello: 1\n")
    not_a_dir = tmp_path / "taken"
    not_a_dir.write_text("")
    assert main(["import", str(src), "--out", str(not_a_dir)]) == 2
    assert "a file, not a folder" in capsys.readouterr().err
    binary = tmp_path / "model.yaml"
    binary.write_bytes(bytes(range(128, 256)))
    assert main(["import", str(binary), "--out", str(tmp_path / "o")]) == 2
    assert "not a text file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing created for a failed import
    assert main(["search", "resnet50/fc", "--arch", str(binary)]) == 2  # the same for an arch file
    assert "not a text file" in capsys.readouterr().err


def test_import_onnx_layers_whose_names_collide_get_numbered_files(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w1 = numpy_helper.from_array(np.zeros((16, 16), dtype=np.float32), "w1")
    w2 = numpy_helper.from_array(np.zeros((16, 16), dtype=np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["y"], name="fc/1"),
             helper.make_node("MatMul", ["y", "w2"], ["z"], name="fc_1")]
    graph = helper.make_graph(
        nodes, "clash", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 16])], initializer=[w1, w2])
    model = tmp_path / "clash.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    assert main(["import", str(model), "--out", str(tmp_path / "out")]) == 0
    assert sorted(f.name for f in (tmp_path / "out").glob("*.yaml")) == ["fc_1.yaml", "fc_1_2.yaml"]
