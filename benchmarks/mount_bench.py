"""Mount benchmarks (issue 3): lakemount vs rclone and s3fs on one S3 endpoint, figures and ratios from one run.

    .venv/bin/python benchmarks/mount_bench.py [--scale 0.1] [--only a,b,c,d] [--peers rclone,s3fs]

Starts a moto S3 server on loopback that counts requests (benchmarks/moto_counting.py),
creates a bucket, and puts lakemount's block store there (``blockstore.type=s3``,
namespace ``s3://<bucket>/lakemount``, a temp ``LAKEMOUNT_HOME``); the peers mount
the same bucket under ``peers/`` (``rclone mount --vfs-cache-mode full`` and ``s3fs``).
lakemount's data is prepared through its catalog (uploads are not measured); reads
go through a mount of the commit-id path ``<mnt>/bench/<commit>/``.

Cold = a fresh mount process with empty caches (RAM, disk, kernel); warm = the
same mount again.  Requests are counted at the server, per figure and system.

(a) sequential read of a 1 GiB file: first read vs rclone's; second read vs local disk page cache
(b) open+read+close of 20,000 x 64 KiB files, one thread: cold vs rclone, warm files/s
(c) ``ls -lR`` of a 10,000-file and a 100,000-entry tree: first run vs rclone, second per 10,000 files
(d) 1 GiB sequential write + close vs local disk

``--scale`` multiplies every size and count (0.1: 102 MiB, 2,000 files, 1,000/10,000-entry trees).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from lakemount.fuse import process, runner  # noqa: E402

BUCKET = "bench"
REPO = "bench"
KEY_ID = "testing"
SECRET = "testing"
MiB = 1 << 20
READ_SIZE = 1 << 20
SMALL_SIZE = 64 << 10


# ---------------------------------------------------------------------- S3 server


@dataclass
class Moto:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def counts(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.endpoint}/__counts", timeout=30) as r:
            return dict(json.loads(r.read()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto(log_path: str) -> Moto:
    port = free_port()
    log = open(log_path, "ab")  # noqa: SIM115 (lives as long as the server)
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "moto_counting.py"), str(port)], stdout=subprocess.PIPE, stderr=log
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        raise SystemExit(f"moto did not start; see {log_path}")
    return Moto(port, proc)


class Requests:
    """Requests the server saw during a block: ``with Requests(moto) as r: ...; r.total``."""

    def __init__(self, moto: Moto) -> None:
        self.moto = moto
        self.delta: dict[str, int] = {}

    def __enter__(self) -> Requests:
        self.before = self.moto.counts()
        return self

    def __exit__(self, *exc: object) -> None:
        after = self.moto.counts()
        self.delta = {k: v - self.before.get(k, 0) for k, v in after.items() if v - self.before.get(k, 0)}

    @property
    def total(self) -> int:
        return self.delta.get("total", 0)

    def detail(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(self.delta.items()) if k != "total") or "none"


# ---------------------------------------------------------------------- mounts


@dataclass
class Mounted:
    name: str
    mountpoint: str
    root: str  # where the benchmark's files are inside the mount
    proc: subprocess.Popen[bytes]
    stop_fn: Callable[[], None] = field(repr=False, default=lambda: None)


def _wait_mounted(mp: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runner.find_mount(mp) is not None:
            return
        if proc.poll() is not None:
            with open(mp + ".log", errors="replace") as f:
                tail = f.read()[-2000:]
            raise SystemExit(f"mount at {mp} exited with {proc.returncode}:\n{tail}")
        time.sleep(0.05)
    raise SystemExit(f"mount at {mp} did not appear")


def _stop(proc: subprocess.Popen[bytes], mp: str) -> None:
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        for _ in range(50):
            if runner.find_mount(mp) is None:
                break
            with contextlib.suppress(Exception):
                runner.lazy_unmount(mp)
            time.sleep(0.1)


@contextlib.contextmanager
def mount(system: str, ctx: Bench, sub: str) -> Iterator[Mounted]:
    """A fresh mount (empty caches) of ``system``; always unmounted on exit."""
    n = ctx.next_id()
    mp = os.path.join(ctx.tmp, f"mnt-{system}-{n}")
    cache = os.path.join(ctx.tmp, f"cache-{system}-{n}")
    os.makedirs(mp)
    os.makedirs(cache)
    log = open(mp + ".log", "ab")  # noqa: SIM115
    try:
        if system == "lakemount":
            started = process.spawn(
                None, mp, ["--cache-dir", cache, "--head-ttl", "1"], detach=False, log=log, env=ctx.lm_env, timeout=120
            )
            proc = started.process
            root = os.path.join(mp, REPO, sub)
        elif system == "rclone":
            # rclone refuses a custom CA bundle with its own HTTP transport; the endpoint is plain HTTP anyway.
            env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"} | ctx.rclone_env
            proc = subprocess.Popen(
                ["rclone", "mount", f"bench:{BUCKET}/peers", mp, "--vfs-cache-mode", "full", "--cache-dir", cache,
                 "--config", os.path.join(ctx.tmp, "rclone.conf")],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )
            _wait_mounted(mp, proc)
            root = mp
        elif system == "s3fs":
            proc = subprocess.Popen(
                ["s3fs", f"{BUCKET}:/peers", mp, "-f", "-o", f"url={ctx.moto.endpoint}", "-o", "use_path_request_style",
                 "-o", f"passwd_file={ctx.passwd}", "-o", "endpoint=us-east-1"],
                stdout=log, stderr=subprocess.STDOUT,
            )
            _wait_mounted(mp, proc)
            root = mp
        else:
            raise SystemExit(f"unknown system {system}")
        m = Mounted(system, mp, root, proc)
        try:
            yield m
        finally:
            _stop(proc, mp)
    finally:
        log.close()


# ---------------------------------------------------------------------- workloads


def mount_counters(mountpoint: str, *prefixes: str) -> str:
    """Counters from a lakemount mount's ``.lakefs/stats`` whose names start with one of ``prefixes``."""
    found = []
    with open(os.path.join(mountpoint, ".lakefs", "stats")) as f:
        for line in f:
            name, _, value = line.strip().rpartition(" ")
            short = name.removeprefix("lakemount_fuse_").removesuffix("_total")
            if name.startswith("lakemount_fuse_") and "{" not in name and short.startswith(prefixes):
                found.append(f"{short} {value}")
    return ", ".join(found) or "none"


