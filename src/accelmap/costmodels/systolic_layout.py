"""What the ``systolic`` model reads of a problem and an arch, and the report it gives.

The model's vocabulary (module docstring of `accelmap.costmodels.systolic`): the GEMM class of
each loop dimension (``m`` output pixels, ``n`` filters, ``k`` the reduction, ``b`` dims that
index all three tensors and repeat the GEMM), SCALE-Sim's operands in their order
(`OPERANDS`), the dataflows (`Dataflow`) with each one's default row and column classes and
stationary operand; `systolic_layout` recognizes a systolic arch and a GEMM-shaped problem and
says where each operand lives (`SystolicLayout`: the SRAMs, the PE array and registers, each
dim's class, each SRAM's prefetch window), and `SystolicStats` is SCALE-Sim's per-layer report
of a batch. The counting rules (`accelmap.costmodels.systolic`, `systolic_dram`), SCALE-Sim's
mappings and the search's sub-spaces (`systolic_variants`) and the compiled engine
(`_systolic_kernel`, `_systolic_engine`) all read these; `accelmap.costmodels.systolic`
re-exports the public names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.errors import SpecError
from accelmap.workloads.problem import Problem
from accelmap.workloads.structure import ProblemKind, recognize

__all__ = ["OPERANDS", "Dataflow", "SystolicLayout", "systolic_layout", "SystolicStats"]

# SCALE-Sim's operand names, in the order of every per-operand array of the model.
OPERANDS: tuple[str, str, str] = ("ifmap", "filter", "ofmap")
# The kinds whose GEMM view the model reads (`accelmap.workloads.structure`).
_SYSTOLIC_KINDS = (ProblemKind.CONV, ProblemKind.DEPTHWISE_CONV, ProblemKind.GROUPED_CONV, ProblemKind.GEMM,
                   ProblemKind.BATCHED_MATMUL)

# Dimension classes (module docstring of `accelmap.costmodels.systolic`): m pixels, n filters,
# k the reduction, b dims that index all three tensors (repetitions of the GEMM).
_M, _N, _K, _B = 0, 1, 2, 3


class Dataflow(IntEnum):
    """Which tensor stays in the PEs."""

    OS = 0  # output stationary
    WS = 1  # weight stationary
    IS = 2  # input stationary

    @classmethod
    def parse(cls, name: str) -> Dataflow:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise SpecError(f"dataflow {name!r}; expected one of os, ws, is") from None


# Default (row class, column class) of each dataflow; the streamed class is the third.
_DEFAULT_AXES = {Dataflow.OS: (_M, _N), Dataflow.WS: (_K, _N), Dataflow.IS: (_K, _M)}
# Dataflow named by the sum of the two array classes: m+n = 1 OS, k+m = 2 IS, k+n = 3 WS.
_PAIR_DATAFLOW = np.array([-1, Dataflow.OS, Dataflow.IS, Dataflow.WS], dtype=np.int64)
# Stationary tensor of each dataflow, as an index into OPERANDS.
_STATIONARY = {Dataflow.OS: 2, Dataflow.WS: 1, Dataflow.IS: 0}


@dataclass(frozen=True, slots=True)
class SystolicLayout:
    """Where a systolic arch and a GEMM-shaped problem keep what (compiled once).

    ``tensor[o]`` is the problem's tensor index of operand ``o`` (ifmap, filter, ofmap);
    ``sram[o]`` the arch level that buffers it; ``array_level`` the level whose fanout is
    the PE array (``rows`` = fanout Y, ``cols`` = fanout X); ``pe_level`` the innermost level
    (PE registers), whose ``keep`` names the dataflow. ``dim_class[d]`` is the GEMM class of
    dim ``d`` (0 m, 1 n, 2 k, 3 all three, -1 none; bound-1 dims are free);
    ``window_words[o]`` SCALE-Sim's active prefetch window of operand ``o``'s SRAM, in words
    of that operand's width.
    """

    tensor: tuple[int, int, int]
    sram: tuple[int, int, int]
    array_level: int
    pe_level: int
    rows: int
    cols: int
    dim_class: tuple[int, ...]
    class_size: tuple[int, int, int, int]
    window_words: tuple[float, float, float]



def _kind_message(problem: Problem) -> str:
    takes = ", ".join(k.value for k in _SYSTOLIC_KINDS)
    return (f"problem {problem.name}: the systolic model takes {takes} (any problem whose every loop "
            f"indexes two or three of input, weight and output); found {recognize(problem).describe()}")


def systolic_layout(problem: Problem, arch: Arch) -> tuple[SystolicLayout | None, list[str]]:
    """Recognize the systolic shape of ``arch`` and the GEMM shape of ``problem``.

    Returns the layout, or ``None`` and every reason the pair is not a systolic shape.
    """
    problems: list[str] = []
    st = recognize(problem)
    if not st.has_gemm_view:
        problems.append(_kind_message(problem))
    tensor = [st.input, st.weight, st.output]
    n_levels = arch.n_levels
    if n_levels < 3:
        problems.append(f"arch {arch.name} has {n_levels} levels; a systolic arch needs DRAM, SRAM(s) and PE registers")
    fan = arch.fanouts.prod(axis=1)
    big = [i for i in range(n_levels) if fan[i] > 1]
    if len(big) > 1:
        problems.append(
            f"arch {arch.name} fans out below {len(big)} levels ({[arch.level_names[i] for i in big]}); "
            "a systolic arch has one PE array"
        )
    pe_level = n_levels - 1
    array_level = big[0] if big else max(pe_level - 1, 0)
    if big and big[0] >= pe_level:
        problems.append(
            f"arch {arch.name}: the PE array fans out below the innermost level {arch.level_names[-1]}; "
            "a systolic arch needs a PE register level below the array"
        )
    sram: list[int] = []
    if not problems:
        holds = arch.holds_mask(problem)
        for o, t in enumerate(tensor):
            levels = [lv for lv in range(1, pe_level) if holds[lv, t]]
            if len(levels) != 1:
                problems.append(
                    f"arch {arch.name}: {len(levels)} SRAM levels between DRAM and the PE registers may hold "
                    f"the {OPERANDS[o]} ({problem.tensors[t].name}); the systolic model needs exactly one"
                )
            sram.append(levels[0] if levels else -1)
        if len(set(sram)) != 3 and not problems:
            problems.append(f"arch {arch.name}: the ifmap, filter and ofmap must have separate SRAMs")
    if problems:
        return None, problems
    # GEMM class per dim, read from the projections (workloads.structure): 0 m, 1 n, 2 k, 3 all
    dim_class = [int(c) for c in st.gemm_class]
    size = [1, 1, 1, 1]
    for d, c in enumerate(dim_class):
        if c >= 0:
            size[c] *= problem.dims[d].bound
    window: list[float] = []
    for o in range(3):
        level = arch.levels[sram[o]]
        cap = level.capacity_words
        if cap is not None:  # in words of the operand (the level counts words of its own width)
            cap = cap * level.word_bits // problem.tensors[tensor[o]].word_bits
        # SCALE-Sim: 100 sets of floor(size / 100) words, half of them active (read_buffer).
        window.append(math.inf if cap is None else float(50 * (cap // 100)))
    layout = SystolicLayout(
        tensor=(tensor[0], tensor[1], tensor[2]),
        sram=(sram[0], sram[1], sram[2]),
        array_level=array_level,
        pe_level=pe_level,
        rows=int(arch.levels[array_level].fanout_y),
        cols=int(arch.levels[array_level].fanout_x),
        dim_class=tuple(dim_class),
        class_size=(size[0], size[1], size[2], size[3]),
        window_words=(window[0], window[1], window[2]),
    )
    return layout, []



@dataclass(frozen=True, slots=True, eq=False)
class SystolicStats:
    """SCALE-Sim's per-layer report for every mapping of a batch (shape (n,) each).

    ``dataflow`` is a `Dataflow` code (-1 on invalid rows); ``total_cycles`` =
    ``compute_cycles + stall_cycles`` (SCALE-Sim's ``Total Cycles``); ``sram_reads`` /
    ``dram_reads`` are (n, 2) ifmap, filter words; ``sram_writes`` / ``dram_writes`` (n,)
    ofmap words; ``mapping_efficiency`` and ``compute_utilization`` are SCALE-Sim's
    per-fold averages (fractions), ``utilization`` = MACs / (total_cycles x R x C).
    """

    valid: BoolArray
    reason: IntArray
    reason_level: IntArray
    dataflow: IntArray
    row_class: IntArray
    col_class: IntArray
    rows_used: IntArray
    cols_used: IntArray
    row_folds: IntArray
    col_folds: IntArray
    folds: IntArray
    compute_cycles: IntArray
    stall_cycles: IntArray
    total_cycles: IntArray
    sram_reads: IntArray
    sram_writes: IntArray
    dram_reads: IntArray
    dram_writes: IntArray
    mapping_efficiency: FloatArray
    compute_utilization: FloatArray
    utilization: FloatArray

    def __len__(self) -> int:
        return int(self.valid.shape[0])

    def summary(self, i: int) -> str:
        """Row ``i`` in one line: dataflow, which class sits where, folds and cycles."""
        if not self.valid[i]:
            return "not a systolic mapping"
        names = {_M: "m (output pixels)", _N: "n (filters)", _K: "k (reduction)"}
        return (f"dataflow {Dataflow(int(self.dataflow[i])).name}: rows take {names[int(self.row_class[i])]}, "
                f"columns {names[int(self.col_class[i])]}; {int(self.rows_used[i])} x {int(self.cols_used[i])} "
                f"PEs used, {int(self.folds[i]):,} folds; {int(self.compute_cycles[i]):,} compute + "
                f"{int(self.stall_cycles[i]):,} stall cycles")

    def report(self, i: int) -> dict[str, Any]:
        """Row ``i`` in SCALE-Sim's naming (JSON-ready)."""
        return {
            "valid": bool(self.valid[i]),
            "dataflow": Dataflow(int(self.dataflow[i])).name.lower() if self.dataflow[i] >= 0 else None,
            "total_cycles": int(self.total_cycles[i]),
            "compute_cycles": int(self.compute_cycles[i]),
            "stall_cycles": int(self.stall_cycles[i]),
            "folds": int(self.folds[i]),
            "mapping_efficiency_pct": 100.0 * float(self.mapping_efficiency[i]),
            "compute_util_pct": 100.0 * float(self.compute_utilization[i]),
            "overall_util_pct": 100.0 * float(self.utilization[i]),
            "sram_reads": {"ifmap": int(self.sram_reads[i, 0]), "filter": int(self.sram_reads[i, 1])},
            "sram_writes": {"ofmap": int(self.sram_writes[i])},
            "dram_reads": {"ifmap": int(self.dram_reads[i, 0]), "filter": int(self.dram_reads[i, 1])},
            "dram_writes": {"ofmap": int(self.dram_writes[i])},
        }

