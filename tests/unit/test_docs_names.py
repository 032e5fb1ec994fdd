"""The code the docs name exists where they say it is.

Every backticked name in ``docs/*.md`` and ``README.md`` that looks like the project's code is
looked up in the repository's Python (``src/``, and ``tests/``, ``benchmarks/``, ``tools/`` for
the scripts and helpers the docs name):

* ``accelmap.a.b.name``: the longest prefix that is a module, then ``name`` defined in that
  module (a def or class at any depth, a name its top level or a class body assigns or
  imports, an attribute it assigns), then each further part a member of the class before it
  (its body, ``self.x`` in its methods, its bases');
* ``head.name`` where ``head`` is one of the project's modules (``_space_numpy.push_in``,
  ``parallel.sweep.search_kwargs``) or classes (``MappingBatch.take``): the same walk from
  every module or class of that name; a head that is neither (``np``, ``numba``) is not
  the project's and is skipped;
* ``costmodels/_loopnest_gen.py``, ``_cuda*.py``, ``cli/``: a tracked file or folder of
  that path (also under ``src/accelmap/``);
* ``_private``: defined somewhere in the project (a def, class, assignment, ``self`` attribute
  or module of that name);
* ``name`` right after "``module.py``'s": defined in that module;
* ``test_name``: a test function or module of that name;
* a results file named in full (``bench_*.json``, ``benchmarks/results/*.json``, braces
  expanded): a tracked file under ``benchmarks/results/``;
* the scripts a command runs (``python benchmarks/bench_x.py ...`` in a code span or a fenced
  block): tracked files.

Code that moved is best named as it is now; a paragraph that keeps the old name for the record
writes ```old` (now `new`)`` (or "since renamed" / "since moved to"), and the new name is
checked. A name that is historical on purpose (code tried and not kept, a file of another
project, a key of a data file) is listed in `HISTORICAL` with the reason. Run this file as a
script (``PYTHONPATH=src python tests/unit/test_docs_names.py``) to print every miss as
``file:line``; the test fails on any.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Names the docs give on purpose although no code of this project defines them; each with its
# reason. (Code that moved is better named as it is now, or as ```old` (now `new`)``: the old
# name is then skipped and the new one checked.)
HISTORICAL = {
    "_check_row": "performance.md: a shared legality helper tried for the systolic drivers and dropped",
    "costmodels/_loopnest_block.py": "performance.md: a blocked loopnest driver measured at one commit, "
                                     "removed after (said there)",
    "cli.py": "architecture.md: the design brief's single CLI module, which became the cli/ package (said there)",
    "double_buffered_scratchpad_mem.py": "validation.md: a SCALE-Sim source file",
    "read_buffer_estimate_bw.py": "validation.md: a SCALE-Sim source file",
    "systolic_compute_{os,ws,is}.py": "validation.md: SCALE-Sim source files",
    "_SearchSpaceTransform": "mapspace.md: optuna's class",
    "mapping.model_options": "architecture.md, search.md: a key path of a design-space file",
    "_b": "performance.md: a JSON file's suffix",
}
# suffixes of benchmark JSON files (``_lnfast3`` JSON) and data or output files, not code
_NOT_CODE = re.compile(r"^_(lnfast|sysfast|aspfast|asp)\w*\d+$"
                       r"|\.(sqlite|csv|png|json|yaml|yml|db|txt|md|toml|onnx|pdf|cfg|npz|m)$")


@dataclass
class _Module:
    path: str
    names: set[str] = field(default_factory=set)          # defined at any depth
    submodules: set[str] = field(default_factory=set)


@dataclass
class _Class:
    members: set[str] = field(default_factory=set)
    bases: set[str] = field(default_factory=set)


@dataclass
class Index:
    modules: dict[str, list[_Module]] = field(default_factory=dict)   # by dotted name and by stem
    classes: dict[str, list[_Class]] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)        # every def, class, assignment, attribute
    paths: set[str] = field(default_factory=set)          # tracked files
    folders: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)        # file names under benchmarks/results/


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode == 0 and out.stdout:
        return out.stdout.split()
    return [p.relative_to(ROOT).as_posix() for d in ("src", "tests", "benchmarks", "tools", "docs")
            for p in (ROOT / d).rglob("*") if p.is_file()]


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
        return [node.target]
    if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        return [node.target]
    return []


def _read_module(tree: ast.Module) -> tuple[set[str], dict[str, list[_Class]], dict[str, str]]:
    """What a module defines, in one pass over its tree: its defs and classes at any depth
    (closures included), the names its top level and its classes' bodies assign or import,
    and the attributes it assigns; each class's members (its body's defs and assignments,
    ``self.x`` in its methods); the project modules it imports under another name."""
    names: set[str] = set()
    classes: dict[str, list[_Class]] = defaultdict(list)
    aliases: dict[str, str] = {}
    todo: list[tuple[ast.stmt, _Class | None]] = [(st, None) for st in tree.body]
    while todo:     # statements only: what a module defines never sits inside an expression
        node, cls = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            new = _Class(bases={b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                                if isinstance(b, ast.Name | ast.Attribute)})
            classes[node.name].append(new)
            _scope_names(node.body, new.members)
            todo += [(st, new) for st in node.body]
            continue
        for t in _targets(node):
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute):
                    names.add(sub.attr)
                    if cls is not None and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                        cls.members.add(sub.attr)
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:     # a project module imported under another name
                full = a.name if isinstance(node, ast.Import) else f"{node.module}.{a.name}"
                if a.asname and full.startswith("accelmap."):
                    aliases[a.asname] = full
        todo += [(st, cls) for st in _child_statements(node)]
    _scope_names(tree.body, names)
    for group in classes.values():
        for c in group:
            names |= c.members
    return names, classes, aliases


def _child_statements(node: ast.AST) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for fld in ("body", "orelse", "finalbody"):
        out += [n for n in getattr(node, fld, None) or [] if isinstance(n, ast.stmt)]
    for h in getattr(node, "handlers", None) or []:
        out += h.body
    for case in getattr(node, "cases", None) or []:
        out += case.body
    return out


def _scope_names(body: list[ast.stmt], out: set[str]) -> None:
    """The names the statements of a module or class body assign, define or import, through
    if / try / with / for (not inside functions)."""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0] if a.asname or isinstance(node, ast.ImportFrom)
                    else a.name.split(".")[0] for a in node.names}
        for t in _targets(node):
            out |= {sub.id for sub in ast.walk(t) if isinstance(sub, ast.Name)}
        todo += _child_statements(node)


@functools.cache
def build_index() -> Index:
    ix = Index()
    aliases: dict[str, set[str]] = defaultdict(set)
    tracked = _tracked()
    ix.paths = set(tracked)
    ix.results = {Path(p).name for p in tracked if p.startswith("benchmarks/results/")}
    pyproject = ROOT / "pyproject.toml"
    if pyproject.is_file():     # entry-point groups (``accelmap.searchers``) are names too
        ix.defined |= set(re.findall(r'^\[project\.entry-points\."([\w.]+)"\]', pyproject.read_text(), re.M))
    for rel in tracked:
        parts = rel.split("/")
        for k in range(1, len(parts)):
            ix.folders.add("/".join(parts[:k]))
        if not rel.endswith(".py"):
            continue
        try:
            tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        names, classes, imported = _read_module(tree)
        mod = _Module(rel, names)
        ix.defined |= mod.names
        for name, group in classes.items():
            ix.classes.setdefault(name, []).extend(group)
        for alias, full in imported.items():
            aliases[alias].add(full)
        keys = {parts[-1].removesuffix(".py")}
        if parts[0] == "src":
            dotted = ".".join(parts[1:]).removesuffix(".py").removesuffix(".__init__")
            keys.add(dotted)
            if rel.endswith("__init__.py"):
                keys.add(parts[-2])
                pkg = Path(rel).parent
                mod.submodules = {p.removeprefix(f"{pkg.as_posix()}/").split("/")[0].removesuffix(".py")
                                  for p in tracked if p.startswith(f"{pkg.as_posix()}/")}
        for k in keys:
            ix.modules.setdefault(k, []).append(mod)
        ix.defined |= keys
    for alias, fulls in aliases.items():
        if alias not in ix.modules:
            ms = [m for f in sorted(fulls) for m in ix.modules.get(f, [])]
            if ms:
                ix.modules[alias] = ms
    return ix


def _members(ix: Index, cls: str, seen: frozenset[str] = frozenset()) -> set[str]:
    out: set[str] = set()
    for c in ix.classes.get(cls, []):
        out |= c.members
        for b in c.bases - seen:
            out |= _members(ix, b, seen | {cls})
    return out


def _resolve(ix: Index, kind: str, name: str, rest: list[str]) -> bool:
    """Whether the chain ``rest`` resolves from the module(s) or class ``name``."""
    if not rest:
        return True
    head, tail = rest[0], rest[1:]
    if kind == "module":
        for m in ix.modules.get(name, []):
            if head in m.submodules:
                sub = f"{name}.{head}" if f"{name}.{head}" in ix.modules else head
                if _resolve(ix, "module", sub, tail):
                    return True
            if head in m.names and (not tail or head not in ix.classes or _resolve(ix, "class", head, tail)):
                return True
        return False
    if head not in _members(ix, name):
        return False
    return not tail or head not in ix.classes or _resolve(ix, "class", head, tail)


def _path_ok(ix: Index, tok: str) -> bool:
    for pat in _expand(tok):
        pat = pat.rstrip("/")
        pool = ix.folders if tok.endswith("/") else ix.paths
        if "*" in pat:
            found = any(fnmatch.fnmatchcase(p, c) for c in (pat, f"src/accelmap/{pat}", f"*/{pat}") for p in pool)
        else:
            found = pat in pool or any(p.endswith(f"/{pat}") for p in pool)
        if not found:
            return False
    return True


def _expand(tok: str) -> list[str]:
    brace = re.search(r"\{([^}]*)\}", tok)
    if not brace:
        return [tok]
    return [x for alt in brace.group(1).split(",") for x in _expand(tok[:brace.start()] + alt + tok[brace.end():])]


def check_token(ix: Index, tok: str) -> bool:
    """Whether one backticked token, if it looks like the project's code, names code that exists."""
    if tok in ix.defined:
        return True
    if re.fullmatch(r"test_\w+", tok):
        return tok in ix.modules
    if tok.startswith("accelmap."):
        parts = tok.split(".")
        for k in range(len(parts), 0, -1):
            if ".".join(parts[:k]) in ix.modules:
                return _resolve(ix, "module", ".".join(parts[:k]), parts[k:])
        return False
    if re.fullmatch(r"[\w*{},./-]+\.py|[\w*{},./-]+/", tok) and not tok.startswith(("../", "/", "~")):
        return _path_ok(ix, tok)
    if re.fullmatch(r"_[A-Za-z]\w*", tok):
        return tok in ix.defined or tok.lstrip("_") in ix.modules
    if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", tok):
        head, *rest = tok.split(".")
        found = False
        if head in ix.modules:
            found = True
            if _resolve(ix, "module", head, rest):
                return True
        if head in ix.classes:
            found = True
            if _resolve(ix, "class", head, rest):
                return True
        return not found and not head.startswith("_")
    return True


