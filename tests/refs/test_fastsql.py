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
