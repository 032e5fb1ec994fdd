"""What exact SCALE-Sim DRAM reads cost: the systolic model's closed-form estimate, its
exact mode (the demand-stream walk, `accelmap.costmodels._systolic_window`) and the replay
of SCALE-Sim's address matrices through its prefetch window, on the reference points.

For every SCALE-Sim reference point (`../shared/reference/scalesim`) on which the exact
mode walks a stream (a sliding-window operand larger than the window; elsewhere both modes
are the same closed form), interleaved in one run, medians of 3 repeats:

* the estimate: batched ``stats`` per mapping over a batch of 4,096 copies of SCALE-Sim's
  mapping; the same for ``"auto"`` (the default) with its walk cached;
* the exact mode, cold: one ``stats`` call on SCALE-Sim's mapping with the walk's cache
  cleared (one walk per operand that needs it);
* the replay (`accelmap.costmodels.scalesim_io.replay_dram_reads`);

and the counts of each against SCALE-Sim's, with where the window resets on the ifmap's
stream (how many resets, the words re-fetched, the words live across each reset). Every
other point is listed with its counts
(the exact mode equals SCALE-Sim there too; `tests/golden/test_scalesim.py`).

Then what the exact mode costs and buys in a search (``--search-budget``, default 5,000;
0 skips it): the default search (`accelmap.search.search`, its six systolic sub-spaces)
on CB2a_2 and on the ws config's array, once with the estimate, once with ``"auto"`` (walks
of at most 2^22 entries) and once with the exact mode, same seed and budget (seeds 0 and
1): wall time, walks, and the best mapping of each scored with the exact count
(SCALE-Sim's), so the ranking error of the estimate shows as EDP lost. Then ``"auto"`` on a
pool of random mappings (``pool``: `benchmarks.bench_costmodel`'s pool of CB2a_2 on the
``systolic`` preset, nearly every mapping a new fold shape): evaluations per second cold
(walk cache cleared) and warm, against the estimate.
Last, the estimate and ``"auto"`` against the exact mode on the seeds of every systolic
sub-space of 40 random convolutions (``variant_errors``; ``--variants-only`` runs just this
part). ``--capped-only`` runs only ``capped``: the capped walk (`window_fetches_capped`,
``SystolicModel.CAPPED_WALK_REPS`` passes walked, the rest extrapolated) against the whole
walk on the pool's fold shapes that stream the ifmap over more passes than that (error and
time per shape), and the default search with ``"auto"`` at every fold ratio
(``max_fold_ratio=inf``: every mapping walked whole or capped within ``max_walk_entries``)
against the estimate, the default ``"auto"`` and the exact mode.

``--jump-only`` runs only ``jump``: the walk that counts a unit's repetitions from reset to
reset (`_systolic_window._jump`) against the walk without it, per fold shape on the pool
and in the default search (exact mode, and ``"auto"`` at every fold ratio), interleaved.

``--shapes-only`` runs only ``shapes``: the fold shapes the default search on CB2a_2 and the
pool meet, per class of the ifmap's stream (streamed by rows, by columns, stationary), what
walking each once costs and how far the estimate is from the walk on them (where exactness
on every mapping would spend its time).

``--reuse-model-only`` runs only ``reuse_model``: on the sub-space seeds of the random
convolutions of ``variant_errors`` whose ifmap needs the window, the walk's count against
the best count that averages over where the window resets (`_phase_averaged`, on the exact
stream), by resets a stream, and which seeds ``"auto"`` leaves outside 2 %, by sub-space and
folds over the fewest. ``--pool-only`` runs only ``pool``. ``--results PATH`` names the JSON
the ``--*-only`` parts merge into.

``--frontier-only`` runs only ``frontier`` (written to ``bench_scalesim_dram_window8.json``):
for each setting of ``"auto"``'s walks beyond the fold ratio (``max_far_walk_entries``,
`FRONTIER`) the sub-space seeds of ``variant_errors``' random convolutions against the exact
mode, and what it costs in the default search and on a cold pool. ``--far-search-only`` runs
only ``far_search`` (same JSON): the default search on a few of those convolutions with and
without those walks.

Run by hand from the repo root: ``python benchmarks/bench_scalesim_dram.py``.
Writes ``benchmarks/results/bench_scalesim_dram.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from accelmap.costmodels._systolic_window import (
    SAMPLE_MAX_WALK_FACTOR,
    SAMPLE_MIN_WINDOWS,
    window_fetches,
    window_fetches_sampled,
)
from accelmap.costmodels.scalesim_io import config_arch, read_config, read_topology, replay_dram_reads
from accelmap.costmodels.systolic import SystolicModel, systolic_layout
from accelmap.costmodels.systolic_variants import scalesim_mapping
from accelmap.mapper.mapping import MappingBatch

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / ".." / "shared" / "reference" / "scalesim"
RESULTS = ROOT / "benchmarks" / "results" / "bench_scalesim_dram.json"


def resets(layer: object, cfg: object, window: int) -> dict:
    """Where SCALE-Sim's window resets on the ifmap's demand stream (the replay's stream):
    how many resets, the words re-fetched (fetched - distinct) and the words live across
    each reset (used both before and after it), summed."""
    from accelmap.costmodels.scalesim_io import _demand_streams, _operand_addresses

    ifmap, filt = _operand_addresses(layer)  # type: ignore[arg-type]
    s = _demand_streams(ifmap, filt, cfg.rows, cfg.cols, cfg.dataflow)[0]  # type: ignore[attr-defined]
    s = s[s >= 0]
    uniq, first = np.unique(s, return_index=True)
    _, last_rev = np.unique(s[::-1], return_index=True)
    last = s.shape[0] - 1 - last_rev
    at, start, fetched = [], 0, 0
    while start < s.shape[0]:
        span = 1 << 16
        while True:
            u, f = np.unique(s[start:start + span], return_index=True)
            if u.shape[0] >= window:
                f.sort()
                fetched += window
                start += int(f[window - 1]) + 1
                at.append(start)
                break
            if start + span >= s.shape[0]:
                fetched += int(u.shape[0])
                start = s.shape[0]
                break
            span *= 2
    live = [int(((first < x) & (last >= x)).sum()) for x in at]
    return {"entries": int(s.shape[0]), "resets": len(at), "distinct": int(uniq.shape[0]),
            "refetched": fetched - int(uniq.shape[0]), "live_at_resets": live, "live_sum": sum(live)}


def search_cost(ref: Path, budget: int, seeds: tuple[int, ...] = (0, 1)) -> list[dict]:
    """The default search on CB2a_2 with the estimate and with the exact mode (see above),
    one row per seed."""
    from accelmap.search.api import search

    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    arch = config_arch(cfg)
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    exact = SystolicModel(dram_window="exact")
    for mode in ("estimate", "auto"):  # imports and compiled code warm before any timing
        search(layer.problem, arch, model=SystolicModel(dram_window=mode), budget=500, seed=99)
    rows = []
    for seed in seeds:
        out: dict = {"layer": layer.name, "config": cfg.run_name, "budget": budget, "seed": seed}
        best = {}
        for mode in ("estimate", "auto", "exact"):  # interleaved per seed
            window_fetches.cache_clear()
            t0 = time.perf_counter()
            res = search(layer.problem, arch, model=SystolicModel(dram_window=mode), budget=budget, seed=seed)
            dt = time.perf_counter() - t0
            walks = window_fetches.cache_info().misses
            assert res.best is not None
            m = exact.evaluate(layer.problem, arch, res.best.as_batch())
            best[mode] = float(m.cycles[0] * m.energy_pj[0])
            own = SystolicModel(dram_window=mode).stats(layer.problem, arch, res.best.as_batch()).report(0)
            true = exact.stats(layer.problem, arch, res.best.as_batch()).report(0)
            out[mode] = {"seconds": dt, "evaluations": res.n_evaluations, "walks": walks,
                         "best_edp_own_count": float(res.best_objective), "best_edp_exact_count": best[mode],
                         "best_dataflow": true["dataflow"], "best_folds": true["folds"],
                         "best_dram_reads_own_count": own["dram_reads"], "best_dram_reads_exact": true["dram_reads"]}
            print(f"search seed {seed} {mode}: {dt:.1f} s, {res.n_evaluations:,} evaluations, {walks} walks, "
                  f"best EDP (exact count) {best[mode]:.4e}", flush=True)
        out["exact_over_estimate_time"] = out["exact"]["seconds"] / out["estimate"]["seconds"]
        out["auto_over_estimate_time"] = out["auto"]["seconds"] / out["estimate"]["seconds"]
        out["estimate_best_edp_over_exact_best"] = best["estimate"] / best["exact"]
        out["auto_best_edp_over_exact_best"] = best["auto"] / best["exact"]
        rows.append(out)
    return rows


def search_timing(ref: Path, budget: int, seeds: tuple[int, ...] = (0, 1, 2), repeats: int = 5) -> dict:
    """The default search on CB2a_2 (as `search_cost`) with the estimate and with ``"auto"``
    only, ``repeats`` interleaved runs per seed (the walk cache cleared before each
    ``"auto"`` run, so every run pays its walks): median seconds per seed and mode."""
    from accelmap.search.api import search

    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    arch = config_arch(cfg)
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    for mode in ("estimate", "auto"):  # warm
        search(layer.problem, arch, model=SystolicModel(dram_window=mode), budget=500, seed=99)
    load0 = list(os.getloadavg())
    out: dict = {"layer": layer.name, "config": cfg.run_name, "budget": budget, "repeats": repeats, "seeds": {}}
    for seed in seeds:
        times: dict[str, list[float]] = {"estimate": [], "auto": []}
        for _ in range(repeats):
            for mode in times:
                window_fetches.cache_clear()
                t0 = time.perf_counter()
                search(layer.problem, arch, model=SystolicModel(dram_window=mode), budget=budget, seed=seed)
                times[mode].append(time.perf_counter() - t0)
        med = {m: statistics.median(t) for m, t in times.items()}
        out["seeds"][seed] = {"median_s": med, "all_s": times, "auto_over_estimate": med["auto"] / med["estimate"]}
        print(f"search timing seed {seed}: estimate {med['estimate']:.3f} s, auto {med['auto']:.3f} s "
              f"({med['auto'] / med['estimate']:.2f}x)", flush=True)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


def pool_cost(n: int = 20000, seed: int = 0) -> dict:
    """``"auto"`` against the estimate on random mappings (see the module docstring)."""
    import sys

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    from accelmap.arch.presets import preset
    from accelmap.workloads.builders import conv2d

    arch = preset("systolic")
    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, arch, n, np.random.default_rng(seed))
    est, auto = SystolicModel(dram_window="estimate"), SystolicModel(dram_window="auto")
    est.evaluate(problem, arch, pool)  # compiled
    window_fetches.cache_clear()
    t0 = time.perf_counter()
    s = auto.stats(problem, arch, pool)
    cold = time.perf_counter() - t0
    walks = window_fetches.cache_info().misses
    t_est, t_warm = [], []
    for _ in range(3):  # interleaved
        t0 = time.perf_counter()
        est.evaluate(problem, arch, pool)
        t_est.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        auto.evaluate(problem, arch, pool)
        t_warm.append(time.perf_counter() - t0)
    walked = float((s.dram_reads[:, 0] != est.stats(problem, arch, pool).dram_reads[:, 0]).mean())
    out = {"layer": problem.name, "arch": arch.name, "mappings": n, "rows_changed_by_walks": walked, "walks": walks,
           "estimate_evals_per_s": n / statistics.median(t_est), "auto_cold_evals_per_s": n / cold,
           "auto_warm_evals_per_s": n / statistics.median(t_warm)}
    print(f"pool of {n}: {100 * walked:.1f} % of rows changed by a walk ({walks} walks); estimate "
          f"{out['estimate_evals_per_s']:.3g}/s, auto cold {out['auto_cold_evals_per_s']:.3g}/s, "
          f"warm {out['auto_warm_evals_per_s']:.3g}/s", flush=True)
    return out


def random_convolutions(rng: np.random.Generator, n_layers: int):  # noqa: ANN201
    """The random convolutions of `variant_errors` (the layer mix of
    `test_sliding_window_estimate_accuracy`): ``n_layers`` draws of (problem, systolic array),
    the draws whose window does not fit the stride skipped."""
    from accelmap.arch.presets import systolic_array
    from accelmap.workloads.builders import conv2d

    for _ in range(n_layers):
        h = int(rng.integers(8, 40))
        f = min(int(rng.choice([1, 3, 3, 5, 7])), h)
        st, ch, nf = int(rng.choice([1, 1, 2])), int(rng.choice([3, 8, 16, 32, 64])), int(rng.choice([8, 16, 32, 64]))
        rows, cols, kb = int(rng.choice([8, 16, 32])), int(rng.choice([8, 16, 32])), int(rng.choice([1, 2, 4, 8]))
        if (h - f) % st:
            continue
        p = (h - f) // st + 1
        prob = conv2d("c", c=ch, k=nf, p=p, q=p, r=f, s=f, stride=st, word_bits=8)
        arch = systolic_array(rows, cols, kb, kb, kb, dram_bandwidth_words_per_cycle=None)
        yield prob, arch


def variant_errors(n_layers: int = 40, seed: int = 0) -> dict:
    """The estimate against the exact mode on the seeds of every systolic sub-space
    (`variant_seeds`) of random convolutions (the layer mix of
    `test_sliding_window_estimate_accuracy`): median and worst relative error of the
    ifmap's DRAM reads per sub-space."""
    from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds

    rng = np.random.default_rng(seed)
    est, exact = SystolicModel(dram_window="estimate"), SystolicModel(dram_window="exact")
    auto = SystolicModel(dram_window="auto")
    errors: dict[str, list[float]] = {}
    auto_errors: dict[str, list[float]] = {}
    for prob, arch in random_convolutions(rng, n_layers):
        for v in systolic_variants(prob, arch):
            seeds = variant_seeds(prob, arch, v)
            want = exact.stats(prob, arch, seeds).dram_reads[:, 0]
            got = est.stats(prob, arch, seeds).dram_reads[:, 0]
            errors.setdefault(v.label, []).extend((got / want - 1).tolist())
            got = auto.stats(prob, arch, seeds).dram_reads[:, 0]
            auto_errors.setdefault(v.label, []).extend((got / want - 1).tolist())
    out = {}
    for label, e in sorted(errors.items()):
        a = np.abs(np.array(e))
        b = np.abs(np.array(auto_errors[label]))
        out[label] = {"mappings": int(a.size), "median_abs_error": float(np.median(a)),
                      "worst_abs_error": float(a.max()), "within_2pct": float((a <= 0.02).mean()),
                      "auto": {"median_abs_error": float(np.median(b)), "worst_abs_error": float(b.max()),
                               "within_2pct": float((b <= 0.02).mean()), "exact": float((b == 0).mean())}}
        print(f"{label:18} {a.size:4} mappings: median {100 * np.median(a):.1f} %, worst {100 * a.max():.1f} %, "
              f"within 2 % {100 * (a <= 0.02).mean():.0f} %; auto: median {100 * np.median(b):.1f} %, worst "
              f"{100 * b.max():.1f} %, within 2 % {100 * (b <= 0.02).mean():.0f} %, exact {100 * (b == 0).mean():.0f} %",
              flush=True)
    return out


def capped_cost(ref: Path, budget: int, n_shapes: int = 120, seeds: tuple[int, ...] = (0, 1)) -> dict:
    """The capped walk against the whole walk (see the module docstring)."""
    import sys

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    from accelmap.arch.presets import preset
    from accelmap.costmodels import systolic as sy
    from accelmap.costmodels import systolic_dram as sd
    from accelmap.search.api import search
    from accelmap.workloads.builders import conv2d

    arch = preset("systolic")
    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, arch, 20000, np.random.default_rng(0))
    lay = sy.systolic_layout(problem, arch)[0]
    st = SystolicModel(dram_window="estimate").stats(problem, arch, pool)
    passes = sy._passes(0, np.maximum(st.row_class, 0), np.maximum(st.col_class, 0), st.row_folds, st.col_folds)
    cap = SystolicModel.CAPPED_WALK_REPS
    key = np.concatenate([np.stack([st.row_class, st.col_class, st.rows_used, st.cols_used], axis=1),
                          pool.order[:, lay.array_level]], axis=1)
    rows = np.flatnonzero(st.valid & (passes > cap))
    _, first = np.unique(key[rows], axis=0, return_index=True)
    pick = rows[np.sort(first)][:n_shapes]
    errors, t_whole, t_capped, per_pass = [], [], [], []
    for i in pick:
        args = (problem, lay, 0, int(st.row_class[i]), int(st.col_class[i]), int(st.rows_used[i]),
                int(st.cols_used[i]), [int(d) for d in pool.order[i, lay.array_level]])
        window_fetches.cache_clear()
        t0 = time.perf_counter()
        whole = sy._window_exact(*args)
        t_whole.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        capped = sy._window_exact(*args, walk_reps=cap)
        t_capped.append(time.perf_counter() - t0)
        errors.append(capped / whole - 1)
        per_pass.append(int(st.sram_reads[i, 0]) // int(passes[i]))
    e = np.abs(np.array(errors))
    out: dict = {"layer": problem.name, "arch": arch.name, "shapes": int(pick.size), "cap": cap,
                 "max_abs_error": float(e.max()), "median_abs_error": float(np.median(e)),
                 "exact_fraction": float((e == 0).mean()), "within_2pct": float((e <= 0.02).mean()),
                 "whole_s_total": float(sum(t_whole)), "capped_s_total": float(sum(t_capped)),
                 "whole_over_capped_median": float(statistics.median(w / c for w, c in zip(t_whole, t_capped,
                                                                                           strict=True))),
                 "pass_entries_median": float(statistics.median(per_pass))}
    print(f"capped walk on {pick.size} pool shapes: max error {100 * e.max():.2f} %, median "
          f"{100 * np.median(e):.3f} %, exact {100 * out['exact_fraction']:.0f} %; whole {sum(t_whole):.1f} s, "
          f"capped {sum(t_capped):.1f} s", flush=True)
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    sarch = config_arch(cfg)
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    exact = SystolicModel(dram_window="exact")
    models = {"estimate": SystolicModel(dram_window="estimate"), "auto": SystolicModel(),
              "auto_every_ratio": SystolicModel(max_fold_ratio=float("inf")), "exact": exact}
    for m in models.values():  # warm
        if m is not exact:
            search(layer.problem, sarch, model=m, budget=500, seed=99)
    out["search"] = []
    load0 = list(os.getloadavg())
    for seed in seeds:
        row: dict = {"seed": seed, "budget": budget}
        for name, m in models.items():  # interleaved per seed
            window_fetches.cache_clear()
            sd.window_fetches_capped.cache_clear()
            t0 = time.perf_counter()
            res = search(layer.problem, sarch, model=m, budget=budget, seed=seed)
            dt = time.perf_counter() - t0
            walks = (window_fetches.cache_info().misses, sd.window_fetches_capped.cache_info().misses)
            assert res.best is not None
            true = exact.evaluate(layer.problem, sarch, res.best.as_batch())
            own = m.stats(layer.problem, sarch, res.best.as_batch()).dram_reads[0, 0]
            row[name] = {"seconds": dt, "walks": walks[0], "capped_walks": walks[1],
                         "best_edp_exact_count": float(true.cycles[0] * true.energy_pj[0]),
                         "best_ifmap_dram_own": int(own),
                         "best_ifmap_dram_exact": int(exact.stats(layer.problem, sarch,
                                                                  res.best.as_batch()).dram_reads[0, 0])}
            print(f"search seed {seed} {name}: {dt:.2f} s, {row[name]['walks']} walks, "
                  f"{row[name]['capped_walks']} capped, best EDP (exact count) "
                  f"{row[name]['best_edp_exact_count']:.4e}", flush=True)
        out["search"].append(row)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


def jump_cost(ref: Path, budget: int, seeds: tuple[int, ...] = (0, 1), n_shapes: int = 120) -> dict:
    """The walk counting a unit's repetitions from reset to reset (`_systolic_window._jump`)
    against the walk without it (``JUMP_MIN_REPS`` out of reach; the period skips, the gap
    check and the capped walk as before), interleaved: per fold shape on the pool's ifmap
    shapes streamed over more than ``JUMP_MIN_REPS`` passes (whole walks, walk cache
    cleared; counts must be equal), and the default search on CB2a_2 in the exact mode
    (every fold shape walked) and with ``"auto"`` at every fold ratio."""
    import sys

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    from accelmap.arch.presets import preset
    from accelmap.costmodels import _systolic_window as sw
    from accelmap.costmodels import systolic as sy
    from accelmap.search.api import search
    from accelmap.workloads.builders import conv2d

    on_min = sw.JUMP_MIN_REPS

    def jump(on: bool) -> None:
        sw.JUMP_MIN_REPS = on_min if on else 1 << 62  # read when a walk sizes its scratch
        window_fetches.cache_clear()
        sw.window_fetches_capped.cache_clear()

    load0 = list(os.getloadavg())
    arch = preset("systolic")
    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, arch, 20000, np.random.default_rng(0))
    lay = sy.systolic_layout(problem, arch)[0]
    st = SystolicModel(dram_window="estimate").stats(problem, arch, pool)
    passes = sy._passes(0, np.maximum(st.row_class, 0), np.maximum(st.col_class, 0), st.row_folds, st.col_folds)
    key = np.concatenate([np.stack([st.row_class, st.col_class, st.rows_used, st.cols_used], axis=1),
                          pool.order[:, lay.array_level]], axis=1)
    rows = np.flatnonzero(st.valid & (passes > on_min))
    _, first = np.unique(key[rows], axis=0, return_index=True)
    pick = rows[np.sort(first)][:n_shapes]
    t_on, t_off, equal = [], [], 0
    try:
        for i in pick:
            args = (problem, lay, 0, int(st.row_class[i]), int(st.col_class[i]), int(st.rows_used[i]),
                    int(st.cols_used[i]), [int(d) for d in pool.order[i, lay.array_level]])
            got = {}
            for on in (True, False):  # interleaved per shape
                jump(on)
                t0 = time.perf_counter()
                got[on] = sy._window_exact(*args)
                (t_on if on else t_off).append(time.perf_counter() - t0)
            equal += got[True] == got[False]
        ratios = [b / a for a, b in zip(t_on, t_off, strict=True)]
        out: dict = {"pool_shapes": {"layer": problem.name, "arch": arch.name, "shapes": int(pick.size),
                                     "equal_counts": equal, "jump_s_total": float(sum(t_on)),
                                     "no_jump_s_total": float(sum(t_off)),
                                     "speedup_median": float(statistics.median(ratios)),
                                     "speedup_min": float(min(ratios)), "speedup_max": float(max(ratios)),
                                     "jump_s_median": float(statistics.median(t_on)),
                                     "no_jump_s_median": float(statistics.median(t_off))}}
        print(f"jump on {pick.size} pool shapes: {equal} equal; {sum(t_on):.2f} s against {sum(t_off):.2f} s "
              f"without, median {out['pool_shapes']['speedup_median']:.1f}x per shape", flush=True)
        cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
        sarch = config_arch(cfg)
        layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
        # a new model per search: a model keeps the walked counts of the shapes it has met
        models = {"estimate": lambda: SystolicModel(dram_window="estimate"), "auto": SystolicModel,
                  "auto_every_ratio": lambda: SystolicModel(max_fold_ratio=float("inf")),
                  "exact": lambda: SystolicModel(dram_window="exact")}
        for name in ("estimate", "auto"):  # warm
            search(layer.problem, sarch, model=models[name](), budget=500, seed=99)
        out["search"] = []
        for seed in seeds:
            row: dict = {"seed": seed, "budget": budget}
            for name, make in models.items():  # interleaved per seed
                for on in ((True,) if name in ("estimate", "auto") else (True, False)):
                    jump(on)
                    m = make()
                    t0 = time.perf_counter()
                    res = search(layer.problem, sarch, model=m, budget=budget, seed=seed)
                    dt = time.perf_counter() - t0
                    assert res.best is not None
                    tag = name if name in ("estimate", "auto") else f"{name}_{'jump' if on else 'no_jump'}"
                    row[tag] = {"seconds": dt, "walks": window_fetches.cache_info().misses,
                                "capped_walks": sw.window_fetches_capped.cache_info().misses,
                                "best_objective": float(res.best_objective)}
                    print(f"search seed {seed} {tag}: {dt:.2f} s, {row[tag]['walks']} walks, "
                          f"{row[tag]['capped_walks']} capped, best {res.best_objective:.4e}", flush=True)
            out["search"].append(row)
    finally:
        jump(True)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


