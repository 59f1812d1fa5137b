"""A PostgreSQL crash (``pg_ctl -m immediate``, durable settings) costs a reader nothing once the server is back.

A fast stop tells every backend's client "terminating connection", an
``OperationalError``; after a crash, a client on the server's unix socket (as
here) finds only the closed socket, which psycopg2 reports as a bare
``DatabaseError``.  The first statement on
each kept connection meets it: reads (and staging writes whose COMMIT never
went out) are repeated once on a fresh connection instead of failing (EIO in a
mount, a failed Spark task).  Each test asserts the crash happened: the
postmaster's pid is gone and a new one serves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.errors import LakeMountError, Unavailable
from tests.metastore.conftest import PG_BIN, _run_as

pytestmark = pytest.mark.postgres


@dataclass
class DurablePg:
    """A private PostgreSQL cluster with fsync and synchronous commit on, which a test may crash."""

    base: Path
    prefix: list[str]

    @property
    def data(self) -> str:
        return str(self.base / "data")

    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@/lake?host={self.base}&port=5432"

    def pid(self) -> int:
        """The running postmaster's pid (first line of ``postmaster.pid``)."""
        return int((self.base / "data" / "postmaster.pid").read_text().splitlines()[0])

    def ctl(self, *args: str) -> None:
        p = subprocess.run([*self.prefix, str(PG_BIN / "pg_ctl"), "-D", self.data, *args], capture_output=True, text=True, timeout=120)
        log = self.base / "server.log"
        assert p.returncode == 0, f"pg_ctl {args}: {p.stderr} {log.read_text()[-2000:] if log.exists() else ''}"

    def start(self) -> None:
        # durable on purpose: fsync, synchronous commit and full page writes are the server defaults
        opts = f"-k {self.base} -p 5432 -c listen_addresses='' -c fsync=on -c synchronous_commit=on -c full_page_writes=on"
        self.ctl("-l", str(self.base / "server.log"), "-o", opts, "-w", "-t", "60", "start")

    def crash(self) -> int:
        """Kill the server as a crash would (``-m immediate``: no checkpoint, backends killed); returns the dead pid."""
        pid = self.pid()
        self.ctl("-m", "immediate", "-w", "stop")
        end = time.monotonic() + 10  # pg_ctl returns once postmaster.pid is gone, as the process exits
        while _running(pid):
            assert time.monotonic() < end, f"postmaster {pid} survived the crash"
            time.sleep(0.05)
        return pid


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a dead postmaster waits for its reparented reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.fixture(scope="module")
def durable_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cluster's data directory, made once per module: initdb (durable), database ``lake``, a clean shutdown.

    Each test crashes a copy of it: a copy costs a fraction of an initdb, and starts from the same state.
    """
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (Debian package postgresql-15)")
    prefix = _run_as()
    base = Path(tempfile.mkdtemp(prefix="lm-pgcrash-template-"))
    if prefix:
        shutil.chown(base, user=prefix[2])
    pg = DurablePg(base, prefix)
    try:
        subprocess.run([*prefix, str(PG_BIN / "initdb"), "-D", pg.data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                        "--no-instructions"], check=True, capture_output=True, timeout=120)
        pg.start()
        subprocess.run([*prefix, str(PG_BIN / "psql"), "-h", str(base), "-p", "5432", "-U", "postgres", "-c", "CREATE DATABASE lake"],
                       check=True, capture_output=True, timeout=60)
        pg.ctl("-m", "fast", "-w", "stop")  # a clean shutdown: a copy starts without recovery
        yield base / "data"
    finally:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", pg.data, "-m", "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def durable_pg(durable_template: Path) -> Iterator[DurablePg]:
    """A private cluster (a copy of the template, owner and modes kept), which the test may crash."""
    prefix = _run_as()
    base = Path(tempfile.mkdtemp(prefix="lm-pgcrash-"))
    if prefix:
        shutil.chown(base, user=prefix[2])
    pg = DurablePg(base, prefix)
    try:
        subprocess.run(["cp", "-a", str(durable_template), pg.data], check=True, capture_output=True, timeout=120)
        pg.start()
        yield pg
    finally:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", pg.data, "-m", "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _app(pg: DurablePg, home: Path, staging: str = "sql") -> App:
    """A lakemount process's composition over ``pg`` and a shared local namespace root (no disk cache)."""
    return App(load(env={
        "LAKEMOUNT_HOME": str(home),
        "LAKEMOUNT_STAGING_BACKEND": staging,
        "LAKEMOUNT_METADATA_DB_URL": pg.url(),
        "LAKEMOUNT_CACHE_DISK_BYTES": "0",
        "LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX": f"local://{pg.base.parent / (pg.base.name + '-ns')}",
    }))


