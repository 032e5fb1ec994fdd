"""The ``accelmap`` command: parse, load, call the API, write.

Each verb lives in its own module of this package (``accelmap.cli.<verb>``) with two
functions: ``register(subparsers)`` adds its parser and sets ``func``; the function takes
the parsed args and returns an exit code. This module owns only dispatch and the error
policy: exit 0 on success, 2 on a user error (message only; ``-v`` adds the traceback),
1 on anything unexpected.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from importlib import import_module
from typing import NoReturn

from accelmap.errors import AccelmapError

__all__ = ["main", "build_parser"]

# Order here is the order of `accelmap --help`.
_VERBS = ("search", "evaluate", "sweep", "dse", "report", "space", "validate", "list", "show", "import")


class UsageError(AccelmapError):
    """A bad command line (raised by verbs for checks argparse cannot express)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 already; keep its message short
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="accelmap",
        description="Dataflow mapper and design-space search for spatial DNN accelerators.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="show tracebacks on errors (-v) and debug logging (-vv)")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND", parser_class=_Parser)
    for verb in _VERBS:
        try:
            module = import_module(f"accelmap.cli.{verb.replace('import', 'import_')}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("accelmap.cli."):
                continue  # verb not built yet in this tree
            raise
        module.register(sub)
    return parser


def _version() -> str:
    from accelmap._version import __version__

    return f"accelmap {__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose >= 2:
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    elif args.verbose == 1:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    else:
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (AccelmapError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        if args.verbose:
            traceback.print_exc()
        print(f"accelmap: error: {_message(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception:
        traceback.print_exc()
        print("accelmap: unexpected error (a bug); please report it with the traceback above",
              file=sys.stderr)
        return 1


def _message(exc: BaseException) -> str:
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)) and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
