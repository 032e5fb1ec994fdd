"""Compiled evaluation of the ``aspect`` model: one mapping per loop iteration.

The fast path of `AspectModel.evaluate`. What is counted is defined once, in
`accelmap.costmodels.aspect_analysis` (the directive analysis, ``analyze``: iteration
cases, reuse per case, delays) and `accelmap.costmodels.aspect_form` (the directive form of
an accelmap mapping, ``directives_from_mapping``); the batched numpy path
(`accelmap.costmodels._aspect_numpy`) is the executable reference. This module does, per
mapping and with the same int64 arithmetic:

1. the legality check of `check_batch` up to (not including) capacity, which the model
   replaces by MAESTRO's buffer requirements (``check_row``);
2. the directive plan of ``_row_plan``: per-PE and per-cluster tiles, the top-level
   directive order and the two SpatialMaps (``plan_row``);
3. the MAC count first: a directive form that does not do exactly the problem's MACs is
   ``Reason.MODEL`` without the rest of the analysis (with edge iterations at the top level
   the sum over MAESTRO's cases regrouped per directive, ``_macs_factored``, not a walk over
   the cases);
4. for a mapping without edge iterations at the top level, the numpy path's closed forms
   (``regular_row``; the sub-cluster runtime from the inner level's case analysis when that
   level has several iterations); for any other mapping the whole analysis of ``analyze``
   -- per-directive iteration states, MAESTRO's case enumeration, per-case reuse, the
   inner cluster level memoized per sub-cluster shape (``general_row``);
5. MAESTRO's buffer requirements against the capacities, and the `Metrics`
   (``metrics_rows``, what ``aspect._metrics`` does).

The per-row functions are ``register_jitable`` (plain numba functions, no CPU-only
features) so the same source can compile for another target; the CPU driver
(``@njit(cache=True)`` ``eval_rows``, over a range of rows, or over blocks of rows on numba's
threads) runs copies of the row loop and of the legality check, the plan and the closed
forms (`_inlined_rules`), these inlined into the row loop at numba's IR stage, so a regular
row makes no call (each call passed some twenty arrays as by-value structures); the case
analysis stays calls, with two small rules it runs per directive and state
(``_egress_term``, ``_load_state``) compiled ``inline="always"`` into their callers. The
drivers run without reference counting (``_nrt=False``): every array, scratch included,
comes from the caller. Counts, cycles and reason codes equal the numpy path's bit for bit,
energies to rounding (the sum over levels and tensors runs in another order).

`accelmap.costmodels._aspect_cpu` compiles the same row loop once per structure (the
structure's arrays as constants, the scratch on the driver's stack); `AspectModel` switches to
it after a number of rows. Its rules are these, so the structural entries of ``ints`` are read
only where a constant may stand: the problem's MACs, a layer's value, come from ``dfull``.

Variable slots: the MAESTRO variables of the directive form (``aspect._vars``: N K C R S
Y X, those present) are slots ``0 .. nv-1`` (Y and X in input coordinates), then ``nv`` =
Y' and ``nv + 1`` = X' (output rows and columns).
"""

from __future__ import annotations

import types
from dataclasses import dataclass

import numpy as np
from numba import njit
from numba.extending import register_jitable

from accelmap._typing import IntArray
from accelmap.costmodels._loopnest_kernel import _threads
from accelmap.costmodels.engines import run_blocks

__all__ = ["AspectConsts", "aspect_consts", "evaluate_rows", "metrics", "N_COLS"]

# ints of AspectConsts.ints
(_A, _L, _D, _T, _NV, _IY, _IX, _IR, _IS, _SY, _SX, _NOC, _OFF, _MACS, _R_FACTORS, _R_ORDER, _R_KEEP,
 _R_FANOUT, _R_MODEL, _R_CAPACITY) = range(20)
# output columns: runtime, macs, then (l1_read, l1_write, l2_read, l2_write, l1_req, l2_req) x
# (input, filter, output)
_RUNTIME, _MACS_COL, _COUNTS = 0, 1, 2
N_COLS = 2 + 6 * 3
# rows of the (6, 3) per-level result table: MAESTRO's names
_UP_READ, _UP_WRITE, _DOWN_READ, _DOWN_WRITE, _UP_REQ, _DOWN_REQ = range(6)
# tensor rows of the masks
_IN, _FILT, _OUT = 0, 1, 2
# iteration states (aspect_analysis._INIT / _STEADY / _EDGE) and their fields
_INIT, _STEADY, _EDGE = 0, 1, 2
_POS, _OCC, _UNROLLED, _INIT_EDGE, _SPEE = range(5)
# per-level info and tables
_NSUB, _NEDGE, _SPI, _ND, _CHG = range(5)
_MAPPED, _UNIQUE, _MEDGE, _UEDGE = range(4)
# inner-level results memoized per row (distinct sub-cluster shapes)
MEMO = 64


@dataclass(frozen=True, slots=True, eq=False)
class AspectConsts:
    """(problem, arch) as arrays for the kernel.

    ``ints``: array level, L, D, T, nv, the slots of Y X R S, strides (y, x), NoC and off-chip
    bandwidth (words/cycle), the problem's MACs and the `Reason` codes used. ``src``: (nv,)
    the problem dim of each slot (-1: absent, extent 1). ``dfull``: (nv + 3,) the layer's
    extents in MAESTRO's terms (input rows/columns, then Y' = Y - R + 1, X' = X - S + 1).
    ``tmask``: (3, nv + 2) the slots indexing input, filter, output. ``dfull`` ends with the
    problem's MACs (``dfull[nv + 2]``, what the rules compare a row's MAC count with): with the
    extents, the run-time values of a structure (`_aspect_cpu` compiles the rest as constants)."""

    ints: IntArray
    src: IntArray
    dfull: IntArray
    tmask: np.ndarray
    bounds: IntArray
    holds: np.ndarray
    fan_xy: IntArray
    # Metrics: per MAESTRO tensor its accelmap tensor and L1 level (-1: none); per level the
    # capacity (inf: unbounded), read and write energy per word; MACs, MAC count, MAC energy
    tensor: IntArray
    l1_level: IntArray
    caps: np.ndarray
    read_pj: np.ndarray
    write_pj: np.ndarray
    scal: np.ndarray

    def as_tuple(self) -> tuple:
        return (self.ints, self.src, self.dfull, self.tmask, self.bounds, self.holds, self.fan_xy)

    def metric_tuple(self) -> tuple:
        return (self.ints, self.tensor, self.l1_level, self.caps, self.read_pj, self.write_pj, self.scal)


def aspect_consts(problem, arch) -> AspectConsts:  # noqa: ANN001
    """The kernel's constants of a problem the aspect model reads, on an arch it reads."""
    from accelmap.costmodels.aspect_form import (
        _l1_levels,
        _layout,
        _maestro_layer,
        _tensor_var_masks,
        _vars,
        aspect_view,
    )
    from accelmap.mapper.check import Reason

    lay = _layout(problem)
    view = aspect_view(arch)
    vars_ = _vars(lay)
    nv = len(vars_)
    src = np.array([-1 if (d := lay.dim("Y'" if v == "Y" else "X'" if v == "X" else v)) is None else d
                    for v in vars_], dtype=np.int64)
    full = _maestro_layer(problem, lay).dim_dict
    iy, ix, ir, is_ = (vars_.index(v) for v in ("Y", "X", "R", "S"))
    dfull = np.array([full.get(v, 1) for v in vars_] + [full["Y"] - full["R"] + 1, full["X"] - full["S"] + 1,
                                                         problem.macs], dtype=np.int64)
    masks = _tensor_var_masks(lay.kind, vars_)
    tmask = np.zeros((3, nv + 2), dtype=np.bool_)
    for j, t in enumerate(("input", "filter", "output")):
        tmask[j, :nv] = masks[t]
    ints = np.array([view.array_level, arch.n_levels, problem.n_dims, problem.n_tensors, nv, iy, ix, ir, is_,
                     lay.stride_y, lay.stride_x, view.noc_bw, view.offchip_bw, problem.macs, int(Reason.FACTORS),
                     int(Reason.ORDER), int(Reason.KEEP), int(Reason.FANOUT), int(Reason.MODEL),
                     int(Reason.CAPACITY)], dtype=np.int64)
    l1_of = _l1_levels(problem, arch, view, lay)
    tnames = ("input", "filter", "output")
    return AspectConsts(ints=ints, src=src, dfull=dfull, tmask=tmask,
                        bounds=np.ascontiguousarray(problem.bounds, dtype=np.int64),
                        holds=np.ascontiguousarray(arch.holds_mask(problem)),
                        fan_xy=np.ascontiguousarray(arch.fanouts, dtype=np.int64),
                        tensor=np.array([lay.tensor(t) for t in tnames], dtype=np.int64),
                        l1_level=np.array([-1 if l1_of[t] is None else l1_of[t] for t in tnames], dtype=np.int64),
                        caps=np.asarray(arch.capacities_words, dtype=np.float64),
                        read_pj=np.array([lv.read_energy_pj / lv.block_words for lv in arch.levels]),
                        write_pj=np.array([lv.write_energy_pj / lv.block_words for lv in arch.levels]),
                        scal=np.array([float(problem.macs), float(arch.n_macs), arch.compute.energy_per_mac_pj]))


