"""The catalog: paths and objects on top of graveler; the facade every front end uses.

:class:`Catalog` is the one class front ends hold.  Its verbs on refs
(:mod:`~lakemount.catalog.refs`), history (:mod:`~lakemount.catalog.history`)
and the stores' tables (:mod:`~lakemount.catalog.storage`) live in their own
modules; this one holds the verbs on paths and objects.

Graveler versions opaque keys and values; the catalog gives them meaning:
keys are UTF-8 paths, values are :class:`Entry` records, and object data is
stored content-addressed in the repository's storage namespace
(``data/<aa>/<sha256>``, :mod:`lakemount.block.layout`) by the one object
writer (:mod:`~lakemount.catalog.writer`), so writing the same bytes twice
stores them once and copies or renames never copy data.  Directory markers
are keys ending in ``/`` whose entry has a directory mode.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain, islice
from typing import TYPE_CHECKING, BinaryIO, Final, NamedTuple

from lakemount.catalog.blocks import BLOCK_SIZE, CachedBlocks, ExportBlocks, ReadOnlyBlocks, content_addressed
from lakemount.catalog.history import HistoryVerbs
from lakemount.catalog.kept import KeptRecords
from lakemount.catalog.model import has_data
from lakemount.catalog.paths import key_problem, printable
from lakemount.catalog.protection import BranchProtection
from lakemount.catalog.storage import StorageVerbs, TableReader, read_table
from lakemount.catalog.uploads import UploadVerbs
from lakemount.errors import (
    InvalidArgument,
    NotFound,
    ObjectExists,
    ObjectNotFound,
    PreconditionFailed,
    SourceChanged,
    TooManyActionFiles,
    Unavailable,
)
from lakemount.graveler.committed.store import join
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.model import FILE_MODE, Branch, Commit, Entry, Repository, decode_value, prefix_end
from lakemount.graveler.ports import BlockAdapter
from lakemount.graveler.refexpr import ResolvedRef, View
from lakemount.logs import get_logger

# What only some verbs use (hooks, pull requests, the event feed, GC, the object writer) is imported where it
# is used: a CLI verb pays at start only for what it runs (issue 41, tests/cli/test_import_budget.py).
if TYPE_CHECKING:
    from lakemount.actions.network import WebhookPolicy
    from lakemount.actions.runner import Actions, HookLimits
    from lakemount.actions.runs import Run, RunStore
    from lakemount.audit.record import AuditRecord
    from lakemount.audit.table import Filter as AuditFilter
    from lakemount.cache.tiered import TieredCache
    from lakemount.catalog.blame import BlameCache, Blamed
    from lakemount.catalog.confinement import Confinement
    from lakemount.catalog.events import EventLog, Feed, Observer
    from lakemount.catalog.gcrules import GcRules
    from lakemount.catalog.gcstore import GcStore
    from lakemount.catalog.kept import ChangeSource
    from lakemount.catalog.model import ObjectInfo
    from lakemount.catalog.pulls import Pulls, PullStore
    from lakemount.catalog.streaming import StreamedUpload
    from lakemount.catalog.writer import DataInfo, DataWriter

log = get_logger("lakemount.catalog")

MAX_KEY_BYTES: Final = 16 * 1024  # above PATH_MAX, so any POSIX path from any mount depth fits
SKIP_BEFORE_SEEK: Final = 32
# A listing asking for at most this many results walks the branch with ``first`` (no staged deletion read past one
# by one): S3A's directory probes list with max-keys 1-2 under ``_temporary/``, past every task's moved-out files,
# and the gateway asks for one more than max-keys (to tell a truncated page).
FEW: Final = 3
# Metadata key where ``import`` records a local source's mtime (ns); reads check it (see check_source).
SOURCE_MTIME_KEY: Final = "lakemount-source-mtime-ns"
# The stat float's precision at today's epoch is ~0.2 us: differences below this are the same mtime.
MTIME_TOLERANCE_NS: Final = 1000


class Listed(NamedTuple):
    """One item of a listing: an object (entry set) or a common prefix (entry None)."""

    path: str
    entry: Entry | None

    @property
    def is_prefix(self) -> bool:
        return self.entry is None


def encode_path(path: str) -> bytes:
    """A path as a graveler key; raises ``InvalidArgument`` for empty or oversize paths."""
    if not path:
        raise InvalidArgument("empty path")
    key = path.encode("utf-8", "surrogateescape")
    if len(key) > MAX_KEY_BYTES:
        raise InvalidArgument(f"path longer than {MAX_KEY_BYTES} bytes")
    return key


def encode_new_path(path: str) -> bytes:
    """A path as the key of a new or changed entry: the one key validity rule of every front end.

    Raises ``InvalidArgument`` (one line, the path shown printable) for a key
    that :func:`~lakemount.catalog.paths.key_problem` refuses (empty, not UTF-8
    text, a ``.`` or ``..`` segment, oversize).  Reads and deletes take any stored key (:func:`encode_path`),
    so a key stored before this rule can still be read, moved and removed.
    """
    problem = key_problem(path, MAX_KEY_BYTES)
    if problem is not None:
        raise InvalidArgument(f"invalid path '{printable(path)}': {problem}")
    return path.encode("utf-8")


def check_new_key(key: bytes) -> None:
    """:func:`encode_new_path`'s rule for a raw key (bulk writers such as import); raises ``InvalidArgument``."""
    try:
        path = key.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgument(f"invalid path '{printable(decode_path(key))}': a name that is not UTF-8 text") from None
    encode_new_path(path)


