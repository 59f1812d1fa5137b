"""``TieredCache``: RAM in front of disk, with one loader call per key on a miss.

What graveler and the catalog are handed as their ``Cache``.  A read checks the
RAM tier, then the disk tier (promoting a disk hit to RAM); a miss in both
calls the loader once even when many threads ask for the same key at the same
time, and stores the result in both tiers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.cache.singleflight import SingleFlight


class TieredCache:
    """A ``Cache`` over a ``RamCache`` and an optional ``DiskCache``; thread-safe."""

    def __init__(self, ram: RamCache, disk: DiskCache | None = None) -> None:
        self.ram = ram
        self.disk = disk
        self._flight: SingleFlight[bytes] = SingleFlight()
        self._lock = threading.Lock()
        self._loads = 0

    def get(self, key: str) -> bytes | None:
        data = self.ram.get(key)
        if data is not None or self.disk is None:
            return data
        data = self.disk.get(key)
        if data is not None:
            self.ram.put(key, data)
        return data

    def put(self, key: str, data: bytes) -> None:
        data = bytes(data)
        self.ram.put(key, data)
        if self.disk is not None:
            self.disk.put(key, data)

    def keep(self, key: str, data: bytes) -> None:
        """The RAM tier only (see ``graveler.ports.Cache.keep``)."""
        self.ram.put(key, data)

    def get_or_load(self, key: str, load: Callable[[], bytes]) -> bytes:
        """Return the cached bytes of ``key``, calling ``load()`` on a miss and caching its result.

        Concurrent callers for one key share a single ``load()`` call and its
        result or exception; exceptions from ``load`` propagate unchanged and
        nothing is cached for them.
        """
        data = self.ram.get(key)
        if data is not None:
            return data

        def fill() -> bytes:
            # Re-check: the thread that loaded before us may just have finished.
            cached = self.get(key)
            if cached is not None:
                return cached
            loaded = load()
            with self._lock:
                self._loads += 1
            self.put(key, loaded)
            return loaded

        return self._flight.do(key, fill)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per-tier counters, plus ``loads``: how many times a loader ran."""
        out = {"ram": self.ram.stats(), "tiered": {"loads": self._loads}}
        if self.disk is not None:
            out["disk"] = self.disk.stats()
        return out
