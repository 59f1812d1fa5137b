"""Catalog verbs on refs: repositories, branches, tags, protection rules, and ref resolution.

Thin over graveler, as lakeFS's ``pkg/catalog`` is over its graveler: names
are validated here (:mod:`~lakemount.catalog.names`, before any hook runs),
other errors raised there (``RepositoryNotFound``,
``BranchNotFound``, ``RefNotFound``, ``AlreadyExists``, ``InvalidArgument``,
``ProtectedBranch``...).  :class:`RefVerbs` is one part of the
:class:`~lakemount.catalog.catalog.Catalog` facade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lakemount.catalog import protection as prot
from lakemount.catalog.kept import RULES_CHANGED, ChangeSource, changed_dirs
from lakemount.errors import AlreadyExists, InvalidArgument, LakeMountError, ReadOnlyRef
from lakemount.graveler.graveler import Graveler
from lakemount.graveler.model import Branch, Commit, Repository, Tag
from lakemount.graveler.ports import BlockAdapter
from lakemount.graveler.refexpr import ResolvedRef, View, parse
from lakemount.logs import get_logger

log = get_logger(__name__)

if TYPE_CHECKING:
    from lakemount.actions.runner import Actions
    from lakemount.catalog.confinement import Confinement, ImportSource
    from lakemount.catalog.events import Feed
    from lakemount.catalog.kept import KeptRecords
    from lakemount.catalog.protection import BranchProtection
    from lakemount.catalog.pulls import Pulls


class RefVerbs:
    """Repositories, branches, tags and ref resolution (part of ``Catalog``)."""

    graveler: Graveler
    changes: ChangeSource | None
    adapter: BlockAdapter
    namespace_root: str
    confinement: Confinement
    protection: BranchProtection
    kept: KeptRecords

    if TYPE_CHECKING:

        @property
        def actions(self) -> Actions: ...  # Catalog's: made on first use

        @property
        def feed(self) -> Feed: ...

        @property
        def pulls(self) -> Pulls: ...

    # ------------------------------------------------------------------ repositories
    def create_repository(self, name: str, storage_namespace: str | None = None, default_branch: str = "main") -> Repository:
        """Create a repository (its storage namespace defaults to ``<namespace root>/<name>``).

        Raises ``InvalidArgument`` for a bad name or namespace (``OutsideRoots`` for
        a ``local://`` one outside the configured roots, or one inside or around
        another repository's: ``confinement.py``), ``AlreadyExists`` if the name
        or the namespace is taken.
        """
        from lakemount.catalog import names  # the name rules: a verb that makes no ref does not compile them

        names.check_repository(name)  # before the name is used in a message or a default namespace
        names.check_branch(default_branch)
        taken = self._namespaces()
        if any(other == name for other, _ns in taken):
            # Before the namespace: re-creating an existing repository is a 409 whatever it names
            # (lakeFS's clients treat that as "exists", e.g. ``create(exist_ok=True)``).
            raise AlreadyExists(f"repository already exists: {name}")
        ns = storage_namespace or f"{self.namespace_root}/{name}"
        shown = storage_namespace or f"(the default one for {name})"
        self.confinement.check_namespace(ns, shown, taken)
        return self.graveler.create_repository(name, ns, default_branch)

    def _namespaces(self) -> list[tuple[str, str]]:
        return [(r.name, r.storage_namespace) for r in self.graveler.list_repositories()]

    def import_source(self, text: str, *, single: bool = False) -> ImportSource:
        """Where an import of ``text`` (``/dir``, ``local:///dir``, ``file:///dir``, ``s3://bucket/prefix``) reads from.

        Every front end asks this before importing (the API before it starts the
        job, the job before Spark): raises ``OutsideRoots`` for a local directory
        outside ``blockstore.local.import_roots``, ``NotFound``, ``InvalidArgument``
        (see ``Confinement.import_source``).
        """
        return self.confinement.import_source(text, self._namespaces(), single=single)

    def repository(self, name: str) -> Repository:
        """Repository ``name``; raises ``RepositoryNotFound``."""
        return self.graveler.get_repository(name)

    def list_repositories(self) -> list[Repository]:
        """Every repository, by name."""
        return self.graveler.list_repositories()

    def delete_repository(self, name: str) -> None:
        """Delete a repository's refs and staging (its stored objects stay, for GC); ``RepositoryNotFound``."""
        self.graveler.delete_repository(name)
        self.kept.forget(name)

    # ------------------------------------------------------------------ resolution
    def resolve(self, repo: str | Repository, ref: str | ResolvedRef) -> ResolvedRef:
        """What ref expression ``ref`` points at now; raises ``RefNotFound``, ``AmbiguousRef``, ``InvalidArgument``.

        ``repo`` is a name, or the repository's record when the caller has just
        read it (a front end that found it by a bucket name): then it is not read again.
        """
        if isinstance(ref, ResolvedRef):
            return ref
        if isinstance(repo, Repository):
            return self.graveler.resolve(repo.name, ref, namespace=repo.storage_namespace)
        return self.graveler.resolve(repo, ref)

    def writable_branch(self, repo: str, ref: str | ResolvedRef) -> str:
        """The branch name a write to ``ref`` goes to; ``ReadOnlyRef`` for tags, commits, ``@``, ``$``,
        ``ProtectedBranch`` for a branch a protection rule covers."""
        if isinstance(ref, str) and self.kept.is_branch(repo, ref):
            # A name an earlier write resolved to a branch: the staging statement reads its row anyway
            # (and refuses it if the branch is gone), so the write needs no resolution of its own.
            self.check_writable(repo, ref)
            return ref
        began = self.kept.note(repo)
        r = self.resolve(repo, ref)
        if r.view is not View.FULL or r.branch is None:
            raise ReadOnlyRef(f"{repo}/{r.expr}")
        self.check_writable(repo, r.branch)
        if r.expr == r.branch:
            self.kept.saw_branch(repo, r.branch, began)
        return r.branch

    def check_writable(self, repo: str, branch: str, action: str = prot.WRITE) -> None:
        """Raise ``ProtectedBranch`` if a protection rule covers ``branch`` of ``repo``.

        The one decision whether a branch may change directly: every catalog verb
        that changes a branch asks it, and so does every front end that refuses a
        write before it reads one (the mount at open, the API and the gateway
        before the body, an import before it lists its source).  ``action`` names
        what is refused (``protection.WRITE``, ``COMMIT``, ``RESET``,
        ``CHERRY_PICK``, ``DELETE``).
        """
        self.protection.check(repo, branch, action)

    def check_writable_kept(self, repo: str, branch: str, action: str = prot.WRITE) -> bool:
        """:meth:`check_writable` answered from the rules this process keeps (True, raising as it would), or
        False when they must be read (then call :meth:`check_writable`)."""
        return self.protection.check_kept(repo, branch, action)

    @staticmethod
    def is_fixed(resolved: ResolvedRef) -> bool:
        """True if ``resolved`` names one commit for good: a tag or a commit id, without ``~``/``^`` steps."""
        return resolved.kind in ("tag", "commit") and not parse(resolved.expr).steps

    def commit_of(self, repo: str, ref: str) -> Commit:
        """The commit ``ref`` points at (a branch's head commit); raises ``RefNotFound``..."""
        return self.graveler.commit_of(repo, ref)

    def get_commit(self, repo: str, commit_id: str) -> Commit:
        """Commit ``commit_id`` (a full id); raises ``CommitNotFound``."""
        return self.graveler.get_commit(repo, commit_id)

    # ------------------------------------------------------------------ branches
    def create_branch(self, repo: str, name: str, source: str, *, hidden: bool = False) -> Branch:
        """Branch ``name`` at the commit ``source`` points at, ``hidden`` from listings unless asked (lakeFS's hidden
        branches); ``AlreadyExists`` if a branch or tag has the name, ``HookFailed`` (a pre-create-branch hook, read
        from ``source``), ``InvalidName``."""
        from lakemount.actions.events import Event
        from lakemount.catalog import names

        names.check_branch(name)
        self.actions.run(Event("pre-create-branch", repo, name, source_ref=source), source)
        b = self.graveler.create_branch(repo, name, source, hidden=hidden)
        self.feed.emit(repo, name, "branch-created", source=source, commit_id=b.commit_id)
        self.actions.run(Event("post-create-branch", repo, name, source_ref=source, commit_id=b.commit_id), b.commit_id)
        return b

    def get_branch(self, repo: str, name: str) -> Branch:
        """Branch ``name`` (head commit and staging tokens); raises ``BranchNotFound``."""
        return self.graveler.get_branch(repo, name)

    def get_branches(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Branch]:
        """The branches named by ``(repo, name)`` keys, by key, read in one query (a mount's head poll
        of every branch it watches); keys naming no branch or repository are left out."""
        return self.graveler.get_branches(keys)

    def branch_seen(self, repo: str, name: str) -> tuple[Branch, float] | None:
        """Branch ``name`` as this process's last read of its content found it, with the
        ``time.monotonic()`` taken just before that read; None if none read it yet.

        Every read of a branch's content reads its row too (in the same statement
        as the staged entries), so a mount reading a branch learns whether its
        head moved without a separate head check.
        """
        return self.graveler.branch_seen(repo, name)

    def list_branches(self, repo: str, *, show_hidden: bool = True) -> list[Branch]:
        """The branches of ``repo``, by name, those created hidden only if ``show_hidden``; raises ``RepositoryNotFound``."""
        branches = self.graveler.list_branches(repo)
        return branches if show_hidden else [b for b in branches if not b.hidden]

    def watch_branches(self, callback: Callable[[list[Any] | None], None]) -> Any:
        """Call ``callback`` from a thread with the branch changes other processes make, as they commit.

        Each call gets a non-empty list of changes (``kind`` ``head`` or
        ``staging``, ``repo``, ``branch``), never this process's own, or
        ``None`` when notices may have been lost (re-check everything).  Every
        batch also drops what the catalog keeps for writes (``kept``); a change
        of protection rules (kind ``rules``) goes there only, not to ``callback``.
        Returns the running listener (``stop()`` ends it), or ``None`` where
        the ref store pushes no changes (SQLite, or a catalog built without a
        change source): then only polling sees them.
        """
        if self.changes is None:
            return None
        own = self.changes.sender

        def changed(batch: Any) -> None:
            self.kept.noticed(batch)  # this listener drops the records writes keep, too
            if batch is None:
                callback(None)
                return
            others = [c for c in batch if c.sender != own and c.kind != RULES_CHANGED]
            for c in others:
                if c.detail and changed_dirs(c.detail) is None:
                    # Before the callback: the reads it prompts find the appended file here already.
                    try:
                        self.graveler.staging_noticed(c.detail)
                    except (LakeMountError, OSError) as exc:  # the read fetches what the notice failed to give
                        log.debug("staging notice of %s/%s: %s", c.repo, c.branch, exc)
            if others:
                callback(others)

        listener = self.changes.listen(changed)
        self.kept.follow(listener)
        return listener

    def delete_branch(self, repo: str, name: str) -> int:
        """Delete a branch and its uncommitted changes, returning how many changes were dropped with it;
        ``InvalidArgument`` for the default branch, ``ProtectedBranch``, ``BranchNotFound``, ``HookFailed``."""
        from lakemount.actions.events import Event

        head = self.graveler.get_branch(repo, name).commit_id
        self.check_writable(repo, name, prot.DELETE)
        self.actions.run(Event("pre-delete-branch", repo, name, commit_id=head), name)
        dropped = self.graveler.delete_branch(repo, name)
        self.kept.forget(repo)
        self.feed.emit(repo, name, "branch-deleted", commit_id=head, uncommitted_changes=dropped)
        self.actions.run(Event("post-delete-branch", repo, name, commit_id=head), head)
        return dropped

    def count_uncommitted(self, repo: str, branch: Branch) -> int:
        """How many changes ``branch`` (as read by :meth:`get_branch`) has staged: entries that change
        nothing (written and deleted again) do not count, as for :meth:`has_uncommitted`."""
        return self.graveler.count_changes(repo, branch)

    def has_uncommitted(self, repo: str, branch: Branch) -> bool:
        """True if ``branch`` (as read by :meth:`get_branch`) has staged changes: entries that change
        nothing (written and deleted again) do not count, as for a merge."""
        return self.graveler.has_changes(repo, branch)

    # ------------------------------------------------------------------ tags
    def create_tag(self, repo: str, name: str, target: str) -> Tag:
        """Tag the commit ``target`` points at; ``AlreadyExists`` if a tag or branch has the name, ``HookFailed``,
        ``InvalidName``."""
        from lakemount.actions.events import Event
        from lakemount.catalog import names

        names.check_tag(name)
        cid = self.resolve(repo, target).commit_id
        self.actions.run(Event("pre-create-tag", repo, "", source_ref=target, commit_id=cid, tag_id=name), cid)
        tag = self.graveler.create_tag(repo, name, cid)
        self.feed.emit(repo, "", "tag-created", tag=name, commit_id=cid)
        self.actions.run(Event("post-create-tag", repo, "", source_ref=target, commit_id=cid, tag_id=name), cid)
        return tag

    def get_tag(self, repo: str, name: str) -> Tag:
        """Tag ``name``; raises ``NotFound``."""
        return self.graveler.get_tag(repo, name)

    def list_tags(self, repo: str) -> list[Tag]:
        """The tags of ``repo``, by name; raises ``RepositoryNotFound``."""
        return self.graveler.list_tags(repo)

    def delete_tag(self, repo: str, name: str) -> None:
        """Delete tag ``name``; raises ``NotFound``, ``HookFailed``."""
        from lakemount.actions.events import Event

        cid = self.graveler.get_tag(repo, name).commit_id
        self.actions.run(Event("pre-delete-tag", repo, "", commit_id=cid, tag_id=name), cid)
        self.graveler.delete_tag(repo, name)
        self.feed.emit(repo, "", "tag-deleted", tag=name, commit_id=cid)
        self.actions.run(Event("post-delete-tag", repo, "", commit_id=cid, tag_id=name), cid)

    # ------------------------------------------------------------------ protection
    def protection_rules(self, repo: str) -> list[str]:
        """Glob patterns of the branches of ``repo`` that change only by merge or revert (see ``protection``)."""
        return self.protection.rules(repo)

    def set_protection_rules(self, repo: str, patterns: list[str]) -> None:
        """Replace the protection rules of ``repo``; raises ``InvalidArgument`` for a bad pattern."""
        self.graveler.set_protection_rules(repo, [prot.validate_pattern(p) for p in patterns])
        self.protection.forget(repo)
        self.feed.emit(repo, "", "protection", patterns=self.protection.rules(repo))

    def swap_protection_rules(
        self, repo: str, rules: dict[str, int], check: Callable[[list[str], dict[str, int]], None],
    ) -> None:
        """Replace the protection rules of ``repo`` and the approvals a pull request into a branch
        they match needs (``rules``: pattern -> count, 0 for none), both in one ref-store transaction
        and only if ``check(current patterns, current approvals)`` does not raise: a conditional
        write (``If-Match``) that two writers cannot both pass.  Raises ``InvalidArgument`` for a
        bad pattern or a negative count, ``RepositoryNotFound``, what ``check`` raises."""
        for pattern, count in rules.items():
            prot.validate_pattern(pattern)
            if count < 0:
                raise InvalidArgument("required approvals cannot be negative")
        _ = self.pulls  # builds the pull request store: the approvals are in its table
        self.graveler.swap_protection_rules(repo, list(rules), rules, check)
        self.protection.forget(repo)
        self.feed.emit(repo, "", "protection", patterns=self.protection.rules(repo))
