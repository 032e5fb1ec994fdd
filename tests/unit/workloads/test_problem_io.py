"""accelmap problem files: round trips, strict parsing, the malformed-input corpus, load_problem."""

from __future__ import annotations

import sys
import types

import pytest

from accelmap.errors import SpecError, UnknownPluginError
from accelmap.workloads import batched_matmul, conv2d, fully_connected, matmul, network
from accelmap.workloads.io import (
    load_problem,
    load_problem_file,
    problem_from_dict,
    problem_to_dict,
    read_spec_file,
    save_problem,
)

GOOD = """\
version: 1
problem:
  name: conv
  dims: {N: 1, K: 8, C: 4, P: 5, Q: 5, R: 3, S: 3}
  tensors:
  - name: Weights
    role: weight
    projection: [[K], [C], [R], [S]]
  - name: Inputs
    role: input
    word_bits: 8
    projection:
    - [N]
    - [C]
    - [{dim: P, coef: 2}, R]
    - [{dim: Q, coef: 2}, {dim: S, coef: 1}]
  - name: Outputs
    role: output
    projection: [[N], [K], [P], [Q]]
"""


def test_good_file_matches_builder(tmp_path):
    f = tmp_path / "conv.yaml"
    f.write_text(GOOD)
    prob = load_problem_file(f)
    ref = conv2d("conv", c=4, k=8, p=5, q=5, r=3, s=3, stride=2)
    assert prob.dim_names == ref.dim_names
    assert prob.tensor_sizes().tolist() == ref.tensor_sizes().tolist()
    assert prob.tensors[1].word_bits == 8 and prob.tensors[0].word_bits == 16
    assert load_problem(str(f)) == prob


@pytest.mark.parametrize(
    "problem",
    [
        conv2d("c", c=16, k=32, p=7, q=9, r=3, s=1, stride=(2, 1), dilation=2, n=2, repeat=3),
        conv2d("dw", c=32, k=32, p=7, q=7, r=3, s=3, groups=32, word_bits=8),
        conv2d("g", c=32, k=64, p=7, q=7, r=3, s=3, groups=4),
        matmul("mm", m=3, n=4, k=5),
        batched_matmul("bmm", b=2, m=3, n=4, k=5),
        fully_connected("fc", n=2, c=3, k=4),
    ],
    ids=lambda p: p.name,
)
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_file_round_trip(tmp_path, problem, suffix):
    f = tmp_path / f"p{suffix}"
    save_problem(problem, f)
    back = load_problem_file(f)
    assert back == problem
    assert back.coefficients.tolist() == problem.coefficients.tolist()


def test_every_zoo_layer_round_trips():
    for name in ("resnet50", "mobilenet_v2", "bert_base_128"):
        for p in network(name).layers:
            assert problem_from_dict(problem_to_dict(p)) == p


def test_written_yaml_is_readable(tmp_path):
    f = tmp_path / "c.yaml"
    save_problem(conv2d("c", c=4, k=8, p=5, q=5, r=3, s=3, stride=2), f)
    text = f.read_text()
    assert text.startswith("version: 1\n")
    assert "{dim: P, coef: 2}" in text
    assert "dims: {N: 1, K: 8, C: 4, P: 5, Q: 5, R: 3, S: 3}" in text


# --- the malformed-input corpus: each must name the file and the key path ---------------
def _replace(old, new):
    assert old in GOOD
    return GOOD.replace(old, new, 1)


