"""The Avro reader of the table pages (``lakemount/iceberg/avro.py``): every type Iceberg's manifests use, in each
codec (files written here by a small encoder that follows the specification, beside the manifests pyiceberg
writes, which tests/api/test_iceberg_tables.py reads), and a one-line ``AvroError`` for each kind of bad file."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import pyarrow as pa
import pytest

from lakemount.iceberg.avro import MAX_BLOCK, AvroError, records

SYNC = bytes(range(16))
SCHEMA = {"type": "record", "name": "manifest_entry", "namespace": "iceberg", "fields": [
    {"name": "status", "type": "int"},
    {"name": "snapshot_id", "type": ["null", "long"]},
    {"name": "data_file", "type": {"type": "record", "name": "r2", "fields": [
        {"name": "file_path", "type": "string"},
        {"name": "record_count", "type": "long"},
        {"name": "partition", "type": {"type": "record", "name": "r102", "fields": [
            {"name": "region", "type": ["null", "string"]}]}},
        {"name": "lower_bounds", "type": ["null", {"type": "array", "items": {"type": "record", "name": "k126_v127", "fields": [
            {"name": "key", "type": "int"}, {"name": "value", "type": "bytes"}]}}]},
        {"name": "props", "type": {"type": "map", "values": "double"}},
        {"name": "kind", "type": {"type": "enum", "name": "kinds", "symbols": ["DATA", "DELETES"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "md5", "size": 4}},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "again", "type": ["null", "r102"]},  # a named type used by name
    ]}},
]}


def zz(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def text(s: str | bytes) -> bytes:
    raw = s.encode() if isinstance(s, str) else s
    return zz(len(raw)) + raw


def entry(i: int) -> bytes:
    """One manifest entry of ``SCHEMA``, encoded."""
    out = zz(1) + zz(1) + zz(1000 + i)
    out += text(f"s3://r/main/db/t/data/{i}.parquet") + zz(10 * i)
    out += zz(1) + text("eu" if i % 2 else "us")
    out += zz(1) + zz(2) + zz(1) + text(b"\x00\x01") + zz(2) + text(b"") + zz(0)  # union: array of two records
    out += zz(-1) + zz(len(text("x") + struct.pack("<d", 0.5))) + text("x") + struct.pack("<d", 0.5) + zz(0)  # sized block
    out += zz(i % 2) + b"abcd" + struct.pack("<f", 0.25) + b"\x01" + zz(0)
    return out


def expected(i: int) -> dict[str, Any]:
    return {"status": 1, "snapshot_id": 1000 + i, "data_file": {
        "file_path": f"s3://r/main/db/t/data/{i}.parquet", "record_count": 10 * i, "partition": {"region": "eu" if i % 2 else "us"},
        "lower_bounds": [{"key": 1, "value": b"\x00\x01"}, {"key": 2, "value": b""}], "props": {"x": 0.5},
        "kind": ["DATA", "DELETES"][i % 2], "digest": b"abcd", "ratio": 0.25, "ok": True, "again": None}}


def compress(codec: str, data: bytes) -> bytes:
    if codec == "null":
        return data
    if codec == "deflate":
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if codec == "snappy":
        return bytes(pa.compress(data, codec="snappy", asbytes=True)) + struct.pack(">I", zlib.crc32(data))
    return bytes(pa.compress(data, codec="zstd", asbytes=True))


def container(codec: str, blocks: list[list[bytes]], schema: Any = SCHEMA, sync: bytes = SYNC) -> bytes:
    meta = {"avro.schema": json.dumps(schema).encode(), "avro.codec": codec.encode()}
    out = b"Obj\x01" + zz(len(meta)) + b"".join(text(k) + text(v) for k, v in meta.items()) + zz(0) + SYNC
    for block in blocks:
        body = compress(codec, b"".join(block))
        out += zz(len(block)) + zz(len(body)) + body + sync
    return out


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
def test_every_type_of_a_manifest_reads_back_in_each_codec(codec: str) -> None:
    data = container(codec, [[entry(0), entry(1)], [entry(2)]])
    assert list(records(data)) == [expected(0), expected(1), expected(2)]


@pytest.mark.parametrize(("data", "words"), [
    (b"PAR1" + b"\x00" * 40, "not an Avro object container file"),
    (container("null", [[entry(0)]])[:-20], "cut short"),
    (container("null", [[entry(0)]], sync=b"\xff" * 16), "sync marker"),
    (container("brotli", [[entry(0)]]), "codec 'brotli' is not supported"),
    (container("null", [[zz(1) + zz(7)]]), "union branch 7 out of range"),
    (container("null", [[b"\x02"]], schema={"type": "record", "name": "r", "fields": [{"name": "a", "type": "nope"}]}),
     "unknown type 'nope'"),
    (container("null", [[b""]], schema={"type": "record", "name": "r", "fields": [{"name": "a"}]}), "without name or type"),
    (container("deflate", [[b"\x00" * (MAX_BLOCK + 10)]]), "decodes to more than"),
    (container("null", [[b"\x02"]], schema="int"), "holds records"),
])
def test_a_bad_file_is_one_avro_error(data: bytes, words: str) -> None:
    with pytest.raises(AvroError, match=words) as e:
        list(records(data))
    assert "\n" not in str(e.value)
