"""The CPU engine of the ``loopnest`` model, row-blocked: the counting rule over blocks of rows.

`accelmap.costmodels._loopnest_cpu` evaluates one mapping after the other: every step
branches on that mapping's data (which loops are active, which levels keep a tensor, how a
loop's step moves a tile), so a core runs it one row at a time. This module runs the same
steps over a *block* of rows (``B`` of them, stored structure-of-arrays: one contiguous run
of ``B`` values per quantity, in one scratch array) so that each step is a loop over the
rows of the block without data-dependent branches, which LLVM turns into SIMD code (4 int64
lanes with AVX2, 8 with AVX-512):

* *whether* a row takes a branch becomes a select between values both computed; a level
  that does not keep a tensor, or a loop of bound 1, is a mask, not a skipped iteration;
* the loops of a level are visited in each row's own order by keeping every loop slot
  (level, position) in place instead of compacting the active ones (bound >= 2) as the
  row-at-a-time code does: a slot of bound 1 adds ``(1 - 1) x new = 0`` to eq. D, leaves
  every running product unchanged, and is skipped by the masks that find "the innermost
  active loop";
* the per-row gathers (a loop's dim, bound and stride from the row's order) run in a
  scalar pass that also transposes the block into the scratch;
* integer divisions (Timeloop's box difference ``size // span`` becomes the product of the
  other spans, which is the same integer) are avoided in vector loops; the gcd of eq. S
  runs in a scalar pass over the rows that need it (both dims of a coordinate unrolled).

Integer results are the same integers; the float operations are those of the
row-at-a-time code, applied to the same operands in the same order, without fast-math or
reassociation, so every output equals `_loopnest_cpu`'s bit for bit (checked on legal and
sampled MapSpace rows of res2a_branch2b on eyeriss-like, with and without counts, and by
`benchmarks/bench_loopnest_blocked.py`). Rows that fail the legality check are computed
with their garbage values (no trap can occur: no integer division in the vector passes,
float division by zero gives inf under numba's numpy error model) and then overwritten.

Measured (docs/performance.md, "Compiled kernels"): slower than the row-at-a-time driver
(624 against 443 ns per legal row, best of 15) and 73 s to compile per structure; so it is
not used. The copy into the scratch alone costs 140 ns per row, and keeping every loop
slot in place does about twice the compacted list's work in eq. D.

Like `_loopnest_cpu`, the kernel is specialised per structure (the same tuple,
`_loopnest_cpu.structure`: shapes, sparse coefficients, holds, blocks, which levels have a
capacity, a bandwidth limit or a fanout are compile-time constants) so that the short
loops over levels, dims, tensors and coordinates unroll around the vectorised loop over
rows; bounds, capacities, energies and bandwidths are run-time arrays.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, types

__all__ = ["BLOCK_ROWS", "driver", "scratch_sizes"]

_FACTORS, _ORDER, _KEEP, _FANOUT, _CAPACITY = 2, 3, 4, 5, 6
_READS, _FILLS, _UPDATES, _ENERGY, _MCAST, _SRED = 0, 1, 2, 3, 4, 5
_CYCLES, _ENERGY_PJ, _COMPUTE_PJ, _UTIL = 0, 1, 2, 3

# Rows per block: the scratch of one block (about 430 int64 and 90 float64 runs of B values
# on a 5-level conv2d) stays in a core's L2 cache.
BLOCK_ROWS = 128

# A run of B values is stored every B + _PAD values: with B a power of two every run would
# start at the same offset modulo 4 KiB, so that the dozens of runs one loop touches would
# compete for the same few sets of the L1 cache (measured: the transposing pass ran 3.4x
# slower at a stride of 128 than at 136).
_PAD = 8

_JIT = {"cache": True, "_nrt": False, "error_model": "numpy", "nogil": True}


def _layout(S: tuple) -> tuple[dict[str, int], int, int]:
    """Offsets (in runs of B values) of the int64 and float64 scratch quantities."""
    L, D, T, C = S[0], S[1], S[2], S[3]
    LD, LT = L * D, L * T
    sizes = (("A", LD), ("X", LD), ("Y", LD), ("G", LD), ("TILE", (L + 1) * D), ("KP", LT), ("SB", LD),
             ("SS", LD), ("SD", LD), ("OBAD", L), ("CODE", 1), ("CLV", 1), ("UB", L), ("IB", L), ("RD", L),
             ("WR", L), ("MPU", 1), ("F", L), ("SP", C), ("OP", C), ("SH", C), ("NEW", LD), ("SL", LD),
             ("KEY", LD), ("FOUND", 1), ("ISL", 1), ("IKEY", 1), ("TOT", 1), ("PRE", 1), ("DIS", L), ("FIX", 1),
             ("R", LT), ("FL", LT), ("U", LT), ("MS", LT))
    off, k = {}, 0
    for name, n in sizes:
        off[name] = k
        k += n
    return off, k, LT + 2


def scratch_sizes(S: tuple) -> tuple[int, int]:
    """(int64 runs, float64 runs) of one block's scratch, each run B values long."""
    _, ni, nf = _layout(S)
    return ni, nf


