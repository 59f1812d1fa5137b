"""The block adapter conformance suite: the same tests against local, memory and S3 (moto).

Every behaviour graveler relies on is pinned here, so that a new backend is
correct when this file passes against it.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakemount.block.local import LocalAdapter
from lakemount.block.memory import MemoryAdapter
from lakemount.errors import InvalidArgument, ObjectNotFound
from lakemount.graveler.ports import BlockAdapter

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Store:
    """An adapter under test and a namespace URL (ending in "/") no other test uses."""

    name: str
    adapter: BlockAdapter
    base: str

    def url(self, key: str) -> str:
        return self.base + key


@pytest.fixture(params=["local", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "local":
        return Store("local", LocalAdapter(), f"local://{tmp_path}/ns/")
    if request.param == "memory":
        return Store("memory", MemoryAdapter(), "mem://test/ns/")
    bucket = request.getfixturevalue("s3_bucket")
    return Store("s3", request.getfixturevalue("s3_adapter"), f"s3://{bucket}/{uuid.uuid4().hex}/")


def test_put_get_roundtrip(store: Store) -> None:
    store.adapter.put(store.url("a/b.bin"), b"hello\x00world")
    assert store.adapter.get(store.url("a/b.bin")) == b"hello\x00world"


def test_empty_object(store: Store) -> None:
    url = store.url("empty")
    store.adapter.put(url, b"")
    assert store.adapter.get(url) == b""
    assert store.adapter.stat(url).size == 0
    assert store.adapter.get_range(url, 0, 10) == b""
    assert store.adapter.exists(url)


def test_overwrite_replaces_whole_object(store: Store) -> None:
    url = store.url("k")
    store.adapter.put(url, b"x" * 1000)
    store.adapter.put(url, b"short")
    assert store.adapter.get(url) == b"short"
    assert store.adapter.stat(url).size == 5


def test_get_range(store: Store) -> None:
    url = store.url("range")
    data = bytes(range(256)) * 4
    store.adapter.put(url, data)
    assert store.adapter.get_range(url, 0, 10) == data[:10]
    assert store.adapter.get_range(url, 100, 50) == data[100:150]
    assert store.adapter.get_range(url, 1000, 100) == data[1000:]  # fewer bytes at the end
    assert store.adapter.get_range(url, 1023, 1) == data[1023:]
    assert store.adapter.get_range(url, 1024, 10) == b""  # starts exactly at the end
    assert store.adapter.get_range(url, 5000, 10) == b""  # starts past the end
    assert store.adapter.get_range(url, 10, 0) == b""


def test_get_range_rejects_negative(store: Store) -> None:
    url = store.url("neg")
    store.adapter.put(url, b"abc")
    with pytest.raises(InvalidArgument):
        store.adapter.get_range(url, -1, 2)
    with pytest.raises(InvalidArgument):
        store.adapter.get_range(url, 0, -2)


def test_open_reads_and_seeks(store: Store) -> None:
    url = store.url("stream")
    data = os.urandom(3 * MiB + 17)
    store.adapter.put(url, data)
    with store.adapter.open(url) as f:
        assert f.read(10) == data[:10]
        if f.seekable():
            f.seek(2 * MiB)
            assert f.read(100) == data[2 * MiB : 2 * MiB + 100]
            f.seek(-7, io.SEEK_END)
            assert f.read() == data[-7:]
            f.seek(5)
            assert f.tell() == 5
            assert f.read() == data[5:]
        assert f.read() == b""


def test_stat(store: Store) -> None:
    url = store.url("s/t")
    before = time.time()
    store.adapter.put(url, b"12345")
    info = store.adapter.stat(url)
    assert info.url == url
    assert info.size == 5
    # Backends report mtime at different precisions (S3: seconds); allow slack.
    assert before - 5 <= info.mtime <= time.time() + 5
    assert isinstance(info.etag, str)
    assert '"' not in info.etag
    if store.name in ("s3", "memory"):
        assert info.etag == hashlib.md5(b"12345").hexdigest()


def test_exists_and_delete(store: Store) -> None:
    url = store.url("d/e")
    assert not store.adapter.exists(url)
    store.adapter.put(url, b"x")
    assert store.adapter.exists(url)
    store.adapter.delete(url)
    assert not store.adapter.exists(url)
    with pytest.raises(ObjectNotFound):
        store.adapter.get(url)
    store.adapter.delete(url)  # deleting a missing object is not an error
    store.adapter.delete(store.url("never/written"))


def test_missing_object_errors(store: Store) -> None:
    url = store.url("missing/object")
    with pytest.raises(ObjectNotFound):
        store.adapter.get(url)
    with pytest.raises(ObjectNotFound):
        store.adapter.get_range(url, 0, 10)
    with pytest.raises(ObjectNotFound):
        store.adapter.get_range(url, 0, 0)
    with pytest.raises(ObjectNotFound):
        store.adapter.open(url)
    with pytest.raises(ObjectNotFound):
        store.adapter.stat(url)
    assert not store.adapter.exists(url)


def test_prefix_is_not_an_object(store: Store) -> None:
    store.adapter.put(store.url("dir/file"), b"x")
    with pytest.raises(ObjectNotFound):
        store.adapter.get(store.url("dir"))
    with pytest.raises(ObjectNotFound):
        store.adapter.stat(store.url("dir"))
    assert not store.adapter.exists(store.url("dir"))


def test_list_order_and_prefixes(store: Store) -> None:
    # "-" < "/" < "0": a naive per-directory walk gets this order wrong.
    keys = ["x-1", "x/1", "x/2/3", "x/2/4", "x0", "y", "z/deep/er/still"]
    for i, key in enumerate(reversed(keys)):
        store.adapter.put(store.url(key), b"v" * i)
    listed = list(store.adapter.list(store.base))
    assert [i.url for i in listed] == [store.url(k) for k in keys]
    sizes = {i.url: i.size for i in listed}
    assert sizes[store.url("x-1")] == len(keys) - 1
    assert sizes[store.url("z/deep/er/still")] == 0

    def urls(prefix: str) -> list[str]:
        return [i.url for i in store.adapter.list(store.url(prefix))]

    assert urls("x") == [store.url(k) for k in ["x-1", "x/1", "x/2/3", "x/2/4", "x0"]]
    assert urls("x/") == [store.url(k) for k in ["x/1", "x/2/3", "x/2/4"]]
    assert urls("x/2") == [store.url(k) for k in ["x/2/3", "x/2/4"]]
    assert urls("x/2/3") == [store.url("x/2/3")]
    assert urls("z/de") == [store.url("z/deep/er/still")]
    assert urls("nothing") == []
    assert urls("nothing/") == []


def test_list_returned_urls_roundtrip(store: Store) -> None:
    key = "dir with space/ünïcødé+%20.txt"
    store.adapter.put(store.url(key), b"payload")
    (info,) = list(store.adapter.list(store.base))
    assert info.url == store.url(key)
    assert store.adapter.get(info.url) == b"payload"


def test_overwrite_is_atomic_for_readers(store: Store) -> None:
    url = store.url("atomic")
    a, b = b"A" * MiB, b"B" * MiB
    store.adapter.put(url, a)
    stop = threading.Event()
    seen: list[bytes] = []
    reads: list[tuple[float, float]] = []
    errors: list[BaseException] = []  # a reader that died must fail the test, not end it quietly

    def reader() -> None:
        try:
            while not stop.is_set():
                t = time.monotonic()
                seen.append(store.adapter.get(url))
                reads.append((t, time.monotonic()))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    overlapped = i = 0  # writes that a read overlapped
    deadline = time.monotonic() + 30
    try:
        while i < 12 or (overlapped < 3 and time.monotonic() < deadline and not errors and thread.is_alive()):
            k, t0 = len(reads), time.monotonic()
            store.adapter.put(url, b if i % 2 == 0 else a)
            t1 = time.monotonic()
            overlapped += any(r0 < t1 and t0 < r1 for r0, r1 in reads[k:])  # reads are appended as they end
            i += 1
    finally:
        stop.set()
        thread.join()
    if errors:
        raise errors[0]
    assert all(s in (a, b) for s in seen)
    assert overlapped >= 3, f"only {overlapped} of {i} writes overlapped a read"


def test_put_file_large(store: Store, tmp_path: Path) -> None:
    src = tmp_path / "big.bin"
    data = os.urandom(20 * MiB + 5)  # above S3Adapter's multipart threshold
    src.write_bytes(data)
    url = store.url("big/object")
    store.adapter.put_file(url, str(src))
    assert src.read_bytes() == data  # the source is left in place
    src.write_bytes(b"changed later")  # and later changes do not reach the store
    info = store.adapter.stat(url)
    assert info.size == len(data)
    assert store.adapter.get_range(url, len(data) - 10, 100) == data[-10:]
    assert hashlib.sha256(store.adapter.get(url)).digest() == hashlib.sha256(data).digest()
    if store.name == "s3":
        assert "-" in info.etag  # it went up as a multipart upload


def test_put_file_missing_source(store: Store, tmp_path: Path) -> None:
    with pytest.raises(ObjectNotFound):
        store.adapter.put_file(store.url("x"), str(tmp_path / "does-not-exist"))
    assert not store.adapter.exists(store.url("x"))


def test_concurrent_puts(store: Store) -> None:
    def work(i: int) -> None:
        store.adapter.put(store.url(f"c/{i:03d}"), str(i).encode() * 100)
        store.adapter.put(store.url("c/shared"), str(i).encode() * 100)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(32)))
    listed = [i.url for i in store.adapter.list(store.url("c/"))]
    assert listed == sorted([store.url(f"c/{i:03d}") for i in range(32)] + [store.url("c/shared")])
    for i in range(32):
        assert store.adapter.get(store.url(f"c/{i:03d}")) == str(i).encode() * 100
    shared = store.adapter.get(store.url("c/shared"))
    assert shared in {str(i).encode() * 100 for i in range(32)}


def test_wrong_scheme_is_rejected(store: Store) -> None:
    other = "mem://x/y" if store.name != "memory" else "local:///tmp/y"
    with pytest.raises(InvalidArgument):
        store.adapter.get(other)
    with pytest.raises(InvalidArgument):
        store.adapter.put(other, b"x")



def test_touch_refreshes_mtime_and_keeps_data(store: Store) -> None:
    url = store.url("touch/me")
    store.adapter.put(url, b"payload")
    before = store.adapter.stat(url).mtime
    time.sleep(1.1)  # S3 LastModified has one-second resolution
    store.adapter.touch(url)
    assert store.adapter.stat(url).mtime > before
    assert store.adapter.get(url) == b"payload"
    with pytest.raises(ObjectNotFound):
        store.adapter.touch(store.url("touch/missing"))


def test_copy_is_a_new_object_and_leaves_the_source(store: Store) -> None:
    src, dst = store.url("copy/src"), store.url("copy/deeper/dst")
    store.adapter.put(src, b"copied bytes")
    store.adapter.put(dst, b"to be replaced")
    before = store.adapter.stat(src).mtime
    time.sleep(1.1)  # S3 LastModified has one-second resolution
    store.adapter.copy(src, dst)
    assert store.adapter.get(dst) == b"copied bytes"
    assert store.adapter.get(src) == b"copied bytes"
    assert store.adapter.stat(dst).mtime > before  # what GC's trash relies on: the copy's time is its own
    assert store.adapter.stat(src).mtime == before
    with pytest.raises(ObjectNotFound):
        store.adapter.copy(store.url("copy/missing"), store.url("copy/x"))
    assert not store.adapter.exists(store.url("copy/x"))
