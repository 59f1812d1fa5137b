"""Cluster figures on the namespace harness (tests/cluster/harness.py): freshness and ref store load.

Builds db (PostgreSQL), s3 (moto), w1, w2 and client, each of w1/w2/client
with its own ``lakemount mount /lake``, and prints, measured in this run:

* head propagation across hosts, p50/p99: w1 merges a branch into ``main``
  (through its mount's ``.lakefs/merge``); watchers on w2 and client re-read
  ``/lake/repo/main/marker.txt`` every 2 ms until they see the new content.
  The latency is from the merge write returning on w1 to the first read of the
  new content on the other host (one machine, one clock).  Once with change
  notification (PostgreSQL LISTEN/NOTIFY), once with ``--no-notify`` mounts
  (polling every ``head_ttl``);
* PostgreSQL statements per second of idle mounts (each with ``main`` open
  in the kernel), from ``pg_stat_statements`` (this script's own excluded);
* PostgreSQL statements per second of mounts in use: on each host a reader
  opens ``main/marker.txt`` and ``src/marker.txt`` (two branches) every 0.2 s;
* PostgreSQL statements per 1,000 file opens on a commit path after warm-up;
* the Spark ETL job of tests/cluster/spark_job.py through the mounts (file:///lake)
  and through S3A on gw1+gw2 (pyspark 3.2.4), wall time of each in one run;
* gateway requests/s (signed 4 KiB GETs from client processes on ``client``)
  against one gateway host, then spread over two (db, s3, gw1, gw2, client).
  All hosts share this machine's cores, so the ratio shows scale-out only
  where the client and gateways are not already CPU-bound together;
* hot 4 KiB GETs/s through two gateway hosts (issue 26: reads of immutable data
  come from each host's RAM/disk cache, target >= 1,400 req/s), with the
  object-store requests (a counting moto server) and the PostgreSQL statements
  per GET; with ``--baseline DIR`` (a tree of the code before, e.g. ``git archive
  main | tar -x -C DIR`` plus its compiled extensions) the same load against that
  code's gateways on the same hosts, in alternating rounds, each keeping its best; then one
  client alone (one request at a time), its median latency per tree.

Run as root: ``PYTHONPATH=. python benchmarks/cluster_bench.py [--samples 30] [--head-ttl 1]
[--only heads|gateways|hot|spark] [--baseline DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.harness import PYTHON, Cluster, available, cluster, remove_stale  # noqa: E402

WATCH = r"""
import sys, time, json
path, want_first, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seen = {}
want = want_first
end = time.time() + 600
while want < want_first + n and time.time() < end:
    try:
        with open(path) as f:
            v = f.read().strip()
    except OSError:
        v = ""
    if v.isdigit() and int(v) >= want:
        seen[int(v)] = time.time()
        want = int(v) + 1
    else:
        time.sleep(0.002)
print(json.dumps(seen))
"""

WRITE = r"""
import sys, time, json
first, n, gap = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
done = {}
for i in range(first, first + n):
    with open("/lake/repo/src/marker.txt", "w") as f:
        f.write(f"{i}\n")
    with open("/lake/repo/src/.lakefs/commit", "w") as f:
        f.write(f"marker {i}\n")
    with open("/lake/repo/main/.lakefs/merge", "w") as f:
        f.write("src\n")
    done[i] = time.time()
    time.sleep(gap)
print(json.dumps(done))
"""

OPENS = r"""
import os, sys, time
root, n = sys.argv[1], int(sys.argv[2])
names = sorted(n for n in os.listdir(root) if not n.startswith("."))
for i in range(n):
    with open(os.path.join(root, names[i % len(names)]), "rb") as f:
        f.read()
print(len(names))
"""

READERS = r"""
import sys, time
paths, seconds, gap = sys.argv[1].split(","), float(sys.argv[2]), float(sys.argv[3])
end = time.time() + seconds
n = 0
while time.time() < end:
    for p in paths:
        with open(p) as f:
            f.read()
    n += 1
    time.sleep(gap)
