"""The front table of ``docs/performance.md`` says what its JSON files say.

Each row of the table under "Cost models on one core" names its model, its case (the key of
``models.<model>.cases`` in the JSON), its entry (``numpy``, ``cpu_generic``, ``cpu``,
``cpu_objective``: a key of each ``rows`` item) and its JSON file in ``benchmarks/results/``;
the evaluations per second at 10,000 and 100,000 rows and the ratio to numpy are recomputed
from that file here, so a figure in the table cannot be typed from memory or left behind when
a file changes. Run as a script (``python tests/unit/test_performance_figures.py``) to print
the rows the JSON files give, to paste after a new run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "benchmarks" / "results"
HEADING = "### Cost models on one core"
SIZES = (10_000, 100_000)


def figure(x: float) -> str:
    """Three significant digits, ``2.56e6``."""
    mant, exp = f"{x:.2e}".split("e")
    return f"{mant}e{int(exp)}"


def ratio(x: float) -> str:
    return f"{x:.0f}x" if x >= 100 else f"{x:.1f}x"


def cells(model: str, case: str, entry: str, json_name: str) -> list[str]:
    """The figure cells of one row: evaluations/s at each size, and the ratio to numpy."""
    data = json.loads((RESULTS / json_name).read_text())
    rows = {r["batch"]: r for r in data["models"][model]["cases"][case]["rows"]}
    got = [figure(rows[n][entry]["evals_per_s"]) for n in SIZES]
    if entry == "numpy":
        got.append("1")
    else:
        got.append(" / ".join(ratio(rows[n][entry]["evals_per_s"] / rows[n]["numpy"]["evals_per_s"]) for n in SIZES))
    return got


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first table after `HEADING`, split into stripped cells."""
    after = text.split(HEADING, 1)[1].splitlines()
    start = next(i for i, ln in enumerate(after) if ln.startswith("|"))
    rows = []
    for ln in after[start + 2:]:
        if not ln.startswith("|"):
            break
        cells_ = [c.strip() for c in ln.strip().strip("|").split("|")]
        if any(cells_[1:]):     # (a row with its first cell alone labels the rows below it)
            rows.append(cells_)
    return rows


def _ticked(cell: str) -> str:
    m = re.search(r"`([^`]+)`", cell)
    assert m, f"no backticked name in {cell!r}"
    return m.group(1)


def test_the_front_table_matches_its_json_files():
    if not DOC.is_file() or HEADING not in DOC.read_text():
        return
    rows = table_rows(DOC.read_text())
    assert len(rows) >= 10, "the front table of performance.md was not found whole"
    for row in rows:
        model, case, entry, json_name = row[0].strip("*"), _ticked(row[1]), _ticked(row[2]), _ticked(row[6])
        want = cells(model, case, entry, json_name)
        got = [c.strip("*") for c in row[3:6]]
        assert got == want, f"performance.md's row {row[:3]}: {got} in the table, {want} in {json_name}"


def test_figures_are_written_alike():
    assert figure(2_561_649.9) == "2.56e6"
    assert figure(25_576.4) == "2.56e4"
    assert figure(9_999_740.0) == "1.00e7"
    assert ratio(7.806) == "7.8x" and ratio(306.76) == "307x"


if __name__ == "__main__":
    for row in table_rows(DOC.read_text()):
        model, case, entry, json_name = row[0].strip("*"), _ticked(row[1]), _ticked(row[2]), _ticked(row[6])
        print("| " + " | ".join([row[0], row[1], row[2], *cells(model, case, entry, json_name), *row[6:]]) + " |")
