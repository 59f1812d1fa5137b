"""Parquet files whose one page decodes to far more than the file holds, built without holding those bytes.

A page is compressed as concatenated zstd frames (parquet-cpp decompresses
them as one buffer), so a 1 GiB page of a repeated byte costs one 64 MiB frame
to make; the file around it (page header, footer) is written by hand in Thrift's
compact protocol, since pyarrow's writer would need the whole page in memory.
The column is one required BYTE_ARRAY ``v``, PLAIN encoded: each value is a
4-byte length and its bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa

FRAME = 64 << 20


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zz(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _struct(*fields: tuple[int, int, bytes]) -> bytes:
    """A compact struct of (field id, type, encoded value), ids increasing by at most 15."""
    out, last = bytearray(), 0
    for fid, kind, value in fields:
        out.append(((fid - last) << 4) | kind)
        out += value
        last = fid
    return bytes(out + b"\0")


def _list(kind: int, items: list[bytes]) -> bytes:
    assert len(items) < 15
    return bytes([(len(items) << 4) | kind]) + b"".join(items)


def _binary(b: bytes) -> bytes:
    return _varint(len(b)) + b


I32, I64, BINARY, LIST, STRUCT = 5, 6, 8, 9, 12


def write_bomb(path: Path, rows: int, value_bytes: int) -> int:
    """A file of one page holding ``rows`` values of ``value_bytes`` bytes each (``b"a"`` repeated); returns its size."""
    record = struct.pack("<i", value_bytes) + (b"a" * value_bytes if value_bytes <= FRAME else b"")
    total = rows * (4 + value_bytes)
    codec = pa.Codec("zstd")
    if value_bytes <= FRAME:  # whole records per frame
        per_frame = FRAME // len(record)
        full, rest = divmod(rows, per_frame)
        body = codec.compress(record * per_frame, asbytes=True) * full + (codec.compress(record * rest, asbytes=True) if rest else b"")
    else:  # each value as its length, then frames of its bytes
        full, rest = divmod(value_bytes, FRAME)
        value = (codec.compress(record[:4], asbytes=True) + codec.compress(b"a" * FRAME, asbytes=True) * full
                 + (codec.compress(b"a" * rest, asbytes=True) if rest else b""))
        body = value * rows
    header = _struct((1, I32, _zz(0)), (2, I32, _zz(total)), (3, I32, _zz(len(body))),
                     (5, STRUCT, _struct((1, I32, _zz(rows)), (2, I32, _zz(0)), (3, I32, _zz(3)), (4, I32, _zz(3)))))
    offset = 4
    meta = _struct(
        (1, I32, _zz(1)),
        (2, LIST, _list(STRUCT, [_struct((4, BINARY, _binary(b"schema")), (5, I32, _zz(1))),
                                 _struct((1, I32, _zz(6)), (3, I32, _zz(0)), (4, BINARY, _binary(b"v")))])),
        (3, I64, _zz(rows)),
        (4, LIST, _list(STRUCT, [_struct(
            (1, LIST, _list(STRUCT, [_struct((2, I64, _zz(offset)), (3, STRUCT, _struct(
                (1, I32, _zz(6)), (2, LIST, _list(I32, [_zz(0)])), (3, LIST, _list(BINARY, [_binary(b"v")])),
                (4, I32, _zz(6)), (5, I64, _zz(rows)), (6, I64, _zz(total + len(header))),
                (7, I64, _zz(len(body) + len(header))), (9, I64, _zz(offset)),
            )))])),
            (2, I64, _zz(total)), (3, I64, _zz(rows)),
        )])),
    )
    data = b"PAR1" + header + body + meta + struct.pack("<i", len(meta)) + b"PAR1"
    path.write_bytes(data)
    return len(data)
