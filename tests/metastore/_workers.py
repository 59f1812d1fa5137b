"""Code run in child processes (multiprocessing, spawn) by the ref store concurrency tests."""

from __future__ import annotations

import traceback
from typing import Any

REPO = "conc"


def commit_worker(url: str, system_ns: str, worker: int, rounds: int, keys: int, barrier: Any, out: Any) -> None:
    """Stage ``keys`` distinct keys and commit them, ``rounds`` times, on branch main of REPO.

    Reports ``(worker, [(round, commit_id or None, included_in)...], error)`` on ``out``.
    A commit may find its entries already committed by another process's commit (a branch's
    staging is shared, as in lakeFS): that is NothingToCommit, reported with commit_id None.
    """
    try:
        from lakemount.block import LocalAdapter
        from lakemount.cache.ram import RamCache
        from lakemount.errors import NothingToCommit
        from lakemount.graveler.committed.store import CommittedStore
        from lakemount.graveler.graveler import Graveler
        from lakemount.graveler.journal import Journal
        from lakemount.graveler.model import Entry
        from lakemount.metastore.sql import SqlRefStore
        from lakemount.metastore.sql_staging import SqlStaging

        adapter = LocalAdapter()
        refs = SqlRefStore(url)
        g = Graveler(refs, CommittedStore(adapter, RamCache(1 << 26)), Journal(adapter, system_ns), staging=SqlStaging(refs))
        results: list[tuple[int, str | None]] = []
        barrier.wait(timeout=120)
        for r in range(rounds):
            for i in range(keys):
                k = f"w{worker}/r{r}/k{i:03d}"
                g.set(REPO, "main", k.encode(), Entry(f"data/{k}", len(k), etag=k).value())
            try:
                results.append((r, g.commit(REPO, "main", f"worker {worker} round {r}").commit.id))
            except NothingToCommit:
                results.append((r, None))
        out.put((worker, results, None))
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the test
        out.put((worker, [], traceback.format_exc()))
