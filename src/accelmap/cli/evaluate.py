"""`accelmap evaluate PROBLEM ARCH MAPPING`: the cost of one mapping under one cost model.

Inputs are accelmap or Timeloop files, recognised by their content (a zoo layer name and an
arch preset name work too). ``--json`` prints the schema documented in
``docs/evaluate-json.md``; otherwise a readable table and the loop nest. Exit 0 for a legal
mapping, 2 for an illegal one (the reasons go to stderr) or a malformed input.

Structure: `_load` turns the arguments into (problem, arch, batch of one mapping); a model
that reads its own input formats adds its options in `register` and a branch in `_load`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate", help="evaluate one mapping with a cost model",
        description="Evaluate one mapping (accelmap or Timeloop format) of a problem on an arch "
                    "with a cost model; print cycles, energy and per-level access counts.",
    )
    p.add_argument("problem", nargs="?", help="zoo layer (net/layer) or problem file (accelmap or Timeloop)")
    p.add_argument("arch", nargs="?", help="preset name or arch file (accelmap or Timeloop)")
    p.add_argument("mapping", nargs="?", help="mapping file (accelmap or Timeloop map.yaml)")
    p.add_argument("--energy", metavar="ERT", help="Timeloop energy reference table for a Timeloop arch file")
    p.add_argument("--model", default="loopnest", help="cost model plugin (default: loopnest)")
    p.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an argument of the cost model's constructor (repeatable), e.g. on the systolic "
                        "model dram_window=exact; as for search")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON (see docs/evaluate-json.md)")
    p.set_defaults(func=run)
    from accelmap.cli import _maestro, _scalesim

    _maestro.add_arguments(p)
    _scalesim.add_arguments(p)


def _load(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(problem, arch, MappingBatch of one) from the command line."""
    from accelmap.arch.io import load_arch
    from accelmap.mapper.io import load_mapping
    from accelmap.workloads.io import load_problem

    problem = load_problem(args.problem)
    arch = load_arch(args.arch, energy=args.energy)
    mapping = load_mapping(args.mapping, problem, arch)
    return problem, arch, mapping


def _finite(x: Any) -> Any:
    """JSON has no infinity: invalid rows report null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    return x


def run(args: argparse.Namespace) -> int:
    from accelmap._registry import costmodels
    from accelmap.cli import _maestro
    from accelmap.cli._options import model_from_options, model_options
    from accelmap.mapper.check import render_loop_nest, validate

    if _maestro.wants_maestro(args):
        return _maestro.run(args)
    from accelmap.cli import _scalesim

    if _scalesim.wants_scalesim(args):
        return _scalesim.run(args)
    if args.problem is None or args.arch is None or args.mapping is None:
        from accelmap.cli import UsageError

        raise UsageError("evaluate needs PROBLEM ARCH MAPPING (or --maestro-hw HW.m --maestro-mapping MAPPING.m, "
                         "or --scalesim-config CFG --scalesim-topology CSV)")
    opts = model_options(args.model_option)
    built = model_from_options(args.model, opts)  # checked before the files are read
    problem, arch, mapping = _load(args)
    model = costmodels.get(args.model)() if isinstance(built, str) else built
    metrics = model.evaluate(problem, arch, mapping.as_batch())
    row = metrics.row(0)
    if args.json:
        out: dict[str, Any] = {"model": args.model, "problem": problem.name, "arch": arch.name}
        if opts:
            out["model_options"] = opts
        out.update(_finite(row))
        print(json.dumps(out, indent=1))
    else:
        print(f"{problem.describe()}  on  {arch.name}  ({args.model})")
        print(render_loop_nest(problem, arch, mapping))
        print(metrics.table(0))
    if not row["valid"]:
        print(f"{args.mapping}: illegal mapping ({row['reason']}):", file=sys.stderr)
        # a model of imperfect factorization takes factors that multiply past a bound
        for msg in validate(problem, arch, mapping, allow_padding=getattr(model, "imperfect_factorization", False)):
            print(f"  - {msg}", file=sys.stderr)
        return 2
    return 0
