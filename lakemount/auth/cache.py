"""A small expiring cache for the front ends' authentication lookups.

The S3 gateway (``gateway/access.py``) and the REST API (``api/auth.py``)
both keep recently read keys, users and policy decisions for a few seconds so
that every request does not hit the auth store; ``TtlCache`` is that cache.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from lakemount.auth.policies import Action
    from lakemount.auth.store import SqlAuthStore

MAX_ENTRIES: Final = 10_000


class TtlCache:
    """A small thread-safe map whose entries expire ``ttl`` seconds after they are put.

    ``get`` returns ``None`` for a missing or expired key (so ``None`` cannot be
    cached).  When ``max_entries`` entries are held, the next ``put`` clears the
    whole map first, which bounds memory without bookkeeping.  Never raises.
    """

    def __init__(self, ttl: float, max_entries: int = MAX_ENTRIES) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._data: dict[object, tuple[float, object]] = {}
        self._lock = threading.Lock()

    def get(self, key: object) -> object | None:
        """The live value for ``key``, or ``None``."""
        hit = self._data.get(key)
        if hit is None or hit[0] < time.monotonic():
            return None
        return hit[1]

    def put(self, key: object, value: object) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds."""
        with self._lock:
            if len(self._data) >= self._max_entries:
                self._data.clear()
            self._data[key] = (time.monotonic() + self._ttl, value)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()


class CachedDecisions:
    """Policy decisions of an auth store, each kept for ``ttl`` seconds (a detached policy takes effect within it)."""

    def __init__(self, store: SqlAuthStore, ttl: float, max_entries: int = MAX_ENTRIES) -> None:
        self.store = store
        self._decisions = TtlCache(ttl, max_entries)

    def allowed(self, user_id: str, action: Action, repo: str = "*") -> bool:
        """Whether ``user_id``'s policies allow ``action`` on ``repo``; raises what ``SqlAuthStore.authorize`` raises."""
        key = (user_id, action, repo)
        hit = self._decisions.get(key)
        if hit is not None:
            return bool(hit)
        decision = self.store.authorize(user_id, action, repo)
        self._decisions.put(key, decision)
        return decision

    def clear(self) -> None:
        """Drop every cached decision (after this process changed policies)."""
        self._decisions.clear()
