"""The core's merge family: merge, cherry-pick, revert and hard reset, each moving a clean branch's head.

Each checks the destination is clean (``_clean_branch``: staged entries that
change nothing are sealed and dropped), computes a tree with the three-way merge
(``committed.merge``), records a commit when one is due, and swaps the head
(``_swap_head``); a lost swap retries with ``Backoff``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemount.errors import (
    DirtyBranch,
    InvalidArgument,
    MergeConflict,
    NothingToCommit,
)
from lakemount.graveler.history import History
from lakemount.graveler.model import (
    Branch,
    Commit,
    CommitID,
)
from lakemount.graveler.reads import Reads
from lakemount.graveler.repos import Repos
from lakemount.graveler.shared import Backoff, Part, Stores, new_token
from lakemount.records import record

# Diff, merge and the range writer are imported by the verbs that use them: a reader (``lakemount fs ls``,
# ``log``) never loads them (issue 41).
if TYPE_CHECKING:
    from lakemount.graveler.committed.writer import ApplyStats


@record(frozen=True, slots=True)
class MergeResult:
    """Where a merge left the destination: the commit it points at, and whether anything was merged."""

    commit_id: CommitID
    merged: bool  # False when the destination already contained the source
    changes: int = 0
    stats: ApplyStats | None = None


class Merges(Part):
    """Merge, cherry-pick, revert and hard reset of a branch."""

    def __init__(self, stores: Stores, repos: Repos, reads: Reads, history: History) -> None:
        super().__init__(stores)
        self.repos = repos
        self.reads = reads
        self.history = history

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

        r = self.repos.get_repository(repo)
        strat = Strategy.parse(strategy)
        backoff = Backoff()
        while True:
            d = self._clean_branch(repo, dest, "merge")
            src_id = self.repos.resolve(repo, source).commit_id
            base_id = src_id if src_id == d.commit_id else self.history.merge_base(repo, src_id, d.commit_id)
            src_mr = self.repos.metarange(r, src_id)
            dst_mr = self.repos.metarange(r, d.commit_id)
            stats: ApplyStats | None = None
            changes = 0
            if base_id == src_id:
                if not allow_empty:
                    return MergeResult(d.commit_id, merged=False)
                mr_id, mr_sum = dst_mr.id, dst_mr.checksum
            elif base_id is not None and self._same_tree(self.repos.metarange(r, base_id), src_mr):
                # The source's changes add up to none: the destination's tree, under a merge commit.
                mr_id, mr_sum = dst_mr.id, dst_mr.checksum
            elif base_id == d.commit_id:
                # The destination has nothing of its own: the result is the source's tree.
                mr_id, mr_sum = src_mr.id, src_mr.checksum
                changes = sum(1 for _ in committed_diff(dst_mr, src_mr))
            else:
                base_mr = self.repos.metarange(r, base_id)
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
            commit = self.repos.make_commit(parents, mr_id, mr_sum, msg, committer, metadata, self.clock(), gen)
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

        r = self.repos.get_repository(repo)
        backoff = Backoff()
        while True:
            d = self._clean_branch(repo, branch, what)
            dst_mr = self.repos.metarange(r, d.commit_id)
            delta, conflicts = three_way(self.repos.metarange(r, base), self.repos.metarange(r, source), dst_mr, Strategy.FAIL)
            if conflicts:
                raise MergeConflict([k.decode("utf-8", "replace") for k in conflicts])
            head = self.refs.get_commit(repo, d.commit_id)
            if not delta and not allow_empty:
                raise NothingToCommit(f"{repo}/{branch} ({what} changes nothing)")
            if delta:
                mr_id, mr_sum, _stats = apply(self.committed, r.storage_namespace, dst_mr, delta)
            else:
                mr_id, mr_sum = head.metarange_id, head.metarange_checksum
            commit = self.repos.make_commit(
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
        c = self.repos.commit_of(repo, ref)
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
        c = self.repos.commit_of(repo, ref)
        parent = self._parent(c, parent_number)
        # lakeFS's keys: where the change came from and who made it (the new commit's committer is the picker).
        picked = {**dict(c.metadata), "cherry-pick-origin": c.id, "cherry-pick-committer": c.committer}
        return self._pick(
            repo, branch, parent, c.id, c.message, committer, sorted(picked.items()), "cherry-pick", allow_empty
        )

    def hard_reset(self, repo: str, branch: str, ref: str) -> Commit:
        """Move ``branch``'s head to the commit ``ref`` points at (lakeFS's hard reset), returning it.

        Raises ``DirtyBranch`` if the branch has uncommitted changes, ``RefNotFound`` and what
        :meth:`Repos.resolve` raises.  ``ref`` is resolved under the swap, as lakeFS does: a reset to
        ``branch~1`` racing a commit lands one commit below whichever head it swaps.
        """
        backoff = Backoff()
        while True:
            b = self._clean_branch(repo, branch, "hard reset")
            commit = self.refs.get_commit(repo, self.repos.resolve(repo, ref).commit_id)
            if self._swap_head(repo, b, commit):
                return commit
            backoff.wait()

    def _clean_branch(self, repo: str, name: str, what: str) -> Branch:
        """Branch ``name`` for a merge, revert or cherry-pick; ``DirtyBranch`` if its staging changes anything.

        Staged entries that change nothing (an object written and deleted again before a commit, such
        as an editor's swap file) do not make the branch dirty, as in lakeFS: they are sealed, so writes
        from then on go to a fresh token, checked again once sealed, and dropped by the head swap
        (:meth:`_swap_head`).  Left under a moved head they could start to mean something: a
        tombstone would hide what the merge brings.
        """
        backoff = Backoff()
        while True:
            b = self.repos.branch_for_write(repo, name)
            if not self.reads.has_uncommitted(repo, b):
                return b
            r = self.repos.get_repository(repo)
            if self.reads.changes_anything(r, b.commit_id, b.tokens):
                raise DirtyBranch(what, f"{repo}/{name}")
            sealed = Branch(b.name, b.commit_id, new_token(), b.tokens)
            if not self.refs.cas_branch(repo, b, sealed):
                backoff.wait()
                continue
            # A write may have reached the old token between the check and the seal.
            if self.reads.changes_anything(r, b.commit_id, sealed.sealed_tokens):
                raise DirtyBranch(what, f"{repo}/{name}")
            return sealed

    @staticmethod
    def _same_tree(a: Any, b: Any) -> bool:
        """Whether two metaranges hold the same entries: equal ids, or no difference (a tree rebuilt
        by a squash or an apply can hold the same entries in other ranges, hence another id)."""
        from lakemount.graveler.committed.diff import diff as committed_diff

        return bool(a.id == b.id or next(iter(committed_diff(a, b)), None) is None)

    def _swap_head(self, repo: str, expected: Branch, commit: Commit) -> bool:
        """Move a clean branch (from :meth:`_clean_branch`) to ``commit``, dropping its sealed tokens,
        which change nothing; False if the branch changed meanwhile."""
        new = Branch(expected.name, commit.id, expected.staging_token, ())
        if not self.refs.cas_branch(repo, expected, new):
            return False
        self.repos.drop(expected.sealed_tokens)
        r = self.repos.get_repository(repo)
        self.journal.record(r.storage_namespace, {"op": "branch", "name": expected.name, "old": expected.commit_id, "new": commit.id})
        return True
