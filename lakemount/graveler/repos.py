"""The core's refs role: repositories, branches, tags, protection rules, ref expressions, commits by id.

What every other role stands on: reading a repository's record, resolving a
ref expression to a commit, the tree (metarange) of a commit, making a commit
record, and the branch a write goes to (``ReadOnlyRef`` for any other ref).
lakeFS keeps these in ``RefManager`` and graveler.go's ``VersionController``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

from lakemount.errors import (
    AlreadyExists,
    AmbiguousRef,
    BranchNotFound,
    CommitNotFound,
    InvalidArgument,
    LakeMountError,
    NotFound,
    ReadOnlyRef,
    RefNotFound,
    category_of,
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
    Tag,
    real_tokens,
)
from lakemount.graveler.refexpr import ResolvedRef, View, is_hex, parse
from lakemount.graveler.shared import Part, new_token

MIN_COMMIT_PREFIX: Final = 4


class Repos(Part):
    """Repositories, branches, tags, protection rules and ref resolution over the ref store and the journal."""

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
        commit = self.make_commit((), EMPTY_METARANGE, "", "Repository created", committer, (), now)
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
            self.drop(b.tokens)
        self.refs.delete_repository(name)
        self.journal.forget_repository(name)
        self.journal.record(repo.storage_namespace, {"op": "repository-deleted", "name": name})

    def make_commit(
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

    def metarange(self, repo: Repository, commit_id: CommitID | None) -> MetaRange:
        if commit_id is None:
            return self.committed.metarange(repo.storage_namespace, EMPTY_METARANGE, "")
        return self.metarange_of(repo, self.refs.get_commit(repo.name, commit_id))

    def metarange_at(self, repo: str, ref: ResolvedRef, commit: Commit) -> MetaRange:
        """``commit``'s metarange, in the namespace ``ref`` carries (asking the ref store only if it carries none)."""
        ns = ref.namespace or self.get_repository(repo).storage_namespace
        return self.committed.metarange(ns, commit.metarange_id, commit.metarange_checksum)

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

    def drop(self, tokens: Iterable[StagingToken]) -> None:
        """Drop the staged entries of ``tokens`` (move records have none)."""
        for t in real_tokens(tokens):
            self.staging.drop_staging(t)

    def branch_for_write(self, repo: str, name: str) -> Branch:
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
