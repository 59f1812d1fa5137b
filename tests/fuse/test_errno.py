"""The errno table: every error the catalog can raise maps to an errno (one table, in ``fuse/errno.py``)."""

from __future__ import annotations

import errno
import inspect

import lakemount.errors as errors_module
from lakemount.errors import CATEGORIES, LakeMountError
from lakemount.fuse.errno import CONTROL_ERRNO, ERRNO_BY_CATEGORY, FsError, control_errno_of, errno_of


def test_every_category_has_an_errno() -> None:
    for category in (*CATEGORIES, LakeMountError):
        assert category in ERRNO_BY_CATEGORY


def test_every_error_class_maps() -> None:
    classes = [c for _n, c in inspect.getmembers(errors_module, inspect.isclass) if issubclass(c, LakeMountError)]
    assert len(classes) > 10
    for cls in classes:
        exc = cls.__new__(cls)
        Exception.__init__(exc, "x")
        assert errno_of(exc) in set(ERRNO_BY_CATEGORY.values()), cls


def test_posix_and_unknown_errors() -> None:
    assert errno_of(FsError(errno.ENOTEMPTY)) == errno.ENOTEMPTY
    assert errno_of(OSError(errno.ENOSPC, "disk full")) == errno.ENOSPC
    assert errno_of(ValueError("bug")) is None
    assert errno_of(errors_module.MergeConflict(["a"])) == errno.EBUSY
    assert errno_of(errors_module.ReadOnlyRef("v1")) == errno.EROFS
    assert errno_of(errors_module.RefNotFound("r", "x")) == errno.ENOENT
    assert errno_of(errors_module.Unavailable("down")) == errno.EIO


def test_control_failures_have_their_own_errnos_and_the_rest_their_categorys() -> None:
    assert control_errno_of(errors_module.NothingToCommit("r/main")) == errno.ENODATA
    assert control_errno_of(errors_module.NothingToMerge("dev", "r/main")) == errno.ENODATA
    assert control_errno_of(errors_module.MergeConflict(["a"])) == errno.ECANCELED
    assert control_errno_of(errors_module.DirtyBranch("merge", "r/main")) == errno.EBUSY
    assert control_errno_of(errors_module.ConcurrentUpdate("lost")) == errno.EAGAIN
    assert control_errno_of(errors_module.ProtectedBranch("r", "main")) == errno.EPERM
    assert control_errno_of(errors_module.InvalidArgument("bad")) == errno.EINVAL
    codes = [code for _cls, code in CONTROL_ERRNO]
    assert len(set(codes)) == len(codes), "two failure classes would read the same in a shell"
