"""Writes through mounts on several hosts over PostgreSQL + S3 (moto), with and without write-back, in one run.

Issue 36's cluster figures.  On the namespace harness (tests/cluster/harness.py):
``db`` (PostgreSQL), ``s3`` (moto counting what it serves: ``benchmarks/moto_counting.py``)
and ``w1``, ``w2``, ``w3``, each with two mounts of the same repository: ``/lake-wb``
(``--writeback``) and ``/lake-plain`` (without), each with its own home and cache.
Printed, each measured in this run:

1. **a lone writer**: ``cp -r`` of ``--files`` (default 2,000) 1 KiB files, every one
   its own content, into ``main`` on ``w1``: files/s acknowledged (``cp`` returned);
   the time from then until ``w2`` reads the last file's bytes and lists all of them;
   PostgreSQL transactions (``pg_stat_database.xact_commit``, every host's) per file up to
   ``cp``'s return, and counting the commit that follows (``.lakefs/commit`` on ``w1``,
   which waits for the host's journal to be staged); the same less what ``w2``'s reader cost (the
   same reader run on ``w3`` right after, counted alone); object-store requests per file.
   Then the same ``boto3`` sequence straight to moto from ``w1`` (``put_object`` of
   ``--files`` 1 KiB objects one after another, no lakemount in the way): the rate that
   write-back's ``cp -r`` is compared with (target x3);
2. **12 writers on 3 hosts** (``--procs`` per host, default 4) creating and closing 1 KiB
   files for ``--seconds``: files/s acknowledged, and with write-back the rate until all
   of them are staged (an ``fsync`` on each host waits for its journal); transactions per file; then,
   when the phase writes without write-back, its ceiling: the same processes putting 1 KiB objects
   straight to moto for as long (a close without write-back costs at least one PUT);
3. **a crowd on one host** (``--only crowd``): ``--crowd`` (default 16) writer processes on ``w1``
   alone, each creating and closing 1 KiB files for ``--seconds``, so 16 writes are in flight on
   one host (issue 36: <= 0.1 transactions per file then); the same figures as phase 2.

Every count of transactions (``pg_stat_database.xact_commit``) includes the LISTEN backends' wake-ups (each
notice a listening backend is woken by is a transaction of its own, which PostgreSQL 15 publishes only when that
backend exits: the count ends them and waits for the mounts to listen again, leaving the measured cost of that
out) and waits 11 s for idle backends to publish the rest (``Bench.raw_xacts``).

``--only idle`` counts the transactions/s of every host with all mounts up and nothing written (the
timers a writer's figure shares).  ``--statements`` prints, after each run, the PostgreSQL statements run most during it (the
harness's PostgreSQL loads ``pg_stat_statements``), so a transaction per file can be traced.

Run as root: ``PYTHONPATH=. python benchmarks/cluster_write_bench.py [--files 2000] [--seconds 15]
[--only idle,alone,writers,crowd]``.  Every host shares this machine's cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import cluster_bench, pg_counting  # noqa: E402
from benchmarks.scale_bench import WRITER, last_json, load, pct, release, store_counts, wait_ready  # noqa: E402
from tests.cluster.harness import PG_BIN, PYTHON, Cluster, Host, available, cluster, remove_stale  # noqa: E402

MODES = {"wb": ["--writeback"], "plain": ["--no-writeback"]}
STATS_WAIT_S = pg_counting.STATS_WAIT_S  # until every idle backend has published what it counted (``Bench.raw_xacts``)
# After the listeners are back (``Bench.flush_listeners``), until each mount has dropped what it kept: a listener sends its
# LISTEN, then tells its mount that anything may have changed; a folder read again before that is forgotten after it.
SETTLE_S = 1.0
NOTICES = ("inline", "carried", "alone", "held")  # the writers' mounts' staging notices (``Bench.notices``)

# Waits until argv[1]/argv[2] reads as argv[3] and argv[1] lists argv[4] files in all; prints the seconds since argv[5].
SEEN = r"""
import json, os, sys, time
root, last, want, n, since = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4]), float(sys.argv[5])
end = time.time() + 600
read_at = None
while time.time() < end:
    if read_at is None:
        try:
            with open(os.path.join(root, last), "rb") as f:
                if f.read() == want:
                    read_at = time.time()
        except OSError:
            pass
    if read_at is not None:
        count = sum(len(files) for _, _, files in os.walk(root))
        if count == n:
            print(json.dumps({"last_read_s": read_at - since, "all_listed_s": time.time() - since}))
            break
    time.sleep(0.005)
