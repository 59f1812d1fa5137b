"""Unsaved file content: a buffer in memory or a local temp file per file open for writing.

Objects are immutable, so a write cannot patch one in place.  The first write
to a file (or a truncation) copies its current content into a temp file under
the mount's spool directory ("copy on first write"; a file opened with O_TRUNC
or just created starts empty and copies nothing); every handle of the inode
then reads and writes that file, which is how one mount reads its own writes.
``save`` turns the content into a new content-addressed object and returns
its digests; the caller stages the entry.  Each change bumps ``version`` so a
save that raced with a write does not mark the newer bytes saved.

Large files stream.  While the content only grows by appends (the common
sequential write), its SHA-256 and MD5 are computed as it is written, so a
save need not read the file again; past ``HASH_THREAD_AFTER`` bytes they are
computed on a thread of the file's own (``_Digests``), so the writing process
waits for the disk, not for the hashes.  Past ``MD5_MAX`` (one part of an
upload in parts) the MD5 is given up: the file's ETag is then the opaque one
of an object uploaded in parts (``catalog.streaming.parts_etag``), as S3 gives
such objects, and the MD5's 1.6 ms of CPU a MiB (twice the SHA-256's) is not
spent.  When the temp file may become the
object itself (``in_place``: the repository's namespace is on the local block
store, on the spool's filesystem), the store hard-links it into place
(``DataWriter.write_file(link=True)``): the bytes reach the disk once, and
the temp file is written back every ``FLUSH_EVERY`` bytes while the rest
arrives, so the fsync at close has little left to do, and the kernel drops
the pages written back (a large file's bytes leave the page cache once they
are on the disk: ``_write_back``).  A file that became an
object is *frozen*: the next write first copies it to a new temp file, so the
object never changes.  On a store that takes uploads in parts (S3), a file
written from its start sends each part as it fills (``catalog/streaming.py``:
bounded memory), so its save sends only the last one; an overwrite or a hole
gives the upload up, and the save uploads the file whole.

A small file (``memory``, up to ``MEMORY_MAX`` bytes: what ``cp -r`` of a
source tree or a Spark job's markers write) is held in memory instead, and
saved from there (:meth:`DirtyFile.snapshot`): no temp file is created, synced
or deleted for it; the first write past ``MEMORY_MAX``, or anything that needs a
file (a streamed or in-place save of a large file), *spills* it into a temp
file, from which it goes on as above.

A write-only open may be a FUSE *passthrough* open (:mod:`~lakemount.fuse.passthrough`, stop 54): the kernel
writes the temp file itself and this module sees none of the writes.  Such a file is *kernel-written*
(:meth:`DirtyFile.pass_begin`): its size and whether it changed are read from the temp file (``fstat``: size,
mtime and ctime, which this kernel stamps finely once read), its digests are computed at the save from the file
(:func:`hash_fd`: the SHA-256 and, up to ``MD5_MAX``, the MD5 on two threads), and while a passthrough open may
still write it, a save stores a private copy of it rather than the file itself (a write after the save would
otherwise change a stored object): the copy is what is hashed and becomes the object.

Past ``MD5_MAX`` a file written from its start may have its appends written by the open-reply shim itself (stop 57,
:meth:`DirtyFile.hand_writes`, :mod:`~lakemount.fuse.kflags`): no request of them reaches Python.  The shim's own hash
thread computes its SHA-256 from the temp file as it grows, without the GIL (stop 58: from the file's start, into a
:func:`~lakemount.fuse.kflags.new_sha256` the file's digests adopt), and the follower thread starts the write-back of
what is hashed; what this module knows of it (size, version, mtime) is taken in from the shim's count where asked, and
every method that changes, saves or closes the file takes the registration back first (``_direct_in(final=True)``),
hashing on from where the shim's thread stopped.

With write-back (:mod:`~lakemount.fuse.writeback`) a saved temp file is *held*:
it became the journal's data file, so it is never written again (a new write
gets a fresh copy, :class:`Held` tells a writer that raced with the hand-over)
and never deleted here.  A large kernel-written file is handed to the journal
unhashed (``store(hash_later_from=...)``, stop 55): the close neither reads it
back nor syncs it, and the pipeline hashes it after the close.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import logging
import mmap
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, BinaryIO, Final, TypeVar

from lakemount.catalog.streaming import PART_SIZE, parts_etag
from lakemount.fuse import kflags

if TYPE_CHECKING:
    from lakemount.catalog.streaming import StreamedUpload
    from lakemount.catalog.writer import DataInfo

log = logging.getLogger(__name__)

T = TypeVar("T")
Finish = Callable[[], "DataInfo | None"]  # a streamed upload's end: where the bytes went, None to upload them whole

COPY_CHUNK: Final = 4 << 20
HASH_THREAD_AFTER: Final = 1 << 20  # past this many appended bytes, hashing moves to a thread of the file's own
HASH_BATCH: Final = 1 << 20  # smaller pieces are handed to the hashing threads gathered to this size
MEMORY_MAX: Final = 64 << 10  # a file is held in memory up to this size (``memory``), then spilled to a temp file
MD5_MAX: Final = PART_SIZE  # a file appended past this has the ETag of one uploaded in parts, not its MD5
HASH_QUEUE: Final = 16  # chunks waiting for that thread (FUSE writes are up to 1 MiB: bounded memory)
FLUSH_EVERY: Final = 16 << 20  # an in-place temp file is written back every this many appended bytes
FLUSH_THREADS: Final = 2

_flush_pool: ThreadPoolExecutor | None = None
_flush_lock = threading.Lock()


def _flusher() -> ThreadPoolExecutor:
    """The threads that write temp files back early: made on first use, never at import."""
    global _flush_pool
    with _flush_lock:
        if _flush_pool is None:
            _flush_pool = ThreadPoolExecutor(FLUSH_THREADS, thread_name_prefix="lm-spool-flush")
        return _flush_pool


FOLLOW_EVERY: Final = 0.05  # seconds between looks at the temp files the kernel writes through passthrough
SYNC_FILE_RANGE_WRITE: Final = 2  # <linux/fs.h>: start writing the range back, wait for nothing
SYNC_FILE_RANGE_WAIT: Final = 7  # WAIT_BEFORE | WRITE | WAIT_AFTER: the range written back when it returns

_follower_lock = threading.Lock()
_followed: set[DirtyFile] = set()  # kernel-written files whose growth the follower writes back (stop 55)
_follower_started = False
_sync_file_range: Callable[[int, int, int, int], int] | None = None


def _libc_sync_file_range() -> Callable[[int, int, int, int], int]:
    """libc's ``sync_file_range`` (Python's ``os`` lacks it), through ctypes, which lets the GIL go for the call;
    loaded at the first use."""
    global _sync_file_range
    if _sync_file_range is None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.sync_file_range
        fn.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
        fn.restype = ctypes.c_int
        _sync_file_range = fn
    return _sync_file_range


def _start_write_back(fd: int, offset: int, nbytes: int) -> None:
    """Start writing ``nbytes`` at ``offset`` of ``fd`` back to the disk (0: up to its end), without waiting."""
    _libc_sync_file_range()(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE)  # a failure leaves the close's fsync to do it


def _follow(dirty: DirtyFile) -> None:
    """Have the follower thread write back what the kernel appends to ``dirty``'s temp file while it is passed
    through (the mount's own writes do it every ``FLUSH_EVERY`` bytes: ``_write_back``)."""
    global _follower_started
    with _follower_lock:
        _followed.add(dirty)
        if not _follower_started:
            _follower_started = True
            threading.Thread(target=_follower, name="lm-pass-follow", daemon=True).start()


def _follower() -> None:
    """The follower thread: the write-back of passthrough files as the kernel writes them (stop 55), and of files whose
    appends the shim writes (stop 57) as the shim's hash thread hashes them (stop 58).  While one of those is followed
    it waits until the shim's hash passes the next ``FLUSH_EVERY`` bytes of a file (at most ``FOLLOW_EVERY``), else it
    looks every ``FOLLOW_EVERY``."""
    direct, seq = False, 0
    while True:
        if direct:
            seq = kflags.direct_write_wait(seq, FOLLOW_EVERY)
        else:
            time.sleep(FOLLOW_EVERY)
        with _follower_lock:
            files = list(_followed)
        direct = False
        for dirty in files:
            try:
                going = dirty.follow_step()
            except OSError:
                going = False
            except Exception:  # a bug: the thread must live on
                log.exception("following %s failed: its writes go through the mount from now on", dirty.path)
                going = False
                with contextlib.suppress(Exception):
                    dirty.end_direct()
            if not going:
                with _follower_lock:
                    _followed.discard(dirty)
            elif dirty.direct:
                direct = True


_temp_names = itertools.count()
_TEMP_TAG = f"{os.getpid()}-{os.urandom(4).hex()}"


def new_temp(directory: str, prefix: str = "w-") -> tuple[int, str]:
    """A new empty temp file in ``directory`` (mode 0600): its descriptor and path.

    What ``tempfile.mkstemp`` gives, without its per-call name drawing: a
    name this process never used (its pid, a random tag drawn once, a
    counter), created exclusively; one made a fork's copy of the counter
    found taken is drawn again."""
    while True:
        path = os.path.join(directory, f"{prefix}{_TEMP_TAG}-{next(_temp_names)}")
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path
        except FileExistsError:
            continue


class _Digests:
    """SHA-256 and MD5 of the bytes appended so far, in order; big bodies are hashed on two threads.

    ``feed`` takes the next bytes.  The first ``HASH_THREAD_AFTER`` bytes are
    hashed in the caller's thread; from then on each digest has a thread of
    its own (hashlib releases the GIL: MD5, the slower, and SHA-256 run on two
    cores while the caller writes on a third), fed through bounded queues.
    Pieces under ``HASH_BATCH`` are gathered into one batch first (a put wakes both
    threads).  ``hexdigests`` waits until every byte fed is hashed; ``close`` ends the
    threads.  Not thread-safe itself: the ``DirtyFile``'s lock orders the calls.
    """

    def __init__(self) -> None:
        self._hashes: tuple[kflags.Sha256, ...] = (hashlib.sha256(), hashlib.md5(usedforsecurity=False))
        self.fed = 0
        self._queues: list[queue.Queue[bytes | None]] = []
        self._held: list[bytes] = []  # small pieces not yet handed to the threads, in order
        self._held_bytes = 0

    def feed(self, data: bytes) -> None:
        self.fed += len(data)
        if self.fed > MD5_MAX and len(self._hashes) == 2:
            self._drop_md5()
        if not self._queues and self.fed <= HASH_THREAD_AFTER:
            for h in self._hashes:
                h.update(data)
            return
        if not self._queues:
            for h in self._hashes:
                chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=HASH_QUEUE)
                threading.Thread(target=_hash_chunks, args=(h, chunks), name="lm-write-hash", daemon=True).start()
                self._queues.append(chunks)
        if len(data) >= HASH_BATCH and not self._held:
            self._send(data)
            return
        # Small writes (Hadoop's 4 KiB) are gathered: each put wakes two threads, so they get whole batches.
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= HASH_BATCH:
            self._send_held()

    def settle(self) -> None:
        """Wait until every byte fed is hashed and end the threads: the caller hashes on from the file itself
        (:meth:`hash_file`; a later :meth:`feed` starts threads again)."""
        self._send_held()
        for chunks in self._queues:
            chunks.join()
        self.close()

    def hash_file(self, fd: int, stop: int) -> None:
        """Hash bytes ``fed``..``stop`` of ``fd`` in the caller's thread (only after :meth:`settle`, once the MD5 was
        given up: a file written by the shim, stop 57, after its hash thread let the SHA-256 go, :meth:`resume`)."""
        assert not self._queues and len(self._hashes) == 1
        self.fed = _hash_mapped(self._hashes[0], fd, stop, self.fed)

    def adopt(self, sha: kflags.Sha256) -> None:
        """Compute the SHA-256 in ``sha`` from now on, fed nothing yet (only after :meth:`settle`, once the MD5 was
        given up): the shim's hash thread feeds it the file from its start (stop 58), and :meth:`resume` says how far."""
        assert not self._queues and len(self._hashes) == 1
        self._hashes, self.fed = (sha,), 0

    def resume(self, hashed: int) -> None:
        """The shim's hash thread fed the adopted SHA-256 the file's first ``hashed`` bytes and let it go."""
        self.fed = hashed

    def _drop_md5(self) -> None:
        """Stop computing the MD5 (the file passed ``MD5_MAX``): its thread ends, its ETag will be opaque."""
        self._hashes = self._hashes[:1]
        if len(self._queues) == 2:
            self._queues.pop().put(None)

    def _send_held(self) -> None:
        if self._held:
            data = b"".join(self._held)
            self._held, self._held_bytes = [], 0
            self._send(data)

    def _send(self, data: bytes) -> None:
        for chunks in self._queues:
            chunks.put(data)

    def hexdigests(self) -> tuple[str, str]:
        """``(sha256 hex, md5 hex)`` of every byte fed; past ``MD5_MAX``, the ETag of an upload in parts
        instead of the MD5."""
        self._send_held()
        for chunks in self._queues:
            chunks.join()
        sha = self._hashes[0].hexdigest()
        if len(self._hashes) == 1:
            return sha, parts_etag(sha, self.fed)
        return sha, self._hashes[1].hexdigest()

    def close(self) -> None:
        for chunks in self._queues:
            chunks.put(None)
        self._queues = []


