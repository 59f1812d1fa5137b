"""DiskCache: checksums, the size bound and LRU eviction, sharing a directory."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from lakemount.cache.disk import TEMP_PREFIX, DiskCache

KEY = "ab" * 32  # a content id, like a sha256 hex digest


def test_roundtrip_and_persistence(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    assert cache.get(KEY) is None
    cache.put(KEY, b"payload")
    assert cache.get(KEY) == b"payload"
    assert DiskCache(tmp_path, max_bytes=1 << 20).get(KEY) == b"payload"  # survives a restart
    cache.put("", b"empty key ok")
    cache.put("e", b"")
    assert cache.get("") == b"empty key ok"
    assert cache.get("e") == b""
    stats = cache.stats()
    assert (stats["hits"], stats["misses"], stats["writes"]) == (3, 1, 3)


def test_fan_out_layout(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    cache.put(KEY, b"x")
    rel = Path(cache.path_of(KEY)).relative_to(tmp_path)
    assert len(rel.parts) == 3
    assert rel.parts[2].startswith(rel.parts[0] + rel.parts[1])
    assert (tmp_path / rel).is_file()


def test_flipped_byte_is_a_miss_and_the_file_is_dropped(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    data = os.urandom(4096)
    cache.put(KEY, data)
    path = Path(cache.path_of(KEY))
    blob = bytearray(path.read_bytes())
    blob[-100] ^= 0x01
    path.write_bytes(bytes(blob))
    assert cache.get(KEY) is None
    assert not path.exists()
    assert cache.stats()["corrupt"] == 1
    cache.put(KEY, data)  # and the next load heals it
    assert cache.get(KEY) == data


def test_truncated_and_garbage_files_are_misses(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    damages: list[Callable[[bytes], bytes]] = [lambda b: b[:-1], lambda b: b[:5], lambda b: b"", lambda b: b + b"x"]
    for i, damage in enumerate(damages):
        key = f"{i:02x}" * 8
        cache.put(key, b"v" * 1000)
        path = Path(cache.path_of(key))
        path.write_bytes(damage(path.read_bytes()))
        assert cache.get(key) is None
    assert cache.stats()["corrupt"] == 4


def test_file_for_another_key_is_not_returned(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    cache.put("k1", b"one")
    cache.put("k2", b"two")
    # Simulate a hash collision: k2's file now holds k1's record.
    Path(cache.path_of("k2")).write_bytes(Path(cache.path_of("k1")).read_bytes())
    assert cache.get("k2") is None


def test_eviction_keeps_the_bound_and_the_recent(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=50_000)
    keys = [f"{i:04x}" * 16 for i in range(20)]
    for i, key in enumerate(keys):
        cache.put(key, os.urandom(5000))
        if i >= 1:
            assert cache.get(keys[0]) is not None  # keep the first one hot
    assert cache.total_bytes() <= 50_000
    assert cache.stats()["evictions"] > 0
    assert cache.get(keys[0]) is not None
    assert cache.get(keys[-1]) is not None
    assert cache.get(keys[1]) is None  # the least recently used went first


def test_oversized_item_is_not_stored(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1000)
    cache.put(KEY, b"x" * 2000)
    assert cache.get(KEY) is None
    assert cache.total_bytes() == 0


def test_bound_is_restored_on_first_write_after_restart(tmp_path: Path) -> None:
    big = DiskCache(tmp_path, max_bytes=100_000)
    for i in range(10):
        big.put(f"k{i}", b"x" * 9000)
    small = DiskCache(tmp_path, max_bytes=30_000)
    small.put("new", b"y" * 100)
    assert small.total_bytes() <= 30_000
    assert small.get("new") is not None


def test_two_instances_share_a_directory(tmp_path: Path) -> None:
    a = DiskCache(tmp_path, max_bytes=200_000)
    b = DiskCache(tmp_path, max_bytes=200_000)
    a.put("shared", b"from a")
    assert b.get("shared") == b"from a"
    b.put("shared", b"from a")  # a second writer of the same content is harmless
    assert a.get("shared") == b"from a"

    errors: list[BaseException] = []

    def hammer(cache: DiskCache, seed: int) -> None:
        try:
            for i in range(150):
                key = f"k{(i * 7 + seed) % 60}"
                got = cache.get(key)
                assert got is None or got == key.encode() * 200
                if got is None:
                    cache.put(key, key.encode() * 200)
                if i % 50 == 0:
                    cache.evict()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(c, s)) for s, c in enumerate([a, b, a, b])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    a.evict()
    assert a.total_bytes() <= 200_000


def test_vanished_file_is_a_miss(tmp_path: Path) -> None:
    a = DiskCache(tmp_path, max_bytes=1 << 20)
    b = DiskCache(tmp_path, max_bytes=1 << 20)
    a.put(KEY, b"x")
    os.unlink(b.path_of(KEY))  # another process evicted it
    assert a.get(KEY) is None
    assert a.stats()["corrupt"] == 0


def test_stale_temp_files_are_swept_fresh_ones_kept(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    cache.put(KEY, b"x")
    directory = Path(cache.path_of(KEY)).parent
    stale, fresh = directory / f"{TEMP_PREFIX}old-x", directory / f"{TEMP_PREFIX}new-x"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    os.utime(stale, (0, 0))
    cache.evict()
    assert not stale.exists()
    assert fresh.exists()
    assert cache.get(KEY) == b"x"


def test_get_or_load(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=1 << 20)
    calls: list[str] = []

    def load() -> bytes:
        calls.append(KEY)
        return b"v"

    assert cache.get_or_load(KEY, load) == b"v"
    assert cache.get_or_load(KEY, load) == b"v"
    assert calls == [KEY]
