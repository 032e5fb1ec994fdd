"""Reading and writing problems: accelmap's own YAML/JSON format, and one loader for all.

The accelmap problem format (YAML or JSON, the same tree)::

    version: 1
    problem:
      name: conv3_1
      repeat: 1                       # optional, default 1
      dims: {N: 1, K: 128, C: 128, P: 28, Q: 28, R: 3, S: 3}   # loop order = key order
      tensors:
      - name: Weights
        role: weight                  # input | weight | output (exactly one output)
        word_bits: 16                 # optional, default 16
        projection: [[K], [C], [R], [S]]
      - name: Inputs
        role: input
        projection:
        - [N]
        - [C]
        - [{dim: P, coef: 2}, R]      # input row = 2*P + R
        - [{dim: Q, coef: 2}, S]
      - name: Outputs
        role: output
        projection: [[N], [K], [P], [Q]]

A projection is a list of coordinates; a coordinate is a list of terms; a term is a
dimension name (coefficient 1) or ``{dim: NAME, coef: INT}``. There is no expression
syntax inside strings. Parsing is strict: an unknown key, a wrong type, a bound below 1 or
an unknown dimension is a :class:`~accelmap.errors.SpecError` that names the file, the key
path (``conv.yaml: problem.tensors[1].projektion``), what was found and what is accepted.

:func:`load_problem` takes any of: a zoo name ``"network/layer"``, a path to a file in this
format, or a path to a Timeloop problem file (recognised by its content: a top-level
``problem`` with ``shape`` or ``instance``, and no ``version``).
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import accelmap._schema as schema
from accelmap.errors import SpecError
from accelmap.workloads.problem import Dim, Problem, Tensor, TensorRole, Term

__all__ = [
    "FORMAT_VERSION",
    "problem_to_dict",
    "problem_from_dict",
    "load_problem_file",
    "save_problem",
    "load_problem",
    "read_spec_file",
    "file_stem",
]

FORMAT_VERSION = 1

_TOP_KEYS = ("version", "problem")
_PROBLEM_KEYS = ("name", "repeat", "dims", "tensors")
_TENSOR_KEYS = ("name", "role", "word_bits", "projection", "pad", "extent")
_TERM_KEYS = ("dim", "coef")
_ROLES = tuple(r.value for r in TensorRole)
_SUFFIXES = (".yaml", ".yml", ".json")


# --- writing ------------------------------------------------------------------------------
def problem_to_dict(problem: Problem) -> dict[str, Any]:
    """The accelmap-format tree of ``problem`` (plain dicts, lists, str and int).

    Examples
    --------
    >>> from accelmap.workloads.builders import matmul
    >>> problem_to_dict(matmul("mm", m=2, n=3, k=4))["problem"]["dims"]
    {'M': 2, 'N': 3, 'K': 4}
    """

    def term(t: Term) -> str | dict[str, Any]:
        return t.dim if t.coef == 1 else {"dim": t.dim, "coef": t.coef}

    return {
        "version": FORMAT_VERSION,
        "problem": {
            "name": problem.name,
            "repeat": problem.repeat,
            "dims": {d.name: d.bound for d in problem.dims},
            "tensors": [
                {
                    "name": t.name,
                    "role": t.role.value,
                    "word_bits": t.word_bits,
                    "projection": [[term(x) for x in coord] for coord in t.projection],
                    **({"pad": list(t.pad) if t.pad is not None else [0] * len(t.projection),
                        "extent": list(t.extent)} if t.extent is not None else {}),
                }
                for t in problem.tensors
            ],
        },
    }


def file_stem(name: str) -> str:
    """A layer or file name as a safe file-name stem: runs of characters other than
    letters, digits, ``_``, ``.`` and ``-`` become ``_`` (``"block/conv 1"`` ->
    ``"block_conv_1"``); ``"layer"`` when nothing is left."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "layer"


def save_problem(problem: Problem, path: str | Path) -> None:
    """Write ``problem`` in the accelmap format: JSON for ``*.json``, YAML otherwise."""
    path = Path(path)
    data = problem_to_dict(problem)
    if path.suffix.lower() == ".json":
        text = json.dumps(data, indent=2) + "\n"
    else:
        import yaml

        text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    path.write_text(text, encoding="utf-8")


