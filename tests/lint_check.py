"""Lint gate (issue 10): ruff and mypy pass on the tree, so review stops catching what tools can.

Runs ``ruff check lakemount tests benchmarks`` (pyflakes, pycodestyle, bugbear, pyupgrade, import
sorting and the docstring rules configured in pyproject.toml) and ``mypy lakemount`` with the
interpreter running the tests, and fails with the tools' own output.  Both tools are in the
``test`` extra, so CI never skips this.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.lint


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])))
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_ruff_clean() -> None:
    result = _run("ruff", "check", "--no-cache", "--output-format", "concise", "lakemount", "tests", "benchmarks")
    assert result.returncode == 0, f"ruff found violations:\n{result.stdout}{result.stderr}"


def test_mypy_clean() -> None:
    result = _run("mypy", "lakemount")
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
