"""A thread's refusal to wait, for work tried on a loop that must keep serving (the mount's close, stop 58).

The mount answers a lone writer's close on its request loop when the close touches only this node (the local
block store, the embedded SQLite database): handing it to a thread cost the loop more CPU than the close itself
(docs/SCALE.md, "Stop 58").  Such a close may still meet a wait: another process holding the database's write
lock, another close or staging of its branch in flight in a thread, a staging's leader gathering company.  Inside
:func:`refusing`, every place that would wait raises :class:`~lakemount.errors.WouldWait` instead, before it
applies anything, and the caller tries again on a thread, where it may wait.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from lakemount.errors import WouldWait

_tls = threading.local()


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


def refused() -> bool:
    """True inside :func:`refusing` on this thread."""
    return getattr(_tls, "refusing", False)


@contextmanager
def refusing() -> Iterator[None]:
    """Within the block, this thread's waits raise ``WouldWait`` (see the module docstring)."""
    before = refused()
    _tls.refusing = True
    try:
        yield
    finally:
        _tls.refusing = before


def would_wait(what: str) -> None:
    """Raise ``WouldWait`` (naming ``what``) if this thread refuses to wait; nothing otherwise."""
    if refused():
        raise WouldWait(what)


@contextmanager
def holding(lock: _Lock, what: str) -> Iterator[None]:
    """``lock`` held for the block; ``WouldWait`` instead of waiting for it if this thread refuses to wait."""
    if not lock.acquire(blocking=not refused()):
        raise WouldWait(what)
    try:
        yield
    finally:
        lock.release()