def _same_content(a: Entry, b: Entry) -> bool:
    """Whether two entries differ in nothing but their time and where their bytes lie: lakeFS's value identity
    (size, ETag, metadata, content type; here also mode, owner and symlink target) leaves both out.  A presigned
    upload lands at an address of its own; the same size and ETag are the same bytes."""
    return a._replace(mtime_ns=0, address="") == b._replace(mtime_ns=0, address="")


def decode_path(key: bytes) -> str:
    """A graveler key as a path (bytes that are not UTF-8 survive as surrogate escapes)."""
    return key.decode("utf-8", "surrogateescape")


@contextmanager
def _data_errors(repo: Repository, url: str) -> Iterator[None]:
    """Block-store errors on an object's data, told without the server's storage path (which goes to the log).

    Users of every front end see these messages; the address is the server's business (and on a local block
    store, a path of the server's filesystem).
    """
    try:
        yield
    except ObjectNotFound:
        log.warning("data object missing in repository %s: %s", repo.name, url)
        raise ObjectNotFound(f"the stored data of an object in repository {repo.name} (see the server log)") from None
    except (Unavailable, InvalidArgument) as exc:
        log.warning("reading data object %s of repository %s failed: %s", url, repo.name, exc)
        raise Unavailable(f"the block store could not read an object's data in repository {repo.name} "
                          "(see the server log)") from None


