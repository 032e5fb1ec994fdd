"""Searching a systolic array with the ``systolic`` model: sub-spaces, seeds, results."""

from __future__ import annotations

import numpy as np
import pytest

from accelmap.arch.presets import preset, systolic_array
from accelmap.costmodels.systolic import _DEFAULT_AXES, Dataflow, SystolicModel, systolic_layout
from accelmap.costmodels.systolic_variants import scalesim_mapping, systolic_variants, variant_seeds
from accelmap.mapper.constraints import Constraints, KeepRule
from accelmap.mapper.mapping import MappingBatch
from accelmap.mapper.space import MapSpace
from accelmap.search.api import search
from accelmap.workloads.builders import conv2d, matmul, pointwise

LAYERS = {
    "conv3x3": lambda: conv2d("c3", c=64, k=96, p=14, q=14, r=3, s=3, word_bits=8),
    "conv1x1": lambda: pointwise("c1", c=256, k=64, p=14, q=14, word_bits=8),
    "gemm": lambda: matmul("g", m=200, n=96, k=300, word_bits=8),
}
ARRAYS = {"32x32": lambda: systolic_array(32, 32), "16x8": lambda: systolic_array(16, 8)}


def _scalesim_best(problem, arch, key):
    """Best cycles / EDP of SCALE-Sim's own OS, WS and IS mappings."""
    model = SystolicModel()
    m = model.evaluate(problem, arch, MappingBatch.concat([scalesim_mapping(problem, arch, df) for df in Dataflow]))
    assert m.valid.all()
    return float(np.min(m.cycles if key == "cycles" else m.cycles * m.energy_pj))


@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("array", sorted(ARRAYS))
def test_variant_seeds_are_points_of_their_spaces_and_accepted(layer, array):
    problem, arch = LAYERS[layer](), ARRAYS[array]()
    model = SystolicModel()
    variants = systolic_variants(problem, arch)
    assert len(variants) == 6
    assert len({v.label for v in variants}) == 6
    best = np.inf
    for v in variants:
        space = MapSpace(problem, arch, v.constraints)
        seeds = variant_seeds(problem, arch, v)
        x = space.encode(seeds)  # raises when a seed is not a point of the sub-space
        stats = model.stats(problem, arch, space.decode(x))
        assert stats.valid.all()
        assert (stats.dataflow == v.dataflow).all()
        assert (stats.row_class == v.row_class).all() and (stats.col_class == v.col_class).all()
        best = min(best, float(stats.total_cycles.min()))
    assert best <= _scalesim_best(problem, arch, "cycles")


def test_seeds_reproduce_scalesim_where_the_bounds_divide():
    # conv3_1 on 128 x 128: C = 128 fills the rows exactly, 112 of the 784 pixels give
    # SCALE-Sim's 7 column folds, so each default variant's first seed has SCALE-Sim's fold
    # structure and compute cycles. (Not always its DRAM reads: 112-pixel chunks are another
    # demand stream than SCALE-Sim's 128-pixel ones, and the default model walks both; with
    # the preset's finite DRAM bandwidth the stalls differ by that.)
    from accelmap.workloads.zoo import layer

    problem, arch = layer("resnet50/conv3_1"), preset("systolic")
    model = SystolicModel()
    compared = 0
    for v in systolic_variants(problem, arch):
        if (v.row_class, v.col_class) != _DEFAULT_AXES[v.dataflow]:  # SCALE-Sim's own row/column classes
            continue
        ours = model.stats(problem, arch, variant_seeds(problem, arch, v))
        ref = model.stats(problem, arch, scalesim_mapping(problem, arch, v.dataflow))
        assert ours.compute_cycles[0] == ref.compute_cycles[0]
        assert ours.folds[0] == ref.folds[0]
        compared += 1
    assert compared == len(Dataflow)  # one default variant per dataflow


@pytest.mark.parametrize("array", sorted(ARRAYS))
def test_variant_spaces_are_almost_all_accepted(array):
    problem, arch = LAYERS["conv3x3"](), ARRAYS[array]()
    model = SystolicModel()
    rng = np.random.default_rng(0)
    whole = model.evaluate(problem, arch, MapSpace(problem, arch).sample(2000, rng)).valid.mean()
    for v in systolic_variants(problem, arch):
        frac = model.evaluate(problem, arch, MapSpace(problem, arch, v.constraints).sample(1000, rng)).valid.mean()
        assert frac >= 0.85, (v.label, frac)
        assert frac > 5 * whole


@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("array", sorted(ARRAYS))
@pytest.mark.parametrize("objective", ["cycles", "edp"])
def test_search_is_not_worse_than_scalesim(layer, array, objective):
    problem, arch = LAYERS[layer](), ARRAYS[array]()
    r = search(problem, arch, model="systolic", budget=1200, objective=objective, seed=3)
    assert r.best is not None and r.n_evaluations >= 1200
    got = r.best_metrics["cycles"] if objective == "cycles" else r.best_metrics["edp"]
    assert got <= _scalesim_best(problem, arch, objective) * (1 + 1e-12)
    runs = r.config["warm_start_runs"]
    assert sum("variant" in run for run in runs) == 6 and r.config["variant"] == runs[-1]["chosen"]


