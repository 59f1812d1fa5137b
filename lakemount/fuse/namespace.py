"""Namespace changes: create, mknod, mkdir, symlink, link, unlink, rmdir, rename (and readlink).

Each change is staged at once on the branch as one ``catalog.apply``
transaction, under the scope's mutex so this mount's read-check-write
sequences on one branch do not interleave.  A rename of a directory moves
every entry below it in that one transaction and copies no data; a rename
across refs is EXDEV (``mv`` then copies).  An empty directory persists as a
marker key ``dir/``; removing the last entry of an implicit directory stages a
marker for it in the same transaction, so directories never vanish under the
user.  A marker is needed only while its directory is empty (as Hadoop S3A
keeps them): making something inside a directory deletes the directory's
marker in the same transaction, unless the marker records what an implicit
directory would not show (a mode other than 0755, another owner, xattrs), so
object-store readers (pyarrow datasets, fsspec) never meet a ``dir/`` object
beside the files of a non-empty directory.  A new child of a set-group-ID
directory takes its group.  The cached listings and the inode table follow
each change (renames re-key nodes, removals detach them).

A hard link (:mod:`lakemount.catalog.links`) is one more entry identical to the
file's others, all of which list every name: a link, an unlink or a rename of
one name rewrites every name's entry in the same transaction, and a rename of
a directory rewrites the names of each group with a name inside it.
"""

from __future__ import annotations

import errno
import itertools
import mimetypes
import os
import stat
import time
from typing import Final

from lakemount.catalog.catalog import MAX_KEY_BYTES
from lakemount.catalog.links import LINK_MAX, group_of, members, new_group_id, with_group
from lakemount.catalog.model import DIR_MODE, LINK_MODE, Entry, prefix_end
from lakemount.errors import PreconditionFailed
from lakemount.fuse import control
from lakemount.fuse.attributes import MKNOD_TYPES, Attributes
from lakemount.fuse.errno import FsError
from lakemount.fuse.handles import Handles
from lakemount.fuse.inodes import Kind, Node
from lakemount.fuse.listing import Child, ChildKind, Listing, has_children, lookup_child
from lakemount.fuse.scope import Scope, Scopes
from lakemount.fuse.state import NAME_MAX, MountState, decode_name, join_path, key_len, op
from lakemount.fuse.tree import CHILD, Tree
from lakemount.fuse.values import Attr, Caller, Opened

RENAME_NOREPLACE: Final = 1
LINK_TRIES: Final = 8  # a link's compare-and-set tried again after another writer changed the file's names
# A directory of at most this many keys is renamed per key (one staging transaction, as cheap as a move record),
# not as a move record: every read of the branch walks each pending record's layer until the commit, and a Spark
# job's committer renames one small directory per task (issue 36: 300 of them made its writes 7x slower).
PER_KEY_RENAME: Final = 64
CONTENT_TYPES_KEPT: Final = 1024  # content types remembered by extension (then forgotten at once)
_content_types: dict[str, str] = {}


def content_type(path: str) -> str:
    """The content type a new file at ``path`` gets: ``mimetypes.guess_type``'s, remembered by the name's extensions
    (``guess_type`` reads only them, after a scheme such as ``data:``), so a copy of many files asks it once per
    extension: it was a tenth of a small file's create on the request loop (stop 56)."""
    if ":" in path:  # a scheme (``data:``...) is guess_type's own case
        return mimetypes.guess_type(path)[0] or ""
    stem = path.rpartition("/")[2].lstrip(".")  # leading dots make no extension (``.bashrc``), as ``splitext`` says
    dot = stem.find(".")
    key = stem[dot:] if dot >= 0 else ""
    found = _content_types.get(key)
    if found is None:
        found = mimetypes.guess_type("x" + key)[0] or ""
        if len(_content_types) >= CONTENT_TYPES_KEPT:
            _content_types.clear()
        _content_types[key] = found
    return found


