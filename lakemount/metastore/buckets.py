"""``SqlBucketStore``: the gateway's bucket records in the ``lm_gw_buckets`` table of the ref store's database.

Implements :class:`lakemount.catalog.s3state.BucketStore`.  A record exists
for buckets created through the gateway whose repository has a derived name
or whose canned ACL is not ``private``; lookups run on every request, so they
go through ``FastSql``.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from lakemount.catalog.s3state import BucketRecord
from lakemount.metastore.ddl import create_tables
from lakemount.metastore.fastsql import FastSql

metadata = sa.MetaData()

buckets_t = sa.Table(
    "lm_gw_buckets",
    metadata,
    sa.Column("bucket", sa.String(255), primary_key=True),
    sa.Column("repo", sa.String(64), nullable=False, index=True),
    sa.Column("ref", sa.String(255), nullable=True),  # NULL: the mode decides (flat: default branch)
    sa.Column("acl", sa.String(32), nullable=False, default="private"),
    sa.Column("owner", sa.String(64), nullable=False, default=""),
    sa.Column("created", sa.Float, nullable=False),
)


class SqlBucketStore:
    """Bucket records on SQLAlchemy Core (SQLite or PostgreSQL); creates its table on construction."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        create_tables(engine, metadata)
        self._reader = FastSql(engine)

    def get(self, bucket: str) -> BucketRecord | None:
        """The record of ``bucket``, or ``None``."""
        rows = self._reader.query(
            "SELECT bucket, repo, ref, acl, owner, created FROM lm_gw_buckets WHERE bucket = ?", (bucket,)
        )
        return BucketRecord(*rows[0]) if rows else None

    def put(self, record: BucketRecord) -> None:
        """Record a bucket, replacing any record of the same name."""
        row = {
            "bucket": record.bucket,
            "repo": record.repo,
            "ref": record.ref,
            "acl": record.acl,
            "owner": record.owner,
            "created": record.created or time.time(),
        }
        try:
            with self.engine.begin() as conn:
                conn.execute(buckets_t.insert().values(**row))
        except IntegrityError:
            with self.engine.begin() as conn:
                conn.execute(buckets_t.update().where(buckets_t.c.bucket == record.bucket).values(**row))

    def delete(self, bucket: str) -> None:
        """Forget a bucket (nothing happens if it has no record)."""
        with self.engine.begin() as conn:
            conn.execute(buckets_t.delete().where(buckets_t.c.bucket == bucket))

    def list(self) -> list[BucketRecord]:
        """Every record, in no particular order."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(buckets_t)).all()
        return [BucketRecord(r.bucket, r.repo, r.ref, r.acl, r.owner, r.created) for r in rows]
