"""Write an `Arch` as a Timeloop architecture (v0.4 tree form) and its energy reference table.

The tree nests one ``subtree`` per fanout: the levels below a level with an X x Y fanout
sit in a subtree repeated X*Y times, with ``meshX`` giving the cumulative X extent, as in
Timeloop's exercises. Storage components are ``DRAM`` (unbounded levels), ``SRAM`` or
``regfile`` (by the area model's rule, `accelmap.arch.area.storage_kind`), with ``depth``
(capacity in blocks), ``block_size``, ``word_bits``, ``width`` and bandwidths; the MAC is an
``intmac``. Energies go to the ERT (``read``, ``write``, ``update`` per block; the MAC's
``mac_random``), which ``timeloop-model arch.yaml prob.yaml map.yaml ERT.yaml`` takes as is.
Timeloop keeps bypass rules in its constraints, not in the arch, so ``holds`` is not
written (it stays in the accelmap file), nor is the clock. `accelmap.arch.timeloop.arch_from_timeloop` reads both files back.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from accelmap.arch.area import storage_kind
from accelmap.arch.spec import Arch

__all__ = ["arch_to_timeloop", "save_timeloop"]


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


def arch_to_timeloop(arch: Arch) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(arch tree, ERT)`` as plain dicts.

    Examples
    --------
    >>> from accelmap.arch.presets import preset
    >>> tree, ert = arch_to_timeloop(preset("eyeriss-like"))
    >>> tree["architecture"]["version"], len(ert["ERT"]["tables"])
    (0.4, 6)
    """
    root: dict[str, Any] = {"name": "system", "local": []}
    if arch.node_nm is not None:
        root["attributes"] = {"technology": f"{arch.node_nm}nm"}
    node = root
    path = "system"
    tables: list[dict[str, Any]] = []
    mesh_x = 1
    instances = 1
    for lv in arch.levels:
        kind = storage_kind(lv)
        attrs: dict[str, Any] = {"word_bits": lv.word_bits, "block_size": lv.block_words,
                                 "width": lv.word_bits * lv.block_words}
        if lv.capacity_words is not None:
            attrs["depth"] = math.ceil(lv.capacity_words / lv.block_words)
        if lv.read_bandwidth_words_per_cycle is not None:
            attrs["read_bandwidth"] = _num(lv.read_bandwidth_words_per_cycle)
        if lv.write_bandwidth_words_per_cycle is not None:
            attrs["write_bandwidth"] = _num(lv.write_bandwidth_words_per_cycle)
        if instances > 1:
            attrs["meshX"] = mesh_x
        cls = {"off-chip": "DRAM", "sram": "SRAM", "regfile": "regfile"}[kind]
        node["local"].append({"name": lv.name, "class": cls, "attributes": attrs})
        tables.append({"name": f"{path}.{lv.name}", "actions": [
            {"name": "read", "energy": _num(lv.read_energy_pj)},
            {"name": "write", "energy": _num(lv.write_energy_pj)},
            {"name": "update", "energy": _num(lv.write_energy_pj)},
        ]})
        if lv.fanout > 1:
            sub_name = f"{lv.name}_fanout[0..{lv.fanout - 1}]"
            sub: dict[str, Any] = {"name": sub_name, "local": []}
            node.setdefault("subtree", []).append(sub)
            node = sub
            path = f"{path}.{sub_name}"
            mesh_x *= lv.fanout_x
            instances *= lv.fanout
    mac_attrs: dict[str, Any] = {"datawidth": arch.compute.word_bits}
    if instances > 1:
        mac_attrs["meshX"] = mesh_x
    node["local"].append({"name": arch.compute.name, "class": "intmac", "attributes": mac_attrs})
    tables.append({"name": f"{path}.{arch.compute.name}",
                   "actions": [{"name": "mac_random", "energy": _num(arch.compute.energy_per_mac_pj)}]})
    return ({"architecture": {"version": 0.4, "subtree": [root]}},
            {"ERT": {"version": 0.4, "tables": tables}})


def save_timeloop(arch: Arch, arch_path: str | Path, ert_path: str | Path) -> None:
    """Write the Timeloop arch and its ERT as YAML."""
    tree, ert = arch_to_timeloop(arch)
    head = f"# {arch.name}: written by accelmap; energies in {Path(ert_path).name}\n"
    Path(arch_path).write_text(head + yaml.safe_dump(tree, sort_keys=False))
    Path(ert_path).write_text(yaml.safe_dump(ert, sort_keys=False))