@pytest.mark.parametrize("staging", ["sql", "lsm"])
def test_reads_after_a_crash_while_another_node_writes(durable_pg: DurablePg, tmp_path: Path, staging: str) -> None:
    """Also with staging files (staging.backend lsm): flushes whose append the crash cut are not acknowledged."""
    writer, reader = _app(durable_pg, tmp_path / "a", staging), _app(durable_pg, tmp_path / "b", staging)
    w, r = writer.catalog, reader.catalog
    w.create_repository("crash")
    for i in range(3):
        w.put("crash", "main", f"kept{i}", b"kept %d" % i)
    w.commit("crash", "main", "base")
    # every kind of read keeps a connection on the reader: the crash breaks each of them
    assert r.read(r.repository("crash"), r.stat("crash", "main", "kept0")) == b"kept 0"
    assert [b.name for b in reader.metastore.list_branches("crash")] == ["main"]
    written: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:  # a writer closing files on another node while the server dies
        i = 0
        while not stop.is_set():
            try:
                w.put("crash", "main", f"w{i}", b"w")
                written.append(f"w{i}")
                i += 1
            except Unavailable:
                time.sleep(0.05)  # the server is down: what the writer is told; retried by the job
            except BaseException as exc:  # anything else is a bug: re-raised below
                errors.append(exc)
                return

    t = threading.Thread(target=write)
    t.start()
    try:
        while len(written) < 3:
            assert t.is_alive() and not errors, errors
            time.sleep(0.01)
        dead = durable_pg.crash()
        durable_pg.start()
        assert durable_pg.pid() != dead
        before_restart = len(written)
        # the first reads after the restart, each on a connection the crash broke
        assert r.read(r.repository("crash"), r.stat("crash", "main", "kept1")) == b"kept 1"
        assert [b.name for b in reader.metastore.list_branches("crash")] == ["main"]
        while len(written) < before_restart + 3:  # the writer recovers on its own
            assert t.is_alive() and not errors, errors
            time.sleep(0.01)
    finally:
        stop.set()
        t.join(30)
    if errors:
        raise errors[0]
    # nothing acknowledged was lost: every acknowledged write reads back on the other node
    names = {e.path for e in r.list("crash", "main", "")}
    assert set(written) <= names


def test_a_staging_write_on_a_connection_the_crash_broke_is_repeated(durable_pg: DurablePg, tmp_path: Path) -> None:
    app = _app(durable_pg, tmp_path / "a")
    cat = app.catalog
    cat.create_repository("crashw")
    cat.put("crashw", "main", "before", b"before")  # this thread now keeps a connection
    dead = durable_pg.crash()
    durable_pg.start()
    assert durable_pg.pid() != dead
    cat.put("crashw", "main", "after", b"after")  # its BEGIN fails: nothing applied, so it is repeated
    assert cat.read(cat.repository("crashw"), cat.stat("crashw", "main", "after")) == b"after"


def test_group_committed_flushes_cut_by_a_crash_lose_no_acknowledged_write(durable_pg: DurablePg, tmp_path: Path) -> None:
    """staging.backend lsm, eight writers on one node (their writes group-committed, flushes in flight)
    while the server crashes and restarts: every acknowledged write reads back on another node, and
    the crash did cut flushes (writers were told ``Unavailable``)."""
    writer, reader = _app(durable_pg, tmp_path / "a", "lsm"), _app(durable_pg, tmp_path / "b", "lsm")
    w, r = writer.catalog, reader.catalog
    w.create_repository("crashg")
    acked: list[str] = []
    refused = [0]
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def write(n: int) -> None:
        i = 0
        while not stop.is_set():
            path = f"w{n}/{i}"
            try:
                w.put("crashg", "main", path, path.encode())
            except Unavailable:
                with lock:
                    refused[0] += 1
                time.sleep(0.05)
                continue
            except BaseException as exc:  # anything else is a bug: re-raised below
                errors.append(exc)
                return
            with lock:
                acked.append(path)
            i += 1

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    try:
        while len(acked) < 40:
            assert not errors, errors
            time.sleep(0.01)
        dead = durable_pg.crash()
        durable_pg.start()
        assert durable_pg.pid() != dead
        after = len(acked)
        while len(acked) < after + 40:  # the writers recover on their own
            assert not errors, errors
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    if errors:
        raise errors[0]
    assert refused[0] > 0  # the crash cut flushes: their writers were told, none acknowledged
    assert writer.staging.stats.flushes < len(acked)  # type: ignore[attr-defined]  # group-committed
    repo = r.repository("crashg")
    lost = [p for p in acked if r.read(repo, r.stat("crashg", "main", p)) != p.encode()]
    assert lost == []


