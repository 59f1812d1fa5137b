"""rmdir after N files were renamed out of the directory, through the kernel mount (issue 36, item 4).

    .venv/bin/python benchmarks/rmdir_bench.py [--sizes 100,1000,10000] [--last 10]
    .venv/bin/python benchmarks/ab_revs.py BEFORE HEAD --same-scripts --rounds 1 -- \\
        .venv/bin/python benchmarks/rmdir_bench.py

What a Spark job's committer leaves: a task's files renamed one by one out of its
attempt directory, then the directory removed.  Each rename out is a staged deletion
under the directory, and the mount asks whether the directory is left empty at every
rename (an implicit directory gets a marker when its last name goes) and at the rmdir.
For each N, a repository of its own holds, staged as those renames leave it (through
the catalog, before the mount starts: N renames through the mount would measure the
renames), ``d/`` with N deletions and ``--last`` files still in it, and ``out/`` with
the N files moved there.  Through a ``lakemount mount`` of the store the benchmark then
renames the last files out of ``d/`` one by one (each one's seconds; their median), and
removes ``d/`` (seconds).  Printed per N, with the ratio of the largest N's figures to
the smallest's (1.0: the cost does not grow with the deletions before it) and the load
average (other work shares the cores).  With ``ab_revs.py`` the same script runs
against two revisions interleaved (before and after a change of the emptiness check).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lakemount.app import App  # noqa: E402
from lakemount.catalog.model import Entry  # noqa: E402
from lakemount.config import load  # noqa: E402
from tests.fuse import mounting  # noqa: E402

BATCH = 20_000


def fresh_app(home: str) -> App:
    os.environ["LAKEMOUNT_HOME"] = home
    os.environ["LAKEMOUNT_CACHE_DISK_BYTES"] = "0"
    return App(load())


def renamed_out(app: App, repo: str, n: int, last: int) -> None:
    """``d/`` after ``n`` of its files were renamed to ``out/`` one by one, ``last`` files still in it (staged)."""
    cat = app.catalog
    cat.create_repository(repo)
    real = cat.put(repo, "main", "real.txt", b"real bytes\n")
    shared = Entry(real.address, real.size, real.etag, real.mtime_ns).value()
    names = [b"f%07d" % i for i in range(n)]
    for i in range(0, n, BATCH):
        cat.stage_records(repo, "main", [(b"d/" + k, shared) for k in names[i : i + BATCH]])
    for i in range(0, n, BATCH):
        batch = names[i : i + BATCH]
        cat.stage_records(repo, "main", [*((b"d/" + k, None) for k in batch), *((b"out/" + k, shared) for k in batch)])
    cat.stage_records(repo, "main", [(b"d/g%03d" % i, shared) for i in range(last)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000", help="files renamed out of d/ before the measured steps")
    ap.add_argument("--last", type=int, default=10, help="files renamed out through the mount, one at a time")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    tmp = tempfile.mkdtemp(prefix="lm-rmdir-bench-")
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    app = fresh_app(home)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for n in sizes:
        t0 = time.perf_counter()
        renamed_out(app, f"r{n}", n, args.last)
        print(f"[{n:>6,}] staged in {time.perf_counter() - t0:.1f} s", flush=True)
    app.close()
    renames: dict[int, float] = {}
    rmdirs: dict[int, float] = {}
    mnt = os.path.join(tmp, "mnt")
    m = mounting.start(home, mnt, env=mounting.env_for(home, LAKEMOUNT_CACHE_DISK_BYTES="0"))
    try:
        for n in sizes:
            base = os.path.join(mnt, f"r{n}", "main")
            laps = []
            for i in range(args.last):
                src, dst = os.path.join(base, "d", f"g{i:03d}"), os.path.join(base, "out", f"g{i:03d}")
                os.stat(src)
                t0 = time.perf_counter()
                os.rename(src, dst)
                laps.append(time.perf_counter() - t0)
            renames[n] = statistics.median(laps)
            assert os.listdir(os.path.join(base, "d")) == [], "d/ is not empty after its last file went"
            t0 = time.perf_counter()
            os.rmdir(os.path.join(base, "d"))
            rmdirs[n] = time.perf_counter() - t0
            assert "d" not in os.listdir(base), "d/ is still there after rmdir"
            print(f"[{n:>6,}] rename out of d/ after {n:,} renamed out: median {renames[n] * 1000:.2f} ms; "
                  f"rmdir d/: {rmdirs[n] * 1000:.2f} ms", flush=True)
    finally:
        mounting.stop(m)
        shutil.rmtree(tmp, ignore_errors=True)
    small, large = min(sizes), max(sizes)
    print(f"largest/smallest ({large:,} / {small:,} renamed out): rename {renames[large] / renames[small]:.2f}x, "
          f"rmdir {rmdirs[large] / rmdirs[small]:.2f}x; load average after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
