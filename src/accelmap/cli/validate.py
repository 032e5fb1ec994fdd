"""`accelmap validate PROBLEM ARCH MAPPING`: list every reason a mapping is illegal.

Exit 0 when the mapping is legal, 2 when it is not (each problem on its own line, naming the
level and the numbers) or when an input file is malformed.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a mapping against a problem and an arch",
                       description="Check a mapping (accelmap or Timeloop format) for factor products, "
                                   "buffer capacity (with sliding-window input tiles) and fanout.")
    p.add_argument("problem", help="zoo layer (net/layer) or problem file (accelmap or Timeloop)")
    p.add_argument("arch", help="preset name or arch file (accelmap or Timeloop)")
    p.add_argument("mapping", help="mapping file (accelmap or Timeloop)")
    p.add_argument("--energy", metavar="ERT", help="Timeloop energy reference table for a Timeloop arch file")
    p.add_argument("--allow-padding", action="store_true",
                   help="accept imperfect factorization (factor products >= the bound)")
    p.add_argument("--show", action="store_true", help="print the loop nest as well")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelmap.arch.io import load_arch
    from accelmap.mapper.check import render_loop_nest, validate
    from accelmap.mapper.io import load_mapping
    from accelmap.workloads.io import load_problem

    problem = load_problem(args.problem)
    arch = load_arch(args.arch, energy=args.energy)
    mapping = load_mapping(args.mapping, problem, arch)
    problems = validate(problem, arch, mapping, allow_padding=args.allow_padding)
    if args.show or not problems:
        print(render_loop_nest(problem, arch, mapping))
    if problems:
        print(f"{args.mapping}: {len(problems)} problem(s):", file=sys.stderr)
        for msg in problems:
            print(f"  - {msg}", file=sys.stderr)
        return 2
    print(f"{args.mapping}: legal mapping of {problem.name} on {arch.name}")
    return 0
