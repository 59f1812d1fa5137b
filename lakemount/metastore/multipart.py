"""``SqlMultipartStore``: multipart upload state on the ref store's database, shared by every gateway process.

Implements :class:`lakemount.catalog.s3state.MultipartStore`.  An upload and
its parts are rows (tables ``lm_gw_uploads``, ``lm_gw_parts``); each part's
bytes are an object the gateway wrote before its row points at it.  A
completed upload's row stays ``keep_completed`` seconds so that a retried
completion is answered; the part sizes of a completed upload are kept by its
ETag (``lm_gw_part_layouts``) so that ``GetObject?partNumber=N`` can find part
N of any object carrying that ETag, copies included.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from lakemount.catalog.s3state import Part, Upload
from lakemount.errors import ConcurrentUpdate, UploadNotFound
from lakemount.metastore.ddl import create_tables

KEEP_COMPLETED: Final = 24 * 3600.0

metadata = sa.MetaData()

uploads_t = sa.Table(
    "lm_gw_uploads",
    metadata,
    sa.Column("upload_id", sa.String(64), primary_key=True),
    sa.Column("bucket", sa.String(255), nullable=False),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("repo", sa.String(64), nullable=False),
    sa.Column("ref", sa.String(255), nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("initiated", sa.Float, nullable=False),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("content_type", sa.Text, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),  # JSON list of [name, value]
    # Set once completed: the row stays a while so a retried completion succeeds.
    sa.Column("completed_etag", sa.String(80), nullable=True),
    sa.Column("completed_at", sa.Float, nullable=True),
    sa.Index("lm_gw_uploads_by_key", "bucket", "key", "upload_id"),
)
parts_t = sa.Table(
    "lm_gw_parts",
    metadata,
    sa.Column("upload_id", sa.String(64), primary_key=True),
    sa.Column("part_number", sa.Integer, primary_key=True),
    sa.Column("etag", sa.String(64), nullable=False),  # MD5 hex of the part
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)
layouts_t = sa.Table(
    "lm_gw_part_layouts",
    metadata,
    sa.Column("etag", sa.String(80), primary_key=True),
    sa.Column("sizes", sa.Text, nullable=False),  # comma-separated part sizes
)



def _upload(row: sa.Row) -> Upload:
    """An ``lm_gw_uploads`` row as an ``Upload``."""
    return Upload(
        row.upload_id,
        row.bucket,
        row.key,
        row.repo,
        row.ref,
        row.path,
        row.initiated,
        row.owner,
        row.content_type,
        tuple((str(k), str(v)) for k, v in json.loads(row.metadata)),
        row.completed_etag,
    )


def _part(row: sa.Row) -> Part:
    """An ``lm_gw_parts`` row as a ``Part``."""
    return Part(row.part_number, row.etag, int(row.size), row.url, row.created)


class SqlMultipartStore:
    """Uploads and parts in SQL; every method is one transaction."""

    def __init__(self, engine: sa.Engine, *, keep_completed: float = KEEP_COMPLETED) -> None:
        self.engine = engine
        self.keep_completed = keep_completed
        create_tables(engine, metadata)

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        # lm_write makes the ref store's SQLite engine BEGIN IMMEDIATE, so a
        # read-then-write transaction cannot fail on lock upgrade.
        with self.engine.connect().execution_options(lm_write=True) as conn:
            with conn.begin():
                yield conn

    def create(self, upload: Upload) -> None:
        """Record a new upload (and drop completed ones older than ``keep_completed``)."""
        with self._write() as conn:
            conn.execute(uploads_t.delete().where(uploads_t.c.completed_at < time.time() - self.keep_completed))
            conn.execute(
                uploads_t.insert().values(
                    upload_id=upload.upload_id,
                    bucket=upload.bucket,
                    key=upload.key,
                    repo=upload.repo,
                    ref=upload.ref,
                    path=upload.path,
                    initiated=upload.initiated,
                    owner=upload.owner,
                    content_type=upload.content_type,
                    metadata=json.dumps([list(p) for p in upload.metadata]),
                )
            )

    def get(self, upload_id: str, *, completed: bool = False) -> Upload:
        """The upload in progress (or also a recently completed one); raises ``UploadNotFound``."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(uploads_t).where(uploads_t.c.upload_id == upload_id)).first()
        if row is None or (row.completed_etag is not None and not completed):
            raise UploadNotFound(upload_id)
        return _upload(row)

    def put_part(self, upload_id: str, part: Part) -> str | None:
        """Record (or replace) a part; returns the URL of the part it replaced.

        Raises ``UploadNotFound`` when the upload was completed or aborted
        meanwhile (the caller then deletes the part's object), and
        ``ConcurrentUpdate`` when another request inserted the same part at
        the same moment (PostgreSQL).
        """
        with self._write() as conn:
            found = conn.execute(
                sa.select(uploads_t.c.upload_id).where(
                    uploads_t.c.upload_id == upload_id, uploads_t.c.completed_etag.is_(None)
                )
            ).first()
            if found is None:
                raise UploadNotFound(upload_id)
            old = conn.execute(
                sa.select(parts_t.c.url).where(parts_t.c.upload_id == upload_id, parts_t.c.part_number == part.part_number)
            ).first()
            values = {"etag": part.etag, "size": part.size, "url": part.url, "created": part.created}
            if old is None:
                try:
                    conn.execute(parts_t.insert().values(upload_id=upload_id, part_number=part.part_number, **values))
                except IntegrityError:  # pragma: no cover - PostgreSQL race between two uploads of one part
                    raise ConcurrentUpdate(f"part {part.part_number} of upload {upload_id}") from None
                return None
            conn.execute(
                parts_t.update()
                .where(parts_t.c.upload_id == upload_id, parts_t.c.part_number == part.part_number)
                .values(**values)
            )
            return str(old.url)

    def parts(self, upload_id: str, *, after: int = 0, limit: int | None = None) -> list[Part]:
        """The parts numbered above ``after``, by number, at most ``limit``."""
        q = (
            sa.select(parts_t)
            .where(parts_t.c.upload_id == upload_id, parts_t.c.part_number > after)
            .order_by(parts_t.c.part_number)
        )
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [_part(r) for r in conn.execute(q)]

    def delete(self, upload_id: str) -> list[Part]:
        """Forget an upload in progress; returns its parts (whose objects the caller deletes).

        Raises ``UploadNotFound`` if it is gone or completed: of two
        concurrent aborts, exactly one succeeds.
        """
        with self._write() as conn:
            rows = conn.execute(sa.select(parts_t).where(parts_t.c.upload_id == upload_id)).all()
            gone = conn.execute(
                uploads_t.delete().where(uploads_t.c.upload_id == upload_id, uploads_t.c.completed_etag.is_(None))
            ).rowcount
            if gone == 0:
                raise UploadNotFound(upload_id)
            conn.execute(parts_t.delete().where(parts_t.c.upload_id == upload_id))
        return [_part(r) for r in rows]

    def complete(self, upload_id: str, etag: str) -> list[Part]:
        """Mark an upload completed with ``etag``; returns its parts (whose objects the caller deletes).

        The row is kept for a day so that a retried completion is answered.
        Raises ``UploadNotFound`` if it was aborted or completed meanwhile.
        """
        with self._write() as conn:
            rows = conn.execute(sa.select(parts_t).where(parts_t.c.upload_id == upload_id)).all()
            done = conn.execute(
                uploads_t.update()
                .where(uploads_t.c.upload_id == upload_id, uploads_t.c.completed_etag.is_(None))
                .values(completed_etag=etag, completed_at=time.time())
            ).rowcount
            if done == 0:
                raise UploadNotFound(upload_id)
            conn.execute(parts_t.delete().where(parts_t.c.upload_id == upload_id))
        return [_part(r) for r in rows]

    def uploads(
        self, bucket: str, *, prefix: str = "", key_marker: str = "", upload_id_marker: str = "", limit: int = 1000
    ) -> list[Upload]:
        """In-progress uploads of a bucket by key then id, after the markers."""
        q = sa.select(uploads_t).where(uploads_t.c.bucket == bucket, uploads_t.c.completed_etag.is_(None))
        if prefix:
            q = q.where(uploads_t.c.key >= prefix)
        if key_marker:
            if upload_id_marker:
                q = q.where(
                    sa.or_(
                        uploads_t.c.key > key_marker,
                        sa.and_(uploads_t.c.key == key_marker, uploads_t.c.upload_id > upload_id_marker),
                    )
                )
            else:
                q = q.where(uploads_t.c.key > key_marker)
        q = q.order_by(uploads_t.c.key, uploads_t.c.upload_id)
        out: list[Upload] = []
        with self.engine.connect() as conn:
            for row in conn.execute(q):
                if prefix and not row.key.startswith(prefix):
                    if row.key > prefix:
                        break
                    continue
                out.append(_upload(row))
                if len(out) >= limit:
                    break
        return out

    def forget_repo(self, repo: str) -> list[Part]:
        """Drop every upload of a repository (deleted with it); returns the parts to delete."""
        with self._write() as conn:
            ids = sa.select(uploads_t.c.upload_id).where(uploads_t.c.repo == repo)
            rows = conn.execute(sa.select(parts_t).where(parts_t.c.upload_id.in_(ids))).all()
            conn.execute(parts_t.delete().where(parts_t.c.upload_id.in_(ids)))
            conn.execute(uploads_t.delete().where(uploads_t.c.repo == repo))
        return [_part(r) for r in rows]

    def record_layout(self, etag: str, sizes: Sequence[int]) -> None:
        """Remember the part sizes of a completed upload by its ETag."""
        try:
            with self.engine.begin() as conn:
                conn.execute(layouts_t.insert().values(etag=etag, sizes=",".join(map(str, sizes))))
        except IntegrityError:
            pass  # the same parts again: same layout

    def layout(self, etag: str) -> list[int] | None:
        """The part sizes recorded for ``etag``, or ``None``."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(layouts_t.c.sizes).where(layouts_t.c.etag == etag)).first()
        return None if row is None else [int(s) for s in row.sizes.split(",") if s]
