"""Loading and storing ranges and metaranges, verified and cached.

A range or metarange file is fetched from the block store once, checked
against the xxh3-128 checksum its parent recorded (a corrupt file is an error,
never read), kept as bytes in the byte cache (RAM and disk tiers) and as a
parsed ``TableReader`` in an in-process LRU, so warm lookups parse nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

import xxhash

from lakemount.errors import ChecksumMismatch, Corrupt, ObjectNotFound
from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.model import (
    EMPTY_METARANGE,
    IDENTITY_LEN,
    MetaRangeID,
    RangeInfo,
    decode_value,
    value_identity,
)
from lakemount.graveler.ports import BlockAdapter, Cache
from lakemount.graveler.sstable import TableReader
from lakemount.records import record


def join(namespace: str, key: str) -> str:
    """The block-store URL of ``key`` under ``namespace`` (exactly one ``/`` between them)."""
    return namespace.rstrip("/") + "/" + key


def table_url(namespace: str, table_id: str) -> str:
    """The URL of the table file ``table_id`` under the repository's ``_lakefs/`` prefix."""
    return join(namespace, f"_lakefs/{table_id}")


def _checksum(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


def range_id_of(records: Iterable[tuple[bytes, bytes]]) -> str:
    """The content id of a range holding ``records`` (what ``writer.RangeBuilder`` computes)."""
    import hashlib  # here: a read-only verb loads this module and never hashes (issue 41)

    h = hashlib.blake2b(b"r", digest_size=32)
    for key, value in records:
        h.update(len(key).to_bytes(4, "little") + key + value[:IDENTITY_LEN])
    return h.hexdigest()


def metarange_id_of(ranges: Iterable[RangeInfo]) -> str:
    """The content id of a metarange over ``ranges`` (what ``writer.write_metarange`` computes)."""
    import hashlib

    h = hashlib.blake2b(b"m", digest_size=32)
    for r in ranges:
        h.update(r.id.encode())
    return h.hexdigest()


@record()
class StoreStats:
    """Counters of table loads and writes (what caching and reuse saved), for stats and tests."""

    tables_loaded: int = 0
    tables_written: int = 0
    tables_reused: int = 0
    bytes_loaded: int = 0
    bytes_written: int = 0


class CommittedStore:
    """Reads and writes the immutable tables of every repository."""

    def __init__(
        self,
        adapter: BlockAdapter,
        cache: Cache,
        *,
        max_readers: int = 4096,
        max_metaranges: int = 64,
    ) -> None:
        self.adapter = adapter
        self.cache = cache
        self._lock = threading.Lock()
        self._readers: OrderedDict[str, TableReader] = OrderedDict()
        self._metaranges: OrderedDict[str, MetaRange] = OrderedDict()
        self._max_readers = max_readers
        self._max_metaranges = max_metaranges
        self.stats = StoreStats()

    # -- reading ---------------------------------------------------------------
    def _load_bytes(
        self, namespace: str, table_id: str, expected: str, verify: Callable[[bytes], bool] | None = None
    ) -> bytes:
        """The bytes of a table whose checksum is ``expected``, or whose records ``verify`` proves are its own.

        Two writers of the same table id (two processes committing the same staged
        entries, or merging the same branches) may both upload it: the records are the
        same but the bytes may differ (another version's encoder cuts other blocks; RocksDB's,
        which wrote older tables, put a per-writer session id in them), so a commit may name a
        checksum whose bytes were overwritten.  Such a file is
        accepted only if its records hash to its content id; anything else is corrupt.
        """
        url = table_url(namespace, table_id)

        def load() -> bytes:
            try:
                data = self.adapter.get(url)
            except ObjectNotFound as exc:
                raise Corrupt(f"missing table {table_id} in {namespace}: the repository's metadata is damaged") from exc
            self.stats.tables_loaded += 1
            self.stats.bytes_loaded += len(data)
            return data

        data = self.cache.get_or_load(table_id, load)
        if _checksum(data) != expected and (verify is None or not verify(data)):
            raise ChecksumMismatch(f"table {table_id} in {namespace}")
        return data

    def _range_is(self, table_id: str, data: bytes) -> bool:
        """True if ``data`` parses to records whose values and range id are self-consistent."""
        try:
            records = TableReader(data).items()
            for _k, v in records:
                if decode_value(v).identity() != value_identity(v):
                    return False
        except Corrupt:
            return False
        return range_id_of(records) == table_id

    def _metarange_is(self, namespace: str, table_id: str, data: bytes) -> bool:
        """True if ``data`` lists ranges hashing to ``table_id`` whose bounds and counts match the ranges."""
        try:
            ranges = [RangeInfo.decode(k, v) for k, v in TableReader(data).items()]
            if metarange_id_of(ranges) != table_id:
                return False
            for info in ranges:
                records = self.range_reader(namespace, info).items()
                if not records or (records[0][0], records[-1][0], len(records)) != (info.min_key, info.max_key, info.count):
                    return False
        except Corrupt:
            return False
        return True

    def _cached_reader(self, table_id: str) -> TableReader | None:
        with self._lock:
            reader = self._readers.get(table_id)
            if reader is not None:
                self._readers.move_to_end(table_id)
            return reader

    def _remember_reader(self, table_id: str, reader: TableReader) -> None:
        with self._lock:
            self._readers[table_id] = reader
            while len(self._readers) > self._max_readers:
                self._readers.popitem(last=False)

    def range_reader(self, namespace: str, info: RangeInfo) -> TableReader:
        """A parsed reader of one range; raises ``Corrupt`` if missing or damaged."""
        reader = self._cached_reader(info.id)
        if reader is None:
            data = self._load_bytes(namespace, info.id, info.checksum, lambda d: self._range_is(info.id, d))
            reader = TableReader(data, name=f"range {info.id}")
            self._remember_reader(info.id, reader)
        return reader

    def metarange(self, namespace: str, metarange_id: MetaRangeID, expected_checksum: str) -> MetaRange:
        """The metarange a commit points at, bound to its namespace for lookups."""
        key = namespace + "\0" + metarange_id
        with self._lock:
            mr = self._metaranges.get(key)
            if mr is not None:
                self._metaranges.move_to_end(key)
                return mr
        if metarange_id == EMPTY_METARANGE:
            ranges: list[RangeInfo] = []
        else:
            data = self._load_bytes(
                namespace, metarange_id, expected_checksum, lambda d: self._metarange_is(namespace, metarange_id, d)
            )
            reader = TableReader(data, name=f"metarange {metarange_id}")
            ranges = [RangeInfo.decode(k, v) for k, v in reader.items()]
        mr = MetaRange(metarange_id, expected_checksum, ranges, self._range_loader(namespace))
        with self._lock:
            self._metaranges[key] = mr
            while len(self._metaranges) > self._max_metaranges:
                self._metaranges.popitem(last=False)
        return mr

    def metarange_span(
        self, namespace: str, metarange_id: MetaRangeID, expected_checksum: str, start: bytes, stop: bytes | None
    ) -> MetaRange:
        """The part of a metarange whose ranges can hold keys in [start, stop), for a diff within that span.

        A metarange not loaded whole is read only where the span is: one block of its index is decoded, not
        every range's description (blame reads the metaranges of hundreds of commits for one directory).  The
        view's id names the span too, so two views are equal only when their metaranges and spans are.
        """
        span_id = MetaRangeID(f"{metarange_id}[{start.hex()}:{'' if stop is None else stop.hex()}]")
        with self._lock:
            whole = self._metaranges.get(namespace + "\0" + metarange_id)
        infos: Iterable[RangeInfo]
        if whole is not None:
            infos = whole.ranges[whole.first_range(start) if start else 0:]
        elif metarange_id == EMPTY_METARANGE:
            infos = ()
        else:
            reader = self._cached_reader(metarange_id)
            if reader is None:
                data = self._load_bytes(
                    namespace, metarange_id, expected_checksum,
                    lambda d: self._metarange_is(namespace, metarange_id, d),
                )
                reader = TableReader(data, name=f"metarange {metarange_id}")
                self._remember_reader(metarange_id, reader)
            infos = (RangeInfo.decode(k, v) for k, v in reader.scan(start))
        ranges = []
        for info in infos:
            if stop is not None and info.min_key >= stop:
                break
            ranges.append(info)
        return MetaRange(span_id, expected_checksum, ranges, self._range_loader(namespace))

    def _range_loader(self, namespace: str) -> Callable[[RangeInfo], TableReader]:
        return lambda info: self.range_reader(namespace, info)

    # -- writing ---------------------------------------------------------------
    def store_table(self, namespace: str, table_id: str, data: bytes) -> tuple[int, str]:
        """Upload a table's bytes (unless an identical table exists); returns (size, checksum).

        Tables are content-addressed, so an existing object with the same id holds the same records
        and is reused.
        """
        digest = _checksum(data)
        url = table_url(namespace, table_id)
        if self.cache.get(table_id) is not None or self.adapter.exists(url):
            # Same records, possibly different file bytes (another encoder's, as ``_load_bytes``
            # says): keep the stored file and its checksum, unless it is damaged; adopting its
            # checksum would bless bad data.
            stored = self._existing_checksum(namespace, table_id, data)
            if stored is not None:
                try:
                    # Refresh its time so a GC whose mark began earlier keeps it;
                    # a cached table may also have been swept from the store.
                    self.adapter.touch(url)
                    self.stats.tables_reused += 1
                    return stored
                except ObjectNotFound:
                    pass
        self.adapter.put(url, data)
        self.cache.put(table_id, data)
        self.stats.tables_written += 1
        self.stats.bytes_written += len(data)
        return len(data), digest

    def _existing_checksum(self, namespace: str, table_id: str, new: bytes) -> tuple[int, str] | None:
        """(size, checksum) of the stored table ``table_id`` if it holds the same records as ``new``."""
        data = self.cache.get(table_id)
        if data is None:
            try:
                data = self.adapter.get(table_url(namespace, table_id))
            except ObjectNotFound:
                return None
        if data != new:
            try:
                same = TableReader(data).items() == TableReader(new).items()
            except Corrupt:
                same = False
            if not same:
                return None
        self.cache.put(table_id, data)
        return len(data), _checksum(data)
