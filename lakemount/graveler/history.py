"""The core's history: commit, log, diff (two-way, three-way, uncommitted) and the merge base.

A commit seals the branch's staging token with a compare-and-swap, writes
ranges from the base metarange plus the sealed staging, and swaps the branch to
the new commit; a lost swap retries.  The log walks parents newest first, the
diffs compare metaranges range by range (``committed.diff``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from lakemount.errors import (
    InvalidArgument,
    NothingToCommit,
)
from lakemount.graveler.committed.metarange import MetaRange
from lakemount.graveler.model import (
    EMPTY_METARANGE,
    Branch,
    Commit,
    CommitID,
    MetaRangeID,
    Repository,
    StagingToken,
    has_moves,
    prefix_end,
)
from lakemount.graveler.reads import Reads
from lakemount.graveler.repos import Repos
from lakemount.graveler.shared import Backoff, Part, Stores, layers_of, new_token
from lakemount.records import record

# Diff, merge and the range writer are imported by the verbs that use them: a reader (``lakemount fs ls``,
# ``log``) never loads them (issue 41).
if TYPE_CHECKING:
    from lakemount.graveler.committed.writer import ApplyStats


@record(frozen=True, slots=True)
class CommitResult:
    """A new commit and, when a tree was written, what writing it cost."""

    commit: Commit
    stats: ApplyStats | None = None


@record(frozen=True, slots=True)
class DiffRecord:
    """One key that differs between two trees; ``left``/``right`` are its values (None when absent)."""

    key: bytes
    kind: str  # "added", "removed", "changed", "conflict"
    left: bytes | None
    right: bytes | None


class History(Part):
    """Commits, their log and the differences between trees."""

    def __init__(self, stores: Stores, repos: Repos, reads: Reads) -> None:
        super().__init__(stores)
        self.repos = repos
        self.reads = reads

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

        r = self.repos.get_repository(repo)
        if not message:
            raise InvalidArgument("a commit needs a message")
        backoff = Backoff()
        first = True
        while True:
            b = self.repos.branch_for_write(repo, branch)
            if first and not allow_empty and not self.reads.has_uncommitted(repo, b):
                raise NothingToCommit(f"{repo}/{branch}")
            sealed = b.tokens
            sealing = Branch(b.name, b.commit_id, new_token(), sealed)
            if not self.refs.cas_branch(repo, b, sealing):
                backoff.wait()
                continue
            base = self.refs.get_commit(repo, b.commit_id)
            base_mr = self.repos.metarange_of(r, base)
            if has_moves(sealed):
                mr_id, mr_sum, stats = self._apply_moves(r, base_mr, sealed)
            else:
                mr_id, mr_sum, stats = apply_chunks(self.committed, r.storage_namespace, base_mr, self.reads.staged_chunks(sealed))
            if stats.changes_applied == 0 and first and not allow_empty:
                # Staged entries equal to committed ones: nothing to record.  The
                # sealed tokens stay visible and go into the next commit.
                raise NothingToCommit(f"{repo}/{branch}")
            commit = self.repos.make_commit(
                (base.id,), mr_id, mr_sum, message, committer, metadata, date if date is not None else self.clock(),
                base.generation + 1,
            )
            self.refs.put_commit(repo, commit)
            self.journal.write_commit(r.storage_namespace, commit)
            if self._finish_commit(repo, branch, b.commit_id, sealed, commit):
                self.journal.record(r.storage_namespace, {"op": "branch", "name": branch, "old": base.id, "new": commit.id})
                self.repos.drop(sealed)
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

    def _apply_moves(self, r: Repository, base: MetaRange, sealed: Sequence[StagingToken]) -> tuple[MetaRangeID, str, ApplyStats]:
        """Write the tree of ``base`` under ``sealed`` when they hold move records: the moved ranges rewritten
        (their difference, with every other staged entry, in one pass over the ranges), then the few entries
        outside them whose link groups list a moved name (found in that pass) with the names renamed."""
        from lakemount.graveler.committed.writer import apply, apply_chunks, chunked

        layers = layers_of(sealed)
        linked: list[bytes] = []

        def watched() -> Iterator[tuple[bytes, bytes | None]]:
            for k, v in layers.changes(self.reads.staged_scan, base.get, base.scan):
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
            v = layers.get(k, self.reads.staged_get, base.get)
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

    def diff(
        self, repo: str, left: str, right: str, *, prefix: bytes = b""
    ) -> Iterator[DiffRecord]:
        """Two-way diff of two committed states (branches use their committed head)."""
        from lakemount.graveler.committed.diff import diff as committed_diff

        r = self.repos.get_repository(repo)
        lm = self.repos.metarange(r, self.repos.resolve(repo, left).commit_id)
        rm = self.repos.metarange(r, self.repos.resolve(repo, right).commit_id)
        for k, lv, rv in committed_diff(lm, rm, prefix, prefix_end(prefix) if prefix else None):
            yield DiffRecord(k, "added" if lv is None else "removed" if rv is None else "changed", lv, rv)

    def diff_three_way(self, repo: str, left: str, right: str) -> Iterator[DiffRecord]:
        """What merging ``right`` into ``left`` would change, conflicts marked (lakeFS's three-dot diff)."""
        from lakemount.graveler.committed.merge import Strategy, three_way

        r = self.repos.get_repository(repo)
        lid = self.repos.resolve(repo, left).commit_id
        rid = self.repos.resolve(repo, right).commit_id
        base = self.merge_base(repo, lid, rid)
        base_mr, lm, rm = self.repos.metarange(r, base), self.repos.metarange(r, lid), self.repos.metarange(r, rid)
        delta, conflicts = three_way(base_mr, rm, lm, Strategy.FAIL)
        conflict_set = set(conflicts)
        out = [(k, v) for k, v in delta] + [(k, rm.get(k)) for k in conflict_set]
        for k, v in sorted(out, key=lambda kv: kv[0]):
            lv = lm.get(k)
            kind = "conflict" if k in conflict_set else "added" if lv is None else "removed" if v is None else "changed"
            yield DiffRecord(k, kind, lv, v)

    def diff_uncommitted(self, repo: str, branch: str, *, prefix: bytes = b"") -> Iterator[DiffRecord]:
        """Staged changes of ``branch`` against its head commit."""
        r = self.repos.get_repository(repo)
        b = self.refs.get_branch(repo, branch)
        mr = self.repos.metarange(r, b.commit_id)
        stop = prefix_end(prefix) if prefix else None
        for k, v in self.reads.changes(mr, b.tokens, prefix, stop):
            old = mr.get(k)
            if old == v:
                continue
            if v is None:
                yield DiffRecord(k, "removed", old, None)
            else:
                yield DiffRecord(k, "added" if old is None else "changed", old, v)

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
        r = self.repos.get_repository(repo)
        start = self.refs.get_commit(repo, self.repos.resolve(repo, ref).commit_id)
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

        mr = self.repos.metarange_of(r, c)
        pmr = self.repos.metarange(r, c.parents[0] if c.parents else None)
        if any(mr.get(p) != pmr.get(p) for p in paths):
            return True
        for pre in prefixes:
            for _ in committed_diff(pmr, mr, pre, prefix_end(pre)):
                return True
        return False
