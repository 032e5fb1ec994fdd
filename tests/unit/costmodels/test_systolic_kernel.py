"""The systolic model's CPU kernel: the walked counts it looks up (``dram_window="auto"``)
and the table that holds them."""

from __future__ import annotations

import numpy as np

from accelmap.arch.presets import systolic_array
from accelmap.costmodels import _systolic_engine, _systolic_kernel, systolic
from accelmap.costmodels.systolic import SystolicModel
from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds
from accelmap.mapper.mapping import MappingBatch
from accelmap.testing.costmodel_checks import assert_engines_agree
from accelmap.workloads.builders import conv2d, matmul


def _case():  # noqa: ANN202
    """A 3x3 convolution whose ifmap exceeds a 1 kB window, on the seeds of every sub-space
    (fold counts from the fewest to several times it: rows walked and rows estimated)."""
    prob = conv2d("c", c=8, k=8, p=12, q=12, r=3, s=3, word_bits=8)
    arch = systolic_array(8, 8, 1, 1, 1, dram_bandwidth_words_per_cycle=2.0)
    batch = MappingBatch.concat([variant_seeds(prob, arch, v, n_best=6) for v in systolic_variants(prob, arch)])
    return prob, arch, batch


def test_walked_counts_are_walked_once_then_looked_up(monkeypatch) -> None:
    prob, arch, batch = _case()
    calls: list[int] = []
    walked = systolic._walked_reads

    def counting(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(len(args[3]))
        return walked(*args, **kw)

    monkeypatch.setattr(systolic, "_walked_reads", counting)
    cpu, ref = SystolicModel(engine="cpu", max_fold_ratio=2.0), SystolicModel(engine="numpy", max_fold_ratio=2.0)
    first = cpu.evaluate(prob, arch, batch)
    assert calls, "the batch has rows to walk"
    table = cpu._prepared(prob, arch)[4]
    n_keys = table.count
    assert 0 < n_keys <= sum(calls)  # one key per distinct fold shape and order
    calls.clear()
    mixed = MappingBatch.concat([batch, batch.take(np.arange(len(batch))[::-1])])
    again = cpu.evaluate(prob, arch, mixed)  # every key is in the table now: no walk
    assert not calls and table.count == n_keys
    assert_engines_agree(first, ref.evaluate(prob, arch, batch), what="first call")
    assert_engines_agree(again, ref.evaluate(prob, arch, mixed), what="looked up")
    stats_cpu, stats_ref = cpu.stats(prob, arch, mixed), ref.stats(prob, arch, mixed)
    for f in stats_ref.__dataclass_fields__:
        assert np.array_equal(getattr(stats_cpu, f), getattr(stats_ref, f)), f


def test_walk_table_grows_and_keeps_every_key() -> None:
    rng = np.random.default_rng(0)
    table = _systolic_kernel.WalkTable(n_dims=4, capacity=4)
    head = np.stack([rng.integers(0, 2, 500), rng.integers(0, 3, 500), rng.integers(0, 3, 500),
                     rng.integers(1, 60, 500), rng.integers(1, 60, 500)], axis=1)
    orders = np.array([rng.permutation(4) for _ in range(500)])
    keys = np.concatenate([head, orders], axis=1)
    uniq = np.unique(keys, axis=0)
    vals = uniq.sum(axis=1) * 7
    for lo in range(0, len(uniq), 37):  # in pieces, so that the table grows several times
        table.put(uniq[lo:lo + 37, :5], uniq[lo:lo + 37, 5:], vals[lo:lo + 37])
    table.put(uniq[:10, :5], uniq[:10, 5:], vals[:10])  # keys already there are not added again
    keys, values = table.arrays
    assert table.count == len(uniq) and 2 * table.count <= len(values)
    stored = keys[keys[:, 0] >= 0]
    assert len(stored) == len(uniq)
    order = np.lexsort(stored.T[::-1])
    assert np.array_equal(stored[order], uniq)
    got = values[keys[:, 0] >= 0][order]
    assert np.array_equal(got, vals)


def test_estimate_mode_walks_nothing(monkeypatch) -> None:
    prob, arch, batch = _case()

    def fail(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("walked under dram_window='estimate'")

    monkeypatch.setattr(systolic, "_walked_reads", fail)
    got = SystolicModel(engine="cpu", dram_window="estimate").evaluate(prob, arch, batch)
    assert_engines_agree(got, SystolicModel(engine="numpy", dram_window="estimate").evaluate(prob, arch, batch),
                         what="estimate")


def test_energy_with_blocks_of_several_words() -> None:
    """Per-access energies of blocks of 1, 3 and 4 words (the kernel divides only where a
    block is not one word): kernel and numpy path agree."""
    import dataclasses

    prob, arch, batch = _case()
    levels = tuple(dataclasses.replace(lv, block_words=b) for lv, b in zip(arch.levels, (4, 3, 1, 4, 1), strict=False))
    arch = dataclasses.replace(arch, levels=levels)
    got = SystolicModel(engine="cpu").evaluate(prob, arch, batch)
    ref = SystolicModel(engine="numpy").evaluate(prob, arch, batch)
    assert got.valid.any()
    assert_engines_agree(got, ref, what="block words")


def test_threads_sharing_a_model_fill_one_table() -> None:
    """Four threads evaluate the same batches with one model from a cold table: every result
    equals the numpy path's, and the table ends with each key once."""
    from concurrent.futures import ThreadPoolExecutor

    prob, arch, batch = _case()
    cpu, ref = SystolicModel(engine="cpu", max_fold_ratio=2.0), SystolicModel(engine="numpy", max_fold_ratio=2.0)
    parts = [batch.take(np.arange(k, len(batch), 3)) for k in range(3)] + [batch]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda b: cpu.evaluate(prob, arch, b), parts))
    for b, g in zip(parts, got, strict=True):
        assert_engines_agree(g, ref.evaluate(prob, arch, b), what="threads")
    keys = cpu._prepared(prob, arch)[4].arrays[0]
    stored = keys[keys[:, 0] >= 0]
    assert len(stored) == len(np.unique(stored, axis=0)) == cpu._prepared(prob, arch)[4].count


