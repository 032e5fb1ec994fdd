"""The `CostModel` protocol and the `Metrics` it returns.

A cost model turns (Problem, Arch, MappingBatch) into arrays over the batch. It is pure and
deterministic; an illegal mapping is a row with ``valid = False`` and a reason code, never an
exception. Every model also has a scalar reference path (``evaluate_one``) that must agree
exactly with the batched path; the conformance checks in `accelmap.testing` assert it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.mapper.check import Reason
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem

__all__ = ["Metrics", "ObjectiveMetrics", "CostModel"]


@dataclass(frozen=True, slots=True, eq=False)
class Metrics:
    """Cost of every mapping of a batch.

    Per mapping (shape (n,)): ``cycles``, ``energy_pj``, ``compute_energy_pj``,
    ``utilization`` (useful MACs per MAC-cycle of the whole array), ``valid``, ``reason``
    (`Reason` codes), ``reason_level``. Per mapping, level and tensor (shape
    (n, n_levels, n_tensors)), totals over all instances of the level: ``reads``, ``fills``,
    ``updates``, ``energy_breakdown_pj``; and ``multicast`` / ``spatial_reductions``: words
    delivered by multicast from / reduced on the network below the level. Invalid rows hold
    ``inf`` cycles and energy.
    """

    cycles: FloatArray
    energy_pj: FloatArray
    compute_energy_pj: FloatArray
    utilization: FloatArray
    valid: BoolArray
    reason: IntArray
    reason_level: IntArray
    reads: FloatArray
    fills: FloatArray
    updates: FloatArray
    energy_breakdown_pj: FloatArray
    multicast: FloatArray
    spatial_reductions: FloatArray
    macs: int
    level_names: tuple[str, ...]
    tensor_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.cycles.shape[0])

    @property
    def edp(self) -> FloatArray:
        """Energy-delay product, pJ x cycles."""
        return self.energy_pj * self.cycles

    def take(self, index: Any) -> Metrics:
        """Rows selected by an index array, a boolean mask or a slice."""
        kw = {}
        for f in fields(self):
            v = getattr(self, f.name)
            kw[f.name] = v[index] if isinstance(v, np.ndarray) else v
        return Metrics(**kw)

    @staticmethod
    def concat(parts: list[Metrics]) -> Metrics:
        first = parts[0]
        kw: dict[str, Any] = {}
        for f in fields(first):
            v = getattr(first, f.name)
            kw[f.name] = np.concatenate([getattr(p, f.name) for p in parts]) if isinstance(v, np.ndarray) else v
        return Metrics(**kw)

    def row(self, i: int) -> dict[str, Any]:
        """Plain-Python view of one mapping's metrics (JSON-ready)."""
        levels: dict[str, dict[str, dict[str, float]]] = {}
        for li, lname in enumerate(self.level_names):
            levels[lname] = {}
            for ti, tname in enumerate(self.tensor_names):
                levels[lname][tname] = {
                    "reads": _num(self.reads[i, li, ti]),
                    "fills": _num(self.fills[i, li, ti]),
                    "updates": _num(self.updates[i, li, ti]),
                    "energy_pj": float(self.energy_breakdown_pj[i, li, ti]),
                }
        return {
            "valid": bool(self.valid[i]),
            "reason": Reason(int(self.reason[i])).name.lower(),
            "cycles": _num(self.cycles[i]),
            "energy_pj": float(self.energy_pj[i]),
            "edp": float(self.edp[i]),
            "macs": int(self.macs),
            "utilization": float(self.utilization[i]),
            "compute_energy_pj": float(self.compute_energy_pj[i]),
            "levels": levels,
        }

    def table(self, i: int = 0) -> str:
        """A readable table of one mapping's metrics."""
        r = self.row(i)
        out = [
            f"cycles       {r['cycles']:,}",
            f"energy       {r['energy_pj']:,.1f} pJ  ({r['energy_pj'] / max(self.macs, 1):.3f} pJ/MAC)",
            f"EDP          {r['edp']:.4g} pJ*cycles",
            f"MACs         {self.macs:,}",
            f"utilization  {r['utilization']:.1%}",
        ]
        if not r["valid"]:
            out.append(f"INVALID: {r['reason']} at level {self.level_names[int(self.reason_level[i])] if self.reason_level[i] >= 0 else '-'}")
        out.append(f"{'level':<14}{'tensor':<10}{'reads':>16}{'fills':>16}{'updates':>16}{'energy pJ':>16}")
        for lname, per in r["levels"].items():
            for tname, c in per.items():
                if c["reads"] or c["fills"] or c["updates"]:
                    cells = [_count(c["reads"]), _count(c["fills"]), _count(c["updates"]), f"{c['energy_pj']:,.1f}"]
                    out.append(f"{lname:<14}{tname:<10}" + "".join(f" {v:>15}" for v in cells))
        out.append(f"{'compute':<24}{'':>48}{r['compute_energy_pj']:>16,.1f}")
        return "\n".join(out)


def _count(x: float) -> str:
    """A count for the table: whole counts as integers; a padded tensor's (scaled by the share
    of its words that exist) with one decimal."""
    x = float(x)
    return f"{round(x):,}" if abs(x - round(x)) < 1e-6 * max(1.0, abs(x)) else f"{x:,.1f}"


def _num(x: float) -> int | float:
    """Counts are integral; keep them ints in JSON when they are."""
    xf = float(x)
    return int(xf) if np.isfinite(xf) and xf == int(xf) else xf


@dataclass(frozen=True, slots=True, eq=False)
class ObjectiveMetrics:
    """What a search needs of `Metrics`, per mapping (n,): ``cycles``, ``energy_pj`` (inf
    where invalid), ``valid``, ``reason`` (`Reason` codes) and ``reason_level``."""

    cycles: FloatArray
    energy_pj: FloatArray
    valid: BoolArray
    reason: IntArray
    reason_level: IntArray

    def __len__(self) -> int:
        return int(self.cycles.shape[0])


@runtime_checkable
class CostModel(Protocol):
    """A batched cost model plugin (entry-point group ``accelmap.costmodels``)."""

    name: ClassVar[str]

    def evaluate(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        """Pure, deterministic, no I/O; invalid rows are marked, not raised."""
        ...

    def evaluate_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> Metrics:
        """The scalar reference path: same result as ``evaluate`` on a batch of one."""
        ...

