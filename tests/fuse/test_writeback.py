"""Write-back in the kernel-free core: journaled closes, reads of the journal, the pipeline's faults, replay."""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from lakemount.app import App
from lakemount.block import FlakyAdapter
from lakemount.fuse.core import FileSystem
from lakemount.fuse.journal import Journal
from tests.fuse.conftest import REPO, make_fs
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


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
    adapter.fail_next("put_file", 10_000)  # nothing reaches the store yet: the reads below come from the journal
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
    adapter.fail_next("put_file", 3)  # the local store's uploads of files
    files = {f"c{i}": os.urandom(3000) for i in range(20)}
    for path, data in files.items():
        pfs.write_file(f"{MAIN}/{path}", data)
    pfs.write_file(f"{MAIN}/.lakefs/commit", b"journaled files")
    assert adapter.injected["put_file"] == 3
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
    adapter.fail_next("put_file", 100_000)
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
    adapter.fail_next("put_file", 100_000)
    pfs.write_file(f"/{REPO}/gone/x", b"orphan")
    pfs.write_file(f"{MAIN}/y", b"fine")
    app.catalog.delete_branch(REPO, "gone")
    adapter.heal()
    assert fs.writeback is not None
    fs.writeback.drain(None)
    assert lost(app, "main", {"y": b"fine"}) == []
    kept = [p for p in recovered(home) if p.endswith("-x")]
    assert len(kept) == 1 and open(kept[0], "rb").read() == b"orphan"
    assert fs.writeback.report.counts["kept_aside"] >= 1


def test_a_full_journal_is_enospc_at_close_and_the_content_is_kept(
    flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]], home: str,
) -> None:
    app, adapter, factory = flaky
    fs = factory(journal_bytes=64 << 10)
    assert fs.writeback is not None
    fs.writeback.space_wait = 0.3
    pfs = PathFS(fs)
    adapter.fail_next("put_file", 100_000)
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
        adapter.fail_next("put_file", 100_000)  # the store is down: the journal's disk fills
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


def test_fsync_returns_once_the_file_is_staged(flaky: tuple[App, FlakyAdapter, Callable[..., FileSystem]]) -> None:
    app, adapter, factory = flaky
    fs = factory()
    pfs = PathFS(fs)
    adapter.fail_next("put_file", 3)  # the first uploads fail: fsync waits through the retries
    fh = pfs.open(f"{MAIN}/synced", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"durable in the lake")
    pfs.fsync(fh)
    assert adapter.injected["put_file"] == 3
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
