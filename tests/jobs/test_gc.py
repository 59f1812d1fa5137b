"""Garbage collection end to end on Spark: what goes, what stays, dry runs, interrupted sweeps, bad input."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block.gcmoves import trash
from lakemount.block.trash import trash_key
from lakemount.errors import InvalidArgument, NotFound, PreconditionFailed, RepositoryNotFound
from lakemount.graveler.committed.store import join
from lakemount.graveler.model import Entry
from lakemount.jobs.gc import GcJob, run_gc
from lakemount.jobs.retention import GcRules, store_rules
from tests.jobs.scenario import Model, build_gc_scenario, data_key, live_contents

pytestmark = [pytest.mark.spark]

RULES = GcRules(14, (("dev", 7), ("main", 30)))


def swept_keys(app: App, ns: str, report: dict[str, Any], outcome: str = "trashed") -> list[str]:
    """Every key a sweep trashed, restored or purged (or, dry, would have), from its part files."""
    base = join(ns, f"_lakefs/gc/marks/{report['mark_id']}/sweeps/{report['sweep_id']}/{outcome}/")
    keys: list[str] = []
    for info in app.adapter.list(base):
        keys += [line.split("\t")[0] for line in app.adapter.get(info.url).decode().splitlines()]
    return sorted(keys)


def candidate_keys(app: App, ns: str, mark_id: str) -> list[str]:
    base = join(ns, f"_lakefs/gc/marks/{mark_id}/candidates/")
    keys: list[str] = []
    for info in app.adapter.list(base):
        keys += [line.split("\t")[0] for line in app.adapter.get(info.url).decode().splitlines()]
    return sorted(keys)


def check_reads(m: Model, retained: set[str]) -> None:
    """Every retained commit and every branch (committed + staged) reads back exactly as written."""
    for cid in retained:
        assert m.read_tree(cid) == m.trees[cid], f"commit {cid[:12]}"
    for branch, tree in m.work.items():
        assert m.read_tree(branch) == tree, f"branch {branch}"


def age(path: str, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


@pytest.mark.slow
def test_gc_trashes_exactly_what_expired_and_dropped_staging_left(app: App, spark: Any, tmp_path: Path) -> None:
    m, retained = build_gc_scenario(app)
    repo = app.catalog.repository("lake")
    ns = repo.storage_namespace
    root = ns[len("local://") :]
    # An imported object that only expired commits reference: outside the namespace, never GC's.
    external = tmp_path / "external" / "ext.bin"
    external.parent.mkdir()
    external.write_bytes(b"imported")
    # Files GC does not recognise, old enough to be collected if it did.
    strays = [f"{root}/data/zz/readme.txt", f"{root}/data/ab/not-a-sha", f"{root}/_lakefs/abc.tmp", f"{root}/notes.txt"]
    for p in strays:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b"not GC's")
        age(p, 100 * 86400)
    m.put_entry("dev", "imported/ext.bin", Entry(f"local://{external}", 8, "", 1))
    m.work["dev"]["imported/ext.bin"] = b"imported"
    store_rules(app.adapter, ns, RULES)
    expected = sorted({data_key(c) for c in m.written} - {data_key(c) for c in live_contents(m, retained)})
    assert len(expected) > 20
    time.sleep(1.2)  # min-age 0 still spares objects modified in the last second

    dry = run_gc(app, "lake", dry_run=True, min_age=0)
    dry_keys = swept_keys(app, ns, dry)
    assert [k for k in dry_keys if k.startswith("data/")] == expected
    assert dry["trashed"]["tables"] > 0 and dry["commits"]["expired"] > 0
    assert all(app.adapter.exists(join(ns, k)) for k in dry_keys)  # a dry run moves nothing
    assert dry["restored"]["data_objects"] == dry["purged"]["data_objects"] == 0  # the trash is empty

    real = run_gc(app, "lake", min_age=0)
    assert swept_keys(app, ns, real) == dry_keys
    assert real["trashed"] == dry["trashed"]
    assert real["garbage"] == dry["garbage"]
    assert not any(app.adapter.exists(join(ns, k)) for k in dry_keys)
    assert all(app.adapter.exists(join(ns, trash_key(k) or "")) for k in dry_keys)
    # data/ab/not-a-sha and _lakefs/abc.tmp are listed and left; data/zz/ and notes.txt are not even listed.
    assert real["kept"]["unrecognized"] == 2
    check_reads(m, retained)
    assert external.read_bytes() == b"imported"
    assert all(os.path.exists(p) for p in strays)
    assert app.adapter.exists(join(ns, "_lakefs/gc/rules.json"))
    assert any(True for _ in app.adapter.list(join(ns, "_lakefs/commits/")))

    again = run_gc(app, "lake", min_age=0)
    assert again["trashed"]["data_objects"] == again["trashed"]["tables"] == 0
    assert again["restored"]["data_objects"] == again["restored"]["tables"] == 0
    # Whether the first run trashed them more than min-age + 1 s before this mark is a matter of timing.
    assert again["purged"]["data_objects"] + again["purged"]["tables"] + again["kept"]["in_trash"] == len(dry_keys)
    assert sorted(swept_keys(app, ns, again, "purged")) == sorted(
        k for k in dry_keys if not app.adapter.exists(join(ns, trash_key(k) or ""))
    )
    check_reads(m, retained)


@pytest.mark.slow
def test_interrupted_sweep_is_finished_by_running_it_again(app: App, spark: Any) -> None:
    m, retained = build_gc_scenario(app)
    ns = app.catalog.repository("lake").storage_namespace
    store_rules(app.adapter, ns, RULES)
    time.sleep(1.2)
    marked = run_gc(app, "lake", mark_only=True, min_age=0)
    assert "trashed" not in marked
    candidates = candidate_keys(app, ns, marked["mark_id"])
    assert len(candidates) == marked["garbage"]["data_objects"] + marked["garbage"]["tables"]
    # After the mark, a branch is created on an expired commit (its head is kept
    # from now on) and a writer re-stages bytes that only a candidate holds.
    oldest = next(c.id for c in app.graveler.log("lake", "main") if c.message == "main 100.5 days ago")
    needed = {data_key(c) for c in m.trees[oldest].values()}
    assert needed & set(candidates)  # the new branch needs things the mark condemned
    # A sweep that died halfway got through some of the rest.
    done = [k for k in candidates[::2] if k.startswith("data/") and k not in needed]
    for key in done:
        assert trash(app.adapter, ns, key, float("inf"), dry_run=False)[0] == "trashed"
    revived = next(c for c in m.written if data_key(c) in set(candidates[1::2]) - needed)
    m.put("main", "revived.bin", revived)
    m.branch("revive", oldest)
    swept = run_gc(app, "lake", sweep=marked["mark_id"])
    assert swept["already_gone"] == len(done)
    assert swept["rescanned"]["new_commits"] >= 1  # the new head (and the younger root commit behind it)
    swept_data = {k for k in swept_keys(app, ns, swept) if k.startswith("data/")}
    assert swept_data == {k for k in candidates if k.startswith("data/")} - set(done) - needed - {data_key(revived)}
    check_reads(m, retained | {oldest})


def test_bad_input(app: App, spark: Any) -> None:
    with pytest.raises(RepositoryNotFound):
        run_gc(app, "nope")
    m = Model.create(app, "plain")
    m.put("main", "a", b"a")
    m.commit("main", 0)
    ns = app.catalog.repository("plain").storage_namespace
    with pytest.raises(PreconditionFailed, match="no GC rules"):
        run_gc(app, "plain")
    store_rules(app.adapter, ns, GcRules(0))
    with pytest.raises(InvalidArgument, match="keep no history"):
        run_gc(app, "plain", min_age=0)
    with pytest.raises(NotFound, match="no complete GC mark"):
        run_gc(app, "plain", sweep="20260101T000000Z-abcdef")
    with pytest.raises(InvalidArgument):
        run_gc(app, "plain", sweep="../x")
    with pytest.raises(InvalidArgument):
        run_gc(app, "plain", mark_only=True, sweep="x")
    forced = run_gc(app, "plain", min_age=0, force=True)
    assert forced["trashed"]["data_objects"] == 0
    assert m.read_tree("main") == {"a": b"a"}
    with pytest.raises(InvalidArgument):
        GcJob(app, "plain", buckets=0)
