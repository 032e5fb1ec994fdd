"""Compiled argument 10 of `accelmap.costmodels.loopnest_bounds`: the order of the dims'
innermost open loops, one for every tensor (`_order_bounds._jstar_order_energy`).

The readable reference is `_order_bounds._jstar_order_energy` in numpy: per tensor a
``charge`` (the increase of its counts into known levels with a set of dims outside its J*,
argument 1 with argument 10b's passes, `_pass_lift`, `_pass_floor` and `_pass_first`) and a
shortest path ``least`` over the sets of dims placed, innermost first. Both are written here
row by row, with every floating-point operation in the reference's order (``np.maximum`` and
``np.minimum`` as `_mx` and `_mn`, which keep their choice on ties and NaN), so the two give the
same values bit for bit (``tests/unit/costmodels/test_jstar_kernel.py``).

What does not change from node to node is made once per structure (`path_program`): the
states of the shortest path that the reference's recursion visits (a set ``S`` of dims placed
and the anchor of argument 10b, ``(S_l, l)`` or none), in an order where each state's
successors come first, each step's charges as indices into one list of charge definitions
(tensor, dims outside J*, anchor). Per call, `flatten` stacks the counts' arrays (free,
fixed, opened, part: (n_counts, n)) and the passes' (`_PassU`) into arrays; one kernel,
`_jstar_block`, then runs over blocks of rows: `charges` (the charges of a list of definitions,
for argument 8's full increase) and `least_paths` (every charge the program names, then the
path's states in order). Charges equal on what they read (the dims outside J* that the tensor
does not jump over, its passes' dims inside) are made once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numba import njit

from accelmap._typing import FloatArray, IntArray

__all__ = ["JstarArrays", "charges", "flatten", "least_paths", "pass_masks", "path_program"]

_JIT: dict[str, Any] = {"cache": True}
_BLOCK = 128  # rows taken together: each step of a charge or of the path runs over them in one loop


@dataclass(frozen=True, slots=True)
class JstarArrays:
    """One call's counts and passes as arrays (``n`` rows, ``NC`` counts, ``P`` passes).

    ``cstart`` (n_tensors + 1,) the range of each tensor's counts, ``njmask`` (n_tensors,) the
    candidate dims (bits over ``cd``) each tensor does not jump over; ``free``, ``fixed``,
    ``opened``, ``part`` (NC, n), ``e1``, ``e2`` (NC,), ``cpu`` (NC,) each count's pass (-1:
    none). Per pass: ``rest``, ``u0``, ``st``, ``jot`` (P, n), ``act``, ``n_lo`` (P, n, D), per
    sliding coordinate ``rng0``, ``span`` (P, C, n) and ``inc`` (P, C, J, n), ``cbit`` (P, C, J)
    the bit over ``cd`` of each of the coordinate's dims (0: not a candidate), ``ncoord`` (P,)
    and ``njd`` (P, C) the counts of coordinates and of their dims."""

    cstart: IntArray
    njmask: IntArray
    free: FloatArray
    fixed: FloatArray
    opened: FloatArray
    part: FloatArray
    e1: FloatArray
    e2: FloatArray
    cpu: IntArray
    rest: FloatArray
    u0: FloatArray
    st: FloatArray
    jot: FloatArray
    act: FloatArray
    n_lo: FloatArray
    rng0: FloatArray
    span: FloatArray
    inc: FloatArray
    cbit: IntArray
    ncoord: IntArray
    njd: IntArray

    def args(self) -> tuple[Any, ...]:
        return (self.cstart, self.njmask, self.free, self.fixed, self.opened, self.part, self.e1, self.e2, self.cpu,
                self.rest, self.u0, self.st, self.jot, self.act, self.n_lo, self.rng0, self.span, self.inc, self.cbit,
                self.ncoord, self.njd)


def pass_masks(arrays: JstarArrays) -> tuple[int, ...]:
    """Per tensor, the candidate dims (bits over ``cd``) of its passes' sliding coordinates."""
    out = []
    for i in range(len(arrays.njmask)):
        mask = 0
        for c in range(int(arrays.cstart[i]), int(arrays.cstart[i + 1])):
            p = int(arrays.cpu[c])
            if p >= 0:
                for h in range(int(arrays.ncoord[p])):
                    for j in range(int(arrays.njd[p, h])):
                        mask |= int(arrays.cbit[p, h, j])
        out.append(mask)
    return tuple(out)


