"""The auth store's conformance runs on SQLite and on PostgreSQL (the run's one cluster, tests/postgres.py).

``LAKEMOUNT_TEST_POSTGRES_URL`` points the tests at an existing server instead.
Without either a URL or Debian's ``initdb``, the PostgreSQL cases are skipped.
``engine`` runs each test on SQLite and on PostgreSQL; ``store`` is an auth store on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakemount.auth import SqlAuthStore
from lakemount.auth.store import metadata as auth_metadata

SERVER_KEY = "test-server-key"


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> str:
    """An empty PostgreSQL database: ``LAKEMOUNT_TEST_POSTGRES_URL``'s, else a fresh one on the run's cluster."""
    return os.environ.get("LAKEMOUNT_TEST_POSTGRES_URL") or request.getfixturevalue("pg_url")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    if request.param == "sqlite":
        eng = sa.create_engine(f"sqlite:///{tmp_path / 'refs.db'}")
        yield eng
    else:
        eng = sa.create_engine(request.getfixturevalue("postgres_url"))
        auth_metadata.drop_all(eng)
        yield eng
        auth_metadata.drop_all(eng)
    eng.dispose()


@pytest.fixture
def store(engine: sa.Engine) -> SqlAuthStore:
    return SqlAuthStore(engine, SERVER_KEY)
