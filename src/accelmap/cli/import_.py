"""`accelmap import`: turn other tools' files into accelmap files.

* ``accelmap import model.onnx --out DIR``: one problem file per Conv/Gemm/MatMul layer.
* ``accelmap import prob.yaml --out DIR``: a Timeloop problem as an accelmap problem file.
* ``accelmap import arch.yaml --energy ERT.yaml --out DIR``: a Timeloop architecture (with
  its energy table) as an accelmap arch file.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="convert ONNX models and Timeloop files to accelmap files",
                       description="Convert an ONNX model (every Conv, Gemm and MatMul layer), a "
                                   "Timeloop problem or a Timeloop architecture to accelmap YAML files.")
    p.add_argument("source", help="an .onnx model, or a Timeloop problem or architecture YAML")
    p.add_argument("--out", default=".", metavar="DIR", help="folder to write into (default: .)")
    p.add_argument("--energy", metavar="ERT", help="Timeloop energy reference table for an architecture")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a symbolic ONNX input dimension, e.g. batch=1 (repeatable)")
    p.add_argument("--word-bits", type=int, default=16, metavar="B", help="bits per word for ONNX layers (default 16)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelmap.cli import UsageError
    from accelmap.mapper.io import read_structured
    from accelmap.workloads.io import file_stem

    src = Path(args.source)
    if not src.exists():
        raise FileNotFoundError(2, "No such file", str(src))
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: a file, not a folder; give a folder to write into")
    written: list[Path] = []

    def target(stem: str, suffix: str) -> Path:
        """``out/<stem><suffix>``, numbered when an earlier file of this import took it."""
        path, k = out / f"{file_stem(stem)}{suffix}", 2
        while path in written:
            path, k = out / f"{file_stem(stem)}_{k}{suffix}", k + 1
        out.mkdir(parents=True, exist_ok=True)
        return path

    if src.suffix.lower() == ".onnx":
        from accelmap.workloads.io import save_problem
        from accelmap.workloads.onnx_import import problems_from_onnx

        values: dict[str, int] = {}
        for item in args.dim:
            name, sep, value = item.partition("=")
            if not sep or not value.isdigit():
                raise UsageError(f"--dim {item!r}; expected NAME=VALUE with an integer value, e.g. batch=1")
            values[name] = int(value)
        for problem in problems_from_onnx(src, dim_values=values, word_bits=args.word_bits):
            path = target(problem.name, ".yaml")
            save_problem(problem, path)
            written.append(path)
    else:
        data = read_structured(src)
        if isinstance(data, dict) and "problem" in data and isinstance(data["problem"], dict) and "shape" in data["problem"]:
            from accelmap.workloads.io import load_problem, save_problem

            problem = load_problem(str(src))
            path = target(src.stem, ".accelmap.yaml")
            save_problem(problem, path)
            written.append(path)
        elif isinstance(data, dict) and "architecture" in data:
            from accelmap.arch.io import load_arch, save_arch

            arch = load_arch(str(src), energy=args.energy)
            path = target(src.stem, ".accelmap.yaml")
            save_arch(arch, path)
            written.append(path)
        else:
            raise UsageError(f"{src}: not an ONNX model, a Timeloop problem (top-level `problem:` with "
                             "`shape`) or a Timeloop architecture (top-level `architecture:`)")
    for path in written:
        print(path)
    return 0
