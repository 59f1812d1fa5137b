"""Branch protection: glob rules per repository that keep a branch changing only by merge or revert.

A rule is a ``fnmatch`` pattern over branch names (``main``, ``release-*``).
A branch any rule matches refuses the direct changes -- staging writes and
deletes, commits, resets, cherry-picks, and deleting the branch -- with
:class:`~lakemount.errors.ProtectedBranch` (category ``PermissionDenied``: EPERM
in the mount, ``AccessDenied`` in the gateway, exit status 10 in the CLI).
Merges and reverts are the way in.  The check lives here, in the catalog, so
every front end gets it; the rules themselves are stored beside the refs by
whatever implements :class:`RuleStore` (graveler, which journals them so
``lakemount recover`` rebuilds them).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from lakemount.errors import AlreadyExists, InvalidArgument, NotFound, ProtectedBranch

if TYPE_CHECKING:
    from lakemount.catalog.kept import KeptRecords

MAX_PATTERN: Final = 255

# The actions a rule blocks, as named in ProtectedBranch messages.
WRITE: Final = "write"
COMMIT: Final = "commit"
RESET: Final = "reset"
CHERRY_PICK: Final = "cherry-pick"
DELETE: Final = "delete branch"


class RuleStore(Protocol):
    """Where protection patterns live (implemented by ``Graveler`` over the ref store)."""

    def protection_rules(self, repo: str) -> list[str]: ...

    def set_protection_rules(self, repo: str, patterns: list[str]) -> None: ...


def validate_pattern(pattern: str) -> str:
    """``pattern`` if it is a usable rule; raises ``InvalidArgument`` (empty, too long, whitespace, bad brackets)."""
    if not pattern or len(pattern) > MAX_PATTERN:
        raise InvalidArgument(f"protection pattern must be 1 to {MAX_PATTERN} characters")
    if any(c.isspace() for c in pattern):
        raise InvalidArgument(f"protection pattern {pattern!r} contains whitespace")
    if pattern.count("[") != pattern.count("]"):
        raise InvalidArgument(f"protection pattern {pattern!r} has unbalanced brackets")
    return pattern


class BranchProtection:
    """Reads, edits and enforces the protection rules of repositories."""

    def __init__(
        self, store: RuleStore, on_change: Callable[[str, list[str]], None] | None = None, *, kept: KeptRecords | None = None,
    ) -> None:
        """``kept`` keeps the rules between checks (:mod:`~lakemount.catalog.kept`); without it (or with
        its ``max_age`` 0) every check reads them."""
        self.store = store
        self.on_change = on_change
        self.kept = kept

    def keep_for(self, seconds: float) -> None:
        """Let :meth:`check` use a repository's rules read up to ``seconds`` ago (0: read them every
        time), unless a change notice or this node's stamp says they changed before.  The mount keeps
        them for ``--head-ttl``, as it keeps branch heads.  A change through this object, or this
        process's catalog, applies at once; one made by another process of this node at once (its
        stamp); one made on another node when its notice arrives, and at the latest within ``seconds``."""
        if self.kept is not None:
            self.kept.max_age = seconds

    def forget(self, repo: str) -> None:
        """Read ``repo``'s rules again at the next check (they changed in this process)."""
        if self.kept is not None:
            self.kept.forget(repo)

    def _current(self, repo: str) -> list[str]:
        if self.kept is None:
            return self.store.protection_rules(repo)
        return self.kept.rules(repo, self.store.protection_rules)

    def _changed(self, repo: str) -> list[str]:
        self.forget(repo)
        rules = self.rules(repo)
        if self.on_change is not None:
            self.on_change(repo, rules)
        return rules

    def rules(self, repo: str) -> list[str]:
        """The patterns of ``repo``, sorted; raises ``RepositoryNotFound``."""
        return self.store.protection_rules(repo)

    def add(self, repo: str, pattern: str) -> list[str]:
        """Add a rule; returns the rules.  Raises ``InvalidArgument``, ``AlreadyExists``, ``RepositoryNotFound``."""
        rules = self.rules(repo)
        if validate_pattern(pattern) in rules:
            raise AlreadyExists(f"protection rule {pattern!r} already exists in {repo}")
        self.store.set_protection_rules(repo, [*rules, pattern])
        return self._changed(repo)

    def delete(self, repo: str, pattern: str) -> list[str]:
        """Remove a rule; returns the rules.  Raises ``NotFound`` (no such rule), ``RepositoryNotFound``."""
        rules = self.rules(repo)
        if pattern not in rules:
            raise NotFound(f"no protection rule {pattern!r} in {repo}")
        self.store.set_protection_rules(repo, [r for r in rules if r != pattern])
        return self._changed(repo)

    def matching(self, repo: str, branch: str) -> str | None:
        """The first rule (in sorted order) covering ``branch``, or None."""
        for pattern in self._current(repo):
            if fnmatch.fnmatchcase(branch, pattern):
                return pattern
        return None

    def check_kept(self, repo: str, branch: str, action: str) -> bool:
        """:meth:`check` if the kept rules answer it (True; raises as it would), else False: the rules need a read."""
        rules = self.kept.kept_rules(repo) if self.kept is not None else None
        if rules is None:
            return False
        for pattern in rules:
            if fnmatch.fnmatchcase(branch, pattern):
                raise ProtectedBranch(repo, branch, action, pattern)
        return True

    def check(self, repo: str, branch: str, action: str) -> None:
        """Raise ``ProtectedBranch`` if a rule covers ``branch`` (``action`` names what was refused)."""
        pattern = self.matching(repo, branch)
        if pattern is not None:
            raise ProtectedBranch(repo, branch, action, pattern)
