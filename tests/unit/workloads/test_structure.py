"""Structural recognition (`accelmap.workloads.structure`): kinds and dim roles come from
the projections, so renaming every dim changes nothing but the names."""

from __future__ import annotations

import pytest

from accelmap.errors import SpecError
from accelmap.workloads.builders import batched_matmul, conv2d, fully_connected, matmul
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term
from accelmap.workloads.structure import DimRole, GemmClass, ProblemKind, recognize, require_kind

R = DimRole


def rename(problem: Problem, names: dict[str, str]) -> Problem:
    """``problem`` with its dims renamed (and the dims listed in reverse order)."""
    dims = tuple(Dim(name=names[d.name], bound=d.bound) for d in reversed(problem.dims))
    tensors = tuple(
        Tensor(name=t.name, role=t.role, word_bits=t.word_bits,
               projection=tuple(tuple(Term(dim=names[x.dim], coef=x.coef) for x in c) for c in t.projection))
        for t in problem.tensors)
    return Problem(name=problem.name, dims=dims, tensors=tensors)


def roles_by_name(p: Problem) -> dict[str, DimRole]:
    return dict(zip(p.dim_names, recognize(p).roles, strict=True))


CASES = [
    (conv2d("conv", c=8, k=16, p=6, q=5, r=3, s=3, n=2, stride=2), ProblemKind.CONV,
     {"N": R.BATCH, "K": R.OUT_CHANNEL, "C": R.IN_CHANNEL, "P": R.OUT_ROW, "Q": R.OUT_COL,
      "R": R.FILTER_ROW, "S": R.FILTER_COL}),
    (conv2d("dw", c=8, k=8, p=6, q=5, r=3, s=3, groups=8), ProblemKind.DEPTHWISE_CONV,
     {"C": R.CHANNEL, "P": R.OUT_ROW, "Q": R.OUT_COL, "R": R.FILTER_ROW, "S": R.FILTER_COL}),
    (conv2d("g", c=8, k=8, p=4, q=4, r=3, s=3, groups=2), ProblemKind.GROUPED_CONV,
     {"G": R.GROUP, "K": R.OUT_CHANNEL, "C": R.IN_CHANNEL, "P": R.OUT_ROW}),
    (matmul("mm", m=4, n=6, k=8), ProblemKind.GEMM, {"M": R.GEMM_M, "N": R.GEMM_N, "K": R.GEMM_K}),
    (batched_matmul("bmm", b=3, m=4, n=6, k=8), ProblemKind.BATCHED_MATMUL,
     {"B": R.BATCH, "M": R.GEMM_M, "N": R.GEMM_N, "K": R.GEMM_K}),
    (fully_connected("fc", n=2, c=8, k=4), ProblemKind.GEMM, {"N": R.GEMM_M, "K": R.GEMM_N, "C": R.GEMM_K}),
]


@pytest.mark.parametrize(("problem", "kind", "roles"), CASES, ids=[c[0].name for c in CASES])
def test_kinds_and_roles_do_not_depend_on_names(problem: Problem, kind: ProblemKind, roles: dict) -> None:
    s = recognize(problem)
    assert s.kind is kind
    got = roles_by_name(problem)
    assert {d: got[d] for d in roles} == roles
    names = {d: f"loop_{i}{d.lower()}" for i, d in enumerate(problem.dim_names)}
    renamed = rename(problem, names)
    s2 = recognize(renamed)
    assert s2.kind is kind
    got2 = roles_by_name(renamed)
    assert {d: got2[names[d]] for d in roles} == roles
    assert all(names[d] in s2.describe() for d in roles)  # reported with the user's names


def test_windows_carry_stride_and_dilation() -> None:
    p = conv2d("c", c=4, k=4, p=5, q=6, r=3, s=2, stride=(2, 3), dilation=(1, 2))
    s = recognize(p)
    assert [(p.dim_names[w.out_dim], p.dim_names[w.filter_dim], w.stride, w.dilation) for w in s.windows] == \
        [("P", "R", 2, 1), ("Q", "S", 3, 2)]
    assert not s.irregular


