"""A directory rename through the mount in constant time (issue 40): 1,000 vs 100,000 vs 1,000,000 files.

    PYTHONPATH=. .venv/bin/python benchmarks/dir_rename_bench.py [--sizes 1000,100000,1000000] [--baseline 1000,100000]

For each size N, a repository ``rN`` gets a committed directory ``d/`` of N files (built
through the catalog: staged in batches of raw records and committed, not through FUSE;
every entry points at one stored object, and ``d/real.txt`` holds real bytes).  Then,
where the user stands, on a kernel mount of the whole store (``lakemount mount``):

- **rename**: ``os.rename`` through the mount of ``d`` to ``x1``, ``x1`` to ``x2``, ``x2`` to
  ``e`` (renames of renames), each after an ``os.stat`` of its source (what ``mv`` does
  first) and timed alone; their median, and the ratio of the largest size's median to
  the smallest's (target <= 2x, and <= 50 ms);
- **second host**: right after the rename, a second ``App`` on the same stores (another
  catalog, fresh caches) lists ``e/`` (count and seconds), finds ``d/`` empty, and
  reads ``e/real.txt``;
- **commit**: ``.lakefs/commit`` written through the mount (the commit writes the moved
  ranges: its time grows with N, at the commit rate);
- **baseline** (same run, sizes of ``--baseline``): the per-key rename as the mount
  staged it before move records (a tombstone and an entry per key, read from a listing
  of the directory, in one ``Catalog.apply``), on a copy of the directory in ``b/``:
  seconds, and its ratio to the move record's rename of the same size; then the commit
  of that per-key rename, and the move record's commit as a ratio of it; then a plain commit of N
  new files staged under ``p/`` (the commit of a change of the same size that moves nothing), and
  the move record's commit as a ratio of that.

The machine's load average is printed with the figures (other work shares its cores).
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
from lakemount.catalog.model import Entry, prefix_end  # noqa: E402
from lakemount.config import load  # noqa: E402
from tests.fuse import mounting  # noqa: E402

BATCH = 50_000


def fresh_app(home: str) -> App:
    os.environ["LAKEMOUNT_HOME"] = home
    os.environ["LAKEMOUNT_CACHE_DISK_BYTES"] = "0"
    return App(load())


def build(app: App, repo: str, top: str, n: int) -> None:
    """A committed directory ``top/`` of ``n`` files (``top/real.txt`` with real bytes, the rest sharing one object)."""
    cat = app.catalog
    real = cat.put(repo, "main", f"{top}/real.txt", b"real bytes\n")
    shared = Entry(real.address, real.size, real.etag, real.mtime_ns).value()
    keys = (f"{top}/p{i // 1000:04d}/f{i:07d}".encode() for i in range(n - 1))
    while batch := [(k, shared) for _, k in zip(range(BATCH), keys, strict=False)]:
        cat.stage_records(repo, "main", batch)
    cat.commit(repo, "main", f"{n} files under {top}/")


def stage_new(app: App, repo: str, top: str, n: int) -> None:
    """``n`` new files under ``top/`` staged, not committed (one stored object shared, as :func:`build`'s)."""
    cat = app.catalog
    real = cat.put(repo, "main", f"{top}/real.txt", b"real bytes\n")
    shared = Entry(real.address, real.size, real.etag, real.mtime_ns).value()
    keys = (f"{top}/p{i // 1000:04d}/f{i:07d}".encode() for i in range(n - 1))
    while batch := [(k, shared) for _, k in zip(range(BATCH), keys, strict=False)]:
        cat.stage_records(repo, "main", batch)


def per_key_rename(app: App, repo: str, old: str, new: str) -> float:
    """The rename as the mount staged it before move records: every key deleted and put again, in one apply."""
    t0 = time.perf_counter()
    moved = [(item.path, item.entry) for item in app.catalog.list(repo, "main", old + "/") if item.entry is not None]
    changes: list[tuple[str, Entry | None]] = [(p, None) for p, _e in moved]
    changes += [(new + p[len(old) :], e) for p, e in moved]
    app.catalog.apply(repo, "main", changes)
    return time.perf_counter() - t0


def second_host(home: str, repo: str, n: int) -> str:
    """List and read what the rename made through another App (its own catalog and caches)."""
    other = fresh_app(home)
    try:
        t0 = time.perf_counter()
        listed = sum(1 for _ in other.catalog.scan_records(repo, "main", b"e/", prefix_end(b"e/")))
        t_list = time.perf_counter() - t0
        gone = next(iter(other.catalog.scan_records(repo, "main", b"d/", prefix_end(b"d/"))), None) is None
        t0 = time.perf_counter()
        entry = other.catalog.get_optional(repo, "main", "e/real.txt")
        assert entry is not None, "e/real.txt is not there on the second host"
        data = other.catalog.read(other.catalog.repository(repo), entry)
        t_read = time.perf_counter() - t0
    finally:
        other.close()
    assert listed == n, f"second host lists {listed} entries under e/, not {n}"
    assert gone, "d/ still lists entries on the second host"
    assert data == b"real bytes\n", data
    return f"second host: lists {listed:,} under e/ in {t_list:.2f} s, d/ empty, reads e/real.txt in {t_read * 1000:.1f} ms"


def commit(branch_dir: str, message: str) -> float:
    """Seconds of a commit through the mount's ``.lakefs/commit``."""
    t0 = time.perf_counter()
    with open(os.path.join(branch_dir, ".lakefs", "commit"), "w") as f:
        f.write(message)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,100000,1000000")
    ap.add_argument("--baseline", default="1000,100000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    baseline = {int(s) for s in args.baseline.split(",") if s}
    tmp = tempfile.mkdtemp(prefix="lm-rename-bench-")
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    app = fresh_app(home)
    times: dict[int, float] = {}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for n in sizes:
        repo = f"r{n}"
        app.catalog.create_repository(repo)
        t0 = time.perf_counter()
        build(app, repo, "d", n)
        if n in baseline:
            build(app, repo, "b", n)
        print(f"[{n:>9,}] built in {time.perf_counter() - t0:.1f} s", flush=True)
    mnt = os.path.join(tmp, "mnt")
    m = mounting.start(home, mnt, env=mounting.env_for(home, LAKEMOUNT_CACHE_DISK_BYTES="0"))
    try:
        for n in sizes:
            base = os.path.join(mnt, f"r{n}", "main")
            laps = []
            for old, new in (("d", "x1"), ("x1", "x2"), ("x2", "e")):
                os.stat(os.path.join(base, old))
                t0 = time.perf_counter()
                os.rename(os.path.join(base, old), os.path.join(base, new))
                laps.append(time.perf_counter() - t0)
            times[n] = statistics.median(laps)
            print(f"[{n:>9,}] rename through the mount (d -> x1 -> x2 -> e): median {times[n] * 1000:.1f} ms "
                  f"({', '.join(f'{t * 1000:.1f}' for t in laps)} ms)", flush=True)
            print(f"[{n:>9,}] {second_host(home, f'r{n}', n)}", flush=True)
            names = set(os.listdir(base))
            assert "e" in names and "d" not in names, names
            t_commit = commit(base, f"rename of {n} files")
            print(f"[{n:>9,}] commit through the mount after it: {t_commit:.2f} s", flush=True)
            committed = sum(1 for _ in app.catalog.scan_records(f"r{n}", "main@", b"e/", prefix_end(b"e/")))
            assert committed == n, f"the commit holds {committed} entries under e/, not {n}"
            if n in baseline:
                t_old = per_key_rename(app, f"r{n}", "b", "c")
                print(f"[{n:>9,}] baseline, per-key rename (before move records): {t_old:.3f} s = "
                      f"{t_old / times[n]:.0f}x the move record's", flush=True)
                t_old_commit = commit(base, f"per-key rename of {n} files")
                print(f"[{n:>9,}] baseline, commit after the per-key rename: {t_old_commit:.2f} s "
                      f"(the move record's commit: {t_commit / t_old_commit:.2f}x it)", flush=True)
                stage_new(app, f"r{n}", "p", n)
                t_plain = commit(base, f"{n} new files")
                print(f"[{n:>9,}] baseline, plain commit of {n:,} staged new files: {t_plain:.2f} s "
                      f"(the move record's commit: {t_commit / t_plain:.2f}x it)", flush=True)
    finally:
        mounting.stop(m)
    small, large = min(times), max(times)
    ratio = times[large] / times[small]
    print(f"rename {large:,} / {small:,} files: {ratio:.2f}x (target <= 2x); largest {times[large] * 1000:.1f} ms "
          f"(target <= 50 ms)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    app.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
