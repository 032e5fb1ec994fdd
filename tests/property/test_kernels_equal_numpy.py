"""Property: the compiled kernels give the numpy reference path's `Metrics` (counts, cycles
and reason codes bit for bit, energies to 1e-12 relative) on random, sampled and damaged
mappings, for every preset and for the Timeloop golden cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelmap.arch.io import load_arch
from accelmap.arch.presets import preset, presets
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.io import load_mapping
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.testing.costmodel_checks import assert_engines_agree
from accelmap.testing.examples import aspect_batch
from accelmap.testing.examples import damaged_batch as damage
from accelmap.workloads.builders import conv2d, matmul
from accelmap.workloads.io import load_problem

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / ".." / "shared" / "reference" / "timeloop"
GOLDEN_ARCHS = ROOT / "tests" / "golden" / "data" / "timeloop"
GOLDEN = sorted(p.name for p in (REFERENCE / "cases").iterdir() if p.is_dir()) if (REFERENCE / "cases").is_dir() else []

# One problem per preset: convolutions (strided, dilated, grouped) where the preset is a
# convolution engine, a matmul on the GPU-like ones.
PROBLEMS = {
    "a100-sm": lambda: matmul("mm", m=64, n=32, k=48),
    "v100-sm": lambda: matmul("mm", m=48, n=64, k=32),
    "edge-tpu-like": lambda: conv2d("c", c=8, k=16, p=14, q=14, r=3, s=3),
    "eyeriss-like": lambda: conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3),
    "mlu-like": lambda: conv2d("g", c=8, k=8, p=8, q=6, r=3, s=2, stride=(2, 1), dilation=(1, 2), groups=2),
    "nvdla-like": lambda: conv2d("s", c=16, k=32, p=7, q=7, r=3, s=3, stride=2),
    "simba-like": lambda: conv2d("s2", c=8, k=16, p=7, q=7, r=3, s=3, stride=2),
    "systolic": lambda: conv2d("dw", c=16, k=16, p=8, q=8, r=3, s=3, groups=16),
    "tpu-v1-like": lambda: conv2d("c", c=32, k=64, p=7, q=7, r=1, s=1),
}


def random_batch(problem, arch, n: int, rng: np.random.Generator) -> MappingBatch:
    """Every dim's bound split into random prime factors spread over the temporal and
    (where the level fans out) X/Y slots of every level; random orders and bypass."""
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    temporal = np.ones((n, L, D), np.int64)
    spatial = np.ones((n, L, D, 2), np.int64)
    slots = [(lv, k) for lv in range(L) for k in range(3)
             if k == 0 or (k == 1 and arch.levels[lv].fanout_x > 1) or (k == 2 and arch.levels[lv].fanout_y > 1)]
    for i in range(n):
        for d, b in enumerate(problem.bounds.tolist()):
            p = 2
            while b > 1:
                while b % p:
                    p += 1
                b //= p
                lv, k = slots[int(rng.integers(len(slots)))]
                if k == 0:
                    temporal[i, lv, d] *= p
                else:
                    spatial[i, lv, d, k - 1] *= p
    order = np.argsort(rng.random((n, L, D)), axis=2)
    keep = rng.random((n, L, T)) < 0.6
    keep[:, 0] = True
    return MappingBatch(temporal=temporal, spatial=spatial, order=order, keep=keep)


# The driver specialised per structure compiles for 10-25 s per structure on a cold numba
# cache (every CI run), so the default run checks it on a few structures of different kinds
# (a row-stationary and a systolic preset, a strided and a depthwise Timeloop case) and the
# slow run on every case below.
SPECIALISED_PRESETS = ("eyeriss-like",)  # the other presets' specialised drivers: -m slow (a cold compile each)
SPECIALISED_GOLDEN = ("eyeriss_like__L4_resnet50_res3a_2b_s2__mapper_edp_best",
                      "simple3__L7_mbv2_dw3x3_c144__hand_ws")
SPECIALISED_ZOO = ()


def _agree(problem, arch, batch: MappingBatch, what: str, *, specialised: bool = True) -> None:
    from accelmap.costmodels import _loopnest_kernel

    ref = LoopNestModel(engine="numpy").evaluate(problem, arch, batch)
    cpu = LoopNestModel(engine="cpu")
    before = _loopnest_kernel._SPECIALISE_AFTER_ROWS
    drivers = ((1 << 62, "generic"), (0, "specialised")) if specialised else ((1 << 62, "generic"),)
    try:  # both CPU drivers: the one for every structure, and the one specialised per structure
        for after_rows, driver in drivers:
            _loopnest_kernel._SPECIALISE_AFTER_ROWS = after_rows
            got = cpu.evaluate(problem, arch, batch)
            assert_engines_agree(got, ref, what=f"{what} ({driver} driver)")
            # The objective-only mode (no counts written) gives the same per-row results exactly.
            obj = cpu.evaluate_objective(problem, arch, batch)
            for name in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
                assert np.array_equal(getattr(obj, name), getattr(got, name)), \
                    f"{what} ({driver} driver): evaluate_objective {name} differs"
    finally:
        _loopnest_kernel._SPECIALISE_AFTER_ROWS = before


def _presets_sampled_and_damaged(arch_name: str, specialised: bool) -> None:
    arch = preset(arch_name)
    problem = PROBLEMS[arch_name]()
    rng = np.random.default_rng(3)
    space = MapSpace(problem, arch)
    sampled = space.sample(400, rng)
    legal = space.sample_valid(200, rng)
    _agree(problem, arch, sampled, f"{arch_name} sampled", specialised=specialised)
    _agree(problem, arch, legal, f"{arch_name} legal", specialised=specialised)
    _agree(problem, arch, damage(legal, rng), f"{arch_name} damaged", specialised=specialised)
    assert legal.temporal.shape[0] == 200


@pytest.mark.parametrize("arch_name", presets())
def test_loopnest_presets_sampled_and_damaged(arch_name: str) -> None:
    _presets_sampled_and_damaged(arch_name, specialised=arch_name in SPECIALISED_PRESETS)


@pytest.mark.slow
@pytest.mark.parametrize("arch_name", [a for a in presets() if a not in SPECIALISED_PRESETS])
def test_loopnest_presets_specialised_driver(arch_name: str) -> None:
    _presets_sampled_and_damaged(arch_name, specialised=True)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), case=st.sampled_from(sorted(PROBLEMS)))
def test_loopnest_random_mappings(seed: int, case: str) -> None:
    """Random factorizations over every slot (from the scalar-vs-batch property test):
    bypass patterns and capacity overflows the MapSpace would not produce."""
    arch = preset(case)
    problem = PROBLEMS[case]()
    batch = random_batch(problem, arch, 40, np.random.default_rng(seed))
    _agree(problem, arch, batch, f"{case} random seed {seed}", specialised=case in SPECIALISED_PRESETS)


def test_loopnest_parallel_blocks_and_sizes() -> None:
    """Batches above the threading threshold (every row lands in its own place), and the
    empty batch."""
    arch, problem = preset("eyeriss-like"), PROBLEMS["eyeriss-like"]()
    rng = np.random.default_rng(8)
    space = MapSpace(problem, arch)
    big = MappingBatch.concat([space.sample(4000, rng), space.sample_valid(1200, rng)])
    big = big.take(rng.permutation(len(big)))
    _agree(problem, arch, big, "5200 rows")
    _agree(problem, arch, big.take(slice(0, 0)), "empty")


def _golden_cases(cases, specialised) -> None:
    for case in cases:
        folder = REFERENCE / "cases" / case
        arch_dir = GOLDEN_ARCHS / case.split("__")[0]
        ert = arch_dir / "ERT.yaml"
        problem = load_problem(folder / "prob.yaml")
        arch = load_arch(arch_dir / "arch.yaml", energy=ert if ert.exists() else None)
        mapping = load_mapping(folder / "map.yaml", problem, arch)
        assert json.loads((folder / "expected.json").read_text())
        sp = specialised(case)
        _agree(problem, arch, mapping.as_batch(), case, specialised=sp)
        rng = np.random.default_rng(0)
        _agree(problem, arch, MapSpace(problem, arch).sample(200, rng), f"{case} sampled", specialised=sp)


@pytest.mark.skipif(not GOLDEN, reason=f"Timeloop reference cases not found at {REFERENCE}")
def test_loopnest_timeloop_golden_cases() -> None:
    assert set(SPECIALISED_GOLDEN) <= set(GOLDEN)
    _golden_cases(GOLDEN, lambda case: case in SPECIALISED_GOLDEN)


@pytest.mark.slow
@pytest.mark.skipif(not GOLDEN, reason=f"Timeloop reference cases not found at {REFERENCE}")
def test_loopnest_timeloop_golden_cases_specialised_driver() -> None:
    _golden_cases([c for c in GOLDEN if c not in SPECIALISED_GOLDEN], lambda case: True)


def test_engine_choice(monkeypatch) -> None:
    from accelmap.errors import SpecError

    monkeypatch.setenv("ACCELMAP_KERNELS", "numpy")
    assert LoopNestModel().engine == "numpy"
    assert LoopNestModel(engine="cpu").engine == "cpu"
    monkeypatch.setenv("ACCELMAP_KERNELS", "fast")
    with pytest.raises(SpecError, match="ACCELMAP_KERNELS"):
        LoopNestModel()
    monkeypatch.delenv("ACCELMAP_KERNELS")
    assert LoopNestModel().engine == "cpu"
    with pytest.raises(SpecError, match="engine argument"):
        LoopNestModel(engine="gpu")


ZOO_PADDED = ["resnet50/conv1", "resnet50/conv3_1", "mobilenet_v2/block2_2_dw"]


def _padded_zoo_layer(layer: str, specialised: bool) -> None:
    problem, arch = load_problem(layer), preset("eyeriss-like")
    assert problem.has_padding
    rng = np.random.default_rng(11)
    legal = MapSpace(problem, arch).sample_valid(200, rng)
    _agree(problem, arch, legal, f"{layer} padded legal", specialised=specialised)
    _agree(problem, arch, damage(legal, rng), f"{layer} padded damaged", specialised=specialised)


@pytest.mark.parametrize("layer", ZOO_PADDED)
def test_loopnest_padded_zoo_layers(layer: str) -> None:
    """Zoo convolutions carry their padding: both engines count only the words that exist."""
    _padded_zoo_layer(layer, specialised=layer in SPECIALISED_ZOO)


@pytest.mark.slow
@pytest.mark.parametrize("layer", [z for z in ZOO_PADDED if z not in SPECIALISED_ZOO])
def test_loopnest_padded_zoo_layers_specialised_driver(layer: str) -> None:
    _padded_zoo_layer(layer, specialised=True)


# --- systolic ------------------------------------------------------------------------------
SYSTOLIC_CASES = {
    "conv-3x3": lambda: conv2d("CB2a_2", c=16, k=16, p=14, q=14, r=3, s=3, word_bits=8),
    "conv-strided": lambda: conv2d("s", c=8, k=16, p=7, q=7, r=3, s=3, stride=2, word_bits=8),
    "conv-1x1": lambda: conv2d("pw", c=32, k=64, p=7, q=7, r=1, s=1, word_bits=8),
    "gemm": lambda: matmul("GEMM", m=96, n=64, k=80, word_bits=8),
}


# The systolic driver specialised per structure compiles for 10-30 s per structure on a cold
# numba cache, so the default run checks it on the `systolic` preset for a strided convolution
# with a window and a GEMM, and the slow run on the other `systolic` cases, `tpu-v1-like` and
# the padded zoo layers too.
SYSTOLIC_SPECIALISED = {("systolic", "conv-strided"), ("systolic", "gemm")}


def _systolic_agree(problem, arch, batch: MappingBatch, what: str, *, specialised: bool = True) -> None:
    """Kernel and numpy path agree with the closed-form estimate on every row (the kernel's
    own arithmetic) and with the default ``"auto"`` (rows it walks come from the numpy path),
    on both CPU drivers (the generic one and, with ``specialised``, the one specialised per
    structure, whose objective-only mode is checked against its `Metrics` too)."""
    from accelmap.costmodels import _systolic_engine
    from accelmap.costmodels.systolic import SystolicModel

    before = _systolic_engine._SPECIALISE_AFTER_ROWS, _systolic_engine._SPECIALISE_IF_READY
    drivers = ((1 << 62, "generic"), (0, "specialised")) if specialised else ((1 << 62, "generic"),)
    try:
        for after_rows, driver in drivers:
            _systolic_engine._SPECIALISE_AFTER_ROWS = after_rows
            _systolic_engine._SPECIALISE_IF_READY = False  # (the generic driver even where the other is cached)
            for window in ("estimate", "auto"):
                ref_model = SystolicModel(engine="numpy", dram_window=window)
                got_model = SystolicModel(engine="cpu", dram_window=window)
                tag = f"{what} ({window}, {driver} driver)"
                got_m = got_model.evaluate(problem, arch, batch)
                assert_engines_agree(got_m, ref_model.evaluate(problem, arch, batch), what=tag)
                obj = got_model.evaluate_objective(problem, arch, batch)
                for name in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
                    assert np.array_equal(getattr(obj, name), getattr(got_m, name)), \
                        f"{tag}: evaluate_objective {name} differs"
                ref, got = ref_model.stats(problem, arch, batch), got_model.stats(problem, arch, batch)
                for f in ("valid", "reason", "reason_level", "dataflow", "row_class", "col_class", "rows_used",
                          "cols_used", "row_folds", "col_folds", "folds", "compute_cycles", "stall_cycles",
                          "total_cycles", "sram_reads", "sram_writes", "dram_reads", "dram_writes",
                          "mapping_efficiency", "compute_utilization", "utilization"):
                    assert np.array_equal(getattr(ref, f), getattr(got, f)), f"{tag}: stats field {f} differs"
    finally:
        _systolic_engine._SPECIALISE_AFTER_ROWS, _systolic_engine._SPECIALISE_IF_READY = before


@pytest.mark.parametrize("case", sorted(SYSTOLIC_CASES))
@pytest.mark.parametrize("arch_name", ["systolic", "tpu-v1-like"])
def test_systolic_sampled_seeded_and_damaged(case: str, arch_name: str) -> None:
    _systolic_sampled_seeded_and_damaged(case, arch_name, specialised=(arch_name, case) in SYSTOLIC_SPECIALISED)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SYSTOLIC_CASES))
@pytest.mark.parametrize("arch_name", ["systolic", "tpu-v1-like"])
def test_systolic_specialised_driver(case: str, arch_name: str) -> None:
    if (arch_name, case) in SYSTOLIC_SPECIALISED:
        pytest.skip("checked by the default run")
    _systolic_sampled_seeded_and_damaged(case, arch_name, specialised=True)


def _systolic_sampled_seeded_and_damaged(case: str, arch_name: str, *, specialised: bool) -> None:
    from accelmap.costmodels.systolic_variants import scalesim_mapping, systolic_variants, variant_seeds

    arch = preset(arch_name)
    problem = SYSTOLIC_CASES[case]()
    rng = np.random.default_rng(4)
    space = MapSpace(problem, arch)
    seeds = [scalesim_mapping(problem, arch, df) for df in ("os", "ws", "is")]
    seeds += [variant_seeds(problem, arch, v) for v in systolic_variants(problem, arch)]
    seeded = MappingBatch.concat(seeds)
    _systolic_agree(problem, arch, seeded, f"{arch_name} {case} SCALE-Sim mappings", specialised=specialised)
    _systolic_agree(problem, arch, space.sample(600, rng), f"{arch_name} {case} sampled", specialised=specialised)
    _systolic_agree(problem, arch, damage(seeded, rng), f"{arch_name} {case} damaged", specialised=specialised)


def test_systolic_random_array_usage() -> None:
    """The benchmark's pools: random dataflows and PEs used on each array axis."""
    import sys

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    arch = preset("systolic")
    for problem in (SYSTOLIC_CASES["conv-3x3"](), SYSTOLIC_CASES["gemm"]()):
        _systolic_agree(problem, arch, _systolic_pool(problem, arch, 1500, np.random.default_rng(6)), problem.name)


