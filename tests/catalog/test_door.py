"""What front ends used to take from the stores under the catalog, now asked of the catalog or the ``App``.

GC read heads, tags, commits and staging from the ref store itself, the
mount listened on it for other nodes' changes, the servers disposed its
engine before forking and ``doctor`` probed it and the block store
(``tests/test_layering.py`` keeps them out now).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import Catalog, decode_path
from lakemount.config import load
from lakemount.errors import InvalidArgument
from lakemount.metastore.notify import Change
from tests.cli.test_newuser import inproc

R = "door"


def make_app(tmp_path: Path) -> App:
    return App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))


def test_gc_reads_every_commit_and_every_staged_record_through_the_catalog(tmp_path: Path) -> None:
    cat = make_app(tmp_path).catalog
    cat.create_repository(R)
    cat.put(R, "main", "kept", b"1")
    first = cat.commit(R, "main", "first").commit.id
    cat.create_branch(R, "dev", "main")
    cat.put(R, "dev", "other", b"2")
    on_dev = cat.commit(R, "dev", "on dev").commit.id
    cat.delete_branch(R, "dev")  # its commit stays in the store, unreachable: GC must still see it
    cat.put(R, "main", "staged", b"3")
    cat.delete(R, "main", "kept")

    commits = {c.id for c in cat.all_commits(R)}
    assert {first, on_dev} <= commits and commits == {c.id for c in cat.all_commits(R)}
    main = cat.get_branch(R, "main")
    staged = {decode_path(k): v is None for t in main.tokens for k, v in cat.staged_records(t)}
    assert staged == {"staged": False, "kept": True}  # a write and a tombstone


class FakeChanges:
    """A change source that hands its callback to the test instead of listening on a database."""

    sender = "me"

    def __init__(self) -> None:
        self.callback: Any = None

    def listen(self, callback: Any) -> str:
        self.callback = callback
        return "listener"


def test_watch_branches_passes_on_what_other_processes_changed(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    cat = app.catalog
    source = FakeChanges()
    cat.changes = source
    got: list[Any] = []
    assert cat.watch_branches(got.append) == "listener"
    mine, theirs = Change("me", "head", R, "main"), Change("them", "staging", R, "dev")
    source.callback([mine])  # only this process's own change: nothing to tell
    source.callback([mine, theirs])
    source.callback(None)  # notices may have been lost
    assert got == [[theirs], None]


def test_an_app_catalog_listens_on_its_ref_store_and_sqlite_pushes_nothing(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    assert app.catalog.changes is app.metastore
    assert app.catalog.watch_branches(lambda batch: None) is None  # SQLite: the mount polls


def test_release_connections_closes_the_pool_and_the_app_stays_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(tmp_path)
    app.release_connections()
    assert "metastore" not in app.__dict__  # nothing opened just to be closed
    app.auth.create_user("alice")  # the auth store shares the ref store's engine
    disposed: list[bool] = []
    engine = app.metastore.engine
    real = engine.dispose
    monkeypatch.setattr(engine, "dispose", lambda *a, **k: (disposed.append(True), real(*a, **k))[1])
    app.release_connections()
    assert disposed == [True]
    assert [u.id for u in app.auth.list_users()] == ["alice"]


def test_doctor_checks_the_ref_store_and_the_block_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert inproc(capsys, home, "repo", "create", "lakefs://one")[0] == 0
    rc, out, err = inproc(capsys, home, "--json", "doctor")
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert checks["ref store"]["ok"] and checks["ref store"]["detail"].endswith(", 1 repositories"), checks
    assert checks["block store"]["ok"] and checks["block store"]["detail"].startswith("read/write local://"), checks
    root = Path(App(load(env={"LAKEMOUNT_HOME": str(home)})).system_namespace().removeprefix("local://"))
    assert not list((root / "doctor").glob("*"))  # the scratch object is gone again


def test_the_mount_reads_blocks_through_a_read_only_source_the_catalog_hands_out(tmp_path: Path) -> None:
    """The mount's block reader held the catalog's block adapter (``catalog.adapter``: writes, listings,
    deletes); now it holds ``Catalog.block_source()``, reads by URL and nothing else."""
    from lakemount.fuse.runner import build_filesystem, mount_options

    app = make_app(tmp_path)
    app.catalog.create_repository(R)
    app.catalog.put(R, "main", "a", b"abcdef")
    repo = app.catalog.repository(R)
    url = app.catalog.physical_url(repo, app.catalog.stat(R, "main", "a").address)
    source = build_filesystem(app, mount_options(app, ref=None, head_ttl=None)).reader.adapter
    assert source.get(url) == b"abcdef" and source.get_range(url, 2, 3) == b"cde"
    with source.open(url) as f:
        assert f.read() == b"abcdef"
    assert not [m for m in ("put", "put_file", "delete", "list", "touch") if hasattr(source, m)]


def test_gc_rules_are_read_and_set_through_the_catalog(tmp_path: Path) -> None:
    """The CLI and the REST API read and wrote GC rules with the catalog's block adapter
    (``load_rules(catalog.adapter, ...)``); now they ask the catalog, which keeps them where GC reads them."""
    from lakemount.catalog.gcrules import GcRules
    from lakemount.errors import RepositoryNotFound
    from lakemount.jobs.retention import load_rules

    app = make_app(tmp_path)
    cat = app.catalog
    cat.create_repository(R)
    assert cat.gc_rules(R) is None
    rules = GcRules(7, (("main", 30),))
    cat.set_gc_rules(R, rules)
    assert cat.gc_rules(R) == rules == load_rules(app.adapter, cat.repository(R).storage_namespace)
    cat.delete_gc_rules(R)
    assert cat.gc_rules(R) is None
    with pytest.raises(RepositoryNotFound):
        cat.gc_rules("nope")


def one_commit(tmp_path: Path) -> tuple[Catalog, str]:
    """A catalog whose repository ``R`` has one commit holding ``a``, and the repository's namespace."""
    cat = make_app(tmp_path).catalog
    cat.create_repository(R)
    cat.put(R, "main", "a", b"x")
    cat.commit(R, "main", "one")
    return cat, cat.repository(R).storage_namespace


