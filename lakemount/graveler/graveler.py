"""The Graveler facade: versioned key/value operations over refs, staging and committed data.

Keys are bytes; values are stored record values (16-byte identity + encoded
entry, see ``model``).  Everything mutable lives in the ``RefStore`` (heads) and
the ``StagingStore`` (uncommitted entries, by staging token);
everything immutable (ranges, metaranges, commit objects, the journal) in the
block store.  Writers never lock: a commit seals the branch's staging token
with a compare-and-swap, writes ranges from the base metarange plus the sealed
staging, and swaps the branch to the new commit; a lost swap retries.
"""

from __future__ import annotations

import heapq
import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, TypeVar

from lakemount.errors import (
    AlreadyExists,
    AmbiguousRef,
    BranchNotFound,
    CommitNotFound,
    ConcurrentUpdate,
    DirtyBranch,
    InvalidArgument,
    LakeMountError,
    MergeConflict,
    NotFound,
    NothingToCommit,
    ObjectNotFound,
    PreconditionFailed,
    ReadOnlyRef,
    RefNotFound,
    category_of,
)
from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.journal import Journal
from lakemount.graveler.model import (
    EMPTY_METARANGE,
    MOVE_MARK,
    Branch,
    Commit,
    CommitID,
    Entry,
    MetaRangeID,
    Repository,
    StagingToken,
    Tag,
    decode_value,
    has_moves,
    prefix_end,
    real_tokens,
)
from lakemount.graveler.ports import ChunkedStagingScan, RefStore, StagingStore
from lakemount.graveler.refexpr import ResolvedRef, View, is_hex, parse
from lakemount.records import record

# Diff, merge and the range writer are imported by the verbs that use them: a reader (``lakemount fs ls``,
# ``log``) never loads them (issue 41).
if TYPE_CHECKING:
    import random

    from lakemount.graveler.committed.store import CommittedStore
    from lakemount.graveler.committed.writer import ApplyStats, Chunk
    from lakemount.graveler.moves import Layers

MAX_CAS_ATTEMPTS: Final = 200
MIN_COMMIT_PREFIX: Final = 4
PROBE_PAGE: Final = 16  # staged entries below a key read with it by ``probe`` (more follow if needed)
SEEN_BRANCHES: Final = 4096  # branch rows remembered from reads (``branch_seen``) before starting over

Record = tuple[bytes, bytes]
_T = TypeVar("_T")


def new_token() -> StagingToken:
    """A fresh random staging token (24 hex digits) for a branch's new staging area."""
    return StagingToken(os.urandom(12).hex())  # secrets.token_hex(12), without importing secrets


@record(frozen=True, slots=True)
class CommitResult:
    """A new commit and, when a tree was written, what writing it cost."""

    commit: Commit
    stats: ApplyStats | None = None


@record(frozen=True, slots=True)
class MergeResult:
    """Where a merge left the destination: the commit it points at, and whether anything was merged."""

    commit_id: CommitID
    merged: bool  # False when the destination already contained the source
    changes: int = 0
    stats: ApplyStats | None = None


@record(frozen=True, slots=True)
class DiffRecord:
    """One key that differs between two trees; ``left``/``right`` are its values (None when absent)."""

    key: bytes
    kind: str  # "added", "removed", "changed", "conflict"
    left: bytes | None
    right: bytes | None


@record()
class _Backoff:
    """The waits between one operation's attempts at a branch that keeps changing under it."""

    attempt: int = 0
    rng: random.Random | None = None  # made by the first retry: most operations never wait (issue 41)

    def wait(self) -> None:
        self.attempt += 1
        if self.attempt > MAX_CAS_ATTEMPTS:
            raise ConcurrentUpdate("the branch kept changing under this operation; try again")
        if self.rng is None:
            import random

            self.rng = random.Random()
        time.sleep(min(0.2, 0.001 * (2 ** min(self.attempt, 8))) * self.rng.random())