_TICKED = re.compile(r"`([^`\s]+)`")
_OWNED = re.compile(r"`([\w/]+)\.py`'s `([^`\s]+)`")
_RENAMED = re.compile(r"`([^`\s]+)` \((?:now|since renamed|since moved to) `")
_SPAN = re.compile(r"`([^`]+)`")
_SCRIPT = re.compile(r"(?<![\w/.])((?:benchmarks|tests|src|tools)/[\w/.*-]+\.py)\b")


def _line_misses(ix: Index, line: str, fenced: bool) -> list[str]:
    bad = []
    renamed = set(_RENAMED.findall(line))
    for raw in [] if fenced else _TICKED.findall(line):
        tok = raw.split("(")[0].split("[")[0].rstrip(".,:;'")
        if not tok or tok in HISTORICAL or raw in renamed:
            continue
        if tok.endswith(".json"):   # a results file named in full: bench_*.json or benchmarks/results/*.json
            name = tok.removeprefix("benchmarks/results/")
            if ((name != tok or name.startswith("bench_")) and re.fullmatch(r"[\w{},-]+\.json", name)
                    and not all(n in ix.results for n in _expand(name))):
                bad.append(raw)
        elif not _NOT_CODE.search(tok) and not check_token(ix, tok):
            bad.append(raw)
    for mod, raw in [] if fenced else _OWNED.findall(line):
        name = raw.split("(")[0].split(".")[0]
        stem = mod.split("/")[-1]
        if (raw not in bad and f"{mod}.py" not in HISTORICAL and re.fullmatch(r"[A-Za-z_]\w*", name)
                and ix.modules.get(stem) and not any(name in m.names for m in ix.modules[stem])):
            bad.append(f"{raw}` (not in `{mod}.py")
    # the scripts that commands run, in code spans with spaces and in fenced blocks
    for span in [line] if fenced else [x for x in _SPAN.findall(line) if " " in x]:
        bad += [p for p in _SCRIPT.findall(span) if p not in HISTORICAL and not _path_ok(ix, p)]
    return bad


