"""``FastSql``: hot-path statements on a thread-local DBAPI connection in autocommit mode.

A pooled SQLAlchemy ``Connection`` with its transaction costs ~150 us per
statement on SQLite; a plain DBAPI connection kept per thread runs the same
point query 10x faster.  The ref store uses it for branch heads, staged
lookups and staging writes; other tables on the same database (the gateway's)
use it for their per-request lookups.  Statements are written with ``?``
markers and converted for PostgreSQL.

A thread that ends hands its PostgreSQL connection down to the next new thread (``SPARES_MAX`` kept):
the worker threads of a mount (trio's, which end after 10 s idle) and of the servers come and go,
and each new one connecting was a server backend started and a transaction counted, 16 of them
each time a mount's writers came back after a pause (docs/SCALE.md, stop 53).  And since stop 54 a
PostgreSQL connection is the thread's only while a ``run`` (the outermost, if one runs inside another)
holds it: then it goes back to the spares for whichever thread runs next, so a process holds as many
connections as run statements at once, not one per thread that ever ran one (a mount's burst of 16
writers started 11-18 backends, a transaction each, though its threads run statements one or two at a time).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lakemount import waiting
from lakemount.errors import Unavailable, WouldWait
from lakemount.metastore.urls import KEY, one_line, where

if TYPE_CHECKING:
    import sqlalchemy as sa

T = TypeVar("T")

_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # another connection holds what the statement needs
SPARES_MAX = 64  # connections of ended threads kept for new ones (more are closed)
_WITH_SPARES: weakref.WeakSet[FastSql] = weakref.WeakSet()
_INHERITED: list[Any] = []  # a forked child's copies of its parent's spares: never used, never closed


def _forget_spares() -> None:
    """In a forked child: the spares are the parent's sessions (a close would end them): never hand them out."""
    for fast in list(_WITH_SPARES):
        if fast._spares:
            _INHERITED.extend(fast._spares)
            fast._spares.clear()


os.register_at_fork(after_in_child=_forget_spares)


class LostBeforeCommit(Unavailable):
    """The connection died before anything of the work could apply (a transaction's COMMIT was not sent, or
    the work only reads): a repeat is safe."""


class _Shared:
    """Where a detached ``FastSql`` keeps its connection: one slot, whichever thread calls."""

    conn: Any = None
    unwaiting: Any = None  # the connection of a caller that refuses to wait (``FastSql.connection``)
    depth = 0  # (runs are counted per thread only where connections go back after each: never here)


class _Ender:
    """Held in a thread's locals only: collected when the thread ends, handing its connection down."""

    __slots__ = ("__weakref__",)


def _hand_down(spares: list[Any], lock: threading.Lock, cell: list[Any]) -> None:
    """A thread ended: its connection (``cell``, None once reset) is kept for the next new thread."""
    conn, cell[0] = cell[0], None
    if conn is None:
        return
    with lock:
        if len(spares) < SPARES_MAX:
            spares.append(conn)
            return
    with contextlib.suppress(Exception):
        conn.close()


