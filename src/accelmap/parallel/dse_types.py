"""The data of a design-space search: what a design-space file resolves to, what a
candidate evaluates to, and what a study yields.

* `Parameter` (one searched field of one level, and `FIELDS`, the fields it may set) and
  `DseSpec` (a resolved file: base arch, parameters, workloads, objectives, budgets, the
  inner mapping search; it turns a parameter assignment into an arch and an arch into
  search tasks);
* `Candidate`: one evaluated architecture (parameters, area, workload totals and their
  certified lower bounds);
* `TrialRecord` and `DseResult`: a study's trials, the base arch's evaluation and the front;
* `pareto_front` (the non-dominated candidates on area and the objectives) and
  `study_storage` (the Optuna storage URL of a study file).

`accelmap.parallel.dse` reads design-space files and runs the search that fills these
(and re-exports them); `accelmap.parallel.dse_outputs` writes them out and reads a study
back.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelmap.arch.area import with_level, without_level
from accelmap.arch.spec import Arch
from accelmap.parallel.sweep import SearchTask, spawn_seeds
from accelmap.workloads.problem import Problem

__all__ = [
    "FIELDS",
    "Parameter",
    "DseSpec",
    "Candidate",
    "TrialRecord",
    "DseResult",
    "pareto_front",
    "study_storage",
]

# Level fields a parameter may set, and their value type. ``bandwidth_words_per_cycle`` sets
# read and write bandwidth together; ``present`` keeps or removes the level.
FIELDS: dict[str, type] = {
    "capacity_words": int,
    "fanout_x": int,
    "fanout_y": int,
    "block_words": int,
    "read_bandwidth_words_per_cycle": float,
    "write_bandwidth_words_per_cycle": float,
    "bandwidth_words_per_cycle": float,
    "present": bool,
}
_METRIC = {"edp": "edp", "energy": "energy_pj", "cycles": "cycles"}


# --- the spec -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Parameter:
    """One searched field of one level: a list of ``values`` or a range ``low..high``."""

    level: str
    field: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False

    @property
    def name(self) -> str:
        return f"{self.level}.{self.field}"

    @property
    def kind(self) -> type:
        return FIELDS[self.field]

    def distribution(self) -> Any:
        """The Optuna distribution of this parameter."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.values is not None:
            return CategoricalDistribution(list(self.values))
        assert self.low is not None and self.high is not None
        if self.kind is int:
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        return FloatDistribution(float(self.low), float(self.high), log=self.log, step=self.step)

    def apply(self, arch: Arch, value: Any) -> Arch:
        """``arch`` with this parameter set to ``value`` (energies follow sizes)."""
        if self.field == "present":
            return arch if value else without_level(arch, self.level)
        if self.level not in arch.level_names:
            return arch  # removed by an earlier `present: false`
        if self.field == "bandwidth_words_per_cycle":
            return with_level(arch, self.level, read_bandwidth_words_per_cycle=float(value),
                              write_bandwidth_words_per_cycle=float(value))
        v = int(value) if self.kind is int else float(value)
        return with_level(arch, self.level, **{self.field: v})


