"""Compiled parts of the exact mapper's node handling (`accelmap.search.exact`).

`gather_runs` fills one dim's column of the (n, L, D, 3) factor block of a batch of nodes
with the first rows of their runs: the numpy form, ``fac[:, :, d, :] = rows[starts[g]]``,
writes that column with a stride of D * 3 words and took about 2.4 ms of a 2.9-ms
`node_inputs` call on 8,192 nodes of a seven-dim layer (L = 5) on the reference machine;
the loop below writes the same words in the order they lie. `tests/unit/search/test_exact.py`
holds it equal to the numpy form.
"""

from __future__ import annotations

from typing import Any

from numba import njit

from accelmap._typing import IntArray

__all__ = ["gather_runs"]

_JIT: dict[str, Any] = {"cache": True, "_nrt": False}  # as the other kernels: cached, no reference counting (allocates nothing)


@njit(**_JIT)
def _gather(fac: IntArray, d: int, rows: IntArray, starts: IntArray, g: IntArray) -> None:
    n, L = fac.shape[0], fac.shape[1]
    for i in range(n):
        r = starts[g[i]]
        for lv in range(L):
            for s in range(3):
                fac[i, lv, d, s] = rows[r, lv, s]


def gather_runs(fac: IntArray, d: int, rows: IntArray, starts: IntArray, g: IntArray) -> None:
    """``fac[:, :, d, :] = rows[starts[g]]`` in place (fac (n, L, D, 3) int64, rows (R, L, 3)
    int64, starts and g int64)."""
    _gather(fac, d, rows, starts, g)
