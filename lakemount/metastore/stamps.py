"""Node stamps: which branches this node changed, shared by its processes without asking the database.

A node is the processes that share one ``LAKEMOUNT_HOME`` (a host's mount,
gateway workers, API workers, CLI).  Every branch change the ref store
commits (a staged write, a commit, a reset, a branch or repository made or
removed: what sends a change notice) writes a fresh random stamp into the
branch's slot of a small file under the home, mapped into memory by every
process, *after* the transaction commits and before the change is
acknowledged.  A reader that keeps something it read of a branch notes the
slot's stamp before reading and trusts what it kept only while the slot
still holds that stamp: a change made on this node, through any of its
processes, is seen at once, without waiting for the change notice that
tells the other nodes.

Slots are shared by hash (``SLOTS`` of them): a change to one branch also
drops what was kept of the branches that share its slot, which costs a read,
never a stale answer.  A stamp is random, not a counter, so two processes
stamping the same slot at once can lose neither change: each leaves a value
no reader noted.  Without a file (``path`` None) the stamps live in this
process only, which still gives it read-your-writes.
"""

from __future__ import annotations

import mmap
import os
import threading
import zlib
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
                return mmap.mmap(fd, _SIZE)
            finally:
                os.close(fd)
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

    def stamp(self, repo: str, branch: str) -> None:
        """Say that ``repo``/``branch`` changed: call after the change committed, before acknowledging it."""
        slots = self._slots if self._slots is not None else self._open()
        slots[self.slot(repo, branch)] = _fresh()
