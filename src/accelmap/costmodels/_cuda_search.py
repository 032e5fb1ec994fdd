"""Device searches specialized per (problem, arch): the ``loopnest`` objective only, in 32-bit
scratch where the values provably fit.

`accelmap.costmodels._cuda` runs the CPU kernel's own per-row code on the GPU: every
evaluation fills the whole (6, L, T) count rows and the generic kernel reads every table of
`KernelConsts` from global memory with 64-bit scratch. A search needs less: legality and
the EDP. The kernels here

* compute only what the EDP depends on (per level and tensor: reads, fills, updates and
  their energy; per level: words read and written for the bandwidth bound), following
  ``_loopnest_rules.eval_range`` step by step (the counting rules are those of
  `accelmap.costmodels.loopnest`; nothing is counted differently here);
* take the per-(problem, arch) tables as compile-time constants (closure arrays, which
  numba places in the device's constant memory), so that loops over coordinates, terms and
  levels have known trip counts and the branches on the tables (closed form or not, kept or
  not, bandwidth limited or not) fold away at compile time;
* keep factors, tiles, strides, spans, footprints and loop tables in int32. Every such value
  is at most ``max(prod(bounds), max footprint, sum of coefficient x bound x levels)``;
  `fits_32bit` checks that bound on the host, and the callers fall back to the generic
  kernels of `accelmap.costmodels._cuda` when it fails. Counts (deliveries, accesses,
  words) stay int64 and energies float64, as in the CPU kernel;
* hold the bypass as the bits of one int64 and loop orders and factor slots in int8 (the
  same host check bounds dims, levels and tensors), which keeps the per-thread state under
  about 1 kB;
* keep the code small: the loops over levels and tensors that hold the big steps (the
  capacity check, eq. D per kept level, the per-level chain) run to the counts ``rt`` that
  the kernel receives as an argument, so the compiler keeps one copy of their bodies instead
  of unrolling them ``L x T`` times (a fully unrolled kernel spent three quarters of its time
  waiting for instruction fetches: Nsight Compute on the H100); the small loops over dims,
  coordinates and terms keep compile-time trip counts and unroll;
* draw random numbers from a xoroshiro128+ generator held in registers (Blackman and Vigna,
  "Scrambled linear pseudorandom number generators", ACM TOMS 47(4), 2021), copied at
  start from the per-thread states `accelmap.costmodels._cuda.device_states` seeds, instead
  of loading and storing the state in global memory at every draw;
* check a draw (fanouts and capacities: factors, orders and bypass are legal by
  construction) before evaluating it, and retry illegal draws or moves per thread before the
  evaluation, so that the threads of a warp evaluate together instead of idling beside
  illegal rows.

The evaluation is split at the loop orders. A tiling (factors) and bypass decide legality
and, per tensor and level, the footprints, spans, distinct spatial groups and the output's
widened part ("the factor caches": `fits_cached`, `prepare`); the loop orders decide only
the deliveries of eq. D and the closed form's products (`edp_cached`). Every value is
computed by the formulas of `fits` and `edp` (which the exhaustive kernel still uses); only
when it is computed changes, so the EDP is the same.

Random search, in rounds: the lanes of a warp may share each round's loop orders
(``share="order"``, the default) or orders and bypass (``"order+keep"``), drawn from one
warp-wide generator that every lane steps alike; each lane draws its own tile factors (and,
unless shared, its bypass) up to ``tries`` times until they fit, and evaluates the fitting
draw under ``orders`` random loop orders from the factor caches. Each draw is a draw of the
same sampler (uniform orders, fair bypass coins, every prime factor to a uniform slot), so
each evaluated mapping has the distribution of a fitting draw; the ``orders`` mappings of a
round share their tiling and bypass (a stratified sample: more orders, fewer distinct
tilings per evaluation). Sharing orders changes no distribution (orders do not decide
legality); sharing the bypass does slightly: a round keeps its bypass while it retries
factors, so bypass patterns that rarely fit are evaluated about as often as the others
rather than in proportion to how often they fit. ``share="none"`` draws everything per lane.

Annealing (``anneal``; built with ``single`` for one mapping per step on chains of one thread,
where the branches of the multiple-try rule below fold away at compile time): one chain per
thread as in `accelmap.costmodels._cuda`, one move per step (a
prime factor to another slot, two loops of a level swapped, or one bypass bit an inner level
may hold flipped; never a move that changes nothing); an illegal move is a rejected step.
The kind of move comes from the warp's generator (``anneal_share="move"``), so the lanes of
a warp swap loops or flip bits together and take the short evaluation together: a swap needs
no check and no new caches, a flip checks one level's capacity from the cached footprints,
a factor move multiplies the factor into its new slot and divides it out of the old one and
builds the proposal's caches in a second buffer, which becomes the chain's on acceptance. With
``redirect`` (the default) a factor sent to a spatial slot without room for it goes to that
level's temporal slot, as the sampler places factors. The temperature falls by one
multiplication per step and the Metropolis test runs in float32.

Multiple-try annealing (the same kernel for ``orders`` > 1 or ``lanes`` > 1; the default of
`accelmap.search.gpu`): a step whose move fits evaluates ``orders`` distinct mappings from one
set of factor caches, the moved mapping and ``orders - 1`` loop-order variants of it (swaps
``r + j x stride`` mod the ``L x D (D - 1) / 2`` loop pairs, `pair_stride` coprime with their
number; a swap step's variants are distinct swaps of the state); a chain is ``lanes`` threads
of one block holding its state, each proposing its own move, and the best of the chain's
``lanes x orders`` goes through the Metropolis test (a multiple-try move), the Metropolis
uniform from the block's generator so every lane decides alike; the winner's state and, after
a factor move, its factor caches reach the other lanes through shared memory between two
block barriers (the host launches whole blocks). Every evaluated variant counts as one
evaluation, a refused move as one that is not legal. With ``restart`` > 0, every ``restart``
steps the chains of a block are ranked by their EDP and the worse half take the states (and
factor caches) of the better half, the i-th worst the i-th best's where that one is better
(population annealing with resampling by rank); a restart evaluates nothing and leaves every
lane's best row as it was.

Two ways to draw less: loop orders as the mixed-radix digits of 32 random bits (two levels
per generator step), and the coefficients and relevance read in the eq. D walks packed into
words every lane reads alike (constant memory serves a warp one address at a time).

Where the rules live. Each counting rule is written once in `accelmap.costmodels.
_loopnest_rules` (``RULES``), and the CPU drivers and the generic CUDA kernels of
`accelmap.costmodels._cuda` all run those functions. The kernels here keep their own form of
the same rules, named after them: `fits` is ``check``'s FANOUT and CAPACITY steps (FACTORS,
ORDER and KEEP hold by construction); `footprint` is ``footprint`` with its term loop run to
the constant M; `deliveries` is ``deliveries`` in one pass (Horner's rule, the same integer;
no step table in local memory); `distinct` is ``distinct`` with the two-term gcd in int32;
`edp` is ``row_tables``, ``closed_deliveries`` (one forward walk serving every level),
``keeper_counts`` and ``latency_cycles`` computing only the energy and cycles, the energy
summed tensor by tensor with a padded tensor's share applied in place; `fits_cached`,
`prepare` and `edp_cached` split the same formulas at the loop orders. They stay separate
because their form is what makes them fast on the GPU, measured on the H100
(docs/performance.md, "GPU, one H100"): the per-problem tables as constants, objective only, int32
scratch and the generator in registers took random search from 2.83e7 to 1.28e8 legal
evaluations/s and annealing from 7.93e7 to 1.72e8 over the generic kernels that run
``eval_range``; the smaller per-thread state (bypass bits, int8 orders, Horner's eq. D,
856 B of local memory) to 1.41e8 and 1.94e8; the rolled level and tensor loops (`loop_counts`)
further. On the CPU the same forms measured no faster (int32 scratch 0.94x, Horner 0.99-1.00x,
footprints kept per (level, tensor) 0.94-0.98x: docs/performance.md, "loopnest, CPU, one core"), so the
CPU drivers keep the shared rules. `tests/unit/costmodels/test_cuda_engine.py` holds the
kernels here equal to the host engines under the CUDA simulator.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from accelmap.arch.spec import Arch
from accelmap.costmodels import _loopnest_kernel as K
from accelmap.workloads.problem import Problem

try:  # a module global: the CUDA simulator swaps ``cuda`` in a kernel's globals
    from numba import cuda
except Exception:  # no numba-cuda; `accelmap.costmodels._cuda.require` says so before any kernel is built
    cuda = None  # type: ignore[assignment]


def _guard_simulator_shared() -> None:
    """Under numba's CUDA simulator, make a block's ``cuda.shared.array`` the same array for
    every thread of the block.

    The simulator runs each CUDA thread as a Python thread and creates a block's shared array
    when the first thread reaches the call, with an unguarded look-up-then-insert
    (``FakeCUDAShared.array``). Two threads that reach it at once can each create their own
    array; a block reduction then reads ``np.empty`` garbage in the other threads' slots (seen
    as a best index past the launch's points in ``test_cuda_exhaustive``, about one block in
    a few hundred when the threads first meet at a ``syncthreads``). `guarded_shared_array`
    makes the insert one atomic ``dict.setdefault``. Compiled kernels are not affected: this
    runs only when the simulator is on, and only once.
    """
    from numba import config

    if not config.ENABLE_CUDASIM:  # type: ignore[attr-defined]
        return
    from numba.cuda.simulator import kernelapi  # type: ignore[attr-defined]

    shared = kernelapi.FakeCUDAShared
    if not hasattr(shared.array, "unguarded"):
        shared.array = guarded_shared_array(shared.array)  # type: ignore[method-assign]


def guarded_shared_array(unguarded):  # type: ignore[no-untyped-def]
    """``FakeCUDAShared.array`` with an atomic insert (see `_guard_simulator_shared`);
    ``unguarded`` serves what allocates nothing (dynamic shared memory) and its errors."""
    import sys

    from numba.core import types
    from numba.np import numpy_support

    def array(self, shape, dtype, alignment=None):  # type: ignore[no-untyped-def]
        if alignment is not None or shape == 0:
            return unguarded(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)  # one array per (file, line) and block, as the simulator keys them
        key = (caller.f_code.co_filename, caller.f_lineno)
        found = self._allocations.get(key)
        if found is None:
            found = self._allocations.setdefault(key, np.empty(shape, dtype))
        return found

    array.unguarded = unguarded  # type: ignore[attr-defined]
    return array


if cuda is not None:
    _guard_simulator_shared()

__all__ = ["fits_32bit", "loop_pairs", "pair_stride", "search_kernels", "SearchSpec", "search_spec"]

_I32_MAX = 2**31 - 1
WARP = 32
# What the 32 lanes of a warp share in a random-search round (`search_kernels`).
SHARES = ("none", "order", "order+keep")
# What the chains of a warp share in an annealing round: nothing, or the kind of move.
ANNEAL_SHARES = ("none", "move")
# Registers per thread the kernels are capped at unless a caller says otherwise: measured on
# the H100 (benchmarks/results/bench_gpu_tuning.json), annealing gains 7% from 64 (more warps
# resident), random search 4% from 128 and loses 20% at 64 (its spills cost more).
DEFAULT_MAX_REGISTERS = {"random": 128, "anneal": 64, "objective": None, "exhaustive": 128}


def max_registers(kind: str, asked: int | None) -> int | None:
    """The register cap of a kernel: the default for ``None``, no cap for 0, else ``asked``."""
    if asked is None:
        return DEFAULT_MAX_REGISTERS[kind]
    return None if asked == 0 else int(asked)


def fits_32bit(problem: Problem, arch: Arch) -> tuple[bool, str]:
    """Whether every factor, tile, stride, span, footprint and loop-table entry of any mapping
    of ``problem`` on ``arch`` fits int32 (and dims, slots and bypass bits fit their small
    types), and if not, why.

    Bounds used: a product of factors of one mapping is at most ``prod(bounds)``; a footprint
    of a tile (or of an output tile widened by the loops above it, still inside the bounds)
    at most the footprint of the whole bounds; a coordinate shift of eq. D at most
    ``sum_d |a_d| x bound_d x n_levels`` (each of the at most ``n_levels`` loops of dim d
    strides at most ``bound_d``); an offset of eq. S at most ``sum_d |a_d| x bound_d``."""
    bounds = problem.bounds.astype(object)
    prod = 1
    for b in bounds:
        prod *= int(b)
    coef = np.abs(problem.coefficients).astype(object)
    full = problem.footprint(problem.bounds)
    shift = max((int((coef[t, c] * bounds).sum()) for t in range(coef.shape[0]) for c in range(coef.shape[1])),
                default=0) * arch.n_levels
    biggest = max(prod, int(full.max(initial=1)), shift, int(max(lv.fanout for lv in arch.levels)))
    if biggest > _I32_MAX:
        return False, f"a factor product, footprint or shift of up to {biggest} exceeds int32"
    # small indexes: loop orders and slots in int8, bypass as the bits of one int64
    if problem.n_dims > 127 or 3 * arch.n_levels > 127 or arch.n_levels * problem.n_dims > 32767:
        return False, "more than 127 dims or 42 levels"
    if arch.n_levels * problem.n_tensors > 62:
        return False, f"{arch.n_levels} levels x {problem.n_tensors} tensors exceed the 62 bypass bits"
    return True, ""


class SearchSpec:
    """The hashable description of one (problem, arch) the kernels are specialized for:
    the `KernelConsts` tables and the sampler's slot tables, as tuples."""

    __slots__ = ("key", "arrays", "dims")

    def __init__(self, consts: K.KernelConsts, tables: object, frac: np.ndarray) -> None:
        T, C, D = consts.coef.shape
        L = consts.holds.shape[0]
        i32 = np.int32
        a = {
            "COEF": consts.coef.astype(i32), "NTERM": consts.nterm.astype(i32), "TDIM": consts.tdim.astype(i32),
            "TCOEF": consts.tcoef.astype(i32), "CLOSED": consts.closed.astype(i32), "REL": consts.rel.astype(i32),
            "HOLDS": consts.holds.astype(i32), "FAN": consts.fan_xy.astype(i32),
            "HAS_CAP": np.isfinite(consts.capacity).astype(i32),
            "CAP": np.where(np.isfinite(consts.capacity), consts.capacity, 0.0).astype(np.float64),
            "BLK": consts.block.astype(np.int64), "RPJ": consts.read_pj.astype(np.float64),
            "WPJ": consts.write_pj.astype(np.float64),
            "HAS_RBW": np.isfinite(consts.read_bw).astype(i32),
            "RBW": np.where(np.isfinite(consts.read_bw), consts.read_bw, 1.0).astype(np.float64),
            "HAS_WBW": np.isfinite(consts.write_bw).astype(i32),
            "WBW": np.where(np.isfinite(consts.write_bw), consts.write_bw, 1.0).astype(np.float64),
            "TSIZE": consts.tensor_size.astype(np.int64),
            # padded tensors: the share of their projected words that exist, which scales
            # their energy (_loopnest_numpy._count_existing_words)
            "FRAC": np.asarray(frac, np.float64), "PADDED": (np.asarray(frac) < 1.0).astype(i32),
            "PF": tables.pf.astype(i32), "NPF": tables.npf.astype(i32),  # type: ignore[attr-defined]
            "SLOT_LV": tables.slot_level.astype(i32), "SLOT_KIND": tables.slot_kind.astype(i32),  # type: ignore[attr-defined]
            "SLOT_TMP": tables.slot_temporal.astype(i32),  # type: ignore[attr-defined]
        }
        self.arrays = a
        self.dims = {"L": L, "D": D, "T": T, "C": C, "M": int(consts.tdim.shape[2]), "F": int(tables.pf.shape[1]),  # type: ignore[attr-defined]
                     "S": int(tables.slot_level.shape[0]), "OUT": int(consts.ints[0]),  # type: ignore[attr-defined]
                     "GRID": int(consts.ints[1]) if int(consts.nterm.max(initial=0)) > 2 else 1}
        self.key = (tuple(sorted(self.dims.items())),
                    tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in sorted(a.items())),
                    float(consts.scal[0]), float(consts.scal[2]))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SearchSpec) and self.key == other.key


