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

from accelmap.costmodels.aspect import (
    ClusterDirective,
    Directive,
    DirectiveKind,
    DirectiveMapping,
    MaestroHardware,
    MaestroLayer,
)
from accelmap.errors import SpecError
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
    return parse_hardware(p.read_text(), source=str(p))


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
    return parse_mapping(p.read_text(), source=str(p))


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
