"""The loopnest model's specialised rows, compiled the first time in a process of their own.

Past the row count (`_loopnest_kernel._SPECIALISE_AFTER_ROWS`) the model asks
`_loopnest_cpu.rows_ready`: rows compiled already (here or in numba's cache) serve at once;
otherwise a separate process compiles them while the generic driver goes on serving, and they
serve once it has ended. These tests replace that process's script by small ones (one that
waits for a file, one that fails) to follow each state, and compare every result with the
numpy path; the slow test lets the real script compile into a fresh cache and checks that this
process then finds the rows there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from accelmap.costmodels import _loopnest_cpu, _loopnest_kernel
from accelmap.costmodels.loopnest import LoopNestModel
from accelmap.mapper.space import MapSpace
from accelmap.testing.examples import small_arch, small_conv


@pytest.fixture
def background(monkeypatch: pytest.MonkeyPatch) -> None:
    """Background compiles on, from the first row, with this test's own state."""
    monkeypatch.setattr(_loopnest_kernel, "_SPECIALISE_IN_BACKGROUND", True)
    monkeypatch.setattr(_loopnest_kernel, "_SPECIALISE_AFTER_ROWS", 0)
    monkeypatch.setattr(_loopnest_cpu, "_ROWS_STATE", {})


def _case():  # noqa: ANN202
    p, a = small_conv(), small_arch()
    return p, a, MapSpace(p, a).sample(300, np.random.default_rng(3))


def _equal_to_numpy(m, p, a, batch) -> None:  # noqa: ANN001
    ref = LoopNestModel(engine="numpy").evaluate(p, a, batch)
    for f in ("cycles", "energy_pj", "valid", "reason", "reads", "fills", "updates", "energy_breakdown_pj"):
        np.testing.assert_array_equal(np.asarray(getattr(m, f)), np.asarray(getattr(ref, f)), err_msg=f)


def test_generic_rows_serve_until_the_compile_process_ends(background, monkeypatch, tmp_path):  # noqa: ANN001
    go = tmp_path / "go"
    script = textwrap.dedent(f"""
        import os, time
        while not os.path.exists({str(go)!r}):
            time.sleep(0.02)
    """)
    monkeypatch.setattr(_loopnest_cpu, "_COMPILE_SOURCE", script)
    monkeypatch.setattr(_loopnest_cpu, "_rows_compiled", lambda S: False)
    p, a, batch = _case()
    model = LoopNestModel(engine="cpu")
    for _ in range(3):  # the process runs: the generic driver serves, no plan of the specialised rows
        _equal_to_numpy(model.evaluate(p, a, batch), p, a, batch)
        assert model._plan is None
    (state,) = _loopnest_cpu._ROWS_STATE.values()
    proc, path = state
    assert proc.poll() is None and Path(path).is_file()  # one process, given (problem, arch)
    go.write_text("")
    proc.wait(timeout=60)
    _equal_to_numpy(model.evaluate(p, a, batch), p, a, batch)
    assert model._plan is not None  # the specialised rows serve now
    assert list(_loopnest_cpu._ROWS_STATE.values()) == [True]
    assert not Path(path).exists()  # its input file is gone


def test_a_failed_compile_process_leaves_the_compile_to_this_process(background, monkeypatch):  # noqa: ANN001
    monkeypatch.setattr(_loopnest_cpu, "_COMPILE_SOURCE", "raise SystemExit(3)")
    monkeypatch.setattr(_loopnest_cpu, "_rows_compiled", lambda S: False)
    p, a, batch = _case()
    model = LoopNestModel(engine="cpu")
    _equal_to_numpy(model.evaluate(p, a, batch), p, a, batch)
    _loopnest_cpu.wait_rows()
    m = model.evaluate_objective(p, a, batch)
    assert model._plan is not None  # compiled here, on this call
    ref = LoopNestModel(engine="numpy").evaluate(p, a, batch)
    np.testing.assert_array_equal(m.energy_pj, ref.energy_pj)
    np.testing.assert_array_equal(m.cycles, ref.cycles)


def test_rows_compiled_already_serve_at_once(background, monkeypatch):  # noqa: ANN001
    started = []
    monkeypatch.setattr(_loopnest_cpu, "_rows_compiled", lambda S: True)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    p, a, batch = _case()
    model = LoopNestModel(engine="cpu")
    _equal_to_numpy(model.evaluate(p, a, batch), p, a, batch)
    assert model._plan is not None and not started


def test_one_structure_compiles_at_a_time(background, monkeypatch, tmp_path):  # noqa: ANN001
    go = tmp_path / "go"
    monkeypatch.setattr(_loopnest_cpu, "_COMPILE_SOURCE",
                        f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\n")
    monkeypatch.setattr(_loopnest_cpu, "_rows_compiled", lambda S: False)
    p, a, batch = _case()
    q = small_conv(stride=2, p=3, q=3)  # another structure: a stride-2 window
    model = LoopNestModel(engine="cpu")
    assert model._kernel_consts(q, a).structure != model._kernel_consts(p, a).structure
    model.evaluate(p, a, batch)
    other = MapSpace(q, a).sample(50, np.random.default_rng(0))
    _equal_to_numpy(model.evaluate(q, a, other), q, a, other)  # waits its turn: the generic driver serves
    assert len(_loopnest_cpu._ROWS_STATE) == 1
    go.write_text("")
    (first,) = _loopnest_cpu._ROWS_STATE.values()
    first[0].wait(timeout=60)  # ended, but not asked about since: the next structure's ask sees it
    model.evaluate(q, a, other)  # so its own compile starts now
    assert len(_loopnest_cpu._ROWS_STATE) == 2
    _loopnest_cpu.wait_rows()
    assert all(v is True for v in _loopnest_cpu._ROWS_STATE.values())


@pytest.mark.slow
def test_the_compile_process_fills_the_cache_this_process_reads(tmp_path):
    """The real script, in a fresh cache: once it has ended, a new process finds the rows in
    numba's cache before any compile of its own (`_rows_compiled`), and they give the numpy
    path's results."""
    env = dict(os.environ, ACCELMAP_CACHE_DIR=str(tmp_path / "cache"), NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               ACCELMAP_COMPILE_IN_BACKGROUND="1")
    code = textwrap.dedent("""
        import sys, numpy as np
        from accelmap.costmodels import _loopnest_cpu, _loopnest_kernel as lk
        from accelmap.costmodels.loopnest import LoopNestModel
        from accelmap.mapper.space import MapSpace
        from accelmap.testing.examples import small_arch, small_conv
        lk._SPECIALISE_AFTER_ROWS = 0
        p, a = small_conv(), small_arch()
        batch = MapSpace(p, a).sample(200, np.random.default_rng(1))
        model = LoopNestModel(engine="cpu")
        S = model._kernel_consts(p, a).structure
        first = _loopnest_cpu._rows_compiled(S)
        m = model.evaluate(p, a, batch)
        served = model._plan is not None
        _loopnest_cpu.wait_rows()
        ref = LoopNestModel(engine="numpy").evaluate(p, a, batch)
        assert (m.energy_pj == ref.energy_pj).all() and (m.cycles == ref.cycles).all()
        print(first, served)
    """)
    src = str(Path(_loopnest_cpu.__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    run = [sys.executable, "-c", code]
    t0 = time.perf_counter()
    cold = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600, check=True).stdout.split()
    assert cold == ["False", "False"], cold  # a fresh cache: the generic driver served, a process compiled
    warm = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600, check=True).stdout.split()
    assert warm == ["True", "True"], (warm, time.perf_counter() - t0)  # found in the cache: served at once
