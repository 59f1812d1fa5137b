"""A node's POSIX attributes, computed from what the mount has cached (never any I/O).

Directories of the layout (the mount root, repository directories, ``.lakefs``)
and control files belong to the mounting user and date from the mount's start; a directory inside
a ref takes mode, owner and mtime from its marker entry (``0755`` and the mount's
start when implicit) and counts its link number from its cached listing; files,
symlinks, FIFOs, sockets and device nodes take theirs from their entry, and a
file open for writing shows the size of its temp file, and as ``st_blocks`` the
bytes that temp file really holds (holes left by ``truncate`` or a seek past the
end take none); a saved file's blocks are its size, since the block store holds
every byte of the object, zeros included.  Entries written by
other front ends carry owner 0, which a mount run by an ordinary user shows as
that user's.  The kernel caches an attribute for ``head_ttl`` on a branch and
for ``immutable_ttl`` on a committed ref; control files and non-empty files open for writing (whose
blocks change at the save) are never cached.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from typing import Final

from lakemount.catalog.model import LINK_MODE
from lakemount.fuse import control
from lakemount.fuse.inodes import Kind, Node
from lakemount.fuse.values import Attr, MountOptions

# The file types mknod(2) makes and an entry's mode may carry besides directories and symlinks.
MKNOD_TYPES: Final = frozenset({stat.S_IFREG, stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK})


class Attributes:
    """Computes :class:`Attr` for nodes of one mount (its options, its start time)."""

    def __init__(self, options: MountOptions, started_ns: int, now: Callable[[], float] = time.monotonic) -> None:
        """``now`` is the mount's clock (``MountState.now``): the grants it notes are compared with its readings."""
        self.options = options
        self.started_ns = started_ns
        self.now = now

    def owner(self, uid: int, gid: int) -> tuple[int, int]:
        """The owner shown for an entry's ``uid``/``gid``."""
        # Entries written by the gateway or CLI carry owner 0.  A mount run by
        # an ordinary user shows them as that user's, or nothing would be writable.
        if self.options.uid != 0:
            return (self.options.uid if uid == 0 else uid, self.options.gid if gid == 0 else gid)
        return uid, gid

    def timeout(self, node: Node) -> float:
        """How long the kernel may cache ``node``'s attributes and name; on a branch, notes the grant
        in ``scope.granted`` (the head poll skips branches whose grants have all run out)."""
        scope = node.scope
        if node.kind == Kind.CONTROL_FILE:
            return 0.0
        dirty = node.dirty
        if dirty is not None and dirty.size and dirty.modified:
            # A non-empty file open for writing: its blocks change when it is saved, which the kernel does not see
            # (a write invalidates them; a close does not), so a stat after close(2) must ask again.
            return 0.0
        if scope is None or scope.writable:
            if scope is not None:
                scope.granted = self.now()
            return self.options.head_ttl
        # Committed refs are immutable; a moving expression (main@, main~1)
        # is re-checked by ``poll_heads``, which invalidates on change.
        return self.options.immutable_ttl

    def attr(self, node: Node) -> Attr:
        """The attributes of ``node`` from what is cached (no I/O)."""
        timeout = self.timeout(node)
        started = self.started_ns
        o_uid, o_gid = self.options.uid, self.options.gid
        if node.kind in (Kind.ROOT, Kind.REPO, Kind.CONTROL_DIR):
            return Attr(node.ino, stat.S_IFDIR | 0o755, 2, o_uid, o_gid, 0, started, started, started, timeout)
        if node.kind == Kind.CONTROL_FILE:
            perm = 0o644 if node.control in control.WRITABLE else 0o444
            # The mount's start, not "now": tar compares a file's ctime before and
            # after reading it and calls a changing one "file changed as we read it".
            return Attr(node.ino, stat.S_IFREG | perm, 1, o_uid, o_gid, 0, started, started, started, timeout)
        entry = node.entry
        if node.kind == Kind.DIR:
            if entry is None:
                mode, uid, gid, mtime = stat.S_IFDIR | 0o755, 0, 0, started
            else:
                perm = entry.mode & 0o7777 if entry.is_dir else 0o755
                mode, uid, gid, mtime = stat.S_IFDIR | perm, entry.uid, entry.gid, entry.mtime_ns or started
            mtime = max(mtime, node.mtime_ns)
            uid, gid = self.owner(uid, gid)
            return Attr(node.ino, mode, self.dir_nlink(node), uid, gid, 0, node.atime_ns or mtime, mtime, max(node.ctime_ns, mtime), timeout)
        assert entry is not None
        size = entry.size
        stored: int | None = None
        rdev = 0
        mtime_kernel = 0
        if node.kind == Kind.SYMLINK:
            mode = LINK_MODE
            size = len(entry.target.encode("utf-8", "surrogateescape"))
        else:
            fmt = stat.S_IFMT(entry.mode)
            mode = entry.mode if fmt in MKNOD_TYPES else stat.S_IFREG | (entry.mode & 0o7777 or 0o644)
            if fmt in (stat.S_IFCHR, stat.S_IFBLK):
                rdev = int(entry.target) if entry.target.isdigit() else 0
            dirty = node.dirty
            if dirty is not None:
                if dirty.kernel_written:  # passthrough: the kernel's writes show in the temp file only (size, mtime)
                    mtime_kernel = dirty.kernel_mtime_ns()
                    size = dirty.size
                else:  # the shim's writes (stop 57) show in its count until taken in
                    size, mtime_kernel = dirty.direct_peek()
                if dirty.modified:  # saved (close's flush; its release may come later), the object's blocks count
                    stored = dirty.stored()
        uid, gid = self.owner(entry.uid, entry.gid)
        mtime = max(entry.mtime_ns, mtime_kernel)
        nlink = 0 if node.detached else len(node.names) or 1  # an unlinked file still open (fstat) has no names left
        return Attr(node.ino, mode, nlink, uid, gid, size, node.atime_ns or mtime, mtime, max(node.ctime_ns, mtime), timeout, rdev=rdev, stored=stored)

    @staticmethod
    def dir_nlink(node: Node) -> int:
        """2 (itself and its ``.``) plus one per subdirectory's ``..``, as far as the mount knows.

        Counted from the directory's cached listing of the current scope
        generation (kept true by this mount's own mkdir, rmdir and rename),
        even past its head TTL: a link count may be a little behind another
        writer, like any attribute the kernel caches.  A directory never
        listed shows 2, as before: counting it would mean listing it on
        ``stat``.  A branch root counts its ``.lakefs``.
        """
        listing = node.listing
        scope = node.scope
        if listing is None or scope is None or listing.gen != scope.gen:
            return 2
        return 2 + listing.dirs + (0 if node.path else 1)
