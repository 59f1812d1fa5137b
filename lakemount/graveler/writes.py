"""The core's writes: staging a change, a conditional change, a deletion, a prefix move, and dropping staging.

Every write goes to the branch's current staging token through the
``StagingStore``; nothing here writes committed data.  A reset drops staged
entries (all, under a prefix, or one key), a branch's deletion its whole
staging, and a move records a prefix rename in the branch row (``moves``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lakemount.errors import (
    InvalidArgument,
    ObjectNotFound,
    PreconditionFailed,
)
from lakemount.graveler.model import (
    MOVE_MARK,
    Branch,
    CommitID,
    Repository,
    StagingToken,
    has_moves,
    prefix_end,
    real_tokens,
)
from lakemount.graveler.reads import Reads
from lakemount.graveler.refexpr import ResolvedRef, View
from lakemount.graveler.repos import Repos
from lakemount.graveler.shared import Backoff, Part, Stores, layers_of, new_token


class Writes(Part):
    """Staged changes to a branch, and dropping them."""

    def __init__(self, stores: Stores, repos: Repos, reads: Reads) -> None:
        super().__init__(stores)
        self.repos = repos
        self.reads = reads

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
            self.repos.get_branch(repo, branch)  # nothing to stage: still an error for a missing branch

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
        r = record or self.repos.get_repository(repo)

        def check(b: Branch, staged_get: Callable[[Sequence[StagingToken], bytes], tuple[bool, bytes | None]]) -> None:
            layers = layers_of(b.tokens) if has_moves(b.tokens) else None

            def real_get(tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
                real = real_tokens(tokens)
                return staged_get(real, key) if real else (False, None)

            for key, want in expected:
                if layers is not None:
                    value = layers.get(key, real_get, self.repos.metarange(r, b.commit_id).get)
                    if value != want:
                        raise PreconditionFailed(f"{repo}/{branch}/{key.decode('utf-8', 'replace')} changed")
                    continue
                found, value = staged_get(b.tokens, key)
                if not found:
                    value = self.repos.metarange(r, b.commit_id).get(key)
                if value != want:
                    raise PreconditionFailed(f"{repo}/{branch}/{key.decode('utf-8', 'replace')} changed")

        self.staging.stage(repo, branch, items, check, namespace=r.storage_namespace if record is not None else "")

    def delete(self, repo: str, branch: str, key: bytes) -> None:
        """Stage a deletion; raises ``ObjectNotFound`` if the key is not there."""
        ref = ResolvedRef(branch, "branch", CommitID(""), View.FULL, branch)
        if self.reads.get(repo, ref, key) is None:
            raise ObjectNotFound(f"{repo}/{branch}/{key.decode('utf-8', 'replace')}")
        self.staging.stage(repo, branch, [(key, None)])

    def staging_noticed(self, detail: str) -> None:
        """Take what another process's staging change notice carried (see ``StagingStore.noticed``)."""
        self.staging.noticed(detail)

    def collect_staging(self, repo: str, *, grace_s: float | None = None) -> int:
        """Delete ``repo``'s staging data that no branch references any more (files of a writer killed
        between its PUT and its append, files a commit, a reset or a compaction dropped), once older
        than ``grace_s`` (None: the staging backend's grace); returns how many objects went."""
        return self.staging.collect_staging(self.repos.get_repository(repo).storage_namespace, grace_s=grace_s)

    def delete_branch(self, repo: str, name: str) -> int:
        """Delete branch ``name`` and its staging; returns how many uncommitted changes went with it
        (counted on the deleted row's own staging, so a write that raced the delete is counted or refused)."""
        r = self.repos.get_repository(repo)
        if name == r.default_branch:
            raise InvalidArgument(f"cannot delete the default branch {repo}/{name}")
        b = self.refs.delete_branch(repo, name)
        dropped = self.reads.count_changes(repo, b)
        self.repos.drop(b.tokens)
        self.journal.record(r.storage_namespace, {"op": "branch-deleted", "name": name, "old": b.commit_id})
        return dropped

    def reset(self, repo: str, branch: str, *, prefix: bytes | None = None, key: bytes | None = None) -> None:
        """Drop uncommitted changes: all of them, those under ``prefix``, or one ``key``."""
        if prefix is None and key is None:
            backoff = Backoff()
            while True:
                b = self.repos.branch_for_write(repo, branch)
                if self.refs.cas_branch(repo, b, Branch(b.name, b.commit_id, new_token(), ())):
                    self.repos.drop(b.tokens)
                    return
                backoff.wait()
        b = self.repos.branch_for_write(repo, branch)
        if has_moves(b.tokens):
            # Below a move a staged key has the name it had then: dropping it by its name now would
            # drop another key, so a reset that reaches into a moved range is all or nothing.
            lo = key if key is not None else prefix or b""
            for a, z in layers_of(b.tokens).ranges():
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
        backoff = Backoff()
        while True:
            b = self.repos.branch_for_write(repo, branch)
            if sum(1 for t in b.tokens if t.startswith(MOVE_MARK)) >= MAX_MOVES:
                return None
            moved = Branch(b.name, b.commit_id, new_token(), (record, *b.tokens), hidden=b.hidden)
            if self.refs.cas_branch(repo, b, moved):
                return b, moved
            backoff.wait()
