"""LocalAdapter behaviour beyond the conformance suite: URL rules, temp files, path clashes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from lakemount.block.local import TEMP_PREFIX, LocalAdapter
from lakemount.errors import InvalidArgument, ObjectNotFound


def test_url_maps_to_the_file_verbatim(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/a/b c.txt", b"x")
    assert (tmp_path / "a" / "b c.txt").read_bytes() == b"x"
    assert LocalAdapter.path_of(f"local://{tmp_path}/a") == f"{tmp_path}/a"


@pytest.mark.parametrize(
    "url",
    [
        "local://relative/path",
        "local:///",
        "local:///a//b",
        "local:///a/./b",
        "local:///a/../b",
        "local:///a/b/",
        "file:///a/b",
        "/no/scheme",
    ],
)
def test_bad_urls_are_rejected(url: str) -> None:
    with pytest.raises(InvalidArgument):
        LocalAdapter().get(url)


def test_list_skips_temp_files_and_put_refuses_them(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/d/real", b"1")
    (tmp_path / "d" / f"{TEMP_PREFIX}123-real").write_bytes(b"partial")
    assert [i.url for i in adapter.list(f"local://{tmp_path}/")] == [f"local://{tmp_path}/d/real"]
    with pytest.raises(InvalidArgument):
        adapter.put(f"local://{tmp_path}/d/{TEMP_PREFIX}x", b"1")


def test_no_temp_file_left_behind(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/k", b"data")
    src = tmp_path / "src"
    src.write_bytes(b"file")
    adapter.put_file(f"local://{tmp_path}/k2", str(src))
    assert sorted(os.listdir(tmp_path)) == ["k", "k2", "src"]


def test_failed_write_leaves_old_object_and_no_temp(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    url = f"local://{tmp_path}/k"
    adapter.put(url, b"old")
    with pytest.raises(TypeError):
        adapter.put(url, "not bytes")  # type: ignore[arg-type]
    assert adapter.get(url) == b"old"
    assert os.listdir(tmp_path) == ["k"]


def test_object_under_an_object_is_invalid(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/a", b"file")
    with pytest.raises(InvalidArgument):
        adapter.put(f"local://{tmp_path}/a/b", b"x")
    with pytest.raises(ObjectNotFound):
        adapter.get(f"local://{tmp_path}/a/b")


def test_list_of_missing_directory_is_empty(tmp_path: Path) -> None:
    assert list(LocalAdapter().list(f"local://{tmp_path}/nope/")) == []


def test_open_returns_a_real_seekable_file(tmp_path: Path) -> None:
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/f", b"0123456789")
    with adapter.open(f"local://{tmp_path}/f") as f:
        assert f.seekable()
        f.seek(7)
        assert f.read() == b"789"


def test_concurrent_puts_share_directory_fsyncs_and_each_waits_for_one_begun_after_its_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit writes ~1,000 range tables into one directory on several threads; each paid its own directory
    fsync.  Renames made while one runs now share the next, and still no put returns before an fsync of its
    directory that began after its rename has returned (what makes the rename durable)."""
    import stat
    import threading
    import time

    from lakemount.block import local

    events: list[tuple[str, float, float, str]] = []  # (kind, start, end, what)
    lock = threading.Lock()
    real_fsync, real_replace = os.fsync, os.replace

    ranges = tmp_path / "ranges"

    # os.fsync and os.replace are patched process-wide: another test's leftover thread may rename or sync its own
    # files meanwhile (CI once saw an 81st rename), so only this test's directory counts.
    def fsync(fd: int) -> None:
        start = time.monotonic()
        st = os.fstat(fd)
        ours = stat.S_ISDIR(st.st_mode) and ranges.exists() and os.path.samestat(st, os.stat(ranges))
        if ours:
            time.sleep(0.01)  # a slow disk: renames pile up behind the fsync under way
        real_fsync(fd)
        with lock:
            events.append(("fsync-dir" if ours else "fsync", start, time.monotonic(), ""))

    def replace(src: str, dst: str) -> None:
        real_replace(src, dst)
        if os.path.dirname(os.path.abspath(dst)) == str(ranges):
            with lock:
                events.append(("rename", time.monotonic(), time.monotonic(), os.path.basename(dst)))

    monkeypatch.setattr(local.os, "fsync", fsync)
    monkeypatch.setattr(local.os, "replace", replace)
    adapter = LocalAdapter()
    returned: dict[str, float] = {}

    def put(n: int) -> None:
        for i in range(10):
            name = f"t{n}-{i}"
            adapter.put(f"local://{tmp_path}/ranges/{name}", b"x" * 100)
            returned[name] = time.monotonic()

    threads = [threading.Thread(target=put, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    renames = {what: at for kind, at, _, what in events if kind == "rename"}
    dir_syncs = [(start, end) for kind, start, end, _ in events if kind == "fsync-dir"]
    assert len(renames) == 80 and sorted(os.listdir(tmp_path / "ranges")) == sorted(renames)
    for name, at in renames.items():
        assert any(start >= at and end <= returned[name] for start, end in dir_syncs), f"{name} returned before its rename was synced"
    assert len(dir_syncs) < 40, f"{len(dir_syncs)} directory fsyncs for 80 renames on 8 threads: not shared"


def test_a_failed_directory_fsync_fails_the_puts_waiting_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import stat

    from lakemount.block import local
    from lakemount.errors import Unavailable

    real_fsync = os.fsync
    failed: list[int] = []

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            failed.append(fd)
            raise OSError(errno.EIO, "I/O error")
        real_fsync(fd)

    monkeypatch.setattr(local.os, "fsync", fsync)
    with pytest.raises(Unavailable):
        LocalAdapter().put(f"local://{tmp_path}/d/x", b"x")
    assert failed, "the directory fsync did not run"


def test_put_file_with_link_makes_the_file_itself_the_object(tmp_path: Path) -> None:
    """Issue 36: a file its writer never changes again becomes the object by a hard link: no second copy."""
    adapter = LocalAdapter()
    src = tmp_path / "spool" / "w-1"
    src.parent.mkdir()
    src.write_bytes(b"x" * 100_000)
    url = f"local://{tmp_path}/ns/data/ab/obj"
    adapter.put_file(url, str(src), link=True)
    dest = tmp_path / "ns" / "data" / "ab" / "obj"
    assert dest.stat().st_ino == src.stat().st_ino and src.stat().st_nlink == 2
    assert adapter.get(url) == b"x" * 100_000
    assert os.listdir(dest.parent) == ["obj"]  # no .tmp- link left behind
    src.unlink()  # the writer drops its temp file: the object stays
    assert adapter.get(url) == b"x" * 100_000
    adapter.put_file(f"local://{tmp_path}/ns/copy", str(dest))  # without link: a copy, as before
    assert (tmp_path / "ns" / "copy").stat().st_ino != dest.stat().st_ino


def test_put_file_with_link_copies_across_filesystems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spool on another filesystem than the namespace (EXDEV from link) falls back to a copy."""
    adapter = LocalAdapter()
    src = tmp_path / "w-2"
    src.write_bytes(b"y" * 5000)
    refused: list[str] = []

    def no_link(a: str, b: str) -> None:
        refused.append(b)
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    url = f"local://{tmp_path}/ns/obj"
    adapter.put_file(url, str(src), link=True)
    dest = tmp_path / "ns" / "obj"
    assert refused, "the link was never tried"
    assert dest.read_bytes() == b"y" * 5000 and dest.stat().st_ino != src.stat().st_ino
    assert os.listdir(dest.parent) == ["obj"]


def _count_syncfs(monkeypatch: pytest.MonkeyPatch, fail: OSError | None = None) -> list[str]:
    """Record the ``syncfs`` calls of ``put_many`` (still made, unless ``fail`` is raised instead)."""
    from lakemount.block import local

    calls: list[str] = []
    real = local._syncfs
    assert real is not None, "syncfs is the batch path on Linux"

    def counted(directory: str) -> None:
        calls.append(directory)
        if fail is not None:
            raise fail
        real(directory)

    monkeypatch.setattr(local, "_syncfs", counted)
    return calls


def test_put_many_stores_a_batch_whole_with_one_filesystem_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.block.local import SYNCFS_MIN

    calls = _count_syncfs(monkeypatch)
    adapter = LocalAdapter()
    adapter.put(f"local://{tmp_path}/a/k0", b"old")  # replaced whole by the batch
    items = [(f"local://{tmp_path}/{'abc'[i % 3]}/k{i}", os.urandom(100 + i)) for i in range(3 * SYNCFS_MIN)]
    adapter.put_many(items)
    assert len(calls) == 1
    for url, data in items:
        assert adapter.get(url) == data
    assert not [p for p in tmp_path.rglob(f"{TEMP_PREFIX}*")]
    small = [(f"local://{tmp_path}/s/k{i}", b"x" * i) for i in range(SYNCFS_MIN - 1)]
    adapter.put_many(small)  # below the bound: each object fsynced as put does, no filesystem-wide sync
    assert len(calls) == 1
    assert [adapter.get(url) for url, _ in small] == [data for _, data in small]


def test_put_many_is_unavailable_when_the_sync_fails_and_refuses_reserved_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.block.local import SYNCFS_MIN
    from lakemount.errors import Unavailable

    calls = _count_syncfs(monkeypatch, fail=OSError(errno.EIO, "write-back error"))
    adapter = LocalAdapter()
    items = [(f"local://{tmp_path}/d/k{i}", b"%d" % i) for i in range(SYNCFS_MIN)]
    with pytest.raises(Unavailable):
        adapter.put_many(items)
    assert calls, "the batch's sync was attempted (and failed)"
    bad = [*items, (f"local://{tmp_path}/d/{TEMP_PREFIX}x", b"1")]
    with pytest.raises(InvalidArgument):
        adapter.put_many(bad)


@pytest.fixture
def lazy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A fresh record of objects put lazily (none of another test's pending), its syncs counted."""
    from lakemount.block import local

    monkeypatch.setattr(local, "_lazy", local._LazySync())
    return _count_syncfs(monkeypatch)


def test_put_lazily_stores_whole_at_once_and_one_sync_within_the_interval_covers_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lazy: list[str]
) -> None:
    import time

    from lakemount.block import local

    monkeypatch.setattr(local, "SYNC_AFTER", 0.3)
    adapter = LocalAdapter()
    items = [(f"local://{tmp_path}/{'ab'[i % 2]}/k{i}", os.urandom(1024)) for i in range(20)]
    for url, data in items:
        adapter.put_lazily(url, data)
        assert adapter.get(url) == data  # whole and visible when put_lazily returns
    assert not lazy, "no sync on the caller's path"
    assert not [p for p in tmp_path.rglob(f"{TEMP_PREFIX}*")]
    # Wait until a sync has covered all 20 and none runs (not a fixed 0.5 s after the first began): the sync
    # thread then sleeps until the next put, so the count below is final, however slow the machine.
    state = local._lazy
    deadline = time.monotonic() + 60
    while True:
        with state.cond:
            if state.covered == state.stored and not state.running:
                break
        assert time.monotonic() < deadline, f"the lazy sync never covered them: {state.covered} of {state.stored}"
        time.sleep(0.02)
    assert state.covered == 20
    assert len(lazy) == 1, "one syncfs of the one filesystem for all 20 objects"
    local.sync_lazily_put()
    assert len(lazy) == 1, "nothing stored since: nothing to sync"


def test_put_lazily_wakes_the_sync_thread_for_the_first_object_not_yet_covered_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lazy: list[str]
) -> None:
    """Stop 53: a close without write-back put its object lazily and woke the sync thread each time (a futex wake
    and a GIL hand-off per close), though the thread only went back to sleep until the sync was due."""
    import threading

    from lakemount.block import local

    class Counting(threading.Condition):
        def __init__(self) -> None:
            super().__init__()
            self.wakes = 0

        def notify_all(self) -> None:
            self.wakes += 1
            super().notify_all()

    monkeypatch.setattr(local, "SYNC_AFTER", 60.0)
    state = local._lazy
    cond = state.cond = Counting()
    adapter = LocalAdapter()
    for i in range(20):
        adapter.put_lazily(f"local://{tmp_path}/a/k{i}", b"x%d" % i)
    assert cond.wakes == 1, "the first object woke the thread, the next 19 did not"
    local.sync_lazily_put()  # covers all 20 (and wakes its waiters)
    assert state.covered == state.stored == 20
    woken = cond.wakes
    adapter.put_lazily(f"local://{tmp_path}/a/k20", b"after")
    assert cond.wakes == woken + 1, "the first object after a sync wakes the thread again"
    local.sync_lazily_put()
    assert state.covered == state.stored == 21