def test_timeloop_cnn_layer_is_a_convolution(tmp_path) -> None:
    from accelmap.workloads.timeloop import problem_from_timeloop

    text = """
problem:
  shape:
    name: CNN-Layer
    dimensions: [C, M, R, S, N, P, Q]
    coefficients: [{name: Wstride, default: 1}, {name: Hstride, default: 1}]
    data-spaces:
    - {name: Weights, projection: [[[C]], [[M]], [[R]], [[S]]]}
    - {name: Inputs, projection: [[[N]], [[C]], [[R], [P, Wstride]], [[S], [Q, Hstride]]]}
    - {name: Outputs, projection: [[[N]], [[M]], [[Q]], [[P]]], read-write: true}
  instance: {C: 8, M: 16, R: 3, S: 3, N: 1, P: 7, Q: 7, Wstride: 2, Hstride: 2}
"""
    import yaml

    p = problem_from_timeloop(yaml.safe_load(text), "cnn.yaml")
    s = recognize(p)
    assert s.kind is ProblemKind.CONV
    assert roles_by_name(p) == {"C": R.IN_CHANNEL, "M": R.OUT_CHANNEL, "R": R.FILTER_ROW, "S": R.FILTER_COL,
                                "N": R.BATCH, "P": R.OUT_ROW, "Q": R.OUT_COL}
    assert [w.stride for w in s.windows] == [2, 2]


def test_other_kinds_say_why() -> None:
    dims = (Dim(name="I", bound=4), Dim(name="J", bound=4), Dim(name="X", bound=3))
    t = (Tensor(name="A", projection=((Term(dim="I"),), (Term(dim="J"),)), role=TensorRole.INPUT),
         Tensor(name="B", projection=((Term(dim="J"),),), role=TensorRole.WEIGHT),
         Tensor(name="Y", projection=((Term(dim="I"),), (Term(dim="X"),)), role=TensorRole.OUTPUT))
    s = recognize(Problem(name="odd", dims=dims, tensors=t))
    assert s.kind is ProblemKind.OTHER and not s.has_gemm_view
    assert "dim X indexes ['Y']" in s.note
    assert s.gemm_class[0] is GemmClass.M
    with pytest.raises(SpecError, match=r"the aspect model takes convolution, .*; found other \(dim X"):
        require_kind(Problem(name="odd", dims=dims, tensors=t), (ProblemKind.CONV, ProblemKind.GEMM), "aspect")


def test_irregular_windows_are_flagged() -> None:
    dims = (Dim(name="P", bound=4), Dim(name="R", bound=3), Dim(name="S", bound=2))
    t = (Tensor(name="W", projection=((Term(dim="R"),), (Term(dim="S"),)), role=TensorRole.WEIGHT),
         Tensor(name="I", projection=((Term(dim="P"), Term(dim="R", coef=2), Term(dim="S")),), role=TensorRole.INPUT),
         Tensor(name="O", projection=((Term(dim="P"),),), role=TensorRole.OUTPUT))
    p = Problem(name="odd", dims=dims, tensors=t)
    s = recognize(p)
    assert s.kind is ProblemKind.CONV and s.has_gemm_view and "not stride*p + dilation*r" in s.irregular
    with pytest.raises(SpecError, match="irregular"):
        require_kind(p, (ProblemKind.CONV,), "aspect")


def test_strided_pointwise_without_filter_dims() -> None:
    dims = (Dim(name="oc", bound=4), Dim(name="ic", bound=8), Dim(name="y", bound=5), Dim(name="x", bound=5))
    t = (Tensor(name="W", projection=((Term(dim="oc"),), (Term(dim="ic"),)), role=TensorRole.WEIGHT),
         Tensor(name="I", projection=((Term(dim="ic"),), (Term(dim="y", coef=2),), (Term(dim="x", coef=2),)),
                role=TensorRole.INPUT),
         Tensor(name="O", projection=((Term(dim="oc"),), (Term(dim="y"),), (Term(dim="x"),)), role=TensorRole.OUTPUT))
    p = Problem(name="pw", dims=dims, tensors=t)
    s = recognize(p)
    assert s.kind is ProblemKind.CONV
    assert roles_by_name(p) == {"oc": R.OUT_CHANNEL, "ic": R.IN_CHANNEL, "y": R.OUT_ROW, "x": R.OUT_COL}
    assert [(w.filter_dim, w.stride) for w in s.windows] == [(None, 2), (None, 2)]


def test_operands_found_by_windows_when_roles_disagree() -> None:
    """The operand with the sliding window is the input even when both say ``input``."""
    p = conv2d("c", c=4, k=4, p=4, q=4, r=3, s=3)
    t = tuple(Tensor(name=x.name, projection=x.projection, word_bits=x.word_bits,
                     role=TensorRole.INPUT if x.role is TensorRole.WEIGHT else x.role) for x in p.tensors)
    q = Problem(name="c", dims=p.dims, tensors=t)
    s = recognize(q)
    assert q.tensors[s.input].name == p.tensors[recognize(p).input].name
    assert s.kind is ProblemKind.CONV