def shapes_cost(ref: Path, budget: int, seeds: tuple[int, ...] = (0, 1), n_pool: int = 20000) -> dict:
    """Where exactness on every mapping would spend its time: the rows a default search on
    CB2a_2 evaluates (seeds 0 and 1, the estimate, every batch recorded) and a pool of random
    mappings (``pool``), each valid row's ifmap stream classed by how it meets the array
    (``rows``: streamed, indexed by the row class, a unit re-read once per column fold;
    ``cols``: streamed by the column class; ``stationary``: one pass). Per class: rows,
    distinct fold shapes (row class, column class, chunks, array-level order), walks (after
    `_window_exact`'s keying), their cold time (walk cache cleared once, then every shape
    walked once, in row order), the distinct units (the fold shape without the chunk that
    only sets the repetitions), and the estimate's error against the walk, overall and by
    folds over the fewest the array allows."""
    import sys

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    from accelmap.arch.presets import preset
    from accelmap.costmodels import _systolic_window as sw
    from accelmap.costmodels import systolic as sy
    from accelmap.search.api import search
    from accelmap.workloads.builders import conv2d

    class Recording(SystolicModel):
        """The estimate, keeping every batch a search sends."""

        def __init__(self) -> None:
            super().__init__(dram_window="estimate")
            self.batches: list[MappingBatch] = []

        def evaluate(self, problem, arch, mappings):  # type: ignore[no-untyped-def]
            self.batches.append(mappings)
            return super().evaluate(problem, arch, mappings)

        def evaluate_objective(self, problem, arch, mappings):  # type: ignore[no-untyped-def]
            self.batches.append(mappings)
            return super().evaluate_objective(problem, arch, mappings)

    def analyse(problem, arch, batches: list[MappingBatch], seconds: float) -> dict:  # type: ignore[no-untyped-def]
        lay = sy.systolic_layout(problem, arch)[0]
        est = SystolicModel(dram_window="estimate", engine="numpy")
        size = lay.class_size
        mine = (sy._M, sy._K)  # the ifmap's classes
        rows = []  # per batch: (mode per row, rc, cc, ur, uc, order, estimate, fold ratio) of its valid rows
        for b in batches:
            st = est.stats(problem, arch, b)
            v = np.flatnonzero(st.valid)
            rc, cc = st.row_class[v], st.col_class[v]
            mode = np.where(np.isin(rc, mine) & np.isin(cc, mine), 2, np.where(np.isin(rc, mine), 0, 1))
            fewest = -(-np.array(size)[rc] // lay.rows) * -(-np.array(size)[cc] // lay.cols)
            rows.append((mode, rc, cc, st.rows_used[v], st.cols_used[v], b.order[v, lay.array_level],
                         st.dram_reads[v, 0], st.folds[v] / fewest))
        names = ("rows", "cols", "stationary")
        timed: dict[bool, dict[str, float]] = {}
        walks: dict[bool, dict[str, int]] = {}
        counts: dict[bool, list[np.ndarray]] = {}
        keep = sw.UNIT_CACHE_BYTES
        try:
            for tables in (True, False):  # the exact mode's numpy path (`_walked_reads`), cold, with and without
                sw.UNIT_CACHE_BYTES = keep if tables else 0
                window_fetches.cache_clear()  # (the unit tables too)
                timed[tables] = dict.fromkeys(names, 0.0)
                walks[tables] = dict.fromkeys(names, 0)
                counts[tables] = []
                for mode, rc, cc, ur, uc, order, _e, _r in rows:
                    got = np.zeros(mode.size, dtype=np.int64)
                    for k, name in enumerate(names):
                        sel = np.flatnonzero(mode == k)
                        if not sel.size:
                            continue
                        m0 = window_fetches.cache_info().misses
                        t0 = time.perf_counter()
                        got[sel] = sy._walked_reads(problem, lay, 0, rc[sel], cc[sel], ur[sel], uc[sel], order[sel],
                                                    np.full(sel.size, sy.WALK_ALL))
                        timed[tables][name] += time.perf_counter() - t0
                        walks[tables][name] += window_fetches.cache_info().misses - m0
                    counts[tables].append(got)
        finally:
            sw.UNIT_CACHE_BYTES = keep
        assert all((x == y).all() for x, y in zip(counts[True], counts[False], strict=True))
        out: dict = {"rows": int(sum(r[0].size for r in rows)), "estimate_s": seconds, "modes": {}}
        for k, name in enumerate(names):
            sel = [r[0] == k for r in rows]
            n = int(sum(x.sum() for x in sel))
            if not n:
                continue
            err = np.concatenate([np.abs(r[6][x] / c[x] - 1) for r, x, c in zip(rows, sel, counts[True], strict=True)])
            ratio = np.concatenate([r[7][x] for r, x in zip(rows, sel, strict=True)])
            shapes = {(int(a), int(b_), int(c), int(d), *map(int, e)) for r, x in zip(rows, sel, strict=True)
                      for a, b_, c, d, e in zip(r[1][x], r[2][x], r[3][x], r[4][x], r[5][x], strict=True)}
            units = {(s_[0], s_[1], s_[2] if k != 1 else 0, s_[3] if k != 0 else 0, *s_[4:]) for s_ in shapes}
            out["modes"][name] = {
                "rows": n, "fold_shapes": len(shapes), "units": len(units), "walks": walks[True][name],
                "walk_s": timed[True][name], "walk_s_without_unit_tables": timed[False][name],
                "ms_per_walk": 1e3 * timed[True][name] / max(walks[True][name], 1),
                "estimate_within_2pct": float((err <= 0.02).mean()), "estimate_median_error": float(np.median(err)),
                "estimate_worst_error": float(err.max()), "fold_ratio_median": float(np.median(ratio)),
                "estimate_within_2pct_at_fold_ratio": {
                    str(q): (float((err[ratio <= q] <= 0.02).mean()) if (ratio <= q).any() else None)
                    for q in (1.25, 2, 4, 16)},
            }
            print(f"  {name:10} {n:6} rows, {len(shapes):5} shapes, {len(units):5} units, "
                  f"{walks[True][name]:5} walks, {timed[True][name]:.2f} s ({timed[False][name]:.2f} s without "
                  f"unit tables); estimate within 2 % on {100 * (err <= 0.02).mean():.0f} % (median "
                  f"{100 * np.median(err):.1f} %, worst {100 * err.max():.0f} %)", flush=True)
        for tables in (True, False):
            key = "walk_s" if tables else "walk_s_without_unit_tables"
            out[key] = sum(timed[tables].values())
            out["exact_over_estimate" + ("" if tables else "_without_unit_tables")] = (seconds + out[key]) / seconds
        print(f"  {out['rows']} rows: walks {out['walk_s']:.2f} s ({out['walk_s_without_unit_tables']:.2f} s "
              f"without unit tables) against the estimate's {seconds:.3f} s ({out['exact_over_estimate']:.0f}x, "
              f"{out['exact_over_estimate_without_unit_tables']:.0f}x)", flush=True)
        return out

    load0 = list(os.getloadavg())
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    sarch = config_arch(cfg)
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    search(layer.problem, sarch, model=Recording(), budget=budget, seed=99)  # warm, compiled
    out: dict = {"search": []}
    for seed in seeds:
        m = Recording()
        t0 = time.perf_counter()
        search(layer.problem, sarch, model=m, budget=budget, seed=seed)
        dt = time.perf_counter() - t0
        print(f"search seed {seed} ({budget} evaluations, {len(m.batches)} batches):", flush=True)
        out["search"].append({"seed": seed, "budget": budget} | analyse(layer.problem, sarch, m.batches, dt))
    arch = preset("systolic")
    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, arch, n_pool, np.random.default_rng(0))
    est = SystolicModel(dram_window="estimate")
    est.evaluate(problem, arch, pool)
    t_est = []
    for _ in range(3):
        t0 = time.perf_counter()
        est.evaluate(problem, arch, pool)
        t_est.append(time.perf_counter() - t0)
    print(f"pool of {n_pool}:", flush=True)
    out["pool"] = {"mappings": n_pool} | analyse(problem, arch, [pool], statistics.median(t_est))
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


