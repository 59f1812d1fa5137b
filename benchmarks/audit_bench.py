"""The audit trail's cost (issue 27): the same work with the trail on and off, measured in the same run.

    .venv/bin/python benchmarks/audit_bench.py [--seconds 30] [--rounds 6] [--only gw,api,mount,cli]

One embedded home (SQLite + local block store) and two of everything on it:
a ``lakemount serve`` as configured (``audit.enabled`` on, the default) and one
with ``LAKEMOUNT_AUDIT_ENABLED=false``; a mount of each kind the same way.
Every figure is measured in rounds, after one pass of each not counted (warm
caches on both sides); in each round its on and off sides run
back to back (which goes first alternates), so the pair shares whatever load
the shared machine has at that moment.  A figure's ratio is the median of its
rounds' on/off ratios: a burst that hits one side of one round does not decide it.

(gw)    4 KiB GETs per second through the S3 gateway, 16 keep-alive clients
        (``gateway_bench.small_gets``).
(mount) warm small-file opens per second through the mount: open, read 4 KiB,
        close, over 200 files already in the caches, one process.  The two mounts
        are started again every ``--mount-epoch`` rounds with the sides swapped
        (mount point and start order), so one process's bias does not become the trail's.
(api)   statObject p90 latency through the REST API, 4 closed-loop clients
        (``api_bench.concurrent``).  The two servers (gw, api) are started again every
        ``--server-epoch`` rounds in the other order, and warmed, as the mounts are.
(cli)   wall time of one ``lakemount fs stat`` process (and its CPU time): the
        CLI spools its records for another process to write (``audit/spool.py``).

Beside gw, api and mount, the servers' (the mount's) CPU time per request (user +
system of the server's processes, from ``/proc``; per open for the mount), on and off: on a shared machine whose
load swamps latency and throughput, what the trail adds to each request shows
there more steadily (its ratio over all rounds, and the median of the rounds').
Of the on side's CPU per request, the share of its flusher threads (``lm-audit-flush``, one
per worker process) is printed beside the on-minus-off difference: what is left is the
request path's (and the GIL's) part.

The last line prints the three ratios the issue targets: within 5%, i.e.
>= 0.95 for throughput, <= 1.05 for latency.
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
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# This checkout's lakemount, not whichever the environment has installed (the servers run from here too).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import api_bench  # noqa: E402 - the sibling benchmarks' clients
import gateway_bench  # noqa: E402

from lakemount.audit.log import FLUSHER  # noqa: E402

REPO = "bench"
FILES = 200


def serve(home: str, env_extra: dict[str, str], name: str) -> tuple[subprocess.Popen[str], str, str]:
    """``lakemount serve`` on free ports over ``home``: (process, gateway URL, API URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(env_extra, LAKEMOUNT_HOME=home)
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


def _session_pids(sid: int) -> list[str]:
    """The live processes of session ``sid`` (a server and its workers, or a mount)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        except OSError:  # ended meanwhile
            continue
        if int(fields[3]) == sid:  # session: field 6 of proc(5)
            pids.append(name)
    return pids


def _ticks(stat: str) -> int:
    """utime + stime (fields 14 and 15 of proc(5)) of a ``/proc/.../stat`` file."""
    try:
        with open(stat) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:  # ended meanwhile
        return 0
    return int(fields[11]) + int(fields[12])


def session_cpu(sid: int) -> float:
    """CPU seconds (user + system) the live processes of session ``sid`` (a server and its workers) used so far."""
    return sum(_ticks(f"/proc/{pid}/stat") for pid in _session_pids(sid)) / os.sysconf("SC_CLK_TCK")


def thread_cpu(sid: int, name: str) -> float:
    """CPU seconds the threads named ``name`` (``/proc/<pid>/task/<tid>/comm``) of the processes of session ``sid``
    used so far: a server's workers each have their own flusher."""
    ticks = 0
    for pid in _session_pids(sid):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    if f.read().rstrip("\n") != name:
                        continue
            except OSError:
                continue
            ticks += _ticks(f"/proc/{pid}/task/{tid}/stat")
    return ticks / os.sysconf("SC_CLK_TCK")


def mount(home: str, mp: str, env_extra: dict[str, str]) -> subprocess.Popen[bytes]:
    from lakemount.fuse import runner

    os.makedirs(mp, exist_ok=True)  # started again on the same point (--mount-epoch)
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


def cli_verb(home: str, env_extra: dict[str, str], runs: int) -> tuple[float, float]:
    """(median wall s, median CPU s) of ``lakemount fs stat`` run ``runs`` times as a new process each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(env_extra, LAKEMOUNT_HOME=home, LAKEMOUNT_CACHE_DISK_BYTES="0",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    walls, cpus = [], []
    for _ in range(runs):
        before = os.times()
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "lakemount.cli.main", "fs", "stat", f"lakefs://{REPO}/main/stat/obj"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t)
        after = os.times()
        cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
    return statistics.median(walls), statistics.median(cpus)


class Paired:
    """One figure measured on and off in alternating order, round after round, each round's pair adjacent in time.

    A pair shares the machine's load of its moment, so its ratio cancels what other work on a shared machine
    does to both; the median over rounds discards the rounds a burst hit one side of.
    """

    def __init__(self, name: str, unit: str, on: Callable[[], float] | None, off: Callable[[], float] | None, *,
                 lower_is_better: bool, fmt: str = ".0f") -> None:
        self.name, self.unit, self.on_fn, self.off_fn = name, unit, on, off
        self.lower_is_better, self.fmt = lower_is_better, fmt
        self.on: list[float] = []
        self.off: list[float] = []

    def round(self, i: int) -> None:
        """Measure both sides once; odd rounds measure off first (no order bias)."""
        assert self.on_fn is not None and self.off_fn is not None, "a figure filled by another's rounds"
        if i % 2:
            self.off.append(self.off_fn())
            self.on.append(self.on_fn())
        else:
            self.on.append(self.on_fn())
            self.off.append(self.off_fn())

    def ratio(self) -> float:
        """The median of the rounds' on/off ratios."""
        return statistics.median(a / b for a, b in zip(self.on, self.off, strict=True))

    def report(self) -> str:
        target = "<= 1.05" if self.lower_is_better else ">= 0.95"
        f = self.fmt
        return (f"({self.name}) {self.unit}: on {', '.join(f'{x:{f}}' for x in self.on)}; "
                f"off {', '.join(f'{x:{f}}' for x in self.off)}\n"
                f"     medians on {statistics.median(self.on):{f}}  off {statistics.median(self.off):{f}};"
                f"  on/off (median of the {len(self.on)} paired rounds) {self.ratio():5.3f}  (target {target})")


def main() -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of each side of each figure, split into rounds")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--only", default="gw,api,mount,cli")
    parser.add_argument("--mount-epoch", type=int, default=2,
                        help="start the two mounts again every this many rounds, sides swapped (0: never)")
    parser.add_argument("--server-epoch", type=int, default=2,
                        help="start the two servers again every this many rounds, in the other order (0: never)")
    parser.add_argument("--cli-runs", type=int, default=3, help="CLI processes per side per round")
    parser.add_argument("--control", action="store_true",
                        help="an A/A run: the 'on' side has the trail off too, so its ratios show what two servers (mounts) "
                             "differ by without the trail")
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
    on_env: dict[str, str] = dict(off_env) if args.control else {}
    if args.control:
        print("control run: both sides have the trail off", flush=True)
    procs: list[subprocess.Popen[str]] = []
    mounts: list[tuple[subprocess.Popen[bytes], str]] = []
    figures: list[Paired] = []
    try:
        if only & {"gw", "api"}:
            # An A/A run (--control) of one pair of servers scattered by ~15% on this machine, the server started
            # first the slower: so the pair is started again every --server-epoch rounds, in the other order, and
            # warmed before it counts; a bias of one process or of the start order falls on both sides over the run.
            servers: dict[str, tuple[subprocess.Popen[str], str, str]] = {}

            def reserve(epoch: int) -> None:
                while procs:
                    gateway_bench.stop(procs.pop())  # type: ignore[arg-type]
                sides = [("on", on_env), ("off", off_env)]
                if epoch % 2:
                    sides.reverse()
                for side, extra in sides:
                    servers[side] = serve(home, extra, side)
                    procs.append(servers[side][0])
                if epoch:  # the first pair is warmed by the uncounted pass below
                    for _proc, gw_url, api_url in servers.values():
                        if "gw" in only:
                            gateway_bench.small_gets(gw_url, f"/{REPO}/main/stat/obj", 1.0)
                        if "api" in only:
                            api_bench.concurrent(api_url, f"/repositories/{REPO}/refs/main/objects/stat?path=stat/obj", 4, 1.0)

            reserve(0)
        # The servers' (and mounts') CPU time per request, beside each throughput or latency figure: on a loaded
        # shared machine what the trail costs shows there more steadily than in latency (which others' load swamps).
        per_request = {name: Paired(f"{name} cpu", f"{whose} CPU us per {what} ({name})", None, None, lower_is_better=True)
                       for name, whose, what in (("gw", "server", "request"), ("api", "server", "request"),
                                                 ("mount", "mount", "open"))}
        totals: dict[tuple[str, str], list[float]] = {}
        # The on side's flusher threads (FLUSHER, in every worker): (CPU s, requests) per figure, over the rounds.
        flusher: dict[str, list[float]] = {}

        def timed(name: str, side: str, proc: subprocess.Popen[Any], run: Callable[[], tuple[float, float]]) -> float:
            """Run ``run`` (-> figure, requests served) and note the server's CPU time per request, and its flushers'."""
            before, flushed = session_cpu(proc.pid), thread_cpu(proc.pid, FLUSHER)
            figure, requests = run()
            used = session_cpu(proc.pid) - before
            flushing = thread_cpu(proc.pid, FLUSHER) - flushed  # both sides alike: what the bench does is the same
            if side == "on":
                f = flusher.setdefault(name, [0.0, 0.0])
                f[0] += flushing
                f[1] += requests
            getattr(per_request[name], side).append(used / max(requests, 1) * 1e6)
            t = totals.setdefault((name, side), [0.0, 0.0])
            t[0] += used
            t[1] += requests
            return figure

        if "mount" in only:
            # Two mount processes differ by more than the trail: an A/A run (both off) of one pair scattered by
            # +-30% on this machine.  So the pair is started again every --mount-epoch rounds, each time with the
            # sides on the other mount point and started in the other order: a bias of one process or one path
            # falls on both sides over the run instead of on one.
            side_mount: dict[str, tuple[subprocess.Popen[bytes], str]] = {}

            def remount(epoch: int) -> None:
                while mounts:
                    unmount(*mounts.pop())
                points = [os.path.join(tmp, "mnt-a"), os.path.join(tmp, "mnt-b")]
                sides = [("on", on_env), ("off", off_env)]
                if epoch % 2:
                    points.reverse()
                    sides.reverse()
                for (side, extra), mp in zip(sides, points, strict=True):
                    proc = mount(home, mp, extra)
                    mounts.append((proc, mp))
                    side_mount[side] = (proc, mp)

            remount(0)

            def mounted(side: str) -> float:
                proc, mp = side_mount[side]

                def run() -> tuple[float, float]:
                    rate = opens(os.path.join(mp, REPO, "main", "small"), per)
                    return rate, rate * per

                return timed("mount", side, proc, run)

            figures.append(Paired("mount", "warm small-file opens/s, one process",
                                  lambda: mounted("on"), lambda: mounted("off"), lower_is_better=False))
        if "gw" in only:
            obj = f"/{REPO}/main/stat/obj"

            def gw(side: str) -> float:
                proc, url, _ = servers[side]

                def run() -> tuple[float, float]:
                    rate = gateway_bench.small_gets(url, obj, per)
                    return rate, rate * per

                return timed("gw", side, proc, run)

            figures.append(Paired("gw", "4 KiB GETs/s, 16 clients", lambda: gw("on"), lambda: gw("off"),
                                  lower_is_better=False))
        if "api" in only:
            stat = f"/repositories/{REPO}/refs/main/objects/stat?path=stat/obj"

            def api(side: str) -> float:
                proc, _, url = servers[side]

                def run() -> tuple[float, float]:
                    _p50, p90, _p99, rps = api_bench.concurrent(url, stat, 4, per)
                    return p90, rps * per

                return timed("api", side, proc, run)

            figures.append(Paired("api", "statObject p90 ms, 4 clients", lambda: api("on"), lambda: api("off"),
                                  lower_is_better=True, fmt=".2f"))
        if "cli" in only:
            cli_cpu: dict[str, list[float]] = {"on": [], "off": []}

            def cli(side: str, extra: dict[str, str]) -> float:
                wall, cpu = cli_verb(home, extra, args.cli_runs)
                cli_cpu[side].append(cpu)
                return wall * 1000

            figures.append(Paired("cli", f"'lakemount fs stat' wall ms (median of {args.cli_runs} processes)",
                                  lambda: cli("on", on_env), lambda: cli("off", off_env), lower_is_better=True))
        # One pass of every figure, not counted: caches, connection pools and lazy imports of both sides warm
        # before the first counted round (which measures "on" first, and alone would pay for both).
        for fig in figures:
            fig.round(1)
        for fig in [*figures, *per_request.values()]:
            fig.on.clear()
            fig.off.clear()
        totals.clear()
        flusher.clear()
        if "cli" in only:
            cli_cpu["on"].clear()
            cli_cpu["off"].clear()
        print(f"{args.rounds} rounds; in each, every figure measures on and off back to back "
              f"({per:.1f} s each side for gw, mount, api)", flush=True)
        for i in range(args.rounds):
            if "mount" in only and args.mount_epoch and i and i % args.mount_epoch == 0:
                remount(i // args.mount_epoch)
            if only & {"gw", "api"} and args.server_epoch and i and i % args.server_epoch == 0:
                reserve(i // args.server_epoch)
            for fig in figures:
                fig.round(i)
            print(f"  round {i + 1}/{args.rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
        for fig in figures:
            print(fig.report())
        for name, fig in per_request.items():
            if fig.on:
                print(fig.report())
                (on_s, on_n), (off_s, off_n) = totals[(name, "on")], totals[(name, "off")]
                on_us, off_us = on_s / max(on_n, 1) * 1e6, off_s / max(off_n, 1) * 1e6
                print(f"     all rounds: on {on_us:.0f}  off {off_us:.0f} us per {fig.unit.split(' per ')[1].split()[0]};"
                      f"  on/off {on_us / off_us:5.3f}")
                # Where the on side's extra CPU goes: its flusher threads, and the rest (the request path).
                flush_s, flushed_n = flusher.get(name, (0.0, 0.0))
                flush_us = flush_s / max(flushed_n, 1) * 1e6
                print(f"      of it, the flusher threads ({FLUSHER}) {flush_us:.1f} us ({flush_us / off_us * 100:.1f}% "
                      f"of off's); on minus off {on_us - off_us:.1f} us, of which the rest {on_us - off_us - flush_us:.1f} "
                      "us (all rounds)")
        if "cli" in only:
            on_cpu, off_cpu = statistics.median(cli_cpu["on"]), statistics.median(cli_cpu["off"])
            print(f"      CPU s per 'fs stat' process: on {on_cpu:.3f}  off {off_cpu:.3f}  (+{(on_cpu - off_cpu) * 1000:.0f} ms)")
        print("ratios on/off: " + ", ".join(f"{f.name} {f.ratio():.3f}" for f in figures
                                          if f.name in ("gw", "mount", "api")))
    finally:
        for m, mp in mounts:
            unmount(m, mp)
        for p in procs:
            gateway_bench.stop(p)  # type: ignore[arg-type]
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
