"""PostgreSQL change notices: sent when a head moves or entries are staged, never for a failed CAS."""

from __future__ import annotations

import contextlib
import itertools
import queue
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakemount.graveler.model import Branch, CommitID, StagingToken
from lakemount.metastore import notify
from lakemount.metastore.sql import SqlRefStore
from lakemount.metastore.sql_staging import SqlStaging
from tests.metastore.conftest import PgCluster

pytestmark = pytest.mark.postgres


def test_payload_round_trips_and_foreign_text_is_ignored() -> None:
    assert notify.parse(notify.payload("s1", notify.HEAD, "r", "main")) == notify.Change("s1", "head", "r", "main")
    assert notify.parse("hello") is None and notify.parse("a\tother\tr\tb") is None


def test_sqlite_has_no_listener(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert SqlRefStore(f"sqlite:///{tmp_path}/r.db").listen(lambda batch: None) is None


def _count_queries(lists: object) -> list[str]:
    """The texts of the queries ``lists`` (a ``SqlStagingLists``) runs from now on, as they run."""
    queries: list[str] = []
    real = lists._fast.query  # type: ignore[attr-defined]

    def query(text: str, params: object = ()) -> object:
        queries.append(text)
        return real(text, params)

    lists._fast.query = query  # type: ignore[attr-defined]
    return queries


_markers = itertools.count()


def _drain(writer: SqlRefStore, q: queue.Queue, timeout: float = 60.0) -> list[notify.Change]:  # type: ignore[type-arg]
    """Every change the listener feeding ``q`` heard until now, in order: a marker notice is sent after the
    writer's last change and waited for (PostgreSQL delivers notices in commit order), so nothing the writer
    sent before is still on its way, however slow the machine; no fixed window.  The notices the writer's
    stagings owe (``notify.Pacer``) are sent first."""
    writer.pacer.flush()
    marker = notify.Change("test-marker", notify.HEAD, "~marker", str(next(_markers)))
    with writer.engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_notify(:channel, :payload)"),
                     {"channel": notify.CHANNEL, "payload": notify.payload(marker.sender, marker.kind, marker.repo, marker.branch)})
    got: list[notify.Change] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            batch = q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"the marker notice never arrived within {timeout:.0f}s; heard before it: {got}") from None
        assert batch is not None, "the listener reconnected: notices may have been lost"
        for change in batch:
            if change == marker:
                return got
            if change.sender != "test-marker":
                got.append(change)


@contextlib.contextmanager
def _listening(pg_url: str, repo: str, token: str) -> Iterator[tuple[SqlRefStore, queue.Queue]]:  # type: ignore[type-arg]
    """A writer store with repository ``repo`` (branch main on staging ``token``) and a connected listener's queue."""
    from lakemount.graveler.model import Commit, Repository

    writer = SqlRefStore(pg_url)
    batches: queue.Queue = queue.Queue()  # type: ignore[type-arg]
    listener = SqlRefStore(pg_url).listen(batches.put)
    assert listener is not None
    try:
        assert listener.connected.wait(10)
        root = Commit(CommitID("c0"), (), "mr", "", "init", "t", 0.0, (), 1)
        writer.create_repository(Repository(repo, "mem://ns", "main", 0.0), Branch("main", CommitID("c0"), StagingToken(token)), root)
        yield writer, batches
    finally:
        listener.stop()


def test_head_moves_and_staging_are_pushed_to_listeners(pg_cluster: PgCluster, pg_url: str) -> None:
    with _listening(pg_url, "r", "t0") as (writer, batches):
        _drain(writer, batches)  # the creation's notice (de-duplicated with the move's if heard in one wake-up)
        branch = writer.get_branch("r", "main")
        moved = Branch("main", CommitID("c1"), StagingToken("t1"))
        assert writer.cas_branch("r", branch, moved)
        assert not writer.cas_branch("r", branch, moved)  # a failed CAS sends nothing
        SqlStaging(writer).stage("r", "main", [(b"k", b"v")])
        kinds = [(c.kind, c.repo, c.branch, c.sender) for c in _drain(writer, batches)]
        # exactly the move and the staging: the failed CAS sent nothing
        assert kinds == [("head", "r", "main", writer.sender), ("staging", "r", "main", writer.sender)], kinds


