"""Read and write MAESTRO's files: hardware (``.m``: ``num_pes: 256`` lines) and mapping
(``Network { Layer { Type, Stride, Dimensions, Dataflow { directives } } }``).

The directive language (MAESTRO's DFSL):

* ``SpatialMap(size, offset) D;`` spreads ``D`` over the units of the current level;
* ``TemporalMap(size, offset) D;`` steps ``D`` over time; order is loop order, outer first;
* ``Cluster(n, P);`` groups ``n`` units; the directives after it describe one group;
* sizes and offsets are integers or expressions over ``Sz(D)`` (the size of ``D``), e.g.
  ``Sz(R)``, ``Sz(S)+2``;
* ``Y'``/``X'`` name output rows/columns (converted to input rows internally).

Conversion to accelmap specs (`to_problem`) and from accelmap mappings back to directives
(`directives_from_mapping`, `render_mapping_file`) live here too; `docs/aspect.md` states
the correspondence and where it is lossy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelmap._files import read_text
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.costmodels.aspect import (
    ClusterDirective,
    Directive,
    DirectiveKind,
    DirectiveMapping,
    MaestroHardware,
    MaestroLayer,
)
from accelmap.errors import SpecError
from accelmap.mapper.mapping import Mapping
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

__all__ = [
    "MaestroNetwork",
    "read_hardware",
    "parse_hardware",
    "read_mapping",
    "parse_mapping",
    "to_problem",
    "render_mapping_file",
    "render_hardware_file",
    "to_arch",
    "to_accelmap",
]

_HW_KEYS = {
    "num_pes": "num_pes",
    "l1_size_cstr": "l1_size",
    "l2_size_cstr": "l2_size",
    "noc_bw_cstr": "noc_bw",
    "offchip_bw_cstr": "offchip_bw",
    "noc_hops": "noc_hop_latency",
    "noc_hop_latency": "noc_hop_latency",
    "vector_width": "simd_lanes",
    "simd_lanes": "simd_lanes",
}


@dataclass(frozen=True, slots=True)
class MaestroNetwork:
    """A mapping file: a network name and its layers' directive mappings."""

    name: str
    layers: tuple[DirectiveMapping, ...]


def read_hardware(path: str | Path) -> MaestroHardware:
    p = Path(path)
    return parse_hardware(read_text(p), source=str(p))


def parse_hardware(text: str, *, source: str = "<hardware>") -> MaestroHardware:
    """Parse ``key: value`` lines (``num_pes``, ``l1_size_cstr``, ``l2_size_cstr``,
    ``noc_bw_cstr``, ``offchip_bw_cstr``; optional ``noc_hops``, ``vector_width``)."""
    values: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        key, sep, val = line.partition(":")
        key = key.strip()
        if not sep:
            raise SpecError(f"{source}:{lineno}: {raw.strip()!r}; expected 'key: value'")
        if key not in _HW_KEYS:
            raise SpecError(f"{source}:{lineno}: unknown key {key!r}; accepted keys: {sorted(_HW_KEYS)}")
        try:
            num = float(val.strip())
        except ValueError:
            raise SpecError(f"{source}:{lineno}: {key} = {val.strip()!r}; expected a number") from None
        if num != int(num) or num < 1:
            raise SpecError(f"{source}:{lineno}: {key} = {val.strip()}; expected an integer >= 1")
        values[_HW_KEYS[key]] = int(num)
    if "num_pes" not in values:
        raise SpecError(f"{source}: num_pes is missing; add a line 'num_pes: 256'")
    return MaestroHardware(**values)


# --- mapping files -------------------------------------------------------------------------

_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def read_mapping(path: str | Path) -> MaestroNetwork:
    p = Path(path)
    return parse_mapping(read_text(p), source=str(p))


