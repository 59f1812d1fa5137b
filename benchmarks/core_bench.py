"""Versioned-core benchmarks (issue 2): prints each figure next to its target.

    .venv/bin/python benchmarks/core_bench.py [--entries 1000000] [--only a,b,c,d,e]

(a) random point lookups/s on a committed ref of N entries, warm, one process
(b) commit of 1 changed entry on an N-entry branch vs a 10,000-entry one: time ratio, ranges written
(c) diff of two N-entry commits differing in 10 keys
(d) commit of 200,000 staged entries: entries/s
(e) listing 240,000 objects under one prefix (half staged, half committed)

Everything runs on the embedded setup (SQLite + local block store) in a temp LAKEMOUNT_HOME.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

from lakemount.app import App
from lakemount.config import load
from lakemount.graveler.model import Entry

VALUE_ETAG = "d41d8cd98f00b204e9800998ecf8427e"


def entry(i: int) -> bytes:
    sha = f"{i:064x}"
    return Entry(f"data/{sha[:2]}/{sha}", 1000 + i % 5000, VALUE_ETAG, 1_700_000_000_000_000_000 + i).value()


def key(i: int, prefix: str = "tables/events/") -> bytes:
    return f"{prefix}dt=2026-{i % 12 + 1:02d}-{i % 28 + 1:02d}/part-{i:09d}.parquet".encode()


def fresh_app(home: str) -> App:
    os.environ["LAKEMOUNT_HOME"] = home
    os.environ["LAKEMOUNT_CACHE_DISK_BYTES"] = "0"
    return App(load())


def stage(app: App, repo: str, branch: str, keys: list[bytes], batch: int = 50_000) -> None:
    for i in range(0, len(keys), batch):
        app.graveler.set_many(repo, branch, [(k, entry(j + i)) for j, k in enumerate(keys[i : i + batch])])


def build(app: App, repo: str, n: int) -> list[bytes]:
    app.catalog.create_repository(repo)
    keys = sorted(key(i) for i in range(n))
    stage(app, repo, "main", keys)
    app.graveler.commit(repo, "main", f"{n} entries")
    return keys


def bench_a(app: App, repo: str, keys: list[bytes]) -> None:
    g = app.graveler
    ref = g.resolve(repo, "main@")
    mr = g.metarange_of(g.get_repository(repo), g.get_commit(repo, ref.commit_id))
    rng = random.Random(1)
    for k in keys:  # warm every range once
        mr.get(k)
    sample = [keys[rng.randrange(len(keys))] for _ in range(500_000)]
    t = time.perf_counter()
    for k in sample:
        if mr.get(k) is None:
            raise SystemExit(f"lookup miss for {k!r}")
    rate = len(sample) / (time.perf_counter() - t)
    # The same through the facade (ref resolution per call), for scale.
    t = time.perf_counter()
    for k in sample[:20_000]:
        g.get(repo, ref, k)
    facade = 20_000 / (time.perf_counter() - t)
    print(f"(a) point lookups, warm, {len(keys):,} entries: {rate:,.0f}/s (target >= 200,000/s); "
          f"via Graveler.get with a resolved ref: {facade:,.0f}/s")


def one_commit(app: App, repo: str, keys: list[bytes], rounds: int = 7) -> tuple[float, int, int]:
    times, written = [], []
    for r in range(rounds):
        k = keys[len(keys) // 2 + r * 7919 % (len(keys) // 2)]
        app.graveler.set(repo, "main", k, entry(10_000_000 + r))
        t = time.perf_counter()
        res = app.graveler.commit(repo, "main", f"one change {r}")
        times.append(time.perf_counter() - t)
        assert res.stats is not None
        written.append(res.stats.ranges_written)
    return statistics.median(times), max(written), res.stats.ranges_reused if res.stats else 0


def bench_b(app: App, big_repo: str, big_keys: list[bytes]) -> None:
    small_keys = build(app, "small", 10_000)
    t_small, w_small, _ = one_commit(app, "small", small_keys)
    t_big, w_big, reused = one_commit(app, big_repo, big_keys)
    print(f"(b) commit of 1 change: {len(big_keys):,} entries {t_big * 1000:.1f} ms vs 10,000 entries "
          f"{t_small * 1000:.1f} ms: ratio {t_big / t_small:.2f} (target <= 2); ranges written {w_big} + metarange "
          f"(target <= 2), {reused} reused by reference")


def bench_c(app: App, repo: str, keys: list[bytes]) -> None:
    rng = random.Random(3)
    for i in range(10):
        app.graveler.set(repo, "main", keys[rng.randrange(len(keys))], entry(20_000_000 + i))
    app.graveler.commit(repo, "main", "ten changes")
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        n = sum(1 for _ in app.graveler.diff(repo, "main~1", "main"))
        runs.append(time.perf_counter() - t)
    # Cold: a new process-level state (fresh caches) reading from the block store.
    cold_app = App(load())
    t = time.perf_counter()
    sum(1 for _ in cold_app.graveler.diff(repo, "main~1", "main"))
    cold = time.perf_counter() - t
    print(f"(c) diff of two {len(keys):,}-entry commits differing in {n} keys: warm {min(runs) * 1000:.1f} ms, "
          f"cold {cold * 1000:.1f} ms (target < 100 ms)")


def bench_d(app: App) -> None:
    app.catalog.create_repository("staged")
    keys = sorted(key(i, "bulk/") for i in range(200_000))
    stage(app, "staged", "main", keys)
    t = time.perf_counter()
    res = app.graveler.commit("staged", "main", "200k")
    dt = time.perf_counter() - t
    assert res.stats is not None
    print(f"(d) commit of 200,000 staged entries: {dt:.2f} s = {200_000 / dt:,.0f} entries/s (target >= 50,000/s); "
          f"{res.stats.ranges_written} ranges")


def bench_e(app: App) -> None:
    app.catalog.create_repository("listing")
    keys = [f"prefix/obj-{i:08d}".encode() for i in range(240_000)]
    stage(app, "listing", "main", keys[0::2])
    app.graveler.commit("listing", "main", "half committed")
    stage(app, "listing", "main", keys[1::2])
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        n = sum(1 for _ in app.catalog.list("listing", "main", "prefix/"))
        runs.append(time.perf_counter() - t)
    assert n == 240_000, n
    print(f"(e) listing {n:,} objects under one prefix (120,000 staged + 120,000 committed): "
          f"{min(runs):.2f} s (target < 2 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--only", default="a,b,c,d,e")
    args = ap.parse_args()
    only = set(args.only.split(","))
    home = tempfile.mkdtemp(prefix="lm-bench-")
    try:
        app = fresh_app(home)
        keys: list[bytes] = []
        if only & {"a", "b", "c"}:
            t = time.perf_counter()
            keys = build(app, "big", args.entries)
            print(f"setup: staged and committed {args.entries:,} entries in {time.perf_counter() - t:.1f} s")
        if "a" in only:
            bench_a(app, "big", keys)
        if "b" in only:
            bench_b(app, "big", keys)
        if "c" in only:
            bench_c(app, "big", keys)
        if "d" in only:
            bench_d(app)
        if "e" in only:
            bench_e(app)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
