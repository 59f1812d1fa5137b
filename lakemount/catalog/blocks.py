"""Data objects read through the node's caches, in fixed-size blocks: what every front end's reads share.

A data object lakemount stored is content-addressed (``data/<aa>/<sha256>``)
and never changes, so its bytes may be kept forever under a key naming the
object and the block (:func:`block_key`, the same key the mount's reader
uses, so a block the mount fetched serves the gateway and the API of the same
node, and the other way round).  ``BLOCK_SIZE`` blocks go to the RAM tier
and, when the object lives in a remote store, to the disk tier too (a
``local://`` object already is a local file: a second copy on the same disk
would only cost writes); the disk tier verifies every file it reads, so a
damaged cache file is a miss that is fetched again, never wrong bytes.
Concurrent misses of one block share one fetch.

:meth:`CachedBlocks.read` serves small reads and ranges (whole blocks are
fetched and kept); :meth:`CachedBlocks.chunks` streams a large read block by
block, fetching the missing blocks of a run from one stream of the object
(one GET for a cold object, not one per block: object stores charge per
request), so no more than a block is held at a time beyond what the caches
keep.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import BinaryIO, Final, Protocol

from lakemount.block import layout
from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.cache.singleflight import SingleFlight
from lakemount.errors import ObjectNotFound
from lakemount.graveler.ports import BlockAdapter

BLOCK_SIZE: Final = 1 << 20


def block_key(url: str, etag: str, size: int, index: int) -> str:
    """The cache key of block ``index`` of the object at ``url`` with this ETag and size."""
    return f"blk1:{url}|{etag}|{size}|{BLOCK_SIZE}|{index}"


def content_addressed(address: str) -> bool:
    """Whether an entry's address names bytes that never change: lakemount's own ``data/<aa>/<sha256>``.

    Not an imported object (someone else's file, checked at every read) nor
    one linked at an address a client uploaded to (``_lakefs/links/``).
    """
    return layout.data_sha(address) is not None


def is_remote(url: str) -> bool:
    """Whether blocks of ``url`` are worth a copy in the disk tier (the object is not a local file)."""
    return not url.startswith("local://")


class BlockSource(Protocol):
    """Reads of stored objects by URL: all a front end's own block cache (the mount's reader) needs of the store."""

    def get(self, url: str) -> bytes: ...

    def get_range(self, url: str, start: int, length: int) -> bytes: ...

    def open(self, url: str) -> BinaryIO: ...


class ReadOnlyBlocks:
    """The :class:`BlockSource` the catalog hands out (``Catalog.block_source``): the block store's reads and
    nothing else, so a front end that caches blocks itself cannot write, list or delete around the catalog.

    Raises what the adapter raises (``ObjectNotFound``, ``Unavailable``).
    """

    __slots__ = ("_adapter",)

    def __init__(self, adapter: BlockAdapter) -> None:
        self._adapter = adapter

    def get(self, url: str) -> bytes:
        return self._adapter.get(url)

    def get_range(self, url: str, start: int, length: int) -> bytes:
        return self._adapter.get_range(url, start, length)

    def open(self, url: str) -> BinaryIO:
        return self._adapter.open(url)


class ExportBlocks(ReadOnlyBlocks):
    """What an export needs of the block store (``Catalog.export_blocks``): the reads of a
    :class:`ReadOnlyBlocks`, and writing and deleting at the destination's URLs; no listing.

    Raises what the adapter raises (``ObjectNotFound``, ``Unavailable``).
    """

    __slots__ = ()

    def put(self, url: str, data: bytes) -> None:
        self._adapter.put(url, data)

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        self._adapter.put_file(url, path, link=link)

    def delete(self, url: str) -> None:
        self._adapter.delete(url)


class CachedBlocks:
    """Block reads of immutable objects through a RAM tier and an optional disk tier; thread-safe.

    Raises what the adapter raises (``ObjectNotFound``, ``Unavailable``), and
    ``ObjectNotFound`` when the stored object is shorter than its entry says.
    """

    def __init__(self, adapter: BlockAdapter, ram: RamCache, disk: DiskCache | None) -> None:
        self.adapter = adapter
        self.ram = ram
        self.disk = disk
        self._flight: SingleFlight[bytes] = SingleFlight()

    def cached(self, key: str, remote: bool) -> bytes | None:
        """The block under ``key`` from RAM, or from disk (then kept in RAM); None if neither holds it."""
        data = self.ram.get(key)
        if data is not None or self.disk is None or not remote:
            return data
        data = self.disk.get(key)
        if data is not None:
            self.ram.put(key, data)
        return data

    def _keep(self, key: str, data: bytes, remote: bool) -> None:
        self.ram.put(key, data)
        if self.disk is not None and remote:
            self.disk.put(key, data)

    def block(self, url: str, etag: str, size: int, index: int) -> bytes:
        """Block ``index`` of the object (shorter at its end), from the caches or fetched and kept."""
        key = block_key(url, etag, size, index)
        remote = is_remote(url)
        data = self.cached(key, remote)
        if data is not None:
            return data

        def fetch() -> bytes:
            # Re-check: the caller that fetched before us may just have finished.
            again = self.cached(key, remote)
            if again is not None:
                return again
            start = index * BLOCK_SIZE
            length = min(BLOCK_SIZE, size - start)
            loaded = self.adapter.get(url) if start == 0 and length == size else self.adapter.get_range(url, start, length)
            if len(loaded) != length:
                raise ObjectNotFound("object data is shorter than its entry")
            self._keep(key, loaded, remote)
            return loaded

        return self._flight.do(key, fetch)

    def read(self, url: str, etag: str, size: int, start: int, length: int) -> bytes:
        """Bytes [start, start+length) of the object (fewer at its end)."""
        end = min(size, start + length)
        if start >= end:
            return b""
        first, last = start // BLOCK_SIZE, (end - 1) // BLOCK_SIZE
        if first == last:
            data = self.block(url, etag, size, first)
            base = first * BLOCK_SIZE
            return data if (start - base, end - base) == (0, len(data)) else data[start - base : end - base]
        return b"".join(self.chunks(url, etag, size, start, end - start))

    def chunks(self, url: str, etag: str, size: int, start: int, length: int) -> Iterator[bytes]:
        """Bytes [start, start+length) of the object as at most one block per chunk, fetched as they are needed.

        Missing blocks are read from one stream of the object that stays open
        while the blocks it reaches are missing (it is repositioned, or
        reopened, after a run of cached ones), and each is kept in the caches.
        """
        end = min(size, start + length)
        if start >= end:
            return
        remote = is_remote(url)
        stream: BinaryIO | None = None
        at = -1  # the block the open stream is positioned at
        try:
            for index in range(start // BLOCK_SIZE, (end - 1) // BLOCK_SIZE + 1):
                key = block_key(url, etag, size, index)
                data = self.cached(key, remote)
                if data is None:
                    want = min(BLOCK_SIZE, size - index * BLOCK_SIZE)
                    if stream is None:
                        stream = self.adapter.open(url)
                        at = 0
                    if at != index:
                        stream.seek(index * BLOCK_SIZE)
                    data = _read_exactly(stream, want)
                    at = index + 1
                    self._keep(key, data, remote)
                base = index * BLOCK_SIZE
                lo, hi = max(start, base) - base, min(end, base + len(data)) - base
                yield data if (lo, hi) == (0, len(data)) else data[lo:hi]
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    parts = []
    left = n
    while left > 0:
        piece = stream.read(left)
        if not piece:
            raise ObjectNotFound("object data is shorter than its entry")
        parts.append(piece)
        left -= len(piece)
    return parts[0] if len(parts) == 1 else b"".join(parts)
