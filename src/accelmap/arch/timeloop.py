"""Read a Timeloop architecture (v0.3 / v0.4 tree) and its energy reference table (ERT).

The tree form nests ``subtree`` entries, each with a ``local`` list of components; a name
``PE[0..167]`` repeats a subtree (or a component) 168 times. Components are read outermost
first, in file order; storage components become `StorageLevel`s and the last arithmetic
component (class containing ``mac``, or ``compute``) the `Compute`. Network components are
ignored (their energies are zero in every case we read).

Per level: capacity = ``depth`` (or ``memory_depth``, ``entries``) x block size; block size
= ``block-size`` / ``block_size`` or the width over the word width; word width =
``word-bits`` / ``word_bits`` / ``datawidth``; bandwidths ``read_bandwidth``,
``write_bandwidth`` (``shared_bandwidth`` sets both), in words per cycle per instance.
Instances and mesh: ``meshX`` (or ``spatial: {meshX: ..}``), defaulting to all instances
along X; the X/Y fanout of a level is the ratio of its child's mesh to its own.

Energies, per access of one block (Timeloop's *vector access energy*): from the ERT when
given (actions ``read``; ``write``; ``update``, which Timeloop charges as a write;
``mac_random``/``compute`` for the MAC; where an action lists several argument variants
the largest energy is used), otherwise from ``vector-access-energy`` (both read and write)
or ``read_energy`` / ``write_energy`` attributes, and ``energy`` for the MAC.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import SpecError

__all__ = ["arch_from_timeloop", "ert_energies"]

_RANGE = re.compile(r"^(?P<base>[^\[]+)\[(?P<lo>\d+)\.\.(?P<hi>\d+)\]$")
_COMPUTE_HINTS = ("mac", "compute", "arithmetic", "alu")


def _split_name(name: str) -> tuple[str, int]:
    m = _RANGE.match(name.strip())
    if m is None:
        return name.strip(), 1
    lo, hi = int(m["lo"]), int(m["hi"])
    return m["base"].strip(), hi - lo + 1


def _attr(attrs: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in attrs and attrs[k] is not None:
            return attrs[k]
    return default


def _num(source: str, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{source}: {where} = {value!r}; expected a number")
    return float(value)


def _walk(node: dict, mult: int, path: str, source: str, out: list[dict]) -> None:
    """Depth-first: a node's local components (outer first), then its subtrees."""
    attrs = dict(node.get("attributes") or {})
    for i, comp in enumerate(node.get("local") or []):
        where = f"{path}.local[{i}]"
        if not isinstance(comp, dict) or "name" not in comp:
            raise SpecError(f"{source}: {where}: expected a component with a name")
        base, count = _split_name(str(comp["name"]))
        cattrs = dict(attrs)
        cattrs.update(comp.get("attributes") or {})
        spatial = comp.get("spatial") or {}
        if isinstance(spatial, dict):
            cattrs.update({k: v for k, v in spatial.items() if k in ("meshX", "meshY")})
        out.append({
            "name": base, "class": str(comp.get("class", "")), "subclass": str(comp.get("subclass", "")),
            "instances": mult * count, "attrs": cattrs, "where": where,
        })
    for i, sub in enumerate(node.get("subtree") or []):
        where = f"{path}.subtree[{i}]"
        if not isinstance(sub, dict):
            raise SpecError(f"{source}: {where}: expected a mapping with name/local/subtree")
        _, count = _split_name(str(sub.get("name", "")))
        sub = dict(sub)
        merged = dict(attrs)
        merged.update(sub.get("attributes") or {})
        sub["attributes"] = merged
        _walk(sub, mult * count, where, source, out)


