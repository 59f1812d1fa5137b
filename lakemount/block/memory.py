"""``MemoryAdapter``: a dict-backed block store for ``mem://`` URLs.

The fake every other backend is measured against: tests and the model-based
suites use it where a real store would only add latency.  Thread-safe; each
instance is its own store, nothing is shared between instances.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from lakemount.block.ranges import check_range
from lakemount.block.urls import split_url
from lakemount.errors import InvalidArgument, ObjectNotFound
from lakemount.graveler.ports import ObjectInfo

SCHEME = "mem"


@dataclass(frozen=True, slots=True)
class _Stored:
    data: bytes
    mtime: float
    etag: str


class MemoryAdapter:
    """A ``BlockAdapter`` keeping objects in a dict, for ``mem://name/key`` URLs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, _Stored] = {}

    @staticmethod
    def _check(url: str) -> str:
        scheme, rest = split_url(url)
        if scheme != SCHEME or not rest:
            raise InvalidArgument(f"not a mem:// URL: {url!r}")
        return url

    def _lookup(self, url: str) -> _Stored:
        self._check(url)
        with self._lock:
            stored = self._objects.get(url)
        if stored is None:
            raise ObjectNotFound(url)
        return stored

    def presign(self, url: str, method: str) -> None:
        """No presigned URLs: objects in this process's memory have no URL a client could use."""
        return None

    def put(self, url: str, data: bytes) -> None:
        self._check(url)
        # md5 gives the same ETag S3 reports for a single-part upload, so code
        # comparing ETags behaves the same on the fake.
        stored = _Stored(bytes(data), time.time(), hashlib.md5(data, usedforsecurity=False).hexdigest())
        with self._lock:
            self._objects[url] = stored

    def touch(self, url: str) -> None:
        stored = self._lookup(url)
        with self._lock:
            self._objects[url] = _Stored(stored.data, time.time(), stored.etag)

    def copy(self, src_url: str, dst_url: str) -> None:
        stored = self._lookup(src_url)
        self._check(dst_url)
        with self._lock:
            self._objects[dst_url] = _Stored(stored.data, time.time(), stored.etag)

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        self._check(url)
        buf = io.BytesIO()
        try:
            with open(path, "rb") as src:
                shutil.copyfileobj(src, buf)
        except FileNotFoundError:
            raise ObjectNotFound(f"local file {path}") from None
        self.put(url, buf.getvalue())

    def get(self, url: str) -> bytes:
        return self._lookup(url).data

    def get_range(self, url: str, start: int, length: int) -> bytes:
        check_range(start, length)
        return self._lookup(url).data[start : start + length]

    def open(self, url: str) -> BinaryIO:
        return io.BytesIO(self._lookup(url).data)

    def stat(self, url: str) -> ObjectInfo:
        stored = self._lookup(url)
        return ObjectInfo(url=url, size=len(stored.data), mtime=stored.mtime, etag=stored.etag)

    def exists(self, url: str) -> bool:
        self._check(url)
        with self._lock:
            return url in self._objects

    def delete(self, url: str) -> None:
        self._check(url)
        with self._lock:
            self._objects.pop(url, None)

    def list(self, prefix_url: str) -> Iterator[ObjectInfo]:
        scheme, _ = split_url(prefix_url)
        if scheme != SCHEME:
            raise InvalidArgument(f"not a mem:// URL: {prefix_url!r}")
        # Snapshot under the lock so concurrent writers never break iteration.
        with self._lock:
            matches = sorted(
                (
                    ObjectInfo(url=u, size=len(s.data), mtime=s.mtime, etag=s.etag)
                    for u, s in self._objects.items()
                    if u.startswith(prefix_url)
                ),
                key=lambda info: info.url,
            )
        return iter(matches)
