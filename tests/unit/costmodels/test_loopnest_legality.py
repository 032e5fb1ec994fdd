"""loopnest's batched path checks legality on its own arrays: the result must be exactly
`check_batch`'s (valid, reason, level) on every row, for every kind of illegal mapping."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.presets import preset
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.check import Reason, check_batch
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.examples import small_arch, small_conv
from accelmap.workloads.builders import conv2d
from accelmap.workloads.problem import Problem


def _perturbed(problem: Problem, arch, n: int, seed: int) -> MappingBatch:
    """Legal and random mappings with a share of each kind of damage: bad factors (also
    zero, negative and huge), non-permutation orders, forbidden or missing keeps, spatial
    unrolling over the fanout."""
    rng = np.random.default_rng(seed)
    space = MapSpace(problem, arch)
    b = MappingBatch.concat([space.sample_valid(n // 2, rng), space.sample(n - n // 2, rng)])
    t, s, o, k = b.temporal.copy(), b.spatial.copy(), b.order.copy(), b.keep.copy()
    L, D, T = t.shape[1], t.shape[2], k.shape[2]
    u = rng.random(len(b))
    for lo, hi, what in ((0.0, 0.05, "t"), (0.05, 0.1, "o"), (0.1, 0.15, "k"), (0.15, 0.2, "s"), (0.2, 0.22, "big")):
        for i in np.flatnonzero((u >= lo) & (u < hi)):
            lv, d = int(rng.integers(L)), int(rng.integers(D))
            if what == "t":
                t[i, lv, d] = int(rng.integers(-1, 4))
            elif what == "o":
                o[i, lv, d] = int(rng.integers(-1, D + 2))
            elif what == "k":
                k[i, lv, int(rng.integers(T))] ^= True
            elif what == "s":
                s[i, lv, d, int(rng.integers(2))] *= int(rng.integers(0, 20))
            else:
                t[i] *= rng.integers(1, 1 << 20, size=t[i].shape)
    # (past the public constructor's value checks, which refuse the "big" rows whose products
    # pass 2^62: the models must still judge every row as `check_batch` does)
    return MappingBatch._trusted(temporal=t, spatial=s, order=o, keep=k)


@pytest.mark.parametrize(("problem", "arch"), [
    (small_conv(), small_arch(glb_words=300, rf_words=20)),
    (small_conv(k=4, c=2, p=4, q=6, r=3, s=2, stride=2), small_arch(glb_words=500, rf_words=40)),
    (conv2d("g", c=8, k=8, p=4, q=3, r=3, s=2, stride=(2, 1), dilation=(1, 2), groups=2), preset("eyeriss-like")),
], ids=["small", "strided", "dilated-grouped-eyeriss"])
def test_reasons_equal_check_batch(problem: Problem, arch) -> None:
    batch = _perturbed(problem, arch, 600, seed=3)
    m = LoopNestModel().evaluate(problem, arch, batch)
    # the model takes imperfect factorizations (covers of the bounds), up to 2^53 padded points
    padded = check_batch(problem, arch, batch, allow_padding=True)
    exact = check_batch(problem, arch, batch)
    prod = batch.temporal.prod(axis=1) * batch.spatial.prod(axis=(1, 3))
    with np.errstate(over="ignore"):
        huge = np.prod(np.maximum(prod, 1).astype(np.float64), axis=1) > 2.0**53
    ref = type(exact)(np.where(huge, exact.valid, padded.valid), np.where(huge, exact.reason, padded.reason),
                      np.where(huge, exact.level, padded.level))
    assert np.array_equal(m.valid, ref.valid)
    assert np.array_equal(m.reason, ref.reason)
    assert np.array_equal(m.reason_level, ref.level)
    assert (~huge & padded.valid & ~exact.valid).any()  # rows legal only as padded ones
    # the damage reaches every kind of reason the check knows
    seen = set(np.unique(ref.reason).tolist())
    assert {Reason.OK, Reason.FACTORS, Reason.ORDER, Reason.KEEP, Reason.FANOUT, Reason.CAPACITY} <= seen


def test_shape_mismatch_is_shape_error() -> None:
    problem, arch = small_conv(), small_arch()
    other = small_arch(glb_words=10**6)
    batch = MapSpace(problem, other).sample(5, np.random.default_rng(0))
    narrow = MappingBatch(temporal=batch.temporal[:, :, :-1], spatial=batch.spatial[:, :, :-1],
                          order=batch.order[:, :, :-1], keep=batch.keep)
    m = LoopNestModel().evaluate(problem, arch, narrow)
    assert (m.reason == Reason.SHAPE).all() and not m.valid.any()
