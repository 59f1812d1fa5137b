"""New files whose create waits for their first close, so the two stage as one change (mounts without write-back).

A ``create(2)`` of a regular file makes an empty entry; nearly always a write
and a ``close(2)`` follow within milliseconds, and the close stages the
file's content at the same path.  Staging the empty entry first cost a
transaction of the ref store per new file, half of a lone writer's (issue 36:
at most 1.1 per acknowledged write).  So the mount *holds* the create here
instead: the close stages the file's entry and the held one is dropped,
superseded.

What a held create must never do is disappear or come late:

* this mount shows it at once (the inode table and the parent's listing have
  it, as for any create); any read of the branch's catalog at or under its
  path, and any other change staged on the branch by this mount, stages what
  is held first (:meth:`HeldCreates.take`, :meth:`HeldCreates.under`), so
  nothing read or written after the create can miss or overtake it -- but
  another new file's first close (:meth:`HeldCreates.take_closing`): closes of
  files written side by side (a Spark task's, ``cp -r`` in parallel) share one
  staging (:mod:`~lakemount.fuse.closes`), and a file still open keeps its hold,
  since its empty entry staged with another file's close would show other hosts
  an empty file mid-write and make its own close read and compare-and-set alone;
* a file held longer than ``HOLD_MAX`` (a process that creates a file and
  keeps it open, a lock file) is staged alone by the mount's periodic task;
  other hosts see a new file at its first close, or ``HOLD_MAX`` after its
  create at the latest (docs/SEMANTICS.md);
* a staging that fails puts back what it took, and unmount stages all.

With write-back the journal already orders a create before its close (and
merges the two); this is for mounts without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Final

from lakemount.catalog.model import Entry

HOLD_MAX: Final = 1.0  # seconds a create may wait for its file's first close before it is staged alone

BranchKey = tuple[str, str]
Change = tuple[str, Entry | None]


class HeldCreates:
    """Per branch, the creates this mount has not staged yet: path -> (entry, when held); an entry None is
    the deletion of a directory marker that the create of a first file in it drops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[BranchKey, dict[str, tuple[Entry | None, float]]] = {}

    def __bool__(self) -> bool:
        return bool(self._held)

    def hold(self, key: BranchKey, changes: Sequence[Change]) -> None:
        now = time.monotonic()
        with self._lock:
            held = self._held.setdefault(key, {})
            for path, entry in changes:
                held[path] = (entry, now)

    def holds(self, key: BranchKey, path: str) -> bool:
        held = self._held.get(key)
        return held is not None and path in held

    def drop(self, key: BranchKey, path: str) -> list[Change]:
        """Forget ``path``'s held create (the caller stages the file's own entry there): what was held, for
        :meth:`put_back` if that staging fails."""
        with self._lock:
            held = self._held.get(key)
            if held is None or path not in held:
                return []
            entry, _ = held.pop(path)
            if not held:
                del self._held[key]
            return [(path, entry)]

    def take(self, key: BranchKey, superseded: Sequence[Change] = ()) -> list[Change]:
        """Every create held on branch ``key``, taken out to be staged before (or with) ``superseded``: a
        held path that ``superseded`` changes is dropped, the later change wins."""
        later = {path for path, _ in superseded}
        return [(path, entry) for path, entry in self.under(key, "") if path not in later]

    def take_closing(self, key: BranchKey, paths: Sequence[str]) -> list[Change]:
        """For the first closes of new files at ``paths`` (their entries supersede their creates): their held
        creates and the held deletions of their directories' markers, taken out, for :meth:`put_back` if that
        staging fails.  Other held creates stay: files still open elsewhere on this mount keep their hold."""
        closing = set(paths)
        markers = {p.rpartition("/")[0] + "/" for p in closing if "/" in p}
        with self._lock:
            held = self._held.get(key)
            if not held:
                return []
            out = [(p, held[p][0]) for p in (*closing, *markers) if p in held and (p in closing or held[p][0] is None)]
            for p, _ in out:
                del held[p]
            if not held:
                del self._held[key]
            return out

    def any_under(self, key: BranchKey, path: str) -> bool:
        """Whether a create is held on branch ``key`` at ``path`` or below it (``""``: anywhere)."""
        held = self._held.get(key)
        if not held:
            return False
        if not path or path in held:
            return True
        below = path.rstrip("/") + "/"
        with self._lock:
            return any(p.startswith(below) for p in held)

    def under(self, key: BranchKey, path: str) -> list[Change]:
        """The creates held on branch ``key`` at ``path`` or below it (``""``: all), taken out."""
        with self._lock:
            held = self._held.get(key)
            if not held:
                return []
            if not path:
                del self._held[key]
                return [(p, e) for p, (e, _) in held.items()]
            below = path.rstrip("/") + "/"
            out = [(p, e) for p, (e, _) in held.items() if p == path or p.startswith(below)]
            for p, _ in out:
                del held[p]
            if not held:
                del self._held[key]
            return out

    def due(self, now: float | None = None) -> dict[BranchKey, list[Change]]:
        """Per branch, the creates held ``HOLD_MAX`` or longer, taken out."""
        now = time.monotonic() if now is None else now
        out: dict[BranchKey, list[Change]] = {}
        with self._lock:
            for key, held in list(self._held.items()):
                old = [(p, e) for p, (e, since) in held.items() if now - since >= HOLD_MAX]
                for p, _ in old:
                    del held[p]
                if not held:
                    del self._held[key]
                if old:
                    out[key] = old
        return out

    def put_back(self, key: BranchKey, changes: Sequence[Change]) -> None:
        """Hold again what a failed staging took (a path held anew meanwhile keeps its newer entry)."""
        now = time.monotonic()
        with self._lock:
            held = self._held.setdefault(key, {})
            for path, entry in changes:
                if path not in held:
                    held[path] = (entry, now)

    def keys(self) -> list[BranchKey]:
        with self._lock:
            return list(self._held)
