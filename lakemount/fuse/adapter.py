"""The pyfuse3 adapter: kernel requests in, calls on the filesystem core out.

Thin on purpose.  Each handler converts pyfuse3 types to the core's plain
values and back; everything else is the core's.  Handlers first try the core
operation without blocking (answered from memory: cached attributes, RAM-cached
blocks; or from this node's disk: a small file's temp file, a write-back
journal), and only if it needs I/O run it again in a worker thread, under one
``CapacityLimiter`` so a burst of requests cannot spawn unbounded threads.

No exception other than ``pyfuse3.FUSEError`` may leave a handler: pyfuse3
stops the whole mount on any other.  :meth:`FuseOperations._call` maps every
exception through :func:`lakemount.fuse.errno.errno_of`; one it does not know
becomes EIO and a log line with its traceback.

Handle numbers given to the kernel may carry two request bits for the
open-reply shim (``kflags``): ``FH_NOFLUSH`` on read-only file handles (close(2)
then costs no FLUSH round trip) and ``FH_CACHE_DIR`` on directories of
immutable refs (the kernel keeps their entries).  Every handler masks them off
with ``FH_MASK`` before the core sees a handle.  A FLUSH comes with the thread
that closed the descriptor, as the shim noted it (``kflags.closer``), so the
core can tell a forked child's close of an inherited descriptor from its
opener's.

A mount shared with other local users (``allow_other``) is given a
:class:`~lakemount.fuse.access.MountAccess`: each handler that carries the
request's context first asks it whether the caller's uid may read (or
change) the repository the request is about; read and write calls on an
open handle were judged when it was opened.

The shim (``kflags``) calls the ``fast_*`` methods on the loop before pyfuse3's handlers; a close whose save
needs a thread is then handed to :meth:`FuseOperations.hand_flush`, whose thread answers the kernel itself.

Two background tasks run beside the request loop: one re-checks branch heads
every ``head_ttl``, one issues the kernel cache invalidations the core queues
(never from inside a request handler, where they could deadlock).  A write to a
control file (a reset, a merge, a revert) answers once the invalidations it
queued are issued, so the writer's next ``stat`` or ``ls`` sees the branch as
the verb left it, not what the kernel kept of it (a file the reset dropped).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import pyfuse3
import trio

from lakemount.fuse import kflags, passthrough
from lakemount.fuse.access import MountAccess
from lakemount.fuse.core import FileSystem, NeedsThread
from lakemount.fuse.errno import Absent, errno_of
from lakemount.fuse.kflags import FH_CACHE_DIR, FH_MASK, FH_NOFLUSH
from lakemount.fuse.values import Attr, Caller, Opened, SetAttr

log = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_THREADS: Final = 16
READDIR_BATCH: Final = 16
KERNEL_SETTLE_S: Final = 5.0  # the longest a control file's write waits for its kernel invalidations


def _entry_attributes(a: Attr) -> pyfuse3.EntryAttributes:
    e = pyfuse3.EntryAttributes()
    e.st_ino = pyfuse3.InodeT(a.ino)
    e.generation = 0
    e.entry_timeout = a.timeout
    e.attr_timeout = a.timeout
    e.st_mode = pyfuse3.ModeT(a.mode)
    e.st_nlink = a.nlink
    e.st_uid = a.uid
    e.st_gid = a.gid
    e.st_rdev = a.rdev
    e.st_size = a.size
    e.st_blksize = a.blksize
    e.st_blocks = a.blocks
    e.st_atime_ns = a.atime_ns
    e.st_mtime_ns = a.mtime_ns
    e.st_ctime_ns = a.ctime_ns
    return e


def _entry_fields(a: Attr) -> tuple[int, float, float, int, int, int, int, int, int, int, int, int, int, int]:
    """An entry as the shim replies it (kflags, the fast path): the fields :func:`_entry_attributes` sets, in
    ``fuse_entry_param``'s order (ino, entry and attribute timeouts, then the stat fields)."""
    return (a.ino, a.timeout, a.timeout, a.mode, a.nlink, a.uid, a.gid, a.rdev, a.size, a.blksize, a.blocks,
            a.atime_ns, a.mtime_ns, a.ctime_ns)


