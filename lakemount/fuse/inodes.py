"""The inode table: which kernel inode number stands for which node, and how long it lives.

Every name the kernel has looked up (or received through ``readdir``, ``create``,
``mkdir``...) is a :class:`Node` with a fresh inode number; numbers are never
reused within one mount.  A node is keyed by what it stands for — the virtual
root, a repository directory, a control file, or a path inside one mounted ref
(a :class:`~lakemount.fuse.mounted.Scope`) — so a second lookup of the same name
finds the same inode.  A file of several names (a hard-link group,
:mod:`lakemount.catalog.links`) is one node under every name of the group the
mount knows: ``path`` is one of them, ``names`` all of them, and the group id
finds the node from any name.  A node lives while the kernel remembers it (its lookup
count) or while it has open handles or unsaved data; ``forget`` and ``release``
drop it afterwards (a directory with a cached listing stays, up to ``LISTED_KEPT`` of
them, so a lookup after the kernel forgot it still answers from that listing).  Renames re-key nodes (the kernel keeps the inode), unlinks
detach them (open handles keep working on the detached node).
"""

from __future__ import annotations

import enum
import threading
from collections import Counter
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NewType

from lakemount.catalog.model import Entry

if TYPE_CHECKING:
    from lakemount.fuse.listing import Listing
    from lakemount.fuse.mounted import Scope
    from lakemount.fuse.writes import DirtyFile

Inode = NewType("Inode", int)
ROOT_INODE: Final = Inode(1)


class Kind(enum.Enum):
    """What a node is; a node's kind never changes (a path that changes type gets a new inode)."""

    ROOT = "root"  # the mount root listing repositories (root mode)
    REPO = "repo"  # /<repo>: lists branches and tags, resolves any ref expression
    CONTROL_DIR = "control_dir"  # .lakefs
    CONTROL_FILE = "control_file"  # .lakefs/commit, .lakefs/stats, ...
    DIR = "dir"  # a directory inside a mounted ref (path "" is the ref's root)
    FILE = "file"  # a regular file (or fifo/socket) inside a mounted ref
    SYMLINK = "symlink"


@dataclass(eq=False, slots=True)
class Node:
    """One inode.  ``path`` is relative to the scope root ("" for the root itself, no slashes at the ends)."""

    ino: Inode
    kind: Kind
    key: Hashable
    scope: Scope | None = None
    path: str = ""
    repo: str = ""  # for REPO nodes and control nodes of a scope
    control: str = ""  # for CONTROL_FILE nodes: the file's name; for CONTROL_DIR: "" (scope) or "mount"
    lookups: int = 0
    opens: int = 0
    writers: int = 0  # open handles that may write
    pass_pending: int = 0  # opens that chose passthrough and have no backing id yet (handles.py: others wait)
    entry: Entry | None = None  # file/symlink entry, or the directory marker (None: implicit directory)
    fetched: float = 0.0  # monotonic time ``entry`` was read from the catalog
    gen: int = 0  # the scope's generation when ``entry`` was read
    listing: Listing | None = None  # directory children, cached
    dirty: DirtyFile | None = None  # unsaved content of a file open for writing
    detached: bool = False  # unlinked or replaced: no longer reachable by name
    atime_ns: int = 0  # kept in memory only: atime and ctime are not versioned
    ctime_ns: int = 0
    mtime_ns: int = 0  # a directory's mtime after a local change of its names, in memory only like ctime
    page_identity: bytes | None = None  # content identity the kernel's page cache was filled from
    group: str = ""  # a hard-link group's id ("" for a file of one name)
    names: tuple[str, ...] = ()  # every name of the group (sorted, ``path`` among them); () without a group
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards creating ``dirty``

    @property
    def is_dir_like(self) -> bool:
        return self.kind in (Kind.ROOT, Kind.REPO, Kind.CONTROL_DIR, Kind.DIR)

    @property
    def live(self) -> bool:
        return self.lookups > 0 or self.opens > 0 or self.dirty is not None


def _named(key: Hashable) -> bool:
    """True for a key that names a path of a scope: ``(scope key, path)``."""
    return isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], tuple) and isinstance(key[1], str)


