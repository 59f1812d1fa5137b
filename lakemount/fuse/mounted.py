"""A mounted ref's record: ``Scope`` (what ``/<repo>/<ref>`` resolved to and our knowledge of it), and how a
name resolves to one.

The record and its resolution are what every part of the filesystem core names;
the registry of the mount's scopes and their freshness is :mod:`~lakemount.fuse.scope`
(``Scopes``), which builds on the mount's state.  This module imports nothing of
the core, so the inode table and the state can name a scope without a circle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import ResolvedRef, View
from lakemount.errors import LakeMountError

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
    # The changes of the last ``TOUCHED_KEPT`` versions that touched one directory's files alone: version -> that
    # directory.  A read of another directory racing only those may cache what it read (``Scopes.untouched``).
    touched: dict[int, str] = field(default_factory=dict)
    # Directories this mount added names to, path -> node, oldest first: their listings are read together (``Tree``).
    writing: dict[str, Any] = field(default_factory=dict)
    # Serializes this mount's changes to the branch, so a rename and a create
    # in one directory cannot interleave their read-check-write sequences.
    mutex: threading.RLock = field(default_factory=threading.RLock)
    last_error: str = ""  # .lakefs/error
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # last result per control file
    # Monotonic time this mount last gave the kernel an entry or attributes of
    # the scope to cache (for ``head_ttl``, on a branch): once ``head_ttl`` has
    # passed since, the kernel asks again and that request re-checks the branch.
    granted: float = 0.0
    # Paths a lookup found absent: path -> (gen, version, monotonic time).  The create that follows a
    # kernel's negative lookup answers from here, without asking the catalog again (see Tree.find).
    absent: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    # Absent names the kernel was told it may keep as negative entries: path -> (parent inode, name, until
    # when, monotonic); a change that could make one exist invalidates them (``Scopes``).
    negatives: dict[str, tuple[int, bytes, float]] = field(default_factory=dict)

    key: ScopeKey = field(init=False)  # (repo, name): fixed for the scope's life, read on every lookup

    def __post_init__(self) -> None:
        self.key = (self.repo, self.name)

    def record_error(self, verb: str, exc: LakeMountError, details: Sequence[str] = (), message: str = "") -> None:
        """Keep ``exc`` as the branch's last failure (``.lakefs/error``): a UTC time, the verb, the message
        (``message`` in place of ``exc``'s own, when given)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        message = message or str(exc)
        if not message.startswith(f"{verb}: "):  # control verbs' messages often name the verb already
            message = f"{verb}: {message}"
        self.last_error = "\n".join([f"{stamp} {message}", *details]) + "\n"

    @property
    def writable(self) -> bool:
        return self.resolved.view is View.FULL and self.resolved.branch is not None

    @property
    def branch(self) -> str:
        """The branch a write goes to; only meaningful when ``writable``."""
        return self.resolved.branch or ""

    @property
    def plain_branch(self) -> bool:
        """True if the scope is a branch by its own name (``main``), whose whole state is its branch row."""
        return self.writable and self.resolved.kind == "branch" and self.name == self.branch


def branch_signature(branch: Any) -> tuple[str, ...]:
    """The change signature of a branch row (``Catalog.get_branch``): head commit and staging tokens."""
    return (branch.commit_id, branch.staging_token, *branch.sealed_tokens)


def branch_ref(name: str, namespace: str, branch: Any) -> ResolvedRef:
    """What plain branch ``name`` resolves to with ``branch`` as its row, in the repository's ``namespace``."""
    return ResolvedRef(name, "branch", branch.commit_id, View.FULL, branch.name, namespace)


def resolve_scope(catalog: Catalog, repo: str, name: str) -> tuple[ResolvedRef, tuple[str, ...], bool]:
    """Resolve ``name`` in ``repo``: (resolved ref, change signature, stable?).

    Raises ``RefNotFound``/``RepositoryNotFound`` (ENOENT), ``InvalidArgument``
    (a malformed expression, EINVAL... shown as ENOENT by lookups) and
    ``Unavailable``.
    """
    resolved = catalog.resolve(repo, name)
    if resolved.view is View.FULL and resolved.branch is not None:
        branch = catalog.get_branch(repo, resolved.branch)
        ref = branch_ref(name, resolved.namespace, branch)
        return ref, branch_signature(branch), False
    stable = catalog.is_fixed(resolved)
    return resolved, (resolved.commit_id,), stable
