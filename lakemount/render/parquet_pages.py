"""The sizes of a Parquet column chunk's pages, read from their headers before pyarrow decodes anything.

pyarrow decompresses a whole page into one buffer of the size its header
declares before it decodes the first value, and a page header is the writer's
word: a file of 16 KiB held one 512 MiB page of a repeated byte, and previewing
it took 2.7 GB of memory.  The footer's sizes do not help (pyarrow trusts the
page header, and a crafted footer can say anything), so the preview reads the
headers itself: each is a Thrift compact struct at the start of a page, and
only its first fields (type, uncompressed and compressed size, the data page's
value count) matter here; everything else is skipped without being read into
memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Final

HEADER_CAP: Final = 16 << 20  # parquet-cpp's default limit on a page header (statistics included)
FIRST_READ: Final = 256  # a header without statistics takes a few dozen bytes

# Thrift compact protocol types.
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)


class BadPage(ValueError):
    """A page header that cannot be read (cut, malformed, or larger than ``HEADER_CAP``)."""


@dataclass(frozen=True, slots=True)
class Page:
    """What one page header declares: its uncompressed and compressed sizes and its value count (0 for a dictionary)."""

    uncompressed: int
    compressed: int
    values: int


class _Short(Exception):
    """The header runs past the bytes read so far."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Short
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise BadPage("page header: varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, n: int) -> None:
        if n < 0:
            raise BadPage("page header: negative length")
        self.pos += n
        if self.pos > len(self.data):
            raise _Short

    def value(self, kind: int, depth: int) -> int | dict[int, object] | None:
        """Read one value of ``kind``: integers are returned, structs as {field id: value}, the rest skipped."""
        if depth > 16:
            raise BadPage("page header: nested too deeply")
        if kind in (_TRUE, _FALSE):
            return None
        if kind == _BYTE:
            self.skip(1)
        elif kind in (_I16, _I32, _I64):
            return self.zigzag()
        elif kind == _DOUBLE:
            self.skip(8)
        elif kind == _BINARY:
            self.skip(self.varint())
        elif kind in (_LIST, _SET):
            head = self.byte()
            size = head >> 4 if head >> 4 != 15 else self.varint()
            for _ in range(size):
                if head & 0x0F in (_TRUE, _FALSE):
                    self.skip(1)  # a boolean in a list is a byte
                else:
                    self.value(head & 0x0F, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.value(types >> 4, depth + 1)
                    self.value(types & 0x0F, depth + 1)
        elif kind == _STRUCT:
            return self.struct(depth + 1)
        else:
            raise BadPage(f"page header: unknown Thrift type {kind}")
        return None

    def struct(self, depth: int = 0) -> dict[int, object]:
        fields: dict[int, object] = {}
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return fields
            delta, kind = head >> 4, head & 0x0F
            last = last + delta if delta else self.zigzag()
            fields[last] = self.value(kind, depth)


def read_header(f: BinaryIO, offset: int) -> tuple[Page, int]:
    """The page whose header starts at ``offset`` in ``f``, and the header's length; raises ``BadPage``."""
    size = FIRST_READ
    while True:
        f.seek(offset)
        data = f.read(size)
        try:
            reader = _Reader(data)
            fields = reader.struct()
            break
        except _Short:
            if len(data) < size:
                raise BadPage("page header cut short by the end of the file") from None
            if size >= HEADER_CAP:
                raise BadPage(f"page header larger than {HEADER_CAP} bytes") from None
            size = min(size * 16, HEADER_CAP)
    uncompressed, compressed = fields.get(2), fields.get(3)
    if not isinstance(uncompressed, int) or not isinstance(compressed, int) or uncompressed < 0 or compressed < 0:
        raise BadPage("page header without its sizes")
    values = 0
    for data_header in (fields.get(5), fields.get(8)):  # DataPageHeader, DataPageHeaderV2: num_values is field 1
        if isinstance(data_header, dict) and isinstance(data_header.get(1), int):
            values = max(values, data_header[1])  # type: ignore[call-overload]
    return Page(uncompressed, compressed, values), reader.pos


def pages(f: BinaryIO, start: int, length: int) -> Iterator[Page]:
    """The pages of the column chunk of ``length`` bytes at ``start``, in order; raises ``BadPage``."""
    pos, end = start, start + length
    while pos < end:
        page, header = read_header(f, pos)
        yield page
        pos += header + page.compressed
