"""Reading ranges and metaranges straight from the block store, and what GC needs of their records.

Jobs read every table once, so they skip the committed store's caches and
go to the block adapter: fetch, verify the xxh3-128 checksum the parent
recorded, parse with graveler's ``TableReader``.  GC needs only one field of
each record, the physical address, and reads it without decoding the whole
entry (a record value is a 16-byte identity, a version byte, then a msgpack
array whose first element is the address).

Layout of a storage namespace that GC relies on (anything else is left alone):
``data/<aa>/<sha256>`` for data objects and ``_lakefs/<64 hex>`` for tables.
"""

from __future__ import annotations

import re
from typing import Final

import xxhash

from lakemount.errors import ChecksumMismatch, Corrupt, ObjectNotFound
from lakemount.graveler.committed.store import table_url
from lakemount.graveler.model import ENTRY_VERSION, IDENTITY_LEN, EMPTY_METARANGE, RangeInfo, decode_value
from lakemount.graveler.ports import BlockAdapter
from lakemount.graveler.sstable import TableReader

HEX64: Final = re.compile(r"[0-9a-f]{64}")
DATA_PREFIX: Final = "data/"
TABLE_PREFIX: Final = "_lakefs/"


def read_table(adapter: BlockAdapter, namespace: str, table_id: str, checksum: str, what: str = "table") -> TableReader:
    """A verified reader of one table; ``Corrupt`` if it is missing or damaged."""
    try:
        data = adapter.get(table_url(namespace, table_id))
    except ObjectNotFound as exc:
        raise Corrupt(f"missing {what} {table_id} in {namespace}: the repository's metadata is damaged") from exc
    if checksum and xxhash.xxh3_128_hexdigest(data) != checksum:
        raise ChecksumMismatch(f"{what} {table_id} in {namespace}")
    return TableReader(data, name=f"{what} {table_id}")


def metarange_ranges(adapter: BlockAdapter, namespace: str, metarange_id: str, checksum: str) -> list[RangeInfo]:
    """The ranges a metarange lists (none for the empty metarange)."""
    if metarange_id == EMPTY_METARANGE:
        return []
    reader = read_table(adapter, namespace, metarange_id, checksum, "metarange")
    return [RangeInfo.decode(k, v) for k, v in reader.items()]


def value_address(value: bytes) -> str:
    """The physical address stored in a record value, without decoding the rest."""
    i = IDENTITY_LEN
    if len(value) > i + 3 and value[i] == ENTRY_VERSION and value[i + 1] == 0x9A:
        h = value[i + 2]
        start = i + 3
        if 0xA0 <= h <= 0xBF:
            n = h & 0x1F
        elif h == 0xD9:
            n, start = value[start], start + 1
        elif h == 0xDA:
            n, start = int.from_bytes(value[start : start + 2], "big"), start + 2
        else:
            return decode_value(value).address
        return value[start : start + n].decode("utf-8")
    return decode_value(value).address


def namespace_key(address: str, namespace: str) -> str | None:
    """``address`` relative to ``namespace``; None for an absolute URL elsewhere (imported data)."""
    if "://" not in address:
        return address
    root = namespace.rstrip("/") + "/"
    if address.startswith(root):
        return address[len(root) :]
    return None


def data_sha(key: str) -> str | None:
    """The sha256 of a ``data/<aa>/<sha256>`` key, None for any other key.

    Only the shape is checked here (cheap, per record); candidates for deletion
    are validated strictly when listed, so a malformed live key can only keep
    something, never delete it.
    """
    if len(key) == 72 and key.startswith(DATA_PREFIX) and key[7] == "/" and key[5:7] == key[8:10]:
        return key[8:]
    return None


def is_data_name(prefix2: str, name: str) -> bool:
    """Whether ``name`` listed under ``data/<prefix2>/`` is a data object GC may collect."""
    return len(name) == 64 and name.startswith(prefix2) and HEX64.fullmatch(name) is not None


def is_table_name(name: str) -> bool:
    """Whether ``name`` listed under ``_lakefs/`` is a range or metarange GC may collect."""
    return len(name) == 64 and HEX64.fullmatch(name) is not None
