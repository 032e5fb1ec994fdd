"""Builders: dims, MAC counts, tensor footprints (halos of strided and dilated convs)."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.errors import SpecError
from accelmap.workloads import (
    TensorRole,
    batched_matmul,
    conv2d,
    conv2d_from_input,
    conv_output_size,
    fully_connected,
    matmul,
    pointwise,
)


def tile(problem, **extents):
    """(n_dims,) tile with the given extents and 1 elsewhere."""
    return np.array([extents.get(d, 1) for d in problem.dim_names], dtype=np.int64)


def sizes(problem):
    return dict(zip(problem.tensor_names, problem.tensor_sizes().tolist(), strict=True))


def test_conv2d_shape_and_macs():
    prob = conv2d("l", c=64, k=128, p=28, q=30, r=3, s=5, n=2)
    assert prob.dim_names == ("N", "K", "C", "P", "Q", "R", "S")
    assert prob.tensor_names == ("Weights", "Inputs", "Outputs")
    assert [t.role for t in prob.tensors] == [TensorRole.WEIGHT, TensorRole.INPUT, TensorRole.OUTPUT]
    assert prob.macs == 2 * 128 * 64 * 28 * 30 * 3 * 5
    assert sizes(prob) == {
        "Weights": 128 * 64 * 3 * 5,
        "Inputs": 2 * 64 * (28 + 2) * (30 + 4),
        "Outputs": 2 * 128 * 28 * 30,
    }
    assert prob.tensors[prob.output_index].name == "Outputs"
    assert prob.repeat == 1


def test_conv2d_relevance():
    prob = conv2d("l", c=4, k=8, p=5, q=5, r=3, s=3)
    rel = dict(zip(prob.tensor_names, prob.relevance.tolist(), strict=True))
    d = prob.dim_names
    assert {x for x, r in zip(d, rel["Weights"], strict=True) if r} == {"K", "C", "R", "S"}
    assert {x for x, r in zip(d, rel["Inputs"], strict=True) if r} == {"N", "C", "P", "Q", "R", "S"}
    assert {x for x, r in zip(d, rel["Outputs"], strict=True) if r} == {"N", "K", "P", "Q"}


@pytest.mark.parametrize("stride,dilation", [(1, 1), (2, 1), (1, 2), (3, 2)])
def test_strided_dilated_halo(stride, dilation):
    prob = conv2d("l", c=8, k=8, p=10, q=10, r=3, s=3, stride=stride, dilation=dilation)
    t = tile(prob, C=4, P=4, Q=2, R=3, S=2)
    inputs = prob.footprint(t)[prob.tensor_index("Inputs")]
    rows = stride * (4 - 1) + dilation * (3 - 1) + 1
    cols = stride * (2 - 1) + dilation * (2 - 1) + 1
    assert inputs == 4 * rows * cols
    # Whole input: the padded map the output needs.
    full = stride * (10 - 1) + dilation * (3 - 1) + 1
    assert sizes(prob)["Inputs"] == 8 * full * full


def test_rectangular_stride_and_dilation():
    prob = conv2d("l", c=1, k=1, p=4, q=6, r=3, s=2, stride=(2, 1), dilation=(1, 3))
    assert sizes(prob)["Inputs"] == (2 * 3 + 2 + 1) * (5 + 3 + 1)


def test_depthwise_shape():
    prob = conv2d("dw", c=144, k=144, p=56, q=56, r=3, s=3, groups=144)
    assert prob.dim_names == ("N", "C", "P", "Q", "R", "S")
    assert "K" not in prob.dim_names
    assert prob.macs == 144 * 56 * 56 * 9
    assert [len(t.projection) for t in prob.tensors] == [3, 4, 4]
    assert sizes(prob) == {"Weights": 144 * 9, "Inputs": 144 * 58 * 58, "Outputs": 144 * 56 * 56}


def test_grouped_conv_has_g_dim():
    prob = conv2d("g", c=64, k=128, p=7, q=7, r=3, s=3, groups=4)
    assert prob.dim_names == ("N", "G", "K", "C", "P", "Q", "R", "S")
    b = dict(zip(prob.dim_names, prob.bounds.tolist(), strict=True))
    assert (b["G"], b["K"], b["C"]) == (4, 32, 16)
    assert prob.macs == 128 * (64 // 4) * 49 * 9
    assert sizes(prob) == {"Weights": 128 * 16 * 9, "Inputs": 64 * 9 * 9, "Outputs": 128 * 49}
    # A tile of 2 groups x 3 channels touches exactly 6 input channels.
    t = tile(prob, G=2, C=3)
    assert prob.footprint(t)[prob.tensor_index("Inputs")] == 6


def test_depthwise_multiplier_is_grouped():
    prob = conv2d("dwm", c=32, k=64, p=7, q=7, r=3, s=3, groups=32)
    b = dict(zip(prob.dim_names, prob.bounds.tolist(), strict=True))
    assert (b["G"], b["K"], b["C"]) == (32, 2, 1)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"groups": 3}, "groups = 3 must divide"),
        ({"c": 0}, "c = 0; expected an int >= 1"),
        ({"p": -1}, "p = -1"),
        ({"stride": 0}, "stride = 0"),
        ({"stride": (1, 2, 3)}, "stride"),
        ({"r": 2.0}, "r = 2.0"),
        ({"word_bits": True}, "word_bits"),
    ],
)
def test_conv2d_rejects_bad_arguments(kwargs, match):
    args = dict(c=8, k=8, p=4, q=4, r=3, s=3) | kwargs
    with pytest.raises(SpecError, match=match):
        conv2d("bad", **args)


def test_conv2d_rejects_empty_name():
    with pytest.raises(SpecError, match="name"):
        conv2d("", c=1, k=1, p=1, q=1, r=1, s=1)


def test_conv2d_from_input():
    prob = conv2d_from_input("conv1", c=3, k=64, h=224, w=224, r=7, s=7, stride=2, padding=3)
    b = dict(zip(prob.dim_names, prob.bounds.tolist(), strict=True))
    assert (b["P"], b["Q"]) == (112, 112)
    prob = conv2d_from_input("d", c=1, k=1, h=32, w=20, r=3, s=3, dilation=2, padding=(2, 0))
    b = dict(zip(prob.dim_names, prob.bounds.tolist(), strict=True))
    assert (b["P"], b["Q"]) == (32, 16)
    assert conv_output_size(56, 3, stride=2, padding=1) == 28
    with pytest.raises(SpecError, match="larger than the padded"):
        conv2d_from_input("x", c=1, k=1, h=2, w=2, r=3, s=3)


def test_pointwise():
    prob = pointwise("pw", c=32, k=16, p=112, q=112)
    assert prob.macs == 32 * 16 * 112 * 112
    assert sizes(prob)["Inputs"] == 32 * 112 * 112


def test_matmul():
    prob = matmul("mm", m=3, n=5, k=7, word_bits=8, repeat=2)
    assert prob.dim_names == ("M", "N", "K")
    assert sizes(prob) == {"A": 21, "B": 35, "C": 15}
    assert [t.role.value for t in prob.tensors] == ["input", "weight", "output"]
    assert prob.macs == 105 and prob.repeat == 2
    assert all(t.word_bits == 8 for t in prob.tensors)


def test_batched_matmul():
    prob = batched_matmul("qk", b=12, m=128, n=128, k=64)
    assert prob.dim_names == ("B", "M", "N", "K")
    assert sizes(prob) == {"A": 12 * 128 * 64, "B": 12 * 64 * 128, "C": 12 * 128 * 128}
    assert prob.macs == 12 * 128 * 128 * 64
    assert prob.relevance.all(axis=0)[0]  # every tensor is batched


def test_fully_connected():
    prob = fully_connected("fc", n=16, c=2048, k=1000)
    assert prob.dim_names == ("N", "K", "C")
    assert sizes(prob) == {"Weights": 2048000, "Inputs": 16 * 2048, "Outputs": 16000}
    with pytest.raises(SpecError, match="k = 0"):
        fully_connected("fc", n=1, c=1, k=0)
