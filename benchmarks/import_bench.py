"""Zero-copy import throughput (issue 5): objects/s against the 20,000/s target, on Spark.

    .venv/bin/python benchmarks/import_bench.py [--objects 200000] [--master local[2]]

Creates OBJECTS tiny files (1,000 per directory) in a temp dir and imports them
into a fresh embedded lakemount (SQLite + local block store), committing.
Prints, in one run:

- the baseline: one process walking the tree and hashing every file (the
  least any importer has to do locally), in objects/s;
- a cold import (first Spark job of the process: Python workers start) and a
  warm one (same session, a copy of the tree under another prefix), each as
  work objects/s (plan + Spark job) and end to end (with the commit);
- a re-import of the unchanged tree (stages nothing).

lakeFS documents "a few thousand objects per second" for its import.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time

from lakemount.app import App
from lakemount.config import load
from lakemount.jobs.importer import import_objects
from lakemount.jobs.session import get_spark

TARGET = 20_000


def make_tree(root: str, n: int) -> None:
    per_dir = 1000
    for d in range((n + per_dir - 1) // per_dir):
        p = os.path.join(root, f"d{d:04d}")
        os.makedirs(p)
        for i in range(min(per_dir, n - d * per_dir)):
            with open(os.path.join(p, f"part-{i:05d}.csv"), "wb") as f:
                f.write(f"{d},{i}\n".encode())


def baseline(root: str) -> float:
    start = time.monotonic()
    n = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            os.stat(path)
            with open(path, "rb") as f:
                hashlib.md5(f.read()).hexdigest()
            n += 1
    return n / (time.monotonic() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=200_000)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lm-import-bench-")
    try:
        src = os.path.join(tmp, "src")
        t = time.monotonic()
        make_tree(src, args.objects)
        print(f"created {args.objects} files in {time.monotonic() - t:.1f} s")
        base = baseline(src)
        print(f"baseline: one process walks + hashes      {base:>10,.0f} objects/s")
        app = App(load(env={"LAKEMOUNT_HOME": os.path.join(tmp, "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
                            "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": src}))
        app.catalog.create_repository("bench")
        t = time.monotonic()
        sc = get_spark(args.master).sparkContext
        print(f"spark session ({args.master}, {sc.defaultParallelism} cores): {time.monotonic() - t:.1f} s")
        for label, prefix in (("cold", "a"), ("warm", "b")):
            r = import_objects(app, src, "bench", "main", prefix, commit=True, message=label, show_progress=False)
            t = r["timings"]
            e2e = r["objects"] / (t["total"] - t.get("spark_start", 0))
            print(
                f"{label} import: {r['objects_per_second']:>10,} objects/s of work ({t['plan'] + t['import']:.1f} s), "
                f"{e2e:>8,.0f} objects/s with commit ({t['total'] - t.get('spark_start', 0):.1f} s); "
                f"target {TARGET:,}: {r['objects_per_second'] / TARGET:.2f}x; vs baseline {r['objects_per_second'] / base:.2f}x"
            )
        r = import_objects(app, src, "bench", "main", "b", show_progress=False)
        print(f"re-import, unchanged: {r['objects_per_second']:>10,} objects/s (staged {r['staged']}, unchanged {r['unchanged']})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
