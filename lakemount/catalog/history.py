"""Catalog verbs on history: commit, merge, revert, cherry-pick, reset, log and diff.

Paths and prefixes are strings here (encoded as graveler keys the way
:func:`~lakemount.catalog.catalog.encode_path` does) and differences come back
as :class:`~lakemount.catalog.model.Difference` records carrying decoded
entries, so no front end handles stored values.  :class:`HistoryVerbs` is one
part of the :class:`~lakemount.catalog.catalog.Catalog` facade.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING

from lakemount.catalog import protection as prot
from lakemount.catalog.model import Difference
from lakemount.catalog.refs import RefVerbs
from lakemount.errors import InvalidArgument, MergeConflict, NotUtf8Text
from lakemount.graveler.graveler import CommitResult, DiffRecord, MergeResult
from lakemount.graveler.model import Commit, decode_value
from lakemount.table_pointers import tables_in, views_in

# A hook's event is made by the verb that may run hooks: a read (``log``, ``fs ls``) does not load them (issue 41).
if TYPE_CHECKING:
    from lakemount.actions.events import Change


def _key(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def commit_matches(commit: Commit, text: str) -> bool:
    """Whether ``text`` occurs, ignoring case, in the commit's message, its committer, one of its metadata keys or
    values, or starts its id: the one rule of a commit search (the log's ``matching``, the API's ``search``)."""
    needle = text.casefold()
    if commit.id.startswith(needle):
        return True
    return any(needle in part.casefold()
               for part in (commit.message, commit.committer, *(p for pair in commit.metadata for p in pair)))


def _check_text(what: str, *texts: str | None, metadata: Sequence[tuple[str, str]] = ()) -> None:
    """``NotUtf8Text`` when a text a commit records is not UTF-8: bytes a front end could not decode arrive
    as surrogate escapes (a CLI argument from a Latin-1 terminal) and failed deep in the commit's hashing."""
    for text in (*texts, *(part for pair in metadata for part in pair)):
        if text is None:
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise NotUtf8Text(what) from None


def _differences(records: Iterable[DiffRecord], *, staged: bool = False) -> Iterator[Difference]:
    for r in records:
        yield Difference(
            r.key, r.kind, None if r.left is None else decode_value(r.left), None if r.right is None else decode_value(r.right),
            staged,
        )


