"""FastSql's thread-local connection: ``reset`` closes what it forgets (issue 10)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from lakemount.errors import Unavailable
from lakemount.metastore.fastsql import FastSql


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
    from lakemount.metastore import sql, sqlschema

    assert set(sqlschema.metadata.tables) == sql.TABLES


def test_reads_of_an_existing_sqlite_store_do_not_load_sqlalchemy(tmp_path: Path) -> None:
    """The hot reads run on plain sqlite3: a quick command does not pay for importing SQLAlchemy."""
    import subprocess
    import sys

    from lakemount.graveler.model import Branch, Commit, CommitID, MetaRangeID, Repository, StagingToken, Tag
    from lakemount.metastore.sql import SqlRefStore
    from lakemount.metastore.sql_staging import SqlStaging

    url = f"sqlite:///{tmp_path / 'refs.db'}"
    store = SqlRefStore(url)
    commit = Commit(CommitID("ab" * 32), (), MetaRangeID("cd" * 32), "ef" * 16, "first", "me", 1.5, (("k", "v"),), 1)
    store.create_repository(Repository("r", "local:///x", "main", 2.0), Branch("main", commit.id, StagingToken("t1")), commit)
    store.create_tag("r", Tag("v1", commit.id))
    SqlStaging(store).stage("r", "main", [(b"key", b"value")])
    script = f"""
import sys
from lakemount.metastore.sql import SqlRefStore
from lakemount.metastore.sql_staging import SqlStaging
s = SqlRefStore({url!r})
assert s.get_repository("r").default_branch == "main"
b = s.get_branch("r", "main")
c = s.get_commit("r", b.commit_id)
assert c.message == "first" and c.metadata == (("k", "v"),) and c.generation == 1 and c.creation_date == 1.5
assert s.get_tag("r", "v1").commit_id == c.id
assert s.commits_with_prefix("r", "abab") == [c.id]
assert SqlStaging(s).staged_get([b.staging_token], b"key") == (True, b"value")
assert "sqlalchemy" not in sys.modules, "SQLAlchemy was imported"
assert len(s.list_branches("r")) == 1  # a listing loads it
assert "sqlalchemy" in sys.modules
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


class _Lossy(sqlite3.Connection):
    """A connection that loses itself once at the statement starting with ``fail_on``.

    At a COMMIT the commit is applied first and only its reply is lost, as when
    the server dies right after it: the writer cannot tell it applied.
    """

    fail_on = ""
    upserts = 0

    def cursor(self, factory: type[sqlite3.Cursor] | None = None) -> sqlite3.Cursor:  # type: ignore[override]
        return super().cursor(_LossyCursor)


class _LossyCursor(sqlite3.Cursor):
    def execute(self, sql: str, params: object = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        if _Lossy.fail_on and sql.startswith(_Lossy.fail_on):
            armed, _Lossy.fail_on = _Lossy.fail_on, ""
            if armed == "COMMIT":
                super().execute(sql, params)  # type: ignore[arg-type]
            raise sqlite3.OperationalError("disk I/O error (injected: the connection is gone)")
        return super().execute(sql, params)  # type: ignore[arg-type]

    def executemany(self, sql: str, rows: object, /) -> sqlite3.Cursor:  # type: ignore[override]
        _Lossy.upserts += 1
        return super().executemany(sql, rows)  # type: ignore[arg-type]


@pytest.mark.parametrize(("lost_at", "repeated"), [("BEGIN", True), ("COMMIT", False)])
def test_a_staging_write_is_repeated_only_when_its_commit_never_went_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lost_at: str, repeated: bool
) -> None:
    from lakemount.graveler.model import Branch, Commit, CommitID, Repository, StagingToken
    from lakemount.metastore.sql import SqlRefStore
    from lakemount.metastore.sql_staging import SqlStaging

    path = tmp_path / "refs.db"
    store = SqlRefStore(f"sqlite:///{path}")
    staging = SqlStaging(store)
    root = Commit(CommitID("c0"), (), "mr", "", "init", "t", 0.0, (), 1)
    store.create_repository(Repository("repo", "mem://ns", "main", 0.0), Branch("main", CommitID("c0"), StagingToken("t0")), root)
    monkeypatch.setattr(store._fast, "_connect", lambda: sqlite3.connect(path, check_same_thread=False, factory=_Lossy))
    monkeypatch.setattr(_Lossy, "upserts", 0)
    store._fast.reset()
    store.get_branch("repo", "main")  # this thread now keeps a connection
    monkeypatch.setattr(_Lossy, "fail_on", lost_at)
    if repeated:  # lost before the COMMIT: nothing applied, repeated on a fresh connection
        staging.stage("repo", "main", [(b"k", b"v")])
    else:  # lost during the COMMIT: applied, but the writer cannot know; never applied twice
        with pytest.raises(Unavailable):
            staging.stage("repo", "main", [(b"k", b"v")])
    assert _Lossy.fail_on == "", "the connection was never lost"
    # lost at BEGIN, only the repeat reached the upsert; lost at COMMIT, the upsert was not repeated
    assert _Lossy.upserts == 1
    assert staging.staged_get([StagingToken("t0")], b"k") == (True, b"v")


