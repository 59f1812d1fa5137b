"""``LocalAdapter``: the block store on a local (or NFS) directory, ``local:///abs/path``.

The URL path is the file path, verbatim: ``local:///var/lake/ns/data/ab/cd`` is
the file ``/var/lake/ns/data/ab/cd``.  Objects appear atomically: a writer fills
a temp file named ``.tmp-*`` in the destination directory, fsyncs it, renames it
over the destination and fsyncs the directory, so a reader sees the old object
or the new one, never a torn one, and a crash loses nothing that ``put``
returned for.  Names starting with ``.tmp-`` are therefore reserved: ``list``
skips them and writes to them are refused.  ``put_file(..., link=True)`` of a
file on the same filesystem (the mount's temp file, which its writer never
changes again) fsyncs that file and hard-links it into place: no second copy.
``put_many`` stores a batch (the mount's write-back pipeline): each object is
renamed into place unsynced and one ``syncfs(2)`` of the store's filesystem
makes the whole batch durable before it returns, instead of two fsyncs per
object (measured: 0.07 ms of CPU a 1 KiB object instead of 0.6, and a
hundredth of the wall time).  A ``syncfs`` also writes back other processes'
dirty pages on that filesystem, so it is used only off the user's path, for
batches of ``SYNCFS_MIN`` objects or more.

``put_lazily`` (the mount's close of a small file, stop 50) stores an object
whole and visible at once, renamed into place unsynced, so a crash of any
process loses nothing it returned for; durable against power loss it becomes
within ``SYNC_AFTER`` seconds, by one ``syncfs(2)`` for every object stored so
meanwhile (a thread of this process; and when the process exits), or at once by :func:`sync_lazily_put`
(the mount's ``fsync(2)``) or :func:`sync_store` (every commit, in whichever
process: ``syncfs`` covers every process's objects on that filesystem).  A
lone ``cp -r`` of 1 KiB files had paid two fsyncs a file, each a journal
commit of the filesystem, and every file create waited behind them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as stat_mod
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, Final

from lakemount.block.ranges import check_range
from lakemount.block.urls import split_url
from lakemount.errors import InvalidArgument, LakeMountError, ObjectNotFound, Unavailable
from lakemount.graveler.ports import ObjectInfo

SCHEME = "local"
TEMP_PREFIX = ".tmp-"
_COPY_CHUNK = 1 << 20
SYNCFS_MIN = 8  # objects in a put_many batch from which one syncfs replaces their fsyncs
SYNC_AFTER: Final = 1.0  # seconds an object stored by put_lazily may wait for the syncfs that makes it durable


class LocalAdapter:
    """A ``BlockAdapter`` over the local filesystem for ``local:///abs/path`` URLs."""

    # --- URL <-> path --------------------------------------------------------

    @staticmethod
    def path_of(url: str) -> str:
        """Return the absolute file path a ``local://`` URL names.

        Raises ``InvalidArgument`` for another scheme, a relative path, or a path
        with empty, ``.`` or ``..`` segments (they would alias other objects or
        escape the storage namespace).
        """
        scheme, path = split_url(url)
        if scheme != SCHEME:
            raise InvalidArgument(f"not a local:// URL: {url!r}")
        if not path.startswith("/") or path == "/":
            raise InvalidArgument(f"local URL must name an absolute file path (local:///abs/path): {url!r}")
        parts = path[1:].split("/")
        if any(p in ("", ".", "..") for p in parts) or "\0" in path:
            raise InvalidArgument(f"local URL has an empty, '.' or '..' path segment: {url!r}")
        return path

    @staticmethod
    def url_of(path: str) -> str:
        return f"{SCHEME}://{path}"

    # --- writes --------------------------------------------------------------

    def presign(self, url: str, method: str) -> None:
        """No presigned URLs: the local block store hands out no URLs (lakeFS's local adapter does not either): clients go through the API."""
        return None

    def put(self, url: str, data: bytes) -> None:
        def fill(fd: int) -> None:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]

        self._atomic_write(url, fill)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store each ``(url, data)``: every object is whole and durable when this returns (one ``syncfs``
        for a batch of ``SYNCFS_MIN`` or more); a failure raises with the objects before it in place."""
        if len(items) < SYNCFS_MIN or _syncfs is None:
            for url, data in items:
                self.put(url, data)
            return
        made: set[str] = set()
        for url, data in items:
            self._place_unsynced(url, data, made)
        directory = os.path.dirname(self.path_of(items[0][0]))
        try:
            _syncfs(directory)
        except OSError as e:
            raise _translate(e, directory) from e

    def put_lazily(self, url: str, data: bytes) -> None:
        """Store ``data`` at ``url`` whole and visible now (no reader sees it torn, a crash of this process
        loses nothing), durable against power loss within ``SYNC_AFTER`` seconds or at the next
        :func:`sync_lazily_put` / :func:`sync_store`.  Without ``syncfs(2)``: a ``put``."""
        if _syncfs is None:
            self.put(url, data)
            return
        _lazy.noted(self._place_unsynced(url, data, set()))

    def _place_unsynced(self, url: str, data: bytes, made: set[str]) -> str:
        """Write ``data`` to a temp file and rename it to ``url``'s path, syncing nothing (whole and visible
        at once; durable once its filesystem is synced); returns the directory.  ``made``: directories known
        to exist (this one is added)."""
        path, directory, tmp = self._placing(url)
        try:
            if directory not in made:
                os.makedirs(directory, exist_ok=True)
                made.add(directory)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise _translate(e, url) from e
        return directory

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        # A copy unless the caller promises never to change its file again
        # (``link``): stored objects are immutable.
        if link and self._link_file(url, path):
            return
        try:
            src = open(path, "rb")  # noqa: SIM115 - closed by the with below
        except (FileNotFoundError, IsADirectoryError):
            raise ObjectNotFound(f"local file {path}") from None
        except OSError as e:
            raise _translate(e, path) from e
        with src:
            self._atomic_write(url, lambda fd: _copy_fd(src.fileno(), fd))

    def _link_file(self, url: str, path: str) -> bool:
        """Make the file ``path`` itself the object ``url`` (fsync, hard link, rename, directory fsync):
        its bytes reach the disk once.  False when the two lie on different filesystems (or one
        without hard links): then the caller copies."""
        dest, directory, tmp = self._placing(url)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, IsADirectoryError):
            raise ObjectNotFound(f"local file {path}") from None
        except OSError as e:
            raise _translate(e, path) from e
        try:
            try:
                os.fsync(fd)  # the inode's data, whichever descriptor wrote it
            finally:
                os.close(fd)
            os.makedirs(directory, exist_ok=True)
            try:
                os.link(path, tmp)
            except OSError as e:
                if e.errno in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
                    return False
                raise
            os.replace(tmp, dest)  # atomic, over any object there, as a copy's rename is
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(e, OSError):
                raise _translate(e, url) from e
            raise
        fsync_dir(directory)
        return True

    def copy(self, src_url: str, dst_url: str) -> None:
        # A copy, not a hard link: the two objects must have their own modification times.
        src_path = self.path_of(src_url)
        try:
            src = open(src_path, "rb")  # noqa: SIM115 - closed by the with below
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(src_url) from None
        except OSError as e:
            raise _translate(e, src_url) from e
        with src:
            self._atomic_write(dst_url, lambda fd: _copy_fd(src.fileno(), fd))

    def _placing(self, url: str) -> tuple[str, str, str]:
        """``(path, directory, temp path)`` of object ``url``: the temp file beside it that a writer fills and
        renames over it.  ``InvalidArgument`` for a name that is itself a temp file's (reserved)."""
        path = self.path_of(url)
        directory, name = os.path.split(path)
        if name.startswith(TEMP_PREFIX):
            raise InvalidArgument(f"object names starting with {TEMP_PREFIX!r} are reserved: {url!r}")
        return path, directory, os.path.join(directory, f"{TEMP_PREFIX}{os.urandom(8).hex()}-{name}")

    def _atomic_write(self, url: str, fill: Callable[[int], None]) -> None:
        path, directory, tmp = self._placing(url)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise _translate(e, url) from e
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise _translate(e, url) from e
        try:
            try:
                fill(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(e, OSError):
                raise _translate(e, url) from e
            raise
        fsync_dir(directory)

    def touch(self, url: str) -> None:
        path = self.path_of(url)
        try:
            os.utime(path)
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFound(url) from None
        except OSError as e:
            raise _translate(e, url) from e

    def delete(self, url: str) -> None:
        # Empty parent directories are left in place on purpose: removing them
        # would race with a concurrent put that just created them.
        path = self.path_of(url)
        try:
            os.unlink(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return
        except OSError as e:
            raise _translate(e, url) from e

    # --- reads ---------------------------------------------------------------

    def get(self, url: str) -> bytes:
        with self._open_file(url) as f:
            return f.read()

    def get_range(self, url: str, start: int, length: int) -> bytes:
        check_range(start, length)
        with self._open_file(url) as f:
            try:
                return os.pread(f.fileno(), length, start) if length else b""
            except OSError as e:
                raise _translate(e, url) from e

    def open(self, url: str) -> BinaryIO:
        return self._open_file(url)

    def _open_file(self, url: str) -> BinaryIO:
        path = self.path_of(url)
        try:
            f = open(path, "rb")  # noqa: SIM115 - returned to the caller
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectNotFound(url) from None
        except OSError as e:
            raise _translate(e, url) from e
        return f

    def stat(self, url: str) -> ObjectInfo:
        path = self.path_of(url)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFound(url) from None
        except OSError as e:
            raise _translate(e, url) from e
        if not stat_mod.S_ISREG(st.st_mode):
            raise ObjectNotFound(url)
        return ObjectInfo(url=url, size=st.st_size, mtime=st.st_mtime, etag="")

    def exists(self, url: str) -> bool:
        return os.path.isfile(self.path_of(url))

    def list(self, prefix_url: str) -> Iterator[ObjectInfo]:
        scheme, prefix = split_url(prefix_url)
        if scheme != SCHEME:
            raise InvalidArgument(f"not a local:// URL: {prefix_url!r}")
        if not prefix.startswith("/"):
            raise InvalidArgument(f"local URL must name an absolute path: {prefix_url!r}")
        # Start at the deepest directory that every match lies under.
        return _walk_sorted(prefix[: prefix.rfind("/") + 1], prefix)


def _walk_sorted(directory: str, prefix: str) -> Iterator[ObjectInfo]:
    """Files under ``directory`` whose path starts with ``prefix``, in path order.

    Ordering is by the full path string, which is URL order.  Inside one
    directory a subdirectory ``d`` sorts as ``d/``: its files come after a
    sibling ``d-x`` ("-" < "/") and before ``d0``.  Entries vanishing while we
    walk (concurrent deletes) are skipped, not errors.
    """
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        raise _translate(e, directory) from e
    keyed: list[tuple[str, os.DirEntry[str], bool]] = []
    for entry in entries:
        if entry.name.startswith(TEMP_PREFIX):
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        full = directory + entry.name + ("/" if is_dir else "")
        # Keep a directory if it may hold matches, a file if it matches.
        if full.startswith(prefix) or (is_dir and prefix.startswith(full)):
            keyed.append((full, entry, is_dir))
    keyed.sort(key=lambda t: t[0])
    for full, entry, is_dir in keyed:
        if is_dir:
            yield from _walk_sorted(full, prefix)
            continue
        try:
            st = entry.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            raise _translate(e, full) from e
        if stat_mod.S_ISREG(st.st_mode):
            yield ObjectInfo(url=LocalAdapter.url_of(full), size=st.st_size, mtime=st.st_mtime, etag="")


def _copy_fd(src: int, dst: int) -> None:
    """Copy all of ``src`` into ``dst`` in the kernel when possible (sendfile), else via a buffer."""
    offset = 0
    try:
        while True:
            sent = os.sendfile(dst, src, offset, _COPY_CHUNK * 8)
            if sent == 0:
                return
            offset += sent
    except OSError as e:
        if offset or e.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV):
            raise
    while chunk := os.read(src, _COPY_CHUNK):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view) :]


