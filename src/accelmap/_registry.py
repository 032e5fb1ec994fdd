"""One typed plugin registry for every plugin kind.

Plugins are found through entry points (``accelmap.costmodels``, ``accelmap.searchers``)
and loaded lazily on first :meth:`Registry.get`. An unknown name answers with the closest
matches (difflib) and the full list.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from accelmap.errors import SpecError, UnknownPluginError

T = TypeVar("T")

__all__ = ["Registry", "costmodels", "searchers", "did_you_mean", "build_costmodel"]


def did_you_mean(name: str, known: list[str], *, what: str) -> str:
    """Format an "unknown name" message with close matches and the full list."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    listing = ", ".join(sorted(known)) if known else "(none registered)"
    return f"unknown {what} {name!r}.{hint} Known: {listing}."


class Registry(Generic[T]):
    """A name -> plugin-class registry backed by one entry-point group.

    Parameters
    ----------
    group
        Entry-point group, e.g. ``"accelmap.costmodels"``.
    kind
        Human name of the plugin kind, used in messages (``"cost model"``).
    builtin
        ``name -> "module:attr"`` for plugins that ship with accelmap. They are also
        declared as entry points in ``pyproject.toml``; listing them here keeps an
        uninstalled source checkout (``PYTHONPATH=src``) working.
    """

    def __init__(self, group: str, kind: str, builtin: dict[str, str]) -> None:
        self.group = group
        self.kind = kind
        self._targets: dict[str, str | Callable[[], T]] = dict(builtin)
        self._loaded: dict[str, T] = {}
        self._scanned = False

    def _scan(self) -> None:
        if self._scanned:
            return
        self._scanned = True
        for ep in entry_points(group=self.group):
            known = self._targets.get(ep.name)
            if known is not None and known != ep.value:
                raise SpecError(
                    f"duplicate {self.kind} name {ep.name!r}: entry point {ep.value!r} "
                    f"clashes with {known!r}; rename one of the plugins"
                )
            self._targets[ep.name] = ep.value

    def register(self, name: str, target: str | Callable[[], T]) -> None:
        """Register a plugin at run time (``"module:attr"`` or a zero-argument loader)."""
        self._scan()
        if name in self._targets:
            raise SpecError(f"duplicate {self.kind} name {name!r}; it is already registered")
        self._targets[name] = target

    def names(self) -> list[str]:
        """Sorted names of every registered plugin (nothing is imported)."""
        self._scan()
        return sorted(self._targets)

    def get(self, name: str) -> T:
        """Load (once) and return the plugin registered under ``name``."""
        self._scan()
        if name in self._loaded:
            return self._loaded[name]
        target = self._targets.get(name)
        if target is None:
            raise UnknownPluginError(did_you_mean(name, list(self._targets), what=self.kind))
        if callable(target):
            obj = target()
        else:
            module, _, attr = target.partition(":")
            try:
                obj = getattr(import_module(module), attr)
            except ImportError as exc:
                raise UnknownPluginError(
                    f"{self.kind} {name!r} could not be imported from {target!r}: {exc}. "
                    "Install the extra it needs (see `pip install accelmap[...]`)."
                ) from exc
        self._loaded[name] = obj
        return obj


costmodels: Registry[type] = Registry(
    "accelmap.costmodels",
    "cost model",
    {
        "loopnest": "accelmap.costmodels.loopnest:LoopNestModel",
        "systolic": "accelmap.costmodels.systolic:SystolicModel",
        "aspect": "accelmap.costmodels.aspect:AspectModel",
    },
)

searchers: Registry[type] = Registry(
    "accelmap.searchers",
    "searcher",
    {
        "random": "accelmap.search.random:RandomSearcher",
        "exhaustive": "accelmap.search.exhaustive:ExhaustiveSearcher",
        "optuna": "accelmap.search.optuna_searcher:OptunaSearcher",
        "genetic": "accelmap.search.genetic:GeneticSearcher",
        "anneal": "accelmap.search.anneal:AnnealSearcher",
    },
)


def build_costmodel(name: str, options: Mapping[str, Any], *, where: str = "") -> Any:
    """The cost model registered as ``name``, built with the keyword arguments ``options``
    (``--model-option KEY=VALUE``, a sweep's or design-space file's model ``options``).

    Raises
    ------
    SpecError
        ``options`` names an argument the model's constructor does not take (the message
        lists the ones it takes), or the model refuses a value (its own message), each
        prefixed by ``where`` (e.g. ``"sweep.yaml: models[1]: options: "``).
    UnknownPluginError
        ``name`` is not a registered cost model.
    """
    cls: type[Any] = costmodels.get(name)  # a class: its constructor's own parameters are read
    params = inspect.signature(cls.__init__).parameters
    accepted = [n for n, prm in params.items() if n != "self"
                and prm.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if not any(prm.kind is inspect.Parameter.VAR_KEYWORD for prm in params.values()):
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise SpecError(f"{where}cost model {name!r} has no option(s) {unknown}; "
                            f"its options: {', '.join(accepted) or '(none)'}")
    try:
        return cls(**dict(options))
    except (SpecError, TypeError) as exc:
        raise SpecError(f"{where}the {name} model refuses these options: {exc}") from exc
