"""The tree of names as the mount knows it: lookup, revalidation and cached listings.

A name is looked up in its parent's cached listing when that is fresh, else by
point queries on the catalog (:func:`~lakemount.fuse.listing.lookup_child`);
either way the answer is bound to a node of the inode table.  An entry read
from a branch is trusted for ``head_ttl`` seconds and from a committed ref for
the scope's generation; an answer that raced with a change this mount made
(the scope's ``version`` moved) is returned but not cached.  A node whose path
vanished, or became another type, is detached.  Local changes keep the cached
listings true through :meth:`Tree.listing_put` and :meth:`Tree.names_changed`.
"""

from __future__ import annotations

import bisect
import errno
import time
from collections.abc import Sequence
from typing import Final

from lakemount.catalog.catalog import MAX_KEY_BYTES
from lakemount.catalog.links import group_of, members
from lakemount.catalog.model import Entry
from lakemount.errors import InvalidArgument, NotFound
from lakemount.fuse import control
from lakemount.fuse.attributes import Attributes
from lakemount.fuse.errno import Absent, FsError
from lakemount.fuse.inodes import ROOT_INODE, Kind, Node
from lakemount.fuse.listing import Child, ChildKind, Listing, dir_range, list_dir, lookup_child
from lakemount.fuse.ownchanges import KEEP_MAX
from lakemount.fuse.scope import PUSHED_POLL, Scope, Scopes
from lakemount.fuse.state import NAME_MAX, MountState, decode_name, join_path, key_len, op
from lakemount.fuse.values import Attr

KIND: Final = {ChildKind.FILE: Kind.FILE, ChildKind.DIR: Kind.DIR, ChildKind.SYMLINK: Kind.SYMLINK}
RELIST_MAX: Final = 10_000  # a directory this mount writes into is listed again when stale up to this size
AHEAD_S: Final = 10.0  # a listing read again reads those of the scope's other written directories due within this
AHEAD_MOST: Final = 31  # ... this many at most (one statement: the branch row and a page of each)
WRITING_KEPT: Final = 256  # directories this mount wrote into remembered per scope (``Tree._due_beside``)
ABSENT_KEPT: Final = 4096  # paths found absent kept per scope (then forgotten at once: a create asks again)
NEGATIVES_KEPT: Final = 4096  # negative entries granted to the kernel per scope (then none until some expire)
CHILD: Final = {Kind.FILE: ChildKind.FILE, Kind.DIR: ChildKind.DIR, Kind.SYMLINK: ChildKind.SYMLINK}


