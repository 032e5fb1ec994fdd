"""Read a Timeloop 3.x problem file (``problem: {shape, instance}``) into a `Problem`.

Timeloop describes a layer by a *shape* (dimension names, named coefficients with defaults,
data-spaces with projections) and an *instance* (the bound of every dimension and the
values of the coefficients). A projection is a list of coordinates; each coordinate is a
list of terms ``[dim]`` or ``[dim, coefficient-name]`` (``[P, Wstride]`` = ``Wstride*P``).

Tensor roles: the data-space marked ``read-write: true`` is the output; a data-space named
``Weights`` (or ``weights``/``filter``) is the weight and one named ``Inputs`` the input.
Otherwise the first remaining operand is the input and the second the weight.
"""

from __future__ import annotations

from typing import Any

from accelmap.errors import SpecError
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

__all__ = ["problem_from_timeloop", "problem_to_timeloop"]

_WEIGHT_NAMES = frozenset({"weights", "weight", "filter", "filters"})
_INPUT_NAMES = frozenset({"inputs", "input", "ifmap", "ifmaps"})


def _err(source: str, path: str, msg: str) -> SpecError:
    return SpecError(f"{source}: {path}: {msg}")


def _as_int(source: str, path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _err(source, path, f"= {value!r}; expected an integer")
    return value


def problem_from_timeloop(data: dict, source: str) -> Problem:
    """Build a `Problem` from a parsed Timeloop problem YAML.

    Parameters
    ----------
    data
        The parsed file: ``{"problem": {"shape": {...}, "instance": {...}}}``.
    source
        File name for error messages.

    Raises
    ------
    SpecError
        Missing keys, unknown dimension or coefficient names, non-integer bounds; the
        message names the file and key path.
    """
    if not isinstance(data, dict) or not isinstance(data.get("problem"), dict):
        raise SpecError(f"{source}: expected a top-level `problem:` mapping (Timeloop problem file)")
    prob = data["problem"]
    shape = prob.get("shape")
    instance = prob.get("instance")
    if not isinstance(shape, dict):
        raise _err(source, "problem.shape", "missing or not a mapping; expected {dimensions, data-spaces}")
    if not isinstance(instance, dict):
        raise _err(source, "problem.instance", "missing or not a mapping; expected {DIM: bound, ...}")
    dims_raw = shape.get("dimensions")
    if not isinstance(dims_raw, list) or not dims_raw:
        raise _err(source, "problem.shape.dimensions", f"= {dims_raw!r}; expected a list of dimension names")
    dim_names = [str(d) for d in dims_raw]

    coefs: dict[str, int] = {}
    for i, c in enumerate(shape.get("coefficients") or []):
        where = f"problem.shape.coefficients[{i}]"
        if not isinstance(c, dict) or "name" not in c:
            raise _err(source, where, f"= {c!r}; expected {{name: ..., default: ...}}")
        coefs[str(c["name"])] = _as_int(source, f"{where}.default", c.get("default", 1))
    for key, value in instance.items():
        key = str(key)
        if key in dim_names:
            continue
        if key == "densities":
            # Timeloop's sparse extension; the dense models accept only density 1.
            sparse = {k: v for k, v in (value or {}).items()
                      if not (isinstance(v, (int, float)) and v == 1)
                      and not (isinstance(v, dict) and v.get("density", 1) == 1)}
            if sparse:
                raise _err(source, "problem.instance.densities",
                           f"{sparse!r}: sparse tensors are not modelled; remove the densities "
                           "(or set them to 1) to evaluate the dense layer")
            continue
        if key not in coefs:
            raise _err(
                source, f"problem.instance.{key}",
                f"unknown name; expected a dimension {dim_names} or a coefficient {sorted(coefs)}",
            )
        coefs[key] = _as_int(source, f"problem.instance.{key}", value)

    dims = []
    for d in dim_names:
        # Timeloop defaults an unlisted dimension to 1.
        bound = _as_int(source, f"problem.instance.{d}", instance.get(d, 1))
        if bound < 1:
            raise _err(source, f"problem.instance.{d}", f"= {bound}; expected >= 1")
        dims.append(Dim(name=d, bound=bound))

    spaces = shape.get("data-spaces", shape.get("data_spaces"))
    if not isinstance(spaces, list) or len(spaces) < 2:
        raise _err(source, "problem.shape.data-spaces", "missing; expected a list of at least two data-spaces")
    parsed: list[tuple[str, tuple[tuple[Term, ...], ...], bool]] = []
    for i, ds in enumerate(spaces):
        where = f"problem.shape.data-spaces[{i}]"
        if not isinstance(ds, dict) or "name" not in ds or "projection" not in ds:
            raise _err(source, where, "expected {name, projection, [read-write]}")
        coords = []
        proj = ds["projection"]
        if not isinstance(proj, list) or not proj:
            raise _err(source, f"{where}.projection", f"= {proj!r}; expected a list of coordinates")
        for ci, coord in enumerate(proj):
            cwhere = f"{where}.projection[{ci}]"
            # A coordinate is a list of terms; Timeloop also accepts a bare term [dim].
            if isinstance(coord, list) and coord and all(isinstance(x, str) for x in coord):
                coord = [coord]
            if not isinstance(coord, list) or not coord:
                raise _err(source, cwhere, f"= {coord!r}; expected a list of terms [dim] or [dim, coef]")
            terms = []
            for ti, term in enumerate(coord):
                twhere = f"{cwhere}[{ti}]"
                if not isinstance(term, list) or not 1 <= len(term) <= 2:
                    raise _err(source, twhere, f"= {term!r}; expected [dim] or [dim, coefficient]")
                dim = str(term[0])
                if dim not in dim_names:
                    raise _err(source, twhere, f"unknown dimension {dim!r}; known: {dim_names}")
                k = 1
                if len(term) == 2:
                    cname = str(term[1])
                    if cname not in coefs:
                        raise _err(source, twhere, f"unknown coefficient {cname!r}; known: {sorted(coefs)}")
                    k = coefs[cname]
                if k < 1:
                    raise _err(source, twhere, f"coefficient {term[1]} = {k}; expected >= 1")
                terms.append(Term(dim=dim, coef=k))
            coords.append(tuple(terms))
        rw = bool(ds.get("read-write", ds.get("read_write", False)))
        parsed.append((str(ds["name"]), tuple(coords), rw))

    roles: list[TensorRole | None] = [TensorRole.OUTPUT if rw else None for _, _, rw in parsed]
    if sum(r is TensorRole.OUTPUT for r in roles) != 1:
        raise _err(source, "problem.shape.data-spaces", "expected exactly one data-space with `read-write: true`")
    for i, (name, _, _) in enumerate(parsed):
        if roles[i] is None and name.lower() in _WEIGHT_NAMES:
            roles[i] = TensorRole.WEIGHT
        elif roles[i] is None and name.lower() in _INPUT_NAMES:
            roles[i] = TensorRole.INPUT
    # Unnamed operands: first free role is input, then weight (then input again).
    for i in range(len(roles)):
        if roles[i] is None:
            taken = set(roles)
            roles[i] = TensorRole.INPUT if TensorRole.INPUT not in taken else (
                TensorRole.WEIGHT if TensorRole.WEIGHT not in taken else TensorRole.INPUT
            )
    tensors = tuple(
        Tensor(name=name, projection=coords, role=role)  # type: ignore[arg-type]
        for (name, coords, _), role in zip(parsed, roles, strict=True)
    )
    name = str(shape.get("name") or "timeloop-problem")
    try:
        return Problem(name=name, dims=tuple(dims), tensors=tensors)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from exc


def problem_to_timeloop(problem: Problem) -> dict[str, Any]:
    """A Timeloop problem YAML (as a dict) for ``problem``; coefficients are written inline
    as named constants ``k_<tensor>_<coord>_<dim>`` only where they differ from 1.

    Timeloop problems have no padding: a tensor's ``pad`` and ``extent`` are not written,
    and Timeloop reads the whole span of each projection (the padding folded in)."""
    coefficients: list[dict[str, Any]] = []
    instance: dict[str, int] = {d.name: d.bound for d in problem.dims}
    spaces = []
    for t in problem.tensors:
        proj = []
        for ci, coord in enumerate(t.projection):
            terms = []
            for term in coord:
                if term.coef == 1:
                    terms.append([term.dim])
                else:
                    cname = f"k_{t.name}_{ci}_{term.dim}"
                    coefficients.append({"name": cname, "default": term.coef})
                    instance[cname] = term.coef
                    terms.append([term.dim, cname])
            proj.append(terms)
        entry: dict[str, Any] = {"name": t.name, "projection": proj}
        if t.is_output:
            entry["read-write"] = True
        spaces.append(entry)
    shape: dict[str, Any] = {"name": problem.name, "dimensions": list(problem.dim_names)}
    if coefficients:
        shape["coefficients"] = coefficients
    shape["data-spaces"] = spaces
    return {"problem": {"shape": shape, "instance": instance}}
