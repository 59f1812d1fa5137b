"""Unsaved file content: a local temp file per file open for writing.

Objects are immutable, so a write cannot patch one in place.  The first write
to a file (or a truncation) copies its current content into a temp file under
the mount's spool directory ("copy on first write"; a file opened with O_TRUNC
or just created starts empty and copies nothing); every handle of the inode
then reads and writes that file, which is how one mount reads its own writes.
``save`` turns the content into a new content-addressed object and returns
its digests; the caller stages the entry.  Each change bumps ``version`` so a
save that raced with a write does not mark the newer bytes saved.  While the
content only grows by appends (the common sequential write), its SHA-256 and
MD5 are computed as it is written, so a save need not read the file again.
With write-back (:mod:`~lakemount.fuse.writeback`) a saved temp file is *held*:
it became the journal's data file, so it is never written again (a new write
gets a fresh copy, :class:`Held` tells a writer that raced with the hand-over)
and never deleted here.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from typing import BinaryIO, Final, TypeVar

T = TypeVar("T")

COPY_CHUNK: Final = 4 << 20


class Held(Exception):
    """The temp file was handed to the write-back journal meanwhile: write to a fresh copy instead."""


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
        self.held = False  # the write-back journal's data file now: read-only, deleted by the journal
        self.pending = False  # held and not yet staged: the node keeps it (reads come from here)
        # Running digests of bytes [0, hashed); None once a write lands anywhere but the end.
        self._sha: hashlib._Hash | None = hashlib.sha256()
        self._md5: hashlib._Hash | None = hashlib.md5()
        self._hashed = 0
        try:
            if source is not None and size > 0:
                with source() as stream:
                    self._fill(stream)
        except BaseException:
            self.discard()
            raise

    def _fill(self, stream: BinaryIO) -> None:
        with os.fdopen(os.dup(self.fd), "wb") as out:
            while chunk := stream.read(COPY_CHUNK):
                self._hash(self._hashed, chunk)
                out.write(chunk)
        self.size = os.fstat(self.fd).st_size

    def _hash(self, offset: int, data: bytes | memoryview) -> None:
        if self._sha is None or self._md5 is None:
            return
        if offset != self._hashed:
            self._sha = self._md5 = None
            return
        self._sha.update(data)
        self._md5.update(data)
        self._hashed += len(data)

    def digests(self) -> tuple[int, str, str] | None:
        """``(size, sha256 hex, md5 hex)`` of the current content if known without reading it; call under ``lock``."""
        if self._sha is None or self._md5 is None or self._hashed != self.size:
            return None
        return self.size, self._sha.hexdigest(), self._md5.hexdigest()

    @property
    def modified(self) -> bool:
        return self.version != self.saved_version

    def pwrite(self, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset``; raises ``Held`` if the file went to the journal meanwhile."""
        with self.lock:
            if self.held:
                raise Held(self.path)
            view = memoryview(data)
            pos = offset
            try:
                while view[pos - offset :]:
                    pos += os.pwrite(self.fd, view[pos - offset :], pos)
            except BaseException:
                self._sha = self._md5 = None
                raise
            if offset == self._hashed and offset >= self.size:
                self._hash(offset, view)
            else:  # an overwrite, or a hole: the running digests no longer apply
                self._sha = self._md5 = None
            self.size = max(self.size, offset + len(data))
            self.version += 1
            return len(data)

    def stored(self) -> int:
        """Bytes the temp file has allocated (holes take none); its size once discarded.

        An ``fstat`` of a local file: no I/O, cheap enough for every ``getattr``.
        """
        try:
            return os.fstat(self.fd).st_blocks * 512 if self.fd >= 0 else self.size
        except OSError:  # closed by a concurrent discard
            return self.size

    def pread(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)

    def truncate(self, size: int) -> None:
        """Cut or extend the content to ``size``; raises ``Held`` if the file went to the journal meanwhile."""
        with self.lock:
            if self.held:
                raise Held(self.path)
            os.ftruncate(self.fd, size)
            if size == 0:
                self._sha, self._md5, self._hashed = hashlib.sha256(), hashlib.md5(), 0
            elif size != self._hashed:
                self._sha = self._md5 = None
            self.size = size
            self.version += 1

    def store(self, put: Callable[[str, tuple[int, str, str] | None], T]) -> tuple[int, T]:
        """Run ``put(path, digests)`` while no write can change the file; returns the version stored and the result.

        ``digests`` is what :meth:`digests` knows (None: ``put`` must hash the
        file).  Writes to this file wait until ``put`` returns, so the bytes
        uploaded are the bytes hashed, without a copy.
        """
        with self.lock:
            return self.version, put(self.path, self.digests())

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
        """Close and delete the temp file (idempotent; a held file is only closed: the journal deletes it)."""
        with self.lock:
            if self.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self.fd)
                self.fd = -1
            if self.held:
                return
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