def test_systolic_parallel_blocks() -> None:
    """A batch above the threading threshold, legal and illegal rows mixed."""
    arch = preset("systolic")
    problem = SYSTOLIC_CASES["conv-3x3"]()
    rng = np.random.default_rng(9)
    space = MapSpace(problem, arch)
    batch = MappingBatch.concat([space.sample(3000, rng), space.sample_valid(2000, rng)])
    _systolic_agree(problem, arch, batch.take(rng.permutation(len(batch))), "5000 rows")


def test_systolic_big_tile_then_short_last_tile() -> None:
    """A filter tile larger than SCALE-Sim's prefetch window followed by a short last tile
    (the closed form's edge case, fixed on every path): the kernel, the numpy path and the
    scalar reference agree (the kernel counted 1,501 filter words before the fix, the
    others 1,579)."""
    from accelmap.arch.presets import systolic_array
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.costmodels.systolic_variants import scalesim_mapping
    from accelmap.mapper.mapping import Mapping

    problem = matmul("g", m=2, n=10, k=79, word_bits=8)
    arch = systolic_array(1, 9, 1, 1, 1)
    base = scalesim_mapping(problem, arch, "os")[0]
    lv = arch.level_names.index("ifmap_sram")
    spatial = base.spatial.copy()
    spatial[lv] = 1
    spatial[lv, 1] = (9, 1)
    temporal = np.ones_like(base.temporal)
    temporal[0] = (2, 2, 79)
    keep = np.array([[1, 1, 1], [0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=bool)
    order = np.tile(np.arange(3), (arch.n_levels, 1))
    batch = MappingBatch.from_mappings([Mapping(temporal=temporal, spatial=spatial, order=order, keep=keep)])
    from accelmap.costmodels import _systolic_engine

    ref = SystolicModel(engine="numpy").stats(problem, arch, batch)
    one = SystolicModel(engine="numpy").stats_one(problem, arch, batch[0])  # the scalar reference
    assert ref.valid[0] and np.array_equal(ref.dram_reads, one.dram_reads)
    before = _systolic_engine._SPECIALISE_AFTER_ROWS, _systolic_engine._SPECIALISE_IF_READY
    try:
        _systolic_engine._SPECIALISE_IF_READY = False
        for after_rows in (1 << 62, 0):  # the generic driver, the one specialised per structure
            _systolic_engine._SPECIALISE_AFTER_ROWS = after_rows
            got = SystolicModel(engine="cpu").stats(problem, arch, batch)
            assert np.array_equal(ref.dram_reads, got.dram_reads), (after_rows, ref.dram_reads, got.dram_reads)
    finally:
        _systolic_engine._SPECIALISE_AFTER_ROWS, _systolic_engine._SPECIALISE_IF_READY = before


@pytest.mark.parametrize("layer", ["resnet50/conv1", "resnet50/conv3_1", "resnet50/res4a_branch2b"])
def test_systolic_padded_zoo_layers(layer: str) -> None:
    """Zoo convolutions carry their padding: a padded operand's DRAM reads are its existing
    words on both engines."""
    _systolic_padded_zoo_layer(layer, specialised=False)


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["resnet50/conv1", "resnet50/conv3_1", "resnet50/res4a_branch2b"])
def test_systolic_padded_zoo_layers_specialised(layer: str) -> None:
    _systolic_padded_zoo_layer(layer, specialised=True)


def _systolic_padded_zoo_layer(layer: str, *, specialised: bool) -> None:
    from accelmap.costmodels.systolic_variants import scalesim_mapping

    problem, arch = load_problem(layer), preset("systolic")
    assert problem.has_padding
    seeds = MappingBatch.concat([scalesim_mapping(problem, arch, df) for df in ("os", "ws", "is")])
    batch = MappingBatch.concat([seeds, MapSpace(problem, arch).sample(300, np.random.default_rng(5))])
    _systolic_agree(problem, arch, batch, f"{layer} padded", specialised=specialised)


# --- aspect --------------------------------------------------------------------------------
ASPECT_PRESETS = ("edge-tpu-like", "eyeriss-like", "systolic", "tpu-v1-like")  # one PE array each
ASPECT_PROBLEMS = {
    "conv": lambda: conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3),
    "conv-strided": lambda: conv2d("s2", c=8, k=16, p=7, q=7, r=3, s=3, stride=2),
    "depthwise": lambda: conv2d("dw", c=16, k=16, p=8, q=8, r=3, s=3, groups=16),
    "gemm": lambda: matmul("mm", m=64, n=32, k=48),
    "batched-conv": lambda: conv2d("b", c=6, k=8, p=6, q=10, r=3, s=1, n=2),
}
MAESTRO = ROOT / ".." / "shared" / "reference" / "maestro"


