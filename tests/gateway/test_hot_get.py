"""A GET of a hot object through the gateway: few ref-store statements, no object-store request, never stale.

Two in-process gateways over one home stand for two gateway hosts sharing the
stores: what one writes, the other serves at once, whatever either cached.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakemount.app import App
from lakemount.block.flaky import OPERATIONS, FlakyAdapter
from lakemount.config import load
from lakemount.gateway import buckets
from lakemount.gateway.handler import S3Gateway
from lakemount.gateway.settings import from_config
from lakemount.gateway.sig import v4
from lakemount.metastore.fastsql import FastSql
from lakemount.serving.http import BytesBody, Request, Response

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, signed_headers


def make_gateway(home: Path) -> S3Gateway:
    app = App(load(None, env={"LAKEMOUNT_HOME": str(home)}))
    app.__dict__["adapter"] = FlakyAdapter(app.adapter)  # counts the block store's requests, injects nothing
    return S3Gateway(app, from_config(app.config))


def admin_gateway(home: Path) -> S3Gateway:
    """A gateway on ``home`` with the admin user (its key signs :func:`call`'s requests) and repository ``repo``."""
    gw = make_gateway(home)
    app = gw.app
    app.auth.create_user("admin")
    app.auth.attach_policy("admin", "Admin")
    app.auth.create_credentials("admin", ADMIN_KEY, ADMIN_SECRET)
    app.catalog.create_repository("repo")
    return gw


@pytest.fixture
def hosts(tmp_path: Path) -> tuple[S3Gateway, S3Gateway]:
    return admin_gateway(tmp_path), make_gateway(tmp_path)


def call(gw: S3Gateway, method: str, target: str, body: bytes = b"", *, signed: bool = True) -> Response:
    path, _, query = target.partition("?")
    headers: dict[str, str] = {"content-length": str(len(body))}
    if signed:
        headers = signed_headers(method, f"http://gw{target}", headers, hashlib.sha256(body).hexdigest())
    resp = gw.handle(Request(method, path, query, tuple((k.lower(), v) for k, v in headers.items()), BytesBody(body)))
    if not isinstance(resp.body, bytes):
        resp.body = b"".join(bytes(c) for c in resp.body)
    if resp.close is not None:
        resp.close()
    return resp


@contextmanager
def statements() -> Iterator[list[str]]:
    """Every SQL statement this process runs meanwhile: the hot path's own connections and SQLAlchemy's."""
    seen: list[str] = []
    query = FastSql.query

    def counted(self: FastSql, text: str, params: object) -> list[object]:
        seen.append(text)
        return query(self, text, params)  # type: ignore[arg-type]

    def on_execute(_conn: object, _cursor: object, text: str, *_args: object) -> None:
        seen.append(text)

    FastSql.query = counted  # type: ignore[method-assign,assignment]
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", on_execute)
    try:
        yield seen
    finally:
        FastSql.query = query  # type: ignore[method-assign]
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", on_execute)


def store_requests(gw: S3Gateway) -> int:
    adapter = gw.app.adapter
    assert isinstance(adapter, FlakyAdapter)
    return sum(adapter.calls[op] for op in OPERATIONS)


@pytest.mark.parametrize("committed", [False, True], ids=["staged", "committed"])
def test_a_hot_get_is_two_statements_and_no_object_store_request(hosts: tuple[S3Gateway, S3Gateway], committed: bool) -> None:
    writer, reader = hosts
    assert call(writer, "PUT", "/repo/main/hot.bin", b"x" * 4096).status == 200
    if committed:
        writer.app.catalog.commit("repo", "main", "hot", committer="t")
    for _ in range(2):  # the first GETs learn the branch, its tables and the object's bytes
        assert call(reader, "GET", "/repo/main/hot.bin").body == b"x" * 4096
    before = store_requests(reader)
    with statements() as seen:
        got = call(reader, "GET", "/repo/main/hot.bin")
    assert got.status == 200 and got.body == b"x" * 4096
    assert store_requests(reader) == before, "a hot GET asked the object store"
    # The repository's record (not kept on SQLite, which sends no change notice when it is deleted
    # and made again elsewhere; test_hot_get_pg.py keeps it) and the branch row read with the staged
    # entry in one statement; no bucket, key or policy lookups.
    assert len(seen) == 2, seen
    assert any("lm_repositories" in s for s in seen) and any(s.startswith("SELECT 0, commit_id") for s in seen), seen


def test_a_write_through_another_host_shows_at_once(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    call(writer, "PUT", "/repo/main/k", b"one")
    assert call(reader, "GET", "/repo/main/k").body == b"one"
    assert call(reader, "GET", "/repo/main/k").body == b"one"
    call(writer, "PUT", "/repo/main/k", b"two")
    assert call(reader, "GET", "/repo/main/k").body == b"two"
    writer.app.catalog.commit("repo", "main", "two", committer="t")  # the staging it read is gone
    assert call(reader, "GET", "/repo/main/k").body == b"two"
    call(writer, "PUT", "/repo/main/k", b"three")
    assert call(reader, "GET", "/repo/main/k").body == b"three"
    assert call(writer, "DELETE", "/repo/main/k").status == 204
    assert call(reader, "GET", "/repo/main/k").status == 404


def test_a_name_that_stops_being_a_branch_is_resolved_again(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    cat = writer.app.catalog
    cat.create_branch("repo", "rel", "main")
    call(writer, "PUT", "/repo/rel/f", b"on the branch")
    assert call(reader, "GET", "/repo/rel/f").body == b"on the branch"  # 'rel' is now known as a branch
    cat.put("repo", "main", "f", b"tagged")
    tagged = cat.commit("repo", "main", "for the tag", committer="t")
    cat.delete_branch("repo", "rel")
    cat.create_tag("repo", "rel", tagged.commit.id)
    assert call(reader, "GET", "/repo/rel/f").body == b"tagged"
    cat.delete_tag("repo", "rel")
    missing = call(reader, "GET", "/repo/rel/f")
    assert missing.status == 404 and b"no branch, tag or commit" in missing.body


def test_a_bucket_record_made_elsewhere_shows_within_the_ttl(hosts: tuple[S3Gateway, S3Gateway], monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setattr(buckets, "RECORD_TTL", 0.3)
    writer, _ = hosts
    reader = make_gateway(tmp_path)  # built now: it keeps records for 0.3 s
    assert call(reader, "GET", "/pub/main/f", signed=False).status == 404  # no such bucket (and that is kept)
    created = writer.handle(Request("PUT", "/pub", "", tuple((k.lower(), v) for k, v in signed_headers(
        "PUT", "http://gw/pub", {"x-amz-acl": "public-read", "content-length": "0"}, hashlib.sha256(b"").hexdigest()).items()),
        BytesBody()))
    assert created.status == 200
    call(writer, "PUT", "/pub/main/f", b"public")
    time.sleep(0.35)
    got = call(reader, "GET", "/pub/main/f", signed=False)
    assert got.status == 200 and got.body == b"public", "an anonymous GET of a public-read bucket made elsewhere"


def test_a_key_signs_many_requests_with_one_derived_signing_key(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    # Deriving the day's signing key is four HMACs: once per key, day and region, not per request.
    writer, reader = hosts
    call(writer, "PUT", "/repo/main/s", b"s")
    assert call(reader, "GET", "/repo/main/s").status == 200
    derived = v4.signing_key.cache_info().misses
    for _ in range(3):
        assert call(reader, "GET", "/repo/main/s").status == 200
    assert v4.signing_key.cache_info().misses == derived
