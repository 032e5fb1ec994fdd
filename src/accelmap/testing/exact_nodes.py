"""Every node of the exact mapper's tree on the path of a mapping of a small space, with the least
energy of the node's mappings: what a bound of `accelmap.costmodels.loopnest_bounds` is checked
against (it must never exceed that least, on any node of any depth).

The whole space is enumerated once and evaluated by the model; each factorization (factors and
keep bits) keeps the least energy over its loop orders and bypass choices. Then, per keep
pattern, every depth of the tree and every split of a depth (the dims whose next factor is
already chosen), the nodes on the path of those factorizations are formed as the exact mapper
forms them (`accelmap.search.exact.node_inputs`), each row with the least energy of the
factorizations below it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from accelmap._typing import FloatArray
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.costmodels.loopnest_bounds import BoundModel
from accelmap.mapper.space import MapSpace

__all__ = ["whole_space_nodes"]


def whole_space_nodes(full: MapSpace, space: Any = None,
                      model: Any = None) -> Iterator[tuple[BoundModel, dict[str, Any], FloatArray]]:
    """Yields ``(bm, inputs, least)`` for every (keep pattern, depth >= 1, split) of the tree
    over the mappings of ``full`` that lie in ``space`` (``full`` itself, the default, or one
    `BranchSpace` of a padded ``full``: its mappings are those whose factors multiply to the
    branch's bounds): ``bm`` the pattern's `BoundModel` in ``space``, ``inputs`` the keyword
    arguments of `partial_bounds` for the nodes (one row per factorization of the pattern),
    ``least`` (n,) the least energy of each row's mappings. ``model`` evaluates the mappings
    (default `LoopNestModel()`)."""
    from accelmap.search.exact import DimTree, bound_model, node_inputs

    space = full if space is None else space
    model = LoopNestModel() if model is None else model
    trees = [DimTree(space._tables[d]) for d in range(space._D)]
    D = space._D
    want = np.asarray(full.problem.bounds if space is full else space.bounds)
    facs, keeps, energy = [], [], []
    for b in full.enumerate(65536, max_points=10**7):
        m = model.evaluate(full.problem, full.arch, b)
        prod = b.temporal.prod(axis=1) * b.spatial.prod(axis=(1, 3))
        ok = full.check(b).valid & m.valid & (prod == want).all(axis=1)
        facs.append(np.stack([b.temporal, b.spatial[..., 0], b.spatial[..., 1]], axis=-1)[ok])
        keeps.append(b.keep[ok])
        energy.append(m.energy_pj[ok])
    fac, keep, en = np.concatenate(facs), np.concatenate(keeps), np.concatenate(energy)
    key = np.concatenate([fac.reshape(len(fac), -1), keep.reshape(len(keep), -1)], axis=1)
    uk, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    emin = np.full(len(uk), np.inf)
    np.minimum.at(emin, inv, en)
    first = np.empty(len(uk), dtype=np.int64)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    fac, keep = fac[first], keep[first]
    rows = np.empty((len(fac), D), dtype=np.int64)
    for d, tr in enumerate(trees):
        lut = {tuple(r.ravel()): i for i, r in enumerate(tr.rows)}
        rows[:, d] = [lut[tuple(f.ravel())] for f in fac[:, :, d, :]]
    flat = keep.reshape(len(keep), -1)
    leaf = trees[0].leaf_depth
    for pk in np.unique(flat, axis=0):
        sel = np.flatnonzero((flat == pk).all(axis=1))
        bm = bound_model(space, pk.reshape(keep.shape[1:]))
        for depth in range(1, leaf + 1):
            for split in range(D if depth < leaf else 1):
                ids = np.empty((len(sel), D), dtype=np.int64)
                for d, tr in enumerate(trees):
                    ids[:, d] = np.searchsorted(tr.starts[depth + 1 if d < split else depth], rows[sel, d],
                                                side="right") - 1
                yield bm, node_inputs(trees, depth, split, ids), emin[sel]
