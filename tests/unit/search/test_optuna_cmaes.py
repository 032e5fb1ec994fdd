"""Optuna's CMA-ES sampler behind the optuna searcher (needs the `cmaes` extra)."""

from __future__ import annotations

import pytest

from accelmap.search.api import search
from accelmap.testing.examples import small_arch, small_conv

pytest.importorskip("cmaes")


def test_cmaes_sampler_runs_and_is_seeded():
    kw = dict(searcher="optuna", searcher_options={"sampler": "cmaes", "n_startup_trials": 2, "inner": 64},
              budget=1500, seed=3)
    a = search(small_conv(), small_arch(), **kw)
    b = search(small_conv(), small_arch(), **kw)
    assert a.n_evaluations == 1500 and a.best is not None
    assert a.edp == b.edp
    assert a.config.get("searcher") == "optuna"
