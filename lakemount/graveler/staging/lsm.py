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
(:class:`~lakemount.graveler.staging.files.Gone`).

Compaction merges a token's L1 files (and the newest L2 files no larger than
them) into one new L2 file and installs it with a compare-and-set that
succeeds only if L2 is unchanged; appends carry on meanwhile.  It runs on a
background thread: the write whose append made the L1 list long is
acknowledged without waiting for it (a lone writer would otherwise pay a
merge and a PUT every ``l1_max`` writes), and a compaction that fails fails
no write.  Unreferenced staging files (a writer killed
between PUT and append, lists dropped by commit or reset, compacted inputs)
are garbage: :meth:`LsmStaging.collect_staging` (the GC job) deletes them after a grace period.

``LsmStaging`` is the ``StagingStore`` port over three parts, one module each:
``memstore`` (the group commit: batches, flushes, appends), ``compaction`` (the
compactor thread and ``compact``) and ``files`` (writing, loading, caching and
merging staging files); here are the port's reads, drops, notices and the GC.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from lakemount.graveler.model import Branch, StagingToken, prefix_end
from lakemount.graveler.ports import BlockAdapter, Cache, StagingLists
from lakemount.graveler.runs import live
from lakemount.graveler.staging.compaction import Compactor
from lakemount.graveler.staging.file import PUT, UNSTAGED, UNSTAGED_MARK, StagingFile, checksum
from lakemount.graveler.staging.files import MAX_CHUNK, STAGING_DIR, LsmStats, StagingFiles, staging_url
from lakemount.graveler.staging.first import first_of
from lakemount.graveler.staging.memstore import Memstore

__all__ = ["GC_GRACE_S", "INLINE_BYTES", "STAGING_DIR", "LsmStaging", "LsmStats", "staging_url"]

