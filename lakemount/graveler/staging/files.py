"""The staging files of ``LsmStaging`` as its parts use them: written, loaded, kept decoded, and merged.

Not the format (``file``: one file's bytes, its bloom filter and records) but
the files a token's lists name: a new file is PUT to the block store or, when
small, kept for its list row (``write_file``); a file is read from the cache,
its row or the block store, checked against its row's checksum, and kept
decoded in RAM up to ``MAX_RECORDS_HELD`` records (``open``); a read of several
files merges them newest first in chunks of C work (``chunks``); and a read that
meets an inline file a compaction removed after its listing lists again
(``listed``, ``Gone``).  Also what the parts share: the settings and counters
(``Shared``, ``LsmStats``) read through ``Part``.
"""

from __future__ import annotations

import secrets
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from lakemount.errors import Corrupt, ObjectNotFound
from lakemount.graveler.model import StagingToken
from lakemount.graveler.ports import BlockAdapter, Cache, StagingLists
from lakemount.graveler.runs import merge_newest
from lakemount.graveler.staging.file import (
    PUT,
    UNSTAGED,
    StagingFile,
    StagingFileInfo,
    Tagged,
    checksum,
    encode_arrays,
    untag,
)

STAGING_DIR: Final = "_lakefs/staging/"
MAX_READERS: Final = 4096
MAX_RECORDS_HELD: Final = 4_000_000  # records of decoded staging files kept in RAM (a few hundred MB at most)
FIRST_CHUNK: Final = 256  # entries a merge takes from its files at first (a listing's page wants few) ...
MAX_CHUNK: Final = 64 * 1024  # ... growing 4x per chunk up to this (a commit wants many per C-level merge)
READ_TRIES: Final = 8  # listings a read makes while compactions keep removing the inline files it listed
_T = TypeVar("_T")


class Gone(Exception):
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
    gathers: int = 0  # flushes whose leader waited for writes in flight beside it (``crowd``)


class Shared(Protocol):
    """What the parts of an ``LsmStaging`` read of it at each use (a test may change a setting on it)."""

    lists: StagingLists
    adapter: BlockAdapter
    cache: Cache
    flush_ms: float
    l1_max: int
    inline_bytes: int
    stats: LsmStats
    lock: threading.Lock

    def staged_get(self, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]: ...