def test_capped_walks_in_the_kernel_equal_the_numpy_path() -> None:
    """Rows whose stream is longer than ``max_walk_entries`` but whose passes fit are walked
    for `SystolicModel.CAPPED_WALK_REPS` passes (`systolic._walk_rows`): the kernel's rule
    (`_systolic_kernel._walked`) picks the same rows and the counts agree."""
    import sys
    from pathlib import Path

    from accelmap.costmodels.systolic import _passes, _walk_rows, systolic_layout

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from benchmarks.bench_costmodel import _systolic_pool as systolic_pool  # the benchmark's pool

    # an ifmap larger than a 1 kB window (walked) and fold counts above the cap
    prob = conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3, word_bits=8)
    arch = systolic_array(8, 8, 1, 1, 1, dram_bandwidth_words_per_cycle=2.0)
    batch = systolic_pool(prob, arch, 600, np.random.default_rng(1))
    lay = systolic_layout(prob, arch)[0]
    assert systolic._walkable(prob, lay, 0)
    st = SystolicModel(dram_window="estimate").stats(prob, arch, batch)
    per = st.sram_reads[:, 0] // lay.class_size[3]
    passes = _passes(0, np.maximum(st.row_class, 0), np.maximum(st.col_class, 0), st.row_folds, st.col_folds)
    size = np.array(lay.class_size[:3])
    fewest = -(-size[st.row_class] // lay.rows) * -(-size[st.col_class] // lay.cols)
    many = passes > SystolicModel.CAPPED_WALK_REPS

    def caps_at(limit: int) -> np.ndarray:
        return _walk_rows(st.valid, st.sram_reads[:, 0], st.row_folds * st.col_folds, fewest, lay.class_size[3],
                          (limit, 1e9, 0, 0), passes)

    # the limit that caps the most rows (the batch then has capped and whole rows)
    limit = max({int(x) for x in per[many] // passes[many] * SystolicModel.CAPPED_WALK_REPS},
                key=lambda x: int((caps_at(x) == SystolicModel.CAPPED_WALK_REPS).sum()))
    caps = caps_at(limit)
    assert (caps == SystolicModel.CAPPED_WALK_REPS).sum() >= 5 and (caps > SystolicModel.CAPPED_WALK_REPS).any()
    cpu = SystolicModel(engine="cpu", max_walk_entries=limit, max_fold_ratio=1e9)
    ref = SystolicModel(engine="numpy", max_walk_entries=limit, max_fold_ratio=1e9)
    assert_engines_agree(cpu.evaluate(prob, arch, batch), ref.evaluate(prob, arch, batch), what="capped walks")
    a, b = cpu.stats(prob, arch, batch), ref.stats(prob, arch, batch)
    for f in b.__dataclass_fields__:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


def test_specialised_driver_serves_after_the_threshold(monkeypatch) -> None:
    """The generic driver serves the first `_SPECIALISE_AFTER_ROWS` rows of a (problem, arch),
    the driver specialised per structure the batch that reaches it and every later one; both
    give the numpy path's `Metrics`, and `evaluate_objective` gives `evaluate`'s fields."""
    from accelmap.costmodels import _systolic_cpu

    prob, arch, batch = _case()
    used: list[tuple] = []
    driver = _systolic_cpu.driver

    def counting(spec):  # noqa: ANN001, ANN202
        used.append(spec)
        return driver(spec)

    monkeypatch.setattr(_systolic_cpu, "driver", counting)
    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", len(batch) + 1)
    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_IF_READY", False)
    cpu, ref = SystolicModel(engine="cpu"), SystolicModel(engine="numpy")
    first = cpu.evaluate(prob, arch, batch)
    assert not used  # len(batch) rows seen: below the threshold
    second = cpu.evaluate(prob, arch, batch)
    assert used and used[-1] == cpu._prepared(prob, arch)[5]
    want = ref.evaluate(prob, arch, batch)
    assert_engines_agree(first, want, what="generic driver")
    assert_engines_agree(second, want, what="specialised driver")
    obj = cpu.evaluate_objective(prob, arch, batch)
    for name in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
        assert np.array_equal(getattr(obj, name), getattr(second, name)), name


def test_specialised_driver_serves_at_once_where_it_is_ready(monkeypatch) -> None:
    """Below the row count the specialised driver serves where it runs without a compile
    (`_systolic_cpu.ready`: compiled in this process, or in numba's on-disk cache); a
    structure never compiled is not ready, and the generic driver serves it."""
    from accelmap.costmodels import _systolic_cpu

    prob, arch, batch = _case()
    want = SystolicModel(engine="numpy").evaluate(prob, arch, batch)
    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 0)
    warm = SystolicModel(engine="cpu")
    warm.evaluate(prob, arch, batch)  # compiled here (or loaded from the cache)
    spec = warm._prepared(prob, arch)[5]
    assert _systolic_cpu.ready_known(spec) in (None, True)
    used: list[tuple] = []
    driver = _systolic_cpu.driver

    def counting(S):  # noqa: ANN001, ANN202
        used.append(S)
        return driver(S)

    monkeypatch.setattr(_systolic_cpu, "driver", counting)
    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 1 << 62)
    cpu = SystolicModel(engine="cpu")
    got = cpu.evaluate(prob, arch, batch)
    assert used and used[-1] == spec and _systolic_cpu.ready_known(spec) is True
    assert_engines_agree(got, want, what="specialised driver, ready")
    obj = cpu.evaluate_objective(prob, arch, batch)
    for name in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
        assert np.array_equal(getattr(obj, name), getattr(got, name)), name
    # a structure whose driver was never compiled (another digest of the rules): not ready
    other = (*spec[:-1], spec[-1] ^ 1)
    hit = cpu._prepared(prob, arch)
    arrays = (batch.temporal, batch.spatial, batch.order, batch.keep)
    assert not _systolic_engine._spec_ready(other, hit[3], hit[4], (-1, 1.0, 0, 0, 0), arrays, False, 2,
                                            arch.n_levels * prob.n_tensors)
    assert _systolic_cpu.ready_known(other) is False
    monkeypatch.setattr(_systolic_cpu, "_READY", {spec: False})  # (as if not found when first asked)
    assert _systolic_cpu.ready_known(spec) is True  # compiled in this process since: ready
    # no numba dispatcher (as under NUMBA_DISABLE_JIT): not ready, no error
    monkeypatch.setattr(_systolic_cpu, "_READY", {})
    monkeypatch.setattr(_systolic_cpu, "driver", lambda S: (lambda *a: 0))
    assert _systolic_cpu.ready(spec, ()) is False and _systolic_cpu.ready_known(spec) is False