def test_export_reads_ranges_and_writes_its_destination_through_what_the_catalog_hands_out(tmp_path: Path) -> None:
    """Export took the catalog's block adapter for range tables, source data and the destination; now it
    asks ``Catalog.read_range`` and ``Catalog.export_blocks()``, which reads, writes and deletes by URL but
    cannot list nor touch."""
    cat, ns = one_commit(tmp_path)
    [rng] = cat.ranges(R, "main")
    assert [decode_path(k) for k, _v in cat.read_range(ns, rng.id, rng.checksum).items()] == ["a"]
    blocks = cat.export_blocks()
    dest = f"{ns.rstrip('/')}/export-probe"
    blocks.put(dest, b"manifest")
    assert blocks.get(dest) == b"manifest"
    blocks.delete(dest)
    assert not cat.is_stored(dest)
    assert not [m for m in ("list", "touch", "stat", "exists", "copy") if hasattr(blocks, m)]


def test_gc_reaches_the_namespace_only_through_the_catalogs_gc_store(tmp_path: Path) -> None:
    """GC took the catalog's whole block adapter; now ``Catalog.gc_store`` hands it a port bound to one
    namespace that lists what may be collected, moves only data objects and tables, writes and deletes
    files only under ``_lakefs/gc/marks/`` and deletes only upload markers, and has no adapter to hand on."""
    cat, ns = one_commit(tmp_path)
    store = cat.gc_store(ns)
    assert store.refreshes and store.holds_at_most(1000, look=1000)
    assert not store.holds_at_most(2, look=1000)  # the object, its range and its metarange
    assert store.holds_at_most(3, look=1000) and not store.holds_at_most(3, look=3)  # looked no further
    [rng] = cat.ranges(R, "main")
    assert [decode_path(k) for k, _v in store.read_range(rng.id, rng.checksum).items()] == ["a"]
    address = cat.stat(R, "main", "a").address
    listed = {key: kind for kind, key, _info in store.collectable([address[5:7], rng.id[:2]])}
    assert listed[address] == "data" and listed[f"_lakefs/{rng.id}"] == "table"

    assert store.trash(address, float("inf"), dry_run=False) == ("trashed", 1)
    assert [key for _kind, key, _info in store.trashed([address[5:7]])] == [address]
    assert cat.read(cat.repository(R), cat.stat(R, "main", "a")) == b"x"  # readers find it in the trash
    assert store.restore(address, dry_run=False) == ("restored", 1)
    assert cat.is_stored(f"{ns.rstrip('/')}/{address}")

    store.put("_lakefs/gc/marks/m1/mark.json", b"{}")
    assert store.get("_lakefs/gc/marks/m1/mark.json") == b"{}"
    assert store.modified("_lakefs/gc/marks/m1/mark.json") > 0
    assert list(store.files("_lakefs/gc/marks/")) == ["_lakefs/gc/marks/m1/mark.json"]
    store.delete("_lakefs/gc/marks/m1/mark.json")
    assert list(store.files("_lakefs/gc/marks/")) == []
    for outside in ("_lakefs/gc/rules.json", "_lakefs/gc/marks/../rules.json", address, "_lakefs/commits/x"):
        with pytest.raises(InvalidArgument):
            store.put(outside, b"")
        with pytest.raises(InvalidArgument):
            store.delete(outside)
    with pytest.raises(InvalidArgument):
        store.trash("_lakefs/gc/rules.json", float("inf"), dry_run=False)
    with pytest.raises(InvalidArgument):
        store.drop_upload_marker("../gc/rules.json")
    assert cat.gc_rules(R) is None and cat.is_stored(f"{ns.rstrip('/')}/{address}")

    loc = cat.issue_link_address(R, "main", "up", presigned=False)
    [(name, deadline, marker)] = list(store.upload_markers())
    assert marker == f"{name}.{deadline}" and name in loc.physical_address
    store.drop_upload_marker(marker)
    assert list(store.upload_markers()) == []


