"""What every part of the filesystem core shares: the mount's state and its plumbing.

The core is split by concept (scopes, the tree of names, directory handles,
file handles, saving, scan-ahead, attributes, namespace changes); each part is
a collaborator holding this one :class:`MountState` explicitly.  It carries
the catalog, the options, the inode table, the block reader, the metrics and
the queue of kernel invalidations, plus the small caches everything consults
(repositories, the empty object) and the non-blocking switch: under
:meth:`MountState.nonblocking`, :meth:`MountState.io` raises
:class:`NeedsThread` where an operation would block, before it changes
anything.  :func:`op` times a public operation into the metrics.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, ParamSpec, Protocol, TypeVar

from lakemount.catalog.catalog import Catalog, encode_new_path
from lakemount.catalog.model import Entry, Repository
from lakemount.catalog.writer import DataInfo
from lakemount.errors import LakeMountError, Unavailable
from lakemount.fuse.errno import FsError, errno_of
from lakemount.fuse.held import HeldCreates
from lakemount.fuse.inodes import InodeTable, Node
from lakemount.fuse.mounted import branch_signature
from lakemount.fuse.ownchanges import OwnChanges
from lakemount.fuse.reader import BlockReader, ObjectRef
from lakemount.fuse.stats import Metrics
from lakemount.fuse.values import MountOptions

if TYPE_CHECKING:
    from lakemount.fuse.journal import Journal
    from lakemount.fuse.listing import Child
    from lakemount.fuse.mounted import Scope

NAME_MAX: Final = 255

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class NeedsThread(Exception):
    """Raised under :meth:`FileSystem.nonblocking` by an operation that must do I/O; nothing changed."""


def op(name: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Time an operation into the metrics (``self.state.metrics``), with its errno on failure."""

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
                    self.state.metrics.observe(name, time.perf_counter() - t0, err)  # type: ignore[attr-defined]

        return wrapper

    return deco


class _NonBlocking(contextlib.AbstractContextManager[None]):
    """:meth:`MountState.nonblocking`'s context, for the calling thread.  A class, not a generator: the shim's fast
    path enters it five times a file, and a generator's exit throws every exception into it (a new name's lookup
    raises ``Absent``), which was 3% of the request loop's samples (stop 53)."""

    __slots__ = ("_tls",)

    def __init__(self, tls: threading.local) -> None:
        self._tls = tls

    def __enter__(self) -> None:
        self._tls.nb = True

    def __exit__(self, *exc: object) -> None:
        self._tls.nb = False


class _Holding(contextlib.AbstractContextManager[None]):
    """:meth:`MountState.holding`'s context.  A class, not a generator, as :class:`_NonBlocking` (a create takes
    its scope's lock through it on the request loop: a generator's context was 2% of a small file's create, stop 56)."""

    __slots__ = ("_tls", "_lock")

    def __init__(self, tls: threading.local, lock: threading.RLock | threading.Lock) -> None:
        self._tls = tls
        self._lock = lock

    def __enter__(self) -> None:
        if getattr(self._tls, "nb", False):
            if not self._lock.acquire(blocking=False):
                raise NeedsThread
        else:
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class Pipeline(Protocol):
    """What the core asks of the write-back pipeline through the state (``writeback.Writeback``, which builds on the
    state, so the state names this instead of importing it): its journal, journaling a change made without reading
    the branch, waiting for a branch's records to be staged, and what is journaled over the catalog's answers."""

    journal: Journal

    def journal_changes(self, scope: Any, changes: Sequence[tuple[str, Entry | None]], *, opened: bool = False) -> None: ...

    def journal_create(self, scope: Any, path: str) -> None: ...

    def drain(self, key: tuple[str, str] | None) -> None: ...

    def overlay_child(self, scope: Any, path: str, child: Child | None) -> Child | None: ...

    def overlay_listing(self, scope: Any, dir_path: str, children: dict[bytes, Child]) -> bool: ...

    def pending_marker(self, scope: Any, dir_path: str) -> Entry | None: ...


