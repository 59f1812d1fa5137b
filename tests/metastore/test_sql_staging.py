"""``sql`` staging's group commit: writes of one branch in flight together share one transaction."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.errors import PreconditionFailed
from lakemount.graveler.model import Branch, Commit, CommitID, MetaRangeID, Repository, StagingToken
from lakemount.metastore.sql import SqlRefStore
from lakemount.metastore.sql_staging import SqlStaging

WRITERS = 8


@pytest.fixture
def staging(tmp_path: Path) -> SqlStaging:
    refs = SqlRefStore(f"sqlite:///{tmp_path}/refs.db")
    commit = Commit(CommitID("c" * 64), (), MetaRangeID(""), "", "first", "t", 0.0, (), 1)
    refs.create_repository(Repository("r", "local:///ns", "main", 0.0), Branch("main", commit.id, StagingToken("tok")), commit)
    return SqlStaging(refs)


def _until(what: Any, message: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, message
        time.sleep(0.005)


def test_writes_arriving_during_a_transaction_go_together_in_the_next(staging: SqlStaging, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first write's transaction is held in flight; eight more arrive meanwhile: they are one more
    transaction, not eight, and each returns only once its rows are there."""
    release = threading.Event()
    transactions: list[list[bytes]] = []
    write = staging._write

    def held(repo: str, branch: str, items: dict[bytes, bytes | None], *args: Any) -> None:
        transactions.append(sorted(items))
        if len(transactions) == 1:
            assert release.wait(10), "the held transaction was never released"
        write(repo, branch, items, *args)

    monkeypatch.setattr(staging, "_write", held)
    errors: list[BaseException] = []

    def stage(key: bytes) -> None:
        try:
            staging.stage("r", "main", [(key, b"v" + key)])
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    first = threading.Thread(target=stage, args=(b"first",))
    first.start()
    _until(lambda: len(transactions) == 1, "the first write never began its transaction")
    others = [threading.Thread(target=stage, args=(b"k%d" % i,)) for i in range(WRITERS)]
    for t in others:
        t.start()
    lane = staging._lanes[("r", "main")]
    _until(lambda: lane.pending is not None and len(lane.pending.items) == WRITERS, "the writers never gathered")
    assert all(t.is_alive() for t in others), "a writer returned before its transaction"
    release.set()
    for t in (first, *others):
        t.join(10)
    assert not errors, errors
    assert transactions == [[b"first"], sorted(b"k%d" % i for i in range(WRITERS))]
    assert staging.staged_get([StagingToken("tok")], b"k3") == (True, b"vk3")


