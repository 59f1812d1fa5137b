"""What GET and HEAD reuse between requests while change notices can say it changed.

A hot GET needs the repository's record and, on a branch, the object's entry
there (``Catalog.lookup``: the branch row read with the staged entry).  Both
change only by statements that send a change notice (PostgreSQL's
``LISTEN``): a repository row is only created and deleted, and its deletion
notifies each of its branches; every change of a branch's row or of its
staged entries (a write, a commit, a merge, a reset, a branch made or
removed) notifies that branch.  So this process keeps them exactly while the
listener is connected, and drops

- a branch's lookups, and its repository's record, when a notice names it
  (another node's change, seen when its notice arrives);
- a branch's lookups when this node's stamp of it changed
  (:mod:`lakemount.metastore.stamps`: a change made through any process
  sharing this home, the gateway's other workers included, is seen at once,
  before its own notice comes back);
- everything when the listener loses its connection (notices may have been
  lost: from then on every request reads, as on SQLite, which sends none).

A read that began before a notice arrived is not kept (it may be older than
the change).  Only objects found on a branch named as such are kept: a tag,
a commit id or a ref expression resolves each time (tags send no notice),
and a missing key is looked up again (a key created elsewhere shows as soon
as the database has it).  Writes never use what is kept.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Entry, Repository, ResolvedRef, View

MAX_REPOSITORIES: Final = 4096
MAX_LOOKUPS: Final = 65536  # objects kept over all branches; one more starts over


class KeptReads:
    """Repository records and branch lookups by name, kept while change notices can drop them.

    ``watch()`` starts listening (a no-op where the catalog pushes no changes);
    nothing is kept or served while the listener is not connected.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._repos: dict[str, Repository] = {}
        # (repo, branch) -> path -> (resolved, entry, the node's stamp of the branch before the read)
        self._lookups: dict[tuple[str, str], dict[str, tuple[ResolvedRef, Entry, int]]] = {}
        self._kept = 0  # lookups held over all branches
        # A read notes the generation when it begins, and is kept only if nothing that could
        # change what it read was notified since: its branch (``_touched``), its repository's
        # record (``_repos_touched``), or everything (``_cleared``).
        self._generation = 0
        self._cleared = 0
        self._touched: dict[tuple[str, str], int] = {}
        self._repos_touched: dict[str, int] = {}
        self._lock = threading.Lock()
        self._listener: Any = None

    # -- notices ---------------------------------------------------------------------
    def watch(self) -> None:
        """Start listening for the ref store's change notices (once; nothing where it pushes none)."""
        if self._listener is None and self.catalog.changes is not None:
            self._listener = self.catalog.changes.listen(self._changed)
            self.catalog.kept.follow(self._listener)  # what writes keep hears this listener too

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None

    @property
    def live(self) -> bool:
        """Whether notices are arriving now (only then is anything kept trusted; asking keeps the host listening:
        ``Listener.use``, stop 56)."""
        listener = self._listener
        if listener is None:
            return False
        use = getattr(listener, "use", None)
        return bool(use()) if use is not None else listener.connected.is_set()

    def _changed(self, batch: list[Any] | None) -> None:
        self.catalog.kept.noticed(batch)  # what the catalog keeps for writes hears the same listener
        with self._lock:
            if batch is None:
                self._forget_all()
                return
            for change in batch:
                self._touch_branch(change.repo, change.branch)
                # Creating and deleting a repository move its branches (``head``); staged writes
                # (``staging``, the most frequent notice) never touch its record.
                if change.kind == "head":
                    self._touch_repo(change.repo)

    def _forget_all(self) -> None:
        self._generation += 1
        self._cleared = self._generation
        self._touched.clear()
        self._repos_touched.clear()
        self._repos.clear()
        self._lookups.clear()
        self._kept = 0

    def _touch_branch(self, repo: str, branch: str) -> None:
        if len(self._touched) >= MAX_LOOKUPS:
            self._forget_all()
        self._generation += 1
        self._touched[(repo, branch)] = self._generation
        self._kept -= len(self._lookups.pop((repo, branch), {}))

    def _touch_repo(self, repo: str) -> None:
        if len(self._repos_touched) >= MAX_REPOSITORIES:
            self._forget_all()
        self._generation += 1
        self._repos_touched[repo] = self._generation
        self._repos.pop(repo, None)

    def _forget(self) -> None:
        """Not live: notices may be lost from now on, so nothing kept can be trusted later."""
        if self._repos or self._lookups:
            with self._lock:
                self._forget_all()

    # -- repositories ----------------------------------------------------------------
    def drop_repository(self, name: str) -> None:
        """Forget ``name``'s record and lookups now (this process deleted it: its own notice arrives later)."""
        with self._lock:
            self._touch_repo(name)
            for key in [k for k in self._lookups if k[0] == name]:
                self._touch_branch(*key)

    def repository(self, name: str) -> Repository:
        """Repository ``name``, kept or read; raises ``RepositoryNotFound``."""
        if not self.live:
            self._forget()
            return self.catalog.repository(name)
        hit = self._repos.get(name)
        if hit is not None:
            return hit
        generation = self._generation
        repo = self.catalog.repository(name)
        with self._lock:
            if self._cleared <= generation and self._repos_touched.get(name, 0) <= generation and self.live:
                if len(self._repos) >= MAX_REPOSITORIES:
                    self._repos.clear()
                self._repos[name] = repo
        return repo

    # -- lookups ---------------------------------------------------------------------
    def drop_branch(self, repo: str, branch: str) -> None:
        """Forget what GETs kept of ``repo``/``branch``: a request that read it afresh (a listing)
        has seen it as it is now, and a GET after it must not show it older."""
        with self._lock:
            self._touch_branch(repo, branch)

    def lookup(self, repo: Repository, ref: str, path: str) -> tuple[ResolvedRef, Entry | None]:
        """``Catalog.lookup(repo, ref, path)``, kept when ``ref`` is a branch and the object is there.

        Raises what ``Catalog.lookup`` raises.
        """
        changes = self.catalog.changes
        if changes is None or not self.live:
            self._forget()
            return self.catalog.lookup(repo, ref, path)
        paths = self._lookups.get((repo.name, ref))
        if paths is not None:
            hit = paths.get(path)
            if hit is not None and hit[0].namespace == repo.storage_namespace and changes.stamp_of(repo.name, ref) == hit[2]:
                return hit[0], hit[1]
        generation = self._generation
        stamp = changes.stamp_of(repo.name, ref)  # before the read: a change after it shows as another stamp
        resolved, entry = self.catalog.lookup(repo, ref, path)
        if entry is not None and resolved.kind == "branch" and resolved.branch == ref and resolved.view is View.FULL:
            key = (repo.name, ref)
            with self._lock:
                if self._cleared <= generation and self._touched.get(key, 0) <= generation and self.live:
                    if self._kept >= MAX_LOOKUPS:
                        self._lookups.clear()
                        self._kept = 0
                    kept = self._lookups.setdefault(key, {})
                    self._kept += path not in kept
                    kept[path] = (resolved, entry, stamp)
        return resolved, entry
