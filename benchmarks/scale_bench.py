"""Writes from several hosts, old staging (``sql``) vs new (``lsm``, docs/DESIGN.md §4), on one cluster in one run.

On the namespace harness (tests/cluster/harness.py): ``db`` (PostgreSQL), ``s3``
(moto counting its requests: ``benchmarks/moto_counting.py``), and ``w1``, ``w2``,
``w3``, each with two mounts, ``/lake-sql`` and ``/lake-lsm`` (``staging.backend``
sql and lsm, each its own home and cache), writing into the repositories ``rsql``
and ``rlsm``.  Every figure below is measured for both backends in this run,
phases alternating between them:

1. **mount writes**: ``--procs`` processes per host (default 4, so 12) create and
   close 1 KiB files in ``main`` for ``--seconds``: files/s, PostgreSQL transactions
   per file (``pg_stat_database.xact_commit``), and where the time goes per file:
   in the mount's handlers (``.lakefs/stats`` latency sums, by operation), in
   PostgreSQL (``pg_stat_statements`` execution time), in the object store
   (moto's service time), and the rest (kernel FUSE round trips, the writer);
2. **visibility across hosts**: ``w1`` overwrites ``main/fresh.txt`` with a counter;
   watchers on ``w2`` and ``w3`` re-read it every 2 ms: the time from ``close``
   returning on ``w1`` to the new content read elsewhere, p50/p99 (target p99 <= 100 ms);
3. **one writer alone**: ``cp -r`` of ``--cp-files`` (default 10,000) 1 KiB files into
   the mount on ``w1``, then a boto3 ``put_object`` loop of ``--sdk-puts`` 1 KiB objects
   through a gateway (``lakemount serve`` on ``w3``, one per backend): seconds and files/s,
   in ``--alone-rounds`` rounds (which backend goes first alternates; the ratio is of the totals, and each
   round's own ratio is printed: its two runs are minutes apart at most), after an untimed warm-up ``cp -r``
   of ``--alone-warm`` files into each mount;
4. **list appends to ONE branch**: 12 processes (3 hosts x 4) append to the staging
   list of one branch (``side``, which nobody reads: the appended files do not exist) as fast as they can, with no object-store traffic (``lsm``:
   ``StagingLists.append`` of a file description, the statement a flush runs;
   ``sql``: ``stage`` of one entry, the statement a write runs), then the same into
   12 branches (one each): appends/s, and one branch / 12 branches (near 1: the
   branch's row is not a hot row that serialises writers).

Run as root: ``PYTHONPATH=. python benchmarks/scale_bench.py [--quick] [--only mount,visible,alone,appends]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import cluster_bench  # noqa: E402
from tests.cluster.harness import PYTHON, Cluster, Host, available, cluster, remove_stale  # noqa: E402

BACKENDS = ("sql", "lsm")
ROOT = str(Path(__file__).resolve().parents[1])
FUSE_OPS = ("lookup", "create", "write", "flush", "release", "getattr", "setattr", "mkdir", "open")

WRITER = r"""
import json, os, sys, time
root, go, seconds, ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
os.mkdir(root)
data = b"x" * 1024
with open(f"{root}/warm", "wb") as f:  # the first file of a process in a new directory is not the steady state
    f.write(data)
def body(n):  # every file its own content: stored content-addressed, equal files would be stored once
    return (f"{root}/{n}".encode() + data)[:1024]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
start = float(open(go).read())
while time.time() < start:
    time.sleep(0.001)
end = start + seconds
n, lat = 0, []
while time.time() < end:
    t = time.perf_counter()
    with open(f"{root}/f{n:06d}", "wb") as f:
        f.write(body(n))
    lat.append(time.perf_counter() - t)
    n += 1
print(json.dumps({"n": n, "lat": sorted(lat)}))
"""

WATCH = cluster_bench.WATCH  # a reader that timestamps each new value of a marker file

OVERWRITE = r"""
import json, sys, time
path, first, n, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
done = {}
for i in range(first, first + n):
    with open(path, "w") as f:
        f.write(f"{i}\n")
    done[i] = time.time()
    time.sleep(gap)
print(json.dumps(done))
"""

BRANCHES = r"""
import sys
from lakemount.app import App
cat = App.from_config(None).catalog
for name in ["side", *(f"b{i}" for i in range(12))]:
    cat.create_branch(sys.argv[1], name, "main")