def _negative_timeout(gone: Absent) -> float:
    """How long the kernel may keep ``gone``'s name as absent (a negative entry); ENOENT if not at all."""
    if gone.timeout <= 0:
        raise pyfuse3.FUSEError(errno.ENOENT) from None
    return gone.timeout


def _for_shim(method: Callable[..., T]) -> Callable[..., T | int | None]:
    """A fast-path method the shim calls on the loop thread (kflags.set_fast): its answer, None when the request
    needs a thread (``NeedsThread``, nothing changed) or the async handler's way, ``-errno`` for a FUSEError.  Any
    other exception is a bug: logged, answered EIO; never raised into the C (the mount must keep serving)."""

    @functools.wraps(method)
    def answer(self: FuseOperations, *args: Any) -> T | int | None:
        try:
            return method(self, *args)
        except NeedsThread:
            return None
        except pyfuse3.FUSEError as exc:
            return -exc.errno
        except Exception:
            log.exception("fast %s failed", method.__name__)
            return -errno.EIO

    return answer


def _negative_entry(timeout: float) -> pyfuse3.EntryAttributes:
    """A lookup's answer that the name is absent, which the kernel keeps for ``timeout`` (inode 0: libfuse's
    negative entry; a create or rename of the name through the kernel replaces it)."""
    e = pyfuse3.EntryAttributes()
    e.st_ino = pyfuse3.InodeT(0)
    e.entry_timeout = timeout
    e.attr_timeout = 0
    return e


def _caller(ctx: pyfuse3.RequestContext | None) -> Caller:
    if ctx is None:
        return Caller()
    return Caller(ctx.uid, ctx.gid, ctx.pid)