class Catalog(HistoryVerbs, StorageVerbs, UploadVerbs):
    """Objects by path in repositories; every front end (mount, gateway, CLI, jobs) goes through here."""

    def __init__(
        self, graveler: Graveler, adapter: BlockAdapter, *, namespace_root: str, confinement: Confinement,
        tmpdir: str | None = None,
        runs: Callable[[], RunStore] | None = None, pulls: Callable[[], PullStore] | None = None,
        events: Callable[[], EventLog] | None = None, link_key: Callable[[], bytes] | None = None,
        webhooks: Callable[[], WebhookPolicy] | None = None, hook_limits: Callable[[], HookLimits] | None = None,
        max_comments: int | None = None,
        changes: ChangeSource | None = None,
        cache: TieredCache | None = None,
        observer: Observer | None = None,
    ) -> None:
        """``confinement`` says which local locations imports and new repositories may use.
        ``runs``, ``pulls`` and ``events`` make the stores of hook runs, pull requests and the event
        feed on first use (so verbs that need none never load them); without ``runs`` or ``events``
        those are kept in memory.  ``link_key`` gives the key that signs upload addresses
        (``uploads.py``); without it, handing them out raises ``Unavailable``.  ``webhooks`` gives the
        ``actions.network.WebhookPolicy`` of the addresses webhooks may reach (None: the default one);
        ``hook_limits`` the bounds of the hooks running at once (None: the default bounds), the limits
        asked when hooks are first needed, the policy when a webhook first runs; ``max_comments``
        the comments of one pull request (None: ``pulls.max_comments``'s default); ``changes`` pushes other processes' branch changes
        (``watch_branches``; None: none are pushed).  ``cache`` is the node's cache, whose tiers keep
        the blocks of data objects that reads fetch (:mod:`~lakemount.catalog.blocks`); without it,
        every read asks the block store.  ``observer`` hears every feed event (the audit trail)."""
        self.graveler = graveler
        self.adapter = adapter
        self.blocks = None if cache is None else CachedBlocks(adapter, cache.ram, cache.disk)
        self.namespace_root = namespace_root.rstrip("/")
        self.confinement = confinement
        self.tmpdir = tmpdir
        self.kept = KeptRecords(changes)
        self.protection = BranchProtection(graveler, on_change=self._protection_changed, kept=self.kept)
        self._make_runs = runs
        self._make_pulls = pulls
        self._make_events = events
        self._actions: Actions | None = None
        self._pulls: Pulls | None = None
        self._feed: Feed | None = None
        self._link_key = link_key
        self._webhooks = webhooks
        self._hook_limits = hook_limits
        self._max_comments = max_comments
        self.changes = changes
        self._observer = observer

    _blame_cache: BlameCache | None = None  # made by the first blame

    def branch_stamp(self, repo: str, branch: str) -> tuple[int, int] | None:
        """``(slot, stamp)``: the node's stamp of branch ``repo``/``branch`` now, which every change this
        node's processes make to the branch replaces (``lakemount.metastore.stamps``), with the slot it
        shares with other branches; None where the catalog has no stamps.  Note it before a read you keep."""
        return None if self.changes is None else self.changes.slot_stamp(repo, branch)

    @contextmanager
    def own_changes(self) -> Iterator[list[tuple[int, int, int]]]:
        """Collect ``(slot, old stamp, new stamp)`` of every branch change the calling thread makes inside the
        block and commits alone (not in a group commit with other writers): a reader that noted a stamp
        tells its own changes from everyone else's by them (:meth:`branch_stamp`)."""
        if self.changes is None:
            yield []
            return
        with self.changes.recording() as seen:
            yield seen

    def blame(self, repo: str, ref: str, paths: Sequence[str], *, depth: int) -> list[Blamed]:
        """The blame of each of ``paths`` (at most ``MAX_PATHS``; ``dir/`` for a prefix) at ``ref``, in their order,
        walking at most ``depth`` commits; raises ``InvalidArgument`` for too many paths or a depth below 1, and what
        resolving ``ref`` raises (:mod:`~lakemount.catalog.blame`, imported by the first blame: issue 41)."""
        from lakemount.catalog.blame import blame

        return blame(self, repo, ref, paths, depth=depth)

    @property
    def feed(self) -> Feed:
        """The event feed of every repository (commits, merges, rules, hook runs, pull requests)."""
        if self._feed is None:
            from lakemount.catalog.events import Feed, MemoryEventLog

            self._feed = Feed(self._make_events() if self._make_events else MemoryEventLog(), self._observer)
        return self._feed

    def _protection_changed(self, repo: str, patterns: list[str]) -> None:
        self.feed.emit(repo, "", "protection", patterns=patterns)

    def _hook_ran(self, run: Run) -> None:
        self.feed.emit(run.repo, run.branch, "hook-run", run_id=run.run_id, event_type=run.event_type,
                       status=run.status, commit_id=run.commit_id,
                       hooks=[{"hook_id": h.hook_id, "status": h.status} for h in run.hooks])

    @property
    def actions(self) -> Actions:
        """Hooks: finds and runs the actions an event triggers, records the runs."""
        if self._actions is None:
            from lakemount.actions.hook import HookContext
            from lakemount.actions.runner import Actions
            from lakemount.actions.runs import MemoryRunStore

            limits = self._hook_limits() if self._hook_limits else None
            self._actions = Actions(self, self._make_runs or MemoryRunStore, None, HookContext(self, self._webhooks),
                                    on_run=self._hook_ran, limits=limits)
        return self._actions

    @property
    def pulls(self) -> Pulls:
        """Pull requests; raises ``Unavailable`` for a catalog built without a pull request store."""
        if self._pulls is None:
            if self._make_pulls is None:
                raise Unavailable("pull requests need a catalog built with a pull request store")
            from lakemount.catalog.pulls import MAX_COMMENTS, Pulls

            most = MAX_COMMENTS if self._max_comments is None else self._max_comments
            self._pulls = Pulls(self._make_pulls(), self, max_comments=most)
        return self._pulls

    def action_files(self, repo: str, ref: str, most: int) -> list[tuple[str, bytes | None]]:
        """The ``_lakefs_actions/*.yaml`` files at ``ref`` (path, bytes), by path; a file over
        ``MAX_ACTION_FILE`` bytes is not read (its bytes are None).  Raises ``TooManyActionFiles`` when
        there are more than ``most``, having read none of them."""
        from lakemount.actions.parser import ACTIONS_PREFIX, MAX_ACTION_FILE

        r = self.repository(repo)
        chosen: list[tuple[str, Entry]] = []
        for item in self.list(repo, ref, ACTIONS_PREFIX, delimiter="/"):
            e = item.entry
            if e is None or not item.path.endswith((".yaml", ".yml")) or e.is_dir:
                continue
            if len(chosen) == most:
                raise TooManyActionFiles(ref, most)
            chosen.append((item.path, e))
        return [(path, None if e.size > MAX_ACTION_FILE else self.read(r, e)) for path, e in chosen]

    # ------------------------------------------------------------------ audit
    def audit_records(self, repo: str, where: AuditFilter, *, newest_first: bool = False,
                      after: str = "") -> Iterator[AuditRecord]:
        """The audit records of ``repo`` that ``where`` keeps, oldest first (``newest_first``: newest first), those
        after the record id ``after`` in that order (``lakemount/audit/table.py``).

        Callers check ``AuditRead`` first.  Raises ``RepositoryNotFound`` and what the block store raises.
        """
        from lakemount.audit.table import query

        return query(self.adapter, self.repository(repo).storage_namespace, where, newest_first=newest_first,
                     after=after)

    def expire_audit(self, repo: str, retention_days: float) -> int:
        """Delete ``repo``'s audit files of hours that ended more than ``retention_days`` ago (<= 0 keeps
        all); returns how many went.  Raises ``RepositoryNotFound`` and what the block store raises."""
        from lakemount.audit.table import expire

        return expire(self.adapter, self.repository(repo).storage_namespace, retention_days)

    # ------------------------------------------------------------------ data
    def physical_url(self, repo: Repository, address: str) -> str:
        return address if "://" in address else join(repo.storage_namespace, address)

    def writer(
        self, repo: str | Repository, *, expected: int | None = None, address: str | None = None,
        hash_md5: bool = True, hash_sha256: bool = True, defer: bool = False, lazy: bool = False,
    ) -> DataWriter:
        """The writer of one object's data in ``repo``'s storage namespace: the one way bytes are stored.

        Use it as a context manager (``with catalog.writer(repo) as w: w.write(...)``); leaving the
        block stores the bytes and sets ``w.info``; an exception leaves nothing (see
        :mod:`~lakemount.catalog.writer`).  ``expected`` is the body's announced size (it decides
        whether a thread hashes and writes it), ``address`` a namespace-relative place to store the
        bytes at instead of their content address, ``hash_md5`` / ``hash_sha256`` False for a digest
        the caller computes and hands over with ``w.vouch``; ``defer`` stores a small body on a thread
        after the block (``w.stored()`` waits for it: hand it to :meth:`stage_upload` as ``ready``);
        ``lazy`` lets the local store make a small body durable against power loss within a second
        instead of before the block is left (:meth:`sync_stored` forces it; a crash of the process
        loses nothing either way).  Raises ``RepositoryNotFound``.  Given a name, the repository's record may be one kept from an
        earlier write (:mod:`~lakemount.catalog.kept`): staging the entry checks its namespace.
        """
        from lakemount.catalog.writer import DataWriter

        r = self.kept_repository(repo) if isinstance(repo, str) else repo
        return DataWriter(self, r, expected=expected, address=address, hash_md5=hash_md5, hash_sha256=hash_sha256, defer=defer,
                          lazy=lazy)

    def sync_stored(self) -> None:
        """Make every object this process stored with ``writer(..., lazy=True)`` durable against power loss now
        (the mount's ``fsync(2)``).  Raises ``Unavailable`` if the store's filesystem cannot sync."""
        from lakemount.block.local import sync_lazily_put

        sync_lazily_put()

    def notice_counts(self) -> dict[str, int]:
        """This process's staging notices so far (PostgreSQL's ``notify.Pacer``; empty elsewhere): sent with a
        staging (``inline``, plain ones and carried owed ones among them), owed notices that rode on a staging
        (``carried``), sent by the pacer's thread in a transaction of their own (``alone``), stagings held."""
        pacer = getattr(self.graveler.refs, "pacer", None)
        if pacer is None:
            return {}
        return {"inline": pacer.inline_sent, "plain": pacer.plain_sent, "carried": pacer.carried,
                "alone": pacer.owed_sent, "held": pacer.held}

    def kept_repository(self, name: str) -> Repository:
        """Repository ``name`` for a write: a record kept from an earlier one (:mod:`~lakemount.catalog.kept`), or
        read; raises ``RepositoryNotFound``.  Whatever is stored with it is staged with its namespace, which
        the staging statement checks (a repository created again elsewhere meanwhile fails the write)."""
        return self.kept.repository(name, self.graveler.get_repository)

    def _data_namespace(self, repo: str, entry: Entry) -> str:
        """The namespace the staging statement checks for ``entry``: the (kept) record's, under which its data
        was written, or "" for an entry with no data of its own in the namespace (nothing to check)."""
        if not has_data(entry) or not entry.address or "://" in entry.address:
            return ""
        return self.kept_repository(repo).storage_namespace

    @contextmanager
    def _staging(self, repo: str) -> Iterator[None]:
        """Around a write that may have used kept records: one the staging statement found stale (the branch gone,
        the repository gone or made again elsewhere) is dropped, so the next write reads them again."""
        try:
            yield
        except (NotFound, PreconditionFailed):
            self.kept.forget(repo)
            raise

    def write_data(self, repo: str | Repository, source: bytes | BinaryIO | str) -> DataInfo:
        """Store a body in hand (bytes, a readable stream, or a local file path, read as it is copied)
        with :meth:`writer`; returns where it went."""
        with self.writer(repo) as w:
            if isinstance(source, bytes | bytearray | memoryview):
                w.write(source)
            elif isinstance(source, str):
                with open(source, "rb") as f:
                    w.write_from(f)
            else:
                w.write_from(source)
        return w.info

    def stores_files_in_place(self, repo: Repository) -> bool:
        """Whether a local file given to ``writer(repo).write_file(..., link=True)`` can become the object
        itself, its bytes written once (a namespace on the local block store; a file on another
        filesystem is still copied): such a file is worth writing back to disk while it is written."""
        return repo.storage_namespace.startswith("local://")

    def writes_locally(self, repo: Repository) -> bool:
        """Whether a small write into ``repo`` (:func:`~lakemount.fuse.saving.store_bytes` then :meth:`put_entry`)
        touches only this node and syncs nothing: its namespace on the local block store (stored unsynced,
        ``lazy``) and its staging a transaction of an embedded SQLite database (``synchronous=NORMAL``).  A mount
        then tries a lone writer's close on its request loop, refusing to wait (``lakemount.waiting``)."""
        return self.stores_files_in_place(repo) and getattr(self.graveler.staging, "embedded", False)

    def streamed_upload(self, repo: Repository) -> StreamedUpload | None:
        """A new upload in parts of a large file being written into ``repo`` (catalog/streaming.py), or
        None when ``repo``'s block store takes no uploads in parts (the local store, which stores a
        written file in place instead)."""
        from lakemount.catalog.streaming import StreamedUpload

        parts_for = getattr(self.adapter, "parts_for", None)
        parts = parts_for(repo.storage_namespace) if parts_for is not None else None
        return StreamedUpload(self, repo, parts) if parts is not None else None

    def block_source(self) -> ReadOnlyBlocks:
        """Reads of stored objects by URL for a front end that keeps its own block cache (the mount's
        reader); it cannot write, list nor delete through it."""
        return ReadOnlyBlocks(self.adapter)

    def export_blocks(self) -> ExportBlocks:
        """Reads of stored objects by URL, and writes and deletes at an export's destination URLs, for
        ``jobs.export``; it cannot list nor touch through it."""
        return ExportBlocks(self.adapter)

    def read_range(self, namespace: str, range_id: str, checksum: str) -> TableReader:
        """The range table ``range_id`` of the storage namespace, checked against ``checksum``; raises
        ``ObjectNotFound``, ``ChecksumMismatch``."""
        return read_table(self.adapter, namespace, range_id, checksum, "range")

    # Stored objects by URL that no entry points at yet (a multipart upload's parts, an address
    # being copied into another namespace): the front end holds the URL, the catalog the store.
    def is_stored(self, url: str) -> bool:
        """Whether the stored object ``url`` exists."""
        return self.adapter.exists(url)

    def open_stored(self, url: str) -> BinaryIO:
        """A stream of the stored object ``url``; raises ``ObjectNotFound`` if it is gone, ``Unavailable``."""
        return self.adapter.open(url)

    def list_stored(self, prefix_url: str) -> Iterator[ObjectInfo]:
        """The stored objects whose URL starts with ``prefix_url`` (an import's S3 source), as the block store lists them."""
        return self.adapter.list(prefix_url)

    def delete_stored(self, url: str) -> None:
        """Delete the stored object ``url`` (a multipart upload's part); raises what the block store raises."""
        self.adapter.delete(url)

    # ------------------------------------------------------------------ GC
    def collect_staging(self, repo: str) -> int:
        """Delete ``repo``'s staging files no branch references any more, past the backend's grace
        (the GC job's last step); returns how many went."""
        return self.graveler.collect_staging(repo)

    def gc_store(self, namespace: str) -> GcStore:
        """What garbage collection may list, read, move and delete in the storage namespace ``namespace``
        (a repository's): :class:`~lakemount.catalog.gcstore.GcStore`, the jobs' only way to the objects."""
        from lakemount.catalog.gcstore import GcStore

        return GcStore(self.adapter, namespace)

    def gc_rules(self, repo: str) -> GcRules | None:
        """The repository's garbage-collection rules, or None if none were set."""
        from lakemount.catalog.gcrules import load_rules

        return load_rules(self.adapter, self.repository(repo).storage_namespace)

    def set_gc_rules(self, repo: str, rules: GcRules) -> None:
        """Store ``rules`` as the repository's GC rules (replacing any); block-store errors pass through."""
        from lakemount.catalog.gcrules import store_rules

        store_rules(self.adapter, self.repository(repo).storage_namespace, rules)

    def delete_gc_rules(self, repo: str) -> None:
        """Remove the repository's GC rules (a no-op if none were set); block-store errors pass through."""
        from lakemount.catalog.gcrules import delete_rules

        delete_rules(self.adapter, self.repository(repo).storage_namespace)

    def refresh_existing(self, url: str) -> bool:
        """True if the data object ``url`` exists; its modification time is refreshed so a
        concurrent garbage collection that began earlier does not delete it."""
        try:
            self.adapter.touch(url)
            return True
        except ObjectNotFound:
            return False

    @staticmethod
    def is_imported(entry: Entry) -> bool:
        """True for a zero-copy imported object: its data is someone else's file or S3 object."""
        return "://" in entry.address and not entry.is_dir and not entry.is_symlink

    def check_source(self, entry: Entry) -> None:
        """Raise ``SourceChanged`` unless an imported object's source still holds what was imported.

        The import contract (docs/SEMANTICS.md): a local source must keep its size
        and modification time (recorded at import in the metadata key
        ``SOURCE_MTIME_KEY``), an S3 source its ETag.  Objects stored by
        lakemount itself are content-addressed and never checked.  Every read
        path calls this first (CLI, mount, gateway), so no front end returns
        bytes that do not match the entry.
        """
        if not self.is_imported(entry):
            return
        url = entry.address
        try:
            info = self.adapter.stat(url)
        except ObjectNotFound:
            raise SourceChanged(url, "it is gone") from None
        if info.size != entry.size:
            raise SourceChanged(url, f"{info.size} bytes, {entry.size} when imported")
        if url.startswith("local://"):
            recorded = dict(entry.metadata).get(SOURCE_MTIME_KEY)
            if recorded is not None and abs(info.mtime * 1e9 - int(recorded)) > MTIME_TOLERANCE_NS:
                raise SourceChanged(url, "modified since the import")
        elif entry.etag and info.etag and info.etag != entry.etag:
            raise SourceChanged(url, f"ETag {info.etag}, {entry.etag} when imported")

    def read(self, repo: Repository, entry: Entry, offset: int = 0, length: int | None = None) -> bytes:
        """Bytes of an object's data ([offset, offset+length)), through the node's caches for content-addressed
        data (``blocks.content_addressed``); ``ObjectNotFound`` if the data is gone, ``SourceChanged`` for an imported object whose source
        changed."""
        if entry.size == 0 or not has_data(entry):
            return b""
        n = entry.size - offset if length is None else min(length, entry.size - offset)
        if n <= 0:
            return b""
        url = self.physical_url(repo, entry.address)
        self.check_source(entry)
        with _data_errors(repo, url):
            if self.blocks is not None and content_addressed(entry.address):
                return self.blocks.read(url, entry.etag, entry.size, offset, n)
            if offset == 0 and n >= entry.size:
                return self.adapter.get(url)
            return self.adapter.get_range(url, offset, n)

    def read_chunks(self, repo: Repository, entry: Entry, start: int, length: int) -> Iterator[bytes]:
        """``length`` bytes of an object's data from ``start`` (fewer at its end), as chunks of at most
        ``blocks.BLOCK_SIZE`` bytes, for a front end that streams a large body.

        Content-addressed data (``blocks.content_addressed``) is read through
        the node's caches, the blocks it misses from one stream of the object;
        any other object is streamed from the store (an imported one after
        :meth:`check_source`).  The first chunk is read
        before this returns, so that a front end learns of a failure before it
        sends a status: raises (here, or later while iterating) ``ObjectNotFound``
        if the data is gone or shorter than the entry, ``SourceChanged``,
        ``Unavailable``.
        """
        if entry.size == 0 or not has_data(entry) or start >= entry.size or length <= 0:
            return iter(())
        url = self.physical_url(repo, entry.address)
        self.check_source(entry)
        if self.blocks is not None and content_addressed(entry.address):
            chunks = self.blocks.chunks(url, entry.etag, entry.size, start, length)
        else:
            chunks = self._streamed(url, start, min(length, entry.size - start))
        translated = self._translated(repo, url, chunks)
        first = next(translated, None)
        return iter(()) if first is None else chain((first,), translated)

    def _streamed(self, url: str, start: int, length: int) -> Iterator[bytes]:
        with self.adapter.open(url) as f:
            if start:
                f.seek(start)
            left = length
            while left > 0:
                chunk = f.read(min(BLOCK_SIZE, left))
                if not chunk:
                    raise ObjectNotFound("object data is shorter than its entry")
                left -= len(chunk)
                yield chunk

    @staticmethod
    def _translated(repo: Repository, url: str, chunks: Iterator[bytes]) -> Iterator[bytes]:
        with _data_errors(repo, url):
            yield from chunks

    def open(self, repo: Repository, entry: Entry) -> BinaryIO:
        """A stream of an object's data; empty for directory markers, symlinks and empty objects
        (they have no data object).  ``ObjectNotFound`` if the data is gone."""
        if entry.size == 0 or not entry.address or not has_data(entry):
            return io.BytesIO(b"")
        self.check_source(entry)
        url = self.physical_url(repo, entry.address)
        with _data_errors(repo, url):
            return self.adapter.open(url)

    # ------------------------------------------------------------------ entries
    def stat(self, repo: str, ref: str | ResolvedRef, path: str) -> Entry:
        """The entry at ``path``; raises ``ObjectNotFound``."""
        r = self.resolve(repo, ref)
        value = self.graveler.get(repo, r, encode_path(path))
        if value is None:
            raise ObjectNotFound(f"{repo}/{r.expr}/{path}")
        return decode_value(value)

    def lookup(self, repo: str | Repository, ref: str, path: str) -> tuple[ResolvedRef, Entry | None]:
        """What ``ref`` resolves to now, and the entry at ``path`` there (None if there is none).

        For a point read (a GET): on a branch this process has read before, one
        ref-store statement resolves the branch and finds the entry
        (``Graveler.lookup``); ``repo`` may be the repository's record, just
        read, which is then not read again.  Raises what :meth:`resolve` raises.
        """
        key = encode_path(path)
        name, namespace = (repo.name, repo.storage_namespace) if isinstance(repo, Repository) else (repo, "")
        resolved, value = self.graveler.lookup(name, ref, key, namespace=namespace)
        return resolved, None if value is None else decode_value(value)

    def get_optional(self, repo: str, ref: str | ResolvedRef, path: str) -> Entry | None:
        """The entry at ``path``, None if there is none."""
        value = self.graveler.get(repo, self.resolve(repo, ref), encode_path(path))
        return None if value is None else decode_value(value)

    def exists(self, repo: str, ref: str | ResolvedRef, path: str) -> bool:
        """True if ``path`` has an entry (checked without decoding it)."""
        return self.graveler.get(repo, self.resolve(repo, ref), encode_path(path)) is not None

    def scan_records(
        self, repo: str, ref: str | ResolvedRef, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Raw records (key, stored value) with start <= key < stop at ``ref``, in key order.

        For bulk readers that skip most records or compare identities without
        decoding (directory listings, imports); decode a value with
        :func:`~lakemount.catalog.model.decode_value`.  Paths and entries:
        :meth:`list`.
        """
        return self.graveler.scan(repo, self.resolve(repo, ref), start, stop)

    @contextmanager
    def scans_ahead(self, repo: str, ref: ResolvedRef, ranges: Sequence[tuple[bytes, bytes | None]]) -> Iterator[None]:
        """Inside the block, the calling thread's :meth:`scan_records` of branch ``ref`` starting at one of ``ranges``
        (start, stop) take their first page from one statement for all of them, run now (``Reads.scans_ahead``);
        on any other ref nothing is read ahead."""
        if ref.view is View.COMMITTED or ref.branch is None:
            yield
            return
        with self.graveler.scans_ahead(repo, ref.branch, ranges):
            yield

    def first_record(
        self, repo: str, ref: str | ResolvedRef, start: bytes = b"", stop: bytes | None = None
    ) -> tuple[bytes, bytes] | None:
        """The first raw record with start <= key < stop at ``ref`` (what :meth:`scan_records` yields
        first), None if none: reads past no staged deletion, so asking whether a directory is empty
        costs the same after thousands of its files were removed or renamed away."""
        return self.graveler.first(repo, self.resolve(repo, ref), start, stop)

    def lookup_first(
        self, repo: str, ref: str | ResolvedRef, path: str, start: bytes, stop: bytes | None
    ) -> tuple[bytes | None, tuple[bytes, bytes] | None]:
        """The stored value at ``path`` (None if none) and the first raw record in [start, stop)
        (None if none), read together: on a branch in use, one statement of the ref store for both
        unless the first staged entries there are all deletions (a mount's lookup of a name asks
        whether it is a file and whether anything lies below it); as :meth:`first_record`, no
        staged deletion is read past one by one."""
        return self.graveler.probe(repo, self.resolve(repo, ref), encode_path(path), start, stop)

    def stage_records(self, repo: str, branch: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Stage raw records (key, stored value or None to delete) on ``branch`` as one transaction.

        Raises ``InvalidArgument`` for a key no front end may write (:func:`encode_new_path`),
        ``ProtectedBranch`` and what the ref store raises.
        """
        for key, value in records:
            if value is not None:
                check_new_key(key)
        self.check_writable(repo, branch)
        self.graveler.set_many(repo, branch, records)

    def list(
        self,
        repo: str,
        ref: str | ResolvedRef,
        prefix: str = "",
        *,
        delimiter: str = "",
        after: str = "",
        limit: int | None = None,
    ) -> Iterator[Listed]:
        """Objects under ``prefix`` in key order, after ``after``; with a delimiter,
        keys sharing the part up to the next delimiter collapse into one prefix."""
        r = self.resolve(repo, ref)
        pkey = prefix.encode("utf-8", "surrogateescape")
        stop = prefix_end(pkey) if pkey else None
        start = pkey
        if after:
            akey = after.encode("utf-8", "surrogateescape") + b"\x00"
            start = max(start, akey)
        dkey = delimiter.encode() if delimiter else b""
        if limit is not None and limit <= FEW:
            entries: Callable[[bytes], Iterator[tuple[bytes, Entry]]] = lambda at: self._firsts(repo, r, at, stop)  # noqa: E731
        else:
            entries = lambda at: self.graveler.scan_entries(repo, r, at, stop)  # noqa: E731
        if not dkey:
            # The common bulk case (recursive listings, S3 without delimiter): a tight loop.
            scan = entries(start)
            for key, entry in scan if limit is None else islice(scan, max(limit, 0)):
                yield Listed(key.decode("utf-8", "surrogateescape"), entry)
            return
        emitted = 0
        last_prefix: bytes | None = None
        while True:
            reseek: bytes | None = None
            skipped = 0
            for key, entry in entries(start):
                if dkey:
                    i = key.find(dkey, len(pkey))
                    if i >= 0:
                        common = key[: i + len(dkey)]
                        if common == last_prefix:
                            skipped += 1
                            if skipped > SKIP_BEFORE_SEEK:
                                reseek = prefix_end(common)
                                break
                            continue
                        if after and common.decode("utf-8", "surrogateescape") <= after:
                            # A prefix the previous page already returned: jump past it.
                            reseek = prefix_end(common)
                            break
                        last_prefix = common
                        skipped = 0
                        yield Listed(decode_path(common), None)
                        emitted += 1
                        if limit is not None and emitted >= limit:
                            return
                        continue
                yield Listed(decode_path(key), entry)
                emitted += 1
                if limit is not None and emitted >= limit:
                    return
            if reseek is None:
                return
            start = reseek

    def _firsts(self, repo: str, r: ResolvedRef, start: bytes, stop: bytes | None) -> Iterator[tuple[bytes, Entry]]:
        """``scan_entries`` one ``first`` at a time: a few statements each, however many staged deletions lie
        between two live keys (a scan reads every one of them)."""
        while (record := self.graveler.first(repo, r, start, stop)) is not None:
            key, value = record
            yield key, decode_value(value)
            start = key + b"\x00"

    def put_entry(self, repo: str, ref: str | ResolvedRef, path: str, entry: Entry) -> None:
        """Stage ``entry`` at ``path``; raises ``InvalidArgument`` for a key no front end may write."""
        key = encode_new_path(path)
        branch = self.writable_branch(repo, ref)
        with self._staging(repo):
            self.graveler.set(repo, branch, key, entry.value(), namespace=self._data_namespace(repo, entry))

    def stage_upload(
        self, repo: str, ref: str | ResolvedRef, path: str, entry: Entry, *, if_absent: bool = False, timed: bool = False,
        ready: Callable[[], None] | None = None,
    ) -> Entry:
        """Stage an uploaded object's ``entry`` (the API's upload and link, the gateway's PUT and multipart
        completion); returns the entry ``path`` now has.

        As in lakeFS, an object's identity is its content (size, ETag, type, metadata), not the time it
        was put nor where its bytes landed: an upload of what the branch already holds at ``path``
        (staged, or at its head) stages no new version, so putting the same bytes again leaves nothing
        to commit or merge.  (The mount
        stages through :meth:`put_entry`: there ``utimens`` alone is a change; so is an upload whose client
        chose its mtime, ``timed``.)  ``if_absent`` is
        ``If-None-Match: *``: raises ``ObjectExists`` if ``path`` has an object, checked in the
        transaction that stages the entry (of uploads racing for one path, exactly one wins).  Also raises what
        :meth:`writable_branch` and :meth:`put_entry` raise.  ``ready`` waits until the entry's data
        is stored (``DataWriter.stored``, raising what that raised): it returns only after, and
        nothing is staged before.
        """
        done = ready or (lambda: None)
        key = encode_new_path(path)
        branch = self.writable_branch(repo, ref)
        ns = self.kept_repository(repo).storage_namespace
        # One statement on a branch this process read before: its row with the staged entry (``Graveler.lookup``).
        resolved, value = self.graveler.lookup(repo, branch, key, namespace=ns)
        current = None if value is None else decode_value(value)
        if current is not None:
            if if_absent:
                raise ObjectExists(f"{repo}/{branch}/{path}")
            if current == entry or (not timed and _same_content(current, entry)):
                done()
                return current
            head = ResolvedRef(f"{branch}@", "branch", resolved.commit_id, View.COMMITTED, branch, ns)
            value = self.graveler.get(repo, head, key)
            committed = None if value is None else decode_value(value)
            if committed is not None and (committed == entry or (not timed and _same_content(committed, entry))):
                entry = committed  # back to the head's version: the staged change undone
        if if_absent:
            done()
            # Checked again where it is written: of uploads racing for one absent path, one stages.
            try:
                self.graveler.set_many_if(repo, branch, [(key, entry.value())], [(key, None)], record=self.kept_repository(repo))
            except PreconditionFailed as exc:
                raise ObjectExists(f"{repo}/{branch}/{path}") from exc
            return entry
        with self._staging(repo):
            self.graveler.set(repo, branch, key, entry.value(), ready=ready, namespace=self._data_namespace(repo, entry))
        return entry

    def apply(self, repo: str, ref: str | ResolvedRef, changes: Sequence[tuple[str, Entry | None]]) -> None:
        """Stage several puts (Entry) and deletes (None) as one atomic transaction.

        Raises ``InvalidArgument`` if a put's key is one no front end may write
        (deletes take any stored key), before anything is staged.
        """
        records = [(encode_path(p) if e is None else encode_new_path(p), None if e is None else e.value()) for p, e in changes]
        branch = self.writable_branch(repo, ref)
        with self._staging(repo):
            self.graveler.set_many(repo, branch, records)

    def move_directory(self, repo: str, ref: str | ResolvedRef, old: str, new: str) -> tuple[Branch, Branch] | None:
        """Stage the rename of directory ``old`` (every key under ``old/``) to ``new`` in constant time, as
        one move record (``lakemount/graveler/moves.py``); returns the branch row before and after it; None,
        staging nothing, if the branch holds as many uncommitted renames as it may (the caller then stages
        per key, with :meth:`apply`).

        What ``new/`` already holds and ``old/`` does not stays (a write that raced the rename is not
        lost); the caller checks that ``new`` is empty first, as rename(2) does.  Raises
        ``InvalidArgument`` for a bad path or a move into itself, ``ProtectedBranch``, ``ReadOnlyRef``.
        """
        old_key = encode_path(old) + b"/"
        new_key = encode_new_path(new) + b"/"
        branch = self.writable_branch(repo, ref)
        with self._staging(repo):
            return self.graveler.move(repo, branch, old_key, new_key)

    def apply_if(
        self, repo: str, ref: str | ResolvedRef, changes: Sequence[tuple[str, Entry | None]],
        expected: Sequence[tuple[str, Entry | None]],
    ) -> None:
        """``apply`` only if each path of ``expected`` holds exactly that entry now (None: no entry).

        A compare-and-set: the check and the write are one transaction, so of writers that read
        the same entry and each expect it, one stages and the others get ``PreconditionFailed``
        naming the path (the entry's identity includes its mtime, so a rewrite of the same bytes
        is a change).  Raises ``InvalidArgument`` for a put's bad key, before anything is staged.
        """
        records = [(encode_path(p) if e is None else encode_new_path(p), None if e is None else e.value()) for p, e in changes]
        branch = self.writable_branch(repo, ref)
        with self._staging(repo):
            self.graveler.set_many_if(repo, branch, records, [(encode_path(p), None if e is None else e.value()) for p, e in expected],
                                      record=self.kept_repository(repo))

    def put(
        self,
        repo: str,
        ref: str | ResolvedRef,
        path: str,
        source: bytes | BinaryIO | str,
        *,
        content_type: str = "",
        metadata: Iterable[tuple[str, str]] = (),
        mode: int = FILE_MODE,
        uid: int = 0,
        gid: int = 0,
        mtime_ns: int | None = None,
    ) -> Entry:
        """Write an object's data and stage its entry; returns the entry.

        Raises ``InvalidArgument`` for a key no front end may write (before any data is written).
        """
        key = encode_new_path(path)
        branch = self.writable_branch(repo, ref)
        record = self.kept_repository(repo)
        info = self.write_data(record, source)
        entry = Entry(
            info.address,
            info.size,
            info.etag,
            time.time_ns() if mtime_ns is None else mtime_ns,
            content_type,
            tuple(sorted(metadata)),
            mode,
            uid,
            gid,
        )
        with self._staging(repo):
            self.graveler.set(repo, branch, key, entry.value(), namespace=record.storage_namespace)
        return entry

    def add_samples(self, repo: str, *, committer: str = "lakemount") -> Commit:
        """Commit the sample dataset (:mod:`~lakemount.catalog.samples`) to ``repo``'s default branch, in one
        commit; returns it.  For a repository just created with lakeFS's ``sample_data``; raises what
        :meth:`put` and :meth:`commit` raise."""
        from lakemount.catalog.samples import SAMPLE_MESSAGE, sample_files

        branch = self.repository(repo).default_branch
        for path, data, content_type in sample_files():
            self.put(repo, branch, path, data, content_type=content_type)
        return self.commit(repo, branch, SAMPLE_MESSAGE, committer=committer).commit

    def delete(self, repo: str, ref: str | ResolvedRef, path: str) -> None:
        """Stage the deletion of ``path``; raises ``ObjectNotFound`` if it is not there."""
        self.graveler.delete(repo, self.writable_branch(repo, ref), encode_path(path))
