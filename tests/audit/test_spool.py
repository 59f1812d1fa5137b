"""The spool of short-lived processes (``audit/spool.py``): a CLI verb writes no Parquet and imports no pyarrow;
its records reach the table through whoever drains next, once each, across kills of writers and drainers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from lakemount.app import App
from lakemount.audit import spool
from lakemount.audit.log import AuditLog
from lakemount.audit.table import Filter, files
from lakemount.config import load

ROOT = Path(__file__).resolve().parents[2]


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}, "LAKEMOUNT_HOME": str(home),
            "LAKEMOUNT_CACHE_DISK_BYTES": "0", "PYTHONPATH": str(ROOT), **extra}


def _app(home: Path) -> App:
    app = App(load(None, env=_env(home)))
    return app


def _log(app: App, **kw: float) -> AuditLog:
    """A second log over the same home, as another process's would be."""
    return AuditLog(app.adapter, lambda r: app.catalog.repository(r).storage_namespace, home=app.config.home,
                    flush_s=kw.get("flush_s", 60), flush_records=10_000, retention_days=0)


def _spooled(home: Path) -> list[str]:
    folder = spool.folder(os.path.join(home, "run", "audit"))
    return sorted(n for n in os.listdir(folder) if n.endswith(spool.SUFFIX)) if os.path.isdir(folder) else []


