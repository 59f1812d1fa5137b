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

Writes.  Namespace changes (create, mkdir, unlink, rmdir, rename, symlink,
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
anything, and the adapter retries it in a worker thread.  Kernel cache
invalidations are queued on ``invalidations`` (never issued from inside a
request handler, where they can deadlock).

Thread safety.  ``InodeTable.lock`` guards in-memory structures and is never
held during I/O; each writable scope's ``mutex`` serializes this mount's
namespace changes to that branch; each node's ``lock`` serializes creation of
its temp file.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import errno
import functools
import logging
import mimetypes
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, ParamSpec, TypeVar

from lakemount.cache.disk import DiskCache
from lakemount.cache.ram import RamCache
from lakemount.catalog.catalog import MAX_KEY_BYTES, Catalog, DataInfo
from lakemount.errors import InvalidArgument, LakeMountError, NotFound
from lakemount.fuse import control
from lakemount.fuse.errno import ENOATTR, FsError, errno_of
from lakemount.fuse.inodes import ROOT_INODE, InodeTable, Kind, Node
from lakemount.fuse.listing import Child, ChildKind, Listing, has_children, list_dir, lookup_child
from lakemount.fuse.reader import BlockReader, ObjectRef, ReadState
from lakemount.fuse.scope import Scope, ScopeKey, resolve_scope, unchanged
from lakemount.fuse.stats import Metrics
from lakemount.fuse.values import Attr, Caller, DirItem, MountOptions, Opened, SetAttr, StatFs
from lakemount.fuse.writes import DirtyFile
from lakemount.graveler.graveler import prefix_end
from lakemount.graveler.model import DIR_MODE, LINK_MODE, Entry, Repository, decode_value
from lakemount.graveler.ports import BlockAdapter
from lakemount.graveler.refexpr import ResolvedRef, View

log = logging.getLogger(__name__)

NAME_MAX: Final = 255
READDIR_BATCH: Final = 64
SCAN_AHEAD: Final = 16  # files prefetched ahead of a sequential scan of a directory
MAX_SCANS: Final = 1024  # directories whose scan position is remembered
# Any constant > 0 works for statfs: the store has no fixed capacity.  These
# say "1 PiB, a billion inodes, all free" so df and space checks are happy.
PUSHED_POLL: Final = 30.0  # seconds between safety polls of branch heads while change notices arrive
STATFS_BLOCK: Final = 4096
STATFS_BLOCKS: Final = (1 << 50) // STATFS_BLOCK
STATFS_FILES: Final = 1 << 30

P = ParamSpec("P")
T = TypeVar("T")


__all__ = ["Attr", "Caller", "DirItem", "FileSystem", "MountOptions", "NeedsThread", "Opened", "SetAttr", "StatFs"]


class NeedsThread(Exception):
    """Raised under :meth:`FileSystem.nonblocking` by an operation that must do I/O; nothing changed."""


@dataclass(eq=False)
class FileHandle:
    fh: int
    node: Node
    writable: bool
    obj: ObjectRef | None = None
    read_state: ReadState = dataclasses.field(default_factory=ReadState)
    content: bytes | None = None  # control files: a snapshot taken at open
    uid: int = 0  # who opened it (a control write's committer)


@dataclass(eq=False)
class DirHandle:
    fh: int
    node: Node
    items: list[tuple[bytes, Callable[[], Node]]]


def _op(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Time an operation into the metrics, with its errno on failure."""

    def deco(fn: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            self = args[0]
            t0 = time.perf_counter()
            err = 0
            try:
                return fn(*args, **kwargs)
            except NeedsThread:
                err = -1
                raise
            except BaseException as exc:
                err = errno_of(exc) or errno.EIO
                raise
            finally:
                if err >= 0:
                    self.metrics.observe(name, time.perf_counter() - t0, err)  # type: ignore[attr-defined]

        return wrapper

    return deco


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def _key_len(path: str) -> int:
    return len(path.encode("utf-8", "surrogateescape"))


class FileSystem:
    """Versioned repositories as a POSIX tree; see the module docstring for the contract."""

    def __init__(
        self,
        catalog: Catalog,
        adapter: BlockAdapter,
        ram: RamCache,
        disk: DiskCache | None,
        options: MountOptions,
        *,
        cache_stats: Callable[[], dict[str, dict[str, int]]] | None = None,
    ) -> None:
        self.catalog = catalog
        self.options = options
        self.metrics = Metrics()
        self.reader = BlockReader(adapter, ram, disk, self.metrics)
        self.table = InodeTable()
        self.invalidations: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.control = control.ControlFiles(catalog, self.render_stats)
        self._cache_stats = cache_stats
        self._tls = threading.local()
        self._scopes: dict[ScopeKey, Scope] = {}
        self._repos: dict[str, Repository] = {}
        self._empty: dict[str, DataInfo] = {}
        self._handles: dict[int, FileHandle] = {}
        self._dir_handles: dict[int, DirHandle] = {}
        # Directory inode -> (listing position of the file opened last, position prefetched up to).
        self._scans: dict[int, tuple[int, int]] = {}
        self._scan_pool: ThreadPoolExecutor | None = None  # lists directories a scan needs, in the background
        self._scan_listing: set[int] = set()  # directory inodes being listed for a scan
        self._next_fh = 1
        self._started_ns = time.time_ns()
        # Set by the runner to the change listener's "connected" flag (PostgreSQL LISTEN/NOTIFY).
        self.push_live: Callable[[], bool] = lambda: False
        self._polled = 0.0
        os.makedirs(options.spool_dir, exist_ok=True)
        if options.ref is None:
            self.table.add_root(Node(ROOT_INODE, Kind.ROOT, key=("root",), lookups=1))
        else:
            repo, name = options.ref
            scope = self._scope(repo, name)
            self.table.add_root(Node(ROOT_INODE, Kind.DIR, key=(scope.key, ""), scope=scope, lookups=1))

    # ================================================================== plumbing
    @contextlib.contextmanager
    def nonblocking(self) -> Iterator[None]:
        """Run operations that may not block: one that needs I/O raises ``NeedsThread`` instead."""
        self._tls.nb = True
        try:
            yield
        finally:
            self._tls.nb = False

    def _io(self) -> None:
        if getattr(self._tls, "nb", False):
            raise NeedsThread

    def _node(self, ino: int) -> Node:
        node = self.table.get(ino)
        if node is None:
            raise FsError(errno.ESTALE, f"unknown inode {ino}")
        return node

    def _new_fh(self) -> int:
        with self.table.lock:
            fh = self._next_fh
            self._next_fh += 1
            return fh

    def _repo(self, name: str) -> Repository:
        repo = self._repos.get(name)
        if repo is None:
            self._io()
            repo = self._repos[name] = self.catalog.repository(name)
        return repo

    def _empty_data(self, repo: str) -> DataInfo:
        info = self._empty.get(repo)
        if info is None:
            self._io()
            info = self._empty[repo] = self.catalog.write_data(repo, b"")
        return info

    def _now(self) -> float:
        return time.monotonic()

    # ================================================================== scopes
    def _scope(self, repo: str, name: str) -> Scope:
        """The scope for ``repo``/``name``, resolved (again, if due); NotFound if it does not resolve."""
        key = (repo, name)
        scope = self._scopes.get(key)
        if scope is None:
            self._io()
            resolved, signature, stable = resolve_scope(self.catalog, repo, name)
            return self._register_scope(repo, name, resolved, signature, stable)
        self._check_scope(scope)
        return scope

    def _register_scope(
        self, repo: str, name: str, resolved: ResolvedRef, signature: tuple[str, ...], stable: bool
    ) -> Scope:
        with self.table.lock:
            scope = self._scopes.get((repo, name))
            if scope is None:
                scope = Scope(repo, name, resolved, signature, stable, self._now())
                self._scopes[scope.key] = scope
            elif scope.signature != signature:
                self._scope_changed(scope, resolved, signature)
            return scope

    def _check_scope(self, scope: Scope, *, force: bool = False) -> None:
        """Re-resolve a non-stable scope if ``head_ttl`` passed; a change drops every cache of it."""
        if scope.stable or (not force and self._now() - scope.checked < self.options.head_ttl):
            return
        self._io()
        checked = self._now()
        if unchanged(self.catalog, scope):
            with self.table.lock:
                scope.checked = checked
            return
        try:
            resolved, signature, _stable = resolve_scope(self.catalog, scope.repo, scope.name)
        except NotFound:
            with self.table.lock:
                scope.checked = checked
                self._scopes.pop(scope.key, None)
                self._invalidate_scope(scope)
            raise
        with self.table.lock:
            scope.checked = checked
            if signature != scope.signature:
                self._scope_changed(scope, resolved, signature)

    def _scope_changed(self, scope: Scope, resolved: ResolvedRef, signature: tuple[str, ...]) -> None:
        scope.resolved = resolved
        scope.signature = signature
        scope.gen += 1
        self.metrics.add("scope_changes")
        self._invalidate_scope(scope)

    def _invalidate_scope(self, scope: Scope) -> None:
        """Queue kernel invalidations for every inode of ``scope`` (caller holds the table lock)."""
        for node in self.table.nodes():
            if node.scope is not scope or node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
                continue
            node.listing = None
            self.invalidations.put(("inode", node.ino))
            if node.path:
                parent = self._parent_of(node)
                if parent is not None:
                    self.invalidations.put(("entry", parent.ino, os.path.basename(node.path).encode("utf-8", "surrogateescape")))

    def poll_heads(self) -> None:
        """Re-check every non-stable scope the kernel still knows (called every ``head_ttl``).

        While ``push_live()`` says change notices arrive (see ``refs_changed``),
        the poll runs only every ``PUSHED_POLL`` seconds, as a safety net: an
        idle mount then costs the ref store next to nothing.
        """
        now = self._now()
        if self.push_live() and now - self._polled < PUSHED_POLL:
            return
        self._polled = now
        with self.table.lock:
            live = [s for key, s in self._scopes.items() if not s.stable and self.table.per_scope.get(key, 0) > 0]
        for scope in live:
            try:
                self._check_scope(scope)
            except LakeMountError as exc:
                log.debug("head check of %s/%s: %s", scope.repo, scope.name, exc)

    def refs_changed(self, changes: Sequence[Any] | None) -> None:
        """Act on change notices of other processes (``None``: anything may have changed).

        ``changes`` are ``lakemount.refs.notify.Change`` values (``kind``, ``repo``, ``branch``).

        A moved head re-resolves every non-stable scope of its repository now
        (expressions such as ``main~1`` follow it) instead of after ``head_ttl``;
        staged writes elsewhere make the branch's cached entries and listings
        stale.  Runs on the listener's thread; errors are logged, the
        ``head_ttl`` poll stays the fallback.
        """
        with self.table.lock:
            live = [s for s in self._scopes.values() if not s.stable]
        if changes is None:
            todo = [(s, True) for s in live]
        else:
            heads = {c.repo for c in changes if c.kind == "head"}
            staged = {(c.repo, c.branch) for c in changes if c.kind == "staging"}
            todo = [(s, s.repo in heads) for s in live if s.repo in heads or s.key in staged]
        for scope, moved in todo:
            self.metrics.add("change_notices")
            if not moved:
                with self.table.lock:
                    scope.gen += 1
                    self._invalidate_scope(scope)
                continue
            try:
                self._check_scope(scope, force=True)
            except LakeMountError as exc:
                log.debug("head check of %s/%s after a notice: %s", scope.repo, scope.name, exc)

    def _writable(self, scope: Scope | None) -> Scope:
        if scope is None:
            raise FsError(errno.EPERM, "not inside a ref")
        if not scope.writable:
            raise FsError(errno.EROFS, f"{scope.repo}/{scope.name} is read-only (not a branch)")
        return scope

    def _local_change(self, scope: Scope) -> None:
        """Note a change this mount made (caller holds the table lock): in-flight reads must not cache."""
        scope.version += 1

    # ================================================================== attributes
    def _owner(self, uid: int, gid: int) -> tuple[int, int]:
        # Entries written by the gateway or CLI carry owner 0.  A mount run by
        # an ordinary user shows them as that user's, or nothing would be writable.
        if self.options.uid != 0:
            return (self.options.uid if uid == 0 else uid, self.options.gid if gid == 0 else gid)
        return uid, gid

    def _timeout(self, node: Node) -> float:
        scope = node.scope
        if node.kind == Kind.CONTROL_FILE:
            return 0.0
        if scope is None or scope.writable:
            return self.options.head_ttl
        # Committed refs are immutable; a moving expression (main@, main~1)
        # is re-checked by ``poll_heads``, which invalidates on change.
        return self.options.immutable_ttl

    def attr(self, node: Node) -> Attr:
        """The attributes of ``node`` from what is cached (no I/O)."""
        timeout = self._timeout(node)
        started = self._started_ns
        o_uid, o_gid = self.options.uid, self.options.gid
        if node.kind in (Kind.ROOT, Kind.REPO, Kind.CONTROL_DIR):
            return Attr(node.ino, stat.S_IFDIR | 0o755, 2, o_uid, o_gid, 0, started, started, started, timeout)
        if node.kind == Kind.CONTROL_FILE:
            perm = 0o644 if node.control in control.WRITABLE else 0o444
            now = time.time_ns()
            return Attr(node.ino, stat.S_IFREG | perm, 1, o_uid, o_gid, 0, now, now, now, timeout)
        entry = node.entry
        if node.kind == Kind.DIR:
            if entry is None:
                mode, uid, gid, mtime = stat.S_IFDIR | 0o755, 0, 0, started
            else:
                perm = entry.mode & 0o7777 if entry.is_dir else 0o755
                mode, uid, gid, mtime = stat.S_IFDIR | perm, entry.uid, entry.gid, entry.mtime_ns or started
            mtime = max(mtime, node.mtime_ns)
            uid, gid = self._owner(uid, gid)
            return Attr(node.ino, mode, self._dir_nlink(node), uid, gid, 0, node.atime_ns or mtime, mtime, max(node.ctime_ns, mtime), timeout)
        assert entry is not None
        size = entry.size
        rdev = 0
        if node.kind == Kind.SYMLINK:
            mode = LINK_MODE
            size = len(entry.target.encode("utf-8", "surrogateescape"))
        else:
            fmt = stat.S_IFMT(entry.mode)
            mode = entry.mode if fmt in _MKNOD_TYPES else stat.S_IFREG | (entry.mode & 0o7777 or 0o644)
            if fmt in (stat.S_IFCHR, stat.S_IFBLK):
                rdev = int(entry.target) if entry.target.isdigit() else 0
            dirty = node.dirty
            if dirty is not None:
                size = dirty.size
        uid, gid = self._owner(entry.uid, entry.gid)
        mtime = entry.mtime_ns
        nlink = 0 if node.detached else 1  # an unlinked file still open (fstat) has no names left
        return Attr(node.ino, mode, nlink, uid, gid, size, node.atime_ns or mtime, mtime, max(node.ctime_ns, mtime), timeout, rdev=rdev)

    def _dir_nlink(self, node: Node) -> int:
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

    # ================================================================== freshness
    def _fresh(self, node: Node) -> bool:
        scope = node.scope
        if scope is None or node.dirty is not None or node.detached:
            return True
        if node.gen != scope.gen:
            return False
        return not scope.writable or self._now() - node.fetched < self.options.head_ttl

    def _listing_fresh(self, node: Node) -> Listing | None:
        listing = node.listing
        scope = node.scope
        if listing is None or scope is None or listing.gen != scope.gen:
            return None
        if scope.writable and self._now() - listing.fetched >= self.options.head_ttl:
            return None
        return listing

    def _parent_of(self, node: Node) -> Node | None:
        if node.scope is None:
            return None
        if not node.path:
            if self.options.ref is not None:
                return None
            return self.table.by_key(("repo", node.scope.repo))
        return self.table.by_key((node.scope.key, os.path.dirname(node.path)))

    def _revalidate(self, node: Node) -> None:
        """Refresh a path node's entry if stale; FsError(ENOENT) if its path is gone (or changed type)."""
        scope = node.scope
        if scope is None:
            return
        self._check_scope(scope)
        if self._fresh(node):
            return
        if not node.path:
            with self.table.lock:
                node.gen, node.fetched = scope.gen, self._now()
            return
        self._io()
        gen, version, fetched = scope.gen, scope.version, self._now()
        child = lookup_child(self.catalog, scope.repo, scope.resolved, node.path)
        kind = _KIND[child.kind] if child is not None else None
        with self.table.lock:
            if child is None or kind != node.kind:
                if node.dirty is None and node.opens == 0:
                    self.table.detach(node)
                raise FsError(errno.ENOENT, node.path)
            if scope.version == version and gen == scope.gen and node.dirty is None:
                node.entry, node.gen, node.fetched = child.entry, gen, fetched

    def _bind(self, scope: Scope, path: str, child: Child, fetched: float, gen: int, version: int) -> Node:
        """The node for ``path`` in ``scope`` (new inode if unknown or of another kind), updated from ``child``."""
        kind = _KIND[child.kind]
        key = (scope.key, path)
        with self.table.lock:
            node = self.table.by_key(key)
            if node is not None and node.kind != kind:
                self.table.detach(node)
                node = None
            if node is None:
                node = self.table.get_or_add(key, kind=kind, scope=scope, path=path)
                node.entry = child.entry
                node.fetched = fetched if version == scope.version else 0.0
                node.gen = gen
            elif node.dirty is None and version == scope.version and gen == scope.gen and fetched >= node.fetched:
                node.entry, node.fetched, node.gen = child.entry, fetched, gen
            return node

    # ================================================================== lookup
    @_op("lookup")
    def lookup(self, parent_ino: int, name: bytes) -> Attr:
        """Find ``name`` in a directory and count one kernel reference to it."""
        node = self._lookup(self._node(parent_ino), name)
        self.table.remember(node)
        return self.attr(node)

    def _lookup(self, parent: Node, name: bytes) -> Node:
        if len(name) > NAME_MAX:
            raise FsError(errno.ENAMETOOLONG)
        if name == b".":
            return parent
        if name == b"..":
            return self._dotdot(parent)
        if parent.kind == Kind.ROOT:
            if name == control.CONTROL_DIR.encode():
                return self.table.get_or_add(("ctl", None), kind=Kind.CONTROL_DIR)
            repo = _decode_name(name)
            try:
                self._repo(repo)
            except NotFound:
                raise FsError(errno.ENOENT, repo) from None
            return self.table.get_or_add(("repo", repo), kind=Kind.REPO, repo=repo)
        if parent.kind == Kind.REPO:
            ref = _decode_name(name)
            try:
                ref_scope = self._scope(parent.repo, ref)
            except (NotFound, InvalidArgument):
                # ".git", "foo bar": not a ref, so nothing by that name
                raise FsError(errno.ENOENT, ref) from None
            return self._scope_root(ref_scope)
        if parent.kind == Kind.CONTROL_DIR:
            fname = _decode_name(name)
            if fname not in control.files_for(parent.scope, self._stats_here(parent)):
                raise FsError(errno.ENOENT, fname)
            key = ("ctl", parent.scope.key if parent.scope else None, fname)
            return self.table.get_or_add(key, kind=Kind.CONTROL_FILE, scope=parent.scope, control=fname)
        if parent.kind != Kind.DIR:
            raise FsError(errno.ENOTDIR)
        scope = parent.scope
        assert scope is not None
        if not parent.path and name == control.CONTROL_DIR.encode():
            return self.table.get_or_add(("ctl", scope.key), kind=Kind.CONTROL_DIR, scope=scope)
        node = self._find(parent, name)
        if node is None:
            raise FsError(errno.ENOENT, _decode_name(name))
        return node

    def _stats_here(self, ctl_dir: Node) -> bool:
        return ctl_dir.scope is None or (self.options.ref is not None and ctl_dir.scope.key == (self.options.ref[0], self.options.ref[1]))

    def _dotdot(self, node: Node) -> Node:
        root = self._node(ROOT_INODE)
        if node.kind in (Kind.ROOT, Kind.REPO):
            return root
        if node.kind == Kind.CONTROL_DIR:
            return self._scope_root(node.scope) if node.scope is not None else root
        return self._parent_of(node) or root

    def _scope_root(self, scope: Scope) -> Node:
        return self.table.get_or_add((scope.key, ""), kind=Kind.DIR, scope=scope, path="")

    def _find(self, parent: Node, name: bytes) -> Node | None:
        """The node named ``name`` in directory ``parent`` of a scope, or None (may do I/O)."""
        scope = parent.scope
        assert scope is not None
        self._check_scope(scope)
        path = _join(parent.path, _decode_name(name))
        if _key_len(path) + 1 > MAX_KEY_BYTES:
            raise FsError(errno.ENAMETOOLONG)
        existing = self.table.by_key((scope.key, path))
        if existing is not None and (existing.dirty is not None or self._fresh(existing)):
            return existing
        listing = self._listing_fresh(parent)
        if listing is not None:
            child = listing.children.get(name)
            fetched, gen, version = listing.fetched, listing.gen, scope.version
        else:
            self._io()
            gen, version, fetched = scope.gen, scope.version, self._now()
            child = lookup_child(self.catalog, scope.repo, scope.resolved, path)
        if child is None:
            if existing is not None and existing.opens == 0 and existing.dirty is None:
                self.table.detach(existing)
            return None
        return self._bind(scope, path, child, fetched, gen, version)

    @_op("forget")
    def forget(self, items: Sequence[tuple[int, int]]) -> None:
        for ino, n in items:
            self.table.forget(ino, n)

    @_op("getattr")
    def getattr(self, ino: int) -> Attr:
        node = self._node(ino)
        if node.kind in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
            try:
                self._revalidate(node)
            except FsError as exc:
                # Gone from the ref (deleted elsewhere): like an unlinked file, the
                # inode keeps its last attributes; lookups no longer find it.
                if exc.errno != errno.ENOENT:
                    raise
        return self.attr(node)

    # ================================================================== directories
    def _listing(self, node: Node) -> Listing:
        listing = self._listing_fresh(node)
        if listing is not None:
            return listing
        scope = node.scope
        assert scope is not None
        self._io()
        gen, version, fetched = scope.gen, scope.version, self._now()
        children, marker = list_dir(self.catalog, scope.repo, scope.resolved, node.path)
        if node.path and not children and marker is None:
            # Nothing under this path any more: the directory is gone.
            raise FsError(errno.ENOENT, node.path)
        listing = Listing(children, sorted(children), fetched, gen)
        with self.table.lock:
            if version == scope.version and gen == scope.gen:
                node.listing = listing
                if node.path:
                    node.entry, node.fetched, node.gen = marker, fetched, gen
        return listing

    @_op("opendir")
    def opendir(self, ino: int) -> int:
        node = self._node(ino)
        items: list[tuple[bytes, Callable[[], Node]]] = []
        if node.kind == Kind.ROOT:
            self._io()
            repos = sorted(r.name for r in self.catalog.graveler.list_repositories())
            items.append((control.CONTROL_DIR.encode(), lambda: self._lookup(node, control.CONTROL_DIR.encode())))
            for repo in repos:
                items.append((repo.encode(), functools.partial(self._repo_node, repo)))
        elif node.kind == Kind.REPO:
            self._io()
            g = self.catalog.graveler
            refs: dict[str, Callable[[], Node]] = {}
            for b in g.list_branches(node.repo):
                resolved = ResolvedRef(b.name, "branch", b.commit_id, View.FULL, b.name)
                sig = (b.commit_id, b.staging_token, *b.sealed_tokens)
                refs[b.name] = functools.partial(self._ref_node, node.repo, b.name, resolved, sig, False)
            for t in g.list_tags(node.repo):
                if t.name not in refs:
                    resolved = ResolvedRef(t.name, "tag", t.commit_id, View.COMMITTED, None)
                    refs[t.name] = functools.partial(self._ref_node, node.repo, t.name, resolved, (t.commit_id,), True)
            items = [(name.encode(), refs[name]) for name in sorted(refs)]
        elif node.kind == Kind.CONTROL_DIR:
            for fname in control.files_for(node.scope, self._stats_here(node)):
                items.append((fname.encode(), functools.partial(self._lookup, node, fname.encode())))
        elif node.kind == Kind.DIR:
            scope = node.scope
            assert scope is not None
            self._check_scope(scope)
            listing = self._listing(node)
            if not node.path:
                items.append((control.CONTROL_DIR.encode(), functools.partial(self._lookup, node, control.CONTROL_DIR.encode())))
            for child_name in listing.names:
                child = listing.children[child_name]
                items.append((child_name, functools.partial(self._listed_node, node, child_name, child, listing)))
        else:
            raise FsError(errno.ENOTDIR)
        fh = self._new_fh()
        with self.table.lock:
            node.opens += 1
            self._dir_handles[fh] = DirHandle(fh, node, items)
        return fh

    def _repo_node(self, repo: str) -> Node:
        return self.table.get_or_add(("repo", repo), kind=Kind.REPO, repo=repo)

    def _ref_node(self, repo: str, name: str, resolved: ResolvedRef, signature: tuple[str, ...], stable: bool) -> Node:
        return self._scope_root(self._register_scope(repo, name, resolved, signature, stable))

    def _listed_node(self, parent: Node, name: bytes, child: Child, listing: Listing) -> Node:
        scope = parent.scope
        assert scope is not None
        path = _join(parent.path, _decode_name(name))
        existing = self.table.by_key((scope.key, path))
        if existing is not None and existing.dirty is not None:
            return existing
        return self._bind(scope, path, child, listing.fetched, listing.gen, scope.version)

    def dir_cacheable(self, fh: int) -> bool:
        """True if the kernel may keep the listing of directory handle ``fh`` (an immutable ref's directory)."""
        handle = self._dir_handles.get(fh)
        if handle is None:
            return False
        node = handle.node
        return node.kind == Kind.DIR and node.scope is not None and node.scope.stable

    @_op("readdir")
    def readdir(self, fh: int, start_id: int, limit: int = READDIR_BATCH) -> list[DirItem]:
        """Up to ``limit`` entries after position ``start_id`` (0: from the start, with . and ..).

        Items with ``counted`` raised their inode's lookup count: the caller
        must ``forget`` those it could not pass to the kernel.
        """
        handle = self._dir_handles.get(fh)
        if handle is None:
            raise FsError(errno.EBADF)
        node = handle.node
        out: list[DirItem] = []
        pos = start_id
        if pos == 0:
            out.append(DirItem(b".", self.attr(node), 1, False))
            pos = 1
        if pos == 1 and len(out) < limit:
            out.append(DirItem(b"..", self.attr(self._dotdot(node)), 2, False))
            pos = 2
        index = pos - 2
        items, attr = handle.items, self.attr
        # One lock for the batch (the node factories take it again, re-entrantly).
        with self.table.lock:
            while index < len(items) and len(out) < limit:
                name, make = items[index]
                index += 1
                try:
                    child = make()
                except (FsError, LakeMountError) as exc:
                    log.debug("readdir: skipping %r: %s", name, exc)
                    continue
                child.lookups += 1  # InodeTable.remember, under the lock already held
                out.append(DirItem(name, attr(child), index + 2, True))
        return out

    @_op("releasedir")
    def releasedir(self, fh: int) -> None:
        with self.table.lock:
            handle = self._dir_handles.pop(fh, None)
        if handle is not None:
            self.table.release(handle.node)

    # ================================================================== namespace changes
    def _dir_for_change(self, parent_ino: int, name: bytes) -> tuple[Node, Scope, str]:
        parent = self._node(parent_ino)
        if parent.kind in (Kind.ROOT, Kind.REPO):
            raise FsError(errno.EPERM, "repositories and refs are not created through the mount")
        if parent.kind == Kind.CONTROL_DIR:
            raise FsError(errno.EPERM, ".lakefs holds control files only")
        if parent.kind != Kind.DIR:
            raise FsError(errno.ENOTDIR)
        scope = self._writable(parent.scope)
        if len(name) > NAME_MAX:
            raise FsError(errno.ENAMETOOLONG)
        if name in (b".", b"..") or b"/" in name or not name:
            raise FsError(errno.EINVAL)
        path = _join(parent.path, _decode_name(name))
        if _key_len(path) + 1 > MAX_KEY_BYTES:
            raise FsError(errno.ENAMETOOLONG)
        if not parent.path and name == control.CONTROL_DIR.encode():
            raise FsError(errno.EEXIST, ".lakefs is reserved for control files")
        return parent, scope, path

    def _inherit(self, parent: Node, caller: Caller, mode: int) -> tuple[int, int]:
        """(gid, mode) of a new child: a set-group-ID directory passes on its group (and, to dirs, the bit)."""
        pattr = self.attr(parent)
        if pattr.mode & stat.S_ISGID:
            return pattr.gid, (mode | stat.S_ISGID) if stat.S_ISDIR(mode) else mode
        return caller.gid, mode

    @staticmethod
    def _names_changed(parent: Node) -> None:
        """An entry of ``parent`` was added, removed or renamed: its mtime and ctime move (POSIX), in memory.

        Staging a new directory marker on every create would double the writes
        of a job making many files; like ctime, this is not versioned.
        """
        parent.mtime_ns = parent.ctime_ns = time.time_ns()

    def _listing_put(self, parent: Node, name: bytes, child: Child | None) -> None:
        """Update ``parent``'s cached listing after a local change (caller holds the table lock)."""
        listing = parent.listing
        if listing is None:
            return
        old = listing.children.get(name)
        if old is not None and old.kind is ChildKind.DIR:
            listing.dirs -= 1
        if child is None:
            if listing.children.pop(name, None) is not None:
                i = bisect.bisect_left(listing.names, name)
                if i < len(listing.names) and listing.names[i] == name:
                    del listing.names[i]
            return
        if old is None:
            bisect.insort(listing.names, name)
        if child.kind is ChildKind.DIR:
            listing.dirs += 1
        listing.children[name] = child

    def _keep_parent(self, scope: Scope, parent: Node, removed: frozenset[bytes]) -> list[tuple[str, Entry | None]]:
        """A marker for ``parent`` if it is implicit and would be left empty by removing ``removed``."""
        if not parent.path:
            return []
        marker_key = (parent.path + "/").encode("utf-8", "surrogateescape")
        if self.catalog.graveler.get(scope.repo, scope.resolved, marker_key) is not None:
            return []
        if has_children(self.catalog, scope.repo, scope.resolved, parent.path, ignore=removed):
            return []
        return [(parent.path + "/", Entry("", 0, "", time.time_ns(), "", (), DIR_MODE))]

    def _stage(self, scope: Scope, changes: Sequence[tuple[str, Entry | None]]) -> None:
        self._io()
        self.catalog.apply(scope.repo, scope.resolved, changes)
        self.metrics.add("staged_changes", len(changes))

    @_op("mkdir")
    def mkdir(self, parent_ino: int, name: bytes, mode: int, caller: Caller) -> Attr:
        parent, scope, path = self._dir_for_change(parent_ino, name)
        self._io()
        with scope.mutex:
            if self._find(parent, name) is not None:
                raise FsError(errno.EEXIST, path)
            gid, mode = self._inherit(parent, caller, stat.S_IFDIR | (mode & 0o7777))
            marker = Entry("", 0, "", time.time_ns(), "", (), mode, caller.uid, gid)
            self._stage(scope, [(path + "/", marker)])
            with self.table.lock:
                self._local_change(scope)
                node = self.table.get_or_add((scope.key, path), kind=Kind.DIR, scope=scope, path=path)
                node.entry, node.fetched, node.gen = marker, self._now(), scope.gen
                node.listing = Listing({}, [], node.fetched, scope.gen)
                self._listing_put(parent, name, Child(ChildKind.DIR, marker))
                self._names_changed(parent)
                self.table.remember(node)
        return self.attr(node)

    @_op("mknod")
    def mknod(self, parent_ino: int, name: bytes, mode: int, rdev: int, caller: Caller) -> Attr:
        """Regular files, FIFOs, sockets and device nodes, as entries with that mode.

        A device node's number is kept in the entry's ``target`` (decimal), as a
        symlink's target is; the kernel already refused callers without
        CAP_MKNOD, and the mount is ``nodev``, so nothing opens the device.
        Other file types are EINVAL, as in mknod(2).
        """
        fmt = stat.S_IFMT(mode) or stat.S_IFREG
        if fmt not in _MKNOD_TYPES:
            raise FsError(errno.EINVAL, "not a file type mknod makes")
        device = str(rdev) if fmt in (stat.S_IFCHR, stat.S_IFBLK) else ""
        node = self._create_entry(parent_ino, name, fmt | (mode & 0o7777), caller, exclusive=True, target=device)
        self.table.remember(node)
        return self.attr(node)

    def _create_entry(
        self, parent_ino: int, name: bytes, mode: int, caller: Caller, *, exclusive: bool, target: str = ""
    ) -> Node:
        parent, scope, path = self._dir_for_change(parent_ino, name)
        self._io()
        with scope.mutex:
            existing = self._find(parent, name)
            if existing is not None:
                if exclusive:
                    raise FsError(errno.EEXIST, path)
                if existing.kind == Kind.DIR:
                    raise FsError(errno.EISDIR, path)
                return existing
            gid, mode = self._inherit(parent, caller, mode)
            empty = self._empty_data(scope.repo)
            content_type = mimetypes.guess_type(path)[0] or "" if stat.S_ISREG(mode) else ""
            entry = Entry(empty.address, 0, empty.etag, time.time_ns(), content_type, (), mode, caller.uid, gid, target)
            self._stage(scope, [(path, entry)])
            with self.table.lock:
                self._local_change(scope)
                node = self.table.get_or_add((scope.key, path), kind=Kind.FILE, scope=scope, path=path)
                if node.kind != Kind.FILE:  # a stale node of another kind held the key
                    self.table.detach(node)
                    node = self.table.get_or_add((scope.key, path), kind=Kind.FILE, scope=scope, path=path)
                node.entry, node.fetched, node.gen = entry, self._now(), scope.gen
                self._listing_put(parent, name, Child(ChildKind.FILE, entry))
                self._names_changed(parent)
            return node

    @_op("create")
    def create(self, parent_ino: int, name: bytes, mode: int, flags: int, caller: Caller) -> tuple[Opened, Attr]:
        """Create (or, without O_EXCL, open) a regular file and open it."""
        node = self._create_entry(parent_ino, name, stat.S_IFREG | (mode & 0o7777), caller, exclusive=bool(flags & os.O_EXCL))
        opened = self._open_file(node, flags, caller)
        self.table.remember(node)
        return opened, self.attr(node)

    @_op("symlink")
    def symlink(self, parent_ino: int, name: bytes, target: bytes, caller: Caller) -> Attr:
        parent, scope, path = self._dir_for_change(parent_ino, name)
        try:
            target_text = target.decode("utf-8")
        except UnicodeDecodeError:
            raise FsError(errno.EINVAL, "symlink targets must be UTF-8") from None
        if len(target) > MAX_KEY_BYTES:
            raise FsError(errno.ENAMETOOLONG)
        self._io()
        with scope.mutex:
            if self._find(parent, name) is not None:
                raise FsError(errno.EEXIST, path)
            gid, _mode = self._inherit(parent, caller, LINK_MODE)
            entry = Entry("", len(target), "", time.time_ns(), "", (), LINK_MODE, caller.uid, gid, target_text)
            self._stage(scope, [(path, entry)])
            with self.table.lock:
                self._local_change(scope)
                node = self.table.get_or_add((scope.key, path), kind=Kind.SYMLINK, scope=scope, path=path)
                node.entry, node.fetched, node.gen = entry, self._now(), scope.gen
                self._listing_put(parent, name, Child(ChildKind.SYMLINK, entry))
                self._names_changed(parent)
                self.table.remember(node)
        return self.attr(node)

    @_op("readlink")
    def readlink(self, ino: int) -> bytes:
        node = self._node(ino)
        if node.kind != Kind.SYMLINK:
            raise FsError(errno.EINVAL)
        self._revalidate(node)
        assert node.entry is not None
        return node.entry.target.encode("utf-8", "surrogateescape")

    @_op("link")
    def link(self, ino: int, new_parent_ino: int, new_name: bytes) -> Attr:
        """Hard links are not supported: an entry has one path."""
        raise FsError(errno.EPERM, "hard links are not supported")

    @_op("unlink")
    def unlink(self, parent_ino: int, name: bytes) -> None:
        parent, scope, path = self._dir_for_change(parent_ino, name)
        self._io()
        with scope.mutex:
            node = self._find(parent, name)
            if node is None:
                raise FsError(errno.ENOENT, path)
            if node.kind == Kind.DIR:
                raise FsError(errno.EISDIR, path)
            key = path.encode("utf-8", "surrogateescape")
            self._stage(scope, [(path, None), *self._keep_parent(scope, parent, frozenset({key}))])
            with self.table.lock:
                self._local_change(scope)
                self.table.detach(node)
                self._listing_put(parent, name, None)
                self._names_changed(parent)

    @_op("rmdir")
    def rmdir(self, parent_ino: int, name: bytes) -> None:
        parent, scope, path = self._dir_for_change(parent_ino, name)
        self._io()
        with scope.mutex:
            node = self._find(parent, name)
            if node is None:
                raise FsError(errno.ENOENT, path)
            if node.kind != Kind.DIR:
                raise FsError(errno.ENOTDIR, path)
            if has_children(self.catalog, scope.repo, scope.resolved, path):
                raise FsError(errno.ENOTEMPTY, path)
            marker_key = path + "/"
            changes: list[tuple[str, Entry | None]] = []
            if self.catalog.graveler.get(scope.repo, scope.resolved, marker_key.encode("utf-8", "surrogateescape")) is not None:
                changes.append((marker_key, None))
            changes += self._keep_parent(scope, parent, frozenset({marker_key.encode("utf-8", "surrogateescape")}))
            if changes:
                self._stage(scope, changes)
            with self.table.lock:
                self._local_change(scope)
                self.table.detach(node)
                self._listing_put(parent, name, None)
                self._names_changed(parent)

    @_op("rename")
    def rename(self, old_parent_ino: int, old_name: bytes, new_parent_ino: int, new_name: bytes, flags: int = 0) -> None:
        """Rename a file or a whole directory as one staging transaction (no data is copied).

        ``flags``: 1 = RENAME_NOREPLACE (EEXIST if the target exists); RENAME_EXCHANGE is not supported (EINVAL).
        """
        old_parent = self._node(old_parent_ino)
        new_parent = self._node(new_parent_ino)
        if old_parent.scope is not new_parent.scope and old_parent.kind == Kind.DIR and new_parent.kind == Kind.DIR:
            # mv(1) falls back to copy + unlink on EXDEV: that is how data crosses branches.
            raise FsError(errno.EXDEV, "rename across repositories or refs")
        if flags & ~RENAME_NOREPLACE:
            raise FsError(errno.EINVAL, "only RENAME_NOREPLACE is supported")
        old_parent, scope, old_path = self._dir_for_change(old_parent_ino, old_name)
        new_parent, new_scope, new_path = self._dir_for_change(new_parent_ino, new_name)
        if new_scope is not scope:
            raise FsError(errno.EXDEV, "rename across repositories or refs")
        self._io()
        with scope.mutex:
            src = self._find(old_parent, old_name)
            if src is None:
                raise FsError(errno.ENOENT, old_path)
            if old_path == new_path:
                return
            dst = self._find(new_parent, new_name)
            # The checks in the order Linux's rename(2) makes them.
            if dst is not None and flags & RENAME_NOREPLACE:
                raise FsError(errno.EEXIST, new_path)
            if new_path.startswith(old_path + "/"):
                raise FsError(errno.EINVAL, "cannot move a directory into itself")
            if old_path.startswith(new_path + "/"):
                raise FsError(errno.ENOTEMPTY, "cannot replace a directory by something inside it")
            changes: dict[str, Entry | None] = {}
            if src.kind == Kind.DIR:
                if dst is not None:
                    if dst.kind != Kind.DIR:
                        raise FsError(errno.ENOTDIR, new_path)
                    if has_children(self.catalog, scope.repo, scope.resolved, new_path):
                        raise FsError(errno.ENOTEMPTY, new_path)
                    changes[new_path + "/"] = None
                moved = self._subtree(scope, old_path)
                for key, _entry in moved:
                    changes[key] = None
                for key, entry in moved:
                    changes[new_path + key[len(old_path) :]] = entry
            else:
                if dst is not None:
                    if dst.kind == Kind.DIR:
                        raise FsError(errno.EISDIR, new_path)
                    changes[new_path] = None
                if src.entry is None:
                    raise FsError(errno.ENOENT, old_path)
                changes[old_path] = None
                changes[new_path] = src.entry
            if old_parent is not new_parent:
                removed = frozenset(k.encode("utf-8", "surrogateescape") for k, e in changes.items() if e is None)
                changes.update(self._keep_parent(scope, old_parent, removed))
            self._stage(scope, list(changes.items()))
            with self.table.lock:
                self._local_change(scope)
                if dst is not None:
                    self.table.detach(dst)
                for node in list(self.table.under(scope.key, old_path)):
                    rest = node.path[len(old_path) :]
                    self.table.rekey(node, (scope.key, new_path + rest), new_path + rest)
                src_child = Child(_CHILD[src.kind], src.entry)
                self._listing_put(old_parent, old_name, None)
                self._listing_put(new_parent, new_name, src_child)
                self._names_changed(old_parent)
                self._names_changed(new_parent)
                src.ctime_ns = time.time_ns()

    def _subtree(self, scope: Scope, path: str) -> list[tuple[str, Entry]]:
        """Every entry at or below directory ``path`` (keys as paths, the marker included)."""
        prefix = (path + "/").encode("utf-8", "surrogateescape")
        return [
            (k.decode("utf-8", "surrogateescape"), decode_value(v))
            for k, v in self.catalog.graveler.scan(scope.repo, scope.resolved, prefix, prefix_end(prefix))
        ]

    # ================================================================== attributes and xattrs
    @_op("setattr")
    def setattr(self, ino: int, changes: SetAttr, fh: int | None, caller: Caller) -> Attr:
        node = self._node(ino)
        if node.kind == Kind.CONTROL_FILE:
            # O_TRUNC on a control file arrives as a size change: nothing to truncate.
            if changes.mode is None and changes.uid is None and changes.gid is None:
                return self.attr(node)
            raise FsError(errno.EPERM, "control files keep their attributes")
        if node.kind in (Kind.ROOT, Kind.REPO, Kind.CONTROL_DIR):
            raise FsError(errno.EPERM, "the mount's layout keeps its attributes")
        scope = self._writable(node.scope)
        self._io()
        if not node.detached:
            self._revalidate(node)
        if changes.size is not None:
            self._truncate(node, changes.size)
        if changes.atime_ns is not None:
            node.atime_ns = changes.atime_ns
        if changes.mode is None and changes.uid is None and changes.gid is None and changes.mtime_ns is None:
            if changes.atime_ns is not None or changes.size is not None:
                node.ctime_ns = time.time_ns()
            return self.attr(node)
        if node.kind == Kind.DIR and not node.path:
            return self.attr(node)  # a ref's root has no entry to keep attributes in (tar, rsync touch it)
        with scope.mutex:
            base = node.entry
            if node.kind == Kind.DIR and (base is None or not base.is_dir):
                base = Entry("", 0, "", base.mtime_ns if base else self._started_ns, "", (), DIR_MODE)
            assert base is not None
            mode = base.mode
            if changes.mode is not None:
                mode = stat.S_IFMT(base.mode) | (changes.mode & 0o7777)
            new = _with(
                base,
                mode=mode,
                uid=base.uid if changes.uid is None else changes.uid,
                gid=base.gid if changes.gid is None else changes.gid,
                mtime_ns=base.mtime_ns if changes.mtime_ns is None else changes.mtime_ns,
            )
            if node.kind == Kind.SYMLINK:
                new = _with(new, mode=LINK_MODE)
            if not node.detached:
                self._stage(scope, [(node.path + "/" if node.kind == Kind.DIR else node.path, new)])
            with self.table.lock:
                self._local_change(scope)
                node.entry, node.fetched, node.gen = new, self._now(), scope.gen
                node.ctime_ns = time.time_ns()
                if changes.mtime_ns is not None:
                    node.mtime_ns = 0  # utimens sets a directory's mtime, also backwards
                parent = self._parent_of(node)
                if parent is not None:
                    self._listing_put(parent, os.path.basename(node.path).encode("utf-8", "surrogateescape"), Child(_CHILD[node.kind], new))
        return self.attr(node)

    def _truncate(self, node: Node, size: int) -> None:
        if node.kind == Kind.DIR:
            raise FsError(errno.EISDIR)
        if node.kind != Kind.FILE or not stat.S_ISREG(self.attr(node).mode):
            raise FsError(errno.EINVAL)
        if size < 0:
            raise FsError(errno.EINVAL)
        dirty = self._ensure_dirty(node, keep=size > 0)
        dirty.truncate(size)
        with self.table.lock:
            if node.entry is not None:
                node.entry = _with(node.entry, mtime_ns=time.time_ns())
        if node.writers == 0:
            # truncate(2) with no writer: nobody will close it, so save now.
            self._save(node)
            self._drop_dirty_if_idle(node)

    def _xattr_node(self, ino: int) -> Node:
        node = self._node(ino)
        if node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK) or (node.kind == Kind.DIR and not node.path):
            raise FsError(errno.ENOTSUP, "no extended attributes here")
        return node

    @_op("getxattr")
    def getxattr(self, ino: int, name: bytes) -> bytes:
        if not name.startswith(b"user."):
            raise FsError(ENOATTR)
        node = self._node(ino)
        if node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
            raise FsError(ENOATTR)
        self._revalidate(node)
        key = name[5:].decode("utf-8", "surrogateescape")
        for k, v in node.entry.metadata if node.entry is not None else ():
            if k == key:
                return v.encode("utf-8")
        raise FsError(ENOATTR)

    @_op("listxattr")
    def listxattr(self, ino: int) -> list[bytes]:
        node = self._node(ino)
        if node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
            return []
        self._revalidate(node)
        return [b"user." + k.encode("utf-8") for k, _v in (node.entry.metadata if node.entry is not None else ())]

    @_op("setxattr")
    def setxattr(self, ino: int, name: bytes, value: bytes) -> None:
        if not name.startswith(b"user.") or len(name) == 5:
            raise FsError(errno.ENOTSUP, "only user.* extended attributes are supported")
        try:
            key, text = name[5:].decode("utf-8"), value.decode("utf-8")
        except UnicodeDecodeError:
            raise FsError(errno.EINVAL, "extended attribute names and values must be UTF-8 (they are S3 metadata)") from None
        self._set_metadata(ino, key, text)

    @_op("removexattr")
    def removexattr(self, ino: int, name: bytes) -> None:
        if not name.startswith(b"user."):
            raise FsError(ENOATTR)
        self._set_metadata(ino, name[5:].decode("utf-8", "surrogateescape"), None)

    def _set_metadata(self, ino: int, key: str, value: str | None) -> None:
        node = self._xattr_node(ino)
        scope = self._writable(node.scope)
        self._io()
        self._revalidate(node)
        with scope.mutex:
            base = node.entry
            if node.kind == Kind.DIR and base is None:
                base = Entry("", 0, "", self._started_ns, "", (), DIR_MODE)
            assert base is not None
            meta = dict(base.metadata)
            if value is None:
                if key not in meta:
                    raise FsError(ENOATTR)
                del meta[key]
            else:
                meta[key] = value
            new = _with(base, metadata=tuple(sorted(meta.items())))
            if not node.detached:
                self._stage(scope, [(node.path + "/" if node.kind == Kind.DIR else node.path, new)])
            with self.table.lock:
                self._local_change(scope)
                node.entry, node.fetched, node.gen = new, self._now(), scope.gen
                node.ctime_ns = time.time_ns()

    @_op("statfs")
    def statfs(self) -> StatFs:
        return StatFs(STATFS_BLOCK, STATFS_BLOCK, STATFS_BLOCKS, STATFS_BLOCKS, STATFS_BLOCKS, STATFS_FILES, STATFS_FILES, STATFS_FILES, NAME_MAX)

    # ================================================================== files
    @_op("open")
    def open(self, ino: int, flags: int, caller: Caller | None = None) -> Opened:
        caller = caller or Caller()
        node = self._node(ino)
        if node.kind == Kind.CONTROL_FILE:
            return self._open_control(node, flags, caller)
        if node.kind == Kind.DIR:
            raise FsError(errno.EISDIR)
        if node.kind != Kind.FILE:
            raise FsError(errno.ELOOP)
        if flags & os.O_ACCMODE != os.O_RDONLY:
            self._writable(node.scope)
        if not node.detached:
            self._revalidate(node)
        opened = self._open_file(node, flags, caller)
        if flags & os.O_ACCMODE == os.O_RDONLY:
            self._scan_ahead(node)
        return opened

    def _scan_ahead(self, node: Node) -> None:
        """A directory's files opened one after another in listing order: prefetch the next small ones.

        Memory only (it runs on the non-blocking path): a directory whose
        listing is not cached, or a repository not yet known, is skipped.
        """
        scope = node.scope
        if scope is None or node.detached or node.dirty is not None or not node.path:
            return
        parent = self._parent_of(node)
        repo = self._repos.get(scope.repo)
        if parent is None or repo is None:
            return
        listing = self._listing_fresh(parent)
        if listing is None:
            # Files opened by path (no readdir): list the directory in the background,
            # so the next opens can tell whether this is a scan.
            self._list_in_background(parent)
            return
        names = listing.names
        name = os.path.basename(node.path).encode("utf-8", "surrogateescape")
        pos = bisect.bisect_left(names, name)
        if pos == len(names) or names[pos] != name:
            return
        with self.table.lock:
            last, ahead = self._scans.get(parent.ino, (-2, 0))
            if pos != last + 1:
                self._scans[parent.ino] = (pos, pos + 1)  # not (yet) a sequential scan
                if len(self._scans) > MAX_SCANS:
                    self._scans.pop(next(iter(self._scans)))
                return
            start, end = max(ahead, pos + 1), min(len(names), pos + 1 + SCAN_AHEAD)
            self._scans[parent.ino] = (pos, max(ahead, end))
        objs = []
        for child_name in names[start:end]:
            child = listing.children[child_name]
            entry = child.entry
            if child.kind is ChildKind.FILE and entry is not None and entry.size > 0:
                objs.append(self._ref(repo, entry))
        if objs:
            self.reader.prefetch(objs)

    def _list_in_background(self, directory: Node) -> None:
        with self.table.lock:
            if directory.ino in self._scan_listing or len(self._scan_listing) >= MAX_SCANS:
                return
            self._scan_listing.add(directory.ino)
            if self._scan_pool is None:
                self._scan_pool = ThreadPoolExecutor(1, thread_name_prefix="lakemount-scan")
            pool = self._scan_pool

        def run() -> None:
            try:
                self._listing(directory)
            except Exception as exc:  # an optimization: the directory may be gone, the store down
                log.debug("background listing of %s: %s", directory.path, exc)
            finally:
                with self.table.lock:
                    self._scan_listing.discard(directory.ino)

        pool.submit(run)

    def _open_file(self, node: Node, flags: int, caller: Caller) -> Opened:
        writable = flags & os.O_ACCMODE != os.O_RDONLY
        truncate = writable and bool(flags & os.O_TRUNC)
        scope = node.scope
        assert scope is not None
        if truncate:
            self._io()
        fh = self._new_fh()
        # Register the handle first, under the node's lock: the kernel sends
        # RELEASE asynchronously, and a release that found no open handle
        # would drop the temp file this open is about to read or truncate.
        with node.lock, self.table.lock:
            node.opens += 1
            if writable:
                node.writers += 1
            entry = node.entry
            identity = entry.identity() if entry is not None and node.dirty is None else node.page_identity
            keep = scope.stable or (identity is not None and identity == node.page_identity and not truncate)
            node.page_identity = identity
            self._handles[fh] = FileHandle(fh, node, writable, None, uid=caller.uid)
        if truncate:
            try:
                dirty = self._ensure_dirty(node, keep=False)
                if dirty.size:
                    dirty.truncate(0)
            except BaseException:
                self.release(fh)
                raise
            # POSIX: O_TRUNC of an existing file marks its mtime and ctime, as truncate(2) does.
            now = time.time_ns()
            with self.table.lock:
                if node.entry is not None:
                    node.entry = _with(node.entry, mtime_ns=now)
                node.ctime_ns = now
        return Opened(fh, keep_cache=keep, noflush=not writable)

    def _object_of(self, node: Node) -> ObjectRef | None:
        """The data object holding ``node``'s saved content (None when empty)."""
        entry = node.entry
        scope = node.scope
        if entry is None or entry.size == 0 or scope is None:
            return None
        return self._ref(self._repo(scope.repo), entry)

    def _ref(self, repo: Repository, entry: Entry) -> ObjectRef:
        return ObjectRef(self.catalog.physical_url(repo, entry.address), entry.size, entry.etag)

    def _open_control(self, node: Node, flags: int, caller: Caller) -> Opened:
        writable = flags & os.O_ACCMODE != os.O_RDONLY
        if writable and node.control not in control.WRITABLE:
            raise FsError(errno.EACCES, f".lakefs/{node.control} is read-only")
        content = None
        if flags & os.O_ACCMODE != os.O_WRONLY:
            self._io()
            if node.scope is not None:
                self._check_scope(node.scope)
            content = self.control.read(node.scope, node.control)
        fh = self._new_fh()
        with self.table.lock:
            node.opens += 1
            self._handles[fh] = FileHandle(fh, node, writable, None, content=content, uid=caller.uid)
        return Opened(fh, keep_cache=False, direct_io=True, noflush=not writable)

    def _handle(self, fh: int) -> FileHandle:
        handle = self._handles.get(fh)
        if handle is None:
            raise FsError(errno.EBADF)
        return handle

    @_op("read")
    def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self._handle(fh)
        if handle.content is not None:
            return handle.content[offset : offset + size]
        if handle.node.kind == Kind.CONTROL_FILE:
            return b""
        dirty = handle.node.dirty
        if dirty is not None:
            self._io()
            data = dirty.pread(offset, size)
        else:
            # Resolved at the first read, not at open: a file written through
            # another handle is saved by the time that handle is released.
            obj = handle.obj
            if obj is None:
                obj = handle.obj = self._object_of(handle.node)
                if obj is None:
                    return b""
            cached = self.reader.cached(obj, offset, size)
            if cached is None:
                self._io()
                data = self.reader.read(obj, offset, size, handle.read_state)
            else:
                data = cached
            self.reader.advise(obj, handle.read_state, offset, size)
        self.metrics.add("read_bytes", len(data))
        return data

    @_op("write")
    def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self._handle(fh)
        node = handle.node
        if node.kind == Kind.CONTROL_FILE:
            return self._write_control(node, data, handle.uid)
        if not handle.writable:
            raise FsError(errno.EBADF)
        self._io()
        dirty = self._ensure_dirty(node, keep=True)
        n = dirty.pwrite(offset, data)
        with self.table.lock:
            if node.entry is not None:
                node.entry = _with(node.entry, mtime_ns=time.time_ns())
        self.metrics.add("written_bytes", n)
        return n

    def _write_control(self, node: Node, data: bytes, uid: int) -> int:
        scope = node.scope
        if scope is None or node.control not in control.WRITABLE:
            raise FsError(errno.EACCES)
        self._io()
        try:
            outcome = self.control.write(scope, node.control, data, uid)
        finally:
            self.metrics.add(f"control_{node.control}")
        if outcome.content_changed or outcome.head_moved:
            resolved, signature, _stable = resolve_scope(self.catalog, scope.repo, scope.name)
            with self.table.lock:
                scope.checked = self._now()
                if outcome.content_changed:
                    self._scope_changed(scope, resolved, signature)
                else:  # a commit: the branch's content is what it was
                    scope.resolved, scope.signature = resolved, signature
        return len(data)

    def _ensure_dirty(self, node: Node, *, keep: bool) -> DirtyFile:
        """The node's temp file, created on first need (copying the current content if ``keep``)."""
        with node.lock:
            dirty = node.dirty
            if dirty is not None:
                return dirty
            scope = node.scope
            assert scope is not None
            entry = node.entry
            source = None
            size = 0
            if keep and entry is not None and entry.size > 0:
                repo = self._repo(scope.repo)
                size = entry.size
                source = functools.partial(self.catalog.open, repo, entry)
                self.metrics.add("copy_on_write_bytes", size)
            dirty = DirtyFile(self.options.spool_dir, source, size)
            if keep or entry is None or entry.size == 0:
                dirty.saved_version = dirty.version  # same content as what is staged
            node.dirty = dirty
            return dirty

    def _save(self, node: Node) -> None:
        """Turn a node's modified temp file into a staged entry (no-op if unmodified or unlinked)."""
        dirty = node.dirty
        if dirty is None or not dirty.modified:
            return
        scope = node.scope
        assert scope is not None
        if node.detached:
            dirty.end_save(dirty.begin_save())
            return
        # The temp file itself is uploaded, with digests computed while it was written.
        version, info = dirty.store(lambda path, digests: self.catalog.write_file(scope.repo, path, digests=digests))
        with scope.mutex:
            if node.detached:
                dirty.end_save(version)
                return
            base = node.entry or Entry("", 0)
            entry = _with(base, address=info.address, size=info.size, etag=info.etag)
            self.catalog.put_entry(scope.repo, scope.resolved, node.path, entry)
            with self.table.lock:
                self._local_change(scope)
                node.entry, node.fetched, node.gen = entry, self._now(), scope.gen
                parent = self._parent_of(node)
                if parent is not None:
                    self._listing_put(parent, os.path.basename(node.path).encode("utf-8", "surrogateescape"), Child(ChildKind.FILE, entry))
        dirty.end_save(version)
        self.metrics.add("saved_files")
        self.metrics.add("saved_bytes", info.size)

    def _drop_dirty_if_idle(self, node: Node) -> None:
        with node.lock:
            dirty = node.dirty
            if dirty is None or node.opens > 0:
                return
            if dirty.modified and not node.detached:
                self._keep_unsaved(node, dirty)
            else:
                dirty.discard()
            node.dirty = None
            # The kernel's pages hold the bytes we just saved: keep them.
            if node.entry is not None:
                node.page_identity = node.entry.identity()
        self.table.drop_if_dead(node)

    def _keep_unsaved(self, node: Node, dirty: DirtyFile) -> None:
        """Content that could not be saved is moved aside, never silently dropped."""
        scope = node.scope
        where = os.path.join(
            self.options.recovered_dir or os.path.join(self.options.spool_dir, "recovered"),
            f"{scope.repo if scope else ''}-{scope.name if scope else ''}-{int(time.time())}-{node.ino}-{os.path.basename(node.path)}",
        )
        try:
            dirty.keep_as(where)
            log.error("could not save %s: its content is kept in %s", node.path, where)
        except OSError as exc:
            log.error("could not save %s and could not keep its content: %s", node.path, exc)
            dirty.discard()

    @_op("flush")
    def flush(self, fh: int) -> None:
        """A close(2) of the handle: save written content (errors reach the closing process)."""
        handle = self._handle(fh)
        if handle.writable and handle.node.dirty is not None and handle.node.dirty.modified:
            self._io()
            self._save(handle.node)

    @_op("fsync")
    def fsync(self, fh: int, datasync: bool = False) -> None:
        handle = self._handle(fh)
        if handle.node.dirty is not None and handle.node.dirty.modified:
            self._io()
            self._save(handle.node)

    @_op("release")
    def release(self, fh: int) -> None:
        """The last close of the handle; saves anything unsaved (a failure is logged, content kept aside)."""
        handle = self._handles.get(fh)
        if handle is None:
            return
        node = handle.node
        if node.dirty is not None:
            self._io()
        with self.table.lock:
            self._handles.pop(fh, None)
            node.opens = max(0, node.opens - 1)
            if handle.writable:
                node.writers = max(0, node.writers - 1)
        if handle.writable and node.dirty is not None and node.dirty.modified:
            try:
                self._save(node)
            except (LakeMountError, OSError) as exc:
                log.error("saving %s on release failed: %s", node.path, exc)
        if node.dirty is not None:
            self._drop_dirty_if_idle(node)
        self.table.drop_if_dead(node)

    # ================================================================== lifecycle
    def flush_all(self) -> int:
        """Save every modified open file (unmount, SIGTERM); returns how many failed."""
        failed = 0
        for node in self.table.nodes():
            if node.dirty is not None and node.dirty.modified and not node.detached:
                try:
                    self._save(node)
                except Exception as exc:  # keep saving the others
                    failed += 1
                    log.error("saving %s failed: %s", node.path, exc)
        return failed

    def close(self) -> None:
        """Save what can be saved, keep aside what cannot, release temp files and threads."""
        self.flush_all()
        for node in self.table.nodes():
            dirty = node.dirty
            if dirty is not None:
                if dirty.modified and not node.detached:
                    self._keep_unsaved(node, dirty)
                else:
                    dirty.discard()
                node.dirty = None
        if self._scan_pool is not None:
            self._scan_pool.shutdown(wait=True, cancel_futures=True)
        self.reader.close()
        with contextlib.suppress(OSError):
            os.rmdir(self.options.spool_dir)

    def render_stats(self) -> str:
        def gauges() -> dict[str, float]:
            return {
                "inodes": len(self.table),
                "open_files": len(self._handles),
                "dirty_files": sum(1 for n in self.table.nodes() if n.dirty is not None),
                "scopes": len(self._scopes),
            }

        return self.metrics.render(self._cache_stats() if self._cache_stats else None, gauges)


RENAME_NOREPLACE: Final = 1

_MKNOD_TYPES: Final = frozenset({stat.S_IFREG, stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK})
_KIND: Final = {ChildKind.FILE: Kind.FILE, ChildKind.DIR: Kind.DIR, ChildKind.SYMLINK: Kind.SYMLINK}
_CHILD: Final = {Kind.FILE: ChildKind.FILE, Kind.DIR: ChildKind.DIR, Kind.SYMLINK: ChildKind.SYMLINK}


def _with(entry: Entry, **changes: Any) -> Entry:
    """A copy of ``entry`` with ``changes`` (entries are frozen)."""
    return entry._replace(**changes)


def _decode_name(name: bytes) -> str:
    return name.decode("utf-8", "surrogateescape")

