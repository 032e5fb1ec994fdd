"""One strict validation layer for every spec file reader.

Each reader walks its parsed YAML/JSON tree with these helpers, so every file speaks the same
error language: what is wrong, where (file and key path), what was received (with its kind
when the type is wrong) and what was expected, with a "did you mean" for a misspelt key or
name::

    arch.yaml: levels[1].capacity_words = 0; expected an int >= 1, or null for unbounded
    conv.yaml: problem.dims.K = '8' (a string); expected an int >= 1
    dse.yaml: parameters[0].feild: unknown key (did you mean 'field'?); accepted keys: level, field, ...

The readers that use it: architectures (`accelmap.arch.io`), problems
(`accelmap.workloads.io`), mappings (`accelmap.mapper.io`), mapping constraints
(`accelmap.mapper.constraints`, and the targets of Timeloop constraint files in
`accelmap.mapper.timeloop_constraints`), sweeps (`accelmap.parallel.sweep`) and design
spaces (`accelmap.parallel.dse`). A check that only one format needs (a dimension named in
a projection, Timeloop's factor strings) stays in its reader, in the same message form.

A *where* is the path prefix of the node being read: ``"arch.yaml: "`` for the top level
(a trailing ``": "``), or ``"arch.yaml: levels[1]"`` below it; :func:`join` appends a key.
Every check raises :class:`~accelmap.errors.SpecError`.

Why our own module and not a schema library (pydantic v2): the messages are the product here
(file, key path, received value, expected form, near-miss keys), and pydantic's, once
re-worded to this form, cost a model class per node plus a translation of its error list;
the helpers below are the few checks the readers need, each one line of message, at no
import cost.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any

from accelmap._registry import did_you_mean
from accelmap.errors import SpecError

__all__ = ["REQUIRED", "join", "check_keys", "integer", "number", "boolean", "name", "nonempty_list", "choice",
           "mapping", "names", "items", "int_list", "int_mapping", "is_int", "describe", "int_value", "number_value", "bool_value", "choice_value", "list_value",
           "plugin_value"]


class _Required:
    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


def join(where: str, key: str | int) -> str:
    """The path of ``key`` (a mapping key, or a list index) under ``where``."""
    if isinstance(key, int):
        return f"{where.removesuffix(': ')}[{key}]"
    return f"{where}{key}" if where.endswith(": ") else f"{where}.{key}"


def _show(obj: Any) -> str:
    shown = repr(obj)
    return shown if len(shown) <= 60 else shown[:57] + "..."


_KINDS = {dict: "a mapping", list: "a list", str: "a string", bool: "a bool", int: "an int", float: "a float",
          type(None): "empty"}


def describe(v: Any) -> str:
    """A received value with its kind, ``'8' (a string)``, ``None (empty)``: the form of a value
    whose type is wrong (a quoted number, a list for a mapping, a key left empty)."""
    return f"{_show(v)} ({_KINDS.get(type(v), type(v).__name__)})"


def _got(v: Any, type_ok: bool) -> str:
    # An out-of-range value of the right type is shown bare; any other with its kind.
    return _show(v) if type_ok else describe(v)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_keys(obj: Any, accepted: Sequence[str], where: str, what: str, *,
               required: Sequence[str] = ()) -> dict[str, Any]:
    """``obj`` as a mapping whose keys are all in ``accepted`` and include ``required``."""
    if not isinstance(obj, dict):
        subject = f"{where}the top level" if where.endswith(": ") else where
        kind = "empty" if obj is None else f"a {type(obj).__name__}"
        raise SpecError(f"{subject} is {kind} ({_show(obj)}); expected {what} with keys {', '.join(accepted)}")
    for key in obj:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), list(accepted), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{join(where, str(key))}: unknown key{hint}; accepted keys: {', '.join(accepted)}")
    for key in required:
        if key not in obj:
            raise SpecError(f"{join(where, key)} is missing; {what} needs keys {', '.join(required)}")
    return obj


def is_int(v: Any) -> bool:
    """Whether ``v`` is an int (YAML's true/false are not)."""
    return isinstance(v, int) and not isinstance(v, bool)


def int_value(v: Any, path: str, *, minimum: int = 1) -> int:
    """``v`` (found at ``path``) as an int >= ``minimum``."""
    if not is_int(v) or v < minimum:
        raise SpecError(f"{path} = {_got(v, is_int(v))}; expected an int >= {minimum}")
    return v


def number_value(v: Any, path: str, *, minimum: float = 0.0, strict: bool = True) -> float:
    """``v`` (found at ``path``) as a finite number above ``minimum``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or (v <= minimum if strict else v < minimum):
        raise SpecError(f"{path} = {_got(v, _is_real(v))}; expected a number {'>' if strict else '>='} {minimum:g}")
    return v


def bool_value(v: Any, path: str) -> bool:
    """``v`` (found at ``path``) as true or false."""
    if not isinstance(v, bool):
        raise SpecError(f"{path} = {describe(v)}; expected true or false")
    return v


def choice_value(v: Any, path: str, choices: Sequence[str], *, label: str = "") -> str:
    """``v`` (found at ``path``) as one of ``choices``, with a "did you mean" for a near miss;
    ``label`` names the list in the message ("expected one of the levels of eyeriss: ...")."""
    if not isinstance(v, str) or v not in choices:
        close = difflib.get_close_matches(str(v), list(choices), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listed = f"{label}: " if label else ""
        raise SpecError(f"{path} = {_got(v, isinstance(v, str))}{hint}; expected one of {listed}{', '.join(choices)}")
    return v


def _noted(expect: str, note: str) -> str:
    return f"{expect} ({note})" if note else expect


def integer(obj: dict[str, Any], key: str, where: str, *, default: Any, nullable: bool = False,
            minimum: int = 1, null_means: str = "unbounded", note: str = "") -> Any:
    """``obj[key]`` as an int >= ``minimum`` (or None when ``nullable``); ``default`` if absent.

    ``note`` says what the value means, in parentheses after the expected form.
    """
    expect = _noted(f"an int >= {minimum}" + (f", or null for {null_means}" if nullable else ""), note)
    if key not in obj:
        if default is REQUIRED:
            raise SpecError(f"{join(where, key)} is missing; expected {expect}")
        return default
    v = obj[key]
    if v is None and nullable:
        return None
    if not is_int(v) or v < minimum:
        raise SpecError(f"{join(where, key)} = {_got(v, is_int(v))}; expected {expect}")
    return v


def number(obj: dict[str, Any], key: str, where: str, *, default: Any, minimum: float, strict: bool,
           nullable: bool = False, null_means: str = "unlimited", maximum: float | None = None) -> Any:
    """``obj[key]`` as a finite number above ``minimum`` (``>`` when ``strict``, else ``>=``)
    and, given ``maximum``, at most ``maximum``."""
    if maximum is None:
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
    else:
        bound = f"in {'(' if strict else '['}{minimum:g}, {maximum:g}]"
    expect = f"a number {bound}" + (f", or null for {null_means}" if nullable else "")
    if key not in obj:
        if default is REQUIRED:
            raise SpecError(f"{join(where, key)} is missing; expected {expect}")
        return default
    v = obj[key]
    if v is None and nullable:
        return None
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or not math.isfinite(v)
        or (v <= minimum if strict else v < minimum)
        or (maximum is not None and v > maximum)
    ):
        raise SpecError(f"{join(where, key)} = {_got(v, _is_real(v))}; expected {expect}")
    return v


def boolean(obj: dict[str, Any], key: str, where: str, *, default: Any) -> Any:
    """``obj[key]`` as true or false; ``default`` if absent (REQUIRED: must be present)."""
    if key not in obj and default is REQUIRED:
        raise SpecError(f"{join(where, key)} is missing; expected true or false")
    v = obj.get(key, default)
    if not isinstance(v, bool):
        raise SpecError(f"{join(where, key)} = {describe(v)}; expected true or false")
    return v


def name(obj: dict[str, Any], key: str, where: str, *, default: Any, note: str = "") -> str:
    """``obj[key]`` as a non-empty string (``note``: examples, in parentheses)."""
    expect = _noted("a non-empty string", note)
    if key not in obj:
        if default is REQUIRED:
            raise SpecError(f"{join(where, key)} is missing; expected {expect}")
        return str(default)
    v = obj[key]
    if not isinstance(v, str) or not v.strip():
        raise SpecError(f"{join(where, key)} = {describe(v)}; expected {expect}")
    return v


def nonempty_list(obj: dict[str, Any], key: str, where: str, what: str) -> list[Any]:
    """``obj[key]`` as a non-empty list (``what`` describes its items)."""
    if key not in obj:
        raise SpecError(f"{join(where, key)} is missing; expected a non-empty list of {what}")
    v = obj[key]
    if not isinstance(v, list) or not v:
        raise SpecError(f"{join(where, key)} = {describe(v)}; expected a non-empty list of {what}")
    return v


def list_value(v: Any, path: str, what: str) -> list[Any]:
    """``v`` (found at ``path``) as a non-empty list (``what`` describes its items)."""
    if not isinstance(v, list) or not v:
        raise SpecError(f"{path} = {describe(v)}; expected a non-empty list of {what}")
    return v


def items(obj: dict[str, Any], key: str, where: str, what: str) -> list[Any]:
    """``obj[key]`` as a list, possibly empty (absent or null: empty); ``what`` describes its items."""
    v = obj.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise SpecError(f"{join(where, key)} = {describe(v)}; expected a list of {what}")
    return v


def int_list(obj: dict[str, Any], key: str, where: str, what: str, *, minimum: int = 1) -> list[int]:
    """``obj[key]`` (required) as a non-empty list of ints >= ``minimum``; a bad item is named by index."""
    path = join(where, key)
    return [int_value(v, f"{path}[{i}]", minimum=minimum)
            for i, v in enumerate(nonempty_list(obj, key, where, what))]


def names(obj: dict[str, Any], key: str, where: str, what: str, *, default: Any, single: str = "") -> Any:
    """``obj[key]`` as a list of non-empty strings (``what``: the plural, e.g. "tensor names"),
    possibly empty; with ``single`` (the singular, e.g. "a file path") a lone string stands
    for a list of one."""
    if key not in obj:
        if default is REQUIRED:
            raise SpecError(f"{join(where, key)} is missing; expected a list of {what}")
        return default
    v = obj[key]
    path = join(where, key)
    if single and isinstance(v, str):
        v = [v]
    if not isinstance(v, list):
        expect = f"{single} or a list of them" if single else f"a list of {what}"
        raise SpecError(f"{path} = {describe(v)}; expected {expect}")
    for i, item in enumerate(v):
        if not isinstance(item, str) or not item.strip():
            raise SpecError(f"{path}[{i}] = {describe(item)}; expected {single or 'a name'} (a non-empty string)")
    return list(v)


def int_mapping(obj: dict[str, Any], key: str, where: str, keys: Sequence[str], *, key_kind: str,
                keys_label: str, value_kind: str, example: str, minimum: int = 1) -> dict[str, int]:
    """``obj[key]`` as a mapping from names in ``keys`` to ints >= ``minimum`` (absent or null:
    empty), e.g. loop factors by dimension name. An unknown name is reported as an unknown
    ``key_kind`` with a "did you mean" and the ``keys_label``-ed list of ``keys``."""
    v = obj.get(key)
    if v is None:
        return {}
    path = join(where, key)
    if not isinstance(v, dict):
        raise SpecError(f"{path} = {describe(v)}; expected a mapping of {key_kind} name to {value_kind}, e.g. {example}")
    for k, val in v.items():
        if k not in keys:
            close = difflib.get_close_matches(str(k), list(keys), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{join(path, str(k))}: unknown {key_kind}{hint}; {keys_label}: {', '.join(keys)}")
        int_value(val, join(path, str(k)), minimum=minimum)
    return v


def mapping(obj: dict[str, Any], key: str, where: str, what: str) -> dict[str, Any]:
    """``obj[key]`` as a mapping (absent or null: empty); ``what`` describes its entries."""
    v = obj.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise SpecError(f"{join(where, key)} = {describe(v)}; expected a mapping of {what}")
    return v


def plugin_value(v: Any, path: str, known: Sequence[str], kind: str) -> str:
    """``v`` (found at ``path``) as the name of a registered plugin of ``kind`` (a searcher, a
    cost model); an unknown name lists the close matches and every known name."""
    if not isinstance(v, str) or v not in known:
        raise SpecError(f"{path}: {did_you_mean(str(v), list(known), what=kind)}")
    return v


def choice(obj: dict[str, Any], key: str, where: str, choices: Sequence[str], *, default: Any,
           label: str = "") -> Any:
    """``obj[key]`` as one of ``choices`` (a near miss gets a "did you mean")."""
    if key not in obj:
        if default is REQUIRED:
            listed = f"{label}: " if label else ""
            raise SpecError(f"{join(where, key)} is missing; expected one of {listed}{', '.join(choices)}")
        return default
    return choice_value(obj[key], join(where, key), choices, label=label)
