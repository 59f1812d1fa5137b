"""The filesystem core: POSIX operations on inodes, over the catalog, with no kernel in sight.

``FileSystem`` is what the pyfuse3 adapter calls and what tests drive directly.
Its operations take and return plain values (inode numbers, byte names,
:class:`Attr`, :class:`Opened`) and raise either a lakemount error or an
:class:`~lakemount.fuse.errno.FsError`; the adapter turns both into errnos
through the one table in :mod:`lakemount.fuse.errno`.

Layout.  In root mode the mount root lists repositories, ``/<repo>`` lists
branches and tags and resolves any ref expression on lookup, and
``/<repo>/<ref>/...`` are the objects of that ref; with ``MountOptions.ref``
one ref is the root.  Branches are read-write; everything else is read-only
(EROFS).  Every ref root has a ``.lakefs`` control directory
(:mod:`~lakemount.fuse.control`); the mount root's holds ``stats``.

Writes.  Namespace changes (create, mkdir, link, unlink, rmdir, rename, symlink,
chmod, chown, utimens, xattrs) are staged at once, each as one
``catalog.apply`` transaction: a rename of a directory moves every entry
below it in one transaction and copies no data.  File content goes to a
local temp file (:mod:`~lakemount.fuse.writes`) and becomes a staged entry on
flush (close), fsync, or a truncate without open writers.  An empty
directory persists as a marker key ``dir/``; removing the last entry of an
implicit directory stages a marker for it in the same transaction, so
directories never vanish under the user.

Caching.  Entries and listings of branches are trusted for ``head_ttl``
seconds; committed refs are immutable, so their entries are cached for the
scope's life (see :mod:`~lakemount.fuse.scope`).  Every operation that can
answer from memory does so without blocking: run under :meth:`nonblocking`,
an operation that would need I/O raises :class:`NeedsThread` before changing
anything, and the adapter retries it in a worker thread.  Writes to this
node's own disk count as memory there: a small file's temp file, and with
write-back a journal that does not sync per close, so a ``cp -r`` of small
files into a write-back mount needs a thread only where the catalog is asked
(a name's lookup once the directory's listing is older than ``head_ttl``; a
create whose name no lookup just found absent).  Kernel cache
invalidations are queued on ``invalidations`` (never issued from inside a
request handler, where they can deadlock).

Parts.  ``FileSystem`` keeps the public operations and delegates each to the
part that owns its concept, all sharing one :class:`~lakemount.fuse.state.MountState`:
:mod:`~lakemount.fuse.scope` (mounted refs and their freshness),
:mod:`~lakemount.fuse.attributes` (computing attributes),
:mod:`~lakemount.fuse.tree` (lookup, revalidation, cached listings),
:mod:`~lakemount.fuse.directories` (directory handles),
:mod:`~lakemount.fuse.handles` (file handles: open, read, write, release),
:mod:`~lakemount.fuse.saving` (temp files to staged entries),
:mod:`~lakemount.fuse.scan` (scan-ahead prefetch),
:mod:`~lakemount.fuse.metadata` (setattr and xattrs) and
:mod:`~lakemount.fuse.namespace` (create, mkdir, unlink, rename...).

Thread safety.  ``InodeTable.lock`` guards in-memory structures and is never
held during I/O; each writable scope's ``mutex`` serializes this mount's
namespace changes to that branch; each node's ``lock`` serializes creation of
its temp file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.catalog.blocks import BlockSource
from lakemount.catalog.catalog import Catalog
from lakemount.fuse import control, kflags
from lakemount.fuse.attributes import Attributes
from lakemount.fuse.auditing import MountAudit
from lakemount.fuse.directories import READDIR_BATCH, Directories
from lakemount.fuse.handles import Handles
from lakemount.fuse.inodes import ROOT_INODE, Kind, Node
from lakemount.fuse.metadata import Metadata
from lakemount.fuse.namespace import Namespace
from lakemount.fuse.reader import BlockReader
from lakemount.fuse.saving import Saver
from lakemount.fuse.scan import ScanAhead
from lakemount.fuse.scope import Scopes
from lakemount.fuse.state import NAME_MAX, MountState, NeedsThread, op
from lakemount.fuse.stats import Metrics
from lakemount.fuse.tree import Tree
from lakemount.fuse.values import Attr, Caller, DirItem, MountOptions, Opened, SetAttr, StatFs

if TYPE_CHECKING:
    from lakemount.fuse.writeback import Writeback

# Any constant > 0 works for statfs: the store has no fixed capacity.  These
# say "1 PiB, a billion inodes, all free" so df and space checks are happy.
STATFS_BLOCK: Final = 4096
STATFS_BLOCKS: Final = (1 << 50) // STATFS_BLOCK
STATFS_FILES: Final = 1 << 30


__all__ = ["Attr", "Caller", "DirItem", "FileSystem", "MountOptions", "NeedsThread", "Opened", "SetAttr", "StatFs"]


class FileSystem:
    """Versioned repositories as a POSIX tree; see the module docstring for the contract."""

    # True once the kernel took HANDLE_KILLPRIV_V2 (set by the adapter, ``kflags.killpriv``): the kernel then asks no
    # security.capability per write, and the mount clears set-user-ID/set-group-ID on a write, truncation, O_TRUNC
    # or chown itself (``Metadata.kill_suidgid``; uid 0 stands for CAP_FSETID).
    kills_suidgid = False

    def __init__(
        self,
        catalog: Catalog,
        adapter: BlockSource,
        ram: RamCache,
        disk: DiskCache | None,
        options: MountOptions,
        *,
        cache_stats: Callable[[], dict[str, dict[str, int]]] | None = None,
        audit: MountAudit | None = None,
    ) -> None:
        self.catalog = catalog
        if options.writeback:  # written files grow in the journal's spool: a journaled one is its data file as is
            options = dataclasses.replace(options, spool_dir=os.path.join(options.journal_dir, "spool"))
        self.options = options
        # Protection rules are branch state: trusted for --head-ttl, like heads (docs/SEMANTICS.md).
        catalog.protection.keep_for(options.head_ttl)
        self.metrics = Metrics()
        self.reader = BlockReader(adapter, ram, disk, self.metrics)
        self.state = state = MountState(catalog, self.reader, self.metrics, options)
        self.table = state.table
        self.invalidations = state.invalidations
        self.control = control.ControlFiles(catalog, self.render_stats)
        self._cache_stats = cache_stats
        self.attrs = Attributes(options, state.started_ns, state.now)
        self.scopes = Scopes(state)
        self.tree = Tree(state, self.scopes, self.attrs)
        self.directories = Directories(state, self.scopes, self.tree, self.attrs)
        self.saver = Saver(state, self.scopes, self.tree)
        self.scan = ScanAhead(state, self.tree)
        self.handles = Handles(state, self.scopes, self.tree, self.saver, self.scan, self.control)
        self.handles.audit = self.audit = audit
        self.metadata = Metadata(state, self.scopes, self.tree, self.attrs, self.saver)
        self.namespace = Namespace(state, self.scopes, self.tree, self.attrs, self.handles)
        os.makedirs(options.spool_dir, exist_ok=True)
        self.writeback: Writeback | None = None
        if options.writeback:
            self.writeback = self._start_writeback(options)
        if options.ref is None:
            self.table.add_root(Node(ROOT_INODE, Kind.ROOT, key=("root",), lookups=1))
        else:
            repo, name = options.ref
            scope = self.scopes.get(repo, name)
            self.table.add_root(Node(ROOT_INODE, Kind.DIR, key=(scope.key, ""), scope=scope, lookups=1))

    def _start_writeback(self, options: MountOptions) -> Writeback:
        """The journal and its pipeline; replays what an earlier run left before the mount serves."""
        from lakemount.fuse.journal import Journal
        from lakemount.fuse.writeback import Writeback

        journal = Journal(options.journal_dir, fsync=options.journal_fsync)
        wb = Writeback(self.state, self.scopes, self.tree, journal, max_bytes=options.journal_bytes,
                       retry=options.writeback_retry,
                       recovered_dir=options.recovered_dir or os.path.join(options.spool_dir, "recovered"))
        wb.start()
        self.state.writeback = self.saver.writeback = wb
        self.control.writeback_status = wb.status
        return wb

    def nonblocking(self) -> contextlib.AbstractContextManager[None]:
        """Run operations that may not block: one that needs I/O raises ``NeedsThread`` instead."""
        return self.state.nonblocking()

    def poll_heads(self) -> None:
        """Re-check every non-stable scope the kernel still knows (called every ``head_ttl``); stage the
        creates held past ``HOLD_MAX`` (fuse/held.py)."""
        if self.state.held:
            self.state.settle_due()
        self.scopes.poll_heads()

    def refs_changed(self, changes: Sequence[Any] | None) -> None:
        """Act on change notices of other processes at once (see ``Scopes.refs_changed``)."""
        self.scopes.refs_changed(changes)

    # ================================================================== names
    def lookup(self, parent_ino: int, name: bytes) -> Attr:
        """Find ``name`` in a directory and count one kernel reference to it; a name not there in a ref's
        directory is ``Absent`` (ENOENT), which says how long the kernel may keep it as a negative entry."""
        return self.tree.lookup(parent_ino, name)

    def forget(self, items: Sequence[tuple[int, int]]) -> None:
        """The kernel dropped ``n`` references to each inode of ``items``."""
        self.tree.forget(items)

    def repository_of(self, ino: int, name: bytes | None = None) -> str | None:
        """The repository that ``ino`` (or its child ``name``) belongs to, None for the mount root and its ``.lakefs``.

        What the mount's access control judges a request by; ``FsError(ESTALE)`` for an unknown inode.
        """
        node = self.state.node(ino)
        if node.scope is not None:
            return node.scope.repo
        if node.kind is Kind.ROOT:
            # A lookup in the root names a repository; its .lakefs holds the mount's statistics.
            if name is None or name in (b".", b"..", control.CONTROL_DIR.encode()):
                return None
            return name.decode(errors="replace")
        return node.repo or None

    def getattr(self, ino: int) -> Attr:
        """The attributes of ``ino``, revalidated if stale (a path deleted elsewhere keeps its last ones)."""
        return self.tree.getattr(ino)

    def attributes(self, ino: int) -> Attr:
        """What :meth:`getattr` answers, not counted in the metrics as a kernel request."""
        return self.tree.attributes(ino)

    # ================================================================== directories
    def opendir(self, ino: int, caller: Caller | None = None) -> int:
        """Open directory ``ino``; ENOTDIR for anything else.  A listing of a ref's directory is one audit record."""
        fh = self.directories.opendir(ino)
        if self.audit is not None and caller is not None:
            node = self.state.node(ino)
            if node.kind == Kind.DIR:
                self.audit.record(node, caller.uid, caller.pid, "list", path=node.path + "/" if node.path else "")
        return fh

    def is_control(self, fh: int) -> bool:
        """True if ``fh`` is an open control file (``.lakefs/...``)."""
        return self.handles.is_control(fh)

    def dir_cacheable(self, fh: int) -> bool:
        """True if the kernel may keep the listing of directory handle ``fh`` (an immutable ref's directory)."""
        return self.directories.cacheable(fh)

    def readdir(self, fh: int, start_id: int, limit: int = READDIR_BATCH) -> list[DirItem]:
        """Up to ``limit`` entries after position ``start_id`` (0: from the start, with . and ..).

        Items with ``counted`` raised their inode's lookup count: the caller
        must ``forget`` those it could not pass to the kernel.
        """
        return self.directories.readdir(fh, start_id, limit)

    def releasedir(self, fh: int) -> None:
        """Close directory handle ``fh``."""
        self.directories.releasedir(fh)

    # ================================================================== namespace changes
    def mkdir(self, parent_ino: int, name: bytes, mode: int, caller: Caller) -> Attr:
        """Make a directory; EEXIST if the name is taken, EROFS on a read-only ref."""
        return self.namespace.mkdir(parent_ino, name, mode, caller)

    def mknod(self, parent_ino: int, name: bytes, mode: int, rdev: int, caller: Caller) -> Attr:
        """Make a regular file, FIFO, socket or device node; EINVAL for other types."""
        return self.namespace.mknod(parent_ino, name, mode, rdev, caller)

    def create(self, parent_ino: int, name: bytes, mode: int, flags: int, caller: Caller) -> tuple[Opened, Attr]:
        """Create (or, without O_EXCL, open) a regular file and open it."""
        return self.namespace.create(parent_ino, name, mode, flags, caller)

    def symlink(self, parent_ino: int, name: bytes, target: bytes, caller: Caller) -> Attr:
        """Make a symlink; EINVAL for a target that is not UTF-8."""
        return self.namespace.symlink(parent_ino, name, target, caller)

    def readlink(self, ino: int) -> bytes:
        """A symlink's target; EINVAL for anything else."""
        return self.namespace.readlink(ino)

    def link(self, ino: int, new_parent_ino: int, new_name: bytes) -> Attr:
        """A second name for a file (a hard link); EPERM for a directory, EXDEV across refs, EMLINK past the maximum."""
        return self.namespace.link(ino, new_parent_ino, new_name)

    def unlink(self, parent_ino: int, name: bytes) -> None:
        """Remove a non-directory (EISDIR for a directory)."""
        self.namespace.unlink(parent_ino, name)

    def rmdir(self, parent_ino: int, name: bytes) -> None:
        """Remove an empty directory (ENOTEMPTY, ENOTDIR otherwise)."""
        self.namespace.rmdir(parent_ino, name)

    def rename(self, old_parent_ino: int, old_name: bytes, new_parent_ino: int, new_name: bytes, flags: int = 0) -> None:
        """Rename a file or a whole directory as one staging transaction (no data is copied).

        ``flags``: 1 = RENAME_NOREPLACE (EEXIST if the target exists); RENAME_EXCHANGE is not supported (EINVAL).
        """
        self.namespace.rename(old_parent_ino, old_name, new_parent_ino, new_name, flags)

    # ================================================================== attributes and xattrs
    def setattr(self, ino: int, changes: SetAttr, fh: int | None, caller: Caller) -> Attr:
        """Change mode, owner, times or size of ``ino``; EROFS on a read-only ref, EPERM on the layout."""
        if self.kills_suidgid and (changes.uid is not None or changes.gid is not None
                                   or (changes.size is not None and caller.uid != 0)):
            changes = dataclasses.replace(changes, kill_suidgid=True)  # what the kernel's KILL_SUIDGID would ask
        self.handles.end_direct(ino)  # the shim's writes (stop 57) taken in first: times and modes set here win
        return self.metadata.setattr(ino, changes, fh, caller)

    def getxattr(self, ino: int, name: bytes) -> bytes:
        """The value of extended attribute ``name`` (``user.*`` only; ENOATTR if absent)."""
        return self.metadata.getxattr(ino, name)

    def listxattr(self, ino: int) -> list[bytes]:
        """The names of ``ino``'s extended attributes."""
        return self.metadata.listxattr(ino)

    def setxattr(self, ino: int, name: bytes, value: bytes) -> None:
        """Set extended attribute ``name`` (``user.*`` only, UTF-8)."""
        self.metadata.setxattr(ino, name, value)

    def removexattr(self, ino: int, name: bytes) -> None:
        """Remove extended attribute ``name`` (ENOATTR if absent)."""
        self.metadata.removexattr(ino, name)

    @op("statfs")
    def statfs(self) -> StatFs:
        """Fixed, generous figures: the store has no capacity to report."""
        return StatFs(STATFS_BLOCK, STATFS_BLOCK, STATFS_BLOCKS, STATFS_BLOCKS, STATFS_BLOCKS, STATFS_FILES, STATFS_FILES, STATFS_FILES, NAME_MAX)

    # ================================================================== files
    def open(self, ino: int, flags: int, caller: Caller | None = None) -> Opened:
        """Open file ``ino`` (EISDIR, ELOOP, EROFS...); a read-only open may start a scan-ahead."""
        opened = self.handles.open(ino, flags, caller)
        if self.kills_suidgid and flags & os.O_TRUNC and caller is not None:
            self.metadata.kill_suidgid(self.state.node(ino), caller)
        return opened

    def read(self, fh: int, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` of handle ``fh``."""
        return self.handles.read(fh, offset, size)

    def write(self, fh: int, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset`` of handle ``fh``; returns the bytes written."""
        if self.kills_suidgid:  # before the write: a kill that needs a thread raises NeedsThread with nothing written
            handle = self.handles.handle(fh)
            self.metadata.kill_suidgid(handle.node, Caller(handle.uid, 0, handle.pid))
        return self.handles.write(fh, offset, data)

    def flush(self, fh: int, closer: int = 0) -> None:
        """A close(2) of the handle by thread ``closer`` (0: not known): save written content (errors reach
        the closing process); a close in another process than the opener's (a forked child closing the
        descriptor it inherited) saves nothing."""
        self.handles.flush(fh, closer)

    def fsync(self, fh: int, datasync: bool = False) -> None:
        """Save the handle's written content now."""
        self.handles.fsync(fh, datasync)

    def release(self, fh: int) -> None:
        """The last close of the handle; saves anything unsaved (a failure is logged, content kept aside)."""
        self.handles.release(fh)

    # ================================================================== lifecycle
    def flush_all(self) -> int:
        """Save every modified open file (unmount, SIGTERM); returns how many failed."""
        return self.saver.flush_all()

    def close(self) -> None:
        """Save what can be saved, keep aside what cannot, release temp files and threads."""
        self.saver.close()
        self.state.settle_all()
        if self.writeback is not None:
            self.writeback.close()
        self.scan.close()
        self.reader.close()
        with contextlib.suppress(OSError):
            os.rmdir(self.options.spool_dir)

    def render_stats(self) -> str:
        """The mount's metrics as Prometheus text (``.lakefs/stats``)."""

        def gauges() -> dict[str, float]:
            return {
                "inodes": len(self.table),
                "open_files": len(self.handles),
                "dirty_files": sum(1 for n in self.table.nodes() if n.dirty is not None),
                "scopes": len(self.scopes),
                # security.capability asked by the kernel (a write's privilege check), answered by the shim
                "kernel_capability_getxattrs": kflags.answered_getxattrs(),
                # a directory's GETATTR after a create in it, answered by the shim from the attributes kept then
                "kernel_kept_dir_getattrs": kflags.answered_getattrs(),
                "kernel_kills_suidgid_here": int(self.kills_suidgid),
                # open and create replies the shim sent with FOPEN_PASSTHROUGH (fuse/passthrough.py)
                "kernel_passthrough_replies": kflags.passthrough_replies(),
                # the fast path past pyfuse3's loop (kflags.py): kernel_fast_<op>s answered in C from the adapter's
                # fast_* methods, kernel_declined_<op>s given to pyfuse3, kernel_drained (requests read by drains)...
                **{f"kernel_{name}": n for name, n in kflags.fast_counts().items()},
                # this process's staging notices (PostgreSQL): with a staging, carried by one, alone, held (stop 54)
                **{f"staging_notices_{name}": n for name, n in self.state.catalog.notice_counts().items()},
            }

        text = self.metrics.render(self._cache_stats() if self._cache_stats else None, gauges)
        if self.audit is not None:  # the same names as the API's /metrics (audit/log.py)
            text += "".join(f"# TYPE lakemount_{k}_total counter\nlakemount_{k}_total {v}\n"
                            for k, v in self.audit.log.stats().items())
        return text