# --- strict parsing -----------------------------------------------------------------------
def _term(path: str, value: Any, dims: list[str]) -> Term:
    if isinstance(value, str):
        name, coef = value, 1
        dim_path = path
    elif isinstance(value, dict):
        schema.check_keys(value, _TERM_KEYS, path, "a term", required=("dim",))
        name = schema.name(value, "dim", path, default=schema.REQUIRED)
        coef = schema.integer(value, "coef", path, default=1)
        dim_path = f"{path}.dim"
    else:
        raise SpecError(f"{path} = {schema.describe(value)}; expected a dimension name or {{dim: NAME, coef: INT}}")
    if name not in dims:
        raise SpecError(f"{dim_path} = {name!r}: unknown dimension; known dimensions: {', '.join(dims)}")
    return Term(dim=name, coef=coef)


def _tensor(path: str, value: Any, dims: list[str]) -> Tensor:
    tv = schema.check_keys(value, _TENSOR_KEYS, path, "a tensor", required=("name", "role", "projection"))
    name = schema.name(tv, "name", path, default=schema.REQUIRED)
    role = schema.choice(tv, "role", path, _ROLES, default=schema.REQUIRED)
    word_bits = schema.integer(tv, "word_bits", path, default=16)
    coords = schema.nonempty_list(tv, "projection", path, "coordinates")
    projection = []
    for ci, coord in enumerate(coords):
        cpath = f"{path}.projection[{ci}]"
        terms = schema.list_value(coord, cpath, "terms (dimension names or {dim: NAME, coef: INT})")
        projection.append(tuple(_term(f"{cpath}[{i}]", t, dims) for i, t in enumerate(terms)))
    shape: dict[str, tuple[int, ...] | None] = {"pad": None, "extent": None}
    for key, low in (("pad", 0), ("extent", 1)):
        if key in tv:
            vals = schema.nonempty_list(tv, key, path, f"ints, one per coordinate ({len(projection)})")
            if len(vals) != len(projection):
                raise SpecError(
                    f"{path}.{key} has {len(vals)} entries; expected {len(projection)}, one per "
                    "coordinate of the projection"
                )
            shape[key] = tuple(schema.int_value(v, f"{path}.{key}[{i}]", minimum=low) for i, v in enumerate(vals))
    if shape["pad"] is not None and shape["extent"] is None:
        raise SpecError(f"{path}.pad without {path}.extent; give the tensor's extent per coordinate too")
    return Tensor(name=name, projection=tuple(projection), role=TensorRole(role), word_bits=word_bits,
                  pad=shape["pad"], extent=shape["extent"])


def problem_from_dict(data: Any, source: str = "<dict>") -> Problem:
    """Parse an accelmap-format tree (as read from YAML or JSON) into a :class:`Problem`.

    Parameters
    ----------
    data
        The parsed document.
    source
        Where it came from (a file name), used as the prefix of every error message.

    Raises
    ------
    SpecError
        On any deviation from the format, naming ``source`` and the key path.
    """
    top = schema.check_keys(data, _TOP_KEYS, f"{source}: ", "a problem file")
    if "version" not in top:
        raise SpecError(
            f"{source}: version is missing; expected `version: {FORMAT_VERSION}` at the top level "
            "of an accelmap problem file"
        )
    version = top["version"]
    if not schema.is_int(version) or version != FORMAT_VERSION:
        raise SpecError(
            f"{source}: version = {schema.describe(version)}; expected {FORMAT_VERSION} "
            f"(this accelmap reads problem files of version {FORMAT_VERSION})"
        )
    if "problem" not in top:
        raise SpecError(f"{source}: problem is missing; expected a `problem:` mapping at the top level")
    where = f"{source}: problem"
    pv = schema.check_keys(top["problem"], _PROBLEM_KEYS, where, "a problem", required=("name", "dims", "tensors"))
    name = schema.name(pv, "name", where, default=schema.REQUIRED)
    repeat = schema.integer(pv, "repeat", where, default=1)
    raw_dims = pv["dims"]
    if not isinstance(raw_dims, dict) or not raw_dims:
        raise SpecError(
            f"{where}.dims = {schema.describe(raw_dims)}; expected a non-empty mapping "
            "of dimension name to bound, e.g. {N: 1, K: 64}"
        )
    dims = []
    for dname, bound in raw_dims.items():
        if not isinstance(dname, str) or not dname.replace("_", "").isalnum():
            raise SpecError(
                f"{where}.dims: key {schema.describe(dname)}; expected a dimension name "
                "(letters, digits, underscores)"
            )
        dims.append(Dim(name=dname, bound=schema.int_value(bound, f"{where}.dims.{dname}")))
    dim_names = [d.name for d in dims]
    raw_tensors = schema.nonempty_list(pv, "tensors", where, "tensors")
    tensors = tuple(_tensor(f"{where}.tensors[{i}]", t, dim_names) for i, t in enumerate(raw_tensors))
    try:
        return Problem(name=name, dims=tuple(dims), tensors=tensors, repeat=repeat)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from exc


