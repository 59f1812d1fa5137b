"""Changing a node's attributes: chmod, chown, utimens, truncate, and ``user.*`` extended attributes.

Mode, owner and mtime live in the entry (a directory's in its marker, staged
on first change), so each change is staged at once on the branch; atime and
ctime are kept in memory only.  A size change truncates the file's content
(:meth:`~lakemount.fuse.saving.Saver.truncate`).  Extended attributes are the
entry's user metadata, the same thing S3 calls ``x-amz-meta-*``: only the
``user.`` namespace, UTF-8 names and values.  Control files and the mount's
layout keep their attributes (EPERM); a ref's root has no entry, so changes to
it are accepted and not kept.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import time

from lakemount.catalog.model import DIR_MODE, LINK_MODE, Entry
from lakemount.fuse.attributes import Attributes
from lakemount.fuse.errno import ENOATTR, FsError
from lakemount.fuse.inodes import Kind, Node
from lakemount.fuse.linked import held_here, stage_file_change
from lakemount.fuse.listing import Child
from lakemount.fuse.saving import Saver
from lakemount.fuse.scope import Scope, Scopes
from lakemount.fuse.state import MountState, op, with_changes
from lakemount.fuse.tree import CHILD, Tree
from lakemount.fuse.values import Attr, Caller, SetAttr


def needs_kill(mode: int) -> bool:
    """True if a write by an unprivileged process clears bits of ``mode`` (the kernel's ``setattr_should_drop_suidgid``:
    set-user-ID, and set-group-ID when the group may execute)."""
    return bool(mode & stat.S_ISUID) or (mode & (stat.S_ISGID | stat.S_IXGRP)) == (stat.S_ISGID | stat.S_IXGRP)


def killed(mode: int) -> int:
    """``mode`` without what :func:`needs_kill` names."""
    mode &= ~stat.S_ISUID
    if mode & stat.S_IXGRP:
        mode &= ~stat.S_ISGID
    return mode


class Metadata:
    """setattr and the xattr operations of one mount."""

    def __init__(self, state: MountState, scopes: Scopes, tree: Tree, attrs: Attributes, saver: Saver) -> None:
        self.state = state
        self.scopes = scopes
        self.tree = tree
        self.attrs = attrs
        self.saver = saver
        self.table = state.table

    @op("setattr")
    def setattr(self, ino: int, changes: SetAttr, fh: int | None, caller: Caller) -> Attr:
        """Apply ``changes`` (mode, owner, times, size) to ``ino``; EROFS on a read-only ref."""
        node = self.state.node(ino)
        if node.kind == Kind.CONTROL_FILE:
            # O_TRUNC on a control file arrives as a size change: nothing to truncate.
            if changes.mode is None and changes.uid is None and changes.gid is None:
                return self.attrs.attr(node)
            raise FsError(errno.EPERM, "control files keep their attributes")
        if node.kind in (Kind.ROOT, Kind.REPO, Kind.CONTROL_DIR):
            raise FsError(errno.EPERM, "the mount's layout keeps its attributes")
        scope = self.scopes.writable(node.scope)
        self.state.io()
        if not node.detached:
            self.tree.revalidate(node)
        if changes.kill_suidgid and changes.mode is None and node.kind == Kind.FILE and node.entry is not None \
                and needs_kill(node.entry.mode):
            changes = dataclasses.replace(changes, mode=killed(node.entry.mode))
        if changes.size is not None:
            self._truncate(node, changes.size)
        if changes.atime_ns is not None:
            node.atime_ns = changes.atime_ns
        if changes.mode is None and changes.uid is None and changes.gid is None and changes.mtime_ns is None:
            if changes.atime_ns is not None or changes.size is not None:
                node.ctime_ns = time.time_ns()
            return self.attrs.attr(node)
        if node.kind == Kind.DIR and not node.path:
            return self.attrs.attr(node)  # a ref's root has no entry to keep attributes in (tar, rsync touch it)
        with scope.mutex:
            base = node.entry
            if node.kind == Kind.DIR and (base is None or not base.is_dir):
                base = Entry("", 0, "", base.mtime_ns if base else self.state.started_ns, "", (), DIR_MODE)
            assert base is not None
            mode = base.mode
            if changes.mode is not None:
                mode = stat.S_IFMT(base.mode) | (changes.mode & 0o7777)
            new = with_changes(
                base,
                mode=mode,
                uid=base.uid if changes.uid is None else changes.uid,
                gid=base.gid if changes.gid is None else changes.gid,
                mtime_ns=base.mtime_ns if changes.mtime_ns is None else changes.mtime_ns,
            )
            if node.kind == Kind.SYMLINK:
                new = with_changes(new, mode=LINK_MODE)
            self._replace_entry(scope, node, new, forget_mtime=changes.mtime_ns is not None, relist=True)
        return self.attrs.attr(node)

    def kill_suidgid(self, node: Node, caller: Caller) -> None:
        """Clear ``node``'s set-user-ID and set-group-ID bits if a write or ``O_TRUNC`` by ``caller`` would make the
        kernel clear them (a caller other than root; the mount takes uid 0 for CAP_FSETID) and the kernel left
        that to the mount (``FileSystem.kills_suidgid``).  Without those bits, only a check of the entry's mode."""
        entry = node.entry
        if caller.uid == 0 or node.kind != Kind.FILE or entry is None or not needs_kill(entry.mode):
            return
        self.setattr(node.ino, SetAttr(kill_suidgid=True), None, caller)
        self.state.invalidations.put(("attrs", node.ino))  # the kernel's copy of the mode, as a setattr's reply would

    def _replace_entry(self, scope: Scope, node: Node, new: Entry, *, forget_mtime: bool = False, relist: bool = False) -> None:
        """Stage ``new`` as ``node``'s entry (unless the node is detached) and keep it as fresh, ctime now.

        The caller holds ``scope.mutex``.  ``forget_mtime``: drop the node's own
        mtime, so the entry's counts (utimens may set it backwards); ``relist``:
        update the entry in the parent's cached listing too.
        """
        names = node.names or (node.path,)
        if node.detached:
            pass
        elif node.kind == Kind.DIR:
            self.state.stage(scope, [(node.path + "/", new)])
        elif held_here(self.state, scope, node):  # never staged: the file has one name, nobody else knows it
            self.state.stage(scope, [(node.path, new)])
        else:  # under every name the file has now, one transaction (another mount may have linked it)
            new, names = stage_file_change(self.state, scope, node, new)
        with self.table.lock:
            self.scopes.local_change(scope)
            node.entry, node.fetched, node.gen = new, self.state.now(), scope.gen
            node.ctime_ns = time.time_ns()
            if forget_mtime:
                node.mtime_ns = 0
            for name in names if relist else ():
                parent = self.table.by_key((scope.key, os.path.dirname(name))) if name else None
                if parent is not None:
                    self.tree.listing_put(parent, os.path.basename(name).encode("utf-8", "surrogateescape"), Child(CHILD[node.kind], new))

    def _truncate(self, node: Node, size: int) -> None:
        if node.kind == Kind.DIR:
            raise FsError(errno.EISDIR)
        if node.kind != Kind.FILE or not stat.S_ISREG(self.attrs.attr(node).mode):
            raise FsError(errno.EINVAL)
        if size < 0:
            raise FsError(errno.EINVAL)
        self.saver.truncate(node, size)

    def _xattr_node(self, ino: int) -> Node:
        node = self.state.node(ino)
        if node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK) or (node.kind == Kind.DIR and not node.path):
            raise FsError(errno.ENOTSUP, "no extended attributes here")
        return node

    @op("getxattr")
    def getxattr(self, ino: int, name: bytes) -> bytes:
        """The value of ``user.<key>``; ENOATTR if absent or outside ``user.``."""
        if not name.startswith(b"user."):
            raise FsError(ENOATTR)
        node = self.state.node(ino)
        if node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
            raise FsError(ENOATTR)
        self.tree.revalidate(node)
        key = name[5:].decode("utf-8", "surrogateescape")
        for k, v in node.entry.metadata if node.entry is not None else ():
            if k == key:
                return v.encode("utf-8")
        raise FsError(ENOATTR)

    @op("listxattr")
    def listxattr(self, ino: int) -> list[bytes]:
        """The names of ``ino``'s extended attributes (``user.`` ones only)."""
        node = self.state.node(ino)
        if node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
            return []
        self.tree.revalidate(node)
        return [b"user." + k.encode("utf-8") for k, _v in (node.entry.metadata if node.entry is not None else ())]

    @op("setxattr")
    def setxattr(self, ino: int, name: bytes, value: bytes) -> None:
        """Set ``user.<key>`` (staged at once); ENOTSUP outside ``user.``, EINVAL for non-UTF-8."""
        if not name.startswith(b"user.") or len(name) == 5:
            raise FsError(errno.ENOTSUP, "only user.* extended attributes are supported")
        try:
            key, text = name[5:].decode("utf-8"), value.decode("utf-8")
        except UnicodeDecodeError:
            raise FsError(errno.EINVAL, "extended attribute names and values must be UTF-8 (they are S3 metadata)") from None
        self._set_metadata(ino, key, text)

    @op("removexattr")
    def removexattr(self, ino: int, name: bytes) -> None:
        """Remove ``user.<key>`` (staged at once); ENOATTR if absent."""
        if not name.startswith(b"user."):
            raise FsError(ENOATTR)
        self._set_metadata(ino, name[5:].decode("utf-8", "surrogateescape"), None)

    def _set_metadata(self, ino: int, key: str, value: str | None) -> None:
        node = self._xattr_node(ino)
        scope = self.scopes.writable(node.scope)
        self.state.io()
        self.tree.revalidate(node)
        with scope.mutex:
            base = node.entry
            if node.kind == Kind.DIR and base is None:
                base = Entry("", 0, "", self.state.started_ns, "", (), DIR_MODE)
            assert base is not None
            meta = dict(base.metadata)
            if value is None:
                if key not in meta:
                    raise FsError(ENOATTR)
                del meta[key]
            else:
                meta[key] = value
            self._replace_entry(scope, node, with_changes(base, metadata=tuple(sorted(meta.items()))))