class MountState:
    """The state shared by the core's parts; see the module docstring."""

    def __init__(self, catalog: Catalog, reader: BlockReader, metrics: Metrics, options: MountOptions) -> None:
        self.catalog = catalog
        self.options = options
        self.metrics = metrics
        self.reader = reader
        self.table = InodeTable()
        self.invalidations: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.started_ns = time.time_ns()
        self.repos: dict[str, Repository] = {}
        self._empty: dict[str, DataInfo] = {}
        self._tls = threading.local()
        self._nonblocking = _NonBlocking(self._tls)
        self._next_fh = 1
        self.writeback: Pipeline | None = None  # the write-back pipeline, when the mount writes back
        self.passthrough = False  # the kernel took FUSE passthrough at INIT (set by the adapter; fuse/passthrough.py)
        self.held = HeldCreates()  # without write-back: creates waiting for their file's first close (held.py)
        self.own = OwnChanges(catalog)  # the node stamps this mount's own stagings wrote (ownchanges.py)
        # Held by whatever stages what it took out of ``held`` (and by every other staging of the mount): a
        # held create staged by a reader's or the timer's thread must never land after the file's own close
        # staged its content (the empty entry would win), nor after a rename or unlink of its name.
        self.settling = threading.RLock()

    def nonblocking(self) -> contextlib.AbstractContextManager[None]:
        """Run operations that may not block: one that needs I/O raises ``NeedsThread`` instead."""
        return self._nonblocking

    def io(self) -> None:
        """Called before any I/O: raises ``NeedsThread`` under :meth:`nonblocking`."""
        if getattr(self._tls, "nb", False):
            raise NeedsThread

    def refuses_io(self) -> bool:
        """True under :meth:`nonblocking` (the request loop's try): :meth:`io` would raise."""
        return bool(getattr(self._tls, "nb", False))

    def holds_creates(self) -> bool:
        """True if a new file's create waits for its first close to be staged with it (no write-back: there
        the journal does this), so creating it reads and writes nothing but memory."""
        return self.writeback is None

    def local_journal(self) -> bool:
        """True if the mount journals its writes and an append is a write to this node's page cache (no
        sync per close): such a change is made on the request loop, like a temp file's write."""
        wb = self.writeback
        return wb is not None and not wb.journal.fsync

    def holding(self, lock: threading.RLock | threading.Lock) -> contextlib.AbstractContextManager[None]:
        """``lock`` held; under :meth:`nonblocking`, ``NeedsThread`` rather than waiting for it."""
        return _Holding(self._tls, lock)

    def node(self, ino: int) -> Node:
        """The node of inode ``ino``; ``FsError(ESTALE)`` if the mount does not know it."""
        node = self.table.get(ino)
        if node is None:
            raise FsError(errno.ESTALE, f"unknown inode {ino}")
        return node

    def new_fh(self) -> int:
        """A handle number never used before in this mount (files and directories share the space)."""
        with self.table.lock:
            fh = self._next_fh
            self._next_fh += 1
            return fh

    def repo(self, name: str) -> Repository:
        """Repository ``name``, remembered for the mount's life; raises what the catalog raises."""
        repo = self.repos.get(name)
        if repo is None:
            self.io()
            repo = self.repos[name] = self.catalog.repository(name)
        return repo

    def has_empty_data(self, repo: str) -> bool:
        return repo in self._empty

    def empty_data(self, repo: str) -> DataInfo:
        """The stored empty object of ``repo`` (what a new file points at), written once per mount."""
        info = self._empty.get(repo)
        if info is None:
            self.io()
            info = self._empty[repo] = self.catalog.write_data(repo, b"")
        return info

    def stage(self, scope: Scope, changes: Sequence[tuple[str, Entry | None]], *, journal: bool = False,
              opened: bool = False) -> None:
        """Stage puts (entries) and deletes (None) on the scope's branch as one transaction.

        With write-back, ``journal`` changes (a create, which reads nothing of the
        branch) go to the journal (``opened``: a file's create that opened it, whose
        first save journals it: ``Writeback.journal_changes``); any other change waits
        until the branch's journal is staged, so it applies after what this mount wrote
        before it.
        """
        wb = self.writeback
        if not (journal and self.local_journal()):
            self.io()
        if wb is not None:
            if journal:
                wb.journal_changes(scope, changes, opened=opened)
                self.metrics.add("journaled_changes", len(changes))
                return
            wb.drain((scope.repo, scope.branch))
        with self.settling:
            held = self.held.take((scope.repo, scope.branch), changes) if self.held else []
            try:
                self.catalog.apply(scope.repo, scope.resolved, [*held, *changes])
            except BaseException:
                self.held.put_back((scope.repo, scope.branch), held)
                raise
        self.metrics.add("staged_changes", len(changes))

    def stage_if(self, scope: Scope, changes: Sequence[tuple[str, Entry | None]],
                 expected: Sequence[tuple[str, Entry | None]]) -> None:
        """:meth:`stage` only if each path of ``expected`` holds exactly that entry (None: nothing), after this
        mount's journal of the branch; ``PreconditionFailed`` otherwise, staging nothing."""
        self.io()
        if self.writeback is not None:
            self.writeback.drain((scope.repo, scope.branch))
        with self.settling:
            self.settle(scope)
            self.catalog.apply_if(scope.repo, scope.resolved, changes, expected)
        self.metrics.add("staged_changes", len(changes))

    def move(self, scope: Scope, old: str, new: str) -> bool:
        """Stage the rename of directory ``old`` to ``new`` as one move record, after this mount's journal
        of the branch (see :meth:`stage`); False if the branch takes no more (stage per key then).

        The record changes the branch row (a new staging token): if the row it replaced is the one the
        scope knew, the scope takes the new row as its own, checked now, so neither the mount's head check
        nor a read that began before the swap takes its own rename for a change made elsewhere (which
        would drop every cached inode of the branch: pjdfstest's rename/09 and 10 saw inode numbers change)."""
        self.drain(scope)
        with self.settling:
            self.settle(scope)
            rows = self.catalog.move_directory(scope.repo, scope.resolved, old, new)
        if rows is None:
            return False
        self.metrics.add("staged_changes", 1)
        before, after = rows
        done = self.now()
        with self.table.lock:
            if scope.signature == branch_signature(before):
                # Checked as of now: a read that began before the swap holds the row before it, and
                # taking that one (``Scopes.absorb``) would look like a change back.
                scope.signature = branch_signature(after)
                scope.checked = max(scope.checked, done)
        return True

    def drain(self, scope: Scope) -> None:
        """Wait until this mount's journal of the scope's branch is staged (write-back), so that what the
        catalog holds there is everything this mount wrote: before a change that reads it to move it."""
        self.io()
        if self.writeback is not None:
            self.writeback.drain((scope.repo, scope.branch))

    def hold(self, scope: Scope, path: str, entry: Entry, dropped: Sequence[tuple[str, Entry | None]] = ()) -> None:
        """Keep the create of new file ``path`` (and the deletion of the ``dropped`` marker of its directory)
        until its first close stages it (see held.py); the key is checked now, so a name no front end may
        write fails at create, as a staged create does."""
        encode_new_path(path)
        self.held.hold((scope.repo, scope.branch), [*dropped, (path, entry)])
        self.metrics.add("held_creates")

    def settle(self, scope: Scope, path: str = "") -> None:
        """Stage the creates held on the scope's branch at ``path`` or below it (``""``: all) before
        the catalog is read or written there (no-op, in memory, when none is)."""
        key = (scope.repo, scope.branch)
        if not self.held or not self.held.any_under(key, path):
            return
        self.io()  # before anything is taken: under ``nonblocking`` this raises and the thread runs it again
        with self.settling:
            changes = self.held.under(key, path)
            if changes:
                try:
                    self.catalog.apply(scope.repo, scope.resolved, changes)
                except BaseException:
                    self.held.put_back(key, changes)
                    raise
                self.metrics.add("staged_changes", len(changes))

    def settle_due(self) -> None:
        """Stage, alone, the creates held past ``HOLD_MAX`` (files created and kept open); called periodically.
        A branch that refuses them (deleted, protected meanwhile) is logged: each file's close stages it again."""
        with self.settling:
            for (repo, branch), changes in self.held.due().items():
                try:
                    self.catalog.apply(repo, branch, changes)
                except Unavailable:
                    self.held.put_back((repo, branch), changes)
                except LakeMountError as exc:
                    log.warning("staging %d new file(s) of %s/%s held for their first close failed: %s", len(changes), repo, branch,
                                exc)
                else:
                    self.metrics.add("staged_changes", len(changes))

    def settle_all(self) -> None:
        """Stage every held create (unmount); failures are logged."""
        with self.settling:
            for repo, branch in self.held.keys():
                changes = self.held.under((repo, branch), "")
                try:
                    self.catalog.apply(repo, branch, changes)
                except (LakeMountError, OSError) as exc:  # logged: the unmount goes on
                    log.error("staging %d new file(s) of %s/%s at unmount failed: %s", len(changes), repo, branch, exc)

    def now(self) -> float:
        return time.monotonic()

    def parent_of(self, node: Node) -> Node | None:
        """The known node of ``node``'s parent directory inside its scope (or the repository directory)."""
        if node.scope is None:
            return None
        if not node.path:
            if self.options.ref is not None:
                return None
            return self.table.by_key(("repo", node.scope.repo))
        return self.table.by_key((node.scope.key, os.path.dirname(node.path)))

    def object_ref(self, repo: Repository, entry: Entry) -> ObjectRef:
        """Where the reader finds ``entry``'s data."""
        return ObjectRef(self.catalog.physical_url(repo, entry.address), entry.size, entry.etag)


def join_path(parent: str, name: str) -> str:
    """The key of ``name`` inside directory ``parent`` (``name`` itself at the root, where ``parent`` is '')."""
    return f"{parent}/{name}" if parent else name


def key_len(path: str) -> int:
    """The length in bytes of ``path`` as a key (UTF-8, undecodable bytes kept by surrogateescape)."""
    return len(path.encode("utf-8", "surrogateescape"))


def decode_name(name: bytes) -> str:
    """A FUSE name as a str, undecodable bytes kept by surrogateescape (so it round-trips to the key)."""
    return name.decode("utf-8", "surrogateescape")


def with_changes(entry: Entry, **changes: Any) -> Entry:
    """A copy of ``entry`` with ``changes`` (entries are frozen)."""
    return entry._replace(**changes)