def test_a_staging_notice_that_carries_its_file_reaches_the_staging_before_the_callback(tmp_path: Path) -> None:
    """lsm staging: what another process's append notice carried (the file's row and bytes) is taken
    by this process's staging before the mount hears of the change, so the read the notice prompts
    fetches nothing from the block store (issue 26)."""
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.staging_lists import NOTICE_MAX, _detail

    env = {"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0", "LAKEMOUNT_STAGING_BACKEND": "lsm"}
    writer, reader = App(load(env=env)), App(load(env=env))  # two processes' worth of caches over one store
    writer.catalog.create_repository(R)
    writer.catalog.put(R, "main", "x.txt", b"from the writer")
    w, r = writer.staging, reader.staging
    assert isinstance(w, LsmStaging) and isinstance(r, LsmStaging)
    (info,) = w.lists.files(writer.catalog.get_branch(R, "main").tokens)
    data = w.lists.inline_data([info.seq])[info.seq] if info.inline else w.adapter.get(info.url)
    detail = f"{info.token} {info.seq} " + _detail(info, data, NOTICE_MAX)
    cat = reader.catalog
    source = FakeChanges()
    cat.changes = source
    seen: list[int] = []
    cat.watch_branches(lambda batch: seen.append(r.stats.files_noticed))
    source.callback([Change("them", "staging", R, "main", detail)])
    assert seen == [1]  # taken before the callback ran
    assert cat.stat(R, "main", "x.txt").size == len(b"from the writer")
    assert r.stats.files_loaded == 0
