"""The aspect and systolic CPU kernels on several threads: blocks of rows (slices of the
batch) run by the one serial driver on a thread pool (`engines.run_blocks`) give the same
rows as one thread."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from accelmap.arch.presets import preset
from accelmap.costmodels import _aspect_kernel, _systolic_engine
from accelmap.costmodels.aspect import AspectModel, aspect_constraints, aspect_view, directive_form
from accelmap.costmodels.engines import run_blocks
from accelmap.costmodels.systolic import SystolicModel
from accelmap.mapper.space import MapSpace
from accelmap.search.shapes import model_repair
from accelmap.workloads.builders import conv2d

FIELDS = ("cycles", "energy_pj", "valid", "reason", "reason_level", "reads", "fills", "updates", "utilization")


def _same(a, b) -> None:
    for f in FIELDS:
        assert np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True), f


@pytest.mark.parametrize("n,n_blocks", [(0, 3), (1, 3), (7, 3), (10, 4), (11, 8)])
def test_run_blocks_covers_every_row_once(n: int, n_blocks: int) -> None:
    seen = np.zeros(n, dtype=int)
    blocks: list[int] = []

    def block(b: int, lo: int, hi: int) -> None:
        seen[lo:hi] += 1
        blocks.append(b)

    run_blocks(block, n, n_blocks, 2)
    assert (seen == 1).all() and len(set(blocks)) == len(blocks) <= n_blocks


def test_aspect_threaded_blocks_equal_one_thread(monkeypatch) -> None:
    problem, arch = conv2d("a", c=16, k=16, p=14, q=14, r=3, s=3), preset("eyeriss-like")
    rng = np.random.default_rng(2)
    drawn = MapSpace(problem, arch, aspect_constraints(problem, arch)).sample_valid(600, rng)
    batch = model_repair(problem, arch, directive_form(aspect_view(arch), drawn), rng)
    model = AspectModel(engine="cpu")
    monkeypatch.setattr(_aspect_kernel, "_threads", lambda: 3)  # first: its output arrays are fresh memory
    monkeypatch.setattr(_aspect_kernel, "_PARALLEL_MIN_ROWS", 16)
    threaded = model.evaluate(problem, arch, batch)
    monkeypatch.setattr(_aspect_kernel, "_threads", lambda: 1)
    serial = model.evaluate(problem, arch, batch)
    assert serial.valid.sum() > 50  # legal rows go through the whole analysis
    _same(serial, threaded)


def test_systolic_threaded_blocks_equal_one_thread(monkeypatch) -> None:
    problem, arch = conv2d("s", c=16, k=24, p=10, q=10, r=3, s=3), preset("tpu-v1-like")
    batch = MapSpace(problem, arch).sample_valid(700, np.random.default_rng(3))
    model = SystolicModel(engine="cpu", dram_window="estimate")
    monkeypatch.setattr(_systolic_engine, "_threads", lambda: 3)  # first: its output arrays are fresh memory
    monkeypatch.setattr(_systolic_engine, "_PARALLEL_MIN_ROWS", 16)
    threaded = model.evaluate(problem, arch, batch)
    monkeypatch.setattr(_systolic_engine, "_threads", lambda: 1)
    serial = model.evaluate(problem, arch, batch)
    assert serial.valid.sum() > 50
    _same(serial, threaded)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_a_forked_child_runs_blocks_after_the_parent_did() -> None:
    """The exact searcher's workers are forked from a process whose kernel pool already has
    threads; the child must start its own (the inherited pool has none and would wait)."""
    seen: list[int] = []
    run_blocks(lambda b, lo, hi: seen.append(b), 100, 4, 2)
    assert sorted(seen) == [0, 1, 2, 3]
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child() -> None:
        got: list[int] = []
        run_blocks(lambda b, lo, hi: got.append(hi - lo), 100, 4, 2)
        q.put(sum(got))

    p = ctx.Process(target=child)
    p.start()
    p.join(30)
    hung = p.is_alive()
    if hung:
        p.kill()
    assert not hung, "the forked child's blocks never ran"
    assert q.get(timeout=5) == 100