class FuseOperations(pyfuse3.Operations):
    """pyfuse3 request handlers over a :class:`~lakemount.fuse.core.FileSystem`."""

    supports_dot_lookup = True
    enable_writeback_cache = False  # writes must reach the core in order, as they happen
    enable_acl = False

    def __init__(self, fs: FileSystem, *, threads: int = DEFAULT_THREADS, access: MountAccess | None = None) -> None:
        super().__init__()
        self.fs = fs
        self._nonblocking = fs.nonblocking()  # one context for the mount's life: entered five times a small file
        self.sharing = access  # None: only the mount's own user reaches it (no allow_other)
        self.limiter = trio.CapacityLimiter(threads)
        self._eio_counts: Counter[str] = Counter()
        self._kflags = kflags.active()  # whether the kernel hears FH_NOFLUSH / FH_CACHE_DIR
        self._keeps_attrs = False  # known once mounted (init)
        # The core call a fast_* method just found needing a thread (NeedsThread): the shim hands that request to
        # pyfuse3's handler, which pyfuse3 runs at once, and whose _call then goes straight to a thread.
        self._handed: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
        # Closes whose save needs a thread, handed over by the shim (hand_flush): their threads answer the kernel.
        self._flushes = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lm-flush")

    def init(self) -> None:
        # Called while the kernel's INIT is answered: the shim knows by now whether the reply takes KILLPRIV_V2.
        self.fs.kills_suidgid = kflags.killpriv()
        # Whether a created file's directory attributes go to the shim for the kernel's next GETATTR of it (the
        # shim's io hooks are installed by the mount; the shim answers that GETATTR only to the creator's uid).
        self._keeps_attrs = kflags.keeps_attrs()
        # LOOKUP, CREATE, WRITE, FLUSH and RELEASE answered by the fast_* methods below, in C, when they can.
        kflags.set_fast(self)  # undone by the runner once the session ends
        # Write-only opens the kernel writes itself (fuse/passthrough.py), if the INIT reply asked for it.
        options = self.fs.options
        self.fs.state.passthrough = (passthrough.wanted(options.passthrough)
                                     and passthrough.granted(options.passthrough))

    # ------------------------------------------------------------------ plumbing
    async def _call(self, fn: Callable[..., T], *args: Any, fast: bool = False, absent: bool = False) -> T:
        """Run a core operation (in memory if ``fast`` and possible, else in a worker thread); ``absent``:
        an ``Absent`` is raised as it is (a lookup's negative entry), else answered as ENOENT."""
        if fast:
            handed, self._handed = self._handed, None
            if handed is None or handed != (fn, args):  # else the fast path tried it just now: not twice (stop 53)
                try:
                    return self._now(fn, *args, absent=absent)
                except NeedsThread:
                    pass
        kflags.threads_out(1)  # the shim's drain waits for requests only while no thread answers one (stop 57)
        try:
            return await trio.to_thread.run_sync(functools.partial(fn, *args), limiter=self.limiter)
        except Exception as exc:  # not trio.Cancelled (a BaseException): it goes on as it is
            raise self._fuse_error(fn, exc, absent) from None
        finally:
            kflags.threads_out(-1)

    def _now(self, fn: Callable[..., T], *args: Any, absent: bool = False) -> T:
        """``fn(*args)`` on the loop, without blocking: ``NeedsThread`` (nothing changed) if it needs I/O; any other
        error as :meth:`_call` raises it."""
        try:
            with self._nonblocking:
                return fn(*args)
        except NeedsThread:
            raise
        except Exception as exc:
            raise self._fuse_error(fn, exc, absent) from None

    def _now_or_hand(self, fn: Callable[..., T], *args: Any, absent: bool = False) -> T:
        """:meth:`_now` for a fast method: on ``NeedsThread`` the call is noted, so the async handler the shim hands
        the request to runs it in a thread without trying it on the loop a second time."""
        try:
            return self._now(fn, *args, absent=absent)
        except NeedsThread:
            self._handed = (fn, args)
            raise

    def _fuse_error(self, fn: Callable[..., Any], exc: Exception, absent: bool) -> Exception:
        """What a handler raises for ``exc``: a FUSEError as it is, an ``Absent`` as it is if ``absent`` (a lookup's
        negative entry) else ENOENT, any other mapped to its errno (EIO and a log line if unknown)."""
        if isinstance(exc, pyfuse3.FUSEError) or (absent and isinstance(exc, Absent)):
            return exc
        if isinstance(exc, Absent):
            return pyfuse3.FUSEError(errno.ENOENT)
        return pyfuse3.FUSEError(self._errno(fn, exc))

    async def _allow(self, ctx: pyfuse3.RequestContext | None, ino: int, name: bytes | None = None, *,
                     write: bool = False) -> None:
        """EACCES unless the caller may read (``write``: change) what ``ino`` (or its child ``name``) belongs to."""
        if ctx is None:
            return
        allowed = self._allowed_now(ctx.uid, ino, name, write)
        if allowed is None:  # not decided within the TTL: the auth store is asked, off the request loop
            assert self.sharing is not None
            repo = self._guard(self.fs.repository_of, ino, name)
            allowed = await self._call(self.sharing.decide, ctx.uid, repo, write)
        if not allowed:
            raise pyfuse3.FUSEError(errno.EACCES)

    def _allowed_now(self, uid: int, ino: int, name: bytes | None, write: bool) -> bool | None:
        """Whether ``uid`` may read (``write``: change) what ``ino`` (or its child ``name``) belongs to, as decided
        now; None if the decision is not cached (only :meth:`_allow` may ask the auth store)."""
        access = self.sharing
        if access is None or access.is_owner(uid):
            return True
        return access.cached(uid, self._guard(self.fs.repository_of, ino, name), write)

    def _allow_now(self, uid: int, ino: int, name: bytes | None = None, *, write: bool = False) -> None:
        """:meth:`_allow` for the fast path: ``NeedsThread`` when the decision is not cached (the async handler,
        which may ask the auth store, takes the request), EACCES if refused."""
        allowed = self._allowed_now(uid, ino, name, write)
        if allowed is None:
            raise NeedsThread("access not decided within its TTL")
        if not allowed:
            raise pyfuse3.FUSEError(errno.EACCES)

    def _errno(self, fn: Callable[..., Any], exc: BaseException) -> int:
        code = errno_of(exc)
        name = getattr(fn, "__name__", str(fn))
        if code is None:
            log.error("unexpected error in %s: %r", name, exc, exc_info=exc)
            return errno.EIO
        if code == errno.EIO:
            # A store that is down fails every request: log the 1st, 2nd, 4th, 8th... failure of each kind.
            self._eio_counts[name] += 1
            n = self._eio_counts[name]
            if n & (n - 1) == 0:
                log.warning("%s failed (%d so far): %s", name, n, exc)
        return code

    def _guard(self, fn: Callable[..., T], *args: Any) -> T:
        """For handlers that answer from memory: the same errno mapping, in the trio thread."""
        try:
            return fn(*args)
        except pyfuse3.FUSEError:
            raise
        except Exception as exc:
            raise pyfuse3.FUSEError(self._errno(fn, exc)) from None

    def _file_info(self, opened: Opened) -> pyfuse3.FileInfo:
        return pyfuse3.FileInfo(fh=pyfuse3.FileHandleT(self._kernel_fh(opened)), keep_cache=opened.keep_cache,
                                direct_io=opened.direct_io)

    def _kernel_fh(self, opened: Opened) -> int:
        """The handle number the kernel is given for ``opened`` (with the shim's request bits)."""
        fh = opened.fh
        if opened.noflush and self._kflags:
            fh |= FH_NOFLUSH  # close(2) of a read-only handle: no FLUSH round trip
            self.fs.metrics.add("kernel_noflush_opens")
        if opened.backing and not kflags.pass_through(fh, opened.backing):
            # The reply goes out without passthrough: the writes come here, into the same temp file, as any open's.
            self.fs.metrics.add("passthrough_unsent")
        return fh

    # ------------------------------------------------------------------ lookups and attributes
    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        await self._allow(ctx, parent_inode, name)
        try:
            return _entry_attributes(await self._call(self.fs.lookup, parent_inode, name, fast=True, absent=True))
        except Absent as gone:
            return _negative_entry(_negative_timeout(gone))

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        try:
            self.fs.forget(inode_list)
        except Exception:  # forget may not fail: it answers no request
            log.exception("forget failed")

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        await self._allow(ctx, inode)
        return _entry_attributes(await self._call(self.fs.getattr, inode, fast=True))

    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        await self._allow(ctx, inode, write=True)
        changes = SetAttr(
            size=attr.st_size if fields.update_size else None,
            mode=attr.st_mode if fields.update_mode else None,
            uid=attr.st_uid if fields.update_uid else None,
            gid=attr.st_gid if fields.update_gid else None,
            atime_ns=attr.st_atime_ns if fields.update_atime else None,
            mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
        )
        fh = None if fh is None else fh & FH_MASK
        return _entry_attributes(await self._call(self.fs.setattr, inode, changes, fh, _caller(ctx)))

    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        await self._allow(ctx, inode)
        return await self._call(self.fs.readlink, inode, fast=True)

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        await self._allow(ctx, pyfuse3.ROOT_INODE)
        s = await self._call(self.fs.statfs, fast=True)
        out = pyfuse3.StatvfsData()
        out.f_bsize, out.f_frsize = s.bsize, s.frsize
        out.f_blocks, out.f_bfree, out.f_bavail = s.blocks, s.bfree, s.bavail
        out.f_files, out.f_ffree, out.f_favail = s.files, s.ffree, s.favail
        out.f_namemax = s.namemax
        return out

    # ------------------------------------------------------------------ namespace
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        await self._allow(ctx, parent_inode, write=True)
        return _entry_attributes(await self._call(self.fs.mknod, parent_inode, name, mode, rdev, _caller(ctx)))

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        await self._allow(ctx, parent_inode, write=True)
        return _entry_attributes(await self._call(self.fs.mkdir, parent_inode, name, mode, _caller(ctx)))

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self._allow(ctx, parent_inode, write=True)
        await self._call(self.fs.unlink, parent_inode, name)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self._allow(ctx, parent_inode, write=True)
        await self._call(self.fs.rmdir, parent_inode, name)

    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        await self._allow(ctx, parent_inode, write=True)
        return _entry_attributes(await self._call(self.fs.symlink, parent_inode, name, target, _caller(ctx)))

    async def rename(
        self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes, flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        await self._allow(ctx, parent_inode_old, write=True)
        await self._allow(ctx, parent_inode_new, write=True)
        await self._call(self.fs.rename, parent_inode_old, name_old, parent_inode_new, name_new, flags)

    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        await self._allow(ctx, new_parent_inode, write=True)
        return _entry_attributes(await self._call(self.fs.link, inode, new_parent_inode, new_name, fast=True))

    # ------------------------------------------------------------------ files
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        await self._allow(ctx, inode, write=bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND)))
        return self._file_info(await self._call(self.fs.open, inode, flags, _caller(ctx), fast=True))

    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: pyfuse3.RequestContext
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        await self._allow(ctx, parent_inode, write=True)
        seq = kflags.drops()
        opened, attr = await self._call(self.fs.create, parent_inode, name, mode, flags, _caller(ctx), fast=True)
        self._created(seq, ctx.uid if ctx is not None else None, parent_inode)
        return self._file_info(opened), _entry_attributes(attr)

    def _created(self, seq: int, uid: int | None, parent_inode: int) -> None:
        """After a create in ``parent_inode`` by ``uid`` (None: unknown, the mount's): its attributes to the shim."""
        if self._keeps_attrs and (self.sharing is None or uid is None or self.sharing.is_owner(uid)):
            # On a shared mount only for the mount's own users: a GETATTR of anyone else asks the access policy.
            self._keep_dir_attr(seq, uid if uid is not None else os.getuid(), parent_inode)

    def _keep_dir_attr(self, seq: int, uid: int, ino: int) -> None:
        """Hand the shim directory ``ino``'s attributes as a GETATTR would answer them now, for the GETATTR the
        kernel sends (from ``uid``, the creator) before its next permission check there (it dropped them at the
        create); nothing if that would need I/O or fail, or if a request that may change a directory was read, or
        an invalidation dropped what the shim kept, since ``seq``."""
        try:
            with self._nonblocking:
                a = self.fs.attributes(ino)
        except Exception:  # NeedsThread, or gone: the kernel's GETATTR asks the core as before
            return
        kflags.keep_attr(seq, uid, a.ino, a.mode, a.nlink, a.uid, a.gid, a.rdev, a.size, a.blksize, a.blocks,
                         a.atime_ns, a.mtime_ns, a.ctime_ns, a.timeout)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return await self._call(self.fs.read, fh & FH_MASK, off, size, fast=True)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        n = await self._call(self.fs.write, fh & FH_MASK, off, buf, fast=True)
        if self._settles(fh):
            kflags.drop_attrs()  # a reset, merge or revert: no directory is as it was
            await self.kernel_settled()
        return n

    def _settles(self, fh: int) -> bool:
        """Whether a write to ``fh`` answers only once the kernel invalidations it queued are issued (a control
        file: a reset, merge or revert), which the fast path cannot wait for."""
        return self.fs.is_control(fh & FH_MASK)

    async def flush(self, fh: int) -> None:
        # Taken before any await: the shim noted the closing thread on this loop, per pending FLUSH.
        await self._call(self.fs.flush, fh & FH_MASK, kflags.closer(fh), fast=True)

    async def fsync(self, fh: int, datasync: bool) -> None:
        await self._call(self.fs.fsync, fh & FH_MASK, datasync)

    async def release(self, fh: int) -> None:
        await self._call(self.fs.release, fh & FH_MASK, fast=True)

    # ------------------------------------------------------------------ the fast path (kflags.set_fast)
    # Called by the shim on the loop thread for the requests these handlers would answer without awaiting
    # anything; each does what its async handler does (the same helpers), or gives the request back (None).
    @_for_shim
    def fast_lookup(self, parent_inode: int, name: bytes, uid: int, gid: int, pid: int) -> tuple[Any, ...]:
        self._allow_now(uid, parent_inode, name)
        try:
            return _entry_fields(self._now_or_hand(self.fs.lookup, parent_inode, name, absent=True))
        except Absent as gone:
            return (0, _negative_timeout(gone), 0.0) + (0,) * 11  # inode 0: libfuse's negative entry

    @_for_shim
    def fast_create(self, parent_inode: int, name: bytes, mode: int, flags: int, uid: int, gid: int,
                    pid: int) -> tuple[Any, ...]:
        self._allow_now(uid, parent_inode, write=True)
        seq = kflags.drops()
        opened, attr = self._now(self.fs.create, parent_inode, name, mode, flags, Caller(uid, gid, pid))
        self._created(seq, uid, parent_inode)
        return (*_entry_fields(attr), self._kernel_fh(opened), opened.direct_io, opened.keep_cache)

    @_for_shim
    def fast_write(self, fh: int, off: int, buf: bytes) -> int | None:
        if self._settles(fh):
            return None
        return self._now_or_hand(self.fs.write, fh & FH_MASK, off, buf)

    @_for_shim
    def fast_flush(self, fh: int, closer: int) -> int:
        self._now_or_hand(self.fs.flush, fh & FH_MASK, closer)
        return 0

    @_for_shim
    def fast_release(self, fh: int) -> int:
        self._now_or_hand(self.fs.release, fh & FH_MASK)
        return 0

    def hand_flush(self, request: object, fh: int, closer: int) -> bool:
        """A FLUSH that :meth:`fast_flush` gave back (its save needs a thread), from the shim: run in a thread of the
        adapter's, which answers the kernel itself (``kflags.reply``), so pyfuse3's loop neither awaits it nor is
        woken to answer it (stop 53: trio's thread hop was ~110 us of CPU a close).  What the close does and
        answers is :meth:`flush`'s; True: taken (the shim answers nothing)."""
        self._handed = None  # fast_flush noted it for pyfuse3's handler, which does not run
        self._flushes.submit(self._flush_and_answer, request, fh, closer)
        return True

    def _flush_and_answer(self, request: object, fh: int, closer: int) -> None:
        code = 0
        try:
            self.fs.flush(fh & FH_MASK, closer)
        except Exception as exc:
            error = self._fuse_error(self.fs.flush, exc, False)
            code = error.errno if isinstance(error, pyfuse3.FUSEError) else errno.EIO
        try:
            kflags.reply(request, code)
        except Exception:  # the shim answers EIO for a request dropped unanswered
            log.exception("answering a close failed")

    def join_flushes(self) -> None:
        """Wait for every close handed to a thread to be answered (the session ends after; none is handed after)."""
        self._flushes.shutdown(wait=True)

    # ------------------------------------------------------------------ directories
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        await self._allow(ctx, inode)
        fh = await self._call(self.fs.opendir, inode, _caller(ctx), fast=True)
        # An immutable directory's entries may stay in the kernel's cache (cache_readdir).
        if self._kflags and self._guard(self.fs.dir_cacheable, fh):
            self.fs.metrics.add("kernel_cached_dir_opens")
            return fh | FH_CACHE_DIR
        return fh

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        # Listings are built by opendir; paging through them never does I/O.
        fh &= FH_MASK
        pos = start_id
        while True:
            # Small batches: a reply holds ~25 entries (one page), and every entry
            # built beyond what fits is work thrown away (and a reference given back).
            items = self._guard(self.fs.readdir, fh, pos, READDIR_BATCH)
            if not items:
                return
            for i, item in enumerate(items):
                if not pyfuse3.readdir_reply(token, item.name, _entry_attributes(item.attr), item.next_id):
                    # The kernel's buffer is full: give back the references it did not take.
                    self._guard(self.fs.forget, [(it.attr.ino, 1) for it in items[i:] if it.counted])
                    return
                pos = item.next_id

    async def releasedir(self, fh: int) -> None:
        await self._call(self.fs.releasedir, fh & FH_MASK, fast=True)

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        return None  # namespace changes are staged (durably) when they happen

    # ------------------------------------------------------------------ extended attributes
    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        if not name.startswith(b"user."):
            # security.capability is asked before a write (with the shim: once per file, answered in C, kflags.py):
            # answer without a thread hop.
            # ENOTSUP, not ENOATTR: tools such as ls(1) then stop asking for
            # security.selinux on this file system instead of asking per file.
            raise pyfuse3.FUSEError(errno.EOPNOTSUPP)
        await self._allow(ctx, inode)
        return await self._call(self.fs.getxattr, inode, name, fast=True)

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[bytes]:
        await self._allow(ctx, inode)
        return await self._call(self.fs.listxattr, inode, fast=True)

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self._allow(ctx, inode, write=True)
        await self._call(self.fs.setxattr, inode, name, value)

    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self._allow(ctx, inode, write=True)
        await self._call(self.fs.removexattr, inode, name)

    # ------------------------------------------------------------------ background tasks
    async def poll_heads(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Re-check branch heads every ``head_ttl`` until cancelled.

        At a fixed rate, not ``head_ttl`` after the previous poll ended: a poll
        then comes before the branch's lazy re-check on the next request (due
        ``head_ttl`` after the last check), which would cost a query of its own.
        """
        task_status.started()
        interval = max(0.05, self.fs.options.head_ttl)
        due = trio.current_time() + interval
        while True:
            await trio.sleep_until(due)
            try:
                await trio.to_thread.run_sync(self.fs.poll_heads, limiter=self.limiter)
            except Exception:
                log.exception("head check failed")
            due = max(due + interval, trio.current_time() + interval / 2)

    async def invalidate(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Issue queued kernel cache invalidations until cancelled."""
        task_status.started()
        while True:
            batch = await trio.to_thread.run_sync(_drain, self.fs.invalidations, abandon_on_cancel=True)
            if batch:
                await trio.to_thread.run_sync(_apply_invalidations, batch)


    async def kernel_settled(self) -> None:
        """Wait until the invalidations queued so far are issued to the kernel (by :meth:`invalidate`), at
        most ``KERNEL_SETTLE_S``: past it, log and go on (the entries expire by their timeouts anyway)."""
        done = threading.Event()
        self.fs.invalidations.put(("settled", done))
        kflags.threads_out(1)  # a control file's write waits for the invalidation thread: the drain must not (stop 57)
        try:
            settled = await trio.to_thread.run_sync(done.wait, KERNEL_SETTLE_S, abandon_on_cancel=True)
        finally:
            kflags.threads_out(-1)
        if not settled:
            log.warning("kernel invalidations not issued within %.0f s; the kernel may show what it kept until its entries expire",
                        KERNEL_SETTLE_S)


