"""What garbage collection may do in one storage namespace (``Catalog.gc_store``): the sweeper's port.

GC (``lakemount.jobs.gc`` and its executor side ``jobs/gc_tasks.py``) is the
one job that lists a namespace and moves and deletes its objects, so it
cannot make do with the read-only ports other front ends get.  It gets this
instead, bound to one storage namespace, with every name namespace-relative:

- the tables it reads to find what is referenced (:meth:`GcStore.metarange_ranges`,
  :meth:`GcStore.read_range`);
- the objects it may collect and its trash, listed by two-hex-digit prefix
  (:meth:`GcStore.collectable`, :meth:`GcStore.trashed`), and the three moves on
  one of them (:meth:`GcStore.trash`, :meth:`GcStore.restore`, :meth:`GcStore.purge`,
  ``lakemount.block.gcmoves``), which refuse anything but a data object or a table;
- its own files, which may lie only under ``_lakefs/gc/marks/`` (:meth:`GcStore.put`,
  :meth:`GcStore.get`, :meth:`GcStore.modified`, :meth:`GcStore.files`, :meth:`GcStore.delete`);
- the markers of upload addresses handed out for linking (``catalog/uploads.py``),
  read and, once expired, deleted (:meth:`GcStore.upload_markers`, :meth:`GcStore.drop_upload_marker`).

Nothing else of the namespace (commits, the journal, the rules, imported
objects) can be written or deleted through it: the rule "GC only moves or
deletes what it recognises" is kept here, in one place, not in each job.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Final, Literal

from lakemount.block.gcmoves import purge, restore, trash
from lakemount.block.layout import (
    TABLES_PREFIX,
    data_dir,
    is_data_key,
    is_data_name,
    is_table_key,
    is_table_name,
    table_key,
)
from lakemount.block.trash import TRASH_DATA, TRASH_TABLES
from lakemount.catalog.model import BlockAdapter, ObjectInfo
from lakemount.catalog.storage import RangeInfo, TableReader, join, metarange_ranges, read_table
from lakemount.catalog.uploads import LINKS_PREFIX, parse_marker
from lakemount.errors import InvalidArgument

MARKS_KEY: Final = "_lakefs/gc/marks"

Kind = Literal["data", "table", "other"]


class GcStore:
    """GC's port on the storage namespace ``namespace`` (see the module's docstring); thread-safe as its adapter is.

    Raises what the block store raises (``ObjectNotFound``, ``Unavailable``), and
    ``InvalidArgument`` for a name outside what GC may write, move or delete.
    """

    __slots__ = ("_adapter", "namespace")

    def __init__(self, adapter: BlockAdapter, namespace: str) -> None:
        self._adapter = adapter
        self.namespace = namespace

    def _url(self, key: str) -> str:
        return join(self.namespace, key)

    @property
    def refreshes(self) -> bool:
        """Whether writers that re-use stored bytes refresh their time (the store has ``touch``), which
        keeps them from a sweep that began before."""
        return hasattr(self._adapter, "touch")

    def holds_at_most(self, n: int, *, look: int) -> bool:
        """Whether the namespace holds at most ``n`` objects that GC's work grows with (data objects, tables
        and their copies in the trash), listing at most ``look`` keys of any kind (more: False).

        Its own marks, the audit partitions, the journal and commits are not counted: ten kept marks of
        a small repository are some 800 files, and a day's audit partitions as many again.
        """
        root = self._url("")
        listed = itertools.islice(self._adapter.list(root), look)
        seen = counted = 0
        for info in listed:
            seen += 1
            key = info.url[len(root):]
            if is_data_key(key) or is_table_key(key) or key.startswith((TRASH_DATA, TRASH_TABLES)):
                counted += 1
                if counted > n:
                    return False
        return seen < look

    # -- tables ----------------------------------------------------------------
    def metarange_ranges(self, metarange_id: str, checksum: str) -> list[RangeInfo]:
        """The ranges the metarange lists (none for the empty one); ``Corrupt`` if it is missing or damaged."""
        return metarange_ranges(self._adapter, self.namespace, metarange_id, checksum)

    def read_range(self, range_id: str, checksum: str) -> TableReader:
        """The range table ``range_id``, checked against ``checksum``; ``Corrupt``, ``ChecksumMismatch``."""
        return read_table(self._adapter, self.namespace, range_id, checksum, "range")

    # -- what may be collected, and the trash ------------------------------------
    def collectable(self, prefixes: Iterable[str]) -> Iterator[tuple[Kind, str, ObjectInfo]]:
        """``(kind, key, info)`` of every data object (``data/<aa>/``) and table (``_lakefs/<aa>...``) whose
        name starts with one of the two-hex-digit ``prefixes``; ``kind`` is ``"other"`` for what is listed
        there but is not a name GC may collect."""
        tables_root = self._url(TABLES_PREFIX)
        for h in prefixes:
            base = self._url(data_dir(h))
            for info in self._adapter.list(base):
                name = info.url[len(base) :]
                yield ("data" if is_data_name(h, name) else "other"), data_dir(h) + name, info
            for info in self._adapter.list(tables_root + h):
                name = info.url[len(tables_root) :]
                yield ("table" if is_table_name(name) else "other"), table_key(name), info

    def trashed(self, prefixes: Iterable[str]) -> Iterator[tuple[Kind, str, ObjectInfo]]:
        """``(kind, original key, info of the trashed copy)`` of the trash's objects whose name starts with
        one of ``prefixes``."""
        tables_root = self._url(TRASH_TABLES)
        for h in prefixes:
            base = self._url(f"{TRASH_DATA}{h}/")
            for info in self._adapter.list(base):
                name = info.url[len(base) :]
                if is_data_name(h, name):
                    yield "data", data_dir(h) + name, info
            for info in self._adapter.list(tables_root + h):
                name = info.url[len(tables_root) :]
                if is_table_name(name):
                    yield "table", table_key(name), info

    def trash(self, key: str, cutoff: float, *, dry_run: bool) -> tuple[str, int]:
        """Move ``key`` to the trash unless modified at or after ``cutoff`` (``gcmoves.trash``)."""
        return trash(self._adapter, self.namespace, key, cutoff, dry_run=dry_run)

    def restore(self, key: str, *, dry_run: bool) -> tuple[str, int]:
        """Move the trashed copy of ``key`` back (``gcmoves.restore``)."""
        return restore(self._adapter, self.namespace, key, dry_run=dry_run)

    def purge(self, key: str, cutoff: float, *, dry_run: bool) -> tuple[str, int]:
        """Delete the trashed copy of ``key`` unless trashed at or after ``cutoff`` (``gcmoves.purge``)."""
        return purge(self._adapter, self.namespace, key, cutoff, dry_run=dry_run)

    # -- GC's own files ------------------------------------------------------------
    def _own(self, key: str) -> str:
        if not key.startswith(MARKS_KEY + "/") or "/../" in f"{key}/" or "//" in key:
            raise InvalidArgument(f"GC writes only its own files under {MARKS_KEY}/, not {key!r}")
        return self._url(key)

    def put(self, key: str, data: bytes) -> None:
        """Store GC's file ``key`` (under ``_lakefs/gc/marks/``)."""
        self._adapter.put(self._own(key), data)

    def get(self, key: str) -> bytes:
        """GC's file ``key``; ``ObjectNotFound`` if it is missing."""
        return self._adapter.get(self._own(key))

    def modified(self, key: str) -> float:
        """The store's modification time of GC's file ``key`` (the store's clock, not this host's)."""
        return self._adapter.stat(self._own(key)).mtime

    def files(self, prefix: str) -> Iterator[str]:
        """The keys of GC's files that start with ``prefix``."""
        root = self._own(prefix)
        start = len(root) - len(prefix)
        for info in self._adapter.list(root):
            yield info.url[start:]

    def delete(self, key: str) -> None:
        """Delete GC's file ``key``."""
        self._adapter.delete(self._own(key))

    # -- upload markers ---------------------------------------------------------------
    def upload_markers(self) -> Iterator[tuple[str, int, str]]:
        """``(data object name, deadline, marker)`` of every marker of an upload address handed out for linking."""
        root = self._url(LINKS_PREFIX)
        for info in self._adapter.list(root):
            marker = info.url[len(root) :]
            parsed = parse_marker(marker)
            if parsed is not None:
                yield parsed[0], parsed[1], marker

    def drop_upload_marker(self, marker: str) -> None:
        """Delete an upload marker ``upload_markers`` listed."""
        if parse_marker(marker) is None:
            raise InvalidArgument(f"not an upload marker: {marker!r}")
        self._adapter.delete(self._url(LINKS_PREFIX + marker))
