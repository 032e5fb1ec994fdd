"""The ``loopnest`` CPU rows written out per structure: generated source, one module per structure.

`accelmap.costmodels._loopnest_cpu` compiles the shared rules of `_loopnest_rules` with the
structure's tables as constants: numba unrolls their loops, but each rule still keeps its
tables (tiles, spatial factors, spans, deliveries, per-level words) in scratch arrays, stored
and read back within the row. This module writes the same row as straight-line Python source
for one structure (`source`): every loop over levels, dims, tensors and coordinates unrolled
by the generator, every value that does not depend on the mapping's loop order a local
variable (so LLVM keeps it in a register), every structural test decided while generating.
Only what the loop order indexes at run time stays in scratch arrays: the active temporal
loops (``lp``, as `_loopnest_rules.row_tables` lays them out) and the strides eq. D's slide
walk reads.

What is counted is the rules' (`_loopnest_rules`; the scalar reference
`loopnest._scalar_counts` defines it): the generated row performs their integer and float
operations in the same order, so the results are identical (the property tests compare every
engine with the numpy path bit for bit). The rules it re-expresses, by name:

* ``check``: the same checks in the same order (FACTORS, ORDER, KEEP, FANOUT, CAPACITY), each
  computed for every level before the first failing one is picked;
* ``row_tables``: the active loops and their running products in ``lp``; the used and
  utilized instances and the MACs per unit as locals;
* ``closed_deliveries``: the same walk back from a level's innermost active loop;
* ``deliveries`` (eq. D's slide walk): the same class of each active loop and the same words
  per step, in one walk from the innermost loop out, the total by Horner's rule (the same
  int64 value: `_open_deliveries`);
* ``distinct``: a coordinate of one term multiplies by its factor, of two terms the gcd form
  (a coordinate of more terms calls the rule);
* ``keeper_counts``: per tensor, its keeping levels from the innermost out, the child's
  deliveries, groups and children carried as locals; ``ceil_blocks`` with the block size a
  constant;
* ``latency_cycles`` and the padding scale of `_loopnest_cpu`.

Six things are the generated rows' own, none changing a value: with every bound at least 1
(the problems' are; a run-time test before the row loop, ``bpos``, sends every row to the
rule's check otherwise) the least-factor test reads only the factors' signs, since a zero
factor already makes its dim's product differ from the bound (`_legality`); the run-time
constants they read are loaded once before the row loop (`_RunConsts`); the count entries that
are zero in every row of the structure are written only with ``full == 1`` (``full == 2``: the caller's
array holds 0.0 there already, `_loopnest_kernel.evaluate_batch`'s marked counts buffers);
with counts each row asks for the counts' row `_PREFETCH_ROWS` rows ahead for writing
(`prefetch_write`, a hint); every row asks for the spatial factors' row as far ahead for
reading (`prefetch_read`, a hint); and every index that is not a constant is given to numba as an
unsigned integer (``U(...)``: the row number, a legal row's loop dims, the listed loops'
positions), never negative where it is read, so that numba leaves out its wrap-around of
negative indices (a shift, an AND with the dimension's length, often reloaded from the stack,
and an add per access), the mapping arrays read through flat views at constant offsets from
the row's start (`_flat`). Like every CPU driver of the model they are compiled with numba's
numpy error model (`_loopnest_cpu._JIT`: no test of a divisor).

The source goes to a file named by the structure's digest in a cache folder
(``$ACCELMAP_CACHE_DIR`` or ``~/.cache/accelmap``, `cache_dir`) and is imported from there, so
numba's on-disk cache (``cache=True``), which keys a function by its file, serves it in later
processes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["source", "driver", "cache_dir", "prefetch_write", "prefetch_read"]

# Bumped when the generator's output changes in a way its inputs do not show (the file name
# includes it, so an older generated module is never imported for a newer generator).
_GENERATOR_VERSION = 10


# How many rows ahead a row's counts are prefetched for writing (`prefetch_write`): 1, 2 and 4
# rows ahead gave the same gain, ahead of a row's ~300 ns; and its spatial factors for reading
# (`prefetch_read`: 4, 8 and 16 rows ahead gave the same gain).
_PREFETCH_ROWS = 4


@intrinsic
def prefetch_write(typingctx, arr, i, offset):  # noqa: ANN001, ANN201, ARG001 (a numba intrinsic)
    """Ask for the cache line holding byte ``offset`` of row ``i`` of ``arr`` (its address
    ``data + i * strides[0] + offset``) in a writable state: LLVM's ``llvm.prefetch`` with
    ``rw = 1`` (x86 ``prefetchw``). A hint only: it changes no value, and never faults, so a
    row past the array's end may be named (its address is formed as an integer, not as a
    pointer into the array).

    Why: the generated rows store a row's counts at its end, 720 bytes (res2a_branch2b on
    eyeriss-like) that at 10,000 rows and more lie outside the core's caches; each store waits
    for its line to be read for ownership, and the stores behind it, the row's own spills
    included, queue up. Asked for a few rows ahead, the lines are there when the stores come."""

    return types.void(arr, i, offset), _prefetch_codegen(1)


@intrinsic
def prefetch_read(typingctx, arr, i, offset):  # noqa: ANN001, ANN201, ARG001 (a numba intrinsic)
    """`prefetch_write` for reading (``rw = 0``, x86 ``prefetcht0``).

    Why: a row's legality test first reads most of the row's spatial factors (560 bytes for
    res2a_branch2b on eyeriss-like, 9 cache lines); on the reference machine's core (Zen 2) the
    instructions that first use them held about a tenth of the row's samples (``perf``), the
    hardware prefetchers not having brought the lines, and the row ran 0.86-0.90x the time with
    them asked for a few rows ahead (docs/performance.md)."""
    return types.void(arr, i, offset), _prefetch_codegen(0)


def _prefetch_codegen(rw: int):  # noqa: ANN202
    """The codegen of `prefetch_write` (``rw`` 1) and `prefetch_read` (``rw`` 0)."""

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i64, i32, i8p = ir.IntType(64), ir.IntType(32), ir.IntType(8).as_pointer()
        row = builder.mul(args[1], builder.extract_value(ary.strides, 0))
        addr = builder.add(builder.add(builder.ptrtoint(ary.data, i64), row), args[2])
        fn = builder.module.declare_intrinsic("llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]))
        # (address, rw, locality = 3: keep in every cache level, data cache)
        builder.call(fn, [builder.inttoptr(addr, i8p), ir.Constant(i32, rw), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return codegen


def cache_dir() -> Path:
    """Where generated modules are written: ``$ACCELMAP_CACHE_DIR`` or ``~/.cache/accelmap``
    (a temporary folder when neither can be created)."""
    base = os.environ.get("ACCELMAP_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "accelmap"
    path = root / "loopnest_rows"
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path
    except OSError:
        path = Path(tempfile.gettempdir()) / "accelmap_loopnest_rows"
        path.mkdir(parents=True, exist_ok=True)
        return path


class _Src:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ind = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.ind + line)


class _RunConsts:
    """The entries of the run-time constant arrays (bounds, fanouts, capacities, energies,
    bandwidths, tensor sizes, padding shares) that the row reads, each loaded once before the
    row loop into a local of its own (``bounds_3`` for ``bounds[3]``). Read in the row, every
    such load also reloads the array's base and strides: the compiler cannot keep an entry
    across the row's stores, which might write the same memory."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._seen: set[str] = set()

    def __call__(self, name: str, *idx: int) -> str:
        local = "_".join([name, *map(str, idx)])
        if local not in self._seen:
            self._seen.add(local)
            self.lines.append(f"    {local} = {name}[{', '.join(map(str, idx))}]")
        return local


