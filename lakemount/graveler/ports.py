"""Interfaces graveler consumes; implementations live in ``block/``, ``cache/``, ``metastore/``.

Graveler imports none of its implementations: the composition root
(``lakemount.app``) wires a ``BlockAdapter``, a ``Cache`` and a ``RefStore``
together.  Addresses given to a block adapter are absolute URLs whose scheme
names the backend: ``local:///abs/path/key``, ``s3://bucket/prefix/key``,
``mem://name/key``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO, Protocol, runtime_checkable

from lakemount.graveler.model import Branch, Commit, CommitID, Repository, StagingToken, Tag
from lakemount.records import record

if TYPE_CHECKING:
    from lakemount.graveler.staging.file import StagingFileInfo


@record(frozen=True, slots=True)
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

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        """Store the content of local file ``path``; the file is left in place.

        ``link``: the caller will never change the file again (it may delete
        it), so a backend on the file's own filesystem may make the object that
        very file (a hard link) instead of a copy; others copy as usual.
        """

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

    def keep(self, key: str, data: bytes) -> None:
        """``put`` into RAM only: bytes that are cheap to read again from where they live and soon of
        no use (an inline staging file: read from its list row, merged away within ``l1_max`` appends),
        so a disk tier would pay a file write (and its directories) for each and never serve them."""
        ...

    def get_or_load(self, key: str, load: Callable[[], bytes]) -> bytes: ...


# A checked staging write's condition: (the branch row, staged_get(tokens, key) in the write's transaction).
StageCheck = Callable[[Branch, Callable[[Sequence[StagingToken], bytes], tuple[bool, "bytes | None"]]], None]


class RefStore(Protocol):
    """Mutable state of every repository: repositories, refs, commits and protection rules.

    All coordination between lakemount processes is compare-and-swap here.
    Implementations: ``metastore.sql.SqlRefStore`` (SQLite, PostgreSQL).  Staging is
    its own port, :class:`StagingStore`.
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

    # branch protection -------------------------------------------------------------
    def get_protection(self, repo: str) -> list[str]:
        """The patterns of ``repo``, sorted; raises ``RepositoryNotFound``."""
    def set_protection(self, repo: str, patterns: list[str]) -> None: ...
    def swap_protection(
        self, repo: str, patterns: list[str], approvals: dict[str, int],
        check: Callable[[list[str], dict[str, int]], None],
    ) -> None:
        """Replace the patterns and the approval counts in one transaction once ``check`` accepted the current ones."""


