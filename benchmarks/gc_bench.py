"""GC mark + sweep on 1,000,000 entries across 100 commits, local[1] against local[2] (issue 5).

    .venv/bin/python benchmarks/gc_bench.py [--entries 1000000] [--commits 100] [--files-every 10]

Builds, in a temp embedded lakemount, one branch whose commit ``c`` (dated
``commits - c`` days ago) adds ``entries/commits`` new keys and deletes the
keys added 50 commits earlier, so the history holds ENTRIES entries and the
rules (30 days) expire the oldest.  Every entry has its own data address;
one object in FILES_EVERY exists as a file (creating a million files would
measure the file system, not GC).  Then, each in a fresh process (a fresh
JVM and Python workers, as `lakemount gc run` has):

- GC dry run on local[1] and on local[2] (the same work; nothing deleted), with
  mark, re-mark and sweep times, and the speed-up;
- the baseline: one plain Python process reading every range of the retained
  commits and extracting the addresses (what the mark does, without Spark);
- a real run on local[2] (deletes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from lakemount.app import App
from lakemount.catalog.storage import metarange_ranges, read_table, value_address
from lakemount.config import load
from lakemount.graveler.model import Entry
from lakemount.jobs.retention import GcRules, retained_commits, store_rules

DAY = 86400.0
WINDOW = 50
ETAG = "d41d8cd98f00b204e9800998ecf8427e"


def env(home: str) -> dict[str, str]:
    return {"LAKEMOUNT_HOME": home, "LAKEMOUNT_CACHE_DISK_BYTES": "0"}


def sha_of(c: int, i: int) -> str:
    return hashlib.sha256(f"{c}/{i}".encode()).hexdigest()


def build(home: str, entries: int, commits: int, files_every: int) -> tuple[int, int]:
    app = App(load(env=env(home)))
    app.catalog.create_repository("bench")
    ns = app.catalog.repository("bench").storage_namespace
    root = ns[len("local://") :]
    per = entries // commits
    now = time.time()
    files = 0
    old = now - 200 * DAY
    for c in range(commits):
        items: list[tuple[bytes, bytes | None]] = []
        for i in range(per):
            sha = sha_of(c, i)
            items.append((f"p{c:04d}/k{i:06d}".encode(), Entry(f"data/{sha[:2]}/{sha}", 10, ETAG, 1).value()))
            if i % files_every == 0:
                d = os.path.join(root, "data", sha[:2])
                os.makedirs(d, exist_ok=True)
                path = os.path.join(d, sha)
                with open(path, "wb") as f:
                    f.write(b"x" * 10)
                os.utime(path, (old, old))
                files += 1
        if c >= WINDOW:
            items += [(f"p{c - WINDOW:04d}/k{i:06d}".encode(), None) for i in range(per)]
        for j in range(0, len(items), 20_000):
            app.graveler.set_many("bench", "main", items[j : j + 20_000])
        app.graveler.commit("bench", "main", f"c{c}", date=now - (commits - c) * DAY)
    store_rules(app.adapter, ns, GcRules(30))
    return files, per * commits


def scan_baseline(home: str) -> tuple[float, int]:
    app = App(load(env=env(home)))
    repo = app.catalog.repository("bench")
    commits = {c.id: c for c in app.metastore.list_commits("bench")}
    heads = {b.name: b.commit_id for b in app.metastore.list_branches("bench")}
    keep = retained_commits(commits, heads, [], GcRules(30), time.time())
    start = time.monotonic()
    ranges: dict[str, str] = {}
    for cid in keep:
        c = commits[cid]
        for info in metarange_ranges(app.adapter, repo.storage_namespace, c.metarange_id, c.metarange_checksum):
            ranges[info.id] = info.checksum
    live: set[str] = set()
    n = 0
    for rid, checksum in ranges.items():
        for _k, v in read_table(app.adapter, repo.storage_namespace, rid, checksum).items():
            live.add(value_address(v))
            n += 1
    return time.monotonic() - start, n


def run_gc_child(home: str, master: str, dry: bool) -> None:
    """One process: a dry run twice (cold: Python workers start; warm: they are up), or one real run."""
    from lakemount.jobs.gc import run_gc

    app = App(load(env=env(home)))
    out = {}
    for label in ("cold", "warm") if dry else ("cold",):
        report = run_gc(app, "bench", dry_run=dry, min_age=0, master=master, show_progress=False)
        out[label] = {k: report[k] for k in ("timings", "trashed", "scanned", "commits")}
    print(json.dumps(out))


def child(home: str, master: str, dry: bool) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", home, master, "dry" if dry else "real"],
        capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--files-every", type=int, default=10)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_gc_child(args.child[0], args.child[1], args.child[2] == "dry")
        return
    tmp = tempfile.mkdtemp(prefix="lm-gc-bench-")
    try:
        home = os.path.join(tmp, "home")
        t = time.monotonic()
        files, entries = build(home, args.entries, args.commits, args.files_every)
        print(f"built {entries:,} entries in {args.commits} commits, {files:,} files, in {time.monotonic() - t:.0f} s")
        base, n = scan_baseline(home)
        print(f"baseline: one Python process reads the retained ranges ({n:,} records): {base:.1f} s")
        work: dict[tuple[str, str], float] = {}
        for master in ("local[1]", "local[2]"):
            runs = child(home, master, dry=True)
            for label, r in runs.items():
                tm = r["timings"]
                work[master, label] = tm["mark"] + tm["remark"] + tm["sweep"]
                print(
                    f"dry run {master} {label}: mark {tm['mark']:.1f} s (scan {tm['mark_scan']:.1f} s) + re-mark {tm['remark']:.1f} s "
                    f"+ sweep {tm['sweep']:.1f} s = {work[master, label]:.1f} s (Spark start {tm.get('spark_start', 0):.1f} s); "
                    f"{r['scanned']['entries']:,} entries read, {r['commits']['retained']}/{r['commits']['total']} commits kept, "
                    f"would trash {r['trashed']['data_objects']:,} objects + {r['trashed']['tables']:,} tables"
                )
        for label in ("cold", "warm"):
            ratio = work["local[1]", label] / work["local[2]", label]
            print(f"speed-up local[2] vs local[1], {label}: {ratio:.2f}x; local[2] vs the one-process baseline scan: "
                  f"{work['local[2]', label] / base:.1f}x its time")
        r = child(home, "local[2]", dry=False)["cold"]
        tm = r["timings"]
        print(
            f"real run local[2]: mark {tm['mark']:.1f} s + re-mark {tm['remark']:.1f} s + sweep {tm['sweep']:.1f} s; "
            f"trashed {r['trashed']['data_objects']:,} objects, {r['trashed']['tables']:,} tables, {r['trashed']['bytes']:,} bytes"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
