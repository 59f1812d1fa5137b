"""RocksDB block-based SSTables: written and read by our own code.

Ranges and metaranges are stored as RocksDB-compatible SSTables so RocksDB's own
tools (``sst_dump``, ``org.rocksdb.SstFileReader``) can read them.  Writing is
``encode_table``: the whole table in one C call (``_sstblock.encode_table``, with
``encode_table_py`` its pure-Python twin), its bytes returned in memory to be
stored as they are.  (RocksDB's ``SstFileWriter``, through rocksdict, needed a
temp file per table and was a fifth of a large commit's CPU time.)  The table is
a deterministic function of its records: two writers of the same records write
the same bytes.

Reading uses the parser below: it holds the whole file in memory (ranges are
small and immutable, and they come from a cache), decodes the index block once,
and decodes a data block only when a lookup or a scan reaches it.  That keeps a
warm point lookup to two bisects, and a cold one to one index block and one data
block.  It reads both index layouts RocksDB writes (internal or user keys, full
or delta-encoded handles), so tables written by RocksDB read too.

Blocks are written uncompressed: the reader is pure Python, and decompressing
costs more than the bytes it saves for metadata this size.  Integrity is
checked per file (an xxh3-128 of the whole table, recorded by whoever points at
the file), so per-block checksums are written (RocksDB's readers check them)
but not verified here.
"""

from __future__ import annotations

import os
import struct
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Final

from lakemount.errors import Corrupt

BLOCK_MAGIC: Final = 0x88E241B785F4CFF7
FOOTER_LEN: Final = 53
TRAILER_LEN: Final = 5  # compression type byte + 32-bit checksum
FORMAT_VERSION: Final = 5  # Debian's sst_dump (RocksDB 7.8) rejects format_version 6
BLOCK_SIZE: Final = 16 * 1024
RESTART_INTERVAL: Final = 16  # records between two full keys in a data block (RocksDB's default)
CHECKSUM_CRC32C: Final = 1  # the footer's checksum type: RocksDB's default, what its readers expect
# A user key's internal-key trailer: sequence number 0, type 1 (a value), as a file made for ingestion has.
KEY_TRAILER: Final = b"\x01" + bytes(7)
HOT_AFTER: Final = 32  # point lookups on one table before it is turned into a dict
# Scans of one block before its values are kept decoded (``scan(decode=...)``):
# a block read once (a bulk scan) is not worth the memory, one listed again
# (a directory page clients keep asking for) is.  Decoded values of all tables
# together stay within DECODED_BUDGET values (an entry is ~500 bytes decoded),
# the least recently scanned blocks dropped first.
DECODE_AFTER: Final = 1
DECODED_BUDGET: Final = 1 << 16


class _DecodedBlocks:
    """The (table, block) pairs whose values are kept decoded, least recently scanned first."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._lru: OrderedDict[tuple[TableReader, int], list[Any]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, reader: TableReader, i: int) -> list[Any] | None:
        with self._lock:
            values = self._lru.get((reader, i))
            if values is not None:
                self._lru.move_to_end((reader, i))
            return values

    def put(self, reader: TableReader, i: int, values: list[Any]) -> None:
        with self._lock:
            old = self._lru.pop((reader, i), None)
            self._total += len(values) - (len(old) if old is not None else 0)
            self._lru[(reader, i)] = values
            while self._total > self.budget and self._lru:
                self._total -= len(self._lru.popitem(last=False)[1])

    def drop(self, reader: TableReader) -> None:
        with self._lock:
            for key in [k for k in self._lru if k[0] is reader]:
                self._total -= len(self._lru.pop(key))


DECODED = _DecodedBlocks(DECODED_BUDGET)

_u32 = struct.Struct("<I")


# --------------------------------------------------------------------------- writing


def _put_varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _block_crc(block: bytes) -> int:
    """The block trailer's checksum: CRC-32C of the block and its type byte, masked as RocksDB stores it."""
    # Only the pure-Python writer needs it: the crc32c package imports importlib.metadata at load (~25 ms
    # of every CLI verb's start, issue 41), so readers and the C writer never load it.
    import crc32c

    c = crc32c.crc32c(block)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _end_block(records: bytes, restarts: list[int]) -> bytes:
    """A block of ``records`` (restarting at ``restarts``), uncompressed, with its trailer."""
    block = records + struct.pack(f"<{len(restarts) + 1}I", *restarts, len(restarts)) + b"\x00"
    return block + _u32.pack(_block_crc(block))


