"""`MapSpace`: the mapping space of one problem on one arch under constraints, batched.

Decision variables and their encoding (a box of integers, ``x[:, i] in [0, bounds[i])``):

* ``tile.<dim>`` (kind ``tile``): for each loop dimension, an index into the table of its
  *ordered factorizations*: every way to write the dim's bound as a product of factors,
  one per slot, where the slots are, outermost first, for every level its temporal loop,
  then its spatial X and spatial Y unrolling (only where the level has that fanout and the
  constraints allow the dim on that axis). Constraints that fix or bound a factor, and the
  fanout (a single dim never unrolls beyond it), remove rows from the table, so every
  in-box index decodes to a mapping whose factors multiply out and obey those rules.
  A bound ``b = prod p_i^e_i`` spread over ``s`` slots has ``prod_i C(e_i + s - 1, s - 1)``
  ordered factorizations (stars and bars per prime).
* ``order.<level>.<i>`` (kind ``order``): Lehmer-code digits of the loop order of the free
  dims of a level (digit ``i`` picks, among the not yet placed free dims, the one that goes
  at free position ``i``, outermost first; its bound is ``m - i`` for ``m`` free dims). Dims
  pinned outermost / innermost by an `OrderRule` take no digits.
* ``keep.<level>.<tensor>`` (kind ``keep``): 0/1, bypass or keep, only where the arch may
  hold the tensor and no constraint decides (the outermost level keeps everything).

Params whose bound would be 1 (a dim with one factorization, the last Lehmer digit) are
not in the box. The encoding is a bijection between the box and the space, so a uniform
draw over the box is a uniform draw over the space, and ``size().total`` equals
``prod(bounds)``. Fanout and capacity (which couple dims) and the minimum utilization are
left to `MapSpace.check` (optuna's ``_SearchSpaceTransform`` is the model: searchers see
one flat box, the space owns the transform).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.errors import InfeasibleSpaceError, SpaceTooLargeError, SpecError
from accelmap.mapper import _space_kernel as _kern
from accelmap.mapper.check import BatchCheck, Reason, check_batch
from accelmap.mapper.constraints import (
    Constraints,
    OrderRule,
    Slot,
    arch_default_constraints,
)
from accelmap.mapper.lower_bounds import LowerBounds, lower_bounds
from accelmap.mapper.mapping import MappingBatch
from accelmap.workloads.problem import Problem

__all__ = ["MapSpace", "SpaceSize", "LowerBounds", "PARAM_KINDS"]

PARAM_KINDS = ("tile", "spatial", "order", "keep")

_T, _X, _Y = 0, 1, 2  # slot kinds inside a level: temporal, spatial X, spatial Y
_MAX_TABLE_ROWS = 4_000_000  # per dim; beyond this, ask for constraints
_PERM_TABLE_MAX_M = 8  # decode orders through a table of all m! permutations up to this m
_DECODED_MEMO_ROWS = 1 << 14  # `check` recognizes the last decoded batch up to this size (it is held)


@dataclass(frozen=True, slots=True)
class SpaceSize:
    """Exact point counts (Python ints) of a map space and its sub-spaces.

    ``total = factorizations * orders * bypass``; ``per_dim`` gives each dim's number of
    factorizations, ``per_level_orders`` each level's number of loop orders.
    """

    total: int
    factorizations: int
    orders: int
    bypass: int
    per_dim: tuple[tuple[str, int], ...]
    per_level_orders: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        dims = ", ".join(f"{d}: {c:,}" for d, c in self.per_dim)
        lv = ", ".join(f"{n}: {c:,}" for n, c in self.per_level_orders)
        return (f"total {self.total:,} (~{float(self.total):.3g})\n"
                f"  factorizations {self.factorizations:,} ({dims})\n"
                f"  loop orders {self.orders:,} ({lv})\n"
                f"  bypass choices {self.bypass:,}")


# --- helpers -----------------------------------------------------------------------------

def _divisors(b: int) -> list[int]:
    small = [i for i in range(1, math.isqrt(b) + 1) if b % i == 0]
    return sorted(set(small + [b // i for i in small]))


def _prime_exponents(b: int) -> dict[int, int]:
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
    return math.prod(math.comb(e + n_slots - 1, n_slots - 1) for e in _prime_exponents(b).values())


def _prime_table(max_value: int, width: int = 8) -> tuple[IntArray, IntArray]:
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


class _RowIndex:
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


def _lehmer_digits(local: IntArray) -> IntArray:
    """(n, m) permutations of 0..m-1 -> (n, m) Lehmer digits (last one is always 0)."""
    n, m = local.shape
    digits = np.zeros((n, m), dtype=np.int64)
    for i in range(m):
        digits[:, i] = (local[:, i + 1:] < local[:, i: i + 1]).sum(axis=1)
    return digits


def _lehmer_decode(digits: IntArray, items: IntArray) -> IntArray:
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


# --- the map space -----------------------------------------------------------------------

class MapSpace:
    """The mapping space of ``problem`` on ``arch`` under ``constraints`` (see module doc).

    Parameters
    ----------
    problem, arch
        The layer and the accelerator.
    constraints
        User constraints; they are layered over the arch preset's default constraints
        (``Arch.constraints``) unless ``constraints.ignore_arch_defaults`` is set.
    allow_padding
        Imperfect factorization: factors may multiply to more than a bound (ceil-divided
        tiles); only *minimal* covers are in the space (no factor can be lowered by one
        and still cover the bound). Also switched on by ``constraints.allow_padding``.
    engine
        ``"cpu"`` (default): `decode`, `check` of decoded points, the neighbour moves, the
        legality stage of `sample_valid` and the repair towards legality (`sample_valid`'s
        repair, `legalize_encoded`) run as numba-compiled row loops
        (`accelmap.mapper._space_kernel`); ``"numpy"``: the batched numpy path, the
        executable reference (same results, bit for bit, and the same random stream);
        ``"cuda"`` is taken as ``"cpu"`` here (a MapSpace answers with host arrays). None:
        ``$ACCELMAP_KERNELS``, else ``"cpu"``, as for the cost models.

    Attributes
    ----------
    n_params, bounds (n_params,), param_names, param_kinds
        The encoded box (see module docstring).
    """

    def __init__(self, problem: Problem, arch: Arch, constraints: Constraints | None = None, *,
                 allow_padding: bool = False, engine: str | None = None) -> None:
        self.engine = _kern.resolve_space_engine(engine)
        problems = arch.check_problem(problem)
        if problems:
            raise SpecError(f"problem {problem.name} on arch {arch.name}: " + "; ".join(problems))
        self.problem = problem
        self.arch = arch
        user = constraints or Constraints()
        effective = user if user.ignore_arch_defaults else arch_default_constraints(arch).override(user)
        self.constraints = effective
        self.allow_padding = bool(allow_padding or effective.allow_padding)
        self.min_utilization = float(effective.min_utilization or 0.0)
        L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
        self._L, self._D, self._T = L, D, T
        self._resolve_factor_rules()
        self._build_tables()
        self._build_orders()
        self._build_keep()
        self._build_params()
        self._max_bound = int(max(int(problem.bounds.max()), 2))
        if self.allow_padding:
            self._max_bound = int(max(self._max_bound, max(int(t[..., :].max()) for t in self._tables)))
        self._primes, self._n_primes = _prime_table(self._max_bound)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state.pop("_decoded", None)  # the last decoded batch (see `check`) is not part of the space
        state.pop("_kc", None)  # the kernels' copy of the tables is rebuilt on demand
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        if "engine" not in state:  # pickled before spaces had engines
            self.engine = _kern.resolve_space_engine(None)

    def with_engine(self, engine: str | None) -> MapSpace:
        """The same space (tables shared, nothing rebuilt) with another engine."""
        other = object.__new__(MapSpace)
        other.__dict__.update(self.__getstate__())
        other.engine = _kern.resolve_space_engine(engine)
        return other

    @property
    def compiled(self) -> bool:
        """True when the MapSpace operations run compiled (engine ``cpu`` or ``cuda``)."""
        return self.engine != "numpy"

    def _consts(self) -> _kern.SpaceConsts:
        kc = getattr(self, "_kc", None)
        if kc is None:
            kc = _kern.space_consts(self)
            self._kc = kc
        return kc

    # --- construction -------------------------------------------------------------------
    def _dims_of(self, names: object, where: str) -> list[int]:
        """Resolve dim names, and the symbolic ``@relevant:<tensor>``/``@irrelevant:<tensor>``."""
        p = self.problem
        out: list[int] = []
        for name in names:  # type: ignore[attr-defined]
            if isinstance(name, str) and name.startswith("@"):
                kind, _, tensor = name[1:].partition(":")
                ti = p.tensor_index(tensor)
                rel = p.relevance[ti]
                want = rel if kind == "relevant" else ~rel
                out += [d for d in range(p.n_dims) if want[d] and d not in out]
                continue
            if name not in p.dim_names:
                raise SpecError(f"{where}: unknown dimension {name!r}; problem {p.name} has {list(p.dim_names)}")
            out.append(p.dim_index(name))
        return out

    def _level(self, name: str, where: str) -> int:
        if name not in self.arch.level_names:
            raise SpecError(f"{where}: unknown level {name!r}; arch {self.arch.name} has {list(self.arch.level_names)}")
        return self.arch.level_index(name)

    def _resolve_factor_rules(self) -> None:
        L, D = self._L, self._D
        c = self.constraints
        src = c.source or "constraints"
        fan = self.arch.fanouts  # (L, 2)
        # allowed[l, d, k]: slot exists
        allowed = np.zeros((L, D, 3), dtype=bool)
        allowed[:, :, _T] = True
        allowed[:, :, _X] = fan[:, 0:1] > 1
        allowed[:, :, _Y] = fan[:, 1:2] > 1
        for srule in c.spatial:
            lv = self._level(srule.level, f"{src}: spatial rule")
            for axis, dims in ((_X, srule.x), (_Y, srule.y)):
                if dims is None:
                    continue
                ok = set(self._dims_of(sorted(dims), f"{src}: spatial rule at {srule.level}"))
                for d in range(D):
                    if d not in ok:
                        allowed[lv, d, axis] = False
        lo = np.ones((L, D, 3), dtype=np.int64)
        hi = np.zeros((L, D, 3), dtype=np.int64)  # 0 = no max
        hi[:, :, _X] = np.where(fan[:, 0:1] > 1, fan[:, 0:1], 1)
        hi[:, :, _Y] = np.where(fan[:, 1:2] > 1, fan[:, 1:2], 1)
        fixed = np.zeros((L, D, 3), dtype=np.int64)  # 0 = not fixed
        sp_lo = np.ones((L, D), dtype=np.int64)
        sp_hi = np.zeros((L, D), dtype=np.int64)
        sp_fixed = np.zeros((L, D), dtype=np.int64)
        bounds = self.problem.bounds
        for rule in c.factors:
            where = f"{src}: factor rule (level {rule.level}, dim {rule.dim}, {rule.slot.value})"
            lv = self._level(rule.level, where)
            for d in self._dims_of([rule.dim], where):
                fx = None if rule.fixed is None else (int(bounds[d]) if rule.fixed == 0 else rule.fixed)
                if rule.slot is Slot.SPATIAL:
                    if fx is not None:
                        sp_fixed[lv, d] = fx
                    sp_lo[lv, d] = max(sp_lo[lv, d], rule.min)
                    if rule.max is not None:
                        sp_hi[lv, d] = rule.max
                    continue
                k = {Slot.TEMPORAL: _T, Slot.SPATIAL_X: _X, Slot.SPATIAL_Y: _Y}[rule.slot]
                if fx is not None:
                    if fx > 1 and not allowed[lv, d, k]:
                        raise SpecError(
                            f"{where}: fixes factor {fx} on {rule.slot.value}, but level {rule.level} has no "
                            f"{'X' if k == _X else 'Y'} fanout for dim {rule.dim} (fanout "
                            f"{self.arch.levels[lv].fanout_x}x{self.arch.levels[lv].fanout_y}, or a spatial rule forbids it)"
                        )
                    fixed[lv, d, k] = fx
                lo[lv, d, k] = max(lo[lv, d, k], rule.min)
                if rule.max is not None:
                    hi[lv, d, k] = rule.max if hi[lv, d, k] == 0 else min(hi[lv, d, k], rule.max)
        self._allowed, self._lo, self._hi, self._fixed = allowed, lo, hi, fixed
        self._sp_lo, self._sp_hi, self._sp_fixed = sp_lo, sp_hi, sp_fixed

    def _dim_table(self, d: int) -> IntArray:
        """(rows, L, 3) factor table of dim d (1 where a slot does not exist)."""
        L = self._L
        b = int(self.problem.bounds[d])
        slots = [(lv, k) for lv in range(L) for k in (_T, _X, _Y) if self._allowed[lv, d, k]]
        S = len(slots)
        name = self.problem.dim_names[d]
        # Build the table slot by slot, outermost first, keeping for every partial row a
        # pointer to its parent (rows are rebuilt once at the end; lexicographic order).
        # Exact: the state is the index of the remaining quotient among b's divisors, and a
        # divisor table answers "does candidate j divide remainder i" for all rows at once.
        divs = np.array(_divisors(b), dtype=np.int64)
        if not self.allow_padding:
            pos = {int(v): i for i, v in enumerate(divs)}
            div_ok = divs[:, None] % divs[None, :] == 0
            quot = np.where(div_ok, divs[:, None] // np.where(div_ok, divs[None, :], 1), 0)
            quot_idx = np.vectorize(lambda v: pos.get(int(v), -1), otypes=[np.int64])(quot)
            state = np.array([len(divs) - 1], dtype=np.int64)  # remainder b
            all_cands = divs
        else:
            state = np.ones(1, dtype=np.int64)  # product so far
            all_cands = np.arange(1, b + 1, dtype=np.int64)
        steps: list[tuple[IntArray, IntArray]] = []
        for si, (lv, k) in enumerate(slots):
            lo, hi, fx = self._lo[lv, d, k], self._hi[lv, d, k], self._fixed[lv, d, k]
            if si == S - 1:
                if self.allow_padding:
                    col = -(-b // state)
                else:
                    col = divs[state]
                ok = col >= lo
                if hi:
                    ok &= col <= hi
                if fx:
                    ok &= col == fx
                keep_idx = np.nonzero(ok)[0]
                steps.append((keep_idx, col[keep_idx]))
                break
            cmask = all_cands >= lo
            if hi:
                cmask &= all_cands <= hi
            if fx:
                cmask &= all_cands == fx
            cj = np.nonzero(cmask)[0]
            if self.allow_padding:
                ok = all_cands[cj][None, :] <= (-(-b // state))[:, None]
            else:
                ok = div_ok[:, cj][state]
            r, ci = np.nonzero(ok)
            if len(r) > _MAX_TABLE_ROWS:
                raise SpaceTooLargeError(
                    f"dim {name} (bound {b}) has more than {_MAX_TABLE_ROWS:,} factorizations over {S} slots; "
                    "add factor constraints (e.g. fix factors at some levels) or fewer spatial options"
                )
            vals = all_cands[cj[ci]]
            steps.append((r, vals))
            state = state[r] * vals if self.allow_padding else quot_idx[state[r], cj[ci]]
        n_rows = len(steps[-1][0])
        rows = np.empty((n_rows, S), dtype=np.int64)
        idx = np.arange(n_rows)
        for si in range(S - 1, -1, -1):
            parent, vals = steps[si]
            rows[:, si] = vals[idx]
            idx = parent[idx]
        if self.allow_padding and len(rows):
            # keep minimal covers only: lowering any factor > 1 by one would not cover b
            P = rows.prod(axis=1)
            minimal = np.ones(len(rows), dtype=bool)
            for s in range(S):
                f = rows[:, s]
                minimal &= (f == 1) | ((P // f) * (f - 1) < b)
            rows = rows[minimal]
        table = np.ones((len(rows), L, 3), dtype=np.int64)
        for si, (lv, k) in enumerate(slots):
            table[:, lv, k] = rows[:, si]
        # spatial product rules (X times Y at a level)
        if (self._sp_lo[:, d] > 1).any() or self._sp_hi[:, d].any() or self._sp_fixed[:, d].any():
            sp = table[:, :, _X] * table[:, :, _Y]
            ok = (sp >= self._sp_lo[None, :, d]).all(axis=1)
            ok &= ((self._sp_hi[None, :, d] == 0) | (sp <= self._sp_hi[None, :, d])).all(axis=1)
            ok &= ((self._sp_fixed[None, :, d] == 0) | (sp == self._sp_fixed[None, :, d])).all(axis=1)
            table = table[ok]
        if len(table) == 0:
            raise InfeasibleSpaceError(
                f"dim {name} (bound {b}) has no factorization that meets the constraints "
                f"({self.constraints.source or 'constraints'}): check fixed/min/max factors of {name}"
                + ("" if self.allow_padding else ", or allow imperfect factorization (allow_padding)")
            )
        return table

    def _build_tables(self) -> None:
        self._tables = [self._dim_table(d) for d in range(self._D)]
        self._table_rows = np.array([len(t) for t in self._tables], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(self._table_rows)[:-1]]).astype(np.int64)
        self._big = np.concatenate(self._tables, axis=0)
        # the per-dim tables become views into the one concatenated table (half the memory)
        self._tables = [self._big[o: o + r] for o, r in zip(self._offsets, self._table_rows, strict=True)]
        self._flat = self._big.reshape(len(self._big), -1)  # (R, L*3) rows of all dims
        self._index = _RowIndex(self._flat, np.repeat(np.arange(self._D), self._table_rows), self._D)
        R = len(self._big)
        self._lvl_off = np.arange(self._L, dtype=np.int64) * R  # level-major: row r of level l at l*R + r
        self._lvl_t = np.ascontiguousarray(self._big[:, :, _T].T).reshape(-1)  # (L*R,)
        self._lvl_s = np.ascontiguousarray(self._big[:, :, 1:].transpose(1, 0, 2)).reshape(-1, 2)  # (L*R, 2)
        # slot masks for moves: (D, L, 3) which slots exist
        self._slot_exists = np.transpose(self._allowed, (1, 0, 2)).copy()
        self._slot_exists_flat = self._slot_exists.reshape(self._D, -1)  # (D, L*3)
        # where a factor move's draws sit for row j of a group of kd rows (see _factor_moves):
        # column c < S source score, S <= c < 2S destination score, 2S the prime pick
        S = self._L * 3
        self._draw_j = np.concatenate([np.full(2 * S, S), [1]]).astype(np.int64)
        self._draw_kd = np.concatenate([np.zeros(S), np.full(S, S), [2 * S]]).astype(np.int64)
        self._draw_c = np.concatenate([np.arange(S), np.arange(S), [0]]).astype(np.int64)
        # per table row, for the fast legality path of sample_valid (fanout, capacity and
        # utilization need only these): tile extent per level, spatial X/Y per level, and
        # the product of temporal factors
        f = self._big.prod(axis=2)  # (R, L)
        caps = self.arch.capacities_words
        self._cap_levels = [lv for lv in range(self._L) if np.isfinite(caps[lv])]
        tiles = np.cumprod(f[:, ::-1], axis=1)[:, ::-1]
        self._row_tiles_m1 = np.ascontiguousarray(tiles[:, self._cap_levels] - 1, dtype=np.float64)  # (R, levels with a capacity)
        # coefficient of each dim in each coordinate of each tensor, (D, T * most coordinates)
        terms = self._fp_terms
        n_coords = max([len(c) for c in terms] + [1])
        coef = np.zeros((self._D, self._T * n_coords))
        for t, coords in enumerate(terms):
            for c, dims in enumerate(coords):
                for d, a in dims:
                    coef[d, t * n_coords + c] = a
        self._span_coef = (coef, n_coords)
        # only (level, axis) pairs with a fanout > 1 can overflow (other slots do not exist)
        fan = self.arch.fanouts.reshape(-1)
        self._fan_cols = np.nonzero(fan > 1)[0]
        self._fan_limits = fan[self._fan_cols]
        sxy = self._big[:, :, 1:].reshape(len(self._big), -1)
        self._row_sxy = np.ascontiguousarray(sxy[:, self._fan_cols]).astype(np.int32)
        self._row_tsteps = self._big[:, :, _T].prod(axis=1).astype(np.float64)

    def _build_orders(self) -> None:
        L, D = self._L, self._D
        src = self.constraints.source or "constraints"
        rules: dict[int, OrderRule] = {}
        for orule in self.constraints.orders:
            rules[self._level(orule.level, f"{src}: order rule")] = orule
        self._order_outer: list[list[int]] = []
        self._order_inner: list[list[int]] = []
        self._order_free: list[IntArray] = []
        self._perms_by_m: dict[int, IntArray] = {}  # all m! permutations of 0..m-1, lexicographic
        self._rank_tables: dict[int, tuple[IntArray, IntArray, IntArray, IntArray]] = {}  # see _lehmer_of
        blocks: list[IntArray] = []
        for lv in range(L):
            rule = rules.get(lv)
            outer: list[int] = []
            inner: list[int] = []
            if rule is not None:
                where = f"{src}: order rule at level {rule.level}"
                outer = self._dims_of(rule.outer, where)
                inner = [d for d in self._dims_of(rule.inner, where) if d not in outer]
            free = np.array([d for d in range(D) if d not in outer and d not in inner], dtype=np.int64)
            self._order_outer.append(outer)
            self._order_inner.append(inner)
            self._order_free.append(free)
            m = len(free)
            local = np.zeros((1, m), dtype=np.int64) + np.arange(m)  # m > table size: decoded digit by digit
            if 1 < m <= _PERM_TABLE_MAX_M:
                if m not in self._perms_by_m:
                    self._perms_by_m[m] = np.array(list(itertools.permutations(range(m))), dtype=np.int64)
                local = self._perms_by_m[m]
            block = np.empty((len(local), D), dtype=np.int64)
            block[:, : len(outer)] = outer
            block[:, len(outer): len(outer) + m] = free[local]
            block[:, D - len(inner):] = inner
            blocks.append(block)
        # Every level's loop orders decode through one table of whole orders (pinned outer
        # dims, the free dims permuted, pinned inner dims): one block per level, its rows in
        # lexicographic order of the free permutation, which is the order of the Lehmer
        # index sum_i digit_i (m-1-i)!; levels with more free dims than the table allows
        # have one placeholder row and are decoded digit by digit.
        self._order_tab = np.concatenate(blocks)  # (sum of block sizes, D)
        self._order_off = np.cumsum([0] + [len(b) for b in blocks[:-1]]).astype(np.int64)  # (L,)
        self._order_untabled = [lv for lv in range(L) if len(self._order_free[lv]) > _PERM_TABLE_MAX_M]
        self._order_lut = []  # per level: dim -> position among the free dims (m for the others)
        for free in self._order_free:
            lut = np.full(D, len(free), dtype=np.int64)
            lut[free] = np.arange(len(free))
            self._order_lut.append(lut)

    def _build_keep(self) -> None:
        L, T = self._L, self._T
        p = self.problem
        holds = self.arch.holds_mask(p)
        state = np.full((L, T), -1, dtype=np.int64)  # -1 free, 0 bypass, 1 keep
        state[~holds] = 0
        state[0] = 1
        src = self.constraints.source or "constraints"
        for rule in self.constraints.keep:
            where = f"{src}: keep rule at level {rule.level} for {rule.tensor!r}"
            lv = self._level(rule.level, where)
            mask = p.tensors_matching(frozenset({rule.tensor}))
            if not mask.any():
                raise SpecError(f"{where}: no tensor named or with role {rule.tensor!r}; tensors: "
                                f"{[f'{t.name} ({t.role.value})' for t in p.tensors]}")
            for t in np.nonzero(mask)[0]:
                if rule.keep is True and not holds[lv, t]:
                    raise SpecError(f"{where}: level {rule.level} may not hold {p.tensors[t].name} (arch `holds`)")
                if lv == 0:
                    if rule.keep is False:
                        raise SpecError(f"{where}: the outermost level {rule.level} must keep every tensor")
                    continue
                if not holds[lv, t]:
                    continue
                state[lv, t] = -1 if rule.keep is None else int(rule.keep)
        self._keep_state = state
        self._keep_base = state == 1
        self._keep_free = np.argwhere(state == -1)  # (n_free, 2) (level, tensor)
        # decoded points pass check_batch's factor, order and keep rules and the constraints
        # (so `check` of a decoded batch needs only `_fast_reasons`) unless a rule is odd
        perms = (np.sort(self._order_tab, axis=1) == np.arange(self._D)).all()
        self._decoded_clean = bool(perms and not (self._keep_base & ~holds).any() and self._keep_base[0].all())

    def _build_params(self) -> None:
        names: list[str] = []
        kinds: list[str] = []
        bounds: list[int] = []
        lv_names = self.arch.level_names
        self._tile_dims = np.array([d for d in range(self._D) if self._table_rows[d] > 1], dtype=np.int64)
        for d in self._tile_dims:
            names.append(f"tile.{self.problem.dim_names[d]}")
            kinds.append("tile")
            bounds.append(int(self._table_rows[d]))
        self._tile_cols = np.arange(len(self._tile_dims), dtype=np.int64)
        self._order_cols: list[IntArray] = []
        for lv in range(self._L):
            m = len(self._order_free[lv])
            start = len(names)
            for i in range(m - 1):
                names.append(f"order.{lv_names[lv]}.{i}")
                kinds.append("order")
                bounds.append(m - i)
            self._order_cols.append(np.arange(start, len(names), dtype=np.int64))
        # Lehmer digits -> row in the order table (float64 matmul: exact, sums < 8!)
        tabled = [lv for lv in range(self._L) if lv not in self._order_untabled]
        self._order_tab_cols = np.concatenate([self._order_cols[lv] for lv in tabled] + [np.zeros(0, np.int64)])
        self._order_weights = np.zeros((len(self._order_tab_cols), self._L))
        i = 0
        for lv in tabled:
            m = len(self._order_free[lv])
            for j in range(m - 1):
                self._order_weights[i, lv] = math.factorial(m - 1 - j)
                i += 1
        self._levels_ok = np.array([len(f) >= 2 for f in self._order_free])
        # free loops of every level padded to the largest count M (for swaps of many levels
        # at once): positions in the order (padding repeats the first), which are real, and
        # the level's Lehmer digit columns (padding: column 0, never written)
        self._n_free = np.array([len(f) for f in self._order_free], dtype=np.int64)
        M = max(int(self._n_free.max()), 1)
        outer_n = np.array([len(o) for o in self._order_outer], dtype=np.int64)
        self._free_valid = np.arange(M)[None, :] < self._n_free[:, None]  # (L, M)
        self._free_pos = np.where(self._free_valid, outer_n[:, None] + np.arange(M), np.minimum(outer_n, self._D - 1)[:, None])
        self._order_cols_pad = np.zeros((self._L, max(M - 1, 1)), dtype=np.int64)
        for lv, c in enumerate(self._order_cols):
            self._order_cols_pad[lv, : len(c)] = c
        self._order_lut_all = np.stack(self._order_lut)  # (L, D)
        ms = {int(c) for c in self._n_free if c >= 2}
        self._swap_m = ms.pop() if len(ms) == 1 and M in ms else 0  # the one free count of swappable levels, or 0
        self._free_mask_ld = np.zeros((self._L, self._D), dtype=bool)  # free dims per level
        for lv, free in enumerate(self._order_free):
            self._free_mask_ld[lv, free] = True
        start = len(names)
        for lv, t in self._keep_free:
            names.append(f"keep.{lv_names[lv]}.{self.problem.tensor_names[t]}")
            kinds.append("keep")
            bounds.append(2)
        self._keep_cols = np.arange(start, len(names), dtype=np.int64)
        self.param_names: tuple[str, ...] = tuple(names)
        self.param_kinds: tuple[str, ...] = tuple(kinds)
        self.bounds: IntArray = np.array(bounds, dtype=np.int64)
        self.bounds.setflags(write=False)
        self.n_params: int = len(names)

    # --- size -----------------------------------------------------------------------------
    def size(self) -> SpaceSize:
        """Exact sizes (Python ints) of the space and its sub-spaces."""
        per_dim = tuple((self.problem.dim_names[d], int(self._table_rows[d])) for d in range(self._D))
        per_level = tuple((self.arch.level_names[lv], math.factorial(len(self._order_free[lv])))
                          for lv in range(self._L))
        fact = math.prod(c for _, c in per_dim)
        orders = math.prod(c for _, c in per_level)
        bypass = 2 ** len(self._keep_free)
        return SpaceSize(total=fact * orders * bypass, factorizations=fact, orders=orders, bypass=bypass,
                         per_dim=per_dim, per_level_orders=per_level)

    # --- encode / decode ----------------------------------------------------------------
    def _check_x(self, x: IntArray) -> IntArray:
        x = np.asarray(x)
        if x.ndim == 1:
            x = x[None]
        if x.ndim != 2 or x.shape[1] != self.n_params:
            raise SpecError(f"encoded vectors have shape {x.shape}; expected (n, {self.n_params})")
        x = x.astype(np.int64, copy=False)
        if not len(x):
            return x
        if self.compiled:
            at = _kern.first_outside(np.ascontiguousarray(x), self.bounds)
            outside = at >= 0
        else:
            outside = bool((x.view(np.uint64) >= self.bounds.view(np.uint64)).any())  # negatives wrap to huge
        if outside:
            bad = np.argwhere((x < 0) | (x >= self.bounds[None]))[0]
            raise SpecError(
                f"encoded vector row {bad[0]}: {self.param_names[bad[1]]} = {x[bad[0], bad[1]]}; "
                f"expected 0 <= value < {self.bounds[bad[1]]}"
            )
        return x

    def _rows_to_factors(self, rows: IntArray) -> tuple[IntArray, IntArray]:
        """(n, D) table row indices -> temporal (n, L, D), spatial (n, L, D, 2)."""
        # gathers straight into the (n, L, D) layout from level-major copies of the tables
        idx = (rows + self._offsets[None, :])[:, None, :] + self._lvl_off[None, :, None]  # (n, L, D)
        return np.take(self._lvl_t, idx), np.take(self._lvl_s, idx, axis=0)

    def _decode_orders(self, x: IntArray) -> IntArray:
        """(n, L, D) loop orders of encoded vectors: every level through the order table at
        once (Lehmer index of each level's digits -> row), digit by digit past the table."""
        n = len(x)
        if len(self._order_tab_cols):
            idx = (x[:, self._order_tab_cols].astype(np.float64) @ self._order_weights).astype(np.int64)
            idx += self._order_off
        else:
            idx = np.broadcast_to(self._order_off, (n, self._L))
        order: IntArray = np.take(self._order_tab, idx, axis=0)
        for lv in self._order_untabled:
            order[:, lv, len(self._order_outer[lv]): len(self._order_outer[lv]) + len(self._order_free[lv])] = \
                self._free_orders(x, lv)
        return order

    def _free_orders(self, x: IntArray, lv: int) -> IntArray:
        """(n, m) the free dims of level lv in loop order (outermost first) for encoded
        vectors, for a level with more free loops than the order tables hold (smaller
        levels are decoded through the tables)."""
        free = self._order_free[lv]
        m = len(free)
        digits = x[:, self._order_cols[lv]]
        full = np.concatenate([digits, np.zeros((len(x), 1), dtype=np.int64)], axis=1)
        return free[_lehmer_decode(full, np.arange(m, dtype=np.int64))]

    def _lehmer_of(self, local: IntArray) -> IntArray:
        """(k, m) permutations of 0..m-1 -> (k, m-1) Lehmer digits. Up to the table size: the
        permutation's rank among all m! in lexicographic order (a binary search on their
        base-m values), written in the factorial number system."""
        m = local.shape[1]
        if m > _PERM_TABLE_MAX_M:
            return _lehmer_digits(local)[:, : m - 1]
        cached = self._rank_tables.get(m)
        if cached is None:
            pw = m ** np.arange(m - 1, -1, -1, dtype=np.int64)
            fw = np.array([math.factorial(m - 1 - i) for i in range(m - 1)], dtype=np.int64)
            cached = (self._perms_by_m[m] @ pw, pw, fw, np.arange(m, 1, -1, dtype=np.int64))
            self._rank_tables[m] = cached
        keys, pw, fw, radix = cached
        rank = np.searchsorted(keys, local @ pw)
        out: IntArray = rank[:, None] // fw % radix
        return out

    def decode(self, x: IntArray) -> MappingBatch:
        """Encoded vectors (n, n_params) inside the box -> the mappings they stand for."""
        x = self._check_x(x)
        n = len(x)
        if self.compiled:
            rows, temporal, spatial, order, keep = _kern.decode(self._consts(), x)
            batch = MappingBatch(temporal=temporal, spatial=spatial, order=order, keep=keep)
        else:
            rows = np.zeros((n, self._D), dtype=np.int64)
            rows[:, self._tile_dims] = x[:, self._tile_cols]
            temporal, spatial = self._rows_to_factors(rows)
            keep = np.broadcast_to(self._keep_base, (n, self._L, self._T)).copy()
            if len(self._keep_free):
                keep[:, self._keep_free[:, 0], self._keep_free[:, 1]] = x[:, self._keep_cols].astype(bool)
            batch = MappingBatch(temporal=temporal, spatial=spatial, order=self._decode_orders(x), keep=keep)
        if n <= _DECODED_MEMO_ROWS:
            # a batch's arrays are read-only, so `check` may judge this very batch from
            # its table rows and keep bits
            self._decoded = (batch, rows, batch.keep)
        return batch

    def _factor_rows(self, batch: MappingBatch) -> IntArray:
        """(n, D) table row of each dim's factors, -1 where not in the table."""
        n = len(batch)
        F = np.concatenate([batch.temporal[..., None], batch.spatial], axis=-1)  # (n, L, D, 3)
        F = np.ascontiguousarray(F.transpose(0, 2, 1, 3)).reshape(n * self._D, self._L * 3)
        dims = np.tile(np.arange(self._D), n)
        g = self._index.lookup(F, dims)
        rows: IntArray = np.where(g >= 0, g - self._offsets[dims], -1).reshape(n, self._D)
        return rows

    def _order_positions_ok(self, order: IntArray) -> BoolArray:
        """(n,) True where every level's order has its pinned dims exactly in place."""
        ok = np.ones(len(order), dtype=bool)
        for lv in range(self._L):
            outer, inner = self._order_outer[lv], self._order_inner[lv]
            if outer:
                ok &= (order[:, lv, : len(outer)] == np.array(outer)).all(axis=1)
            if inner:
                ok &= (order[:, lv, self._D - len(inner):] == np.array(inner)).all(axis=1)
        return ok

    def _encode_orders(self, order: IntArray, x: IntArray) -> None:
        for lv in range(self._L):
            free = self._order_free[lv]
            m = len(free)
            if m < 2:
                continue
            o = len(self._order_outer[lv])
            x[:, self._order_cols[lv]] = self._lehmer_of(self._order_lut[lv][order[:, lv, o: o + m]])

    def encode(self, batch: MappingBatch, *, canonicalize: bool = False) -> IntArray:
        """Mappings of this space -> encoded vectors (n, n_params); ``decode(encode(b)) == b``.

        Raises `SpecError` naming the first row that is not a point of the space (factors
        outside the tables, pinned loops out of place, or keep bits the space fixes
        otherwise); use `repair` first for arbitrary arrays. With ``canonicalize``,
        mappings that obey the constraints but park loops of bound 1 elsewhere than the
        space does (e.g. read from Timeloop files) are encoded as their cost-equivalent
        point of the space.
        """
        self._check_batch_shape(batch)
        if canonicalize:
            ok = self.constraint_ok(batch)
            if not ok.all():
                i = int(np.argmin(ok))
                raise SpecError(f"{int((~ok).sum())} of {len(batch)} mappings break the constraints of this map "
                                f"space (first: row {i}); call MapSpace.repair to project them")
            batch = self.repair(batch)
        n = len(batch)
        rows = self._factor_rows(batch)
        bad = (rows < 0).any(axis=1)
        order_ok = self._order_positions_ok(batch.order) & (np.sort(batch.order, axis=2) == np.arange(self._D)).all(axis=2).all(axis=1)
        fixed_keep = self._keep_state >= 0
        keep_ok = (batch.keep[:, fixed_keep] == self._keep_base[fixed_keep][None]).all(axis=1)
        bad |= ~order_ok | ~keep_ok
        if bad.any():
            i = int(np.argmax(bad))
            what = ("factors" if (rows[i] < 0).any() else "loop order" if not order_ok[i] else "keep/bypass")
            dims = [self.problem.dim_names[d] for d in np.nonzero(rows[i] < 0)[0]]
            raise SpecError(
                f"{int(bad.sum())} of {n} mappings are not points of this map space; row {i}: its {what} "
                + (f"(dims {dims}) " if dims else "")
                + "break the space's constraints or factor tables; call MapSpace.repair first"
            )
        x = np.zeros((n, self.n_params), dtype=np.int64)
        x[:, self._tile_cols] = rows[:, self._tile_dims]
        self._encode_orders(batch.order, x)
        if len(self._keep_free):
            x[:, self._keep_cols] = batch.keep[:, self._keep_free[:, 0], self._keep_free[:, 1]]
        return x

    def _check_batch_shape(self, batch: MappingBatch) -> None:
        if (batch.n_levels, batch.n_dims, batch.n_tensors) != (self._L, self._D, self._T):
            raise SpecError(
                f"mapping batch has {batch.n_levels} levels, {batch.n_dims} dims, {batch.n_tensors} tensors; "
                f"this space has {self._L} levels {list(self.arch.level_names)}, {self._D} dims "
                f"{list(self.problem.dim_names)}, {self._T} tensors"
            )

    # --- sampling -----------------------------------------------------------------------
    def sample_encoded(self, n: int, rng: np.random.Generator) -> IntArray:
        """(n, n_params) encoded vectors drawn uniformly over the box (= over the space)."""
        if self.n_params == 0:
            return np.zeros((n, 0), dtype=np.int64)
        return rng.integers(0, self.bounds, size=(n, self.n_params), dtype=np.int64)

    def sample(self, n: int, rng: np.random.Generator) -> MappingBatch:
        """n mappings drawn uniformly over the space (legal or not; see `sample_valid`)."""
        return self.decode(self.sample_encoded(n, rng))

    # --- legality -----------------------------------------------------------------------
    def utilization(self, batch: MappingBatch) -> FloatArray:
        """(n,) PE utilization: MACs / (n_macs x temporal steps); padded work is waste."""
        steps = np.prod(batch.temporal.reshape(len(batch), -1).astype(np.float64), axis=1)
        util: FloatArray = self.problem.macs / (self.arch.n_macs * steps)
        return util

    def constraint_ok(self, batch: MappingBatch) -> BoolArray:
        """(n,) True where the mapping obeys the constraints (factors, spatial dims, order, keep).

        Loop orders are compared on loops with a bound > 1 only: a pinned dim whose loop
        at that level has bound 1 may sit anywhere (it changes no cost).
        """
        rows = self._factor_rows(batch)
        ok = (rows >= 0).all(axis=1)
        fixed_keep = self._keep_state >= 0
        ok &= (batch.keep[:, fixed_keep] == self._keep_base[fixed_keep][None]).all(axis=1)
        pos = np.empty_like(batch.order)
        np.put_along_axis(pos, batch.order, np.broadcast_to(np.arange(self._D), batch.order.shape), axis=2)
        for lv in range(self._L):
            outer, inner, free = self._order_outer[lv], self._order_inner[lv], list(self._order_free[lv])
            if not outer and not inner:
                continue
            seq = outer + free + inner  # required relative order of groups
            group = {d: 0 for d in outer} | {d: 1 for d in free} | {d: 2 for d in inner}
            rank = {d: i for i, d in enumerate(seq)}
            nonunit = batch.temporal[:, lv, :] > 1  # (n, D)
            p = pos[:, lv, :]
            for a in outer + inner:
                for b in seq:
                    if a == b:
                        continue
                    # a pinned dim must stay before/after b as the pinned order says
                    if group[a] == group[b] == 1:
                        continue
                    if rank[a] < rank[b]:
                        ok &= ~(nonunit[:, a] & nonunit[:, b] & (p[:, a] > p[:, b]))
        return np.asarray(ok, dtype=bool)

    def check(self, batch: MappingBatch) -> BatchCheck:
        """Legality of every mapping: `check_batch` (factors, order, keep, fanout, capacity),
        then the minimum utilization, then the constraints. Returns valid/reason/level."""
        memo = getattr(self, "_decoded", None)
        if memo is not None and memo[0] is batch and self._decoded_clean:
            # the last decoded batch: factors, orders, keep bits and the constraints hold by
            # construction, which leaves fanout, capacity and utilization (same rules and
            # reason order as below, see `_fast_reasons`)
            reason, level = self._fast_reasons(memo[1], memo[2])
            return BatchCheck(reason == 0, reason, level)
        base = check_batch(self.problem, self.arch, batch, allow_padding=self.allow_padding)
        reason = base.reason.copy()
        level = base.level.copy()
        if self.min_utilization > 0:
            low = (reason == 0) & (self.utilization(batch) < self.min_utilization - 1e-12)
            reason[low] = int(Reason.UTILIZATION)
        still = reason == 0
        if still.any():
            sub = batch.take(np.nonzero(still)[0]) if not still.all() else batch
            bad = ~self.constraint_ok(sub)
            idx = np.nonzero(still)[0][bad]
            reason[idx] = int(Reason.CONSTRAINT)
        return BatchCheck(reason == 0, reason, level)

    def violation_summary(self, batch: MappingBatch, result: BatchCheck | None = None) -> str:
        """A histogram of why mappings are illegal, e.g. ``71% exceed GLB (need >= ...)``."""
        from accelmap.mapper.check import capacity_need_words

        res = result or self.check(batch)
        n = len(batch)
        bad = ~res.valid
        parts: list[tuple[int, str]] = []
        keys = np.stack([res.reason[bad], res.level[bad]], axis=1) if bad.any() else np.zeros((0, 2), int)
        uniq, counts = np.unique(keys, axis=0, return_counts=True) if len(keys) else (keys, np.zeros(0, int))
        need = None
        for (code, lv), cnt in zip(uniq, counts, strict=True):
            pct = 100.0 * cnt / max(n, 1)
            code = Reason(int(code))
            if code is Reason.CAPACITY:
                if need is None:
                    need = capacity_need_words(self.problem, batch)
                rows = bad & (res.reason == int(code)) & (res.level == lv)
                level = self.arch.levels[int(lv)]
                text = (f"{pct:.0f}% exceed {level.name} (need >= {int(need[rows, lv].min()):,} words, "
                        f"have {level.capacity_words:,})")
            elif code is Reason.FANOUT:
                level = self.arch.levels[int(lv)]
                text = f"{pct:.0f}% exceed the PE array fanout below {level.name} ({level.fanout_x}x{level.fanout_y})"
            elif code is Reason.UTILIZATION:
                text = f"{pct:.0f}% fall below the minimum utilization {self.min_utilization:.0%}"
            elif code is Reason.CONSTRAINT:
                text = f"{pct:.0f}% violate the constraints"
            else:
                text = f"{pct:.0f}% fail the {code.name.lower()} check"
            parts.append((int(cnt), text))
        parts.sort(key=lambda t: -t[0])
        return ", ".join(t for _, t in parts)

    def _fast_reasons(self, rows: IntArray, keep: BoolArray) -> tuple[IntArray, IntArray]:
        """Fanout, capacity and utilization of decoded-to-be points, from table rows and keep
        bits alone (orders never change legality). Same rules and reason order as
        `check_batch` followed by the utilization check of `check`."""
        if self.compiled:
            return _kern.fast_reasons(self._consts(), rows, keep)
        n = len(rows)
        flat = rows + self._offsets[None, :]
        reason = np.zeros(n, dtype=np.int64)
        level = np.full(n, -1, dtype=np.int64)
        if len(self._fan_cols):
            used = np.multiply.reduce(np.take(self._row_sxy, flat.T, axis=0), axis=0, dtype=np.int64)  # (n, n_fan_cols)
            bad = used > self._fan_limits[None, :]
            anyb = bad.any(axis=1)
            reason[anyb] = int(Reason.FANOUT)
            level[anyb] = self._fan_cols[np.argmax(bad[anyb], axis=1)] // 2
        else:
            anyb = np.zeros(n, dtype=bool)
        caps = self.arch.capacities_words
        cap_levels = self._cap_levels
        live = np.nonzero(~anyb)[0]
        if cap_levels and len(live):
            fl = flat[live]
            m, Lc = len(live), len(cap_levels)
            coef, n_coords = self._span_coef
            # a coordinate sum_d a_d x_d over a tile spans 1 + sum_d a_d (t_d - 1) values
            # (`Problem.footprint`); integers far below 2**53, so the float64 product is exact
            tm1 = np.take(self._row_tiles_m1, fl, axis=0)  # (m, D, Lc)
            span = (np.tensordot(tm1, coef, axes=([1], [0])).astype(np.int64) + 1).reshape(m, Lc, self._T, n_coords)
            fp = span[..., 0].copy()  # (m, Lc, T) footprints: product over the coordinates
            for c in range(1, n_coords):
                fp *= span[..., c]
            need = (fp * keep[live][:, cap_levels, :]).sum(axis=2)
            over = need > caps[cap_levels][None, :]
            anyo = over.any(axis=1)
            idx = live[anyo]
            reason[idx] = int(Reason.CAPACITY)
            level[idx] = np.asarray(cap_levels)[np.argmax(over[anyo], axis=1)]
        if self.min_utilization > 0:
            steps = self._row_tsteps[flat].prod(axis=1)
            util = self.problem.macs / (self.arch.n_macs * steps)
            low = (reason == 0) & (util < self.min_utilization - 1e-12)
            reason[low] = int(Reason.UTILIZATION)
        return reason, level

    @property
    def _fp_terms(self) -> list[list[list[tuple[int, int]]]]:
        cached = getattr(self, "_fp_terms_cache", None)
        if cached is None:
            coef = self.problem.coefficients
            used = self.problem.rank_used
            cached = [
                [[(int(d), int(coef[t, c, d])) for d in np.nonzero(coef[t, c])[0]]
                 for c in range(coef.shape[1]) if used[t, c]]
                for t in range(self._T)
            ]
            self._fp_terms_cache = cached
        return cached

    def sample_valid(self, n: int, rng: np.random.Generator, *, max_draws: int | None = None,
                     method: str = "auto", allow_fewer: bool = False) -> MappingBatch:
        """n legal mappings.

        Parameters
        ----------
        method
            ``"reject"``: uniform draws, illegal ones discarded, so the result is uniform
            over the legal set. Loop orders never decide legality, so they are drawn only
            for the draws whose factors and bypass bits pass. ``"repair"``: every draw is
            pushed towards legality by moving prime factors out to the outermost level's
            temporal loop (fast when the legal fraction is tiny; not uniform).
            ``"auto"``: rejection, switching to repair when the legal fraction seen so far
            could not deliver n within ``max_draws``.
        max_draws
            Give up after this many draws (default ``max(100_000, 200 n)``).
        allow_fewer
            Return what was found instead of raising when fewer than n legal were found
            (still raises when none was).

        Raises
        ------
        InfeasibleSpaceError
            With a violation histogram, when fewer than n (or none) legal mappings were
            found within ``max_draws``.
        """
        if method not in ("auto", "reject", "repair"):
            raise SpecError(f"sample_valid method = {method!r}; expected 'auto', 'reject' or 'repair'")
        max_draws = max_draws if max_draws is not None else max(100_000, 200 * n)
        found: list[IntArray] = []  # encoded legal points
        n_found = 0
        drawn = 0
        last_u: tuple[IntArray, IntArray] | None = None
        use_repair = method == "repair"
        while n_found < n and drawn < max_draws:
            want = n - n_found
            k = int(min(max_draws - drawn, max(4096, 4 * want), 1 << 16))
            drawn += k
            if use_repair:
                x = self.sample_encoded(k, rng)
                rows, keep = self._rows_and_keep(x)
                rows = self._push_out(rows, keep, rng)
                x[:, self._tile_cols] = rows[:, self._tile_dims]
                reason, _ = self._fast_reasons(rows, keep)
                ok = np.nonzero(reason == 0)[0][:want]
                good = x[ok] if len(ok) else None
            else:
                # stage 1: factor rows and bypass bits only (uniform: floor(u * bound))
                cols = np.concatenate([self._tile_cols, self._keep_cols])
                u = np.minimum((rng.random((k, len(cols))) * self.bounds[cols]).astype(np.int64),
                               self.bounds[cols] - 1)
                rows = np.zeros((k, self._D), dtype=np.int64)
                nt = len(self._tile_cols)
                rows[:, self._tile_dims] = u[:, :nt]
                keep = np.broadcast_to(self._keep_base, (k, self._L, self._T)).copy()
                if len(self._keep_free):
                    keep[:, self._keep_free[:, 0], self._keep_free[:, 1]] = u[:, nt:].astype(bool)
                reason, _ = self._fast_reasons(rows, keep)
                ok = np.nonzero(reason == 0)[0][:want]
                last_u = (cols, u[:16384])
                good = None
                if len(ok):
                    # stage 2: loop orders (independent of legality) for the survivors only
                    x = self.sample_encoded(len(ok), rng)
                    x[:, cols] = u[ok]
                    good = x
            if good is not None and len(good):
                found.append(good[:want])
                n_found += min(len(good), want)
            if method == "auto" and not use_repair and n_found < n:
                frac = n_found / drawn
                if frac * (max_draws - drawn) < (n - n_found):
                    use_repair = True
        if n_found >= n or (n_found and allow_fewer):
            if not found:
                return self.decode(np.zeros((0, self.n_params), dtype=np.int64))
            return self.decode(np.concatenate(found)[:n])
        if last_u is not None:
            x = self.sample_encoded(len(last_u[1]), rng)
            x[:, last_u[0]] = last_u[1]
            sample = self.decode(x)
        else:
            sample = self.sample(16384, rng)
        raise InfeasibleSpaceError(
            f"{n_found} of {drawn} sampled mappings of {self.problem.name} on {self.arch.name} fit"
            f"{'' if n_found == 0 else f' (wanted {n})'}: {self.violation_summary(sample) or 'none failed'}. "
            "Try a larger buffer, fewer constraints, a lower min_utilization, or imperfect factorization."
        )

    def legalize_encoded(self, x: IntArray, rng: np.random.Generator) -> IntArray:
        """Encoded points pushed towards legality with their keep bits and loop orders as
        given: prime factors move outwards while a fanout or a capacity fails, inwards while
        the utilization is too low (`_push_out`, the repair of `sample_valid`). Rows that
        cannot be fixed come back as far as they got (still illegal)."""
        x = self._check_x(x).copy()
        if len(x) == 0 or len(self._tile_cols) == 0:
            return x
        rows, keep = self._rows_and_keep(x)
        rows = self._push_out(rows, keep, rng)
        x[:, self._tile_cols] = rows[:, self._tile_dims]
        return x

    def _rows_and_keep(self, x: IntArray) -> tuple[IntArray, BoolArray]:
        """Encoded points (n, n_params) -> their factor-table rows (n, D) and keep bits (n, L, T)."""
        n = len(x)
        rows = np.zeros((n, self._D), dtype=np.int64)
        rows[:, self._tile_dims] = x[:, self._tile_cols]
        keep = np.broadcast_to(self._keep_base, (n, self._L, self._T)).copy()
        if len(self._keep_free):
            keep[:, self._keep_free[:, 0], self._keep_free[:, 1]] = x[:, self._keep_cols].astype(bool)
        return rows, keep

    # --- moves: repair towards legality, neighbours, repair of broken products --------
    def _move_prime(self, rows: IntArray, d: int, src_slot: IntArray, dst_slot: IntArray,
                    prime: IntArray) -> IntArray:
        """Move ``prime`` of dim d from flat slot src to dst in table rows; -1 where illegal."""
        vec = np.take(self._flat, rows + self._offsets[d], axis=0)  # a copy
        i = np.arange(len(rows))
        ok = vec[i, src_slot] % prime == 0
        vec[i, src_slot] = np.where(ok, vec[i, src_slot] // prime, vec[i, src_slot])
        vec[i, dst_slot] = np.where(ok, vec[i, dst_slot] * prime, vec[i, dst_slot])
        g = self._index.lookup(vec, d)
        return np.where(ok & (g >= 0), g - self._offsets[d], -1)

    def _push_out(self, rows: IntArray, keep: BoolArray, rng: np.random.Generator,
                  max_rounds: int = 64) -> IntArray:
        """Repair towards legality: while a row breaks the fanout below level l, move a
        prime factor of one of its spatial factors there to a temporal loop at level <= l;
        while it overflows level l, move a prime factor of a dim that indexes a tensor kept
        at l, from a slot at level >= l to a temporal loop at a level < l. Either move
        shrinks what failed and grows nothing inside it. Rows below the minimum
        utilization get the opposite move (`_push_in`). Moves that would leave the dim's
        table (a constraint) are skipped and another is drawn in the next round.

        rows (n, D) table rows, keep (n, L, T); returns the new rows.
        """
        if self.compiled:  # same moves and draws, one compiled call
            return _kern.push_out(self._consts(), rows, keep, rng, max_rounds)
        rows = rows.copy()
        L = self._L
        S = L * 3
        slot_lv = np.repeat(np.arange(L), 3)
        slot_k = np.tile(np.arange(3), L)
        rel = self.problem.relevance  # (T, D)
        active = np.arange(len(rows))
        strikes = np.zeros(len(rows), dtype=np.int64)  # rounds in a row without a move
        for _ in range(max_rounds):
            if len(active) == 0:
                break
            before = rows[active].copy()
            reason, level = self._fast_reasons(rows[active], keep[active])
            low = reason == int(Reason.UTILIZATION)
            sel = (reason == int(Reason.FANOUT)) | (reason == int(Reason.CAPACITY))
            if low.any():
                self._push_in(rows, active[low], rng)
            out = active[sel]
            if len(out):
                self._push_out_round(rows, keep, out, level[sel], reason[sel] == int(Reason.CAPACITY), rng,
                                     slot_lv, slot_k, rel, S)
            # rows still failing stay; rows that could not move 3 rounds running leave
            changed = (rows[active] != before).any(axis=1)
            strikes[active] = np.where(changed, 0, strikes[active] + 1)
            failing = low | sel
            active = active[failing & (strikes[active] < 3)]
        return rows

    def _push_out_round(self, rows: IntArray, keep: BoolArray, active: IntArray, lvl: IntArray, is_cap: BoolArray,
                        rng: np.random.Generator, slot_lv: IntArray, slot_k: IntArray, rel: BoolArray,
                        S: int) -> None:
        """One push-out move for each row of ``active`` (in place); see `_push_out`."""
        D = self._D
        m = len(active)
        vec = np.take(self._big, rows[active] + self._offsets[None, :], axis=0).reshape(m, D, S)
        src_ok = np.where(
            is_cap[:, None], slot_lv[None, :] >= lvl[:, None],
            (slot_lv[None, :] == lvl[:, None]) & (slot_k[None, :] > 0),
        )  # (m, S)
        dims_ok = np.ones((m, D), dtype=bool)
        if is_cap.any():
            kept = keep[active, lvl, :]  # (m, T)
            dims_ok = np.where(is_cap[:, None], (kept.astype(np.int64) @ rel.astype(np.int64)) > 0, True)
        movable = (vec > 1) & src_ok[:, None, :] & dims_ok[:, :, None]
        score = np.where(movable, rng.random(movable.shape), -1.0).reshape(m, -1)
        pick = score.argmax(axis=1)
        has = score[np.arange(m), pick] >= 0
        d_sel, s_sel = pick // S, pick % S
        # destination: a temporal loop at a level < l (capacity) or <= l (fanout)
        top = np.where(is_cap, lvl - 1, lvl)
        has &= top >= 0
        dst_lv = (rng.random(m) * (np.maximum(top, 0) + 1)).astype(np.int64)
        dst = dst_lv * 3 + _T
        for d in np.unique(d_sel[has]):
            ii = np.nonzero(has & (d_sel == d))[0]
            f = vec[ii, d, s_sel[ii]]
            prime = self._primes[f, (rng.random(len(ii)) * self._n_primes[f]).astype(np.int64)]
            moved = self._move_prime(rows[active[ii], d], int(d), s_sel[ii], dst[ii], prime)
            ok = moved >= 0
            rows[active[ii[ok]], d] = moved[ok]

    def _push_in(self, rows: IntArray, idx: IntArray, rng: np.random.Generator) -> None:
        """Raise the utilization of rows ``idx`` (in place): move a prime factor of a
        temporal loop into a spatial slot whose axis has room for it. A source inside the
        slot's level (a deeper temporal loop) shrinks tiles and grows none, so it is
        preferred; otherwise the factor comes from a temporal loop at or above the level
        (tiles grow; a later push-out round may have to undo it)."""
        if len(self._fan_cols) == 0 or len(idx) == 0:
            return
        L, D = self._L, self._D
        S = L * 3
        m = len(idx)
        vec = np.take(self._big, rows[idx] + self._offsets[None, :], axis=0).reshape(m, D, S)
        used = np.take(self._row_sxy, rows[idx] + self._offsets[None, :], axis=0).prod(axis=1, dtype=np.int64)  # (m, n_fan)
        room = self._fan_limits[None, :] // np.maximum(used, 1)  # largest factor that still fits
        # destination: a spatial (level, axis) with room for a factor >= 2, at random
        fan_lv = self._fan_cols // 2
        fan_slot = fan_lv * 3 + 1 + self._fan_cols % 2  # flat slot index of (level, X|Y)
        dscore = np.where(room >= 2, rng.random(room.shape), -1.0)
        dj = dscore.argmax(axis=1)
        has = dscore[np.arange(m), dj] >= 0
        dst = fan_slot[dj]
        dst_lv = fan_lv[dj]
        exists = self._slot_exists.reshape(D, S)  # (D, S)
        slot_lv = np.repeat(np.arange(L), 3)
        is_t = np.tile(np.arange(3), L) == _T
        # source: a temporal loop (> 1) of a dim that may use the destination slot
        src_ok = (vec > 1) & is_t[None, None, :] & exists[None, :, :] & exists[:, dst].T[:, :, None]
        deeper = slot_lv[None, :] > dst_lv[:, None]  # (m, S)
        score = np.where(src_ok, rng.random(src_ok.shape) + 1.0 * deeper[:, None, :], -1.0).reshape(m, -1)
        pick = score.argmax(axis=1)
        has &= score[np.arange(m), pick] >= 0
        d_sel, s_sel = pick // S, pick % S
        for d in np.unique(d_sel[has]):
            ii = np.nonzero(has & (d_sel == d))[0]
            f = vec[ii, d, s_sel[ii]]
            prime = self._primes[f, (rng.random(len(ii)) * self._n_primes[f]).astype(np.int64)]
            fits = prime <= room[ii, dj[ii]]
            moved = self._move_prime(rows[idx[ii], d], int(d), s_sel[ii], dst[ii], prime)
            ok = fits & (moved >= 0)
            rows[idx[ii[ok]], d] = moved[ok]

    def neighbours(self, batch: MappingBatch, rng: np.random.Generator, *, flips: bool = True) -> MappingBatch:
        """One random move per row (vectorized): move a prime factor of one dim between
        two slots (levels, temporal <-> spatial), swap two free loops of one level, or
        flip one free bypass bit. The result stays in the space (factor products and
        constraints hold). Rows admitting no move of the drawn kind try the others; a
        space of one point returns the batch unchanged. `neighbours_encoded` does the
        same on encoded vectors.
        """
        self._check_batch_shape(batch)
        rows = self._factor_rows(batch)
        if (rows < 0).any():
            raise SpecError("neighbours: some mappings are not points of this space; call MapSpace.repair first")
        bits = batch.keep[:, self._keep_free[:, 0], self._keep_free[:, 1]] if len(self._keep_free) else \
            np.zeros((len(batch), 0), dtype=bool)
        order = batch.order.copy()

        def seg_of(ii: IntArray, lv: IntArray) -> IntArray:
            return order[ii[:, None], lv[:, None], self._free_pos[lv]]

        def set_seg(ii: IntArray, lv: IntArray, seg: IntArray) -> None:
            rr, cc = np.nonzero(self._free_valid[lv])
            order[ii[rr], lv[rr], self._free_pos[lv[rr], cc]] = seg[rr, cc]

        bits = bits.copy()
        rows = self._moves(rows, seg_of, set_seg, bits, rng, flips)
        temporal, spatial = self._rows_to_factors(rows)
        keep = batch.keep.copy()
        if len(self._keep_free):
            keep[:, self._keep_free[:, 0], self._keep_free[:, 1]] = bits
        return MappingBatch(temporal=temporal, spatial=spatial, order=order, keep=keep)

    def neighbours_encoded(self, x: IntArray, rng: np.random.Generator, *, flips: bool = True) -> IntArray:
        """`neighbours` on encoded vectors (n, n_params), without building mappings: only
        the swapped levels of the swapped rows are decoded and re-encoded. With ``flips``
        False the keep bits are held: the moves are those of a space whose keep bits are
        all fixed (a drawn flip becomes a move of another kind)."""
        x = self._check_x(x)
        if self.compiled:  # the whole of `_moves` in one compiled call, same draws
            return _kern.neighbours_encoded(self._consts(), x, rng, flips)
        rows = np.zeros((len(x), self._D), dtype=np.int64)
        rows[:, self._tile_dims] = x[:, self._tile_cols]
        bits = x[:, self._keep_cols].astype(bool)
        out = x.copy()

        def seg_of(ii: IntArray, lv: IntArray) -> IntArray:
            xs = x[ii]
            idx = (xs[:, self._order_tab_cols].astype(np.float64) @ self._order_weights)[np.arange(len(ii)), lv]
            full = np.take(self._order_tab, idx.astype(np.int64) + self._order_off[lv], axis=0)  # (k, D) orders of the levels lv
            for ul in self._order_untabled:
                r = np.flatnonzero(lv == ul)
                if len(r):
                    o = len(self._order_outer[ul])
                    full[r, o: o + len(self._order_free[ul])] = self._free_orders(xs[r], ul)
            return np.take_along_axis(full, self._free_pos[lv], axis=1)

        def set_seg(ii: IntArray, lv: IntArray, seg: IntArray) -> None:
            local = self._order_lut_all[lv[:, None], seg]  # positions among the free dims
            if self._swap_m:  # every level with swaps has this many free loops
                out[ii[:, None], self._order_cols_pad[lv]] = self._lehmer_of(local)
                return
            m_row = self._n_free[lv]
            for m in np.flatnonzero(np.bincount(m_row)):
                r = np.flatnonzero(m_row == m)
                out[ii[r, None], self._order_cols_pad[lv[r], : m - 1]] = self._lehmer_of(local[r, :m])

        rows = self._moves(rows, seg_of, set_seg, bits, rng, flips)
        out[:, self._tile_cols] = rows[:, self._tile_dims]
        out[:, self._keep_cols] = bits
        return out

    def _moves(self, rows: IntArray, seg_of: Callable[[IntArray, IntArray], IntArray],
               set_seg: Callable[[IntArray, IntArray, IntArray], None], bits: BoolArray,
               rng: np.random.Generator, flips: bool = True) -> IntArray:
        """The moves of `neighbours` on table rows (n, D) and free keep bits (n, n_keep_free,
        modified in place); returns the new rows. Loop orders are seen through ``seg_of(ii,
        lv)``: for rows ii (k,) and one level each lv (k,), that level's free dims outermost
        first, padded to the largest free count M ((k, M); see ``_free_pos``), and written
        through ``set_seg(ii, lv, seg)`` (the unpadded part); each row is written at most once.
        With the compiled engine the factor moves run in `accelmap.mapper._space_kernel`
        (which also has the whole of this method for encoded points, `moves_encoded`)."""
        n = len(rows)
        rows = rows.copy()
        kinds = rng.integers(0, 3, size=n)  # 0 factor, 1 swap, 2 flip
        done = np.zeros(n, dtype=bool)
        levels_ok = self._levels_ok
        for attempt in range(6):
            if done.all():
                break
            # two tries of the drawn kind, then the others; a move of one kind never marks
            # rows of another kind done, so the three selections can be made up front
            kind_now = np.where(done, 3, (kinds + attempt // 2) % 3)
            # --- factor moves
            sel = np.flatnonzero(kind_now == 0)
            if len(sel) and len(self._tile_dims):
                if self.compiled:
                    _kern.factor_moves(self._consts(), rows, sel, done, rng)
                else:
                    self._factor_moves(rows, sel, done, rng)
            # --- swaps of two free loops in one level
            sel = np.flatnonzero(kind_now == 1)
            if len(sel) and levels_ok.any():
                self._swap_moves(rows, sel, seg_of, set_seg, rng)
                done[sel] = True
            # --- bypass flips
            sel = np.flatnonzero(kind_now == 2)
            if len(sel) and bits.shape[1] and flips:
                k = rng.integers(0, bits.shape[1], size=len(sel))
                bits[sel, k] = ~bits[sel, k]
                done[sel] = True
        return rows

    def _factor_moves(self, rows: IntArray, sel: IntArray, done: BoolArray, rng: np.random.Generator) -> None:
        """Move a prime factor of one random dim between two of its slots, for rows ``sel``
        (in place; rows that moved are marked in ``done``).

        The random stream is the one of a loop over the picked dims in increasing order
        drawing, per dim with k rows, source scores (k, S), destination scores (k, S) and
        prime picks (k,): all are drawn at once and each row takes its slice."""
        S = self._L * 3
        k = len(sel)
        d_pick = self._tile_dims[rng.integers(0, len(self._tile_dims), size=k)]
        perm = np.argsort(d_pick, kind="stable")
        d = d_pick[perm]
        r_ = sel[perm]
        cnt = np.bincount(d, minlength=self._D)
        gs = (np.cumsum(cnt) - cnt)[d]  # where each row's dim group starts
        kd = cnt[d]
        j = np.arange(k) - gs  # row within its group
        # row j of a group of kd rows that starts at gs reads its source scores at
        # gs (2S+1) + j S + c, its destination scores kd S further on and its prime pick
        # at gs (2S+1) + 2 kd S + j (c < S): one (k, 2S+1) gather, see `_draw_*`
        at = (gs * (2 * S + 1))[:, None] + j[:, None] * self._draw_j + kd[:, None] * self._draw_kd + self._draw_c
        u = rng.random(k * (2 * S + 1))[at]
        src_u, dst_u, pick_u = u[:, :S], u[:, S: 2 * S], u[:, 2 * S]
        g = rows[r_, d] + self._offsets[d]
        vec = np.take(self._flat, g, axis=0)  # (k, S)
        exists = np.take(self._slot_exists_flat, d, axis=0)  # (k, S), a copy
        src_ok = (vec > 1) & exists
        src = np.where(src_ok, src_u, -1.0).argmax(axis=1)
        ar = np.arange(k)
        has = src_ok[ar, src]
        exists[ar, src] = False
        dst = np.where(exists, dst_u, -1.0).argmax(axis=1)
        has &= exists[ar, dst]
        f = vec[ar, src]
        pick = (pick_u * np.maximum(self._n_primes[f], 1)).astype(np.int64)
        prime = self._primes[f, pick]
        # prime divides f (it is one of f's primes, or 1 where f == 1): move it in every
        # row, and keep the moves of rows that have one, of a prime > 1, into the table
        vec[ar, src] = f // prime
        vec[ar, dst] *= prime
        moved = self._index.lookup(vec, d)
        ok = np.flatnonzero(has & (prime > 1) & (moved >= 0))
        rr, dd = r_[ok], d[ok]
        rows[rr, dd] = moved[ok] - self._offsets[dd]
        done[rr] = True

    def _swap_moves(self, rows: IntArray, sel: IntArray, seg_of: Callable[[IntArray, IntArray], IntArray],
                    set_seg: Callable[[IntArray, IntArray, IntArray], None], rng: np.random.Generator) -> None:
        """Swap two free loops of one level in each row of ``sel`` (see `_moves`).

        The random stream is the one of a loop over the picked levels in increasing order
        drawing, per level with k rows and m free loops, scores (k, m): drawn at once, and
        each row scores its free loops (padded to the largest m, padding never picked)."""
        k = len(sel)
        # prefer a level with two running (bound > 1) free loops: swapping unit loops
        # changes no cost
        idx = (rows[sel] + self._offsets)[:, None, :] + self._lvl_off[:, None]  # (k, L, D)
        nonunit_all = np.take(self._lvl_t, idx) > 1
        running = (nonunit_all & self._free_mask_ld).sum(axis=2)  # (k, L)
        score = rng.random((k, self._L)) + 1.0 * (running >= 2)
        score[:, ~self._levels_ok] = -1.0
        lv = score.argmax(axis=1)
        perm = np.argsort(lv, kind="stable")  # the rows level by level, in order within a level
        seg = seg_of(sel, lv)  # (k, M) free dims in their current positions
        nonunit = np.take_along_axis(nonunit_all[np.arange(k), lv], seg, axis=1)
        if self._swap_m:  # every swappable level has M free loops: the draws are (k, M) rows
            u = np.empty((k, self._swap_m))
            u[perm] = rng.random((k, self._swap_m))
            score2 = u + nonunit * 1.0
        else:
            m = self._n_free[lv]
            cnt = np.bincount(lv, minlength=self._L)
            w = np.empty(k, dtype=np.int64)  # row within its level's group
            w[perm] = np.arange(k) - (np.cumsum(cnt) - cnt)[lv[perm]]
            size = cnt * self._n_free
            u = rng.random(int(size.sum()))
            valid = self._free_valid[lv]  # (k, M)
            uidx = np.where(valid, ((np.cumsum(size) - size)[lv] + w * m)[:, None] + np.arange(valid.shape[1]), 0)
            score2 = np.where(valid, u[uidx] + nonunit * 1.0, -np.inf)
        two = np.argsort(-score2, axis=1)[:, :2]
        a, b = two[:, 0], two[:, 1]
        r = np.arange(k)
        va, vb = seg[r, a].copy(), seg[r, b].copy()
        seg[r, a], seg[r, b] = vb, va
        set_seg(sel, lv, seg)

    def repair(self, batch: MappingBatch, rng: np.random.Generator | None = None, *,
               legalize: bool = False) -> MappingBatch:
        """Project arbitrary arrays (e.g. a GA crossover of whole levels) onto the space.

        Factors: for each dim, walking from the innermost slot outwards, each factor is cut
        to its gcd with what is left of the bound, the remainder goes to the outermost
        temporal loop; a row still outside the dim's table (a constraint) is replaced by
        the table row nearest in log-factor distance. Orders: each level keeps the relative
        order of its free dims (first occurrence wins), pinned dims go to their places.
        Keep: fixed bits are restored. Points of the space are returned unchanged.

        With ``legalize``, rows that then break a fanout or a capacity are also pushed
        towards legality (prime factors moved outwards, see `sample_valid`'s repair; uses
        ``rng``, default seed 0); rows that cannot be fixed stay as they are.
        """
        self._check_batch_shape(batch)
        n = len(batch)
        L, D = self._L, self._D
        F = np.concatenate([batch.temporal[..., None], batch.spatial], axis=-1)  # (n, L, D, 3)
        F = np.maximum(F.transpose(0, 2, 1, 3).reshape(n, D, L * 3), 1).astype(np.int64)
        rows = np.empty((n, D), dtype=np.int64)
        for d in range(D):
            vec = F[:, d] * self._slot_exists[d].reshape(-1)[None, :]
            vec = np.maximum(vec, 1)
            idx = self._lookup_dim(vec, d)
            miss = np.nonzero(idx < 0)[0]
            if len(miss):
                b = int(self.problem.bounds[d])
                v = vec[miss].copy()
                if not self.allow_padding:
                    rem = np.full(len(miss), b, dtype=np.int64)
                    for s in range(L * 3 - 1, 0, -1):
                        g = np.gcd(v[:, s], rem)
                        v[:, s] = g
                        rem //= g
                    v[:, 0] = rem
                idx2 = self._lookup_dim(v, d)
                still = idx2 < 0
                if still.any():
                    idx2[still] = self._nearest_rows(d, v[still])
                idx[miss] = idx2
            rows[:, d] = idx
        temporal, spatial = self._rows_to_factors(rows)
        # orders
        order = np.empty((n, L, D), dtype=np.int64)
        for lv in range(L):
            o_row = batch.order[:, lv, :]
            first = np.full((n, D), D + 1, dtype=np.int64)
            valid = (o_row >= 0) & (o_row < D)
            pos = np.broadcast_to(np.arange(D), (n, D))
            # first occurrence of each dim: scatter positions in reverse so the first wins
            for j in range(D - 1, -1, -1):
                dj = o_row[:, j]
                ok = valid[:, j]
                first[np.nonzero(ok)[0], dj[ok]] = pos[ok, j]
            key = first * (D + 1) + np.arange(D)[None, :]
            free = self._order_free[lv]
            outer, inner = self._order_outer[lv], self._order_inner[lv]
            oo = len(outer)
            order[:, lv, :oo] = outer
            if inner:
                order[:, lv, D - len(inner):] = inner
            if len(free):
                sub = key[:, free]
                order[:, lv, oo: oo + len(free)] = free[np.argsort(sub, axis=1)]
        keep = batch.keep.copy()
        fixed_keep = self._keep_state >= 0
        keep[:, fixed_keep] = self._keep_base[fixed_keep][None]
        keep &= self.arch.holds_mask(self.problem)[None]
        keep[:, 0, :] = True
        if legalize and n:
            rows = self._push_out(rows, keep, rng if rng is not None else np.random.default_rng(0))
            temporal, spatial = self._rows_to_factors(rows)
        return MappingBatch(temporal=temporal, spatial=spatial, order=order, keep=keep)

    def _lookup_dim(self, vec: IntArray, d: int) -> IntArray:
        """(k,) row of dim d's table of each factor row (k, L*3), -1 where not in it."""
        g = self._index.lookup(vec, d)
        return np.where(g >= 0, g - self._offsets[d], -1)

    def _nearest_rows(self, d: int, vec: IntArray, chunk: int = 1 << 22) -> IntArray:
        tab = np.log(self._tables[d].reshape(len(self._tables[d]), -1).astype(np.float64))
        q = np.log(vec.astype(np.float64))
        out = np.empty(len(vec), dtype=np.int64)
        step = max(1, chunk // max(len(tab), 1))
        for s in range(0, len(vec), step):
            dist = np.abs(q[s: s + step, None, :] - tab[None, :, :]).sum(axis=2)
            out[s: s + step] = dist.argmin(axis=1)
        return out

    # --- enumeration ----------------------------------------------------------------------
    def n_distinct(self, max_points: int = 10**8) -> int:
        """Points of the space that differ in cost: orders only matter among loops of bound
        > 1 (their relative order). Exact; `SpaceTooLargeError` when the factor x bypass
        sub-space alone exceeds ``max_points``."""
        total = 0
        for _rows, counts in self._tile_chunks(max_points):
            total += int(counts.sum())
        return int(total * 2 ** len(self._keep_free))

    def _tile_combos(self) -> int:
        return math.prod(int(r) for r in self._table_rows)

    def _tile_chunks(self, max_points: int, chunk: int = 1 << 16) -> Iterator[tuple[IntArray, IntArray]]:
        combos = self._tile_combos()
        if combos * 2 ** len(self._keep_free) > max_points:
            raise SpaceTooLargeError(
                f"map space of {self.problem.name} on {self.arch.name} has {combos:,} factorizations x "
                f"{2 ** len(self._keep_free):,} bypass choices (total with orders {self.size().total:,}); "
                f"more than the enumeration limit {max_points:,}: add constraints or use a sampling searcher"
            )
        radix = self._table_rows
        for start in range(0, combos, chunk):
            k = np.arange(start, min(start + chunk, combos), dtype=np.int64)
            rows = np.empty((len(k), self._D), dtype=np.int64)
            rem = k.copy()
            for d in range(self._D - 1, -1, -1):
                rows[:, d] = rem % radix[d]
                rem //= radix[d]
            temporal, _ = self._rows_to_factors(rows)
            counts = np.ones(len(k), dtype=np.int64)
            for lv in range(self._L):
                free = self._order_free[lv]
                if len(free) < 2:
                    continue
                kfree = (temporal[:, lv, free] > 1).sum(axis=1)
                counts *= np.array([math.factorial(i) for i in range(len(free) + 1)], dtype=np.int64)[kfree]
            yield rows, counts

    def enumerate(self, chunk_size: int = 65536, *, max_points: int = 10**7) -> Iterator[MappingBatch]:
        """Every cost-distinct point of the space, in chunks of at most ``chunk_size``.

        Orders that permute loops of bound 1 change no cost and are skipped: at each level
        only the relative order of the free loops with bound > 1 varies (unit free loops
        follow them in dim order). Raises `SpaceTooLargeError` above ``max_points``.
        """
        total = self.n_distinct(max_points=max_points)
        if total > max_points:
            raise SpaceTooLargeError(
                f"map space of {self.problem.name} on {self.arch.name} has {total:,} cost-distinct points; "
                f"more than the enumeration limit {max_points:,}: add constraints or use a sampling searcher"
            )
        n_keep = len(self._keep_free)
        keep_bits = ((np.arange(2 ** n_keep)[:, None] >> np.arange(n_keep)[None, :]) & 1).astype(bool)
        pending: list[MappingBatch] = []
        pending_n = 0
        for rows, counts in self._tile_chunks(max_points):
            for s in range(0, len(rows), max(1, chunk_size // max(int(counts.max()), 1))):
                r = rows[s: s + max(1, chunk_size // max(int(counts.max()), 1))]
                c = counts[s: s + len(r)]
                rep = np.repeat(np.arange(len(r)), c)
                local = np.arange(len(rep)) - np.repeat(np.cumsum(c) - c, c)
                batch = self._expand_orders(r[rep], local)
                if n_keep:
                    m = len(batch)
                    kk = np.repeat(np.arange(m), 2 ** n_keep)
                    bits = np.tile(keep_bits, (m, 1))
                    keep = batch.keep[kk].copy()
                    keep[:, self._keep_free[:, 0], self._keep_free[:, 1]] = bits
                    batch = MappingBatch(temporal=batch.temporal[kk], spatial=batch.spatial[kk],
                                         order=batch.order[kk], keep=keep)
                pending.append(batch)
                pending_n += len(batch)
                while pending_n >= chunk_size:
                    allb = MappingBatch.concat(pending)
                    yield allb.take(slice(0, chunk_size))
                    rest = allb.take(slice(chunk_size, None))
                    pending = [rest] if len(rest) else []
                    pending_n = len(rest)
        if pending_n:
            yield MappingBatch.concat(pending)

    def _expand_orders(self, rows: IntArray, local: IntArray) -> MappingBatch:
        """Rows of tile indices and a per-row index into their distinct orders -> mappings."""
        n = len(rows)
        temporal, spatial = self._rows_to_factors(rows)
        order = np.empty((n, self._L, self._D), dtype=np.int64)
        rem = local.copy()
        for lv in range(self._L):
            outer, inner, free = self._order_outer[lv], self._order_inner[lv], self._order_free[lv]
            o, m = len(outer), len(free)
            order[:, lv, :o] = outer
            if inner:
                order[:, lv, self._D - len(inner):] = inner
            if m == 0:
                continue
            nonunit = temporal[:, lv, free] > 1  # (n, m)
            k = nonunit.sum(axis=1)
            fact = np.array([math.factorial(i) for i in range(m + 1)], dtype=np.int64)
            idx = rem % fact[k]
            rem //= fact[k]
            # items: non-unit free dims first (dim order), then unit ones
            keyed = np.where(nonunit, 0, 1) * (m + 1) + np.arange(m)[None, :]
            items = free[np.argsort(keyed, axis=1)]
            digits = np.zeros((n, m), dtype=np.int64)
            r = idx.copy()
            for i in range(m):
                radix_rest = np.where(k - 1 - i >= 0, fact[np.maximum(k - 1 - i, 0)], 1)
                di = np.where(i < k, r // radix_rest, 0)
                r = np.where(i < k, r % radix_rest, r)
                digits[:, i] = di
            order[:, lv, o: o + m] = _lehmer_decode(digits, items)
        keep = np.broadcast_to(self._keep_base, (n, self._L, self._T)).copy()
        return MappingBatch(temporal=temporal, spatial=spatial, order=order, keep=keep)

    # --- lower bounds ---------------------------------------------------------------------
    def lower_bounds(self) -> LowerBounds:
        """Compulsory traffic per tensor per level and the minimum compute cycles
        (see `accelmap.mapper.lower_bounds`); a level counts as keeping a tensor when
        every mapping of this space keeps it there."""
        return lower_bounds(self.problem, self.arch, must_keep=self._keep_state == 1)

    # --- helpers for searchers -------------------------------------------------------------
    def param_groups(self) -> dict[str, IntArray]:
        """Column indices of the box by kind (``tile``, ``order``, ``keep``)."""
        kinds = np.array(self.param_kinds)
        return {k: np.nonzero(kinds == k)[0] for k in PARAM_KINDS if (kinds == k).any()}

    def resample(self, x: IntArray, kinds: tuple[str, ...] | str, n: int, rng: np.random.Generator) -> IntArray:
        """n variants of every row of ``x`` with the params of ``kinds`` redrawn uniformly.

        E.g. an Optuna trial fixes the loop orders and bypass bits and a vectorized inner
        loop completes the tiling: ``space.resample(x_trial, "tile", 4096, rng)``.

        Returns
        -------
        (len(x) * n, n_params) encoded vectors; rows ``i*n .. i*n+n-1`` come from ``x[i]``.
        """
        x = self._check_x(x)
        kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
        unknown = [k for k in kinds if k not in PARAM_KINDS]
        if unknown:
            raise SpecError(f"resample kinds {unknown}; expected some of {list(PARAM_KINDS)}")
        out = np.repeat(x, n, axis=0)
        cols = np.nonzero(np.isin(np.array(self.param_kinds, dtype=object), kinds))[0]
        if len(cols):
            out[:, cols] = rng.integers(0, self.bounds[cols], size=(len(out), len(cols)), dtype=np.int64)
        return out

    def describe(self) -> str:
        return f"map space of {self.problem.describe()} on {self.arch.name}: {self.n_params} params\n" + self.size().describe()