def test_structure_is_shared_by_layers_of_one_shape() -> None:
    """The specialised driver's key holds what the structure fixes, not the bounds: two 3x3
    convolutions of different sizes on one arch share it, a strided one does not."""
    from accelmap.costmodels import _systolic_cpu
    from accelmap.costmodels.systolic import systolic_layout

    arch = systolic_array(8, 8, 1, 1, 1)

    def key(prob):  # noqa: ANN001, ANN202
        consts = _systolic_kernel.systolic_consts(prob, arch, systolic_layout(prob, arch)[0])
        return _systolic_cpu.structure(consts, arch.n_levels, prob.n_tensors)

    a = key(conv2d("a", c=8, k=8, p=12, q=12, r=3, s=3, word_bits=8))
    b = key(conv2d("b", c=16, k=32, p=7, q=9, r=3, s=3, word_bits=8))
    c = key(conv2d("c", c=8, k=8, p=6, q=6, r=3, s=3, stride=2, word_bits=8))
    assert a == b and a != c


def test_metrics_fields_keep_their_shapes_through_take_and_concat() -> None:
    """The kernel writes the (n, L, T) fields as (n, L * T) rows: shapes, values (multicast
    and spatial reductions zero: none in this model), `Metrics.take` and `Metrics.concat`
    equal the numpy path's."""
    from accelmap.costmodels.base import Metrics

    prob, arch, batch = _case()
    got = SystolicModel(engine="cpu").evaluate(prob, arch, batch)
    ref = SystolicModel(engine="numpy").evaluate(prob, arch, batch)
    shape = (len(batch), arch.n_levels, prob.n_tensors)
    for name in ("reads", "fills", "updates", "energy_breakdown_pj", "multicast", "spatial_reductions"):
        assert getattr(got, name).shape == shape, name
    assert not got.multicast.any() and not got.spatial_reductions.any()
    assert got.reads.flags.c_contiguous
    rows = np.arange(len(batch))[::-2]
    assert_engines_agree(got.take(rows), ref.take(rows), what="take")
    assert_engines_agree(Metrics.concat([got, got.take(rows)]), Metrics.concat([ref, ref.take(rows)]), what="concat")


