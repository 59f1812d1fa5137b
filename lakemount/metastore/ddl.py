"""Creating tables on the ref store's database safely from many processes: ``create_tables``.

Every gateway worker starts by making sure its tables exist.  On SQLite a
plain ``create_all`` reads the schema in a deferred transaction and then
writes, which fails at once ("database is locked") when another worker does
the same; an immediate (write) transaction waits its turn instead.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.exc import OperationalError


def create_tables(engine: sa.Engine, metadata: sa.MetaData, attempts: int = 5) -> None:
    """``metadata.create_all`` in one write transaction, retried on lock errors; re-raises the last one."""
    for attempt in range(attempts):
        try:
            with engine.connect().execution_options(lm_write=True) as conn, conn.begin():
                metadata.create_all(conn)
            return
        except OperationalError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
