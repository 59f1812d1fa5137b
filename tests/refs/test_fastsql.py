"""FastSql's thread-local connection: ``reset`` closes what it forgets (issue 10)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakemount.errors import Unavailable
from lakemount.refs.fastsql import FastSql


def _fast(tmp_path: Path) -> FastSql:
    return FastSql(sa.create_engine(f"sqlite:///{tmp_path / 'refs.db'}"))


def test_reset_closes_the_connection(tmp_path: Path) -> None:
    fast = _fast(tmp_path)
    conn = fast.connection()
    assert conn.execute("SELECT 1").fetchone() == (1,)
    fast.reset()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
    again = fast.connection()
    assert again is not conn
    assert again.execute("SELECT 1").fetchone() == (1,)


def test_a_failed_query_closes_its_connection(tmp_path: Path) -> None:
    fast = _fast(tmp_path)
    conn = fast.connection()
    with pytest.raises(Unavailable):
        fast.query("SELECT * FROM no_such_table", ())
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
    assert fast.query("SELECT 2", ()) == [(2,)]


class _BrokenConnection:
    closed = 0

    def close(self) -> None:
        self.closed += 1
        raise sqlite3.OperationalError("disk I/O error")


def test_reset_forgets_a_connection_whose_close_fails(tmp_path: Path) -> None:
    fast = _fast(tmp_path)
    broken = _BrokenConnection()
    fast._local.conn = broken
    fast.reset()
    assert broken.closed == 1
    assert fast.connection() is not broken
    fast.reset()  # nothing to close: no error


def test_tables_lists_the_schema() -> None:
    from lakemount.refs import sql, sqlschema

    assert set(sqlschema.metadata.tables) == sql.TABLES


def test_reads_of_an_existing_sqlite_store_do_not_load_sqlalchemy(tmp_path: Path) -> None:
    """The hot reads run on plain sqlite3: a quick command does not pay for importing SQLAlchemy."""
    import subprocess
    import sys

    from lakemount.graveler.model import Branch, Commit, CommitID, MetaRangeID, Repository, StagingToken, Tag
    from lakemount.refs.sql import SqlRefStore

    url = f"sqlite:///{tmp_path / 'refs.db'}"
    store = SqlRefStore(url)
    commit = Commit(CommitID("ab" * 32), (), MetaRangeID("cd" * 32), "ef" * 16, "first", "me", 1.5, (("k", "v"),), 1)
    store.create_repository(Repository("r", "local:///x", "main", 2.0), Branch("main", commit.id, StagingToken("t1")), commit)
    store.create_tag("r", Tag("v1", commit.id))
    store.stage("r", "main", [(b"key", b"value")])
    script = f"""
import sys
from lakemount.refs.sql import SqlRefStore
s = SqlRefStore({url!r})
assert s.get_repository("r").default_branch == "main"
b = s.get_branch("r", "main")
c = s.get_commit("r", b.commit_id)
assert c.message == "first" and c.metadata == (("k", "v"),) and c.generation == 1 and c.creation_date == 1.5
assert s.get_tag("r", "v1").commit_id == c.id
assert s.commits_with_prefix("r", "abab") == [c.id]
assert s.staged_get([b.staging_token], b"key") == (True, b"value")
assert "sqlalchemy" not in sys.modules, "SQLAlchemy was imported"
assert len(s.list_branches("r")) == 1  # a listing loads it
assert "sqlalchemy" in sys.modules
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