def _aspect_agree(problem, arch, batch: MappingBatch, what: str) -> None:
    from accelmap.costmodels.aspect import AspectModel

    ref = AspectModel(engine="numpy").evaluate(problem, arch, batch)
    got = AspectModel(engine="cpu").evaluate(problem, arch, batch)
    assert_engines_agree(got, ref, what=what)


@pytest.mark.parametrize("case", sorted(ASPECT_PROBLEMS))
@pytest.mark.parametrize("arch_name", ASPECT_PRESETS)
def test_aspect_presets_sampled_random_and_damaged(case: str, arch_name: str) -> None:
    """Every preset the aspect model reads: MapSpace samples under `aspect_constraints`
    (mostly illegal), legal samples moved into the directive form, random directive-form
    mappings (edge tiles, one and two cluster levels), and damaged ones."""
    import dataclasses

    from accelmap.costmodels.aspect import aspect_constraints, aspect_view, directive_form

    arch, problem = preset(arch_name), ASPECT_PROBLEMS[case]()
    rng = np.random.default_rng(21)
    space = MapSpace(problem, arch, aspect_constraints(problem, arch))
    _aspect_agree(problem, arch, space.sample(300, rng), f"{arch_name} {case} sampled")
    legal = directive_form(aspect_view(arch), space.sample_valid(60, rng))
    _aspect_agree(problem, arch, legal, f"{arch_name} {case} legal, directive form")
    rand = aspect_batch(problem, arch, 200, rng)
    _aspect_agree(problem, arch, rand, f"{arch_name} {case} random")
    # the same without capacities: every row's counts compared, not only the legal ones'
    uncapped = dataclasses.replace(arch, levels=tuple(dataclasses.replace(lv, capacity_words=None)
                                                      for lv in arch.levels))
    _aspect_agree(problem, uncapped, rand, f"{arch_name} {case} random, uncapped")
    _aspect_agree(problem, arch, damage(rand, rng), f"{arch_name} {case} damaged")
    _aspect_agree(problem, arch, random_batch(problem, arch, 60, rng), f"{arch_name} {case} any slot")


