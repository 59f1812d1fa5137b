"""The block store's streaming writer: bytes land in a file while they are verified, then become an object.

A body is written to a *landing file* as it arrives; only when every check
passed is the file turned into the object (``Landing.store``), and on any
failure it is removed.  When the destination lies on the local block store
the landing file is created inside the destination directory itself, named
``.tmp-...`` (the prefix ``LocalAdapter`` reserves for files not yet in place,
and skips when listing), and becoming the object is a rename: the bytes are
written to disk once, and flushed while the upload is still arriving rather
than all at the end.  On any other block store the landing file is a local
temporary file handed to the adapter's ``put_file``.

``landing`` is a context manager (STYLE §7): leaving the block removes the
file unless it became an object.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, Final

from lakemount.block.local import TEMP_PREFIX, LocalAdapter, fsync_dir
from lakemount.block.pools import LazyPool
from lakemount.block.urls import scheme_of
from lakemount.graveler.ports import BlockAdapter

FLUSH_EVERY: Final = 16 * 1024 * 1024
FLUSH_THREADS: Final = 4
PIPELINE_ABOVE: Final = 4 << 20  # bodies from this size on are written by a Pipeline

_flusher = LazyPool(FLUSH_THREADS, "lm-land-flush")  # the threads that write back landing files early


def _write_back(fd: int, upto: int) -> None:
    """Write the landing file back, then let the kernel drop its pages of the first ``upto`` bytes (stop 51).

    They are clean once written back, so nothing is lost (a read comes from the disk); a large upload then
    reuses pages as it lands instead of taking fresh ones for every MiB and keeping them cached once it is an
    object (``lakemount/fuse/writes.py`` does the same for a large file written through the mount).
    """
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, upto, os.POSIX_FADV_DONTNEED)


class Landing:
    """A file being filled with an upload; ``store`` makes it an object, ``discard`` drops it."""

    def __init__(self, path: str, *, local_namespace: bool) -> None:
        self.path = path
        self.local_namespace = local_namespace
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self._unflushed = 0
        self._written = 0
        self._flush: Future[None] | None = None
        self._lock = threading.Lock()

    def write(self, data: bytes | memoryview) -> None:
        """Append ``data``; raises ``OSError`` (a full disk, say)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._unflushed += len(data)
        self._written += len(data)
        if self.local_namespace and self._unflushed >= FLUSH_EVERY and (self._flush is None or self._flush.done()):
            # Start writing back what we have while the rest arrives; the final
            # fsync then has little left to do.
            self._unflushed = 0
            self._flush = _flusher.get().submit(_write_back, self._fd, self._written)

    def close(self) -> None:
        """Close the file (idempotent), after any early write-back finished."""
        with self._lock:
            if self._fd < 0:
                return
            if self._flush is not None:
                with contextlib.suppress(OSError):
                    self._flush.result()
            os.close(self._fd)
            self._fd = -1

    def sync_and_close(self) -> None:
        """Make the bytes durable, then close; raises ``OSError``."""
        if self._flush is not None:
            self._flush.result()
        os.fsync(self._fd)
        self.close()

    def discard(self) -> None:
        """Close and remove the file (nothing happens if it already became an object)."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def store(self, adapter: BlockAdapter, url: str) -> None:
        """Make the landing file the object ``url``, replacing any object there.

        On the local block store, with the file in ``url``'s namespace, a
        durable rename; otherwise ``adapter.put_file``.  Raises what the
        adapter or the filesystem raises; the file is then still discarded by
        ``landing``.
        """
        if self.local_namespace and scheme_of(url) == "local":
            self.sync_and_close()
            dest = LocalAdapter.path_of(url)
            directory = os.path.dirname(dest)
            os.makedirs(directory, exist_ok=True)
            os.replace(self.path, dest)
            fsync_dir(directory)
            return
        self.close()
        adapter.put_file(url, self.path)


class Pipeline:
    """Hashes (SHA-256, when given one) and writes chunks to a landing file, in order.

    A body of ``expected`` bytes from ``PIPELINE_ABOVE`` on, or of unknown
    size (``None``), is written by a thread of its own: the receiving thread
    ``put``s what it has decoded and verified and goes on reading; hashlib and
    ``os.write`` release the GIL, so receiving and writing run on two cores.
    At most ``QUEUE`` chunks wait.  A smaller body is hashed and written in
    ``put`` itself (a thread is not worth it).  Errors (a full disk) surface in
    the next ``put`` or in ``finish``, which must always be called (it ends the
    thread).
    """

    QUEUE: Final = 8

    def __init__(self, land: Landing, sha: Any = None, *, expected: int | None = None) -> None:
        self._sha = sha
        self._land = land
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if expected is None or expected >= PIPELINE_ABOVE:
            self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=self.QUEUE)
            self._thread = threading.Thread(target=self._run, name="lm-land-pipe", daemon=True)
            self._thread.start()

    def _write(self, data: bytes) -> None:
        if self._sha is not None:
            self._sha.update(data)
        self._land.write(data)

    def _run(self) -> None:
        while (data := self._queue.get()) is not None:
            if self._error is not None:
                continue
            try:
                self._write(data)
            except BaseException as exc:  # noqa: BLE001 - re-raised in put() or finish()
                self._error = exc

    def put(self, data: bytes) -> None:
        if self._thread is None:
            self._write(data)
            return
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def finish(self) -> None:
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error


@contextlib.contextmanager
def landing(directory_url: str, tmpdir: str | None) -> Iterator[Landing]:
    """A landing file for objects under ``directory_url``; removed on exit unless it became an object.

    The file lies in that directory when it is on the local block store (so
    storing it is a rename), else in ``tmpdir`` (``/tmp`` when ``None``).
    """
    name = f"{TEMP_PREFIX}gw-{secrets.token_hex(8)}"
    if scheme_of(directory_url) == "local":
        directory = LocalAdapter.path_of(directory_url)
        os.makedirs(directory, exist_ok=True)
        land = Landing(os.path.join(directory, name), local_namespace=True)
    else:
        land = Landing(os.path.join(tmpdir or "/tmp", name), local_namespace=False)
    try:
        yield land
    finally:
        land.discard()