# The per-tensor steps are inlined once per tensor with its index a literal, so that every
# look-up of the structure by tensor folds to a constant inside the loops over rows.
MAX_TENSORS = 4


@functools.lru_cache(maxsize=32)
def driver(S: tuple, B: int = BLOCK_ROWS):  # noqa: ANN201, C901, PLR0915 (a numba dispatcher; one kernel)
    """The row-blocked driver of one structure: ``rows(lo, hi, full, mp, rt, out, W, WF, buf)``
    fills rows lo..hi-1 of the outputs (as `_loopnest_cpu`'s driver) with ``W`` (int64) and
    ``WF`` (float64) one block's scratch (`scratch_sizes` runs of ``B``) and ``buf`` the
    enumeration buffer of eq. S for coordinates of three or more terms."""
    L, D, T, C, M, NTERM, TDIM, TCOEF, COEF, HOLDS, CLOSED, REL, BLOCK, OUT, CAPF, RBWF, WBWF, FANL = S
    if T > MAX_TENSORS:
        raise ValueError(f"the row-blocked loopnest kernel takes at most {MAX_TENSORS} tensors, got {T}")
    off, _, _ = _layout(S)
    BS = B + _PAD  # the stride of a run: see `_PAD`
    oA, oX, oY, oG, oTI, oKP = (off[k] * BS for k in ("A", "X", "Y", "G", "TILE", "KP"))
    oSB, oSS, oSD, oOBAD, oCODE, oCLV = (off[k] * BS for k in ("SB", "SS", "SD", "OBAD", "CODE", "CLV"))
    oUB, oIB, oRD, oWR, oMPU, oF = (off[k] * BS for k in ("UB", "IB", "RD", "WR", "MPU", "F"))
    oSP, oOP, oSH, oNEW, oSL, oKEY = (off[k] * BS for k in ("SP", "OP", "SH", "NEW", "SL", "KEY"))
    oFOUND, oISL, oIKEY, oTOT, oPRE, oDIS, oFIX = (off[k] * BS for k in ("FOUND", "ISL", "IKEY", "TOT", "PRE", "DIS",
                                                                         "FIX"))
    oR, oFL, oU, oMS = (off[k] * BS for k in ("R", "FL", "U", "MS"))
    oEN, oCYC = L * T * BS, (L * T + 1) * BS  # float scratch: energy per (level, tensor); total; cycles
    LD = L * D
    # Per tensor: a coordinate of two or more terms (eq. S may need the gcd or an enumeration).
    MULTI = tuple(any(NTERM[t * C + cc] >= 2 for cc in range(C)) for t in range(T))

    @njit(inline="always", **_JIT)  # type: ignore[call-overload]
    def U(k):
        # Scratch indexes as unsigned: numba then emits no negative-index wraparound, whose
        # select hides the affine address from LLVM's vectoriser.
        return types.uint64(k)

    @njit(inline="always", **_JIT)  # type: ignore[call-overload]
    def cblk(words, p):
        # `_loopnest_kernel.ceil_blocks` with the block a constant.
        block = BLOCK[p]
        if block == 1:
            return float(words)
        if block & (block - 1) == 0:
            return math.ceil(words * (1.0 / block))
        return math.ceil(words / block)

    @njit(inline="always", **_JIT)  # type: ignore[call-overload]
    def fp(W, t, o, r):
        # `Problem.footprint` of tensor t over the extents at ``W[o + d * BS + r]``.
        size = 1
        for cc in range(C):
            sp = 1
            for k in range(NTERM[t * C + cc]):
                sp += TCOEF[(t * C + cc) * M + k] * (W[U(o + TDIM[(t * C + cc) * M + k] * BS + r)] - 1)
            size *= sp
        return size

    @njit(inline="always", **_JIT)  # type: ignore[call-overload]
    def enumerate_distinct(t, cc, lv, r, W, buf):
        # `_loopnest_kernel.distinct` for one coordinate of three or more terms.
        base_k = (t * C + cc) * M
        nt, k1, k2 = 0, -1, -1
        for k in range(NTERM[t * C + cc]):
            if W[U(oG + (lv * D + TDIM[base_k + k]) * BS + r)] > 1:
                nt += 1
                if k1 < 0:
                    k1 = k
                elif k2 < 0:
                    k2 = k
        if nt == 0:
            return 1
        if nt == 1:
            return W[U(oG + (lv * D + TDIM[base_k + k1]) * BS + r)]
        if nt == 2:
            d1, d2 = TDIM[base_k + k1], TDIM[base_k + k2]
            n1 = W[U(oG + (lv * D + d1) * BS + r)]
            n2 = W[U(oG + (lv * D + d2) * BS + r)]
            a = TCOEF[base_k + k1] * W[U(oTI + ((lv + 1) * D + d1) * BS + r)]
            b = TCOEF[base_k + k2] * W[U(oTI + ((lv + 1) * D + d2) * BS + r)]
            x, y = a, b
            while y:
                x, y = y, x % y
            return n1 * n2 - max(n1 - b // x, 0) * max(n2 - a // x, 0)
        m = 1
        for k in range(NTERM[t * C + cc]):
            m *= W[U(oG + (lv * D + TDIM[base_k + k]) * BS + r)]
        for ii in range(m):
            rem, v = ii, 0
            for k in range(NTERM[t * C + cc]):
                d = TDIM[base_k + k]
                gd = W[U(oG + (lv * D + d) * BS + r)]
                v += TCOEF[base_k + k] * W[U(oTI + ((lv + 1) * D + d) * BS + r)] * (rem % gd)
                rem //= gd
            buf[ii] = v
        for ii in range(1, m):
            v, j = buf[ii], ii - 1
            while j >= 0 and buf[j] > v:
                buf[j + 1] = buf[j]
                j -= 1
            buf[j + 1] = v
        u = 1
        for ii in range(1, m):
            if buf[ii] != buf[ii - 1]:
                u += 1
        return u

    @njit(inline="always", **_JIT)  # type: ignore[call-overload]
    def tensor(t, nb, W, WF, buf, tensor_size, read_pj, write_pj):
        """Eq. D, eq. S and the counts of tensor t (a literal) for the rows of the block."""
        if CLOSED[t]:
            # F_c = |tile_c| x (product of the bounds of the loops down to the innermost
            # active loop above c of a relevant dim)
            for r in range(nb):
                prod, last = 1, 1
                for c in range(1, L):
                    for s in range((c - 1) * D, c * D):
                        b = W[U(oSB + s * BS + r)]
                        prod *= b
                        d = W[U(oSD + s * BS + r)]
                        hit = False
                        for dd in range(D):
                            if REL[t * D + dd]:
                                hit = hit | (d == dd)
                        last = prod if hit and b >= 2 else last
                    if HOLDS[c * T + t]:
                        W[U(oF + c * BS + r)] = fp(W, t, oTI + c * D * BS, r) * last
        else:
            for c in range(1, L):
                if not HOLDS[c * T + t]:
                    continue
                # the spans of the tile, their product and, per coordinate, the product of
                # the others (Timeloop's ``size // span`` without a division)
                for r in range(nb):
                    size = 1
                    for cc in range(C):
                        sp = 1
                        for k in range(NTERM[t * C + cc]):
                            sp += TCOEF[(t * C + cc) * M + k] * (W[U(oTI + (c * D + TDIM[(t * C + cc) * M + k]) * BS + r)] - 1)
                        W[U(oSP + cc * BS + r)] = sp
                        W[U(oSH + cc * BS + r)] = 0
                        size *= sp
                    for cc in range(C):
                        o = 1
                        for c2 in range(C):
                            if c2 != cc:
                                o *= W[U(oSP + c2 * BS + r)]
                        W[U(oOP + cc * BS + r)] = o
                    W[U(oF + c * BS + r)] = size
                    W[U(oFOUND + r)] = 0
                    W[U(oISL + r)] = 0
                    W[U(oIKEY + r)] = 0
                    W[U(oTOT + r)] = size
                    W[U(oPRE + r)] = 1
                # innermost slot first: each loop's step (its dim forward, the inner loops
                # back to their start), still / jump / slide, and the innermost active one
                for s in range(c * D - 1, -1, -1):
                    for r in range(nb):
                        size = W[U(oF + c * BS + r)]
                        d = W[U(oSD + s * BS + r)]
                        act = W[U(oSB + s * BS + r)] >= 2
                        st = W[U(oSS + s * BS + r)]
                        moved, which, amount = 0, 0, 0
                        for cc in range(C):
                            cf = 0
                            for k in range(NTERM[t * C + cc]):
                                cf += (d == TDIM[(t * C + cc) * M + k]) * TCOEF[(t * C + cc) * M + k]
                            a = cf * st if act else 0
                            sh = W[U(oSH + cc * BS + r)]
                            sd = a - sh
                            W[U(oSH + cc * BS + r)] = sh + a
                            nz = sd != 0
                            moved += nz
                            which = cc if nz else which
                            amount = sd if nz else amount
                        spw, opw = 1, 1
                        for cc in range(C):
                            spw = W[U(oSP + cc * BS + r)] if which == cc else spw
                            opw = W[U(oOP + cc * BS + r)] if which == cc else opw
                        mag = abs(amount)
                        slide = (moved == 1) & (mag < spw)
                        key = which * 2 + (amount > 0)
                        new = mag * opw if slide else (0 if moved == 0 else size)
                        W[U(oNEW + s * BS + r)] = new
                        W[U(oSL + s * BS + r)] = slide
                        W[U(oKEY + s * BS + r)] = key
                        found = W[U(oFOUND + r)] != 0
                        first = act & (not found)
                        W[U(oISL + r)] = slide if first else W[U(oISL + r)]
                        W[U(oIKEY + r)] = key if first else W[U(oIKEY + r)]
                        W[U(oFOUND + r)] = found | act
                # outermost first: F_c = |tile| + sum_j (prod_{i<j} n_i) (n_j - 1) new_j, a
                # slide reloading the tile when the innermost loop slides another way
                for s in range(c * D):
                    for r in range(nb):
                        b = W[U(oSB + s * BS + r)]
                        reset = (W[U(oISL + r)] != 0) & (W[U(oSL + s * BS + r)] != 0) & (W[U(oKEY + s * BS + r)] != W[U(oIKEY + r)])
                        new = W[U(oF + c * BS + r)] if reset else W[U(oNEW + s * BS + r)]
                        pre = W[U(oPRE + r)]
                        W[U(oTOT + r)] += pre * (b - 1) * new
                        W[U(oPRE + r)] = pre * b
                for r in range(nb):
                    W[U(oF + c * BS + r)] = W[U(oTOT + r)]
        # eq. S per fanout level: the product over coordinates; where two dims of one
        # coordinate are unrolled (or three or more terms) a scalar pass counts exactly
        for lv in range(L):
            if not FANL[lv]:
                continue
            for r in range(nb):
                count, fix = 1, False
                for cc in range(C):
                    nt = NTERM[t * C + cc]
                    if nt == 1:
                        count *= W[U(oG + (lv * D + TDIM[(t * C + cc) * M]) * BS + r)]
                    elif nt == 2:
                        n1 = W[U(oG + (lv * D + TDIM[(t * C + cc) * M]) * BS + r)]
                        n2 = W[U(oG + (lv * D + TDIM[(t * C + cc) * M + 1]) * BS + r)]
                        count *= n1 * n2
                        fix = fix | ((n1 > 1) & (n2 > 1))
                    elif nt >= 3:
                        fix = True
                W[U(oDIS + lv * BS + r)] = count
                W[U(oFIX + r)] = fix
            if MULTI[t]:
                for r in range(nb):
                    if W[U(oFIX + r)] == 0 or W[U(oCODE + r)] != 0:
                        continue
                    count = 1
                    for cc in range(C):
                        nt = NTERM[t * C + cc]
                        if nt == 1:
                            count *= W[U(oG + (lv * D + TDIM[(t * C + cc) * M]) * BS + r)]
                        elif nt >= 2:
                            count *= enumerate_distinct(t, cc, lv, r, W, buf)
                    W[U(oDIS + lv * BS + r)] = count
        # each keeper p of t, from the innermost up, takes the deliveries of the next inner
        # keeper (or the MACs) times the distinct groups of the levels between; its energy
        for r in range(nb):
            f_child = W[U(oMPU + r)]
            groups, children = 1, 1
            for p in range(L - 1, -1, -1):
                if FANL[p]:
                    groups *= W[U(oDIS + p * BS + r)]
                    children *= W[U(oUB + p * BS + r)]
                if not HOLDS[p * T + t]:
                    continue
                kp = W[U(oKP + (p * T + t) * BS + r)] != 0
                a_p = f_child * groups
                f_p = W[U(oF + p * BS + r)] if p > 0 else tensor_size[t]
                ip = W[U(oIB + p * BS + r)]
                if t == OUT:
                    size = 1
                    for cc in range(C):
                        sp = 1
                        for k in range(NTERM[t * C + cc]):
                            d = TDIM[(t * C + cc) * M + k]
                            w = W[U(oTI + (p * D + d) * BS + r)]
                            for lv in range(p):
                                w *= W[U(oA + (lv * D + d) * BS + r)]
                            sp += TCOEF[(t * C + cc) * M + k] * (w - 1)
                        size *= sp
                    rv, fv, uv = a_p - size, (f_p - size if p > 0 else 0), a_p
                else:
                    rv, fv, uv = a_p, (f_p if p > 0 else 0), 0
                rv = rv if kp else 0
                fv = fv if kp else 0
                uv = uv if kp else 0
                q = (p * T + t) * BS + r
                W[U(oR + q)] = rv
                W[U(oFL + q)] = fv
                W[U(oU + q)] = uv
                W[U(oMS + q)] = (f_child * children - a_p) * ip if kp else 0
                W[U(oRD + p * BS + r)] += rv
                W[U(oWR + p * BS + r)] += fv + uv
                e = cblk(rv, p) * read_pj[p]
                if t == OUT and p > 0:
                    e += (cblk(fv, p) + cblk(uv, p)) * write_pj[p]
                elif t == OUT:
                    e += cblk(uv, p) * write_pj[p]
                elif p > 0:
                    e += cblk(fv, p) * write_pj[p]
                WF[U(q)] = e * ip if kp else 0.0
                f_child = f_p if kp else f_child
                groups = 1 if kp else groups
                children = 1 if kp else children

    @njit(**_JIT)  # type: ignore[call-overload]
    def rows(lo, hi, full, mp, rt, out, W, WF, buf):
        temporal, spatial, order, keep = mp
        bounds, fan_xy, capacity, read_pj, write_pj, read_bw, write_bw, tensor_size, scal, frac = rt
        res, valid, codes, cnt = out
        macs, n_macs, mac_pj = scal[0], scal[1], scal[2]
        for base in range(lo, hi, B):
            nb = min(B, hi - base)
            # --- 1. scalar pass: transpose the block; the tiles; each loop slot's dim, bound
            # and stride in the row's own order (gathers do not vectorise); ORDER ---
            for r in range(nb):
                i = base + r
                for d in range(D):
                    W[U(oTI + (L * D + d) * BS + r)] = 1
                for lv in range(L - 1, -1, -1):
                    for d in range(D):
                        a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
                        W[U(oA + (lv * D + d) * BS + r)] = a
                        W[U(oX + (lv * D + d) * BS + r)] = x
                        W[U(oY + (lv * D + d) * BS + r)] = y
                        W[U(oTI + (lv * D + d) * BS + r)] = W[U(oTI + ((lv + 1) * D + d) * BS + r)] * a * x * y
                for lv in range(L):
                    for t in range(T):
                        W[U(oKP + (lv * T + t) * BS + r)] = 1 if keep[i, lv, t] else 0
                for lv in range(L):
                    seen = 0
                    for j in range(D):
                        d = order[i, lv, j]
                        if d < 0 or d >= D:
                            seen |= 1 << D
                            d = 0  # an illegal order (the row fails ORDER): any dim keeps the reads in bounds
                        else:
                            seen |= 1 << d
                        s = lv * D + j
                        W[U(oSD + s * BS + r)] = d
                        W[U(oSB + s * BS + r)] = temporal[i, lv, d]
                        st = W[U(oTI + ((lv + 1) * D + d) * BS + r)]
                        if FANL[lv]:
                            st *= spatial[i, lv, d, 0] * spatial[i, lv, d, 1]
                        W[U(oSS + s * BS + r)] = st
                    W[U(oOBAD + lv * BS + r)] = seen != (1 << D) - 1
            # --- 2. legality (`check_row`: the first failing check in `Reason` order), as
            # masks: the checks from the last to the first, each overriding ---
            for r in range(nb):
                code, clv = 0, -1
                for lv in range(L - 1, -1, -1):
                    if CAPF[lv]:
                        need = 0
                        for t in range(T):
                            if HOLDS[lv * T + t]:
                                need += fp(W, t, oTI + lv * D * BS, r) * W[U(oKP + (lv * T + t) * BS + r)]
                        bad = need > capacity[lv]
                        code = _CAPACITY if bad else code
                        clv = lv if bad else clv
                for lv in range(L - 1, -1, -1):
                    ux, uy = 1, 1
                    for d in range(D):
                        ux *= W[U(oX + (lv * D + d) * BS + r)]
                        uy *= W[U(oY + (lv * D + d) * BS + r)]
                    bad = (ux > fan_xy[lv, 0]) | (uy > fan_xy[lv, 1])
                    code = _FANOUT if bad else code
                    clv = lv if bad else clv
                for lv in range(L - 1, -1, -1):
                    bad = False
                    for t in range(T):
                        kp = W[U(oKP + (lv * T + t) * BS + r)] != 0
                        if not HOLDS[lv * T + t]:
                            bad = bad | kp
                        if lv == 0:
                            bad = bad | (not kp)
                    code = _KEEP if bad else code
                    clv = lv if bad else clv
                for lv in range(L - 1, -1, -1):
                    bad = W[U(oOBAD + lv * BS + r)] != 0
                    code = _ORDER if bad else code
                    clv = lv if bad else clv
                bad = False
                for lv in range(L):
                    for d in range(D):
                        bad = bad | (W[U(oA + (lv * D + d) * BS + r)] < 1) | (W[U(oX + (lv * D + d) * BS + r)] < 1) | (W[U(oY + (lv * D + d) * BS + r)] < 1)
                for d in range(D):
                    bad = bad | (W[U(oTI + d * BS + r)] != bounds[d])
                W[U(oCODE + r)] = _FACTORS if bad else code
                W[U(oCLV + r)] = -1 if bad else clv
            # --- 3. the loop nest: spatial factors, instances, MACs per PE ---
            for r in range(nb):
                ib = 1
                for lv in range(L):
                    ub = 1
                    if FANL[lv]:
                        for d in range(D):
                            gv = W[U(oX + (lv * D + d) * BS + r)] * W[U(oY + (lv * D + d) * BS + r)]
                            W[U(oG + (lv * D + d) * BS + r)] = gv
                            ub *= gv
                    W[U(oUB + lv * BS + r)] = ub
                    W[U(oIB + lv * BS + r)] = ib
                    ib *= ub
                    W[U(oRD + lv * BS + r)] = 0
                    W[U(oWR + lv * BS + r)] = 0
                prod = 1
                for s in range(LD):
                    prod *= W[U(oSB + s * BS + r)]
                W[U(oMPU + r)] = prod
            # --- 4. per tensor: deliveries (eq. D), distinct offsets (eq. S), counts, energy ---
            tensor(0, nb, W, WF, buf, tensor_size, read_pj, write_pj)
            if T > 1:
                tensor(1, nb, W, WF, buf, tensor_size, read_pj, write_pj)
            if T > 2:
                tensor(2, nb, W, WF, buf, tensor_size, read_pj, write_pj)
            if T > 3:
                tensor(3, nb, W, WF, buf, tensor_size, read_pj, write_pj)
            # --- 5. totals, latency, padding (in the order of the row-at-a-time code) ---
            for r in range(nb):
                total = 0.0
                for lv in range(L):
                    for t in range(T):
                        total += WF[U((lv * T + t) * BS + r)] if HOLDS[lv * T + t] else 0.0
                cyc = float(W[U(oMPU + r)])
                for lv in range(L):
                    if RBWF[lv]:
                        cyc = max(cyc, W[U(oRD + lv * BS + r)] / read_bw[lv])
                    if WBWF[lv]:
                        cyc = max(cyc, W[U(oWR + lv * BS + r)] / write_bw[lv])
                WF[U(oCYC + r)] = float(math.ceil(cyc))
                WF[U(oEN + r)] = total + macs * mac_pj
            for t in range(T):
                fr = frac[t]
                if fr < 1.0:
                    for r in range(nb):
                        before, after = 0.0, 0.0
                        for lv in range(L):
                            if HOLDS[lv * T + t]:
                                e0 = WF[U((lv * T + t) * BS + r)]
                                before += e0
                                e1 = e0 * fr
                                after += e1
                                WF[U((lv * T + t) * BS + r)] = e1
                            else:
                                before += 0.0
                                after += 0.0
                        WF[U(oEN + r)] += after - before
            # --- 6. the outputs ---
            for r in range(nb):
                i = base + r
                code = W[U(oCODE + r)]
                codes[i, 0] = code
                codes[i, 1] = W[U(oCLV + r)]
                if code != 0:
                    valid[i] = False
                    res[i, _CYCLES] = np.inf
                    res[i, _ENERGY_PJ] = np.inf
                    res[i, _COMPUTE_PJ] = np.inf
                    res[i, _UTIL] = 0.0
                    if full:
                        for q in range(6):
                            for lv in range(L):
                                for t in range(T):
                                    cnt[i, q, lv, t] = 0.0
                    continue
                cf = WF[U(oCYC + r)]
                valid[i] = True
                res[i, _CYCLES] = cf
                res[i, _ENERGY_PJ] = WF[U(oEN + r)]
                res[i, _COMPUTE_PJ] = macs * mac_pj
                res[i, _UTIL] = macs / (n_macs * cf)
                if full:
                    for lv in range(L):
                        ip = W[U(oIB + lv * BS + r)]
                        for t in range(T):
                            if not HOLDS[lv * T + t]:
                                for q in range(6):
                                    cnt[i, q, lv, t] = 0.0
                                continue
                            q = (lv * T + t) * BS + r
                            fr = frac[t]
                            rd = float(W[U(oR + q)] * ip)
                            fl = float(W[U(oFL + q)] * ip)
                            up = float(W[U(oU + q)] * ip)
                            if fr < 1.0:
                                rd *= fr
                                fl *= fr
                                up *= fr
                            cnt[i, _READS, lv, t] = rd
                            cnt[i, _FILLS, lv, t] = fl
                            cnt[i, _UPDATES, lv, t] = up
                            cnt[i, _ENERGY, lv, t] = WF[U(q)]
                            ms = float(W[U(oMS + q)])
                            cnt[i, _MCAST, lv, t] = 0.0 if t == OUT else ms
                            cnt[i, _SRED, lv, t] = ms if t == OUT else 0.0

    return rows


def evaluate_rows(consts, temporal, spatial, order, keep, frac, res, valid, codes, cnt, full: bool,  # noqa: ANN001
                  lo: int = 0, hi: int | None = None) -> None:
    """Rows lo..hi-1 (default: all) on the calling thread, as `_loopnest_cpu.evaluate_rows`
    does for one block (``cnt`` (n, 6, L, T) when ``full``, else any (1, 6, L, T) array)."""
    S = consts.structure
    rows = driver(S)
    ni, nf = scratch_sizes(S)
    W = np.empty(ni * (BLOCK_ROWS + _PAD), np.int64)
    WF = np.empty(nf * (BLOCK_ROWS + _PAD), np.float64)
    buf = np.empty(max(int(consts.ints[1]), 1), np.int64)
    c = consts
    hi = temporal.shape[0] if hi is None else hi
    rows(lo, hi, full, (temporal, spatial, order, keep),
         (c.bounds, c.fan_xy, c.capacity, c.read_pj, c.write_pj, c.read_bw, c.write_bw, c.tensor_size, c.scal, frac),
         (res, valid, codes, cnt), W, WF, buf)