def _aspect_arch(x: int, y: int, noc: int, off: int, l2_words: int | None, l1_words: int | None, split_l1: bool):
    from accelmap.arch.spec import Arch, Compute, StorageLevel

    l1 = [StorageLevel(name="L1", capacity_words=l1_words, read_energy_pj=1.0, write_energy_pj=1.5)]
    if split_l1:  # the per-PE storage in two levels: MAESTRO's L1 needs spread over both
        l1 = [StorageLevel(name="W", capacity_words=l1_words, read_energy_pj=0.5, write_energy_pj=0.7,
                           holds=frozenset({"weight"})),
              StorageLevel(name="RF", capacity_words=l1_words, read_energy_pj=1.0, write_energy_pj=1.5)]
    return Arch(name="a", levels=(
        StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=off, read_energy_pj=50.0,
                     write_energy_pj=60.0),
        StorageLevel(name="L2", capacity_words=l2_words, read_bandwidth_words_per_cycle=noc, fanout_x=x, fanout_y=y,
                     read_energy_pj=5.0, write_energy_pj=6.0),
        *l1), compute=Compute(energy_per_mac_pj=1.0))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), case=st.sampled_from(sorted(ASPECT_PROBLEMS)),
       shape=st.sampled_from([(1, 1), (1, 4), (4, 1), (2, 3), (4, 4), (8, 2), (16, 16)]),
       noc=st.sampled_from([1, 4, 1000]), off=st.sampled_from([1, 8, 50]),
       caps=st.sampled_from([(None, None), (4000, 300), (600, 40), (10**6, 8)]), split=st.booleans())