def test_write_back_stages_through_a_postgres_outage_and_loses_nothing(
    durable_pg: DurablePg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL dies while a write-back mount (the kernel-free core) has files journaled and not yet
    staged: the node still reads them; the pipeline retries its staging through the outage and, once
    the server is back, stages them all: another node reads every acknowledged file, byte for byte."""
    from lakemount.fuse import writeback
    from tests.fuse.conftest import make_fs
    from tests.fuse.pathfs import PathFS

    monkeypatch.setattr(writeback, "LINGER", 60.0)  # the pipeline gathers the records until drain() asks for them
    writer, reader = _app(durable_pg, tmp_path / "a"), _app(durable_pg, tmp_path / "b")
    writer.catalog.create_repository("wbpg")
    home = str(tmp_path / "a")
    fs = make_fs(writer, home, "wb", head_ttl=600.0, writeback=True, journal_dir=os.path.join(home, "journal"), writeback_retry=600.0)
    pipeline = fs.writeback
    assert pipeline is not None
    drained: list[BaseException | None] = []
    try:
        pfs = PathFS(fs)
        pfs.mkdir("/wbpg/main/d")
        files = {f"d/f{i:02d}": os.urandom(300 + i) for i in range(20)}
        for path, data in files.items():
            pfs.write_file(f"/wbpg/main/{path}", data)  # acknowledged once journaled
        dead = durable_pg.crash()
        assert {p: pfs.read_file(f"/wbpg/main/{p}") for p in files} == files  # the node reads them, server down

        def drain() -> None:
            try:
                pipeline.drain(None)
                drained.append(None)
            except BaseException as exc:  # re-raised below
                drained.append(exc)

        t = threading.Thread(target=drain)
        t.start()
        deadline = time.monotonic() + 60
        while pipeline.report.counts["stage_retries"] == 0:
            assert time.monotonic() < deadline, "the pipeline never met the outage"
            assert t.is_alive(), f"drain returned with the server down: {drained}"
            time.sleep(0.05)
        durable_pg.start()
        assert durable_pg.pid() != dead
        t.join(120)
        assert drained == [None], drained
    finally:
        fs.close()
    r = reader.catalog
    repo = r.repository("wbpg")
    assert [p for p, data in files.items() if r.read(repo, r.stat("wbpg", "main", p)) != data] == []  # none lost


@pytest.mark.parametrize("cut", ["before", "after"])
def test_a_directory_rename_across_a_postgres_crash_and_restart_is_whole_or_not_at_all(
    durable_pg: DurablePg, tmp_path: Path, cut: str,
) -> None:
    """PostgreSQL crashes (``-m immediate``) and restarts right before, or right after, the swap that stages a
    directory rename's move record (issue 40): the rename is whole or not there at all, never half; done
    again it lands once; the commit keeps it; another node reads the same."""
    app = _app(durable_pg, tmp_path / "a")
    cat = app.catalog
    cat.create_repository("mvpg")
    names = [f"d/p{i // 100}/f{i:04d}" for i in range(300)]
    seed = cat.put("mvpg", "main", "seed", b"bytes")
    cat.apply("mvpg", "main", [(n, seed) for n in names])
    cat.commit("mvpg", "main", "a directory")
    refs = cat.graveler.refs
    real = refs.cas_branch
    crashes: list[int] = []

    def crash_and_restart() -> None:
        crashes.append(durable_pg.crash())
        durable_pg.start()

    def cas(*args: Any, **kwargs: Any) -> bool:
        if not crashes and cut == "before":
            crash_and_restart()
        swapped = real(*args, **kwargs)
        if not crashes and cut == "after":
            crash_and_restart()
        return bool(swapped)

    refs.cas_branch = cas  # type: ignore[method-assign]
    try:
        try:
            cat.move_directory("mvpg", "main", "d", "e")
        except LakeMountError as exc:
            assert cut == "before", f"the swap was made before the crash, yet the rename failed: {exc}"
    finally:
        refs.cas_branch = real  # type: ignore[method-assign]
    assert crashes and durable_pg.pid() != crashes[0], "the server never crashed"

    def listed(reader: App, prefix: str) -> list[str]:
        return sorted(e.path for e in reader.catalog.list("mvpg", "main", prefix))

    old, new = listed(app, "d/"), listed(app, "e/")
    assert (old, new) in ((names, []), ([], ["e/" + n[2:] for n in names])), (len(old), len(new))
    if old:  # not there at all: done again, it lands
        cat.move_directory("mvpg", "main", "d", "e")
    cat.move_directory("mvpg", "main", "d", "e")  # again, with the old prefix empty: lands once, changes nothing
    cat.commit("mvpg", "main", "renamed")
    other = _app(durable_pg, tmp_path / "b")
    assert listed(other, "d/") == [] and listed(other, "e/") == ["e/" + n[2:] for n in names]
    assert other.catalog.read(other.catalog.repository("mvpg"), other.catalog.stat("mvpg", "main", "e/p2/f0299")) == b"bytes"
