"""Staged bounds (`loopnest_bounds.partial_bounds`' ``cutoff``): the costly arguments only on
the rows the others leave below the incumbent's cut-off. Below the cut-off the staged bound
equals the full one; at or above it, it is still a bound of every mapping of the node, so the
search cuts the same nodes and its certificate stays valid."""

from __future__ import annotations

import numpy as np
import pytest

import accelmap.costmodels._bound_switches as sw
import accelmap.costmodels._bypass_bounds as bypass_bounds
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.costmodels.loopnest_bounds import BoundCut, partial_bounds
from accelmap.mapper.space import MapSpace
from accelmap.search.exact import solve
from accelmap.search.objectives import parse_objective
from accelmap.testing.exact_nodes import whole_space_nodes
from accelmap.workloads.builders import conv2d, matmul

MODEL = LoopNestModel()


def bypass_glb_arch(glb: int = 64, rf: int = 8) -> Arch:
    """simple3 in small: DRAM > GLB (outputs only, 2 PEs below) > an RF for inputs and
    weights (arguments 15b and 17 run at its nodes)."""
    return Arch(name="tiny-bypass", compute=Compute(energy_per_mac_pj=1.0), levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=200.0, write_energy_pj=200.0),
        StorageLevel(name="GLB", capacity_words=glb, read_energy_pj=6.0, write_energy_pj=6.0, fanout_x=2,
                     holds=frozenset({"output"})),
        StorageLevel(name="RF", capacity_words=rf, read_energy_pj=1.0, write_energy_pj=1.0,
                     holds=frozenset({"input", "weight"})),
    ))


def spads_arch() -> Arch:
    """DRAM > GLB (2x2 PEs) > RF with a free keep pattern: arguments 10, 11, 13 and 16 run."""
    return Arch(name="tiny", compute=Compute(energy_per_mac_pj=1.0), levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100.0, write_energy_pj=120.0, block_words=2),
        StorageLevel(name="GLB", capacity_words=48, read_energy_pj=5.0, write_energy_pj=6.0, fanout_x=2, fanout_y=2),
        StorageLevel(name="RF", capacity_words=8, read_energy_pj=0.5, write_energy_pj=0.6),
    ))


CASES = {
    "strided-3x3": (lambda: conv2d("c", n=1, k=1, c=1, p=2, q=2, r=3, s=3, stride=2), lambda: bypass_glb_arch(rf=12)),
    "strided-3x3-small-glb": (lambda: conv2d("c", n=1, k=1, c=1, p=2, q=2, r=3, s=3, stride=2),
                              lambda: bypass_glb_arch(glb=2, rf=12)),
    "gemm-small-glb": (lambda: matmul("g", m=4, n=2, k=4), lambda: bypass_glb_arch(glb=4)),
    "conv-spads": (lambda: conv2d("c", n=1, k=2, c=1, p=3, q=2, r=2, s=1), spads_arch),
}


def _staged_check(space: MapSpace, objective: str) -> dict[str, int]:
    """Every node of every depth and split on the path of a mapping of the whole space,
    bounded in full and staged, at cut-offs at the quartiles of the nodes' full objective
    bounds. Counts: ``below`` rows under the cut-off whose staged energy bound differs from
    the full one; ``cut`` rows that one of the two cuts and the other not; ``cycles`` rows whose
    cycles bounds differ; ``over`` staged energy bounds above the least energy of the node's
    mappings; ``weaker`` rows the staging left with a weaker (first-stage) bound."""
    obj = parse_objective(objective)
    out = {"rows": 0, "below": 0, "cut": 0, "cycles": 0, "over": 0, "weaker": 0}

    def of(e: np.ndarray, c: np.ndarray) -> np.ndarray:
        return obj.scalar(e, c, np.ones(len(e), dtype=bool))

    a, b_ = {"energy": (1.0, 0.0), "cycles": (0.0, 1.0), "edp": (1.0, 1.0)}.get(objective, (2.0, 1.0))
    for bm, inputs, least in whole_space_nodes(space, model=MODEL):
        e, c, ok = partial_bounds(bm, **inputs)
        full = of(e, c)
        fin = full[np.isfinite(full)]
        if not len(fin):
            continue
        for q in (0.25, 0.5, 0.75):
            value = float(np.quantile(fin, q))
            bypass_bounds._SPLIT_MEMO.clear()  # (each cut-off computes argument 17 up to it afresh)
            bypass_bounds._SPLIT_FLOORS.clear()
            e2, c2, ok2 = partial_bounds(bm, **inputs, cutoff=BoundCut(value, a, b_, of))
            assert (ok2 == ok).all()
            staged = of(e2, c2)
            out["rows"] += len(e)
            out["below"] += int(((staged < value) & (e2 != e)).sum())
            # (a full bound within rounding of the cut-off may fall on either side of it)
            clear = np.abs(full - value) > 1e-9 * value
            out["cut"] += int((clear & ((staged >= value) != (full >= value))).sum())
            out["cycles"] += int((c2 != c).sum())
            out["over"] += int((e2 > least * (1 + 1e-12)).sum())
            out["weaker"] += int((e2 < e * (1 - 1e-9)).sum())
    return out


