"""Architectures: the `Arch` spec, cited presets and the arch file format."""

from __future__ import annotations

from accelmap.arch.presets import array_shape, preset, presets, systolic_array
from accelmap.arch.spec import Arch, Compute, StorageLevel

__all__ = [
    "Arch",
    "Compute",
    "StorageLevel",
    "preset",
    "presets",
    "systolic_array",
    "array_shape",
]