def _prod(terms: list[str]) -> str:
    """A product as a balanced tree (short dependency chains)."""
    terms = [t for t in terms if t != "1"] or ["1"]
    while len(terms) > 1:
        terms = [f"({terms[k]} * {terms[k + 1]})" if k + 1 < len(terms) else terms[k] for k in range(0, len(terms), 2)]
    return terms[0]


def _or(terms: list[str]) -> str:
    """An OR of the terms as a balanced tree (short dependency chains: the same bits as the
    chain from the left; the rows ran 0.99x the time with the legality's ORs so)."""
    while len(terms) > 1:
        terms = [f"({terms[k]} | {terms[k + 1]})" if k + 1 < len(terms) else terms[k] for k in range(0, len(terms), 2)]
    return terms[0]


def source(S: tuple) -> str:
    """The Python source of the driver of structure ``S`` (`_loopnest_cpu.structure`): a
    module defining ``rows(lo, hi, full, mp, rt, out, sc)`` with `_loopnest_cpu`'s arguments,
    outputs and return value (the number of illegal rows; ``sc``: the scratch of `_loopnest_rules.scratch`; ``full``: 0 without the
    counts, 1 with them, 2 with them where the entries that are zero in every row of the
    structure hold 0.0 already and are left as they are)."""
    L, D, T, C, M, nterm, tdim, tcoef, coef, holds, closed, rel, block, out, capf, rbwf, wbwf, fanl, digest = S
    NT = np.array(nterm, dtype=np.int64).reshape(T, C)
    if (NT > 2).any():
        raise ValueError("_loopnest_gen.source: a coordinate of more than two terms (see `supports`)")
    TD = np.array(tdim, dtype=np.int64).reshape(T, C, M)
    TC = np.array(tcoef, dtype=np.int64).reshape(T, C, M)
    HOLDS = np.array(holds, dtype=bool).reshape(L, T)
    CLOSED = np.array(closed, dtype=bool)
    REL = np.array(rel, dtype=bool).reshape(T, D)
    FANL = [bool(x) for x in fanl]

    def spans_of(t: int, ext: str) -> list[str]:
        """Each coordinate's span ``1 + sum_k a_k (ext_d - 1)`` of tensor t over the extents
        named ``{ext}{d}``: the terms of `_loopnest_rules.footprint`, in its order."""
        out_ = []
        for cc in range(C):
            s = "1"
            for k in range(int(NT[t, cc])):
                d, a = int(TD[t, cc, k]), int(TC[t, cc, k])
                s = f"({s} + {a} * ({ext}{d} - 1))"
            out_.append(s)
        return out_

    def footprint(t: int, ext: str) -> str:
        # `footprint`: size = 1; size *= span, coordinate by coordinate (left to right)
        size = "1"
        for s in spans_of(t, ext):
            size = f"({size} * {s})"
        return size

    w = _Src()
    rc = _RunConsts()
    w("# Generated by accelmap.costmodels._loopnest_gen for one structure; do not edit.")
    w(f"# structure digest {digest}, generator {_GENERATOR_VERSION}")
    w("import math")
    w("import numpy as np")
    w("from numba import njit")
    w("from accelmap.costmodels._loopnest_rules import check_one")
    w("from accelmap.costmodels._loopnest_gen import prefetch_read, prefetch_write")
    w("U = np.uint64")
    w(f"S = {S!r}")
    w("COEF = np.array(S[8], dtype=np.int64).reshape(S[2], S[3], S[1])")
    w("NTERM = np.array(S[5], dtype=np.int64).reshape(S[2], S[3])")
    w("TDIM = np.array(S[6], dtype=np.int64).reshape(S[2], S[3], S[4])")
    w("TCOEF = np.array(S[7], dtype=np.int64).reshape(S[2], S[3], S[4])")
    w("HOLDS = np.array(S[9], dtype=np.bool_).reshape(S[0], S[2])")
    w("for _a in (COEF, NTERM, TDIM, TCOEF, HOLDS):")
    w("    _a.setflags(write=False)")
    w("")
    w("")
    w("@njit(nogil=True, cache=True, _nrt=False, error_model=\"numpy\")")
    w("def rows(lo, hi, full, mp, rt, out, sc):")
    w.ind = 1
    w("temporal, spatial, order, keep = mp")
    # the mapping's arrays as flat views (`_flat`)
    w("tflat, sflat, oflat, kflat = (temporal.reshape(temporal.size), spatial.reshape(spatial.size), "
      "order.reshape(order.size), keep.reshape(keep.size))")
    w("bounds, fan_xy, capacity, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, frac = rt")
    w("res, valid, codes, cnt = out")
    w("tile, g, lp, kcs, spans, shift, deliv, ext, buf, lvl = sc")
    w("macs, n_macs, mac_pj = scal[0], scal[1], scal[2]")
    w("mac_e = macs * mac_pj")
    w("nbad = 0")
    w("for i in range(lo, hi):")
    w.ind = 2
    w("iu = U(i)")
    w(f"ti, si, ki = i * {L * D}, i * {2 * L * D}, i * {L * T}")
    w("ci = iu if full else U(0)")
    # the counts' row a few rows ahead, every cache line of it (`prefetch_write`; a row may
    # start part way into a line, so also its last byte's line)
    row_bytes = 6 * L * T * 8
    w("if full:")
    for off in sorted({*range(0, row_bytes, 64), row_bytes - 1}):
        w(f"    prefetch_write(cnt, i + {_PREFETCH_ROWS}, {off})")
    # the spatial factors' row as far ahead, for reading (`prefetch_read`): the legality test
    # reads most of it first thing in the row
    sp_bytes = 2 * L * D * 8
    for off in sorted({*range(0, sp_bytes, 64), sp_bytes - 1}):
        w(f"prefetch_read(spatial, i + {_PREFETCH_ROWS}, {off})")
    # --- legality (`check`) -------------------------------------------------------------------
    _legality(w, S, footprint, rc)
    w("codes[iu, 0] = why")
    w("codes[iu, 1] = where")
    w("if why != 0:")
    w.ind += 1
    _invalid_row(w, L, T)
    w.ind -= 1
    # --- the row's tables (`row_tables`) ------------------------------------------------------
    for lv in range(L):
        if FANL[lv]:
            for d in range(D):
                w(f"g{lv}_{d} = {_flat('s', L, D, T, lv, d, 0)} * {_flat('s', L, D, T, lv, d, 1)}")
    # What the rest of the row reads of the loop tables: a tensor kept at level c >= 1 reads
    # the active loops above c (closed: their dims, ``lp[0]``, and running products, ``lp[3]``;
    # open: dims, bounds ``lp[1]`` and strides ``lp[2]``, and tile c): so the loops of the
    # levels below the innermost such c are not listed, and only the fields read are stored.
    def deepest(ts: list[int]) -> int:
        return max([c for t in ts for c in range(1, L) if HOLDS[c, t]], default=0)

    n_dim = deepest(list(range(T)))  # loops of levels < n_dim are listed
    n_open = deepest([t for t in range(T) if not CLOSED[t]])
    n_closed = deepest([t for t in range(T) if CLOSED[t]])
    for lv in range(n_open):  # the strides of the loops eq. D's slide walk reads
        for d in range(D):
            nxt = f"t{lv + 1}_{d}" if lv + 1 < L else "1"
            w(f"g[{lv}, {d}] = {f'g{lv}_{d} * {nxt}' if FANL[lv] else nxt}")
    # Every value below is assigned once, under a name of its own (numba's SSA pass costs about
    # the number of re-assigned variables times the number of blocks: re-used names made it the
    # largest part of the compile).
    # The MACs of one unit and the product of the loop bounds of the levels above each level
    # (``pa``). A level whose loops are listed with their running products (``lp[3]``, the
    # levels below ``n_closed``) ends its chain with ``pa{lv + 1}``: the chain multiplies
    # ``pa{lv}`` by the level's factors in its loop order, which in a legal row is a
    # permutation of the dims (the ORDER check), so its last product is ``pa{lv} * pl{lv}``,
    # the product of the level's factors, as the same int64 value (products modulo 2^64
    # commute and associate); the product ``pl{lv}`` is not formed for those levels. The
    # other levels take it from a balanced product of their factors (short chains).
    for lv in range(n_closed, L):
        w(f"pl{lv} = {_prod([_flat('t', L, D, T, lv, d) for d in range(D)])}")
    w("pa0 = 1")
    w("lp[3, 0] = 1")
    kn, m = "0", 0
    for lv in range(n_dim):
        w(f"kc{lv} = {kn}")
        prod = f"pa{lv}"
        for j in range(D):
            o, b = f"o{lv}_{j}", f"b{lv}_{j}"
            w(f"{b} = tflat[U(ti + {lv * D} + {o})]")
            w(f"lp[0, U({kn})] = {o}")
            if lv < n_open:
                w(f"lp[1, U({kn})] = {b}")
                w(f"lp[2, U({kn})] = g[{lv}, U({o})]")
            if lv < n_closed:
                w(f"pr{lv}_{j} = {prod} * {b}")
                w(f"lp[3, U({kn} + 1)] = pr{lv}_{j}")
                prod = f"pr{lv}_{j}"
            m += 1
            w(f"kk{m} = {kn} + ({b} >= 2)")
            kn = f"kk{m}"
        if lv < n_closed:
            w(f"pa{lv + 1} = {prod}")
    w(f"kc{n_dim} = {kn}")
    for lv in range(n_closed + 1, L):
        w(f"pa{lv} = {'pl0' if lv == 1 else f'(pa{lv - 1} * pl{lv - 1})'}")
    w(f"mpu = {'pl0' if L == 1 else f'pa{L - 1} * pl{L - 1}'}")
    ib = "1"
    for lv in range(L):
        w(f"ub{lv} = {_prod([f'g{lv}_{d}' for d in range(D)]) if FANL[lv] else '1'}")
        w(f"ib{lv} = {ib}")
        ib = f"(ib{lv} * ub{lv})"
    # eq. S per (tensor, fanned-out level): `distinct`
    for t in range(T):
        for lv in range(L):
            if not FANL[lv]:
                continue
            parts = []
            for cc in range(C):
                n = int(NT[t, cc])
                if n == 1:
                    parts.append(f"g{lv}_{int(TD[t, cc, 0])}")
                elif n == 2:
                    d1, d2 = int(TD[t, cc, 0]), int(TD[t, cc, 1])
                    a1, a2 = int(TC[t, cc, 0]), int(TC[t, cc, 1])
                    nxt1 = f"t{lv + 1}_{d1}" if lv + 1 < L else "1"
                    nxt2 = f"t{lv + 1}_{d2}" if lv + 1 < L else "1"
                    sfx = f"{t}_{lv}_{cc}"
                    n1, n2, aa, bb, xx, yy = (f"{x}{sfx}" for x in ("n1_", "n2_", "aa", "bb", "xx", "yy"))
                    v = f"q{sfx}"
                    w(f"{n1}, {n2} = g{lv}_{d1}, g{lv}_{d2}")
                    w(f"if ({n1} > 1) & ({n2} > 1):")
                    w(f"    {aa} = {a1} * {nxt1}")
                    w(f"    {bb} = {a2} * {nxt2}")
                    w(f"    {xx}, {yy} = {aa}, {bb}")
                    w(f"    while {yy}:")
                    w(f"        {xx}, {yy} = {yy}, {xx} % {yy}")
                    w(f"    {v} = {n1} * {n2} - max({n1} - {bb} // {xx}, 0) * max({n2} - {aa} // {xx}, 0)")
                    w("else:")
                    w(f"    {v} = {n1} * {n2}")
                    parts.append(v)
            # `distinct`: count = 1; count *= each coordinate's count, left to right
            expr = "1"
            for p_ in parts:
                expr = f"({expr} * {p_})"
            w(f"ds{t}_{lv} = {expr}")
    # --- per tensor: its keeping levels from the innermost out (`keeper_counts`) -----------------
    # A tensor's counts are written in one ``if full`` block after its walk (count by count,
    # level by level), each scaled by its tensor's padding share (one block per tensor, not
    # per level and tensor: fewer blocks for numba's passes to go over); written there, the
    # tensor's reads, fills, updates and multicasts are dead before the next tensor's walk
    # (kept to the row's end, they were live across all of it).
    sums: dict[tuple[str, int], str] = {}

    def sc_of(t: int) -> str:
        # the padding share of tensor t's counts, or 1.0 (`_loopnest_cpu`): run-time constant
        name = f"scl_{t}"
        if name not in rc._seen:
            rc._seen.add(name)
            fr = rc("frac", t)
            rc.lines.append(f"    {name} = {fr} if {fr} < 1.0 else 1.0")
        return name

    for t in range(T):
        is_out = t == out
        fch, grp, chn = "mpu", "1", "1"  # the child's deliveries, groups and children so far
        for p in range(L - 1, -1, -1):
            x_ = f"{p}_{t}"
            if FANL[p]:
                w(f"grp{x_} = {grp} * ds{t}_{p}")
                w(f"chn{x_} = {chn} * ub{p}")
                grp, chn = f"grp{x_}", f"chn{x_}"
            if not HOLDS[p, t]:
                w(f"e{x_} = 0.0")
                continue
            kept = "True" if p == 0 else f"k{x_}"
            w(f"if {kept}:")
            w.ind += 1
            # this level's deliveries (eq. D), then its counts with the child's
            fp = f"fp{x_}"
            if p > 0:
                if CLOSED[t]:
                    rb = sum(1 << d for d in range(D) if REL[t, d])
                    w(f"j{x_} = kc{p}")
                    w(f"while j{x_} > 0 and not (({rb} >> lp[0, U(j{x_} - 1)]) & 1):")
                    w(f"    j{x_} -= 1")
                    w(f"{fp} = {footprint(t, f't{p}_')} * lp[3, U(j{x_})]")
                else:
                    _open_deliveries(w, x_, fp, t, p, spans_of(t, f"t{p}_"), [
                        cc for cc in range(C) if any(int(v) for v in np.array(coef).reshape(T, C, D)[t, cc])])
            else:
                w(f"{fp} = {rc('tensor_size', t)}")
            ap, r, f, u = f"ap{x_}", f"r{x_}", f"f{x_}", f"u{x_}"
            w(f"{ap} = {fch} * {grp}")
            if is_out:
                ext = []
                for d in range(D):
                    ext.append(_prod([f"t{p}_{d}"] + [_flat("t", L, D, T, lv, d) for lv in range(p)]))
                for d in range(D):
                    w(f"w{x_}_{d} = {ext[d]}")
                w(f"part{x_} = {footprint(t, f'w{x_}_')}")
                w(f"{r} = {ap} - part{x_}")
                w(f"{f} = {f'{fp} - part{x_}' if p > 0 else '0'}")
                w(f"{u} = {ap}")
            else:
                w(f"{r} = {ap}")
                w(f"{f} = {fp if p > 0 else '0'}")
                w(f"{u} = 0")
            blk = int(block[p])

            def cb(v: str, blk: int = blk) -> str:
                if blk == 1:
                    return f"float({v})"
                if blk & (blk - 1) == 0:
                    return f"math.ceil({v} * {1.0 / blk!r})"
                return f"math.ceil({v} / {blk})"

            # (one expression: the rule's ``e = reads; e += writes``, the same two float sums)
            e = f"{cb(r)} * {rc('read_pj', p)}"
            if is_out and p > 0:
                e += f" + ({cb(f)} + {cb(u)}) * {rc('write_pj', p)}"
            elif is_out:
                e += f" + {cb(u)} * {rc('write_pj', p)}"
            elif p > 0:
                e += f" + {cb(f)} * {rc('write_pj', p)}"
            w(f"e{x_} = ({e}) * ib{p}")
            w(f"rw{x_} = {f} + {u}")
            w(f"sp{x_} = {fch} * {chn} - {ap}")  # (the multicast or spatial-reduction count)
            if p > 0:
                # the next outer keeper's child is this level, with no groups or children yet
                w(f"fc{x_}, gb{x_}, cb{x_} = {fp}, 1, 1")
                w.ind -= 1
                w("else:")
                w(f"    e{x_} = 0.0")
                w(f"    {r} = 0")
                w(f"    rw{x_} = 0")
                w(f"    fc{x_}, gb{x_}, cb{x_} = {fch}, {grp}, {chn}")
                w(f"    {f}, {u}, sp{x_} = 0, 0, 0")
                fch, grp, chn = f"fc{x_}", f"gb{x_}", f"cb{x_}"
            else:
                w.ind -= 1
        # This tensor's reads and writes added to each level's running sums (integer sums in
        # the rule's order, tensor by tensor: the same int64 values), and its counts stored
        # now, so that none of its values stays live across the later tensors' walks.
        for p in range(L):
            if HOLDS[p, t]:
                x_ = f"{p}_{t}"
                for nm, term in (("rd", f"r{x_}"), ("wr", f"rw{x_}")):
                    prev = sums.get((nm, p))
                    w(f"{nm}{p}_{t} = {f'{prev} + {term}' if prev else term}")
                    sums[(nm, p)] = f"{nm}{p}_{t}"
        stores = [(q, lv) for q in range(6) for lv in range(L) if HOLDS[lv, t] and not ((q == 4 and is_out) or (q == 5 and not is_out))]
        if stores:
            w("if full:")
            for q, lv in stores:
                x_ = f"{lv}_{t}"
                if q == 3:
                    v = f"e{x_} * {sc_of(t)}"
                elif q in (4, 5):
                    v = f"float(sp{x_} * ib{lv})"
                else:
                    v = f"float({('r', 'f', 'u')[q]}{x_} * ib{lv}) * {sc_of(t)}"
                w(f"    cnt[ci, {q}, {lv}, {t}] = {v}")
    for lv in range(L):
        w(f"rd{lv} = {sums.get(('rd', lv), '0')}")
        w(f"wr{lv} = {sums.get(('wr', lv), '0')}")
    # the energy total level by level, tensor by tensor, from 0.0 (the rules' order)
    w("total = " + " + ".join(["0.0"] + [f"e{lv}_{t}" for lv in range(L) for t in range(T)]))
    cyc = "float(mpu)"
    for lv in range(L):
        if rbwf[lv]:
            w(f"cyr{lv} = max({cyc}, rd{lv} / {rc('read_bw', lv)})")
            cyc = f"cyr{lv}"
        if wbwf[lv]:
            w(f"cyw{lv} = max({cyc}, wr{lv} / {rc('write_bw', lv)})")
            cyc = f"cyw{lv}"
    w(f"cf = float(math.ceil({cyc}))")
    w("energy0 = total + mac_e")
    for t in range(T):
        w(f"fr{t} = {rc('frac', t)}")
        w(f"if fr{t} < 1.0:")
        w(f"    before{t} = " + " + ".join(["0.0"] + [f"e{lv}_{t}" for lv in range(L)]))
        w(f"    after{t} = " + " + ".join(["0.0"] + [f"e{lv}_{t} * fr{t}" for lv in range(L)]))
        w(f"    energy{t + 1} = energy{t} + (after{t} - before{t})")
        w("else:")
        w(f"    energy{t + 1} = energy{t}")
    # The counts that are zero in every row of the structure (a level that never holds the
    # tensor, the output's multicast, an operand's spatial reduction: 48 of res2a_branch2b's
    # 90 on eyeriss-like; the others are stored after each tensor's walk, above) are written
    # only with ``full == 1``; ``full == 2`` says that they hold 0.0 already (an array this
    # structure's rows filled before, `_loopnest_kernel`'s marked counts buffers), and
    # leaves them.
    zs = [f"    cnt[ci, {q}, {lv}, {t}] = 0.0" for q in range(6) for lv in range(L) for t in range(T)
          if not HOLDS[lv, t] or (q == 4 and t == out) or (q == 5 and t != out)]
    if zs:
        w("if full == 1:")
        w.lines.extend(["    " * w.ind + z for z in zs])
    w("valid[iu] = True")
    w("res[iu, 0] = cf")
    w(f"res[iu, 1] = energy{T}")
    w("res[iu, 2] = mac_e")
    w("res[iu, 3] = macs / (n_macs * cf)")
    w.ind = 1
    w("return nbad")
    # the run-time constants the row reads, loaded once before the loop (`_RunConsts`)
    at = w.lines.index("    for i in range(lo, hi):")
    w.lines[at:at] = rc.lines
    return "\n".join(w.lines) + "\n"


