"""Reading Avro object container files: the manifest lists and manifests an Iceberg snapshot is made of.

The catalog never needed them (a commit carries its snapshot's summary), but the web UI's table pages do:
which data files a snapshot holds, for a preview of its rows and a row diff.  The reader follows the Avro
specification's binary encoding and object container format (header with the writer's schema and codec,
then blocks of records, each followed by the file's sync marker) for every type Iceberg writes: records,
unions, arrays, maps, enums, fixed and the primitives; logical types are returned as their underlying
values.  Codecs: ``null``, ``deflate`` (Java's and pyiceberg's default), ``snappy`` and ``zstandard``
(through pyarrow's codecs).  Anything malformed is an :class:`AvroError` with a one-line message; sizes
are bounded (``MAX_BLOCK`` bytes of a decoded block), so a crafted file cannot take the server's memory.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any, Final

MAGIC: Final = b"Obj\x01"
MAX_BLOCK: Final = 64 << 20  # bytes one block may decode to
MAX_DEPTH: Final = 64
PRIMITIVES: Final = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


class AvroError(ValueError):
    """An Avro file that cannot be read: cut short, malformed, or of an unknown codec."""


class _Buf:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise AvroError("Avro data cut short")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def long(self) -> int:
        out = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise AvroError("Avro data cut short")
            b = self.data[self.pos]
            self.pos += 1
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return (out >> 1) ^ -(out & 1)
            shift += 7
            if shift > 63:
                raise AvroError("Avro varint too long")


class _Schema:
    """A writer's schema with its named types, read once per file."""

    def __init__(self, schema: Any) -> None:
        self.named: dict[str, Any] = {}
        self.root = schema
        self._register(schema, "", 0)

    def _register(self, s: Any, space: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise AvroError("Avro schema nested too deeply")
        if isinstance(s, list):
            for branch in s:
                self._register(branch, space, depth + 1)
            return
        if not isinstance(s, dict):
            return
        kind = s.get("type")
        if kind in ("record", "error", "enum", "fixed") and isinstance(s.get("name"), str):
            name = s["name"]
            ns = s.get("namespace", space) if "." not in name else name.rpartition(".")[0]
            full = name if "." in name or not ns else f"{ns}.{name}"
            self.named[full] = s
            self.named.setdefault(full.rpartition(".")[2], s)
            space = ns or ""
        if kind in ("record", "error"):
            for f in s.get("fields", []):
                if not isinstance(f, dict) or "type" not in f or not isinstance(f.get("name"), str):
                    raise AvroError("Avro schema: a record field without name or type")
                self._register(f["type"], space, depth + 1)
        elif kind == "array":
            self._register(s.get("items"), space, depth + 1)
        elif kind == "map":
            self._register(s.get("values"), space, depth + 1)
        elif isinstance(kind, (dict, list)):
            self._register(kind, space, depth + 1)

    def read(self, s: Any, buf: _Buf, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise AvroError("Avro value nested too deeply")
        if isinstance(s, str):
            if s in PRIMITIVES:
                return self._primitive(s, buf)
            named = self.named.get(s) or self.named.get(s.rpartition(".")[2])
            if named is None:
                raise AvroError(f"Avro schema names an unknown type {s[:100]!r}")
            return self.read(named, buf, depth + 1)
        if isinstance(s, list):
            i = buf.long()
            if not 0 <= i < len(s):
                raise AvroError(f"Avro union branch {i} out of range")
            return self.read(s[i], buf, depth + 1)
        if not isinstance(s, dict):
            raise AvroError("Avro schema: a type is neither a name, a union nor an object")
        kind = s.get("type")
        if kind in ("record", "error"):
            return {f["name"]: self.read(f["type"], buf, depth + 1) for f in s["fields"]}
        if kind == "array":
            return [self.read(s["items"], buf, depth + 1) for _ in self._blocks(buf)]
        if kind == "map":
            out = {}
            for _ in self._blocks(buf):
                key = self._primitive("string", buf)
                out[key] = self.read(s["values"], buf, depth + 1)
            return out
        if kind == "enum":
            i = buf.long()
            symbols = s.get("symbols", [])
            if not 0 <= i < len(symbols):
                raise AvroError(f"Avro enum index {i} out of range")
            return symbols[i]
        if kind == "fixed":
            return buf.take(int(s.get("size", 0)))
        return self.read(kind, buf, depth + 1)  # {"type": "long", "logicalType": ...} and the like

    @staticmethod
    def _blocks(buf: _Buf) -> Iterator[None]:
        while True:
            n = buf.long()
            if n == 0:
                return
            if n < 0:
                n = -n
                buf.long()  # the block's size in bytes, for skipping
            if n > len(buf.data):
                raise AvroError("Avro block count larger than its data")
            for _ in range(n):
                yield None

    @staticmethod
    def _primitive(kind: str, buf: _Buf) -> Any:
        if kind == "null":
            return None
        if kind == "boolean":
            return buf.take(1) != b"\x00"
        if kind in ("int", "long"):
            return buf.long()
        if kind == "float":
            return struct.unpack("<f", buf.take(4))[0]
        if kind == "double":
            return struct.unpack("<d", buf.take(8))[0]
        raw = buf.take(buf.long())
        return raw.decode("utf-8", "replace") if kind == "string" else raw


def _decompress(codec: str, data: bytes) -> bytes:
    if codec == "null":
        return data
    if codec == "deflate":
        d = zlib.decompressobj(-15)
        out = d.decompress(data, MAX_BLOCK + 1)
        if len(out) > MAX_BLOCK:
            raise AvroError(f"an Avro block decodes to more than {MAX_BLOCK} bytes")
        return out
    import pyarrow as pa

    if codec == "snappy":  # a raw snappy block (its length first, as a varint) and a CRC-32 of the result
        body, size, shift, i = data[:-4], 0, 0, 0
        while i < len(body):
            b = body[i]
            size |= (b & 0x7F) << shift
            i += 1
            if not b & 0x80:
                break
            shift += 7
        name = "snappy"
    elif codec == "zstandard":
        body, size, name = data, _zstd_size(data), "zstd"
    else:
        raise AvroError(f"Avro codec {codec[:40]!r} is not supported (null, deflate, snappy, zstandard are)")
    if size > MAX_BLOCK:
        raise AvroError(f"an Avro block decodes to more than {MAX_BLOCK} bytes")
    try:
        return bytes(pa.decompress(body, decompressed_size=size, codec=name))
    except (pa.ArrowException, ValueError) as e:
        raise AvroError(f"Avro {codec} block: {str(e)[:200]}") from None


def _zstd_size(data: bytes) -> int:
    """The content size a zstd frame's header declares (the writers Iceberg uses always declare it)."""
    if len(data) < 6 or data[:4] != b"\x28\xb5\x2f\xfd":
        raise AvroError("Avro zstandard block is no zstd frame")
    desc = data[4]
    fcs_flag, single = desc >> 6, (desc >> 5) & 1
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[desc & 3]
    width = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if not width or pos + width > len(data):
        raise AvroError("Avro zstandard block does not declare its size")
    size = int.from_bytes(data[pos:pos + width], "little")
    return size + 256 if width == 2 else size


def records(data: bytes) -> Iterator[dict[str, Any]]:
    """The records of an Avro object container file held in ``data``, in order; raises ``AvroError``."""
    buf = _Buf(data)
    if buf.take(4) != MAGIC:
        raise AvroError("not an Avro object container file")
    meta: dict[str, bytes] = {}
    for _ in _Schema._blocks(buf):
        key = _Schema._primitive("string", buf)
        meta[key] = buf.take(buf.long())
    sync = buf.take(16)
    try:
        parsed = json.loads(meta.get("avro.schema", b""))
    except ValueError:
        raise AvroError("Avro file without a readable schema") from None
    schema = _Schema(parsed)
    codec = meta.get("avro.codec", b"null").decode("ascii", "replace") or "null"
    while buf.pos < len(data):
        count, size = buf.long(), buf.long()
        if count < 0 or size < 0:
            raise AvroError("Avro block with a negative count or size")
        block = _Buf(_decompress(codec, buf.take(size)))
        for _ in range(count):
            out = schema.read(schema.root, block)
            if not isinstance(out, dict):
                raise AvroError("an Avro file of Iceberg holds records")
            yield out
        if buf.take(16) != sync:
            raise AvroError("Avro block not followed by the file's sync marker")
