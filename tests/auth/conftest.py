"""A throwaway PostgreSQL cluster for the auth store's conformance runs.

``LAKEMOUNT_TEST_POSTGRES_URL`` points the tests at an existing server instead.
Without either a URL or Debian's ``initdb``, the PostgreSQL cases are skipped.
``engine`` runs each test on SQLite and on PostgreSQL; ``store`` is an auth store on it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakemount.auth import SqlAuthStore
from lakemount.auth.store import metadata as auth_metadata

SERVER_KEY = "test-server-key"


def _initdb() -> str | None:
    found = shutil.which("initdb")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return candidates[-1] if candidates else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    url = os.environ.get("LAKEMOUNT_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    initdb = _initdb()
    if initdb is None:
        pytest.skip("no PostgreSQL: install Debian's postgresql or set LAKEMOUNT_TEST_POSTGRES_URL")
    pg_ctl = os.path.join(os.path.dirname(initdb), "pg_ctl")
    # PostgreSQL refuses to run as root; the Debian package's user runs it.
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    directory = tempfile.mkdtemp(prefix="lakemount-pg-")
    if prefix:
        shutil.chown(directory, "postgres")
    data = os.path.join(directory, "data")
    try:
        subprocess.run([*prefix, initdb, "-D", data, "-A", "trust", "-U", "postgres"], check=True, capture_output=True)
        # Unix socket only: nothing listens on the network.
        options = f"-k {directory} -c listen_addresses='' -c fsync=off"
        subprocess.run(
            [*prefix, pg_ctl, "-D", data, "-o", options, "-l", os.path.join(directory, "log"), "-w", "start"],
            check=True,
            capture_output=True,
        )
        try:
            yield f"postgresql+psycopg2://postgres@/postgres?host={directory}"
        finally:
            subprocess.run([*prefix, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


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
