"""``SqlStagingLists`` on SQLite and PostgreSQL: appends race commits' seals and compactions, nothing acknowledged is lost."""

from __future__ import annotations

import threading
from pathlib import Path

from lakemount.block import MemoryAdapter
from lakemount.cache.ram import RamCache
from lakemount.errors import NothingToCommit
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.journal import Journal
from lakemount.graveler.staging.lsm import LsmStaging
from lakemount.metastore.sql import SqlRefStore
from lakemount.metastore.staging_lists import SqlStagingLists
from tests.graveler._support import content, val


def _graveler(url: str, adapter: MemoryAdapter) -> Graveler:
    refs = SqlRefStore(url)
    staging = LsmStaging(
        SqlStagingLists(refs), adapter, RamCache(1 << 24), lambda r: refs.get_repository(r).storage_namespace, l1_max=3
    )
    return Graveler(refs, CommittedStore(adapter, RamCache(1 << 24)), Journal(adapter, "mem://sys"), staging=staging)


def test_appends_racing_commits_and_compactions_lose_nothing(ref_url: str, tmp_path: Path) -> None:
    adapter = MemoryAdapter()
    views = [_graveler(ref_url, adapter) for _ in range(3)]
    views[0].create_repository("r", "mem://r")
    acked: dict[bytes, str] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()
    commits = [0]

    def writer(w: int) -> None:
        try:
            for i in range(30):
                key = b"w%d/%03d" % (w, i)
                views[w % 3].set("r", "main", key, val(f"{w}.{i}"))
                with lock:
                    acked[key] = f"{w}.{i}"
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    def committer() -> None:
        try:
            while not stop.is_set():
                try:
                    views[1].commit("r", "main", "c")
                    commits[0] += 1
                except NothingToCommit:
                    pass
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    c = threading.Thread(target=committer)
    for t in [*writers, c]:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    c.join()
    assert not errors, errors
    assert commits[0] > 1  # commits raced the appends
    assert all(v.staging.settle(60) for v in views)  # type: ignore[attr-defined]  # compactions run on their own thread
    assert sum(v.staging.stats.compactions for v in views) > 0  # type: ignore[attr-defined]
    g = views[2]
    seen = {k: content(v) for k, v in g.scan("r", g.resolve("r", "main"))}
    assert {k: v for k, v in acked.items() if seen.get(k) != v} == {}
    assert seen == acked
