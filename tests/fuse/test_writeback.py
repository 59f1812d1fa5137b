"""Write-back in the kernel-free core: journaled closes, reads of the journal, the pipeline's faults, replay."""

from __future__ import annotations

import base64
import errno
import glob
import hashlib
import json
import os
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block import FlakyAdapter
from lakemount.block.layout import DATA_PREFIX
from lakemount.fuse import passthrough
from lakemount.fuse.core import Caller, FileSystem, SetAttr
from lakemount.fuse.journal import Journal, boot_id
from lakemount.fuse.writeback import _pending_of
from lakemount.fuse.writes import MEMORY_MAX
from lakemount.graveler.moves import move_of
from tests.fuse.conftest import REPO, make_fs
from tests.fuse.pathfs import FastFirst, PathFS
from tests.fuse.test_core import staged

MAIN = f"/{REPO}/main"
OBJECTS = f"/{REPO}/{DATA_PREFIX}"  # the URLs of stored objects (the faults below spare the catalog's own files)


def wb_options(home: str, **extra: object) -> dict[str, object]:
    return {"head_ttl": 0.2, "writeback": True, "journal_dir": os.path.join(home, "journal"), **extra}


@pytest.fixture
def flaky(home: str) -> Iterator[tuple[App, FlakyAdapter, Callable[..., FileSystem]]]:
    app = App.from_config()
    adapter = FlakyAdapter(app.adapter)
    app.__dict__["adapter"] = adapter  # before the catalog is built
    app.catalog.create_repository(REPO)
    made: list[FileSystem] = []

    def factory(**extra: object) -> FileSystem:
        fs = make_fs(app, home, f"wb-{len(made)}", **wb_options(home, **extra))
        made.append(fs)
        fs.state.empty_data(REPO)  # what a create points at is stored once per mount, before the store goes down
        return fs

    yield app, adapter, factory
    adapter.heal()
    for fs in made:
        fs.close()


def lost(app: App, ref: str, files: dict[str, bytes]) -> list[str]:
    """Acknowledged files whose bytes ``ref`` does not hold."""
    out = []
    for path, data in files.items():
        entry = app.catalog.get_optional(REPO, ref, path)
        if entry is None or app.catalog.read(app.catalog.repository(REPO), entry) != data:
            out.append(path)
    return out


def recovered(home: str) -> list[str]:
    return sorted(glob.glob(os.path.join(home, "recovered", "*")))


def test_a_close_is_journaled_read_back_at_once_and_staged_in_batches(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 10_000, where=OBJECTS)  # nothing reaches the store yet: the reads below come from the journal
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    files = {f"d/f{i}": hashlib.sha256(str(i).encode()).digest() * 32 for i in range(50)}
    pfs.mkdir(f"{MAIN}/d")
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    assert fs.writeback is not None and fs.writeback.pending((REPO, "main")) > 0
    deadline = time.monotonic() + 60  # the pipeline gathers a batch before its first upload: wait for that try
    while adapter.injected["put_file"] + adapter.injected["put"] == 0:
        assert time.monotonic() < deadline, "the write-back pipeline never tried to upload within 60 s"
        time.sleep(0.01)
    for path, data in files.items():
        assert pfs.read_file(f"{MAIN}/{path}") == data
    assert sorted(pfs.listdir(f"{MAIN}/d")) == sorted(p.split("/")[1] for p in files)
    staged = app.catalog.get_optional(REPO, "main", "d/f0")  # the create may be staged, the content not yet
    assert staged is None or staged.size == 0
    adapter.heal()
    fs.writeback.drain((REPO, "main"))
    assert lost(app, "main", files) == []
    counts = fs.writeback.report.counts
    assert counts["upload_retries"] > 0 and counts["staged"] >= len(files)
    assert counts["batches"] < len(files)  # staged in batches, not one apply per file
    for path, data in files.items():  # read from the store now
        assert pfs.read_file(f"{MAIN}/{path}") == data


def test_a_commit_through_the_control_file_holds_what_was_journaled(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 3, where=OBJECTS)  # the store's uploads of small files (stored from memory)
    files = {f"c{i}": os.urandom(3000) for i in range(20)}
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    pfs.write_file(f"{MAIN}/.lakefs/commit", b"journaled files")
    assert adapter.injected["put"] == 3
    assert lost(app, "main", files) == []
    assert app.catalog.get_branch(REPO, "main").commit_id != ""
    assert list(app.catalog.diff_uncommitted(REPO, "main")) == []  # all of it in the commit