class Graveler:
    """Versioned operations on repositories; the single entry point above the stores."""

    def __init__(
        self,
        refs: RefStore,
        committed: CommittedStore,
        journal: Journal,
        *,
        staging: StagingStore,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``staging`` holds uncommitted entries, by the tokens ``refs``'s branch rows name."""
        self.refs = refs
        self.staging = staging
        self.committed = committed
        self.journal = journal
        self.clock = clock
        # (repo, branch) -> (row, monotonic time just before the statement that read it), from reads
        # of branch content.  Reads pass the tokens as a hint to read the row and the staged
        # entries in one statement (checked against the row read there, so never stale).
        self._seen: dict[tuple[str, str], tuple[Branch, float]] = {}

    # ------------------------------------------------------------------ repos
    def create_repository(
        self, name: str, storage_namespace: str, default_branch: str = "main", *, committer: str = "lakemount"
    ) -> Repository:
        if not storage_namespace or not storage_namespace.partition("://")[2].strip("/"):
            raise InvalidArgument(f"storage namespace must be a URL such as local:///path or s3://bucket/prefix: {storage_namespace!r}")
        for other in self.refs.list_repositories():
            if other.name == name:
                raise AlreadyExists(f"repository already exists: {name}")
            if other.storage_namespace.rstrip("/") == storage_namespace.rstrip("/"):
                raise AlreadyExists(f"storage namespace {storage_namespace} is used by repository {other.name}")
        now = self.clock()
        repo = Repository(name, storage_namespace.rstrip("/"), default_branch, now)
        commit = self._make_commit((), EMPTY_METARANGE, "", "Repository created", committer, (), now)
        branch = Branch(default_branch, commit.id, new_token())
        try:
            self.journal.write_commit(repo.storage_namespace, commit)
        except LakeMountError as exc:
            # The first write into the namespace: say so, rather than "object not found" for a
            # directory that cannot be created, or an internal key for a store that refuses.
            category = category_of(exc)
            why = "its location does not exist and cannot be created" if category is NotFound else str(exc)
            cls = InvalidArgument if category in (NotFound, LakeMountError) else category
            raise cls(f"cannot write to storage namespace {repo.storage_namespace}: {why}") from exc
        self.refs.create_repository(repo, branch, commit)
        self.journal.record_repository(repo)
        self.journal.record(repo.storage_namespace, {"op": "branch", "name": default_branch, "old": None, "new": commit.id})
        return repo

    def get_repository(self, name: str) -> Repository:
        # Not cached: another process may delete the repository and create one of the
        # same name in another storage namespace, and writing to the old one would
        # leave the new repository's commits pointing at tables nobody can find.
        return self.refs.get_repository(name)

    def list_repositories(self) -> list[Repository]:
        return self.refs.list_repositories()

    def delete_repository(self, name: str) -> None:
        repo = self.refs.get_repository(name)
        for b in self.refs.list_branches(name):
            self._drop(b.tokens)
        self.refs.delete_repository(name)
        self.journal.forget_repository(name)
        self.journal.record(repo.storage_namespace, {"op": "repository-deleted", "name": name})

    # ------------------------------------------------------------------ commits
    def _make_commit(
        self,
        parents: tuple[CommitID, ...],
        mr_id: MetaRangeID,
        mr_checksum: str,
        message: str,
        committer: str,
        metadata: Sequence[tuple[str, str]],
        date: float,
        generation: int = 1,
    ) -> Commit:
        meta = tuple(sorted((str(k), str(v)) for k, v in metadata))
        cid = Commit.compute_id(parents, mr_id, message, committer, date, meta)
        return Commit(cid, parents, mr_id, mr_checksum, message, committer, date, meta, generation)

    def get_commit(self, repo: str, commit_id: str) -> Commit:
        return self.refs.get_commit(repo, commit_id)

    def metarange_of(self, repo: Repository, commit: Commit) -> MetaRange:
        return self.committed.metarange(repo.storage_namespace, commit.metarange_id, commit.metarange_checksum)

    def _metarange_at(self, repo: str, ref: ResolvedRef, commit: Commit) -> MetaRange:
        """``commit``'s metarange, in the namespace ``ref`` carries (asking the ref store only if it carries none)."""
        ns = ref.namespace or self.get_repository(repo).storage_namespace
        return self.committed.metarange(ns, commit.metarange_id, commit.metarange_checksum)

    def _staged_rest(
        self, token: StagingToken, page: list[tuple[bytes, bytes | None]], complete: bool, stop: bytes | None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """A first page of ``token``'s staged entries, followed by the rest up to ``stop`` when it was not complete."""
        if complete:
            return iter(page)
        return itertools.chain(page, _later(lambda: self.staging.staged_scan(token, page[-1][0] + b"\x00", stop)))

    # ------------------------------------------------------------------ refs
    def resolve(self, repo: str, expr: str, *, namespace: str = "") -> ResolvedRef:
        """Resolve a ref expression; raises ``RefNotFound``, ``AmbiguousRef`` or ``InvalidArgument``.

        ``namespace``: the repository's storage namespace when the caller has
        just read its record (the lookup is then not repeated).
        """
        ns = namespace or self.get_repository(repo).storage_namespace
        parsed = parse(expr)
        base = parsed.base
        kind: str
        branch: Branch | None = None
        try:
            branch = self.refs.get_branch(repo, base)
            kind, cid = "branch", branch.commit_id
        except NotFound:
            try:
                cid = self.refs.get_tag(repo, base).commit_id
                kind = "tag"
            except NotFound:
                kind = "commit"
                cid = self._commit_by_prefix(repo, base)
        if parsed.suffix and kind != "branch":
            raise InvalidArgument(f"'{parsed.suffix}' applies to a branch name only: {expr}")
        for op, n in parsed.steps:
            c = self.refs.get_commit(repo, cid)
            if op == "~":
                for _ in range(n):
                    if not c.parents:
                        raise RefNotFound(repo, expr)
                    c = self.refs.get_commit(repo, c.parents[0])
                cid = c.id
            else:
                if n == 0:
                    continue
                if n > len(c.parents):
                    raise RefNotFound(repo, expr)
                cid = c.parents[n - 1]
        if kind == "branch" and not parsed.steps:
            view = {"": View.FULL, "@": View.COMMITTED, "$": View.STAGING}[parsed.suffix]
            return ResolvedRef(expr, kind, cid, view, base, ns)
        return ResolvedRef(expr, kind, cid, View.COMMITTED, None, ns)

    def _commit_by_prefix(self, repo: str, prefix: str) -> CommitID:
        """The one commit whose id starts with ``prefix`` (any case, at least ``MIN_COMMIT_PREFIX``
        hex digits); ``RefNotFound`` or ``AmbiguousRef``."""
        prefix = prefix.lower()
        if not is_hex(prefix) or len(prefix) < MIN_COMMIT_PREFIX:
            raise RefNotFound(repo, prefix)
        found = self.refs.commits_with_prefix(repo, prefix, limit=5)
        if not found:
            raise RefNotFound(repo, prefix)
        if len(found) > 1:
            raise AmbiguousRef(repo, prefix, list(found))
        return found[0]

    def commit_of(self, repo: str, expr: str) -> Commit:
        return self.refs.get_commit(repo, self.resolve(repo, expr).commit_id)

    # ------------------------------------------------------------------ branches
    def create_branch(self, repo: str, name: str, source: str, *, hidden: bool = False) -> Branch:
        cid = self.resolve(repo, source).commit_id
        try:
            self.refs.get_tag(repo, name)
            raise AlreadyExists(f"a tag named {name} exists in {repo}")
        except NotFound:
            pass
        if is_hex(name):  # a branch named like a commit would hide it from ref resolution (lakeFS: 409)
            try:
                self.refs.get_commit(repo, CommitID(name))
                raise AlreadyExists(f"a commit with id {name} exists in {repo}")
            except CommitNotFound:
                pass
        branch = Branch(name, cid, new_token(), hidden=hidden)
        self.refs.create_branch(repo, branch)
        self.journal.record(self.get_repository(repo).storage_namespace, {"op": "branch", "name": name, "old": None, "new": cid})
        return branch

    def get_branch(self, repo: str, name: str) -> Branch:
        return self.refs.get_branch(repo, name)

    def get_branches(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Branch]:
        return self.refs.get_branches(keys)

    def list_branches(self, repo: str) -> list[Branch]:
        self.get_repository(repo)
        return self.refs.list_branches(repo)

    def delete_branch(self, repo: str, name: str) -> int:
        """Delete branch ``name`` and its staging; returns how many uncommitted changes went with it
        (counted on the deleted row's own staging, so a write that raced the delete is counted or refused)."""
        r = self.get_repository(repo)
        if name == r.default_branch:
            raise InvalidArgument(f"cannot delete the default branch {repo}/{name}")
        b = self.refs.delete_branch(repo, name)
        dropped = self.count_changes(repo, b)
        self._drop(b.tokens)
        self.journal.record(r.storage_namespace, {"op": "branch-deleted", "name": name, "old": b.commit_id})
        return dropped

    # ------------------------------------------------------------------ tags
    def create_tag(self, repo: str, name: str, target: str) -> Tag:
        cid = self.resolve(repo, target).commit_id
        try:
            self.refs.get_branch(repo, name)
            raise AlreadyExists(f"a branch named {name} exists in {repo}")
        except BranchNotFound:
            pass
        tag = Tag(name, cid)
        self.refs.create_tag(repo, tag)
        self.journal.record(self.get_repository(repo).storage_namespace, {"op": "tag", "name": name, "new": cid})
        return tag

    def get_tag(self, repo: str, name: str) -> Tag:
        """Tag ``name``; raises ``NotFound``."""
        return self.refs.get_tag(repo, name)

    def delete_tag(self, repo: str, name: str) -> None:
        self.refs.delete_tag(repo, name)
        self.journal.record(self.get_repository(repo).storage_namespace, {"op": "tag-deleted", "name": name})

    def list_tags(self, repo: str) -> list[Tag]:
        self.get_repository(repo)
        return self.refs.list_tags(repo)

    # ------------------------------------------------------------------ protection
    # Graveler stores the rules (journaled, so ``recover`` rebuilds them); the
    # catalog enforces them, so a protected branch still moves by merge and revert.
    def protection_rules(self, repo: str) -> list[str]:
        """The branch protection patterns of ``repo``, sorted; raises ``RepositoryNotFound``."""
        return self.refs.get_protection(repo)

    def set_protection_rules(self, repo: str, patterns: list[str]) -> None:
        """Replace the protection patterns of ``repo``; raises ``RepositoryNotFound``."""
        r = self.get_repository(repo)
        rules = sorted(set(patterns))
        self.refs.set_protection(repo, rules)
        self.journal.record(r.storage_namespace, {"op": "protection", "patterns": rules})

    def swap_protection_rules(
        self, repo: str, patterns: list[str], approvals: dict[str, int],
        check: Callable[[list[str], dict[str, int]], None],
    ) -> None:
        """Replace the protection patterns of ``repo`` and the approvals pull requests need in one
        ref-store transaction, if ``check(current patterns, current approvals)`` does not raise
        (compare-and-set); raises ``RepositoryNotFound``, what ``check`` raises."""
        r = self.get_repository(repo)
        rules = sorted(set(patterns))
        self.refs.swap_protection(repo, rules, approvals, check)
        self.journal.record(r.storage_namespace, {"op": "protection", "patterns": rules})

    # ------------------------------------------------------------------ reads
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
        return self._metarange_at(repo, ref, commit).get(key)

    def _branch_get(
        self, repo: str, ref: ResolvedRef, key: bytes, seen: tuple[Branch, float] | None
    ) -> tuple[Branch, bytes | None]:
        """The branch ``ref`` names as read now, and the value of ``key`` on it (``ref.view`` decides which part)."""
        assert ref.branch is not None
        at = time.monotonic()
        if seen is None or has_moves(seen[0].tokens):
            branch = self.refs.get_branch(repo, ref.branch)
            found, value = self._staged_get(branch.tokens, key)
        else:
            tokens = seen[0].tokens
            branch, found, value = self.staging.branch_staged_get(repo, ref.branch, tokens, key)
            if branch.tokens != tokens:
                found, value = self._staged_get(branch.tokens, key)
        self._saw(repo, branch, at)
        if ref.view is View.FULL and has_moves(branch.tokens):
            return branch, _layers(branch.tokens).get(key, self._staged_get, self._base_of(repo, ref, branch).get)
        if found or ref.view is View.STAGING:
            return branch, value
        commit = self.refs.get_commit(repo, branch.commit_id)
        return branch, self._metarange_at(repo, ref, commit).get(key)

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
            ns = namespace or self.get_repository(repo).storage_namespace
            guess = ResolvedRef(expr, "branch", seen[0].commit_id, View.FULL, expr, ns)
            try:
                branch, value = self._branch_get(repo, guess, key, seen)
            except BranchNotFound:
                pass
            else:
                return replace(guess, commit_id=branch.commit_id), value
        ref = self.resolve(repo, expr, namespace=namespace)
        return ref, self.get(repo, ref, key)

    def _branch_staged(self, repo: str, name: str, start: bytes, stop: bytes | None) -> tuple[Branch, Iterator[tuple[bytes, bytes | None]]]:
        """Branch ``name`` now and its staged entries in [start, stop): one statement for both
        when its single token is known from an earlier read, and a page holds them all."""
        at = time.monotonic()
        seen = self._seen.get((repo, name))
        if seen is not None and not seen[0].sealed_tokens:
            token = seen[0].staging_token
            branch, page, complete = self.staging.branch_staged_scan(repo, name, token, start, stop)
            if branch.tokens == (token,):
                self._saw(repo, branch, at)
                return branch, self._staged_rest(token, page, complete, stop)
        else:
            branch = self.refs.get_branch(repo, name)
        self._saw(repo, branch, at)
        return branch, self._staged_scan(branch.tokens, start, stop)

    def probe(
        self, repo: str, ref: ResolvedRef, key: bytes, start: bytes, stop: bytes | None
    ) -> tuple[bytes | None, Iterator[Record]]:
        """``get(ref, key)`` and ``scan(ref, start, stop)`` together (a path lookup: the key and
        what lies below it).  On a branch whose single token is known from an earlier read, the
        branch row and both staged parts are one statement; the scan reads more only as iterated.
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
                    staged = self._staged_rest(token, page, complete, stop)
                    if ref.view is View.STAGING:
                        return value, ((k, v) for k, v in staged if v is not None)
                    commit = self.refs.get_commit(repo, branch.commit_id)
                    mr = self._metarange_at(repo, ref, commit)
                    return (value if found else mr.get(key)), _overlay(mr.scan(start, stop), staged)
        return self.get(repo, ref, key), self.scan(repo, ref, start, stop)

    def _staged_get(self, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
        """The newest staged entry of ``key`` among ``tokens`` (move records skipped: see ``moves``)."""
        real = real_tokens(tokens)
        return self.staging.staged_get(real, key) if real else (False, None)

    def _base_of(self, repo: str, ref: ResolvedRef, branch: Branch) -> MetaRange:
        return self._metarange_at(repo, ref, self.refs.get_commit(repo, branch.commit_id))

    def _staged_scan(
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

    def _staged_chunks(self, tokens: Sequence[StagingToken]) -> Iterator[Chunk]:
        """All of ``tokens``' staged entries (newest token first) as chunks of parallel lists, in key
        order: a staging that reads chunks (``ChunkedStagingScan``) gives one token's whole chunks."""
        from lakemount.graveler.committed.writer import chunked

        if len(tokens) == 1 and isinstance(self.staging, ChunkedStagingScan) and not has_moves(tokens):
            return self.staging.staged_chunks(tokens[0])
        return chunked(self._staged_scan(tokens, b"", None))

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
            yield from self._metarange_at(repo, ref, commit).scan(start, stop, decode)
            return
        assert ref.branch is not None
        branch, staged = self._branch_staged(repo, ref.branch, start, stop)
        if ref.view is View.FULL and has_moves(branch.tokens):
            mr = self._base_of(repo, ref, branch)
            records = _layers(branch.tokens).scan(start, stop, self._staged_scan, mr.scan)
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
        committed = self._metarange_at(repo, ref, commit).scan(start, stop, decode)
        yield from _overlay(committed, staged)

    # ------------------------------------------------------------------ writes
    def set(
        self, repo: str, branch: str, key: bytes, value: bytes, *, ready: Callable[[], None] | None = None, namespace: str = "",
    ) -> None:
        """Stage ``value`` at ``key``; ``ready`` waits for the data it points at, ``namespace`` is the storage
        namespace that data was written under (see ``StagingStore.stage``)."""
        self.staging.stage(repo, branch, [(key, value)], ready=ready, namespace=namespace)

    def set_many(self, repo: str, branch: str, items: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Stage several changes in one transaction (atomic: a rename is one call).

        The ref store raises ``RepositoryNotFound``/``BranchNotFound`` (writes ask nothing else first).
        """
        if items:
            self.staging.stage(repo, branch, items)
        else:
            self.get_branch(repo, branch)  # nothing to stage: still an error for a missing branch

    def set_many_if(
        self, repo: str, branch: str, items: Sequence[tuple[bytes, bytes | None]],
        expected: Sequence[tuple[bytes, bytes | None]], *, record: Repository | None = None,
    ) -> None:
        """``set_many`` only if every key of ``expected`` holds exactly its value on ``branch`` (None: absent).

        Checked and written in one ref-store transaction that holds the branch row, so of two
        writers expecting the same value one wins and the other gets ``PreconditionFailed``
        naming the key; a commit running meanwhile moves values from staging into history
        without changing them, so it fails neither.  ``record``: the repository's record as the caller
        holds it (then not read again): the write checks its namespace (``StagingStore.stage``).
        """
        r = record or self.get_repository(repo)

        def check(b: Branch, staged_get: Callable[[Sequence[StagingToken], bytes], tuple[bool, bytes | None]]) -> None:
            layers = _layers(b.tokens) if has_moves(b.tokens) else None

            def real_get(tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
                real = real_tokens(tokens)
                return staged_get(real, key) if real else (False, None)

            for key, want in expected:
                if layers is not None:
                    value = layers.get(key, real_get, self._metarange(r, b.commit_id).get)
                    if value != want:
                        raise PreconditionFailed(f"{repo}/{branch}/{key.decode('utf-8', 'replace')} changed")
                    continue
                found, value = staged_get(b.tokens, key)
                if not found:
                    value = self._metarange(r, b.commit_id).get(key)
                if value != want:
                    raise PreconditionFailed(f"{repo}/{branch}/{key.decode('utf-8', 'replace')} changed")

        self.staging.stage(repo, branch, items, check, namespace=r.storage_namespace if record is not None else "")

    def delete(self, repo: str, branch: str, key: bytes) -> None:
        """Stage a deletion; raises ``ObjectNotFound`` if the key is not there."""
        ref = ResolvedRef(branch, "branch", CommitID(""), View.FULL, branch)
        if self.get(repo, ref, key) is None:
            raise ObjectNotFound(f"{repo}/{branch}/{key.decode('utf-8', 'replace')}")
        self.staging.stage(repo, branch, [(key, None)])

    def staging_noticed(self, detail: str) -> None:
        """Take what another process's staging change notice carried (see ``StagingStore.noticed``)."""
        self.staging.noticed(detail)

    def collect_staging(self, repo: str, *, grace_s: float | None = None) -> int:
        """Delete ``repo``'s staging data that no branch references any more (files of a writer killed
        between its PUT and its append, files a commit, a reset or a compaction dropped), once older
        than ``grace_s`` (None: the staging backend's grace); returns how many objects went."""
        return self.staging.collect_staging(self.get_repository(repo).storage_namespace, grace_s=grace_s)

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
        return self._changes_anything(self.get_repository(repo), branch.commit_id, branch.tokens)

    def count_changes(self, repo: str, branch: Branch) -> int:
        """How many keys ``branch``'s staging changes in its head's tree (what ``diff_uncommitted`` would list)."""
        if not self.has_uncommitted(repo, branch):
            return 0
        mr = self._metarange(self.get_repository(repo), branch.commit_id)
        return sum(1 for k, v in self._changes(mr, branch.tokens) if mr.get(k) != v)

    # ------------------------------------------------------------------ commit
    def commit(
        self,
        repo: str,
        branch: str,
        message: str,
        *,
        committer: str = "lakemount",
        metadata: Sequence[tuple[str, str]] = (),
        allow_empty: bool = False,
        date: float | None = None,
    ) -> CommitResult:
        """Commit the branch's staging; raises ``NothingToCommit`` if it changes nothing."""
        from lakemount.graveler.committed.writer import apply_chunks

        r = self.get_repository(repo)
        if not message:
            raise InvalidArgument("a commit needs a message")
        backoff = _Backoff()
        first = True
        while True:
            b = self._branch_for_write(repo, branch)
            if first and not allow_empty and not self.has_uncommitted(repo, b):
                raise NothingToCommit(f"{repo}/{branch}")
            sealed = b.tokens
            sealing = Branch(b.name, b.commit_id, new_token(), sealed)
            if not self.refs.cas_branch(repo, b, sealing):
                backoff.wait()
                continue
            base = self.refs.get_commit(repo, b.commit_id)
            base_mr = self.metarange_of(r, base)
            if has_moves(sealed):
                mr_id, mr_sum, stats = self._apply_moves(r, base_mr, sealed)
            else:
                mr_id, mr_sum, stats = apply_chunks(self.committed, r.storage_namespace, base_mr, self._staged_chunks(sealed))
            if stats.changes_applied == 0 and first and not allow_empty:
                # Staged entries equal to committed ones: nothing to record.  The
                # sealed tokens stay visible and go into the next commit.
                raise NothingToCommit(f"{repo}/{branch}")
            commit = self._make_commit(
                (base.id,), mr_id, mr_sum, message, committer, metadata, date if date is not None else self.clock(),
                base.generation + 1,
            )
            self.refs.put_commit(repo, commit)
            self.journal.write_commit(r.storage_namespace, commit)
            if self._finish_commit(repo, branch, b.commit_id, sealed, commit):
                self.journal.record(r.storage_namespace, {"op": "branch", "name": branch, "old": base.id, "new": commit.id})
                self._drop(sealed)
                return CommitResult(commit, stats)
            if not allow_empty:
                cur = self.refs.get_branch(repo, branch)
                if cur.commit_id == b.commit_id and not set(sealed) & set(cur.tokens):
                    # A reset dropped what this commit sealed before it could record it: the reset
                    # came first, and then there was nothing to commit (retrying would record an
                    # empty commit and report success for changes the reset dropped).
                    raise NothingToCommit(f"{repo}/{branch}")
            first = False
            backoff.wait()

    def _changes(
        self, mr: MetaRange, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """What ``tokens`` change in the tree ``mr`` in [start, stop), in key order (None: a deletion); staged
        entries may equal what ``mr`` holds.  Move records make it the layered view's difference (``moves``)."""
        if has_moves(tokens):
            return _layers(tokens).changes(self._staged_scan, mr.get, mr.scan, start, stop)
        return self._staged_scan(tokens, start, stop)

    def _apply_moves(self, r: Repository, base: MetaRange, sealed: Sequence[StagingToken]) -> tuple[MetaRangeID, str, ApplyStats]:
        """Write the tree of ``base`` under ``sealed`` when they hold move records: the moved ranges rewritten
        (their difference, with every other staged entry, in one pass over the ranges), then the few entries
        outside them whose link groups list a moved name (found in that pass) with the names renamed."""
        from lakemount.graveler.committed.writer import apply, apply_chunks, chunked

        layers = _layers(sealed)
        linked: list[bytes] = []

        def watched() -> Iterator[tuple[bytes, bytes | None]]:
            for k, v in layers.changes(self._staged_scan, base.get, base.scan):
                if v is not None and len(v) > 17 and v[17] == 0x9B:
                    linked.append(v)
                yield k, v

        ns = r.storage_namespace
        mr_id, mr_sum, stats = apply_chunks(self.committed, ns, base, chunked(watched()))
        extras = layers.linked_outside(linked)
        if not extras:
            return mr_id, mr_sum, stats
        written = self.committed.metarange(ns, mr_id, mr_sum)
        delta = []
        for k in sorted(extras):
            v = layers.get(k, self._staged_get, base.get)
            if written.get(k) != v:
                delta.append((k, v))
        if not delta:
            return mr_id, mr_sum, stats
        mr_id, mr_sum, more = apply(self.committed, ns, written, delta)
        stats.changes_applied += more.changes_applied
        return mr_id, mr_sum, stats

    def _finish_commit(
        self, repo: str, name: str, base: CommitID, sealed: tuple[StagingToken, ...], commit: Commit
    ) -> bool:
        """Swap the branch to ``commit`` if it still stands on ``base`` with ``sealed`` pending.

        Other committers may have sealed newer tokens on top of ours meanwhile;
        those stay sealed for their own commits.
        """
        n = len(sealed)
        while True:
            cur = self.refs.get_branch(repo, name)
            if cur.commit_id != base or cur.sealed_tokens[len(cur.sealed_tokens) - n :] != sealed:
                return False
            final = Branch(name, commit.id, cur.staging_token, cur.sealed_tokens[: len(cur.sealed_tokens) - n])
            if self.refs.cas_branch(repo, cur, final):
                return True

    def _swap_head(self, repo: str, expected: Branch, commit: Commit) -> bool:
        """Move a clean branch (from :meth:`_clean_branch`) to ``commit``, dropping its sealed tokens,
        which change nothing; False if the branch changed meanwhile."""
        new = Branch(expected.name, commit.id, expected.staging_token, ())
        if not self.refs.cas_branch(repo, expected, new):
            return False
        self._drop(expected.sealed_tokens)
        r = self.get_repository(repo)
        self.journal.record(r.storage_namespace, {"op": "branch", "name": expected.name, "old": expected.commit_id, "new": commit.id})
        return True

    # ------------------------------------------------------------------ merge base
    def merge_base(self, repo: str, a: CommitID, b: CommitID) -> CommitID | None:
        """The common ancestor of highest generation (None if histories are disjoint)."""
        flags: dict[str, int] = {a: 1}
        flags[b] = flags.get(b, 0) | 2
        heap: list[tuple[int, str]] = []
        seen: set[str] = set()
        for c in {a, b}:
            heapq.heappush(heap, (-self.refs.get_commit(repo, c).generation, c))
            seen.add(c)
        while heap:
            _g, cid = heapq.heappop(heap)
            f = flags[cid]
            if f == 3:
                return CommitID(cid)
            for p in self.refs.get_commit(repo, cid).parents:
                flags[p] = flags.get(p, 0) | f
                if p not in seen:
                    seen.add(p)
                    heapq.heappush(heap, (-self.refs.get_commit(repo, p).generation, p))
        return None

    # ------------------------------------------------------------------ merge
    def _branch_for_write(self, repo: str, name: str) -> Branch:
        """The branch ``name`` a write goes to; ``ReadOnlyRef`` if ``name`` is another kind of ref
        (a tag, a commit id, an expression such as ``main~1`` or ``main@``), else ``BranchNotFound``.

        One answer for every write verb: commit, reset, merge, revert and cherry-pick
        report a non-branch ref as read-only, as uploads and deletes do.
        """
        try:
            return self.refs.get_branch(repo, name)
        except BranchNotFound as exc:
            try:
                self.resolve(repo, name)
            except LakeMountError:
                raise exc from None
            raise ReadOnlyRef(f"{repo}/{name}") from exc

    @staticmethod
    def _same_tree(a: Any, b: Any) -> bool:
        """Whether two metaranges hold the same entries: equal ids, or no difference (a tree rebuilt
        by a squash or an apply can hold the same entries in other ranges, hence another id)."""
        from lakemount.graveler.committed.diff import diff as committed_diff

        return bool(a.id == b.id or next(iter(committed_diff(a, b)), None) is None)

    def _clean_branch(self, repo: str, name: str, what: str) -> Branch:
        """Branch ``name`` for a merge, revert or cherry-pick; ``DirtyBranch`` if its staging changes anything.

        Staged entries that change nothing (an object written and deleted again before a commit, such
        as an editor's swap file) do not make the branch dirty, as in lakeFS: they are sealed, so writes
        from then on go to a fresh token, checked again once sealed, and dropped by the head swap
        (:meth:`_swap_head`).  Left under a moved head they could start to mean something: a
        tombstone would hide what the merge brings.
        """
        backoff = _Backoff()
        while True:
            b = self._branch_for_write(repo, name)
            if not self.has_uncommitted(repo, b):
                return b
            r = self.get_repository(repo)
            if self._changes_anything(r, b.commit_id, b.tokens):
                raise DirtyBranch(what, f"{repo}/{name}")
            sealed = Branch(b.name, b.commit_id, new_token(), b.tokens)
            if not self.refs.cas_branch(repo, b, sealed):
                backoff.wait()
                continue
            # A write may have reached the old token between the check and the seal.
            if self._changes_anything(r, b.commit_id, sealed.sealed_tokens):
                raise DirtyBranch(what, f"{repo}/{name}")
            return sealed

    def _changes_anything(self, r: Repository, commit_id: CommitID, tokens: Sequence[StagingToken]) -> bool:
        """Whether the staged entries of ``tokens`` change the tree of ``commit_id``: a value it does not
        hold (byte for byte), or a tombstone over a key it has."""
        mr = self._metarange(r, commit_id)
        return any(mr.get(k) != v for k, v in self._changes(mr, tokens))

    def _metarange(self, repo: Repository, commit_id: CommitID | None) -> MetaRange:
        if commit_id is None:
            return self.committed.metarange(repo.storage_namespace, EMPTY_METARANGE, "")
        return self.metarange_of(repo, self.refs.get_commit(repo.name, commit_id))

    def merge(
        self,
        repo: str,
        source: str,
        dest: str,
        *,
        strategy: str | None = None,
        squash: bool = False,
        message: str | None = None,
        committer: str = "lakemount",
        metadata: Sequence[tuple[str, str]] = (),
        allow_empty: bool = False,
    ) -> MergeResult:
        """Merge ``source`` (any ref) into branch ``dest``; raises ``MergeConflict`` listing paths.

        A source that ``dest`` already holds (reachable from its head: lakeFS's and git's "no changes")
        leaves ``dest`` where it was (``merged=False``), unless ``allow_empty``, which records a merge
        commit all the same, as lakeFS does.  A source that is not reachable is merged even when its
        changes since the merge base add up to none (its tree is the base's or the destination's): the
        merge commit records that its history joined, as git's and lakeFS's do.
        """
        from lakemount.graveler.committed.diff import diff as committed_diff
        from lakemount.graveler.committed.merge import Strategy, three_way
        from lakemount.graveler.committed.writer import apply

        r = self.get_repository(repo)
        strat = Strategy.parse(strategy)
        backoff = _Backoff()
        while True:
            d = self._clean_branch(repo, dest, "merge")
            src_id = self.resolve(repo, source).commit_id
            base_id = src_id if src_id == d.commit_id else self.merge_base(repo, src_id, d.commit_id)
            src_mr = self._metarange(r, src_id)
            dst_mr = self._metarange(r, d.commit_id)
            stats: ApplyStats | None = None
            changes = 0
            if base_id == src_id:
                if not allow_empty:
                    return MergeResult(d.commit_id, merged=False)
                mr_id, mr_sum = dst_mr.id, dst_mr.checksum
            elif base_id is not None and self._same_tree(self._metarange(r, base_id), src_mr):
                # The source's changes add up to none: the destination's tree, under a merge commit.
                mr_id, mr_sum = dst_mr.id, dst_mr.checksum
            elif base_id == d.commit_id:
                # The destination has nothing of its own: the result is the source's tree.
                mr_id, mr_sum = src_mr.id, src_mr.checksum
                changes = sum(1 for _ in committed_diff(dst_mr, src_mr))
            else:
                base_mr = self._metarange(r, base_id)
                delta, conflicts = three_way(base_mr, src_mr, dst_mr, strat)
                if conflicts:
                    raise MergeConflict([k.decode("utf-8", "replace") for k in conflicts])
                changes = len(delta)
                mr_id, mr_sum, stats = apply(self.committed, r.storage_namespace, dst_mr, delta)
            head = self.refs.get_commit(repo, d.commit_id)
            src_commit = self.refs.get_commit(repo, src_id)
            parents = (d.commit_id,) if squash or src_id == d.commit_id else (d.commit_id, src_id)
            gen = max(head.generation, 0 if squash else src_commit.generation) + 1
            msg = message or f"Merge '{source}' into '{dest}'"
            commit = self._make_commit(parents, mr_id, mr_sum, msg, committer, metadata, self.clock(), gen)
            self.refs.put_commit(repo, commit)
            self.journal.write_commit(r.storage_namespace, commit)
            if self._swap_head(repo, d, commit):
                return MergeResult(commit.id, merged=True, changes=changes, stats=stats)
            backoff.wait()

    def _pick(
        self, repo: str, branch: str, base: CommitID | None, source: CommitID | None, message: str,
        committer: str, metadata: Sequence[tuple[str, str]], what: str, allow_empty: bool = False,
    ) -> Commit:
        """Apply the change base->source onto ``branch`` (revert and cherry-pick)."""
        from lakemount.graveler.committed.merge import Strategy, three_way
        from lakemount.graveler.committed.writer import apply

        r = self.get_repository(repo)
        backoff = _Backoff()
        while True:
            d = self._clean_branch(repo, branch, what)
            dst_mr = self._metarange(r, d.commit_id)
            delta, conflicts = three_way(self._metarange(r, base), self._metarange(r, source), dst_mr, Strategy.FAIL)
            if conflicts:
                raise MergeConflict([k.decode("utf-8", "replace") for k in conflicts])
            head = self.refs.get_commit(repo, d.commit_id)
            if not delta and not allow_empty:
                raise NothingToCommit(f"{repo}/{branch} ({what} changes nothing)")
            if delta:
                mr_id, mr_sum, _stats = apply(self.committed, r.storage_namespace, dst_mr, delta)
            else:
                mr_id, mr_sum = head.metarange_id, head.metarange_checksum
            commit = self._make_commit(
                (d.commit_id,), mr_id, mr_sum, message, committer, metadata, self.clock(), head.generation + 1
            )
            self.refs.put_commit(repo, commit)
            self.journal.write_commit(r.storage_namespace, commit)
            if self._swap_head(repo, d, commit):
                return commit
            backoff.wait()

    def _parent(self, c: Commit, parent_number: int | None) -> CommitID | None:
        if not c.parents:
            return None
        if len(c.parents) > 1 and parent_number is None:
            raise InvalidArgument(f"commit {c.id[:12]} is a merge commit: choose a parent number (1..{len(c.parents)})")
        n = 1 if parent_number is None else parent_number
        if not 1 <= n <= len(c.parents):
            raise InvalidArgument(f"commit {c.id[:12]} has no parent number {n}")
        return c.parents[n - 1]

    def revert(
        self, repo: str, branch: str, ref: str, *, parent_number: int | None = None, committer: str = "lakemount",
        allow_empty: bool = False,
    ) -> Commit:
        """Commit the inverse of ``ref``'s change on ``branch``; ``NothingToCommit`` if that changes
        nothing (unless ``allow_empty``), ``MergeConflict``, ``ReadOnlyRef`` for a non-branch."""
        c = self.commit_of(repo, ref)
        parent = self._parent(c, parent_number)
        return self._pick(
            repo, branch, c.id, parent, f"Revert {c.id[:12]}: {c.message}", committer, (), "revert", allow_empty
        )

    def cherry_pick(
        self, repo: str, branch: str, ref: str, *, parent_number: int | None = None, committer: str = "lakemount",
        allow_empty: bool = False,
    ) -> Commit:
        """Commit ``ref``'s change again on ``branch``; ``NothingToCommit`` if that changes
        nothing (unless ``allow_empty``), ``MergeConflict``, ``ReadOnlyRef`` for a non-branch."""
        c = self.commit_of(repo, ref)
        parent = self._parent(c, parent_number)
        # lakeFS's keys: where the change came from and who made it (the new commit's committer is the picker).
        picked = {**dict(c.metadata), "cherry-pick-origin": c.id, "cherry-pick-committer": c.committer}
        return self._pick(
            repo, branch, parent, c.id, c.message, committer, sorted(picked.items()), "cherry-pick", allow_empty
        )

    # ------------------------------------------------------------------ reset
    def hard_reset(self, repo: str, branch: str, ref: str) -> Commit:
        """Move ``branch``'s head to the commit ``ref`` points at (lakeFS's hard reset), returning it.

        Raises ``DirtyBranch`` if the branch has uncommitted changes, ``RefNotFound`` and what
        :meth:`resolve` raises.  ``ref`` is resolved under the swap, as lakeFS does: a reset to
        ``branch~1`` racing a commit lands one commit below whichever head it swaps.
        """
        backoff = _Backoff()
        while True:
            b = self._clean_branch(repo, branch, "hard reset")
            commit = self.refs.get_commit(repo, self.resolve(repo, ref).commit_id)
            if self._swap_head(repo, b, commit):
                return commit
            backoff.wait()

    def reset(self, repo: str, branch: str, *, prefix: bytes | None = None, key: bytes | None = None) -> None:
        """Drop uncommitted changes: all of them, those under ``prefix``, or one ``key``."""
        if prefix is None and key is None:
            backoff = _Backoff()
            while True:
                b = self._branch_for_write(repo, branch)
                if self.refs.cas_branch(repo, b, Branch(b.name, b.commit_id, new_token(), ())):
                    self._drop(b.tokens)
                    return
                backoff.wait()
        b = self._branch_for_write(repo, branch)
        if has_moves(b.tokens):
            # Below a move a staged key has the name it had then: dropping it by its name now would
            # drop another key, so a reset that reaches into a moved range is all or nothing.
            lo = key if key is not None else prefix or b""
            for a, z in _layers(b.tokens).ranges():
                hi = lo + b"\x00" if key is not None else prefix_end(lo)
                if (z is None or lo < z) and (hi is None or a < hi):
                    raise InvalidArgument(
                        f"{repo}/{branch} has an uncommitted directory rename over "
                        f"{lo.decode('utf-8', 'replace') or '/'}: reset the whole branch, or commit first"
                    )
        for t in real_tokens(b.tokens):
            self.staging.drop_staging(t, prefix=prefix or b"", key=key)

    def move(self, repo: str, branch: str, old: bytes, new: bytes) -> tuple[Branch, Branch] | None:
        """Stage the move of every key under prefix ``old`` to prefix ``new`` as one move record, in
        constant time (see ``moves``); returns the branch row before and after (a caller that knew the
        first may take the second as its own change); None, staging nothing, if the branch already
        holds ``MAX_MOVES`` uncommitted ones (the caller then stages the keys one by one).

        Both prefixes must end with the same separator and neither may lie under the other
        (``InvalidArgument``).  The record goes into the branch row with one compare-and-swap that
        also starts a fresh staging token, so every write is either older (and moves) or newer
        (and keeps its name).  Raises ``BranchNotFound``, ``ReadOnlyRef``.
        """
        if not old or not new or old[-1:] != new[-1:] or old.startswith(new) or new.startswith(old):
            raise InvalidArgument(f"cannot move {old!r} to {new!r}")
        from lakemount.graveler.moves import MAX_MOVES, Move

        record = Move(old, new).token
        backoff = _Backoff()
        while True:
            b = self._branch_for_write(repo, branch)
            if sum(1 for t in b.tokens if t.startswith(MOVE_MARK)) >= MAX_MOVES:
                return None
            moved = Branch(b.name, b.commit_id, new_token(), (record, *b.tokens), hidden=b.hidden)
            if self.refs.cas_branch(repo, b, moved):
                return b, moved
            backoff.wait()

    def _drop(self, tokens: Iterable[StagingToken]) -> None:
        """Drop the staged entries of ``tokens`` (move records have none)."""
        for t in real_tokens(tokens):
            self.staging.drop_staging(t)

    # ------------------------------------------------------------------ diff
    def diff(
        self, repo: str, left: str, right: str, *, prefix: bytes = b""
    ) -> Iterator[DiffRecord]:
        """Two-way diff of two committed states (branches use their committed head)."""
        from lakemount.graveler.committed.diff import diff as committed_diff

        r = self.get_repository(repo)
        lm = self._metarange(r, self.resolve(repo, left).commit_id)
        rm = self._metarange(r, self.resolve(repo, right).commit_id)
        for k, lv, rv in committed_diff(lm, rm, prefix, prefix_end(prefix) if prefix else None):
            yield DiffRecord(k, "added" if lv is None else "removed" if rv is None else "changed", lv, rv)

    def diff_three_way(self, repo: str, left: str, right: str) -> Iterator[DiffRecord]:
        """What merging ``right`` into ``left`` would change, conflicts marked (lakeFS's three-dot diff)."""
        from lakemount.graveler.committed.merge import Strategy, three_way

        r = self.get_repository(repo)
        lid = self.resolve(repo, left).commit_id
        rid = self.resolve(repo, right).commit_id
        base = self.merge_base(repo, lid, rid)
        base_mr, lm, rm = self._metarange(r, base), self._metarange(r, lid), self._metarange(r, rid)
        delta, conflicts = three_way(base_mr, rm, lm, Strategy.FAIL)
        conflict_set = set(conflicts)
        out = [(k, v) for k, v in delta] + [(k, rm.get(k)) for k in conflict_set]
        for k, v in sorted(out, key=lambda kv: kv[0]):
            lv = lm.get(k)
            kind = "conflict" if k in conflict_set else "added" if lv is None else "removed" if v is None else "changed"
            yield DiffRecord(k, kind, lv, v)

    def diff_uncommitted(self, repo: str, branch: str, *, prefix: bytes = b"") -> Iterator[DiffRecord]:
        """Staged changes of ``branch`` against its head commit."""
        r = self.get_repository(repo)
        b = self.refs.get_branch(repo, branch)
        mr = self._metarange(r, b.commit_id)
        stop = prefix_end(prefix) if prefix else None
        for k, v in self._changes(mr, b.tokens, prefix, stop):
            old = mr.get(k)
            if old == v:
                continue
            if v is None:
                yield DiffRecord(k, "removed", old, None)
            else:
                yield DiffRecord(k, "added" if old is None else "changed", old, v)

    # ------------------------------------------------------------------ log
    def log(
        self,
        repo: str,
        ref: str,
        *,
        limit: int | None = None,
        since: float | None = None,
        first_parent: bool = False,
        paths: Sequence[bytes] = (),
        prefixes: Sequence[bytes] = (),
    ) -> Iterator[Commit]:
        """Commits reachable from ``ref``, newest first; filtered by changed paths/prefixes."""
        r = self.get_repository(repo)
        start = self.refs.get_commit(repo, self.resolve(repo, ref).commit_id)
        if limit is not None and limit <= 0:
            return
        heap: list[tuple[float, int, str]] = [(-start.creation_date, -start.generation, start.id)]
        seen = {start.id}
        count = 0
        while heap:
            _d, _g, cid = heapq.heappop(heap)
            c = self.refs.get_commit(repo, cid)
            if since is not None and c.creation_date < since:
                continue
            parents = c.parents[:1] if first_parent else c.parents
            for p in parents:
                if p not in seen:
                    seen.add(p)
                    pc = self.refs.get_commit(repo, p)
                    heapq.heappush(heap, (-pc.creation_date, -pc.generation, p))
            if (paths or prefixes) and not self._touches(r, c, paths, prefixes):
                continue
            yield c
            count += 1
            if limit is not None and count >= limit:
                return

    def first_parent_changes(self, repo: Repository, commit: Commit, start: bytes, stop: bytes | None) -> Iterator[bytes]:
        """Keys in [start, stop) whose records ``commit`` changed against its first parent (a root commit: all of
        its keys there), in key order; equal ranges are skipped by id, so the cost grows with the change."""
        from lakemount.graveler.committed.diff import diff as committed_diff

        ns = repo.storage_namespace
        mr = self.committed.metarange_span(ns, commit.metarange_id, commit.metarange_checksum, start, stop)
        if commit.parents:
            parent = self.refs.get_commit(repo.name, commit.parents[0])
            pmr = self.committed.metarange_span(ns, parent.metarange_id, parent.metarange_checksum, start, stop)
        else:
            pmr = self.committed.metarange_span(ns, EMPTY_METARANGE, "", start, stop)
        for k, _lv, _rv in committed_diff(pmr, mr, start, stop):
            yield k

    def _touches(self, r: Repository, c: Commit, paths: Sequence[bytes], prefixes: Sequence[bytes]) -> bool:
        from lakemount.graveler.committed.diff import diff as committed_diff

        mr = self.metarange_of(r, c)
        pmr = self._metarange(r, c.parents[0] if c.parents else None)
        if any(mr.get(p) != pmr.get(p) for p in paths):
            return True
        for pre in prefixes:
            for _ in committed_diff(pmr, mr, pre, prefix_end(pre)):
                return True
        return False


def _layers(tokens: Sequence[StagingToken]) -> Layers:
    """``tokens`` split at their move records; ``moves`` loads only for a branch that holds one (issue 41)."""
    from lakemount.graveler.moves import Layers

    return Layers(tokens)


def _later(scan: Callable[[], Iterable[_T]]) -> Iterator[_T]:
    """What ``scan()`` returns, called only when iterated: the rest after a first page is read only
    if someone lists past the page (a 1,000-entry listing does not pay a statement for the rest)."""
    yield from scan()


def _overlay(committed: Iterable[tuple[bytes, Any]], staged: Iterable[tuple[bytes, Any]]) -> Iterator[tuple[bytes, Any]]:
    """Committed records with staged ones on top (a None value hides the key); values pass through as they are."""
    c_it = iter(committed)
    s_it = iter(staged)
    c = next(c_it, None)
    s = next(s_it, None)
    while c is not None or s is not None:
        if s is None or (c is not None and c[0] < s[0]):
            assert c is not None
            yield c
            c = next(c_it, None)
        else:
            if c is not None and c[0] == s[0]:
                c = next(c_it, None)
            if s[1] is not None:
                yield s[0], s[1]
            s = next(s_it, None)