def _plain_block(keys: list[bytes], values: list[bytes]) -> bytes:
    """A block of restart interval 1 (each key whole): index, properties and meta-index blocks."""
    records = bytearray()
    restarts = []
    for k, v in zip(keys, values):
        restarts.append(len(records))
        records += b"\x00" + _put_varint(len(k)) + _put_varint(len(v)) + k + v
    return _end_block(bytes(records), restarts)


def encode_table_py(keys: list[bytes], values: list[bytes], block_size: int, interval: int, format_version: int) -> bytes:
    """The SSTable holding ``keys`` (strictly increasing, at least one) and their ``values``: the pure-Python
    twin of ``_sstblock.encode_table`` (``tests/graveler/test_sstencode.py`` compares them byte for byte).

    Data blocks hold internal keys (``key + KEY_TRAILER``), each prefix-compressed against the one before
    it except every ``interval``-th (a restart); a block is cut before a record once it holds
    ``block_size`` bytes.  The index block has one record per data block: its last internal key and its
    (offset, size) handle.  Then the properties block (what RocksDB's ``SstFileWriter`` records that says
    how to read the table: comparator, compression, index layout, counts; no session id, time or host,
    so the bytes depend on the records only), the meta-index pointing at it, and the footer.
    Raises ValueError for no records or keys not strictly increasing.
    """
    if len(keys) != len(values) or interval < 1 or block_size < 1:
        raise ValueError("encode_table: lists of different lengths or a bad block shape")
    if not keys:
        raise ValueError("encode_table: a table needs at least one record")
    if any(a >= b for a, b in zip(keys, keys[1:])):
        raise ValueError("encode_table: keys must be strictly increasing")
    body = bytearray()
    index_keys: list[bytes] = []
    handles: list[bytes] = []
    records = bytearray()
    restarts: list[int] = []
    count = 0
    prev = b""
    v = _put_varint

    def end_block() -> None:
        offset = len(body)
        body.extend(_end_block(bytes(records), restarts))
        index_keys.append(prev)
        handles.append(v(offset) + v(len(body) - offset - TRAILER_LEN))

    for key, value in zip(keys, values):
        ik = key + KEY_TRAILER
        if count and len(records) + 4 * len(restarts) + 4 >= block_size:
            end_block()
            records.clear()
            restarts.clear()
            count = 0
        if count % interval == 0:
            restarts.append(len(records))
            shared = 0
        else:
            shared = len(os.path.commonprefix([prev, ik]))
        records += v(shared) + v(len(ik) - shared) + v(len(value)) + ik[shared:] + value
        prev = ik
        count += 1
    end_block()
    index_off = len(body)
    body += _plain_block(index_keys, handles)
    index_size = len(body) - index_off - TRAILER_LEN
    props = {
        b"rocksdb.block.based.table.index.type": _u32.pack(0),  # binary search
        b"rocksdb.block.based.table.prefix.filtering": b"0",
        b"rocksdb.block.based.table.whole.key.filtering": b"1",
        b"rocksdb.comparator": b"leveldb.BytewiseComparator",
        b"rocksdb.compression": b"NoCompression",
        b"rocksdb.data.size": v(index_off),
        b"rocksdb.deleted.keys": v(0),
        b"rocksdb.external_sst_file.global_seqno": struct.pack("<Q", 0),
        b"rocksdb.external_sst_file.version": _u32.pack(2),
        b"rocksdb.filter.size": v(0),
        b"rocksdb.fixed.key.length": v(0),
        b"rocksdb.format.version": v(0),
        b"rocksdb.index.key.is.user.key": v(0),
        b"rocksdb.index.size": v(index_size + TRAILER_LEN),
        b"rocksdb.index.value.is.delta.encoded": v(0),
        b"rocksdb.key.largest.seqno": v(0),
        b"rocksdb.merge.operands": v(0),
        b"rocksdb.merge.operator": b"nullptr",
        b"rocksdb.num.data.blocks": v(len(index_keys)),
        b"rocksdb.num.entries": v(len(keys)),
        b"rocksdb.num.range-deletions": v(0),
        b"rocksdb.prefix.extractor.name": b"nullptr",
        b"rocksdb.property.collectors": b"[]",
        b"rocksdb.raw.key.size": v(sum(map(len, keys)) + len(KEY_TRAILER) * len(keys)),
        b"rocksdb.raw.value.size": v(sum(map(len, values))),
    }
    names = sorted(props)
    props_block = _plain_block(names, [props[n] for n in names])
    meta_off = len(body) + len(props_block)
    meta_block = _plain_block([b"rocksdb.properties"], [v(len(body)) + v(len(props_block) - TRAILER_LEN)])
    footer_handles = v(meta_off) + v(len(meta_block) - TRAILER_LEN) + v(index_off) + v(index_size)
    footer = (bytes([CHECKSUM_CRC32C]) + footer_handles).ljust(FOOTER_LEN - 12, b"\x00")
    return b"".join((body, props_block, meta_block, footer, struct.pack("<IQ", format_version, BLOCK_MAGIC)))


