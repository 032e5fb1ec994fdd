"""``accelmap evaluate --maestro-hw HW.m --maestro-mapping MAPPING.m [--json]``.

Evaluates every layer of a MAESTRO mapping file with the aspect model and prints, per
layer, MAESTRO's names: ``runtime_cycles``, ``num_macs``, ``l1_size_req``, ``l2_size_req``
and per tensor (input, filter, output) ``l1_read``, ``l1_write``, ``l2_read``, ``l2_write``.
The ``evaluate`` verb owns the parser; it adds :func:`add_arguments` and calls :func:`run`
when ``--maestro-mapping`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_arguments", "run", "wants_maestro"]

_TENSOR_KEYS = ("l1_read", "l1_write", "l2_read", "l2_write")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--maestro-hw`` and ``--maestro-mapping`` to an ``evaluate`` parser."""
    group = parser.add_argument_group("MAESTRO files (aspect model)")
    group.add_argument("--maestro-hw", metavar="HW.m", default=None,
                       help="MAESTRO hardware file (num_pes, l1/l2 sizes, NoC and off-chip bandwidth)")
    group.add_argument("--maestro-mapping", metavar="MAPPING.m", default=None,
                       help="MAESTRO mapping file; every layer is evaluated with the aspect model")


def wants_maestro(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "maestro_mapping", None) or getattr(args, "maestro_hw", None))


def run(args: argparse.Namespace) -> int:
    """Evaluate a MAESTRO mapping file; print a table (or JSON with ``--json``). Exit code."""
    from accelmap.cli import UsageError
    from accelmap.costmodels.aspect import analyze
    from accelmap.costmodels.maestro_io import read_hardware, read_mapping

    if not args.maestro_mapping or not args.maestro_hw:
        raise UsageError("--maestro-mapping and --maestro-hw go together; give both files")
    hw = read_hardware(args.maestro_hw)
    net = read_mapping(args.maestro_mapping)
    results = [analyze(layer, hw) for layer in net.layers]
    if getattr(args, "json", False):
        out = {
            "network": net.name,
            "hardware": {"num_pes": hw.num_pes, "l1_size": hw.l1_size, "l2_size": hw.l2_size,
                         "noc_bw": hw.noc_bw, "offchip_bw": hw.offchip_bw},
            "layers": [r.as_dict() for r in results],
        }
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    w = sys.stdout.write
    w(f"network {net.name}: {len(results)} layer(s) on {hw.num_pes} PEs "
      f"(NoC {hw.noc_bw}, off-chip {hw.offchip_bw} elements/cycle)\n")
    for r in results:
        w(f"\nlayer {r.layer}\n")
        w(f"  runtime_cycles  {r.runtime_cycles:,}\n")
        w(f"  num_macs        {r.num_macs:,}\n")
        w(f"  l1_size_req     {r.l1_size_req:,}\n")
        w(f"  l2_size_req     {r.l2_size_req:,}\n")
        w(f"  energy_total    {r.energy_x_mac:,.1f} x MAC energy\n")
        w(f"  {'tensor':<8}" + "".join(f"{k:>14}" for k in _TENSOR_KEYS) + "\n")
        for t in ("input", "filter", "output"):
            w(f"  {t:<8}" + "".join(f"{r.tensors[t][k]:>14,}" for k in _TENSOR_KEYS) + "\n")
        warn = []
        if hw.l1_size is not None and r.l1_size_req > hw.l1_size:
            warn.append(f"L1 requirement {r.l1_size_req} exceeds l1_size {hw.l1_size}")
        if hw.l2_size is not None and r.l2_size_req > hw.l2_size:
            warn.append(f"L2 requirement {r.l2_size_req} exceeds l2_size {hw.l2_size}")
        for msg in warn:
            w(f"  warning: {msg}\n")
    return 0