def search_spec(problem: Problem, arch: Arch, tables: object) -> SearchSpec:
    return SearchSpec(K.kernel_consts(problem, arch), tables, problem.existing_fraction())


def loop_counts(spec: SearchSpec) -> object:
    """The device array ``rt`` = (levels, tensors) the kernels loop to (see the module
    docstring: runtime counts keep those loops rolled)."""
    return cuda.to_device(np.array([spec.dims["L"], spec.dims["T"]], np.int32))


def loop_pairs(spec: SearchSpec) -> int:
    """How many distinct loop swaps one mapping has: unordered pairs of loop positions of
    one level, over all levels (the most loop-order variants an annealing step can take)."""
    d = spec.dims["D"]
    return spec.dims["L"] * d * (d - 1) // 2


def pair_stride(n_pairs: int) -> int:
    """The step between the swaps an annealing step's variants take (pair indexes ``r + j x
    stride`` mod ``n_pairs``): coprime with ``n_pairs``, so that any ``n_pairs`` consecutive
    variants are distinct swaps, and near ``n_pairs / golden ratio``, so that consecutive
    variants fall on different levels and positions."""
    if n_pairs <= 1:
        return 1
    start = max(1, int(round(n_pairs * 0.6180339887498949)))
    for off in range(n_pairs):
        for cand in (start + off, start - off):
            if 1 <= cand < n_pairs and math.gcd(cand, n_pairs) == 1:
                return cand
    return 1


