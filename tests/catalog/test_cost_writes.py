"""What a write costs the ref store when warm: no read of the repository, branch or protection rows (issue 36).

A write through the catalog (``put``: what the API's upload does; ``stage_upload``: the
gateway's PUT and multipart completion, the API's link; ``put_entry``: the mount's close)
reuses the repository's record, its protection rules and the branch's name from an earlier
write (:mod:`lakemount.catalog.kept`), and the staging statement checks what they could get
wrong: a deleted branch, a repository created again elsewhere.  Counted by the statements
the database runs (SQLite's trace of the hot path's connection, SQLAlchemy's events), which
do not depend on the machine's load.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from lakemount.app import App
from lakemount.catalog.model import upload_entry
from lakemount.config import load
from lakemount.errors import BranchNotFound, PreconditionFailed, ProtectedBranch
from lakemount.graveler.model import Entry
from lakemount.metastore.fastsql import FastSql

R = "cost"
# The reads a write made before: the repository's record, the branch row alone, the protection rules.
REPOSITORY = "SELECT storage_namespace, default_branch, creation_date FROM lm_repositories"
BRANCH = "SELECT commit_id, staging_token, sealed_tokens FROM lm_branches"
RULES = "SELECT pattern FROM lm_protection"


def _app(home: Path, backend: str) -> App:
    return App(load(env={"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0", "LAKEMOUNT_STAGING_BACKEND": backend,
                         "LAKEMOUNT_AUDIT_ENABLED": "false"}))


@pytest.fixture(params=["sql", "lsm"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> App:
    a = _app(tmp_path / "home", request.param)
    a.catalog.create_repository(R)
    return a


@contextmanager
def statements() -> Iterator[list[str]]:
    """Every SQL statement this process runs meanwhile, on any thread: FastSql's connections (traced as they
    are made or used) and SQLAlchemy's."""
    seen: list[str] = []
    traced: set[int] = set()
    connection = FastSql.connection

    def traced_connection(self: FastSql) -> Any:
        conn = connection(self)
        if id(conn) not in traced and hasattr(conn, "set_trace_callback"):
            conn.set_trace_callback(seen.append)
            traced.add(id(conn))
        return conn

    def on_execute(_conn: object, _cursor: object, text: str, *_args: object) -> None:
        seen.append(text)

    FastSql.connection = traced_connection  # type: ignore[method-assign]
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", on_execute)
    try:
        yield seen
    finally:
        FastSql.connection = connection  # type: ignore[method-assign]
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", on_execute)


def _lookups(seen: list[str]) -> list[str]:
    return [s for s in seen if s.startswith((REPOSITORY, BRANCH, RULES))]


def _settled(app: App) -> None:
    staging = app.graveler.staging
    if hasattr(staging, "settle"):
        assert staging.settle(30), "a compaction never ended"


def test_a_warm_put_reads_no_repository_branch_or_protection_row(app: App) -> None:
    cat = app.catalog
    cat.put(R, "main", "warm", b"0")  # reads them once, and keeps them
    _settled(app)
    with statements() as seen:
        for i in range(5):
            cat.put(R, "main", f"f{i}", b"%d" % i)
    assert _lookups(seen) == [], _lookups(seen)
    assert [cat.stat(R, "main", f"f{i}").size for i in range(5)] == [1] * 5


def test_a_warm_upload_and_close_read_no_repository_branch_or_protection_row(app: App) -> None:
    """``stage_upload`` (gateway PUT, multipart completion, API link) and ``put_entry`` (the mount's close): their
    one read is the branch row with the staged entry (the same-content rule), in one statement."""
    cat = app.catalog

    def upload(path: str, body: bytes) -> Entry:
        with cat.writer(R) as w:
            w.write(body)
        return upload_entry(w.info.address, w.info.size, w.info.etag, path, "", ())

    cat.stage_upload(R, "main", "warm", upload("warm", b"w"))
    entry = upload("up", b"u")
    with statements() as seen:
        cat.stage_upload(R, "main", "up", entry)
        cat.put_entry(R, "main", "closed", upload("closed", b"c"))
    assert _lookups(seen) == [], _lookups(seen)
    assert cat.stat(R, "main", "up").etag == hashlib.md5(b"u").hexdigest()
    assert cat.stat(R, "main", "closed").size == 1


def test_a_kept_branch_name_never_lets_a_write_land_on_a_deleted_branch(app: App) -> None:
    cat = app.catalog
    cat.create_branch(R, "dev", "main")
    cat.put(R, "dev", "a", b"1")  # "dev" kept as a branch
    assert cat.kept.is_branch(R, "dev")
    cat.graveler.delete_branch(R, "dev")  # beneath the catalog, as another process would: nothing tells it
    assert cat.kept.is_branch(R, "dev")
    with pytest.raises(BranchNotFound):
        cat.put(R, "dev", "b", b"2")  # the staging statement reads the row
    assert "dev" not in {b.name for b in cat.list_branches(R)}


