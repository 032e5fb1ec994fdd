"""Shared fixtures and paths for the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.arch.spec import Arch
from accelmap.testing.examples import small_arch, small_conv
from accelmap.workloads.problem import Problem

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference"


@pytest.fixture
def conv() -> Problem:
    return small_conv()


@pytest.fixture
def arch() -> Arch:
    return small_arch()
