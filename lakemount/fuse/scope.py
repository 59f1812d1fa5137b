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

:class:`Scopes` is the mount's registry of them: it resolves a name once,
re-checks non-stable scopes when ``head_ttl`` has passed (and in
:meth:`Scopes.poll_heads`), and on a change drops the scope's cached entries
and listings and queues the kernel invalidations of its inodes.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from lakemount.catalog.kept import changed_dirs
from lakemount.catalog.model import ResolvedRef
from lakemount.errors import LakeMountError, NotFound
from lakemount.fuse.errno import FsError
from lakemount.fuse.inodes import Kind
from lakemount.fuse.mounted import Scope, ScopeKey, branch_ref, branch_signature, resolve_scope

if TYPE_CHECKING:
    from lakemount.fuse.state import MountState

log = logging.getLogger(__name__)

PUSHED_POLL: Final = 30.0  # seconds between safety polls of branch heads while change notices arrive
TOUCHED_KEPT: Final = 256  # changes confined to one directory remembered per scope (``Scopes.untouched``)


class Scopes:
    """The mount's scopes by (repo, name), resolved on first use and re-checked every ``head_ttl``."""

    def __init__(self, state: MountState) -> None:
        self.state = state
        self._scopes: dict[ScopeKey, Scope] = {}
        # Set by the runner to the change listener's "connected" flag (PostgreSQL LISTEN/NOTIFY): ``push_live`` for
        # a use of what is kept (it also keeps the host listening: ``Listener.use``), ``push_heard`` for a timer.
        self.push_live: Callable[[], bool] = lambda: False
        self.push_heard: Callable[[], bool] = lambda: False
        self._polled = 0.0

    def __len__(self) -> int:
        return len(self._scopes)

    def get(self, repo: str, name: str) -> Scope:
        """The scope for ``repo``/``name``, resolved (again, if due); NotFound if it does not resolve."""
        key = (repo, name)
        scope = self._scopes.get(key)
        if scope is None:
            self.state.io()
            resolved, signature, stable = resolve_scope(self.state.catalog, repo, name)
            return self.register(repo, name, resolved, signature, stable)
        self.check(scope)
        return scope

    def register(self, repo: str, name: str, resolved: ResolvedRef, signature: tuple[str, ...], stable: bool) -> Scope:
        """The scope for ``repo``/``name`` as resolved by the caller (a listing of refs); a changed signature counts as a change."""
        with self.state.table.lock:
            scope = self._scopes.get((repo, name))
            if scope is None:
                scope = Scope(repo, name, resolved, signature, stable, self.state.now())
                self._scopes[scope.key] = scope
            elif scope.signature != signature:
                self.changed(scope, resolved, signature)
            return scope

    def check(self, scope: Scope, *, force: bool = False) -> None:
        """Re-resolve a non-stable scope if ``head_ttl`` passed (or ``force``); a change drops every cache of it.

        A plain branch is re-read together with the mount's other branches that
        are half-way due and that the kernel may still cache, in one query (see
        :meth:`_check_branches`), unless a read of its content since told its
        row (:meth:`absorb`).  While change notices arrive (``push_live``), a
        plain branch's moves are pushed (:meth:`refs_changed`) and it is re-read
        on request only every ``PUSHED_POLL`` seconds, like the safety poll.
        Raises ``NotFound`` (the scope is dropped) when the name no longer
        resolves, ``Unavailable``.
        """
        state = self.state
        if scope.stable:
            return
        ttl = state.options.head_ttl
        if not force and scope.plain_branch and self.push_live():  # (a forced check is a notice's, no use)
            ttl = max(ttl, PUSHED_POLL)
        if not force and state.now() - scope.checked < ttl:
            return
        if not force and scope.plain_branch and self.absorb(scope) and state.now() - scope.checked < ttl:
            return
        state.io()
        if not scope.plain_branch:
            self._resolve_again(scope, state.now())
            return
        batch = [scope]
        if not force:
            batch += [s for s in self._due_branches(state.now()) if s is not scope]
        self._check_branches(batch, scope)

    def absorb(self, scope: Scope) -> bool:
        """Take plain branch ``scope``'s row from the catalog's last read of the branch if that read
        is newer than ``scope.checked`` (it is a head check: a moved head makes a new generation).

        Every read of a branch's content reads the row in the same statement
        (``Catalog.branch_seen``), so a branch in use needs no head check of
        its own.  True if the scope was brought up to that read.
        """
        seen = self.state.catalog.branch_seen(scope.repo, scope.branch)
        if seen is None or seen[1] <= scope.checked:
            return False
        branch, at = seen
        with self.state.table.lock:
            if at <= scope.checked or branch.name != scope.branch:
                return False
            scope.checked = at
            signature = branch_signature(branch)
            if signature != scope.signature:
                self.changed(scope, branch_ref(scope.name, scope.resolved.namespace, branch), signature)
        return True

    def _due_branches(self, now: float) -> list[Scope]:
        """Plain branch scopes worth re-reading now: checked at least ``head_ttl / 2`` ago, with entries
        the kernel may still cache (given out less than ``head_ttl`` ago) and inodes it still holds.

        A branch nothing asked about for ``head_ttl`` needs no check: the kernel
        has dropped what it had, so its next request comes to this mount, which
        re-checks the branch then (``check``), as its ``checked`` is old by then.
        """
        ttl = self.state.options.head_ttl
        table = self.state.table
        with table.lock:
            due = [
                s for key, s in self._scopes.items()
                if s.plain_branch and table.per_scope.get(key, 0) > 0 and now - s.granted < ttl and now - s.checked >= ttl / 2
            ]
        return [s for s in due if not self.absorb(s) or now - s.checked >= ttl / 2]

    def _check_branches(self, scopes: Sequence[Scope], owner: Scope | None = None) -> None:
        """Re-read the branch rows of plain branch ``scopes`` in one query; a moved one gets a new generation.

        A branch that is gone is resolved again by name (it may be a tag now),
        or dropped; errors of that are raised for ``owner`` only, logged for the others.
        """
        state = self.state
        checked = state.now()
        rows = state.catalog.get_branches([(s.repo, s.branch) for s in scopes])
        state.metrics.add("head_checks")
        for scope in scopes:
            b = rows.get((scope.repo, scope.branch))
            if b is None:
                try:
                    self._resolve_again(scope, checked)
                except LakeMountError as exc:
                    if scope is owner:
                        raise
                    log.debug("head check of %s/%s: %s", scope.repo, scope.name, exc)
                continue
            signature = branch_signature(b)
            with state.table.lock:
                scope.checked = checked
                if signature != scope.signature:
                    self.changed(scope, branch_ref(scope.name, scope.resolved.namespace, b), signature)

    def _resolve_again(self, scope: Scope, checked: float) -> None:
        """Resolve ``scope``'s name from scratch (about three queries); ``NotFound`` drops the scope and is raised."""
        state = self.state
        try:
            resolved, signature, _stable = resolve_scope(state.catalog, scope.repo, scope.name)
        except NotFound:
            with state.table.lock:
                scope.checked = checked
                self._scopes.pop(scope.key, None)
                self._invalidate(scope)
            raise
        with state.table.lock:
            scope.checked = checked
            if signature != scope.signature:
                self.changed(scope, resolved, signature)

    def changed(self, scope: Scope, resolved: ResolvedRef, signature: tuple[str, ...]) -> None:
        """The ref's content changed (caller holds the table lock): a new generation, kernel caches invalidated."""
        scope.resolved = resolved
        scope.signature = signature
        scope.gen += 1
        self.state.metrics.add("scope_changes")
        self._invalidate(scope)

    def _invalidate(self, scope: Scope, *, keep_listings: bool = False) -> None:
        """Queue kernel invalidations for every inode of ``scope`` and every negative entry the kernel was
        given in it (caller holds the table lock).  The listings go too, unless ``keep_listings`` (a new
        generation, which the caller made, already keeps any from being used: kept, a listing still tells
        ``Tree._relist_worth_it`` that this mount writes into its directory, so the next create there lists it
        once instead of looking each name up, stop 56)."""
        state = self.state
        for parent_ino, name, _until in scope.negatives.values():
            state.invalidations.put(("entry", parent_ino, name))
        scope.negatives.clear()
        for node in state.table.nodes():
            if node.scope is not scope or node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
                continue
            if not keep_listings:
                node.listing = None
            state.invalidations.put(("inode", node.ino))
            if node.path:
                parent = state.parent_of(node)
                if parent is not None:
                    state.invalidations.put(("entry", parent.ino, os.path.basename(node.path).encode("utf-8", "surrogateescape")))

    def _invalidate_dirs(self, scope: Scope, dirs: set[str]) -> None:
        """Entries were staged elsewhere in directories ``dirs`` of plain branch ``scope`` (and nowhere
        else: the notice named them): drop what this mount caches of those directories only, so a copy
        into one directory does not make every other host forget the rest of the branch (caller holds
        the table lock).

        Stale: the entries and absent names (and the kernel's negative entries) directly in ``dirs``, the listings of ``dirs`` and of their
        ancestors (a new directory shows in its parent's).  Kept: every other entry, listing and absent
        name, re-stamped with the scope's new ``version`` -- the bump makes a read that began before
        the change drop what it read, as after a change of this mount's own.
        """
        state = self.state
        old = scope.version
        scope.version += 1
        listed = set(dirs)
        for d in dirs:
            while d:
                d = d.rpartition("/")[0]
                listed.add(d)
        for path, (gen, version, fetched) in list(scope.absent.items()):
            if path in listed or path.rpartition("/")[0] in dirs:  # in a changed directory, or one that may exist now
                del scope.absent[path]
            elif version == old:
                scope.absent[path] = (gen, scope.version, fetched)
        for path, (parent_ino, name, _until) in list(scope.negatives.items()):
            if path in listed or path.rpartition("/")[0] in dirs:  # the kernel's negative entry goes as well
                del scope.negatives[path]
                state.invalidations.put(("entry", parent_ino, name))
        for node in state.table.nodes():
            if node.scope is not scope or node.kind not in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
                continue
            if node.kind == Kind.DIR and node.path in listed:
                node.listing = None
                state.invalidations.put(("inode", node.ino))
            if node.path and node.path.rpartition("/")[0] in dirs:
                node.gen = -1  # not fresh: the next use asks the catalog
                state.invalidations.put(("inode", node.ino))
                parent = state.parent_of(node)
                if parent is not None:
                    state.invalidations.put(("entry", parent.ino, os.path.basename(node.path).encode("utf-8", "surrogateescape")))

    def poll_heads(self) -> None:
        """Re-check the non-stable scopes the kernel may still cache (called every ``head_ttl``).

        Every due plain branch is re-read in one query, however many the mount
        shows (:meth:`_due_branches`: a branch nobody asked about for
        ``head_ttl`` is re-checked by its next request instead, so an idle mount
        issues no query at all).  Moving committed views (``main~1``), which the
        kernel caches for long, are re-resolved one by one while it holds them.
        While ``push_live()`` says change notices arrive (see ``refs_changed``),
        the poll runs only every ``PUSHED_POLL`` seconds, as a safety net.
        """
        state = self.state
        now = state.now()
        if self.push_heard() and now - self._polled < PUSHED_POLL:
            return
        self._polled = now
        half = state.options.head_ttl / 2
        table = state.table
        with table.lock:
            views = [
                s for key, s in self._scopes.items()
                if not s.stable and not s.plain_branch and table.per_scope.get(key, 0) > 0 and now - s.checked >= half
            ]
        branches = self._due_branches(now)
        if branches:
            try:
                self._check_branches(branches)
            except LakeMountError as exc:
                log.debug("head check of %d branches: %s", len(branches), exc)
        for scope in views:
            try:
                self._resolve_again(scope, state.now())
            except LakeMountError as exc:
                log.debug("head check of %s/%s: %s", scope.repo, scope.name, exc)

    def refs_changed(self, changes: Sequence[Any] | None) -> None:
        """Act on change notices of other processes (``None``: anything may have changed).

        ``changes`` are ``lakemount.metastore.notify.Change`` values (``kind``, ``repo``, ``branch``,
        ``detail``).  A staging notice that names the directories it changed (``catalog.kept.changed_dirs``)
        drops what the mount caches of those only (:meth:`_invalidate_dirs`).

        ``None`` (notices lost) drops every plain branch's entries and listings and re-checks every head.
        A moved head re-resolves every non-stable scope of its repository now
        (expressions such as ``main~1`` follow it; plain branches in one query)
        instead of after ``head_ttl``; staged writes elsewhere make the branch's
        cached entries and listings stale.  Runs on the listener's thread;
        errors are logged, the ``head_ttl`` poll stays the fallback.
        """
        state = self.state
        with state.table.lock:
            live = [s for s in self._scopes.values() if not s.stable]
        staged: dict[tuple[str, str], set[str] | None] = {}
        if changes is None:
            # Notices were lost (a reconnect; a host that stopped listening while idle, stop 56): what was staged
            # meanwhile is not in any branch row, so every plain branch's entries and listings go too, not only
            # the heads checked below (before stop 56 they stayed trusted for ``PUSHED_POLL`` after a reconnect).
            with state.table.lock:
                for scope in live:
                    if scope.plain_branch:
                        scope.gen += 1
                        self._invalidate(scope, keep_listings=True)
            todo = [(s, True) for s in live]
        else:
            heads = {c.repo for c in changes if c.kind == "head"}
            for c in changes:
                if c.kind == "staging":
                    named = changed_dirs(c.detail)
                    key = (c.repo, c.branch)
                    known = staged.get(key, set())
                    staged[key] = None if named is None or known is None else known | set(named)
            todo = [(s, s.repo in heads) for s in live if s.repo in heads or s.key in staged]
        branches = []
        for scope, moved in todo:
            state.metrics.add("change_notices")
            if not moved:
                only = staged.get(scope.key) if scope.plain_branch else None
                with state.table.lock:
                    if only is not None:
                        self._invalidate_dirs(scope, only)
                    else:
                        scope.gen += 1
                        self._invalidate(scope)
            elif scope.plain_branch:
                branches.append(scope)
            else:
                try:
                    self.check(scope, force=True)
                except LakeMountError as exc:
                    log.debug("head check of %s/%s after a notice: %s", scope.repo, scope.name, exc)
        if branches:
            try:
                self._check_branches(branches)
            except LakeMountError as exc:
                log.debug("head check of %d branches after a notice: %s", len(branches), exc)

    def writable(self, scope: Scope | None) -> Scope:
        """``scope`` if writes may go to it; ``FsError`` EPERM outside a ref, EROFS on a read-only ref,
        ``ProtectedBranch`` (EPERM) on a branch a protection rule covers -- checked now, so a write
        fails at open or create rather than when its data is saved."""
        if scope is None:
            raise FsError(errno.EPERM, "not inside a ref")
        if not scope.writable:
            raise FsError(errno.EROFS, f"{scope.repo}/{scope.name} is read-only (not a branch)")
        try:
            if not self.state.catalog.check_writable_kept(scope.repo, scope.branch):
                self.state.io()
                self.state.catalog.check_writable(scope.repo, scope.branch)
        except LakeMountError as exc:
            scope.record_error("write", exc)  # EPERM alone does not say why; .lakefs/error does
            raise
        return scope

    @staticmethod
    def local_change(scope: Scope, *, within: str | None = None) -> None:
        """Note a change this mount made (caller holds the table lock): in-flight reads must not cache.

        ``within``: the change touched only the entries of files directly in that directory (a file created
        or saved there, its directory already shown: no marker dropped, no other name of it), so a read of any
        other directory racing it may still cache what it read (:meth:`untouched`): with 16 writers creating
        files in their own directories, a directory listed again raced another writer's create nearly every
        time, and was listed again by the next lookup (docs/SCALE.md, stop 55)."""
        scope.version += 1
        if within is not None:
            touched = scope.touched
            touched[scope.version] = within
            if len(touched) > TOUCHED_KEPT:
                del touched[next(iter(touched))]

    @staticmethod
    def untouched(scope: Scope, since: int, path: str) -> bool:
        """True if no change this mount made after version ``since`` can have changed directory ``path``'s
        listing or its own entry: none at all, or only changes confined to other directories' files
        (:meth:`local_change`), none of them to ``path`` itself (caller holds the table lock)."""
        if since == scope.version:
            return True
        if scope.version - since > TOUCHED_KEPT:
            return False
        parent = path.rpartition("/")[0]
        for version in range(since + 1, scope.version + 1):
            within = scope.touched.get(version)
            if within is None or within == path or (path and within == parent):
                return False
        return True
