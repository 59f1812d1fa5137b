"""The records front ends name, so that no front end imports graveler.

Entries, commits, repositories, branches, tags, resolved refs, file modes and
the block-store port are defined in graveler (the versioned core owns its
records) and re-exported here; the mount, the gateway, the CLI and the jobs
take them from this module, together with the catalog's own
:class:`Difference` and the two helpers on raw keys and values that bulk
readers need (:func:`prefix_end`, :func:`decode_value`, for
:meth:`Catalog.scan_records <lakemount.catalog.catalog.Catalog.scan_records>`).
Importing this module is cheap: it loads the record definitions only, not the
versioned core's machinery.
"""

from __future__ import annotations

import re
import stat
import time
from typing import Final

from lakemount.errors import InvalidArgument
from lakemount.graveler.model import (
    DIR_MODE,
    EMPTY_METARANGE,
    FILE_MODE,
    LINK_MODE,
    Branch,
    Commit,
    CommitID,
    Entry,
    Repository,
    StagingToken,
    Tag,
    decode_value,
    prefix_end,
)
from lakemount.graveler.ports import BlockAdapter, ObjectInfo
from lakemount.graveler.refexpr import ResolvedRef, View
from lakemount.records import record

__all__ = [
    "DIFF_KINDS",
    "DIR_MODE",
    "HEADER_CONTROL",
    "HEADER_NAME",
    "EMPTY_METARANGE",
    "FILE_MODE",
    "LINK_MODE",
    "STORED_PREFIX",
    "BlockAdapter",
    "Branch",
    "Commit",
    "CommitID",
    "Difference",
    "Entry",
    "ObjectInfo",
    "Repository",
    "ResolvedRef",
    "StagingToken",
    "Tag",
    "View",
    "decode_value",
    "prefix_end",
    "upload_entry",
    "check_header_safe",
    "DIRECTORY_CONTENT_TYPE",
    "EMPTY_ETAG",
    "SYMLINK_CONTENT_TYPE",
    "SYMLINK_TARGET_KEY",
    "ObjectView",
    "has_data",
    "object_view",
]

DIFF_KINDS = ("added", "removed", "changed", "conflict")

STORED_PREFIX: Final = "s3:"
"""Metadata names under this prefix are standard headers stored with an object
(``s3:cache-control``, ...), not user metadata: a colon cannot occur in an HTTP
header name, so they never collide with ``x-amz-meta-*`` names."""


