"""Object bodies out: a stored object's bytes as a body a front end sends.

Shared by the S3 gateway's GetObject and UploadPartCopy and the REST API's
getObject, so an object reads the same through both.  :func:`read_body` is
the one rule: a body of up to ``INLINE_BYTES`` is read whole through the
catalog (from the node's caches when hot: no request to the object store);
a larger one streams (:func:`read_stream`).  A local object is then served
as views of a read-only memory map (:class:`MappedChunks`, which the ASGI
adapter sends straight from its loop: the page cache is its cache); any
other streams block by block through the node's caches
(``Catalog.read_chunks``).
"""

from __future__ import annotations

import io
import mmap
import os
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, Final, Protocol

from lakemount.catalog.model import Entry, Repository
from lakemount.errors import ObjectNotFound

READ_CHUNK: Final = 1 << 20
INLINE_BYTES: Final = 1 << 20  # one block of the caches: read in one piece, no streaming round trips
PAGE: Final = mmap.PAGESIZE


class BodySource(Protocol):
    """What a body is read through: the catalog's data reads (``Catalog`` implements it)."""

    def read(self, repo: Repository, entry: Entry, offset: int = 0, length: int | None = None) -> bytes: ...

    def read_chunks(self, repo: Repository, entry: Entry, start: int, length: int) -> Iterator[bytes]: ...

    def open(self, repo: Repository, entry: Entry) -> BinaryIO: ...

    def physical_url(self, repo: Repository, address: str) -> str: ...

    def is_imported(self, entry: Entry) -> bool: ...


def read_body(
    catalog: BodySource, repo: Repository, entry: Entry, start: int, length: int
) -> tuple[bytes | Iterable[bytes | memoryview], Callable[[], None] | None]:
    """The body of ``length`` bytes of an object from ``start``, and what to call once it is sent (or None).

    Raises ``ObjectNotFound`` when the data is gone or shorter than the
    entry, and what :meth:`Catalog.read` raises, before any byte is sent.
    """
    if length <= 0 or entry.size == 0:
        return b"", None
    if length <= INLINE_BYTES:
        data = catalog.read(repo, entry, start, length)
        if len(data) != length:
            raise ObjectNotFound("object data is shorter than its entry")
        return data, None
    chunks, f = read_stream(catalog, repo, entry, start, length)
    return chunks, f.close if f is not None else None


def read_stream(catalog: BodySource, repo: Repository, entry: Entry, start: int, length: int) -> tuple[Iterable[bytes | memoryview], BinaryIO | None]:
    """An iterator over ``length`` bytes of an object from ``start``, and the file to close (or None).

    An object in a local file is served from a read-only memory map
    (``MappedChunks``): each chunk is a view of the page cache that the
    server writes to the socket directly, one copy fewer than ``read()`` into
    a new buffer (64 MiB GETs in gateway_bench went from about 2.1 to
    2.4-2.75 GB/s).  A worker thread faults pages in before their view is
    handed out, so a cold object's disk reads never happen on the event
    loop.  The block store
    never rewrites a stored object in place (it writes a temporary file and
    renames it), so a mapping cannot be truncated under a reader; imported
    objects, which live outside it, are read, not mapped.  Every other
    object streams through the node's caches (``Catalog.read_chunks``).
    """
    if length <= 0 or entry.size == 0:
        return iter(()), None
    # Only objects lakemount wrote (inside the storage namespace) are mapped:
    # an imported object is someone else's file, which could be truncated
    # while mapped, and touching a page past its end would kill the worker.
    if not catalog.is_imported(entry) and catalog.physical_url(repo, entry.address).startswith("local://"):
        f = catalog.open(repo, entry)
        try:
            mapped = _mapped_reads(f, start, length)
        except BaseException:
            f.close()
            raise
        if mapped is not None:
            return mapped, f
        f.close()
    return catalog.read_chunks(repo, entry, start, length), None


def _mapped_reads(f: BinaryIO, start: int, length: int) -> MappedChunks | None:
    """Views of ``f`` mapped read-only, or None when ``f`` is not a plain local file."""
    if not isinstance(f, io.BufferedReader):
        return None
    try:
        size = os.fstat(f.fileno()).st_size
        if size < start + length:
            raise ObjectNotFound("object data is shorter than its entry")
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    return MappedChunks(memoryview(m), start, start + length)


class MappedChunks:
    """``view[start:end]`` of a mapped object, as chunks.

    Iterating faults each chunk's pages in before handing its view out (for
    a caller in a worker thread, such as UploadPartCopy).  The ASGI adapter
    instead sends views straight from the event loop and calls ``fault`` in
    its thread pool, a window ahead of what it sends, so a cold object's disk
    reads never happen on the loop.  The map is unmapped when the last view
    of it is released, never closed here: the server may still hold a chunk.
    """

    __slots__ = ("end", "start", "view")

    def __init__(self, view: memoryview, start: int, end: int) -> None:
        self.view = view
        self.start = start
        self.end = end

    def fault(self, lo: int, hi: int) -> None:
        """Bring pages ``[lo, hi)`` into memory (one byte read per page)."""
        bytes(self.view[lo:hi:PAGE])

    def __iter__(self) -> Iterator[bytes | memoryview]:
        pos = self.start
        while pos < self.end:
            hi = min(pos + READ_CHUNK, self.end)
            self.fault(pos, hi)
            yield self.view[pos:hi]  # a bytes-like view: sockets, hashes and writers take it
            pos = hi
