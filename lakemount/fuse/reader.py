"""Reading data objects for the mount: fixed-size blocks through the caches, with read-ahead.

Data objects are immutable (content-addressed), so their bytes can be cached
forever under a key naming the object and the block (``catalog/blocks.py``'s,
which the gateway's and the API's reads share): ``BLOCK_SIZE`` blocks go
to the RAM tier and, when the object lives in a remote store, to the disk
tier as well (a ``local://`` object already is a local file: a second copy on
the same disk would only cost writes).  Concurrent misses on one block share
one fetch.  A handle reading sequentially gets the next blocks fetched in the
background, a window that doubles up to ``MAX_READAHEAD`` bytes, from one
stream per handle (one GET for a whole sequential read rather than one per
block: object stores charge per request, and some servers copy the whole
object for every ranged GET); random reads fetch only what they touch.

Small files get the same treatment one level up: when a directory's files are
opened one after another in listing order (a training loop, ``cat *``, ``cp
-r``), the core hands the next ones to :meth:`BlockReader.prefetch`, which
loads whole small objects into the caches on a pool of ``PREFETCH_THREADS``,
so the next open finds its bytes in RAM instead of waiting for a GET.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import BinaryIO, Final

from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.cache.singleflight import SingleFlight
from lakemount.catalog.blocks import BLOCK_SIZE, BlockSource, block_key
from lakemount.fuse.stats import Metrics

MAX_READAHEAD: Final = 32 << 20
SEQUENTIAL_SLACK: Final = 4 << 20  # reordering among a handle's parallel reads
READAHEAD_THREADS: Final = 4
PREFETCH_THREADS: Final = 8  # whole small objects fetched ahead of a sequential scan of a directory
MAX_PREFETCH_QUEUED: Final = 64
MAX_PARKED: Final = 8  # open streams kept for read-ahead to pick up
PENDING_WAIT: Final = 120.0  # seconds a foreground read waits for a block being streamed


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Which object to read: its physical URL, size and ETag (the ETag keys the cache too)."""

    url: str
    size: int
    etag: str


@dataclass(slots=True)
class ReadState:
    """Per-handle sequential-access detector and its read-ahead stream."""

    next_offset: int = -1
    window: int = 0
    prefetched_to: int = 0  # block index up to which read-ahead was scheduled (exclusive)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stream: BinaryIO | None = None
    stream_block: int = -1  # the block the stream is positioned at
    streaming: bool = False  # a pool task is reading the stream


