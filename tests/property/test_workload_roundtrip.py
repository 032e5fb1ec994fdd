"""Property: any builder problem survives problem_to_dict -> (YAML/JSON text) -> problem_from_dict."""

from __future__ import annotations

import json

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from accelmap.workloads import batched_matmul, conv2d, fully_connected, matmul
from accelmap.workloads.io import problem_from_dict, problem_to_dict

small = st.integers(min_value=1, max_value=64)
pair = st.one_of(st.integers(1, 4), st.tuples(st.integers(1, 4), st.integers(1, 4)))


@st.composite
def conv_problems(draw):
    groups = draw(st.integers(1, 8))
    mode = draw(st.sampled_from(["plain", "grouped", "depthwise"]))
    if mode == "plain":
        groups = 1
    c = groups * draw(st.integers(1, 8))
    k = c if mode == "depthwise" else groups * draw(st.integers(1, 8))
    return conv2d(
        draw(st.text("abcxyz_019", min_size=1, max_size=8)),
        c=c, k=k, p=draw(small), q=draw(small), r=draw(st.integers(1, 7)), s=draw(st.integers(1, 7)),
        n=draw(st.integers(1, 4)), stride=draw(pair), dilation=draw(pair), groups=groups,
        word_bits=draw(st.sampled_from([4, 8, 16, 32])), repeat=draw(st.integers(1, 10)),
    )  # fmt: skip


@st.composite
def matmul_problems(draw):
    kind = draw(st.sampled_from(["mm", "bmm", "fc"]))
    m, n, k = draw(small), draw(small), draw(small)
    bits, rep = draw(st.sampled_from([8, 16])), draw(st.integers(1, 5))
    if kind == "mm":
        return matmul("mm", m=m, n=n, k=k, word_bits=bits, repeat=rep)
    if kind == "bmm":
        return batched_matmul("bmm", b=draw(st.integers(1, 16)), m=m, n=n, k=k, word_bits=bits, repeat=rep)
    return fully_connected("fc", n=m, c=n, k=k, word_bits=bits, repeat=rep)


problems = st.one_of(conv_problems(), matmul_problems())


@settings(max_examples=150, deadline=None)
@given(problems)
def test_dict_round_trip(problem):
    back = problem_from_dict(problem_to_dict(problem))
    assert back == problem
    assert back.coefficients.tolist() == problem.coefficients.tolist()
    assert back.tensor_sizes().tolist() == problem.tensor_sizes().tolist()


@settings(max_examples=60, deadline=None)
@given(problems)
def test_text_round_trip(problem):
    data = problem_to_dict(problem)
    via_yaml = yaml.safe_load(yaml.safe_dump(data, sort_keys=False, default_flow_style=None))
    via_json = json.loads(json.dumps(data))
    assert problem_from_dict(via_yaml) == problem
    assert problem_from_dict(via_json) == problem
