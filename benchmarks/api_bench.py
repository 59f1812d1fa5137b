"""REST API benchmarks (issue 11): latency under concurrency, and large bodies against the S3 gateway.

    .venv/bin/python benchmarks/api_bench.py [--seconds 8] [--clients 8] [--rounds 3]

(a) statObject with 8 concurrent clients (8 processes, one keep-alive
    connection each, basic auth as lakeFS's SDKs send it): p50/p90/p99
    latency and requests/s.  Target: p90 <= 5 ms.
(b) listObjects of 1,000 entries (one page, amount=1000) with 8 concurrent
    clients: p50/p90/p99 and requests/s.  Target: p90 <= 40 ms.  The same
    page again and again: from the second request on a worker decodes none
    of its entries (a range's blocks listed again keep their decoded values,
    graveler/sstable.py), as a worker serving a team's hot directories would;
    core_bench (e) keeps measuring a listing that decodes everything.
(c) 64 MiB upload and download through the API (uploadObject, getObject) and
    through the S3 gateway (PUT, GET) of the same ``lakemount serve``, in
    alternating rounds, each keeping its best.  Target: API >= 0.8x gateway.

Both front ends run from one ``lakemount serve`` on the embedded setup
(SQLite, local block store) in a temporary LAKEMOUNT_HOME with their default
worker counts; clients are plain http.client so the servers are measured.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_bench import KEY, SECRET, bench_home, big_round  # noqa: E402 - the gateway bench's bench user and 64 MiB round

BIG = 64 * 1024 * 1024
AUTH = "Basic " + base64.b64encode(f"{KEY}:{SECRET}".encode()).decode()
REPO = "bench"
LIST_N = 1000


def start(home: str) -> tuple[subprocess.Popen[str], str, str]:
    """``lakemount serve`` on free ports: (process, gateway URL, API URL)."""
    env, app = bench_home(home)
    cat = app.catalog
    cat.create_repository(REPO)
    cat.put(REPO, "main", "stat/obj", os.urandom(4096))
    for i in range(LIST_N):
        cat.put(REPO, "main", f"list/part-{i:05d}.parquet", f"row {i}".encode())
    cat.put(REPO, "main", "zzz/after", b"x")
    cat.commit(REPO, "main", "bench data")
    app.release_connections()
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
            status, _ = api_request(api, "GET", "/healthcheck")
            if status == 204:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the API did not answer")
        time.sleep(0.2)
    return proc, gw, api


def api_request(api: str, method: str, path: str, body: bytes | None = None, conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    u = urlsplit(api)
    c = conn or http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    headers = {"Authorization": AUTH}
    if body is not None:
        headers["Content-Type"] = "application/octet-stream"
    c.request(method, "/api/v1" + path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    return r.status, data


def _client(api: str, path: str, seconds: float, start_at: float, q: multiprocessing.Queue) -> None:
    u = urlsplit(api)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    headers = {"Authorization": AUTH}
    lat: list[float] = []
    while time.time() < start_at:
        time.sleep(0.001)
    end = time.perf_counter() + seconds
    while True:
        t = time.perf_counter()
        if t >= end:
            break
        conn.request("GET", "/api/v1" + path, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {r.status}")
        lat.append(time.perf_counter() - t)
    q.put(lat)


def concurrent(api: str, path: str, clients: int, seconds: float) -> tuple[float, float, float, float]:
    """(p50 ms, p90 ms, p99 ms, requests/s) of ``clients`` closed-loop clients for ``seconds``."""
    ctx = multiprocessing.get_context("fork")
    q: multiprocessing.Queue = ctx.Queue()
    start_at = time.time() + 0.5
    procs = [ctx.Process(target=_client, args=(api, path, seconds, start_at, q)) for _ in range(clients)]
    for p in procs:
        p.start()
    lat = sorted(x for _ in procs for x in q.get(timeout=seconds + 120))
    for p in procs:
        p.join()
    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    return pct(0.50), pct(0.90), pct(0.99), len(lat) / seconds


def big_api(api: str, i: int, data: bytes) -> tuple[float, float]:
    """(upload MB/s, download MB/s) of one new 64 MiB object through the API."""
    u = urlsplit(api)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    payload = data[:-8] + i.to_bytes(8, "big")
    t = time.perf_counter()
    status, body = api_request(api, "POST", f"/repositories/{REPO}/branches/main/objects?path=big/api-{i}", payload, conn)
    up = BIG / (time.perf_counter() - t) / 1e6
    assert status == 201 and json.loads(body)["size_bytes"] == BIG, body[:200]
    buf = bytearray(8 << 20)
    t = time.perf_counter()
    conn.request("GET", f"/api/v1/repositories/{REPO}/refs/main/objects?path=big/api-{i}", headers={"Authorization": AUTH})
    r = conn.getresponse()
    n = 0
    view = memoryview(buf)
    while got := r.readinto(view):
        n += got
    down = BIG / (time.perf_counter() - t) / 1e6
    assert r.status == 200 and n == BIG
    conn.close()
    return up, down


def big_gateway(gw: str, i: int, data: bytes) -> tuple[float, float]:
    """The gateway bench's 64 MiB round, with content of its own (the API's rounds use ``i``)."""
    return big_round(gw, f"/{REPO}/main/big/gw", i + 1_000_000, data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="lm-api-bench-")
    proc, gw, api = start(home)
    try:
        status, body = api_request(api, "GET", f"/repositories/{REPO}/refs/main/objects/ls?prefix=list/&amount=1000")
        listed = json.loads(body)
        assert status == 200 and len(listed["results"]) == LIST_N and not listed["pagination"]["has_more"]
        # Warm every worker's caches and connections.
        concurrent(api, f"/repositories/{REPO}/refs/main/objects/stat?path=stat/obj", args.clients, 1.0)

        p50, p90, p99, rps = concurrent(api, f"/repositories/{REPO}/refs/main/objects/stat?path=stat/obj", args.clients, args.seconds)
        print(f"(a) statObject, {args.clients} clients: p50 {p50:.2f} ms  p90 {p90:.2f} ms  p99 {p99:.2f} ms  "
              f"{rps:.0f} req/s   (target p90 <= 5 ms: {'met' if p90 <= 5 else 'NOT met'})")
        p50, p90, p99, rps = concurrent(api, f"/repositories/{REPO}/refs/main/objects/ls?prefix=list/&amount=1000", args.clients, args.seconds)
        print(f"(b) listObjects 1,000 entries, {args.clients} clients: p50 {p50:.2f} ms  p90 {p90:.2f} ms  p99 {p99:.2f} ms  "
              f"{rps:.0f} req/s   (target p90 <= 40 ms: {'met' if p90 <= 40 else 'NOT met'})")

        data = os.urandom(BIG)
        best = {"api_up": 0.0, "api_down": 0.0, "gw_up": 0.0, "gw_down": 0.0}
        for i in range(args.rounds):
            gu, gd = big_gateway(gw, i, data)
            au, ad = big_api(api, i, data)
            best["gw_up"], best["gw_down"] = max(best["gw_up"], gu), max(best["gw_down"], gd)
            best["api_up"], best["api_down"] = max(best["api_up"], au), max(best["api_down"], ad)
        up_ratio = best["api_up"] / best["gw_up"]
        down_ratio = best["api_down"] / best["gw_down"]
        print(f"(c) 64 MiB upload:   API {best['api_up']:.0f} MB/s  gateway {best['gw_up']:.0f} MB/s  ratio {up_ratio:.2f}x "
              f"(target >= 0.8x: {'met' if up_ratio >= 0.8 else 'NOT met'})")
        print(f"    64 MiB download: API {best['api_down']:.0f} MB/s  gateway {best['gw_down']:.0f} MB/s  ratio {down_ratio:.2f}x "
              f"(target >= 0.8x: {'met' if down_ratio >= 0.8 else 'NOT met'})")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
