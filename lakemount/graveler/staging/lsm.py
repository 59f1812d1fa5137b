"""``LsmStaging``: the ``StagingStore`` on the object store (docs/DESIGN.md §4).

A token's staged entries are immutable staging files (:mod:`.file`) under the
repository's namespace, listed in the ref store (``StagingLists``) as L1
(recent, one per flush) and L2 (compacted).  Reads merge newest L1 first, then
L2; the Graveler facade puts the base commit's metarange beneath.

Writes go through a group-commit memstore per (repo, branch) in this process:
a write with no flush in flight flushes at once; writes arriving during a flush
gather and go as the next one when it ends (or after ``flush_ms``, in
parallel).  A flush ends when the last of its writers is woken, so the writers
it acknowledged that write again at once (a busy process's threads) go with
the next one, not the half of them back before it began.  A flush PUTs one
file, appends it with one statement, and only then acknowledges every write
in it: nothing is acknowledged before the file and the append are durable.
One ``stage`` call is always within one file, so a multi-key change (a
rename, a DeleteObjects) is atomic.

A flush whose file is at most ``inline_bytes`` (``staging.inline_bytes``) is
not PUT: its bytes go into its list row with the append (the same statement),
so such a flush is one ref-store statement and nothing else (a lone writer's
close: its data PUT and one statement; a busy process: flushes a fraction as
long).  Compaction's output is stored the same way: a small L2 file in its row
(a lone writer's compaction is then statements only, not a PUT every ``l1_max``
appends), a bigger one on the block store; size-tiering keeps L2 short, so the
ref store holds about ``l1_max`` plus a few small files per branch.  Readers
that have not cached an inline file read its bytes from its row, in one
statement for all the files a read opens; a compaction or a drop that
removed the row between the listing and that read makes the read list again
(:class:`_Gone`).

Compaction merges a token's L1 files (and the newest L2 files no larger than
them) into one new L2 file and installs it with a compare-and-set that
succeeds only if L2 is unchanged; appends carry on meanwhile.  It runs on a
background thread: the write whose append made the L1 list long is
acknowledged without waiting for it (a lone writer would otherwise pay a
merge and a PUT every ``l1_max`` writes), and a compaction that fails fails
no write.  Unreferenced staging files (a writer killed
between PUT and append, lists dropped by commit or reset, compacted inputs)
are garbage: :meth:`LsmStaging.collect_staging` (the GC job) deletes them after a grace period.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Final, TypeVar

from lakemount.errors import Corrupt, InvalidArgument, ObjectNotFound, PreconditionFailed
from lakemount.graveler.model import Branch, StagingToken, prefix_end
from lakemount.graveler.ports import BlockAdapter, Cache, StageCheck, StagingLists
from lakemount.graveler.runs import live, merge_newest
from lakemount.graveler.staging.file import (
    PUT,
    UNSTAGED,
    UNSTAGED_MARK,
    StagingFile,
    StagingFileInfo,
    Tagged,
    checksum,
    encode_arrays,
    tag_all,
    untag,
)

log = logging.getLogger(__name__)
_T = TypeVar("_T")

STAGING_DIR: Final = "_lakefs/staging/"
SCAN_PAGE: Final = 1024  # entries a branch_staged_* call merges before returning; the rest is read as iterated
L2_MAX: Final = 8  # L2 files of one token before compaction merges them whatever their sizes
MAX_READERS: Final = 4096
MAX_RECORDS_HELD: Final = 4_000_000  # records of decoded staging files kept in RAM (a few hundred MB at most)
FIRST_CHUNK: Final = 256  # entries a merge takes from its files at first (a listing's page wants few) ...
MAX_CHUNK: Final = 64 * 1024  # ... growing 4x per chunk up to this (a commit wants many per C-level merge)
BATCH_MAX: Final = 4096  # entries gathered behind a flush in flight that go beside it instead of waiting
GC_GRACE_S: Final = 6 * 3600.0  # an unlisted file younger than this may still be on its way to a list
INLINE_BYTES: Final = 32 * 1024  # staging.inline_bytes' default (docs/CONFIGURATION.md says why)
_first = itemgetter(0)
COMPACTOR_IDLE_S: Final = 30.0  # how long the compactor thread waits for more work before ending
READ_TRIES: Final = 8  # listings a read makes while compactions keep removing the inline files it listed


class _Gone(Exception):
    """An inline file's row was deleted between the listing that named it and the read of its bytes
    (a compaction or a drop came between): the read lists again."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _merge_chunks(files: Sequence[StagingFile], start: bytes, stop: bytes | None,
                  first: int = FIRST_CHUNK) -> Iterator[tuple[list[bytes], list[Tagged]]]:
    """The newest record of every key in [start, stop) over ``files`` (newest first), markers
    included, as chunks of parallel (keys, values) lists in key order.

    Each chunk ends at a bound key: the smallest of the keys that lie ``step`` records past each
    file's position, so no file gives more than ``step`` records to a chunk.  Every file's records
    up to the bound go to one k-way merge of array slices in which the newest file's record of a
    key wins (``runs.merge_newest``: C work, not a heap step per record in Python).  ``step``
    starts at ``first`` spread over the files (a listing wants a page) and grows 4x per chunk (a
    commit wants everything).
    """
    spans = [_Span(f.keys, f.values, *f.bounds(start, stop)) for f in reversed(files)]  # oldest first
    spans = [sp for sp in spans if sp.pos < sp.end]
    total = first
    while spans:
        if len(spans) == 1:
            sp = spans[0]
            e = min(sp.end, sp.pos + max(1, total))
            yield sp.keys[sp.pos:e], sp.values[sp.pos:e]
            sp.pos = e
            if e == sp.end:
                return
            total = min(total * 4, MAX_CHUNK)
            continue
        step = max(1, total // len(spans))
        bound: bytes | None = None
        for sp in spans:
            p = sp.pos + step - 1
            if p < sp.end - 1 and (bound is None or sp.keys[p] < bound):
                bound = sp.keys[p]
        starts = [sp.pos for sp in spans]
        ends = [sp.end if bound is None else bisect_right(sp.keys, bound, sp.pos, sp.end) for sp in spans]
        yield merge_newest([sp.keys for sp in spans], [sp.values for sp in spans], starts, ends)
        for sp, e in zip(spans, ends):
            sp.pos = e
        spans = [sp for sp in spans if sp.pos < sp.end]
        total = min(total * 4, MAX_CHUNK)


class _Span:
    """A file's records still to merge: its arrays and the index range [pos, end) left."""

    __slots__ = ("end", "keys", "pos", "values")

    def __init__(self, keys: list[bytes], values: list[Tagged], pos: int, end: int) -> None:
        self.keys, self.values, self.pos, self.end = keys, values, pos, end


def _live(keys: list[bytes], values: list[Tagged]) -> list[tuple[bytes, bytes | None]]:
    """Staged (key, value-or-None) pairs of a merged chunk, partial-reset marks left out."""
    return [(k, v[1:] if v[0] == PUT else None) for k, v in zip(keys, values) if v[0] != UNSTAGED]


def staging_url(namespace: str, file_id: str) -> str:
    """Where staging file ``file_id`` of a repository whose storage namespace is ``namespace`` is stored."""
    return f"{namespace.rstrip('/')}/{STAGING_DIR}{file_id}.sst"


def _held() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass
class _Batch:
    items: dict[bytes, bytes | None] = field(default_factory=dict)
    ready: list[Callable[[], None]] = field(default_factory=list)  # data still on its way (see ``stage``)
    namespaces: set[str] = field(default_factory=set)  # where its writers' data went (``stage``'s namespace)
    # Held until the batch's flush ends.  Its writers wait by taking it and passing it on, each waking the
    # next: an Event's waiters would each make a lock and then queue on its condition's lock once woken.
    done: threading.Lock = field(default_factory=_held)
    error: BaseException | None = None
    followers: int = 0  # writers that joined the leader's batch (fixed once its flush starts)
    woken: Iterator[int] = field(default_factory=itertools.count)  # next() is atomic: the last woken knows it is


@dataclass
class _Queue:
    cond: threading.Condition = field(default_factory=threading.Condition)
    pending: _Batch | None = None
    in_flight: int = 0


@dataclass
class LsmStats:
    """Counters of this process's staging (for benchmarks and ``.lakefs/stats``)."""

    flushes: int = 0
    entries_flushed: int = 0
    compactions: int = 0
    compactions_lost: int = 0
    files_loaded: int = 0  # staging files read from where they are stored (block store or, inline, their row)
    inline_flushes: int = 0  # flushes whose file went into its list row, not to the block store
    files_noticed: int = 0  # staging files another process appended whose bytes came with its change notice


class LsmStaging:
    """Staged entries as staging files on the block store, listed per token in the ref store."""

    def __init__(
        self,
        lists: StagingLists,
        adapter: BlockAdapter,
        cache: Cache,
        namespace_of: Callable[[str], str],
        *,
        flush_ms: float = 20.0,
        l1_max: int = 16,
        inline_bytes: int = INLINE_BYTES,
    ) -> None:
        """``namespace_of(repo)`` is the repository's storage namespace (raises ``RepositoryNotFound``);
        ``flush_ms`` bounds how long a write waits for an in-flight flush before flushing beside it;
        a token with ``l1_max`` L1 files is compacted; an L1 file of at most ``inline_bytes`` goes
        into its list row instead of the block store (0: none does)."""
        self.lists = lists
        self.adapter = adapter
        self.cache = cache
        self._namespace_of = namespace_of
        self.flush_ms = flush_ms
        self.l1_max = l1_max
        self.inline_bytes = inline_bytes
        self.stats = LsmStats()
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str], _Queue] = {}
        self._namespaces: dict[str, str] = {}
        self._readers: dict[str, StagingFile] = {}  # insertion order: the oldest decoded goes first
        self._held = 0  # records in self._readers
        self._compacting: set[StagingToken] = set()
        self._due: dict[StagingToken, None] = {}  # tokens waiting for the compactor thread, in order
        self._compactor: threading.Thread | None = None
        self._compacting_due = False  # the compactor thread is compacting a token it took from _due
        self._settled = threading.Condition(self._lock)  # nothing due and nothing being compacted
        self._work = threading.Condition(self._lock)  # a token became due

    # ------------------------------------------------------------------ writes
    def stage(self, repo: str, branch: str, items: Sequence[tuple[bytes, bytes | None]],
              check: StageCheck | None = None, ready: Callable[[], None] | None = None, namespace: str = "") -> None:
        """Stage ``items`` (None = tombstone) on the branch's current token; returns once they are durable.

        ``ready`` waits for the data the items point at (a PUT on another thread): a write that
        flushes at once stores its staging file meanwhile and appends it only once ``ready``
        returned, so a lone writer's two PUTs overlap and nothing is visible before both are
        stored.  A write that would join other writers' batch waits for ``ready`` first, so its
        data failing fails only itself.

        Raises ``BranchNotFound``/``RepositoryNotFound``, or ``Unavailable`` when the block store or
        the ref store fails during the flush (then nothing of the batch is acknowledged).  A
        ``check`` (``StagingStore.stage``) makes the write its own file, appended in the
        transaction that locks the branch row and runs the check; what it raises writes nothing
        visible (the file it wrote is an orphan, collected later).  ``namespace`` (the one the items'
        data was written under) must be the repository's: the flush's append checks the namespace
        it uses, and a write whose namespace is not that one, read again, raises ``PreconditionFailed``.
        """
        if not items:
            return  # nothing to make durable (the facade checks the branch exists)
        if not all(map(_first, items)):  # (C loops: no Python call per item of a big change)
            raise InvalidArgument("an empty key cannot be staged")
        if namespace and namespace != self._namespace(repo) and namespace != self._namespace(repo, fresh=True):
            raise PreconditionFailed(f"repository {repo} was created again with another storage namespace")
        if check is not None:
            if ready is not None:
                ready()
            self._maybe_compact(*self._flush(repo, branch, dict(items), check, required={namespace} - {""}))
            return
        q = self._queues.get((repo, branch))  # a dict read is atomic: the lock only to add one
        if q is None:
            with self._lock:
                q = self._queues.setdefault((repo, branch), _Queue())
        if ready is not None:
            with q.cond:
                alone = q.pending is None and not q.in_flight
            if not alone:
                ready()
                ready = None
        with q.cond:
            batch = q.pending
            lead = batch is None
            if batch is None:
                batch = q.pending = _Batch()
            batch.items.update(items)
            if namespace:
                batch.namespaces.add(namespace)
            if not lead:
                batch.followers += 1
            if ready is not None:  # (rarely a follower: another writer came between the check and here)
                batch.ready.append(ready)
            if lead:
                # No fixed wait: flush now unless a flush is in flight; then gather what arrives
                # until it ends (the next batch is whatever came meanwhile: the busier the branch,
                # the bigger the file and the fewer statements per entry).  Only a batch that
                # is already big, or a flush in flight longer than flush_ms, goes beside it.
                deadline = time.monotonic() + self.flush_ms / 1000.0
                while q.in_flight and len(batch.items) < BATCH_MAX:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    q.cond.wait(left)
                q.pending = None
                q.in_flight += 1
            elif len(batch.items) >= BATCH_MAX:
                q.cond.notify_all()  # the lead flushes this big batch beside the one in flight
        if not lead:
            batch.done.acquire()
            batch.done.release()
            if next(batch.woken) + 1 == batch.followers:
                self._flushed(q)
            if batch.error is not None:
                raise batch.error
            return
        token: StagingToken | None = None
        l1 = 0
        try:
            token, l1 = self._flush(repo, branch, batch.items, ready=batch.ready, required=batch.namespaces)
        except BaseException as exc:
            batch.error = exc
            raise
        finally:
            # The flush counts as in flight until the last of its writers is woken, and that writer
            # ends it: the writers woken one after another join the next batch meanwhile, so it
            # holds them all and not the half that came back before the next flush began (two
            # half batches alternating: twice the flushes and their CPU per entry, and a leader's
            # flush work holding the GIL while the woken queue for it).
            if not batch.followers:
                self._flushed(q)
            batch.done.release()
        self._maybe_compact(token, l1)

    @staticmethod
    def _flushed(q: _Queue) -> None:
        with q.cond:
            q.in_flight -= 1
            q.cond.notify_all()

    def _cache(self, url: str, data: bytes, inline: bool) -> None:
        # An inline file goes to RAM only: its row is one statement away, and compaction merges it
        # within l1_max appends; on disk it cost every file of a lone writer (and every host that
        # heard of it) a cache file and its directories, a mount's largest cost sql staging has not.
        (self.cache.keep if inline else self.cache.put)(url, data)

    def _namespace(self, repo: str, fresh: bool = False) -> str:
        ns = None if fresh else self._namespaces.get(repo)
        if ns is None:
            ns = self._namespaces[repo] = self._namespace_of(repo)
        return ns

    def _write_file(self, namespace: str, keys: list[bytes], values: list[Tagged], level: int) -> tuple[StagingFileInfo, bytes]:
        """A new staging file of ``keys`` (sorted, unique) and their ``values``: stored on the block
        store, or (at most ``inline_bytes``) to be stored in its list row by the statement that lists it
        (a flush's append, a compaction's compare-and-set)."""
        data = encode_arrays(keys, values)
        url = staging_url(namespace, secrets.token_hex(16))
        inline = len(data) <= self.inline_bytes
        if not inline:
            self.adapter.put(url, data)
        self._cache(url, data, inline)
        return StagingFileInfo(url, level, keys[0], keys[-1], len(keys), len(data), checksum(data), inline=inline), data

    def _flush(
        self, repo: str, branch: str, items: dict[bytes, bytes | None], check: StageCheck | None = None,
        ready: Sequence[Callable[[], None]] = (), required: Collection[str] = (),
    ) -> tuple[StagingToken, int]:
        """Write ``items`` as one L1 file, wait for ``ready`` (the data the items point at), and append
        the file; the token it went to and its L1 length now.  ``required``: the namespaces the items'
        data was written under; a repository whose namespace is another one (created again elsewhere)
        gets none of them (``PreconditionFailed``)."""
        keys = sorted(items)
        values = tag_all(map(items.__getitem__, keys))
        judge = None if check is None else (lambda b: check(b, self.staged_get))
        for fresh in (False, True):
            ns = self._namespace(repo, fresh)
            if any(r != ns for r in required):
                if fresh:
                    raise PreconditionFailed(f"repository {repo} was created again with another storage namespace")
                continue
            info, data = self._write_file(ns, keys, values, 1)
            for wait in ready:
                wait()  # raises if the data failed: the file is an orphan, nothing is acknowledged
            ready = ()
            try:
                token, l1 = self.lists.append(repo, branch, ns, info, judge, data)
            except PreconditionFailed:
                if fresh:
                    raise
                continue  # the repository was created again elsewhere: write into its namespace
            with self._lock:
                self.stats.flushes += 1
                self.stats.inline_flushes += info.inline
                self.stats.entries_flushed += len(keys)
            return token, l1
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ compaction
    def _maybe_compact(self, token: StagingToken | None, l1: int) -> None:
        """Have the compactor thread compact ``token`` when the append that made its L1 list ``l1`` long
        reached a multiple of ``l1_max``: of all the processes appending to a branch, the one whose append made the list
        that long compacts it (not every process that counted its own flushes), and a compaction
        that was lost is tried again ``l1_max`` appends later."""
        if token is None or l1 < self.l1_max or l1 % self.l1_max:
            return
        with self._lock:
            self._due[token] = None
            # is_alive: a process forked while the thread ran has its object but not the thread.
            if self._compactor is not None and self._compactor.is_alive():
                self._work.notify()
                return
            self._compactor = threading.Thread(target=self._compact_due, name="lakemount-compact", daemon=True)
            self._compactor.start()

    def _compact_due(self) -> None:
        """The compactor thread: compact the due tokens, oldest first; once none is left, wait up to
        ``COMPACTOR_IDLE_S`` for more before ending.  A busy branch makes a token due every ``l1_max``
        appends: a thread started for each compaction connected to the ref store anew each time (its
        connection is per thread), a backend started and authenticated on the server per compaction."""
        while True:
            with self._lock:
                self._compacting_due = False
                while not self._due:
                    self._settled.notify_all()
                    if not self._work.wait(COMPACTOR_IDLE_S) and not self._due:
                        self._compactor = None
                        return
                token = next(iter(self._due))
                del self._due[token]
                self._compacting_due = True
            try:
                self.compact(token)
            except Exception as exc:  # the lists are as they were; the next l1_max appends try again
                log.warning("compaction of staging %s failed: %s", token, exc)

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until no compaction is due or running (tests, benchmarks); False if ``timeout`` passed first."""
        def settled() -> bool:
            thread = self._compactor
            return thread is None or not thread.is_alive() or (not self._due and not self._compacting_due)

        with self._lock:
            return self._settled.wait_for(settled, timeout)

    def compact(self, token: StagingToken, *, minimum: int | None = None) -> bool:
        """Merge ``token``'s L1 files, with the newest L2 files no larger than what is merged so far,
        into one new L2 file, if it has at least ``minimum`` (default ``l1_max``) L1 files; True if a
        compaction was installed.

        Size-tiered: an L2 file is rewritten only when what lands on it is at least half its size,
        so each staged entry is rewritten O(log n) times, never the whole staging every time.  A
        compaction that lost its compare-and-set (L2 changed, or the token was dropped or
        committed) leaves the lists as they were; its file is garbage.
        """
        with self._lock:
            if token in self._compacting:
                return False
            self._compacting.add(token)
        try:
            files = self.lists.files([token])
            l1 = [f for f in files if f.level == 1]
            l2 = [f for f in files if f.level == 2]  # newest first
            if not l1 or len(l1) < (self.l1_max if minimum is None else minimum):
                return False
            merged_count = sum(f.count for f in l1)
            taken: list[StagingFileInfo] = []
            for f in l2:
                if f.count > 2 * merged_count and len(l2) - len(taken) <= L2_MAX:
                    break
                taken.append(f)
                merged_count += f.count
            bottom = len(taken) == len(l2)  # nothing of this token lies below the new file
            try:
                opened = self._open_all(l1 + taken)
            except _Gone:  # a drop or another compaction removed an inline input: this one would lose its CAS
                with self._lock:
                    self.stats.compactions_lost += 1
                return False
            # The files' sorted arrays, oldest first (given newest first: L1 by seq, then L2, older than
            # all L1), in one k-way merge in which the newest record of a key wins: C work, where a dict
            # of every record, a sort and a tuple per record cost ~2 us per record in Python.
            spans = opened[::-1]
            keys, values = merge_newest([f.keys for f in spans], [f.values for f in spans], [0] * len(spans),
                                        [len(f.keys) for f in spans])
            if bottom and UNSTAGED_MARK in values:  # a mark is always exactly UNSTAGED_MARK
                kept = [i for i, v in enumerate(values) if v[0] != UNSTAGED]
                keys, values = [keys[i] for i in kept], [values[i] for i in kept]
            namespace = files[0].url[: files[0].url.index(STAGING_DIR)].rstrip("/")
            new, data = self._write_file(namespace, keys, values, 2) if keys else (None, None)
            ok = self.lists.compact(token, [f.seq for f in l1 + taken], [f.seq for f in l2], new, data)
            with self._lock:
                if ok:
                    self.stats.compactions += 1
                else:
                    self.stats.compactions_lost += 1
            return ok
        finally:
            with self._lock:
                self._compacting.discard(token)

    # ------------------------------------------------------------------ notices
    def noticed(self, detail: str) -> None:
        """Another process appended a staging file and its change notice described it (``detail``):
        the lists remember its row, and bytes the notice carried go into the cache once they match
        the row's checksum, so the read the notice prompts asks the block store nothing (bytes that
        do not match are dropped: the read then fetches the file and names it if it is damaged)."""
        learnt = self.lists.learn(detail)
        if learnt is None:
            return
        info, data = learnt
        if data is not None and len(data) == info.size and checksum(data) == info.checksum:
            self._cache(info.url, data, info.inline)
            with self._lock:
                self.stats.files_noticed += 1

    # ------------------------------------------------------------------ reading files
    def _load(self, info: StagingFileInfo, name: str) -> bytes:
        """``info``'s bytes from where they are stored: its row (inline) or the block store."""
        if info.inline:
            data = self.lists.inline_data([info.seq]).get(info.seq)
            if data is None:
                raise _Gone(name)
        else:
            try:
                data = self.adapter.get(info.url)
            except ObjectNotFound as exc:
                raise Corrupt(f"missing {name}: the branch's staging is damaged") from exc
        with self._lock:
            self.stats.files_loaded += 1
        return data

    def _open_all(self, infos: Sequence[StagingFileInfo]) -> list[StagingFile]:
        """``infos`` opened, the bytes of the inline ones not cached read in one statement (not one each)."""
        cold = [f for f in infos if f.inline and f.url not in self._readers]
        fetched: dict[str, bytes] = {}
        if len(cold) > 1:
            ask = [f for f in cold if self.cache.get(f.url) is None]
            got = self.lists.inline_data([f.seq for f in ask]) if len(ask) > 1 else {}
            for f in ask:
                data = got.get(f.seq)
                if data is not None:
                    fetched[f.url] = data
                    self.cache.keep(f.url, data)
            if got:
                with self._lock:
                    self.stats.files_loaded += len(fetched)
        return [self._open(f, fetched.get(f.url)) for f in infos]

    def _open(self, info: StagingFileInfo, data: bytes | None = None) -> StagingFile:
        """``info`` opened (``data``: its bytes, already read); raises ``Corrupt`` naming it when missing
        or damaged, ``_Gone`` when it was inline and its row is gone."""
        f = self._readers.get(info.url)  # no lock: a dict read is atomic, and a hit is the warm path
        if f is not None:
            return f
        name = f"staging file {info.url.rsplit('/', 1)[-1]}"
        if data is None and info.inline:
            data = self.cache.get(info.url)
            if data is None:
                data = self._load(info, name)
                self.cache.keep(info.url, data)
        elif data is None:
            data = self.cache.get_or_load(info.url, lambda: self._load(info, name))
        if len(data) != info.size or checksum(data) != info.checksum:
            raise Corrupt(f"{name}: checksum mismatch")
        f = StagingFile(data, name)
        with self._lock:
            if info.url not in self._readers:
                self._readers[info.url] = f
                self._held += len(f)
            while len(self._readers) > 1 and (len(self._readers) > MAX_READERS or self._held > MAX_RECORDS_HELD):
                self._held -= len(self._readers.pop(next(iter(self._readers))))
        return f

    def _chunks(
        self, files: Sequence[StagingFileInfo], start: bytes, stop: bytes | None, first: int = FIRST_CHUNK
    ) -> Iterator[tuple[list[bytes], list[Tagged]]]:
        """:func:`_merge_chunks` over ``files`` (given newest first), each opened once, now."""
        return _merge_chunks(self._open_all(files), start, stop, first)

    def _listed(self, read: Callable[[], _T]) -> _T:
        """``read()`` (a listing and the reads of the files it names), made again while it finds an inline
        file whose row a compaction or a drop removed after the listing; ``Corrupt`` naming the file if
        that goes on ``READ_TRIES`` times (it never should: each listing is newer than the last)."""
        for _ in range(READ_TRIES - 1):
            try:
                return read()
            except _Gone:
                continue
        try:
            return read()
        except _Gone as gone:
            raise Corrupt(f"missing {gone.name}: the branch's staging is damaged") from None

    def _lookup(self, tokens: Sequence[StagingToken], files: list[StagingFileInfo], key: bytes) -> tuple[bool, bytes | None]:
        # ``files`` come grouped by token in the order of ``tokens``, newest first within each.
        skip: str | None = None
        for f in files:
            if f.token == skip or not f.min_key <= key <= f.max_key:
                continue
            v = self._open(f).get(key)
            if v is None:
                continue
            if v[0] == UNSTAGED:
                skip = f.token  # this token has no change of the key: look in the next one
                continue
            return True, untag(v)
        return False, None

    @staticmethod
    def _scan_chunks(chunks: Iterator[tuple[list[bytes], list[Tagged]]]) -> Iterator[tuple[bytes, bytes | None]]:
        for keys, values in chunks:
            yield from _live(keys, values)

    # ------------------------------------------------------------------ StagingStore reads
    def staged_get(self, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
        if not tokens:
            return False, None
        return self._listed(lambda: self._lookup(tokens, self.lists.files(tokens, key, key), key))

    def staged_scan(
        self, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        # The files are listed and opened now, so an inline file compacted away meanwhile is listed again here.
        return self._scan_chunks(self._listed(lambda: self._chunks(self.lists.files([token], start, stop), start, stop)))

    def branch_staged_get(
        self, repo: str, name: str, tokens: Sequence[StagingToken], key: bytes
    ) -> tuple[Branch, bool, bytes | None]:
        def read() -> tuple[Branch, bool, bytes | None]:
            branch, files = self.lists.branch_files(repo, name, tokens, key, key)
            found, value = self._lookup(tokens, files, key)
            return branch, found, value

        return self._listed(read)

    def _page(
        self, files: list[StagingFileInfo], start: bytes, stop: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, bytes | None]], bool]:
        page: list[tuple[bytes, bytes | None]] = []
        for keys, values in self._chunks(files, start, stop, limit + 1):
            page += _live(keys, values)
            if len(page) > limit:
                return page[:limit], False
        return page, True

    def branch_staged_scan(
        self, repo: str, name: str, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> tuple[Branch, list[tuple[bytes, bytes | None]], bool]:
        def read() -> tuple[Branch, list[tuple[bytes, bytes | None]], bool]:
            branch, files = self.lists.branch_files(repo, name, [token], start, stop)
            page, complete = self._page(files, start, stop, SCAN_PAGE)
            return branch, page, complete

        return self._listed(read)

    def branch_staged_probe(
        self, repo: str, name: str, token: StagingToken, key: bytes, start: bytes, stop: bytes | None, limit: int
    ) -> tuple[Branch, tuple[bool, bytes | None], list[tuple[bytes, bytes | None]], bool]:
        lo = min(key, start)
        hi = None if stop is None else max(key, stop)

        def read() -> tuple[Branch, tuple[bool, bytes | None], list[tuple[bytes, bytes | None]], bool]:
            branch, files = self.lists.branch_files(repo, name, [token], lo, hi)
            own = self._lookup([token], files, key)
            scan_files = [f for f in files if f.max_key >= start and (stop is None or f.min_key < stop)]
            page, complete = self._page(scan_files, start, stop, limit)
            return branch, own, page, complete

        return self._listed(read)

    def staged_chunks(
        self, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[list[bytes], list[bytes | None]]]:
        """``staged_scan`` as chunks of parallel (keys, values) lists, for whole-staging work (a commit)."""
        chunks = self._listed(lambda: self._chunks(self.lists.files([token], start, stop), start, stop, MAX_CHUNK))
        for keys, values in chunks:
            chunk = live(keys, values, PUT, UNSTAGED)
            if chunk[0]:
                yield chunk

    def staged_count(self, token: StagingToken) -> int:
        return sum(1 for _ in self.staged_scan(token))

    # ------------------------------------------------------------------ drops
    def drop_staging(self, token: StagingToken, prefix: bytes = b"", key: bytes | None = None) -> None:
        """Forget staged entries of ``token``: all (its lists go), or those under ``prefix``, or ``key``
        (one file of UNSTAGED marks, appended to the token, hides them)."""
        if key is None and not prefix:
            self.lists.drop(token)
            return
        if key is not None:
            keys = [key] if self.staged_get([token], key)[0] else []
        else:
            keys = [k for k, _ in self.staged_scan(token, prefix, prefix_end(prefix))]
        if not keys:
            return
        files = self.lists.files([token])
        namespace = files[0].url[: files[0].url.index(STAGING_DIR)].rstrip("/")
        info, data = self._write_file(namespace, keys, [UNSTAGED_MARK] * len(keys), 1)
        self.lists.append_to_token(token, info, data)

    # ------------------------------------------------------------------ garbage
    def collect_staging(self, namespace: str, *, grace_s: float | None = None, now: float | None = None) -> int:
        """Delete staging files under ``namespace`` that no list holds and that are older than
        ``grace_s`` (default ``GC_GRACE_S``: a younger one may be between its PUT and its append,
        or still read by a process that learnt its list before a commit or a reset dropped it);
        returns how many.  The lists are read before the listing, so a file appended meanwhile
        is young, and kept.  An inline file has no object here: its bytes go with its row."""
        prefix = f"{namespace.rstrip('/')}/{STAGING_DIR}"
        keep = self.lists.referenced(prefix)
        cutoff = (time.time() if now is None else now) - (GC_GRACE_S if grace_s is None else grace_s)
        gone = 0
        for obj in list(self.adapter.list(prefix)):
            if obj.url not in keep and obj.mtime < cutoff:
                self.adapter.delete(obj.url)
                gone += 1
        return gone
