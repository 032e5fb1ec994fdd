"""loopnest's batched path takes shortcuts on clean chunks (a cheaper legality pass, closed
forms of the output parts, gcds only where two dims of a coordinate are unrolled, one-word
blocks without division): on MapSpace samples, which take them, the results must still be
`check_batch`'s reasons and the scalar reference path's counts, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.presets import preset
from accelmap.costmodels import _loopnest_numpy as loopnest_numpy
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.check import check_batch
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.costmodel_checks import assert_metrics_equal
from accelmap.workloads.builders import conv2d, matmul

CASES = [
    ("eyeriss-like", conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3)),
    ("simba-like", conv2d("s2", c=8, k=16, p=7, q=7, r=3, s=3, stride=2)),
    ("a100-sm", matmul("mm", m=64, n=32, k=48)),
    ("systolic", conv2d("dw", c=16, k=16, p=8, q=8, r=3, s=3, groups=16)),
]


@pytest.mark.parametrize(("arch_name", "problem"), CASES, ids=[c[0] for c in CASES])
def test_clean_batches_match_check_batch_and_scalar(arch_name, problem, monkeypatch) -> None:
    taken = []  # what the cheaper legality pass returned, chunk by chunk (None: not taken)
    fast_ok = loopnest_numpy._fast_ok

    def spy(*args):
        out = fast_ok(*args)
        taken.append(out)
        return out

    monkeypatch.setattr(loopnest_numpy, "_fast_ok", spy)
    arch = preset(arch_name)
    rng = np.random.default_rng(5)
    space = MapSpace(problem, arch)
    # legal and illegal rows, no damaged arrays: every chunk takes the cheaper legality pass
    batch = MappingBatch.concat([space.sample(300, rng), space.sample_valid(60, rng)])
    model = LoopNestModel(engine="numpy")
    m = model.evaluate(problem, arch, batch)
    assert taken and all(t is not None for t in taken)  # the shortcut ran on every chunk
    ref = check_batch(problem, arch, batch)
    assert np.array_equal(m.valid, ref.valid)
    assert np.array_equal(m.reason, ref.reason)
    assert np.array_equal(m.reason_level, ref.level)
    assert m.valid.any() and not m.valid.all()
    rows = np.flatnonzero(m.valid)[:12].tolist() + np.flatnonzero(~m.valid)[:3].tolist()
    for i in rows:
        assert_metrics_equal(m.take([i]), model.evaluate_one(problem, arch, batch[i]), what=f"row {i}")


def test_rows_past_the_first_chunk_keep_their_places() -> None:
    """A batch of more than two chunks, legal and illegal rows mixed: every chunk's reasons
    and counts land on its own rows (the same as evaluating those rows alone)."""
    arch, problem = preset("eyeriss-like"), conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3)
    rng = np.random.default_rng(11)
    space = MapSpace(problem, arch)
    n = 2 * loopnest_numpy._CHUNK_ROWS + 500
    batch = MappingBatch.concat([space.sample(n - 400, rng), space.sample_valid(400, rng)])
    order = rng.permutation(n)  # legal rows spread over every chunk
    batch = batch.take(order)
    model = LoopNestModel(engine="numpy")
    m = model.evaluate(problem, arch, batch)
    ref = check_batch(problem, arch, batch)
    assert np.array_equal(m.reason, ref.reason) and np.array_equal(m.reason_level, ref.level)
    tail = np.arange(2 * loopnest_numpy._CHUNK_ROWS, n)
    alone = model.evaluate(problem, arch, batch.take(tail))
    assert m.valid[tail].any()
    assert_metrics_equal(m.take(tail), alone, what="rows of the third chunk")
