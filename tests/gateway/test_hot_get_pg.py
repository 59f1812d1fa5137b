"""Hot GETs on PostgreSQL: the repository's record is kept while change notices can drop it.

Two in-process gateways with their own homes over one PostgreSQL database and
one block store stand for two gateway hosts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.gateway.handler import S3Gateway
from lakemount.gateway.settings import from_config
from tests.metastore.conftest import pg_cluster, pg_url  # noqa: F401  (fixtures)

from .server_fixture import ADMIN_KEY, ADMIN_SECRET
from .test_hot_get import call, statements

pytestmark = pytest.mark.postgres


def _gateway(home: Path, url: str, blocks: Path) -> S3Gateway:
    env = {"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_METADATA_DB_URL": url, "LAKEMOUNT_BLOCKSTORE_LOCAL_PATH": str(blocks),
           "LAKEMOUNT_AUTH_ENCRYPT_SECRET_KEY": "one key for both hosts"}
    app = App(load(None, env=env))
    return S3Gateway(app, from_config(app.config))


def _until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


@pytest.fixture
def hosts(tmp_path: Path, pg_url: str) -> Iterator[tuple[S3Gateway, S3Gateway]]:  # noqa: F811
    writer = _gateway(tmp_path / "a", pg_url, tmp_path / "blocks")
    writer.app.auth.create_user("admin")
    writer.app.auth.attach_policy("admin", "Admin")
    writer.app.auth.create_credentials("admin", ADMIN_KEY, ADMIN_SECRET)
    writer.app.catalog.create_repository("repo")
    reader = _gateway(tmp_path / "b", pg_url, tmp_path / "blocks")
    try:
        _until(lambda: reader.services.buckets.repositories.live)
        yield writer, reader
    finally:
        for gw in (writer, reader):
            gw.services.buckets.repositories.stop()
            gw.app.release_connections()


def test_with_notices_a_hot_get_is_one_statement(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    assert call(writer, "PUT", "/repo/main/hot.bin", b"x" * 4096).status == 200
    for _ in range(2):
        assert call(reader, "GET", "/repo/main/hot.bin").body == b"x" * 4096
    with statements() as seen:
        got = call(reader, "GET", "/repo/main/hot.bin")
        head = call(reader, "HEAD", "/repo/main/hot.bin")
    assert got.status == 200 and got.body == b"x" * 4096 and head.status == 200
    # The branch row with the staged entry, per request; the repository's record is kept.
    assert len(seen) == 2 and not any("lm_repositories" in s for s in seen), seen


def test_a_write_still_reads_the_repository_record(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, _ = hosts
    assert call(writer, "GET", "/repo/main/nothing").status == 404  # keeps the record
    with statements() as seen:
        assert call(writer, "PUT", "/repo/main/w", b"w").status == 200
    assert any("lm_repositories" in s for s in seen), seen


def test_a_repository_deleted_and_made_again_elsewhere_is_read_through_its_new_record(
    hosts: tuple[S3Gateway, S3Gateway], tmp_path: Path
) -> None:
    writer, reader = hosts
    kept = reader.services.buckets.repositories
    call(writer, "PUT", "/repo/main/k", b"old")
    assert call(reader, "GET", "/repo/main/k").body == b"old"
    old_ns = writer.app.catalog.repository("repo").storage_namespace
    assert kept._records["repo"].storage_namespace == old_ns  # the reader keeps the old record
    writer.app.catalog.delete_repository("repo")
    new_ns = f"local://{tmp_path / 'blocks' / 'elsewhere'}"
    writer.app.catalog.create_repository("repo", storage_namespace=new_ns)
    call(writer, "PUT", "/repo/main/k", b"new")
    # The notices of the delete and the create drop the kept record: the next GET reads the new one.
    _until(lambda: "repo" not in kept._records)
    assert call(reader, "GET", "/repo/main/k").body == b"new"
    assert kept._records["repo"].storage_namespace == new_ns


def test_nothing_is_kept_while_the_listener_is_disconnected(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    kept = reader.services.buckets.repositories
    call(writer, "PUT", "/repo/main/k", b"k")
    assert call(reader, "GET", "/repo/main/k").status == 200
    assert "repo" in kept._records
    kept._listener.connected.clear()  # as the listener does when its connection drops
    with statements() as seen:
        assert call(reader, "GET", "/repo/main/k").status == 200
    assert any("lm_repositories" in s for s in seen), seen
    assert not kept._records


def test_a_bucket_deleted_through_this_gateway_is_gone_at_once(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, _ = hosts
    kept = writer.services.buckets.repositories
    assert call(writer, "PUT", "/gone").status == 200
    assert call(writer, "GET", "/gone/main/k").status == 404  # NoSuchKey; the record is kept
    assert "gone" in kept._records
    kept._listener.callback = lambda batch: None  # its own notice has not arrived yet
    assert call(writer, "DELETE", "/gone").status == 204
    missing = call(writer, "GET", "/gone/main/k")
    assert missing.status == 404 and b"NoSuchBucket" in missing.body, missing.body