"""

SETUP_USER = r"""
from lakemount.app import App
from benchmarks.gateway_bench import KEY, SECRET
app = App.from_config(None)
app.auth.create_user("bench")
app.auth.attach_policy("bench", "Admin")
app.auth.create_credentials("bench", KEY, SECRET)
print("ok")
"""

SDK = r"""
import json, sys, time
import boto3
from botocore.config import Config
from benchmarks.gateway_bench import KEY, SECRET
endpoint, repo, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                  region_name="us-east-1", config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
data = b"y" * 1024
s3.put_object(Bucket=repo, Key="main/sdk/warm", Body=data)
t = time.perf_counter()
for i in range(n):
    s3.put_object(Bucket=repo, Key=f"main/sdk/{i:06d}", Body=(b"%d " % i + data)[:1024])
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

APPENDS = r"""
import json, multiprocessing as mp, sys, time
import os
db, backend, repo, branches, procs, go, seconds, host = (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(","),
    int(sys.argv[5]), sys.argv[6], float(sys.argv[7]), sys.argv[8])

def work(k):
    from lakemount.graveler.model import Entry
    from lakemount.graveler.staging.file import StagingFileInfo
    from lakemount.metastore.sql import SqlRefStore
    from lakemount.metastore.sql_staging import SqlStaging
    from lakemount.metastore.staging_lists import SqlStagingLists
    refs = SqlRefStore(db)
    branch = branches[k % len(branches)]
    ns = refs.get_repository(repo).storage_namespace
    lists = SqlStagingLists(refs) if backend == "lsm" else None
    rows = SqlStaging(refs)
    value = Entry("data/x", 1024, etag="0" * 32).value()
    refs.get_branch(repo, branch)  # connected before the clock starts
    open(f"{go}.ready-{host}-{k}", "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    start = float(open(go).read())
    while time.time() < start:
        time.sleep(0.001)
    n, end = 0, start + seconds
    while time.time() < end:
        key = b"appends/%s-%d/%08d" % (host.encode(), k, n)
        if lists is not None:  # the statement an lsm flush runs: append one file's description
            lists.append(repo, branch, ns, StagingFileInfo(f"{ns}/_lakefs/staging/bench-{host}-{k}-{n}.sst", 1,
                                                           key, key, 1, 100, "0" * 64))
        else:  # the statement an sql write runs: one staged entry
            rows.stage(repo, branch, [(key, value)])
        n += 1
    return n

with mp.get_context("fork").Pool(procs) as pool:  # fork: a -c script has no module a spawned child could import
    counts = pool.map(work, range(procs))
print(json.dumps({"n": sum(counts)}))
"""


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def last_json(text: str) -> Any:
    return json.loads(text.strip().splitlines()[-1])


