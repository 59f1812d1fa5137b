"""The gateway's stores on the ref store's database: ``SqlBucketStore`` and ``SqlMultipartStore``.

Both backends (SQLite, PostgreSQL) run the same tests; the stores speak
lakemount errors (``UploadNotFound``), never S3 ones, and keep the tables and
columns earlier versions created, so existing stores open unchanged.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from lakemount.catalog.s3state import BucketRecord, BucketStore, MultipartStore, Part, Upload
from lakemount.errors import NotFound, UploadNotFound
from lakemount.metastore.buckets import SqlBucketStore
from lakemount.metastore.multipart import SqlMultipartStore
from lakemount.metastore.sql import SqlRefStore


@pytest.fixture
def engine(ref_url: str) -> sa.Engine:
    return SqlRefStore(ref_url).engine


def upload(upload_id: str, key: str = "main/k", bucket: str = "b", repo: str = "b") -> Upload:
    return Upload(upload_id, bucket, key, repo, "main", key.partition("/")[2], 1.0, "alice", "text/plain", (("a", "1"),))


def part(n: int, url: str = "", size: int = 5) -> Part:
    return Part(n, f"{n:032x}", size, url or f"mem://p/{n}", 2.0)


def test_tables_keep_their_names_and_columns(engine: sa.Engine) -> None:
    SqlBucketStore(engine)
    SqlMultipartStore(engine)
    inspector = sa.inspect(engine)
    columns = {t: [c["name"] for c in inspector.get_columns(t)] for t in ("lm_gw_buckets", "lm_gw_uploads", "lm_gw_parts", "lm_gw_part_layouts")}
    assert columns == {
        "lm_gw_buckets": ["bucket", "repo", "ref", "acl", "owner", "created"],
        "lm_gw_uploads": ["upload_id", "bucket", "key", "repo", "ref", "path", "initiated", "owner", "content_type", "metadata", "completed_etag", "completed_at"],
        "lm_gw_parts": ["upload_id", "part_number", "etag", "size", "url", "created"],
        "lm_gw_part_layouts": ["etag", "sizes"],
    }


def test_buckets(engine: sa.Engine) -> None:
    store: BucketStore = SqlBucketStore(engine)
    assert store.get("my.bucket") is None and store.list() == []
    store.put(BucketRecord("my.bucket", "my-bucket-0123456789", acl="public-read", owner="alice"))
    got = store.get("my.bucket")
    assert got is not None and (got.repo, got.ref, got.acl, got.owner) == ("my-bucket-0123456789", None, "public-read", "alice")
    assert got.created > 0
    store.put(BucketRecord("my.bucket", "my-bucket-0123456789", acl="private", owner="bob"))
    reopened = SqlBucketStore(engine)  # a second process on the same database sees the record
    assert [(r.bucket, r.acl, r.owner) for r in reopened.list()] == [("my.bucket", "private", "bob")]
    store.delete("my.bucket")
    store.delete("my.bucket")  # forgetting twice is no error
    assert reopened.get("my.bucket") is None


def test_upload_life(engine: sa.Engine) -> None:
    store: MultipartStore = SqlMultipartStore(engine)
    store.create(upload("u1"))
    assert store.get("u1") == upload("u1")
    with pytest.raises(UploadNotFound) as caught:
        store.get("nope")
    assert caught.value.upload_id == "nope" and isinstance(caught.value, NotFound)
    assert store.put_part("u1", part(2)) is None
    assert store.put_part("u1", part(1)) is None
    assert store.put_part("u1", part(2, "mem://p/2b")) == "mem://p/2"
    assert [p.part_number for p in store.parts("u1")] == [1, 2]
    assert store.parts("u1", after=1) == [part(2, "mem://p/2b")]
    assert [p.part_number for p in store.parts("u1", limit=1)] == [1]
    done = store.complete("u1", "abc-2")
    assert sorted(p.url for p in done) == ["mem://p/1", "mem://p/2b"]
    with pytest.raises(UploadNotFound):
        store.get("u1")
    assert store.get("u1", completed=True).completed_etag == "abc-2"
    for late in (lambda: store.put_part("u1", part(3)), lambda: store.complete("u1", "abc-2"), lambda: store.delete("u1")):
        with pytest.raises(UploadNotFound):
            late()
    assert store.parts("u1") == []


def test_abort_once(engine: sa.Engine) -> None:
    store = SqlMultipartStore(engine)
    store.create(upload("u1"))
    store.put_part("u1", part(1))
    assert store.delete("u1") == [part(1)]
    with pytest.raises(UploadNotFound):
        store.delete("u1")


def test_listing_and_forgetting_a_repository(engine: sa.Engine) -> None:
    store = SqlMultipartStore(engine)
    for uid, key in (("u2", "main/a/x"), ("u1", "main/a/x"), ("u3", "main/b"), ("u4", "main/a/y")):
        store.create(upload(uid, key))
    store.create(upload("o1", "main/a/x", bucket="other", repo="other"))
    store.put_part("u3", part(1))
    store.put_part("o1", part(1, "mem://other/1"))
    ids = lambda uploads: [u.upload_id for u in uploads]  # noqa: E731
    assert ids(store.uploads("b")) == ["u1", "u2", "u4", "u3"]
    assert ids(store.uploads("b", prefix="main/a/")) == ["u1", "u2", "u4"]
    assert ids(store.uploads("b", key_marker="main/a/x")) == ["u4", "u3"]
    assert ids(store.uploads("b", key_marker="main/a/x", upload_id_marker="u1")) == ["u2", "u4", "u3"]
    assert ids(store.uploads("b", limit=2)) == ["u1", "u2"]
    assert store.forget_repo("b") == [part(1)]
    assert store.uploads("b") == [] and ids(store.uploads("other")) == ["o1"]


def test_layouts(engine: sa.Engine) -> None:
    store = SqlMultipartStore(engine)
    assert store.layout("e-2") is None
    store.record_layout("e-2", [5, 3])
    store.record_layout("e-2", [5, 3])  # the same completion twice
    assert store.layout("e-2") == [5, 3]


def test_completed_uploads_expire(engine: sa.Engine) -> None:
    store = SqlMultipartStore(engine, keep_completed=-1.0)
    store.create(upload("u1"))
    store.complete("u1", "e-1")
    store.create(upload("u2"))  # creating an upload drops completed ones past keep_completed
    with pytest.raises(UploadNotFound):
        store.get("u1", completed=True)