# ---------------------------------------------------------------------------------------
# Legality (check_batch without capacity) and the directive plan (_row_plan)
# ---------------------------------------------------------------------------------------

@register_jitable
def check_row(i, temporal, spatial, order, keep, ints, bounds, holds, fan_xy):
    """`check_batch` of mapping i up to its capacity check: (reason, level)."""
    L, D = ints[_L], ints[_D]  # (the mapping arrays' shapes; constants in `_aspect_cpu`'s drivers)
    T = holds.shape[1]
    ok = True
    for d in range(D):
        prod = 1
        for lv in range(L):
            a, x, y = temporal[i, lv, d], spatial[i, lv, d, 0], spatial[i, lv, d, 1]
            if a < 1 or x < 1 or y < 1:
                ok = False
            prod *= a * x * y
        if prod != bounds[d]:
            ok = False
    if not ok:
        return ints[_R_FACTORS], -1
    for lv in range(L):
        seen = 0
        for k in range(D):
            v = order[i, lv, k]
            seen |= (1 << D) if v < 0 or v >= D else (1 << v)
        if seen != (1 << D) - 1:
            return ints[_R_ORDER], lv
    for lv in range(L):
        for t in range(T):
            if (keep[i, lv, t] and not holds[lv, t]) or (lv == 0 and not keep[i, 0, t]):
                return ints[_R_KEEP], lv
    for lv in range(L):
        ux, uy = 1, 1
        for d in range(D):
            ux *= spatial[i, lv, d, 0]
            uy *= spatial[i, lv, d, 1]
        if ux > fan_xy[lv, 0] or uy > fan_xy[lv, 1]:
            return ints[_R_FANOUT], lv
    return 0, -1


@register_jitable
def _tiles(tile, src, dfull, ints, top, size, ofs):
    """Directive sizes and offsets of every slot for a tile of the problem's dims (``size``,
    ``ofs`` written): rows and columns in input coordinates, rescaled for the outer stride
    (aspect_analysis._apply_outer_stride)."""
    nv = ints[_NV]
    for v in range(nv):
        g = tile[src[v]] if src[v] >= 0 else 1
        size[v] = g
        ofs[v] = g
    for k in range(2):
        v = ints[_IY] if k == 0 else ints[_IX]
        r = ints[_IR] if k == 0 else ints[_IS]
        st = ints[_SY] if k == 0 else ints[_SX]
        gv = size[v]
        s = (gv - 1) * st + size[r]
        o = gv * st
        if st != 1:
            r_full = dfull[r]
            if s >= r_full:
                n_out = (s + st - r_full) // st
                s = n_out * min(st, r_full) + max(r_full - st, 0)
                o = n_out * (r_full if (not top and r_full < st) else st)
        size[v] = s
        ofs[v] = o


@register_jitable
def plan_row(i, temporal, spatial, order, ints, src, dfull, pe, cl, m_top, o_top, m_in, o_in, perm, keys, lrank, lvl):
    """The directive plan of mapping i (``_row_plan``): tiles, the top-level directive
    order (``perm``: slot at each position, outer first) and the SpatialMap slots.

    Returns (representable, f_x, f_y, sp_top, sp_in)."""
    a, L, D, nv = ints[_A], ints[_L], ints[_D], ints[_NV]
    for lv in range(L):
        if lv == a:
            continue
        for d in range(D):
            if spatial[i, lv, d, 0] > 1 or spatial[i, lv, d, 1] > 1:
                return False, 1, 1, 0, 0
    d_x, d_y, n_x, n_y, f_x, f_y = -1, -1, 0, 0, 1, 1
    for d in range(D):
        sx, sy = spatial[i, a, d, 0], spatial[i, a, d, 1]
        f_x *= sx
        f_y *= sy
        if sx > 1:
            n_x += 1
            d_x = d
        if sy > 1:
            n_y += 1
            d_y = d
    if n_x > 1 or n_y > 1:
        return False, 1, 1, 0, 0
    for d in range(D):
        p = 1
        for lv in range(a + 1, L):
            p *= temporal[i, lv, d] * spatial[i, lv, d, 0] * spatial[i, lv, d, 1]
        pe[d] = p
        cl[d] = p * spatial[i, a, d, 0]
    _tiles(cl, src, dfull, ints, True, m_top, o_top)
    _tiles(pe, src, dfull, ints, False, m_in, o_in)
    # position of each dim in the top loop nest: its innermost temporal loop at levels <= a
    for d in range(D):
        lvl[d] = -1
        lrank[d] = 0
    for lv in range(a + 1):
        for rk in range(D):
            d = order[i, lv, rk]
            if temporal[i, lv, d] > 1:
                lvl[d] = lv
                lrank[d] = rk
    if d_y >= 0 and lvl[d_y] < 0:
        lvl[d_y] = a
        lrank[d_y] = -1
    # sort the slots by (0, level, rank) where the dim has a temporal loop at or above the
    # array, else by (1, slot): the keys are distinct
    big = (L + 2) * (D + 2) * (nv + 1)
    for v in range(nv):
        d = src[v]
        keys[v] = lvl[d] * (D + 2) + lrank[d] + 1 if (d >= 0 and lvl[d] >= 0) else big + v
        perm[v] = v
    for p in range(1, nv):
        v = perm[p]
        kv = keys[v]
        q = p - 1
        while q >= 0 and keys[perm[q]] > kv:
            perm[q + 1] = perm[q]
            q -= 1
        perm[q + 1] = v
    sp_top = -1
    if d_y >= 0:
        for p in range(nv):
            if src[perm[p]] == d_y:
                sp_top = perm[p]
                break
    if sp_top < 0:  # no Y unrolling: a one-cluster SpatialMap over a dim that does not iterate
        sp_top = perm[nv - 1]
        for p in range(nv - 1, -1, -1):
            v = perm[p]
            if src[v] < 0 or lvl[src[v]] < 0:
                sp_top = v
                break
    sp_in = nv - 1
    if d_x >= 0:
        for v in range(nv):
            if src[v] == d_x:
                sp_in = v
                break
    return True, f_x, f_y, sp_top, sp_in


@register_jitable
def _noc(traffic, bw):
    """NoC delay: hops x hop latency (1 x 1) + ceil(traffic / bandwidth) - 1."""
    if 0 <= traffic <= bw:  # one send at most (integer division is slow)
        return 1 if traffic > 0 else 0
    # ceil(traffic / bw) as the floor quotient plus one where a remainder is left: the same
    # int64 as ``-(-traffic // bw)``, whose negative dividend takes the processor's full 64-bit
    # signed division, where a dividend >= 0 takes the 32-bit one whenever both fit
    q, r = divmod(traffic, bw)
    return 1 + (q + (r != 0)) - 1


# ---------------------------------------------------------------------------------------
# Regular mappings: the numpy path's closed forms (aspect._evaluate_regular), one row
# ---------------------------------------------------------------------------------------

