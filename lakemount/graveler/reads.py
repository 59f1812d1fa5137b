"""The core's reads: a key, a range or a path lookup at a ref, with a branch's staging over its committed tree.

A branch's value of a key is its newest staged entry (a tombstone hides the
key), else its head's; scans merge the staged entries over the committed
records in key order (``_overlay``), and move records (``moves``) layer a
renamed prefix over both.  A branch row read with its content is remembered
(``branch_seen``) so the next read asks for the row and the staged entries in
one statement.  Also what a branch's staging changes in its head's tree
(``changes``, ``has_changes``, ``count_changes``), which commit, merge and
branch deletion ask.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, TypeVar

from lakemount.errors import (
    BranchNotFound,
)
from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.model import (
    Branch,
    CommitID,
    Entry,
    Repository,
    StagingToken,
    decode_value,
    has_moves,
    real_tokens,
)
from lakemount.graveler.ports import ChunkedStagingScan
from lakemount.graveler.refexpr import ResolvedRef, View
from lakemount.graveler.repos import Repos
from lakemount.graveler.shared import Part, Record, Stores, layers_of

# Diff, merge and the range writer are imported by the verbs that use them: a reader (``lakemount fs ls``,
# ``log``) never loads them (issue 41).
if TYPE_CHECKING:
    from lakemount.graveler.committed.writer import Chunk


PROBE_PAGE: Final = 16  # staged entries below a key read with it by ``probe`` (past them, ``first`` answers)
FIRST_PAGE: Final = 16  # committed keys ``first`` asks staging about in its first statement (4x more each next one)
FIRST_PAGE_MAX: Final = 4096
# A scan on a branch reads its staged entries in pages from SCAN_PAGE_FIRST (a listing's page wants few), 4x larger
# each up to SCAN_PAGE_MAX, and past SEEK_AFTER staged deletions in a row seeks to the next live record
# (``_seeking``), reading on from there a page of SEEK_PAGE first (more deletions may follow).
SCAN_PAGE_FIRST: Final = 256
SEEK_PAGE: Final = 64
SCAN_PAGE_MAX: Final = 4096
SEEK_AFTER: Final = 128
_GONE: Final = object()  # in ``_overlay``'s output: a run of SEEK_AFTER staged deletions ends at this key
SEEN_BRANCHES: Final = 4096  # branch rows remembered from reads (``branch_seen``) before starting over

_T = TypeVar("_T")


class Reads(Part):
    """Point reads, scans and path lookups at a ref, staging over committed data."""

    def __init__(self, stores: Stores, repos: Repos) -> None:
        super().__init__(stores)
        self.repos = repos
        # (repo, branch) -> (row, monotonic time just before the statement that read it), from reads
        # of branch content.  Reads pass the tokens as a hint to read the row and the staged
        # entries in one statement (checked against the row read there, so never stale).
        self._seen: dict[tuple[str, str], tuple[Branch, float]] = {}
        self._ahead = threading.local()  # ``scans_ahead``'s pages, the calling thread's: ``held``

    @contextmanager
    def scans_ahead(self, repo: str, name: str, ranges: Sequence[tuple[bytes, bytes | None]]) -> Iterator[None]:
        """Inside the block, the calling thread's scans of branch ``name`` that start at one of ``ranges`` (start,
        stop) take their first page from one statement run now for all of them (one snapshot: the branch row and
        each range's first page), each once, where each was a statement of its own (a mount listing several
        directories again at once: docs/SCALE.md, stop 55).  Only when the branch's single token is known from an
        earlier read and the backend reads several ranges at once; else the scans read as they would."""
        seen = self._seen.get((repo, name))
        scans = getattr(self.staging, "branch_staged_scans", None)
        held = None
        if seen is not None and not seen[0].sealed_tokens and scans is not None and ranges:
            token = seen[0].staging_token
            at = time.monotonic()
            branch, pages = scans(repo, name, token, ranges)
            if branch.tokens == (token,):
                self._saw(repo, branch, at)
                held = {(repo, name, token, start, stop): (at, branch, page, complete)
                        for (start, stop), (page, complete) in zip(ranges, pages, strict=True)}
        self._ahead.held = held
        try:
            yield
        finally:
            self._ahead.held = None

    def branch_seen(self, repo: str, name: str) -> tuple[Branch, float] | None:
        """Branch ``name`` as the last read of its content found it, and the ``time.monotonic()``
        taken just before that read (the row was current then or later); None if not read yet."""
        return self._seen.get((repo, name))

    def _saw(self, repo: str, branch: Branch, at: float) -> None:
        seen = self._seen
        key = (repo, branch.name)
        old = seen.get(key)
        if old is not None and old[1] > at:
            return  # a newer read already told more
        if old is None and len(seen) >= SEEN_BRANCHES:
            seen.clear()
        seen[key] = (branch, at)

    def get(self, repo: str, ref: ResolvedRef, key: bytes) -> bytes | None:
        """The value of ``key`` at ``ref`` (None if absent).

        On a branch, its row and the staged entry are read in one statement when
        the branch's tokens are known from an earlier read (and still the same).
        """
        if ref.view is not View.COMMITTED:
            assert ref.branch is not None
            return self._branch_get(repo, ref, key, self._seen.get((repo, ref.branch)))[1]
        commit = self.refs.get_commit(repo, ref.commit_id)
        return self.repos.metarange_at(repo, ref, commit).get(key)

    def _branch_get(
        self, repo: str, ref: ResolvedRef, key: bytes, seen: tuple[Branch, float] | None
    ) -> tuple[Branch, bytes | None]:
        """The branch ``ref`` names as read now, and the value of ``key`` on it (``ref.view`` decides which part)."""
        assert ref.branch is not None
        at = time.monotonic()
        if seen is None or has_moves(seen[0].tokens):
            branch = self.refs.get_branch(repo, ref.branch)
            found, value = self.staged_get(branch.tokens, key)
        else:
            tokens = seen[0].tokens
            branch, found, value = self.staging.branch_staged_get(repo, ref.branch, tokens, key)
            if branch.tokens != tokens:
                found, value = self.staged_get(branch.tokens, key)
        self._saw(repo, branch, at)
        if ref.view is View.FULL and has_moves(branch.tokens):
            return branch, layers_of(branch.tokens).get(key, self.staged_get, self.base_of(repo, ref, branch).get)
        if found or ref.view is View.STAGING:
            return branch, value
        commit = self.refs.get_commit(repo, branch.commit_id)
        return branch, self.repos.metarange_at(repo, ref, commit).get(key)

    def lookup(self, repo: str, expr: str, key: bytes, *, namespace: str = "") -> tuple[ResolvedRef, bytes | None]:
        """What ``resolve(repo, expr)`` returns, and the value of ``key`` there (None if absent).

        A plain name this process last read as a branch costs one statement of
        the ref store for both: the branch row is read with its staged entry, as
        ``get`` reads them, so a point read (a GET through a front end) needs no
        head resolution of its own.  A name that is no longer a branch is
        resolved as usual (a tag or commit id of that name then applies).
        Raises what ``resolve`` and ``get`` raise; ``namespace`` as for ``resolve``.
        """
        seen = self._seen.get((repo, expr))  # only branch names are kept there: no suffix, no steps
        if seen is not None:
            ns = namespace or self.repos.get_repository(repo).storage_namespace
            guess = ResolvedRef(expr, "branch", seen[0].commit_id, View.FULL, expr, ns)
            try:
                branch, value = self._branch_get(repo, guess, key, seen)
            except BranchNotFound:
                pass
            else:
                return replace(guess, commit_id=branch.commit_id), value
        ref = self.repos.resolve(repo, expr, namespace=namespace)
        return ref, self.get(repo, ref, key)

    def _held(
        self, repo: str, name: str, token: StagingToken, start: bytes, stop: bytes | None
    ) -> tuple[float, Branch, list[tuple[bytes, bytes | None]], bool] | None:
        """The first page of a scan of [start, stop) that ``scans_ahead`` read for this thread (taken: once), if any."""
        ahead = getattr(self._ahead, "held", None)
        return ahead.pop((repo, name, token, start, stop), None) if ahead else None

    def _branch_staged(self, repo: str, name: str, start: bytes, stop: bytes | None) -> tuple[Branch, Iterator[tuple[bytes, bytes | None]]]:
        """Branch ``name`` now and its staged entries in [start, stop): one statement for both
        when its single token is known from an earlier read, and a page holds them all."""
        at = time.monotonic()
        seen = self._seen.get((repo, name))
        if seen is not None and not seen[0].sealed_tokens:
            token = seen[0].staging_token
            got = self._held(repo, name, token, start, stop)
            if got is not None:  # read by ``scans_ahead``'s statement, at its time
                at, branch, page, complete = got
            else:
                branch, page, complete = self.staging.branch_staged_scan(repo, name, token, start, stop)
            if branch.tokens == (token,):
                self._saw(repo, branch, at)
                return branch, self._staged_rest(token, page, complete, stop)
        else:
            branch = self.refs.get_branch(repo, name)
        self._saw(repo, branch, at)
        return branch, self.staged_scan(branch.tokens, start, stop)

    def probe(
        self, repo: str, ref: ResolvedRef, key: bytes, start: bytes, stop: bytes | None
    ) -> tuple[bytes | None, Record | None]:
        """``get(ref, key)`` and ``first(ref, start, stop)`` together (a path lookup: the key, and
        whether anything lies below it).  On a branch whose single token is known from an earlier
        read, the branch row, the key's staged entry and a first page of the staged entries below
        it are one statement, which answers unless that page holds only deletions (the files of a
        directory renamed or removed): then ``first`` goes on past the page without reading them.
        """
        if ref.view is not View.COMMITTED:
            assert ref.branch is not None
            at = time.monotonic()
            seen = self._seen.get((repo, ref.branch))
            if seen is not None and not seen[0].sealed_tokens:
                token = seen[0].staging_token
                branch, (found, value), page, complete = self.staging.branch_staged_probe(
                    repo, ref.branch, token, key, start, stop, PROBE_PAGE
                )
                if branch.tokens == (token,):
                    self._saw(repo, branch, at)
                    # The page holds every staged entry of [start, bound): the answer there is exact.
                    after = None if complete else page[-1][0] + b"\x00"
                    bound = stop if after is None else after
                    if ref.view is View.STAGING:
                        own, hit = value, next(((k, v) for k, v in page if v is not None), None)
                    else:
                        mr = self.repos.metarange_at(repo, ref, self.refs.get_commit(repo, branch.commit_id))
                        own = value if found else mr.get(key)
                        hit = next(iter(_overlay(mr.scan(start, bound), page)), None)
                    if hit is not None or after is None:
                        return own, hit
                    return own, self.first(repo, ref, after, stop)
        return self.get(repo, ref, key), self.first(repo, ref, start, stop)

    def staged_get(self, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
        """The newest staged entry of ``key`` among ``tokens`` (move records skipped: see ``moves``)."""
        real = real_tokens(tokens)
        return self.staging.staged_get(real, key) if real else (False, None)

    def base_of(self, repo: str, ref: ResolvedRef, branch: Branch) -> MetaRange:
        return self.repos.metarange_at(repo, ref, self.refs.get_commit(repo, branch.commit_id))

    def staged_scan(
        self, tokens: Sequence[StagingToken], start: bytes, stop: bytes | None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        tokens = real_tokens(tokens)
        if not tokens:
            return
        if len(tokens) == 1:
            yield from self.staging.staged_scan(tokens[0], start, stop)
            return
        streams = [
            ((k, i, v) for k, v in self.staging.staged_scan(t, start, stop)) for i, t in enumerate(tokens)
        ]
        last: bytes | None = None
        for k, _i, v in heapq.merge(*streams, key=lambda r: (r[0], r[1])):
            if k != last:
                last = k
                yield k, v

    def staged_chunks(self, tokens: Sequence[StagingToken]) -> Iterator[Chunk]:
        """All of ``tokens``' staged entries (newest token first) as chunks of parallel lists, in key
        order: a staging that reads chunks (``ChunkedStagingScan``) gives one token's whole chunks."""
        from lakemount.graveler.committed.writer import chunked

        if len(tokens) == 1 and isinstance(self.staging, ChunkedStagingScan) and not has_moves(tokens):
            return self.staging.staged_chunks(tokens[0])
        return chunked(self.staged_scan(tokens, b"", None))

    def _staged_rest(
        self, token: StagingToken, page: list[tuple[bytes, bytes | None]], complete: bool, stop: bytes | None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """A first page of ``token``'s staged entries, followed by the rest up to ``stop`` when it was not complete."""
        if complete:
            return iter(page)
        return itertools.chain(page, _later(lambda: self.staging.staged_scan(token, page[-1][0] + b"\x00", stop)))

    def scan(
        self, repo: str, ref: ResolvedRef, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[Record]:
        """Live records with start <= key < stop at ``ref``, in key order."""
        return self._scan(repo, ref, start, stop, None)

    def scan_entries(
        self, repo: str, ref: ResolvedRef, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, Entry]]:
        """``scan`` with each value decoded; committed ranges listed again are not decoded again."""
        return self._scan(repo, ref, start, stop, decode_value)

    def _scan(
        self, repo: str, ref: ResolvedRef, start: bytes, stop: bytes | None, decode: Callable[[bytes], Any] | None
    ) -> Iterator[tuple[bytes, Any]]:
        if ref.view is View.COMMITTED:
            commit = self.refs.get_commit(repo, ref.commit_id)
            yield from self.repos.metarange_at(repo, ref, commit).scan(start, stop, decode)
            return
        assert ref.branch is not None
        paged = self._paged_branch(repo, ref.branch, start, stop)
        if paged is not None:
            yield from self._seeking(repo, ref, *paged, start, stop, decode)
            return
        branch, staged = self._branch_staged(repo, ref.branch, start, stop)
        if ref.view is View.FULL and has_moves(branch.tokens):
            mr = self.base_of(repo, ref, branch)
            records = layers_of(branch.tokens).scan(start, stop, self.staged_scan, mr.scan)
            yield from records if decode is None else ((k, decode(v)) for k, v in records)
            return
        if decode is not None:
            staged = ((k, None if v is None else decode(v)) for k, v in staged)
        if ref.view is View.STAGING:
            for k, v in staged:
                if v is not None:
                    yield k, v
            return
        commit = self.refs.get_commit(repo, branch.commit_id)
        committed = self.repos.metarange_at(repo, ref, commit).scan(start, stop, decode)
        yield from _overlay(committed, staged)

    def _paged_branch(
        self, repo: str, name: str, start: bytes, stop: bytes | None
    ) -> tuple[Branch, list[tuple[bytes, bytes | None]], bool] | None:
        """Branch ``name`` now and a first ``SCAN_PAGE_FIRST`` of its staged entries in [start, stop) (one
        statement when its token is known from an earlier read), if it has a single token and no move
        record; None otherwise (then ``_scan`` reads as before: the tokens' entries merged)."""
        at = time.monotonic()
        seen = self._seen.get((repo, name))
        if seen is not None and not seen[0].sealed_tokens:
            token = seen[0].staging_token
            got = self._held(repo, name, token, start, stop)
            if got is not None:  # read by ``scans_ahead``'s statement, at its time
                at, branch, page, complete = got
            else:  # the probe's own key is the page's first: its answer is in the page too
                branch, _own, page, complete = self.staging.branch_staged_probe(
                    repo, name, token, start, start, stop, SCAN_PAGE_FIRST
                )
            if branch.tokens == (token,):
                self._saw(repo, branch, at)
                return branch, page, complete
        else:
            branch = self.refs.get_branch(repo, name)
            self._saw(repo, branch, at)
        if branch.sealed_tokens or has_moves(branch.tokens):
            return None
        page, complete = self._staged_page(repo, branch, start, stop, SCAN_PAGE_FIRST)
        return branch, page, complete

    def _staged_page(
        self, repo: str, branch: Branch, start: bytes, stop: bytes | None, limit: int
    ) -> tuple[list[tuple[bytes, bytes | None]], bool]:
        """The first ``limit`` staged entries of ``branch``'s one token in [start, stop), tombstones
        included, and whether they are all there are: one statement (the probe's branch row is not used)."""
        _b, _own, page, complete = self.staging.branch_staged_probe(
            repo, branch.name, branch.staging_token, start, start, stop, limit
        )
        return page, complete

    def _seeking(
        self, repo: str, ref: ResolvedRef, branch: Branch, page: list[tuple[bytes, bytes | None]], complete: bool,
        start: bytes, stop: bytes | None, decode: Callable[[bytes], Any] | None,
    ) -> Iterator[tuple[bytes, Any]]:
        """``_scan`` of a branch with one token: staged entries over committed records, read in pages growing
        from ``SCAN_PAGE_FIRST``; after ``SEEK_AFTER`` staged deletions in a row, the rest of the run is not read:
        ``_first`` seeks to the next live record (the staging's first value past the run, and the committed
        keys below it that it does not delete), and the scan starts again past that record.  So a listing
        costs the same past 20,000 deletions as past 20 (the files of a Spark job's task attempts, moved out
        of ``_temporary/``); a scan with fewer deletions in a row reads them as before."""
        mr = self.base_of(repo, ref, branch) if ref.view is View.FULL else None
        pos = start
        while True:
            staged: Iterable[tuple[bytes, Any]] = self._staged_pages(repo, branch, page, complete, stop)
            if decode is not None:
                staged = ((k, None if v is None else decode(v)) for k, v in staged)
            committed = mr.scan(pos, stop, decode) if mr is not None else iter(())
            resume: bytes | None = None
            for key, value in _overlay(committed, staged, _GONE, SEEK_AFTER):
                if value is _GONE:
                    resume = key + b"\x00"
                    break
                yield key, value
            if resume is None:
                return
            record = self._first(branch, mr, resume, stop)
            if record is None:
                return
            yield record[0], record[1] if decode is None else decode(record[1])
            pos = record[0] + b"\x00"
            page, complete = self._staged_page(repo, branch, pos, stop, SEEK_PAGE)

    def _staged_pages(
        self, repo: str, branch: Branch, page: list[tuple[bytes, bytes | None]], complete: bool, stop: bytes | None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """``page``, then the pages after it up to ``stop`` (4x larger each, up to ``SCAN_PAGE_MAX``), read
        only when iterated that far."""
        size = len(page)
        while True:
            yield from page
            if complete or not page:
                return
            size = min(max(size, SEEK_PAGE) * 4, SCAN_PAGE_MAX)
            page, complete = self._staged_page(repo, branch, page[-1][0] + b"\x00", stop, size)

    def first(self, repo: str, ref: ResolvedRef, start: bytes = b"", stop: bytes | None = None) -> Record | None:
        """The first live record with start <= key < stop at ``ref`` (``next(scan(...))``), None if none.

        Reads no staged deletion: the staging's first value in the range (``staged_first``) bounds
        the answer, and only the committed keys below it are asked about, a page at a time
        (``staged_hidden``), so an ``rmdir`` after thousands of files renamed out of the directory
        reads a few rows, not a row per rename.  Committed keys deleted in staging are read in pages
        growing from ``FIRST_PAGE``, one statement each.
        """
        if ref.view is View.COMMITTED:
            return next(iter(self.scan(repo, ref, start, stop)), None)
        assert ref.branch is not None
        at = time.monotonic()
        branch = self.refs.get_branch(repo, ref.branch)
        self._saw(repo, branch, at)
        if ref.view is View.FULL and has_moves(branch.tokens):
            mr = self.base_of(repo, ref, branch)
            return next(iter(layers_of(branch.tokens).scan(start, stop, self.staged_scan, mr.scan)), None)
        return self._first(branch, None if ref.view is View.STAGING else self.base_of(repo, ref, branch), start, stop)

    def _first(self, branch: Branch, mr: MetaRange | None, start: bytes, stop: bytes | None) -> Record | None:
        """``first`` on ``branch`` as read, with no move record: ``mr`` its head's tree (None: the staging view)."""
        tokens = real_tokens(branch.tokens)
        staged = self.staging.staged_first(tokens, start, stop) if tokens else None
        if mr is None:
            return staged
        # Below the first staged value, a key is staged as a deletion or not at all: a committed key
        # there is live unless staging deletes it.
        limit = stop if staged is None else staged[0]
        committed = iter(mr.scan(start, limit))
        page = FIRST_PAGE
        while chunk := list(itertools.islice(committed, page)):
            hidden = self.staging.staged_hidden(tokens, [k for k, _ in chunk]) if tokens else set()
            for key, value in chunk:
                if key not in hidden:
                    return key, value
            page = min(page * 4, FIRST_PAGE_MAX)
        return staged

    def has_uncommitted(self, repo: str, branch: Branch) -> bool:
        """Whether anything is staged on ``branch``, changes or not: the first staged entry of a token
        tells (counting them all read the whole staging, as long again as the commit that follows)."""
        if has_moves(branch.tokens):
            return True
        return any(next(iter(self.staging.staged_scan(t)), None) is not None for t in branch.tokens)

    def has_changes(self, repo: str, branch: Branch) -> bool:
        """Whether ``branch``'s staging changes its head's tree (what ``diff_uncommitted`` would list)."""
        if not self.has_uncommitted(repo, branch):
            return False
        return self.changes_anything(self.repos.get_repository(repo), branch.commit_id, branch.tokens)

    def count_changes(self, repo: str, branch: Branch) -> int:
        """How many keys ``branch``'s staging changes in its head's tree (what ``diff_uncommitted`` would list)."""
        if not self.has_uncommitted(repo, branch):
            return 0
        mr = self.repos.metarange(self.repos.get_repository(repo), branch.commit_id)
        return sum(1 for k, v in self.changes(mr, branch.tokens) if mr.get(k) != v)

    def changes(
        self, mr: MetaRange, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """What ``tokens`` change in the tree ``mr`` in [start, stop), in key order (None: a deletion); staged
        entries may equal what ``mr`` holds.  Move records make it the layered view's difference (``moves``)."""
        if has_moves(tokens):
            return layers_of(tokens).changes(self.staged_scan, mr.get, mr.scan, start, stop)
        return self.staged_scan(tokens, start, stop)

    def changes_anything(self, r: Repository, commit_id: CommitID, tokens: Sequence[StagingToken]) -> bool:
        """Whether the staged entries of ``tokens`` change the tree of ``commit_id``: a value it does not
        hold (byte for byte), or a tombstone over a key it has."""
        mr = self.repos.metarange(r, commit_id)
        return any(mr.get(k) != v for k, v in self.changes(mr, tokens))


def _later(scan: Callable[[], Iterable[_T]]) -> Iterator[_T]:
    """What ``scan()`` returns, called only when iterated: the rest after a first page is read only
    if someone lists past the page (a 1,000-entry listing does not pay a statement for the rest)."""
    yield from scan()


def _overlay(
    committed: Iterable[tuple[bytes, Any]], staged: Iterable[tuple[bytes, Any]], gone: object = None, run: int = 0,
) -> Iterator[tuple[bytes, Any]]:
    """Committed records with staged ones on top (a None value hides the key); values pass through as they are.
    With ``gone``, the ``run``-th staged deletion in a row (no record yielded between them) is yielded as
    (key, ``gone``): a scan seeking past a long run of them (``_seeking``)."""
    c_it = iter(committed)
    s_it = iter(staged)
    c = next(c_it, None)
    s = next(s_it, None)
    deleted = 0
    while c is not None or s is not None:
        if s is None or (c is not None and c[0] < s[0]):
            assert c is not None
            yield c
            deleted = 0
            c = next(c_it, None)
        else:
            if c is not None and c[0] == s[0]:
                c = next(c_it, None)
            if s[1] is not None:
                yield s[0], s[1]
                deleted = 0
            elif gone is not None:
                deleted += 1
                if deleted == run:
                    yield s[0], gone
            s = next(s_it, None)