def test_a_rename_after_a_journaled_close_applies_after_it(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    app, _adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    pfs.write_file(f"{MAIN}/a", b"first")
    pfs.rename(f"{MAIN}/a", f"{MAIN}/b")
    assert fs.writeback is not None
    fs.writeback.drain(None)
    assert app.catalog.get_optional(REPO, "main", "a") is None
    assert lost(app, "main", {"b": b"first"}) == []


def test_the_store_down_past_the_bound_keeps_files_aside_and_reports_them(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str,
) -> None:
    app, adapter, factory = flaky
    fs = factory(writeback_retry=0.5)
    pfs = PathFS(fs)
    adapter.fail_next("put", 100_000, where=OBJECTS)
    adapter.fail_next("put_file", 100_000, where=OBJECTS)
    pfs.write_file(f"{MAIN}/kept", b"never lost")
    assert fs.writeback is not None
    fs.writeback.drain((REPO, "main"))
    assert adapter.injected["put_file"] + adapter.injected["put"] > 0
    staged = app.catalog.get_optional(REPO, "main", "kept")
    assert staged is None or staged.size == 0  # its create may be staged; its content never was
    kept = [p for p in recovered(home) if p.endswith("-kept")]
    assert len(kept) == 1 and open(kept[0], "rb").read() == b"never lost"
    status = json.loads(pfs.read_file(f"{MAIN}/.lakefs/status"))
    assert status["writeback"]["kept_aside_count"] == 1
    assert status["writeback"]["kept_aside"][0]["path"] == "kept"
    assert "past mount.writeback_retry" in status["writeback"]["kept_aside"][0]["error"]


def test_a_deleted_branch_keeps_its_journaled_files_aside(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str) -> None:
    app, adapter, factory = flaky
    app.catalog.create_branch(REPO, "gone", "main")
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 100_000, where=OBJECTS)
    adapter.fail_next("put_file", 100_000, where=OBJECTS)
    pfs.write_file(f"/{REPO}/gone/x", b"orphan")
    pfs.write_file(f"{MAIN}/y", b"fine")
    app.catalog.delete_branch(REPO, "gone")
    adapter.heal()
    assert fs.writeback is not None
    fs.writeback.drain(None)
    assert lost(app, "main", {"y": b"fine"}) == []
    kept = [p for p in recovered(home) if p.endswith("-x")]
    assert len(kept) == 1 and open(kept[0], "rb").read() == b"orphan"
    # The upload made the data file the stored object itself (a hard link); what is kept aside is a copy,
    # so editing it there cannot change the object.
    assert os.stat(kept[0]).st_nlink == 1
    assert fs.writeback.report.counts["kept_aside"] >= 1
    assert fs.writeback.report.counts["uploaded"] >= 2


def test_a_full_journal_is_enospc_at_close_and_the_content_is_kept(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str,
) -> None:
    app, adapter, factory = flaky
    fs = factory(journal_bytes=64 << 10)
    assert fs.writeback is not None
    fs.writeback.space_wait = 0.3
    pfs = PathFS(fs)
    adapter.fail_next("put", 100_000, where=OBJECTS)
    adapter.fail_next("put_file", 100_000, where=OBJECTS)
    first = os.urandom(60 << 10)
    pfs.write_file(f"{MAIN}/first", first)  # fits
    fh = pfs.open(f"{MAIN}/second", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"z" * (10 << 10))
    with pytest.raises(OSError) as info:
        pfs.close(fh)
    assert info.value.errno == errno.ENOSPC
    assert fs.writeback.report.counts["refused_full"] >= 1  # at close, and again at release
    kept = [p for p in recovered(home) if p.endswith("-second")]
    assert len(kept) == 1 and open(kept[0], "rb").read() == b"z" * (10 << 10)
    adapter.heal()
    fs.writeback.drain(None)
    assert lost(app, "main", {"first": first}) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
def test_a_full_journal_disk_is_enospc_at_write_never_a_silent_loss(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str,
) -> None:
    app, adapter, factory = flaky
    disk = os.path.join(home, "small")
    os.makedirs(disk)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", disk], check=True)
    try:
        fs = factory(journal_dir=os.path.join(disk, "j"))
        pfs = PathFS(fs)
        adapter.fail_next("put", 100_000, where=OBJECTS)  # the store is down: the journal's disk fills
        adapter.fail_next("put_file", 100_000, where=OBJECTS)
        acked = {}
        failed = None
        for i in range(40):
            data = os.urandom(32 << 10)
            try:
                pfs.write_file(f"{MAIN}/f{i}", data)
            except OSError as exc:
                failed = exc
                break
            acked[f"f{i}"] = data
        assert failed is not None and failed.errno == errno.ENOSPC, "the journal disk never filled"
        assert fs.writeback is not None
        adapter.heal()
        fs.writeback.drain(None)
        assert acked and lost(app, "main", acked) == []
        fs.close()
    finally:
        subprocess.run(["umount", "-l", disk], check=False)