def _flat(a: str, L: int, D: int, T: int, lv: int, k: int, xy: int = 0) -> str:
    """Entry ``[i, lv, k]`` (``[i, lv, k, xy]`` of ``spatial``) of a mapping array of row ``i``
    as an access of its flat view at a constant offset from the row's start (``ti``, ``si``,
    ``ki``, formed once a row). Indexed by all its dimensions, an access computes its offset
    from the array's shape, a run-time value, so the compiler keeps an offset per constant
    index across the row loop, in registers or spilled to the stack; flat, the offset is a
    constant in the instruction (the rows ran 0.97-0.98x the time, issue 14; tried before
    with numba's negative-index wrap-around still in every access, it changed nothing)."""
    if a == "t":
        return f"tflat[U(ti + {lv * D + k})]"
    if a == "o":
        return f"oflat[U(ti + {lv * D + k})]"
    if a == "s":
        return f"sflat[U(si + {(lv * D + k) * 2 + xy})]"
    return f"kflat[U(ki + {lv * T + k})]"


def _invalid_row(w: _Src, L: int, T: int) -> None:
    """The outputs of an illegal row (``why != 0``), and on to the next row."""
    w("nbad += 1")
    w("valid[iu] = False")
    w("res[iu, 0] = np.inf")
    w("res[iu, 1] = np.inf")
    w("res[iu, 2] = np.inf")
    w("res[iu, 3] = 0.0")
    w("if full:")
    w("    for q in range(6):")
    w(f"        for lv in range({L}):")
    w(f"            for t in range({T}):")
    w("                cnt[iu, q, lv, t] = 0.0")
    w("continue")


