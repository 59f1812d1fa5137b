"""Creating the gateway's own tables on the ref store's database, safely from many processes.

Every gateway worker starts by making sure its tables exist.  On SQLite a
plain ``create_all`` reads the schema in a deferred transaction and then
writes, which fails at once ("database is locked") when another worker does
the same; an immediate (write) transaction waits its turn instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import OperationalError

from lakemount.errors import Unavailable


def create_tables(engine: sa.Engine, metadata: sa.MetaData, attempts: int = 5) -> None:
    """``metadata.create_all`` in one write transaction, retried on lock errors."""
    for attempt in range(attempts):
        try:
            with engine.connect().execution_options(lm_write=True) as conn, conn.begin():
                metadata.create_all(conn)
            return
        except OperationalError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


class FastReader:
    """Point SELECTs on a thread-local DBAPI connection in autocommit mode.

    A pooled SQLAlchemy ``Connection`` with its transaction costs milliseconds
    per statement on SQLite; the gateway looks a bucket up on every request.
    This is the ref store's own hot-path technique (``SqlRefStore._query``),
    repeated here because that one is private; queries use ``?`` markers.
    """

    def __init__(self, engine: sa.Engine) -> None:
        import threading

        self.engine = engine
        self.dialect = engine.dialect.name
        self._local = threading.local()
        dbapi = engine.dialect.dbapi
        self._errors: tuple[type[BaseException], ...] = (dbapi.OperationalError, dbapi.InterfaceError) if dbapi else ()

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cargs, cparams = self.engine.dialect.create_connect_args(self.engine.url)
            conn = self.engine.dialect.connect(*cargs, **cparams)
            if self.dialect == "postgresql":
                conn.autocommit = True
            else:
                conn.isolation_level = None
                conn.execute("PRAGMA busy_timeout=60000")
            self._local.conn = conn
        return conn

    def query(self, text: str, params: Sequence[Any]) -> list[Any]:
        """Rows of one read statement; raises ``Unavailable`` when the database cannot answer."""
        if self.dialect != "sqlite":
            text = text.replace("?", "%s")
        try:
            cur = self._conn().cursor()
            try:
                cur.execute(text, params)
                return cur.fetchall()
            finally:
                cur.close()
        except self._errors as exc:
            self._local.conn = None
            raise Unavailable(f"ref store: {exc}") from exc