class FastSql:
    """Thread-local autocommit DBAPI connections to the ref store's database, for hot-path point statements."""
    def __init__(self, engine: sa.Engine | None, sqlite_path: str | None = None) -> None:
        """Connections made like ``engine``'s, or (engine None) straight to the SQLite file ``sqlite_path``."""
        self.engine = engine
        self._sqlite_path = sqlite_path
        self._local: threading.local | _Shared = threading.local()
        self._spares: list[Any] | None = None  # idle connections: runs ended and threads ended (PostgreSQL, not detached)
        self._spares_lock = threading.Lock()
        self.errors: tuple[type[BaseException], ...]  # the driver's "could not answer" classes
        self.driver_errors: tuple[type[BaseException], ...]  # every error the driver raises
        if engine is None:
            assert sqlite_path is not None
            self.dialect = "sqlite"
            self.errors = (sqlite3.OperationalError, sqlite3.InterfaceError)
            self.driver_errors = (sqlite3.Error,)
            self.where = f"sqlite {sqlite_path}"
            return
        self.dialect = engine.dialect.name
        dbapi = engine.dialect.dbapi
        self.errors = (dbapi.OperationalError, dbapi.InterfaceError) if dbapi else ()
        self.driver_errors = (dbapi.Error,) if dbapi else ()
        self.where = where(engine.url)
        if self.dialect == "postgresql":
            self._spares = []
            _WITH_SPARES.add(self)

    @classmethod
    def sqlite(cls, path: str) -> FastSql:
        """Connections to the SQLite file ``path`` as SQLAlchemy's pysqlite makes them, without SQLAlchemy."""
        return cls(None, path)

    def detached(self) -> FastSql:
        """Another ``FastSql`` on the same database whose one connection is not per thread: for a pool that
        hands it to one thread at a time (a connection per thread that ever wrote costs the server a backend
        each, and a first write the connect)."""
        other = FastSql(self.engine, self._sqlite_path)
        other._local = _Shared()
        other._spares = None
        return other

    def _connect(self) -> Any:
        if self.engine is None:
            return sqlite3.connect(self._sqlite_path or "", check_same_thread=False)
        cargs, cparams = self.engine.dialect.create_connect_args(self.engine.url)
        return self.engine.dialect.connect(*cargs, **cparams)

    def connection(self) -> Any:
        """This thread's connection, outside the pool (which many threads would exhaust): an ended thread's
        if one is spare, else a new one.  A thread that refuses to wait (``lakemount.waiting``) gets its
        SQLite connection that never waits for a lock (``SQLITE_BUSY`` at once: ``WouldWait``); on
        PostgreSQL, whose every statement is a round trip to the server, ``WouldWait`` at once."""
        if waiting.refused():
            return self._unwaiting()
        conn = getattr(self._local, "conn", None)
        if conn is None and self._take_spare():
            conn = self._local.conn
        if conn is None:
            try:
                conn = self._connect()
            except self.errors as exc:
                raise Unavailable(self.message(exc)) from exc
            if self.dialect == "postgresql":
                conn.autocommit = True
            else:
                conn.isolation_level = None
                conn.execute("PRAGMA busy_timeout=60000")
                conn.execute("PRAGMA synchronous=NORMAL")
            self._adopt(conn)
        return conn

    def _unwaiting(self) -> Any:
        """This thread's SQLite connection with no busy timeout (see :meth:`connection`), made on first need."""
        if self.dialect != "sqlite":
            raise WouldWait("a statement to the ref store's server")
        conn = getattr(self._local, "unwaiting", None)
        if conn is None:
            try:
                conn = self._connect()
            except self.errors as exc:
                raise Unavailable(self.message(exc)) from exc
            conn.isolation_level = None
            conn.execute("PRAGMA busy_timeout=0")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.unwaiting = conn
        return conn

    def _adopt(self, conn: Any) -> None:
        """``conn`` is this thread's now; with spares kept, it is handed down when the thread ends."""
        local = self._local
        local.conn = conn
        if self._spares is None or isinstance(local, _Shared) or getattr(local, "depth", 0) > 0:
            return  # (inside a run, the run gives it back when it ends)
        cell = [conn]
        ender = _Ender()
        weakref.finalize(ender, _hand_down, self._spares, self._spares_lock, cell).atexit = False
        local.cell, local.ender = cell, ender

    def _take_spare(self) -> bool:
        """Give this thread (which has no connection) an ended thread's, if one is kept; True if it got one."""
        if not self._spares:
            return False
        with self._spares_lock:
            if not self._spares:
                return False
            conn = self._spares.pop()
        self._adopt(conn)
        return True

    def message(self, exc: BaseException) -> str:
        """One line for a driver error: the server, then the driver's first line."""
        return f"ref store at {self.where} ({KEY}): {one_line(exc)}"

    def reset(self) -> None:
        """Close and forget this thread's connection (after an error); the next call reconnects.

        Closing a connection the error already broke may fail too; that failure is ignored.
        """
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        cell = getattr(self._local, "cell", None)
        if cell is not None:
            cell[0] = None  # nothing to hand down
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def lost(self, exc: BaseException, conn: Any) -> bool:
        """Whether the driver error ``exc`` raised on ``conn`` means the database did not answer, not that it refused the statement.

        A PostgreSQL server that dies under a connection (a crash, ``pg_ctl -m
        immediate``) kills its backends; a client that misses their last word
        (seen on a unix socket) finds only a closed socket, which psycopg2
        reports as a bare ``DatabaseError`` ("server closed the connection
        unexpectedly"), not the ``OperationalError`` of a shutdown's message:
        the dialect's own disconnect test tells them apart.
        """
        if isinstance(exc, self.errors):
            return True
        return (self.engine is not None and isinstance(exc, self.driver_errors)
                and bool(self.engine.dialect.is_disconnect(exc, conn, None)))  # type: ignore[arg-type]

    def sql(self, text: str) -> str:
        return text if self.dialect == "sqlite" else text.replace("?", "%s")

    def query(self, text: str, params: Sequence[Any]) -> list[Any]:
        """Rows of one read-only statement; raises ``Unavailable`` when the database cannot answer.

        A kept connection the server dropped (a restart, a crash, an idle timeout)
        is replaced and the statement tried once more on a new one: a read is
        safe to repeat.  Any other driver error (a refused statement) propagates.
        """
        sql = self.sql(text)

        def fetch(cur: Any) -> list[Any]:
            cur.execute(sql, params)
            return cur.fetchall()

        return self.run(fetch, retry=True)

    def run(self, work: Callable[[Any], T], *, transaction: bool = False, retry: bool = False) -> T:
        """``work(cursor)`` on this thread's connection, in autocommit or (``transaction``) in one write
        transaction (SQLite: ``BEGIN IMMEDIATE``, the one write lock) committed when ``work`` returns and
        rolled back when it raises (``work`` may roll back itself before raising).

        When the database does not answer, the connection is dropped (the next call makes a new one) and
        ``Unavailable`` raised.  With ``retry``, what a kept connection the server had dropped (a restart,
        a crash, an idle timeout) lost is tried once more on a new one where a repeat is safe: autocommit
        work that only reads, or a transaction whose COMMIT never went out (nothing of it was applied).
        Lost while the COMMIT (or an autocommit write) was on its way, whether it applied is unknown, and
        a repeat could overwrite a later write: ``Unavailable``.  Any other driver error (a refused
        statement) propagates.
        """
        local = self._local
        outer = self._spares is not None and not getattr(local, "depth", 0)  # PostgreSQL: a run takes one, gives it back
        if self._spares is not None:
            local.depth = getattr(local, "depth", 0) + 1
        try:
            kept = getattr(local, "conn", None) is not None or self._take_spare()  # a spare is kept too: the server may have dropped it
            try:
                return self._run_once(work, transaction, retry)
            except LostBeforeCommit:
                if not (retry and kept):
                    raise
            return self._run_once(work, transaction, retry)
        finally:
            if self._spares is not None:
                local.depth -= 1
                if outer:
                    self._give_back()

    def _give_back(self) -> None:
        """The outermost run of this thread ended: its connection (None once reset) goes back to the spares, for
        whichever thread runs next (stop 54: a mount's 16 worker threads of a burst each connected before,
        though they run statements one or two at a time; now a process holds as many as run at once)."""
        local = self._local
        conn = getattr(local, "conn", None)
        local.conn = None
        cell = getattr(local, "cell", None)
        if cell is not None:
            cell[0] = None
        if conn is None:
            return
        with self._spares_lock:
            if self._spares is not None and len(self._spares) < SPARES_MAX:
                self._spares.append(conn)
                return
        with contextlib.suppress(Exception):
            conn.close()

    def _run_once(self, work: Callable[[Any], T], transaction: bool, reads: bool) -> T:
        conn = self.connection()
        committing = not transaction and not reads  # an autocommit write applies as it runs
        try:
            cur = conn.cursor()
            try:
                if not transaction:
                    return work(cur)
                cur.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
                try:
                    out = work(cur)
                    committing = True
                    cur.execute("COMMIT")
                    return out
                except BaseException:
                    if conn.in_transaction if self.dialect == "sqlite" else True:
                        with contextlib.suppress(*self.driver_errors):
                            cur.execute("ROLLBACK")
                    raise
            finally:
                cur.close()
        except self.driver_errors as exc:
            if (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in _BUSY and waiting.refused():
                raise WouldWait(self.message(exc)) from exc  # rolled back above: nothing applied
            if not self.lost(exc, conn):
                raise
            self.reset()
            lost = Unavailable if committing else LostBeforeCommit
            raise lost(self.message(exc)) from exc
