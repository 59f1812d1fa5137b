"""GC's trash end to end on Spark: the S3 race, a late metadata-only copy, and purging.

Each test drives whole GC runs (``run_gc``) and checks the store itself: where
an object is (its key, its trash key, nowhere), that every entry still reads
back byte for byte, and that the reports count what happened.  Times are set
with ``os.utime`` (local store) rather than waited for, except on S3, where
LastModified cannot be set and a test sleeps past the one-second clock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block.local import LocalAdapter
from lakemount.block.trash import trash_key
from lakemount.catalog.gcstore import GcStore
from lakemount.graveler.committed.store import join
from lakemount.jobs.gc import GcJob, run_gc
from lakemount.jobs.gc_tasks import sweep_bucket
from lakemount.jobs.retention import GcRules, store_rules
from tests.jobs.scenario import Model, data_key, sha
from tests.jobs.test_gc import candidate_keys, swept_keys
from tests.jobs.test_trash import AfterStat

pytestmark = [pytest.mark.spark]

AGE = 1000.0  # seconds into the past objects are aged to; more than MIN_AGE
MIN_AGE = 600.0


def where(app: App, ns: str, key: str) -> tuple[bool, bool]:
    """(at its key, in the trash), asked of the store itself."""
    return app.blockstore.exists(join(ns, key)), app.blockstore.exists(join(ns, trash_key(key) or ""))


def age_namespace(ns: str, seconds: float = AGE) -> None:
    """Make every object of a local namespace ``seconds`` old (trash included, marks excluded)."""
    root = LocalAdapter.path_of(ns)
    t = time.time() - seconds
    for directory, _dirs, files in os.walk(root):
        if "/_lakefs/gc/marks" in directory:
            continue
        for name in files:
            os.utime(os.path.join(directory, name), (t, t))


def test_touch_between_stat_and_move_on_s3_is_read_through_the_trash_and_restored(app: App, spark: Any, s3: Any) -> None:
    s3.create_bucket(Bucket="gc-race")
    cat = app.catalog
    cat.create_repository("race", "s3://gc-race/race")
    repo = cat.repository("race")
    ns = repo.storage_namespace
    store_rules(app.adapter, ns, GcRules(1))
    payload = b"bytes that a writer re-uses while GC sweeps them " * 200
    key = data_key(payload)
    cat.put("race", "main", "dropped.bin", payload)
    app.graveler.reset("race", "main")
    time.sleep(2.1)  # min-age 0 still spares objects modified in the last (whole, on S3) second
    job = GcJob(app, "race", buckets=4)
    mark = job.mark(min_age=0)
    assert key in candidate_keys(app, ns, mark.id)

    def writer() -> None:
        # Dedup: the bytes exist, so the writer touches them and stages an entry; the sweep has already read the old time.
        cat.put("race", "main", "reused.bin", payload)

    hooked = AfterStat(app.adapter, join(ns, key), writer)
    mark_dir = job.mark_dir(mark.id)
    # The bucket's sweep as an executor runs it, after a re-mark that found nothing new.
    result = sweep_bucket(GcStore(hooked, ns), mark.cutoff, mark_dir, f"{mark_dir}/sweeps/race", set(), frozenset(), False,
                          int(sha(payload)[:2], 16) % 4)
    assert hooked.fired and result["stats"]["trashed"] == 1
    assert where(app, ns, key) == (False, True)  # the race: the entry now points at a trashed object
    entry = cat.stat("race", "main", "reused.bin")
    assert cat.read(repo, entry) == payload
    assert cat.read(repo, entry, 10, 20) == payload[10:30]
    with cat.open(repo, entry) as f:
        assert f.read() == payload

    nxt = run_gc(app, "race", min_age=0)
    assert nxt["trash"]["referenced"] == 1
    assert nxt["restored"]["data_objects"] == 1 and nxt["restored"]["bytes"] == len(payload)
    assert nxt["purged"]["data_objects"] == 0
    assert where(app, ns, key) == (True, False)
    assert cat.read(repo, cat.stat("race", "main", "reused.bin")) == payload


def test_late_metadata_only_copy_reads_now_and_is_restored_never_purged(app: App, spark: Any, tmp_path: Path) -> None:
    m = Model.create(app, "late")
    cat = app.catalog
    repo = cat.repository("late")
    ns = repo.storage_namespace
    store_rules(app.adapter, ns, GcRules(1))
    payload = b"bytes only a dropped entry pointed at"
    key = data_key(payload)
    m.put("main", "old.bin", payload)
    dropped = cat.stat("late", "main", "old.bin")
    m.reset("main")
    m.put("main", "keep.txt", b"kept")
    age_namespace(ns)
    first = run_gc(app, "late", min_age=MIN_AGE)
    assert first["trashed"]["data_objects"] == 1 and swept_keys(app, ns, first) == [key]
    assert where(app, ns, key) == (False, True)

    # After that run's last re-mark: a metadata-only copy of the dropped entry (no bytes, no touch).
    m.put_entry("main", "copy.bin", dropped)
    m.work["main"]["copy.bin"] = payload
    assert m.read_tree("main") == m.work["main"]  # read through the trash
    # However long it stays there, the trashed copy is not purged while referenced.
    age_namespace(ns, 10 * AGE)
    dry = run_gc(app, "late", min_age=MIN_AGE, dry_run=True)
    assert dry["restored"]["data_objects"] == 1 and dry["purged"]["data_objects"] == 0
    assert where(app, ns, key) == (False, True)  # a dry run moves nothing
    second = run_gc(app, "late", min_age=MIN_AGE)
    assert second["restored"] == dry["restored"] and second["purged"] == dry["purged"]
    assert swept_keys(app, ns, second, "restored") == [key]
    assert where(app, ns, key) == (True, False)
    m.commit("main", 0)
    age_namespace(ns, 10 * AGE)
    third = run_gc(app, "late", min_age=MIN_AGE)
    assert third["trashed"]["data_objects"] == third["purged"]["data_objects"] == 0
    assert where(app, ns, key) == (True, False)
    assert m.read_tree("main") == m.work["main"]


def test_purge_needs_two_unreferenced_runs_and_min_age(app: App, spark: Any) -> None:
    m = Model.create(app, "purge")
    ns = app.catalog.repository("purge").storage_namespace
    store_rules(app.adapter, ns, GcRules(1))
    gone = b"written 100 days ago, replaced 50 days ago"
    m.put("main", "a.bin", gone)
    m.commit("main", 100)
    m.put("main", "a.bin", b"current")
    m.commit("main", 50)
    dropped = b"staged, then dropped"
    m.put("main", "b.bin", dropped)
    m.reset("main")
    age_namespace(ns)

    first = run_gc(app, "purge", min_age=MIN_AGE)
    t = first["trashed"]
    assert t["data_objects"] == 2 and t["tables"] > 0  # the expired commit's data, metarange and range
    trashed = swept_keys(app, ns, first)
    assert {data_key(gone), data_key(dropped)} <= set(trashed)
    assert all(where(app, ns, k) == (False, True) for k in trashed)
    assert m.read_tree("main") == {"a.bin": b"current"}

    second = run_gc(app, "purge", min_age=MIN_AGE)  # trashed moments ago: younger than min-age
    assert second["purged"]["data_objects"] == second["purged"]["tables"] == 0
    assert second["kept"]["in_trash"] == len(trashed)
    assert all(where(app, ns, k) == (False, True) for k in trashed)

    age_namespace(ns)  # as if the first run had been AGE seconds ago
    dry = run_gc(app, "purge", min_age=MIN_AGE, dry_run=True)
    assert swept_keys(app, ns, dry, "purged") == trashed
    assert all(where(app, ns, k) == (False, True) for k in trashed)
    third = run_gc(app, "purge", min_age=MIN_AGE)
    p = third["purged"]
    assert (p["data_objects"], p["tables"], p["bytes"]) == (t["data_objects"], t["tables"], t["bytes"])
    assert p == dry["purged"] and third["restored"]["data_objects"] == 0
    assert all(where(app, ns, k) == (False, False) for k in trashed)
    assert m.read_tree("main") == {"a.bin": b"current"}
