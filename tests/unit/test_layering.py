"""Imports run one way: workloads, arch <- mapper <- costmodels <- search <- parallel <- cli.

Every import in every module (top level or inside a function) is checked against the rank
of its package; a module may import only from packages of lower or equal rank. Within a
package, modules import one way too: no import circle between any two modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "accelmap"

RANK = {
    "errors": 0, "_files": 0, "_typing": 0, "_registry": 0, "_version": 0, "_schema": 0,
    "workloads": 1,
    "arch": 2,
    "mapper": 3,
    "costmodels": 4,
    "search": 5,
    "parallel": 6,
    "testing": 7,
    "cli": 8,
    "__init__": 9,
}


def _package(module_path: Path) -> str:
    rel = module_path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "accelmap" and node.level == 0:
            # `from accelmap import x`: x is a submodule or a re-export of the top package
            out.extend((node.lineno, f"accelmap.{a.name}") for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
    return [(ln, m) for ln, m in out if m == "accelmap" or m.startswith("accelmap.")]


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_run_one_way(path: Path):
    own = _package(path)
    if own not in RANK:
        pytest.fail(f"{path}: package {own!r} has no rank in tests/unit/test_layering.py")
    bad = []
    for lineno, module in _imports(path):
        parts = module.split(".")
        if len(parts) == 1:
            if own != "__init__":
                bad.append(f"line {lineno}: imports the top-level package `accelmap`")
            continue
        target = parts[1]
        # a name re-exported by accelmap/__init__.py (not a submodule) ranks as the package root
        rank = RANK.get(target, RANK["__init__"] if not (SRC / target).exists() and not (SRC / f"{target}.py").exists() else 0)
        if rank > RANK[own]:
            bad.append(f"line {lineno}: {own} imports {module}")
    assert not bad, f"{path.relative_to(SRC)} breaks the layering: " + "; ".join(bad)


def _module_file(dotted: str) -> Path | None:
    """The source file of module ``accelmap.a.b`` (a package's ``__init__.py``), None if none."""
    base = SRC.joinpath(*dotted.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_edges(path: Path) -> set[Path]:
    """The files of the accelmap modules ``path`` imports, at the top level or inside a function:
    ``from accelmap.a import b`` names ``a/b.py`` when ``b`` is a module, else ``a``'s own file."""
    tree = ast.parse(path.read_text())
    out: set[Path] = set()
    for node in ast.walk(tree):
        dotted: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = _module_file(f"{node.module}.{a.name}") if node.module.startswith("accelmap") else None
                dotted.append(f"{node.module}.{a.name}" if sub is not None else node.module)
        elif isinstance(node, ast.Import):
            dotted.extend(a.name for a in node.names)
        for name in dotted:
            if name.startswith("accelmap.") and (f := _module_file(name)) is not None and f != path:
                out.add(f)
    return out


def test_no_module_imports_itself_through_others():
    """No import circle between modules (a package's ``__init__.py``, which re-exports its
    modules by design, left out): the modules of a subpackage form layers too, and a function-level
    import counts, since it still ties the two files together."""
    from graphlib import CycleError, TopologicalSorter

    files = [p for p in sorted(SRC.rglob("*.py")) if p.name != "__init__.py"]
    graph = {p: {q for q in _module_edges(p) if q.name != "__init__.py"} for p in files}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        circle = " -> ".join(str(p.relative_to(SRC)) for p in exc.args[1])
        pytest.fail(f"import circle: {circle}; move what both sides need to a module below them")
