"""Write-back: a close returns once the file is in the node's journal; a pipeline uploads and stages later.

:meth:`Writeback.save` hands a written file's temp file to the journal
(:mod:`~lakemount.fuse.journal`) with its digests and its entry, and
:meth:`Writeback.journal_changes` journals a create (a file's own, with its first save); both return once the
record is written (and, with ``mount.journal_fsync``, synced).  One pipeline
thread takes the pending records in order, uploads their files (several at
once) and stages them with one ``Catalog.apply`` per branch and batch (while
closes keep coming, it holds a round up to ``HOLD_MAX`` after its first record,
so its work runs after the writer's, not beside it: stop 55); a
later record for a path overrides an earlier one in the batch, as it would
have staged after it.  Until a record is staged the node keeps its (held)
temp file, so this mount reads its own writes from the journal, and the
mount's listings and lookups see the pending entries and the directories
made by a pending mkdir (:meth:`overlay_child`, :meth:`overlay_listing`).
:meth:`drain` waits until a branch's records are staged: fsync(2), a
control-file commit or merge, any namespace change other than a create or a
mkdir, and unmount call it.  On S3 the small files of a batch are put by a
child process of the mount (``S3Adapter.put_many``, block/putprocess.py).  A
record the pipeline cannot stage (the branch is gone or protected, a bad key,
the store down for longer than
``mount.writeback_retry``) and a corrupt record found by the replay are kept
in the recovered directory, logged, and listed in ``.lakefs/status``; they
count as done, so they never block the journal.  The journal's bytes are
bounded (``mount.journal_bytes``): past the bound a save waits for the
pipeline, then fails with ENOSPC (the file's content stays unsaved and is
kept aside at its last close, as any unsaved content).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from lakemount.catalog.links import group_of
from lakemount.catalog.model import Entry, decode_value
from lakemount.catalog.writer import DataInfo, content_address, store_many
from lakemount.errors import LakeMountError, Unavailable
from lakemount.fuse.errno import FsError
from lakemount.fuse.inodes import Node
from lakemount.fuse.journal import Journal, Record
from lakemount.fuse.journal import boot_id as _journal_boot_id
from lakemount.fuse.linked import stage_on_names
from lakemount.fuse.listing import Child, ChildKind
from lakemount.fuse.scope import Scopes
from lakemount.fuse.state import MountState, with_changes
from lakemount.fuse.tree import Tree
from lakemount.fuse.writes import DirtyFile, Held, hash_fd, new_temp

if TYPE_CHECKING:
    from lakemount.catalog.catalog import Catalog

log = logging.getLogger(__name__)

BATCH: Final = 2000  # records staged per pipeline round (one apply per branch)
UPLOADS: Final = 8  # uploads in flight
LINGER: Final = 0.05  # seconds the pipeline waits to gather a batch when nobody waits for it
HOLD_MAX: Final = 3.0  # seconds a round is held at most while closes keep coming (stop 55): the lag it may add
AWAIT_JOURNALED_S: Final = 30.0  # a close waits this long at most for another close's record of the same content
SYNC_INTERVAL: Final = 1.0  # seconds between syncs of the journal's files when closes do not fsync (each sync stalls the disk)
INLINE_MAX: Final = 64 << 10  # a file up to this size is journaled inside its record, not beside it
MEMORY_HELD_MAX: Final = 64 << 20  # journaled small files' bytes kept in RAM until staged, at most (then on disk)
LOCAL_SAVE_MAX: Final = 1 << 20  # a file up to this size is journaled on the request loop (save_is_local)
BACKOFF: Final = (0.05, 2.0)  # first and longest wait between retries of an unavailable store
HASH_LATER_FROM: Final = 1 << 20  # a kernel-written file this large is journaled unhashed: the pipeline hashes it (stop 55)

BranchKey = tuple[str, str]


@dataclass(eq=False)
class Pending:
    """A journaled record on its way to the branch."""

    seq: int
    repo: str
    branch: str
    changes: list[tuple[str, Entry | None]]  # apply records; a put's single change is filled in at upload
    path: str = ""  # put records: the file's path, its entry (address to come), data file and digests
    base: Entry | None = None
    data: str = ""
    inline: bytes | None = None  # put records of a small file held in memory: its bytes (no data file)
    digests: tuple[int, str, str] | None = None  # None for put records journaled unhashed until the pipeline hashes them
    node: Node | None = None  # put records of this run: the node holding the data file as its temp file
    dirty: DirtyFile | None = None
    # put records of a private copy of a kernel-written file (a passthrough open may still write the temp file):
    # the node and its temp file, which it reads from (``pending``) until the copy is staged (stop 55)
    copy_of: tuple[Node, DirtyFile] | None = None
    hashed_late: bool = False  # put records journaled unhashed, once the pipeline hashed them
    size: int = 0
    failed_since: float = 0.0
    error: str = ""
    known: bool = False  # put records: the branch had the file when it was saved (staged on its names: linked.py)
    queued: float = 0.0  # time.monotonic() when it was queued (a round is held HOLD_MAX after its first record at most)
    names: tuple[str, ...] = ()  # put records, once staged: every name the file had then

    @property
    def key(self) -> BranchKey:
        return (self.repo, self.branch)


@dataclass
class Report:
    """What the pipeline did, for ``.lakefs/status`` and ``.lakefs/stats``."""

    kept: list[dict[str, Any]] = field(default_factory=list)  # records kept aside, with why and where
    counts: collections.Counter[str] = field(default_factory=collections.Counter)


class Writeback:
    """The journal and pipeline of one mount."""

    def __init__(
        self, state: MountState, scopes: Scopes, tree: Tree, journal: Journal, *, recovered_dir: str, max_bytes: int,
        retry: float,
    ) -> None:
        self.state = state
        self.scopes = scopes
        self.tree = tree
        self.catalog = state.catalog
        self.journal = journal
        self.recovered_dir = recovered_dir
        self.max_bytes = max_bytes
        self.retry = retry
        self.space_wait = 30.0  # how long a save waits for the pipeline to free journal space before ENOSPC
        self.report = Report()
        self._cond = threading.Condition()
        self._pending: collections.deque[Pending] = collections.deque()
        self._per_branch: collections.Counter[BranchKey] = collections.Counter()
        self._overlay: dict[BranchKey, dict[str, tuple[int, Entry | None]]] = {}
        # Directories made by a journaled mkdir (its marker) not staged yet: the catalog does not know them.
        self._dirs: dict[BranchKey, collections.Counter[str]] = {}
        self._fresh: set[tuple[str, str, str]] = set()  # files whose journaled create is not staged: no one else knows them
        # Creates of files opened by them, not journaled yet: the file's first save journals its entry, one record
        # a file (:meth:`journal_changes`); anything that waits for the branch journals them first.
        self._deferred: dict[BranchKey, dict[str, Entry]] = {}
        self._order = threading.Lock()  # an append and its enqueue, so the pending queue keeps the log's order
        self._bytes = 0
        self._in_memory = 0  # bytes of pending records held in RAM (``Pending.inline``), bounded by MEMORY_HELD_MAX
        self._warned = 0.0
        self._waiting = 0  # drains in progress: the pipeline does not linger for more records
        self._idle = False  # the pipeline waits for a first record (an enqueue must wake it)
        self._last_queued = 0.0  # time.monotonic() of the last record queued: closes still coming hold a round
        self._stop = False
        self._threads: list[threading.Thread] = []
        self._uploads = ThreadPoolExecutor(UPLOADS, thread_name_prefix="lakemount-upload")
        self._replaying = False  # start() stages what an earlier run left, before the mount serves

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Replay what the journal holds from an earlier run (staged before this returns), then start the pipeline."""
        records = self.journal.replay()
        if records:
            log.warning("write-back journal %s: replaying %d record(s) left by an earlier run", self.journal.dir, len(records))
        with self._cond:
            for rec in records:
                if rec.corrupt:
                    self._keep_corrupt(rec)
                    continue
                item = _pending_of(rec)
                if item is None:
                    self._keep_corrupt(Record(rec.seq, rec.body, "an unknown record", rec.raw))
                    continue
                self._enqueue(item)
        self._replaying = bool(records)
        self._start_thread(self._run, "lakemount-writeback")
        if not self.journal.fsync:
            self._start_thread(self._sync_loop, "lakemount-journal-sync")
        self.drain(None)
        self._replaying = False
        # What is left in the spool was never closed (a file being written when the mount died): never acknowledged.
        for name in os.listdir(self.journal.spool):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.journal.spool, name))
        if records:
            log.warning("write-back journal %s: replay done (%s)", self.journal.dir, dict(self.report.counts))

    def _start_thread(self, target: Any, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        """Stage everything journaled (kept aside what cannot be), then stop the pipeline."""
        self.drain(None)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join()
        self._uploads.shutdown()
        self.journal.sync()
        self.journal.close()

    # ------------------------------------------------------------------ journaling
    def save(self, node: Node, dirty: DirtyFile, may_write: Callable[[], bool] | None = None) -> None:
        """Journal ``node``'s written content (its temp file becomes the journal's data file).

        A file the kernel wrote through passthrough (``may_write``: whether a descriptor may still write it, as
        for ``DirtyFile.store``) of ``HASH_LATER_FROM`` bytes or more is journaled unhashed (stop 55): its record
        has its size and no digests, its entry no content address until the pipeline hashes the data file.
        Raises ``FsError(ENOSPC)`` when the journal stays full, ``OSError`` from the disk.
        """
        scope = node.scope
        assert scope is not None
        self._wait_for_space(dirty.size)
        share = node.writers > 1  # another handle may write on: journal a copy, keep the temp file
        content: bytes | None = None
        if dirty.in_memory and self._in_memory + dirty.size <= MEMORY_HELD_MAX:
            # A small file: its bytes ride in the record, with no data file at all.  (Past the bound, say
            # with the store down, the bytes go to a data file as a large file's do, not to RAM.)
            data = ""
            version, content, digests = dirty.snapshot(hold=not share)
        else:
            try:
                version, (data, known_digests) = dirty.store(
                    lambda path, known, _link, _finish: self._hand_over(dirty, path, known, share=share),
                    may_write, hash_later_from=HASH_LATER_FROM, unless_held=True,
                )
            except Held:
                self._await_journaled(node, dirty, may_write)
                return
            copied = data != dirty.path and dirty.kernel_written  # a copy: a passthrough open may still write the file
            share = share or copied
            if known_digests is None:
                self._save_unhashed(node, dirty, version, data)
                return
            digests = known_digests
        # The content address is known from the digests: the node's entry is final now, before any upload.
        base = with_changes(node.entry or Entry("", 0), address=content_address(digests[1]), size=digests[0], etag=digests[2])
        # A file the branch has may have been linked by another mount meanwhile: it is staged on its names then.
        known = (scope.repo, scope.branch, node.path) not in self._fresh
        item = Pending(0, scope.repo, scope.branch, [], path=node.path, base=base, data=data, inline=content,
                       digests=digests, node=None if share else node, dirty=None if share else dirty, size=digests[0],
                       known=known)
        if content is None and copied and not dirty.held:
            # The node's entry names an object not stored until the copy is staged: it reads its temp file until then.
            item.copy_of = (node, dirty)
            dirty.pending = True
        body = {"op": "put", "repo": item.repo, "branch": item.branch, "path": item.path, "entry": base.value().hex(),
                "data": data, "size": digests[0], "sha256": digests[1], "md5": digests[2], "known": known}
        if content is not None:
            body["inline"] = content  # bytes: the journal writes them as base64
            inline = True
        else:
            inline = not share and digests[0] <= INLINE_MAX and _inline(body, dirty.fd, digests[0])
        # A small file's bytes ride in its record: the log's one sync covers them (none per data file).
        self._append_put(node, dirty, version, item, body, data_fd=-1 if share or inline else dirty.fd,
                         data_path="" if inline else data, share=share)

    def _save_unhashed(self, node: Node, dirty: DirtyFile, version: int, data: str) -> None:
        """Journal a large kernel-written file held unhashed (``save``, stop 55): the record names its data file and
        size, and the boot it was closed in (a replay in another boot cannot trust bytes no digest vouches for,
        unless the journal synced them before the record: ``mount.journal_fsync``)."""
        scope = node.scope
        assert scope is not None
        size = os.fstat(dirty.fd).st_size
        # No content address until the pipeline hashes it: this mount reads the journal's file meanwhile.
        base = with_changes(node.entry or Entry("", 0), address="", size=size, etag="")
        known = (scope.repo, scope.branch, node.path) not in self._fresh
        item = Pending(0, scope.repo, scope.branch, [], path=node.path, base=base, data=data, digests=None, node=node,
                       dirty=dirty, size=size, known=known)
        body = {"op": "put", "repo": item.repo, "branch": item.branch, "path": item.path, "entry": base.value().hex(),
                "data": data, "size": size, "sha256": "", "md5": "", "known": known, "boot": boot_id(),
                "synced": self.journal.fsync}
        self._append_put(node, dirty, version, item, body, data_fd=dirty.fd, data_path=data, share=False)
        self.state.metrics.add("journaled_unhashed")

    def _append_put(self, node: Node, dirty: DirtyFile, version: int, item: Pending, body: dict[str, Any], *,
                    data_fd: int, data_path: str, share: bool) -> None:
        """Append put record ``body`` of ``item`` (its ``seq`` set) and queue it: see ``save``."""
        with self._order:
            try:
                item.seq = self.journal.append(body, data_fd=data_fd, data_path=data_path)
            except OSError:
                if not share:
                    dirty.held = dirty.pending = False
                elif item.copy_of is not None:
                    dirty.pending = False
                if share and item.data:
                    with contextlib.suppress(OSError):
                        os.unlink(item.data)
                raise
            dirty.end_save(version)
            with self.state.table.lock:
                node.entry = item.base
            with self._cond:
                deferred = self._deferred.get(item.key)
                if deferred is not None and deferred.pop(item.path, None) is not None:  # this record is its create too
                    if not deferred:
                        del self._deferred[item.key]
                    self.state.metrics.add("creates_merged")
                self._enqueue(item)
        self.state.metrics.add("journaled_files")
        self.state.metrics.add("journaled_bytes", item.size)

    def save_is_local(self, dirty: DirtyFile) -> bool:
        """True if :meth:`save` of ``dirty`` waits for nothing: the journal has room, the digests are known
        (no hashing of a large file), and nothing else holds the temp file."""
        if self.journal.fsync or dirty.size > LOCAL_SAVE_MAX or dirty.lock.locked() or dirty.kernel_written:
            return False
        with self._cond:
            return not self._bytes or self._bytes + dirty.size <= self.max_bytes

    def _await_journaled(self, node: Node, dirty: DirtyFile, may_write: Callable[[], bool] | None) -> None:
        """A save that found the temp file held: another close of the file (a handle's release, say, while this
        flush waited for the file's lock) handed this very content to the journal, and a held file never changes
        again (a write goes to a new copy).  Its data file may be staged and deleted already, so there is nothing
        to copy: return once that save's record is appended (``saved_version``), so this close, too, is
        acknowledged only by a record on disk; if its append failed (the hold is undone), save as usual."""
        self.state.metrics.add("saves_already_journaled")
        version = dirty.version  # a held file's for good
        deadline = time.monotonic() + AWAIT_JOURNALED_S
        while dirty.held and dirty.saved_version < version:
            if time.monotonic() > deadline:  # the other save failed between its hand-over and its append
                log.error("%s: another close journaled this content and its record never came; EIO", node.path)
                raise FsError(errno.EIO, "the journal record of this content never came")
            time.sleep(0.001)  # the other save appends its record right after its hand-over: microseconds
        if not dirty.held:
            self.save(node, dirty, may_write)

    def _hand_over(self, dirty: DirtyFile, path: str, known: tuple[int, str, str] | None, *,
                   share: bool) -> tuple[str, tuple[int, str, str] | None]:
        """Under the temp file's lock: its digests, and the journal's data file (itself, or a copy when shared).

        ``path`` other than the temp file's is a private copy of a kernel-written file (``DirtyFile.store``
        deletes it once this returns): it becomes the data file by a new name.  Digests None (``known`` None
        for the temp file itself): a kernel-written file handed over unhashed (stop 55)."""
        if path != dirty.path:
            assert known is not None
            fd, copy = new_temp(self.journal.spool, "j-")
            os.close(fd)
            os.replace(path, copy)
            if self.journal.fsync:
                with open(copy, "rb") as f:
                    os.fdatasync(f.fileno())
            return copy, known
        if known is None and dirty.kernel_written and not share:
            dirty.held = dirty.pending = True
            return path, None
        digests = known or _hash(path)
        if share:
            fd, copy = new_temp(self.journal.spool, "j-")
            os.close(fd)
            shutil.copyfile(path, copy)
            if self.journal.fsync:
                with open(copy, "rb") as f:
                    os.fdatasync(f.fileno())
            return copy, digests
        dirty.held = dirty.pending = True
        return path, digests

    def journal_changes(self, scope: Any, changes: Sequence[tuple[str, Entry | None]], *, opened: bool = False) -> None:
        """Journal staged changes (a create) made without reading the branch; raises ``OSError`` from the disk.

        ``opened``: the create of one file that the create opened (and nothing else, no directory marker
        dropped).  Its record is deferred: the file's first save journals the file's entry, which stages
        over the create's, so a small file written and closed costs one record, not two.  Until then the
        mount shows it (its listings, this overlay); whatever waits for the branch's journal (:meth:`drain`:
        a namespace change, fsync, a commit, unmount), a close that saves nothing (``touch``,
        :meth:`journal_create`) and the journal's sync every ``SYNC_INTERVAL`` journal it first.  What a
        ``kill -9`` before then loses is a name whose file was never closed: nothing acknowledged, as a held
        create without write-back (held.py).  With ``mount.journal_fsync`` nothing is deferred.
        """
        key = (scope.repo, scope.branch)
        path, entry = changes[0] if len(changes) == 1 else ("", None)
        if opened and entry is not None and not self.journal.fsync:
            with self._cond:
                self._deferred.setdefault(key, {})[path] = entry
                self._fresh.add((key[0], key[1], path))
                self._overlay.setdefault(key, {})[path] = (0, entry)  # seq 0: replaced by the record that journals it
            return
        self._journal_apply(key, list(changes))

    def _journal_apply(self, key: BranchKey, changes: list[tuple[str, Entry | None]]) -> None:
        item = Pending(0, key[0], key[1], changes)
        self._fresh.update((item.repo, item.branch, path) for path, entry in changes if entry is not None)
        body = {"op": "apply", "repo": item.repo, "branch": item.branch,
                "changes": [[p, None if e is None else e.value().hex()] for p, e in changes]}
        with self._order:
            item.seq = self.journal.append(body)
            with self._cond:
                self._enqueue(item)

    def journal_create(self, scope: Any, path: str) -> None:
        """If ``path``'s create is deferred (a file closed with nothing to save: ``touch``), journal the
        branch's deferred creates now: the close acknowledges the empty file."""
        deferred = self._deferred.get((scope.repo, scope.branch))  # a look without the lock: each close asks
        if deferred is None or path not in deferred:
            return
        self._journal_deferred((scope.repo, scope.branch))

    def _journal_deferred(self, key: BranchKey | None) -> None:
        """Journal the deferred creates of branch ``key`` (None: every branch), one record per branch."""
        with self._order:
            with self._cond:
                if not self._deferred:
                    return
                keys = [key] if key is not None else list(self._deferred)
                todo = [(k, self._deferred.pop(k)) for k in keys if k in self._deferred]
            for i, (k, creates) in enumerate(todo):
                changes: list[tuple[str, Entry | None]] = list(creates.items())
                item = Pending(0, k[0], k[1], changes)
                body = {"op": "apply", "repo": k[0], "branch": k[1],
                        "changes": [[p, None if e is None else e.value().hex()] for p, e in changes]}
                try:
                    item.seq = self.journal.append(body)
                except OSError:
                    with self._cond:  # kept deferred: a later drain or sync tries again
                        for k2, rest in todo[i:]:
                            self._deferred.setdefault(k2, {}).update(rest)
                    raise
                with self._cond:
                    self._enqueue(item)
                self.state.metrics.add("creates_journaled", len(changes))

    def _wait_for_space(self, size: int) -> None:
        deadline = time.monotonic() + self.space_wait
        with self._cond:
            while self._bytes and self._bytes + size > self.max_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.report.counts["refused_full"] += 1
                    log.error("write-back journal %s is full (%d of %d bytes pending for the store): ENOSPC",
                              self.journal.dir, self._bytes, self.max_bytes)
                    raise FsError(errno.ENOSPC, "the write-back journal is full")
                self._cond.wait(min(left, 1.0))

    def _enqueue(self, item: Pending) -> None:
        """Queue ``item`` (caller holds the condition)."""
        item.queued = self._last_queued = time.monotonic()
        self._pending.append(item)
        self._per_branch[item.key] += 1
        self._bytes += item.size
        if item.inline is not None:
            self._in_memory += len(item.inline)
        over = self._overlay.setdefault(item.key, {})
        if item.base is not None:
            over[item.path] = (item.seq, item.base)
        for path, entry in item.changes:
            over[path] = (item.seq, entry)
        made = _made_dirs(item)
        if made:
            self._dirs.setdefault(item.key, collections.Counter()).update(made)
        # Only the pipeline waits for records, and only its wait for the first one ends with one (a held round
        # looks again every LINGER).  Waking it for each record would cost every close a thread switch.
        if self._idle:
            self._cond.notify_all()

    # ------------------------------------------------------------------ waiting
    def drain(self, key: BranchKey | None) -> None:
        """Wait until every record journaled for branch ``key`` (None: every branch) is staged or kept aside,
        its deferred creates journaled first."""
        self._journal_deferred(key)
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
            try:
                while self._per_branch[key] if key is not None else self._pending:
                    if self._stop and not any(t.is_alive() for t in self._threads):
                        raise Unavailable("the write-back pipeline has stopped")
                    self._cond.wait(1.0)
            finally:
                self._waiting -= 1

    def pending(self, key: BranchKey | None = None) -> int:
        with self._cond:
            return self._per_branch[key] if key is not None else len(self._pending)

    def status(self, repo: str, branch: str) -> dict[str, Any]:
        """The ``writeback`` part of ``.lakefs/status``: records not yet staged, and what was kept aside."""
        with self._cond:
            kept = [k for k in self.report.kept if k.get("repo") in (repo, None) and k.get("branch") in (branch, None)]
            return {"pending": self._per_branch[(repo, branch)], "kept_aside": kept[-100:],
                    "kept_aside_count": len(kept), "counts": dict(self.report.counts)}

    # ------------------------------------------------------------------ overlay
    def overlay_child(self, scope: Any, path: str, child: Child | None) -> Child | None:
        """``child`` as the catalog answered, corrected by what this mount journaled for ``path`` (a file, or a
        directory made by a journaled mkdir)."""
        key = (scope.repo, scope.branch)
        with self._cond:
            over = self._overlay.get(key)
            found = over.get(path) if over else None
            made = self._dirs.get(key)
            if found is None and child is None and made and made[path] > 0:
                marker = over.get(path + "/") if over else None
                return Child(ChildKind.DIR, marker[1] if marker is not None else None)
        if found is None:
            return child
        entry = found[1]
        if entry is None:
            return None
        return Child(ChildKind.SYMLINK if entry.target else ChildKind.FILE, entry)

    def pending_marker(self, scope: Any, dir_path: str) -> Entry | None:
        """The marker of directory ``dir_path`` if this mount journaled it (a mkdir) and has not staged it."""
        with self._cond:
            over = self._overlay.get((scope.repo, scope.branch))
            found = over.get(dir_path + "/") if over else None
        return found[1] if found is not None else None

    def overlay_listing(self, scope: Any, dir_path: str, children: dict[bytes, Child]) -> bool:
        """Add (or remove) in ``children`` the pending entries directly inside ``dir_path``; True if
        ``dir_path`` itself is a directory made by a journaled mkdir not staged yet (the catalog may know
        nothing of it)."""
        prefix = dir_path + "/" if dir_path else ""
        branch = (scope.repo, scope.branch)
        with self._cond:
            over = self._overlay.get(branch) or {}
            items = list(over.items())
            counts = self._dirs.get(branch)
            made = {d: over.get(d + "/", (0, None))[1] for d, n in counts.items() if n > 0} if counts else {}
        for d, marker in made.items():
            if d.startswith(prefix) and "/" not in d[len(prefix):]:
                children.setdefault(d[len(prefix):].encode("utf-8", "surrogateescape"), Child(ChildKind.DIR, marker))
        for path, (_seq, entry) in items:
            if not path.startswith(prefix) or path.endswith("/"):
                continue
            name = path[len(prefix):]
            if "/" in name:
                continue
            key = name.encode("utf-8", "surrogateescape")
            if entry is None:
                children.pop(key, None)
            else:
                children[key] = Child(ChildKind.SYMLINK if entry.target else ChildKind.FILE, entry)
        return dir_path in made

    # ------------------------------------------------------------------ the pipeline
    def _sync_loop(self) -> None:
        while True:
            with self._cond:
                if self._stop:
                    return
            try:
                self._journal_deferred(None)  # a file kept open: its create is journaled within SYNC_INTERVAL
            except OSError as exc:
                log.warning("write-back journal %s: cannot journal creates: %s", self.journal.dir, exc)
            self.journal.sync()
            time.sleep(SYNC_INTERVAL)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._idle = True
                    try:
                        self._cond.wait()
                    finally:
                        self._idle = False
                if not self._pending:
                    return
                # Gather a batch, unless someone waits for the records (a drain: fsync, commit, unmount, a namespace
                # change).  While closes keep coming (the last within LINGER), the round is held, up to HOLD_MAX
                # after the oldest record it takes (stop 55): its uploads and staging would take the node's CPU
                # and the GIL from the writer's requests, a round at a time; held, they go in larger rounds once
                # the writer pauses.  A journal half full (or the small files' bytes held in RAM) ends the hold.
                hold_end = self._pending[0].queued + HOLD_MAX
                while not self._waiting and not self._stop and not self._filling():
                    now = time.monotonic()
                    end = min(self._last_queued + LINGER, hold_end)
                    if now >= end:
                        break
                    self._cond.wait(end - now)
                batch = [self._pending[i] for i in range(min(BATCH, len(self._pending)))]
            try:
                self._stage_batch(batch)
            except Exception:  # never die with records pending: log and try again
                log.exception("write-back pipeline round failed; retrying")
                time.sleep(BACKOFF[0])
                continue
            # Under the appenders' lock: a record appended between the check that nothing is pending and the
            # log's restart would be erased with it (a save journaled while its file's create was staged alone:
            # the record stayed queued, so nothing showed until a kill -9, whose replay no longer had it).
            with self._order:
                with self._cond:
                    for _ in batch:
                        item = self._pending.popleft()
                        self._per_branch[item.key] -= 1
                        if self._per_branch[item.key] <= 0:
                            del self._per_branch[item.key]
                        self._bytes -= item.size
                        if item.inline is not None:
                            self._in_memory -= len(item.inline)
                        made = _made_dirs(item)
                        if made:
                            counts = self._dirs[item.key]
                            counts.subtract(made)
                            if not +counts:
                                del self._dirs[item.key]
                        over = self._overlay.get(item.key)
                        if over is not None:
                            for path in [item.path] if item.base is not None else [p for p, _e in item.changes]:
                                if over.get(path, (None,))[0] == item.seq:
                                    del over[path]
                            if not over:
                                del self._overlay[item.key]
                    empty = not self._pending
                    self._cond.notify_all()
                done = self.journal.append({"op": "done", "upto": batch[-1].seq})
                if empty:
                    self.journal.restart_if(done)

    def _filling(self) -> bool:
        """True if the journal's pending bytes, or the small files' bytes held in RAM, reached half their bound: a
        held round goes (caller holds the condition)."""
        return 2 * self._bytes >= self.max_bytes or 2 * self._in_memory >= MEMORY_HELD_MAX

    def _stage_batch(self, batch: list[Pending]) -> None:
        """Upload the batch's files, then stage it, one apply per run of records on one branch."""
        todo = [item for item in batch if item.base is not None and not item.changes and not item.error]
        while todo:
            small = [item for item in todo if item.inline is not None]
            results = {id(item): ok for item, ok in zip(small, self._upload_small(small), strict=True)}
            rest = [item for item in todo if item.inline is None]
            results.update({id(item): ok for item, ok in zip(rest, self._uploads.map(self._upload, rest), strict=True)})
            todo = [item for item in todo if not results[id(item)] and not item.error]
            if todo:
                self._backoff(todo)
        self.report.counts["batches"] += 1
        i = 0
        while i < len(batch):
            j = i
            while j < len(batch) and batch[j].key == batch[i].key:
                j += 1
            self._stage_run([item for item in batch[i:j] if not item.error])
            for item in batch[i:j]:
                if item.error:
                    self._keep(item)
            i = j

    def _upload_small(self, items: list[Pending]) -> list[bool]:
        """Store the in-memory files of ``items`` as one batch per repository (``store_many``: one durable
        step on the local store, not two fsyncs a file); True for each stored."""
        by_repo: dict[str, list[Pending]] = {}
        for item in items:
            assert item.base is not None and item.digests is not None
            by_repo.setdefault(item.repo, []).append(item)
        done: set[int] = set()
        for repo, group in by_repo.items():
            try:
                bodies = [(item.inline or b"", item.digests[1], item.digests[2]) for item in group]  # type: ignore[index]
                infos = store_many(self.catalog, self.catalog.kept_repository(repo), bodies)
            except Unavailable as exc:
                self.report.counts["upload_retries"] += len(group)
                for item in group:
                    self._failed(item, f"the store is unavailable: {exc}")
                continue
            except (LakeMountError, OSError) as exc:
                for item in group:
                    item.error = f"upload failed: {exc}"
                continue
            for item, info in zip(group, infos, strict=True):
                assert item.base is not None
                item.changes = [(item.path, with_changes(item.base, address=info.address, size=info.size, etag=info.etag))]
                done.add(id(item))
            self.report.counts["uploaded"] += len(group)
        return [id(item) in done for item in items]

    def _upload(self, item: Pending) -> bool:
        """Store ``item``'s data file (hashed first if it was journaled unhashed); True when done (or failed for
        good: ``item.error``)."""
        assert item.base is not None
        try:
            if item.digests is None:
                self._hash_item(item)
            assert item.digests is not None
            info = _store_file(self.catalog, item.repo, item.data, item.digests)
            if item.hashed_late:
                _drop_pages(item.data)
        except Unavailable as exc:
            self.report.counts["upload_retries"] += 1
            return self._failed(item, f"the store is unavailable: {exc}")
        except (LakeMountError, OSError) as exc:
            item.error = f"upload failed: {exc}"
            return False
        item.changes = [(item.path, with_changes(item.base, address=info.address, size=info.size, etag=info.etag))]
        self.report.counts["uploaded"] += 1
        return True

    def _hash_item(self, item: Pending) -> None:
        """Hash the data file of a record journaled unhashed (stop 55): its digests, and the content address of its
        entry on the node and in the overlay (both lacked one).  The file is held: nothing writes it any more.
        The replay names each such file it hashes, before and after (a kill -9 meanwhile replays it again)."""
        if self._replaying:
            log.info("write-back replay: hashing %s (%d bytes, journaled unhashed, record %d)", item.path, item.size,
                     item.seq)
        with open(item.data, "rb") as f:
            digests = hash_fd(f.fileno())
        if self._replaying:
            log.info("write-back replay: hashed %s (record %d)", item.path, item.seq)
        if digests[0] != item.size:  # the replay checked the size; this run's own data file never changes
            raise OSError(errno.EIO, f"journal data file {item.data} holds {digests[0]} bytes, not {item.size}")
        assert item.base is not None
        unhashed, item.digests, item.hashed_late = item.base, digests, True
        item.base = with_changes(unhashed, address=content_address(digests[1]), etag=digests[2])
        node = item.node
        if node is not None:
            with self.state.table.lock:
                if node.entry is unhashed:
                    node.entry = item.base
        with self._cond:
            over = self._overlay.get(item.key)
            if over is not None and over.get(item.path, (None,))[0] == item.seq:
                over[item.path] = (item.seq, item.base)
        self.report.counts["hashed_after_close"] += 1

    def _failed(self, item: Pending, why: str) -> bool:
        """Note a retryable failure; past ``retry`` seconds of them it is final (``item.error``)."""
        now = time.monotonic()
        if not item.failed_since:
            item.failed_since = now
        if now - self._warned >= 10.0:  # one line per streak of failures, not one per file
            self._warned = now
            log.warning("write-back: %s/%s/%s: %s; retrying for up to %.1fs", item.repo, item.branch, item.path or "(changes)",
                        why, self.retry)
        if now - item.failed_since >= self.retry:
            item.error = f"{why} (for {now - item.failed_since:.1f}s, past mount.writeback_retry)"
        return False

    def _backoff(self, items: list[Pending]) -> None:
        first = min(i.failed_since for i in items if i.failed_since) if any(i.failed_since for i in items) else time.monotonic()
        time.sleep(min(BACKOFF[1], max(BACKOFF[0], (time.monotonic() - first) / 4)))

    def _stage_run(self, items: list[Pending]) -> None:
        """Stage records of one branch as one apply (a later change of a path wins); retried while unavailable.
        A save of a file the branch already had is staged alone, in its place in the run, on every name the
        file has then (a compare-and-set: :func:`~lakemount.fuse.linked.stage_on_names`)."""
        if not items:
            return
        alone = [i for i, item in enumerate(items) if item.known and item.base is not None]
        if alone and len(items) > 1:
            start = 0
            for i in alone:
                self._stage_run(items[start:i])
                self._stage_run([items[i]])
                start = i + 1
            self._stage_run(items[start:])
            return
        repo, branch = items[0].key
        merged: dict[str, Entry | None] = {}
        made: set[str] = set()  # markers of journaled mkdirs in this run: keys the branch did not have
        for item in items:
            for path, entry in item.changes:
                merged.pop(path, None)
                if entry is None and path in made:
                    made.discard(path)  # made and emptied in this run (a create inside): the branch never sees it
                    continue
                if entry is not None and item.base is None and path.endswith("/"):
                    made.add(path)
                merged[path] = entry
        while True:
            try:
                if alone:
                    (path, entry), = merged.items()
                    assert entry is not None
                    entry, items[0].names = stage_on_names(self.catalog, repo, branch, path, entry)
                    items[0].changes = [(path, entry)]
                elif all(item.node is not None or item.base is None for item in items):
                    # Each change is in the cached listings already (a create's) or is put there when
                    # staged (``_settle``): a listing is kept past head_ttl over it (ownchanges.py).
                    with self.state.own.recording():
                        self.catalog.apply(repo, branch, list(merged.items()))
                else:
                    self.catalog.apply(repo, branch, list(merged.items()))
                break
            except Unavailable as exc:
                self.report.counts["stage_retries"] += 1
                for item in items:
                    self._failed(item, f"staging is unavailable: {exc}")
                if all(item.error for item in items):
                    return
                self._backoff(items)
            except LakeMountError as exc:
                if len(items) == 1:
                    items[0].error = f"cannot be staged: {exc}"
                    return
                for item in items:  # find the records at fault; the others stage
                    self._stage_run([item])
                return
        self.report.counts["staged"] += len(items)
        for item in items:
            self._staged(item)

    def _staged(self, item: Pending) -> None:
        """``item`` is on its branch: its node reads the stored object from now on; its data file goes."""
        node, dirty = item.node, item.dirty
        entry = item.changes[0][1] if item.base is not None and item.changes else None
        if item.base is None:
            self._fresh.difference_update((item.repo, item.branch, path) for path, _entry in item.changes)
        elif not item.known:  # a new file whose save journaled its create too: staged, others may know it now
            self._fresh.discard((item.repo, item.branch, item.path))
        if node is not None and dirty is not None and entry is not None:
            self._settle(node, dirty, entry)
            if (len(item.names) > 1 or node.names) and not node.detached:
                group = group_of(entry)
                self.state.table.set_names(node, group.gid if group is not None else "", item.names if len(item.names) > 1 else ())
        elif dirty is not None:
            dirty.pending = False
        if item.copy_of is not None and entry is not None:
            self._copy_staged(item.copy_of, entry)
        if item.data:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.data)

    def _copy_staged(self, copy_of: tuple[Node, DirtyFile], entry: Entry) -> None:
        """A private copy of a kernel-written file is staged as ``entry``: the node reads the stored object from now on
        if its temp file holds nothing newer, else it goes on reading the temp file (saved at its next close)."""
        node, dirty = copy_of
        if dirty.held:  # a later record journaled the temp file itself: that record settles the node
            return
        if dirty.modified:
            dirty.pending = False
            return
        self._settle(node, dirty, entry)

    def _settle(self, node: Node, dirty: DirtyFile, entry: Entry) -> None:
        """The node's journaled file is staged as ``entry``: it lets go of the temp file unless a handle reads it."""
        table = self.state.table
        drop = False
        with node.lock, table.lock:
            dirty.pending = False
            scope = node.scope
            if node.dirty is dirty and not node.detached and scope is not None:
                self.scopes.local_change(scope)
                node.entry, node.fetched, node.gen = entry, self.state.now(), scope.gen
                parent = self.state.parent_of(node)
                if parent is not None:
                    name = os.path.basename(node.path).encode("utf-8", "surrogateescape")
                    self.tree.listing_put(parent, name, Child(ChildKind.FILE, entry))
            if node.dirty is dirty and node.opens == 0:
                node.dirty = None
                node.page_identity = entry.identity()
                drop = True
            elif node.dirty is not dirty:  # written again since: the newer temp file is the node's
                drop = True
        if drop:
            dirty.discard()
        table.drop_if_dead(node)

    # ------------------------------------------------------------------ keeping aside
    def _keep(self, item: Pending) -> None:
        """A record that cannot be staged: its content goes to the recovered directory, named in the log and status."""
        where = os.path.join(self.recovered_dir, f"{item.repo}-{item.branch}-{int(time.time())}-{item.seq}")
        os.makedirs(self.recovered_dir, exist_ok=True)
        if item.base is not None:
            where += "-" + os.path.basename(item.path)
            try:
                if item.inline is not None:
                    with open(where, "wb") as f:
                        f.write(item.inline)
                else:
                    _move_aside(item.data, where)
            except OSError as exc:
                log.error("write-back: could not keep %s aside: %s", item.data, exc)
        else:
            where += "-changes.json"
            with open(where, "w") as f:
                json.dump({"repo": item.repo, "branch": item.branch,
                           "changes": [[p, None if e is None else e._asdict()] for p, e in item.changes]}, f)
        if item.dirty is not None:
            item.dirty.pending = False
            item.dirty.held = True  # its file moved: never deleted or written here
        if item.copy_of is not None and not item.copy_of[1].held:
            item.copy_of[1].pending = False
        self.report.counts["kept_aside"] += 1
        self.report.kept.append({"repo": item.repo, "branch": item.branch, "path": item.path or None,
                                 "paths": [p for p, _e in item.changes] if item.base is None else None,
                                 "error": item.error, "kept_in": where})
        log.error("write-back: %s/%s/%s could not be staged (%s); kept in %s", item.repo, item.branch,
                  item.path or ", ".join(p for p, _e in item.changes), item.error, where)

    def _keep_corrupt(self, rec: Record) -> None:
        """A corrupt journal record (caller holds the condition): kept aside with its data file, never staged."""
        os.makedirs(self.recovered_dir, exist_ok=True)
        stamp = f"journal-{int(time.time())}-{len(self.report.kept)}"
        where = os.path.join(self.recovered_dir, stamp + ".record")
        with open(where, "wb") as f:
            f.write(rec.raw)
        data = str(rec.body.get("data", "")) if rec.body else ""
        if data and os.path.exists(data):
            _move_aside(data, os.path.join(self.recovered_dir, stamp + ".data"))
        self.report.counts["corrupt"] += 1
        self.report.kept.append({"repo": rec.body.get("repo"), "branch": rec.body.get("branch"), "path": rec.body.get("path"),
                                 "error": f"corrupt journal record {rec.seq or '?'}: {rec.corrupt}", "kept_in": where})
        log.error("write-back journal %s: record %s (%s) is corrupt: %s; kept in %s, not staged", self.journal.dir,
                  rec.seq or "?", rec.body.get("path", "unknown path") if rec.body else "unreadable", rec.corrupt, where)


