"""The ``aspect`` cost model: MAESTRO-class data-centric analysis of a PE array whose shape
(cluster sizes, aspect ratio) is a variable.

The model follows the data-centric cost model of Kwon et al. (MICRO 2019; IEEE Micro 2020).
It lives in four modules, what is counted apart from how it is made fast:

* `accelmap.costmodels.aspect_analysis`: what the model counts -- MAESTRO's specs and the
  directive analysis of one layer (`analyze`: iteration cases, reuse, delays, buffer
  requirements), the scalar reference;
* `accelmap.costmodels.aspect_form`: how an accelmap `Problem`, `Arch` and `Mapping` read as
  a MAESTRO layer, hardware and directives (`directives_from_mapping`, `aspect_view`,
  `shapes`, `arch_with_shape`, `aspect_constraints`);
* `accelmap.costmodels._aspect_numpy`: closed forms of the analysis over a batch (the numpy
  engine, the executable reference);
* `accelmap.costmodels._aspect_kernel`: the compiled per-mapping kernel (numba; the ``cpu``
  engine, the default).

This module holds the `CostModel` plugin (`AspectModel`) and the conversion of MAESTRO's
counts to `Metrics`, and re-exports the public names of the others.

Two entry points:

* `analyze` evaluates one `DirectiveMapping` (a MAESTRO layer) and returns an
  `AspectResult` in MAESTRO's naming (this is what ``accelmap evaluate --maestro-*`` prints);
* `AspectModel` is the `CostModel` plugin for accelmap `MappingBatch` es: a mapping's
  directive form (`directives_from_mapping`) is analysed by the compiled kernel (engine
  ``cpu``) or, with engine ``numpy``, by numpy closed forms over the whole batch where it has
  no edge tiles and by `analyze` otherwise; `evaluate_one` is always `analyze` (the scalar
  reference).

The PE-array shape is a variable: `shapes` lists the candidates, `arch_with_shape` builds
the arch, and `accelmap.search.shapes` searches shape and mapping together.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.costmodels._aspect_numpy import _TNAMES, _empty_rows, _evaluate_regular, _stride_adjust
from accelmap.costmodels.aspect_analysis import (
    L1_ENERGY_PER_ACCESS_X_MAC,
    L2_ENERGY_PER_ACCESS_X_MAC,
    AspectResult,
    ClusterDirective,
    Directive,
    DirectiveKind,
    DirectiveMapping,
    MaestroHardware,
    MaestroLayer,
    analyze,
)
from accelmap.costmodels.aspect_form import (
    AspectView,
    _l1_levels,
    _Layout,
    _layout,
    _maestro_layer,
    _row_plan,
    _tensor_var_masks,
    _unrepresentable,
    _vars,
    arch_with_shape,
    aspect_constraints,
    aspect_view,
    directive_form,
    directives_from_mapping,
    shapes,
)
from accelmap.costmodels.base import Metrics
from accelmap.errors import SpecError
from accelmap.mapper.check import Reason, check_batch
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem

if TYPE_CHECKING:
    from accelmap.costmodels._aspect_kernel import AspectConsts

__all__ = [
    "DirectiveKind",
    "Directive",
    "ClusterDirective",
    "MaestroLayer",
    "MaestroHardware",
    "DirectiveMapping",
    "AspectResult",
    "analyze",
    "AspectModel",
    "AspectView",
    "aspect_view",
    "directives_from_mapping",
    "directive_form",
    "aspect_constraints",
    "shapes",
    "arch_with_shape",
    "L1_ENERGY_PER_ACCESS_X_MAC",
    "L2_ENERGY_PER_ACCESS_X_MAC",
]

# private helpers other modules and tests reach through this module
_REEXPORTED = (_Layout, _layout, _maestro_layer, _row_plan, _tensor_var_masks, _unrepresentable, _vars,
               _stride_adjust, _evaluate_regular)


def _fill_row(rows: dict[str, np.ndarray], i: int, r: AspectResult) -> None:
    rows["runtime"][i] = r.runtime_cycles
    rows["macs"][i] = r.num_macs
    for j, t in enumerate(_TNAMES):
        for k, src in (("l1_read", "l1_read"), ("l1_write", "l1_write"), ("l2_read", "l2_read"),
                       ("l2_write", "l2_write"), ("l1_req", "l1_size_req"), ("l2_req", "l2_size_req")):
            rows[k][i, j] = r.tensors[t][src]


class AspectModel:
    """MAESTRO-class cost model (plugin name ``aspect``).

    Reads the arch through `aspect_view` (one PE array of ``fanout_x`` PEs per cluster by
    ``fanout_y`` clusters, an L2 at the array level, an L1 per PE below it, off-chip above)
    and each mapping through `directives_from_mapping`. Per mapping: cycles = the analysed
    runtime; per-level counts: L2 and L1 reads/fills/updates as MAESTRO counts them, off-chip
    reads = L2 fills of the operands and off-chip updates = L2 reads of the output (the
    write-back); energy = counts x the arch's per-access energies + MACs x MAC energy.

    A problem or arch the model cannot read (`unsupported` says why) gives all rows
    ``Reason.MODEL``. A row is invalid (`Reason`) when `check_batch` rejects it (capacity excepted), when it
    has no directive form or the directive form does not do exactly the problem's MACs
    (``MODEL``: e.g. a filter dim tiled above the PE, which MAESTRO's sliding-window
    directives cannot express), or when MAESTRO's double-buffered L1 / L2 requirements
    exceed the arch's capacities (``CAPACITY``). The ``keep`` array is not used: the model
    keeps every tensor at L1 and L2, as MAESTRO does.

    Engines (``engine=``, or ``ACCELMAP_KERNELS``): ``"cpu"``, the compiled kernel
    (`accelmap.costmodels._aspect_kernel`, the default), ``"numpy"``, closed forms over
    the batch with the scalar analysis for rows with edge tiles, and ``"cuda"``, the
    compiled kernel's rules on a GPU (`accelmap.costmodels._aspect_cuda`); they agree exactly.
    """

    name: ClassVar[str] = "aspect"
    #: The directive form needs exact factorizations (``allow_padding`` is refused).
    imperfect_factorization: ClassVar[bool] = False

    def __init__(self, engine: str | None = None, *, vectorized: bool = True) -> None:
        """``engine``: ``"cpu"`` (the compiled kernel, `_aspect_kernel`; the default),
        ``"numpy"`` (the batched numpy path, its executable reference; also
        ``ACCELMAP_KERNELS=numpy``) or ``"cuda"`` (the compiled kernel's rules on an NVIDIA
        GPU, one thread a mapping, `_aspect_cuda`; numba-cuda and a GPU needed, the ``cuda``
        extra). ``vectorized=False`` sends every row of the numpy path through the scalar
        analysis (for tests).

        Raises
        ------
        SpecError
            The engine is unknown; `DeviceError` (a `SpecError`) when it is ``"cuda"`` and
            numba-cuda or a GPU is missing.
        """
        from accelmap.costmodels.engines import resolve_engine

        self.engine = resolve_engine(engine)
        if self.engine == "cuda":  # a clear error now rather than at the first batch
            from accelmap.costmodels._cuda import require

            require("the aspect model's engine 'cuda'")
        self.vectorized = vectorized
        # per (problem, arch): the kernel's constants, their structure (`_aspect_cpu`), [rows seen]
        self._consts: dict[tuple[int, int], tuple[Problem, Arch, AspectConsts, tuple, list[int]]] = {}

    @staticmethod
    def unsupported(problem: Problem, arch: Arch) -> str | None:
        """Why this model cannot read ``problem`` on ``arch`` (None when it can).

        `evaluate` then marks every row invalid (``Reason.MODEL``) instead of raising."""
        try:
            _layout(problem)
            aspect_view(arch)
        except SpecError as exc:
            return str(exc)
        return None

    def evaluate(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        n = len(mappings)
        if self.unsupported(problem, arch) is not None:
            return _all_model_invalid(problem, arch, n)
        view = aspect_view(arch)
        shapes_ok = (mappings.n_levels, mappings.n_dims, mappings.n_tensors) == (arch.n_levels, problem.n_dims,
                                                                              problem.n_tensors)
        if self.engine != "numpy" and self.vectorized and shapes_ok and n:
            return self._evaluate_kernel(problem, arch, view, mappings)
        lay = _layout(problem)
        chk = check_batch(problem, arch, mappings)
        ok = chk.valid | (chk.reason == int(Reason.CAPACITY))
        reason = np.where(ok, 0, chk.reason)
        level = np.where(ok, -1, chk.level)
        rows = _empty_rows(n)
        done = np.zeros(n, dtype=bool)
        if self.vectorized and ok.any():
            idx = np.flatnonzero(ok)
            sub, regular, macs_ok = _evaluate_regular(problem, lay, view, mappings.take(idx))
            ridx = idx[regular & macs_ok]
            for k in rows:
                rows[k][ridx] = sub[k][regular & macs_ok]
            # no directive form (spatial unrolling off the array level, two dims on one axis)
            shape_bad = _unrepresentable(view, mappings.take(idx))
            reason[idx[(regular & ~macs_ok) | shape_bad]] = int(Reason.MODEL)
            done[idx[regular | shape_bad]] = True
        for i in np.flatnonzero(ok & ~done):
            res = self._row(problem, arch, mappings[int(i)])
            if res is None:
                reason[i] = int(Reason.MODEL)
            else:
                _fill_row(rows, int(i), res)
        return _metrics(problem, arch, view, rows, reason, level)

    def _evaluate_kernel(self, problem: Problem, arch: Arch, view: AspectView, mappings: MappingBatch) -> Metrics:
        """`evaluate` by the compiled kernel (`_aspect_kernel`): the same rows and codes as the
        numpy path, then the shared `_metrics`."""
        from accelmap.costmodels import _aspect_cpu, _aspect_kernel

        key = (id(problem), id(arch))
        hit = self._consts.get(key)
        if hit is None or hit[0] is not problem or hit[1] is not arch:
            if len(self._consts) > 64:
                self._consts.clear()
            c = _aspect_kernel.aspect_consts(problem, arch)
            hit = (problem, arch, c, _aspect_cpu.structure(c), [0])  # [rows seen]
            self._consts[key] = hit
        if self.engine == "cuda":
            from accelmap.costmodels import _aspect_cuda

            return _aspect_cuda.evaluate(hit[2], problem, arch, mappings.temporal, mappings.spatial, mappings.order,
                                         mappings.keep)
        # the generic driver until this (problem, arch) has seen SPECIALISE_AFTER_ROWS rows,
        # then the structure's own (`_aspect_cpu`) once its compile, begun then, is done
        seen = hit[4]
        seen[0] += len(mappings)
        rows = _aspect_cpu.compiled(hit[3]) if seen[0] >= _aspect_cpu.SPECIALISE_AFTER_ROWS else None
        out, codes = _aspect_kernel.evaluate_rows(hit[2], mappings.temporal, mappings.spatial, mappings.order,
                                                  mappings.keep, rows)
        return _aspect_kernel.metrics(hit[2], out, codes, problem, arch)

    def evaluate_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> Metrics:
        """Scalar reference: the directive form of the mapping through `analyze`."""
        if self.unsupported(problem, arch) is not None:
            return _all_model_invalid(problem, arch, 1)
        view = aspect_view(arch)
        batch = mapping.as_batch()
        chk = check_batch(problem, arch, batch)
        ok = bool(chk.valid[0] or chk.reason[0] == int(Reason.CAPACITY))
        reason = np.array([0 if ok else int(chk.reason[0])])
        level = np.array([-1 if ok else int(chk.level[0])])
        rows = _empty_rows(1)
        if ok:
            res = self._row(problem, arch, mapping)
            if res is None:
                reason[0] = int(Reason.MODEL)
            else:
                _fill_row(rows, 0, res)
        return _metrics(problem, arch, view, rows, reason, level)

    @staticmethod
    def _row(problem: Problem, arch: Arch, mapping: Mapping) -> AspectResult | None:
        try:
            dm, hw = directives_from_mapping(problem, arch, mapping)
        except SpecError:
            return None
        res = _analyze_cached(dm, hw)
        return res if res.num_macs == problem.macs else None


def _all_model_invalid(problem: Problem, arch: Arch, n: int) -> Metrics:
    L, T = arch.n_levels, problem.n_tensors
    z = np.zeros((n, L, T))
    return Metrics(
        cycles=np.full(n, np.inf), energy_pj=np.full(n, np.inf), compute_energy_pj=np.zeros(n),
        utilization=np.zeros(n), valid=np.zeros(n, bool), reason=np.full(n, int(Reason.MODEL), np.int64),
        reason_level=np.full(n, -1, np.int64), reads=z, fills=z.copy(), updates=z.copy(),
        energy_breakdown_pj=z.copy(), multicast=z.copy(), spatial_reductions=z.copy(),
        macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
    )


# searches revisit mappings; specs are frozen and hashable, results are never mutated
_analyze_cached = functools.lru_cache(maxsize=4096)(analyze)


def _metrics(problem: Problem, arch: Arch, view: AspectView, rows: dict[str, np.ndarray],
             reason: np.ndarray, level: np.ndarray) -> Metrics:
    n = len(reason)
    L, T = arch.n_levels, problem.n_tensors
    lay = _layout(problem)
    a = view.array_level
    l1_of = _l1_levels(problem, arch, view, lay)
    caps = arch.capacities_words
    valid = reason == 0
    l2_need = rows["l2_req"].sum(axis=1)
    cap_bad = valid & (l2_need > caps[a])
    for lv in sorted({v for v in l1_of.values() if v is not None}):
        need = sum(rows["l1_req"][:, j] for j, tn in enumerate(_TNAMES) if l1_of[tn] == lv)
        l1_bad = valid & ~cap_bad & (reason == 0) & (need > caps[lv])
        level = np.where(l1_bad, lv, level)
        reason = np.where(l1_bad, int(Reason.CAPACITY), reason)
    level = np.where(cap_bad, a, level)
    reason = np.where(cap_bad, int(Reason.CAPACITY), reason)
    valid = reason == 0
    reads = np.zeros((n, L, T))
    fills = np.zeros((n, L, T))
    updates = np.zeros((n, L, T))
    for j, tname in enumerate(_TNAMES):
        t = lay.tensor(tname)
        l1 = l1_of[tname]
        if tname == "output":
            reads[:, a, t] = rows["l2_read"][:, j]
            updates[:, a, t] = rows["l2_write"][:, j]
            if l1 is not None:
                reads[:, l1, t] = rows["l1_read"][:, j]
                updates[:, l1, t] = rows["l1_write"][:, j]
            if a > 0:
                updates[:, 0, t] = rows["l2_read"][:, j]
        else:
            reads[:, a, t] = rows["l2_read"][:, j]
            fills[:, a, t] = rows["l2_write"][:, j]
            if l1 is not None:
                reads[:, l1, t] = rows["l1_read"][:, j]
                fills[:, l1, t] = rows["l1_write"][:, j]
            if a > 0:
                reads[:, 0, t] = rows["l2_write"][:, j]
    rd_e = np.array([lv.read_energy_pj / lv.block_words for lv in arch.levels])
    wr_e = np.array([lv.write_energy_pj / lv.block_words for lv in arch.levels])
    breakdown = reads * rd_e[None, :, None] + (fills + updates) * wr_e[None, :, None]
    macs = problem.macs
    compute = np.full(n, macs * arch.compute.energy_per_mac_pj, dtype=float)
    energy = breakdown.sum(axis=(1, 2)) + compute
    cycles = rows["runtime"].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.where(cycles > 0, macs / (np.maximum(cycles, 1) * arch.n_macs), 0.0)
    inv = ~valid
    cycles = np.where(inv, np.inf, cycles)
    energy = np.where(inv, np.inf, energy)
    util = np.where(inv, 0.0, util)
    for arr in (reads, fills, updates, breakdown):
        arr[inv] = 0.0
    return Metrics(
        cycles=cycles, energy_pj=energy, compute_energy_pj=np.where(inv, 0.0, compute),
        utilization=util, valid=valid, reason=reason.astype(np.int64), reason_level=level.astype(np.int64),
        reads=reads, fills=fills, updates=updates, energy_breakdown_pj=breakdown,
        multicast=np.zeros((n, L, T)), spatial_reductions=np.zeros((n, L, T)),
        macs=macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
    )
