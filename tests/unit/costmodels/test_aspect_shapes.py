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