else:
    raise SystemExit(f"{root}: never saw all {n} files")
"""

PUTS = r"""
import json, sys, time
import boto3
endpoint, n = sys.argv[1], int(sys.argv[2])
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                  region_name="us-east-1")
data = b"p" * 1024
s3.put_object(Bucket="lake", Key="bench-puts/warm", Body=data)
t = time.perf_counter()
for i in range(n):
    s3.put_object(Bucket="lake", Key=f"bench-puts/{i:06d}", Body=(b"%d " % i + data)[:1024])
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

# The writers' phase's ceiling without write-back: the same processes, the same seconds, each putting its 1 KiB objects
# straight to moto one after another (a close without write-back costs at least one PUT, so no mount can beat this).
PUTTER = r"""
import json, os, sys, time
import boto3
endpoint, prefix, go, seconds, ready = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                  region_name="us-east-1")
data = b"p" * 1024
s3.put_object(Bucket="lake", Key=f"{prefix}/warm", Body=data)  # the client's first request is not the steady state
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
start = float(open(go).read())
while time.time() < start:
    time.sleep(0.001)
end = start + seconds
n = 0
while time.time() < end:
    s3.put_object(Bucket="lake", Key=f"{prefix}/{n:06d}", Body=(b"%d " % n + data)[:1024])
    n += 1
print(json.dumps({"n": n}))
"""

# fsync of a file in a branch waits until everything this host journaled for the branch is staged.
FSYNC = "import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\nos.fsync(fd)\nos.close(fd)\n"


def cpu_line(cpu: dict[str, float], wall: float, n: int) -> str:
    """Where a window's CPU went (``Bench.cpu`` deltas): the machine's, then each host's, per file."""
    return (f"machine {cpu['all']:.1f} s of {os.cpu_count() or 1} x {wall:.1f} s; "
            + ", ".join(f"{k} {v:.1f} s ({v / n * 1e3:.1f} ms a file)" for k, v in cpu.items() if k != "all"))


def body(i: int) -> bytes:
    return (b"%d " % i + b"c" * 1024)[:1024]


