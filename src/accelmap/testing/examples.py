"""Small hand-built problems, archs and mappings for tests (no zoo or presets needed)."""

from __future__ import annotations

import numpy as np

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.mapper.mapping import Mapping
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

__all__ = ["small_conv", "small_arch", "trivial_mapping"]


def _tensor(name: str, coords: list[list[tuple[str, int]]], role: TensorRole) -> Tensor:
    return Tensor(
        name=name,
        projection=tuple(tuple(Term(dim=d, coef=c) for d, c in coord) for coord in coords),
        role=role,
    )


def small_conv(k: int = 8, c: int = 4, p: int = 6, q: int = 6, r: int = 3, s: int = 3, stride: int = 1) -> Problem:
    dims = tuple(Dim(name=n, bound=b) for n, b in zip("NKCPQRS", (1, k, c, p, q, r, s), strict=True))
    return Problem(
        name="small_conv",
        dims=dims,
        tensors=(
            _tensor("Weights", [[("K", 1)], [("C", 1)], [("R", 1)], [("S", 1)]], TensorRole.WEIGHT),
            _tensor("Inputs", [[("N", 1)], [("C", 1)], [("P", stride), ("R", 1)], [("Q", stride), ("S", 1)]], TensorRole.INPUT),
            _tensor("Outputs", [[("N", 1)], [("K", 1)], [("P", 1)], [("Q", 1)]], TensorRole.OUTPUT),
        ),
    )


def small_arch(glb_words: int = 1024, rf_words: int = 64, fanout: tuple[int, int] = (4, 4)) -> Arch:
    return Arch(
        name="small",
        levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_energy_pj=200, write_energy_pj=200),
            StorageLevel(name="GLB", capacity_words=glb_words, read_energy_pj=6, write_energy_pj=6,
                         fanout_x=fanout[0], fanout_y=fanout[1]),
            StorageLevel(name="RF", capacity_words=rf_words, read_energy_pj=1, write_energy_pj=1),
        ),
        compute=Compute(energy_per_mac_pj=1.0),
    )


def trivial_mapping(problem: Problem, arch: Arch) -> Mapping:
    """Everything temporal at the outermost level, every level keeps everything it may hold."""
    L, D = arch.n_levels, problem.n_dims
    temporal = np.ones((L, D), dtype=np.int64)
    temporal[0] = problem.bounds
    return Mapping(
        temporal=temporal,
        spatial=np.ones((L, D, 2), dtype=np.int64),
        order=np.tile(np.arange(D), (L, 1)),
        keep=arch.holds_mask(problem),
    )
