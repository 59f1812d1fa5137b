"""The one errno table of the mount: every lakemount error category, and POSIX-only failures.

Errors are translated here and nowhere else.  Catalog and graveler raise
categories of :mod:`lakemount.errors`; the filesystem core raises
:class:`FsError` for failures that only exist in POSIX terms (ENOTEMPTY,
EXDEV, ENAMETOOLONG...).  :func:`errno_of` maps any exception to the errno a
handler returns; anything it does not know becomes EIO, and the caller logs it.
"""

from __future__ import annotations

import errno as _errno
from typing import Final

from lakemount.errors import (
    AlreadyExists,
    ConcurrentUpdate,
    Conflict,
    Corrupt,
    DirtyBranch,
    InvalidArgument,
    LakeMountError,
    MergeConflict,
    NotFound,
    NothingToCommit,
    PermissionDenied,
    PreconditionFailed,
    ReadOnly,
    Unavailable,
    category_of,
)

ENOATTR: Final = _errno.ENODATA  # Linux spells ENOATTR as ENODATA


class FsError(OSError):
    """A POSIX failure raised by the filesystem core, carrying its errno."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(code, message or _errno.errorcode.get(code, str(code)))


class Absent(FsError):
    """ENOENT for a name the mount answered from what it holds fresh: the kernel may keep it as a negative
    entry for ``timeout`` seconds (0: not at all)."""

    def __init__(self, name: str, timeout: float) -> None:
        super().__init__(_errno.ENOENT, name)
        self.timeout = timeout


# By category: front ends translate categories, never individual classes.
ERRNO_BY_CATEGORY: Final[dict[type[LakeMountError], int]] = {
    NotFound: _errno.ENOENT,
    AlreadyExists: _errno.EEXIST,
    Conflict: _errno.EBUSY,  # merge conflicts, lost compare-and-swap races
    PreconditionFailed: _errno.EBUSY,  # e.g. nothing to commit, uncommitted changes block a merge
    InvalidArgument: _errno.EINVAL,
    ReadOnly: _errno.EROFS,  # tags, commits, ``@``/``$`` views
    PermissionDenied: _errno.EPERM,  # protected branches, a pre-hook's rejection
    Corrupt: _errno.EIO,
    Unavailable: _errno.EIO,
    LakeMountError: _errno.EIO,
}


# A control-file write (``echo msg > .lakefs/commit``) shows the shell user nothing but strerror(errno),
# so each failure class met there has the errno whose text reads right for it, the most specific class
# first; every other error takes its category's errno (docs/SEMANTICS.md, "Control files").
CONTROL_ERRNO: Final[tuple[tuple[type[LakeMountError], int], ...]] = (
    (NothingToCommit, _errno.ENODATA),  # "No data available": nothing staged, or the revert changes nothing
    (MergeConflict, _errno.ECANCELED),  # "Operation canceled": conflicting changes, nothing merged
    (DirtyBranch, _errno.EBUSY),  # "Device or resource busy": the branch's uncommitted changes are in the way
    (ConcurrentUpdate, _errno.EAGAIN),  # "Resource temporarily unavailable": other writers kept winning
)


def control_errno_of(exc: LakeMountError) -> int:
    """The errno of a failed control-file write: :data:`CONTROL_ERRNO`'s for its class, else its category's
    (EINVAL for bad input or an unknown ref, EPERM for a protected branch or a pre-hook's rejection)."""
    for cls, code in CONTROL_ERRNO:
        if isinstance(exc, cls):
            return code
    return ERRNO_BY_CATEGORY[category_of(exc)]


def errno_of(exc: BaseException) -> int | None:
    """The errno for ``exc``, or None if it is unexpected (a bug or an unclassified failure).

    Unexpected exceptions are returned as None so the caller can log them with
    their traceback before answering EIO.
    """
    if isinstance(exc, LakeMountError):
        return ERRNO_BY_CATEGORY[category_of(exc)]
    if isinstance(exc, OSError) and isinstance(exc.errno, int) and exc.errno > 0:
        # FsError, and local-disk failures of write buffers (ENOSPC, EDQUOT...).
        return exc.errno
    errno_attr = getattr(exc, "errno", None)  # pyfuse3.FUSEError, without importing pyfuse3 here
    if type(exc).__name__ == "FUSEError" and isinstance(errno_attr, int):
        return errno_attr
    return None
