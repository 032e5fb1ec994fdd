"""What a design-space search leaves behind: the front as a table, CSV, JSON and a plot,
each front design as an arch file (accelmap and Timeloop format), and a report read back
from the Optuna study alone. All of it works on the data of `accelmap.parallel.dse_types`;
`accelmap.parallel.dse.dse` calls `write_outputs` when a study ends.

Layout of an output directory (``accelmap dse FILE --out DIR``)::

    DIR/study.sqlite           Optuna RDB storage (optuna-dashboard sqlite:///DIR/study.sqlite)
    DIR/results.sqlite         the results store: one row per (layer, candidate) mapping search
    DIR/front.json             base arch, front designs (params, area_mm2, objectives, arch_file)
    DIR/front.csv              the same front, one row per design
    DIR/trials.csv             every trial
    DIR/front.png              area vs objective: trials, the front, the base arch marked
    DIR/archs/front-NN.yaml    each front design, accelmap arch format
    DIR/archs/front-NN.timeloop.yaml, front-NN.ERT.yaml   the same in Timeloop's format
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

from accelmap.arch.io import save_arch
from accelmap.arch.timeloop_writer import save_timeloop
from accelmap.errors import SpecError
from accelmap.parallel.dse_types import Candidate, DseResult, pareto_front, study_storage

__all__ = ["write_outputs", "front_table", "study_report", "plot_front"]


def front_table(rows: list[dict[str, Any]], objectives: list[str], base: dict[str, Any] | None = None) -> str:
    """A text table of front rows (as in ``front.json``), the base arch first."""
    metrics = [o for o in objectives if o != "area"]
    pnames = sorted({k for r in rows for k in r.get("params", {})})
    head = ["#", *[p.split(".", 1)[-1] if _unique_suffix(p, pnames) else p for p in pnames], "area mm2",
            *metrics, "gap", "< base"]
    out_rows = []
    if base is not None:
        out_rows.append(["base", *["-" for _ in pnames], f"{base['area_mm2']:.4g}",
                         *[_f(base.get(m)) for m in metrics], _g(base.get("certified_gap")), ""])
    for i, r in enumerate(rows):
        out_rows.append([str(i), *[str(r["params"].get(p, "-")) for p in pnames], f"{r['area_mm2']:.4g}",
                         *[_f(r.get(m)) for m in metrics], _g(r.get("certified_gap")), _beats(r, metrics)])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *out_rows, strict=True)]
    lines = ["  ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=True)) for row in [head, *out_rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _beats(row: dict[str, Any], metrics: list[str]) -> str:
    """Against the base, per metric: "proven" (below its certified bound), "yes" (below its
    found value: search noise possible), or "no"."""
    out = []
    for m in metrics:
        if row.get(f"{m}_beats_base_certified"):
            out.append("proven")
        elif row.get(f"{m}_beats_base"):
            out.append("yes")
        elif f"{m}_beats_base" in row:
            out.append("no")
    return "/".join(out) or "-"


def _unique_suffix(p: str, names: list[str]) -> bool:
    suffix = p.split(".", 1)[-1]
    return sum(1 for n in names if n.split(".", 1)[-1] == suffix) == 1


def _f(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{float(x):.4g}"


def _g(x: Any) -> str:
    return "-" if x is None else f"{float(x):.1%}"


def write_outputs(result: DseResult, out_dir: str | Path, *, plot: bool = True) -> dict[str, Any]:
    """Write front.json/.csv, trials.csv, the arch files and the plot; return front.json's dict."""
    out = Path(out_dir)
    archs = out / "archs"
    archs.mkdir(parents=True, exist_ok=True)
    data = result.to_dict()
    for i, (row, cand) in enumerate(zip(data["front"], result.front, strict=True)):
        path = archs / f"front-{i:02d}.yaml"
        save_arch(cand.arch, path)
        save_timeloop(cand.arch, archs / f"front-{i:02d}.timeloop.yaml", archs / f"front-{i:02d}.ERT.yaml")
        row["arch_file"] = str(path)
    (out / "front.json").write_text(json.dumps(_finite(data), indent=2) + "\n")
    objectives = list(result.spec.objectives)
    pnames = [p.name for p in result.spec.parameters]
    metrics = [o for o in objectives if o != "area"]
    with open(out / "front.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*pnames, "area_mm2", *metrics, "cycles", "energy_pj", "edp", "certified_gap", "arch_file"])
        for row in data["front"]:
            w.writerow([*[row["params"][p] for p in pnames], row["area_mm2"], *[row[m] for m in metrics],
                        row["cycles"], row["energy_pj"], row["edp"], row["certified_gap"], row["arch_file"]])
    with open(out / "trials.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["trial", *pnames, "status", "feasible", "area_mm2", "cycles", "energy_pj", "edp",
                    "power_w", "certified_gap"])
        for rec in result.trials:
            c = rec.candidate.to_dict()
            w.writerow([rec.number, *[c["params"][p] for p in pnames], c["status"], rec.feasible, c["area_mm2"],
                        c["cycles"], c["energy_pj"], c["edp"], c["power_w"], c["certified_gap"]])
    if plot and metrics and importlib.util.find_spec("matplotlib") is None:
        data["plot"] = None
        data["plot_skipped"] = "front.png not drawn: matplotlib is not installed (pip install 'accelmap[plot]')"
        print(f"accelmap: {data['plot_skipped']}", file=sys.stderr)
    elif plot and metrics:
        points = [(r.candidate.area_mm2, r.candidate.value(metrics[0]), r.feasible) for r in result.trials
                  if r.candidate.status == "ok"]
        plot_front(points, [(c.area_mm2, c.value(metrics[0])) for c in result.front],
                   (result.base.area_mm2, result.base.value(metrics[0])) if result.base.status == "ok" else None,
                   metrics[0], result.spec.area_budget_mm2, out / "front.png", title=result.spec.name)
        data["plot"] = str(out / "front.png")
    return data


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def plot_front(points: list[tuple[float, float, bool]], front: list[tuple[float, float]],
               base: tuple[float, float] | None, metric: str, budget: float | None, path: str | Path,
               *, title: str = "") -> None:
    """Area vs ``metric``: every evaluated trial, the front as a step line, the base marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ok = [(a, v) for a, v, f in points if f]
    bad = [(a, v) for a, v, f in points if not f]
    if ok:
        ax.scatter([a for a, _ in ok], [v for _, v in ok], s=14, color="tab:blue", alpha=0.5, label="trials")
    if bad:
        ax.scatter([a for a, _ in bad], [v for _, v in bad], s=14, color="tab:gray", marker="x", alpha=0.5,
                   label="infeasible")
    if front:
        fa, fv = zip(*sorted(front), strict=True)
        ax.step(fa, fv, where="post", color="tab:red", lw=1.2)
        ax.scatter(fa, fv, s=30, color="tab:red", label="front", zorder=3)
    if base is not None:
        ax.scatter([base[0]], [base[1]], s=120, marker="*", color="black", label="base arch", zorder=4)
    if budget is not None:
        ax.axvline(budget, color="gray", ls="--", lw=1, label="area budget")
    ax.set_xlabel("area (mm$^2$)")
    ax.set_ylabel({"edp": "EDP (pJ x cycles)", "energy": "energy (pJ)", "cycles": "cycles"}[metric])
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def study_report(path: str | Path) -> list[dict[str, Any]]:
    """Every DSE study in an Optuna SQLite file (or an output directory holding study.sqlite):
    name, objectives, trial counts, base and the front, rebuilt from the trials' records."""
    import optuna

    p = Path(path)
    if p.is_dir():
        p = p / "study.sqlite"
    if not p.is_file():
        raise SpecError(f"{p}: no such DSE study; run `accelmap dse FILE` first")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = study_storage(p)
    try:
        summaries = optuna.get_all_study_summaries(storage)
    except Exception as exc:  # noqa: BLE001 - optuna raises various errors on a foreign file
        raise SpecError(f"{p}: not an Optuna study database ({type(exc).__name__}: {exc})") from exc
    out = []
    for s in summaries:
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        objectives = list(study.user_attrs.get("objectives", ["edp", "area"]))
        trials = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        cands = []
        for t in trials:
            d = t.user_attrs.get("candidate")
            if not d:
                continue
            cons = [v for k, v in t.system_attrs.items() if k.startswith("constraints:")]
            if d.get("status") != "ok" or any(v > 1e-9 for v in cons):
                continue
            cands.append(Candidate(params=dict(d["params"]), arch=_arch_stub(d),
                                   area_mm2=float(d["area_mm2"]), status="ok", cycles=float(d["cycles"]),
                                   energy_pj=float(d["energy_pj"]), certified_gap=d.get("certified_gap")))
        uniq: dict[str, Candidate] = {}
        for c in cands:
            uniq.setdefault(json.dumps(c.params, sort_keys=True, default=str), c)
        front = pareto_front(list(uniq.values()), objectives)
        rows = []
        for c in front:
            row: dict[str, Any] = {"params": c.params, "area_mm2": c.area_mm2}
            for o in objectives:
                if o != "area":
                    row[o] = c.value(o)
            row.update(cycles=c.cycles, energy_pj=c.energy_pj, edp=c.edp, certified_gap=c.certified_gap,
                       arch=c.arch.name)
            rows.append(row)
        out.append({"study": s.study_name, "objectives": objectives, "n_trials": len(study.trials),
                    "n_complete": len(trials), "n_feasible": len(cands), "base": study.user_attrs.get("base_result"),
                    "front": rows})
    return out


def _arch_stub(d: dict[str, Any]) -> Any:
    # The report needs a candidate's name only; its arch is rebuilt by rerunning the file.
    from accelmap.arch.spec import Arch, Compute, StorageLevel

    return Arch(name=str(d.get("arch", "candidate")), levels=(StorageLevel(name="DRAM", capacity_words=None),),
                compute=Compute(energy_per_mac_pj=0.0))
