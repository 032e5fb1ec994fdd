"""The arithmetic under a `accelmap.mapper.space.MapSpace`'s tables: divisors and ordered
factorizations of a loop bound, the distinct primes of every factor value, the index that
finds a row of factors in the tables, and the Lehmer codes of loop orders.

Plain functions of integers and arrays; nothing here knows a problem, an arch or a space.
"""

from __future__ import annotations

import math

import numpy as np

from accelmap._typing import IntArray

__all__ = ["PERM_TABLE_MAX_M", "RowIndex", "divisors", "lehmer_decode", "lehmer_digits", "n_ordered_factorizations",
           "prime_exponents", "prime_table"]

PERM_TABLE_MAX_M = 8  # loop orders of up to this many free loops decode through a table of all m! permutations


def divisors(b: int) -> list[int]:
    small = [i for i in range(1, math.isqrt(b) + 1) if b % i == 0]
    return sorted(set(small + [b // i for i in small]))


def prime_exponents(b: int) -> dict[int, int]:
    out: dict[int, int] = {}
    p = 2
    while p * p <= b:
        while b % p == 0:
            out[p] = out.get(p, 0) + 1
            b //= p
        p += 1
    if b > 1:
        out[b] = out.get(b, 0) + 1
    return out


def n_ordered_factorizations(b: int, n_slots: int) -> int:
    """Ordered factorizations of ``b`` into ``n_slots`` factors (stars and bars per prime)."""
    return math.prod(math.comb(e + n_slots - 1, n_slots - 1) for e in prime_exponents(b).values())


def prime_table(max_value: int, width: int = 8) -> tuple[IntArray, IntArray]:
    """(max_value+1, width) distinct primes of each integer (padded with 1) and their count,
    from a smallest-prime-factor sieve."""
    n = max_value + 1
    spf = np.arange(n, dtype=np.int64)
    for q in range(2, math.isqrt(max_value) + 1):
        if spf[q] == q:
            block = spf[q * q:: q]
            np.minimum(block, q, out=block, where=block == np.arange(q * q, n, q))
    primes = np.ones((n, width), dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    cur = np.arange(n, dtype=np.int64)
    last = np.zeros(n, dtype=np.int64)
    while True:
        active = cur > 1
        if not active.any():
            break
        p = np.where(active, spf[cur], 1)
        new = np.nonzero(active & (p != last))[0]
        primes[new, count[new]] = p[new]
        count[new] += 1
        last = np.where(active, p, last)
        cur = np.where(active, cur // np.maximum(p, 1), cur)
    return primes, count


class RowIndex:
    """Vectorized lookup of factor rows in the tables of all dims at once (hash + verify).

    ``flat`` (R, S) holds every dim's table one after the other and ``dim_of_row`` (R,)
    names each row's dim. A query is a row of factors (S,) and a dim: its key is a random
    linear hash of the row plus a per-dim term (distinct per dim), keys of the table are
    all distinct, and a hit is verified on the whole row, so the answer is exact: the
    row's global index in ``flat`` (a row of the queried dim), or -1.
    """

    def __init__(self, flat: IntArray, dim_of_row: IntArray, n_dims: int, seed: int = 0x5EED) -> None:
        self.flat = np.ascontiguousarray(flat, dtype=np.int64)
        rng = np.random.default_rng(seed)
        while True:
            self.mult = (rng.integers(1, 2**62, size=flat.shape[1], dtype=np.int64) | 1).view(np.uint64)
            self.dim_mult = rng.integers(1, 2**62, size=n_dims, dtype=np.int64).view(np.uint64)
            if len(np.unique(self.dim_mult)) < n_dims:
                continue
            keys = self._hash(self.flat, dim_of_row)
            order = np.argsort(keys, kind="stable")
            sk = keys[order]
            if len(sk) < 2 or (np.diff(sk) != 0).all():
                break
        self.keys = sk
        self.rows = order
        self._void = np.dtype((np.void, 8 * self.flat.shape[1]))  # a whole row as one byte string

    def _hash(self, flat: IntArray, dims: IntArray | int) -> IntArray:
        # uint64 arithmetic wraps (modulo 2**64) without warnings
        out: IntArray = (flat.view(np.uint64) @ self.mult + self.dim_mult[dims]).view(np.int64)
        return out

    def lookup(self, flat: IntArray, dims: IntArray | int) -> IntArray:
        """(k,) global row of each query row (k, S) of dim ``dims`` (scalar or (k,)), -1 where
        it is not in that dim's table."""
        flat = np.ascontiguousarray(flat, dtype=np.int64)
        keys = self._hash(flat, dims)
        pos = np.searchsorted(self.keys, keys)
        np.minimum(pos, len(self.keys) - 1, out=pos)
        g = self.rows[pos]
        # rows compared as byte strings (one comparison per row); a verified hit has the
        # queried dim: equal rows and equal keys mean equal dim terms
        table_rows = self.flat.view(self._void).reshape(-1)
        hit = (self.keys[pos] == keys) & (table_rows[g] == flat.view(self._void).reshape(-1))
        return np.where(hit, g, -1)


def lehmer_digits(local: IntArray) -> IntArray:
    """(n, m) permutations of 0..m-1 -> (n, m) Lehmer digits (last one is always 0)."""
    n, m = local.shape
    digits = np.zeros((n, m), dtype=np.int64)
    for i in range(m):
        digits[:, i] = (local[:, i + 1:] < local[:, i: i + 1]).sum(axis=1)
    return digits


def lehmer_decode(digits: IntArray, items: IntArray) -> IntArray:
    """(n, m) digits (digit i < m - i) and (n, m) or (m,) items -> (n, m) permutation of items."""
    n, m = digits.shape
    avail = np.broadcast_to(items, (n, m)).copy()
    out = np.empty((n, m), dtype=np.int64)
    rows = np.arange(n)[:, None]
    for i in range(m):
        d = digits[:, i]
        out[:, i] = avail[rows[:, 0], d]
        left = avail.shape[1] - 1
        if left == 0:
            break
        cols = np.arange(left)[None, :]
        avail = avail[rows, cols + (cols >= d[:, None])]  # drop the picked column
    return out