def test_a_failed_group_transaction_fails_every_write_in_it(staging: SqlStaging, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of a group whose transaction fails is acknowledged: each of its writers gets the error (here one
    writer's data went to another storage namespace, which the transaction refuses)."""
    release, calls = _hold_first_write(staging, monkeypatch)
    results: dict[bytes, BaseException | None] = {}

    def stage(key: bytes, namespace: str = "") -> None:
        try:
            staging.stage("r", "main", [(key, b"v")], namespace=namespace)
            results[key] = None
        except BaseException as exc:  # looked at below
            results[key] = exc

    first = threading.Thread(target=stage, args=(b"first",))
    first.start()
    _until(lambda: len(calls) == 1, "the first write never began its transaction")
    group = [threading.Thread(target=stage, args=(b"ok",)), threading.Thread(target=stage, args=(b"stale", "local:///old"))]
    for t in group:
        t.start()
    lane = staging._lanes[("r", "main")]
    _until(lambda: lane.pending is not None and len(lane.pending.items) == 2, "the writers never gathered")
    release.set()
    for t in (first, *group):
        t.join(10)
    assert results[b"first"] is None
    assert isinstance(results[b"ok"], PreconditionFailed) and isinstance(results[b"stale"], PreconditionFailed), results
    assert staging.staged_get([StagingToken("tok")], b"ok") == (False, None)
    assert calls == [1, 1]


def _counted(staging: SqlStaging, monkeypatch: pytest.MonkeyPatch) -> list[list[bytes]]:
    """The keys of each transaction ``staging`` runs, in order."""
    transactions: list[list[bytes]] = []
    write = staging._write

    def counted(repo: str, branch: str, items: dict[bytes, bytes | None], *args: Any) -> None:
        transactions.append(sorted(items))
        write(repo, branch, items, *args)

    monkeypatch.setattr(staging, "_write", counted)
    return transactions


def test_a_lone_writer_never_waits_to_gather(staging: SqlStaging, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes one after another (from two threads in turn, as a mount's worker threads may be) never wait for
    company: no gathering at all, one transaction each, however long the window would be."""
    monkeypatch.setattr("lakemount.graveler.staging.crowd.GATHER_S", 30.0)
    transactions = _counted(staging, monkeypatch)
    for i in range(20):
        t = threading.Thread(target=staging.stage, args=("r", "main", [(b"k%d" % i, b"v")]))
        t.start()
        t.join(10)
        assert not t.is_alive(), f"write {i} waited (the window is 30 s)"
    assert staging.gathers == 0
    assert transactions == [[b"k%d" % i] for i in range(20)]


def _hold_first_write(staging: SqlStaging, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[int]]:
    """Hold ``staging``'s first transaction until the returned event is set; the list counts transactions begun."""
    release = threading.Event()
    calls: list[int] = []
    write = staging._write

    def held(*args: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            assert release.wait(10), "the held transaction was never released"
        write(*args)

    monkeypatch.setattr(staging, "_write", held)
    return release, calls


def _crowd_of(staging: SqlStaging, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Make the lane's writers ``n`` at once: the first transaction held while ``n - 1`` more gather behind it."""
    write = staging._write
    release, calls = _hold_first_write(staging, monkeypatch)
    first = threading.Thread(target=staging.stage, args=("r", "main", [(b"c0", b"v")]))
    first.start()
    _until(lambda: len(calls) == 1, "the first write never began its transaction")
    others = [threading.Thread(target=staging.stage, args=("r", "main", [(b"c%d" % i, b"v")])) for i in range(1, n)]
    for t in others:
        t.start()
    lane = staging._lanes[("r", "main")]
    _until(lambda: lane.pending is not None and lane.pending.writes == n - 1, "the writers never gathered")
    monkeypatch.setattr("lakemount.graveler.staging.crowd.GATHER_S", 0.0)  # the crowd's own group goes at once
    release.set()
    for t in (first, *others):
        t.join(10)
    assert not any(t.is_alive() for t in (first, *others)), "a writer never returned"
    monkeypatch.setattr(staging, "_write", write)
    assert lane.crowd.expected(time.monotonic()) == n


def test_writes_in_flight_beside_a_leader_go_in_its_transaction(staging: SqlStaging, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the branch had eight writes inside at once, a write arriving with no transaction in flight waits for
    that many (each arriving on its own, none during a transaction): eight writes, one transaction."""
    _crowd_of(staging, monkeypatch, WRITERS)
    gathers = staging.gathers
    monkeypatch.setattr("lakemount.graveler.staging.crowd.GATHER_S", 30.0)
    transactions = _counted(staging, monkeypatch)
    lane = staging._lanes[("r", "main")]
    writers = [threading.Thread(target=staging.stage, args=("r", "main", [(b"k%d" % i, b"v%d" % i)])) for i in range(WRITERS)]
    writers[0].start()
    _until(lambda: lane.gathering, "the first write never waited for the others")
    for i, t in enumerate(writers[1:], start=2):
        t.start()
        _until(lambda i=i, t=t: lane.pending is not None and lane.pending.writes >= i or not t.is_alive(), f"write {i} never joined")
    for t in writers:
        t.join(10)
    assert not any(t.is_alive() for t in writers), "a writer never returned"
    assert transactions == [sorted(b"k%d" % i for i in range(WRITERS))]
    assert staging.gathers == gathers + 1
    assert staging.staged_get([StagingToken("tok")], b"k5") == (True, b"v5")


def test_a_leader_waits_for_company_at_most_the_window_and_not_once_the_crowd_is_gone(
    staging: SqlStaging, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write whose expected company never comes goes alone after ``GATHER_S``; once the crowd is older than
    the horizon, a write goes at once."""
    _crowd_of(staging, monkeypatch, WRITERS)
    gathers = staging.gathers
    monkeypatch.setattr("lakemount.graveler.staging.crowd.GATHER_S", 0.2)
    began = time.monotonic()
    staging.stage("r", "main", [(b"alone", b"v")])
    assert 0.2 <= time.monotonic() - began < 10
    assert staging.gathers == gathers + 1
    monkeypatch.setattr("lakemount.graveler.staging.crowd.HORIZON_S", 0.05)
    lane = staging._lanes[("r", "main")]
    _until(lambda: lane.crowd.expected(time.monotonic()) == 0, "the crowd was never forgotten")
    monkeypatch.setattr("lakemount.graveler.staging.crowd.GATHER_S", 30.0)
    staging.stage("r", "main", [(b"later", b"v")])
    assert staging.gathers == gathers + 1


def test_a_write_that_refuses_to_wait_meets_the_write_lock_or_a_transaction_in_flight_and_writes_nothing(
    staging: SqlStaging, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop 58: inside ``waiting.refusing()`` (the mount's request loop) a staging never waits.  Another connection
    holds SQLite's write lock: ``WouldWait`` at once, not after the 60 s busy timeout, and nothing is written; the
    lock gone, the same write goes through.  A transaction of the branch in flight (a thread's): ``WouldWait`` too,
    where a write that may wait joins the next transaction."""
    import sqlite3

    from lakemount import waiting
    from lakemount.errors import WouldWait

    other = sqlite3.connect(f"{tmp_path}/refs.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the write lock, as a commit of another process holds it
    t0 = time.monotonic()
    with waiting.refusing(), pytest.raises(WouldWait):
        staging.stage("r", "main", [(b"k", b"v")])
    assert time.monotonic() - t0 < 1.0
    other.execute("ROLLBACK")
    assert staging.staged_get([StagingToken("tok")], b"k") == (False, None)  # nothing of it written
    with waiting.refusing():
        staging.stage("r", "main", [(b"k", b"v")])
    assert staging.staged_get([StagingToken("tok")], b"k") == (True, b"v")

    release, _transactions = _hold_first_write(staging, monkeypatch)
    first = threading.Thread(target=staging.stage, args=("r", "main", [(b"first", b"1")]))
    first.start()
    try:
        _until(lambda: _transactions, "the first write never began its transaction")
        with waiting.refusing(), pytest.raises(WouldWait):
            staging.stage("r", "main", [(b"second", b"2")])
    finally:
        release.set()
        first.join(10)
    assert staging.staged_get([StagingToken("tok")], b"second") == (False, None)
    assert staging.staged_get([StagingToken("tok")], b"first") == (True, b"1")
