"""Catalog verbs on history: commit, merge, revert, cherry-pick, reset, log, diff and merge base.

Thin delegations to graveler, so front ends never reach it; each raises what
the graveler operation of the same name raises.  Paths and prefixes are
strings here (encoded as graveler keys the way
:func:`~lakemount.catalog.catalog.encode_path` does); a diff yields records
whose sides are stored values, read with :meth:`HistoryVerbs.entry_of`.
:class:`HistoryVerbs` is one part of the :class:`~lakemount.catalog.catalog.Catalog` facade.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from lakemount.catalog.model import encode_path
from lakemount.catalog.refs import RefVerbs
from lakemount.graveler.graveler import CommitResult, DiffRecord, MergeResult
from lakemount.graveler.model import Commit, Entry, decode_value


def _prefix(prefix: str) -> bytes:
    return prefix.encode("utf-8", "surrogateescape")


class HistoryVerbs(RefVerbs):
    """Commits and what compares or moves them (part of ``Catalog``)."""

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
        """Commit the branch's staged changes: the new commit, with what writing it took (``stats``).

        Raises ``NothingToCommit``, ``ProtectedBranch``, ``InvalidArgument``.
        """
        return self.graveler.commit(
            repo, branch, message, committer=committer, metadata=metadata, allow_empty=allow_empty, date=date
        )

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
    ) -> MergeResult:
        """Merge ``source`` into branch ``dest``; raises ``MergeConflict``, ``PreconditionFailed`` (dirty dest)."""
        return self.graveler.merge(
            repo, source, dest, strategy=strategy, squash=squash, message=message, committer=committer, metadata=metadata
        )

    def merge_base(self, repo: str, a: str, b: str) -> str | None:
        """The best common ancestor of two refs' commits (None if unrelated)."""
        return self.graveler.merge_base(repo, self.resolve(repo, a).commit_id, self.resolve(repo, b).commit_id)

    def revert(self, repo: str, branch: str, ref: str, *, parent_number: int | None = None, committer: str = "lakemount") -> Commit:
        """Commit the inverse of ``ref``'s change on ``branch``; ``MergeConflict``, ``InvalidArgument``."""
        return self.graveler.revert(repo, branch, ref, parent_number=parent_number, committer=committer)

    def cherry_pick(self, repo: str, branch: str, ref: str, *, parent_number: int | None = None, committer: str = "lakemount") -> Commit:
        """Commit ``ref``'s change again on ``branch``; ``MergeConflict``, ``InvalidArgument``."""
        return self.graveler.cherry_pick(repo, branch, ref, parent_number=parent_number, committer=committer)

    def reset(self, repo: str, branch: str, *, prefix: str | None = None, path: str | None = None) -> None:
        """Drop uncommitted changes: all, those under ``prefix``, or the one at ``path``."""
        self.graveler.reset(
            repo, branch, prefix=None if prefix is None else _prefix(prefix), key=None if path is None else encode_path(path)
        )

    def diff(self, repo: str, left: str, right: str, *, prefix: str = "") -> Iterator[DiffRecord]:
        """Two-way diff of two refs' committed states, in key order."""
        return self.graveler.diff(repo, left, right, prefix=_prefix(prefix))

    def diff_three_way(self, repo: str, left: str, right: str) -> Iterator[DiffRecord]:
        """What merging ``right`` into ``left`` would change (conflicts marked)."""
        return self.graveler.diff_three_way(repo, left, right)

    def diff_uncommitted(self, repo: str, branch: str, *, prefix: str = "") -> Iterator[DiffRecord]:
        """Staged changes of ``branch`` against its head commit, in key order."""
        return self.graveler.diff_uncommitted(repo, branch, prefix=_prefix(prefix))

    def log(
        self,
        repo: str,
        ref: str,
        *,
        limit: int | None = None,
        since: float | None = None,
        first_parent: bool = False,
        paths: Sequence[str] = (),
        prefixes: Sequence[str] = (),
    ) -> Iterator[Commit]:
        """Commits reachable from ``ref``, newest first, optionally only those changing ``paths``/``prefixes``."""
        return self.graveler.log(
            repo, ref, limit=limit, since=since, first_parent=first_parent,
            paths=[encode_path(p) for p in paths], prefixes=[_prefix(p) for p in prefixes],
        )

    @staticmethod
    def entry_of(value: bytes | None) -> Entry | None:
        """The entry a diff record's value holds (None stays None); raises ``Corrupt``."""
        return None if value is None else decode_value(value)