def _drain(q: queue.SimpleQueue[tuple[Any, ...]], wait: float = 0.5, most: int = 4096) -> list[tuple[Any, ...]]:
    try:
        items = [q.get(timeout=wait)]
    except queue.Empty:
        return []
    while len(items) < most:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            break
    return items


def _apply_invalidations(batch: list[tuple[Any, ...]]) -> None:
    kflags.drop_attrs()  # the shim answers no GETATTR with what the kernel is about to be told to drop
    for item in dict.fromkeys(batch):  # de-duplicated, in order
        if item[0] == "settled":  # everything queued before it is issued: wake the waiter
            item[1].set()
            continue
        try:
            if item[0] == "inode":
                pyfuse3.invalidate_inode(pyfuse3.InodeT(item[1]), attr_only=False)
            elif item[0] == "attrs":
                pyfuse3.invalidate_inode(pyfuse3.InodeT(item[1]), attr_only=True)
            else:
                pyfuse3.invalidate_entry(pyfuse3.InodeT(item[1]), pyfuse3.FileNameT(item[2]))
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOSYS, errno.EBADF, errno.ENOTCONN):
                log.debug("kernel invalidation %r: %s", item, exc)
        except Exception:  # an invalidation is an optimization: never let it stop the task
            log.exception("kernel invalidation %r failed", item)