print(n)
"""


SETUP_GW = r"""
from lakemount.app import App
from benchmarks.gateway_bench import KEY, SECRET, Client
app = App.from_config(None)
app.auth.create_user("bench")
app.auth.attach_policy("bench", "Admin")
app.auth.create_credentials("bench", KEY, SECRET)
import sys
c = Client(sys.argv[1])
for i in range(64):
    c.request("PUT", f"/repo/main/small/{i}", bytes([i]) * 4096)
print("ok")
"""

LOAD = r"""
import json, multiprocessing as mp, sys, time
from benchmarks.gateway_bench import Client
endpoints, procs, seconds = sys.argv[1].split(","), int(sys.argv[2]), float(sys.argv[3])
def work(k):
    c = Client(endpoints[k % len(endpoints)])
    n, i = 0, k
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        status, size = c.request("GET", f"/repo/main/small/{i % 64}")
        assert size == 4096
        n += 1
        i += 1
    return n
with mp.Pool(procs) as pool:
    t = time.monotonic()
    counts = pool.map(work, range(procs))
    elapsed = time.monotonic() - t
print(json.dumps({"requests": sum(counts), "seconds": elapsed}))
"""


def gateway_rps(procs: int, seconds: float, workers: int) -> dict[str, float]:
    """4 KiB GETs/s from ``procs`` client processes against one gateway host, then two."""
    with cluster(["db", "s3", "gw1", "gw2", "client"], deadline=900) as c:
        client = c["client"]
        client.lakemount("repo", "create", "lakefs://repo")
        c.start_gateway(c["gw1"], workers=workers)
        c.start_gateway(c["gw2"], workers=workers)
        ep1, ep2 = f"http://{c['gw1'].ip}:8000", f"http://{c['gw2'].ip}:8000"
        client.python(SETUP_GW, ep1, timeout=300)
        out = {}
        for label, eps in (("one", ep1), ("two", f"{ep1},{ep2}")):
            client.python(LOAD, eps, str(procs), "2", timeout=300)  # warm-up
            r = json.loads(client.python(LOAD, eps, str(procs), str(seconds), timeout=600).strip().splitlines()[-1])
            out[label] = r["requests"] / r["seconds"]
        return out


def start_moto(c: Any, client: Any, **kw: Any) -> None:
    """An ``s3`` host running moto that counts what it serves, with bucket ``lake`` made from ``client``."""
    root = str(Path(__file__).resolve().parents[1])
    s3 = c.add_host("s3")
    s3.spawn(PYTHON, f"{root}/benchmarks/moto_counting.py", "5000", s3.ip, log=f"{s3.home}/moto.log")
    c.s3_endpoint = f"http://{s3.ip}:5000"
    client.python("import boto3, sys, time\n"
                  "c = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='testing',"
                  " aws_secret_access_key='testing', region_name='us-east-1')\n"
                  "for i in range(300):\n"
                  "    try:\n"
                  "        c.create_bucket(Bucket='lake'); break\n"
                  "    except Exception:\n"
                  "        time.sleep(0.1)\n", c.s3_endpoint, timeout=120, **kw)


# A script that waits (up to 180 s) until the HTTP server at argv[1] answers anything.
WAIT_HTTP = (
    "import sys, time, urllib.request, urllib.error\n"
    "end = time.time() + 180\n"
    "while time.time() < end:\n"
    "    try:\n"
    "        urllib.request.urlopen(sys.argv[1] + '/', timeout=2); break\n"
    "    except urllib.error.HTTPError: break\n"
    "    except OSError: time.sleep(0.2)\n"
    "else: raise SystemExit(sys.argv[1] + ' did not answer')\n"
)

LATENCY = r"""
import json, statistics, sys, time
from benchmarks.gateway_bench import Client
c, n = Client(sys.argv[1]), int(sys.argv[2])
times = []
for i in range(n):
    t = time.perf_counter()
    c.request("GET", f"/repo/main/small/{i % 64}")
    times.append(time.perf_counter() - t)
