"""Fixtures shared by every test package (keep this small: package helpers live in the package)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakemount.graveler.graveler import Graveler

# skip_policy: under CI=true a skipped test fails the run (see its docstring); pytester tests it.
pytest_plugins = ["tests.skip_policy", "pytester"]


@pytest.fixture
def make_graveler(tmp_path: Path) -> Callable[..., Graveler]:
    """Factory of Gravelers on a SQLite file in ``tmp_path`` and a MemoryAdapter (see graveler/_support.py)."""
    from tests.graveler._support import build_graveler

    def make(adapter: Any = None, db: str = "refs.db", **kw: Any) -> Graveler:
        return build_graveler(tmp_path / db, adapter, **kw)

    return make