def test_a_cli_verb_spools_its_record_and_never_imports_pyarrow(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = _app(home)
    app.catalog.create_repository("spl")
    app.catalog.put("spl", "main", "a.txt", b"abc")
    ns = app.catalog.repository("spl").storage_namespace
    app.metastore.engine.dispose()
    # An exit handler registered before the CLI's runs after every one of its own (atexit is last in, first out).
    script = textwrap.dedent("""
        import atexit, sys
        atexit.register(lambda: print("pyarrow" in sys.modules, file=sys.stderr))
        from lakemount.cli.main import main
        sys.argv = ["lakemount", "fs", "stat", "lakefs://spl/main/a.txt"]
        main()
    """)
    p = subprocess.run([sys.executable, "-c", script], env=_env(home), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip().splitlines()[-1] == "False"
    assert files(app.adapter, ns) == []  # nothing written to the store by the verb
    [name] = _spooled(home)
    records, bad = spool.read(os.path.join(spool.folder(os.path.join(home, "run", "audit")), name))
    assert bad == 0 and [(r.op, r.path, r.frontend) for r in records] == [("stat", "a.txt", "cli")]
    # The next flush of a long-running process writes it, and the spool is gone.
    server = _log(app)
    server.start()
    try:
        assert server.flush() == 1
    finally:
        server.close()
    assert _spooled(home) == []
    assert [(r.op, r.path) for r in app.catalog.audit_records("spl", Filter())] == [("stat", "a.txt")]
    assert server.counters["written"] == 1


def test_a_writer_whose_file_was_claimed_starts_another_and_nothing_is_lost(tmp_path: Path) -> None:
    app = _app(tmp_path / "home")
    app.catalog.create_repository("clm")
    writer, drainer = _log(app), _log(app)
    writer.spool()
    writer.record(repo="clm", op="cat", path="one")
    first = writer._spool.path  # type: ignore[union-attr]
    assert drainer.drain() == 1
    assert not os.path.exists(first)
    writer.record(repo="clm", op="cat", path="two")
    assert writer._spool.path != first  # type: ignore[union-attr]
    assert drainer.drain() == 1
    writer.close()
    assert [r.path for r in app.catalog.audit_records("clm", Filter())] == ["one", "two"]


def test_kill_9_of_a_spooling_process_loses_none_of_its_records(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = _app(home)
    app.catalog.create_repository("k9w")
    app.metastore.engine.dispose()
    script = textwrap.dedent("""
        import os, signal
        from lakemount.app import App
        from lakemount.config import load
        app = App(load(None))
        app.audit.spool()
        for i in range(3):
            app.audit.record(repo="k9w", op="cat", path=f"p{i}")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", script], env=_env(home), capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr  # the kill landed, after the records
    assert len(_spooled(home)) == 1
    assert _log(app).drain() == 3
    assert [r.path for r in app.catalog.audit_records("k9w", Filter())] == ["p0", "p1", "p2"]


def test_a_drainer_killed_mid_drain_leaves_its_claim_to_the_next_which_writes_each_record_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = _app(home)
    app.catalog.create_repository("k9d")
    ns = app.catalog.repository("k9d").storage_namespace
    writer = _log(app)
    writer.spool()
    for i in range(4):
        writer.record(repo="k9d", op="cat", path=f"p{i}")
    writer.close()
    app.metastore.engine.dispose()
    # A drainer that claims the spool, writes its Parquet and is killed before removing its claim.
    script = textwrap.dedent("""
        import os, signal, socket
        from lakemount.app import App
        from lakemount.audit import spool, table
        from lakemount.audit.record import row
        from lakemount.config import load
        app = App(load(None))
        [claimed] = spool.claim(app.audit.spool_dir, socket.gethostname())
        records, _ = spool.read(claimed)
        table.write(app.adapter, app.catalog.repository("k9d").storage_namespace, spool.stem(claimed) + ".parquet",
                    [row(r) for r in records])
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], env=_env(home), stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGKILL, err  # killed after writing, before removing its claim
    claimed_dir = os.path.join(spool.folder(os.path.join(home, "run", "audit")), spool.CLAIMED)
    [left] = os.listdir(claimed_dir)
    assert left.endswith(f"-{p.pid}")  # still claimed by the dead drainer
    assert len(files(app.adapter, ns)) == 1
    assert spool.oldest(spool.folder(os.path.join(home, "run", "audit"))) is not None  # it waits for a drain
    assert _log(app).drain() == 4
    assert os.listdir(claimed_dir) == []
    assert len(files(app.adapter, ns)) == 1  # the same name, written again: replaced, not duplicated
    assert [r.path for r in app.catalog.audit_records("k9d", Filter())] == ["p0", "p1", "p2", "p3"]


def test_a_verb_that_finds_a_stale_spool_starts_a_detached_flush(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = _app(home)
    app.catalog.create_repository("stl")
    app.catalog.put("stl", "main", "a.txt", b"abc")
    app.metastore.engine.dispose()
    env = _env(home, LAKEMOUNT_AUDIT_FLUSH_S="0.5")

    def stat() -> None:
        subprocess.run([sys.executable, "-m", "lakemount.cli.main", "fs", "stat", "lakefs://stl/main/a.txt"], env=env,
                       check=True, capture_output=True, timeout=120)

    stat()
    assert len(_spooled(home)) == 1
    time.sleep(1.0)
    stat()  # finds the first spool older than audit.flush_s: a detached 'lakemount audit flush' writes it
    deadline = time.monotonic() + 60
    while not list(app.catalog.audit_records("stl", Filter())):
        assert time.monotonic() < deadline, open(os.path.join(home, "run", "audit", "flush.log")).read()
        time.sleep(0.2)
    assert len(list(app.catalog.audit_records("stl", Filter()))) >= 1
    # 'lakemount audit flush' writes whatever is left.
    subprocess.run([sys.executable, "-m", "lakemount.cli.main", "audit", "flush"], env=env, check=True,
                   capture_output=True, timeout=120)
    assert _spooled(home) == []
    assert [r.op for r in app.catalog.audit_records("stl", Filter())] == ["stat", "stat"]


def test_a_query_waits_for_a_drain_already_under_way_in_another_thread(tmp_path: Path) -> None:
    """settle() before a query must not return while the flusher thread is still writing a spool it claimed
    (drain returned 0 at once: the query read before those records were written; a full run's flake)."""
    import threading

    app = _app(tmp_path / "home")
    app.catalog.create_repository("wdr")
    writer, server = _log(app), _log(app)
    writer.spool()
    writer.record(repo="wdr", op="cat", path="spooled")
    writer.close()
    held, done, asked = threading.Event(), threading.Event(), threading.Event()
    real = server._drain_lock

    class Watched:
        """The drain lock, telling when another thread asks for it."""

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            asked.set()
            return real.acquire(blocking, timeout)

        def release(self) -> None:
            real.release()

    server._drain_lock = Watched()  # type: ignore[assignment]

    def flusher_draining() -> None:  # the flusher thread, in the middle of a drain (its lock held)
        with real:
            held.set()
            # the drain goes on until settle has asked for the lock (not a fixed 0.3 s a late settle missed)
            asked.wait(60)
            done.set()

    t = threading.Thread(target=flusher_draining)
    t.start()
    assert held.wait(30), "the drain never began"
    server.settle()
    assert asked.is_set(), "settle never asked for the drain lock"
    assert done.is_set(), "settle returned while another thread's drain was still under way"
    t.join()
    assert [r.path for r in app.catalog.audit_records("wdr", Filter())] == ["spooled"]
    server.close()
