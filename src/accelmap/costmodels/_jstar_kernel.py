"""Compiled argument 10 of `accelmap.costmodels.loopnest_bounds`: the order of the dims'
innermost open loops, one for every tensor (`loopnest_bounds._jstar_order_energy`).

The readable reference is `loopnest_bounds._jstar_order_energy` in numpy: per tensor a
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
fixed, opened, part: (n_counts, n)) and the passes' (`_PassU`) into arrays; the kernels then
run per row: `charges` (the charges of a list of definitions, for argument 8's full increase)
and `least_paths` (every charge the program names, then the path's states in order).
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
    """Stack argument 10's per-tensor counts (``info`` of `loopnest_bounds._jstar_order_energy`:
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
    reference's recursion (`loopnest_bounds._jstar_order_energy`'s ``least``) visits, in the
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
    out = e1 * x  # `loopnest_bounds._term_energy`
    if e2 != 0.0:
        out = out + e2 * _mx(x - part, 0.0)
    return out


@njit(**_JIT)
def _jstar_rows(rows: IntArray, q_def: IntArray, with_opened: bool, paths: bool, tr_start: IntArray,
                tr_child: IntArray, q_start: IntArray, q_list: IntArray, roots: IntArray, full: int, mt: FloatArray,
                cd: IntArray, cstart: IntArray, njmask: IntArray, free: FloatArray, fixed: FloatArray,
                opened: FloatArray, part: FloatArray, e1: FloatArray, e2: FloatArray, cpu: IntArray, rest: FloatArray,
                u0: FloatArray, st: FloatArray, jot: FloatArray, act: FloatArray, n_lo: FloatArray, rng0: FloatArray,
                span: FloatArray, inc: FloatArray, cbit: IntArray, ncoord: IntArray,
                njd: IntArray) -> FloatArray:  # pragma: no cover - compiled
    """Per row of ``rows``: `loopnest_bounds._jstar_order_energy`'s ``charge`` of each definition
    ``q_def[q] = (i, out, S_l, index of l in cd or -1)`` (tensor ``i``, the dims ``out``, bits
    over ``cd``, outside J*, anchored at ``(S_l, l)`` where given; with ``with_opened`` each count
    at least its ``opened``), returned (len(rows), Q); or, with ``paths``, the shortest path of
    the program (`path_program`) over those charges, its value at each root (len(rows), m).

    What many charges share is made once per row: the products of ``mt`` over every set of
    candidate dims (``pm``, each in ``cd`` order, as the reference multiplies), each count's
    order-free energy, a pass's union inside J* (`_pass_lift`) per set of its dims inside, and
    its floor at an anchor (`_pass_floor` with `_pass_first`) per such set and anchor dim, the
    last two when first asked for. One body: a call that passes these arrays costs more than a
    charge."""
    Q = q_def.shape[0]
    m = cd.shape[0]
    P = rest.shape[0]
    nm_all = 1 << m
    cv = np.empty(Q)
    res = np.empty((rows.shape[0], roots.shape[0] if paths else Q))
    val = np.empty(tr_start.shape[0] - 1 if paths else 0)
    pm = np.empty(nm_all)
    pmask = np.zeros(P, dtype=np.int64)  # the candidate dims of each pass's sliding coordinates
    for p in range(P):
        for h in range(ncoord[p]):
            for j in range(njd[p, h]):
                pmask[p] |= cbit[p, h, j]
    lift_v = np.empty((P, nm_all))
    lift_at = np.zeros((P, nm_all), dtype=np.int64)  # the row (k + 1) each value was made for
    floor_v = np.empty((P, nm_all, m))
    floor_at = np.zeros((P, nm_all, m), dtype=np.int64)
    hbit = np.zeros(nm_all, dtype=np.int64)  # the highest dim of each set
    for mask in range(2, nm_all):
        hbit[mask] = hbit[mask >> 1] + 1
    NC = fixed.shape[0]
    te_fx = np.empty(NC)
    first = np.empty(P)
    for k in range(rows.shape[0]):
        r = rows[k]
        stamp = k + 1
        for c in range(NC):
            te_fx[c] = _te(fixed[c, r], e1[c], e2[c], part[c, r])
        for p in range(P):
            first[p] = st[p, r] / (u0[p, r] * jot[p, r])
        pm[0] = 1.0
        for mask in range(1, nm_all):
            hb = hbit[mask]
            low = mask ^ (1 << hb)
            pm[mask] = pm[low] * mt[r, cd[hb]] if low else mt[r, cd[hb]]
        for q in range(Q):
            i = q_def[q, 0]
            out = q_def[q, 1]
            sl = q_def[q, 2]
            dli = q_def[q, 3]
            nm = njmask[i]
            mult = pm[nm & out]
            inside = full & ~out
            e = 0.0
            for c in range(cstart[i], cstart[i + 1]):
                fx = fixed[c, r]
                p = cpu[c]
                if p >= 0:
                    sub = inside & pmask[p]
                    if lift_at[p, sub] != stamp:
                        # `_pass_lift`: the union inside J*, over u0
                        U = rest[p, r]
                        for h in range(ncoord[p]):
                            rr = rng0[p, h, r]
                            for j in range(njd[p, h]):
                                if sub & cbit[p, h, j]:
                                    rr = rr + inc[p, h, j, r]
                            U = U * rr
                        lift_v[p, sub] = U / u0[p, r]
                        lift_at[p, sub] = stamp
                    lift = mult * lift_v[p, sub]
                    if dli >= 0:
                        subl = sl & pmask[p]
                        if floor_at[p, subl, dli] != stamp:
                            # `_pass_floor` at l's innermost open loop, and `_pass_first`
                            d_l = cd[dli]
                            U = rest[p, r]
                            back = rest[p, r]
                            for h in range(ncoord[p]):
                                rr = rng0[p, h, r]
                                for j in range(njd[p, h]):
                                    if subl & cbit[p, h, j]:
                                        rr = rr + inc[p, h, j, r]
                                U = U * rr
                                back = back * _mx(2.0 * span[p, h, r] - rr, 0.0)
                            s = st[p, r]
                            ret = (1.0 - 1.0 / n_lo[p, r, d_l]) * _mx(s - back, 0.0)
                            floor_v[p, subl, dli] = act[p, r, d_l] * (_mx(U - s, 0.0) + ret) / u0[p, r]
                            floor_at[p, subl, dli] = stamp
                        mult_l = pm[nm & ~sl & ~(1 << dli) & full]
                        lift = _mx(lift, mult_l * floor_v[p, subl, dli] + first[p])
                    x = _mx(free[c, r] * lift, fx)
                else:
                    x = _mx(free[c, r] * mult, fx)
                if with_opened:
                    x = _mx(x, opened[c, r])
                e = e + _te(x, e1[c], e2[c], part[c, r]) - te_fx[c]
            cv[q] = _mx(e, 0.0)
        if not paths:
            res[k] = cv
            continue
        # the shortest path: the states in order (each after its successors), every step its
        # successor's value plus its charges, the least step per state; 0 once every dim is placed
        for s in range(val.shape[0]):
            if tr_start[s] == tr_start[s + 1]:
                val[s] = 0.0
                continue
            best = 0.0
            for t in range(tr_start[s], tr_start[s + 1]):
                v = val[tr_child[t]]
                for j in range(q_start[t], q_start[t + 1]):
                    v = v + cv[q_list[j]]
                best = v if t == tr_start[s] else _mn(best, v)
            val[s] = best
        for zi in range(roots.shape[0]):
            res[k, zi] = val[roots[zi]]
    return res


