"""Failed logins slow down: a bounded backoff per access key id and per client address.

Every check of a secret the REST API makes (``/auth/login``, the Iceberg
catalog's ``oauth/tokens``, basic auth on any route) asks :meth:`LoginThrottle.wait`
first and reports its outcome.  Past ``free`` consecutive failures, a key id
(or an address) is refused for ``BASE_DELAY * 2**k`` seconds after its
``free + k + 1``-th failure, at most ``MAX_DELAY``; while it is, an attempt is
refused (429, ``Retry-After``) without its secret being checked, so it teaches
nothing.  A success resets the key id and the address; a failure older than
``WINDOW`` is forgotten.  An attacker who knows a key id can thus make its
owner wait at most ``MAX_DELAY`` seconds before an attempt, never lock them
out; an address shared by many users (a proxy, loopback) gets more free
failures than a key id.  The state is per process (each API worker keeps its
own, in at most ``max_entries`` entries per kind, the least recently failed
forgotten first), so N workers allow N times the rate.  The clock is
injected: tests count decisions, they do not wait.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

BASE_DELAY: Final = 1.0
MAX_DELAY: Final = 8.0
WINDOW: Final = 15 * 60.0
KEY_FREE: Final = 5  # consecutive failures of one key id before it slows down
ADDRESS_FREE: Final = 20  # an address may be shared by several users: more before it slows down
MAX_ENTRIES: Final = 10_000


@dataclass(slots=True)
class _Failures:
    count: int
    last: float  # when the last failure was recorded
    until: float  # no attempt before this time


def delay_after(failures: int, free: int) -> float:
    """Seconds an attempt waits after ``failures`` consecutive failures with ``free`` of them free."""
    if failures <= free:
        return 0.0
    return min(MAX_DELAY, BASE_DELAY * 2 ** (failures - free - 1))


class _Ledger:
    """Consecutive failures per name (a key id, or an address), bounded, least recently failed forgotten first."""

    def __init__(self, free: int, max_entries: int) -> None:
        self.free = free
        self.max_entries = max_entries
        self._entries: OrderedDict[str, _Failures] = OrderedDict()

    def wait(self, name: str, now: float) -> float:
        f = self._entries.get(name)
        if f is None:
            return 0.0
        if now - f.last > WINDOW:
            del self._entries[name]
            return 0.0
        return max(0.0, f.until - now)

    def failed(self, name: str, now: float) -> None:
        f = self._entries.pop(name, None)
        if f is None or now - f.last > WINDOW:
            f = _Failures(0, now, now)
        f.count += 1
        f.last = now
        f.until = now + delay_after(f.count, self.free)
        self._entries[name] = f
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def succeeded(self, name: str) -> None:
        self._entries.pop(name, None)


class LoginThrottle:
    """The backoff of failed logins of one process (see the module's docstring); thread-safe, never raises."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, max_entries: int = MAX_ENTRIES) -> None:
        self._clock = clock
        self._keys = _Ledger(KEY_FREE, max_entries)
        self._addresses = _Ledger(ADDRESS_FREE, max_entries)
        self._lock = threading.Lock()

    def wait(self, key_id: str, address: str) -> int:
        """Whole seconds before an attempt for ``key_id`` from ``address`` may be checked (0: now)."""
        with self._lock:
            now = self._clock()
            left = max(self._keys.wait(key_id, now), self._addresses.wait(address, now) if address else 0.0)
        return math.ceil(left)

    def failed(self, key_id: str, address: str) -> None:
        """Record a failed attempt (an unknown key id or a wrong secret, alike)."""
        with self._lock:
            now = self._clock()
            self._keys.failed(key_id, now)
            if address:
                self._addresses.failed(address, now)

    def succeeded(self, key_id: str, address: str) -> None:
        """Record a successful attempt: the key id and the address start afresh."""
        with self._lock:
            self._keys.succeeded(key_id)
            if address:
                self._addresses.succeeded(address)
