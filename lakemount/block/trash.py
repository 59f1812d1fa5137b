"""GC's trash in a storage namespace, and ``TrashFallbackAdapter``, which reads through it.

Garbage collection does not delete what it finds unreferenced: it moves it to
the trash, and only a later run that still finds it unreferenced deletes it
for good (``lakemount.jobs.gc``).  The trash of a storage namespace ``<ns>``
mirrors the two kinds of objects GC collects:

- ``<ns>/data/<aa>/<sha256>`` goes to ``<ns>/_lakefs/gc/trash/data/<aa>/<sha256>``;
- ``<ns>/_lakefs/<64 hex>`` (a range or metarange) goes to ``<ns>/_lakefs/gc/trash/tables/<64 hex>``.

An entry staged while (or after) its bytes went to the trash must still read:
``TrashFallbackAdapter`` wraps the block adapter every reader uses and, when
a byte read (``get``, ``get_range``, ``open``) of such an object finds it
missing, reads its trash copy instead.  It does not put the object back:
a reader cannot tell a referenced object from expired history, and a read
should not need write access; the next GC run restores what is referenced.
Everything else passes through untouched, on purpose: ``touch`` and
``exists`` answer for the original key only, so a writer that dedups never
mistakes a trashed object for a stored one and uploads the bytes again, and
GC's own ``stat`` sees where an object really is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, Final, TypeVar

from lakemount.block.layout import DATA_PREFIX, KEY_LEN, TABLES_PREFIX, is_data_key, is_table_key
from lakemount.block.router import presign
from lakemount.errors import ObjectNotFound
from lakemount.graveler.ports import BlockAdapter, ObjectInfo

T = TypeVar("T")

TRASH_KEY: Final = "_lakefs/gc/trash"
TRASH_DATA: Final = f"{TRASH_KEY}/data/"
TRASH_TABLES: Final = f"{TRASH_KEY}/tables/"


def trash_key(key: str) -> str | None:
    """The trash key of a namespace-relative ``data/<aa>/<sha256>`` or ``_lakefs/<64 hex>`` key, else None."""
    if is_data_key(key):
        return TRASH_DATA + key[len(DATA_PREFIX) :]
    if is_table_key(key):
        return TRASH_TABLES + key[len(TABLES_PREFIX) :]
    return None


def original_key(key: str) -> str | None:
    """The key a trash key (``_lakefs/gc/trash/...``) was moved from, else None."""
    if key.startswith(TRASH_DATA):
        original = DATA_PREFIX + key[len(TRASH_DATA) :]
    elif key.startswith(TRASH_TABLES):
        original = TABLES_PREFIX + key[len(TRASH_TABLES) :]
    else:
        return None
    return original if trash_key(original) == key else None


def trash_url(url: str) -> str | None:
    """Where GC's trash keeps the object ``url`` names, judged by its shape alone; None if GC never trashes it.

    ``url`` is absolute, ``<ns>/data/<aa>/<sha256>`` or ``<ns>/_lakefs/<64 hex>``;
    the namespace is whatever precedes that tail.
    """
    if len(url) <= KEY_LEN or url[-KEY_LEN - 1] != "/":
        return None
    namespace, key = url[: -KEY_LEN - 1], url[-KEY_LEN:]
    trashed = trash_key(key)
    if trashed is None or namespace.endswith("/" + TRASH_KEY):
        return None
    return f"{namespace}/{trashed}"


class TrashFallbackAdapter:
    """Wraps ``inner``; byte reads of a missing data object or table are served from its trash copy.

    A read tries the original, then the trash copy, then the original once
    more: GC moves an object with one rename (local) or a copy followed by a
    delete (S3), so at every moment at least one of the two names holds it,
    and a read that raced a single move (into the trash, or back) finds it.
    ``ObjectNotFound`` names the original URL when neither has it.
    """

    def __init__(self, inner: BlockAdapter) -> None:
        self.inner = inner

    def _read(self, url: str, fn: Callable[[str], T]) -> T:
        try:
            return fn(url)
        except ObjectNotFound:
            trashed = trash_url(url)
            if trashed is None:
                raise
        try:
            return fn(trashed)
        except ObjectNotFound:
            pass
        return fn(url)

    # --- reads that fall back to the trash ------------------------------------

    def get(self, url: str) -> bytes:
        return self._read(url, self.inner.get)

    def get_range(self, url: str, start: int, length: int) -> bytes:
        return self._read(url, lambda u: self.inner.get_range(u, start, length))

    def open(self, url: str) -> BinaryIO:
        return self._read(url, self.inner.open)

    # --- everything else: the original key only --------------------------------

    def put(self, url: str, data: bytes) -> None:
        self.inner.put(url, data)

    def put_lazily(self, url: str, data: bytes) -> None:
        from lakemount.block.batch import put_lazily  # only the mount's small closes (a CLI verb's import budget)

        put_lazily(self.inner, url, data)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        from lakemount.block.batch import put_many  # only the write-back pipeline batches (a CLI verb's import budget)

        put_many(self.inner, items)

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        self.inner.put_file(url, path, link=link)

    def parts_for(self, url: str) -> Any:
        """The inner store's uploads in parts for ``url`` (catalog/streaming.py), None if it has none."""
        parts_for = getattr(self.inner, "parts_for", None)
        return parts_for(url) if parts_for is not None else None

    def stat(self, url: str) -> ObjectInfo:
        return self.inner.stat(url)

    def exists(self, url: str) -> bool:
        return self.inner.exists(url)

    def touch(self, url: str) -> None:
        self.inner.touch(url)

    def copy(self, src_url: str, dst_url: str) -> None:
        self.inner.copy(src_url, dst_url)

    def delete(self, url: str) -> None:
        self.inner.delete(url)

    def list(self, prefix_url: str) -> Iterator[ObjectInfo]:
        return self.inner.list(prefix_url)

    def presign(self, url: str, method: str) -> tuple[str, float] | None:
        """The inner store's presigned URL for the original key (never the trash copy); None if it does not presign."""
        return presign(self.inner, url, method)