def _components(data: dict, source: str) -> list[dict]:
    arch = data.get("architecture")
    if not isinstance(arch, dict):
        raise SpecError(f"{source}: expected a top-level `architecture:` mapping (Timeloop arch file)")
    out: list[dict] = []
    if "subtree" in arch:
        for i, sub in enumerate(arch["subtree"] or []):
            _, count = _split_name(str(sub.get("name", "")))
            _walk(sub, count, f"architecture.subtree[{i}]", source, out)
    elif "nodes" in arch:
        # v0.4 flat form (timeloopfe): a `spatial: {meshX, meshY}` on a container or a
        # component repeats it and everything after it; the meshes multiply down the list.
        mesh_x, mesh_y = 1, 1
        for i, node in enumerate(arch["nodes"] or []):
            where = f"architecture.nodes[{i}]"
            if not isinstance(node, dict):
                raise SpecError(f"{source}: {where}: expected a mapping")
            spatial = node.get("spatial") or {}
            if not isinstance(spatial, dict):
                raise SpecError(f"{source}: {where}.spatial = {spatial!r}; expected {{meshX: .., meshY: ..}}")
            mesh_x *= int(spatial.get("meshX", 1))
            mesh_y *= int(spatial.get("meshY", 1))
            if "class" not in node:  # a container
                continue
            cattrs = dict(node.get("attributes") or {})
            cattrs["meshX"] = mesh_x
            out.append({"name": str(node["name"]), "class": str(node["class"]),
                        "subclass": str(node.get("subclass", "")), "instances": mesh_x * mesh_y,
                        "attrs": cattrs, "where": where})
    else:
        raise SpecError(f"{source}: architecture: expected `subtree:` (v0.3/v0.4 tree) or `nodes:` (v0.4)")
    return out


def ert_energies(ert: dict | None, source: str = "<ERT>") -> dict[str, dict[str, float]]:
    """``{component base name: {action: energy pJ}}`` from a parsed ERT (largest variant)."""
    if ert is None:
        return {}
    root = ert.get("ERT", ert) if isinstance(ert, dict) else None
    if not isinstance(root, dict) or not isinstance(root.get("tables"), list):
        raise SpecError(f"{source}: expected `ERT: {{tables: [...]}}` (an Accelergy energy reference table)")
    table: dict[str, dict[str, float]] = {}
    for i, t in enumerate(root["tables"]):
        if not isinstance(t, dict) or "name" not in t:
            raise SpecError(f"{source}: ERT.tables[{i}]: expected {{name, actions}}")
        base = re.sub(r"\[\d+\.\.\d+\]", "", str(t["name"])).split(".")[-1].strip()
        actions: dict[str, float] = {}
        for j, a in enumerate(t.get("actions") or []):
            where = f"ERT.tables[{i}].actions[{j}]"
            if not isinstance(a, dict) or "name" not in a:
                raise SpecError(f"{source}: {where}: expected {{name, energy}}")
            variants = []
            if "energy" in a:
                variants.append(_num(source, f"{where}.energy", a["energy"]))
            for k, arg in enumerate(a.get("arguments") or []) if isinstance(a.get("arguments"), list) else []:
                if isinstance(arg, dict) and "energy" in arg:
                    variants.append(_num(source, f"{where}.arguments[{k}].energy", arg["energy"]))
            if not variants:
                raise SpecError(f"{source}: {where}: no energy given")
            actions[str(a["name"])] = max(variants)
        table[base] = actions
    return table


def _is_compute(comp: dict) -> bool:
    cls = (comp["class"] + " " + comp["subclass"]).lower()
    return any(h in cls for h in _COMPUTE_HINTS) and "buffer" not in cls and "sram" not in cls \
        and "dram" not in cls and "regfile" not in cls and "storage" not in cls


