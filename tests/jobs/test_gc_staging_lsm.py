"""GC's mark reads staged entries through the configured staging backend: with ``staging.backend = lsm``
the data objects that only staging files reference are live (not garbage), and so are they with ``sql``."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block import LocalAdapter
from lakemount.catalog.gcrules import GcRules
from lakemount.config import load
from lakemount.graveler.staging.lsm import GC_GRACE_S, STAGING_DIR, LsmStaging
from lakemount.jobs.gc import run_gc
from lakemount.jobs.gc_tasks import live_keys
from tests.jobs.scenario import sha


class _Counter:
    def __init__(self) -> None:
        self.value = 0

    def add(self, n: int) -> None:
        self.value += n


@pytest.mark.parametrize("backend", ["sql", "lsm"])
def test_objects_only_staging_references_are_live(tmp_path: Path, backend: str) -> None:
    config = load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
                       "LAKEMOUNT_STAGING_BACKEND": backend})
    app = App(config)
    app.catalog.create_repository("lake")
    for i in range(5):
        app.catalog.put("lake", "main", f"f{i}.txt", b"staged %d" % i)
    ns = app.catalog.repository("lake").storage_namespace
    branch = app.graveler.get_branch("lake", "main")
    counters = (_Counter(), _Counter(), _Counter())
    found = {s for _b, shas in live_keys(config, ns, 1, counters, [("staging", t) for t in branch.tokens]) for s in shas}
    assert found == {sha(b"staged %d" % i) for i in range(5)}
    assert counters[1].value == 5  # five staged entries read


def _env(home: Path, inline_bytes: int = 0) -> dict[str, str]:
    """Staging files on the block store unless ``inline_bytes`` (the GC tests count the store's files)."""
    return {"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0", "LAKEMOUNT_STAGING_BACKEND": "lsm",
            "LAKEMOUNT_STAGING_INLINE_BYTES": str(inline_bytes)}


def _killed_between_put_and_append(home: str, path: str) -> None:
    """A writer process: stages ``path`` and is killed (SIGKILL) after its staging file's PUT,
    before the append that would list it: an orphan file."""
    app = App(load(env=_env(Path(home))))
    staging = app.staging
    assert isinstance(staging, LsmStaging)

    def append(*args: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)

    staging.lists.append = append  # type: ignore[method-assign]
    app.catalog.put("lake", "main", path, b"never acknowledged")


def _orphan(home: Path, path: str) -> None:
    p = multiprocessing.get_context("spawn").Process(target=_killed_between_put_and_append, args=(str(home), path))
    p.start()
    p.join(120)
    assert p.exitcode == -signal.SIGKILL  # the fault happened: the writer died between PUT and append


def test_gc_collects_unreferenced_staging_files_past_the_grace_and_never_a_listed_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = App(load(env=_env(home)))
    app.catalog.create_repository("lake")
    ns = app.catalog.repository("lake").storage_namespace
    app.catalog.set_gc_rules("lake", GcRules(7))
    adapter = app.catalog.adapter

    def files() -> set[str]:
        return {o.url for o in adapter.list(f"{ns}/{STAGING_DIR}")}

    app.catalog.put("lake", "main", "committed.txt", b"c")
    app.catalog.commit("lake", "main", "one")  # its staging file is no list's now
    app.catalog.put("lake", "main", "staged.txt", b"s")  # listed: kept however old
    before = files()
    _orphan(home, "old-orphan.txt")
    old_orphan = files() - before
    assert len(old_orphan) == 1  # the killed writer's file is there, unlisted
    for url in files():  # everything so far written long ago
        past = time.time() - GC_GRACE_S - 60
        os.utime(LocalAdapter.path_of(url), (past, past))
    listed = {f.url for t in app.graveler.get_branch("lake", "main").tokens for f in app.staging.lists.files([t])}  # type: ignore[attr-defined]
    assert len(listed) == 1 and listed < before
    _orphan(home, "young-orphan.txt")  # unlisted but young: may still be on its way to a list
    young = files() - before - old_orphan
    acknowledged = {"committed.txt": b"c", "staged.txt": b"s"}

    report = run_gc(app, "lake", min_age=0, engine="in-process")

    assert report["staging_files_collected"] == 2  # the committed file's and the old orphan
    assert files() == listed | young
    repo = app.catalog.repository("lake")
    lost = [p for p, data in acknowledged.items() if app.catalog.read(repo, app.catalog.stat("lake", "main", p)) != data]
    assert lost == []
    assert not app.catalog.exists("lake", "main", "old-orphan.txt")
    assert run_gc(app, "lake", min_age=0, engine="in-process")["staging_files_collected"] == 0


def test_gc_takes_inline_staging_files_in_its_stride_and_still_collects_orphans(tmp_path: Path) -> None:
    """Inline staging files (bytes in their list rows) have no object for GC to keep or find: the job
    neither fails on them nor loses them, and still deletes an old unlisted file on the block store."""
    from lakemount.graveler.staging.lsm import staging_url

    home = tmp_path / "home"
    app = App(load(env=_env(home, inline_bytes=32 * 1024)))
    app.catalog.create_repository("lake")
    ns = app.catalog.repository("lake").storage_namespace
    app.catalog.set_gc_rules("lake", GcRules(7))
    adapter = app.catalog.adapter
    app.catalog.put("lake", "main", "committed.txt", b"c")
    app.catalog.commit("lake", "main", "one")
    app.catalog.put("lake", "main", "staged.txt", b"s")
    staging = app.staging
    assert isinstance(staging, LsmStaging)
    listed = [f for t in app.graveler.get_branch("lake", "main").tokens for f in staging.lists.files([t])]
    assert [f.inline for f in listed] == [True]
    orphan = staging_url(ns, "0" * 32)  # a file a killed writer stored and never appended
    adapter.put(orphan, b"never listed")
    past = time.time() - GC_GRACE_S - 60
    os.utime(LocalAdapter.path_of(orphan), (past, past))
    assert {o.url for o in adapter.list(f"{ns}/{STAGING_DIR}")} == {orphan}  # the inline files are no objects

    report = run_gc(app, "lake", min_age=0, engine="in-process")

    assert report["staging_files_collected"] == 1
    assert list(adapter.list(f"{ns}/{STAGING_DIR}")) == []
    repo = app.catalog.repository("lake")
    acknowledged = {"committed.txt": b"c", "staged.txt": b"s"}
    lost = [p for p, data in acknowledged.items() if app.catalog.read(repo, app.catalog.stat("lake", "main", p)) != data]
    assert lost == []
