"""The inode table: which kernel inode number stands for which node, and how long it lives.

Every name the kernel has looked up (or received through ``readdir``, ``create``,
``mkdir``...) is a :class:`Node` with a fresh inode number; numbers are never
reused within one mount.  A node is keyed by what it stands for — the virtual
root, a repository directory, a control file, or a path inside one mounted ref
(a :class:`~lakemount.fuse.scope.Scope`) — so a second lookup of the same name
finds the same inode.  A node lives while the kernel remembers it (its lookup
count) or while it has open handles or unsaved data; ``forget`` and ``release``
drop it afterwards.  Renames re-key nodes (the kernel keeps the inode), unlinks
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
    from lakemount.fuse.scope import Scope
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
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards creating ``dirty``

    @property
    def is_dir_like(self) -> bool:
        return self.kind in (Kind.ROOT, Kind.REPO, Kind.CONTROL_DIR, Kind.DIR)

    @property
    def live(self) -> bool:
        return self.lookups > 0 or self.opens > 0 or self.dirty is not None


class InodeTable:
    """Inode number <-> node, and key -> inode number; thread-safe (one short lock, no I/O under it)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._nodes: dict[int, Node] = {}
        self._by_key: dict[Hashable, Node] = {}
        self._next = ROOT_INODE + 1
        # Live nodes per scope key, so the head poller visits scopes, not inodes.
        self.per_scope: Counter[Hashable] = Counter()

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
        """Make ``node`` unreachable by key (unlinked, replaced, or changed type remotely)."""
        with self.lock:
            if self._by_key.get(node.key) is node:
                del self._by_key[node.key]
            node.detached = True
            self._drop_if_dead(node)

    def rekey(self, node: Node, key: Hashable, path: str) -> None:
        """Give ``node`` a new key and path (a rename); whatever held the new key is detached."""
        with self.lock:
            if self._by_key.get(node.key) is node:
                del self._by_key[node.key]
            old = self._by_key.get(key)
            if old is not None and old is not node:
                old.detached = True
                self._drop_if_dead(old)
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
        if self._nodes.get(node.ino) is node:
            del self._nodes[node.ino]
            if node.scope is not None:
                self.per_scope[node.scope.key] -= 1
                if self.per_scope[node.scope.key] <= 0:
                    del self.per_scope[node.scope.key]
        if self._by_key.get(node.key) is node:
            del self._by_key[node.key]

    def nodes(self) -> list[Node]:
        with self.lock:
            return list(self._nodes.values())

    def under(self, scope_key: Hashable, path: str) -> Iterator[Node]:
        """Reachable nodes of one scope at ``path`` or below it (a snapshot, for renames).

        Detached nodes (unlinked, replaced) are not "below" anything any more:
        a rename must not bring them back under the new name.
        """
        prefix = path + "/" if path else ""
        with self.lock:
            nodes = [n for n in self._by_key.values() if n.scope is not None and n.scope.key == scope_key]
        for node in nodes:
            if node.kind in (Kind.DIR, Kind.FILE, Kind.SYMLINK) and (not path or node.path == path or node.path.startswith(prefix)):
                yield node

    def __len__(self) -> int:
        return len(self._nodes)
