"""One throwaway PostgreSQL cluster per test run, and a fresh database on it per test (a plugin: tests/conftest.py).

The cluster is Debian's PostgreSQL 15 (``/usr/lib/postgresql/15/bin``), initialised in a
temp directory and listening only on a unix socket there.  PostgreSQL refuses to run
as root, so when the tests run as root the server runs as the ``postgres`` user (or a
``lmpgtest`` user created for it).  It is stopped and its directory removed at the end
of the session, also when tests fail or the run is interrupted.

A plugin rather than a package's conftest, so that every package's tests share the one
cluster: a module that imported the fixtures from a conftest got a cluster (an initdb) of
its own.  A test that needs a server to itself (to crash it) starts its own
(tests/metastore/test_pg_crash.py).
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("LAKEMOUNT_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


@dataclass(frozen=True)
class PgCluster:
    socket_dir: str
    port: int

    def url(self, db: str) -> str:
        return f"postgresql+psycopg2://postgres@/{db}?host={self.socket_dir}&port={self.port}"

    def admin(self) -> object:
        import psycopg2

        conn = psycopg2.connect(host=self.socket_dir, port=self.port, user="postgres", dbname="postgres")
        conn.autocommit = True
        return conn


def _run_as() -> list[str]:
    """The command prefix that runs the server as a non-root user (empty when not root)."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "lmpgtest"):
        try:
            pwd.getpwnam(name)
            return ["runuser", "-u", name, "--"]
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "lmpgtest"], check=True, capture_output=True)
    return ["runuser", "-u", "lmpgtest", "--"]


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "pg_ctl").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (Debian package postgresql-15)")
    prefix = _run_as()
    base = Path(tempfile.mkdtemp(prefix="lm-pg-"))
    data = base / "data"
    log = base / "server.log"
    if prefix:
        shutil.chown(base, user=prefix[2])
    port = 5432
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if stopped:
            return
        stopped = True
        subprocess.run(
            [*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)

    atexit.register(stop)  # also when the session dies before the fixture's teardown
    try:
        subprocess.run(
            [
                *prefix,
                str(PG_BIN / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        opts = (
            f"-k {base} -p {port} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=300"
        )
        proc = subprocess.run(
            [*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start"],
            capture_output=True,
            timeout=120,
        )
        if proc.returncode != 0:
            detail = log.read_text() if log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {proc.stdout!r} {proc.stderr!r} {detail}")
        yield PgCluster(str(base), port)
    finally:
        stop()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    """A fresh database on the session's cluster, dropped (connections and all) after the test."""
    name = "t_" + uuid.uuid4().hex[:12]
    admin = pg_cluster.admin()
    admin.cursor().execute(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    try:
        yield pg_cluster.url(name)
    finally:
        admin.cursor().execute(f'DROP DATABASE "{name}" WITH (FORCE)')  # type: ignore[attr-defined]
        admin.close()  # type: ignore[attr-defined]