class Part:
    """One part of an ``LsmStaging``, reading its settings, stores and counters through ``Shared``."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    @property
    def lists(self) -> StagingLists:
        return self.shared.lists

    @property
    def adapter(self) -> BlockAdapter:
        return self.shared.adapter

    @property
    def cache(self) -> Cache:
        return self.shared.cache

    @property
    def stats(self) -> LsmStats:
        return self.shared.stats

    @property
    def lock(self) -> threading.Lock:
        return self.shared.lock


class StagingFiles(Part):
    """Writing, loading, keeping and merging the staging files of one ``LsmStaging``."""

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._readers: dict[str, StagingFile] = {}  # insertion order: the oldest decoded goes first
        self._held = 0  # records in self._readers

    @property
    def inline_bytes(self) -> int:
        return self.shared.inline_bytes

    def keep(self, url: str, data: bytes, inline: bool) -> None:
        # An inline file goes to RAM only: its row is one statement away, and compaction merges it
        # within l1_max appends; on disk it cost every file of a lone writer (and every host that
        # heard of it) a cache file and its directories, a mount's largest cost sql staging has not.
        (self.cache.keep if inline else self.cache.put)(url, data)

    def write_file(self, namespace: str, keys: list[bytes], values: list[Tagged], level: int) -> tuple[StagingFileInfo, bytes]:
        """A new staging file of ``keys`` (sorted, unique) and their ``values``: stored on the block
        store, or (at most ``inline_bytes``) to be stored in its list row by the statement that lists it
        (a flush's append, a compaction's compare-and-set)."""
        data = encode_arrays(keys, values)
        url = staging_url(namespace, secrets.token_hex(16))
        inline = len(data) <= self.inline_bytes
        if not inline:
            self.adapter.put(url, data)
        self.keep(url, data, inline)
        return StagingFileInfo(url, level, keys[0], keys[-1], len(keys), len(data), checksum(data), inline=inline), data

    def load(self, info: StagingFileInfo, name: str) -> bytes:
        """``info``'s bytes from where they are stored: its row (inline) or the block store."""
        if info.inline:
            data = self.lists.inline_data([info.seq]).get(info.seq)
            if data is None:
                raise Gone(name)
        else:
            try:
                data = self.adapter.get(info.url)
            except ObjectNotFound as exc:
                raise Corrupt(f"missing {name}: the branch's staging is damaged") from exc
        with self.lock:
            self.stats.files_loaded += 1
        return data

    def open_all(self, infos: Sequence[StagingFileInfo]) -> list[StagingFile]:
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
                with self.lock:
                    self.stats.files_loaded += len(fetched)
        return [self.open(f, fetched.get(f.url)) for f in infos]

    def open(self, info: StagingFileInfo, data: bytes | None = None) -> StagingFile:
        """``info`` opened (``data``: its bytes, already read); raises ``Corrupt`` naming it when missing
        or damaged, ``Gone`` when it was inline and its row is gone."""
        f = self._readers.get(info.url)  # no lock: a dict read is atomic, and a hit is the warm path
        if f is not None:
            return f
        name = f"staging file {info.url.rsplit('/', 1)[-1]}"
        if data is None and info.inline:
            data = self.cache.get(info.url)
            if data is None:
                data = self.load(info, name)
                self.cache.keep(info.url, data)
        elif data is None:
            data = self.cache.get_or_load(info.url, lambda: self.load(info, name))
        if len(data) != info.size or checksum(data) != info.checksum:
            raise Corrupt(f"{name}: checksum mismatch")
        f = StagingFile(data, name)
        with self.lock:
            if info.url not in self._readers:
                self._readers[info.url] = f
                self._held += len(f)
            while len(self._readers) > 1 and (len(self._readers) > MAX_READERS or self._held > MAX_RECORDS_HELD):
                self._held -= len(self._readers.pop(next(iter(self._readers))))
        return f

    def chunks(
        self, files: Sequence[StagingFileInfo], start: bytes, stop: bytes | None, first: int = FIRST_CHUNK
    ) -> Iterator[tuple[list[bytes], list[Tagged]]]:
        """:func:`_merge_chunks` over ``files`` (given newest first), each opened once, now."""
        return _merge_chunks(self.open_all(files), start, stop, first)

    def listed(self, read: Callable[[], _T]) -> _T:
        """``read()`` (a listing and the reads of the files it names), made again while it finds an inline
        file whose row a compaction or a drop removed after the listing; ``Corrupt`` naming the file if
        that goes on ``READ_TRIES`` times (it never should: each listing is newer than the last)."""
        for _ in range(READ_TRIES - 1):
            try:
                return read()
            except Gone:
                continue
        try:
            return read()
        except Gone as gone:
            raise Corrupt(f"missing {gone.name}: the branch's staging is damaged") from None

    def lookup(self, tokens: Sequence[StagingToken], files: list[StagingFileInfo], key: bytes) -> tuple[bool, bytes | None]:
        # ``files`` come grouped by token in the order of ``tokens``, newest first within each.
        skip: str | None = None
        for f in files:
            if f.token == skip or not f.min_key <= key <= f.max_key:
                continue
            v = self.open(f).get(key)
            if v is None:
                continue
            if v[0] == UNSTAGED:
                skip = f.token  # this token has no change of the key: look in the next one
                continue
            return True, untag(v)
        return False, None

    @staticmethod
    def scan_chunks(chunks: Iterator[tuple[list[bytes], list[Tagged]]]) -> Iterator[tuple[bytes, bytes | None]]:
        for keys, values in chunks:
            yield from _live(keys, values)

    def page(
        self, files: list[StagingFileInfo], start: bytes, stop: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, bytes | None]], bool]:
        page: list[tuple[bytes, bytes | None]] = []
        for keys, values in self.chunks(files, start, stop, limit + 1):
            page += _live(keys, values)
            if len(page) > limit:
                return page[:limit], False
        return page, True
