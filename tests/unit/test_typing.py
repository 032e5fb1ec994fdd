"""``mypy src`` stays clean: the package's annotations are checked as the README's
development notes run them (the configuration in ``pyproject.toml``'s ``[tool.mypy]``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mypy_src_reports_no_errors():
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (the dev extra has it)")
    cwd = os.getcwd()
    os.chdir(REPO)  # the configuration and the package paths are read from the checkout's root
    try:
        stdout, stderr, status = api.run(["src"])
    finally:
        os.chdir(cwd)
    assert status == 0 and stdout.startswith("Success"), f"mypy src:\n{stdout}{stderr}"