@pytest.mark.parametrize(
    ("lost_at", "retry", "outcome", "works"),
    [("BEGIN", True, "repeated", 1), ("BEGIN", False, "unavailable", 0), ("COMMIT", True, "unavailable", 1),
     ("INSERT", True, "repeated", 2)],
)
def test_one_transaction_helper_repeats_a_write_only_when_its_commit_never_went_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lost_at: str, retry: bool, outcome: str, works: int
) -> None:
    """``FastSql.run`` is the one transaction helper of the ref store's staging writes and of the staging
    lists (``sql._stage_once`` and ``staging_lists._run`` were two copies): a write lost before its COMMIT
    went out is repeated once when asked (nothing applied), never after (it may have applied)."""
    path = tmp_path / "refs.db"
    fast = FastSql.sqlite(str(path))
    fast.run(lambda cur: cur.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER)"))
    monkeypatch.setattr(fast, "_connect", lambda: sqlite3.connect(path, check_same_thread=False, factory=_Lossy))
    fast.reset()
    fast.connection()  # this thread now keeps a connection
    calls: list[int] = []

    def work(cur: sqlite3.Cursor) -> str:
        calls.append(1)
        cur.execute("INSERT INTO t (k, n) VALUES ('a', 1) ON CONFLICT (k) DO UPDATE SET n = n + 1")
        return "done"

    monkeypatch.setattr(_Lossy, "fail_on", lost_at)
    if outcome == "repeated":
        assert fast.run(work, transaction=True, retry=retry) == "done"
    else:
        with pytest.raises(Unavailable):
            fast.run(work, transaction=True, retry=retry)
    assert _Lossy.fail_on == "", "the connection was never lost"
    assert len(calls) == works
    applied = fast.query("SELECT n FROM t", ())
    assert applied == ([] if (lost_at, outcome) == ("BEGIN", "unavailable") else [(1,)])  # never applied twice


def test_the_transaction_helper_rolls_back_what_its_work_raised_in(tmp_path: Path) -> None:
    fast = FastSql.sqlite(str(tmp_path / "refs.db"))
    fast.run(lambda cur: cur.execute("CREATE TABLE t (k TEXT)"))

    def work(cur: sqlite3.Cursor) -> None:
        cur.execute("INSERT INTO t (k) VALUES ('a')")
        raise KeyError("refused after writing")

    with pytest.raises(KeyError):
        fast.run(work, transaction=True)
    assert fast.query("SELECT k FROM t", ()) == []
    assert not fast.connection().in_transaction


@pytest.mark.postgres
def test_a_new_thread_takes_the_connection_of_one_that_ended(pg_url: str) -> None:
    """Worker threads come and go (a mount's trio threads end after 10 s idle): the next ones run on the
    connections the ended ones held, not on new ones (each a server backend and a transaction counted); a
    connection reset after an error is not handed down.  Before, every new thread connected.  (Each thread holds
    its connection inside a run: since stop 54 a run gives it back when it ends.)"""
    import gc
    import threading

    fast = FastSql(sa.create_engine(pg_url))

    def round_of(n: int) -> set[int]:
        pids: list[int] = []
        together = threading.Barrier(n)  # every thread holds its connection at once

        def hold(cur: Any) -> None:  # a run holds its connection until it returns (stop 54)
            cur.execute("SELECT pg_backend_pid()")
            pids.append(cur.fetchone()[0])
            together.wait(30)

        def work() -> None:
            fast.run(hold)

        threads = [threading.Thread(target=work) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        gc.collect()
        return set(pids)

    first = round_of(4)
    assert len(first) == 4
    second = round_of(4)
    assert second == first, "the new threads connected again instead of taking the ended threads' connections"
    third = round_of(6)
    assert first < third and len(third) == 6  # two more than were spare: new ones
    reset_pid: list[int] = []

    def reset(cur: Any) -> None:
        cur.execute("SELECT pg_backend_pid()")
        reset_pid.append(cur.fetchone()[0])
        fast.reset()

    def reset_then_end() -> None:
        fast.run(reset)

    t = threading.Thread(target=reset_then_end)
    t.start()
    t.join(30)
    gc.collect()
    assert reset_pid[0] in third and reset_pid[0] not in round_of(5)  # closed by reset, never handed down


@pytest.mark.postgres
def test_threads_running_one_after_another_share_one_connection(pg_url: str) -> None:
    """Stop 54: a run gives its connection back when it ends, so 16 threads that run statements one at a time hold
    one connection between them (a mount's burst of writers connected a backend per worker thread before), and a
    run inside a run (a staging's error path reads the branch) uses its thread's connection, which goes back only
    when the outer one ends."""
    import threading

    fast = FastSql(sa.create_engine(pg_url))
    pids: list[int] = []
    turn = threading.Lock()

    def work() -> None:
        with turn:
            pids.append(fast.query("SELECT pg_backend_pid()", ())[0][0])

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(pids) == 16 and len(set(pids)) == 1

    def outer(cur: Any) -> tuple[int, int, int]:
        cur.execute("SELECT pg_backend_pid()")
        inner = fast.query("SELECT pg_backend_pid()", ())[0][0]
        cur.execute("SELECT pg_backend_pid()")
        return pids[0], inner, cur.fetchone()[0]

    first, inner, after = fast.run(outer, transaction=True)
    assert inner == after == first
    assert fast._spares is not None and len(fast._spares) == 1  # given back once, when the outer run ended


def test_a_forked_child_never_takes_its_parent_s_spare_connections(tmp_path: Path) -> None:
    """The spares are the parent's sessions: a forked child that used one would share its socket with whatever
    thread of the parent takes it next.  The child forgets them (keeps them unclosed: a close would end the
    parent's session); the parent keeps them."""
    import os

    from lakemount.metastore import fastsql

    fast = _fast(tmp_path)
    spare = object()
    fast._spares = [spare]
    fastsql._WITH_SPARES.add(fast)
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if it forgot the spare and kept it unclosed
        os._exit(0 if fast._spares == [] and spare in fastsql._INHERITED else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child kept its parent's spare connection to use"
    assert fast._spares == [spare]
