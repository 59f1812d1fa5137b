"""Node stamps: which branches this node changed, shared by its processes without asking the database.

A node is the processes that share one ``LAKEMOUNT_HOME`` (a host's mount,
gateway workers, API workers, CLI).  Every branch change the ref store
commits (a staged write, a commit, a reset, a branch or repository made or
removed: what sends a change notice on PostgreSQL), on every database, writes a fresh random stamp into the
branch's slot of a small file under the home, mapped into memory by every
process, *after* the transaction commits and before the change is
acknowledged.  A reader that keeps something it read of a branch notes the
slot's stamp before reading and trusts what it kept only while the slot
still holds that stamp: a change made on this node, through any of its
processes, is seen at once, without waiting for the change notice that
tells the other nodes.

A thread can record the stamps its own changes write (:meth:`NodeStamps.recording`): each stamp is
read and replaced under a lock of its slot (``fcntl``, taken by every process), so the recorded
``(slot, old, new)`` links show exactly which stamps a reader may count as its own (a mount keeps a
listing past ``head_ttl`` while only it changed the branch: ``lakemount.fuse.ownchanges``).

Slots are shared by hash (``SLOTS`` of them): a change to one branch also
drops what was kept of the branches that share its slot, which costs a read,
never a stale answer.  A stamp is random, not a counter, so two processes
stamping the same slot at once can lose neither change: each leaves a value
no reader noted.  Without a file (``path`` None) the stamps live in this
process only, which still gives it read-your-writes.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
import weakref
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from lakemount.logs import get_logger

if TYPE_CHECKING:
    import ctypes  # imported when the slots are first mapped: a verb that reads no stamp does not load it

log = get_logger(__name__)

SLOTS: Final = 4096
_SIZE: Final = SLOTS * 8


def _fresh() -> int:
    return int.from_bytes(os.urandom(8), "little") or 1


class NodeStamps:
    """The stamp of each branch slot, in a file shared by the node's processes (or in this process only)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._slots: ctypes.Array[ctypes.c_uint64] | None = None
        self._lock = threading.Lock()
        self._fd = -1  # the shared file, kept open for the slots' locks (-1: the stamps live in this process)
        self._local = threading.local()

    def _open(self) -> ctypes.Array[ctypes.c_uint64]:
        with self._lock:
            if self._slots is None:
                buf = self._shared() if self.path is not None else None
                if buf is None:
                    buf = mmap.mmap(-1, _SIZE)
                import ctypes

                # One aligned 8-byte word per slot: a read or write of one is a single machine access.
                self._slots = (ctypes.c_uint64 * SLOTS).from_buffer(buf)
            return self._slots

    def _shared(self) -> mmap.mmap | None:
        assert self.path is not None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                if os.fstat(fd).st_size < _SIZE:
                    os.ftruncate(fd, _SIZE)  # zeros; a file already this long keeps its stamps
                mapped = mmap.mmap(fd, _SIZE)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            weakref.finalize(self, os.close, fd)
            return mapped
        except OSError as exc:
            # A stamp is written after a change committed: failing then would report a done write
            # as failed.  This process still sees its own changes; its node's others by notice.
            log.warning("node stamps: cannot map %s (%s): this process's changes only", os.path.basename(self.path), exc.strerror)
            return None

    @staticmethod
    def slot(repo: str, branch: str) -> int:
        """The slot of ``repo``/``branch`` (the same in every process: not Python's salted ``hash``)."""
        return zlib.crc32(f"{repo}\t{branch}".encode("utf-8", "surrogateescape")) % SLOTS

    def of(self, repo: str, branch: str) -> int:
        """The stamp now in the slot of ``repo``/``branch`` (note it before reading what you keep)."""
        slots = self._slots if self._slots is not None else self._open()
        return int(slots[self.slot(repo, branch)])

    def stamp(self, repo: str, branch: str, *, record: bool = True) -> None:
        """Say that ``repo``/``branch`` changed: call after the change committed, before acknowledging it.

        The slot's old stamp is read and the new one written under a lock of the slot that every
        process of the node takes (``fcntl``), so a thread :meth:`recording` its stamps learns each
        ``(slot, old, new)`` with nothing else stamped between the two; ``record`` False for a change
        that is not the calling thread's alone (it is not recorded, so it counts as another's).
        """
        slots = self._slots if self._slots is not None else self._open()
        slot = self.slot(repo, branch)
        fresh = _fresh()
        with self._lock:
            fd = self._fd
            if fd >= 0:
                fcntl.lockf(fd, fcntl.LOCK_EX, 8, slot * 8)
            try:
                old = int(slots[slot])
                slots[slot] = fresh
            finally:
                if fd >= 0:
                    fcntl.lockf(fd, fcntl.LOCK_UN, 8, slot * 8)
        seen = getattr(self._local, "seen", None) if record else None
        if seen is not None:
            seen.append((slot, old, fresh))

    def slot_stamp(self, repo: str, branch: str) -> tuple[int, int]:
        """``(slot, stamp now in it)`` of ``repo``/``branch``: what a reader notes to follow the slot with
        the stamps it :meth:`recording` saw its own changes write."""
        slots = self._slots if self._slots is not None else self._open()
        slot = self.slot(repo, branch)
        return slot, int(slots[slot])

    @contextmanager
    def recording(self) -> Iterator[list[tuple[int, int, int]]]:
        """Collect ``(slot, old stamp, new stamp)`` of every stamp this thread writes inside the block (the
        changes its caller makes): a reader that kept something tells its own changes from others' by them."""
        outer = getattr(self._local, "seen", None)
        seen: list[tuple[int, int, int]] = []
        self._local.seen = seen
        try:
            yield seen
        finally:
            self._local.seen = outer
            if outer is not None:
                outer.extend(seen)
