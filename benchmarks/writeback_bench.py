"""Write-back benchmark (issue 36): ``cp -r`` of many small files into one mount, embedded store, ratios from one run.

    .venv/bin/python benchmarks/writeback_bench.py [--files 10000] [--size 1024] [--fsync-files 1000]

One ``LAKEMOUNT_HOME`` (SQLite, local block store), repository ``bench``; each
figure copies the same source directory (``--files`` files of ``--size`` bytes,
flat) with ``cp -r`` into a fresh branch:

- ``passthrough``: into benchmarks/passthrough_fs.py over a local folder (the
  ceiling: the same kernel round trips with nothing behind them);
- ``noop pyfuse3`` and ``noop shim``: into benchmarks/noop_fs.py, which keeps
  names in memory and does nothing else, its requests served by pyfuse3's loop,
  or by lakemount's kflags shim as the mount's small-file requests are (stop 56:
  how many files a second a FUSE loop in Python serves here at all);
- ``local``: into a local folder (no FUSE);
- ``writeback``: ``lakemount mount --writeback`` (closes return once journaled;
  the journal syncs its files every second); then the lag until the last file is
  staged (what another host waits to see it) and the commit through the
  control file that follows (it waits for nothing left);
- ``writeback+fsync``: ``mount.journal_fsync`` (every close waits for an fsync of
  its data and record), on ``--fsync-files`` files;
- ``no writeback``: the mount as before (each close uploads and stages).

Every copied file is read back through the catalog and compared.  Prints
files/s and ratios (writeback vs passthrough, vs no writeback).  Beside them, a
diagnosis without the kernel: the same files written through the filesystem core
(tests/fuse/pathfs.py) with and without write-back, in this process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from lakemount.fuse import process, runner  # noqa: E402

REPO = "bench"


def make_source(root: str, n: int, size: int) -> str:
    src = os.path.join(root, "src")
    os.makedirs(src)
    for i in range(n):
        with open(os.path.join(src, f"f{i:05d}"), "wb") as f:
            f.write(i.to_bytes(8, "big") * (size // 8) + os.urandom(size % 8))
    return src


def cp(src: str, dst: str) -> float:
    t = time.perf_counter()
    subprocess.run(["cp", "-r", src, dst], check=True)
    return time.perf_counter() - t


def env_for(home: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ, LAKEMOUNT_HOME=home, **extra)
    env.pop("LAKEMOUNT_CONFIG", None)
    return env


def lakemount(home: str, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "lakemount.cli.main", *args], check=True, env=env_for(home),
                   stdout=subprocess.DEVNULL)


@contextmanager
def mounted(home: str, mp: str, args: list[str], **env: str) -> Iterator[None]:
    os.makedirs(mp, exist_ok=True)
    with open(mp + ".log", "ab") as log:
        started = process.start(lambda fd: process.mount_command(None, mp, args, fd), mp, detach=False, log=log,
                                env=env_for(home, **env), timeout=120)
    try:
        yield
    finally:
        runner.unmount(home, mp, wait=600)
        started.process.wait(600)


@contextmanager
def _served(script: str, mp: str, *args: str) -> Iterator[None]:
    """One of the ceilings' file systems (``script`` in benchmarks/, run with ``args`` and the mount point ``mp``),
    mounted while the block runs."""
    os.makedirs(mp, exist_ok=True)
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), *args], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready", f"{script} did not mount"
        yield
    finally:
        subprocess.run(["fusermount3", "-u", mp], check=False)
        proc.wait(60)


def noop(mp: str, shim: bool) -> contextlib.AbstractContextManager[None]:
    return _served("noop_fs.py", mp, mp, *(["--shim"] if shim else []))


def passthrough(backing: str, mp: str) -> contextlib.AbstractContextManager[None]:
    os.makedirs(backing, exist_ok=True)
    return _served("passthrough_fs.py", mp, backing, mp)


def status(branch_dir: str) -> dict[str, object]:
    with open(os.path.join(branch_dir, ".lakefs", "status")) as f:
        data: dict[str, object] = json.load(f)
    return data


def check(home: str, branch: str, src: str) -> int:
    """Files of ``src`` whose bytes branch ``branch`` does not hold under ``src/`` (0 expected)."""
    os.environ["LAKEMOUNT_HOME"] = home
    from lakemount.app import App

    app = App.from_config()
    try:
        repo = app.catalog.repository(REPO)
        wrong = 0
        for name in os.listdir(src):
            entry = app.catalog.get_optional(REPO, branch, f"src/{name}")
            with open(os.path.join(src, name), "rb") as f:
                if entry is None or app.catalog.read(repo, entry) != f.read():
                    wrong += 1
        return wrong
    finally:
        app.close()  # its audit records are flushed while the home is still there


def core_rates(root: str, src: str) -> dict[str, float]:
    """Files/s written through the kernel-free core, with and without write-back (a diagnosis)."""
    home = os.path.join(root, "core-home")
    os.makedirs(home, mode=0o700)
    os.environ["LAKEMOUNT_HOME"] = home
    from lakemount.app import App
    from lakemount.fuse.core import FileSystem, MountOptions
    from tests.fuse.pathfs import PathFS

    app = App.from_config()
    app.catalog.create_repository(REPO)
    names = sorted(os.listdir(src))
    datas = [open(os.path.join(src, name), "rb").read() for name in names]
    out = {}
    for label, branch, extra in (("core writeback", "main", {"writeback": True, "journal_dir": os.path.join(home, "j")}),
                                 ("core no writeback", "plain", {})):
        if branch != "main":
            app.catalog.create_branch(REPO, branch, "main")
        opts = MountOptions(spool_dir=os.path.join(home, "spool-" + branch), head_ttl=1.0, **extra)  # type: ignore[arg-type]
        fs = FileSystem(app.catalog, app.catalog.block_source(), app.cache.ram, app.cache.disk, opts)
        pfs = PathFS(fs)
        pfs.mkdir(f"/{REPO}/{branch}/src")
        t = time.perf_counter()
        for name, data in zip(names, datas, strict=True):
            pfs.write_file(f"/{REPO}/{branch}/src/{name}", data)
        out[label] = len(names) / (time.perf_counter() - t)
        fs.close()
    app.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--fsync-files", type=int, default=1000)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="wbbench-")
    home = os.path.join(root, "home")
    os.makedirs(home, mode=0o700)
    rates: dict[str, float] = {}
    try:
        src = make_source(root, args.files, args.size)
        small = os.path.join(root, "small")
        os.makedirs(small)
        for name in sorted(os.listdir(src))[: args.fsync_files]:
            shutil.copy(os.path.join(src, name), small)
        lakemount(home, "repo", "create", f"lakefs://{REPO}")
        for branch in ("wb", "wbsync", "plain"):
            lakemount(home, "branch", "create", f"lakefs://{REPO}/{branch}", "--source", f"lakefs://{REPO}/main")
        n = args.files

        with passthrough(os.path.join(root, "pt-backing"), os.path.join(root, "pt")):
            rates["passthrough"] = n / cp(src, os.path.join(root, "pt", "src"))
        for label, shim in (("noop pyfuse3", False), ("noop shim", True)):
            with noop(os.path.join(root, label.replace(" ", "-")), shim):
                rates[label] = n / cp(src, os.path.join(root, label.replace(" ", "-"), "src"))
        rates["local"] = n / cp(src, os.path.join(root, "local"))

        mp = os.path.join(root, "mnt")
        with mounted(home, mp, ["--writeback"]):
            branch_dir = os.path.join(mp, REPO, "wb")
            t0 = time.perf_counter()
            took = cp(src, os.path.join(branch_dir, "src"))
            rates["writeback"] = n / took
            while True:
                pending = status(branch_dir)["writeback"]["pending"]  # type: ignore[index]
                if not pending:
                    break
                time.sleep(0.01)
            staged_at = time.perf_counter() - t0
            t = time.perf_counter()
            with open(os.path.join(branch_dir, ".lakefs", "commit"), "w") as f:
                f.write("bench")
            commit_s = time.perf_counter() - t
        print(f"writeback: cp -r {n} files {took:.2f}s acknowledged; all staged {staged_at - took:.2f}s after cp returned "
              f"({n / staged_at:.0f} files/s end to end); commit after {commit_s:.2f}s")
        wrong_wb = check(home, "wb", src)

        with mounted(home, mp, ["--writeback"], LAKEMOUNT_MOUNT_JOURNAL_FSYNC="true"):
            m = args.fsync_files
            rates["writeback+fsync"] = m / cp(small, os.path.join(mp, REPO, "wbsync", "src"))

        with mounted(home, mp, []):
            rates["no writeback"] = n / cp(src, os.path.join(mp, REPO, "plain", "src"))
        wrong_plain = check(home, "plain", src)

        print(f"\ncp -r of {n:,} files of {args.size} B (writeback+fsync: {args.fsync_files:,}), one run, embedded store:")
        for name, rate in rates.items():
            print(f"  {name:16s} {rate:9,.0f} files/s")
        core = core_rates(root, src)
        for name, rate in core.items():
            print(f"  {name:16s} {rate:9,.0f} files/s  (diagnosis: no kernel, this process)")
        print(f"  core writeback / core no writeback x{core['core writeback'] / core['core no writeback']:.2f}")
        print(f"  writeback / passthrough  x{rates['writeback'] / rates['passthrough']:.2f}  (target >= 0.5)")
        print(f"  writeback / no writeback x{rates['writeback'] / rates['no writeback']:.2f}")
        print(f"  writeback / noop shim x{rates['writeback'] / rates['noop shim']:.2f}  (the same request path with "
              f"nothing behind it; noop pyfuse3 x{rates['noop pyfuse3'] / rates['passthrough']:.2f} of the passthrough)")
        print(f"  writeback >= 2,000 files/s: {'yes' if rates['writeback'] >= 2000 else 'no'} (2,000 is "
              f"x{2000 / rates['passthrough']:.2f} of this run's passthrough, a filesystem with nothing behind its requests)")
        print(f"  no writeback >= 816 files/s (x2 of the issue's 408): {'yes' if rates['no writeback'] >= 816 else 'no'}")
        print(f"  files whose bytes the branch does not hold: writeback {wrong_wb}, no writeback {wrong_plain}")
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
