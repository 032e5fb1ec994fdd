"""Architecture presets with cited sources.

Every preset names tensors by *role* in ``holds`` (``"input"``, ``"weight"``,
``"output"``), so any problem runs on any preset: a convolution, a depthwise convolution
(no ``K``), a matmul (A = input, B = weight, C = output) or a Timeloop problem file
(Inputs / Weights / Outputs).

Units: capacities in words of the level's ``word_bits``; bandwidths in words per cycle
of the compute clock, per instance; energies in pJ per access of ``block_words`` words.

Where a figure is published (a paper, a datasheet, a Timeloop/Accelergy example table),
the comment beside it says where from. Where it is not, the comment says *estimate* and
how it was derived. Energy estimates for buffers without a published figure come from one
rule, :func:`_sram_pj_per_bit`, and for other process nodes from :data:`_NODE_SCALE`, so
that presets stay comparable with each other even where their absolute numbers are rough.

The *systolic layout* shared by ``systolic`` and ``tpu-v1-like`` (and read by the
``systolic`` cost model) is five levels, outermost first::

    [0] DRAM         holds everything
    [1] ofmap SRAM   holds output        (TPU: accumulators)
    [2] filter SRAM  holds weight        (TPU: weight FIFO)
    [3] ifmap SRAM   holds input         (TPU: unified buffer); fanout_x = cols, fanout_y = rows
    [4] PE registers holds everything, a few words per PE, one MAC per PE

The array fanout sits on the ifmap SRAM level so that the PE register level has
``rows * cols`` instances of a few words each (capacity is per instance); use
:func:`array_shape` to read ``(rows, cols)`` of any arch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from accelmap._registry import did_you_mean
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import SpecError, UnknownPluginError

__all__ = ["presets", "preset", "systolic_array", "array_shape", "SYSTOLIC_LEVEL_ROLES"]

INPUT = frozenset({"input"})
WEIGHT = frozenset({"weight"})
OUTPUT = frozenset({"output"})
INPUT_OUTPUT = frozenset({"input", "output"})
INPUT_WEIGHT = frozenset({"input", "weight"})

# Which role each level of the systolic layout holds (None = every tensor); see the
# module docstring.
SYSTOLIC_LEVEL_ROLES: tuple[frozenset[str] | None, ...] = (None, OUTPUT, WEIGHT, INPUT, None)

KIB = 1024
MIB = 1024 * 1024

# --- shared energy rules (estimates, used only where no published figure exists) ------

# Energy relative to 45 nm for the same operation, rounded from the device-scaling
# tables of Stillmaker & Baas, "Scaling equations for the accurate prediction of CMOS
# device performance from 180 nm to 7 nm", Integration 58 (2017). Estimate.
_NODE_SCALE = {45: 1.0, 28: 0.5, 16: 0.25, 12: 0.2, 7: 0.11}

# Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014,
# 45 nm: 8-bit integer multiply 0.2 pJ, 8-bit add 0.03 pJ, 32-bit add 0.1 pJ,
# 16-bit float multiply 1.1 pJ, 16-bit float add 0.4 pJ.
_INT8_MAC_45NM_PJ = 0.2 + 0.03  # 8-bit multiply + 8-bit add
_FP16_FMA_45NM_PJ = 1.1 + 0.4  # fp16 multiply + fp16 add

# DRAM energy per bit transferred.
_LPDDR4_PJ_PER_BIT = 8.0  # 512 pJ per 64-bit access in the Accelergy table of Timeloop's eyeriss_like exercise
_DDR3_PJ_PER_BIT = 20.0  # Horowitz ISSCC 2014: 1.3-2.6 nJ per 64-bit DDR3 access = 20-40 pJ/bit; low end
_DDR4_PJ_PER_BIT = 15.0  # estimate: between DDR3 (above) and LPDDR4 (above)
_HBM2_PJ_PER_BIT = 3.9  # O'Connor et al., "Fine-grained DRAM", MICRO 2017: HBM2 ~3.9 pJ/bit

# Register-file energy per bit: the eyeriss_like ifmap_spad (12 x 16-bit words) costs
# 0.237 pJ per word in its 45 nm Accelergy table, i.e. ~0.0148 pJ/bit.
_REG_PJ_PER_BIT_45NM = 0.237 / 16


def _sram_pj_per_bit(capacity_bytes: int, node_nm: int = 45) -> float:
    """Estimated SRAM access energy per bit (pJ) for a buffer of ``capacity_bytes``.

    Horowitz (ISSCC 2014, 45 nm) gives 10 pJ, 20 pJ and 100 pJ per 64-bit read of an
    8 KB, 32 KB and 1 MB SRAM: about ``0.156 pJ/bit * sqrt(size / 8 KB)``. Larger buffers
    are built of banks, so the size is clamped to 1 MiB; very small ones are clamped to the
    register-file cost. Then scaled to the node by :data:`_NODE_SCALE`. An estimate.
    """
    size = min(capacity_bytes, MIB)
    e45 = max(0.156 * math.sqrt(size / (8 * KIB)), _REG_PJ_PER_BIT_45NM)
    return e45 * _NODE_SCALE[node_nm]


def _sram_pj(capacity_bytes: int, word_bits: int, node_nm: int = 45, block_words: int = 1) -> float:
    """Estimated energy (pJ) of one ``block_words``-word access; see :func:`_sram_pj_per_bit`."""
    return round(_sram_pj_per_bit(capacity_bytes, node_nm) * word_bits * block_words, 4)


def _words_per_cycle(bytes_per_s: float, clock_hz: float, word_bits: int) -> float:
    """Bandwidth in words per cycle: bytes/s / cycles/s / bytes per word."""
    return round(bytes_per_s / clock_hz / (word_bits / 8), 4)


# --- presets ------------------------------------------------------------------------


def _eyeriss_like() -> Arch:
    # Chen et al., "Eyeriss: An energy-efficient reconfigurable accelerator for deep CNNs",
    # JSSC 52(1), 2017: 12 x 14 PEs, 108 KB global buffer, per-PE spads of 12 (ifmap),
    # 224 (filter) and 24 (psum) 16-bit words, 200 MHz. Sizes, bandwidths and energies below
    # follow Timeloop's eyeriss_like exercise (timeloop-accelergy-exercises, 45 nm Accelergy
    # table) as run for ../shared/reference/timeloop: 128 KB GLB, spads 12 / 192 / 16 words.
    # Per-action energies were recovered exactly from that run's stats (reads and
    # fills/updates counts against per-level energy totals).
    # Timeloop's DummyBuffer level (no storage, only there to express the 14 x 12 fanout in
    # two steps) is folded into the GLB's fanout.
    word = 16
    dram = StorageLevel(
        name="DRAM",
        capacity_words=None,
        word_bits=word,
        # block_words = 4 at 512 pJ per block (not 1 at 128 pJ): the exercise's DRAM is a
        # 64-bit interface moving 4 16-bit words per access, and Timeloop charges
        # ceil(count / 4) accesses; keeping the block lets loopnest reproduce the reference.
        block_words=4,
        read_energy_pj=512.0,  # LPDDR4-class 8 pJ/bit x 64 bits (Accelergy table)
        write_energy_pj=512.0,
        read_bandwidth_words_per_cycle=None,  # unlimited, as in the exercise
        write_bandwidth_words_per_cycle=None,
    )
    glb = StorageLevel(
        name="shared_glb",
        capacity_words=64 * KIB,  # 64Ki 16-bit words = 128 KB (exercise; the chip has 108 KB)
        word_bits=word,
        block_words=4,  # 64-bit wide SRAM (exercise)
        read_energy_pj=74.144,  # per 4-word block = 18.5 pJ per 16-bit word (reference run)
        write_energy_pj=75.215,  # per 4-word block (reference run)
        read_bandwidth_words_per_cycle=16.0,  # exercise: 16 words/cycle
        write_bandwidth_words_per_cycle=16.0,
        holds=INPUT_OUTPUT,  # weights bypass the GLB (exercise's arch constraints)
        fanout_x=14,  # 14 x 12 PEs (instances "168 (14*12)" in the reference stats)
        fanout_y=12,
    )
    ifmap = StorageLevel(
        name="ifmap_spad",
        capacity_words=12,  # JSSC 2017 and exercise
        word_bits=word,
        read_energy_pj=0.237,  # reference run, per word read or written
        write_energy_pj=0.237,
        read_bandwidth_words_per_cycle=2.0,  # exercise
        write_bandwidth_words_per_cycle=2.0,
        holds=INPUT,
    )
    weights = StorageLevel(
        name="weights_spad",
        capacity_words=192,  # exercise (the chip: 224)
        word_bits=word,
        read_energy_pj=1.586,  # reference run
        write_energy_pj=1.586,
        read_bandwidth_words_per_cycle=2.0,
        write_bandwidth_words_per_cycle=2.0,
        holds=WEIGHT,
    )
    psum = StorageLevel(
        name="psum_spad",
        capacity_words=16,  # exercise (the chip: 24)
        word_bits=word,
        read_energy_pj=0.251,  # reference run
        write_energy_pj=0.251,
        read_bandwidth_words_per_cycle=2.0,
        write_bandwidth_words_per_cycle=2.0,
        holds=OUTPUT,
    )
    return Arch(
        name="eyeriss-like",
        levels=(dram, glb, ifmap, weights, psum),
        node_nm=45,  # Timeloop exercise's Accelergy table is 45 nm
        # 2.2 pJ per 16-bit MAC: the exercise's 45 nm Accelergy table, as used in the
        # reference run ("Compute energy: 2.20 pJ"); 200 MHz from JSSC 2017.
        compute=Compute(name="MAC", energy_per_mac_pj=2.2, clock_hz=200e6, word_bits=word),
        description=(
            "Eyeriss-like row-stationary array, 14x12 PEs, per-PE ifmap/weight/psum spads "
            "(Chen et al., JSSC 2017; Timeloop eyeriss_like exercise, 45 nm Accelergy energies)"
        ),
    )


def _simba_like() -> Arch:
    # Shao et al., "Simba: Scaling deep-learning inference with multi-chip-module-based
    # architecture", MICRO 2019. One chiplet: 16 PEs; each PE has 8 vector MAC units of 8
    # lanes (64 8-bit MACs per PE, 1024 per chiplet), an 8 KB input buffer, a 32 KB weight
    # buffer, a 3 KB accumulation buffer (24-bit partial sums); a 64 KB global PE buffer
    # per chiplet. Single-chiplet view: the package's DRAM and chiplet-to-chiplet network
    # are folded into one DRAM level. 16 nm.
    word = 8
    node = 16
    clock = 1.8e9  # estimate: 128 TOPS over 36 chiplets x 1024 MACs x 2 ops implies ~1.74 GHz
    dram = StorageLevel(
        name="DRAM",
        capacity_words=None,
        word_bits=word,
        read_energy_pj=_LPDDR4_PJ_PER_BIT * word,  # estimate: LPDDR4-class DRAM
        write_energy_pj=_LPDDR4_PJ_PER_BIT * word,
        # estimate: 100 GB/s per chiplet (the MICRO 2019 ground-referenced signalling links
        # run at 100 GB/s per chiplet direction) / 1.8 GHz / 1 byte = 55.6 words/cycle
        read_bandwidth_words_per_cycle=_words_per_cycle(100e9, clock, word),
        write_bandwidth_words_per_cycle=_words_per_cycle(100e9, clock, word),
    )
    gb = StorageLevel(
        name="GlobalBuffer",
        capacity_words=64 * KIB,  # 64 KB global PE buffer (MICRO 2019)
        word_bits=word,
        block_words=8,  # estimate: 64-bit access, one vector of 8 lanes
        read_energy_pj=_sram_pj(64 * KIB, word, node, 8),  # estimate (rule), per 8-word block
        write_energy_pj=_sram_pj(64 * KIB, word, node, 8),
        read_bandwidth_words_per_cycle=64.0,  # estimate: one 8-word vector to 8 PEs per cycle
        write_bandwidth_words_per_cycle=64.0,
        holds=INPUT_OUTPUT,  # weights stream from DRAM to the PE weight buffers (MICRO 2019)
        fanout_x=4,  # 16 PEs in a 4 x 4 mesh (MICRO 2019)
        fanout_y=4,
    )
    inbuf = StorageLevel(
        name="PEInputBuffer",
        capacity_words=8 * KIB,  # 8 KB (MICRO 2019)
        word_bits=word,
        block_words=8,  # one 8-lane vector per access (estimate)
        read_energy_pj=_sram_pj(8 * KIB, word, node, 8),  # estimate (rule)
        write_energy_pj=_sram_pj(8 * KIB, word, node, 8),
        read_bandwidth_words_per_cycle=8.0,  # one 8-wide input vector per cycle, broadcast to 8 vector MACs
        write_bandwidth_words_per_cycle=8.0,
        holds=INPUT,
    )
    wbuf = StorageLevel(
        name="PEWeightBuffer",
        capacity_words=32 * KIB,  # 32 KB (MICRO 2019)
        word_bits=word,
        block_words=8,
        read_energy_pj=_sram_pj(32 * KIB, word, node, 8),  # estimate (rule)
        write_energy_pj=_sram_pj(32 * KIB, word, node, 8),
        read_bandwidth_words_per_cycle=64.0,  # 8 vector MACs x 8 lanes of weights per cycle
        write_bandwidth_words_per_cycle=8.0,  # estimate
        holds=WEIGHT,
        fanout_x=8,  # 8 vector MAC units per PE, one accumulation-buffer slice each
    )
    accu = StorageLevel(
        name="PEAccuBuffer",
        capacity_words=128,  # 3 KB / 24-bit = 1024 partial sums per PE = 128 per vector MAC
        word_bits=24,  # 24-bit partial sums (MICRO 2019)
        read_energy_pj=_sram_pj(3 * KIB // 8, 24, node),  # estimate (rule), one 384 B slice
        write_energy_pj=_sram_pj(3 * KIB // 8, 24, node),
        read_bandwidth_words_per_cycle=1.0,  # one partial sum per vector MAC per cycle
        write_bandwidth_words_per_cycle=1.0,
        holds=OUTPUT,
        fanout_y=8,  # 8 lanes per vector MAC, reduced into one partial sum
    )
    wregs = StorageLevel(
        name="PEWeightRegs",
        capacity_words=1,  # one weight register per lane (Timeloop simba_like exercise)
        word_bits=word,
        read_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node], 4),  # estimate
        write_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node], 4),
        holds=WEIGHT,
    )
    return Arch(
        name="simba-like",
        levels=(dram, gb, inbuf, wbuf, accu, wregs),
        node_nm=node,
        compute=Compute(
            name="MAC",
            energy_per_mac_pj=round(_INT8_MAC_45NM_PJ * _NODE_SCALE[node], 4),  # estimate: int8 MAC at 16 nm
            clock_hz=clock,
            word_bits=word,
        ),
        description=(
            "Simba-like chiplet: 16 PEs x 8 vector MACs x 8 lanes, per-PE input/weight/"
            "accumulation buffers, 64 KB global buffer (Shao et al., MICRO 2019); energies estimated"
        ),
    )


def _systolic_levels(
    *,
    rows: int,
    cols: int,
    word_bits: int,
    names: tuple[str, str, str, str, str],
    capacities_words: tuple[int, int, int],
    ofmap_word_bits: int,
    sram_energy_pj: tuple[float, float, float],
    dram_energy_pj: float,
    dram_bandwidth_words_per_cycle: float | None,
    pe_energy_pj: float,
) -> tuple[StorageLevel, ...]:
    """The five levels of the systolic layout (see the module docstring)."""
    ofmap_cap, filter_cap, ifmap_cap = capacities_words
    e_of, e_f, e_if = sram_energy_pj
    return (
        StorageLevel(
            name=names[0],
            capacity_words=None,
            word_bits=word_bits,
            read_energy_pj=dram_energy_pj,
            write_energy_pj=dram_energy_pj,
            read_bandwidth_words_per_cycle=dram_bandwidth_words_per_cycle,
            write_bandwidth_words_per_cycle=dram_bandwidth_words_per_cycle,
        ),
        StorageLevel(
            name=names[1],
            capacity_words=ofmap_cap,
            word_bits=ofmap_word_bits,
            read_energy_pj=e_of,
            write_energy_pj=e_of,
            # one output per column per cycle leaves the array (drain of one row of PEs)
            read_bandwidth_words_per_cycle=float(cols),
            write_bandwidth_words_per_cycle=float(cols),
            holds=OUTPUT,
        ),
        StorageLevel(
            name=names[2],
            capacity_words=filter_cap,
            word_bits=word_bits,
            read_energy_pj=e_f,
            write_energy_pj=e_f,
            # one filter word per column per cycle enters the array
            read_bandwidth_words_per_cycle=float(cols),
            write_bandwidth_words_per_cycle=float(cols),
            holds=WEIGHT,
        ),
        StorageLevel(
            name=names[3],
            capacity_words=ifmap_cap,
            word_bits=word_bits,
            read_energy_pj=e_if,
            write_energy_pj=e_if,
            # one ifmap word per row per cycle enters the array
            read_bandwidth_words_per_cycle=float(rows),
            write_bandwidth_words_per_cycle=float(rows),
            holds=INPUT,
            fanout_x=cols,
            fanout_y=rows,
        ),
        StorageLevel(
            name=names[4],
            # one ifmap, one filter and one partial-sum register per PE (SCALE-Sim's PE)
            capacity_words=3,
            word_bits=word_bits,
            read_energy_pj=pe_energy_pj,
            write_energy_pj=pe_energy_pj,
            holds=None,
        ),
    )


def _systolic_constraints(names: tuple[str, ...]) -> tuple[tuple[str, object], ...]:
    """Default mapping constraints of the systolic layout, as ``Arch.constraints`` plain data.

    Only what the hardware fixes for every cost model: each SRAM buffers its operand
    (SCALE-Sim's double-buffered ifmap / filter / ofmap SRAMs never bypass), and the array
    unrolls only GEMM dims (``@irrelevant:<role>``: dims that leave one of the three tensors
    out; a dim indexing all three, e.g. groups, repeats the GEMM and is never on the
    array). Which dims sit on rows and columns and what the PE registers keep (the
    dataflow) stay free: one MapSpace cannot say "one GEMM class per array axis" (its
    rules are per dim), so the ``systolic`` cost model searches one sub-space per dataflow
    instead (`accelmap.costmodels.systolic_variants.systolic_variants`).
    """
    gemm = ["@irrelevant:input", "@irrelevant:weight", "@irrelevant:output"]
    return (
        ("keep", [
            {"level": names[1], "keep": ["output"]},
            {"level": names[2], "keep": ["weight"]},
            {"level": names[3], "keep": ["input"]},
        ]),
        ("spatial", [{"level": names[3], "x": list(gemm), "y": list(gemm)}]),
    )


def systolic_array(
    rows: int = 128,
    cols: int = 128,
    ifmap_sram_kb: int = 64,
    filter_sram_kb: int = 64,
    ofmap_sram_kb: int = 64,
    dram_bandwidth_words_per_cycle: float | None = 10.0,
    word_bits: int = 8,
    clock_hz: float = 1e9,
    name: str | None = None,
) -> Arch:
    """A generic SCALE-Sim-style systolic array in the systolic layout.

    Defaults are SCALE-Sim's ``configs/scale.cfg`` (64 kB ifmap, filter and ofmap SRAM,
    ``Bandwidth: 10`` words per cycle, 1-byte words) on a 128 x 128 array, the array of
    the reference runs in ``../shared/reference/scalesim`` (upstream ``scale.cfg`` ships
    32 x 32: ``systolic_array(rows=32, cols=32)``).

    Parameters
    ----------
    rows, cols
        PE array shape (``ArrayHeight``, ``ArrayWidth``); ``rows * cols`` MACs.
    ifmap_sram_kb, filter_sram_kb, ofmap_sram_kb
        SRAM sizes in kB (1024 bytes), as in SCALE-Sim's config.
    dram_bandwidth_words_per_cycle
        DRAM interface bandwidth (SCALE-Sim's ``Bandwidth``), None = unlimited (its ``CALC``).
    word_bits
        Word size of every level (SCALE-Sim's default word is 1 byte).
    clock_hz
        Compute clock; SCALE-Sim counts cycles only, so 1 GHz is a convention.
    name
        Arch name; default ``systolic-<rows>x<cols>``.

    Returns
    -------
    Arch
        Levels DRAM, ofmap_sram, filter_sram, ifmap_sram, pe_reg. SCALE-Sim models no
        energy; the energies are estimates at 45 nm (see the module docstring).

    Examples
    --------
    >>> systolic_array(32, 32).n_macs
    1024
    """
    for key, value in (
        ("rows", rows),
        ("cols", cols),
        ("ifmap_sram_kb", ifmap_sram_kb),
        ("filter_sram_kb", filter_sram_kb),
        ("ofmap_sram_kb", ofmap_sram_kb),
        ("word_bits", word_bits),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"systolic_array: {key} = {value!r}; expected an int >= 1")
    bytes_per_word = word_bits / 8

    def words(kb: int) -> int:
        return max(1, int(kb * KIB // bytes_per_word))

    # int multiplier energy grows about with the square of its width (estimate), from
    # Horowitz's 8-bit figures at 45 nm.
    mac_pj = round(0.2 * (word_bits / 8) ** 2 + 0.03 * (word_bits / 8), 4)
    levels = _systolic_levels(
        rows=rows,
        cols=cols,
        word_bits=word_bits,
        names=("DRAM", "ofmap_sram", "filter_sram", "ifmap_sram", "pe_reg"),
        capacities_words=(words(ofmap_sram_kb), words(filter_sram_kb), words(ifmap_sram_kb)),
        ofmap_word_bits=word_bits,
        sram_energy_pj=(
            _sram_pj(ofmap_sram_kb * KIB, word_bits),
            _sram_pj(filter_sram_kb * KIB, word_bits),
            _sram_pj(ifmap_sram_kb * KIB, word_bits),
        ),
        dram_energy_pj=_LPDDR4_PJ_PER_BIT * word_bits,  # estimate: LPDDR4-class DRAM
        dram_bandwidth_words_per_cycle=dram_bandwidth_words_per_cycle,
        pe_energy_pj=round(_REG_PJ_PER_BIT_45NM * word_bits, 4),
    )
    return Arch(
        name=name or f"systolic-{rows}x{cols}",
        levels=levels,
        node_nm=45,  # energies above are 45 nm estimates
        constraints=_systolic_constraints(tuple(lv.name for lv in levels)),
        compute=Compute(name="MAC", energy_per_mac_pj=mac_pj, clock_hz=clock_hz, word_bits=word_bits),
        description=(
            f"SCALE-Sim-style {rows}x{cols} systolic array, {ifmap_sram_kb}/{filter_sram_kb}/"
            f"{ofmap_sram_kb} kB ifmap/filter/ofmap SRAM; energies estimated (45 nm)"
        ),
    )


def _systolic() -> Arch:
    # SCALE-Sim configs/scale.cfg: IfmapSramSzkB 64, FilterSramSzkB 64, OfmapSramSzkB 64,
    # Bandwidth 10 (words/cycle), 1-byte words; 128 x 128 as in the reference runs.
    return systolic_array(name="systolic")


def _tpu_v1_like() -> Arch:
    # Jouppi et al., "In-datacenter performance analysis of a tensor processing unit",
    # ISCA 2017: 256 x 256 8-bit MACs at 700 MHz, 24 MiB unified buffer (activations),
    # 4 MiB of 32-bit accumulators (4096 x 256 x 32 bit), weights from 8 GiB DDR3 at
    # 34 GB/s through a weight FIFO four 64 KiB tiles deep; 28 nm.
    # In the systolic layout the unified buffer holds inputs; the outputs of one layer are
    # held by the accumulators (the UB stores them again only as the next layer's input).
    word = 8
    node = 28
    clock = 700e6
    levels = _systolic_levels(
        rows=256,
        cols=256,
        word_bits=word,
        names=("DRAM", "accumulators", "weight_fifo", "unified_buffer", "pe_reg"),
        capacities_words=(
            4 * MIB // 4,  # 4 MiB of 32-bit words = 1 Mi words
            4 * 64 * KIB,  # 4 tiles x 64 KiB of 8-bit weights
            24 * MIB,  # 24 MiB of 8-bit words
        ),
        ofmap_word_bits=32,
        sram_energy_pj=(
            _sram_pj(4 * MIB, 32, node),  # estimate (rule)
            _sram_pj(256 * KIB, word, node),  # estimate (rule)
            _sram_pj(24 * MIB, word, node),  # estimate (rule; banked, clamped to 1 MiB banks)
        ),
        dram_energy_pj=_DDR3_PJ_PER_BIT * word,  # estimate: DDR3 (Horowitz 2014)
        # 34 GB/s / 700 MHz / 1 byte = 48.57 words/cycle (ISCA 2017)
        dram_bandwidth_words_per_cycle=_words_per_cycle(34e9, clock, word),
        pe_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node], 4),  # estimate
    )
    return Arch(
        name="tpu-v1-like",
        levels=levels,
        node_nm=node,
        constraints=_systolic_constraints(tuple(lv.name for lv in levels)),
        compute=Compute(
            name="MAC",
            energy_per_mac_pj=round(_INT8_MAC_45NM_PJ * _NODE_SCALE[node], 4),  # estimate: int8 MAC at 28 nm
            clock_hz=clock,
            word_bits=word,
        ),
        description=(
            "TPU-v1-like 256x256 int8 systolic array, 24 MiB unified buffer, 4 MiB accumulators, "
            "DDR3 34 GB/s, 700 MHz (Jouppi et al., ISCA 2017); energies estimated"
        ),
    )


def _nvdla_like() -> Arch:
    # NVDLA hardware architectural specification (nvdla.org/hw/v1/hwarch.html), nv_full
    # configuration: Atomic-C 64 x Atomic-K 32 = 2048 INT8 MACs (1024 at INT16/FP16) in 32
    # MAC cells of 64 multipliers each; a 512 KiB convolution buffer (16 banks x 32 KiB)
    # holding input feature data and weights; partial sums accumulate in the convolution
    # accumulator (CACC) and results go to memory through the SDP. nv_full is 16 nm (Xavier).
    word = 8
    node = 16
    clock = 1e9  # 1 GHz, the frequency of NVDLA's performance estimates for nv_full (estimate)
    dram = StorageLevel(
        name="DRAM",
        capacity_words=None,
        word_bits=word,
        block_words=64,  # 512-bit AXI data backbone (DBB) transfers (estimate: nv_full DBB width)
        read_energy_pj=_LPDDR4_PJ_PER_BIT * word * 64,  # estimate: LPDDR4 (Xavier-class), per 64 B
        write_energy_pj=_LPDDR4_PJ_PER_BIT * word * 64,
        read_bandwidth_words_per_cycle=64.0,  # estimate: one 512-bit beat per cycle
        write_bandwidth_words_per_cycle=64.0,
    )
    cbuf = StorageLevel(
        name="conv_buffer",
        capacity_words=512 * KIB,  # 512 KiB (hwarch: nv_full / large config)
        word_bits=word,
        block_words=64,  # one Atomic-C vector (64 bytes) per read
        read_energy_pj=_sram_pj(32 * KIB, word, node, 64),  # estimate (rule): one 32 KiB bank
        write_energy_pj=_sram_pj(32 * KIB, word, node, 64),
        # one Atomic-C feature vector (64 B) plus one Atomic-C weight vector per cycle
        read_bandwidth_words_per_cycle=128.0,
        write_bandwidth_words_per_cycle=64.0,  # estimate: one DBB beat
        holds=INPUT_WEIGHT,
    )
    cacc = StorageLevel(
        name="accumulator",
        capacity_words=4 * KIB,  # estimate: CACC assembly buffer of 4Ki 32-bit partial sums
        word_bits=32,
        read_energy_pj=_sram_pj(16 * KIB, 32, node),  # estimate (rule)
        write_energy_pj=_sram_pj(16 * KIB, 32, node),
        read_bandwidth_words_per_cycle=32.0,  # Atomic-K partial sums per cycle
        write_bandwidth_words_per_cycle=32.0,
        holds=OUTPUT,
        fanout_x=32,  # Atomic-K: 32 MAC cells, each one output channel
    )
    cell = StorageLevel(
        name="mac_cell",
        capacity_words=128,  # estimate: 64 active + 64 shadow weight registers per cell
        word_bits=word,
        read_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node], 4),  # estimate
        write_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node], 4),
        holds=WEIGHT,
        fanout_y=64,  # Atomic-C: 64 multipliers per cell, summed by the cell's adder tree
    )
    return Arch(
        name="nvdla-like",
        levels=(dram, cbuf, cacc, cell),
        node_nm=node,
        compute=Compute(
            name="MAC",
            energy_per_mac_pj=round(_INT8_MAC_45NM_PJ * _NODE_SCALE[node], 4),  # estimate: int8 at 16 nm
            clock_hz=clock,
            word_bits=word,
        ),
        description=(
            "NVDLA-like nv_full: 32 MAC cells x 64 INT8 multipliers (Atomic-K x Atomic-C), "
            "512 KiB convolution buffer (nvdla.org hwarch); energies and CACC size estimated"
        ),
    )


def _edge_tpu_like() -> Arch:
    # Public Edge TPU figures: 4 TOPS INT8 at 2 W (Coral product datasheets); "roughly
    # 8 MB of SRAM" to cache model parameters (Coral Edge TPU compiler documentation);
    # parameters that do not fit stream from host memory over the M.2 / mini-PCIe PCIe
    # Gen2 x1 link (Coral M.2 accelerator datasheet). The array shape and clock are not
    # published: 64 x 64 = 4096 INT8 MACs at 480 MHz gives 4096 x 2 x 480e6 = 3.9 TOPS
    # (estimate, consistent with 4 TOPS). Process node not published: 28 nm assumed.
    word = 8
    node = 28
    clock = 480e6  # estimate, see above
    dram = StorageLevel(
        name="host_DRAM",
        capacity_words=None,
        word_bits=word,
        read_energy_pj=_LPDDR4_PJ_PER_BIT * word,  # estimate: LPDDR4 host memory (link energy ignored)
        write_energy_pj=_LPDDR4_PJ_PER_BIT * word,
        # PCIe Gen2 x1: 500 MB/s / 480 MHz / 1 byte = 1.04 words/cycle
        read_bandwidth_words_per_cycle=_words_per_cycle(500e6, clock, word),
        write_bandwidth_words_per_cycle=_words_per_cycle(500e6, clock, word),
    )
    sram = StorageLevel(
        name="on_chip_sram",
        capacity_words=8 * MIB,  # ~8 MB (Coral compiler documentation)
        word_bits=word,
        block_words=64,  # estimate: one array-edge vector per access
        read_energy_pj=_sram_pj(8 * MIB, word, node, 64),  # estimate (rule; 1 MiB banks)
        write_energy_pj=_sram_pj(8 * MIB, word, node, 64),
        read_bandwidth_words_per_cycle=128.0,  # estimate: one row and one column vector per cycle
        write_bandwidth_words_per_cycle=64.0,
        holds=None,
        fanout_x=64,  # estimate: 64 x 64 PE array
        fanout_y=64,
    )
    pe = StorageLevel(
        name="pe_reg",
        capacity_words=3,  # one input, one weight, one partial sum per PE (estimate)
        word_bits=word,
        read_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node], 4),  # estimate
        write_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node], 4),
        holds=None,
    )
    return Arch(
        name="edge-tpu-like",
        levels=(dram, sram, pe),
        node_nm=node,
        compute=Compute(
            name="MAC",
            energy_per_mac_pj=round(_INT8_MAC_45NM_PJ * _NODE_SCALE[node], 4),  # estimate: int8 at 28 nm
            clock_hz=clock,
            word_bits=word,
        ),
        description=(
            "Edge-TPU-like 64x64 int8 array, ~8 MB on-chip SRAM, PCIe Gen2 x1 host link "
            "(Coral public figures; array shape, clock and energies estimated)"
        ),
    )


def _gpu_sm(
    *,
    name: str,
    clock_hz: float,
    n_sms: int,
    hbm_bytes_per_s: float,
    l2_bytes: int,
    l2_bytes_per_clock: float,
    smem_bytes: int,
    rf_bytes_per_subcore: int,
    tc_per_subcore: int,
    tc_fanout: tuple[int, int],
    tc_operand_words: int,
    node_nm: int,
    description: str,
) -> Arch:
    """One streaming multiprocessor of a GPU with tensor cores, FP16 operands.

    Chip-wide resources (HBM bandwidth, L2 capacity and bandwidth) are apportioned
    evenly over the SMs: a layer spread over every SM gives each SM ``1/n_sms`` of them.
    Levels: HBM share -> L2 share -> shared memory -> register file (one per sub-core,
    4 sub-cores) -> tensor-core operand registers -> FMA units. Every level may hold every
    tensor; on V100 the L2 share (~77 KB) is smaller than the shared memory, so a mapping
    that fills shared memory bypasses L2 (``keep``), as real kernels stream through it.
    """
    word = 16  # FP16 operands
    hbm = StorageLevel(
        name="HBM",
        capacity_words=None,
        word_bits=word,
        block_words=16,  # 32-byte DRAM sector (CUDA programming guide, device memory accesses)
        read_energy_pj=round(_HBM2_PJ_PER_BIT * word * 16, 4),  # HBM2 ~3.9 pJ/bit (O'Connor 2017)
        write_energy_pj=round(_HBM2_PJ_PER_BIT * word * 16, 4),
        read_bandwidth_words_per_cycle=_words_per_cycle(hbm_bytes_per_s / n_sms, clock_hz, word),
        write_bandwidth_words_per_cycle=_words_per_cycle(hbm_bytes_per_s / n_sms, clock_hz, word),
    )
    l2_share = l2_bytes // n_sms
    l2 = StorageLevel(
        name="L2",
        capacity_words=l2_share // 2,
        word_bits=word,
        block_words=16,  # 32-byte sector
        read_energy_pj=_sram_pj(l2_bytes, word, node_nm, 16),  # estimate (rule; 1 MiB banks)
        write_energy_pj=_sram_pj(l2_bytes, word, node_nm, 16),
        read_bandwidth_words_per_cycle=round(l2_bytes_per_clock / n_sms / 2, 4),
        write_bandwidth_words_per_cycle=round(l2_bytes_per_clock / n_sms / 2, 4),
    )
    smem = StorageLevel(
        name="shared_mem",
        capacity_words=smem_bytes // 2,
        word_bits=word,
        block_words=2,  # 32 banks x 4 bytes: one bank access carries two FP16 words
        read_energy_pj=_sram_pj(smem_bytes, word, node_nm, 2),  # estimate (rule)
        write_energy_pj=_sram_pj(smem_bytes, word, node_nm, 2),
        read_bandwidth_words_per_cycle=64.0,  # 128 bytes/clock per SM (32 banks x 4 B)
        write_bandwidth_words_per_cycle=64.0,
        fanout_x=4,  # 4 processing blocks (sub-cores) per SM
    )
    rf = StorageLevel(
        name="register_file",
        capacity_words=rf_bytes_per_subcore // 2,  # 256 KB per SM = 64 KB per sub-core
        word_bits=word,
        block_words=2,  # 32-bit registers hold two FP16 words
        read_energy_pj=_sram_pj(rf_bytes_per_subcore, word, node_nm, 2),  # estimate (rule)
        write_energy_pj=_sram_pj(rf_bytes_per_subcore, word, node_nm, 2),
        fanout_x=tc_per_subcore,
    )
    tc = StorageLevel(
        name="tc_operands",
        capacity_words=tc_operand_words,  # A, B and C fragments of one MMA step (estimate)
        word_bits=word,
        read_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node_nm], 4),  # estimate
        write_energy_pj=round(_REG_PJ_PER_BIT_45NM * word * _NODE_SCALE[node_nm], 4),
        fanout_x=tc_fanout[0],  # output elements of one MMA step
        fanout_y=tc_fanout[1],  # reduction depth of one MMA step
    )
    return Arch(
        name=name,
        levels=(hbm, l2, smem, rf, tc),
        node_nm=node_nm,
        compute=Compute(
            name="FMA",
            energy_per_mac_pj=round(_FP16_FMA_45NM_PJ * _NODE_SCALE[node_nm], 4),  # estimate: fp16 FMA
            clock_hz=clock_hz,
            word_bits=word,
        ),
        description=description,
    )


def _v100_sm() -> Arch:
    # NVIDIA Tesla V100 GPU architecture whitepaper (2017): 80 SMs, 1530 MHz boost; per SM 4
    # processing blocks with 2 tensor cores each (8 per SM), each tensor core 64 FP16 FMA per
    # clock (a 4x4x4 matrix multiply-accumulate); 256 KB register file per SM; up to 96 KB
    # shared memory; 6 MB L2; 900 GB/s HBM2; TSMC 12 nm FFN. L2 read bandwidth 2048
    # bytes/clock (A100 whitepaper's V100 column).
    # Per SM: HBM 900e9 / 80 = 11.25 GB/s; / 1.53e9 Hz / 2 bytes = 3.68 FP16 words/cycle.
    # L2: 6 MB / 80 = 78.6 KB share; 2048 B/clk / 80 / 2 B = 12.8 words/cycle.
    return _gpu_sm(
        name="v100-sm",
        clock_hz=1.53e9,
        n_sms=80,
        hbm_bytes_per_s=900e9,
        l2_bytes=6 * MIB,
        l2_bytes_per_clock=2048.0,
        smem_bytes=96 * KIB,
        rf_bytes_per_subcore=64 * KIB,
        tc_per_subcore=2,
        tc_fanout=(16, 4),  # 4x4 outputs x 4-deep reduction = 64 FMA
        tc_operand_words=48,  # A 4x4 + B 4x4 + C 4x4
        node_nm=12,
        description=(
            "One V100 SM: 8 tensor cores x 64 FP16 FMA/clk, 96 KB shared memory, 256 KB RF, "
            "1/80 of 900 GB/s HBM2 and 6 MB L2, 1.53 GHz (V100 whitepaper); energies estimated"
        ),
    )


def _a100_sm() -> Arch:
    # NVIDIA A100 Tensor Core GPU architecture whitepaper (2020): 108 SMs, 1410 MHz boost;
    # per SM 4 processing blocks with one third-generation tensor core each, 256 dense FP16
    # FMA per clock per tensor core (1024 per SM); 256 KB register file per SM; up to 164 KB
    # shared memory; 40 MB L2 with 5120 bytes/clock read bandwidth; 1555 GB/s HBM2; TSMC 7 nm.
    # Per SM: HBM 1555e9 / 108 = 14.4 GB/s; / 1.41e9 Hz / 2 bytes = 5.11 FP16 words/cycle.
    # L2: 40 MB / 108 = 379 KB share; 5120 B/clk / 108 / 2 B = 23.7 words/cycle.
    return _gpu_sm(
        name="a100-sm",
        clock_hz=1.41e9,
        n_sms=108,
        hbm_bytes_per_s=1555e9,
        l2_bytes=40 * MIB,
        l2_bytes_per_clock=5120.0,
        smem_bytes=164 * KIB,
        rf_bytes_per_subcore=64 * KIB,
        tc_per_subcore=1,
        tc_fanout=(32, 8),  # 8x4 outputs x 8-deep reduction = 256 FMA
        tc_operand_words=128,  # A 8x8 + B 8x4 + C 8x4
        node_nm=7,
        description=(
            "One A100 SM: 4 tensor cores x 256 FP16 FMA/clk, 164 KB shared memory, 256 KB RF, "
            "1/108 of 1555 GB/s HBM2 and 40 MB L2, 1.41 GHz (A100 whitepaper); energies estimated"
        ),
    )


def _mlu_like() -> Arch:
    # Cambricon MLU270-like (MLUv02 architecture) cluster, figures as given in Cambricon's
    # BANG C programming material and product pages, to be treated as estimates: 4 clusters of
    # 4 IPU cores, 1 GHz, 128 TOPS INT8 -> 128e12 / 2 / 1e9 / 16 cores = 4000, taken as 4096
    # INT8 MACs per core (64 x 64, estimate); per core 512 KiB NRAM (neurons: inputs and
    # outputs) and 1 MiB WRAM (weights); 2 MiB SRAM shared per cluster; GDRAM DDR4 at
    # 102.4 GB/s for the card, a quarter per cluster. 16 nm.
    # Single-cluster view: 102.4e9 / 4 / 1e9 Hz / 1 byte = 25.6 words/cycle of GDRAM.
    word = 8
    node = 16
    clock = 1e9
    gdram = StorageLevel(
        name="GDRAM",
        capacity_words=None,
        word_bits=word,
        block_words=64,  # estimate: 64-byte bursts
        read_energy_pj=_DDR4_PJ_PER_BIT * word * 64,  # estimate: DDR4
        write_energy_pj=_DDR4_PJ_PER_BIT * word * 64,
        read_bandwidth_words_per_cycle=_words_per_cycle(102.4e9 / 4, clock, word),
        write_bandwidth_words_per_cycle=_words_per_cycle(102.4e9 / 4, clock, word),
    )
    sram = StorageLevel(
        name="cluster_SRAM",
        capacity_words=2 * MIB,  # 2 MiB per cluster (estimate, see above)
        word_bits=word,
        block_words=64,
        read_energy_pj=_sram_pj(2 * MIB, word, node, 64),  # estimate (rule)
        write_energy_pj=_sram_pj(2 * MIB, word, node, 64),
        read_bandwidth_words_per_cycle=128.0,  # estimate
        write_bandwidth_words_per_cycle=128.0,
        fanout_x=4,  # 4 IPU cores per cluster
    )
    nram = StorageLevel(
        name="NRAM",
        capacity_words=512 * KIB,  # 512 KiB per core (estimate, see above)
        word_bits=word,
        block_words=64,
        read_energy_pj=_sram_pj(512 * KIB, word, node, 64),  # estimate (rule)
        write_energy_pj=_sram_pj(512 * KIB, word, node, 64),
        read_bandwidth_words_per_cycle=128.0,  # estimate
        write_bandwidth_words_per_cycle=128.0,
        holds=INPUT_OUTPUT,
    )
    wram = StorageLevel(
        name="WRAM",
        capacity_words=1 * MIB,  # 1 MiB per core (estimate, see above)
        word_bits=word,
        block_words=64,
        read_energy_pj=_sram_pj(1 * MIB, word, node, 64),  # estimate (rule)
        write_energy_pj=_sram_pj(1 * MIB, word, node, 64),
        read_bandwidth_words_per_cycle=4096.0,  # estimate: one weight per MAC per cycle
        write_bandwidth_words_per_cycle=128.0,
        holds=WEIGHT,
        fanout_x=64,  # estimate: 64 x 64 MACs per core
        fanout_y=64,
    )
    return Arch(
        name="mlu-like",
        levels=(gdram, sram, nram, wram),
        node_nm=node,
        compute=Compute(
            name="MAC",
            energy_per_mac_pj=round(_INT8_MAC_45NM_PJ * _NODE_SCALE[node], 4),  # estimate: int8 at 16 nm
            clock_hz=clock,
            word_bits=word,
        ),
        description=(
            "Cambricon MLU270-like cluster: 4 cores with NRAM/WRAM, 2 MiB cluster SRAM, "
            "1/4 of DDR4 GDRAM (public Cambricon figures; MAC shape and energies estimated)"
        ),
    )


_PRESETS: dict[str, Callable[[], Arch]] = {
    "eyeriss-like": _eyeriss_like,
    "simba-like": _simba_like,
    "tpu-v1-like": _tpu_v1_like,
    "nvdla-like": _nvdla_like,
    "edge-tpu-like": _edge_tpu_like,
    "v100-sm": _v100_sm,
    "a100-sm": _a100_sm,
    "mlu-like": _mlu_like,
    "systolic": _systolic,
}


def presets() -> list[str]:
    """Sorted names of every architecture preset.

    Examples
    --------
    >>> "eyeriss-like" in presets()
    True
    """
    return sorted(_PRESETS)


def preset(name: str) -> Arch:
    """The preset architecture called ``name``.

    Raises
    ------
    UnknownPluginError
        ``name`` is not a preset; the message suggests close names and lists them all.

    Examples
    --------
    >>> preset("eyeriss-like").n_macs
    168
    """
    builder = _PRESETS.get(name)
    if builder is None:
        raise UnknownPluginError(did_you_mean(name, list(_PRESETS), what="architecture preset"))
    return builder()


def array_shape(arch: Arch) -> tuple[int, int]:
    """``(rows, cols)`` of the whole MAC array: products of every level's Y and X fanout.

    Examples
    --------
    >>> array_shape(preset("tpu-v1-like"))
    (256, 256)
    """
    rows = math.prod(lv.fanout_y for lv in arch.levels)
    cols = math.prod(lv.fanout_x for lv in arch.levels)
    return rows, cols
