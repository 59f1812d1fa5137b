"""FUSE passthrough of write-only opens in the core (stop 54), without a kernel: the kernel's writes are made
here with ``pwrite`` on the temp file, as the kernel makes them on its backing file; the core must take the
size and content from the file, hash it at the save, and store what was written."""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block.layout import data_address
from lakemount.catalog.streaming import parts_etag
from lakemount.fuse import passthrough, writes
from lakemount.fuse.core import FileSystem
from lakemount.fuse.values import Caller
from lakemount.fuse.writes import MD5_MAX, MEMORY_MAX
from tests.fuse.conftest import REPO

MiB = 1 << 20


def staged(app: App, path: str) -> bytes:
    entry = app.catalog.get_optional(REPO, "main", path)
    assert entry is not None, f"{path} is not staged"
    return app.catalog.read(app.catalog.repository(REPO), entry)


@pytest.fixture
def backing(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """The kernel's side of backing ids: registered descriptors and closed ids (ids count from 7)."""
    seen: dict[str, list[int]] = {"registered": [], "closed": []}

    def register(fd: int) -> int:
        seen["registered"].append(fd)
        return 6 + len(seen["registered"])

    monkeypatch.setattr(passthrough, "register", register)
    monkeypatch.setattr(passthrough, "close_backing", seen["closed"].append)
    return seen


@pytest.fixture
def ptfs(fs_factory: Callable[..., FileSystem]) -> FileSystem:
    fs = fs_factory(head_ttl=0.2)
    fs.state.passthrough = True  # as the adapter sets it when the kernel took passthrough at INIT
    return fs


def branch_dir(fs: FileSystem) -> int:
    repo = fs.lookup(1, REPO.encode()).ino
    return fs.lookup(repo, b"main").ino


def test_a_write_only_create_is_a_passthrough_open_and_its_kernel_writes_are_stored(
    ptfs: FileSystem, app: App, backing: dict[str, list[int]],
) -> None:
    """A large file (past SCAN_FROM: the save links the temp file itself, no process holding it): the size
    while open, a second open's reads (direct_io, from the temp file), the digests and the stored bytes."""
    fs = ptfs
    caller = Caller()
    opened, _attr = fs.create(branch_dir(fs), b"core-big.bin", 0o644, os.O_WRONLY | os.O_TRUNC, caller)
    assert opened.backing == 7 and not opened.direct_io and not opened.keep_cache
    node = fs.state.node(_attr.ino)
    dirty = node.dirty
    assert dirty is not None and dirty.passing == 1 and backing["registered"] == [dirty.fd]
    body = os.urandom(passthrough.SCAN_FROM + 3 * MiB)
    os.pwrite(dirty.fd, body, 0)  # the kernel's writes: nothing reaches fs.write
    assert fs.getattr(_attr.ino).size == len(body)
    reader = fs.open(_attr.ino, os.O_RDONLY, caller)
    assert reader.backing == 7  # the kernel requires every open of the inode to pass through to the same file
    assert fs.read(reader.fh, MiB, 100) == body[MiB : MiB + 100]
    fs.release(reader.fh)
    assert backing["closed"] == []  # the writer's open is left
    fs.flush(opened.fh)
    fs.release(opened.fh)
    assert backing["closed"] == [7]
    assert staged(app, "core-big.bin") == body
    entry = app.catalog.get_optional(REPO, "main", "core-big.bin")
    assert entry is not None
    sha = hashlib.sha256(body).hexdigest()
    assert entry.address == data_address(sha) and entry.etag == parts_etag(sha, len(body))
    assert fs.metrics.counter("passthrough_opens") == 2  # the writer's and the reader's
    assert fs.metrics.counter("passthrough_saved_copies") == 0  # nobody held the file: the temp file became the object
    assert fs.metrics.counter("written_bytes") == 0


def test_an_fsync_while_open_stores_a_copy_and_later_kernel_writes_are_saved_at_close(
    ptfs: FileSystem, app: App, backing: dict[str, list[int]],
) -> None:
    """fsync(2) with the passthrough open left stores a private copy: the writes after it change no stored
    object and are saved at close; a small and a medium file take the MD5 as their ETag."""
    fs = ptfs
    opened, attr = fs.create(branch_dir(fs), b"log.bin", 0o644, os.O_WRONLY, Caller())
    dirty = fs.state.node(attr.ino).dirty
    assert dirty is not None
    first = os.urandom(2 * MiB)
    os.pwrite(dirty.fd, first, 0)
    fs.fsync(opened.fh)
    assert staged(app, "log.bin") == first
    stored = app.catalog.get_optional(REPO, "main", "log.bin")
    assert stored is not None and stored.etag == hashlib.md5(first).hexdigest()
    assert fs.metrics.counter("passthrough_saved_copies") == 1
    second = os.urandom(MiB)
    os.pwrite(dirty.fd, second, len(first))
    os.pwrite(dirty.fd, b"X", 0)  # an overwrite of a byte the fsync stored
    fs.flush(opened.fh)
    fs.release(opened.fh)
    expected = b"X" + first[1:] + second
    assert staged(app, "log.bin") == expected
    assert app.catalog.read(app.catalog.repository(REPO), stored) == first  # the fsync's object is unchanged

    opened, attr = fs.create(branch_dir(fs), b"small.txt", 0o644, os.O_WRONLY, Caller())
    dirty = fs.state.node(attr.ino).dirty
    assert dirty is not None
    small = os.urandom(MEMORY_MAX // 2)
    os.pwrite(dirty.fd, small, 0)
    fs.flush(opened.fh)
    fs.release(opened.fh)
    entry = app.catalog.get_optional(REPO, "main", "small.txt")
    assert entry is not None and entry.etag == hashlib.md5(small).hexdigest() and staged(app, "small.txt") == small
    assert MEMORY_MAX < MiB < MD5_MAX


def test_a_refused_backing_file_falls_back_to_writes_through_the_mount(
    ptfs: FileSystem, app: App, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fs = ptfs

    def refuse(fd: int) -> int:
        raise OSError(errno.EPERM, "not permitted")

    monkeypatch.setattr(passthrough, "register", refuse)
    opened, attr = fs.create(branch_dir(fs), b"f.bin", 0o644, os.O_WRONLY | os.O_TRUNC, Caller())
    assert opened.backing == 0 and opened.direct_io  # stop 51's write-only open
    assert fs.metrics.counter("passthrough_refused") == 1
    assert fs.write(opened.fh, 0, b"through the mount") == 17
    fs.flush(opened.fh)
    fs.release(opened.fh)
    assert staged(app, "f.bin") == b"through the mount"


def test_opens_that_are_not_passed_through(ptfs: FileSystem, app: App, backing: dict[str, list[int]]) -> None:
    """Read-write opens, an open of stored content without O_TRUNC (it needs a copy first), and a write-only open
    beside another handle go through the mount; passthrough off for the mount: none."""
    fs = ptfs
    caller = Caller()
    opened, attr = fs.create(branch_dir(fs), b"a", 0o644, os.O_RDWR, caller)
    assert opened.backing == 0
    fs.write(opened.fh, 0, b"stored")
    fs.flush(opened.fh)
    fs.release(opened.fh)
    assert fs.open(attr.ino, os.O_WRONLY, caller).backing == 0  # stored content, no O_TRUNC
    reader = fs.open(attr.ino, os.O_RDONLY, caller)
    assert fs.open(attr.ino, os.O_WRONLY | os.O_TRUNC, caller).backing == 0  # a cached reader holds the inode
    fs.release(reader.fh)
    fs.state.passthrough = False
    other, _ = fs.create(branch_dir(fs), b"b", 0o644, os.O_WRONLY, caller)
    assert other.backing == 0
    assert backing["registered"] == []


def test_descriptors_open_finds_a_process_holding_the_file(tmp_path: os.PathLike[str]) -> None:
    """The process table is read for descriptors ending with the file's name; this process is left out (the
    mount's own), so a child holds it here."""
    import subprocess
    import sys

    path = os.path.join(os.fspath(tmp_path), "held.bin")
    open(path, "wb").close()
    assert not passthrough.descriptors_open(["held.bin"])
    child = subprocess.Popen([sys.executable, "-c", f"import sys, time; f = open({path!r}, 'ab'); print(1, flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"1\n"
        assert passthrough.descriptors_open(["held.bin"])
        assert passthrough.descriptors_open(["sub/other.bin", "held.bin"])
        assert not passthrough.descriptors_open(["other.bin"])
    finally:
        child.kill()
        child.wait()


def test_the_setting_asks_for_passthrough_only_when_on_or_auto() -> None:
    # With write-back too (stop 55): the journal takes a large kernel-written file over unhashed.
    assert passthrough.wanted("auto") and passthrough.wanted("on")
    assert not passthrough.wanted("off")
    with pytest.raises(ValueError, match="mount.passthrough"):
        passthrough.wanted("yes")


def test_the_follower_starts_the_write_back_of_what_the_kernel_appends(
    ptfs: FileSystem, backing: dict[str, list[int]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stop 55: while a passthrough open writes a file the store will link (in place), the follower starts the
    write-back of each ``FLUSH_EVERY`` bytes appended (``sync_file_range``), so the close's fsync has little left;
    it lets the file go once no passthrough open is left."""
    started: list[tuple[int, int]] = []
    monkeypatch.setattr(writes, "_start_write_back", lambda fd, offset, n: started.append((offset, n)))
    caller = Caller()
    opened, attr = ptfs.create(branch_dir(ptfs), b"followed.bin", 0o644, os.O_WRONLY | os.O_TRUNC, caller)
    dirty = ptfs.state.node(attr.ino).dirty
    assert dirty is not None and dirty.passing == 1 and dirty in writes._followed
    os.pwrite(dirty.fd, b"x" * (writes.FLUSH_EVERY - 1), 0)  # the kernel's writes
    assert dirty.follow() and started == []  # less than FLUSH_EVERY appended: nothing yet

    def covered() -> int:  # the follower thread may have made some of the calls: the ranges run on from 0
        end = 0
        for offset, n in sorted(started):
            assert offset == end, started
            end += n
        return end

    os.pwrite(dirty.fd, b"y" * (writes.FLUSH_EVERY + 2), writes.FLUSH_EVERY - 1)
    size = 2 * writes.FLUSH_EVERY + 1
    assert dirty.follow() and size - writes.FLUSH_EVERY < covered() <= size  # at most FLUSH_EVERY left unstarted
    os.pwrite(dirty.fd, b"z" * writes.FLUSH_EVERY, 2 * writes.FLUSH_EVERY + 1)
    size = 3 * writes.FLUSH_EVERY + 1
    assert dirty.follow() and size - writes.FLUSH_EVERY < covered() <= size
    ptfs.flush(opened.fh)
    ptfs.release(opened.fh)
    calls = len(started)
    assert not dirty.follow()  # no passthrough open left: the follower forgets it
    assert len(started) == calls


@pytest.mark.parametrize("writeback", [False, True], ids=["stored-in-place", "write-back"])
def test_an_open_between_a_passthrough_close_that_saved_the_file_and_its_release(
    app: App, home: str, backing: dict[str, list[int]], writeback: bool,
) -> None:
    """replay55: a close saved the temp file itself (the store linked it, or the write-back journal took it
    unhashed) and its RELEASE has not come yet, so the kernel still has that passthrough open: a new open of the
    inode must pass through to the same backing file (the kernel fails another one, or none, with EIO at open).
    A reader shares it and reads the saved bytes; a writer waits (on a thread) for the release, then writes a new
    temp file with a backing file of its own, and the saved bytes stay as they were."""
    import threading

    from tests.fuse.conftest import make_fs

    options: dict[str, object] = {"head_ttl": 0.2}
    if writeback:
        options.update(writeback=True, journal_dir=os.path.join(home, "journal"))
    fs = make_fs(app, home, "window", **options)
    try:
        fs.state.passthrough = True
        caller = Caller()
        opened, attr = fs.create(branch_dir(fs), b"core-big.bin", 0o644, os.O_WRONLY | os.O_TRUNC, caller)
        assert opened.backing == 7
        node = fs.state.node(attr.ino)
        first = node.dirty
        assert first is not None
        body = os.urandom(passthrough.SCAN_FROM + 5)
        os.pwrite(first.fd, body, 0)  # the kernel's writes
        fs.flush(opened.fh)  # the close: no descriptor left, so the file itself is saved
        assert first.held if writeback else first.frozen
        assert fs.metrics.counter("journaled_unhashed") == (1 if writeback else 0)
        reader = fs.open(attr.ino, os.O_RDONLY, caller)  # before the release
        assert reader.backing == 7, "a reader in the window got no passthrough or another backing file: EIO at open"
        assert backing["registered"] == [first.fd] and fs.metrics.counter("passthrough_window_opens") == 1
        assert fs.read(reader.fh, 0, 100) == body[:100]
        got: list[object] = []
        writer = threading.Thread(target=lambda: got.append(fs.open(attr.ino, os.O_WRONLY | os.O_TRUNC, caller)))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive() and got == [], "a writer got an open while the saved file's passthrough open lived"
        assert fs.metrics.counter("passthrough_window_waits") == 1
        fs.release(opened.fh)
        writer.join(0.5)
        assert writer.is_alive(), "the reader's passthrough open of the saved file is left: the writer still waits"
        fs.release(reader.fh)
        writer.join(10)
        assert not writer.is_alive() and len(got) == 1
        second = got[0]
        assert second.backing == 8, "the writer's open must pass through to a new temp file"  # type: ignore[attr-defined]
        dirty = node.dirty
        assert dirty is not None and (dirty is not first or dirty.fd != backing["registered"][0])
        assert backing["registered"][1] == dirty.fd and backing["closed"] == [7]
        again = os.urandom(MiB)
        os.pwrite(dirty.fd, again, 0)
        fs.flush(second.fh)  # type: ignore[attr-defined]
        fs.release(second.fh)  # type: ignore[attr-defined]
        if fs.writeback is not None:
            fs.writeback.drain(None)
        assert staged(app, "core-big.bin") == again
        data = os.path.join(app.catalog.repository(REPO).storage_namespace.removeprefix("local://"), "data")
        stored = [os.path.join(d, f) for d, _s, fs_ in os.walk(data) for f in fs_ if not f.startswith(".")]
        assert stored, "nothing was stored"
        for path in stored:  # the first body's object (linked, or hashed from the journal) is whole
            with open(path, "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == os.path.basename(path), path
    finally:
        fs.close()


def _pause_first_empty(ptfs: FileSystem, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``(inside, go)``: the first ``O_TRUNC`` open from now on stops after it registered (and chose), before its
    truncation and its passthrough, setting ``inside`` and waiting for ``go``."""
    import threading

    inside, go = threading.Event(), threading.Event()
    empty = ptfs.handles.saver.empty

    def slow_empty(n):  # type: ignore[no-untyped-def]
        if not inside.is_set():
            inside.set()
            assert go.wait(10)
        return empty(n)

    monkeypatch.setattr(ptfs.handles.saver, "empty", slow_empty)
    return inside, go


def _open_on_thread(ptfs: FileSystem, got: dict[str, Any], key: str, ino: int, flags: int) -> Any:
    """A started thread opening ``ino`` with ``flags``; its ``Opened`` goes to ``got[key]``."""
    import threading

    t = threading.Thread(target=lambda: got.update({key: ptfs.open(ino, flags, Caller())}))
    t.start()
    return t


def test_an_open_while_another_has_chosen_passthrough_waits_for_its_backing_id_and_shares_it(
    ptfs: FileSystem, backing: dict[str, list[int]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer's open (on a thread: its O_TRUNC) chose passthrough and has no backing id yet when a reader's open
    comes (on the loop).  Before, the reader was answered without passthrough, and the kernel then refused the
    writer's passthrough open beside it (EIO at open: two writers and a reader, 5 in 20 s).  Now the choice is made
    as the handle registers, and the reader waits until the writer's backing id exists, then shares it."""

    caller = Caller()
    opened, attr = ptfs.create(branch_dir(ptfs), b"w.bin", 0o644, os.O_WRONLY | os.O_TRUNC, caller)
    assert opened.backing == 7
    node = ptfs.state.node(attr.ino)
    assert node.dirty is not None
    os.pwrite(node.dirty.fd, b"first", 0)
    ptfs.flush(opened.fh)
    ptfs.release(opened.fh)
    assert backing["closed"] == [7]
    inside, go = _pause_first_empty(ptfs, monkeypatch)
    got: dict[str, Any] = {}
    writer = _open_on_thread(ptfs, got, "writer", attr.ino, os.O_WRONLY | os.O_TRUNC)
    assert inside.wait(10)  # registered, passthrough chosen, no backing id yet
    reader = _open_on_thread(ptfs, got, "reader", attr.ino, os.O_RDONLY)
    reader.join(0.5)
    assert reader.is_alive() and "reader" not in got, "a reader opened beside a writer's passthrough not yet begun"
    assert ptfs.metrics.counter("passthrough_pending_waits") == 1
    go.set()
    writer.join(10)
    reader.join(10)
    assert not writer.is_alive() and not reader.is_alive()
    w, r = got["writer"], got["reader"]
    assert w.backing == 8 and r.backing == 8, (w, r)  # type: ignore[attr-defined]
    assert node.pass_pending == 0
    for o in (r, w):
        ptfs.release(o.fh)  # type: ignore[attr-defined]
    assert backing["closed"] == [7, 8]


def test_an_open_that_shares_live_passthrough_opens_holds_back_others_until_it_has_its_share(
    ptfs: FileSystem, backing: dict[str, list[int]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer's open chose passthrough because passthrough opens of the file were alive (it will share their
    backing file), and those were all released before it took its share.  Before, a second writer's open then saw no
    passthrough open and none beginning, and was answered without passthrough beside the first's passthrough open:
    the kernel refused one of the two (EIO at open: two writers of one file and a reader, with write-back, 1 in ~10
    runs of 20 s, stop 56).  Now the sharing open, too, holds other opens back until it has its backing id."""

    caller = Caller()
    first, attr = ptfs.create(branch_dir(ptfs), b"w.bin", 0o644, os.O_WRONLY | os.O_TRUNC, caller)
    assert first.backing == 7
    node = ptfs.state.node(attr.ino)
    assert node.dirty is not None
    os.pwrite(node.dirty.fd, b"first", 0)
    inside, go = _pause_first_empty(ptfs, monkeypatch)
    got: dict[str, Any] = {}
    sharer = _open_on_thread(ptfs, got, "sharer", attr.ino, os.O_WRONLY | os.O_TRUNC)
    assert inside.wait(10)  # registered, passthrough chosen (the first open is alive), no share taken yet
    ptfs.flush(first.fh)
    ptfs.release(first.fh)  # the live passthrough open is gone before the sharer took its share
    assert backing["closed"] == [7]
    other = _open_on_thread(ptfs, got, "other", attr.ino, os.O_WRONLY)
    other.join(0.5)
    assert other.is_alive() and "other" not in got, "an open went without passthrough beside one beginning it"
    assert ptfs.metrics.counter("passthrough_pending_waits") == 1
    go.set()
    sharer.join(10)
    other.join(10)
    assert not sharer.is_alive() and not other.is_alive()
    s, o = got["sharer"], got["other"]
    assert s.backing and s.backing == o.backing, (s, o)  # type: ignore[attr-defined]
    assert node.pass_pending == 0
    for h in (o, s):
        ptfs.flush(h.fh)  # type: ignore[attr-defined]
        ptfs.release(h.fh)  # type: ignore[attr-defined]
    assert backing["closed"] == [7, s.backing]  # type: ignore[attr-defined]
