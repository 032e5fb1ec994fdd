"""loopnest on hand-computed cases: every number below is worked out in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.check import Reason
from accelmap.mapper.mapping import Mapping
from accelmap.testing.costmodel_checks import assert_metrics_equal, check_cost_model
from accelmap.testing.examples import small_arch, small_conv, trivial_mapping
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term


def _t(name: str, coords: list[list[str]], role: TensorRole) -> Tensor:
    return Tensor(name=name, projection=tuple(tuple(Term(dim=d) for d in c) for c in coords), role=role)


def conv1d(p: int = 8, r: int = 3, k: int | None = None) -> Problem:
    """Outputs[K, P] += Weights[K, R] * Inputs[P + R] (K omitted when None)."""
    ks = [] if k is None else ["K"]
    dims = tuple(Dim(name=n, bound=b) for n, b in ([("K", k)] if k else []) + [("P", p), ("R", r)])
    return Problem(name="conv1d", dims=dims, tensors=(
        _t("Weights", [[x] for x in ks] + [["R"]], TensorRole.WEIGHT),
        _t("Inputs", [["P", "R"]], TensorRole.INPUT),
        _t("Outputs", [[x] for x in ks] + [["P"]], TensorRole.OUTPUT),
    ))


def two_level(fanout: tuple[int, int] = (1, 1), **buf: object) -> Arch:
    return Arch(name="two", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=10, write_energy_pj=10),
        StorageLevel(name="Buf", capacity_words=1000, read_energy_pj=1, write_energy_pj=1,
                     fanout_x=fanout[0], fanout_y=fanout[1], **buf),  # type: ignore[arg-type]
    ), compute=Compute(energy_per_mac_pj=1.0))


def three_level(fanout: tuple[int, int]) -> Arch:
    return Arch(name="three", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=10, write_energy_pj=10),
        StorageLevel(name="Buf", capacity_words=1000, read_energy_pj=2, write_energy_pj=2,
                     fanout_x=fanout[0], fanout_y=fanout[1]),
        StorageLevel(name="RF", capacity_words=100, read_energy_pj=1, write_energy_pj=1),
    ), compute=Compute(energy_per_mac_pj=1.0))


def mapping(problem: Problem, arch: Arch, temporal: dict[str, dict[str, int]],
            spatial: dict[str, dict[str, tuple[int, int]]] | None = None,
            order: dict[str, str] | None = None, keep: dict[str, list[str]] | None = None) -> Mapping:
    """Build a mapping from readable dicts; order strings are outermost first."""
    L, D = arch.n_levels, problem.n_dims
    tmp = np.ones((L, D), np.int64)
    sp = np.ones((L, D, 2), np.int64)
    ordr = np.tile(np.arange(D), (L, 1))
    kp = np.ones((L, problem.n_tensors), bool)
    for lv, fs in temporal.items():
        for d, v in fs.items():
            tmp[arch.level_index(lv), problem.dim_index(d)] = v
    for lv, fs in (spatial or {}).items():
        for d, (x, y) in fs.items():
            sp[arch.level_index(lv), problem.dim_index(d)] = (x, y)
    for lv, s in (order or {}).items():
        idx = [problem.dim_index(c) for c in s]
        ordr[arch.level_index(lv)] = idx + [d for d in range(D) if d not in idx]
    for lv, names in (keep or {}).items():
        kp[arch.level_index(lv)] = [t.name in names for t in problem.tensors]
    return Mapping(temporal=tmp, spatial=sp, order=ordr, keep=kp)


def both(problem: Problem, arch: Arch, m: Mapping):
    model = LoopNestModel()
    a = model.evaluate(problem, arch, m.as_batch())
    b = model.evaluate_one(problem, arch, m)
    assert_metrics_equal(a, b, what="batched vs scalar")
    return a.row(0), a


def counts(row: dict, level: str, tensor: str) -> tuple[int, int, int]:
    c = row["levels"][level][tensor]
    return c["reads"], c["fills"], c["updates"]


def test_sliding_window_halo_and_output_read_elision() -> None:
    # P=8, R=3; DRAM walks P in 4 steps; Buf holds P=2, R=3.
    prob, arch = conv1d(), two_level()
    row, _ = both(prob, arch, mapping(prob, arch, {"DRAM": {"P": 4}, "Buf": {"P": 2, "R": 3}}))
    # Inputs tile = 2 + 3 - 1 = 4 words; each P step of 2 brings 2 new words: 4 + 3*2 = 10.
    assert counts(row, "Buf", "Inputs") == (24, 10, 0)
    assert counts(row, "DRAM", "Inputs") == (10, 0, 0)
    # Weights are not indexed by P: fetched once.
    assert counts(row, "Buf", "Weights") == (24, 3, 0)
    assert counts(row, "DRAM", "Weights") == (3, 0, 0)
    # Outputs: 24 updates, 8 distinct outputs -> 16 reads; each output tile visited once.
    assert counts(row, "Buf", "Outputs") == (16, 0, 24)
    assert counts(row, "DRAM", "Outputs") == (0, 0, 8)
    # Energy: DRAM (10 + 3) * 10 + 8 * 10 = 210; Buf reads 64, writes 13 + 24 = 37; MACs 24.
    assert row["energy_pj"] == pytest.approx(210 + 64 + 37 + 24)
    assert row["cycles"] == 24
    assert row["utilization"] == 1.0


def test_sliding_window_reset_when_direction_changes() -> None:
    # DRAM: K=2 (outer) then P=4 (inner). The P loop slides the input window forward (+2 new
    # words per step); when K advances, P returns to its start: a backward move along the same
    # coordinate, which Timeloop does not treat as a slide -> the whole 4-word tile again.
    prob, arch = conv1d(k=2), two_level()
    m = mapping(prob, arch, {"DRAM": {"K": 2, "P": 4}, "Buf": {"P": 2, "R": 3}}, order={"DRAM": "KP", "Buf": "PRK"})
    row, _ = both(prob, arch, m)
    # 4 (first) + 1 * 1 * 4 (K step, reset) + 2 * 3 * 2 (P steps) = 20
    assert counts(row, "Buf", "Inputs")[1] == 20


def test_stationary_tile_across_irrelevant_inner_loop() -> None:
    # DRAM order P (outer) then K (inner): K does not index Inputs, so the input tile stays put.
    prob, arch = conv1d(k=2), two_level()
    m = mapping(prob, arch, {"DRAM": {"K": 2, "P": 4}, "Buf": {"P": 2, "R": 3}}, order={"DRAM": "PK", "Buf": "PRK"})
    row, _ = both(prob, arch, m)
    # 4 + K step: 0 new + P steps: 1 * 3 * 2 (only P moves; K returns, Inputs do not see it)
    assert counts(row, "Buf", "Inputs")[1] == 10
    # Weights[K, R] are refetched for every P step: 3 words x (K=2 x P=4) = 24.
    assert counts(row, "Buf", "Weights")[1] == 24


def test_multicast_of_unindexed_tensor() -> None:
    # Outputs[M] += Weights[M, K] * Inputs[K]; M=4 unrolled across 4 PEs, K=2 in each RF.
    dims = (Dim(name="M", bound=4), Dim(name="K", bound=2))
    prob = Problem(name="mv", dims=dims, tensors=(
        _t("Weights", [["M"], ["K"]], TensorRole.WEIGHT), _t("Inputs", [["K"]], TensorRole.INPUT),
        _t("Outputs", [["M"]], TensorRole.OUTPUT)))
    arch = three_level((4, 1))
    row, met = both(prob, arch, mapping(prob, arch, {"RF": {"K": 2}}, spatial={"Buf": {"M": (4, 1)}}))
    # Inputs (not indexed by M): the Buf reads 2 words once, multicast to 4 RFs (8 fills).
    assert counts(row, "Buf", "Inputs") == (2, 2, 0)
    assert counts(row, "RF", "Inputs") == (8, 8, 0)
    assert met.multicast[0, arch.level_index("Buf"), prob.tensor_index("Inputs")] == 6
    # Weights are indexed by M: 2 words to each of 4 RFs.
    assert counts(row, "Buf", "Weights") == (8, 8, 0)
    # Outputs: one per PE, 2 MACs each -> RF updates 8, reads (2 - 1) * 4; Buf gets 4 updates.
    assert counts(row, "RF", "Outputs") == (4, 0, 8)
    assert counts(row, "Buf", "Outputs") == (0, 0, 4)


def test_spatial_reduction_of_partial_sums() -> None:
    # K=4 unrolled across 4 PEs: all PEs add into the same 2 outputs (M=2 in each RF).
    dims = (Dim(name="M", bound=2), Dim(name="K", bound=4))
    prob = Problem(name="mv", dims=dims, tensors=(
        _t("Weights", [["M"], ["K"]], TensorRole.WEIGHT), _t("Inputs", [["K"]], TensorRole.INPUT),
        _t("Outputs", [["M"]], TensorRole.OUTPUT)))
    arch = three_level((4, 1))
    row, met = both(prob, arch, mapping(prob, arch, {"RF": {"M": 2}}, spatial={"Buf": {"K": (4, 1)}}))
    # Each RF: 2 updates of its 2 partial sums (no reads: each output is written once).
    assert counts(row, "RF", "Outputs") == (0, 0, 8)
    # The 4 PEs' partial sums are reduced on the way up: 2 updates at the Buf.
    assert counts(row, "Buf", "Outputs") == (0, 0, 2)
    assert met.spatial_reductions[0, arch.level_index("Buf"), prob.tensor_index("Outputs")] == 6


def test_bypass_sends_traffic_to_next_outer_keeper() -> None:
    dims = (Dim(name="M", bound=4), Dim(name="K", bound=2))
    prob = Problem(name="mv", dims=dims, tensors=(
        _t("Weights", [["M"], ["K"]], TensorRole.WEIGHT), _t("Inputs", [["K"]], TensorRole.INPUT),
        _t("Outputs", [["M"]], TensorRole.OUTPUT)))
    arch = three_level((4, 1))
    m = mapping(prob, arch, {"RF": {"K": 2}}, spatial={"Buf": {"M": (4, 1)}},
                keep={"Buf": ["Inputs", "Outputs"]})
    row, _ = both(prob, arch, m)
    assert counts(row, "Buf", "Weights") == (0, 0, 0)
    assert counts(row, "DRAM", "Weights") == (8, 0, 0)  # straight from DRAM into the 4 RFs
    assert counts(row, "RF", "Weights") == (8, 8, 0)


def test_aliasing_spatial_dims_share_inputs() -> None:
    # P=4 and R=3 unrolled together over 12 MACs: input column p + r takes only 6 values.
    prob = conv1d(p=4, r=3)
    arch = two_level((12, 1))
    row, _ = both(prob, arch, mapping(prob, arch, {}, spatial={"Buf": {"P": (4, 1), "R": (3, 1)}}))
    assert counts(row, "Buf", "Inputs") == (6, 6, 0)
    assert counts(row, "Buf", "Weights") == (3, 3, 0)
    assert counts(row, "Buf", "Outputs") == (0, 0, 4)  # reduced over R


def test_block_size_rounds_energy_up() -> None:
    prob = conv1d()
    arch = Arch(name="blk", levels=(
        StorageLevel(name="DRAM", capacity_words=None, block_words=4, read_energy_pj=40, write_energy_pj=40),
        StorageLevel(name="Buf", capacity_words=1000, read_energy_pj=1, write_energy_pj=1),
    ), compute=Compute(energy_per_mac_pj=0.0))
    row, _ = both(prob, arch, mapping(prob, arch, {"DRAM": {"P": 4}, "Buf": {"P": 2, "R": 3}}))
    # DRAM: Inputs 10 reads -> 3 blocks, Weights 3 -> 1 block, Outputs 8 updates -> 2 blocks.
    assert row["levels"]["DRAM"]["Inputs"]["energy_pj"] == 3 * 40
    assert row["levels"]["DRAM"]["Weights"]["energy_pj"] == 1 * 40
    assert row["levels"]["DRAM"]["Outputs"]["energy_pj"] == 2 * 40


def test_bandwidth_limits_cycles() -> None:
    prob = conv1d()
    arch = two_level(read_bandwidth_words_per_cycle=1.0, write_bandwidth_words_per_cycle=0.5)
    row, _ = both(prob, arch, mapping(prob, arch, {"DRAM": {"P": 4}, "Buf": {"P": 2, "R": 3}}))
    # Buf reads 24 + 24 + 16 = 64 words at 1/cycle; writes 10 + 3 + 24 = 37 at 0.5/cycle = 74.
    assert row["cycles"] == 74
    assert row["utilization"] == pytest.approx(24 / 74)


def test_invalid_mappings_are_marked_not_raised() -> None:
    prob, arch = conv1d(), two_level()
    good = mapping(prob, arch, {"DRAM": {"P": 4}, "Buf": {"P": 2, "R": 3}})
    bad = mapping(prob, arch, {"DRAM": {"P": 3}, "Buf": {"P": 2, "R": 3}})
    from accelmap.mapper.mapping import MappingBatch

    m = LoopNestModel().evaluate(prob, arch, MappingBatch.from_mappings([good, bad]))
    assert m.valid.tolist() == [True, False]
    assert m.reason[1] == Reason.FACTORS
    assert np.isinf(m.cycles[1]) and np.isinf(m.energy_pj[1])
    one = LoopNestModel().evaluate_one(prob, arch, bad)
    assert not one.valid[0] and np.isinf(one.energy_pj[0])


def test_conformance_checks() -> None:
    from accelmap.mapper.mapping import MappingBatch

    prob, arch = small_conv(), small_arch()
    base = trivial_mapping(prob, arch)
    m2 = mapping(prob, arch, {"DRAM": {"K": 2, "P": 3}, "GLB": {"Q": 6, "C": 2}, "RF": {"R": 3, "S": 3, "P": 2}},
                 spatial={"GLB": {"K": (4, 1), "C": (1, 2)}})
    batch = MappingBatch.from_mappings([base, m2, base])
    check_cost_model(LoopNestModel(), prob, arch, batch)


def test_three_dim_coordinate_is_enumerated() -> None:
    # A coordinate P + 2R + S with P, R and S unrolled together: distinct sums by enumeration.
    dims = (Dim(name="P", bound=2), Dim(name="R", bound=2), Dim(name="S", bound=3))
    prob = Problem(name="odd", dims=dims, tensors=(
        Tensor(name="Weights", projection=((Term(dim="R"),), (Term(dim="S"),)), role=TensorRole.WEIGHT),
        Tensor(name="Inputs", projection=((Term(dim="P"), Term(dim="R", coef=2), Term(dim="S")),), role=TensorRole.INPUT),
        Tensor(name="Outputs", projection=((Term(dim="P"),),), role=TensorRole.OUTPUT),
    ))
    arch = two_level((12, 1))
    row, _ = both(prob, arch, mapping(prob, arch, {}, spatial={"Buf": {"P": (2, 1), "R": (2, 1), "S": (3, 1)}}))
    # p + 2r + s over p<2, r<2, s<3 takes the values 0..5: 6 distinct input words.
    assert counts(row, "Buf", "Inputs")[0] == 6
