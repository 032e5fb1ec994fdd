"""Padding and input extents in the `Problem` spec: which projected words exist, the YAML
keys, the builders, ONNX and zoo layers, and the models that count only existing words."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.errors import SpecError
from accelmap.workloads.builders import conv2d, conv2d_from_input
from accelmap.workloads.io import problem_from_dict, problem_to_dict
from accelmap.workloads.problem import Tensor, TensorRole, Term
from accelmap.workloads.zoo import layer


def test_tensor_checks_pad_and_extent() -> None:
    proj = ((Term(dim="P"),), (Term(dim="R"),))
    with pytest.raises(SpecError, match=r"pad = \[1\]; expected 2 ints >= 0"):
        Tensor(name="I", projection=proj, role=TensorRole.INPUT, pad=(1,), extent=(3, 3))
    with pytest.raises(SpecError, match="extent"):
        Tensor(name="I", projection=proj, role=TensorRole.INPUT, extent=(3, 0))
    with pytest.raises(SpecError, match="pad without extent"):
        Tensor(name="I", projection=proj, role=TensorRole.INPUT, pad=(0, 1))


def test_existing_words_of_a_padded_convolution() -> None:
    p = conv2d_from_input("c", c=3, k=4, h=8, w=6, r=3, s=3, padding=1)  # 'same': 8 x 6 out
    assert p.tensors[1].pad == (0, 0, 1, 1) and p.tensors[1].extent == (1, 3, 8, 6)
    w, i, o = p.existing_words()
    assert (w, i, o) == (4 * 3 * 9, 3 * 8 * 6, 4 * 8 * 6)
    assert int(p.tensor_sizes()[1]) == 3 * 10 * 8  # the span includes the halo
    assert p.existing_fraction()[1] == pytest.approx(48 / 80)
    assert p.existing_fraction()[0] == 1.0


def test_rounded_up_strided_output_reads_past_the_edge() -> None:
    """SCALE-Sim's ofmap rounding: 29 windows at stride 2 over a 56-wide map; the last one
    starts at 56, past the edge."""
    p = conv2d("s", c=64, k=8, p=29, q=29, r=1, s=1, stride=2, input_hw=(56, 56))
    assert int(p.existing_words()[1]) == 28 * 28 * 64
    # strided coordinates count the values reached, not the span
    q = conv2d("t", c=2, k=2, p=4, q=4, r=1, s=1, stride=3)
    assert int(q.existing_words()[1]) == 2 * 4 * 4 and int(q.tensor_sizes()[1]) == 2 * 10 * 10


def test_yaml_round_trip_and_strict_keys() -> None:
    p = conv2d_from_input("c", c=3, k=4, h=8, w=8, r=3, s=3, stride=2, padding=1)
    d = problem_to_dict(p)
    t_in = d["problem"]["tensors"][1]
    assert t_in["pad"] == [0, 0, 1, 1] and t_in["extent"] == [1, 3, 8, 8]
    assert problem_from_dict(d) == p
    assert "pad" not in problem_to_dict(conv2d("u", c=3, k=4, p=4, q=4, r=3, s=3))["problem"]["tensors"][1]
    t_in["extent"] = [1, 3, 8]
    with pytest.raises(SpecError, match=r"tensors\[1\]\.extent has 3 entries; expected 4"):
        problem_from_dict(d)
    t_in["extent"] = [1, 3, 8, 8]
    t_in["pad"] = [0, 0, -1, 1]
    with pytest.raises(SpecError, match=r"tensors\[1\]\.pad\[2\] = -1; expected an int >= 0"):
        problem_from_dict(d)
    del t_in["extent"]
    t_in["pad"] = [0, 0, 1, 1]
    with pytest.raises(SpecError, match="pad without"):
        problem_from_dict(d)


def test_zoo_layers_carry_their_padding() -> None:
    conv1 = layer("resnet50/conv1")
    assert conv1.tensors[1].pad == (0, 0, 3, 3) and conv1.tensors[1].extent[2:] == (224, 224)
    c31 = layer("resnet50/conv3_1")  # 3x3/2 on 56 x 56, pad 1: the span 57 reaches padding
    assert c31.tensors[1].extent[2:] == (56, 56) and int(c31.existing_words()[1]) == 128 * 56 * 56
    assert layer("vgg16/conv1_1").tensors[1].extent[2:] == (224, 224)


def test_loopnest_counts_only_existing_words() -> None:
    from accelmap.arch.presets import preset
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.search.api import build_space

    padded = conv2d_from_input("c", c=8, k=8, h=14, w=14, r=3, s=3, padding=1)
    plain = conv2d("c", c=8, k=8, p=14, q=14, r=3, s=3)  # the same loops, halo folded in
    arch = preset("eyeriss-like")
    batch = build_space(plain, arch).sample_valid(16, np.random.default_rng(0))
    model = LoopNestModel()
    a, b = model.evaluate(padded, arch, batch), model.evaluate(plain, arch, batch)
    frac = 14 * 14 / (16 * 16)
    assert np.allclose(a.reads[:, :, 1], b.reads[:, :, 1] * frac)
    assert np.allclose(a.reads[:, :, 0], b.reads[:, :, 0]) and np.allclose(a.updates, b.updates)
    assert np.all(a.energy_pj <= b.energy_pj) and np.array_equal(a.cycles, b.cycles)
    for i in range(4):  # the scalar path agrees
        one = model.evaluate_one(padded, arch, batch[i])
        assert np.allclose(one.reads[0], a.reads[i]) and one.energy_pj[0] == pytest.approx(a.energy_pj[i])


def test_metrics_table_keeps_padded_counts_in_their_columns() -> None:
    """A padded tensor's counts are fractional (scaled by the share of its words that exist):
    each row of the table still has its six columns."""
    from accelmap.arch.presets import preset
    from accelmap.costmodels.loopnest import LoopNestModel
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    problem, arch = load_problem("resnet50/conv3_1"), preset("eyeriss-like")
    batch = MapSpace(problem, arch).sample_valid(20, np.random.default_rng(0))
    metrics = LoopNestModel().evaluate(problem, arch, batch)
    fractional = 0
    for i in range(len(batch)):
        table = metrics.table(i).splitlines()
        start = next(k for k, line in enumerate(table) if line.startswith("level"))
        rows = [line.split() for line in table[start + 1:] if not line.startswith("compute")]
        assert rows and all(len(r) == 6 for r in rows), table
        counts = [v for r in rows for v in r[2:5]]
        assert all(len(v.partition(".")[2]) <= 1 for v in counts), counts  # one decimal at most
        fractional += sum("." in v for v in counts)
    assert fractional  # the padded inputs' counts are fractional somewhere


def test_padded_iteration_keeps_the_real_words() -> None:
    """Imperfect factorization runs a padded iteration space: same tensors, larger bounds,
    and only the words of the real problem exist."""
    p = conv2d("c", n=1, k=4, c=3, p=7, q=7, r=3, s=3)  # unpadded: every spanned word exists
    q = p.padded_iteration([1, 4, 3, 8, 7, 3, 3])
    assert q.real_bounds == (1, 4, 3, 7, 7, 3, 3) and q.bounds.tolist() == [1, 4, 3, 8, 7, 3, 3]
    assert q.has_padding and not p.has_padding
    assert q.macs == 8 * 7 * 4 * 3 * 9 and q.real_macs == p.macs == p.real_macs
    assert q is p.padded_iteration((1, 4, 3, 8, 7, 3, 3))  # cached: one object per bounds
    assert p.padded_iteration(p.bounds) is p
    # weights untouched; inputs 10 x 9 rows x cols of 9 x 9 exist; outputs 8 x 7 of 7 x 7
    np.testing.assert_allclose(q.existing_fraction(), [1.0, 9 * 9 / (10 * 9), 7 * 7 / (8 * 7)])
    assert q.existing_words().tolist() == p.existing_words().tolist()
    # padding a padded iteration again keeps the real bounds of the first
    assert q.padded_iteration([1, 4, 3, 8, 8, 3, 3]).real_bounds == p.padded_iteration([1, 4, 3, 8, 8, 3, 3]).real_bounds
    with pytest.raises(SpecError, match="at least its dimension's bound"):
        p.padded_iteration([1, 4, 3, 6, 7, 3, 3])


def test_padded_iteration_of_strided_and_padded_tensors() -> None:
    """A strided 1x1 input counts its span (holes included), as the model counts an unpadded
    tensor, so padding the iteration space never makes its real words cheaper; a tensor
    with its own pad/extent keeps them (only its existing words count)."""
    s = conv2d("s", n=1, k=2, c=2, p=7, q=7, r=1, s=1, stride=2)
    q = s.padded_iteration([1, 2, 2, 8, 7, 1, 1])
    span_real, span_padded = 2 * 6 + 1, 2 * 7 + 1
    assert q.existing_fraction()[1] == pytest.approx(span_real / span_padded)
    c = conv2d_from_input("c", c=3, k=4, h=8, w=6, r=3, s=3, padding=1)  # 8 x 6 out, input extent 8 x 6
    assert c.dim_names == ("N", "K", "C", "P", "Q", "R", "S") and c.bounds.tolist() == [1, 4, 3, 8, 6, 3, 3]
    qc = c.padded_iteration([1, 4, 3, 9, 6, 3, 3])
    assert qc.tensors[1].extent == c.tensors[1].extent
    assert qc.existing_words()[1] == c.existing_words()[1]  # row 9 of the padded rows reads past the edge
    with pytest.raises(SpecError, match="real_bounds"):
        type(c)(name="x", dims=c.dims, tensors=c.tensors, real_bounds=(1,))