def test_aspect_random_arrays_and_mappings(seed, case, shape, noc, off, caps, split) -> None:
    """Random array shapes, bandwidths and capacities (L2 and L1 overflows, MAESTRO's L1 on
    one or two levels), random directive-form mappings."""
    problem = ASPECT_PROBLEMS[case]()
    arch = _aspect_arch(*shape, noc, off, *caps, split)
    rng = np.random.default_rng(seed)
    batch = aspect_batch(problem, arch, 40, rng)
    _aspect_agree(problem, arch, batch, f"{case} on {shape} noc {noc} off {off} caps {caps} split {split}")


def test_aspect_parallel_blocks_and_sizes() -> None:
    """Batches above the threading threshold (every row lands in its own place), and the
    empty batch."""
    arch, problem = _aspect_arch(8, 4, 16, 8, 5000, 200, True), ASPECT_PROBLEMS["conv"]()
    rng = np.random.default_rng(4)
    big = MappingBatch.concat([aspect_batch(problem, arch, 4500, rng),
                               damage(aspect_batch(problem, arch, 300, rng), rng)])
    big = big.take(rng.permutation(len(big)))
    _aspect_agree(problem, arch, big, "4800 rows")
    _aspect_agree(problem, arch, big.take(slice(0, 0)), "empty")


