"""Shared fixtures and paths for the test suite."""

from __future__ import annotations

import os
from pathlib import Path

# The loopnest model's specialised rows compile in the process that asks for them, on the call
# past the row count (`_loopnest_kernel._SPECIALISE_IN_BACKGROUND`), as the tests that compare
# them from a given call on expect; set before accelmap is imported, and inherited by the Ray
# workers and the CLI's subprocesses. The tests of the background compile turn it on.
os.environ.setdefault("ACCELMAP_COMPILE_IN_BACKGROUND", "0")

import pytest  # noqa: E402

from accelmap.arch.spec import Arch  # noqa: E402
from accelmap.testing.examples import small_arch, small_conv  # noqa: E402
from accelmap.workloads.problem import Problem  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference"


@pytest.fixture
def conv() -> Problem:
    return small_conv()


@pytest.fixture
def arch() -> Arch:
    return small_arch()
