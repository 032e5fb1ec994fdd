"""Small fakes for search tests: a tiny problem and arch, and a fast vectorized toy cost
model with a real trade-off (more spatial unrolling = fewer cycles; deeper reuse = less
energy). Used where the tests must not depend on the loopnest model's numbers."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.base import Metrics
from accelmap.mapper.check import check_batch
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.builders import matmul
from accelmap.workloads.problem import Problem


def tiny_problem(m: int = 8, n: int = 8, k: int = 4) -> Problem:
    return matmul("tiny", m=m, n=n, k=k)


def tiny_arch(glb_words: int = 96, rf_words: int = 12) -> Arch:
    return Arch(
        name="tiny-arch",
        levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=100.0, write_energy_pj=100.0),
            StorageLevel(name="GLB", capacity_words=glb_words, read_energy_pj=5.0, write_energy_pj=5.0,
                         fanout_x=2, fanout_y=2),
            StorageLevel(name="RF", capacity_words=rf_words, read_energy_pj=0.5, write_energy_pj=0.5),
        ),
        compute=Compute(energy_per_mac_pj=1.0),
    )


class ToyModel:
    """Vectorized stand-in for a cost model (not physics; a deterministic trade-off)."""

    name: ClassVar[str] = "toy"

    def __init__(self) -> None:
        self.calls = 0

    def evaluate(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        self.calls += 1
        n, L, T = len(mappings), mappings.n_levels, mappings.n_tensors
        chk = check_batch(problem, arch, mappings)
        fp = problem.footprint(mappings.tiles()).astype(np.float64)  # (n, L, T)
        steps = mappings.temporal.prod(axis=2).astype(np.float64)  # (n, L)
        outer = np.concatenate([np.ones((n, 1)), np.cumprod(steps, axis=1)[:, :-1]], axis=1)
        inst = arch.instances.astype(np.float64)[None, :, None]
        e_lvl = np.array([lv.read_energy_pj for lv in arch.levels])[None, :, None]
        fills = fp * outer[:, :, None] * mappings.keep * inst
        # loop order matters a little: the innermost loop of each level being relevant to
        # the output costs extra partial-sum traffic
        inner = mappings.order[:, :, -1]
        out_rel = problem.relevance[problem.output_index][inner]  # (n, L)
        fills = fills * (1.0 + 0.1 * out_rel[:, :, None])
        breakdown = fills * e_lvl
        compute = np.full(n, problem.macs * arch.compute.energy_per_mac_pj)
        energy = compute + breakdown.sum(axis=(1, 2))
        cycles = steps.prod(axis=1)
        valid = chk.valid
        z = np.zeros((n, L, T))
        return Metrics(
            cycles=np.where(valid, cycles, np.inf), energy_pj=np.where(valid, energy, np.inf),
            compute_energy_pj=compute, utilization=problem.macs / (cycles * arch.n_macs),
            valid=valid, reason=chk.reason, reason_level=chk.level, reads=fills, fills=fills,
            updates=z, energy_breakdown_pj=breakdown, multicast=z, spatial_reductions=z,
            macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
        )

    def evaluate_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> Metrics:
        return self.evaluate(problem, arch, mapping.as_batch())
