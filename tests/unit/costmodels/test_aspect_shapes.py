"""The PE-array shape as a search variable (`accelmap.search.shapes`) and the CLI's
``search --model aspect``."""

from __future__ import annotations

import json
from pathlib import Path

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.aspect import AspectModel, arch_with_shape
from accelmap.search.shapes import search_shapes
from accelmap.workloads.builders import conv2d

ARCH_YAML = """version: 1
name: acc1-16
compute: {name: MAC, energy_per_mac_pj: 1.0}
levels:
  - {name: DRAM, capacity_words: null, read_bandwidth_words_per_cycle: 50}
  - {name: L2, capacity_words: null, read_bandwidth_words_per_cycle: 1000, fanout_x: 4, fanout_y: 4}
  - {name: L1, capacity_words: null}
"""


def _arch() -> Arch:
    return Arch(name="acc1-16", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=50),
        StorageLevel(name="L2", capacity_words=None, read_bandwidth_words_per_cycle=1000, fanout_x=4, fanout_y=4),
        StorageLevel(name="L1", capacity_words=None),
    ), compute=Compute(energy_per_mac_pj=1.0))


def test_search_shapes_tries_every_shape_and_keeps_the_best() -> None:
    p = conv2d("c", c=4, k=8, p=4, q=4, r=3, s=3)
    res = search_shapes(p, _arch(), budget=600, searcher="random", objective="cycles", seed=1)
    assert [(s.x, s.y) for s in res.per_shape] == [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1)]
    best = res.best
    assert best.result is not None and best.objective == min(s.objective for s in res.per_shape)
    # the best mapping re-evaluates to the reported cycles on the arch with that shape
    m = AspectModel().evaluate(p, arch_with_shape(_arch(), best.x, best.y), best.result.best.as_batch())
    assert m.valid[0] and m.cycles[0] == best.result.best_metrics["cycles"]
    assert "best shape" in res.table()
    again = search_shapes(p, _arch(), budget=600, searcher="random", objective="cycles", seed=1)
    assert [s.objective for s in again.per_shape] == [s.objective for s in res.per_shape]


def test_cli_search_model_aspect_reports_shape(tmp_path: Path, capsys) -> None:
    from accelmap.cli import main

    arch = tmp_path / "acc1.yaml"
    arch.write_text(ARCH_YAML)
    rc = main(["search", "vgg16/conv5_1", "--arch", str(arch), "--model", "aspect", "--budget", "500",
               "--searcher", "random", "--objective", "cycles", "--json", "--no-progress",
               "--out", str(tmp_path / "out")])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "best shape" in cap.err
    assert json.loads(cap.out)["model"] == "aspect"


def test_search_shapes_network_merges_repeated_layers() -> None:
    import pytest

    from accelmap.errors import SpecError
    from accelmap.search.shapes import search_shapes_network
    from accelmap.workloads.builders import batched_matmul, fully_connected

    a = conv2d("a", c=4, k=8, p=4, q=4, r=3, s=3)
    b = fully_connected("fc", n=2, c=8, k=4)
    rows = search_shapes_network([a, b, a], _arch(), budget=200, searcher="random", objective="cycles")
    assert [(name, rep) for name, rep, _ in rows] == [("a", 2), ("fc", 1)]
    assert all(r.best.result is not None for _, _, r in rows)
    with pytest.raises(SpecError, match="aspect model takes"):
        search_shapes(batched_matmul("bmm", b=2, m=4, n=4, k=4), _arch(), budget=50)


def test_every_preset_at_a_small_budget() -> None:
    """Every preset either takes the aspect model (and every shape ends with a legal mapping
    or the model's reason for having none) or is refused with a clear message."""

    from accelmap.arch.presets import presets
    from accelmap.errors import SpecError
    from accelmap.workloads.zoo import layer

    p = layer("resnet50/conv3_1")  # strided 3x3: the case MAESTRO's windows make hard
    found = {}
    for name in presets():
        try:
            res = search_shapes(p, name, budget=1500, seed=0)
        except SpecError as exc:
            assert "one PE array" in str(exc), (name, str(exc))
            continue
        found[name] = sum(s.result is not None for s in res.per_shape)
        for s in res.per_shape:
            assert s.result is not None or "aspect model rejects" in s.why or "fit" in s.why, (name, s.why)
    assert found["eyeriss-like"] >= 8  # 13 of 16 shapes have legal mappings; 1 x 168 etc. cannot hold a 3x3 window


def test_budget_goes_to_promising_shapes() -> None:
    p = conv2d("c", c=16, k=16, p=8, q=8, r=3, s=3)
    res = search_shapes(p, _arch(), budget=3000, seed=2, objective="edp")
    evals = {(s.x, s.y): s.evaluations for s in res.per_shape if s.result is not None}
    assert len(evals) == 5  # every shape has a legal mapping
    best = (res.best.x, res.best.y)
    assert evals[best] == max(evals.values()) and evals[best] > 3000 // 5
    assert sum(evals.values()) <= 3000 + 5 * 8  # at most the starting points over


def test_a_time_limit_is_shared_over_the_shapes() -> None:
    p = conv2d("c", c=8, k=8, p=4, q=4, r=3, s=3)
    res = search_shapes(p, _arch(), budget=10**9, time_limit_s=1.0, seed=0)
    legal = sum(s.result is not None for s in res.per_shape)
    assert legal == 5
    # each run gets the limit over twice the shapes with legal mappings, not the whole limit
    assert all(s.result.config["time_limit_s"] == 1.0 / (2 * legal) for s in res.per_shape)


def test_search_on_the_arch_shape_finds_legal_mappings_on_every_preset() -> None:
    """`search(model="aspect")` on the arch as given (no shape search, as in a portfolio)
    starts from legal draws repaired into the model's form: uniform draws alone found no
    legal mapping of this layer on eyeriss-like in 20,000 evaluations."""
    from accelmap.arch.presets import presets
    from accelmap.errors import InfeasibleSpaceError, SpecError
    from accelmap.search.api import search
    from accelmap.workloads.zoo import layer

    p = layer("resnet50/conv3_1")
    ok = []
    for name in presets():
        try:
            res = search(p, name, model="aspect", budget=600, seed=1)
        except SpecError as exc:
            assert "one PE array" in str(exc), (name, str(exc))
            continue
        except InfeasibleSpaceError as exc:  # the error carries the model's reasons for the draws
            assert "Before the search, the aspect model rejects all" in str(exc), (name, str(exc))
            continue
        assert res.best is not None and res.n_valid > 0 and res.n_evaluations == 600, name
        ok.append(name)
    assert "eyeriss-like" in ok


def test_padding_is_refused_for_models_of_exact_factorizations(tmp_path: Path) -> None:
    import pytest

    from accelmap.cli import main
    from accelmap.errors import SpecError
    from accelmap.search.api import search

    with pytest.raises(SpecError, match=r"not modelled by the aspect model.*loopnest, systolic"):
        search("resnet50/res2a_branch2a", "eyeriss-like", model="aspect", allow_padding=True, budget=100)
    with pytest.raises(SpecError, match="not modelled by the aspect model"):
        search_shapes(conv2d("c", n=1, k=4, c=4, p=4, q=4, r=3, s=3), _arch(), budget=200, allow_padding=True)
    rc = main(["search", "resnet50/res2a_branch2a", "--arch", "eyeriss-like", "--model", "aspect", "--padding",
               "--budget", "100", "--workers", "1", "--backend", "serial", "--out", str(tmp_path)])
    assert rc == 2