class Tree:
    """Names to nodes, and the freshness of what the nodes cache."""

    def __init__(self, state: MountState, scopes: Scopes, attrs: Attributes) -> None:
        self.state = state
        self.scopes = scopes
        self.attrs = attrs
        self.table = state.table
        self.options = state.options

    # ------------------------------------------------------------------ freshness
    def ttl(self, scope: Scope) -> float:
        """How long what was read of ``scope`` is trusted: ``head_ttl``; on a plain branch while change
        notices arrive, ``PUSHED_POLL`` (a change made elsewhere drops it when its notice lands:
        ``Scopes.refs_changed``), as its head is (``Scopes.check``)."""
        ttl = self.options.head_ttl
        if scope.plain_branch and self.scopes.push_live():
            return max(ttl, PUSHED_POLL)
        return ttl

    def fresh(self, node: Node) -> bool:
        """True if ``node``'s cached entry may be used without asking the catalog."""
        scope = node.scope
        if scope is None or node.dirty is not None or node.detached:
            return True
        if node.gen != scope.gen:
            return False
        return not scope.writable or self.state.now() - node.fetched < self.ttl(scope)

    def listing_fresh(self, node: Node) -> Listing | None:
        """``node``'s cached listing if it may be used without asking the catalog, else None.

        Past ``head_ttl``, a listing of a plain branch is still used while the node's stamps show no
        change to the branch but this mount's own stagings, which it applied to the listing itself
        (:mod:`~lakemount.fuse.ownchanges`), for ``KEEP_MAX`` after it was read at most.
        """
        listing = node.listing
        scope = node.scope
        if listing is None or scope is None or listing.gen != scope.gen:
            return None
        if scope.writable:
            now = self.state.now()
            if now - listing.fetched >= self.ttl(scope):
                noted = listing.stamp
                if noted is None or not scope.plain_branch or now - listing.listed >= KEEP_MAX:
                    return None
                stamp = self.state.own.ours_since(scope.repo, scope.branch, noted)
                if stamp is None:
                    return None
                listing.stamp, listing.fetched = stamp, now
                self.state.metrics.add("listings_kept")
        return listing

    def absent_fresh(self, scope: Scope, path: str) -> bool:
        """True if a lookup found ``path`` absent in ``scope`` less than ``head_ttl`` ago, with no change
        since (neither one this mount made, which bumps ``scope.version``, nor one it learned of)."""
        seen = scope.absent.get(path)
        if seen is None:
            return False
        gen, version, fetched = seen
        return gen == scope.gen and version == scope.version and self.state.now() - fetched < self.ttl(scope)

    def knows(self, parent: Node, name: bytes) -> bool:
        """True if :meth:`find` of ``name`` in ``parent`` answers from memory (no catalog read)."""
        scope = parent.scope
        if scope is None:
            return False
        path = join_path(parent.path, decode_name(name))
        existing = self.table.by_key((scope.key, path))
        if existing is not None and (existing.dirty is not None or self.fresh(existing)):
            return True
        return self.listing_fresh(parent) is not None or (existing is None and self.absent_fresh(scope, path))

    @staticmethod
    def _relist_worth_it(parent: Node) -> bool:
        """True if a lookup of a new name in ``parent`` should list it again rather than ask for the name:
        its stale listing is small and this mount has been adding names to it (a copy into it: one
        listing a ``head_ttl`` answers every lookup until then, where each name would cost a read).  Of any
        generation (stop 56): after notices were lost the listings are kept, stale, for this."""
        listing = parent.listing
        scope = parent.scope
        return (listing is not None and scope is not None and listing.puts > 0 and len(listing.children) <= RELIST_MAX)

    @staticmethod
    def note_absent(scope: Scope, path: str, gen: int, version: int, fetched: float) -> None:
        if len(scope.absent) >= ABSENT_KEPT:
            scope.absent.clear()
        scope.absent[path] = (gen, version, fetched)

    def revalidate(self, node: Node) -> None:
        """Refresh a path node's entry if stale; FsError(ENOENT) if its path is gone (or changed type)."""
        scope = node.scope
        if scope is None:
            return
        self.scopes.check(scope)
        if self.fresh(node):
            return
        state = self.state
        if not node.path:
            with self.table.lock:
                node.gen, node.fetched = scope.gen, state.now()
            return
        if self._relisted(node):
            return
        state.io()
        state.settle(scope, node.path)  # a create this mount holds there is staged first (held.py)
        gen, version, fetched = scope.gen, scope.version, state.now()
        child = lookup_child(state.catalog, scope.repo, scope.resolved, node.path)
        if state.writeback is not None:
            child = state.writeback.overlay_child(scope, node.path, child)
        kind = KIND[child.kind] if child is not None else None
        names = self.names_of(scope, node.path, child.entry) if child is not None and kind != Kind.DIR else None
        with self.table.lock:
            if child is None or kind != node.kind:
                if node.dirty is None and node.opens == 0:
                    self.table.detach(node)
                raise FsError(errno.ENOENT, node.path)
            if gen == scope.gen and node.dirty is None and self.scopes.untouched(scope, version, node.path):
                node.entry, node.gen, node.fetched = child.entry, gen, fetched
                if names is not None:
                    group = group_of(child.entry)
                    self.table.set_names(node, group.gid if group else "", names)

    def _relisted(self, node: Node) -> bool:
        """For a directory this mount writes into whose entry went stale with its listing (a crowd's folders, read
        when they were made, go stale together): list it, one statement for its own entry and its children, where
        looking it up and then listing it for the next create in it were two (docs/SCALE.md, stop 55).  True if
        that made its entry fresh; False (nothing read) for any other node, or if it did not (a listing that
        raced a change of the directory, or found it gone: the caller looks it up as before)."""
        if node.kind != Kind.DIR or not node.path or not self._relist_worth_it(node) or self.listing_fresh(node) is not None:
            return False
        try:
            self.listing(node)
        except FsError as exc:
            if exc.errno != errno.ENOENT:
                raise
            return False
        return self.fresh(node)

    def names_of(self, scope: Scope, path: str, entry: Entry | None) -> tuple[str, ...]:
        """Every name of the file ``entry`` at ``path`` (its link group's members, checked against the ref:
        :func:`~lakemount.catalog.links.members`); () for a file of one name.  Reads the other names."""
        if entry is None or not entry.link:
            return ()
        catalog = self.state.catalog
        found = members(entry, path, lambda name: catalog.get_optional(scope.repo, scope.resolved, name))
        return found if len(found) > 1 else ()

    def bind(self, scope: Scope, path: str, child: Child, fetched: float, gen: int, version: int,
             names: tuple[str, ...] | None = None) -> Node:
        """The node for ``path`` in ``scope`` (new inode if unknown or of another kind), updated from ``child``.

        A file of several names is the node of its link group (the one inode of every name): ``names``
        are its members as :meth:`names_of` checked them, or None to take the names its entry lists
        (a listing binds its children without reading each group's other names).
        """
        kind = KIND[child.kind]
        key = (scope.key, path)
        group = group_of(child.entry) if kind != Kind.DIR else None
        if group is not None and names is None:
            names = group.names if path in group.names else ()
        with self.table.lock:
            node = self.table.by_key(key)
            if node is not None and node.kind != kind:
                self.table.detach(node)
                node = None
            if group is not None and names and (node is None or (node.dirty is None and node.group != group.gid)):
                grouped = self.table.by_group(scope.key, group.gid)
                if grouped is not None and grouped.kind == kind and not grouped.detached and grouped is not node:
                    node = grouped
            if node is None:
                node = self.table.get_or_add(key, kind=kind, scope=scope, path=path)
                node.entry = child.entry
                node.fetched = fetched if version == scope.version else 0.0
                node.gen = gen
            elif node.dirty is None and version == scope.version and gen == scope.gen and fetched >= node.fetched:
                node.entry, node.fetched, node.gen = child.entry, fetched, gen
            if (group is not None or node.group) and node.dirty is None and node.entry == child.entry:
                self.table.set_names(node, group.gid if group is not None and names else "", names or ())
            return node

    # ------------------------------------------------------------------ lookup
    @op("lookup")
    def lookup(self, parent_ino: int, name: bytes) -> Attr:
        """Find ``name`` in a directory and count one kernel reference to it; ``Absent`` (ENOENT) for a name
        not there, saying how long the kernel may keep that (:meth:`negative`)."""
        parent = self.state.node(parent_ino)
        scope = parent.scope
        seen = (scope.gen, scope.version) if scope is not None else (0, 0)
        try:
            node = self.child(parent, name)
        except FsError as exc:
            if exc.errno != errno.ENOENT or parent.kind != Kind.DIR or scope is None:
                raise
            raise Absent(decode_name(name), self.negative(parent, name, seen)) from None
        self.table.remember(node)
        return self.attrs.attr(node)

    def negative(self, parent: Node, name: bytes, seen: tuple[int, int]) -> float:
        """How long the kernel may keep ``name`` absent from directory ``parent`` as a negative entry (0: not
        at all), as the lookup that found it absent ran with the scope at ``seen`` (generation, version).

        On a branch: what is left of the freshness of what answered (the parent's listing, or the name's
        absent record: until then the mount would answer the same from memory), at most ``head_ttl`` like
        an entry the kernel keeps, noted in ``scope.negatives`` so that a change the mount learns of
        (a new head, a change notice naming the directory, a control-file verb) invalidates it; none if
        the scope changed during the lookup.  On an immutable ref ``immutable_ttl``; on a moving view
        (``main~1``) none.  Saves Hadoop's local file system a round trip per ``exists`` of a path it is
        about to make (a dozen per file a Spark task writes).
        """
        scope = parent.scope
        if scope is None or not scope.writable:
            return self.options.immutable_ttl if scope is not None and scope.stable else 0.0
        path = join_path(parent.path, decode_name(name))
        now = self.state.now()
        listing = self.listing_fresh(parent)
        if listing is not None:
            left = listing.fetched + self.ttl(scope) - now
        elif self.absent_fresh(scope, path):
            left = scope.absent[path][2] + self.ttl(scope) - now
        else:
            return 0.0
        left = min(left, self.options.head_ttl)
        if left <= 0:
            return 0.0
        with self.table.lock:
            if (scope.gen, scope.version) != seen:
                return 0.0
            negatives = scope.negatives
            if len(negatives) >= NEGATIVES_KEPT:
                for kept, (_ino, _name, until) in list(negatives.items()):
                    if until <= now:
                        del negatives[kept]
                if len(negatives) >= NEGATIVES_KEPT:
                    return 0.0
            negatives[path] = (parent.ino, name, now + left)
            scope.granted = now  # the head poll keeps checking the branch while the kernel holds this
        self.state.metrics.add("kernel_negative_entries")
        return left

    def child(self, parent: Node, name: bytes) -> Node:
        """The node named ``name`` in ``parent`` (any kind of directory); ``FsError`` ENOENT, ENOTDIR..."""
        if len(name) > NAME_MAX:
            raise FsError(errno.ENAMETOOLONG)
        if name == b".":
            return parent
        if name == b"..":
            return self.dotdot(parent)
        if parent.kind == Kind.ROOT:
            if name == control.CONTROL_DIR.encode():
                return self.table.get_or_add(("ctl", None), kind=Kind.CONTROL_DIR)
            repo = decode_name(name)
            try:
                self.state.repo(repo)
            except NotFound:
                raise FsError(errno.ENOENT, repo) from None
            return self.table.get_or_add(("repo", repo), kind=Kind.REPO, repo=repo)
        if parent.kind == Kind.REPO:
            ref = decode_name(name)
            try:
                ref_scope = self.scopes.get(parent.repo, ref)
            except (NotFound, InvalidArgument):
                # ".git", "foo bar": not a ref, so nothing by that name
                raise FsError(errno.ENOENT, ref) from None
            return self.scope_root(ref_scope)
        if parent.kind == Kind.CONTROL_DIR:
            fname = decode_name(name)
            if fname not in control.files_for(parent.scope, self.stats_here(parent)):
                raise FsError(errno.ENOENT, fname)
            key = ("ctl", parent.scope.key if parent.scope else None, fname)
            return self.table.get_or_add(key, kind=Kind.CONTROL_FILE, scope=parent.scope, control=fname)
        if parent.kind != Kind.DIR:
            raise FsError(errno.ENOTDIR)
        scope = parent.scope
        assert scope is not None
        if not parent.path and name == control.CONTROL_DIR.encode():
            return self.table.get_or_add(("ctl", scope.key), kind=Kind.CONTROL_DIR, scope=scope)
        node = self.find(parent, name)
        if node is None:
            raise FsError(errno.ENOENT, decode_name(name))
        return node

    def stats_here(self, ctl_dir: Node) -> bool:
        """True if the ``.lakefs`` directory ``ctl_dir`` holds the mount's ``stats``."""
        return ctl_dir.scope is None or (self.options.ref is not None and ctl_dir.scope.key == (self.options.ref[0], self.options.ref[1]))

    def dotdot(self, node: Node) -> Node:
        """The parent of ``node`` as ``..`` shows it (the mount root above the layout)."""
        root = self.state.node(ROOT_INODE)
        if node.kind in (Kind.ROOT, Kind.REPO):
            return root
        if node.kind == Kind.CONTROL_DIR:
            return self.scope_root(node.scope) if node.scope is not None else root
        return self.state.parent_of(node) or root

    def scope_root(self, scope: Scope) -> Node:
        """The root directory node of a mounted ref."""
        return self.table.get_or_add((scope.key, ""), kind=Kind.DIR, scope=scope, path="")

    def find(self, parent: Node, name: bytes) -> Node | None:
        """The node named ``name`` in directory ``parent`` of a scope, or None (may do I/O)."""
        scope = parent.scope
        assert scope is not None
        self.scopes.check(scope)
        path = join_path(parent.path, decode_name(name))
        if key_len(path) + 1 > MAX_KEY_BYTES:
            raise FsError(errno.ENAMETOOLONG)
        existing = self.table.by_key((scope.key, path))
        if existing is not None and (existing.dirty is not None or self.fresh(existing) or self._relisted(existing)):
            return existing
        listing = self.listing_fresh(parent)
        if listing is None and existing is None and self._relist_worth_it(parent):
            listing = self.listing(parent)
        if listing is not None:
            child = listing.children.get(name)
            fetched, gen, version = listing.fetched, listing.gen, scope.version
        elif existing is None and self.absent_fresh(scope, path):
            return None
        else:
            self.state.io()
            self.state.settle(scope, path)
            gen, version, fetched = scope.gen, scope.version, self.state.now()
            child = lookup_child(self.state.catalog, scope.repo, scope.resolved, path)
            if self.state.writeback is not None:
                child = self.state.writeback.overlay_child(scope, path, child)
            if child is None:
                self.note_absent(scope, path, gen, version, fetched)
        if child is None:
            if existing is not None and existing.opens == 0 and existing.dirty is None:
                self.table.detach(existing)
            return None
        return self.bind(scope, path, child, fetched, gen, version, self._checked_names(scope, path, child))

    def _checked_names(self, scope: Scope, path: str, child: Child) -> tuple[str, ...] | None:
        """The members of a linked file's group as a lookup binds them: those of the group's node if it is
        fresh and holds the same entry, else checked against the ref (I/O); None for a file of one name."""
        entry = child.entry
        group = group_of(entry) if child.kind != ChildKind.DIR else None
        if group is None or entry is None:
            return None
        known = self.table.by_group(scope.key, group.gid)
        if known is not None and known.entry == entry and path in known.names and self.fresh(known):
            return known.names
        self.state.io()
        return self.names_of(scope, path, entry)

    @op("forget")
    def forget(self, items: Sequence[tuple[int, int]]) -> None:
        """The kernel dropped ``n`` references to each inode."""
        for ino, n in items:
            self.table.forget(ino, n)

    @op("getattr")
    def getattr(self, ino: int) -> Attr:
        """The attributes of ``ino``, revalidated if stale (a vanished path keeps its last ones)."""
        return self.attributes(ino)

    def attributes(self, ino: int) -> Attr:
        """What :meth:`getattr` answers, not counted as a request (the adapter hands a directory's to the shim)."""
        node = self.state.node(ino)
        if node.kind in (Kind.DIR, Kind.FILE, Kind.SYMLINK):
            try:
                self.revalidate(node)
            except FsError as exc:
                # Gone from the ref (deleted elsewhere): like an unlinked file, the
                # inode keeps its last attributes; lookups no longer find it.
                if exc.errno != errno.ENOENT:
                    raise
        return self.attrs.attr(node)

    # ------------------------------------------------------------------ listings
    def listing(self, node: Node) -> Listing:
        """The children of directory ``node``, listed if the cached listing is stale; ENOENT if it vanished."""
        listing = self.listing_fresh(node)
        if listing is not None:
            return listing
        scope = node.scope
        assert scope is not None
        state = self.state
        state.io()
        state.settle(scope, node.path)
        stamp = state.own.note(scope.repo, scope.branch) if scope.plain_branch else None
        gen, version, fetched = scope.gen, scope.version, state.now()
        others = self._due_beside(node, fetched)  # (after the version: a create held there later drops what is read)
        if not others:
            return self._list(node, stamp, gen, version, fetched)
        ranges = [dir_range(n.path) for n in (node, *others)]
        with state.catalog.scans_ahead(scope.repo, scope.resolved, ranges):
            for other in others:
                try:
                    self._list(other, stamp, gen, version, fetched)
                except FsError:  # gone: looked up on its own when next used
                    pass
            self.state.metrics.add("listings_read_ahead", len(others))
            return self._list(node, stamp, gen, version, fetched)

    def _due_beside(self, node: Node, now: float) -> list[Node]:
        """The other directories of ``node``'s scope this mount writes into whose listings are to be read again
        within ``AHEAD_S`` (``KEEP_MAX`` after they were read), small ones holding no create this mount holds: a
        crowd's folders, made together, go stale together, each listed again by a statement of its own; now
        the first one's listing reads theirs too, in the same statement (docs/SCALE.md, stop 55)."""
        scope = node.scope
        listing = node.listing
        if scope is None or listing is None or listing.puts == 0:
            return []
        held, key = self.state.held, (scope.repo, scope.branch)
        out = []
        with self.table.lock:
            for other in list(scope.writing.values()):
                kept = other.listing
                if (other is node or other.detached or kept is None or kept.gen != scope.gen or kept.puts == 0
                        or len(kept.children) > RELIST_MAX or now - kept.listed < KEEP_MAX - AHEAD_S):
                    continue
                out.append(other)
                if len(out) >= AHEAD_MOST:
                    break
        return [other for other in out if not (held and held.any_under(key, other.path))]

    def _list(self, node: Node, stamp: tuple[int, int] | None, gen: int, version: int, fetched: float) -> Listing:
        """Read directory ``node``'s listing, noted at ``stamp``, ``gen``, ``version``, ``fetched``, and keep it
        unless this mount changed the directory meanwhile."""
        scope = node.scope
        assert scope is not None
        state = self.state
        stale = node.listing
        decoded: dict[bytes, tuple[bytes, Child]] = {}
        children, marker = list_dir(state.catalog, scope.repo, scope.resolved, node.path, decoded,
                                    stale.decoded if stale is not None else {})
        made = False  # a directory this mount made and has not staged yet (a journaled mkdir)
        if state.writeback is not None:  # what this mount journaled and has not staged yet
            made = state.writeback.overlay_listing(scope, node.path, children)
        if node.path and not children and marker is None and not made:
            # Nothing under this path any more: the directory is gone.
            raise FsError(errno.ENOENT, node.path)
        listing = Listing(children, sorted(children), fetched, gen, decoded=decoded, stamp=stamp, listed=fetched)
        with self.table.lock:
            if gen == scope.gen and self.scopes.untouched(scope, version, node.path):
                node.listing = listing
                if node.path:
                    node.entry, node.fetched, node.gen = marker, fetched, gen
        return listing

    @staticmethod
    def listing_put(parent: Node, name: bytes, child: Child | None) -> None:
        """Update ``parent``'s cached listing after a local change (caller holds the table lock)."""
        listing = parent.listing
        if listing is None:
            return
        listing.puts += 1
        scope = parent.scope
        if scope is not None and listing.puts == 1:  # a directory this mount writes into (``_due_beside``)
            writing = scope.writing
            writing.pop(parent.path, None)
            writing[parent.path] = parent
            if len(writing) > WRITING_KEPT:
                del writing[next(iter(writing))]
        old = listing.children.get(name)
        if old is not None and old.kind is ChildKind.DIR:
            listing.dirs -= 1
        if child is None:
            if listing.children.pop(name, None) is not None:
                i = bisect.bisect_left(listing.names, name)
                if i < len(listing.names) and listing.names[i] == name:
                    del listing.names[i]
            return
        if old is None:
            bisect.insort(listing.names, name)
        if child.kind is ChildKind.DIR:
            listing.dirs += 1
        listing.children[name] = child

    @staticmethod
    def names_changed(parent: Node) -> None:
        """An entry of ``parent`` was added, removed or renamed: its mtime and ctime move (POSIX), in memory.

        Staging a new directory marker on every create would double the writes
        of a job making many files; like ctime, this is not versioned.
        """
        parent.mtime_ns = parent.ctime_ns = time.time_ns()
