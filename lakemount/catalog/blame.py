"""Blame: the commit that last changed each of a page of paths, as a listing shows it.

The history is walked first-parent from the ref's commit (the branch's own line, as ``git log
--first-parent`` reads it: a merge is the change it brought); at each commit only the keys it changed
against its first parent within the span of the asked paths are read (only that span of each metarange; equal
ranges are skipped by id, and of a range changed in place only the blocks whose bytes changed are decoded), and
the walk ends when every path has its commit, at a root commit, or after ``depth`` commits.  A path
ending in ``/`` (a listing's common prefix) is blamed on the last commit that changed anything under it;
the prefixes of one page must not nest (a listing's never do).  Commits are immutable, so an answer for
(commit, path) never changes: :class:`BlameCache` keeps them per commit, and a page drawn again costs no walk.  On a
branch, a path with staged changes is ``uncommitted`` (its committed blame is still given).
:meth:`Catalog.blame <lakemount.catalog.catalog.Catalog.blame>` calls :func:`blame`, importing this module
when a listing first asks for blame (a CLI verb's start does not load it, issue 41).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from lakemount.errors import InvalidArgument
from lakemount.graveler.model import Commit
from lakemount.graveler.refexpr import View

if TYPE_CHECKING:
    from lakemount.graveler.graveler import Graveler
    from lakemount.graveler.model import Repository
    from lakemount.graveler.refexpr import ResolvedRef

CACHE_ENTRIES: Final = 200_000  # (commit, path) answers kept; one is ~200 bytes
MAX_PATHS: Final = 1000  # paths one call blames: a listing page


@dataclass(frozen=True, slots=True)
class Blamed:
    """The blame of one path: ``commit`` last changed it (None: not found within the walk's depth, or the path
    is in no commit at all), ``uncommitted`` when the branch has staged changes to it."""

    path: str
    commit: Commit | None
    uncommitted: bool = False
    beyond_depth: bool = False


class BlameCache:
    """(storage namespace, commit id) -> {path: the id of the commit that last changed the path, or "" when the
    path was in no commit of a complete walk}; bounded by answers kept, least recently used commit first out,
    thread-safe.  Kept per commit so that a walk asks once per commit whether an earlier page was blamed there,
    not once per path and commit (a cold walk of 200 commits for 1,000 paths was 200,000 lookups)."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        self._map: OrderedDict[tuple[str, str], dict[str, str]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def answers(self, ns: str, commit_id: str, paths: Iterable[str]) -> dict[str, str]:
        """The answers kept at ``commit_id`` for those of ``paths`` it has."""
        with self._lock:
            kept = self._map.get((ns, commit_id))
            if kept is None:
                return {}
            self._map.move_to_end((ns, commit_id))
            return {p: kept[p] for p in paths if p in kept}

    def put(self, ns: str, commit_id: str, answers: dict[str, str]) -> None:
        if not answers:
            return
        with self._lock:
            kept = self._map.setdefault((ns, commit_id), {})
            self._size -= len(kept)
            kept.update(answers)
            self._size += len(kept)
            self._map.move_to_end((ns, commit_id))
            while self._size > self.entries and len(self._map) > 1:
                self._size -= len(self._map.popitem(last=False)[1])


def _span_end(key: bytes) -> bytes | None:
    """The first key after every key starting with ``key`` (None: no end)."""
    k = bytearray(key)
    while k and k[-1] == 0xFF:
        k.pop()
    if not k:
        return None
    k[-1] += 1
    return bytes(k)


def _common_prefix(keys: Sequence[bytes]) -> bytes:
    lo, hi = min(keys), max(keys)
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


class BlameCatalog(Protocol):
    """What blame uses of the catalog: ref resolution, the core's log and diffs, and the cache of walks it keeps
    on the catalog (``Catalog``; made by the first blame)."""

    graveler: Graveler
    _blame_cache: BlameCache | None

    def resolve(self, repo: str | Repository, ref: str | ResolvedRef) -> ResolvedRef: ...


