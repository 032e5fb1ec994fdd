"""``loopnest``: a Timeloop-class analytical model of a hierarchical memory over a PE array.

The counting rules follow Timeloop's nest analysis (Parashar et al., "Timeloop: A
Systematic Approach to DNN Accelerator Evaluation", ISPASS 2019, Sec. IV-B, and the
behaviour of ``timeloop-model`` 3.0.3 documented in ``docs/validation.md``). Notation: level
``l = 0`` is the outermost (DRAM), ``L`` the number of storage levels, level ``L`` stands for
the MACs. ``tile[l, d]`` is the extent of dim ``d`` held by one instance of level ``l``.

**Deliveries into a tile** (eq. D). The temporal loops *above* level ``c`` (levels ``0..c-1``,
outermost first) walk the tiles of one instance of ``c``. Timeloop simulates iteration 0 and
iteration 1 of every loop and extrapolates the rest (its ``gExtrapolateUniformTemporal``), and
charges each visit only the part of the tile that is new with respect to the tile visited
just before. For loop ``j`` with bound ``n_j`` the step from one visit to the next moves
dim ``d_j`` forward by the loop's stride and moves every active loop inside ``j`` back by one
stride. So, with ``Delta_j`` the new words after that step,

    F_c = |tile| + sum_j (prod_{i<j} n_i) (n_j - 1) Delta_j.

``Delta_j`` follows Timeloop's axis-aligned box difference: zero if no tensor coordinate
moves; ``|shift| x (other spans)`` if exactly one coordinate moves by less than its span
(the sliding-window halo reuse of convolutions); the whole tile otherwise. This gives
temporal reuse across the innermost loops that do not index the tensor, and halo reuse when
an output (or filter) loop advances. One more Timeloop rule (its ``RESET_ON_GRADIENT_CHANGE``):
a window keeps sliding only while successive moves go the same way, so when the innermost
active loop above ``c`` slides along a coordinate, any other loop whose step slides along a
different coordinate or direction reloads the whole tile (eq. G).

**Imperfect factorization** (padded tiles, a MapSpace's ``allow_padding``). A mapping whose
factors of dim ``d`` multiply to ``B'_d >= B_d`` runs the padded iteration space ``B'`` (its
tiles are ceil-divided, every tile the same size): it is counted as the same mapping of
``P' = P.padded_iteration(B')``, the problem with bounds ``B'`` whose words beyond the real
tensors do not exist, so a tensor's counts are scaled by the share of its words that exist
(the padding rule below, `Problem.existing_fraction`). Cycles count the padded steps; the
padded MACs are executed (no gating: compute energy = padded MACs x MAC energy, and the
innermost level serves their operands); `Metrics.macs` and the utilization are the real
MACs (useful work). Timeloop's residual iterations (a last tile smaller than the others)
are a different schedule and are not modelled; a padded space of more than 2^53 points (float64
counts no longer exact) is illegal (``FACTORS``). A batch is evaluated group by group, one
group per product vector ``B'`` (mappings that factorize every bound exactly form one group
on ``P`` itself, so their results are those of an exact batch, bit for bit).

**Spatial sharing** (eq. S). Below level ``l`` the children with identical deltas are served
by one read (multicast) and, for the output, their updates are combined (spatial
reduction). Children have identical deltas exactly when their coordinate offsets agree, so a
level divides traffic into ``distinct_l(t)`` groups: the number of distinct offset vectors of
tensor ``t`` over the level's spatial index grid (the product of the spatial factors of the
dims that index ``t``, unless two of them share a coordinate, e.g. ``P`` and ``R`` unrolled
together, when equal sums coincide).

**Per level and tensor** (per instance), with ``p`` a level keeping ``t`` and ``c`` the next
inner level keeping it (or the MACs, which touch every operand once per MAC):

* content accesses ``A_p = F_c x prod_{l=p}^{c-1} distinct_l(t)``;
* inputs/weights: reads = ``A_p``, fills = ``F_p`` (none at the outermost level);
* the output: updates = ``A_p``, reads = ``A_p - part_p`` (the first read of each output is
  elided), fills = ``F_p - part_p``, where ``part_p`` is the number of distinct outputs one
  instance ever holds (its tile widened by every temporal loop above it).

Totals multiply by the utilized instances of the level. Energy of a level =
``sum_actions ceil(count / block) x energy`` per instance (reads at the read energy, fills
and updates at the write energy), plus MACs x MAC energy. Cycles = the larger of the compute
cycles (MACs per PE) and, for every level with a bandwidth limit, its read words over its
read bandwidth and its written words over its write bandwidth.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading
from typing import ClassVar, cast

import numpy as np

from accelmap._typing import BoolArray, FloatArray, IntArray
from accelmap.arch.spec import Arch
from accelmap.costmodels._loopnest_numpy import _CHUNK_ROWS as _CHUNK_ROWS
from accelmap.costmodels._loopnest_numpy import _blocks as _blocks
from accelmap.costmodels._loopnest_numpy import _compile, _Compiled, _count_existing_words, evaluate_numpy
from accelmap.costmodels._loopnest_numpy import _distinct_level as _distinct_level
from accelmap.costmodels._loopnest_numpy import _fast_ok as _fast_ok
from accelmap.costmodels.base import Metrics, ObjectiveMetrics
from accelmap.costmodels.engines import resolve_engine
from accelmap.errors import SpecError
from accelmap.mapper.check import Reason, check_batch
from accelmap.mapper.mapping import Mapping, MappingBatch
from accelmap.workloads.problem import Problem

__all__ = ["LoopNestModel", "ObjectiveMetrics"]

# Where the rules are made fast: `_loopnest_numpy` (the batched numpy path, the executable
# reference), `_loopnest_rules` (the rules for one mapping, which numba compiles),
# `_loopnest_kernel` and `_loopnest_cpu` (numba, CPU), `_cuda*` (numba, CUDA).
# The ``name as name`` imports above re-export names of the batched path that callers and
# tests reach through this module.


class LoopNestModel:
    """Timeloop-class loop-nest cost model (see the module docstring for the equations).

    Examples
    --------
    >>> from accelmap.testing.examples import small_arch, small_conv, trivial_mapping
    >>> problem, arch = small_conv(), small_arch()
    >>> mapping = trivial_mapping(problem, arch)  # every loop at DRAM, one MAC busy
    >>> m = LoopNestModel().evaluate(problem, arch, mapping.as_batch())
    >>> int(m.cycles[0]) == problem.macs, float(m.utilization[0])
    (True, 0.0625)
    >>> m.row(0)["levels"]["RF"]["Weights"]["reads"] == problem.macs
    True
    """

    name: ClassVar[str] = "loopnest"
    #: Imperfect factorization (padded tiles, ``allow_padding``) is modelled: a mapping whose
    #: factors multiply past a bound runs the padded iteration space (module docstring).
    imperfect_factorization: ClassVar[bool] = True

    def __init__(self, engine: str | None = None) -> None:
        self.engine = resolve_engine(engine)
        if self.engine == "cuda":  # a clear error now rather than at the first batch
            from accelmap.costmodels._cuda import require

            require("the loopnest model's engine 'cuda'")
        self._cache: dict[tuple[int, int], tuple[Problem, Arch, _Compiled]] = {}
        self._consts: dict[tuple[int, int], tuple[Problem, Arch, object]] = {}
        self._rows_seen: dict[tuple[int, int], int] = {}  # the cpu engine's rows per (problem, arch)
        self._buffers: object = None  # the cpu engine's counts arrays (`_buffers.OutputBuffers`)
        self._scratch: object = None  # the cpu engine's scratch arrays (`_loopnest_kernel.ThreadScratch`)
        self._fracs: dict[int, tuple[Problem, FloatArray | None]] = {}  # `_existing_fraction` per problem
        self._labels: dict[tuple[int, int], tuple[Problem, Arch, tuple]] = {}  # `_names` per (problem, arch)
        self._plan: tuple | None = None  # (problem, arch, `_loopnest_kernel.SerialPlan`) of the last serial call

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_plan"] = None  # (compiled rows and this thread's scratch: made again where it is used)
        return state

    def _kernel_consts(self, problem: Problem, arch: Arch, like: Problem | None = None):  # noqa: ANN202 (lazy import)
        """The kernel constants of (problem, arch), cached; ``like``: a problem that differs
        from ``problem`` in its bounds only (the real one of a padded iteration), whose
        constants are then reused (`_loopnest_kernel.rebound`)."""
        from accelmap.costmodels import _loopnest_kernel

        key = (id(problem), id(arch))
        hit = self._consts.get(key)
        if hit is not None and hit[0] is problem and hit[1] is arch:
            return hit[2]
        if like is not None and np.array_equal(like.bounds > 1, problem.bounds > 1):
            consts = _loopnest_kernel.rebound(self._kernel_consts(like, arch), problem)
        else:
            consts = _loopnest_kernel.kernel_consts(problem, arch)
        if len(self._consts) > 1024:
            self._consts.clear()
        self._consts[key] = (problem, arch, consts)
        return consts

    def _compiled(self, problem: Problem, arch: Arch) -> _Compiled:
        key = (id(problem), id(arch))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is problem and hit[1] is arch:
            return hit[2]
        comp = _compile(problem, arch)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = (problem, arch, comp)
        return comp

    # ------------------------------------------------------------------------------------
    # Batched path
    # ------------------------------------------------------------------------------------
    def evaluate(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        """Evaluate every mapping of a batch with array math (no per-mapping Python loop).

        Returns `Metrics` whose count arrays have shape (n, n_levels, n_tensors) and hold
        totals over all instances of a level; invalid rows have ``inf`` cycles and energy
        and zero counts. The count arrays are (n, L, T) views of level-major storage
        (``metrics.reads[:, level, tensor]`` is contiguous).
        """
        spec = self.engine == "cpu" and self._specialise(problem, arch, len(mappings))
        got = self._serial(problem, arch, mappings, True) if spec else None  # (None unless the shapes match)
        if got is not None and not got[1]:  # every row legal: none padded
            return cast("Metrics", got[0])
        m = cast("Metrics | None", got[0] if got is not None else None)
        shapes_ok = m is not None or (mappings.n_levels, mappings.n_dims, mappings.n_tensors) == (
            arch.n_levels, problem.n_dims, problem.n_tensors)
        if self.engine == "cuda" and shapes_ok and len(mappings):  # refused before any device work
            n_padded = int(_padded_rows(problem, _factor_products(mappings)).sum())
            if n_padded:
                raise SpecError("the loopnest model's cuda engine evaluates mappings whose factors multiply out to "
                                f"every bound exactly; {n_padded} of {len(mappings)} rows are padded "
                                "(imperfect factorization): use engine cpu or numpy for them")
        if m is None:
            m = self._evaluate_exact(problem, arch, mappings, spec)
        padded = self._padded(problem, mappings, m.reason, m.valid) if shapes_ok else None
        if padded is None:
            return m
        # imperfect factorizations: each group on its padded iteration space
        rows, prod = padded
        exact = np.setdiff1d(np.arange(len(mappings)), rows, assume_unique=True)
        parts = [(exact, m.take(exact))] if exact.size else []
        keys, rows, edges = _group_by_product(prod, rows)
        for g, key in enumerate(keys):
            p = problem.padded_iteration(tuple(int(v) for v in key))
            if self.engine != "numpy":  # its constants from the real problem's (no new compile)
                self._kernel_consts(p, arch, like=problem)
            idx = rows[edges[g]:edges[g + 1]]
            parts.append((idx, self._evaluate_exact(p, arch, mappings.take(idx), spec)))
        return _merge_metrics(problem, arch, parts)

    def _evaluate_exact(self, problem: Problem, arch: Arch, mappings: MappingBatch,
                        specialised: bool | None) -> Metrics:
        """Every row on ``problem`` itself (factor products other than its bounds are illegal);
        ``specialised``: the cpu engine's driver choice (None: `_specialise` decides)."""
        shapes_ok = (mappings.n_levels, mappings.n_dims, mappings.n_tensors) == (arch.n_levels, problem.n_dims,
                                                                                  problem.n_tensors)
        if self.engine != "numpy" and shapes_ok:
            return self._evaluate_kernel(problem, arch, mappings, specialised)
        return self._evaluate_numpy(problem, arch, mappings)

    @staticmethod
    def _padded(problem: Problem, mappings: MappingBatch, reason: IntArray,
                valid: BoolArray) -> tuple[IntArray, IntArray] | None:
        """The rows of a batch evaluated on ``problem`` (``reason``, ``valid``: their reason
        codes and validity) that are counted on a padded iteration space instead, and their
        factor products (m, D); None when there are none. Only rows that ``problem`` marks
        ``FACTORS`` can be padded (their factor products differ from its bounds), so the
        products are formed for those rows alone: formed for every row of a batch
        (``prod(axis=(1, 3))``), they cost more than the compiled rows themselves (about 0.7 us
        a row, res2a_branch2b on eyeriss-like). A batch of legal rows only is answered from
        ``valid`` (contiguous booleans: about 1 us at 10,000 rows, against 25-40 us for the
        scan of the strided reason codes)."""
        if valid.all():
            return None
        cand = np.flatnonzero(reason == int(Reason.FACTORS))
        if not cand.size:
            return None
        prod = _factor_products(mappings, cand)
        padded = _padded_rows(problem, prod)
        if not padded.any():
            return None
        return cand[padded], prod[padded]

    def _evaluate_kernel(self, problem: Problem, arch: Arch, mappings: MappingBatch,
                         specialised: bool | None = None) -> Metrics:
        """The compiled path (`accelmap.costmodels._loopnest_kernel`): same `Metrics`."""
        from accelmap.costmodels import _loopnest_kernel

        consts = self._kernel_consts(problem, arch)
        if self.engine == "cuda":
            from accelmap.costmodels import _cuda

            out = _cuda.evaluate(consts, problem, arch, mappings.temporal, mappings.spatial, mappings.order,
                                 mappings.keep)
            if problem.has_padding:  # padding only, as on the numpy path: see `_count_existing_words`
                _count_existing_words(problem, out["reads"], out["fills"], out["updates"],
                                      out["energy_breakdown_pj"], out["energy_pj"])
        else:  # the CPU kernel scales padded tensors itself (`_count_existing_words`' rule)
            if self._buffers is None:
                from accelmap.costmodels._buffers import OutputBuffers

                self._buffers = OutputBuffers()
            out = _loopnest_kernel.evaluate_batch(consts, mappings.temporal, mappings.spatial, mappings.order,
                                                   mappings.keep, frac=self._existing_fraction(problem),
                                                   specialised=self._specialise(problem, arch, len(mappings))
                                                   if specialised is None else specialised, buffers=self._buffers,
                                                   scratch_buffers=self._scratch_buffers())
        macs, level_names, tensor_names = self._names(problem, arch)
        return Metrics(**out, macs=macs, level_names=level_names, tensor_names=tensor_names)

    def _serial(self, problem: Problem, arch: Arch, mappings: MappingBatch,
                counts: bool) -> tuple[Metrics | ObjectiveMetrics, int] | None:
        """Every row on ``problem`` itself on the specialised driver, when the batch runs on
        this thread alone (`_loopnest_kernel.serial`), through the `SerialPlan` of (problem,
        arch) kept from the last such call: `_evaluate_kernel` (``counts``) or
        `_objective_exact` in fewer Python steps, the same rows on the same arrays, and the
        number of illegal rows (none: no row can be padded, `_padded` need not look). None
        where it does not apply (a batch that runs threaded, or whose shapes are not those of
        (problem, arch))."""
        lk = _kernel_module()
        temporal, keep = mappings.temporal, mappings.keep
        if not lk.serial(temporal.shape[0]):
            return None
        plan = self._plan
        if plan is None or plan[0] is not problem or plan[1] is not arch or plan[2].ident != threading.get_ident():
            plan = self._plan = (problem, arch, lk.SerialPlan(self._kernel_consts(problem, arch),
                                                              self._existing_fraction(problem),
                                                              self._scratch_buffers(), self._names(problem, arch)))
        if temporal.shape[1:] != plan[2].shape_ld or keep.shape[2:] != plan[2].shape_t:
            return None
        return plan[2].run(temporal, mappings.spatial, mappings.order, keep, counts)

    def _names(self, problem: Problem, arch: Arch) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
        """The MACs, level names and tensor names a `Metrics` of (problem, arch) carries, kept
        per pair (each a property that builds its value anew: about 3 us a call)."""
        key = (id(problem), id(arch))
        hit = self._labels.get(key)
        if hit is not None and hit[0] is problem and hit[1] is arch:
            return hit[2]
        got = (problem.macs, arch.level_names, problem.tensor_names)
        if len(self._labels) > 1024:
            self._labels.clear()
        self._labels[key] = (problem, arch, got)
        return got

    def _specialise(self, problem: Problem, arch: Arch, n: int) -> bool:
        """Whether the cpu engine runs this batch on its driver specialised per structure:
        once this model has evaluated ``_loopnest_kernel._SPECIALISE_AFTER_ROWS`` rows of the
        (problem, arch), this batch included (see there for why), and those rows are compiled
        (in this process, in numba's cache, or by the process `_loopnest_cpu.rows_ready`
        starts for them; with ``_loopnest_kernel._SPECIALISE_IN_BACKGROUND`` off, compiled
        here on this call)."""
        key = (id(problem), id(arch))
        if key not in self._rows_seen and len(self._rows_seen) > 64:
            self._rows_seen.clear()
        seen = self._rows_seen[key] = self._rows_seen.get(key, 0) + n
        lk = _kernel_module()
        if seen < lk._SPECIALISE_AFTER_ROWS:
            return False
        if not lk._SPECIALISE_IN_BACKGROUND:
            return True
        from accelmap.costmodels import _loopnest_cpu

        # (the rows' first compile runs in a process of its own; the generic driver serves here
        # until it has ended: `_loopnest_cpu.rows_ready`)
        return _loopnest_cpu.rows_ready(problem, arch, self._kernel_consts(problem, arch).structure)

    def _scratch_buffers(self):  # noqa: ANN202 (a `_loopnest_kernel.ThreadScratch`, imported lazily)
        """The cpu engine's scratch arrays, kept across calls, one set per thread."""
        if self._scratch is None:
            from accelmap.costmodels._loopnest_kernel import ThreadScratch

            self._scratch = ThreadScratch()
        return self._scratch

    def _existing_fraction(self, problem: Problem) -> FloatArray | None:
        """`Problem.existing_fraction` (None without padding), read-only, kept per problem: a
        call of the problem's own costs about 15 us (it hashes the problem for its cache and
        copies), 1.5 ns a row of a 10,000-row batch."""
        hit = self._fracs.get(id(problem))
        if hit is not None and hit[0] is problem:
            return hit[1]
        frac = problem.existing_fraction() if problem.has_padding else None
        if frac is not None:
            frac = np.ascontiguousarray(frac, dtype=np.float64)
            frac.setflags(write=False)
        if len(self._fracs) > 1024:
            self._fracs.clear()
        self._fracs[id(problem)] = (problem, frac)
        return frac

    def evaluate_objective(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> ObjectiveMetrics:
        """Cycles, energy, validity and reason of every mapping, without the per-level counts.

        What a search reads of `evaluate`, equal to it field by field; the CPU engine then
        skips writing the (n, L, T) count arrays (720 bytes per mapping on a 5-level,
        3-tensor problem), the other engines take the fields of `evaluate`.
        """
        if self.engine == "cpu" and (mappings.n_levels, mappings.n_dims, mappings.n_tensors) == (
                arch.n_levels, problem.n_dims, problem.n_tensors):
            spec = self._specialise(problem, arch, len(mappings))
            got = self._serial(problem, arch, mappings, False) if spec else None
            if got is not None and not got[1]:  # every row legal: none padded
                return cast("ObjectiveMetrics", got[0])
            res = cast("ObjectiveMetrics", got[0]) if got is not None else self._objective_exact(problem, arch,
                                                                                                 mappings, spec)
            padded = self._padded(problem, mappings, res.reason, res.valid)
            if padded is not None:
                self._objective_padded(problem, arch, mappings, *padded, spec, res)
            return res
        m = self.evaluate(problem, arch, mappings)
        return ObjectiveMetrics(cycles=m.cycles, energy_pj=m.energy_pj, valid=m.valid, reason=m.reason,
                                reason_level=m.reason_level)

    def _objective_padded(self, problem: Problem, arch: Arch, mappings: MappingBatch, rows: IntArray,
                          prod: IntArray, spec: bool, res: ObjectiveMetrics) -> None:
        """`evaluate_objective`'s padded rows (``rows``, their factor products ``prod`` (m, D))
        on the cpu engine, written into ``res``: the groups of `_group_by_product`, each run
        on the kernel constants of its padded iteration space built in one pass for every
        group (`_loopnest_kernel.rebound`'s arrays, `Problem.padded_fractions`) over the
        group's contiguous rows, so a batch of many small groups costs one kernel call per
        group and no per-group `Problem`."""
        from accelmap.costmodels import _loopnest_kernel

        names = ("cycles", "energy_pj", "valid", "reason", "reason_level")
        keys, rows, edges = _group_by_product(prod, rows)
        temporal, spatial = np.ascontiguousarray(mappings.temporal[rows]), np.ascontiguousarray(mappings.spatial[rows])
        order, keep = np.ascontiguousarray(mappings.order[rows]), np.ascontiguousarray(mappings.keep[rows])
        base = self._kernel_consts(problem, arch)
        sizes = problem.footprint(keys)
        fracs = problem.padded_fractions(keys)
        scals = np.repeat(base.scal[None, :], len(keys), axis=0)
        scals[:, 0] = keys.prod(axis=1).astype(np.float64)  # the padded MACs
        same = ((keys > 1) == (problem.bounds > 1)).all(axis=1)  # else a new structure: its own constants
        got = {name: np.empty(len(rows), dtype=getattr(res, name).dtype) for name in names}  # each group a slice
        for g in range(len(keys)):
            lo, hi = int(edges[g]), int(edges[g + 1])
            if same[g]:
                consts = dataclasses.replace(base, bounds=keys[g], tensor_size=sizes[g], scal=scals[g])
                frac = fracs[g]
            else:
                pp = problem.padded_iteration(tuple(int(v) for v in keys[g]))
                consts, frac = self._kernel_consts(pp, arch), pp.existing_fraction()
            out = _loopnest_kernel.evaluate_batch(consts, temporal[lo:hi], spatial[lo:hi], order[lo:hi],
                                                   keep[lo:hi], frac=frac, counts=False, specialised=spec,
                                                   scratch_buffers=self._scratch_buffers())
            for name in names:
                got[name][lo:hi] = out[name]
        for name in names:
            getattr(res, name)[rows] = got[name]

    def _objective_exact(self, problem: Problem, arch: Arch, mappings: MappingBatch,
                         specialised: bool | None) -> ObjectiveMetrics:
        """`evaluate_objective` of every row on ``problem`` itself, on the cpu engine."""
        from accelmap.costmodels import _loopnest_kernel

        out = _loopnest_kernel.evaluate_batch(self._kernel_consts(problem, arch), mappings.temporal,
                                               mappings.spatial, mappings.order, mappings.keep,
                                               frac=self._existing_fraction(problem), counts=False,
                                               specialised=self._specialise(problem, arch, len(mappings))
                                               if specialised is None else specialised,
                                               scratch_buffers=self._scratch_buffers())
        return ObjectiveMetrics(cycles=out["cycles"], energy_pj=out["energy_pj"], valid=out["valid"],
                                reason=out["reason"], reason_level=out["reason_level"])

    def _evaluate_numpy(self, problem: Problem, arch: Arch, mappings: MappingBatch) -> Metrics:
        """The numpy batched path (`accelmap.costmodels._loopnest_numpy`): the executable
        reference of the compiled one."""
        return evaluate_numpy(self._compiled(problem, arch), problem, arch, mappings)

    # ------------------------------------------------------------------------------------
    # Scalar reference path
    # ------------------------------------------------------------------------------------
    def evaluate_one(self, problem: Problem, arch: Arch, mapping: Mapping) -> Metrics:
        """The scalar reference: one mapping, plain Python integers, loop by loop.

        A mapping whose factor products cover the bounds with padding is counted on the
        padded iteration space (module docstring); its `Metrics` report the real MACs."""
        prod = [math.prod(int(mapping.temporal[lv, d]) * int(mapping.spatial[lv, d, 0]) * int(mapping.spatial[lv, d, 1])
                          for lv in range(mapping.temporal.shape[0])) for d in range(mapping.temporal.shape[1])]
        if (mapping.temporal.shape == (arch.n_levels, problem.n_dims) and all(0 < p < 2**62 for p in prod)
                and _padded_rows(problem, np.array([prod], dtype=np.int64))[0]):
            m = self.evaluate_one(problem.padded_iteration(tuple(prod)), arch, mapping)
            util = m.utilization if not m.valid[0] else np.array([problem.real_macs / (arch.n_macs * m.cycles[0])])
            return dataclasses.replace(m, utilization=util, macs=problem.real_macs)
        check = check_batch(problem, arch, mapping.as_batch())
        L, T = arch.n_levels, problem.n_tensors
        z = np.zeros((1, L, T))
        if not check.valid[0]:
            return Metrics(
                cycles=np.array([np.inf]), energy_pj=np.array([np.inf]), compute_energy_pj=np.array([np.inf]),
                utilization=np.zeros(1), valid=check.valid, reason=check.reason, reason_level=check.level,
                reads=z, fills=z.copy(), updates=z.copy(), energy_breakdown_pj=z.copy(), multicast=z.copy(),
                spatial_reductions=z.copy(), macs=problem.macs, level_names=arch.level_names,
                tensor_names=problem.tensor_names,
            )
        res = _scalar_counts(problem, arch, mapping)
        if problem.has_padding:  # padding only: see `_count_existing_words`
            arrs = [np.array([res[k]], dtype=np.float64) for k in ("reads", "fills", "updates", "energy")]
            _count_existing_words(problem, arrs[0], arrs[1], arrs[2], arrs[3], np.zeros(1))
            res = {**res, **{k: a[0].tolist() for k, a in zip(("reads", "fills", "updates", "energy"), arrs,
                                                               strict=True)}}
        mac_pj = problem.macs * float(arch.compute.energy_per_mac_pj)
        energy = 0.0
        for row in res["energy"]:
            for e in row:
                energy += e
        energy += mac_pj
        cyc = res["cycles"]
        return Metrics(
            cycles=np.array([float(cyc)]), energy_pj=np.array([energy]), compute_energy_pj=np.array([mac_pj]),
            utilization=np.array([problem.macs / (arch.n_macs * cyc)]),
            valid=check.valid, reason=check.reason, reason_level=check.level,
            reads=np.array([res["reads"]], dtype=np.float64), fills=np.array([res["fills"]], dtype=np.float64),
            updates=np.array([res["updates"]], dtype=np.float64),
            energy_breakdown_pj=np.array([res["energy"]], dtype=np.float64),
            multicast=np.array([res["multicast"]], dtype=np.float64),
            spatial_reductions=np.array([res["reductions"]], dtype=np.float64),
            macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
        )


_KERNEL_MODULE: list = []  # `_loopnest_kernel`, once imported (it imports numba: not at this module's import)


def _kernel_module():  # noqa: ANN202 (the module)
    """`accelmap.costmodels._loopnest_kernel`, imported on first use; later calls skip the
    import machinery (a ``from ... import`` of a loaded module cost ~3 us with cold caches)."""
    if not _KERNEL_MODULE:
        from accelmap.costmodels import _loopnest_kernel

        _KERNEL_MODULE.append(_loopnest_kernel)
    return _KERNEL_MODULE[0]


# A padded iteration space of more points than float64 counts exactly is not evaluated: its
# rows stay on the real problem, where `check_batch` marks them (FACTORS).
_MAX_PADDED_POINTS = 2**53


def _group_by_product(prod: IntArray, rows: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """``rows`` grouped by their factor products ``prod`` (len(rows), D): the distinct product
    vectors ``keys`` (G, D), the rows sorted by group (stable), and ``edges`` (G + 1,): group
    ``g`` is ``sorted_rows[edges[g]:edges[g + 1]]``."""
    keys, inv = np.unique(prod, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    edges = np.searchsorted(inv[order], np.arange(len(keys) + 1))
    return keys, rows[order], edges


def _factor_products(mappings: MappingBatch, rows: IntArray | None = None) -> IntArray:
    """(n, D) the product of every factor of each dim (temporal x spatial X x Y over the
    levels) of the batch's rows (``rows``: those alone), formed as `check_batch` forms them, one
    whole-array multiply per level: int64 like ``np.prod``, so the same bit for bit, and about
    six times faster than ``prod(axis=(1, 3))`` (numpy reduces short middle axes slowly)."""
    t, s = (mappings.temporal, mappings.spatial) if rows is None else (mappings.temporal[rows], mappings.spatial[rows])
    fac = t * s[..., 0] * s[..., 1]
    prod = fac[:, 0].copy()
    for lv in range(1, fac.shape[1]):
        prod *= fac[:, lv]
    return prod


def _padded_rows(problem: Problem, prod: IntArray) -> BoolArray:
    """(n,) rows whose factor products ``prod`` (n, D) cover the bounds without equalling them,
    over at most `_MAX_PADDED_POINTS` points: the rows counted on a padded iteration space."""
    b = problem.bounds
    cover = (prod >= b).all(axis=1) & (prod != b).any(axis=1)
    with np.errstate(over="ignore"):
        points = np.prod(np.maximum(prod, 1).astype(np.float64), axis=1)
    return cover & (points <= _MAX_PADDED_POINTS)


def _merge_metrics(problem: Problem, arch: Arch, parts: list[tuple[IntArray, Metrics]]) -> Metrics:
    """One `Metrics` of a batch evaluated group by group (``parts``: each group's rows and
    metrics): rows back in batch order, `Metrics.macs` the real MACs of ``problem`` and each
    valid padded row's utilization the real MACs over its cycles (`Problem.real_macs`)."""
    fixed = []
    for idx, m in parts:
        if m.macs != problem.real_macs:
            util = np.where(m.valid, problem.real_macs / (arch.n_macs * np.where(m.valid, m.cycles, 1.0)),
                            m.utilization)
            m = dataclasses.replace(m, utilization=util, macs=problem.real_macs)
        fixed.append((idx, m))
    merged = Metrics.concat([m for _, m in fixed])
    where = np.concatenate([idx for idx, _ in fixed])
    return merged.take(np.argsort(where, kind="stable"))


# ========================================================================================
# Scalar reference
# ========================================================================================
def _step_kind(shift: list[int], span: list[int]) -> tuple[str, int, int]:
    """Classify a box move (Timeloop's axis-aligned box difference): ``("still", -1, 0)``,
    ``("slide", coord, sign)`` when exactly one coordinate moves by less than its span, or
    ``("jump", -1, 0)`` (disjoint, or several coordinates move: the whole box is new)."""
    moved = [c for c, s in enumerate(shift) if s != 0]
    if not moved:
        return ("still", -1, 0)
    if len(moved) == 1 and abs(shift[moved[0]]) < span[moved[0]]:
        c = moved[0]
        return ("slide", c, 1 if shift[c] > 0 else -1)
    return ("jump", -1, 0)


def _scalar_counts(problem: Problem, arch: Arch, m: Mapping) -> dict:
    L, D, T = arch.n_levels, problem.n_dims, problem.n_tensors
    coef = problem.coefficients.tolist()  # [t][c][d]
    used = problem.rank_used.tolist()
    temporal = m.temporal.tolist()
    g = [[int(m.spatial[lv, d, 0] * m.spatial[lv, d, 1]) for d in range(D)] for lv in range(L)]
    # tile[l][d]: extent held by one instance of level l; tile[L] is one MAC.
    tile = [[1] * D for _ in range(L + 1)]
    for lv in range(L - 1, -1, -1):
        tile[lv] = [tile[lv + 1][d] * temporal[lv][d] * g[lv][d] for d in range(D)]
    # The temporal loops, outermost first: (level, dim, bound, stride).
    loops = []
    for lv in range(L):
        for d in m.order[lv].tolist():
            loops.append((lv, d, temporal[lv][d], g[lv][d] * tile[lv + 1][d]))
    macs_per_unit = math.prod(temporal[lv][d] for lv in range(L) for d in range(D))

    def spans(t: int, ext: list[int]) -> list[int]:
        return [1 + sum(coef[t][c][d] * (ext[d] - 1) for d in range(D)) if used[t][c] else 1
                for c in range(len(coef[t]))]

    def deliveries(c: int, t: int) -> int:
        """Eq. D: words delivered into one instance of level c over the whole run."""
        sp = spans(t, tile[c])
        size = math.prod(sp)
        above = [lp for lp in loops if lp[0] < c and lp[2] >= 2]
        kinds = []
        for j, (_, d, _, stride) in enumerate(above):
            move = [0] * D
            move[d] += stride
            for _, d2, _, stride2 in above[j + 1:]:
                move[d2] -= stride2  # inner loops return from iteration 1 to 0
            shift = [sum(coef[t][cc][dd] * move[dd] for dd in range(D)) for cc in range(len(coef[t]))]
            kinds.append((_step_kind(shift, sp), shift))
        innermost = kinds[-1][0] if kinds else ("still", -1, 0)
        total, prefix = size, 1
        for (_, _, bound, _), (kind, shift) in zip(above, kinds, strict=True):
            if kind[0] == "still":
                new = 0
            elif kind[0] == "jump":
                new = size
            elif innermost[0] == "slide" and kind != innermost:
                # Timeloop keeps a sliding window only while successive moves go the same
                # way (its RESET_ON_GRADIENT_CHANGE): after the innermost loop slid along
                # another coordinate or direction the whole tile is fetched again.
                new = size
            else:
                new = abs(shift[kind[1]]) * (size // sp[kind[1]])
            total += prefix * (bound - 1) * new
            prefix *= bound
        return total

    def distinct(lv: int, t: int) -> int:
        """Eq. S: distinct offset vectors of tensor t over the spatial grid below level lv."""
        count = 1
        for c in range(len(coef[t])):
            if not used[t][c]:
                continue
            terms = [(coef[t][c][d] * tile[lv + 1][d], g[lv][d]) for d in range(D)
                     if coef[t][c][d] and g[lv][d] > 1]
            values = {sum(a * i for (a, _), i in zip(terms, idx, strict=True))
                      for idx in itertools.product(*(range(k) for _, k in terms))}
            count *= len(values)
        return count

    used_below = [math.prod(g[lv]) for lv in range(L)]
    inst = [math.prod(used_below[:lv]) for lv in range(L)]  # utilized instances
    reads = [[0] * T for _ in range(L)]
    fills = [[0] * T for _ in range(L)]
    updates = [[0] * T for _ in range(L)]
    multicast = [[0] * T for _ in range(L)]
    reductions = [[0] * T for _ in range(L)]
    energy = [[0.0] * T for _ in range(L)]
    per_inst_rd = [0] * L
    per_inst_wr = [0] * L
    keep = m.keep.tolist()
    for t in range(T):
        out = problem.tensors[t].is_output
        keepers = [lv for lv in range(L) if keep[lv][t]]
        for k, p in enumerate(keepers):
            child = keepers[k + 1] if k + 1 < len(keepers) else L
            f_child = deliveries(child, t) if child < L else macs_per_unit
            groups = math.prod(distinct(lv, t) for lv in range(p, child))
            children = math.prod(used_below[lv] for lv in range(p, child))
            a_p = f_child * groups
            f_p = deliveries(p, t) if p > 0 else int(problem.tensor_sizes()[t])
            if out:
                ext = [tile[p][d] * math.prod(temporal[lv][d] for lv in range(p)) for d in range(D)]
                part = math.prod(spans(t, ext))
                r, f, u = a_p - part, (f_p - part if p > 0 else 0), a_p
                reductions[p][t] = (f_child * children - a_p) * inst[p]
            else:
                r, f, u = a_p, (f_p if p > 0 else 0), 0
                multicast[p][t] = (f_child * children - a_p) * inst[p]
            lv_spec = arch.levels[p]
            b = lv_spec.block_words
            e = (-(-r // b)) * lv_spec.read_energy_pj + ((-(-f // b)) + (-(-u // b))) * lv_spec.write_energy_pj
            reads[p][t], fills[p][t], updates[p][t] = r * inst[p], f * inst[p], u * inst[p]
            energy[p][t] = e * inst[p]
            per_inst_rd[p] += r
            per_inst_wr[p] += f + u
    cycles = float(macs_per_unit)
    for lv, spec in enumerate(arch.levels):
        if spec.read_bandwidth_words_per_cycle is not None:
            cycles = max(cycles, per_inst_rd[lv] / spec.read_bandwidth_words_per_cycle)
        if spec.write_bandwidth_words_per_cycle is not None:
            cycles = max(cycles, per_inst_wr[lv] / spec.write_bandwidth_words_per_cycle)
    return {"reads": reads, "fills": fills, "updates": updates, "energy": energy,
            "multicast": multicast, "reductions": reductions, "cycles": math.ceil(cycles)}
