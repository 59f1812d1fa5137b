"""The S3 gateway's own state, as interfaces: which buckets were renamed or shared, and multipart uploads.

What the gateway needs kept beside the versioned data (``BucketStore``,
``MultipartStore`` and their records) is declared here, at the catalog's
level like pull requests and hook runs, so that ``lakemount/metastore`` can
implement it on the ref store's database (``SqlBucketStore``,
``SqlMultipartStore``) without importing the gateway; ``App`` wires them.
The stores speak lakemount errors (``UploadNotFound``, ``ConcurrentUpdate``);
the gateway turns them into S3 codes at its edge (``errors.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class BucketRecord:
    """A bucket created through the gateway whose repository or ACL must be remembered."""

    bucket: str
    repo: str
    ref: str | None = None  # None: the mode decides (flat: the default branch)
    acl: str = "private"
    owner: str = ""
    created: float = 0.0


@dataclass(frozen=True, slots=True)
class Upload:
    """A multipart upload: where its object goes, who started it, and whether it completed."""

    upload_id: str
    bucket: str
    key: str
    repo: str
    ref: str
    path: str
    initiated: float
    owner: str
    content_type: str = ""
    metadata: tuple[tuple[str, str], ...] = ()
    completed_etag: str | None = None


@dataclass(frozen=True, slots=True)
class Part:
    """One uploaded part: its MD5 hex, size, and the URL of the object holding its bytes."""

    part_number: int
    etag: str
    size: int
    url: str
    created: float


class BucketStore(Protocol):
    """Buckets recorded by the gateway, shared by every gateway process."""

    def get(self, bucket: str) -> BucketRecord | None:
        """The record of ``bucket``, or ``None``."""
        ...

    def put(self, record: BucketRecord) -> None:
        """Record a bucket, replacing any record of the same name."""
        ...

    def delete(self, bucket: str) -> None:
        """Forget a bucket (nothing happens if it has no record)."""
        ...

    def list(self) -> list[BucketRecord]:
        """Every record, in no particular order."""
        ...


class MultipartStore(Protocol):
    """Multipart uploads and their parts; every method is atomic."""

    def create(self, upload: Upload) -> None:
        """Record a new upload."""
        ...

    def get(self, upload_id: str, *, completed: bool = False) -> Upload:
        """The upload in progress (or, with ``completed``, also one completed lately); raises ``UploadNotFound``."""
        ...

    def put_part(self, upload_id: str, part: Part) -> str | None:
        """Record (or replace) a part; returns the URL of the part it replaced.

        Raises ``UploadNotFound`` when the upload was completed or aborted
        (the caller then deletes the part's object), ``ConcurrentUpdate`` when
        another request stored the same part at the same moment.
        """
        ...

    def parts(self, upload_id: str, *, after: int = 0, limit: int | None = None) -> list[Part]:
        """The parts numbered above ``after``, by number, at most ``limit``."""
        ...

    def delete(self, upload_id: str) -> list[Part]:
        """Forget an upload in progress; returns its parts.  Raises ``UploadNotFound`` (of two aborts, one wins)."""
        ...

    def complete(self, upload_id: str, etag: str) -> list[Part]:
        """Mark an upload completed with ``etag``; returns its parts.  Raises ``UploadNotFound``."""
        ...

    def uploads(
        self, bucket: str, *, prefix: str = "", key_marker: str = "", upload_id_marker: str = "", limit: int = 1000
    ) -> list[Upload]:
        """In-progress uploads of a bucket by key then id, after the markers."""
        ...

    def forget_repo(self, repo: str) -> list[Part]:
        """Drop every upload of a repository; returns the parts whose objects the caller deletes."""
        ...

    def record_layout(self, etag: str, sizes: Sequence[int]) -> None:
        """Remember the part sizes of a completed upload by its ETag."""
        ...

    def layout(self, etag: str) -> list[int] | None:
        """The part sizes recorded for ``etag``, or ``None``."""
        ...