class _Keys(dict[Hashable, "Node"]):
    """The table's key -> node map, with each scope's names counted under every directory above them, so
    the names at or below a path are found without a walk of every node: a Spark job renames one small
    directory per task, and a walk of the whole table per rename made its commit quadratic (issue 36)."""

    def __init__(self) -> None:
        super().__init__()
        self.below: dict[tuple[Hashable, str], dict[str, int]] = {}  # (scope, dir) -> child -> names at or under it

    def __setitem__(self, key: Hashable, node: Node) -> None:
        if _named(key) and key not in self:
            self._count(key, 1)
        super().__setitem__(key, node)

    def __delitem__(self, key: Hashable) -> None:
        super().__delitem__(key)
        if _named(key):
            self._count(key, -1)

    def _count(self, key: Hashable, step: int) -> None:
        assert isinstance(key, tuple)
        scope: Hashable = key[0]
        child: str = key[1]
        while child:
            parent = child.rpartition("/")[0]
            kids = self.below.setdefault((scope, parent), {})
            n = kids.get(child, 0) + step
            if n:
                kids[child] = n
            else:
                del kids[child]
                if not kids:
                    del self.below[(scope, parent)]
            child = parent

    def names_under(self, scope: Hashable, path: str) -> list[str]:
        """The names of ``scope`` the map holds at ``path`` or below it."""
        out = [path] if (scope, path) in self else []
        dirs = [path]
        while dirs:
            for child in self.below.get((scope, dirs.pop()), ()):
                if (scope, child) in self:
                    out.append(child)
                dirs.append(child)
        return out


LISTED_KEPT: Final = 1024  # directories the kernel forgot whose nodes stay for their cached listings


