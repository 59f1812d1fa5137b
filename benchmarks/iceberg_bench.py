"""Iceberg REST catalog benchmarks (issue 29): table commits/s on one branch, and loadTable latency.

    .venv/bin/python benchmarks/iceberg_bench.py [--seconds 20] [--writers 8] [--clients 8]

(a) Appends to one table on one branch with pyiceberg (each a small Parquet
    file through the S3 gateway, then a commit: requirements checked and the
    table's pointer swapped with ``Catalog.apply_if``): one writer, then
    ``--writers`` writer processes at once, each retrying on 409 as pyiceberg
    does (and again by itself when pyiceberg gives up).  Prints commits/s,
    the 409s the writers met, and the ratio to the single writer: a commit is
    serialised on the table's pointer, so more writers add contention, not
    throughput, and the ratio says what the contention costs.
(b) loadTable of that table by ``--clients`` processes (raw HTTP, one
    keep-alive connection each, basic auth), p50/p90/p99, beside the lakeFS
    API's statObject of the table's pointer object in the same server, the
    baseline (one ref-store read and no JSON parsing).

One ``lakemount serve`` on the embedded setup (SQLite, local block store) in a
temporary LAKEMOUNT_HOME with its default worker counts.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import logging
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any
from urllib.parse import quote, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_bench import KEY, SECRET, bench_home  # noqa: E402 - the gateway bench's bench user

AUTH = "Basic " + base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()
REPO = "bench"
TABLE = (REPO, "main", "db", "events")


def start(home: str) -> tuple[subprocess.Popen[str], str, str]:
    """``lakemount serve`` on free ports with repository ``bench``: (process, gateway URL, API URL)."""
    env, app = bench_home(home)
    app.catalog.create_repository(REPO)
    del app
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakemount.cli.main", "serve", "--listen", "127.0.0.1:0"],
        env=env, stdout=subprocess.PIPE, stderr=open(os.path.join(home, "serve.log"), "w"), text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    gw = proc.stdout.readline().split("listening on ", 1)[1].split()[0]
    api = proc.stdout.readline().split("listening on ", 1)[1].split()[0].removesuffix("/api/v1")
    deadline = time.monotonic() + 60
    while True:
        try:
            if get(api, "/api/v1/healthcheck")[0] == 204:
                return proc, gw, api
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the API did not answer")
        time.sleep(0.2)


def get(api: str, path: str, conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    u = urlsplit(api)
    c = conn or http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    c.request("GET", path, headers={"Authorization": AUTH})
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r.status, data


def catalog(api: str, gw: str) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    uri = f"{api}/iceberg/api"
    return RestCatalog("bench", uri=uri, credential=f"{KEY}:{SECRET}", **{
        "oauth2-server-uri": f"{uri}/v1/oauth/tokens", "s3.endpoint": gw, "s3.access-key-id": KEY,
        "s3.secret-access-key": SECRET})


class _Retries(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "Commit failed due to a concurrent update" in record.getMessage():
            self.count += 1


def _writer(api: str, gw: str, n: int, seconds: float, start_at: float, q: Any) -> None:
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException

    retries = _Retries()
    logging.getLogger("pyiceberg").addHandler(retries)
    table = catalog(api, gw).load_table(TABLE)
    rows = pa.table({"id": pa.array([n], pa.int64()), "name": [f"writer {n}"]})
    while time.time() < start_at:
        time.sleep(0.001)
    end = time.perf_counter() + seconds
    commits = gave_up = 0
    while time.perf_counter() < end:
        try:
            table.append(rows)
            commits += 1
        except CommitFailedException:
            gave_up += 1
            table.refresh()
    q.put((commits, retries.count + gave_up))


def commits_per_second(api: str, gw: str, writers: int, seconds: float) -> tuple[float, int, int]:
    """(commits/s, commits, 409s met) of ``writers`` processes appending for ``seconds``."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    start_at = time.time() + 8  # spawned interpreters import pyiceberg and load the table first
    procs = [ctx.Process(target=_writer, args=(api, gw, i, seconds, start_at, q)) for i in range(writers)]
    for p in procs:
        p.start()
    results = [q.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join()
    commits = sum(c for c, _ in results)
    return commits / seconds, commits, sum(r for _, r in results)


def _loader(api: str, path: str, seconds: float, start_at: float, q: Any) -> None:
    u = urlsplit(api)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    lat: list[float] = []
    while time.time() < start_at:
        time.sleep(0.001)
    end = time.perf_counter() + seconds
    while (t := time.perf_counter()) < end:
        status, _ = get(api, path, conn)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status}")
        lat.append(time.perf_counter() - t)
    q.put(lat)


def latency(api: str, path: str, clients: int, seconds: float) -> tuple[float, float, float, float]:
    """(p50, p90, p99 in ms, requests/s) of ``clients`` processes GETting ``path``."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    start_at = time.time() + 1
    procs = [ctx.Process(target=_loader, args=(api, path, seconds, start_at, q)) for _ in range(clients)]
    for p in procs:
        p.start()
    lat = sorted(x for _ in procs for x in q.get(timeout=seconds + 120))
    for p in procs:
        p.join()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000

    return pct(0.5), pct(0.9), pct(0.99), len(lat) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="lm-iceberg-bench-")
    proc, gw, api = start(home)
    try:
        import pyarrow as pa
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField, StringType

        cat = catalog(api, gw)
        cat.create_namespace(TABLE[:3])
        table = cat.create_table(TABLE, schema=Schema(NestedField(1, "id", LongType(), required=False),
                                                      NestedField(2, "name", StringType(), required=False)))
        table.append(pa.table({"id": pa.array([0], pa.int64()), "name": ["seed"]}))

        one, n1, r1 = commits_per_second(api, gw, 1, args.seconds)
        print(f"(a) appends, 1 writer:        {one:7.2f} commits/s ({n1} commits, {r1} 409s)")
        many, n8, r8 = commits_per_second(api, gw, args.writers, args.seconds)
        print(f"    appends, {args.writers} writers:       {many:7.2f} commits/s ({n8} commits, {r8} 409s met and retried)"
              f"  ratio {many / one:.2f}x the single writer")
        final = cat.load_table(TABLE)
        assert len(final.metadata.snapshots) == 1 + n1 + n8, "every acknowledged commit is a snapshot"

        ns = quote("\x1f".join(TABLE[:3]), safe="")
        load = f"/iceberg/api/v1/namespaces/{ns}/tables/{TABLE[3]}"
        stat = f"/api/v1/repositories/{REPO}/refs/main/objects/stat?path=db/events/_iceberg_table.json"
        lp50, lp90, lp99, lrps = latency(api, load, args.clients, args.seconds / 2)
        sp50, sp90, sp99, srps = latency(api, stat, args.clients, args.seconds / 2)
        print(f"(b) loadTable, {args.clients} clients ({len(final.metadata.snapshots)} snapshots): "
              f"p50 {lp50:.1f} ms  p90 {lp90:.1f} ms  p99 {lp99:.1f} ms  {lrps:.0f} req/s")
        print(f"    statObject of its pointer (baseline): p50 {sp50:.1f} ms  p90 {sp90:.1f} ms  p99 {sp99:.1f} ms  "
              f"{srps:.0f} req/s;  loadTable p90 = {lp90 / sp90:.2f}x")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
