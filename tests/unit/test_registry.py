from __future__ import annotations

import pytest

from accelmap import SpecError, UnknownPluginError
from accelmap._registry import Registry, costmodels, searchers


def test_declared_plugins_are_listed():
    assert {"loopnest", "systolic", "aspect"} <= set(costmodels.names())
    assert {"random", "exhaustive", "optuna", "genetic", "anneal"} <= set(searchers.names())


def test_unknown_name_suggests():
    with pytest.raises(UnknownPluginError, match=r"unknown cost model 'loopnets'. Did you mean 'loopnest'\?"):
        costmodels.get("loopnets")


def test_lazy_load_and_duplicates():
    reg: Registry[object] = Registry("accelmap.test-none", "widget", {"a": "collections:OrderedDict"})
    import collections

    assert reg.get("a") is collections.OrderedDict
    reg.register("b", lambda: 42)
    assert reg.get("b") == 42
    with pytest.raises(SpecError, match="duplicate widget name 'b'"):
        reg.register("b", lambda: 1)


def test_import_failure_is_reported():
    reg: Registry[object] = Registry("accelmap.test-none", "widget", {"x": "no_such_module_xyz:Thing"})
    with pytest.raises(UnknownPluginError, match="could not be imported"):
        reg.get("x")