class BlockReader:
    """Cached block reads of immutable objects; thread-safe."""

    def __init__(self, adapter: BlockSource, ram: RamCache, disk: DiskCache | None, metrics: Metrics) -> None:
        self.adapter = adapter
        self.ram = ram
        self.disk = disk
        self.metrics = metrics
        self._flight: SingleFlight[bytes] = SingleFlight()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._pending: dict[str, Future[bytes]] = {}  # blocks a read-ahead stream will deliver
        self._pending_lock = threading.Lock()
        # Streams positioned after block 0 of an object, waiting for a read-ahead to continue them.
        self._parked: OrderedDict[str, tuple[ObjectRef, BinaryIO]] = OrderedDict()
        self._prefetch_pool: ThreadPoolExecutor | None = None
        self._prefetching = 0  # objects queued or being fetched by ``prefetch``

    @staticmethod
    def _key(obj: ObjectRef, index: int) -> str:
        return block_key(obj.url, obj.etag, obj.size, index)

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
            pending = self._pending.get(key)
            if pending is not None:
                with contextlib.suppress(Exception):  # a failed stream: fetch the block alone
                    return pending.result(PENDING_WAIT)
            else:
                # A stream delivers a block to RAM (and disk) before it drops the
                # claim: if it was delivered while we looked elsewhere, it is in RAM now.
                cached = self.ram.get(key) if key in self.ram else None
                if cached is not None:
                    return cached
            if index == 0 and remote and obj.size > BLOCK_SIZE:
                data = self._first_block(obj, length)
            elif start == 0 and length == obj.size:
                data = self.adapter.get(obj.url)
            else:
                data = self.adapter.get_range(obj.url, start, length)
            self.metrics.add("block_misses")
            self.metrics.add("fetched_bytes", len(data))
            self.ram.put(key, data)
            if self.disk is not None and remote:
                self.disk.put(key, data)
            return data

        return self._flight.do(key, fetch)

    def _first_block(self, obj: ObjectRef, length: int) -> bytes:
        """Block 0 of a multi-block object, from a stream left open for the read-ahead that usually follows."""
        stream = self.adapter.open(obj.url)
        try:
            data = stream.read(length)
            if len(data) != length:
                raise EOFError(obj.url)
        except BaseException:
            stream.close()
            raise
        with self._pending_lock:
            self._parked[obj.url] = (obj, stream)
            while len(self._parked) > MAX_PARKED:
                _, (_, oldest) = self._parked.popitem(last=False)
                with contextlib.suppress(Exception):
                    oldest.close()
        return data

    def _unpark(self, obj: ObjectRef, index: int) -> BinaryIO | None:
        """The stream left at block ``index`` of ``obj`` by a first-block read, if any."""
        if index != 1:
            return None
        with self._pending_lock:
            parked = self._parked.get(obj.url)
            if parked is None or parked[0] != obj:
                return None
            del self._parked[obj.url]
        return parked[1]

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

    def read(self, obj: ObjectRef, offset: int, size: int, state: ReadState | None = None) -> bytes:
        """Bytes [offset, offset+size) of ``obj`` (fewer at its end), read by the handle whose ``state`` this is."""
        end = min(obj.size, offset + size)
        if offset >= end:
            return b""
        first, last = offset // BLOCK_SIZE, (end - 1) // BLOCK_SIZE
        if state is not None:
            self._join_stream(obj, state, last)
        parts = [self.block(obj, i) for i in range(first, last + 1)]
        return _slice(parts, first, offset, end)

    def _join_stream(self, obj: ObjectRef, state: ReadState, upto: int) -> None:
        """Claim for the handle's read-ahead stream the blocks up to ``upto`` it has not reached, if they lie close ahead.

        The kernel keeps several reads of a file in flight, and its own
        read-ahead runs ahead of the reader: a read may reach past what the
        stream was asked for before ``advise`` extends it.  Such a block is
        better waited for (the stream gets there within MAX_READAHEAD) than
        fetched alone: object stores charge per request, and some copy the
        whole object for every ranged GET.
        """
        with state.lock:
            if state.stream_block < 0 or upto < state.prefetched_to:
                return  # no stream under way, or the block is claimed already
            if (upto - state.stream_block) * BLOCK_SIZE > MAX_READAHEAD:
                return  # too far ahead: a random read
            self._claim(obj, state, state.prefetched_to, upto)
            if state.streaming:
                return
            state.streaming = True
        self._executor().submit(self._stream, obj, state)

    def _claim(self, obj: ObjectRef, state: ReadState, begin: int, end_block: int) -> None:
        """Blocks ``begin..end_block`` are the stream's to deliver (caller holds ``state.lock``)."""
        state.prefetched_to = max(state.prefetched_to, end_block + 1)
        with self._pending_lock:
            for index in range(begin, end_block + 1):
                key = self._key(obj, index)
                if key not in self._pending and key not in self.ram:
                    self._pending[key] = Future()
                    self.metrics.add("readahead_blocks")

    def advise(self, obj: ObjectRef, state: ReadState, offset: int, size: int) -> None:
        """Note a read by one handle; if it continues a sequential run, fetch ahead in the background."""
        # Reads of one handle run in parallel threads and may be taken out of
        # order: one that starts a little behind where the run ended
        # (SEQUENTIAL_SLACK) still continues it.
        with state.lock:
            if state.next_offset < 0:
                sequential = offset == 0
            else:
                sequential = -SEQUENTIAL_SLACK <= offset - state.next_offset <= SEQUENTIAL_SLACK
            state.next_offset = max(state.next_offset, offset + size) if sequential else offset + size
        if not sequential or obj.size <= BLOCK_SIZE:
            state.window = 0
            return
        state.window = min(MAX_READAHEAD, max(2 * BLOCK_SIZE, state.window * 2))
        start_block = (offset + size) // BLOCK_SIZE
        end_block = min((offset + size + state.window - 1) // BLOCK_SIZE, (obj.size - 1) // BLOCK_SIZE)
        begin = max(start_block, state.prefetched_to)
        if begin > end_block:
            return
        with state.lock:
            if state.stream_block > begin:
                return  # the stream is already past (a re-read after a seek back)
            if state.stream_block < 0:
                state.stream_block = begin
            # Claim the blocks now, so that a foreground read of one waits for the stream instead of fetching it again.
            self._claim(obj, state, begin, end_block)
            if state.streaming:
                return
            state.streaming = True
        self._executor().submit(self._stream, obj, state)

    def _stream(self, obj: ObjectRef, state: ReadState) -> None:
        """Read every block from ``state.stream_block`` up to ``state.prefetched_to`` off the handle's
        stream, in order, delivering claimed blocks; one GET serves the whole sequential run."""
        remote = not obj.url.startswith("local://")
        last = (obj.size - 1) // BLOCK_SIZE
        try:
            while True:
                with state.lock:
                    index = state.stream_block
                    if index >= state.prefetched_to or index > last:
                        state.streaming = False
                        return
                    stream = state.stream
                key = self._key(obj, index)
                if stream is None and key not in self._pending and key in self.ram:
                    # Cached already (an earlier handle read it): open the stream only where bytes are missing.
                    with state.lock:
                        state.stream_block = index + 1
                    continue
                if stream is None:
                    stream = self._unpark(obj, index)
                    if stream is None:
                        stream = self.adapter.open(obj.url)
                        stream.seek(index * BLOCK_SIZE)
                    with state.lock:
                        state.stream = stream
                data = stream.read(min(BLOCK_SIZE, obj.size - index * BLOCK_SIZE))
                if not data:
                    raise EOFError(obj.url)
                self.metrics.add("block_misses")  # fetched from the store, if not by a foreground read
                self.metrics.add("fetched_bytes", len(data))
                self.ram.put(key, data)
                if self.disk is not None and remote:
                    self.disk.put(key, data)
                with self._pending_lock:
                    future = self._pending.pop(key, None)
                if future is not None:
                    future.set_result(data)
                with state.lock:
                    state.stream_block = index + 1
                    if index == last:
                        self._close_stream(state)
        except Exception:  # read-ahead is a hint: the foreground read fetches the block and reports failures
            self.metrics.add("readahead_errors")
            with state.lock:
                self._close_stream(state)
                state.streaming = False
                state.stream_block = -1
                state.prefetched_to = 0
            self._fail_pending(obj)

    @staticmethod
    def _close_stream(state: ReadState) -> None:
        if state.stream is not None:
            with contextlib.suppress(Exception):
                state.stream.close()
        state.stream = None

    def _fail_pending(self, obj: ObjectRef) -> None:
        prefix = self._key(obj, 0).rsplit("|", 1)[0] + "|"
        with self._pending_lock:
            failed = [k for k in self._pending if k.startswith(prefix)]
            futures = [self._pending.pop(k) for k in failed]
        for f in futures:
            f.set_exception(EOFError("read-ahead stream failed"))

    def prefetch(self, objs: list[ObjectRef]) -> int:
        """Load these whole small objects (one block each) into the caches in the background; returns how many were queued.

        Best effort: objects already cached are skipped, at most
        ``MAX_PREFETCH_QUEUED`` are in flight, and a failed fetch is only
        counted (the foreground read that needs the bytes fetches them again
        and reports its own error).  A foreground read of an object being
        prefetched waits for that fetch instead of starting another.
        """
        queued = 0
        for obj in objs:
            if obj.size <= 0 or obj.size > BLOCK_SIZE or self._key(obj, 0) in self.ram:
                continue
            with self._pool_lock:
                if self._prefetching >= MAX_PREFETCH_QUEUED:
                    break
                if self._prefetch_pool is None:
                    self._prefetch_pool = ThreadPoolExecutor(PREFETCH_THREADS, thread_name_prefix="lakemount-prefetch")
                self._prefetching += 1
                self._prefetch_pool.submit(self._prefetch_one, obj)
            queued += 1
        return queued

    def _prefetch_one(self, obj: ObjectRef) -> None:
        try:
            self._load(obj, 0)
            self.metrics.add("prefetched_files")
        except Exception:
            self.metrics.add("prefetch_failures")
        finally:
            with self._pool_lock:
                self._prefetching -= 1

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(READAHEAD_THREADS, thread_name_prefix="lakemount-readahead")
            return self._pool

    def close(self) -> None:
        with self._pool_lock:
            pools, self._pool, self._prefetch_pool = (self._pool, self._prefetch_pool), None, None
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        with self._pending_lock:
            parked = [stream for _, stream in self._parked.values()]
            self._parked.clear()
        for stream in parked:
            with contextlib.suppress(Exception):
                stream.close()


def _slice(parts: list[bytes], first: int, offset: int, end: int) -> bytes:
    base = first * BLOCK_SIZE
    if len(parts) == 1:
        data = parts[0]
        return data[offset - base : end - base] if (offset - base, end - base) != (0, len(data)) else data
    joined = b"".join(parts)
    return joined[offset - base : end - base]
