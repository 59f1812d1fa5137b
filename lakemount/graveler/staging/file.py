"""Staging files: immutable SSTables of staged changes, the L1 and L2 files of docs/DESIGN.md §4.

A staging file is a table in the same RocksDB-compatible format as ranges.
Each value starts with a tag byte: ``PUT`` then the stored record value,
``TOMBSTONE`` (the key is deleted on the branch) or ``UNSTAGED`` (a partial
reset: the key has no staged change in this token, look below it).  The empty
key ``BLOOM_KEY`` holds the file's bloom filter: it sorts first, and no path is
empty (the writer refuses an empty key).
The file's key range, entry count, size and checksum live in its list row, so
a lookup skips files that cannot hold its key without fetching them.  A small
L1 file (at most ``staging.inline_bytes``) is not stored on the block store at
all: its bytes live in its list row (``StagingFileInfo.inline``), the same
bytes under the same checksum.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import xxhash

from lakemount.errors import Corrupt
from lakemount.graveler.model import StagingToken
from lakemount.graveler.sstable import HOT_AFTER, TableReader, encode_table
from lakemount.graveler.staging.bloom import Bloom

PUT: Final = 1
TOMBSTONE: Final = 0
UNSTAGED: Final = 2
BLOOM_KEY: Final = b""
_TOMBSTONE_VALUE: Final = bytes((TOMBSTONE,))
_UNSTAGED_VALUE: Final = bytes((UNSTAGED,))
_PUT_TAG: Final = bytes((PUT,))

Tagged = bytes  # a tag byte, then the record value for PUT


def tag(value: bytes | None) -> Tagged:
    """The file form of a staged value (None = tombstone)."""
    return _TOMBSTONE_VALUE if value is None else _PUT_TAG + value


def tag_all(values: Iterable[bytes | None]) -> list[Tagged]:
    """:func:`tag` of each of ``values`` (a flush's): one loop, not a call per value."""
    return [_TOMBSTONE_VALUE if v is None else _PUT_TAG + v for v in values]


UNSTAGED_MARK: Final = _UNSTAGED_VALUE


def untag(tagged: Tagged) -> bytes | None:
    """The staged value of a PUT or TOMBSTONE (callers handle UNSTAGED first)."""
    return tagged[1:] if tagged[0] == PUT else None


def checksum(data: bytes) -> str:
    """A staging file's checksum (xxh3-128 hex), kept in its list row and checked on every load."""
    return xxhash.xxh3_128_hexdigest(data)


@dataclass(frozen=True, slots=True)
class StagingFileInfo:
    """One entry of a token's L1 or L2 list: where the file is and what it covers.

    ``seq`` orders files within a token (a larger ``seq`` is newer); the list
    store assigns it when the file is appended.  ``inline``: the file's bytes are
    in its list row, not at ``url`` (which still names it and keys it in caches).
    """

    url: str
    level: int  # 1 (recent) or 2 (compacted)
    min_key: bytes
    max_key: bytes
    count: int
    size: int
    checksum: str
    seq: int = 0
    token: StagingToken = StagingToken("")
    inline: bool = False


def encode_file(records: Sequence[tuple[bytes, Tagged]]) -> bytes:
    """The bytes of a staging file holding ``records`` (sorted by key, unique, non-empty): see :func:`encode_arrays`."""
    return encode_arrays([k for k, _ in records], [v for _, v in records])


def encode_arrays(keys: list[bytes], values: list[Tagged]) -> bytes:
    """The bytes of a staging file holding ``keys`` (sorted, unique, non-empty) and their ``values``: its
    bloom filter under the empty key, then the records, encoded in memory (a flush used to write a
    temporary file and read it back: ~20% of a busy process's flush).  Parallel lists, as flushes and
    compactions hold them: no tuple per record."""
    return encode_table([BLOOM_KEY, *keys], [Bloom.of(keys, len(keys)).encode(), *values])


class StagingFile:
    """A parsed staging file: point lookups behind its bloom filter while cold, sorted arrays once used.

    Staging files are immutable and content-addressed.  The first lookups of a file probe its
    bloom filter and decode at most one block (a cold stat over a big L2 file decodes little);
    a file that is scanned, merged or asked ``HOT_AFTER`` times is decoded whole once into sorted
    parallel arrays of keys and tagged values, kept while the file is: a scan is then slices of
    the arrays, and a hot file's lookups one dict probe (a stat probes every file whose key range
    holds the key, and a Python bloom probe costs more than that).
    """

    __slots__ = ("_bloom", "_gets", "_keys", "_map", "_puts", "_reader", "_values", "count", "name")

    def __init__(self, data: bytes, name: str) -> None:
        """Raises ``Corrupt`` naming ``name`` when ``data`` is not a staging file."""
        self.name = name
        self._reader: TableReader | None = TableReader(data, name=name)
        raw = self._reader.get(BLOOM_KEY)
        if raw is None:
            raise Corrupt(f"{name}: no bloom filter (not a staging file)")
        self._bloom = Bloom.decode(raw, name)
        self.count = max(0, self._reader.count - 1)  # records, the bloom filter left out
        self._keys: list[bytes] | None = None
        self._values: list[Tagged] = []
        self._gets = 0
        self._map: dict[bytes, Tagged] | None = None
        self._puts: tuple[list[bytes], list[int]] | None = None

    def __len__(self) -> int:
        return self.count

    def _decode(self) -> list[bytes]:
        keys = self._keys
        if keys is None:
            reader = self._reader
            assert reader is not None
            keys, values = reader.arrays()
            del keys[0], values[0]  # the bloom filter's empty key sorts first
            self._values = values
            self._keys = keys
            self.count = len(keys)
            self._reader = None  # the arrays hold every record: the table's bytes can go
        return keys

    @property
    def keys(self) -> list[bytes]:
        return self._decode()

    @property
    def values(self) -> list[Tagged]:
        self._decode()
        return self._values

    def get(self, key: bytes) -> Tagged | None:
        """The tagged value of ``key`` in this file, None if the file does not hold it."""
        table = self._map
        if table is not None:
            return table.get(key)
        self._gets += 1
        if self._gets > HOT_AFTER:
            self._map = table = dict(zip(self.keys, self.values))
            return table.get(key)
        keys = self._keys
        if keys is None:
            reader = self._reader
            if reader is not None:
                return reader.get(key) if self._bloom.may_contain(key) else None
            keys = self._keys  # another thread decoded the file meanwhile
            assert keys is not None
        i = bisect_left(keys, key)
        return self._values[i] if i < len(keys) and keys[i] == key else None

    def puts(self) -> tuple[list[bytes], list[int]]:
        """The file's PUT keys in order and their indexes in :attr:`keys` (made once per decoded file)."""
        puts = self._puts
        if puts is None:
            values = self.values
            at = [i for i, v in enumerate(values) if v[0] == PUT]
            keys = self.keys
            puts = self._puts = ([keys[i] for i in at], at)
        return puts

    def first_put(self, start: bytes, stop: bytes | None) -> tuple[bytes, Tagged] | None:
        """The first PUT record with start <= key < stop, None if none: a bisect in the file's PUT keys,
        whatever number of tombstones lie before it."""
        put_keys, at = self.puts()
        j = bisect_left(put_keys, start)
        if j == len(put_keys) or (stop is not None and put_keys[j] >= stop):
            return None
        return put_keys[j], self._values[at[j]]

    def items(self) -> list[tuple[bytes, Tagged]]:
        """Every record in key order, the bloom filter left out (whole-file work: compaction)."""
        return list(zip(self.keys, self.values))

    def bounds(self, start: bytes, stop: bytes | None) -> tuple[int, int]:
        """The index range [i, j) of the records with start <= key < stop."""
        keys = self.keys
        return bisect_left(keys, start), (len(keys) if stop is None else bisect_left(keys, stop))

    def scan(self, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, Tagged]]:
        """Records with start <= key < stop, in key order."""
        i, j = self.bounds(start, stop)
        return zip(self.keys[i:j], self.values[i:j])