try:
    from lakemount.graveler._sstblock import encode_table as _encode_table_c
except ImportError:  # built without a compiler (or from older sources): the pure-Python loop, ~50x slower
    _encode_table_c = None


def encode_table(keys: list[bytes], values: list[bytes]) -> bytes:
    """The SSTable holding ``keys`` (strictly increasing, at least one) and their ``values``
    (``encode_table_py`` says how).  Raises ValueError for no records or keys out of order."""
    if _encode_table_c is not None:
        return _encode_table_c(keys, values, BLOCK_SIZE, RESTART_INTERVAL, FORMAT_VERSION)  # type: ignore[no-any-return]
    return encode_table_py(keys, values, BLOCK_SIZE, RESTART_INTERVAL, FORMAT_VERSION)




# --------------------------------------------------------------------------- reading


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _signed_varint(buf: bytes, pos: int) -> tuple[int, int]:
    v, pos = _varint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def _block_entries_py(data: bytes, offset: int, size: int, strip: int = 0) -> tuple[list[bytes], list[bytes]]:
    """Decode a data or meta block into parallel lists of keys (minus ``strip``
    trailing bytes) and values.  The C extension ``_sstblock`` does the same ~20x faster."""
    keys, values = _block_entries_raw(data, offset, size)
    if strip:
        keys = [k[:-strip] for k in keys]
    return keys, values


def _block_entries_raw(data: bytes, offset: int, size: int) -> tuple[list[bytes], list[bytes]]:
    end = offset + size
    num_restarts = _u32.unpack_from(data, end - 4)[0] & 0x7FFFFFFF
    limit = end - 4 - 4 * num_restarts
    keys: list[bytes] = []
    values: list[bytes] = []
    kappend = keys.append
    vappend = values.append
    pos = offset
    key = b""
    while pos < limit:
        shared = data[pos]
        if shared < 0x80:
            pos += 1
        else:
            shared, pos = _varint(data, pos)
        non_shared = data[pos]
        if non_shared < 0x80:
            pos += 1
        else:
            non_shared, pos = _varint(data, pos)
        vlen = data[pos]
        if vlen < 0x80:
            pos += 1
        else:
            vlen, pos = _varint(data, pos)
        kend = pos + non_shared
        key = key[:shared] + data[pos:kend] if shared else data[pos:kend]
        kappend(key)
        vappend(data[kend : kend + vlen])
        pos = kend + vlen
    return keys, values


