"""Failures of the stores become EIO (or the category's errno) and the core keeps serving."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

import pytest

from lakemount.app import App
from lakemount.block import FaultKind, FlakyAdapter
from lakemount.fuse.core import FileSystem
from lakemount.fuse.errno import errno_of
from tests.fuse.conftest import REPO, make_fs
from tests.fuse.fakes import FlakyRefStore
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"


@pytest.fixture
def flaky(home: str) -> Iterator[tuple[App, FlakyAdapter, FlakyRefStore, FileSystem]]:
    app = App.from_config()
    adapter = FlakyAdapter(app.adapter)
    refs = FlakyRefStore(app.metastore)
    # Seed the composition root's cached stores before anything else is built.
    app.__dict__["adapter"] = adapter
    app.__dict__["metastore"] = refs
    app.catalog.create_repository(REPO)
    fs = make_fs(app, home, head_ttl=0.0)
    yield app, adapter, refs, fs
    adapter.heal()
    refs.heal()
    fs.close()


def test_block_store_errors_are_eio_and_the_mount_recovers(flaky: tuple[App, FlakyAdapter, FlakyRefStore, FileSystem]) -> None:
    app, adapter, _refs, fs = flaky
    pfs = PathFS(fs)
    app.catalog.put(REPO, "main", "f", b"payload")
    adapter.fail_next("get", 1)
    fh = pfs.open(f"{MAIN}/f")
    with pytest.raises(OSError) as info:
        pfs.pread(fh, 0, 100)
    assert info.value.errno == errno.EIO
    assert adapter.injected["get"] == 1  # the EIO was the injected fault's
    assert pfs.pread(fh, 0, 100) == b"payload"
    pfs.close(fh)
    assert fs.metrics.counter("block_misses") == 1


def test_a_failed_save_reports_eio_and_keeps_the_data_for_a_retry(flaky: tuple[App, FlakyAdapter, FlakyRefStore, FileSystem]) -> None:
    app, adapter, _refs, fs = flaky
    pfs = PathFS(fs)
    fh = pfs.open(f"{MAIN}/w", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"important")
    adapter.fail_next("put_file", 1)
    adapter.fail_next("put", 1)
    with pytest.raises(Exception) as info:
        fs.flush(fh)
    assert errno_of(info.value) == errno.EIO
    assert adapter.injected["put_file"] + adapter.injected["put"] >= 1  # the EIO was the injected fault's
    fs.fsync(fh)  # the retry succeeds
    pfs.close(fh)
    e = app.catalog.get_optional(REPO, "main", "w")
    assert e is not None and e.size == 9


def test_unsaved_content_is_kept_aside_when_the_store_stays_down(flaky: tuple[App, FlakyAdapter, FlakyRefStore, FileSystem], home: str) -> None:
    _app, adapter, _refs, fs = flaky
    pfs = PathFS(fs)
    fh = pfs.open(f"{MAIN}/lost", os.O_WRONLY | os.O_CREAT)
    pfs.pwrite(fh, 0, b"keep me")
    adapter.fail_next("put_file", 10)
    adapter.fail_next("put", 10)
    with pytest.raises(Exception) as info:
        fs.flush(fh)
    assert errno_of(info.value) == errno.EIO
    assert adapter.injected["put_file"] + adapter.injected["put"] >= 1  # the EIO was the injected fault's
    fs.release(fh)  # logs, keeps the bytes aside
    kept = os.listdir(os.path.join(home, "recovered"))
    assert len(kept) == 1
    with open(os.path.join(home, "recovered", kept[0]), "rb") as f:
        assert f.read() == b"keep me"


def test_ref_store_failures_and_timeouts_are_eio(flaky: tuple[App, FlakyAdapter, FlakyRefStore, FileSystem]) -> None:
    _app, _adapter, refs, fs = flaky
    pfs = PathFS(fs)
    pfs.write_file(f"{MAIN}/f", b"1")
    refs.fail_next(1, delay=0.05)
    with pytest.raises(OSError) as info:
        pfs.lstat(f"{MAIN}/g")
    assert info.value.errno == errno.EIO
    assert refs.injected == 1  # the EIO was the injected fault's
    assert pfs.read_file(f"{MAIN}/f") == b"1"
    refs.fail_next(1)
    with pytest.raises(OSError) as info:
        pfs.write_file(f"{MAIN}/h", b"2")
    assert info.value.errno == errno.EIO
    assert refs.injected == 2
    pfs.write_file(f"{MAIN}/h", b"2")
    assert pfs.read_file(f"{MAIN}/h") == b"2"


def test_random_faults_never_escape_as_anything_but_oserror(flaky: tuple[App, FlakyAdapter, FlakyRefStore, FileSystem]) -> None:
    _app, adapter, _refs, fs = flaky
    pfs = PathFS(fs)
    adapter.probability = 0.3
    adapter.random_fault = adapter.random_fault.__class__(FaultKind.ERROR)
    ok = failed = 0
    for i in range(40):
        try:
            pfs.write_file(f"{MAIN}/f{i % 5}", os.urandom(100))
            pfs.read_file(f"{MAIN}/f{i % 5}")
            ok += 1
        except OSError as exc:
            assert exc.errno in (errno.EIO, errno.ENOENT)
            failed += 1
    adapter.heal()
    assert failed > 0 and ok > 0
    assert sum(adapter.injected.values()) >= failed  # every failure had a fault behind it
    pfs.write_file(f"{MAIN}/after", b"fine")
    assert pfs.read_file(f"{MAIN}/after") == b"fine"