def _stream_entries(a_off, b_off, mode: int, s_r: int, s_c: int, ur: int, uc: int, t_len: int,  # type: ignore[no-untyped-def]
                    out):
    """The demand stream's addresses in order (as `_systolic_window` walks them: column folds
    outer, row folds inner; skewed folds along anti-diagonals, stationary ones bottom row
    first) into ``out``; returns the entries."""
    n = 0
    for y0 in range(0, s_c, uc):
        for x0 in range(0, s_r, ur):
            nx, ny = min(ur, s_r - x0), min(uc, s_c - y0)
            if mode == 2:
                for a in range(x0 + nx - 1, x0 - 1, -1):
                    for b in range(y0, y0 + ny):
                        out[n] = a_off[a] + b_off[b]
                        n += 1
                continue
            base, m = (x0, nx) if mode == 0 else (y0, ny)
            for d in range(t_len + m - 1):
                for c in range(max(0, d - t_len + 1), min(d, m - 1) + 1):
                    out[n] = a_off[base + c] + b_off[d - c]
                    n += 1
    return n


def _phase_averaged(stream, n: int, stamp, window: int, last, cum):  # type: ignore[no-untyped-def]
    """(SCALE-Sim's count, the phase-averaged count) of one stream: the window walked word
    by word, and the count with every reset's phase averaged out (a reuse misses with
    probability ``min(1, X / W)``, ``X`` the expected fetches since the word's previous use,
    self-consistently: one pass over the cumulative expected fetches)."""
    epoch, count, exact = 1, 0, 0
    for i in range(last.shape[0]):
        last[i] = -1
    cum[0] = 0.0
    for i in range(n):
        a = stream[i]
        m = 0.0
        if stamp[a] >= 0:
            if stamp[a] != epoch:
                stamp[a] = epoch
                exact += 1
                count += 1
                if count == window:
                    epoch += 1
                    count = 0
            p = last[a]
            m = 1.0 if p < 0 else min(1.0, (cum[i] - cum[p + 1]) / window)
            last[a] = i
        cum[i + 1] = cum[i] + m
    return exact, cum[n]