def test_aspect_engine_choice(monkeypatch) -> None:
    from accelmap.costmodels.aspect import AspectModel
    from accelmap.errors import SpecError

    monkeypatch.setenv("ACCELMAP_KERNELS", "numpy")
    assert AspectModel().engine == "numpy"
    assert AspectModel(engine="cpu").engine == "cpu"
    monkeypatch.delenv("ACCELMAP_KERNELS")
    assert AspectModel().engine == "cpu"
    try:  # the cuda engine: built where a GPU is seen, else a clear error naming the extra
        assert AspectModel(engine="cuda").engine == "cuda"
    except SpecError as exc:
        assert "accelmap[cuda]" in str(exc)
    with pytest.raises(SpecError, match="engine argument"):
        AspectModel(engine="gpu")


def test_aspect_unsupported_problem_and_arch() -> None:
    """A problem or arch the model cannot read: every row MODEL on both engines."""
    from accelmap.workloads.builders import batched_matmul

    problem = batched_matmul("bmm", b=2, m=8, n=8, k=8)
    arch = _aspect_arch(2, 2, 4, 4, None, None, False)
    _aspect_agree(problem, arch, random_batch(problem, arch, 20, np.random.default_rng(1)), "batched matmul")
    conv = ASPECT_PROBLEMS["conv"]()
    two_arrays = preset("simba-like")
    _aspect_agree(conv, two_arrays, random_batch(conv, two_arrays, 20, np.random.default_rng(1)), "two fanouts")


@pytest.mark.skipif(not (MAESTRO / "cases.json").exists(), reason=f"MAESTRO reference data not found at {MAESTRO}")
def test_aspect_maestro_reference_cases() -> None:
    """Every MAESTRO reference case with an exact accelmap form: its mapping, and random
    directive-form mappings of the same layer on the same hardware."""
    import dataclasses

    from accelmap.costmodels.maestro_io import read_hardware, read_mapping, to_accelmap
    from accelmap.errors import SpecError

    cases = [c for c in json.loads((MAESTRO / "cases.json").read_text())["cases"] if c["status"] == "ok"]
    rng = np.random.default_rng(6)
    converted = 0
    for case in cases:
        folder = MAESTRO / "cases" / case["case_id"]
        layer = read_mapping(folder / "mapping.m").layers[0]
        hw = dataclasses.replace(read_hardware(folder / "hw.m"), l1_size=None, l2_size=None)
        try:
            problem, arch, mapping = to_accelmap(layer, hw)
        except SpecError:
            continue
        converted += 1
        batch = MappingBatch.concat([mapping.as_batch(), aspect_batch(problem, arch, 8, rng)])
        _aspect_agree(problem, arch, batch, case["case_id"])
    assert converted > 300