def test_structure_carries_the_shared_rules_digest() -> None:
    """numba's on-disk cache keys the specialised driver by its own module's source and its
    closure's values; the structure (its closure variable) ends with a digest of
    `_systolic_kernel`'s source, whose helpers the driver inlines, so that an edit of those
    rules is not served by a stale cached driver."""
    import hashlib
    from pathlib import Path

    from accelmap.costmodels import _systolic_cpu
    from accelmap.costmodels.systolic import systolic_layout

    prob, arch, _ = _case()
    consts = _systolic_kernel.systolic_consts(prob, arch, systolic_layout(prob, arch)[0])
    spec = _systolic_cpu.structure(consts, arch.n_levels, prob.n_tensors)
    source = Path(_systolic_kernel.__file__).read_bytes()
    assert spec[-1] == int.from_bytes(hashlib.sha256(source).digest()[:7], "big") != 0
    rows = _systolic_cpu.driver(spec)
    assert any(cell.cell_contents == spec for cell in rows.py_func.__closure__)


def test_output_buffers_are_reused_only_once_nothing_refers_to_them() -> None:
    """The cpu engine writes `Metrics`' four (n, L, T) count and energy fields into arrays
    of an earlier call (`OutputBuffers`) only once nothing refers to them any more: a kept
    `Metrics`, or a kept view of one of its fields, is never overwritten; the zero fields are
    one read-only array; a pickled model carries no buffers."""
    import pickle

    prob, arch, batch = _case()
    other = batch.take(np.arange(len(batch))[::-1])  # another batch of the same size
    model, ref = SystolicModel(engine="cpu"), SystolicModel(engine="numpy")
    want, want_other = ref.evaluate(prob, arch, batch), ref.evaluate(prob, arch, other)
    kept = model.evaluate(prob, arch, batch)
    view = model.evaluate(prob, arch, batch).reads[:, 1]  # only a view of a field kept
    view_before = view.copy()
    again = model.evaluate(prob, arch, other)
    assert again.reads.base is not kept.reads.base and again.reads.base is not view.base
    assert_engines_agree(kept, want, what="kept Metrics")
    assert_engines_agree(again, want_other, what="third call")
    assert np.array_equal(view, view_before)
    base = id(again.reads.base)  # (the pool keeps the array alive: its id stays its own)
    del again
    reused = model.evaluate(prob, arch, batch)  # the third call's arrays, nothing refers to them now
    assert id(reused.reads.base) == base
    assert_engines_agree(reused, want, what="reused arrays")
    assert reused.multicast is reused.spatial_reductions and not reused.multicast.flags.writeable
    assert not reused.multicast.any()
    copy = pickle.loads(pickle.dumps(model))
    assert not copy._buffers._sets
    assert_engines_agree(copy.evaluate(prob, arch, batch), want, what="unpickled model")
    buffers = _systolic_engine.OutputBuffers(keep=2)
    shapes = {"a": ((4, 3), np.float64)}
    sets = [buffers.take(shapes)["a"] for _ in range(3)]  # each kept: three new arrays, two remembered
    assert len({id(a) for a in sets}) == 3 and len(buffers._sets) == 2


def test_cells_left_unwritten_hold_zero_across_structures(monkeypatch) -> None:
    """The specialised driver leaves the `Metrics` cells that hold 0.0 in every row unwritten
    (`_systolic_cpu.zero_cells_mask`), so its arrays start as zeros and a kept set is handed
    out again only under the same mask (`_systolic_cpu.cell_tag`), read-only. A convolution
    and a matmul on one arch (the same shapes, their tensors at other places: other masks),
    evaluated in turn by one model with each result dropped so that sets are handed out
    again, equal the numpy path every time; a write into a handed-out field is refused."""
    import pytest

    from accelmap.costmodels import _systolic_cpu
    from accelmap.costmodels.systolic import systolic_layout

    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 0)
    conv, arch, conv_batch = _case()
    mm = matmul("m", m=24, n=8, k=16, word_bits=8)
    mm_batch = MappingBatch.concat([variant_seeds(mm, arch, v, n_best=6) for v in systolic_variants(mm, arch)])
    n = min(len(conv_batch), len(mm_batch))
    cases = [(conv, conv_batch.take(np.arange(n))), (mm, mm_batch.take(np.arange(n)))]
    tags = []
    for prob, _ in cases:
        consts = _systolic_kernel.systolic_consts(prob, arch, systolic_layout(prob, arch)[0])
        tags.append(_systolic_cpu.cell_tag(_systolic_cpu.structure(consts, arch.n_levels, prob.n_tensors)))
    assert tags[0] != tags[1] and all(any((tag[1] >> 3 * k) & 7 == 0 for k in range(15)) for tag in tags)
    model, ref = SystolicModel(engine="cpu"), SystolicModel(engine="numpy")
    for _ in range(3):
        for prob, batch in cases:
            got = model.evaluate(prob, arch, batch)
            assert not got.reads.flags.writeable and not got.energy_breakdown_pj.flags.writeable
            with pytest.raises(ValueError):
                got.fills[0, 0, 0] = 1.0
            assert_engines_agree(got, ref.evaluate(prob, arch, batch), what=prob.name)
            del got
    assert len(model._buffers._sets) == 2


