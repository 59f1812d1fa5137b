"""API errors: lakeFS's ``{"message": ...}`` body and status codes, one table for every lakemount error.

:class:`ApiError` is raised by request parsing and by operations for
failures that are the API's own (bad JSON, missing authentication); every
:class:`~lakemount.errors.LakeMountError` is translated here, by category,
so the lakeFS SDKs raise their own exception types (``NotFoundException``
for 404, ``ConflictException`` for 409, ...).
"""

from __future__ import annotations

from typing import Final

from lakemount.errors import (
    AlreadyExists,
    Conflict,
    Corrupt,
    DirtyBranch,
    InvalidArgument,
    LakeMountError,
    NotFound,
    NothingToCommit,
    PermissionDenied,
    PreconditionFailed,
    ReadOnly,
    ReadOnlyRef,
    Unavailable,
    category_of,
)
from lakemount.serving.http import Refused


class ApiError(Refused):
    """A response the API gives instead of a result: an HTTP status and a one-line message (lakeFS's body)."""


STATUS_BY_CATEGORY: Final[dict[type[LakeMountError], int]] = {
    NotFound: 404,
    AlreadyExists: 409,
    Conflict: 409,
    PreconditionFailed: 412,
    InvalidArgument: 400,
    ReadOnly: 403,
    PermissionDenied: 403,  # branch protection, a pre-hook's rejection
    Corrupt: 500,
    Unavailable: 503,
    LakeMountError: 500,
}


def status_of(err: LakeMountError) -> int:
    """The HTTP status lakeFS answers for an error of this kind.

    ``NothingToCommit`` is lakeFS's "no changes" and ``DirtyBranch`` its
    "dirty branch" (a merge into uncommitted changes), both a 400; a write to a
    protected branch is a 403 as in lakeFS.  A write through a ref that is
    not a branch (a tag, a commit id, ``main@``: ``ReadOnlyRef``, read-only
    for the mount and the gateway) is a 404, as lakeFS answers a branch it
    does not find under ``/branches/{branch}``.
    """
    if isinstance(err, NothingToCommit | DirtyBranch):  # lakeFS: ErrNoChanges, ErrDirtyBranch
        return 400
    if isinstance(err, ReadOnlyRef):
        return 404
    return STATUS_BY_CATEGORY[category_of(err)]


def translate(err: LakeMountError) -> ApiError:
    """The API error for a lakemount error."""
    if isinstance(err, ReadOnlyRef):
        return ApiError(404, f"branch not found: {err.ref} (a tag or commit is read-only)")
    return ApiError(status_of(err), str(err))


def bad_request(message: str) -> ApiError:
    """A 400 ``ApiError`` carrying ``message`` (for the caller to raise)."""
    return ApiError(400, message)


def not_found(message: str) -> ApiError:
    """A 404 ``ApiError`` carrying ``message`` (for the caller to raise)."""
    return ApiError(404, message)


def unauthorized(message: str = "error authenticating request") -> ApiError:
    """A 401 ``ApiError`` carrying ``message`` (for the caller to raise)."""
    return ApiError(401, message)


def forbidden(message: str = "insufficient permissions") -> ApiError:
    """A 403 ``ApiError`` carrying ``message`` (for the caller to raise)."""
    return ApiError(403, message)
