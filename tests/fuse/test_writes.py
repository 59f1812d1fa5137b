"""Large files stream (issue 36): digests while writing, the temp file becomes the object in place."""

from __future__ import annotations

import hashlib
import os

import pytest

from lakemount.app import App
from lakemount.fuse.core import FileSystem
from lakemount.fuse.writes import DirtyFile
from tests.fuse.conftest import REPO
from tests.fuse.pathfs import PathFS

MAIN = f"/{REPO}/main"
MiB = 1 << 20


def object_path(app: App, address: str) -> str:
    ns = app.catalog.repository(REPO).storage_namespace
    assert ns.startswith("local://")
    return os.path.join(ns.removeprefix("local://"), address)


def test_digests_of_an_appended_body_come_from_the_hash_threads(tmp_path: os.PathLike[str]) -> None:
    """Past HASH_THREAD_AFTER the digests are computed by threads, and equal hashlib's of the content."""
    body = os.urandom(3 * MiB + 17)
    dirty = DirtyFile(os.fspath(tmp_path), None, 0)
    try:
        for off in range(0, len(body), 256 << 10):
            dirty.pwrite(off, body[off : off + (256 << 10)])
        assert dirty._digests is not None and dirty._digests._queues, "the hash threads never started"
        with dirty.lock:
            assert dirty.digests() == (len(body), hashlib.sha256(body).hexdigest(), hashlib.md5(body).hexdigest())
        dirty.pwrite(5, b"overwrite")  # not an append: the running digests no longer apply
        with dirty.lock:
            assert dirty.digests() is None
    finally:
        dirty.discard()


def test_a_large_file_becomes_its_object_in_place_and_stays_immutable(app: App, fs: FileSystem, pfs: PathFS) -> None:
    """On the local store the temp file is hard-linked into its content address (same inode: no second
    copy); a write after that copies the temp file first, so the stored object never changes."""
    body = os.urandom(3 * MiB)
    fh = pfs.open(f"{MAIN}/big", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for off in range(0, len(body), MiB):
            pfs.pwrite(fh, off, body[off : off + MiB])
        pfs.fsync(fh)
        entry = app.catalog.stat(REPO, "main", "big")
        assert entry.address.endswith(hashlib.sha256(body).hexdigest()) and entry.etag == hashlib.md5(body).hexdigest()
        node = fs.state.node(pfs.ino(f"{MAIN}/big"))
        dirty = node.dirty
        assert dirty is not None and dirty.in_place and dirty.frozen
        stored = object_path(app, entry.address)
        assert os.stat(stored).st_ino == os.fstat(dirty.fd).st_ino, "the object is a second copy"
        pfs.pwrite(fh, 0, b"changed")  # thaws: the object keeps its bytes
        assert not dirty.frozen and os.stat(stored).st_ino != os.fstat(dirty.fd).st_ino
        with open(stored, "rb") as f:
            assert f.read() == body
    finally:
        pfs.close(fh)
    changed = b"changed" + body[7:]
    assert pfs.read_file(f"{MAIN}/big") == changed
    entry = app.catalog.stat(REPO, "main", "big")
    assert entry.address.endswith(hashlib.sha256(changed).hexdigest())
    with open(stored, "rb") as f:
        assert f.read() == body
    assert os.listdir(fs.options.spool_dir) == []  # every temp file dropped; the objects keep their names


def test_truncate_of_a_frozen_file_starts_a_new_temp_file(app: App, fs: FileSystem, pfs: PathFS) -> None:
    """A truncation after the temp file became an object leaves the object's bytes alone."""
    body = os.urandom(2 * MiB)
    with pfs.opened(f"{MAIN}/t", os.O_RDWR | os.O_CREAT | os.O_TRUNC) as fh:
        pfs.pwrite(fh, 0, body)
        pfs.fsync(fh)
        stored = object_path(app, app.catalog.stat(REPO, "main", "t").address)
        pfs.truncate(f"{MAIN}/t", 0)
        pfs.pwrite(fh, 0, b"new")
    assert pfs.read_file(f"{MAIN}/t") == b"new"
    with open(stored, "rb") as f:
        assert f.read() == body


def test_a_namespace_elsewhere_gets_a_copy(app: App, fs: FileSystem, pfs: PathFS, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without in-place storing (another block store) nothing is frozen and the object is a copy."""
    monkeypatch.setattr(app.catalog, "stores_files_in_place", lambda repo: False)
    body = os.urandom(2 * MiB)
    with pfs.opened(f"{MAIN}/c", os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as fh:
        pfs.pwrite(fh, 0, body)
        pfs.fsync(fh)
        dirty = fs.state.node(pfs.ino(f"{MAIN}/c")).dirty
        assert dirty is not None and not dirty.in_place and not dirty.frozen
        stored = object_path(app, app.catalog.stat(REPO, "main", "c").address)
        assert os.stat(stored).st_ino != os.fstat(dirty.fd).st_ino
    assert pfs.read_file(f"{MAIN}/c") == body
