"""`accelmap list {workloads,archs,costmodels,searchers}`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

_KINDS = ("workloads", "archs", "costmodels", "searchers")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list zoo networks, arch presets, cost models or searchers",
                       description="List what accelmap knows by name.")
    p.add_argument("kind", choices=_KINDS, help="what to list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.kind == "workloads":
        from accelmap.workloads import zoo

        rows: list[tuple[str, ...]] = []
        for name in zoo.networks():
            net = zoo.network(name)
            n_shapes = len(net.unique_shapes().layers)
            n_layers = sum(layer.repeat for layer in net.layers)
            rows.append((name, f"{n_layers} layers ({n_shapes} unique shapes)", f"{net.total_macs / 1e9:.3f} GMACs", net.description))
        _table(("network", "layers", "MACs", "description"), rows)
    elif args.kind == "archs":
        from accelmap.arch import presets

        rows = []
        for name in presets.presets():
            arch = presets.preset(name)
            levels = " > ".join(lv.name for lv in arch.levels)
            rows.append((name, f"{arch.n_macs} MACs", levels))
        _table(("preset", "compute", "levels (outermost first)"), rows)
    else:
        from accelmap import _registry

        registry = _registry.costmodels if args.kind == "costmodels" else _registry.searchers
        for name in registry.names():
            print(name)
    return 0


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
