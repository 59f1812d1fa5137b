"""The five calls of a small file with write-back, in one process (issue 36, stops 56-57): CPU per call.

    .venv/bin/python benchmarks/fast_calls_bench.py [--files 10000] [--size 1024] [--blocks 10] [--profile N] [--plain]

What the kflags shim calls on the mount's request loop for each file ``cp -r`` copies, called here as it calls
them (the adapter's ``fast_lookup`` of the absent name, ``fast_create``, ``fast_write``, ``fast_flush``,
``fast_release``, with plain arguments), on a write-back core over the embedded store, in this process, without
the kernel.  Each call is timed with ``time.thread_time`` (this thread's CPU only); the pipeline is held for the
whole run (its round would otherwise run beside the calls and take the GIL), then drained, and every file read
back through the catalog.  Prints, per block of ``--files / --blocks`` files, the microseconds of CPU each call
took on average, and the five together; then the minimum and median over blocks (the minimum is the figure least
disturbed by the machine's load).  ``--profile N``: also a cProfile of N more files, the top functions by own
time (under the profiler every call costs more; the shares are what it shows).

Stop 58: ``--plain``, the mount without write-back: a flush the loop gives back (its save needs a thread) is run
as ``hand_flush``'s thread runs it, the core's flush in this thread, and timed as the flush; the count of those is
printed (0 once a lone writer's close of a small file is saved on the loop itself, stop 58).
"""

from __future__ import annotations

import argparse
import cProfile
import errno
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

REPO = "bench"
CALLS = ("lookup", "create", "write", "flush", "release")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--profile", type=int, default=0, help="files written under cProfile after the timed ones")
    parser.add_argument("--plain", action="store_true",
                        help="without write-back: the flush (which needs a thread) is the core's, as hand_flush's thread runs it")
    args = parser.parse_args()

    home = tempfile.mkdtemp(prefix="lm-fastcalls-")
    os.environ["LAKEMOUNT_HOME"] = home
    os.environ.pop("LAKEMOUNT_CONFIG", None)
    from lakemount.app import App
    from lakemount.fuse import writeback
    from lakemount.fuse.adapter import FuseOperations
    from lakemount.fuse.core import FileSystem, MountOptions
    from lakemount.fuse.values import Caller

    writeback.HOLD_MAX = writeback.LINGER = 1e9  # type: ignore[misc]  # the pipeline's round waits for the drain
    app = App.from_config()
    app.catalog.create_repository(REPO)
    cache = app.cache
    extra = {} if args.plain else {"writeback": True, "journal_dir": os.path.join(home, "journal")}
    opts = MountOptions(spool_dir=os.path.join(home, "spool"), recovered_dir=os.path.join(home, "recovered"),
                        head_ttl=3600.0, **extra)  # type: ignore[arg-type]
    fs = FileSystem(app.catalog, app.adapter, cache.ram, cache.disk, opts, cache_stats=cache.stats)
    ops = FuseOperations(fs)
    uid, gid, pid = os.getuid(), os.getgid(), os.getpid()
    try:
        repo_ino = fs.lookup(1, REPO.encode()).ino
        main_ino = fs.lookup(repo_ino, b"main").ino
        d = fs.mkdir(main_ino, b"dst", 0o40755, Caller(uid, gid, pid)).ino
        data = os.urandom(args.size)
        # A branch's first file does what needs a thread (the empty object a create points at, stored once per
        # mount): written here through the core as a thread would, not timed.
        opened, _ = fs.create(d, b"first", 0o100644, os.O_WRONLY | os.O_CREAT, Caller(uid, gid, pid))
        fs.write(opened.fh, 0, data)
        fs.flush(opened.fh, pid)
        fs.release(opened.fh)
        per_block = max(1, args.files // args.blocks)
        lookup, create, write, flush, release = (ops.fast_lookup, ops.fast_create, ops.fast_write, ops.fast_flush,
                                                 ops.fast_release)
        clock = time.thread_time_ns
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC

        def one(name: bytes, t: list[int]) -> None:
            t0 = clock()
            got = lookup(d, name, uid, gid, pid)
            t1 = clock()
            made = create(d, name, 0o100644, flags, uid, gid, pid)
            t2 = clock()
            assert got == -errno.ENOENT or (isinstance(got, tuple) and got[0] == 0), got  # absent (negative entry)
            assert isinstance(made, tuple), made
            fh = made[14]
            t3 = clock()
            n = write(fh, 0, data)
            t4 = clock()
            f = flush(fh, pid)
            if f is None and args.plain:  # given back: the shim hands it to a thread, which runs the core's flush
                ops._handed = None
                fs.flush(fh, pid)
                handed[0] += 1
                f = 0
            t5 = clock()
            r = release(fh)
            t6 = clock()
            assert n == len(data) and f == 0 and r == 0, (n, f, r)  # answered on the loop: none needs a thread
            t[0] += t1 - t0
            t[1] += t2 - t1
            t[2] += t4 - t3
            t[3] += t5 - t4
            t[4] += t6 - t5

        rows = []
        handed = [0]
        i = 0
        for b in range(args.blocks):
            t = [0] * 5
            for _ in range(per_block):
                one(f"f{i:06d}".encode(), t)
                i += 1
            rows.append([x / per_block / 1000 for x in t])
            us = rows[-1]
            print(f"block {b + 1:2d} ({per_block} files): " + "  ".join(f"{c} {v:6.1f}" for c, v in zip(CALLS, us))
                  + f"  | five {sum(us):6.1f} us")
        five = [sum(r) for r in rows]
        if args.plain:
            print(f"closes handed to a thread (the loop could not save them): {handed[0]} of {i}")
        best = min(range(len(rows)), key=lambda k: five[k])
        print(f"\nfive calls a file, us of CPU: min {min(five):.1f} (block {best + 1}: "
              + ", ".join(f"{c} {v:.1f}" for c, v in zip(CALLS, rows[best])) + f"), median {statistics.median(five):.1f}")
        if args.profile:
            prof = cProfile.Profile()
            t = [0] * 5
            prof.enable()
            for _ in range(args.profile):
                one(f"f{i:06d}".encode(), t)
                i += 1
            prof.disable()
            print(f"\ncProfile of {args.profile} more files (own time):")
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        if fs.writeback is not None:
            t0 = time.monotonic()
            fs.writeback.drain(None)
            print(f"drained (staged) {i} files in {time.monotonic() - t0:.2f} s")
        repo = app.catalog.repository(REPO)
        for k in range(0, i, max(1, i // 50)):
            got_data = app.catalog.read(repo, app.catalog.stat(REPO, "main", f"dst/f{k:06d}"))
            assert got_data == data, k
        print(f"read back {len(range(0, i, max(1, i // 50)))} of them through the catalog: right")
        app.catalog.sync_stored()  # the closes' objects stored unsynced (no write-back): before their home goes
    finally:
        fs.close()
        shutil.rmtree(home, ignore_errors=True)
    print(f"load: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