def _open_deliveries(w: _Src, x_: str, fp: str, t: int, c: int, spans: list[str], moving: list[int]) -> None:
    """Eq. D's slide walk (`_loopnest_rules.deliveries`) of tensor ``t`` into level ``c``
    written out, its result in ``fp``: the same classification of each active loop above ``c``
    (still, jump, or slide along one coordinate, forward or back) and the same words per step,
    with the coordinates' running shifts and spans in locals (``moving``: the coordinates
    some dim moves; the shift of any other stays 0, so it never moves). One loop, from the
    innermost active loop out, instead of the rule's two: the rule's total ``size + sum_j
    prefix_j (b_j - 1) new_j`` (``prefix_j`` the product of the bounds outside loop j) is
    formed by Horner's rule, ``R = (b_j - 1) new_j + b_j R``, an identity of integer sums and
    products, so the same int64 value; a step's words depend on the innermost loop's own
    class alone, which the walk from the inside out meets first. No scratch table is
    written (the rule keeps each loop's class in ``lp[5..8]`` for its second loop)."""
    for k, span in enumerate(spans):
        w(f"s{x_}_{k} = {span}")
    size = "1"
    for k in range(len(spans)):
        size = f"({size} * s{x_}_{k})"
    sz, R, j = f"sz{x_}", f"R{x_}", f"j{x_}"
    w(f"{sz} = {size}")
    w(f"{R} = 0")
    w(f"ik{x_}, iw{x_}, idr{x_} = 0, -1, 0")
    for cc in moving:
        w(f"h{x_}_{cc} = 0")
    w(f"{j} = kc{c} - 1")
    w(f"while {j} >= 0:")
    w.ind += 1
    w(f"dd{x_}, st{x_}, bj{x_} = lp[0, U({j})], lp[2, U({j})], lp[1, U({j})]")
    w(f"mv{x_}, wh{x_}, am{x_}, spw{x_} = 0, -1, 0, 1")
    for cc in moving:
        a, sv, h = f"a{x_}_{cc}", f"sv{x_}_{cc}", f"h{x_}_{cc}"
        w(f"{a} = COEF[{t}, {cc}, U(dd{x_})] * st{x_}")
        w(f"{sv} = {a} - {h}")
        w(f"{h} += {a}")
        w(f"if {sv} != 0:")
        w(f"    mv{x_}, wh{x_}, am{x_}, spw{x_} = mv{x_} + 1, {cc}, {sv}, s{x_}_{cc}")
    w(f"if mv{x_} == 0:")
    w(f"    kd{x_} = 0")
    w(f"elif mv{x_} == 1 and abs(am{x_}) < spw{x_}:")
    w(f"    kd{x_} = 2")
    w("else:")
    w(f"    kd{x_} = 1")
    w(f"dr{x_} = 1 if am{x_} > 0 else -1")
    w(f"if {j} == kc{c} - 1:")
    w(f"    ik{x_}, iw{x_}, idr{x_} = kd{x_}, wh{x_}, dr{x_}")
    w(f"if kd{x_} == 0:")
    w(f"    nw{x_} = 0")
    w(f"elif kd{x_} == 1 or (ik{x_} == 2 and (wh{x_} != iw{x_} or dr{x_} != idr{x_})):")
    w(f"    nw{x_} = {sz}")
    w("else:")
    w(f"    nw{x_} = abs(am{x_}) * ({sz} // spw{x_})")
    w(f"{R} = (bj{x_} - 1) * nw{x_} + bj{x_} * {R}")
    w(f"{j} -= 1")
    w.ind -= 1
    w(f"{fp} = {sz} + {R}")


