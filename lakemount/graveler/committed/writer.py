"""Writing ranges with content-defined boundaries, and applying changes to a metarange.

A range ends after a key whose xxh3 hash has its low ``CUT_BITS`` bits zero
(about one key in 1024), or when it reaches ``MAX_RECORDS`` / ``MAX_BYTES``.
Because cuts depend on keys only, the same keyspace always splits the same
way, and a change to one key rewrites only the range that holds it: ``apply``
walks the base metarange and keeps every range no change touches *by
reference*, without reading it.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import field
from typing import TYPE_CHECKING, Final

import xxhash

from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.committed.store import CommittedStore
from lakemount.graveler.model import EMPTY_METARANGE, IDENTITY_LEN, MetaRangeID, RangeID, RangeInfo
from lakemount.graveler.runs import cut_ends, overlay, range_feed
from lakemount.graveler.sstable import encode_table
from lakemount.records import record

if TYPE_CHECKING:  # the pool is made on first use: a commit that writes no range does not load it (issue 41)
    from concurrent.futures import Future, ThreadPoolExecutor

CUT_BITS: Final = 10
CUT_MASK: Final = (1 << CUT_BITS) - 1
MAX_RECORDS: Final = 32 * 1024
MAX_BYTES: Final = 8 * 1024 * 1024
BATCH: Final = 8192  # changes gathered for one ``RangeBuilder.add_many`` call

_hash = xxhash.xxh3_64_intdigest
_len_prefix = struct.Struct("<I").pack
# Finishing a table and uploading it (fsync, network) overlaps with building the next,
# on a pool shared by every writer and created on first use, not at import.
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lm-range")
    return _pool


@record()
class ApplyStats:
    """What applying changes to a metarange wrote: ranges written or reused, records and changes."""

    ranges_written: int = 0
    ranges_reused: int = 0
    records_written: int = 0
    changes_applied: int = 0
    written_ids: list[str] = field(default_factory=list)


class RangeBuilder:
    """Accumulates records into ranges, cutting at content-defined boundaries.

    A range's records are gathered in lists while it grows; its table is encoded (and uploaded)
    on a worker thread once it is cut, so the thread feeding records does no per-range table work.
    """

    def __init__(self, store: CommittedStore, namespace: str, stats: ApplyStats) -> None:
        self._store = store
        self._ns = namespace
        self._stats = stats
        self._keys: list[bytes] = []
        self._values: list[bytes] = []
        self._hasher = hashlib.blake2b(b"r", digest_size=32)
        self._bytes = 0

    @property
    def empty(self) -> bool:
        return not self._keys

    def add(self, key: bytes, value: bytes) -> Future[RangeInfo] | None:
        """Add a record; returns the finished range when this key ends one."""
        self._keys.append(key)
        self._values.append(value)
        # The identity (value[:16]) covers the whole entry; the length prefix keeps
        # (key, identity) pairs unambiguous.
        self._hasher.update(_len_prefix(len(key)) + key + value[:IDENTITY_LEN])
        self._bytes += len(key) + len(value)
        if not (_hash(key) & CUT_MASK) or len(self._keys) >= MAX_RECORDS or self._bytes >= MAX_BYTES:
            return self.flush()
        return None

    def add_many(self, keys: list[bytes], values: list[bytes]) -> list[Future[RangeInfo]]:
        """``add`` of each pair in order (the same ranges, cut at the same keys); the ranges finished.

        The cut keys of the whole batch are found at once, and each run of records up to a cut
        goes to the range's records and its hash in one call each (``runs.cut_ends``,
        ``runs.range_feed``): a commit of a million staged entries spent most of its time in
        ``add``'s per-record Python.  A run that would reach ``MAX_RECORDS`` or ``MAX_BYTES``
        before its cut goes record by record (``add``).
        """
        done: list[Future[RangeInfo]] = []
        n = len(keys)
        if not n:
            return done  # an empty batch must not open a range (``empty`` would turn false)
        ends = cut_ends(keys, _hash, CUT_MASK)
        cut_at_end = bool(ends) and ends[-1] == n
        if not cut_at_end:
            ends.append(n)
        lo = 0
        for hi in ends:
            ks, vs = (keys, values) if hi - lo == n else (keys[lo:hi], values[lo:hi])
            feed, size = range_feed(ks, vs, IDENTITY_LEN)
            if len(self._keys) + len(ks) < MAX_RECORDS and self._bytes + size < MAX_BYTES:
                self._keys += ks
                self._values += vs
                self._hasher.update(feed)
                self._bytes += size
                if hi < n or cut_at_end:
                    f = self.flush()
                    if f is not None:
                        done.append(f)
            else:
                for k, v in zip(ks, vs):
                    f = self.add(k, v)
                    if f is not None:
                        done.append(f)
            lo = hi
        return done

    def flush(self) -> Future[RangeInfo] | None:
        """Finish the current range; its table is encoded and uploaded on a worker thread."""
        keys, values = self._keys, self._values
        if not keys:
            return None
        self._keys, self._values = [], []
        range_id = RangeID(self._hasher.hexdigest())
        self._hasher = hashlib.blake2b(b"r", digest_size=32)
        self._bytes = 0
        self._stats.ranges_written += 1
        self._stats.records_written += len(keys)
        self._stats.written_ids.append(range_id)
        return _executor().submit(self._finish, keys, values, range_id)

    def _finish(self, keys: list[bytes], values: list[bytes], range_id: RangeID) -> RangeInfo:
        size, digest = self._store.store_table(self._ns, range_id, encode_table(keys, values))
        return RangeInfo(range_id, keys[0], keys[-1], len(keys), size, digest)

    def abort(self) -> None:
        """Drop the range being gathered (nothing of it is written yet)."""
        self._keys, self._values = [], []


def write_metarange(store: CommittedStore, namespace: str, ranges: list[RangeInfo]) -> tuple[MetaRangeID, str]:
    """Store a metarange over ``ranges`` (sorted, disjoint); returns (id, checksum)."""
    if not ranges:
        return EMPTY_METARANGE, ""
    h = hashlib.blake2b(b"m", digest_size=32)
    for r in ranges:
        h.update(r.id.encode())
    mr_id = MetaRangeID(h.hexdigest())
    table = encode_table([r.max_key for r in ranges], [r.encode() for r in ranges])
    _size, digest = store.store_table(namespace, mr_id, table)
    return mr_id, digest


Chunk = tuple[list[bytes], list[bytes | None]]  # sorted changes as parallel lists (None: delete)


def chunked(changes: Iterable[tuple[bytes, bytes | None]], size: int = BATCH) -> Iterator[Chunk]:
    """Sorted (key, value-or-None) changes as chunks of at most ``size`` for :func:`apply_chunks`."""
    it = iter(changes)
    while chunk := list(itertools.islice(it, size)):
        yield [k for k, _ in chunk], [v for _, v in chunk]


class _Changes:
    """Sorted changes arriving as chunks, taken in pieces up to a key (a piece never spans two chunks)."""

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self._it = iter(chunks)
        self._keys: list[bytes] = []
        self._values: list[bytes | None] = []
        self._pos = 0
        self._next_chunk()

    def _next_chunk(self) -> None:
        while self._pos >= len(self._keys):
            chunk = next(self._it, None)
            if chunk is None:
                self._keys, self._values, self._pos = [], [], 0
                return
            self._keys, self._values = chunk
            self._pos = 0

    def peek(self) -> bytes | None:
        """The next change's key (None: no change left)."""
        return self._keys[self._pos] if self._pos < len(self._keys) else None

    def take(self, limit: bytes | None, *, inclusive: bool = False) -> Iterator[Chunk]:
        """The changes with key < ``limit`` (``<=`` when ``inclusive``; None: all), in pieces;
        consume each piece before asking for the next."""
        while self._pos < len(self._keys):
            keys, lo = self._keys, self._pos
            if limit is None:
                hi = len(keys)
            else:
                hi = (bisect_right if inclusive else bisect_left)(keys, limit, lo)
            if hi > lo:
                self._pos = hi
                yield (keys, self._values) if lo == 0 and hi == len(keys) else (keys[lo:hi], self._values[lo:hi])
            if hi < len(keys):
                return
            self._next_chunk()


