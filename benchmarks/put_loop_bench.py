"""Small objects put through the catalog one request at a time, over PostgreSQL: writes/s and transactions per write.

What the gateway's PUT and the API's upload do per request (issue 36, Build 2): ``--procs``
processes (default 4), each with its own ``App`` (as a gateway or API worker has one) over one
throwaway PostgreSQL cluster (started as tests/metastore/conftest.py does) and one local block
store, put distinct 1 KiB objects into ``main`` with ``Catalog.put`` (store the data, stage the
entry), first one at a time per process (a lone sequential writer per process), then from
``--threads`` threads per process (default 16: many writes in flight on a host; each thread makes one
put before the clock, so its connection is made, as a server's pooled request threads have theirs).  For each
staging backend (``sql``, ``lsm``) and each phase it prints writes/s and PostgreSQL
transactions per acknowledged write, counted by PostgreSQL itself (``pg_stat_database``
``xact_commit + xact_rollback``, before and after the phase: every process's statements,
reads included, and every listening backend's wake-ups: ``benchmarks/pg_counting.py``, shared with
``cluster_write_bench.py``), all measured in one run, then the ratio threads / one at a time.  With
``--listen`` each worker also listens for change notices as a gateway worker does (without,
the protection rules its writes keep are read again every second).

Beside each rate it prints the CPU one write cost in the phase (the workers' own, ``process_time``
over the timed window, and PostgreSQL's: its postmaster's children, live and ended), the share of
the machine's cores that was idle, and the rate this machine's cores would allow at that CPU per
write (cores / CPU per write): when the 16-thread phase leaves no core idle, that is its ceiling,
so the >= 5x target is within this machine's reach only if five times the one-at-a-time rate is
below it (stop 53).

Targets: <= 1.1 transactions per write one at a time; with 16 threads per process <= 0.1 and
>= 5x the one-at-a-time rate.  Run: ``PYTHONPATH=. .venv/bin/python benchmarks/put_loop_bench.py``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import pg_counting  # noqa: E402
from benchmarks.staging_bench import Postgres  # noqa: E402

REPO = "bench"


def _env(home: str, url: str, backend: str) -> dict[str, str]:
    return {
        "LAKEMOUNT_HOME": home,
        "LAKEMOUNT_METADATA_DB_URL": url,
        "LAKEMOUNT_STAGING_BACKEND": backend,
        "LAKEMOUNT_AUDIT_ENABLED": "false",
    }


def _app(home: str, url: str, backend: str) -> Any:
    from lakemount.app import App
    from lakemount.config import load

    return App(load(None, env=_env(home, url, backend)))


def _worker(home: str, url: str, backend: str, threads: int, seconds: float, wid: int, phase: str, listen: bool,
            ready: Any, go: Any, out: Any) -> None:
    catalog = _app(home, url, backend).catalog
    if listen:
        catalog.kept.watch()  # as a gateway worker does: change notices drop what writes keep
        deadline = time.monotonic() + 60
        while not catalog.kept.live:
            if time.monotonic() > deadline:
                raise RuntimeError("the change listener never connected")
            time.sleep(0.01)
    counts = [0] * threads
    warm = threading.Barrier(threads + 1)

    def loop(t: int) -> None:
        # Each thread warm before the clock, as a server's pooled request threads are (the warm-ups' connections
        # stay the process's, since stop 54 shared by whichever thread runs a statement: a connect is a transaction).
        catalog.put(REPO, "main", f"warm/{phase}/{wid}/{t}", b"warm %d %d" % (wid, t))
        warm.wait()
        go.wait()
        stop = time.monotonic() + seconds
        i = 0
        body = bytearray(1024)
        while time.monotonic() < stop:
            body[:24] = b"%s%02d%03d%016d" % (phase[:3].encode(), t, wid, i)  # distinct bytes: a data PUT each
            catalog.put(REPO, "main", f"{phase}/w{wid:02d}/t{t:02d}/{i:08d}", bytes(body))
            i += 1
        counts[t] = i

    ts = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    warm.wait()
    ready.release()
    go.wait()
    cpu = time.process_time()  # every thread's CPU, from the clock's start (the warm-up is before it)
    for t in ts:
        t.join()
    out.put((sum(counts), time.process_time() - cpu))


def _stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name (the state is [0])."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def pg_cpu(pg: Postgres) -> float:
    """Seconds of CPU the PostgreSQL cluster has used: its postmaster's, with the children it reaped (every
    ended backend), and its live children's."""
    pm = int((pg.data / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    f = _stat(pm)
    total = sum(int(x) for x in f[11:15])  # utime, stime, cutime, cstime
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                c = _stat(pid)
            except OSError:
                continue
            if int(c[1]) == pm:
                total += int(c[11]) + int(c[12])
    return total / tick


def idle_cpu() -> float:
    """Seconds every core of this machine has been idle (``/proc/stat``: idle and iowait)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    return (int(fields[3]) + int(fields[4])) / os.sysconf("SC_CLK_TCK")


def _query(pg: Postgres, db: str, sql: str) -> list[tuple[Any, ...]]:
    conn = pg.admin(db)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def _count(pg: Postgres, db: str) -> int:
    """``db``'s transactions now, every listening backend's wake-ups included (``pg_counting``): its listeners
    ended (each publishes at exit; the workers' listeners reconnect before this returns, and drop what they kept),
    then ``STATS_WAIT_S`` for idle backends to publish the rest.  The admin sessions are not on ``db``."""
    pids = [str(row[0]) for row in _query(pg, "postgres", pg_counting.listeners(db))]
    if pids:
        _query(pg, "postgres", pg_counting.end_listeners(db, pids))
    time.sleep(pg_counting.STATS_WAIT_S)
    return int(_query(pg, "postgres", pg_counting.xact_count(db))[0][1])


def _gone(pg: Postgres, db: str) -> None:
    """Until no backend of ``db`` is left (the workers exited; each backend published at its exit)."""
    deadline = time.monotonic() + 60
    while int(_query(pg, "postgres", pg_counting.backends(db))[0][1]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"backends of {db} still connected 60 s after the workers exited")
        time.sleep(0.05)


def phase(pg: Postgres, db: str, home: str, backend: str, procs: int, threads: int, seconds: float, name: str,
          listen: bool) -> dict[str, float]:
    """One phase: ``procs`` processes x ``threads`` threads putting for ``seconds``; writes/s and transactions per
    write counted as ``pg_counting`` says (``xacts``) and as this benchmark counted before stop 51 (``xacts_old``:
    1.2 s after the workers were ready and after they exited, listeners left connected at the start)."""
    url = pg.url(db)
    ctx = multiprocessing.get_context("spawn")
    q, ready, go = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
    ps = [ctx.Process(target=_worker, args=(home, url, backend, threads, seconds, w, name, listen, ready, go, q)) for w in range(procs)]
    for p in ps:
        p.start()
    for _ in ps:
        if not ready.acquire(timeout=300):
            raise RuntimeError("a worker never got ready")
    before_old = pg.xacts(db)
    before = _count(pg, db)
    pg0, idle0, t0 = pg_cpu(pg), idle_cpu(), time.monotonic()
    go.set()
    got = [q.get(timeout=seconds + 300) for _ in ps]
    pg1, idle1, t1 = pg_cpu(pg), idle_cpu(), time.monotonic()  # backends still connected: their CPU is live
    total = sum(n for n, _ in got)
    for p in ps:
        p.join()
    after_old = pg.xacts(db)
    _gone(pg, db)
    after = _count(pg, db)
    n = max(total, 1)
    cores = os.cpu_count() or 1
    cpu = (sum(c for _, c in got) + pg1 - pg0) / n
    return {"rate": total / seconds, "writes": total, "xacts": (after - before) / n,
            "xacts_old": (after_old - before_old) / n, "cpu_ms": 1000 * cpu, "workers_ms": 1000 * sum(c for _, c in got) / n,
            "pg_ms": 1000 * (pg1 - pg0) / n, "idle": (idle1 - idle0) / (cores * (t1 - t0)), "ceiling": cores / cpu if cpu else 0.0}


def _cpu_line(r: dict[str, float]) -> str:
    cores = os.cpu_count() or 1
    return (f"CPU per write {r['cpu_ms']:.2f} ms (workers {r['workers_ms']:.2f}, PostgreSQL {r['pg_ms']:.2f}), "
            f"{100 * r['idle']:.0f}% of {cores} cores idle meanwhile; at that CPU {cores} cores allow {r['ceiling']:,.0f} writes/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--backends", default="sql,lsm")
    ap.add_argument("--listen", action="store_true",
                    help="each worker listens for change notices, as a gateway worker does (PostgreSQL then runs a "
                         "transaction in every listening backend for each notice it delivers: see docs/SCALE.md)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="lm-putloop-")
    pg = Postgres()
    pg.start()
    try:
        print(f"PostgreSQL + local block store, {args.procs} processes, Catalog.put of distinct 1 KiB objects, "
              f"{args.seconds:g} s per phase:", flush=True)
        for backend in args.backends.split(","):
            db = f"put_{backend}"
            pg.admin().cursor().execute(f"CREATE DATABASE {db}")
            home = os.path.join(root, backend)
            os.makedirs(home, mode=0o700)
            app = _app(home, pg.url(db), backend)
            app.catalog.create_repository(REPO)
            app.metastore.engine.dispose()
            one = phase(pg, db, home, backend, args.procs, 1, args.seconds, "one", args.listen)
            print(f"  {backend}: one at a time per process: {one['rate']:,.0f} writes/s ({one['writes']:.0f}), "
                  f"{one['xacts']:.3f} transactions per write (target <= 1.1; "
                  f"counted as before stop 51: {one['xacts_old']:.3f})\n    {_cpu_line(one)}", flush=True)
            many = phase(pg, db, home, backend, args.procs, args.threads, args.seconds, "many", args.listen)
            print(f"  {backend}: {args.threads} threads per process: {many['rate']:,.0f} writes/s ({many['writes']:.0f}), "
                  f"{many['xacts']:.3f} transactions per write (target <= 0.1; "
                  f"counted as before stop 51: {many['xacts_old']:.3f}); "
                  f"x{many['rate'] / one['rate']:.2f} the one-at-a-time rate (target >= 5x)\n    {_cpu_line(many)}; "
                  f"the 5x target is {5 * one['rate']:,.0f} writes/s, x{5 * one['rate'] / many['ceiling']:.2f} of that ceiling", flush=True)
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
