"""Streamed uploads: a large file goes to the object store in parts while it is being written.

The mount's temp file of a file written from its start (``fuse/writes.py``)
hands each full part to a :class:`StreamedUpload` as the file grows past it;
the part is read back from the temp file (the page cache holds it) and sent by
a pool thread while the writer goes on, at most ``IN_FLIGHT`` parts at a time
per file (the writer waits for the oldest beyond that: bounded memory, and
backpressure when the store is slower than the disk).  So a close waits for
the last part only, not for the whole file.

Content addressing still holds.  The key of a multipart upload is fixed when
it begins, before the bytes are known, so the parts go to a *landing* key with
a random name in the data directory (``data/<aa>/<random 64 hex>``, the shape
of the API's upload addresses, which garbage collection collects when no entry
refers to it).  ``finish`` then looks at the content address
(``data/<aa>/<sha256>``): if the same bytes are there already it only refreshes
them and aborts the upload (nothing was ever visible); otherwise it completes
the upload and copies the landing object to its content address on the server
(no byte goes through this node again) and deletes the landing object.  An
upload that is abandoned (an overwrite in the middle of the file, a discarded
file, a failed part) is aborted; a crash leaves an incomplete multipart upload,
which is no object at all (S3 lists none; a bucket's
``AbortIncompleteMultipartUpload`` rule reclaims its parts).  A failed part never
(nor a failed completion or copy) fails the write: ``finish`` returns None and
the caller uploads the file whole.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import secrets
from concurrent.futures import Future
from typing import TYPE_CHECKING, Final, Protocol

from lakemount.block.layout import data_address
from lakemount.block.pools import LazyPool
from lakemount.catalog.writer import DataInfo, DataStore
from lakemount.errors import LakeMountError

if TYPE_CHECKING:
    from lakemount.graveler.model import Repository

log = logging.getLogger(__name__)

PART_SIZE: Final = 8 << 20  # S3's minimum is 5 MiB for every part but the last
PART_GROWTH_EVERY: Final = 1000  # parts; then the part size grows by PART_SIZE, so 10,000 parts hold 440 GiB
IN_FLIGHT: Final = 4  # parts of one file on their way at once
POOL_THREADS: Final = 8

_senders = LazyPool(POOL_THREADS, "lm-parts")  # the threads that send parts (again in a forked child)


class PartUploads(Protocol):
    """A block store's multipart uploads (``S3Adapter``); nothing is visible before ``finish_parts``."""

    def start_parts(self, url: str) -> str: ...

    def put_part(self, url: str, upload_id: str, number: int, data: bytes) -> str: ...

    def finish_parts(self, url: str, upload_id: str, etags: list[str]) -> None: ...

    def abort_parts(self, url: str, upload_id: str) -> None: ...


