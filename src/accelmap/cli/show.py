"""`accelmap show workload NAME` and `accelmap show arch NAME`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="describe a zoo network or layer, or an arch",
                       description="Describe a workload (zoo network, zoo layer net/layer, or problem "
                                   "file) or an architecture (preset or arch file).")
    p.add_argument("what", choices=("workload", "arch"))
    p.add_argument("name", help="zoo network, net/layer, preset name, or a file path")
    p.add_argument("--energy", metavar="ERT", help="Timeloop energy reference table for a Timeloop arch file")
    p.add_argument("--node", type=int, metavar="NM",
                   help="process node for the area breakdown (default: the arch's node_nm, else 45)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.what == "arch":
        from accelmap.arch.area import arch_area
        from accelmap.arch.io import load_arch

        arch = load_arch(args.name, energy=args.energy)
        print(arch.describe())
        print(arch_area(arch, args.node).describe())
        return 0
    from accelmap.workloads import zoo
    from accelmap.workloads.io import load_problem

    if args.name in zoo.networks():
        net = zoo.network(args.name)
        print(f"{net.name}: {net.description}")
        print(f"{sum(p.repeat for p in net.layers)} layers, {len(net.unique_shapes().layers)} unique shapes, "
              f"{net.total_macs:,} MACs in all")
        width = max(len(p.name) for p in net.layers)
        print(f"{'layer':<{width}}  {'x':>3}  {'MACs':>15}  dims")
        for p in net.layers:
            dims = " ".join(f"{d.name}={d.bound}" for d in p.dims)
            print(f"{p.name:<{width}}  {p.repeat:>3}  {p.macs:>15,}  {dims}")
        return 0
    from accelmap.workloads.structure import recognize

    problem = load_problem(args.name)
    print(problem.describe())
    print(f"  kind: {recognize(problem).describe()}")
    words = problem.existing_words() if problem.has_padding else None
    for ti, t in enumerate(problem.tensors):
        coords = ", ".join(" + ".join(f"{term.coef}*{term.dim}" if term.coef != 1 else term.dim for term in c)
                           for c in t.projection)
        pad = ""
        if t.extent is not None and words is not None:
            lo = t.pad or (0,) * len(t.extent)
            pad = f"  pad {list(lo)}, extent {list(t.extent)} ({int(words[ti]):,} words exist)"
        print(f"  {t.name:<10} {t.role.value:<7} [{coords}]  {t.word_bits}-bit words{pad}")
    return 0