def test_tile_tables_in_the_kernel_or_the_numpy_path(monkeypatch) -> None:
    """A strided 1x1 layer with SCALE-Sim's rounded-up ofmap: the kernel reads its ifmap's
    tile tables (`_systolic_kernel._tile_tables`: a prefix table per order of the pixel dims
    and of the channel dims); when they would exceed the limit the batch goes to the numpy
    path (`tables_fit`). The generic and the specialised driver and that fallback equal the
    numpy engine, with the array-level orders shuffled."""
    import dataclasses

    prob = conv2d("s", c=16, k=32, p=9, q=9, r=1, s=1, n=2, stride=2, input_hw=(16, 16), word_bits=8)
    arch = systolic_array(16, 16, 1, 1, 1, dram_bandwidth_words_per_cycle=None)
    batch = MappingBatch.concat([variant_seeds(prob, arch, v, n_best=6) for v in systolic_variants(prob, arch)])
    lay = systolic.systolic_layout(prob, arch)[0]
    rng = np.random.default_rng(0)
    order = batch.order.copy()
    for i in range(len(batch)):
        order[i, lay.array_level] = rng.permutation(order[i, lay.array_level])
    batch = MappingBatch.concat([batch, dataclasses.replace(batch, order=order)])
    ref = SystolicModel(engine="numpy").stats(prob, arch, batch)
    consts = _systolic_kernel.systolic_consts(prob, arch, lay)
    meta = consts.ints[_systolic_kernel._TILE_META:_systolic_kernel._TILE_META + 18].reshape(3, 6)  # the ifmap's
    assert meta[0, 0] > 0 and meta[0, 1] == 3 and meta[2, 0] > 0 and meta[1, 0] == -1  # m (N P Q) and k (C)
    assert _systolic_kernel.tables_fit(consts)
    for limit, after in ((_systolic_kernel._TILE_ENTRIES, 10 ** 9), (_systolic_kernel._TILE_ENTRIES, 0), (10, 0)):
        # the generic driver, the one specialised per structure (`_systolic_cpu`), the numpy path
        monkeypatch.setattr(_systolic_kernel, "_TILE_ENTRIES", limit)
        monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", after)
        monkeypatch.setattr(_systolic_engine, "_SPECIALISE_IF_READY", False)
        model = SystolicModel(engine="cpu")
        assert _systolic_kernel.tables_fit(model._prepared(prob, arch)[3]) == (limit > 10)
        got = model.stats(prob, arch, batch)
        for f in ref.__dataclass_fields__:
            assert np.array_equal(getattr(got, f), getattr(ref, f)), (limit, after, f)


def test_serial_plan_is_kept_and_remade_when_the_walk_table_changes(monkeypatch) -> None:
    """A call of the specialised driver on the calling thread runs through a `SerialPlan` kept
    per (problem, arch) and thread: the same plan on the next call, a new one once the walk
    table's arrays were swapped by a put (its walked counts then read from the new table), none
    carried by a pickled model. Every mode (report, objective, `Metrics`) equals the numpy
    path, with the int and float outputs as rows of shared arrays."""
    import pickle
    import threading

    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 0)
    prob, arch, batch = _case()
    model, ref = SystolicModel(engine="cpu"), SystolicModel(engine="numpy")
    want = ref.evaluate(prob, arch, batch)
    first = model.evaluate(prob, arch, batch)  # walks the new fold shapes: the table is swapped
    assert_engines_agree(first, want, what="first call")
    plans = model._prepared(prob, arch)[8]
    plan = plans[threading.get_ident()]
    table = model._prepared(prob, arch)[4]
    assert plan.fits(table, plan.rule)
    assert_engines_agree(model.evaluate(prob, arch, batch), want, what="second call")
    assert plans[threading.get_ident()] is plan  # nothing walked: the same plan
    obj = model.evaluate_objective(prob, arch, batch)
    for f in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
        assert np.array_equal(getattr(obj, f), getattr(want, f)), f
    assert obj.cycles.flags.c_contiguous and obj.reason.flags.c_contiguous
    stats, stats_ref = model.stats(prob, arch, batch), ref.stats(prob, arch, batch)
    for f in ("valid", "total_cycles", "dram_reads", "sram_reads", "utilization"):
        assert np.array_equal(getattr(stats, f), getattr(stats_ref, f)), f
    # a put swaps the table's arrays: the plan no longer fits and is made again
    d = prob.n_dims
    table.put(np.array([[0, 0, 1, 99, 99]]), np.arange(d)[None, :], np.array([7]))
    assert not plan.fits(table, plan.rule)
    assert_engines_agree(model.evaluate(prob, arch, batch), want, what="after a put")
    assert plans[threading.get_ident()] is not plan
    copy = pickle.loads(pickle.dumps(model))
    assert plans and pickle.loads(pickle.dumps(plans)) == {}  # (plans hold compiled drivers: pickled empty)
    assert_engines_agree(copy.evaluate(prob, arch, batch), want, what="unpickled model")


