"""The ref store's tables as SQLAlchemy Core objects, and the engine settings (SQLite in WAL mode).

Imported by :mod:`lakemount.metastore.sql` only when it first needs SQLAlchemy
(schema creation, writes, listings): the hot reads run on plain DBAPI
connections and a quick command never loads SQLAlchemy.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from lakemount.errors import InvalidArgument
from lakemount.metastore.urls import KEY, normalize, one_line, redact

__all__ = [
    "branches_t",
    "commits_t",
    "make_engine",
    "meta_t",
    "metadata",
    "protection_t",
    "hidden_t",
    "repos_t",
    "staging_live_ix",
    "staging_t",
    "tags_t",
]

metadata = sa.MetaData()

meta_t = sa.Table(
    "lm_meta", metadata, sa.Column("key", sa.String(64), primary_key=True), sa.Column("value", sa.Text, nullable=False)
)
repos_t = sa.Table(
    "lm_repositories",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("storage_namespace", sa.Text, nullable=False),
    sa.Column("default_branch", sa.String(255), nullable=False),
    sa.Column("creation_date", sa.Float, nullable=False),
)
branches_t = sa.Table(
    "lm_branches",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("commit_id", sa.String(64), nullable=False),
    sa.Column("staging_token", sa.String(64), nullable=False),
    sa.Column("sealed_tokens", sa.Text, nullable=False, default=""),
)
tags_t = sa.Table(
    "lm_tags",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("commit_id", sa.String(64), nullable=False),
)
commits_t = sa.Table(
    "lm_commits",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("parents", sa.Text, nullable=False),
    sa.Column("metarange_id", sa.String(64), nullable=False),
    sa.Column("metarange_checksum", sa.String(64), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("committer", sa.Text, nullable=False),
    sa.Column("creation_date", sa.Float, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
)
staging_t = sa.Table(
    "lm_staging",
    metadata,
    sa.Column("token", sa.String(64), primary_key=True),
    sa.Column("key", sa.LargeBinary, primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=True),
)
# The staged values alone (tombstones left out), so "the first live key under a prefix" (an rmdir's
# emptiness check) seeks to it past any number of deletions instead of reading them (``staged_first``).
staging_live_ix = sa.Index(
    "lm_staging_live",
    staging_t.c.token,
    staging_t.c.key,
    sqlite_where=staging_t.c.value.isnot(None),
    postgresql_where=staging_t.c.value.isnot(None),
)
# Branches created hidden (lakeFS's ``hidden``): a table of its own, so a database made before it
# gains it by ``create_all`` without touching ``lm_branches``.
hidden_t = sa.Table(
    "lm_hidden_branches",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
)
protection_t = sa.Table(
    "lm_protection",
    metadata,
    sa.Column("repo", sa.String(64), primary_key=True),
    sa.Column("pattern", sa.String(255), primary_key=True),
)


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with lakemount's connection settings (WAL and write locks on SQLite).

    A bare ``postgresql://`` URL gets the psycopg2 driver (see :mod:`lakemount.metastore.urls`).
    Raises ``InvalidArgument`` naming ``metadata.db.url`` for a bad URL or a missing driver.
    """
    parsed = normalize(url)
    try:
        return _create_engine(parsed)
    except (sa.exc.NoSuchModuleError, ImportError) as exc:
        raise InvalidArgument(f"{KEY}: no driver for {redact(parsed)}: {one_line(exc)}") from None
    except sa.exc.ArgumentError as exc:
        raise InvalidArgument(f"{KEY}: {redact(parsed)}: {one_line(exc)}") from None


def _create_engine(url: sa.URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        engine = sa.create_engine(url, connect_args={"timeout": 60, "check_same_thread": False}, poolclass=sa.pool.QueuePool, pool_size=8, max_overflow=16)

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("lm_write") else "BEGIN")

        return engine
    return sa.create_engine(url, pool_size=8, max_overflow=16, pool_pre_ping=True)