class InodeTable:
    """Inode number <-> node, and key -> inode number; thread-safe (one short lock, no I/O under it)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._nodes: dict[int, Node] = {}
        self._by_key = _Keys()
        self._by_group: dict[tuple[Hashable, str], Node] = {}  # (scope key, group id) -> the group's node
        self._next = ROOT_INODE + 1
        # Live nodes per scope key, so the head poller visits scopes, not inodes.
        self.per_scope: Counter[Hashable] = Counter()
        self._kept: dict[int, Node] = {}  # directories the kernel forgot, kept for their listings (oldest first)

    def add_root(self, node: Node) -> Node:
        with self.lock:
            self._nodes[node.ino] = node
            self._by_key[node.key] = node
            if node.scope is not None:
                self.per_scope[node.scope.key] += 1
            return node

    def get(self, ino: int) -> Node | None:
        return self._nodes.get(ino)

    def by_key(self, key: Hashable) -> Node | None:
        return self._by_key.get(key)

    def get_or_add(self, key: Hashable, **fields: object) -> Node:
        """The node for ``key``, created (with a new inode number) from ``fields`` if absent."""
        with self.lock:
            node = self._by_key.get(key)
            if node is None:
                node = Node(Inode(self._next), key=key, **fields)  # type: ignore[arg-type]
                self._next += 1
                self._nodes[node.ino] = node
                self._by_key[key] = node
                if node.scope is not None:
                    self.per_scope[node.scope.key] += 1
            return node

    def detach(self, node: Node) -> None:
        """Make ``node`` unreachable by any of its names (unlinked, replaced, or changed type remotely)."""
        with self.lock:
            self._unmap(node)
            node.detached = True
            self._drop_if_dead(node)

    def _unmap(self, node: Node) -> None:
        """Drop every key and the group that lead to ``node`` (caller holds the lock)."""
        if self._by_key.get(node.key) is node:
            del self._by_key[node.key]
        if node.scope is not None:
            for name in node.names:
                key = (node.scope.key, name)
                if self._by_key.get(key) is node:
                    del self._by_key[key]
            group = (node.scope.key, node.group)
            if node.group and self._by_group.get(group) is node:
                del self._by_group[group]

    def by_group(self, scope_key: Hashable, gid: str) -> Node | None:
        """The node of link group ``gid`` in a scope, if the mount knows one."""
        return self._by_group.get((scope_key, gid))

    def set_names(self, node: Node, gid: str, names: tuple[str, ...]) -> None:
        """``node`` is the file of link group ``gid`` under ``names`` (sorted; its ``path`` among them, else
        the first becomes its path): each name finds it, and a name it no longer has does not.  A group of
        one name (or ``gid`` "") is an ordinary node again."""
        scope = node.scope
        assert scope is not None
        with self.lock:
            if len(names) == 1 and node.path != names[0]:
                self.rekey(node, (scope.key, names[0]), names[0])  # its one name left
            if len(names) < 2:
                gid, names = "", ()
            for name in node.names:
                if name not in names and name != node.path:
                    key = (scope.key, name)
                    if self._by_key.get(key) is node:
                        del self._by_key[key]
            if node.group and self._by_group.get((scope.key, node.group)) is node and node.group != gid:
                del self._by_group[(scope.key, node.group)]
            if names and node.path not in names:
                self.rekey(node, (scope.key, names[0]), names[0])
            node.group, node.names = gid, names
            for name in names:
                key = (scope.key, name)
                held = self._by_key.get(key)
                if held is not None and held is not node:
                    self._unmap(held)
                    held.detached = True
                    self._drop_if_dead(held)
                self._by_key[key] = node
            if gid:
                self._by_group[(scope.key, gid)] = node

    def rekey(self, node: Node, key: Hashable, path: str, old_path: str | None = None) -> None:
        """Move ``node`` from name ``old_path`` (default its ``path``) to ``key``/``path`` (a rename); whatever
        held the new key is detached."""
        with self.lock:
            old_key = node.key if old_path is None or node.scope is None else (node.scope.key, old_path)
            if self._by_key.get(old_key) is node:
                del self._by_key[old_key]
            old = self._by_key.get(key)
            if old is not None and old is not node:
                self._unmap(old)
                old.detached = True
                self._drop_if_dead(old)
            if old_path is not None and node.names:
                node.names = tuple(sorted({*(n for n in node.names if n != old_path), path}))
            if old_path is None or old_path == node.path:
                node.key = key
                node.path = path
            self._by_key[key] = node

    def remember(self, node: Node, n: int = 1) -> None:
        with self.lock:
            node.lookups += n

    def forget(self, ino: int, n: int) -> None:
        with self.lock:
            node = self._nodes.get(ino)
            if node is None or node.ino == ROOT_INODE:
                return
            node.lookups = max(0, node.lookups - n)
            self._drop_if_dead(node)

    def release(self, node: Node) -> None:
        """One open handle of ``node`` closed."""
        with self.lock:
            node.opens = max(0, node.opens - 1)
            self._drop_if_dead(node)

    def drop_if_dead(self, node: Node) -> None:
        with self.lock:
            self._drop_if_dead(node)

    def _drop_if_dead(self, node: Node) -> None:
        if node.live or node.ino == ROOT_INODE:
            return
        if node.kind is Kind.DIR and node.listing is not None and not node.detached and self._nodes.get(node.ino) is node:
            # Kept with its listing: the kernel forgets a directory whose entry a change notice invalidated
            # (one in its parent elsewhere), and a new node would look up each name created in it again.
            if node.ino not in self._kept:
                self._kept[node.ino] = node
                if len(self._kept) > LISTED_KEPT:
                    old = self._kept.pop(next(iter(self._kept)))
                    if not old.live:
                        self._drop(old)
            return
        self._drop(node)

    def _drop(self, node: Node) -> None:
        """Forget ``node`` (caller holds the lock)."""
        self._kept.pop(node.ino, None)
        if self._nodes.get(node.ino) is node:
            del self._nodes[node.ino]
            if node.scope is not None:
                self.per_scope[node.scope.key] -= 1
                if self.per_scope[node.scope.key] <= 0:
                    del self.per_scope[node.scope.key]
        self._unmap(node)

    def nodes(self) -> list[Node]:
        with self.lock:
            return list(self._nodes.values())

    def under(self, scope_key: Hashable, path: str) -> Iterator[tuple[str, Node]]:
        """(name, node) of every name of one scope at ``path`` or below it (a snapshot, for renames): a node
        of several names comes once per name there.

        Detached nodes (unlinked, replaced) are not "below" anything any more:
        a rename must not bring them back under the new name.
        """
        with self.lock:
            named = [(name, self._by_key[(scope_key, name)]) for name in self._by_key.names_under(scope_key, path)]
        for name, node in named:
            if node.scope is not None and node.scope.key == scope_key and node.kind in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
                yield name, node

    def __len__(self) -> int:
        return len(self._nodes)
