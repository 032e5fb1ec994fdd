"""`accelmap space LAYER --arch ARCH`: the size of a map space and a few legal mappings."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "space", help="size of a layer's map space on an arch, and sampled legal mappings",
        description="Print the exact number of mappings of LAYER on ARCH (in all, and per sub-space: "
                    "factorizations per dim, loop orders per level, bypass choices), the lower bounds no "
                    "mapping can beat, and a few legal mappings drawn uniformly, as loop nests.")
    p.add_argument("layer", help="zoo layer (net/layer) or a problem file")
    p.add_argument("--arch", required=True, help="arch preset name or arch file")
    p.add_argument("--energy", metavar="ERT", help="Timeloop energy reference table for a Timeloop arch file")
    p.add_argument("--constraints", nargs="+", default=[], metavar="FILE",
                   help="constraint files: accelmap YAML (version: 1) and/or Timeloop arch/mapspace constraints")
    p.add_argument("--level-map", action="append", default=[], metavar="TL=LEVEL[:x|y]",
                   help="map a Timeloop constraint level onto an arch level (repeatable), e.g. "
                        "DummyBuffer=shared_glb:y for the eyeriss-like preset")
    p.add_argument("--dataflow", help="a dataflow preset (weight-, output-, input-, row-stationary)")
    p.add_argument("--allow-padding", action="store_true", help="imperfect factorization (ceil-divided tiles)")
    p.add_argument("--min-utilization", type=float, help="minimum PE utilization in [0, 1]")
    p.add_argument("--samples", type=int, default=3, metavar="K", help="legal mappings to print (default 3)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from accelmap.arch.io import load_arch
    from accelmap.cli import UsageError
    from accelmap.errors import InfeasibleSpaceError
    from accelmap.mapper.check import render_loop_nest
    from accelmap.mapper.constraints import Constraints, dataflow, load_constraint_files
    from accelmap.mapper.space import MapSpace
    from accelmap.workloads.io import load_problem

    if args.samples < 0:
        raise UsageError(f"--samples {args.samples}; expected an integer >= 0")
    problem = load_problem(args.layer)
    arch = load_arch(args.arch, energy=args.energy)
    level_map = {}
    for item in args.level_map:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"--level-map {item!r}; expected TIMELOOP_LEVEL=ARCH_LEVEL[:x|y]")
        level_map[key] = value
    constraints = load_constraint_files(args.constraints, problem=problem, arch=arch, level_map=level_map)
    extra = Constraints(min_utilization=args.min_utilization, allow_padding=True if args.allow_padding else None)
    if args.dataflow:
        extra = dataflow(args.dataflow, arch).override(extra)
    constraints = extra if constraints is None else constraints.override(extra)
    space = MapSpace(problem, arch, constraints)
    print(problem.describe())
    print(f"on {arch.name} ({arch.n_macs} MACs, levels {' > '.join(arch.level_names)})")
    if constraints.source:
        print(f"constraints: {constraints.source}")
    print(f"encoded box: {space.n_params} params "
          f"({', '.join(f'{k} {len(v)}' for k, v in space.param_groups().items()) or 'none'})")
    print(space.size().describe())
    print("lower bounds:")
    print(space.lower_bounds().describe(problem, arch))
    if args.samples:
        rng = np.random.default_rng(args.seed)
        try:
            batch = space.sample_valid(args.samples, rng)
        except InfeasibleSpaceError as exc:
            print(f"no legal mapping to show: {exc}")
            return 0
        probe = space.sample(20000, rng)
        frac = float(space.check(probe).valid.mean())
        print(f"legal fraction of uniform draws: {frac:.3%} (of 20,000)")
        for i, m in enumerate(batch):
            print(f"\nmapping {i + 1} of {len(batch)} (utilization {space.utilization(m.as_batch())[0]:.1%}):")
            print(render_loop_nest(problem, arch, m))
    return 0
