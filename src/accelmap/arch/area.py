"""Silicon area of an `Arch`, and arch variants whose energies follow their sizes.

The model counts what the arch spec describes: every on-chip storage level (SRAM or
register file, by capacity, word width and banks) times its instances, and the MACs. It
does not count networks-on-chip, control, I/O or the off-chip DRAM and its PHY (the
Accelergy tables of Timeloop's exercises count none of them either), so it is the area of
the datapath and buffers, the part a design-space search trades.

Figures (45 nm, um^2), each from a published source:

* **SRAM**: ``115.0 * banks + 1.1083 * bits``. Fitted to the two SRAMs of the Accelergy
  45 nm table of Timeloop's ``eyeriss_like`` exercise (CACTI-derived), as printed in the
  reference stats in ``shared/reference/timeloop``: ``weights_spad`` (192 x 16 bit, 2 words
  per cycle) 3634.68 um^2 and ``shared_glb`` (64Ki x 16 bit, 4-word blocks at 16 words per
  cycle) 1,162,549 um^2. A level needs ``ceil(bandwidth / block_words)`` banks (one block
  per bank per cycle), so bandwidth costs periphery area.
* **Register file** (``bits <= REGFILE_MAX_BITS``): ``274.68 + 0.5469 * bits``, the line
  through the same table's ``ifmap_spad`` (12 x 16 bit, 379.68 um^2) and ``psum_spad``
  (16 x 16 bit, 414.68 um^2), which that exercise builds as register files.
* **MAC** (integer, ``n``-bit operands, ``2n``-bit accumulator): multiplier
  ``282 * (n / 8) ** 1.817`` (the power law through Horowitz's 8-bit, 282 um^2, and
  32-bit, 3495 um^2, multipliers) plus a ``2n``-bit adder at ``137 / 32`` um^2 per bit
  (Horowitz's 32-bit adder): M. Horowitz, "Computing's energy problem", ISSCC 2014,
  45 nm area table. A 16-bit MAC is 1131 um^2 (Accelergy's eyeriss table: 1239.5).

Other nodes scale every figure by the ratio of published high-density 6T SRAM bit-cell
areas (:data:`NODE_AREA_SCALE`); logic is assumed to shrink like the bit cell (an estimate:
logic density has kept closer to ideal scaling, so areas below 28 nm are conservative).

Energies follow sizes by the rule the presets use for buffers without a published figure
(`accelmap.arch.presets._sram_pj_per_bit`: per-bit access energy grows with the square
root of capacity, Horowitz's SRAM figures): :func:`with_level` changes a level and scales
its per-access energies by the rule's ratio, so a published figure stays where it was
published and moves with the size from there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from accelmap.arch.spec import Arch, StorageLevel
from accelmap.errors import SpecError

__all__ = [
    "NODE_AREA_SCALE",
    "REGFILE_MAX_BITS",
    "AreaItem",
    "AreaBreakdown",
    "arch_area",
    "area_mm2",
    "level_area_um2",
    "mac_area_um2",
    "storage_kind",
    "energy_scale",
    "with_level",
    "without_level",
]

# High-density 6T SRAM bit-cell area relative to 45 nm (0.346 um^2, Intel 45 nm, Mistry et
# al., IEDM 2007). 65 nm: 0.525 um^2 (estimate: 65 nm foundry cells were published at
# 0.499-0.57 um^2). 32 nm: 0.171 um^2 (Intel, IEDM 2008). 28 nm: 0.127 um^2 (TSMC 28 nm
# high-density cell). 22 nm: 0.092 um^2 (Intel 22 nm tri-gate, 2012). 16 nm: 0.070 um^2
# (TSMC 16FF+). 12 nm: 0.070 um^2 (estimate: 12FFC is an optical shrink of 16FF with the
# same cell library class). 7 nm: 0.027 um^2 (TSMC N7, IEDM 2016).
_BITCELL_UM2 = {65: 0.525, 45: 0.346, 32: 0.171, 28: 0.127, 22: 0.092, 16: 0.070, 12: 0.070, 7: 0.027}
NODE_AREA_SCALE: dict[int, float] = {k: round(v / _BITCELL_UM2[45], 4) for k, v in _BITCELL_UM2.items()}

# Calibration at 45 nm (see the module docstring).
_SRAM_BANK_UM2 = 115.0
_SRAM_BIT_UM2 = 1.10827
_RF_BASE_UM2 = 274.68
_RF_BIT_UM2 = (414.68 - 379.68) / (256 - 192)
# Buffers up to this many bits are register files (Timeloop's eyeriss_like exercise builds
# its 12- and 16-word spads, 192 and 256 bits, as register files and the 192-word one,
# 3072 bits, as SRAM).
REGFILE_MAX_BITS = 1024
_MUL8_UM2 = 282.0
_MUL32_UM2 = 3495.0
_ADD_BIT_UM2 = 137.0 / 32
_MUL_EXP = math.log(_MUL32_UM2 / _MUL8_UM2) / math.log(4.0)
_DEFAULT_NODE_NM = 45


def _scale(node_nm: int) -> float:
    try:
        return NODE_AREA_SCALE[node_nm]
    except KeyError:
        raise SpecError(
            f"node_nm = {node_nm!r}; the area model knows nodes {sorted(NODE_AREA_SCALE)} (nm); "
            "pick the nearest one"
        ) from None


def storage_kind(level: StorageLevel) -> str:
    """``"off-chip"`` (unbounded, e.g. DRAM), ``"regfile"`` or ``"sram"``."""
    if level.capacity_words is None:
        return "off-chip"
    return "regfile" if level.capacity_words * level.word_bits <= REGFILE_MAX_BITS else "sram"


def _banks(level: StorageLevel) -> int:
    bw = max(level.read_bandwidth_words_per_cycle or 0.0, level.write_bandwidth_words_per_cycle or 0.0)
    return max(1, math.ceil(bw / level.block_words - 1e-9)) if bw > 0 else 1


def level_area_um2(level: StorageLevel, node_nm: int = _DEFAULT_NODE_NM) -> float:
    """Area of one instance of ``level`` in um^2 (0 for an off-chip level)."""
    kind = storage_kind(level)
    if kind == "off-chip":
        return 0.0
    assert level.capacity_words is not None
    bits = level.capacity_words * level.word_bits
    if kind == "regfile":
        a45 = _RF_BASE_UM2 + _RF_BIT_UM2 * bits
    else:
        a45 = _SRAM_BANK_UM2 * _banks(level) + _SRAM_BIT_UM2 * bits
    return a45 * _scale(node_nm)


def mac_area_um2(word_bits: int, node_nm: int = _DEFAULT_NODE_NM) -> float:
    """Area of one integer MAC with ``word_bits`` operands and a double-width accumulator."""
    mul = _MUL8_UM2 * (word_bits / 8) ** _MUL_EXP
    return (mul + _ADD_BIT_UM2 * 2 * word_bits) * _scale(node_nm)


@dataclass(frozen=True, slots=True, kw_only=True)
class AreaItem:
    """One line of an area breakdown: a level (or the MACs) over all its instances."""

    name: str
    kind: str  # "sram", "regfile", "off-chip" or "mac"
    instances: int
    each_um2: float

    @property
    def total_mm2(self) -> float:
        return self.instances * self.each_um2 * 1e-6


@dataclass(frozen=True, slots=True, kw_only=True)
class AreaBreakdown:
    """Area of an arch by level; ``total_mm2`` sums every item."""

    arch: str
    node_nm: int
    items: tuple[AreaItem, ...]

    @property
    def total_mm2(self) -> float:
        return float(sum(it.total_mm2 for it in self.items))

    def by_name(self) -> dict[str, float]:
        """Item name -> mm^2."""
        return {it.name: it.total_mm2 for it in self.items}

    def describe(self) -> str:
        """A table: kind, instances, um^2 each, mm^2 in all, share of the total."""
        total = self.total_mm2
        rows = [f"area at {self.node_nm} nm: {total:.4g} mm^2 (storage levels and MACs; "
                "no NoC, control, I/O or DRAM PHY)",
                f"  {'component':<16}{'kind':>9}{'instances':>11}{'um^2 each':>13}{'mm^2':>11}{'share':>8}"]
        for it in self.items:
            share = it.total_mm2 / total if total > 0 else 0.0
            rows.append(f"  {it.name:<16}{it.kind:>9}{it.instances:>11,}{it.each_um2:>13,.1f}"
                        f"{it.total_mm2:>11.4f}{share:>8.1%}")
        return "\n".join(rows)


def arch_area(arch: Arch, node_nm: int | None = None) -> AreaBreakdown:
    """The area breakdown of ``arch``.

    Parameters
    ----------
    node_nm
        Process node; default ``arch.node_nm``, else 45 nm.

    Examples
    --------
    >>> from accelmap.arch.presets import preset
    >>> round(arch_area(preset("eyeriss-like")).total_mm2, 2)
    2.1
    """
    node = node_nm if node_nm is not None else (arch.node_nm or _DEFAULT_NODE_NM)
    _scale(node)
    items = [
        AreaItem(name=lv.name, kind=storage_kind(lv), instances=int(inst), each_um2=level_area_um2(lv, node))
        for lv, inst in zip(arch.levels, arch.instances, strict=True)
    ]
    items.append(AreaItem(name=arch.compute.name, kind="mac", instances=arch.n_macs,
                          each_um2=mac_area_um2(arch.compute.word_bits, node)))
    return AreaBreakdown(arch=arch.name, node_nm=node, items=tuple(items))


def area_mm2(arch: Arch, node_nm: int | None = None) -> float:
    """Total area of ``arch`` in mm^2 (see :func:`arch_area`)."""
    return arch_area(arch, node_nm).total_mm2


# --- variants whose energies follow their sizes --------------------------------------------
def energy_scale(old: StorageLevel, new: StorageLevel) -> float:
    """Factor on a level's per-access energy when it changes from ``old`` to ``new``.

    Per-bit energy follows the presets' rule (square root of capacity, clamped to 1 MiB
    banks and to the register-file floor); per-access energy is per block, so it also
    scales with ``block_words``. An unbounded level keeps its energy.
    """
    from accelmap.arch.presets import _sram_pj_per_bit

    f = new.block_words / old.block_words
    if old.capacity_words is not None and new.capacity_words is not None:
        b_old = old.capacity_words * old.word_bits // 8
        b_new = new.capacity_words * new.word_bits // 8
        f *= _sram_pj_per_bit(max(b_new, 1)) / _sram_pj_per_bit(max(b_old, 1))
    return f


_LEVEL_FIELDS = {f.name for f in dataclasses.fields(StorageLevel)}


def with_level(arch: Arch, level: str, **changes: Any) -> Arch:
    """``arch`` with fields of one level changed; its per-access energies follow the change.

    Energies follow capacity and block size by :func:`energy_scale` unless ``changes``
    sets them explicitly.

    Examples
    --------
    >>> from accelmap.arch.presets import preset
    >>> a = preset("eyeriss-like")
    >>> b = with_level(a, "shared_glb", capacity_words=4 * 65536)
    >>> round(b.levels[1].read_energy_pj / a.levels[1].read_energy_pj, 3)
    2.0
    """
    i = arch.level_index(level)
    unknown = sorted(set(changes) - _LEVEL_FIELDS)
    if unknown:
        raise SpecError(f"level fields {unknown} do not exist; fields: {sorted(_LEVEL_FIELDS)}")
    old = arch.levels[i]
    new = dataclasses.replace(old, **changes)
    f = energy_scale(old, new)
    if f != 1.0:
        energies = {k: round(getattr(old, k) * f, 6) for k in ("read_energy_pj", "write_energy_pj")
                    if k not in changes}
        new = dataclasses.replace(new, **energies)
    levels = list(arch.levels)
    levels[i] = new
    return dataclasses.replace(arch, levels=tuple(levels))


def without_level(arch: Arch, level: str) -> Arch:
    """``arch`` without one (inner) level; its fanout moves to the level above.

    The removed level's X and Y fanouts multiply into its parent's, so the MAC count stays
    the same; default constraints that name the level are dropped.
    """
    i = arch.level_index(level)
    if i == 0:
        raise SpecError(f"arch {arch.name}: level {level!r} is the outermost level and cannot be removed")
    levels = list(arch.levels)
    gone = levels.pop(i)
    parent = levels[i - 1]
    levels[i - 1] = dataclasses.replace(parent, fanout_x=parent.fanout_x * gone.fanout_x,
                                        fanout_y=parent.fanout_y * gone.fanout_y)
    constraints = []
    for key, value in arch.constraints:
        if isinstance(value, list):
            value = [v for v in value if not (isinstance(v, dict) and v.get("level") == level)]
        constraints.append((key, value))
    return dataclasses.replace(arch, levels=tuple(levels), constraints=tuple(constraints))