try:
    from lakemount.graveler._sstblock import decode_block as _decode_block_c
except ImportError:  # built without a compiler: the pure-Python loop
    _decode_block_c = None


def _block_entries(data: bytes, offset: int, size: int, strip: int = 0) -> tuple[list[bytes], list[bytes]]:
    if _decode_block_c is not None:
        try:
            return _decode_block_c(data, offset, size, strip)  # type: ignore[no-any-return]
        except ValueError as exc:
            raise struct.error(str(exc)) from exc
    return _block_entries_py(data, offset, size, strip)


def _index_entries(
    data: bytes, offset: int, size: int, delta_encoded: bool
) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Decode an index block: separator keys and (offset, size) block handles."""
    end = offset + size
    num_restarts = _u32.unpack_from(data, end - 4)[0] & 0x7FFFFFFF
    restarts = {
        _u32.unpack_from(data, end - 4 - 4 * (num_restarts - i))[0] + offset for i in range(num_restarts)
    }
    limit = end - 4 - 4 * num_restarts
    keys: list[bytes] = []
    handles: list[tuple[int, int]] = []
    pos = offset
    key = b""
    prev_off = prev_size = 0
    while pos < limit:
        at_restart = pos in restarts
        shared, pos = _varint(data, pos)
        non_shared, pos = _varint(data, pos)
        if not delta_encoded:
            _vlen, pos = _varint(data, pos)
        key = key[:shared] + data[pos : pos + non_shared]
        pos += non_shared
        if delta_encoded and not at_restart:
            delta, pos = _signed_varint(data, pos)
            blk_off = prev_off + prev_size + TRAILER_LEN
            blk_size = prev_size + delta
        else:
            blk_off, pos = _varint(data, pos)
            blk_size, pos = _varint(data, pos)
        keys.append(key)
        handles.append((blk_off, blk_size))
        prev_off, prev_size = blk_off, blk_size
    return keys, handles


class TableReader:
    """Read an SSTable held in memory.

    Keys are user keys (RocksDB's 8-byte internal-key trailer is stripped).
    Raises ``Corrupt`` when the bytes are not a table this reader understands.
    """

    __slots__ = ("_blocks", "_data", "_gets", "_handles", "_index_keys", "_map", "_scans", "count", "name")

    def __init__(self, data: bytes, name: str = "table") -> None:
        self.name = name
        self._data = data
        try:
            self._parse_footer()
        except (IndexError, struct.error, ValueError) as exc:
            raise Corrupt(f"{name}: not a readable SSTable ({exc})") from exc
        self._blocks: dict[int, tuple[list[bytes], list[bytes]]] = {}
        self._map: dict[bytes, bytes] | None = None
        self._gets = 0
        self._scans: dict[int, int] = {}

    def _parse_footer(self) -> None:
        data = self._data
        if len(data) < FOOTER_LEN:
            raise ValueError("file too short")
        footer = len(data) - FOOTER_LEN
        magic = struct.unpack_from("<Q", data, len(data) - 8)[0]
        if magic != BLOCK_MAGIC:
            raise ValueError("bad magic number")
        pos = footer + 1  # checksum type
        meta_off, pos = _varint(data, pos)
        meta_size, pos = _varint(data, pos)
        index_off, pos = _varint(data, pos)
        index_size, pos = _varint(data, pos)
        mkeys, mvals = _block_entries(data, meta_off, meta_size)
        props: dict[bytes, bytes] = {}
        for k, v in zip(mkeys, mvals):
            if k == b"rocksdb.properties":
                p_off, p = _varint(v, 0)
                p_size, _ = _varint(v, p)
                pk, pv = _block_entries(data, p_off, p_size)
                props = dict(zip(pk, pv))
        user_keys = props.get(b"rocksdb.index.key.is.user.key", b"\x00") not in (b"\x00", b"")
        delta = props.get(b"rocksdb.index.value.is.delta.encoded", b"\x00") not in (b"\x00", b"")
        self.count = _varint(props[b"rocksdb.num.entries"], 0)[0] if b"rocksdb.num.entries" in props else -1
        ikeys, handles = _index_entries(data, index_off, index_size, delta)
        if not user_keys:
            ikeys = [k[:-8] for k in ikeys]
        self._index_keys = ikeys
        self._handles = handles

    def _block(self, i: int) -> tuple[list[bytes], list[bytes]]:
        blk = self._blocks.get(i)
        if blk is None:
            off, size = self._handles[i]
            try:
                blk = _block_entries(self._data, off, size, 8)
            except (IndexError, struct.error) as exc:
                raise Corrupt(f"{self.name}: bad data block at {off}") from exc
            self._blocks[i] = blk
        return blk

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key``, or None.

        The first lookups decode only the one block that can hold the key; a
        table that keeps being asked is turned into a hash map, so warm point
        lookups cost one dict probe.
        """
        table = self._map
        if table is not None:
            return table.get(key)
        self._gets += 1
        if self._gets > HOT_AFTER:
            self._map = table = dict(self.items())
            return table.get(key)
        i = bisect_left(self._index_keys, key)
        if i == len(self._index_keys):
            return None
        keys, values = self._block(i)
        j = bisect_left(keys, key)
        if j < len(keys) and keys[j] == key:
            return values[j]
        return None

    def scan(self, start: bytes = b"", decode: Callable[[bytes], Any] | None = None) -> Iterator[tuple[bytes, Any]]:
        """Records with key >= ``start`` in key order; with ``decode``, values as ``decode`` returns them.

        Values are immutable, so a block scanned with ``decode`` more than
        ``DECODE_AFTER`` times keeps its decoded values (one ``decode`` per
        table reader and block, whatever the caller); ``decode`` must be a pure
        function of the bytes, and always the same one for a table.
        """
        i = bisect_left(self._index_keys, start) if start else 0
        n = len(self._index_keys)
        first = True
        while i < n:
            keys, values = self._block(i)
            j = bisect_left(keys, start) if first and start else 0
            first = False
            if j:
                keys, values = keys[j:], values[j:]
            if decode is None:
                yield from zip(keys, values)
            else:
                done = self._decoded_values(i, decode)
                yield from zip(keys, map(decode, values) if done is None else done[j:] if j else done)
            i += 1

    def _decoded_values(self, i: int, decode: Callable[[bytes], Any]) -> list[Any] | None:
        """Block ``i``'s decoded values once it has been scanned ``DECODE_AFTER`` times, else None."""
        done = DECODED.get(self, i)
        if done is None:
            seen = self._scans.get(i, 0)
            if seen < DECODE_AFTER:
                self._scans[i] = seen + 1
                return None
            done = [decode(v) for v in self._block(i)[1]]
            DECODED.put(self, i, done)
        return done

    def block_bounds(self) -> list[bytes]:
        """Each data block's index key: at or after its last key, before the next block's first."""
        return self._index_keys

    def block_bytes(self, i: int) -> bytes:
        """Block ``i`` as stored (its records, prefix-compressed from its own start)."""
        off, size = self._handles[i]
        return self._data[off:off + size]

    def block_items(self, i: int) -> list[tuple[bytes, bytes]]:
        keys, values = self._block(i)
        return list(zip(keys, values))

    def items(self) -> list[tuple[bytes, bytes]]:
        """All records, decoded at once (faster than ``scan`` for whole-table work)."""
        keys, values = self.arrays()
        return list(zip(keys, values))

    def arrays(self) -> tuple[list[bytes], list[bytes]]:
        """All records as parallel lists of keys and values (whole-table work without a tuple per record)."""
        keys: list[bytes] = []
        values: list[bytes] = []
        for i in range(len(self._index_keys)):
            ks, vs = self._block(i)
            keys += ks
            values += vs
        return keys, values

    def drop_blocks(self) -> None:
        """Forget decoded blocks (memory); they are decoded again on demand."""
        self._blocks.clear()
        self._scans.clear()
        DECODED.drop(self)
        self._map = None
        self._gets = 0
