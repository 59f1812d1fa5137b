"""Node stamps: every branch change a node commits changes its stamp at once, in a file its processes share."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lakemount.graveler.model import Branch, Commit, CommitID, Repository, StagingToken
from lakemount.metastore.sql import SqlRefStore
from lakemount.metastore.sql_staging import SqlStaging
from lakemount.metastore.stamps import NodeStamps
from tests.metastore.conftest import PgCluster

ROOT = Path(__file__).resolve().parents[2]


def test_processes_sharing_a_file_see_each_others_stamps(tmp_path: Path) -> None:
    path = str(tmp_path / "node-stamps")
    mine, theirs = NodeStamps(path), NodeStamps(path)
    before = mine.of("r", "main")
    theirs.stamp("r", "main")
    assert mine.of("r", "main") != before
    # Another process: the slot of a branch is the same there (no salted hash), and so is the file.
    code = ("import sys\nfrom lakemount.metastore.stamps import NodeStamps\n"
            "s = NodeStamps(sys.argv[1]); print(s.slot('r', 'main')); s.stamp('r', 'main')\n")
    seen = mine.of("r", "main")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True, timeout=60,
                         env={"PYTHONPATH": str(ROOT)})
    assert int(out.stdout) == NodeStamps.slot("r", "main")
    assert mine.of("r", "main") != seen
    assert (tmp_path / "node-stamps").stat().st_mode & 0o777 == 0o600


def test_without_a_file_the_stamps_are_this_processes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    alone = NodeStamps(None)
    before = alone.of("r", "b")
    alone.stamp("r", "b")
    assert alone.of("r", "b") != before
    # A home the stamps cannot be written in does not fail a write that already committed.
    with caplog.at_level(logging.WARNING):
        lost = NodeStamps(str(tmp_path / "missing" / "node-stamps"))
        was = lost.of("r", "b")
        lost.stamp("r", "b")
    assert lost.of("r", "b") != was
    assert "this process's changes only" in caplog.text and str(tmp_path) not in caplog.text


def test_sqlite_stamps_every_staging_and_a_thread_records_its_own(tmp_path: Path) -> None:
    # A mount keeps a listing past head_ttl while the stamps show only its own changes (fuse/ownchanges.py):
    # on SQLite too, every staging stamps its branch, and a recording thread learns (slot, old, new).
    stamps = NodeStamps(str(tmp_path / "node-stamps"))
    store = SqlRefStore(f"sqlite:///{tmp_path}/r.db", stamps=stamps)
    root = Commit(CommitID("c0"), (), "mr", "", "init", "t", 0.0, (), 1)
    store.create_repository(Repository("r", "mem://ns", "main", 0.0), Branch("main", CommitID("c0"), StagingToken("t0")), root)
    staging = SqlStaging(store)
    slot, before = store.slot_stamp("r", "main")
    with store.recording() as seen:
        staging.stage("r", "main", [(b"k", b"v")])
    slot_now, after = store.slot_stamp("r", "main")
    assert (slot_now, after) != (slot, before)
    assert seen == [(slot, before, after)]
    # Outside a recording, and a partial reset (the SQLite fast path), stamp without recording anything.
    staging.stage("r", "main", [(b"k2", b"v")])
    assert store.slot_stamp("r", "main")[1] != after
    was = store.slot_stamp("r", "main")[1]
    staging.drop_staging(StagingToken("t0"), key=b"k2")
    assert store.slot_stamp("r", "main")[1] != was


def test_a_group_commit_of_several_writers_is_recorded_by_none(tmp_path: Path) -> None:
    stamps = NodeStamps(str(tmp_path / "node-stamps"))
    store = SqlRefStore(f"sqlite:///{tmp_path}/r.db", stamps=stamps)
    root = Commit(CommitID("c0"), (), "mr", "", "init", "t", 0.0, (), 1)
    store.create_repository(Repository("r", "mem://ns", "main", 0.0), Branch("main", CommitID("c0"), StagingToken("t0")), root)
    was = store.slot_stamp("r", "main")[1]
    with store.recording() as seen:
        store.changed("r", "main", alone=False)
    assert seen == [] and store.slot_stamp("r", "main")[1] != was


@pytest.mark.postgres
def test_every_change_that_notifies_stamps_its_branch_before_it_returns(pg_cluster: PgCluster, pg_url: str, tmp_path: Path) -> None:
    from lakemount.block import MemoryAdapter
    from lakemount.cache.ram import RamCache
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import SqlStagingLists

    path = str(tmp_path / "node-stamps")
    store = SqlRefStore(pg_url, stamps=NodeStamps(path))
    other = NodeStamps(path)  # another process of the node, reading

    def changes(branch: str, step: Callable[[], object], repo: str = "r") -> bool:
        before = other.of(repo, branch)
        step()
        return other.of(repo, branch) != before

    root = Commit(CommitID("c0"), (), "mr", "", "init", "t", 0.0, (), 1)
    store.create_repository(Repository("r", "mem://ns", "main", 0.0), Branch("main", CommitID("c0"), StagingToken("t0")), root)
    main = store.get_branch("r", "main")
    moved = Branch("main", CommitID("c1"), StagingToken("t1"))
    rows = SqlStaging(store)
    assert changes("main", lambda: rows.stage("r", "main", [(b"k", b"v")]))
    assert changes("main", lambda: store.cas_branch("r", main, moved))
    assert not changes("main", lambda: store.cas_branch("r", main, moved)), "a failed CAS changed nothing"
    assert changes("dev", lambda: store.create_branch("r", Branch("dev", CommitID("c0"), StagingToken("t2"))))
    assert changes("main", lambda: rows.drop_staging(StagingToken("t1"), prefix=b"k"))
    assert changes("dev", lambda: store.delete_branch("r", "dev"))
    lsm = LsmStaging(SqlStagingLists(store), MemoryAdapter(), RamCache(1 << 20), lambda r: "mem://ns")
    assert changes("main", lambda: lsm.stage("r", "main", [(b"a", b"v" * 17)]))
    assert changes("main", lambda: lsm.stage("r", "main", [(b"b", b"v" * 17)], check=lambda branch, staged: None))
    assert changes("main", lambda: lsm.drop_staging(StagingToken("t1"), prefix=b"a"))
    assert changes("main", lambda: store.delete_repository("r"))
