"""The code the docs name exists: every backticked name in ``docs/*.md`` and ``README.md`` that
looks like the project's code (``accelmap.…`` dotted paths, ``_private`` names, ``module.name`` /
``Class.method`` pairs, ``….py`` files) is defined in the repository's Python (``src/``,
``tests/``, ``benchmarks/``, ``tools/``), so a reader who looks one up finds it. A name that is
historical on purpose (code tried and not kept, or removed, where the text says so) is listed
in `HISTORICAL` with the reason."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Names the docs give on purpose although no code defines them now; each with its reason.
HISTORICAL = {
    "_check_row": "performance.md: a shared legality helper tried for the systolic drivers and dropped",
    "costmodels/_loopnest_block.py": "performance.md: a blocked loopnest driver measured at one commit, removed after (said there)",
    "cli.py": "architecture.md: the design brief's single CLI module, which became the cli/ package (said there)",
    "double_buffered_scratchpad_mem.py": "validation.md: a SCALE-Sim source file",
    "read_buffer_estimate_bw.py": "validation.md: a SCALE-Sim source file",
    "valid.all": "performance.md: numpy's ndarray.all on a local array",
    "cuda.device_array": "performance.md: numba's CUDA API",
    "config.warm_start_runs": "search.md: a key of a result's config dict",
    "frontier.accuracy": "validation.md: a key of a benchmark's JSON",
}
# suffixes of benchmark JSON files (``_lnfast3`` JSON) and output files, not code
_NOT_CODE = re.compile(r"^_(lnfast|sysfast|aspfast|asp)\w*\d+$|\.(sqlite|csv|png|json|yaml|yml|db|txt|md|toml)$")


def _python_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=False)
    files = [ROOT / p for p in out.stdout.split()] if out.returncode == 0 and out.stdout else []
    return files or [p for d in ("src", "tests", "benchmarks", "tools") for p in (ROOT / d).rglob("*.py")]


def _index() -> tuple[dict[str, Path], set[str], set[str], set[str], set[str]]:
    """(package modules by dotted name, every defined name, the project's classes and functions,
    module short names, .py paths)."""
    modules: dict[str, Path] = {}
    names: set[str] = set()
    defs: set[str] = set()
    short: set[str] = set()
    paths: set[str] = set()
    for f in _python_files():
        rel = f.relative_to(ROOT)
        paths.add(rel.as_posix())
        short.add(f.stem)
        if rel.parts[0] == "src":
            mod = ".".join(rel.with_suffix("").parts[1:])
            modules[mod.removesuffix(".__init__")] = f
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
                defs.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name):
                            names.add(sub.id)
                        elif isinstance(sub, ast.Attribute):
                            names.add(sub.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[-1])
    return modules, names, defs, short, paths


def _misses(docs: list[Path] | None = None) -> list[str]:
    modules, names, defs, short, paths = _index()
    basenames = {Path(p).name for p in paths}
    misses = []
    if docs is None:
        docs = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    for doc in docs:
        for ln, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for raw in re.findall(r"`([^`\s]+)`", line):
                tok = raw.split("(")[0].rstrip(".,:;")
                if not tok or tok in HISTORICAL or _NOT_CODE.search(tok):
                    continue
                ok = True
                if tok.startswith("accelmap."):
                    parts = tok.split(".")
                    k = next((k for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules), 0)
                    ok = k > 0 and (k == len(parts) or parts[k] in names)
                elif tok.endswith(".py") and re.fullmatch(r"[\w/.]+\.py", tok):
                    ok = tok in paths or f"src/accelmap/{tok}" in paths or Path(tok).name in basenames
                elif re.fullmatch(r"_[a-z]\w+", tok):
                    ok = tok in names or tok in short or tok.lstrip("_") in short
                elif re.fullmatch(r"[A-Za-z_]\w*\.[A-Za-z_]\w*", tok):
                    head, attr = tok.split(".")
                    # (a head that is only imported, such as ``np`` or ``sys``, is not the project's)
                    ok = not (head in short or head in defs) or attr in names
                if not ok:
                    where = doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc
                    misses.append(f"{where}:{ln}: `{raw}`")
    return misses


@pytest.mark.skipif(not (ROOT / "docs").is_dir(), reason="docs/ not in this checkout")
def test_every_code_name_in_the_docs_exists():
    misses = _misses()
    assert not misses, ("names in the docs that no code defines (rename them to what the code is called "
                        "now, or list them in HISTORICAL with the reason):\n" + "\n".join(misses))


def test_the_check_finds_names_no_code_defines(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("`accelmap.mapper.mapping.MappingBatch` and `MappingBatch.take` exist;\n"
                   "`accelmap.mapper.mapping.no_such_thing`, `accelmap.no_such_module`, `_no_such_helper`,\n"
                   "`MappingBatch.no_such_method` and `mapper/no_such_file.py` do not; `np.fmod` is numpy's.\n")
    got = [m.split(": ", 1)[1] for m in _misses([doc])]
    assert got == ["`accelmap.mapper.mapping.no_such_thing`", "`accelmap.no_such_module`", "`_no_such_helper`",
                   "`MappingBatch.no_such_method`", "`mapper/no_such_file.py`"]
