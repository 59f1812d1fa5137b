"""The block reader: one stream per sequential run; random reads fetch only the blocks they touch."""

from __future__ import annotations

import os
import random
from collections import Counter
from concurrent.futures import Future
from typing import Any, BinaryIO

from lakemount.block.memory import MemoryAdapter
from lakemount.cache.ram import RamCache
from lakemount.fuse.reader import BLOCK_SIZE, BlockReader, ObjectRef, ReadState
from lakemount.fuse.stats import Metrics

MAX_READ = 128 << 10  # the kernel's FUSE read size


class CountingAdapter(MemoryAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def open(self, url: str) -> BinaryIO:
        self.calls["open"] += 1
        return super().open(url)

    def get(self, url: str) -> bytes:
        self.calls["get"] += 1
        return super().get(url)

    def get_range(self, url: str, start: int, length: int) -> bytes:
        self.calls["get_range"] += 1
        return super().get_range(url, start, length)


def _read(reader: BlockReader, obj: ObjectRef, state: ReadState, offset: int, size: int) -> bytes:
    """What FileSystem.read does: RAM first, else a read; then advise."""
    got = reader.cached(obj, offset, size)
    if got is None:
        got = reader.read(obj, offset, size, state)
    reader.advise(obj, state, offset, size)
    return got


def _sequential_read(reader: BlockReader, obj: ObjectRef, data: bytes, *, shuffle: int, seed: int = 0) -> None:
    """Read all of ``obj`` in MAX_READ pieces, each group of ``shuffle`` consecutive reads in random order."""
    rnd = random.Random(seed)
    state = ReadState()
    offsets = list(range(0, obj.size, MAX_READ))
    for i in range(0, len(offsets), shuffle):
        group = offsets[i : i + shuffle]
        rnd.shuffle(group)
        for off in group:
            assert _read(reader, obj, state, off, MAX_READ) == data[off : off + MAX_READ]


def _setup(size: int) -> tuple[CountingAdapter, BlockReader, ObjectRef, bytes]:
    adapter = CountingAdapter()
    data = os.urandom(size)
    adapter.put("mem://b/obj", data)
    reader = BlockReader(adapter, RamCache(256 << 20), None, Metrics())
    return adapter, reader, ObjectRef("mem://b/obj", size, "etag"), data


def test_a_sequential_read_is_one_stream() -> None:
    adapter, reader, obj, data = _setup(24 * BLOCK_SIZE + 12345)
    try:
        _sequential_read(reader, obj, data, shuffle=1)
    finally:
        reader.close()
    assert adapter.calls["get_range"] == 0, adapter.calls
    assert adapter.calls["open"] <= 2, adapter.calls


def test_reads_taken_out_of_order_stay_one_stream() -> None:
    """Up to 12 reads in flight (the kernel's max_background), any order: still one stream, no block alone."""
    adapter, reader, obj, data = _setup(24 * BLOCK_SIZE + 12345)
    try:
        _sequential_read(reader, obj, data, shuffle=12, seed=7)
    finally:
        reader.close()
    # Only a read that comes before the first one at offset 0 (no stream yet) may fetch its block alone.
    assert adapter.calls["get_range"] <= 1, adapter.calls
    assert adapter.calls["open"] <= 2, adapter.calls


def test_random_reads_fetch_only_their_blocks() -> None:
    adapter, reader, obj, data = _setup(16 * BLOCK_SIZE)
    state: Any = ReadState()
    try:
        for off in (9 * BLOCK_SIZE, 2 * BLOCK_SIZE + 5, 14 * BLOCK_SIZE):
            assert _read(reader, obj, state, off, 100) == data[off : off + 100]
    finally:
        reader.close()
    assert adapter.calls["get_range"] == 3 and adapter.calls["open"] == 0, adapter.calls




def test_a_block_delivered_while_the_reader_looked_elsewhere_is_not_fetched_again() -> None:
    """The race behind lone ranged GETs: the foreground misses RAM, then the stream delivers
    (RAM first, then it drops its claim), then the foreground finds no claim: RAM has it."""
    adapter = CountingAdapter()
    data = os.urandom(8 * BLOCK_SIZE)
    adapter.put("mem://b/obj", data)
    obj = ObjectRef("mem://b/obj", len(data), "etag")
    block3 = data[3 * BLOCK_SIZE : 4 * BLOCK_SIZE]

    class DeliveringDisk:
        """The foreground's disk lookup is where the stream's delivery lands, as it does under load."""

        def get(self, key: str) -> bytes | None:
            if key in reader._pending:  # what BlockReader._stream does, in its order
                reader.ram.put(key, block3)
                reader._pending.pop(key).set_result(block3)
            return None

        def put(self, key: str, value: bytes) -> None:
            pass

    reader = BlockReader(adapter, RamCache(64 << 20), DeliveringDisk(), Metrics())  # type: ignore[arg-type]
    reader._pending[reader._key(obj, 3)] = Future()  # block 3 is claimed by a read-ahead stream
    try:
        assert reader.read(obj, 3 * BLOCK_SIZE + 10, 100) == block3[10:110]
    finally:
        reader.close()
    assert adapter.calls["get_range"] == 0 and adapter.calls["get"] == 0, adapter.calls