def misses(docs: list[Path] | None = None, ix: Index | None = None) -> list[str]:
    """Every name in ``docs`` (default: ``docs/*.md`` and ``README.md``) that no code defines
    where the text says, as ``file:line: `name```."""
    ix = ix or build_index()
    if docs is None:
        docs = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    out = []
    for doc in docs:
        where = doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc
        fenced = False
        for ln, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            out += [f"{where}:{ln}: `{b}`" for b in _line_misses(ix, line, fenced)]
    return out


def anchors(text: str) -> set[str]:
    """The anchors a renderer gives the headings of a Markdown text (GitHub's rule: lower case,
    every character but letters, digits, ``-``, ``_`` and spaces dropped, spaces as ``-``, a
    repeated anchor numbered ``-1``, ``-2``, ...); fenced blocks have no headings."""
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6} (.*)$", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            seen[a] = seen.get(a, -1) + 1
            if seen[a]:
                seen[f"{a}-{seen[a]}"] = 0
    return set(seen)


def test_every_link_within_a_page_finds_its_heading():
    docs = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    bad = []
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        have = anchors(text)
        bad += [f"{doc.name}: #{a}" for a in re.findall(r"\]\(#([^)\s]+)\)", text) if a not in have]
    assert not bad, "links to headings that do not exist:\n" + "\n".join(bad)
    assert anchors("# A `b.py` (c)\n## A b.py c\n## x\n## x\n") == {"a-bpy-c", "a-bpy-c-1", "x", "x-1"}


