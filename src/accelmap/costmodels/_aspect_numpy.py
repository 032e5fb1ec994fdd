"""The ``aspect`` model's batched numpy path: closed forms of the directive analysis
(`accelmap.costmodels.aspect_analysis.analyze`, the scalar reference) for *regular* mappings,
over a whole batch; `AspectModel(engine="numpy")` sends the other rows through the scalar
analysis. It is the executable reference of the compiled kernel (`_aspect_kernel`).
"""

from __future__ import annotations

import numpy as np

from accelmap.costmodels.aspect_form import (
    _TNAMES,
    AspectView,
    _Layout,
    _maestro_layer,
    _tensor_var_masks,
    _vars,
)
from accelmap.mapper.mapping import MappingBatch
from accelmap.workloads.problem import Problem

__all__: list[str] = []

_RESULT_FIELDS = ("runtime", "macs", "l1_read", "l1_write", "l2_read", "l2_write", "l1_req", "l2_req")


def _empty_rows(n: int) -> dict[str, np.ndarray]:
    """Per-row results in MAESTRO's names: runtime and MACs (n,), the rest (n, 3) per tensor."""
    out = {"runtime": np.zeros(n, np.int64), "macs": np.zeros(n, np.int64)}
    for k in _RESULT_FIELDS[2:]:
        out[k] = np.zeros((n, 3), np.int64)
    return out


# A mapping is regular when its directive form has no edge iterations (every tile divides
# its dimension, sliding windows included) and its inner cluster level is fully unrolled
# (one iteration: the per-PE tile is computed in place). Then, with the top-level
# directives at positions 0..P-1 (outer first), t_i iterations each and s the SpatialMap:
#
# * every case is "changing position j" (the innermost non-init directive) or all-init; the
#   cases with changing position j occur w_j = (t_j - 1) * prod_{i<j} t_i times;
# * an operand's traffic depends only on j: its per-PE volume keeps the mapped size of
#   every indexing directive except the changing one, which brings only its unique
#   (new) elements unless an inner directive of the tensor re-initializes it (Kwon et al.,
#   temporal reuse), and a unicast spatial dim brings only unique elements to the non-first
#   sub-clusters (spatial reuse);
# * egress, partial sums and the sub-cluster runtime do not depend on the case.
# The scalar analysis (aspect_analysis.analyze) is the reference; tests check both agree exactly.

def _stride_adjust(size: np.ndarray, ofs: np.ndarray, stride: int, r_full: int, top: bool) -> tuple[np.ndarray, np.ndarray]:
    if stride == 1:
        return size, ofs
    n_out = (size + stride - r_full) // stride
    hit = size >= r_full
    new_size = n_out * min(stride, r_full) + max(r_full - stride, 0)
    new_ofs = n_out * (r_full if (not top and r_full < stride) else stride)
    return np.where(hit, new_size, size), np.where(hit, new_ofs, ofs)

