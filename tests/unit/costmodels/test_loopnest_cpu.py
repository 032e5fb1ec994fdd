"""The CPU engine of the loopnest model (`accelmap.costmodels._loopnest_cpu`): its
compile-time structure, its on-disk cache key, and the objective-only entry point. That it
gives the numpy path's `Metrics` is tested in tests/property/test_kernels_equal_numpy.py."""

from __future__ import annotations

import numpy as np

from accelmap.arch.presets import preset
from accelmap.costmodels import _loopnest_cpu as cpu
from accelmap.costmodels import _loopnest_kernel as kernel
from accelmap.costmodels import _loopnest_rules as rules
from accelmap.costmodels.base import ObjectiveMetrics
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.space import MapSpace
from accelmap.workloads.builders import conv2d


def test_codes_and_slots_match_the_shared_rules() -> None:
    for name in ("_FACTORS", "_ORDER", "_KEEP", "_FANOUT", "_CAPACITY", "_READS", "_FILLS", "_UPDATES", "_ENERGY",
                 "_MCAST", "_SRED", "_CYCLES", "_ENERGY_PJ", "_COMPUTE_PJ", "_UTIL"):
        assert getattr(cpu, name) == getattr(rules, name), name


def test_imports_run_from_the_drivers_to_the_rules() -> None:
    """`_loopnest_rules` (what is counted) imports no module that drives it, and neither the
    specialised CPU engine nor its generator imports `_loopnest_kernel`: `_loopnest_kernel`
    -> `_loopnest_cpu` -> `_loopnest_rules`, no circle."""
    import ast
    from pathlib import Path

    from accelmap.costmodels import _loopnest_gen as gen

    def imported(module) -> set[str]:  # noqa: ANN001
        found = set()
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        return found

    assert not {m for m in imported(rules) if m.startswith("accelmap.costmodels")}
    for module in (cpu, gen):
        assert "accelmap.costmodels._loopnest_kernel" not in imported(module), module.__name__


def test_structure_keys_layers_by_shape_and_strides_not_bounds() -> None:
    arch = preset("eyeriss-like")
    a = kernel.kernel_consts(conv2d("a", c=16, k=16, p=14, q=14, r=3, s=3), arch).structure
    b = kernel.kernel_consts(conv2d("b", c=64, k=32, p=28, q=28, r=3, s=3), arch).structure
    strided = kernel.kernel_consts(conv2d("c", c=16, k=16, p=14, q=14, r=3, s=3, stride=2), arch).structure
    pointwise = kernel.kernel_consts(conv2d("d", c=16, k=16, p=14, q=14, r=1, s=1), arch).structure
    assert a == b  # other bounds, one kernel
    assert a != strided  # the input's coefficients differ
    assert a != pointwise  # R = S = 1: the input's coordinates move with one dim each
    assert a[:5] == (arch.n_levels, 7, 3, 4, 2)
    assert all(isinstance(x, (int, tuple)) for x in a)


