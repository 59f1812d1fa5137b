"""The records front ends name, so that no front end imports graveler.

Entries, commits, repositories, branches, tags, resolved refs, file modes and
the block-store port are defined in graveler (the versioned core owns its
records) and re-exported here; the mount, the gateway, the CLI and the jobs
take them from this module (or from the package, which re-exports them),
together with how a path becomes a key (:func:`encode_path`) and the two
helpers on raw keys and values that bulk readers need (:func:`prefix_end`,
:func:`decode_value`, for
:meth:`Catalog.scan_records <lakemount.catalog.catalog.Catalog.scan_records>`).
Importing this module is cheap: it loads the record definitions only, not the
versioned core's machinery.
"""

from __future__ import annotations

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

__all__ = [
    "DIR_MODE",
    "EMPTY_METARANGE",
    "FILE_MODE",
    "LINK_MODE",
    "MAX_KEY_BYTES",
    "BlockAdapter",
    "Branch",
    "Commit",
    "CommitID",
    "Entry",
    "ObjectInfo",
    "Repository",
    "ResolvedRef",
    "StagingToken",
    "Tag",
    "View",
    "decode_path",
    "decode_value",
    "encode_path",
    "prefix_end",
]

MAX_KEY_BYTES: Final = 16 * 1024  # above PATH_MAX, so any POSIX path from any mount depth fits


def encode_path(path: str) -> bytes:
    """A path as a graveler key; raises ``InvalidArgument`` for empty or oversize paths."""
    if not path:
        raise InvalidArgument("empty path")
    key = path.encode("utf-8", "surrogateescape")
    if len(key) > MAX_KEY_BYTES:
        raise InvalidArgument(f"path longer than {MAX_KEY_BYTES} bytes")
    return key


def decode_path(key: bytes) -> str:
    """The path a graveler key stands for (the inverse of :func:`encode_path`)."""
    return key.decode("utf-8", "surrogateescape")
