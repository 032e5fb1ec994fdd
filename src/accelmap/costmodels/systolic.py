"""``systolic``: a SCALE-Sim-class cost model of an R x C systolic array.

The layer is seen as a GEMM (SCALE-Sim's view, Samajdar et al., "A systematic methodology
for characterizing scalability of DNN accelerators using SCALE-Sim", ISPASS 2020, Sec. III):
every loop dimension falls in one of three classes by which tensors it indexes,

* ``m``: output and input, not weight (ofmap pixels: ``N P Q``; matmul ``M``);
* ``n``: output and weight, not input (filters: ``K``; matmul ``N``);
* ``k``: input and weight, not output (the reduction: ``C R S``; matmul ``K``);

and dimensions that index all three tensors (groups ``G``, the batch of a batched matmul)
repeat the whole GEMM. The *dataflow* is the tensor the PE registers (the innermost level)
keep: output = OS, weight = WS, input = IS (when they keep none or several, the two classes
the mapping unrolls on the array name it). Two classes sit on the array (the two that index
the stationary tensor) and the third is streamed through it in time (``T``):

====  =============  =============  ==========
      rows (``Sr``)  cols (``Sc``)  ``T``
====  =============  =============  ==========
OS    m (pixels)     n (filters)    k (window)
WS    k (window)     n (filters)    m (pixels)
IS    k (window)     m (pixels)     n (filters)
====  =============  =============  ==========

Which class sits on rows and which on columns follows from the mapping's spatial unrolling
at the array level (Y = rows, X = columns); with no unrolling the table's default holds. The
product of the spatial factors on an axis is the number of rows (columns) a fold uses; the
class's dimensions are flattened (im2col) and cut into chunks of that size, so
``folds = ceil(Sr / rows_used) * ceil(Sc / cols_used)`` as in SCALE-Sim; the array level's
loop order says in which order a class's dims are flattened. Temporal factors and the other
loop orders do not change a systolic array's schedule (column folds outer, row folds inner),
so the model reads only the dataflow, the spatial factors and that order; the rest of the
mapping must still be legal (checked with padding allowed, i.e. ceil-divided tiles).

Per fold, with ``R x C`` the physical array (SCALE-Sim's demand matrices, ``systolic_compute_
{os,ws,is}.py``): OS takes ``T + R + C - 2`` cycles (operands skewed in, outputs drained);
WS and IS take ``2R + C + T - 2`` (the stationary operand is pre-filled in ``R`` cycles and
skewed, the other streamed, partial sums drained). SCALE-Sim reports the index of the last
ofmap write, ``folds * cycles_per_fold - 1``, and so does this model. SRAM accesses are the
demand counts: the stationary operand is read once; a streamed operand indexed by the row
class is read once per column fold (``Sr * T * col_folds``), one indexed by the column class
once per row fold; WS/IS write partial outputs once per row fold. SCALE-Sim's OS ofmap write
counter also adds ``R + C`` per fold (it adds the padded fold's shape,
``systolic_compute_os.py``); the model reproduces that count as ``sram_writes`` for exact
comparison and keeps the true count for DRAM writes.

DRAM traffic follows SCALE-Sim's double-buffered read buffers (``read_buffer_estimate_bw.py``):
a window of ``W = 50 * floor(S / 100)`` distinct words of an SRAM of ``S`` words is kept and
dropped whole when it fills. How the ifmap and filter reads through it are counted lives in
`accelmap.costmodels.systolic_dram` (module docstring): closed forms, exact for operands
without im2col duplicates and estimated for sliding-window ones, and the walk of the demand
stream word by word through the window (`accelmap.costmodels._systolic_window`), exact. With
``SystolicModel(dram_window="exact")`` every sliding-window operand that exceeds the window
is walked (SCALE-Sim's own count on every reference point), at milliseconds per distinct
fold shape. The default, ``dram_window="auto"``, walks the mappings a search can end on (at
most 1.25 times the fewest folds the array allows, SCALE-Sim's own mappings among them)
when their streams have at most 2^22 entries (a longer stream read over more than 4
passes, 4 of which fit in 2^22 entries: its passes counted from reset to reset, a few
passes' work, as exact as the whole walk), the other mappings when their streams have at
most 2^20 entries (``max_far_walk_entries``: a few milliseconds at most a fold shape), and
counts the rest from a guarded walked sample of ``max_sample_entries`` = 2^19 entries
(`_systolic_window.window_fetches_sampled`; ``max_sample_entries=0`` estimates them in
closed form instead): exact on every reference point and on every mapping it walks, and
within 2 % of the walk on every stream measured (docs/validation.md, SCALE-Sim, "A guarded
sample"). What the model reports is that count. A search may rank with a cheaper model:
`SystolicModel.for_search` is the same model with ``max_sample_entries =
search_sample_entries`` (default 0: the closed-form estimate beyond the walk limits; a
search ranking with the sample takes 10 to 17 times as long on CB2a_2, 4 to 5 on mid-size
layers), and `accelmap.search.search` re-evaluates what it
reports (the best mapping, the Pareto front) with the model itself (docs/search.md,
"Searching a systolic array"). DRAM writes are the ofmap's words.

Stalls: with a finite DRAM bandwidth the layer cannot end before its DRAM words have
crossed the interface, ``stall = max(0, ceil(dram_words / bandwidth) - compute_cycles)`` per
direction (a roofline bound; SCALE-Sim's CALC mode sizes the bandwidth so that stalls are
zero). Energy: every access times its level's per-access energy, plus MACs times the MAC
energy (SCALE-Sim models none; see `_to_metrics` for which access lands where).

Searching: only a few percent of a systolic arch's whole map space are mappings this model
accepts (two classes on one axis are not a systolic mapping, and per-dim constraints cannot
rule that out for every dataflow at once), so `SystolicModel.search_variants` names six
sub-spaces, one per dataflow and row class (`systolic_variants`, in `accelmap.costmodels.systolic_variants`), each seeded with
SCALE-Sim's mapping of it (`variant_seeds`); `accelmap.search.search` runs them and refines
the best (docs/search.md, "Searching a systolic array").

Where it lives: this module holds the counting rules of cycles and SRAM words (the batched
numpy path ``SystolicModel._stats_batch``, the executable reference, and the scalar
``_stats_one``), the conversion to `Metrics` (`_to_metrics`) and `SystolicModel`. The types it
reads and reports (the GEMM classes, `Dataflow`, `SystolicLayout`, `systolic_layout`,
`SystolicStats`) are `accelmap.costmodels.systolic_layout`'s, re-exported here; the DRAM reads
are counted in `accelmap.costmodels.systolic_dram`; the cpu engine is
`accelmap.costmodels._systolic_engine`, which runs the compiled drivers of `_systolic_kernel`
and `_systolic_cpu`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels.base import Metrics, ObjectiveMetrics
from accelmap.costmodels.systolic_dram import (
    CAPPED_WALK_REPS,
    _class_indexes,
    _dram_reads_batch,
    _dram_reads_one,
    _passes,
    _walk_rows,
    _walked_reads,
)
from accelmap.costmodels.systolic_dram import WALK_ALL as WALK_ALL
from accelmap.costmodels.systolic_dram import _walk_static as _walk_static
from accelmap.costmodels.systolic_dram import _walkable as _walkable
from accelmap.costmodels.systolic_dram import _window_exact as _window_exact
from accelmap.costmodels.systolic_layout import (
    _B,
    _DEFAULT_AXES,
    _K,
    _M,
    _N,
    _PAIR_DATAFLOW,
    OPERANDS,
    Dataflow,
    SystolicLayout,
    SystolicStats,
    _kind_message,
    systolic_layout,
)
from accelmap.errors import SpecError
from accelmap.mapper.check import Reason, check_batch, validate
from accelmap.mapper.constraints import Constraints
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem
from accelmap.workloads.structure import recognize

# The types of `systolic_layout` are re-exported through ``__all__``. How DRAM reads are counted:
# `systolic_dram` (closed forms and the walk); the ``name as name`` imports above re-export what
# tests and benchmarks reach through this module.

__all__ = [
    "Dataflow",
    "SystolicModel",
    "SystolicStats",
    "SystolicLayout",
    "systolic_layout",
    "OPERANDS",
]

_ENGINE: list = []


def _engine_module():  # noqa: ANN202
    """`_systolic_engine` (the compiled drivers load with it: imported on first use, then kept,
    so that a call runs no import statement; each costs an `importlib` lookup, several times
    its warm time once the caches are cold after a large call)."""
    if not _ENGINE:
        from accelmap.costmodels import _systolic_engine

        _ENGINE.append(_systolic_engine)
    return _ENGINE[0]


# --- the model ----------------------------------------------------------------------------


class SystolicModel:
    """SCALE-Sim-class systolic array cost model (see the module docstring).

    Examples
    --------
    >>> from accelmap.arch.presets import systolic_array
    >>> from accelmap.workloads.builders import matmul
    >>> from accelmap.costmodels.systolic_variants import scalesim_mapping
    >>> prob = matmul("g", m=512, n=512, k=512, word_bits=8)
    >>> arch = systolic_array(128, 128, dram_bandwidth_words_per_cycle=None)
    >>> stats = SystolicModel().stats(prob, arch, scalesim_mapping(prob, arch, "os"))
    >>> int(stats.total_cycles[0]), int(stats.sram_reads[0, 0])
    (12255, 1048576)
    """

    name: ClassVar[str] = "systolic"
    #: Folds are ceil-divided as in SCALE-Sim, so padded tiles (``allow_padding``) are modelled.
    imperfect_factorization: ClassVar[bool] = True
    DRAM_WINDOWS: ClassVar[tuple[str, ...]] = ("auto", "exact", "estimate")
    # Entries of a demand stream ``dram_window="auto"`` walks: 2^22 entries take 4 to 10 ms
    # at 1 to 2.5 ns an entry (docs/validation.md, SCALE-Sim section).
    MAX_WALK_ENTRIES: ClassVar[int] = 1 << 22
    # ... and the most folds, over the fewest the array allows (the mappings a search can
    # end on: per fold the cycles are fixed by the dataflow, so compute cycles scale with it).
    MAX_FOLD_RATIO: ClassVar[float] = 1.25
    # Entries of a demand stream walked for a mapping beyond that ratio (a few milliseconds at most:
    # a search meets many such fold shapes; docs/validation.md, "Beyond the fold ratio").
    MAX_FAR_WALK_ENTRIES: ClassVar[int] = 1 << 20
    # Entries of the walked sample from which a stream over its limit (and not capped) is
    # counted (`window_fetches_sampled`, guarded: a sample whose stretch fetched under 150
    # windows' worth of words is walked instead where that costs at most 16x the sample);
    # 0: such a stream is estimated in closed form. 2^19 gets every sub-space seed of the
    # random convolutions within 2 % and CB2a_2's measured rows exact (docs/validation.md,
    # "A guarded sample"; ranking with it costs 10 to 17 times the estimate's search time on
    # CB2a_2, "Ranking and reporting"): what the model reports, not what a search ranks with
    # (``SEARCH_SAMPLE_ENTRIES``).
    MAX_SAMPLE_ENTRIES: ClassVar[int] = 1 << 19
    # ``max_sample_entries`` of the model a search ranks with (`for_search`); 0: the estimate.
    # The search re-evaluates what it reports with the model itself.
    SEARCH_SAMPLE_ENTRIES: ClassVar[int] = 0
    # A longer stream of such a mapping read over more passes than this, this many of which
    # fit in ``max_walk_entries``, is walked with at most this many passes
    # (`window_fetches_capped`); its passes are then counted from reset to reset
    # (`_systolic_window._jump`: more than ``JUMP_MIN_REPS`` = 4 of them, about four passes'
    # work however many), so the count is the whole walk's (docs/validation.md). (8 while the
    # remaining passes were extrapolated, which 4 walked passes did not keep within 2 %.)
    CAPPED_WALK_REPS: ClassVar[int] = CAPPED_WALK_REPS

    def __init__(self, engine: str | None = None, *, dram_window: str = "auto",
                 max_walk_entries: int = MAX_WALK_ENTRIES, max_fold_ratio: float = MAX_FOLD_RATIO,
                 max_far_walk_entries: int = MAX_FAR_WALK_ENTRIES,
                 max_sample_entries: int = MAX_SAMPLE_ENTRIES,
                 search_sample_entries: int = SEARCH_SAMPLE_ENTRIES) -> None:
        """``engine``: ``"cpu"`` (the compiled kernel, default), ``"numpy"`` (the batched
        numpy path, its executable reference; also ``ACCELMAP_KERNELS=numpy``) or ``"cuda"``
        (the compiled kernel's generic rows on an NVIDIA GPU, one thread a mapping,
        `_systolic_cuda`; numba-cuda and a GPU needed, the ``cuda`` extra).

        ``dram_window`` says how DRAM reads of a sliding-window operand that exceeds
        SCALE-Sim's prefetch window are counted: ``"exact"`` walks its demand stream
        (`accelmap.costmodels._systolic_window`; milliseconds per distinct fold shape,
        cached; evaluated on the numpy path, which the walk extends), ``"estimate"`` uses
        the closed-form estimate (microseconds; module docstring), and ``"auto"`` (the
        default) walks the streams of at most ``max_walk_entries`` entries (the operand's
        SRAM reads per repetition of the GEMM, a bound on the walk's length) of mappings
        with at most ``max_fold_ratio`` times the fewest folds the array allows (SCALE-Sim's
        own mappings have the fewest), and those of at most ``max_far_walk_entries`` entries
        (0: none) of the other mappings, and counts the rest from a guarded walked sample of
        ``max_sample_entries`` entries (default 2^19, `_systolic_window.window_fetches_sampled`:
        within 2 % of the walk on every stream measured) or, with ``max_sample_entries=0``,
        estimates them in closed form (microseconds, up to 94 % off far from the fewest
        folds): exact on every SCALE-Sim reference point, at milliseconds per distinct fold
        shape walked or sampled (cached). Every other count is exact and closed-form in every
        mode.

        ``search_sample_entries`` (default 0) is ``max_sample_entries`` of the model a search
        ranks mappings with (`for_search`): 0 ranks with the estimate beyond the walk limits
        (a search meets thousands of fold shapes), 524288 (2^19) ranks with what the model
        reports. `accelmap.search.search` re-evaluates the mappings it reports with this model.

        Raises
        ------
        SpecError
            ``dram_window`` is not one of the three, ``max_walk_entries``,
            ``max_far_walk_entries``, ``max_sample_entries`` or ``search_sample_entries`` is
            not an int >= 0,
            ``max_fold_ratio`` is not a number >= 1.
        DeviceError
            The engine is ``"cuda"`` and numba-cuda or a GPU is missing (a `SpecError`).
        """
        from accelmap.costmodels.engines import resolve_engine

        if dram_window not in self.DRAM_WINDOWS:
            raise SpecError(f"systolic model: dram_window = {dram_window!r}; expected one of "
                            f"{', '.join(self.DRAM_WINDOWS)}")
        if isinstance(max_walk_entries, bool) or not isinstance(max_walk_entries, int) or max_walk_entries < 0:
            raise SpecError(f"systolic model: max_walk_entries = {max_walk_entries!r}; expected an int >= 0 "
                            "(entries of a demand stream walked exactly; 0 walks none)")
        if (isinstance(max_far_walk_entries, bool) or not isinstance(max_far_walk_entries, int)
                or max_far_walk_entries < 0):
            raise SpecError(f"systolic model: max_far_walk_entries = {max_far_walk_entries!r}; expected an int >= 0 "
                            "(entries of a demand stream walked beyond max_fold_ratio; 0 walks none)")
        if (isinstance(max_sample_entries, bool) or not isinstance(max_sample_entries, int)
                or max_sample_entries < 0):
            raise SpecError(f"systolic model: max_sample_entries = {max_sample_entries!r}; expected an int >= 0 "
                            "(entries of the walked sample a stream over its walk limit is counted from; "
                            "0 estimates it)")
        if (isinstance(search_sample_entries, bool) or not isinstance(search_sample_entries, int)
                or search_sample_entries < 0):
            raise SpecError(f"systolic model: search_sample_entries = {search_sample_entries!r}; expected an int "
                            ">= 0 (max_sample_entries of the model a search ranks with; 0 ranks with the estimate, "
                            "524288 with what the model reports)")
        if (isinstance(max_fold_ratio, bool) or not isinstance(max_fold_ratio, (int, float))
                or not max_fold_ratio >= 1.0):
            raise SpecError(f"systolic model: max_fold_ratio = {max_fold_ratio!r}; expected a number >= 1 "
                            "(folds over the fewest the array allows, up to which a mapping is walked)")
        self.dram_window = dram_window
        self.max_walk_entries = max_walk_entries
        self.max_fold_ratio = float(max_fold_ratio)
        self.max_far_walk_entries = max_far_walk_entries
        self.max_sample_entries = max_sample_entries
        self.search_sample_entries = search_sample_entries
        self.engine = resolve_engine(engine)
        if self.engine == "cuda":  # a clear error now rather than at the first batch
            from accelmap.costmodels._cuda import require

            require("the systolic model's engine 'cuda'")
        self._consts: dict[tuple[int, int], tuple[Any, ...]] = {}
        self._rows_seen: dict[tuple[int, int], int] = {}
        self._buffers: Any = None  # the cpu engine's output arrays (`_buffers.OutputBuffers`)
        self._ranking: SystolicModel | None = None  # `for_search`'s model, built once

    def for_search(self) -> SystolicModel:
        """The model a search ranks mappings with: this one's settings with
        ``max_sample_entries = search_sample_entries`` (this model itself when they are
        equal). `accelmap.search.search` ranks with it and re-evaluates what it reports
        (best mapping, Pareto front) with this model, so reported counts are this model's;
        the search's history holds the ranking model's values. Built once per model, so
        its walk tables persist across searches as this model's do. (``"exact"`` and
        ``"estimate"`` take no sample: the model itself.)"""
        if self.dram_window != "auto" or self.search_sample_entries == self.max_sample_entries:
            return self
        if self._ranking is None:
            self._ranking = SystolicModel(
                self.engine, dram_window=self.dram_window, max_walk_entries=self.max_walk_entries,
                max_fold_ratio=self.max_fold_ratio, max_far_walk_entries=self.max_far_walk_entries,
                max_sample_entries=self.search_sample_entries, search_sample_entries=self.search_sample_entries)
        return self._ranking

    def ranking(self) -> dict[str, Any]:
        """What `for_search` ranks with, for a search's config (``ranked_with``)."""
        m = self.for_search()
        return {"max_sample_entries": m.max_sample_entries, "same_as_reported": m is self}

    def _walk_rule(self) -> tuple[int, float, int, int] | None:
        """(longest demand stream walked in entries, most folds over the fewest, longest
        stream walked beyond them, entries of the sample a longer one is counted from): None
        = every row walked (``"exact"``); a negative first length: none (``"estimate"``)."""
        if self.dram_window == "exact":
            return None
        if self.dram_window == "auto":
            return (self.max_walk_entries, self.max_fold_ratio, self.max_far_walk_entries, self.max_sample_entries)
        return (-1, 1.0, 0, 0)

    def _prepared(self, problem: Problem, arch: Arch) -> tuple[Any, ...]:
        """(problem, arch, layout, kernel constants, walk table, structure, whether the tile
        tables fit the kernel (`_systolic_kernel.tables_fit`), the (levels, dims) and tensors
        a batch must have with the names and MACs of its `Metrics`, the serial calls' plans,
        `_systolic_engine.SerialPlan`) of the pair, kept
        per model (the layout and tables are computed once, then every batch is array work;
        the structure keys the specialised driver, `_systolic_cpu.structure`)."""
        key = (id(problem), id(arch))
        hit = self._consts.get(key)
        if hit is None or hit[0] is not problem or hit[1] is not arch:
            from accelmap.costmodels import _systolic_cpu, _systolic_engine, _systolic_kernel

            if len(self._consts) > 64:
                self._consts.clear()
            layout, _ = systolic_layout(problem, arch)
            consts = None if layout is None else _systolic_kernel.systolic_consts(problem, arch, layout)
            spec = None if consts is None else _systolic_cpu.structure(consts, arch.n_levels, problem.n_tensors)
            fits = consts is not None and _systolic_kernel.tables_fit(consts)
            # (the shapes a batch must have, and what `metrics_from` names: read once a pair)
            shapes = ((arch.n_levels, problem.n_dims), problem.n_tensors,
                      (arch.level_names, problem.tensor_names, problem.macs))
            hit = (problem, arch, layout, consts, _systolic_kernel.WalkTable(problem.n_dims), spec, fits, shapes,
                   _systolic_engine.SerialPlans())
            self._consts[key] = hit
        return hit

    def _specialise(self, problem: Problem, arch: Arch, n: int) -> bool:
        """Whether the cpu engine runs this batch on its driver specialised per structure
        (`_systolic_cpu`), compiling it if need be: once this model has evaluated
        ``_systolic_engine._SPECIALISE_AFTER_ROWS`` rows of the (problem, arch), this batch
        included, so that a few evaluations of a new layer never wait for that driver's
        compile. (Before, that driver serves where it is ready without a compile: compiled in
        this process or in numba's on-disk cache; ``_systolic_engine._SPECIALISE_IF_READY``.)"""
        _systolic_engine = _engine_module()
        key = (id(problem), id(arch))
        if key not in self._rows_seen and len(self._rows_seen) > 64:
            self._rows_seen.clear()
        seen = self._rows_seen[key] = self._rows_seen.get(key, 0) + n
        return seen >= _systolic_engine._SPECIALISE_AFTER_ROWS

    def _kernel(self, problem: Problem, arch: Arch, batch: MappingBatch, *,
                want_stats: bool, objective: bool = False) -> dict[str, np.ndarray] | None:
        """The compiled kernel's pass (`_systolic_engine.evaluate_rows`): the report
        (``want_stats``) or the `Metrics` fields; None where the numpy path serves the
        batch (the numpy engine; the exact window, which the walk extends; a problem or arch
        the model rejects; shapes that do not match; tile tables too large, `_systolic_kernel.
        tables_fit`). Under ``"auto"`` the rows `_walk_rows`
        picks get their walked counts from a table kept per (problem, arch), filled by
        `_walked_reads` (the numpy path's) when a fold shape is first seen. ``objective``:
        of the `Metrics` fields only those of `ObjectiveMetrics` (on the specialised driver;
        the generic one writes them all). The output arrays come from the model's
        `_buffers.OutputBuffers` (those of an earlier call that nothing refers to any
        more are written again)."""
        if self.engine == "numpy" or self.dram_window == "exact" or len(batch) == 0:
            return None
        hit = self._prepared(problem, arch)
        layout = hit[2]
        if layout is None or batch.temporal.shape[1:] != hit[7][0] or batch.keep.shape[2] != hit[7][1]:
            return None
        _systolic_engine = _engine_module()
        if not hit[6]:  # (tile tables too large for the kernel: `_systolic_kernel.tables_fit`)
            return None

        rule = self._walk_rule()
        limit, ratio, far, sample = rule if rule is not None else (-1, 1.0, 0, 0)

        def walk(o: int, rc: IntArray, cc: IntArray, ur: IntArray, uc: IntArray, f_r: IntArray, f_c: IntArray,
                 reads: IntArray, order: IntArray) -> IntArray:
            # the rows the kernel found missing: `_walk_rows` says how far each is walked
            size = np.array(layout.class_size[:3], dtype=np.int64)
            fewest = -(-size[rc] // layout.rows) * -(-size[cc] // layout.cols)
            caps = _walk_rows(np.ones(len(rc), dtype=bool), reads, f_r * f_c, fewest, layout.class_size[3], rule,
                              _passes(o, rc, cc, f_r, f_c))
            return _walked_reads(problem, layout, o, rc, cc, ur, uc, order, caps)

        if self.engine == "cuda":  # the generic driver's rows on the GPU (`_systolic_cuda`), walks on the host
            return _systolic_engine.evaluate_rows(
                hit[3], hit[4], limit, ratio, self.CAPPED_WALK_REPS, far, walk, batch.temporal, batch.spatial,
                batch.order, batch.keep, want_stats=want_stats, want_metrics=not want_stats, n_levels=arch.n_levels,
                n_tensors=problem.n_tensors, frozen=True, walk_sample=sample, device="cuda")
        if self._buffers is None:
            self._buffers = _systolic_engine.OutputBuffers()
        past = self._specialise(problem, arch, len(batch))
        return _systolic_engine.evaluate_rows(
            hit[3], hit[4], limit, ratio, self.CAPPED_WALK_REPS, far, walk, batch.temporal, batch.spatial, batch.order,
            batch.keep, want_stats=want_stats, want_metrics=not want_stats, n_levels=arch.n_levels,
            n_tensors=problem.n_tensors, spec=hit[5] if past or _systolic_engine._SPECIALISE_IF_READY else None,
            objective=objective, buffers=self._buffers, compile_spec=past, frozen=True,
            walk_sample=sample, plans=hit[8])

    def _stats(self, problem: Problem, arch: Arch, batch: MappingBatch) -> SystolicStats:
        """The report by the selected engine: the compiled kernel (`_systolic_engine`) or
        the numpy path (`_stats_batch`, its executable reference)."""
        out = self._kernel(problem, arch, batch, want_stats=True)
        if out is None:
            return self._stats_batch(problem, arch, systolic_layout(problem, arch)[0], batch)
        return _engine_module().stats_from(out)

    # --- public API ---------------------------------------------------------------------
    def evaluate(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        """Metrics of every mapping (batched: compiled kernel or numpy; see ``engine``)."""
        out = self._kernel(problem, arch, mappings, want_stats=False)
        if out is not None:
            hit = self._consts.get((id(problem), id(arch)))  # (the pair `_kernel` prepared)
            names = hit[7][2] if hit is not None and hit[0] is problem and hit[1] is arch else None
            return _engine_module().metrics_from(out, problem, arch, self._buffers, names)
        layout, _ = systolic_layout(problem, arch)
        stats = self._stats_batch(problem, arch, layout, mappings)
        return _to_metrics(problem, arch, layout, stats)

    def evaluate_objective(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> ObjectiveMetrics:
        """Cycles, energy, validity and reason of every mapping, without the per-level counts.

        What a search reads of `evaluate`, equal to it field by field; the cpu engine's
        specialised driver then skips writing the (n, L, T) count and energy arrays, the other
        paths take the fields of `evaluate`.
        """

        out = self._kernel(problem, arch, mappings, want_stats=False, objective=True)
        if out is not None:
            return ObjectiveMetrics(cycles=out["cycles"], energy_pj=out["energy"], valid=out["valid"],
                                    reason=out["reason"], reason_level=out["level"])
        m = self.evaluate(problem, arch, mappings)
        return ObjectiveMetrics(cycles=m.cycles, energy_pj=m.energy_pj, valid=m.valid, reason=m.reason,
                                reason_level=m.reason_level)

    def evaluate_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> Metrics:
        """The scalar reference path (plain Python integers); equals ``evaluate`` exactly."""
        layout, _ = systolic_layout(problem, arch)
        stats = self._stats_one(problem, arch, layout, mapping)
        return _to_metrics(problem, arch, layout, stats)

    def stats(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> SystolicStats:
        """SCALE-Sim's report (cycles, folds, per-operand SRAM/DRAM words) of every mapping."""
        return self._stats(problem, arch, mappings)

    def stats_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> SystolicStats:
        """Scalar reference path of :meth:`stats`."""
        layout, _ = systolic_layout(problem, arch)
        return self._stats_one(problem, arch, layout, mapping)

    def search_variants(self, problem: Problem, arch: Arch) -> list[tuple[str, Constraints, MappingBatch]]:
        """Sub-spaces a search covers instead of the whole map space, with seed mappings.

        One per dataflow and row class (`systolic_variants`): ``(label, constraints,
        seeds)``, the seeds SCALE-Sim's mapping of that variant (`variant_seeds`). Empty
        when the arch is not a systolic shape. `accelmap.search.search` reads this hook.

        Raises
        ------
        SpecError
            When the problem is of a kind the model does not take (the message names the
            kind found, with each dim's role, and the kinds taken).
        """
        if not recognize(problem).has_gemm_view:
            raise SpecError(_kind_message(problem))
        from accelmap.costmodels.systolic_variants import systolic_variants, variant_seeds

        return [(v.label, v.constraints, variant_seeds(problem, arch, v)) for v in systolic_variants(problem, arch)]

    def explain(self, problem: Problem, arch: Arch, mapping: Mapping) -> list[str]:
        """Why this model cannot evaluate a mapping (empty when it can)."""
        layout, msgs = systolic_layout(problem, arch)
        if layout is None:
            return msgs
        check = check_batch(problem, arch, mapping.as_batch(), allow_padding=True)
        if not check.valid[0] and check.reason[0] != Reason.CAPACITY:
            return [f"illegal mapping ({Reason(int(check.reason[0])).name.lower()})",
                    *validate(problem, arch, mapping, allow_padding=True)]
        _, why = _axes_one(problem, layout, mapping)
        return [why] if why else []

    # --- batched path ------------------------------------------------------------------
    def _stats_batch(self, problem: Problem, arch: Arch, layout: SystolicLayout | None,
                     batch: MappingBatch) -> SystolicStats:
        n = len(batch)
        if layout is None:
            return _invalid_stats(n)
        check = check_batch(problem, arch, batch, allow_padding=True)
        # SCALE-Sim's SRAMs are streaming double buffers: their size sets the DRAM traffic
        # (below), not a tile capacity, so a CAPACITY verdict is not a reason here.
        ok = check.valid | (check.reason == int(Reason.CAPACITY))
        reason = np.where(ok, 0, check.reason)
        level = np.where(ok, -1, check.level)
        if (n == 0 or batch.n_levels != arch.n_levels or batch.n_dims != problem.n_dims
                or batch.n_tensors != problem.n_tensors):
            return _invalid_stats(n, reason=reason, level=level)

        dim_class = np.array(layout.dim_class, dtype=np.int64)
        t_in, t_w, t_out = layout.tensor
        keep = batch.keep[:, layout.pe_level]  # (n, T)
        k3 = np.stack([keep[:, t_in], keep[:, t_w], keep[:, t_out]], axis=1)  # ifmap, filter, ofmap
        one = k3.sum(axis=1) == 1
        # stationary operand -> dataflow: ofmap -> OS, filter -> WS, ifmap -> IS
        df = np.select([k3[:, 2], k3[:, 1], k3[:, 0]], [Dataflow.OS, Dataflow.WS, Dataflow.IS], -1)
        df = np.where(one, df, -1)

        sx = batch.spatial[:, layout.array_level, :, 0]
        sy = batch.spatial[:, layout.array_level, :, 1]
        cls_onehot = dim_class[None, :, None] == np.arange(4)[None, None, :]  # (1, D, 4)
        ycls = ((sy > 1)[:, :, None] & cls_onehot).any(axis=1)  # (n, 4)
        xcls = ((sx > 1)[:, :, None] & cls_onehot).any(axis=1)
        stray = ((sy > 1) | (sx > 1)) & (dim_class < 0)[None, :]
        bad = (ycls.sum(axis=1) > 1) | (xcls.sum(axis=1) > 1) | stray.any(axis=1)
        yc = np.where(ycls.any(axis=1), np.argmax(ycls, axis=1), -1)
        xc = np.where(xcls.any(axis=1), np.argmax(xcls, axis=1), -1)
        # PE registers that keep none or several operands name no dataflow; then the two
        # classes unrolled on the array name it (the stationary tensor is the one both index).
        both = (yc >= 0) & (xc >= 0) & (yc != xc) & (yc <= _K) & (xc <= _K)
        df = np.where(one | ~both, df, _PAIR_DATAFLOW[np.clip(yc + xc, 0, 3)])
        dfi = np.where(df >= 0, df, 0)
        def_r = np.array([_DEFAULT_AXES[Dataflow(i)][0] for i in range(3)])[dfi]
        def_c = np.array([_DEFAULT_AXES[Dataflow(i)][1] for i in range(3)])[dfi]
        pair = def_r + def_c  # the two array classes of the dataflow sum to this (m+n, k+n, k+m)
        rc = np.where(yc >= 0, yc, np.where(xc >= 0, pair - xc, def_r))
        cc = np.where(xc >= 0, xc, np.where(yc >= 0, pair - yc, def_c))
        arr_ok = (rc != cc) & (rc + cc == pair) & (rc <= _K) & (cc <= _K) & (rc >= 0) & (cc >= 0)
        model_ok = (df >= 0) & ~bad & arr_ok
        new_bad = ok & ~model_ok
        reason = np.where(new_bad, int(Reason.MODEL), reason)
        level = np.where(new_bad, layout.pe_level, level)
        valid = ok & model_ok

        rc = np.where(valid, rc, _M)
        cc = np.where(valid, cc, _N)
        tc = 3 - rc - cc
        size = np.array(layout.class_size[:3], dtype=np.int64)
        s_r, s_c, t_len = size[rc], size[cc], size[tc]
        b_rep = layout.class_size[3]
        R, C = layout.rows, layout.cols
        # (invalid rows may hold zero factors; keep their arithmetic finite)
        ur = np.maximum(np.minimum(np.prod(sy, axis=1), s_r), 1)
        uc = np.maximum(np.minimum(np.prod(sx, axis=1), s_c), 1)
        f_r = -(-s_r // ur)
        f_c = -(-s_c // uc)
        folds = f_r * f_c * b_rep
        os_ = dfi == Dataflow.OS
        per_fold = np.where(os_, t_len + R + C - 2, 2 * R + C + t_len - 2)
        compute = folds * per_fold - 1
        util_fold = np.where(os_, t_len + R + C - 2, 2 * R + 2 * C + t_len - 3)

        # SRAM words per operand: a tensor indexes two of the three classes.
        bounds = problem.bounds
        acc = []
        idx_r, idx_c = [], []
        for o in range(3):
            cls_of_t = np.array([_class_indexes(o, c) for c in range(3)])
            ir, ic, it = cls_of_t[rc], cls_of_t[cc], cls_of_t[tc]
            a = np.where(ir, s_r, f_r) * np.where(ic, s_c, f_c) * np.where(it, t_len, 1) * b_rep
            acc.append(a)
            idx_r.append(ir)
            idx_c.append(ic)
        ofmap_true = acc[2]
        sram_w = ofmap_true + np.where(os_, folds * (R + C), 0)

        # DRAM reads of ifmap and filter: SCALE-Sim's prefetch window, tile by tile.
        fewest = -(-s_r // R) * -(-s_c // C)  # folds of the whole array (`_walk_rows`)
        # (an invalid row's array-level order may name dims that do not exist, which would index
        # past the dim tables: such rows, whose counts are masked below, walk the identity order)
        orders = batch.order[:, layout.array_level]
        orders = np.where(valid[:, None], orders, np.arange(orders.shape[1])[None, :])
        dram_r = []
        for o in (0, 1):
            t = layout.tensor[o]
            dram_r.append(_dram_reads_batch(problem, layout, o, t, rc, cc, s_r, s_c, ur, uc, f_r, f_c,
                                             idx_r[o], idx_c[o], acc[o], bounds, dim_class, orders,
                                             _walk_rows(valid, acc[o], f_r * f_c, fewest, b_rep,
                                                        self._walk_rule(), _passes(o, rc, cc, f_r, f_c))))
        dram_w = ofmap_true

        stall, total, util = _stall_total_util(problem, arch, layout, dram_r[0] + dram_r[1], dram_w, compute, valid)
        map_eff = (s_r * s_c).astype(np.float64) / (f_r * f_c * R * C)
        comp_util = map_eff * t_len / util_fold

        def v(a: np.ndarray) -> np.ndarray:
            return np.where(valid, a, 0)

        return SystolicStats(
            valid=valid, reason=reason.astype(np.int64), reason_level=level.astype(np.int64),
            dataflow=np.where(valid, df, -1).astype(np.int64),
            row_class=np.where(valid, rc, -1), col_class=np.where(valid, cc, -1),
            rows_used=v(ur), cols_used=v(uc), row_folds=v(f_r), col_folds=v(f_c), folds=v(folds),
            compute_cycles=v(compute), stall_cycles=v(stall), total_cycles=v(total),
            sram_reads=np.stack([v(acc[0]), v(acc[1])], axis=1),
            sram_writes=v(sram_w),
            dram_reads=np.stack([v(dram_r[0]), v(dram_r[1])], axis=1),
            dram_writes=v(dram_w),
            mapping_efficiency=np.where(valid, map_eff, 0.0),
            compute_utilization=np.where(valid, comp_util, 0.0),
            utilization=np.where(valid, util, 0.0),
        )

    # --- scalar reference path ---------------------------------------------------------
    def _stats_one(self, problem: Problem, arch: Arch, layout: SystolicLayout | None,
                   mapping: Mapping) -> SystolicStats:
        if layout is None:
            return _invalid_stats(1)
        check = check_batch(problem, arch, mapping.as_batch(), allow_padding=True)
        r0 = int(check.reason[0])
        if r0 not in (int(Reason.OK), int(Reason.CAPACITY)):
            return _invalid_stats(1, reason=np.array([r0]), level=check.level.copy())
        axes, _ = _axes_one(problem, layout, mapping)
        if axes is None:
            return _invalid_stats(1, reason=np.array([int(Reason.MODEL)]), level=np.array([layout.pe_level]))
        df, rc, cc = axes
        tc = 3 - rc - cc
        size = layout.class_size
        s_r, s_c, t_len, b_rep = size[rc], size[cc], size[tc], size[3]
        R, C = layout.rows, layout.cols
        sx = mapping.spatial[layout.array_level, :, 0]
        sy = mapping.spatial[layout.array_level, :, 1]
        ur = min(math.prod(int(v) for v in sy), s_r)
        uc = min(math.prod(int(v) for v in sx), s_c)
        f_r = -(-s_r // ur)
        f_c = -(-s_c // uc)
        folds = f_r * f_c * b_rep
        if df is Dataflow.OS:
            per_fold = t_len + R + C - 2
            util_fold = per_fold
        else:
            per_fold = 2 * R + C + t_len - 2
            util_fold = 2 * R + 2 * C + t_len - 3
        compute = folds * per_fold - 1
        acc, ir_l, ic_l = [], [], []
        for o in range(3):
            ir, ic, it = (_class_indexes(o, c) for c in (rc, cc, tc))
            a = (s_r if ir else f_r) * (s_c if ic else f_c) * (t_len if it else 1) * b_rep
            acc.append(a)
            ir_l.append(ir)
            ic_l.append(ic)
        sram_w = acc[2] + (folds * (R + C) if df is Dataflow.OS else 0)
        dram_r = [
            _dram_reads_one(problem, layout, o, rc, cc, s_r, s_c, ur, uc, f_r, f_c, ir_l[o], ic_l[o], acc[o],
                            [int(d) for d in mapping.order[layout.array_level]],
                            int(_walk_rows(np.array([True]), np.array([acc[o]]), np.array([f_r * f_c]),
                                           np.array([-(-s_r // R) * -(-s_c // C)]), b_rep, self._walk_rule(),
                                           _passes(o, np.array([rc]), np.array([cc]), np.array([f_r]),
                                                   np.array([f_c])))[0]))
            for o in (0, 1)
        ]
        dram_w = acc[2]
        stall = max(_stall_one(arch, dram_r[0] + dram_r[1], compute, read=True),
                    _stall_one(arch, dram_w, compute, read=False))
        total = compute + stall
        map_eff = float(s_r * s_c) / (f_r * f_c * R * C)
        comp_util = map_eff * t_len / util_fold
        util = problem.macs / (float(max(total, 1)) * (R * C))  # (total 0: one MAC on a 1 x 1 array)

        def i1(x: int) -> IntArray:
            return np.array([x], dtype=np.int64)

        return SystolicStats(
            valid=np.array([True]), reason=i1(0), reason_level=i1(-1), dataflow=i1(int(df)),
            row_class=i1(rc), col_class=i1(cc), rows_used=i1(ur), cols_used=i1(uc),
            row_folds=i1(f_r), col_folds=i1(f_c), folds=i1(folds),
            compute_cycles=i1(compute), stall_cycles=i1(stall), total_cycles=i1(total),
            sram_reads=np.array([[acc[0], acc[1]]], dtype=np.int64), sram_writes=i1(sram_w),
            dram_reads=np.array([[dram_r[0], dram_r[1]]], dtype=np.int64), dram_writes=i1(dram_w),
            mapping_efficiency=np.array([map_eff]), compute_utilization=np.array([comp_util]),
            utilization=np.array([util]),
        )


# --- pieces of the two paths --------------------------------------------------------------


def _axes_one(problem: Problem, layout: SystolicLayout, mapping: Mapping) -> tuple[tuple[Dataflow, int, int] | None, str]:
    """(dataflow, row class, column class) of one mapping, or None and why not."""
    t_in, t_w, t_out = layout.tensor
    keep = mapping.keep[layout.pe_level]
    kept = [bool(keep[t_in]), bool(keep[t_w]), bool(keep[t_out])]
    found: dict[int, set[int]] = {0: set(), 1: set()}
    for d, c in enumerate(layout.dim_class):
        for axis in (0, 1):
            if int(mapping.spatial[layout.array_level, d, axis]) > 1:
                if c < 0:
                    return None, f"dim {problem.dim_names[d]} is unrolled on the array but is no GEMM dim"
                found[axis].add(c)
    if len(found[0]) > 1 or len(found[1]) > 1:
        return None, "the dims unrolled along one array axis belong to different GEMM classes (pixels, filters, window)"
    xc = next(iter(found[0])) if found[0] else -1
    yc = next(iter(found[1])) if found[1] else -1
    if sum(kept) == 1:
        df = Dataflow.OS if kept[2] else (Dataflow.WS if kept[1] else Dataflow.IS)
    elif 0 <= yc <= _K and 0 <= xc <= _K and yc != xc:
        df = Dataflow(int(_PAIR_DATAFLOW[yc + xc]))
    else:
        names = [OPERANDS[o] for o in range(3) if kept[o]] or ["none"]
        return None, (
            f"the PE level {layout.pe_level} keeps {', '.join(names)}; a systolic dataflow keeps exactly one "
            "of ifmap (IS), filter (WS) or ofmap (OS) in the PEs (or unrolls two GEMM classes on the array, "
            "which names the one both index)"
        )
    def_r, def_c = _DEFAULT_AXES[df]
    pair = def_r + def_c
    rc = yc if yc >= 0 else (pair - xc if xc >= 0 else def_r)
    cc = xc if xc >= 0 else (pair - yc if yc >= 0 else def_c)
    if rc == cc or rc + cc != pair or not (0 <= rc <= _K and 0 <= cc <= _K):
        labels = {_M: "pixels (m)", _N: "filters (n)", _K: "window (k)", _B: "repeat (b)"}
        return None, (
            f"{df.name} puts {labels[def_r]} and {labels[def_c]} on the array; the mapping unrolls "
            f"{labels.get(rc, '?')} on rows and {labels.get(cc, '?')} on columns"
        )
    return (df, rc, cc), ""


def _stall_batch(arch: Arch, words: IntArray, compute: IntArray, *, read: bool) -> IntArray:
    lv = arch.levels[0]
    bw = lv.read_bandwidth_words_per_cycle if read else (lv.write_bandwidth_words_per_cycle
                                                       or lv.read_bandwidth_words_per_cycle)
    if bw is None:
        return np.zeros_like(compute)
    need = np.ceil(words / float(bw)).astype(np.int64)
    return np.maximum(need - compute, 0)


def _stall_one(arch: Arch, words: int, compute: int, *, read: bool) -> int:
    lv = arch.levels[0]
    bw = lv.read_bandwidth_words_per_cycle if read else (lv.write_bandwidth_words_per_cycle
                                                       or lv.read_bandwidth_words_per_cycle)
    if bw is None:
        return 0
    need = int(math.ceil(words / float(bw)))
    return max(need - compute, 0)


def _stall_total_util(problem: Problem, arch: Arch, layout: SystolicLayout, dram_reads: IntArray,
                      dram_writes: IntArray, compute: IntArray, valid: BoolArray) -> tuple[IntArray, IntArray, FloatArray]:
    """(stall cycles, total cycles, utilization) from the DRAM words (both read operands
    summed) and the compute cycles of each row (the kernel's `_row` computes the same per
    row, after its walked-count lookup)."""
    stall = np.maximum(_stall_batch(arch, dram_reads, compute, read=True),
                       _stall_batch(arch, dram_writes, compute, read=False))
    total = compute + stall
    # SCALE-Sim's total is the index of the last cycle: 0 for one MAC on a 1 x 1 array, where
    # the utilization is taken over one cycle (no division by zero on any path)
    util = problem.macs / (np.where(valid, np.maximum(total, 1), 1).astype(np.float64)
                           * (layout.rows * layout.cols))
    return stall, total, util


def _invalid_stats(n: int, *, reason: IntArray | None = None, level: IntArray | None = None) -> SystolicStats:
    z = np.zeros(n, dtype=np.int64)
    r = np.full(n, int(Reason.MODEL), dtype=np.int64) if reason is None else np.where(reason == 0, int(Reason.MODEL), reason)
    lv = np.full(n, -1, dtype=np.int64) if level is None else level.astype(np.int64)
    return SystolicStats(
        valid=np.zeros(n, dtype=bool), reason=r.astype(np.int64), reason_level=lv, dataflow=z - 1,
        row_class=z - 1, col_class=z - 1, rows_used=z, cols_used=z, row_folds=z, col_folds=z, folds=z,
        compute_cycles=z, stall_cycles=z, total_cycles=z, sram_reads=np.zeros((n, 2), dtype=np.int64),
        sram_writes=z, dram_reads=np.zeros((n, 2), dtype=np.int64), dram_writes=z,
        mapping_efficiency=np.zeros(n), compute_utilization=np.zeros(n), utilization=np.zeros(n),
    )


def _to_metrics(problem: Problem, arch: Arch, layout: SystolicLayout | None, s: SystolicStats) -> Metrics:
    """Per-level, per-tensor counts and energy from the SCALE-Sim report.

    DRAM: reads of ifmap/filter, updates (writes) of ofmap. Each SRAM: fills from DRAM and
    reads by the array (ifmap, filter); the ofmap SRAM: updates by the array and reads when
    draining to DRAM. PE registers: every MAC reads its two operands and updates its partial
    sum. Energy = sum of accesses x per-access energy (per ``block_words`` words) + MACs x
    MAC energy.
    """
    n = len(s)
    L, T = arch.n_levels, problem.n_tensors
    reads = np.zeros((n, L, T))
    fills = np.zeros((n, L, T))
    updates = np.zeros((n, L, T))
    macs = problem.macs
    valid = s.valid
    if layout is not None and n:
        ti, tw, to = layout.tensor
        si, sw, so = layout.sram
        reads[:, 0, ti] = s.dram_reads[:, 0]
        reads[:, 0, tw] = s.dram_reads[:, 1]
        updates[:, 0, to] = s.dram_writes
        fills[:, si, ti] = s.dram_reads[:, 0]
        reads[:, si, ti] = s.sram_reads[:, 0]
        fills[:, sw, tw] = s.dram_reads[:, 1]
        reads[:, sw, tw] = s.sram_reads[:, 1]
        updates[:, so, to] = s.sram_writes
        reads[:, so, to] = s.dram_writes
        pe = layout.pe_level
        v = valid.astype(np.float64) * macs
        reads[:, pe, ti] = v
        reads[:, pe, tw] = v
        updates[:, pe, to] = v
    breakdown = np.zeros((n, L, T))
    energy = np.zeros(n)
    for li, lv in enumerate(arch.levels):
        blk = float(lv.block_words)
        for t in range(T):
            e = (reads[:, li, t] / blk) * lv.read_energy_pj + ((fills[:, li, t] + updates[:, li, t]) / blk) * lv.write_energy_pj
            breakdown[:, li, t] = e
            energy = energy + e
    compute_e = np.where(valid, float(macs) * arch.compute.energy_per_mac_pj, 0.0)
    energy = energy + compute_e
    cycles = np.where(valid, s.total_cycles.astype(np.float64), np.inf)
    return Metrics(
        cycles=cycles,
        energy_pj=np.where(valid, energy, np.inf),
        compute_energy_pj=compute_e,
        utilization=np.where(valid, s.utilization, 0.0),
        valid=valid.copy(),
        reason=s.reason.copy(),
        reason_level=s.reason_level.copy(),
        reads=reads,
        fills=fills,
        updates=updates,
        energy_breakdown_pj=breakdown,
        multicast=np.zeros((n, L, T)),
        spatial_reductions=np.zeros((n, L, T)),
        macs=macs,
        level_names=arch.level_names,
        tensor_names=problem.tensor_names,
    )