def test_a_kept_record_of_a_repository_made_again_elsewhere_fails_the_write(
    app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repository deleted and created again in another storage namespace, on another node (no stamp of this
    node's, no notice yet): data written under the kept record's old namespace is never staged into the new
    repository (whose tables could not find it)."""
    cat = app.catalog
    cat.put(R, "main", "a", b"1")  # the record is kept
    old = cat.kept_repository(R).storage_namespace
    monkeypatch.setattr(app.metastore.stamps, "stamp", lambda repo, branch, **_kw: None)  # another node's change
    cat.graveler.delete_repository(R)  # beneath the catalog: the kept record is not dropped by it
    cat.graveler.create_repository(R, f"local://{tmp_path}/elsewhere")
    assert cat.kept_repository(R).storage_namespace == old
    with pytest.raises(PreconditionFailed):
        cat.put(R, "main", "b", b"2")
    assert cat.get_optional(R, "main", "b") is None
    cat.put(R, "main", "b", b"2")  # the failed write dropped the record: the next one reads the new one
    assert cat.kept_repository(R).storage_namespace == f"local://{tmp_path}/elsewhere"


def test_a_rule_added_by_another_process_of_the_node_applies_to_the_next_write(app: App, tmp_path: Path) -> None:
    """Another process with the same home (a gateway's other worker, the mount): the change stamps the
    repository's slot of the node's stamps, so the rules kept here are read again at the next write."""
    cat = app.catalog
    cat.put(R, "main", "a", b"1")
    other = _app(tmp_path / "home", app.config.staging.backend)
    other.catalog.protection.add(R, "main")
    with pytest.raises(ProtectedBranch):
        cat.put(R, "main", "b", b"2")
    assert cat.get_optional(R, "main", "b") is None


@pytest.mark.postgres
def test_a_rule_added_on_another_node_applies_once_its_notice_arrives(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    """Two nodes (two homes) on PostgreSQL: the writer keeps its rules for a minute, but it listens, so the
    rule the other node adds (kind ``rules`` notice) refuses its writes as soon as the notice arrives."""

    def node(name: str) -> App:
        return App(load(env={"LAKEMOUNT_HOME": str(tmp_path / name), "LAKEMOUNT_METADATA_DB_URL": pg_url,
                             "LAKEMOUNT_BLOCKSTORE_LOCAL_PATH": str(tmp_path / "blocks"), "LAKEMOUNT_AUDIT_ENABLED": "false"}))

    writer, other = node("a"), node("b")
    cat = writer.catalog
    cat.create_repository(R)
    cat.protection.keep_for(60.0)
    cat.kept.watch()
    try:
        deadline = time.monotonic() + 10
        while not cat.kept.live:
            assert time.monotonic() < deadline, "the writer's listener never connected"
            time.sleep(0.01)
        cat.put(R, "main", "a", b"1")  # keeps the rules (none) while listening
        reads = cat.kept.reads
        cat.put(R, "main", "b", b"2")
        assert cat.kept.reads == reads  # kept: nothing read again
        other.catalog.protection.add(R, "main")
        deadline = time.monotonic() + 10
        while True:
            try:
                cat.put(R, "main", "c", b"3")
            except ProtectedBranch:
                break
            assert time.monotonic() < deadline, "the rule's notice never reached the writer"
            time.sleep(0.01)
    finally:
        cat.kept.stop()
        writer.release_connections()
        other.release_connections()


def test_a_mounts_listener_drops_kept_rules_and_keeps_rules_notices_to_itself(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """``watch_branches`` (the mount's listener) feeds what writes keep: a ``rules`` notice from another node
    makes the next write read the rules again, and is not passed to the mount's callback (which knows heads
    and staging only); while it is connected, rules are kept past ``max_age``."""
    from lakemount.metastore.notify import RULES as RULES_KIND
    from lakemount.metastore.notify import STAGING, Change

    cat = app.catalog
    delivered: list[object] = []
    listened: list[Any] = []

    class Listener:
        connected = threading.Event()

    monkeypatch.setattr(app.metastore, "listen", lambda callback: listened.append(callback) or Listener())
    Listener.connected.set()
    cat.watch_branches(delivered.append)
    cat.protection.keep_for(0.05)
    cat.put(R, "main", "a", b"1")  # reads the rules while "connected": kept past max_age
    reads = cat.kept.reads
    time.sleep(0.1)  # past max_age: only the listener's being connected keeps them
    cat.put(R, "main", "b", b"2")
    assert cat.kept.reads == reads
    listened[0]([Change("elsewhere", STAGING, R, "main"), Change("elsewhere", RULES_KIND, R, "")])
    assert delivered == [[Change("elsewhere", STAGING, R, "main")]]
    cat.put(R, "main", "c", b"3")
    assert cat.kept.reads > reads  # the rules notice dropped what was kept of the repository: read again