@functools.lru_cache(maxsize=64)  # (a benchmark's variants: shares x register caps x move options x lanes)
def search_kernels(spec: SearchSpec, share: str = "order", max_registers: int | None = None,
                   anneal_share: str = "move", redirect: bool = True, lanes: int = 1, tpb: int = 0,
                   single: bool = False) -> dict:
    """The ``random``, ``anneal`` and ``objective`` kernels of one (problem, arch) (compiled at
    first launch); ``share``: what the lanes of a warp share in a random-search round;
    ``anneal_share``: whether the chains of a warp draw each round's move kind alike;
    ``lanes``: GPU threads per annealing chain (1, or a divisor of 32 with ``tpb`` the block
    size the kernel is launched with: the lanes propose side by side, see the module
    docstring); ``single``: the annealing kernel built for one mapping per step on chains of
    one lane (``orders`` 1, ``lanes`` 1; a loop swap is applied as the move itself, no
    variants are drawn), the same source with those branches folded away at compile time."""
    from numba import float64, int8, int16, int32, int64, uint64

    A = spec.arrays
    COEF, NTERM, TDIM, TCOEF, CLOSED, REL = A["COEF"], A["NTERM"], A["TDIM"], A["TCOEF"], A["CLOSED"], A["REL"]
    HOLDS, FAN, HAS_CAP, CAP, BLK, RPJ, WPJ = A["HOLDS"], A["FAN"], A["HAS_CAP"], A["CAP"], A["BLK"], A["RPJ"], A["WPJ"]
    HAS_RBW, RBW, HAS_WBW, WBW, TSIZE = A["HAS_RBW"], A["RBW"], A["HAS_WBW"], A["WBW"], A["TSIZE"]
    FRAC, PADDED = A["FRAC"], A["PADDED"]
    PF, NPF, SLOT_LV, SLOT_KIND, SLOT_TMP = A["PF"], A["NPF"], A["SLOT_LV"], A["SLOT_KIND"], A["SLOT_TMP"]
    dims = spec.dims
    L, D, T, C, F, S, OUT, GRID, M = (dims[k] for k in ("L", "D", "T", "C", "F", "S", "OUT", "GRID", "M"))
    MAXTERM = int(NTERM.max(initial=0))
    L1, LD1 = L + 1, L * D + 1
    MACS, MAC_PJ = spec.key[2], spec.key[3]
    HAS_FACTORS = bool(NPF.max(initial=0) > 0)
    SHARE = SHARES.index(share)
    SHARE_MOVE = ANNEAL_SHARES.index(anneal_share) == 1
    REDIRECT = bool(redirect)
    LANES = int(lanes)
    SINGLE = bool(single) and LANES == 1
    if LANES < 1 or WARP % LANES or (LANES > 1 and (tpb < WARP or tpb % WARP)):
        raise ValueError(f"lanes = {lanes}, tpb = {tpb}: lanes must divide {WARP} and tpb be whole warps")
    # (chains of several lanes: a block's lanes step together, one group of LANES per chain,
    # the winner's state and factor caches passed through shared memory)
    NG = tpb // LANES if LANES > 1 else 1
    TPB = max(int(tpb), 1)
    # annealing's loop-order variants: swap p of P = L x D (D - 1) / 2 is the pair q = p mod PPL
    # of level p // PPL (pairs in the order (0, 1), (0, 2), ..., (1, 2), ...)
    PPL = D * (D - 1) // 2
    NPAIR = L * PPL
    PPL1 = max(PPL, 1)  # (no division by zero compiled where D == 1: no pairs, no swaps)
    PSTRIDE = pair_stride(NPAIR)
    # annealing moves: the dims that have prime factors to move, the (level, tensor) bypass
    # bits that may flip (inner levels, tensors the level may hold)
    fdims = [d for d in range(D) if NPF[d] > 0]
    FDIMS, NFDIMS = np.array(fdims or [0], np.int32), len(fdims)
    flips = [(lv, t) for lv in range(1, L) for t in range(T) if HOLDS[lv, t]]
    FLIP_LV = np.array([f[0] for f in flips] or [0], np.int32)
    FLIP_T = np.array([f[1] for f in flips] or [0], np.int32)
    NFLIP = len(flips)
    MASK32, GOLDEN, ONE_U = np.uint64(0xFFFFFFFF), np.uint64(0x9E3779B97F4A7C15), np.uint64(1)
    # The walks of eq. D read a tensor's coefficients and relevance at each lane's own loop
    # dim. Constant memory serves a warp one address at a time, so those reads are packed
    # into one word per (tensor, coordinate) and per tensor, read alike by every lane, and
    # each lane shifts out its dim: 8 bits per coefficient (stored + 128) when D <= 8 and
    # every |coefficient| <= 127, one bit per dim of REL when D <= 62.
    PACK_COEF = D <= 8 and int(np.abs(COEF).max(initial=0)) <= 127
    COEFP = np.array([[sum(((int(COEF[t, cc, d]) + 128) & 0xFF) << (8 * d) for d in range(D)) if PACK_COEF else 0
                       for cc in range(C)] for t in range(T)], dtype=np.uint64).reshape(T, C)
    PACK_REL = D <= 62
    RELM = np.array([sum(int(REL[t, d]) << d for d in range(D)) if PACK_REL else 0 for t in range(T)], np.int64)
    u8, u255, i128 = np.uint64(8), np.uint64(255), np.int32(128)
    SM1, SM2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    u30, u31 = np.uint64(30), np.uint64(31)
    u11, u16, u24, u27, u32, u37, u40 = (np.uint64(v) for v in (11, 16, 24, 27, 32, 37, 40))
    TWO_M53 = 2.0 ** -53
    ONE = np.int64(1)

    # ---------------- random numbers: xoroshiro128+ in registers ----------------
    @cuda.jit(device=True)
    def nxt(s):
        s0 = s[0]
        s1 = s[1]
        r = s0 + s1
        s1 ^= s0
        s[0] = ((s0 << u24) | (s0 >> u40)) ^ s1 ^ (s1 << u16)
        s[1] = (s1 << u37) | (s1 >> u27)
        return r

    @cuda.jit(device=True)
    def splitmix(z):
        """SplitMix64's output function (Steele, Lea and Flood, OOPSLA 2014)."""
        z = (z ^ (z >> u30)) * SM1
        z = (z ^ (z >> u27)) * SM2
        return z ^ (z >> u31)

    @cuda.jit(device=True)
    def below(s, k):
        """Uniform in [0, k) from the high 32 bits (multiply-shift; bias below k / 2^32)."""
        return np.int32(((nxt(s) >> u32) * np.uint64(k)) >> u32)

    @cuda.jit(device=True)
    def uniform(s):
        return np.float64(nxt(s) >> u11) * TWO_M53

    @cuda.jit(device=True)
    def kept(kmask, lv, t):
        """Bypass as bits: bit ``lv * T + t`` set when level lv keeps tensor t."""
        return (kmask >> np.int64(lv * T + t)) & ONE

    # ---------------- sampling and moves ----------------
    @cuda.jit(device=True)
    def draw_factors(s, assign, used):
        for lv in range(L):
            used[lv, 0] = 1
            used[lv, 1] = 1
        for d in range(D):
            for k in range(NPF[d]):
                slot = below(s, S)
                kind = SLOT_KIND[slot]
                if kind > 0:
                    lv = SLOT_LV[slot]
                    if used[lv, kind - 1] * PF[d, k] > FAN[lv, kind - 1]:
                        slot = SLOT_TMP[slot]
                    else:
                        used[lv, kind - 1] *= PF[d, k]
                assign[d, k] = slot

    @cuda.jit(device=True)
    def draw_keep(s):
        """Fair coins for the tensors each inner level may hold; the outermost keeps all."""
        kmask = np.int64(0)
        for t in range(T):
            kmask |= ONE << np.int64(t)
        for lv in range(1, L):
            r = nxt(s)
            for t in range(T):
                if HOLDS[lv, t] and (r >> np.uint64(t)) & np.uint64(1):
                    kmask |= ONE << np.int64(lv * T + t)
        return kmask

    @cuda.jit(device=True)
    def build(assign, temporal, g, uxy):
        """Temporal factors, spatial factors (X times Y) and the instances used along X and Y
        below each level, from the slot of every prime factor."""
        for lv in range(L):
            uxy[lv, 0] = 1
            uxy[lv, 1] = 1
            for d in range(D):
                temporal[lv, d] = 1
                g[lv, d] = 1
        for d in range(D):
            for k in range(NPF[d]):
                slot = assign[d, k]
                lv, kind, f = SLOT_LV[slot], SLOT_KIND[slot], PF[d, k]
                if kind == 0:
                    temporal[lv, d] *= f
                else:
                    g[lv, d] *= f
                    uxy[lv, kind - 1] *= f

    @cuda.jit(device=True)
    def place(slot, d, f, temporal, g, uxy, into):
        """Multiply factor f of dim d into its slot (``into``) or divide it out (exact)."""
        lv, kind = SLOT_LV[slot], SLOT_KIND[slot]
        if kind == 0:
            temporal[lv, d] = temporal[lv, d] * f if into else temporal[lv, d] // f
        else:
            g[lv, d] = g[lv, d] * f if into else g[lv, d] // f
            uxy[lv, kind - 1] = uxy[lv, kind - 1] * f if into else uxy[lv, kind - 1] // f

    # ---------------- the model: legality and EDP ----------------
    @cuda.jit(device=True)
    def footprint(t, ext, row, spans):
        size = 1
        for cc in range(C):
            sp = 1
            for k in range(M):
                if k < NTERM[t, cc]:
                    sp += TCOEF[t, cc, k] * (ext[row, TDIM[t, cc, k]] - 1)
            spans[cc] = sp
            size *= sp
        return size

    @cuda.jit(device=True)
    def fits(temporal, g, uxy, kmask, tile, spans, nl, nt):
        """FANOUT and CAPACITY of `check_row` (FACTORS, ORDER and KEEP hold by construction);
        fills ``tile``."""
        for lv in range(L):
            if uxy[lv, 0] > FAN[lv, 0] or uxy[lv, 1] > FAN[lv, 1]:
                return False
        for d in range(D):
            tile[L, d] = 1
        for lv in range(L - 1, -1, -1):
            for d in range(D):
                tile[lv, d] = tile[lv + 1, d] * temporal[lv, d] * g[lv, d]
        for lv in range(nl):
            if HAS_CAP[lv]:
                need = 0
                for t in range(nt):
                    if kept(kmask, lv, t):
                        need += footprint(t, tile, lv, spans)
                if need > CAP[lv]:
                    return False
        return True

    @cuda.jit(device=True)
    def deliveries(t, c, temporal, g, tile, lp, kc, spans, shift):
        """Eq. D, as ``_loopnest_rules.deliveries``, in one pass from the innermost loop
        out: with ``acc_j = (n_j - 1) Delta_j + n_j acc_{j+1}`` (Horner's rule), the sum
        ``sum_j (prod_{i<j} n_i) (n_j - 1) Delta_j`` is ``acc_0``, the same integer."""
        size = footprint(t, tile, c, spans)
        if kc == 0:
            return np.int64(size)
        for cc in range(C):
            shift[cc] = 0
        acc = np.int64(0)
        in_kind, in_which, in_sgn = 0, -1, 0
        for j in range(kc - 1, -1, -1):
            pos = lp[j]
            lv = pos // D
            d = pos - lv * D
            st = g[lv, d] * tile[lv + 1, d]
            moved, wh, amount = 0, -1, 0
            for cc in range(C):
                a = COEF[t, cc, d] * st
                sh = a - shift[cc]  # this loop forward, the inner ones back to their start
                shift[cc] += a
                if sh != 0:
                    moved += 1
                    wh, amount = cc, sh
            sgn = 1 if amount > 0 else -1
            if moved == 0:  # still
                kind = 0
                nw = 0
            elif moved == 1 and abs(amount) < spans[wh]:  # slide
                kind = 2
                # Timeloop's RESET_ON_GRADIENT_CHANGE (see _loopnest_rules.deliveries)
                if in_kind == 2 and j != kc - 1 and (wh != in_which or sgn != in_sgn):
                    nw = size
                else:
                    nw = abs(amount) * (size // spans[wh])
            else:  # jump
                kind = 1
                nw = size
            if j == kc - 1:
                in_kind, in_which, in_sgn = kind, wh, sgn
            b = temporal[lv, d]
            acc = (b - 1) * np.int64(nw) + b * acc
        return size + acc

    @cuda.jit(device=True)
    def distinct(t, lv, g, tile, buf):
        """Eq. S, as ``_loopnest_rules.distinct``."""
        count = np.int64(1)
        for cc in range(C):
            nt, k1, k2 = 0, -1, -1
            for k in range(M):
                if k < NTERM[t, cc] and g[lv, TDIM[t, cc, k]] > 1:
                    nt += 1
                    if k1 < 0:
                        k1 = k
                    elif k2 < 0:
                        k2 = k
            if nt == 0:
                continue
            if nt == 1:
                count *= g[lv, TDIM[t, cc, k1]]
                continue
            if nt == 2:
                d1, d2 = TDIM[t, cc, k1], TDIM[t, cc, k2]
                n1, n2 = g[lv, d1], g[lv, d2]
                a = np.int32(TCOEF[t, cc, k1] * tile[lv + 1, d1])
                b = np.int32(TCOEF[t, cc, k2] * tile[lv + 1, d2])
                x, y = a, b
                while y:
                    x, y = y, np.int32(x % y)
                count *= n1 * n2 - max(n1 - b // x, 0) * max(n2 - a // x, 0)
                continue
            if MAXTERM <= 2:  # (a compile-time constant: no enumeration code when no coordinate needs it)
                continue
            m = 1
            for k in range(NTERM[t, cc]):
                m *= g[lv, TDIM[t, cc, k]]
            for i in range(m):
                rem, v = i, 0
                for k in range(NTERM[t, cc]):
                    d = TDIM[t, cc, k]
                    v += TCOEF[t, cc, k] * tile[lv + 1, d] * (rem % g[lv, d])
                    rem //= g[lv, d]
                buf[i] = v
            for i in range(1, m):
                v, j = buf[i], i - 1
                while j >= 0 and buf[j] > v:
                    buf[j + 1] = buf[j]
                    j -= 1
                buf[j + 1] = v
            u = 1
            for i in range(1, m):
                if buf[i] != buf[i - 1]:
                    u += 1
            count *= u
        return count

    @cuda.jit(device=True)
    def ceil_blocks(words, blk):
        if blk == 1:
            return np.float64(words)
        if blk & (blk - 1) == 0:
            return np.float64(math.ceil(words * (1.0 / blk)))
        return np.float64(math.ceil(words / blk))

    @cuda.jit(device=True)
    def edp(temporal, g, order, kmask, tile, lp, kcs, deliv, ubs, ibs, rw, ww, spans, shift, ext, buf, nl, nt):
        """Cycles x energy of a legal mapping (``tile`` from `fits`), as
        ``_loopnest_rules.eval_range`` computes them, padded tensors' energy scaled as
        `LoopNestModel` scales it after the kernel (cycles stay as counted). The energy is
        summed tensor by tensor (the CPU kernel sums level by level: the same terms, so the
        totals agree to rounding)."""
        # The active temporal loops (bound >= 2), outermost first, as level * D + dim;
        # kcs[c]: those above level c.
        k = 0
        mpu = np.int64(1)  # the product of every temporal bound
        for lv in range(nl):
            kcs[lv] = k
            for j in range(D):
                d = order[lv, j]
                b = temporal[lv, d]
                if b >= 2:
                    lp[k] = lv * D + d
                    mpu *= b
                    k += 1
        kcs[L] = k
        ib = np.int64(1)
        for lv in range(nl):
            ub = 1
            for d in range(D):
                ub *= g[lv, d]
            ubs[lv] = ub
            ibs[lv] = ib
            ib *= ub
            rw[lv] = 0
            ww[lv] = 0
        total = 0.0
        for t in range(nt):
            if CLOSED[t]:
                # Closed form of eq. D (see _loopnest_rules.eval_range): F_c = |tile| x the
                # product of the bounds of loops 0..J, J the innermost loop above c of a
                # dim that indexes t; one walk over the loops serves every level.
                prod_all = np.int64(1)
                prod_rel = np.int64(1)
                j = 0
                for c in range(1, nl):
                    while j < kcs[c]:
                        pos = lp[j]
                        lv = pos // D
                        d = pos - lv * D
                        prod_all *= temporal[lv, d]
                        if REL[t, d]:
                            prod_rel = prod_all
                        j += 1
                    if kept(kmask, c, t):
                        deliv[c] = footprint(t, tile, c, spans) * prod_rel
            else:
                for c in range(1, nl):
                    if kept(kmask, c, t):
                        deliv[c] = deliveries(t, c, temporal, g, tile, lp, kcs[c], spans, shift)
            child = L
            for p in range(nl - 1, -1, -1):
                if not kept(kmask, p, t):
                    continue
                f_child = deliv[child] if child < L else mpu
                groups = np.int64(1)
                for lv in range(p, child):
                    if ubs[lv] > 1:
                        groups *= distinct(t, lv, g, tile, buf)
                a_p = f_child * groups
                f_p = deliv[p] if p > 0 else TSIZE[t]
                if t == OUT:
                    for d in range(D):
                        w = tile[p, d]
                        for lv in range(p):
                            w *= temporal[lv, d]
                        ext[0, d] = w
                    part = footprint(t, ext, 0, spans)
                    r, f, u = a_p - part, (f_p - part if p > 0 else 0), a_p
                else:
                    r, f, u = a_p, (f_p if p > 0 else 0), 0
                blk = BLK[p]
                e = ceil_blocks(r, blk) * RPJ[p]
                if t == OUT and p > 0:
                    e += (ceil_blocks(f, blk) + ceil_blocks(u, blk)) * WPJ[p]
                elif t == OUT:
                    e += ceil_blocks(u, blk) * WPJ[p]
                elif p > 0:
                    e += ceil_blocks(f, blk) * WPJ[p]
                e = e * ibs[p]
                if PADDED[t]:  # halo words outside a padded tensor move no data
                    e *= FRAC[t]
                total += e
                rw[p] += r
                ww[p] += f + u
                child = p
        cyc = np.float64(mpu)
        for lv in range(L):
            if HAS_RBW[lv]:
                cyc = max(cyc, rw[lv] / RBW[lv])
            if HAS_WBW[lv]:
                cyc = max(cyc, ww[lv] / WBW[lv])
        return np.float64(math.ceil(cyc)) * (total + MACS * MAC_PJ)

    @cuda.jit(device=True)
    def save(tid, assign, temporal, order, kmask, best_t, best_s, best_o, best_k):
        for lv in range(L):
            for d in range(D):
                best_t[tid, lv, d] = temporal[lv, d]
                best_s[tid, lv, d, 0] = 1
                best_s[tid, lv, d, 1] = 1
                best_o[tid, lv, d] = order[lv, d]
            for t in range(T):
                best_k[tid, lv, t] = kept(kmask, lv, t) != 0
        for d in range(D):
            for k in range(NPF[d]):
                slot = assign[d, k]
                kind = SLOT_KIND[slot]
                if kind > 0:
                    best_s[tid, SLOT_LV[slot], d, kind - 1] *= PF[d, k]

    # ---------------- the evaluation split at the loop orders ----------------
    # A mapping's tile factors and bypass decide its legality and, per tensor and level, the
    # footprints, spans, distinct spatial groups and the output's widened part; the loop
    # orders decide only the deliveries of eq. D and the closed form's products. The
    # searches below keep the first set ("the factor caches") and evaluate new orders (random
    # search: several per fitting tiling), swapped loops and flipped bypass bits (annealing)
    # from it, recounting only what the change touches. Every value is computed by the same
    # formulas as `fits` and `edp` above; only when it is computed changes.
    @cuda.jit(device=True)
    def footprint_at(t, tile, lv, sps):
        """`footprint` of tensor t's tile at level lv, its spans kept in ``sps[t, lv]``."""
        size = 1
        for cc in range(C):
            sp = 1
            for k in range(M):
                if k < NTERM[t, cc]:
                    sp += TCOEF[t, cc, k] * (tile[lv, TDIM[t, cc, k]] - 1)
            sps[t, lv, cc] = sp
            size *= sp
        return size

    @cuda.jit(device=True)
    def fits_cached(temporal, g, uxy, kmask, tile, fp, sps, nl, nt):
        """`fits`, keeping in ``fp``/``sps`` the footprint and spans of every tensor at every
        level that may hold it (kept or not: a bypass flip then needs no new footprint),
        level 0 only where it has a capacity."""
        for lv in range(L):
            if uxy[lv, 0] > FAN[lv, 0] or uxy[lv, 1] > FAN[lv, 1]:
                return False
        for d in range(D):
            tile[L, d] = 1
        for lv in range(L - 1, -1, -1):
            for d in range(D):
                tile[lv, d] = tile[lv + 1, d] * temporal[lv, d] * g[lv, d]
        for lv in range(nl):
            need = 0
            for t in range(nt):
                # (the evaluation reads levels >= 1 only; level 0 matters for its capacity)
                if HOLDS[lv, t] and (lv > 0 or HAS_CAP[lv]):
                    f = footprint_at(t, tile, lv, sps)
                    fp[t, lv] = f
                    if kept(kmask, lv, t):
                        need += f
            if HAS_CAP[lv] and need > CAP[lv]:
                return False
        return True

    @cuda.jit(device=True)
    def level_fits(kmask, lv, fp, nt):
        """The capacity of level lv under ``kmask`` from the kept footprints (a bypass flip)."""
        if not HAS_CAP[lv]:
            return True
        need = 0
        for t in range(nt):
            if kept(kmask, lv, t):
                need += fp[t, lv]
        return need <= CAP[lv]

    @cuda.jit(device=True)
    def prepare(temporal, g, tile, grp, opart, ubs, ibs, ext, spans, buf, nl, nt):
        """The order-free parts of `edp` for a fitting tiling (``tile`` from `fits_cached`):
        instances per level, distinct spatial groups per tensor and level (eq. S), the
        output's tile widened by the loops above each level; returns the product of every
        temporal bound (the MACs per PE)."""
        mpu = np.int64(1)
        ib = np.int64(1)
        for lv in range(nl):
            ub = 1
            for d in range(D):
                ub *= g[lv, d]
                mpu *= temporal[lv, d]
            ubs[lv] = ub
            ibs[lv] = ib
            ib *= ub
            for t in range(nt):
                grp[t, lv] = distinct(t, lv, g, tile, buf) if ub > 1 else 1
            if HOLDS[lv, OUT]:
                for d in range(D):
                    w = tile[lv, d]
                    for p in range(lv):
                        w *= temporal[p, d]
                    ext[0, d] = w
                opart[lv] = footprint(OUT, ext, 0, spans)
        return mpu

    @cuda.jit(device=True)
    def deliveries_cached(t, c, g, temporal, tile, lpl, lpd, kc, fp, sps, shift):
        """`deliveries` with the footprint and spans of (t, c) from the caches and the
        active loops as (level, dim) pairs."""
        size = fp[t, c]
        if kc == 0:
            return np.int64(size)
        for cc in range(C):
            shift[cc] = 0
        acc = np.int64(0)
        in_kind, in_which, in_sgn = 0, -1, 0
        for j in range(kc - 1, -1, -1):
            lv = lpl[j]
            d = lpd[j]
            st = g[lv, d] * tile[lv + 1, d]
            moved, wh, amount = 0, 0, 0
            for cc in range(C):
                if PACK_COEF:
                    a = (np.int32((COEFP[t, cc] >> (u8 * np.uint64(d))) & u255) - i128) * st
                else:
                    a = COEF[t, cc, d] * st
                sh = a - shift[cc]
                shift[cc] += a
                if sh != 0:
                    moved += 1
                    wh, amount = cc, sh
            sgn = 1 if amount > 0 else -1
            if moved == 0:
                kind = 0
                nw = 0
            elif moved == 1 and abs(amount) < sps[t, c, wh]:
                kind = 2
                if in_kind == 2 and j != kc - 1 and (wh != in_which or sgn != in_sgn):
                    nw = size
                else:
                    nw = abs(amount) * (size // sps[t, c, wh])
            else:
                kind = 1
                nw = size
            if j == kc - 1:
                in_kind, in_which, in_sgn = kind, wh, sgn
            b = temporal[lv, d]
            acc = (b - 1) * np.int64(nw) + b * acc
        return size + acc

    @cuda.jit(device=True)
    def edp_cached(temporal, g, order, kmask, tile, fp, sps, grp, opart, ubs, ibs, mpu, lpl, lpd, kcs, deliv, rw,
                   ww, shift, nl, nt):
        """`edp` from the factor caches (`fits_cached`, `prepare`): the same terms in the same
        order, so the same value."""
        k = 0
        for lv in range(nl):
            kcs[lv] = k
            for j in range(D):
                d = order[lv, j]
                if temporal[lv, d] >= 2:
                    lpl[k] = lv
                    lpd[k] = d
                    k += 1
        kcs[L] = k
        for lv in range(nl):
            rw[lv] = 0
            ww[lv] = 0
        total = 0.0
        for t in range(nt):
            if CLOSED[t]:
                prod_all = np.int64(1)
                prod_rel = np.int64(1)
                j = 0
                for c in range(1, nl):
                    while j < kcs[c]:
                        lv = lpl[j]
                        d = lpd[j]
                        prod_all *= temporal[lv, d]
                        if (RELM[t] >> np.int64(d)) & ONE if PACK_REL else REL[t, d]:
                            prod_rel = prod_all
                        j += 1
                    if kept(kmask, c, t):
                        deliv[c] = fp[t, c] * prod_rel
            else:
                for c in range(1, nl):
                    if kept(kmask, c, t):
                        deliv[c] = deliveries_cached(t, c, g, temporal, tile, lpl, lpd, kcs[c], fp, sps, shift)
            child = L
            for p in range(nl - 1, -1, -1):
                if not kept(kmask, p, t):
                    continue
                f_child = deliv[child] if child < L else mpu
                groups = np.int64(1)
                for lv in range(p, child):
                    groups *= grp[t, lv]
                a_p = f_child * groups
                f_p = deliv[p] if p > 0 else TSIZE[t]
                if t == OUT:
                    part = opart[p]
                    r, f, u = a_p - part, (f_p - part if p > 0 else 0), a_p
                else:
                    r, f, u = a_p, (f_p if p > 0 else 0), 0
                blk = BLK[p]
                e = ceil_blocks(r, blk) * RPJ[p]
                if t == OUT and p > 0:
                    e += (ceil_blocks(f, blk) + ceil_blocks(u, blk)) * WPJ[p]
                elif t == OUT:
                    e += ceil_blocks(u, blk) * WPJ[p]
                elif p > 0:
                    e += ceil_blocks(f, blk) * WPJ[p]
                e = e * ibs[p]
                if PADDED[t]:
                    e *= FRAC[t]
                total += e
                rw[p] += r
                ww[p] += f + u
                child = p
        cyc = np.float64(mpu)
        for lv in range(L):
            if HAS_RBW[lv]:
                cyc = max(cyc, rw[lv] / RBW[lv])
            if HAS_WBW[lv]:
                cyc = max(cyc, ww[lv] / WBW[lv])
        return np.float64(math.ceil(cyc)) * (total + MACS * MAC_PJ)

    @cuda.jit(device=True)
    def draw_order_fast(s, order, nl):
        """A uniform loop order per level (Fisher-Yates), its swap indexes the mixed-radix
        digits of 32 random bits (the digit below j + 1 is the high word of u (j + 1), u keeps
        the low word; every order within D!/2^32 of uniform): two levels per generator step
        instead of D - 1 steps per level."""
        r = np.uint64(0)
        u = np.uint64(0)
        for lv in range(nl):
            if lv & 1 == 0:
                r = nxt(s)
                u = r >> u32
            else:
                u = r & MASK32
            for j in range(D):
                order[lv, j] = j
            for j in range(D - 1, 0, -1):
                p = u * np.uint64(j + 1)
                m = np.int32(p >> u32)
                u = p & MASK32
                x = order[lv, j]
                order[lv, j] = order[lv, m]
                order[lv, m] = x

    from numba import config

    # (the CUDA simulator compiles nothing and takes no register cap)
    # (numba's config sets its options as module attributes at import: no declared type)
    capped = max_registers is not None and not config.ENABLE_CUDASIM  # type: ignore[attr-defined]
    jit = cuda.jit(max_registers=max_registers) if capped else cuda.jit  # type: ignore[call-arg]

    @jit
    def random_kernel(n_rounds, tries, n_orders, rt, states, wstates, best_obj, best_t, best_s, best_o, best_k,
                      counters):
        tid = cuda.grid(1)
        if tid >= best_obj.shape[0]:
            return
        nl, nt = rt[0], rt[1]
        # Each lane keeps its own copy of the warp-wide generator and steps it alike, so the
        # lanes of a warp draw the same orders (and bypass) without exchanging anything.
        rs = cuda.local.array(2, uint64)
        rs[0] = states[tid]["s0"]
        rs[1] = states[tid]["s1"]
        ws = cuda.local.array(2, uint64)
        ws[0] = wstates[tid // WARP]["s0"]
        ws[1] = wstates[tid // WARP]["s1"]
        os = cuda.local.array(2, uint64)  # the round's orders (from ws when shared)
        temporal = cuda.local.array((L, D), int32)
        g = cuda.local.array((L, D), int32)
        uxy = cuda.local.array((L, 2), int32)
        order = cuda.local.array((L, D), int8)
        assign = cuda.local.array((D, F), int8)
        used = cuda.local.array((L, 2), int32)
        tile = cuda.local.array((L1, D), int32)
        fp = cuda.local.array((T, L), int32)
        sps = cuda.local.array((T, L, C), int32)
        grp = cuda.local.array((T, L), int32)
        opart = cuda.local.array(L, int32)
        lpl = cuda.local.array(LD1, int8)
        lpd = cuda.local.array(LD1, int8)
        kcs = cuda.local.array(L1, int16)
        spans = cuda.local.array(C, int32)
        shift = cuda.local.array(C, int32)
        deliv = cuda.local.array(L1, int64)
        ubs = cuda.local.array(L, int32)
        ibs = cuda.local.array(L, int64)
        rw = cuda.local.array(L, int64)
        ww = cuda.local.array(L, int64)
        ext = cuda.local.array((1, D), int32)
        buf = cuda.local.array(GRID, int32)
        best = math.inf
        legal = 0
        draws = 0
        kmask = np.int64(0)
        for _ in range(n_rounds):
            # the round's order stream: one step of the warp's generator (every lane alike),
            # spread by SplitMix64, or the lane's own stream
            if SHARE >= 1:
                z = nxt(ws)
                os[0] = splitmix(z)
                os[1] = splitmix(z + GOLDEN) | ONE_U
            if SHARE == 2:
                kmask = draw_keep(ws)
            ok = False
            k = 0
            while k < tries and not ok:
                if SHARE < 2:
                    kmask = draw_keep(rs)
                draw_factors(rs, assign, used)
                build(assign, temporal, g, uxy)
                ok = fits_cached(temporal, g, uxy, kmask, tile, fp, sps, nl, nt)
                k += 1
            draws += k
            if ok:
                # one fitting tiling and bypass, evaluated under n_orders random loop orders
                # (orders never decide legality): the factor caches serve them all
                mpu = prepare(temporal, g, tile, grp, opart, ubs, ibs, ext, spans, buf, nl, nt)
                for _o in range(n_orders):
                    if SHARE >= 1:
                        draw_order_fast(os, order, nl)
                    else:
                        draw_order_fast(rs, order, nl)
                    obj = edp_cached(temporal, g, order, kmask, tile, fp, sps, grp, opart, ubs, ibs, mpu, lpl, lpd,
                                     kcs, deliv, rw, ww, shift, nl, nt)
                    if obj < best:
                        best = obj
                        save(tid, assign, temporal, order, kmask, best_t, best_s, best_o, best_k)
                legal += n_orders
                draws += n_orders - 1
        best_obj[tid] = best
        counters[tid, 0] = draws
        counters[tid, 1] = legal

    @cuda.jit(device=True)
    def swap_pair(order, p):
        """Swap the two loops of loop pair p (`loop_pairs`): applied twice, nothing changes."""
        lv = p // PPL1
        q = p - lv * PPL1
        b = 0
        while q >= D - 1 - b:
            q -= D - 1 - b
            b += 1
        c = b + 1 + q
        x = order[lv, b]
        order[lv, b] = order[lv, c]
        order[lv, c] = x

    @cuda.jit(device=True)
    def copy_caches(tile, fp, sps, grp, opart, ubs, ibs, tile_to, fp_to, sps_to, grp_to, opart_to, ubs_to, ibs_to):
        """The factor caches of one tiling (`fits_cached`, `prepare`) copied."""
        for lv in range(L1):
            for d in range(D):
                tile_to[lv, d] = tile[lv, d]
        for lv in range(L):
            opart_to[lv] = opart[lv]
            ubs_to[lv] = ubs[lv]
            ibs_to[lv] = ibs[lv]
            for t in range(T):
                fp_to[t, lv] = fp[t, lv]
                grp_to[t, lv] = grp[t, lv]
                for cc in range(C):
                    sps_to[t, lv, cc] = sps[t, lv, cc]

    @cuda.jit(device=True)
    def copy_state(assign, order, assign_to, order_to):
        """A chain's prime-factor slots and loop orders copied (the bypass is one int64)."""
        for d in range(D):
            for k in range(F):
                assign_to[d, k] = assign[d, k]
        for lv in range(L):
            for d in range(D):
                order_to[lv, d] = order[lv, d]

    @jit
    def anneal_kernel(n_steps, n_init, t_start, t_end, n_orders, restart, rt, states, wstates, best_obj, best_t,
                            best_s, best_o, best_k, counters):
        tid = cuda.grid(1)
        if tid >= best_obj.shape[0]:  # (chains of several lanes: the host launches whole blocks)
            return
        nl, nt = rt[0], rt[1]
        rs = cuda.local.array(2, uint64)
        rs[0] = states[tid]["s0"]
        rs[1] = states[tid]["s1"]
        # the warp's generator (the block's where a chain has several lanes: its lanes step
        # together and draw the move kind and the Metropolis numbers alike)
        wi = cuda.blockIdx.x if LANES > 1 else tid // WARP
        ws = cuda.local.array(2, uint64)
        ws[0] = wstates[wi]["s0"]
        ws[1] = wstates[wi]["s1"]
        temporal = cuda.local.array((L, D), int32)
        g = cuda.local.array((L, D), int32)
        uxy = cuda.local.array((L, 2), int32)
        order = cuda.local.array((L, D), int8)
        assign = cuda.local.array((D, F), int8)
        used = cuda.local.array((L, 2), int32)
        # the factor caches, twice: the chain's state (cb) and a factor move's proposal (1 - cb)
        tile2 = cuda.local.array((2, L1, D), int32)
        fp2 = cuda.local.array((2, T, L), int32)
        sps2 = cuda.local.array((2, T, L, C), int32)
        grp2 = cuda.local.array((2, T, L), int32)
        opart2 = cuda.local.array((2, L), int32)
        ubs2 = cuda.local.array((2, L), int32)
        ibs2 = cuda.local.array((2, L), int64)
        mpu2 = cuda.local.array(2, int64)
        lpl = cuda.local.array(LD1, int8)
        lpd = cuda.local.array(LD1, int8)
        kcs = cuda.local.array(L1, int16)
        spans = cuda.local.array(C, int32)
        shift = cuda.local.array(C, int32)
        deliv = cuda.local.array(L1, int64)
        rw = cuda.local.array(L, int64)
        ww = cuda.local.array(L, int64)
        ext = cuda.local.array((1, D), int32)
        buf = cuda.local.array(GRID, int32)
        # chains of LANES lanes: this lane's place, and the block's shared hand-over buffers
        lid = cuda.threadIdx.x
        gi = lid // LANES
        lane = lid - gi * LANES
        gbase = gi * LANES
        sh_top = cuda.shared.array(TPB, float64)
        sh_assign = cuda.shared.array((NG, D, F), int8)
        sh_order = cuda.shared.array((NG, L, D), int8)
        sh_kmask = cuda.shared.array(NG, int64)
        sh_tile = cuda.shared.array((NG, L1, D), int32)
        sh_fp = cuda.shared.array((NG, T, L), int32)
        sh_sps = cuda.shared.array((NG, T, L, C), int32)
        sh_grp = cuda.shared.array((NG, T, L), int32)
        sh_opart = cuda.shared.array((NG, L), int32)
        sh_ubs = cuda.shared.array((NG, L), int32)
        sh_ibs = cuda.shared.array((NG, L), int64)
        sh_mpu = cuda.shared.array(NG, int64)
        sh_newf = cuda.shared.array(NG, int32)
        # restarts (chains of several lanes): the chains' EDPs, and the chains by rank
        sh_cur = cuda.shared.array(NG, float64)
        sh_rank = cuda.shared.array(NG, int32)
        top = math.inf
        top_p = -1
        total_steps = n_init + n_steps
        # the temperature of step k is t_start (t_end / t_start)^(k / total), by one
        # multiplication per step
        cool = (t_end / t_start) ** (1.0 / total_steps)
        temp = t_start
        best = math.inf
        cur = math.inf  # the chain's EDP (inf until it has a legal state)
        legal = 0
        evals = 0
        step = 0
        kmask = np.int64(0)
        cb = 0
        nb = 1
        while step < total_steps:
            # One step: a move and its check; if it fits, the moved mapping and n_orders - 1
            # loop-order variants of it (one more distinct swap each) are evaluated from one
            # set of factor caches, and the best of them goes through the Metropolis test; a
            # swap step's variants are n_orders distinct swaps of the state. An illegal move
            # is undone. The move's kind comes from the warp's generator (the block's with
            # several lanes per chain; every lane alike) when shared, so that a warp swaps
            # loops or flips bypass bits together and takes the short evaluation together.
            u = uniform(ws) if SHARE_MOVE else uniform(rs)
            a, b, c = 0, 0, 0
            if cur == math.inf:  # a fresh draw until the chain has a legal state
                mv = -1
                draw_factors(rs, assign, used)
                draw_order_fast(rs, order, nl)
                kmask = draw_keep(rs)
                build(assign, temporal, g, uxy)
            elif u < 0.6 and HAS_FACTORS:  # one prime factor of one dim to another slot
                mv = 0
                a = FDIMS[below(rs, NFDIMS)]
                b = below(rs, NPF[a])
                c = assign[a, b]
                x = below(rs, S - 1)
                x = x + 1 if x >= c else x
                # the factors change in two places only: no rebuild
                place(c, a, PF[a, b], temporal, g, uxy, False)
                if REDIRECT:  # a spatial slot without room: that level's temporal slot
                    kind = SLOT_KIND[x]
                    if kind > 0 and uxy[SLOT_LV[x], kind - 1] * PF[a, b] > FAN[SLOT_LV[x], kind - 1]:
                        x = SLOT_TMP[x]
                if x == c:  # (redirected to where it was: no move, an illegal step)
                    mv = 3
                    place(c, a, PF[a, b], temporal, g, uxy, True)
                else:
                    assign[a, b] = x
                    place(x, a, PF[a, b], temporal, g, uxy, True)
            elif NFLIP > 0 and (u >= 0.85 or D == 1):  # flip one bypass bit an inner level may hold
                mv = 2
                x = below(rs, NFLIP)
                a = FLIP_LV[x]
                b = FLIP_T[x]
                kmask ^= ONE << np.int64(a * T + b)
            else:  # swap two loops of one level (several mappings per step: the variants below are the swaps)
                mv = 1
                if SINGLE and D > 1:
                    a = below(rs, nl)
                    b = below(rs, D)
                    x = below(rs, D - 1)
                    c = x + 1 if x >= b else x
                    x = order[a, b]
                    order[a, b] = order[a, c]
                    order[a, c] = x
            step += 1
            if mv <= 0:  # new factors: checked and cached in the proposal's buffer
                nb = 1 - cb
                ok = fits_cached(temporal, g, uxy, kmask, tile2[nb], fp2[nb], sps2[nb], nl, nt)
                e = nb
            elif mv == 2:  # only level a's need changed
                ok = level_fits(kmask, a, fp2[cb], nt)
                e = cb
            elif mv == 3:
                ok = False
                e = cb
            else:  # orders never decide legality
                ok = True
                e = cb
            if not ok:
                evals += 1  # a proposal checked and refused
            keep_move = False
            top = math.inf
            top_p = -1
            if ok:
                if mv <= 0:
                    mpu2[nb] = prepare(temporal, g, tile2[nb], grp2[nb], opart2[nb], ubs2[nb], ibs2[nb], ext, spans,
                                       buf, nl, nt)
                # the variants: swaps p_j = r + j x stride (mod the number of pairs), distinct
                # for j below it (the host caps n_orders at NPAIR); variant 0 of a factor
                # move or flip is the moved mapping itself
                first = 0 if mv == 1 and not SINGLE else 1
                pj = below(rs, NPAIR) if NPAIR > 0 and not SINGLE else 0
                for j in range(1 if SINGLE else n_orders):
                    sw = j >= first and NPAIR > 0
                    if sw:
                        swap_pair(order, pj)
                    obj = edp_cached(temporal, g, order, kmask, tile2[e], fp2[e], sps2[e], grp2[e], opart2[e],
                                     ubs2[e], ibs2[e], mpu2[e], lpl, lpd, kcs, deliv, rw, ww, shift, nl, nt)
                    if obj < best:
                        best = obj
                        save(tid, assign, temporal, order, kmask, best_t, best_s, best_o, best_k)
                    if obj < top:
                        top = obj
                        top_p = pj if sw else -1
                    if sw:
                        swap_pair(order, pj)
                        pj += PSTRIDE
                        if pj >= NPAIR:
                            pj -= NPAIR
                legal += 1 if SINGLE else n_orders
                evals += 1 if SINGLE else n_orders
                if LANES == 1:
                    # Metropolis on log EDP for the best variant: an improvement always, else
                    # with probability (cur / top)^(1 / temp) (in float32: a probability needs
                    # no more)
                    if top <= cur or uniform(rs) < math.exp(np.float32(math.log(np.float32(cur / top))) /
                                                            np.float32(temp)):
                        cur = top
                        cb = e
                        keep_move = True
                        if top_p >= 0:
                            swap_pair(order, top_p)
            if LANES > 1:
                # The chain's lanes: the best of their tops (the lowest lane among equals)
                # goes through the Metropolis test, drawn from the block's generator so that
                # every lane decides alike; the winner passes its state (and its factor
                # caches where its move changed the factors) to the others.
                sh_top[lid] = top
                cuda.syncthreads()
                w = 0
                wtop = sh_top[gbase]
                for i in range(1, LANES):
                    v = sh_top[gbase + i]
                    if v < wtop:
                        wtop = v
                        w = i
                um = uniform(ws)
                accept = wtop < math.inf and (wtop <= cur or um < math.exp(
                    np.float32(math.log(np.float32(cur / wtop))) / np.float32(temp)))
                if accept and lane == w:
                    newf = mv <= 0  # (the winner's move changed the factors)
                    sh_newf[gi] = 1 if newf else 0
                    if top_p >= 0:
                        swap_pair(order, top_p)
                    cb = e
                    keep_move = True
                    copy_state(assign, order, sh_assign[gi], sh_order[gi])
                    sh_kmask[gi] = kmask
                    if newf:
                        copy_caches(tile2[cb], fp2[cb], sps2[cb], grp2[cb], opart2[cb], ubs2[cb], ibs2[cb],
                                    sh_tile[gi], sh_fp[gi], sh_sps[gi], sh_grp[gi], sh_opart[gi], sh_ubs[gi],
                                    sh_ibs[gi])
                        sh_mpu[gi] = mpu2[cb]
                cuda.syncthreads()
                if accept:
                    cur = wtop
                    newf = sh_newf[gi] != 0
                    if lane != w:  # the winner's state replaces the lane's own move
                        keep_move = True
                        copy_state(sh_assign[gi], sh_order[gi], assign, order)
                        kmask = sh_kmask[gi]
                        if newf or not SHARE_MOVE:  # (lanes of their own kinds: a factor move of the
                            build(assign, temporal, g, uxy)  # lane's own, undone)
                        if newf:  # (else the lane's caches are the state's: its own move used the other buffer)
                            copy_caches(sh_tile[gi], sh_fp[gi], sh_sps[gi], sh_grp[gi], sh_opart[gi], sh_ubs[gi],
                                        sh_ibs[gi], tile2[cb], fp2[cb], sps2[cb], grp2[cb], opart2[cb], ubs2[cb],
                                        ibs2[cb])
                            mpu2[cb] = sh_mpu[gi]
            temp *= cool
            if not keep_move:  # undo the move
                if mv == 0:
                    place(assign[a, b], a, PF[a, b], temporal, g, uxy, False)
                    place(c, a, PF[a, b], temporal, g, uxy, True)
                    assign[a, b] = c
                elif SINGLE and mv == 1 and D > 1:
                    x = order[a, b]
                    order[a, b] = order[a, c]
                    order[a, c] = x
                elif mv == 2:
                    kmask ^= ONE << np.int64(a * T + b)
            if LANES > 1 and restart > 0 and step % restart == 0 and step < total_steps:
                # Restarts (population annealing within a block: Hukushima and Iba, "Population
                # annealing and its application to a spin glass", AIP Conf. Proc. 690, 2003,
                # resampling by rank instead of by Boltzmann weight): every `restart` steps the
                # block's chains are ranked by their EDP (ties by index) and the worse half
                # takes the states of the better half, the i-th worst the i-th best's, where
                # that one is better. A restart evaluates nothing (the state's EDP comes with
                # it) and leaves each lane's best row as it is.
                if lane == 0:
                    sh_cur[gi] = cur
                cuda.syncthreads()
                rank = 0
                for i in range(NG):
                    v = sh_cur[i]
                    if v < cur or (v == cur and i < gi):
                        rank += 1
                if lane == 0:
                    sh_rank[rank] = gi
                    if rank < NG // 2:  # a better-half chain publishes its state and caches
                        copy_state(assign, order, sh_assign[gi], sh_order[gi])
                        sh_kmask[gi] = kmask
                        copy_caches(tile2[cb], fp2[cb], sps2[cb], grp2[cb], opart2[cb], ubs2[cb], ibs2[cb],
                                    sh_tile[gi], sh_fp[gi], sh_sps[gi], sh_grp[gi], sh_opart[gi], sh_ubs[gi],
                                    sh_ibs[gi])
                        sh_mpu[gi] = mpu2[cb]
                cuda.syncthreads()
                if rank >= NG - NG // 2:
                    src = sh_rank[NG - 1 - rank]
                    if sh_cur[src] < cur:
                        cur = sh_cur[src]
                        copy_state(sh_assign[src], sh_order[src], assign, order)
                        kmask = sh_kmask[src]
                        build(assign, temporal, g, uxy)
                        copy_caches(sh_tile[src], sh_fp[src], sh_sps[src], sh_grp[src], sh_opart[src], sh_ubs[src],
                                    sh_ibs[src], tile2[cb], fp2[cb], sps2[cb], grp2[cb], opart2[cb], ubs2[cb],
                                    ibs2[cb])
                        mpu2[cb] = sh_mpu[src]
                # (the next hand-over writes these buffers only after its first barrier, when
                # every chain has read them)
        best_obj[tid] = best
        counters[tid, 0] = evals
        counters[tid, 1] = legal

    @jit
    def objective_kernel(rt, temporal_in, spatial_in, order_in, keep_in, out_edp, out_fits):
        """The EDP (inf where a row does not fit) of host rows whose factors, orders and
        bypass are legal: the search kernels' own evaluation (factor caches, then the
        order-dependent part), for the equality tests."""
        i = cuda.grid(1)
        if i >= out_edp.shape[0]:
            return
        nl, nt = rt[0], rt[1]
        temporal = cuda.local.array((L, D), int32)
        g = cuda.local.array((L, D), int32)
        uxy = cuda.local.array((L, 2), int32)
        order = cuda.local.array((L, D), int8)
        tile = cuda.local.array((L1, D), int32)
        fp = cuda.local.array((T, L), int32)
        sps = cuda.local.array((T, L, C), int32)
        grp = cuda.local.array((T, L), int32)
        opart = cuda.local.array(L, int32)
        lpl = cuda.local.array(LD1, int8)
        lpd = cuda.local.array(LD1, int8)
        kcs = cuda.local.array(L1, int16)
        spans = cuda.local.array(C, int32)
        shift = cuda.local.array(C, int32)
        deliv = cuda.local.array(L1, int64)
        ubs = cuda.local.array(L, int32)
        ibs = cuda.local.array(L, int64)
        rw = cuda.local.array(L, int64)
        ww = cuda.local.array(L, int64)
        ext = cuda.local.array((1, D), int32)
        buf = cuda.local.array(GRID, int32)
        kmask = np.int64(0)
        for lv in range(L):
            uxy[lv, 0] = 1
            uxy[lv, 1] = 1
            for d in range(D):
                temporal[lv, d] = temporal_in[i, lv, d]
                g[lv, d] = spatial_in[i, lv, d, 0] * spatial_in[i, lv, d, 1]
                uxy[lv, 0] *= spatial_in[i, lv, d, 0]
                uxy[lv, 1] *= spatial_in[i, lv, d, 1]
                order[lv, d] = order_in[i, lv, d]
            for t in range(T):
                if keep_in[i, lv, t]:
                    kmask |= ONE << np.int64(lv * T + t)
        ok = fits_cached(temporal, g, uxy, kmask, tile, fp, sps, nl, nt)
        out_fits[i] = ok
        out_edp[i] = math.inf
        if ok:
            mpu = prepare(temporal, g, tile, grp, opart, ubs, ibs, ext, spans, buf, nl, nt)
            out_edp[i] = edp_cached(temporal, g, order, kmask, tile, fp, sps, grp, opart, ubs, ibs, mpu, lpl, lpd, kcs,
                                    deliv, rw, ww, shift, nl, nt)

    # (the device functions too: `accelmap.costmodels._cuda_exhaustive` builds its kernel on them)
    return {"random": random_kernel, "anneal": anneal_kernel,
            "objective": objective_kernel,
            "fits": fits, "edp": edp, "kept": kept}
