"""Staging throughput, old (``sql``: rows in the ref store) vs new (``lsm``: staging files, docs/DESIGN.md §4), in one run.

Prints, for each backend, measured in this run:

* over PostgreSQL (a throwaway cluster started as tests/metastore/conftest.py does) and
  the local block store: metadata-only staged entries/s (entries whose data is already
  stored, as import and ``linkPhysicalAddress`` stage them: one ``Graveler.set`` per
  entry) from ``--procs`` processes of ``--threads`` threads each, and PostgreSQL
  transactions per staged entry (``pg_stat_database.xact_commit`` before and after);
* embedded (SQLite + local block store): one writer alone (entries/s, one entry per
  call: the case group commit cannot batch), the same from ``--threads`` threads in one
  process, and a warm point lookup and a 1,000-entry listing over the staged entries.

Then the ratios lsm/sql.  Run: ``PYTHONPATH=. .venv/bin/python benchmarks/staging_bench.py``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lakemount.block import LocalAdapter  # noqa: E402
from lakemount.cache.ram import RamCache  # noqa: E402
from lakemount.config import StagingConfig  # noqa: E402
from lakemount.graveler.committed.store import CommittedStore  # noqa: E402
from lakemount.graveler.graveler import Graveler  # noqa: E402
from lakemount.graveler.journal import Journal  # noqa: E402
from lakemount.graveler.model import Entry  # noqa: E402
from lakemount.metastore.sql import SqlRefStore  # noqa: E402
from tests.graveler._support import make_staging  # noqa: E402
from tests.metastore.conftest import PG_BIN, _run_as  # noqa: E402

REPO = "bench"


def graveler(url: str, root: str, backend: str, flush_ms: float = StagingConfig().flush_ms) -> Graveler:
    refs = SqlRefStore(url)
    adapter = LocalAdapter()
    kw: dict[str, Any] = {"flush_ms": flush_ms} if backend == "lsm" else {}
    return Graveler(
        refs, CommittedStore(adapter, RamCache(1 << 26)), Journal(adapter, f"local://{root}/sys"),
        staging=make_staging(refs, adapter, backend, **kw),
    )


def value(i: int) -> bytes:
    return Entry(f"data/{i % 256:02x}/{i:064x}", 1024, etag=f"{i:032x}").value()


def _worker(
    url: str, root: str, backend: str, flush_ms: float, branch: str, threads: int, seconds: float, wid: int,
    ready: Any, go: Any, out: Any,
) -> None:
    g = graveler(url, root, backend, flush_ms)
    g.get_branch(REPO, branch)  # connected and warm before the clock starts
    ready.release()
    go.wait()
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def loop(t: int) -> None:
        i = 0
        while time.monotonic() < stop:
            g.set(REPO, branch, b"w%02d/t%02d/%08d" % (wid, t, i), value(i))
            i += 1
        counts[t] = i

    ts = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(sum(counts))


def staged_rate(
    url: str, root: str, backend: str, flush_ms: float, branch: str, procs: int, threads: int, seconds: float
) -> tuple[float, int]:
    """(entries/s, entries) of ``procs`` processes x ``threads`` threads staging one entry per call for
    ``seconds``, timed from the moment every process is started and connected."""
    ctx = multiprocessing.get_context("spawn")
    q, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
    ps = [
        ctx.Process(target=_worker, args=(url, root, backend, flush_ms, branch, threads, seconds, w, ready, go, q))
        for w in range(procs)
    ]
    for p in ps:
        p.start()
    for _ in ps:
        ready.acquire(timeout=300)
    go.set()
    total = sum(q.get(timeout=seconds + 120) for _ in ps)
    for p in ps:
        p.join()
    return total / seconds, total


class Postgres:
    """A throwaway PostgreSQL cluster on a unix socket (as tests/metastore/conftest.py starts one)."""

    def __init__(self) -> None:
        self.prefix = _run_as()
        self.base = Path(tempfile.mkdtemp(prefix="lm-pgbench-"))
        if self.prefix:
            shutil.chown(self.base, user=self.prefix[2])
        self.data = self.base / "data"
        self.port = 5432

    def start(self) -> None:
        subprocess.run([*self.prefix, str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                        "-E", "UTF8", "--no-sync", "--no-instructions"], check=True, capture_output=True, timeout=120)
        opts = (f"-k {self.base} -p {self.port} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=300")
        subprocess.run([*self.prefix, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.base / "log"),
                        "-o", opts, "-w", "-t", "60", "start"], check=True, capture_output=True, timeout=120)

    def stop(self) -> None:
        subprocess.run([*self.prefix, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(self.base, ignore_errors=True)

    def admin(self, db: str = "postgres") -> Any:
        import psycopg2

        conn = psycopg2.connect(host=str(self.base), port=self.port, user="postgres", dbname=db)
        conn.autocommit = True
        return conn

    def url(self, db: str) -> str:
        return f"postgresql+psycopg2://postgres@/{db}?host={self.base}&port={self.port}"

    def xacts(self, db: str) -> int:
        conn = self.admin()
        try:
            cur = conn.cursor()
            time.sleep(1.2)  # backends publish their counters at most once a second
            cur.execute("SELECT pg_stat_clear_snapshot()")
            cur.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (db,))
            return int(cur.fetchone()[0])
        finally:
            conn.close()


def pg_figures(args: argparse.Namespace, root: str) -> dict[str, dict[str, float]]:
    pg = Postgres()
    pg.start()
    out: dict[str, dict[str, float]] = {}
    try:
        for backend in ("sql", "lsm"):
            db = f"bench_{backend}"
            pg.admin().cursor().execute(f"CREATE DATABASE {db}")
            url = pg.url(db)
            g = graveler(url, root, backend)
            g.create_repository(REPO, f"local://{root}/ns-pg-{backend}")
            g.refs.engine.dispose()  # type: ignore[attr-defined]
            graveler(url, root, backend).get_branch(REPO, "main")  # tables in place before the count
            before = pg.xacts(db)
            rate, n = staged_rate(url, root, backend, args.flush_ms, "main", args.procs, args.threads, args.seconds)
            after = pg.xacts(db)
            out[backend] = {"entries_per_s": rate, "entries": n, "xacts_per_entry": (after - before) / max(n, 1)}
            print(f"  pg {backend}: {rate:,.0f} entries/s ({n} entries), {(after - before) / max(n, 1):.3f} PostgreSQL transactions per entry",
                  flush=True)
    finally:
        pg.stop()
    return out


def embedded_figures(args: argparse.Namespace, root: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for backend in ("sql", "lsm"):
        url = f"sqlite:///{root}/embedded-{backend}.db"
        g = graveler(url, root, backend, args.flush_ms)
        g.create_repository(REPO, f"local://{root}/ns-emb-{backend}")
        n = args.single
        t0 = time.perf_counter()
        for i in range(n):
            g.set(REPO, "main", b"one/%08d" % i, value(i))
        single = n / (time.perf_counter() - t0)
        rate, total = staged_rate(url, root, backend, args.flush_ms, "main", 1, args.threads, args.seconds)
        ref = g.resolve(REPO, "main")
        g.get(REPO, ref, b"one/%08d" % 7)
        t0 = time.perf_counter()
        for i in range(2000):
            g.get(REPO, ref, b"one/%08d" % ((i * 7919) % n))
        get_us = (time.perf_counter() - t0) / 2000 * 1e6
        t0 = time.perf_counter()
        for _ in range(20):
            listed = sum(1 for _ in zip(range(1000), g.scan(REPO, ref, b"one/", b"one0")))
        list_ms = (time.perf_counter() - t0) / 20 * 1e3
        assert listed == min(1000, n)
        out[backend] = {"single": single, "threads": rate, "get_us": get_us, "list_ms": list_ms}
        print(f"  embedded {backend}: one writer {single:,.0f} entries/s; {args.threads} threads {rate:,.0f} entries/s; "
              f"get {get_us:.0f} us; 1,000-entry list {list_ms:.1f} ms", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--flush-ms", type=float, default=StagingConfig().flush_ms, help="staging.flush_ms of the lsm writers (default: its default)")
    ap.add_argument("--single", type=int, default=1000, help="entries staged by the lone embedded writer")
    ap.add_argument("--only", choices=["pg", "embedded"])
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="lm-stagebench-")
    try:
        if args.only != "embedded":
            print(f"PostgreSQL + local block store, {args.procs} processes x {args.threads} threads, one entry per call:")
            pg = pg_figures(args, root)
            s, n = pg["sql"], pg["lsm"]
            print(f"  ratio lsm/sql entries/s: {n['entries_per_s'] / s['entries_per_s']:.1f}x (target >= 10x); "
                  f"transactions per entry: sql {s['xacts_per_entry']:.3f}, lsm {n['xacts_per_entry']:.4f} (target <= 0.05)")
        if args.only != "pg":
            print("Embedded (SQLite + local block store):")
            emb = embedded_figures(args, root)
            s2, n2 = emb["sql"], emb["lsm"]
            print(f"  ratio lsm/sql: one writer {n2['single'] / s2['single']:.2f}x, {args.threads} threads "
                  f"{n2['threads'] / s2['threads']:.2f}x, get time {n2['get_us'] / s2['get_us']:.2f}x, "
                  f"list time {n2['list_ms'] / s2['list_ms']:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