CORPUS = {
    "unknown_key": (
        _replace("    role: input\n", "    role: input\n    projektion: []\n"),
        r"bad\.yaml: problem\.tensors\[1\]\.projektion: unknown key \(did you mean 'projection'\?\); "
        r"accepted keys: name, role, word_bits, projection",
    ),
    "unknown_top_key": (
        "extra: 1\n" + GOOD,
        r"bad\.yaml: extra: unknown key; accepted keys: version, problem",
    ),
    "unknown_problem_key": (
        _replace("  name: conv\n", "  name: conv\n  bounds: {}\n"),
        r"bad\.yaml: problem\.bounds: unknown key",
    ),
    "unknown_term_key": (
        _replace("{dim: P, coef: 2}", "{dim: P, coeff: 2}"),
        r"bad\.yaml: problem\.tensors\[1\]\.projection\[2\]\[0\]\.coeff: unknown key.*accepted keys: dim, coef",
    ),
    "negative_bound": (
        _replace("P: 5,", "P: -5,"),
        r"bad\.yaml: problem\.dims\.P = -5; expected an int >= 1",
    ),
    "zero_bound": (_replace("K: 8,", "K: 0,"), r"problem\.dims\.K = 0; expected an int >= 1"),
    "float_bound": (_replace("K: 8,", "K: 8.5,"), r"problem\.dims\.K = 8\.5 \(a float\); expected an int"),
    "string_bound": (_replace("K: 8,", "K: '8',"), r"problem\.dims\.K = '8' \(a string\); expected an int"),
    "unknown_dim_in_projection": (
        _replace("[{dim: P, coef: 2}, R]", "[{dim: P, coef: 2}, Z]"),
        r"bad\.yaml: problem\.tensors\[1\]\.projection\[2\]\[1\] = 'Z': unknown dimension; "
        r"known dimensions: N, K, C, P, Q, R, S",
    ),
    "unknown_dim_in_term_mapping": (
        _replace("{dim: P, coef: 2}", "{dim: X, coef: 2}"),
        r"problem\.tensors\[1\]\.projection\[2\]\[0\]\.dim = 'X': unknown dimension",
    ),
    "bad_coef": (
        _replace("{dim: P, coef: 2}", "{dim: P, coef: 0}"),
        r"problem\.tensors\[1\]\.projection\[2\]\[0\]\.coef = 0; expected an int >= 1",
    ),
    "mini_language": (
        _replace("[{dim: P, coef: 2}, R]", "[2*P + R]"),
        r"problem\.tensors\[1\]\.projection\[2\]\[0\] = '2\*P \+ R': unknown dimension",
    ),
    "missing_version": (
        GOOD.replace("version: 1\n", ""),
        r"bad\.yaml: version is missing; expected `version: 1`",
    ),
    "wrong_version": (
        GOOD.replace("version: 1", "version: 2"),
        r"bad\.yaml: version = 2 \(an int\); expected 1",
    ),
    "float_version": (GOOD.replace("version: 1", "version: 1.0"), r"version = 1\.0 \(a float\); expected 1"),
    "missing_problem": ("version: 1\n", r"bad\.yaml: problem is missing"),
    "missing_role": (
        _replace("    role: weight\n", ""),
        r"bad\.yaml: problem\.tensors\[0\]\.role is missing; a tensor needs keys name, role, projection",
    ),
    "bad_role": (
        _replace("role: weight", "role: weights"),
        r"problem\.tensors\[0\]\.role = 'weights' \(did you mean 'weight'\?\); expected one of input, weight, output",
    ),
    "bad_word_bits": (_replace("word_bits: 8", "word_bits: -8"), r"problem\.tensors\[1\]\.word_bits = -8"),
    "empty_coordinate": (
        _replace("projection: [[K], [C], [R], [S]]", "projection: [[K], [], [R], [S]]"),
        r"problem\.tensors\[0\]\.projection\[1\] = \[\] \(a list\); expected a non-empty list of terms",
    ),
    "projection_not_list": (
        _replace("projection: [[K], [C], [R], [S]]", "projection: K"),
        r"problem\.tensors\[0\]\.projection = 'K' \(a string\); expected a non-empty list of coordinates",
    ),
    "dims_as_list": (
        _replace("dims: {N: 1, K: 8, C: 4, P: 5, Q: 5, R: 3, S: 3}", "dims: [N, K]"),
        r"problem\.dims = \['N', 'K'\] \(a list\); expected a non-empty mapping",
    ),
    "two_outputs": (
        _replace("role: weight", "role: output"),
        r"bad\.yaml: problem conv: 2 output tensors; expected exactly one",
    ),
    "duplicate_tensor": (
        _replace("name: Inputs", "name: Weights"),
        r"bad\.yaml: problem conv: duplicate tensor names \['Weights'\]",
    ),
    "top_level_list": ("- 1\n- 2\n", r"bad\.yaml: the top level is a list \(\[1, 2\]\); expected a problem file with keys version, problem"),
    "bad_yaml": (
        _replace("  - name: Outputs\n", "  - name: Outputs\n   role: [\n"),
        r"bad\.yaml: line \d+, column \d+: invalid YAML",
    ),
    "duplicate_key": (
        _replace("  name: conv\n", "  name: conv\n  name: conv2\n"),
        r"bad\.yaml: line 4, column 3: invalid YAML: duplicate key 'name' \(first given on line 3\)",
    ),
}


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_malformed_corpus(tmp_path, case):
    text, pattern = CORPUS[case]
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(SpecError, match=pattern):
        load_problem_file(f)