def test_a_corrupt_record_is_named_kept_aside_and_never_staged(app: App, home: str) -> None:
    journal_dir = os.path.join(home, "journal")
    journal = Journal(journal_dir, fsync=False)
    good, bad = b"good bytes", b"bad bytes!"
    records = []
    for name, data in (("good", good), ("bad", bad), ("ok2", good)):
        path = os.path.join(journal.spool, name)
        with open(path, "wb") as f:
            f.write(data)
        entry = app.catalog.put(REPO, "main", "seed", b"").value().hex()
        records.append({"op": "put", "repo": REPO, "branch": "main", "path": name, "entry": entry, "data": path,
                        "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest()})
    for body in records:
        journal.append(body)
    journal.close()
    with open(os.path.join(journal.spool, "bad"), "r+b") as f:  # the data file rots on disk
        f.write(b"B")
    with open(os.path.join(journal_dir, "log"), "r+b") as f:  # and the third record's payload is hit too
        raw = f.read()
        at = raw.rindex(b'"ok2"')
        f.seek(at + 1)
        f.write(b"X")
    fs = make_fs(app, home, "replay", **wb_options(home))
    try:
        assert fs.writeback is not None
        assert fs.writeback.report.counts["corrupt"] == 2
        assert app.catalog.get_optional(REPO, "main", "bad") is None  # never staged as wrong bytes
        assert app.catalog.get_optional(REPO, "main", "ok2") is None
        assert lost(app, "main", {"good": good}) == []
        errors = [k["error"] for k in fs.writeback.report.kept]
        assert any("does not hold the bytes" in e for e in errors) and any("checksum mismatch" in e for e in errors)
        assert len([p for p in recovered(home) if p.endswith(".record")]) == 2
    finally:
        fs.close()


def test_a_record_journaled_unhashed_is_hashed_by_the_replay_only_where_its_bytes_cannot_be_torn(app: App, home: str) -> None:
    """Stop 55: a large file written through passthrough is journaled at close with no digests.  The replay stages
    such a record (hashing its data file) when it runs in the boot that wrote it (a kill -9 of the mount tears no
    file) or when the record says its data was synced first; one from another boot, unsynced, or whose data file
    is not the size it names, is kept aside, never staged."""
    journal_dir = os.path.join(home, "journal")
    journal = Journal(journal_dir, fsync=False)
    here = boot_id()
    assert here, "no boot id to compare"
    bodies = {name: os.urandom(3 << 20) for name in ("this-boot", "synced-elsewhere", "unsynced-elsewhere", "torn")}
    kinds = {"this-boot": (here, False), "synced-elsewhere": ("an-earlier-boot", True),
             "unsynced-elsewhere": ("an-earlier-boot", False), "torn": (here, False)}
    entry = app.catalog.put(REPO, "main", "seed", b"").value().hex()
    for name, data in bodies.items():
        path = os.path.join(journal.spool, name)
        with open(path, "wb") as f:
            f.write(data)
        boot, synced = kinds[name]
        journal.append({"op": "put", "repo": REPO, "branch": "main", "path": name, "entry": entry, "data": path,
                        "size": len(data), "sha256": "", "md5": "", "known": False, "boot": boot, "synced": synced})
    journal.close()
    os.truncate(os.path.join(journal.spool, "torn"), 1 << 20)  # the crash left it short
    fs = make_fs(app, home, "replay", **wb_options(home))
    try:
        assert fs.writeback is not None
        assert fs.writeback.report.counts["corrupt"] == 2
        assert fs.writeback.report.counts["hashed_after_close"] == 2  # the pipeline hashed the two it staged
        assert lost(app, "main", {n: bodies[n] for n in ("this-boot", "synced-elsewhere")}) == []
        assert app.catalog.get_optional(REPO, "main", "unsynced-elsewhere") is None  # never staged unchecked
        assert app.catalog.get_optional(REPO, "main", "torn") is None
        errors = sorted(k["error"] for k in fs.writeback.report.kept)
        assert any("before the host restarted" in e for e in errors) and any("not the 3145728" in e for e in errors)
        kept = [p for p in recovered(home) if p.endswith(".data")]
        assert sorted(open(p, "rb").read()[:16] for p in kept) == sorted(
            [bodies["unsynced-elsewhere"][:16], bodies["torn"][:16]])  # their bytes kept, not dropped
        staged_entry = app.catalog.get_optional(REPO, "main", "this-boot")
        assert staged_entry is not None and staged_entry.address.endswith(hashlib.sha256(bodies["this-boot"]).hexdigest())
    finally:
        fs.close()


def test_passthrough_files_are_journaled_and_read_back_while_the_store_is_down(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stop 55, write-back with passthrough, no kernel (the kernel's writes made here with ``pwrite`` on the temp
    file, as in test_passthrough.py): a file past ``SCAN_FROM`` is journaled unhashed (the temp file itself), one
    under it as a hashed private copy (a descriptor may still write the file).  With the store down, so nothing
    stages, both read back byte for byte after their last release (the copy's node reads its temp file until the
    copy is staged: its entry names an object not stored yet); once the store is back both stage, the unhashed
    one hashed by the pipeline."""
    app, adapter, factory = flaky
    monkeypatch.setattr(passthrough, "register", lambda fd: 7)
    monkeypatch.setattr(passthrough, "close_backing", lambda backing: None)
    fs = factory()
    fs.state.passthrough = True  # as the adapter sets it when the kernel took passthrough at INIT
    pfs = PathFS(fs)
    adapter.fail_next("put", 10_000, where=OBJECTS)  # nothing reaches the store yet
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    # Names no mount test uses: the save asks the process table whether a descriptor's path ends with the file's, and a
    # parallel test's `cp` of a "big.bin" through a real mount would match (a copy, not the file itself).
    bodies = {"wb-big.bin": os.urandom(passthrough.SCAN_FROM + 5), "wb-medium.bin": os.urandom(3 << 20)}
    for name, body in bodies.items():
        opened, attr = fs.create(pfs.ino(MAIN), name.encode(), 0o644, os.O_WRONLY | os.O_TRUNC, pfs.caller)
        assert opened.backing == 7
        dirty = fs.state.node(attr.ino).dirty
        assert dirty is not None
        os.pwrite(dirty.fd, body, 0)  # the kernel's writes: nothing reaches fs.write
        fs.flush(opened.fh)
        fs.release(opened.fh)
    assert fs.metrics.counter("journaled_unhashed") == 1  # wb-big.bin; wb-medium.bin is a copy
    assert fs.writeback is not None
    with fs.writeback._cond:  # the two saves wait; a create journaled by the 1 s sync (under load) may have staged
        assert sorted(p.path for p in fs.writeback._pending if p.path) == sorted(bodies)
    for name, body in bodies.items():
        assert pfs.read_file(f"{MAIN}/{name}") == body, name
        staged = app.catalog.get_optional(REPO, "main", name)
        assert staged is None or staged.size == 0, name  # the content not staged: read from the journal / temp file
    adapter.heal()
    fs.writeback.drain(None)
    assert lost(app, "main", bodies) == []
    assert fs.writeback.report.counts["hashed_after_close"] == 1
    for name, body in bodies.items():
        assert pfs.read_file(f"{MAIN}/{name}") == body, name


def test_fsync_returns_once_the_file_is_staged(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 3, where=OBJECTS)  # the first uploads (of a small file: from memory) fail: fsync waits through the retries
    fh = pfs.open(f"{MAIN}/synced", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"durable in the lake")
    pfs.fsync(fh)
    assert adapter.injected["put"] == 3
    assert lost(app, "main", {"synced": b"durable in the lake"}) == []  # staged before fsync returned
    pfs.close(fh)


def test_unmount_stages_everything_journaled(app: App, home: str) -> None:
    fs = make_fs(app, home, "closing", **wb_options(home))
    pfs = PathFS(fs)
    files = {f"u{i}": os.urandom(2000) for i in range(30)}
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    assert fs.writeback is not None
    fs.close()  # what the mount process does at unmount and on SIGTERM
    assert fs.writeback.pending() == 0
    assert lost(app, "main", files) == []
    spool = os.path.join(home, "journal", "spool")
    assert not os.path.exists(spool) or os.listdir(spool) == []  # every data file went to the store
    assert os.path.getsize(os.path.join(home, "journal", "log")) == 0  # and the log was emptied


@pytest.mark.parametrize("head_ttl", [600.0, 0.2])
def test_small_files_are_written_on_the_request_loop_and_land_whole(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], head_ttl: float,
) -> None:
    """Called as the adapter calls it, a ``cp -r`` of small files with write-back runs write, close and
    release from memory and the node's journal.  While the new directory's listing is fresh (a long
    ``head_ttl``) lookups and creates do too; with a short one, only a name's lookup (is it in the
    branch?), the directory's revalidation and a create that falls on a due head check need a thread.  Every file lands, byte
    for byte, and every create was exclusive (a create that changed something before asking for a
    thread would fail its second try with EEXIST)."""
    app, _adapter, factory = flaky
    fs = factory(head_ttl=head_ttl)
    fast = FastFirst(fs)
    pfs = PathFS(fast)  # type: ignore[arg-type]
    pfs.mkdir(f"{MAIN}/src")
    pfs.write_file(f"{MAIN}/src/first", b"drops the directory's marker")  # the one create that reads the branch
    fast.threaded.clear()
    files = {f"src/f{i:03d}": os.urandom(100 + i) for i in range(200)}
    began = time.monotonic()
    for path, data in files.items():
        fh = pfs.open(f"{MAIN}/{path}", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        pfs.pwrite(fh, 0, data)
        pfs.close(fh)
    head_checks = (time.monotonic() - began) / head_ttl + 1
    if head_ttl > 100:
        assert fast.threaded == {}, fast.threaded
    else:
        assert set(fast.threaded) <= {"lookup", "getattr", "create"}, fast.threaded  # getattr: of the stale directory
        # A due head check, or the pipeline holding the branch's mutex to stage a batch: a few creates wait.
        assert fast.threaded.get("create", 0) <= head_checks + len(files) // 10, (fast.threaded, head_checks)
    for path, data in files.items():
        assert pfs.read_file(f"{MAIN}/{path}") == data
    assert fs.writeback is not None
    fs.writeback.drain(None)
    assert lost(app, "main", files) == []


def test_without_write_back_a_create_is_held_in_memory_and_staged_with_its_close(
    fs_factory: Callable[..., FileSystem], app: App
) -> None:
    # What the mount read of the directory stays fresh through the test: with a 0.2 s head_ttl a loaded machine
    # let it expire between the two creates, and the second's check that "b" is absent read the catalog (a thread).
    fs = fs_factory(head_ttl=60.0)
    fast = FastFirst(fs)
    pfs = PathFS(fast)  # type: ignore[arg-type]
    pfs.write_file(f"{MAIN}/a", b"staged at close")  # exclusive creates below would fail if the first try had created
    with pfs.opened(f"{MAIN}/b", os.O_WRONLY | os.O_CREAT | os.O_EXCL) as fh:
        pfs.pwrite(fh, 0, b"b")
        assert staged(app, "b") is None  # held (fuse/held.py): this mount shows it, the branch at its close
    # The first create stores the repository's empty object once (a thread); the second is memory only (held).
    # Saved at close (an object stored unsynced and a staging statement each): on the loop since stop 58, a lone
    # writer's small file into the local store and SQLite (before, a thread).  Written and released: the temp file.
    assert fast.threaded["create"] == 1 and "flush" not in fast.threaded, fast.threaded
    assert "write" not in fast.threaded and "release" not in fast.threaded, fast.threaded
    assert lost(app, "main", {"a": b"staged at close", "b": b"b"}) == []


def test_a_create_after_another_change_asks_the_catalog_again(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    """A lookup's "absent" answers the create that follows it only while nothing changed in the branch since."""
    app, _adapter, factory = flaky
    fs = factory()
    fast = FastFirst(fs)
    pfs = PathFS(fast)  # type: ignore[arg-type]
    pfs.write_file(f"{MAIN}/warm", b"w")
    parent = pfs.ino(MAIN)
    with pytest.raises(OSError):
        fast.lookup(parent, b"late")  # absent, noted
    pfs.write_file(f"{MAIN}/other", b"o")  # a change in the branch: the note no longer answers
    fast.threaded.clear()
    opened, _attr = fast.create(parent, b"late", 0o644, os.O_WRONLY | os.O_EXCL, Caller())
    fast.release(opened.fh)
    assert fast.threaded == {"create": 1}


def test_a_protection_rule_kept_refuses_a_create_on_the_request_loop(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    app, _adapter, factory = flaky
    fs = factory()
    fast = FastFirst(fs)
    pfs = PathFS(fast)  # type: ignore[arg-type]
    pfs.write_file(f"{MAIN}/before", b"x")
    app.catalog.set_protection_rules(REPO, ["main"])
    with pytest.raises(PermissionError):
        pfs.write_file(f"{MAIN}/after", b"refused")  # the rules are read (in a thread)...
    fast.threaded.clear()
    with pytest.raises(PermissionError):
        pfs.write_file(f"{MAIN}/later", b"refused")  # ...and kept: this create is refused from memory
    assert "create" not in fast.threaded
    assert app.catalog.get_optional(REPO, "main", "after") is None and app.catalog.get_optional(REPO, "main", "later") is None


def test_a_small_files_bytes_ride_in_its_record_and_replay_restores_a_lost_data_file(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str,
) -> None:
    """A small file held in memory is journaled as its record alone (no data file to create, sync or
    delete); a small file that once spilled to a temp file carries its bytes too, so a data file the
    crash lost (the page cache never written back) is written again from the record."""
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 10_000, where=OBJECTS)  # nothing is staged: every record stays in the journal
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    files = {f"s{i}": os.urandom(200 + i) for i in range(5)}
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    spilled = os.urandom(3000)
    with pfs.opened(f"{MAIN}/spilled", os.O_WRONLY | os.O_CREAT) as fh:
        pfs.fs.setattr(pfs.ino(f"{MAIN}/spilled"), SetAttr(size=MEMORY_MAX + 1), fh, pfs.caller)  # past memory: a temp file
        pfs.fs.setattr(pfs.ino(f"{MAIN}/spilled"), SetAttr(size=0), fh, pfs.caller)
        pfs.pwrite(fh, 0, spilled)
    files["spilled"] = spilled
    assert fs.writeback is not None
    journal = fs.writeback.journal
    assert journal._unsynced == []  # no data file waits for a sync of its own
    with open(journal.log_path, "rb") as f:
        log = f.read()
    puts = [body for body in _records(log) if body["op"] == "put"]
    assert len(puts) == len(files) and all("inline" in body for body in puts)
    assert [body["path"] for body in puts if body["data"]] == ["spilled"]  # the others never had a file
    assert os.listdir(journal.spool) == [os.path.basename(puts[-1]["data"])]
    copy = os.path.join(home, "crashed")
    subprocess.run(["cp", "-a", journal.dir, copy], check=True)
    os.unlink(puts[-1]["data"].replace(journal.dir, copy))  # the crash lost the spilled file's data file
    replayed = Journal(copy, fsync=False)
    for body in puts:
        body["data"] = body["data"].replace(journal.dir, copy)
    with open(replayed.log_path, "wb") as f:  # the copy's records name the copy's data files
        for body in puts:
            payload = json.dumps(body, separators=(",", ":")).encode()
            f.write(b"LMJ1" + len(payload).to_bytes(4, "little") + (zlib.crc32(payload)).to_bytes(4, "little") + payload)
    records = replayed.replay()
    replayed.close()
    assert [r.corrupt for r in records] == [""] * len(files)
    with open(puts[-1]["data"], "rb") as f:
        assert f.read() == spilled  # written again from its record
    items = [_pending_of(r) for r in records]
    assert {item.path: item.inline for item in items if item is not None and not item.data} == {
        p: d for p, d in files.items() if p != "spilled"
    }


def _records(log: bytes) -> list[dict[str, Any]]:
    """The payloads of a journal log, frame by frame (base64 bytes may hold the magic itself)."""
    from lakemount.node import HEADER

    out, pos = [], 0
    while pos < len(log):
        _magic, length, _crc = HEADER.unpack_from(log, pos)
        out.append(json.loads(log[pos + HEADER.size : pos + HEADER.size + length]))
        pos += HEADER.size + length
    return out


def test_a_record_whose_inline_bytes_are_not_its_own_is_kept_aside(app: App, home: str) -> None:
    journal = Journal(os.path.join(home, "journal"), fsync=False)
    data = b"the real bytes"
    entry = app.catalog.put(REPO, "main", "seed", b"").value().hex()
    journal.append({"op": "put", "repo": REPO, "branch": "main", "path": "x", "entry": entry,
                    "data": os.path.join(journal.spool, "x"), "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest(),
                    "inline": base64.b64encode(b"other bytes!!!").decode()})
    journal.close()
    fs = make_fs(app, home, "replay", **wb_options(home))
    try:
        assert fs.writeback is not None
        assert fs.writeback.report.counts["corrupt"] == 1
        assert app.catalog.get_optional(REPO, "main", "x") is None
        assert any("inline bytes are not" in k["error"] for k in fs.writeback.report.kept)
    finally:
        fs.close()


def test_journaled_small_files_go_to_disk_past_the_memory_bound(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the store down, journaled small files are held in RAM only up to MEMORY_HELD_MAX; the rest
    get data files as large files do, and every file is read back and staged once the store is back."""
    from lakemount.fuse import writeback

    monkeypatch.setattr(writeback, "MEMORY_HELD_MAX", 2500)
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 10_000, where=OBJECTS)
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    files = {f"m{i}": os.urandom(1000) for i in range(6)}
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    assert fs.writeback is not None
    wb = fs.writeback
    with wb._cond:
        held = [item.path for item in wb._pending if item.inline is not None]
        on_disk = [item.path for item in wb._pending if item.data]
        assert wb._in_memory == 1000 * len(held) <= 2500
    assert held == ["m0", "m1"] and on_disk == ["m2", "m3", "m4", "m5"]
    assert all(pfs.read_file(f"{MAIN}/{p}") == d for p, d in files.items())  # read back from RAM and from disk
    adapter.heal()
    wb.drain(None)
    assert lost(app, "main", files) == []
    assert wb._in_memory == 0


def test_the_pipeline_stores_a_batch_of_small_files_in_one_durable_step(
    app: App, home: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the local store the pipeline stores a batch of small files with one ``syncfs`` (not two fsyncs a
    file): what it staged is in the lake, byte for byte."""
    from lakemount.block import local
    from lakemount.fuse import writeback

    syncs: list[str] = []
    real = local._syncfs
    assert real is not None

    def counted(directory: str) -> None:
        syncs.append(directory)
        real(directory)

    monkeypatch.setattr(local, "_syncfs", counted)
    monkeypatch.setattr(writeback, "LINGER", 60.0)  # the pipeline gathers every record until drain() waits for them
    monkeypatch.setattr(writeback, "HOLD_MAX", 60.0)  # (stop 55: a round is held this long at most while closes come)
    fs = make_fs(app, home, "batched", **wb_options(home))
    try:
        pfs = PathFS(fs)
        files = {f"b/f{i:03d}": os.urandom(200 + i) for i in range(4 * local.SYNCFS_MIN)}
        pfs.mkdir(f"{MAIN}/b")
        for path, data in files.items():
            pfs.write_file(f"{MAIN}/{path}", data)
        assert fs.writeback is not None
        fs.writeback.drain(None)
        assert lost(app, "main", files) == []
        assert len(syncs) == 1, syncs  # one batch, one sync
    finally:
        fs.close()


def test_a_small_directory_renamed_per_key_moves_the_files_still_journaled(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]],
) -> None:
    # A directory of few keys is renamed per key (issue 36): what the rename moves is read from the
    # catalog, so the journal of the branch is staged first, as a move record's rename does.
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 10_000, where=OBJECTS)  # nothing is staged until the store heals
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    files = {f"f{i}": os.urandom(2000 + i) for i in range(5)}
    pfs.mkdir(f"{MAIN}/d")
    for name, data in files.items():
        pfs.write_file(f"{MAIN}/d/{name}", data)
    assert fs.writeback is not None and fs.writeback.pending((REPO, "main")) > 0

    def heal() -> None:
        deadline = time.monotonic() + 60
        while adapter.injected["put_file"] + adapter.injected["put"] == 0:
            assert time.monotonic() < deadline, "the write-back pipeline never tried to upload within 60 s"
            time.sleep(0.01)
        adapter.heal()

    healer = threading.Thread(target=heal)
    healer.start()
    try:
        pfs.rename(f"{MAIN}/d", f"{MAIN}/e")  # waits for the journal, then stages the moved keys
    finally:
        healer.join()
    assert adapter.injected["put_file"] + adapter.injected["put"] > 0
    assert [t for t in app.catalog.graveler.get_branch(REPO, "main").tokens if move_of(t)] == []
    assert lost(app, "main", {f"e/{n}": d for n, d in files.items()}) == []
    assert [staged(app, f"d/{n}") for n in files] == [None] * len(files)
    assert sorted(pfs.listdir(f"{MAIN}/e")) == sorted(files) and not pfs.exists(f"{MAIN}/d")


