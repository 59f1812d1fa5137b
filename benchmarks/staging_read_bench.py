"""Reads over a large staging and a large commit, old (``sql``) vs new (``lsm``) staging, in one run.

Over PostgreSQL (a throwaway cluster, as ``staging_bench.py`` starts one) and the
local block store, per backend, measured in this run:

* ``--entries`` (default 200,000) staged entries written as ``--files`` (default 64)
  changes of equal size, so that ``lsm`` holds them as that many L1 files (``l1_max``
  is set above it: no compaction folds them while they are read);
* stat of a staged key on the branch, warm (every file already in this process's
  cache; what a mount's ``stat`` asks the graveler): p50/p99 over ``--stats`` random keys;
* 1,000-entry listing of the branch from a random start key, warm: p50/p90;
* commit of ``--commit-entries`` (default 1,000,000) staged entries on another branch:
  entries/s from the call to its return.

Targets (issue 26): stat p99 <= 1 ms, list p90 <= 20 ms, commit >= 246k entries/s.
Run: ``PYTHONPATH=. .venv/bin/python benchmarks/staging_read_bench.py [--quick] [--only commit]``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.staging_bench import REPO, Postgres, graveler, value  # noqa: E402
from lakemount.graveler.staging.lsm import LsmStaging  # noqa: E402

TARGETS = {"stat_p99_ms": 1.0, "list_p90_ms": 20.0, "commit_per_s": 246_000.0}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def key(i: int) -> bytes:
    # Spread like a job's output: many directories, files interleaved across the changes.
    return b"part/%03d/%09d.parquet" % (i % 997, i)


def stage(g: Any, branch: str, n: int, files: int) -> float:
    """Stage ``n`` entries on ``branch`` as ``files`` changes of equal size; returns seconds."""
    per = -(-n // files)
    t0 = time.perf_counter()
    for f in range(files):
        lo, hi = f * per, min(n, (f + 1) * per)
        # Change f holds every files-th key: each file spans the whole key space, as
        # concurrent writers' flushes do (the worst case for min/max pruning).
        g.set_many(REPO, branch, [(key(i), value(i)) for i in range(f, n, files)] if hi > lo else [])
    return time.perf_counter() - t0


def measure(g: Any, backend: str, args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, float] = {}
    if args.only != "commit":
        measure_reads(g, backend, args, out)
    # commit: a branch of its own, staged in as many changes as main
    g.create_branch(REPO, "big", "main")
    m = args.commit_entries
    out["commit_stage_s"] = stage(g, "big", m, args.files)
    t0 = time.perf_counter()
    r = g.commit(REPO, "big", f"{m} entries")
    out["commit_s"] = time.perf_counter() - t0
    assert r.stats.changes_applied == m, r.stats
    out["commit_per_s"] = m / out["commit_s"]
    return out


def measure_reads(g: Any, backend: str, args: argparse.Namespace, out: dict[str, float]) -> None:
    """Stage ``--entries`` on main, then time warm stats and listings over them (into ``out``)."""
    n = args.entries
    out["stage_s"] = stage(g, "main", n, args.files)
    if isinstance(g.staging, LsmStaging):
        files = g.staging.lists.files(g.get_branch(REPO, "main").tokens)
        out["l1_files"] = sum(1 for f in files if f.level == 1)
    ref = g.resolve(REPO, "main")
    rnd = random.Random(7)
    for i in range(0, n, max(1, n // 2000)):  # warm: every file loaded once, connections up
        g.get(REPO, ref, key(i))
    lat = []
    for _ in range(args.stats):
        i = rnd.randrange(n)
        t0 = time.perf_counter()
        v = g.get(REPO, ref, key(i))
        lat.append(time.perf_counter() - t0)
        assert v == value(i), (backend, i)
    out["stat_p50_ms"], out["stat_p99_ms"] = pct(lat, 50) * 1e3, pct(lat, 99) * 1e3
    keys = sorted(key(i) for i in range(0, n, max(1, n // 4000)))
    lat = []
    for _ in range(args.lists):
        start = keys[rnd.randrange(len(keys) // 2)]
        t0 = time.perf_counter()
        got = sum(1 for _ in zip(range(1000), g.scan(REPO, ref, start, None)))
        lat.append(time.perf_counter() - t0)
        assert got == 1000, got
    out["list_p50_ms"], out["list_p90_ms"] = pct(lat, 50) * 1e3, pct(lat, 90) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--stats", type=int, default=5000)
    ap.add_argument("--lists", type=int, default=100)
    ap.add_argument("--commit-entries", type=int, default=1_000_000)
    ap.add_argument("--backends", default="sql,lsm")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20,000 entries, 50,000 committed")
    ap.add_argument("--only", choices=["commit"], help="only the commit phase (no staged main, no stats or listings)")
    args = ap.parse_args()
    if args.quick:
        args.entries, args.stats, args.lists, args.commit_entries = 20_000, 500, 20, 50_000
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; "
          f"{args.entries:,} staged entries in {args.files} changes, commit of {args.commit_entries:,}", flush=True)
    root = tempfile.mkdtemp(prefix="lm-readbench-")
    pg = Postgres()
    pg.start()
    res: dict[str, dict[str, float]] = {}
    try:
        for backend in args.backends.split(","):
            db = f"read_{backend}"
            pg.admin().cursor().execute(f"CREATE DATABASE {db}")
            g = graveler(pg.url(db), root, backend)
            if isinstance(g.staging, LsmStaging):
                g.staging.l1_max = args.files + 1  # the files stay L1 files while they are read
                g.staging.cache.max_bytes = g.staging.cache.max_item_bytes = 1 << 30  # type: ignore[attr-defined]
            g.create_repository(REPO, f"local://{root}/ns-{backend}")
            r = res[backend] = measure(g, backend, args)
            extra = f", {r['l1_files']:.0f} L1 files" if "l1_files" in r else ""
            reads = "" if args.only else (
                f"staged {args.entries:,} in {r['stage_s']:.1f}s{extra}; "
                f"stat warm p50 {r['stat_p50_ms']:.2f} ms p99 {r['stat_p99_ms']:.2f} ms; "
                f"1,000-entry list p50 {r['list_p50_ms']:.1f} ms p90 {r['list_p90_ms']:.1f} ms; ")
            print(f"  {backend}: {reads}"
                  f"commit of {args.commit_entries:,} {r['commit_s']:.2f}s = {r['commit_per_s']:,.0f} entries/s "
                  f"(staged in {r['commit_stage_s']:.1f}s)", flush=True)
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
    for backend, r in res.items():
        verdict = ", ".join(
            f"{name} {'met' if (r[name] <= t if name.endswith('_ms') else r[name] >= t) else 'NOT met'}"
            for name, t in TARGETS.items() if name in r
        )
        print(f"  {backend} against the targets (stat p99 <= 1 ms, list p90 <= 20 ms, commit >= 246k/s): {verdict}")
    if "sql" in res and "lsm" in res:
        s, n = res["sql"], res["lsm"]
        reads = "" if args.only else (f"stat p99 {n['stat_p99_ms'] / s['stat_p99_ms']:.2f}x, list p90 "
                                      f"{n['list_p90_ms'] / s['list_p90_ms']:.2f}x, ")
        print(f"  ratio lsm/sql: {reads}commit entries/s {n['commit_per_s'] / s['commit_per_s']:.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    subprocess.run(["uptime"], check=False)


if __name__ == "__main__":
    main()