def test_ceil_div_is_the_negated_floor_division() -> None:
    """`_ceil_div` (the kernels' fold counts and DRAM-window chunks) gives ``-(-a // b)`` for
    every ``a`` in a window around zero and at the int64 extremes, and every divisor ``b`` >= 1
    there, compiled and as Python."""
    big = 2**63 - 1
    nums = [*range(-70, 71), 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**53 + 1, big - 1, big, -big]
    dens = [*range(1, 40), 2**31 - 1, 2**32 - 1, 2**32, 2**32 + 1, big - 1, big]
    compiled = _systolic_kernel._ceil_div
    for a in nums:
        for b in dens:
            want = -(-a // b)
            assert _systolic_kernel._ceil_div.py_func(a, b) == want, (a, b)
            assert compiled(np.int64(a), np.int64(b)) == want, (a, b)


def test_int_fmod_is_fmod() -> None:
    """`_int_fmod` (the window counts of `_repeated_tiles`) gives ``np.fmod`` bit for bit for
    integer-valued dividends near zero, around powers of two and past the exact bound, with
    the floor quotient it is given, for integer-valued divisors and fractional ones (which
    take ``np.fmod`` itself), compiled and as Python."""
    xs = [*range(0, 200), *(float(2**e + d) for e in (20, 31, 32, 50, 51, 52, 53, 60) for d in (-3, -1, 0, 1, 3))]
    ys = [1.0, 2.0, 3.0, 7.0, 10.0, 32750.0, 32750.5, 0.75, 1.5, 2.0**31 - 1, 2.0**50 + 1, 2.0**51, 2.0**52 + 2]
    compiled = _systolic_kernel._int_fmod
    for x in map(float, xs):
        for y in ys:
            q = np.floor(x / y)
            want = np.fmod(x, y)
            assert _systolic_kernel._int_fmod.py_func(x, q, y) == want, (x, y)
            assert compiled(x, q, y) == want, (x, y)


def test_repeated_tiles_matches_the_numpy_rule() -> None:
    """The kernel's `_repeated_tiles` (its remainders by `_int_fmod`) gives
    `systolic_dram._repeated_tiles_batch`'s words on random tiles, small and beyond the
    exact bound, through integer and fractional windows."""
    from numba import njit

    from accelmap.costmodels.systolic_dram import _repeated_tiles_batch

    @njit
    def run(nf, t, tl, k, w):  # (the compiled rule, as the drivers call it)
        out = np.empty(nf.shape[0], dtype=np.int64)
        for j in range(nf.shape[0]):
            out[j] = _systolic_kernel._repeated_tiles(nf[j], t[j], tl[j], k[j], w)
        return out

    rng = np.random.default_rng(5)
    for w in (1.0, 7.0, 100.0, 32750.0, 1000.5):
        for hi in (10, 1000, 10**6, 2**40):
            n = 400
            nf, t, tl = rng.integers(0, min(hi, 2**20), n), rng.integers(1, hi, n), rng.integers(0, hi, n)
            k = rng.integers(1, 6, n)
            want = _repeated_tiles_batch(nf, t, tl, k, w)
            assert np.array_equal(run(nf, t, tl, k, w), want), (w, hi)


def test_specialised_driver_order_verdicts(monkeypatch) -> None:
    """The specialised driver's order check (the entries' bits and the OR of the entries)
    gives the numpy path's verdict, reason and level on orders with an entry replaced by
    every kind of value outside 0..D-1 (negative, D, 63, 64 and 64 + a dim, whose low six
    bits name a dim, huge and the int64 extremes) or repeated, at every level."""
    from accelmap.arch.presets import preset
    from accelmap.costmodels.systolic_variants import scalesim_mapping

    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 0)
    prob = conv2d("s", c=8, k=16, p=7, q=7, r=3, s=3, stride=2, word_bits=8)  # (a structure the default run compiles)
    arch = preset("systolic")
    base = scalesim_mapping(prob, arch, "ws")
    L, D = base.order.shape[1:]
    bad = [-1, -64, D, 63, 64, 64 + 1, 64 + D - 1, 2**62, 2**63 - 1, -(2**63)]
    order = np.repeat(np.asarray(base.order), L * D * (len(bad) + 1), axis=0)
    r = 0
    for lv in range(L):
        for d in range(D):
            for v in [*bad, int(order[r, lv, (d + 1) % D])]:  # (the last: a repeated dim)
                order[r, lv, d] = v
                r += 1
    n = len(order)
    batch = MappingBatch(temporal=np.repeat(np.asarray(base.temporal), n, axis=0),
                         spatial=np.repeat(np.asarray(base.spatial), n, axis=0), order=order,
                         keep=np.repeat(np.asarray(base.keep), n, axis=0))
    got = SystolicModel(engine="cpu", dram_window="estimate").evaluate(prob, arch, batch)
    want = SystolicModel(engine="numpy", dram_window="estimate").evaluate(prob, arch, batch)
    assert not want.valid.any()
    assert_engines_agree(got, want, what="damaged orders")