times.sort()
print(json.dumps({"p50_ms": statistics.median(times) * 1000, "p90_ms": times[int(0.9 * (n - 1))] * 1000}))
"""

COUNTS = r"""
import json, sys, urllib.request
print(urllib.request.urlopen(sys.argv[1] + "/__counts", timeout=30).read().decode())
"""


def hot_gets(procs: int, seconds: float, workers: int, rounds: int, baseline: str | None) -> dict[str, dict[str, float]]:
    """Hot 4 KiB GETs/s through gw1+gw2, object-store requests and PostgreSQL statements per GET, per code tree.

    The s3 host runs ``benchmarks/moto_counting.py`` (moto counting what it serves). Each tree's
    gateways serve on their own port of gw1 and gw2 (``--no-api``: one REST API per host is enough);
    rounds alternate between trees so a burst of load elsewhere on the machine does not decide a ratio.
    """
    root = str(Path(__file__).resolve().parents[1])
    with cluster(["db", "gw1", "gw2", "client"], deadline=1500) as c:
        start_moto(c, c["client"], env=c.env(c["client"]))
        client = c["client"]
        client.lakemount("repo", "create", "lakefs://repo")
        trees = {"this code": (root, 8000)}
        if baseline:
            trees["baseline"] = (os.path.abspath(baseline), 8002)
        wait = WAIT_HTTP
        for tree, port in trees.values():
            for gw in (c["gw1"], c["gw2"]):
                argv = [PYTHON, "-m", "lakemount.cli.main", "serve", "--listen", f"{gw.ip}:{port}", "--workers", str(workers),
                        "--no-api"]
                # ``python -m`` puts the working directory first on sys.path: start in the tree to be measured.
                log = f"{gw.home}/gateway-{port}.log"
                gw.spawn("sh", "-c", f"cd {tree} && exec " + " ".join(argv), env=c.env(gw, PYTHONPATH=tree), log=log)
                try:  # one at a time: a gateway creates its tables as it starts, and starting ones would race
                    client.python(wait, f"http://{gw.ip}:{port}", timeout=200)
                except RuntimeError as exc:
                    raise RuntimeError(f"{exc}; its log: {Path(log).read_text(errors='replace')[-3000:]}") from None
        eps = {name: f"http://{c['gw1'].ip}:{port},http://{c['gw2'].ip}:{port}" for name, (_, port) in trees.items()}
        client.python(SETUP_GW, eps["this code"].split(",")[0], timeout=300)

        def counts() -> dict[str, int]:
            return dict(json.loads(client.python(COUNTS, c.s3_endpoint, timeout=60).strip().splitlines()[-1]))

        out: dict[str, dict[str, float]] = {name: {"rps": 0.0} for name in eps}
        for ep in eps.values():
            client.python(LOAD, ep, str(procs), "3", timeout=300)  # warm-up: each host's caches, connections
        for _ in range(rounds):
            for name, ep in eps.items():
                m0, x0 = counts(), c.pg_statements()
                r = json.loads(client.python(LOAD, ep, str(procs), str(seconds), timeout=600).strip().splitlines()[-1])
                m1, x1 = counts(), c.pg_statements()
                rps = r["requests"] / r["seconds"]
                if rps > out[name]["rps"]:
                    out[name] = {"rps": rps, "store_per_get": (m1.get("total", 0) - m0.get("total", 0)) / r["requests"],
                                 "store_gets_per_get": (m1.get("GET", 0) + m1.get("GET_RANGE", 0) - m0.get("GET", 0)
                                                        - m0.get("GET_RANGE", 0)) / r["requests"],
                                 "pg_per_get": (x1 - x0) / r["requests"]}
        # One client alone, one request at a time (alternating trees, best median of the rounds).
        for name in eps:
            out[name]["p50_ms"] = float("inf")
        for _ in range(rounds):
            for name, ep in eps.items():
                lat = json.loads(client.python(LATENCY, ep.split(",")[0], "500", timeout=300).strip().splitlines()[-1])
                out[name]["p50_ms"] = min(out[name]["p50_ms"], lat["p50_ms"])
        return out


def spark_jobs() -> tuple[dict[str, object], dict[str, object]]:
    """The ETL job through the mounts, then through S3A on two gateways, on one cluster."""
    from tests.cluster import etl

    hosts = ["db", "s3", "master", "w1", "w2", "gw1", "gw2", "client"]
    with cluster(hosts, deadline=1500, mounts=["w1", "w2", "client"]) as c:
        key, secret = etl.setup(c, "etl", "etl3")
        return etl.through_mounts(c, "etl"), etl.through_gateways(c, "etl3", key, secret)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def xacts(c: Cluster) -> int:
    return c.pg_statements()


def propagation(c: Cluster, first: int, samples: int, gap: float) -> list[float]:
    watchers = {
        name: c[name].spawn(PYTHON, "-c", WATCH, "/lake/repo/main/marker.txt", str(first), str(samples),
                            log=f"{c[name].home}/watch-{first}.out")
        for name in ("w2", "client")
    }
    time.sleep(1.0)
    done = json.loads(c["w1"].python(WRITE, str(first), str(samples), str(gap), timeout=900).strip().splitlines()[-1])
    lat = []
    for name, p in watchers.items():
        p.wait(timeout=120)
        seen = json.loads(Path(f"{c[name].home}/watch-{first}.out").read_text().strip().splitlines()[-1])
        for k, t in seen.items():
            if k in done or str(k) in done:
                lat.append(max(0.0, t - done[str(k)]))
    return lat


def run(notify: bool, samples: int, head_ttl: float) -> dict[str, float]:
    args = ["--head-ttl", str(head_ttl), *([] if notify else ["--no-notify"])]
    with cluster(["db", "s3", "w1", "w2", "client"], deadline=1200, mounts=["w1", "w2", "client"], mount_args=args) as c:
        w1 = c["w1"]
        w1.lakemount("repo", "create", "lakefs://repo")
        w1.lakemount("branch", "create", "lakefs://repo/src", "--source", "lakefs://repo/main")
        w1.run("sh", "-c", "echo 0 > /lake/repo/src/marker.txt && echo m0 > /lake/repo/src/.lakefs/commit"
                           " && echo src > /lake/repo/main/.lakefs/merge")
        lat = propagation(c, 1, samples, gap=0.3)
        out = {"samples": len(lat), "p50": statistics.median(lat), "p99": pct(lat, 99), "max": max(lat)}
        # idle: every mount has main open in the kernel, nobody writes
        for name in ("w1", "w2", "client"):
            c[name].run("cat", "/lake/repo/main/marker.txt")
        time.sleep(2 * head_ttl + 1)
        seconds = 20.0
        x0 = xacts(c)
        time.sleep(seconds)
        x1 = xacts(c)
        out["idle_xacts_per_s_per_mount"] = (x1 - x0) / seconds / 3
        # in use: a reader of two branches on every host
        readers = [
            c[name].spawn(PYTHON, "-c", READERS, "/lake/repo/main/marker.txt,/lake/repo/src/marker.txt",
                          str(seconds + 4 * head_ttl + 2), "0.2", log=f"{c[name].home}/readers.out")
            for name in ("w1", "w2", "client")
        ]
        time.sleep(2 * head_ttl + 1)
        x0 = xacts(c)
        time.sleep(seconds)
        x1 = xacts(c)
        for p in readers:
            p.wait(timeout=120)
        out["busy_xacts_per_s_per_mount"] = (x1 - x0) / seconds / 3
        # 1,000 opens on a commit path after warm-up
        for i in range(20):
            w1.run("sh", "-c", f"echo {i} > /lake/repo/src/f{i}.txt")
        w1.run("sh", "-c", "echo files > /lake/repo/src/.lakefs/commit")
        commit = w1.run("cat", "/lake/repo/src/.lakefs/head").stdout.strip()
        root = f"/lake/repo/{commit}"
        w2 = c["w2"]
        w2.python(OPENS, root, "200")  # warm-up
        x0 = xacts(c)
        t = time.time()
        w2.python(OPENS, root, "1000")
        elapsed = time.time() - t
        x1 = xacts(c)
        idle_during = out["idle_xacts_per_s_per_mount"] * 3 * elapsed
        out["xacts_per_1000_commit_opens"] = max(0.0, (x1 - x0) - idle_during)
        out["xacts_per_1000_commit_opens_raw"] = x1 - x0
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--head-ttl", type=float, default=1.0)
    ap.add_argument("--gw-procs", type=int, default=4, help="client processes for the gateway GET load")
    ap.add_argument("--gw-seconds", type=float, default=10.0)
    ap.add_argument("--gw-workers", type=int, default=1, help="worker processes per gateway host")
    ap.add_argument("--only", choices=["heads", "gateways", "hot", "spark"], default=None)
    ap.add_argument("--hot-rounds", type=int, default=3, help="alternating rounds of the hot GET load per code tree")
    ap.add_argument("--baseline", default=None, help="a tree of the code to compare hot GETs with (see the docstring)")
    a = ap.parse_args()
    why = available()
    if why:
        raise SystemExit(f"cluster_bench: {why}")
    remove_stale()
    if a.only in (None, "spark"):
        m, g3 = spark_jobs()
        print(f"Spark ETL job (20,000 rows, 4 partitions, 2 executors x 1 core): through the mounts {m['seconds']:.1f}s "
              f"(write {m['write_seconds']:.1f}s), through S3A on two gateways {g3['seconds']:.1f}s "
              f"(write {g3['write_seconds']:.1f}s); both include reading the result back")
    if a.only == "spark":
        return
    if a.only in (None, "gateways"):
        g = gateway_rps(a.gw_procs, a.gw_seconds, a.gw_workers)
        print(f"gateway 4 KiB GETs ({a.gw_procs} client processes, {a.gw_workers} worker(s) per gateway host, "
              f"{os.cpu_count()} cores shared by all hosts): one gateway host {g['one']:.0f} req/s, "
              f"two {g['two']:.0f} req/s (x{g['two'] / g['one']:.2f})")
    if a.only == "gateways":
        return
    if a.only in (None, "hot"):
        hot = hot_gets(a.gw_procs, a.gw_seconds, a.gw_workers, a.hot_rounds, a.baseline)
        print(f"hot 4 KiB GETs through two gateway hosts ({a.gw_procs} client processes, {a.gw_workers} worker(s) per host, "
              f"best of {a.hot_rounds} rounds; target >= 1,400 req/s; 281-377 req/s before issue 26):")
        for name, r in hot.items():
            print(f"  {name}: {r['rps']:.0f} req/s, object-store requests per GET {r['store_per_get']:.3f} "
                  f"(GETs {r['store_gets_per_get']:.3f}), PostgreSQL statements per GET {r['pg_per_get']:.2f}, "
                  f"one client alone p50 {r['p50_ms']:.2f} ms")
        if "baseline" in hot:
            print(f"  ratio this code / baseline: x{hot['this code']['rps'] / hot['baseline']['rps']:.2f}")
    if a.only == "hot":
        return
    for notify in (True, False):
        r = run(notify, a.samples, a.head_ttl)
        label = "notify " if notify else "polling"
        target = 0.2 if notify else a.head_ttl
        print(f"head propagation ({label}, head_ttl {a.head_ttl:g}s, {r['samples']} samples over 2 hosts): "
              f"p50 {r['p50'] * 1000:.0f} ms, p99 {r['p99'] * 1000:.0f} ms, max {r['max'] * 1000:.0f} ms "
              f"(target p99 <= {target * 1000:.0f} ms: {'met' if r['p99'] <= target else 'NOT met'})")
        print(f"  idle mount: {r['idle_xacts_per_s_per_mount']:.2f} PostgreSQL statements/s per mount (target <= 1)")
        print(f"  mount in use (a reader of 2 branches every 0.2 s on each host): "
              f"{r['busy_xacts_per_s_per_mount']:.2f} PostgreSQL statements/s per mount")
        print(f"  1,000 opens on a commit path after warm-up: {r['xacts_per_1000_commit_opens']:.0f} statements "
              f"beyond the idle rate ({r['xacts_per_1000_commit_opens_raw']} raw; target 0)")


if __name__ == "__main__":
    main()