def test_a_lost_connection_reconnects_and_reports_everything(pg_cluster: PgCluster, pg_url: str) -> None:
    store = SqlRefStore(pg_url)
    batches: queue.Queue = queue.Queue()  # type: ignore[type-arg]
    listener = notify.Listener(store.engine.url, batches.put, poll=0.1, backoff=0.1).start()
    try:
        assert listener.connected.wait(10)
        admin = pg_cluster.admin()
        try:
            admin.cursor().execute(  # type: ignore[attr-defined]
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'"
            )
        finally:
            admin.close()  # type: ignore[attr-defined]
        assert batches.get(timeout=10) is None  # "anything may have changed"
        assert listener.connected.wait(10)
    finally:
        listener.stop()


def test_partial_resets_and_repository_deletion_are_pushed(pg_cluster: PgCluster, pg_url: str) -> None:
    """Dropping staged entries of a branch's live token is a staging change; deleting a repository moves every head."""
    with _listening(pg_url, "r2", "s0") as (writer, batches):
        writer.create_branch("r2", Branch("dev", CommitID("c0"), StagingToken("s1")))
        staging = SqlStaging(writer)
        staging.stage("r2", "main", [(b"a/x", b"v"), (b"ab", b"v")])
        _drain(writer, batches)  # creation and staging notices

        staging.drop_staging(StagingToken("s0"), prefix=b"a/")
        staging.drop_staging(StagingToken("gone"), key=b"a/x")  # a token no branch holds: nothing to tell
        changes = [(c.kind, c.repo, c.branch) for c in _drain(writer, batches)]
        assert changes == [("staging", "r2", "main")], changes

        writer.delete_repository("r2")
        changes = sorted((c.kind, c.repo, c.branch) for c in _drain(writer, batches))
        assert changes == [("head", "r2", "dev"), ("head", "r2", "main")], changes


def test_lsm_appends_and_partial_resets_are_pushed(pg_cluster: PgCluster, pg_url: str) -> None:
    """With staging files (staging.backend lsm) the append statement itself sends the staging notice."""
    from lakemount.block import MemoryAdapter
    from lakemount.cache.ram import RamCache
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import SqlStagingLists

    with _listening(pg_url, "r3", "s0") as (writer, batches):
        staging = LsmStaging(SqlStagingLists(writer), MemoryAdapter(), RamCache(1 << 20), lambda r: "mem://ns")
        _drain(writer, batches)
        staging.stage("r3", "main", [(b"a/x", b"v" * 17), (b"ab", b"v" * 17)])
        changes = [(c.kind, c.repo, c.branch, c.sender) for c in _drain(writer, batches)]
        assert changes == [("staging", "r3", "main", writer.sender)], changes
        staging.drop_staging(StagingToken("s0"), prefix=b"a/")
        changes = [(c.kind, c.repo, c.branch) for c in _drain(writer, batches)]
        assert changes == [("staging", "r3", "main")], changes
        assert list(staging.staged_scan(StagingToken("s0"))) == [(b"ab", b"v" * 17)]


