"""Conformance checks every cost model plugin must pass (public, like optuna.testing).

Use from a plugin's own test suite::

    from accelmap.testing.costmodel_checks import check_cost_model
    check_cost_model(MyModel(), problem, arch, batch)

Each check raises ``AssertionError`` with a message naming the row and the field.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.costmodels.base import CostModel, Metrics
from accelmap.mapper.mapping import MappingBatch
from accelmap.workloads.problem import Problem

__all__ = ["check_cost_model", "assert_metrics_equal", "assert_engines_agree"]

_ARRAY_FIELDS = tuple(f.name for f in fields(Metrics) if f.name not in ("macs", "level_names", "tensor_names"))


def assert_metrics_equal(a: Metrics, b: Metrics, *, what: str) -> None:
    """Exact equality of every array field (NaN-free; inf compares equal to inf)."""
    if len(a) != len(b):
        raise AssertionError(f"{what}: {len(a)} rows vs {len(b)} rows")
    for name in _ARRAY_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x.shape != y.shape or not np.array_equal(x, y):
            diff = np.argwhere(~np.isclose(x, y, rtol=0, atol=0, equal_nan=True)) if x.shape == y.shape else None
            where = f" first at index {tuple(diff[0])}" if diff is not None and len(diff) else ""
            raise AssertionError(f"{what}: field {name} differs{where}")
    if a.macs != b.macs or a.level_names != b.level_names or a.tensor_names != b.tensor_names:
        raise AssertionError(f"{what}: macs or labels differ")


def check_cost_model(model: CostModel, problem: Problem, arch: Arch, batch: MappingBatch, *, seed: int = 0) -> None:
    """Run every conformance check of a cost model on one (problem, arch, batch).

    * shapes and labels of `Metrics` match the batch;
    * deterministic: the same batch twice gives identical metrics;
    * batched path equals the scalar reference path row by row, exactly;
    * batch invariance: permuting rows permutes results; concatenating batches concatenates;
    * invalid rows have ``inf`` cycles and energy and a nonzero reason;
    * physics on valid rows: counts are >= 0; energy >= MACs x energy per MAC;
      cycles >= MACs / MAC units (no mapping beats the array's peak).
    """
    n = len(batch)
    m = model.evaluate(problem, arch, batch)
    if len(m) != n:
        raise AssertionError(f"evaluate returned {len(m)} rows for a batch of {n}")
    if m.macs != problem.macs:
        raise AssertionError(f"macs = {m.macs}, expected {problem.macs}")
    assert_metrics_equal(m, model.evaluate(problem, arch, batch), what="determinism")

    for i in range(n):
        one = model.evaluate_one(problem, arch, batch[i])
        assert_metrics_equal(m.take(slice(i, i + 1)), one, what=f"batched vs scalar, row {i}")

    perm = np.random.default_rng(seed).permutation(n)
    assert_metrics_equal(model.evaluate(problem, arch, batch.take(perm)), m.take(perm), what="row permutation")
    half = n // 2
    if 0 < half < n:
        parts = Metrics.concat([model.evaluate(problem, arch, batch.take(slice(0, half))),
                                model.evaluate(problem, arch, batch.take(slice(half, n)))])
        assert_metrics_equal(parts, m, what="concatenation")

    bad = ~m.valid
    if bad.any():
        if not (np.isinf(m.cycles[bad]).all() and np.isinf(m.energy_pj[bad]).all()):
            raise AssertionError("invalid rows must have inf cycles and energy")
        if (m.reason[bad] == 0).any():
            raise AssertionError("invalid rows must carry a nonzero reason code")
    ok = m.valid
    if ok.any():
        for name in ("reads", "fills", "updates", "energy_breakdown_pj"):
            if (getattr(m, name)[ok] < 0).any():
                raise AssertionError(f"negative {name} on a valid row")
        floor = problem.macs * arch.compute.energy_per_mac_pj
        if (m.energy_pj[ok] < floor * (1 - 1e-9)).any():
            raise AssertionError(f"energy below MACs x energy per MAC ({floor} pJ)")
        if (m.cycles[ok] < problem.macs / arch.n_macs * (1 - 1e-9)).any():
            raise AssertionError("cycles below MACs / MAC units")


# Fields that hold counts or codes (compared exactly) and fields that hold energies or
# ratios (compared to a relative tolerance) when two engines of one model are compared.
_EXACT_FIELDS = ("cycles", "valid", "reason", "reason_level", "reads", "fills", "updates", "multicast",
                 "spatial_reductions")
_FLOAT_FIELDS = ("energy_pj", "compute_energy_pj", "utilization", "energy_breakdown_pj")


def assert_engines_agree(a: Metrics, b: Metrics, *, what: str, rtol: float = 1e-12) -> None:
    """Two engines of one model: counts, cycles and codes bit for bit, energies and
    utilization to ``rtol`` relative (inf equal to inf)."""
    if len(a) != len(b):
        raise AssertionError(f"{what}: {len(a)} rows vs {len(b)} rows")
    for name in _EXACT_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x.shape != y.shape or not np.array_equal(x, y):
            diff = np.argwhere(x != y) if x.shape == y.shape else None
            where = f" first at index {tuple(diff[0])}: {x[tuple(diff[0])]} vs {y[tuple(diff[0])]}" \
                if diff is not None and len(diff) else f" (shapes {x.shape} vs {y.shape})"
            raise AssertionError(f"{what}: field {name} differs{where}")
    for name in _FLOAT_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        same_inf = (x == y)
        close = np.isclose(x, y, rtol=rtol, atol=0.0) | same_inf
        if x.shape != y.shape or not close.all():
            diff = np.argwhere(~close) if x.shape == y.shape else None
            where = f" first at index {tuple(diff[0])}: {x[tuple(diff[0])]!r} vs {y[tuple(diff[0])]!r}" \
                if diff is not None and len(diff) else f" (shapes {x.shape} vs {y.shape})"
            raise AssertionError(f"{what}: field {name} differs beyond rtol={rtol}{where}")
    if a.macs != b.macs or a.level_names != b.level_names or a.tensor_names != b.tensor_names:
        raise AssertionError(f"{what}: macs or labels differ")