def test_every_code_name_in_the_docs_exists():
    if not (ROOT / "docs").is_dir():
        return
    found = misses()
    assert not found, ("names in the docs that no code defines where they say (rename them to what the code "
                       "is called now, or list them in HISTORICAL with the reason):\n" + "\n".join(found))


def test_the_check_finds_names_no_code_defines(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text(
        "`accelmap.mapper.mapping.MappingBatch`, `MappingBatch.take`, `_space_numpy.push_in`, `mapper/`,\n"
        "`costmodels/_cuda*.py`, `parallel.sweep.search_kwargs`, `accelmap.searchers`, `space.py`'s `MapSpace`,\n"
        "`bench_costmodel_device_cpu_merged_s33_{loopnest,systolic}.json`, `python benchmarks/bench_gpu.py --x`\n"
        "and `exact._Diver` (now `_exact_tree._Diver`) exist;\n"
        "`accelmap.mapper.mapping.no_such_thing`, `accelmap.no_such_module`, `_no_such_helper`,\n"
        "`MappingBatch.no_such_method`, `mapper/no_such_file.py`, `no_such_folder/`,\n"
        "`_space_numpy.no_such_function`, `accelmap.mapper.space.render_loop_nest` (in check.py), `exact._Diver`,\n"
        "`check.py`'s `LoopNestModel`, `bench_no_such_{a,costmodel}.json`, `python benchmarks/no_such.py --x`\n"
        "and `_exact_tree._Diver` (now `_exact_tree._no_such_class`) do not; `np.fmod` is numpy's.\n"
        "```\n"
        "python tests/unit/no_such_test.py\n"
        "```\n")
    got = [m.split(": ", 1)[1] for m in misses([doc])]
    assert got == ["`accelmap.mapper.mapping.no_such_thing`", "`accelmap.no_such_module`", "`_no_such_helper`",
                   "`MappingBatch.no_such_method`", "`mapper/no_such_file.py`", "`no_such_folder/`",
                   "`_space_numpy.no_such_function`", "`accelmap.mapper.space.render_loop_nest`", "`exact._Diver`",
                   "`bench_no_such_{a,costmodel}.json`", "`LoopNestModel` (not in `check.py`",
                   "`benchmarks/no_such.py`", "`_exact_tree._no_such_class`", "`tests/unit/no_such_test.py`"]


if __name__ == "__main__":
    found = misses()
    print("\n".join(found) or "every code name the docs give exists")
    sys.exit(1 if found else 0)
