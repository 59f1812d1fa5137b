"""What a change notice costs PostgreSQL per listening process: each listening backend's wake-up is a transaction.

On a throwaway PostgreSQL cluster (``benchmarks/staging_bench.py``'s), ``--notices`` notices (default 50), each
``pg_notify`` a transaction of its own 50 ms apart, are counted by PostgreSQL (``pg_stat_database.xact_commit +
xact_rollback``, the listening connections closed before the closing count: a backend publishes a listener's
wake-ups only at its exit, ``benchmarks/pg_counting.py``) with:

- psycopg2 connections: none listening, one, two, and the sender's own connection listening (a notice sent on
  a listening connection: is its own wake-up free?);
- ``--listeners`` (default 3) ``lakemount.metastore.notify.Listener``s of one process, each listening on
  PostgreSQL itself (``share=False``: what every mount and gateway worker did before stop 54), then the same
  sharing one backend through the host's relay (``lakemount/metastore/relay.py``), each checked to hear every notice.

Prints transactions per notice for each.  Run: ``PYTHONPATH=. .venv/bin/python benchmarks/listen_wake_bench.py``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import pg_counting  # noqa: E402
from benchmarks.staging_bench import Postgres  # noqa: E402

DB = "wake"


def _count(pg: Postgres) -> int:
    time.sleep(pg_counting.STATS_WAIT_S)
    admin = pg.admin()
    try:
        cur = admin.cursor()
        cur.execute(pg_counting.xact_count(DB))
        return int(cur.fetchone()[1])
    finally:
        admin.close()


def _connect(pg: Postgres) -> Any:
    import psycopg2

    conn = psycopg2.connect(host=str(pg.base), port=pg.port, user="postgres", dbname=DB)
    conn.autocommit = True
    return conn


def _raw(pg: Postgres, n: int, listening: int, own: bool) -> float:
    """Transactions per notice with ``listening`` psycopg2 listeners (``own``: the first of them sends)."""
    listeners = []
    for _ in range(listening):
        conn = _connect(pg)
        conn.cursor().execute("LISTEN ch")
        listeners.append(conn)
    sender = listeners[0] if own else _connect(pg)
    before = _count(pg)
    for i in range(n):
        sender.cursor().execute("SELECT pg_notify('ch', %s)", (str(i),))
        time.sleep(0.05)
        for conn in listeners:
            conn.poll()
            conn.notifies.clear()
    for conn in {id(c): c for c in [*listeners, sender]}.values():
        conn.close()
    return (_count(pg) - before) / n


def _lakemount(pg: Postgres, n: int, listening: int, share: bool) -> float:
    """Transactions per notice with ``listening`` lakemount listeners of this process (``share``: through the relay)."""
    import sqlalchemy as sa

    from lakemount.metastore import notify

    url = sa.make_url(pg.url(DB))
    heard = [0] * listening
    lock = threading.Lock()

    def callback(i: int) -> Any:
        def got(batch: Any) -> None:
            with lock:
                heard[i] += len(batch or [])
        return got

    listeners = [notify.Listener(url, callback(i), poll=0.1, share=share).start() for i in range(listening)]
    try:
        for listener in listeners:
            if not listener.connected.wait(30):
                raise RuntimeError("a listener never connected")
        sender = _connect(pg)
        before = _count(pg)
        for i in range(n):
            text = notify.payload("bench", notify.STAGING, "r", f"b{i}")
            sender.cursor().execute("SELECT pg_notify(%s, %s)", (notify.CHANNEL, text))
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while min(heard) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        if min(heard) < n:
            raise RuntimeError(f"listeners heard {heard} of {n} notices")
    finally:
        for listener in listeners:
            listener.stop()
    sender.close()
    return (_count(pg) - before) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notices", type=int, default=50)
    ap.add_argument("--listeners", type=int, default=3)
    a = ap.parse_args()
    pg = Postgres()
    pg.start()
    try:
        pg.admin().cursor().execute(f"CREATE DATABASE {DB}")
        print(f"{a.notices} notices, each pg_notify a transaction of its own; PostgreSQL transactions per notice:", flush=True)
        for label, listening, own in (("no listener", 0, False), ("one listening connection", 1, False),
                                      ("two listening connections", 2, False),
                                      ("one, which sends the notices itself", 1, True)):
            print(f"  {label}: {_raw(pg, a.notices, listening, own):.2f}", flush=True)
        for share in (False, True):
            how = "sharing one backend through the host's relay" if share else "each listening on PostgreSQL itself"
            print(f"  {a.listeners} lakemount listeners of one process, {how}: "
                  f"{_lakemount(pg, a.notices, a.listeners, share):.2f} (each heard every notice)", flush=True)
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
