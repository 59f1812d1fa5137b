"""The Iceberg REST protocol's errors: ``{"error": {"message", "type", "code"}}`` with its exception types.

Lakemount's error categories are translated here and only here (the service
calls :func:`translate` at its edge), so a pyiceberg or Java client raises its
own exception (``NoSuchTableException`` for 404 on a table,
``CommitFailedException`` for 409 on a commit).
"""

from __future__ import annotations

from typing import Any, Final

from lakemount.errors import (
    AlreadyExists,
    Conflict,
    Corrupt,
    InvalidArgument,
    LakeMountError,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    ReadOnly,
    ReadOnlyRef,
    Unavailable,
    category_of,
)


class IcebergError(Exception):
    """An answer in the protocol's error shape: HTTP ``code``, exception ``type`` and a one-line message."""

    def __init__(self, code: int, type_: str, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.type = type_
        self.message = message
        self.headers = headers  # sent with the answer (``Retry-After`` of a login backing off)

    def body(self) -> dict[str, Any]:
        """The JSON body (``IcebergErrorResponse``)."""
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}


def bad_request(message: str) -> IcebergError:
    """A 400 ``BadRequestException`` (for the caller to raise)."""
    return IcebergError(400, "BadRequestException", message)


def no_such_namespace(shown: str) -> IcebergError:
    """A 404 ``NoSuchNamespaceException`` naming the namespace as the client wrote it."""
    return IcebergError(404, "NoSuchNamespaceException", f"Namespace does not exist: {shown}")


def no_such_table(shown: str) -> IcebergError:
    """A 404 ``NoSuchTableException`` naming the table as the client wrote it."""
    return IcebergError(404, "NoSuchTableException", f"Table does not exist: {shown}")


def commit_failed(message: str) -> IcebergError:
    """A 409 ``CommitFailedException``: a requirement did not hold, or another writer committed first."""
    return IcebergError(409, "CommitFailedException", message)


def forbidden(message: str) -> IcebergError:
    """A 403 ``ForbiddenException``."""
    return IcebergError(403, "ForbiddenException", message)


# By category; the service names 404s and 409s more precisely where it knows the resource.
BY_CATEGORY: Final[dict[type[LakeMountError], tuple[int, str]]] = {
    NotFound: (404, "NoSuchNamespaceException"),  # a repository or ref of a namespace
    AlreadyExists: (409, "AlreadyExistsException"),
    Conflict: (409, "CommitFailedException"),
    PreconditionFailed: (409, "CommitFailedException"),
    InvalidArgument: (400, "BadRequestException"),
    ReadOnly: (403, "ForbiddenException"),
    PermissionDenied: (403, "ForbiddenException"),  # branch protection
    Corrupt: (500, "InternalServerError"),
    Unavailable: (503, "ServiceUnavailableException"),
    LakeMountError: (500, "InternalServerError"),
}


def translate(err: LakeMountError) -> IcebergError:
    """The protocol error for a lakemount error (a write to a tag or commit: 403, it is read-only).

    The error's own sentence is the message, with no category word before it (it already says
    "read-only"); a refused write through a tag or commit then says what to do instead.
    """
    code, type_ = BY_CATEGORY[category_of(err)]
    message = str(err)
    if isinstance(err, ReadOnlyRef):
        message = f"{message}: tags and commits load read-only tables; write through a branch"
    return IcebergError(code, type_, message)
