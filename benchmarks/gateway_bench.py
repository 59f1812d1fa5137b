"""S3 gateway benchmarks (issue 4): each figure next to its baselines, measured in the same run.

    .venv/bin/python benchmarks/gateway_bench.py [--only a,b,c] [--objects 240000] [--seconds 10]

(a) 64 MiB PUT and GET, MB/s, one client, against lakemount's gateway, moto's
    server on this machine, and the block store read (and written) directly.
(b) 4 KiB GETs per second with 16 concurrent clients (4 processes x 4
    threads, keep-alive connections), gateway vs moto vs direct block-store reads.

The two servers are measured in alternating rounds and each keeps its best, so
a burst of load from elsewhere on a shared machine does not decide a ratio.
(c) ``aws s3 ls --recursive`` of N objects (default 240,000) on a branch
    (target < 10 s), the same listing's server side alone (ListObjectsV2
    pages fetched and discarded), the same CLI against a server that only
    replays the recorded pages (the client's own floor), and ``lakemount fs
    ls -r`` (the native client; lakectl took 16 s, docs/DESIGN.md §10).
(d) the cost of the request metrics: (b)'s 4 KiB GETs against the gateway as
    configured (metrics recorded and published) and against a second gateway
    on the same home with ``api.metrics: false``, in alternating rounds.

The clients are deliberately light (http.client with hand-made SigV4 headers
or presigned URLs, UNSIGNED-PAYLOAD, reading into a reused buffer) so the
servers, not the client, are measured; both servers get the same client.
Everything runs on the embedded setup (SQLite + local block store) in a
temporary LAKEMOUNT_HOME; the gateway runs with its default worker count.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import http.server
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, urlsplit

if TYPE_CHECKING:
    from lakemount.app import App

KEY = "AKIABENCHMARK0000000"
SECRET = "benchmarksecret000000000000000000000000x"
BIG = 64 * 1024 * 1024
SMALL = 4096
CLIENT_PROCS = 4
THREADS_PER_PROC = 4


# --- a tiny SigV4 client -------------------------------------------------------------


def _sign_headers(method: str, host: str, path: str, query: str = "", extra: dict[str, str] | None = None) -> dict[str, str]:
    amz = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    headers = {"host": host, "x-amz-date": amz, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", **(extra or {})}
    signed = sorted(headers)
    canon_headers = "".join(f"{k}:{headers[k]}\n" for k in signed)
    creq = "\n".join([method, quote(path, safe="/~"), query, canon_headers, ";".join(signed), "UNSIGNED-PAYLOAD"])
    scope = f"{amz[:8]}/us-east-1/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = hmac.new(f"AWS4{SECRET}".encode(), amz[:8].encode(), hashlib.sha256).digest()
    for part in ("us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={KEY}/{scope}, SignedHeaders={';'.join(signed)}, Signature={sig}"
    return headers


class Client:
    def __init__(self, endpoint: str) -> None:
        u = urlsplit(endpoint)
        self.host = u.netloc
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
        self.buf = bytearray(8 * 1024 * 1024)

    def request(self, method: str, path: str, body: bytes | None = None, query: str = "") -> tuple[int, int]:
        headers = _sign_headers(method, self.host, path, query)
        if body is not None:
            headers["content-length"] = str(len(body))
        self.conn.request(method, path + (f"?{query}" if query else ""), body=body, headers=headers)
        r = self.conn.getresponse()
        n = 0
        view = memoryview(self.buf)
        while True:
            got = r.readinto(view)
            if not got:
                break
            n += got
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {r.status}")
        return r.status, n


# --- servers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def bench_home(home: str) -> tuple[dict[str, str], App]:
    """An embedded lakemount under ``home`` with the user ``bench`` (Admin, keys KEY/SECRET): its environment and App."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env["LAKEMOUNT_HOME"] = home
    from lakemount.app import App
    from lakemount.config import load

    app = App(load(None, env=env))
    app.auth.create_user("bench")
    app.auth.attach_policy("bench", "Admin")
    app.auth.create_credentials("bench", KEY, SECRET)
    return env, app


