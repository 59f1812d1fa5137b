"""``RamCache``: an in-process LRU of immutable byte strings, bounded by total bytes.

The first tier for ranges, metaranges, commits and small data objects.  Values
are never copied (``bytes`` are immutable), so a hit costs a dict lookup and a
move to the recent end under one lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from lakemount.cache.singleflight import SingleFlight
from lakemount.errors import InvalidArgument


class RamCache:
    """A thread-safe LRU cache holding at most ``max_bytes`` bytes of values.

    A value larger than ``max_item_bytes`` (default: ``max_bytes``) is not
    kept, so that one huge object cannot flush everything else.
    """

    def __init__(self, max_bytes: int, *, max_item_bytes: int | None = None) -> None:
        if max_bytes < 0:
            raise InvalidArgument(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.max_item_bytes = max_bytes if max_item_bytes is None else min(max_item_bytes, max_bytes)
        self._lock = threading.Lock()
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = self._rejected = 0
        self._flight: SingleFlight[bytes] = SingleFlight()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is None:
                self._misses += 1
                return None
            self._items.move_to_end(key)
            self._hits += 1
            return data

    def put(self, key: str, data: bytes) -> None:
        data = bytes(data)  # a bytearray or memoryview could change under us
        size = len(data)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            if size > self.max_item_bytes:
                self._rejected += 1
                return
            self._items[key] = data
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= len(evicted)
                self._evictions += 1

    def keep(self, key: str, data: bytes) -> None:
        """``put``: this cache is RAM (see ``graveler.ports.Cache.keep``)."""
        self.put(key, data)

    def get_or_load(self, key: str, load: Callable[[], bytes]) -> bytes:
        data = self.get(key)
        if data is not None:
            return data

        def load_and_store() -> bytes:
            # Another thread may have stored it between our miss and now.
            with self._lock:
                cached = self._items.get(key)
            if cached is not None:
                return cached
            loaded = load()
            self.put(key, loaded)
            return loaded

        return self._flight.do(key, load_and_store)

    def discard(self, key: str) -> None:
        """Forget ``key`` if present."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def stats(self) -> dict[str, int]:
        """Counters since creation plus current occupancy."""
        with self._lock:
            return {
                "hits": self._hits,
                "misses": self._misses,
                "evictions": self._evictions,
                "rejected": self._rejected,
                "entries": len(self._items),
                "bytes": self._bytes,
                "max_bytes": self.max_bytes,
            }