class Namespace:
    """The namespace operations of one mount."""

    def __init__(self, state: MountState, scopes: Scopes, tree: Tree, attrs: Attributes, handles: Handles) -> None:
        self.state = state
        self.scopes = scopes
        self.tree = tree
        self.attrs = attrs
        self.handles = handles
        self.table = state.table
        self.catalog = state.catalog

    # ------------------------------------------------------------------ helpers
    def _dir_for_change(self, parent_ino: int, name: bytes, *, existing: bool = False) -> tuple[Node, Scope, str]:
        """(parent, its writable scope, the path) of ``name`` in ``parent_ino``, to create (``existing``: to
        remove or move away).  A branch's ``.lakefs`` is taken for a new name (EEXIST) and stays where it is
        (EPERM: ``mv .lakefs x`` and ``rm -r .lakefs`` are not permitted; the name does exist); a new name in
        ``.lakefs`` is EPERM, or EROFS in a read-only ref's (a commit written to a tag's ``.lakefs``)."""
        parent = self.state.node(parent_ino)
        if parent.kind in (Kind.ROOT, Kind.REPO):
            raise FsError(errno.EPERM, "repositories and refs are not created through the mount")
        if parent.kind == Kind.CONTROL_DIR:
            ref = parent.scope
            if ref is not None and not ref.writable:  # ``echo msg > v1/.lakefs/commit`` on a tag: the ref is read-only
                raise FsError(errno.EROFS, f"{ref.repo}/{ref.name} is read-only (not a branch): its .lakefs has "
                                           f"{' and '.join(control.READONLY_REF_FILES)} only")
            raise FsError(errno.EPERM, ".lakefs holds control files only")
        if parent.kind != Kind.DIR:
            raise FsError(errno.ENOTDIR)
        scope = self.scopes.writable(parent.scope)
        if len(name) > NAME_MAX:
            raise FsError(errno.ENAMETOOLONG)
        if name in (b".", b"..") or b"/" in name or not name:
            raise FsError(errno.EINVAL)
        path = join_path(parent.path, decode_name(name))
        if key_len(path) + 1 > MAX_KEY_BYTES:
            raise FsError(errno.ENAMETOOLONG)
        if not parent.path and name == control.CONTROL_DIR.encode():
            if existing:
                raise FsError(errno.EPERM, ".lakefs holds the control files: it cannot be moved or removed")
            raise FsError(errno.EEXIST, ".lakefs is reserved for control files")
        if existing:  # what the catalog says of names to remove or move must include the creates held (held.py)
            self.state.settle(scope)
        return parent, scope, path

    def _inherit(self, parent: Node, caller: Caller, mode: int) -> tuple[int, int]:
        """(gid, mode) of a new child: a set-group-ID directory passes on its group (and, to dirs, the bit)."""
        pattr = self.attrs.attr(parent)
        if pattr.mode & stat.S_ISGID:
            return pattr.gid, (mode | stat.S_ISGID) if stat.S_ISDIR(mode) else mode
        return caller.gid, mode

    def _keep_parent(self, scope: Scope, parent: Node, removed: frozenset[bytes]) -> list[tuple[str, Entry | None]]:
        """A marker for ``parent`` if it is implicit and would be left empty by removing ``removed``."""
        if not parent.path:
            return []
        if self.catalog.exists(scope.repo, scope.resolved, parent.path + "/"):
            return []
        if has_children(self.catalog, scope.repo, scope.resolved, parent.path, ignore=removed):
            return []
        return [(parent.path + "/", Entry("", 0, "", time.time_ns(), "", (), DIR_MODE))]

    def _plain_marker(self, entry: Entry) -> bool:
        """True if ``entry`` is a marker that records nothing an implicit directory does not show."""
        return (
            entry.is_dir
            and entry.mode & 0o7777 == 0o755
            and not entry.metadata
            and self.attrs.owner(entry.uid, entry.gid) == self.attrs.owner(0, 0)
        )

    def _drop_marker(self, scope: Scope, parent: Node) -> list[tuple[str, Entry | None]]:
        """The deletion of ``parent``'s marker, staged with a change that puts something inside it.

        Only a marker this mount believes is there (its cached entry) is looked
        up, so a create in an implicit directory costs no extra read; a marker
        that another writer made meanwhile stays, as before.
        """
        cached = parent.entry
        if not parent.path or cached is None or not self._plain_marker(cached):
            return []
        wb = self.state.writeback
        if wb is not None and wb.pending_marker(scope, parent.path) == cached:
            return [(parent.path + "/", None)]  # this mount's journaled mkdir: the catalog does not have it yet
        current = self.catalog.get_optional(scope.repo, scope.resolved, parent.path + "/")
        if current is None or not self._plain_marker(current):
            return []
        return [(parent.path + "/", None)]

    def _create_in_memory(self, parent: Node, scope: Scope, name: bytes, *, held: bool = False) -> bool:
        """True if creating ``name`` in ``parent`` reads and writes nothing but this node's journal (or memory,
        ``held``): the mount journals locally, memory knows whether the name exists, and no marker needs a look."""
        cached = parent.entry
        return ((held or self.state.local_journal()) and self.state.has_empty_data(scope.repo) and self.tree.knows(parent, name)
                and not (parent.path and cached is not None and self._plain_marker(cached)))

    def _marker_dropped(self, parent: Node) -> None:
        """``parent`` is implicit now (its marker was deleted): its node and its parent's listing say so."""
        parent.entry = None
        grand = self.state.parent_of(parent)
        if grand is not None:
            self.tree.listing_put(grand, os.path.basename(parent.path).encode("utf-8", "surrogateescape"), Child(ChildKind.DIR, None))

    @staticmethod
    def _marker_kept(parent: Node, kept: list[tuple[str, Entry | None]]) -> None:
        """``parent`` has the marker ``_keep_parent`` staged: its node knows, so a new child deletes it again."""
        for _key, marker in kept:
            parent.entry = marker

    def _regroup(self, scope: Scope, moved: list[tuple[str, Entry]], old_path: str, new_path: str) -> dict[str, Entry]:
        """The entries of every link group with a name among ``moved`` (a directory renamed from ``old_path``
        to ``new_path``), under their new names, with those names in them: outside names included."""
        here = dict(moved)

        def lookup(name: str) -> Entry | None:
            return here[name] if name in here else self.catalog.get_optional(scope.repo, scope.resolved, name)

        def renamed(name: str) -> str:
            return new_path + name[len(old_path) :] if name in here else name

        out: dict[str, Entry] = {}
        seen: set[Entry] = set()
        for key, entry in moved:
            group = group_of(entry)
            if group is None or entry in seen:
                continue
            seen.add(entry)
            names = members(entry, key, lookup)
            if len(names) < 2:
                continue
            shared = with_group(entry, group.gid, [renamed(n) for n in names])
            out.update((renamed(n), shared) for n in names)
        return out

    def _move_directory(
        self, scope: Scope, old_parent: Node, new_parent: Node, old_path: str, new_path: str, *, dst_marker: bool
    ) -> bool:
        """Stage the rename of directory ``old_path`` as one move record (constant time, whatever it holds):
        first a marker for an old parent it would leave empty, then the move; False if the branch takes no
        more move records (the caller stages per key).  Neither step alone loses anything: a marker of a
        directory that still holds the moved one is only redundant."""
        kept: list[tuple[str, Entry | None]] = []
        if (old_parent is not new_parent and old_parent.path
                and not self.catalog.exists(scope.repo, scope.resolved, old_parent.path + "/")
                and not self._others_in(scope, old_parent.path, old_path)):
            kept = [(old_parent.path + "/", Entry("", 0, "", time.time_ns(), "", (), DIR_MODE))]
        if dst_marker:
            # Below the move, so the moved directory's own marker (if it has one) shows through it.
            kept.append((new_path + "/", None))
        if kept:
            self.state.stage(scope, kept)
        kept = [(k, e) for k, e in kept if e is not None]
        if not self.state.move(scope, old_path, new_path):
            return False
        with self.table.lock:
            self._marker_kept(old_parent, kept)
        return True

    def _others_in(self, scope: Scope, parent: str, child: str) -> bool:
        """Whether directory ``parent`` holds anything besides its marker and directory ``child``
        (two scans that stop at their first record, around ``child``'s keys)."""
        lo = (parent + "/").encode("utf-8", "surrogateescape")
        mid = (child + "/").encode("utf-8", "surrogateescape")
        for start, stop in ((lo + b"\x00", mid), (prefix_end(mid), prefix_end(lo))):
            for key, _value in self.catalog.scan_records(scope.repo, scope.resolved, start or b"", stop):
                if key != mid[:-1]:
                    return True
        return False

    def _moved(
        self, scope: Scope, src: Node, dst: Node | None, old_parent: Node, old_name: bytes, new_parent: Node,
        new_name: bytes, old_path: str, new_path: str,
    ) -> None:
        """This mount's nodes and listings after a directory rename staged as a move record: every node
        under the old name rekeyed, and a linked file's names (its entry's group) renamed as reads now see them."""
        with self.table.lock:
            self.scopes.local_change(scope)
            if dst is not None:
                self.table.detach(dst)
            linked: dict[int, Node] = {}
            for name, node in list(self.table.under(scope.key, old_path)):
                rest = name[len(old_path) :]
                self.table.rekey(node, (scope.key, new_path + rest), new_path + rest, old_path=name)
                if node.names:
                    linked[id(node)] = node
            for node in linked.values():
                if node.entry is not None:
                    node.entry = with_group(node.entry, node.group, node.names)
                    self._relist_names(scope, node, node.names)
            tree = self.tree
            tree.listing_put(old_parent, old_name, None)
            tree.listing_put(new_parent, new_name, Child(CHILD[src.kind], src.entry))
            tree.names_changed(old_parent)
            tree.names_changed(new_parent)
            src.ctime_ns = time.time_ns()

    def _subtree(self, scope: Scope, path: str, limit: int | None = None) -> list[tuple[str, Entry]]:
        """Every entry at or below directory ``path`` (keys as paths, the marker included); the first ``limit``."""
        listed = ((item.path, item.entry) for item in self.catalog.list(scope.repo, scope.resolved, path + "/") if item.entry is not None)
        return list(itertools.islice(listed, limit))

    # ------------------------------------------------------------------ creation
    @op("mkdir")
    def mkdir(self, parent_ino: int, name: bytes, mode: int, caller: Caller) -> Attr:
        """Make a directory (staged as its marker); EEXIST if the name is taken."""
        parent, scope, path = self._dir_for_change(parent_ino, name)
        self.state.io()
        with scope.mutex:
            if self.tree.find(parent, name) is not None:
                raise FsError(errno.EEXIST, path)
            gid, mode = self._inherit(parent, caller, stat.S_IFDIR | (mode & 0o7777))
            marker = Entry("", 0, "", time.time_ns(), "", (), mode, caller.uid, gid)
            dropped = self._drop_marker(scope, parent)
            # Journaled with write-back, as a create is (it read nothing of the branch but the name, above): a
            # `cp -r` does not wait at each directory for the files before it to be uploaded (stop 54).
            self.state.stage(scope, [(path + "/", marker), *dropped], journal=True)
            with self.table.lock:
                self.scopes.local_change(scope)
                if dropped:
                    self._marker_dropped(parent)
                node = self.table.get_or_add((scope.key, path), kind=Kind.DIR, scope=scope, path=path)
                node.entry, node.fetched, node.gen = marker, self.state.now(), scope.gen
                node.listing = Listing({}, [], node.fetched, scope.gen)
                self.tree.listing_put(parent, name, Child(ChildKind.DIR, marker))
                self.tree.names_changed(parent)
                self.table.remember(node)
        return self.attrs.attr(node)

    @op("mknod")
    def mknod(self, parent_ino: int, name: bytes, mode: int, rdev: int, caller: Caller) -> Attr:
        """Regular files, FIFOs, sockets and device nodes, as entries with that mode.

        A device node's number is kept in the entry's ``target`` (decimal), as a
        symlink's target is; the kernel already refused callers without
        CAP_MKNOD, and the mount is ``nodev``, so nothing opens the device.
        Other file types are EINVAL, as in mknod(2).
        """
        fmt = stat.S_IFMT(mode) or stat.S_IFREG
        if fmt not in MKNOD_TYPES:
            raise FsError(errno.EINVAL, "not a file type mknod makes")
        device = str(rdev) if fmt in (stat.S_IFCHR, stat.S_IFBLK) else ""
        node = self._create_entry(parent_ino, name, fmt | (mode & 0o7777), caller, exclusive=True, target=device)
        self.table.remember(node)
        return self.attrs.attr(node)

    def _create_entry(
        self, parent_ino: int, name: bytes, mode: int, caller: Caller, *, exclusive: bool, target: str = "", hold: bool = False,
        made: list[Node] | None = None,
    ) -> Node:
        """Create the entry of ``name``; ``hold``: a regular file opened by its create, whose first close stages
        it (``MountState.hold``), so the create itself stages nothing unless it drops a directory marker.  The node
        is appended to ``made`` if this call made it (not if the name existed)."""
        parent, scope, path = self._dir_for_change(parent_ino, name)
        opened = hold
        hold = hold and self.state.holds_creates()
        if not self._create_in_memory(parent, scope, name, held=hold):
            self.state.io()
        with self.state.holding(scope.mutex):
            existing = self.tree.find(parent, name)
            if existing is not None:
                if exclusive:
                    raise FsError(errno.EEXIST, path)
                if existing.kind == Kind.DIR:
                    raise FsError(errno.EISDIR, path)
                return existing
            gid, mode = self._inherit(parent, caller, mode)
            empty = self.state.empty_data(scope.repo)
            kind = content_type(path) if stat.S_ISREG(mode) else ""
            entry = Entry(empty.address, 0, empty.etag, time.time_ns(), kind, (), mode, caller.uid, gid, target)
            dropped = self._drop_marker(scope, parent)
            if hold:
                self.state.hold(scope, path, entry, dropped)
            else:
                self.state.stage(scope, [(path, entry), *dropped], journal=True, opened=opened)
            with self.table.lock:
                self.scopes.local_change(scope, within=None if dropped else parent.path)
                if dropped:
                    self._marker_dropped(parent)
                node = self.table.get_or_add((scope.key, path), kind=Kind.FILE, scope=scope, path=path)
                if node.kind != Kind.FILE:  # a stale node of another kind held the key
                    self.table.detach(node)
                    node = self.table.get_or_add((scope.key, path), kind=Kind.FILE, scope=scope, path=path)
                node.entry, node.fetched, node.gen = entry, self.state.now(), scope.gen
                self.tree.listing_put(parent, name, Child(ChildKind.FILE, entry))
                self.tree.names_changed(parent)
                # The kernel's negative entry of the name, if it had one, is the created file's now: nothing to
                # invalidate later, and no place taken among the NEGATIVES_KEPT (a copy of more than that many
                # names within head_ttl otherwise scanned them all at every lookup, and granted none: stop 57).
                scope.negatives.pop(path, None)
            if made is not None:
                made.append(node)
            return node

    @op("create")
    def create(self, parent_ino: int, name: bytes, mode: int, flags: int, caller: Caller) -> tuple[Opened, Attr]:
        """Create (or, without O_EXCL, open) a regular file and open it."""
        made: list[Node] = []
        node = self._create_entry(parent_ino, name, stat.S_IFREG | (mode & 0o7777), caller, exclusive=bool(flags & os.O_EXCL),
                                  hold=True, made=made)
        # O_TRUNC truncates a file that existed (POSIX): one this create made is empty, its times just set, so its
        # open makes no temp file now (the first write does) and marks no time again (stop 57).
        opened = self.handles.open_file(node, flags & ~os.O_TRUNC if made else flags, caller, fresh=bool(made))
        self.table.remember(node)
        return opened, self.attrs.attr(node)

    @op("symlink")
    def symlink(self, parent_ino: int, name: bytes, target: bytes, caller: Caller) -> Attr:
        """Make a symlink to ``target`` (UTF-8, else EINVAL)."""
        parent, scope, path = self._dir_for_change(parent_ino, name)
        try:
            target_text = target.decode("utf-8")
        except UnicodeDecodeError:
            raise FsError(errno.EINVAL, "symlink targets must be UTF-8") from None
        if len(target) > MAX_KEY_BYTES:
            raise FsError(errno.ENAMETOOLONG)
        self.state.io()
        with scope.mutex:
            if self.tree.find(parent, name) is not None:
                raise FsError(errno.EEXIST, path)
            gid, _mode = self._inherit(parent, caller, LINK_MODE)
            entry = Entry("", len(target), "", time.time_ns(), "", (), LINK_MODE, caller.uid, gid, target_text)
            dropped = self._drop_marker(scope, parent)
            self.state.stage(scope, [(path, entry), *dropped])
            with self.table.lock:
                self.scopes.local_change(scope)
                if dropped:
                    self._marker_dropped(parent)
                node = self.table.get_or_add((scope.key, path), kind=Kind.SYMLINK, scope=scope, path=path)
                node.entry, node.fetched, node.gen = entry, self.state.now(), scope.gen
                self.tree.listing_put(parent, name, Child(ChildKind.SYMLINK, entry))
                self.tree.names_changed(parent)
                self.table.remember(node)
        return self.attrs.attr(node)

    @op("readlink")
    def readlink(self, ino: int) -> bytes:
        """A symlink's target; EINVAL for anything else."""
        node = self.state.node(ino)
        if node.kind != Kind.SYMLINK:
            raise FsError(errno.EINVAL)
        self.tree.revalidate(node)
        assert node.entry is not None
        return node.entry.target.encode("utf-8", "surrogateescape")

    @op("link")
    def link(self, ino: int, new_parent_ino: int, new_name: bytes) -> Attr:
        """Give the file ``ino`` one more name (a hard link): every name's entry, the new one's included, is
        staged as the group's shared entry in one transaction.

        EPERM for a directory or a control file (as link(2) for directories); EXDEV to another ref or
        repository; EROFS on a read-only ref; EEXIST if the name is taken; ENOENT if the file has no name
        left; EMLINK past :data:`~lakemount.catalog.links.LINK_MAX` names.
        """
        node = self.state.node(ino)
        new_parent = self.state.node(new_parent_ino)
        if new_parent.kind == Kind.DIR and new_name and new_name not in (b".", b"..") and b"/" not in new_name and len(new_name) <= NAME_MAX:
            # A taken name comes first, as Linux's linkat(2) finds it before it asks the file system.
            self.state.io()
            if self.tree.find(new_parent, new_name) is not None:
                raise FsError(errno.EEXIST, decode_name(new_name))
        if node.kind not in (Kind.FILE, Kind.SYMLINK):
            raise FsError(errno.EPERM, "only files have hard links")
        if new_parent.kind == Kind.DIR and new_parent.scope is not node.scope:
            raise FsError(errno.EXDEV, "a hard link across repositories or refs")
        parent, scope, path = self._dir_for_change(new_parent_ino, new_name)
        self.state.io()
        with scope.mutex:
            if node.detached:
                raise FsError(errno.ENOENT, "the file has no name left")
            self.tree.revalidate(node)
            if self.tree.find(parent, new_name) is not None:
                raise FsError(errno.EEXIST, path)
            for _attempt in range(LINK_TRIES):
                names = node.names or (node.path,)
                if len(names) >= LINK_MAX:
                    raise FsError(errno.EMLINK, f"a file has at most {LINK_MAX} names")
                assert node.entry is not None
                gid = node.group or new_group_id()
                entry = with_group(node.entry, gid, (*names, path))
                group = group_of(entry)
                assert group is not None
                dropped = self._drop_marker(scope, parent)
                # A compare-and-set: another mount linking (or writing) the same file meanwhile changed the
                # group's entry, and staging over it would drop that mount's names from the group.
                expected = [*((name, node.entry) for name in names), (path, None)]
                try:
                    self.state.stage_if(scope, [*((name, entry) for name in group.names), *dropped], expected)
                    break
                except PreconditionFailed:
                    if not self._refetch_names(scope, node):
                        raise FsError(errno.EEXIST, path) from None  # the file is as read: the new name was taken
            else:
                raise FsError(errno.EAGAIN, f"{node.path}: its names kept changing elsewhere")
            with self.table.lock:
                self.scopes.local_change(scope)
                if dropped:
                    self._marker_dropped(parent)
                node.entry, node.fetched, node.gen = entry, self.state.now(), scope.gen
                self.table.set_names(node, gid, group.names)
                self._relist_names(scope, node, group.names)
                self.tree.names_changed(parent)
                node.ctime_ns = time.time_ns()
                self.table.remember(node)
        return self.attrs.attr(node)

    def _refetch_names(self, scope: Scope, node: Node, path: str = "") -> bool:
        """Read file ``node``'s entry and names from the branch again (a compare-and-set of its group lost to
        another writer); True if they changed, False if they are as the node had them.

        The file is found under ``path`` (if given), its own path, or else any name its group listed that
        still holds the file (the group's entry, or the same file without the group: its last name); ENOENT
        if it has no name left."""
        assert node.entry is not None
        plain = node.entry._replace(link="")
        found: tuple[str, Entry] | None = None
        for name in dict.fromkeys(n for n in (path, node.path, *node.names) if n):
            child = lookup_child(self.catalog, scope.repo, scope.resolved, name)
            if child is None or child.entry is None or child.kind == ChildKind.DIR:
                continue
            group = group_of(child.entry)
            if name in (path, node.path) or (group is not None and group.gid == node.group) or child.entry._replace(link="") == plain:
                found = name, child.entry
                break
        if found is None:
            raise FsError(errno.ENOENT, path or node.path)
        name, entry = found
        names = self.tree.names_of(scope, name, entry) or (name,)
        if entry == node.entry and names == (node.names or (node.path,)):
            return False
        group = group_of(entry)
        with self.table.lock:
            node.entry, node.fetched, node.gen = entry, self.state.now(), scope.gen
            self.table.set_names(node, group.gid if group is not None and len(names) > 1 else "", names)
        return True

    def _relist_names(self, scope: Scope, node: Node, names: tuple[str, ...]) -> None:
        """Every cached listing that holds one of ``names`` shows ``node``'s entry (caller holds the table lock)."""
        child = Child(CHILD[node.kind], node.entry)
        for name in names:
            parent = self.table.by_key((scope.key, os.path.dirname(name)))
            if parent is not None:
                self.tree.listing_put(parent, os.path.basename(name).encode("utf-8", "surrogateescape"), child)

    @staticmethod
    def _without(node: Node, name: str) -> tuple[Entry | None, tuple[str, ...]]:
        """The group's entry and names once ``name`` is taken from ``node``'s group ((None, ()) without a group)."""
        if not node.names or node.entry is None:
            return None, ()
        rest = tuple(n for n in node.names if n != name)
        return with_group(node.entry, node.group, rest), rest

    def _leave_group(self, scope: Scope, node: Node, name: str, entry: Entry | None, rest: tuple[str, ...]) -> None:
        """``node`` lost the name ``name`` and keeps ``rest`` (caller holds the table lock); no names left: detached."""
        if entry is None or not rest:
            self.table.detach(node)
            return
        node.entry, node.fetched, node.gen = entry, self.state.now(), scope.gen
        self.table.set_names(node, node.group, rest)
        self._relist_names(scope, node, rest)
        node.ctime_ns = time.time_ns()

    # ------------------------------------------------------------------ removal
    @op("unlink")
    def unlink(self, parent_ino: int, name: bytes) -> None:
        """Remove a non-directory; open handles keep working on the detached node."""
        self._remove(parent_ino, name, directory=False)

    @op("rmdir")
    def rmdir(self, parent_ino: int, name: bytes) -> None:
        """Remove an empty directory (its marker, if it has one); ENOTEMPTY otherwise."""
        self._remove(parent_ino, name, directory=True)

    def _remove(self, parent_ino: int, name: bytes, *, directory: bool) -> None:
        """unlink (``directory`` false: EISDIR on a directory) or rmdir (ENOTDIR, ENOTEMPTY); ENOENT if absent.

        Stages the deletion, and a marker for the parent if it would vanish, then detaches the node.
        """
        parent, scope, path = self._dir_for_change(parent_ino, name, existing=True)
        self.state.io()
        with scope.mutex:
            node = self.tree.find(parent, name)
            if node is None:
                raise FsError(errno.ENOENT, path)
            changes: list[tuple[str, Entry | None]] = []
            if directory:
                if node.kind != Kind.DIR:
                    raise FsError(errno.ENOTDIR, path)
                if has_children(self.catalog, scope.repo, scope.resolved, path):
                    raise FsError(errno.ENOTEMPTY, path)
                key = path + "/"
                if self.catalog.exists(scope.repo, scope.resolved, key):
                    changes.append((key, None))
            else:
                if node.kind == Kind.DIR:
                    raise FsError(errno.EISDIR, path)
                key = path
                changes.append((key, None))
            kept = self._keep_parent(scope, parent, frozenset({key.encode("utf-8", "surrogateescape")}))
            others, rest = self._unlink_names(scope, node, path, [*changes, *kept])
            with self.table.lock:
                self.scopes.local_change(scope)
                self._marker_kept(parent, kept)
                self._leave_group(scope, node, path, others, rest)
                self.tree.listing_put(parent, name, None)
                self.tree.names_changed(parent)

    def _unlink_names(
        self, scope: Scope, node: Node, path: str, changes: list[tuple[str, Entry | None]],
    ) -> tuple[Entry | None, tuple[str, ...]]:
        """Stage ``changes`` (``path``'s deletion and its parent's marker) with the group's entry on the names
        ``node`` keeps; returns that entry and those names ((None, ()) for a file of one name).

        A name of a group is taken out by compare-and-set on every name's entry as read, as :meth:`link`
        adds one: another mount linking, unlinking or renaming a name of the file meanwhile would otherwise
        lose its change, or keep a name in the group that the other took out.  The loser reads the names
        again and retries (ENOENT if ``path`` is no longer one of them; EAGAIN after LINK_TRIES)."""
        for _attempt in range(LINK_TRIES):
            if not node.names:
                if node.path != path:
                    raise FsError(errno.ENOENT, path)  # another mount took this name out of the group
                if changes:
                    self.state.stage(scope, changes)
                return None, ()
            others, rest = self._without(node, path)
            try:
                self.state.stage_if(scope, [*changes, *((name, others) for name in rest)],
                                    [(name, node.entry) for name in node.names])
                return others, rest
            except PreconditionFailed:
                self._refetch_names(scope, node, path)
                if path not in (node.names or (node.path,)):
                    raise FsError(errno.ENOENT, path) from None
        raise FsError(errno.EAGAIN, f"{path}: the file's names kept changing elsewhere")

    # ------------------------------------------------------------------ rename
    def _renamed_file(
        self, src: Node, dst: Node | None, old_path: str, new_path: str,
    ) -> tuple[dict[str, Entry | None], list[tuple[str, Entry | None]], Entry | None, tuple[str, ...]]:
        """The changes that rename file ``src`` from ``old_path`` to ``new_path`` (over ``dst``, if any), the
        entries they expect (every name of a group either file is in, as read), and the entry and names
        ``dst``'s group keeps without ``new_path``."""
        assert src.entry is not None
        changes: dict[str, Entry | None] = {}
        expected: list[tuple[str, Entry | None]] = []
        dst_entry: Entry | None = None
        dst_rest: tuple[str, ...] = ()
        if dst is not None:
            changes[new_path] = None
            dst_entry, dst_rest = self._without(dst, new_path)
            changes.update((name, dst_entry) for name in dst_rest)
            expected += [(name, dst.entry) for name in dst.names]
        changes[old_path] = None
        entry = src.entry
        if not src.names and group_of(entry) is not None:
            # The entry lists a group but the mount found no other name of it: read while another mount changed
            # the group (its other names' entries no longer matched the one read here). Staged plainly, the
            # stale entry would take the renamed name out of the group: a compare-and-set on it reads again.
            expected.append((old_path, entry))
        if src.names:
            expected += [(name, src.entry) for name in src.names]
            entry = with_group(entry, src.group, (*(n for n in src.names if n != old_path), new_path))
            group = group_of(entry)
            changes.update((name, entry) for name in (group.names if group is not None else ()))
        changes[new_path] = entry
        return changes, expected, dst_entry, dst_rest

    @op("rename")
    def rename(self, old_parent_ino: int, old_name: bytes, new_parent_ino: int, new_name: bytes, flags: int = 0) -> None:
        """Rename a file or a whole directory as one staging transaction (no data is copied).

        ``flags``: 1 = RENAME_NOREPLACE (EEXIST if the target exists); RENAME_EXCHANGE is not supported (EINVAL).
        """
        old_parent = self.state.node(old_parent_ino)
        new_parent = self.state.node(new_parent_ino)
        if old_parent.scope is not new_parent.scope and old_parent.kind == Kind.DIR and new_parent.kind == Kind.DIR:
            # mv(1) falls back to copy + unlink on EXDEV: that is how data crosses branches.
            raise FsError(errno.EXDEV, "rename across repositories or refs")
        if flags & ~RENAME_NOREPLACE:
            raise FsError(errno.EINVAL, "only RENAME_NOREPLACE is supported")
        old_parent, scope, old_path = self._dir_for_change(old_parent_ino, old_name, existing=True)
        new_parent, new_scope, new_path = self._dir_for_change(new_parent_ino, new_name)
        if new_scope is not scope:
            raise FsError(errno.EXDEV, "rename across repositories or refs")
        self.state.io()
        tree = self.tree
        with scope.mutex:
            src = tree.find(old_parent, old_name)
            if src is None:
                raise FsError(errno.ENOENT, old_path)
            if old_path == new_path:
                return
            dst = tree.find(new_parent, new_name)
            # The checks in the order Linux's rename(2) makes them.
            if dst is not None and flags & RENAME_NOREPLACE:
                raise FsError(errno.EEXIST, new_path)
            if new_path.startswith(old_path + "/"):
                raise FsError(errno.EINVAL, "cannot move a directory into itself")
            if old_path.startswith(new_path + "/"):
                raise FsError(errno.ENOTEMPTY, "cannot replace a directory by something inside it")
            changes: dict[str, Entry | None] = {}
            expected: list[tuple[str, Entry | None]] = []
            regrouped: dict[str, Entry] = {}
            if src.kind == Kind.DIR:
                if dst is not None:
                    if dst.kind != Kind.DIR:
                        raise FsError(errno.ENOTDIR, new_path)
                    if has_children(self.catalog, scope.repo, scope.resolved, new_path):
                        raise FsError(errno.ENOTEMPTY, new_path)
                    changes[new_path + "/"] = None
                self.state.drain(scope)  # a file journaled under ``old_path`` is listed, and moves
                moved = self._subtree(scope, old_path, PER_KEY_RENAME + 1)
                if len(moved) > PER_KEY_RENAME:
                    if self._move_directory(scope, old_parent, new_parent, old_path, new_path, dst_marker=new_path + "/" in changes):
                        self._moved(scope, src, dst, old_parent, old_name, new_parent, new_name, old_path, new_path)
                        return
                    moved = self._subtree(scope, old_path)
                for key, _entry in moved:
                    changes[key] = None
                for key, entry in moved:
                    changes[new_path + key[len(old_path) :]] = entry
                regrouped = self._regroup(scope, moved, old_path, new_path)
                changes.update(regrouped)
            else:
                if dst is not None:
                    if dst is src:
                        return  # two names of one file: rename(2) does nothing
                    if dst.kind == Kind.DIR:
                        raise FsError(errno.EISDIR, new_path)
                if src.entry is None:
                    raise FsError(errno.ENOENT, old_path)
                renamed, expected, dst_entry, dst_rest = self._renamed_file(src, dst, old_path, new_path)
                changes.update(renamed)
            dropped: list[tuple[str, Entry | None]] = []
            kept: list[tuple[str, Entry | None]] = []
            if old_parent is not new_parent:
                removed = frozenset(k.encode("utf-8", "surrogateescape") for k, e in changes.items() if e is None)
                kept = self._keep_parent(scope, old_parent, removed)
                changes.update(kept)
                dropped = self._drop_marker(scope, new_parent)
                changes.update(dropped)
            for _attempt in range(LINK_TRIES):
                if not expected:
                    self.state.stage(scope, list(changes.items()))
                    break
                # A linked name (or one renamed over) is staged by compare-and-set, as link and unlink are.
                try:
                    self.state.stage_if(scope, list(changes.items()), expected)
                    break
                except PreconditionFailed:
                    self._refetch_names(scope, src, old_path)
                    if old_path not in (src.names or (src.path,)):
                        raise FsError(errno.ENOENT, old_path) from None
                    if dst is not None and dst.names:
                        try:
                            self._refetch_names(scope, dst, new_path)
                        except FsError:
                            dst = None  # the file renamed over has no name left: nothing to take out of a group
                        if dst is not None and new_path not in (dst.names or (dst.path,)):
                            dst = None
                    renamed, expected, dst_entry, dst_rest = self._renamed_file(src, dst, old_path, new_path)
                    changes = {**renamed, **dict(kept), **dict(dropped)}
            else:
                raise FsError(errno.EAGAIN, f"{old_path}: the file's names kept changing elsewhere")
            with self.table.lock:
                self.scopes.local_change(scope)
                if dropped:
                    self._marker_dropped(new_parent)
                self._marker_kept(old_parent, kept)
                if dst is not None:
                    if src.kind == Kind.DIR:
                        self.table.detach(dst)
                    else:
                        self._leave_group(scope, dst, new_path, dst_entry, dst_rest)
                for name, node in list(self.table.under(scope.key, old_path)):
                    rest = name[len(old_path) :]
                    self.table.rekey(node, (scope.key, new_path + rest), new_path + rest, old_path=name)
                for moved_entry in {id(e): e for e in regrouped.values()}.values():
                    moved_group = group_of(moved_entry)
                    grouped = self.table.by_group(scope.key, moved_group.gid) if moved_group is not None else None
                    if moved_group is not None and grouped is not None:
                        grouped.entry = moved_entry
                        # Its names outside the directory too: a cached listing keeping the old entry (its
                        # names) would give the node its old names back at the next lookup.
                        self._relist_names(scope, grouped, moved_group.names)
                if src.kind != Kind.DIR and src.names:
                    src.entry = changes[new_path]
                    self._relist_names(scope, src, src.names)
                src_child = Child(CHILD[src.kind], src.entry)
                tree.listing_put(old_parent, old_name, None)
                tree.listing_put(new_parent, new_name, src_child)
                tree.names_changed(old_parent)
                tree.names_changed(new_parent)
                src.ctime_ns = time.time_ns()
