"""Multipart uploads as the gateway sees them: S3's limits, and a new upload's record.

Upload state is shared by every gateway process through a ``MultipartStore``
(``lakemount/catalog/s3state.py``; on the ref store's database: ``lakemount/metastore/multipart.py``).
Each part's bytes are an object in the repository's storage namespace under
``_lakefs/multipart/<upload>/``, written whole before the store points at it,
so any process may take any request of an upload.  Completing an upload
assembles the parts into one content-addressed object and stages its entry.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

from lakemount.catalog.s3state import Upload

MIN_PART_SIZE: Final = 5 * 1024 * 1024
MAX_PART_SIZE: Final = 5 * 1024 * 1024 * 1024
MAX_PART_NUMBER: Final = 10_000


def new_upload(
    upload_id: str,
    bucket: str,
    key: str,
    repo: str,
    ref: str,
    path: str,
    owner: str,
    content_type: str,
    metadata: Sequence[tuple[str, str]],
) -> Upload:
    """A new upload's record, initiated now."""
    return Upload(upload_id, bucket, key, repo, ref, path, time.time(), owner, content_type, tuple(metadata))
