"""The `Arch` spec: a chain of storage levels over a spatial array of MACs.

Levels run from outermost (index 0, usually DRAM) to innermost (registers next to the
MACs). Each level has a number of *instances*: the product of the fanouts of every level
above it. ``fanout_x * fanout_y`` of a level is how many instances of the next inner level
(or, for the innermost level, how many MACs) each of its instances feeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, FloatArray
from accelmap.errors import SpecError
from accelmap.workloads.problem import Problem

__all__ = ["StorageLevel", "Compute", "Arch"]


def _check_positive(owner: str, key: str, value: Any, *, allow_none: bool, kind: type = float) -> list[str]:
    if value is None:
        return [] if allow_none else [f"{owner}.{key} is missing; expected a number > 0"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return [f"{owner}.{key} = {value!r}; expected a number"]
    if kind is int and not isinstance(value, int):
        return [f"{owner}.{key} = {value!r}; expected an int >= 1"]
    if value <= 0:
        return [f"{owner}.{key} = {value!r}; expected {'an int >= 1' if kind is int else 'a number > 0'}"]
    return []


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageLevel:
    """One level of the memory hierarchy (one *kind* of buffer; it may have many instances).

    Energies are per access of one block of ``block_words`` words (Timeloop's vector
    access); with ``block_words = 1`` they are per word. Bandwidths are per instance.
    """

    name: str
    capacity_words: int | None  # None = unbounded (DRAM)
    word_bits: int = 16
    block_words: int = 1
    read_energy_pj: float = 0.0
    write_energy_pj: float = 0.0
    read_bandwidth_words_per_cycle: float | None = None  # None = unlimited
    write_bandwidth_words_per_cycle: float | None = None
    # Tensors this level may hold, by tensor name or role ("input", "weight", "output");
    # None = any tensor.
    holds: frozenset[str] | None = None
    # Instances of the next inner level (or MACs) fed by one instance of this level.
    fanout_x: int = 1
    fanout_y: int = 1
    multicast: bool = True  # the network below can send one word to many children
    spatial_reduction: bool = True  # the network below can add partial sums from children

    def __post_init__(self) -> None:
        owner = f"level {self.name!r}"
        problems: list[str] = []
        if not self.name:
            problems.append("level name is empty")
        if self.capacity_words is not None:
            problems += _check_positive(owner, "capacity_words", self.capacity_words, allow_none=True, kind=int)
        problems += _check_positive(owner, "word_bits", self.word_bits, allow_none=False, kind=int)
        problems += _check_positive(owner, "block_words", self.block_words, allow_none=False, kind=int)
        for key in ("read_energy_pj", "write_energy_pj"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                problems.append(f"{owner}.{key} = {v!r}; expected a number >= 0")
        for key in ("read_bandwidth_words_per_cycle", "write_bandwidth_words_per_cycle"):
            problems += _check_positive(owner, key, getattr(self, key), allow_none=True)
        problems += _check_positive(owner, "fanout_x", self.fanout_x, allow_none=False, kind=int)
        problems += _check_positive(owner, "fanout_y", self.fanout_y, allow_none=False, kind=int)
        if self.holds is not None and not isinstance(self.holds, frozenset):
            object.__setattr__(self, "holds", frozenset(self.holds))
        if problems:
            raise SpecError("; ".join(problems))

    @property
    def fanout(self) -> int:
        return self.fanout_x * self.fanout_y


@dataclass(frozen=True, slots=True, kw_only=True)
class Compute:
    """The MAC units at the bottom of the hierarchy."""

    name: str = "MAC"
    energy_per_mac_pj: float
    clock_hz: float = 1e9
    word_bits: int = 16

    def __post_init__(self) -> None:
        problems = []
        if isinstance(self.energy_per_mac_pj, bool) or not isinstance(self.energy_per_mac_pj, (int, float)) or self.energy_per_mac_pj < 0:
            problems.append(f"compute.energy_per_mac_pj = {self.energy_per_mac_pj!r}; expected a number >= 0")
        problems += _check_positive("compute", "clock_hz", self.clock_hz, allow_none=False)
        problems += _check_positive("compute", "word_bits", self.word_bits, allow_none=False, kind=int)
        if problems:
            raise SpecError("; ".join(problems))


@dataclass(frozen=True, slots=True, kw_only=True)
class Arch:
    """A memory hierarchy (outermost first) over a spatial array of MACs.

    ``constraints`` carries the preset's default mapping constraints as plain data (the
    array's native dataflow); `accelmap.mapper` interprets it, and a user may loosen it.
    """

    name: str
    levels: tuple[StorageLevel, ...]
    compute: Compute
    description: str = ""
    constraints: tuple[tuple[str, Any], ...] = field(default=(), compare=False, hash=False)
    # Process node (nm) the arch is built in: read by the area model (`accelmap.arch.area`)
    # only. It changes no access energy or mapping, so it is left out of task keys.
    node_nm: int | None = field(default=None, compare=False, hash=False, metadata={"key": False})

    def __post_init__(self) -> None:
        problems: list[str] = []
        if self.node_nm is not None and (
            isinstance(self.node_nm, bool) or not isinstance(self.node_nm, int) or self.node_nm < 1
        ):
            problems.append(f"node_nm = {self.node_nm!r}; expected an int >= 1 (process node in nm) or None")
        if not self.levels:
            problems.append("no storage levels; expected at least one (the outermost, e.g. DRAM)")
        names = [lv.name for lv in self.levels]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            problems.append(f"duplicate level names {dup}")
        if problems:
            raise SpecError(f"arch {self.name}: " + "; ".join(problems))

    # --- shapes -----------------------------------------------------------------------
    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)

    def level_index(self, name: str) -> int:
        try:
            return self.level_names.index(name)
        except ValueError:
            raise SpecError(
                f"arch {self.name}: unknown level {name!r}; levels: {list(self.level_names)}"
            ) from None

    @property
    def fanouts(self) -> np.ndarray:
        """(n_levels, 2) X and Y fanout below each level."""
        return np.array([[lv.fanout_x, lv.fanout_y] for lv in self.levels], dtype=np.int64)

    @property
    def instances(self) -> np.ndarray:
        """(n_levels,) physical instances of each level (product of fanouts above it)."""
        f = np.array([lv.fanout for lv in self.levels], dtype=np.int64)
        return np.concatenate([[1], np.cumprod(f)[:-1]]).astype(np.int64)

    @property
    def n_macs(self) -> int:
        """Total MAC units: the product of every fanout."""
        return math.prod(lv.fanout for lv in self.levels)

    @property
    def capacities_words(self) -> FloatArray:
        """(n_levels,) capacity in words, ``inf`` for unbounded levels."""
        return np.array(
            [np.inf if lv.capacity_words is None else float(lv.capacity_words) for lv in self.levels]
        )

    def holds_mask(self, problem: Problem) -> BoolArray:
        """(n_levels, n_tensors): True where the level may hold the tensor."""
        return np.stack([problem.tensors_matching(lv.holds) for lv in self.levels])

    def check_problem(self, problem: Problem) -> list[str]:
        """Every reason ``problem`` cannot run on this arch (empty list = fine)."""
        problems: list[str] = []
        holds = self.holds_mask(problem)
        for ti, t in enumerate(problem.tensors):
            if not holds[:, ti].any():
                problems.append(
                    f"no level of arch {self.name} may hold tensor {t.name} ({t.role.value}); "
                    "add its name or role to some level's `holds`"
                )
        if not holds[0].all():
            missing = [t.name for t, h in zip(problem.tensors, holds[0], strict=True) if not h]
            problems.append(
                f"outermost level {self.levels[0].name} of arch {self.name} cannot hold {missing}; "
                "the outermost level must hold every tensor"
            )
        return problems

    def describe(self) -> str:
        """Multi-line table of levels with sizes, fanout, bandwidth and energies (units)."""
        rows = [f"{self.name}: {self.n_macs} MACs at {self.compute.clock_hz / 1e6:g} MHz, "
                f"{self.compute.energy_per_mac_pj:g} pJ/MAC"]
        if self.description:
            rows.append(f"  {self.description}")
        head = f"  {'level':<14}{'instances':>10}{'capacity':>16}{'bits':>6}{'block':>6}" \
               f"{'read pJ':>10}{'write pJ':>10}{'rd w/cyc':>10}{'wr w/cyc':>10}{'fanout XxY':>12}  holds"
        rows.append(head)
        for lv, inst in zip(self.levels, self.instances, strict=True):
            cap = "unbounded" if lv.capacity_words is None else f"{lv.capacity_words:,} w"
            bw_r = "-" if lv.read_bandwidth_words_per_cycle is None else f"{lv.read_bandwidth_words_per_cycle:g}"
            bw_w = "-" if lv.write_bandwidth_words_per_cycle is None else f"{lv.write_bandwidth_words_per_cycle:g}"
            holds = "all" if lv.holds is None else ",".join(sorted(lv.holds))
            rows.append(
                f"  {lv.name:<14}{inst:>10}{cap:>16}{lv.word_bits:>6}{lv.block_words:>6}"
                f"{lv.read_energy_pj:>10.3g}{lv.write_energy_pj:>10.3g}{bw_r:>10}{bw_w:>10}"
                f"{f'{lv.fanout_x}x{lv.fanout_y}':>12}  {holds}"
            )
        return "\n".join(rows)