def part_size(number: int) -> int:
    """The size of part ``number`` (1-based) of a streamed upload."""
    return PART_SIZE * (1 + (number - 1) // PART_GROWTH_EVERY)


class StreamedUpload:
    """One file's parts on their way to the store; see the module docstring.

    Not thread-safe: its file's lock orders ``offer``, ``finish`` and
    ``abort`` (the pool threads only read the file and send).
    """

    def __init__(self, catalog: DataStore, repo: Repository, parts: PartUploads) -> None:
        self._catalog = catalog
        self._repo = repo
        self._parts = parts
        self.landing = catalog.physical_url(repo, data_address(secrets.token_hex(32)))
        self._upload_id: str | None = None
        self.sent = 0  # bytes [0, sent) are handed to the senders
        self._futures: collections.deque[Future[str]] = collections.deque()
        self._etags: list[str] = []
        self.failed: BaseException | None = None
        self.closed = False

    @property
    def parts(self) -> int:
        """Parts handed to the senders so far."""
        return len(self._etags) + len(self._futures)

    def offer(self, fd: int, size: int) -> None:
        """The file ``fd`` holds ``size`` bytes, appended from its start: send every part now full.

        Waits while ``IN_FLIGHT`` parts are on their way.  A failure is kept
        (``finish`` reports it by returning None), never raised here.
        """
        while not self.closed and self.failed is None and size - self.sent >= part_size(self.parts + 1):
            self._send(fd, part_size(self.parts + 1))

    def _send(self, fd: int, length: int) -> None:
        try:
            if self._upload_id is None:
                self._upload_id = self._parts.start_parts(self.landing)
            while len(self._futures) >= IN_FLIGHT:
                self._etags.append(self._futures.popleft().result())
        except Exception as exc:  # the file is uploaded whole at its save instead
            self._fail(exc)
            return
        number, offset = self.parts + 1, self.sent
        upload_id = self._upload_id
        self._futures.append(_senders.get().submit(self._put, fd, upload_id, number, offset, length))
        self.sent += length

    def _put(self, fd: int, upload_id: str, number: int, offset: int, length: int) -> str:
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise OSError(f"part {number}: read {len(data)} of {length} bytes at {offset}")
        return self._parts.put_part(self.landing, upload_id, number, data)

    def _fail(self, exc: BaseException) -> None:
        log.warning("streaming %s in parts failed (%s): the file is uploaded whole when it is saved", self.landing, exc)
        self.failed = exc
        self.abort()

    def finish(self, fd: int, size: int, sha256: str, md5: str) -> DataInfo | None:
        """Send the last part, then store the bytes at their content address; returns where they went.

        None if the upload failed or was never begun, or its completion or
        copy failed (the landing object is deleted again): the caller stores
        the file whole.  Raises what the block store raises when it looks for
        the content address.
        """
        if self.closed or self.failed is not None or self._upload_id is None:
            self.abort()
            return None
        if size > self.sent:
            self._futures.append(_senders.get().submit(self._put, fd, self._upload_id, self.parts + 1, self.sent, size - self.sent))
            self.sent = size
        try:
            while self._futures:
                self._etags.append(self._futures.popleft().result())
        except Exception as exc:
            self._fail(exc)
            return None
        cat = self._catalog
        address = data_address(sha256)
        url = cat.physical_url(self._repo, address)
        info = DataInfo(address, size, md5, sha256)
        self.closed = True
        if cat.refresh_existing(url):  # the same bytes are there already
            self._parts.abort_parts(self.landing, self._upload_id)
            return info
        try:
            self._parts.finish_parts(self.landing, self._upload_id, self._etags)
            try:
                cat.adapter.copy(self.landing, url)
            finally:
                cat.adapter.delete(self.landing)
        except LakeMountError as exc:  # the caller uploads the file whole, and that upload's error is the one to see
            log.warning("completing %s failed (%s): the file is uploaded whole", self.landing, exc)
            with contextlib.suppress(LakeMountError):
                self._parts.abort_parts(self.landing, self._upload_id)
            return None
        return info

    def abort(self) -> None:
        """Give the upload up: wait for the parts on their way, then drop them (idempotent; never raises)."""
        if self.closed:
            return
        self.closed = True
        while self._futures:
            try:
                self._futures.popleft().result()
            except Exception:  # noqa: BLE001,S110 - the upload is being dropped anyway
                pass
        if self._upload_id is not None:
            try:
                self._parts.abort_parts(self.landing, self._upload_id)
            except Exception as exc:  # an incomplete upload is no object; the bucket's lifecycle rule reclaims it
                log.warning("aborting the upload of %s failed: %s", self.landing, exc)


def parts_etag(sha256: str, size: int) -> str:
    """The ETag of a large file written through the mount (past ``fuse.writes.MD5_MAX``): shaped as S3 shapes
    an object uploaded in parts (``<32 hex>-<parts>``), so a client does not take it for the MD5 (rclone
    and ``aws s3`` check an ETag without a dash against the MD5 of what they read), and derived from the
    content's SHA-256, so equal bytes have equal ETags."""
    return f"{sha256[:32]}-{max(1, -(-size // PART_SIZE))}"
