"""Open files: open, read, write, flush, fsync and release on file handles.

A read of saved content goes through the block reader (RAM, then disk cache,
then the store, with read-ahead); the data object is resolved at the first
read, not at open, so a file written through another handle is read as saved.
Writes go to the node's temp file (:mod:`~lakemount.fuse.saving`), which every
handle of the inode then reads.  ``keep_cache`` is granted while the content
the kernel's pages came from is unchanged.  A control file is read from a
snapshot taken at open; each write to it runs one command, after which the
scope is re-resolved so the mount shows the new head.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import time
from dataclasses import dataclass
from typing import Final

from lakemount import waiting
from lakemount.audit.context import Actor, acting
from lakemount.audit.record import MOUNT
from lakemount.errors import LakeMountError, WouldWait
from lakemount.fuse import control, passthrough
from lakemount.fuse.auditing import MountAudit
from lakemount.fuse.errno import FsError
from lakemount.fuse.inodes import Kind, Node
from lakemount.fuse.reader import ObjectRef, ReadState
from lakemount.fuse.saving import Saver
from lakemount.fuse.scan import ScanAhead
from lakemount.fuse.scope import Scopes, resolve_scope
from lakemount.fuse.state import MountState, NeedsThread, op, with_changes
from lakemount.fuse.tree import Tree
from lakemount.fuse.values import Caller, Opened
from lakemount.fuse.writes import MD5_MAX, DirtyFile
from lakemount.pids import one_process

log = logging.getLogger(__name__)

WINDOW_WAIT: Final = 10.0  # seconds a write open waits for the release of a passthrough open of the saved file


@dataclass(eq=False)
class FileHandle:
    """An open file: its node, whether it was opened for writing, and its read/write state."""

    fh: int
    node: Node
    writable: bool
    obj: ObjectRef | None = None
    read_state: ReadState = dataclasses.field(default_factory=ReadState)
    content: bytes | None = None  # control files: a snapshot taken at open
    uid: int = 0  # who opened it (a control write's committer)
    pid: int = 0  # the thread that opened it, as the kernel named it (the audit record's process; a foreign close's test)
    read_bytes: int = 0  # counted for the handle's audit record, written at release
    written_bytes: int = 0
    passing: DirtyFile | None = None  # a passthrough open: the temp file the kernel writes (writes.py)


class Handles:
    """The open file handles of one mount."""

    def __init__(
        self,
        state: MountState,
        scopes: Scopes,
        tree: Tree,
        saver: Saver,
        scan: ScanAhead,
        controls: control.ControlFiles,
    ) -> None:
        self.state = state
        self.scopes = scopes
        self.tree = tree
        self.saver = saver
        self.scan = scan
        self.controls = controls
        self.table = state.table
        self.metrics = state.metrics
        self.audit: MountAudit | None = None  # set by the FileSystem when the trail is on
        self._handles: dict[int, FileHandle] = {}
        self.writing = 0  # regular files' writable handles open on the mount (1 at a close: a lone writer)

    def __len__(self) -> int:
        return len(self._handles)

    @op("open")
    def open(self, ino: int, flags: int, caller: Caller | None = None) -> Opened:
        """Open file ``ino``: EISDIR for a directory, ELOOP for a symlink, EROFS to write a read-only ref,
        EIO for an imported object whose source changed since the import."""
        caller = caller or Caller()
        node = self.state.node(ino)
        try:
            return self._open(node, flags, caller)
        except NeedsThread:
            raise
        except Exception as exc:  # a refused or failed open is an audit record too (then the errno, as before)
            if self.audit is not None and node.kind == Kind.FILE:
                self.audit.failed(node, caller.uid, caller.pid, "read" if flags & os.O_ACCMODE == os.O_RDONLY else "write",
                                  exc)
            raise

    def _open(self, node: Node, flags: int, caller: Caller) -> Opened:
        if node.kind == Kind.CONTROL_FILE:
            return self._open_control(node, flags, caller)
        if node.kind == Kind.DIR:
            raise FsError(errno.EISDIR)
        if node.kind != Kind.FILE:
            raise FsError(errno.ELOOP)
        if flags & os.O_ACCMODE != os.O_RDONLY:
            self.scopes.writable(node.scope)
        if not node.detached:
            self.tree.revalidate(node)
        entry = node.entry
        if entry is not None and node.dirty is None and self.state.catalog.is_imported(entry):
            # A zero-copy import: its source must still hold what was imported (EIO if not).
            self.state.io()
            self.state.catalog.check_source(entry)
        opened = self.open_file(node, flags, caller)
        if flags & os.O_ACCMODE == os.O_RDONLY:
            self.scan.opened(node)
        return opened

    def open_file(self, node: Node, flags: int, caller: Caller, *, fresh: bool = False) -> Opened:
        """A new handle on regular file ``node`` (``O_TRUNC`` empties it now); ``fresh``: the node was just made by
        this open's create (empty; no page of it can be in the kernel's cache)."""
        writable = flags & os.O_ACCMODE != os.O_RDONLY
        truncate = writable and bool(flags & os.O_TRUNC)
        scope = node.scope
        assert scope is not None
        if truncate and not self.saver.write_is_local(node, 0, 0):
            self.state.io()
        # A passthrough open makes and registers a temp file: local work, as a temp file's write is (no NeedsThread:
        # a create calls this after making its entry).  Whether it is one is chosen under the lock the handle is
        # registered under (below): the kernel refuses a passthrough open beside an open it answered without.
        pass_through = mine = False
        if self.audit is not None:  # the process's name while it is alive (a short one is gone by release)
            self.audit.process(caller.pid)
        fh = self.state.new_fh()
        # Register the handle first, under the node's lock: the kernel sends
        # RELEASE asynchronously, and a release that found no open handle
        # would drop the temp file this open is about to read or truncate.
        while True:
            with node.lock, self.table.lock:
                # A writable open while a passthrough open's backing file is (or is becoming) saved content waits for
                # its release; checked under the lock a save's choice to take the temp file itself is made under.
                busy = node.dirty if writable and node.dirty is not None and node.dirty.saved_backing() else None
                pending = node.pass_pending > 0
                if busy is None and not pending:
                    # Chosen with the registration, as one step: an open registered between the choice and the
                    # backing id (a writer's open runs on a thread, a reader's on the loop) would be one the kernel
                    # answered without passthrough, and the passthrough open beside it gets EIO from the kernel.
                    pass_through = self._may_pass_through(node, flags, truncate)
                    if pass_through:
                        # Until it holds its backing id, other opens wait for it: also when it shares the backing
                        # file of passthrough opens alive now, which may all be released before it takes its share
                        # (then an open registered meanwhile saw none, went without, and one of the two got EIO).
                        node.pass_pending += 1
                        mine = True
                    node.opens += 1
                    if writable:
                        node.writers += 1
                    entry = node.entry
                    if fresh:  # nothing cached to keep (the identity, a hash of the entry, is not worth making)
                        identity = None
                    elif entry is not None and node.dirty is None:
                        identity = entry.identity()
                    else:
                        identity = node.page_identity
                    keep = scope.stable or (identity is not None and identity == node.page_identity and not truncate)
                    node.page_identity = identity
                    self._handles[fh] = FileHandle(fh, node, writable, None, uid=caller.uid, pid=caller.pid)
                    self.writing += writable
            if busy is None and not pending:
                break
            if busy is not None:
                self._wait_for_release(node, busy)
            else:
                self._wait_for_pending(node)
        try:
            if truncate:
                try:
                    self.saver.empty(node)
                except BaseException:
                    self.release(fh)
                    raise
                # POSIX: O_TRUNC of an existing file marks its mtime and ctime, as truncate(2) does.
                now = time.time_ns()
                with self.table.lock:
                    if node.entry is not None:
                        node.entry = with_changes(node.entry, mtime_ns=now)
                    node.ctime_ns = now
            backing = self._pass_through(fh, node) if pass_through else 0
        finally:
            if mine:
                with node.lock, self.table.lock:
                    node.pass_pending -= 1
        if backing:
            return Opened(fh, noflush=not writable, backing=backing)
        # A write-only handle writes past the kernel's page cache (direct_io): each write goes from the
        # writer's own pages straight into the request, where a cached write first fills a page of this
        # inode (a copy and a page to allocate and later reclaim per 4 KiB) that nobody reads through the
        # handle.  The kernel drops any cached pages of the written range (other handles' reads and
        # mappings see the new bytes: tests/fuse/test_writes_mount.py), and no mapping is made of a
        # write-only descriptor.  A read-write handle stays cached: its reads and mmap need the pages.
        direct = flags & os.O_ACCMODE == os.O_WRONLY
        if direct:
            self.metrics.add("direct_write_opens")
        return Opened(fh, keep_cache=keep, direct_io=direct, noflush=not writable)

    def _may_pass_through(self, node: Node, flags: int, truncate: bool) -> bool:
        """Whether a new open of ``node`` with ``flags`` is a passthrough open (passthrough.py says which are)."""
        dirty = node.dirty
        if dirty is not None and dirty.passing:
            # Any open of an inode the kernel passes through must be a passthrough open of the same backing file
            # (else EIO at open): a reader's reads, too, go to the temp file in the kernel then.
            return True
        if not self.state.passthrough or flags & os.O_ACCMODE != os.O_WRONLY:
            return False
        entry = node.entry
        fresh = truncate or dirty is not None or entry is None or entry.size == 0  # no stored content to copy first
        return fresh and node.opens == 0

    def _wait_for_release(self, node: Node, dirty: DirtyFile) -> None:
        """A writable open of a file whose closed passthrough open is not yet released and whose backing file is saved
        content now (the journal's data file, or a stored object): the kernel lets no open of the inode have another
        backing file, so this one waits (on a thread) for that release, up to ``WINDOW_WAIT``; EBUSY past it (a reader
        sharing that backing file still holds it).  Nothing is changed before (``NeedsThread`` on the loop)."""
        self.state.io()
        self.metrics.add("passthrough_window_waits")
        if not dirty.wait_released(WINDOW_WAIT):
            log.warning("%s: a write open waited %.0fs for the release of a passthrough open of the saved file; EBUSY",
                        node.path, WINDOW_WAIT)
            raise FsError(errno.EBUSY, "a passthrough open of the saved file is still open")

    def _wait_for_pending(self, node: Node) -> None:
        """An open while another open of ``node`` has chosen passthrough but has no backing id yet: it waits (on a
        thread) until that one has it, or has gone without, up to ``WINDOW_WAIT`` (EBUSY past it), then chooses."""
        self.state.io()
        self.metrics.add("passthrough_pending_waits")
        deadline = time.monotonic() + WINDOW_WAIT
        while node.pass_pending > 0:
            if time.monotonic() > deadline:
                log.warning("%s: an open waited %.0fs for another open's passthrough to begin; EBUSY", node.path,
                            WINDOW_WAIT)
                raise FsError(errno.EBUSY, "another open's passthrough is beginning")
            time.sleep(0.001)

    def _pass_through(self, fh: int, node: Node) -> int:
        """Make handle ``fh`` (registered, on regular file ``node``) a passthrough open: its backing id, or 0 (the
        open goes through the mount: a store that cannot keep the temp file as the object, a temp file the journal
        holds, or a backing file the kernel refused)."""
        with self.table.lock:
            handle = self._handles.get(fh)
        writable = handle is None or handle.writable
        shared = node.dirty
        if shared is not None and not writable and shared.saved_backing():
            # Between a passthrough close that saved the file itself and its release: share that backing file (a
            # copy made now would be a second backing file, which the kernel refuses: EIO at open).
            dirty = shared
            self.metrics.add("passthrough_window_opens")
        else:
            dirty = self.saver.ensure_dirty(node, keep=True)
        if not dirty.in_place:
            return 0
        try:
            backing = dirty.pass_begin(passthrough.register, writable=writable)
        except OSError as exc:
            self.metrics.add("passthrough_refused")
            passthrough.refused(exc)
            return 0
        if not backing:
            return 0
        with self.table.lock:
            handle = self._handles.get(fh)
            if handle is not None:
                handle.passing = dirty
        if handle is None:  # released meanwhile (the kernel never got the open): undo
            self._pass_end(dirty)
            return 0
        self.metrics.add("passthrough_opens")
        return backing

    def _pass_end(self, dirty: DirtyFile) -> None:
        """A passthrough open of ``dirty`` was released: its backing id closes with the file's last one."""
        backing = dirty.pass_end()
        if backing:
            passthrough.close_backing(backing)

    def _object_of(self, node: Node) -> ObjectRef | None:
        """The data object holding ``node``'s saved content (None when empty)."""
        entry = node.entry
        scope = node.scope
        if entry is None or entry.size == 0 or scope is None:
            return None
        return self.state.object_ref(self.state.repo(scope.repo), entry)

    def _open_control(self, node: Node, flags: int, caller: Caller) -> Opened:
        writable = flags & os.O_ACCMODE != os.O_RDONLY
        if writable and node.control not in control.WRITABLE:
            raise FsError(errno.EACCES, f".lakefs/{node.control} is read-only")
        content = None
        if flags & os.O_ACCMODE != os.O_WRONLY:
            self.state.io()
            if node.scope is not None:
                self.scopes.check(node.scope)
            content = self.controls.read(node.scope, node.control)
        fh = self.state.new_fh()
        with self.table.lock:
            node.opens += 1
            self._handles[fh] = FileHandle(fh, node, writable, None, content=content, uid=caller.uid, pid=caller.pid)
        return Opened(fh, keep_cache=False, direct_io=True, noflush=not writable)

    def is_control(self, fh: int) -> bool:
        handle = self._handles.get(fh)
        return handle is not None and handle.node.kind == Kind.CONTROL_FILE

    def handle(self, fh: int) -> FileHandle:
        """Open handle ``fh`` (EBADF if there is none)."""
        return self._handle(fh)

    def _handle(self, fh: int) -> FileHandle:
        handle = self._handles.get(fh)
        if handle is None:
            raise FsError(errno.EBADF)
        return handle

    @op("read")
    def read(self, fh: int, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset``: the temp file's if the file was written, else the object's."""
        handle = self._handle(fh)
        if handle.content is not None:
            return handle.content[offset : offset + size]
        if handle.node.kind == Kind.CONTROL_FILE:
            return b""
        reader = self.state.reader
        dirty = handle.node.dirty
        if dirty is not None:
            self.state.io()
            data = dirty.pread(offset, size)
        else:
            # Resolved at the first read, not at open: a file written through
            # another handle is saved by the time that handle is released.
            obj = handle.obj
            if obj is None:
                obj = handle.obj = self._object_of(handle.node)
                if obj is None:
                    return b""
            cached = reader.cached(obj, offset, size)
            if cached is None:
                self.state.io()
                data = reader.read(obj, offset, size, handle.read_state)
            else:
                data = cached
            reader.advise(obj, handle.read_state, offset, size)
        self.metrics.add("read_bytes", len(data))
        handle.read_bytes += len(data)
        return data

    @op("write")
    def write(self, fh: int, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset`` into the file's temp file (a control file runs its command)."""
        handle = self._handle(fh)
        node = handle.node
        if node.kind == Kind.CONTROL_FILE:
            return self._write_control(node, data, handle.uid, handle.pid)
        if not handle.writable:
            raise FsError(errno.EBADF)
        if not self.saver.write_is_local(node, offset, len(data)):
            self.state.io()
        n = self.saver.write(node, offset, data)
        with self.table.lock:
            if node.entry is not None:
                node.entry = with_changes(node.entry, mtime_ns=time.time_ns())
        self.metrics.add("written_bytes", n)
        handle.written_bytes += n
        dirty = node.dirty
        if dirty is not None and not dirty.direct and dirty.size > MD5_MAX:
            dirty.hand_writes(fh)  # this handle's next appends are written by the shim (stop 57), if the file may
        return n

    def _write_control(self, node: Node, data: bytes, uid: int, pid: int) -> int:
        scope = node.scope
        if scope is None or node.control not in control.WRITABLE:
            raise FsError(errno.EACCES)
        self.state.io()
        if self.saver.writeback is not None:  # "my commit holds what I wrote": what is journaled is staged first
            self.saver.writeback.drain((scope.repo, scope.branch))
        self.state.settle(scope)  # and new files created here, still open: as write-back's journal would have them
        # A commit, merge or reset written to a control file is the audit trail's record of this uid.
        actor = Actor(self.audit.user(uid), MOUNT) if self.audit is not None else None
        try:
            with acting(actor) if actor is not None else contextlib.nullcontext():
                outcome = self.controls.write(scope, node.control, data, uid)
        except Exception as exc:  # the catalog records the verb when it succeeds; here, its failure
            if self.audit is not None:
                self.audit.failed(node, uid, pid, node.control, exc, path="")
            raise
        finally:
            self.metrics.add(f"control_{node.control}")
        if outcome.content_changed or outcome.head_moved:
            resolved, signature, _stable = resolve_scope(self.state.catalog, scope.repo, scope.name)
            with self.table.lock:
                scope.checked = self.state.now()
                if outcome.content_changed:
                    self.scopes.changed(scope, resolved, signature)
                else:  # a commit: the branch's content is what it was
                    scope.resolved, scope.signature = resolved, signature
        return len(data)

    @op("flush")
    def flush(self, fh: int, closer: int = 0) -> None:
        """A close(2) of the handle by thread ``closer`` (0: not known): save written content (errors reach the
        closing process).

        A close in a process other than the opener's saves nothing: a forked child closing the descriptor
        it inherited (Java's process spawn closes every one; Hadoop's local file system spawns ``chmod``
        per file and directory it makes, so each file a Spark job had open was saved half-written once per
        spawn, and its held create staged).  The opener's own close, from any of its threads, saves as
        before, and the last close of the file (release) saves whatever is left.
        """
        handle = self._handle(fh)
        if closer and handle.writable and not one_process(handle.pid, closer):
            self.metrics.add("foreign_flushes")
            return
        if handle.passing is not None:  # an fstat: what the kernel's writes left (a save of them needs a thread below)
            self._kernel_mtime(handle.node, handle.passing)
        if handle.writable and handle.node.dirty is not None and handle.node.dirty.modified:
            if self.saver.save_is_local(handle.node):
                self.saver.save(handle.node, own_writer=True)
            elif self.writing == 1 and self.state.refuses_io() and self.saver.save_is_quick(handle.node):
                self._save_quickly(handle.node)
            else:
                self.state.io()
                self.saver.save(handle.node, own_writer=True)
        if handle.writable and self._create_held(handle.node):  # a new file closed unwritten (``touch``): staged now
            self.state.io()
            self.state.settle(handle.node.scope, handle.node.path)  # type: ignore[arg-type]
        elif handle.writable and self.state.writeback is not None and handle.node.scope is not None:
            # With write-back, such a file's create is journaled at its close (it waited for a save: journal_changes).
            if not self.state.local_journal():
                self.state.io()
            self.state.writeback.journal_create(handle.node.scope, handle.node.path)

    def _save_quickly(self, node: Node) -> None:
        """A lone writer's close of a new small file, saved on the request loop (stop 58): its object stored
        unsynced and its staging one transaction of the embedded database (``Saver.save_is_quick``), refusing
        every wait (``lakemount.waiting``): a lock held elsewhere, another close or staging of the branch in
        flight.  Such a wait is ``NeedsThread``, nothing staged (its object, stored, is stored again by the
        thread: the same bytes at the same address), and the close goes to a thread as every close did
        before.  Handing it over cost the loop more CPU than the close itself (docs/SCALE.md, stop 58)."""
        try:
            with waiting.refusing():
                self.saver.save(node, own_writer=True)
        except WouldWait:
            self.metrics.add("quick_saves_refused")
            raise NeedsThread from None
        self.metrics.add("quick_saves")

    def end_direct(self, ino: int) -> None:
        """Before a ``setattr`` of ``ino``: the shim's writes to it (stop 57) stop and are taken in, their mtime set on
        the entry (a time or mode the ``setattr`` sets then wins; a mode gaining set-user-ID is killed by the next
        write, which goes through the mount)."""
        node = self.table.get(ino)
        dirty = node.dirty if node is not None else None
        if node is None or dirty is None or not (dirty.direct or dirty.direct_mtime_ns):
            return
        dirty.end_direct()
        mtime = dirty.take_direct_mtime()
        with self.table.lock:
            if node.entry is not None and mtime > node.entry.mtime_ns:
                node.entry = with_changes(node.entry, mtime_ns=mtime)

    def _kernel_mtime(self, node: Node, dirty: DirtyFile) -> None:
        """The file's mtime as the kernel's writes through passthrough left it (the mount saw none of them)."""
        mtime = dirty.kernel_mtime_ns()
        with self.table.lock:
            if node.entry is not None and mtime > node.entry.mtime_ns:
                node.entry = with_changes(node.entry, mtime_ns=mtime)

    @op("fsync")
    def fsync(self, fh: int, datasync: bool = False) -> None:
        """Save the file's written content now and make it durable against power loss (with write-back: wait until
        its branch's journal is staged)."""
        handle = self._handle(fh)
        if handle.node.dirty is not None and handle.node.dirty.modified:
            self.state.io()
            self.saver.save(handle.node, own_writer=handle.writable)
        scope = handle.node.scope
        if self.saver.writeback is not None and scope is not None:  # durable in the lake, not only on this node
            self.state.io()
            self.saver.writeback.drain((scope.repo, scope.branch))
        else:  # what a close stored durable within 1 s (saving.store_bytes) is durable against power loss now
            self.state.io()
            self.state.catalog.sync_stored()

    def _create_held(self, node: Node) -> bool:
        """True if ``node`` is a new file whose create waits for its first close (``MountState.hold``)."""
        scope = node.scope
        return bool(self.state.held) and scope is not None and self.state.held.holds((scope.repo, scope.branch), node.path)

    @op("release")
    def release(self, fh: int) -> None:
        """The last close of the handle; saves anything unsaved (a failure is logged, content kept aside)."""
        handle = self._handles.get(fh)
        if handle is None:
            return
        node = handle.node
        dirty = node.dirty
        held = handle.writable and self._create_held(node)
        if held or (dirty is not None and not self.saver.release_is_local(node, handle.writable)):
            self.state.io()  # saving it, keeping it aside, or dropping a large temp file; staging a held create
        with self.table.lock:
            self._handles.pop(fh, None)
            node.opens = max(0, node.opens - 1)
            if handle.writable:
                node.writers = max(0, node.writers - 1)
                if node.kind != Kind.CONTROL_FILE:
                    self.writing -= 1
        if handle.passing is not None:  # no more writes come through it: the save may take the file itself
            self._pass_end(handle.passing)
            self._kernel_mtime(node, handle.passing)
        if dirty is not None and handle.writable:  # the shim's writes through it end, and are counted (stop 57)
            dirty.end_direct(fh)
            shim_bytes = dirty.take_direct_written(fh)
            if shim_bytes:
                self.metrics.add("written_bytes", shim_bytes)
                handle.written_bytes += shim_bytes
        status = 200
        if handle.writable and node.dirty is not None and node.dirty.modified:
            try:
                self.saver.save(node)
            except (LakeMountError, OSError) as exc:
                log.error("saving %s on release failed: %s", node.path, exc)
                status = 500
        if held and node.scope is not None and not node.detached:
            try:
                self.state.settle(node.scope, node.path)
            except LakeMountError as exc:
                log.error("staging new file %s on release failed: %s", node.path, exc)
                status = 500
        if self.audit is not None and node.kind == Kind.FILE:
            self.audit.record(node, handle.uid, handle.pid, "write" if handle.written_bytes else "read",
                              nbytes=handle.written_bytes or handle.read_bytes, status=status)
        if node.dirty is not None:
            self.saver.drop_dirty_if_idle(node)
        self.table.drop_if_dead(node)