def flatten(info: list[tuple[int, list[int], list[tuple[Any, ...]]]], cd: list[int], n: int,
            D: int) -> JstarArrays:
    """Stack argument 10's per-tensor counts (``info`` of `_order_bounds._jstar_order_energy`:
    per tensor its jump mask, the dims it does not jump over, and its counts ``(free, fixed,
    opened, e1, e2, part, pass)``) into `JstarArrays`; ``cd`` the candidate dims, ``n`` rows,
    ``D`` dims."""
    bit = {d: 1 << i for i, d in enumerate(cd)}
    counts = [c for _, _, cs in info for c in cs]
    nc = len(counts)
    cstart = np.zeros(len(info) + 1, dtype=np.int64)
    cstart[1:] = np.cumsum([len(cs) for _, _, cs in info])
    njmask = np.array([sum(bit[d] for d in nj) for _, nj, _ in info], dtype=np.int64)
    free = np.empty((nc, n))
    fixed = np.empty((nc, n))
    opened = np.empty((nc, n))
    part = np.empty((nc, n))
    e1 = np.empty(nc)
    e2 = np.empty(nc)
    cpu = np.full(nc, -1, dtype=np.int64)
    pus: dict[int, int] = {}
    pu_list: list[Any] = []
    for j, (fr, fx, op, a1, a2, pa, pu) in enumerate(counts):
        free[j] = fr
        fixed[j] = fx
        opened[j] = op
        part[j] = pa
        e1[j] = a1
        e2[j] = a2
        if pu is not None:
            if id(pu) not in pus:
                pus[id(pu)] = len(pu_list)
                pu_list.append(pu)
            cpu[j] = pus[id(pu)]
    P = len(pu_list)
    C = max((len(pu.coords) for pu in pu_list), default=0)
    J = max((len(dims) for pu in pu_list for _, dims, _, _ in pu.coords), default=0)
    rest = np.empty((P, n))
    u0 = np.empty((P, n))
    st = np.empty((P, n))
    jot = np.empty((P, n))
    act = np.empty((P, n, D))
    n_lo = np.empty((P, n, D))
    rng0 = np.zeros((P, C, n))
    span = np.zeros((P, C, n))
    inc = np.zeros((P, C, J, n))
    cbit = np.zeros((P, C, J), dtype=np.int64)
    ncoord = np.zeros(P, dtype=np.int64)
    njd = np.zeros((P, C), dtype=np.int64)
    for p, pu in enumerate(pu_list):
        rest[p] = pu.rest
        u0[p] = pu.u0
        st[p] = pu.st
        jot[p] = pu.jot
        act[p] = pu.act
        n_lo[p] = pu.n_lo
        ncoord[p] = len(pu.coords)
        for c, (r0, dims, ic, sp) in enumerate(pu.coords):
            rng0[p, c] = r0
            span[p, c] = sp
            njd[p, c] = len(dims)
            for j, d in enumerate(dims):
                inc[p, c, j] = ic[:, j]
                cbit[p, c, j] = bit.get(d, 0)
    return JstarArrays(cstart=cstart, njmask=njmask, free=free, fixed=fixed, opened=opened, part=part, e1=e1, e2=e2,
                       cpu=cpu, rest=rest, u0=u0, st=st, jot=jot, act=act, n_lo=n_lo, rng0=rng0, span=span, inc=inc,
                       cbit=cbit, ncoord=ncoord, njd=njd)


