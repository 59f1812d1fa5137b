"""How the gateway's HTTP stack was chosen: candidate ASGI servers on the gateway's request pattern.

    .venv/bin/python benchmarks/gateway_stack.py [--seconds 5] [--workers 2]

Each candidate serves the same raw ASGI app with ``--workers`` processes: a
4 KiB response produced (a) inline on the event loop and (b) in a thread pool,
as the gateway does (its catalog, ref store and block store are blocking
APIs), and (c) a 64 MiB response streamed in 1 MiB chunks read in the pool.
Small responses are driven by ``wrk`` (16 connections) when installed, else by
16 Python keep-alive clients; large ones by one Python client reading into a
reused buffer.  Candidates that are not installed are skipped.  The ratio is
against uvicorn on h11/asyncio, the pure-Python baseline, measured in the same run.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

APP = textwrap.dedent(
    '''
    import asyncio, os
    from concurrent.futures import ThreadPoolExecutor
    SMALL = b"x" * 4096
    BIG = os.environ["STACK_BIG_FILE"]
    pool = ThreadPoolExecutor(32)

    def read_chunk(f):
        return f.read(1 << 20)

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        loop = asyncio.get_running_loop()
        path = scope["path"]
        if path == "/big":
            size = os.path.getsize(BIG)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(size).encode())]})
            with open(BIG, "rb") as f:
                while chunk := await loop.run_in_executor(pool, read_chunk, f):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        body = await loop.run_in_executor(pool, bytes, SMALL) if path == "/thread" else SMALL
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4096")]})
        await send({"type": "http.response.body", "body": body})
    '''
)


def candidates(workers: int, port: int) -> dict[str, list[str]]:
    bin_dir = os.path.dirname(sys.executable)
    uv = [os.path.join(bin_dir, "uvicorn"), "stack_app:app", "--port", str(port), "--workers", str(workers),
          "--log-level", "warning", "--no-access-log", "--lifespan", "off"]
    out = {
        "uvicorn httptools+uvloop": [*uv, "--http", "httptools", "--loop", "uvloop"],
        "uvicorn h11+asyncio": [*uv, "--http", "h11", "--loop", "asyncio"],
    }
    granian = os.path.join(bin_dir, "granian")
    if os.path.exists(granian):
        out["granian (rust) asgi"] = [granian, "--interface", "asgi", "--port", str(port), "--workers", str(workers),
                                      "--log-level", "warning", "stack_app:app"]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/inline")
            c.getresponse().read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


def small_rps(port: int, path: str, seconds: float) -> float:
    wrk = shutil.which("wrk")
    if wrk:
        out = subprocess.run([wrk, "-t2", "-c16", f"-d{int(seconds)}s", f"http://127.0.0.1:{port}{path}"],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"Requests/sec:\s+([\d.]+)", out)
        return float(m.group(1)) if m else 0.0
    counts = [0] * 16
    end = time.perf_counter() + seconds

    def run(i: int) -> None:
        c = http.client.HTTPConnection("127.0.0.1", port)
        while time.perf_counter() < end:
            c.request("GET", path)
            c.getresponse().read()
            counts[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def big_mbs(port: int, rounds: int = 4) -> float:
    c = http.client.HTTPConnection("127.0.0.1", port)
    view = memoryview(bytearray(8 << 20))
    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        c.request("GET", "/big")
        r = c.getresponse()
        n = 0
        while got := r.readinto(view):
            n += got
        best = max(best, n / (time.perf_counter() - t) / 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lm-stack-")
    with open(os.path.join(tmp, "stack_app.py"), "w") as f:
        f.write(APP)
    big = os.path.join(tmp, "big.bin")
    with open(big, "wb") as f:
        f.write(os.urandom(64 << 20))
    env = dict(os.environ, STACK_BIG_FILE=big, PYTHONPATH=tmp)
    results: dict[str, tuple[float, float, float]] = {}
    try:
        for name, cmd in candidates(args.workers, free_port()).items():
            port = int(cmd[cmd.index("--port") + 1])
            proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait(port)
                results[name] = (small_rps(port, "/inline", args.seconds), small_rps(port, "/thread", args.seconds), big_mbs(port))
            finally:
                proc.terminate()
                proc.wait(20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = results.get("uvicorn h11+asyncio")
    print(f"{args.workers} workers, {os.cpu_count()} CPUs; ratios against uvicorn h11+asyncio")
    print(f"{'stack':28s} {'4 KiB inline req/s':>20s} {'4 KiB in pool req/s':>21s} {'64 MiB GET MB/s':>17s}")
    for name, (inline, pooled, mbs) in results.items():
        r = (f"  ({pooled / base[1]:.1f}x, {mbs / base[2]:.1f}x)" if base else "")
        print(f"{name:28s} {inline:20.0f} {pooled:21.0f} {mbs:17.0f}{r}")


if __name__ == "__main__":
    main()
