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
