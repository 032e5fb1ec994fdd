"""MapSpace's vectorized paths against straightforward references (same results bit for bit).

`neighbours_encoded` must return exactly what the plain loop form of the moves returns
for the same rng state (one dim or level at a time, per-row table lookups, Lehmer digits
position by position) and leave the rng in the same state; `decode`/`encode` must agree
with digit-by-digit Lehmer coding, and `check` of the batch `decode` just returned (its
shortcut) with `check` of a copy (the general path). Spaces: conv, depthwise and GEMM
layers on eyeriss-like and simba-like, with order/factor/keep constraints, a minimum
utilization, imperfect factorization, and a level with more free loops than the
permutation table holds.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from accelmap.arch.presets import preset
from accelmap.mapper.constraints import Constraints, FactorRule, KeepRule, OrderRule, Slot
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.examples import small_arch, small_conv
from accelmap.workloads.builders import matmul
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term
from accelmap.workloads.zoo import layer


def _nine_dims() -> Problem:
    def t(name: str, dims: str, role: TensorRole) -> Tensor:
        return Tensor(name=name, projection=tuple((Term(dim=d),) for d in dims), role=role)
    dims = tuple(Dim(name=n, bound=b) for n, b in zip("ABCDEFGHI", [2, 3, 2, 4, 1, 2, 6, 2, 3], strict=True))
    return Problem(name="nine", dims=dims, tensors=(t("X", "ABCDE", TensorRole.INPUT),
                   t("W", "DEFGHI", TensorRole.WEIGHT), t("Y", "ABFGHI", TensorRole.OUTPUT)))


def _make(name: str) -> MapSpace:
    ey, sb = preset("eyeriss-like"), preset("simba-like")
    conv = layer("resnet50/res3b_branch2b")
    if name == "conv-ey":
        return MapSpace(conv, ey)
    if name == "conv-sb":
        return MapSpace(conv, sb)
    if name == "dw-ey":
        return MapSpace(layer("mobilenet_v2/block2_2_dw"), ey)
    if name == "dw-sb":
        return MapSpace(layer("mobilenet_v2/block2_2_dw"), sb)
    if name == "gemm-ey":
        return MapSpace(layer("bert_base_128/qkv_proj"), ey)
    if name == "gemm-sb":
        return MapSpace(matmul("mm", m=128, n=96, k=64), sb)
    if name == "conv-ey-constrained":
        lv = ey.level_names
        return MapSpace(conv, ey, Constraints(
            factors=(FactorRule(level=lv[0], dim="K", slot=Slot.TEMPORAL, max=4),
                     FactorRule(level=lv[-1], dim="S", slot=Slot.TEMPORAL, fixed=0)),
            orders=(OrderRule(level=lv[1], outer=("N",), inner=("K", "C")), OrderRule(level=lv[0], outer=("Q", "P"))),
            keep=(KeepRule(level=lv[2], tensor="Inputs", keep=True),),
        ))
    if name == "conv-ey-util":
        return MapSpace(conv, ey, Constraints(min_utilization=0.5))
    if name == "conv-sb-padding":
        return MapSpace(conv.with_bounds(P=27, Q=27), sb, allow_padding=True)
    if name == "nine-dims":  # 9 free loops per level: past the permutation table
        return MapSpace(_nine_dims(), small_arch(fanout=(2, 2)))
    return MapSpace(small_conv(), small_arch())


SPACES = ["conv-ey", "conv-sb", "dw-ey", "dw-sb", "gemm-ey", "gemm-sb", "conv-ey-constrained",
          "conv-ey-util", "conv-sb-padding", "nine-dims", "small"]


@pytest.fixture(scope="module", params=SPACES)
def space(request: pytest.FixtureRequest) -> MapSpace:
    return _make(request.param)


# --- references: the plain loop forms -----------------------------------------------------

class _Ref:
    """Loop-form decode/encode/moves of a space (dicts for table lookups)."""

    def __init__(self, sp: MapSpace) -> None:
        self.sp = sp
        self.flat = [t.reshape(len(t), -1) for t in sp._tables]
        self.where = [{tuple(r): i for i, r in enumerate(f.tolist())} for f in self.flat]

    def lookup(self, d: int, vec: np.ndarray) -> np.ndarray:
        return np.array([self.where[d].get(tuple(v), -1) for v in vec.tolist()], dtype=np.int64)

    def orders(self, x: np.ndarray) -> np.ndarray:
        sp = self.sp
        order = np.empty((len(x), sp._L, sp._D), dtype=np.int64)
        for lv in range(sp._L):
            outer, inner, free = sp._order_outer[lv], sp._order_inner[lv], list(sp._order_free[lv])
            for i in range(len(x)):
                avail = list(free)
                digits = [int(v) for v in x[i, sp._order_cols[lv]]] + [0]
                picked = [avail.pop(dg) for dg in digits[: len(free)]]
                order[i, lv] = outer + picked + inner
        return order

    def encode_orders(self, order: np.ndarray, x: np.ndarray) -> None:
        sp = self.sp
        for lv in range(sp._L):
            free = list(sp._order_free[lv])
            o, m = len(sp._order_outer[lv]), len(free)
            for i in range(len(order)):
                local = [free.index(int(v)) for v in order[i, lv, o: o + m]]
                x[i, sp._order_cols[lv]] = [sum(b < a for b in local[j + 1:]) for j, a in enumerate(local)][: m - 1]

    def move_prime(self, rows: np.ndarray, d: int, src: np.ndarray, dst: np.ndarray, prime: np.ndarray) -> np.ndarray:
        vec = self.flat[d][rows].copy()
        i = np.arange(len(rows))
        ok = vec[i, src] % prime == 0
        vec[i, src] = np.where(ok, vec[i, src] // prime, vec[i, src])
        vec[i, dst] = np.where(ok, vec[i, dst] * prime, vec[i, dst])
        return np.where(ok, self.lookup(d, vec), -1)

    def moves(self, rows: np.ndarray, order: np.ndarray, bits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        sp = self.sp
        rows = rows.copy()
        temporal_t = np.stack([sp._tables[d][rows[:, d], :, 0] for d in range(sp._D)], axis=1)  # (n, D, L)
        kinds = rng.integers(0, 3, size=len(rows))
        done = np.zeros(len(rows), dtype=bool)
        levels_ok = np.array([len(f) >= 2 for f in sp._order_free])
        for attempt in range(6):
            if done.all():
                break
            kind_now = (kinds + attempt // 2) % 3
            sel = np.nonzero(~done & (kind_now == 0))[0]
            if len(sel) and len(sp._tile_dims):
                d_pick = sp._tile_dims[rng.integers(0, len(sp._tile_dims), size=len(sel))]
                for d in np.unique(d_pick):
                    r_ = sel[d_pick == d]
                    vec = self.flat[d][rows[r_, d]]
                    exists = sp._slot_exists[d].reshape(-1)
                    src_ok = (vec > 1) & exists[None, :]
                    src = np.where(src_ok, rng.random(vec.shape), -1.0).argmax(axis=1)
                    ar = np.arange(len(r_))
                    has = src_ok[ar, src]
                    dst_ok = np.broadcast_to(exists, vec.shape).copy()
                    dst_ok[ar, src] = False
                    dst = np.where(dst_ok, rng.random(vec.shape), -1.0).argmax(axis=1)
                    has &= dst_ok[ar, dst]
                    f = vec[ar, src]
                    pick = (rng.random(len(r_)) * np.maximum(sp._n_primes[f], 1)).astype(np.int64)
                    prime = sp._primes[f, pick]
                    moved = self.move_prime(rows[r_, d], int(d), src, dst, prime)
                    okm = has & (moved >= 0) & (prime > 1)
                    rows[r_[okm], d] = moved[okm]
                    temporal_t[r_[okm], d] = sp._tables[d][moved[okm], :, 0]
                    done[r_[okm]] = True
            sel = np.nonzero(~done & (kind_now == 1))[0]
            if len(sel) and levels_ok.any():
                running = np.zeros((len(sel), sp._L), dtype=np.int64)
                for lv in np.nonzero(levels_ok)[0]:
                    running[:, lv] = (temporal_t[sel][:, sp._order_free[lv], lv] > 1).sum(axis=1)
                score = rng.random((len(sel), sp._L)) + 1.0 * (running >= 2)
                score[:, ~levels_ok] = -1.0
                lv_pick = score.argmax(axis=1)
                for lv in np.unique(lv_pick):
                    ii = sel[lv_pick == lv]
                    o, m = len(sp._order_outer[lv]), len(sp._order_free[lv])
                    seg = order[ii, lv, o: o + m]
                    nonunit = np.take_along_axis(temporal_t[ii, :, lv], seg, axis=1) > 1
                    two = np.argsort(-(rng.random(seg.shape) + nonunit * 1.0), axis=1)[:, :2]
                    r = np.arange(len(ii))
                    va, vb = seg[r, two[:, 0]].copy(), seg[r, two[:, 1]].copy()
                    seg[r, two[:, 0]], seg[r, two[:, 1]] = vb, va
                    order[ii, lv, o: o + m] = seg
                    done[ii] = True
            sel = np.nonzero(~done & (kind_now == 2))[0]
            if len(sel) and bits.shape[1]:
                k = rng.integers(0, bits.shape[1], size=len(sel))
                bits[sel, k] = ~bits[sel, k]
                done[sel] = True
        return rows

    def neighbours_encoded(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        sp = self.sp
        rows = np.zeros((len(x), sp._D), dtype=np.int64)
        rows[:, sp._tile_dims] = x[:, sp._tile_cols]
        bits = x[:, sp._keep_cols].astype(bool)
        order = self.orders(x)
        rows = self.moves(rows, order, bits, rng)
        out = np.zeros_like(x)
        out[:, sp._tile_cols] = rows[:, sp._tile_dims]
        self.encode_orders(order, out)
        out[:, sp._keep_cols] = bits
        return out


def _state(rng: np.random.Generator) -> tuple[object, ...]:
    s = rng.bit_generator.state
    return s["state"]["state"], s["state"]["inc"], s["has_uint32"], s["uinteger"]


# --- tests --------------------------------------------------------------------------------

def test_neighbours_encoded_matches_loop_reference(space: MapSpace) -> None:
    ref = _Ref(space)
    x = space.sample_encoded(200, np.random.default_rng(3))
    ga, gb = np.random.default_rng(4), np.random.default_rng(4)
    for _ in range(3):  # chained: the moves see each other's results
        a = space.neighbours_encoded(x, ga)
        b = ref.neighbours_encoded(x, gb)
        np.testing.assert_array_equal(a, b)
        assert _state(ga) == _state(gb)
        x = a


def test_neighbours_on_mappings_match_encoded(space: MapSpace) -> None:
    x = space.sample_encoded(150, np.random.default_rng(5))
    a = space.neighbours_encoded(x, np.random.default_rng(6))
    b = space.encode(space.neighbours(space.decode(x), np.random.default_rng(6)))
    np.testing.assert_array_equal(a, b)


def test_neighbours_of_one_row_and_of_none(space: MapSpace) -> None:
    ref = _Ref(space)
    x = space.sample_encoded(1, np.random.default_rng(7))
    np.testing.assert_array_equal(space.neighbours_encoded(x, np.random.default_rng(8)),
                                  ref.neighbours_encoded(x, np.random.default_rng(8)))
    empty = np.zeros((0, space.n_params), dtype=np.int64)
    assert space.neighbours_encoded(empty, np.random.default_rng(8)).shape == (0, space.n_params)


def test_decode_encode_match_lehmer_reference(space: MapSpace) -> None:
    ref = _Ref(space)
    x = space.sample_encoded(120, np.random.default_rng(9))
    b = space.decode(x)
    np.testing.assert_array_equal(b.order, ref.orders(x))
    for d in range(space._D):
        rows = np.zeros((len(x), space._D), dtype=np.int64)
        rows[:, space._tile_dims] = x[:, space._tile_cols]
        np.testing.assert_array_equal(b.temporal[:, :, d], space._tables[d][rows[:, d], :, 0])
        np.testing.assert_array_equal(b.spatial[:, :, d], space._tables[d][rows[:, d], :, 1:])
    np.testing.assert_array_equal(space.encode(b), x)
    y = np.zeros_like(x)
    ref.encode_orders(b.order, y)
    np.testing.assert_array_equal(y[:, np.concatenate(space._order_cols)], x[:, np.concatenate(space._order_cols)])


def test_check_of_decoded_batch_matches_general_path(space: MapSpace) -> None:
    x = space.sample_encoded(400, np.random.default_rng(10))
    b = space.decode(x)
    fast = space.check(b)
    copy = MappingBatch(temporal=b.temporal.copy(), spatial=b.spatial.copy(), order=b.order.copy(), keep=b.keep.copy())
    slow = space.check(copy)
    np.testing.assert_array_equal(fast.valid, slow.valid)
    np.testing.assert_array_equal(fast.reason, slow.reason)
    np.testing.assert_array_equal(fast.level, slow.level)
    assert fast.reason.dtype == slow.reason.dtype and fast.level.dtype == slow.level.dtype


def test_factor_rows_match_dict_lookup(space: MapSpace) -> None:
    ref = _Ref(space)
    b = space.decode(space.sample_encoded(100, np.random.default_rng(11)))
    t = b.temporal.copy()
    t[::2, 0, :] *= 2  # half the rows leave the tables
    pb = MappingBatch(temporal=t, spatial=b.spatial, order=b.order, keep=b.keep)
    F = np.concatenate([pb.temporal[..., None], pb.spatial], axis=-1).transpose(0, 2, 1, 3)
    want = np.stack([ref.lookup(d, F[:, d].reshape(len(pb), -1)) for d in range(space._D)], axis=1)
    np.testing.assert_array_equal(space._factor_rows(pb), want)
    assert (want[::2] < 0).any() and (want[1::2] >= 0).all()


def test_pickled_space_leaves_the_last_decoded_batch_behind() -> None:
    sp = _make("small")
    b = sp.decode(sp.sample_encoded(10, np.random.default_rng(12)))
    assert sp.check(b).reason.shape == (10,)
    clone = pickle.loads(pickle.dumps(sp))
    assert not hasattr(clone, "_decoded")
    np.testing.assert_array_equal(clone.check(b).reason, sp.check(b).reason)