def test_specialised_driver_factor_verdicts(monkeypatch) -> None:
    """The specialised driver's factor check gives the numpy path's verdict, reason and level
    on rows with one temporal or spatial factor replaced by 0, -1, the int64 extremes or a
    factor that wraps its dim's product, or with two negative factors in one dim (a positive
    product), at every level, the fanout levels' spatial factors and the others' (a damaged
    row)."""
    from accelmap.arch.presets import preset
    from accelmap.costmodels.systolic_variants import scalesim_mapping

    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 0)
    prob = conv2d("s", c=8, k=16, p=7, q=7, r=3, s=3, stride=2, word_bits=8)  # (a structure the default run compiles)
    arch = preset("systolic")
    base = scalesim_mapping(prob, arch, "ws")
    L, D = base.order.shape[1:]
    temporal = [np.asarray(base.temporal)[0].copy()]
    spatial = [np.asarray(base.spatial)[0].copy()]
    for lv in range(L):
        for d in range(D):
            for v in (0, -1, -(2**63), 2**63 - 1, 2**32):
                t = temporal[0].copy()
                t[lv, d] = v
                temporal.append(t)
                spatial.append(spatial[0].copy())
                for axis in (0, 1):
                    sp = spatial[0].copy()
                    sp[lv, d, axis] = v
                    temporal.append(temporal[0].copy())
                    spatial.append(sp)
            t = temporal[0].copy()  # two negatives in one dim: a positive product
            t[lv, d] = -2
            t[(lv + 1) % L, d] = -3 * int(temporal[0][(lv + 1) % L, d])
            temporal.append(t)
            spatial.append(spatial[0].copy())
    n = len(temporal)
    # (built past the public constructor's value checks, which refuse factors whose product
    # passes 2^62: the kernels must still judge such rows as the numpy path does)
    batch = MappingBatch._trusted(temporal=np.stack(temporal), spatial=np.stack(spatial),
                                  order=np.repeat(np.asarray(base.order), n, axis=0),
                                  keep=np.repeat(np.asarray(base.keep), n, axis=0))
    got = SystolicModel(engine="cpu", dram_window="estimate").evaluate(prob, arch, batch)
    want = SystolicModel(engine="numpy", dram_window="estimate").evaluate(prob, arch, batch)
    assert want.valid[0] and not want.valid[1:].all()
    assert_engines_agree(got, want, what="damaged factors")


