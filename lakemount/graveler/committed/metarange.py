"""A metarange: the sorted list of ranges that make up one commit's keyspace.

Keyed by each range's max key, so a point lookup is one bisect over the
metarange and one over the range block that can hold the key.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from lakemount.graveler.model import MetaRangeID, RangeInfo
from lakemount.graveler.sstable import TableReader


class MetaRange:
    """A committed tree: its ranges, in key order, with readers loaded lazily through ``load``.

    Reading a range may raise ``Corrupt`` (checksum mismatch) or ``NotFound`` from the loader.
    """

    __slots__ = ("_load", "_readers", "checksum", "id", "max_keys", "ranges")

    def __init__(
        self, id: MetaRangeID, checksum: str, ranges: list[RangeInfo], load: Callable[[RangeInfo], TableReader]
    ) -> None:
        self.id = id
        self.checksum = checksum
        self.ranges = ranges
        self.max_keys = [r.max_key for r in ranges]
        self._load = load
        self._readers: list[TableReader | None] = [None] * len(ranges)

    def reader(self, i: int) -> TableReader:
        r = self._readers[i]
        if r is None:
            r = self._readers[i] = self._load(self.ranges[i])
        return r

    def get(self, key: bytes) -> bytes | None:
        """The stored value (identity + entry) of ``key``, or None."""
        i = bisect_left(self.max_keys, key)
        if i == len(self.max_keys) or key < self.ranges[i].min_key:
            return None
        r = self._readers[i]
        if r is None:
            r = self.reader(i)
        return r.get(key)

    def first_range(self, start: bytes) -> int:
        return bisect_left(self.max_keys, start)

    def scan(
        self, start: bytes = b"", stop: bytes | None = None, decode: Callable[[bytes], Any] | None = None
    ) -> Iterator[tuple[bytes, Any]]:
        """Records with start <= key < stop, in order; with ``decode``, values decoded
        (and kept decoded by the range's reader once listed again: ``TableReader.scan``)."""
        i = bisect_left(self.max_keys, start) if start else 0
        n = len(self.ranges)
        while i < n:
            info = self.ranges[i]
            if stop is not None and info.min_key >= stop:
                return
            reader = self.reader(i)
            if decode is not None:
                it = reader.scan(start, decode)
            else:
                it = reader.scan(start) if start > info.min_key else iter(reader.items())
            if stop is not None and info.max_key >= stop:
                for k, v in it:
                    if k >= stop:
                        return
                    yield k, v
                return
            yield from it
            i += 1

    def count(self) -> int:
        return sum(r.count for r in self.ranges)
