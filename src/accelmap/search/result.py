"""`SearchResult`: what a search found, how it got there, and how to reproduce it.

A result is plain data with a JSON round trip (:meth:`SearchResult.to_dict` /
:meth:`SearchResult.from_dict`, :meth:`save` / :meth:`load`). Mappings are written in
accelmap's mapping format (`accelmap.mapper.io.mapping_to_dict`) together with their four
arrays (``temporal``, ``spatial``, ``order``, ``keep``) as nested lists, which is what
:func:`mapping_from_json` reads back.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from accelmap._files import read_text
from accelmap.mapper.mapping import Mapping
from accelmap.search.objectives import ObjectiveSpec

__all__ = ["SearchResult", "History", "mapping_to_json", "mapping_from_json", "versions"]

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """Best scalar objective so far, recorded at every improvement and at the end.

    ``evaluations[i]``, ``seconds[i]`` (wall time since the start) and ``best[i]`` are
    parallel lists; ``best`` is non-increasing.
    """

    evaluations: tuple[int, ...] = ()
    seconds: tuple[float, ...] = ()
    best: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, list[Any]]:
        return {"evaluations": list(self.evaluations), "seconds": list(self.seconds),
                "best": [_jnum(b) for b in self.best]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> History:
        return History(evaluations=tuple(int(v) for v in d.get("evaluations", ())),
                       seconds=tuple(float(v) for v in d.get("seconds", ())),
                       best=tuple(float(v) for v in d.get("best", ())))

    def best_at(self, evaluations: int) -> float:
        """Best objective after ``evaluations`` evaluations (inf before the first valid one)."""
        out = math.inf
        for n, b in zip(self.evaluations, self.best, strict=False):
            if n <= evaluations:
                out = b
            else:
                break
        return out

    def best_at_seconds(self, seconds: float) -> float:
        """Best objective after ``seconds`` of wall time."""
        out = math.inf
        for s, b in zip(self.seconds, self.best, strict=False):
            if s <= seconds:
                out = b
            else:
                break
        return out


def _jnum(x: float) -> float | str:
    return float(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


def mapping_to_json(mapping: Mapping, problem: Any = None, arch: Any = None) -> dict[str, Any]:
    """A JSON-ready dict of one mapping (see the module docstring for the format)."""
    if problem is not None and arch is not None:
        from accelmap.mapper.io import mapping_to_dict

        return {"format": "accelmap.mapper.io", "mapping": mapping_to_dict(mapping, problem, arch),
                "arrays": _arrays(mapping)}
    return {"format": "arrays", "arrays": _arrays(mapping)}


def _arrays(m: Mapping) -> dict[str, Any]:
    return {"temporal": m.temporal.tolist(), "spatial": m.spatial.tolist(),
            "order": m.order.tolist(), "keep": m.keep.astype(bool).tolist()}


def mapping_from_json(d: dict[str, Any]) -> Mapping:
    """Inverse of :func:`mapping_to_json` (reads the arrays, which every format carries)."""
    a = d["arrays"]
    return Mapping(temporal=np.array(a["temporal"], dtype=np.int64),
                   spatial=np.array(a["spatial"], dtype=np.int64),
                   order=np.array(a["order"], dtype=np.int64),
                   keep=np.array(a["keep"], dtype=bool))


def versions() -> dict[str, str]:
    """Versions of accelmap and the libraries a search depends on."""
    out = {}
    for pkg in ("accelmap", "numpy", "optuna", "deap"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """The outcome of one search.

    Attributes
    ----------
    problem, arch, model, searcher
        Names of what was searched and with what.
    objective
        The objective minimised.
    best
        The best legal mapping found (None when none was found, e.g. interrupted early).
    best_x
        Its encoded vector in the MapSpace box.
    best_metrics
        ``Metrics.row`` of the best mapping (cycles, energy_pj, edp, per-level counts).
    best_objective
        Its scalar objective value (EDP for a Pareto objective).
    pareto
        For a Pareto objective: the non-dominated mappings, each a dict with ``mapping``
        (as :func:`mapping_to_json`), ``energy_pj``, ``cycles`` and ``edp``; else None.
    history
        Best so far against evaluations and seconds.
    n_evaluations, n_valid
        Mappings evaluated and how many of them were legal.
    elapsed_s
        Wall time of the search (summed over resumed runs).
    stop_reason
        ``"budget"``, ``"time"``, ``"early_stop"``, ``"exhausted"`` or ``"interrupted"``.
    invalid_reasons
        Histogram of why rejected mappings were illegal (``"capacity@GLB": 1234``).
    lower_bound
        Lower bounds of ``cycles``, ``energy_pj`` and ``edp`` over the whole space (each a
        bound of its own metric; an exact search adds ``objective``, its certified bound of
        the objective), or None.
    proven_optimal
        True only when an exact search covered or cut the whole space: no mapping of the
        space beats ``best``.
    bound_kind
        What produced ``lower_bound``: ``"exact"`` (an exact search's certified bound),
        ``"loopnest-root"`` (the exact mapper's root bound on the loopnest model),
        ``"compulsory"`` (compulsory traffic and full utilization) or ``"none"``.
    certificate
        For an exact search: nodes explored and cut, mappings evaluated, the certified
        lower bound and gap, the time and why it stopped (`accelmap.search.exact.Certificate`).
    config
        Every option of the search (budget, time limit, seed, searcher options, ...).
    seed
        The root seed.
    versions
        accelmap, numpy, optuna and deap versions.
    """

    problem: str
    arch: str
    model: str
    searcher: str
    objective: ObjectiveSpec
    best: Mapping | None
    best_x: tuple[int, ...] | None
    best_metrics: dict[str, Any] | None
    best_objective: float
    pareto: tuple[dict[str, Any], ...] | None = None
    history: History = field(default_factory=History)
    n_evaluations: int = 0
    n_valid: int = 0
    elapsed_s: float = 0.0
    stop_reason: str = "budget"
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    lower_bound: dict[str, float] | None = None
    proven_optimal: bool = False
    bound_kind: str = "compulsory"
    certificate: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    versions: dict[str, str] = field(default_factory=versions)
    best_mapping_json: dict[str, Any] | None = None

    # convenience ---------------------------------------------------------------------
    @property
    def cycles(self) -> float:
        return float(self.best_metrics["cycles"]) if self.best_metrics else math.inf

    @property
    def energy_pj(self) -> float:
        return float(self.best_metrics["energy_pj"]) if self.best_metrics else math.inf

    @property
    def edp(self) -> float:
        return float(self.best_metrics["edp"]) if self.best_metrics else math.inf

    def gap(self) -> dict[str, float] | None:
        """Best / lower bound for each metric the bound covers (1.0 = at the bound)."""
        if not self.lower_bound or not self.best_metrics:
            return None
        out = {}
        for key in ("cycles", "energy_pj", "edp"):
            lb = self.lower_bound.get(key)
            if lb and lb > 0 and math.isfinite(lb):
                out[key] = float(self.best_metrics[key]) / lb
        return out

    def objective_lower_bound(self) -> float | None:
        """The lower bound of the objective: an exact search's certified one, else the bound
        of the metric the objective names (None when there is none)."""
        if not self.lower_bound:
            return None
        if "objective" in self.lower_bound:
            return float(self.lower_bound["objective"])
        key = {"edp": "edp", "energy": "energy_pj", "cycles": "cycles"}.get(self.objective.name)
        return float(self.lower_bound[key]) if key and key in self.lower_bound else None

    def certified_gap(self) -> float | None:
        """best objective / its lower bound - 1 (0.0 when proven optimal; None without a bound)."""
        if self.proven_optimal:
            return 0.0
        lb = self.objective_lower_bound()
        if lb is None or not lb > 0 or not math.isfinite(self.best_objective):
            return None
        return max(self.best_objective / lb - 1.0, 0.0)

    # JSON ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``best`` holds ``cycles``, ``energy_pj``, ``edp``, ``mapping``."""
        best: dict[str, Any] | None = None
        if self.best is not None and self.best_metrics is not None:
            best = {
                "cycles": self.best_metrics["cycles"],
                "energy_pj": self.best_metrics["energy_pj"],
                "edp": self.best_metrics["edp"],
                "objective": _jnum(self.best_objective),
                "mapping": self.best_mapping_json or mapping_to_json(self.best),
                "x": list(self.best_x) if self.best_x is not None else None,
                "metrics": self.best_metrics,
            }
        return {
            "format_version": FORMAT_VERSION,
            "problem": self.problem,
            "arch": self.arch,
            "model": self.model,
            "searcher": self.searcher,
            "objective": self.objective.to_dict(),
            "best": best,
            "pareto": list(self.pareto) if self.pareto is not None else None,
            "history": self.history.to_dict(),
            "n_evaluations": self.n_evaluations,
            "n_valid": self.n_valid,
            "elapsed_s": self.elapsed_s,
            "stop_reason": self.stop_reason,
            "invalid_reasons": dict(self.invalid_reasons),
            "lower_bound": self.lower_bound,
            "proven_optimal": self.proven_optimal,
            "bound_kind": self.bound_kind,
            "certificate": self.certificate,
            "gap": self.gap(),
            "config": self.config,
            "seed": self.seed,
            "versions": dict(self.versions),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> SearchResult:
        """Inverse of :meth:`to_dict`."""
        best = d.get("best")
        return SearchResult(
            problem=d["problem"], arch=d["arch"], model=d["model"], searcher=d["searcher"],
            objective=ObjectiveSpec.from_dict(d["objective"]),
            best=mapping_from_json(best["mapping"]) if best else None,
            best_x=tuple(best["x"]) if best and best.get("x") is not None else None,
            best_metrics=best["metrics"] if best else None,
            best_objective=float(best["objective"]) if best else math.inf,
            pareto=tuple(d["pareto"]) if d.get("pareto") is not None else None,
            history=History.from_dict(d.get("history", {})),
            n_evaluations=int(d.get("n_evaluations", 0)), n_valid=int(d.get("n_valid", 0)),
            elapsed_s=float(d.get("elapsed_s", 0.0)), stop_reason=d.get("stop_reason", "budget"),
            invalid_reasons=dict(d.get("invalid_reasons", {})), lower_bound=d.get("lower_bound"),
            proven_optimal=bool(d.get("proven_optimal", False)),
            bound_kind=str(d.get("bound_kind", "compulsory" if d.get("lower_bound") else "none")),
            certificate=d.get("certificate"),
            config=dict(d.get("config", {})), seed=int(d.get("seed", 0)),
            versions=dict(d.get("versions", {})),
            best_mapping_json=best["mapping"] if best else None,
        )

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, path: str | Path) -> Path:
        """Write the result as JSON; returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.to_json() + "\n")
        return p

    @staticmethod
    def load(path: str | Path) -> SearchResult:
        return SearchResult.from_dict(json.loads(read_text(path)))

    def summary(self) -> str:
        """One line: problem, arch, best metrics, evaluations, time."""
        if self.best_metrics is None:
            return f"{self.problem} on {self.arch}: no legal mapping found in {self.n_evaluations:,} evaluations"
        return (f"{self.problem} on {self.arch}: cycles {self.cycles:,.0f}, energy {self.energy_pj:,.1f} pJ, "
                f"EDP {self.edp:.4g} ({self.searcher}, {self.n_evaluations:,} evaluations, "
                f"{self.elapsed_s:.1f} s, stopped: {self.stop_reason})"
                + (" - proven optimal" if self.proven_optimal else ""))