def _pending_of(rec: Record) -> Pending | None:
    """The pipeline's item for a replayed record (None for an unknown one)."""
    body = rec.body
    repo, branch = str(body.get("repo", "")), str(body.get("branch", ""))
    if body.get("op") == "put":
        data = str(body["data"])
        # A record without a data file carries its bytes (checked against its digests by the replay).
        inline = base64.b64decode(str(body["inline"])) if not data else None
        # A record journaled unhashed (stop 55) has no digests: the pipeline hashes its data file.
        digests = (int(body["size"]), str(body["sha256"]), str(body["md5"])) if body["sha256"] else None
        return Pending(rec.seq, repo, branch, [], path=str(body["path"]), base=decode_value(bytes.fromhex(body["entry"])),
                       data=data, inline=inline, digests=digests,
                       size=int(body["size"]), known=bool(body.get("known", False)))
    if body.get("op") == "apply":
        return Pending(rec.seq, repo, branch,
                       [(str(p), None if v is None else decode_value(bytes.fromhex(v))) for p, v in body["changes"]])
    return None


def boot_id() -> str:
    """This boot of the host (a record journaled unhashed names it: journal.py's replay)."""
    return _journal_boot_id()


def _made_dirs(item: Pending) -> list[str]:
    """The directories whose markers record ``item`` puts (a journaled mkdir), without the trailing slash."""
    return [path[:-1] for path, entry in item.changes if entry is not None and path.endswith("/")]


