"""Saving written content: a node's temp file becomes a staged entry, or is kept aside.

A file's first write or truncation creates its temp file
(:class:`~lakemount.fuse.writes.DirtyFile`, copy on first write); flush (close),
fsync, a truncate with no writer, and unmount save it: the temp file itself is
uploaded content-addressed and the file's entry is staged under the scope's
mutex; a new file's first close shares that staging with the other first closes
in flight on its branch (:mod:`~lakemount.fuse.closes`).  When the last handle closes the temp file is dropped, unless its
content could not be saved: then it is moved to the recovered directory and
logged, never silently lost.  A file of several names (hard links) is saved
under every name the branch gives it when it is saved, in one compare-and-set
(:mod:`~lakemount.fuse.linked`), so each name shows the new content.  With write-back the save journals the file
instead (:mod:`~lakemount.fuse.writeback`), and the node keeps its temp file,
now the journal's, until the pipeline has staged it; a file of several names is
saved directly (after the journal), since the journal keeps one path per save.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, BinaryIO, Final

from lakemount import waiting
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.links import with_group
from lakemount.catalog.model import Entry
from lakemount.catalog.writer import DataInfo
from lakemount.fuse import passthrough
from lakemount.fuse.closes import AGAIN, DETACHED, STAGED, Close, Closes
from lakemount.fuse.inodes import Node
from lakemount.fuse.linked import held_here, stage_file_change
from lakemount.fuse.listing import Child, ChildKind
from lakemount.fuse.mounted import Scope
from lakemount.fuse.scope import Scopes
from lakemount.fuse.state import MountState, with_changes
from lakemount.fuse.tree import Tree
from lakemount.fuse.writes import DirtyFile, Finish, Held

if TYPE_CHECKING:
    from lakemount.fuse.writeback import Writeback

log = logging.getLogger(__name__)

LOCAL_WRITE_MAX: Final = 1 << 20  # a file up to this size is written on the request loop (see write_is_local)


class Saver:
    """Creates, saves and drops the temp files of one mount's nodes."""

    def __init__(self, state: MountState, scopes: Scopes, tree: Tree) -> None:
        self.state = state
        self.scopes = scopes
        self.tree = tree
        self.table = state.table
        self.metrics = state.metrics
        self.writeback: Writeback | None = None  # set by the FileSystem when the mount writes back
        self.closes = Closes(self._stage_closes)  # first closes of new files in flight share a staging

    def ensure_dirty(self, node: Node, *, keep: bool) -> DirtyFile:
        """The node's temp file, created on first need (copying the current content if ``keep``)."""
        with node.lock:
            dirty = node.dirty
            if dirty is not None and not dirty.held:
                return dirty
            if dirty is not None:  # journaled: a new write starts from a copy, the journal keeps its file
                held, size = dirty, dirty.size
                scope = node.scope
                assert scope is not None
                dirty = self._new_dirty(scope.repo, held.reopen if keep else None, size)
                if keep:
                    dirty.saved_version = dirty.version
                node.dirty = dirty
                if not held.pending:
                    held.discard()
                return dirty
            scope = node.scope
            assert scope is not None
            entry = node.entry
            source = None
            size = 0
            repo = self.state.repo(scope.repo)
            if keep and entry is not None and entry.size > 0:
                size = entry.size
                source = functools.partial(self.state.catalog.open, repo, entry)
                self.metrics.add("copy_on_write_bytes", size)
            dirty = self._new_dirty(scope.repo, source, size)
            if keep or entry is None or entry.size == 0:
                dirty.saved_version = dirty.version  # same content as what is staged
            node.dirty = dirty
            return dirty

    def _new_dirty(self, repo_name: str, source: Callable[[], BinaryIO] | None, size: int) -> DirtyFile:
        """A temp file for a file of ``repo_name``: written in place or streamed as that repository's store allows."""
        catalog = self.state.catalog
        repo = self.state.repo(repo_name)
        return DirtyFile(self.state.options.spool_dir, source, size, in_place=catalog.stores_files_in_place(repo),
                         streaming=functools.partial(catalog.streamed_upload, repo), memory=True)

    def write_is_local(self, node: Node, offset: int, size: int) -> bool:
        """True if writing ``size`` bytes at ``offset`` touches only the node's temp file on this disk: no
        copy of stored content to make first, no save holding the temp file, and no part to send (a
        small file, or any file on a store that keeps the temp file itself as the object: there a
        large write waits at most for the file's hashing threads to take its bytes).  Writers that
        send small pieces (Hadoop's local filesystem: 4 KiB) then pay no thread hand-off per piece."""
        dirty = node.dirty
        if dirty is None:
            entry = node.entry
            return offset + size <= LOCAL_WRITE_MAX and (entry is None or entry.size == 0)
        if dirty.held or dirty.frozen or dirty.lock.locked():
            return False
        return offset + size <= LOCAL_WRITE_MAX or dirty.in_place

    def save_is_local(self, node: Node) -> bool:
        """True if saving ``node`` only journals it on this node's disk (write-back, no sync per close)."""
        dirty = node.dirty
        wb = self.writeback
        return (wb is not None and dirty is not None and self.state.local_journal() and not node.detached
                and not node.names and wb.save_is_local(dirty))

    def save_is_quick(self, node: Node) -> bool:
        """Without write-back, whether saving ``node`` may be tried on the request loop, refusing to wait
        (``lakemount.waiting``; a ``WouldWait`` sends it to a thread, nothing staged): a new file's first
        close (its create held), of a small file whose bytes are in memory, into a repository whose
        objects and staging both live on this node (``Catalog.writes_locally``: a file stored unsynced, a
        transaction of the embedded database that syncs nothing).  The caller checks that no other file is
        open for writing on the mount (a lone writer: a crowd's closes share stagings on threads)."""
        dirty = node.dirty
        scope = node.scope
        return (self.writeback is None and dirty is not None and dirty.in_memory and not dirty.kernel_written
                and not node.names and not node.detached and scope is not None and held_here(self.state, scope, node)
                and self.state.catalog.writes_locally(self.state.repo(scope.repo)))

    def release_is_local(self, node: Node, writable: bool) -> bool:
        """True if the last close of a handle on ``node`` only touches this disk: its temp file stays
        (the journal holds it, or another handle is open), is a small one to drop, or is journaled."""
        dirty = node.dirty
        if dirty is None or dirty.pending:
            return True
        if not dirty.modified:
            return node.opens > 1 or dirty.size <= LOCAL_WRITE_MAX
        return writable and self.save_is_local(node)

    def write(self, node: Node, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset`` into the node's temp file (created on first need)."""
        while True:
            try:
                return self.ensure_dirty(node, keep=True).pwrite(offset, data)
            except Held:  # journaled meanwhile: the next round writes to a copy
                continue

    def empty(self, node: Node) -> None:
        """Empty the node's content (``O_TRUNC``) in its temp file, created on first need.  A file empty already is
        emptied too: the open moves its mtime and ctime (POSIX), and its close must stage that mtime (an unchanged
        temp file saves nothing, and the entry staged kept the old one: a remount went back in time)."""
        while True:
            dirty = self.ensure_dirty(node, keep=False)
            try:
                dirty.truncate(0)
                return
            except Held:
                continue

    def truncate(self, node: Node, size: int) -> None:
        """Cut or extend a regular file's content to ``size``; saved at once if no handle writes it."""
        while True:
            try:
                self.ensure_dirty(node, keep=size > 0).truncate(size)
                break
            except Held:
                continue
        with self.table.lock:
            if node.entry is not None:
                node.entry = with_changes(node.entry, mtime_ns=time.time_ns())
        if node.writers == 0:
            # truncate(2) with no writer: nobody will close it, so save now.
            self.save(node)
            self.drop_dirty_if_idle(node)

    def save(self, node: Node, *, own_writer: bool = False) -> None:
        """Turn a node's modified temp file into a staged entry (no-op if unmodified or unlinked).

        ``own_writer``: the caller's own writable handle is still open (a close's FLUSH, an ``fsync``): it is not
        another writer of a file written through passthrough (``_may_write``)."""
        dirty = node.dirty
        if dirty is None or not dirty.modified:
            return
        scope = node.scope
        assert scope is not None
        shim_mtime = dirty.take_direct_mtime()  # the shim's writes (stop 57): the entry staged carries their mtime
        if shim_mtime:
            with self.table.lock:
                if node.entry is not None and shim_mtime > node.entry.mtime_ns:
                    node.entry = with_changes(node.entry, mtime_ns=shim_mtime)
        if node.detached:
            dirty.end_save(dirty.begin_save())
            return
        if self.writeback is not None and not node.names:
            self.writeback.save(node, dirty, functools.partial(self._may_write, node, dirty, own_writer) if dirty.kernel_written else None)
            return
        catalog = self.state.catalog
        # A new file's first close: staged with the other first closes in flight on the branch (closes.py),
        # which a staging's leader waits for while they store their data.
        first = held_here(self.state, scope, node) and not scope.mutex._is_owned()  # type: ignore[attr-defined]
        ticket = self.closes.storing(scope.key) if first else None
        try:
            small = dirty.read_small() if dirty.kernel_written else None  # a small file written through passthrough
            if small is not None:
                version, data, digests = small
                info = store_bytes(catalog, scope.repo, data, digests)
            elif dirty.in_memory:  # a small file: its bytes are stored from memory
                version, data, digests = dirty.snapshot(hold=False)
                info = store_bytes(catalog, scope.repo, data, digests)
            else:  # the temp file itself is uploaded (or becomes the object), with digests computed while it was written
                version, info = dirty.store(
                    lambda path, digests, link, finish: _store_file(catalog, scope.repo, path, digests, link, finish),
                    functools.partial(self._may_write, node, dirty, own_writer),
                )
        except BaseException:
            if ticket is not None:
                self.closes.stored(scope.key, ticket)
            raise
        if ticket is not None:
            outcome = self.closes.close(scope, Close(node, version, info), ticket=ticket)
            if outcome != AGAIN:
                dirty.end_save(version)
                if outcome == STAGED:
                    self.metrics.add("saved_files")
                    self.metrics.add("saved_bytes", info.size)
                return
        with waiting.holding(scope.mutex, "the branch's mutex"):
            if node.detached:
                dirty.end_save(version)
                return
            if held_here(self.state, scope, node):  # a save under the mutex (the lane's leader takes it too)
                self._stage_closes(scope, [Close(node, version, info)])
            else:
                # The branch has the file, and another mount may have linked it: under every name it has now.
                changed = with_changes(node.entry or Entry("", 0), address=info.address, size=info.size, etag=info.etag)
                entry, names = stage_file_change(self.state, scope, node, changed)
                self._saved(scope, node, entry, names)
        dirty.end_save(version)
        self.metrics.add("saved_files")
        self.metrics.add("saved_bytes", info.size)

    def _may_write(self, node: Node, dirty: DirtyFile, own_writer: bool = False) -> bool:
        """Whether a descriptor may still write ``node``'s temp file through passthrough while it is saved (then the
        save stores a copy): assumed for a file under ``SCAN_FROM`` bytes, else asked of the process table."""
        if dirty.size < passthrough.SCAN_FROM:
            self.metrics.add("passthrough_saved_copies")
            return True
        with self.table.lock:
            # Another writable open (the saving handle's own is not one) may have been granted with no descriptor in any
            # process's table yet: the scan cannot see it, and its writes would land in the saved file (replay55).
            if node.writers > (1 if own_writer else 0):
                self.metrics.add("passthrough_saved_copies")
                return True
            # From here a writable open waits for the release (``Handles.open_file``): the file may become saved content.
            dirty.saving_itself = True
        # Its names inside the branch: what a descriptor's path ends with, whatever the mount's root and prefix.
        if passthrough.descriptors_open(node.names or (node.path,)):
            dirty.saving_itself = False
            self.metrics.add("passthrough_saved_copies")
            return True
        return False

    def _stage_closes(self, scope: Scope, closes: Sequence[Close]) -> None:
        """Stage the first closes of new files ``closes`` as one change, under the scope's mutex (``Closes``'s
        stager): each file's entry supersedes its held create; what else the branch holds stays held but the
        deletions of those files' directories' markers, which go first.  Sets each close's outcome."""
        with waiting.holding(scope.mutex, "the branch's mutex"):
            latest: dict[int, Close] = {}
            for c in closes:
                node = c.node
                if node.detached:
                    c.outcome = DETACHED
                elif not held_here(self.state, scope, node):
                    c.outcome = AGAIN  # staged meanwhile: its close stages it by compare-and-set
                elif node.ino not in latest or c.version > latest[node.ino].version:
                    latest[node.ino] = c
            if not latest:
                return
            changes = [
                (c.node.path, with_group(with_changes(c.node.entry or Entry("", 0), address=c.info.address, size=c.info.size,
                                                      etag=c.info.etag), "", ()))
                for c in latest.values()
            ]
            catalog, held, key = self.state.catalog, self.state.held, (scope.repo, scope.branch)
            with waiting.holding(self.state.settling, "the mount's settling lock"):
                taken = held.take_closing(key, [path for path, _ in changes])
                paths = {path for path, _ in changes}
                markers = [(path, entry) for path, entry in taken if path not in paths]
                try:
                    # Every change here is applied to the cached listings (``_saved``; a dropped marker at
                    # the create): a listing of the directory is kept past head_ttl over it (ownchanges.py).
                    with self.state.own.recording():
                        if markers or len(changes) > 1:
                            catalog.apply(scope.repo, scope.resolved, [*markers, *changes])
                        else:
                            catalog.put_entry(scope.repo, scope.resolved, *changes[0])
                except BaseException:
                    held.put_back(key, taken)
                    raise
            for c, (_path, entry) in zip(latest.values(), changes, strict=True):
                self._saved(scope, c.node, entry, (c.node.path,), confined=not markers)
            for c in closes:
                if c.node.ino in latest:  # an earlier version of a file staged with its later one counts as staged
                    c.outcome = STAGED

    def _saved(self, scope: Scope, node: Node, entry: Entry, names: Sequence[str], *, confined: bool = True) -> None:
        """``node`` holds ``entry``, staged under ``names``: its node and the cached listings say so.  ``confined``:
        the staging changed nothing else (no directory marker dropped with it)."""
        within = os.path.dirname(names[0]) if confined and len(names) == 1 and names[0] else None
        with self.table.lock:
            self.scopes.local_change(scope, within=within)
            node.entry, node.fetched, node.gen = entry, self.state.now(), scope.gen
            for name in names:
                parent = self.table.by_key((scope.key, os.path.dirname(name))) if name else None
                if parent is not None:
                    self.tree.listing_put(parent, os.path.basename(name).encode("utf-8", "surrogateescape"), Child(ChildKind.FILE, entry))

    def drop_dirty_if_idle(self, node: Node) -> None:
        """Drop ``node``'s temp file once no handle is open (unsaved content is kept aside first)."""
        with node.lock:
            dirty = node.dirty
            if dirty is None or node.opens > 0 or dirty.pending:
                return
            if dirty.modified and not node.detached:
                self.keep_unsaved(node, dirty)
            else:
                dirty.discard()
            node.dirty = None
            # The kernel's pages hold the bytes we just saved: keep them.
            if node.entry is not None:
                node.page_identity = node.entry.identity()
        self.table.drop_if_dead(node)

    def keep_unsaved(self, node: Node, dirty: DirtyFile) -> None:
        """Content that could not be saved is moved aside, never silently dropped."""
        scope = node.scope
        options = self.state.options
        where = os.path.join(
            options.recovered_dir or os.path.join(options.spool_dir, "recovered"),
            f"{scope.repo if scope else ''}-{scope.name if scope else ''}-{int(time.time())}-{node.ino}-{os.path.basename(node.path)}",
        )
        try:
            dirty.keep_as(where)
            log.error("could not save %s: its content is kept in %s", node.path, where)
        except OSError as exc:
            log.error("could not save %s and could not keep its content: %s", node.path, exc)
            dirty.discard()

    def flush_all(self) -> int:
        """Save every modified open file (unmount, SIGTERM); returns how many failed."""
        failed = 0
        for node in self.table.nodes():
            if node.dirty is not None and node.dirty.modified and not node.detached:
                try:
                    self.save(node)
                except Exception as exc:  # keep saving the others
                    failed += 1
                    log.error("saving %s failed: %s", node.path, exc)
        return failed

    def close(self) -> None:
        """Save what can be saved, keep aside what cannot, and release every temp file."""
        self.flush_all()
        for node in self.table.nodes():
            dirty = node.dirty
            if dirty is not None and dirty.backing_id:  # the session's end drops it too: this is for a mount that goes on
                passthrough.close_backing(dirty.backing_id)
                dirty.backing_id = 0
            if dirty is not None:
                if dirty.modified and not node.detached:
                    self.keep_unsaved(node, dirty)
                else:
                    dirty.discard()
                node.dirty = None


def _store_file(
    catalog: Catalog, repo: str, path: str, digests: tuple[int, str, str] | None, link: bool, finish: Finish | None
) -> DataInfo:
    """Store a temp file that no write changes meanwhile (``Dirty.store``): the end of its streamed upload
    (``finish``), else through the catalog's writer; ``link``: it may become the object itself (a frozen
    ``DirtyFile`` copies itself before a change)."""
    if finish is not None:
        info = finish()
        if info is not None:
            return info
    with catalog.writer(repo) as w:
        w.write_file(path, digests=digests, link=link)
    return w.info


def store_bytes(catalog: Catalog, repo: str, data: bytes, digests: tuple[int, str, str]) -> DataInfo:
    """Store a small file's ``data`` whose digests are known (they are not computed again); durable against
    power loss within a second, or at the file's ``fsync(2)`` (``Catalog.writer``'s ``lazy``)."""
    with catalog.writer(repo, expected=len(data), hash_md5=False, hash_sha256=False, lazy=True) as w:
        w.write(data)
        w.vouch(sha256=digests[1], md5=digests[2])
    return w.info