def test_a_listener_whose_socket_is_past_descriptor_1024_still_hears(pg_cluster: PgCluster, pg_url: str) -> None:
    """A daemon holding many files gets socket numbers past 1024, where select() refuses to wait (CI's full run did)."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is below 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert max(fillers) >= 1024
        with _listening(pg_url, "rfd", "t0") as (writer, batches):
            SqlStaging(writer).stage("rfd", "main", [(b"k", b"v")])
            changes = [(c.kind, c.repo) for c in _drain(writer, batches)]
            assert ("staging", "rfd") in changes, changes
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_lsm_append_notice_carries_its_file_so_the_other_process_reads_nothing_more(
    pg_cluster: PgCluster, pg_url: str, tmp_path: Path
) -> None:
    """The append's notice names the new row and carries the small file: a process that takes it
    serves the staged write without reading the row by id nor fetching the file (issue 26), and
    keeps those bytes in RAM only (an inline file: a disk-cache file each cost every host that heard
    of a lone writer's write more CPU than the rest of the notice)."""
    from lakemount.block import MemoryAdapter
    from lakemount.cache.disk import DiskCache
    from lakemount.cache.ram import RamCache
    from lakemount.cache.tiered import TieredCache
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import SqlStagingLists

    with _listening(pg_url, "r5", "s5") as (writer, batches):
        blocks = MemoryAdapter()
        staging = LsmStaging(SqlStagingLists(writer), blocks, RamCache(1 << 20), lambda r: "mem://ns")
        other_lists = SqlStagingLists(SqlRefStore(pg_url))
        disk = DiskCache(tmp_path / "cache", 1 << 24)
        other = LsmStaging(other_lists, blocks, TieredCache(RamCache(1 << 20), disk), lambda r: "mem://ns")
        _drain(writer, batches)
        staging.stage("r5", "main", [(b"k", b"v" * 40)])
        (change,) = _drain(writer, batches)
        assert (change.kind, change.repo, change.branch) == ("staging", "r5", "main") and change.detail
        other.noticed(change.detail)
        assert other.stats.files_noticed == 1
        queries = _count_queries(other_lists)
        branch, found, value = other.branch_staged_get("r5", "main", [StagingToken("s5")], b"k")
        assert (found, value) == (True, b"v" * 40)
        assert other.stats.files_loaded == 0  # the file came with the notice, not from the block store
        assert len(queries) == 1, queries  # the list's ids; the row itself came with the notice
        assert disk.stats()["writes"] == 0


def test_a_staging_notice_too_big_to_carry_the_file_still_names_the_change(pg_cluster: PgCluster, pg_url: str) -> None:
    """A file too big for a notice goes as its row alone (PostgreSQL refuses payloads of 8,000 bytes):
    the other process fetches it when read, and gets it right."""
    from lakemount.block import MemoryAdapter
    from lakemount.cache.ram import RamCache
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import SqlStagingLists

    with _listening(pg_url, "r6", "s6") as (writer, batches):
        blocks = MemoryAdapter()
        staging = LsmStaging(SqlStagingLists(writer), blocks, RamCache(1 << 22), lambda r: "mem://ns")
        other = LsmStaging(SqlStagingLists(SqlRefStore(pg_url)), blocks, RamCache(1 << 22), lambda r: "mem://ns")
        _drain(writer, batches)
        staging.stage("r6", "main", [(b"k%04d" % i, b"%d" % i * 30) for i in range(400)])
        (change,) = _drain(writer, batches)
        assert change.detail and len(change.detail) < 8000
        other.noticed(change.detail)
        assert other.stats.files_noticed == 0
        assert other.staged_get([StagingToken("s6")], b"k0123") == (True, b"123" * 30)
        assert other.stats.files_loaded == 1


def test_an_inline_file_too_big_for_its_notice_is_read_from_its_row(pg_cluster: PgCluster, pg_url: str) -> None:
    """An inline staging file (bytes in its list row) whose bytes do not fit in the notice: the notice
    says it is inline, and the other process reads its bytes from the row by id, never the block store."""
    from lakemount.block import MemoryAdapter
    from lakemount.cache.ram import RamCache
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import SqlStagingLists

    with _listening(pg_url, "r7", "s7") as (writer, batches):
        blocks = MemoryAdapter()
        staging = LsmStaging(SqlStagingLists(writer), blocks, RamCache(1 << 22), lambda r: "mem://ns", inline_bytes=1 << 16)
        other_lists = SqlStagingLists(SqlRefStore(pg_url))
        other = LsmStaging(other_lists, blocks, RamCache(1 << 22), lambda r: "mem://ns")
        _drain(writer, batches)
        staging.stage("r7", "main", [(b"k%04d" % i, b"%d" % i * 30) for i in range(200)])
        assert list(blocks.list("mem://ns/")) == []  # inline: nothing on the block store
        (change,) = _drain(writer, batches)
        assert change.detail and '"data"' not in change.detail  # too big to ride along
        other.noticed(change.detail)
        queries = _count_queries(other_lists)
        assert other.staged_get([StagingToken("s7")], b"k0123") == (True, b"123" * 30)
        assert other.stats.files_loaded == 1
        assert len(queries) == 2 and "lm_staging_inline" in queries[1], queries  # the ids, then the bytes by id


def test_a_sql_staging_notice_names_the_directories_it_changed(pg_cluster: PgCluster, pg_url: str) -> None:
    """So a mount elsewhere drops what it caches of those directories only (tests/fuse/test_notice_dirs.py)."""
    from lakemount.catalog.kept import changed_dirs

    with _listening(pg_url, "rd", "t0") as (writer, batches):
        _drain(writer, batches)
        SqlStaging(writer).stage("rd", "main", [(b"a/b/f1", b"v"), (b"a/b/f2", b"v"), (b"top", b"v"), (b"c/", b"m")])
        SqlStaging(writer).stage("rd", "main", [(f"d{i}/f".encode(), b"v") for i in range(notify.DIRS_MOST + 1)])
        got = [c for c in _drain(writer, batches) if c.kind == "staging"]
        assert [changed_dirs(c.detail) for c in got] == [["", "a/b"], None], got  # the second: too many to name


def test_a_burst_of_stagings_sends_its_first_notice_and_one_owed_naming_every_directory(pg_cluster: PgCluster, pg_url: str) -> None:
    """Every listening backend runs a transaction per notice (docs/SCALE.md, stop 50): a branch's stagings within
    ``PACE_S`` of its last notice send none; one notice follows, once the pace allows, naming all they changed."""
    from lakemount.catalog.kept import changed_dirs

    for attempt in range(5):  # a loaded machine may take longer than the pace for the three stagings: try again
        repo = f"rp{attempt}"
        with _listening(pg_url, repo, f"t{attempt}") as (writer, batches):
            _drain(writer, batches)
            staging = SqlStaging(writer)
            t = time.monotonic()
            for d in ("a", "b", "c", "d"):
                staging.stage(repo, "main", [(f"{d}/f".encode(), b"v")])
            if time.monotonic() - t >= notify.PACE_S:
                continue
            # Stop 53: the first sends a plain notice (no lease), the second the paced one, the rest are held.
            assert (writer.pacer.inline_sent, writer.pacer.plain_sent, writer.pacer.held) == (2, 1, 2)
            got: list[notify.Change] = []
            deadline = time.monotonic() + 30
            while len(got) < 3:  # the owed notice comes by the pacer's thread, no flush
                batch = batches.get(timeout=max(0.0, deadline - time.monotonic()))
                assert batch is not None
                got += [c for c in batch if c.kind == "staging" and c.repo == repo]
            assert [changed_dirs(c.detail) for c in got[:3]] == [["a"], ["b"], ["c", "d"]], got
            end = time.monotonic() + 10  # the pacer's thread counts it once its statement returned, maybe after delivery
            while writer.pacer.owed_sent < 1 and time.monotonic() < end:
                time.sleep(0.01)
            assert writer.pacer.owed_sent == 1
            return
    raise AssertionError("three stagings never fit in the pace in five attempts")


def test_a_burst_of_lsm_appends_is_paced_as_stagings_are(pg_cluster: PgCluster, pg_url: str) -> None:
    """Stop 51: an append's notice wakes every listening backend too, so appends are paced as ``sql`` stagings
    are: the first carries its file (``learn``), the appends within ``PACE_S`` send none, and one notice follows
    naming the directories of their one-key files, or the whole branch once a wider file is among them."""
    from lakemount.block import MemoryAdapter
    from lakemount.cache.ram import RamCache
    from lakemount.catalog.kept import changed_dirs
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import SqlStagingLists

    for attempt in range(5):  # a loaded machine may take longer than the pace for the appends: try again
        repo = f"rl{attempt}"
        with _listening(pg_url, repo, f"l{attempt}") as (writer, batches):
            _drain(writer, batches)
            staging = LsmStaging(SqlStagingLists(writer), MemoryAdapter(), RamCache(1 << 20), lambda r: "mem://ns")
            t = time.monotonic()
            for d in ("a", "b", "c", "d"):
                staging.stage(repo, "main", [(f"{d}/f".encode(), b"v" * 17)])
            if time.monotonic() - t >= notify.PACE_S:
                continue
            assert (writer.pacer.inline_sent, writer.pacer.plain_sent, writer.pacer.held) == (2, 1, 2)  # plain, paced, held
            got = [c for c in _drain(writer, batches) if c.kind == "staging" and c.repo == repo]
            assert len(got) == 3, got
            for inline in got[:2]:
                assert changed_dirs(inline.detail) is None and inline.detail  # the appends' files ride along
            assert changed_dirs(got[2].detail) == ["c", "d"], got
            t = time.monotonic()
            staging.stage(repo, "main", [(b"d/f", b"v" * 17)])
            staging.stage(repo, "main", [(b"e/f", b"v" * 17), (b"f/g", b"v" * 17)])  # a file of two keys
            if time.monotonic() - t >= notify.PACE_S:
                continue
            later = [c for c in _drain(writer, batches) if c.kind == "staging" and c.repo == repo]
            assert [c.detail for c in later] == [""], later  # the owed notice: the whole branch
            assert writer.pacer.held == 4
            return
    raise AssertionError("the appends never fit in the pace in five attempts")


def test_an_lsm_append_that_failed_leaves_the_next_to_send_its_own_notice(pg_cluster: PgCluster, pg_url: str) -> None:
    """An append the pacer let send its notice that inserted nothing (no such branch) sent none: the branch's next
    append sends its own at once, not owed a pace later."""
    from lakemount.block import MemoryAdapter
    from lakemount.cache.ram import RamCache
    from lakemount.errors import BranchNotFound
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import SqlStagingLists

    with _listening(pg_url, "rf", "f0") as (writer, batches):
        _drain(writer, batches)
        staging = LsmStaging(SqlStagingLists(writer), MemoryAdapter(), RamCache(1 << 20), lambda r: "mem://ns")
        with pytest.raises(BranchNotFound):
            staging.stage("rf", "gone", [(b"a/f", b"v" * 17)])
        assert writer.pacer.inline_sent == 1 and writer.pacer.held == 0
        assert writer.pacer.inline("rf", "gone")  # nothing noted as sent for the branch: the next goes at once
        assert [c for c in _drain(writer, batches) if c.kind == "staging"] == []


def test_a_listener_redelivers_a_paced_branch_whose_sender_went_quiet(pg_cluster: PgCluster, pg_url: str) -> None:
    """A paced notice is a lease: its sender may stage unannounced for ``PACE_S`` and die before its owed notice,
    so ``LEASE_S`` after the last one the listener delivers the branch as changed as a whole."""
    store = SqlRefStore(pg_url)
    batches: queue.Queue = queue.Queue()  # type: ignore[type-arg]
    listener = notify.Listener(store.engine.url, batches.put, poll=0.1).start()

    def send(text: str) -> None:
        with store.engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_notify(:c, :p)"), {"c": notify.CHANNEL, "p": text})

    try:
        assert listener.connected.wait(10)
        send(notify.payload("gone", notify.STAGING, "r", "main", notice=notify.Notice(True, 1)) + "\tdirs\x1fa")
        sent = time.monotonic()
        first = batches.get(timeout=30)
        assert first == [notify.Change("gone", notify.STAGING, "r", "main", "dirs\x1fa")], first
        again = batches.get(timeout=30)
        assert time.monotonic() - sent >= notify.LEASE_S - 0.05
        assert again == [notify.Change("gone", notify.STAGING, "r", "main", "")], again  # the whole branch
        send(notify.payload("alive", notify.STAGING, "r", "dev", notice=notify.Notice(True, 1)) + "\tdirs\x1fa")
        assert batches.get(timeout=30) == [notify.Change("alive", notify.STAGING, "r", "dev", "dirs\x1fa")]
        time.sleep(notify.PACE_S)
        send(notify.payload("alive", notify.STAGING, "r", "dev", notice=notify.Notice(True, 2)) + "\tdirs\x1fb")  # renews the lease
        renewed = time.monotonic()
        assert batches.get(timeout=30) == [notify.Change("alive", notify.STAGING, "r", "dev", "dirs\x1fb")]
        assert batches.get(timeout=30) == [notify.Change("alive", notify.STAGING, "r", "dev", "")]
        assert time.monotonic() - renewed >= notify.LEASE_S - 0.05  # from the last notice, not the first
    finally:
        listener.stop()


def test_a_plain_notice_ends_its_senders_lease_so_sparse_stagings_cost_no_whole_branch(pg_cluster: PgCluster, pg_url: str) -> None:
    """Stop 53: stop 52's write-back batches (a staging every few seconds per host) each ended, ``LEASE_S`` later,
    in a whole-branch re-delivery on every other host, which dropped their listings (a name lookup per create
    after it).  A staging past the pace now sends a plain notice: no lease, and the sender's earlier one ends."""
    from lakemount.catalog.kept import changed_dirs

    for attempt in range(5):  # a loaded machine may take longer than the pace between the burst's two: try again
        repo = f"rs{attempt}"
        with _listening(pg_url, repo, f"s{attempt}") as (writer, batches):
            _drain(writer, batches)
            staging = SqlStaging(writer)
            for d in ("a", "b"):  # a burst: plain, then paced (a lease)
                staging.stage(repo, "main", [(f"{d}/f".encode(), b"v")])
            if (writer.pacer.inline_sent, writer.pacer.plain_sent) != (2, 1):
                continue
            time.sleep(notify.PACE_S + 0.1)
            staging.stage(repo, "main", [(b"c/f", b"v")])  # past the pace, nothing held: plain, ending the lease
            assert writer.pacer.plain_sent == 2
            time.sleep(notify.LEASE_S + 0.5)  # past when the burst's lease would have run out
            got = [c for c in _drain(writer, batches) if c.kind == "staging" and c.repo == repo]
            assert [changed_dirs(c.detail) for c in got] == [["a"], ["b"], ["c"]], got  # no whole-branch change
            return
    raise AssertionError("the burst's two stagings never fit in the pace in five attempts")
