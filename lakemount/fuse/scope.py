"""A mounted ref: ``/<repo>/<ref>`` (or the whole mount with ``--ref``), and how fresh our view of it is.

A scope remembers what its name resolved to.  Three cases:

- a **branch** (``main``): read-write.  Its content changes with every staged
  write, here or in another process, so entries read from it are trusted for
  ``head_ttl`` seconds only; the branch row itself (head commit and staging
  token) is re-read at most every ``head_ttl`` and a change (a commit, merge,
  revert or full reset anywhere) bumps the scope's *generation*, which drops
  every cached entry and listing of the scope and invalidates the kernel's
  caches of its inodes;
- a **moving committed view** (``main@``, ``main~3``, ``v1^2`` of a branch...):
  read-only, its content is fixed by one commit until the expression resolves
  to another one (re-checked every ``head_ttl``, same generation bump);
- a **stable** ref (a tag, a commit id): read-only and immutable; cached for
  the life of the mount, with long kernel timeouts and ``keep_cache``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from lakemount.catalog.catalog import Catalog
from lakemount.errors import NotFound
from lakemount.graveler.refexpr import ResolvedRef, View, parse

ScopeKey = tuple[str, str]


@dataclass(eq=False)
class Scope:
    """One mounted ref and our cached knowledge of it."""

    repo: str
    name: str
    resolved: ResolvedRef
    signature: tuple[str, ...]
    stable: bool
    checked: float  # monotonic time of the last resolution
    gen: int = 0  # bumped when the ref's content changed in a way we did not make
    version: int = 0  # bumped by every change this mount makes; reads racing one do not cache
    # Serializes this mount's changes to the branch, so a rename and a create
    # in one directory cannot interleave their read-check-write sequences.
    mutex: threading.RLock = field(default_factory=threading.RLock)
    last_error: str = ""  # .lakefs/error
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # last result per control file

    key: ScopeKey = field(init=False)  # (repo, name): fixed for the scope's life, read on every lookup

    def __post_init__(self) -> None:
        self.key = (self.repo, self.name)

    @property
    def writable(self) -> bool:
        return self.resolved.view is View.FULL and self.resolved.branch is not None

    @property
    def branch(self) -> str:
        """The branch a write goes to; only meaningful when ``writable``."""
        return self.resolved.branch or ""


def resolve_scope(catalog: Catalog, repo: str, name: str) -> tuple[ResolvedRef, tuple[str, ...], bool]:
    """Resolve ``name`` in ``repo``: (resolved ref, change signature, stable?).

    Raises ``RefNotFound``/``RepositoryNotFound`` (ENOENT), ``InvalidArgument``
    (a malformed expression, EINVAL... shown as ENOENT by lookups) and
    ``Unavailable``.
    """
    resolved = catalog.resolve(repo, name)
    if resolved.view is View.FULL and resolved.branch is not None:
        branch = catalog.graveler.get_branch(repo, resolved.branch)
        signature = (branch.commit_id, branch.staging_token, *branch.sealed_tokens)
        return ResolvedRef(name, "branch", branch.commit_id, View.FULL, branch.name), signature, False
    stable = resolved.kind in ("tag", "commit") and not parse(name).steps
    return resolved, (resolved.commit_id,), stable


def unchanged(catalog: Catalog, scope: Scope) -> bool:
    """True if ``scope`` is a branch whose row still has the same signature (one point query).

    The cheap re-check of an idle branch: a full ``resolve_scope`` costs three
    queries (repository, branch, branch again).  ``False`` means "re-resolve":
    the branch moved, vanished, or the scope is not a plain branch.
    """
    if not scope.writable or scope.resolved.kind != "branch" or scope.name != scope.branch:
        return False
    try:
        b = catalog.graveler.get_branch(scope.repo, scope.branch)
    except NotFound:
        return False
    return (b.commit_id, b.staging_token, *b.sealed_tokens) == scope.signature


def new_scope(catalog: Catalog, repo: str, name: str) -> Scope:
    resolved, signature, stable = resolve_scope(catalog, repo, name)
    return Scope(repo, name, resolved, signature, stable, time.monotonic())
