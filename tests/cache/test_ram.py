"""RamCache: LRU order, the byte bound, counters."""

from __future__ import annotations

import threading

from lakemount.cache.ram import RamCache


def test_lru_order_and_byte_bound() -> None:
    cache = RamCache(max_bytes=30)
    cache.put("a", b"a" * 10)
    cache.put("b", b"b" * 10)
    cache.put("c", b"c" * 10)
    assert cache.get("a") == b"a" * 10  # a is now most recent; b is the oldest
    cache.put("d", b"d" * 10)
    assert cache.get("b") is None
    for key in "acd":
        assert cache.get(key) is not None
    stats = cache.stats()
    assert stats["bytes"] == 30
    assert stats["evictions"] == 1
    assert stats["entries"] == 3


def test_big_put_evicts_several_and_oversized_is_not_kept() -> None:
    cache = RamCache(max_bytes=30)
    for k in "abc":
        cache.put(k, b"x" * 10)
    cache.put("big", b"y" * 25)
    assert len(cache) == 1
    assert "big" in cache
    cache.put("huge", b"z" * 31)
    assert "huge" not in cache
    assert cache.stats()["rejected"] == 1
    assert cache.stats()["bytes"] <= 30


def test_max_item_bytes() -> None:
    cache = RamCache(max_bytes=100, max_item_bytes=10)
    cache.put("small", b"x" * 10)
    cache.put("large", b"x" * 11)
    assert "small" in cache
    assert "large" not in cache


def test_reput_does_not_double_count() -> None:
    cache = RamCache(max_bytes=100)
    cache.put("a", b"x" * 10)
    cache.put("a", b"x" * 10)
    assert cache.stats()["bytes"] == 10


def test_hits_and_misses_are_counted() -> None:
    cache = RamCache(max_bytes=100)
    assert cache.get("k") is None
    cache.put("k", b"v")
    assert cache.get("k") == b"v"
    stats = cache.stats()
    assert (stats["hits"], stats["misses"]) == (1, 1)


def test_threads_keep_the_bound() -> None:
    cache = RamCache(max_bytes=1000)
    errors: list[BaseException] = []  # a worker that raised must fail the test

    def work(t: int) -> None:
        try:
            for i in range(300):
                cache.put(f"{t}-{i}", b"x" * (i % 50))
                got = cache.get(f"{t}-{i // 2}")
                assert got is None or got == b"x" * ((i // 2) % 50)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    stats = cache.stats()
    assert stats["bytes"] <= 1000
    assert stats["bytes"] == sum(len(cache.get(k) or b"") for k in list(cache._items))


def test_get_or_load() -> None:
    cache = RamCache(max_bytes=100)
    calls: list[str] = []

    def load() -> bytes:
        calls.append("x")
        return b"loaded"

    assert cache.get_or_load("k", load) == b"loaded"
    assert cache.get_or_load("k", load) == b"loaded"
    assert calls == ["x"]
