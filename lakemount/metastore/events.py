"""``SqlEventLog``: the event feed in the ref store's database (``lm_events``).

Implements :class:`lakemount.catalog.events.EventLog`; ids come from the
database (an autoincrementing key), so they increase across processes.
Statements go through the ref store's :class:`~lakemount.metastore.fastsql.FastSql`:
every commit appends an event, and a CLI ``commit`` should not load SQLAlchemy for
it (issue 41).  SQLAlchemy creates the table, once per process and only when a
SQLite file does not already hold it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lakemount.catalog.events import FeedEvent

if TYPE_CHECKING:
    import sqlalchemy as sa

    from lakemount.metastore.sql import SqlRefStore

TABLE = "lm_events"


def _metadata() -> sa.MetaData:
    """The table's definition (SQLAlchemy Core), for creating it."""
    import sqlalchemy as sa

    metadata = sa.MetaData()
    sa.Table(
        TABLE,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("repo", sa.String(64), nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Index("lm_events_repo_id", "repo", "id"),
    )
    return metadata


class SqlEventLog:
    """The feed in the ref store's database (SQLite or PostgreSQL); makes its table on construction."""

    def __init__(self, refs: SqlRefStore) -> None:
        self._fast = refs._fast
        exists = self._fast.dialect == "sqlite" and bool(
            self._fast.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)))
        if not exists:
            from lakemount.metastore.ddl import create_tables

            create_tables(refs.engine, _metadata())

    def append(self, repo: str, branch: str, kind: str, payload: dict[str, Any], at: float) -> None:
        """Add an event."""
        sql = self._fast.sql(f"INSERT INTO {TABLE} (repo, branch, kind, payload, time) VALUES (?, ?, ?, ?, ?)")
        values = (repo, branch, kind, json.dumps(payload, default=str), at)
        self._fast.run(lambda cur: cur.execute(sql, values))

    def read(self, repo: str, *, branch: str | None = None, after: int = 0, limit: int = 100) -> list[FeedEvent]:
        """Events of ``repo`` (and ``branch``) with ids above ``after``, oldest first."""
        where, params = "repo = ? AND id > ?", [repo, after]
        if branch is not None:
            where += " AND branch = ?"
            params.append(branch)
        rows = self._fast.query(
            f"SELECT id, repo, branch, kind, payload, time FROM {TABLE} WHERE {where} ORDER BY id LIMIT ?", (*params, limit))
        return [FeedEvent(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5]) for r in rows]
