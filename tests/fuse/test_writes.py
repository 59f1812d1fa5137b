"""Large files stream (issue 36): digests while writing, the temp file becomes the object in place."""

from __future__ import annotations

import hashlib
import io
import mmap
import os
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakemount.app import App
from lakemount.block.layout import data_address
from lakemount.block.s3 import S3Adapter
from lakemount.catalog.streaming import PART_SIZE, parts_etag
from lakemount.config import load
from lakemount.fuse.core import FileSystem
from lakemount.fuse.writes import FLUSH_EVERY, MEMORY_MAX, DirtyFile
from tests.fuse.conftest import REPO, make_fs
from tests.fuse.pathfs import PathFS
from tests.moto_server import CREDENTIALS, moto_s3
from tests.pagecache import filesystem_of, resident_pages

MAIN = f"/{REPO}/main"
MiB = 1 << 20
BUCKET = "streamed"


def object_path(app: App, address: str) -> str:
    ns = app.catalog.repository(REPO).storage_namespace
    assert ns.startswith("local://")
    return os.path.join(ns.removeprefix("local://"), address)


@pytest.mark.parametrize("pieces", [[4 << 10], [4 << 10, 2 << 20, 100], [1, 3 << 20]])
def test_digests_of_small_and_large_pieces_are_gathered_in_order(
    tmp_path: os.PathLike[str], pieces: list[int], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pieces smaller than HASH_BATCH reach the hash threads gathered (one hand-off per batch, not per
    piece), in order with the large ones: the digests still equal hashlib's of the content."""
    from lakemount.fuse import writes

    sends: list[int] = []
    real_send = writes._Digests._send
    monkeypatch.setattr(writes._Digests, "_send", lambda self, data: (sends.append(len(data)), real_send(self, data))[1])
    body = os.urandom(5 * MiB + 3)
    dirty = DirtyFile(os.fspath(tmp_path), None, 0)
    try:
        off, n_pieces = 0, 0
        while off < len(body):
            n = pieces[n_pieces % len(pieces)]
            dirty.pwrite(off, body[off : off + n])
            off += n
            n_pieces += 1
        assert dirty._digests is not None and dirty._digests._queues, "the hash threads never started"
        with dirty.lock:
            assert dirty.digests() == (len(body), hashlib.sha256(body).hexdigest(), hashlib.md5(body).hexdigest())
        large = sum(1 for k in range(n_pieces) if pieces[k % len(pieces)] >= writes.HASH_BATCH)
        assert len(sends) <= large + len(body) // writes.HASH_BATCH + 2, (len(sends), n_pieces)
    finally:
        dirty.discard()


def test_past_md5_max_the_md5_is_given_up_for_the_etag_of_an_upload_in_parts(tmp_path: os.PathLike[str]) -> None:
    """Up to MD5_MAX appended bytes the ETag is the MD5; past it the MD5's thread ends and the ETag is
    the opaque one of an object uploaded in parts (derived from the SHA-256: equal bytes, equal ETags)."""
    from lakemount.fuse import writes

    body = os.urandom(writes.MD5_MAX + MiB)
    dirty = DirtyFile(os.fspath(tmp_path), None, 0)
    try:
        for off in range(0, writes.MD5_MAX, MiB):
            dirty.pwrite(off, body[off : off + MiB])
        with dirty.lock:
            assert dirty.digests() == (writes.MD5_MAX, hashlib.sha256(body[: writes.MD5_MAX]).hexdigest(),
                                       hashlib.md5(body[: writes.MD5_MAX]).hexdigest())
        assert dirty._digests is not None and len(dirty._digests._queues) == 2
        dirty.pwrite(writes.MD5_MAX, body[writes.MD5_MAX :])
        assert len(dirty._digests._queues) == 1, "the MD5's thread still runs past MD5_MAX"
        sha = hashlib.sha256(body).hexdigest()
        with dirty.lock:
            assert dirty.digests() == (len(body), sha, parts_etag(sha, len(body)))
        assert parts_etag(sha, len(body)) == f"{sha[:32]}-2"
    finally:
        dirty.discard()


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


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_s3(BUCKET) as url:
        yield url


@pytest.fixture
def s3_app(tmp_path: Path, s3_endpoint: str) -> App:
    env = {
        "LAKEMOUNT_HOME": str(tmp_path / "home"),
        "LAKEMOUNT_BLOCKSTORE_TYPE": "s3",
        "LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX": f"s3://{BUCKET}/{tmp_path.name}",
        "LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT": s3_endpoint,
        "LAKEMOUNT_BLOCKSTORE_S3_REGION": "us-east-1",
        "LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID": "testing",
        "LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY": "testing",
        "LAKEMOUNT_CACHE_RAM_BYTES": str(64 << 20),
    }
    app = App(load(None, env=env))
    app.catalog.create_repository(REPO)
    return app


def test_on_s3_a_large_file_goes_out_in_parts_before_close(
    s3_app: App, tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The S3 adapter's calls: parts are uploaded while the file is written; close sends the last part,
    completes, and the object ends at its content address (no whole-file upload, no landing key left)."""
    calls: list[str] = []
    for name in ("start_parts", "put_part", "finish_parts", "abort_parts", "put_file", "copy"):
        real = getattr(S3Adapter, name)
        monkeypatch.setattr(S3Adapter, name, lambda self, *a, _n=name, _r=real, **k: (calls.append(_n), _r(self, *a, **k))[1])
    fs = make_fs(s3_app, str(tmp_path), "s3")
    try:
        pfs = PathFS(fs)
        body = os.urandom(2 * PART_SIZE + 3 * MiB)
        fh = pfs.open(f"{MAIN}/big", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            for off in range(0, len(body), MiB):
                pfs.pwrite(fh, off, body[off : off + MiB])
            deadline = time.monotonic() + 30
            while calls.count("put_part") < 2:
                assert time.monotonic() < deadline, f"parts never went out before close: {calls}"
                time.sleep(0.01)
            assert "finish_parts" not in calls
        finally:
            pfs.close(fh)
        assert calls.count("put_part") == 3 and calls[-2:] == ["finish_parts", "copy"], calls
        assert "put_file" not in calls and "abort_parts" not in calls
        entry = s3_app.catalog.stat(REPO, "main", "big")
        assert entry.address == data_address(hashlib.sha256(body).hexdigest())
        assert entry.etag == parts_etag(hashlib.sha256(body).hexdigest(), len(body))  # past MD5_MAX: no MD5 computed
        assert pfs.read_file(f"{MAIN}/big") == body
        client = boto3.client("s3", endpoint_url=s3_endpoint, **CREDENTIALS)
        keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix=f"{tmp_path.name}/repo/data/").get("Contents", [])]
        empty = data_address(hashlib.sha256(b"").hexdigest())  # the file as created, before its first write
        assert sorted(keys) == sorted(f"{tmp_path.name}/repo/{a}" for a in (entry.address, empty)), keys  # no landing key
        assert not client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    finally:
        fs.close()


def test_on_s3_the_write_back_pipeline_uploads_small_files_from_a_child_process(
    s3_app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The journaled small files reach S3 through the adapter's upload process (block/putprocess.py), not
    through this process's client: the mount's request loop never waits for botocore's GIL (stop 54)."""
    in_process: list[str] = []
    real_put = S3Adapter.put
    monkeypatch.setattr(S3Adapter, "put", lambda self, url, data: (in_process.append(url), real_put(self, url, data))[1])
    fs = make_fs(s3_app, str(tmp_path), "wb", head_ttl=0.2, writeback=True, journal_dir=str(tmp_path / "journal"))
    try:
        pfs = PathFS(fs)
        files = {f"wb-f{i:02d}": b"%d " % i + os.urandom(900) for i in range(24)}
        for path, data in files.items():
            pfs.write_file(f"{MAIN}/{path}", data)
        assert fs.writeback is not None
        fs.writeback.drain((REPO, "main"))
        assert fs.writeback.report.counts["uploaded"] >= len(files)
        for path, data in files.items():
            entry = s3_app.catalog.stat(REPO, "main", path)
            assert entry.address == data_address(hashlib.sha256(data).hexdigest())
            assert s3_app.catalog.read(s3_app.catalog.repository(REPO), entry) == data
        stored = {url.rsplit("/", 1)[1] for url in in_process}
        assert not stored & {hashlib.sha256(d).hexdigest() for d in files.values()}, "a journaled file was PUT in-process"
        puts = s3_app.blockstore.adapter_for("s3://x/y")._puts  # type: ignore[attr-defined]
        assert puts is not None and puts.pid not in (None, os.getpid())
    finally:
        fs.close()


def test_a_save_that_fails_after_linking_still_freezes_the_file(tmp_path: Path) -> None:
    """A store that made the link and then failed (its directory fsync, say) left an object all the
    same: the next write must copy the temp file, never change that object."""
    dirty = DirtyFile(str(tmp_path), None, 0, in_place=True)
    stored = tmp_path / "object"
    try:
        dirty.pwrite(0, b"saved bytes")

        def put(path: str, digests: object, link: bool, finish: object) -> None:
            assert link
            os.link(path, stored)
            raise OSError("injected: the directory fsync failed")

        with pytest.raises(OSError, match="injected"):
            dirty.store(put)
        assert dirty.frozen
        dirty.pwrite(0, b"SAVED")
        assert stored.read_bytes() == b"saved bytes"
        assert dirty.pread(0, 100) == b"SAVED bytes"
    finally:
        dirty.discard()


def test_a_large_file_written_in_place_leaves_the_page_cache_as_it_is_written_back(tmp_path: Path) -> None:
    """Stop 51: the early write-back of an in-place temp file lets the kernel drop the pages it wrote back;
    what was written reads back the same, from the disk, and the pages written last stay."""
    if filesystem_of(str(tmp_path)) in ("tmpfs", "ramfs"):
        pytest.skip("a memory file system keeps its pages: nothing to drop")
    dirty = DirtyFile(str(tmp_path), None, 0, in_place=True)
    size = 3 * FLUSH_EVERY
    body = os.urandom(size)
    try:
        for offset in range(0, size, MiB):
            dirty.pwrite(offset, body[offset:offset + MiB])
        dirty._wait_flush()  # the write-backs started while writing are done (the first at FLUSH_EVERY bytes)
        first = resident_pages(dirty.fd, FLUSH_EVERY)
        assert first == 0, f"{first} pages of the first {FLUSH_EVERY} bytes stayed cached after their write-back"
        assert dirty.pread(0, size) == body
        assert resident_pages(dirty.fd, FLUSH_EVERY) == FLUSH_EVERY // mmap.PAGESIZE  # read back: cached again
    finally:
        dirty.discard()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, MEMORY_MAX + 4096), st.binary(min_size=1, max_size=5000)),
    st.tuples(st.just("truncate"), st.integers(0, MEMORY_MAX + 4096), st.just(b"")),
    st.tuples(st.just("write"), st.integers(0, 300), st.binary(min_size=1, max_size=300)),
), max_size=12), st.integers(0, 2000))
def test_a_file_held_in_memory_reads_and_saves_as_a_local_file_would(ops: list[tuple[str, int, bytes]], start: int) -> None:
    """``memory``: writes, truncations and reads of a DirtyFile held in memory (spilled to a temp file past
    MEMORY_MAX) give what a bytearray gives; its save, from memory or from the file, holds those bytes;
    a spill creates the only temp file, and a discard leaves none."""
    import tempfile

    model = bytearray(os.urandom(start))
    with tempfile.TemporaryDirectory() as spool:
        source = bytes(model)
        dirty = DirtyFile(spool, lambda: io.BytesIO(source), len(source), memory=True)
        try:
            peak = len(model)
            for op, offset, data in ops:
                peak = max(peak, offset + len(data))
                if op == "write":
                    dirty.pwrite(offset, data)
                    if offset > len(model):
                        model.extend(bytes(offset - len(model)))
                    model[offset : offset + len(data)] = data
                else:
                    dirty.truncate(offset)
                    del model[offset:]
                    model.extend(bytes(offset - len(model)))
                assert dirty.size == len(model)
                assert dirty.pread(0, len(model) + 10) == bytes(model)
                assert dirty.in_memory == (not os.listdir(spool)), "a temp file exists exactly once spilled"
            if dirty.in_memory:
                _version, content, digests = dirty.snapshot(hold=False)
                assert content == bytes(model)
                assert digests == (len(model), hashlib.sha256(model).hexdigest(), hashlib.md5(model).hexdigest())
            else:
                assert peak > MEMORY_MAX  # spilled only when it had to be
                _version, stored = dirty.store(lambda path, _digests, _link, _finish: open(path, "rb").read())
                assert stored == bytes(model)
            with dirty.reopen() as f:
                assert f.read() == bytes(model)
        finally:
            dirty.discard()
        assert os.listdir(spool) == []