def _hash_chunks(h: kflags.Sha256, chunks: queue.Queue[bytes | None]) -> None:
    while True:
        data = chunks.get()
        try:
            if data is None:
                return
            h.update(data)
        finally:
            chunks.task_done()


class Held(Exception):
    """The temp file was handed to the write-back journal meanwhile: write to a fresh copy instead."""


class DirtyFile:
    """The buffer or temp file holding a file's current content; thread-safe."""

    def __init__(
        self, spool_dir: str, source: Callable[[], BinaryIO] | None, size: int, *, in_place: bool = False,
        streaming: Callable[[], StreamedUpload | None] | None = None, memory: bool = False,
    ) -> None:
        """Create the temp file, filled with the first ``size`` bytes of ``source()`` (None: empty).

        ``in_place``: the store may make this very file the object; ``streaming`` makes the upload
        in parts once the file passes ``PART_SIZE``; ``memory``: up to ``MEMORY_MAX`` bytes are held
        in memory, with no temp file (see the module docstring).
        """
        self._spool_dir = spool_dir
        self._mem: bytearray | bytes | None = None  # the content while held in memory (bytes once journaled) (then ``fd`` is -1, ``path`` "")
        if memory and size <= MEMORY_MAX:
            self.fd, self.path, self._mem = -1, "", bytearray()
        else:
            self.fd, self.path = new_temp(spool_dir)
        self.lock = threading.Lock()
        self.version = 1  # bumped by every change
        self.saved_version = 0  # the version last turned into a staged entry
        self.size = 0
        self.held = False  # the write-back journal's data file now: read-only, deleted by the journal
        self.pending = False  # held and not yet staged: the node keeps it (reads come from here)
        self.in_place = in_place
        self.frozen = False  # the file is a stored object now: copy it before changing it
        self._retired: list[int] = []  # descriptors of files that became objects (a racing pread may hold one)
        self._unflushed = 0
        self._flush: Future[None] | None = None
        # Running digests of every byte appended; None once a write lands anywhere but the end.
        self._digests: _Digests | None = _Digests()
        self._streaming = streaming
        self._may_stream = streaming is not None  # until an overwrite, a hole or a save: appends from the start
        self.stream: StreamedUpload | None = None
        self.passing = 0  # passthrough opens of this file: the kernel writes it without telling us
        self.backing_id = 0  # their backing id (one per file: the kernel refuses a second one for the inode)
        self._backing_fd = -1  # the descriptor the backing id was made of (the temp file then)
        # A save takes the temp file itself while a passthrough open lives (set under the node table's lock by the
        # saver, with no other writable open: ``saving._may_write``); a writable open waits for the release then.
        self.saving_itself = False
        self._released = threading.Condition(self.lock)  # notified when a passthrough open is released
        self.kernel_written = False  # written through passthrough: no running digests, the size is the file's
        self._seen: tuple[int, int, int] | None = None  # (size, mtime, ctime) of the temp file when last caught up
        self._followed_to = 0  # a kernel-written file: bytes whose write-back the follower started
        # Stop 57: the handle (0: none) whose appends the shim writes into the temp file itself (``kflags.direct_write_*``,
        # :meth:`hand_writes`): the follower hashes them from the file as it grows and writes them back; what Python
        # knows (size, version, mtime) is taken in from the shim (:meth:`_direct_in`) where it is asked.
        self.direct = 0
        self._direct_seen = (0, 0)  # (writes, bytes) of the registration taken in so far
        self.direct_written: dict[int, int] = {}  # handle -> bytes the shim wrote, taken in, not yet counted
        self.direct_mtime_ns = 0  # wall time of the last of them, not yet set on the entry (:meth:`take_direct_mtime`)
        self._backed_to = 0  # a direct file: bytes whose write-back the follower started
        try:
            if source is not None and size > 0:
                with source() as stream:
                    self._fill(stream)
        except BaseException:
            self.discard()
            raise

    def _fill(self, stream: BinaryIO) -> None:
        while self._mem is not None and (chunk := stream.read(COPY_CHUNK)):
            if self._digests is not None:
                self._digests.feed(chunk)
            if len(self._mem) + len(chunk) > MEMORY_MAX:  # more than announced: on in a temp file
                self._spill()
                _pwrite_all(self.fd, chunk, os.fstat(self.fd).st_size)
            else:
                self._mem += chunk
        if self._mem is not None:
            self.size = len(self._mem)
            return
        with os.fdopen(os.dup(self.fd), "wb") as out:
            out.seek(0, os.SEEK_END)
            while chunk := stream.read(COPY_CHUNK):
                if self._digests is not None:
                    self._digests.feed(chunk)
                out.write(chunk)
        self.size = os.fstat(self.fd).st_size

    def _forget_digests(self) -> None:
        if self._digests is not None:
            self._digests.close()
            self._digests = None
        self._drop_stream()

    def _drop_stream(self) -> None:
        self._may_stream = False
        if self.stream is not None:
            self.stream.abort()
            self.stream = None

    def digests(self) -> tuple[int, str, str] | None:
        """``(size, sha256 hex, ETag)`` of the current content if known without reading it (the ETag is the MD5
        hex up to ``MD5_MAX`` bytes); call under ``lock``."""
        if self._digests is None or self._digests.fed != self.size:
            return None
        sha, md5 = self._digests.hexdigests()
        return self.size, sha, md5

    @property
    def modified(self) -> bool:
        if self.kernel_written and self.passing:
            self.catch_up()
        fh = self.direct
        if fh:  # without the lock (the loop asks; a save holds it): a write the shim made since the last take-in
            got = kflags.direct_write_state(fh)
            if got is not None and got[1] != self._direct_seen[0]:
                return True
        return self.version != self.saved_version

    def pass_begin(self, register: Callable[[int], int], *, writable: bool = True) -> int:
        """Make the file ready for a passthrough open: the backing id the open is answered with, which
        ``register(fd)`` makes of the temp file's descriptor for the first such open (the kernel then writes
        the file directly; a file held in memory is spilled first, a frozen one copied); 0 if it cannot be
        (the journal holds the file: the caller opens without passthrough; or a ``writable`` open while the
        backing file is a saved one, :meth:`saved_backing`).  ``register``'s OSError is raised, nothing changed.
        Each nonzero return needs one :meth:`pass_end`."""
        with self.lock:
            if self._saved_backing():
                # The window between a passthrough close that saved the file itself and its release: the backing file
                # is the journal's (held) or a stored object (frozen) now, and the kernel takes no other one for the
                # inode while that open lives.  A reader shares it (the saved bytes, never written again); a writer
                # never may (``Handles`` waits for the release first: :meth:`wait_released`).
                if writable:
                    return 0
                self.passing += 1
                return self.backing_id
            if self.held:
                return 0
            self._direct_in(final=True)
            if self.frozen:
                self._thaw()
            self._spill()
            if not self.backing_id:
                self.backing_id = register(self.fd)
                self._backing_fd = self.fd
            self._forget_digests()  # and any streamed upload: the bytes will not pass through here
            self.kernel_written = True
            self.passing += 1
            self._catch_up()
            if self.in_place:  # the temp file becomes the object: its bytes go to the disk while they arrive
                _follow(self)
            return self.backing_id

    def _saved_backing(self) -> bool:
        return bool(self.passing and self.backing_id) and (
            self.saving_itself or self.held or self.frozen or self._backing_fd != self.fd)

    def saved_backing(self) -> bool:
        """True while a passthrough open lives whose backing file is saved content, or about to be: a save is taking
        the temp file itself (``saving_itself``), the journal holds it, the store linked it, or a truncation or thaw
        moved the writes to a new temp file.  A new open of the inode must share that backing file (the kernel refuses
        another one: EIO at open), so only a reader may open until its release.  Read without the lock (the loop asks,
        and a save holds the lock while it hashes): the node table's lock makes it exact against ``saving_itself``."""
        return self._saved_backing()

    def wait_released(self, timeout: float) -> bool:
        """Wait until :meth:`saved_backing` is False (the releases of the passthrough opens handled, or a save that
        took a copy after all); False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._released:
            while self._saved_backing():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._released.wait(min(left, 0.05))
            return True

    def follow(self) -> bool:
        """Start the write-back of what the kernel appended to the temp file since the last call, once that is
        ``FLUSH_EVERY`` bytes or more (the follower thread's call, stop 55: the close's fsync, or the journal's, then
        has little left); False once no passthrough open is left."""
        with self.lock:
            if not self.passing or self.fd < 0 or self.held:
                return False
            fd, start = os.dup(self.fd), self._followed_to
        try:
            size = os.fstat(fd).st_size
            if size < start:  # cut meanwhile: follow it again from the start
                start = 0
            if size - start >= FLUSH_EVERY:
                _start_write_back(fd, start, size - start)
                start = size
        finally:
            os.close(fd)
        with self.lock:
            self._followed_to = start
        return True

    def kernel_mtime_ns(self) -> int:
        """The temp file's mtime (what the kernel's passthrough writes stamped), after a catch-up; 0 if unknown."""
        with self.lock:
            self._catch_up()
            return self._seen[1] if self.kernel_written and self._seen is not None else 0

    def pass_end(self) -> int:
        """A passthrough open of the file was released; returns the backing id to close once none is left (else 0)."""
        with self.lock:
            self.passing = max(0, self.passing - 1)
            self._catch_up()
            if self.passing:
                return 0
            backing, self.backing_id, self._backing_fd, self.saving_itself = self.backing_id, 0, -1, False
            self._released.notify_all()
            return backing

    def catch_up(self) -> None:
        """Take in what the kernel wrote through passthrough, or the shim (stop 57): the size, and a new version if the
        file changed."""
        if self.kernel_written or self.direct:
            with self.lock:
                self._catch_up()
                self._direct_in()

    def hand_writes(self, fh: int) -> bool:
        """After a write of handle ``fh`` through the mount: have the shim write that handle's next appends into the
        temp file itself (stop 57), if this file may take them so: its content in a temp file written from its start,
        past ``MD5_MAX`` (only the SHA-256 is left to compute), no upload in parts to feed, not kernel-written, not an
        object or the journal's.  The follower then hashes what the shim appends and writes it back; anything else
        (a write of another handle, an overwrite, a truncation, a save) takes the registration back first.  True if
        registered now."""
        if self.direct or self.size <= MD5_MAX or not kflags.direct_writes():
            return False
        with self.lock:
            digests = self._digests
            if (self.direct or self._mem is not None or self.fd < 0 or self.held or self.frozen or self.kernel_written
                    or self.passing or self.stream is not None or self._may_stream or digests is None
                    or digests.fed != self.size or self.size <= MD5_MAX):
                return False
            sha = kflags.new_sha256()
            if sha is None:
                return False
            digests.settle()  # its threads ended: the shim's hash thread hashes the file again from its start
            if not kflags.direct_write_register(fh, self.fd, self.size, sha):
                return False
            digests.adopt(sha)
            self.direct, self._direct_seen = fh, (0, 0)
            self._backed_to = self.size - self._unflushed
        _follow(self)
        return True

    def _direct_in(self, *, final: bool = False) -> int:
        """Take in the shim's writes of the handle registered by :meth:`hand_writes` (under ``lock``): the size, a new
        version, their bytes and mtime (:meth:`take_direct_written`, :meth:`take_direct_mtime`); returns how many of
        the file's bytes the shim's hash thread has hashed (0 if none is registered).  ``final``: take the registration
        back too (before the mount changes, saves or closes the file itself), and hash what the shim's thread has not,
        on from where it stopped (a file whose registration the session's end dropped unsaid is hashed again at its
        save)."""
        fh = self.direct
        if not fh:
            return 0
        got = kflags.direct_write_unregister(fh) if final else kflags.direct_write_state(fh)
        if final or got is None:
            self.direct, seen, self._direct_seen = 0, self._direct_seen, (0, 0)
        else:
            seen = self._direct_seen
        if got is None:  # the session is gone: what the file holds is what was written
            end, writes, nbytes, mtime, hashed = os.fstat(self.fd).st_size, seen[0] + 1, seen[1], time.time_ns(), -1
        else:
            end, writes, nbytes, mtime, hashed = got
            if not final:
                self._direct_seen = (writes, nbytes)
        if writes != seen[0]:
            self.size = max(self.size, end)
            self.version += 1
            self.direct_written[fh] = self.direct_written.get(fh, 0) + nbytes - seen[1]
            self.direct_mtime_ns = max(self.direct_mtime_ns, mtime)
        if not self.direct:
            if self._digests is not None and hashed < 0:
                self._forget_digests()  # how far the shim's thread hashed was not said: the save hashes the file
            elif self._digests is not None:
                self._digests.resume(hashed)
                self._digests.hash_file(self.fd, self.size)
            self._unflushed = self.size - self._backed_to
        return max(hashed, 0)

    def end_direct(self, fh: int = 0) -> None:
        """Take the shim's registration back (of handle ``fh`` only, if given): its release, or a ``setattr``."""
        if self.direct and (not fh or self.direct == fh):
            with self.lock:
                if self.direct and (not fh or self.direct == fh):
                    self._direct_in(final=True)

    def take_direct_mtime(self) -> int:
        """The wall time of the shim's last write not yet set on the file's entry (0: none), zeroed: the caller sets it
        (before a save stages the entry, before a ``setattr`` sets times of its own)."""
        if not self.direct and not self.direct_mtime_ns:
            return 0
        with self.lock:
            self._direct_in()
            mtime, self.direct_mtime_ns = self.direct_mtime_ns, 0
            return mtime

    def take_direct_written(self, fh: int) -> int:
        """Bytes the shim wrote through handle ``fh`` not yet counted (its release counts them), zeroed.  Without the
        lock unless ``fh`` is registered still (only a take-in of the registered handle adds to its count)."""
        if self.direct != fh:
            return self.direct_written.pop(fh, 0)
        with self.lock:
            self._direct_in()
            return self.direct_written.pop(fh, 0)

    def direct_peek(self) -> tuple[int, int]:
        """``(size, mtime_ns)`` with the shim's writes, without the lock (a ``getattr`` on the loop must not wait for
        a save that holds it): the size, and the wall time of the shim's last write not yet on the entry (0: none)."""
        size, mtime, fh = self.size, self.direct_mtime_ns, self.direct
        got = kflags.direct_write_state(fh) if fh else None
        if got is not None and got[1]:
            size, mtime = max(size, got[0]), max(mtime, got[3])
        return size, mtime

    def follow_step(self) -> bool:
        """The follower's look at this file: False once it need not look again.  A direct file (stop 57): start writing
        back what the shim's hash thread hashed once that is ``FLUSH_EVERY`` bytes (after the hash: the pages are then
        dropped; stop 58).  Else :meth:`follow`."""
        if not self.direct:
            return self.follow()
        with self.lock:
            if not self.direct or self.fd < 0:
                return False
            hashed = self._direct_in()
            if (self.in_place and hashed - self._backed_to >= FLUSH_EVERY
                    and (self._flush is None or self._flush.done())):
                self._backed_to = hashed
                self._flush = _flusher().submit(_write_back, self.fd, hashed)
            return True

    def _catch_up(self) -> None:
        # A held file is the journal's data file: no descriptor writes it any more (a save while one might
        # journals a copy), and the pipeline's link of it into the store changes its ctime, not its bytes.
        if not self.kernel_written or self.fd < 0 or self.held:
            return
        st = os.fstat(self.fd)
        seen = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if seen != self._seen:
            if self.frozen and self._seen is not None:
                log.error("spool file %s changed after it became a stored object (a write through a descriptor the "
                          "save did not find)", self.path)
            self._seen = seen
            self.size = st.st_size
            self.version += 1

    def _seen_now(self) -> None:
        """Note the temp file as it is now as caught up (after the mount itself changed it: a link, a write)."""
        if self.kernel_written and self.fd >= 0:
            st = os.fstat(self.fd)
            self._seen = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    @property
    def in_memory(self) -> bool:
        """True while the content is held in memory (no temp file): save it with :meth:`snapshot`."""
        return self._mem is not None

    def _spill(self) -> None:
        """Move the content held in memory into a new temp file (under ``lock``, or before the file is shared)."""
        mem = self._mem
        if mem is None:
            return
        fd, path = new_temp(self._spool_dir)
        try:
            _pwrite_all(fd, mem, 0)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        self.fd, self.path, self._mem = fd, path, None

    def snapshot(self, *, hold: bool) -> tuple[int, bytes, tuple[int, str, str]]:
        """``(version, content, (size, sha256 hex, md5 hex))`` of content held in memory, for a save.

        ``hold``: the content now belongs to the write-back journal (``held``, ``pending``): the next
        write goes to a new copy, as for a held temp file.
        """
        with self.lock:
            mem = self._mem
            if mem is None:
                raise ValueError("the content is in a temp file, not in memory")
            data = bytes(mem)
            digests = self.digests()
            if digests is None:
                digests = (len(data), hashlib.sha256(data).hexdigest(), hashlib.md5(data, usedforsecurity=False).hexdigest())
            if hold:
                self.held = self.pending = True
                self._mem = data  # held content never changes again: one copy, the journal's
            return self.version, data, digests

    def read_small(self) -> tuple[int, bytes, tuple[int, str, str]] | None:
        """``(version, content, digests)`` of a kernel-written file of at most ``MEMORY_MAX`` bytes, read whole for a
        save from memory as :meth:`snapshot` gives a file held in memory (no link, no fsync of its own); None if it
        is larger (or not kernel-written).  A write the kernel makes after the read is a change still to save."""
        with self.lock:
            if not self.kernel_written or self.fd < 0:
                return None
            self._catch_up()
            if self.size > MEMORY_MAX:
                return None
            data = os.pread(self.fd, MEMORY_MAX + 1, 0)
            if len(data) > MEMORY_MAX:  # grown since the catch-up: the next one sees it
                return None
            return self.version, data, (len(data), hashlib.sha256(data).hexdigest(),
                                        hashlib.md5(data, usedforsecurity=False).hexdigest())

    def reopen(self) -> BinaryIO:
        """A new reader of the content as it is now (a held file's, to copy it)."""
        mem = self._mem
        if mem is not None:
            return io.BytesIO(bytes(mem))
        return open(self.path, "rb")

    def pwrite(self, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset``; raises ``Held`` if the file went to the journal meanwhile."""
        if not data:
            return 0  # a write of nothing changes nothing, not even the size (POSIX)
        with self.lock:
            if self.held:
                raise Held(self.path)
            self._direct_in(final=True)
            if self.frozen:
                self._thaw()
            mem = self._mem
            if mem is not None and offset + len(data) <= MEMORY_MAX:
                assert isinstance(mem, bytearray)  # bytes are held content, which ``Held`` above keeps unwritten
                if offset > len(mem):
                    mem.extend(bytes(offset - len(mem)))
                mem[offset : offset + len(data)] = data
            else:
                if mem is not None:
                    self._spill()
                try:
                    _pwrite_all(self.fd, data, offset)
                except BaseException:
                    self._forget_digests()
                    raise
            if self._digests is not None and offset == self._digests.fed and offset >= self.size:
                self._digests.feed(data)
            else:  # an overwrite, or a hole: the running digests (and a streamed upload) no longer apply
                self._forget_digests()
            self.size = max(self.size, offset + len(data))
            self.version += 1
            if self._may_stream and self._streaming is not None and self.size >= PART_SIZE:
                self.stream, self._may_stream = self._streaming(), False
            if self.stream is not None:
                self.stream.offer(self.fd, self.size)
            if self.in_place and self._mem is None:
                self._unflushed += len(data)
                if self._unflushed >= FLUSH_EVERY and (self._flush is None or self._flush.done()):
                    # Write back what we have while the rest arrives; the fsync at close then has little left.
                    self._unflushed = 0
                    self._flush = _flusher().submit(_write_back, self.fd, self.size)
            return len(data)

    def _thaw(self) -> None:
        """Copy a frozen file (an object now) into a new temp file and write there from now on; under ``lock``."""
        fd, path = new_temp(self._spool_dir)
        try:
            _copy_all(self.fd, fd)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        self._wait_flush()
        self._retired.append(self.fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # the object keeps its own name
        self.fd, self.path, self.frozen = fd, path, False
        self._seen_now()

    def stored(self) -> int:
        """Bytes the temp file has allocated (holes take none); its size once discarded.

        An ``fstat`` of a local file: no I/O, cheap enough for every ``getattr``.
        """
        if self._mem is not None:
            return self.size
        try:
            return os.fstat(self.fd).st_blocks * 512 if self.fd >= 0 else self.size
        except OSError:  # closed by a concurrent discard
            return self.size

    def pread(self, offset: int, size: int) -> bytes:
        mem = self._mem
        if mem is not None:
            return bytes(mem[offset : offset + size])
        return os.pread(self.fd, size, offset)

    def truncate(self, size: int) -> None:
        """Cut or extend the content to ``size``; raises ``Held`` if the file went to the journal meanwhile."""
        with self.lock:
            if self.held:
                raise Held(self.path)
            self._direct_in(final=True)
            if self.frozen:
                if size == 0:  # nothing to keep: start a new file rather than copy one
                    self._retire_frozen()
                else:
                    self._thaw()
            mem = self._mem
            if mem is not None and size <= MEMORY_MAX:
                assert isinstance(mem, bytearray)  # as in pwrite
                if size < len(mem):
                    del mem[size:]
                else:
                    mem.extend(bytes(size - len(mem)))
            else:
                self._spill()
                os.ftruncate(self.fd, size)
            if size == 0:
                self._forget_digests()
                self._digests = _Digests()
                self._may_stream = self._streaming is not None
            elif self._digests is None or size != self._digests.fed:
                self._forget_digests()
            self.size = size
            self.version += 1

    def _retire_frozen(self) -> None:
        fd, path = new_temp(self._spool_dir)
        self._wait_flush()
        self._retired.append(self.fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.fd, self.path, self.frozen = fd, path, False

    def store(self, put: Callable[[str, tuple[int, str, str] | None, bool, Finish | None], T],
              may_write: Callable[[], bool] | None = None, *, hash_later_from: int | None = None,
              unless_held: bool = False) -> tuple[int, T]:
        """Run ``put(path, digests, link, finish)`` while no write can change the file; returns the version
        stored and the result.

        ``digests`` is what :meth:`digests` knows (None: ``put`` must hash the
        file).  Writes to this file wait until ``put`` returns, so the bytes
        uploaded are the bytes hashed, without a copy.  ``link`` is
        ``in_place``: ``put`` may make the file itself the object; if it did
        (the file has a second name now), the file is frozen.  ``finish``
        ends the file's streamed upload (None: there is none); when it returns
        None, ``put`` uploads the file whole.

        A kernel-written file (passthrough) is hashed here; while a passthrough open is left, ``may_write()``
        says whether a descriptor may still write it (None: assume so): then a private copy is stored instead
        of the file, and a write the kernel makes meanwhile shows as a change at the next catch-up.
        ``hash_later_from`` (write-back, stop 55): a kernel-written file of at least that many bytes that no
        descriptor may still write is handed to ``put`` as it is, neither hashed nor synced (``digests`` None:
        the journal's pipeline hashes it after the close); a private copy is always hashed.
        ``unless_held`` (write-back): raise ``Held`` if the journal holds the file already (another close saved
        this content while this one waited for the lock: its data file may be staged and gone, its descriptor
        closed).
        """
        with self.lock:
            if unless_held and self.held:
                raise Held(self.path)
            if self.direct and self.in_place:
                # The disk starts on what the follower has not written back while the hash's tail is taken (stop 58).
                _start_write_back(self.fd, self._backed_to, 0)
            self._direct_in(final=True)  # the shim's writes stop here: what is stored is hashed whole
            self._spill()  # what ``put`` stores is a file
            self._wait_flush()
            if self.kernel_written:
                return self._store_kernel_written(put, may_write, hash_later_from)
            digests = self.digests()
            stream, self.stream, self._may_stream = self.stream, None, False
            finish: Finish | None = None
            if stream is not None and digests is not None:
                size, sha, md5 = digests
                fd = self.fd
                finish = lambda: stream.finish(fd, size, sha, md5)  # noqa: E731 - called inside put, under the lock
            elif stream is not None:
                stream.abort()
            try:
                result = put(self.path, digests, self.in_place, finish)
            finally:
                if stream is not None:
                    stream.abort()  # no-op once finished
                if self.in_place:  # also after a failure: a link made before it is an object all the same
                    self.frozen = os.fstat(self.fd).st_nlink > 1
            return self.version, result

    def _store_kernel_written(self, put: Callable[[str, tuple[int, str, str] | None, bool, Finish | None], T],
                              may_write: Callable[[], bool] | None, hash_later_from: int | None = None) -> tuple[int, T]:
        """``store`` of a file the kernel wrote (under ``lock``): see there."""
        self._catch_up()
        version = self.version
        if self.passing and (may_write is None or may_write()):
            seen = self._seen
            fd, path = new_temp(self._spool_dir, prefix="p-")
            try:
                _copy_all(self.fd, fd)
                digests = hash_fd(fd)
                result = put(path, digests, self.in_place, None)  # nobody else has this copy: it may be linked
            finally:
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            self._seen = seen  # a write made during the copy is a change still to save
            return version, result
        if hash_later_from is not None and self.size >= hash_later_from:
            return version, put(self.path, None, self.in_place, None)  # the journal's: hashed after the close
        # The fsync the store makes of the file (in place) runs beside the hash: the disk and a core at once.
        syncing = _flusher().submit(os.fsync, self.fd) if self.in_place else None
        try:
            digests = hash_fd(self.fd)
        finally:
            if syncing is not None:
                with contextlib.suppress(OSError):  # the store's own fsync reports a failure
                    syncing.result()
        try:
            result = put(self.path, digests, self.in_place, None)
        finally:
            if self.in_place:
                self.frozen = os.fstat(self.fd).st_nlink > 1
            self._seen_now()  # the link changed the ctime, not the bytes
        return version, result

    def begin_save(self) -> int:
        """The version about to be saved; call before reading the file for upload."""
        with self.lock:
            self._direct_in()
            return self.version

    def end_save(self, version: int) -> None:
        with self.lock:
            self.saved_version = max(self.saved_version, version)

    def fsync(self) -> None:
        if self._mem is None:
            os.fsync(self.fd)

    def _wait_flush(self) -> None:
        if self._flush is not None:
            with contextlib.suppress(OSError):
                self._flush.result()
            self._flush = None

    def _close_all(self) -> None:
        if self.direct:  # before the descriptor closes: the shim must never write a number reused meanwhile
            kflags.direct_write_unregister(self.direct)
            self.direct = 0
        self._wait_flush()
        self._forget_digests()  # and any streamed upload, whose senders read the file
        for fd in (self.fd, *self._retired):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd, self._retired = -1, []
        self._mem = None

    def discard(self) -> None:
        """Close and delete the temp file (idempotent); an object it became keeps its own name.

        A held file is only closed: the journal deletes it.
        """
        with self.lock:
            self._close_all()
            if self.held or not self.path:
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def keep_as(self, path: str) -> None:
        """Move the temp file to ``path`` (content that could not be saved) and close it."""
        with self.lock:
            mem = self._mem
            self._close_all()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if mem is not None:
                with open(path, "wb") as f:
                    f.write(mem)
            elif self.frozen:  # its bytes are an object's: keep a copy, never a second name of the object
                shutil.copyfile(self.path, path)
                os.unlink(self.path)
            else:
                shutil.move(self.path, path)


HASH_READ: Final = 1 << 20


def _hash_range(h: kflags.Sha256, fd: int, size: int, offset: int = 0) -> int:
    """Hash bytes ``offset``..``size`` of ``fd`` into ``h``: the offset reached (short of ``size`` at the file's end)."""
    while offset < size:
        chunk = os.pread(fd, min(HASH_READ, size - offset), offset)
        if not chunk:
            break
        h.update(chunk)  # hashlib lets other threads run while it hashes a large buffer
        offset += len(chunk)
    return offset


HASH_WINDOW: Final = 4 << 20


def _hash_mapped(h: kflags.Sha256, fd: int, size: int, offset: int) -> int:
    """:func:`_hash_range` through ``mmap`` windows of the file: the pages hashed in place, not copied out first.  For a
    file written just before (the shim's appends, stop 57) that is ~0.09 s less CPU per GiB here (0.73-0.75 against
    0.82-0.84 s with ``pread``, three rounds each).  Only for bytes no one cuts meanwhile (a truncation below a mapped
    page would be SIGBUS): the caller holds the file's lock, which every truncation takes."""
    size = min(size, os.fstat(fd).st_size)
    while offset < size:
        base = offset - offset % mmap.ALLOCATIONGRANULARITY
        length = min(HASH_WINDOW, size - base)
        with mmap.mmap(fd, length, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=base) as mapped:
            with memoryview(mapped) as view:
                h.update(view[offset - base :])  # hashlib lets other threads run while it hashes a large buffer
        offset = base + length
    return offset


def hash_fd(fd: int) -> tuple[int, str, str]:
    """``(size, sha256 hex, ETag)`` of the file ``fd`` as it is (a kernel-written temp file, stop 54): the ETag is the
    MD5 up to ``MD5_MAX`` bytes, computed on a thread of its own beside the SHA-256, and past it the ETag of an
    upload in parts (:func:`~lakemount.catalog.streaming.parts_etag`), as for a file the mount saw written."""
    size = os.fstat(fd).st_size
    sha = hashlib.sha256()
    if size > MD5_MAX:
        _hash_range(sha, fd, size)
        hexsha = sha.hexdigest()
        return size, hexsha, parts_etag(hexsha, size)
    md5 = hashlib.md5(usedforsecurity=False)
    if size <= HASH_THREAD_AFTER:
        data = os.pread(fd, size, 0)
        sha.update(data)
        md5.update(data)
        return len(data), sha.hexdigest(), md5.hexdigest()
    other = threading.Thread(target=_hash_range, args=(md5, fd, size), name="lm-hash-md5")
    other.start()
    try:
        _hash_range(sha, fd, size)
    finally:
        other.join()
    return size, sha.hexdigest(), md5.hexdigest()


def _pwrite_all(fd: int, data: bytes | bytearray, offset: int) -> None:
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        pos += os.pwrite(fd, view[pos:], offset + pos)


def _write_back(fd: int, upto: int) -> None:
    """Write the file back, then let the kernel drop its pages of the first ``upto`` bytes (stop 51).

    The pages are clean once written back, so dropping them loses nothing (a page written again meanwhile
    is dirty and stays; a later read comes from the disk).  What it saves: a large file written through
    the mount is an object of the store once saved, and its pages would stay cached, so every next MiB
    written lands on pages the kernel has to take fresh from free memory; dropped, they are taken again
    (on this machine's VM a fresh page costs several times a reused one: docs/SCALE.md, stop 51).

    The bytes are written back with ``sync_file_range`` (stop 58), not ``fdatasync``: the pages are as clean
    either way, but ``fdatasync`` of a file that grew also commits ext4's journal and flushes the disk's cache,
    64 times a GiB, where the save's own ``fsync`` does it once (what makes the file durable is that ``fsync``,
    before and after).
    """
    with contextlib.suppress(OSError):  # a discard may close it meanwhile; the fsync at save reports real errors
        if _libc_sync_file_range()(fd, 0, upto, SYNC_FILE_RANGE_WAIT) == 0:
            os.posix_fadvise(fd, 0, upto, os.POSIX_FADV_DONTNEED)


def _copy_all(src: int, dst: int) -> None:
    """Copy the whole file ``src`` into ``dst`` in the kernel (copy_file_range shares extents where it can)."""
    size = os.fstat(src).st_size
    offset = 0
    while offset < size:
        n = os.copy_file_range(src, dst, size - offset, offset, offset)
        if n == 0:
            break
        offset += n