@lru_cache(maxsize=256)
def path_program(m: int, jmasks: tuple[int, ...], ip: int, irr: int,
                 pmasks: tuple[int, ...]) -> tuple[IntArray, ...]:
    """The shortest path of argument 10 as a program, from its structure alone: ``m`` candidate
    dims, each tensor's jump dims ``jmasks`` (bits over them), the sliding tensor ``ip`` of
    argument 10b (-1: none), the dims it does not index ``irr``, and per tensor the candidate
    dims of its passes' sliding coordinates ``pmasks`` (0: no pass). The states are those the
    reference's recursion (`_order_bounds._jstar_order_energy`'s ``least``) visits, in the
    order it finishes them (successors first), and its steps in its order (dims in ``cd`` order,
    tensors in ``info`` order), so that the sums and minima run as the reference's do.

    Returns ``(q_def, tr_start, tr_child, q_start, q_list, roots)``: ``q_def`` (Q, 4) each
    charge's tensor, dims outside J*, anchor's ``S_l`` and the index of its dim ``l`` in ``cd``
    (-1: no anchor); per state its steps ``tr_start[s] .. tr_start[s + 1]``, each step's next
    state ``tr_child`` and charges ``q_list[q_start[t] .. q_start[t + 1]]``; ``roots`` (m,) the
    state of each innermost dim ``z``."""
    full = (1 << m) - 1
    jm_ip = jmasks[ip] if ip >= 0 else 0
    state_of: dict[tuple[int, tuple[int, int] | None], int] = {}
    steps_of: list[list[tuple[int, list[int]]]] = []
    q_of: dict[tuple[int, int, int, int, int], int] = {}
    q_rep: list[tuple[int, int, int, int]] = []

    def qid(key: tuple[int, int, int, int]) -> int:
        # a charge reads ``out`` only through the dims the tensor does not jump over (its
        # multiplier) and the dims of its passes (their union inside J*), and an anchor's ``S_l``
        # through the same: charges equal there are one, made by the same operations
        i, out, sl, dli = key
        nm, pm = full & ~jmasks[i], pmasks[i]
        canon = (i, out & nm, ~out & full & pm, sl & (nm | pm) if dli >= 0 else 0, dli)
        got = q_of.get(canon)
        if got is None:
            q_of[canon] = got = len(q_rep)
            q_rep.append(key)
        return got

    def visit(S: int, anc: tuple[int, int] | None) -> int:
        if S == full:
            anc = None  # the reference returns zero here whatever the anchor
        got = state_of.get((S, anc))
        if got is not None:
            return got
        steps: list[tuple[int, list[int]]] = []
        if S != full:
            for di in range(m):
                b = 1 << di
                if S & b:
                    continue
                nxt = anc
                if ip >= 0 and anc is None and irr & b and not jm_ip & S:
                    nxt = (S, di)
                if jm_ip & b:
                    nxt = None
                child = visit(S | b, nxt)
                qs = []
                for i, jmask in enumerate(jmasks):
                    if jmask & b and not jmask & S:
                        if i == ip and anc is not None:
                            qs.append(qid((i, full & ~S, anc[0], anc[1])))
                        else:
                            qs.append(qid((i, full & ~S, 0, -1)))
                steps.append((child, qs))
        state_of[(S, anc)] = sid = len(steps_of)
        steps_of.append(steps)
        return sid

    roots = np.array([visit(1 << zi, (0, zi) if ip >= 0 and irr & (1 << zi) else None) for zi in range(m)],
                     dtype=np.int64)
    q_def = np.array(q_rep, dtype=np.int64).reshape(len(q_rep), 4)
    tr_start = np.zeros(len(steps_of) + 1, dtype=np.int64)
    tr_child: list[int] = []
    q_start = [0]
    q_list: list[int] = []
    for s, steps in enumerate(steps_of):
        for child, qs in steps:
            tr_child.append(child)
            q_list.extend(qs)
            q_start.append(len(q_list))
        tr_start[s + 1] = len(tr_child)
    return (q_def, tr_start, np.array(tr_child, dtype=np.int64), np.array(q_start, dtype=np.int64),
            np.array(q_list, dtype=np.int64), roots)