def test_bad_json_reports_line(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"version": 1,\n "problem": {,}}\n')
    with pytest.raises(SpecError, match=r"bad\.json: line 2, column \d+: invalid JSON"):
        load_problem_file(f)


def test_problem_from_dict_default_source():
    with pytest.raises(SpecError, match=r"^<dict>: version is missing"):
        problem_from_dict({"problem": {}})
    with pytest.raises(SpecError, match=r"^net\.yaml: problem\.name"):
        problem_from_dict({"version": 1, "problem": {"name": 3, "dims": {}, "tensors": []}}, "net.yaml")


# --- load_problem ------------------------------------------------------------------------
def test_load_problem_zoo_names():
    assert load_problem("resnet50/conv3_1").name == "res3a_branch2b"
    assert load_problem("vgg16/fc6").macs == 25088 * 4096


def test_load_problem_missing_file():
    with pytest.raises(SpecError, match=r"nope\.yaml: no such file"):
        load_problem("nope.yaml")
    with pytest.raises(
        SpecError,
        match=r"no such file.*not a zoo network.*Did you mean 'resnet50'.*Zoo networks: resnet50, vgg16",
    ):
        load_problem("resnet51/conv1")
    with pytest.raises(SpecError, match=r"no such file, and not a zoo layer.*Zoo networks: resnet50"):
        load_problem("whatever")
    with pytest.raises(SpecError, match=r"'vgg16' is a zoo network, not one layer.*conv1_1"):
        load_problem("vgg16")
    with pytest.raises(UnknownPluginError, match=r"Did you mean .*'conv1'"):
        load_problem("resnet50/conv")


def test_load_problem_dispatches_timeloop(tmp_path, monkeypatch):
    seen = {}
    sentinel = matmul("from_timeloop", m=1, n=1, k=1)

    def fake(data, source):
        seen["data"], seen["source"] = data, source
        return sentinel

    module = types.ModuleType("accelmap.workloads.timeloop")
    module.problem_from_timeloop = fake
    monkeypatch.setitem(sys.modules, "accelmap.workloads.timeloop", module)
    f = tmp_path / "prob.yaml"
    f.write_text("problem:\n  shape: {name: CNN-Layer}\n  instance: {C: 3}\n")
    assert load_problem(str(f)) is sentinel
    assert seen["source"] == str(f)
    assert seen["data"]["problem"]["instance"] == {"C": 3}


def test_read_spec_file_errors(tmp_path):
    with pytest.raises(SpecError, match="is a directory"):
        read_spec_file(tmp_path)
    (tmp_path / "e.yaml").write_text("")
    with pytest.raises(SpecError, match=r"e\.yaml: the top level is empty \(None\); expected a problem file"):
        load_problem_file(tmp_path / "e.yaml")
