"""Architectures: the `Arch` spec, cited presets and the arch file format.

``accelmap.arch.presets`` stays the submodule (``presets.presets()`` lists the names,
``presets.preset(name)`` builds one); :func:`preset` is re-exported here.
"""

from __future__ import annotations

from accelmap.arch import presets
from accelmap.arch.io import arch_from_dict, arch_to_dict, load_arch, load_arch_file, save_arch
from accelmap.arch.presets import array_shape, preset, systolic_array
from accelmap.arch.spec import Arch, Compute, StorageLevel

__all__ = [
    "Arch",
    "Compute",
    "StorageLevel",
    "presets",
    "preset",
    "systolic_array",
    "array_shape",
    "arch_to_dict",
    "arch_from_dict",
    "load_arch",
    "load_arch_file",
    "save_arch",
]
