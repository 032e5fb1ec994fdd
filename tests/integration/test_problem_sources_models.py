"""One problem, any model: every problem source (Timeloop, accelmap, ONNX, zoo) against every
cost model. Each cell either finds a legal mapping or, where the model does not take the
problem's kind, says which kind it found and which it takes."""

from __future__ import annotations

import pytest

from accelmap.arch.presets import systolic_array
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.aspect import AspectModel
from accelmap.errors import SpecError
from accelmap.search.api import search
from accelmap.search.shapes import search_shapes
from accelmap.testing.problem_sources import problem_sources
from accelmap.workloads.structure import ProblemKind, recognize

pytest.importorskip("onnx")

ASPECT_KINDS = {ProblemKind.CONV, ProblemKind.DEPTHWISE_CONV, ProblemKind.GEMM}


def _flat_arch() -> Arch:
    """DRAM -> shared buffer fanning out to 4 x 4 PEs -> PE buffer, capacities unbounded."""
    return Arch(name="flat-16", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=50),
        StorageLevel(name="L2", capacity_words=None, read_bandwidth_words_per_cycle=1000, fanout_x=4, fanout_y=4),
        StorageLevel(name="L1", capacity_words=None),
    ), compute=Compute(energy_per_mac_pj=1.0))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return problem_sources(tmp_path_factory.mktemp("sources"))


@pytest.mark.parametrize("source", ["timeloop", "accelmap", "onnx", "zoo"])
@pytest.mark.parametrize("model", ["loopnest", "systolic", "aspect"])
def test_every_source_runs_on_every_model(sources, source: str, model: str) -> None:
    for p in sources[source]:
        kind = recognize(p).kind
        if model == "systolic":
            arch = systolic_array(rows=8, cols=8, ifmap_sram_kb=16, filter_sram_kb=16, ofmap_sram_kb=16)
        else:
            arch = _flat_arch()
        if model == "aspect" and kind not in ASPECT_KINDS:
            assert kind is ProblemKind.BATCHED_MATMUL
            why = AspectModel.unsupported(p, arch)
            assert why is not None and "aspect model takes" in why and kind.value in why
            with pytest.raises(SpecError, match="found batched matmul"):
                search_shapes(p, arch, budget=10)
            continue
        if model == "aspect":  # the CLI's path: the array shape is searched too
            res = search_shapes(p, arch, budget=600, seed=1).best.result
            assert res is not None, (source, p.name, model)
        else:
            res = search(p, arch, model=model, budget=600, seed=1)
        assert res.best is not None, (source, p.name, model)
        assert res.best_metrics["cycles"] > 0


@pytest.mark.parametrize("model", ["loopnest", "systolic", "aspect"])
def test_renamed_and_reordered_dims_give_identical_metrics(model: str) -> None:
    """The same mapping of the same layer, dims renamed and listed in another order, costs
    the same on every model: no model reads a dim's name."""
    import numpy as np

    from accelmap._registry import costmodels
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.search.api import build_space
    from accelmap.testing.problem_sources import rename_dims
    from accelmap.workloads.builders import conv2d
    from accelmap.workloads.problem import Problem

    p = conv2d("c", c=8, k=16, p=6, q=6, r=3, s=3, stride=2)
    names = {"N": "b", "K": "oc", "C": "ic", "P": "oy", "Q": "ox", "R": "fy", "S": "fx"}
    perm = [3, 0, 6, 2, 5, 1, 4]  # new dim i is old dim perm[i]
    r = rename_dims(p, names)
    q = Problem(name="c", dims=tuple(r.dims[i] for i in perm), tensors=r.tensors)
    arch = systolic_array(rows=8, cols=8, ifmap_sram_kb=16, filter_sram_kb=16, ofmap_sram_kb=16) \
        if model == "systolic" else _flat_arch()
    cost = costmodels.get(model)()
    if model == "systolic":
        from accelmap.costmodels.systolic_variants import scalesim_mapping

        batch = MappingBatch.from_mappings([scalesim_mapping(p, arch, df)[0] for df in ("os", "ws", "is")])
    else:
        from accelmap.costmodels.aspect import aspect_constraints, aspect_view, directive_form

        space = build_space(p, arch, aspect_constraints(p, arch))
        batch = directive_form(aspect_view(arch), space.sample_valid(64, np.random.default_rng(0)))
    inv = np.argsort(perm)  # old dim d is new dim inv[d]
    order = inv[batch.order]  # loop orders name dims by index
    moved = MappingBatch(temporal=batch.temporal[:, :, perm], spatial=batch.spatial[:, :, perm],
                         order=order, keep=batch.keep)
    a, b = cost.evaluate(p, arch, batch), cost.evaluate(q, arch, moved)
    assert a.valid.any()
    assert np.array_equal(a.valid, b.valid)
    assert np.array_equal(a.cycles, b.cycles) and np.allclose(a.energy_pj, b.energy_pj, equal_nan=True)


def test_aspect_reads_a_pointwise_layer_written_as_a_gemm_like_the_convolution() -> None:
    """A 1x1 convolution with plain coordinates (no filter dims) is a GEMM with three row
    dims; the aspect model places them on N, Y', X' and costs it as the convolution."""
    import numpy as np

    from accelmap.costmodels.aspect import aspect_constraints, aspect_view, directive_form
    from accelmap.mapper.mapping import MappingBatch
    from accelmap.search.api import build_space
    from accelmap.workloads.builders import conv2d
    from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

    conv = conv2d("pw", c=8, k=16, p=6, q=4, r=1, s=1, n=2)

    def t(name, dims, role):
        return Tensor(name=name, projection=tuple((Term(dim=d),) for d in dims), role=role)

    gemm = Problem(name="pw", dims=tuple(Dim(name=d.name, bound=d.bound) for d in conv.dims[:5]), tensors=(
        t("Weights", "KC", TensorRole.WEIGHT), t("Inputs", "NCPQ", TensorRole.INPUT),
        t("Outputs", "NKPQ", TensorRole.OUTPUT)))
    assert recognize(gemm).kind is ProblemKind.GEMM
    arch = _flat_arch()
    space = build_space(conv, arch, aspect_constraints(conv, arch))
    batch = directive_form(aspect_view(arch), space.sample_valid(64, np.random.default_rng(1)))
    five = MappingBatch(temporal=batch.temporal[:, :, :5], spatial=batch.spatial[:, :, :5],
                        order=np.stack([o[o < 5].reshape(batch.order.shape[1], 5) for o in batch.order]),
                        keep=batch.keep)
    a, b = AspectModel().evaluate(conv, arch, batch), AspectModel().evaluate(gemm, arch, five)
    assert a.valid.any() and np.array_equal(a.valid, b.valid)
    assert np.array_equal(a.cycles[a.valid], b.cycles[b.valid])
    assert np.allclose(a.energy_pj[a.valid], b.energy_pj[b.valid])
