"""Small hand-built problems, archs and mappings for tests (no zoo or presets needed)."""

from __future__ import annotations

import numpy as np

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

__all__ = ["small_conv", "small_arch", "trivial_mapping", "aspect_batch", "wrapping_factor_pair"]


def _tensor(name: str, coords: list[list[tuple[str, int]]], role: TensorRole) -> Tensor:
    return Tensor(
        name=name,
        projection=tuple(tuple(Term(dim=d, coef=c) for d, c in coord) for coord in coords),
        role=role,
    )


def small_conv(k: int = 8, c: int = 4, p: int = 6, q: int = 6, r: int = 3, s: int = 3, stride: int = 1) -> Problem:
    dims = tuple(Dim(name=n, bound=b) for n, b in zip("NKCPQRS", (1, k, c, p, q, r, s), strict=True))
    return Problem(
        name="small_conv",
        dims=dims,
        tensors=(
            _tensor("Weights", [[("K", 1)], [("C", 1)], [("R", 1)], [("S", 1)]], TensorRole.WEIGHT),
            _tensor("Inputs", [[("N", 1)], [("C", 1)], [("P", stride), ("R", 1)], [("Q", stride), ("S", 1)]], TensorRole.INPUT),
            _tensor("Outputs", [[("N", 1)], [("K", 1)], [("P", 1)], [("Q", 1)]], TensorRole.OUTPUT),
        ),
    )


def small_arch(glb_words: int = 1024, rf_words: int = 64, fanout: tuple[int, int] = (4, 4)) -> Arch:
    return Arch(
        name="small",
        levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=200, write_energy_pj=200),
            StorageLevel(name="GLB", capacity_words=glb_words, read_energy_pj=6, write_energy_pj=6,
                         fanout_x=fanout[0], fanout_y=fanout[1]),
            StorageLevel(name="RF", capacity_words=rf_words, read_energy_pj=1, write_energy_pj=1),
        ),
        compute=Compute(energy_per_mac_pj=1.0),
    )


def wrapping_factor_pair() -> tuple[int, int]:
    """Two int64 factors whose product is 1 modulo 2^64: an int64 product of them wraps to 1
    (a dim of bound 1 would look covered), for tests of the refusal of such factors."""
    for a in range(3, 1000, 2):
        b = pow(a, -1, 1 << 64)
        if b < 1 << 63:
            return a, b
    raise AssertionError("no pair below 2^63")


def trivial_mapping(problem: Problem, arch: Arch) -> Mapping:
    """Everything temporal at the outermost level, every level keeps everything it may hold."""
    L, D = arch.n_levels, problem.n_dims
    temporal = np.ones((L, D), dtype=np.int64)
    temporal[0] = problem.bounds
    return Mapping(
        temporal=temporal,
        spatial=np.ones((L, D, 2), dtype=np.int64),
        order=np.tile(np.arange(D), (L, 1)),
        keep=arch.holds_mask(problem),
    )


def aspect_batch(problem: Problem, arch: Arch, n: int, rng: np.random.Generator) -> MappingBatch:
    """Mappings the aspect model can read, many of them with edge tiles in their directive
    form: one dim unrolled along each axis of the PE array (a divisor of its bound up to
    the fanout), the filter dims below the array, the remaining factors spread over the
    levels (larger ones outside), random loop orders, every level keeping what it may."""
    from accelmap.costmodels.aspect import aspect_view
    from accelmap.workloads.structure import DimRole, recognize

    a = aspect_view(arch).array_level
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    fan = arch.fanouts[a]
    st = recognize(problem)
    filt = set(st.dims_of(DimRole.FILTER_ROW) + st.dims_of(DimRole.FILTER_COL))
    divs = {b: [d for d in range(1, b + 1) if b % d == 0] for b in set(int(x) for x in problem.bounds)}
    t = np.ones((n, L, D), np.int64)
    s = np.ones((n, L, D, 2), np.int64)
    for i in range(n):
        rem = problem.bounds.astype(np.int64).copy()
        for ax in (0, 1):
            d = int(rng.integers(D))
            opts = [f for f in divs[int(problem.bounds[d])] if f <= fan[ax] and rem[d] % f == 0]
            s[i, a, d, ax] = opts[int(rng.integers(len(opts)))]
            rem[d] //= s[i, a, d, ax]
        for d in range(D):
            r = int(rem[d])
            levels = range(a + 1, L) if d in filt else range(L)
            for lv in levels:  # larger factors outside, so that inner tiles often fit
                ds = [f for f in range(1, r + 1) if r % f == 0]
                f = ds[int(rng.integers(len(ds), size=2).max())]
                t[i, lv, d] *= f
                r //= f
            t[i, L - 1, d] *= r
    order = np.argsort(rng.random((n, L, D)), axis=2)
    keep = np.broadcast_to(arch.holds_mask(problem), (n, L, T)).copy()
    return MappingBatch(temporal=t, spatial=s, order=order, keep=keep)


def damaged_batch(batch: MappingBatch, rng: np.random.Generator) -> MappingBatch:
    """Illegal variants of legal rows: a factor of 0, -1 or doubled, an order with a
    repeated or out-of-range dim, a kept tensor a level may not hold or one dropped at the
    outermost level, a spatial factor multiplied beyond the fanout, huge factors."""
    t, s, o = (np.array(x, dtype=np.int64) for x in (batch.temporal, batch.spatial, batch.order))
    k = np.array(batch.keep, dtype=np.bool_)
    n, L, D = t.shape
    T = k.shape[2]
    for i in range(n):
        kind = int(rng.integers(7))
        lv, d = int(rng.integers(L)), int(rng.integers(D))
        if kind == 0:
            t[i, lv, d] = int(rng.choice([0, -1, 2 * max(t[i, lv, d], 1)]))
        elif kind == 1:
            o[i, lv, int(rng.integers(D))] = o[i, lv, (int(rng.integers(D - 1)) + 1) % D] if D > 1 else 5
        elif kind == 2:
            o[i, lv, d] = int(rng.choice([-1, D, 10 * D]))
        elif kind == 3:
            k[i, lv, int(rng.integers(T))] ^= True
        elif kind == 4:
            k[i, 0, int(rng.integers(T))] = False
        elif kind == 5:  # move a temporal factor into a spatial slot (fanout or factors wrong)
            s[i, lv, d, int(rng.integers(2))] *= max(t[i, lv, d], 2)
            t[i, lv, d] = 1
        else:
            t[i, lv, d] = 2 ** 40
    return MappingBatch(temporal=t, spatial=s, order=o, keep=k)