def arch_from_timeloop(data: dict, source: str, ert: dict | None = None) -> Arch:
    """Build an `Arch` from a parsed Timeloop arch YAML and, optionally, its ERT.

    Parameters
    ----------
    data
        Parsed arch file with a top-level ``architecture:``.
    source
        File name for messages; its stem (or folder, for a file named ``arch``) names the arch.
    ert
        Parsed ``ERT.yaml`` (Accelergy output), or None to use the energies in the arch.

    Raises
    ------
    SpecError
        Unknown layout, a component without a word width, mesh ratios that are not whole,
        or a storage level without any energy.
    """
    comps = _components(data, source)
    energies = ert_energies(ert, f"{source} (ERT)") if ert is not None else {}
    storage = [c for c in comps if not _is_compute(c)]
    computes = [c for c in comps if _is_compute(c)]
    if not storage:
        raise SpecError(f"{source}: no storage components found")
    if not computes:
        raise SpecError(f"{source}: no arithmetic component (class containing 'mac' or 'compute') found")
    mac = computes[-1]
    chain = storage + [mac]

    def mesh(c: dict) -> tuple[int, int]:
        inst = int(c["instances"])
        mx = int(_attr(c["attrs"], "meshX", "mesh_x", default=inst))
        if mx < 1 or inst % mx:
            raise SpecError(f"{source}: {c['where']} ({c['name']}): meshX = {mx} does not divide its {inst} instances")
        return mx, inst // mx

    levels = []
    for i, c in enumerate(storage):
        a = c["attrs"]
        where = f"{c['where']} ({c['name']})"
        word_bits = int(_attr(a, "word-bits", "word_bits", "datawidth", default=16))
        block = _attr(a, "block-size", "block_size", "n_words")
        if block is None:
            width = _attr(a, "width", "memory_width")
            block = max(1, int(width) // word_bits) if width is not None else 1
        block = int(block)
        is_dram = "dram" in c["class"].lower() or "dram" in c["subclass"].lower()
        depth = _attr(a, "depth", "memory_depth", "entries", "data_storage_depth")
        if is_dram or depth is None:
            capacity = None
        else:
            capacity = int(depth) * block
        rbw = _attr(a, "read_bandwidth", "read-bandwidth", "shared_bandwidth", "shared-bandwidth")
        wbw = _attr(a, "write_bandwidth", "write-bandwidth", "shared_bandwidth", "shared-bandwidth")
        e = energies.get(c["name"], {})
        vae = _attr(a, "vector-access-energy", "vector_access_energy")
        read_e = e.get("read", _attr(a, "read_energy", default=vae))
        write_e = e.get("write", e.get("update", _attr(a, "write_energy", default=vae)))
        if read_e is None or write_e is None:
            raise SpecError(
                f"{source}: {where}: no access energy; give an ERT (--energy ERT.yaml) with "
                "read/write actions for it, or a `vector-access-energy` attribute"
            )
        mx, my = mesh(c)
        cx, cy = mesh(chain[i + 1])
        if cx % mx or cy % my:
            raise SpecError(
                f"{source}: {where}: mesh {mx}x{my} does not divide the mesh {cx}x{cy} of "
                f"{chain[i + 1]['name']} below it"
            )
        levels.append(StorageLevel(
            name=c["name"], capacity_words=capacity, word_bits=word_bits, block_words=block,
            read_energy_pj=_num(source, f"{where} read energy", read_e),
            write_energy_pj=_num(source, f"{where} write energy", write_e),
            read_bandwidth_words_per_cycle=None if rbw is None else _num(source, f"{where}.read_bandwidth", rbw),
            write_bandwidth_words_per_cycle=None if wbw is None else _num(source, f"{where}.write_bandwidth", wbw),
            fanout_x=cx // mx, fanout_y=cy // my,
        ))
    me = energies.get(mac["name"], {})
    mac_e = None
    for k in ("mac_random", "compute", "mac", "multiply_accumulate"):
        if k in me:
            mac_e = me[k]
            break
    if mac_e is None:
        mac_e = _attr(mac["attrs"], "energy", "energy_per_op", "energy-per-op", "compute_energy")
    if mac_e is None:
        raise SpecError(f"{source}: {mac['where']} ({mac['name']}): no MAC energy (ERT action mac_random, or `energy`)")
    compute = Compute(
        name=mac["name"], energy_per_mac_pj=_num(source, f"{mac['where']} energy", mac_e),
        word_bits=int(_attr(mac["attrs"], "datawidth", "word-bits", "word_bits", default=16)),
    )
    stem = Path(source).stem
    name = Path(source).parent.name if stem in ("arch", "architecture") and Path(source).parent.name else stem
    try:
        return Arch(name=name or "timeloop-arch", levels=tuple(levels), compute=compute,
                    description=f"imported from Timeloop file {source}")
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from exc