def test_driver_closure_holds_only_the_structure_and_its_tables() -> None:
    """numba's on-disk cache keys a closure by the pickled values of its closure variables;
    anything but plain constants there (a dispatcher, say) would change from process to
    process and recompile the kernel every time. The driver's closure holds the structure
    and the constant tables made from it, nothing else."""
    S = kernel.kernel_consts(conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")).structure
    rows = cpu._driver(S)
    cells = [c.cell_contents for c in rows.py_func.__closure__]
    # the structure itself, or an equal one: the drivers are cached by structure, so an earlier
    # test of the same structure may have built this driver from its own equal tuple
    is_s = [isinstance(c, tuple) and c == S for c in cells]
    assert any(is_s)
    tables = cpu._tables(S)
    for c, structure in zip(cells, is_s, strict=True):
        if not structure:
            assert (isinstance(c, np.ndarray) and not c.flags.writeable) or isinstance(c, int), type(c)
            assert any(type(c) is type(x) and np.array_equal(c, x) and np.asarray(c).dtype == np.asarray(x).dtype
                       for x in tables)
    assert rows.py_func is cpu._driver(S).py_func  # one driver per structure per process


def test_structure_carries_the_shared_rules_digest() -> None:
    """The driver inlines the rules of `_loopnest_rules`, which numba's cache does not
    track; the structure's last entry is a digest of that source, so an edit of the rules
    keys new drivers."""
    S = kernel.kernel_consts(conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")).structure
    assert S[-1] == cpu._rules_digest() != 0


def test_tables_are_the_kernel_consts() -> None:
    problem, arch = conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3, stride=2), preset("simba-like")
    c = kernel.kernel_consts(problem, arch)
    nterm, tdim, tcoef, coef, holds, closed, rel, block, cap, rbw, wbw, fanl, out = cpu._tables(c.structure)
    for got, ref in ((nterm, c.nterm), (tdim, c.tdim), (tcoef, c.tcoef), (coef, c.coef), (holds, c.holds),
                     (closed, c.closed), (rel, c.rel), (block, c.block)):
        assert got.dtype == ref.dtype and np.array_equal(got, ref)
    for got, ref in ((cap, c.capacity), (rbw, c.read_bw), (wbw, c.write_bw)):
        assert np.array_equal(np.isfinite(got), np.isfinite(ref))
    assert np.array_equal(fanl, c.fan_xy.prod(axis=1) > 1)
    assert out == int(c.ints[0])


def test_evaluate_objective_on_every_engine_path() -> None:
    problem, arch = conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")
    rng = np.random.default_rng(2)
    batch = MapSpace(problem, arch).sample(300, rng)
    ref = LoopNestModel(engine="numpy").evaluate(problem, arch, batch)
    assert 0 < ref.valid.sum() < len(ref)
    for engine in ("numpy", "cpu"):
        obj = LoopNestModel(engine=engine).evaluate_objective(problem, arch, batch)
        assert isinstance(obj, ObjectiveMetrics) and len(obj) == len(batch)
        assert np.array_equal(obj.valid, ref.valid) and np.array_equal(obj.reason, ref.reason)
        assert np.array_equal(obj.reason_level, ref.reason_level) and np.array_equal(obj.cycles, ref.cycles)
        assert np.allclose(obj.energy_pj, ref.energy_pj, rtol=1e-12, atol=0.0)
        assert np.isinf(obj.energy_pj[~ref.valid]).all()


def test_threaded_blocks_without_counts_equal_one_thread(monkeypatch) -> None:
    problem, arch = conv2d("a", c=16, k=16, p=14, q=14, r=3, s=3), preset("eyeriss-like")
    batch = MapSpace(problem, arch).sample(5000, np.random.default_rng(4))
    consts = kernel.kernel_consts(problem, arch)
    args = (consts, batch.temporal, batch.spatial, batch.order, batch.keep)
    monkeypatch.setattr(kernel, "_threads", lambda: 2)
    threaded = kernel.evaluate_batch(*args, counts=False)
    serial = kernel.evaluate_batch(*args, counts=False, parallel=False)
    full = kernel.evaluate_batch(*args)
    for name in ("cycles", "energy_pj", "valid", "reason", "reason_level"):
        assert np.array_equal(threaded[name], serial[name]) and np.array_equal(threaded[name], full[name]), name
    assert "reads" not in threaded and full["reads"].shape == (5000, arch.n_levels, 3)


def test_the_specialised_driver_takes_over_after_enough_rows(monkeypatch) -> None:
    """A model evaluates a (problem, arch) with the generic driver until it has seen
    ``_SPECIALISE_AFTER_ROWS`` rows of it (a batch that reaches the threshold is the first on
    the specialised driver); both give the same results."""
    problem, arch = conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")
    monkeypatch.setattr(kernel, "_SPECIALISE_AFTER_ROWS", 250)
    calls = []
    rows_of = cpu.rows_driver

    def spy(S):  # noqa: ANN001, ANN202 (records the rows of every call of the specialised rows)
        rows = rows_of(S)

        def call(lo, hi, *rest):  # noqa: ANN001, ANN202
            calls.append(hi - lo)
            return rows(lo, hi, *rest)
        return call

    monkeypatch.setattr(cpu, "rows_driver", spy)
    batch = MapSpace(problem, arch).sample(100, np.random.default_rng(5))
    model = LoopNestModel(engine="cpu")
    first = model.evaluate(problem, arch, batch)
    second = model.evaluate_objective(problem, arch, batch)
    assert calls == []  # 200 rows seen: still the generic driver
    third = model.evaluate(problem, arch, batch)
    assert calls == [100]  # 300 rows: the specialised one
    assert LoopNestModel(engine="cpu").evaluate(problem, arch, batch) is not None and calls == [100]  # a new model
    for name in ("cycles", "energy_pj", "valid", "reason"):
        assert np.array_equal(getattr(first, name), getattr(second, name)), name
    for name in ("cycles", "energy_pj", "reads", "fills", "updates", "multicast", "spatial_reductions"):
        assert np.array_equal(getattr(first, name), getattr(third, name)), name


def _rule_callees(fn) -> list:  # noqa: ANN001
    """The shared rules of `_loopnest_rules` (inlined at numba's IR stage) that a Python
    function calls."""
    return [getattr(rules, n) for n in fn.__code__.co_names if n in rules.RULES]


def test_rules_are_inlined_and_shared_by_both_drivers() -> None:
    """Each counting rule is one function of `_loopnest_rules`, inlined at numba's IR
    stage (``inline="always"``), and both CPU drivers call them (the generic ``eval_range``
    and the specialised `_driver`), so no rule is written twice."""
    S = kernel.kernel_consts(conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")).structure
    specialised = {f.__name__ for f in _rule_callees(cpu._driver(S).py_func)}
    generic = {f.__name__ for f in _rule_callees(rules.eval_range)} | {f.__name__ for f in _rule_callees(rules.check_row)}
    expect = {"check", "row_tables", "closed_deliveries", "deliveries", "keeper_counts", "latency_cycles"}
    assert specialised == expect and generic == expect


def test_the_specialised_driver_inlines_only_shallow_helpers() -> None:
    """numba inlines a function by deep-copying its IR block by block, each copy with the
    function's whole variable scope; a large helper that had itself inlined others (the row
    loop, then the counts) made most of a structure's compile time. The driver's rules may
    inline at most one more level (a footprint inside a check or a delivery count), and that
    one none."""
    S = kernel.kernel_consts(conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")).structure
    for f in _rule_callees(cpu._driver(S).py_func):
        for g in _rule_callees(f):
            assert _rule_callees(g) == [], (f.__name__, g.__name__)


def test_counts_arrays_are_reused_only_once_nothing_refers_to_them() -> None:
    """The cpu engine writes the counts of `evaluate` into the array of an earlier call
    (`_buffers.OutputBuffers`) only once nothing refers to it any more: a kept
    `Metrics`, or a kept view of one of its fields, is never overwritten; a pickled model
    carries no arrays."""
    import pickle

    problem, arch = conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")
    batch = MapSpace(problem, arch).sample(300, np.random.default_rng(7))
    other = batch.take(np.arange(len(batch))[::-1])  # another batch of the same size
    ref = LoopNestModel(engine="numpy")
    want, want_other = ref.evaluate(problem, arch, batch), ref.evaluate(problem, arch, other)

    def same(got, exp) -> bool:  # noqa: ANN001
        return all(np.array_equal(getattr(got, f), getattr(exp, f)) for f in (
            "cycles", "valid", "reason", "reads", "fills", "updates", "multicast", "spatial_reductions")) and \
            np.allclose(got.energy_breakdown_pj, exp.energy_breakdown_pj, rtol=1e-12, atol=0.0)

    model = LoopNestModel(engine="cpu")
    kept = model.evaluate(problem, arch, batch)
    view = model.evaluate(problem, arch, batch).reads[:, 1]  # only a view of a field kept
    view_before = view.copy()
    again = model.evaluate(problem, arch, other)
    assert again.reads.base is not kept.reads.base and again.reads.base is not view.base
    assert same(kept, want) and same(again, want_other) and np.array_equal(view, view_before)
    base = id(again.reads.base)  # (the pool keeps the array alive: its id stays its own)
    del again
    reused = model.evaluate(problem, arch, batch)  # the third call's array, nothing refers to it now
    assert id(reused.reads.base) == base and same(reused, want)
    copy = pickle.loads(pickle.dumps(model))
    assert not copy._buffers._sets
    assert same(copy.evaluate(problem, arch, batch), want)


def test_serial_outputs_are_refilled_only_once_nothing_refers_to_them(monkeypatch) -> None:  # noqa: ANN001
    """A serial call of the specialised rows (`_loopnest_kernel.SerialPlan`) refills the
    outputs of an earlier call only once nothing outside the plan refers to them (the result,
    a field, or a view of a field): then its counts array holds the structure's zero entries
    from its own earlier rows, and the generated rows leave them (``full == 2``). A kept
    result or view is never overwritten; every result equals the numpy path's; the count
    fields are read-only; the rows report the number of illegal rows."""
    problem, arch = conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")
    space = MapSpace(problem, arch)
    batch = space.sample(300, np.random.default_rng(11))
    want = LoopNestModel(engine="numpy").evaluate(problem, arch, batch)
    monkeypatch.setattr(kernel, "_SPECIALISE_AFTER_ROWS", 0)
    model = LoopNestModel(engine="cpu")
    calls: list[int] = []
    bad: list[int] = []
    rows_of = cpu.rows_driver

    def spy(S):  # noqa: ANN001, ANN202 (records the ``full`` and the illegal count of every call of the rows)
        rows = rows_of(S)

        def call(lo, hi, full, *rest):  # noqa: ANN001, ANN202
            calls.append(full)
            bad.append(rows(lo, hi, full, *rest))
            return bad[-1]
        return call

    monkeypatch.setattr(cpu, "rows_driver", spy)
    fields = ("cycles", "energy_pj", "compute_energy_pj", "utilization", "valid", "reason", "reason_level", "reads",
              "fills", "updates", "energy_breakdown_pj", "multicast", "spatial_reductions")

    def same(got, exp=want) -> bool:  # noqa: ANN001
        return all(np.array_equal(getattr(got, f), getattr(exp, f)) for f in fields)

    first = model.evaluate(problem, arch, batch)
    assert same(first) and calls == [1]
    assert 0 < bad[0] == int((~want.valid).sum()) < len(batch)
    assert not any(getattr(first, f).flags.writeable for f in ("reads", "fills", "updates", "energy_breakdown_pj",
                                                               "multicast", "spatial_reductions"))
    base = id(first.reads.base)
    del first
    again = model.evaluate(problem, arch, batch)  # the same arrays, the zero entries left
    assert id(again.reads.base) == base and calls == [1, 2] and same(again)
    kept = again.take(np.arange(len(batch)))  # (a copy, for the comparisons below)
    other = batch.take(np.arange(len(batch))[::-1])
    fresh = model.evaluate(problem, arch, other)  # ``again`` is kept: new arrays, every entry written
    assert id(fresh.reads.base) != base and calls == [1, 2, 1]
    assert same(again, kept) and same(fresh, LoopNestModel(engine="numpy").evaluate(problem, arch, other))
    del again
    view = fresh.energy_breakdown_pj[:, 1]  # only a view of a field of the newest set kept
    view_before = view.copy()
    base2 = id(fresh.reads.base)
    del fresh
    third = model.evaluate(problem, arch, batch)
    assert id(third.reads.base) != base2 and calls == [1, 2, 1, 1] and same(third)
    assert np.array_equal(view, view_before)
    del view, third
    fourth = model.evaluate(problem, arch, batch)  # nothing refers to the newest set: refilled
    assert calls[-1] == 2 and same(fourth)
    obj = model.evaluate_objective(problem, arch, batch)
    assert calls[-1] == 0 and obj.cycles.tolist() == want.cycles.tolist()
    cyc = id(obj.cycles.base)
    del obj
    obj = model.evaluate_objective(problem, arch, other)  # (refilled: the same arrays)
    assert id(obj.cycles.base) == cyc and np.array_equal(obj.energy_pj, fresh_energy(problem, arch, other))


def fresh_energy(problem, arch, batch):  # noqa: ANN001, ANN201
    """The numpy path's energies of a batch."""
    return LoopNestModel(engine="numpy").evaluate(problem, arch, batch).energy_pj


def test_marked_counts_buffers_leave_their_zero_entries_and_stay_read_only(monkeypatch) -> None:  # noqa: ANN001
    """`_loopnest_kernel.evaluate_batch` with an `OutputBuffers` (the path of threaded and
    non-serial calls): a counts array the specialised rows filled before is marked
    (`_loopnest_kernel._zeros_mark`), and when it is handed out again for the same structure
    the generated rows leave the entries zero in every row of it (``full == 2``). The results
    stay those of the numpy path; the count fields come back read-only; an array that
    anything else took in between is not marked any more, so its rows write every entry."""
    from accelmap.costmodels._buffers import OutputBuffers

    problem, arch = conv2d("a", c=8, k=8, p=6, q=6, r=3, s=3), preset("eyeriss-like")
    batch = MapSpace(problem, arch).sample(300, np.random.default_rng(11))
    want = LoopNestModel(engine="numpy").evaluate(problem, arch, batch)
    model = LoopNestModel(engine="cpu")
    consts, frac = model._kernel_consts(problem, arch), model._existing_fraction(problem)
    buffers = OutputBuffers()
    calls: list[int] = []
    rows_of = cpu.rows_driver

    def spy(S):  # noqa: ANN001, ANN202 (records the ``full`` of every call of the rows)
        rows = rows_of(S)

        def call(lo, hi, full, *rest):  # noqa: ANN001, ANN202
            calls.append(full)
            return rows(lo, hi, full, *rest)
        return call

    monkeypatch.setattr(cpu, "rows_driver", spy)

    def run() -> dict:
        return kernel.evaluate_batch(consts, batch.temporal, batch.spatial, batch.order, batch.keep, parallel=False,
                                     frac=frac, buffers=buffers)

    def same(got: dict) -> bool:
        return all(np.array_equal(got[f], getattr(want, f)) for f in (
            "cycles", "energy_pj", "valid", "reason", "reads", "fills", "updates", "energy_breakdown_pj",
            "multicast", "spatial_reductions"))

    first = run()
    assert same(first) and calls == [1]
    assert not any(first[f].flags.writeable for f in ("reads", "fills", "updates", "energy_breakdown_pj",
                                                      "multicast", "spatial_reductions"))
    base = id(first["reads"].base)
    del first
    again = run()  # the same array, its zero entries left
    assert id(again["reads"].base) == base and calls == [1, 2] and same(again)
    del again
    shapes = {"cnt": ((len(batch), 6, arch.n_levels, problem.n_tensors), np.float64)}
    buffers.take(shapes)["cnt"][:] = np.nan  # taken (and written) by something else: unmarked
    third = run()
    assert id(third["reads"].base) == base and calls == [1, 2, 1] and same(third)


def test_output_buffers_marks() -> None:
    """`OutputBuffers.take_marked`: a set is reported marked only with the mark its writer gave
    it after the last hand-out; handing it out (by `take` or `take_marked`) unmarks it."""
    from accelmap.costmodels._buffers import OutputBuffers

    buffers = OutputBuffers(keep=2)
    shapes = {"a": ((4, 3), np.float64)}
    arrays, marked = buffers.take_marked(shapes, "m")
    assert not marked
    buffers.mark(arrays, "m")
    a_id = id(arrays["a"])
    del arrays
    arrays, marked = buffers.take_marked(shapes, "other")
    assert id(arrays["a"]) == a_id and not marked  # another mark: not this one's
    buffers.mark(arrays, "m")
    del arrays
    arrays, marked = buffers.take_marked(shapes, "m")
    assert marked
    del arrays
    arrays, marked = buffers.take_marked(shapes, "m")  # (the last hand-out left no mark)
    assert not marked
    buffers.mark(arrays, "m")
    del arrays
    assert id(buffers.take(shapes)["a"]) == a_id
    assert not buffers.take_marked(shapes, "m")[1]


def test_thread_scratch_is_kept_per_thread() -> None:
    """`_loopnest_kernel.ThreadScratch`: one set of arrays per thread and key, made once; other
    threads get their own; a pickled one holds none."""
    import pickle
    import threading

    kept = kernel.ThreadScratch()
    made: list[int] = []

    def make() -> tuple:
        made.append(1)
        return (np.empty(3),)

    a = kept.get(("k",), make)
    assert kept.get(("k",), make) is a and len(made) == 1
    other: list = []
    th = threading.Thread(target=lambda: other.append(kept.get(("k",), make)))
    th.start()
    th.join()
    assert other[0] is not a and len(made) == 2
    copy = pickle.loads(pickle.dumps(kept))
    assert copy.get(("k",), make) is not a and len(made) == 3


def test_numba_threads_reads_what_get_num_threads_reads() -> None:
    """`_loopnest_kernel._numba_threads` (numba's thread count read without the start-up
    locks) equals ``numba.get_num_threads()`` on this thread after a change, and on another
    thread, which keeps its own count."""
    import threading

    import numba

    before = numba.get_num_threads()
    try:
        for n in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(n)
            assert kernel._numba_threads() == numba.get_num_threads() == n
            got: list[int] = []

            def read(out: list[int] = got) -> None:
                out.append(kernel._numba_threads() - numba.get_num_threads())

            worker = threading.Thread(target=read)
            worker.start()
            worker.join()
            assert got == [0]
    finally:
        numba.set_num_threads(before)
