"""The README opens with two commands; CI runs the second one verbatim."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text)


def test_readme_opens_with_two_commands():
    cmds = _commands()
    assert len(cmds) >= 2
    assert cmds[0].startswith("pip install") and "accelmap search" in cmds[0]
    assert cmds[1].startswith("pip install") and "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert _commands()[1] in ci