def test_search_respects_user_constraints_over_the_variants():
    problem, arch = LAYERS["gemm"](), ARRAYS["16x8"]()
    pe = arch.level_names[-1]
    only_ws = Constraints(keep=(KeepRule(level=pe, tensor="B", keep=True), KeepRule(level=pe, tensor="A", keep=False),
                                KeepRule(level=pe, tensor="C", keep=False)))
    r = search(problem, arch, model="systolic", budget=600, objective="cycles", constraints=only_ws)
    stats = SystolicModel().stats(problem, arch, r.best.as_batch())
    assert stats.dataflow[0] == Dataflow.WS


def test_loopnest_search_runs_under_the_systolic_presets_defaults():
    problem, arch = LAYERS["conv3x3"](), preset("systolic")
    r = search(problem, arch, budget=1500, seed=1)
    assert r.best is not None
    keep = r.best.keep
    for lv, role in ((1, "output"), (2, "weight"), (3, "input")):  # each SRAM keeps its operand
        t = [i for i, tt in enumerate(problem.tensors) if tt.role.value == role][0]
        assert keep[lv, t]
    assert "warm_start_runs" not in r.config or r.config["warm_start_runs"] is None


def test_stats_summary_names_the_dataflow():
    problem, arch = LAYERS["gemm"](), ARRAYS["32x32"]()
    s = SystolicModel().stats(problem, arch, scalesim_mapping(problem, arch, "ws"))
    assert s.summary(0).startswith("dataflow WS: rows take k (reduction), columns n (filters)")


@pytest.mark.parametrize("objective", ["edp", "energy,cycles"])
def test_search_ranks_with_the_estimate_and_reports_the_models_counts(objective):
    """The default search ranks with `SystolicModel.for_search` (the estimate beyond the walk
    limits) and re-evaluates what it reports with the model itself: with both walk limits at
    one entry every mapping is beyond them, so the ranking model estimates the ifmap's DRAM
    reads and the reporting model counts them from the guarded sample (here the whole,
    short stream: the walk). The best's metrics and objective, and each Pareto point, equal a
    fresh evaluation by the reporting model, and differ from the estimate the ranking used;
    the config says what was ranked with and keeps the ranked objective."""
    prob = conv2d("c", c=8, k=8, p=12, q=12, r=3, s=3, word_bits=8)
    arch = systolic_array(8, 8, 1, 1, 1, dram_bandwidth_words_per_cycle=2.0)
    kw = {"max_walk_entries": 1, "max_far_walk_entries": 1}
    model = SystolicModel(**kw)
    assert model.for_search() is not model and model.for_search() is model.for_search()
    assert model.for_search().max_sample_entries == 0 and model.max_sample_entries == 1 << 19
    r = search(prob, arch, model=model, budget=600, seed=0, objective=objective)
    assert r.config["ranked_with"] == {"max_sample_entries": 0, "same_as_reported": False}
    best = r.best.as_batch()
    fresh = SystolicModel(**kw).evaluate(prob, arch, best)
    ranked = SystolicModel(max_sample_entries=0, **kw).evaluate(prob, arch, best)
    lay = systolic_layout(prob, arch)[0]
    t_in = lay.tensor[0]  # the ifmap's tensor; level 0 is DRAM
    assert r.best_metrics["energy_pj"] == pytest.approx(float(fresh.energy_pj[0]), rel=1e-12)
    assert r.best_metrics["cycles"] == int(fresh.cycles[0])
    name = prob.tensor_names[t_in]
    assert r.best_metrics["levels"][arch.level_names[0]][name]["reads"] == int(fresh.reads[0, 0, t_in])
    assert int(fresh.reads[0, 0, t_in]) != int(ranked.reads[0, 0, t_in])  # the estimate is off here
    assert r.best_objective == pytest.approx(float(fresh.energy_pj[0] * fresh.cycles[0]), rel=1e-12)
    assert r.config["ranked_best_objective"] == pytest.approx(float(ranked.energy_pj[0] * ranked.cycles[0]),
                                                              rel=1e-12)
    if r.pareto:
        from accelmap.search.result import mapping_from_json

        batch = MappingBatch.from_mappings([mapping_from_json(p["mapping"]) for p in r.pareto])
        m = SystolicModel(**kw).evaluate(prob, arch, batch)
        assert [p["energy_pj"] for p in r.pareto] == pytest.approx(m.energy_pj.tolist(), rel=1e-12)
        assert [p["cycles"] for p in r.pareto] == m.cycles.tolist()


def test_search_ranks_with_what_it_reports_when_asked():
    """``search_sample_entries`` equal to ``max_sample_entries``: the search ranks with the
    model itself (no second model, nothing re-evaluated), and says so."""
    prob = conv2d("c", c=8, k=8, p=12, q=12, r=3, s=3, word_bits=8)
    arch = systolic_array(8, 8, 1, 1, 1, dram_bandwidth_words_per_cycle=2.0)
    model = SystolicModel(search_sample_entries=1 << 19)
    assert model.for_search() is model
    r = search(prob, arch, model=model, budget=300, seed=0)
    assert r.config["ranked_with"] == {"max_sample_entries": 1 << 19, "same_as_reported": True}
    assert "ranked_best_objective" not in r.config
    for mode in ("exact", "estimate"):  # (no sample in those modes: the model itself)
        m = SystolicModel(dram_window=mode)
        assert m.for_search() is m