def apply(
    store: CommittedStore,
    namespace: str,
    base: MetaRange,
    changes: Iterable[tuple[bytes, bytes | None]],
) -> tuple[MetaRangeID, str, ApplyStats]:
    """Apply sorted (key, value-or-None-to-delete) changes to ``base``; returns the new metarange
    (:func:`apply_chunks` of the changes in chunks)."""
    return apply_chunks(store, namespace, base, chunked(changes))


def apply_chunks(
    store: CommittedStore,
    namespace: str,
    base: MetaRange,
    chunks: Iterable[Chunk],
) -> tuple[MetaRangeID, str, ApplyStats]:
    """Apply sorted changes, given as chunks of parallel (keys, values-or-None-to-delete) lists in
    key order, to ``base``; returns the new metarange.

    Ranges that no change falls into, reached while the builder is aligned on a range boundary,
    are reused by reference without being read.  A range a change falls into is read whole and
    the changes over it merged with it in one ``runs.overlay`` per piece, the records then added
    to the builder in runs: the same records, ranges and counts as a merge record by record (the
    builder's ``add_many`` cuts where ``add`` would), without a Python step per record.
    """
    stats = ApplyStats()
    out: list[RangeInfo | Future[RangeInfo]] = []
    builder = RangeBuilder(store, namespace, stats)
    changes = _Changes(chunks)

    def add(keys: list[bytes], values: list[bytes], applied: int) -> None:
        out.extend(builder.add_many(keys, values))
        stats.changes_applied += applied

    try:
        for i, info in enumerate(base.ranges):
            nxt = changes.peek()
            if builder.empty and (nxt is None or nxt > info.max_key):
                out.append(info)
                stats.ranges_reused += 1
                continue
            for keys, values in changes.take(info.min_key):  # before the range's first record: new keys
                add(*overlay([], [], keys, values))
            base_keys, base_values = base.reader(i).arrays()
            pos = 0
            # Changes up to the range's max key (its last record) over its records; none lies past it.
            for keys, values in changes.take(info.max_key, inclusive=True):
                end = bisect_right(base_keys, keys[-1], pos)
                add(*overlay(base_keys[pos:end], base_values[pos:end], keys, values))
                pos = end
            if pos < len(base_keys):
                add(base_keys[pos:] if pos else base_keys, base_values[pos:] if pos else base_values, 0)
        for keys, values in changes.take(None):
            add(*overlay([], [], keys, values))
        done = builder.flush()
        if done:
            out.append(done)
        ranges = [r if isinstance(r, RangeInfo) else r.result() for r in out]
    except BaseException:
        builder.abort()
        for r in out:
            if not isinstance(r, RangeInfo):
                r.cancel()
        raise
    mr_id, digest = write_metarange(store, namespace, ranges)
    return mr_id, digest, stats
