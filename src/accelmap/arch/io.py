"""The accelmap architecture file format (YAML or JSON, the same tree), strict.

.. code-block:: yaml

    version: 1
    name: my-array
    description: a 16x16 array over a 64Ki-word buffer     # optional
    node_nm: 45                    # optional process node, for the area model (accelmap.arch.area)
    compute: {name: MAC, energy_per_mac_pj: 1.0, clock_hz: 1.0e9, word_bits: 16}
    levels:                        # outermost (DRAM) first
      - name: DRAM
        capacity_words: null       # null = unbounded; required, so it is never unbounded by accident
        word_bits: 16              # every key below is optional; defaults shown
        block_words: 1             # energies are per access of this many words
        read_energy_pj: 200.0
        write_energy_pj: 200.0
        read_bandwidth_words_per_cycle: null    # null = unlimited
        write_bandwidth_words_per_cycle: null
        holds: null                # null = every tensor; else a list of names or roles
        fanout_x: 1                # instances of the next inner level (or MACs) below one instance
        fanout_y: 1
        multicast: true
        spatial_reduction: true
      - name: GLB
        capacity_words: 65536
        holds: [input, output]
        fanout_x: 16
        fanout_y: 16
      - name: RF
        capacity_words: 64

Parsing is strict: an unknown key, a wrong type, a capacity below 1 or a negative energy is
a :class:`~accelmap.errors.SpecError` naming the file and the key path
(``arch.yaml: levels[1].capacity_words = 0; expected an int >= 1, or null for unbounded``).
YAML floats may be written ``1e9`` as well as ``1.0e+9``.

:func:`load_arch` takes a preset name (:func:`accelmap.arch.presets.presets`) or a path to
a file in this format or in Timeloop's (recognised by a top-level ``architecture`` key,
imported by :mod:`accelmap.arch.timeloop` with an optional energy reference table).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

import accelmap._schema as schema
from accelmap._files import read_text
from accelmap._registry import did_you_mean
from accelmap.arch.presets import preset, presets
from accelmap.arch.spec import Arch, Compute, StorageLevel
from accelmap.errors import SpecError, UnknownPluginError

__all__ = [
    "FORMAT_VERSION",
    "arch_to_dict",
    "arch_from_dict",
    "load_arch_file",
    "save_arch",
    "load_arch",
    "read_arch_tree",
]

FORMAT_VERSION = 1

_TOP_KEYS = ("version", "name", "description", "node_nm", "compute", "levels", "constraints")
_COMPUTE_KEYS = ("name", "energy_per_mac_pj", "clock_hz", "word_bits")
_LEVEL_KEYS = (
    "name",
    "capacity_words",
    "word_bits",
    "block_words",
    "read_energy_pj",
    "write_energy_pj",
    "read_bandwidth_words_per_cycle",
    "write_bandwidth_words_per_cycle",
    "holds",
    "fanout_x",
    "fanout_y",
    "multicast",
    "spatial_reduction",
)
_SUFFIXES = (".yaml", ".yml", ".json")


# --- reading files ------------------------------------------------------------------------
class _Loader(yaml.SafeLoader):
    """Safe YAML loader that also reads ``1e9`` / ``2.5E-3`` as floats (YAML 1.2 style).

    PyYAML follows YAML 1.1, where a float needs a dot (``1.0e+9``), so ``clock_hz: 1e9``
    would silently be the string ``"1e9"``.
    """


class _Dumper(yaml.SafeDumper):
    """Safe YAML dumper that quotes every string `_Loader` would read as a float (``"0E0"``),
    so that saved files load back unchanged."""


_FLOAT_12 = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
for _cls in (_Loader, _Dumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def read_arch_tree(path: str | Path) -> Any:
    """Parse a YAML or JSON file into plain data.

    Raises
    ------
    SpecError
        The file is missing, or is not valid YAML/JSON (the message names file and line).
    """
    p = Path(path)
    try:
        text = read_text(p)
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    except OSError as exc:
        raise SpecError(f"{p}: cannot be read: {exc.strerror or exc}") from exc
    try:
        if p.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except json.JSONDecodeError as exc:
        raise SpecError(f"{p}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{p}: {where}invalid YAML: {problem}") from exc


# --- writing -------------------------------------------------------------------------------
def _plain_number(x: float | int) -> float | int:
    return x if isinstance(x, int) else float(x)


def arch_to_dict(arch: Arch) -> dict[str, Any]:
    """The file form of ``arch`` (plain dicts, lists, str, int, float, bool, None).

    Every level key is written, so a file says everything about its levels.

    Examples
    --------
    >>> from accelmap.arch.presets import preset
    >>> d = arch_to_dict(preset("eyeriss-like"))
    >>> d["version"], d["levels"][1]["name"], d["levels"][1]["holds"]
    (1, 'shared_glb', ['input', 'output'])
    """
    levels = []
    for lv in arch.levels:
        levels.append(
            {
                "name": lv.name,
                "capacity_words": lv.capacity_words,
                "word_bits": lv.word_bits,
                "block_words": lv.block_words,
                "read_energy_pj": _plain_number(lv.read_energy_pj),
                "write_energy_pj": _plain_number(lv.write_energy_pj),
                "read_bandwidth_words_per_cycle": None
                if lv.read_bandwidth_words_per_cycle is None
                else _plain_number(lv.read_bandwidth_words_per_cycle),
                "write_bandwidth_words_per_cycle": None
                if lv.write_bandwidth_words_per_cycle is None
                else _plain_number(lv.write_bandwidth_words_per_cycle),
                "holds": None if lv.holds is None else sorted(lv.holds),
                "fanout_x": lv.fanout_x,
                "fanout_y": lv.fanout_y,
                "multicast": lv.multicast,
                "spatial_reduction": lv.spatial_reduction,
            }
        )
    c = arch.compute
    out: dict[str, Any] = {"version": FORMAT_VERSION, "name": arch.name}
    if arch.description:
        out["description"] = arch.description
    if arch.node_nm is not None:
        out["node_nm"] = arch.node_nm
    out["compute"] = {
        "name": c.name,
        "energy_per_mac_pj": _plain_number(c.energy_per_mac_pj),
        "clock_hz": _plain_number(c.clock_hz),
        "word_bits": c.word_bits,
    }
    out["levels"] = levels
    if arch.constraints:
        out["constraints"] = {k: v for k, v in arch.constraints}
    return out


def save_arch(arch: Arch, path: str | Path) -> None:
    """Write ``arch`` as YAML, or JSON when the suffix is ``.json``."""
    p = Path(path)
    data = arch_to_dict(arch)
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(data, indent=2) + "\n")
    else:
        p.write_text(yaml.dump(data, Dumper=_Dumper, sort_keys=False))


# --- parsing -------------------------------------------------------------------------------
# The strict checks are the shared spec layer's (`accelmap._schema`); local names kept short.
_check_keys = schema.check_keys
_join = schema.join
_int = schema.integer
_number = schema.number
_bool = schema.boolean
_name = schema.name
_REQUIRED = schema.REQUIRED


def _holds(obj: dict[str, Any], where: str) -> frozenset[str] | None:
    v = obj.get("holds")
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise SpecError(
            f"{_join(where, 'holds')} = {v!r}; expected a list of tensor names or roles "
            "(input, weight, output), or null for every tensor"
        )
    dup = sorted({x for x in v if v.count(x) > 1})
    if dup:
        raise SpecError(f"{_join(where, 'holds')} lists {dup} more than once; list each name once")
    return frozenset(v)


def _level(obj: Any, where: str) -> StorageLevel:
    obj = _check_keys(obj, _LEVEL_KEYS, where, "a storage level")
    d = StorageLevel.__dataclass_fields__  # defaults come from the spec, written down once
    kwargs: dict[str, Any] = {
        "name": _name(obj, "name", where, default=_REQUIRED),
        "capacity_words": _int(obj, "capacity_words", where, default=_REQUIRED, nullable=True),
        "holds": _holds(obj, where),
    }
    for key in ("word_bits", "block_words", "fanout_x", "fanout_y"):
        kwargs[key] = _int(obj, key, where, default=d[key].default)
    for key in ("read_energy_pj", "write_energy_pj"):
        kwargs[key] = _number(obj, key, where, default=d[key].default, minimum=0, strict=False)
    for key in ("read_bandwidth_words_per_cycle", "write_bandwidth_words_per_cycle"):
        kwargs[key] = _number(obj, key, where, default=None, minimum=0, strict=True, nullable=True)
    for key in ("multicast", "spatial_reduction"):
        kwargs[key] = _bool(obj, key, where, default=d[key].default)
    try:
        return StorageLevel(**kwargs)
    except SpecError as exc:  # a spec invariant not checked above
        raise SpecError(f"{where}: {exc}") from exc


def _compute(obj: Any, where: str) -> Compute:
    obj = _check_keys(obj, _COMPUTE_KEYS, where, "the compute units")
    d = Compute.__dataclass_fields__
    return Compute(
        name=_name(obj, "name", where, default=d["name"].default),
        energy_per_mac_pj=_number(obj, "energy_per_mac_pj", where, default=_REQUIRED, minimum=0, strict=False),
        clock_hz=_number(obj, "clock_hz", where, default=d["clock_hz"].default, minimum=0, strict=True),
        word_bits=_int(obj, "word_bits", where, default=d["word_bits"].default),
    )


def arch_from_dict(data: Any, source: str = "<arch>") -> Arch:
    """Build an `Arch` from its file form.

    Parameters
    ----------
    data
        The parsed tree (see the module docstring).
    source
        Where it came from (a file name), the prefix of every error message. When the tree
        has no ``name``, the file's stem is the arch's name.

    Raises
    ------
    SpecError
        At the first malformed key, with its path, what was found and what is accepted.

    Examples
    --------
    >>> arch = arch_from_dict({"version": 1, "name": "tiny",
    ...     "compute": {"energy_per_mac_pj": 1.0},
    ...     "levels": [{"name": "DRAM", "capacity_words": None},
    ...                {"name": "RF", "capacity_words": 64, "read_energy_pj": 1e-1}]})
    >>> arch.level_names, arch.n_macs
    (('DRAM', 'RF'), 1)
    """
    top_where = f"{source}: "
    if _is_timeloop(data):
        raise SpecError(
            f"{source}: a Timeloop arch file (top-level `architecture:`); read it with load_arch_file "
            "or load_arch, which import Timeloop's format"
        )
    top = _check_keys(data, _TOP_KEYS, top_where, "an arch file")
    version = top.get("version")
    if isinstance(version, bool) or version != FORMAT_VERSION:
        raise SpecError(
            f"{source}: version = {version!r}; expected {FORMAT_VERSION} (add `version: 1` at the top)"
        )
    stem = Path(source).stem if source and not source.startswith("<") else "arch"
    name = _name(top, "name", top_where, default=stem)
    description = top.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{source}: description = {description!r}; expected a string")
    if "compute" not in top:
        raise SpecError(f"{source}: compute is missing; expected e.g. compute: {{energy_per_mac_pj: 1.0}}")
    compute = _compute(top["compute"], f"{source}: compute")
    levels_obj = top.get("levels")
    if not isinstance(levels_obj, list) or not levels_obj:
        raise SpecError(
            f"{source}: levels = {levels_obj!r}; expected a non-empty list of storage levels, outermost first"
        )
    levels = tuple(_level(obj, f"{source}: levels[{i}]") for i, obj in enumerate(levels_obj))
    constraints_obj = top.get("constraints", {})
    if constraints_obj is None:
        constraints_obj = {}
    if not isinstance(constraints_obj, dict) or not all(isinstance(k, str) for k in constraints_obj):
        raise SpecError(f"{source}: constraints = {constraints_obj!r}; expected a mapping of name to value")
    try:
        return Arch(
            name=name,
            levels=levels,
            compute=compute,
            description=description,
            constraints=tuple(constraints_obj.items()),
            node_nm=_int(top, "node_nm", top_where, default=None, nullable=True),
        )
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from exc


def _is_timeloop(data: Any) -> bool:
    return isinstance(data, dict) and "architecture" in data


def load_arch_file(path: str | Path, energy: str | Path | None = None) -> Arch:
    """Read an arch file: the accelmap format, or Timeloop's (detected by content).

    Parameters
    ----------
    path
        A ``.yaml``, ``.yml`` or ``.json`` file.
    energy
        For a Timeloop arch only: its energy reference table (``ERT.yaml``, Accelergy's
        output), whose per-action energies fill the levels.

    Raises
    ------
    SpecError
        Missing file, syntax error (file and line), malformed content (file and key path),
        or ``energy`` given for an accelmap-format file.
    """
    data = read_arch_tree(path)
    if _is_timeloop(data):
        from accelmap.arch.timeloop import arch_from_timeloop

        ert = read_arch_tree(energy) if energy is not None else None
        return arch_from_timeloop(data, str(path), ert)
    if energy is not None:
        raise SpecError(
            f"{path}: an energy reference table ({energy}) applies only to a Timeloop arch file "
            "(top-level `architecture:`); accelmap arch files carry their energies per level"
        )
    return arch_from_dict(data, str(path))


def load_arch(spec: str | Path, energy: str | Path | None = None) -> Arch:
    """An architecture from a preset name or a file path.

    Parameters
    ----------
    spec
        A preset name (``"eyeriss-like"``; see :func:`accelmap.arch.presets.presets`) or the
        path of an arch file (accelmap or Timeloop format).
    energy
        Timeloop energy reference table, for a Timeloop arch file only.

    Raises
    ------
    UnknownPluginError
        ``spec`` is neither a preset nor an existing file and does not look like a path.
    SpecError
        The file is missing or malformed.

    Examples
    --------
    >>> load_arch("eyeriss-like").n_macs
    168
    """
    text = str(spec)
    if isinstance(spec, str) and spec in presets():
        if energy is not None:
            raise SpecError(
                f"arch {spec!r} is a preset; an energy reference table applies only to a Timeloop arch file"
            )
        return preset(spec)
    p = Path(text)
    if p.is_file():
        return load_arch_file(p, energy)
    if p.suffix.lower() in _SUFFIXES or "/" in text or "\\" in text:
        raise SpecError(f"{text}: no such arch file")
    msg = did_you_mean(text, presets(), what="architecture preset")
    raise UnknownPluginError(f"{msg} Or give the path of an arch file (.yaml, .yml, .json).")
