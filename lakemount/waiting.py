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
from contextlib import AbstractContextManager
from typing import Protocol

from lakemount.errors import WouldWait

_tls = threading.local()


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


def refused() -> bool:
    """True inside :func:`refusing` on this thread."""
    return getattr(_tls, "refusing", False)


class _Refusing(AbstractContextManager[None]):
    """:func:`refusing`'s context.  A class, not a generator: the mount enters it once a close, and a generator's
    context costs a few microseconds more (stop 53's ``_NonBlocking``)."""

    __slots__ = ("_before",)

    def __enter__(self) -> None:
        self._before = refused()
        _tls.refusing = True

    def __exit__(self, *exc: object) -> None:
        _tls.refusing = self._before


def refusing() -> AbstractContextManager[None]:
    """Within the block, this thread's waits raise ``WouldWait`` (see the module docstring)."""
    return _Refusing()


def would_wait(what: str) -> None:
    """Raise ``WouldWait`` (naming ``what``) if this thread refuses to wait; nothing otherwise."""
    if refused():
        raise WouldWait(what)


class _Holding(AbstractContextManager[None]):
    """:func:`holding`'s context (a class, as :class:`_Refusing`)."""

    __slots__ = ("_lock", "_what")

    def __init__(self, lock: _Lock, what: str) -> None:
        self._lock = lock
        self._what = what

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=not refused()):
            raise WouldWait(self._what)

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def holding(lock: _Lock, what: str) -> AbstractContextManager[None]:
    """``lock`` held for the block; ``WouldWait`` instead of waiting for it if this thread refuses to wait."""
    return _Holding(lock, what)
