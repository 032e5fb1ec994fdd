"""Reading the text of spec files (YAML, JSON, CSV, MAESTRO's text formats)."""

from __future__ import annotations

from pathlib import Path

from accelmap.errors import SpecError

__all__ = ["read_text"]


def read_text(path: str | Path) -> str:
    """The text of the file at ``path``; a file that is not UTF-8 text (a binary, say)
    raises `SpecError` naming it. Missing or unreadable files raise as `Path.read_text` does."""
    p = Path(path)
    try:
        return p.read_text()
    except UnicodeDecodeError as exc:
        raise SpecError(f"{p}: not a text file (byte {exc.start} is not UTF-8); expected a text spec file "
                        "(YAML, JSON, CSV or MAESTRO text)") from exc
