"""Scan-ahead: a directory's files opened one after another in listing order prefetch the next ones.

Readers of datasets open ``part-00000``, ``part-00001``... in order.  When a
file is opened read-only right after the one before it in its directory's
listing, the next :data:`SCAN_AHEAD` small files are prefetched into RAM by
the block reader, so their opens and reads need no I/O.  It runs on the
non-blocking path, from memory only: a directory whose listing is not cached
is listed in a background thread (the pool is created on first need, never at
import or construction), so the next opens can tell whether this is a scan.
Positions are remembered for :data:`MAX_SCANS` directories.
"""

from __future__ import annotations

import bisect
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from lakemount.fuse.inodes import Node
from lakemount.fuse.listing import ChildKind
from lakemount.fuse.state import MountState
from lakemount.fuse.tree import Tree

log = logging.getLogger(__name__)

SCAN_AHEAD: Final = 16  # files prefetched ahead of a sequential scan of a directory
MAX_SCANS: Final = 1024  # directories whose scan position is remembered


class ScanAhead:
    """Per-directory scan positions of one mount, and the prefetches they start."""

    def __init__(self, state: MountState, tree: Tree) -> None:
        self.state = state
        self.tree = tree
        self.table = state.table
        # Directory inode -> (listing position of the file opened last, position prefetched up to).
        self._scans: dict[int, tuple[int, int]] = {}
        self._pool: ThreadPoolExecutor | None = None  # lists directories a scan needs, in the background
        self._listing: set[int] = set()  # directory inodes being listed for a scan
        # Directory inode -> name of the file opened last in it while its listing was not cached.
        self._reopened: dict[int, bytes] = {}

    def opened(self, node: Node) -> None:
        """A file was opened read-only: prefetch the next small ones if this continues a scan.

        Memory only (it runs on the non-blocking path): a directory whose
        listing is not cached, or a repository not yet known, is skipped.
        """
        scope = node.scope
        if scope is None or node.detached or node.dirty is not None or not node.path:
            return
        parent = self.state.parent_of(node)
        repo = self.state.repos.get(scope.repo)
        if parent is None or repo is None:
            return
        listing = self.tree.listing_fresh(parent)
        name = os.path.basename(node.path).encode("utf-8", "surrogateescape")
        if listing is None:
            # Files opened by path (no readdir): list the directory in the background,
            # so the next opens can tell whether this is a scan -- unless this file was
            # the last one opened there: one file opened again and again (a reader
            # polling a marker) is no scan, and listing its directory every
            # ``head_ttl`` would cost the ref store a scan each time.
            with self.table.lock:
                again = self._reopened.get(parent.ino) == name
                self._reopened[parent.ino] = name
                if len(self._reopened) > MAX_SCANS:
                    self._reopened.pop(next(iter(self._reopened)))
            if not again:
                self._list_in_background(parent)
            return
        names = listing.names
        pos = bisect.bisect_left(names, name)
        if pos == len(names) or names[pos] != name:
            return
        with self.table.lock:
            last, ahead = self._scans.get(parent.ino, (-2, 0))
            if pos != last + 1:
                self._scans[parent.ino] = (pos, pos + 1)  # not (yet) a sequential scan
                if len(self._scans) > MAX_SCANS:
                    self._scans.pop(next(iter(self._scans)))
                return
            start, end = max(ahead, pos + 1), min(len(names), pos + 1 + SCAN_AHEAD)
            self._scans[parent.ino] = (pos, max(ahead, end))
        objs = []
        for child_name in names[start:end]:
            child = listing.children[child_name]
            entry = child.entry
            if child.kind is ChildKind.FILE and entry is not None and entry.size > 0:
                objs.append(self.state.object_ref(repo, entry))
        if objs:
            self.state.reader.prefetch(objs)

    def _list_in_background(self, directory: Node) -> None:
        with self.table.lock:
            if directory.ino in self._listing or len(self._listing) >= MAX_SCANS:
                return
            self._listing.add(directory.ino)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="lakemount-scan")
            pool = self._pool

        def run() -> None:
            try:
                self.tree.listing(directory)
            except Exception as exc:  # an optimization: the directory may be gone, the store down
                log.debug("background listing of %s: %s", directory.path, exc)
            finally:
                with self.table.lock:
                    self._listing.discard(directory.ino)

        pool.submit(run)

    def close(self) -> None:
        """Stop the background listing thread, if one was started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
