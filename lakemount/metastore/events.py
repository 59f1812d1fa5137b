"""``SqlEventLog``: the event feed in the ref store's database (``lm_events``).

Implements :class:`lakemount.catalog.events.EventLog`; ids come from the
database (an autoincrementing key), so they increase across processes.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from lakemount.catalog.events import FeedEvent
from lakemount.metastore.tables import create_tables

metadata = sa.MetaData()

events_t = sa.Table(
    "lm_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("repo", sa.String(64), nullable=False),
    sa.Column("branch", sa.String(255), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("time", sa.Float, nullable=False),
    sa.Index("lm_events_repo_id", "repo", "id"),
)


class SqlEventLog:
    """The feed on SQLAlchemy Core (SQLite or PostgreSQL); creates its table on construction."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        create_tables(engine, metadata)

    def append(self, repo: str, branch: str, kind: str, payload: dict[str, Any], at: float) -> None:
        """Add an event."""
        with self.engine.connect().execution_options(lm_write=True) as conn, conn.begin():
            conn.execute(events_t.insert().values(repo=repo, branch=branch, kind=kind,
                                                  payload=json.dumps(payload, default=str), time=at))

    def read(self, repo: str, *, branch: str | None = None, after: int = 0, limit: int = 100) -> list[FeedEvent]:
        """Events of ``repo`` (and ``branch``) with ids above ``after``, oldest first."""
        cond = [events_t.c.repo == repo, events_t.c.id > after]
        if branch is not None:
            cond.append(events_t.c.branch == branch)
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(events_t).where(*cond).order_by(events_t.c.id).limit(limit)).all()
        return [FeedEvent(r.id, r.repo, r.branch, r.kind, json.loads(r.payload), r.time) for r in rows]