# --- files --------------------------------------------------------------------------------
def _strict_yaml_loader() -> type:
    """A SafeLoader that rejects duplicate mapping keys (PyYAML keeps the last silently)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined,unused-ignore]
        pass

    def construct_mapping(
        loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False
    ) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key; the base constructor reports it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"duplicate key {key!r} (first given on line {first})", key_node.start_mark,
                )  # fmt: skip
            seen[key] = key_node.start_mark.line + 1
        mapping: dict[Any, Any] = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
        return mapping

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return StrictLoader


def read_spec_file(path: str | Path) -> Any:
    """Parse a YAML (or, for ``*.json``, JSON) file; syntax errors name the file and line.

    Raises
    ------
    SpecError
        When the file is missing or unreadable, or is not valid YAML/JSON.
    """
    import yaml

    source = str(path)
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise SpecError(f"{source}: is a directory; expected a problem file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{source}: cannot be read: {exc}") from exc
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(
                f"{source}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
            ) from exc
    try:
        return yaml.load(text, Loader=_strict_yaml_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        context = f" ({exc.context})" if exc.context else ""
        raise SpecError(f"{source}: {where}invalid YAML: {exc.problem}{context}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{source}: invalid YAML: {exc}") from exc


def _is_timeloop(data: Any) -> bool:
    if not isinstance(data, dict) or "version" in data:
        return False
    prob = data.get("problem")
    return isinstance(prob, dict) and ("shape" in prob or "instance" in prob)


def load_problem_file(path: str | Path) -> Problem:
    """Read a problem file: accelmap format, or a Timeloop problem (detected by content)."""
    data = read_spec_file(path)
    if _is_timeloop(data):
        from accelmap.workloads.timeloop import problem_from_timeloop

        return problem_from_timeloop(data, str(path))
    return problem_from_dict(data, str(path))


def load_problem(spec: str | Path) -> Problem:
    """One problem from a zoo name ``"network/layer"`` or a file path.

    A path to an existing file is read with :func:`load_problem_file` (accelmap or Timeloop
    format). Otherwise ``spec`` is looked up in the zoo.

    Raises
    ------
    SpecError
        For a missing file, or a string that is neither a file nor a zoo layer; the message
        lists the zoo networks when the string looks like a zoo name.
    UnknownPluginError
        For an unknown layer of a known zoo network (with close matches).

    Examples
    --------
    >>> load_problem("vgg16/conv3_1").describe()
    'conv3_1: N=1 K=256 C=128 P=56 Q=56 R=3 S=3  (924,844,032 MACs)'
    """
    from accelmap.workloads import zoo

    path = Path(spec)
    if path.is_file():
        return load_problem_file(path)
    text = str(spec)
    if path.exists():
        raise SpecError(f"{text}: is a directory; expected a problem file or a zoo name 'network/layer'")
    nets = zoo.networks()
    listing = ", ".join(nets)
    if path.suffix.lower() in _SUFFIXES or isinstance(spec, Path):
        raise SpecError(f"{text}: no such file")
    net_name, sep, layer_name = text.partition("/")
    if net_name in nets:
        if not sep or not layer_name:
            layers = ", ".join(zoo.network(net_name).layer_names)
            raise SpecError(
                f"{text!r} is a zoo network, not one layer; name a layer as '{net_name}/LAYER'. "
                f"Layers: {layers}"
            )
        return zoo.layer(text)
    close = difflib.get_close_matches(net_name, nets, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    if not sep or "/" in layer_name or "\\" in text or text.startswith("."):
        raise SpecError(
            f"{text}: no such file, and not a zoo layer 'network/layer'.{hint} Zoo networks: {listing}"
        )
    raise SpecError(
        f"{text}: no such file, and {net_name!r} is not a zoo network.{hint} Zoo networks: {listing}"
    )
