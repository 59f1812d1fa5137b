"""Cached block reads of data objects (catalog/blocks.py): what the gateway, the API and the mount share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakemount.block.flaky import FlakyAdapter
from lakemount.block.local import LocalAdapter
from lakemount.block.memory import MemoryAdapter
from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.catalog.blocks import BLOCK_SIZE, CachedBlocks, block_key
from lakemount.errors import ObjectNotFound

URL = "mem://bucket/ns/data/ab/abcdef"
SIZE = 3 * BLOCK_SIZE + 4099  # three whole blocks and a partial one
READS = ("get", "get_range", "open")


def _data(n: int) -> bytes:
    return (os.urandom(4096) * (n // 4096 + 1))[:n]


def _reads(adapter: FlakyAdapter) -> int:
    return sum(adapter.calls[op] for op in READS)


@pytest.fixture
def store() -> tuple[FlakyAdapter, bytes]:
    inner = MemoryAdapter()
    data = _data(SIZE)
    inner.put(URL, data)
    return FlakyAdapter(inner), data


def blocks_over(adapter: FlakyAdapter, tmp_path: Path) -> CachedBlocks:
    return CachedBlocks(adapter, RamCache(64 << 20), DiskCache(tmp_path / "cache", 64 << 20))


RANGES = [(0, SIZE), (0, 1), (5, 4096), (BLOCK_SIZE - 3, 7), (2 * BLOCK_SIZE + 5, 100), (SIZE - 10, 10),
          (SIZE - 10, 1000), (BLOCK_SIZE, BLOCK_SIZE), (1, SIZE - 2)]


@pytest.mark.parametrize(("start", "length"), RANGES)
def test_ranges_read_right_cold_and_warm_and_warm_asks_the_store_nothing(store: tuple[FlakyAdapter, bytes], tmp_path: Path,
                                                                        start: int, length: int) -> None:
    adapter, data = store
    blocks = blocks_over(adapter, tmp_path)
    want = data[start : start + length]
    assert blocks.read(URL, "etag", SIZE, start, length) == want
    assert b"".join(blocks.chunks(URL, "etag", SIZE, start, length)) == want
    before = _reads(adapter)
    assert blocks.read(URL, "etag", SIZE, start, length) == want
    assert b"".join(blocks.chunks(URL, "etag", SIZE, start, length)) == want
    assert _reads(adapter) == before


def test_a_cold_stream_is_one_request_and_skips_blocks_already_cached(store: tuple[FlakyAdapter, bytes], tmp_path: Path) -> None:
    adapter, data = store
    blocks = blocks_over(adapter, tmp_path)
    assert blocks.read(URL, "etag", SIZE, BLOCK_SIZE + 10, 10) == data[BLOCK_SIZE + 10 : BLOCK_SIZE + 20]  # block 1 only
    assert adapter.calls["get_range"] == 1
    chunks = list(blocks.chunks(URL, "etag", SIZE, 0, SIZE))
    assert b"".join(chunks) == data
    assert max(len(c) for c in chunks) <= BLOCK_SIZE, "a stream holds one block at a time"
    # Blocks 0, 2 and 3 came from one stream of the object (repositioned past the cached block 1).
    assert adapter.calls["open"] == 1 and adapter.calls["get_range"] == 1 and adapter.calls["get"] == 0


def test_a_damaged_disk_block_is_detected_and_fetched_again(store: tuple[FlakyAdapter, bytes], tmp_path: Path) -> None:
    adapter, data = store
    blocks = blocks_over(adapter, tmp_path)
    assert blocks.read(URL, "etag", SIZE, 0, 100) == data[:100]
    assert blocks.disk is not None
    path = Path(blocks.disk.path_of(block_key(URL, "etag", SIZE, 0)))
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # the block's last byte: a bit rot the checksum must catch
    path.write_bytes(bytes(raw))
    blocks.ram.clear()  # a restarted process: only the disk tier holds the block
    before = adapter.calls["get_range"]
    assert blocks.read(URL, "etag", SIZE, BLOCK_SIZE - 5, 5) == data[BLOCK_SIZE - 5 : BLOCK_SIZE]
    assert blocks.disk.stats()["corrupt"] == 1
    assert adapter.calls["get_range"] == before + 1, "the damaged block was fetched again from the store"
    blocks.ram.clear()
    assert blocks.read(URL, "etag", SIZE, 0, BLOCK_SIZE) == data[:BLOCK_SIZE]
    assert adapter.calls["get_range"] == before + 1, "and kept again, whole"


def test_local_objects_are_kept_in_ram_only(tmp_path: Path) -> None:
    # A local:// object is a file on this disk already: a copy in the disk tier would only cost writes.
    url = f"local://{tmp_path}/data/x"
    adapter = FlakyAdapter(LocalAdapter())
    adapter.put(url, b"abc")
    blocks = CachedBlocks(adapter, RamCache(1 << 20), DiskCache(tmp_path / "cache", 1 << 20))
    assert blocks.read(url, "e", 3, 0, 3) == b"abc"
    assert blocks.read(url, "e", 3, 1, 2) == b"bc"
    assert adapter.calls["get"] == 1, "the second read came from RAM"
    assert blocks.disk is not None and blocks.disk.stats()["writes"] == 0


def test_an_object_shorter_than_its_entry_is_refused(store: tuple[FlakyAdapter, bytes], tmp_path: Path) -> None:
    adapter, _ = store
    blocks = blocks_over(adapter, tmp_path)
    with pytest.raises(ObjectNotFound):
        blocks.read(URL, "etag", SIZE + 1, SIZE - 5, 6)
    with pytest.raises(ObjectNotFound):
        b"".join(blocks.chunks(URL, "etag2", SIZE + BLOCK_SIZE, 0, SIZE + BLOCK_SIZE))