def log_bodies(home: str) -> list[dict[str, Any]]:
    """Every record in the journal's log, as the replay (or another process of the node) would read it."""
    from lakemount.node import HEADER

    with open(os.path.join(home, "journal", "log"), "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos + HEADER.size <= len(data):
        _magic, length, _crc = HEADER.unpack_from(data, pos)
        out.append(json.loads(data[pos + HEADER.size : pos + HEADER.size + length]))
        pos += HEADER.size + length
    return out


def test_a_small_file_written_and_closed_is_one_journal_record(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str) -> None:
    """A file's create waits for its first save, whose record journals it too: one record a file, not two."""
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    pfs.mkdir(f"{MAIN}/src")
    pfs.write_file(f"{MAIN}/src/first", b"drops the directory's marker")  # a create that changes more: journaled at once
    adapter.fail_next("put", 10_000, where=OBJECTS)  # nothing is staged, so every record stays in the log
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    files = {f"src/f{i}": os.urandom(300 + i) for i in range(40)}
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    records = [b for b in log_bodies(home) if b.get("path") in files or any(p in files for p, _e in b.get("changes", []))]
    assert [b["op"] for b in records] == ["put"] * len(files), records
    assert fs.metrics.counter("creates_merged") == len(files)
    adapter.heal()
    assert fs.writeback is not None
    fs.writeback.drain(None)
    assert lost(app, "main", files) == []


def test_a_create_whose_file_saves_nothing_yet_is_journaled_when_anything_needs_it(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str,
) -> None:
    """The deferred create is journaled by a close with nothing to save (``touch``), by the journal's sync while
    the file stays open, and before a namespace change (a rename of the open file): nothing is lost or late."""
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    assert fs.writeback is not None

    def created(path: str) -> bool:
        return any(b["op"] == "apply" and [path, None] != c and c[0] == path for b in log_bodies(home)
                   for c in b.get("changes", []))

    fh = pfs.open(f"{MAIN}/touched", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    assert not created("touched")  # deferred: its save would journal it
    pfs.close(fh)
    assert created("touched")  # closed unwritten: journaled at the close, which acknowledges the empty file

    fh = pfs.open(f"{MAIN}/kept-open", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    deadline = time.monotonic() + 10
    while not created("kept-open") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert created("kept-open")  # the sync loop journals it (every SYNC_INTERVAL)
    pfs.close(fh)

    fh = pfs.open(f"{MAIN}/moved", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    pfs.pwrite(fh, 0, b"written, not yet saved")
    pfs.rename(f"{MAIN}/moved", f"{MAIN}/moved-2")  # waits for the branch's journal: the create first
    pfs.close(fh)
    fs.writeback.drain(None)
    assert staged(app, "touched") is not None and staged(app, "kept-open") is not None
    assert staged(app, "moved") is None
    assert lost(app, "main", {"moved-2": b"written, not yet saved", "touched": b"", "kept-open": b""}) == []


def test_a_save_journaled_while_the_pipeline_empties_the_log_stays_in_it(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str,
) -> None:
    """The pipeline empties the log once it has staged everything pending.  A save journaled between its check
    that nothing is pending and the emptying was erased with the log: still queued in memory (so the mount
    showed nothing wrong), but a kill -9 then replayed without it and the file stayed empty on the branch (the
    first file a ``cp -r`` wrote into a new directory: its create, which dropped the directory's marker, was
    staged alone just before).  Here the save is made to come exactly then: from inside the pipeline's append
    of its ``done`` record; the appenders' lock now holds it back until the log is emptied."""
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    assert fs.writeback is not None
    journal = fs.writeback.journal
    adapter.fail_next("put", 10_000, where=OBJECTS)  # the save's record stays in the journal
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    data = os.urandom(512)
    real_append = journal.append
    saver: list[threading.Thread] = []
    opened: list[int] = []  # the file's handle, once its create is journaled

    def save() -> None:
        pfs.pwrite(opened[0], 0, data)
        pfs.close(opened[0])

    def append(body: dict[str, Any], **kw: Any) -> int:
        # The pipeline staged the create: save the file now.  (Not at the mkdir's own ``done``, which may come
        # first when the pipeline stages the mkdir alone, before the file is opened.)
        if body.get("op") == "done" and opened and not saver:
            t = threading.Thread(target=save)
            t.start()
            saver.append(t)
            t.join(1.0)  # done at once without the lock; held back by it (and done right after)
        return real_append(body, **kw)

    journal.append = append  # type: ignore[method-assign]
    pfs.mkdir(f"{MAIN}/dst")
    opened.append(pfs.open(f"{MAIN}/dst/f000", os.O_WRONLY | os.O_CREAT))  # drops dst's marker: journaled, staged alone
    deadline = time.monotonic() + 30
    while not saver:
        assert time.monotonic() < deadline, "the pipeline never staged the create"
        time.sleep(0.01)
    saver[0].join(30)
    assert not saver[0].is_alive()
    assert app.catalog.get_optional(REPO, "main", "dst/f000") is not None  # the create was staged
    puts = [b for b in log_bodies(home) if b["op"] == "put" and b["path"] == "dst/f000"]
    assert len(puts) == 1, "the save's record is not in the log: a kill -9 now would lose the file"


def test_a_mkdir_is_journaled_and_waits_for_no_upload(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    """With write-back a mkdir is journaled as a create is (stop 54): it returns while the files before it are
    still on their way to a store that is down, the mount shows the new directories (from the journal, when
    its cached listings have expired) and writes into them, and once staged the branch holds every file and
    the marker of the directory left empty, and no trace of the markers dropped by the files put inside."""
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put", 10_000, where=OBJECTS)
    adapter.fail_next("put_file", 10_000, where=OBJECTS)
    files = {f"a/f{i}": os.urandom(900) for i in range(5)}
    pfs.mkdir(f"{MAIN}/a")
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    deadline = time.monotonic() + 60
    while adapter.injected["put"] + adapter.injected["put_file"] == 0:
        assert time.monotonic() < deadline, "the write-back pipeline never tried to upload within 60 s"
        time.sleep(0.01)
    made = threading.Thread(target=lambda: (pfs.mkdir(f"{MAIN}/a/b"), pfs.mkdir(f"{MAIN}/a/e")), daemon=True)
    made.start()
    made.join(10)
    assert not made.is_alive(), "mkdir waited for the uploads of the files journaled before it"
    assert fs.writeback is not None and fs.writeback.pending((REPO, "main")) > 0  # the store is still down
    inner = {"a/b/g": os.urandom(700)}
    pfs.write_file(f"{MAIN}/a/b/g", inner["a/b/g"])
    files.update(inner)
    assert app.catalog.get_optional(REPO, "main", "a/b/g") is None and app.catalog.get_optional(REPO, "main", "a/b/") is None
    time.sleep(0.3)  # past head_ttl: the listings below are made again, from the catalog and the journal
    assert "a" in pfs.listdir(MAIN)
    assert sorted(pfs.listdir(f"{MAIN}/a")) == sorted(["b", "e", *(p.split("/")[1] for p in files if p.count("/") == 1)])
    assert pfs.listdir(f"{MAIN}/a/b") == ["g"] and pfs.listdir(f"{MAIN}/a/e") == []
    assert pfs.read_file(f"{MAIN}/a/b/g") == inner["a/b/g"]
    adapter.heal()
    fs.writeback.drain((REPO, "main"))
    assert lost(app, "main", files) == []
    staged = {d.key.decode(): d for d in app.catalog.diff_uncommitted(REPO, "main")}
    assert sorted(staged) == sorted([*files, "a/e/"]), staged  # no marker of a or a/b, put or deleted
    assert staged["a/e/"].right is not None


def _write_for(pfs: PathFS, seconds: float, every: float, prefix: str) -> dict[str, bytes]:
    """Write a small file every ``every`` seconds for ``seconds`` (closes that keep coming): what was written."""
    files: dict[str, bytes] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        path = f"{prefix}/f{len(files):04d}"
        files[path] = os.urandom(300)
        pfs.write_file(f"{MAIN}/{path}", files[path])
        time.sleep(every)
    return files


def test_while_closes_keep_coming_the_pipeline_holds_its_round_until_the_writer_pauses(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stop 55: a round of the pipeline waits while closes keep coming (each within LINGER of the last), so its
    uploads and staging do not run beside the writer; once the writer pauses, everything goes in one round."""
    from lakemount.fuse import writeback

    monkeypatch.setattr(writeback, "LINGER", 0.3)  # a pause the test's writer never makes (it writes every 0.01 s)
    app, _adapter, factory = flaky
    fs = factory()
    assert fs.writeback is not None
    pfs = PathFS(fs)
    pfs.mkdir(f"{MAIN}/h")
    fs.writeback.drain(None)  # the mkdir's record staged: the rounds counted below are the files'
    before = fs.writeback.report.counts["batches"]
    files = _write_for(pfs, 1.0, 0.01, "h")  # > LINGER, < HOLD_MAX
    assert fs.writeback.report.counts["batches"] == before, "the pipeline staged a round while closes kept coming"
    assert fs.writeback.pending((REPO, "main")) >= len(files)  # (and creates the journal's sync journaled)
    deadline = time.monotonic() + 30  # no drain: the pause alone lets the round go
    while fs.writeback.pending((REPO, "main")):
        assert time.monotonic() < deadline, "the held round never went after the writer paused"
        time.sleep(0.01)
    assert fs.writeback.report.counts["batches"] == before + 1
    assert lost(app, "main", files) == []


def test_a_held_round_goes_hold_max_after_its_first_record_and_a_drain_ends_the_hold(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hold is bounded: with closes that never pause, a round still goes HOLD_MAX after its first record (what
    another host waits, plus the round); and anything that waits for the branch (fsync, commit, unmount) ends it."""
    from lakemount.fuse import writeback

    monkeypatch.setattr(writeback, "HOLD_MAX", 0.3)
    app, _adapter, factory = flaky
    fs = factory()
    assert fs.writeback is not None
    pfs = PathFS(fs)
    pfs.mkdir(f"{MAIN}/g")
    fs.writeback.drain(None)
    before = fs.writeback.report.counts["batches"]
    files = _write_for(pfs, 1.5, 0.01, "g")
    assert fs.writeback.report.counts["batches"] - before >= 2, "closes that never paused held the pipeline past HOLD_MAX"
    monkeypatch.setattr(writeback, "HOLD_MAX", 60.0)
    pfs.mkdir(f"{MAIN}/g2")
    files.update(_write_for(pfs, 0.2, 0.01, "g2"))
    t = time.monotonic()
    fs.writeback.drain((REPO, "main"))  # what fsync(2), a commit and unmount call
    assert time.monotonic() - t < 10, "a drain waited for the hold"
    assert lost(app, "main", files) == []


@pytest.mark.parametrize("writers", [1, 2])
def test_a_save_that_finds_the_file_journaled_by_another_close_adds_nothing_and_fails_nothing(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str, writers: int,
) -> None:
    """Two closes of one file raced: a flush found the file modified, then waited for its lock while a release
    handed the same content to the journal, and the pipeline staged it and deleted the data file before the
    flush got the lock.  The flush then copied the data file (two writers: ``share``) and the close failed with
    ENOENT (stop 55: 0-2 in 20 s of two writers and a reader of one 17 MiB file, with write-back and
    passthrough), or (one writer) journaled a record naming a data file that was gone.  Here the racing flush's
    save is called once the first save's record is staged: it finds the file held and adds no record."""
    app, _adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    assert fs.writeback is not None
    data = os.urandom(4 * MEMORY_MAX)  # a temp file, not memory: the journal takes the file itself
    fh = pfs.open(f"{MAIN}/raced", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, data)
    node = fs.state.node(pfs.ino(f"{MAIN}/raced"))
    dirty = node.dirty
    assert dirty is not None
    fs.writeback.save(node, dirty)  # the release's save (its share was decided alone)
    fs.writeback.drain((REPO, "main"))
    assert dirty.held and not os.path.exists(dirty.path)  # staged, its data file deleted: the race's state
    others = [pfs.open(f"{MAIN}/raced", os.O_WRONLY) for _ in range(writers - 1)]  # the flush saw two writers
    fs.writeback.save(node, dirty)  # the flush's save, which had found the file modified before the other ended
    assert fs.metrics.counter("saves_already_journaled") == 1
    fs.writeback.drain((REPO, "main"))
    assert [b["path"] for b in log_bodies(home) if b["op"] == "put"] in ([], ["raced"])  # no second record
    assert lost(app, "main", {"raced": data}) == []
    for other in others:
        pfs.close(other)
    pfs.close(fh)
    assert lost(app, "main", {"raced": data}) == []


def test_a_save_waiting_for_a_record_that_never_comes_fails_with_eio(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wait of a save that finds the file held is bounded: a hold whose save failed before appending its record
    (nothing then advances ``saved_version``) ends the waiting close with EIO after ``AWAIT_JOURNALED_S``."""
    from lakemount.fuse import writeback

    _app, _adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    assert fs.writeback is not None
    fh = pfs.open(f"{MAIN}/stuck", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, os.urandom(4 * MEMORY_MAX))
    node = fs.state.node(pfs.ino(f"{MAIN}/stuck"))
    dirty = node.dirty
    assert dirty is not None and dirty.modified
    dirty.held = True  # handed over by a save that never appended its record
    monkeypatch.setattr(writeback, "AWAIT_JOURNALED_S", 0.2)
    started = time.monotonic()
    with pytest.raises(OSError) as raised:
        fs.writeback.save(node, dirty)
    assert raised.value.errno == errno.EIO
    assert time.monotonic() - started >= 0.2  # it waited the bound first
    assert fs.metrics.counter("saves_already_journaled") == 1
    dirty.held = False  # let the fixture's unmount save it
    pfs.close(fh)


def test_a_records_inline_bytes_are_written_as_the_base64_json_would_hold_and_read_back(tmp_path: Any) -> None:
    """Stop 57: a small file's bytes go to the journal as ``bytes`` and are written as base64 spliced into the
    record (the encoder's escaping check of the base64 string was 7 us a close): the record is what ``json.dumps``
    of the base64 ``str`` holds, field for field, and the replay reads the same bytes back."""
    data = os.urandom(1000) + b'"\\\n'
    body = {"op": "put", "repo": "r", "branch": "b", "path": "d/\u00e9\"q", "data": "", "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest(), "known": False}
    j = Journal(os.fspath(tmp_path), fsync=False)
    try:
        seq = j.append({**body, "inline": data})
        seq2 = j.append({**body, "inline": base64.b64encode(data).decode("ascii")})  # a str, as before
    finally:
        j.close()
    got = {r.seq: r for r in Journal(os.fspath(tmp_path), fsync=False).replay()}
    assert got[seq].body == {**body, "inline": base64.b64encode(data).decode("ascii"), "seq": seq}
    assert got[seq2].body == {**got[seq].body, "seq": seq2}
    assert not got[seq].corrupt and base64.b64decode(got[seq].body["inline"]) == data