class Bench:
    def __init__(self, c: Cluster, args: argparse.Namespace) -> None:
        self.c = c
        self.args = args
        self.writers = [c["w1"], c["w2"], c["w3"]]
        base_env = c.env
        self.base_env = base_env

    # -- environment per backend -------------------------------------------------------
    def env(self, host: Host, backend: str, **extra: str) -> dict[str, str]:
        home = f"{host.home}/{backend}"
        os.makedirs(home, mode=0o700, exist_ok=True)
        return self.base_env(host, LAKEMOUNT_HOME=home, LAKEMOUNT_STAGING_BACKEND=backend, **extra)

    def lakemount(self, host: Host, backend: str, *args: str) -> None:
        host.run(PYTHON, "-m", "lakemount.cli.main", *args, timeout=120, env=self.env(host, backend))

    def mount(self, host: Host, backend: str) -> None:
        c = self.c
        c.env = lambda h, **extra: self.env(h, backend, **extra)  # type: ignore[method-assign]
        try:
            c.add_mount(host, ["--head-ttl", "1"], mountpoint=f"/lake-{backend}", timeout=120)
        finally:
            c.env = self.base_env  # type: ignore[method-assign]

    def gateway(self, host: Host, backend: str, port: int) -> str:
        argv = f"{PYTHON} -m lakemount.cli.main serve --listen {host.ip}:{port} --workers 1 --no-api"
        host.spawn("sh", "-c", f"cd {ROOT} && exec {argv}", env=self.env(host, backend), log=f"{host.home}/gw-{backend}.log")
        wait = cluster_bench.WAIT_HTTP
        self.c["w2"].python(wait, f"http://{host.ip}:{port}", timeout=200)
        return f"http://{host.ip}:{port}"

    # -- counters ---------------------------------------------------------------------
    def pg(self) -> dict[str, float]:
        c = self.c
        row = c.pg_query(c["db"], "SELECT pg_stat_clear_snapshot(), (SELECT xact_commit FROM pg_stat_database WHERE datname = 'lake'), "
                         "(SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                         " WHERE d.datname = 'lake' AND s.query NOT LIKE '%pg_stat%'), "
                         "(SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                         " WHERE d.datname = 'lake' AND s.query NOT LIKE '%pg_stat%')")
        _, xacts, stmts, ms = row.split("|")
        return {"xacts": float(xacts), "statements": float(stmts), "exec_ms": float(ms)}

    def store(self) -> dict[str, float]:
        return store_counts(self.c)

    def fuse(self, backend: str) -> dict[str, float]:
        """Seconds spent in each mount operation, summed over the three hosts' ``backend`` mounts."""
        out: dict[str, float] = {}
        for h in self.writers:
            text = h.run("cat", f"/lake-{backend}/.lakefs/stats").stdout
            for line in text.splitlines():
                if line.startswith("lakemount_fuse_op_seconds_sum{"):
                    op = line.split('op="', 1)[1].split('"', 1)[0]
                    out[op] = out.get(op, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    def snapshot(self, backend: str) -> dict[str, Any]:
        time.sleep(1.2)  # backends publish their transaction counters at most once a second
        return {"pg": self.pg(), "s3": self.store(), "fuse": self.fuse(backend), "t": time.time()}

    def go(self, path: str, ready: int, backend: str) -> dict[str, Any]:
        """Wait until ``ready`` processes have written ``path.ready-*``, take the counters' snapshot, then
        start them all 0.5 s from now; returns the snapshot."""
        wait_ready(path, ready)
        before = self.snapshot(backend)
        release(path)
        return before

    # -- 1. mount writes ----------------------------------------------------------------
    def mount_writes(self, backend: str, tag: str) -> dict[str, Any]:
        a = self.args
        go = f"{self.c.dir}/go-{backend}-{tag}"
        procs = []
        for h in self.writers:
            for k in range(a.procs):
                root = f"/lake-{backend}/r{backend}/main/{tag}-{h.name}-{k}"
                procs.append((h, h.spawn(PYTHON, "-c", WRITER, root, go, str(a.seconds), f"{go}.ready-{h.name}-{k}",
                                         log=f"{h.home}/writer-{backend}-{tag}-{k}.out"), f"{h.home}/writer-{backend}-{tag}-{k}.out"))
        before = self.go(go, len(procs), backend)
        n, lat = 0, []
        for _h, p, out in procs:
            p.wait(timeout=a.seconds + 300)
            r = last_json(Path(out).read_text())
            n += r["n"]
            lat += r["lat"]
        after = self.snapshot(backend)
        d_pg = {k: after["pg"][k] - before["pg"][k] for k in before["pg"]}
        d_s3 = {k: after["s3"].get(k, 0.0) - before["s3"].get(k, 0.0) for k in after["s3"]}
        d_fuse = {k: after["fuse"].get(k, 0.0) - before["fuse"].get(k, 0.0) for k in after["fuse"]}
        writers = len(procs)
        return {
            "files": n, "files_per_s": n / a.seconds,
            "xacts_per_file": d_pg["xacts"] / n, "statements_per_file": d_pg["statements"] / n,
            "pg_ms_per_file": d_pg["exec_ms"] / n,
            "s3_per_file": d_s3.get("total", 0.0) / n, "s3_puts_per_file": d_s3.get("PUT", 0.0) / n,
            "s3_ms_per_file": d_s3.get("seconds", 0.0) * 1e3 / n,
            "fuse_ms_per_file": {k: v * 1e3 / n for k, v in sorted(d_fuse.items()) if v > 0},
            "wall_ms_per_file": writers * a.seconds * 1e3 / n,
            "close_p50_ms": pct(lat, 50) * 1e3, "close_p99_ms": pct(lat, 99) * 1e3,
        }

    # -- 2. visibility across hosts ----------------------------------------------------------
    def visibility(self, backend: str) -> dict[str, float]:
        a = self.args
        path = f"/lake-{backend}/r{backend}/main/fresh.txt"
        w1 = self.writers[0]
        w1.run("sh", "-c", f"echo 0 > {path}")
        time.sleep(1.5)
        watchers = {h.name: h.spawn(PYTHON, "-c", WATCH, path, "1", str(a.samples), log=f"{h.home}/watch-{backend}.out")
                    for h in self.writers[1:]}
        time.sleep(1.0)
        done = last_json(w1.python(OVERWRITE, path, "1", str(a.samples), "0.2", timeout=600))
        lat = []
        for name, p in watchers.items():
            p.wait(timeout=330)
            seen = last_json(Path(f"{self.c[name].home}/watch-{backend}.out").read_text())
            lat += [max(0.0, t - done[k]) for k, t in seen.items() if k in done]
        missing = 2 * a.samples - len(lat)
        return {"samples": len(lat), "missing": missing, "p50_ms": statistics.median(lat) * 1e3,
                "p99_ms": pct(lat, 99) * 1e3, "max_ms": max(lat) * 1e3}

    # -- 3. one writer alone ----------------------------------------------------------------
    def alone_warm(self, backend: str, n: int) -> float:
        """An untimed ``cp -r`` of ``n`` files of their own into the mount first: the first round of
        each backend paid for starting up (connections, caches, the new directory's first lookups)
        and read as that backend's speed, swinging one round 2x against the next."""
        w1 = self.writers[0]
        src = f"{w1.home}/cp-warm"
        if not os.path.isdir(src):
            os.makedirs(src)
            for i in range(n):
                with open(f"{src}/w{i:05d}", "wb") as f:
                    f.write((b"warm %d " % i + b"w" * 1024)[:1024])
        t = time.perf_counter()
        w1.run("cp", "-r", src, f"/lake-{backend}/r{backend}/main/cp-warm", timeout=1800)
        return time.perf_counter() - t

    def alone(self, backend: str, endpoint: str, round_: int = 0) -> dict[str, float]:
        a = self.args
        w1 = self.writers[0]
        src = f"{w1.home}/cp-src"
        if not os.path.isdir(src):
            os.makedirs(src)
            for d in range(10):
                os.makedirs(f"{src}/d{d}")
                for i in range(a.cp_files // 10):
                    with open(f"{src}/d{d}/f{i:05d}", "wb") as f:
                        f.write((b"%d/%d " % (d, i) + b"z" * 1024)[:1024])  # distinct contents
        t = time.perf_counter()
        w1.run("cp", "-r", src, f"/lake-{backend}/r{backend}/main/cp{round_}", timeout=1800)  # new files each round
        cp_s = time.perf_counter() - t
        sdk = last_json(self.c["w2"].python(SDK, endpoint, f"r{backend}", str(a.sdk_puts), timeout=1800))
        return {"cp_s": cp_s, "cp_per_s": a.cp_files / cp_s, "sdk_s": sdk["seconds"], "sdk_per_s": a.sdk_puts / sdk["seconds"]}

    # -- 4. list appends to one branch --------------------------------------------------------
    def appends(self, backend: str, branches: list[str]) -> dict[str, float]:
        a = self.args
        go = f"{self.c.dir}/go-appends-{backend}-{len(branches)}"
        procs = []
        for i, h in enumerate(self.writers):
            mine = branches if len(branches) == 1 else branches[i * 4:(i + 1) * 4]
            out = f"{h.home}/appends-{backend}-{len(branches)}.out"
            procs.append((h.spawn(PYTHON, "-c", APPENDS, self.c.db_url, backend, f"r{backend}", ",".join(mine), "4",
                                  go, str(a.seconds), h.name, env=self.env(h, backend), log=out), out))
        before = self.go(go, 4 * len(procs), backend)
        n = 0
        for p, out in procs:
            p.wait(timeout=a.seconds + 300)
            n += last_json(Path(out).read_text())["n"]
        after = self.snapshot(backend)
        return {"appends": n, "per_s": n / a.seconds, "xacts_per_append": (after["pg"]["xacts"] - before["pg"]["xacts"]) / n}


def store_counts(c: Cluster) -> dict[str, float]:
    """What the counting moto server on ``c`` served so far, by request kind (``benchmarks/moto_counting.py``)."""
    code = "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1] + '/__counts', timeout=30).read().decode())"
    return {k: float(v) for k, v in last_json(c["w1"].python(code, c.s3_endpoint, timeout=60)).items()}


def wait_ready(path: str, ready: int) -> None:
    """Wait (up to 600 s) until ``ready`` writer processes have written ``path.ready-*``."""
    d, name = os.path.split(path)
    end = time.monotonic() + 600
    while sum(1 for f in os.listdir(d) if f.startswith(name + ".ready-")) < ready:
        if time.monotonic() > end:
            raise TimeoutError(f"{path}: writers did not get ready")
        time.sleep(0.05)


def release(path: str) -> None:
    """Start the waiting writers (``WRITER``) all 0.5 s from now."""
    Path(path + ".tmp").write_text(str(time.time() + 0.5))
    os.rename(path + ".tmp", path)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--procs", type=int, default=4, help="writer processes per host (3 hosts)")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--samples", type=int, default=30, help="overwrites watched by 2 other hosts")
    ap.add_argument("--cp-files", type=int, default=10_000)
    ap.add_argument("--sdk-puts", type=int, default=1000)
    ap.add_argument("--alone-rounds", type=int, default=2,
                    help="rounds of phase 3, each backend once per round, which goes first alternating")
    ap.add_argument("--alone-warm", type=int, default=200,
                    help="files of phase 3's untimed warm-up cp -r into each mount before the rounds")
    ap.add_argument("--only", default="mount,visible,alone,appends")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 4 s phases, 5 samples, 500 files")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.samples, a.cp_files, a.sdk_puts = 4.0, 5, 500, 100
    only = set(a.only.split(","))
    why = available()
    if why:
        raise SystemExit(f"scale_bench: {why}")
    remove_stale()
    print(f"load average before: {load()} ({os.cpu_count()} cores shared by every host and whatever else runs)", flush=True)
    res: dict[str, dict[str, Any]] = {b: {} for b in BACKENDS}
    with cluster(["db", "w1", "w2", "w3"], deadline=3000) as c:
        cluster_bench.start_moto(c, c["w1"])
        b = Bench(c, a)
        w1 = c["w1"]
        for backend in BACKENDS:
            b.lakemount(w1, backend, "repo", "create", f"lakefs://r{backend}")
            w1.python(BRANCHES, f"r{backend}", timeout=300, env=b.env(w1, backend))
            for h in b.writers:
                b.mount(h, backend)
        if "mount" in only:
            for rnd, backend in enumerate(BACKENDS + BACKENDS):  # two rounds each, alternating: each keeps its best
                r = b.mount_writes(backend, f"m{rnd}")
                if r["files_per_s"] > res[backend].get("mount", {}).get("files_per_s", 0):
                    res[backend]["mount"] = r
                print(f"  [{backend} round {rnd // 2 + 1}: {r['files_per_s']:.0f} files/s; load {load()}]", flush=True)
            print(f"1. 1 KiB files created and closed through the mounts, 3 hosts x {a.procs} processes, {a.seconds:g} s "
                  f"(best of 2 rounds):")
            for backend in BACKENDS:
                r = res[backend]["mount"]
                fuse = ", ".join(f"{k} {v:.2f}" for k, v in r["fuse_ms_per_file"].items() if v >= 0.01)
                print(f"  {backend}: {r['files_per_s']:.0f} files/s ({r['files']} files), close latency p50 {r['close_p50_ms']:.1f} ms "
                      f"p99 {r['close_p99_ms']:.1f} ms; PostgreSQL {r['xacts_per_file']:.3f} transactions and "
                      f"{r['statements_per_file']:.2f} statements per file; object store {r['s3_per_file']:.2f} requests "
                      f"({r['s3_puts_per_file']:.2f} PUTs) per file")
                print(f"    where the time goes, per file (ms; the writers' wall time {r['wall_ms_per_file']:.1f} ms = "
                      f"{len(b.writers) * a.procs} writers x {a.seconds:g} s / files): PostgreSQL execution {r['pg_ms_per_file']:.2f}, "
                      f"object store service {r['s3_ms_per_file']:.2f}, mount handlers {sum(r['fuse_ms_per_file'].values()):.2f} "
                      f"({fuse})")
            s, n = res["sql"]["mount"], res["lsm"]["mount"]
            print(f"  ratio lsm/sql: files/s x{n['files_per_s'] / s['files_per_s']:.2f}, PostgreSQL transactions per file "
                  f"x{n['xacts_per_file'] / max(s['xacts_per_file'], 1e-9):.2f}", flush=True)
        if "visible" in only:
            print(f"2. a write acknowledged on w1 read on w2 and w3 (change notices; {a.samples} overwrites 0.2 s apart):")
            for backend in BACKENDS:
                r = res[backend]["visible"] = b.visibility(backend)
                print(f"  {backend}: p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, max {r['max_ms']:.0f} ms over "
                      f"{r['samples']} reads ({r['missing']} overwrites never seen: skipped by a faster one); target p99 <= 100 ms: "
                      f"{'met' if r['p99_ms'] <= 100 else 'NOT met'}; load {load()}", flush=True)
        if "appends" in only:
            print(f"4. list appends from 12 processes (3 hosts x 4), {a.seconds:g} s, no object-store traffic:")
            for backend in BACKENDS:
                try:
                    one = res[backend]["append1"] = b.appends(backend, ["side"])
                    many = res[backend]["append12"] = b.appends(backend, [f"b{i}" for i in range(12)])
                except (RuntimeError, TimeoutError, OSError, ValueError) as exc:  # the other phases still run
                    print(f"  {backend}: failed: {exc}", flush=True)
                    continue
                print(f"  {backend}: ONE branch {one['per_s']:.0f} appends/s ({one['xacts_per_append']:.2f} transactions each); "
                      f"12 branches {many['per_s']:.0f} appends/s; one/twelve x{one['per_s'] / many['per_s']:.2f} "
                      f"(near 1: no hot row); load {load()}", flush=True)
        if "alone" in only:
            eps = {backend: b.gateway(c["w3"], backend, 8000 + i) for i, backend in enumerate(BACKENDS)}
            c["w2"].python(SETUP_USER, timeout=300, env=b.env(c["w2"], "sql"))
            print(f"3. one writer alone: cp -r of {a.cp_files:,} 1 KiB files into the mount on w1; boto3 put_object of "
                  f"{a.sdk_puts:,} 1 KiB objects through a gateway on w3, from w2:")
            # Rounds alternate which backend goes first (sql, lsm; lsm, sql; ...): the load of a shared machine
            # drifts over minutes, and one backend always going second read that drift as its own speed.
            for backend in BACKENDS:
                warm = b.alone_warm(backend, a.alone_warm)
                print(f"  warm-up {backend} (untimed in the figures): cp -r of {a.alone_warm} files {warm:.1f} s", flush=True)
            runs: dict[str, list[dict[str, float]]] = {backend: [] for backend in BACKENDS}
            for rnd in range(a.alone_rounds):
                for backend in BACKENDS if rnd % 2 == 0 else BACKENDS[::-1]:
                    r = b.alone(backend, eps[backend], rnd)
                    runs[backend].append(r)
                    print(f"  round {rnd + 1} {backend}: cp -r {r['cp_s']:.1f} s ({r['cp_per_s']:.0f} files/s); SDK loop "
                          f"{r['sdk_s']:.1f} s ({r['sdk_per_s']:.0f} PUTs/s); load {load()}", flush=True)
            for backend in BACKENDS:
                rs = runs[backend]
                res[backend]["alone"] = {"cp_per_s": len(rs) * a.cp_files / sum(r["cp_s"] for r in rs),
                                         "sdk_per_s": len(rs) * a.sdk_puts / sum(r["sdk_s"] for r in rs)}
            s, n = res["sql"]["alone"], res["lsm"]["alone"]
            per = [(sq["cp_s"] / ls["cp_s"], sq["sdk_s"] / ls["sdk_s"]) for sq, ls in zip(runs["sql"], runs["lsm"], strict=True)]
            print("  ratio lsm/sql rate per round: " + ", ".join(f"cp -r x{c:.2f} SDK x{k:.2f}" for c, k in per))
            print(f"  ratio lsm/sql rate over the {a.alone_rounds} rounds: cp -r x{n['cp_per_s'] / s['cp_per_s']:.2f} "
                  f"({n['cp_per_s']:.1f} vs {s['cp_per_s']:.1f} files/s), SDK x{n['sdk_per_s'] / s['sdk_per_s']:.2f} "
                  f"({n['sdk_per_s']:.1f} vs {s['sdk_per_s']:.1f} PUTs/s) (target: lsm no slower, >= x1.00 allowing noise)")
    print(f"load average after: {load()}")
    subprocess.run(["uptime"], check=False)


if __name__ == "__main__":
    main()