def start_gateway(home: str, extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    if extra_env is None:
        env, app = bench_home(home)
        app.release_connections()
    else:  # a second server on a home bench_home already made
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
        env.update(extra_env, LAKEMOUNT_HOME=home)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakemount.cli.main", "serve", "--listen", "127.0.0.1:0"],
        env=env, stdout=subprocess.PIPE, stderr=open(os.path.join(home, "gateway-metrics-off.log" if extra_env else "gateway.log"), "w"), text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    url = line.split("listening on ", 1)[1].split()[0]
    wait_port(int(url.rsplit(":", 1)[1]))
    # The socket listens before the workers run: wait for an answer.
    deadline = time.monotonic() + 60
    while True:
        try:
            Client(url).request("GET", "/")
            break
        except (RuntimeError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    return proc, url


def start_moto() -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    exe = shutil.which("moto_server") or os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen([exe, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    wait_port(port)
    return proc, f"http://127.0.0.1:{port}"


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


# --- (a) -----------------------------------------------------------------------------


def big_round(endpoint: str, bucket_path: str, i: int, data: bytes) -> tuple[float, float]:
    """(PUT MB/s, GET MB/s) of one new 64 MiB object (new content: the gateway dedups)."""
    c = Client(endpoint)
    payload = data[:-8] + i.to_bytes(8, "big")
    t = time.perf_counter()
    c.request("PUT", f"{bucket_path}/big-{i}", payload)
    put = BIG / (time.perf_counter() - t) / 1e6
    t = time.perf_counter()
    _, n = c.request("GET", f"{bucket_path}/big-{i}")
    assert n == BIG
    return put, BIG / (time.perf_counter() - t) / 1e6


def direct_big(home: str, repo: str, rounds: int) -> tuple[float, float, float]:
    """(write MB/s, streamed read MB/s, whole-object read MB/s) of the block store itself.

    Streamed: ``adapter.open`` read into one reused buffer (the fastest a
    reader can go); whole: ``Catalog.read`` (what lakemount's own readers call).
    """
    from lakemount.app import App
    from lakemount.config import load

    app = App(load(None, env={"LAKEMOUNT_HOME": home}))
    cat = app.catalog
    r = cat.repository(repo)
    e = cat.stat(repo, "main", "big-0")
    url = cat.physical_url(r, e.address)
    reads, wholes, writes = [], [], []
    buf = bytearray(8 * 1024 * 1024)
    for i in range(rounds):
        t = time.perf_counter()
        with cat.adapter.open(url) as f:
            while f.readinto(buf):  # type: ignore[attr-defined]
                pass
        reads.append(BIG / (time.perf_counter() - t) / 1e6)
        t = time.perf_counter()
        cat.read(r, e)
        wholes.append(BIG / (time.perf_counter() - t) / 1e6)
        data = os.urandom(BIG)
        t = time.perf_counter()
        cat.adapter.put(cat.physical_url(r, f"_bench/direct-{i}"), data)
        writes.append(BIG / (time.perf_counter() - t) / 1e6)
    return max(writes), max(reads), max(wholes)


# --- (b) -----------------------------------------------------------------------------


def _small_worker(endpoint: str, path: str, seconds: float, q: multiprocessing.Queue) -> None:
    counts = [0] * THREADS_PER_PROC
    start = time.perf_counter() + 0.5
    end = start + seconds

    def run(i: int) -> None:
        c = Client(endpoint)
        while time.perf_counter() < start:
            time.sleep(0.01)
        while time.perf_counter() < end:
            c.request("GET", path)
            counts[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS_PER_PROC)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q.put(sum(counts))


def small_gets(endpoint: str, path: str, seconds: float) -> float:
    """4 KiB GETs per second with 16 concurrent keep-alive clients."""
    ctx = multiprocessing.get_context("spawn")
    q: multiprocessing.Queue = ctx.Queue()
    procs = [ctx.Process(target=_small_worker, args=(endpoint, path, seconds, q)) for _ in range(CLIENT_PROCS)]
    for p in procs:
        p.start()
    total = sum(q.get() for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


def direct_small(home: str, repo: str, seconds: float) -> float:
    """Entry lookups plus 4 KiB reads per second through the catalog, 16 threads, one process."""
    from lakemount.app import App
    from lakemount.config import load

    app = App(load(None, env={"LAKEMOUNT_HOME": home}))
    cat = app.catalog
    r = cat.repository(repo)
    counts = [0] * 16
    end = time.perf_counter() + seconds

    def run(i: int) -> None:
        while time.perf_counter() < end:
            e = cat.stat(repo, "main", "small")
            cat.read(r, e)
            counts[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


# --- (c) -----------------------------------------------------------------------------


def populate(home: str, repo: str, n: int) -> None:
    from lakemount.app import App
    from lakemount.config import load
    from lakemount.graveler.model import Entry

    app = App(load(None, env={"LAKEMOUNT_HOME": home}))
    info = app.catalog.write_data(repo, b"x" * 100)
    now = time.time_ns()
    batch: list[tuple[bytes, bytes]] = []
    for i in range(n):
        key = f"tables/events/dt=2026-{i % 12 + 1:02d}-{i % 28 + 1:02d}/part-{i:09d}.parquet".encode()
        batch.append((key, Entry(info.address, info.size, info.etag, now + i).value()))
        if len(batch) == 50_000:
            app.graveler.set_many(repo, "main", batch)
            batch = []
    if batch:
        app.graveler.set_many(repo, "main", batch)
    app.graveler.commit(repo, "main", f"{n} objects")


def list_server_side(endpoint: str, bucket: str, pages_out: dict[str, bytes] | None = None) -> tuple[float, int]:
    """Seconds to fetch every ListObjectsV2 page of ``main/``, and the key count; pages kept by continuation token."""
    c = Client(endpoint)
    token = ""
    pages = 0
    t = time.perf_counter()
    keys = 0
    while True:
        q = "list-type=2&prefix=main%2F" + (f"&continuation-token={quote(token, safe='')}" if token else "")
        headers = _sign_headers("GET", c.host, f"/{bucket}", "&".join(sorted(q.split("&"))))
        c.conn.request("GET", f"/{bucket}?{q}", headers=headers)
        body = c.conn.getresponse().read()
        if pages_out is not None:
            pages_out[token] = body
        pages += 1
        keys += body.count(b"<Key>")
        if b"<NextContinuationToken>" not in body:
            break
        token = body.split(b"<NextContinuationToken>", 1)[1].split(b"<", 1)[0].decode()
    return time.perf_counter() - t, keys


class _Replay(http.server.BaseHTTPRequestHandler):
    """Answers ListObjectsV2 with pages recorded from the gateway: a server that does no work at all."""

    pages: dict[str, bytes] = {}
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        query = parse_qs(urlsplit(self.path).query)
        body = self.pages.get(query.get("continuation-token", [""])[0])
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def replay_server(pages: dict[str, bytes]) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = type("Replay", (_Replay,), {"pages": pages})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def aws_ls(endpoint: str, bucket: str) -> tuple[float, int]:
    env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    aws = shutil.which("aws")
    if aws is None:
        return float("nan"), 0
    t = time.perf_counter()
    out = subprocess.run([aws, "--endpoint-url", endpoint, "s3", "ls", "--recursive", f"s3://{bucket}/main/"],
                         env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t, out.stdout.count("\n")


def native_ls(home: str, repo: str) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env["LAKEMOUNT_HOME"] = home
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "lakemount.cli.main", "fs", "ls", "-r", f"lakefs://{repo}/main/"],
                         env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t, out.stdout.count("\n")


# --- main ----------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="a,b,c")
    ap.add_argument("--objects", type=int, default=240_000)
    ap.add_argument("--seconds", type=float, default=15.0, help="(b): total seconds per server")
    ap.add_argument("--rounds", type=int, default=3, help="(a), (b): alternating rounds per server")
    args = ap.parse_args()
    only = set(args.only.split(","))
    home = tempfile.mkdtemp(prefix="lm-gw-bench-")
    gw_proc, gw = start_gateway(home)
    moto_proc, moto = start_moto()
    try:
        for endpoint in (gw, moto):
            Client(endpoint).request("PUT", "/bench")
        print(f"gateway {gw} (LAKEMOUNT_HOME={home}), moto {moto}; {os.cpu_count()} CPUs")
        if "a" in only:
            print(f"(a) 64 MiB objects, one client, {args.rounds} rounds alternating between the servers, best of each")
            data = os.urandom(BIG)
            g_rounds, m_rounds = [], []
            for i in range(args.rounds):
                g_rounds.append(big_round(gw, "/bench/main", i, data))
                m_rounds.append(big_round(moto, "/bench", i, data))
            g_put, g_get = (max(r[k] for r in g_rounds) for k in (0, 1))
            m_put, m_get = (max(r[k] for r in m_rounds) for k in (0, 1))
            d_put, d_get, d_whole = direct_big(home, "bench", args.rounds)
            print(f"    PUT  gateway {g_put:7.0f} MB/s   moto {m_put:7.0f} MB/s   gateway/moto {g_put / m_put:5.2f}  (target >= 2)"
                  f"   block store write {d_put:7.0f} MB/s")
            print(f"    GET  gateway {g_get:7.0f} MB/s   moto {m_get:7.0f} MB/s   gateway/moto {g_get / m_get:5.2f}  (target >= 2)")
            print(f"         block store read: streamed into one buffer {d_get:7.0f} MB/s (gateway/direct {g_get / d_get:4.2f}),"
                  f" Catalog.read of the whole object {d_whole:7.0f} MB/s (gateway/direct {g_get / d_whole:4.2f}); target >= 0.5")
        if "b" in only:
            for endpoint, path in ((gw, "/bench/main/small"), (moto, "/bench/small")):
                Client(endpoint).request("PUT", path, os.urandom(SMALL))
            per = args.seconds / args.rounds
            print(f"(b) 4 KiB GETs, {CLIENT_PROCS * THREADS_PER_PROC} concurrent clients, {args.rounds} alternating rounds of {per:.0f} s, best of each")
            g = small_gets(gw, "/bench/main/small", per)
            m = small_gets(moto, "/bench/small", per)
            for _ in range(args.rounds - 1):
                g = max(g, small_gets(gw, "/bench/main/small", per))
                m = max(m, small_gets(moto, "/bench/small", per))
            d = direct_small(home, "bench", per)
            print(f"    gateway {g:7.0f} req/s   moto {m:7.0f} req/s   gateway/moto {g / m:5.2f}  (target >= 5)"
                  f"   catalog stat+read in-process {d:7.0f}/s")
        if "c" in only:
            print(f"(c) listing {args.objects} objects on a branch")
            Client(gw).request("PUT", "/listing")
            t = time.perf_counter()
            populate(home, "listing", args.objects)
            print(f"    populated in {time.perf_counter() - t:.1f} s")
            pages: dict[str, bytes] = {}
            secs, n = list_server_side(gw, "listing", pages)
            print(f"    ListObjectsV2 pages, server side: {secs:6.2f} s for {n} keys ({n / secs:,.0f} keys/s)")
            secs, n = aws_ls(gw, "listing")
            print(f"    aws s3 ls --recursive: {secs:6.2f} s for {n} lines  (target < 10 s)")
            # The client's own floor: the same CLI reading the same pages from a server that only replays them.
            replay, url = replay_server(pages)
            try:
                floor, n2 = aws_ls(url, "listing")
            finally:
                replay.shutdown()
            print(f"    the same aws s3 ls against a replay of the same {len(pages)} pages (no server work): {floor:6.2f} s "
                  f"for {n2} lines: the CLI alone; gateway adds {secs - floor:+.2f} s")
            secs, n = native_ls(home, "listing")
            print(f"    lakemount fs ls -r (the native client, as lakectl is lakeFS's): {secs:6.2f} s for {n} lines")
        if "d" in only:
            Client(gw).request("PUT", "/bench/main/small", os.urandom(SMALL))
            off_proc, off = start_gateway(home, {"LAKEMOUNT_API_METRICS": "false"})
            try:
                per = args.seconds / args.rounds
                print(f"(d) 4 KiB GETs with and without request metrics, {args.rounds} alternating rounds of {per:.0f} s, best of each")
                on_rounds, off_rounds = [], []
                for _ in range(args.rounds):
                    on_rounds.append(small_gets(gw, "/bench/main/small", per))
                    off_rounds.append(small_gets(off, "/bench/main/small", per))
                print(f"    rounds with metrics: {', '.join(f'{r:.0f}' for r in on_rounds)};"
                      f" without: {', '.join(f'{r:.0f}' for r in off_rounds)} req/s")
                on, off_best = max(on_rounds), max(off_rounds)
                on_med, off_med = statistics.median(on_rounds), statistics.median(off_rounds)
                print(f"    with metrics {on:7.0f} req/s   without {off_best:7.0f} req/s   with/without {on / off_best:5.3f}"
                      f"   (medians {on_med:.0f} / {off_med:.0f} = {on_med / off_med:5.3f})")
            finally:
                stop(off_proc)
    finally:
        stop(gw_proc)
        stop(moto_proc)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
