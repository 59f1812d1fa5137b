"""``LazyPool``: a module's thread pool, made at first use (never at import) and made again in a forked child.

A forked child (a server's workers) inherits the parent's pool object but none of
its threads: work submitted to it would wait forever.  Each pool forgets itself in
the child (``os.register_at_fork``), and the next use makes a new one.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor


class LazyPool:
    """``threads`` workers named ``name``-N, made by the first :meth:`get`."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self.name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
            return self._pool

    def _forget(self) -> None:
        self._pool, self._lock = None, threading.Lock()
