"""Fixtures shared by every test package (keep this small: package helpers live in the package)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.graveler.graveler import Graveler

# skip_policy: under CI=true a skipped test fails the run (see its docstring); pytester tests it.
# tiers: each test gets the markers (spark, browser, postgres, cluster, fuse) of what it starts (see its docstring).
# postgres: the run's one PostgreSQL cluster (pg_cluster, pg_url); chromium: the run's one browser (chromium,
# browser: a fresh context per test); both shared by every package. workers: with -n (scripts/test.sh), whole modules
# per xdist worker and tests/jobs on one (see its docstring). cpu: with LAKEMOUNT_TEST_CPU set, each test's CPU and
# the processes it started (see its docstring).
pytest_plugins = [
    "tests.skip_policy", "tests.tiers", "tests.postgres", "tests.chromium", "tests.workers", "tests.cpu", "pytester",
]


@pytest.fixture
def make_graveler(tmp_path: Path) -> Callable[..., Graveler]:
    """Factory of Gravelers on a SQLite file in ``tmp_path`` and a MemoryAdapter (see graveler/_support.py)."""
    from tests.graveler._support import build_graveler

    def make(adapter: Any = None, db: str = "refs.db", **kw: Any) -> Graveler:
        return build_graveler(tmp_path / db, adapter, **kw)

    return make


@pytest.fixture(autouse=True)
def _close_apps(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Close every ``App`` a test builds, so its audit thread and pooled connections end with it.

    Without this a full run kept each test's database files and sockets open
    (past descriptor 1024 in CI), and behaviour that depends on descriptor numbers changed late in the run.
    """
    built: list[App] = []
    post_init = App.__post_init__

    def tracked(self: App) -> None:
        post_init(self)
        built.append(self)

    monkeypatch.setattr(App, "__post_init__", tracked)
    yield
    for app in built:
        try:
            app.close()
        except Exception:  # noqa: BLE001 - a test that broke its app must not fail the next one's teardown
            pass


@pytest.fixture(autouse=True)
def _keep_the_umask() -> Any:
    """Give every test the process umask it found.  The CLI's main makes its process private
    (``lakemount.private.keep_private``: umask 077); a test that runs it in-process left a pytest
    worker making 0700 directories for every later test, whose markers then recorded that mode
    (tests/api/test_mount_datasets.py failed under workers that ran a CLI module first)."""
    import os

    umask = os.umask(0o022)
    os.umask(umask)
    yield
    os.umask(umask)