class _DirSync:
    """One directory's fsyncs, shared by the renames waiting for one (group commit).

    A rename is durable once an fsync of its directory that *began after it*
    has returned.  Writers that renamed while an fsync was under way all wait
    for the next one, which one of them runs: a commit writing a thousand
    range tables into ``_lakefs/`` on four threads pays far fewer directory
    fsyncs than renames, and none returns before its own rename is covered.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.started = 0  # fsyncs begun
        self.done = 0  # the number of the last fsync that returned (they run one at a time)
        self.running = False
        self.error: OSError | None = None  # what the fsync numbered ``done`` raised

    def sync(self, directory: str) -> None:
        with self.cond:
            target = self.started + 1  # the first fsync to begin from now on covers this caller's rename
            while self.done < target:
                if self.running:
                    self.cond.wait()
                    continue
                self.running = True
                self.started += 1
                mine = self.started
                self.cond.release()
                error: OSError | None = None
                try:
                    _fsync_dir_now(directory)
                except OSError as e:
                    error = e
                finally:
                    self.cond.acquire()
                    self.running = False
                    self.done, self.error = mine, error
                    self.cond.notify_all()
            if self.error is not None:  # every fsync numbered from ``target`` on covers this rename: the last one's word
                raise self.error


class _LazySync:
    """The objects of this process stored by ``put_lazily`` and not yet known durable, and the syncs that make
    them so: one ``syncfs`` per filesystem for all of them, by a thread ``SYNC_AFTER`` seconds after the
    first (started on first need), or at once by ``sync``.  Numbered like ``_DirSync``: a caller's objects
    are durable once a sync that *began after they were stored* has returned."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.dirs: dict[int, str] = {}  # a directory of each filesystem holding objects not yet synced
        self.stored = 0  # objects stored lazily
        self.covered = 0  # the last one of them a returned sync covers
        self.since = 0.0  # monotonic time of the oldest object not yet covered
        self.running = False
        self.thread: threading.Thread | None = None

    def noted(self, directory: str) -> None:
        try:
            dev = os.stat(directory).st_dev
        except OSError:
            dev = -1
        with self.cond:
            first = self.stored == self.covered
            if first:
                self.since = time.monotonic()
            self.stored += 1
            self.dirs.setdefault(dev, directory)
            if self.thread is None or not self.thread.is_alive():
                if self.thread is None:  # a process that exits (an unmount) syncs what is left first
                    import atexit

                    atexit.register(self._at_exit)
                self.thread = threading.Thread(target=self._run, name="lm-lazy-sync", daemon=True)
                self.thread.start()
            if first:
                # Only the first object not yet covered wakes the thread: it then sleeps until its sync is due, and
                # a wake-up per close (a futex and a GIL hand-off each, stop 53) would only make it sleep again.
                self.cond.notify_all()

    def sync(self) -> None:
        """Return once every object stored before the call is durable; ``Unavailable`` if a sync failed."""
        with self.cond:
            target = self.stored
            while self.covered < target:
                if self.running:
                    self.cond.wait()
                    continue
                self._sync_locked()

    def _sync_locked(self) -> None:
        """One ``syncfs`` of each filesystem noted, covering every object stored until now (the lock held on
        entry and exit, released while syncing).  Raises ``Unavailable``: the objects stay uncovered."""
        dirs, upto = list(self.dirs.values()), self.stored
        self.dirs = {}
        self.running = True
        self.cond.release()
        failed: OSError | None = None
        try:
            for directory in dirs:
                try:
                    assert _syncfs is not None
                    _syncfs(directory)
                except OSError as e:
                    failed = e
        finally:
            self.cond.acquire()
            self.running = False
            self.cond.notify_all()
        if failed is not None:
            for directory in dirs:
                with contextlib.suppress(OSError):
                    self.dirs.setdefault(os.stat(directory).st_dev, directory)
            raise _translate(failed, dirs[0])
        self.covered = max(self.covered, upto)
        if self.covered < self.stored:
            self.since = time.monotonic()

    def _at_exit(self) -> None:
        try:
            self.sync()
        except LakeMountError as e:
            import logging  # not at import: a CLI verb's import budget (issue 41)

            logging.getLogger(__name__).error("at exit, stored objects are not durable against power loss: %s", e)

    def _run(self) -> None:
        with self.cond:
            while True:
                while self.covered == self.stored:
                    self.cond.wait()
                wait = self.since + SYNC_AFTER - time.monotonic()
                if wait > 0 or self.running:
                    self.cond.wait(max(wait, 0.01))
                    continue
                try:
                    self._sync_locked()
                except LakeMountError as e:  # the closes returned long ago: say it loudly, try again later
                    import logging  # not at import: a CLI verb's import budget (issue 41)

                    logging.getLogger(__name__).error(
                        "%d stored objects are not yet durable against power loss: %s", self.stored - self.covered, e)
                    self.since = time.monotonic()


