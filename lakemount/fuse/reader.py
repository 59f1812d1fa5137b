"""Reading data objects for the mount: fixed-size blocks through the caches, with read-ahead.

Data objects are immutable (content-addressed), so their bytes can be cached
forever under a key naming the object and the block: ``BLOCK_SIZE`` blocks go
to the RAM tier and, when the object lives in a remote store, to the disk
tier as well (a ``local://`` object already is a local file: a second copy on
the same disk would only cost writes).  Concurrent misses on one block share
one fetch.  A handle reading sequentially gets the next blocks fetched in the
background, a window that doubles up to ``MAX_READAHEAD`` bytes; random reads
fetch only what they touch.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.cache.singleflight import SingleFlight
from lakemount.fuse.stats import Metrics
from lakemount.graveler.ports import BlockAdapter

BLOCK_SIZE: Final = 1 << 20
MAX_READAHEAD: Final = 16 << 20
READAHEAD_THREADS: Final = 4


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Which object to read: its physical URL, size and ETag (the ETag keys the cache too)."""

    url: str
    size: int
    etag: str


@dataclass(slots=True)
class ReadState:
    """Per-handle sequential-access detector."""

    next_offset: int = -1
    window: int = 0
    prefetched_to: int = 0  # block index up to which read-ahead was scheduled (exclusive)


class BlockReader:
    """Cached block reads of immutable objects; thread-safe."""

    def __init__(self, adapter: BlockAdapter, ram: RamCache, disk: DiskCache | None, metrics: Metrics) -> None:
        self.adapter = adapter
        self.ram = ram
        self.disk = disk
        self.metrics = metrics
        self._flight: SingleFlight[bytes] = SingleFlight()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @staticmethod
    def _key(obj: ObjectRef, index: int) -> str:
        return f"blk1:{obj.url}|{obj.etag}|{obj.size}|{BLOCK_SIZE}|{index}"

    def _load(self, obj: ObjectRef, index: int) -> bytes:
        start = index * BLOCK_SIZE
        length = min(BLOCK_SIZE, obj.size - start)
        if length <= 0:
            return b""
        remote = not obj.url.startswith("local://")
        key = self._key(obj, index)

        def fetch() -> bytes:
            # A read-ahead scheduled earlier may run after the foreground read loaded the block.
            if key in self.ram:
                cached = self.ram.get(key)
                if cached is not None:
                    return cached
            if self.disk is not None and remote:
                cached = self.disk.get(key)
                if cached is not None:
                    self.metrics.add("block_hits_disk")
                    self.ram.put(key, cached)
                    return cached
            data = self.adapter.get(obj.url) if start == 0 and length == obj.size else self.adapter.get_range(obj.url, start, length)
            self.metrics.add("block_misses")
            self.metrics.add("fetched_bytes", len(data))
            self.ram.put(key, data)
            if self.disk is not None and remote:
                self.disk.put(key, data)
            return data

        return self._flight.do(key, fetch)

    def block(self, obj: ObjectRef, index: int) -> bytes:
        """Block ``index`` of ``obj``; raises what the adapter raises (``ObjectNotFound``, ``Unavailable``)."""
        key = self._key(obj, index)
        data = self.ram.get(key) if key in self.ram else None
        if data is not None:
            self.metrics.add("block_hits_ram")
            return data
        return self._load(obj, index)

    def cached(self, obj: ObjectRef, offset: int, size: int) -> bytes | None:
        """The bytes if every block they need is in RAM, else None (never blocks on I/O)."""
        end = min(obj.size, offset + size)
        if offset >= end:
            return b""
        first, last = offset // BLOCK_SIZE, (end - 1) // BLOCK_SIZE
        parts = []
        for index in range(first, last + 1):
            key = self._key(obj, index)
            if key not in self.ram:
                return None
            data = self.ram.get(key)
            if data is None:
                return None
            parts.append(data)
        self.metrics.add("block_hits_ram", len(parts))
        return _slice(parts, first, offset, end)

    def read(self, obj: ObjectRef, offset: int, size: int) -> bytes:
        """Bytes [offset, offset+size) of ``obj`` (fewer at its end)."""
        end = min(obj.size, offset + size)
        if offset >= end:
            return b""
        first, last = offset // BLOCK_SIZE, (end - 1) // BLOCK_SIZE
        parts = [self.block(obj, i) for i in range(first, last + 1)]
        return _slice(parts, first, offset, end)

    def advise(self, obj: ObjectRef, state: ReadState, offset: int, size: int) -> None:
        """Note a read by one handle; if it continues a sequential run, fetch ahead in the background."""
        sequential = offset == state.next_offset or (offset == 0 and state.next_offset < 0)
        state.next_offset = offset + size
        if not sequential or obj.size <= BLOCK_SIZE:
            state.window = 0
            return
        state.window = min(MAX_READAHEAD, max(2 * BLOCK_SIZE, state.window * 2))
        start_block = (offset + size) // BLOCK_SIZE
        end_block = min((offset + size + state.window - 1) // BLOCK_SIZE, (obj.size - 1) // BLOCK_SIZE)
        begin = max(start_block, state.prefetched_to)
        if begin > end_block:
            return
        state.prefetched_to = end_block + 1
        pool = self._executor()
        for index in range(begin, end_block + 1):
            if self._key(obj, index) not in self.ram:
                self.metrics.add("readahead_blocks")
                pool.submit(self._prefetch, obj, index)

    def _prefetch(self, obj: ObjectRef, index: int) -> None:
        try:
            self._load(obj, index)
        except Exception:  # read-ahead is a hint: the foreground read reports the failure
            self.metrics.add("readahead_errors")

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(READAHEAD_THREADS, thread_name_prefix="lakemount-readahead")
            return self._pool

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _slice(parts: list[bytes], first: int, offset: int, end: int) -> bytes:
    base = first * BLOCK_SIZE
    if len(parts) == 1:
        data = parts[0]
        return data[offset - base : end - base] if (offset - base, end - base) != (0, len(data)) else data
    joined = b"".join(parts)
    return joined[offset - base : end - base]
