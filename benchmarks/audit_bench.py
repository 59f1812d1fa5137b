"""The audit trail's cost (issue 27): the same work with the trail on and off, measured in the same run.

    .venv/bin/python benchmarks/audit_bench.py [--seconds 30] [--rounds 6] [--only gw,api,mount]

One embedded home (SQLite + local block store) and two of everything on it:
a ``lakemount serve`` as configured (``audit.enabled`` on, the default) and one
with ``LAKEMOUNT_AUDIT_ENABLED=false``; a mount of each kind the same way.
The two sides are measured in alternating rounds and each keeps its best, so a
burst of load from elsewhere on a shared machine does not decide a ratio.

(gw)    4 KiB GETs per second through the S3 gateway, 16 keep-alive clients
        (``gateway_bench.small_gets``).
(api)   statObject p90 latency through the REST API, 4 closed-loop clients
        (``api_bench.concurrent``).
(mount) warm small-file opens per second through the mount: open, read 4 KiB,
        close, over 200 files already in the caches, one process.

Each line ends with the on/off ratio (target: within 5%, i.e. >= 0.95 for
throughput, <= 1.05 for latency).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# This checkout's lakemount, not whichever the environment has installed (the servers run from here too).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import api_bench  # noqa: E402 - the sibling benchmarks' clients
import gateway_bench  # noqa: E402

REPO = "bench"
FILES = 200


def serve(home: str, env_extra: dict[str, str]) -> tuple[subprocess.Popen[str], str, str]:
    """``lakemount serve`` on free ports over ``home``: (process, gateway URL, API URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(env_extra, LAKEMOUNT_HOME=home)
    name = "off" if env_extra else "on"
    proc = subprocess.Popen([sys.executable, "-m", "lakemount.cli.main", "serve", "--listen", "127.0.0.1:0"],
                            env=env, stdout=subprocess.PIPE, stderr=open(os.path.join(home, f"serve-{name}.log"), "w"),
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    gw = proc.stdout.readline().split("listening on ", 1)[1].split()[0]
    api = proc.stdout.readline().split("listening on ", 1)[1].split()[0].removesuffix("/api/v1")
    deadline = time.monotonic() + 60
    while True:
        try:
            if api_bench.api_request(api, "GET", "/healthcheck")[0] == 204:
                gateway_bench.Client(gw).request("GET", "/")
                break
        except (OSError, RuntimeError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the servers did not answer")
        time.sleep(0.2)
    return proc, gw, api


def mount(home: str, mp: str, env_extra: dict[str, str]) -> subprocess.Popen[bytes]:
    from lakemount.fuse import runner

    os.makedirs(mp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(env_extra, LAKEMOUNT_HOME=home)
    proc = subprocess.Popen([sys.executable, "-m", "lakemount.cli.main", "mount", mp, "--foreground", "--head-ttl", "1",
                             "--cache-dir", mp + ".cache"], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(mp + ".log", "w"), start_new_session=True)
    deadline = time.monotonic() + 60
    while runner.find_mount(mp) is None or not os.path.isdir(os.path.join(mp, REPO, "main", "small")):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"mount at {mp} did not come up: {open(mp + '.log').read()[-2000:]}")
        time.sleep(0.1)
    return proc


def unmount(proc: subprocess.Popen[bytes], mp: str) -> None:
    from lakemount.fuse import runner

    try:
        proc.terminate()
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
    finally:
        for _ in range(50):
            if runner.find_mount(mp) is None:
                break
            try:
                runner.lazy_unmount(mp)
            except Exception:  # noqa: BLE001 - retried
                pass
            time.sleep(0.1)


def opens(root: str, seconds: float) -> float:
    """Warm opens per second: open, read, close each of the files in turn."""
    paths = [os.path.join(root, f"f{i:04d}") for i in range(FILES)]
    for p in paths:  # warm: the kernel's dentries and the mount's caches
        with open(p, "rb") as f:
            f.read()
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for p in paths:
            with open(p, "rb") as f:
                f.read(4096)
        n += len(paths)
        now = time.perf_counter()
        if now >= end:
            return n / (now - start)


def alternate(rounds: int, on: Callable[[], float], off: Callable[[], float]) -> tuple[list[float], list[float]]:
    """``rounds`` measurements of each, alternating, and which goes first alternating too (no order bias)."""
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        if i % 2:
            b.append(off())
            a.append(on())
        else:
            a.append(on())
            b.append(off())
    return a, b


def main() -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of each measurement, split into rounds")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--only", default="gw,api,mount")
    args = parser.parse_args()
    only = set(args.only.split(","))
    per = args.seconds / args.rounds
    tmp = tempfile.mkdtemp(prefix="lm-audit-bench-")
    home = os.path.join(tmp, "home")
    env, app = gateway_bench.bench_home(home)
    cat = app.catalog
    cat.create_repository(REPO)
    cat.put(REPO, "main", "stat/obj", os.urandom(4096))
    for i in range(FILES):
        cat.put(REPO, "main", f"small/f{i:04d}", os.urandom(4096))
    cat.commit(REPO, "main", "bench data")
    app.metastore.engine.dispose()
    off_env = {"LAKEMOUNT_AUDIT_ENABLED": "false"}
    procs = []
    try:
        if only & {"gw", "api"}:
            on_proc, gw_on, api_on = serve(home, {})
            procs.append(on_proc)
            off_proc, gw_off, api_off = serve(home, off_env)
            procs.append(off_proc)
        if "gw" in only:
            path = f"/{REPO}/main/stat/obj"
            a, b = alternate(args.rounds, lambda: gateway_bench.small_gets(gw_on, path, per),
                             lambda: gateway_bench.small_gets(gw_off, path, per))
            print(f"(gw) 4 KiB GETs/s, {args.rounds} alternating rounds of {per:.0f} s: "
                  f"on {', '.join(f'{x:.0f}' for x in a)}; off {', '.join(f'{x:.0f}' for x in b)}")
            print(f"     best on {max(a):7.0f}  off {max(b):7.0f}  on/off {max(a) / max(b):5.3f}  (target >= 0.95);"
                  f" medians on/off {statistics.median(a) / statistics.median(b):5.3f}")
        if "api" in only:
            path = f"/repositories/{REPO}/refs/main/objects/stat?path=stat/obj"
            a, b = alternate(args.rounds, lambda: api_bench.concurrent(api_on, path, 4, per)[1],
                             lambda: api_bench.concurrent(api_off, path, 4, per)[1])
            print(f"(api) statObject p90 ms, {args.rounds} alternating rounds of {per:.0f} s, 4 clients: "
                  f"on {', '.join(f'{x:.2f}' for x in a)}; off {', '.join(f'{x:.2f}' for x in b)}")
            print(f"     best on {min(a):6.2f} ms  off {min(b):6.2f} ms  on/off {min(a) / min(b):5.3f}  (target <= 1.05);"
                  f" medians on/off {statistics.median(a) / statistics.median(b):5.3f}")
        if "mount" in only:
            mp_on, mp_off = os.path.join(tmp, "mnt-on"), os.path.join(tmp, "mnt-off")
            m_on = mount(home, mp_on, {})
            try:
                m_off = mount(home, mp_off, off_env)
                try:
                    a, b = alternate(args.rounds, lambda: opens(os.path.join(mp_on, REPO, "main", "small"), per),
                                     lambda: opens(os.path.join(mp_off, REPO, "main", "small"), per))
                finally:
                    unmount(m_off, mp_off)
            finally:
                unmount(m_on, mp_on)
            print(f"(mount) warm small-file opens/s, {args.rounds} alternating rounds of {per:.0f} s: "
                  f"on {', '.join(f'{x:.0f}' for x in a)}; off {', '.join(f'{x:.0f}' for x in b)}")
            print(f"     best on {max(a):7.0f}  off {max(b):7.0f}  on/off {max(a) / max(b):5.3f}  (target >= 0.95);"
                  f" medians on/off {statistics.median(a) / statistics.median(b):5.3f}")
    finally:
        for p in procs:
            gateway_bench.stop(p)  # type: ignore[arg-type]
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
