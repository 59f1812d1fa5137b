"""Failure-injecting doubles for the mount's tests: a ref store that fails or stalls on demand."""

from __future__ import annotations

import threading
import time
from typing import Any

from lakemount.errors import Unavailable


class FlakyRefStore:
    """Wraps a ref store; ``fail_next(n)`` makes the next n calls of any method raise ``Unavailable``
    (after ``delay`` seconds, to model a timeout)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._failures = 0
        self._delay = 0.0
        self.injected = 0

    def fail_next(self, n: int = 1, *, delay: float = 0.0) -> None:
        with self._lock:
            self._failures = n
            self._delay = delay

    def heal(self) -> None:
        with self._lock:
            self._failures = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                fail = self._failures > 0
                if fail:
                    self._failures -= 1
                    self.injected += 1
                delay = self._delay
            if fail:
                if delay:
                    time.sleep(delay)
                raise Unavailable(f"injected ref store fault in {name}")
            return attr(*args, **kwargs)

        return call