def blame(cat: BlameCatalog, repo: str, ref: str, paths: Sequence[str], *, depth: int) -> list[Blamed]:
    """:meth:`Catalog.blame <lakemount.catalog.catalog.Catalog.blame>`: the blame of each of ``paths`` at ``ref``."""
    if len(paths) > MAX_PATHS:
        raise InvalidArgument(f"blame: at most {MAX_PATHS} paths at once")
    if depth < 1:
        raise InvalidArgument("blame: depth must be at least 1")
    if cat._blame_cache is None:
        cat._blame_cache = BlameCache()
    cache = cat._blame_cache
    g = cat.graveler
    r = g.get_repository(repo)
    resolved = cat.resolve(repo, ref)
    head = g.get_commit(repo, resolved.commit_id)
    ns = r.storage_namespace
    keys = {p: p.encode("utf-8", "surrogateescape") for p in dict.fromkeys(paths)}
    found: dict[str, str] = {}  # path -> commit id ("" when in no commit)
    commits: dict[str, Commit] = {head.id: head}
    found.update(cache.answers(ns, head.id, keys))
    todo = {p: k for p, k in keys.items() if p not in found}
    exact = {k: p for p, k in todo.items() if not p.endswith("/")}
    prefixes = sorted((k, p) for p, k in todo.items() if p.endswith("/"))
    starts = [k for k, _ in prefixes]
    ends = [_span_end(k) if p.endswith("/") else k + b"\x00" for p, k in todo.items()]
    lo = min(todo.values(), default=b"")
    hi = None if None in ends else max((e for e in ends if e is not None), default=None)
    walked = 0
    c: Commit | None = head
    while todo and c is not None and walked < depth:
        if c is not head:  # an earlier page, or the page before the last commits, blamed at this commit
            for p, hit in cache.answers(ns, c.id, todo).items():
                found[p] = hit
                del todo[p]
            if not todo:
                break
        walked += 1
        for k in g.first_parent_changes(r, c, lo, hi):
            hit_path = exact.get(k)
            if hit_path is not None and hit_path in todo:
                found[hit_path] = c.id
                del todo[hit_path]
            i = bisect_right(starts, k) - 1
            if i >= 0 and k.startswith(starts[i]) and prefixes[i][1] in todo:
                found[prefixes[i][1]] = c.id
                del todo[prefixes[i][1]]
            if not todo:
                break
        commits[c.id] = c
        c = g.get_commit(repo, c.parents[0]) if c.parents else None
    complete = c is None  # the walk reached past a root commit: what is left is in no commit
    cache.put(ns, head.id, {**found, **dict.fromkeys(todo, "")} if complete else found)
    staged: set[str] = set()
    if resolved.view is View.FULL and resolved.branch is not None and keys:
        staged = _staged_among(cat, repo, resolved.branch, keys)
    out = []
    for p in paths:
        cid = found.get(p)
        if cid is None:
            out.append(Blamed(p, None, p in staged, beyond_depth=not complete))
            continue
        if cid and cid not in commits:
            commits[cid] = g.get_commit(repo, cid)
        out.append(Blamed(p, commits[cid] if cid else None, p in staged))
    return out


def _staged_among(cat: BlameCatalog, repo: str, branch: str, keys: dict[str, bytes]) -> set[str]:
    """Which of ``keys`` (paths, and ``dir/`` prefixes) the branch's staged changes touch."""
    exact = {k: p for p, k in keys.items() if not p.endswith("/")}
    prefixes = sorted((k, p) for p, k in keys.items() if p.endswith("/"))
    starts = [k for k, _ in prefixes]
    out: set[str] = set()
    for rec in cat.graveler.diff_uncommitted(repo, branch, prefix=_common_prefix(list(keys.values()))):
        hit_path = exact.get(rec.key)
        if hit_path is not None:
            out.add(hit_path)
        i = bisect_right(starts, rec.key) - 1
        if i >= 0 and rec.key.startswith(starts[i]):
            out.add(prefixes[i][1])
    return out