def _move_aside(src: str, dst: str) -> None:
    """Move a data file to the recovered directory; a copy when it is also a stored object's name (a
    file the user may edit there must not be the object's inode)."""
    if os.stat(src).st_nlink > 1:
        shutil.copyfile(src, dst)
        os.unlink(src)
    else:
        shutil.move(src, dst)


def _inline(body: dict[str, Any], fd: int, size: int) -> bool:
    """Put the ``size`` bytes of ``fd`` into put record ``body`` (the journal writes them as base64); False if the
    file holds fewer."""
    data = os.pread(fd, size, 0) if size else b""
    if len(data) != size:
        return False
    body["inline"] = data
    return True


def _hash(path: str) -> tuple[int, str, str]:
    sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest(), md5.hexdigest()


def _drop_pages(path: str) -> None:
    """Let the kernel drop the cached pages of a data file the kernel wrote through passthrough, once stored (stop
    55): the store synced it, so they are clean; kept, every next large write takes fresh pages (docs/SCALE.md,
    stop 51), as the mount's own writes do not (``writes._write_back``)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # nothing left to write if the store synced it; never drop a dirty page unwritten
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _store_file(catalog: Catalog, repo: str, path: str, digests: tuple[int, str, str]) -> DataInfo:
    # A journaled data file never changes again (a write after the close goes to a copy): the local
    # store may make it the object itself, its bytes written once, with no copy to read and sync.
    with catalog.writer(repo) as w:
        w.write_file(path, digests=digests, link=True)
    return w.info