def _changes(diffs: Iterator[Difference]) -> Iterator[Change]:
    from lakemount.actions.events import Change

    for d in diffs:
        yield Change(d.key.decode("utf-8", "surrogateescape"), d.kind, None if d.right is None else d.right.size)


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
        """Commit the branch's staged changes; raises ``NothingToCommit``, ``ProtectedBranch``, ``InvalidArgument``,
        and ``HookFailed`` when a pre-commit hook (read from the branch, staged changes included) rejects it."""
        from lakemount.actions.events import Event

        _check_text("commit", message, committer, metadata=metadata)
        self.check_writable(repo, branch, prot.COMMIT)
        meta = dict(metadata)
        self.actions.run(
            Event("prepare-commit", repo, branch, source_ref=branch, commit_message=message, committer=committer,
                  commit_metadata=meta),
            branch,
        )
        self.actions.run(
            Event("pre-commit", repo, branch, source_ref=branch, commit_message=message, committer=committer,
                  commit_metadata=meta, changes=lambda: _changes(self.diff_uncommitted(repo, branch)),
                  read_ref=branch, dest_ref=f"{branch}@"),
            branch,
        )
        self._sync_stored_data(repo)
        res = self.graveler.commit(
            repo, branch, message, committer=committer, metadata=metadata, allow_empty=allow_empty, date=date
        )
        self.feed.emit(repo, branch, "commit", commit_id=res.commit.id, message=message, committer=committer)
        self.actions.run(
            Event("post-commit", repo, branch, source_ref=branch, commit_message=message, committer=committer,
                  commit_metadata=meta, commit_id=res.commit.id),
            res.commit.id,
        )
        return res

    def _sync_stored_data(self, repo: str) -> None:
        """On the local block store, one ``syncfs`` of the namespace's filesystem before a commit: the mount's
        closes store small objects durable against power loss within a second (``LocalAdapter.put_lazily``),
        and a commit, in whichever process, must not name one a power loss could still take back."""
        # The kept record: no statement per commit.  A repository created again elsewhere on another store,
        # unknown to this process's record, would get this sync wrong: a gap against power loss only.
        namespace = self.kept.repository(repo, self.graveler.get_repository).storage_namespace
        if namespace.startswith("local://"):
            from lakemount.block.local import sync_store

            sync_store(namespace)

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
        guard: Callable[[], None] | None = None,
        allow_empty: bool = False,
    ) -> MergeResult:
        """Merge ref ``source`` into branch ``dest``; raises ``MergeConflict`` (with the paths), ``PreconditionFailed``,
        ``HookFailed`` when a pre-merge hook (read from ``dest`` and from ``source``) rejects it.
        ``guard`` runs after the pre-merge hooks passed, just before the merge, and raises to stop it
        (a pull request re-checks its approvals there: hooks may run for minutes).  A source that brings
        nothing leaves ``dest`` as it was (``merged=False``) unless ``allow_empty`` (Graveler.merge)."""
        from lakemount.actions.events import Event

        _check_text("merge", message, committer, metadata=metadata)
        meta = dict(metadata)
        text = message or f"Merge '{source}' into '{dest}'"

        def brought_in() -> Iterator[Change]:
            base = self.merge_base(repo, dest, source)
            if base is None:
                return _changes(self.diff_three_way(repo, dest, source))
            return _changes(self.diff(repo, base, source))

        self.actions.run(
            Event("pre-merge", repo, dest, source_ref=source, commit_message=text, committer=committer,
                  commit_metadata=meta, changes=brought_in, read_ref=source, dest_ref=dest),
            dest, source,
        )
        if guard is not None:
            guard()
        try:
            res = self.graveler.merge(
                repo, source, dest, strategy=strategy, squash=squash, message=message, committer=committer,
                metadata=metadata, allow_empty=allow_empty,
            )
        except MergeConflict as exc:
            tables, views = tables_in(exc.paths), views_in(exc.paths)
            if not tables and not views:
                raise
            raise MergeConflict(exc.paths, tables, views) from None  # a pointer: say which table or view, not which object
        if res.merged:
            self.feed.emit(repo, dest, "merge", source=source, commit_id=res.commit_id, changes=res.changes, committer=committer)
            self.actions.run(
                Event("post-merge", repo, dest, source_ref=source, commit_message=text, committer=committer,
                      commit_metadata=meta, commit_id=res.commit_id),
                res.commit_id,
            )
        return res

    def merge_base(self, repo: str, a: str, b: str) -> str | None:
        """The best common ancestor of two refs' commits (None if unrelated); raises ``RefNotFound``."""
        return self.graveler.merge_base(repo, self.resolve(repo, a).commit_id, self.resolve(repo, b).commit_id)

    def revert(
        self, repo: str, branch: str, ref: str, *, parent_number: int | None = None, committer: str = "lakemount",
        allow_empty: bool = False,
    ) -> Commit:
        """Commit the inverse of ``ref``'s change on ``branch``; ``MergeConflict``, ``InvalidArgument``,
        ``NothingToCommit`` unless ``allow_empty``, ``ReadOnlyRef`` if ``branch`` is another kind of ref.
        Allowed on a protected branch (with merges, the way a protected branch changes).
        ``HookFailed`` when a pre-revert hook (read from ``branch``) rejects it."""
        return self._replayed("revert", "reverted", repo, branch, ref, committer, lambda: self.graveler.revert(
            repo, branch, ref, parent_number=parent_number, committer=committer, allow_empty=allow_empty))

    def cherry_pick(
        self, repo: str, branch: str, ref: str, *, parent_number: int | None = None, committer: str = "lakemount",
        allow_empty: bool = False,
    ) -> Commit:
        """Commit ``ref``'s change again on ``branch``; ``MergeConflict``, ``InvalidArgument``,
        ``NothingToCommit`` unless ``allow_empty``, ``ReadOnlyRef`` if ``branch`` is another kind of ref,
        ``ProtectedBranch``, ``HookFailed`` when a pre-cherry-pick hook (read from ``branch``) rejects it."""
        self.check_writable(repo, branch, prot.CHERRY_PICK)
        return self._replayed("cherry-pick", "picked", repo, branch, ref, committer, lambda: self.graveler.cherry_pick(
            repo, branch, ref, parent_number=parent_number, committer=committer, allow_empty=allow_empty))

    def _replayed(self, verb: str, field: str, repo: str, branch: str, ref: str, committer: str,
                  make: Callable[[], Commit]) -> Commit:
        """The hook sequence of a verb that commits on ``branch`` a change another commit made (revert, cherry-pick):
        the ``pre-<verb>`` hooks (read from ``branch``; ``HookFailed`` stops it), ``make`` (the graveler call that
        commits), the feed's ``<verb>`` event naming ``ref`` as ``field``, then the ``post-<verb>`` hooks at the new
        commit.  Raises what ``make`` raises, before any event."""
        from lakemount.actions.events import Event

        self.actions.run(Event(f"pre-{verb}", repo, branch, source_ref=ref, committer=committer), branch)
        c = make()
        self.feed.emit(repo, branch, verb, **{field: ref}, commit_id=c.id, committer=committer)
        self.actions.run(
            Event(f"post-{verb}", repo, branch, source_ref=ref, commit_message=c.message, committer=committer,
                  commit_metadata=dict(c.metadata), commit_id=c.id),
            c.id,
        )
        return c

    def reset(self, repo: str, branch: str, *, prefix: str | None = None, path: str | None = None) -> None:
        """Drop uncommitted changes of ``branch``: all of them, those under ``prefix``, or the one at ``path``;
        ``ProtectedBranch``."""
        self.check_writable(repo, branch, prot.RESET)
        self.graveler.reset(
            repo, branch, prefix=None if prefix is None else _key(prefix), key=None if path is None else _key(path)
        )
        self.feed.emit(repo, branch, "reset", **({"prefix": prefix} if prefix is not None else {}),
                       **({"path": path} if path is not None else {}))

    def hard_reset(self, repo: str, branch: str, ref: str, *, committer: str = "lakemount") -> Commit:
        """Point ``branch`` at the commit ``ref`` names (lakeFS's hard reset), returning it; ``DirtyBranch`` if the
        branch has uncommitted changes, ``ProtectedBranch`` (a reset moves the head as a commit does),
        ``RefNotFound``, ``ReadOnlyRef`` if ``branch`` is another kind of ref."""
        branch = self.writable_branch(repo, branch)
        self.check_writable(repo, branch, prot.COMMIT)
        old = self.graveler.get_branch(repo, branch).commit_id
        c = self.graveler.hard_reset(repo, branch, ref)
        self.feed.emit(repo, branch, "hard-reset", ref=ref, old=old, commit_id=c.id, committer=committer)
        return c

    def reset_path(self, repo: str, branch: str, path: str) -> None:
        """Drop uncommitted changes to the object ``path`` and to everything in the directory ``path/``.

        A path is never a string prefix: resetting ``a`` leaves ``ab/...`` alone (as ``fs rm -r``).
        ``InvalidArgument`` for an empty path (resetting a whole branch is :meth:`reset` with no scope).
        """
        path = path.strip("/")
        if not path:
            raise InvalidArgument("reset: an empty path; name an object or a directory, or reset the whole branch")
        self.reset(repo, branch, path=path)
        self.reset(repo, branch, prefix=path + "/")

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
        matching: str = "",
    ) -> Iterator[Commit]:
        """Commits reachable from ``ref``, newest first; only those changing ``paths``/``prefixes`` if given, and
        with ``matching`` only those :func:`commit_matches` it (``limit`` counts the matches)."""
        if not matching:
            return self.graveler.log(
                repo, ref, limit=limit, since=since, first_parent=first_parent,
                paths=[_key(p) for p in paths], prefixes=[_key(p) for p in prefixes],
            )
        found = (c for c in self.graveler.log(repo, ref, since=since, first_parent=first_parent,
                                              paths=[_key(p) for p in paths], prefixes=[_key(p) for p in prefixes])
                 if commit_matches(c, matching))
        return found if limit is None else islice(found, max(limit, 0))

    def diff(self, repo: str, left: str, right: str, *, prefix: str = "") -> Iterator[Difference]:
        """Every difference between the commits ``left`` and ``right`` point at (branches: their heads)."""
        return _differences(self.graveler.diff(repo, left, right, prefix=_key(prefix)))

    def diff_three_way(self, repo: str, left: str, right: str) -> Iterator[Difference]:
        """What merging ``right`` into ``left`` would change, conflicts marked (lakeFS's three-dot diff)."""
        return _differences(self.graveler.diff_three_way(repo, left, right))

    def diff_uncommitted(self, repo: str, branch: str, *, prefix: str = "") -> Iterator[Difference]:
        """The staged changes of ``branch`` against its head commit."""
        return _differences(self.graveler.diff_uncommitted(repo, branch, prefix=_key(prefix)), staged=True)