def _random_scalesim_rows(prob, arch, n: int, rng: np.random.Generator) -> MappingBatch:  # noqa: ANN001
    """SCALE-Sim's mapping of a random dataflow with a random number of PEs on each array axis
    (every temporal loop at DRAM): rows of every fold count."""
    from accelmap.costmodels.systolic import systolic_layout
    from accelmap.costmodels.systolic_variants import scalesim_mapping

    lay, _ = systolic_layout(prob, arch)
    bases = [scalesim_mapping(prob, arch, df) for df in ("os", "ws", "is")]
    pick = rng.integers(0, 3, n)
    s = np.concatenate([bases[i].spatial for i in pick]).copy()
    a = lay.array_level
    for axis, extent in ((1, lay.rows), (0, lay.cols)):
        unrolled = s[:, a, :, axis] > 1
        s[:, a, :, axis] = np.where(unrolled, np.minimum(rng.integers(1, extent + 1, n)[:, None], s[:, a, :, axis]), 1)
    t = np.concatenate([bases[i].temporal for i in pick]).copy()
    t[:, 0, :] = -(-prob.bounds[None, :] // s.prod(axis=(1, 3)))
    return MappingBatch(temporal=t, spatial=s, order=np.concatenate([bases[i].order for i in pick]),
                        keep=np.concatenate([bases[i].keep for i in pick]))


def test_fold_table_and_the_division_beyond_it(monkeypatch) -> None:
    """`SystolicConsts.fold_tab` holds each class's folds ``ceil(size / u)`` on ``u`` PEs; the
    specialised driver reads them there and divides beyond the table: with a table of two
    entries (most rows beyond it) and with the full one, every `Metrics` field equals the numpy
    path's, under ``"estimate"``, ``"auto"`` (the guarded sample, what the model reports) and
    ``"auto"`` as a search ranks (`SystolicModel.for_search`: no sample)."""
    from accelmap.arch.presets import preset
    from accelmap.costmodels.systolic import systolic_layout

    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 0)
    prob = conv2d("s", c=8, k=16, p=7, q=7, r=3, s=3, stride=2, word_bits=8)  # (a structure the default run compiles)
    arch = preset("systolic")
    lay, _ = systolic_layout(prob, arch)
    tab = _systolic_kernel.systolic_consts(prob, arch, lay).fold_tab
    u = np.arange(1, tab.shape[1])
    for c in range(3):
        assert (tab[c, 1:] == -(-lay.class_size[c] // u)).all()
    batch = _random_scalesim_rows(prob, arch, 3000, np.random.default_rng(7))
    for pes in (2, _systolic_kernel._FOLD_TABLE_PES):
        monkeypatch.setattr(_systolic_kernel, "_FOLD_TABLE_PES", pes)
        for window, search in (("estimate", False), ("auto", False), ("auto", True)):
            models = [SystolicModel(engine=e, dram_window=window) for e in ("cpu", "numpy")]
            got, want = ((m.for_search() if search else m).evaluate(prob, arch, batch) for m in models)
            assert want.valid.all()
            assert_engines_agree(got, want, what=f"fold table of {pes} PEs, {window}, search {search}")


def test_specialised_driver_first_failing_level(monkeypatch) -> None:
    """The specialised driver's check, each test ending in a select that finds the first
    failing level from the last one up, reports the numpy path's reason and level on rows
    that fail a test at two levels at once (orders, keep bits, fanouts), several tests at
    once, and with a spatial factor other than 1 at a level without a fanout."""
    from accelmap.arch.presets import preset
    from accelmap.costmodels.systolic_variants import scalesim_mapping

    monkeypatch.setattr(_systolic_engine, "_SPECIALISE_AFTER_ROWS", 0)
    prob = conv2d("s", c=8, k=16, p=7, q=7, r=3, s=3, stride=2, word_bits=8)  # (a structure the default run compiles)
    arch = preset("systolic")
    base = scalesim_mapping(prob, arch, "ws")
    L, D = base.order.shape[1:]
    fan = np.asarray(arch.fanouts)
    holds = np.asarray(arch.holds_mask(prob))
    rows = []

    def row(order_lv=(), keep_lv=(), fan_lv=(), damaged_lv=None, zero=False) -> None:  # noqa: ANN001
        t, s = np.asarray(base.temporal).copy(), np.asarray(base.spatial).copy()
        o, k = np.asarray(base.order).copy(), np.asarray(base.keep).copy()
        for lv in order_lv:
            o[0, lv, 0] = o[0, lv, 1]
        for lv in keep_lv:  # a tensor the level may not hold kept there, or one DRAM does not keep
            free = np.flatnonzero(~holds[lv])
            if lv == 0 or not free.size:
                k[0, 0, 0] = False
            else:
                k[0, lv, free[0]] = True
        for lv in fan_lv:  # one more PE along X than the level's fanout
            s[0, lv, 0, 0] = fan[lv, 0] + 1
        if damaged_lv is not None:
            s[0, damaged_lv, 1, 1] = 2
        if zero:
            t[0, L - 1, D - 1] = 0
        rows.append((t, s, o, k))

    fan_levels = [lv for lv in range(L) if fan[lv, 0] * fan[lv, 1] > 1]
    no_fan = [lv for lv in range(L) if fan[lv, 0] * fan[lv, 1] <= 1]
    for a in range(L):
        for b in range(a + 1, L):
            row(order_lv=(b, a))
            row(keep_lv=(b, a))
            row(order_lv=(b,), keep_lv=(a,))
            row(keep_lv=(b,), fan_lv=fan_levels[:1])
    for lv in no_fan:
        row(damaged_lv=lv)
        row(damaged_lv=lv, order_lv=(L - 1,))
        row(damaged_lv=lv, zero=True)
    row(fan_lv=fan_levels, order_lv=(L - 1,), zero=True)
    batch = MappingBatch(temporal=np.concatenate([r[0] for r in rows]), spatial=np.concatenate([r[1] for r in rows]),
                         order=np.concatenate([r[2] for r in rows]), keep=np.concatenate([r[3] for r in rows]))
    got = SystolicModel(engine="cpu", dram_window="estimate").evaluate(prob, arch, batch)
    want = SystolicModel(engine="numpy", dram_window="estimate").evaluate(prob, arch, batch)
    assert not want.valid.all()
    assert len(np.unique(want.reason)) >= 3 and len(np.unique(want.reason_level)) >= 3
    assert_engines_agree(got, want, what="rows failing at several levels")
