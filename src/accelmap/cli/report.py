"""`accelmap report STORE`: best mapping per layer and arch, network totals, CSV, plot."""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path
from typing import Any

_METRICS = {"edp": "edp", "energy": "energy_pj", "cycles": "cycles"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="summarise a results store: best per layer and arch, network totals",
        description="Summarise a results store written by `accelmap sweep`: the best task of "
                    "every layer on every arch and cost model (over searchers and seeds), and "
                    "network totals (best layers weighted by their repeat counts).")
    p.add_argument("store", help="results store (SQLite) written by `accelmap sweep`, or a DSE study: "
                                 "the output directory of `accelmap dse` or its study.sqlite")
    p.add_argument("--metric", choices=tuple(_METRICS), default="edp",
                   help="what 'best' means (default: edp)")
    p.add_argument("--csv", metavar="FILE", help="write the best-per-layer table as CSV")
    p.add_argument("--all", action="store_true",
                   help="with --csv: write every task row instead (no JSON columns)")
    p.add_argument("--plot", metavar="FILE", help="plot the best per layer and arch (needs matplotlib)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelmap.errors import SpecError
    from accelmap.parallel.store import SUMMARY_COLUMNS, ResultStore

    path = Path(args.store)
    if path.is_dir() or _is_study(path):
        return _dse_report(path, args)
    if not path.is_file():
        raise SpecError(f"{path}: no such results store; run `accelmap sweep` first or check the path")
    metric = _METRICS[args.metric]
    with ResultStore(path) as store:
        counts = {s: store.count(s) for s in ("ok", "infeasible", "error")}
        best = store.best_per_layer(metric)
        totals = store.network_totals(metric)
        print(f"{path}: {sum(counts.values())} task(s): {counts['ok']} ok, {counts['infeasible']} "
              f"infeasible, {counts['error']} failed")
        if best:
            print(f"\nbest {args.metric} per layer and arch")
            _table(
                ["network", "layer", "repeat", "arch", "model", "searcher", "tasks", "cycles", "energy pJ", "EDP"],
                [[b.network or "-", b.layer, b.repeat, b.arch, b.model, b.searcher, b.n_tasks,
                  _fmt(b.cycles, ",.0f"), _fmt(b.energy_pj, ",.1f"), _fmt(b.edp, ".4g")] for b in best],
            )
        if totals:
            print("\nnetwork totals (best layers x repeat; EDP = total energy x total cycles)")
            _table(
                ["network", "arch", "model", "layers", "missing", "cycles", "energy pJ", "EDP"],
                [[t.network, t.arch, t.model, t.n_layers, t.n_missing, _fmt(t.cycles, ",.0f"),
                  _fmt(t.energy_pj, ",.1f"), _fmt(t.edp, ".4g")] for t in totals],
            )
            if any(t.n_missing for t in totals):
                print("  (missing: layers with no ok result; their totals are incomplete)")
        if args.csv:
            with open(args.csv, "w", newline="") as fh:
                w = csv.writer(fh)
                if args.all:
                    w.writerow(SUMMARY_COLUMNS)
                    for r in store.rows(columns=SUMMARY_COLUMNS):
                        w.writerow([r[c] for c in SUMMARY_COLUMNS])
                else:
                    cols = ["network", "layer", "repeat", "arch", "model", "searcher", "seed",
                            "n_tasks", "cycles", "energy_pj", "edp", "task_key"]
                    w.writerow(cols)
                    for b in best:
                        w.writerow([getattr(b, c) for c in cols])
            print(f"\nwrote {args.csv}", file=sys.stderr)
        if args.plot:
            _plot(best, totals, metric, args.plot)
            print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _is_study(path: Path) -> bool:
    """An Optuna RDB file (it has a `studies` table), not a results store."""
    import sqlite3

    if not path.is_file():
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError:
        return False
    return "studies" in names and "results" not in names


def _dse_report(path: Path, args: argparse.Namespace) -> int:
    from accelmap.parallel.dse_outputs import front_table, study_report

    studies = study_report(path)
    for s in studies:
        print(f"study {s['study']}: {s['n_trials']} trial(s), {s['n_complete']} complete, "
              f"{s['n_feasible']} feasible; objectives {', '.join(s['objectives'])}")
        print(front_table(s["front"], s["objectives"], s.get("base")))
    if args.csv and studies:
        with open(args.csv, "w", newline="") as fh:
            w = csv.writer(fh)
            pnames = sorted({k for s in studies for r in s["front"] for k in r["params"]})
            w.writerow(["study", *pnames, "area_mm2", "cycles", "energy_pj", "edp", "certified_gap", "arch"])
            for s in studies:
                for r in s["front"]:
                    w.writerow([s["study"], *[r["params"].get(p) for p in pnames], r["area_mm2"], r["cycles"],
                                r["energy_pj"], r["edp"], r["certified_gap"], r["arch"]])
        print(f"\nwrote {args.csv}", file=sys.stderr)
    return 0


def _fmt(x: float, spec: str) -> str:
    return format(x, spec) if x is not None and math.isfinite(x) else "-"


def _table(head: list[str], rows: list[list[Any]]) -> None:
    cells = [head] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    for j, r in enumerate(cells):
        print("  " + "  ".join(c.rjust(w) if j and _numeric(c) else c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _numeric(s: str) -> bool:
    return s.replace(",", "").replace(".", "").replace("e+", "").replace("e-", "").isdigit()


def _plot(best: list[Any], totals: list[Any], metric: str, out: str) -> None:
    from accelmap.errors import SpecError

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SpecError("--plot needs matplotlib: pip install 'accelmap[plot]'") from exc
    layers: list[str] = []
    for b in best:
        name = f"{b.network}/{b.layer}" if b.network else b.layer
        if name not in layers:
            layers.append(name)
    series: dict[str, dict[str, float]] = {}
    for b in best:
        series.setdefault(f"{b.arch} ({b.model})", {})[f"{b.network}/{b.layer}" if b.network else b.layer] = getattr(b, metric)
    n_plots = 2 if totals else 1
    fig, axes = plt.subplots(n_plots, 1, figsize=(max(6.0, 0.5 * len(layers) + 3), 4.5 * n_plots), squeeze=False)
    ax = axes[0][0]
    width = 0.8 / max(1, len(series))
    for k, (label, values) in enumerate(series.items()):
        xs = [i + k * width for i, name in enumerate(layers) if name in values]
        ys = [values[name] for name in layers if name in values]
        ax.bar(xs, ys, width=width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(layers))])
    ax.set_xticklabels(layers, rotation=60, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel(f"best {metric}")
    ax.set_title(f"best {metric} per layer")
    ax.legend(fontsize=7)
    if totals:
        ax2 = axes[1][0]
        labels = [f"{t.network}\n{t.arch} ({t.model})" for t in totals]
        ax2.bar(range(len(totals)), [getattr(t, metric) for t in totals])
        ax2.set_xticks(range(len(totals)))
        ax2.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax2.set_ylabel(f"network {metric}")
        ax2.set_title(f"network totals ({metric})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
