"""Unsaved file content: a local temp file per file open for writing.

Objects are immutable, so a write cannot patch one in place.  The first write
to a file (or a truncation) copies its current content into a temp file under
the mount's spool directory ("copy on first write"; a file opened with O_TRUNC
or just created starts empty and copies nothing); every handle of the inode
then reads and writes that file, which is how one mount reads its own writes.
``save`` turns the content into a new content-addressed object and returns
its digests; the caller stages the entry.  Each change bumps ``version`` so a
save that raced with a write does not mark the newer bytes saved.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from typing import BinaryIO, Final

COPY_CHUNK: Final = 4 << 20


class DirtyFile:
    """The temp file holding a file's current content; thread-safe."""

    def __init__(self, spool_dir: str, source: Callable[[], BinaryIO] | None, size: int) -> None:
        """Create the temp file, filled with the first ``size`` bytes of ``source()`` (None: empty)."""
        fd, self.path = tempfile.mkstemp(prefix="w-", dir=spool_dir)
        self.fd = fd
        self.lock = threading.Lock()
        self.version = 1  # bumped by every change
        self.saved_version = 0  # the version last turned into a staged entry
        self.size = 0
        try:
            if source is not None and size > 0:
                with source() as stream:
                    self._fill(stream)
        except BaseException:
            self.discard()
            raise

    def _fill(self, stream: BinaryIO) -> None:
        with os.fdopen(os.dup(self.fd), "wb") as out:
            shutil.copyfileobj(stream, out, COPY_CHUNK)
        self.size = os.fstat(self.fd).st_size

    @property
    def modified(self) -> bool:
        return self.version != self.saved_version

    def pwrite(self, offset: int, data: bytes) -> int:
        with self.lock:
            view = memoryview(data)
            pos = offset
            while view:
                n = os.pwrite(self.fd, view, pos)
                view = view[n:]
                pos += n
            self.size = max(self.size, offset + len(data))
            self.version += 1
            return len(data)

    def pread(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)

    def truncate(self, size: int) -> None:
        with self.lock:
            os.ftruncate(self.fd, size)
            self.size = size
            self.version += 1

    def begin_save(self) -> int:
        """The version about to be saved; call before reading the file for upload."""
        with self.lock:
            return self.version

    def end_save(self, version: int) -> None:
        with self.lock:
            self.saved_version = max(self.saved_version, version)

    def fsync(self) -> None:
        os.fsync(self.fd)

    def discard(self) -> None:
        """Close and delete the temp file (idempotent)."""
        with self.lock:
            if self.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self.fd)
                self.fd = -1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def keep_as(self, path: str) -> None:
        """Move the temp file to ``path`` (content that could not be saved) and close it."""
        with self.lock:
            if self.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self.fd)
                self.fd = -1
            os.makedirs(os.path.dirname(path), exist_ok=True)
            shutil.move(self.path, path)
