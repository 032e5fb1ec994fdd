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
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.errors import InfeasibleSpaceError, SpaceTooLargeError, SpecError
from accelmap.mapper import _space_kernel as _kern
from accelmap.mapper import _space_numpy as _ref
from accelmap.mapper._space_tables import (
    PERM_TABLE_MAX_M,
    RowIndex,
    divisors,
    lehmer_decode,
    lehmer_digits,
    n_ordered_factorizations,
    prime_table,
)
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

__all__ = ["MapSpace", "SpaceSize", "LowerBounds", "PARAM_KINDS", "n_ordered_factorizations"]

PARAM_KINDS = ("tile", "spatial", "order", "keep")

#: checkpoints (pickles) written before the table arithmetic moved to `_space_tables` name
#: the row index here
_RowIndex = RowIndex

_T, _X, _Y = 0, 1, 2  # slot kinds inside a level: temporal, spatial X, spatial Y
_MAX_TABLE_ROWS = 4_000_000  # per dim; beyond this, ask for constraints
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
        self._primes, self._n_primes = prime_table(self._max_bound)

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
        divs = np.array(divisors(b), dtype=np.int64)
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
        self._index = RowIndex(self._flat, np.repeat(np.arange(self._D), self._table_rows), self._D)
        R = len(self._big)
        self._lvl_off = np.arange(self._L, dtype=np.int64) * R  # level-major: row r of level l at l*R + r
        self._lvl_t = np.ascontiguousarray(self._big[:, :, _T].T).reshape(-1)  # (L*R,)
        self._lvl_s = np.ascontiguousarray(self._big[:, :, 1:].transpose(1, 0, 2)).reshape(-1, 2)  # (L*R, 2)
        # slot masks for moves: (D, L, 3) which slots exist
        self._slot_exists = np.transpose(self._allowed, (1, 0, 2)).copy()
        self._slot_exists_flat = self._slot_exists.reshape(self._D, -1)  # (D, L*3)
        # where a factor move's draws sit for row j of a group of kd rows (see `_space_numpy.factor_moves`):
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
            if 1 < m <= PERM_TABLE_MAX_M:
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
        self._order_untabled = [lv for lv in range(L) if len(self._order_free[lv]) > PERM_TABLE_MAX_M]
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
            outside = _kern.outside(x, self.bounds) >= 0
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

    def _lehmer_of(self, local: IntArray) -> IntArray:
        """(k, m) permutations of 0..m-1 -> (k, m-1) Lehmer digits. Up to the table size: the
        permutation's rank among all m! in lexicographic order (a binary search on their
        base-m values), written in the factorial number system."""
        m = local.shape[1]
        if m > PERM_TABLE_MAX_M:
            return lehmer_digits(local)[:, : m - 1]
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
        rows, temporal, spatial, order, keep = (_kern.decode(self._consts(), x) if self.compiled
                                                else _ref.decode(self, x))
        batch = MappingBatch._trusted(temporal=temporal, spatial=spatial, order=order, keep=keep)
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
        return _ref.fast_reasons(self, rows, keep)

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
        return _ref.rows_and_keep(self, x)

    # --- moves: repair towards legality, neighbours, repair of broken products --------
    def _push_out(self, rows: IntArray, keep: BoolArray, rng: np.random.Generator,
                  max_rounds: int = 64) -> IntArray:
        """Repair towards legality: while a row breaks the fanout below level l, move a
        prime factor of one of its spatial factors there to a temporal loop at level <= l;
        while it overflows level l, move a prime factor of a dim that indexes a tensor kept
        at l, from a slot at level >= l to a temporal loop at a level < l. Either move
        shrinks what failed and grows nothing inside it. Rows below the minimum
        utilization get the opposite move (raise the utilization: a temporal prime into a
        spatial slot with room). Moves that would leave the dim's table (a constraint) are
        skipped and another is drawn in the next round.

        rows (n, D) table rows, keep (n, L, T); returns the new rows
        (`_space_numpy.push_out`, or its compiled twin with the same draws).
        """
        if self.compiled:
            return _kern.push_out(self._consts(), rows, keep, rng, max_rounds)
        return _ref.push_out(self, rows, keep, rng, max_rounds)

    def neighbours(self, batch: MappingBatch, rng: np.random.Generator, *, flips: bool = True) -> MappingBatch:
        """One random move per row (vectorized): move a prime factor of one dim between
        two slots (levels, temporal <-> spatial), swap two free loops of one level, or
        flip one free bypass bit. The result stays in the space (factor products and
        constraints hold). Rows admitting no move of the drawn kind try the others; a
        space of one point returns the batch unchanged. `neighbours_encoded` does the
        same on encoded vectors.

        Each row draws its kind (factor move, swap, flip), tries it twice, then the other
        kinds (`_space_numpy.moves`); with the compiled engine its factor moves run
        compiled, from the same draws.
        """
        self._check_batch_shape(batch)
        rows = self._factor_rows(batch)
        if (rows < 0).any():
            raise SpecError("neighbours: some mappings are not points of this space; call MapSpace.repair first")
        if self.compiled:
            consts = self._consts()

            def factor_moves(rows: IntArray, sel: IntArray, done: BoolArray, rng: np.random.Generator) -> None:
                _kern.factor_moves(consts, rows, sel, done, rng)
        else:
            factor_moves = self._factor_moves
        return _ref.neighbours(self, batch, rows, rng, flips, factor_moves)

    def neighbours_encoded(self, x: IntArray, rng: np.random.Generator, *, flips: bool = True) -> IntArray:
        """`neighbours` on encoded vectors (n, n_params), without building mappings: only
        the swapped levels of the swapped rows are decoded and re-encoded. With ``flips``
        False the keep bits are held: the moves are those of a space whose keep bits are
        all fixed (a drawn flip becomes a move of another kind)."""
        x = self._check_x(x)
        if self.compiled:  # the whole of the moves in one compiled call, same draws
            return _kern.neighbours_encoded(self._consts(), x, rng, flips)
        return _ref.neighbours_encoded(self, x, rng, flips)

    def _factor_moves(self, rows: IntArray, sel: IntArray, done: BoolArray, rng: np.random.Generator) -> None:
        """The factor moves of `neighbours` for rows ``sel`` of table rows (n, D), in place,
        on the numpy path (`_space_numpy.factor_moves`, whatever the engine)."""
        _ref.factor_moves(self, rows, sel, done, rng)

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
        return MappingBatch._trusted(temporal=temporal, spatial=spatial, order=order, keep=keep)

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
                    batch = MappingBatch._trusted(temporal=batch.temporal[kk], spatial=batch.spatial[kk],
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
            order[:, lv, o: o + m] = lehmer_decode(digits, items)
        keep = np.broadcast_to(self._keep_base, (n, self._L, self._T)).copy()
        return MappingBatch._trusted(temporal=temporal, spatial=spatial, order=order, keep=keep)

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