class StagingStore(Protocol):
    """Uncommitted entries of every branch, by staging token (lakeFS's ``StagingManager``).

    A branch row (``RefStore``) names the tokens whose entries are visible on it; this
    port holds the entries.  Values are stored record values, ``None`` a tombstone.
    Implementations: ``metastore.sql_staging.SqlStaging`` (rows in the ref store's database) and
    ``graveler.staging.lsm.LsmStaging`` (immutable staging files on the block store,
    listed per token in the ref store: docs/DESIGN.md §4).
    """

    def stage(self, repo: str, branch: str, items: Sequence[tuple[bytes, bytes | None]],
              check: StageCheck | None = None, ready: Callable[[], None] | None = None, namespace: str = "") -> None:
        """Write entries (None = tombstone) into the branch's *current* token.

        ``namespace``, when given, is the storage namespace the entries' data was written under (a
        writer may use a repository record it kept): if the repository's is another one now (it was
        deleted and created again elsewhere), nothing is written and ``PreconditionFailed`` raised.
        A missing branch or repository raises ``BranchNotFound``/``RepositoryNotFound``: the write
        reads the branch row itself, so a caller need not read it first.

        ``ready`` waits until what the entries point at is stored (a data object still on its
        way: it raises if that failed); nothing is made visible before it returns, but a backend
        may do its own part meanwhile (``lsm`` stores its staging file), so the two overlap.

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

    def staged_first(
        self, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None
    ) -> tuple[bytes, bytes] | None:
        """The first key in [start, stop) whose newest entry among ``tokens`` is a value, with that value;
        None if there is none.  Tombstones are skipped where they are stored (``sql``: an index of values
        only), so the cost does not grow with the deletions staged before the key (an ``rmdir`` after
        thousands of files renamed out of the directory asks this)."""

    def staged_hidden(self, tokens: Sequence[StagingToken], keys: Sequence[bytes]) -> set[bytes]:
        """Those of ``keys`` whose newest entry among ``tokens`` is a tombstone (a key without a staged
        entry is not hidden), read in a bounded number of statements for a few thousand keys."""

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

    def noticed(self, detail: str) -> None:
        """Take what another process's staging change notice carried (``detail``, non-empty) so the
        reads it prompts are served from this process; a backend with nothing to take ignores it."""

    def collect_staging(self, namespace: str, *, grace_s: float | None = None) -> int:
        """Delete the staging data stored under the storage namespace ``namespace`` that nothing
        references any more and that is older than ``grace_s`` (None: the backend's own grace);
        returns how many objects went.  Rows in the ref store go with their token: nothing to do."""


@runtime_checkable
class ChunkedStagingScan(Protocol):
    """A ``StagingStore`` that also reads a token's entries a chunk at a time (``LsmStaging``): a
    commit of a million staged entries then does no Python step per entry to read them."""

    def staged_chunks(
        self, token: StagingToken, start: bytes = b"", stop: bytes | None = None
    ) -> Iterator[tuple[list[bytes], list[bytes | None]]]:
        """``staged_scan`` as non-empty chunks of parallel (keys, values) lists, in key order."""
        ...


class StagingLists(Protocol):
    """Per staging token, the ordered lists of staging files (L1 recent, L2 compacted) of docs/DESIGN.md §4.

    Every change is one ref-store statement (an append, a removal) or one
    compare-and-set; no process holds a lock across a file write.  Files are
    returned newest first: L1 by descending ``seq``, then L2.
    Implementation: ``metastore.staging_lists.SqlStagingLists``.
    """

    def append(
        self, repo: str, branch: str, namespace: str, info: StagingFileInfo,
        check: Callable[[Branch], None] | None = None, data: bytes | None = None,
    ) -> tuple[StagingToken, int]:
        """Append an L1 file to the branch's *current* token in one statement; return that token and
        how many L1 files it lists now, this one included (when a writer should compact it).
        ``data`` (the file's bytes) may ride along in the change notice other processes receive
        (:meth:`learn`); for an inline file (``info.inline``) it is required and stored with the row,
        in the same statement (:meth:`inline_data` reads it back).

        With ``check``, the append is one transaction that first locks the branch row
        exclusively and calls ``check(branch)``; lookups the check makes on this thread
        (``files``) run in that transaction, so no other append, commit or checked append
        comes between what it judged and the append.  What it raises aborts the append.

        Atomic with respect to sealing (a commit's CAS on the branch row): the file
        lands in the token the commit seals, and the commit sees it, or in the next.
        ``namespace`` is the repository's storage namespace the file was written to:
        ``PreconditionFailed`` if the repository now has another one (deleted and
        created again); ``BranchNotFound``/``RepositoryNotFound`` if gone.
        """

    def append_to_token(self, token: StagingToken, info: StagingFileInfo, data: bytes | None = None) -> None:
        """Append an L1 file to ``token`` itself (a partial reset of a sealed token); ``data`` as for ``append``."""

    def inline_data(self, seqs: Sequence[int]) -> dict[int, bytes]:
        """The bytes of the inline files listed as rows ``seqs``, by seq; a row gone meanwhile (compacted,
        dropped) is left out."""

    def learn(self, detail: str) -> tuple[StagingFileInfo, bytes | None] | None:
        """The file an append's change notice describes (``detail``), remembered so a read of the
        lists needs not read its row again, with the bytes the notice carried; None if unreadable."""

    def files(self, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None) -> list[StagingFileInfo]:
        """Files of ``tokens`` whose key range meets [start, stop] (``stop`` inclusive; None: no bound),
        grouped by token in the order given, each group newest first."""

    def branch_files(
        self, repo: str, name: str, tokens: Sequence[StagingToken], start: bytes = b"", stop: bytes | None = None
    ) -> tuple[Branch, list[StagingFileInfo]]:
        """The branch row and ``files(tokens, start, stop)`` in one statement (one snapshot);
        raises ``BranchNotFound``/``RepositoryNotFound`` like ``RefStore.get_branch``."""

    def compact(
        self, token: StagingToken, consumed: Sequence[int], old_l2: Sequence[int], new_l2: StagingFileInfo | None,
        data: bytes | None = None,
    ) -> bool:
        """Replace the files ``consumed`` (by ``seq``: L1 files and some L2 ones) with the L2 file ``new_l2``,
        newest of L2, iff every one of them is still listed and L2 is exactly ``old_l2`` (compare-and-set);
        True if done.  An inline ``new_l2`` comes with its bytes (``data``), stored with its row."""

    def drop(self, token: StagingToken) -> None:
        """Forget both lists of ``token`` (its files become garbage)."""

    def referenced(self, url_prefix: str) -> set[str]:
        """The URLs under ``url_prefix`` that some list holds (what a collector must keep)."""
