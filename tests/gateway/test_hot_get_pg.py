"""Hot GETs on PostgreSQL: what a GET read is kept while change notices can drop it.

In-process gateways with their own homes over one PostgreSQL database and one
block store stand for gateway hosts (nodes); two with one home stand for two
processes of one node (a host's gateway workers), which share its stamps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.gateway.handler import S3Gateway
from lakemount.gateway.kept import KeptReads
from lakemount.gateway.settings import from_config
from lakemount.metastore.notify import HEAD, STAGING, Change

from .server_fixture import ADMIN_KEY, ADMIN_SECRET
from .test_hot_get import call, statements

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
LISTENER = "lakemount-listen"  # the thread of a change-notice listener (lakemount/metastore/notify.py)


def _env(home: Path, url: str, blocks: Path) -> dict[str, str]:
    return {"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_METADATA_DB_URL": url, "LAKEMOUNT_BLOCKSTORE_LOCAL_PATH": str(blocks),
            "LAKEMOUNT_AUTH_ENCRYPT_SECRET_KEY": "one key for both hosts"}


def _gateway(home: Path, url: str, blocks: Path) -> S3Gateway:
    app = App(load(None, env=_env(home, url, blocks)))
    gateway = S3Gateway(app, from_config(app.config))
    gateway.start()
    return gateway


def _listeners() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == LISTENER]


def test_the_constructor_starts_no_listener_and_start_does(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    """``S3Gateway.__init__`` started the notices' listener thread (STYLE: no thread from a constructor); now
    ``start`` does, as the server calls it, once however often it is called."""
    before = _listeners()
    app = App(load(None, env=_env(tmp_path / "a", pg_url, tmp_path / "blocks")))
    gateway = S3Gateway(app, from_config(app.config))
    try:
        assert _listeners() == before and not gateway.services.kept.live, "the constructor started the listener"
        gateway.start()
        gateway.start()
        _until(lambda: gateway.services.kept.live)
        started = [t for t in _listeners() if t not in before]
        assert len(started) == 1 and started[0].is_alive(), f"start started {len(started)} listeners"
    finally:
        gateway.services.kept.stop()
        app.release_connections()
    started[0].join(timeout=30)
    assert not started[0].is_alive(), "stop left the listener running"


def _until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def _deaf(kept: KeptReads) -> list[object]:
    """Hold back the notices ``kept`` receives from now on (as if not arrived yet); returns them as they come."""
    held: list[object] = []
    kept._listener.callback = held.append
    return held


@pytest.fixture
def hosts(tmp_path: Path, pg_url: str) -> Iterator[tuple[S3Gateway, S3Gateway]]:  # noqa: F811
    writer = _gateway(tmp_path / "a", pg_url, tmp_path / "blocks")
    writer.app.auth.create_user("admin")
    writer.app.auth.attach_policy("admin", "Admin")
    writer.app.auth.create_credentials("admin", ADMIN_KEY, ADMIN_SECRET)
    writer.app.catalog.create_repository("repo")
    reader = _gateway(tmp_path / "b", pg_url, tmp_path / "blocks")
    made = [writer, reader]
    try:
        _until(lambda: reader.services.kept.live and writer.services.kept.live)
        yield writer, reader
    finally:
        for gw in made:
            gw.services.kept.stop()
            gw.app.release_connections()


def test_with_notices_a_hot_get_asks_the_database_nothing(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    assert call(writer, "PUT", "/repo/main/hot.bin", b"x" * 4096).status == 200
    assert call(reader, "GET", "/repo/main/hot.bin").body == b"x" * 4096  # reads, and keeps what it read
    with statements() as seen:
        got = call(reader, "GET", "/repo/main/hot.bin")
        head = call(reader, "HEAD", "/repo/main/hot.bin")
    assert got.status == 200 and got.body == b"x" * 4096 and head.status == 200
    # Neither the repository's record nor the branch row with the staged entry: both are kept.
    assert seen == [], seen


def test_a_change_on_another_node_shows_when_its_notice_arrives(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    kept = reader.services.kept
    call(writer, "PUT", "/repo/main/k", b"one")
    assert call(reader, "GET", "/repo/main/k").body == b"one"
    held = _deaf(kept)
    call(writer, "PUT", "/repo/main/k", b"two")
    _until(lambda: bool(held))  # its notice reached the reader's listener, and is held back there
    assert call(reader, "GET", "/repo/main/k").body == b"one", "the reader keeps what it read until the notice"
    kept._changed(held.pop())  # the notice is delivered
    assert call(reader, "GET", "/repo/main/k").body == b"two"
    kept._listener.callback = kept._changed
    writer.app.catalog.commit("repo", "main", "two", committer="t")  # moves the head: kept lookups go
    _until(lambda: ("repo", "main") not in kept._lookups)
    assert call(reader, "GET", "/repo/main/k").body == b"two"
    assert call(writer, "DELETE", "/repo/main/k").status == 204
    _until(lambda: call(reader, "GET", "/repo/main/k").status == 404)


def test_a_change_on_this_node_shows_at_once(hosts: tuple[S3Gateway, S3Gateway], tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    # Another process of the reader's node (one home): its changes stamp the node's file, which
    # the reader checks before using what it kept; its notice is never needed.
    writer, reader = hosts
    call(writer, "PUT", "/repo/main/k", b"one")
    assert call(reader, "GET", "/repo/main/k").body == b"one"
    with statements() as seen:
        assert call(reader, "GET", "/repo/main/k").body == b"one"
    assert seen == [], "the reader keeps what it read"
    held = _deaf(reader.services.kept)
    code = ("import sys\nfrom lakemount.app import App\nfrom lakemount.config import load\n"
            "App(load(None)).catalog.put('repo', 'main', 'k', sys.argv[1].encode())\n")
    env = {**os.environ, **_env(tmp_path / "b", pg_url, tmp_path / "blocks"), "PYTHONPATH": str(ROOT)}
    for content in ("two", "three"):
        subprocess.run([sys.executable, "-c", code, content], env=env, check=True, timeout=120, capture_output=True)
        assert call(reader, "GET", "/repo/main/k").body == content.encode()
    # And a process of the same node in this one (a second worker): the same file.
    sibling = _gateway(tmp_path / "b", pg_url, tmp_path / "blocks")
    try:
        assert call(sibling, "DELETE", "/repo/main/k").status == 204
        assert call(reader, "GET", "/repo/main/k").status == 404
    finally:
        sibling.services.kept.stop()
        sibling.app.release_connections()
    assert held, "the notices were sent and held back: the stamps, not they, showed the changes"


def test_a_gateways_own_write_shows_at_once(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    _, reader = hosts
    _deaf(reader.services.kept)
    for content in (b"one", b"two"):
        assert call(reader, "PUT", "/repo/main/own", content).status == 200
        assert call(reader, "GET", "/repo/main/own").body == content
        assert call(reader, "GET", "/repo/main/own").body == content  # kept now
    assert ("repo", "main") in reader.services.kept._lookups
    assert call(reader, "DELETE", "/repo/main/own").status == 204
    assert call(reader, "GET", "/repo/main/own").status == 404


def test_a_listing_drops_what_gets_of_its_branch_kept(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    # A GET after a listing never shows an object older than the listing did.
    writer, reader = hosts
    kept = reader.services.kept
    call(writer, "PUT", "/repo/main/k", b"one")
    assert call(reader, "GET", "/repo/main/k").body == b"one"
    assert "k" in kept._lookups[("repo", "main")]
    _deaf(kept)
    call(writer, "PUT", "/repo/main/k", b"three")
    listed = call(reader, "GET", "/repo?list-type=2&prefix=main/")
    assert b"<Size>5</Size>" in listed.body, listed.body
    assert ("repo", "main") not in kept._lookups
    assert call(reader, "GET", "/repo/main/k").body == b"three"


def test_a_read_begun_before_a_notice_is_not_kept(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    kept = reader.services.kept
    call(writer, "PUT", "/repo/main/k", b"one")
    lookup = reader.app.catalog.lookup

    def racing(*args: object) -> object:
        found = lookup(*args)  # type: ignore[arg-type]
        kept._changed([Change("elsewhere", STAGING, "repo", "main")])  # arrives while this read returns
        return found

    reader.app.catalog.lookup = racing  # type: ignore[method-assign]
    try:
        assert call(reader, "GET", "/repo/main/k").body == b"one"
    finally:
        del reader.app.catalog.lookup
    assert ("repo", "main") not in kept._lookups
    assert call(reader, "GET", "/repo/main/k").body == b"one"
    assert "k" in kept._lookups[("repo", "main")]


def test_only_objects_found_on_a_branch_named_as_such_are_kept(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    kept = reader.services.kept
    cat = writer.app.catalog
    call(writer, "PUT", "/repo/main/k", b"one")
    commit = cat.commit("repo", "main", "one", committer="t").commit.id
    cat.create_tag("repo", "v1", commit)
    for target in ("/repo/v1/k", f"/repo/{commit}/k", "/repo/main~0/k", "/repo/main/missing"):
        call(reader, "GET", target)
        with statements() as seen:
            call(reader, "GET", target)
        assert seen, f"{target}: read each time (a tag sends no notice; a missing key may appear at once)"
    assert not kept._lookups
    kept._changed([Change("elsewhere", HEAD, "repo", "other")])  # another branch's notice keeps main's
    assert call(reader, "GET", "/repo/main/k").body == b"one"
    kept._changed([Change("elsewhere", HEAD, "repo", "other")])
    assert "k" in kept._lookups[("repo", "main")]


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
    kept = reader.services.kept
    call(writer, "PUT", "/repo/main/k", b"old")
    assert call(reader, "GET", "/repo/main/k").body == b"old"
    old_ns = writer.app.catalog.repository("repo").storage_namespace
    assert kept._repos["repo"].storage_namespace == old_ns  # the reader keeps the old record
    writer.app.catalog.delete_repository("repo")
    new_ns = f"local://{tmp_path / 'blocks' / 'elsewhere'}"
    writer.app.catalog.create_repository("repo", storage_namespace=new_ns)
    call(writer, "PUT", "/repo/main/k", b"new")
    # The notices of the delete and the create drop the kept record: the next GET reads the new one.
    _until(lambda: "repo" not in kept._repos)
    assert call(reader, "GET", "/repo/main/k").body == b"new"
    assert kept._repos["repo"].storage_namespace == new_ns


def test_nothing_is_kept_while_the_listener_is_disconnected(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, reader = hosts
    kept = reader.services.kept
    call(writer, "PUT", "/repo/main/k", b"k")
    assert call(reader, "GET", "/repo/main/k").status == 200
    assert "repo" in kept._repos and ("repo", "main") in kept._lookups
    kept._listener.connected.clear()  # as the listener does when its connection drops
    with statements() as seen:
        assert call(reader, "GET", "/repo/main/k").status == 200
    assert any("lm_repositories" in s for s in seen) and any(s.startswith("SELECT 0, commit_id") for s in seen), seen
    assert not kept._repos and not kept._lookups


def test_a_bucket_deleted_through_this_gateway_is_gone_at_once(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    writer, _ = hosts
    kept = writer.services.kept
    assert call(writer, "PUT", "/gone").status == 200
    assert call(writer, "GET", "/gone/main/k").status == 404  # NoSuchKey; the record is kept
    assert "gone" in kept._repos
    kept._listener.callback = lambda batch: None  # its own notice has not arrived yet
    assert call(writer, "DELETE", "/gone").status == 204
    missing = call(writer, "GET", "/gone/main/k")
    assert missing.status == 404 and b"NoSuchBucket" in missing.body, missing.body


def test_a_get_answered_from_what_is_kept_keeps_the_host_listening(hosts: tuple[S3Gateway, S3Gateway]) -> None:
    """Stop 56: a host listens only while something on it uses what notices keep true (``Listener.use``); a GET
    answered from the gateway's kept records is such a use."""
    writer, reader = hosts
    listener = reader.services.kept._listener
    call(writer, "PUT", "/repo/main/k", b"k")
    assert call(reader, "GET", "/repo/main/k").status == 200
    before = listener._used
    time.sleep(0.01)
    with statements() as seen:
        assert call(reader, "GET", "/repo/main/k").status == 200
    assert not any("lm_repositories" in s for s in seen), seen  # the record came from what is kept
    assert listener._used > before