def test_a_small_files_close_syncs_nothing_and_its_fsync_makes_it_durable(pfs: PathFS, app: App,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Without write-back a small file's close stores its object unsynced (durable within a second against
    power loss, at once against a crash of the mount); ``fsync(2)`` syncs it before it returns."""
    from lakemount.block import local

    pfs.write_file(f"{MAIN}/empty", b"")  # the mount stores the empty object once, durable at once, as before
    monkeypatch.setattr(local, "_lazy", local._LazySync())
    monkeypatch.setattr(local, "SYNC_AFTER", 60.0)
    syncs: list[str] = []
    real_syncfs, real_fsync = local._syncfs, os.fsync
    assert real_syncfs is not None

    def syncfs(directory: str) -> None:
        syncs.append("syncfs")
        real_syncfs(directory)

    def fsync(fd: int) -> None:
        syncs.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(local, "_syncfs", syncfs)
    monkeypatch.setattr(local.os, "fsync", fsync)
    pfs.write_file(f"{MAIN}/closed", b"closed, not synced")
    entry = app.catalog.get_optional(REPO, "main", "closed")
    assert entry is not None and app.catalog.read(app.catalog.repository(REPO), entry) == b"closed, not synced"
    assert syncs == [], "a close stores and stages without a sync"
    assert local._lazy.stored == 1 and local._lazy.covered == 0
    with pfs.opened(f"{MAIN}/synced", os.O_WRONLY | os.O_CREAT) as fh:
        pfs.pwrite(fh, 0, b"synced")
        pfs.fsync(fh)
        assert syncs == ["syncfs"], "fsync(2) syncs what this mount stored unsynced"
        assert local._lazy.covered == local._lazy.stored == 2