@njit(**_JIT)
def _mx(a: float, b: float) -> float:  # pragma: no cover - compiled
    return a if (a >= b or a != a) else b  # np.maximum: the first on ties and NaN


@njit(**_JIT)
def _mn(a: float, b: float) -> float:  # pragma: no cover - compiled
    return a if (a <= b or a != a) else b  # np.minimum


@njit(**_JIT)
def _te(x: float, e1: float, e2: float, part: float) -> float:  # pragma: no cover - compiled
    out = e1 * x  # `_bound_model._term_energy`
    if e2 != 0.0:
        out = out + e2 * _mx(x - part, 0.0)
    return out


@njit(**_JIT)
def _jstar_block(B: int, q_def: IntArray, with_opened: bool, paths: bool, tr_start: IntArray, tr_child: IntArray,
                 q_start: IntArray, q_list: IntArray, roots: IntArray, full: int, mt: FloatArray, cd: IntArray,
                 cstart: IntArray, njmask: IntArray, free: FloatArray, fixed: FloatArray, opened: FloatArray,
                 part: FloatArray, e1: FloatArray, e2: FloatArray, cpu: IntArray, rest: FloatArray, u0: FloatArray,
                 st: FloatArray, jot: FloatArray, act: FloatArray, n_lo: FloatArray, rng0: FloatArray,
                 span: FloatArray, inc: FloatArray, cbit: IntArray, ncoord: IntArray,
                 njd: IntArray) -> FloatArray:  # pragma: no cover - compiled
    """`_order_bounds._jstar_order_energy`'s ``charge`` of each definition ``q_def[q] = (i, out,
    S_l, index of l in cd or -1)`` on every row (tensor ``i``, the dims ``out``, bits over ``cd``,
    outside J*, anchored at ``(S_l, l)`` where given; with ``with_opened`` each count at least its
    ``opened``), returned (n, Q); or, with ``paths``, the shortest path of the program
    (`path_program`) over those charges, its value at each root (n, m).

    The rows go in blocks of ``B`` (`_BLOCK`), each step a loop over the block's rows (the reference's
    operations, in its order, row by row). What many charges share is made once per block: the
    products of ``mt`` over every set of candidate dims (``pm``, each in ``cd`` order, as the
    reference multiplies), each count's order-free energy, and, when first asked for, a pass's
    union inside J* (`_pass_lift`) per set of its dims inside and its floor at an anchor
    (`_pass_floor` with `_pass_first`) per such set and anchor dim."""
    n = mt.shape[0]
    Q = q_def.shape[0]
    m = cd.shape[0]
    P = rest.shape[0]
    NC = fixed.shape[0]
    nm_all = 1 << m
    ns = tr_start.shape[0] - 1 if paths else 0
    res = np.empty((n, roots.shape[0] if paths else Q))
    pmask = np.zeros(P, dtype=np.int64)
    for p in range(P):
        for h in range(ncoord[p]):
            for j in range(njd[p, h]):
                pmask[p] |= cbit[p, h, j]
    hbit = np.zeros(nm_all, dtype=np.int64)
    for mask in range(2, nm_all):
        hbit[mask] = hbit[mask >> 1] + 1
    pm = np.empty((nm_all, B))
    lift_v = np.empty((P, nm_all, B))
    lift_ok = np.zeros((P, nm_all), dtype=np.bool_)
    floor_v = np.empty((P, nm_all, m, B))
    floor_ok = np.zeros((P, nm_all, m), dtype=np.bool_)
    te_fx = np.empty((NC, B))
    first = np.empty((P, B))
    cv = np.empty((Q, B))
    val = np.empty((ns, B))
    e = np.empty(B)
    tmp = np.empty(B)
    U = np.empty(B)
    back = np.empty(B)
    rr = np.empty(B)
    for b0 in range(0, n, B):
        nb = min(B, n - b0)
        for c in range(NC):
            a1 = e1[c]
            a2 = e2[c]
            for j in range(nb):
                te_fx[c, j] = _te(fixed[c, b0 + j], a1, a2, part[c, b0 + j])
        for p in range(P):
            for j in range(nb):
                first[p, j] = st[p, b0 + j] / (u0[p, b0 + j] * jot[p, b0 + j])
        for j in range(nb):
            pm[0, j] = 1.0
        for mask in range(1, nm_all):
            hb = hbit[mask]
            low = mask ^ (1 << hb)
            d = cd[hb]
            if low:
                for j in range(nb):
                    pm[mask, j] = pm[low, j] * mt[b0 + j, d]
            else:
                for j in range(nb):
                    pm[mask, j] = mt[b0 + j, d]
        lift_ok[:] = False
        floor_ok[:] = False
        for q in range(Q):
            i = q_def[q, 0]
            out = q_def[q, 1]
            sl = q_def[q, 2]
            dli = q_def[q, 3]
            nm = njmask[i]
            mi = nm & out
            ml = nm & ~sl & ~(1 << dli) & full if dli >= 0 else 0
            inside = full & ~out
            for j in range(nb):
                e[j] = 0.0
            for c in range(cstart[i], cstart[i + 1]):
                p = cpu[c]
                a1 = e1[c]
                a2 = e2[c]
                if p >= 0:
                    sub = inside & pmask[p]
                    if not lift_ok[p, sub]:
                        for j in range(nb):
                            U[j] = rest[p, b0 + j]
                        for h in range(ncoord[p]):
                            for j in range(nb):
                                rr[j] = rng0[p, h, b0 + j]
                            for jj in range(njd[p, h]):
                                if sub & cbit[p, h, jj]:
                                    for j in range(nb):
                                        rr[j] = rr[j] + inc[p, h, jj, b0 + j]
                            for j in range(nb):
                                U[j] = U[j] * rr[j]
                        for j in range(nb):
                            lift_v[p, sub, j] = U[j] / u0[p, b0 + j]
                        lift_ok[p, sub] = True
                    if dli >= 0:
                        subl = sl & pmask[p]
                        if not floor_ok[p, subl, dli]:
                            d_l = cd[dli]
                            for j in range(nb):
                                U[j] = rest[p, b0 + j]
                                back[j] = rest[p, b0 + j]
                            for h in range(ncoord[p]):
                                for j in range(nb):
                                    rr[j] = rng0[p, h, b0 + j]
                                for jj in range(njd[p, h]):
                                    if subl & cbit[p, h, jj]:
                                        for j in range(nb):
                                            rr[j] = rr[j] + inc[p, h, jj, b0 + j]
                                for j in range(nb):
                                    U[j] = U[j] * rr[j]
                                    back[j] = back[j] * _mx(2.0 * span[p, h, b0 + j] - rr[j], 0.0)
                            for j in range(nb):
                                s = st[p, b0 + j]
                                ret = (1.0 - 1.0 / n_lo[p, b0 + j, d_l]) * _mx(s - back[j], 0.0)
                                floor_v[p, subl, dli, j] = act[p, b0 + j, d_l] * (_mx(U[j] - s, 0.0) + ret) / u0[p, b0 + j]
                            floor_ok[p, subl, dli] = True
                        for j in range(nb):
                            lift = _mx(pm[mi, j] * lift_v[p, sub, j], pm[ml, j] * floor_v[p, subl, dli, j] + first[p, j])
                            x = _mx(free[c, b0 + j] * lift, fixed[c, b0 + j])
                            if with_opened:
                                x = _mx(x, opened[c, b0 + j])
                            e[j] = e[j] + _te(x, a1, a2, part[c, b0 + j]) - te_fx[c, j]
                    else:
                        for j in range(nb):
                            x = _mx(free[c, b0 + j] * (pm[mi, j] * lift_v[p, sub, j]), fixed[c, b0 + j])
                            if with_opened:
                                x = _mx(x, opened[c, b0 + j])
                            e[j] = e[j] + _te(x, a1, a2, part[c, b0 + j]) - te_fx[c, j]
                else:
                    for j in range(nb):
                        x = _mx(free[c, b0 + j] * pm[mi, j], fixed[c, b0 + j])
                        if with_opened:
                            x = _mx(x, opened[c, b0 + j])
                        e[j] = e[j] + _te(x, a1, a2, part[c, b0 + j]) - te_fx[c, j]
            for j in range(nb):
                cv[q, j] = _mx(e[j], 0.0)
        if not paths:
            for j in range(nb):
                for q in range(Q):
                    res[b0 + j, q] = cv[q, j]
            continue
        for s in range(ns):
            if tr_start[s] == tr_start[s + 1]:
                for j in range(nb):
                    val[s, j] = 0.0
                continue
            for t in range(tr_start[s], tr_start[s + 1]):
                ch = tr_child[t]
                for j in range(nb):
                    tmp[j] = val[ch, j]
                for k in range(q_start[t], q_start[t + 1]):
                    qq = q_list[k]
                    for j in range(nb):
                        tmp[j] = tmp[j] + cv[qq, j]
                if t == tr_start[s]:
                    for j in range(nb):
                        val[s, j] = tmp[j]
                else:
                    for j in range(nb):
                        val[s, j] = _mn(val[s, j], tmp[j])
        for zi in range(roots.shape[0]):
            r0 = roots[zi]
            for j in range(nb):
                res[b0 + j, zi] = val[r0, j]
    return res


