"""A change of one file (its content or its attributes) staged under every name the branch gives it now.

A mount knows a file's names (hard links, :mod:`lakemount.catalog.links`) as it
last read them, and another mount may have linked, unlinked or renamed one of
them since.  Staged under the names the mount knew, a write, ``chmod`` or xattr
would leave out a name linked elsewhere a moment before (that name keeping the
old bytes and leaving the group) or bring back one unlinked there.  So such a
change is a compare-and-set on what the branch holds under the file's names,
read just before: it goes to every name the file has then, and a writer that
changes the names between the read and the staging makes it read and try again.

A file this mount created and still holds (:mod:`~lakemount.fuse.held`) has
never been staged, so no other mount can have linked it: its changes stage as
plain writes, with nothing read first (what ``cp -r`` and a Spark task write).
"""

from __future__ import annotations

import errno
from typing import Final

from lakemount.catalog.catalog import Catalog
from lakemount.catalog.links import group_of, members, with_group
from lakemount.catalog.model import Entry, ResolvedRef
from lakemount.errors import PreconditionFailed
from lakemount.fuse.errno import FsError
from lakemount.fuse.inodes import Node
from lakemount.fuse.scope import Scope
from lakemount.fuse.state import MountState

CHANGE_TRIES: Final = 8  # read and staged again after another writer changed the file's names in between


def held_here(state: MountState, scope: Scope, node: Node) -> bool:
    """Whether ``node``'s create is still held by this mount (never staged: no other mount can know the file)."""
    return state.held.holds((scope.repo, scope.branch), node.path)


def on_names(catalog: Catalog, repo: str, ref: str | ResolvedRef, path: str,
             changed: Entry) -> tuple[Entry, tuple[str, ...], list[tuple[str, Entry | None]]]:
    """``changed`` as it is staged under every name the ref gives the file at ``path`` now: the entry (its
    link field set), the names (``(path,)`` for a file of one name, or none there), and what a
    compare-and-set expects under each name (the entry read there)."""
    current = catalog.get_optional(repo, ref, path)
    names = (path,) if current is None else members(current, path, lambda name: catalog.get_optional(repo, ref, name))
    group = group_of(current) if len(names) > 1 else None
    entry = with_group(changed, group.gid if group is not None else "", names)
    return entry, names, [(name, current) for name in names]


def stage_on_names(catalog: Catalog, repo: str, branch: str, path: str, changed: Entry) -> tuple[Entry, tuple[str, ...]]:
    """Stage ``changed`` at ``path`` and under the file's other names as :func:`on_names` finds them, by
    compare-and-set (write-back's pipeline, for a save of a file the branch already had); returns the entry
    and the names.  ``PreconditionFailed`` if the names changed elsewhere :data:`CHANGE_TRIES` times."""
    for _attempt in range(CHANGE_TRIES):
        entry, names, expected = on_names(catalog, repo, branch, path, changed)
        try:
            catalog.apply_if(repo, branch, [(name, entry) for name in names], expected)
        except PreconditionFailed:
            continue
        return entry, names
    raise PreconditionFailed(f"{repo}/{branch}/{path}: the file's names kept changing elsewhere")


def stage_file_change(state: MountState, scope: Scope, node: Node, changed: Entry) -> tuple[Entry, tuple[str, ...]]:
    """Stage ``changed`` (file ``node``'s entry with its change made; its link field is set here) under every
    name the branch gives the file at ``node.path`` now, as a compare-and-set on each name's entry as read;
    returns the entry staged and the names (``(node.path,)`` for a file of one name), and keeps those names
    on the node.  The caller holds ``scope.mutex``.  EAGAIN if the names changed elsewhere
    :data:`CHANGE_TRIES` times in a row.

    A name the branch no longer has at ``node.path`` (deleted or renamed elsewhere) is written again, as a
    plain save of a file of one name always was.
    """
    for _attempt in range(CHANGE_TRIES):
        state.io()
        if state.writeback is not None:
            state.writeback.drain((scope.repo, scope.branch))  # what this mount journaled there is read too
        state.settle(scope, node.path)
        entry, names, expected = on_names(state.catalog, scope.repo, scope.resolved, node.path, changed)
        try:
            state.stage_if(scope, [(name, entry) for name in names], expected)
        except PreconditionFailed:
            continue
        if len(names) > 1 or node.names:
            group = group_of(entry)
            state.table.set_names(node, group.gid if group is not None else "", names if len(names) > 1 else ())
        return entry, names
    raise FsError(errno.EAGAIN, f"{node.path}: the file's names kept changing elsewhere")
