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
    release = threading.Event()
    calls: list[int] = []
    write = staging._write

    def held(*args: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            assert release.wait(10), "the held transaction was never released"
        write(*args)

    monkeypatch.setattr(staging, "_write", held)
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