class Bench:
    def __init__(self, c: Cluster, args: argparse.Namespace) -> None:
        self.c = c
        self.args = args
        self.writers = [c["w1"], c["w2"], c["w3"]]
        self.base_env = c.env
        self.overhead = 0.0  # transactions one ``xacts`` call adds itself (``measure_overhead``)
        self.spent = 0.0  # what the calls so far added: left out of every count
        self._admin_ready = False  # ``pg_stat_statements`` made in the ``postgres`` database (``admin``)

    def env(self, host: Host, mode: str, **extra: str) -> dict[str, str]:
        home = f"{host.home}/{mode}"
        os.makedirs(home, mode=0o700, exist_ok=True)
        return self.base_env(host, LAKEMOUNT_HOME=home, **extra)

    def mount(self, host: Host, mode: str) -> None:
        c = self.c
        c.env = lambda h, **extra: self.env(h, mode, **extra)  # type: ignore[method-assign]
        try:
            threads = ["--threads", str(self.args.mount_threads)] if self.args.mount_threads else []
            notify = ["--no-notify"] if self.args.no_notify else []
            c.add_mount(host, ["--head-ttl", "1", *threads, *notify, *MODES[mode]], mountpoint=f"/lake-{mode}", timeout=120)
        finally:
            c.env = self.base_env  # type: ignore[method-assign]

    def listeners(self) -> list[str]:
        """The process ids of the backends LISTENing for change notices (one per host since stop 54: a host's mounts
        share one through ``lakemount/metastore/relay.py``; one per mount process before)."""
        c = self.c
        return c.pg_query(c["db"], pg_counting.listeners("lake")).split()

    def flush_listeners(self) -> int:
        """Make the LISTEN backends publish their transactions, returning how many were ended.

        A backend woken by a notice reads the notify queue in a transaction of its own, but publishes its
        counters only when it next runs a statement or exits, and a listener's connection runs none: on
        PostgreSQL 15 those transactions reach ``xact_commit`` only when the mount disconnects (measured: 3
        listeners, 100 notices, 0 counted while connected, 301 at their close).  So each window ends them
        (``pg_terminate_backend``: a backend publishes at exit), waits until each mount has listened again,
        and counts what they published.  A reconnected mount drops what it kept (notices may have been lost);
        the caller warms what its writers use before the window opens."""
        c = self.c
        pids = self.listeners()
        if not pids:
            return 0
        c.pg_query(c["db"], pg_counting.end_listeners("lake", pids))
        return len(pids)

    def xacts(self) -> float:
        """``xact_commit`` of the ``lake`` database now, every host's, the LISTEN backends' wake-ups included."""
        self.flush_listeners()
        self.spent += self.overhead
        return self.raw_xacts()

    def raw_xacts(self) -> float:
        """``xact_commit`` now, without ending the listeners (what they hold unpublished is left out)."""
        # A busy backend publishes its counters at most once a second, and what it ran in the second before it went
        # idle only after 10 s idle (PostgreSQL 15's PGSTAT_IDLE_INTERVAL; measured: 150 transactions in under a
        # second, 2 counted 1.2 s later, 150 after 11 s): a shorter wait counts the tail of a window in the next one.
        time.sleep(STATS_WAIT_S)
        c = self.c
        return float(c.pg_query(c["db"], "SELECT pg_stat_clear_snapshot(), xact_commit FROM pg_stat_database "
                                "WHERE datname = 'lake'").split("|")[1]) - self.spent

    def measure_overhead(self) -> float:
        """Transactions one :meth:`xacts` adds itself (its sessions, the listeners' reconnects and LISTENs), with
        nothing written: the least of three back-to-back calls' differences (idle timers included)."""
        xs = [self.xacts() for _ in range(4)]
        self.overhead = min(b - a for a, b in zip(xs, xs[1:]))
        return self.overhead

    def admin(self, sql: str) -> str:
        """``sql``'s result, run in the ``postgres`` database: the bench's own questions of the server inside a window
        are no transactions of ``lake``'s (a ``psql`` of ``lake`` cost it two: its connection and its query; until
        stop 55 five of them, ~10 transactions, were counted in each crowd window)."""
        c = self.c
        if not self._admin_ready:
            c["db"].run("runuser", "-u", "postgres", "--", str(PG_BIN / "psql"), "-h", c["db"].ip, "-U", "postgres", "-d", "postgres",
                        "-Atc", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self._admin_ready = True
        return c["db"].run("runuser", "-u", "postgres", "--", str(PG_BIN / "psql"), "-h", c["db"].ip, "-U", "postgres",
                           "-d", "postgres", "-Atc", sql).stdout.strip()

    def sessions(self) -> float:
        """Sessions the ``lake`` database has had (each connect is a transaction of its own: ``xact_commit`` counts it)."""
        return float(self.admin("SELECT pg_stat_clear_snapshot(), sessions FROM pg_stat_database WHERE datname = 'lake'").split("|")[1])

    def top_statements(self, n: int = 8) -> str:
        """The ``n`` statements run most since the last reset (``--statements``), then a reset."""
        where = "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'lake' AND s.query NOT LIKE '%pg_stat%'"
        rows = self.admin(f"SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) {where} ORDER BY calls DESC LIMIT {n}")
        total = self.admin(f"SELECT coalesce(sum(calls), 0), count(*) {where}") if n else "0|0"
        self.admin("SELECT pg_stat_statements_reset()")
        calls, kinds = total.split("|")
        return "\n".join(f"      {line}" for line in rows.splitlines()) + (f"\n      ({calls} calls of {kinds} statements in all)" if n else "")

    def idle(self, seconds: float) -> tuple[float, str]:
        """PostgreSQL transactions per second, every host's, while every mount is up and nothing is written: the
        timers a writer's transactions per file share (amortized over its files per second); and the statements."""
        self.top_statements()
        x0 = self.xacts()
        time.sleep(seconds)
        x1 = self.xacts()
        return (x1 - x0) / (seconds + STATS_WAIT_S), self.top_statements(12)

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far by the live processes of each host's namespace, and by the whole
        machine (``all``, from /proc/stat): where a run's cores went."""
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for name, h in self.c.hosts.items():
            pids = subprocess.run(["ip", "netns", "pids", h.ns], capture_output=True, text=True, check=False).stdout.split()
            total = 0
            for pid in pids:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                total += int(fields[11]) + int(fields[12])  # utime, stime
            out[name] = total / tick
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        out["all"] = (sum(int(x) for x in cpu) - int(cpu[3]) - int(cpu[4])) / tick  # all but idle and iowait
        return out

    def vacuums(self) -> int:
        """Autovacuum and autoanalyze runs of the ``lake`` database's tables so far (each a transaction of its own)."""
        c = self.c
        return int(c.pg_query(c["db"], "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_user_tables") or 0)

    def store(self) -> float:
        return float(store_counts(self.c).get("total", 0.0))

    def commit(self, host: Host, mode: str, message: str) -> float:
        t = time.perf_counter()
        host.run("sh", "-c", f"echo {message} > /lake-{mode}/repo/main/.lakefs/commit", timeout=1800)
        return time.perf_counter() - t

    # -- 1. one writer alone ------------------------------------------------------------
    def alone(self, mode: str, rnd: int) -> dict[str, float]:
        a = self.args
        w1, w2 = self.writers[0], self.writers[1]
        src = f"{w1.home}/cp-src"
        if not os.path.isdir(src):
            os.makedirs(src)
            for d in range(10):
                os.makedirs(f"{src}/d{d}")
                for i in range(a.files // 10):
                    Path(f"{src}/d{d}/f{i:05d}").write_bytes(body(d * 100_000 + i))
        last = f"d9/f{a.files // 10 - 1:05d}"
        name = f"cp-{mode}-{rnd}"
        self.xacts()
        time.sleep(SETTLE_S)
        for h in (w1, w2):  # the listeners' reconnect dropped what the mounts kept: list the branch again
            h.run("ls", "-a", f"/lake-{mode}/repo/main", timeout=120)
        x0, s0 = self.raw_xacts(), self.store()
        if a.idle_first:  # the hosts stop listening for idleness (stop 56): the copy starts on hosts that came back
            time.sleep(a.idle_first)
        start = time.time()
        c0 = self.cpu()
        t = time.perf_counter()
        w1.run("cp", "-r", src, f"/lake-{mode}/repo/main/{name}", timeout=1800)
        cp_s = time.perf_counter() - t
        c1 = self.cpu()
        acked = time.time()
        seen = last_json(w2.python(SEEN, f"/lake-{mode}/repo/main/{name}", last, (Path(src) / last).read_text(),
                                   str(a.files // 10 * 10), str(acked), timeout=900))
        x1, s1 = self.xacts(), self.store()
        # What w2's reader cost: the same reader on w3 (which got the same notices) right after, counted alone.
        w3 = self.writers[2]
        w3.python(SEEN, f"/lake-{mode}/repo/main/{name}", last, (Path(src) / last).read_text(), str(a.files // 10 * 10),
                  str(acked), timeout=900)
        reader = self.xacts() - x1
        commit_s = self.commit(w1, mode, f"{name}")
        x2 = self.xacts()
        n = a.files // 10 * 10
        return {"files": n, "cp_s": cp_s, "per_s": n / cp_s, "last_read_s": seen["last_read_s"],
                "all_listed_s": seen["all_listed_s"], "xacts_per_file": (x1 - x0) / n, "reader": reader,
                "writes_per_file": (x1 - x0 - reader) / n, "xacts_per_file_with_commit": (x2 - x0 - reader) / n, "store_per_file": (s1 - s0) / n,
                "commit_s": commit_s, "started": start, "cpu": {k: c1[k] - c0.get(k, 0.0) for k in c1}}

    def warm(self, mode: str, n: int = 100) -> float:
        """An untimed ``cp -r`` of ``n`` files first: a mount's first write pays for its S3 client, its
        connections and the repository's empty object, which is not the steady state."""
        w1 = self.writers[0]
        src = f"{w1.home}/cp-warm"
        if not os.path.isdir(src):
            os.makedirs(src)
            for i in range(n):
                Path(f"{src}/w{i:04d}").write_bytes(body(10_000_000 + i))
        t = time.perf_counter()
        w1.run("cp", "-r", src, f"/lake-{mode}/repo/main/warm-{mode}", timeout=1800)
        return time.perf_counter() - t

    def puts(self) -> float:
        r = last_json(self.writers[0].python(PUTS, self.c.s3_endpoint, str(self.args.files), timeout=1800))
        return self.args.files / r["seconds"]

    # -- 2. 12 writers ----------------------------------------------------------------------
    def putters_run(self, tag: str, hosts: list[Host], per_host: int) -> dict[str, Any]:
        """The writers' processes, as many on each host, putting to moto straight for ``--seconds`` (``PUTTER``)."""
        a = self.args
        go = f"{self.c.dir}/go-puts-{tag}"
        procs = []
        for h in hosts:
            for k in range(per_host):
                out = f"{h.home}/putter-{tag}-{k}.out"
                procs.append((h.spawn(PYTHON, "-c", PUTTER, self.c.s3_endpoint, f"bench-putters/{tag}-{h.name}-{k}", go,
                                      str(a.seconds), f"{go}.ready-{h.name}-{k}", log=out), out))
        wait_ready(go, len(procs))
        c0, t0 = self.cpu(), time.perf_counter()
        release(go)
        n = 0
        for p, out in procs:
            p.wait(timeout=a.seconds + 600)
            n += last_json(Path(out).read_text())["n"]
        c1, wall = self.cpu(), time.perf_counter() - t0
        return {"files": n, "per_s": n / a.seconds, "cpu": {k: c1[k] - c0.get(k, 0.0) for k in c1}, "wall": wall}

    def writers_run(self, mode: str, tag: str, hosts: list[Host], per_host: int) -> dict[str, Any]:
        a = self.args
        go = f"{self.c.dir}/go-{mode}-{tag}"
        procs = []
        for h in hosts:
            for k in range(per_host):
                root = f"/lake-{mode}/repo/main/{tag}-{h.name}-{k}"
                out = f"{h.home}/writer-{mode}-{tag}-{k}.out"
                procs.append((h.spawn(PYTHON, "-c", WRITER, root, go, str(a.seconds), f"{go}.ready-{h.name}-{k}", log=out), out))
        wait_ready(go, len(procs))
        x0 = self.xacts()
        time.sleep(SETTLE_S)
        for h in hosts:  # the listeners' reconnect dropped what the mounts kept: read the writers' folders again
            h.run("ls", "-a", *[f"/lake-{mode}/repo/main/{tag}-{h.name}-{k}" for k in range(per_host)], timeout=120)
        v0 = self.vacuums()  # (a question of ``lake``'s: before the count, ``raw_xacts`` waits for it to be published)
        x0 = self.raw_xacts()
        e0 = self.sessions()
        if a.statements:
            self.top_statements(0)  # from here: the writers' files, not their folders and first files
        n0 = {h.name: self.notices(h, mode) for h in hosts}
        c0, t0 = self.cpu(), time.perf_counter()
        release(go)
        n, lat = 0, []
        for p, out in procs:
            p.wait(timeout=a.seconds + 600)
            r = last_json(Path(out).read_text())
            n += r["n"]
            lat += r["lat"]
        c1, wall = self.cpu(), time.perf_counter() - t0
        notices = {k: sum(self.notices(h, mode).get(k, 0) - n0[h.name].get(k, 0) for h in hosts) for k in NOTICES}
        t = time.perf_counter()
        for h in hosts:  # with write-back: wait until each host's journal is staged
            h.python(FSYNC, f"/lake-{mode}/repo/main/{tag}-{h.name}-0/warm", timeout=1800)
        drain_s = time.perf_counter() - t
        sessions = self.sessions() - e0  # the hosts': the bench asks in the ``postgres`` database (``admin``)
        x1 = self.xacts()
        vac = self.vacuums() - v0
        return {"files": n, "per_s": n / a.seconds, "vacuums": vac, "staged_per_s": n / (a.seconds + drain_s), "drain_s": drain_s,
                "sessions": sessions, "xacts_per_file": (x1 - x0) / n, "close_p50_ms": pct(lat, 50) * 1e3, "close_p99_ms": pct(lat, 99) * 1e3,
                "cpu": {k: c1[k] - c0.get(k, 0.0) for k in c1}, "wall": wall, "notices": notices}

    def notices(self, host: Host, mode: str) -> dict[str, int]:
        """The staging notices the writers' mount on ``host`` sent so far (``.lakefs/stats``, stop 54): with a
        staging, owed ones carried by one, owed ones sent alone (a transaction each), stagings held."""
        text = host.run("cat", f"/lake-{mode}/.lakefs/stats", timeout=60).stdout
        out = {}
        for line in text.splitlines():
            for k in NOTICES:
                if line.startswith(f"lakemount_fuse_staging_notices_{k} "):
                    out[k] = int(float(line.split()[1]))
        return out


def report(b: Bench, r: dict[str, Any], mode: str) -> None:
    print(f"  {mode}: {r['per_s']:.0f} files/s acknowledged ({r['files']} files), close p50 {r['close_p50_ms']:.1f} ms "
          f"p99 {r['close_p99_ms']:.1f} ms; all staged {r['drain_s']:.2f} s after the last close "
          f"({r['staged_per_s']:.0f} files/s to staged); PostgreSQL {r['xacts_per_file']:.3f} transactions per file "
          f"({r['vacuums']} autovacuum/autoanalyze runs, {r['sessions']:.0f} new sessions among them); "
          f"load {load()}", flush=True)
    print(f"    CPU over the {r['wall']:.1f} s the writers ran (long-lived processes; the writers themselves are gone): "
          + cpu_line(r["cpu"], r["wall"], r["files"]), flush=True)
    n = r["notices"]
    print(f"    staging notices of the writers' mounts in the window: {n['inline']} sent with a staging ({n['carried']} of "
          f"them owed ones a staging carried), {n['alone']} owed ones sent alone (a transaction each), {n['held']} "
          f"stagings held", flush=True)
    if b.args.statements:
        print("    PostgreSQL statements run most (calls | statement):\n" + b.top_statements(16), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=2000, help="files of the lone cp -r (a multiple of 10)")
    ap.add_argument("--procs", type=int, default=4, help="writer processes per host (3 hosts)")
    ap.add_argument("--seconds", type=float, default=15.0, help="how long the writers of phase 2 write")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of phase 1, each mode once per round, alternating first")
    ap.add_argument("--only", default="alone,writers")
    ap.add_argument("--no-notify", action="store_true", help="mount with --no-notify (no LISTEN on PostgreSQL)")
    ap.add_argument("--mount-threads", type=int, default=0, help="each mount's --threads (0: the mount's default)")
    ap.add_argument("--crowd", type=int, default=16, help="writer processes on w1 alone in phase 3 (crowd)")
    ap.add_argument("--statements", action="store_true", help="print the PostgreSQL statements run most in each run")
    ap.add_argument("--idle-first", type=float, default=0.0,
                    help="seconds the lone writer's phase waits, counted, before each cp -r (past notify.IDLE_S: its "
                         "hosts have stopped listening and the copy starts on hosts that listen again)")
    ap.add_argument("--modes", default="wb,plain", help="which mounts the writers' phases write through: wb, plain or both")
    a = ap.parse_args()
    if a.files % 10 or a.files <= 0:
        ap.error("--files must be a positive multiple of 10")
    only = set(a.only.split(","))
    modes = [m for m in MODES if m in a.modes.split(",")]
    if not modes:
        ap.error(f"--modes names none of {', '.join(MODES)}")
    why = available()
    if why:
        raise SystemExit(f"cluster_write_bench: {why}")
    remove_stale()
    print(f"load average before: {load()} ({os.cpu_count()} cores shared by every host and whatever else runs)", flush=True)
    with cluster(["db", "w1", "w2", "w3"], deadline=3000) as c:
        cluster_bench.start_moto(c, c["w1"])
        b = Bench(c, a)
        c["w1"].run(PYTHON, "-m", "lakemount.cli.main", "repo", "create", "lakefs://repo", timeout=120, env=b.env(c["w1"], "wb"))
        for h in b.writers:
            for mode in MODES:
                b.mount(h, mode)
        print(f"{len(b.listeners())} backends LISTEN for change notices; ending them to publish their wake-ups costs "
              f"{b.measure_overhead():.0f} transactions a count (measured back to back with nothing written; left out of "
              f"every figure below)", flush=True)
        if "idle" in only:
            rate, top = b.idle(a.seconds)
            print(f"0. idle: {rate:.2f} PostgreSQL transactions/s with all 6 mounts up, nothing written, {a.seconds:g} s; "
                  f"load {load()}\n    PostgreSQL statements run most (calls | statement):\n{top}", flush=True)
        if "alone" in only:
            print(f"1. a lone writer: cp -r of {a.files:,} 1 KiB files into main on w1, read on w2; then boto3 put_object "
                  f"of {a.files:,} 1 KiB objects one at a time straight to moto:", flush=True)
            for mode in MODES:
                print(f"  warm-up {mode} (untimed): cp -r of 100 files {b.warm(mode):.1f} s", flush=True)
            runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
            for rnd in range(a.rounds):
                for mode in list(MODES) if rnd % 2 == 0 else list(MODES)[::-1]:
                    if a.statements:
                        b.top_statements()
                    r = b.alone(mode, rnd)
                    runs[mode].append(r)
                    print(f"  round {rnd + 1} {mode}: cp -r {r['cp_s']:.2f} s = {r['per_s']:.0f} files/s acknowledged; on w2 the last "
                          f"file read {r['last_read_s']:.2f} s later, all {r['files']} listed {r['all_listed_s']:.2f} s later; "
                          f"PostgreSQL {r['xacts_per_file']:.3f} transactions per file with w2's reader, "
                          f"{r['writes_per_file']:.3f} without it (the same reader on w3 after: {r['reader']:.0f}), "
                          f"{r['xacts_per_file_with_commit']:.3f} with the commit ({r['commit_s']:.2f} s); object store {r['store_per_file']:.2f} requests per file; "
                          f"load {load()}", flush=True)
                    print("    CPU while cp ran (long-lived processes: w1's mounts, not cp itself): "
                          + cpu_line(r["cpu"], r["cp_s"], r["files"]), flush=True)
                    if a.statements:
                        print("    PostgreSQL statements run most (calls | statement), the commit included:\n"
                              + b.top_statements(12), flush=True)
            puts = b.puts()
            print(f"  boto3 put_object straight to moto, one at a time: {puts:.0f} PUTs/s; load {load()}", flush=True)
            for mode in MODES:
                best = max(runs[mode], key=lambda r: r["per_s"])
                print(f"  {mode}: best {best['per_s']:.0f} files/s = x{best['per_s'] / puts:.2f} of boto3's PUTs to moto "
                      f"(write-back target x3 and 1,000 files/s; without, x2 of 36 files/s); transactions per file "
                      f"{best['writes_per_file']:.3f} without the reader ({best['xacts_per_file']:.3f} with it), with the commit {best['xacts_per_file_with_commit']:.3f} "
                      f"(targets: <= 1.1 without write-back; <= 0.2 with, counting the commit)", flush=True)
        if "writers" in only:
            print(f"2. {3 * a.procs} writers (3 hosts x {a.procs} processes) creating 1 KiB files for {a.seconds:g} s "
                  f"(target x10 of 47-55 files/s):", flush=True)
            rates = {}
            for rnd, mode in enumerate(modes):
                if a.statements:
                    b.top_statements()
                r = b.writers_run(mode, f"m{rnd}", b.writers, a.procs)
                rates[mode] = r["per_s"]
                report(b, r, mode)
            if "plain" in rates:
                p = b.putters_run("m", b.writers, a.procs)
                print(f"  ceiling without write-back: the same {3 * a.procs} processes putting 1 KiB objects straight to moto "
                      f"for {a.seconds:g} s: {p['per_s']:.0f} PUTs/s; plain's {rates['plain']:.0f} files/s = x{rates['plain'] / p['per_s']:.2f} "
                      f"of it (a close without write-back is at least one PUT); the target's 470-550 files/s "
                      f"{'fits under' if p['per_s'] >= 470 else 'is above'} this ceiling; load {load()}", flush=True)
                # Only moto's and the machine's: a host's count drops by what its putters used, gone with them.
                print("    CPU while they put (the putters themselves are gone): "
                      + cpu_line({k: v for k, v in p["cpu"].items() if k in ("all", "s3")}, p["wall"], p["files"]).replace(" a file", " a PUT"),
                      flush=True)
        if "crowd" in only:
            print(f"3. a crowd: {a.crowd} writers on w1 alone creating 1 KiB files for {a.seconds:g} s "
                  f"(target <= 0.1 transactions per file at 16 or more in flight on a host):", flush=True)
            for rnd, mode in enumerate(modes):
                if a.statements:
                    b.top_statements()
                report(b, b.writers_run(mode, f"c{rnd}", b.writers[:1], a.crowd), mode)
    print(f"load average after: {load()}")
    subprocess.run(["uptime"], check=False)


if __name__ == "__main__":
    main()
