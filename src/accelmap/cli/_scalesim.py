"""``accelmap evaluate --scalesim-config CFG --scalesim-topology CSV [--json]``.

Evaluates every layer of a SCALE-Sim topology with the ``systolic`` cost model and
SCALE-Sim's own mapping of the config's dataflow, and prints per layer what SCALE-Sim's
reports hold (``COMPUTE_REPORT.csv`` and ``DETAILED_ACCESS_REPORT.csv``), in its naming, so
the two can be compared line by line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["run", "add_arguments", "wants_scalesim"]

_COLUMNS = (
    ("layer", "{:<24}", "{:<24}"),
    ("total_cycles", "{:>13}", "{:>13,}"),
    ("sram_reads_ifmap", "{:>17}", "{:>17,}"),
    ("sram_reads_filter", "{:>18}", "{:>18,}"),
    ("sram_writes_ofmap", "{:>18}", "{:>18,}"),
    ("dram_reads_ifmap", "{:>17}", "{:>17,}"),
    ("dram_reads_filter", "{:>18}", "{:>18,}"),
    ("dram_writes_ofmap", "{:>18}", "{:>18,}"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the two SCALE-Sim options to a parser (the ``evaluate`` verb's)."""
    group = parser.add_argument_group("SCALE-Sim inputs (instead of PROBLEM ARCH MAPPING)")
    group.add_argument("--scalesim-config", metavar="CFG",
                       help="a SCALE-Sim config (.cfg): array, SRAM sizes, bandwidth, dataflow")
    group.add_argument("--scalesim-topology", metavar="CSV",
                       help="a SCALE-Sim topology CSV (convolution or GEMM format)")
    group.add_argument("--scalesim-replay-dram", action="store_true",
                       help="report SCALE-Sim's own DRAM reads, replaying its prefetch window "
                            "(exact; seconds per layer) instead of the model's estimate")


def wants_scalesim(args: argparse.Namespace) -> bool:
    """Whether the command line asks for SCALE-Sim mode (either option given)."""
    return bool(getattr(args, "scalesim_config", None) or getattr(args, "scalesim_topology", None))


def run(args: argparse.Namespace) -> int:
    """Evaluate a SCALE-Sim config and topology; print one line (or JSON object) per layer."""
    from accelmap.cli import UsageError
    from accelmap.costmodels.scalesim_io import config_arch, read_config, read_topology, replay_dram_reads
    from accelmap.costmodels.systolic import SystolicModel
    from accelmap.costmodels.systolic_variants import scalesim_mapping

    cfg_path = getattr(args, "scalesim_config", None)
    topo_path = getattr(args, "scalesim_topology", None)
    if not cfg_path or not topo_path:
        missing = "--scalesim-topology" if cfg_path else "--scalesim-config"
        raise UsageError(f"{missing} is missing; SCALE-Sim mode needs both --scalesim-config CFG and "
                         "--scalesim-topology CSV")
    config = read_config(cfg_path)
    arch = config_arch(config)
    layers = read_topology(topo_path, word_bits=8 * config.word_bytes)
    model = SystolicModel(dram_window="exact")  # one mapping per layer: SCALE-Sim's own DRAM reads, a few ms each
    rows: list[dict[str, Any]] = []
    for layer in layers:
        stats = model.stats(layer.problem, arch, scalesim_mapping(layer.problem, arch, config.dataflow))
        report = stats.report(0)
        if getattr(args, "scalesim_replay_dram", False):
            ifmap, filt = replay_dram_reads(layer, config)
            report["dram_reads_model"] = report["dram_reads"]
            report["dram_reads"] = {"ifmap": ifmap, "filter": filt}
        rows.append({"layer": layer.name, "macs": layer.problem.macs, **dict(layer.fields), **report})
    replayed = bool(getattr(args, "scalesim_replay_dram", False))
    if getattr(args, "json", False):
        json.dump({
            "dram_reads_source": "replayed SCALE-Sim prefetch window" if replayed else "systolic model",
            "run_name": config.run_name,
            "array": f"{config.rows}x{config.cols}",
            "dataflow": config.dataflow.name.lower(),
            "bandwidth_words_per_cycle": config.bandwidth_words_per_cycle,
            "layers": rows,
        }, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    out = sys.stdout
    out.write(f"# {config.run_name}: {config.rows}x{config.cols} array, dataflow "
              f"{config.dataflow.name.lower()}, SRAM ifmap/filter/ofmap {config.ifmap_sram_kb}/"
              f"{config.filter_sram_kb}/{config.ofmap_sram_kb} kB, DRAM bandwidth "
              f"{'CALC (stall-free)' if config.bandwidth_words_per_cycle is None else config.bandwidth_words_per_cycle}"
              f"; DRAM reads: {'replayed SCALE-Sim prefetch window' if replayed else 'systolic model'}\n")
    out.write("".join(head.format(name) for name, head, _ in _COLUMNS).rstrip() + "\n")
    for r in rows:
        flat = {
            "layer": r["layer"],
            "total_cycles": r["total_cycles"],
            "sram_reads_ifmap": r["sram_reads"]["ifmap"],
            "sram_reads_filter": r["sram_reads"]["filter"],
            "sram_writes_ofmap": r["sram_writes"]["ofmap"],
            "dram_reads_ifmap": r["dram_reads"]["ifmap"],
            "dram_reads_filter": r["dram_reads"]["filter"],
            "dram_writes_ofmap": r["dram_writes"]["ofmap"],
        }
        out.write("".join(cell.format(flat[name]) for name, _, cell in _COLUMNS).rstrip() + "\n")
    return 0