def drop_page_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def page_cache_shape(path: str, limit: int = 256 * MiB) -> str:
    """How the page cache holds the first ``limit`` bytes of ``path``: 4 KiB pages or large folios, active or not.

    Read from /proc/self/pagemap and /proc/kpageflags (root only); explains a
    warm-read figure, since a re-read pays per folio.
    """
    import mmap
    import struct
    from collections import Counter

    size = min(os.path.getsize(path), limit)
    fd = os.open(path, os.O_RDONLY)
    counts: Counter[str] = Counter()
    try:
        m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        view = memoryview(m)
        bytes(view[::4096])  # map every page (they are cached already: no I/O)
        ino, real = os.fstat(fd).st_ino, os.path.realpath(path)
        start = next(int(line.split()[0].split("-")[0], 16) for line in open("/proc/self/maps")
                     if len(line.split()) >= 6 and int(line.split()[4]) == ino and line.split()[5] == real)
        with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
            for i in range(size // 4096):
                pm.seek((start // 4096 + i) * 8)
                entry = struct.unpack("Q", pm.read(8))[0]
                if not entry >> 63:
                    counts["absent"] += 1
                    continue
                kf.seek((entry & ((1 << 55) - 1)) * 8)
                flags = struct.unpack("Q", kf.read(8))[0]
                counts["in large folios" if (flags >> 15) & 3 else "4 KiB pages"] += 1
                counts["active" if (flags >> 6) & 1 else "inactive"] += 1
        view.release()
        m.close()
    except (OSError, StopIteration, ValueError) as exc:
        return f"page cache shape unknown ({exc})"
    finally:
        os.close(fd)
    return ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items()))


def read_file(path: str) -> tuple[float, int]:
    """Seconds to read ``path`` sequentially in 1 MiB reads, and its size."""
    buf = bytearray(READ_SIZE)
    t = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    total = 0
    try:
        while True:
            n = os.readv(fd, [buf])
            if n == 0:
                break
            total += n
    finally:
        os.close(fd)
    return time.perf_counter() - t, total


def read_many(paths: list[str]) -> float:
    """Seconds to open, read whole and close each file, one thread."""
    buf = bytearray(SMALL_SIZE * 2)
    t = time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            while os.readv(fd, [buf]):
                pass
        finally:
            os.close(fd)
    return time.perf_counter() - t


def ls_lr(path: str) -> tuple[float, int]:
    t = time.perf_counter()
    out = subprocess.run(["ls", "-lR", path], check=True, capture_output=True).stdout
    return time.perf_counter() - t, out.count(b"\n")


def write_file(path: str, size: int, *, fsync: bool = False) -> float:
    block = os.urandom(READ_SIZE)
    t = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < size:
            n = min(READ_SIZE, size - done)
            os.write(fd, block[:n] if n < READ_SIZE else block)
            done += n
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t


# ---------------------------------------------------------------------- the run


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.scale = args.scale
        self.big = max(MiB, int((1 << 30) * self.scale))
        self.n_small = max(100, int(20_000 * self.scale))
        self.n_tree = max(100, int(10_000 * self.scale))
        self.n_tree_big = max(1000, int(100_000 * self.scale))
        self.peers = [p for p in args.peers.split(",") if p]
        self.only = set(args.only.split(","))
        self.tmp = tempfile.mkdtemp(prefix="lm-mount-bench-", dir=args.workdir)
        self._n = 0
        self.results: list[str] = []
        self.moto = start_moto(os.path.join(self.tmp, "moto.log"))
        home = os.path.join(self.tmp, "home")
        self.lm_env = {
            **os.environ,
            "LAKEMOUNT_HOME": home,
            "LAKEMOUNT_BLOCKSTORE_TYPE": "s3",
            "LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT": self.moto.endpoint,
            "LAKEMOUNT_BLOCKSTORE_S3_REGION": "us-east-1",
            "LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID": KEY_ID,
            "LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY": SECRET,
            "LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX": f"s3://{BUCKET}/lakemount",
            "LAKEMOUNT_LOGGING_LEVEL": "WARNING",
        }
        self.lm_env.pop("LAKEMOUNT_CONFIG", None)
        self.rclone_env = {
            "RCLONE_CONFIG_BENCH_TYPE": "s3",
            "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
            "RCLONE_CONFIG_BENCH_ENV_AUTH": "false",
            "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": KEY_ID,
            "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": SECRET,
            "RCLONE_CONFIG_BENCH_ENDPOINT": self.moto.endpoint,
            "RCLONE_CONFIG_BENCH_REGION": "us-east-1",
            "RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE": "true",
        }
        open(os.path.join(self.tmp, "rclone.conf"), "w").close()
        self.passwd = os.path.join(self.tmp, "s3fs.passwd")
        with open(self.passwd, "w") as f:
            f.write(f"{KEY_ID}:{SECRET}\n")
        os.chmod(self.passwd, 0o600)
        import boto3

        self.s3 = boto3.client(
            "s3", endpoint_url=self.moto.endpoint, region_name="us-east-1",
            aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
        )
        self.s3.create_bucket(Bucket=BUCKET)
        self.commit = ""

    def next_id(self) -> int:
        self._n += 1
        return self._n

    def say(self, line: str) -> None:
        print(line, flush=True)

    def result(self, line: str) -> None:
        self.results.append(line)
        self.say("  " + line)

    def close(self) -> None:
        self.moto.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.moto.proc.wait(10)
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ data
    def small_paths(self) -> list[str]:
        return [f"small/d{i // 100:04d}/f{i:06d}.bin" for i in range(self.n_small)]

    @staticmethod
    def tree_paths(top: str, n_entries: int, per_dir: int = 100) -> list[str]:
        """``n_entries`` entries (files and their directories) under ``top``."""
        files = n_entries * per_dir // (per_dir + 1)
        return [f"{top}/d{i // per_dir:05d}/f{i:07d}" for i in range(files)]

    def prepare(self) -> None:
        t = time.perf_counter()
        os.environ.update(self.lm_env)
        from lakemount.app import App
        from lakemount.config import load
        from lakemount.graveler.model import Entry

        app = App(load())
        cat = app.catalog
        cat.create_repository(REPO)
        big_path = self.big_local = os.path.join(self.tmp, "big.bin")
        if "a" in self.only:
            with open(big_path, "wb") as f:
                for _ in range(self.big // MiB):
                    f.write(os.urandom(MiB))
                f.write(os.urandom(self.big % MiB))
        with ThreadPoolExecutor(8) as pool:
            futures = []
            if self.only & {"a"}:
                futures.append(pool.submit(lambda: ("big.bin", cat.write_data(REPO, big_path))))
                futures.append(pool.submit(self.s3.upload_file, big_path, BUCKET, "peers/big.bin"))
            if self.only & {"b"}:
                for p in self.small_paths():
                    data = os.urandom(SMALL_SIZE)
                    futures.append(pool.submit(lambda p=p, data=data: (p, cat.write_data(REPO, data))))
                    if self.peers:
                        futures.append(pool.submit(self.s3.put_object, Bucket=BUCKET, Key=f"peers/{p}", Body=data))
            written = [f.result() for f in futures]
        mtime = time.time_ns()
        entries = [
            (p, Entry(info.address, info.size, info.etag, mtime).value())
            for p, info in (w for w in written if isinstance(w, tuple))
        ]
        if "c" in self.only:
            fake = "data/00/" + "0" * 64
            trees = self.tree_paths("tree10k", self.n_tree) + self.tree_paths("tree100k", self.n_tree_big)
            entries += [(p, Entry(fake, 4096, "0" * 32, mtime).value()) for p in trees]
            if self.peers:
                peer_trees = self.tree_paths("tree10k", self.n_tree)
                if self.n_tree_big <= self.args.peer_tree_max:
                    peer_trees += self.tree_paths("tree100k", self.n_tree_big)
                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(lambda p: self.s3.put_object(Bucket=BUCKET, Key=f"peers/{p}", Body=b""), peer_trees))
        entries.sort()
        for i in range(0, len(entries), 50_000):
            app.graveler.set_many(REPO, "main", [(p.encode(), v) for p, v in entries[i : i + 50_000]])
        self.commit = app.graveler.commit(REPO, "main", "benchmark data").commit.id
        self.say(f"prepared in {time.perf_counter() - t:.0f} s: commit {self.commit[:12]}, "
                 f"big file {self.big / MiB:.0f} MiB, {self.n_small:,} small files, trees {self.n_tree:,} / {self.n_tree_big:,} entries")

    # ------------------------------------------------------------------ figures
    def bench_a(self) -> None:
        size_mib = self.big / MiB
        self.say(f"(a) sequential read of a {size_mib:.0f} MiB file, 1 MiB reads")
        drop_page_cache(self.big_local)
        t_cold, _ = read_file(self.big_local)
        t_local, _ = read_file(self.big_local)
        local_cached = self.big / t_local / MiB
        self.result(f"local disk: cold {self.big / t_cold / MiB:,.0f} MiB/s, page cache {local_cached:,.0f} MiB/s")
        self.result(f"  local file's page cache after two reads: {page_cache_shape(self.big_local)}")
        first: dict[str, float] = {}
        second: dict[str, float] = {}
        for system in ["lakemount", *self.peers]:
            with mount(system, self, self.commit) as m:
                path = os.path.join(m.root, "big.bin")
                with Requests(self.moto) as r:
                    t1, n1 = read_file(path)
                t2, n2 = read_file(path)
                if n1 != self.big or n2 != self.big:
                    raise SystemExit(f"{system}: read {n1}/{n2} bytes of {self.big}")
                first[system], second[system] = self.big / t1 / MiB, self.big / t2 / MiB
                self.result(f"{system}: first read {first[system]:,.0f} MiB/s ({r.total} requests: {r.detail()}), "
                            f"second {second[system]:,.0f} MiB/s")
                if system == "lakemount":
                    self.result(f"  lakemount's own counters: {mount_counters(m.mountpoint, 'readahead', 'block_', 'fetched')}")
                    self.result(f"  its page cache after two reads: {page_cache_shape(path)}")
        if "rclone" in first:
            self.result(f"=> first read lakemount/rclone = {first['lakemount'] / first['rclone']:.2f}x (target >= 1)")
        self.result(f"=> second read lakemount/local page cache = {second['lakemount'] / local_cached:.2f}x (target >= 0.9)")

    def bench_b(self) -> None:
        rel = self.small_paths()
        self.say(f"(b) open+read+close of {len(rel):,} x 64 KiB files, one thread")
        cold: dict[str, float] = {}
        for system in ["lakemount", *self.peers]:
            with mount(system, self, self.commit) as m:
                paths = [os.path.join(m.root, p) for p in rel]
                with Requests(self.moto) as r:
                    t1 = read_many(paths)
                t2 = read_many(paths)
                cold[system] = len(paths) / t1
                self.result(f"{system}: cold {cold[system]:,.0f} files/s ({r.total / len(paths):.2f} requests/file: {r.detail()}), "
                            f"warm {len(paths) / t2:,.0f} files/s")
                if system == "lakemount":
                    t3 = read_many(paths)
                    self.result(f"lakemount warm again: {len(paths) / t3:,.0f} files/s (target >= 3,000)")
        if "rclone" in cold:
            self.result(f"=> cold lakemount/rclone = {cold['lakemount'] / cold['rclone']:.2f}x (target >= 1.2)")

    def bench_c(self) -> None:
        self.say("(c) ls -lR")
        for top, n in (("tree10k", self.n_tree), ("tree100k", self.n_tree_big)):
            first: dict[str, float] = {}
            for system in ["lakemount", *self.peers]:
                if system != "lakemount" and top == "tree100k" and n > self.args.peer_tree_max:
                    self.result(f"{system}: {top} skipped (over --peer-tree-max {self.args.peer_tree_max:,})")
                    continue
                with mount(system, self, self.commit) as m:
                    with Requests(self.moto) as r:
                        t1, lines = ls_lr(os.path.join(m.root, top))
                    t2, _ = ls_lr(os.path.join(m.root, top))
                    first[system] = t1
                    self.result(f"{system}: {top} ({n:,} entries, {lines:,} lines): first {t1:.2f} s ({r.total} requests: {r.detail()}), "
                                f"second {t2:.3f} s = {t2 * 10_000 / n:.3f} s per 10,000 entries")
            if "rclone" in first:
                self.result(f"=> {top} first run rclone/lakemount = {first['rclone'] / first['lakemount']:.0f}x faster (target >= 50)")

    def bench_d(self) -> None:
        size = self.big
        self.say(f"(d) sequential write of {size / MiB:.0f} MiB + close, 1 MiB writes")
        local = os.path.join(self.tmp, "local-write.bin")
        t_local = write_file(local, size)
        t_local_sync = write_file(local, size, fsync=True)
        os.unlink(local)
        self.result(f"local disk: {size / t_local / MiB:,.0f} MiB/s (close), {size / t_local_sync / MiB:,.0f} MiB/s (fsync+close)")
        with mount("lakemount", self, "main") as m:
            with Requests(self.moto) as r:
                t = write_file(os.path.join(m.root, "written.bin"), size)
            self.result(f"lakemount: {size / t / MiB:,.0f} MiB/s (write + close, stored in S3; {r.total} requests: {r.detail()})")
        self.result(f"=> lakemount/local = {t_local / t:.2f}x of page-cache write, {t_local_sync / t:.2f}x of fsync'd write")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplier for every size and count (default 1)")
    ap.add_argument("--only", default="a,b,c,d", help="figures to run (default a,b,c,d)")
    ap.add_argument("--peers", default="rclone,s3fs", help="peers to compare (default rclone,s3fs; empty: none)")
    ap.add_argument("--peer-tree-max", type=int, default=20_000, help="largest tree uploaded for the peers (moto: ~150 PUT/s)")
    ap.add_argument("--workdir", default=None, help="where temp files, caches and mountpoints go")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = ap.parse_args()
    for tool in [p for p in args.peers.split(",") if p]:
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (apt-get install {tool})")
    bench = Bench(args)
    t = time.perf_counter()
    try:
        bench.say(f"moto on {bench.moto.endpoint}; temp {bench.tmp}; scale {args.scale}")
        bench.prepare()
        for name in "abcd":
            if name in bench.only:
                getattr(bench, f"bench_{name}")()
        bench.say(f"\nsummary ({time.perf_counter() - t:.0f} s):")
        for line in bench.results:
            bench.say("  " + line)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
