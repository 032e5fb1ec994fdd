"""The compiled MapSpace drivers are compiled once each: one signature per driver, whatever
the writability of the arrays the callers hand in (a decoded batch's arrays are read-only,
`sample_valid`'s are not; numba types the two apart and would compile a driver twice)."""

from __future__ import annotations

import numpy as np
from numba.core.registry import CPUDispatcher

from accelmap.arch.presets import preset
from accelmap.mapper import _space_kernel as K
from accelmap.mapper.space import MapSpace
from accelmap.workloads.builders import conv2d


def test_each_driver_has_one_signature() -> None:
    space = MapSpace(conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3), preset("eyeriss-like"), engine="cpu")
    rng = np.random.default_rng(0)
    x = space.sample_encoded(256, rng)
    frozen = x.copy()
    frozen.setflags(write=False)
    for xs in (x, frozen):  # writable and read-only encoded points
        batch = space.decode(xs)
        space.check(batch)  # read-only keep bits (the decoded batch's)
        space.neighbours_encoded(xs, rng)
        space.legalize_encoded(xs, rng)  # writable keep bits
    space.neighbours(batch, rng)
    space.sample_valid(64, rng, method="reject")
    space.sample_valid(64, rng, method="repair")
    drivers = {name: f for name in dir(K) if isinstance(f := getattr(K, name), CPUDispatcher)}
    used = {name: len(f.signatures) for name, f in drivers.items() if f.signatures}
    assert {"decode_rows", "reasons_rows", "moves_encoded", "push_out_rows", "first_outside"} <= set(used)
    assert all(n == 1 for n in used.values()), used

