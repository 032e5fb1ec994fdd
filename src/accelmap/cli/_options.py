"""Option parsing shared by the CLI verbs that run searches (search, evaluate, sweep's
portfolios): ``--model-option`` and ``--searcher-option`` items as keyword arguments, checked
against what the cost model or searcher takes."""

from __future__ import annotations

import argparse
import inspect
from typing import Any, cast


def _parse_value(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def model_options(items: list[str]) -> dict[str, Any]:
    """``--model-option KEY=VALUE`` items as keyword arguments (values read as YAML scalars)."""
    from accelmap.cli import UsageError

    opts: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--model-option {item!r}; expected KEY=VALUE, e.g. engine=numpy")
        opts[key.strip().replace("-", "_")] = _parse_value(value)
    return opts


def model_from_options(model_name: str, opts: dict[str, Any]) -> Any:
    """The cost model ``model_name`` built with the keyword arguments ``opts`` (from
    ``--model-option``); the name itself when there are none (searches build their own model
    then). Unknown keys and values the model refuses are usage errors (exit 2) that name the
    model's arguments (`accelmap._registry.build_costmodel`)."""
    from accelmap._registry import build_costmodel, costmodels
    from accelmap.cli import UsageError
    from accelmap.errors import SpecError

    costmodels.get(model_name)
    if not opts:
        return model_name
    try:
        return build_costmodel(model_name, opts, where="--model-option: ")
    except SpecError as exc:
        raise UsageError(str(exc)) from exc


def searcher_options(args: argparse.Namespace, searcher_name: str, layer_label: str, arch_label: str) -> dict[str, Any]:
    """``--searcher-option KEY=VALUE`` items (with ``--storage`` / ``--study-name`` for optuna)
    as the searcher's keyword arguments, each key checked against the options the searcher
    takes (on ``--device cuda``: the GPU search's own); a usage error (exit 2) names them."""
    from accelmap._registry import searchers
    from accelmap.cli import UsageError

    cls = searchers.get(searcher_name)
    opts: dict[str, Any] = {}
    for item in args.searcher_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--searcher-option {item!r}; expected KEY=VALUE, e.g. chains=512")
        opts[key.strip().replace("-", "_")] = _parse_value(value)
    if args.storage is not None or args.study_name is not None:
        if searcher_name != "optuna":
            raise UsageError(f"--storage and --study-name need --searcher optuna (got {searcher_name!r})")
        if args.storage is not None:
            opts["storage"] = args.storage
            opts["study_name"] = args.study_name or f"accelmap-{layer_label}-{arch_label}".replace("/", "-")
    if getattr(args, "device", "cpu") == "cuda":  # the GPU searches take their own options (search/gpu.py)
        from accelmap.search.gpu import _ANNEAL_OPTIONS

        gpu_opts = _ANNEAL_OPTIONS if searcher_name == "anneal" else ()
        unknown = sorted(set(opts) - set(gpu_opts))
        if unknown:
            raise UsageError(f"searcher {searcher_name!r} on --device cuda has no option(s) {unknown}; "
                             f"its options: {', '.join(gpu_opts) or '(none)'}")
        return opts
    solver_opts = getattr(cls, "option_names", None)
    if solver_opts is not None:  # a solver (e.g. exact) declares its options as data
        unknown = sorted(set(opts) - set(solver_opts))
        if unknown:
            raise UsageError(f"searcher {searcher_name!r} has no option(s) {unknown}; "
                             f"its options: {', '.join(solver_opts) or '(none)'}")
        return opts
    params = inspect.signature(cast(Any, cls).__init__).parameters
    accepted = [n for n, prm in params.items()
                if prm.kind is inspect.Parameter.KEYWORD_ONLY and n not in ("n_objectives", "seed", "budget_hint")]
    if not any(prm.kind is inspect.Parameter.VAR_KEYWORD for prm in params.values()):
        unknown = sorted(set(opts) - set(accepted))
        if unknown:
            raise UsageError(f"searcher {searcher_name!r} has no option(s) {unknown}; "
                             f"its options: {', '.join(accepted) or '(none)'}")
    return opts
