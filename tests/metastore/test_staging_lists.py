"""``SqlStagingLists`` on SQLite and PostgreSQL: appends race commits' seals and compactions, nothing acknowledged is lost."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from lakemount.block import MemoryAdapter
from lakemount.cache.ram import RamCache
from lakemount.errors import NothingToCommit
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.journal import Journal
from lakemount.graveler.model import StagingToken
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
        # 30 writes each, and on until the committer has committed twice: on a loaded machine the
        # writers could finish before its second commit, and then no commit would have raced them.
        deadline = time.monotonic() + 120
        try:
            i = 0
            while i < 30 or commits[0] < 2:
                assert time.monotonic() < deadline, f"the committer committed {commits[0]} times while the writers wrote"
                key = b"w%d/%03d" % (w, i)
                views[w % 3].set("r", "main", key, val(f"{w}.{i}"))
                with lock:
                    acked[key] = f"{w}.{i}"
                i += 1
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


def test_inline_files_are_their_rows_on_both_databases(ref_url: str) -> None:
    """Issue 26: a small flush's bytes go into its list row with the append, on SQLite and PostgreSQL;
    another process reads the file it never saw from the row; a big compaction's L2 file goes to the
    block store and takes the inline rows it consumed, a small one is a row too; a commit drops the
    rest; a bigger flush is a file."""
    adapter = MemoryAdapter()
    a, b = _graveler(ref_url, adapter), _graveler(ref_url, adapter)
    sa_, sb = a.staging, b.staging
    assert isinstance(sa_, LsmStaging) and isinstance(sb, LsmStaging)
    sa_.l1_max = 1000
    sa_.inline_bytes = 4096
    a.create_repository("r", "mem://r")
    for i in range(3):
        a.set("r", "main", b"k%d" % i, val(str(i)))
    a.set_many("r", "main", [(b"big/%03d" % i, val(str(i) * 20)) for i in range(200)])
    token = a.get_branch("r", "main").staging_token

    def inline_rows() -> int:
        return int(sa_.lists._fast.query("SELECT count(*) FROM lm_staging_inline", [])[0][0])  # type: ignore[attr-defined]

    files = sb.lists.files([token])  # rows b never saw, read whole by id
    assert [f.inline for f in files] == [False, True, True, True] and inline_rows() == 3
    assert [o.url for o in adapter.list("mem://r/_lakefs/staging/")] == [files[0].url]
    assert content(b.get("r", b.resolve("r", "main"), b"k1")) == "1"
    seen = {k: content(v) for k, v in b.scan("r", b.resolve("r", "main"))}
    assert sb.stats.files_loaded == 4  # each once: three from their rows (in one statement), one from the store
    assert sa_.compact(token, minimum=2)
    (l2,) = sa_.lists.files([token])
    assert not l2.inline and inline_rows() == 0
    assert {k: content(v) for k, v in b.scan("r", b.resolve("r", "main"))} == seen
    a.set("r", "main", b"k9", val("9"))
    assert inline_rows() == 1
    b.commit("r", "main", "all")
    assert inline_rows() == 0
    assert {k: content(v) for k, v in a.scan("r", a.resolve("r", "main@"))} == {**seen, b"k9": "9"}
    token = a.get_branch("r", "main").staging_token
    a.set("r", "main", b"m1", val("m1"))
    a.set("r", "main", b"m2", val("m2"))
    stored = len(list(adapter.list("mem://r/_lakefs/staging/")))
    assert sa_.compact(token, minimum=2)  # a small compaction: its L2 file is a row too, no object
    (l2,) = sa_.lists.files([token])
    assert (l2.level, l2.inline) == (2, True) and inline_rows() == 1
    assert len(list(adapter.list("mem://r/_lakefs/staging/"))) == stored
    fresh = _graveler(ref_url, adapter)  # a process that never saw it reads it from its row
    assert content(fresh.get("r", fresh.resolve("r", "main"), b"m2")) == "m2"
    b.commit("r", "main", "m")
    assert inline_rows() == 0
    a.create_branch("r", "side", "main")
    a.set("r", "side", b"s", val("s"))
    assert inline_rows() == 1
    b.delete_branch("r", "side")  # a branch's deletion drops its lists, inline bytes included
    assert inline_rows() == 0


def test_a_process_appends_on_a_few_connections_whichever_threads_flush(ref_url: str, monkeypatch: Any) -> None:
    """A flush is led by whichever writer came first: appends on each thread's own connection gave a
    busy process a database connection (a server backend, and a connect on its first flush) per
    writing thread; they share ``APPEND_CONNECTIONS``."""
    from lakemount.metastore.fastsql import FastSql
    from lakemount.metastore.staging_lists import APPEND_CONNECTIONS

    g = _graveler(ref_url, MemoryAdapter())
    g.create_repository("r", "mem://r")
    lists = g.staging.lists  # type: ignore[attr-defined]
    appending = threading.local()
    made: list[str] = []
    real_connect, real_append = FastSql._connect, lists.append

    def connect(self: FastSql) -> Any:
        if getattr(appending, "on", False):
            made.append(threading.current_thread().name)
        return real_connect(self)

    def append(*args: Any, **kw: Any) -> Any:
        appending.on = True
        try:
            return real_append(*args, **kw)
        finally:
            appending.on = False

    monkeypatch.setattr(FastSql, "_connect", connect)
    lists.append = append
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            g.set("r", "main", b"w%02d" % w, val(str(w)))
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    for w in range(8):  # one after another: each write is a flush its own thread leads
        t = threading.Thread(target=writer, args=(w,), name=f"writer-{w}")
        t.start()
        t.join()
    assert not errors, errors
    assert g.staging.stats.flushes == 8  # type: ignore[attr-defined]  # eight flushes, led by eight threads
    assert 1 <= len(made) <= APPEND_CONNECTIONS, made
    assert {k: content(v) for k, v in g.scan("r", g.resolve("r", "main"))} == {b"w%02d" % w: str(w) for w in range(8)}


def test_a_writer_remembers_only_the_rows_its_tokens_still_list(ref_url: str) -> None:
    """Issue 26 (a lone writer): the list rows a process remembers by id lose what its compactions
    and drops delete, so they stay about ``l1_max`` per token, not every row the token ever had
    (each remembered row was once copied again on every append: a cp -r of 10,000 files paid
    for 20,000 rows per write)."""
    g = _graveler(ref_url, MemoryAdapter())
    g.create_repository("r", "mem://r")
    staging = g.staging
    assert isinstance(staging, LsmStaging)
    lists = staging.lists
    for i in range(40):
        g.set("r", "main", b"k%03d" % i, val(str(i)))
    assert staging.settle(30)
    token = g.get_branch("r", "main").staging_token
    listed = {f.seq for f in lists.files([token])}
    assert len(listed) <= 2 * staging.l1_max  # compacted: a few L1 rows and an L2 file or two
    assert set(lists._known[token]) <= listed  # type: ignore[attr-defined]  # 40 appended rows before
    g.create_branch("r", "side", "main")
    g.set("r", "side", b"s", val("s"))
    side = g.get_branch("r", "side").staging_token
    g.delete_branch("r", "side")
    assert side not in lists._known  # type: ignore[attr-defined]
    assert lists._known_count == sum(len(rows) for rows in lists._known.values())  # type: ignore[attr-defined]
    assert {k: content(v) for k, v in g.scan("r", g.resolve("r", "main"))} == {b"k%03d" % i: str(i) for i in range(40)}


def test_remembering_a_noticed_row_does_not_copy_the_token_s_other_rows(ref_url: str) -> None:
    """Issue 26: every host hears every append of a busy branch; taking a notice's row into the
    remembered rows allocates about one row, however many the token's rows already are (it copied
    them all: 0.3 ms per notice at 20,000 rows, on each host, beside a lone writer)."""
    import json
    import tracemalloc

    lists = SqlStagingLists(SqlRefStore(ref_url))
    row = {"url": "mem://r/_lakefs/staging/x", "min": "6b", "max": "6b", "count": 1, "size": 10, "checksum": "00"}
    details = [f"t1 {seq} {json.dumps({**row, 'url': f'mem://r/_lakefs/staging/{seq}'})}" for seq in range(1, 4002)]
    for d in details[:4000]:
        assert lists.learn(d) is not None
    tracemalloc.start()
    try:
        lists.learn(details[4000])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(lists._known["t1"]) == 4001  # type: ignore[attr-defined]
    assert peak < 32 * 1024, peak  # a copy of 4,000 rows' dict is about 150 KiB


def test_a_row_compacted_away_before_its_append_remembers_it_is_not_remembered(ref_url: str) -> None:
    """The compactor can list, merge and delete a row between its append's insert and the appending
    thread's remembering it (a loaded machine: a full run once failed the test above this way, on
    PostgreSQL); the late remember must not bring back a row no list holds."""
    g = _graveler(ref_url, MemoryAdapter())
    g.create_repository("r", "mem://r")
    staging = g.staging
    assert isinstance(staging, LsmStaging)
    lists = staging.lists
    staging.l1_max = 1000  # no compaction but the one run below
    for i in range(3):
        g.set("r", "main", b"k%d" % i, val(str(i)))
    real = lists._appending
    compacted: list[bool] = []

    def appending(work: Any, transaction: bool) -> Any:
        rows = real(work, transaction)
        compacted.append(staging.compact(StagingToken(rows[0][0]), minimum=2))  # between the insert and the remember
        return rows

    lists._appending = appending  # type: ignore[method-assign]
    g.set("r", "main", b"k3", val("3"))
    lists._appending = real  # type: ignore[method-assign]
    assert compacted == [True], "the compaction never ran between the append's insert and its remember"
    token = g.get_branch("r", "main").staging_token
    listed = {f.seq for f in lists.files([token])}
    assert len(listed) == 1  # the four rows merged into one L2 file
    assert set(lists._known[token]) <= listed  # type: ignore[attr-defined]
    assert {k: content(v) for k, v in g.scan("r", g.resolve("r", "main"))} == {b"k%d" % i: str(i) for i in range(4)}