def _evaluate_regular(problem: Problem, lay: _Layout, view: AspectView,
                      batch: MappingBatch) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Vectorized analysis of the regular rows of ``batch``.

    Returns (rows, regular, macs_ok): per-row result arrays (meaningful where regular),
    which rows are regular, and which of those do exactly the problem's MACs.
    """
    n = len(batch)
    a = view.array_level
    t_all, sp_all, order = batch.temporal, batch.spatial, batch.order
    L, D = t_all.shape[1], t_all.shape[2]
    rows = _empty_rows(n)
    regular = np.ones(n, dtype=bool)
    others = np.ones(L, dtype=bool)
    others[a] = False
    regular &= ~(sp_all[:, others] > 1).any(axis=(1, 2, 3))
    regular &= ((sp_all[:, a, :, 0] > 1).sum(axis=1) <= 1) & ((sp_all[:, a, :, 1] > 1).sum(axis=1) <= 1)
    f = t_all * sp_all[..., 0] * sp_all[..., 1]
    pe = np.prod(f[:, a + 1:], axis=1) if a + 1 < L else np.ones((n, D), np.int64)
    cl = pe * sp_all[:, a, :, 0]
    f_x = np.prod(sp_all[:, a, :, 0], axis=1)
    f_y = np.prod(sp_all[:, a, :, 1], axis=1)
    d_x = np.where(f_x > 1, np.argmax(sp_all[:, a, :, 0], axis=1), -1)
    d_y = np.where(f_y > 1, np.argmax(sp_all[:, a, :, 1], axis=1), -1)

    vars_ = _vars(lay)
    nv = len(vars_)
    src = np.array([-1 if (d := lay.dim("Y'" if v == "Y" else "X'" if v == "X" else v)) is None else d
                    for v in vars_])
    layer = _maestro_layer(problem, lay)
    full = layer.dim_dict
    d_full = np.array([full.get(v, 1) for v in vars_])
    iy, ix = vars_.index("Y"), vars_.index("X")
    ir, is_ = vars_.index("R"), vars_.index("S")
    strides = {iy: lay.stride_y, ix: lay.stride_x}
    filt = {iy: ir, ix: is_}

    def tiles(tile: np.ndarray, top: bool) -> tuple[np.ndarray, np.ndarray]:
        g = np.where(src >= 0, np.take_along_axis(tile, np.maximum(src, 0)[None, :].repeat(n, 0), axis=1), 1)
        size, ofs = g.copy(), g.copy()
        for v, r in filt.items():
            st = strides[v]
            size[:, v] = (g[:, v] - 1) * st + g[:, r]
            ofs[:, v] = g[:, v] * st
            size[:, v], ofs[:, v] = _stride_adjust(size[:, v], ofs[:, v], st, full[vars_[r]], top)
        return size, ofs

    m_top_v, o_top_v = tiles(cl, True)  # (n, nv) per var
    m_in_v, o_in_v = tiles(pe, False)

    # --- top-level order: innermost temporal loop of each dim at levels <= a -------------
    last_lvl = np.full((n, D), -1)
    rank = np.zeros((n, D), np.int64)
    inv = np.argsort(order, axis=2)  # (n, L, D): position of dim d in order[l]
    for lvl in range(a + 1):
        hit = t_all[:, lvl] > 1
        last_lvl = np.where(hit, lvl, last_lvl)
        rank = np.where(hit, inv[:, lvl], rank)
    ys = (d_y >= 0) & (np.take_along_axis(last_lvl, np.maximum(d_y, 0)[:, None], 1)[:, 0] < 0)
    rows_i = np.flatnonzero(ys)
    last_lvl[rows_i, d_y[rows_i]] = a
    rank[rows_i, d_y[rows_i]] = -1
    srcc = np.maximum(src, 0)
    v_lvl = np.where(src[None, :] >= 0, last_lvl[:, srcc], -1)
    v_rank = np.where(src[None, :] >= 0, rank[:, srcc], 0)
    group = (v_lvl < 0).astype(np.int64)
    key = ((group * (L + 2) + np.where(group == 1, 0, v_lvl)) * (D + 2) + np.where(group == 1, 0, v_rank + 1)) * (nv + 1) \
        + np.arange(nv)[None, :]
    perm = np.argsort(key, axis=1, kind="stable")  # (n, P): var at each top position
    sp_var_y = np.where(d_y[:, None] >= 0, src[None, :] == d_y[:, None], False)
    has_y = sp_var_y.any(axis=1)
    grp_sorted = np.take_along_axis(group, perm, 1)
    last_g1 = nv - 1 - np.argmax(grp_sorted[:, ::-1] == 1, axis=1)
    any_g1 = (grp_sorted == 1).any(axis=1)
    fallback_pos = np.where(any_g1, last_g1, nv - 1)
    sp_top_var = np.where(has_y, np.argmax(sp_var_y, axis=1), perm[np.arange(n), fallback_pos])
    sp_in_var = np.where(d_x >= 0, np.argmax(np.where(d_x[:, None] >= 0, src[None, :] == d_x[:, None], False), axis=1), nv - 1)

    # --- regularity (no edges at the top; inner level one iteration) ---------------------
    m_top = np.take_along_axis(m_top_v, perm, 1)
    o_top = np.take_along_axis(o_top_v, perm, 1)
    d_top = d_full[perm]
    is_sp = perm == sp_top_var[:, None]
    nsub = f_y[:, None]
    steady_t = (d_top - m_top) // o_top
    t_temporal = 1 + np.where((m_top < d_top) & (steady_t > 0), steady_t, 0)
    edge_t = (d_top < m_top) | (~(d_top < m_top) & (steady_t * o_top + m_top < d_top))
    cover = m_top + o_top * (nsub - 1)
    n_steady_s = ((d_top - m_top) // o_top + 1) // nsub - 1
    init_unroll_s = d_top <= cover
    edge_s = (d_top < cover) | (~init_unroll_s & (((n_steady_s + 1) * o_top * nsub + cover > d_top)
                                                 & (n_steady_s * o_top * nsub + cover != d_top)))
    t_spatial = 1 + np.where((cover < d_top) & (n_steady_s > 0), n_steady_s, 0)
    t = np.where(is_sp, t_spatial, t_temporal)
    regular &= ~np.where(is_sp, edge_s, edge_t).any(axis=1)
    # inner: dims = the top level's mapped sizes
    d_in = m_top_v
    in_sp = np.arange(nv)[None, :] == sp_in_var[:, None]
    cover_in = m_in_v + o_in_v * (f_x[:, None] - 1)
    single = f_x == 1  # no inner cluster level: the top level's units are the PEs
    regular &= single | np.where(in_sp, cover_in == d_in, m_in_v == d_in).all(axis=1)

    # --- per-var reuse tables ------------------------------------------------------------
    def tables(m_v: np.ndarray, o_v: np.ndarray, d_v: np.ndarray, sp_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """mapped / unique per var, plus Y' and X' appended (columns nv, nv+1)."""
        is_spv = np.arange(nv)[None, :] == sp_var[:, None]
        uniq = np.minimum(m_v, o_v)
        uniq = np.where(~is_spv & (d_v <= m_v), 0, uniq)
        my = m_v[:, iy] - m_v[:, ir] + 1
        mx = m_v[:, ix] - m_v[:, is_] + 1
        mapped = np.concatenate([m_v, my[:, None], mx[:, None]], axis=1)
        unique = np.concatenate([uniq, np.minimum(o_v[:, iy], m_v[:, iy])[:, None],
                                 np.minimum(o_v[:, ix], m_v[:, ix])[:, None]], axis=1)
        return mapped, unique

    mapped_top, unique_top = tables(m_top_v, o_top_v, np.broadcast_to(d_full, (n, nv)), sp_top_var)
    mapped_in, _ = tables(m_in_v, o_in_v, d_in, sp_in_var)
    actual = np.arange(nv)
    actual[iy], actual[ix] = nv, nv + 1
    masks = _tensor_var_masks(lay.kind, vars_)
    out_mask = masks["output"]
    ones = np.ones(n, np.int64)

    def out_products(mapped: np.ndarray, unique: np.ndarray | None, sp_var: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(per-PE egress first, per-PE egress others, partial sums per sub-cluster)."""
        e1 = ones.copy()
        e0 = ones.copy()
        for v in np.flatnonzero(out_mask):
            mv = mapped[:, actual[v]]
            e1 = e1 * mv
            if unique is not None:
                uv = unique[:, actual[v]]
                e0 = e0 * np.where(sp_var == v, np.where(uv != 0, uv, 1), mv)
        ps = e1.copy()
        for v in np.flatnonzero(~out_mask):
            ps = ps * mapped[:, v]
        return e1, e0, ps

    # inner level (single all-init case)
    _, _, psum_pe = out_products(mapped_in, None, sp_in_var)
    ing_in = np.zeros(n, np.int64)
    for tname in ("input", "filter"):
        vm = masks[tname]
        vol = np.prod(np.where(vm[None, :], m_in_v, 1), axis=1)
        ing_in += np.where(vm[sp_in_var], f_x, 1) * vol
    hop = 1  # hops x hop latency (MAESTRO: 1 x 1)

    def noc(traffic: np.ndarray, bw: int) -> np.ndarray:
        return hop + (-(-traffic // bw)) - 1

    runtime_in = psum_pe + noc(ing_in, view.noc_bw)
    e1, e0, psum_cl = out_products(mapped_top, unique_top, sp_top_var)
    for j, tname in enumerate(_TNAMES):
        vm = masks[tname]
        rows["l1_req"][:, j] = 2 * np.prod(np.where(vm[None, :], np.where(single[:, None], m_top_v, m_in_v), 1), axis=1)

    # top level
    out_sp = out_mask[sp_top_var]
    egress = e1 + np.where(out_sp, (f_y - 1) * e0, 0)
    psum_size = f_y * psum_cl
    total = np.prod(t, axis=1)
    excl = np.concatenate([np.ones((n, 1), np.int64), np.cumprod(t, axis=1)[:, :-1]], axis=1)
    w = (t - 1) * excl  # occurrences of the cases whose changing position is j
    compute = np.where(single, psum_cl, runtime_in)
    m_pos = m_top
    u_pos = np.take_along_axis(unique_top[:, :nv], perm, 1)
    s_pos = np.argmax(is_sp, axis=1)
    P = nv
    ing_init = {}
    ing_case = {}
    for tname in ("input", "filter"):
        vpos = masks[tname][perm]  # (n, P) tensor indexed by the directive at each position
        fpos = np.where(vpos, m_pos, 1)
        base = np.prod(fpos, axis=1)
        v_s = vpos[np.arange(n), s_pos]
        ing_init[tname] = np.where(v_s, f_y, 1) * base
        iter_v = vpos & (t > 1)
        # inited_j: an indexing directive inside j that iterates
        after = np.concatenate([np.cumsum(iter_v[:, ::-1], axis=1)[:, ::-1][:, 1:], np.zeros((n, 1), np.int64)], axis=1) > 0
        pre = np.concatenate([np.ones((n, 1), np.int64), np.cumprod(fpos, axis=1)[:, :-1]], axis=1)
        suf = np.concatenate([np.cumprod(fpos[:, ::-1], axis=1)[:, ::-1][:, 1:], np.ones((n, 1), np.int64)], axis=1)
        excl_j = pre * suf
        temporal_j = ~is_sp
        fj_first = np.where(temporal_j & ~after, np.maximum(u_pos, 1), m_pos)
        pe1 = excl_j * fj_first
        f_s = fpos[np.arange(n), s_pos][:, None]
        u_s = u_pos[np.arange(n), s_pos][:, None]
        m_s = m_pos[np.arange(n), s_pos][:, None]
        jj = np.arange(P)[None, :]
        g_s = np.where(s_pos[:, None] > jj, u_s, m_s)
        pe0_ne = (excl_j // f_s) * fj_first * g_s
        pe0_eq = excl_j * np.where(~after, u_s, m_s)
        pe0 = np.where(jj == s_pos[:, None], pe0_eq, pe0_ne)
        ing = pe1 + np.where(v_s[:, None], (f_y[:, None] - 1) * pe0, 0)
        ing_case[tname] = np.where(vpos, ing, 0)
    l2_req = {k: 2 * v for k, v in ing_init.items()}
    l2_req["output"] = 2 * egress
    bw = view.offchip_bw
    off_in = ((l2_req["input"] + l2_req["filter"]) // bw) // 2
    off_out = (l2_req["output"] // bw) // 2
    off = np.maximum(off_in, off_out)
    delay0 = np.maximum(compute + noc(ing_init["input"] + ing_init["filter"], view.noc_bw), off)
    ing_j = ing_case["input"] + ing_case["filter"]
    delay_j = np.maximum(np.maximum(noc(egress, view.noc_bw)[:, None], compute[:, None]), noc(ing_j, view.noc_bw))
    delay_j = np.maximum(delay_j, off[:, None])
    rows["runtime"] = delay0 + (w * delay_j).sum(axis=1)
    rows["macs"] = total * psum_size
    for j, tname in enumerate(_TNAMES):
        vm = masks[tname]
        if tname == "output":
            rows["l2_write"][:, j] = total * egress
            rows["l1_write"][:, j] = total * psum_size
            rows["l1_read"][:, j] = total * psum_size
            size = ones.copy()
            for v in (int(i) for i in np.flatnonzero(vm)):
                size = size * (d_full[v] - d_full[filt[v]] + 1 if v in filt else d_full[v])
            rows["l2_read"][:, j] = size
        else:
            rd = ing_init[tname] + (w * ing_case[tname]).sum(axis=1)
            rows["l2_read"][:, j] = rd
            rows["l1_write"][:, j] = rd
            rows["l1_read"][:, j] = total * psum_size
            rows["l2_write"][:, j] = int(np.prod(d_full[vm]))
        rows["l2_req"][:, j] = l2_req[tname]
    macs_ok = rows["macs"] == problem.macs
    return rows, regular, macs_ok