DEAD_STEPS: Final = 16  # runs of keys a newer file deletes that ``_first_value`` passes over before merging by the chunk
SCAN_PAGE: Final = 1024  # entries a branch_staged_* call merges before returning; the rest is read as iterated
GC_GRACE_S: Final = 6 * 3600.0  # an unlisted file younger than this may still be on its way to a list
INLINE_BYTES: Final = 32 * 1024  # staging.inline_bytes' default (docs/CONFIGURATION.md says why)


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
        into its list row instead of the block store (0: none does).  The parts (``files``,
        ``compactor``, ``memstore``) read these settings from here at each use."""
        self.lists = lists
        self.adapter = adapter
        self.cache = cache
        self.flush_ms = flush_ms
        self.l1_max = l1_max
        self.inline_bytes = inline_bytes
        self.stats = LsmStats()
        self.lock = threading.Lock()
        self.files = files = StagingFiles(self)
        self.compactor = compactor = Compactor(self, files)
        self.memstore = Memstore(self, files, compactor, namespace_of)
        self.stage = self.memstore.stage
        self.settle = compactor.settle
        self.compact = compactor.compact

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
            self.files.keep(info.url, data, info.inline)
            with self.lock:
                self.stats.files_noticed += 1

    # ------------------------------------------------------------------ StagingStore reads
    def staged_get(self, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
        if not tokens:
            return False, None
        return self.files.listed(lambda: self.files.lookup(tokens, self.lists.files(tokens, key, key), key))

    def staged_scan(
        self, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        # The files are listed and opened now, so an inline file compacted away meanwhile is listed again here.
        return self.files.scan_chunks(self.files.listed(lambda: self.files.chunks(self.lists.files([token], start, stop), start, stop)))

    def staged_first(
        self, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None
    ) -> tuple[bytes, bytes] | None:
        """The first live staged key (see the port).  A token's files are kept decoded in this process, so
        its tombstones are stepped over here, by the chunk, with one listing of its files and no statement each."""
        return first_of(tokens, start, stop, self._first_value, self.staged_get)

    def _first_value(self, token: StagingToken, start: bytes, stop: bytes | None) -> tuple[bytes, bytes] | None:
        """One token's first value in [start, stop): the smallest of its files' first PUT keys (a bisect in
        each file's PUT keys, however many tombstones lie before them), if its newest record is that PUT.
        Keys a newer file deletes (an L1 file's deletions of keys staged in an older one: S3A's task
        attempts put, then moved out) are passed over as a run (``_dead_run``: the older file's PUT keys
        the newer one holds as deletions, compared a slice at a time); past ``DEAD_STEPS`` such runs the
        files are merged by the chunk from there."""

        def read() -> tuple[bytes, bytes] | None:
            infos = self.lists.files([token], start, stop)
            files = self.files.open_all(infos)  # newest first
            lower = start
            for _ in range(DEAD_STEPS):
                best: tuple[bytes, bytes] | None = None
                source = None
                for f in files:
                    hit = f.first_put(lower, stop)
                    if hit is not None and (best is None or hit[0] < best[0]):
                        best, source = hit, f
                if best is None:
                    return None
                key = best[0]
                holder = next(f for f in files if f.get(key) is not None)
                newest = holder.get(key)
                assert newest is not None and source is not None
                if newest[0] == PUT:
                    return key, newest[1:]
                lower = _dead_run(key, source, holder, [f for f in files if f is not source], stop) + b"\x00"
            for key, value in self.files.scan_chunks(self.files.chunks(infos, lower, stop)):
                if value is not None:
                    return key, value
            return None

        return self.files.listed(read)

    def staged_hidden(self, tokens: Sequence[StagingToken], keys: Sequence[bytes]) -> set[bytes]:
        if not tokens or not keys:
            return set()

        def read() -> set[bytes]:
            files = self.lists.files(tokens, min(keys), max(keys))  # one listing for all of them
            return {k for k in keys if self.files.lookup(tokens, files, k) == (True, None)}

        return self.files.listed(read)

    def branch_staged_get(
        self, repo: str, name: str, tokens: Sequence[StagingToken], key: bytes
    ) -> tuple[Branch, bool, bytes | None]:
        def read() -> tuple[Branch, bool, bytes | None]:
            branch, files = self.lists.branch_files(repo, name, tokens, key, key)
            found, value = self.files.lookup(tokens, files, key)
            return branch, found, value

        return self.files.listed(read)

    def branch_staged_scan(
        self, repo: str, name: str, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> tuple[Branch, list[tuple[bytes, bytes | None]], bool]:
        def read() -> tuple[Branch, list[tuple[bytes, bytes | None]], bool]:
            branch, files = self.lists.branch_files(repo, name, [token], start, stop)
            page, complete = self.files.page(files, start, stop, SCAN_PAGE)
            return branch, page, complete

        return self.files.listed(read)

    def branch_staged_probe(
        self, repo: str, name: str, token: StagingToken, key: bytes, start: bytes, stop: bytes | None, limit: int
    ) -> tuple[Branch, tuple[bool, bytes | None], list[tuple[bytes, bytes | None]], bool]:
        lo = min(key, start)
        hi = None if stop is None else max(key, stop)

        def read() -> tuple[Branch, tuple[bool, bytes | None], list[tuple[bytes, bytes | None]], bool]:
            branch, files = self.lists.branch_files(repo, name, [token], lo, hi)
            own = self.files.lookup([token], files, key)
            scan_files = [f for f in files if f.max_key >= start and (stop is None or f.min_key < stop)]
            page, complete = self.files.page(scan_files, start, stop, limit)
            return branch, own, page, complete

        return self.files.listed(read)

    def staged_chunks(
        self, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[list[bytes], list[bytes | None]]]:
        """``staged_scan`` as chunks of parallel (keys, values) lists, for whole-staging work (a commit)."""
        chunks = self.files.listed(lambda: self.files.chunks(self.lists.files([token], start, stop), start, stop, MAX_CHUNK))
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
        info, data = self.files.write_file(namespace, keys, [UNSTAGED_MARK] * len(keys), 1)
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


def _dead_run(key: bytes, source: StagingFile, holder: StagingFile, others: list[StagingFile], stop: bytes | None) -> bytes:
    """The last of a run of ``source``'s PUT keys from ``key`` that are dead: ``holder`` (a newer file) holds each
    of them, in its own run of records that are not PUTs, and no other file has a PUT among them (so
    ``holder``'s record is the newest).  ``key`` itself is such a key; the run is found by comparing
    slices of the two files' key lists (C work), doubling then halving, not a key at a time."""
    put_keys, _ = source.puts()
    j = bisect_left(put_keys, key)
    keys = holder.keys
    i = bisect_left(keys, key)
    h_puts, h_at = holder.puts()
    p = bisect_left(h_puts, key)
    end_i = h_at[p] if p < len(h_at) else len(keys)  # holder's records from i up to here are not PUTs
    bound = stop
    for f in others:
        hit = f.first_put(key + b"\x00", bound)
        if hit is not None:
            bound = hit[0]
    end_j = len(put_keys) if bound is None else bisect_left(put_keys, bound, j)
    most = min(end_j - j, end_i - i)  # >= 1: key itself
    lo, step = 1, 1  # put_keys[j:j+lo] == keys[i:i+lo]; only what lies past lo is compared again
    while lo < most:
        hi = min(lo + step, most)
        if put_keys[j + lo : j + hi] == keys[i + lo : i + hi]:
            lo, step = hi, step * 2
            continue
        while hi - lo > 1:  # [j:j+hi] differs somewhere past lo
            mid = (lo + hi) // 2
            if put_keys[j + lo : j + mid] == keys[i + lo : i + mid]:
                lo = mid
            else:
                hi = mid
        break
    return put_keys[j + lo - 1]