def _take(arrays: JstarArrays, rows: IntArray) -> JstarArrays:
    """The rows ``rows`` of every per-row array of ``arrays``."""
    a = arrays
    return JstarArrays(cstart=a.cstart, njmask=a.njmask, free=a.free[:, rows], fixed=a.fixed[:, rows],
                       opened=a.opened[:, rows], part=a.part[:, rows], e1=a.e1, e2=a.e2, cpu=a.cpu,
                       rest=a.rest[:, rows], u0=a.u0[:, rows], st=a.st[:, rows], jot=a.jot[:, rows],
                       act=a.act[:, rows], n_lo=a.n_lo[:, rows], rng0=a.rng0[:, :, rows], span=a.span[:, :, rows],
                       inc=a.inc[..., rows], cbit=a.cbit, ncoord=a.ncoord, njd=a.njd)


def charges(q_def: IntArray, with_opened: bool, mt: FloatArray, cd: list[int], arrays: JstarArrays) -> FloatArray:
    """(n, Q) the charges ``q_def`` (as `path_program`'s) on every row; with ``with_opened``,
    each count at least its ``opened`` (argument 8)."""
    full = (1 << len(cd)) - 1
    none = np.zeros(1, dtype=np.int64)
    return _jstar_block(_BLOCK, q_def, with_opened, False, none, none, none, none, np.zeros(0, dtype=np.int64), full,
                        np.ascontiguousarray(mt, dtype=np.float64), np.asarray(cd, dtype=np.int64), *arrays.args())


def least_paths(rows: IntArray, program: tuple[IntArray, ...], mt: FloatArray, cd: list[int],
                arrays: JstarArrays) -> FloatArray:
    """(len(rows), len(cd)) the least charge of ordering the dims after each innermost dim ``z``
    (the reference's ``least(bit[z], ...)``) on ``rows``, by `path_program`'s ``program``."""
    full = (1 << len(cd)) - 1
    if len(rows) < mt.shape[0]:
        arrays, mt = _take(arrays, rows), mt[rows]
    return _jstar_block(_BLOCK, program[0], False, True, *program[1:], full, np.ascontiguousarray(mt, dtype=np.float64),
                        np.asarray(cd, dtype=np.int64), *arrays.args())