def reuse_model_errors(n_layers: int = 40, seed: int = 0, max_entries: int = 3_000_000) -> dict:
    """How close any estimate that averages over where the window resets can come: on the
    seeds of every systolic sub-space of `variant_errors`' random convolutions whose ifmap
    has im2col duplicates and exceeds the window (streams of at most ``max_entries``), its
    count by SCALE-Sim's window against the best such model, the phase-averaged count on the
    exact stream (`_phase_averaged`: it knows every reuse, so a closed form of the reuse
    structure could at best equal it), and against the estimate, by resets a stream
    (fetches over the window). Then which seeds ``"auto"`` leaves outside 2 %: per sub-space
    and folds over the fewest, and by resets."""
    from numba import njit

    from accelmap.arch.presets import systolic_array
    from accelmap.costmodels import _systolic_window as sw
    from accelmap.costmodels import systolic as sy
    from accelmap.costmodels import systolic_dram as sd
    from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds
    from accelmap.workloads.builders import conv2d

    entries, averaged = njit(_stream_entries), njit(_phase_averaged)
    rng = np.random.default_rng(seed)
    est, auto = SystolicModel(dram_window="estimate"), SystolicModel(dram_window="auto")
    rows: list[dict] = []
    found: list[tuple] = []
    real = sd.window_fetches

    def record(*a):  # type: ignore[no-untyped-def]
        found.append(a)
        return 0

    for _ in range(n_layers):
        h = int(rng.integers(8, 40))
        f = min(int(rng.choice([1, 3, 3, 5, 7])), h)
        st, ch, nf = int(rng.choice([1, 1, 2])), int(rng.choice([3, 8, 16, 32, 64])), int(rng.choice([8, 16, 32, 64]))
        r_, c_, kb = int(rng.choice([8, 16, 32])), int(rng.choice([8, 16, 32])), int(rng.choice([1, 2, 4, 8]))
        if (h - f) % st:
            continue
        p = (h - f) // st + 1
        prob = conv2d("c", c=ch, k=nf, p=p, q=p, r=f, s=f, stride=st, word_bits=8)
        arch = systolic_array(r_, c_, kb, kb, kb, dram_bandwidth_words_per_cycle=None)
        lay = sy.systolic_layout(prob, arch)[0]
        size = np.array(lay.class_size)
        if not sy._walkable(prob, lay, 0):
            continue  # (no duplicates, or the ifmap fits the window: the closed form, exact in every mode)
        for v in systolic_variants(prob, arch):
            seeds = variant_seeds(prob, arch, v)
            e = est.stats(prob, arch, seeds)
            a_rows = auto.stats(prob, arch, seeds).dram_reads[:, 0]
            fewest = -(-size[e.row_class] // r_) * -(-size[e.col_class] // c_)
            for i in np.flatnonzero(e.valid).tolist():
                found.clear()
                sd.window_fetches = record
                try:
                    sy._walked_reads(prob, lay, 0, e.row_class[i:i + 1], e.col_class[i:i + 1], e.rows_used[i:i + 1],
                                     e.cols_used[i:i + 1], seeds.order[i:i + 1, lay.array_level],
                                     np.array([sy.WALK_ALL]))
                finally:
                    sd.window_fetches = real
                if not found:
                    continue  # (no window needed: the closed form, exact in every mode)
                static, (mode, rc, cc, ur, uc, window) = found[0][:8], found[0][8:14]
                a_off, b_off, stamp, sz = sw._stream_arrays(*static)
                tc = 3 - rc - cc
                n_all = (sz[rc] * sz[cc] if mode == sw.STATIONARY else
                         sz[rc] * sz[tc] * -(-sz[cc] // uc) if mode == sw.ROWS_TIME else sz[cc] * sz[tc] * -(-sz[rc] // ur))
                if n_all > max_entries:
                    continue
                buf = np.empty(n_all, dtype=np.int64)
                n = entries(a_off, b_off, mode, sz[rc], sz[cc], ur, uc, sz[tc], buf)
                exact, model = averaged(buf, n, stamp.astype(np.int64), window, np.empty(stamp.shape[0], np.int64),
                                        np.empty(n + 1))
                want = int(real(*found[0]))
                assert exact == want, (mode, exact, want, found[0][8:])
                rows.append({"sub_space": v.label, "fold_ratio": float(e.folds[i] / fewest[i]),
                             "resets": exact / window, "exact": exact, "phase_averaged": model,
                             "estimate": int(e.dram_reads[i, 0]) / lay.class_size[3],
                             "auto": int(a_rows[i]) / lay.class_size[3]})

    def summary(sel: list[dict], key: str) -> dict:
        err = np.array([r[key] / r["exact"] - 1 for r in sel])
        a = np.abs(err)
        return {"within_2pct": float((a <= 0.02).mean()), "median_abs_error": float(np.median(a)),
                "worst_abs_error": float(a.max()), "signed_error_quantiles_10_50_90": np.quantile(err, [0.1, 0.5, 0.9]).tolist()}

    out: dict = {"streams": len(rows), "by_resets": {}, "auto_by_sub_space_and_fold_ratio": {}}
    for lo, hi in ((0, 4), (4, 16), (16, 64), (64, None)):
        sel = [r for r in rows if r["resets"] >= lo and (hi is None or r["resets"] < hi)]
        label = f"{lo}-{hi}" if hi else f">={lo}"
        out["by_resets"][label] = {"streams": len(sel), "phase_averaged": summary(sel, "phase_averaged"),
                                   "estimate": summary(sel, "estimate"), "auto": summary(sel, "auto")}
        b = out["by_resets"][label]
        print(f"resets {label:6}: {len(sel):4} streams; within 2 %: phase-averaged {100 * b['phase_averaged']['within_2pct']:.0f} % "
              f"(worst {100 * b['phase_averaged']['worst_abs_error']:.0f} %), estimate {100 * b['estimate']['within_2pct']:.0f} % "
              f"(median signed {100 * b['estimate']['signed_error_quantiles_10_50_90'][1]:+.1f} %), auto "
              f"{100 * b['auto']['within_2pct']:.0f} %", flush=True)
    for label in sorted({r["sub_space"] for r in rows}):
        for lo, hi in ((0, 1.25), (1.25, 2), (2, 4), (4, None)):
            sel = [r for r in rows if r["sub_space"] == label and r["fold_ratio"] > lo
                   and (hi is None or r["fold_ratio"] <= hi)]
            if not sel:
                continue
            key = f"{label}, folds {lo}-{hi}" if hi else f"{label}, folds >{lo}"
            miss = [r for r in sel if abs(r["auto"] / r["exact"] - 1) > 0.02]
            out["auto_by_sub_space_and_fold_ratio"][key] = {
                "streams": len(sel), "auto": summary(sel, "auto"),
                "misses_median_resets": float(np.median([r["resets"] for r in miss])) if miss else None}
            print(f"  {key:34} {len(sel):4}: auto within 2 % {100 * out['auto_by_sub_space_and_fold_ratio'][key]['auto']['within_2pct']:.0f} %",
                  flush=True)
    return out


# `frontier`'s settings of ``"auto"``: (label, max_fold_ratio, max_walk_entries, max_far_walk_entries)
FRONTIER = (("near only", 1.25, 1 << 22, 0), ("far 2^18", 1.25, 1 << 22, 1 << 18),
            ("far 2^19", 1.25, 1 << 22, 1 << 19), ("far 2^20", 1.25, 1 << 22, 1 << 20),
            ("far 2^21", 1.25, 1 << 22, 1 << 21), ("far 2^22", 1.25, 1 << 22, 1 << 22),
            ("far 2^23", 1.25, 1 << 22, 1 << 23))
# ... those whose cost `frontier` measures
FRONTIER_COSTS = ("near only", "far 2^20", "far 2^21", "far 2^23")
# ``--window9-only``: the default (far 2^20, no sample) against streams beyond the limits counted
# from a walked sample (`window_fetches_sampled`): (label, ratio, limit, far, sample entries)
FRONTIER9 = (("near only", 1.25, 1 << 22, 0, 0), ("default", 1.25, 1 << 22, 1 << 20, 0),
             ("sample 2^18", 1.25, 1 << 22, 1 << 20, 1 << 18), ("sample 2^19", 1.25, 1 << 22, 1 << 20, 1 << 19),
             ("sample 2^20", 1.25, 1 << 22, 1 << 20, 1 << 20), ("far 2^23", 1.25, 1 << 22, 1 << 23, 0))
FRONTIER9_COSTS = ("default", "sample 2^19", "sample 2^20")
# ``--window10-only``: the same settings once the sample's rate is guarded (`window_fetches_sampled`:
# a rate measured on fewer than `SAMPLE_MIN_WINDOWS` windows' worth of words gives way to the walk)
FRONTIER10 = (("near only", 1.25, 1 << 22, 0, 0), ("default", 1.25, 1 << 22, 1 << 20, 0),
              ("sample 2^18", 1.25, 1 << 22, 1 << 20, 1 << 18), ("sample 2^19", 1.25, 1 << 22, 1 << 20, 1 << 19),
              ("sample 2^20", 1.25, 1 << 22, 1 << 20, 1 << 20))
FRONTIER10_COSTS = ("default", "sample 2^19", "sample 2^20")


def frontier(ref: Path, budget: int, n_layers: int = 40, seed: int = 0, seeds: tuple[int, ...] = (0, 1, 2),
             pool_rows: int = 5000, costs: bool = True, settings: tuple = FRONTIER,
             cost_labels: tuple[str, ...] = FRONTIER_COSTS) -> dict:
    """What each setting of ``"auto"`` in `FRONTIER` buys and costs (`FRONTIER_COSTS`): on the seeds of every
    systolic sub-space of `variant_errors`' random convolutions the ifmap DRAM reads against
    the exact mode (mappings within 2 %, exact, worst error, per sub-space and over all);
    then (``costs``), interleaved with the estimate, a new model each run and the walk
    cache cleared (every run pays its walks), the default search (``budget`` evaluations,
    ``seeds``) on CB2a_2 on the ws config's array and on the random convolution with the
    most seeds outside 2 % without walks beyond the fold ratio, and the first and second
    evaluation of a random pool of ``pool_rows`` CB2a_2 mappings (`pool_cost`'s). ``settings``
    (`FRONTIER` or `FRONTIER9`, whose fifth entry is ``max_sample_entries``) and
    ``cost_labels`` (those of them whose cost is measured) name the settings."""
    import sys

    from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds
    from accelmap.search.api import search

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    from accelmap.arch.presets import preset
    from accelmap.workloads.builders import conv2d

    load0 = list(os.getloadavg())
    exact = SystolicModel(dram_window="exact")
    kw = {x[0]: {"max_fold_ratio": x[1], "max_walk_entries": x[2], "max_far_walk_entries": x[3],
                 "max_sample_entries": x[4] if len(x) > 4 else 0} for x in settings}
    errs: dict[str, dict[str, list[float]]] = {label: {} for label in kw}
    worst_layer, worst_misses = None, -1
    for prob, arch in random_convolutions(np.random.default_rng(seed), n_layers):
        misses = 0
        for v in systolic_variants(prob, arch):
            s = variant_seeds(prob, arch, v)
            want = exact.stats(prob, arch, s).dram_reads[:, 0]
            for label, k in kw.items():
                got = SystolicModel(**k).stats(prob, arch, s).dram_reads[:, 0]
                errs[label].setdefault(v.label, []).extend((got / want - 1).tolist())
                if label == "near only":
                    misses += int((np.abs(got / want - 1) > 0.02).sum())
        if misses > worst_misses:
            worst_layer, worst_misses = (prob, arch), misses
    out: dict = {"settings": [list(x) for x in settings], "accuracy": {}, "search": {}, "pool": {}}
    for label, per in errs.items():
        acc = {}
        for sub, e in sorted(per.items()) + [("all", [x for v in per.values() for x in v])]:
            a = np.abs(np.array(e))
            acc[sub] = {"mappings": int(a.size), "within_2pct": int((a <= 0.02).sum()), "exact": int((a == 0).sum()),
                        "worst_abs_error": float(a.max())}
        out["accuracy"][label] = acc
        print(f"{label:12}: within 2 % {acc['all']['within_2pct']} / {acc['all']['mappings']}, exact "
              f"{acc['all']['exact']}, worst {100 * acc['all']['worst_abs_error']:.1f} %; outside 2 % by sub-space: "
              + ", ".join(f"{sub} {v['mappings'] - v['within_2pct']}" for sub, v in acc.items() if sub != "all"),
              flush=True)
    if not costs:
        return out
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    assert worst_layer is not None
    cases = {"CB2a_2": (layer.problem, config_arch(cfg)), "random": worst_layer}
    out["random_layer"] = {"bounds": worst_layer[0].bounds.tolist(), "misses_near_only": worst_misses}
    every = {"estimate": {"dram_window": "estimate"}} | {k: kw[k] for k in cost_labels}
    for name, (prob, arch) in cases.items():
        for k in every.values():  # warm (compiled code)
            search(prob, arch, model=SystolicModel(**k), budget=300, seed=99)
        out["search"][name] = {}
        for sd in seeds:
            row = {}
            for label, k in every.items():  # interleaved; a new model: its walk table empty
                window_fetches.cache_clear()
                t0 = time.perf_counter()
                search(prob, arch, model=SystolicModel(**k), budget=budget, seed=sd)
                row[label] = {"s": time.perf_counter() - t0, "walks": window_fetches.cache_info().misses,
                              "samples": window_fetches_sampled.cache_info().misses}
            out["search"][name][sd] = row
            print(f"search {name} seed {sd}: " + ", ".join(f"{k} {v['s']:.2f} s ({v['walks']})" for k, v in row.items()),
                  flush=True)
    pa = preset("systolic")
    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, pa, pool_rows, np.random.default_rng(seed))
    SystolicModel(dram_window="estimate").evaluate(problem, pa, pool)
    for label, k in every.items():
        m = SystolicModel(**k)
        window_fetches.cache_clear()
        t0 = time.perf_counter()
        m.evaluate(problem, pa, pool)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        m.evaluate(problem, pa, pool)
        warm = time.perf_counter() - t0
        out["pool"][label] = {"rows": pool_rows, "cold_s": cold, "warm_s": warm,
                              "walks": window_fetches.cache_info().misses,
                              "samples": window_fetches_sampled.cache_info().misses}
        print(f"pool {label:12}: cold {cold:.2f} s ({out['pool'][label]['walks']} walks), warm {warm * 1e3:.1f} ms",
              flush=True)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out



def far_search_cost(budget: int, layers: tuple[tuple[int, ...], ...] = ((1, 64, 64, 32, 32, 3, 3),
                                                                       (1, 16, 64, 30, 30, 3, 3),
                                                                       (1, 32, 64, 34, 34, 5, 5),
                                                                       (1, 8, 16, 4, 4, 7, 7)),
                    seeds: tuple[int, ...] = (0, 1, 2), n_layers: int = 40, seed: int = 0,
                    kw: dict | None = None, base: str = "near only") -> dict:
    """The default search (``budget`` evaluations, ``seeds``) on some of `variant_errors`'
    random convolutions (by bounds: the mid-size layers whose seeds `"auto"` left outside
    2 %, and the small one of `frontier`) with the estimate, ``"auto"`` without walks beyond
    the fold ratio and the default ``"auto"``: interleaved, a new model and cleared walk
    caches each run; median seconds and the walks of each run. ``kw``: other settings by
    label (the default's ratio to ``base``, one of them, is reported)."""
    from accelmap.search.api import search

    load0 = list(os.getloadavg())
    if kw is None:
        kw = {"estimate": {"dram_window": "estimate"}, "near only": {"max_far_walk_entries": 0}, "default": {}}
    out: dict = {"budget": budget, "layers": {}}
    for prob, arch in random_convolutions(np.random.default_rng(seed), n_layers):
        key = tuple(int(b) for b in prob.bounds)
        if key not in layers or str(key) in out["layers"]:
            continue
        for k in kw.values():  # warm (compiled code)
            search(prob, arch, model=SystolicModel(**k), budget=300, seed=99)
        runs: dict[str, list] = {label: [] for label in kw}
        for sd in seeds:
            for label, k in kw.items():
                window_fetches.cache_clear()
                t0 = time.perf_counter()
                search(prob, arch, model=SystolicModel(**k), budget=budget, seed=sd)
                runs[label].append([time.perf_counter() - t0, window_fetches.cache_info().misses,
                                    window_fetches_sampled.cache_info().misses])
        med = {label: statistics.median(r[0] for r in v) for label, v in runs.items()}
        out["layers"][str(key)] = {"arch": [arch.levels[0].name, *(lv.name for lv in arch.levels[1:])],
                                   "runs": runs, "median_s": med,
                                   "over_" + base.replace(" ", "_"): {k: m / med[base] for k, m in med.items()}}
        print(f"{key}: " + ", ".join(f"{label} {m:.2f} s ({m / med[base]:.2f}x)" for label, m in med.items()),
              flush=True)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out

def sampled_shapes(ref: Path, budget: int, n_shapes: int = 60, seed: int = 0,
                   samples: tuple[int, ...] = (1 << 19, 1 << 20)) -> dict:
    """The walked sample (`window_fetches_sampled`) against the walk on the streams the default
    search on CB2a_2 (the ws config's array, ``budget`` evaluations, seed ``seed``) counts
    from a sample: ``n_shapes`` of them drawn at random, per stream mode, each sample size's
    error and time against the walk's (cold)."""
    from accelmap.costmodels import systolic_dram as sd
    from accelmap.search.api import search

    load0 = list(os.getloadavg())
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    calls: list[tuple] = []
    real = sd.window_fetches_sampled

    def record(*a):  # type: ignore[no-untyped-def]
        calls.append(a[:-1])
        return real(*a)

    sd.window_fetches_sampled = record
    try:
        search(layer.problem, config_arch(cfg), model=SystolicModel(max_sample_entries=samples[0]), budget=budget,
               seed=seed)
    finally:
        sd.window_fetches_sampled = real
    shapes = sorted(set(calls), key=str)
    pick = np.random.default_rng(seed).choice(len(shapes), min(n_shapes, len(shapes)), replace=False)
    rows = []
    for i in pick.tolist():
        a = shapes[i]
        window_fetches.cache_clear()
        t0 = time.perf_counter()
        want = window_fetches(*a)
        row = {"mode": int(a[8]), "exact": int(want), "walk_s": time.perf_counter() - t0}
        for b in samples:
            t0 = time.perf_counter()
            got = window_fetches_sampled(*a, b)
            row[f"sample {b}"] = {"error": got / want - 1, "s": time.perf_counter() - t0}
        rows.append(row)
    out: dict = {"shapes_sampled_in_search": len(shapes), "measured": len(rows), "by_sample": {}}
    for b in samples:
        for mode in (None, 0, 1, 2):
            sel = [r for r in rows if mode is None or r["mode"] == mode]
            if not sel:
                continue
            e = np.abs([r[f"sample {b}"]["error"] for r in sel])
            out["by_sample"][f"{b} mode {'all' if mode is None else mode}"] = {
                "shapes": len(sel), "within_2pct": int((e <= 0.02).sum()), "worst_abs_error": float(e.max()),
                "median_abs_error": float(np.median(e)),
                "median_s": float(np.median([r[f"sample {b}"]["s"] for r in sel])),
                "walk_median_s": float(np.median([r["walk_s"] for r in sel]))}
            v = out["by_sample"][f"{b} mode {'all' if mode is None else mode}"]
            print(f"sample {b} mode {mode}: {v['within_2pct']}/{v['shapes']} within 2 %, worst "
                  f"{100 * v['worst_abs_error']:.1f} %, {1e3 * v['median_s']:.2f} ms (walk {1e3 * v['walk_median_s']:.2f} ms)",
                  flush=True)
    out["rows"] = rows
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


def fill_cost(ref: Path, budget: int, n_shapes: int = 30, seed: int = 0, repeats: int = 7) -> dict:
    """`_systolic_window._fill_unit` (a unit's addresses, the first step of a walk counted
    from reset to reset) against the one loop over every diagonal it replaced (`_fill_plain`,
    here), interleaved, min of ``repeats``, on the ``ROWS_TIME`` passes of the streams the
    default search on CB2a_2 (ws config's array, ``budget`` evaluations, seed ``seed``) counts
    from a sample: ``n_shapes`` distinct (row class, row chunk, order) drawn at random; the
    same addresses asserted."""
    from accelmap.costmodels import _systolic_window as sw
    from accelmap.costmodels import systolic_dram as sd
    from accelmap.search.api import search

    load0 = list(os.getloadavg())
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    calls: list[tuple] = []
    real = sd.window_fetches_sampled

    def record(*a):  # type: ignore[no-untyped-def]
        calls.append(a[:-1])
        return real(*a)

    sd.window_fetches_sampled = record
    try:
        search(layer.problem, config_arch(cfg), model=SystolicModel(max_sample_entries=1 << 20),
               budget=budget // 5, seed=seed)
    finally:
        sd.window_fetches_sampled = real
    units = {}
    for a in calls:
        if a[8] == sw.ROWS_TIME:
            units.setdefault((a[9], a[11], a[6]), a)
    keys = sorted(units, key=str)
    pick = np.random.default_rng(seed).choice(len(keys), min(n_shapes, len(keys)), replace=False)
    rows = []
    for i in pick.tolist():
        a = units[keys[i]]
        coef, used, dc, bounds, lo, hi, order, classes, mode, rc, cc, ur, uc, window = a
        a_off, b_off, stamp, size = sw._stream_arrays(coef, used, dc, bounds, lo, hi, order, classes)
        t_len = size[3 - rc - cc]
        n = size[rc] * t_len
        new, old = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
        every = bool((stamp >= 0).all())
        t_new, t_old = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sw._fill_unit(a_off, b_off, stamp, sw.ROWS_TIME, size[rc], 1, ur, 1, t_len, 0, new, every)
            t_new.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _fill_plain(a_off, b_off, stamp, size[rc], ur, t_len, old)
            t_old.append(time.perf_counter() - t0)
        assert np.array_equal(new, old)
        rows.append({"row_class": int(rc), "row_chunk": int(ur), "entries": int(n), "fill_s": min(t_new),
                     "plain_s": min(t_old)})
    ratio = [r["plain_s"] / r["fill_s"] for r in rows]
    out = {"units": len(rows), "median_fill_ms": 1e3 * float(np.median([r["fill_s"] for r in rows])),
           "median_plain_ms": 1e3 * float(np.median([r["plain_s"] for r in rows])),
           "speedup_quantiles_0_50_100": np.quantile(ratio, [0, 0.5, 1]).tolist(), "rows": rows,
           "load_average": [load0, list(os.getloadavg())]}
    print(f"fill: {len(rows)} CB2a_2 passes, median {out['median_fill_ms']:.2f} ms against "
          f"{out['median_plain_ms']:.2f} ms, {np.median(ratio):.1f}x (min {min(ratio):.1f}x, max {max(ratio):.1f}x)",
          flush=True)
    return out


def _fill_plain(a_off, b_off, stamp, s_r: int, ur: int, t_len: int, out):  # type: ignore[no-untyped-def]
    return _fill_plain_jit(a_off, b_off, stamp, s_r, ur, t_len, out)


def _fill_plain_kernel(a_off, b_off, stamp, s_r, ur, t_len, out):  # type: ignore[no-untyped-def]
    """`_systolic_window._fill_unit` for a ``ROWS_TIME`` pass as it was before window10: one
    loop over every diagonal of every fold, each entry's word looked up."""
    n = 0
    for f in range((s_r + ur - 1) // ur):
        x0 = f * ur
        nx = min(ur, s_r - x0)
        for d in range(t_len + nx - 1):
            for c in range(max(0, d - t_len + 1), min(d, nx - 1) + 1):
                addr = a_off[x0 + c] + b_off[d - c]
                out[n] = addr if stamp[addr] >= 0 else -1
                n += 1
    return n


def _fill_plain_jit(*a):  # type: ignore[no-untyped-def]
    global _FILL_PLAIN
    if _FILL_PLAIN is None:
        from numba import njit

        _FILL_PLAIN = njit(cache=False)(_fill_plain_kernel)
    return _FILL_PLAIN(*a)


_FILL_PLAIN = None


def sampled_rows(ref: Path, budget: int, n_rows: int = 60, seed: int = 0,
                 samples: tuple[int, ...] = (1 << 19, 1 << 20)) -> dict:
    """The estimate and the walked samples against the walk on the rows of the default search
    on CB2a_2 (the ws config's array, ``budget`` evaluations, seed ``seed``, recorded under
    the estimate) that a sample would count (the default ``"auto"`` estimates them):
    ``n_rows`` of them with distinct fold shapes and orders, drawn at random; the ifmap's
    DRAM reads of each."""
    from accelmap.costmodels import systolic as sy
    from accelmap.search.api import search

    class Recording(SystolicModel):
        """The estimate, keeping every batch a search sends."""

        def __init__(self) -> None:
            super().__init__(dram_window="estimate")
            self.batches: list[MappingBatch] = []

        def evaluate(self, problem, arch, mappings):  # type: ignore[no-untyped-def]
            self.batches.append(mappings)
            return super().evaluate(problem, arch, mappings)

        def evaluate_objective(self, problem, arch, mappings):  # type: ignore[no-untyped-def]
            self.batches.append(mappings)
            return super().evaluate_objective(problem, arch, mappings)

    load0 = list(os.getloadavg())
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    prob, arch = layer.problem, config_arch(cfg)
    rec = Recording()
    search(prob, arch, model=rec, budget=budget, seed=seed)
    batch = MappingBatch.concat(rec.batches)
    lay = sy.systolic_layout(prob, arch)[0]
    e = SystolicModel(dram_window="estimate").stats(prob, arch, batch)
    size = np.array(lay.class_size[:3])
    fewest = -(-size[e.row_class] // lay.rows) * -(-size[e.col_class] // lay.cols)
    passes = sy._passes(0, e.row_class, e.col_class, e.row_folds, e.col_folds)
    rule = (SystolicModel.MAX_WALK_ENTRIES, SystolicModel.MAX_FOLD_RATIO, SystolicModel.MAX_FAR_WALK_ENTRIES, 1)
    codes = sy._walk_rows(e.valid, e.sram_reads[:, 0], e.row_folds * e.col_folds, fewest, lay.class_size[3], rule,
                          passes)
    cand = np.flatnonzero(codes < 0)
    key = np.concatenate([np.stack([e.row_class, e.col_class, e.rows_used, e.cols_used], axis=1),
                          batch.order[:, lay.array_level]], axis=1)[cand]
    _, first = np.unique(key, axis=0, return_index=True)
    cand = cand[first]
    pick = np.sort(np.random.default_rng(seed).choice(cand, min(n_rows, cand.size), replace=False))
    sub = batch.take(pick)
    window_fetches.cache_clear()
    t0 = time.perf_counter()
    want = SystolicModel(dram_window="exact").stats(prob, arch, sub).dram_reads[:, 0]
    walk_s = time.perf_counter() - t0
    got = {"estimate": e.dram_reads[pick, 0]}
    times = {}
    for b in samples:
        window_fetches.cache_clear()
        t0 = time.perf_counter()
        got[f"sample {b}"] = SystolicModel(max_sample_entries=b).stats(prob, arch, sub).dram_reads[:, 0]
        times[f"sample {b}"] = time.perf_counter() - t0
    out: dict = {"rows_recorded": len(batch), "rows_sampled": int((codes < 0).sum()),
                 "distinct_sampled_shapes": int(first.size), "measured": int(pick.size), "walk_s": walk_s,
                 "sample_s": times, "by_count": {}}
    for label, g in got.items():
        err = g / want - 1
        a = np.abs(err)
        out["by_count"][label] = {"within_2pct": int((a <= 0.02).sum()), "median_abs_error": float(np.median(a)),
                                  "worst_abs_error": float(a.max()),
                                  "signed_error_quantiles_10_50_90": np.quantile(err, [0.1, 0.5, 0.9]).tolist()}
        v = out["by_count"][label]
        print(f"CB2a_2 rows counted from a sample, {label}: {v['within_2pct']}/{pick.size} within 2 %, median "
              f"{100 * v['median_abs_error']:.1f} %, worst {100 * v['worst_abs_error']:.1f} %", flush=True)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


def scratch_ab(ref: Path, budget: int, seeds: tuple[int, ...] = (0, 1, 2), rounds: int = 3) -> dict:
    """The guarded sample's (``max_sample_entries=2^19``) default CB2a_2 search (``budget``
    evaluations) with the walks' scratch kept between walks (`_systolic_window._ScratchPool`)
    and allocated per walk (``SCRATCH_KEEP_ENTRIES = 0``, as before), alternated in one
    process, a new model and cleared walk caches each run: seconds per run and medians."""
    from accelmap.costmodels import _systolic_window as sw
    from accelmap.search.api import search

    load0 = list(os.getloadavg())
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    prob, arch = layer.problem, config_arch(cfg)
    search(prob, arch, model=SystolicModel(max_sample_entries=1 << 19), budget=300, seed=99)  # (compiled code)
    keep = sw.SCRATCH_KEEP_ENTRIES
    runs: dict = {"kept": {sd: [] for sd in seeds}, "per walk": {sd: [] for sd in seeds}}
    try:
        for _ in range(rounds):
            for sd in seeds:
                for label, k in (("per walk", 0), ("kept", keep)):
                    sw.SCRATCH_KEEP_ENTRIES = k
                    sw._SCRATCH.clear()
                    window_fetches.cache_clear()
                    t0 = time.perf_counter()
                    search(prob, arch, model=SystolicModel(max_sample_entries=1 << 19), budget=budget, seed=sd)
                    runs[label][sd].append(time.perf_counter() - t0)
    finally:
        sw.SCRATCH_KEEP_ENTRIES = keep
    out: dict = {"budget": budget, "runs": runs, "median_s": {}, "ratio_per_walk_over_kept": {}}
    for sd in seeds:
        a, b = float(np.median(runs["per walk"][sd])), float(np.median(runs["kept"][sd]))
        out["median_s"][sd] = {"per walk": a, "kept": b}
        out["ratio_per_walk_over_kept"][sd] = a / b
        print(f"CB2a_2 seed {sd}, sample 2^19: scratch per walk {a:.2f} s, kept {b:.2f} s ({a / b:.2f}x)", flush=True)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


def window11_cost(ref: Path, budget: int, seeds: tuple[int, ...] = (0, 1, 2), pool_rows: int = 5000) -> dict:
    """What the guarded sample (``max_sample_entries=2^19``, which walks CB2a_2's far streams)
    costs against the default (no sample), with the code on the path: the default search
    (``budget`` evaluations, ``seeds``) on CB2a_2 on the ws config's array, interleaved, a new
    model and cleared caches each run (seconds, walks, the best objective found), a cold pool
    of ``pool_rows`` CB2a_2 mappings on the ``systolic`` preset, and the mid-size random
    convolutions' searches (`far_search_cost`). Run once per version of the walk
    (``--window11-only --label``), alternating, to compare versions on one load."""
    import sys

    from accelmap.search.api import search

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    from accelmap.arch.presets import preset
    from accelmap.workloads.builders import conv2d

    load0 = list(os.getloadavg())
    kw = {"estimate": {"dram_window": "estimate"}, "default": {}, "sample 2^19": {"max_sample_entries": 1 << 19}}
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    prob, arch = layer.problem, config_arch(cfg)
    for k in kw.values():  # warm (compiled code)
        search(prob, arch, model=SystolicModel(**k), budget=300, seed=99)
    out: dict = {"budget": budget, "search": {}, "pool": {}}
    for sd in seeds:
        row = {}
        for label, k in kw.items():
            window_fetches.cache_clear()
            t0 = time.perf_counter()
            res = search(prob, arch, model=SystolicModel(**k), budget=budget, seed=sd)
            row[label] = {"s": time.perf_counter() - t0, "walks": window_fetches.cache_info().misses,
                          "best": float(res.best_objective)}
        row["sample_over_default"] = row["sample 2^19"]["s"] / row["default"]["s"]
        out["search"][sd] = row
        print(f"search CB2a_2 seed {sd}: " + ", ".join(f"{k} {v['s']:.2f} s ({v['walks']})" for k, v in row.items()
                                                        if isinstance(v, dict))
              + f"; sample / default {row['sample_over_default']:.1f}x", flush=True)
    pa = preset("systolic")
    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, pa, pool_rows, np.random.default_rng(0))
    SystolicModel(dram_window="estimate").evaluate(problem, pa, pool)
    for label, k in kw.items():
        m = SystolicModel(**k)
        window_fetches.cache_clear()
        t0 = time.perf_counter()
        m.evaluate(problem, pa, pool)
        out["pool"][label] = {"rows": pool_rows, "cold_s": time.perf_counter() - t0,
                              "walks": window_fetches.cache_info().misses}
        print(f"pool {label:12}: cold {out['pool'][label]['cold_s']:.2f} s", flush=True)
    out["far_search"] = far_search_cost(budget, kw=kw, base="default")
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


# ``--flip16-only``: the model's settings compared (label: constructor keywords).
FLIP16 = {"old default": {"max_sample_entries": 0},  # ranks and reports with the estimate
          "new default": {},  # ranks with the estimate, reports the guarded sample
          "within-2% ranking": {"search_sample_entries": 1 << 19}}  # ranks and reports the sample


def flip16_cost(ref: Path, budget: int, seeds: tuple[int, ...] = (0, 1, 2), pool_rows: int = 5000,
                cli_rounds: int = 3, accuracy: bool = True) -> dict:
    """The reporting default (a guarded sample of 2^19 entries; searches rank with the
    estimate, `SystolicModel.for_search`, and re-evaluate what they report) against the old
    default (the estimate throughout) and ranking within 2 % (``search_sample_entries=2^19``),
    interleaved, a new model and cleared caches each run: the default search (``budget``
    evaluations, ``seeds``) on CB2a_2 on the ws config's array (seconds, walks and samples,
    the reported best objective and the best's ifmap DRAM reads against the exact mode's),
    the mid-size random convolutions' searches (`far_search_cost`), ``accelmap search
    resnet50/conv3_1 --arch systolic --model systolic`` in a fresh process (``cli_rounds``
    rounds, old against new default), a cold ``evaluate`` of ``pool_rows`` random CB2a_2
    mappings, and (``accuracy``) the new default and the estimate against the exact mode on
    the sub-space seeds of `variant_errors`' 40 random convolutions."""
    import subprocess
    import sys

    from accelmap.search.api import search

    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_costmodel import _systolic_pool

    from accelmap.arch.presets import preset
    from accelmap.workloads.builders import conv2d

    def clear() -> None:
        window_fetches.cache_clear()
        window_fetches_sampled.cache_clear()

    load0 = list(os.getloadavg())
    out: dict = {"budget": budget, "settings": {k: {n: int(v) for n, v in kw.items()} for k, kw in FLIP16.items()},
                 "search": {}, "pool": {}, "cli": {}}
    exact = SystolicModel(dram_window="exact")
    cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
    layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
    prob, arch = layer.problem, config_arch(cfg)
    for k in FLIP16.values():  # warm (compiled code)
        search(prob, arch, model=SystolicModel(**k), budget=300, seed=99)
    for sd in seeds:
        row: dict = {"load": list(os.getloadavg())}
        for label, k in FLIP16.items():
            clear()
            t0 = time.perf_counter()
            res = search(prob, arch, model=SystolicModel(**k), budget=budget, seed=sd)
            dt = time.perf_counter() - t0
            assert res.best is not None
            want = int(exact.stats(prob, arch, res.best.as_batch()).dram_reads[0, 0])
            t_in = systolic_layout(prob, arch)[0].tensor[0]  # (the ifmap's tensor; level 0 is DRAM)
            got = res.best_metrics["levels"][arch.level_names[0]][prob.tensor_names[t_in]]["reads"]
            row[label] = {"s": dt, "walks": window_fetches.cache_info().misses,
                          "samples": window_fetches_sampled.cache_info().misses,
                          "best_reported": float(res.best_objective),
                          "best_ranked": float(res.config.get("ranked_best_objective", res.best_objective)),
                          "best_ifmap_dram_reads_reported": int(got), "best_ifmap_dram_reads_exact": want}
        for label in FLIP16:
            row[label]["over_old_default"] = row[label]["s"] / row["old default"]["s"]
        out["search"][sd] = row
        print(f"search CB2a_2 seed {sd} (load {row['load'][0]:.2f}): "
              + ", ".join(f"{k} {row[k]['s']:.2f} s ({row[k]['over_old_default']:.2f}x)" for k in FLIP16), flush=True)
    out["search_median_s"] = {k: statistics.median(r[k]["s"] for r in out["search"].values()) for k in FLIP16}
    out["far_search"] = far_search_cost(budget, kw=FLIP16, base="old default")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    cmd = [sys.executable, "-m", "accelmap.cli", "search", "resnet50/conv3_1", "--arch", "systolic", "--model",
           "systolic", "--budget", str(budget), "--no-progress", "--seed", "0"]
    cli: dict[str, list[float]] = {"old default": [], "new default": []}
    with __import__("tempfile").TemporaryDirectory() as tmp:
        for _ in range(cli_rounds):
            for label, extra in (("old default", ["--model-option", "max_sample_entries=0"]), ("new default", [])):
                t0 = time.perf_counter()
                subprocess.run([*cmd, *extra, "--out", str(Path(tmp) / label.replace(" ", "_"))], env=env,
                               check=True, capture_output=True)
                cli[label].append(time.perf_counter() - t0)
    out["cli"] = {"command": "accelmap " + " ".join(cmd[3:]), "runs_s": cli,
                  "median_s": {k: statistics.median(v) for k, v in cli.items()}, "load": list(os.getloadavg())}
    out["cli"]["new_over_old"] = out["cli"]["median_s"]["new default"] / out["cli"]["median_s"]["old default"]
    print("CLI: " + ", ".join(f"{k} {v:.2f} s" for k, v in out["cli"]["median_s"].items()), flush=True)
    pa = preset("systolic")
    problem = conv2d("CB2a_2", c=64, k=64, p=54, q=54, r=3, s=3, word_bits=8)
    pool = _systolic_pool(problem, pa, pool_rows, np.random.default_rng(0))
    SystolicModel(dram_window="estimate").evaluate(problem, pa, pool)
    for label in ("old default", "new default"):
        m = SystolicModel(**FLIP16[label])
        clear()
        t0 = time.perf_counter()
        m.evaluate(problem, pa, pool)
        out["pool"][label] = {"rows": pool_rows, "cold_s": time.perf_counter() - t0,
                              "walks": window_fetches.cache_info().misses,
                              "samples": window_fetches_sampled.cache_info().misses, "load": list(os.getloadavg())}
        print(f"pool {label:12}: cold {out['pool'][label]['cold_s']:.2f} s", flush=True)
    if accuracy:
        from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds

        errs: dict[str, list[float]] = {"old default": [], "new default": []}
        for p, a in random_convolutions(np.random.default_rng(0), 40):
            for v in systolic_variants(p, a):
                seeds_v = variant_seeds(p, a, v)
                want_v = exact.stats(p, a, seeds_v).dram_reads[:, 0]
                for label in errs:
                    got_v = SystolicModel(**FLIP16[label]).stats(p, a, seeds_v).dram_reads[:, 0]
                    errs[label].extend((got_v / want_v - 1).tolist())
        out["accuracy"] = {}
        for label, e in errs.items():
            ab = np.abs(np.array(e))
            out["accuracy"][label] = {"mappings": int(ab.size), "within_2pct": int((ab <= 0.02).sum()),
                                      "exact": int((ab == 0).sum()), "worst_abs_error": float(ab.max())}
            print(f"accuracy {label}: {out['accuracy'][label]}", flush=True)
    out["load_average"] = [load0, list(os.getloadavg())]
    return out


_AB_SEARCH = """
import json, os, sys, time
from pathlib import Path
from accelmap.costmodels._systolic_window import window_fetches
from accelmap.costmodels.scalesim_io import config_arch, read_config, read_topology
from accelmap.costmodels.systolic import SystolicModel
from accelmap.search.api import search
ref = Path(sys.argv[1])
cfg = read_config(ref / "configs" / "resnet50u_128x128_ws.cfg")
layer = next(x for x in read_topology(ref / "topologies" / "Resnet50_unique.csv") if x.name == "CB2a_2")
kw = {"max_sample_entries": 1 << 19}
if hasattr(SystolicModel, "for_search"):  # (rank with the sample, as an older tree's model does)
    kw["search_sample_entries"] = 1 << 19
search(layer.problem, config_arch(cfg), model=SystolicModel(**kw), budget=300, seed=99)
window_fetches.cache_clear()
t0 = time.perf_counter()
r = search(layer.problem, config_arch(cfg), model=SystolicModel(**kw), budget=int(sys.argv[3]), seed=int(sys.argv[2]))
print(json.dumps({"s": time.perf_counter() - t0, "best": r.best_objective, "load": os.getloadavg()[0]}))
"""


def sample_search_ab(ref: Path, other_src: Path, budget: int, seeds: tuple[int, ...] = (0, 1, 2),
                     rounds: int = 2) -> dict:
    """The CB2a_2 search ranking with the guarded sample (2^19), this tree against the
    sources at ``other_src``, each run in a fresh process (walk caches empty), alternated
    per seed and round: seconds and the best objective of each run, medians per tree."""
    import subprocess
    import sys

    runs: dict[str, list] = {"other": [], "this": []}
    for _ in range(rounds):
        for sd in seeds:
            for label, src in (("other", other_src), ("this", ROOT / "src")):
                env = dict(os.environ, PYTHONPATH=str(src))
                res = subprocess.run([sys.executable, "-c", _AB_SEARCH, str(ref), str(sd), str(budget)], env=env,
                                     check=True, capture_output=True, text=True)
                row = json.loads(res.stdout.strip().splitlines()[-1]) | {"seed": sd}
                runs[label].append(row)
                print(f"{label} seed {sd}: {row['s']:.2f} s (load {row['load']:.2f})", flush=True)
    med = {k: statistics.median(r["s"] for r in v) for k, v in runs.items()}
    return {"other_src": str(other_src), "budget": budget, "runs": runs, "median_s": med,
            "other_over_this": med["other"] / med["this"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--search-budget", type=int, default=5000)
    ap.add_argument("--variants-only", action="store_true",
                    help="only the per-sub-space estimate errors, merged into the existing JSON")
    ap.add_argument("--search-timing-only", action="store_true",
                    help="only the repeated estimate / auto search timing, merged into the existing JSON")
    ap.add_argument("--reference", type=Path, default=REF, help="SCALE-Sim reference folder (runs.json, configs/, "
                    "topologies/); default ../shared/reference/scalesim beside the checkout")
    ap.add_argument("--capped-only", action="store_true",
                    help="only the capped walk against the whole walk, merged into the existing JSON")
    ap.add_argument("--jump-only", action="store_true",
                    help="only the walk from reset to reset against the walk without it, merged into the existing JSON")
    ap.add_argument("--shapes-only", action="store_true",
                    help="only the fold shapes a search and a pool meet per stream class, merged into the existing JSON")
    ap.add_argument("--reuse-model-only", action="store_true",
                    help="only the phase-averaged count against SCALE-Sim's on random convolutions, and which "
                    "mappings auto leaves outside 2 %%, written to bench_scalesim_dram_window6.json")
    ap.add_argument("--pool-only", action="store_true",
                    help="only auto against the estimate on the random pool, merged into the existing JSON")
    ap.add_argument("--results", type=Path, default=RESULTS,
                    help="the JSON the --*-only parts merge into (default benchmarks/results/bench_scalesim_dram.json)")
    ap.add_argument("--frontier-only", action="store_true",
                    help="only the accuracy and cost of auto's settings (FRONTIER), written to "
                    "bench_scalesim_dram_window8.json")
    ap.add_argument("--window9-only", action="store_true",
                    help="only walked samples of long streams (FRONTIER9: accuracy and cost, the mid-size "
                    "layers' searches, CB2a_2's sampled streams against the walk), written to "
                    "bench_scalesim_dram_window9.json")
    ap.add_argument("--window10-only", action="store_true",
                    help="the guarded sample (`window_fetches_sampled` walks a stream whose rate's stretch holds fewer "
                    "than SAMPLE_MIN_WINDOWS windows' worth of words) on CB2a_2's sampled rows, the random-layer "
                    "seeds, and its cost in the default search and on a cold pool: bench_scalesim_dram_window10.json")
    ap.add_argument("--fill-only", action="store_true",
                    help="only `fill`: _fill_unit against the loop it replaced on CB2a_2's passes, merged into "
                    "bench_scalesim_dram_window10.json")
    ap.add_argument("--sampled-rows-only", action="store_true",
                    help="only the estimate and walked samples against the walk on CB2a_2's rows a sample "
                    "counts, merged into bench_scalesim_dram_window9.json")
    ap.add_argument("--far-search-only", action="store_true",
                    help="only the search cost of walks beyond the fold ratio on random convolutions, merged into "
                    "bench_scalesim_dram_window8.json")
    ap.add_argument("--window11-only", action="store_true",
                    help="only the guarded sample's cost against the default with the walk on the path (CB2a_2 "
                    "search, cold pool, mid-size layers), appended under --label to bench_scalesim_dram_window11.json")
    ap.add_argument("--label", default="window11", help="the version's name in bench_scalesim_dram_window11.json")
    ap.add_argument("--window12-only", action="store_true",
                    help="the guarded sample's cost as --window11-only measures it (scratch arrays kept between "
                    "walks), appended under --label to bench_scalesim_dram_window12.json; --label scratch_ab: "
                    "the CB2a_2 search with the scratch kept and per walk alternated in one process")
    ap.add_argument("--flip16-only", action="store_true",
                    help="the reporting default (guarded sample; searches rank with the estimate and re-evaluate) "
                    "against the old default and ranking within 2 %%: CB2a_2 and mid-size searches, the CLI, a cold "
                    "pool, the random-layer seeds' accuracy; written to bench_scalesim_dram_flip16.json")
    ap.add_argument("--sample-ab-src", type=Path, default=None,
                    help="only the CB2a_2 search ranking with the guarded sample, this tree against the sources at "
                    "this path (e.g. an exported main's src), alternated in fresh processes; merged into "
                    "bench_scalesim_dram_flip16.json under sample_ab")
    args = ap.parse_args()
    load0 = list(os.getloadavg())
    results: Path = args.results

    def merge(key: str, value: object) -> None:
        old = json.loads(results.read_text()) if results.exists() else {}
        old[key] = value
        results.write_text(json.dumps(old, indent=1) + "\n")
        print(f"wrote {results}")

    if args.sampled_rows_only:
        out9 = RESULTS.with_name("bench_scalesim_dram_window9.json")
        old9 = json.loads(out9.read_text()) if out9.exists() else {}
        old9["cb2a_2_rows"] = sampled_rows(args.reference, args.search_budget or 5000)
        out9.write_text(json.dumps(old9, indent=1) + "\n")
        print(f"wrote {out9}")
        return
    if args.window9_only:
        out9 = RESULTS.with_name("bench_scalesim_dram_window9.json")
        res9: dict = {}
        res9["frontier"] = frontier(args.reference, args.search_budget or 5000, settings=FRONTIER9,
                                    cost_labels=FRONTIER9_COSTS)
        out9.write_text(json.dumps(res9, indent=1) + "\n")
        kw9 = {"estimate": {"dram_window": "estimate"}, "default": {},
               "sample 2^19": {"max_sample_entries": 1 << 19}, "sample 2^20": {"max_sample_entries": 1 << 20}}
        res9["far_search"] = far_search_cost(args.search_budget or 5000, kw=kw9, base="default")
        out9.write_text(json.dumps(res9, indent=1) + "\n")
        res9["cb2a_2_shapes"] = sampled_shapes(args.reference, args.search_budget or 5000)
        out9.write_text(json.dumps(res9, indent=1) + "\n")
        res9["cb2a_2_rows"] = sampled_rows(args.reference, args.search_budget or 5000)
        out9.write_text(json.dumps(res9, indent=1) + "\n")
        print(f"wrote {out9}")
        return
    if args.sample_ab_src is not None:
        out16 = RESULTS.with_name("bench_scalesim_dram_flip16.json")
        old16 = json.loads(out16.read_text()) if out16.exists() else {}
        old16["sample_ab"] = sample_search_ab(args.reference, args.sample_ab_src, args.search_budget or 5000) | {
            "load_average": [load0, list(os.getloadavg())]}
        out16.write_text(json.dumps(old16, indent=1) + "\n")
        print(f"wrote {out16}")
        return
    if args.flip16_only:
        out16 = RESULTS.with_name("bench_scalesim_dram_flip16.json")
        out16.write_text(json.dumps(flip16_cost(args.reference, args.search_budget or 5000), indent=1) + "\n")
        print(f"wrote {out16}")
        return
    if args.window12_only:
        out12 = RESULTS.with_name("bench_scalesim_dram_window12.json")
        old12 = json.loads(out12.read_text()) if out12.exists() else {}
        if args.label == "scratch_ab":
            old12.setdefault("scratch_ab", []).append(scratch_ab(args.reference, args.search_budget or 5000))
        else:
            old12.setdefault(args.label, []).append(window11_cost(args.reference, args.search_budget or 5000))
        out12.write_text(json.dumps(old12, indent=1) + "\n")
        print(f"wrote {out12}")
        return
    if args.window11_only:
        out11 = RESULTS.with_name("bench_scalesim_dram_window11.json")
        old11 = json.loads(out11.read_text()) if out11.exists() else {}
        old11.setdefault(args.label, []).append(window11_cost(args.reference, args.search_budget or 5000))
        out11.write_text(json.dumps(old11, indent=1) + "\n")
        print(f"wrote {out11}")
        return
    if args.window10_only:
        out10 = RESULTS.with_name("bench_scalesim_dram_window10.json")
        res10: dict = {"sample_min_windows": SAMPLE_MIN_WINDOWS, "sample_max_walk_factor": SAMPLE_MAX_WALK_FACTOR}
        res10["cb2a_2_rows"] = sampled_rows(args.reference, args.search_budget or 5000,
                                            samples=(1 << 18, 1 << 19, 1 << 20))
        out10.write_text(json.dumps(res10, indent=1) + "\n")
        res10["frontier"] = frontier(args.reference, args.search_budget or 5000, settings=FRONTIER10,
                                     cost_labels=FRONTIER10_COSTS)
        out10.write_text(json.dumps(res10, indent=1) + "\n")
        kw10 = {"estimate": {"dram_window": "estimate"}, "default": {},
                "sample 2^19": {"max_sample_entries": 1 << 19}, "sample 2^20": {"max_sample_entries": 1 << 20}}
        res10["far_search"] = far_search_cost(args.search_budget or 5000, kw=kw10, base="default")
        out10.write_text(json.dumps(res10, indent=1) + "\n")
        res10["fill"] = fill_cost(args.reference, args.search_budget or 5000)
        out10.write_text(json.dumps(res10, indent=1) + "\n")
        print(f"wrote {out10}")
        return
    if args.fill_only:
        out10 = RESULTS.with_name("bench_scalesim_dram_window10.json")
        old10 = json.loads(out10.read_text()) if out10.exists() else {}
        old10["fill"] = fill_cost(args.reference, args.search_budget or 5000)
        out10.write_text(json.dumps(old10, indent=1) + "\n")
        print(f"wrote {out10}")
        return
    if args.far_search_only:
        out8 = RESULTS.with_name("bench_scalesim_dram_window8.json")
        old8 = json.loads(out8.read_text()) if out8.exists() else {}
        old8["far_search"] = far_search_cost(args.search_budget or 5000)
        out8.write_text(json.dumps(old8, indent=1) + "\n")
        print(f"wrote {out8}")
        return
    if args.frontier_only:
        out8 = RESULTS.with_name("bench_scalesim_dram_window8.json")
        old8 = json.loads(out8.read_text()) if out8.exists() else {}
        old8["frontier"] = frontier(args.reference, args.search_budget or 5000)
        out8.write_text(json.dumps(old8, indent=1) + "\n")
        print(f"wrote {out8}")
        return
    if args.pool_only:
        merge("pool", pool_cost() | {"load_average": [load0, list(os.getloadavg())]})
        return
    ref_dir: Path = args.reference
    if args.reuse_model_only:
        out6 = RESULTS.with_name("bench_scalesim_dram_window6.json")
        old6 = json.loads(out6.read_text()) if out6.exists() else {}
        old6["reuse_model"] = reuse_model_errors() | {"load_average": [load0, list(os.getloadavg())]}
        out6.write_text(json.dumps(old6, indent=1) + "\n")
        print(f"wrote {out6}")
        return
    if args.shapes_only:
        old = json.loads(RESULTS.read_text())
        old["shapes"] = shapes_cost(ref_dir, args.search_budget or 5000)
        RESULTS.write_text(json.dumps(old, indent=1) + "\n")
        print(f"wrote {RESULTS}")
        return
    if args.jump_only:
        old = json.loads(RESULTS.read_text())
        old["jump"] = jump_cost(ref_dir, args.search_budget or 5000)
        RESULTS.write_text(json.dumps(old, indent=1) + "\n")
        print(f"wrote {RESULTS}")
        return
    if args.capped_only:
        old = json.loads(RESULTS.read_text())
        old["capped"] = capped_cost(ref_dir, args.search_budget or 5000)
        RESULTS.write_text(json.dumps(old, indent=1) + "\n")
        print(f"wrote {RESULTS}")
        return
    if args.search_timing_only:
        merge("search_timing", search_timing(ref_dir, args.search_budget or 5000))
        return
    if args.variants_only:
        merge("variant_errors", variant_errors())
        return
    runs = {r["run_name"]: r for r in json.loads((ref_dir / "runs.json").read_text())["runs"]}
    est_model, exact_model = SystolicModel(dram_window="estimate"), SystolicModel(dram_window="exact")
    auto_model = SystolicModel(dram_window="auto")
    rows, others = [], []
    for name, run in runs.items():
        cfg = read_config(ref_dir / "configs" / f"{name}.cfg")
        arch = config_arch(cfg)
        topo = ref_dir / "topologies" / ("gemms.csv" if name.startswith("gemms") else "Resnet50_unique.csv")
        for layer in read_topology(topo):
            ref = next((x for x in run["layers"] if x["name"] == layer.name and not x.get("simulated_as")), None)
            if ref is None:
                continue
            one = scalesim_mapping(layer.problem, arch, cfg.dataflow)
            est = est_model.stats(layer.problem, arch, one).report(0)["dram_reads"]
            window_fetches.cache_clear()
            info0 = window_fetches.cache_info()
            exact = exact_model.stats(layer.problem, arch, one).report(0)["dram_reads"]
            walks = window_fetches.cache_info().misses - info0.misses
            auto = auto_model.stats(layer.problem, arch, one).report(0)["dram_reads"]
            base = {"run": name, "layer": layer.name, "dataflow": cfg.dataflow.name.lower(),
                    "scalesim": ref["dram_reads"], "estimate": est, "exact": exact, "auto": auto}
            if not walks:
                others.append(base)
                continue
            batch = MappingBatch.from_mappings([one[0]] * 4096)
            t_est, t_auto, t_exact, t_replay = [], [], [], []
            replay = (0, 0)
            for _ in range(3):  # interleaved
                t0 = time.perf_counter()
                est_model.stats(layer.problem, arch, batch)
                t_est.append((time.perf_counter() - t0) / len(batch))
                auto_model.stats(layer.problem, arch, one)  # the walk cached
                t0 = time.perf_counter()
                auto_model.stats(layer.problem, arch, batch)
                t_auto.append((time.perf_counter() - t0) / len(batch))
                window_fetches.cache_clear()
                t0 = time.perf_counter()
                exact_model.stats(layer.problem, arch, one)
                t_exact.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                replay = replay_dram_reads(layer, cfg)
                t_replay.append(time.perf_counter() - t0)
            ref_i = ref["dram_reads"]["ifmap"]
            res = resets(layer, cfg, 50 * (cfg.ifmap_sram_kb * 1024 // cfg.word_bytes // 100))
            row = base | {
                "walks": walks, "replay": {"ifmap": replay[0], "filter": replay[1]}, "ifmap_resets": res,
                "estimate_error_pct": 100 * (est["ifmap"] - ref_i) / ref_i,
                "estimate_s_per_mapping": statistics.median(t_est),
                "auto_warm_s_per_mapping": statistics.median(t_auto),
                "exact_cold_s": statistics.median(t_exact),
                "replay_s": statistics.median(t_replay),
            }
            row["exact_over_estimate"] = row["exact_cold_s"] / row["estimate_s_per_mapping"]
            row["replay_over_exact"] = row["replay_s"] / row["exact_cold_s"]
            rows.append(row)
            print(f"{row['dataflow']} {layer.name:8} SCALE-Sim {ref_i:>9,} estimate {est['ifmap']:>9,} "
                  f"({row['estimate_error_pct']:+.1f} %) exact {exact['ifmap']:>9,} replay {replay[0]:>9,}; "
                  f"estimate {row['estimate_s_per_mapping'] * 1e6:.2f} us/mapping, exact "
                  f"{row['exact_cold_s'] * 1e3:.1f} ms, replay {row['replay_s']:.2f} s", flush=True)
    n_exact = sum(r["exact"] == r["scalesim"] for r in rows + others)
    n_est = sum(r["estimate"] == r["scalesim"] for r in rows + others)
    n_auto = sum(r["auto"] == r["scalesim"] for r in rows + others)
    print(f"exact mode: {n_exact} / {len(rows) + len(others)} points equal SCALE-Sim's DRAM reads; "
          f"auto: {n_auto}; estimate: {n_est}")
    found = search_cost(ref_dir, args.search_budget) if args.search_budget > 0 else None
    timing = search_timing(ref_dir, args.search_budget) if args.search_budget > 0 else None
    pool = pool_cost()
    RESULTS.write_text(json.dumps({"walked_points": rows, "other_points": others,
                                   "exact_points": n_exact, "estimate_exact_points": n_est,
                                   "auto_exact_points": n_auto,
                                   "points": len(rows) + len(others), "search": found,
                                   "search_timing": timing, "pool": pool,
                                   "variant_errors": variant_errors(),
                                   "capped": capped_cost(ref_dir, args.search_budget or 5000),
                                   "jump": jump_cost(ref_dir, args.search_budget or 5000),
                                   "shapes": shapes_cost(ref_dir, args.search_budget or 5000),
                                   "load_average": list(os.getloadavg()),
                                   "load_average_at_start": load0}, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