# HTTP's token (a header name) and the control characters a header value may not hold (HTAB aside);
# the ASGI adapter applies the same two rules to every response header.
HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
HEADER_CONTROL: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_header_safe(content_type: str, metadata: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> None:
    """Refuse what would be sent back as a broken header: a content type or metadata value holding a
    control character (CR, LF, NUL, ...), a metadata name that is not an HTTP header name; raises ``InvalidArgument``."""
    if HEADER_CONTROL.search(content_type):
        raise InvalidArgument(f"content type holds a control character: {content_type!r}")
    for name, value in metadata:
        bare = name[len(STORED_PREFIX):] if name.startswith(STORED_PREFIX) else name
        if not HEADER_NAME.fullmatch(bare):
            raise InvalidArgument(f"metadata name is not an HTTP header name: {name!r}")
        if HEADER_CONTROL.search(value):
            raise InvalidArgument(f"metadata {name!r} holds a control character")


def upload_entry(
    address: str,
    size: int,
    etag: str,
    path: str,
    content_type: str,
    metadata: list[tuple[str, str]] | tuple[tuple[str, str], ...],
) -> Entry:
    """The entry an upload stages: a directory marker for an empty ``.../`` key, else a file.

    Raises ``InvalidArgument`` for a content type or metadata that cannot go back out as headers (:func:`check_header_safe`)."""
    check_header_safe(content_type, metadata)
    mode = DIR_MODE if path.endswith("/") and size == 0 else FILE_MODE
    return Entry(address, size, etag, time.time_ns(), content_type, tuple(sorted(metadata)), mode)


EMPTY_ETAG: Final = "d41d8cd98f00b204e9800998ecf8427e"  # MD5 of no bytes: S3's ETag of an empty object
# What a directory marker is, as s3fs, Hadoop and Cyberduck mark theirs.
DIRECTORY_CONTENT_TYPE: Final = "application/x-directory"
# What a symlink is, as OpenStack Swift marks its symlink objects.
SYMLINK_CONTENT_TYPE: Final = "application/symlink"
# User metadata (x-amz-meta-*, the API's metadata) that carries a symlink's target, percent-encoded (RFC 3986)
# so any target is a valid header value; added to the view, never stored (so it is no user.* xattr).
SYMLINK_TARGET_KEY: Final = "lakemount-symlink-target"


@record(frozen=True, slots=True)
class ObjectView:
    """An entry as every front end shows it as an object: S3 HEAD/GET/listings, the API's stat, GET,
    listings and diffs, the CLI's ``fs stat`` (the mount shows the entry itself).

    ``content_type`` is "" when the entry has none (each front end has its default).
    ``has_data``: there are bytes to read at the entry's address; when False
    (directory markers, symlinks, other special files) the object is 0 bytes
    with the empty ETag and no physical address, whatever the entry records
    (a symlink made by the mount records its target's length as its size).
    """

    size: int
    etag: str
    content_type: str
    metadata: tuple[tuple[str, str], ...]
    has_data: bool


def has_data(entry: Entry) -> bool:
    """Whether ``entry`` is a regular file, whose address holds bytes (:attr:`ObjectView.has_data`, without building
    the view: every data read asks this)."""
    return stat.S_IFMT(entry.mode) in (0, stat.S_IFREG)


def object_view(entry: Entry) -> ObjectView:
    """How ``entry`` looks as an object (see :class:`ObjectView`)."""
    fmt = stat.S_IFMT(entry.mode)
    if has_data(entry):
        return ObjectView(entry.size, entry.etag, entry.content_type, entry.metadata, True)
    if fmt == stat.S_IFDIR:
        content_type = entry.content_type or DIRECTORY_CONTENT_TYPE
        return ObjectView(0, EMPTY_ETAG, content_type, entry.metadata, False)
    if fmt == stat.S_IFLNK:
        from urllib.parse import quote  # symlinks only: urllib.parse (and ipaddress under it) is ~11 M instructions

        target = quote(entry.target, safe="/:@!$&'()*+,;=-._~")
        meta = tuple(sorted((*entry.metadata, (SYMLINK_TARGET_KEY, target))))
        return ObjectView(0, EMPTY_ETAG, SYMLINK_CONTENT_TYPE, meta, False)
    return ObjectView(0, EMPTY_ETAG, entry.content_type, entry.metadata, False)


@record(frozen=True, slots=True)
class Difference:
    """One path that differs: ``kind`` is one of :data:`DIFF_KINDS`; ``left``/``right`` the entries on each side.

    ``left`` is None for an added path, ``right`` None for a removed one; a
    conflict (three-way diff only) has the left side's and the source's entries.
    ``staged`` marks a branch's uncommitted change (:meth:`size` reads it).
    """

    key: bytes
    kind: str
    left: Entry | None
    right: Entry | None
    staged: bool = False

    @property
    def size(self) -> int:
        """The size a diff reports, as lakeFS does: the new entry's (as an object: a symlink or marker is 0
        bytes); for a removal between two commits the removed entry's, and 0 for a staged removal (a tombstone carries no size in lakeFS's uncommitted diff)."""
        if self.right is not None:
            return object_view(self.right).size
        if self.left is None or self.staged:
            return 0
        return object_view(self.left).size

    @property
    def path(self) -> str:
        return self.key.decode("utf-8", "surrogateescape")
