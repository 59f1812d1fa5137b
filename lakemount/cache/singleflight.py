"""``SingleFlight``: at most one load per key in flight at a time, shared by all waiters.

When many threads miss the cache on the same range or data object at once
(every reader of a freshly mounted ref does), only the first calls the loader;
the others wait for its result, or its exception, instead of each fetching the
same bytes from the block store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class _Call(Generic[T]):
    __slots__ = ("done", "error", "owner", "result")

    def __init__(self, owner: int) -> None:
        self.done = threading.Event()
        self.owner = owner
        self.result: T | None = None
        self.error: BaseException | None = None


class SingleFlight(Generic[T]):
    """Deduplicates concurrent calls per key; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, _Call[T]] = {}

    def do(self, key: str, fn: Callable[[], T]) -> T:
        """Return ``fn()``, or the result of the call of ``fn`` already running for ``key``.

        Waiters receive the same exception as the caller that ran ``fn``.  A
        loader that re-enters ``do`` for its own key runs again instead of
        deadlocking on itself.
        """
        me = threading.get_ident()
        with self._lock:
            call = self._calls.get(key)
            if call is None:
                call = _Call(me)
                self._calls[key] = call
                leader = True
            else:
                leader = False
        if not leader:
            if call.owner == me:
                return fn()
            call.done.wait()
            if call.error is not None:
                raise call.error
            return cast(T, call.result)  # set whenever error is None
        try:
            call.result = fn()
        except BaseException as e:
            call.error = e
            raise
        finally:
            with self._lock:
                del self._calls[key]
            call.done.set()
        return call.result