def _blocks(text: str, start: int) -> tuple[str, int]:
    """Content between the brace at ``start`` and its match; returns (content, end)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    raise SpecError("unbalanced braces: a '{' has no matching '}'")


def parse_mapping(text: str, *, source: str = "<mapping>") -> MaestroNetwork:
    """Parse a MAESTRO mapping file into layers with resolved directives.

    Sizes larger than their dimension are clamped to it (MAESTRO's parser does the same),
    and ``Sz(D)`` expressions are evaluated against the layer's dimensions.
    """
    text = _TOKEN.sub("", text)
    m = re.search(r"\bNetwork\s+([\w.\-]+)\s*\{", text)
    if not m:
        raise SpecError(f"{source}: no 'Network NAME {{ ... }}' block found")
    body, _ = _blocks(text, m.end() - 1)
    layers = []
    pos = 0
    while True:
        lm = re.compile(r"\bLayer\s+([\w.\-]+)\s*\{").search(body, pos)
        if not lm:
            break
        lbody, pos = _blocks(body, lm.end() - 1)
        layers.append(_parse_layer(lm.group(1), lbody, f"{source}: layer {lm.group(1)}"))
    if not layers:
        raise SpecError(f"{source}: network {m.group(1)} has no 'Layer NAME {{ ... }}' block")
    return MaestroNetwork(name=m.group(1), layers=tuple(layers))


def _kv_block(body: str, name: str, where: str) -> dict[str, int] | None:
    m = re.search(rf"\b{name}\s*\{{([^}}]*)\}}", body)
    if not m:
        return None
    out: dict[str, int] = {}
    content = m.group(1)
    # entries are 'D: value' or 'D value', separated by commas or (MAESTRO tolerates it) spaces
    pairs = re.findall(r"(\w+'?)\s*:?\s*(\d+)", content)
    leftover = re.sub(r"(\w+'?)\s*:?\s*(\d+)", "", content).replace(",", "").strip()
    if leftover or not pairs:
        raise SpecError(f"{where}: cannot read {name} {{{content.strip()}}}; expected 'D: value' entries")
    for k, v in pairs:
        out[k] = int(v)
    return out


def _parse_layer(name: str, body: str, where: str) -> DirectiveMapping:
    tm = re.search(r"\bType\s*:\s*(\w+)", body)
    kind = tm.group(1).upper() if tm else "CONV"
    if kind not in ("CONV", "DSCONV"):
        raise SpecError(f"{where}: Type {kind}; supported layer types: CONV, DSCONV")
    dims = _kv_block(body, "Dimensions", where)
    if dims is None:
        raise SpecError(f"{where}: no 'Dimensions {{ K: .., C: .., R: .., S: .., Y: .., X: .. }}' block")
    if "Y'" in dims or "X'" in dims:
        r, s = dims.get("R", 1), dims.get("S", 1)
        if "Y'" in dims:
            dims["Y"] = dims.pop("Y'") + r - 1
        if "X'" in dims:
            dims["X"] = dims.pop("X'") + s - 1
    missing = [d for d in ("C", "R", "S", "Y", "X") if d not in dims]
    if kind == "CONV" and "K" not in dims:
        missing.insert(0, "K")
    if missing:
        raise SpecError(f"{where}: Dimensions lacks {missing}; received {sorted(dims)}")
    unknown = sorted(set(dims) - {"N", "K", "C", "R", "S", "Y", "X"})
    if unknown:
        raise SpecError(f"{where}: unknown dimension(s) {unknown}; expected N K C R S Y X")
    stride = _kv_block(body, "Stride", where) or {}
    order = ("N", "K", "C", "R", "S", "Y", "X")
    layer = MaestroLayer(
        name=name, kind=kind, dims=tuple((d, dims[d]) for d in order if d in dims),
        stride_y=stride.get("Y", 1), stride_x=stride.get("X", 1),
    )
    dm = re.search(r"\bDataflow\s*\{", body)
    if not dm:
        raise SpecError(f"{where}: no 'Dataflow {{ ... }}' block")
    dbody, _ = _blocks(body, dm.end() - 1)
    sizes = dict(dims)
    sizes["Y'"] = dims["Y"] - dims["R"] + 1
    sizes["X'"] = dims["X"] - dims["S"] + 1
    directives: list[Directive | ClusterDirective] = []
    for stmt in dbody.split(";"):
        stmt = " ".join(stmt.split())
        if not stmt:
            continue
        sm = re.fullmatch(r"(SpatialMap|TemporalMap)\s*\((.*)\)\s*(\w+'?)", stmt)
        cm = re.fullmatch(r"Cluster\s*\((.*)\)", stmt)
        if sm:
            args = _split_args(sm.group(2), stmt, where)
            if len(args) != 2:
                raise SpecError(f"{where}: {stmt!r}: expected (size, offset)")
            dim = sm.group(3)
            if dim not in sizes:
                raise SpecError(f"{where}: {stmt!r} maps unknown dimension {dim!r}; known: {sorted(sizes)}")
            size = _eval(args[0], sizes, stmt, where)
            ofs = _eval(args[1], sizes, stmt, where)
            size = min(size, sizes[dim])
            kind_ = DirectiveKind.SPATIAL if sm.group(1) == "SpatialMap" else DirectiveKind.TEMPORAL
            directives.append(Directive(kind_, dim, size, ofs))
        elif cm:
            args = _split_args(cm.group(1), stmt, where)
            if not 1 <= len(args) <= 2 or (len(args) == 2 and args[1].strip() not in ("P", "L")):
                raise SpecError(f"{where}: {stmt!r}: expected Cluster(size, P)")
            directives.append(ClusterDirective(_eval(args[0], sizes, stmt, where)))
        else:
            raise SpecError(
                f"{where}: cannot read directive {stmt!r}; expected 'SpatialMap(size, offset) D', "
                "'TemporalMap(size, offset) D' or 'Cluster(size, P)'"
            )
    if not directives:
        raise SpecError(f"{where}: the Dataflow block is empty")
    return DirectiveMapping(layer=layer, directives=tuple(directives))


def _split_args(s: str, stmt: str, where: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [a.strip() for a in out]


def _eval(expr: str, sizes: dict[str, int], stmt: str, where: str) -> int:
    """Integers, ``Sz(D)``, + - * and parentheses; nothing else."""
    tokens = re.findall(r"Sz\s*\(\s*\w+'?\s*\)|\d+|[-+*()]|\S", expr)
    py = []
    for t in tokens:
        if t.startswith("Sz"):
            d = re.search(r"\(\s*(\w+'?)\s*\)", t).group(1)  # type: ignore[union-attr]
            if d not in sizes:
                raise SpecError(f"{where}: {stmt!r}: Sz({d}) of unknown dimension; known: {sorted(sizes)}")
            py.append(str(sizes[d]))
        elif t.isdigit() or t in "+-*()":
            py.append(t)
        else:
            raise SpecError(f"{where}: {stmt!r}: cannot read {expr!r}; expected integers and Sz(D)")
    try:
        value = _arith(py)
    except (IndexError, ValueError):
        raise SpecError(f"{where}: {stmt!r}: malformed expression {expr!r}") from None
    if value < 1:
        raise SpecError(f"{where}: {stmt!r}: {expr} = {value}; expected >= 1")
    return value


def _arith(tokens: list[str]) -> int:
    pos = 0

    def expr() -> int:
        nonlocal pos
        v = term()
        while pos < len(tokens) and tokens[pos] in "+-":
            op = tokens[pos]
            pos += 1
            v = v + term() if op == "+" else v - term()
        return v

    def term() -> int:
        nonlocal pos
        v = atom()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            v *= atom()
        return v

    def atom() -> int:
        nonlocal pos
        t = tokens[pos]
        pos += 1
        if t == "(":
            v = expr()
            if tokens[pos] != ")":
                raise ValueError("missing )")
            pos += 1
            return v
        return int(t)

    v = expr()
    if pos != len(tokens):
        raise ValueError("trailing tokens")
    return v


# --- accelmap specs --------------------------------------------------------------------------

def to_problem(layer: MaestroLayer) -> Problem:
    """The accelmap `Problem` of a MAESTRO layer (no padding, as MAESTRO models it).

    Dims ``N K C P Q R S`` (``P = Y'``, ``Q = X'``); a depthwise layer (DSCONV) has no K and
    its weight and output are indexed by C.
    """
    d = layer.dim_dict
    n = d.get("N", 1)
    p, q = layer.output_rows(), layer.output_cols()
    sy, sx = layer.stride_y, layer.stride_x
    dw = layer.kind == "DSCONV"
    dims = [Dim(name="N", bound=n)]
    if not dw:
        dims.append(Dim(name="K", bound=d["K"]))
    dims += [Dim(name="C", bound=d["C"]), Dim(name="P", bound=p), Dim(name="Q", bound=q),
             Dim(name="R", bound=d["R"]), Dim(name="S", bound=d["S"])]
    row = (Term(dim="P", coef=sy), Term(dim="R"))
    col = (Term(dim="Q", coef=sx), Term(dim="S"))
    inp = Tensor(name="input", role=TensorRole.INPUT,
                 projection=((Term(dim="N"),), (Term(dim="C"),), row, col))
    och = (Term(dim="C"),) if dw else (Term(dim="K"),)
    wgt = Tensor(name="filter", role=TensorRole.WEIGHT,
                 projection=(*(() if dw else ((Term(dim="K"),),)), (Term(dim="C"),), (Term(dim="R"),), (Term(dim="S"),)))
    out = Tensor(name="output", role=TensorRole.OUTPUT,
                 projection=((Term(dim="N"),), och, (Term(dim="P"),), (Term(dim="Q"),)))
    return Problem(name=layer.name, dims=tuple(dims), tensors=(inp, wgt, out))


def render_mapping_file(network: str, mappings: list[DirectiveMapping]) -> str:
    """A MAESTRO mapping file for the given layers (directives with resolved sizes)."""
    lines = [f"Network {network} {{"]
    for m in mappings:
        lay = m.layer
        lines.append(f"Layer {lay.name} {{")
        lines.append(f"\tType: {lay.kind}")
        if lay.stride_x != 1 or lay.stride_y != 1:
            lines.append(f"\tStride {{ X: {lay.stride_x}, Y: {lay.stride_y} }}")
        lines.append("\tDimensions { " + ", ".join(f"{k}: {v}" for k, v in lay.dims) + " }")
        lines.append("\tDataflow {")
        lines += [f"\t\t{d}" for d in m.directives]
        lines.append("\t}")
        lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_hardware_file(hw: MaestroHardware) -> str:
    rows = [f"num_pes: {hw.num_pes}"]
    if hw.l1_size is not None:
        rows.append(f"l1_size_cstr: {hw.l1_size}")
    if hw.l2_size is not None:
        rows.append(f"l2_size_cstr: {hw.l2_size}")
    rows += [f"noc_bw_cstr: {hw.noc_bw}", f"offchip_bw_cstr: {hw.offchip_bw}"]
    return "\n".join(rows) + "\n"


# --- MAESTRO -> accelmap (the exactly representable subset) --------------------------------

def to_arch(hw: MaestroHardware, x: int = 1, y: int | None = None, *, name: str = "maestro") -> Arch:
    """An accelmap `Arch` for MAESTRO hardware: off-chip (bandwidth ``offchip_bw``), an L2
    whose ``x`` by ``y`` fanout is the PE array (NoC bandwidth ``noc_bw``), a per-PE L1.
    Energies are MAESTRO's, in units of one MAC (L2 18.61, L1 1.68, MAC 1)."""
    from accelmap.costmodels.aspect import L1_ENERGY_PER_ACCESS_X_MAC, L2_ENERGY_PER_ACCESS_X_MAC

    y = hw.num_pes // x if y is None else y
    if x < 1 or y < 1 or x * y > hw.num_pes:
        raise SpecError(f"array {x} x {y} does not fit the hardware's {hw.num_pes} PEs")
    return Arch(
        name=f"{name}-{x}x{y}",
        levels=(
            StorageLevel(name="DRAM", capacity_words=None, read_bandwidth_words_per_cycle=hw.offchip_bw),
            StorageLevel(name="L2", capacity_words=hw.l2_size, read_bandwidth_words_per_cycle=hw.noc_bw,
                         fanout_x=x, fanout_y=y, read_energy_pj=L2_ENERGY_PER_ACCESS_X_MAC,
                         write_energy_pj=L2_ENERGY_PER_ACCESS_X_MAC),
            StorageLevel(name="L1", capacity_words=hw.l1_size, read_energy_pj=L1_ENERGY_PER_ACCESS_X_MAC,
                         write_energy_pj=L1_ENERGY_PER_ACCESS_X_MAC),
        ),
        compute=Compute(energy_per_mac_pj=1.0),
        description="MAESTRO hardware file (energies in MAC units)",
    )


def _tile(var: str, size: int, ofs: int, filt: dict[str, int], stride: dict[str, int], where: str) -> int:
    """The accelmap tile of a MAESTRO directive (output rows for Y / X)."""
    if var in ("Y", "X"):
        s = stride[var]
        n, rem = divmod(ofs, s)
        if rem or n < 1 or size != (n - 1) * s + filt[var]:
            raise SpecError(
                f"{where}: Map({size},{ofs}) {var} is a sliding window that is not a tile of whole "
                f"outputs (expected size (n-1)*{s} + {filt[var]} and offset n*{s}); it has no "
                "accelmap factor form. Evaluate the directive form itself (analyze) instead"
            )
        return n
    if size != ofs:
        raise SpecError(
            f"{where}: Map({size},{ofs}) {var} overlaps or skips elements (offset != size); "
            "only tilings have an accelmap factor form"
        )
    return size


def to_accelmap(mapping: DirectiveMapping, hw: MaestroHardware) -> tuple[Problem, Arch, Mapping]:
    """The accelmap (problem, arch, mapping) of a MAESTRO layer, when one exists exactly.

    Supported: one or two cluster levels; every directive a tiling (sliding windows over
    input rows/columns that hold whole filters and tile the outputs, as MAESTRO writes
    ``TemporalMap(Sz(R),1) Y``); filters whole above the PE; tiles that divide their
    dimension (no edge iterations); an inner level that unrolls everything but its
    SpatialMap in one step. The arch is `to_arch` with the clusters as the X axis. The top
    level's temporal loops become the L2 level's loops in directive order.

    Raises
    ------
    SpecError
        Naming the directive and why it has no exact accelmap form (edge tiles, a sliding
        window that is not a tiling, temporal steps inside a cluster, more levels). The
        directive form stays evaluable with `analyze`.
    """
    layer = mapping.layer
    where = f"layer {layer.name}"
    clusters = [i for i, d in enumerate(mapping.directives) if isinstance(d, ClusterDirective)]
    if len(clusters) > 1:
        raise SpecError(f"{where}: {len(clusters)} Cluster levels; an accelmap arch has one PE array (at most one Cluster)")
    cut = clusters[0] if clusters else len(mapping.directives)
    top = [d for d in mapping.directives[:cut] if isinstance(d, Directive)]
    inner = [d for d in mapping.directives[cut + 1:] if isinstance(d, Directive)]
    csize = mapping.directives[cut].size if clusters else 1  # type: ignore[union-attr]
    n_sub = hw.num_pes // csize
    problem = to_problem(layer)
    full = layer.dim_dict
    stride = {"Y": layer.stride_y, "X": layer.stride_x}

    def norm(ds: list[Directive]) -> list[Directive]:
        out = []
        for d in ds:
            if d.dim in ("Y'", "X'"):
                f = "R" if d.dim == "Y'" else "S"
                fs = next((x.size for x in ds if x.dim == f), full[f])
                out.append(Directive(d.kind, d.dim[0], d.size + fs - 1, d.offset))
            else:
                out.append(d)
        return out

    top, inner = norm(top), norm(inner)
    out_ext = {"Y": layer.output_rows(), "X": layer.output_cols()}
    ext = {v: out_ext.get(v, full.get(v, 1)) for v in ("N", "K", "C", "R", "S", "Y", "X")}
    acc = {"Y": "P", "X": "Q"}
    if layer.kind == "DSCONV":
        ext.pop("K")

    def tiles(ds: list[Directive], parent: dict[str, int], lvl: str) -> dict[str, int]:
        filt = {"Y": next((x.size for x in ds if x.dim == "R"), parent.get("R", full["R"])),
                "X": next((x.size for x in ds if x.dim == "S"), parent.get("S", full["S"]))}
        t = dict(parent)
        for d in ds:
            if d.dim not in ext:
                continue
            t[d.dim] = min(_tile(d.dim, d.size, d.offset, filt, stride, f"{where} ({lvl})"), parent[d.dim])
        for f in ("R", "S"):
            if t[f] != full[f]:
                raise SpecError(f"{where} ({lvl}): the filter dim {f} is tiled ({t[f]} of {full[f]}); "
                                "MAESTRO's sliding windows then do not tile the outputs")
        return t

    cl = tiles(top, ext, "top level")
    pe = tiles(inner, cl, "cluster level") if clusters else dict(cl)
    L, D = 3, problem.n_dims
    temporal = np.ones((L, D), np.int64)
    spatial = np.ones((L, D, 2), np.int64)
    sp_top = [d for d in top if d.kind is DirectiveKind.SPATIAL]
    sp_in = [d for d in inner if d.kind is DirectiveKind.SPATIAL]
    if len(sp_top) != 1 or (clusters and len(sp_in) != 1):
        raise SpecError(f"{where}: each level needs exactly one SpatialMap for an accelmap form")
    for v, e in ext.items():
        if v not in ("Y", "X") and v not in full:
            continue
        d = problem.dim_index(acc.get(v, v))
        if e % cl[v] or cl[v] % pe[v]:
            raise SpecError(f"{where}: dim {v}: tile {cl[v]} (cluster) / {pe[v]} (PE) does not divide {e}; "
                            "MAESTRO's edge iterations have no exact accelmap form")
        steps = e // cl[v]
        if v == sp_top[0].dim:
            f_y = min(n_sub, steps)
            if steps % f_y:
                raise SpecError(f"{where}: SpatialMap over {v}: {steps} tiles on {n_sub} clusters leave a "
                                "partial last fold (edge); no exact accelmap form")
            spatial[1, d, 1] = f_y
            steps //= f_y
        temporal[1, d] = steps
        inner_steps = cl[v] // pe[v]
        if clusters and v == sp_in[0].dim:
            if inner_steps > csize:
                raise SpecError(f"{where}: inner SpatialMap over {v} needs {inner_steps} PEs per step; "
                                f"clusters have {csize} (temporal folding inside a cluster)")
            spatial[1, d, 0] = inner_steps
        elif inner_steps != 1:
            raise SpecError(f"{where}: dim {v} steps {inner_steps} times inside a cluster; temporal loops "
                            "between the clusters and the PEs have no accelmap form (one PE array level)")
        temporal[2, d] = pe[v]
    order_vars = [acc.get(d.dim, d.dim) for d in top if d.dim in ext]
    rest = [n for n in problem.dim_names if n not in order_vars]
    order = np.tile(np.arange(D), (L, 1))
    order[1] = [problem.dim_index(n) for n in order_vars + rest]
    arch = to_arch(hw, csize, n_sub) if clusters else to_arch(hw, 1, hw.num_pes)
    return problem, arch, Mapping(temporal=temporal, spatial=spatial, order=order,
                                  keep=np.ones((L, problem.n_tensors), bool))
