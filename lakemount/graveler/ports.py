"""Interfaces graveler consumes; implementations live in ``block/``, ``cache/``, ``metastore/``.

Graveler imports none of its implementations: the composition root
(``lakemount.app``) wires a ``BlockAdapter``, a ``Cache`` and a ``RefStore``
together.  Addresses given to a block adapter are absolute URLs whose scheme
names the backend: ``local:///abs/path/key``, ``s3://bucket/prefix/key``,
``mem://name/key``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from lakemount.graveler.model import Branch, Commit, CommitID, Repository, StagingToken, Tag


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a block store knows of one stored object."""

    url: str
    size: int
    mtime: float  # seconds since the epoch, as the backend reports it
    etag: str = ""


class BlockAdapter(Protocol):
    """A flat object store addressed by absolute URLs.

    Writes are atomic: an object is either absent or whole.  Every method raises
    ``ObjectNotFound`` for a missing object and ``Unavailable`` when the backend
    cannot be reached.
    """

    def put(self, url: str, data: bytes) -> None: ...

    def put_file(self, url: str, path: str) -> None:
        """Store the content of local file ``path``; the file is left in place."""

    def get(self, url: str) -> bytes: ...

    def get_range(self, url: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the object)."""

    def open(self, url: str) -> BinaryIO:
        """A readable, seekable-if-possible stream of the object."""

    def stat(self, url: str) -> ObjectInfo: ...

    def exists(self, url: str) -> bool: ...

    def touch(self, url: str) -> None:
        """Refresh an object's modification time (``ObjectNotFound`` if missing).

        Writers that reuse an existing content-addressed object touch it, so a
        garbage collection whose mark began earlier sees it as new and keeps it.
        """

    def copy(self, src_url: str, dst_url: str) -> None:
        """Copy an object to another URL of the same store, server-side where the store can.

        The copy is a new object (its modification time is the time of the
        copy) and replaces any object at ``dst_url``; ``ObjectNotFound`` if
        ``src_url`` is missing.
        """

    def delete(self, url: str) -> None:
        """Delete an object; deleting a missing object is not an error."""

    def list(self, prefix_url: str) -> Iterator[ObjectInfo]:
        """Every object whose URL starts with ``prefix_url``, in URL order."""


class Cache(Protocol):
    """A cache of immutable byte strings keyed by content id."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, data: bytes) -> None: ...

    def get_or_load(self, key: str, load: Callable[[], bytes]) -> bytes: ...


# A checked staging write's condition: (the branch row, staged_get(tokens, key) in the write's transaction).
StageCheck = Callable[[Branch, Callable[[Sequence[StagingToken], bytes], tuple[bool, "bytes | None"]]], None]


class RefStore(Protocol):
    """Mutable state of every repository: repositories, refs, commits and staging.

    All coordination between lakemount processes is compare-and-swap here.
    Implementations: ``refs.SqlRefStore`` (SQLite, PostgreSQL).
    Lookups raise the ``NotFound`` subclass that names what is missing;
    creations raise ``AlreadyExists``.
    """

    # repositories -----------------------------------------------------------
    def create_repository(self, repo: Repository, branch: Branch, commit: Commit) -> None: ...
    def get_repository(self, name: str) -> Repository: ...
    def list_repositories(self) -> list[Repository]: ...
    def delete_repository(self, name: str) -> None: ...

    # branches ---------------------------------------------------------------
    def get_branch(self, repo: str, name: str) -> Branch: ...
    def list_branches(self, repo: str) -> list[Branch]: ...

    def get_branches(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Branch]:
        """The branches named by ``(repo, name)`` keys, by key, in one statement for up to a few hundred keys;
        a key naming no branch (or no repository) is left out."""

    def create_branch(self, repo: str, branch: Branch) -> None: ...
    def delete_branch(self, repo: str, name: str) -> Branch: ...

    def cas_branch(self, repo: str, expected: Branch, new: Branch) -> bool:
        """Replace the branch row iff it still equals ``expected``; True if swapped."""

    # tags ---------------------------------------------------------------------
    def create_tag(self, repo: str, tag: Tag) -> None: ...
    def get_tag(self, repo: str, name: str) -> Tag: ...
    def list_tags(self, repo: str) -> list[Tag]: ...
    def delete_tag(self, repo: str, name: str) -> None: ...

    # commits --------------------------------------------------------------------
    def put_commit(self, repo: str, commit: Commit) -> None:
        """Store a commit; storing an existing id again is a no-op."""

    def get_commit(self, repo: str, commit_id: str) -> Commit: ...
    def commits_with_prefix(self, repo: str, prefix: str, limit: int = 2) -> list[CommitID]: ...
    def list_commits(self, repo: str) -> Iterator[Commit]: ...

    # staging ----------------------------------------------------------------------
    def stage(self, repo: str, branch: str, items: Sequence[tuple[bytes, bytes | None]],
              check: StageCheck | None = None) -> None:
        """Write entries (None = tombstone) into the branch's *current* token.

        Atomic with respect to sealing: a write either lands in the token a
        concurrent commit seals (and that commit sees it) or in the next one.
        ``check``, when given, runs inside the write's transaction with the branch row as it
        is locked there and a ``staged_get`` reading that transaction; if it raises, nothing is
        written and its error propagates (a compare-and-set no concurrent writer can interleave).
        """

    def staged_get(self, tokens: Sequence[StagingToken], key: bytes) -> tuple[bool, bytes | None]:
        """(found, value) from the first token (newest first) that has ``key``."""

    def staged_scan(
        self, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """Entries of one token with start <= key < stop, in key order."""

    def branch_staged_get(
        self, repo: str, name: str, tokens: Sequence[StagingToken], key: bytes
    ) -> tuple[Branch, bool, bytes | None]:
        """The branch row and ``staged_get(tokens, key)``, read together in one statement (one snapshot).

        ``tokens`` are those the caller expects the branch to have; the staged
        answer is the branch's own only if ``branch.tokens == tuple(tokens)``.
        Raises ``BranchNotFound``/``RepositoryNotFound`` like ``get_branch``.
        """

    def branch_staged_scan(
        self, repo: str, name: str, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> tuple[Branch, list[tuple[bytes, bytes | None]], bool]:
        """The branch row and the first page of ``staged_scan(token, start, stop)`` in one statement:
        (branch, entries in key order, complete?).  When not complete, the rest follows the page's
        last key.  The page is the branch's own only if ``branch.tokens == (token,)``."""

    def branch_staged_probe(
        self, repo: str, name: str, token: StagingToken, key: bytes, start: bytes, stop: bytes | None, limit: int
    ) -> tuple[Branch, tuple[bool, bytes | None], list[tuple[bytes, bytes | None]], bool]:
        """The branch row, ``staged_get([token], key)`` and the first ``limit`` entries of
        ``staged_scan(token, start, stop)``, in one statement: (branch, (found, value), page, complete?).
        The staged answers are the branch's own only if ``branch.tokens == (token,)``."""

    def staged_count(self, token: StagingToken) -> int: ...

    def drop_staging(self, token: StagingToken, prefix: bytes = b"", key: bytes | None = None) -> None:
        """Forget staged entries: all, those under ``prefix``, or exactly ``key``."""

    # branch protection -------------------------------------------------------------
    def get_protection(self, repo: str) -> list[str]: ...
    def set_protection(self, repo: str, patterns: list[str]) -> None: ...
    def swap_protection(
        self, repo: str, patterns: list[str], approvals: dict[str, int],
        check: Callable[[list[str], dict[str, int]], None],
    ) -> None:
        """Replace the patterns and the approval counts in one transaction once ``check`` accepted the current ones."""