def _legality(w: _Src, S: tuple, footprint, rc: _RunConsts) -> None:  # noqa: ANN001
    """Write the legality checks of `check` (FACTORS, ORDER, KEEP, FANOUT, CAPACITY: the first
    failing one in that order, each computed for every level), leaving ``why, where`` and the
    row's tiles, order and keep flags in locals. The temporal and spatial factors are not
    carried past the test: the row reads the few it needs later (the fanned levels' ``x * y``,
    the products of the levels without listed loops, the output's partial-sum extents) again
    from the mapping arrays where it uses them. Carried in locals, they were kept across the
    row's stores to the outputs and scratch (which the compiler cannot tell apart from the
    mapping arrays) in spilled stack slots: reading them again cut the row function from 4,036
    to 3,797 instructions and from 1,296 to 1,150 stack references (res2a_branch2b on
    eyeriss-like), and the rows ran 0.92-0.97x the time (issue 14). The loop order and keep
    flags read so too ran 1.03-1.05x the time of this, so they stay in locals.

    Written with few branches, since numba's passes (SSA reconstruction, lowering) cost about
    the number of blocks times the number of variables: the tests combined with ``|`` of
    booleans (a short-circuit ``or`` is a branch, so a block), a kept tensor's footprint
    multiplied by its keep flag, the least factor's test as the sign of an OR, the first
    failing check found from a mask of the tests (one branch for a legal row) instead of a
    chain of ``elif``. Each value is loaded where it is first used, as before (loading every
    value first made the rows 1.4x slower: register pressure). A level without a fanout takes
    spatial factors of 1 in every legal mapping: tested at once (an OR of XORs), after which
    its spatial factors take no part in the tiles or fanouts; a row that fails that test is
    checked by the rule itself (`_loopnest_rules.check_one`, compiled once for every
    structure), and is illegal short of int64 wraparound, so it ends there (see below)."""
    L, D, T, C, M, nterm, tdim, tcoef, coef, holds, closed, rel, block, out, capf, rbwf, wbwf, fanl, digest = S
    HOLDS = np.array(holds, dtype=bool).reshape(L, T)
    FANL = [bool(x) for x in fanl]
    nonfan = [lv for lv in range(L) if not FANL[lv]]

    def loads() -> None:
        for lv in range(L):
            for d in range(D):
                w(f"t{lv}_{d} = tile[{lv}, {d}]")
        for lv in range(L):
            for j in range(D):
                w(f"o{lv}_{j} = {_flat('o', L, D, T, lv, j)}")
        for lv in range(L):
            for t in range(T):
                w(f"k{lv}_{t} = {_flat('k', L, D, T, lv, t)}")

    if nonfan:
        w("ones = " + " | ".join(f"({_flat('s', L, D, T, lv, d, 0)} ^ 1) | ({_flat('s', L, D, T, lv, d, 1)} ^ 1)"
                                 for lv in nonfan for d in range(D)))
    else:
        w("ones = 0")
    # Every bound at least 1 (as every problem's are): then the least-factor test below needs
    # only the factors' signs (``bpos``, a run-time constant; without it every row takes the
    # rule's check, `check_one`, below).
    bpos = " & ".join(f"({rc('bounds', d)} >= 1)" for d in range(D))
    rc.lines.append(f"    bpos = {bpos}")
    w("if (ones == 0) & bpos:")
    w.ind += 1
    terms = []
    for d in range(D):
        prev = "1"
        for lv in range(L - 1, -1, -1):
            w(f"a{lv}_{d} = {_flat('t', L, D, T, lv, d)}")
            if FANL[lv]:
                w(f"x{lv}_{d} = {_flat('s', L, D, T, lv, d, 0)}")
                w(f"y{lv}_{d} = {_flat('s', L, D, T, lv, d, 1)}")
                w(f"t{lv}_{d} = {prev} * a{lv}_{d} * x{lv}_{d} * y{lv}_{d}")
                terms += [f"a{lv}_{d}", f"x{lv}_{d}", f"y{lv}_{d}"]
            else:
                w(f"t{lv}_{d} = {prev} * a{lv}_{d}")
                terms += [f"a{lv}_{d}"]
            prev = f"t{lv}_{d}"
    # A factor below 1 (`check`'s least factor < 1) with every bound at least 1 (``bpos``):
    # the OR of the factors is negative exactly when one is negative, and a zero factor makes
    # its dim's product of factors (``t0_d``, a product in int64 with that factor in it) 0,
    # which differs from the dim's bound, so the row fails FACTORS exactly as under the rule
    # (the same check, so the same code and level). A negative factor fails through the sign.
    w("lo_f = " + _or(terms))
    w("bad_f = " + _or(["(lo_f < 0)"] + [f"(t0_{d} != {rc('bounds', d)})" for d in range(D)]))
    for lv in range(L):
        if not FANL[lv]:
            w(f"bad_n{lv} = (1 > {rc('fan_xy', lv, 0)}) | (1 > {rc('fan_xy', lv, 1)})")
        else:
            ux = _prod([f"x{lv}_{d}" for d in range(D)])
            uy = _prod([f"y{lv}_{d}" for d in range(D)])
            w(f"bad_n{lv} = ({ux} > {rc('fan_xy', lv, 0)}) | ({uy} > {rc('fan_xy', lv, 1)})")
    # ORDER: the bits of a level's dims (mod 64) are all of 0..D-1 and no dim has a bit above
    # 5 set (a negative one, or one >= 64); a dim in D..63 sets a bit above D-1. So the seen
    # mask is all of 0..D-1 exactly when the order is a permutation (`check`'s test).
    for lv in range(L):
        for j in range(D):
            w(f"o{lv}_{j} = {_flat('o', L, D, T, lv, j)}")
        seen = _or([f"(1 << (o{lv}_{j} & 63))" for j in range(D)])
        high = _or([f"o{lv}_{j}" for j in range(D)])
        w(f"bad_o{lv} = (({seen}) != {(1 << D) - 1}) | ((({high}) >> 6) != 0)")
    for lv in range(L):
        ks = []
        for t in range(T):
            w(f"k{lv}_{t} = {_flat('k', L, D, T, lv, t)}")
            if lv == 0:
                if HOLDS[0, t]:
                    ks.append(f"(not k0_{t})")
                else:
                    ks.append("True")
            elif not HOLDS[lv, t]:
                ks.append(f"k{lv}_{t}")
        w(f"bad_k{lv} = " + (" | ".join(ks) if ks else "False"))
    for lv in range(L):
        if not capf[lv]:
            continue
        need = "0"
        for t in range(T):
            if HOLDS[lv, t]:
                need = f"({need} + {footprint(t, f't{lv}_')} * k{lv}_{t})"
        w(f"bad_c{lv} = {need} > {rc('capacity', lv)}")
    chain = [("bad_f", 2, -1)] + [(f"bad_o{lv}", 3, lv) for lv in range(L)] + [(f"bad_k{lv}", 4, lv) for lv in range(L)]
    chain += [(f"bad_n{lv}", 5, lv) for lv in range(L)] + [(f"bad_c{lv}", 6, lv) for lv in range(L) if capf[lv]]
    w("bad = " + _or([f"({cond} * {1 << k})" for k, (cond, _, _) in enumerate(chain)]))
    w("if bad == 0:")
    w("    why, where = 0, -1")
    w("else:")
    w("    first = 0")
    w("    while not ((bad >> first) & 1):")
    w("        first += 1")
    w(f"    why, where = {tuple(c for _, c, _ in chain)!r}[first], {tuple(v for _, _, v in chain)!r}[first]")
    w.ind -= 1
    w("else:")
    w.ind += 1
    w("why, where = check_one(i, temporal, spatial, order, keep, NTERM, TDIM, TCOEF, bounds, HOLDS, fan_xy, "
      "capacity, tile, spans)")
    # A row with a spatial factor other than 1 at a level without fanout is illegal short of
    # int64 wraparound: a spatial factor below 1 fails FACTORS; otherwise some factor x >= 2
    # of a level whose fanout X * Y <= 1 makes that level's used X (or Y) instances at least
    # 2, more than its X (Y) fanout unless that is >= 2, and then the other is <= 0, below the
    # at least 1 used (FANOUT). So it ends here (``why != 0``). A row that passes (one whose
    # products wrap around, or any legal row when a bound is below 1) takes the row's values
    # from the arrays and the tiles ``check_one`` left.
    w("if why != 0:")
    w.ind += 1
    w("codes[iu, 0] = why")
    w("codes[iu, 1] = where")
    _invalid_row(w, L, T)
    w.ind -= 1
    loads()
    w.ind -= 1


def supports(S: tuple) -> bool:
    """Whether `source` writes this structure's rows: every coordinate of at most two terms
    (wider ones need `distinct`'s enumeration; `_loopnest_cpu`'s driver serves them)."""
    L, D, T, C, M = S[:5]
    return M <= 2 and D < 63


@functools.lru_cache(maxsize=32)
def driver(S: tuple):  # noqa: ANN201 (a numba dispatcher)
    """The generated driver of structure ``S``: written to `cache_dir` (once; the file name is
    the digest of its source) and imported from there, so numba's on-disk cache keys it by
    that file."""
    src = source(S)
    key = hashlib.sha256(src.encode()).hexdigest()[:20]
    name = f"accelmap_loopnest_rows_{key}"
    path = cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != src:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(src)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the generated loopnest rows from {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.rows