@dataclass(frozen=True, slots=True, kw_only=True)
class DseSpec:
    """A resolved design-space file."""

    name: str
    base: Arch
    node_nm: int
    parameters: tuple[Parameter, ...]
    workloads: tuple[tuple[str | None, Problem], ...]
    objectives: tuple[str, ...] = ("edp", "area")
    area_budget_mm2: float | None = None
    power_budget_w: float | None = None
    trials: int = 40
    searcher: str = "tpe"
    seed: int = 0
    model: str = "loopnest"
    model_options: dict[str, Any] = field(default_factory=dict, hash=False)
    mapping_searcher: str = "anneal"
    mapping_budget: int | None = None
    mapping_time_limit_s: float | None = None
    mapping_objective: str = "edp"
    mapping_options: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def metric_objectives(self) -> tuple[str, ...]:
        """The objectives other than area."""
        return tuple(o for o in self.objectives if o != "area")

    @property
    def inner_seed(self) -> int:
        """The seed of every mapping search (one for all, so equal tasks share a key)."""
        return spawn_seeds(self.seed, 1)[0]

    def grid(self) -> list[dict[str, Any]] | None:
        """Every point of the grid when every parameter is a list of values, else None."""
        if any(p.values is None for p in self.parameters):
            return None
        names = [p.name for p in self.parameters]
        return [dict(zip(names, combo, strict=True))
                for combo in itertools.product(*(p.values or () for p in self.parameters))]

    def candidate(self, params: dict[str, Any]) -> Arch:
        """The arch of one parameter assignment, named ``base[level.field=value,...]``."""
        arch = self.base
        # Removals last, so every other field still finds its level.
        for p in sorted(self.parameters, key=lambda p: p.field == "present"):
            arch = p.apply(arch, params[p.name])
        label = ",".join(f"{p.name}={_fmt_value(params[p.name])}" for p in self.parameters)
        return dataclasses.replace(arch, name=f"{self.base.name}[{label}]", node_nm=self.node_nm)

    def tasks(self, arch: Arch) -> list[tuple[SearchTask, int, tuple[str, ...]]]:
        """One search task per distinct layer shape: ``(task, repeat total, layer names)``."""
        groups: dict[tuple[Any, ...], list[tuple[str | None, Problem]]] = {}
        for network, p in self.workloads:
            groups.setdefault((p.dims, p.tensors), []).append((network, p))
        out = []
        for members in groups.values():
            network, first = members[0]
            task = SearchTask(
                problem=first, arch=arch, model=self.model, model_options=dict(self.model_options),
                searcher=self.mapping_searcher,
                searcher_options=dict(self.mapping_options), seed=self.inner_seed,
                budget=self.mapping_budget, objective=self.mapping_objective,
                time_limit_s=self.mapping_time_limit_s, network=network, sweep=self.name,
            )
            repeat = sum(int(getattr(p, "repeat", 1)) for _, p in members)
            out.append((task, repeat, tuple(p.name for _, p in members)))
        return out


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# --- evaluated candidates -------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One evaluated architecture: its parameters, area and workload totals."""

    params: dict[str, Any]
    arch: Arch
    area_mm2: float
    status: str  # ok | infeasible (no mapping of some layer) | over_budget | error
    cycles: float = math.inf
    energy_pj: float = math.inf
    certified_gap: float | None = None
    n_layers: int = 0
    n_proven: int = 0
    error: str | None = None
    # Certified lower bounds of the workload totals: sums of the layers' bounds x repeat
    # (None when a layer has no bound). No mapping of this candidate does better.
    lb_cycles: float | None = None
    lb_energy_pj: float | None = None

    @property
    def edp(self) -> float:
        return self.cycles * self.energy_pj

    def lower_bound(self, objective: str) -> float | None:
        """Certified lower bound of a workload objective (EDP: product of the two sums)."""
        if objective == "area":
            return self.area_mm2
        if self.lb_cycles is None or self.lb_energy_pj is None:
            return None
        return {"cycles": self.lb_cycles, "energy": self.lb_energy_pj,
                "edp": self.lb_cycles * self.lb_energy_pj}[objective]

    def power_w(self) -> float:
        """Average power over the workload: energy / time."""
        if not (math.isfinite(self.cycles) and self.cycles > 0):
            return math.inf
        return self.energy_pj * 1e-12 / (self.cycles / self.arch.compute.clock_hz)

    def value(self, objective: str) -> float:
        if objective == "area":
            return self.area_mm2
        return float(getattr(self, _METRIC[objective]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": dict(self.params), "arch": self.arch.name, "area_mm2": self.area_mm2,
            "status": self.status, "cycles": _j(self.cycles), "energy_pj": _j(self.energy_pj),
            "edp": _j(self.edp), "power_w": _j(self.power_w()), "certified_gap": self.certified_gap,
            "n_layers": self.n_layers, "n_proven": self.n_proven, "error": self.error,
            "lb_cycles": self.lb_cycles, "lb_energy_pj": self.lb_energy_pj,
        }


def _j(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


# --- a study's result -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class TrialRecord:
    number: int
    candidate: Candidate
    feasible: bool
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DseResult:
    """Every trial of a study, the base arch's evaluation and the Pareto front."""

    spec: DseSpec
    trials: tuple[TrialRecord, ...]
    base: Candidate
    front: tuple[Candidate, ...]
    study_path: str
    store_path: str
    wall_s: float
    interrupted: bool = False
    n_distinct: int = 0
    n_searched: int = 0
    grid_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        objs = self.spec.objectives
        front = []
        for c in self.front:
            row = _front_row(c, objs)
            for o in objs:
                if o == "area":
                    continue
                row[f"{o}_lower_bound"] = c.lower_bound(o)
                base_lb = self.base.lower_bound(o) if self.base.status == "ok" else None
                # Better than the base arch for sure: this design's found value is below
                # every mapping the base could have (its certified bound).
                row[f"{o}_beats_base"] = c.value(o) < self.base.value(o)
                row[f"{o}_beats_base_certified"] = base_lb is not None and c.value(o) < base_lb
            front.append(row)
        return {
            "study": self.spec.name, "study_storage": self.study_path, "store": self.store_path,
            "objectives": list(objs), "searcher": self.spec.searcher, "seed": self.spec.seed,
            "inner_seed": self.spec.inner_seed, "trials": len(self.trials), "distinct_candidates": self.n_distinct,
            "searched_candidates": self.n_searched,
            "grid_size": self.grid_size, "area_budget_mm2": self.spec.area_budget_mm2,
            "power_budget_w": self.spec.power_budget_w, "node_nm": self.spec.node_nm,
            "wall_s": round(self.wall_s, 3), "interrupted": self.interrupted,
            "base": self.base.to_dict(),
            "front": front,
        }


def _front_row(c: Candidate, objectives: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"params": dict(c.params), "area_mm2": c.area_mm2}
    for o in objectives:
        if o != "area":
            row[o] = c.value(o)
    row.update(cycles=c.cycles, energy_pj=c.energy_pj, edp=c.edp, power_w=_j(c.power_w()),
               certified_gap=c.certified_gap, arch=c.arch.name)
    return row


def pareto_front(cands: Sequence[Candidate], objectives: Sequence[str]) -> list[Candidate]:
    """Non-dominated candidates on (area, every non-area objective), sorted by area.

    Area always joins the front's axes: a front trades silicon for workload cost. Equal
    points keep one representative (the first).
    """
    keys = ["area"] + [o for o in objectives if o != "area"]
    pts = [(tuple(c.value(k) for k in keys), c) for c in cands]
    out: list[tuple[tuple[float, ...], Candidate]] = []
    for v, c in pts:
        dominated = any(all(a <= b for a, b in zip(w, v, strict=True)) and w != v for w, _ in pts)
        if not dominated and all(w != v for w, _ in out):
            out.append((v, c))
    return [c for _, c in sorted(out, key=lambda vc: vc[0])]


def study_storage(path: str | Path) -> str:
    """The Optuna storage URL of the SQLite study file at ``path``."""
    return f"sqlite:///{Path(path).resolve()}"
