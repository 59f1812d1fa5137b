"""A clock for ``lakemount.auth.cache`` that the test moves (shared by tests/auth and tests/fuse)."""

from __future__ import annotations

import time


class CacheClock:
    """``lakemount.auth.cache``'s ``time`` with a ``monotonic`` the test moves: "still cached" holds however long
    the machine takes between two calls, and the ttl passes when the test says so."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)