def test_sync_lazily_put_syncs_at_once_and_a_failed_sync_is_unavailable_until_one_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lazy: list[str]
) -> None:
    from lakemount.block import local
    from lakemount.errors import Unavailable

    monkeypatch.setattr(local, "SYNC_AFTER", 60.0)
    adapter = LocalAdapter()
    adapter.put_lazily(f"local://{tmp_path}/a/k0", b"zero")
    local.sync_lazily_put()
    assert len(lazy) == 1
    real = local._syncfs
    failing = OSError(errno.EIO, "write-back error")

    def fails(directory: str) -> None:
        lazy.append(directory)
        raise failing

    monkeypatch.setattr(local, "_syncfs", fails)
    adapter.put_lazily(f"local://{tmp_path}/a/k1", b"one")
    with pytest.raises(Unavailable):
        local.sync_lazily_put()
    assert len(lazy) == 2, "the sync was attempted and failed"
    monkeypatch.setattr(local, "_syncfs", real)
    local.sync_lazily_put()  # the object the failed sync did not cover is synced by the next
    assert adapter.get(f"local://{tmp_path}/a/k1") == b"one"
    assert local._lazy.covered == local._lazy.stored == 2


def test_sync_store_syncs_the_filesystem_of_a_namespace_not_yet_made(tmp_path: Path, lazy: list[str]) -> None:
    from lakemount.block.local import sync_store

    sync_store(f"local://{tmp_path}/ns/not/yet")
    assert lazy == [str(tmp_path)]


def test_a_process_that_exits_syncs_what_it_stored_lazily_first(tmp_path: Path) -> None:
    import subprocess
    import sys

    child = f"""
from lakemount.block import local
local.SYNC_AFTER = 600.0
real = local._syncfs
def counted(directory):
    print("syncfs", flush=True)
    real(directory)
local._syncfs = counted
local.LocalAdapter().put_lazily("local://{tmp_path}/a/k", b"late")
print("stored", flush=True)
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["stored", "syncfs"], out
    assert (tmp_path / "a" / "k").read_bytes() == b"late"