@pytest.mark.parametrize("case,objective", [(c, "edp") for c in CASES if c != "conv-spads"] + [
    ("strided-3x3", "energy"), ("strided-3x3", "energy^2*cycles^1"), ("gemm-small-glb", "energy"),
    ("conv-spads", "energy")])
def test_staged_bound_equals_the_full_one_below_the_cutoff_and_bounds_every_mapping(case, objective,
                                                                                    monkeypatch) -> None:
    """On every node of whole spaces (a stride-2 3x3 window under 64- and 2-word GLBs, a GEMM
    under a 4-word GLB where arguments 15b and 17 run, a 2x2-PE arch with a free keep pattern
    where 10, 11, 13 and 16 run), at cut-offs at the quartiles of the full bounds: the staged
    bound equals the full one on every row below the cut-off, cuts the same rows, has the same
    cycles, and is never above the least energy of the node's mappings; the staging leaves
    some cut rows with the first stage's weaker bound (so it did skip work). Argument 10 reads
    which dims can carry an open loop on some row of the batch: the second stage takes the
    whole batch's (``open_dims``); with its own rows' instead, 1,330 rows of conv-spads under
    the energy objective were weaker than in the whole batch (valid bounds, but not equal)."""

    monkeypatch.setattr(sw, "_JOINT_SPLIT_CHOSEN", True)  # argument 17 on more rows
    monkeypatch.setattr(sw, "_STAGE_LIVE_MAX", 1.0)  # every call staged
    monkeypatch.setattr(bypass_bounds, "_SPLIT_MEMO", {})
    monkeypatch.setattr(bypass_bounds, "_SPLIT_FLOORS", {})
    prob, arch = CASES[case]
    got = _staged_check(MapSpace(prob(), arch()), objective)
    assert got["rows"] > 0
    assert got["below"] == 0 and got["cut"] == 0 and got["cycles"] == 0 and got["over"] == 0, got
    assert got["weaker"] > 0, got


def test_staged_bound_check_fails_with_a_wrong_stage(monkeypatch) -> None:
    """The test above can fail: keeping the first stage's bound on every row (the costly
    arguments never run) shows as rows below the cut-off that differ from the full bound and
    rows the full bound cuts and the staged one does not."""
    import accelmap.costmodels.loopnest_bounds as lbm

    monkeypatch.setattr(sw, "_JOINT_SPLIT_CHOSEN", True)
    monkeypatch.setattr(sw, "_STAGE_LIVE_MAX", 1.0)
    monkeypatch.setattr(bypass_bounds, "_SPLIT_MEMO", {})
    monkeypatch.setattr(bypass_bounds, "_SPLIT_FLOORS", {})
    monkeypatch.setattr(lbm, "_staged_bounds",
                        lambda bm, k, fac, omin, otmin, omax, *rest: lbm.partial_bounds(
                            bm, k, fac, omin, otmin, omax, *rest[:-1], costly=False))
    prob, arch = CASES["strided-3x3"]
    got = _staged_check(MapSpace(prob(), arch()), "edp")
    assert got["below"] > 0 and got["cut"] > 0, got


def test_staged_bound_check_fails_with_argument_17_cut_too_early(monkeypatch) -> None:
    """... and taking argument 17's limit as its least on every row (as if every split reached
    the cut) shows as bounds above the least energy of some node's mappings."""
    import accelmap.costmodels._order_kernel as ok_

    real = ok_.two_level_split_least_below
    monkeypatch.setattr(sw, "_JOINT_SPLIT_CHOSEN", True)
    monkeypatch.setattr(sw, "_STAGE_LIVE_MAX", 1.0)
    monkeypatch.setattr(bypass_bounds, "_SPLIT_MEMO", {})
    monkeypatch.setattr(bypass_bounds, "_SPLIT_FLOORS", {})
    monkeypatch.setattr(ok_, "two_level_split_least_below",
                        lambda *a: np.where(np.isfinite(real(*a)) & (real(*a) >= 0) & np.isfinite(a[-2]), a[-2],
                                            real(*a)))
    prob, arch = CASES["strided-3x3"]
    got = _staged_check(MapSpace(prob(), arch()), "edp")
    assert got["over"] > 0, got


