"""What a search minimises: one metric, a weighted product of two, or a Pareto pair.

Every objective is *minimised*. A single objective maps `Metrics` to one value per mapping
(shape (n,)); a Pareto objective maps them to (n, 2) columns ``(energy_pj, cycles)``.
Invalid mappings always score ``inf``.

Written forms (CLI ``--objective`` and the ``objective=`` argument of the API):

* ``"edp"`` (default): energy x cycles, pJ x cycles;
* ``"energy"``: energy in pJ; ``"cycles"``: latency in cycles;
* ``"energy^A*cycles^B"``: the weighted product ``energy**A * cycles**B`` (A, B >= 0;
  ``"energy^2*cycles"`` is E^2 D, ``"energy*cycles^2"`` is E D^2);
* ``"energy,cycles"`` (or ``"pareto"``): both at once; the result holds their Pareto front.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, FloatArray
from accelmap.errors import SpecError

__all__ = ["Objective", "ObjectiveSpec", "parse_objective", "non_dominated"]


class Objective(str, Enum):
    """The closed set of objective kinds."""

    EDP = "edp"
    ENERGY = "energy"
    CYCLES = "cycles"
    WEIGHTED = "weighted"  # energy**a * cycles**b
    PARETO = "pareto"  # (energy, cycles) at once


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectiveSpec:
    """An objective kind with its exponents (used by `Objective.WEIGHTED` only).

    The scalar objective (:meth:`scalar`) is what "best" means: for a Pareto objective it
    is the product energy x cycles (EDP), so a Pareto search still reports one best mapping.
    """

    kind: Objective = Objective.EDP
    energy_exp: float = 1.0
    cycles_exp: float = 1.0

    def __post_init__(self) -> None:
        for key in ("energy_exp", "cycles_exp"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise SpecError(f"objective {key} = {v!r}; expected a finite number >= 0")
        if self.kind is Objective.WEIGHTED and self.energy_exp == 0 and self.cycles_exp == 0:
            raise SpecError("objective energy^0*cycles^0 is constant; give at least one exponent > 0")

    @property
    def n_objectives(self) -> int:
        """Columns of :meth:`values`: 2 for a Pareto objective, else 1."""
        return 2 if self.kind is Objective.PARETO else 1

    @property
    def is_pareto(self) -> bool:
        return self.kind is Objective.PARETO

    @property
    def name(self) -> str:
        """The written form, parseable by :func:`parse_objective`."""
        if self.kind is Objective.WEIGHTED:
            return f"energy^{_num(self.energy_exp)}*cycles^{_num(self.cycles_exp)}"
        if self.kind is Objective.PARETO:
            return "energy,cycles"
        return self.kind.value

    @property
    def column_names(self) -> tuple[str, ...]:
        """Names of the columns of :meth:`values`."""
        return ("energy_pj", "cycles") if self.is_pareto else (self.name,)

    def values(self, energy_pj: FloatArray, cycles: FloatArray, valid: BoolArray) -> FloatArray:
        """Objective values to minimise: (n,) or, for a Pareto objective, (n, 2).

        Parameters
        ----------
        energy_pj, cycles
            (n,) per-mapping energy (pJ) and latency (cycles).
        valid
            (n,) legality mask; invalid rows score ``inf``.
        """
        e = np.asarray(energy_pj, dtype=np.float64)
        c = np.asarray(cycles, dtype=np.float64)
        ok = np.asarray(valid, dtype=bool) & np.isfinite(e) & np.isfinite(c)
        if self.is_pareto:
            out = np.stack([e, c], axis=1)
            out[~ok] = np.inf
            return out
        return np.where(ok, self._scalar(e, c), np.inf)

    def scalar(self, energy_pj: FloatArray, cycles: FloatArray, valid: BoolArray) -> FloatArray:
        """(n,) the single value "best" minimises (EDP for a Pareto objective)."""
        e = np.asarray(energy_pj, dtype=np.float64)
        c = np.asarray(cycles, dtype=np.float64)
        ok = np.asarray(valid, dtype=bool) & np.isfinite(e) & np.isfinite(c)
        return np.where(ok, self._scalar(e, c), np.inf)

    def scalarize(self, values: FloatArray) -> FloatArray:
        """(n,) single values from the output of :meth:`values` (product for Pareto)."""
        v = np.asarray(values, dtype=np.float64)
        return v.prod(axis=1) if v.ndim == 2 else v

    def _scalar(self, e: FloatArray, c: FloatArray) -> FloatArray:
        with np.errstate(over="ignore", invalid="ignore"):
            if self.kind is Objective.ENERGY:
                return e
            if self.kind is Objective.CYCLES:
                return c
            if self.kind is Objective.WEIGHTED:
                return np.power(e, self.energy_exp) * np.power(c, self.cycles_exp)
            return e * c  # EDP and the Pareto product

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "energy_exp": self.energy_exp, "cycles_exp": self.cycles_exp,
                "name": self.name}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ObjectiveSpec:
        return ObjectiveSpec(kind=Objective(d["kind"]), energy_exp=float(d.get("energy_exp", 1.0)),
                             cycles_exp=float(d.get("cycles_exp", 1.0)))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


_TERM = re.compile(r"^(energy|cycles)(?:\^([0-9]*\.?[0-9]+))?$")


def parse_objective(spec: str | Objective | ObjectiveSpec) -> ObjectiveSpec:
    """Parse an objective from its written form (see the module docstring).

    Raises
    ------
    SpecError
        For anything else, listing the accepted forms.
    """
    if isinstance(spec, ObjectiveSpec):
        return spec
    if isinstance(spec, Objective):
        if spec is Objective.WEIGHTED:
            raise SpecError("objective 'weighted' needs exponents; write e.g. 'energy^2*cycles'")
        return ObjectiveSpec(kind=spec)
    if not isinstance(spec, str):
        raise SpecError(f"objective = {spec!r}; expected a string such as 'edp'")
    text = spec.strip().lower().replace(" ", "")
    simple = {"edp": Objective.EDP, "energy": Objective.ENERGY, "cycles": Objective.CYCLES,
              "delay": Objective.CYCLES, "latency": Objective.CYCLES,
              "pareto": Objective.PARETO, "energy,cycles": Objective.PARETO,
              "cycles,energy": Objective.PARETO}
    if text in simple:
        return ObjectiveSpec(kind=simple[text])
    parts = text.split("*")
    exps = {"energy": 0.0, "cycles": 0.0}
    ok = 1 <= len(parts) <= 2
    for part in parts if ok else ():
        m = _TERM.match(part)
        if not m or exps[m.group(1)] != 0.0:
            ok = False
            break
        exps[m.group(1)] = float(m.group(2)) if m.group(2) else 1.0
    if not ok:
        raise SpecError(
            f"objective {spec!r} is not understood; expected one of 'edp', 'energy', 'cycles', "
            "a weighted product like 'energy^2*cycles' or 'energy*cycles^0.5', "
            "or 'energy,cycles' for a Pareto front"
        )
    return ObjectiveSpec(kind=Objective.WEIGHTED, energy_exp=exps["energy"], cycles_exp=exps["cycles"])


def non_dominated(values: FloatArray) -> BoolArray:
    """Mask of the non-dominated rows of a minimisation problem (the Pareto front).

    A row is dominated if another row is <= in every column and < in at least one. Rows
    with any non-finite value are never on the front; of duplicate rows only the first
    is kept. Two columns use an O(n log n) sort-and-running-minimum sweep; more columns
    compare all pairs in chunks (O(n^2) memory-bounded).

    Parameters
    ----------
    values
        (n, m) objective values, lower is better.

    Returns
    -------
    (n,) bool mask.
    """
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[0]
    finite = np.isfinite(v).all(axis=1)
    mask = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(finite)
    if idx.size == 0:
        return mask
    f = v[idx]
    if f.shape[1] == 1:
        mask[idx[np.argmin(f[:, 0])]] = True
        return mask
    if f.shape[1] == 2:
        # sort by column 0, ties by column 1; a row is on the front iff its column 1 is
        # strictly below every earlier row's column 1.
        order = np.lexsort((f[:, 1], f[:, 0]))
        c1 = f[order, 1]
        prev_min = np.minimum.accumulate(np.concatenate([[np.inf], c1[:-1]]))
        keep = c1 < prev_min
        mask[idx[order[keep]]] = True
        return mask
    keep = np.ones(f.shape[0], dtype=bool)
    chunk = max(1, 2_000_000 // max(f.shape[0], 1))
    for s in range(0, f.shape[0], chunk):
        a = f[s:s + chunk, None, :]  # (c, 1, m)
        le = (f[None] <= a).all(axis=2)  # (c, n): row j <= row i everywhere
        lt = (f[None] < a).any(axis=2)
        dominated = np.any(le & lt, axis=1)
        keep[s:s + chunk] &= ~dominated
    # drop exact duplicates, keeping the first
    _, first = np.unique(f, axis=0, return_index=True)
    uniq = np.zeros(f.shape[0], dtype=bool)
    uniq[first] = True
    mask[idx[keep & uniq]] = True
    return mask