@register_jitable
def regular_row(ints, dfull, tmask, f_x, f_y, sp_top, sp_in, m_top, o_top, m_in, o_in, perm, tt, w, tabs, out, lvi,
                ltab, stt, ncs, cs, dv):
    """Closed forms of a mapping without edge iterations at the top level (``out``
    written); returns False for any other mapping.

    Without top-level edges every top case hands its sub-clusters the same extents (the
    mapped sizes), so the sub-cluster runtime is one number: the numpy path's closed form
    when the inner level is one iteration (a regular mapping), else the inner level's case
    analysis (`_inner_runtime`, what ``analyze`` does for it)."""
    mapped_top, unique_top, mapped_in, fpos = tabs[0], tabs[1], tabs[2], tabs[3]
    nv = ints[_NV]
    iy, ix, ir, is_ = ints[_IY], ints[_IX], ints[_IR], ints[_IS]
    nsub = f_y
    for j in range(nv):
        v = perm[j]
        m, o, d = m_top[v], o_top[v], dfull[v]
        if v == sp_top:
            cover = m + o * (nsub - 1)
            n_steady = ((d - m) // o + 1) // nsub - 1
            init_unroll = d <= cover
            if d < cover or (not init_unroll and ((n_steady + 1) * o * nsub + cover > d
                                                  and n_steady * o * nsub + cover != d)):
                return False
            tt[j] = 1 + (n_steady if (cover < d and n_steady > 0) else 0)
        elif d == m:  # the whole dim in one step (the common case; no division)
            tt[j] = 1
        else:
            steady = (d - m) // o
            if d < m or steady * o + m < d:
                return False
            tt[j] = 1 + (steady if (m < d and steady > 0) else 0)
    single = f_x == 1
    inner_one = True
    if not single:
        for v in range(nv):
            if v == sp_in:
                if m_in[v] + o_in[v] * (f_x - 1) != m_top[v]:
                    inner_one = False
            elif m_in[v] != m_top[v]:
                inner_one = False
    # per-slot reuse tables (mapped / unique, Y' and X' appended)
    for v in range(nv):
        mapped_top[v] = m_top[v]
        u = min(m_top[v], o_top[v])
        unique_top[v] = 0 if (v != sp_top and dfull[v] <= m_top[v]) else u
        mapped_in[v] = m_in[v]
    mapped_top[nv] = m_top[iy] - m_top[ir] + 1
    mapped_top[nv + 1] = m_top[ix] - m_top[is_] + 1
    unique_top[nv] = min(o_top[iy], m_top[iy])
    unique_top[nv + 1] = min(o_top[ix], m_top[ix])
    mapped_in[nv] = m_in[iy] - m_in[ir] + 1
    mapped_in[nv + 1] = m_in[ix] - m_in[is_] + 1
    # partial sums per PE, egress per cluster
    psum_pe = 1
    e1 = 1
    e0 = 1
    for v in range(nv):
        act = nv if v == iy else (nv + 1 if v == ix else v)
        if tmask[_OUT, v]:
            psum_pe *= mapped_in[act]
            e1 *= mapped_top[act]
            if v == sp_top:
                uv = unique_top[act]
                e0 *= uv if uv != 0 else 1
            else:
                e0 *= mapped_top[act]
    psum_cl = e1
    for v in range(nv):
        if not tmask[_OUT, v]:
            psum_pe *= mapped_in[v]
            psum_cl *= mapped_top[v]
    psum_size = f_y * psum_cl
    total = 1
    for j in range(nv):
        w[j] = (tt[j] - 1) * total
        total *= tt[j]
    if total * psum_size != dfull[ints[_NV] + 2]:  # not exactly the problem's MACs: rejected, no more to count
        out[_MACS_COL] = total * psum_size
        return True
    egress = e1 + ((f_y - 1) * e0 if tmask[_OUT, sp_top] else 0)
    ing_in = 0
    for tn in range(2):
        vol = 1
        for v in range(nv):
            if tmask[tn, v]:
                vol *= m_in[v]
        ing_in += (f_x if tmask[tn, sp_in] else 1) * vol
    if inner_one:
        runtime_in = psum_pe + _noc(ing_in, ints[_NOC])
    else:
        _setup_inner(ints, dfull, f_x, sp_in, m_top, m_in, o_in, lvi, ltab, dv)
        for v in range(nv):
            dv[2, v] = m_top[v]
        dv[2, nv] = m_top[iy] - m_top[ir] + 1
        dv[2, nv + 1] = m_top[ix] - m_top[is_] + 1
        runtime_in = _inner_runtime(dv[2], ints, tmask, lvi, ltab, stt, ncs, cs)
    for tn in range(3):
        req = 2
        for v in range(nv):
            if tmask[tn, v]:
                req *= m_top[v] if single else m_in[v]
        out[_COUNTS + 4 * 3 + tn] = req  # l1_req
    compute = psum_cl if single else runtime_in
    s_pos = 0
    for j in range(nv):
        if perm[j] == sp_top:
            s_pos = j
    # operand traffic: the all-init case, and each changing position j; per operand,
    # ``excl[j]`` = the product of its mapped sizes but position j's, ``after[j]`` = whether a
    # directive of it inside j iterates (it re-initializes the operand)
    # ``excl2[j]`` the same without the SpatialMap's position too (``excl[j] // m_s`` where the
    # operand is indexed by the SpatialMap: a product, not a division; the sizes' products are
    # far below 2**63, so the two are the same int64)
    ing_init_sum = 0
    for tn in range(2):
        for j in range(nv):
            fpos[j] = m_top[perm[j]] if tmask[tn, perm[j]] else 1
        excl = tabs[4 + tn]
        after = tabs[6 + tn]
        excl2 = tabs[8 + tn]
        suffix = 1
        suffix2 = 1
        flag = 0
        for j in range(nv - 1, -1, -1):
            excl[j] = suffix
            excl2[j] = suffix2
            suffix *= fpos[j]
            if j != s_pos:
                suffix2 *= fpos[j]
            after[j] = flag
            if tmask[tn, perm[j]] and tt[j] > 1:
                flag = 1
        prefix = 1
        prefix2 = 1
        for j in range(nv):
            excl[j] *= prefix
            excl2[j] *= prefix2
            prefix *= fpos[j]
            if j != s_pos:
                prefix2 *= fpos[j]
        init = (f_y if tmask[tn, sp_top] else 1) * prefix
        ing_init_sum += init
        out[_COUNTS + 2 * 3 + tn] = init  # l2_read: the all-init share, cases added below
        out[_COUNTS + 5 * 3 + tn] = 2 * init  # l2_req
    l2_req_in = out[_COUNTS + 5 * 3 + _IN] + out[_COUNTS + 5 * 3 + _FILT]
    bw = ints[_OFF]
    off = max((l2_req_in // bw) // 2, ((2 * egress) // bw) // 2)
    delay0 = max(compute + _noc(ing_init_sum, ints[_NOC]), off)
    noc_out = _noc(egress, ints[_NOC])
    runtime = delay0
    u_s = unique_top[sp_top]
    m_s = m_top[sp_top]
    for j in range(nv):
        if w[j] == 0:  # position j never changes (one step): its cases occur 0 times, add nothing
            continue
        ing_j = 0
        vj = perm[j]
        for tn in range(2):
            if not tmask[tn, vj]:
                continue
            excl_j = tabs[4 + tn, j]
            after_j = tabs[6 + tn, j] != 0
            fj_first = max(unique_top[vj], 1) if (vj != sp_top and not after_j) else m_top[vj]
            ing = excl_j * fj_first
            if tmask[tn, sp_top]:  # unicast over the sub-clusters: the others bring less
                if j == s_pos:
                    pe0 = excl_j * (u_s if not after_j else m_s)
                else:
                    pe0 = tabs[8 + tn, j] * fj_first * (u_s if s_pos > j else m_s)
                ing += (f_y - 1) * pe0
            ing_j += ing
            out[_COUNTS + 2 * 3 + tn] += w[j] * ing
        delay = max(max(noc_out, compute), _noc(ing_j, ints[_NOC]))
        runtime += w[j] * max(delay, off)
    out[_RUNTIME] = runtime
    out[_MACS_COL] = total * psum_size
    size_out = 1
    for v in range(nv):
        if tmask[_OUT, v]:
            if v == iy:
                size_out *= dfull[iy] - dfull[ir] + 1
            elif v == ix:
                size_out *= dfull[ix] - dfull[is_] + 1
            else:
                size_out *= dfull[v]
    for tn in range(3):
        if tn == _OUT:
            out[_COUNTS + 3 * 3 + tn] = total * egress  # l2_write
            out[_COUNTS + 1 * 3 + tn] = total * psum_size  # l1_write
            out[_COUNTS + 0 * 3 + tn] = total * psum_size  # l1_read
            out[_COUNTS + 2 * 3 + tn] = size_out  # l2_read
            out[_COUNTS + 5 * 3 + tn] = 2 * egress  # l2_req
        else:
            out[_COUNTS + 1 * 3 + tn] = out[_COUNTS + 2 * 3 + tn]  # l1_write = l2_read
            out[_COUNTS + 0 * 3 + tn] = total * psum_size
            full = 1
            for v in range(nv):
                if tmask[tn, v]:
                    full *= dfull[v]
            out[_COUNTS + 3 * 3 + tn] = full  # l2_write
    return True


# ---------------------------------------------------------------------------------------
# Any mapping: the directive analysis (aspect_analysis.analyze) on fixed-size arrays
# ---------------------------------------------------------------------------------------
#
# Per cluster level li (0 = top, 1 = inner): ``lvi[li, i]`` = (slot, spatial, size, offset)
# of directive i, ``lvi[li, 7]`` = (n_sub, n_edge_sub, index of the SpatialMap, number of
# directives); ``ltab[li]`` = mapped / unique / mapped_edge / unique_edge per slot
# (aspect_analysis._prepare); ``stt[li, i, k]``
# the k-th iteration state of directive i (pos, occ, unrolled, init_edge, sp_edge_edge) and
# ``ncs[li]`` = (states per directive, case counter, counter period); ``cs[li, i]`` the state of
# directive i in the current case.

@register_jitable
def _prepare(li, dims, lvi, ltab, nv, iy, ix, ir, is_):
    """Spatial edge clusters and per-slot mapped / unique counts (aspect_analysis._prepare)."""
    nd = lvi[li, 7, _ND]
    spi = lvi[li, 7, _SPI]
    size, ofs, n = lvi[li, spi, 2], lvi[li, spi, 3], lvi[li, 7, _NSUB]
    dim_sz = dims[lvi[li, spi, 0]]
    full_cov = ofs * (n - 1) + size
    if dim_sz > full_cov:
        steady = ((dim_sz - size) // ofs + 1) // n - 1
        remaining = dim_sz - (steady + 1) * ofs * n
        n_edge = 1 if remaining < size else (remaining - size) // ofs + 1
    elif dim_sz > size:
        n_edge = (dim_sz - size) // ofs + 1
        if ofs * (n_edge - 1) + size < dim_sz:
            n_edge += 1
    else:
        n_edge = 1
    if dim_sz <= size:
        n_edge = 1
    lvi[li, 7, _NEDGE] = n_edge
    for i in range(nd):
        v, sp, size, ofs = lvi[li, i, 0], lvi[li, i, 1], lvi[li, i, 2], lvi[li, i, 3]
        d = dims[v]
        steady = max((d - size) // ofs, 0)
        has_edge = (steady * ofs + size < d) or (size > d)
        ltab[li, _MAPPED, v] = size
        ltab[li, _UNIQUE, v] = min(size, ofs)
        if sp == 0 and d <= size:  # fully unrolled in time: nothing new ever
            ltab[li, _UNIQUE, v] = 0
        edge_size = d - (steady + 1) * ofs
        if edge_size < 0:
            edge_size = d
        out_of_bound = size - edge_size
        ltab[li, _MEDGE, v] = edge_size if has_edge else size
        ltab[li, _UEDGE, v] = max(ofs - out_of_bound, 0)
    for k in range(2):
        v = iy if k == 0 else ix
        r = ir if k == 0 else is_
        o = nv + k
        i = 0
        for j in range(nd):
            if lvi[li, j, 0] == v:
                i = j
        size, ofs = lvi[li, i, 2], lvi[li, i, 3]
        ltab[li, _MAPPED, o] = ltab[li, _MAPPED, v] - ltab[li, _MAPPED, r] + 1
        ltab[li, _UNIQUE, o] = min(ofs, size)
        ltab[li, _MEDGE, o] = ltab[li, _MEDGE, v] - ltab[li, _MEDGE, r] + 1
        ltab[li, _UEDGE, o] = min(ofs, ltab[li, _MEDGE, o])


@register_jitable
def _states(li, dims, lvi, stt, ncs):
    """Iteration states of every directive under ``dims`` (aspect_analysis._dim_states) and
    the case counters of MAESTRO's enumeration (aspect_analysis._cases). Returns the number
    of cases."""
    nd = lvi[li, 7, _ND]
    for i in range(nd):
        sp, size, ofs = lvi[li, i, 1], lvi[li, i, 2], lvi[li, i, 3]
        d = dims[lvi[li, i, 0]]
        k = 0
        if sp == 0:
            n_steady = (d - size) // ofs
            _set_state(stt, li, i, k, _INIT, 1, d <= size, d < size, False)
            k += 1
            if size < d and n_steady > 0:
                _set_state(stt, li, i, k, _STEADY, n_steady, False, False, False)
                k += 1
            if not d < size and n_steady * ofs + size < d:
                _set_state(stt, li, i, k, _EDGE, 1, False, False, False)
                k += 1
        else:
            n = lvi[li, 7, _NSUB]
            cover = size + ofs * (n - 1)
            init_unroll = d <= cover
            init_edge = d < cover
            _set_state(stt, li, i, k, _INIT, 1, init_unroll, init_edge, init_edge)
            k += 1
            n_steady = ((d - size) // ofs + 1) // n - 1
            has_edge = (not init_unroll) and ((n_steady + 1) * (ofs * n) + cover > d
                                              and n_steady * (ofs * n) + cover != d)
            if cover < d and n_steady > 0:
                _set_state(stt, li, i, k, _STEADY, n_steady, False, False, False)
                k += 1
            remaining = d - (n_steady + 1) * ofs * n
            n_active = 1 if remaining < size else (remaining - size) // ofs + 1
            sp_ee = (n_active - 1) * ofs + size < remaining
            if not init_edge and has_edge:
                _set_state(stt, li, i, k, _EDGE, 1, False, False, sp_ee)
                k += 1
        ncs[li, 0, i] = k
        ncs[li, 1, i] = 0
    total = 1
    for i in range(nd - 1, -1, -1):
        ncs[li, 2, i] = total
        ncs[li, 3, i] = 0
        total *= ncs[li, 0, i]
    return total


@register_jitable
def _set_state(stt, li, i, k, pos, occ, unrolled, init_edge, spee):
    stt[li, i, k, _POS] = pos
    stt[li, i, k, _OCC] = occ
    stt[li, i, k, _UNROLLED] = 1 if unrolled else 0
    stt[li, i, k, _INIT_EDGE] = 1 if init_edge else 0
    stt[li, i, k, _SPEE] = 1 if spee else 0


@njit(inline="always", _nrt=False)  # type: ignore[call-overload]
def _load_state(li, i, k, stt, cs):
    """Directive i in its k-th iteration state (``cs[li, i]``; ``_INIT_EDGE`` = whether the
    state is an edge: an edge state or an edge init); returns the state's position."""
    pos = stt[li, i, k, _POS]
    cs[li, i, _POS] = pos
    cs[li, i, _UNROLLED] = stt[li, i, k, _UNROLLED]
    cs[li, i, _INIT_EDGE] = 1 if (pos == _EDGE or stt[li, i, k, _INIT_EDGE] != 0) else 0
    cs[li, i, _SPEE] = stt[li, i, k, _SPEE]
    return pos


@register_jitable
def _next_case(li, case, nd, stt, ncs, cs, lvi):
    """The states of case ``case`` into ``cs[li]`` (MAESTRO's counter walk: directive i's
    counter moves on at every multiple of its period, ``ncs[li, 3, i]`` holding the next one;
    ``cs[li, i, _INIT_EDGE]`` holds whether the state is an edge); returns its number of
    occurrences. The case's changing directive (the innermost one not in its init state, -1
    for none) goes to ``lvi[li, 7, _CHG]``."""
    occ = 1
    changing = -1
    for i in range(nd):
        k = ncs[li, 1, i]
        pos = _load_state(li, i, k, stt, cs)
        occ *= stt[li, i, k, _OCC]
        if pos != _INIT:
            changing = i
        if case == ncs[li, 3, i]:
            ncs[li, 1, i] = 0 if k + 1 == ncs[li, 0, i] else k + 1
            ncs[li, 3, i] += ncs[li, 2, i]
    lvi[li, 7, _CHG] = changing
    return occ


@register_jitable
def _is_edge(cs, li, i):
    return cs[li, i, _INIT_EDGE] != 0  # set by _next_case: an edge state or an edge init


@register_jitable
def _pe_mapped_volume(li, tm, first, spee, lvi, ltab, cs):
    ret = 1
    ne = lvi[li, 7, _NEDGE]
    for i in range(lvi[li, 7, _ND]):
        v = lvi[li, i, 0]
        if not tm[v]:
            continue
        edge = _is_edge(cs, li, i)
        if lvi[li, i, 1] == 0:
            ret *= ltab[li, _MEDGE, v] if edge else ltab[li, _MAPPED, v]
        elif edge:
            if ne == 1 and (first or spee):
                ret *= ltab[li, _MEDGE, v]
            elif ne > 1:
                ret *= ltab[li, _MEDGE, v] if spee else ltab[li, _MAPPED, v]
        else:
            ret *= ltab[li, _MAPPED, v]
    return ret


@register_jitable
def _pe_ingress_volume(li, tm, first, spee, lvi, ltab, cs):
    nd = lvi[li, 7, _ND]
    changing = lvi[li, 7, _CHG]
    if changing == -1:
        return _pe_mapped_volume(li, tm, first, spee, lvi, ltab, cs)
    inited = False
    for i in range(changing + 1, nd):
        if cs[li, i, _POS] == _INIT and tm[lvi[li, i, 0]] and cs[li, i, _UNROLLED] == 0:
            inited = True
    ret = 1
    changes = False
    mt = _MEDGE if spee else _MAPPED
    ut = _UEDGE if spee else _UNIQUE
    for i in range(nd):
        v = lvi[li, i, 0]
        if not tm[v]:
            continue
        is_changing = i == changing
        is_reset = i > changing
        if is_changing:
            changes = True
        pos = cs[li, i, _POS]
        if lvi[li, i, 1] == 0:
            if pos == _INIT:
                ret *= ltab[li, _MEDGE, v] if _is_edge(cs, li, i) else ltab[li, _MAPPED, v]
            elif is_changing and not inited:
                ret *= max(ltab[li, _UNIQUE, v], 1)
            else:
                ret *= ltab[li, _MAPPED, v]
        elif pos == _INIT:
            ret *= ltab[li, mt, v] if (first or not is_reset) else ltab[li, ut, v]
        elif first:
            ret *= ltab[li, mt, v]
        else:
            ret *= ltab[li, ut, v] if (not inited and is_changing) else ltab[li, mt, v]
    return ret if changes else 0


@register_jitable
def _ingress(li, tm, lvi, ltab, cs):
    spi = lvi[li, 7, _SPI]
    if not tm[lvi[li, spi, 0]]:
        return _pe_ingress_volume(li, tm, True, False, lvi, ltab, cs)
    n, ne = lvi[li, 7, _NSUB], lvi[li, 7, _NEDGE]
    if not _is_edge(cs, li, spi):
        ret = _pe_ingress_volume(li, tm, True, False, lvi, ltab, cs)
        if n > 1:
            ret += (n - 1) * _pe_ingress_volume(li, tm, False, False, lvi, ltab, cs)
        return ret
    spee = cs[li, spi, _SPEE] != 0
    ret = _pe_ingress_volume(li, tm, True, ne == 1 and spee, lvi, ltab, cs)
    if ne > 1:
        n_ee = 1 if spee else 0
        n_full = max(ne - n_ee - 1, 0)
        if n_full:
            ret += n_full * _pe_ingress_volume(li, tm, False, False, lvi, ltab, cs)
        if n_ee:
            ret += _pe_ingress_volume(li, tm, False, True, lvi, ltab, cs)
    return ret


@register_jitable
def _sp_out_factor(li, v, i, first, spee, lvi, ltab, cs):
    """Spatial factor of a reduction slot in the partial-sum count."""
    ne = lvi[li, 7, _NEDGE]
    pos = cs[li, i, _POS]
    if pos == _INIT:
        if _is_edge(cs, li, i) and spee:
            return ltab[li, _MEDGE, v]
        if first:
            return ltab[li, _MAPPED, v]
        u = ltab[li, _UNIQUE, v]
        return u if u != 0 else 1
    if pos == _STEADY:
        if first:
            return ltab[li, _MAPPED, v]
        u = ltab[li, _UNIQUE, v]
        return u if u != 0 else 1
    if ne == 1 and (first or spee):
        return ltab[li, _MEDGE, v]
    if ne > 1:
        if spee:
            return ltab[li, _UEDGE, v]
        if first:
            return ltab[li, _MAPPED, v]
        u = ltab[li, _UNIQUE, v]
        return u if u != 0 else 1
    return 1


@njit(inline="always", _nrt=False)  # type: ignore[call-overload]
def _egress_term(li, i, tm, psums, first, spee, reuse_at_edge, lvi, ltab, cs, nv, iy, ix):
    """Directive i's factor of `_pe_egress_volume` in the current case: with ``psums`` the
    spatial or temporal extent of a slot the output does not index (a reduction), and for a
    slot it indexes its output extent (Y' and X' for the rows and columns)."""
    v = lvi[li, i, 0]
    ne = lvi[li, 7, _NEDGE]
    edge = _is_edge(cs, li, i)
    temporal = lvi[li, i, 1] == 0
    f = 1
    if not tm[v]:
        if psums:
            if temporal:
                f = ltab[li, _MEDGE, v] if edge else ltab[li, _MAPPED, v]
            else:
                f = _sp_out_factor(li, v, i, first, spee, lvi, ltab, cs)
    else:
        act = nv if v == iy else (nv + 1 if v == ix else v)
        pos = cs[li, i, _POS]
        if temporal:
            if pos == _INIT:
                f = ltab[li, _MEDGE, act] if edge else ltab[li, _MAPPED, act]
            elif pos == _STEADY:
                f = ltab[li, _MAPPED, act]
            else:
                f = ltab[li, _MEDGE, act]
        elif pos == _INIT and edge and spee:
            if ne == 1 or not reuse_at_edge:
                f = ltab[li, _MEDGE, act]
            else:
                f = ltab[li, _UEDGE, act]
        elif pos == _INIT or pos == _STEADY:
            if first:
                f = ltab[li, _MAPPED, act]
            elif ltab[li, _UNIQUE, act] != 0:
                f = ltab[li, _UNIQUE, act]
        elif ne == 1 and (first or spee):
            f = ltab[li, _MEDGE, v]  # the reference uses the input slot here
        elif ne > 1:
            if spee:
                f = ltab[li, _UEDGE, act]
            elif first:
                f = ltab[li, _MAPPED, act]
            elif ltab[li, _UNIQUE, act] != 0:
                f = ltab[li, _UNIQUE, act]
    return f


@register_jitable
def _pe_egress_volume(li, tm, psums, first, spee, reuse_at_edge, lvi, ltab, cs, nv, iy, ix):
    """Partial sums per PE (``psums``: the reduction slots' extents too) or output volume per
    PE in the current case: the product of the directives' factors (`_egress_term`)."""
    ret = 1
    for i in range(lvi[li, 7, _ND]):
        ret *= _egress_term(li, i, tm, psums, first, spee, reuse_at_edge, lvi, ltab, cs, nv, iy, ix)
    return ret


@register_jitable
def _egress(li, tm, lvi, ltab, cs, nv, iy, ix):
    spi = lvi[li, 7, _SPI]
    if not tm[lvi[li, spi, 0]]:
        return _pe_egress_volume(li, tm, False, True, False, True, lvi, ltab, cs, nv, iy, ix)
    n, ne = lvi[li, 7, _NSUB], lvi[li, 7, _NEDGE]
    if not _is_edge(cs, li, spi):
        ret = _pe_egress_volume(li, tm, False, True, False, True, lvi, ltab, cs, nv, iy, ix)
        if n > 1:
            ret += (n - 1) * _pe_egress_volume(li, tm, False, False, False, True, lvi, ltab, cs, nv, iy, ix)
        return ret
    spee = cs[li, spi, _SPEE] != 0
    ret = _pe_egress_volume(li, tm, False, True, ne == 1 and spee, True, lvi, ltab, cs, nv, iy, ix)
    if ne > 1:
        n_ee = 1 if spee else 0
        n_full = max(ne - n_ee - 1, 0)
        if n_full:
            ret += n_full * _pe_egress_volume(li, tm, False, False, False, True, lvi, ltab, cs, nv, iy, ix)
        if n_ee:
            ret += _pe_egress_volume(li, tm, False, False, True, True, lvi, ltab, cs, nv, iy, ix)
    return ret


@register_jitable
def _critical_psums(li, tm, lvi, ltab, cs, nv, iy, ix):
    spi = lvi[li, 7, _SPI]
    if not tm[lvi[li, spi, 0]]:
        return _pe_egress_volume(li, tm, True, True, False, True, lvi, ltab, cs, nv, iy, ix)
    if not _is_edge(cs, li, spi):
        return _pe_egress_volume(li, tm, True, True, False, True, lvi, ltab, cs, nv, iy, ix)
    spee = lvi[li, 7, _NEDGE] == 1 and cs[li, spi, _SPEE] != 0
    return _pe_egress_volume(li, tm, True, True, spee, True, lvi, ltab, cs, nv, iy, ix)


@register_jitable
def _psum_mapping_size(li, tm, lvi, ltab, cs, nv, iy, ix):
    """MACs over the whole sub-cluster array in this case."""
    spi = lvi[li, 7, _SPI]
    n, ne = lvi[li, 7, _NSUB], lvi[li, 7, _NEDGE]
    if not _is_edge(cs, li, spi):
        return n * _pe_egress_volume(li, tm, True, True, False, True, lvi, ltab, cs, nv, iy, ix)
    spee = cs[li, spi, _SPEE] != 0
    ret = _pe_egress_volume(li, tm, True, True, ne == 1 and spee, True, lvi, ltab, cs, nv, iy, ix)
    if ne > 1:
        n_ee = 1 if spee else 0
        n_full = max(ne - n_ee - 1, 0)
        if n_full:
            ret += n_full * _pe_egress_volume(li, tm, True, True, False, True, lvi, ltab, cs, nv, iy, ix)
        if n_ee:
            ret += _pe_egress_volume(li, tm, True, False, True, False, lvi, ltab, cs, nv, iy, ix)
    return ret


@register_jitable
def _mapped_volume(li, tm, ltab, nv):
    ret = 1
    for v in range(nv):
        if tm[v]:
            ret *= ltab[li, _MAPPED, v]
    return ret


@register_jitable
def _sub_cluster_dims(li, spee, lvi, ltab, cs, out, nv, iy, ix, ir, is_):
    ne = lvi[li, 7, _NEDGE]
    for i in range(lvi[li, 7, _ND]):
        v = lvi[li, i, 0]
        pos = cs[li, i, _POS]
        edge = _is_edge(cs, li, i)
        if lvi[li, i, 1] == 0:
            out[v] = ltab[li, _MEDGE, v] if edge else ltab[li, _MAPPED, v]
        elif pos == _STEADY or (pos == _INIT and not edge):
            out[v] = ltab[li, _MAPPED, v]
        else:
            out[v] = ltab[li, _MEDGE, v] if (ne == 1 or spee) else ltab[li, _MAPPED, v]
    out[nv] = out[iy] - out[ir] + 1
    out[nv + 1] = out[ix] - out[is_] + 1


@register_jitable
def _inner_runtime(dims, ints, tmask, lvi, ltab, stt, ncs, cs):
    """Runtime of the inner cluster level (level 1) under sub-cluster extents ``dims``:
    per case, partial sums per PE (one SIMD lane) and the NoC delays, double buffered."""
    nv, iy, ix = ints[_NV], ints[_IY], ints[_IX]
    nd = lvi[1, 7, _ND]
    total = _states(1, dims, lvi, stt, ncs)
    runtime = 0
    for case in range(total):
        occ = _next_case(1, case, nd, stt, ncs, cs, lvi)
        egress = _egress(1, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
        psums = _critical_psums(1, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
        if psums <= 0:
            continue
        ingress = _ingress(1, tmask[_IN], lvi, ltab, cs) + _ingress(1, tmask[_FILT], lvi, ltab, cs)
        compute = psums
        in_delay = _noc(ingress, ints[_NOC])
        out_delay = _noc(egress, ints[_NOC])
        all_init = lvi[1, 7, _CHG] == -1
        delay = compute + in_delay if all_init else max(max(out_delay, compute), in_delay)
        runtime += occ * delay
    return runtime


@register_jitable
def _inner_memo(dims, ints, tmask, lvi, ltab, stt, ncs, cs, mk, mr, nm):
    """`_inner_runtime`, memoized per row on the sub-cluster extents (``nm[0]`` entries)."""
    nv = ints[_NV]
    for e in range(nm[0]):
        same = True
        for v in range(nv):
            if mk[e, v] != dims[v]:
                same = False
                break
        if same:
            return mr[e]
    r = _inner_runtime(dims, ints, tmask, lvi, ltab, stt, ncs, cs)
    if nm[0] < mk.shape[0]:
        for v in range(nv):
            mk[nm[0], v] = dims[v]
        mr[nm[0]] = r
        nm[0] += 1
    return r


@register_jitable
def _setup_inner(ints, dfull, f_x, sp_in, m_top, m_in, o_in, lvi, ltab, dv):
    """The inner cluster level (level 1): directives in slot order over the per-PE tiles,
    ``f_x`` sub-clusters, static extents = the top level's mapped sizes (within the layer)."""
    nv = ints[_NV]
    for v in range(nv):
        lvi[1, v, 0] = v
        lvi[1, v, 1] = 1 if v == sp_in else 0
        lvi[1, v, 2] = m_in[v]
        lvi[1, v, 3] = o_in[v]
        dv[1, v] = min(m_top[v], dfull[v])
    lvi[1, 7, _SPI] = sp_in
    lvi[1, 7, _ND] = nv
    lvi[1, 7, _NSUB] = f_x
    _prepare(1, dv[1], lvi, ltab, nv, ints[_IY], ints[_IX], ints[_IR], ints[_IS])


@register_jitable
def _macs_factored(tm, lvi, ltab, stt, ncs, cs, nv, iy, ix):
    """The top level's MAC count (``general_row``'s first pass: per case its occurrences
    times the partial sums over the sub-cluster array) without walking the cases: returns
    (done, macs), done False where the sum does not factor as below (then the cases are
    walked).

    A case's partial sums over the array are a product of one factor per directive
    (`_egress_term`); only the SpatialMap's factor depends on the sub-cluster flags, and a
    case's occurrences are the product of its states' occurrences over the full mixed-radix
    product of states (`_next_case`). So the sum over cases is the product over the
    temporal directives of their sums over states (occurrences times factor), times the
    SpatialMap's sum over its states of occurrences times its per-case array factor -- the
    same int64 terms regrouped (int64 arithmetic is a ring: any grouping gives the same
    bits). The walk skips a case whose critical partial sums are <= 0; that filter factors
    too when every temporal factor is >= 1 (a case is then skipped exactly when the
    SpatialMap's critical factor is <= 0), else the answer is not done. ``_states`` must
    have run for level 0; the counters are left as they were, ``cs[0]`` overwritten."""
    nd = lvi[0, 7, _ND]
    spi = lvi[0, 7, _SPI]
    ne, n = lvi[0, 7, _NEDGE], lvi[0, 7, _NSUB]
    prod = 1
    bound = 1.0  # the largest |partial sums| of a case, in float: no case may wrap around
    for i in range(nd):
        if i == spi:
            continue
        acc = 0
        top = 0
        for k in range(ncs[0, 0, i]):
            _load_state(0, i, k, stt, cs)
            f = _egress_term(0, i, tm, True, True, False, True, lvi, ltab, cs, nv, iy, ix)
            if f < 1:
                return False, 0
            top = max(top, f)
            acc += stt[0, i, k, _OCC] * f
        prod *= acc
        bound *= top
    sp_out = tm[lvi[0, spi, 0]]
    acc = 0
    for k in range(ncs[0, 0, spi]):
        _load_state(0, spi, k, stt, cs)
        edge = _is_edge(cs, 0, spi)
        spee = cs[0, spi, _SPEE] != 0
        # _critical_psums' SpatialMap factor
        crit = _egress_term(0, spi, tm, True, True, (ne == 1 and spee) if (sp_out and edge) else False, True, lvi,
                            ltab, cs, nv, iy, ix)
        if abs(crit) * bound >= 2.0 ** 61:
            return False, 0
        if crit <= 0:
            continue
        if not edge:
            q = n * crit
        else:  # _psum_mapping_size's SpatialMap factor
            q = _egress_term(0, spi, tm, True, True, ne == 1 and spee, True, lvi, ltab, cs, nv, iy, ix)
            if ne > 1:
                n_ee = 1 if spee else 0
                n_full = max(ne - n_ee - 1, 0)
                if n_full:
                    q += n_full * _egress_term(0, spi, tm, True, False, False, True, lvi, ltab, cs, nv, iy, ix)
                if n_ee:
                    q += _egress_term(0, spi, tm, True, False, True, False, lvi, ltab, cs, nv, iy, ix)
        acc += stt[0, spi, k, _OCC] * q
    return True, prod * acc


@register_jitable
def general_row(ints, dfull, tmask, f_x, f_y, sp_top, sp_in, m_top, o_top, m_in, o_in, perm, lvi, ltab, stt,
                ncs, cs, res, dv, mk, mr, nm, out):
    """The directive analysis of one mapping (``out`` written; MACs unchecked)."""
    nv, iy, ix, ir, is_ = ints[_NV], ints[_IY], ints[_IX], ints[_IR], ints[_IS]
    two = f_x > 1
    # cluster levels (aspect_analysis._build_levels): top = the plan's order, inner = slot order
    for j in range(nv):
        v = perm[j]
        lvi[0, j, 0] = v
        lvi[0, j, 1] = 1 if v == sp_top else 0
        lvi[0, j, 2] = m_top[v]
        lvi[0, j, 3] = o_top[v]
        if v == sp_top:
            lvi[0, 7, _SPI] = j
    lvi[0, 7, _ND] = nv
    lvi[0, 7, _NSUB] = f_y
    for v in range(nv + 2):
        dv[0, v] = dfull[v]
    _prepare(0, dv[0], lvi, ltab, nv, iy, ix, ir, is_)
    if two:
        _setup_inner(ints, dfull, f_x, sp_in, m_top, m_in, o_in, lvi, ltab, dv)
    nm[0] = 0
    inner_called = False
    # the top level (aspect_analysis._Analysis._level with li = 0)
    for r in range(6):
        for t in range(3):
            res[r, t] = 0
    runtime = 0
    macs = 0
    nd = nv
    spi = lvi[0, 7, _SPI]
    # MACs first (the top level's partial sums alone): a directive form that does not do
    # exactly the problem's MACs is rejected without the rest of the analysis
    total = _states(0, dv[0], lvi, stt, ncs)
    done, macs = _macs_factored(tmask[_OUT], lvi, ltab, stt, ncs, cs, nv, iy, ix)
    if not done:  # the cases one by one
        for case in range(total):
            occ = _next_case(0, case, nd, stt, ncs, cs, lvi)
            psums = _critical_psums(0, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
            if psums <= 0:
                continue
            if _is_edge(cs, 0, spi):
                macs += occ * _psum_mapping_size(0, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
            else:
                macs += occ * lvi[0, 7, _NSUB] * psums
        total = _states(0, dv[0], lvi, stt, ncs)  # (the counters from the start again)
    if macs != dfull[ints[_NV] + 2]:
        out[_MACS_COL] = macs
        return
    macs = 0
    off = 0
    for case in range(total):
        occ = _next_case(0, case, nd, stt, ncs, cs, lvi)
        if case == 0:  # buffer requirements come from the first (all-init) case
            for t in range(2):
                res[_UP_REQ, t] += 2 * _ingress(0, tmask[t], lvi, ltab, cs)
                full = 1
                for v in range(nv):
                    if tmask[t, v]:
                        full *= dv[0, v]
                res[_UP_WRITE, t] = full
                res[_DOWN_REQ, t] += 2 * _mapped_volume(0, tmask[t], ltab, nv)
            size = 1
            for v in range(nv):
                if tmask[_OUT, v]:
                    if v == iy:
                        size *= dv[0, iy] - dv[0, ir] + 1
                    elif v == ix:
                        size *= dv[0, ix] - dv[0, is_] + 1
                    else:
                        size *= dv[0, v]
            res[_UP_REQ, _OUT] = 2 * _egress(0, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
            res[_UP_READ, _OUT] = size
            res[_DOWN_REQ, _OUT] = 2 * _mapped_volume(0, tmask[_OUT], ltab, nv)
            bw = ints[_OFF]
            off = max((res[_UP_REQ, _OUT] // bw) // 2, ((res[_UP_REQ, _IN] + res[_UP_REQ, _FILT]) // bw) // 2)
        egress = _egress(0, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
        psums = _critical_psums(0, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
        if _is_edge(cs, 0, spi):
            psum_size = _psum_mapping_size(0, tmask[_OUT], lvi, ltab, cs, nv, iy, ix)
        else:  # every sub-cluster does the critical one's partial sums
            psum_size = lvi[0, 7, _NSUB] * psums
        res[_UP_WRITE, _OUT] += occ * egress
        res[_DOWN_WRITE, _OUT] += occ * psum_size
        res[_DOWN_READ, _OUT] += occ * psum_size
        if psums <= 0:
            continue
        ingress = 0
        for t in range(2):
            tr = _ingress(0, tmask[t], lvi, ltab, cs)
            ingress += tr
            res[_UP_READ, t] += occ * tr
            # the reference tool sets the L1 writes of an operand to its L2 reads
            res[_DOWN_WRITE, t] = res[_UP_READ, t]
            res[_DOWN_READ, t] += occ * psum_size
        if two:
            inner_called = True
            if _is_edge(cs, 0, spi):
                if cs[0, spi, _SPEE] != 0:
                    _sub_cluster_dims(0, True, lvi, ltab, cs, dv[2], nv, iy, ix, ir, is_)
                    compute = _inner_memo(dv[2], ints, tmask, lvi, ltab, stt, ncs, cs, mk, mr, nm)
                    if lvi[0, 7, _NEDGE] - 1 > 0:
                        _sub_cluster_dims(0, False, lvi, ltab, cs, dv[2], nv, iy, ix, ir, is_)
                        compute = max(compute, _inner_memo(dv[2], ints, tmask, lvi, ltab, stt, ncs, cs, mk,
                                                           mr, nm))
                else:
                    _sub_cluster_dims(0, False, lvi, ltab, cs, dv[2], nv, iy, ix, ir, is_)
                    compute = _inner_memo(dv[2], ints, tmask, lvi, ltab, stt, ncs, cs, mk, mr, nm)
            else:
                _sub_cluster_dims(0, False, lvi, ltab, cs, dv[2], nv, iy, ix, ir, is_)
                compute = _inner_memo(dv[2], ints, tmask, lvi, ltab, stt, ncs, cs, mk, mr, nm)
        else:
            compute = psums  # one SIMD lane per PE
        in_delay = _noc(ingress, ints[_NOC])
        out_delay = _noc(egress, ints[_NOC])
        all_init = lvi[0, 7, _CHG] == -1
        delay = compute + in_delay if all_init else max(max(out_delay, compute), in_delay)
        delay = max(delay, off)  # the off-chip delay of the L2 tile bounds every case
        runtime += occ * delay
        macs += occ * psum_size
    out[_RUNTIME] = runtime
    out[_MACS_COL] = macs
    for t in range(3):
        out[_COUNTS + 0 * 3 + t] = res[_DOWN_READ, t]
        out[_COUNTS + 1 * 3 + t] = res[_DOWN_WRITE, t]
        out[_COUNTS + 2 * 3 + t] = res[_UP_READ, t]
        out[_COUNTS + 3 * 3 + t] = res[_UP_WRITE, t]
        # L1 requirement: the inner level's (the first one analysed), else the top's
        out[_COUNTS + 4 * 3 + t] = 2 * _mapped_volume(1, tmask[t], ltab, nv) if inner_called else res[_DOWN_REQ, t]
        out[_COUNTS + 5 * 3 + t] = res[_UP_REQ, t]


# ---------------------------------------------------------------------------------------
# Drivers
# ---------------------------------------------------------------------------------------

@register_jitable
def eval_range(lo, hi, temporal, spatial, order, keep, ints, src, dfull, tmask, bounds, holds, fan_xy, out, codes,
               sc):
    """Rows lo..hi-1: ``out[i]`` the counts (zeros where the row is not evaluated) and
    ``codes[i]`` = (reason, level): a legality `Reason` (capacity excluded), ``MODEL`` when
    the mapping has no directive form or its directive form does not do exactly the
    problem's MACs, else (0, -1). ``sc``: one block's scratch (`_scratch`), a tuple (a call
    of more than 30 arguments compiles to a ``*args`` call, which numba cannot inline)."""
    pe, cl, tiles, perm, lrank, lvl, tt, w, tabs, lvi, ltab, stt, ncs, cs, res, dv, mk, mr, nm = sc
    m_top, o_top, m_in, o_in = tiles[0], tiles[1], tiles[2], tiles[3]
    for i in range(lo, hi):
        row = out[i]
        for c in range(N_COLS):
            row[c] = 0
        reason, level = check_row(i, temporal, spatial, order, keep, ints, bounds, holds, fan_xy)
        codes[i, 0] = reason
        codes[i, 1] = level
        if reason != 0:
            continue
        ok, f_x, f_y, sp_top, sp_in = plan_row(i, temporal, spatial, order, ints, src, dfull, pe, cl, m_top, o_top,
                                               m_in, o_in, perm, tt, lrank, lvl)
        if not ok:
            codes[i, 0] = ints[_R_MODEL]
            continue
        if not regular_row(ints, dfull, tmask, f_x, f_y, sp_top, sp_in, m_top, o_top, m_in, o_in, perm, tt, w, tabs,
                           row, lvi, ltab, stt, ncs, cs, dv):
            general_row(ints, dfull, tmask, f_x, f_y, sp_top, sp_in, m_top, o_top, m_in, o_in, perm, lvi, ltab,
                        stt, ncs, cs, res, dv, mk, mr, nm, row)
        if row[_MACS_COL] != dfull[ints[_NV] + 2]:
            codes[i, 0] = ints[_R_MODEL]
            for c in range(N_COLS):
                out[i, c] = 0


_JIT = {"cache": True, "_nrt": False}

# The rules inlined into the CPU driver's row loop (numba's IR stage): a legal regular row
# then makes no call. The case analysis stays calls of the rules themselves.
_INLINE = ("check_row", "_tiles", "plan_row", "regular_row")


def _inlined_rules() -> dict:
    """The row loop again, for the CPU driver ``eval_rows``: ``eval_range`` and the rules of
    `_INLINE`, each the same code object compiled as an njit function (``inline="always"``
    for the rules), whose calls of those rules resolve to these copies and of the others to
    the rules themselves. (As ``inline="always"`` overloads, ``register_jitable(inline=...)``,
    the rules would be compiled on their own first and typed again where inlined, and numba's
    SSA pass warns on their scopes; copying every rule, the case analysis too, took the cold
    compile from about 21 s to 59 s.) Each rule called as a function passes its arrays as
    by-value structures: ``regular_row`` takes 22, once a row."""
    ns = dict(globals())
    out = {}
    for name in (*_INLINE, "eval_range"):
        fn = globals()[name]
        copy = types.FunctionType(fn.__code__, ns, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        out[name] = njit(inline="always" if name in _INLINE else "never", _nrt=False)(copy)  # type: ignore[call-overload]  # _nrt: a numba flag its stubs leave out
        ns[name] = out[name]
    return out


_INLINED = _inlined_rules()
_eval_range_inlined = _INLINED["eval_range"]


@njit(nogil=True, **_JIT)  # type: ignore[call-overload]
def eval_rows(temporal, spatial, order, keep, ints, src, dfull, tmask, bounds, holds, fan_xy, out, codes, pe, cl,
              tiles, perm, lrank, lvl, tt, w, tabs, lvi, ltab, stt, ncs, cs, res, dv, mk, mr, nm):
    """Every row of a batch (or of a block of rows: slices of the batch) on the calling
    thread, with one worker's scratch; `evaluate_rows` runs blocks on several threads."""
    _eval_range_inlined(0, temporal.shape[0], temporal, spatial, order, keep, ints, src, dfull, tmask, bounds,
                        holds, fan_xy, out, codes,
                        (pe, cl, tiles, perm, lrank, lvl, tt, w, tabs, lvi, ltab, stt, ncs, cs, res, dv, mk, mr, nm))


def _scratch(n_blocks: int, D: int) -> tuple[np.ndarray, ...]:
    """Per-block scratch: pe, cl, tiles, perm, lrank, lvl, tt, w, tabs, lvi, ltab, stt,
    ncs, cs, res, dv, mk, mr, nm."""
    e, i8 = np.empty, np.int64
    return (e((n_blocks, D), i8), e((n_blocks, D), i8), e((n_blocks, 4, 9), i8), e((n_blocks, 9), i8),
            e((n_blocks, D), i8), e((n_blocks, D), i8), e((n_blocks, 9), i8), e((n_blocks, 9), i8),
            e((n_blocks, 10, 9), i8), e((n_blocks, 2, 8, 8), i8), e((n_blocks, 2, 4, 9), i8),
            e((n_blocks, 2, 7, 3, 5), i8), e((n_blocks, 2, 4, 7), i8), e((n_blocks, 2, 7, 5), i8),
            e((n_blocks, 6, 3), i8), e((n_blocks, 3, 9), i8), e((n_blocks, MEMO, 9), i8), e((n_blocks, MEMO), i8),
            e((n_blocks, 1), i8))


# Below this many rows a batch runs on the calling thread (starting the pool costs more).
_PARALLEL_MIN_ROWS = 4096


@njit(**_JIT)  # type: ignore[call-overload]
def metrics_rows(out, codes, ints, tensor, l1_level, caps, read_pj, write_pj, scal, cycles, energy, compute_pj, util,
                 valid, reads, fills, updates, breakdown):
    """`aspect._metrics` row by row: MAESTRO's buffer requirements against the capacities
    (the L2 first, then each L1 level from the outermost), counts placed on accelmap's
    levels, energies. ``codes`` is updated; the (n, L, T) arrays come zeroed."""
    n = out.shape[0]
    a = ints[_A]
    L = caps.shape[0]
    for i in range(n):
        reason = codes[i, 0]
        if reason == 0:
            need = out[i, _COUNTS + 5 * 3] + out[i, _COUNTS + 5 * 3 + 1] + out[i, _COUNTS + 5 * 3 + 2]
            if need > caps[a]:
                codes[i, 0] = ints[_R_CAPACITY]
                codes[i, 1] = a
            else:
                for lv in range(a + 1, L):
                    need = 0
                    used = False
                    for j in range(3):
                        if l1_level[j] == lv:
                            need += out[i, _COUNTS + 4 * 3 + j]
                            used = True
                    if used and need > caps[lv]:
                        codes[i, 0] = ints[_R_CAPACITY]
                        codes[i, 1] = lv
                        break
        if codes[i, 0] != 0:
            valid[i] = False
            cycles[i] = np.inf
            energy[i] = np.inf
            compute_pj[i] = 0.0
            util[i] = 0.0
            continue
        valid[i] = True
        for j in range(3):
            t = tensor[j]
            l1 = l1_level[j]
            l1_rd, l1_wr = out[i, _COUNTS + j], out[i, _COUNTS + 3 + j]
            l2_rd, l2_wr = out[i, _COUNTS + 6 + j], out[i, _COUNTS + 9 + j]
            reads[i, a, t] = l2_rd
            if j == _OUT:
                updates[i, a, t] = l2_wr
                if l1 >= 0:
                    reads[i, l1, t] = l1_rd
                    updates[i, l1, t] = l1_wr
                if a > 0:
                    updates[i, 0, t] = l2_rd  # the write-back
            else:
                fills[i, a, t] = l2_wr
                if l1 >= 0:
                    reads[i, l1, t] = l1_rd
                    fills[i, l1, t] = l1_wr
                if a > 0:
                    reads[i, 0, t] = l2_wr
        c = scal[0] * scal[2]
        e = 0.0
        for lv in range(L):
            for t in range(reads.shape[2]):
                b = reads[i, lv, t] * read_pj[lv] + (fills[i, lv, t] + updates[i, lv, t]) * write_pj[lv]
                breakdown[i, lv, t] = b
                e += b
        energy[i] = e + c
        compute_pj[i] = c
        cyc = float(out[i, _RUNTIME])
        cycles[i] = cyc
        util[i] = scal[0] / (max(cyc, 1.0) * scal[1]) if cyc > 0 else 0.0


def evaluate_rows(consts: AspectConsts, temporal: IntArray, spatial: IntArray, order: IntArray,
                  keep: np.ndarray, rows=None) -> tuple[IntArray, IntArray]:  # noqa: ANN001
    """Counts (n, N_COLS) and codes (n, 2) of every row (shapes already matching the problem
    and arch); see `eval_range`. ``rows``: the structure's specialised driver
    (`_aspect_cpu.driver`), else the generic ``eval_rows`` runs."""
    n, _, D = temporal.shape
    out = np.empty((n, N_COLS), np.int64)
    codes = np.empty((n, 2), np.int64)
    args = (np.ascontiguousarray(temporal, dtype=np.int64), np.ascontiguousarray(spatial, dtype=np.int64),
            np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(keep, dtype=np.bool_),
            *consts.as_tuple(), out, codes)
    threads = _threads()
    if rows is not None:
        t, s, o, k = args[:4]
        if threads > 1 and n >= _PARALLEL_MIN_ROWS:
            def spec_block(b: int, lo: int, hi: int) -> None:  # noqa: ARG001
                rows(t[lo:hi], s[lo:hi], o[lo:hi], k[lo:hi], consts.dfull, consts.bounds, out[lo:hi], codes[lo:hi])

            run_blocks(spec_block, n, threads * 4, threads)
        elif n:
            rows(t, s, o, k, consts.dfull, consts.bounds, out, codes)
        return out, codes
    if threads > 1 and n >= _PARALLEL_MIN_ROWS:
        n_blocks = threads * 4
        scratch = _scratch(n_blocks, D)
        t, s, o, k = args[:4]
        tables = consts.as_tuple()

        def block(b: int, lo: int, hi: int) -> None:
            eval_rows(t[lo:hi], s[lo:hi], o[lo:hi], k[lo:hi], *tables, out[lo:hi], codes[lo:hi],
                      *(x[b] for x in scratch))

        run_blocks(block, n, n_blocks, threads)
    elif n:
        eval_rows(*args, *(x[0] for x in _scratch(1, D)))
    return out, codes


def metrics(consts: AspectConsts, out: IntArray, codes: IntArray, problem, arch):  # noqa: ANN001, ANN201
    """`Metrics` of the rows `evaluate_rows` gave (``codes`` updated with capacity failures)."""
    from accelmap.costmodels.base import Metrics

    n = out.shape[0]
    L, T = arch.n_levels, problem.n_tensors
    cycles, energy, compute_pj, util = (np.empty(n) for _ in range(4))
    valid = np.empty(n, dtype=np.bool_)
    reads, fills, updates, breakdown = (np.zeros((n, L, T)) for _ in range(4))
    metrics_rows(out, codes, *consts.metric_tuple(), cycles, energy, compute_pj, util, valid, reads, fills, updates,
                 breakdown)
    return Metrics(
        cycles=cycles, energy_pj=energy, compute_energy_pj=compute_pj, utilization=util, valid=valid,
        reason=codes[:, 0], reason_level=codes[:, 1], reads=reads, fills=fills, updates=updates,
        energy_breakdown_pj=breakdown, multicast=np.zeros((n, L, T)), spatial_reductions=np.zeros((n, L, T)),
        macs=problem.macs, level_names=arch.level_names, tensor_names=problem.tensor_names,
    )