def _split_rows(n: int = 60, seed: int = 17):  # noqa: ANN202
    """Random rows of argument 17's inputs on a stride-2 3x3 layer (as test_exact.py's kernel
    test): some level-1 factors chosen, a capacity that rejects some splits, too many splits."""
    prob = conv2d("c", n=1, k=4, c=2, p=4, q=6, r=3, s=3, stride=2)
    coef = prob.coefficients[[prob.tensor_index("weight"), prob.tensor_index("input")]].astype(float)
    kcoef = prob.coefficients[[prob.tensor_index("output")]].astype(float)
    rng = np.random.default_rng(seed)
    D = prob.n_dims
    o = rng.choice([1, 2, 3, 4, 6, 12], size=(n, D)).astype(float)
    fixed1 = np.where(rng.random((n, D)) < 0.3, 1.0, 0.0)
    fixed1 = np.where(fixed1 > 0, [[float(rng.choice([x for x in range(1, int(v) + 1) if int(v) % x == 0]))
                                    for v in row] for row in o], 0.0)
    s1 = rng.integers(1, 3, (n, D)).astype(float)
    span = 1.0 + ((s1[:, None, None, :] - 1.0) * coef[None]).sum(axis=3)
    w = rng.uniform(0.5, 3.0, (n, 2))
    return span, coef, w, s1, o, fixed1, kcoef, rng


@pytest.mark.parametrize("engine", ["cpu", "numpy"])
def test_split_least_below_a_limit_is_the_least_clipped(engine, monkeypatch) -> None:
    """Argument 17 up to a limit (`_order_kernel.two_level_split_least_below`, its own branch
    and bound over the splits and each split's shortest path; and the numpy reference clipped):
    ``min(least, limit)`` bit for bit where some split fits, inf where none does, -1 where there
    are too many; with ``_SPLIT_STOP`` -1 also where the least is below the limit."""

    span, coef, w, s1, o, fixed1, kcoef, rng = _split_rows()
    monkeypatch.setattr(sw, "_JOINT_SPLIT_ENGINE", engine)
    least = bypass_bounds._split_least(span, coef, w, s1, o, fixed1, kcoef, 40.0)
    fin = np.isfinite(least) & (least >= 0)
    limit = np.where(rng.random(len(o)) < 0.5, least * rng.uniform(0.5, 1.5, len(o)), np.inf)
    limit[fin & (rng.random(len(o)) < 0.2)] = 0.0
    got = bypass_bounds._split_least_below(span, coef, w, s1, o, fixed1, kcoef, 40.0, limit)
    want = np.where(fin, np.minimum(least, limit), least)
    assert np.array_equal(got, want)
    assert (fin & (limit < least)).sum() > 3 and (fin & (limit > least)).sum() > 3
    monkeypatch.setattr(sw, "_SPLIT_STOP", True)
    got = bypass_bounds._split_least_below(span, coef, w, s1, o, fixed1, kcoef, 40.0, limit)
    assert np.array_equal(got, np.where(fin & (least < limit), -1.0, want))


@pytest.mark.parametrize("objective", ["edp", "energy", "cycles", "energy^2*cycles^1"])
def test_staged_search_proves_the_same_optimum_with_the_same_tree(objective, monkeypatch) -> None:
    """`solve` with the staged bound and without (and with the staging kept at every k, or
    dropped after its trial rows): the same optimum, proven, after the same nodes, cuts and
    leaves (the staging cuts exactly the rows the full bound cuts)."""

    space = MapSpace(matmul("g", m=4, n=4, k=2), spads_arch())
    obj = parse_objective(objective)
    got = {}
    for staged, live_max in ((False, 0.5), (True, 0.5), (True, 1.0), (True, 0.0)):
        monkeypatch.setattr(sw, "_STAGED", staged)
        monkeypatch.setattr(sw, "_STAGE_LIVE_MAX", live_max)  # as configured, always, after the trial rows never
        _, value, cert = solve(space, MODEL, obj, workers=1, dive_share=0.0)
        got[(staged, live_max)] = (value, cert.proven_optimal, cert.nodes, cert.cut, cert.leaves)
    assert len(set(got.values())) == 1, got
    assert got[(True, 0.5)][1]
