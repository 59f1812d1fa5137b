"""Directory handles: opendir takes a snapshot of the names, readdir hands them out in batches.

The mount root lists ``.lakefs`` and the repositories; a repository directory
lists its branches and tags (a tag named like a branch is hidden by it); a
``.lakefs`` directory its control files; a directory inside a ref its cached
or freshly fetched listing (the ref root adds ``.lakefs``).  Each name carries
a factory for its node, called as readdir reaches it, so opening a large
directory binds no inodes.  Only a directory of an immutable ref may stay in
the kernel's readdir cache (:meth:`Directories.cacheable`).
"""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from lakemount.catalog.model import ResolvedRef, View
from lakemount.errors import LakeMountError
from lakemount.fuse import control
from lakemount.fuse.attributes import Attributes
from lakemount.fuse.errno import FsError
from lakemount.fuse.inodes import Kind, Node
from lakemount.fuse.listing import Child, Listing
from lakemount.fuse.scope import Scopes
from lakemount.fuse.state import MountState, decode_name, join_path, op
from lakemount.fuse.tree import Tree
from lakemount.fuse.values import DirItem

log = logging.getLogger(__name__)

READDIR_BATCH: Final = 64


@dataclass(eq=False)
class DirHandle:
    """An open directory: its node and the listing snapshot taken at opendir, served by offset."""

    fh: int
    node: Node
    items: list[tuple[bytes, Callable[[], Node]]]


class Directories:
    """The open directory handles of one mount."""

    def __init__(self, state: MountState, scopes: Scopes, tree: Tree, attrs: Attributes) -> None:
        self.state = state
        self.scopes = scopes
        self.tree = tree
        self.attrs = attrs
        self.table = state.table
        self._handles: dict[int, DirHandle] = {}

    @op("opendir")
    def opendir(self, ino: int) -> int:
        """Open directory ``ino``: a new handle over a snapshot of its names."""
        node = self.state.node(ino)
        tree = self.tree
        items: list[tuple[bytes, Callable[[], Node]]] = []
        if node.kind == Kind.ROOT:
            self.state.io()
            repos = sorted(r.name for r in self.state.catalog.list_repositories())
            items.append((control.CONTROL_DIR.encode(), lambda: tree.child(node, control.CONTROL_DIR.encode())))
            for repo in repos:
                items.append((repo.encode(), functools.partial(self._repo_node, repo)))
        elif node.kind == Kind.REPO:
            self.state.io()
            catalog = self.state.catalog
            refs: dict[str, Callable[[], Node]] = {}
            ns = self.state.repo(node.repo).storage_namespace
            for b in catalog.list_branches(node.repo):
                resolved = ResolvedRef(b.name, "branch", b.commit_id, View.FULL, b.name, ns)
                sig = (b.commit_id, b.staging_token, *b.sealed_tokens)
                refs[b.name] = functools.partial(self._ref_node, node.repo, b.name, resolved, sig, False)
            for t in catalog.list_tags(node.repo):
                if t.name not in refs:
                    resolved = ResolvedRef(t.name, "tag", t.commit_id, View.COMMITTED, None, ns)
                    refs[t.name] = functools.partial(self._ref_node, node.repo, t.name, resolved, (t.commit_id,), True)
            items = [(name.encode(), refs[name]) for name in sorted(refs)]
        elif node.kind == Kind.CONTROL_DIR:
            for fname in control.files_for(node.scope, tree.stats_here(node)):
                items.append((fname.encode(), functools.partial(tree.child, node, fname.encode())))
        elif node.kind == Kind.DIR:
            scope = node.scope
            assert scope is not None
            self.scopes.check(scope)
            listing = tree.listing(node)
            if not node.path:
                items.append((control.CONTROL_DIR.encode(), functools.partial(tree.child, node, control.CONTROL_DIR.encode())))
            for child_name in listing.names:
                child = listing.children[child_name]
                items.append((child_name, functools.partial(self._listed_node, node, child_name, child, listing)))
        else:
            raise FsError(errno.ENOTDIR)
        fh = self.state.new_fh()
        with self.table.lock:
            node.opens += 1
            self._handles[fh] = DirHandle(fh, node, items)
        return fh

    def _repo_node(self, repo: str) -> Node:
        return self.table.get_or_add(("repo", repo), kind=Kind.REPO, repo=repo)

    def _ref_node(self, repo: str, name: str, resolved: ResolvedRef, signature: tuple[str, ...], stable: bool) -> Node:
        return self.tree.scope_root(self.scopes.register(repo, name, resolved, signature, stable))

    def _listed_node(self, parent: Node, name: bytes, child: Child, listing: Listing) -> Node:
        scope = parent.scope
        assert scope is not None
        path = join_path(parent.path, decode_name(name))
        existing = self.table.by_key((scope.key, path))
        if existing is not None and existing.dirty is not None:
            return existing
        return self.tree.bind(scope, path, child, listing.fetched, listing.gen, scope.version)

    def cacheable(self, fh: int) -> bool:
        """True if the kernel may keep the listing of directory handle ``fh`` (an immutable ref's directory)."""
        handle = self._handles.get(fh)
        if handle is None:
            return False
        node = handle.node
        return node.kind == Kind.DIR and node.scope is not None and node.scope.stable

    @op("readdir")
    def readdir(self, fh: int, start_id: int, limit: int = READDIR_BATCH) -> list[DirItem]:
        """Up to ``limit`` entries after position ``start_id`` (0: from the start, with . and ..).

        Items with ``counted`` raised their inode's lookup count: the caller
        must ``forget`` those it could not pass to the kernel.
        """
        handle = self._handles.get(fh)
        if handle is None:
            raise FsError(errno.EBADF)
        node = handle.node
        out: list[DirItem] = []
        pos = start_id
        attr = self.attrs.attr
        if pos == 0:
            out.append(DirItem(b".", attr(node), 1, False))
            pos = 1
        if pos == 1 and len(out) < limit:
            out.append(DirItem(b"..", attr(self.tree.dotdot(node)), 2, False))
            pos = 2
        index = pos - 2
        items = handle.items
        # One lock for the batch (the node factories take it again, re-entrantly).
        with self.table.lock:
            while index < len(items) and len(out) < limit:
                name, make = items[index]
                index += 1
                try:
                    child = make()
                except (FsError, LakeMountError) as exc:
                    log.debug("readdir: skipping %r: %s", name, exc)
                    continue
                child.lookups += 1  # InodeTable.remember, under the lock already held
                out.append(DirItem(name, attr(child), index + 2, True))
        return out

    @op("releasedir")
    def releasedir(self, fh: int) -> None:
        """Close directory handle ``fh`` (an unknown handle is ignored)."""
        with self.table.lock:
            handle = self._handles.pop(fh, None)
        if handle is not None:
            self.table.release(handle.node)
