"""TieredCache: lookup order, promotion, and one load per key under concurrency."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lakemount.cache import DiskCache, RamCache, SingleFlight, TieredCache
from lakemount.errors import ObjectNotFound
from lakemount.graveler.ports import Cache


class CountedEvent(threading.Event):
    """An event that counts the threads that began waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self._count = threading.Lock()
        self.waiting = 0

    def wait(self, timeout: float | None = None) -> bool:
        with self._count:
            self.waiting += 1
        return super().wait(timeout)


def counted_flights(monkeypatch: pytest.MonkeyPatch) -> list[CountedEvent]:
    """From now on each ``SingleFlight`` call's done event counts the callers waiting on it (in creation order):
    a test waits until the others joined the call in flight instead of sleeping for them to arrive."""
    from lakemount.cache import singleflight

    made: list[CountedEvent] = []

    class Threading:
        def __getattr__(self, name: str) -> object:
            return getattr(threading, name)

        @staticmethod
        def Event() -> CountedEvent:  # noqa: N802 - threading's name
            made.append(CountedEvent())
            return made[-1]

    monkeypatch.setattr(singleflight, "threading", Threading())
    return made


def until(what: object, message: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():  # type: ignore[operator]
        assert time.monotonic() < deadline, message
        time.sleep(0.005)


def test_put_writes_both_and_disk_hits_are_promoted(tmp_path: Path) -> None:
    ram, disk = RamCache(1 << 20), DiskCache(tmp_path, 1 << 20)
    cache = TieredCache(ram, disk)
    cache.put("k", b"v")
    assert ram.get("k") == b"v"
    assert disk.get("k") == b"v"
    ram.clear()
    assert cache.get("k") == b"v"  # from disk
    assert "k" in ram  # promoted


def test_keep_is_ram_only(tmp_path: Path) -> None:
    """``keep`` (bytes cheap to read again and soon of no use: an inline staging file) skips the disk tier."""
    ram, disk = RamCache(1 << 20), DiskCache(tmp_path, 1 << 20)
    cache: Cache = TieredCache(ram, disk)
    cache.keep("k", b"v")
    assert cache.get("k") == b"v" and "k" in ram
    assert disk.get("k") is None and disk.stats()["writes"] == 0
    ram_only: Cache = RamCache(1 << 20)
    ram_only.keep("k", b"v")
    assert ram_only.get("k") == b"v"


def test_restart_serves_from_disk(tmp_path: Path) -> None:
    TieredCache(RamCache(1 << 20), DiskCache(tmp_path, 1 << 20)).put("k", b"v")
    cache = TieredCache(RamCache(1 << 20), DiskCache(tmp_path, 1 << 20))
    assert cache.get_or_load("k", lambda: pytest.fail("must not load")) == b"v"


def test_ram_only(tmp_path: Path) -> None:
    cache = TieredCache(RamCache(1 << 20))
    assert cache.get("k") is None
    assert cache.get_or_load("k", lambda: b"v") == b"v"
    assert cache.get("k") == b"v"
    assert "disk" not in cache.stats()


def test_concurrent_get_or_load_calls_load_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flights = counted_flights(monkeypatch)
    cache = TieredCache(RamCache(1 << 20), DiskCache(tmp_path, 1 << 20))
    calls = 0
    lock = threading.Lock()
    start = threading.Barrier(8)

    def load() -> bytes:
        nonlocal calls
        with lock:
            calls += 1
        # in flight until the 7 others wait on it (not 0.05 s: a late caller found the value cached and
        # passed without sharing the load)
        until(lambda: flights and flights[0].waiting == 7, "the other callers never waited on the load in flight")
        return b"value"

    results: list[bytes] = []

    def worker() -> None:
        start.wait()
        results.append(cache.get_or_load("k", load))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [b"value"] * 8
    assert calls == 1
    assert cache.stats()["tiered"]["loads"] == 1


def test_load_errors_propagate_and_are_not_cached() -> None:
    cache = TieredCache(RamCache(1 << 20))

    def missing() -> bytes:
        raise ObjectNotFound("k")

    with pytest.raises(ObjectNotFound):
        cache.get_or_load("k", missing)
    assert cache.get_or_load("k", lambda: b"now") == b"now"


def test_single_flight_shares_errors_and_allows_reentry(monkeypatch: pytest.MonkeyPatch) -> None:
    flight: SingleFlight[int] = SingleFlight()
    assert flight.do("k", lambda: flight.do("k", lambda: 7)) == 7  # re-entry does not deadlock
    flights = counted_flights(monkeypatch)

    gate = threading.Event()
    errors: list[BaseException] = []

    def failing() -> int:
        gate.wait()
        raise ObjectNotFound("x")

    def worker() -> None:
        try:
            flight.do("e", failing)
        except ObjectNotFound as e:
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    # the failing call ends once the two others wait on it (not 0.05 s: a late caller failed on its own)
    until(lambda: flights and flights[0].waiting == 2, "the other callers never waited on the failing call")
    gate.set()
    for t in threads:
        t.join()
    assert len(errors) == 3
    assert errors[0] is errors[1] is errors[2]  # one exception, shared


def test_every_cache_satisfies_the_protocol(tmp_path: Path) -> None:
    caches: list[Cache] = [RamCache(100), DiskCache(tmp_path, 100), TieredCache(RamCache(100))]
    for cache in caches:
        assert cache.get_or_load("k", lambda: b"v") == b"v"
        assert cache.get("k") == b"v"