_lazy = _LazySync()


def sync_lazily_put() -> None:
    """Make every object this process stored with ``put_lazily`` durable now (``fsync(2)`` in the mount).
    Raises ``Unavailable`` if a sync fails."""
    _lazy.sync()


def sync_store(url: str) -> None:
    """One ``syncfs`` of the filesystem holding the local namespace ``url``: every object stored there by any
    process before this call is durable when it returns (a commit begins with it, so no commit names an
    object that a power loss could take back).  A missing directory is nothing to sync; ``Unavailable``."""
    if _syncfs is None:
        return
    path = LocalAdapter.path_of(url.rstrip("/") or url)
    while path != "/" and not os.path.isdir(path):
        path = os.path.dirname(path)
    try:
        _syncfs(path)
    except OSError as e:
        raise _translate(e, path) from e


_dir_syncs: dict[str, _DirSync] = {}
_dir_syncs_lock = threading.Lock()


def fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (the file's own fsync does not), sharing the fsync with the
    renames made there meanwhile by this process's other threads (``_DirSync``).  Raises ``Unavailable``."""
    with _dir_syncs_lock:
        group = _dir_syncs.get(directory)
        if group is None:
            if len(_dir_syncs) >= 4096:
                _dir_syncs.clear()  # a waiter keeps its own object; the next caller starts a new group
            group = _dir_syncs[directory] = _DirSync()
    try:
        group.sync(directory)
    except OSError as e:
        raise _translate(e, directory) from e


def _syncfs_linux(directory: str) -> None:
    """``syncfs(2)`` of the filesystem holding ``directory``: its dirty data and metadata reach the disk
    (since Linux 5.8 it also reports a write-back error met meanwhile)."""
    import ctypes  # only a batch put needs it (a CLI verb's import budget, issue 41)

    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _libc.syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), directory)
    finally:
        os.close(fd)


_libc: Any = None
_syncfs: Callable[[str], None] | None = _syncfs_linux if sys.platform.startswith("linux") else None


def _fsync_dir_now(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        # Some filesystems (and some network mounts) refuse fsync on directories.
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _translate(e: OSError, what: str) -> LakeMountError:
    """Map an ``OSError`` to the error tree: path clashes are bad input, the rest unavailability."""
    if isinstance(e, (FileNotFoundError,)):
        return ObjectNotFound(what)
    if isinstance(e, (NotADirectoryError, IsADirectoryError, FileExistsError)):
        # e.g. writing "a/b" when "a" is an object: possible on S3, not on a filesystem.
        return InvalidArgument(f"{what}: path collides with an existing object or directory ({e.strerror})")
    return Unavailable(f"local block store: {what}: {e.strerror or e}")