def charges(rows: IntArray, q_def: IntArray, with_opened: bool, mt: FloatArray, cd: list[int],
            arrays: JstarArrays) -> FloatArray:
    """(len(rows), Q) the charges ``q_def`` (as `path_program`'s) on ``rows``; with
    ``with_opened``, each count at least its ``opened`` (argument 8)."""
    full = (1 << len(cd)) - 1
    none = np.zeros(1, dtype=np.int64)
    return _jstar_rows(np.ascontiguousarray(rows, dtype=np.int64), q_def, with_opened, False, none, none, none, none,
                       np.zeros(0, dtype=np.int64), full, np.ascontiguousarray(mt, dtype=np.float64),
                       np.asarray(cd, dtype=np.int64), *arrays.args())


def least_paths(rows: IntArray, program: tuple[IntArray, ...], mt: FloatArray, cd: list[int],
                arrays: JstarArrays) -> FloatArray:
    """(len(rows), len(cd)) the least charge of ordering the dims after each innermost dim ``z``
    (the reference's ``least(bit[z], ...)``) on ``rows``, by `path_program`'s ``program``."""
    full = (1 << len(cd)) - 1
    return _jstar_rows(np.ascontiguousarray(rows, dtype=np.int64), program[0], False, True, *program[1:], full,
                       np.ascontiguousarray(mt, dtype=np.float64), np.asarray(cd, dtype=np.int64), *arrays.args())
