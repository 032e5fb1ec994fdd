"""Lower bounds no mapping can beat: compulsory traffic and minimum compute cycles.

Used to report how far a search result is from the floor: every element of every tensor
must move between the outermost level and the MACs at least once (compulsory traffic,
the "cold misses" of Hill and Smith's 3C model applied to each buffer level), and no
mapping does more than ``n_macs`` MACs per cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelmap._typing import BoolArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.workloads.problem import Problem

__all__ = ["LowerBounds", "lower_bounds"]


@dataclass(frozen=True, slots=True)
class LowerBounds:
    """What no mapping of the space can beat.

    tensor_words (n_tensors,): size of each tensor.
    compulsory_words (n_levels, n_tensors): words of each tensor that must be written
    into each level at least once (the whole tensor at every level that keeps it in every
    mapping of the space: the outermost level always, others when constraints or the arch
    force the keep; 0 where the level may bypass). For the output at the outermost level
    this is the final write-back.
    min_compute_cycles: ceil(MACs / n_macs), every MAC busy every cycle.
    min_energy_pj: MACs x energy per MAC plus, at every level, reading each compulsory
    word once and writing it once (per-access energies divided by the block size).
    """

    tensor_words: IntArray
    compulsory_words: IntArray
    min_compute_cycles: int
    min_energy_pj: float

    def describe(self, problem: Problem, arch: Arch) -> str:
        rows = [f"min compute cycles {self.min_compute_cycles:,}; min energy {self.min_energy_pj:,.4g} pJ"]
        for lv, level in enumerate(arch.levels):
            parts = ", ".join(f"{t.name} {int(self.compulsory_words[lv, ti]):,}"
                              for ti, t in enumerate(problem.tensors) if self.compulsory_words[lv, ti])
            rows.append(f"  {level.name}: {parts or '-'}")
        return "\n".join(rows)


def lower_bounds(problem: Problem, arch: Arch, must_keep: BoolArray | None = None) -> LowerBounds:
    """Lower bounds of ``problem`` on ``arch``.

    Parameters
    ----------
    must_keep
        (n_levels, n_tensors): levels that keep a tensor in every mapping considered (e.g.
        a `MapSpace`'s forced keep bits). Default: the outermost level only.
    """
    sizes = problem.tensor_sizes().astype(np.int64)
    if problem.has_padding:  # a padded tensor's halo is no traffic: only its existing words count
        padded = np.array([t.padded for t in problem.tensors])
        sizes = np.where(padded, np.rint(sizes * problem.existing_fraction()).astype(np.int64), sizes)
    if must_keep is None:
        must_keep = np.zeros((arch.n_levels, problem.n_tensors), dtype=bool)
        must_keep[0] = True
    comp: IntArray = (np.asarray(must_keep, dtype=bool) * sizes[None, :]).astype(np.int64)
    cycles = -(-problem.macs // arch.n_macs)
    energy = float(problem.macs) * arch.compute.energy_per_mac_pj
    out = problem.output_index
    for lv, level in enumerate(arch.levels):
        words = float(comp[lv].sum())
        if lv == 0:
            # outermost: operands read once, outputs written back once
            reads = words - float(comp[lv, out])
            energy += (reads * level.read_energy_pj + float(comp[lv, out]) * level.write_energy_pj) / level.block_words
        else:
            # every compulsory word written into the level once and read out once
            energy += words * (level.read_energy_pj + level.write_energy_pj) / level.block_words
    return LowerBounds(tensor_words=sizes, compulsory_words=comp, min_compute_cycles=int(cycles), min_energy_pj=energy)
